//! cargo-fuzz target: the ELF reader `tandem run` uses to see which MPI
//! library a program needs, on any bytes as the file.
#![no_main]

use std::os::unix::fs::FileExt;

#[allow(dead_code)]
#[path = "../../crates/tandem-cli/src/launcher/foreign_mpi.rs"]
mod foreign_mpi;

/// Bytes read as a file.
struct Bytes<'a>(&'a [u8]);

impl FileExt for Bytes<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let n = buf.len().min(self.0.len() - start);
        buf[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::PermissionDenied.into())
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = foreign_mpi::needed_libraries(&Bytes(data));
});

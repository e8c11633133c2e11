//! Programs built against another MPI library: started by `tandem run`,
//! each process would find no launcher of its own library and run as a
//! job of one rank, so N copies of the program would run side by side and
//! exit 0. The program's ELF file names the libraries it needs; one of
//! another MPI library, without Tandem's, is refused before anything
//! starts.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Another MPI library `needed` names, if it names one and not Tandem's
/// (`libmpi_abi`, the standard ABI, which any of them may provide).
pub fn foreign_library(needed: &[String]) -> Option<(&'static str, &str)> {
    if needed.iter().any(|n| n.starts_with("libmpi_abi.so")) {
        return None;
    }
    needed.iter().find_map(|n| {
        let name = n.as_str();
        let library = if name.starts_with("libmpi.so.40") || name.starts_with("libmpi_mpifh.so") {
            "Open MPI"
        } else if name.starts_with("libmpi.so.12")
            || name.starts_with("libmpich.so")
            || name.starts_with("libmpifort.so")
        {
            "MPICH (or a library of its ABI: Intel MPI, MVAPICH, Cray MPICH)"
        } else if name.starts_with("libmpi.so") || name.starts_with("libmpi_cxx.so") {
            "another MPI library"
        } else {
            return None;
        };
        Some((library, name))
    })
}

/// An error for `program` (as `tandem run` was given it) when it is an ELF
/// file built against another MPI library; `None` when it is not, or
/// cannot be read (the launch then says why, if it fails).
pub fn check(program: &std::ffi::OsStr) -> Option<String> {
    let path = locate(Path::new(program))?;
    let needed = needed_libraries(&File::open(&path).ok()?)?;
    let (library, name) = foreign_library(&needed)?;
    Some(format!(
        "{} was built against {library} (it needs {name}), not Tandem: started by \
         `tandem run`, each of its processes would run alone as a job of one rank. \
         Rebuild it with `tandem cc` (or Tandem's mpicc), or start it with that library's own mpirun",
        program.to_string_lossy()
    ))
}

/// Where `program` is, as a rank would find it: a path with a '/' as it
/// is, else the first match on `PATH`.
fn locate(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 || program.is_absolute() {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The `DT_NEEDED` entries of a 64-bit little-endian ELF file; `None` for
/// anything else (scripts, other formats, a malformed file).
pub fn needed_libraries(file: &impl FileExt) -> Option<Vec<String>> {
    let read = |offset: u64, len: usize| -> Option<Vec<u8>> {
        // Bounds any one read: a header can claim anything.
        if len > 1 << 24 {
            return None;
        }
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    };
    parse_needed(&read(0, 64)?, read)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;

/// [`needed_libraries`] on the ELF header `header` and a reader of the rest.
fn parse_needed(
    header: &[u8],
    read: impl Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<Vec<String>> {
    // 64-bit, little-endian.
    if header.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (phoff, phentsize, phnum) = (
        u64_at(header, 0x20)?,
        u16_at(header, 0x36)? as usize,
        u16_at(header, 0x38)? as usize,
    );
    if phentsize < 56 {
        return None;
    }
    let table = read(phoff, phentsize.checked_mul(phnum)?)?;
    // (type, file offset, address, size in the file)
    let segments: Vec<(u32, u64, u64, u64)> = table
        .chunks_exact(phentsize)
        .filter_map(|p| Some((u32_at(p, 0)?, u64_at(p, 8)?, u64_at(p, 16)?, u64_at(p, 32)?)))
        .collect();
    let &(_, dyn_off, _, dyn_size) = segments.iter().find(|s| s.0 == PT_DYNAMIC)?;
    let dynamic = read(dyn_off, usize::try_from(dyn_size).ok()?)?;
    let (mut needed, mut strtab, mut strsz) = (Vec::new(), None, None);
    for entry in dynamic.chunks_exact(16) {
        let (tag, value) = (u64_at(entry, 0)?, u64_at(entry, 8)?);
        match tag {
            DT_NULL => break,
            DT_NEEDED => needed.push(value),
            DT_STRTAB => strtab = Some(value),
            DT_STRSZ => strsz = Some(value),
            _ => {}
        }
    }
    // The string table's address, as a file offset.
    let (addr, size) = (strtab?, strsz?);
    let &(_, off, vaddr, _) = segments
        .iter()
        .find(|s| s.0 == PT_LOAD && s.2 <= addr && addr - s.2 < s.3)?;
    let strings = read(addr - vaddr + off, usize::try_from(size).ok()?)?;
    needed
        .into_iter()
        .map(|at| {
            let rest = strings.get(usize::try_from(at).ok()?..)?;
            let end = rest.iter().position(|&b| b == 0)?;
            String::from_utf8(rest[..end].to_vec()).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_needs_the_c_library() {
        let me = std::env::current_exe().unwrap();
        let needed = needed_libraries(&File::open(me).unwrap()).expect("an ELF file");
        assert!(
            needed.iter().any(|n| n.starts_with("libc.so")),
            "{needed:?}"
        );
    }

    #[test]
    fn scripts_and_short_files_are_not_elf() {
        assert_eq!(parse_needed(b"#!/bin/sh\n", |_, _| None), None);
        assert_eq!(parse_needed(b"\x7fELF", |_, _| None), None);
    }

    #[test]
    fn other_mpi_libraries_are_named() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let open_mpi = names(&["libmpi.so.40", "libc.so.6"]);
        assert_eq!(foreign_library(&open_mpi).unwrap().0, "Open MPI");
        let mpich = names(&["libmpi.so.12"]);
        assert!(foreign_library(&mpich).unwrap().0.starts_with("MPICH"));
        assert_eq!(
            foreign_library(&names(&["libmpi_abi.so.1", "libc.so.6"])),
            None
        );
        // A standard-ABI program that also needs a helper library of another MPI.
        assert_eq!(
            foreign_library(&names(&["libmpi_abi.so.1", "libmpi.so.40"])),
            None
        );
        assert_eq!(foreign_library(&names(&["libc.so.6", "libm.so.6"])), None);
    }

    proptest::proptest! {
        /// Any bytes: an answer or `None`, never a panic or a huge read.
        #[test]
        fn prop_elf_parsing_is_total(mut bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..4096)) {
            if bytes.len() >= 6 {
                bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
            }
            let read = |off: u64, len: usize| -> Option<Vec<u8>> {
                let start = usize::try_from(off).ok()?;
                bytes.get(start..start.checked_add(len)?).map(<[u8]>::to_vec)
            };
            let header = bytes.get(..64).unwrap_or(&bytes).to_vec();
            let _ = parse_needed(&header, read);
        }
    }
}

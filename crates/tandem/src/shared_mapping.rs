//! A read-write shared mapping of a file (a memfd), unmapped when dropped.
//! Not a layer of its own: a system-call wrapper that the shared-memory
//! transport (its segment), RWAPI (the heaps peers write into) and MPI
//! shared-memory windows share, with the two ways such files are made and
//! reached: [`memfd`] makes one (nothing is left under /dev/shm, whatever
//! happens to the process), [`SharedMapping::of_process`] maps one that
//! another process of this host holds, through `/proc/<pid>/fd/<fd>`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A new memory file of `len` bytes (sparse: it reads as zeroes and takes
/// memory only where written), closed on exec.
pub fn memfd(name: &CStr, len: usize) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall on our descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// `len` bytes of a file mapped `MAP_SHARED`, page-aligned.
pub struct SharedMapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by its value and usable
// from any thread (the library state moves between threads under its lock);
// what is stored in it is synchronised by its users (atomics and protocols).
unsafe impl Send for SharedMapping {}

impl SharedMapping {
    /// Maps the first `len` bytes of `fd`.
    pub fn new(fd: RawFd, len: usize) -> io::Result<SharedMapping> {
        SharedMapping::new_at(fd, 0, len)
    }

    /// Maps file `fd` of process `pid` (of this host), which must be `len`
    /// bytes long, through `/proc/<pid>/fd/<fd>`. The kernel allows this
    /// to a process that may inspect `pid` (same user, not made
    /// undumpable); the descriptor opened here is closed again at once,
    /// the mapping keeps the file alive.
    pub fn of_process(pid: u32, fd: RawFd, len: usize) -> io::Result<SharedMapping> {
        let file = open_of_process(pid, fd, len)?;
        SharedMapping::new(file.as_raw_fd(), len)
    }

    /// Maps `len` bytes of `fd` from `offset` (a multiple of the page size).
    pub fn new_at(fd: RawFd, offset: u64, len: usize) -> io::Result<SharedMapping> {
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh mapping of a descriptor the caller holds; the
        // kernel picks the address; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMapping {
            base: p.cast(),
            len,
        })
    }

    /// The first byte (page-aligned).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// How many bytes are mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never, for a mapping that exists).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Allocates and maps, in one call, the pages of bytes `off..off+len`
    /// (clipped to the mapping) that are not yet: a region that will be
    /// used page by page soon, such as a ring, then costs no page fault per
    /// page on its first pass (on a VM, several microseconds each, for the
    /// first messages a pair exchanges). Best effort: kernels before 5.14
    /// refuse the request and the pages fault in as they are used.
    pub fn populate(&self, off: usize, len: usize) {
        // madvise wants the start aligned to the page size.
        let page = page_size();
        let start = off / page * page;
        let end = (off.saturating_add(len)).min(self.len);
        if start >= end {
            return;
        }
        // SAFETY: the range lies inside this mapping (clipped above) and
        // starts on a page boundary; MADV_POPULATE_WRITE only faults pages
        // in (as writes would, without changing their contents).
        unsafe {
            libc::madvise(
                self.base.add(start).cast(),
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped; references into the
        // mapping borrow `self`, so none outlives it.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The system's page size (4 KiB unless the kernel says otherwise).
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant; no memory is passed.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

/// Opens file `fd` of process `pid` (of this host) through
/// `/proc/<pid>/fd/<fd>`, checking that it is `len` bytes long (a
/// descriptor number reused for another file would not be). The kernel
/// allows this to a process that may inspect `pid` (same user, not made
/// undumpable).
pub fn open_of_process(pid: u32, fd: RawFd, len: usize) -> io::Result<OwnedFd> {
    let path = CString::new(format!("/proc/{pid}/fd/{fd}"))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid C string; the result is checked.
    let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let file = unsafe { OwnedFd::from_raw_fd(raw) };
    // The file must be what its owner said: its length (a descriptor
    // number reused for another file would not be).
    // SAFETY: `stat` is plain integers, for which all zeroes is a value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and out-parameter.
    if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if u64::try_from(st.st_size).ok() != Some(len as u64) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is {} bytes long, not {len}",
                path.to_string_lossy(),
                st.st_size
            ),
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of the mapping's pages are resident in this process's page
    /// tables, by `mincore`.
    fn resident(m: &SharedMapping) -> Vec<bool> {
        let pages = m.len().div_ceil(4096);
        let mut vec = vec![0u8; pages];
        // SAFETY: the mapping is page-aligned and `len` bytes long; `vec`
        // has one byte per page.
        let r = unsafe { libc::mincore(m.base().cast(), m.len(), vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
        vec.iter().map(|b| b & 1 != 0).collect()
    }

    /// Whether the running kernel is at least `major.minor` (older ones
    /// refuse MADV_POPULATE_WRITE, which `populate` then leaves undone).
    fn kernel_at_least(major: u32, minor: u32) -> bool {
        // SAFETY: `uname` fills the zeroed struct it is given.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-parameter.
        assert_eq!(unsafe { libc::uname(&mut u) }, 0);
        // SAFETY: uname NUL-terminates the release string.
        let release = unsafe { CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy();
        let mut parts = release.split(|c: char| !c.is_ascii_digit());
        let mut next = || {
            parts
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0)
        };
        (next(), next()) >= (major, minor)
    }

    #[test]
    fn populate_faults_in_the_range_it_is_given_and_keeps_the_contents() {
        let len = 8 * 4096;
        let fd = memfd(c"populate-test", len).unwrap();
        let writer = SharedMapping::new(fd.as_raw_fd(), len).unwrap();
        // SAFETY: inside the mapping, which nobody else uses.
        unsafe { *writer.base().add(5 * 4096 + 7) = 42 };
        let m = SharedMapping::new(fd.as_raw_fd(), len).unwrap();
        // `mincore` on a file mapping reports the file's pages in memory:
        // page 5 is (written above), pages never written are not.
        let before = resident(&m);
        assert!(before[5] && !before[2] && !before[3]);
        // Bytes 2*4096+100 .. 5*4096+8: pages 2 to 5, from page 2's start.
        m.populate(2 * 4096 + 100, 3 * 4096 - 92);
        let r = resident(&m);
        if kernel_at_least(5, 14) {
            assert_eq!(r, [false, false, true, true, true, true, false, false]);
        }
        // SAFETY: inside the mapping; the writer's byte must be there.
        assert_eq!(unsafe { *m.base().add(5 * 4096 + 7) }, 42);
        // A range past the end is clipped, not an error.
        m.populate(7 * 4096, 1 << 30);
        m.populate(len, 4096);
    }
}

//! A read-write shared mapping of a file (a memfd), unmapped when dropped.
//! Not a layer of its own: a system-call wrapper that the shared-memory
//! transport (its segment) and RWAPI (the heaps peers write into) share.

use std::io;
use std::os::fd::RawFd;

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
        // SAFETY: a fresh mapping of a descriptor the caller holds; the
        // kernel picks the address; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
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
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped; references into the
        // mapping borrow `self`, so none outlives it.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

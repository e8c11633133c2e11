//! `malloc` and its relatives, exported so that the program's large
//! allocations can live in the shared heap (`tandem::shm_heap`): there a
//! peer on the host copies a large message with `memcpy` instead of the
//! kernel's cross-process copy. Everything else goes to the C library's
//! allocator (its `__libc_*` entry points, which glibc exports for
//! exactly this: replacing `malloc` while keeping its implementation).
//! Defining these is the C library's documented way to replace the
//! allocator ("Replacing malloc" in the glibc manual): `malloc`, `free`,
//! `calloc`, `realloc`, and the aligned forms and `malloc_usable_size`.
//!
//! Small requests cost one comparison more than calling the C library
//! directly, and `free` two loads and a comparison.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use tandem::shm_heap;

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
}

/// `size` bytes aligned to `align` (all zero if `zeroed`) from the heap
/// when large enough.
#[inline(always)]
fn from_heap(size: usize, align: usize, zeroed: bool) -> Option<*mut c_void> {
    if size < shm_heap::threshold() {
        return None;
    }
    shm_heap::alloc(size, align, zeroed).map(|p| p.cast())
}

/// # Safety
/// The C contract of `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    if let Some(p) = from_heap(size, 16, false) {
        return p;
    }
    // SAFETY: forwarded as called.
    unsafe { __libc_malloc(size) }
}

/// # Safety
/// The C contract of `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if shm_heap::owns(p.cast()) {
        shm_heap::free(p.cast());
        return;
    }
    // SAFETY: not the heap's, so the C library's (or null).
    unsafe { __libc_free(p) }
}

/// # Safety
/// The C contract of `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    if let Some(total) = n.checked_mul(size) {
        if let Some(p) = from_heap(total, 16, true) {
            return p;
        }
    }
    // SAFETY: forwarded as called (the C library checks the overflow).
    unsafe { __libc_calloc(n, size) }
}

/// # Safety
/// The C contract of `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let ours = shm_heap::owns(p.cast());
    if !ours && size < shm_heap::threshold() {
        // SAFETY: forwarded as called.
        return unsafe { __libc_realloc(p, size) };
    }
    if p.is_null() {
        // SAFETY: realloc(NULL, n) is malloc(n).
        return unsafe { malloc(size) };
    }
    let old = if ours {
        shm_heap::usable_size(p.cast())
    } else {
        // SAFETY: a live block of the C library's.
        unsafe { malloc_usable_size(p) }
    };
    if ours && size == 0 {
        shm_heap::free(p.cast());
        return std::ptr::null_mut();
    }
    // Shrinking by up to half keeps the block; by more, it moves, so
    // that the memory past the new end goes back. Growing stays in place
    // where the range after the block is free.
    if ours && size <= old && size >= old / 2 && size >= shm_heap::threshold() {
        return p;
    }
    if ours && size > old && shm_heap::grow(p.cast(), size) {
        return p;
    }
    // SAFETY: a fresh block of at least `size` bytes (or null).
    let q = unsafe { malloc(size) };
    if q.is_null() {
        return q;
    }
    // SAFETY: both blocks hold at least the bytes copied; they are
    // distinct allocations; then the old one goes.
    unsafe {
        std::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size));
        free(p);
    }
    q
}

/// # Safety
/// The C contract of `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    // SAFETY: alignment checked; forwarded.
    let p = unsafe { memalign(align, size) };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's out-pointer.
    unsafe { *out = p };
    0
}

/// # Safety
/// The C contract of `memalign`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    if align.is_power_of_two() {
        if let Some(p) = from_heap(size, align, false) {
            return p;
        }
    }
    // SAFETY: forwarded as called.
    unsafe { __libc_memalign(align, size) }
}

/// # Safety
/// The C contract of `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    // C11 and glibc from 2.38 refuse an alignment that is not a power of
    // two (memalign rounds it up).
    if !align.is_power_of_two() {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return std::ptr::null_mut();
    }
    // SAFETY: as memalign.
    unsafe { memalign(align, size) }
}

/// # Safety
/// The C contract of `valloc`.
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    // SAFETY: as memalign.
    unsafe { memalign(4096, size) }
}

/// # Safety
/// The C contract of `pvalloc`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let Some(size) = size.checked_add(4095).map(|s| (s & !4095).max(4096)) else {
        return std::ptr::null_mut();
    };
    // SAFETY: as memalign.
    unsafe { memalign(4096, size) }
}

/// The C library's `malloc_usable_size`, found once with `dlsym`.
static LIBC_USABLE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// # Safety
/// The C contract of `malloc_usable_size`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if shm_heap::owns(p.cast()) {
        return shm_heap::usable_size(p.cast());
    }
    let mut f = LIBC_USABLE_SIZE.load(Ordering::Relaxed);
    if f == 0 {
        // SAFETY: a valid C string; RTLD_NEXT finds the C library's own
        // definition, the next after this one.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) } as usize;
        if f == 0 {
            // A live block's size unknown: realloc could not keep its
            // contents, so nothing may go on.
            const WHY: &[u8] = b"tandem: the C library's malloc_usable_size is missing\n";
            // SAFETY: a valid buffer to stderr; abort has no preconditions.
            unsafe {
                libc::write(2, WHY.as_ptr().cast(), WHY.len());
                libc::abort();
            }
        }
        LIBC_USABLE_SIZE.store(f, Ordering::Relaxed);
    }
    // SAFETY: the C library's malloc_usable_size, of that type.
    let f: unsafe extern "C" fn(*mut c_void) -> usize = unsafe { std::mem::transmute(f) };
    // SAFETY: a live block of the C library's.
    unsafe { f(p) }
}

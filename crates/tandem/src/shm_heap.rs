//! Large allocations that the other ranks of this host can map.
//!
//! The kernel's cross-process copy (`process_vm_readv`/`writev`) moves a
//! large message at about half of what one core's `memcpy` reaches: it
//! walks and pins the peer's pages 4 KiB at a time. A rank that can map
//! the sender's pages copies them with a plain `memcpy` instead. So, in a
//! job with more than one rank on the host, allocations of at least
//! `shm_heap_min` bytes (`malloc` and its relatives, which the C library
//! exports to the program: see the MPI layer's malloc.rs) are placed
//! (unless `shm_heap=0`) in one memory file per process, which peers map
//! through `/proc/<pid>/fd/<fd>` (the same permission as the cross-process
//! copy).
//! Nothing else changes for the program: the memory is private to the
//! process in every respect but that its peers may read and write the
//! pages of a message they were told about.
//!
//! The file is sparse and as large as the address range reserved for it;
//! an allocation maps its pages at `base + offset`, so a peer turns an
//! address it was given into an offset in the file with one subtraction.
//! A freed block is kept, pages and all, for a later allocation of about
//! its size (up to [`CACHE_MAX`] bytes of them): a page touched for the
//! first time costs microseconds here, and programs that allocate and
//! free a buffer per message would otherwise pay that every time (the C
//! library keeps freed memory for the same reason). Beyond that, freeing
//! punches the pages out of the file (memory goes back to the system, and
//! every peer's view of them is dropped) and returns the range to the
//! reservation. `realloc` grows a block where it lies when the range after
//! it is free (see [`grow`]).
//!
//! A child made by `fork` would share the pages with its parent (they are
//! a shared mapping): in the child every block is replaced by a private
//! copy at the same address, and the heap takes no more allocations.
//!
//! This is a system-call layer beside [`crate::shared_mapping`], used by
//! the shared-memory transport (which publishes where the heap is and
//! maps peers' heaps).

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use crate::free_ranges::FreeRanges;

/// The system's page size, which the file's offsets mapped at fixed
/// addresses must be multiples of (4 KiB here, 16 or 64 KiB on some ARM
/// and POWER kernels).
fn page() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(crate::shared_mapping::page_size)
}

/// The least `shm_heap_min` may be: allocations below it never look here.
pub const FLOOR: usize = 64 * 1024;

/// At most this many bytes of freed blocks are kept for reuse.
pub const CACHE_MAX: usize = 64 << 20;

/// Where the reserved range starts (0: no heap in this process).
static BASE: AtomicUsize = AtomicUsize::new(0);
/// The reserved range's length, and the file's.
static LEN: AtomicUsize = AtomicUsize::new(0);
/// The memory file (-1: none).
static FD: AtomicI32 = AtomicI32::new(-1);
/// Allocations of at least this many bytes come here: [`FLOOR`] until the
/// heap is decided on, `usize::MAX` when it is off (or after a fork).
static MIN: AtomicUsize = AtomicUsize::new(FLOOR);

/// Which ranges of the file are in use and which are free, under a
/// process-wide mutex (a pthread one, so that a fork handler can hold it
/// across the fork and release it on both sides).
struct Blocks {
    decided: bool,
    /// After a fork, in the child: blocks are private copies now.
    forked: bool,
    /// The file's free ranges.
    free: FreeRanges,
    /// Offset -> length of allocated blocks.
    used: BTreeMap<usize, usize>,
    /// Freed blocks kept mapped for reuse, oldest first, and their bytes.
    cached: VecDeque<(usize, usize)>,
    cached_bytes: usize,
}

struct Locked {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    blocks: UnsafeCell<Blocks>,
}

// SAFETY: `blocks` is only touched with `mutex` held (see `Guard`).
unsafe impl Sync for Locked {}

static LOCKED: Locked = Locked {
    mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
    blocks: UnsafeCell::new(Blocks {
        decided: false,
        forked: false,
        free: FreeRanges::new(),
        used: BTreeMap::new(),
        cached: VecDeque::new(),
        cached_bytes: 0,
    }),
};

/// Holding the heap's mutex.
struct Guard;

impl Guard {
    fn lock() -> Guard {
        // SAFETY: a statically initialised mutex, never moved.
        unsafe { libc::pthread_mutex_lock(LOCKED.mutex.get()) };
        Guard
    }

    fn blocks(&mut self) -> &mut Blocks {
        // SAFETY: the mutex is held for as long as `self` lives, and the
        // borrow is tied to it.
        unsafe { &mut *LOCKED.blocks.get() }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // SAFETY: locked by this thread in `Guard::lock`.
        unsafe { libc::pthread_mutex_unlock(LOCKED.mutex.get()) };
    }
}

/// Allocations of at least this many bytes may come from the heap (the
/// caller then asks [`alloc`]; smaller ones never do).
#[inline(always)]
pub fn threshold() -> usize {
    MIN.load(Ordering::Relaxed)
}

/// Whether `p` lies in the heap's range (then [`free`] and
/// [`usable_size`] know it).
#[inline(always)]
pub fn owns(p: *const u8) -> bool {
    let base = BASE.load(Ordering::Relaxed);
    base != 0 && (p as usize).wrapping_sub(base) < LEN.load(Ordering::Relaxed)
}

/// Where this process's heap is, for its peers: the file's descriptor,
/// the range's start and length. `None` when there is none (a single
/// rank on the host, `shm_heap=0`, no room, or after a fork).
pub fn published() -> Option<(i32, u64, u64)> {
    let mut g = Guard::lock();
    decide(g.blocks());
    let base = BASE.load(Ordering::Relaxed);
    (base != 0 && !g.blocks().forked).then(|| {
        (
            FD.load(Ordering::Relaxed),
            base as u64,
            LEN.load(Ordering::Relaxed) as u64,
        )
    })
}

/// `size` bytes aligned to `align` (a power of two) from the heap, all
/// zero if `zeroed`, or `None` (the caller then asks the C library).
pub fn alloc(size: usize, align: usize, zeroed: bool) -> Option<*mut u8> {
    let mut g = Guard::lock();
    let b = g.blocks();
    decide(b);
    if b.forked || size < MIN.load(Ordering::Relaxed) {
        return None;
    }
    let (base, fd) = (BASE.load(Ordering::Relaxed), FD.load(Ordering::Relaxed));
    let len = whole_pages(size)?;
    let align = align.max(page());
    // A kept block of about this size (at most a quarter more) first.
    if let Some(i) = b.cached.iter().position(|&(off, clen)| {
        clen >= len && clen - len <= len / 4 && (base + off).is_multiple_of(align)
    }) {
        let (off, clen) = b.cached.remove(i)?;
        b.cached_bytes -= clen;
        b.used.insert(off, clen);
        let p = (base + off) as *mut u8;
        if zeroed {
            // SAFETY: the whole block is ours and mapped read-write.
            unsafe { std::ptr::write_bytes(p, 0, size) };
        }
        return Some(p);
    }
    let start = b.free.carve(base, align, len)?;
    if !map_file_at(base, fd, start, len) {
        b.free.give_back(start, len);
        return None;
    }
    b.used.insert(start, len);
    Some((base + start) as *mut u8)
}

/// `size` rounded up to whole pages (`None` past the address space).
fn whole_pages(size: usize) -> Option<usize> {
    let page = page();
    Some(size.checked_add(page - 1)? & !(page - 1))
}

/// Maps bytes `off..off + len` of the file at `base + off`, over the
/// reservation there; whether the kernel did.
fn map_file_at(base: usize, fd: i32, off: usize, len: usize) -> bool {
    // SAFETY: the caller gives a range of our reservation that no block
    // uses; MAP_FIXED replaces its inaccessible pages with the file's.
    let p = unsafe {
        libc::mmap(
            (base + off) as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            off as libc::off_t,
        )
    };
    p != libc::MAP_FAILED
}

/// Frees a block [`owns`] says is the heap's.
pub fn free(p: *mut u8) {
    let mut g = Guard::lock();
    let b = g.blocks();
    let base = BASE.load(Ordering::Relaxed);
    let off = p as usize - base;
    let Some(len) = b.used.remove(&off) else {
        fatal(b"tandem: free() of an address inside the shared heap that is not an allocation\n");
    };
    if b.forked {
        // SAFETY: the block's own private copy (see `after_fork_in_child`):
        // its range goes back to the reservation, so that no other mapping
        // lands inside the heap's range.
        unsafe { reserve(p.cast(), len, libc::MAP_FIXED) };
        return;
    }
    b.cached.push_back((off, len));
    b.cached_bytes += len;
    while b.cached_bytes > CACHE_MAX {
        let Some((off, len)) = b.cached.pop_front() else {
            break;
        };
        b.cached_bytes -= len;
        release(b, base, off, len);
    }
}

/// Gives a block's memory back to the system and its range to the
/// reservation.
fn release(b: &mut Blocks, base: usize, off: usize, len: usize) {
    // SAFETY: the block is ours and no longer in use: its pages leave the
    // file (peers' views of them go too), and the range goes back to the
    // reservation.
    let punched = unsafe {
        let r = libc::fallocate(
            FD.load(Ordering::Relaxed),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off as libc::off_t,
            len as libc::off_t,
        );
        reserve((base + off) as *mut libc::c_void, len, libc::MAP_FIXED);
        r == 0
    };
    // A range whose pages could not be dropped would not read as zeros
    // (what a fresh block, calloc's included, relies on): it stays out of use.
    if punched {
        b.free.give_back(off, len);
    }
}

/// Grows a block [`owns`] says is the heap's to at least `size` bytes
/// where it lies, if the range after it is free: whether it did. (A
/// growing buffer then costs no copy, as the C library's `mremap` of its
/// large blocks.)
pub fn grow(p: *mut u8, size: usize) -> bool {
    let mut g = Guard::lock();
    let b = g.blocks();
    if b.forked {
        return false;
    }
    let (base, fd) = (BASE.load(Ordering::Relaxed), FD.load(Ordering::Relaxed));
    let off = p as usize - base;
    let Some(&len) = b.used.get(&off) else {
        return false;
    };
    let Some(new_len) = whole_pages(size) else {
        return false;
    };
    if new_len <= len {
        return true;
    }
    let (end, extra) = (off + len, new_len - len);
    // The file's pages there are holes: the block grows by zeroes.
    if !b.free.take_at(end, extra) {
        return false;
    }
    if !map_file_at(base, fd, end, extra) {
        b.free.give_back(end, extra);
        return false;
    }
    b.used.insert(off, new_len);
    true
}

/// The usable size of a block [`owns`] says is the heap's.
pub fn usable_size(p: *const u8) -> usize {
    let mut g = Guard::lock();
    let off = p as usize - BASE.load(Ordering::Relaxed);
    g.blocks().used.get(&off).copied().unwrap_or(0)
}

/// Inaccessible address space that commits no memory.
///
/// # Safety
/// With `MAP_FIXED` in `flags`, `at..at + len` must be ours to replace.
unsafe fn reserve(at: *mut libc::c_void, len: usize, flags: i32) -> *mut libc::c_void {
    // SAFETY: the caller's promise for a fixed address; otherwise the
    // kernel picks one.
    unsafe {
        libc::mmap(
            at,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | flags,
            -1,
            0,
        )
    }
}

/// Writes `msg` to standard error and aborts (as the C library does on
/// a bad `free`); allocates nothing.
fn fatal(msg: &[u8]) -> ! {
    // SAFETY: writes a live buffer to fd 2; abort has no preconditions.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

/// A parameter as the launcher passes it (this runs inside `malloc`, so
/// not through `Settings`), or its registered default when unset or
/// unreadable (`Settings` reports that at start-up).
fn param(name: &str) -> Option<crate::params::Value> {
    let p = crate::params::lookup(name)?;
    std::env::var(crate::params::env_name(name))
        .ok()
        .and_then(|v| p.parse(&v).ok())
        .or_else(|| p.parse(p.default).ok())
}

/// On first need: whether this process gets a heap, and if so makes it.
fn decide(b: &mut Blocks) {
    use crate::params::Value;
    if b.decided {
        return;
    }
    b.decided = true;
    // Off while deciding: what follows allocates, and a large allocation
    // here must not come back for the mutex this thread holds.
    MIN.store(usize::MAX, Ordering::Relaxed);
    let local = std::env::var(crate::bootstrap::env::LOCAL_SIZE)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(1);
    // Asked for, and only where something reads it: shared memory among
    // the transports, and single copy allowed.
    let on = |name| matches!(param(name), Some(Value::Bool(true)));
    let shm = match param("transports") {
        Some(Value::Text(t)) => t.split(',').any(|t| t.trim() == "shm"),
        _ => false,
    };
    let on = shm && on("shm_heap") && on("shm_single_copy");
    let min = match param("shm_heap_min") {
        Some(Value::UInt(v)) => v as usize,
        _ => usize::MAX,
    }
    .max(FLOOR);
    if local < 2 || !on {
        return;
    }
    // As much address space as the machine has memory (no block could be
    // larger), at most 1 TiB.
    // SAFETY: sysconf has no preconditions.
    let ram = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) }.max(0) as usize * page();
    let len = (ram.clamp(1 << 30, 1 << 40) + (1 << 30) - 1) & !((1 << 30) - 1);
    let Ok(fd) = crate::shared_mapping::memfd(c"tandem-heap", len) else {
        return;
    };
    // SAFETY: a fresh reservation wherever the kernel puts it.
    let base = unsafe { reserve(std::ptr::null_mut(), len, 0) };
    if base == libc::MAP_FAILED {
        return;
    }
    b.free.give_back(0, len);
    // SAFETY: handlers that only take and release the heap's mutex, and
    // in the child replace the blocks; registered once.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
        )
    };
    use std::os::fd::IntoRawFd;
    FD.store(fd.into_raw_fd(), Ordering::Relaxed);
    LEN.store(len, Ordering::Relaxed);
    BASE.store(base as usize, Ordering::Relaxed);
    MIN.store(min, Ordering::Relaxed);
}

extern "C" fn before_fork() {
    // SAFETY: released by one of the two handlers below.
    unsafe { libc::pthread_mutex_lock(LOCKED.mutex.get()) };
}

extern "C" fn after_fork_in_parent() {
    // SAFETY: locked in `before_fork` by this thread.
    unsafe { libc::pthread_mutex_unlock(LOCKED.mutex.get()) };
}

/// In a child: every block becomes a private copy at its address, and the
/// file is closed, so that parent and child no longer share the pages.
extern "C" fn after_fork_in_child() {
    // SAFETY: the forking thread locked it in `before_fork` and is the
    // one thread of the child.
    unsafe { libc::pthread_mutex_unlock(LOCKED.mutex.get()) };
    let mut g = Guard::lock();
    let b = g.blocks();
    if b.forked || BASE.load(Ordering::Relaxed) == 0 {
        return;
    }
    b.forked = true;
    MIN.store(usize::MAX, Ordering::Relaxed);
    let base = BASE.load(Ordering::Relaxed);
    // Kept blocks are the parent's to reuse: only given back to the
    // reservation here (punching them would take the pages from under the
    // parent; leaving holes would let other mappings land in the range).
    for (off, len) in std::mem::take(&mut b.cached) {
        // SAFETY: a block of ours nobody uses in this process.
        unsafe { reserve((base + off) as *mut libc::c_void, len, libc::MAP_FIXED) };
    }
    b.cached_bytes = 0;
    for (&off, &len) in &b.used {
        let at = (base + off) as *mut libc::c_void;
        // SAFETY: a fresh private mapping receives the block's bytes and
        // then replaces the block (mremap onto its address); on failure
        // the block stays shared, which is all that can be done here.
        unsafe {
            let copy = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if copy == libc::MAP_FAILED {
                continue;
            }
            std::ptr::copy_nonoverlapping(at.cast::<u8>(), copy.cast::<u8>(), len);
            libc::mremap(
                copy,
                len,
                len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                at,
            );
        }
    }
    // SAFETY: our descriptor; peers never reach the child's.
    unsafe { libc::close(FD.swap(-1, Ordering::Relaxed)) };
}

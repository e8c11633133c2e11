//! RWAPI's shared heap: the memory peers on this host write into with a
//! plain copy, the target taking no part.
//!
//! Each rank makes one memory file (`memfd_create`, so nothing is left
//! under /dev/shm) of `rwapi_heap` bytes, maps it shared and carves the
//! blocks of `rwapi_alloc` from it. Its first pages hold a region table
//! ([`SLOTS`] slots); a block's key names its slot and the slot's
//! generation, so a writer on this host that mapped the file (through
//! `/proc/<pid>/fd/<fd>`) checks every write against the table itself:
//!
//! - a stale address (a freed block, or an older block of a reused slot)
//!   is refused with RWAPI_ERR_REGION, never performed: generations of a
//!   slot are never reused (a slot whose generations run out is retired);
//! - a write outside its block is refused with RWAPI_ERR_RANGE.
//!
//! # Why a freed block's space cannot be written after reuse
//!
//! A writer announces itself before looking at the slot, the owner
//! withdraws the block before looking at the writers:
//!
//! ```text
//! writer                                 owner (rwapi_free, then reuse)
//! writers.fetch_add(1, SeqCst)           state.store(DEAD, SeqCst)
//! state.load(SeqCst) == LIVE? gen ok?    writers.load(SeqCst) == 0?
//!   copy into the block                    zero the space, reuse it
//! writers.fetch_sub(1, Release)
//! ```
//!
//! All four accesses are sequentially consistent (Acquire/Release alone
//! would allow both loads to miss the other side's store: this is the
//! store-then-load pattern of Dekker's algorithm). In their single total
//! order either the writer's increment comes before the owner's load of
//! `writers` (the owner sees a writer and does not reuse the space yet), or
//! the owner's store of DEAD comes before the writer's load of `state` (the
//! writer refuses). When the owner finally reads 0, it reads the value of
//! the writer's Release decrement, so the copy happens before the reuse.
//! A block is published with its offset, length and generation written
//! before the Release store of LIVE, which the writer's load acquires.
//! These atomics live in memory shared between processes, which Linux
//! keeps coherent like any other memory (they are lock-free, so
//! address-free).
//!
//! A writer killed in the middle of a copy leaves `writers` above 0 for
//! good: that block's space is then never reused (the owner gives up
//! waiting for it), which is safe.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::free_ranges::FreeRanges;
use crate::p2p::CALLER_KEY_BIT;
use crate::shared_mapping::{memfd, SharedMapping};

/// Slots of the region table: at most this many heap blocks live at once
/// (more fall back to private memory written through the engine).
pub const SLOTS: u32 = 4096;
const SLOT_BITS: u32 = 12;
/// Generation bits of a key: with the slot and [`CALLER_KEY_BIT`], 32.
const GEN_BITS: u32 = 31 - SLOT_BITS;
const MAX_GEN: u32 = (1 << GEN_BITS) - 1;

const FREE: u32 = 0;
const LIVE: u32 = 1;
const DEAD: u32 = 2;

/// One slot of the region table, in the heap's first pages.
#[repr(C)]
struct Slot {
    state: AtomicU32,
    generation: AtomicU32,
    /// The block's offset in the heap and its length (as asked for).
    offset: AtomicU64,
    len: AtomicU64,
    /// Writers copying into (or checking) this slot's block right now.
    writers: AtomicU32,
    _pad: u32,
}

const SLOT_SIZE: usize = std::mem::size_of::<Slot>();
const _: () = assert!(SLOT_SIZE == 32);
/// Where the owner's write-help slot lies: right after the table.
const HELP_AT: usize = SLOTS as usize * SLOT_SIZE;
/// Where the owner's help asks lie: right after the help slot.
const ASKS_AT: usize = HELP_AT + std::mem::size_of::<HelpSlot>();
/// Where blocks start: after the table, the help slot and the asks,
/// page-aligned.
const DATA_START: usize = (ASKS_AT + std::mem::size_of::<HelpAsks>()).next_multiple_of(PAGE);
/// The unit blocks are aligned to and holes punched in. On a kernel with
/// larger pages a punched range that covers part of a page is zeroed
/// rather than freed, which is still what `zero` needs.
const PAGE: usize = 4096;
/// Blocks below a page are aligned to a cache line, larger ones to a page.
const SMALL_ALIGN: usize = 64;
/// Spaces from this size on are zeroed by giving their whole pages back
/// to the kernel (fallocate punches a hole; it reads as zeroes) rather
/// than with a memset.
const PUNCH_MIN: usize = 256 * 1024;
/// How long a free waits for writers still copying into a block before it
/// sets the space aside, to be reclaimed later.
const FREE_WAIT: Duration = Duration::from_millis(2);
/// How long an allocation that found no room waits for such spaces.
const ALLOC_WAIT: Duration = Duration::from_millis(200);

/// A large write its writer shares with its target (see [`write`]): in
/// the writer's heap, where the target, which maps it, finds it when it
/// polls. One at a time per writer (a write is done when its call returns).
#[repr(C)]
struct HelpSlot {
    /// Generation << 1 | 1 while the write's chunks may be claimed.
    state: AtomicU64,
    /// Generation << 32 | the next chunk nobody has claimed.
    claim: AtomicU64,
    /// Generation << 32 | chunks the target claimed and copied.
    done: AtomicU64,
    /// The target's rank, and the write: source offset in the writer's
    /// heap, destination offset in the target's, bytes the target may
    /// copy (all but the last), chunk size.
    target: AtomicU64,
    src_off: AtomicU64,
    dst_off: AtomicU64,
    len: AtomicU64,
    chunk: AtomicU64,
}

/// Writers that want the owner of this heap to map theirs, so that it can
/// help with their large writes: a target maps a writer's heap when it
/// writes to it, and a one-way stream never does. A writer sets its bit
/// once, then counts; the owner, when it polls, looks at the count alone
/// and reads the bits when it changed.
#[repr(C)]
struct HelpAsks {
    count: AtomicU64,
    bits: [AtomicU64; ASK_WORDS],
}

const ASK_WORDS: usize = 256;
/// Writers of this rank or higher cannot ask (their large writes to a
/// target that never writes back are copied by one CPU).
const ASK_RANKS: u32 = ASK_WORDS as u32 * 64;

/// Writes from this size on are shared with a target that polls (when the
/// source is in the writer's heap and the host has a CPU for each rank).
pub const HELP_MIN: usize = 256 * 1024;

/// The key of generation `generation` of slot `slot`.
fn key_of(slot: u32, generation: u32) -> u32 {
    CALLER_KEY_BIT | (generation << SLOT_BITS) | slot
}

/// Whether a key names a heap block (rather than private memory).
pub fn is_heap_key(key: u32) -> bool {
    key & CALLER_KEY_BIT != 0
}

fn split_key(key: u32) -> (u32, u32) {
    (key & (SLOTS - 1), (key & !CALLER_KEY_BIT) >> SLOT_BITS)
}

/// What peers on this host need to map a rank's heap (exchanged at
/// rwapi_init); `len` 0 means the rank has none.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapInfo {
    pub pid: u32,
    pub fd: i32,
    pub len: u64,
    /// Where the owner mapped it: addresses in its rwapi_nets are relative
    /// to this.
    pub addr: u64,
}

/// A shared mapping of a heap file, unmapped when dropped.
pub struct Mapping(SharedMapping);

impl Mapping {
    fn of_fd(fd: RawFd, len: usize) -> Option<Mapping> {
        SharedMapping::new(fd, len).ok().map(Mapping)
    }

    fn base(&self) -> *mut u8 {
        self.0.base()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn slot(&self, i: u32) -> &Slot {
        debug_assert!(i < SLOTS);
        // SAFETY: the table lies at the start of every mapping (at least
        // DATA_START bytes, checked when mapped), slots are 8-byte aligned
        // in a page-aligned mapping, and a Slot is nothing but atomics,
        // valid for any bit pattern; the mapping outlives the borrow.
        unsafe { &*self.base().add(i as usize * SLOT_SIZE).cast::<Slot>() }
    }

    fn help_slot(&self) -> &HelpSlot {
        // SAFETY: as for `slot`: inside every mapping (before DATA_START),
        // 8-byte aligned, only atomics.
        unsafe { &*self.base().add(HELP_AT).cast::<HelpSlot>() }
    }

    fn asks(&self) -> &HelpAsks {
        // SAFETY: as for `slot`: inside every mapping (before DATA_START),
        // 8-byte aligned, only atomics.
        unsafe { &*self.base().add(ASKS_AT).cast::<HelpAsks>() }
    }
}

/// Asks the owner of the heap `target` maps to map writer `writer`'s heap
/// (see [`HelpAsks`]); false if the writer's rank is too high to ask.
pub fn ask_help(target: &Mapping, writer: u32) -> bool {
    if writer >= ASK_RANKS {
        return false;
    }
    let a = target.asks();
    a.bits[writer as usize / 64].fetch_or(1 << (writer % 64), Ordering::Relaxed);
    // Release: the owner that reads the new count (Acquire) sees the bit.
    a.count.fetch_add(1, Ordering::Release);
    true
}

/// How many asks this rank's heap `own` has had (it changes when a writer
/// asks to be mapped).
pub fn ask_count(own: &Mapping) -> u64 {
    own.asks().count.load(Ordering::Acquire)
}

/// The writers that asked this rank's heap `own` to map theirs.
pub fn askers(own: &Mapping) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, w) in own.asks().bits.iter().enumerate() {
        let mut bits = w.load(Ordering::Relaxed);
        while bits != 0 {
            out.push(i as u32 * 64 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    out
}

/// Maps peer `info`'s heap through /proc; `None` if the kernel refuses
/// (then writes to it go through the engine).
pub fn map_peer(info: &HeapInfo) -> Option<Mapping> {
    let len = usize::try_from(info.len).ok()?;
    if len <= DATA_START {
        return None;
    }
    SharedMapping::of_process(info.pid, info.fd, len)
        .ok()
        .map(Mapping)
}

/// Why a direct write was not performed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a live block (freed, or an older generation).
    Region,
    /// Outside its block.
    Range,
    /// The target died while it shared the copy: the data may be partial.
    Gone,
}

/// What a writer offers its target for sharing a large write.
pub struct Share<'a> {
    /// The writer's own heap, and where the writer maps it.
    pub own: &'a Mapping,
    pub own_addr: u64,
    /// The target's rank.
    pub target: u32,
    /// Whether the target still lives (asked while waiting for its chunks).
    pub alive: &'a mut dyn FnMut() -> bool,
}

/// Copies `size` bytes from `src` to `addr` in the heap `map` maps, whose
/// owner maps it at `owner_addr`, after checking `key` (see the module
/// comment for the protocol).
///
/// The copy stores the last byte last (a Release store after the rest,
/// and a Release fence before it all orders it after earlier writes), so
/// a flag at the end of a write, read with Acquire, says the whole write
/// is there.
///
/// With `share`, a write of [`HELP_MIN`] bytes or more whose source lies
/// in the writer's own heap is offered to the target, which copies chunks
/// of it while it polls (see [`help`]): two CPUs copy instead of one. The
/// writer copies what the target does not claim, waits for what it did,
/// and still stores the last byte last.
///
/// # Safety
/// `src` must be valid for reads of `size` bytes.
pub unsafe fn write(
    map: &Mapping,
    owner_addr: u64,
    key: u32,
    addr: u64,
    src: *const u8,
    size: usize,
    share: Option<Share<'_>>,
) -> Result<(), Refused> {
    let (slot_i, generation) = split_key(key);
    let off = addr.checked_sub(owner_addr).ok_or(Refused::Range)?;
    let slot = map.slot(slot_i);
    slot.writers.fetch_add(1, Ordering::SeqCst);
    let r = if slot.state.load(Ordering::SeqCst) != LIVE
        || slot.generation.load(Ordering::Relaxed) != generation
    {
        Err(Refused::Region)
    } else {
        let start = slot.offset.load(Ordering::Relaxed);
        let len = slot.len.load(Ordering::Relaxed);
        let end = start.saturating_add(len);
        let inside = off >= start
            && off
                .checked_add(size as u64)
                .is_some_and(|e| e <= end && e <= map.len() as u64);
        if inside {
            // SAFETY: the destination is inside the mapping (checked
            // against its length) and inside a live block whose space the
            // owner will not reuse while `writers` counts us; `src` is the
            // caller's promise. A concurrent access by the owner's program
            // is that program's own business, as with any RWAPI write.
            let dst = unsafe { map.base().add(off as usize) };
            match share.and_then(|sh| {
                let src_off = (src as u64).checked_sub(sh.own_addr)?;
                let fits = src_off
                    .checked_add(size as u64)
                    .is_some_and(|e| e <= sh.own.len() as u64);
                (size >= HELP_MIN && src_off >= DATA_START as u64 && fits).then_some((sh, src_off))
            }) {
                // SAFETY: as above; the source is inside the writer's heap.
                Some((sh, src_off)) => unsafe { shared_copy(sh, src_off, off, src, dst, size) },
                None => {
                    // SAFETY: as above.
                    unsafe { copy_last_byte_last(src, dst, size) };
                    Ok(())
                }
            }
        } else {
            Err(Refused::Range)
        }
    };
    slot.writers.fetch_sub(1, Ordering::Release);
    r
}

/// Copies a write of `size` (>= [`HELP_MIN`]) bytes from `src` (at
/// `src_off` in the writer's heap) to `dst` (at `dst_off` in the target's)
/// together with the target: publishes it in the writer's help slot,
/// claims and copies chunks until none is left, waits for the target's,
/// then stores the last byte last.
///
/// # Safety
/// `src` valid for reads and `dst` for writes of `size` bytes.
unsafe fn shared_copy(
    sh: Share<'_>,
    src_off: u64,
    dst_off: u64,
    src: *const u8,
    dst: *mut u8,
    size: usize,
) -> Result<(), Refused> {
    let h = sh.own.help_slot();
    let body = size as u64 - 1;
    // Claimed in the pieces MPI's copy help uses: halves of whole pages,
    // at most 1 MiB, an even number of them.
    let chunk = crate::p2p::copy_help_chunk(body) as u64;
    let chunks = body.div_ceil(chunk);
    let generation = (h.state.load(Ordering::Relaxed) >> 1) + 1;
    // The parameters go before the claim word and the state that announce
    // them (Release); a helper that claims a chunk of this generation
    // (Acquire) reads these (see `help`).
    h.target.store(u64::from(sh.target), Ordering::Relaxed);
    h.src_off.store(src_off, Ordering::Relaxed);
    h.dst_off.store(dst_off, Ordering::Relaxed);
    h.len.store(body, Ordering::Relaxed);
    h.chunk.store(chunk, Ordering::Relaxed);
    h.done.store(generation << 32, Ordering::Relaxed);
    h.claim.store(generation << 32, Ordering::Release);
    h.state.store(generation << 1 | 1, Ordering::Release);
    let mut mine = 0u64;
    loop {
        let i = h.claim.fetch_add(1, Ordering::AcqRel) & 0xffff_ffff;
        if i >= chunks {
            break;
        }
        let at = i * chunk;
        let n = chunk.min(body - at) as usize;
        // SAFETY: chunk `i` lies within the first `body` bytes of both.
        unsafe { std::ptr::copy_nonoverlapping(src.add(at as usize), dst.add(at as usize), n) };
        mine += 1;
    }
    h.state.store(generation << 1, Ordering::Release);
    // Every chunk is claimed now; the target's are a copy away from done.
    let theirs = chunks - mine;
    let mut spins = 0u32;
    while h.done.load(Ordering::Acquire) & 0xffff_ffff != theirs {
        spins = spins.saturating_add(1);
        if spins.is_multiple_of(1 << 12) {
            if !(sh.alive)() {
                return Err(Refused::Gone);
            }
            // A target descheduled mid-chunk (more ranks than CPUs) needs
            // this CPU: offer it once the wait is no longer short.
            if spins >= 1 << 16 {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
    // SAFETY: the last byte, inside both buffers; stored after the rest
    // (ours, and the target's, acquired through `done`).
    unsafe { copy_last_byte_last(src.add(size - 1), dst.add(size - 1), 1) };
    Ok(())
}

/// For a target that polls: copies chunks of the write `writer` (a peer
/// heap mapped here) shares with rank `me`, if there is one, into this
/// rank's heap `own`; how many chunks it copied.
pub fn help(own: &Mapping, me: u32, writer: &Mapping) -> u64 {
    let h = writer.help_slot();
    let state = h.state.load(Ordering::Acquire);
    if state & 1 == 0 || h.target.load(Ordering::Relaxed) != u64::from(me) {
        return 0;
    }
    let generation = state >> 1;
    let (src_off, dst_off, len, chunk) = (
        h.src_off.load(Ordering::Relaxed),
        h.dst_off.load(Ordering::Relaxed),
        h.len.load(Ordering::Relaxed),
        h.chunk.load(Ordering::Relaxed),
    );
    // A later write may have replaced these since `state` was read: only
    // a chunk claimed under this generation uses them (the writer changes
    // them only once every chunk of a write is claimed and copied). They
    // are checked against both mappings all the same.
    let within = |off: u64, map: &Mapping| {
        off >= DATA_START as u64 && off.checked_add(len).is_some_and(|e| e <= map.len() as u64)
    };
    if chunk == 0 || !within(src_off, writer) || !within(dst_off, own) {
        return 0;
    }
    let chunks = len.div_ceil(chunk);
    let mut copied = 0;
    loop {
        let w = h.claim.load(Ordering::Acquire);
        let i = w & 0xffff_ffff;
        if w >> 32 != generation || i >= chunks {
            return copied;
        }
        if h.claim
            .compare_exchange_weak(w, w + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        let at = i * chunk;
        let n = chunk.min(len - at) as usize;
        // SAFETY: both ranges lie inside their mappings (checked above);
        // the chunk is this rank's alone (claimed), and the writer keeps
        // its source and the destination block in place until it has
        // seen the chunk done.
        unsafe {
            std::ptr::copy_nonoverlapping(
                writer.base().add((src_off + at) as usize),
                own.base().add((dst_off + at) as usize),
                n,
            )
        };
        h.done.fetch_add(1, Ordering::Release);
        copied += 1;
    }
}

/// # Safety
/// `src` valid for reads and `dst` for writes of `size` bytes.
unsafe fn copy_last_byte_last(src: *const u8, dst: *mut u8, size: usize) {
    if size == 0 {
        return;
    }
    // Earlier writes (and their last bytes) before any byte of this one.
    fence(Ordering::Release);
    // SAFETY: the caller's promise, for the first size - 1 bytes and the
    // last one; an AtomicU8 has the layout of a u8 and any address is
    // aligned for it.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, size - 1);
        let last = src.add(size - 1).read();
        (*dst.add(size - 1).cast::<AtomicU8>()).store(last, Ordering::Release);
    }
}

/// This rank's heap: the mapping, its file and the allocator.
pub struct Heap {
    map: Mapping,
    fd: OwnedFd,
    /// Free spaces (offset → length), coalesced; every byte in them is zero.
    free: FreeRanges,
    /// Slots that may be used again (free, no writer), and the next slot
    /// never used.
    free_slots: Vec<u32>,
    next_slot: u32,
    /// Freed blocks whose writers had not all left: (slot, offset, length).
    set_aside: Vec<(u32, usize, usize)>,
}

/// A block carved from the heap.
#[derive(Clone, Copy, Debug)]
pub struct HeapBlock {
    pub key: u32,
    pub ptr: *mut u8,
    slot: u32,
    offset: usize,
    space: usize,
}

// SAFETY: `ptr` points into the heap's mapping, which is plain memory;
// the block is only a description of it.
unsafe impl Send for HeapBlock {}

impl Heap {
    /// A heap of `len` bytes (virtual: the file is sparse); `None` if the
    /// system will not make one.
    pub fn create(len: usize) -> Option<Heap> {
        let len = len.next_multiple_of(PAGE);
        if len <= DATA_START {
            return None;
        }
        let fd = memfd(c"tandem-rwapi", len).ok()?;
        let map = Mapping::of_fd(fd.as_raw_fd(), len)?;
        let mut free = FreeRanges::new();
        free.give_back(DATA_START, len - DATA_START);
        Some(Heap {
            map,
            fd,
            free,
            free_slots: Vec::new(),
            next_slot: 0,
            set_aside: Vec::new(),
        })
    }

    /// What peers need to map it.
    pub fn info(&self) -> HeapInfo {
        HeapInfo {
            pid: std::process::id(),
            fd: self.fd.as_raw_fd(),
            len: self.map.len() as u64,
            addr: self.map.base() as u64,
        }
    }

    /// Where this process maps its heap.
    pub fn addr(&self) -> u64 {
        self.map.base() as u64
    }

    pub fn mapping(&self) -> &Mapping {
        &self.map
    }

    /// A zeroed block of `size` bytes, or `None` when the heap has no room
    /// (or no slot) for it.
    pub fn alloc(&mut self, size: usize) -> Option<HeapBlock> {
        if size == 0 || size > self.map.len() {
            return None;
        }
        let (align, space) = if size < PAGE {
            (SMALL_ALIGN, size.next_multiple_of(SMALL_ALIGN))
        } else {
            (PAGE, size.next_multiple_of(PAGE))
        };
        self.reclaim(Duration::ZERO);
        if self.free_slots.is_empty() && self.next_slot == SLOTS && !self.set_aside.is_empty() {
            self.reclaim(ALLOC_WAIT);
        }
        let offset = match self.carve(align, space) {
            Some(o) => o,
            None if !self.set_aside.is_empty() => {
                self.reclaim(ALLOC_WAIT);
                self.carve(align, space)?
            }
            None => return None,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None if self.next_slot < SLOTS => {
                self.next_slot += 1;
                self.next_slot - 1
            }
            None => {
                self.give_back(offset, space);
                return None;
            }
        };
        let s = self.map.slot(slot);
        let generation = s.generation.load(Ordering::Relaxed) + 1;
        s.offset.store(offset as u64, Ordering::Relaxed);
        s.len.store(size as u64, Ordering::Relaxed);
        s.generation.store(generation, Ordering::Relaxed);
        // Publishes offset, length and generation (see the module comment).
        s.state.store(LIVE, Ordering::Release);
        Some(HeapBlock {
            key: key_of(slot, generation),
            // SAFETY: offset + space lies inside the mapping (carved from it).
            ptr: unsafe { self.map.base().add(offset) },
            slot,
            offset,
            space,
        })
    }

    /// First fit: the lowest free space that holds `space` bytes at
    /// `align`; the rest stays free.
    fn carve(&mut self, align: usize, space: usize) -> Option<usize> {
        self.free.carve(0, align, space)
    }

    fn give_back(&mut self, at: usize, len: usize) {
        self.free.give_back(at, len);
    }

    /// Withdraws a block: writes to it are refused from now on; its space
    /// is reused once no writer is copying into it.
    pub fn free(&mut self, b: &HeapBlock) {
        // SeqCst: see the module comment.
        self.map.slot(b.slot).state.store(DEAD, Ordering::SeqCst);
        self.set_aside.push((b.slot, b.offset, b.space));
        self.reclaim(FREE_WAIT);
    }

    /// Reuses set-aside spaces whose writers have left, waiting up to
    /// `wait` (polling, then yielding the CPU) until at least one is: a
    /// space whose writer was killed mid-copy stays set aside for good, and
    /// waiting for all of them would make every later call wait it out.
    fn reclaim(&mut self, wait: Duration) {
        let mut start: Option<Instant> = None;
        let mut polls = 0u32;
        loop {
            let before = self.set_aside.len();
            let mut i = 0;
            while i < self.set_aside.len() {
                let (slot, at, len) = self.set_aside[i];
                // SeqCst: see the module comment; it also acquires the last
                // writer's Release decrement, so its copy is done.
                if self.map.slot(slot).writers.load(Ordering::SeqCst) == 0 {
                    self.set_aside.swap_remove(i);
                    self.zero(at, len);
                    self.give_back(at, len);
                    let s = self.map.slot(slot);
                    s.state.store(FREE, Ordering::Relaxed);
                    if s.generation.load(Ordering::Relaxed) < MAX_GEN {
                        self.free_slots.push(slot);
                    } // else retired: its keys would repeat
                } else {
                    i += 1;
                }
            }
            if self.set_aside.is_empty() || self.set_aside.len() < before || wait.is_zero() {
                return;
            }
            polls += 1;
            if polls < 1000 {
                std::hint::spin_loop();
                continue;
            }
            // A writer still copying, descheduled, or killed mid-copy (then
            // its space stays set aside for good).
            if start.get_or_insert_with(Instant::now).elapsed() >= wait {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Zeroes `[at, at + len)` (no writer copies into it any more).
    fn zero(&mut self, at: usize, len: usize) {
        if len >= PUNCH_MIN && at.is_multiple_of(PAGE) && len.is_multiple_of(PAGE) {
            // SAFETY: plain syscall on our file, inside its length.
            let r = unsafe {
                libc::fallocate(
                    self.fd.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    at as libc::off_t,
                    len as libc::off_t,
                )
            };
            if r == 0 {
                return;
            }
        }
        // SAFETY: inside the mapping, and nobody else uses this space now.
        unsafe { std::ptr::write_bytes(self.map.base().add(at), 0, len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(h: &Heap, key: u32, addr: *mut u8, data: &[u8]) -> Result<(), Refused> {
        // SAFETY: `data` is valid for its length.
        unsafe {
            write(
                h.mapping(),
                h.info().addr,
                key,
                addr as u64,
                data.as_ptr(),
                data.len(),
                None,
            )
        }
    }

    #[test]
    fn writes_are_checked_against_the_table() {
        let mut h = Heap::create(4 << 20).expect("memfd heap");
        let b = h.alloc(100).expect("room");
        assert!(is_heap_key(b.key));
        assert_eq!(b.ptr as usize % SMALL_ALIGN, 0);
        assert!(put(&h, b.key, b.ptr, &[7; 100]).is_ok());
        // SAFETY: inside the block just written.
        assert_eq!(unsafe { *b.ptr.add(99) }, 7);
        // SAFETY: one byte before the end of the 100-byte block.
        let near_end = unsafe { b.ptr.add(96) };
        assert_eq!(put(&h, b.key, near_end, &[1; 8]), Err(Refused::Range));
        // SAFETY: an address before the block, never dereferenced.
        let before = unsafe { b.ptr.sub(1) };
        assert_eq!(put(&h, b.key, before, &[1]), Err(Refused::Range));
        h.free(&b);
        assert_eq!(put(&h, b.key, b.ptr, &[1]), Err(Refused::Region));
        // The space and the slot come back, under a new key, zeroed; the
        // old key stays refused.
        let c = h.alloc(100).expect("room");
        assert_eq!(c.ptr, b.ptr);
        assert_ne!(c.key, b.key);
        // SAFETY: inside the new block.
        assert!((0..100).all(|i| unsafe { *c.ptr.add(i) } == 0));
        assert_eq!(put(&h, b.key, c.ptr, &[9]), Err(Refused::Region));
        assert!(put(&h, c.key, c.ptr, &[9]).is_ok());
    }

    #[test]
    fn space_with_a_writer_is_not_reused() {
        let mut h = Heap::create(4 << 20).expect("memfd heap");
        let b = h.alloc(1 << 20).expect("room");
        assert_eq!(b.ptr as usize % PAGE, 0);
        // A writer that passed its checks and is still copying.
        h.map.slot(b.slot).writers.fetch_add(1, Ordering::SeqCst);
        h.free(&b);
        let c = h.alloc(1 << 20).expect("room");
        assert_ne!(c.ptr, b.ptr, "reused under a writer");
        h.map.slot(b.slot).writers.fetch_sub(1, Ordering::Release);
        let d = h.alloc(1 << 20).expect("room");
        assert_eq!(d.ptr, b.ptr, "reclaimed once the writer left");
    }

    #[test]
    fn full_heap_and_spent_slots() {
        let mut h = Heap::create(1 << 20).expect("memfd heap");
        assert!(h.alloc(2 << 20).is_none());
        let a = h.alloc(600 << 10).expect("room");
        assert!(h.alloc(600 << 10).is_none(), "no room left");
        h.free(&a);
        assert!(h.alloc(600 << 10).is_some(), "freed space coalesced");
        // A slot whose generations are spent is retired, never reused.
        let b = h.alloc(64).expect("room");
        h.map
            .slot(b.slot)
            .generation
            .store(MAX_GEN, Ordering::Relaxed);
        h.free(&b);
        assert!(!h.free_slots.contains(&b.slot));
    }
}

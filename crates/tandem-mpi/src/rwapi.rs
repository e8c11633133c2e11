//! The Remote-Write API (`include/rwapi.h`, Ben Fredj & Renault) on the engine's
//! one-sided operations: blocks peers may write into are exposed regions,
//! writes are one-sided puts, small messages travel on a communicator of
//! their own. Errors are returned (negated MPI error classes), never raised
//! through MPI's error handlers.
//!
//! Between ranks on one host a write is instead a copy straight into the
//! target's memory (the direct path, [`crate::rwheap`]): blocks come from
//! a heap each rank shares as a memory file, writers map their peers'
//! heaps on first use and check each write against the owner's region
//! table, and the target takes no part. A write goes through the engine
//! when the target's block is not in its heap (it did not fit), when the
//! heap could not be mapped (or `rwapi_direct=0`), when the target is on
//! another host, and, to keep writes to one node in order, when writes to
//! that node went through the engine since the last rwapi_flush.

use std::collections::VecDeque;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tandem::p2p::{OpId, OpState};
use tandem::{CommId, ErrorClass, Runtime, WORLD};

use tandem::coll::CollCall;
use tandem::int_map::IntMap;

use crate::abi::MPI_THREAD_SINGLE;
use crate::rwheap::{self, Heap, HeapBlock, HeapInfo, Mapping, Refused};
use crate::state::{self, Owner, State};

/// The network address of a block (`rwapi_net`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RwapiNet {
    pub addr: u64,
    pub key: u32,
    pub node: i32,
}

/// A small message (`rwapi_small`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RwapiSmall {
    pub bytes: [u8; 16],
}

const OK: c_int = 0;
const ERR_ARG: c_int = -13;
const ERR_NODE: c_int = -6;
const ERR_SID: c_int = -7;
const ERR_INIT: c_int = -16;
const ERR_RANGE: c_int = -48;

/// Blocks are cache-line aligned (page-aligned from a page up) and zeroed.
const BLOCK_ALIGN: usize = 4096;

/// A zeroed private block (not in the heap) of `len` (> 0) bytes, from
/// [`crate::misc::HUGE_PAGE`] on backed by transparent huge pages, as
/// MPI_Alloc_mem's are (a 4 MiB RWAPI round trip over TCP loopback about
/// 5% faster here). Released with `free`; null if out of memory.
fn alloc_private(len: usize) -> *mut u8 {
    let base = crate::misc::alloc_pages(len, BLOCK_ALIGN).cast::<u8>();
    if !base.is_null() {
        // Zeroed after the huge-page advice: the first touch maps them.
        // SAFETY: `base` starts `len` bytes just allocated.
        unsafe { std::ptr::write_bytes(base, 0, len) };
    }
    base
}

/// Empty rwapi_receive calls in a row before each further one yields the
/// CPU (a few tens of microseconds of polling).
const IDLE_POLLS_BEFORE_YIELD: u32 = 256;
/// With TCP in use, empty polls between yields (MPI's waits use the same).
const TCP_IDLE_POLLS_PER_YIELD: u32 = 16;
/// Finished writes are forgotten in batches of about this many.
const FORGET_BATCH: usize = 1024;
/// Send ids of direct writes have this bit (the engine's ids never reach it).
const DIRECT_SID: u64 = 1 << 62;

struct Block {
    key: u32,
    /// Carved from the heap (else private memory from the allocator).
    heap: Option<HeapBlock>,
}

/// How this rank writes into a node's heap blocks.
enum Path {
    /// Not decided: the heap is mapped on the first write to it.
    Untried,
    /// Copies into this mapping of the node's heap.
    Mapped(Mapping),
    /// The node is this rank: copies into its own heap.
    Own,
    /// Through the engine (another host, no heap, or the kernel refused).
    Engine,
}

/// A set of nodes, listed in the order they joined.
struct NodeSet {
    nodes: Vec<u32>,
    member: Vec<bool>,
}

impl NodeSet {
    fn new(size: usize) -> NodeSet {
        NodeSet {
            nodes: Vec::new(),
            member: vec![false; size],
        }
    }

    fn contains(&self, node: u32) -> bool {
        self.member[node as usize]
    }

    fn insert(&mut self, node: u32) {
        if !self.member[node as usize] {
            self.member[node as usize] = true;
            self.nodes.push(node);
        }
    }

    /// Empties the set; its nodes.
    fn take(&mut self) -> Vec<u32> {
        for &n in &self.nodes {
            self.member[n as usize] = false;
        }
        std::mem::take(&mut self.nodes)
    }
}

/// The direct path's state.
struct Direct {
    heap: Option<Heap>,
    /// Every node's heap, as announced at rwapi_init.
    infos: Vec<HeapInfo>,
    paths: Vec<Path>,
    /// Nodes whose heaps are mapped here, in the order they were: the
    /// writers a polling rank looks at for writes to share (`rwheap::help`).
    mapped: Vec<u32>,
    /// Whether large writes are shared with their targets (not on a host
    /// with more ranks than CPUs, where the target may not be running).
    share: bool,
    next_sid: u64,
    /// Nodes written to directly since the last flush.
    dirty: NodeSet,
    /// Nodes this rank asked to map its heap (see `rwheap::ask_help`).
    asked: NodeSet,
    /// The count of asks to map writers' heaps last acted on.
    seen_asks: u64,
}

/// RWAPI's part of the library state.
pub struct RwState {
    comm: CommId,
    /// Whether rwapi_init started MPI (then rwapi_finalize ends it).
    owns_mpi: bool,
    /// By base address.
    blocks: IntMap<usize, Block>,
    /// Base address and length by key (what every write checks its
    /// source against, in one look-up).
    keys: IntMap<u32, (usize, usize)>,
    /// Writes through the engine not yet known to be done, oldest first
    /// (a write that left at once is not kept: see `P2p::put_untracked`).
    outstanding: VecDeque<u64>,
    max_sid: u64,
    /// Refused writes already forgotten by the engine: sid → class.
    failed: IntMap<u64, ErrorClass>,
    /// The first refusal not yet reported by rwapi_flush.
    first_error: Option<ErrorClass>,
    /// Calls in a row that found nothing to receive.
    idle_polls: u32,
    /// Nodes written to through the engine since the last flush.
    dirty: NodeSet,
    direct: Direct,
    /// The node the last call wrote to, when that call was rwapi_write.
    wrote_last: Option<u32>,
    /// By node: whether the last write to it was followed at once by a
    /// small message to it (the RWAPI paper's pattern: write, then say so). Then
    /// its next write through the engine waits for that message, and the
    /// two leave in one system call over TCP; a write followed by anything
    /// else still leaves at the next call.
    notice_follows: Vec<bool>,
}

fn neg(class: ErrorClass) -> c_int {
    -class.code()
}

/// Runs `body` on the library state; `fail` when there is none or on panic.
fn with_state<T: Copy>(func: &str, fail: T, body: impl FnOnce(&mut State) -> T) -> T {
    catch_unwind(AssertUnwindSafe(|| {
        let mut owner = Owner::acquire(func);
        match owner.slot().as_mut() {
            Some(s) => {
                state::enter(s);
                let r = body(s);
                state::leave(s);
                r
            }
            None => fail,
        }
    }))
    .unwrap_or_else(|_| {
        eprintln!("tandem: internal error in {func}");
        fail
    })
}

/// Runs `body` with RWAPI initialized; `fail` otherwise. The call comes
/// between the last write and any notice of it, so that write was not
/// announced at once: the next one to its node leaves without waiting.
fn with_rw<T: Copy>(func: &str, fail: T, body: impl FnOnce(&mut Runtime, &mut RwState) -> T) -> T {
    with_rw_after_write(func, fail, |rt, rw| {
        if let Some(node) = rw.wrote_last.take() {
            rw.notice_follows[node as usize] = false;
        }
        body(rt, rw)
    })
}

/// As [`with_rw`], for rwapi_write and rwapi_send, which keep track of the
/// last write themselves (see [`RwState::notice_follows`]).
fn with_rw_after_write<T: Copy>(
    func: &str,
    fail: T,
    body: impl FnOnce(&mut Runtime, &mut RwState) -> T,
) -> T {
    with_state(func, fail, |s| match s.rwapi.as_mut() {
        Some(rw) => body(&mut s.rt, rw),
        None => fail,
    })
}

impl RwState {
    /// A poll found nothing and moved nothing. A program polling in a loop
    /// must not starve the peer on a busy machine, nor the kernel thread
    /// that finishes loopback TCP deliveries: with TCP in use every
    /// [`TCP_IDLE_POLLS_PER_YIELD`]th empty poll yields the CPU, and only
    /// that one, as MPI's waits do (yielding on every one made an 8-byte TCP
    /// round trip 7% slower than MPI's, and yielding on every one after
    /// [`IDLE_POLLS_BEFORE_YIELD`] made 4-32 KiB round trips 5-20% slower);
    /// otherwise each one after a while of nothing.
    fn idle(&mut self, rt: &mut Runtime) {
        self.idle_polls = self.idle_polls.saturating_add(1);
        let yield_now = if rt.p2p().engine().tcp_active() {
            self.idle_polls.is_multiple_of(TCP_IDLE_POLLS_PER_YIELD)
        } else {
            self.idle_polls > IDLE_POLLS_BEFORE_YIELD
        };
        if yield_now {
            std::thread::yield_now();
        }
    }

    /// Forgets finished writes (the engine keeps each until asked), keeping
    /// refusals for rwapi_issent and rwapi_flush.
    fn forget_done(&mut self, rt: &mut Runtime) {
        let p2p = rt.p2p();
        let failed = &mut self.failed;
        let first = &mut self.first_error;
        // Refusals that came after their write was forgotten.
        for (OpId(sid), e) in p2p.take_late_errors() {
            failed.insert(sid, e.class);
            first.get_or_insert(e.class);
        }
        self.outstanding
            .retain(|&sid| match p2p.op_state(OpId(sid)) {
                Some(OpState::Done(_)) => {
                    if let Some(Err(e)) = p2p.op_take(OpId(sid)) {
                        failed.insert(sid, e.class);
                        first.get_or_insert(e.class);
                    }
                    false
                }
                Some(_) => true,
                None => false,
            });
    }
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_init(_argc: c_int, _argv: *mut *mut c_char) -> c_int {
    if state::is_finalized() {
        return ERR_INIT;
    }
    let owns_mpi = !state::is_initialized();
    if owns_mpi {
        let rc = state::initialize("rwapi_init", MPI_THREAD_SINGLE);
        if rc != 0 {
            return -rc;
        }
    }
    with_state("rwapi_init", ERR_INIT, |s| {
        if s.rwapi.is_some() {
            return OK;
        }
        if s.rt.replicated() {
            // Remote writes are not replayed from another replica.
            eprintln!("rwapi_init: RWAPI is not available in a job with replicas");
            return ERR_INIT;
        }
        match s.rt.comm_dup(WORLD) {
            Ok(comm) => {
                let direct = match start_direct(&mut s.rt, comm) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = s.rt.comm_free(comm);
                        return neg(e.class);
                    }
                };
                s.rwapi = Some(RwState {
                    comm,
                    owns_mpi,
                    blocks: IntMap::default(),
                    keys: IntMap::default(),
                    outstanding: VecDeque::new(),
                    max_sid: 0,
                    failed: IntMap::default(),
                    first_error: None,
                    idle_polls: 0,
                    dirty: NodeSet::new(s.rt.size() as usize),
                    direct,
                    wrote_last: None,
                    notice_follows: vec![false; s.rt.size() as usize],
                });
                OK
            }
            Err(e) => neg(e.class),
        }
    })
}

/// Makes this rank's heap (unless `rwapi_direct=0` or `rwapi_heap=0`, or
/// no other rank shares its memory) and learns every node's (collective,
/// on RWAPI's communicator).
fn start_direct(rt: &mut Runtime, comm: CommId) -> tandem::Result<Direct> {
    let n = rt.size() as usize;
    // The heap is how ranks on one host write into each other's blocks.
    // Without such a rank (one per host, or `transports=tcp`) every write
    // goes through the engine anyway, and blocks are private memory, which
    // large ones back with huge pages (see `alloc_private`).
    let me = rt.rank();
    let shares_memory = (0..rt.size()).any(|p| p != me && rt.p2p().is_shm_peer(p));
    let heap = if rt.settings().bool("rwapi_direct") && shares_memory {
        usize::try_from(rt.settings().uint("rwapi_heap"))
            .ok()
            .filter(|&len| len > 0)
            .and_then(Heap::create)
    } else {
        None
    };
    let mine = heap.as_ref().map(Heap::info).unwrap_or_default();
    let mut infos = vec![HeapInfo::default(); n];
    let len = std::mem::size_of::<HeapInfo>();
    // SAFETY: `mine` is valid for reads of `len` bytes and `infos` for
    // writes of `n * len` (HeapInfo is plain old data) during the call.
    unsafe {
        rt.coll(
            comm,
            CollCall::Allgather {
                send: Some((&raw const mine).cast()),
                recv: infos.as_mut_ptr().cast(),
                len,
            },
        )?;
    }
    Ok(Direct {
        heap,
        infos,
        paths: (0..n).map(|_| Path::Untried).collect(),
        mapped: Vec::new(),
        share: rt.p2p().copy_help_min() != 0,
        next_sid: 0,
        dirty: NodeSet::new(n),
        asked: NodeSet::new(n),
        seen_asks: 0,
    })
}

impl Direct {
    /// Maps the heaps of writers that asked for it (they share large
    /// writes with this rank, which writes nothing back to them).
    fn map_askers(&mut self, p2p: &tandem::p2p::P2p) {
        let Some(own) = self.heap.as_ref().filter(|_| self.share) else {
            return;
        };
        let count = rwheap::ask_count(own.mapping());
        if count == self.seen_asks {
            return;
        }
        self.seen_asks = count;
        for w in rwheap::askers(own.mapping()) {
            if self
                .paths
                .get(w as usize)
                .is_some_and(|p| matches!(p, Path::Untried))
            {
                let _ = self.target(p2p, w);
            }
        }
    }

    /// Copies this rank's part of large writes that writers whose heaps
    /// are mapped here share with it; how many chunks it copied.
    fn help_writers(&self, me: u32) -> u64 {
        let Some(own) = self.heap.as_ref().filter(|_| self.share) else {
            return 0;
        };
        let mut chunks = 0;
        for &w in &self.mapped {
            if let Path::Mapped(m) = &self.paths[w as usize] {
                chunks += rwheap::help(own.mapping(), me, m);
            }
        }
        chunks
    }

    /// The mapping of `node`'s heap and where its owner maps it, deciding
    /// the path on the first call; `None`: through the engine.
    fn target(&mut self, p2p: &tandem::p2p::P2p, node: u32) -> Option<(&Mapping, u64)> {
        let i = node as usize;
        if matches!(self.paths[i], Path::Untried) {
            self.paths[i] = if self.heap.is_none() || self.infos[i].len == 0 {
                Path::Engine
            } else if node == p2p.rank() {
                Path::Own
            } else if p2p.is_shm_peer(node) {
                // Silently through the engine where the kernel refuses.
                match rwheap::map_peer(&self.infos[i]) {
                    Some(m) => {
                        self.mapped.push(node);
                        Path::Mapped(m)
                    }
                    None => Path::Engine,
                }
            } else {
                Path::Engine
            };
        }
        let addr = self.infos[i].addr;
        match &self.paths[i] {
            Path::Mapped(m) => Some((m, addr)),
            Path::Own => self.heap.as_ref().map(|h| (h.mapping(), addr)),
            Path::Untried | Path::Engine => None,
        }
    }
}

/// Waits until every write is done at its target; the first refusal.
fn flush(rt: &mut Runtime, rw: &mut RwState) -> c_int {
    let mut pending: Vec<u64> = rw.outstanding.iter().copied().collect();
    // Writes are answered only when refused: a sync per node written to
    // says when all of them are carried out (refusals arrive before it).
    let mut syncs = Vec::new();
    for node in rw.dirty.take() {
        match rt.p2p().sync(node) {
            Ok(OpId(id)) => syncs.push(id),
            Err(e) => return neg(e.class),
        }
    }
    pending.extend(&syncs);
    rt.p2p().wait_for(|p| {
        pending.iter().all(|&sid| {
            !matches!(
                p.op_state(OpId(sid)),
                Some(OpState::Pending | OpState::LocalDone)
            )
        })
    });
    let mut gone = None;
    // Direct writes were complete when issued; a node that has died since
    // (as far as anyone can tell yet) is still reported.
    for node in rw.direct.dirty.take() {
        if let Some(e) = rt.p2p().peer_gone(node) {
            gone.get_or_insert(e.class);
        }
    }
    for id in syncs {
        if let Some(Err(e)) = rt.p2p().op_take(OpId(id)) {
            gone.get_or_insert(e.class);
        }
    }
    rw.forget_done(rt);
    rw.first_error.take().or(gone).map_or(OK, neg)
}

#[no_mangle]
pub extern "C" fn rwapi_flush() -> c_int {
    with_rw("rwapi_flush", ERR_INIT, flush)
}

#[no_mangle]
pub extern "C" fn rwapi_finalize() -> c_int {
    let done = with_rw("rwapi_finalize", None, |rt, rw| {
        let rc = flush(rt, rw);
        // Every rank's writes are done before any rank leaves.
        let rc = match rt.barrier(rw.comm) {
            Ok(()) => rc,
            Err(e) => neg(e.class),
        };
        let _ = rt.comm_free(rw.comm);
        // Nothing may reach the blocks once they are freed below.
        for b in rw.blocks.values() {
            rt.p2p().unexpose(b.key);
        }
        Some((rc, rw.owns_mpi))
    });
    let Some((rc, owns_mpi)) = done else {
        return ERR_INIT;
    };
    // Every node has flushed (the barrier): no write is copying into the
    // heap any more, and it goes with the rest.
    with_state("rwapi_finalize", (), |s| release(s.rwapi.take()));
    if owns_mpi {
        let fin = state::finalize("rwapi_finalize");
        if fin != 0 && rc == OK {
            return -fin;
        }
    }
    rc
}

#[no_mangle]
pub extern "C" fn rwapi_rank() -> c_int {
    with_rw("rwapi_rank", ERR_INIT, |rt, _| rt.rank() as c_int)
}

#[no_mangle]
pub extern "C" fn rwapi_size() -> c_int {
    with_rw("rwapi_size", ERR_INIT, |rt, _| rt.size() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_alloc(size: usize, net: *mut RwapiNet) -> *mut u8 {
    if size == 0 || net.is_null() {
        return std::ptr::null_mut();
    }
    with_rw("rwapi_alloc", std::ptr::null_mut(), |rt, rw| {
        let (base, key, heap) = match rw.direct.heap.as_mut().and_then(|h| h.alloc(size)) {
            Some(b) => {
                // Exposed to the engine too, for writers that cannot map the heap.
                let exposed = rt.p2p().expose_keyed(b.key, b.ptr, size);
                debug_assert!(exposed, "heap keys are unique");
                (b.ptr, b.key, Some(b))
            }
            None => {
                // No heap, or no room in it: private memory, written
                // through the engine.
                let base = alloc_private(size);
                if base.is_null() {
                    return base;
                }
                (base, rt.p2p().expose(base, size), None)
            }
        };
        rw.blocks.insert(base as usize, Block { key, heap });
        rw.keys.insert(key, (base as usize, size));
        // SAFETY: checked non-null; the caller's out-parameter.
        unsafe {
            *net = RwapiNet {
                addr: base as u64,
                key,
                node: rt.rank() as i32,
            };
        }
        base
    })
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_free(ptr: *mut u8) -> c_int {
    with_rw("rwapi_free", ERR_INIT, |rt, rw| {
        let Some(block) = rw.blocks.remove(&(ptr as usize)) else {
            return ERR_ARG;
        };
        rt.p2p().unexpose(block.key);
        rw.keys.remove(&block.key);
        // Writes from this block may still be reading it.
        let pending: Vec<u64> = rw.outstanding.iter().copied().collect();
        rt.p2p().wait_for(|p| {
            pending
                .iter()
                .all(|&sid| p.op_state(OpId(sid)) != Some(OpState::Pending))
        });
        if let Some(b) = &block.heap {
            // Direct writers are refused from now on; its space is reused
            // once none is still copying.
            if let Some(h) = rw.direct.heap.as_mut() {
                h.free(b);
            }
            return OK;
        }
        // SAFETY: allocated by rwapi_alloc (`alloc_private`, released by
        // free), and no longer exposed or read by any write in flight.
        unsafe { libc::free(ptr.cast()) };
        OK
    })
}

#[no_mangle]
pub extern "C" fn rwapi_send(node: c_int, small: RwapiSmall) -> c_int {
    with_rw_after_write("rwapi_send", ERR_INIT, |rt, rw| {
        if node < 0 || node as u32 >= rt.size() {
            return ERR_NODE;
        }
        // Announces the write just made to it (which may be waiting for
        // this message, to leave together), or not.
        if let Some(last) = rw.wrote_last.take() {
            rw.notice_follows[last as usize] = last == node as u32;
        }
        match rt.p2p().send_small(node as u32, &small.bytes) {
            Ok(()) => OK,
            Err(e) => neg(e.class),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_receive(node: *mut c_int, small: *mut RwapiSmall) -> c_int {
    if node.is_null() || small.is_null() {
        return ERR_ARG;
    }
    with_rw("rwapi_receive", ERR_INIT, |rt, rw| {
        // A writer on this host may be sharing a large write with us.
        rw.direct.map_askers(rt.p2p());
        let helped = rw.direct.help_writers(rt.rank());
        let p2p = rt.p2p();
        p2p.engine().counters_mut().rwapi_helped += helped;
        let mut moved = helped > 0;
        let got = match p2p.take_small() {
            Some(m) => Some(m),
            None => {
                moved |= p2p.progress();
                // Nothing moved, nothing new to take.
                if moved {
                    p2p.take_small()
                } else {
                    None
                }
            }
        };
        match got {
            None => {
                // A program polling for messages should not starve the peer
                // (or the kernel thread delivering its data) on a busy
                // machine: after a while of nothing, each empty poll yields.
                // A poll that moved data (a write deposited, a frame sent)
                // was not empty: yielding then only delays the caller's
                // look at what just landed (a flag at the end of a write).
                if !moved {
                    rw.idle(rt);
                }
                0
            }
            Some((from, bytes)) => {
                rw.idle_polls = 0;
                // SAFETY: checked non-null; the caller's out-parameters.
                unsafe {
                    *node = from as c_int;
                    *small = RwapiSmall { bytes };
                }
                1
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn rwapi_write(node: c_int, local: RwapiNet, remote: RwapiNet, size: usize) -> i64 {
    with_rw_after_write("rwapi_write", i64::from(ERR_INIT), |rt, rw| {
        let me = rt.rank();
        if node < 0 || node as u32 >= rt.size() {
            return i64::from(ERR_NODE);
        }
        if remote.node != node || local.node != me as i32 {
            return i64::from(ERR_ARG);
        }
        let Some(&(base, len)) = rw.keys.get(&local.key) else {
            return i64::from(-ErrorClass::Win.code());
        };
        let len = len as u64;
        let inside = local
            .addr
            .checked_sub(base as u64)
            .and_then(|off| off.checked_add(size as u64))
            .is_some_and(|end| end <= len);
        if !inside {
            return i64::from(ERR_RANGE);
        }
        // Writes to one node in a row wait together for the message that
        // may announce them; one to another node ends the wait of the last.
        if let Some(prev) = rw.wrote_last.replace(node as u32) {
            if prev != node as u32 {
                rw.notice_follows[prev as usize] = false;
            }
        }
        let direct = rwheap::is_heap_key(remote.key) && !rw.dirty.contains(node as u32);
        if direct {
            if let Some(sid) = direct_write(rt, rw, node as u32, local, remote, size) {
                return sid;
            }
        }
        if rw.outstanding.len() >= FORGET_BATCH && rw.outstanding.len() % FORGET_BATCH == 0 {
            rw.forget_done(rt);
        }
        // SAFETY: the source lies inside a live local block (checked), which
        // rwapi_free keeps alive until no write reads it.
        let r = unsafe {
            rt.p2p().put_untracked(
                node as u32,
                remote.key,
                remote.addr,
                local.addr as usize as *const u8,
                size,
                rw.notice_follows[node as usize],
            )
        };
        match r {
            Ok((OpId(sid), left)) => {
                rt.p2p().engine().counters_mut().rwapi_engine += 1;
                rw.dirty.insert(node as u32);
                if !left {
                    rw.outstanding.push_back(sid);
                }
                rw.max_sid = rw.max_sid.max(sid);
                sid as i64
            }
            Err(e) => i64::from(neg(e.class)),
        }
    })
}

/// Copies a write straight into `node`'s heap if it can be mapped; its
/// send id (complete at once, or refused), or `None`: use the engine.
fn direct_write(
    rt: &mut Runtime,
    rw: &mut RwState,
    node: u32,
    local: RwapiNet,
    remote: RwapiNet,
    size: usize,
) -> Option<i64> {
    let me = rt.rank();
    let p2p = rt.p2p();
    let gone = p2p.peer_known_gone(node);
    // Decides the path; looked at again below, with the writer's own heap
    // beside it (`target`'s answer borrows all of `Direct`).
    rw.direct.target(p2p, node)?;
    let d = &rw.direct;
    let (map, owner_addr) = match &d.paths[node as usize] {
        Path::Mapped(m) => (m, d.infos[node as usize].addr),
        Path::Own => (d.heap.as_ref()?.mapping(), d.infos[node as usize].addr),
        Path::Untried | Path::Engine => return None,
    };
    // The first large write to a target asks it to map this rank's heap,
    // so that it can help (a target that writes back maps it anyway).
    let ask = matches!(d.paths[node as usize], Path::Mapped(_))
        && d.share
        && d.heap.is_some()
        && size >= rwheap::HELP_MIN
        && !d.asked.contains(node)
        && rwheap::ask_help(map, me);
    // A large write to another rank is shared with it if it polls.
    // Asks the kernel (the peer's pidfd): a target that died holding a
    // chunk would otherwise never be noticed here.
    let mut alive = || {
        rt.p2p().progress();
        rt.p2p().peer_gone(node).is_none()
    };
    let share = match (&d.paths[node as usize], &d.heap) {
        (Path::Mapped(_), Some(own)) if d.share => Some(rwheap::Share {
            own: own.mapping(),
            own_addr: own.addr(),
            target: node,
            alive: &mut alive,
        }),
        _ => None,
    };
    let outcome = if gone {
        Err(ErrorClass::ProcAborted)
    } else {
        // SAFETY: the source lies inside a live local block (checked by
        // the caller), which stays allocated during the call.
        unsafe {
            rwheap::write(
                map,
                owner_addr,
                remote.key,
                remote.addr,
                local.addr as usize as *const u8,
                size,
                share,
            )
        }
        .map_err(|r| match r {
            Refused::Region => ErrorClass::Win,
            Refused::Range => ErrorClass::RmaRange,
            Refused::Gone => ErrorClass::ProcAborted,
        })
    };
    rw.direct.next_sid += 1;
    let sid = DIRECT_SID | rw.direct.next_sid;
    rt.p2p().engine().counters_mut().rwapi_direct += 1;
    if let Err(class) = outcome {
        rw.failed.insert(sid, class);
        rw.first_error.get_or_insert(class);
    }
    rw.direct.dirty.insert(node);
    if ask {
        rw.direct.asked.insert(node);
    }
    Some(sid as i64)
}

#[no_mangle]
pub extern "C" fn rwapi_issent(sid: i64) -> c_int {
    with_rw("rwapi_issent", ERR_INIT, |rt, rw| {
        if sid > 0 && sid as u64 & DIRECT_SID != 0 {
            // Direct writes are complete when issued.
            let n = sid as u64 & !DIRECT_SID;
            if n == 0 || n > rw.direct.next_sid {
                return ERR_SID;
            }
            // As a write found done: the program is active, polls need
            // not yield yet.
            rw.idle_polls = 0;
            return rw.failed.get(&(sid as u64)).map_or(1, |&c| neg(c));
        }
        if sid <= 0 || sid as u64 > rw.max_sid {
            return ERR_SID;
        }
        let id = OpId(sid as u64);
        let p2p = rt.p2p();
        let mut moved = false;
        if p2p.op_state(id) == Some(OpState::Pending) {
            moved = p2p.progress();
        }
        match p2p.op_state(id) {
            Some(OpState::Pending) => {
                // As in rwapi_receive: only a poll that moved nothing yields.
                if !moved {
                    rw.idle(rt);
                }
                0
            }
            Some(OpState::LocalDone | OpState::Done(None)) => {
                rw.idle_polls = 0;
                1
            }
            Some(OpState::Done(Some(e))) => neg(e.class),
            None => {
                // Done and forgotten (or never kept: it left at once). As
                // for a write found done, polls need not yield yet.
                rw.idle_polls = 0;
                rw.forget_done(rt);
                rw.failed.get(&(sid as u64)).map_or(1, |&c| neg(c))
            }
        }
    })
}

/// Frees what RWAPI holds when MPI finalizes without rwapi_finalize.
pub fn release(rw: Option<RwState>) {
    if let Some(rw) = rw {
        for (base, b) in rw.blocks {
            if b.heap.is_some() {
                continue; // unmapped with the heap
            }
            // SAFETY: allocated by rwapi_alloc (`alloc_private`, released
            // by free); the engine is gone (MPI finalized) or no longer
            // exposes it (rwapi_finalize withdrew every block after the
            // closing barrier), so nothing reads or writes it any more.
            unsafe { libc::free(base as *mut libc::c_void) };
        }
    }
}

//! The Remote-Write API (`include/rwapi.h`, from Ben Fredj and Renault's
//! "Performance Evaluation of Distributed Computing over Heterogeneous
//! Networks") on the engine's one-sided operations: blocks peers may write
//! into are exposed regions, writes are one-sided puts, small messages
//! travel beside them. Errors are MPI error classes returned to the caller
//! (rwapi.h negates them), never raised through MPI's error handlers.
//!
//! Between ranks on one host a write is instead a copy straight into the
//! target's memory (the direct path, `direct.rs` and `heap.rs`): blocks come
//! from a heap each rank shares as a memory file, writers map their peers'
//! heaps on first use and check each write against the owner's region
//! table, and the target takes no part. A write goes through the engine
//! when the target's block is not in its heap (it did not fit), when the
//! heap could not be mapped (or `rwapi_direct=0`), when the target is on
//! another host, and, to keep writes to one node in order, when writes to
//! that node went through the engine since the last flush.
//!
//! The runtime owns the state ([`Rwapi`]): it starts it
//! ([`crate::Runtime::rwapi_init`]), lends it with its engine for one call
//! ([`crate::Runtime::rwapi`], a [`RwapiCall`]) and ends it
//! ([`crate::Runtime::rwapi_finalize`]).

mod direct;
mod heap;
mod node_set;

use std::collections::VecDeque;

use crate::error::{Error, ErrorClass};
use crate::int_map::IntMap;
use crate::p2p::{OpId, OpState, P2p};
use crate::params::Settings;

use direct::Direct;
use heap::HeapBlock;
pub(crate) use heap::HeapInfo;
use node_set::NodeSet;

/// The network address of memory from [`RwapiCall::alloc`] (rwapi.h's
/// `rwapi_net`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Net {
    /// The address in the owner's memory.
    pub addr: u64,
    /// The block's key at its owner.
    pub key: u32,
    /// The owner.
    pub node: u32,
}

/// Why RWAPI did not start.
#[derive(Debug)]
pub enum StartError {
    /// The job runs replicas: remote writes are not replayed from another
    /// replica.
    Replicated,
    /// Learning the other nodes' heaps failed.
    Failed(Error),
}

/// Blocks are cache-line aligned (page-aligned from a page up) and zeroed.
const BLOCK_ALIGN: usize = 4096;

/// A zeroed private block (not in the heap) of `len` (> 0) bytes, from
/// [`crate::pages::HUGE_PAGE`] on backed by transparent huge pages, as
/// MPI_Alloc_mem's are (a 4 MiB RWAPI round trip over TCP loopback about
/// 5% faster here). Released with `free`; null if out of memory.
fn alloc_private(len: usize) -> *mut u8 {
    let base = crate::pages::alloc_pages(len, BLOCK_ALIGN).cast::<u8>();
    if !base.is_null() {
        // Zeroed after the huge-page advice: the first touch maps them.
        // SAFETY: `base` starts `len` bytes just allocated.
        unsafe { std::ptr::write_bytes(base, 0, len) };
    }
    base
}

/// Empty receive calls in a row before each further one yields the CPU (a
/// few tens of microseconds of polling).
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

/// One rank's RWAPI: its blocks, its writes not yet known done, and the
/// direct path.
pub struct Rwapi {
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
    /// The first refusal not yet reported by a flush.
    first_error: Option<ErrorClass>,
    /// Calls in a row that found nothing to receive.
    idle_polls: u32,
    /// Nodes written to through the engine since the last flush.
    dirty: NodeSet,
    direct: Direct,
    /// The node the last call wrote to, when that call was a write.
    wrote_last: Option<u32>,
    /// By node: whether the last write to it was followed at once by a
    /// small message to it (Ben Fredj and Renault's pattern: write, then say
    /// so). Then its next write through the engine waits for that message,
    /// and the two leave in one system call over TCP; a write followed by
    /// anything else still leaves at the next call.
    notice_follows: Vec<bool>,
}

impl Rwapi {
    /// RWAPI's state over `p2p`, with this rank's heap made (see
    /// `Direct::new`); the runtime fills in every node's heap through
    /// [`Rwapi::heap_exchange`] before the first call.
    pub(crate) fn new(p2p: &P2p, settings: &Settings) -> Rwapi {
        let n = p2p.size() as usize;
        Rwapi {
            blocks: IntMap::default(),
            keys: IntMap::default(),
            outstanding: VecDeque::new(),
            max_sid: 0,
            failed: IntMap::default(),
            first_error: None,
            idle_polls: 0,
            dirty: NodeSet::new(n),
            direct: Direct::new(p2p, settings),
            wrote_last: None,
            notice_follows: vec![false; n],
        }
    }

    /// This rank's heap as its peers need it, and the room for every
    /// node's (indexed by rank), which an allgather fills.
    pub(crate) fn heap_exchange(&mut self) -> (HeapInfo, &mut [HeapInfo]) {
        self.direct.heap_exchange()
    }

    /// Withdraws every block from the engine: nothing may reach them once
    /// they are freed (when this state is dropped).
    pub(crate) fn withdraw(&self, p2p: &mut P2p) {
        for b in self.blocks.values() {
            p2p.unexpose(b.key);
        }
    }
}

impl Drop for Rwapi {
    /// Frees the private blocks; heap blocks go with the heap.
    fn drop(&mut self) {
        for (&base, b) in &self.blocks {
            if b.heap.is_some() {
                continue; // unmapped with the heap
            }
            // SAFETY: allocated by `alloc` (`alloc_private`, released by
            // free). The runtime drops this state only once nothing reads
            // or writes the block any more: after its engine (a field
            // declared before), or after rwapi_finalize withdrew every
            // block behind the closing barrier.
            unsafe { libc::free(base as *mut libc::c_void) };
        }
    }
}

/// RWAPI for one call: the state and the engine beneath it.
///
/// Every call but [`RwapiCall::write`] and [`RwapiCall::send`] comes
/// between the last write and any notice of it, so that write was not
/// announced at once: the next one to its node leaves without waiting (see
/// `notice_follows` in [`Rwapi`]).
///
/// The calls a program polls or streams with are `#[inline]`: the C
/// functions over them then compile as one body, without a call into
/// another crate on each poll.
pub struct RwapiCall<'a> {
    rw: &'a mut Rwapi,
    p2p: &'a mut P2p,
}

impl<'a> RwapiCall<'a> {
    pub(crate) fn new(rw: &'a mut Rwapi, p2p: &'a mut P2p) -> RwapiCall<'a> {
        RwapiCall { rw, p2p }
    }

    /// Any call but a write or a small message: the last write was not
    /// followed at once by its notice.
    fn not_a_notice(&mut self) {
        if let Some(node) = self.rw.wrote_last.take() {
            self.rw.notice_follows[node as usize] = false;
        }
    }

    /// This node.
    pub fn rank(&mut self) -> u32 {
        self.not_a_notice();
        self.p2p.rank()
    }

    /// Nodes in the job.
    pub fn size(&mut self) -> u32 {
        self.not_a_notice();
        self.p2p.size()
    }

    /// A poll found nothing and moved nothing. A program polling in a loop
    /// must not starve the peer on a busy machine, nor the kernel thread
    /// that finishes loopback TCP deliveries: with TCP in use every
    /// [`TCP_IDLE_POLLS_PER_YIELD`]th empty poll yields the CPU, and only
    /// that one, as MPI's waits do (yielding on every one made an 8-byte TCP
    /// round trip 7% slower than MPI's, and yielding on every one after
    /// [`IDLE_POLLS_BEFORE_YIELD`] made 4-32 KiB round trips 5-20% slower);
    /// otherwise each one after a while of nothing.
    fn idle(&mut self) {
        let rw = &mut *self.rw;
        rw.idle_polls = rw.idle_polls.saturating_add(1);
        let yield_now = if self.p2p.engine().tcp_active() {
            rw.idle_polls.is_multiple_of(TCP_IDLE_POLLS_PER_YIELD)
        } else {
            rw.idle_polls > IDLE_POLLS_BEFORE_YIELD
        };
        if yield_now {
            std::thread::yield_now();
        }
    }

    /// Forgets finished writes (the engine keeps each until asked), keeping
    /// refusals for `issent` and `flush`.
    fn forget_done(&mut self) {
        let p2p = &mut *self.p2p;
        let failed = &mut self.rw.failed;
        let first = &mut self.rw.first_error;
        // Refusals that came after their write was forgotten.
        for (OpId(sid), e) in p2p.take_late_errors() {
            failed.insert(sid, e.class);
            first.get_or_insert(e.class);
        }
        self.rw
            .outstanding
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

    /// Waits until every write is done at its target; the first refusal
    /// not yet reported, or else a target found gone.
    pub fn flush(&mut self) -> Result<(), ErrorClass> {
        self.not_a_notice();
        let mut pending: Vec<u64> = self.rw.outstanding.iter().copied().collect();
        // Writes are answered only when refused: a sync per node written to
        // says when all of them are carried out (refusals arrive before it).
        let mut syncs = Vec::new();
        for node in self.rw.dirty.take() {
            match self.p2p.sync(node) {
                Ok(OpId(id)) => syncs.push(id),
                Err(e) => return Err(e.class),
            }
        }
        pending.extend(&syncs);
        self.p2p.wait_for(|p| {
            pending.iter().all(|&sid| {
                !matches!(
                    p.op_state(OpId(sid)),
                    Some(OpState::Pending | OpState::LocalDone)
                )
            })
        });
        let mut gone = None;
        // Direct writes were complete when issued; a node that has died
        // since (as far as anyone can tell yet) is still reported.
        for node in self.rw.direct.dirty.take() {
            if let Some(e) = self.p2p.peer_gone(node) {
                gone.get_or_insert(e.class);
            }
        }
        for id in syncs {
            if let Some(Err(e)) = self.p2p.op_take(OpId(id)) {
                gone.get_or_insert(e.class);
            }
        }
        self.forget_done();
        match self.rw.first_error.take().or(gone) {
            Some(class) => Err(class),
            None => Ok(()),
        }
    }

    /// A zeroed block of `size` (> 0) bytes peers may write into, and its
    /// network address; `None` if out of memory.
    pub fn alloc(&mut self, size: usize) -> Option<(*mut u8, Net)> {
        self.not_a_notice();
        let rw = &mut *self.rw;
        let (base, key, heap) = match rw.direct.heap.as_mut().and_then(|h| h.alloc(size)) {
            Some(b) => {
                // Exposed to the engine too, for writers that cannot map the heap.
                let exposed = self.p2p.expose_keyed(b.key, b.ptr, size);
                debug_assert!(exposed, "heap keys are unique");
                (b.ptr, b.key, Some(b))
            }
            None => {
                // No heap, or no room in it: private memory, written
                // through the engine.
                let base = alloc_private(size);
                if base.is_null() {
                    return None;
                }
                (base, self.p2p.expose(base, size), None)
            }
        };
        rw.blocks.insert(base as usize, Block { key, heap });
        rw.keys.insert(key, (base as usize, size));
        let net = Net {
            addr: base as u64,
            key,
            node: self.p2p.rank(),
        };
        Some((base, net))
    }

    /// Frees a block from [`RwapiCall::alloc`] (`Arg`: not one); writes
    /// to it are refused from now on.
    pub fn free(&mut self, ptr: *mut u8) -> Result<(), ErrorClass> {
        self.not_a_notice();
        let rw = &mut *self.rw;
        let Some(block) = rw.blocks.remove(&(ptr as usize)) else {
            return Err(ErrorClass::Arg);
        };
        self.p2p.unexpose(block.key);
        rw.keys.remove(&block.key);
        // Writes from this block may still be reading it.
        let pending: Vec<u64> = rw.outstanding.iter().copied().collect();
        self.p2p.wait_for(|p| {
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
            return Ok(());
        }
        // SAFETY: allocated by `alloc` (`alloc_private`, released by free),
        // and no longer exposed or read by any write in flight.
        unsafe { libc::free(ptr.cast()) };
        Ok(())
    }

    /// Sends 16 bytes to `node` (`Rank`: no such node).
    #[inline]
    pub fn send(&mut self, node: u32, small: &[u8; 16]) -> Result<(), ErrorClass> {
        if node >= self.p2p.size() {
            return Err(ErrorClass::Rank);
        }
        // Announces the write just made to it (which may be waiting for
        // this message, to leave together), or not.
        if let Some(last) = self.rw.wrote_last.take() {
            self.rw.notice_follows[last as usize] = last == node;
        }
        self.p2p.send_small(node, small).map_err(|e| e.class)
    }

    /// The oldest small message pending, from any node, and its sender.
    #[inline]
    pub fn receive(&mut self) -> Option<(u32, [u8; 16])> {
        self.not_a_notice();
        // A writer on this host may be sharing a large write with us.
        self.rw.direct.map_askers(self.p2p);
        let helped = self.rw.direct.help_writers(self.p2p.rank());
        let p2p = &mut *self.p2p;
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
                    self.idle();
                }
                None
            }
            Some(m) => {
                self.rw.idle_polls = 0;
                Some(m)
            }
        }
    }

    /// Copies `size` bytes from the local block at `local` into `node`'s
    /// block at `remote`; its send id. Refused at once: `Rank` (no such
    /// node), `Arg` (the addresses are not this node's and `node`'s),
    /// `Win` (`local` is not a live block), `RmaRange` (outside it).
    #[inline]
    pub fn write(
        &mut self,
        node: u32,
        local: Net,
        remote: Net,
        size: usize,
    ) -> Result<u64, ErrorClass> {
        let me = self.p2p.rank();
        if node >= self.p2p.size() {
            return Err(ErrorClass::Rank);
        }
        if remote.node != node || local.node != me {
            return Err(ErrorClass::Arg);
        }
        let rw = &mut *self.rw;
        let Some(&(base, len)) = rw.keys.get(&local.key) else {
            return Err(ErrorClass::Win);
        };
        let len = len as u64;
        let inside = local
            .addr
            .checked_sub(base as u64)
            .and_then(|off| off.checked_add(size as u64))
            .is_some_and(|end| end <= len);
        if !inside {
            return Err(ErrorClass::RmaRange);
        }
        // Writes to one node in a row wait together for the message that
        // may announce them; one to another node ends the wait of the last.
        if let Some(prev) = rw.wrote_last.replace(node) {
            if prev != node {
                rw.notice_follows[prev as usize] = false;
            }
        }
        let direct = heap::is_heap_key(remote.key) && !rw.dirty.contains(node);
        if direct {
            if let Some(sid) = self.write_direct(node, local, remote, size) {
                return Ok(sid);
            }
        }
        let outstanding = self.rw.outstanding.len();
        if outstanding >= FORGET_BATCH && outstanding.is_multiple_of(FORGET_BATCH) {
            self.forget_done();
        }
        let rw = &mut *self.rw;
        // SAFETY: the source lies inside a live local block (checked), which
        // `free` keeps alive until no write reads it.
        let r = unsafe {
            self.p2p.put_untracked(
                node,
                remote.key,
                remote.addr,
                local.addr as usize as *const u8,
                size,
                rw.notice_follows[node as usize],
            )
        };
        match r {
            Ok((OpId(sid), left)) => {
                self.p2p.engine().counters_mut().rwapi_engine += 1;
                rw.dirty.insert(node);
                if !left {
                    rw.outstanding.push_back(sid);
                }
                rw.max_sid = rw.max_sid.max(sid);
                Ok(sid)
            }
            Err(e) => Err(e.class),
        }
    }

    /// Whether the local buffer of write `sid` may be reused (`Request`:
    /// no such send id; a refusal of the write, once known).
    #[inline]
    pub fn issent(&mut self, sid: u64) -> Result<bool, ErrorClass> {
        self.not_a_notice();
        let rw = &mut *self.rw;
        if sid & DIRECT_SID != 0 {
            // Direct writes are complete when issued.
            let n = sid & !DIRECT_SID;
            if n == 0 || n > rw.direct.next_sid {
                return Err(ErrorClass::Request);
            }
            // As a write found done: the program is active, polls need
            // not yield yet.
            rw.idle_polls = 0;
            return rw.failed.get(&sid).map_or(Ok(true), |&c| Err(c));
        }
        if sid == 0 || sid > rw.max_sid {
            return Err(ErrorClass::Request);
        }
        let id = OpId(sid);
        let mut moved = false;
        if self.p2p.op_state(id) == Some(OpState::Pending) {
            moved = self.p2p.progress();
        }
        match self.p2p.op_state(id) {
            Some(OpState::Pending) => {
                // As in `receive`: only a poll that moved nothing yields.
                if !moved {
                    self.idle();
                }
                Ok(false)
            }
            Some(OpState::LocalDone | OpState::Done(None)) => {
                self.rw.idle_polls = 0;
                Ok(true)
            }
            Some(OpState::Done(Some(e))) => Err(e.class),
            None => {
                // Done and forgotten (or never kept: it left at once). As
                // for a write found done, polls need not yield yet.
                self.rw.idle_polls = 0;
                self.forget_done();
                self.rw.failed.get(&sid).map_or(Ok(true), |&c| Err(c))
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The origin side of one-sided access, as the layers above see it: the
//! operations on peers' exposed memory, started on [`P2p`] and sent on its
//! outgoing path, and the regions this rank exposes.

use crate::datatype::Prim;
use crate::error::{Error, ErrorClass, Result};
use crate::ops::PredefOp;
use crate::p2p::P2p;
use crate::transport::FrameSink;
use crate::wire::{FrameKind, Header};

use super::encoding::{scattered_payload, ACC_QUIET, ACC_SCATTER, PUT_SCATTER};
use super::target::{Remote, TOKEN_BIT};
use super::{accumulate_supported, OpId, OpState, Strided};

/// One-sided operations, as the layers above see them.
impl P2p {
    /// Lets peers access `[base, base + len)`; returns the key they name it by.
    pub fn expose(&mut self, base: *mut u8, len: usize) -> u32 {
        self.m.remote.expose(base, len)
    }

    /// Lets peers access `[base, base + len)` under a key the caller chose
    /// (one with [`super::CALLER_KEY_BIT`] set, never handed out by
    /// [`P2p::expose`]); false, and nothing exposed, if the key is in use or
    /// lacks the bit.
    pub fn expose_keyed(&mut self, key: u32, base: *mut u8, len: usize) -> bool {
        self.m.remote.expose_keyed(key, base, len)
    }

    /// A key for a set of regions that changes ([`P2p::attach`],
    /// [`P2p::detach_region`]).
    pub fn expose_dynamic(&mut self) -> u32 {
        self.m.remote.expose_dynamic()
    }

    /// Adds `[base, base + len)` to dynamic key `key`'s regions.
    pub fn attach(&mut self, key: u32, base: *mut u8, len: usize) -> bool {
        self.m.remote.attach(key, base, len)
    }

    /// Removes the region starting at `base` from dynamic key `key`.
    pub fn detach_region(&mut self, key: u32, base: *const u8) -> bool {
        self.m.remote.detach(key, base)
    }

    /// Withdraws a region: later accesses to it are refused.
    pub fn unexpose(&mut self, key: u32) -> bool {
        self.m.remote.unexpose(key)
    }

    /// Starts tracking an operation to `peer` (failed at once if the peer
    /// is gone); its id.
    fn start_op(
        &mut self,
        peer: u32,
        acked: bool,
        dest: Option<(usize, usize)>,
        owned: Vec<u8>,
    ) -> u64 {
        let lost = self.m.lost[peer as usize].as_deref();
        self.m.remote.start(peer, lost, acked, dest, owned)
    }

    fn check_peer(&self, peer: u32) -> Result<()> {
        if peer >= self.size {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("rank {peer} is not in the job (size {})", self.size),
            ));
        }
        Ok(())
    }

    /// Sends a one-sided frame for operation `id` (carries it out at once
    /// when the target is this rank).
    fn send_onesided(&mut self, peer: u32, header: Header, payload: *const u8, len: usize) {
        let id = header.sreq;
        if self.m.remote.state(OpId(id)) != Some(OpState::Pending) {
            return; // already failed (peer gone)
        }
        if peer == self.rank {
            let data = if len == 0 {
                &[][..]
            } else {
                // SAFETY: the caller of the public operation promised
                // `payload` is valid for `len` bytes.
                unsafe { std::slice::from_raw_parts(payload, len) }
            };
            if let Err(e) = self.m.remote.on_self(&header, data, &mut self.m.outbox) {
                self.m
                    .remote
                    .finish(id, Some(Error::new(ErrorClass::Intern, e)));
            }
            self.flush_outbox();
            return;
        }
        // Runs of puts and plain accumulates (neither answered unless
        // refused) may leave together over TCP (see `Engine::send_batched`):
        // completion is asked for later anyway, and one stream keeps them
        // in order.
        let token = Some(TOKEN_BIT | id);
        let quiet_acc = header.kind == FrameKind::Acc && header.tag & ACC_QUIET != 0;
        let sent = if header.kind == FrameKind::Put || quiet_acc {
            self.engine
                .send_batched(peer, &header, payload, len, token, false)
        } else {
            self.engine.send(peer, &header, payload, len, token)
        };
        match sent {
            Ok(crate::transport::SendState::Done) => self.m.remote.local_done(id),
            Ok(crate::transport::SendState::Queued) => {}
            Err(e) => {
                let msg = e.message.clone();
                FrameSink::on_peer_lost(&mut self.m, peer, &msg);
            }
        }
    }

    fn header(kind: FrameKind, key: u32, tag: i32, len: usize, id: u64, addr: u64) -> Header {
        Header {
            kind,
            context: key,
            src: 0,
            tag,
            len: len as u64,
            sreq: id,
            rreq: addr,
        }
    }

    /// Writes `len` bytes from `data` to `addr` in peer's region `key`.
    /// The operation is done once `data` may be reused; the target answers
    /// only a refusal, which the operation's state shows if it has not been
    /// taken yet, and [`P2p::take_late_errors`] otherwise. [`P2p::sync`]
    /// waits until the target has carried it out.
    ///
    /// # Safety
    /// `data` must stay valid for reads of `len` bytes until the operation
    /// is no longer [`OpState::Pending`].
    pub unsafe fn put(
        &mut self,
        peer: u32,
        key: u32,
        addr: u64,
        data: *const u8,
        len: usize,
    ) -> Result<OpId> {
        self.check_peer(peer)?;
        let id = self.start_op(peer, false, None, Vec::new());
        let h = Self::header(FrameKind::Put, key, 0, len, id, addr);
        self.send_onesided(peer, h, data, len);
        Ok(OpId(id))
    }

    /// A write as [`P2p::put`], for callers that keep no record of the
    /// writes that have left: when the transport takes the whole frame at
    /// once (nothing queued before it), the operation is over when this
    /// returns and the engine keeps nothing of it (its state is `None`
    /// from the start; a refusal arrives through
    /// [`P2p::take_late_errors`]); otherwise it is tracked as a put is.
    /// Returns its id and whether it is over already. This spares a write
    /// that leaves at once the operation table, the per-peer counts and
    /// the caller's later look-ups. Like a put, a write in a run of them
    /// may wait over TCP to leave with the others in one system call (see
    /// [`crate::progress::Engine::send_batched`]); with `hold` it waits
    /// over TCP even when it leads a run, for a frame its caller will send
    /// at once (a small message announcing it) to take it along.
    ///
    /// # Safety
    /// As [`P2p::put`].
    pub unsafe fn put_untracked(
        &mut self,
        peer: u32,
        key: u32,
        addr: u64,
        data: *const u8,
        len: usize,
        hold: bool,
    ) -> Result<(OpId, bool)> {
        self.check_peer(peer)?;
        if peer == self.rank || self.m.lost[peer as usize].is_some() {
            // SAFETY: forwarded from the caller.
            return unsafe { self.put(peer, key, addr, data, len) }.map(|id| (id, false));
        }
        let id = self.m.remote.next_id();
        let h = Self::header(FrameKind::Put, key, 0, len, id, addr);
        match self
            .engine
            .send_batched(peer, &h, data, len, Some(TOKEN_BIT | id), hold)
        {
            Ok(crate::transport::SendState::Done) => Ok((OpId(id), true)),
            Ok(crate::transport::SendState::Queued) => {
                self.m.remote.track(id, peer, None, false, None, Vec::new());
                Ok((OpId(id), false))
            }
            Err(e) => {
                // Tracked first, so that the loss fails it with the others.
                self.m.remote.track(id, peer, None, false, None, Vec::new());
                let msg = e.message.clone();
                FrameSink::on_peer_lost(&mut self.m, peer, &msg);
                Ok((OpId(id), false))
            }
        }
    }

    /// Writes the data of scattered target `blocks` (packed in their order,
    /// `len` bytes at `data`) into peer's region `key` in one frame; as
    /// [`P2p::put`] otherwise. The target writes all blocks or, if one is
    /// outside its memory, none.
    ///
    /// # Safety
    /// `data` must be valid for reads of `len` bytes now (it is copied).
    pub unsafe fn put_scattered(
        &mut self,
        peer: u32,
        key: u32,
        blocks: &[Strided],
        data: *const u8,
        len: usize,
    ) -> Result<OpId> {
        self.check_peer(peer)?;
        let payload = scattered_payload(blocks, Some((data, len)))?;
        let (ptr, plen) = (payload.as_ptr(), payload.len());
        // The payload's heap buffer stays put while the operation owns it.
        let id = self.start_op(peer, false, None, payload);
        let h = Self::header(FrameKind::Put, key, PUT_SCATTER, plen, id, 0);
        self.send_onesided(peer, h, ptr, plen);
        Ok(OpId(id))
    }

    /// [`P2p::accumulate`] on scattered target `blocks` in one frame: `data`
    /// holds their data packed in order (`None` for `MPI_NO_OP`, which only
    /// fetches: a scattered read), `fetch` receives their previous contents
    /// packed the same way.
    ///
    /// # Safety
    /// `data` valid for reads of the blocks' total size now (it is copied);
    /// `fetch` valid for writes of as many bytes until done.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn accumulate_scattered(
        &mut self,
        peer: u32,
        key: u32,
        blocks: &[Strided],
        op: PredefOp,
        prim: Prim,
        data: Option<*const u8>,
        fetch: Option<*mut u8>,
    ) -> Result<OpId> {
        self.check_peer(peer)?;
        let tag = checked_acc_tag(op, prim, fetch.is_some())?;
        let total: usize = blocks.iter().map(Strided::bytes).sum();
        let payload = scattered_payload(blocks, data.map(|d| (d, total)))?;
        let (ptr, plen) = (payload.as_ptr(), payload.len());
        let dest = fetch.map(|p| (p as usize, total));
        let id = self.start_op(peer, fetch.is_some(), dest, payload);
        let h = Self::header(FrameKind::Acc, key, tag | ACC_SCATTER, plen, id, 0);
        self.send_onesided(peer, h, ptr, plen);
        Ok(OpId(id))
    }

    /// Reads `len` bytes at `addr` in peer's region `key` into `dest`.
    ///
    /// # Safety
    /// `dest` must stay valid for writes of `len` bytes until the operation
    /// is done.
    pub unsafe fn get(
        &mut self,
        peer: u32,
        key: u32,
        addr: u64,
        dest: *mut u8,
        len: usize,
    ) -> Result<OpId> {
        self.check_peer(peer)?;
        let id = self.start_op(peer, true, Some((dest as usize, len)), Vec::new());
        let h = Self::header(FrameKind::Get, key, 0, len, id, addr);
        self.send_onesided(peer, h, std::ptr::null(), 0);
        Ok(OpId(id))
    }

    /// Combines `len` bytes of `prim` elements from `data` into peer's
    /// memory with `op`, atomically per element with respect to other
    /// accumulates; with `fetch`, the previous contents land there.
    ///
    /// # Safety
    /// `data` valid for reads of `len` bytes until not pending; `fetch`
    /// valid for writes of `len` bytes until done.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn accumulate(
        &mut self,
        peer: u32,
        key: u32,
        addr: u64,
        op: PredefOp,
        prim: Prim,
        data: *const u8,
        len: usize,
        fetch: Option<*mut u8>,
    ) -> Result<OpId> {
        self.check_peer(peer)?;
        let tag = checked_acc_tag(op, prim, fetch.is_some())?;
        if len as u64 > crate::wire::MAX_EAGER {
            return Err(Error::new(
                ErrorClass::Count,
                "one accumulate carries at most 64 MiB",
            ));
        }
        let dest = fetch.map(|p| (p as usize, len));
        // Without a fetch it is quiet, as a put is.
        let id = self.start_op(peer, fetch.is_some(), dest, Vec::new());
        let h = Self::header(FrameKind::Acc, key, tag, len, id, addr);
        self.send_onesided(peer, h, data, len);
        Ok(OpId(id))
    }

    /// Compare-and-swap of one `prim` element at `addr`: where it equals
    /// `compare` it becomes `swap`; the previous value lands in `result`.
    ///
    /// # Safety
    /// `compare` and `swap` valid for reads of one element now; `result`
    /// valid for writes of one element until done.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn compare_and_swap(
        &mut self,
        peer: u32,
        key: u32,
        addr: u64,
        prim: Prim,
        compare: *const u8,
        swap: *const u8,
        result: *mut u8,
    ) -> Result<OpId> {
        self.check_peer(peer)?;
        let n = prim.size();
        let tag = Remote::acc_tag_for(PredefOp::Replace, prim, false, true)
            .ok_or_else(|| Error::new(ErrorClass::Type, "compare-and-swap on an opaque type"))?;
        let mut payload = Vec::with_capacity(2 * n);
        // SAFETY: the caller's promise: one element each.
        unsafe {
            payload.extend_from_slice(std::slice::from_raw_parts(compare, n));
            payload.extend_from_slice(std::slice::from_raw_parts(swap, n));
        }
        let (ptr, len) = (payload.as_ptr(), payload.len());
        // The payload's heap buffer stays put while the operation owns it.
        let id = self.start_op(peer, true, Some((result as usize, n)), payload);
        let h = Self::header(FrameKind::Acc, key, tag, len, id, addr);
        self.send_onesided(peer, h, ptr, len);
        Ok(OpId(id))
    }

    /// Done once `peer` has carried out everything this rank sent it before.
    pub fn sync(&mut self, peer: u32) -> Result<OpId> {
        self.check_peer(peer)?;
        let id = self.start_op(peer, true, None, Vec::new());
        let h = Self::header(FrameKind::Sync, 0, 0, 0, id, 0);
        self.send_onesided(peer, h, std::ptr::null(), 0);
        Ok(OpId(id))
    }

    /// Refusals of quiet operations that had already been taken.
    pub fn take_late_errors(&mut self) -> Vec<(OpId, Error)> {
        std::mem::take(&mut self.m.remote.late)
            .into_iter()
            .map(|(id, e)| (OpId(id), e))
            .collect()
    }

    /// Asks peer for a lock on its region `key`; done once granted.
    pub fn lock(&mut self, peer: u32, key: u32, exclusive: bool) -> Result<OpId> {
        self.check_peer(peer)?;
        let id = self.start_op(peer, true, None, Vec::new());
        let h = Self::header(FrameKind::Lock, key, i32::from(exclusive), 0, id, 0);
        self.send_onesided(peer, h, std::ptr::null(), 0);
        Ok(OpId(id))
    }

    /// Releases a lock on peer's region `key`; done once the target has
    /// carried out everything this rank sent it before.
    pub fn unlock(&mut self, peer: u32, key: u32) -> Result<OpId> {
        self.check_peer(peer)?;
        let id = self.start_op(peer, true, None, Vec::new());
        let h = Self::header(FrameKind::Unlock, key, 0, 0, id, 0);
        self.send_onesided(peer, h, std::ptr::null(), 0);
        Ok(OpId(id))
    }

    /// Where operation `id` is; `None` once taken or never started.
    pub fn op_state(&self, id: OpId) -> Option<OpState> {
        self.m.remote.state(id)
    }

    /// Forgets a finished operation and returns its outcome; `None` while
    /// it is still in flight.
    pub fn op_take(&mut self, id: OpId) -> Option<Result<()>> {
        self.m.remote.take(id).map(|e| e.map_or(Ok(()), Err))
    }

    /// Sends a 16-byte small message to `peer` (it never waits: the
    /// transport copies the frame if it cannot send it now). Frames to one
    /// peer keep their order, so a small message sent after a write is seen
    /// after the write is done at the target.
    pub fn send_small(&mut self, peer: u32, msg: &[u8; 16]) -> Result<()> {
        self.check_peer(peer)?;
        if let Some(why) = &self.m.lost[peer as usize] {
            return Err(Error::new(ErrorClass::ProcAborted, why.clone()));
        }
        let h = Header {
            kind: FrameKind::Small,
            context: 0,
            src: 0,
            tag: 0,
            len: 0,
            sreq: u64::from_le_bytes(msg[..8].try_into().expect("8 bytes")),
            rreq: u64::from_le_bytes(msg[8..].try_into().expect("8 bytes")),
        };
        if peer == self.rank {
            return self
                .m
                .remote
                .on_frame(peer, &h, None, &mut self.m.outbox)
                .map_err(|e| Error::new(ErrorClass::Intern, e));
        }
        match self.engine.send(peer, &h, std::ptr::null(), 0, None) {
            Ok(_) => Ok(()),
            Err(e) => {
                let msg = e.message.clone();
                FrameSink::on_peer_lost(&mut self.m, peer, &msg);
                Err(e)
            }
        }
    }

    /// The oldest small message received and not yet taken: (sender, bytes).
    pub fn take_small(&mut self) -> Option<(u32, [u8; 16])> {
        self.m.remote.smalls.pop_front()
    }

    /// Operations to `peer` not yet done at the target.
    pub fn ops_in_flight(&self, peer: u32) -> u64 {
        self.m.remote.in_flight(peer)
    }

    /// Drives progress until `id` is done at the target; returns its outcome.
    pub fn op_wait(&mut self, id: OpId) -> Result<()> {
        self.wait_for(|p| !matches!(p.op_state(id), Some(OpState::Pending | OpState::LocalDone)));
        self.op_take(id).unwrap_or(Ok(()))
    }
}

/// The `Acc` frame tag of `op` on `prim` (fetching or not), or the error
/// when the operation does not apply to that element type.
fn checked_acc_tag(op: PredefOp, prim: Prim, fetch: bool) -> Result<i32> {
    Remote::acc_tag_for(op, prim, fetch, false)
        .filter(|_| accumulate_supported(op, prim))
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Op,
                format!("{} does not apply to this element type", op.name()),
            )
        })
}

//! Clear to write: "think about who copies".
//!
//! A rendezvous receive matched while its application thread computes (by
//! the progress helper thread, by the signal handler, or as a non-blocking
//! receive is posted against an RTS that is already there) would otherwise
//! make the receiving side copy the data: out of the shared-memory rings,
//! or out of the sender's memory with a single-copy read. Either way the
//! copy competes with the computation it was meant to overlap.
//!
//! Instead the receiver answers the RTS of a sender on the same host with
//! CTW, carrying its buffer's address. The sender, which waits in the
//! library anyway, writes the data straight into that buffer with
//! `process_vm_writev`, completes its send and answers WROTE; the receive
//! completes when WROTE is handled. The receiving application thread only
//! matched and announced its buffer.
//!
//! Where the kernel refuses the write after all, the sender falls back to
//! the pipelined DATA frame the receive also accepts.

use super::{Matcher, Outgoing, P2p, ReqId, Stage};
use crate::error::{Error, ErrorClass};
use crate::transport::shm::ReadRemoteError;
use crate::wire::{FrameKind, Header};

/// A clear-to-write message this rank, its sender, must write.
pub(super) struct Push {
    sid: ReqId,
    peer: u32,
    addr: u64,
    rreq: u64,
    len: usize,
}

impl Matcher {
    /// Remembers whether receive `id`, just posted, is one its application
    /// computes beside (posted while `async_match` is set).
    pub(super) fn note_overlap(&mut self, id: ReqId) {
        let i = (id.0 & 0xffff_ffff) as usize;
        if self.overlapped.len() <= i {
            self.overlapped.resize(i + 1, false);
        }
        self.overlapped[i] = self.async_match;
    }

    /// Whether receive `id`, matching an RTS from `peer`, asks the sender to
    /// write: the sender can, and the receive is matched while its
    /// application computes or was posted to be computed beside.
    pub(super) fn wants_write(&self, id: ReqId, peer: u32) -> bool {
        self.direct_from[peer as usize]
            && (self.async_match
                || self
                    .overlapped
                    .get((id.0 & 0xffff_ffff) as usize)
                    .copied()
                    .unwrap_or(false))
    }

    /// The CTW frame asking the sender of `sreq` to write into receive `id`
    /// (matched already: its buffer, capacity and message length are set).
    pub(super) fn clear_to_write(&self, id: ReqId, sreq: u64) -> Header {
        let r = self.reqs.get(id).expect("matched receive is live");
        let take = r.msg_len.min(r.len as u64);
        Header::clear_to_write(sreq, id.0, take, r.buf as u64)
    }

    /// CTW from `peer`: schedule the write (made once the transport is free).
    pub(super) fn on_clear_to_write(&mut self, peer: u32, h: &Header) -> Result<(), String> {
        let id = ReqId(h.sreq);
        let r = self
            .reqs
            .get_mut(id)
            .ok_or_else(|| format!("CTW for unknown send request {:#x}", h.sreq))?;
        if !r.is_send
            || r.stage != Stage::SendAwaitCts
            || r.peer != Some(peer)
            || h.len > r.len as u64
        {
            return Err(format!(
                "CTW for send request {:#x}, which is not waiting for it",
                h.sreq
            ));
        }
        r.stage = Stage::SendData;
        self.pushes.push(Push {
            sid: id,
            peer,
            addr: h.write_addr(),
            rreq: h.rreq,
            len: h.len as usize,
        });
        Ok(())
    }

    /// WROTE from `peer`: the data is in the receive buffer.
    pub(super) fn on_wrote(&mut self, peer: u32, h: &Header) -> Result<(), String> {
        let id = ReqId(h.rreq);
        let r = self
            .reqs
            .get(id)
            .ok_or_else(|| format!("WROTE for unknown receive request {:#x}", h.rreq))?;
        let granted = r.msg_len.min(r.len as u64);
        if r.is_send || r.stage != (Stage::RecvAwaitData { peer }) || h.len != granted {
            return Err(format!(
                "WROTE for receive request {:#x}, which is not waiting for it",
                h.rreq
            ));
        }
        let (msg_len, cap) = (r.msg_len, r.len);
        self.complete(id, granted as usize, Matcher::truncation(msg_len, cap));
        Ok(())
    }
}

impl P2p {
    /// Receives matched from now on are matched while the application
    /// thread computes (`true`) or waits in the library (`false`); see the
    /// module documentation.
    pub fn set_async_matching(&mut self, on: bool) {
        self.m.async_match = on;
    }

    /// Posted receives that have not matched a message yet.
    pub fn posted_receives(&self) -> usize {
        self.m.posted_count
    }

    /// Whether anything can make progress between calls: requests alive (in
    /// flight, or complete and not yet waited for), memory exposed to
    /// one-sided access, or one-sided operations not done.
    pub fn progress_matters(&self) -> bool {
        !self.m.reqs.is_empty() || self.m.remote.active()
    }

    /// Makes the writes receivers asked for, completes the sends and tells
    /// the receivers (WROTE); where the kernel refuses, sends the data
    /// through the transport instead (DATA, which the receive accepts too).
    pub(super) fn run_pushes(&mut self) {
        for p in std::mem::take(&mut self.m.pushes) {
            let Some(r) = self.m.reqs.get(p.sid) else {
                continue;
            };
            if r.stage != Stage::SendData {
                continue;
            }
            let (buf, ctx, slen) = (r.buf as *const u8, r.context, r.len);
            let header = |kind| Header {
                kind,
                context: ctx,
                src: 0,
                tag: 0,
                len: p.len as u64,
                sreq: p.sid.0,
                rreq: p.rreq,
            };
            // SAFETY: `buf` is the send's buffer, readable by the MPI
            // contract until the send completes; `p.len` is at most its
            // length (checked when the receiver's clear-to-write came).
            match unsafe { self.engine.write_remote(p.peer, p.addr, buf, p.len) } {
                Ok(()) => {
                    self.m.complete(p.sid, slen, None);
                    self.m.counters.direct_writes += 1;
                    self.m
                        .outbox
                        .push(Outgoing::control(p.peer, header(FrameKind::Wrote)));
                }
                Err(ReadRemoteError::Failed(why)) if self.m.lost[p.peer as usize].is_some() => {
                    let e = Error::new(ErrorClass::ProcAborted, why);
                    self.m.complete(p.sid, 0, Some(e));
                }
                // Not permitted, or the receiver's buffer was not what it
                // said: the pipelined copy is always right.
                Err(_) => self.m.outbox.push(Outgoing {
                    peer: p.peer,
                    header: header(FrameKind::Data),
                    payload: buf,
                    len: p.len,
                    token: Some(p.sid.0),
                }),
            }
        }
    }
}

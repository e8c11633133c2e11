//! What the `signal` policy's handler does (Kumar et al.): advance rendezvous
//! starts and return.
//!
//! The handler interrupts the application thread somewhere in its own code
//! (possibly inside `malloc`, holding the allocator's lock), so the path
//! below must be async-signal-safe: it allocates nothing, frees nothing,
//! takes no lock, and makes no system call but `write` to an eventfd. It
//! therefore only takes whole control frames from the heads of the
//! shared-memory rings (peeked in place, see
//! [`crate::progress::Engine::peek_control`]), and only an RTS (or RGET)
//! that matches a posted receive and whose answer can be written straight
//! into a free cell of the ring back. The answer is CTW (the sender writes
//! the data into the receive buffer) where the sender may write, CTS (the
//! pipelined copy) elsewhere. It also takes a WROTE that completes a
//! receive without an error to build, and a CLAIMED that does (so that a
//! finished transfer does not hide the next RTS behind it). Anything else (an eager frame, an RTS
//! nobody waits for yet, a full ring, a truncated or detached receive)
//! stays where it is for the next MPI call, which is also what happens to
//! frames arriving over TCP.
//!
//! Matching touches only memory allocated before: the request slab, the
//! posted queue (removing from a `VecDeque` never allocates) and the
//! counters.

use super::{P2p, Stage};
use crate::wire::{FrameKind, Header};

impl P2p {
    /// Advances the rendezvous starts waiting at the heads of the
    /// shared-memory rings; returns how many it answered. Safe to run in a
    /// signal handler that owns the communication state (see the module
    /// documentation).
    pub fn progress_from_signal(&mut self) -> usize {
        let mut answered = 0;
        for local in 0..self.engine.local_ranks() {
            while let Some((peer, h)) = self.engine.peek_control(local) {
                let taken = match h.kind {
                    FrameKind::Wrote => self.take_wrote(local, peer, &h),
                    FrameKind::Claimed => self.take_claimed(local, peer, &h),
                    _ => self.answer_rendezvous_start(local, peer, &h),
                };
                if !taken {
                    break;
                }
                answered += 1;
            }
        }
        // Consuming a sender's frames withdrew the receive advertised to it
        // (advert.rs); one still posted goes back up now rather than at the
        // next MPI call. Stores into shared memory only: no allocation.
        if answered > 0 && !self.m.advert_wanted.is_empty() {
            self.publish_adverts();
        }
        answered
    }

    /// Takes the RTS `h` from the head of local rank `local`'s ring if a
    /// posted receive matches it and the answer leaves at once.
    fn answer_rendezvous_start(&mut self, local: u32, peer: u32, h: &Header) -> bool {
        if !matches!(h.kind, FrameKind::Rts | FrameKind::Rget)
            || self.m.lost[peer as usize].is_some()
            || !self.engine.can_send_now(peer)
            || !self.source_plausible(h.context, h.src, peer)
        {
            return false;
        }
        let Some(id) = self.m.take_posted(h.context, h.src, h.tag) else {
            return false;
        };
        self.engine.consume_control(local);
        let Some(r) = self.m.reqs.get_mut(id) else {
            return false;
        };
        r.stage = Stage::RecvAwaitData { peer };
        r.peer = Some(peer);
        r.msg_len = h.len;
        r.status.source = Some(h.src);
        r.status.tag = Some(h.tag);
        let take = h.len.min(r.len as u64);
        let reply = if self.m.direct_from[peer as usize] {
            self.m.clear_to_write(id, h.sreq)
        } else {
            Header {
                kind: FrameKind::Cts,
                context: h.context,
                src: 0,
                tag: 0,
                len: take,
                sreq: h.sreq,
                rreq: id.0,
            }
        };
        // Cannot fail: the cell is free (checked above) and only this rank
        // fills it; a fast-path send copies the header into it and nothing else.
        let _ = self.engine.send(peer, &reply, std::ptr::null(), 0, None);
        self.m.counters.signal_rndv_answered += 1;
        true
    }

    /// Completes the receive a WROTE at the head of local rank `local`'s
    /// ring names, if that needs nothing but plain stores (no error status,
    /// no slot to release).
    fn take_wrote(&mut self, local: u32, peer: u32, h: &Header) -> bool {
        let id = super::ReqId(h.rreq);
        let Some(r) = self.m.reqs.get(id) else {
            return false;
        };
        let granted = r.msg_len.min(r.len as u64);
        if r.is_send
            || r.detached
            || r.stage != (Stage::RecvAwaitData { peer })
            || h.len != granted
            || r.msg_len > r.len as u64
        {
            return false;
        }
        self.engine.consume_control(local);
        self.m.complete(id, granted as usize, None);
        true
    }

    /// Completes the receive a CLAIMED at the head of local rank `local`'s
    /// ring names, if the message was written and that needs nothing but
    /// plain stores.
    fn take_claimed(&mut self, local: u32, peer: u32, h: &Header) -> bool {
        let Some(r) = self.m.reqs.get(super::ReqId(h.rreq)) else {
            return false;
        };
        if h.sreq != 0 || r.detached || !self.m.claim_fits(peer, h) {
            return false;
        }
        if !self.engine.take_claim(local, h.rreq) {
            return false;
        }
        self.m.accept_claim(peer, h);
        self.engine.consume_control(local);
        true
    }

    /// [`super::Matcher::check_source`] without building an error message
    /// (a malformed frame is left for the next MPI call to report).
    fn source_plausible(&self, ctx: u32, src: u32, peer: u32) -> bool {
        ctx < super::MAX_CONTEXTS
            && self
                .m
                .contexts
                .get(&ctx)
                .and_then(|c| c.group.as_ref())
                .is_none_or(|g| g.get(src as usize) == Some(&peer))
    }
}

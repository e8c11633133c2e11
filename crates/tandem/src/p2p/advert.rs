//! Advertised receives: the sender matches, the receiver is not disturbed.
//!
//! A large non-blocking receive that its application computes beside
//! (posted under the `thread` or `signal` policy) would otherwise wait for
//! the sender's RTS, and someone on the receiving side (the application at
//! its next MPI call, the helper thread, or a signal handler that
//! interrupts the computation) must match it and answer. When the receive
//! names a sender on this host that may write into this process, the
//! receiver instead advertises it to that sender in shared memory (context,
//! source, tag, buffer, capacity). A sender whose message meets it claims
//! it, writes the message straight into the buffer (`process_vm_writev`)
//! and sends CLAIMED; the receive completes when CLAIMED is read. No RTS,
//! no answer, no signal.
//!
//! Matching order is kept by what is advertised and when it may be
//! claimed: a receive is advertised only if no receive before it in its
//! context could take a message from that sender (so any message from the
//! sender that matches it would match it first), and the sender claims only
//! when the receiver has consumed every frame it sent before (so no earlier
//! message could still take the receive). The shared-memory transport keeps
//! claims and the receiver's own matching apart (transport/shm.rs).

use super::{matches, Matcher, Outgoing, P2p, ReqId, Stage};
use crate::error::{Error, ErrorClass, Result};
use crate::transport::shm::{Advert, ReadRemoteError};
use crate::wire::{FrameKind, Header};

/// The key an advertised receive is published with: context and source
/// (the sender's communicator rank) in one word, the tag in the other
/// (`None`, any tag, as bit 32).
pub(super) fn advert_key(context: u32, src: u32, tag: Option<i32>) -> [u64; 2] {
    let tag = match tag {
        Some(t) => u64::from(t as u32),
        None => 1 << 32,
    };
    [u64::from(context) | u64::from(src) << 32, tag]
}

/// Whether a message with this envelope meets a receive advertised with
/// `key` (the sender's side of the match; the receiver advertised only a
/// receive every message from this sender meets first).
pub(super) fn advert_meets(key: [u64; 2], context: u32, src: u32, tag: i32) -> bool {
    let [envelope, want_tag] = key;
    envelope == u64::from(context) | u64::from(src) << 32
        && (want_tag & 1 << 32 != 0 || want_tag as u32 == tag as u32)
}

/// Posted receives looked at, at most, to decide that a new one is the
/// first its sender's messages would meet (a longer queue is not
/// advertised: the look would cost more than it saves).
const LOOK_BACK: usize = 32;

impl Matcher {
    /// Receive `id`, just posted at the back of its context's queue by
    /// rank `me`: remembers it as one to advertise if its sender may write
    /// into this process and every message from that sender meets it first.
    pub(super) fn consider_advert(&mut self, id: ReqId, me: u32, eager_limit: usize) {
        if !self.async_match {
            return;
        }
        let Some(r) = self.reqs.get(id) else {
            return;
        };
        let (Some(src), Some(peer)) = (r.src_filter, r.peer) else {
            return;
        };
        if peer == me
            || r.len <= eager_limit
            || !self
                .direct_from
                .get(peer as usize)
                .copied()
                .unwrap_or(false)
        {
            return;
        }
        let ctx = r.context;
        // One per sender: the earlier receive, unless it has matched since
        // (the signal handler completes receives without a progress call,
        // which is where the list is otherwise tidied).
        let reqs = &self.reqs;
        self.advert_wanted
            .retain(|&(_, x)| reqs.get(x).is_some_and(|e| e.stage == Stage::RecvPosted));
        if self.advert_wanted.iter().any(|&(p, _)| p == peer) {
            return;
        }
        let Some(c) = self.contexts.get(&ctx) else {
            return;
        };
        if c.posted.len() > LOOK_BACK {
            return;
        }
        let reqs = &self.reqs;
        let earlier_could_take = c.posted.iter().take_while(|&&x| x != id).any(|&x| {
            reqs.get(x)
                .is_none_or(|e| e.src_filter.is_none_or(|s| s == src))
        });
        if !earlier_could_take {
            self.advert_wanted.push((peer, id));
        }
    }

    /// Whether CLAIMED `h` from `peer` names a posted receive the message
    /// fits.
    pub(super) fn claim_fits(&self, peer: u32, h: &Header) -> bool {
        self.reqs.get(ReqId(h.rreq)).is_some_and(|r| {
            !r.is_send
                && r.stage == Stage::RecvPosted
                && r.peer == Some(peer)
                && r.context == h.context
                && matches(r.src_filter, r.tag, h.src, h.tag)
                && h.len <= r.len as u64
        })
    }

    /// CLAIMED from `peer` (the transport checked that the receive was
    /// advertised to it and claimed).
    pub(super) fn on_claimed(&mut self, peer: u32, h: &Header) -> std::result::Result<(), String> {
        if !self.claim_fits(peer, h) {
            return Err(format!(
                "CLAIMED for receive request {:#x}, which does not fit it",
                h.rreq
            ));
        }
        self.accept_claim(peer, h);
        Ok(())
    }

    /// The receive of a CLAIMED that fits is matched, and written unless a
    /// DATA frame follows. Allocates nothing (the signal handler calls it).
    pub(super) fn accept_claim(&mut self, peer: u32, h: &Header) {
        let id = ReqId(h.rreq);
        if let Some(c) = self.contexts.get_mut(&h.context) {
            if let Some(pos) = c.posted.iter().position(|&x| x == id) {
                c.posted.remove(pos);
                self.posted_count -= 1;
            }
        }
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        r.msg_len = h.len;
        r.status.source = Some(h.src);
        r.status.tag = Some(h.tag);
        if h.sreq == 0 {
            self.complete(id, h.len as usize, None);
        } else {
            r.stage = Stage::RecvAwaitData { peer };
        }
    }
}

impl P2p {
    /// Publishes the advertisements wanted whose slots are free, and forgets
    /// receives that matched meanwhile. Allocates nothing and takes no lock
    /// (the signal handler calls it).
    pub(super) fn publish_adverts(&mut self) {
        let mut i = 0;
        while let Some(&(peer, id)) = self.m.advert_wanted.get(i) {
            let Some(r) = self.m.reqs.get(id).filter(|r| r.stage == Stage::RecvPosted) else {
                self.m.advert_wanted.swap_remove(i);
                continue;
            };
            let ad = Advert {
                key: advert_key(r.context, r.src_filter.unwrap_or(0), r.tag),
                rreq: id.0,
                addr: r.buf as u64,
                cap: r.len as u64,
            };
            self.engine.publish_advert(peer, &ad);
            i += 1;
        }
    }

    /// Sends rendezvous message `id` (`len` bytes at `buf`) into the receive
    /// `rreq` at `addr` that `dest` advertised and this rank claimed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_claimed(
        &mut self,
        id: ReqId,
        dest: u32,
        env: super::Envelope,
        buf: *const u8,
        len: usize,
        rreq: u64,
        addr: u64,
    ) -> Result<ReqId> {
        let claimed = |sreq| Header {
            kind: FrameKind::Claimed,
            context: env.ctx,
            src: env.src,
            tag: env.tag,
            len: len as u64,
            sreq,
            rreq,
        };
        // SAFETY: `buf` is send `id`'s buffer of `len` bytes, readable by the
        // MPI contract until the send completes (here, or later on failure).
        match unsafe { self.engine.write_remote(dest, addr, buf, len) } {
            Ok(()) => {
                self.m.complete(id, len, None);
                self.m.counters.direct_writes += 1;
                self.m.counters.prematched_writes += 1;
                // Written and complete: a receiver that died since cannot
                // take the notice, and the send has nothing left to do.
                let _ = self
                    .engine
                    .send(dest, &claimed(0), std::ptr::null(), 0, None);
            }
            Err(ReadRemoteError::Failed(why)) if self.m.lost[dest as usize].is_some() => {
                self.m.reqs.remove(id);
                return Err(Error::new(ErrorClass::ProcAborted, why));
            }
            // Refused after all: the claimed receive takes a DATA frame.
            Err(_) => {
                if let Some(r) = self.m.reqs.get_mut(id) {
                    r.stage = Stage::SendData;
                }
                self.m.outbox.push(Outgoing::control(dest, claimed(id.0)));
                let data = Header {
                    kind: FrameKind::Data,
                    context: env.ctx,
                    src: 0,
                    tag: 0,
                    len: len as u64,
                    sreq: id.0,
                    rreq,
                };
                self.m.outbox.push(Outgoing {
                    peer: dest,
                    header: data,
                    payload: buf,
                    len,
                    token: Some(id.0),
                });
                self.flush_outbox();
            }
        }
        Ok(id)
    }

    /// Takes back the advertisement of receive `id` before it is cancelled;
    /// false if its sender claimed it first (the receive is matched).
    pub(super) fn withdraw_for_cancel(&mut self, id: ReqId, peer: u32) -> bool {
        self.engine.withdraw_advert(peer) != Some(id.0)
    }
}

#[cfg(test)]
mod tests {
    use super::{advert_key, advert_meets};

    #[test]
    fn a_message_meets_an_advertised_key_by_context_source_and_tag() {
        let key = advert_key(7, 3, Some(5));
        assert!(advert_meets(key, 7, 3, 5));
        assert!(!advert_meets(key, 8, 3, 5), "other context");
        assert!(!advert_meets(key, 7, 2, 5), "other source");
        assert!(!advert_meets(key, 7, 3, 6), "other tag");
        // Any tag, including a negative one (internal tags).
        let any = advert_key(7, 3, None);
        assert!(advert_meets(any, 7, 3, 99));
        assert!(advert_meets(any, 7, 3, -4));
        assert!(!advert_meets(any, 7, 4, 99), "any tag is not any source");
        // A tag with the high bit set is not mistaken for "any".
        let neg = advert_key(7, 3, Some(-1));
        assert!(advert_meets(neg, 7, 3, -1));
        assert!(!advert_meets(neg, 7, 3, 1));
    }
}

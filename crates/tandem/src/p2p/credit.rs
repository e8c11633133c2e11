//! Eager credit: flow control that cannot deadlock a correct program.
//!
//! A receiver keeps unexpected eager messages up to `unexpected_limit`
//! bytes. Were senders to fill that and then be held back by the
//! transport, the message the receiver waits for could sit behind the ones
//! it has no room for, and a correct program would hang. So every sender
//! holds a share of each receiver's budget (`unexpected_limit` over the
//! other ranks) as credit: an eager message spends its bytes, and once
//! credit runs short later messages go by rendezvous, which leaves only
//! their envelopes at the receiver, so matching always reaches the one it
//! waits for. The receiver gives the bytes back (a `Credit` frame) as its
//! receives consume the messages, half a share at a time.

use crate::wire::{FrameKind, Header};

/// Credit state of one rank, as sender and as receiver.
pub(super) struct Credits {
    me: u32,
    /// Each sender's share of a receiver's unexpected budget.
    window: u64,
    /// Per receiver: eager bytes this rank may still send it.
    avail: Vec<u64>,
    /// Per sender: eager bytes consumed here and not given back yet.
    owed: Vec<u64>,
}

impl Credits {
    /// Credit for a rank of `size` with `unexpected_limit` bytes of budget.
    pub(super) fn new(me: u32, size: u32, unexpected_limit: usize) -> Credits {
        let window = (unexpected_limit as u64 / u64::from(size.saturating_sub(1).max(1))).max(1);
        Credits {
            me,
            window,
            avail: vec![window; size as usize],
            owed: vec![0; size as usize],
        }
    }

    /// The job has `size` processes now (`MPI_Comm_spawn` started some):
    /// the budget is shared among more senders, and the new ones start
    /// with a full share.
    pub(super) fn grow(&mut self, size: u32, unexpected_limit: usize) {
        if size as usize <= self.avail.len() {
            return;
        }
        self.window = (unexpected_limit as u64 / u64::from(size.saturating_sub(1).max(1))).max(1);
        for a in &mut self.avail {
            *a = (*a).min(self.window);
        }
        self.avail.resize(size as usize, self.window);
        self.owed.resize(size as usize, 0);
    }

    /// Spends `len` bytes of credit towards `dest`, if it has them: whether
    /// the message may go eagerly.
    #[inline]
    pub(super) fn take(&mut self, dest: u32, len: usize) -> bool {
        match self.avail.get_mut(dest as usize) {
            Some(a) if *a >= len as u64 => {
                *a -= len as u64;
                true
            }
            _ => false,
        }
    }

    /// A receive consumed `len` bytes of an eager message from `peer`: the
    /// frame giving credit back, when half a share is due.
    #[inline]
    pub(super) fn consumed(&mut self, peer: u32, len: usize) -> Option<Header> {
        if peer == self.me {
            return None;
        }
        let o = self.owed.get_mut(peer as usize)?;
        *o += len as u64;
        if *o < self.window / 2 {
            return None;
        }
        let n = std::mem::take(o);
        Some(Header {
            kind: FrameKind::Credit,
            context: 0,
            src: 0,
            tag: 0,
            len: 0,
            sreq: n,
            rreq: 0,
        })
    }

    /// `peer` gave back `n` bytes (never more than a share in all: a
    /// confused or hostile peer cannot raise it).
    pub(super) fn returned(&mut self, peer: u32, n: u64) {
        if let Some(a) = self.avail.get_mut(peer as usize) {
            *a = a.saturating_add(n).min(self.window);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_is_spent_and_given_back_half_a_share_at_a_time() {
        // 3 ranks, 1000 bytes of budget: a share of 500 per sender.
        let mut sender = Credits::new(0, 3, 1000);
        let mut receiver = Credits::new(1, 3, 1000);
        assert!(sender.take(1, 400));
        assert!(!sender.take(1, 101), "over the share");
        assert!(sender.take(1, 100), "what is left of it");
        assert!(sender.take(2, 500), "another receiver's share is apart");
        assert!(receiver.consumed(0, 200).is_none());
        let back = receiver.consumed(0, 200).expect("half a share is due");
        assert_eq!((back.kind, back.sreq), (FrameKind::Credit, 400));
        sender.returned(1, back.sreq);
        assert!(sender.take(1, 400));
        sender.returned(1, 1 << 40);
        assert!(!sender.take(1, 501), "never more than a share");
        assert!(sender.take(1, 500));
        assert!(receiver.consumed(1, 1 << 20).is_none(), "messages to self");
    }
}

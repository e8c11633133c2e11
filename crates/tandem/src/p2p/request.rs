//! Requests: the state of one send or receive, kept in a slab and named by
//! an id that carries a generation, so a stale or forged id is detected.

use crate::error::Error;

/// Names a request. The low 32 bits index the slab, the high 32 bits are the
/// slot's generation (never 0), so ids are never small integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReqId(pub u64);

impl ReqId {
    fn new(index: u32, generation: u32) -> ReqId {
        ReqId((u64::from(generation) << 32) | u64::from(index))
    }
    fn index(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// What a completed operation reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Rank of the sender in the communicator; `None` for `MPI_PROC_NULL`.
    pub source: Option<u32>,
    /// Tag of the message; `None` for `MPI_PROC_NULL`.
    pub tag: Option<i32>,
    /// Bytes received (or sent).
    pub count: usize,
    pub cancelled: bool,
    pub error: Option<Error>,
}

/// Where an operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Eager send frame queued in the transport.
    SendQueued,
    /// Rendezvous: RTS sent, waiting for the receiver's CTS.
    SendAwaitCts,
    /// Rendezvous: data frame queued.
    SendData,
    /// Send to self held until a receive matches it (synchronous mode).
    SendSelfHeld,
    /// Receive posted, not matched.
    RecvPosted,
    /// Receive matched to an arriving eager frame that is being read.
    RecvFilling {
        peer: u32,
    },
    /// Receive matched to an RTS; CTS sent, waiting for the data frame.
    RecvAwaitData {
        peer: u32,
    },
    Complete,
}

/// One send or receive.
#[derive(Debug)]
pub struct Request {
    pub is_send: bool,
    pub stage: Stage,
    /// Matching context.
    pub context: u32,
    /// Peer world rank: the destination of a send; the source of a receive
    /// (`None` for `MPI_ANY_SOURCE` until matched).
    pub peer: Option<u32>,
    /// Source filter in communicator ranks (`None` = any).
    pub src_filter: Option<u32>,
    /// Tag filter (`None` = any) for receives; the tag of a send.
    pub tag: Option<i32>,
    /// User buffer: read by sends, written by receives.
    pub buf: *mut u8,
    /// Bytes in the send message, or the receive buffer's capacity.
    pub len: usize,
    /// Length of the message matched by a receive (may exceed `len`).
    pub msg_len: u64,
    pub status: Status,
    /// `MPI_Request_free` was called: release the slot at completion.
    pub detached: bool,
}

struct Slot {
    generation: u32,
    req: Option<Request>,
}

/// All live requests of a rank.
#[derive(Default)]
pub struct Requests {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Requests {
    #[inline]
    pub fn insert(&mut self, req: Request) -> ReqId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            let slot = &mut self.slots[i as usize];
            slot.req = Some(req);
            ReqId::new(i, slot.generation)
        } else {
            self.slots.push(Slot {
                generation: 1,
                req: Some(req),
            });
            ReqId::new((self.slots.len() - 1) as u32, 1)
        }
    }

    #[inline]
    pub fn get(&self, id: ReqId) -> Option<&Request> {
        let slot = self.slots.get(id.index())?;
        if slot.generation != id.generation() {
            return None;
        }
        slot.req.as_ref()
    }

    #[inline]
    pub fn get_mut(&mut self, id: ReqId) -> Option<&mut Request> {
        let slot = self.slots.get_mut(id.index())?;
        if slot.generation != id.generation() {
            return None;
        }
        slot.req.as_mut()
    }

    #[inline]
    pub fn remove(&mut self, id: ReqId) -> Option<Request> {
        let slot = self.slots.get_mut(id.index())?;
        if slot.generation != id.generation() || slot.req.is_none() {
            return None;
        }
        // Generation 0 is never used, so wrap from u32::MAX to 1.
        slot.generation = slot.generation.checked_add(1).unwrap_or(1);
        self.free.push(id.index() as u32);
        self.live -= 1;
        slot.req.take()
    }

    /// Number of live requests.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Ids of live requests matching `pred`.
    pub fn ids_where(&self, mut pred: impl FnMut(&Request) -> bool) -> Vec<ReqId> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.req
                    .as_ref()
                    .filter(|r| pred(r))
                    .map(|_| ReqId::new(i as u32, s.generation))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dummy() -> Request {
        Request {
            is_send: true,
            stage: Stage::Complete,
            context: 0,
            peer: Some(0),
            src_filter: None,
            tag: Some(0),
            buf: std::ptr::null_mut(),
            len: 0,
            msg_len: 0,
            status: Status::default(),
            detached: false,
        }
    }

    #[test]
    fn stale_ids_are_detected() {
        let mut r = Requests::default();
        let a = r.insert(dummy());
        assert!(a.0 > u64::from(u32::MAX), "ids are never small integers");
        assert!(r.remove(a).is_some());
        assert!(r.get(a).is_none());
        assert!(r.remove(a).is_none());
        let b = r.insert(dummy());
        assert_eq!(a.index(), b.index());
        assert_ne!(a, b);
        assert!(r.get(a).is_none());
        assert!(r.get(b).is_some());
        assert_eq!(r.len(), 1);
        assert!(r.get(ReqId(12345)).is_none());
    }
}

//! Requests of every kind behind one `MPI_Request` handle space:
//!
//! * plain point-to-point requests: the core's request id itself (always
//!   at or above 2^32), no table entry, so the common path costs nothing;
//! * everything else lives in this table, with handles
//!   `generation << 20 | index` (generation 1..4095), i.e. in
//!   [2^20, 2^32), apart from both the point-to-point ids and the
//!   predefined handles: point-to-point operations through a staging buffer
//!   (non-contiguous datatypes), collectives (schedules), operations that
//!   completed at once (buffered sends), and persistent requests.
//!
//! Completion goes through [`ready`] (read-only, usable inside the
//! runtime's wait loop, which advances collectives meanwhile) and
//! [`complete`].

use tandem::coll::{Colls, SchedId};
use tandem::p2p::{P2p, ReqId, Status};
use tandem::{Error, ErrorClass, Runtime};

use crate::abi::*;
use crate::datatype::Typed;
use crate::persistent::Spec;
use crate::state::{Fail, State};

const INDEX_BITS: u32 = 20;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
const MAX_GENERATION: u32 = 4095;

/// One operation in flight.
pub enum Op {
    P2p(ReqId),
    /// A point-to-point operation on a staging buffer; receives unpack into
    /// `unpack` at completion.
    Staged {
        inner: ReqId,
        staging: Vec<u8>,
        unpack: Option<Typed>,
    },
    Coll(SchedId),
    /// Complete from the start, with this status.
    Done(Status),
    /// A receive and a send (`MPI_Isendrecv`), complete when both are;
    /// `keep` holds the outgoing data of `MPI_Isendrecv_replace` until then.
    Pair {
        recv: Box<Op>,
        send: Box<Op>,
        keep: Vec<u8>,
    },
    /// A generalized request (grequest.rs).
    Greq(Box<crate::grequest::Greq>),
    /// Complete once these point-to-point operations, owned elsewhere
    /// (buffered sends, bsend.rs), are: `MPI_Buffer_iflush`. An id already
    /// released counts as complete.
    Watch(Vec<ReqId>),
    /// A round of a partitioned request (part.rs): not done before its
    /// transfer has started and completed.
    Part(Box<crate::part::Round>),
}

impl Op {
    fn ready(&self, p: &P2p, c: &Colls) -> bool {
        match self {
            Op::P2p(id) | Op::Staged { inner: id, .. } => p.is_complete(*id) != Some(false),
            Op::Coll(id) => c.is_complete(*id) != Some(false),
            Op::Done(_) => true,
            Op::Pair { recv, send, .. } => recv.ready(p, c) && send.ready(p, c),
            Op::Greq(g) => g.complete,
            Op::Watch(ids) => ids.iter().all(|&id| p.is_complete(id) != Some(false)),
            Op::Part(r) => r.inner.as_ref().is_some_and(|op| op.ready(p, c)),
        }
    }

    /// Releases a completed operation and returns its status.
    fn finish(self, rt: &mut Runtime) -> Status {
        match self {
            Op::P2p(id) => rt.p2p().take_if_complete(id).unwrap_or_default(),
            Op::Staged {
                inner,
                staging,
                unpack,
            } => {
                let st = rt.p2p().take_if_complete(inner).unwrap_or_default();
                if let Some(t) = unpack {
                    if !st.cancelled {
                        // SAFETY: the receive buffer is valid as its datatype
                        // describes until the request completes (MPI contract).
                        unsafe { t.unpack(&staging[..st.count.min(staging.len())]) };
                    }
                }
                st
            }
            Op::Coll(id) => {
                let r = rt.coll_take(id).unwrap_or(Ok(()));
                Status {
                    error: r.err(),
                    ..Status::default()
                }
            }
            Op::Done(st) => st,
            Op::Watch(_) => Status::default(),
            Op::Part(mut r) => match r.inner.take() {
                Some(op) => {
                    let st = op.finish(rt);
                    r.outer_status(st)
                }
                None => Status::default(),
            },
            Op::Pair { recv, send, keep } => {
                let mut st = recv.finish(rt);
                let sent = send.finish(rt);
                drop(keep);
                // The receive's status, and the first failure of the two.
                if st.error.is_none() {
                    st.error = sent.error;
                }
                st
            }
            Op::Greq(g) => g.finish(),
        }
    }

    /// The status of a completed operation, which stays in flight until
    /// released (`MPI_Request_get_status`). A staged receive unpacks its
    /// data now, so that the buffer holds it as the completion says.
    fn peek(&mut self, rt: &mut Runtime) -> Status {
        match self {
            Op::P2p(id) => rt.p2p_ref().peek_status(*id).unwrap_or_default(),
            Op::Staged {
                inner,
                staging,
                unpack,
            } => {
                let st = rt.p2p_ref().peek_status(*inner).unwrap_or_default();
                if !st.cancelled {
                    if let Some(t) = unpack.take() {
                        // SAFETY: as in `finish`; `take` makes it happen once.
                        unsafe { t.unpack(&staging[..st.count.min(staging.len())]) };
                    }
                }
                st
            }
            Op::Coll(id) => Status {
                error: rt
                    .colls_mut()
                    .schedule_mut(*id)
                    .and_then(|s| s.error().cloned()),
                ..Status::default()
            },
            Op::Done(st) => st.clone(),
            Op::Watch(_) => Status::default(),
            Op::Part(r) => match r.inner.as_mut() {
                Some(op) => {
                    let st = op.peek(rt);
                    r.outer_status(st)
                }
                None => Status::default(),
            },
            Op::Pair { recv, send, .. } => {
                let mut st = recv.peek(rt);
                let sent = send.peek(rt);
                if st.error.is_none() {
                    st.error = sent.error;
                }
                st
            }
            Op::Greq(g) => g.query(),
        }
    }

    /// Cancels the operation; an error only from a generalized request's
    /// cancel callback.
    fn cancel(&self, rt: &mut Runtime) -> Option<Error> {
        match self {
            Op::P2p(id) | Op::Staged { inner: id, .. } => {
                let _ = rt.p2p().cancel(*id);
                None
            }
            // Only its receive can be cancelled (sends cannot be).
            Op::Pair { recv, .. } => recv.cancel(rt),
            Op::Greq(g) => g.cancel(),
            Op::Part(r) => r.inner.as_ref().and_then(|op| op.cancel(rt)),
            Op::Coll(_) | Op::Done(_) | Op::Watch(_) => None,
        }
    }

    fn detach(self, rt: &mut Runtime, zombies: &mut Vec<Op>) {
        match self {
            Op::P2p(id) => {
                let _ = rt.p2p().detach(id);
            }
            Op::Coll(id) => rt.colls_mut().detach(id),
            Op::Done(_) | Op::Watch(_) => {}
            // A round not sent yet has nothing in flight.
            Op::Part(r) => {
                if let Some(op) = r.inner {
                    op.detach(rt, zombies);
                }
            }
            // Buffers they own must live until they complete.
            // A generalized request's free callback runs once it completes.
            owning @ (Op::Staged { .. } | Op::Pair { .. } | Op::Greq(_)) => zombies.push(owning),
        }
    }
}

enum Slot {
    Active(Op),
    Persistent { spec: Spec, active: Option<Op> },
}

struct Entry {
    comm: MPI_Comm,
    slot: Slot,
}

/// The table of requests that are not plain point-to-point ones.
#[derive(Default)]
pub struct ReqTable {
    entries: Vec<(u32, Option<Entry>)>,
    free: Vec<usize>,
    /// Freed with `MPI_Request_free` while still in flight.
    zombies: Vec<Op>,
}

/// A validated request handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Req {
    P2p(ReqId),
    Ext(usize),
}

impl ReqTable {
    fn insert(&mut self, comm: MPI_Comm, slot: Slot) -> MPI_Request {
        let e = Some(Entry { comm, slot });
        let i = match self.free.pop() {
            Some(i) => {
                self.entries[i].1 = e;
                i
            }
            None => {
                self.entries.push((1, e));
                self.entries.len() - 1
            }
        };
        assert!(
            i <= INDEX_MASK,
            "more than 2^20 requests of one kind in flight"
        );
        ((self.entries[i].0 as usize) << INDEX_BITS) | i
    }

    fn remove(&mut self, i: usize) -> Option<Entry> {
        let (g, e) = self.entries.get_mut(i)?;
        let out = e.take()?;
        *g = if *g >= MAX_GENERATION { 1 } else { *g + 1 };
        self.free.push(i);
        Some(out)
    }

    fn lookup(&self, h: MPI_Request) -> Option<usize> {
        if !(1 << INDEX_BITS..1 << 32).contains(&h) {
            return None;
        }
        let (i, g) = (h & INDEX_MASK, (h >> INDEX_BITS) as u32);
        match self.entries.get(i) {
            Some((gen, Some(_))) if *gen == g => Some(i),
            _ => None,
        }
    }

    /// Handle of a new active request.
    pub fn add(&mut self, comm: MPI_Comm, op: Op) -> MPI_Request {
        self.insert(comm, Slot::Active(op))
    }

    /// Handle of a new (inactive) persistent request.
    pub fn add_persistent(&mut self, comm: MPI_Comm, spec: Spec) -> MPI_Request {
        self.insert(comm, Slot::Persistent { spec, active: None })
    }

    /// The specification of persistent request `r`, to amend.
    pub fn persistent_spec_mut(&mut self, r: Req) -> Option<&mut Spec> {
        let Req::Ext(i) = r else { return None };
        match &mut self.entries[i].1.as_mut()?.slot {
            Slot::Persistent { spec, .. } => Some(spec),
            Slot::Active(_) => None,
        }
    }

    /// The persistent request behind `r`, if it is one: its spec and whether it is active.
    pub fn persistent(&self, r: Req) -> Option<(&Spec, bool)> {
        let Req::Ext(i) = r else { return None };
        match &self.entries[i].1.as_ref()?.slot {
            Slot::Persistent { spec, active } => Some((spec, active.is_some())),
            Slot::Active(_) => None,
        }
    }

    /// Removes the active (non-persistent) request `h` and returns its
    /// operation, to run on under another handle.
    pub fn take_active(&mut self, h: MPI_Request) -> Option<Op> {
        let i = self.lookup(h)?;
        if !matches!(self.entries[i].1.as_ref()?.slot, Slot::Active(_)) {
            return None;
        }
        match self.remove(i)?.slot {
            Slot::Active(op) => Some(op),
            Slot::Persistent { .. } => None,
        }
    }

    /// The operation in flight of the persistent request `r`, if started.
    pub fn active_mut(&mut self, r: Req) -> Option<&mut Op> {
        let Req::Ext(i) = r else { return None };
        match &mut self.entries[i].1.as_mut()?.slot {
            Slot::Persistent { active, .. } => active.as_mut(),
            Slot::Active(_) => None,
        }
    }

    /// The generalized request behind handle `h`, if it is one in flight.
    pub fn greq_mut(&mut self, h: MPI_Request) -> Option<&mut crate::grequest::Greq> {
        let i = self.lookup(h)?;
        match &mut self.entries[i].1.as_mut()?.slot {
            Slot::Active(Op::Greq(g)) => Some(g),
            _ => None,
        }
    }

    /// Marks a persistent request started with `op`.
    pub fn activate(&mut self, r: Req, op: Op) {
        if let Req::Ext(i) = r {
            if let Some(Entry {
                slot: Slot::Persistent { active, .. },
                ..
            }) = &mut self.entries[i].1
            {
                *active = Some(op);
            }
        }
    }
}

/// Registers `op` and returns its handle (a plain point-to-point request is
/// its own handle).
pub fn handle(s: &mut State, comm: MPI_Comm, op: Op) -> MPI_Request {
    match op {
        Op::P2p(id) => {
            s.note_request(id, comm);
            id.0 as MPI_Request
        }
        other => s.ext.reqs.add(comm, other),
    }
}

/// Validates a non-null handle.
pub fn classify(s: &mut State, h: MPI_Request) -> Result<Req, Fail> {
    if h >= 1 << 32 {
        let id = ReqId(h as u64);
        if s.rt.p2p().is_live(id) {
            return Ok(Req::P2p(id));
        }
    } else if let Some(i) = s.ext.reqs.lookup(h) {
        return Ok(Req::Ext(i));
    }
    Err(Fail::new(
        MPI_COMM_WORLD,
        ErrorClass::Request,
        format!("invalid request handle {h:#x}"),
    ))
}

/// The communicator whose error handler deals with the request's errors.
pub fn comm_of(s: &State, r: Req) -> MPI_Comm {
    match r {
        Req::P2p(id) => s.request_comm(id),
        Req::Ext(i) => s.ext.reqs.entries[i]
            .1
            .as_ref()
            .map_or(MPI_COMM_WORLD, |e| e.comm),
    }
}

/// Whether the request has completed (an inactive persistent request counts
/// as complete).
pub fn ready(t: &ReqTable, p: &P2p, c: &Colls, r: Req) -> bool {
    match r {
        Req::P2p(id) => p.is_complete(id) != Some(false),
        Req::Ext(i) => match t.entries[i].1.as_ref().map(|e| &e.slot) {
            Some(Slot::Active(op)) => op.ready(p, c),
            Some(Slot::Persistent { active, .. }) => {
                active.as_ref().is_none_or(|op| op.ready(p, c))
            }
            None => true,
        },
    }
}

/// What completing a request gives.
pub struct Completed {
    /// `None` for an inactive persistent request or a null one (empty status).
    pub status: Option<Status>,
    /// The handle stays valid (persistent requests).
    pub keep: bool,
    pub comm: MPI_Comm,
}

impl Completed {
    pub fn error(&self) -> Option<Fail> {
        self.status.as_ref()?.error.clone().map(|error| Fail {
            comm: self.comm,
            error,
        })
    }
}

/// Releases a completed request (the caller checked [`ready`]).
pub fn complete(s: &mut State, r: Req) -> Completed {
    let comm = comm_of(s, r);
    match r {
        Req::P2p(id) => Completed {
            status: Some(s.rt.p2p().take_if_complete(id).unwrap_or_default()),
            keep: false,
            comm,
        },
        Req::Ext(i) => {
            let persistent = matches!(
                s.ext.reqs.entries[i].1.as_ref().map(|e| &e.slot),
                Some(Slot::Persistent { .. })
            );
            if persistent {
                let op = match &mut s.ext.reqs.entries[i].1 {
                    Some(Entry {
                        slot: Slot::Persistent { active, .. },
                        ..
                    }) => active.take(),
                    _ => None,
                };
                return Completed {
                    status: op.map(|op| op.finish(&mut s.rt)),
                    keep: true,
                    comm,
                };
            }
            let status = match s.ext.reqs.remove(i) {
                Some(Entry {
                    slot: Slot::Active(op),
                    ..
                }) => Some(op.finish(&mut s.rt)),
                _ => None,
            };
            Completed {
                status,
                keep: false,
                comm,
            }
        }
    }
}

/// `MPI_Request_get_status` of a request [`ready`] says is complete: its
/// status (`None`: an inactive persistent request, the empty status),
/// leaving it in place.
pub fn peek(s: &mut State, r: Req) -> Option<Status> {
    match r {
        Req::P2p(id) => Some(s.rt.p2p_ref().peek_status(id).unwrap_or_default()),
        Req::Ext(i) => {
            let State { rt, ext, .. } = s;
            match &mut ext.reqs.entries[i].1.as_mut()?.slot {
                Slot::Active(op) => Some(op.peek(rt)),
                Slot::Persistent { active, .. } => active.as_mut().map(|op| op.peek(rt)),
            }
        }
    }
}

/// Waits until all (or, with `all == false`, any) of `reqs` are ready,
/// advancing everything in flight meanwhile.
pub fn wait(s: &mut State, reqs: &[Req], all: bool) {
    sweep(s);
    let State { rt, ext, .. } = s;
    let t = &ext.reqs;
    rt.wait_until(|p, c| {
        let mut it = reqs.iter().map(|&r| ready(t, p, c, r));
        if all {
            it.all(|x| x)
        } else {
            it.any(|x| x)
        }
    });
}

/// [`wait`], for a blocking call (see `state::block_on`): with `may_end`,
/// false when it stopped waiting to let other threads in.
pub fn wait_may_end(s: &mut State, reqs: &[Req], all: bool, may_end: bool) -> bool {
    if !may_end {
        wait(s, reqs, all);
        return true;
    }
    sweep(s);
    let State { rt, ext, .. } = s;
    let t = &ext.reqs;
    rt.wait_until_or_hand_over(|p, c| {
        let mut it = reqs.iter().map(|&r| ready(t, p, c, r));
        if all {
            it.all(|x| x)
        } else {
            it.any(|x| x)
        }
    })
}

/// One round of progress without blocking.
pub fn poll(s: &mut State) {
    s.rt.progress_once();
    sweep(s);
}

/// Whether `r` is ready now (no progress made).
pub fn is_ready(s: &State, r: Req) -> bool {
    ready(&s.ext.reqs, s.rt.p2p_ref(), s.rt.colls(), r)
}

/// Finishes freed requests that have completed since.
fn sweep(s: &mut State) {
    if s.ext.reqs.zombies.is_empty() {
        return;
    }
    let zombies = std::mem::take(&mut s.ext.reqs.zombies);
    for op in zombies {
        if op.ready(s.rt.p2p_ref(), s.rt.colls()) {
            op.finish(&mut s.rt);
        } else {
            s.ext.reqs.zombies.push(op);
        }
    }
}

/// `MPI_Request_free`.
pub fn free(s: &mut State, r: Req) -> Result<(), Fail> {
    match r {
        Req::P2p(id) => s.rt.p2p().detach(id).map_err(|error| Fail {
            comm: MPI_COMM_WORLD,
            error,
        }),
        Req::Ext(i) => {
            let State { rt, ext, .. } = s;
            let mut private = None;
            match ext.reqs.remove(i).map(|e| e.slot) {
                Some(Slot::Active(op)) => op.detach(rt, &mut ext.reqs.zombies),
                // An active persistent collective keeps its context.
                Some(Slot::Persistent {
                    active: Some(op), ..
                }) => op.detach(rt, &mut ext.reqs.zombies),
                Some(Slot::Persistent {
                    spec: Spec::Coll { private: h, .. },
                    active: None,
                }) => private = Some(h),
                _ => {}
            }
            if let Some(h) = private {
                crate::comm::discard(s, h);
            }
            Ok(())
        }
    }
}

/// `MPI_Cancel`: receives that have not matched are cancelled; the error
/// a generalized request's cancel callback returned.
pub fn cancel(s: &mut State, r: Req) -> Option<Error> {
    match r {
        Req::P2p(id) => {
            let _ = s.rt.p2p().cancel(id);
            None
        }
        Req::Ext(i) => {
            let State { rt, ext, .. } = s;
            match ext.reqs.entries[i].1.as_ref().map(|e| &e.slot) {
                Some(Slot::Active(op))
                | Some(Slot::Persistent {
                    active: Some(op), ..
                }) => op.cancel(rt),
                _ => None,
            }
        }
    }
}

/// Cancels an operation that has no handle yet and releases it once it
/// completes (a cancelled receive at once; a send when it is done).
pub fn cancel_op(s: &mut State, op: Op) {
    let _ = op.cancel(&mut s.rt);
    op.detach(&mut s.rt, &mut s.ext.reqs.zombies);
}

/// An error for an operation that cannot take this request (e.g. starting
/// a request that is not persistent).
pub fn not_persistent(h: MPI_Request) -> Fail {
    Fail {
        comm: MPI_COMM_WORLD,
        error: Error::new(
            ErrorClass::Request,
            format!("request {h:#x} is not an inactive persistent request"),
        ),
    }
}

/// Waits for one operation that has no handle (a blocking call's, see
/// `state::block_on`), then takes it out of `op`, releases it and returns
/// its status; with `may_end`, `None` (the operation left in `op`) when it
/// stopped waiting to let other threads in.
pub fn wait_op_may_end(s: &mut State, op: &mut Option<Op>, may_end: bool) -> Option<Status> {
    sweep(s);
    let o = op.as_ref()?;
    if !s
        .rt
        .wait_until_or_hand_over_if(|p, c| o.ready(p, c), may_end)
    {
        return None;
    }
    Some(op.take()?.finish(&mut s.rt))
}

/// Waits for a plain point-to-point request and releases it.
pub fn wait_p2p(s: &mut State, id: ReqId) -> Status {
    sweep(s);
    s.rt.wait_until(|p, _| p.is_complete(id) != Some(false));
    s.rt.p2p().take_if_complete(id).unwrap_or_default()
}

/// [`wait_p2p`] as [`wait_op_may_end`] waits.
pub fn wait_p2p_may_end(s: &mut State, id: ReqId, may_end: bool) -> Option<Status> {
    if !may_end {
        return Some(wait_p2p(s, id));
    }
    sweep(s);
    if !s
        .rt
        .wait_until_or_hand_over(|p, _| p.is_complete(id) != Some(false))
    {
        return None;
    }
    Some(s.rt.p2p().take_if_complete(id).unwrap_or_default())
}

/// Whether `r` is a persistent request that has not been started.
pub fn is_inactive(s: &State, r: Req) -> bool {
    matches!(s.ext.reqs.persistent(r), Some((_, false)))
}

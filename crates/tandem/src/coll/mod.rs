//! Collectives, built on point-to-point in each communicator's collective
//! context.
//!
//! * [`select`]: the algorithm catalogue (every algorithm with its declared
//!   restrictions) and the selection rules, overridable per operation by the
//!   `coll_<op>` parameters and replaceable by a JSON file (`coll_rules`).
//! * [`algos`]: the algorithms, each a schedule builder.
//! * [`sched`]: schedules, which run blocking and non-blocking collectives
//!   alike and advance inside every wait loop of the rank.
//! * [`ops`]: reduction operations.
//!
//! A collective is described by a [`CollCall`] over packed bytes (the MPI
//! layer packs derived datatypes) and started with
//! [`crate::Runtime::coll_start`] or run with [`crate::Runtime::coll`].

pub mod agree;
pub mod algos;
mod api;
pub mod inter;
pub use crate::ops;
pub mod sched;
pub mod select;
mod shm;

use crate::error::{Error, ErrorClass, Result};
use crate::int_map::IntMap;
use crate::params::Settings;
use ops::ReducerRef;
use sched::{Buf, Builder, Net, Schedule, Spare};
use select::{CallInfo, OpKind, Selection};

pub use select::describe;

/// One collective call, over packed bytes. Pointers must stay valid until
/// the collective completes; `None` for a send buffer means `MPI_IN_PLACE`.
/// Lengths, counts and displacements are in bytes; `counts`/`displs` have
/// one entry per rank.
pub enum CollCall {
    Barrier,
    Bcast {
        buf: *mut u8,
        len: usize,
        root: u32,
    },
    Reduce {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
        root: u32,
    },
    Allreduce {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
    },
    /// `len`: one rank's block.
    Gather {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
        root: u32,
    },
    Gatherv {
        send: Option<*const u8>,
        sendlen: usize,
        recv: *mut u8,
        counts: Vec<usize>,
        displs: Vec<usize>,
        root: u32,
    },
    /// `recv: None` is `MPI_IN_PLACE` at the root.
    Scatter {
        send: *const u8,
        recv: Option<*mut u8>,
        len: usize,
        root: u32,
    },
    Scatterv {
        send: *const u8,
        counts: Vec<usize>,
        displs: Vec<usize>,
        recv: Option<*mut u8>,
        recvlen: usize,
        root: u32,
    },
    Allgather {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
    },
    Allgatherv {
        send: Option<*const u8>,
        recv: *mut u8,
        counts: Vec<usize>,
        displs: Vec<usize>,
    },
    /// `len`: one pair's block.
    Alltoall {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
    },
    Alltoallv {
        send: Option<*const u8>,
        scounts: Vec<usize>,
        sdispls: Vec<usize>,
        recv: *mut u8,
        rcounts: Vec<usize>,
        rdispls: Vec<usize>,
    },
    /// `counts`: the block each rank gets.
    ReduceScatter {
        send: Option<*const u8>,
        recv: *mut u8,
        counts: Vec<usize>,
        op: ReducerRef,
    },
    Scan {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
    },
    Exscan {
        send: Option<*const u8>,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
    },
    /// Neighbourhood exchange: communicator ranks of the peers, blocks per peer.
    Neighbor {
        sources: Vec<u32>,
        recv: *mut u8,
        rcounts: Vec<usize>,
        rdispls: Vec<usize>,
        dests: Vec<u32>,
        send: *const u8,
        scounts: Vec<usize>,
        sdispls: Vec<usize>,
    },
}

fn user(p: *const u8) -> Buf {
    Buf::User(p as *mut u8)
}

impl CollCall {
    /// The operation and what selection looks at.
    pub fn info(&self, n: u32) -> (OpKind, CallInfo) {
        let info = |bytes: usize, commutative: bool| CallInfo {
            n,
            bytes: bytes as u64,
            commutative,
        };
        match self {
            CollCall::Barrier => (OpKind::Barrier, info(0, true)),
            CollCall::Bcast { len, .. } => (OpKind::Bcast, info(*len, true)),
            CollCall::Reduce { len, op, .. } => (OpKind::Reduce, info(*len, op.commutative())),
            CollCall::Allreduce { len, op, .. } => {
                (OpKind::Allreduce, info(*len, op.commutative()))
            }
            CollCall::Gather { len, .. } => (OpKind::Gather, info(*len, true)),
            CollCall::Gatherv { .. } => (OpKind::Gatherv, info(0, true)),
            CollCall::Scatter { len, .. } => (OpKind::Scatter, info(*len, true)),
            CollCall::Scatterv { .. } => (OpKind::Scatterv, info(0, true)),
            CollCall::Allgather { len, .. } => (OpKind::Allgather, info(*len, true)),
            CollCall::Allgatherv { .. } => (OpKind::Allgatherv, info(0, true)),
            CollCall::Alltoall { len, .. } => (OpKind::Alltoall, info(*len, true)),
            CollCall::Alltoallv { .. } => (OpKind::Alltoallv, info(0, true)),
            CollCall::ReduceScatter { op, counts, .. } => (
                OpKind::ReduceScatter,
                info(counts.iter().sum(), op.commutative()),
            ),
            CollCall::Scan { len, op, .. } => (OpKind::Scan, info(*len, op.commutative())),
            CollCall::Exscan { len, op, .. } => (OpKind::Exscan, info(*len, op.commutative())),
            CollCall::Neighbor { .. } => (OpKind::Neighbor, info(0, true)),
        }
    }

    fn reducer(&self) -> Option<&ReducerRef> {
        match self {
            CollCall::Reduce { op, .. }
            | CollCall::Allreduce { op, .. }
            | CollCall::ReduceScatter { op, .. }
            | CollCall::Scan { op, .. }
            | CollCall::Exscan { op, .. } => Some(op),
            _ => None,
        }
    }

    /// Checks what every algorithm relies on (lengths that are whole
    /// elements, per-rank arrays of the right size).
    fn validate(&self, n: u32) -> Result<()> {
        let bad = |m: String| Err(Error::new(ErrorClass::Arg, m));
        if let Some(op) = self.reducer() {
            let es = op.elem_size();
            let lens: Vec<usize> = match self {
                CollCall::ReduceScatter { counts, .. } => counts.clone(),
                CollCall::Reduce { len, .. }
                | CollCall::Allreduce { len, .. }
                | CollCall::Scan { len, .. }
                | CollCall::Exscan { len, .. } => vec![*len],
                _ => vec![],
            };
            if lens
                .iter()
                .any(|&l| if es == 0 { l != 0 } else { l % es != 0 })
            {
                return bad(format!(
                    "reduction over a length that is not a whole number of {es}-byte elements"
                ));
            }
        }
        let per_rank: Vec<&Vec<usize>> = match self {
            CollCall::Gatherv { counts, displs, .. }
            | CollCall::Scatterv { counts, displs, .. }
            | CollCall::Allgatherv { counts, displs, .. } => vec![counts, displs],
            CollCall::Alltoallv {
                scounts,
                sdispls,
                rcounts,
                rdispls,
                ..
            } => vec![scounts, sdispls, rcounts, rdispls],
            CollCall::ReduceScatter { counts, .. } => vec![counts],
            _ => vec![],
        };
        if per_rank.iter().any(|v| v.len() != n as usize) {
            return bad(format!("per-rank arrays must have {n} entries"));
        }
        Ok(())
    }

    /// The schedule of this rank for algorithm `algo`.
    pub fn build(&self, algo: &str, n: u32, me: u32) -> Builder {
        self.build_into(algo, Builder::new(n, me))
    }

    /// As [`CollCall::build`], into builder `b` (see [`Builder::reusing`]).
    pub fn build_into(&self, algo: &str, mut b: Builder) -> Builder {
        let n = b.n;
        b.reducer = self.reducer().cloned();
        let commutative = self.reducer().is_none_or(|r| r.commutative());
        let es = self.reducer().map_or(1, |r| r.elem_size());
        let opt = |p: &Option<*const u8>| p.map(user);
        match self {
            CollCall::Barrier if n > 1 => match algo {
                "linear" => algos::barrier_linear(&mut b),
                "binomial" => algos::barrier_binomial(&mut b),
                _ => algos::barrier_dissemination(&mut b),
            },
            CollCall::Barrier => {}
            &CollCall::Bcast { buf, len, root } => {
                let buf = Buf::User(buf);
                match algo {
                    _ if n == 1 || len == 0 => {}
                    "linear" => algos::bcast_linear(&mut b, buf, len, root),
                    "scatter_allgather" => algos::bcast_scatter_allgather(&mut b, buf, len, root),
                    _ => algos::bcast_binomial(&mut b, buf, len, root),
                }
            }
            CollCall::Reduce {
                send,
                recv,
                len,
                root,
                ..
            } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    "linear" => algos::reduce_linear(&mut b, s, r, *len, *root),
                    _ => algos::reduce_binomial(&mut b, s, r, *len, *root, commutative),
                }
            }
            CollCall::Allreduce {
                send, recv, len, ..
            } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    _ if n == 1 => {
                        if let Some(s) = s {
                            b.copy(s, 0, r, 0, *len);
                        }
                    }
                    "reduce_bcast" => {
                        algos::allreduce_reduce_bcast(&mut b, s, r, *len, commutative)
                    }
                    "ring" => algos::allreduce_ring(&mut b, s, r, *len, es),
                    _ => algos::allreduce_recursive_doubling(&mut b, s, r, *len, commutative),
                }
            }
            CollCall::Gather {
                send,
                recv,
                len,
                root,
            } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    "binomial" => algos::gather_binomial(&mut b, s, r, *len, *root),
                    _ => algos::gather_linear(&mut b, s, r, *len, *root),
                }
            }
            CollCall::Gatherv {
                send,
                sendlen,
                recv,
                counts,
                displs,
                root,
            } => algos::gatherv_linear(
                &mut b,
                opt(send),
                *sendlen,
                Buf::User(*recv),
                counts,
                displs,
                *root,
            ),
            CollCall::Scatter {
                send,
                recv,
                len,
                root,
            } => {
                let (s, r) = (user(*send), recv.map(Buf::User));
                match algo {
                    "binomial" => algos::scatter_binomial(&mut b, s, r, *len, *root),
                    _ => algos::scatter_linear(&mut b, s, r, *len, *root),
                }
            }
            CollCall::Scatterv {
                send,
                counts,
                displs,
                recv,
                recvlen,
                root,
            } => algos::scatterv_linear(
                &mut b,
                user(*send),
                counts,
                displs,
                recv.map(Buf::User),
                *recvlen,
                *root,
            ),
            CollCall::Allgather { send, recv, len } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    _ if n == 1 => {
                        if let Some(s) = s {
                            b.copy(s, 0, r, 0, *len);
                        }
                    }
                    "recursive_doubling" => algos::allgather_recursive_doubling(&mut b, s, r, *len),
                    "bruck" => algos::allgather_bruck(&mut b, s, r, *len),
                    _ => algos::allgather_ring(&mut b, s, r, *len),
                }
            }
            CollCall::Allgatherv {
                send,
                recv,
                counts,
                displs,
            } => algos::allgatherv_ring(&mut b, opt(send), Buf::User(*recv), counts, displs),
            CollCall::Alltoall { send, recv, len } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    "pairwise" => algos::alltoall_pairwise(&mut b, s, r, *len),
                    "bruck" => algos::alltoall_bruck(&mut b, s, r, *len),
                    _ => algos::alltoall_linear(&mut b, s, r, *len),
                }
            }
            CollCall::Alltoallv {
                send,
                scounts,
                sdispls,
                recv,
                rcounts,
                rdispls,
            } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    "pairwise" => {
                        algos::alltoallv_pairwise(&mut b, s, scounts, sdispls, r, rcounts, rdispls)
                    }
                    _ => algos::alltoallv_linear(&mut b, s, scounts, sdispls, r, rcounts, rdispls),
                }
            }
            CollCall::ReduceScatter {
                send, recv, counts, ..
            } => {
                let (s, r) = (opt(send), Buf::User(*recv));
                match algo {
                    "ring" => algos::reduce_scatter_ring(&mut b, s, r, counts),
                    _ => algos::reduce_scatter_reduce_scatterv(&mut b, s, r, counts, commutative),
                }
            }
            CollCall::Scan {
                send, recv, len, ..
            } => algos::scan_recursive_doubling(
                &mut b,
                opt(send),
                Buf::User(*recv),
                *len,
                commutative,
            ),
            CollCall::Exscan {
                send, recv, len, ..
            } => algos::exscan_recursive_doubling(
                &mut b,
                opt(send),
                Buf::User(*recv),
                *len,
                commutative,
            ),
            CollCall::Neighbor {
                sources,
                recv,
                rcounts,
                rdispls,
                dests,
                send,
                scounts,
                sdispls,
            } => algos::neighbor_exchange(
                &mut b,
                sources,
                Buf::User(*recv),
                rcounts,
                rdispls,
                dests,
                user(*send),
                scounts,
                sdispls,
            ),
        }
        b
    }
}

/// Names a schedule (a collective in flight). The high 32 bits are a
/// generation (never 0), so a stale id is detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SchedId(pub u64);

impl SchedId {
    fn index(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

struct Slot {
    generation: u32,
    sched: Option<Schedule>,
    /// Released when it completes (`MPI_Request_free`).
    detached: bool,
}

/// The collective state of a rank.
pub struct Colls {
    pub selection: Selection,
    /// Next collective sequence number of each context id.
    seqs: IntMap<u32, u32>,
    /// The same for non-blocking collectives.
    nonblocking_seqs: IntMap<u32, u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Schedules not finished yet.
    active: Vec<SchedId>,
    /// Vectors of finished schedules for the next ones (at most [`SPARES`]).
    spare: Vec<Spare>,
    /// Shared-flag collectives of each context id (see [`shm`]).
    shm: IntMap<u32, shm::ShmState>,
    /// `coll_shm_max`: largest payload run on shared flags (0: none).
    pub(crate) shm_max: usize,
}

/// Finished schedules' vectors kept for reuse.
const SPARES: usize = 4;

/// Collective tags: a sequence number in the low bits, and this bit for
/// non-blocking collectives.
const SEQ_MASK: u32 = 0x1fff_ffff;
const NONBLOCKING_TAG_BIT: u32 = 0x2000_0000;
/// The tag bit of blocking calls numbered by the shared flags (see
/// `shm::ShmPath::Announced`): a call some members ran on the flags leaves
/// the others' blocking numbering alone.
const ANNOUNCED_TAG_BIT: u32 = 0x4000_0000;

/// The tag of the blocking call the shared flags numbered `seq`.
fn announced_tag(seq: u64) -> i32 {
    (ANNOUNCED_TAG_BIT | (seq as u32 & SEQ_MASK)) as i32
}

impl Colls {
    /// From the `coll_*` parameters.
    pub fn new(settings: &Settings) -> std::result::Result<Colls, String> {
        let mut c = Colls::with_selection(Selection::from_settings(settings)?);
        c.shm_max = usize::try_from(settings.uint("coll_shm_max")).unwrap_or(usize::MAX);
        Ok(c)
    }

    pub fn with_selection(selection: Selection) -> Colls {
        Colls {
            selection,
            seqs: IntMap::default(),
            nonblocking_seqs: IntMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            active: Vec::new(),
            spare: Vec::new(),
            shm: IntMap::default(),
            shm_max: 0,
        }
    }

    /// The tag of the next blocking collective on communicator `cid`
    /// (every member calls collectives in the same order, so they agree on
    /// it).
    pub fn next_tag(&mut self, cid: u32) -> i32 {
        let s = self.seqs.entry(cid).or_insert(0);
        let tag = (*s & SEQ_MASK) as i32;
        *s = s.wrapping_add(1);
        tag
    }

    /// The tag of the next non-blocking collective on `cid`. Non-blocking
    /// collectives are numbered apart from blocking ones (a non-blocking
    /// collective never matches a blocking one, as the standard says), so
    /// that one started before a barrier on one rank and after it on
    /// another does not meet the barrier's messages, as Open MPI and MPICH
    /// also keep them apart.
    pub fn next_nonblocking_tag(&mut self, cid: u32) -> i32 {
        let s = self.nonblocking_seqs.entry(cid).or_insert(0);
        let tag = (NONBLOCKING_TAG_BIT | (*s & SEQ_MASK)) as i32;
        *s = s.wrapping_add(1);
        tag
    }

    /// Forgets a freed communicator.
    pub fn forget(&mut self, cid: u32) {
        self.seqs.remove(&cid);
        self.nonblocking_seqs.remove(&cid);
        self.shm.remove(&cid);
    }

    fn get(&self, id: SchedId) -> Option<&Slot> {
        self.slots
            .get(id.index())
            .filter(|s| s.generation == id.generation() && s.sched.is_some())
    }

    /// A live schedule (to attach staging buffers or completion steps).
    pub fn schedule_mut(&mut self, id: SchedId) -> Option<&mut Schedule> {
        let s = self.slots.get_mut(id.index())?;
        if s.generation != id.generation() {
            return None;
        }
        s.sched.as_mut()
    }

    /// Registers a schedule and moves it as far as it goes now.
    pub fn start(&mut self, mut s: Schedule, net: &mut dyn Net) -> SchedId {
        let done = s.advance(net);
        let slot = Slot {
            generation: 1,
            sched: Some(s),
            detached: false,
        };
        let id = if let Some(i) = self.free.pop() {
            let g = self.slots[i as usize].generation;
            self.slots[i as usize] = Slot {
                generation: g,
                ..slot
            };
            SchedId((u64::from(g) << 32) | u64::from(i))
        } else {
            self.slots.push(slot);
            SchedId((1u64 << 32) | (self.slots.len() - 1) as u64)
        };
        if !done {
            self.active.push(id);
        }
        id
    }

    /// Advances every unfinished schedule; returns whether any finished.
    #[inline]
    pub fn advance_all(&mut self, net: &mut dyn Net) -> bool {
        let mut any = false;
        let mut i = 0;
        while i < self.active.len() {
            let id = self.active[i];
            let slot = &mut self.slots[id.index()];
            let done = slot.sched.as_mut().is_none_or(|s| s.advance(net));
            if done {
                any = true;
                self.active.swap_remove(i);
                if slot.detached {
                    self.remove(id);
                }
            } else {
                i += 1;
            }
        }
        any
    }

    /// Whether some unfinished schedule could move now.
    #[inline]
    pub fn can_advance(&self, net: &dyn Net) -> bool {
        self.active.iter().any(|id| {
            self.slots[id.index()]
                .sched
                .as_ref()
                .is_some_and(|s| s.can_advance(net))
        })
    }

    /// Whether the schedule has finished (`None` for an unknown id).
    pub fn is_complete(&self, id: SchedId) -> Option<bool> {
        self.get(id)
            .map(|s| s.sched.as_ref().is_some_and(Schedule::is_finished))
    }

    /// Whether `id` names a live schedule.
    pub fn is_live(&self, id: SchedId) -> bool {
        self.get(id).is_some()
    }

    fn remove(&mut self, id: SchedId) -> Option<Schedule> {
        let slot = self.slots.get_mut(id.index())?;
        if slot.generation != id.generation() {
            return None;
        }
        let s = slot.sched.take()?;
        slot.generation = slot.generation.checked_add(1).unwrap_or(1);
        slot.detached = false;
        self.free.push(id.index() as u32);
        Some(s)
    }

    /// Releases a finished schedule and returns its outcome.
    pub fn take_if_complete(&mut self, id: SchedId) -> Option<Result<()>> {
        if self.is_complete(id)? {
            let s = self.remove(id)?;
            let outcome = match s.error() {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            };
            if self.spare.len() < SPARES {
                self.spare.push(s.into_spare());
            }
            Some(outcome)
        } else {
            None
        }
    }

    /// Ends a schedule with error `e` that will never finish by itself
    /// (its peers took another path): its receives are cancelled, and it
    /// is released once the requests it has under way end.
    pub fn fail_and_detach(&mut self, id: SchedId, net: &mut dyn Net, e: Error) {
        if let Some(s) = self.schedule_mut(id) {
            s.fail(net, e);
        }
        self.detach(id);
    }

    /// `MPI_Request_free`: released when it finishes.
    pub fn detach(&mut self, id: SchedId) {
        if self.is_complete(id) == Some(true) {
            self.remove(id);
        } else if let Some(slot) = self.slots.get_mut(id.index()) {
            if slot.generation == id.generation() {
                slot.detached = true;
            }
        }
    }

    /// Schedules not finished (for leak checks and tests).
    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    /// Picks the algorithm for a call and builds this rank's schedule; the
    /// warning (if any) is for the caller to print.
    pub fn plan(&mut self, call: &CollCall, n: u32, me: u32) -> Result<(Builder, Option<String>)> {
        call.validate(n)?;
        let (op, info) = call.info(n);
        let (algo, warning) = self.selection.choose(op, &info);
        let b = Builder::reusing(n, me, self.spare.pop().unwrap_or_default());
        Ok((call.build_into(algo.name, b), warning))
    }
}

#[cfg(test)]
mod tests;

//! The collective part of the Rust API: starting, running and completing
//! collectives, and the wait loop that advances every schedule in flight.

use std::sync::Arc;

use super::ops::{PredefOp, Predefined};
use super::shm::ShmPath;
use super::{CollCall, Colls, SchedId};
use crate::datatype::Prim;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::{P2p, ReqId, Status};
use crate::runtime::{CommId, Runtime};

/// How a collective's messages are told apart from other calls'.
#[derive(Clone, Copy)]
enum CallTag {
    /// The next blocking collective of the communicator.
    Blocking,
    /// The next non-blocking one (numbered apart).
    Nonblocking,
    /// A call of a kind the shared flags serve, numbered by the flags
    /// (the members that ran it there used no tag).
    Announced(u64),
}

impl Runtime {
    /// The collective state (schedules in flight, algorithm selection).
    #[inline]
    pub fn colls(&self) -> &Colls {
        &self.colls
    }

    #[inline]
    pub fn colls_mut(&mut self) -> &mut Colls {
        &mut self.colls
    }

    /// The point-to-point engine, read-only (for readiness checks).
    #[inline]
    pub fn p2p_ref(&self) -> &P2p {
        &self.p2p
    }

    /// Starts a collective on `comm` and returns its schedule.
    ///
    /// # Safety
    /// Every pointer in `call` must stay valid for the reads and writes the
    /// collective makes until it completes.
    pub unsafe fn coll_start(&mut self, comm: CommId, call: CollCall) -> Result<SchedId> {
        // SAFETY: forwarded from the caller.
        unsafe { self.coll_begin(comm, call, CallTag::Blocking) }
    }

    /// [`Runtime::coll_start`] for a non-blocking collective (`MPI_I...`
    /// and persistent collectives' starts), numbered apart from blocking
    /// ones (see `Colls::next_nonblocking_tag`).
    ///
    /// # Safety
    /// As [`Runtime::coll_start`].
    pub unsafe fn icoll_start(&mut self, comm: CommId, call: CollCall) -> Result<SchedId> {
        // SAFETY: forwarded from the caller.
        unsafe { self.coll_begin(comm, call, CallTag::Nonblocking) }
    }

    /// # Safety
    /// As [`Runtime::coll_start`].
    unsafe fn coll_begin(
        &mut self,
        comm: CommId,
        call: CollCall,
        numbering: CallTag,
    ) -> Result<SchedId> {
        let c = self.comm(comm)?;
        if c.is_inter() {
            return Err(crate::intercomm::unsupported());
        }
        let (cid, ctx, rank, group) = (c.cid, c.coll_context(), c.rank, c.group.clone());
        let n = group.len() as u32;
        let (b, warning) = self.colls.plan(&call, n, rank)?;
        if let Some(w) = warning {
            if rank == 0 {
                eprintln!("tandem: rank {}: {w}", self.rank());
            }
        }
        let tag = match numbering {
            CallTag::Blocking => self.colls.next_tag(cid),
            CallTag::Nonblocking => self.colls.next_nonblocking_tag(cid),
            CallTag::Announced(seq) => super::announced_tag(seq),
        };
        let s = b.finish(ctx, tag, group);
        Ok(self.colls.start(s, &mut self.p2p))
    }

    /// Runs a collective to completion.
    ///
    /// # Safety
    /// As [`Runtime::coll_start`] (the pointers need only last for the call).
    pub unsafe fn coll(&mut self, comm: CommId, call: CollCall) -> Result<()> {
        // SAFETY: forwarded from the caller.
        match unsafe { self.coll_shm(comm, &call) } {
            ShmPath::Done(outcome) => outcome,
            // SAFETY: forwarded from the caller.
            ShmPath::Messages => unsafe { self.coll_scheduled(comm, call) },
            ShmPath::Announced(straddle) => {
                // SAFETY: forwarded from the caller; the schedule completes
                // below, or is failed and detached (its requests then
                // only finish what is already under way).
                let numbering = CallTag::Announced(straddle.seq());
                let id = unsafe { self.coll_begin(comm, call, numbering)? };
                let mut other_path = None;
                self.wait_until(|_, c| {
                    if c.is_complete(id) != Some(false) {
                        return true;
                    }
                    other_path = straddle.flags_taken();
                    other_path.is_some()
                });
                if self.colls.is_complete(id) == Some(true) {
                    return self.coll_take(id).unwrap_or(Ok(()));
                }
                let e = other_path.unwrap_or_else(|| {
                    Error::new(
                        ErrorClass::Intern,
                        "a collective stopped waiting unfinished",
                    )
                });
                self.colls.fail_and_detach(id, &mut self.p2p, e.clone());
                Err(e)
            }
        }
    }

    /// Runs a collective to completion by the message algorithms.
    ///
    /// # Safety
    /// As [`Runtime::coll`].
    pub(crate) unsafe fn coll_scheduled(&mut self, comm: CommId, call: CollCall) -> Result<()> {
        // SAFETY: forwarded from the caller; the schedule completes below.
        let id = unsafe { self.coll_start(comm, call)? };
        self.coll_wait(id)
    }

    /// Waits for a collective and releases it.
    pub fn coll_wait(&mut self, id: SchedId) -> Result<()> {
        if !self.colls.is_live(id) {
            return Err(Error::new(ErrorClass::Request, "invalid request"));
        }
        self.wait_until(|_, c| c.is_complete(id) != Some(false));
        self.coll_take(id).unwrap_or(Ok(()))
    }

    /// Releases a finished schedule and returns its outcome (`None` while
    /// it runs); a communicator it was agreeing a context for is usable
    /// from then on.
    pub fn coll_take(&mut self, id: SchedId) -> Option<Result<()>> {
        let r = self.colls.take_if_complete(id);
        if r.is_some() {
            self.settle_dups();
        }
        r
    }

    /// Drives progress until `ready` holds, advancing every schedule in
    /// flight on the way (so a rank waiting for anything still serves the
    /// non-blocking collectives others wait for).
    pub fn wait_until(&mut self, ready: impl FnMut(&P2p, &Colls) -> bool) {
        self.wait_until_or_hand_over_if(ready, false);
    }

    /// [`Runtime::wait_until`], except that it returns false, without
    /// `ready` holding, where [`P2p::wait_for_or_hand_over`] would.
    pub fn wait_until_or_hand_over(&mut self, ready: impl FnMut(&P2p, &Colls) -> bool) -> bool {
        self.wait_until_or_hand_over_if(ready, true)
    }

    /// [`Runtime::wait_until_or_hand_over`] when `may_end`, else
    /// [`Runtime::wait_until`] (which always returns true): for the steps
    /// of calls that wait either way (`MPI_THREAD_MULTIPLE` or not).
    pub fn wait_until_or_hand_over_if(
        &mut self,
        mut ready: impl FnMut(&P2p, &Colls) -> bool,
        may_end: bool,
    ) -> bool {
        loop {
            if self.colls.advance_all(&mut self.p2p) {
                self.settle_dups();
            }
            if ready(&self.p2p, &self.colls) {
                return true;
            }
            let colls = &self.colls;
            let pred = |p: &P2p| ready(p, colls) || colls.can_advance(p);
            if may_end {
                if !self.p2p.wait_for_or_hand_over(pred) {
                    return false;
                }
            } else {
                self.p2p.wait_for(pred);
            }
        }
    }

    /// One round of progress without blocking (for the test functions).
    pub fn progress_once(&mut self) {
        self.p2p.progress();
        if self.colls.advance_all(&mut self.p2p) {
            self.settle_dups();
        }
    }

    /// Waits for a point-to-point request (advancing collectives meanwhile)
    /// and releases it.
    pub fn wait_request(&mut self, id: ReqId) -> Result<Status> {
        if !self.p2p.is_live(id) {
            return Err(Error::new(ErrorClass::Request, "invalid request"));
        }
        self.wait_until(|p, _| p.is_complete(id) != Some(false));
        Ok(self.p2p.take_if_complete(id).unwrap_or_default())
    }

    /// The maximum of `value` over the communicator, known to every member
    /// (an intercommunicator's groups agree on context ids with it).
    pub fn allreduce_max_u32(&mut self, comm: CommId, value: u32) -> Result<u32> {
        let op = Arc::new(Predefined::new(PredefOp::Max, Prim::U32, 4)?);
        let send = value.to_ne_bytes();
        let mut out = [0u8; 4];
        // SAFETY: both buffers outlive the collective, which completes here.
        unsafe {
            self.coll(
                comm,
                CollCall::Allreduce {
                    send: Some(send.as_ptr()),
                    recv: out.as_mut_ptr(),
                    len: 4,
                    op,
                },
            )?
        };
        Ok(u32::from_ne_bytes(out))
    }

    /// Every member's `mine` (the same length at every member), in rank
    /// order, known to every member.
    pub fn allgather_u64(&mut self, comm: CommId, mine: &[u64]) -> Result<Vec<u64>> {
        let n = self.comm(comm)?.size() as usize;
        let mut all = vec![0u64; n * mine.len()];
        // SAFETY: both buffers outlive the collective, which completes here;
        // `all` holds `n` blocks of `mine`'s size.
        unsafe {
            self.coll(
                comm,
                CollCall::Allgather {
                    send: Some(mine.as_ptr().cast()),
                    recv: all.as_mut_ptr().cast(),
                    len: std::mem::size_of_val(mine),
                },
            )?
        };
        Ok(all)
    }
}

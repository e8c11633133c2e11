//! Collectives on intercommunicators, blocking and non-blocking alike: one
//! schedule per call that chains intracommunicator algorithms over the
//! hidden local communicator and `SendRemote`/`RecvRemote` steps between
//! the groups, so that nothing waits inside a non-blocking call and every
//! progress loop moves it on (a blocking call waits for its schedule).
//!
//! Each call takes one tag of the hidden local communicator (all its local
//! parts run under it: they follow each other at every member, and
//! messages between two ranks on one context and tag match in order) and
//! one of the intercommunicator (its messages between the groups), at
//! every member of both groups, whatever its role.

use super::ops::ReducerRef;
use super::sched::{Buf, Builder, RemoteGroup};
use super::{CollCall, SchedId};
use crate::error::{Error, ErrorClass, Result};
use crate::intercomm::InterRoot;
use crate::runtime::{CommId, Runtime};

/// A collective on an intercommunicator, over packed bytes (pointers
/// valid until it completes).
pub enum InterCall {
    Barrier,
    Bcast {
        buf: *mut u8,
        len: usize,
        root: InterRoot,
    },
    Reduce {
        send: *const u8,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
        root: InterRoot,
    },
    Allreduce {
        send: *const u8,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
    },
    /// `len`: one rank's block.
    Gather {
        send: *const u8,
        recv: *mut u8,
        len: usize,
        root: InterRoot,
    },
    /// `len`: one rank's block.
    Scatter {
        send: *const u8,
        recv: *mut u8,
        len: usize,
        root: InterRoot,
    },
    /// `send_len`: this rank's block; `recv_len`: a remote rank's.
    Allgather {
        send: *const u8,
        send_len: usize,
        recv: *mut u8,
        recv_len: usize,
    },
    /// Block `j` of `send` to remote rank `j`, block `j` of `recv` from it.
    Alltoall {
        send: *const u8,
        send_len: usize,
        recv: *mut u8,
        recv_len: usize,
    },
    /// Direct messages to and from remote ranks: (remote rank, address,
    /// bytes) each (the v- and w-variants).
    Pairwise {
        sends: Vec<(u32, *const u8, usize)>,
        recvs: Vec<(u32, *mut u8, usize)>,
    },
    /// The reduction of the other group's vectors, scattered over this
    /// group by `counts` (bytes per local rank).
    ReduceScatter {
        send: *const u8,
        recv: *mut u8,
        counts: Vec<usize>,
        op: ReducerRef,
    },
}

/// Builds an intercommunicator collective's schedule for local rank `me`
/// of `n`, the remote group having `remote_n` ranks; `plan` gives the
/// schedule of an intracommunicator collective over the local group.
struct InterPlan<'a> {
    b: Builder,
    n: u32,
    me: u32,
    remote_n: u32,
    plan: &'a mut dyn FnMut(&CollCall) -> Result<Builder>,
}

impl InterPlan<'_> {
    /// Appends a collective over the local group (after a fence).
    fn local(&mut self, call: CollCall) -> Result<()> {
        let sub = (self.plan)(&call)?;
        self.b.append(sub);
        Ok(())
    }

    fn leader(&self) -> bool {
        self.me == 0
    }

    /// Staging of `len` bytes at the leader only (empty elsewhere).
    fn leader_tmp(&mut self, len: usize) -> (Buf, *mut u8) {
        let here = if self.leader() { len } else { 0 };
        let (b, p) = self.b.tmp_at(here);
        (
            b,
            if self.leader() {
                p
            } else {
                std::ptr::null_mut()
            },
        )
    }

    /// The leaders swap `len` bytes from `mine` for `theirs_len` bytes into
    /// `theirs` (a phase of its own); nothing elsewhere.
    fn leaders_swap(&mut self, mine: Buf, len: usize, theirs: Buf, theirs_len: usize) {
        self.b.fence();
        if self.leader() {
            self.b.send_remote(0, mine, 0, len);
            self.b.recv_remote(0, theirs, 0, theirs_len);
        }
        self.b.fence();
    }

    /// Appends this rank's steps of `call`.
    fn build(&mut self, call: InterCall) -> Result<()> {
        let (n, me) = (self.n, self.me);
        match call {
            InterCall::Barrier => {
                self.local(CollCall::Barrier)?;
                self.leaders_swap(Buf::nowhere(), 0, Buf::nowhere(), 0);
                self.local(CollCall::Barrier)?;
            }
            InterCall::Bcast { buf, len, root } => match root {
                InterRoot::Idle => {}
                InterRoot::Me => self.b.send_remote(0, Buf::User(buf), 0, len),
                InterRoot::Remote(r) => {
                    if self.leader() {
                        self.b.recv_remote(r, Buf::User(buf), 0, len);
                    }
                    self.local(CollCall::Bcast { buf, len, root: 0 })?;
                }
            },
            InterCall::Reduce {
                send,
                recv,
                len,
                op,
                root,
            } => match root {
                InterRoot::Idle => {}
                InterRoot::Me => self.b.recv_remote(0, Buf::User(recv), 0, len),
                InterRoot::Remote(r) => {
                    let (part, p) = self.leader_tmp(len);
                    self.local(CollCall::Reduce {
                        send: Some(send),
                        recv: p,
                        len,
                        op,
                        root: 0,
                    })?;
                    self.b.fence();
                    if self.leader() {
                        self.b.send_remote(r, part, 0, len);
                    }
                }
            },
            InterCall::Allreduce {
                send,
                recv,
                len,
                op,
            } => {
                let (part, p) = self.leader_tmp(len);
                self.local(CollCall::Reduce {
                    send: Some(send),
                    recv: p,
                    len,
                    op,
                    root: 0,
                })?;
                self.leaders_swap(part, len, Buf::User(recv), len);
                self.local(CollCall::Bcast {
                    buf: recv,
                    len,
                    root: 0,
                })?;
            }
            InterCall::Gather {
                send,
                recv,
                len,
                root,
            } => match root {
                InterRoot::Idle => {}
                InterRoot::Me => {
                    let whole = len * self.remote_n as usize;
                    self.b.recv_remote(0, Buf::User(recv), 0, whole);
                }
                InterRoot::Remote(r) => {
                    let whole = len * n as usize;
                    let (all, p) = self.leader_tmp(whole);
                    self.local(CollCall::Gather {
                        send: Some(send),
                        recv: p,
                        len,
                        root: 0,
                    })?;
                    self.b.fence();
                    if self.leader() {
                        self.b.send_remote(r, all, 0, whole);
                    }
                }
            },
            InterCall::Scatter {
                send,
                recv,
                len,
                root,
            } => match root {
                InterRoot::Idle => {}
                InterRoot::Me => {
                    let whole = len * self.remote_n as usize;
                    self.b.send_remote(0, Buf::User(send as *mut u8), 0, whole);
                }
                InterRoot::Remote(r) => {
                    let whole = len * n as usize;
                    let (all, p) = self.leader_tmp(whole);
                    if self.leader() {
                        self.b.recv_remote(r, all, 0, whole);
                    }
                    self.local(CollCall::Scatter {
                        send: p,
                        recv: Some(recv),
                        len,
                        root: 0,
                    })?;
                }
            },
            InterCall::Allgather {
                send,
                send_len,
                recv,
                recv_len,
            } => {
                let mine = send_len * n as usize;
                let theirs = recv_len * self.remote_n as usize;
                let (all, p) = self.leader_tmp(mine);
                self.local(CollCall::Gather {
                    send: Some(send),
                    recv: p,
                    len: send_len,
                    root: 0,
                })?;
                self.leaders_swap(all, mine, Buf::User(recv), theirs);
                self.local(CollCall::Bcast {
                    buf: recv,
                    len: theirs,
                    root: 0,
                })?;
            }
            InterCall::Alltoall {
                send,
                send_len,
                recv,
                recv_len,
            } => {
                for j in 0..self.remote_n {
                    let at = j as usize;
                    self.b
                        .recv_remote(j, Buf::User(recv), at * recv_len, recv_len);
                    self.b
                        .send_remote(j, Buf::User(send as *mut u8), at * send_len, send_len);
                }
            }
            InterCall::Pairwise { sends, recvs } => {
                let bad = sends
                    .iter()
                    .map(|m| m.0)
                    .chain(recvs.iter().map(|m| m.0))
                    .find(|&j| j >= self.remote_n);
                if let Some(j) = bad {
                    return Err(Error::new(
                        ErrorClass::Rank,
                        format!("remote rank {j} is not in 0..{}", self.remote_n),
                    ));
                }
                for (j, p, len) in recvs {
                    self.b.recv_remote(j, Buf::User(p), 0, len);
                }
                for (j, p, len) in sends {
                    self.b.send_remote(j, Buf::User(p as *mut u8), 0, len);
                }
            }
            InterCall::ReduceScatter {
                send,
                recv,
                counts,
                op,
            } => {
                let total: usize = counts.iter().sum();
                let (part, p) = self.leader_tmp(total);
                let (theirs, tp) = self.leader_tmp(total);
                self.local(CollCall::Reduce {
                    send: Some(send),
                    recv: p,
                    len: total,
                    op,
                    root: 0,
                })?;
                self.leaders_swap(part, total, theirs, total);
                let displs = counts
                    .iter()
                    .scan(0, |at, &c| {
                        let d = *at;
                        *at += c;
                        Some(d)
                    })
                    .collect();
                let recvlen = counts.get(me as usize).copied().unwrap_or(0);
                self.local(CollCall::Scatterv {
                    send: tp,
                    counts,
                    displs,
                    recv: Some(recv),
                    recvlen,
                    root: 0,
                })?;
            }
        }
        Ok(())
    }
}

impl Runtime {
    /// Starts a collective on intercommunicator `id` and returns its
    /// schedule (completed like any other: [`Runtime::coll_wait`] and the
    /// request functions).
    ///
    /// # Safety
    /// Every pointer in `call` must stay valid for the reads and writes the
    /// collective makes until it completes.
    pub unsafe fn inter_coll_start(&mut self, id: CommId, call: InterCall) -> Result<SchedId> {
        // SAFETY: forwarded from the caller.
        unsafe { self.inter_coll_begin(id, call, false) }
    }

    /// [`Runtime::inter_coll_start`] for a non-blocking collective,
    /// numbered apart from blocking ones (see `Colls::next_nonblocking_tag`).
    ///
    /// # Safety
    /// As [`Runtime::inter_coll_start`].
    pub unsafe fn inter_icoll_start(&mut self, id: CommId, call: InterCall) -> Result<SchedId> {
        // SAFETY: forwarded from the caller.
        unsafe { self.inter_coll_begin(id, call, true) }
    }

    /// # Safety
    /// As [`Runtime::inter_coll_start`].
    unsafe fn inter_coll_begin(
        &mut self,
        id: CommId,
        call: InterCall,
        nonblocking: bool,
    ) -> Result<SchedId> {
        let (c, inter) = self.inter_of(id)?;
        let local = self.comm(inter.local)?;
        let (local_cid, local_ctx) = (local.cid, local.coll_context());
        let (n, me) = (c.size(), c.rank);
        let mut plan = |call: &CollCall| -> Result<Builder> {
            // Algorithm warnings are printed by the intracommunicator
            // collectives already; these local parts run quietly.
            self.colls.plan(call, n, me).map(|(b, _)| b)
        };
        let mut p = InterPlan {
            b: Builder::new(n, me),
            n,
            me,
            remote_n: inter.remote.len() as u32,
            plan: &mut plan,
        };
        p.build(call)?;
        let b = p.b;
        // The tags only once the call is known to be well formed, so that
        // a refused call leaves the sequences as every member has them.
        let mut next_tag = |cid| {
            if nonblocking {
                self.colls.next_nonblocking_tag(cid)
            } else {
                self.colls.next_tag(cid)
            }
        };
        let tag = next_tag(local_cid);
        let remote = RemoteGroup {
            ctx: c.coll_context(),
            tag: next_tag(c.cid),
            group: inter.remote.clone(),
        };
        let s = b
            .finish(local_ctx, tag, c.group.clone())
            .with_remote(remote);
        Ok(self.colls.start(s, &mut self.p2p))
    }
}

//! Schedules: a collective as a list of phases, each a list of sends,
//! receives and local steps (copies, reductions). A phase starts when the
//! previous one has completed; its local steps run in order as they are
//! reached, its sends and receives are posted at once. Blocking and
//! non-blocking collectives run the same schedules: a blocking call starts
//! one and waits for it; a non-blocking one is advanced by every wait and
//! progress loop of the rank until it completes.
//!
//! Every message of a schedule carries the communicator's collective
//! context and the tag of that collective call (a per-communicator
//! sequence number), so collectives in flight at the same time never match
//! each other's messages, nor user messages.

use std::sync::Arc;

use crate::buf_pool::BufPool;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::{Envelope, P2p, ReqId, SendMode, Status};

use super::ops::ReducerRef;

/// What a schedule needs from point-to-point (a trait so that algorithms can
/// be tested on a simulated network).
pub trait Net {
    /// Starts a send of `len` bytes at `buf`: its request, or `None` if the
    /// message left at once (nothing to wait for).
    ///
    /// # Safety
    /// `buf` must stay valid for reads of `len` bytes until the request completes.
    unsafe fn send(
        &mut self,
        ctx: u32,
        me: u32,
        tag: i32,
        to_world: u32,
        buf: *const u8,
        len: usize,
    ) -> Result<Option<ReqId>>;
    /// Posts a receive into `cap` bytes at `buf`.
    ///
    /// # Safety
    /// `buf` must stay valid for writes of `cap` bytes until the request completes.
    unsafe fn recv(
        &mut self,
        ctx: u32,
        from: u32,
        from_world: u32,
        tag: i32,
        buf: *mut u8,
        cap: usize,
    ) -> ReqId;
    /// `Some(true)` once complete, `None` for an unknown id.
    fn is_complete(&self, id: ReqId) -> Option<bool>;
    /// Releases a completed request: the bytes it moved (`None` for an
    /// unknown id), or its error.
    fn take(&mut self, id: ReqId) -> Result<Option<usize>>;
    /// Cancels a receive that has not matched yet.
    fn cancel(&mut self, id: ReqId);
}

impl Net for P2p {
    unsafe fn send(
        &mut self,
        ctx: u32,
        me: u32,
        tag: i32,
        to_world: u32,
        buf: *const u8,
        len: usize,
    ) -> Result<Option<ReqId>> {
        let env = Envelope { ctx, src: me, tag };
        // An eager message that leaves at once needs no request (a
        // collective sends many small ones).
        // SAFETY: forwarded from the caller.
        if unsafe { self.send_now(env, to_world, buf, len)? } {
            return Ok(None);
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.isend_unsent(env, to_world, buf, len, SendMode::Standard) }.map(Some)
    }

    unsafe fn recv(
        &mut self,
        ctx: u32,
        from: u32,
        from_world: u32,
        tag: i32,
        buf: *mut u8,
        cap: usize,
    ) -> ReqId {
        // SAFETY: forwarded from the caller.
        unsafe { self.irecv(ctx, Some((from, from_world)), Some(tag), buf, cap) }
    }

    fn is_complete(&self, id: ReqId) -> Option<bool> {
        P2p::is_complete(self, id)
    }

    fn take(&mut self, id: ReqId) -> Result<Option<usize>> {
        match self.take_if_complete(id) {
            Some(Status { error: Some(e), .. }) => Err(e),
            st => Ok(st.map(|st| st.count)),
        }
    }

    fn cancel(&mut self, id: ReqId) {
        let _ = P2p::cancel(self, id);
    }
}

/// A buffer a schedule step refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    /// A staging buffer owned by the schedule.
    Tmp(usize),
    /// Caller memory (valid until the schedule completes, the caller promised).
    User(*mut u8),
}

impl Buf {
    /// Where zero-byte messages point: no byte is ever read or written
    /// there, so they need no staging buffer.
    pub fn nowhere() -> Buf {
        Buf::User(std::ptr::NonNull::<u8>::dangling().as_ptr())
    }
}

/// A local step's code.
pub type LocalFn = Box<dyn FnOnce(&mut Temps) -> Result<()>>;

/// A local step that decides what comes next: the phases it returns run
/// before the rest of the schedule (for protocols whose number of rounds
/// depends on what the messages said, such as context id agreement).
pub(crate) type ExtendFn = Box<dyn FnOnce(&mut Temps) -> Result<Vec<Vec<Act>>>>;

pub(crate) enum Act {
    Send {
        to: u32,
        buf: Buf,
        off: usize,
        len: usize,
    },
    Recv {
        from: u32,
        buf: Buf,
        off: usize,
        len: usize,
    },
    Copy {
        src: Buf,
        soff: usize,
        dst: Buf,
        doff: usize,
        len: usize,
    },
    /// `dst = src ∘ dst` with the schedule's reducer.
    Reduce {
        src: Buf,
        soff: usize,
        dst: Buf,
        doff: usize,
        len: usize,
    },
    /// A send to rank `to` of the remote group (see [`RemoteGroup`]).
    SendRemote {
        to: u32,
        buf: Buf,
        off: usize,
        len: usize,
    },
    /// A receive from rank `from` of the remote group.
    RecvRemote {
        from: u32,
        buf: Buf,
        off: usize,
        len: usize,
    },
    Call(LocalFn),
    /// Must be the last step of its phase.
    Extend(ExtendFn),
    /// Ends a phase: what follows waits for its messages. (Also what a
    /// step that has run is left as.)
    Fence,
}

impl Act {
    /// The buffers the step names.
    fn bufs_mut(&mut self) -> [Option<&mut Buf>; 2] {
        match self {
            Act::Send { buf, .. }
            | Act::Recv { buf, .. }
            | Act::SendRemote { buf, .. }
            | Act::RecvRemote { buf, .. } => [Some(buf), None],
            Act::Copy { src, dst, .. } | Act::Reduce { src, dst, .. } => [Some(src), Some(dst)],
            Act::Call(_) | Act::Extend(_) | Act::Fence => [None, None],
        }
    }
}

/// The other group of an intercommunicator, which the `SendRemote` and
/// `RecvRemote` steps of a schedule over the local group address: on the
/// intercommunicator's own context (whose frames come from that group) and
/// a tag of its sequence.
pub(crate) struct RemoteGroup {
    pub ctx: u32,
    pub tag: i32,
    /// World rank of each member of the remote group, by remote rank.
    pub group: Arc<[u32]>,
}

/// The staging buffers of a schedule; their heap memory never moves while
/// the schedule lives.
#[derive(Default)]
pub struct Temps {
    bufs: Vec<Vec<u8>>,
}

impl Temps {
    /// Address of byte `off` of `b`.
    pub fn ptr(&mut self, b: Buf, off: usize) -> *mut u8 {
        match b {
            Buf::Tmp(i) => self.bufs[i].as_mut_ptr().wrapping_add(off),
            Buf::User(p) => p.wrapping_add(off),
        }
    }

    /// A staging buffer.
    pub fn get(&mut self, i: usize) -> &mut Vec<u8> {
        &mut self.bufs[i]
    }
}

/// Builds a schedule for one rank.
pub struct Builder {
    /// Ranks in the communicator and this rank's rank.
    pub n: u32,
    pub me: u32,
    /// Every step, phases ended by [`Act::Fence`] (one vector for the
    /// whole schedule: a collective allocates little).
    acts: Vec<Act>,
    temps: Vec<Vec<u8>>,
    /// Staging buffers of finished schedules, for [`Builder::tmp`].
    free_temps: BufPool,
    pub(crate) reducer: Option<ReducerRef>,
    /// Room for the schedule's pending requests.
    pending: Vec<Pending>,
}

/// The vectors of a finished schedule, kept for a later one: allocating
/// them is a good part of what a small collective costs, and a large
/// staging buffer, fresh, faults its pages in one by one (glibc returns big
/// freed blocks to the kernel), which made a 4 MiB reduce ten times slower
/// than its copies and arithmetic.
pub struct Spare {
    acts: Vec<Act>,
    pending: Vec<Pending>,
    temps: BufPool,
}

impl Spare {
    /// Staging memory kept at most per spare, in bytes and in buffers.
    const TEMP_BYTES: usize = 32 << 20;
    const TEMP_COUNT: usize = 16;
}

impl Default for Spare {
    fn default() -> Spare {
        Spare {
            acts: Vec::new(),
            pending: Vec::new(),
            temps: BufPool::new(Spare::TEMP_BYTES, Spare::TEMP_COUNT),
        }
    }
}

impl Builder {
    pub fn new(n: u32, me: u32) -> Builder {
        Builder::reusing(
            n,
            me,
            Spare {
                acts: Vec::with_capacity(8),
                ..Spare::default()
            },
        )
    }

    /// A builder that fills the vectors a finished schedule left.
    pub fn reusing(n: u32, me: u32, spare: Spare) -> Builder {
        Builder {
            n,
            me,
            acts: spare.acts,
            temps: Vec::new(),
            free_temps: spare.temps,
            reducer: None,
            pending: spare.pending,
        }
    }

    /// A zeroed staging buffer of `len` bytes: the smallest one a finished
    /// schedule left that holds it, or a new one.
    pub fn tmp(&mut self, len: usize) -> Buf {
        let t = match self.free_temps.take(len) {
            Some(mut t) => {
                t.resize(len, 0);
                t
            }
            None => vec![0u8; len],
        };
        self.temps.push(t);
        Buf::Tmp(self.temps.len() - 1)
    }

    pub fn send(&mut self, to: u32, buf: Buf, off: usize, len: usize) {
        self.acts.push(Act::Send { to, buf, off, len });
    }

    pub fn recv(&mut self, from: u32, buf: Buf, off: usize, len: usize) {
        self.acts.push(Act::Recv {
            from,
            buf,
            off,
            len,
        });
    }

    /// Copies `len` bytes (overlap allowed); nothing if source and target coincide.
    pub fn copy(&mut self, src: Buf, soff: usize, dst: Buf, doff: usize, len: usize) {
        if len > 0 && (src, soff) != (dst, doff) {
            self.acts.push(Act::Copy {
                src,
                soff,
                dst,
                doff,
                len,
            });
        }
    }

    /// `dst = src ∘ dst` over `len` bytes (`src` from lower ranks).
    pub fn reduce(&mut self, src: Buf, soff: usize, dst: Buf, doff: usize, len: usize) {
        if len > 0 {
            self.acts.push(Act::Reduce {
                src,
                soff,
                dst,
                doff,
                len,
            });
        }
    }

    /// A new zeroed staging buffer of `len` bytes and its address, for
    /// sub-collectives planned on raw pointers (see [`Builder::append`]):
    /// its heap memory stays where it is when the builder becomes a
    /// schedule.
    pub(crate) fn tmp_at(&mut self, len: usize) -> (Buf, *mut u8) {
        let b = self.tmp(len);
        let Buf::Tmp(i) = b else {
            unreachable!("tmp gives a staging buffer")
        };
        (b, self.temps[i].as_mut_ptr())
    }

    /// A send to rank `to` of the remote group.
    pub(crate) fn send_remote(&mut self, to: u32, buf: Buf, off: usize, len: usize) {
        self.acts.push(Act::SendRemote { to, buf, off, len });
    }

    /// A receive from rank `from` of the remote group.
    pub(crate) fn recv_remote(&mut self, from: u32, buf: Buf, off: usize, len: usize) {
        self.acts.push(Act::RecvRemote {
            from,
            buf,
            off,
            len,
        });
    }

    /// Appends `other`'s phases after this builder's (a fence between), its
    /// staging buffers renumbered after this one's; its reducer is taken
    /// if this builder has none. For composing collectives from the
    /// algorithms, whose steps name buffers only through [`Buf`] (a `Call`
    /// or `Extend` step indexing staging buffers by number would not be
    /// renumbered).
    pub(crate) fn append(&mut self, mut other: Builder) {
        self.fence();
        other.fence();
        let base = self.temps.len();
        for mut act in other.acts {
            for b in act.bufs_mut().into_iter().flatten() {
                if let Buf::Tmp(i) = b {
                    *i += base;
                }
            }
            self.acts.push(act);
        }
        self.temps.extend(other.temps);
        if self.reducer.is_none() {
            self.reducer = other.reducer;
        }
    }

    /// A local step with arbitrary code.
    pub fn call(&mut self, f: LocalFn) {
        self.acts.push(Act::Call(f));
    }

    /// Ends the current phase: what follows waits for its messages.
    pub fn fence(&mut self) {
        if !matches!(self.acts.last(), None | Some(Act::Fence)) {
            self.acts.push(Act::Fence);
        }
    }

    /// Appends a whole phase.
    pub(crate) fn phase(&mut self, acts: Vec<Act>) {
        self.fence();
        self.acts.extend(acts);
        self.fence();
    }

    /// The schedule, to run in context `ctx` with tag `tag` among `group`.
    pub fn finish(mut self, ctx: u32, tag: i32, group: Arc<[u32]>) -> Schedule {
        self.fence();
        Schedule {
            ctx,
            tag,
            me: self.me,
            group,
            acts: self.acts,
            next: 0,
            temps: Temps { bufs: self.temps },
            free_temps: self.free_temps,
            reducer: self.reducer,
            pending: self.pending,
            error: None,
            finished: false,
            keep: Vec::new(),
            on_done: Vec::new(),
            spliced: Vec::new(),
            remote: None,
            truncated: None,
        }
    }
}

/// A request of a schedule's phase; for a receive, its sender's rank and
/// the bytes the members' counts say it sends.
struct Pending {
    id: ReqId,
    recv: Option<(u32, usize)>,
}

/// A collective in progress.
pub struct Schedule {
    ctx: u32,
    tag: i32,
    me: u32,
    group: Arc<[u32]>,
    /// The steps (see [`Builder`]); those before `next` have run.
    acts: Vec<Act>,
    next: usize,
    temps: Temps,
    /// Staging buffers it did not need, handed on with its own.
    free_temps: BufPool,
    reducer: Option<ReducerRef>,
    /// The requests of the phase that ran last.
    pending: Vec<Pending>,
    error: Option<Error>,
    finished: bool,
    /// Memory the schedule's messages use that someone else allocated.
    keep: Vec<Box<dyn std::any::Any>>,
    /// Steps to run once every phase has completed without error.
    on_done: Vec<LocalFn>,
    /// Phases an `Act::Extend` of the current phase returned.
    spliced: Vec<Vec<Act>>,
    /// What `SendRemote` and `RecvRemote` address, if the schedule has any.
    remote: Option<RemoteGroup>,
    /// The first receive that was truncated, reported once every phase ran.
    truncated: Option<Error>,
}

impl Schedule {
    /// Its vectors, emptied, for a later schedule (see [`Spare`]).
    pub fn into_spare(self) -> Spare {
        let Schedule {
            mut acts,
            mut pending,
            temps,
            free_temps: mut kept,
            ..
        } = self;
        acts.clear();
        pending.clear();
        for t in temps.bufs {
            kept.give(t);
        }
        Spare {
            acts,
            pending,
            temps: kept,
        }
    }

    /// Lets the schedule's `SendRemote` and `RecvRemote` steps address `remote`.
    pub(crate) fn with_remote(mut self, remote: RemoteGroup) -> Schedule {
        self.remote = Some(remote);
        self
    }

    /// Keeps `thing` alive until the schedule is dropped.
    pub fn keep(&mut self, thing: Box<dyn std::any::Any>) {
        self.keep.push(thing);
    }

    /// Runs `f` after the last phase (e.g. to unpack into a derived datatype).
    pub fn on_done(&mut self, f: LocalFn) {
        self.on_done.push(f);
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The error that ended the schedule, if any.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    /// Whether [`Schedule::advance`] would do something now.
    pub fn can_advance(&self, net: &dyn Net) -> bool {
        !self.finished
            && self
                .pending
                .iter()
                .all(|p| net.is_complete(p.id) != Some(false))
    }

    /// Records `e` as the outcome and cancels the pending receives.
    pub(crate) fn fail(&mut self, net: &mut dyn Net, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        for p in &self.pending {
            net.cancel(p.id);
        }
    }

    /// Moves the schedule as far as it can go without waiting; returns
    /// whether it has finished (successfully or not).
    pub fn advance(&mut self, net: &mut dyn Net) -> bool {
        loop {
            if self.finished {
                return true;
            }
            if self
                .pending
                .iter()
                .any(|p| net.is_complete(p.id) == Some(false))
            {
                return false;
            }
            for Pending { id, recv } in self.pending.drain(..) {
                match net.take(id) {
                    // A message longer than this rank's part, or shorter
                    // (the members disagree on the counts): the buffer holds
                    // what fitted, and the schedule goes on, so that the
                    // ranks this one forwards to are not left waiting;
                    // reported at the end.
                    Err(e) if e.class == ErrorClass::Truncate => {
                        self.truncated.get_or_insert(e);
                    }
                    Err(e) => {
                        self.error.get_or_insert(e);
                    }
                    Ok(got) => {
                        if let (Some(got), Some((from, want))) = (got, recv) {
                            if got < want {
                                self.truncated.get_or_insert(Error::new(
                                    ErrorClass::Other,
                                    format!(
                                        "rank {from} sent {got} bytes where this rank's count and \
                                         datatype expect {want} (the members' counts disagree)"
                                    ),
                                ));
                            }
                        }
                    }
                }
            }
            if self.error.is_some() {
                self.finished = true;
                return true;
            }
            if self.next == self.acts.len() {
                if let Some(e) = self.truncated.take() {
                    self.error = Some(e);
                    self.finished = true;
                    return true;
                }
                for f in std::mem::take(&mut self.on_done) {
                    if let Err(e) = f(&mut self.temps) {
                        self.error.get_or_insert(e);
                    }
                }
                self.finished = true;
                return true;
            }
            // One phase: the steps up to the next fence.
            while self.next < self.acts.len() {
                let act = std::mem::replace(&mut self.acts[self.next], Act::Fence);
                self.next += 1;
                if matches!(act, Act::Fence) {
                    break;
                }
                if let Err(e) = self.run(net, act) {
                    self.fail(net, e);
                    break;
                }
            }
            if !self.spliced.is_empty() {
                let mut new = Vec::new();
                for phase in std::mem::take(&mut self.spliced) {
                    new.extend(phase);
                    new.push(Act::Fence);
                }
                let at = self.next;
                self.acts.splice(at..at, new);
            }
        }
    }

    fn remote(&self) -> Result<&RemoteGroup> {
        self.remote.as_ref().ok_or_else(|| {
            Error::new(
                ErrorClass::Intern,
                "a step addresses a remote group the schedule does not have",
            )
        })
    }

    /// Sends `len` bytes of `buf` at `off` to world rank `to_world`; a
    /// request to wait for unless the message left at once.
    #[allow(clippy::too_many_arguments)]
    fn post_send(
        &mut self,
        net: &mut dyn Net,
        ctx: u32,
        tag: i32,
        to_world: u32,
        buf: Buf,
        off: usize,
        len: usize,
    ) -> Result<()> {
        let p = self.temps.ptr(buf, off);
        // SAFETY: staging buffers live as long as the schedule, which
        // outlives its requests; user buffers are valid until the schedule
        // completes (the caller's promise).
        if let Some(id) = unsafe { net.send(ctx, self.me, tag, to_world, p, len)? } {
            self.pending.push(Pending { id, recv: None });
        }
        Ok(())
    }

    /// Posts a receive of `len` bytes into `buf` at `off` from `from`
    /// (its rank in its group and its world rank).
    #[allow(clippy::too_many_arguments)]
    fn post_recv(
        &mut self,
        net: &mut dyn Net,
        ctx: u32,
        tag: i32,
        from: (u32, u32),
        buf: Buf,
        off: usize,
        len: usize,
    ) {
        let p = self.temps.ptr(buf, off);
        // SAFETY: as for sends.
        let id = unsafe { net.recv(ctx, from.0, from.1, tag, p, len) };
        self.pending.push(Pending {
            id,
            recv: Some((from.0, len)),
        });
    }

    fn run(&mut self, net: &mut dyn Net, act: Act) -> Result<()> {
        match act {
            Act::Send { to, buf, off, len } => {
                let (ctx, tag, to_world) = (self.ctx, self.tag, self.group[to as usize]);
                self.post_send(net, ctx, tag, to_world, buf, off, len)?;
            }
            Act::Recv {
                from,
                buf,
                off,
                len,
            } => {
                let (ctx, tag, from_world) = (self.ctx, self.tag, self.group[from as usize]);
                self.post_recv(net, ctx, tag, (from, from_world), buf, off, len);
            }
            Act::SendRemote { to, buf, off, len } => {
                let r = self.remote()?;
                let (ctx, tag, to_world) = (r.ctx, r.tag, r.group[to as usize]);
                self.post_send(net, ctx, tag, to_world, buf, off, len)?;
            }
            Act::RecvRemote {
                from,
                buf,
                off,
                len,
            } => {
                let r = self.remote()?;
                let (ctx, tag, from_world) = (r.ctx, r.tag, r.group[from as usize]);
                self.post_recv(net, ctx, tag, (from, from_world), buf, off, len);
            }
            Act::Copy {
                src,
                soff,
                dst,
                doff,
                len,
            } => {
                let s = self.temps.ptr(src, soff);
                let d = self.temps.ptr(dst, doff);
                // SAFETY: both ranges lie inside their buffers (the builder's
                // arithmetic, or the caller's promise for user memory); no
                // request is writing them between phases.
                unsafe { std::ptr::copy(s, d, len) };
            }
            Act::Reduce {
                src,
                soff,
                dst,
                doff,
                len,
            } => {
                let r = self.reducer.clone().ok_or_else(|| {
                    Error::new(ErrorClass::Intern, "reduction without an operation")
                })?;
                let s = self.temps.ptr(src, soff) as *const u8;
                let d = self.temps.ptr(dst, doff);
                if std::ptr::eq(s, d) {
                    return Err(Error::new(
                        ErrorClass::Intern,
                        "reduction of a buffer with itself",
                    ));
                }
                // SAFETY: as for copies; the algorithms never reduce
                // overlapping ranges (checked for the identical case above).
                let (inp, inout) = unsafe {
                    (
                        std::slice::from_raw_parts(s, len),
                        std::slice::from_raw_parts_mut(d, len),
                    )
                };
                r.reduce(inp, inout)?;
            }
            Act::Call(f) => f(&mut self.temps)?,
            Act::Extend(f) => self.spliced = f(&mut self.temps)?,
            Act::Fence => {}
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod sim {
    //! A network of `n` simulated ranks in one process, to run every
    //! algorithm on every communicator size in unit tests.

    use super::*;
    use std::collections::{HashMap, VecDeque};

    struct Msg {
        data: Vec<u8>,
    }

    struct PostedRecv {
        buf: *mut u8,
        cap: usize,
        got: usize,
        done: bool,
        error: Option<Error>,
    }

    /// One shared mailbox per (context, source, destination, tag), in order.
    #[derive(Default)]
    pub struct World {
        queues: HashMap<(u32, u32, u32, i32), VecDeque<Msg>>,
        /// Receives waiting, per (context, source, destination, tag), in order.
        waiting: HashMap<(u32, u32, u32, i32), VecDeque<u64>>,
        recvs: HashMap<u64, PostedRecv>,
        next: u64,
    }

    /// One rank's view of the world.
    pub struct RankNet<'a> {
        pub world: &'a mut World,
        pub me: u32,
    }

    impl World {
        fn deliver(&mut self, key: (u32, u32, u32, i32)) {
            loop {
                let (Some(q), Some(w)) = (self.queues.get_mut(&key), self.waiting.get_mut(&key))
                else {
                    return;
                };
                if q.is_empty() || w.is_empty() {
                    return;
                }
                let m = q.pop_front().expect("non-empty");
                let id = w.pop_front().expect("non-empty");
                let r = self.recvs.get_mut(&id).expect("posted");
                if m.data.len() > r.cap {
                    r.error = Some(Error::new(ErrorClass::Truncate, "truncated"));
                } else if !m.data.is_empty() {
                    // SAFETY: the schedule keeps the buffer valid for `cap` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(m.data.as_ptr(), r.buf, m.data.len()) };
                }
                r.got = m.data.len().min(r.cap);
                r.done = true;
            }
        }
    }

    impl Net for RankNet<'_> {
        unsafe fn send(
            &mut self,
            ctx: u32,
            me: u32,
            tag: i32,
            to: u32,
            buf: *const u8,
            len: usize,
        ) -> Result<Option<ReqId>> {
            assert_eq!(
                me, self.me,
                "communicator rank = world rank in the simulation"
            );
            let data = if len == 0 {
                Vec::new()
            } else {
                // SAFETY: the caller's promise.
                unsafe { std::slice::from_raw_parts(buf, len) }.to_vec()
            };
            let key = (ctx, me, to, tag);
            self.world
                .queues
                .entry(key)
                .or_default()
                .push_back(Msg { data });
            self.world.deliver(key);
            self.world.next += 1;
            let id = self.world.next;
            self.world.recvs.insert(
                id,
                PostedRecv {
                    buf: std::ptr::null_mut(),
                    cap: 0,
                    got: 0,
                    done: true,
                    error: None,
                },
            );
            Ok(Some(ReqId(id)))
        }

        unsafe fn recv(
            &mut self,
            ctx: u32,
            from: u32,
            _fw: u32,
            tag: i32,
            buf: *mut u8,
            cap: usize,
        ) -> ReqId {
            self.world.next += 1;
            let id = self.world.next;
            self.world.recvs.insert(
                id,
                PostedRecv {
                    buf,
                    cap,
                    got: 0,
                    done: false,
                    error: None,
                },
            );
            let key = (ctx, from, self.me, tag);
            self.world.waiting.entry(key).or_default().push_back(id);
            self.world.deliver(key);
            ReqId(id)
        }

        fn is_complete(&self, id: ReqId) -> Option<bool> {
            self.world.recvs.get(&id.0).map(|r| r.done)
        }

        fn take(&mut self, id: ReqId) -> Result<Option<usize>> {
            match self.world.recvs.remove(&id.0) {
                Some(PostedRecv { error: Some(e), .. }) => Err(e),
                r => Ok(r.map(|r| r.got)),
            }
        }

        fn cancel(&mut self, _id: ReqId) {}
    }

    /// Runs one schedule per rank to completion (round robin); panics on a
    /// deadlock.
    pub fn run_all(mut scheds: Vec<Schedule>) -> Vec<Option<Error>> {
        let mut world = World::default();
        let n = scheds.len();
        let mut rounds = 0;
        loop {
            let mut all = true;
            for (r, s) in scheds.iter_mut().enumerate() {
                let mut net = RankNet {
                    world: &mut world,
                    me: r as u32,
                };
                if !s.advance(&mut net) {
                    all = false;
                }
            }
            if all {
                break;
            }
            rounds += 1;
            assert!(rounds < 10_000, "the schedules of {n} ranks deadlocked");
        }
        scheds.iter().map(|s| s.error().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_buffers_are_reused_zeroed() {
        let group: Arc<[u32]> = Arc::from(vec![0u32]);
        let mut b = Builder::new(1, 0);
        let big = b.tmp(1 << 20);
        b.tmp(16);
        let mut s = b.finish(1, 1, group.clone());
        s.temps.get(0).fill(0xab);
        let at = s.temps.ptr(big, 0);
        let mut b = Builder::reusing(1, 0, s.into_spare());
        // The smallest kept buffer that holds it: the 16-byte one here.
        b.tmp(8);
        // Then the large one, zeroed again.
        let again = b.tmp(1000);
        let mut s = b.finish(1, 1, group);
        assert_eq!(s.temps.ptr(again, 0), at);
        assert!(s.temps.get(1).iter().all(|&x| x == 0));
        assert_eq!(s.temps.get(1).len(), 1000);
        // Never more kept than the limit.
        let mut b = Builder::new(1, 0);
        for _ in 0..Spare::TEMP_COUNT + 5 {
            b.tmp(Spare::TEMP_BYTES / 8);
        }
        let spare = b.finish(1, 1, Arc::from(vec![0u32])).into_spare();
        assert!(spare.temps.bytes() <= Spare::TEMP_BYTES);
        assert_eq!(spare.temps.len(), 8);
    }
}

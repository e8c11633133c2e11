//! The process-wide MPI state behind the C ABI, and the boundary every
//! exported function goes through: one owner at a time, argument errors
//! turned into error classes, and no panic crossing into C.

use std::cell::UnsafeCell;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU8, AtomicUsize, Ordering};

use tandem::p2p::ReqId;
use tandem::{CommId, Error, ErrorClass, Runtime, SELF, WORLD};

use crate::abi::*;
use crate::{errhandler, progress_signal, progress_thread};

/// First handle value of user communicators: far above every predefined handle.
const USER_COMM_BASE: usize = 0x10000;

/// Per-communicator state the C layer keeps.
pub struct CommEntry {
    pub errhandler: MPI_Errhandler,
    /// The session the communicator was made from (directly or through
    /// its parents); `None` in the world model.
    pub session: Option<MPI_Session>,
    /// Name, attributes, topology (see ext.rs).
    pub ext: crate::ext::CommExt,
}

/// Everything `MPI_Init` creates.
pub struct State {
    pub rt: Runtime,
    /// Indexed like the runtime's communicators.
    pub comms: Vec<Option<CommEntry>>,
    /// The communicator of each live request, by the request's slab index.
    req_comm: Vec<MPI_Comm>,
    pub thread_level: c_int,
    /// Requests, operations, groups, keyvals, infos, buffered sends (ext.rs).
    pub ext: crate::ext::Ext,
    /// Whether rwapi_init started MPI (then rwapi_finalize ends it).
    pub rwapi_owns_mpi: bool,
    /// One-sided windows, by handle index.
    pub wins: Vec<Option<crate::win::Win>>,
    /// Open files and the error handler of `MPI_FILE_NULL`.
    pub files: crate::file::Files,
    /// Open sessions, by handle index (see session.rs).
    pub sessions: Vec<Option<crate::session::Session>>,
    /// The rest of a blocking call that stopped waiting to let other
    /// threads in (see [`block_on`]).
    pub deferred: Option<Resume>,
}

impl State {
    pub fn new(rt: Runtime, thread_level: c_int) -> State {
        let entry = || {
            Some(CommEntry {
                errhandler: MPI_ERRORS_ARE_FATAL,
                session: None,
                ext: Default::default(),
            })
        };
        State {
            rt,
            comms: vec![entry(), entry()],
            req_comm: Vec::new(),
            thread_level,
            ext: Default::default(),
            rwapi_owns_mpi: false,
            wins: Vec::new(),
            files: Default::default(),
            sessions: Vec::new(),
            deferred: None,
        }
    }

    /// The runtime's id of a communicator handle.
    #[inline]
    pub fn comm_id(&self, comm: MPI_Comm) -> Result<CommId, Error> {
        let id = match comm {
            MPI_COMM_WORLD => WORLD,
            MPI_COMM_SELF => SELF,
            h if h >= USER_COMM_BASE => CommId(h - USER_COMM_BASE),
            _ => return Err(Error::new(ErrorClass::Comm, "invalid communicator")),
        };
        match self.comms.get(id.0) {
            Some(Some(_)) => Ok(id),
            _ => Err(Error::new(ErrorClass::Comm, "invalid communicator")),
        }
    }

    /// The handle of a runtime communicator.
    pub fn comm_handle(id: CommId) -> MPI_Comm {
        match id {
            WORLD => MPI_COMM_WORLD,
            SELF => MPI_COMM_SELF,
            CommId(i) => USER_COMM_BASE + i,
        }
    }

    pub fn add_comm(&mut self, id: CommId, errhandler: MPI_Errhandler) -> MPI_Comm {
        if self.comms.len() <= id.0 {
            self.comms.resize_with(id.0 + 1, || None);
        }
        self.comms[id.0] = Some(CommEntry {
            errhandler,
            session: None,
            ext: Default::default(),
        });
        Self::comm_handle(id)
    }

    pub fn entry(&mut self, id: CommId) -> &mut CommEntry {
        self.comms[id.0].as_mut().expect("validated communicator")
    }

    /// Remembers which communicator a request belongs to (for its errors).
    #[inline]
    pub fn note_request(&mut self, id: ReqId, comm: MPI_Comm) {
        let i = (id.0 & 0xffff_ffff) as usize;
        if self.req_comm.len() <= i {
            self.req_comm.resize(i + 1, MPI_COMM_WORLD);
        }
        self.req_comm[i] = comm;
    }

    pub fn request_comm(&self, id: ReqId) -> MPI_Comm {
        self.req_comm
            .get((id.0 & 0xffff_ffff) as usize)
            .copied()
            .unwrap_or(MPI_COMM_WORLD)
    }
}

const UNINIT: u8 = 0;
const ACTIVE: u8 = 1;
const FINALIZED: u8 = 2;

/// Values of the ownership word: nobody holds the state, somebody does,
/// and flags beside it: the progress helper wants to be told when the
/// holder leaves; the application thread waits to enter (a helper holding
/// the state then gives it back at once: the application drives
/// communication itself, on its own core, as fast as it can).
const FREE: u32 = 0;
const HELD: u32 = 1;
const WANTED: u32 = 2;
const APP_WAITING: u32 = 4;
/// Under `MPI_THREAD_MULTIPLE`: threads sleep on the word (a futex) until
/// the holder lets go, which then wakes them.
const SLEEPERS: u32 = 8;

/// How long a thread waiting to enter sleeps before looking again, should
/// a wake-up be missed (none should be: the holder wakes sleepers when it
/// lets go).
const ENTRY_SLEEP: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 10_000_000,
};
/// How many times a thread that wants to start a call yields while another
/// holds the library before it sleeps until it is let in.
const ENTRY_YIELDS: u32 = 64;
/// How many times a blocked call that let others in yields for one of
/// them to take the library before it takes it back itself.
const LET_IN_YIELDS: u32 = 16;

/// How communication is driven besides MPI calls (the `progress`
/// parameter), for the hooks on entering and leaving the library.
const POLICY_PLAIN: u8 = 0;
const POLICY_THREAD: u8 = 1;
const POLICY_SIGNAL: u8 = 2;

struct Global {
    /// The world model's phase (MPI_Init .. MPI_Finalize).
    phase: AtomicU8,
    /// The runtime's phase: started by the first of MPI_Init and
    /// MPI_Session_init, torn down when the last of MPI_Finalize and the
    /// open sessions' MPI_Session_finalize has run (at exit, if the world
    /// model never ran, so that sessions can open again); it cannot start
    /// again.
    runtime: AtomicU8,
    /// Who holds the library: one atomic operation to enter and one to
    /// leave (see [`Owner`]).
    busy: AtomicU32,
    /// `MPI_THREAD_MULTIPLE` was asked for: threads wanting in sleep on
    /// `busy`, and a blocked call lets them in (see [`resume_blocked`]).
    multiple: AtomicBool,
    /// The runtime's kick descriptor (`Engine::kick_fd`), -1 before it
    /// runs: a thread that wants in wakes a holder asleep in a wait.
    kick_fd: AtomicI32,
    /// Under `MPI_THREAD_MULTIPLE`: how many passes made progress, whoever
    /// made them (see [`progress_made`] and [`hand_over_now`]).
    epoch: AtomicU32,
    /// The progress count when the holder last stopped its wait to let
    /// others in: what it had looked at (see [`resume_blocked`]).
    handed_at: AtomicU32,
    /// The thread that holds `busy` (its `pthread_self`), 0 when none: how
    /// a call made from inside a callback the library runs is recognised.
    /// (A thread-local flag would cost a `__tls_get_addr` call per look in
    /// a shared library, three per MPI call.)
    holder: AtomicUsize,
    policy: AtomicU8,
    state: UnsafeCell<Option<State>>,
}

// SAFETY: `state` is only touched by the thread that holds `busy` (see
// `Owner`), so at most one thread accesses it at a time; the signal handler
// of the `signal` policy takes `busy` like any thread before touching it.
unsafe impl Sync for Global {}

static GLOBAL: Global = Global {
    phase: AtomicU8::new(UNINIT),
    runtime: AtomicU8::new(UNINIT),
    busy: AtomicU32::new(FREE),
    multiple: AtomicBool::new(false),
    kick_fd: AtomicI32::new(-1),
    epoch: AtomicU32::new(0),
    handed_at: AtomicU32::new(0),
    holder: AtomicUsize::new(0),
    policy: AtomicU8::new(POLICY_PLAIN),
    state: UnsafeCell::new(None),
};

/// The calling thread's identity for [`Global::holder`] (never 0).
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// Proof of holding the library; released on drop, also while unwinding.
/// The application thread, the progress helper thread and the signal
/// handler pass ownership of all communication state with one atomic
/// operation each way.
pub(crate) struct Owner;

impl Owner {
    /// Takes ownership if nobody holds it and the application thread is
    /// not waiting to (the helper thread never waits for the application
    /// thread, and gives way to it). Lock-free, so the signal handler may
    /// call it.
    pub(crate) fn try_acquire() -> Option<Owner> {
        GLOBAL
            .busy
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Owner::held())
    }

    /// Takes the library, seen free as `cur`; or the word as it is now.
    fn take_free(cur: u32) -> Result<Owner, u32> {
        GLOBAL
            .busy
            .compare_exchange_weak(cur, HELD, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| Owner::held())
    }

    /// Sets `flag` in the word, seen as `cur`; or the word as it is now.
    fn mark(cur: u32, flag: u32) -> Result<u32, u32> {
        GLOBAL
            .busy
            .compare_exchange(cur, cur | flag, Ordering::SeqCst, Ordering::Relaxed)
    }

    /// Marks this thread as the holder (see [`Global::holder`]).
    fn held() -> Owner {
        GLOBAL.holder.store(this_thread(), Ordering::Relaxed);
        Owner
    }

    /// Whether the calling thread holds the library (it runs a callback
    /// from inside it): then the state cannot be reached from here.
    pub(crate) fn held_here() -> bool {
        // Only this thread writes its own identity there, and clears it
        // before letting go: seeing it means holding.
        GLOBAL.holder.load(Ordering::Relaxed) == this_thread()
    }

    /// Whether nobody holds the library right now.
    pub(crate) fn is_free() -> bool {
        GLOBAL.busy.load(Ordering::Relaxed) == FREE
    }

    /// Whether the application thread waits to enter (a helper holding
    /// the state should give it back).
    pub(crate) fn app_waiting() -> bool {
        GLOBAL.busy.load(Ordering::Relaxed) & APP_WAITING != 0
    }

    /// For the helper thread: asks whoever holds the library to ring the
    /// helper's kick descriptor when it leaves. False if nobody holds it
    /// any more (then just try again).
    pub(crate) fn want() -> bool {
        let mut cur = GLOBAL.busy.load(Ordering::Relaxed);
        loop {
            if cur == FREE {
                return false;
            }
            if cur & WANTED != 0 {
                return true;
            }
            match GLOBAL.busy.compare_exchange_weak(
                cur,
                cur | WANTED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// For the holder: withdraws a helper's request to be told when it
    /// leaves; whether there was one.
    pub(crate) fn unwant() -> bool {
        GLOBAL.busy.fetch_and(!WANTED, Ordering::Relaxed) & WANTED != 0
    }

    /// Takes the library for the calling thread, waiting for a helper
    /// that holds it (or, under `MPI_THREAD_MULTIPLE`, another application
    /// thread). A call from a thread that holds it already comes from
    /// a callback the library runs (a user-defined reduction; attribute
    /// callbacks run outside, see attr.rs): the state is in use further up that thread's stack and
    /// cannot be lent out, and waiting would wait for ever, so the call is a
    /// fatal error naming `func`.
    #[inline(always)]
    pub(crate) fn acquire(func: &str) -> Owner {
        // The common case, kept short enough to inline into every call.
        match GLOBAL
            .busy
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Owner::held(),
            Err(cur) => Owner::acquire_contended(func, cur),
        }
    }

    /// [`Owner::acquire`] when the library was not free at first look.
    #[cold]
    #[inline(never)]
    fn acquire_contended(func: &str, mut cur: u32) -> Owner {
        let mut yields = 0u32;
        loop {
            if cur & HELD == 0 {
                // Free: take it.
                match Owner::take_free(cur) {
                    Ok(owner) => return owner,
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            // Held: perhaps by this very thread (looked at only now, to keep
            // the common entry short).
            if Owner::held_here() {
                errhandler::fatal_without_state(
                    func,
                    "called from a callback that runs inside the library (a user-defined reduction); \
                     Tandem does not support MPI calls there yet",
                );
            }
            if cur & APP_WAITING == 0 {
                // Ask the holder to let us in: a helper thread gives the
                // state back at once, a call blocked in a wait at its next
                // look (woken, should it sleep).
                match Owner::mark(cur, APP_WAITING) {
                    Ok(_) => {
                        cur |= APP_WAITING;
                        if multiple() {
                            kick_holder();
                        }
                    }
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            if multiple() && yields >= ENTRY_YIELDS {
                cur = sleep_while_held(cur);
                continue;
            }
            // Our turn comes soon: the helper, or another application
            // thread's call, lets go.
            yields += 1;
            std::thread::yield_now();
            cur = GLOBAL.busy.load(Ordering::Relaxed);
        }
    }

    /// Takes the library back for a blocked call that let other threads in
    /// (see [`resume_blocked`]): sleeps until it is free, asking to be let
    /// in only if progress was made since the call last looked at what it
    /// waits for (`seen`, a [`Global::epoch`]); otherwise the holder lets it
    /// in when it makes progress.
    fn reacquire(seen: u32) -> Owner {
        let mut cur = GLOBAL.busy.load(Ordering::Relaxed);
        loop {
            if cur & HELD == 0 {
                // Free: take it.
                match Owner::take_free(cur) {
                    Ok(owner) => return owner,
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            if cur & SLEEPERS == 0 {
                match Owner::mark(cur, SLEEPERS) {
                    Ok(_) => cur |= SLEEPERS,
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            // The holder counts progress before it looks for sleepers, and
            // we marked ourselves before looking at the count (both in one
            // total order): either it saw us, or we see its progress.
            if cur & APP_WAITING == 0 && GLOBAL.epoch.load(Ordering::SeqCst) != seen {
                match Owner::mark(cur, APP_WAITING) {
                    Ok(_) => {
                        cur |= APP_WAITING;
                        kick_holder();
                    }
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            cur = sleep_while_held(cur);
        }
    }

    pub(crate) fn slot(&mut self) -> &mut Option<State> {
        // SAFETY: holding `busy` gives exclusive access to the state; the
        // borrow is tied to `self`, which cannot outlive the ownership.
        unsafe { &mut *GLOBAL.state.get() }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        GLOBAL.holder.store(0, Ordering::Relaxed);
        // Without a helper thread nobody asks to be told (WANTED), and
        // without MPI_THREAD_MULTIPLE nobody sleeps on the word: a plain
        // store lets go, as in any spin lock (a read-modify-write costs
        // some nanoseconds more, on every MPI call). Otherwise a single
        // read-modify-write sees WANTED or SLEEPERS set before it (same
        // word), so no request to be told goes unanswered. (Helpers are
        // stopped, and kicked, after the policy is reset to plain.)
        if GLOBAL.policy.load(Ordering::Relaxed) == POLICY_PLAIN && !multiple() {
            GLOBAL.busy.store(FREE, Ordering::Release);
            return;
        }
        let was = GLOBAL.busy.swap(FREE, Ordering::Release);
        if was & WANTED != 0 {
            progress_thread::kick();
        }
        if was & SLEEPERS != 0 {
            futex_wake_all(&GLOBAL.busy);
        }
    }
}

/// Whether `MPI_THREAD_MULTIPLE` is in force.
#[inline]
pub(crate) fn multiple() -> bool {
    GLOBAL.multiple.load(Ordering::Relaxed)
}

/// Wakes the holder if it sleeps in a wait (see `Engine::kick_fd`).
fn kick_holder() {
    let fd = GLOBAL.kick_fd.load(Ordering::Relaxed);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from `one` to an eventfd that lives as
        // long as the runtime (cleared before it goes); a full counter
        // fails harmlessly.
        unsafe { libc::write(fd, (&raw const one).cast(), std::mem::size_of::<u64>()) };
    }
}

/// Marks a sleeper on the held word `cur` and sleeps until the holder lets
/// go (or [`ENTRY_SLEEP`] passes); the word as it is then.
fn sleep_while_held(mut cur: u32) -> u32 {
    if cur & SLEEPERS == 0 {
        match Owner::mark(cur, SLEEPERS) {
            Ok(_) => cur |= SLEEPERS,
            Err(now) => return now,
        }
    }
    // SAFETY: the futex word is a live, aligned u32 (a static); the
    // kernel compares it with `cur` and sleeps only while they are equal.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            GLOBAL.busy.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            cur,
            &ENTRY_SLEEP as *const libc::timespec,
        )
    };
    GLOBAL.busy.load(Ordering::Relaxed)
}

fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: a live, aligned u32; waking has no other effect.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        )
    };
}

/// Asked by a blocked call's wait under `MPI_THREAD_MULTIPLE` (set with
/// `P2p::set_hand_over`), `did` saying whether progress was made since its
/// last look: whether it should let other threads in now. Yes when a
/// thread wants to start a call, or when threads sleep that waited for
/// something this progress may have finished.
fn hand_over_now(did: bool) -> bool {
    // Counted again (`progress_made` counted the pass's frames): `did` also
    // covers a wake-up by a peer's change to memory polled, not a frame.
    if did {
        GLOBAL.epoch.fetch_add(1, Ordering::SeqCst);
    }
    let b = GLOBAL.busy.load(Ordering::SeqCst);
    let go = b & APP_WAITING != 0 || (did && b & SLEEPERS != 0);
    if go {
        // Its own progress is seen: only later progress by others should
        // make it ask to be let back in.
        GLOBAL
            .handed_at
            .store(GLOBAL.epoch.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    go
}

/// Counts progress, whoever made it: any call's pass that did something
/// (`P2p::set_progress_hook`), the progress helper thread's, the progress
/// signal handler's. A call that let other threads in, and sleeps to take
/// the library back, asks the holder to let it in once it sees the count
/// moved (see [`Owner::reacquire`]). Counting only the passes of blocked
/// calls' waits lost wake-ups: a request finished by another call's
/// progress, or by the helper, went unseen while the next holder slept in
/// a wait of its own, and both waited for ever (tests/c/thread_multiple.c
/// over TCP with `progress=thread`, on a loaded machine). Called while
/// holding the library (an atomic add: fine in a handler).
pub(crate) fn progress_made() {
    if multiple() {
        GLOBAL.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a blocking call does once it has started its operation: waits
/// (`may_end` false: to the end) and finishes, or, with `may_end`, returns
/// `None` when it stopped waiting to let other threads in.
pub type Resume = Box<dyn FnMut(&mut State) -> Option<Outcome>>;

/// Ends a blocking call: `step` waits and finishes. Under
/// `MPI_THREAD_MULTIPLE` it may stop waiting to let other threads in (one
/// thread's blocking receive must not keep out the thread that sends what
/// it waits for); it is then run again, until it ends, by the call's
/// boundary ([`call_with`]) after the library has been handed over and
/// taken back. Must be the last thing a call's body does.
pub fn block_on(
    s: &mut State,
    mut step: impl FnMut(&mut State, bool) -> Option<Outcome> + 'static,
) -> Outcome {
    if !multiple() {
        return step(s, false).unwrap_or_else(|| {
            Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Intern,
                "a wait that may not stop early stopped",
            ))
        });
    }
    match step(s, true) {
        Some(outcome) => outcome,
        None => {
            s.deferred = Some(Box::new(move |s| step(s, true)));
            Ok(())
        }
    }
}

/// The end of [`call_with`] under `MPI_THREAD_MULTIPLE`: a blocking call
/// that stopped waiting to let other threads in is resumed until it ends.
#[inline(never)]
fn end_multiple(
    func: &str,
    mut owner: Owner,
    mut outcome: Outcome,
    raise: impl FnOnce(&mut State, &str, Fail) -> c_int,
) -> c_int {
    let resume = owner.slot().as_mut().and_then(|s| s.deferred.take());
    if let Some(resume) = resume.filter(|_| outcome.is_ok()) {
        (owner, outcome) = resume_blocked(func, owner, resume);
    }
    let Some(state) = owner.slot().as_mut() else {
        errhandler::fatal_without_state(func, "MPI was finalized while this call waited");
    };
    let code = match outcome {
        Ok(()) => MPI_SUCCESS,
        Err(f) => raise(state, func, f),
    };
    leave(state);
    code
}

/// Runs a blocked call's `resume` until it ends, handing the library to
/// other threads each time it stops for them.
fn resume_blocked(func: &str, mut owner: Owner, mut resume: Resume) -> (Owner, Outcome) {
    loop {
        let Some(state) = owner.slot().as_mut() else {
            errhandler::fatal_without_state(func, "MPI was finalized while this call waited");
        };
        if let Some(outcome) = resume(state) {
            return (owner, outcome);
        }
        // Read while still holding: only the holder writes it.
        let seen = GLOBAL.handed_at.load(Ordering::Relaxed);
        leave(state);
        drop(owner);
        // Let one of the threads that asked take it before we ask again.
        for _ in 0..LET_IN_YIELDS {
            if GLOBAL.busy.load(Ordering::Relaxed) & HELD != 0 {
                break;
            }
            std::thread::yield_now();
        }
        owner = Owner::reacquire(seen);
        match owner.slot().as_mut() {
            Some(state) => enter(state),
            None => {
                errhandler::fatal_without_state(func, "MPI was finalized while this call waited")
            }
        }
    }
}

/// On entering the library under the `thread` and `signal` policies.
pub(crate) fn enter(state: &mut State) {
    if GLOBAL.policy.load(Ordering::Relaxed) == POLICY_THREAD {
        progress_thread::on_enter(state);
    }
}

/// On leaving the library under the `thread` and `signal` policies.
pub(crate) fn leave(state: &mut State) {
    match GLOBAL.policy.load(Ordering::Relaxed) {
        POLICY_THREAD => progress_thread::on_leave(state),
        POLICY_SIGNAL => progress_signal::on_leave(state),
        _ => {}
    }
}

/// Whether a receive posted now is one the application will compute
/// beside (a non-blocking one, under a policy that advances it meanwhile).
pub(crate) fn async_policy() -> bool {
    GLOBAL.policy.load(Ordering::Relaxed) != POLICY_PLAIN
}

pub fn is_initialized() -> bool {
    GLOBAL.phase.load(Ordering::Acquire) != UNINIT
}

pub fn is_finalized() -> bool {
    GLOBAL.phase.load(Ordering::Acquire) == FINALIZED
}

/// A failed call: the error and the communicator whose handler deals with it.
pub struct Fail {
    pub comm: MPI_Comm,
    pub error: Error,
}

impl Fail {
    pub fn new(comm: MPI_Comm, class: ErrorClass, msg: impl Into<String>) -> Fail {
        Fail {
            comm,
            error: Error::new(class, msg),
        }
    }
}

/// Result of an exported function's body.
pub type Outcome = Result<(), Fail>;

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs the body of an exported function that needs an initialized library.
pub fn call(func: &'static str, body: impl FnOnce(&mut State) -> Outcome) -> c_int {
    call_with(func, body, errhandler::raise)
}

/// As [`call`], with the error handling chosen by `raise` (windows have
/// handlers of their own).
pub fn call_with(
    func: &'static str,
    body: impl FnOnce(&mut State) -> Outcome,
    raise: impl FnOnce(&mut State, &str, Fail) -> c_int,
) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut owner = Owner::acquire(func);
        let Some(state) = owner.slot().as_mut() else {
            let why = if is_finalized() {
                "called after MPI_Finalize"
            } else {
                "called before MPI_Init"
            };
            errhandler::fatal_without_state(func, why);
        };
        enter(state);
        let outcome = body(state);
        if multiple() {
            // Apart, to keep every call's exit as short as it was without.
            return end_multiple(func, owner, outcome, raise);
        }
        let code = match outcome {
            Ok(()) => MPI_SUCCESS,
            Err(f) => raise(state, func, f),
        };
        leave(state);
        code
    }));
    // Outside the library now: a user's error handler may make MPI calls.
    let handled = errhandler::run_pending();
    match result {
        // A failed call returns what its handler left in the code; the
        // `call_errhandler` functions succeed whatever their handler does.
        Ok(code) if code != MPI_SUCCESS => handled.unwrap_or(code),
        Ok(code) => code,
        Err(p) => {
            eprintln!("tandem: internal error in {func}: {}", panic_message(&*p));
            MPI_ERR_INTERN
        }
    }
}

/// Runs a body that needs no library state (it may run before init).
pub fn call_stateless(func: &'static str, body: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(code) => code,
        Err(p) => {
            eprintln!("tandem: internal error in {func}: {}", panic_message(&*p));
            MPI_ERR_INTERN
        }
    }
}

/// For a call whose body needs no library state (datatype queries and
/// constructors, status queries): as [`call`], except from inside a
/// callback the library runs (a user-defined reduction), where the state is
/// in use further up the stack and cannot be lent. There the body runs on
/// its own and an error comes back as its class's code, without error
/// handlers (which need the state), so a reduction may ask about its
/// datatype, as the standard allows.
pub fn call_local(func: &'static str, body: impl FnOnce() -> Outcome) -> c_int {
    if Owner::held_here() {
        return call_stateless(func, || match body() {
            Ok(()) => MPI_SUCCESS,
            Err(f) => f.error.class.code(),
        });
    }
    call(func, |_| body())
}

/// The thread that initialised MPI (`MPI_Is_thread_main`).
pub static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// Starts the runtime and the state for the holder of `owner`.
fn start_runtime(owner: &mut Owner, thread_level: c_int) -> Result<(), Error> {
    if GLOBAL.runtime.load(Ordering::Acquire) == FINALIZED {
        return Err(Error::new(
            ErrorClass::Other,
            "the runtime was torn down (after the last MPI_Finalize or MPI_Session_finalize) \
             and cannot start again",
        ));
    }
    let rt = Runtime::init()?;
    let policy = match rt.settings().text("progress") {
        "thread" => POLICY_THREAD,
        "signal" => POLICY_SIGNAL,
        _ => POLICY_PLAIN,
    };
    let state = owner.slot().insert(State::new(rt, thread_level));
    if thread_level == MPI_THREAD_MULTIPLE {
        allow_multiple(state);
    }
    let _ = MAIN_THREAD.set(std::thread::current().id());
    GLOBAL.runtime.store(ACTIVE, Ordering::Release);
    let started = match policy {
        POLICY_THREAD => progress_thread::start(state),
        POLICY_SIGNAL => progress_signal::start(state),
        _ => false,
    };
    if started {
        GLOBAL.policy.store(policy, Ordering::Release);
    }
    Ok(())
}

/// Lets threads call at once from now on (`MPI_THREAD_MULTIPLE`): blocked
/// calls let others in.
pub(crate) fn allow_multiple(state: &mut State) {
    GLOBAL
        .kick_fd
        .store(state.rt.p2p().engine().kick_fd(), Ordering::Relaxed);
    state.rt.p2p().set_hand_over(Some(hand_over_now));
    state.rt.p2p().set_progress_hook(Some(progress_made));
    GLOBAL.multiple.store(true, Ordering::Release);
}

/// Whether any rank of the world runs under `MPI_THREAD_MULTIPLE` (`mine`:
/// this one does), agreed at the one call every rank makes. Every member of
/// a communicator must run a blocking collective the same way: on one host
/// small ones go over shared flags, waited for inside the call, except
/// under `MPI_THREAD_MULTIPLE`, where they are started schedules whose
/// waits let other threads in. One rank asking for it and another not
/// would otherwise meet on different paths and wait for each other for
/// ever; so if any rank asks, every rank runs that way (each still reports
/// the level it asked for).
fn any_rank_multiple(state: &mut State, mine: bool) -> Result<bool, Error> {
    let me = [u8::from(mine)];
    let mut all = vec![0u8; state.rt.size() as usize];
    // SAFETY: both buffers outlive the collective, which completes here.
    unsafe {
        state.rt.coll(
            WORLD,
            tandem::coll::CollCall::Allgather {
                send: Some(me.as_ptr()),
                recv: all.as_mut_ptr(),
                len: 1,
            },
        )
    }?;
    Ok(all.iter().any(|&b| b != 0))
}

/// Creates the state (MPI_Init), or joins the one open sessions started.
pub fn initialize(func: &'static str, thread_level: c_int) -> c_int {
    call_stateless(func, || {
        let mut owner = Owner::acquire(func);
        if GLOBAL.phase.load(Ordering::Acquire) != UNINIT {
            errhandler::fatal_without_state(func, "MPI is already initialized (or finalized)");
        }
        if let Some(state) = owner.slot().as_mut() {
            state.thread_level = thread_level;
            if thread_level == MPI_THREAD_MULTIPLE {
                allow_multiple(state);
            }
            let _ = MAIN_THREAD.set(std::thread::current().id());
        } else if let Err(e) = start_runtime(&mut owner, thread_level) {
            errhandler::fatal_without_state(func, &e.message);
        }
        let state = owner.slot().as_mut().expect("started above");
        // Asked for here, or by a session opened before.
        match any_rank_multiple(state, multiple()) {
            Ok(true) if !multiple() => allow_multiple(state),
            Ok(_) => {}
            Err(e) => errhandler::fatal_without_state(func, &e.message),
        }
        GLOBAL.phase.store(ACTIVE, Ordering::Release);
        MPI_SUCCESS
    })
}

/// Makes sure the runtime runs, for MPI_Session_init: the error class if
/// it cannot start.
pub fn start_for_session(func: &'static str, thread_level: c_int) -> c_int {
    call_stateless(func, || {
        let mut owner = Owner::acquire(func);
        if owner.slot().is_some() {
            return MPI_SUCCESS;
        }
        match start_runtime(&mut owner, thread_level) {
            Ok(()) => MPI_SUCCESS,
            Err(e) => {
                eprintln!("tandem: {func}: {}", e.message);
                e.class.code()
            }
        }
    })
}

/// Ends the world model (MPI_Finalize); tears the runtime down unless
/// sessions remain open (then the last MPI_Session_finalize does).
pub fn finalize(func: &'static str) -> c_int {
    call_stateless(func, || {
        let mut owner = Owner::acquire(func);
        if GLOBAL.phase.load(Ordering::Acquire) != ACTIVE || owner.slot().is_none() {
            errhandler::fatal_without_state(func, "MPI is not initialized (or already finalized)");
        }
        GLOBAL.phase.store(FINALIZED, Ordering::Release);
        let sessions_open = owner
            .slot()
            .as_ref()
            .is_some_and(|s| s.sessions.iter().any(Option::is_some));
        drop(owner);
        if sessions_open {
            MPI_SUCCESS
        } else {
            teardown(func)
        }
    })
}

/// After MPI_Session_finalize: tears the runtime down if that was the last
/// session and the world model is not active.
pub fn after_session_finalize(func: &'static str) -> c_int {
    call_stateless(func, || {
        let mut owner = Owner::acquire(func);
        let last = owner
            .slot()
            .as_ref()
            .is_some_and(|s| s.sessions.iter().all(Option::is_none));
        drop(owner);
        match GLOBAL.phase.load(Ordering::Acquire) {
            // The world model never ran: the runtime stays, idle, for a
            // later MPI_Session_init or MPI_Init (a library may open and
            // close sessions many times) and ends when the process exits.
            UNINIT if last => {
                static AT_EXIT: std::sync::Once = std::sync::Once::new();
                // SAFETY: registering a plain function with no arguments.
                AT_EXIT.call_once(|| unsafe {
                    libc::atexit(teardown_idle_at_exit);
                });
                MPI_SUCCESS
            }
            FINALIZED if last => teardown(func),
            _ => MPI_SUCCESS,
        }
    })
}

/// At exit: ends a runtime that sessions left idle (none open, the world
/// model not running), as the last MPI_Session_finalize would have.
extern "C" fn teardown_idle_at_exit() {
    // Exiting from inside the library (a fatal error) leaves it alone.
    if Owner::held_here() {
        return;
    }
    // Another thread may hold the library (and wait for ever): after a
    // second of trying, the runtime is left as it is rather than the exit
    // hung.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut owner = loop {
        if let Some(o) = Owner::try_acquire() {
            break o;
        }
        if std::time::Instant::now() > deadline {
            return;
        }
        std::thread::yield_now();
    };
    let idle = owner
        .slot()
        .as_ref()
        .is_some_and(|s| s.sessions.iter().all(Option::is_none));
    drop(owner);
    if idle && GLOBAL.phase.load(Ordering::Acquire) != ACTIVE {
        // A panic must not unwind out of an exit handler.
        let _ = std::panic::catch_unwind(|| teardown("MPI_Session_finalize"));
    }
}

/// Tears the state and the runtime down.
fn teardown(func: &'static str) -> c_int {
    // The helper thread (and signals) must be gone before the state is.
    GLOBAL.policy.store(POLICY_PLAIN, Ordering::Release);
    let mut helped = progress_signal::stop();
    helped.merge(&progress_thread::stop());
    let mut owner = Owner::acquire(func);
    let Some(mut state) = owner.slot().take() else {
        errhandler::fatal_without_state(func, "MPI is not initialized (or already finalized)");
    };
    GLOBAL.runtime.store(FINALIZED, Ordering::Release);
    // The descriptor closes with the runtime (no thread may call MPI
    // during MPI_Finalize, so none is about to write to it).
    GLOBAL.kick_fd.store(-1, Ordering::Relaxed);
    state.rt.p2p().engine().add_counters(&helped);
    // RWAPI's blocks are freed with the runtime, after its engine.
    match state.rt.finalize() {
        Ok(()) => MPI_SUCCESS,
        Err(e) => {
            eprintln!("tandem: {func}: {}", e.message);
            e.class.code()
        }
    }
}

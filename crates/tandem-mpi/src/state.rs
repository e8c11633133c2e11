//! The process-wide MPI state behind the C ABI, and the boundary every
//! exported function goes through: one owner at a time, argument errors
//! turned into error classes, and no panic crossing into C.

use std::cell::UnsafeCell;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};

use tandem::p2p::ReqId;
use tandem::progress::{background, Driven, Held, Library, Ownership, Reentered};
use tandem::{CommId, Error, ErrorClass, Runtime, SELF, WORLD};

use crate::abi::*;
use crate::{comm_shape, errhandler};

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
        comm_shape::clear();
        for id in [WORLD, SELF] {
            if let Ok(c) = rt.comm(id) {
                comm_shape::record(id, comm_shape::Shape::of(c));
            }
        }
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

    /// The runtime's index a communicator handle names, live or not
    /// ([`State::comm_id`] without the state).
    pub fn comm_index(comm: MPI_Comm) -> Option<CommId> {
        match comm {
            MPI_COMM_WORLD => Some(WORLD),
            MPI_COMM_SELF => Some(SELF),
            h if h >= USER_COMM_BASE => Some(CommId(h - USER_COMM_BASE)),
            _ => None,
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
        if let Ok(c) = self.rt.comm(id) {
            comm_shape::record(id, comm_shape::Shape::of(c));
        }
        Self::comm_handle(id)
    }

    /// Forgets a communicator the runtime has freed.
    pub fn remove_comm(&mut self, id: CommId) {
        self.comms[id.0] = None;
        comm_shape::forget(id);
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
    ownership: Ownership,
    state: UnsafeCell<Option<State>>,
}

// SAFETY: `state` is only touched by the thread that holds `ownership`
// (see `Owner` and `Library::driven`), so at most one thread accesses it at
// a time; the signal handler of the `signal` policy takes the word like
// any thread before touching it.
unsafe impl Sync for Global {}

static GLOBAL: Global = Global {
    phase: AtomicU8::new(UNINIT),
    runtime: AtomicU8::new(UNINIT),
    ownership: Ownership::new(),
    state: UnsafeCell::new(None),
};

/// How the progress helper thread and the signal handler reach the runtime.
impl Library for Global {
    fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    fn driven<'a>(&'a self, held: &'a mut Held<'_>) -> Option<&'a mut dyn Driven> {
        if !std::ptr::eq(held.ownership(), &self.ownership) {
            return None;
        }
        // SAFETY: `held` holds this state's word, which gives exclusive
        // access to it; the borrow is tied to `held`.
        let state = unsafe { &mut *self.state.get() };
        state.as_mut().map(|s| &mut s.rt as &mut dyn Driven)
    }
}

/// Proof of holding the library; released on drop, also while unwinding.
/// The application thread, the progress helper thread and the signal
/// handler pass ownership of all communication state with one atomic
/// operation each way (see `tandem::progress::ownership`).
pub(crate) struct Owner {
    /// Lets go of the word on drop.
    _held: Held<'static>,
}

impl Owner {
    /// Takes ownership if nobody holds it and the application thread is
    /// not waiting to. Lock-free.
    pub(crate) fn try_acquire() -> Option<Owner> {
        GLOBAL
            .ownership
            .try_acquire()
            .map(|held| Owner { _held: held })
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
        match GLOBAL.ownership.acquire() {
            Ok(held) => Owner { _held: held },
            Err(Reentered) => reentered(func),
        }
    }

    /// Whether the calling thread holds the library (it runs a callback
    /// from inside it): then the state cannot be reached from here.
    pub(crate) fn held_here() -> bool {
        GLOBAL.ownership.held_here()
    }

    pub(crate) fn slot(&mut self) -> &mut Option<State> {
        // SAFETY: holding the word gives exclusive access to the state; the
        // borrow is tied to `self`, which cannot outlive the ownership.
        unsafe { &mut *GLOBAL.state.get() }
    }
}

/// An MPI call from inside a callback the library runs (see
/// [`Owner::acquire`]).
#[cold]
#[inline(never)]
fn reentered(func: &str) -> ! {
    errhandler::fatal_without_state(
        func,
        "called from a callback that runs inside the library (a user-defined reduction); \
         Tandem does not support MPI calls there yet",
    )
}

/// Whether `MPI_THREAD_MULTIPLE` is in force.
#[inline]
pub(crate) fn multiple() -> bool {
    GLOBAL.ownership.multiple()
}

/// Asked by a blocked call's wait under `MPI_THREAD_MULTIPLE` (set with
/// `P2p::set_hand_over`): whether it should let other threads in now (see
/// `Ownership::hand_over_now`).
fn hand_over_now(did: bool) -> bool {
    GLOBAL.ownership.hand_over_now(did)
}

/// Counts progress, whoever made it (`P2p::set_progress_hook`; see
/// `Ownership::progress_made`).
fn progress_made() {
    GLOBAL.ownership.progress_made();
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
        let seen = GLOBAL.ownership.handed_at();
        leave(state);
        drop(owner);
        // Let one of the threads that asked take it before we ask again.
        GLOBAL.ownership.give_way();
        owner = Owner {
            _held: GLOBAL.ownership.reacquire(seen),
        };
        match owner.slot().as_mut() {
            Some(state) => enter(state),
            None => {
                errhandler::fatal_without_state(func, "MPI was finalized while this call waited")
            }
        }
    }
}

/// On entering the library under the `thread` and `signal` policies.
#[inline]
pub(crate) fn enter(state: &mut State) {
    background::on_enter(&mut state.rt);
}

/// On leaving the library under the `thread` and `signal` policies.
#[inline]
pub(crate) fn leave(state: &mut State) {
    background::on_leave(&GLOBAL.ownership, &mut state.rt);
}

/// Whether a receive posted now is one the application will compute
/// beside (a non-blocking one, under a policy that advances it meanwhile).
pub(crate) fn async_policy() -> bool {
    background::running()
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
    let state = owner.slot().insert(State::new(rt, thread_level));
    if thread_level == MPI_THREAD_MULTIPLE {
        allow_multiple(state);
    }
    let _ = MAIN_THREAD.set(std::thread::current().id());
    GLOBAL.runtime.store(ACTIVE, Ordering::Release);
    background::start(&GLOBAL, &mut state.rt);
    Ok(())
}

/// Lets threads call at once from now on (`MPI_THREAD_MULTIPLE`): blocked
/// calls let others in.
pub(crate) fn allow_multiple(state: &mut State) {
    state.rt.p2p().set_hand_over(Some(hand_over_now));
    state.rt.p2p().set_progress_hook(Some(progress_made));
    GLOBAL
        .ownership
        .allow_multiple(state.rt.p2p().engine().kick_fd());
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
    let helped = background::stop(&GLOBAL.ownership);
    let mut owner = Owner::acquire(func);
    let Some(mut state) = owner.slot().take() else {
        errhandler::fatal_without_state(func, "MPI is not initialized (or already finalized)");
    };
    GLOBAL.runtime.store(FINALIZED, Ordering::Release);
    // The descriptor closes with the runtime (no thread may call MPI
    // during MPI_Finalize, so none is about to write to it).
    GLOBAL.ownership.forget_holder_kick();
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

//! Error handlers: `MPI_ERRORS_ARE_FATAL` (the default) reports the rank, the
//! function and the reason, then ends the job; `MPI_ERRORS_RETURN` hands the
//! error class back to the caller.

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::*;
use crate::state::{Fail, State};

/// The name of an error class, e.g. `MPI_ERR_RANK`.
pub fn class_name(class: c_int) -> &'static str {
    match class {
        MPI_SUCCESS => "MPI_SUCCESS",
        MPI_ERR_BUFFER => "MPI_ERR_BUFFER",
        MPI_ERR_COUNT => "MPI_ERR_COUNT",
        MPI_ERR_TYPE => "MPI_ERR_TYPE",
        MPI_ERR_TAG => "MPI_ERR_TAG",
        MPI_ERR_COMM => "MPI_ERR_COMM",
        MPI_ERR_RANK => "MPI_ERR_RANK",
        MPI_ERR_REQUEST => "MPI_ERR_REQUEST",
        MPI_ERR_ROOT => "MPI_ERR_ROOT",
        MPI_ERR_GROUP => "MPI_ERR_GROUP",
        MPI_ERR_OP => "MPI_ERR_OP",
        MPI_ERR_ARG => "MPI_ERR_ARG",
        MPI_ERR_UNKNOWN => "MPI_ERR_UNKNOWN",
        MPI_ERR_TRUNCATE => "MPI_ERR_TRUNCATE",
        MPI_ERR_OTHER => "MPI_ERR_OTHER",
        MPI_ERR_INTERN => "MPI_ERR_INTERN",
        MPI_ERR_PENDING => "MPI_ERR_PENDING",
        MPI_ERR_IN_STATUS => "MPI_ERR_IN_STATUS",
        MPI_ERR_NO_MEM => "MPI_ERR_NO_MEM",
        MPI_ERR_PROC_ABORTED => "MPI_ERR_PROC_ABORTED",
        MPI_ERR_ERRHANDLER => "MPI_ERR_ERRHANDLER",
        MPI_ERR_TOPOLOGY => "MPI_ERR_TOPOLOGY",
        MPI_ERR_DIMS => "MPI_ERR_DIMS",
        MPI_ERR_ACCESS => "MPI_ERR_ACCESS",
        MPI_ERR_AMODE => "MPI_ERR_AMODE",
        MPI_ERR_ASSERT => "MPI_ERR_ASSERT",
        MPI_ERR_BAD_FILE => "MPI_ERR_BAD_FILE",
        MPI_ERR_BASE => "MPI_ERR_BASE",
        MPI_ERR_CONVERSION => "MPI_ERR_CONVERSION",
        MPI_ERR_DISP => "MPI_ERR_DISP",
        MPI_ERR_DUP_DATAREP => "MPI_ERR_DUP_DATAREP",
        MPI_ERR_FILE_EXISTS => "MPI_ERR_FILE_EXISTS",
        MPI_ERR_FILE_IN_USE => "MPI_ERR_FILE_IN_USE",
        MPI_ERR_FILE => "MPI_ERR_FILE",
        MPI_ERR_INFO_KEY => "MPI_ERR_INFO_KEY",
        MPI_ERR_INFO_NOKEY => "MPI_ERR_INFO_NOKEY",
        MPI_ERR_INFO_VALUE => "MPI_ERR_INFO_VALUE",
        MPI_ERR_INFO => "MPI_ERR_INFO",
        MPI_ERR_IO => "MPI_ERR_IO",
        MPI_ERR_KEYVAL => "MPI_ERR_KEYVAL",
        MPI_ERR_LOCKTYPE => "MPI_ERR_LOCKTYPE",
        MPI_ERR_NAME => "MPI_ERR_NAME",
        MPI_ERR_NOT_SAME => "MPI_ERR_NOT_SAME",
        MPI_ERR_NO_SPACE => "MPI_ERR_NO_SPACE",
        MPI_ERR_NO_SUCH_FILE => "MPI_ERR_NO_SUCH_FILE",
        MPI_ERR_PORT => "MPI_ERR_PORT",
        MPI_ERR_QUOTA => "MPI_ERR_QUOTA",
        MPI_ERR_READ_ONLY => "MPI_ERR_READ_ONLY",
        MPI_ERR_RMA_ATTACH => "MPI_ERR_RMA_ATTACH",
        MPI_ERR_RMA_CONFLICT => "MPI_ERR_RMA_CONFLICT",
        MPI_ERR_RMA_RANGE => "MPI_ERR_RMA_RANGE",
        MPI_ERR_RMA_SHARED => "MPI_ERR_RMA_SHARED",
        MPI_ERR_RMA_SYNC => "MPI_ERR_RMA_SYNC",
        MPI_ERR_SERVICE => "MPI_ERR_SERVICE",
        MPI_ERR_SIZE => "MPI_ERR_SIZE",
        MPI_ERR_SPAWN => "MPI_ERR_SPAWN",
        MPI_ERR_UNSUPPORTED_DATAREP => "MPI_ERR_UNSUPPORTED_DATAREP",
        MPI_ERR_UNSUPPORTED_OPERATION => "MPI_ERR_UNSUPPORTED_OPERATION",
        MPI_ERR_WIN => "MPI_ERR_WIN",
        MPI_ERR_RMA_FLAVOR => "MPI_ERR_RMA_FLAVOR",
        MPI_ERR_VALUE_TOO_LARGE => "MPI_ERR_VALUE_TOO_LARGE",
        MPI_ERR_SESSION => "MPI_ERR_SESSION",
        MPI_ERR_ABI => "MPI_ERR_ABI",
        _ => "MPI error",
    }
}

fn rank_label() -> String {
    std::env::var(tandem::bootstrap::env::RANK)
        .map(|r| format!("rank {r}"))
        .unwrap_or_else(|_| "rank 0".into())
}

/// Writes one whole line to stderr in a single write, so that a rank stopped
/// right after it never leaves half a line.
fn report(line: String) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// Ends the job after an error that has no handler to go to.
pub fn fatal_without_state(func: &str, why: &str) -> ! {
    report(format!(
        "tandem: {}: fatal error in {func}: {why}",
        rank_label()
    ));
    std::process::exit(MPI_ERR_OTHER)
}

/// Hands an error to the handler of its communicator (errors on an invalid
/// communicator go to `MPI_COMM_SELF`'s, as the standard says).
pub fn raise(state: &mut State, func: &str, fail: Fail) -> c_int {
    let (handler, target) = match state.comm_id(fail.comm) {
        Ok(id) => (state.entry(id).errhandler, fail.comm),
        Err(_) => (state.entry(tandem::SELF).errhandler, MPI_COMM_SELF),
    };
    raise_to(state, func, handler, target, fail)
}

/// Hands an error to `handler`, the handler of the communicator or window
/// `target`; the code the call returns.
pub fn raise_to(
    state: &mut State,
    func: &str,
    handler: MPI_Errhandler,
    target: usize,
    fail: Fail,
) -> c_int {
    let code = fail.error.code();
    invoke(state, func, handler, target, code, &fail.error.message)
}

/// Runs `handler` for error `code` on the communicator or window `target`;
/// the code the call returns. A user's handler runs once the calling
/// thread has left the library (see [`run_pending`]), so that it may make
/// MPI calls.
pub fn invoke(
    state: &mut State,
    func: &str,
    handler: MPI_Errhandler,
    target: usize,
    code: c_int,
    why: &str,
) -> c_int {
    if handler == MPI_ERRORS_RETURN {
        return code;
    }
    if let Some(h) = state.ext.errhandlers.get(handler) {
        if PENDING
            .with(|p| p.replace(Some((h.func, h.kind, target, code))))
            .is_none()
        {
            PENDING_CALLS.fetch_add(1, Ordering::Relaxed);
        }
        return code;
    }
    let class = crate::errcodes::class_of(code).unwrap_or(code);
    let name = match crate::errcodes::added_string(code) {
        Some(text) if !text.is_empty() => format!("error class {class}: {}", text.trim_end()),
        Some(_) => format!("error class {class}"),
        None => class_name(class).to_string(),
    };
    report(format!(
        "tandem: rank {}: fatal error in {func}: {why} ({name})",
        state.rt.rank(),
    ));
    if class == MPI_ERR_PROC_ABORTED && std::env::var_os(tandem::bootstrap::env::ADDR).is_some() {
        // A peer died first: give the launcher time to report that rank (it
        // stops this one within two seconds) rather than race it with ours.
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
    // Exiting without MPI_Finalize makes the launcher stop the other ranks.
    // An exit status keeps 8 bits: a class the application added (above
    // MPI_ERR_LASTCODE) could read as success.
    std::process::exit(if (1..=255).contains(&class) {
        class
    } else {
        MPI_ERR_OTHER
    })
}

/// A user's error handler function, in C or in Fortran.
#[derive(Clone, Copy)]
pub enum HandlerFn {
    C(MPI_Comm_errhandler_function),
    /// `SUBROUTINE HANDLER(OBJECT, ERROR_CODE)`: the object as an INTEGER.
    Fortran(crate::fortran::FortranErrhandlerFunction),
}

/// A user's error handler to call, with its kind, object and error code.
type PendingCall = (HandlerFn, Kind, usize, c_int);

thread_local! {
    /// The user's error handler [`invoke`] chose, until the library is left.
    static PENDING: Cell<Option<PendingCall>> = const { Cell::new(None) };
}

/// How many threads have a [`PENDING`] call: every MPI call looks here
/// first, since a thread-local costs a `__tls_get_addr` call in a shared
/// library. (A thread sees its own updates in order: Relaxed suffices.)
static PENDING_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Calls the user's error handler chosen inside the library, if any; the
/// caller holds the library no longer. The code the handler leaves in its
/// argument is what the call returns (as MPICH does: a handler may turn
/// the error into MPI_SUCCESS).
pub fn run_pending() -> Option<c_int> {
    if PENDING_CALLS.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let (func, kind, target, code) = PENDING.with(Cell::take)?;
    PENDING_CALLS.fetch_sub(1, Ordering::Relaxed);
    let mut object = target;
    let mut code = code;
    match func {
        // SAFETY: `f` is the handler the application registered, with the
        // signature the standard gives it (MPI_Comm, MPI_Win and MPI_File
        // are all handle-sized); its variadic part gets no arguments.
        HandlerFn::C(f) => unsafe { f(&mut object, &mut code) },
        HandlerFn::Fortran(f) => {
            use crate::handle_int::*;
            let mut h = match kind {
                Kind::Comm => MPI_Comm_toint(object),
                Kind::Win => MPI_Win_toint(object),
                Kind::File => MPI_File_toint(object),
                Kind::Session => MPI_Session_toint(object),
            };
            // SAFETY: a Fortran handler the application registered, which
            // takes its two INTEGER arguments by reference.
            unsafe { f(&mut h, &mut code) }
        }
    }
    Some(code)
}

/// What an error handler may be attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Comm,
    Win,
    File,
    Session,
}

/// An error handler the application created.
struct UserErrhandler {
    kind: Kind,
    func: HandlerFn,
    /// Handles the application holds (created or returned by a `get`);
    /// at 0 the handle can no longer be attached. Objects it is attached
    /// to keep using it: entries are never reused.
    refs: u32,
}

/// First handle value of user error handlers: far above the predefined ones.
const USER_BASE: MPI_Errhandler = 0x10000;

/// The error handlers the application created, by handle.
#[derive(Default)]
pub struct Errhandlers(Vec<UserErrhandler>);

impl Errhandlers {
    fn get(&self, h: MPI_Errhandler) -> Option<&UserErrhandler> {
        self.0.get(h.checked_sub(USER_BASE)?)
    }

    fn get_mut(&mut self, h: MPI_Errhandler) -> Option<&mut UserErrhandler> {
        self.0.get_mut(h.checked_sub(USER_BASE)?)
    }

    /// A new handler of `kind` calling `func`.
    pub fn create(&mut self, kind: Kind, func: MPI_Comm_errhandler_function) -> MPI_Errhandler {
        self.create_any(kind, HandlerFn::C(func))
    }

    /// A new handler of `kind` calling `func`, in C or Fortran.
    pub fn create_any(&mut self, kind: Kind, func: HandlerFn) -> MPI_Errhandler {
        self.0.push(UserErrhandler {
            kind,
            func,
            refs: 1,
        });
        USER_BASE + self.0.len() - 1
    }

    /// Whether `h` may be attached to an object of `kind`.
    pub fn valid_for(&self, h: MPI_Errhandler, kind: Kind) -> bool {
        is_predefined(h) || self.get(h).is_some_and(|u| u.kind == kind && u.refs > 0)
    }

    /// One more handle the application holds (it got `h` from a `get`).
    pub fn add_ref(&mut self, h: MPI_Errhandler) {
        if let Some(u) = self.get_mut(h) {
            u.refs = u.refs.saturating_add(1);
        }
    }

    /// `MPI_Errhandler_free`: false if `h` names no handler the
    /// application holds.
    pub fn release(&mut self, h: MPI_Errhandler) -> bool {
        if is_predefined(h) {
            return true;
        }
        match self.get_mut(h) {
            Some(u) if u.refs > 0 => {
                u.refs -= 1;
                true
            }
            _ => false,
        }
    }
}

/// Whether `h` is one of the predefined error handlers.
pub fn is_predefined(h: MPI_Errhandler) -> bool {
    matches!(
        h,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
    )
}

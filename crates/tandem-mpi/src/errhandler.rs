//! Error handlers: `MPI_ERRORS_ARE_FATAL` (the default) reports the rank, the
//! function and the reason, then ends the job; `MPI_ERRORS_RETURN` hands the
//! error class back to the caller.

use std::os::raw::c_int;

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
    let handler = match state.comm_id(fail.comm) {
        Ok(id) => state.entry(id).errhandler,
        Err(_) => state.entry(tandem::SELF).errhandler,
    };
    raise_to(state, func, handler, fail)
}

/// Hands an error to `handler`.
pub fn raise_to(state: &mut State, func: &str, handler: MPI_Errhandler, fail: Fail) -> c_int {
    let class = fail.error.class.code();
    if handler == MPI_ERRORS_RETURN {
        return class;
    }
    report(format!(
        "tandem: rank {}: fatal error in {func}: {} ({})",
        state.rt.rank(),
        fail.error.message,
        class_name(class)
    ));
    if class == MPI_ERR_PROC_ABORTED && std::env::var_os(tandem::bootstrap::env::ADDR).is_some() {
        // A peer died first: give the launcher time to report that rank (it
        // stops this one within two seconds) rather than race it with ours.
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
    // Exiting without MPI_Finalize makes the launcher stop the other ranks.
    std::process::exit(class)
}

/// Whether `h` is an error handler Tandem knows.
pub fn is_valid(h: MPI_Errhandler) -> bool {
    matches!(
        h,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
    )
}

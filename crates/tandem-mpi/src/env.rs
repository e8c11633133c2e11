//! Environment management, communicators, error handling and datatype
//! queries.
//!
//! Safety contract of every function here: pointer arguments are valid as
//! the MPI standard requires of the caller; null outputs are checked.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;
use std::time::Instant;

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::comm_shape;
use crate::state::{self, call, call_local, call_stateless, Fail, State};
use crate::{errcodes, errhandler};

/// Thread support Tandem provides: any thread may call at any time (one
/// runs in the library at a time; blocked calls let the others in).
pub(crate) const THREAD_LEVEL: c_int = MPI_THREAD_MULTIPLE;

#[no_mangle]
pub unsafe extern "C" fn MPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    state::initialize("MPI_Init", MPI_THREAD_SINGLE)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    if provided.is_null() {
        return MPI_ERR_ARG;
    }
    let level = if [
        MPI_THREAD_SINGLE,
        MPI_THREAD_FUNNELED,
        MPI_THREAD_SERIALIZED,
        MPI_THREAD_MULTIPLE,
    ]
    .contains(&required)
    {
        required.min(THREAD_LEVEL)
    } else {
        THREAD_LEVEL
    };
    let rc = state::initialize("MPI_Init_thread", level);
    if rc == MPI_SUCCESS {
        // SAFETY: checked non-null; writable by the MPI contract.
        unsafe { put(provided, level) };
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    call("MPI_Query_thread", |s| {
        args::out_ptr(MPI_COMM_WORLD, provided, "provided")?;
        // SAFETY: checked non-null.
        unsafe { put(provided, s.thread_level) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    // The standard has MPI_Finalize first free MPI_COMM_SELF's attributes,
    // newest first, while the library is still whole, so that delete
    // callbacks can serve as finalization hooks.
    if state::is_initialized() && !state::is_finalized() {
        let rc = crate::attr::free_object(
            "MPI_Finalize",
            crate::attr::Kind::Comm,
            MPI_COMM_SELF,
            |_| Ok(()),
            |_| Ok(()),
        );
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    state::finalize("MPI_Finalize")
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    call_stateless("MPI_Initialized", || {
        if flag.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(state::is_initialized())) };
        MPI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    call_stateless("MPI_Finalized", || {
        if flag.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(state::is_finalized())) };
        MPI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    if !state::is_initialized() || state::is_finalized() {
        eprintln!(
            "tandem: MPI_Abort called with error code {errorcode} outside MPI_Init..MPI_Finalize"
        );
        std::process::exit(if errorcode & 0xff == 0 {
            1
        } else {
            errorcode & 0xff
        });
    }
    call("MPI_Abort", |s| {
        // Any communicator (even an invalid one) aborts the whole job.
        let _ = comm;
        let msg = format!("MPI_Abort(comm={comm:#x}, errorcode={errorcode})");
        s.rt.abort(errorcode, &msg)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    call_stateless("MPI_Get_version", || {
        if version.is_null() || subversion.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null.
        unsafe {
            put(version, MPI_VERSION);
            put(subversion, MPI_SUBVERSION);
        }
        MPI_SUCCESS
    })
}

/// Copies `text` into a C buffer of `cap` bytes with a terminating NUL and
/// stores the length (without the NUL).
///
/// # Safety
/// `buf` must be valid for `cap` bytes and `len` for one write.
unsafe fn write_c_string(text: &str, buf: *mut c_char, cap: usize, len: *mut c_int) {
    let n = text.len().min(cap.saturating_sub(1));
    // SAFETY: `n + 1 <= cap` bytes fit the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
        put(len, n as c_int);
    }
}

/// The library's self-description.
pub fn library_version() -> String {
    format!(
        "Tandem {} (MPI {}.{} standard ABI; transports: shm, tcp)",
        env!("CARGO_PKG_VERSION"),
        MPI_VERSION,
        MPI_SUBVERSION
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call_stateless("MPI_Get_library_version", || {
        if version.is_null() || resultlen.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: the standard requires MPI_MAX_LIBRARY_VERSION_STRING bytes.
        unsafe {
            write_c_string(
                &library_version(),
                version,
                MPI_MAX_LIBRARY_VERSION_STRING,
                resultlen,
            )
        };
        MPI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    call_stateless("MPI_Get_processor_name", || {
        if name.is_null() || resultlen.is_null() {
            return MPI_ERR_ARG;
        }
        let text = crate::host::name().unwrap_or_else(|| "localhost".to_string());
        // SAFETY: the standard requires MPI_MAX_PROCESSOR_NAME bytes.
        unsafe { write_c_string(&text, name, MPI_MAX_PROCESSOR_NAME, resultlen) };
        MPI_SUCCESS
    })
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    epoch().elapsed().as_secs_f64()
}

#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

fn comm_of(s: &State, comm: MPI_Comm) -> Result<&tandem::comm::Comm, Fail> {
    let id = args::comm(s, comm)?;
    s.rt.comm(id).map_err(|error| Fail { comm, error })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    let answer = move |r: u32| {
        args::out_ptr(comm, rank, "rank")?;
        // SAFETY: checked non-null.
        unsafe { put(rank, r as c_int) };
        Ok(())
    };
    comm_shape::query(
        "MPI_Comm_rank",
        comm,
        |shape| answer(shape.rank),
        |s| answer(comm_of(s, comm)?.rank),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let answer = move |n: u32| {
        args::out_ptr(comm, size, "size")?;
        // SAFETY: checked non-null.
        unsafe { put(size, n as c_int) };
        Ok(())
    };
    comm_shape::query(
        "MPI_Comm_size",
        comm,
        |shape| answer(shape.size),
        |s| answer(comm_of(s, comm)?.size()),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_errhandler(
    comm: MPI_Comm,
    errhandler: MPI_Errhandler,
) -> c_int {
    call("MPI_Comm_set_errhandler", |s| {
        let id = args::comm(s, comm)?;
        if !s
            .ext
            .errhandlers
            .valid_for(errhandler, errhandler::Kind::Comm)
        {
            return Err(Fail::new(
                comm,
                ErrorClass::Arg,
                format!("invalid error handler {errhandler:#x}"),
            ));
        }
        s.entry(id).errhandler = errhandler;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    call("MPI_Comm_get_errhandler", |s| {
        args::out_ptr(comm, errhandler, "errhandler")?;
        let id = args::comm(s, comm)?;
        let h = s.entry(id).errhandler;
        s.ext.errhandlers.add_ref(h);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
    call("MPI_Errhandler_free", |s| {
        args::out_ptr(MPI_COMM_WORLD, errhandler, "errhandler")?;
        // SAFETY: checked non-null; readable by the MPI contract.
        let h = unsafe { *errhandler };
        // Predefined handlers are never destroyed; objects keep using a
        // freed user handler. The handle is reset as the standard says.
        if !s.ext.errhandlers.release(h) {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                format!("invalid error handler {h:#x}"),
            ));
        }
        // SAFETY: checked non-null.
        unsafe { put(errhandler, MPI_ERRHANDLER_NULL) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_errhandler(
    comm_errhandler_fn: Option<MPI_Comm_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    call("MPI_Comm_create_errhandler", |s| {
        args::out_ptr(MPI_COMM_WORLD, errhandler, "errhandler")?;
        let Some(func) = comm_errhandler_fn else {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "NULL error handler function",
            ));
        };
        let h = s.ext.errhandlers.create(errhandler::Kind::Comm, func);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_call_errhandler(comm: MPI_Comm, errorcode: c_int) -> c_int {
    call("MPI_Comm_call_errhandler", |s| {
        let id = args::comm(s, comm)?;
        let handler = s.entry(id).errhandler;
        let why = format!("error code {errorcode} raised by MPI_Comm_call_errhandler");
        errhandler::invoke(
            s,
            "MPI_Comm_call_errhandler",
            handler,
            comm,
            errorcode,
            &why,
        );
        // The handler was called (or returns): the call itself succeeded.
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call_stateless("MPI_Error_string", || {
        if string.is_null() || resultlen.is_null() {
            return MPI_ERR_ARG;
        }
        let full = match error_class_description(errorcode) {
            Some(text) => format!("{}: {text}", errhandler::class_name(errorcode)),
            None => match errcodes::added_string(errorcode) {
                Some(text) => text,
                None => return MPI_ERR_ARG,
            },
        };
        // SAFETY: the standard requires MPI_MAX_ERROR_STRING bytes.
        unsafe { write_c_string(&full, string, MPI_MAX_ERROR_STRING, resultlen) };
        MPI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    call_stateless("MPI_Error_class", || {
        if errorclass.is_null() {
            return MPI_ERR_ARG;
        }
        // Tandem's own error codes are their error classes.
        let Some(class) = errcodes::class_of(errorcode) else {
            return MPI_ERR_ARG;
        };
        // SAFETY: checked non-null.
        unsafe { put(errorclass, class) };
        MPI_SUCCESS
    })
}

/// An argument error of the error-code calls (raised on `MPI_COMM_WORLD`).
fn code_fail(why: impl Into<String>) -> Fail {
    Fail::new(MPI_COMM_WORLD, ErrorClass::Arg, why)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    call_local("MPI_Add_error_class", || {
        args::out_ptr(MPI_COMM_WORLD, errorclass, "errorclass")?;
        let class = errcodes::add_class().map_err(code_fail)?;
        // SAFETY: checked non-null.
        unsafe { put(errorclass, class) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    call_local("MPI_Add_error_code", || {
        args::out_ptr(MPI_COMM_WORLD, errorcode, "errorcode")?;
        let code = errcodes::add_code(errorclass).map_err(code_fail)?;
        // SAFETY: checked non-null.
        unsafe { put(errorcode, code) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    call_local("MPI_Add_error_string", || {
        if string.is_null() {
            return Err(code_fail("NULL string"));
        }
        // SAFETY: checked non-null; a C string by the MPI contract.
        let text = unsafe { std::ffi::CStr::from_ptr(string) };
        if text.to_bytes().len() >= MPI_MAX_ERROR_STRING {
            return Err(code_fail(format!(
                "an error string of {} bytes: at most {} fit MPI_MAX_ERROR_STRING",
                text.to_bytes().len(),
                MPI_MAX_ERROR_STRING - 1
            )));
        }
        errcodes::set_string(errorcode, text.to_string_lossy().into_owned()).map_err(code_fail)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Remove_error_class(errorclass: c_int) -> c_int {
    call_local("MPI_Remove_error_class", || {
        errcodes::remove_class(errorclass).map_err(code_fail)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Remove_error_code(errorcode: c_int) -> c_int {
    call_local("MPI_Remove_error_code", || {
        errcodes::remove_code(errorcode).map_err(code_fail)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Remove_error_string(errorcode: c_int) -> c_int {
    call_local("MPI_Remove_error_string", || {
        errcodes::remove_string(errorcode).map_err(code_fail)
    })
}

//! The small things programs and benchmark suites call: `MPI_Alloc_mem` /
//! `MPI_Free_mem`, `MPI_Pcontrol`, `MPI_Is_thread_main`, the info hints of
//! communicators and windows, and setting a status's element count and
//! cancelled flag (what a generalized request's query callback does).
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};

use tandem::pages::alloc_pages;
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::info;
use crate::state::{self, call, call_local, call_stateless, Fail, State};

#[no_mangle]
pub unsafe extern "C" fn MPI_Alloc_mem(
    size: MPI_Aint,
    info_: MPI_Info,
    baseptr: *mut c_void,
) -> c_int {
    call("MPI_Alloc_mem", |s| {
        info::check_optional(s, info_)?;
        crate::args::out_ptr(MPI_COMM_WORLD, baseptr, "baseptr")?;
        let n = usize::try_from(size).map_err(|_| {
            Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                format!("negative size {size}"),
            )
        })?;
        let p = alloc_mem(n);
        if p.is_null() {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::NoMem,
                format!("cannot allocate {n} bytes"),
            ));
        }
        // SAFETY: `baseptr` points to a `void *` by the standard (checked non-null).
        unsafe { *baseptr.cast::<*mut c_void>() = p };
        Ok(())
    })
}

/// Memory for `MPI_Alloc_mem`: huge pages from
/// [`tandem::pages::HUGE_PAGE`] on (see [`alloc_pages`]), else aligned as
/// malloc's; at least one byte, so that a valid pointer comes back. Null if out of memory.
fn alloc_mem(n: usize) -> *mut c_void {
    alloc_pages(n.max(1), 16)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Free_mem(base: *mut c_void) -> c_int {
    call_local("MPI_Free_mem", || {
        // SAFETY: `base` came from MPI_Alloc_mem (posix_memalign, released
        // by free) or is NULL.
        unsafe { libc::free(base) };
        Ok(())
    })
}

/// `MPI_Pcontrol(level, ...)`: profiling control, a no-op without a tool.
/// C declares it variadic; the extra arguments are never read, and on the
/// supported targets a variadic call passes `level` as this definition
/// expects it.
#[no_mangle]
pub extern "C" fn MPI_Pcontrol(_level: c_int) -> c_int {
    MPI_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    call_local("MPI_Is_thread_main", || {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        let main = state::MAIN_THREAD.get() == Some(&std::thread::current().id());
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(main)) };
        Ok(())
    })
}

/// Hints: Tandem acts on none of the communicator and window hints, so
/// setting them only checks the info object, and the hints in use are
/// always none (the standard lets an implementation ignore hints and not
/// return them).
fn set_hints(s: &State, info_: MPI_Info) -> Result<(), Fail> {
    info::check_optional(s, info_)
}

fn hints_in_use(s: &mut State, out: *mut MPI_Info) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, out, "info_used")?;
    let h = info::add(s, Vec::new());
    // SAFETY: checked non-null.
    unsafe { put(out, h) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_info(comm: MPI_Comm, info_: MPI_Info) -> c_int {
    call("MPI_Comm_set_info", |s| {
        args::comm(s, comm)?;
        set_hints(s, info_)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_info(comm: MPI_Comm, info_used: *mut MPI_Info) -> c_int {
    call("MPI_Comm_get_info", |s| {
        args::comm(s, comm)?;
        hints_in_use(s, info_used)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_info(win: MPI_Win, info_: MPI_Info) -> c_int {
    crate::win::win_call("MPI_Win_set_info", win, |s| {
        crate::win::check(s, win)?;
        set_hints(s, info_)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_info(win: MPI_Win, info_used: *mut MPI_Info) -> c_int {
    crate::win::win_call("MPI_Win_get_info", win, |s| {
        crate::win::check(s, win)?;
        hints_in_use(s, info_used)
    })
}

/// Sets a status's byte count to `count` elements of `dt`. Needs no
/// library state, so a generalized request's query callback, which runs
/// inside MPI_Wait, may call it.
fn set_elements(status: *mut MPI_Status, dt: MPI_Datatype, count: i64) -> c_int {
    if status.is_null() {
        return MPI_ERR_ARG;
    }
    if count < 0 {
        return MPI_ERR_COUNT;
    }
    let Ok(layout) = crate::datatype::layout_any(MPI_COMM_WORLD, dt) else {
        return MPI_ERR_TYPE;
    };
    let Some(bytes) = (count as u64).checked_mul(layout.size as u64) else {
        return MPI_ERR_COUNT;
    };
    // SAFETY: checked non-null; a status the caller owns (MPI contract).
    unsafe { args::set_status_bytes(&mut *status, bytes) };
    MPI_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_elements(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: c_int,
) -> c_int {
    call_stateless("MPI_Status_set_elements", || {
        set_elements(status, datatype, i64::from(count))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_elements_x(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: MPI_Count,
) -> c_int {
    call_stateless("MPI_Status_set_elements_x", || {
        set_elements(status, datatype, count)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_elements_c(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: MPI_Count,
) -> c_int {
    call_stateless("MPI_Status_set_elements_c", || {
        set_elements(status, datatype, count)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    call_stateless("MPI_Status_set_cancelled", || {
        if status.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null; a status the caller owns (MPI contract).
        unsafe { (*status).internal[2] = c_int::from(flag != 0) };
        MPI_SUCCESS
    })
}

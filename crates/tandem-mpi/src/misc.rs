//! The small things programs and benchmark suites call: `MPI_Alloc_mem` /
//! `MPI_Free_mem`, `MPI_Pcontrol`.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};

use tandem::ErrorClass;

use crate::abi::*;
use crate::info;
use crate::state::{call, Fail};

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
        // SAFETY: plain allocation; at least one byte so that a valid pointer comes back.
        let p = unsafe { libc::malloc(n.max(1)) };
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

#[no_mangle]
pub unsafe extern "C" fn MPI_Free_mem(base: *mut c_void) -> c_int {
    call("MPI_Free_mem", |_| {
        // SAFETY: `base` came from MPI_Alloc_mem (malloc) or is NULL.
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

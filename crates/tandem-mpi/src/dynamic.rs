//! Process creation and connection (MPI chapter 11.8-11.10). Tandem starts
//! every process of a job with `tandem run` and has no way to add or join
//! processes later, so:
//!
//! * `MPI_Comm_get_parent` gives `MPI_COMM_NULL` (no process was spawned),
//!   which is what programs checking whether they were spawned look for;
//! * `MPI_Comm_spawn` and `_spawn_multiple` fail with `MPI_ERR_SPAWN`,
//!   opening a port, joining over a socket and publishing a name with
//!   `MPI_ERR_UNSUPPORTED_OPERATION`, and the calls that take a port or a
//!   service name with the class for a name that is not known
//!   (`MPI_ERR_PORT`, `MPI_ERR_SERVICE`, `MPI_ERR_NAME`): none can exist;
//! * `MPI_Comm_disconnect` of an ordinary communicator is what the standard
//!   makes it: collective, it returns once pending communication on the
//!   communicator is done everywhere (a barrier), then frees it.
//!
//! Every error goes through the error handler of the communicator the call
//! names (of `MPI_COMM_WORLD` when it names none).
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int};

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::info;
use crate::state::{call, Fail, State};

const NO_DYNAMIC: &str =
    "Tandem has no dynamic processes: every process of a job starts with `tandem run`";

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    call("MPI_Comm_get_parent", |_| {
        args::out_ptr(MPI_COMM_WORLD, parent, "parent")?;
        // SAFETY: checked non-null.
        unsafe { put(parent, MPI_COMM_NULL) };
        Ok(())
    })
}

/// Checks the arguments every spawn has, sets the outputs to "nothing
/// started", and fails with `MPI_ERR_SPAWN` on `comm`.
fn refuse_spawn(
    s: &mut State,
    comm: MPI_Comm,
    root: c_int,
    intercomm: *mut MPI_Comm,
    errcodes: *mut c_int,
    procs: usize,
) -> Result<(), Fail> {
    let id = args::intra_comm(s, comm)?;
    let size = s.rt.comm(id).map_err(|e| Fail { comm, error: e })?.size();
    if root < 0 || root as u32 >= size {
        return Err(Fail::new(
            comm,
            ErrorClass::Root,
            format!("root {root} is not in 0..{size}"),
        ));
    }
    args::out_ptr(comm, intercomm, "intercomm")?;
    // SAFETY: checked non-null; `errcodes` is MPI_ERRCODES_IGNORE (NULL)
    // or holds an entry per process asked for (the MPI contract).
    unsafe {
        put(intercomm, MPI_COMM_NULL);
        if !errcodes.is_null() {
            for i in 0..procs {
                errcodes.add(i).write(MPI_ERR_SPAWN);
            }
        }
    }
    Err(Fail::new(comm, ErrorClass::Spawn, NO_DYNAMIC))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_spawn(
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info_: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let _ = (command, argv);
    call("MPI_Comm_spawn", |s| {
        info::check_optional(s, info_)?;
        let procs = usize::try_from(maxprocs).unwrap_or(0);
        refuse_spawn(s, comm, root, intercomm, array_of_errcodes, procs)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    array_of_info: *const MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let _ = (array_of_commands, array_of_argv, array_of_info);
    call("MPI_Comm_spawn_multiple", |s| {
        let n = usize::try_from(count)
            .map_err(|_| Fail::new(comm, ErrorClass::Arg, format!("negative count {count}")))?;
        let mut procs = 0usize;
        if n > 0 {
            args::out_ptr(comm, array_of_maxprocs.cast_mut(), "array_of_maxprocs")?;
            // SAFETY: checked non-null; `count` entries (the MPI contract).
            let maxprocs = unsafe { std::slice::from_raw_parts(array_of_maxprocs, n) };
            procs = maxprocs
                .iter()
                .map(|&m| usize::try_from(m).unwrap_or(0))
                .sum();
        }
        refuse_spawn(s, comm, root, intercomm, array_of_errcodes, procs)
    })
}

/// Checks a string argument is given.
fn text_arg(comm: MPI_Comm, p: *const c_char, what: &str) -> Result<(), Fail> {
    args::out_ptr(comm, p.cast_mut(), what)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Open_port(info_: MPI_Info, port_name: *mut c_char) -> c_int {
    call("MPI_Open_port", |s| {
        info::check_optional(s, info_)?;
        args::out_ptr(MPI_COMM_WORLD, port_name, "port_name")?;
        Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Unsupported,
            NO_DYNAMIC,
        ))
    })
}

fn unknown_port(comm: MPI_Comm) -> Fail {
    Fail::new(
        comm,
        ErrorClass::Port,
        format!("no such port (no port can be opened: {NO_DYNAMIC})"),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Close_port(port_name: *const c_char) -> c_int {
    call("MPI_Close_port", |_| {
        text_arg(MPI_COMM_WORLD, port_name, "port_name")?;
        Err(unknown_port(MPI_COMM_WORLD))
    })
}

/// `MPI_Comm_accept` and `MPI_Comm_connect`: collective over `comm`; the
/// port (significant at `root` only) cannot be one that exists.
fn refuse_connection(
    s: &mut State,
    info_: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> Result<(), Fail> {
    let id = args::intra_comm(s, comm)?;
    let size = s.rt.comm(id).map_err(|e| Fail { comm, error: e })?.size();
    if root < 0 || root as u32 >= size {
        return Err(Fail::new(
            comm,
            ErrorClass::Root,
            format!("root {root} is not in 0..{size}"),
        ));
    }
    info::check_optional(s, info_)?;
    args::out_ptr(comm, newcomm, "newcomm")?;
    // SAFETY: checked non-null.
    unsafe { put(newcomm, MPI_COMM_NULL) };
    Err(unknown_port(comm))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_accept(
    port_name: *const c_char,
    info_: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let _ = port_name;
    call("MPI_Comm_accept", |s| {
        refuse_connection(s, info_, root, comm, newcomm)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_connect(
    port_name: *const c_char,
    info_: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let _ = port_name;
    call("MPI_Comm_connect", |s| {
        refuse_connection(s, info_, root, comm, newcomm)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
    let _ = fd;
    call("MPI_Comm_join", |_| {
        args::out_ptr(MPI_COMM_WORLD, intercomm, "intercomm")?;
        // SAFETY: checked non-null.
        unsafe { put(intercomm, MPI_COMM_NULL) };
        Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Unsupported,
            NO_DYNAMIC,
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Publish_name(
    service_name: *const c_char,
    info_: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    call("MPI_Publish_name", |s| {
        info::check_optional(s, info_)?;
        text_arg(MPI_COMM_WORLD, service_name, "service_name")?;
        text_arg(MPI_COMM_WORLD, port_name, "port_name")?;
        Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Unsupported,
            format!("no name service: {NO_DYNAMIC}"),
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Unpublish_name(
    service_name: *const c_char,
    info_: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    call("MPI_Unpublish_name", |s| {
        info::check_optional(s, info_)?;
        text_arg(MPI_COMM_WORLD, service_name, "service_name")?;
        text_arg(MPI_COMM_WORLD, port_name, "port_name")?;
        Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Service,
            "no such published service (no name can be published)",
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Lookup_name(
    service_name: *const c_char,
    info_: MPI_Info,
    port_name: *mut c_char,
) -> c_int {
    call("MPI_Lookup_name", |s| {
        info::check_optional(s, info_)?;
        text_arg(MPI_COMM_WORLD, service_name, "service_name")?;
        args::out_ptr(MPI_COMM_WORLD, port_name, "port_name")?;
        Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Name,
            "no such published service (no name can be published)",
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_disconnect(comm: *mut MPI_Comm) -> c_int {
    // Check first, so that a bad argument is reported as this call's.
    let checked = call("MPI_Comm_disconnect", |s| {
        args::out_ptr(MPI_COMM_WORLD, comm, "comm")?;
        // SAFETY: checked non-null.
        let h = unsafe { *comm };
        args::comm(s, h)?;
        if h == MPI_COMM_WORLD || h == MPI_COMM_SELF {
            return Err(Fail::new(
                h,
                ErrorClass::Comm,
                "predefined communicators cannot be disconnected",
            ));
        }
        Ok(())
    });
    if checked != MPI_SUCCESS {
        return checked;
    }
    // SAFETY: checked non-null above.
    let h = unsafe { *comm };
    // Every process's pending communication on it is done once all have
    // reached this point: a barrier, then the free.
    // SAFETY: plain MPI calls on a valid communicator.
    let code = unsafe { crate::pt2pt::MPI_Barrier(h) };
    if code != MPI_SUCCESS {
        return code;
    }
    // SAFETY: `comm` is a valid pointer to a valid communicator.
    unsafe { crate::comm::MPI_Comm_free(comm) }
}

//! Process creation and connection (MPI 4.1 chapter 11.8-11.10) at the C
//! boundary: argument checks and handles; the core's `tandem::dynamic`
//! starts worlds (through `tandem run`), opens ports, keeps names and
//! joins sockets.
//!
//! * `MPI_Comm_spawn(_multiple)` start their programs on the launcher's
//!   host, as a new world, with the info keys `wdir` and `path`; `host`
//!   naming that host and `soft` are accepted, any other host is an error.
//!   Every process asked for starts, or none (the error codes say which).
//! * Ports and names connect processes of one `tandem run`, spawned ones
//!   included; a port of another job is refused (`MPI_ERR_PORT`).
//! * `MPI_Comm_disconnect` is what the standard makes it: collective, it
//!   returns once pending communication on the communicator is done
//!   everywhere (a barrier), then frees it.
//!
//! Every error goes through the error handler of the communicator the call
//! names (of `MPI_COMM_WORLD` when it names none).
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use tandem::dynamic::SpawnApp;
use tandem::{CommId, Error, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::comm::register;
use crate::ext::CommExt;
use crate::info;
use crate::state::{call, Fail, State};

fn fail(comm: MPI_Comm) -> impl Fn(Error) -> Fail {
    move |error| Fail { comm, error }
}

/// The handle of communicator `id`, made known to the C side if it is not
/// yet (the parent intercommunicator, which the core makes in `MPI_Init`).
fn handle_of(s: &mut State, id: CommId) -> MPI_Comm {
    if s.comms.get(id.0).is_some_and(Option::is_some) {
        State::comm_handle(id)
    } else {
        register(s, tandem::WORLD, Some(id), CommExt::default())
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    call("MPI_Comm_get_parent", |s| {
        args::out_ptr(MPI_COMM_WORLD, parent, "parent")?;
        let h = match s.rt.parent() {
            Some(id) => handle_of(s, id),
            None => MPI_COMM_NULL,
        };
        // SAFETY: checked non-null.
        unsafe { put(parent, h) };
        Ok(())
    })
}

/// A C string argument as bytes.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text(comm: MPI_Comm, p: *const c_char, what: &str) -> Result<Vec<u8>, Fail> {
    args::out_ptr(comm, p.cast_mut(), what)?;
    // SAFETY: checked non-null; NUL-terminated (the MPI contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec())
}

/// A C string argument as text.
///
/// # Safety
/// As [`text`].
unsafe fn utf8(comm: MPI_Comm, p: *const c_char, what: &str) -> Result<String, Fail> {
    // SAFETY: the caller's promise.
    let bytes = unsafe { text(comm, p, what) }?;
    String::from_utf8(bytes)
        .map_err(|_| Fail::new(comm, ErrorClass::Arg, format!("{what} is not UTF-8 text")))
}

/// The words of an `argv` (`MPI_ARGV_NULL`: none), up to its null entry.
///
/// # Safety
/// `argv` is null or an array of strings ending with a null pointer.
unsafe fn argv_words(argv: *mut *mut c_char) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    if argv.is_null() {
        return words;
    }
    for i in 0.. {
        // SAFETY: within the array, which ends with a null entry.
        let w = unsafe { *argv.add(i) };
        if w.is_null() {
            break;
        }
        // SAFETY: a NUL-terminated string (the MPI contract).
        words.push(unsafe { CStr::from_ptr(w) }.to_bytes().to_vec());
    }
    words
}

/// One program of a spawn at the root: its command, arguments, count and
/// info keys.
///
/// # Safety
/// As [`text`] and [`argv_words`].
unsafe fn spawn_app(
    s: &State,
    comm: MPI_Comm,
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info_: MPI_Info,
) -> Result<SpawnApp, Fail> {
    // SAFETY: the caller's promise.
    let command = unsafe { text(comm, command, "command") }?;
    let procs = u32::try_from(maxprocs)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Fail::new(
                comm,
                ErrorClass::Arg,
                format!("maxprocs {maxprocs} is not a number of processes"),
            )
        })?;
    let mut app = SpawnApp {
        command,
        // SAFETY: the caller's promise.
        args: unsafe { argv_words(argv) },
        procs,
        wdir: None,
        path: None,
    };
    if info_ != MPI_INFO_NULL {
        for (key, value) in info::pairs(s, info_)? {
            match key.as_str() {
                "wdir" => app.wdir = Some(value.into_bytes()),
                "path" => app.path = Some(value.into_bytes()),
                "host" => check_host(comm, &value)?,
                _ => {}
            }
        }
    }
    Ok(app)
}

/// The `host` info key: processes start on the launcher's host only.
fn check_host(comm: MPI_Comm, host: &str) -> Result<(), Fail> {
    let here = crate::host::name().unwrap_or_default();
    if ["localhost", "127.0.0.1", here.as_str()].contains(&host)
        || host.split('.').next() == Some(here.as_str())
    {
        return Ok(());
    }
    Err(Fail::new(
        comm,
        ErrorClass::Spawn,
        format!(
            "info key host '{host}': Tandem starts spawned processes on the launcher's host \
             ({here})"
        ),
    ))
}

/// The part of both spawns after the root has read its programs: checks,
/// the core's spawn, the outputs. `local_count` is how many processes this
/// process's own arguments ask for: it writes that many error codes when
/// the spawn fails, and at most that many (as many as started) when it
/// succeeds.
fn spawn(
    s: &mut State,
    comm: MPI_Comm,
    root: c_int,
    apps: Option<Result<Vec<SpawnApp>, Fail>>,
    local_count: usize,
    intercomm: *mut MPI_Comm,
    errcodes: *mut c_int,
) -> Result<(), Fail> {
    let id = args::intra_comm(s, comm)?;
    let size = s.rt.comm(id).map_err(fail(comm))?.size();
    let root = crate::coll::root_arg(comm, root, size)?;
    args::out_ptr(comm, intercomm, "intercomm")?;
    // SAFETY: checked non-null.
    unsafe { put(intercomm, MPI_COMM_NULL) };
    // A root whose arguments are wrong still takes part, so that nobody
    // waits for it: the core passes its error on.
    let apps = apps.map(|a| a.map_err(|f| f.error));
    let outcome =
        s.rt.spawn(
            id,
            root,
            apps.as_ref().map(|a| a.as_deref().map_err(Clone::clone)),
        )
        .map_err(fail(comm));
    let write_codes = |code: c_int, n: usize| {
        if !errcodes.is_null() {
            for i in 0..n {
                // SAFETY: `errcodes` holds an entry per process asked for
                // (the MPI contract).
                unsafe { errcodes.add(i).write(code) };
            }
        }
    };
    match outcome {
        Ok((inter, n)) => {
            let h = register(s, id, Some(inter), CommExt::default());
            // SAFETY: checked non-null.
            unsafe { put(intercomm, h) };
            // A process other than the root may size its array by its own
            // (unsignificant) count: never write past that.
            write_codes(MPI_SUCCESS, (n as usize).min(local_count));
            Ok(())
        }
        Err(f) => {
            write_codes(MPI_ERR_SPAWN, local_count);
            Err(f)
        }
    }
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
    call("MPI_Comm_spawn", |s| {
        let id = args::intra_comm(s, comm)?;
        let me = s.rt.comm(id).map_err(fail(comm))?.rank;
        let apps = (i64::from(me) == i64::from(root)).then(|| {
            // SAFETY: the MPI contract for the root's arguments.
            unsafe { spawn_app(s, comm, command, argv, maxprocs, info_) }.map(|a| vec![a])
        });
        let local = usize::try_from(maxprocs).unwrap_or(0);
        spawn(s, comm, root, apps, local, intercomm, array_of_errcodes)
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
    call("MPI_Comm_spawn_multiple", |s| {
        let id = args::intra_comm(s, comm)?;
        let me = s.rt.comm(id).map_err(fail(comm))?.rank;
        let apps = (i64::from(me) == i64::from(root)).then(|| {
            let n = usize::try_from(count)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    Fail::new(
                        comm,
                        ErrorClass::Arg,
                        format!("count {count} is not a number of programs"),
                    )
                })?;
            args::out_ptr(comm, array_of_commands, "array_of_commands")?;
            args::out_ptr(comm, array_of_maxprocs.cast_mut(), "array_of_maxprocs")?;
            args::out_ptr(comm, array_of_info.cast_mut(), "array_of_info")?;
            (0..n)
                .map(|i| {
                    // SAFETY: checked non-null; `count` entries each (the
                    // MPI contract), `array_of_argv` may be MPI_ARGVS_NULL.
                    unsafe {
                        let argv = if array_of_argv.is_null() {
                            std::ptr::null_mut()
                        } else {
                            *array_of_argv.add(i)
                        };
                        spawn_app(
                            s,
                            comm,
                            *array_of_commands.add(i),
                            argv,
                            *array_of_maxprocs.add(i),
                            *array_of_info.add(i),
                        )
                    }
                })
                .collect::<Result<Vec<_>, Fail>>()
        });
        let mut local = 0usize;
        if let (Ok(n @ 1..), false) = (usize::try_from(count), array_of_maxprocs.is_null()) {
            // SAFETY: checked non-null; `count` entries (the MPI contract).
            let m = unsafe { std::slice::from_raw_parts(array_of_maxprocs, n) };
            local = m.iter().map(|&p| usize::try_from(p).unwrap_or(0)).sum();
        }
        spawn(s, comm, root, apps, local, intercomm, array_of_errcodes)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Open_port(info_: MPI_Info, port_name: *mut c_char) -> c_int {
    call("MPI_Open_port", |s| {
        info::check_optional(s, info_)?;
        args::out_ptr(MPI_COMM_WORLD, port_name, "port_name")?;
        let name = s.rt.open_port().map_err(fail(MPI_COMM_WORLD))?;
        // SAFETY: checked non-null; MPI_MAX_PORT_NAME bytes (the MPI
        // contract), which the name fits.
        unsafe { write_text(port_name, &name, MPI_MAX_PORT_NAME) };
        Ok(())
    })
}

/// Writes `text` and its NUL, cut at `cap - 1` bytes.
///
/// # Safety
/// `p` is valid for writes of `cap` bytes.
unsafe fn write_text(p: *mut c_char, text: &str, cap: usize) {
    let n = text.len().min(cap - 1);
    // SAFETY: the caller's promise; `n + 1 <= cap`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), p.cast(), n);
        p.add(n).write(0);
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Close_port(port_name: *const c_char) -> c_int {
    call("MPI_Close_port", |s| {
        // SAFETY: the MPI contract.
        let name = unsafe { utf8(MPI_COMM_WORLD, port_name, "port_name") }?;
        s.rt.close_port(&name).map_err(fail(MPI_COMM_WORLD))
    })
}

/// `MPI_Comm_accept` and `MPI_Comm_connect`: collective over `comm`; the
/// port matters at `root` only.
///
/// # Safety
/// `port_name` is null or a NUL-terminated string (at the root).
unsafe fn connection(
    s: &mut State,
    port_name: *const c_char,
    info_: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    accept: bool,
) -> Result<(), Fail> {
    let id = args::intra_comm(s, comm)?;
    let c = s.rt.comm(id).map_err(fail(comm))?;
    let (me, size) = (c.rank, c.size());
    let root = crate::coll::root_arg(comm, root, size)?;
    args::out_ptr(comm, newcomm, "newcomm")?;
    // SAFETY: checked non-null.
    unsafe { put(newcomm, MPI_COMM_NULL) };
    let port = if me == root {
        info::check_optional(s, info_)?;
        // SAFETY: the MPI contract.
        Some(unsafe { utf8(comm, port_name, "port_name") }?)
    } else {
        None
    };
    let made = if accept {
        s.rt.accept(port.as_deref(), root, id)
    } else {
        s.rt.connect(port.as_deref(), root, id)
    }
    .map_err(fail(comm))?;
    let h = register(s, id, Some(made), CommExt::default());
    // SAFETY: checked non-null.
    unsafe { put(newcomm, h) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_accept(
    port_name: *const c_char,
    info_: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_accept", |s| {
        // SAFETY: the MPI contract.
        unsafe { connection(s, port_name, info_, root, comm, newcomm, true) }
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
    call("MPI_Comm_connect", |s| {
        // SAFETY: the MPI contract.
        unsafe { connection(s, port_name, info_, root, comm, newcomm, false) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
    call("MPI_Comm_join", |s| {
        args::out_ptr(MPI_COMM_WORLD, intercomm, "intercomm")?;
        // SAFETY: checked non-null.
        unsafe { put(intercomm, MPI_COMM_NULL) };
        if fd < 0 {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                format!("fd {fd} is not a descriptor"),
            ));
        }
        let made = s.rt.join(fd).map_err(fail(MPI_COMM_WORLD))?;
        let h = register(s, tandem::SELF, Some(made), CommExt::default());
        // SAFETY: checked non-null.
        unsafe { put(intercomm, h) };
        Ok(())
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
        // SAFETY: the MPI contract.
        let service = unsafe { utf8(MPI_COMM_WORLD, service_name, "service_name") }?;
        // SAFETY: the MPI contract.
        let port = unsafe { utf8(MPI_COMM_WORLD, port_name, "port_name") }?;
        s.rt.publish_name(&service, &port)
            .map_err(fail(MPI_COMM_WORLD))
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
        // SAFETY: the MPI contract.
        let service = unsafe { utf8(MPI_COMM_WORLD, service_name, "service_name") }?;
        // SAFETY: the MPI contract.
        let port = unsafe { utf8(MPI_COMM_WORLD, port_name, "port_name") }?;
        s.rt.unpublish_name(&service, &port)
            .map_err(fail(MPI_COMM_WORLD))
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
        // SAFETY: the MPI contract.
        let service = unsafe { utf8(MPI_COMM_WORLD, service_name, "service_name") }?;
        args::out_ptr(MPI_COMM_WORLD, port_name, "port_name")?;
        let port = s.rt.lookup_name(&service).map_err(fail(MPI_COMM_WORLD))?;
        // SAFETY: checked non-null; MPI_MAX_PORT_NAME bytes (the MPI contract).
        unsafe { write_text(port_name, &port, MPI_MAX_PORT_NAME) };
        Ok(())
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

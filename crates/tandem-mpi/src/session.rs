//! MPI-4 sessions: `MPI_Session_init` and `_finalize` (the runtime starts
//! with the first of them and `MPI_Init`, and ends with the last, see
//! state.rs), the process sets `mpi://WORLD` and `mpi://SELF`, session
//! error handlers, and communicators made from a group without a parent
//! (`MPI_Comm_create_from_group`, `MPI_Intercomm_create_from_groups`).
#![allow(clippy::missing_safety_doc)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::Arc;

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::errhandler::{self, Kind};
use crate::state::{self, call_with, Fail, Outcome, State};
use crate::{group, info};

/// First handle of sessions (small, so that `MPI_Session_toint` gives the
/// handle itself).
const SESSION_BASE: MPI_Session = 0x0600_0000;

/// The process sets every session knows, in `MPI_Session_get_nth_pset`'s
/// order.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// An open session.
pub struct Session {
    errhandler: MPI_Errhandler,
    /// The thread level asked for (info key `thread_level`), as given.
    thread_level: Option<String>,
}

fn session_error(h: MPI_Session) -> Fail {
    Fail::new(
        MPI_COMM_SELF,
        ErrorClass::Session,
        if h == MPI_SESSION_NULL {
            "MPI_SESSION_NULL is not a session".to_string()
        } else {
            format!("invalid session handle {h:#x}")
        },
    )
}

fn index(s: &State, h: MPI_Session) -> Option<usize> {
    let i = h.checked_sub(SESSION_BASE)?;
    matches!(s.sessions.get(i), Some(Some(_))).then_some(i)
}

/// Checks that `h` is an open session.
pub(crate) fn check(s: &State, h: MPI_Session) -> Result<(), Fail> {
    index(s, h).map(|_| ()).ok_or_else(|| session_error(h))
}

fn live_session(s: &mut State, h: MPI_Session) -> Result<&mut Session, Fail> {
    let i = index(s, h).ok_or_else(|| session_error(h))?;
    Ok(s.sessions[i].as_mut().expect("checked live"))
}

/// Runs a session call: its errors go to the session's handler (to
/// `MPI_COMM_SELF`'s if the handle is not a session).
pub(crate) fn session_call(
    func: &'static str,
    h: MPI_Session,
    body: impl FnOnce(&mut State) -> Outcome,
) -> c_int {
    call_with(func, body, |s, func, fail| match index(s, h) {
        Some(i) => {
            let handler = s.sessions[i].as_ref().expect("checked live").errhandler;
            errhandler::raise_to(s, func, handler, h, fail)
        }
        None => errhandler::raise(s, func, fail),
    })
}

fn arg_error(msg: impl Into<String>) -> Fail {
    Fail::new(MPI_COMM_SELF, ErrorClass::Arg, msg)
}

fn out<T>(p: *mut T, what: &str) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_SELF, p, what)
}

/// A C string argument (`what` names it in the error).
fn c_string<'a>(p: *const c_char, what: &str) -> Result<&'a [u8], Fail> {
    if p.is_null() {
        return Err(arg_error(format!("{what} is NULL")));
    }
    // SAFETY: non-null, and a NUL-terminated string by the MPI contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// The members (world ranks) of a process set, by name.
fn pset_members(s: &State, name: &[u8]) -> Result<Arc<[u32]>, Fail> {
    let is = |p: &str| name.eq_ignore_ascii_case(p.as_bytes());
    if is(PSETS[0]) {
        Ok(s.rt.world_group())
    } else if is(PSETS[1]) {
        Ok(Arc::from(vec![s.rt.rank()]))
    } else {
        Err(arg_error(format!(
            "unknown process set {:?}",
            String::from_utf8_lossy(name)
        )))
    }
}

fn check_errhandler(s: &State, h: MPI_Errhandler, kind: Kind) -> Result<(), Fail> {
    if s.ext.errhandlers.valid_for(h, kind) {
        Ok(())
    } else {
        Err(Fail::new(
            MPI_COMM_SELF,
            ErrorClass::Errhandler,
            format!("invalid error handler {h:#x}"),
        ))
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_init(
    info_: MPI_Info,
    errhandler: MPI_Errhandler,
    session: *mut MPI_Session,
) -> c_int {
    if session.is_null() {
        return MPI_ERR_ARG;
    }
    // Threads may call at once only where a session asks for it (below).
    let rc = state::start_for_session("MPI_Session_init", MPI_THREAD_SERIALIZED);
    if rc != MPI_SUCCESS {
        return rc;
    }
    // Errors go to the handler given, if it is one (the session does not
    // exist yet), else they are returned.
    call_with(
        "MPI_Session_init",
        |s| {
            check_errhandler(s, errhandler, Kind::Session)?;
            let thread_level = if info_ == MPI_INFO_NULL {
                None
            } else {
                info::pairs(s, info_)?
                    .into_iter()
                    .find(|(k, _)| k == "thread_level")
                    .map(|(_, v)| v)
            };
            if let Some(v) = &thread_level {
                const LEVELS: [&str; 4] = [
                    "MPI_THREAD_SINGLE",
                    "MPI_THREAD_FUNNELED",
                    "MPI_THREAD_SERIALIZED",
                    "MPI_THREAD_MULTIPLE",
                ];
                if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(v.trim())) {
                    return Err(Fail::new(
                        MPI_COMM_SELF,
                        ErrorClass::InfoValue,
                        format!("thread_level {v:?} is not a thread level"),
                    ));
                }
                if v.trim().eq_ignore_ascii_case("MPI_THREAD_MULTIPLE") {
                    s.thread_level = MPI_THREAD_MULTIPLE;
                    state::allow_multiple(s);
                }
            }
            let entry = Session {
                errhandler,
                thread_level,
            };
            let i = match s.sessions.iter().position(Option::is_none) {
                Some(i) => {
                    s.sessions[i] = Some(entry);
                    i
                }
                None => {
                    s.sessions.push(Some(entry));
                    s.sessions.len() - 1
                }
            };
            // SAFETY: checked non-null.
            unsafe { put(session, SESSION_BASE + i) };
            Ok(())
        },
        |s, func, fail| {
            let handler = if s.ext.errhandlers.valid_for(errhandler, Kind::Session) {
                errhandler
            } else {
                MPI_ERRORS_RETURN
            };
            errhandler::raise_to(s, func, handler, MPI_SESSION_NULL, fail)
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_finalize(session: *mut MPI_Session) -> c_int {
    if session.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: checked non-null.
    let h = unsafe { *session };
    let rc = session_call("MPI_Session_finalize", h, |s| {
        let i = index(s, h).ok_or_else(|| session_error(h))?;
        // Its buffered sends are delivered before it goes.
        crate::bsend::forget_session(s, h);
        s.sessions[i] = None;
        // SAFETY: checked non-null.
        unsafe { put(session, MPI_SESSION_NULL) };
        Ok(())
    });
    if rc != MPI_SUCCESS {
        return rc;
    }
    state::after_session_finalize("MPI_Session_finalize")
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_num_psets(
    session: MPI_Session,
    info_: MPI_Info,
    npset_names: *mut c_int,
) -> c_int {
    session_call("MPI_Session_get_num_psets", session, |s| {
        live_session(s, session)?;
        info::check_optional(s, info_)?;
        out(npset_names, "npset_names")?;
        // SAFETY: checked non-null.
        unsafe { put(npset_names, PSETS.len() as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_nth_pset(
    session: MPI_Session,
    info_: MPI_Info,
    n: c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
) -> c_int {
    session_call("MPI_Session_get_nth_pset", session, |s| {
        live_session(s, session)?;
        info::check_optional(s, info_)?;
        out(pset_len, "pset_len")?;
        let name = usize::try_from(n)
            .ok()
            .and_then(|n| PSETS.get(n))
            .ok_or_else(|| arg_error(format!("no process set number {n}")))?;
        let needed = name.len() + 1;
        // SAFETY: checked non-null.
        let room = unsafe { *pset_len };
        if room > 0 {
            if pset_name.is_null() {
                return Err(arg_error("pset_name is NULL"));
            }
            // Truncated to the room given, NUL-terminated.
            let copy = (room as usize - 1).min(name.len());
            // SAFETY: the application gave `room` writable bytes at
            // `pset_name`; `copy + 1 <= room`.
            unsafe {
                std::ptr::copy_nonoverlapping(name.as_ptr(), pset_name.cast::<u8>(), copy);
                *pset_name.add(copy) = 0;
            }
        }
        // SAFETY: checked non-null.
        unsafe { put(pset_len, needed as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_pset_info(
    session: MPI_Session,
    pset_name: *const c_char,
    info_: *mut MPI_Info,
) -> c_int {
    session_call("MPI_Session_get_pset_info", session, |s| {
        live_session(s, session)?;
        out(info_, "info")?;
        let members = pset_members(s, c_string(pset_name, "pset_name")?)?;
        let h = info::add(s, vec![("mpi_size".into(), members.len().to_string())]);
        // SAFETY: checked non-null.
        unsafe { put(info_, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Group_from_session_pset(
    session: MPI_Session,
    pset_name: *const c_char,
    newgroup: *mut MPI_Group,
) -> c_int {
    session_call("MPI_Group_from_session_pset", session, |s| {
        live_session(s, session)?;
        out(newgroup, "newgroup")?;
        let members = pset_members(s, c_string(pset_name, "pset_name")?)?;
        let h = group::add(s, members);
        group::set_session(s, h, session);
        // SAFETY: checked non-null.
        unsafe { put(newgroup, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_info(
    session: MPI_Session,
    info_used: *mut MPI_Info,
) -> c_int {
    session_call("MPI_Session_get_info", session, |s| {
        out(info_used, "info_used")?;
        let asked = live_session(s, session)?.thread_level.clone();
        let level = match s.thread_level {
            MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
            MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
            MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
            _ => "MPI_THREAD_MULTIPLE",
        };
        let mut pairs = vec![("mpi_thread_support_level".to_string(), level.to_string())];
        if let Some(v) = asked {
            pairs.push(("thread_level".into(), v));
        }
        let h = info::add(s, pairs);
        // SAFETY: checked non-null.
        unsafe { put(info_used, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_create_errhandler(
    session_errhandler_fn: Option<MPI_Session_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // Allowed before any MPI_Session_init (to hand the handler to it): the
    // runtime, which keeps the handlers, starts here then.
    if errhandler.is_null() {
        return MPI_ERR_ARG;
    }
    let rc = state::start_for_session("MPI_Session_create_errhandler", MPI_THREAD_SERIALIZED);
    if rc != MPI_SUCCESS {
        return rc;
    }
    state::call("MPI_Session_create_errhandler", |s| {
        out(errhandler, "errhandler")?;
        let Some(func) = session_errhandler_fn else {
            return Err(arg_error("NULL error handler function"));
        };
        let h = s.ext.errhandlers.create(Kind::Session, func);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_set_errhandler(
    session: MPI_Session,
    errhandler: MPI_Errhandler,
) -> c_int {
    session_call("MPI_Session_set_errhandler", session, |s| {
        live_session(s, session)?;
        check_errhandler(s, errhandler, Kind::Session)?;
        live_session(s, session)?.errhandler = errhandler;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_get_errhandler(
    session: MPI_Session,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    session_call("MPI_Session_get_errhandler", session, |s| {
        out(errhandler, "errhandler")?;
        let h = live_session(s, session)?.errhandler;
        s.ext.errhandlers.add_ref(h);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_call_errhandler(
    session: MPI_Session,
    errorcode: c_int,
) -> c_int {
    session_call("MPI_Session_call_errhandler", session, |s| {
        let handler = live_session(s, session)?.errhandler;
        let why = format!("error code {errorcode} raised by MPI_Session_call_errhandler");
        errhandler::invoke(
            s,
            "MPI_Session_call_errhandler",
            handler,
            session,
            errorcode,
            &why,
        );
        // The handler was called (or returns): the call itself succeeded.
        Ok(())
    })
}

/// Errors of the communicator constructors go to the handler they were
/// given, if it is a communicator handler, else to `MPI_COMM_SELF`'s.
fn raise_to_given(handler: MPI_Errhandler) -> impl FnOnce(&mut State, &str, Fail) -> c_int {
    move |s, func, fail| {
        if s.ext.errhandlers.valid_for(handler, Kind::Comm) {
            errhandler::raise_to(s, func, handler, MPI_COMM_NULL, fail)
        } else {
            errhandler::raise(s, func, fail)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_from_group(
    group_: MPI_Group,
    stringtag: *const c_char,
    info_: MPI_Info,
    errhandler: MPI_Errhandler,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call_with(
        "MPI_Comm_create_from_group",
        |s| {
            out(newcomm, "newcomm")?;
            let tag = c_string(stringtag, "stringtag")?;
            info::check_optional(s, info_)?;
            check_errhandler(s, errhandler, Kind::Comm)?;
            let members = group::members(s, group_)?;
            if members.is_empty() {
                // MPI_GROUP_EMPTY: no communicator, nothing to agree.
                // SAFETY: checked non-null.
                unsafe { put(newcomm, MPI_COMM_NULL) };
                return Ok(());
            }
            if !members.contains(&s.rt.rank()) {
                return Err(Fail::new(
                    MPI_COMM_SELF,
                    ErrorClass::Group,
                    "the calling process is not in the group",
                ));
            }
            let session = group::session_of(s, group_);
            let made = move |s: &mut State, id: tandem::CommId| {
                let h = s.add_comm(id, errhandler);
                s.entry(id).session = session;
                h
            };
            // Under MPI_THREAD_MULTIPLE the agreement lets other threads
            // in (see comm.rs).
            let making =
                s.rt.comm_create_from_group_start(members, tag)
                    .map_err(|error| Fail {
                        comm: MPI_COMM_SELF,
                        error,
                    })?;
            crate::comm::group_made_letting_others_in(s, making, MPI_COMM_SELF, newcomm, made)
        },
        raise_to_given(errhandler),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Intercomm_create_from_groups(
    local_group: MPI_Group,
    local_leader: c_int,
    remote_group: MPI_Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    info_: MPI_Info,
    errhandler: MPI_Errhandler,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    call_with(
        "MPI_Intercomm_create_from_groups",
        |s| {
            out(newintercomm, "newintercomm")?;
            let tag = c_string(stringtag, "stringtag")?;
            info::check_optional(s, info_)?;
            check_errhandler(s, errhandler, Kind::Comm)?;
            let local = group::members(s, local_group)?;
            let remote = group::members(s, remote_group)?;
            if !local.contains(&s.rt.rank()) {
                return Err(Fail::new(
                    MPI_COMM_SELF,
                    ErrorClass::Group,
                    "the calling process is not in the local group",
                ));
            }
            let rank_in = |g: &[u32], r: c_int, what: &str| {
                usize::try_from(r)
                    .ok()
                    .and_then(|i| g.get(i).map(|&w| (i as u32, w)))
                    .ok_or_else(|| {
                        Fail::new(
                            MPI_COMM_SELF,
                            ErrorClass::Rank,
                            format!("{what} {r} is not in 0..{}", g.len()),
                        )
                    })
            };
            let (leader, _) = rank_in(&local, local_leader, "local leader")?;
            let (_, remote_world) = rank_in(&remote, remote_leader, "remote leader")?;
            let id =
                s.rt.intercomm_create_from_groups(local, leader, remote_world, tag)
                    .map_err(|error| Fail {
                        comm: MPI_COMM_SELF,
                        error,
                    })?;
            let h = s.add_comm(id, errhandler);
            s.entry(id).session = group::session_of(s, local_group);
            // SAFETY: checked non-null.
            unsafe { put(newintercomm, h) };
            Ok(())
        },
        raise_to_given(errhandler),
    )
}

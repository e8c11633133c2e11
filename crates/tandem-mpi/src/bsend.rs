//! Buffered sends: `MPI_Buffer_attach`/`detach`, `MPI_Bsend`, `MPI_Ibsend`,
//! and MPI-4.1's buffers per communicator and per session
//! (`MPI_Comm_attach_buffer`, `MPI_Session_attach_buffer` ...), flushes
//! (`MPI_Buffer_flush`, `_iflush`, `MPI_Comm_flush_buffer`,
//! `MPI_Session_flush_buffer`, their `i` forms) and `MPI_BUFFER_AUTOMATIC`.
//!
//! A buffered send copies the packed message (plus `MPI_BSEND_OVERHEAD`
//! bytes of accounting) into space taken from the buffer in force and
//! completes at once; the space is given back when the transfer completes.
//! The buffer in force is the communicator's if it has one, else its
//! session's (a communicator made from a session's process-set group, or
//! derived from one, belongs to that session), else the process's. A
//! message that does not fit is an `MPI_ERR_BUFFER` error, as the standard
//! requires; an `MPI_BUFFER_AUTOMATIC` buffer has no limit.
//! (The copy lives in memory Tandem allocates; the attached buffer sets
//! the limit.)
#![allow(clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};

use tandem::p2p::{ReqId, SendMode, Status};
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::put;
use crate::datatype::Typed;
use crate::request::Op;
use crate::session::session_call;
use crate::state::{call, Fail, Outcome, State};
use crate::xfer::{self, SendKind};

/// An attached buffer: its address and size, or `MPI_BUFFER_AUTOMATIC`.
#[derive(Clone, Copy)]
enum Attached {
    Given(*mut c_void, usize),
    Automatic,
}

/// One buffer and the buffered sends in flight through it.
#[derive(Default)]
struct Pool {
    buffer: Option<Attached>,
    used: usize,
    in_flight: Vec<(ReqId, Vec<u8>)>,
}

impl Pool {
    fn reclaim(&mut self, rt: &mut tandem::Runtime) {
        let mut i = 0;
        while i < self.in_flight.len() {
            let id = self.in_flight[i].0;
            if rt.p2p().is_complete(id) != Some(false) {
                let _ = rt.p2p().take_if_complete(id);
                let (_, data) = self.in_flight.swap_remove(i);
                self.used -= data.len() + MPI_BSEND_OVERHEAD as usize;
            } else {
                i += 1;
            }
        }
    }

    fn pending(&self) -> Vec<ReqId> {
        self.in_flight.iter().map(|x| x.0).collect()
    }
}

/// The process's buffer, the sessions' and the communicators'.
#[derive(Default)]
pub struct Bsend {
    process: Pool,
    sessions: HashMap<MPI_Session, Pool>,
    comms: HashMap<MPI_Comm, Pool>,
    /// Sends through the buffer of a communicator freed meanwhile: their
    /// data lives until they complete.
    orphans: Vec<(ReqId, Vec<u8>)>,
}

/// A communicator is freed: its buffer is detached (a later communicator
/// with the same handle starts without one), its messages in flight keep
/// their data until done.
pub fn forget_comm(s: &mut State, comm: MPI_Comm) {
    let State { rt, ext, .. } = s;
    let b = &mut ext.bsend;
    if let Some(p) = b.comms.remove(&comm) {
        b.orphans.extend(p.in_flight);
    }
    b.orphans.retain(|&(id, _)| {
        let done = rt.p2p().is_complete(id) != Some(false);
        if done {
            let _ = rt.p2p().take_if_complete(id);
        }
        !done
    });
}

/// A session is finalized: the messages sent through its buffer are
/// delivered first, and the buffer is detached.
pub fn forget_session(s: &mut State, session: MPI_Session) {
    flush(s, Owner::Session(session));
    s.ext.bsend.sessions.remove(&session);
}

/// Which buffer a call is about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    Process,
    Session(MPI_Session),
    Comm(MPI_Comm),
}

fn pool(s: &mut State, owner: Owner) -> Option<&mut Pool> {
    match owner {
        Owner::Process => Some(&mut s.ext.bsend.process),
        Owner::Session(h) => s.ext.bsend.sessions.get_mut(&h),
        Owner::Comm(c) => s.ext.bsend.comms.get_mut(&c),
    }
}

/// Checks the communicator or session a call names.
fn check_owner(s: &mut State, owner: Owner) -> Outcome {
    match owner {
        Owner::Process => Ok(()),
        Owner::Session(h) => crate::session::check(s, h),
        Owner::Comm(c) => crate::args::comm(s, c).map(|_| ()),
    }
}

/// Starts a buffered send; the returned operation is already complete.
pub fn start(
    s: &mut State,
    t: &Typed,
    id: CommId,
    dest: u32,
    tag: i32,
    comm: MPI_Comm,
) -> Result<Op, Fail> {
    let session = s.entry(id).session;
    let State { rt, ext, .. } = s;
    let b = &mut ext.bsend;
    let attached = |p: &&mut Pool| p.buffer.is_some();
    let pool = match b.comms.get_mut(&comm).filter(attached) {
        Some(p) => p,
        None => match session
            .and_then(|h| b.sessions.get_mut(&h))
            .filter(attached)
        {
            Some(p) => p,
            None => &mut b.process,
        },
    };
    pool.reclaim(rt);
    let need = t.bytes() + MPI_BSEND_OVERHEAD as usize;
    let cap = match pool.buffer {
        Some(Attached::Automatic) => usize::MAX,
        Some(Attached::Given(_, n)) => n,
        None => 0,
    };
    if pool.used.saturating_add(need) > cap {
        return Err(Fail::new(
            comm,
            ErrorClass::Buffer,
            format!(
                "buffered send of {} bytes does not fit: {} of {cap} attached bytes in use (MPI_Buffer_attach)",
                t.bytes(),
                pool.used
            ),
        ));
    }
    // SAFETY: the buffer is valid for reads as its datatype describes.
    let data = unsafe { t.pack() };
    // SAFETY: `data` moves into `in_flight` with its heap memory unchanged
    // and stays there until the send completes.
    let rid = unsafe { rt.isend(id, dest, tag, data.as_ptr(), data.len(), SendMode::Standard) }
        .map_err(|error| Fail { comm, error })?;
    pool.used += need;
    pool.in_flight.push((rid, data));
    Ok(Op::Done(Status::default()))
}

fn buffer_error(comm: MPI_Comm, msg: impl Into<String>) -> Fail {
    Fail::new(comm, ErrorClass::Buffer, msg)
}

fn error_comm(owner: Owner) -> MPI_Comm {
    match owner {
        Owner::Process => MPI_COMM_WORLD,
        Owner::Session(_) => MPI_COMM_SELF,
        Owner::Comm(c) => c,
    }
}

fn attach(s: &mut State, owner: Owner, buffer: *mut c_void, size: i64) -> Outcome {
    let comm = error_comm(owner);
    check_owner(s, owner)?;
    let attached = if buffer as usize == MPI_BUFFER_AUTOMATIC {
        Attached::Automatic
    } else {
        match usize::try_from(size) {
            Ok(n) if n == 0 || !buffer.is_null() => Attached::Given(buffer, n),
            _ => {
                return Err(buffer_error(
                    comm,
                    format!("invalid buffer of {size} bytes"),
                ))
            }
        }
    };
    let p = match owner {
        Owner::Process => &mut s.ext.bsend.process,
        Owner::Session(h) => s.ext.bsend.sessions.entry(h).or_default(),
        Owner::Comm(c) => s.ext.bsend.comms.entry(c).or_default(),
    };
    if p.buffer.is_some() {
        return Err(buffer_error(comm, "a buffer is already attached"));
    }
    p.buffer = Some(attached);
    Ok(())
}

/// Waits until every message sent through the buffer was delivered.
fn flush(s: &mut State, owner: Owner) {
    let ids = pool(s, owner).map(|p| p.pending()).unwrap_or_default();
    s.rt.wait_until(|p, _| ids.iter().all(|&id| p.is_complete(id) != Some(false)));
    let State { rt, ext, .. } = s;
    let p = match owner {
        Owner::Process => Some(&mut ext.bsend.process),
        Owner::Session(h) => ext.bsend.sessions.get_mut(&h),
        Owner::Comm(c) => ext.bsend.comms.get_mut(&c),
    };
    if let Some(p) = p {
        p.reclaim(rt);
    }
}

/// Detaches (after a flush); the buffer's address and size.
fn detach(s: &mut State, owner: Owner) -> Result<(*mut c_void, i64), Fail> {
    check_owner(s, owner)?;
    flush(s, owner);
    let attached = match owner {
        Owner::Process => s.ext.bsend.process.buffer.take(),
        Owner::Session(h) => s.ext.bsend.sessions.remove(&h).and_then(|p| p.buffer),
        Owner::Comm(c) => s.ext.bsend.comms.remove(&c).and_then(|p| p.buffer),
    };
    Ok(match attached {
        Some(Attached::Given(p, n)) => (p, n as i64),
        Some(Attached::Automatic) => (MPI_BUFFER_AUTOMATIC as *mut c_void, 0),
        // Detaching the process's buffer when there is none gives NULL and
        // 0, as it always did here (and as MPICH does): libraries detach to
        // save a caller's buffer without knowing whether one is attached.
        None if owner == Owner::Process => (std::ptr::null_mut(), 0),
        None => return Err(buffer_error(error_comm(owner), "no buffer is attached")),
    })
}

/// # Safety
/// `buffer_addr` is null or points to a `void *`; `size` is null or valid.
unsafe fn put_detached<T: TryFrom<i64>>(
    owner: Owner,
    (p, n): (*mut c_void, i64),
    buffer_addr: *mut c_void,
    size: *mut T,
) -> Outcome {
    let n = T::try_from(n).map_err(|_| {
        Fail::new(
            error_comm(owner),
            ErrorClass::Count,
            format!(
                "the detached buffer's size {n} does not fit the size argument (use the _c form)"
            ),
        )
    })?;
    // SAFETY: by the standard `buffer_addr` points to a `void *`; both
    // outputs are written only when non-null.
    unsafe {
        if !buffer_addr.is_null() {
            *buffer_addr.cast::<*mut c_void>() = p;
        }
        if !size.is_null() {
            put(size, n);
        }
    }
    Ok(())
}

/// A request complete once the messages in the buffer now were delivered.
fn iflush(s: &mut State, owner: Owner, request: *mut MPI_Request) -> Outcome {
    let comm = error_comm(owner);
    crate::args::out_ptr(comm, request, "request")?;
    check_owner(s, owner)?;
    let ids = pool(s, owner).map(|p| p.pending()).unwrap_or_default();
    let h = crate::request::handle(s, comm, Op::Watch(ids));
    // SAFETY: checked non-null.
    unsafe { put(request, h) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    call("MPI_Buffer_attach", |s| {
        attach(s, Owner::Process, buffer, size.into())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    call("MPI_Buffer_attach_c", |s| {
        attach(s, Owner::Process, buffer, size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    call("MPI_Buffer_detach", |s| {
        let d = detach(s, Owner::Process)?;
        // SAFETY: the MPI contract on the outputs.
        unsafe { put_detached(Owner::Process, d, buffer_addr, size) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach_c(
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    call("MPI_Buffer_detach_c", |s| {
        let d = detach(s, Owner::Process)?;
        // SAFETY: the MPI contract on the outputs.
        unsafe { put_detached(Owner::Process, d, buffer_addr, size) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_flush() -> c_int {
    call("MPI_Buffer_flush", |s| {
        flush(s, Owner::Process);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_iflush(request: *mut MPI_Request) -> c_int {
    call("MPI_Buffer_iflush", |s| iflush(s, Owner::Process, request))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_attach_buffer(
    comm: MPI_Comm,
    buffer: *mut c_void,
    size: c_int,
) -> c_int {
    call("MPI_Comm_attach_buffer", |s| {
        attach(s, Owner::Comm(comm), buffer, size.into())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_attach_buffer_c(
    comm: MPI_Comm,
    buffer: *mut c_void,
    size: MPI_Count,
) -> c_int {
    call("MPI_Comm_attach_buffer_c", |s| {
        attach(s, Owner::Comm(comm), buffer, size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_detach_buffer(
    comm: MPI_Comm,
    buffer_addr: *mut c_void,
    size: *mut c_int,
) -> c_int {
    call("MPI_Comm_detach_buffer", |s| {
        let d = detach(s, Owner::Comm(comm))?;
        // SAFETY: the MPI contract on the outputs.
        unsafe { put_detached(Owner::Comm(comm), d, buffer_addr, size) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_detach_buffer_c(
    comm: MPI_Comm,
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    call("MPI_Comm_detach_buffer_c", |s| {
        let d = detach(s, Owner::Comm(comm))?;
        // SAFETY: the MPI contract on the outputs.
        unsafe { put_detached(Owner::Comm(comm), d, buffer_addr, size) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_flush_buffer(comm: MPI_Comm) -> c_int {
    call("MPI_Comm_flush_buffer", |s| {
        crate::args::comm(s, comm)?;
        flush(s, Owner::Comm(comm));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_iflush_buffer(
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Comm_iflush_buffer", |s| {
        iflush(s, Owner::Comm(comm), request)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_attach_buffer(
    session: MPI_Session,
    buffer: *mut c_void,
    size: c_int,
) -> c_int {
    session_call("MPI_Session_attach_buffer", session, |s| {
        attach(s, Owner::Session(session), buffer, size.into())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_attach_buffer_c(
    session: MPI_Session,
    buffer: *mut c_void,
    size: MPI_Count,
) -> c_int {
    session_call("MPI_Session_attach_buffer_c", session, |s| {
        attach(s, Owner::Session(session), buffer, size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_detach_buffer(
    session: MPI_Session,
    buffer_addr: *mut c_void,
    size: *mut c_int,
) -> c_int {
    session_call("MPI_Session_detach_buffer", session, |s| {
        let d = detach(s, Owner::Session(session))?;
        // SAFETY: the MPI contract on the outputs.
        unsafe { put_detached(Owner::Session(session), d, buffer_addr, size) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_detach_buffer_c(
    session: MPI_Session,
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    session_call("MPI_Session_detach_buffer_c", session, |s| {
        let d = detach(s, Owner::Session(session))?;
        // SAFETY: the MPI contract on the outputs.
        unsafe { put_detached(Owner::Session(session), d, buffer_addr, size) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_flush_buffer(session: MPI_Session) -> c_int {
    session_call("MPI_Session_flush_buffer", session, |s| {
        check_owner(s, Owner::Session(session))?;
        flush(s, Owner::Session(session));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Session_iflush_buffer(
    session: MPI_Session,
    request: *mut MPI_Request,
) -> c_int {
    session_call("MPI_Session_iflush_buffer", session, |s| {
        iflush(s, Owner::Session(session), request)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bsend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Bsend", |s| {
        xfer::start_send(s, buf, count, dt, dest, tag, comm, SendKind::Buffered).map(|_| ())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ibsend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ibsend", |s| {
        crate::args::out_ptr(comm, request, "request")?;
        let op = xfer::start_send(s, buf, count, dt, dest, tag, comm, SendKind::Buffered)?;
        let h = crate::request::handle(s, comm, op);
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

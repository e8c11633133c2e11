//! Point-to-point communication: sends, receives, probes and completion.
//!
//! Safety contract of every function here: pointer arguments are valid as
//! the MPI standard requires of the caller (buffers for `count` elements,
//! arrays of `count` entries, writable outputs); null where the standard
//! allows it (`MPI_STATUS_IGNORE`), and checked otherwise.
#![allow(clippy::missing_safety_doc)]
// The MPI signatures decide the argument lists.
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use tandem::p2p::{ChoiceRole, Envelope, MsgId, ReqId, SendMode, Status};
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put, write_empty_status, write_status, write_status_and_error, Source};
use crate::datatype;
use crate::request::{self, Op, Req};
use crate::state::{self, call, call_local, Fail, Outcome, State};
use crate::xfer::{self, SendKind};

/// Checked arguments of a send of a packed predefined datatype (the fast
/// path: no datatype object, no staging).
struct PackedSend {
    len: usize,
    /// The message's envelope and the destination's world rank; `None` for
    /// `MPI_PROC_NULL`.
    to: Option<(Envelope, u32)>,
}

/// Checked arguments of a receive of a packed predefined datatype.
struct PackedRecv {
    cap: usize,
    /// Matching context.
    ctx: u32,
    /// `None` for `MPI_PROC_NULL`; then `Some(None)` for any source, else
    /// the source's (communicator rank, world rank).
    from: Option<Option<(u32, u32)>>,
    tag: Option<i32>,
}

/// The arguments of a send when its datatype is a packed predefined one,
/// checked in the order of [`xfer::send_args`]; `None` for any other
/// datatype (the general path).
#[inline(always)]
fn packed_send_args(
    s: &State,
    buf: *const c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Option<Result<PackedSend, Fail>> {
    let elem = datatype::packed_predefined(dt)?;
    let check = || {
        let id = args::comm(s, comm)?;
        let len = datatype::packed_len(comm, buf, count, elem)?;
        let tag = args::send_tag(comm, tag)?;
        // The communicator is looked up once, for the check and the envelope.
        let c = s.rt.comm(id).map_err(|error| Fail { comm, error })?;
        let to = match dest {
            MPI_PROC_NULL => None,
            d if d >= 0 && (d as u32) < c.peer_count() => {
                let env = Envelope {
                    ctx: c.p2p_context(),
                    src: c.rank,
                    tag,
                };
                Some((env, c.peer_world_rank(d as u32)))
            }
            d => return Err(args::rank_error(comm, d, c.peer_count())),
        };
        Ok(PackedSend { len, to })
    };
    Some(check())
}

/// The arguments of a receive when its datatype is a packed predefined
/// one, checked in the order of [`xfer::recv_args`].
#[inline(always)]
fn packed_recv_args(
    s: &State,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Option<Result<PackedRecv, Fail>> {
    let elem = datatype::packed_predefined(dt)?;
    let check = || {
        let id = args::comm(s, comm)?;
        let cap = datatype::packed_len(comm, buf, count, elem)?;
        let tag = args::recv_tag(comm, tag)?;
        let c = s.rt.comm(id).map_err(|error| Fail { comm, error })?;
        let from = match src {
            MPI_ANY_SOURCE => Some(None),
            MPI_PROC_NULL => None,
            r if r >= 0 && (r as u32) < c.peer_count() => {
                Some(Some((r as u32, c.peer_world_rank(r as u32))))
            }
            r => return Err(args::rank_error(comm, r, c.peer_count())),
        };
        Ok(PackedRecv {
            cap,
            ctx: c.p2p_context(),
            from,
            tag,
        })
    };
    Some(check())
}

/// Starts a send of packed bytes (already complete for `MPI_PROC_NULL`).
fn packed_isend(
    s: &mut State,
    buf: *const c_void,
    a: &PackedSend,
    comm: MPI_Comm,
    mode: SendMode,
) -> Result<ReqId, Fail> {
    match a.to {
        None => Ok(s.rt.p2p().completed(true, Status::default())),
        // SAFETY: the MPI contract keeps the buffer valid for `len` bytes
        // until the request completes.
        Some((env, world)) => unsafe { s.rt.p2p().isend(env, world, buf.cast(), a.len, mode) }
            .map_err(|error| Fail { comm, error }),
    }
}

/// Posts a receive into packed bytes (already complete for `MPI_PROC_NULL`).
fn packed_irecv(s: &mut State, buf: *mut c_void, a: &PackedRecv) -> ReqId {
    let Some(from) = a.from else {
        return s.rt.p2p().completed(false, Status::default());
    };
    // SAFETY: the MPI contract keeps the buffer valid for `cap` bytes until
    // the request completes.
    unsafe { s.rt.p2p().irecv(a.ctx, from, a.tag, buf.cast(), a.cap) }
}

/// An operation started for a communicator.
struct Started {
    op: Op,
    comm: MPI_Comm,
}

/// A count for the general (derived datatype) path, which counts in
/// `int`; only packed predefined datatypes move more elements in one call.
fn general_count(comm: MPI_Comm, count: MPI_Count) -> Result<c_int, Fail> {
    c_int::try_from(count).map_err(|_| {
        Fail::new(
            comm,
            ErrorClass::Count,
            if count < 0 {
                format!("negative count {count}")
            } else {
                format!(
                    "count {count} exceeds {}, the most a derived datatype's count may be here \
                     (a predefined datatype may have more)",
                    c_int::MAX
                )
            },
        )
    })
}

/// Starts a send (already complete for `MPI_PROC_NULL`); any datatype.
fn start_send(
    s: &mut State,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: SendMode,
) -> Result<Started, Fail> {
    let kind = match mode {
        SendMode::Standard => SendKind::Standard,
        SendMode::Synchronous => SendKind::Synchronous,
    };
    let op = xfer::start_send(s, buf, count, dt, dest, tag, comm, kind)?;
    Ok(Started { op, comm })
}

/// Posts a receive (already complete for `MPI_PROC_NULL`); any datatype.
fn start_recv(
    s: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<Started, Fail> {
    let op = xfer::start_recv(s, buf, count, dt, src, tag, comm)?;
    Ok(Started { op, comm })
}

/// Waits for an operation (advancing everything in flight), writes its
/// status, and reports its error.
/// Ends the blocking call (see `state::block_on`).
fn finish(s: &mut State, started: Started, status: *mut MPI_Status) -> Outcome {
    let comm = started.comm;
    let mut op = Some(started.op);
    state::block_on(s, move |s, may_end| {
        let st = request::wait_op_may_end(s, &mut op, may_end)?;
        // SAFETY: `status` is MPI_STATUS_IGNORE or writable (MPI contract).
        unsafe { write_status(status, &st) };
        Some(match st.error {
            Some(error) => Err(Fail { comm, error }),
            None => Ok(()),
        })
    })
}

/// [`finish`] for a plain point-to-point request.
fn finish_p2p(s: &mut State, id: ReqId, comm: MPI_Comm, status: *mut MPI_Status) -> Outcome {
    if !state::multiple() {
        // The short way, for the common case.
        let st = request::wait_p2p(s, id);
        // SAFETY: `status` is MPI_STATUS_IGNORE or writable (MPI contract).
        unsafe { write_status(status, &st) };
        return st.error.map_or(Ok(()), |error| Err(Fail { comm, error }));
    }
    state::block_on(s, move |s, may_end| {
        let st = request::wait_p2p_may_end(s, id, may_end)?;
        // SAFETY: `status` is MPI_STATUS_IGNORE or writable (MPI contract).
        unsafe { write_status(status, &st) };
        Some(match st.error {
            Some(error) => Err(Fail { comm, error }),
            None => Ok(()),
        })
    })
}

/// Waits for `live` requests (all, or any one) as a blocking call (see
/// `state::block_on`), then ends the call with `then`.
pub(crate) fn wait_then(
    s: &mut State,
    live: Vec<Req>,
    all: bool,
    mut then: impl FnMut(&mut State) -> Outcome + 'static,
) -> Outcome {
    state::block_on(s, move |s, may_end| {
        request::wait_may_end(s, &live, all, may_end).then(|| then(s))
    })
}

/// The request handle of a started operation.
fn handle_of(s: &mut State, started: Started) -> MPI_Request {
    request::handle(s, started.comm, started.op)
}

/// A blocking send of any kind (`count` as the `_c` forms take it).
pub(crate) fn blocking_send(
    func: &'static str,
    buf: *const c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: SendMode,
) -> c_int {
    call(func, |s| {
        if let Some(a) = packed_send_args(s, buf, count, dt, dest, tag, comm) {
            let a = a?;
            let Some((env, world)) = a.to else {
                return Ok(());
            };
            // A small message that the transport takes at once needs no request.
            if mode == SendMode::Standard {
                // SAFETY: `buf` holds `len` bytes (MPI contract).
                let sent = unsafe { s.rt.p2p().send_now(env, world, buf.cast(), a.len) }
                    .map_err(|error| Fail { comm, error })?;
                if sent {
                    return Ok(());
                }
            }
            let id = packed_isend(s, buf, &a, comm, mode)?;
            return finish_p2p(s, id, comm, std::ptr::null_mut());
        }
        let count = general_count(comm, count)?;
        let started = start_send(s, buf, count, dt, dest, tag, comm, mode)?;
        finish(s, started, std::ptr::null_mut())
    })
}

/// A non-blocking send of any kind (`count` as the `_c` forms take it).
pub(crate) fn nonblocking_send(
    func: &'static str,
    buf: *const c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    mode: SendMode,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, request, "request")?;
        if let Some(a) = packed_send_args(s, buf, count, dt, dest, tag, comm) {
            let id = packed_isend(s, buf, &a?, comm, mode)?;
            s.note_request(id, comm);
            // SAFETY: checked non-null; writable by the MPI contract.
            unsafe { put(request, id.0 as MPI_Request) };
            return Ok(());
        }
        let count = general_count(comm, count)?;
        let started = start_send(s, buf, count, dt, dest, tag, comm, mode)?;
        let h = handle_of(s, started);
        // SAFETY: checked non-null; writable by the MPI contract.
        unsafe { put(request, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    blocking_send(
        "MPI_Send",
        buf,
        count.into(),
        dt,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rsend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    blocking_send(
        "MPI_Rsend",
        buf,
        count.into(),
        dt,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    blocking_send(
        "MPI_Ssend",
        buf,
        count.into(),
        dt,
        dest,
        tag,
        comm,
        SendMode::Synchronous,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking_send(
        "MPI_Isend",
        buf,
        count.into(),
        dt,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Irsend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking_send(
        "MPI_Irsend",
        buf,
        count.into(),
        dt,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Issend(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking_send(
        "MPI_Issend",
        buf,
        count.into(),
        dt,
        dest,
        tag,
        comm,
        request,
        SendMode::Synchronous,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    blocking_recv("MPI_Recv", buf, count.into(), dt, src, tag, comm, status)
}

/// A blocking receive (`count` as `MPI_Recv_c` takes it).
pub(crate) fn blocking_recv(
    func: &'static str,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call(func, |s| {
        if let Some(a) = packed_recv_args(s, buf, count, dt, src, tag, comm) {
            let id = packed_irecv(s, buf, &a?);
            return finish_p2p(s, id, comm, status);
        }
        let count = general_count(comm, count)?;
        let started = start_recv(s, buf, count, dt, src, tag, comm)?;
        finish(s, started, status)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking_recv("MPI_Irecv", buf, count.into(), dt, src, tag, comm, request)
}

/// A non-blocking receive (`count` as `MPI_Irecv_c` takes it).
pub(crate) fn nonblocking_recv(
    func: &'static str,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, request, "request")?;
        // The application computes beside a non-blocking receive: one that
        // matches at once may ask its sender to write into it. Under the
        // policies that progress meanwhile, a rendezvous start that arrived
        // while the application was inside the library with nothing posted
        // (ignored then) is handled now, at this next MPI call. Otherwise a
        // packed predefined datatype takes the fast path.
        // (A count past `int`, which only the fast path moves, takes it
        // under every policy.)
        let overlap = state::async_policy() && c_int::try_from(count).is_ok();
        if !overlap {
            if let Some(a) = packed_recv_args(s, buf, count, dt, src, tag, comm) {
                let id = packed_irecv(s, buf, &a?);
                s.note_request(id, comm);
                // SAFETY: checked non-null; writable by the MPI contract.
                unsafe { put(request, id.0 as MPI_Request) };
                return Ok(());
            }
        }
        let count = general_count(comm, count)?;
        s.rt.p2p().set_async_matching(overlap);
        let started = start_recv(s, buf, count, dt, src, tag, comm);
        if overlap && started.is_ok() {
            s.rt.p2p().progress();
        }
        s.rt.p2p().set_async_matching(false);
        let started = started?;
        let h = handle_of(s, started);
        // SAFETY: checked non-null; writable by the MPI contract.
        unsafe { put(request, h) };
        Ok(())
    })
}

/// A receive posted, then a send started: completes both, or cancels the
/// receive if the send could not start.
fn exchange(
    s: &mut State,
    recv: Started,
    send: Result<Started, Fail>,
    status: *mut MPI_Status,
) -> Outcome {
    let send = match send {
        Ok(x) => x,
        Err(f) => {
            let h = handle_of(s, recv);
            if let Ok(r) = request::classify(s, h) {
                let _ = request::cancel(s, r);
                request::wait(s, &[r], true);
                request::complete(s, r);
            }
            return Err(f);
        }
    };
    let (recv_comm, send_comm) = (recv.comm, send.comm);
    let (mut recv_op, mut send_op) = (Some(recv.op), Some(send.op));
    let mut recv_result = None;
    state::block_on(s, move |s, may_end| {
        if recv_result.is_none() {
            let st = request::wait_op_may_end(s, &mut recv_op, may_end)?;
            // SAFETY: `status` is MPI_STATUS_IGNORE or writable (MPI contract).
            unsafe { write_status(status, &st) };
            recv_result = Some(st.error.map_or(Ok(()), |error| {
                Err(Fail {
                    comm: recv_comm,
                    error,
                })
            }));
        }
        let st = request::wait_op_may_end(s, &mut send_op, may_end)?;
        let send_result = st.error.map_or(Ok(()), |error| {
            Err(Fail {
                comm: send_comm,
                error,
            })
        });
        Some(recv_result.take()?.and(send_result))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Sendrecv", |s| {
        let r = start_recv(s, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let sent = start_send(
            s,
            sendbuf,
            sendcount,
            sendtype,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
        );
        exchange(s, r, sent, status)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Sendrecv_replace", |s| {
        let t = datatype::typed(comm, buf, count, dt)?;
        // The outgoing data must survive the incoming message overwriting it.
        // SAFETY: `buf` is valid as its datatype describes (MPI contract).
        let copy = unsafe { t.pack() };
        let r = start_recv(s, buf, count, dt, source, recvtag, comm)?;
        let sent = start_send(
            s,
            copy.as_ptr().cast(),
            copy.len() as c_int,
            MPI_BYTE,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
        );
        // `copy` lives until the send has completed in `exchange`.
        let result = exchange(s, r, sent, status);
        drop(copy);
        result
    })
}

/// A receive posted, then a send started, as one request (complete when
/// both are); cancels the receive if the send could not start. `keep`
/// lives in the request until then.
fn start_pair(
    s: &mut State,
    recv: Started,
    send: Result<Started, Fail>,
    keep: Vec<u8>,
) -> Result<MPI_Request, Fail> {
    let send = match send {
        Ok(x) => x,
        Err(f) => {
            // Nothing waits for this receive: take it back.
            request::cancel_op(s, recv.op);
            return Err(f);
        }
    };
    let op = Op::Pair {
        recv: Box::new(recv.op),
        send: Box::new(send.op),
        keep,
    };
    Ok(request::handle(s, recv.comm, op))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Isendrecv", |s| {
        args::out_ptr(comm, request, "request")?;
        // Both sides are checked before anything starts.
        xfer::send_args(s, sendbuf, sendcount, sendtype, dest, sendtag, comm)?;
        let r = start_recv(s, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let sent = start_send(
            s,
            sendbuf,
            sendcount,
            sendtype,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
        );
        let h = start_pair(s, r, sent, Vec::new())?;
        // SAFETY: checked non-null; writable by the MPI contract.
        unsafe { put(request, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Isendrecv_replace", |s| {
        args::out_ptr(comm, request, "request")?;
        xfer::send_args(s, buf, count, dt, dest, sendtag, comm)?;
        let t = datatype::typed(comm, buf, count, dt)?;
        // The outgoing data must survive the incoming message overwriting it.
        // SAFETY: `buf` is valid as its datatype describes (MPI contract).
        let copy = unsafe { t.pack() };
        let r = start_recv(s, buf, count, dt, source, recvtag, comm)?;
        // The copy's heap memory stays where it is when the vector moves
        // into the request, which keeps it until the send completes.
        let sent = start_send(
            s,
            copy.as_ptr().cast(),
            copy.len() as c_int,
            MPI_BYTE,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
        );
        let h = start_pair(s, r, sent, copy)?;
        // SAFETY: checked non-null; writable by the MPI contract.
        unsafe { put(request, h) };
        Ok(())
    })
}

/// Writes the status of a completed request (the empty status for an
/// inactive persistent one); its error field too for calls completing
/// several (`multiple`).
///
/// # Safety
/// As [`write_status`].
unsafe fn write_completed(status: *mut MPI_Status, done: &request::Completed, multiple: bool) {
    // SAFETY: the caller's promise.
    unsafe {
        match &done.status {
            Some(st) if multiple => write_status_and_error(status, st),
            Some(st) => write_status(status, st),
            None => write_empty_status(status),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    call("MPI_Wait", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        // SAFETY: checked non-null; readable and writable by the MPI contract.
        let h = unsafe { *request };
        if h == MPI_REQUEST_NULL {
            // SAFETY: MPI contract.
            unsafe { write_empty_status(status) };
            return Ok(());
        }
        let r = request::classify(s, h)?;
        if let Req::P2p(id) = r {
            // The common case: a plain point-to-point request.
            let comm = s.request_comm(id);
            if !state::multiple() {
                let st = request::wait_p2p(s, id);
                // SAFETY: as below.
                unsafe {
                    put(request, MPI_REQUEST_NULL);
                    write_status(status, &st);
                }
                return st.error.map_or(Ok(()), |error| Err(Fail { comm, error }));
            }
            return state::block_on(s, move |s, may_end| {
                let st = request::wait_p2p_may_end(s, id, may_end)?;
                // SAFETY: as below.
                unsafe {
                    put(request, MPI_REQUEST_NULL);
                    write_status(status, &st);
                }
                Some(st.error.map_or(Ok(()), |error| Err(Fail { comm, error })))
            });
        }
        wait_then(s, vec![r], true, move |s| {
            let done = request::complete(s, r);
            // SAFETY: `request` and `status` as above (MPI contract).
            unsafe {
                if !done.keep {
                    put(request, MPI_REQUEST_NULL);
                }
                write_completed(status, &done, false);
            }
            done.error().map_or(Ok(()), Err)
        })
    })
}

/// Whether request `r` is complete, driving progress once if it was not.
fn ready_after_poll(s: &mut State, r: Req) -> bool {
    if !request::is_ready(s, r) {
        request::poll(s);
    }
    request::is_ready(s, r)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Test", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // SAFETY: checked non-null; valid by the MPI contract.
        let h = unsafe { *request };
        if h == MPI_REQUEST_NULL {
            // SAFETY: MPI contract.
            unsafe {
                put(flag, 1);
                write_empty_status(status);
            }
            return Ok(());
        }
        let r = request::classify(s, h)?;
        if !agreed_ready(s, &[r], |s| ready_after_poll(s, r)) {
            // SAFETY: checked non-null.
            unsafe { put(flag, 0) };
            return Ok(());
        }
        let done = request::complete(s, r);
        // SAFETY: checked non-null / MPI contract.
        unsafe {
            put(flag, 1);
            if !done.keep {
                put(request, MPI_REQUEST_NULL);
            }
            write_completed(status, &done, false);
        }
        done.error().map_or(Ok(()), Err)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Request_get_status", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        if request == MPI_REQUEST_NULL {
            // SAFETY: checked non-null / MPI contract.
            unsafe {
                put(flag, 1);
                write_empty_status(status);
            }
            return Ok(());
        }
        let r = request::classify(s, request)?;
        if !agreed_ready(s, &[r], |s| ready_after_poll(s, r)) {
            // SAFETY: checked non-null.
            unsafe { put(flag, 0) };
            return Ok(());
        }
        // As MPI_Test, but the request stays as it is.
        let st = request::peek(s, r);
        // SAFETY: checked non-null / MPI contract.
        unsafe {
            put(flag, 1);
            match &st {
                Some(st) => write_status(status, st),
                None => write_empty_status(status),
            }
        }
        match st.and_then(|st| st.error) {
            Some(error) => Err(Fail {
                comm: request::comm_of(s, r),
                error,
            }),
            None => Ok(()),
        }
    })
}

/// The status of ready request `r` (left in place), written into `status`
/// (with its error field for calls about several requests); its error.
///
/// # Safety
/// `status` is null or writable.
unsafe fn peek_into(
    s: &mut State,
    r: Req,
    status: *mut MPI_Status,
    multiple: bool,
) -> Option<Fail> {
    let st = request::peek(s, r);
    // SAFETY: the caller's promise.
    unsafe {
        match &st {
            Some(st) if multiple => write_status_and_error(status, st),
            Some(st) => write_status(status, st),
            None => write_empty_status(status),
        }
    }
    let comm = request::comm_of(s, r);
    st.and_then(|st| st.error).map(|error| Fail { comm, error })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status_all(
    count: c_int,
    requests: *const MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Request_get_status_all", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // SAFETY: MPI contract: `count` entries, only read.
        let ids = unsafe { request_array(s, count, requests.cast_mut())? };
        let live: Vec<Req> = ids.iter().flatten().copied().collect();
        let all = agreed_ready(s, &live, |s| {
            request::poll(s);
            live.iter().all(|&r| request::is_ready(s, r))
        });
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(all)) };
        if !all {
            return Ok(());
        }
        let mut first = None;
        for (i, id) in ids.into_iter().enumerate() {
            if statuses.is_null() && id.is_none() {
                continue;
            }
            // Null stays null (ignored); entry `i < count` otherwise.
            let slot = if statuses.is_null() {
                statuses
            } else {
                statuses.wrapping_add(i)
            };
            match id {
                Some(r) => {
                    // SAFETY: `slot` is null (ignored) or entry `i` of `count`.
                    if let Some(f) = unsafe { peek_into(s, r, slot, true) } {
                        first.get_or_insert(f);
                    }
                }
                // SAFETY: statuses are not ignored here: entry `i` of `count`.
                None => unsafe { write_empty_status(slot) },
            }
        }
        in_status(first)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status_any(
    count: c_int,
    requests: *const MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Request_get_status_any", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // SAFETY: forwarded MPI contract; under Peek the requests are only read.
        unsafe {
            any(
                s,
                count,
                requests.cast_mut(),
                index,
                flag,
                status,
                Finish::Peek,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Request_get_status_some(
    incount: c_int,
    requests: *const MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded MPI contract; under Peek the requests are only read.
    call("MPI_Request_get_status_some", |s| unsafe {
        some(
            s,
            incount,
            requests.cast_mut(),
            outcount,
            indices,
            statuses,
            Finish::Peek,
        )
    })
}

/// Reads and validates an array of request handles; `None` entries are
/// null handles or inactive persistent requests.
///
/// # Safety
/// `requests` must be valid for `count` reads when `count > 0`.
unsafe fn request_array(
    s: &mut State,
    count: c_int,
    requests: *mut MPI_Request,
) -> Result<Vec<Option<Req>>, Fail> {
    if count < 0 {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            format!("negative count {count}"),
        ));
    }
    if count > 0 && requests.is_null() {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            "NULL request array",
        ));
    }
    (0..count as usize)
        .map(|i| {
            // SAFETY: `i < count`, within the caller's array.
            let h = unsafe { *requests.add(i) };
            if h == MPI_REQUEST_NULL {
                return Ok(None);
            }
            let r = request::classify(s, h)?;
            Ok((!request::is_inactive(s, r)).then_some(r))
        })
        .collect()
}

/// Releases completed request `i`, writing its status into slot `slot` of
/// `statuses` (with its error field when the call completes `multiple`
/// requests); returns its error, if any.
///
/// # Safety
/// `requests` has an entry `i`; `statuses` is null or has an entry `slot`.
/// What a call about several requests does with those it finds complete.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Finish {
    /// Waits for one, then completes them (Waitany, Waitsome).
    Wait,
    /// Completes those complete now (Testany, Testsome).
    Test,
    /// Reports those complete now and leaves them in place
    /// (MPI_Request_get_status_any, _some).
    Peek,
}

/// [`collect`], or under [`Finish::Peek`] [`peek_into`], of ready request
/// `r`, entry `i` of `requests`, with its status in entry `slot` of
/// `statuses` (null: ignored).
///
/// # Safety
/// As [`collect`].
#[allow(clippy::too_many_arguments)]
unsafe fn finish_one(
    s: &mut State,
    r: Req,
    requests: *mut MPI_Request,
    i: usize,
    statuses: *mut MPI_Status,
    slot: usize,
    multiple: bool,
    finish: Finish,
) -> Option<Fail> {
    // SAFETY: the caller's promise.
    unsafe {
        if finish == Finish::Peek {
            let status = if statuses.is_null() {
                statuses
            } else {
                statuses.add(slot)
            };
            peek_into(s, r, status, multiple)
        } else {
            collect(s, r, requests, i, statuses, slot, multiple)
        }
    }
}

unsafe fn collect(
    s: &mut State,
    r: Req,
    requests: *mut MPI_Request,
    i: usize,
    statuses: *mut MPI_Status,
    slot: usize,
    multiple: bool,
) -> Option<Fail> {
    let done = request::complete(s, r);
    // SAFETY: the caller's promise.
    unsafe {
        if !done.keep {
            *requests.add(i) = MPI_REQUEST_NULL;
        }
        if !statuses.is_null() {
            write_completed(statuses.add(slot), &done, multiple);
        }
    }
    done.error()
}

/// The outcome of a multiple-completion call: `MPI_ERR_IN_STATUS` if any failed.
fn in_status(first: Option<Fail>) -> Outcome {
    match first {
        None => Ok(()),
        Some(f) => Err(Fail::new(
            f.comm,
            ErrorClass::InStatus,
            format!("a request failed: {}", f.error.message),
        )),
    }
}

/// Completes every entry of a ready array (Waitall, Testall).
///
/// # Safety
/// `requests` and `statuses` (unless ignored) have `ids.len()` entries.
unsafe fn collect_all(
    s: &mut State,
    ids: Vec<Option<Req>>,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> Outcome {
    let mut first = None;
    for (i, id) in ids.into_iter().enumerate() {
        match id {
            Some(r) => {
                // SAFETY: `i < count`; statuses has `count` entries unless ignored.
                if let Some(f) = unsafe { collect(s, r, requests, i, statuses, i, true) } {
                    first.get_or_insert(f);
                }
            }
            None if !statuses.is_null() => {
                // SAFETY: as above.
                unsafe { write_empty_status(statuses.add(i)) }
            }
            None => {}
        }
    }
    in_status(first)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Waitall", |s| {
        // SAFETY: MPI contract: `count` entries.
        let ids = unsafe { request_array(s, count, requests)? };
        let live: Vec<Req> = ids.iter().flatten().copied().collect();
        wait_then(s, live, true, move |s| {
            // SAFETY: MPI contract: `count` entries.
            unsafe { collect_all(s, ids.clone(), requests, statuses) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    call("MPI_Testall", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // SAFETY: MPI contract: `count` entries.
        let ids = unsafe { request_array(s, count, requests)? };
        let live: Vec<Req> = ids.iter().flatten().copied().collect();
        let all = agreed_ready(s, &live, |s| {
            request::poll(s);
            live.iter().all(|&r| request::is_ready(s, r))
        });
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(all)) };
        if !all {
            return Ok(());
        }
        // SAFETY: MPI contract: `count` entries.
        unsafe { collect_all(s, ids, requests, statuses) }
    })
}

/// Shared by Waitany, Testany and MPI_Request_get_status_any.
unsafe fn any(
    s: &mut State,
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    finish: Finish,
) -> Outcome {
    args::out_ptr(MPI_COMM_WORLD, index, "index")?;
    // SAFETY: MPI contract: `count` entries.
    let ids = unsafe { request_array(s, count, requests)? };
    if ids.iter().all(Option::is_none) {
        // SAFETY: index checked; flag/status per contract.
        unsafe {
            put(index, MPI_UNDEFINED);
            if !flag.is_null() {
                put(flag, 1);
            }
            write_empty_status(status);
        }
        return Ok(());
    }
    let live: Vec<Req> = ids.iter().flatten().copied().collect();
    // Replicas: the leader replica finds the request and says which; the
    // others take the same one.
    let mut leads = None;
    if let Some(n) = s.rt.p2p().next_choice() {
        match s.rt.p2p().choice_role(n) {
            ChoiceRole::Lead(n) => leads = Some(n),
            // SAFETY: forwarded from the caller.
            ChoiceRole::Follow(v) => unsafe {
                return any_followed(s, v, ids, requests, index, flag, status, finish);
            },
        }
    }
    let rest = move |s: &mut State| {
        let found = ids
            .iter()
            .position(|id| id.is_some_and(|r| request::is_ready(s, r)));
        if let Some(n) = leads {
            s.rt.p2p().choose(n, found.map_or(CHOSE_NONE, |i| i as u64));
        }
        // SAFETY: the pointers as `any` got them (its caller's promise,
        // which holds until the call returns, however long it waits).
        unsafe { any_found(s, &ids, found, requests, index, flag, status, finish) }
    };
    if finish == Finish::Wait {
        return wait_then(s, live, false, rest);
    }
    request::poll(s);
    rest(s)
}

/// Whether requests `reqs` are done, as `look` finds; in a replicated job,
/// as the leader replica's `look` found (another replica told done waits
/// for them), so that every replica takes the same branch.
fn agreed_ready(s: &mut State, reqs: &[Req], look: impl FnOnce(&mut State) -> bool) -> bool {
    let Some(n) = s.rt.p2p().next_choice() else {
        return look(s);
    };
    match s.rt.p2p().choice_role(n) {
        ChoiceRole::Lead(n) => {
            let ready = look(s);
            s.rt.p2p().choose(n, u64::from(ready));
            ready
        }
        ChoiceRole::Follow(v) => {
            if v == 1 {
                request::wait_may_end(s, reqs, true, false);
            }
            v == 1
        }
    }
}

/// The outcome of a choice that found nothing.
const CHOSE_NONE: u64 = u64::MAX;

/// [`any`] on a replica that follows its leader, which found request
/// `chosen` (or none): the same one, waited for if need be.
///
/// # Safety
/// As [`any`].
#[allow(clippy::too_many_arguments)]
unsafe fn any_followed(
    s: &mut State,
    chosen: u64,
    ids: Vec<Option<Req>>,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    finish: Finish,
) -> Outcome {
    if chosen == CHOSE_NONE {
        // SAFETY: as for `any`.
        return unsafe { any_found(s, &ids, None, requests, index, flag, status, finish) };
    }
    let i = chosen as usize;
    let Some(&Some(r)) = ids.get(i) else {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Intern,
            format!(
                "the replicas of this rank diverged: the leader's request {i} is not active here"
            ),
        ));
    };
    wait_then(s, vec![r], true, move |s| {
        // SAFETY: as for `any`.
        unsafe { any_found(s, &ids, Some(i), requests, index, flag, status, finish) }
    })
}

/// A probe's status as a choice's outcome, and back.
fn probe_outcome(st: Option<&Status>) -> u64 {
    match st {
        Some(st) => {
            (u64::from(st.source.unwrap_or(0)) << 32) | u64::from(st.tag.unwrap_or(0) as u32)
        }
        None => CHOSE_NONE,
    }
}

fn probed(outcome: u64) -> Option<(u32, i32)> {
    (outcome != CHOSE_NONE).then_some(((outcome >> 32) as u32, outcome as u32 as i32))
}

/// The end of [`any`]: `found` is the index of a ready request, if any.
///
/// # Safety
/// As [`any`].
#[allow(clippy::too_many_arguments)]
unsafe fn any_found(
    s: &mut State,
    ids: &[Option<Req>],
    found: Option<usize>,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    finish: Finish,
) -> Outcome {
    match found {
        None => {
            // SAFETY: index checked; flag non-null in Testany (checked by caller).
            unsafe {
                put(index, MPI_UNDEFINED);
                if !flag.is_null() {
                    put(flag, 0);
                }
            }
            Ok(())
        }
        Some(i) => {
            let r = ids[i].expect("position found a live request");
            // SAFETY: index checked; `i < count`; status single or ignored.
            let err = unsafe {
                put(index, i as c_int);
                if !flag.is_null() {
                    put(flag, 1);
                }
                finish_one(s, r, requests, i, status, 0, false, finish)
            };
            err.map_or(Ok(()), Err)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded MPI contract.
    call("MPI_Waitany", |s| unsafe {
        any(
            s,
            count,
            requests,
            index,
            std::ptr::null_mut(),
            status,
            Finish::Wait,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Testany(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Testany", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // SAFETY: forwarded MPI contract.
        unsafe { any(s, count, requests, index, flag, status, Finish::Test) }
    })
}

/// Shared by Waitsome, Testsome and MPI_Request_get_status_some.
unsafe fn some(
    s: &mut State,
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    finish: Finish,
) -> Outcome {
    args::out_ptr(MPI_COMM_WORLD, outcount, "outcount")?;
    // SAFETY: MPI contract: `incount` entries.
    let ids = unsafe { request_array(s, incount, requests)? };
    if ids.iter().all(Option::is_none) {
        // SAFETY: checked non-null.
        unsafe { put(outcount, MPI_UNDEFINED) };
        return Ok(());
    }
    if incount > 0 && indices.is_null() {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            "NULL indices array",
        ));
    }
    let live: Vec<Req> = ids.iter().flatten().copied().collect();
    // Replicas: the requests the leader found, on every replica.
    let mut chosen: Option<Vec<usize>> = None;
    let mut leads = None;
    if let Some(n) = s.rt.p2p().next_choice() {
        match s.rt.p2p().choice_role(n) {
            ChoiceRole::Lead(n) => leads = Some(n),
            ChoiceRole::Follow(count) => {
                let mut picked = Vec::new();
                for _ in 0..count {
                    let k = s.rt.p2p().next_choice().expect("replicated");
                    match s.rt.p2p().choice_role(k) {
                        ChoiceRole::Follow(i) => picked.push(i as usize),
                        // The leader was lost halfway through its list.
                        ChoiceRole::Lead(_) => break,
                    }
                }
                if picked
                    .iter()
                    .any(|&i| ids.get(i).is_none_or(Option::is_none))
                {
                    return Err(Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::Intern,
                        "the replicas of this rank diverged: the leader's requests are not active here",
                    ));
                }
                let those: Vec<Req> = picked.iter().filter_map(|&i| ids[i]).collect();
                request::wait_may_end(s, &those, true, false);
                chosen = Some(picked);
            }
        }
    }
    let rest = move |s: &mut State| {
        let mut n = 0usize;
        let mut first = None;
        let ready: Vec<usize> = match &chosen {
            Some(picked) => picked.clone(),
            None => (0..ids.len())
                .filter(|&i| ids[i].is_some_and(|r| request::is_ready(s, r)))
                .collect(),
        };
        if let Some(k) = leads {
            s.rt.p2p().choose(k, ready.len() as u64);
            for &i in &ready {
                let c = s.rt.p2p().next_choice().expect("replicated");
                s.rt.p2p().choose(c, i as u64);
            }
        }
        for i in ready {
            let Some(r) = ids[i] else { continue };
            // SAFETY: `i < incount`, `n <= i`; arrays have `incount` entries
            // (the caller's promise, which holds until the call returns).
            unsafe {
                *indices.add(n) = i as c_int;
                if let Some(f) = finish_one(s, r, requests, i, statuses, n, true, finish) {
                    first.get_or_insert(f);
                }
            }
            n += 1;
        }
        // SAFETY: checked non-null.
        unsafe { put(outcount, n as c_int) };
        in_status(first)
    };
    if finish == Finish::Wait {
        return wait_then(s, live, false, rest);
    }
    request::poll(s);
    rest(s)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Waitsome(
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded MPI contract.
    call("MPI_Waitsome", |s| unsafe {
        some(
            s,
            incount,
            requests,
            outcount,
            indices,
            statuses,
            Finish::Wait,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Testsome(
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded MPI contract.
    call("MPI_Testsome", |s| unsafe {
        some(
            s,
            incount,
            requests,
            outcount,
            indices,
            statuses,
            Finish::Test,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Request_free(request: *mut MPI_Request) -> c_int {
    call("MPI_Request_free", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        // SAFETY: checked non-null.
        let h = unsafe { *request };
        if h == MPI_REQUEST_NULL {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Request,
                "MPI_REQUEST_NULL cannot be freed",
            ));
        }
        let r = request::classify(s, h)?;
        crate::part::refuse_if_active(s, r, h, "freed")?;
        request::free(s, r)?;
        // SAFETY: checked non-null.
        unsafe { put(request, MPI_REQUEST_NULL) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cancel(request: *mut MPI_Request) -> c_int {
    call("MPI_Cancel", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        // SAFETY: checked non-null.
        let h = unsafe { *request };
        if h == MPI_REQUEST_NULL {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Request,
                "MPI_REQUEST_NULL cannot be cancelled",
            ));
        }
        let r = request::classify(s, h)?;
        crate::part::refuse_if_active(s, r, h, "cancelled")?;
        match request::cancel(s, r) {
            None => Ok(()),
            Some(error) => Err(Fail {
                comm: MPI_COMM_WORLD,
                error,
            }),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    call_local("MPI_Test_cancelled", || {
        args::out_ptr(MPI_COMM_WORLD, status as *mut MPI_Status, "status")?;
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // SAFETY: both checked non-null; valid by the MPI contract.
        unsafe { put(flag, c_int::from((*status).internal[2] != 0)) };
        Ok(())
    })
}

fn probe_args(
    s: &State,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<(CommId, Source, Option<i32>), Fail> {
    let id = args::comm(s, comm)?;
    let src = args::source(s, comm, id, source)?;
    let tag = args::recv_tag(comm, tag)?;
    Ok((id, src, tag))
}

fn proc_null_status() -> Status {
    Status::default()
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Probe", |s| {
        let (id, src, tag) = probe_args(s, source, tag, comm)?;
        let filter = match src {
            Source::Null => {
                // SAFETY: MPI contract.
                unsafe { write_status(status, &proc_null_status()) };
                return Ok(());
            }
            Source::Any => None,
            Source::Rank(r) => Some(r),
        };
        let wild = filter.is_none() || tag.is_none();
        if let Some(n) = wild.then(|| s.rt.p2p().next_choice()).flatten() {
            // Replicas: the message the leader found, on every replica.
            let st = match s.rt.p2p().choice_role(n) {
                ChoiceRole::Lead(n) => {
                    let st = s.rt.probe(id, filter, tag);
                    s.rt.p2p().choose(n, probe_outcome(st.as_ref().ok()));
                    st
                }
                ChoiceRole::Follow(v) => match probed(v) {
                    Some((r, t)) => s.rt.probe(id, Some(r), Some(t)),
                    None => s.rt.probe(id, filter, tag),
                },
            };
            let st = st.map_err(|error| Fail { comm, error })?;
            // SAFETY: MPI contract.
            unsafe { write_status(status, &st) };
            return Ok(());
        }
        state::block_on(s, move |s, may_end| {
            let st = if may_end {
                s.rt.probe_or_hand_over(id, filter, tag)?
            } else {
                s.rt.probe(id, filter, tag)
            };
            Some(st.map_err(|error| Fail { comm, error }).map(|st| {
                // SAFETY: MPI contract.
                unsafe { write_status(status, &st) };
            }))
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Iprobe", |s| {
        args::out_ptr(comm, flag, "flag")?;
        let (id, src, tag) = probe_args(s, source, tag, comm)?;
        let filter = match src {
            Source::Rank(r) => Some(r),
            _ => None,
        };
        let choice = match src {
            Source::Null => None,
            _ => s.rt.p2p().next_choice(),
        };
        let found = match (src, choice) {
            (Source::Null, _) => Ok(Some(proc_null_status())),
            (_, None) => s.rt.iprobe(id, filter, tag),
            // Replicas: what the leader found, on every replica.
            (_, Some(n)) => match s.rt.p2p().choice_role(n) {
                ChoiceRole::Lead(n) => {
                    let found = s.rt.iprobe(id, filter, tag);
                    let outcome = probe_outcome(found.as_ref().ok().and_then(Option::as_ref));
                    s.rt.p2p().choose(n, outcome);
                    found
                }
                ChoiceRole::Follow(v) => match probed(v) {
                    None => Ok(None),
                    Some((r, t)) => s.rt.probe(id, Some(r), Some(t)).map(Some),
                },
            },
        }
        .map_err(|error| Fail { comm, error })?;
        // SAFETY: checked non-null / MPI contract.
        unsafe {
            put(flag, c_int::from(found.is_some()));
            if let Some(st) = found {
                write_status(status, &st);
            }
        }
        Ok(())
    })
}

/// First handle value of messages taken by a matched probe: far above the
/// predefined `MPI_MESSAGE_NULL` and `MPI_MESSAGE_NO_PROC`.
const MESSAGE_BASE: MPI_Message = 0x10000;

/// Records a message a matched probe took on `comm`; its handle.
fn message_handle(s: &mut State, msg: MsgId, comm: MPI_Comm) -> MPI_Message {
    s.ext.messages.insert(msg.0, comm);
    MESSAGE_BASE + msg.0 as MPI_Message
}

/// A message handle given to a matched receive.
enum Matched {
    /// `MPI_MESSAGE_NO_PROC`: a probe of `MPI_PROC_NULL`.
    NoProc,
    Msg(MsgId, MPI_Comm),
}

/// Validates the message handle at `message` (not yet consumed).
///
/// # Safety
/// `message` is null or valid for reads (MPI contract).
unsafe fn matched_arg(s: &State, message: *mut MPI_Message) -> Result<Matched, Fail> {
    args::out_ptr(MPI_COMM_WORLD, message, "message")?;
    // SAFETY: checked non-null; readable by the MPI contract.
    let h = unsafe { *message };
    if h == MPI_MESSAGE_NO_PROC {
        return Ok(Matched::NoProc);
    }
    let known = h
        .checked_sub(MESSAGE_BASE)
        .and_then(|id| Some((MsgId(id as u64), *s.ext.messages.get(&(id as u64))?)));
    match known {
        Some((msg, comm)) => Ok(Matched::Msg(msg, comm)),
        None if h == MPI_MESSAGE_NULL => Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Request,
            "MPI_MESSAGE_NULL names no message",
        )),
        None => Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Request,
            format!("invalid message handle {h:#x} (already received, or never probed)"),
        )),
    }
}

/// Starts the receive of a matched message (complete at once for
/// `MPI_MESSAGE_NO_PROC`) and sets the handle to `MPI_MESSAGE_NULL`.
///
/// # Safety
/// As [`matched_arg`]; the buffer as for a receive (MPI contract).
unsafe fn start_matched_recv(
    s: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    message: *mut MPI_Message,
) -> Result<Started, Fail> {
    // SAFETY: the caller's promise.
    let (msg, comm) = match unsafe { matched_arg(s, message)? } {
        Matched::NoProc => {
            datatype::typed(MPI_COMM_WORLD, buf, count, dt)?;
            let op = Op::P2p(s.rt.p2p().completed(false, proc_null_status()));
            // SAFETY: checked non-null by `matched_arg`.
            unsafe { put(message, MPI_MESSAGE_NULL) };
            return Ok(Started {
                op,
                comm: MPI_COMM_WORLD,
            });
        }
        Matched::Msg(msg, comm) => (msg, comm),
    };
    // A bad buffer leaves the message where it is, for a corrected call.
    let t = datatype::typed(comm, buf, count, dt)?;
    s.ext.messages.remove(&msg.0);
    // SAFETY: checked non-null by `matched_arg`.
    unsafe { put(message, MPI_MESSAGE_NULL) };
    let op = xfer::recv_matched(s, &t, msg, comm)?;
    Ok(Started { op, comm })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Mprobe", |s| {
        args::out_ptr(comm, message, "message")?;
        let (id, src, tag) = probe_args(s, source, tag, comm)?;
        let filter = match src {
            Source::Null => {
                // SAFETY: checked non-null / MPI contract.
                unsafe {
                    put(message, MPI_MESSAGE_NO_PROC);
                    write_status(status, &proc_null_status());
                }
                return Ok(());
            }
            Source::Any => None,
            Source::Rank(r) => Some(r),
        };
        let wild = filter.is_none() || tag.is_none();
        if let Some(n) = wild.then(|| s.rt.p2p().next_choice()).flatten() {
            // Replicas: the message the leader took, on every replica.
            let found = match s.rt.p2p().choice_role(n) {
                ChoiceRole::Lead(n) => {
                    let found = s.rt.mprobe(id, filter, tag);
                    s.rt.p2p()
                        .choose(n, probe_outcome(found.as_ref().ok().map(|(_, st)| st)));
                    found
                }
                ChoiceRole::Follow(v) => match probed(v) {
                    Some((r, t)) => s.rt.mprobe(id, Some(r), Some(t)),
                    None => s.rt.mprobe(id, filter, tag),
                },
            };
            let (msg, st) = found.map_err(|error| Fail { comm, error })?;
            let h = message_handle(s, msg, comm);
            // SAFETY: checked non-null / MPI contract.
            unsafe {
                put(message, h);
                write_status(status, &st);
            }
            return Ok(());
        }
        state::block_on(s, move |s, may_end| {
            let found = if may_end {
                s.rt.mprobe_or_hand_over(id, filter, tag)?
            } else {
                s.rt.mprobe(id, filter, tag)
            };
            Some(match found {
                Ok((msg, st)) => {
                    let h = message_handle(s, msg, comm);
                    // SAFETY: checked non-null / MPI contract.
                    unsafe {
                        put(message, h);
                        write_status(status, &st);
                    }
                    Ok(())
                }
                Err(error) => Err(Fail { comm, error }),
            })
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Improbe", |s| {
        args::out_ptr(comm, flag, "flag")?;
        args::out_ptr(comm, message, "message")?;
        let (id, src, tag) = probe_args(s, source, tag, comm)?;
        let found = match src {
            Source::Null => Some((MPI_MESSAGE_NO_PROC, proc_null_status())),
            Source::Any | Source::Rank(_) => {
                let filter = match src {
                    Source::Rank(r) => Some(r),
                    _ => None,
                };
                let taken = match s.rt.p2p().next_choice() {
                    None => s.rt.improbe(id, filter, tag),
                    // Replicas: what the leader took, on every replica.
                    Some(n) => match s.rt.p2p().choice_role(n) {
                        ChoiceRole::Lead(n) => {
                            let found = s.rt.improbe(id, filter, tag);
                            let st = found
                                .as_ref()
                                .ok()
                                .and_then(|f| f.as_ref().map(|(_, st)| st));
                            s.rt.p2p().choose(n, probe_outcome(st));
                            found
                        }
                        ChoiceRole::Follow(v) => match probed(v) {
                            None => Ok(None),
                            Some((r, t)) => s.rt.mprobe(id, Some(r), Some(t)).map(Some),
                        },
                    },
                };
                taken
                    .map_err(|error| Fail { comm, error })?
                    .map(|(msg, st)| (message_handle(s, msg, comm), st))
            }
        };
        // SAFETY: checked non-null / MPI contract. Without a match the
        // message handle and status are left alone, as MPI_Iprobe leaves
        // its status.
        unsafe {
            put(flag, c_int::from(found.is_some()));
            if let Some((h, st)) = found {
                put(message, h);
                write_status(status, &st);
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    call("MPI_Mrecv", |s| {
        // SAFETY: forwarded MPI contract.
        let started = unsafe { start_matched_recv(s, buf, count, dt, message)? };
        finish(s, started, status)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Imrecv", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        // SAFETY: forwarded MPI contract.
        let started = unsafe { start_matched_recv(s, buf, count, dt, message)? };
        let h = handle_of(s, started);
        // SAFETY: checked non-null; writable by the MPI contract.
        unsafe { put(request, h) };
        Ok(())
    })
}

/// The whole elements of `dt` in a status (`None`: not a whole number).
fn whole_count(status: *const MPI_Status, dt: MPI_Datatype) -> Result<Option<u64>, Fail> {
    args::out_ptr(MPI_COMM_WORLD, status as *mut MPI_Status, "status")?;
    let size = args::type_size(MPI_COMM_WORLD, dt)? as u64;
    // SAFETY: checked non-null; valid by the MPI contract.
    let bytes = args::status_bytes(unsafe { &*status });
    Ok(if size == 0 {
        Some(0)
    } else if !bytes.is_multiple_of(size) {
        None
    } else {
        Some(bytes / size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count(
    status: *const MPI_Status,
    dt: MPI_Datatype,
    count: *mut c_int,
) -> c_int {
    call_local("MPI_Get_count", || {
        args::out_ptr(MPI_COMM_WORLD, count, "count")?;
        let n = whole_count(status, dt)?
            .and_then(|n| c_int::try_from(n).ok())
            .unwrap_or(MPI_UNDEFINED);
        // SAFETY: checked non-null.
        unsafe { put(count, n) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_count_c(
    status: *const MPI_Status,
    dt: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    call_local("MPI_Get_count_c", || {
        args::out_ptr(MPI_COMM_WORLD, count, "count")?;
        let n = whole_count(status, dt)?
            .and_then(|n| MPI_Count::try_from(n).ok())
            .unwrap_or(MPI_UNDEFINED as MPI_Count);
        // SAFETY: checked non-null.
        unsafe { put(count, n) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    call("MPI_Barrier", |s| {
        if state::multiple() {
            // As the other blocking collectives then (see coll::run).
            return crate::coll::barrier(s, comm, std::ptr::null_mut());
        }
        let id = args::comm(s, comm)?;
        s.rt.barrier(id).map_err(|error| Fail { comm, error })
    })
}

//! Starting point-to-point operations on any datatype: contiguous data goes
//! straight from and into the user's buffer; other layouts through a
//! staging buffer (packed before the send, unpacked when the receive
//! completes). Buffered sends copy into space accounted against the buffer
//! of `MPI_Buffer_attach`.

use std::os::raw::{c_int, c_void};

use tandem::p2p::{MsgId, SendMode, Status};

use crate::abi::*;
use crate::args::{self, Source};
use crate::datatype::{self, Typed};
use crate::request::Op;
use crate::state::{Fail, State};

/// How a send completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendKind {
    /// Standard and ready modes.
    Standard,
    Synchronous,
    /// Copied into the attached buffer; complete at once.
    Buffered,
}

/// Starts a send of a checked buffer to `dest` (a checked rank or
/// `MPI_PROC_NULL`).
pub fn send_typed(
    s: &mut State,
    t: &Typed,
    dest: Option<u32>,
    tag: i32,
    comm: MPI_Comm,
    kind: SendKind,
) -> Result<Op, Fail> {
    let id = args::comm(s, comm)?;
    let Some(d) = dest else {
        return Ok(Op::P2p(s.rt.p2p().completed(true, Status::default())));
    };
    if kind == SendKind::Buffered {
        return crate::bsend::start(s, t, id, d, tag, comm);
    }
    let mode = if kind == SendKind::Synchronous {
        SendMode::Synchronous
    } else {
        SendMode::Standard
    };
    let len = t.bytes();
    match t.direct() {
        // SAFETY: the MPI contract keeps the buffer valid until the request completes.
        Some(p) => unsafe { s.rt.isend(id, d, tag, p, len, mode) }
            .map(Op::P2p)
            .map_err(|error| Fail { comm, error }),
        None => {
            // SAFETY: the buffer is valid for reads as its datatype describes.
            let staging = unsafe { t.pack() };
            // SAFETY: the staging buffer moves into the request with its heap
            // memory unchanged, and lives until the request completes.
            let inner = unsafe { s.rt.isend(id, d, tag, staging.as_ptr(), len, mode) }
                .map_err(|error| Fail { comm, error })?;
            Ok(Op::Staged {
                inner,
                staging,
                unpack: None,
            })
        }
    }
}

/// Starts a receive into a checked buffer.
pub fn recv_typed(
    s: &mut State,
    t: &Typed,
    src: Source,
    tag: Option<i32>,
    comm: MPI_Comm,
) -> Result<Op, Fail> {
    let id = args::comm(s, comm)?;
    let src = match src {
        Source::Null => return Ok(Op::P2p(s.rt.p2p().completed(false, Status::default()))),
        Source::Any => None,
        Source::Rank(r) => Some(r),
    };
    let cap = t.bytes();
    match t.direct() {
        // SAFETY: the MPI contract keeps the buffer valid until the request completes.
        Some(p) => unsafe { s.rt.irecv(id, src, tag, p, cap) }
            .map(Op::P2p)
            .map_err(|error| Fail { comm, error }),
        None => {
            let mut staging = vec![0u8; cap];
            // SAFETY: as for sends: the staging buffer lives in the request.
            let inner = unsafe { s.rt.irecv(id, src, tag, staging.as_mut_ptr(), cap) }
                .map_err(|error| Fail { comm, error })?;
            Ok(Op::Staged {
                inner,
                staging,
                unpack: Some(t.clone()),
            })
        }
    }
}

/// Starts the receive of a message a matched probe took, into a checked
/// buffer (the message leaves the core's keeping even if this fails).
pub fn recv_matched(s: &mut State, t: &Typed, msg: MsgId, comm: MPI_Comm) -> Result<Op, Fail> {
    let cap = t.bytes();
    match t.direct() {
        // SAFETY: the MPI contract keeps the buffer valid until the request completes.
        Some(p) => unsafe { s.rt.p2p().imrecv(msg, p, cap) }
            .map(Op::P2p)
            .map_err(|error| Fail { comm, error }),
        None => {
            let mut staging = vec![0u8; cap];
            // SAFETY: as for sends: the staging buffer lives in the request.
            let inner = unsafe { s.rt.p2p().imrecv(msg, staging.as_mut_ptr(), cap) }
                .map_err(|error| Fail { comm, error })?;
            Ok(Op::Staged {
                inner,
                staging,
                unpack: Some(t.clone()),
            })
        }
    }
}

/// Checks the arguments of a send.
pub fn send_args(
    s: &State,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<(Typed, Option<u32>, i32), Fail> {
    let id = args::comm(s, comm)?;
    let t = datatype::typed(comm, buf, count, dt)?;
    let tag = args::send_tag(comm, tag)?;
    let dest = args::dest(s, comm, id, dest)?;
    Ok((t, dest, tag))
}

/// Checks the arguments of a receive.
pub fn recv_args(
    s: &State,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<(Typed, Source, Option<i32>), Fail> {
    let id = args::comm(s, comm)?;
    let t = datatype::typed(comm, buf, count, dt)?;
    let tag = args::recv_tag(comm, tag)?;
    let src = args::source(s, comm, id, src)?;
    Ok((t, src, tag))
}

/// Starts a send from raw arguments.
#[allow(clippy::too_many_arguments)]
pub fn start_send(
    s: &mut State,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    kind: SendKind,
) -> Result<Op, Fail> {
    let (t, dest, tag) = send_args(s, buf, count, dt, dest, tag, comm)?;
    send_typed(s, &t, dest, tag, comm, kind)
}

/// Starts a receive from raw arguments.
pub fn start_recv(
    s: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<Op, Fail> {
    let (t, src, tag) = recv_args(s, buf, count, dt, src, tag, comm)?;
    recv_typed(s, &t, src, tag, comm)
}

//! Persistent requests: `MPI_Send_init` (and the buffered, synchronous and
//! ready forms), `MPI_Recv_init`, the collectives' (persistent_coll.rs),
//! `MPI_Start`, `MPI_Startall`. The request
//! keeps its checked arguments; each start begins a new operation, and
//! completing it leaves the handle valid and inactive until
//! `MPI_Request_free`.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put, Source};
use crate::datatype::Typed;
use crate::request;
use crate::state::{call, Fail, State};
use crate::xfer::{self, SendKind};

/// What a persistent request starts.
pub enum Spec {
    Send {
        t: Typed,
        dest: Option<u32>,
        tag: i32,
        comm: MPI_Comm,
        kind: SendKind,
    },
    Recv {
        t: Typed,
        src: Source,
        tag: Option<i32>,
        comm: MPI_Comm,
    },
    /// A partitioned send or receive (part.rs): `t` is the whole buffer.
    Part {
        t: Typed,
        partitions: usize,
        peer: Option<u32>,
        tag: i32,
        /// Which initialisation with this peer and tag (matching order).
        seq: u32,
        comm: MPI_Comm,
        send: bool,
    },
    /// A persistent collective on its private communicator
    /// (persistent_coll.rs).
    Coll {
        start: crate::persistent_coll::Starter,
        private: MPI_Comm,
        /// Count and displacement arrays a large-count init narrowed to
        /// `int`, which `start` reads; freed with the request.
        kept: Vec<Vec<c_int>>,
    },
}

fn send_init(
    func: &'static str,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    kind: SendKind,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, request, "request")?;
        let (t, dest, tag) = xfer::send_args(s, buf, count, dt, dest, tag, comm)?;
        let h = s.ext.reqs.add_persistent(
            comm,
            Spec::Send {
                t,
                dest,
                tag,
                comm,
                kind,
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Send_init(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Send_init",
        buf,
        count,
        dt,
        dest,
        tag,
        comm,
        request,
        SendKind::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rsend_init(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Rsend_init",
        buf,
        count,
        dt,
        dest,
        tag,
        comm,
        request,
        SendKind::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend_init(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Ssend_init",
        buf,
        count,
        dt,
        dest,
        tag,
        comm,
        request,
        SendKind::Synchronous,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bsend_init(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Bsend_init",
        buf,
        count,
        dt,
        dest,
        tag,
        comm,
        request,
        SendKind::Buffered,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Recv_init(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Recv_init", |s| {
        args::out_ptr(comm, request, "request")?;
        let (t, src, tag) = xfer::recv_args(s, buf, count, dt, src, tag, comm)?;
        let h = s
            .ext
            .reqs
            .add_persistent(comm, Spec::Recv { t, src, tag, comm });
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

fn start(s: &mut State, h: MPI_Request) -> Result<(), Fail> {
    let r = request::classify(s, h)?;
    let op = match s.ext.reqs.persistent(r) {
        Some((_, true)) => {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Request,
                "MPI_Start on a persistent request that is still active",
            ))
        }
        None => return Err(request::not_persistent(h)),
        Some((
            Spec::Send {
                t,
                dest,
                tag,
                comm,
                kind,
            },
            false,
        )) => {
            let (t, dest, tag, comm, kind) = (t.clone(), *dest, *tag, *comm, *kind);
            xfer::send_typed(s, &t, dest, tag, comm, kind)?
        }
        Some((Spec::Recv { t, src, tag, comm }, false)) => {
            let (t, src, tag, comm) = (t.clone(), *src, *tag, *comm);
            xfer::recv_typed(s, &t, src, tag, comm)?
        }
        Some((
            Spec::Part {
                t,
                partitions,
                peer,
                tag,
                seq,
                comm,
                send,
            },
            false,
        )) => {
            let (t, partitions, peer, tag, comm, send) =
                (t.clone(), *partitions, *peer, (*tag, *seq), *comm, *send);
            crate::part::start(s, &t, partitions, peer, tag, comm, send)?
        }
        Some((Spec::Coll { start, private, .. }, false)) => {
            // The non-blocking collective registers a request of its own;
            // its operation moves into the persistent one.
            let (start, private) = (start.clone(), *private);
            let mut inner: MPI_Request = MPI_REQUEST_NULL;
            start(s, private, &mut inner)?;
            s.ext.reqs.take_active(inner).ok_or_else(|| {
                Fail::new(
                    MPI_COMM_WORLD,
                    ErrorClass::Intern,
                    "a persistent collective started no operation",
                )
            })?
        }
    };
    s.ext.reqs.activate(r, op);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Start(request: *mut MPI_Request) -> c_int {
    call("MPI_Start", |s| {
        args::out_ptr(MPI_COMM_WORLD, request, "request")?;
        // SAFETY: checked non-null.
        start(s, unsafe { *request })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Startall(count: c_int, requests: *mut MPI_Request) -> c_int {
    call("MPI_Startall", |s| {
        if count < 0 {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Count,
                format!("negative count {count}"),
            ));
        }
        if count > 0 {
            args::out_ptr(MPI_COMM_WORLD, requests, "requests")?;
        }
        for i in 0..count as usize {
            // SAFETY: `count` entries by the MPI contract.
            start(s, unsafe { *requests.add(i) })?;
        }
        Ok(())
    })
}

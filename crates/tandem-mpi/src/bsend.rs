//! Buffered sends: `MPI_Buffer_attach`/`detach`, `MPI_Bsend`, `MPI_Ibsend`.
//! A buffered send copies the packed message (plus `MPI_BSEND_OVERHEAD`
//! bytes of accounting) into space taken from the attached buffer and
//! completes at once; the space is given back when the transfer completes.
//! A message that does not fit is an `MPI_ERR_BUFFER` error, as the
//! standard requires. (The copy lives in memory Tandem allocates; the
//! attached buffer sets the limit.)
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};

use tandem::p2p::{ReqId, SendMode, Status};
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::put;
use crate::datatype::Typed;
use crate::request::Op;
use crate::state::{call, Fail, State};
use crate::xfer::{self, SendKind};

/// The attached buffer and the buffered sends in flight.
#[derive(Default)]
pub struct Bsend {
    buffer: Option<(*mut c_void, usize)>,
    used: usize,
    in_flight: Vec<(ReqId, Vec<u8>)>,
}

fn reclaim(s: &mut State) {
    let State { rt, ext, .. } = s;
    let b = &mut ext.bsend;
    let mut i = 0;
    while i < b.in_flight.len() {
        let id = b.in_flight[i].0;
        if rt.p2p().is_complete(id) != Some(false) {
            let _ = rt.p2p().take_if_complete(id);
            let (_, data) = b.in_flight.swap_remove(i);
            b.used -= data.len() + MPI_BSEND_OVERHEAD as usize;
        } else {
            i += 1;
        }
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
    reclaim(s);
    let need = t.bytes() + MPI_BSEND_OVERHEAD as usize;
    let cap = s.ext.bsend.buffer.map_or(0, |b| b.1);
    if s.ext.bsend.used + need > cap {
        return Err(Fail::new(
            comm,
            ErrorClass::Buffer,
            format!(
                "buffered send of {} bytes does not fit: {} of {cap} attached bytes in use (MPI_Buffer_attach)",
                t.bytes(),
                s.ext.bsend.used
            ),
        ));
    }
    // SAFETY: the buffer is valid for reads as its datatype describes.
    let data = unsafe { t.pack() };
    // SAFETY: `data` moves into `in_flight` with its heap memory unchanged
    // and stays there until the send completes.
    let rid = unsafe {
        s.rt.isend(id, dest, tag, data.as_ptr(), data.len(), SendMode::Standard)
    }
    .map_err(|error| Fail { comm, error })?;
    s.ext.bsend.used += need;
    s.ext.bsend.in_flight.push((rid, data));
    Ok(Op::Done(Status::default()))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    call("MPI_Buffer_attach", |s| {
        if s.ext.bsend.buffer.is_some() {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Buffer,
                "a buffer is already attached",
            ));
        }
        if size < 0 || (size > 0 && buffer.is_null()) {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Buffer,
                format!("invalid buffer of {size} bytes"),
            ));
        }
        s.ext.bsend.buffer = Some((buffer, size as usize));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    call("MPI_Buffer_detach", |s| {
        // Every buffered message must have been delivered first.
        let ids: Vec<ReqId> = s.ext.bsend.in_flight.iter().map(|x| x.0).collect();
        s.rt.wait_until(|p, _| ids.iter().all(|&id| p.is_complete(id) != Some(false)));
        reclaim(s);
        let (p, n) = s
            .ext
            .bsend
            .buffer
            .take()
            .unwrap_or((std::ptr::null_mut(), 0));
        // SAFETY: by the standard `buffer_addr` points to a `void *`; both
        // outputs are written only when non-null.
        unsafe {
            if !buffer_addr.is_null() {
                *buffer_addr.cast::<*mut c_void>() = p;
            }
            if !size.is_null() {
                put(size, n as c_int);
            }
        }
        Ok(())
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

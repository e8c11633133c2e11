//! Collective operations at the C boundary: argument checks with the
//! standard's error classes, `MPI_IN_PLACE`, datatypes (contiguous data is
//! used in place; other layouts are packed into staging buffers before and
//! unpacked after), and the blocking and non-blocking forms, which run the
//! same schedules of the core (`tandem::coll`).
//!
//! Safety contract of every exported function: pointer arguments are valid
//! as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use tandem::coll::CollCall;
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype::{self, Typed};
use crate::intercomm;
use crate::ops;
use crate::request::{self, Op};
use crate::state::{self, call, Fail, State};

/// Staging buffers of one collective and what to unpack when it completes.
#[derive(Default)]
pub struct Stage {
    keep: Vec<Vec<u8>>,
    unpacks: Vec<(usize, usize, Typed)>,
}

impl Stage {
    fn hold(&mut self, v: Vec<u8>) -> (usize, *mut u8) {
        self.keep.push(v);
        let i = self.keep.len() - 1;
        (i, self.keep[i].as_mut_ptr())
    }

    /// Where the collective reads `t` from.
    pub fn input(&mut self, t: &Typed) -> *const u8 {
        match t.direct() {
            Some(p) => p,
            None => self.copy(t),
        }
    }

    /// Where the collective reads `len` bytes of `t` from: as
    /// [`Stage::input`] when `t` holds exactly `len`, else a packed copy cut
    /// or zero-padded to `len` (this rank's send and receive signatures
    /// differ: the collective still runs, so that nobody waits for this
    /// rank, and the caller reports [`signatures_differ`] after it).
    pub fn input_as(&mut self, t: &Typed, len: usize) -> (*const u8, bool) {
        if t.bytes() >= len {
            // Only the first `len` bytes are read.
            return (self.input(t), t.bytes() != len);
        }
        // SAFETY: the buffer is valid for reads as described (MPI contract).
        let mut v = unsafe { t.pack() };
        v.resize(len, 0);
        (self.hold(v).1.cast_const(), true)
    }

    /// Where the collective writes `len` bytes of `t`'s data: as
    /// [`Stage::output`] when `t` holds exactly `len`, else a staging
    /// buffer of `len` bytes of which `t` gets what fits (see
    /// [`Stage::input_as`]).
    pub fn output_as(&mut self, t: &Typed, len: usize) -> (*mut u8, bool) {
        if t.bytes() >= len {
            // Only the first `len` bytes are written.
            return (self.output(t), t.bytes() != len);
        }
        let (i, p) = self.hold(vec![0; len]);
        self.unpacks.push((i, 0, t.clone()));
        (p, true)
    }

    /// A packed copy of `t`, always.
    pub fn copy(&mut self, t: &Typed) -> *const u8 {
        // SAFETY: the buffer is valid for reads as described (MPI contract).
        let v = unsafe { t.pack() };
        self.hold(v).1
    }

    /// Where the collective writes `t`'s data.
    pub fn output(&mut self, t: &Typed) -> *mut u8 {
        match t.direct() {
            Some(p) => p,
            None => {
                let (i, p) = self.hold(vec![0; t.bytes()]);
                self.unpacks.push((i, 0, t.clone()));
                p
            }
        }
    }

    /// `MPI_IN_PLACE` data of `region`: `None` (the collective finds it in
    /// the receive buffer) when that buffer is used directly, else a packed
    /// copy to send from.
    pub fn in_place(&mut self, region: &Typed) -> Option<*const u8> {
        match region.direct() {
            Some(_) => None,
            None => Some(self.copy(region)),
        }
    }

    /// Blocks of `base`'s datatype at `displs` (in extents) of `counts`
    /// elements: the address and byte counts/displacements the collective
    /// uses (the user's memory when contiguous, else a packed staging
    /// buffer, unpacked at the end when `write`).
    pub(crate) fn blocks(
        &mut self,
        base: &Typed,
        counts: &[usize],
        displs: &[isize],
        write: bool,
    ) -> (*mut u8, Vec<usize>, Vec<usize>) {
        self.blocks_with(base, counts, displs, write, false)
    }

    /// A packed copy of the blocks (for `MPI_IN_PLACE`), always.
    fn blocks_copy(
        &mut self,
        base: &Typed,
        counts: &[usize],
        displs: &[isize],
    ) -> (*mut u8, Vec<usize>, Vec<usize>) {
        self.blocks_with(base, counts, displs, false, true)
    }

    fn blocks_with(
        &mut self,
        base: &Typed,
        counts: &[usize],
        displs: &[isize],
        write: bool,
        force_copy: bool,
    ) -> (*mut u8, Vec<usize>, Vec<usize>) {
        let size = base.layout.size;
        let bytes: Vec<usize> = counts.iter().map(|&c| c * size).collect();
        if let (Some(p), false) = (base.direct(), force_copy) {
            if displs.iter().all(|&d| d >= 0) {
                let offs = displs.iter().map(|&d| d as usize * size).collect();
                return (p, bytes, offs);
            }
        }
        let mut offs = Vec::with_capacity(counts.len());
        let mut at = 0;
        for &b in &bytes {
            offs.push(at);
            at += b;
        }
        let mut v = vec![0u8; at];
        if !write {
            for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
                // SAFETY: the blocks are valid for reads (MPI contract).
                let packed = unsafe { base.at(d, c).pack() };
                v[offs[i]..offs[i] + packed.len()].copy_from_slice(&packed);
            }
        }
        let (k, p) = self.hold(v);
        if write {
            for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
                self.unpacks.push((k, offs[i], base.at(d, c)));
            }
        }
        (p, bytes, offs)
    }

    /// Blocks anywhere in memory, each its own datatype and count, used as
    /// `used` says: one base address and the byte counts and displacements
    /// from it (the user's memory when every block is contiguous, unless a
    /// snapshot is asked for; else a packed staging buffer, unpacked at the
    /// end for [`BlockUse::Write`]).
    pub(crate) fn typed_blocks(
        &mut self,
        blocks: Vec<Typed>,
        used: BlockUse,
    ) -> (*mut u8, Vec<usize>, Vec<usize>) {
        let write = used == BlockUse::Write;
        let bytes: Vec<usize> = blocks.iter().map(Typed::bytes).collect();
        let direct: Option<Vec<*mut u8>> = blocks.iter().map(Typed::direct).collect();
        if let (Some(at), false) = (direct, used == BlockUse::Snapshot) {
            let base = at.iter().copied().min().unwrap_or(std::ptr::null_mut());
            let offs = at.iter().map(|&p| p as usize - base as usize).collect();
            return (base, bytes, offs);
        }
        let mut offs = Vec::with_capacity(blocks.len());
        let mut at = 0;
        for &b in &bytes {
            offs.push(at);
            at += b;
        }
        let mut v = vec![0u8; at];
        if !write {
            for (t, &off) in blocks.iter().zip(&offs) {
                // SAFETY: the blocks are valid for reads (MPI contract).
                let packed = unsafe { t.pack() };
                v[off..off + packed.len()].copy_from_slice(&packed);
            }
        }
        let (k, p) = self.hold(v);
        if write {
            for (t, off) in blocks.into_iter().zip(offs.iter().copied()) {
                self.unpacks.push((k, off, t));
            }
        }
        (p, bytes, offs)
    }

    /// Unpacks every staged output.
    pub fn finish(self) {
        for (k, off, t) in self.unpacks {
            let n = t.bytes();
            // SAFETY: the user buffer is valid for writes as described (MPI
            // contract); the staging slice has the packed data.
            unsafe { t.unpack(&self.keep[k][off..off + n]) };
        }
    }

    fn is_empty(&self) -> bool {
        self.keep.is_empty()
    }
}

/// Runs `call` (blocking when `req` is null), unpacking the staging after.
pub fn run(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    c: CollCall,
    st: Stage,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    if req.is_null() && !state::multiple() {
        // SAFETY: user buffers stay valid for the call (MPI contract); the
        // staging buffers stay in `st` until it returns.
        unsafe { s.rt.coll(id, c) }.map_err(|error| Fail { comm, error })?;
        st.finish();
        return Ok(());
    }
    // Under MPI_THREAD_MULTIPLE a blocking collective is a started one
    // waited for, so that its wait can let other threads in.
    // Blocking and non-blocking collectives are numbered apart.
    let started = if req.is_null() {
        // SAFETY: user buffers stay valid until the collective completes
        // (MPI contract: for the call); the staging buffers stay in `st`
        // until then.
        unsafe { s.rt.coll_start(id, c) }
    } else {
        // SAFETY: as above, until the request completes.
        unsafe { s.rt.icoll_start(id, c) }
    };
    let sid = started.map_err(|error| Fail { comm, error })?;
    complete_or_hand_out(s, comm, sid, st, req)
}

/// Waits for started collective `sid` as a step of a blocking call (see
/// `state::block_on`): false when, with `may_end`, the wait stopped to let
/// other threads in; else it is complete, or (without `may_end`) left for
/// `coll_wait` to wait for.
pub(crate) fn sched_waited(s: &mut State, sid: tandem::coll::SchedId, may_end: bool) -> bool {
    !may_end
        || s.rt
            .wait_until_or_hand_over(|_, c| c.is_complete(sid) != Some(false))
}

/// [`sched_waited`], then the collective's outcome, taken; `None` when the
/// wait stopped to let other threads in.
pub(crate) fn sched_done(
    s: &mut State,
    sid: tandem::coll::SchedId,
    may_end: bool,
) -> Option<tandem::Result<()>> {
    sched_waited(s, sid, may_end).then(|| s.rt.coll_wait(sid))
}

/// The started collective `sid`: waited for and its staging `st` unpacked
/// when `req` is null (a blocking call); else `st` is unpacked when it
/// completes and its request handle is written to `req`.
pub(crate) fn complete_or_hand_out(
    s: &mut State,
    comm: MPI_Comm,
    sid: tandem::coll::SchedId,
    st: Stage,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    if req.is_null() {
        let mut st = Some(st);
        return state::block_on(s, move |s, may_end| {
            let done = sched_done(s, sid, may_end)?.map_err(|error| Fail { comm, error });
            Some(done.map(|()| st.take().map_or((), Stage::finish)))
        });
    }
    if !st.is_empty() {
        match s.rt.colls_mut().schedule_mut(sid) {
            Some(sched) if !sched.is_finished() => sched.on_done(Box::new(move |_| {
                st.finish();
                Ok(())
            })),
            // Finished inside coll_start already (nothing to wait for).
            _ => st.finish(),
        }
    }
    let h = request::handle(s, comm, Op::Coll(sid));
    // SAFETY: checked non-null above.
    unsafe { put(req, h) };
    Ok(())
}

/// The error of a rank whose send and receive counts and datatypes give
/// different sizes for one block (`sent` and `block` bytes), reported once
/// the collective has run with the block cut or padded.
fn signatures_differ(comm: MPI_Comm, sent: usize, block: usize) -> Fail {
    Fail::new(
        comm,
        if sent > block {
            ErrorClass::Truncate
        } else {
            ErrorClass::Other
        },
        format!(
            "this rank's send count and datatype give {sent} bytes where its receive count and \
             datatype give {block} per block"
        ),
    )
}

/// Runs `c` as [`run`] does, then reports [`signatures_differ`] if
/// `differ` holds (`sent` and `block` bytes).
fn run_then_report(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    c: CollCall,
    st: Stage,
    req: *mut MPI_Request,
    differ: Option<(usize, usize)>,
) -> Result<(), Fail> {
    run(s, comm, id, c, st, req)?;
    match differ {
        Some((sent, block)) => Err(signatures_differ(comm, sent, block)),
        None => Ok(()),
    }
}

pub(crate) fn is_in_place(p: *const c_void) -> bool {
    p as usize == MPI_IN_PLACE
}

fn size_of(s: &State, comm: MPI_Comm, id: CommId) -> Result<(u32, u32), Fail> {
    let c = s.rt.comm(id).map_err(|error| Fail { comm, error })?;
    Ok((c.size(), c.rank))
}

pub(crate) fn root_arg(comm: MPI_Comm, root: c_int, n: u32) -> Result<u32, Fail> {
    u32::try_from(root).ok().filter(|&r| r < n).ok_or_else(|| {
        Fail::new(
            comm,
            ErrorClass::Root,
            format!("root {root} is not in 0..{n}"),
        )
    })
}

/// Refuses one buffer given as both the send and the receive buffer of a
/// collective that moves data through both (the standard forbids an output
/// argument aliasing another; `MPI_IN_PLACE` is how the receive buffer is
/// reused), before anything is sent, so every rank that does it fails
/// alike rather than some waiting for the others. For the all-to-all
/// v- and w-forms, whose blocks are not compared one by one ([`disjoint`]
/// does that for the others).
fn not_aliased(
    comm: MPI_Comm,
    send: *const c_void,
    recv: *const c_void,
    moves: bool,
) -> Result<(), Fail> {
    if moves && !send.is_null() && send == recv {
        return Err(Fail::new(
            comm,
            ErrorClass::Buffer,
            "sendbuf and recvbuf are the same buffer (MPI_IN_PLACE reuses the receive buffer)",
        ));
    }
    Ok(())
}

/// Refuses a send buffer that shares bytes with a receive buffer of the
/// same call (the standard forbids it; `MPI_IN_PLACE` is how the receive
/// buffer is reused), checked before anything is sent so that every rank
/// that does it fails alike. Where both are contiguous the bytes each
/// covers are compared: equal addresses alone miss the common slip of
/// passing `&buf[rank]` as the send buffer of an allgather into `buf`,
/// where every rank but rank 0 would start a collective rank 0 refused.
/// Otherwise one buffer given twice is what is caught.
fn disjoint(comm: MPI_Comm, send: &Typed, recv: &Typed) -> Result<(), Fail> {
    let span = |t: &Typed| t.direct().map(|p| (p as usize, p as usize + t.bytes()));
    let overlap = send.bytes() > 0
        && recv.bytes() > 0
        && match (span(send), span(recv)) {
            (Some((s0, s1)), Some((r0, r1))) => s0 < r1 && r0 < s1,
            _ => send.ptr == recv.ptr,
        };
    if overlap {
        return Err(Fail::new(
            comm,
            ErrorClass::Buffer,
            "sendbuf overlaps recvbuf (MPI_IN_PLACE reuses the receive buffer)",
        ));
    }
    Ok(())
}

pub(crate) fn in_place_misuse(comm: MPI_Comm, what: &str) -> Fail {
    Fail::new(
        comm,
        ErrorClass::Buffer,
        format!("MPI_IN_PLACE is not allowed here ({what})"),
    )
}

/// Reads `n` non-negative counts.
///
/// # Safety
/// `p` must be valid for `n` reads.
pub(crate) unsafe fn counts(
    comm: MPI_Comm,
    p: *const c_int,
    n: u32,
    what: &str,
) -> Result<Vec<usize>, Fail> {
    if n > 0 && p.is_null() {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!("NULL {what} array"),
        ));
    }
    (0..n as usize)
        .map(|i| {
            // SAFETY: the caller's promise.
            let c = unsafe { *p.add(i) };
            usize::try_from(c).map_err(|_| {
                Fail::new(
                    comm,
                    ErrorClass::Count,
                    format!("negative {what}[{i}] = {c}"),
                )
            })
        })
        .collect()
}

/// Reads `n` displacements.
///
/// # Safety
/// `p` must be valid for `n` reads.
pub(crate) unsafe fn displs(
    comm: MPI_Comm,
    p: *const c_int,
    n: u32,
    what: &str,
) -> Result<Vec<isize>, Fail> {
    if n > 0 && p.is_null() {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!("NULL {what} array"),
        ));
    }
    // SAFETY: the caller's promise.
    Ok((0..n as usize)
        .map(|i| unsafe { *p.add(i) } as isize)
        .collect())
}

/// A receive region of `count * blocks` elements (overflow checked).
pub(crate) fn region(
    comm: MPI_Comm,
    buf: *const c_void,
    count: c_int,
    blocks: u32,
    dt: MPI_Datatype,
) -> Result<Typed, Fail> {
    let total = (count as i64) * i64::from(blocks);
    let total = c_int::try_from(total)
        .map_err(|_| Fail::new(comm, ErrorClass::Count, "count times size overflows"))?;
    datatype::typed(comm, buf, total, dt)
}

fn out_req(comm: MPI_Comm, req: *mut MPI_Request, nonblocking: bool) -> Result<(), Fail> {
    if nonblocking {
        args::out_ptr(comm, req, "request")
    } else {
        Ok(())
    }
}

// ----------------------------------------------------------------- barrier

pub(crate) fn barrier(s: &mut State, comm: MPI_Comm, req: *mut MPI_Request) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::barrier(s, comm, id, req);
    }
    run(s, comm, id, CollCall::Barrier, Stage::default(), req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    call("MPI_Ibarrier", |s| {
        out_req(comm, request, true)?;
        barrier(s, comm, request)
    })
}

// ------------------------------------------------------------------- bcast

pub(crate) fn bcast(
    s: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::bcast(s, buf, count, dt, root, comm, id, req);
    }
    let (n, me) = size_of(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let t = datatype::typed(comm, buf, count, dt)?;
    let mut st = Stage::default();
    let p = if me == root {
        st.input(&t) as *mut u8
    } else {
        st.output(&t)
    };
    run(
        s,
        comm,
        id,
        CollCall::Bcast {
            buf: p,
            len: t.bytes(),
            root,
        },
        st,
        req,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Bcast", |s| {
        bcast(s, buf, count, dt, root, comm, std::ptr::null_mut())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ibcast(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ibcast", |s| {
        out_req(comm, request, true)?;
        bcast(s, buf, count, dt, root, comm, request)
    })
}

// -------------------------------------------------------------- reductions

pub(crate) enum RedKind {
    Reduce(c_int),
    Allreduce,
    Scan,
    Exscan,
}

pub(crate) fn reduction(
    s: &mut State,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    kind: RedKind,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        let root = match kind {
            RedKind::Reduce(r) => Some(r),
            RedKind::Allreduce => None,
            RedKind::Scan | RedKind::Exscan => {
                return Err(Fail {
                    comm,
                    error: tandem::intercomm::unsupported(),
                })
            }
        };
        return intercomm::reduction(s, sendbuf, recvbuf, count, dt, op, root, comm, id, req);
    }
    let (n, me) = size_of(s, comm, id)?;
    let root = match kind {
        RedKind::Reduce(r) => Some(root_arg(comm, r, n)?),
        _ => None,
    };
    let receives = root.is_none_or(|r| r == me);
    let in_place = is_in_place(sendbuf);
    if in_place && !receives {
        return Err(in_place_misuse(comm, "sendbuf of a non-root rank"));
    }
    let layout = datatype::layout(comm, dt)?;
    let r = ops::reducer(s, comm, op, dt, &layout)?;
    let mut st = Stage::default();
    let (send, recv, len) = if receives {
        let trecv = datatype::typed(comm, recvbuf, count, dt)?;
        let send = if in_place {
            st.in_place(&trecv)
        } else {
            let tsend = datatype::typed(comm, sendbuf, count, dt)?;
            disjoint(comm, &tsend, &trecv)?;
            Some(st.input(&tsend))
        };
        (send, st.output(&trecv), trecv.bytes())
    } else {
        let tsend = datatype::typed(comm, sendbuf, count, dt)?;
        (Some(st.input(&tsend)), std::ptr::null_mut(), tsend.bytes())
    };
    let c = match kind {
        RedKind::Reduce(_) => CollCall::Reduce {
            send,
            recv,
            len,
            op: r,
            root: root.unwrap_or(0),
        },
        RedKind::Allreduce => CollCall::Allreduce {
            send,
            recv,
            len,
            op: r,
        },
        RedKind::Scan => CollCall::Scan {
            send,
            recv,
            len,
            op: r,
        },
        RedKind::Exscan => CollCall::Exscan {
            send,
            recv,
            len,
            op: r,
        },
    };
    run(s, comm, id, c, st, req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Reduce", |s| {
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Reduce(root),
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ireduce", |s| {
        out_req(comm, request, true)?;
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Reduce(root),
            comm,
            request,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Allreduce", |s| {
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Allreduce,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iallreduce", |s| {
        out_req(comm, request, true)?;
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Allreduce,
            comm,
            request,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Scan", |s| {
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Scan,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iscan", |s| {
        out_req(comm, request, true)?;
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Scan,
            comm,
            request,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Exscan", |s| {
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Exscan,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iexscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iexscan", |s| {
        out_req(comm, request, true)?;
        reduction(
            s,
            sendbuf,
            recvbuf,
            count,
            dt,
            op,
            RedKind::Exscan,
            comm,
            request,
        )
    })
}

pub(crate) fn reduce_scatter(
    s: &mut State,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    rcounts: Option<*const c_int>,
    block: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    // On an intercommunicator: the counts are the local group's, the
    // result the reduction of the other group's vectors.
    let inter = intercomm::is_inter(s, id);
    if inter && is_in_place(sendbuf) {
        return Err(in_place_misuse(comm, "sendbuf on an intercommunicator"));
    }
    let (n, me) = size_of(s, comm, id)?;
    let elems = match rcounts {
        // SAFETY: `n` entries by the MPI contract.
        Some(p) => unsafe { counts(comm, p, n, "recvcounts")? },
        None => {
            let b = usize::try_from(block).map_err(|_| {
                Fail::new(
                    comm,
                    ErrorClass::Count,
                    format!("negative recvcount {block}"),
                )
            })?;
            vec![b; n as usize]
        }
    };
    let total: usize = elems.iter().sum();
    let total_c = c_int::try_from(total)
        .map_err(|_| Fail::new(comm, ErrorClass::Count, "total count overflows"))?;
    let layout = datatype::layout(comm, dt)?;
    let r = ops::reducer(s, comm, op, dt, &layout)?;
    let mut st = Stage::default();
    let mine = elems[me as usize] as c_int;
    let trecv = datatype::typed(comm, recvbuf, mine, dt)?;
    let send = if is_in_place(sendbuf) {
        let whole = datatype::typed(comm, recvbuf, total_c, dt)?;
        Some(st.copy(&whole))
    } else {
        let tsend = datatype::typed(comm, sendbuf, total_c, dt)?;
        if !inter {
            disjoint(comm, &tsend, &trecv)?;
        }
        Some(st.input(&tsend))
    };
    let recv = st.output(&trecv);
    let counts = elems.iter().map(|&e| e * layout.size).collect();
    if inter {
        let call = tandem::coll::inter::InterCall::ReduceScatter {
            send: send.unwrap_or(std::ptr::null()),
            recv,
            counts,
            op: r,
        };
        return intercomm::start(s, comm, id, call, st, req);
    }
    let c = CollCall::ReduceScatter {
        send,
        recv,
        counts,
        op: r,
    };
    run(s, comm, id, c, st, req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Reduce_scatter", |s| {
        reduce_scatter(
            s,
            sendbuf,
            recvbuf,
            Some(recvcounts),
            0,
            dt,
            op,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ireduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ireduce_scatter", |s| {
        out_req(comm, request, true)?;
        reduce_scatter(
            s,
            sendbuf,
            recvbuf,
            Some(recvcounts),
            0,
            dt,
            op,
            comm,
            request,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Reduce_scatter_block", |s| {
        reduce_scatter(
            s,
            sendbuf,
            recvbuf,
            None,
            recvcount,
            dt,
            op,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ireduce_scatter_block", |s| {
        out_req(comm, request, true)?;
        reduce_scatter(s, sendbuf, recvbuf, None, recvcount, dt, op, comm, request)
    })
}

// ---------------------------------------------------------- gather/scatter

pub(crate) fn gather(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::gather(
            s, sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, id, req,
        );
    }
    let (n, me) = size_of(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let mut differ = None;
    let c = if me == root {
        let whole = region(comm, recvbuf, rcount, n, rtype)?;
        let len = whole.layout.size * rcount.max(0) as usize;
        let send = if is_in_place(sendbuf) {
            let own = whole.block(me as usize, rcount as usize);
            st.in_place(&own)
        } else {
            let t = datatype::typed(comm, sendbuf, scount, stype)?;
            disjoint(comm, &t, &whole)?;
            let (p, d) = st.input_as(&t, len);
            differ = d.then_some((t.bytes(), len));
            Some(p)
        };
        CollCall::Gather {
            send,
            recv: st.output(&whole),
            len,
            root,
        }
    } else {
        if is_in_place(sendbuf) {
            return Err(in_place_misuse(comm, "sendbuf of a non-root rank"));
        }
        let t = datatype::typed(comm, sendbuf, scount, stype)?;
        CollCall::Gather {
            send: Some(st.input(&t)),
            recv: std::ptr::null_mut(),
            len: t.bytes(),
            root,
        }
    };
    run_then_report(s, comm, id, c, st, req, differ)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Gather", |s| {
        gather(
            s,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            root,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Igather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Igather", |s| {
        out_req(comm, request, true)?;
        gather(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
        )
    })
}

pub(crate) fn gatherv(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::gatherv(
            s, sendbuf, scount, stype, recvbuf, rcounts, rdispls, rtype, root, comm, id, req,
        );
    }
    let (n, me) = size_of(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let c = if me == root {
        // SAFETY: `n` entries each by the MPI contract.
        let (rc, rd) = unsafe {
            (
                counts(comm, rcounts, n, "recvcounts")?,
                displs(comm, rdispls, n, "displs")?,
            )
        };
        let base = datatype::typed(comm, recvbuf, 0, rtype)?;
        let m = me as usize;
        let own = base.at(rd[m], rc[m]);
        let (send, sendlen) = if is_in_place(sendbuf) {
            (Some(st.copy(&own)), own.bytes())
        } else {
            let t = datatype::typed(comm, sendbuf, scount, stype)?;
            for (&d, &c) in rd.iter().zip(&rc) {
                disjoint(comm, &t, &base.at(d, c))?;
            }
            (Some(st.input(&t)), t.bytes())
        };
        let (recv, counts, displs) = st.blocks(&base, &rc, &rd, true);
        CollCall::Gatherv {
            send,
            sendlen,
            recv,
            counts,
            displs,
            root,
        }
    } else {
        if is_in_place(sendbuf) {
            return Err(in_place_misuse(comm, "sendbuf of a non-root rank"));
        }
        let t = datatype::typed(comm, sendbuf, scount, stype)?;
        CollCall::Gatherv {
            send: Some(st.input(&t)),
            sendlen: t.bytes(),
            recv: std::ptr::null_mut(),
            counts: vec![0; n as usize],
            displs: vec![0; n as usize],
            root,
        }
    };
    run(s, comm, id, c, st, req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs_: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Gatherv", |s| {
        gatherv(
            s,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcounts,
            displs_,
            recvtype,
            root,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Igatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs_: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Igatherv", |s| {
        out_req(comm, request, true)?;
        gatherv(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs_, recvtype, root, comm,
            request,
        )
    })
}

pub(crate) fn scatter(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::scatter(
            s, sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, id, req,
        );
    }
    let (n, me) = size_of(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let mut differ = None;
    let c = if me == root {
        let whole = region(comm, sendbuf, scount, n, stype)?;
        let len = whole.layout.size * scount.max(0) as usize;
        let send = st.input(&whole);
        let recv = if is_in_place(recvbuf) {
            None
        } else {
            let t = datatype::typed(comm, recvbuf, rcount, rtype)?;
            disjoint(comm, &whole, &t)?;
            let (p, d) = st.output_as(&t, len);
            differ = d.then_some((len, t.bytes()));
            Some(p)
        };
        CollCall::Scatter {
            send,
            recv,
            len,
            root,
        }
    } else {
        if is_in_place(recvbuf) {
            return Err(in_place_misuse(comm, "recvbuf of a non-root rank"));
        }
        let t = datatype::typed(comm, recvbuf, rcount, rtype)?;
        CollCall::Scatter {
            send: std::ptr::null(),
            recv: Some(st.output(&t)),
            len: t.bytes(),
            root,
        }
    };
    run_then_report(s, comm, id, c, st, req, differ)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Scatter", |s| {
        scatter(
            s,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            root,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iscatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iscatter", |s| {
        out_req(comm, request, true)?;
        scatter(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
        )
    })
}

pub(crate) fn scatterv(
    s: &mut State,
    sendbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::scatterv(
            s, sendbuf, scounts, sdispls, stype, recvbuf, rcount, rtype, root, comm, id, req,
        );
    }
    let (n, me) = size_of(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let c = if me == root {
        // SAFETY: `n` entries each by the MPI contract.
        let (sc, sd) = unsafe {
            (
                counts(comm, scounts, n, "sendcounts")?,
                displs(comm, sdispls, n, "displs")?,
            )
        };
        let base = datatype::typed(comm, sendbuf, 0, stype)?;
        let (send, counts, displs) = st.blocks(&base, &sc, &sd, false);
        let (recv, recvlen) = if is_in_place(recvbuf) {
            (None, 0)
        } else {
            let t = datatype::typed(comm, recvbuf, rcount, rtype)?;
            for (&d, &c) in sd.iter().zip(&sc) {
                disjoint(comm, &base.at(d, c), &t)?;
            }
            (Some(st.output(&t)), t.bytes())
        };
        CollCall::Scatterv {
            send,
            counts,
            displs,
            recv,
            recvlen,
            root,
        }
    } else {
        if is_in_place(recvbuf) {
            return Err(in_place_misuse(comm, "recvbuf of a non-root rank"));
        }
        let t = datatype::typed(comm, recvbuf, rcount, rtype)?;
        CollCall::Scatterv {
            send: std::ptr::null(),
            counts: vec![0; n as usize],
            displs: vec![0; n as usize],
            recv: Some(st.output(&t)),
            recvlen: t.bytes(),
            root,
        }
    };
    run(s, comm, id, c, st, req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs_: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Scatterv", |s| {
        scatterv(
            s,
            sendbuf,
            sendcounts,
            displs_,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            root,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iscatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs_: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iscatterv", |s| {
        out_req(comm, request, true)?;
        scatterv(
            s, sendbuf, sendcounts, displs_, sendtype, recvbuf, recvcount, recvtype, root, comm,
            request,
        )
    })
}

// --------------------------------------------------------------- allgather

pub(crate) fn allgather(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::allgather(
            s, sendbuf, scount, stype, recvbuf, rcount, rtype, comm, id, req,
        );
    }
    let (n, me) = size_of(s, comm, id)?;
    let mut st = Stage::default();
    let whole = region(comm, recvbuf, rcount, n, rtype)?;
    let len = whole.layout.size * rcount.max(0) as usize;
    let mut differ = None;
    let send = if is_in_place(sendbuf) {
        st.in_place(&whole.block(me as usize, rcount as usize))
    } else {
        let t = datatype::typed(comm, sendbuf, scount, stype)?;
        disjoint(comm, &t, &whole)?;
        let (p, d) = st.input_as(&t, len);
        differ = d.then_some((t.bytes(), len));
        Some(p)
    };
    let recv = st.output(&whole);
    run_then_report(
        s,
        comm,
        id,
        CollCall::Allgather { send, recv, len },
        st,
        req,
        differ,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Allgather", |s| {
        allgather(
            s,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iallgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iallgather", |s| {
        out_req(comm, request, true)?;
        allgather(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
        )
    })
}

pub(crate) fn allgatherv(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::allgatherv(
            s, sendbuf, scount, stype, recvbuf, rcounts, rdispls, rtype, comm, id, req,
        );
    }
    let (n, me) = size_of(s, comm, id)?;
    // SAFETY: `n` entries each by the MPI contract.
    let (rc, rd) = unsafe {
        (
            counts(comm, rcounts, n, "recvcounts")?,
            displs(comm, rdispls, n, "displs")?,
        )
    };
    let base = datatype::typed(comm, recvbuf, 0, rtype)?;
    let mut st = Stage::default();
    let m = me as usize;
    let send = if is_in_place(sendbuf) {
        Some(st.copy(&base.at(rd[m], rc[m])))
    } else {
        let t = datatype::typed(comm, sendbuf, scount, stype)?;
        for (&d, &c) in rd.iter().zip(&rc) {
            disjoint(comm, &t, &base.at(d, c))?;
        }
        Some(st.input(&t))
    };
    let (recv, counts, displs) = st.blocks(&base, &rc, &rd, true);
    run(
        s,
        comm,
        id,
        CollCall::Allgatherv {
            send,
            recv,
            counts,
            displs,
        },
        st,
        req,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs_: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Allgatherv", |s| {
        allgatherv(
            s,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcounts,
            displs_,
            recvtype,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iallgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs_: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Iallgatherv", |s| {
        out_req(comm, request, true)?;
        allgatherv(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs_, recvtype, comm, request,
        )
    })
}

// ---------------------------------------------------------------- alltoall

pub(crate) fn alltoall(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::alltoall(
            s, sendbuf, scount, stype, recvbuf, rcount, rtype, comm, id, req,
        );
    }
    let (n, _) = size_of(s, comm, id)?;
    let mut st = Stage::default();
    let whole = region(comm, recvbuf, rcount, n, rtype)?;
    let len = whole.layout.size * rcount.max(0) as usize;
    let mut differ = None;
    let send = if is_in_place(sendbuf) {
        st.in_place(&whole)
    } else {
        let t = region(comm, sendbuf, scount, n, stype)?;
        disjoint(comm, &t, &whole)?;
        // The n blocks are sent as n blocks of `len` bytes.
        let sblock = t.layout.size * scount.max(0) as usize;
        if sblock == len {
            Some(st.input(&t))
        } else {
            differ = Some((sblock, len));
            // SAFETY: the buffer is valid for reads as described (MPI contract).
            let packed = unsafe { t.pack() };
            let mut v = vec![0u8; n as usize * len];
            for (dst, src) in v.chunks_mut(len.max(1)).zip(packed.chunks(sblock.max(1))) {
                let k = dst.len().min(src.len());
                dst[..k].copy_from_slice(&src[..k]);
            }
            Some(st.hold(v).1.cast_const())
        }
    };
    let recv = st.output(&whole);
    run_then_report(
        s,
        comm,
        id,
        CollCall::Alltoall { send, recv, len },
        st,
        req,
        differ,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Alltoall", |s| {
        alltoall(
            s,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ialltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ialltoall", |s| {
        out_req(comm, request, true)?;
        alltoall(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
        )
    })
}

pub(crate) fn alltoallv(
    s: &mut State,
    sendbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::alltoallv(
            s, sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype, comm, id, req,
        );
    }
    let (n, _) = size_of(s, comm, id)?;
    // SAFETY: `n` entries each by the MPI contract.
    let (rc, rd) = unsafe {
        (
            counts(comm, rcounts, n, "recvcounts")?,
            displs(comm, rdispls, n, "rdispls")?,
        )
    };
    not_aliased(comm, sendbuf, recvbuf, rc.iter().any(|&c| c > 0))?;
    let rbase = datatype::typed(comm, recvbuf, 0, rtype)?;
    let mut st = Stage::default();
    let (send, sc, sd) = if is_in_place(sendbuf) {
        // A packed copy of the receive blocks is what gets sent.
        st.blocks_copy(&rbase, &rc, &rd)
    } else {
        // SAFETY: `n` entries each by the MPI contract.
        let (scv, sdv) = unsafe {
            (
                counts(comm, scounts, n, "sendcounts")?,
                displs(comm, sdispls, n, "sdispls")?,
            )
        };
        let sbase = datatype::typed(comm, sendbuf, 0, stype)?;
        st.blocks(&sbase, &scv, &sdv, false)
    };
    let send = send as *const u8;
    let (recv, rcb, rdb) = st.blocks(&rbase, &rc, &rd, true);
    let c = CollCall::Alltoallv {
        send: Some(send),
        scounts: sc,
        sdispls: sd,
        recv,
        rcounts: rcb,
        rdispls: rdb,
    };
    run(s, comm, id, c, st, req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Alltoallv", |s| {
        alltoallv(
            s,
            sendbuf,
            sendcounts,
            sdispls,
            sendtype,
            recvbuf,
            recvcounts,
            rdispls,
            recvtype,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ialltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ialltoallv", |s| {
        out_req(comm, request, true)?;
        alltoallv(
            s, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
            comm, request,
        )
    })
}

/// What a collective does with a set of per-block typed buffers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockUse {
    /// Sends from them (from the user's memory when every block is contiguous).
    Read,
    /// Receives into them (staged and unpacked at the end unless contiguous).
    Write,
    /// Sends a packed copy of them, always: what an `MPI_IN_PLACE` call
    /// sends, since its blocks are received into meanwhile.
    Snapshot,
}

/// A `w` collective's side: buffer, counts, byte displacements, datatypes.
pub(crate) type WSide = (
    *const c_void,
    *const c_int,
    *const c_int,
    *const MPI_Datatype,
);

/// Per-block datatypes at byte displacements (see [`Stage::typed_blocks`]).
///
/// # Safety
/// The arrays hold `n` entries; the buffer holds every block (MPI contract).
pub(crate) unsafe fn w_blocks(
    comm: MPI_Comm,
    st: &mut Stage,
    (buf, counts_, displs_, types): WSide,
    n: u32,
    used: BlockUse,
) -> Result<(*mut u8, Vec<usize>, Vec<usize>), Fail> {
    // SAFETY: the caller's promise.
    let (c, d) = unsafe {
        (
            counts(comm, counts_, n, "counts")?,
            displs(comm, displs_, n, "displs")?,
        )
    };
    if n > 0 && types.is_null() {
        return Err(Fail::new(comm, ErrorClass::Arg, "NULL datatypes array"));
    }
    let mut blocks = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        // SAFETY: the caller's promise.
        let dt = unsafe { *types.add(i) };
        let base = (buf as *mut u8).wrapping_offset(d[i]);
        blocks.push(datatype::typed(comm, base.cast(), c[i] as c_int, dt)?);
    }
    Ok(st.typed_blocks(blocks, used))
}

pub(crate) fn alltoallw(
    s: &mut State,
    sendbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if intercomm::is_inter(s, id) {
        return intercomm::alltoallw(
            s, sendbuf, scounts, sdispls, stypes, recvbuf, rcounts, rdispls, rtypes, comm, id, req,
        );
    }
    let (n, _) = size_of(s, comm, id)?;
    // SAFETY: `n` entries by the MPI contract.
    let rc = unsafe { counts(comm, rcounts, n, "recvcounts")? };
    not_aliased(comm, sendbuf, recvbuf, rc.iter().any(|&c| c > 0))?;
    let mut st = Stage::default();
    let recv_side: WSide = (recvbuf.cast_const(), rcounts, rdispls, rtypes);
    // A packed copy of the receive blocks is what an in-place call sends:
    // with contiguous types the blocks would otherwise be sent from the
    // memory they are received into.
    let (send_side, used) = if is_in_place(sendbuf) {
        (recv_side, BlockUse::Snapshot)
    } else {
        ((sendbuf, scounts, sdispls, stypes), BlockUse::Read)
    };
    // SAFETY: the MPI contract for both sides' arrays and buffers.
    let (send, sc, sd) = unsafe { w_blocks(comm, &mut st, send_side, n, used)? };
    // SAFETY: as above.
    let (recv, rc, rd) = unsafe { w_blocks(comm, &mut st, recv_side, n, BlockUse::Write)? };
    let c = CollCall::Alltoallv {
        send: Some(send),
        scounts: sc,
        sdispls: sd,
        recv,
        rcounts: rc,
        rdispls: rd,
    };
    run(s, comm, id, c, st, req)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Alltoallw", |s| {
        alltoallw(
            s,
            sendbuf,
            sendcounts,
            sdispls,
            sendtypes,
            recvbuf,
            recvcounts,
            rdispls,
            recvtypes,
            comm,
            std::ptr::null_mut(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ialltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    call("MPI_Ialltoallw", |s| {
        out_req(comm, request, true)?;
        alltoallw(
            s, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
            comm, request,
        )
    })
}

//! Intercommunicators at the C boundary: `MPI_Intercomm_create`,
//! `MPI_Intercomm_merge`, `MPI_Comm_remote_size`, `MPI_Comm_remote_group`,
//! and the collectives Tandem runs on them (barrier, bcast, reduce,
//! allreduce, gather(v), scatter(v), allgather(v), alltoall(v, w), blocking
//! and non-blocking; coll.rs sends them here and runs
//! reduce_scatter(_block) itself). Root
//! arguments follow the standard: `MPI_ROOT` at the root,
//! `MPI_PROC_NULL` at the other ranks of its group, the root's rank in the
//! remote group at the ranks of the other group. `MPI_IN_PLACE` has no
//! meaning on an intercommunicator and is refused.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use tandem::coll::inter::InterCall;
use tandem::intercomm::InterRoot;
use tandem::{CommId, Error, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::coll::{
    counts, displs, in_place_misuse, is_in_place, region, w_blocks, BlockUse, Stage,
};
use crate::comm::register;
use crate::comm_shape;
use crate::datatype;
use crate::ext::CommExt;
use crate::group;
use crate::ops;
use crate::state::{call, Fail, Outcome, State};

fn fail(comm: MPI_Comm) -> impl Fn(Error) -> Fail {
    move |error| Fail { comm, error }
}

/// Whether `id` is an intercommunicator.
pub fn is_inter(s: &State, id: CommId) -> bool {
    s.rt.comm(id).is_ok_and(|c| c.is_inter())
}

/// The remote group of intercommunicator `comm`.
fn remote(s: &State, comm: MPI_Comm) -> Result<std::sync::Arc<[u32]>, Fail> {
    let id = args::comm(s, comm)?;
    let c = s.rt.comm(id).map_err(fail(comm))?;
    match &c.inter {
        Some(i) => Ok(i.remote.clone()),
        None => Err(Fail::new(
            comm,
            ErrorClass::Comm,
            "not an intercommunicator",
        )),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Intercomm_create(
    local_comm: MPI_Comm,
    local_leader: c_int,
    peer_comm: MPI_Comm,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Intercomm_create", |s| {
        args::out_ptr(local_comm, newintercomm, "newintercomm")?;
        let id = args::comm(s, local_comm)?;
        let c = s.rt.comm(id).map_err(fail(local_comm))?;
        let (me, n) = (c.rank, c.size());
        let leader = u32::try_from(local_leader)
            .ok()
            .filter(|&l| l < n)
            .ok_or_else(|| args::rank_error(local_comm, local_leader, n))?;
        // The peer communicator, remote leader and tag matter at the local
        // leader only; its errors go to its group through the core, so
        // that nobody waits for it.
        let peer = (me == leader).then(|| {
            let pc = args::comm(s, peer_comm).map_err(|f| f.error)?;
            let rl = u32::try_from(remote_leader).map_err(|_| {
                Error::new(
                    ErrorClass::Rank,
                    format!("remote leader {remote_leader} is not a rank"),
                )
            })?;
            let tag = args::send_tag(peer_comm, tag).map_err(|f| f.error)?;
            Ok((pc, rl, tag))
        });
        let new =
            s.rt.intercomm_create(id, leader, peer)
                .map_err(fail(local_comm))?;
        let h = register(s, id, Some(new), CommExt::default());
        // SAFETY: checked non-null.
        unsafe { put(newintercomm, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Intercomm_merge(
    intercomm: MPI_Comm,
    high: c_int,
    newintracomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Intercomm_merge", |s| {
        args::out_ptr(intercomm, newintracomm, "newintracomm")?;
        let id = args::comm(s, intercomm)?;
        let new =
            s.rt.intercomm_merge(id, high != 0)
                .map_err(fail(intercomm))?;
        let h = register(s, id, Some(new), CommExt::default());
        // SAFETY: checked non-null.
        unsafe { put(newintracomm, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_remote_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    let answer = move |n: usize| {
        args::out_ptr(comm, size, "size")?;
        // SAFETY: checked non-null.
        unsafe { put(size, n as c_int) };
        Ok(())
    };
    comm_shape::query(
        "MPI_Comm_remote_size",
        comm,
        |shape| match shape.remote_size {
            Some(n) => answer(n as usize),
            None => Err(Fail::new(
                comm,
                ErrorClass::Comm,
                "not an intercommunicator",
            )),
        },
        |s| answer(remote(s, comm)?.len()),
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_remote_group(comm: MPI_Comm, group_: *mut MPI_Group) -> c_int {
    call("MPI_Comm_remote_group", |s| {
        args::out_ptr(comm, group_, "group")?;
        let g = remote(s, comm)?;
        let h = group::add(s, g);
        // SAFETY: checked non-null.
        unsafe { put(group_, h) };
        Ok(())
    })
}

// ------------------------------------------------------------ collectives

/// Starts `call`, the non-blocking form of a collective (`req` non-null),
/// with the staging `st` unpacked when it completes; or, when `req` is
/// null, run to completion (blocking and non-blocking calls share one
/// schedule per operation, coll/inter.rs).
pub(crate) fn start(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    call: InterCall,
    st: Stage,
    req: *mut MPI_Request,
) -> Outcome {
    // Blocking and non-blocking collectives are numbered apart.
    let started = if req.is_null() {
        // SAFETY: user buffers stay valid for the call (MPI contract); the
        // staging buffers stay in `st`, kept here until the wait.
        unsafe { s.rt.inter_coll_start(id, call) }
    } else {
        // SAFETY: user buffers stay valid until the request completes (MPI
        // contract); the staging buffers move into the request.
        unsafe { s.rt.inter_icoll_start(id, call) }
    };
    let sid = started.map_err(fail(comm))?;
    crate::coll::complete_or_hand_out(s, comm, sid, st, req)
}

/// `MPI_Barrier` (blocking when `req` is null) on an intercommunicator.
pub fn barrier(s: &mut State, comm: MPI_Comm, id: CommId, req: *mut MPI_Request) -> Outcome {
    start(s, comm, id, InterCall::Barrier, Stage::default(), req)
}

/// The size of the remote group of intercommunicator `id`.
fn remote_size(s: &State, comm: MPI_Comm, id: CommId) -> Result<u32, Fail> {
    Ok(s.rt.comm(id).map_err(fail(comm))?.peer_count())
}

/// A root argument on an intercommunicator of `remote_n` remote ranks.
fn root_arg(comm: MPI_Comm, root: c_int, remote_n: u32) -> Result<InterRoot, Fail> {
    match root {
        MPI_ROOT => Ok(InterRoot::Me),
        MPI_PROC_NULL => Ok(InterRoot::Idle),
        r if r >= 0 && (r as u32) < remote_n => Ok(InterRoot::Remote(r as u32)),
        r => Err(Fail::new(
            comm,
            ErrorClass::Root,
            format!(
                "root {r} on an intercommunicator is none of MPI_ROOT, MPI_PROC_NULL or a \
                 remote rank in 0..{remote_n}"
            ),
        )),
    }
}

fn no_in_place(comm: MPI_Comm, p: *const c_void, what: &str) -> Outcome {
    if is_in_place(p) {
        Err(in_place_misuse(comm, what))
    } else {
        Ok(())
    }
}

pub fn bcast(
    s: &mut State,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let root = root_arg(comm, root, remote_size(s, comm, id)?)?;
    let mut st = Stage::default();
    let (p, len) = match root {
        InterRoot::Idle => (std::ptr::null_mut(), 0),
        InterRoot::Me => {
            let t = datatype::typed(comm, buf, count, dt)?;
            (st.input(&t) as *mut u8, t.bytes())
        }
        InterRoot::Remote(_) => {
            let t = datatype::typed(comm, buf, count, dt)?;
            (st.output(&t), t.bytes())
        }
    };
    let call = InterCall::Bcast { buf: p, len, root };
    start(s, comm, id, call, st, req)
}

/// `MPI_Reduce` (`root` given) or `MPI_Allreduce` on an intercommunicator.
pub fn reduction(
    s: &mut State,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: Option<c_int>,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let root = match root {
        Some(r) => Some(root_arg(comm, r, remote_size(s, comm, id)?)?),
        None => None,
    };
    if root == Some(InterRoot::Idle) {
        // Nothing moves here, but the collective counts on every member
        // (its messages' tags follow the count).
        let call = InterCall::Bcast {
            buf: std::ptr::null_mut(),
            len: 0,
            root: InterRoot::Idle,
        };
        return start(s, comm, id, call, Stage::default(), req);
    }
    let layout = datatype::layout(comm, dt)?;
    let r = ops::reducer(s, comm, op, dt, &layout)?;
    let mut st = Stage::default();
    let sends = root != Some(InterRoot::Me);
    let receives = root.is_none() || root == Some(InterRoot::Me);
    let (send, len) = if sends {
        no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
        let t = datatype::typed(comm, sendbuf, count, dt)?;
        (st.input(&t), t.bytes())
    } else {
        (std::ptr::null(), 0)
    };
    let (recv, rlen) = if receives {
        let t = datatype::typed(comm, recvbuf, count, dt)?;
        (st.output(&t), t.bytes())
    } else {
        (std::ptr::null_mut(), 0)
    };
    let call = match root {
        None => InterCall::Allreduce {
            send,
            recv,
            len,
            op: r,
        },
        Some(InterRoot::Me) => InterCall::Reduce {
            send,
            recv,
            len: rlen,
            op: r,
            root: InterRoot::Me,
        },
        Some(root) => InterCall::Reduce {
            send,
            recv,
            len,
            op: r,
            root,
        },
    };
    start(s, comm, id, call, st, req)
}

pub fn gather(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let (send, recv, len) = match root {
        InterRoot::Idle => (std::ptr::null(), std::ptr::null_mut(), 0),
        InterRoot::Me => {
            no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
            let whole = region(comm, recvbuf, rcount, n, rtype)?;
            let len = whole.layout.size * rcount.max(0) as usize;
            (std::ptr::null(), st.output(&whole), len)
        }
        InterRoot::Remote(_) => {
            no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
            let t = datatype::typed(comm, sendbuf, scount, stype)?;
            (st.input(&t), std::ptr::null_mut(), t.bytes())
        }
    };
    let call = InterCall::Gather {
        send,
        recv,
        len,
        root,
    };
    start(s, comm, id, call, st, req)
}

pub fn scatter(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let (send, recv, len) = match root {
        InterRoot::Idle => (std::ptr::null(), std::ptr::null_mut(), 0),
        InterRoot::Me => {
            no_in_place(comm, recvbuf, "recvbuf on an intercommunicator")?;
            let whole = region(comm, sendbuf, scount, n, stype)?;
            let len = whole.layout.size * scount.max(0) as usize;
            (st.input(&whole), std::ptr::null_mut(), len)
        }
        InterRoot::Remote(_) => {
            no_in_place(comm, recvbuf, "recvbuf on an intercommunicator")?;
            let t = datatype::typed(comm, recvbuf, rcount, rtype)?;
            (std::ptr::null(), st.output(&t), t.bytes())
        }
    };
    let call = InterCall::Scatter {
        send,
        recv,
        len,
        root,
    };
    start(s, comm, id, call, st, req)
}

pub fn allgather(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
    let mut st = Stage::default();
    let t = datatype::typed(comm, sendbuf, scount, stype)?;
    let whole = region(comm, recvbuf, rcount, n, rtype)?;
    let rlen = whole.layout.size * rcount.max(0) as usize;
    let send = st.input(&t);
    let recv = st.output(&whole);
    let call = InterCall::Allgather {
        send,
        send_len: t.bytes(),
        recv,
        recv_len: rlen,
    };
    start(s, comm, id, call, st, req)
}

pub fn alltoall(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
    let mut st = Stage::default();
    let swhole = region(comm, sendbuf, scount, n, stype)?;
    let slen = swhole.layout.size * scount.max(0) as usize;
    let rwhole = region(comm, recvbuf, rcount, n, rtype)?;
    let rlen = rwhole.layout.size * rcount.max(0) as usize;
    let send = st.input(&swhole);
    let recv = st.output(&rwhole);
    let call = InterCall::Alltoall {
        send,
        send_len: slen,
        recv,
        recv_len: rlen,
    };
    start(s, comm, id, call, st, req)
}

/// Where a v-variant's blocks are: (remote rank, address, bytes) each.
type Blocks<P> = Vec<(u32, P, usize)>;

/// `n` blocks of `base`'s datatype (counts and displacements read from
/// the C arrays), packed or in place; `write` for receive blocks.
///
/// # Safety
/// `cnts` and `disps` must be valid for `n` reads.
unsafe fn v_blocks(
    st: &mut Stage,
    comm: MPI_Comm,
    buf: *const c_void,
    cnts: *const c_int,
    disps: *const c_int,
    dt: MPI_Datatype,
    n: u32,
    write: bool,
) -> Result<Blocks<*mut u8>, Fail> {
    // SAFETY: the caller's promise.
    let (c, d) = unsafe {
        (
            counts(comm, cnts, n, "counts")?,
            displs(comm, disps, n, "displs")?,
        )
    };
    let base = datatype::typed(comm, buf, 0, dt)?;
    let (p, bytes, offs) = st.blocks(&base, &c, &d, write);
    Ok((0..n)
        .map(|j| (j, p.wrapping_add(offs[j as usize]), bytes[j as usize]))
        .collect())
}

fn sends_of(b: Blocks<*mut u8>) -> Blocks<*const u8> {
    b.into_iter()
        .map(|(j, p, n)| (j, p as *const u8, n))
        .collect()
}

/// Runs the messages of a v-variant (blocking when `req` is null) and
/// unpacks what was staged.
fn pairwise(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    st: Stage,
    sends: &[(u32, *const u8, usize)],
    recvs: &[(u32, *mut u8, usize)],
    req: *mut MPI_Request,
) -> Outcome {
    let call = InterCall::Pairwise {
        sends: sends.to_vec(),
        recvs: recvs.to_vec(),
    };
    start(s, comm, id, call, st, req)
}

pub fn gatherv(
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
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let (sends, recvs) = match root {
        InterRoot::Idle => (vec![], vec![]),
        InterRoot::Me => {
            no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
            // SAFETY: `n` entries each by the MPI contract.
            let r = unsafe { v_blocks(&mut st, comm, recvbuf, rcounts, rdispls, rtype, n, true)? };
            (vec![], r)
        }
        InterRoot::Remote(r) => {
            no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
            let t = datatype::typed(comm, sendbuf, scount, stype)?;
            (vec![(r, st.input(&t), t.bytes())], vec![])
        }
    };
    pairwise(s, comm, id, st, &sends, &recvs, req)
}

pub fn scatterv(
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
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    let root = root_arg(comm, root, n)?;
    let mut st = Stage::default();
    let (sends, recvs) = match root {
        InterRoot::Idle => (vec![], vec![]),
        InterRoot::Me => {
            no_in_place(comm, recvbuf, "recvbuf on an intercommunicator")?;
            // SAFETY: `n` entries each by the MPI contract.
            let b = unsafe { v_blocks(&mut st, comm, sendbuf, scounts, sdispls, stype, n, false)? };
            (sends_of(b), vec![])
        }
        InterRoot::Remote(r) => {
            no_in_place(comm, recvbuf, "recvbuf on an intercommunicator")?;
            let t = datatype::typed(comm, recvbuf, rcount, rtype)?;
            (vec![], vec![(r, st.output(&t), t.bytes())])
        }
    };
    pairwise(s, comm, id, st, &sends, &recvs, req)
}

pub fn allgatherv(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
    let mut st = Stage::default();
    let t = datatype::typed(comm, sendbuf, scount, stype)?;
    let p = st.input(&t);
    let sends: Vec<_> = (0..n).map(|j| (j, p, t.bytes())).collect();
    // SAFETY: `n` entries each by the MPI contract.
    let recvs = unsafe { v_blocks(&mut st, comm, recvbuf, rcounts, rdispls, rtype, n, true)? };
    pairwise(s, comm, id, st, &sends, &recvs, req)
}

pub fn alltoallv(
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
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
    let mut st = Stage::default();
    // SAFETY: `n` entries each by the MPI contract.
    let sends = unsafe { v_blocks(&mut st, comm, sendbuf, scounts, sdispls, stype, n, false)? };
    // SAFETY: as above.
    let recvs = unsafe { v_blocks(&mut st, comm, recvbuf, rcounts, rdispls, rtype, n, true)? };
    pairwise(s, comm, id, st, &sends_of(sends), &recvs, req)
}

pub fn alltoallw(
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
    id: CommId,
    req: *mut MPI_Request,
) -> Outcome {
    let n = remote_size(s, comm, id)?;
    no_in_place(comm, sendbuf, "sendbuf on an intercommunicator")?;
    let mut st = Stage::default();
    let send_side = (sendbuf, scounts, sdispls, stypes);
    let recv_side = (recvbuf.cast_const(), rcounts, rdispls, rtypes);
    // SAFETY: the MPI contract for both sides' arrays and buffers.
    let (send, sc, sd) = unsafe { w_blocks(comm, &mut st, send_side, n, BlockUse::Read)? };
    // SAFETY: as above.
    let (recv, rc, rd) = unsafe { w_blocks(comm, &mut st, recv_side, n, BlockUse::Write)? };
    let sends: Vec<_> = (0..n as usize)
        .map(|j| (j as u32, send.wrapping_add(sd[j]) as *const u8, sc[j]))
        .collect();
    let recvs: Vec<_> = (0..n as usize)
        .map(|j| (j as u32, recv.wrapping_add(rd[j]), rc[j]))
        .collect();
    pairwise(s, comm, id, st, &sends, &recvs, req)
}

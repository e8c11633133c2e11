//! Neighbourhood collectives over Cartesian and distributed-graph
//! topologies: `MPI_Neighbor_allgather`, `_allgatherv`, `_alltoall`,
//! `_alltoallv`, `_alltoallw`, their non-blocking (`MPI_Ineighbor_*`) and
//! persistent (`MPI_Neighbor_*_init`) forms. Each neighbour has a slot in
//! the buffers (topo.rs says which); slots of `MPI_PROC_NULL` neighbours
//! are neither sent nor written.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use tandem::coll::CollCall;
use tandem::ErrorClass;

use crate::abi::*;
use crate::args;
use crate::coll::{counts, displs, run, BlockUse, Stage};
use crate::datatype::{self, Typed};
use crate::persistent_coll::init;
use crate::state::{call, Fail, State};
use crate::topo::neighbourhood;

/// What each send slot holds.
enum Sends {
    /// The same buffer for every slot (allgather's).
    Same(Typed),
    /// A block per slot, indexed by slot.
    PerSlot(Vec<Typed>),
}

/// Runs a neighbourhood exchange (blocking when `req` is null): `send` and
/// `recv` give each slot's block, from the number of slots.
fn exchange(
    s: &mut State,
    comm: MPI_Comm,
    send: impl FnOnce(usize) -> Result<Sends, Fail>,
    recv: impl FnOnce(usize) -> Result<Vec<Typed>, Fail>,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    let (rslots, sslots, nin, nout) = neighbourhood(s, comm, id)?;
    let mut st = Stage::default();
    let b = recv(nin)?;
    let (recv, rcounts, rdispls) = st.typed_blocks(
        rslots.iter().map(|&(_, k)| b[k].clone()).collect(),
        BlockUse::Write,
    );
    let (send, scounts, sdispls) = match send(nout)? {
        Sends::Same(t) => {
            let p = st.input(&t) as *mut u8;
            (p, vec![t.bytes(); sslots.len()], vec![0; sslots.len()])
        }
        Sends::PerSlot(b) => st.typed_blocks(
            sslots.iter().map(|&(_, k)| b[k].clone()).collect(),
            BlockUse::Read,
        ),
    };
    let c = CollCall::Neighbor {
        sources: rslots.iter().map(|x| x.0).collect(),
        recv,
        rcounts,
        rdispls,
        dests: sslots.iter().map(|x| x.0).collect(),
        send,
        scounts,
        sdispls,
    };
    run(s, comm, id, c, st, req)
}

/// `n` blocks of `count` elements, one after another from `buf`.
fn uniform(
    comm: MPI_Comm,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    n: usize,
) -> Result<Vec<Typed>, Fail> {
    let base = datatype::typed(comm, buf, count, dt)?;
    let c = base.count;
    Ok((0..n).map(|k| base.block(k, c)).collect())
}

/// `n` blocks at element displacements, as the `v` forms give them.
///
/// # Safety
/// `counts_` and `displs_` hold `n` entries (MPI contract).
unsafe fn varied(
    comm: MPI_Comm,
    buf: *const c_void,
    counts_: *const c_int,
    displs_: *const c_int,
    dt: MPI_Datatype,
    n: usize,
) -> Result<Vec<Typed>, Fail> {
    // SAFETY: the caller's promise.
    let (c, d) = unsafe {
        (
            counts(comm, counts_, n as u32, "counts")?,
            displs(comm, displs_, n as u32, "displs")?,
        )
    };
    let base = datatype::typed(comm, buf, 0, dt)?;
    Ok(c.iter().zip(&d).map(|(&c, &d)| base.at(d, c)).collect())
}

/// `n` blocks at byte displacements, each its own datatype (`w` forms).
///
/// # Safety
/// The arrays hold `n` entries (MPI contract).
unsafe fn typed_each(
    comm: MPI_Comm,
    buf: *const c_void,
    counts_: *const c_int,
    displs_: *const MPI_Aint,
    types: *const MPI_Datatype,
    n: usize,
) -> Result<Vec<Typed>, Fail> {
    // SAFETY: the caller's promise.
    let c = unsafe { counts(comm, counts_, n as u32, "counts")? };
    if n > 0 && (displs_.is_null() || types.is_null()) {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            "NULL displacements or datatypes array",
        ));
    }
    let mut blocks = Vec::with_capacity(n);
    for (k, &count) in c.iter().enumerate() {
        // SAFETY: the caller's promise.
        let (d, dt) = unsafe { (*displs_.add(k), *types.add(k)) };
        let at = (buf as *const u8).wrapping_offset(d);
        blocks.push(datatype::typed(comm, at.cast(), count as c_int, dt)?);
    }
    Ok(blocks)
}

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
    exchange(
        s,
        comm,
        |_| Ok(Sends::Same(datatype::typed(comm, sendbuf, scount, stype)?)),
        |n| uniform(comm, recvbuf, rcount, rtype, n),
        req,
    )
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
    exchange(
        s,
        comm,
        |_| Ok(Sends::Same(datatype::typed(comm, sendbuf, scount, stype)?)),
        // SAFETY: one entry per receive slot (MPI contract).
        |n| unsafe { varied(comm, recvbuf, rcounts, rdispls, rtype, n) },
        req,
    )
}

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
    exchange(
        s,
        comm,
        |n| uniform(comm, sendbuf, scount, stype, n).map(Sends::PerSlot),
        |n| uniform(comm, recvbuf, rcount, rtype, n),
        req,
    )
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
    exchange(
        s,
        comm,
        // SAFETY: one entry per send slot (MPI contract).
        |n| unsafe { varied(comm, sendbuf, scounts, sdispls, stype, n) }.map(Sends::PerSlot),
        // SAFETY: one entry per receive slot (MPI contract).
        |n| unsafe { varied(comm, recvbuf, rcounts, rdispls, rtype, n) },
        req,
    )
}

pub(crate) fn alltoallw(
    s: &mut State,
    sendbuf: *const c_void,
    scounts: *const c_int,
    sdispls: *const MPI_Aint,
    stypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const MPI_Aint,
    rtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
) -> Result<(), Fail> {
    exchange(
        s,
        comm,
        // SAFETY: one entry per send slot (MPI contract).
        |n| unsafe { typed_each(comm, sendbuf, scounts, sdispls, stypes, n) }.map(Sends::PerSlot),
        // SAFETY: one entry per receive slot (MPI contract).
        |n| unsafe { typed_each(comm, recvbuf, rcounts, rdispls, rtypes, n) },
        req,
    )
}

/// Defines the blocking, non-blocking and persistent entry points of one
/// neighbourhood collective from its arguments (the last its communicator).
macro_rules! neighbour_collective {
    ($($blocking:ident, $nonblocking:ident, $persistent:ident => $imp:ident ( $($arg:ident : $ty:ty),* ; $comm:ident );)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $blocking($($arg: $ty,)* $comm: MPI_Comm) -> c_int {
                call(stringify!($blocking), |s| $imp(s, $($arg,)* $comm, std::ptr::null_mut()))
            }

            #[no_mangle]
            pub unsafe extern "C" fn $nonblocking(
                $($arg: $ty,)*
                $comm: MPI_Comm,
                request: *mut MPI_Request,
            ) -> c_int {
                call(stringify!($nonblocking), |s| {
                    args::out_ptr($comm, request, "request")?;
                    $imp(s, $($arg,)* $comm, request)
                })
            }

            /// Started on its private duplicate of the communicator
            /// (persistent_coll.rs).
            #[no_mangle]
            pub unsafe extern "C" fn $persistent(
                $($arg: $ty,)*
                $comm: MPI_Comm,
                info: MPI_Info,
                request: *mut MPI_Request,
            ) -> c_int {
                init(stringify!($persistent), $comm, info, request, move |s, $comm, r| {
                    $imp(s, $($arg,)* $comm, r)
                })
            }

            // The profiling twins `PMPI_X` (see pmpi.rs, which makes those
            // of the functions written out by hand).
            const _: () = {
                #[export_name = concat!("P", stringify!($blocking))]
                unsafe extern "C" fn blocking($($arg: $ty,)* $comm: MPI_Comm) -> c_int {
                    // SAFETY: the same contract as the function it forwards to.
                    unsafe { $blocking($($arg,)* $comm) }
                }

                #[export_name = concat!("P", stringify!($nonblocking))]
                unsafe extern "C" fn nonblocking(
                    $($arg: $ty,)*
                    $comm: MPI_Comm,
                    request: *mut MPI_Request,
                ) -> c_int {
                    // SAFETY: the same contract as the function it forwards to.
                    unsafe { $nonblocking($($arg,)* $comm, request) }
                }

                #[export_name = concat!("P", stringify!($persistent))]
                unsafe extern "C" fn persistent(
                    $($arg: $ty,)*
                    $comm: MPI_Comm,
                    info: MPI_Info,
                    request: *mut MPI_Request,
                ) -> c_int {
                    // SAFETY: the same contract as the function it forwards to.
                    unsafe { $persistent($($arg,)* $comm, info, request) }
                }
            };
        )*
    };
}

neighbour_collective! {
    MPI_Neighbor_allgather, MPI_Ineighbor_allgather, MPI_Neighbor_allgather_init => allgather(
        sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
        recvcount: c_int, recvtype: MPI_Datatype; comm);
    MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv_init => allgatherv(
        sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
        recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype; comm);
    MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall_init => alltoall(
        sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
        recvcount: c_int, recvtype: MPI_Datatype; comm);
    MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv_init => alltoallv(
        sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype; comm);
    MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw_init => alltoallw(
        sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MPI_Aint,
        sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int,
        rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype; comm);
}

//! Persistent collectives (MPI-4): `MPI_Bcast_init` and the others. The
//! request keeps the call's arguments and a private duplicate of the
//! communicator, agreed on at the (collective) initialisation: members may
//! start different persistent collectives in different orders (MPI-4 only
//! orders the initialisations), and the private context keeps each one's
//! messages apart. Each `MPI_Start` begins the non-blocking form of the
//! collective on that context; completing it leaves the request inactive
//! until the next start or `MPI_Request_free`, which frees the context.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};
use std::rc::Rc;

use crate::abi::*;
use crate::args::{self, put};
use crate::coll::{self, RedKind};
use crate::comm::register_duplicate;
use crate::info;
use crate::persistent::Spec;
use crate::state::{call, Fail, Outcome, State};

/// Starts the collective once on the given (private) communicator: the
/// non-blocking form, whose request handle it writes to its last argument.
pub type Starter = Rc<dyn Fn(&mut State, MPI_Comm, *mut MPI_Request) -> Outcome>;

/// The persistent collectives that have no intercommunicator form.
const INTRA_ONLY: [&str; 2] = ["MPI_Scan_init", "MPI_Exscan_init"];

/// Creates the inactive persistent request of `func` on `comm`.
pub(crate) fn init(
    func: &'static str,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
    start: impl Fn(&mut State, MPI_Comm, *mut MPI_Request) -> Outcome + 'static,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, request, "request")?;
        // On intercommunicators the starts run the non-blocking
        // intercommunicator forms (on a private duplicate, itself an
        // intercommunicator); scans and neighbourhood collectives have
        // none, refused here rather than at every start.
        let id = if func.starts_with("MPI_Neighbor") || INTRA_ONLY.contains(&func) {
            args::intra_comm(s, comm)?
        } else {
            args::comm(s, comm)?
        };
        info::check_optional(s, info_)?;
        let new = s.rt.comm_dup(id).map_err(|error| Fail { comm, error })?;
        let private = register_duplicate(s, id, new);
        let h = s.ext.reqs.add_persistent(
            comm,
            Spec::Coll {
                start: Rc::new(start),
                private,
                kept: Vec::new(),
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

/// Gives persistent collective `request` the arrays its starts read (see
/// large_count.rs), to be freed with it.
pub(crate) fn keep_arrays(request: MPI_Request, arrays: Vec<Vec<c_int>>) {
    let mut arrays = Some(arrays);
    let _ = call("MPI_Request (large-count arrays)", |s| {
        let r = crate::request::classify(s, request)?;
        if let Some(Spec::Coll { kept, .. }) = s.ext.reqs.persistent_spec_mut(r) {
            kept.extend(arrays.take().unwrap_or_default());
        }
        Ok(())
    });
    // Not attached (no path leads here after a successful initialisation):
    // the request's starts still read them, so they must outlive it.
    if let Some(a) = arrays {
        std::mem::forget(a);
    }
}

/// Defines `MPI_X_init(args..., comm, info, request)`: the arguments of
/// the collective before its communicator (`; comm`), then what a start runs (where
/// `comm` is the private communicator).
macro_rules! persistent_collectives {
    ($($name:ident ( $($arg:ident : $ty:ty),* ; $comm:ident ) => |$s:ident, $req:ident| $body:expr;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name(
                $($arg: $ty,)*
                $comm: MPI_Comm,
                info: MPI_Info,
                request: *mut MPI_Request,
            ) -> c_int {
                init(stringify!($name), $comm, info, request, move |$s, $comm, $req| $body)
            }

            // The profiling twin `PMPI_X` (see pmpi.rs, which makes those of
            // the functions written out by hand).
            const _: () = {
                #[export_name = concat!("P", stringify!($name))]
                unsafe extern "C" fn profiling(
                    $($arg: $ty,)*
                    $comm: MPI_Comm,
                    info: MPI_Info,
                    request: *mut MPI_Request,
                ) -> c_int {
                    // SAFETY: the same contract as the function it forwards to.
                    unsafe { $name($($arg,)* $comm, info, request) }
                }
            };
        )*
    };
}

persistent_collectives! {
    MPI_Barrier_init(; comm) => |s, r| coll::barrier(s, comm, r);
    MPI_Bcast_init(buf: *mut c_void, count: c_int, dt: MPI_Datatype, root: c_int; comm)
        => |s, r| coll::bcast(s, buf, count, dt, root, comm, r);
    MPI_Reduce_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, dt: MPI_Datatype,
        op: MPI_Op, root: c_int; comm)
        => |s, r| coll::reduction(s, sendbuf, recvbuf, count, dt, op, RedKind::Reduce(root), comm, r);
    MPI_Allreduce_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, dt: MPI_Datatype,
        op: MPI_Op; comm)
        => |s, r| coll::reduction(s, sendbuf, recvbuf, count, dt, op, RedKind::Allreduce, comm, r);
    MPI_Scan_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, dt: MPI_Datatype,
        op: MPI_Op; comm)
        => |s, r| coll::reduction(s, sendbuf, recvbuf, count, dt, op, RedKind::Scan, comm, r);
    MPI_Exscan_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, dt: MPI_Datatype,
        op: MPI_Op; comm)
        => |s, r| coll::reduction(s, sendbuf, recvbuf, count, dt, op, RedKind::Exscan, comm, r);
    MPI_Reduce_scatter_init(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
        dt: MPI_Datatype, op: MPI_Op; comm)
        => |s, r| coll::reduce_scatter(s, sendbuf, recvbuf, Some(recvcounts), 0, dt, op, comm, r);
    MPI_Reduce_scatter_block_init(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int,
        dt: MPI_Datatype, op: MPI_Op; comm)
        => |s, r| coll::reduce_scatter(s, sendbuf, recvbuf, None, recvcount, dt, op, comm, r);
    MPI_Gather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int; comm)
        => |s, r| coll::gather(s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
    MPI_Gatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype,
        root: c_int; comm)
        => |s, r| coll::gatherv(s, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, r);
    MPI_Scatter_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int; comm)
        => |s, r| coll::scatter(s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
    MPI_Scatterv_init(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
        sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype,
        root: c_int; comm)
        => |s, r| coll::scatterv(s, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, r);
    MPI_Allgather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype; comm)
        => |s, r| coll::allgather(s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
    MPI_Allgatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype; comm)
        => |s, r| coll::allgatherv(s, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, r);
    MPI_Alltoall_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype; comm)
        => |s, r| coll::alltoall(s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, r);
    MPI_Alltoallv_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
        sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int,
        recvtype: MPI_Datatype; comm)
        => |s, r| coll::alltoallv(s, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, r);
    MPI_Alltoallw_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
        sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int,
        rdispls: *const c_int, recvtypes: *const MPI_Datatype; comm)
        => |s, r| coll::alltoallw(s, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, r);
}

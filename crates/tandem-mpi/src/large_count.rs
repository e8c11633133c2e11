//! The MPI-4 large-count (`_c`) forms of the calls whose int forms take
//! `int` counts and displacements. Each narrows its `MPI_Count` counts and
//! `MPI_Aint` displacements to what the int form takes and calls it, so
//! both share one implementation. The engine's messages, collectives
//! and windows count in `int` elements through these entry
//! points, so a count that does not fit fails with `MPI_ERR_COUNT` (a
//! displacement with `MPI_ERR_ARG`) instead of being truncated; arguments
//! the call ignores at this rank (a `sendcount` with `MPI_IN_PLACE`, a
//! root-only count elsewhere) are not checked. The forms whose results
//! can exceed `int` (`MPI_Get_count_c`, `MPI_Get_elements_c`,
//! `MPI_Type_size_c`, extents, `MPI_Pack_size_c`) live with their int
//! forms and report full 64-bit values. Point-to-point sends and receives
//! (`MPI_Send_c`, `_Ssend_c`, `_Rsend_c`, the `I` forms, `MPI_Recv_c`,
//! `MPI_Irecv_c`) call the 64-bit implementation in `pt2pt` instead: a
//! message of a predefined datatype may have any count there; one of a
//! derived datatype stops at `int` as here. The datatype constructors
//! and their decoding (`MPI_Type_vector_c` ... `MPI_Type_get_contents_c`)
//! take 64-bit counts in `datatype_ctor`.
//!
//! The wrappers were written mechanically from the declarations in
//! `include/mpi.h` (one per call, all alike): a new `_c` form follows the
//! same pattern.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use crate::abi::*;
use crate::args;
use crate::bsend::{MPI_Bsend, MPI_Ibsend};
use crate::coll::is_in_place;
use crate::comm::MPI_Comm_test_inter;
use crate::env::{MPI_Comm_rank, MPI_Comm_size};
use crate::intercomm::MPI_Comm_remote_size;
use crate::state::{call, call_local, Fail};
use crate::topo::{
    MPI_Cartdim_get, MPI_Dist_graph_neighbors_count, MPI_Graph_neighbors_count, MPI_Topo_test,
};
use crate::win::win_call;
use tandem::p2p::SendMode;
use tandem::ErrorClass;

use crate::coll::*;
use crate::datatype::*;
use crate::neighbor::*;
use crate::ops::*;
use crate::persistent::*;
use crate::persistent_coll::*;
use crate::pt2pt::{self, *};
use crate::win::*;

/// Where a failed narrowing is reported: the handler of the call's
/// communicator or window, or the default one.
enum Target {
    Comm(MPI_Comm),
    Win(MPI_Win),
    Local,
}

/// The context of one `_c` call: its name and where its errors go.
struct Cx {
    func: &'static str,
    target: Target,
}

/// The result of a narrowing step: `Err` holds the code of an error
/// already raised through the call's handler.
type Step<T> = Result<T, c_int>;

impl Cx {
    fn comm(func: &'static str, comm: MPI_Comm) -> Cx {
        Cx {
            func,
            target: Target::Comm(comm),
        }
    }

    fn win(func: &'static str, win: MPI_Win) -> Cx {
        Cx {
            func,
            target: Target::Win(win),
        }
    }

    fn local(func: &'static str) -> Cx {
        Cx {
            func,
            target: Target::Local,
        }
    }

    fn run(&self, body: impl FnOnce() -> Step<c_int>) -> c_int {
        body().unwrap_or_else(|code| code)
    }

    /// Raises `class` through the call's error handler; returns its code.
    fn raise(&self, class: ErrorClass, msg: String) -> c_int {
        match self.target {
            Target::Comm(comm) => call(self.func, |s| {
                args::comm(s, comm)?;
                Err(Fail::new(comm, class, msg))
            }),
            Target::Win(win) => win_call(self.func, win, |_| {
                Err(Fail::new(MPI_COMM_WORLD, class, msg))
            }),
            Target::Local => call_local(self.func, || Err(Fail::new(MPI_COMM_WORLD, class, msg))),
        }
    }

    fn count_error(&self, what: &str, v: i64) -> c_int {
        let msg = if v < 0 {
            format!("negative {what} {v}")
        } else {
            format!(
                "{what} {v} exceeds {}, the largest count this call moves",
                c_int::MAX
            )
        };
        self.raise(ErrorClass::Count, msg)
    }

    /// A scalar count as the int form takes it; `significant` says whether
    /// this rank uses it (asked only when it does not fit).
    fn scalar(
        &self,
        v: MPI_Count,
        what: &str,
        significant: impl FnOnce() -> Step<bool>,
    ) -> Step<c_int> {
        if let Ok(n) = c_int::try_from(v) {
            return Ok(n);
        }
        if !significant()? {
            return Ok(0);
        }
        Err(self.count_error(what, v))
    }

    /// `n` counts narrowed (`None` for a null array, left to the int form
    /// to report).
    fn counts(&self, p: *const MPI_Count, n: usize, what: &str) -> Step<Option<Vec<c_int>>> {
        if p.is_null() {
            return Ok(None);
        }
        (0..n)
            .map(|i| {
                // SAFETY: the array holds one count per peer (MPI contract).
                let v = unsafe { *p.add(i) };
                c_int::try_from(v).map_err(|_| self.count_error(&format!("{what}[{i}]"), v))
            })
            .collect::<Step<Vec<c_int>>>()
            .map(Some)
    }

    /// `n` displacements narrowed to the int form's.
    fn displs(&self, p: *const MPI_Aint, n: usize, what: &str) -> Step<Option<Vec<c_int>>> {
        if p.is_null() {
            return Ok(None);
        }
        (0..n)
            .map(|i| {
                // SAFETY: the array holds one displacement per peer (MPI contract).
                let v = unsafe { *p.add(i) };
                c_int::try_from(v).map_err(|_| {
                    self.raise(
                        ErrorClass::Arg,
                        format!(
                            "{what}[{i}] = {v} is beyond the int displacements this call takes"
                        ),
                    )
                })
            })
            .collect::<Step<Vec<c_int>>>()
            .map(Some)
    }

    /// The call's communicator, once checked (an invalid one raises here).
    fn valid_comm(&self) -> Step<MPI_Comm> {
        let Target::Comm(comm) = self.target else {
            return Ok(MPI_COMM_NULL);
        };
        match call(self.func, |s| args::comm(s, comm).map(|_| ())) {
            MPI_SUCCESS => Ok(comm),
            code => Err(code),
        }
    }

    fn is_inter(&self, comm: MPI_Comm) -> bool {
        let mut flag = 0;
        // SAFETY: a checked communicator and a local output.
        unsafe { MPI_Comm_test_inter(comm, &mut flag) };
        flag != 0
    }

    /// The number of peers a per-peer array covers: the remote group's size
    /// on an intercommunicator, the group's otherwise.
    fn peers(&self) -> Step<usize> {
        let comm = self.valid_comm()?;
        let mut n = 0;
        if self.is_inter(comm) {
            // SAFETY: a checked communicator and a local output.
            unsafe { MPI_Comm_remote_size(comm, &mut n) };
        } else {
            // SAFETY: as above.
            unsafe { MPI_Comm_size(comm, &mut n) };
        }
        Ok(n.max(0) as usize)
    }

    /// The size of the local group.
    fn local_size(&self) -> Step<usize> {
        let comm = self.valid_comm()?;
        let mut n = 0;
        // SAFETY: a checked communicator and a local output.
        unsafe { MPI_Comm_size(comm, &mut n) };
        Ok(n.max(0) as usize)
    }

    /// Whether this rank is the root of a rooted collective (the one
    /// reading the root-only arrays).
    fn root_side(&self, root: c_int) -> Step<bool> {
        let comm = self.valid_comm()?;
        if self.is_inter(comm) {
            return Ok(root == MPI_ROOT);
        }
        let mut rank = -1;
        // SAFETY: a checked communicator and a local output.
        unsafe { MPI_Comm_rank(comm, &mut rank) };
        Ok(rank == root)
    }

    /// (indegree, outdegree) of the communicator's topology; (0, 0)
    /// without one (the int form reports that).
    fn degrees(&self) -> Step<(usize, usize)> {
        let comm = self.valid_comm()?;
        let mut kind = MPI_UNDEFINED;
        // SAFETY: a checked communicator and local outputs throughout.
        unsafe { MPI_Topo_test(comm, &mut kind) };
        let (mut indeg, mut outdeg) = (0, 0);
        match kind {
            MPI_CART => {
                let mut ndims = 0;
                // SAFETY: as above.
                unsafe { MPI_Cartdim_get(comm, &mut ndims) };
                indeg = 2 * ndims;
                outdeg = indeg;
            }
            MPI_GRAPH => {
                let mut rank = 0;
                // SAFETY: as above.
                unsafe {
                    MPI_Comm_rank(comm, &mut rank);
                    MPI_Graph_neighbors_count(comm, rank, &mut indeg);
                }
                outdeg = indeg;
            }
            MPI_DIST_GRAPH => {
                let mut weighted = 0;
                // SAFETY: as above.
                unsafe {
                    MPI_Dist_graph_neighbors_count(comm, &mut indeg, &mut outdeg, &mut weighted)
                };
            }
            _ => {}
        }
        Ok((indeg.max(0) as usize, outdeg.max(0) as usize))
    }
}

/// The array the int form gets: the narrowed copy, or the caller's
/// pointer when nothing was narrowed (null, or not read at this rank). A
/// persistent request keeps reading its arrays at each start: its narrowed
/// copies are handed to the request ([`hold`]), which frees them with it.
fn keep(narrowed: &Option<Vec<c_int>>, caller: *const c_int) -> *const c_int {
    match narrowed {
        Some(v) => v.as_ptr(),
        None => caller,
    }
}

/// Gives persistent request `request` the narrowed arrays its starts read
/// (moved, so the pointers the int form kept stay valid).
fn hold(request: MPI_Request, arrays: Vec<Option<Vec<c_int>>>) {
    let kept: Vec<Vec<c_int>> = arrays.into_iter().flatten().collect();
    if !kept.is_empty() {
        crate::persistent_coll::keep_arrays(request, kept);
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    let cx = Cx::win("MPI_Accumulate_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Accumulate(
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
                win,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Allgather_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Allgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allgather_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Allgather_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Allgather_init(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Allgatherv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let displs_narrow = cx.displs(displs, cx.peers()?, "displs")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Allgatherv(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allgatherv_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Allgatherv_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let displs_narrow = cx.displs(displs, cx.peers()?, "displs")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Allgatherv_init(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(unsafe { *request }, vec![recvcounts_narrow, displs_narrow]);
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Allreduce_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Allreduce_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Allreduce_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Alltoall_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Alltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoall_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Alltoall_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Alltoall_init(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Alltoallv_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if !is_in_place(sendbuf) {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let sdispls_narrow = if !is_in_place(sendbuf) {
            cx.displs(sdispls, cx.peers()?, "sdispls")?
        } else {
            None
        };
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.peers()?, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Alltoallv(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtype,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallv_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Alltoallv_init_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if !is_in_place(sendbuf) {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let sdispls_narrow = if !is_in_place(sendbuf) {
            cx.displs(sdispls, cx.peers()?, "sdispls")?
        } else {
            None
        };
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.peers()?, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Alltoallv_init(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtype,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(
                unsafe { *request },
                vec![
                    sendcounts_narrow,
                    sdispls_narrow,
                    recvcounts_narrow,
                    rdispls_narrow,
                ],
            );
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Alltoallw_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if !is_in_place(sendbuf) {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let sdispls_narrow = if !is_in_place(sendbuf) {
            cx.displs(sdispls, cx.peers()?, "sdispls")?
        } else {
            None
        };
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.peers()?, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Alltoallw(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtypes,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtypes,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Alltoallw_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Alltoallw_init_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if !is_in_place(sendbuf) {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let sdispls_narrow = if !is_in_place(sendbuf) {
            cx.displs(sdispls, cx.peers()?, "sdispls")?
        } else {
            None
        };
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.peers()?, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Alltoallw_init(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtypes,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtypes,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(
                unsafe { *request },
                vec![
                    sendcounts_narrow,
                    sdispls_narrow,
                    recvcounts_narrow,
                    rdispls_narrow,
                ],
            );
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Bcast_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Bcast(buffer, count, datatype, root, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bcast_init_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Bcast_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Bcast_init(buffer, count, datatype, root, comm, info, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Bsend_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Bsend(buf, count, datatype, dest, tag, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Bsend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Bsend_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Bsend_init(buf, count, datatype, dest, tag, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Exscan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Exscan_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Exscan_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Exscan_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Exscan_init(sendbuf, recvbuf, count, datatype, op, comm, info, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Gather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Gather_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || cx.root_side(root))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Gather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Gather_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Gather_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || cx.root_side(root))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Gather_init(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Gatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Gatherv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = if cx.root_side(root)? {
            cx.counts(recvcounts, cx.peers()?, "recvcounts")?
        } else {
            None
        };
        let displs_narrow = if cx.root_side(root)? {
            cx.displs(displs, cx.peers()?, "displs")?
        } else {
            None
        };
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Gatherv(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                root,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Gatherv_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Gatherv_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = if cx.root_side(root)? {
            cx.counts(recvcounts, cx.peers()?, "recvcounts")?
        } else {
            None
        };
        let displs_narrow = if cx.root_side(root)? {
            cx.displs(displs, cx.peers()?, "displs")?
        } else {
            None
        };
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Gatherv_init(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                root,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(unsafe { *request }, vec![recvcounts_narrow, displs_narrow]);
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    let cx = Cx::win("MPI_Get_accumulate_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let result_count = cx.scalar(result_count, "result_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Get_accumulate(
                origin_addr,
                origin_count,
                origin_datatype,
                result_addr,
                result_count,
                result_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
                win,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    let cx = Cx::win("MPI_Get_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Get(
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                win,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iallgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iallgather_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Iallgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iallgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iallgatherv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let displs_narrow = cx.displs(displs, cx.peers()?, "displs")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Iallgatherv(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iallreduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iallreduce_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ialltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ialltoall_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ialltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ialltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ialltoallv_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if !is_in_place(sendbuf) {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let sdispls_narrow = if !is_in_place(sendbuf) {
            cx.displs(sdispls, cx.peers()?, "sdispls")?
        } else {
            None
        };
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.peers()?, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ialltoallv(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtype,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ialltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ialltoallw_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if !is_in_place(sendbuf) {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let sdispls_narrow = if !is_in_place(sendbuf) {
            cx.displs(sdispls, cx.peers()?, "sdispls")?
        } else {
            None
        };
        let recvcounts_narrow = cx.counts(recvcounts, cx.peers()?, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.peers()?, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ialltoallw(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtypes,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtypes,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ibcast_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ibcast_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Ibcast(buffer, count, datatype, root, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ibsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ibsend_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Ibsend(buf, count, datatype, dest, tag, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iexscan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iexscan_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Igather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Igather_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || cx.root_side(root))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Igather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Igatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Igatherv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = if cx.root_side(root)? {
            cx.counts(recvcounts, cx.peers()?, "recvcounts")?
        } else {
            None
        };
        let displs_narrow = if cx.root_side(root)? {
            cx.displs(displs, cx.peers()?, "displs")?
        } else {
            None
        };
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Igatherv(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                root,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Imrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::local("MPI_Imrecv_c");
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Imrecv(buf, count, datatype, message, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ineighbor_allgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ineighbor_allgather_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ineighbor_allgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ineighbor_allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ineighbor_allgatherv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        let displs_narrow = cx.displs(displs, cx.degrees()?.0, "displs")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ineighbor_allgatherv(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ineighbor_alltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ineighbor_alltoall_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ineighbor_alltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ineighbor_alltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ineighbor_alltoallv_c", comm);
    cx.run(|| {
        let sendcounts_narrow = cx.counts(sendcounts, cx.degrees()?.1, "sendcounts")?;
        let sdispls_narrow = cx.displs(sdispls, cx.degrees()?.1, "sdispls")?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.degrees()?.0, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ineighbor_alltoallv(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtype,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ineighbor_alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ineighbor_alltoallw_c", comm);
    cx.run(|| {
        let sendcounts_narrow = cx.counts(sendcounts, cx.degrees()?.1, "sendcounts")?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ineighbor_alltoallw(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                sdispls,
                sendtypes,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                rdispls,
                recvtypes,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::nonblocking_recv(
        "MPI_Irecv_c",
        buf,
        count,
        datatype,
        source,
        tag,
        comm,
        request,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ireduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ireduce_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ireduce_scatter_block_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ireduce_scatter_block_c", comm);
    cx.run(|| {
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ireduce_scatter_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ireduce_scatter_c", comm);
    cx.run(|| {
        let recvcounts_narrow = cx.counts(recvcounts, cx.local_size()?, "recvcounts")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Ireduce_scatter(
                sendbuf,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                datatype,
                op,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Irsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::nonblocking_send(
        "MPI_Irsend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iscan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iscan_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iscatter_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iscatter_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || cx.root_side(root))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(!is_in_place(recvbuf)))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Iscatter(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Iscatterv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Iscatterv_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if cx.root_side(root)? {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let displs_narrow = if cx.root_side(root)? {
            cx.displs(displs, cx.peers()?, "displs")?
        } else {
            None
        };
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(!is_in_place(recvbuf)))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Iscatterv(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                sendtype,
                recvbuf,
                recvcount,
                recvtype,
                root,
                comm,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::nonblocking_send(
        "MPI_Isend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Isendrecv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Isendrecv(
                sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                recvtag, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Isendrecv_replace_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Isendrecv_replace(
                buf, count, datatype, dest, sendtag, source, recvtag, comm, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Issend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::nonblocking_send(
        "MPI_Issend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Synchronous,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Mrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let cx = Cx::local("MPI_Mrecv_c");
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Mrecv(buf, count, datatype, message, status) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_allgather_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_allgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgather_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_allgather_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_allgather_init(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_allgatherv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        let displs_narrow = cx.displs(displs, cx.degrees()?.0, "displs")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_allgatherv(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgatherv_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_allgatherv_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        let displs_narrow = cx.displs(displs, cx.degrees()?.0, "displs")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Neighbor_allgatherv_init(
                sendbuf,
                sendcount,
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                recvtype,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(unsafe { *request }, vec![recvcounts_narrow, displs_narrow]);
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_alltoall_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_alltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoall_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_alltoall_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_alltoall_init(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_alltoallv_c", comm);
    cx.run(|| {
        let sendcounts_narrow = cx.counts(sendcounts, cx.degrees()?.1, "sendcounts")?;
        let sdispls_narrow = cx.displs(sdispls, cx.degrees()?.1, "sdispls")?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.degrees()?.0, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_alltoallv(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtype,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoallv_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_alltoallv_init_c", comm);
    cx.run(|| {
        let sendcounts_narrow = cx.counts(sendcounts, cx.degrees()?.1, "sendcounts")?;
        let sdispls_narrow = cx.displs(sdispls, cx.degrees()?.1, "sdispls")?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        let rdispls_narrow = cx.displs(rdispls, cx.degrees()?.0, "rdispls")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Neighbor_alltoallv_init(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&sdispls_narrow, sdispls.cast()),
                sendtype,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                keep(&rdispls_narrow, rdispls.cast()),
                recvtype,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(
                unsafe { *request },
                vec![
                    sendcounts_narrow,
                    sdispls_narrow,
                    recvcounts_narrow,
                    rdispls_narrow,
                ],
            );
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_alltoallw_c", comm);
    cx.run(|| {
        let sendcounts_narrow = cx.counts(sendcounts, cx.degrees()?.1, "sendcounts")?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Neighbor_alltoallw(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                sdispls,
                sendtypes,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                rdispls,
                recvtypes,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoallw_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Neighbor_alltoallw_init_c", comm);
    cx.run(|| {
        let sendcounts_narrow = cx.counts(sendcounts, cx.degrees()?.1, "sendcounts")?;
        let recvcounts_narrow = cx.counts(recvcounts, cx.degrees()?.0, "recvcounts")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Neighbor_alltoallw_init(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                sdispls,
                sendtypes,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                rdispls,
                recvtypes,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(
                unsafe { *request },
                vec![sendcounts_narrow, recvcounts_narrow],
            );
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Put_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    let cx = Cx::win("MPI_Put_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Put(
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                win,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Raccumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::win("MPI_Raccumulate_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Raccumulate(
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
                win,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Recv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::blocking_recv(
        "MPI_Recv_c",
        buf,
        count,
        datatype,
        source,
        tag,
        comm,
        status,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Recv_init_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Recv_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Recv_init(buf, count, datatype, source, tag, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Reduce_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Reduce_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Reduce_init(
                sendbuf, recvbuf, count, datatype, op, root, comm, info, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_local_c(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    let cx = Cx::local("MPI_Reduce_local_c");
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Reduce_local(inbuf, inoutbuf, count, datatype, op) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_block_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Reduce_scatter_block_c", comm);
    cx.run(|| {
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_block_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Reduce_scatter_block_init_c", comm);
    cx.run(|| {
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Reduce_scatter_block_init(
                sendbuf, recvbuf, recvcount, datatype, op, comm, info, request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Reduce_scatter_c", comm);
    cx.run(|| {
        let recvcounts_narrow = cx.counts(recvcounts, cx.local_size()?, "recvcounts")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Reduce_scatter(
                sendbuf,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                datatype,
                op,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Reduce_scatter_init_c", comm);
    cx.run(|| {
        let recvcounts_narrow = cx.counts(recvcounts, cx.local_size()?, "recvcounts")?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Reduce_scatter_init(
                sendbuf,
                recvbuf,
                keep(&recvcounts_narrow, recvcounts.cast()),
                datatype,
                op,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(unsafe { *request }, vec![recvcounts_narrow]);
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rget_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::win("MPI_Rget_accumulate_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let result_count = cx.scalar(result_count, "result_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Rget_accumulate(
                origin_addr,
                origin_count,
                origin_datatype,
                result_addr,
                result_count,
                result_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
                win,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rget_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::win("MPI_Rget_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Rget(
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                win,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rput_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::win("MPI_Rput_c", win);
    cx.run(|| {
        let origin_count = cx.scalar(origin_count, "origin_count", || Ok(true))?;
        let target_count = cx.scalar(target_count, "target_count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Rput(
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                win,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::blocking_send(
        "MPI_Rsend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rsend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Rsend_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Rsend_init(buf, count, datatype, dest, tag, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Scan_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Scan(sendbuf, recvbuf, count, datatype, op, comm) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scan_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Scan_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Scan_init(sendbuf, recvbuf, count, datatype, op, comm, info, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scatter_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Scatter_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || cx.root_side(root))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(!is_in_place(recvbuf)))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Scatter(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scatter_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Scatter_init_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || cx.root_side(root))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(!is_in_place(recvbuf)))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Scatter_init(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, info,
                request,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scatterv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Scatterv_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if cx.root_side(root)? {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let displs_narrow = if cx.root_side(root)? {
            cx.displs(displs, cx.peers()?, "displs")?
        } else {
            None
        };
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(!is_in_place(recvbuf)))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Scatterv(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                sendtype,
                recvbuf,
                recvcount,
                recvtype,
                root,
                comm,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Scatterv_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Scatterv_init_c", comm);
    cx.run(|| {
        let sendcounts_narrow = if cx.root_side(root)? {
            cx.counts(sendcounts, cx.peers()?, "sendcounts")?
        } else {
            None
        };
        let displs_narrow = if cx.root_side(root)? {
            cx.displs(displs, cx.peers()?, "displs")?
        } else {
            None
        };
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(!is_in_place(recvbuf)))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        let rc = unsafe {
            MPI_Scatterv_init(
                sendbuf,
                keep(&sendcounts_narrow, sendcounts.cast()),
                keep(&displs_narrow, displs.cast()),
                sendtype,
                recvbuf,
                recvcount,
                recvtype,
                root,
                comm,
                info,
                request,
            )
        };
        if rc == MPI_SUCCESS {
            // SAFETY: the successful initialisation wrote the handle.
            hold(unsafe { *request }, vec![sendcounts_narrow, displs_narrow]);
        }
        Ok(rc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Send_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::blocking_send(
        "MPI_Send_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Send_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Send_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Send_init(buf, count, datatype, dest, tag, comm, request) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let cx = Cx::comm("MPI_Sendrecv_c", comm);
    cx.run(|| {
        let sendcount = cx.scalar(sendcount, "sendcount", || Ok(!is_in_place(sendbuf)))?;
        let recvcount = cx.scalar(recvcount, "recvcount", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Sendrecv(
                sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                recvtag, comm, status,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Sendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let cx = Cx::comm("MPI_Sendrecv_replace_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe {
            MPI_Sendrecv_replace(
                buf, count, datatype, dest, sendtag, source, recvtag, comm, status,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    // A packed predefined datatype moves any count; a derived one at
    // most `int` (see pt2pt::general_count).
    pt2pt::blocking_send(
        "MPI_Ssend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Synchronous,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let cx = Cx::comm("MPI_Ssend_init_c", comm);
    cx.run(|| {
        let count = cx.scalar(count, "count", || Ok(true))?;
        // SAFETY: the arguments are the caller's, with the counts narrowed to
        // what the int form takes; narrowed arrays outlive the call.
        Ok(unsafe { MPI_Ssend_init(buf, count, datatype, dest, tag, comm, request) })
    })
}

// Hand-written forms: arguments that are neither counts nor per-peer arrays.

/// Runs the int form of `MPI_Pack`/`MPI_Unpack` on a narrowed copy of
/// the 64-bit position, writing the new position back.
fn with_position(
    cx: &Cx,
    position: *mut MPI_Count,
    body: impl FnOnce(*mut c_int) -> c_int,
) -> Step<c_int> {
    if position.is_null() {
        return Ok(body(std::ptr::null_mut()));
    }
    // SAFETY: non-null; the caller's position (MPI contract).
    let start = unsafe { *position };
    let mut pos = cx.scalar(start, "position", || Ok(true))?;
    let code = body(&mut pos);
    if code == MPI_SUCCESS {
        // SAFETY: as above.
        unsafe { *position = MPI_Count::from(pos) };
    }
    Ok(code)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_c(
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Pack_c", comm);
    cx.run(|| {
        let incount = cx.scalar(incount, "incount", || Ok(true))?;
        let outsize = cx.scalar(outsize, "outsize", || Ok(true))?;
        with_position(&cx, position, |pos| {
            // SAFETY: the caller's arguments with the counts narrowed.
            unsafe { MPI_Pack(inbuf, incount, datatype, outbuf, outsize, pos, comm) }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack_c(
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let cx = Cx::comm("MPI_Unpack_c", comm);
    cx.run(|| {
        let insize = cx.scalar(insize, "insize", || Ok(true))?;
        let outcount = cx.scalar(outcount, "outcount", || Ok(true))?;
        with_position(&cx, position, |pos| {
            // SAFETY: the caller's arguments with the counts narrowed.
            unsafe { MPI_Unpack(inbuf, insize, pos, outbuf, outcount, datatype, comm) }
        })
    })
}

//! Virtual topologies: Cartesian (`MPI_Cart_create`, `_coords`, `_rank`,
//! `_shift`, `_sub`, `_get`, `MPI_Cartdim_get`, `MPI_Dims_create`),
//! distributed graphs (`MPI_Dist_graph_create_adjacent`,
//! `_neighbors_count`, `_neighbors`), `MPI_Topo_test`, and the
//! neighbourhood collectives `MPI_Neighbor_allgather` / `_alltoall`.
//! Ranks are never reordered.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use tandem::coll::CollCall;
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::coll::{run, Stage};
use crate::comm::register;
use crate::datatype;
use crate::ext::CommExt;
use crate::info;
use crate::state::{call, Fail, State};

/// A communicator's topology.
#[derive(Clone, Debug)]
pub enum Topo {
    Cart {
        dims: Vec<c_int>,
        periods: Vec<bool>,
    },
    DistGraph {
        sources: Vec<c_int>,
        sweights: Vec<c_int>,
        dests: Vec<c_int>,
        dweights: Vec<c_int>,
        weighted: bool,
    },
}

fn topo_error(comm: MPI_Comm, what: &str) -> Fail {
    Fail::new(
        comm,
        ErrorClass::Topology,
        format!("the communicator has no {what} topology"),
    )
}

fn cart(s: &mut State, comm: MPI_Comm) -> Result<(CommId, Vec<c_int>, Vec<bool>), Fail> {
    let id = args::comm(s, comm)?;
    match &s.entry(id).ext.topo {
        Some(Topo::Cart { dims, periods }) => Ok((id, dims.clone(), periods.clone())),
        _ => Err(topo_error(comm, "Cartesian")),
    }
}

fn coords_of(dims: &[c_int], mut rank: c_int) -> Vec<c_int> {
    let mut c = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        c[i] = rank % dims[i];
        rank /= dims[i];
    }
    c
}

/// The rank at `coords` (wrapped in periodic dimensions), `None` if outside.
fn rank_of(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<c_int> {
    let mut r = 0;
    for i in 0..dims.len() {
        let mut c = coords[i];
        if periods[i] {
            c = c.rem_euclid(dims[i]);
        } else if c < 0 || c >= dims[i] {
            return None;
        }
        r = r * dims[i] + c;
    }
    Some(r)
}

/// Reads `n` ints.
///
/// # Safety
/// `p` must be valid for `n` reads when `n > 0`.
unsafe fn ints(comm: MPI_Comm, p: *const c_int, n: c_int, what: &str) -> Result<Vec<c_int>, Fail> {
    if n < 0 {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!("negative {what} count {n}"),
        ));
    }
    if n > 0 && p.is_null() {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!("NULL {what} array"),
        ));
    }
    // SAFETY: the caller's promise.
    Ok((0..n as usize).map(|i| unsafe { *p.add(i) }).collect())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_create(
    comm_old: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    comm_cart: *mut MPI_Comm,
) -> c_int {
    call("MPI_Cart_create", |s| {
        args::out_ptr(comm_old, comm_cart, "comm_cart")?;
        let id = args::intra_comm(s, comm_old)?;
        // SAFETY: `ndims` entries each by the MPI contract.
        let (d, p) = unsafe {
            (
                ints(comm_old, dims, ndims, "dims")?,
                ints(comm_old, periods, ndims, "periods")?,
            )
        };
        if d.iter().any(|&x| x <= 0) {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Dims,
                format!("invalid dimensions {d:?}"),
            ));
        }
        let total: i64 = d.iter().map(|&x| i64::from(x)).product();
        let c =
            s.rt.comm(id)
                .map_err(|error| Fail {
                    comm: comm_old,
                    error,
                })?
                .clone();
        if total > i64::from(c.size()) {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Dims,
                format!(
                    "a grid of {total} processes does not fit a communicator of {}",
                    c.size()
                ),
            ));
        }
        let members = (i64::from(c.rank) < total).then(|| {
            c.group[..total as usize]
                .iter()
                .copied()
                .collect::<Arc<[u32]>>()
        });
        let new = s.rt.comm_from_group(id, members).map_err(|error| Fail {
            comm: comm_old,
            error,
        })?;
        let topo = Topo::Cart {
            dims: d,
            periods: p.iter().map(|&x| x != 0).collect(),
        };
        let h = register(
            s,
            id,
            new,
            CommExt {
                topo: Some(topo),
                ..CommExt::default()
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(comm_cart, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    call("MPI_Dims_create", |_| {
        let comm = MPI_COMM_WORLD;
        // SAFETY: `ndims` entries by the MPI contract.
        let d = unsafe { ints(comm, dims, ndims, "dims")? };
        if nnodes <= 0 || d.iter().any(|&x| x < 0) {
            return Err(Fail::new(
                comm,
                ErrorClass::Dims,
                format!("invalid nnodes {nnodes} or dims {d:?}"),
            ));
        }
        let fixed: i64 = d
            .iter()
            .filter(|&&x| x > 0)
            .map(|&x| i64::from(x))
            .product();
        if i64::from(nnodes) % fixed != 0 {
            return Err(Fail::new(
                comm,
                ErrorClass::Dims,
                format!("{nnodes} processes cannot fill the fixed dimensions {d:?}"),
            ));
        }
        let mut rest = nnodes / fixed as c_int;
        let free: Vec<usize> = (0..d.len()).filter(|&i| d[i] == 0).collect();
        if free.is_empty() {
            if rest != 1 {
                return Err(Fail::new(
                    comm,
                    ErrorClass::Dims,
                    "the dimensions do not multiply to nnodes",
                ));
            }
            return Ok(());
        }
        let mut factors = Vec::new();
        let mut f = 2;
        while rest > 1 {
            while rest % f == 0 {
                factors.push(f);
                rest /= f;
            }
            f += 1;
        }
        let mut vals = vec![1 as c_int; free.len()];
        for &p in factors.iter().rev() {
            let i = (0..vals.len())
                .min_by_key(|&i| vals[i])
                .expect("at least one free dimension");
            vals[i] *= p;
        }
        vals.sort_unstable_by(|a, b| b.cmp(a));
        for (k, &i) in free.iter().enumerate() {
            // SAFETY: `i < ndims`.
            unsafe { *dims.add(i) = vals[k] };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cartdim_get(comm: MPI_Comm, ndims: *mut c_int) -> c_int {
    call("MPI_Cartdim_get", |s| {
        args::out_ptr(comm, ndims, "ndims")?;
        let (_, d, _) = cart(s, comm)?;
        // SAFETY: checked non-null.
        unsafe { put(ndims, d.len() as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_get(
    comm: MPI_Comm,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    call("MPI_Cart_get", |s| {
        let (id, d, p) = cart(s, comm)?;
        let me = s.rt.comm(id).map_err(|error| Fail { comm, error })?.rank as c_int;
        let c = coords_of(&d, me);
        let n = d.len().min(maxdims.max(0) as usize);
        for (out, what) in [(dims, "dims"), (periods, "periods"), (coords, "coords")] {
            if n > 0 {
                args::out_ptr(comm, out, what)?;
            }
        }
        for i in 0..n {
            // SAFETY: `maxdims` entries each by the MPI contract.
            unsafe {
                *dims.add(i) = d[i];
                *periods.add(i) = c_int::from(p[i]);
                *coords.add(i) = c[i];
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_rank(
    comm: MPI_Comm,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    call("MPI_Cart_rank", |s| {
        args::out_ptr(comm, rank, "rank")?;
        let (_, d, p) = cart(s, comm)?;
        // SAFETY: `ndims` entries by the MPI contract.
        let c = unsafe { ints(comm, coords, d.len() as c_int, "coords")? };
        let r = rank_of(&d, &p, &c).ok_or_else(|| {
            Fail::new(
                comm,
                ErrorClass::Arg,
                format!("coordinates {c:?} are outside the grid {d:?}"),
            )
        })?;
        // SAFETY: checked non-null.
        unsafe { put(rank, r) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_coords(
    comm: MPI_Comm,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    call("MPI_Cart_coords", |s| {
        let (_, d, _) = cart(s, comm)?;
        let total: c_int = d.iter().product();
        if rank < 0 || rank >= total {
            return Err(Fail::new(
                comm,
                ErrorClass::Rank,
                format!("rank {rank} is not in 0..{total}"),
            ));
        }
        let c = coords_of(&d, rank);
        let n = c.len().min(maxdims.max(0) as usize);
        if n > 0 {
            args::out_ptr(comm, coords, "coords")?;
        }
        for (i, &x) in c.iter().enumerate().take(n) {
            // SAFETY: `maxdims` entries by the MPI contract.
            unsafe { *coords.add(i) = x };
        }
        Ok(())
    })
}

/// Source and destination of a shift by `disp` along `dir`.
fn shift(d: &[c_int], p: &[bool], me: c_int, dir: usize, disp: c_int) -> (c_int, c_int) {
    let c = coords_of(d, me);
    let at = |delta: c_int| {
        let mut x = c.clone();
        x[dir] += delta;
        rank_of(d, p, &x).unwrap_or(MPI_PROC_NULL)
    };
    (at(-disp), at(disp))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_shift(
    comm: MPI_Comm,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    call("MPI_Cart_shift", |s| {
        args::out_ptr(comm, rank_source, "rank_source")?;
        args::out_ptr(comm, rank_dest, "rank_dest")?;
        let (id, d, p) = cart(s, comm)?;
        let dir = usize::try_from(direction)
            .ok()
            .filter(|&x| x < d.len())
            .ok_or_else(|| {
                Fail::new(
                    comm,
                    ErrorClass::Arg,
                    format!("direction {direction} is not in 0..{}", d.len()),
                )
            })?;
        let me = s.rt.comm(id).map_err(|error| Fail { comm, error })?.rank as c_int;
        let (src, dst) = shift(&d, &p, me, dir, disp);
        // SAFETY: both checked non-null.
        unsafe {
            put(rank_source, src);
            put(rank_dest, dst);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_sub(
    comm: MPI_Comm,
    remain_dims: *const c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Cart_sub", |s| {
        args::out_ptr(comm, newcomm, "newcomm")?;
        let (id, d, p) = cart(s, comm)?;
        // SAFETY: `ndims` entries by the MPI contract.
        let keep = unsafe { ints(comm, remain_dims, d.len() as c_int, "remain_dims")? };
        let me = s.rt.comm(id).map_err(|error| Fail { comm, error })?.rank as c_int;
        let c = coords_of(&d, me);
        let mut color: c_int = 0;
        for i in 0..d.len() {
            if keep[i] == 0 {
                color = color * d[i] + c[i];
            }
        }
        let new =
            s.rt.comm_split(id, Some(color as u32), me)
                .map_err(|error| Fail { comm, error })?;
        let topo = Topo::Cart {
            dims: (0..d.len())
                .filter(|&i| keep[i] != 0)
                .map(|i| d[i])
                .collect(),
            periods: (0..d.len())
                .filter(|&i| keep[i] != 0)
                .map(|i| p[i])
                .collect(),
        };
        let h = register(
            s,
            id,
            new,
            CommExt {
                topo: Some(topo),
                ..CommExt::default()
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(newcomm, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Topo_test(comm: MPI_Comm, status: *mut c_int) -> c_int {
    call("MPI_Topo_test", |s| {
        args::out_ptr(comm, status, "status")?;
        let id = args::comm(s, comm)?;
        let t = match s.entry(id).ext.topo {
            Some(Topo::Cart { .. }) => MPI_CART,
            Some(Topo::DistGraph { .. }) => MPI_DIST_GRAPH,
            None => MPI_UNDEFINED,
        };
        // SAFETY: checked non-null.
        unsafe { put(status, t) };
        Ok(())
    })
}

/// Reads graph weights (absent for `MPI_UNWEIGHTED` / `MPI_WEIGHTS_EMPTY`).
///
/// # Safety
/// Unless a sentinel, `p` must be valid for `n` reads.
unsafe fn weights(comm: MPI_Comm, p: *const c_int, n: c_int) -> Result<(Vec<c_int>, bool), Fail> {
    if p as usize == MPI_UNWEIGHTED || p as usize == MPI_WEIGHTS_EMPTY || n == 0 {
        return Ok((vec![1; n.max(0) as usize], p as usize != MPI_UNWEIGHTED));
    }
    // SAFETY: the caller's promise.
    Ok((unsafe { ints(comm, p, n, "weights")? }, true))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_create_adjacent(
    comm_old: MPI_Comm,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    info_: MPI_Info,
    _reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    call("MPI_Dist_graph_create_adjacent", |s| {
        args::out_ptr(comm_old, comm_dist_graph, "comm_dist_graph")?;
        info::check_optional(s, info_)?;
        let id = args::intra_comm(s, comm_old)?;
        let n =
            s.rt.comm(id)
                .map_err(|error| Fail {
                    comm: comm_old,
                    error,
                })?
                .size() as c_int;
        // SAFETY: the degrees give the array lengths (MPI contract).
        let (src, (sw, w1), dst, (dw, w2)) = unsafe {
            (
                ints(comm_old, sources, indegree, "sources")?,
                weights(comm_old, sourceweights, indegree)?,
                ints(comm_old, destinations, outdegree, "destinations")?,
                weights(comm_old, destweights, outdegree)?,
            )
        };
        if let Some(r) = src.iter().chain(&dst).find(|&&r| r < 0 || r >= n) {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Rank,
                format!("neighbour {r} is not in 0..{n}"),
            ));
        }
        let new = s.rt.comm_dup(id).map_err(|error| Fail {
            comm: comm_old,
            error,
        })?;
        let topo = Topo::DistGraph {
            sources: src,
            sweights: sw,
            dests: dst,
            dweights: dw,
            weighted: w1 || w2,
        };
        let h = register(
            s,
            id,
            Some(new),
            CommExt {
                topo: Some(topo),
                ..CommExt::default()
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(comm_dist_graph, h) };
        Ok(())
    })
}

fn dist_graph(s: &mut State, comm: MPI_Comm) -> Result<Topo, Fail> {
    let id = args::comm(s, comm)?;
    match &s.entry(id).ext.topo {
        Some(t @ Topo::DistGraph { .. }) => Ok(t.clone()),
        _ => Err(topo_error(comm, "distributed graph")),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_neighbors_count(
    comm: MPI_Comm,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    call("MPI_Dist_graph_neighbors_count", |s| {
        for p in [indegree, outdegree, weighted] {
            args::out_ptr(comm, p, "output")?;
        }
        if let Topo::DistGraph {
            sources,
            dests,
            weighted: w,
            ..
        } = dist_graph(s, comm)?
        {
            // SAFETY: all checked non-null.
            unsafe {
                put(indegree, sources.len() as c_int);
                put(outdegree, dests.len() as c_int);
                put(weighted, c_int::from(w));
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_neighbors(
    comm: MPI_Comm,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    call("MPI_Dist_graph_neighbors", |s| {
        if let Topo::DistGraph {
            sources: src,
            sweights,
            dests,
            dweights,
            weighted,
        } = dist_graph(s, comm)?
        {
            let put_all =
                |out: *mut c_int, v: &[c_int], max: c_int, weights: bool| -> Result<(), Fail> {
                    let n = v.len().min(max.max(0) as usize);
                    if n == 0 || (weights && (!weighted || out as usize == MPI_UNWEIGHTED)) {
                        return Ok(());
                    }
                    args::out_ptr(comm, out, "neighbour array")?;
                    // SAFETY: `max` entries by the MPI contract.
                    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out, n) };
                    Ok(())
                };
            put_all(sources, &src, maxindegree, false)?;
            put_all(sourceweights, &sweights, maxindegree, true)?;
            put_all(destinations, &dests, maxoutdegree, false)?;
            put_all(destweights, &dweights, maxoutdegree, true)?;
        }
        Ok(())
    })
}

/// The neighbourhood of a communicator: receive slots as (source, slot) in
/// the order to post them, send slots as (destination, slot); the number of
/// receive and send slots. Slots of `MPI_PROC_NULL` neighbours are left out.
#[allow(clippy::type_complexity)]
fn neighbourhood(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
) -> Result<(Vec<(u32, usize)>, Vec<(u32, usize)>, usize, usize), Fail> {
    let me = s.rt.comm(id).map_err(|error| Fail { comm, error })?.rank as c_int;
    match s.entry(id).ext.topo.clone() {
        Some(Topo::Cart { dims, periods }) => {
            let (mut recv, mut send) = (Vec::new(), Vec::new());
            for dir in 0..dims.len() {
                let (minus, plus) = shift(&dims, &periods, me, dir, 1);
                // Sends go (negative, positive); receives are posted
                // (positive, negative) so that when both neighbours are the
                // same rank, its negative-direction message lands in the
                // positive slot, as the standard orders them.
                for (r, slot) in [(plus, 2 * dir + 1), (minus, 2 * dir)] {
                    if r != MPI_PROC_NULL {
                        recv.push((r as u32, slot));
                    }
                }
                for (r, slot) in [(minus, 2 * dir), (plus, 2 * dir + 1)] {
                    if r != MPI_PROC_NULL {
                        send.push((r as u32, slot));
                    }
                }
            }
            Ok((recv, send, 2 * dims.len(), 2 * dims.len()))
        }
        Some(Topo::DistGraph { sources, dests, .. }) => Ok((
            sources
                .iter()
                .enumerate()
                .map(|(i, &r)| (r as u32, i))
                .collect(),
            dests
                .iter()
                .enumerate()
                .map(|(i, &r)| (r as u32, i))
                .collect(),
            sources.len(),
            dests.len(),
        )),
        None => Err(topo_error(comm, "Cartesian or distributed graph")),
    }
}

fn neighbor(
    s: &mut State,
    sendbuf: *const c_void,
    scount: c_int,
    stype: MPI_Datatype,
    recvbuf: *mut c_void,
    rcount: c_int,
    rtype: MPI_Datatype,
    comm: MPI_Comm,
    alltoall: bool,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    let (rslots, sslots, nin, nout) = neighbourhood(s, comm, id)?;
    let mut st = Stage::default();
    let rwhole = datatype::typed(comm, recvbuf, rcount.saturating_mul(nin as c_int), rtype)?;
    let rlen = rwhole.layout.size * rcount.max(0) as usize;
    let recv = st.output(&rwhole);
    let blocks = if alltoall { nout as c_int } else { 1 };
    let swhole = datatype::typed(comm, sendbuf, scount.saturating_mul(blocks), stype)?;
    let slen = swhole.layout.size * scount.max(0) as usize;
    let send = st.input(&swhole);
    let c = CollCall::Neighbor {
        sources: rslots.iter().map(|x| x.0).collect(),
        recv,
        rcounts: vec![rlen; rslots.len()],
        rdispls: rslots.iter().map(|x| x.1 * rlen).collect(),
        dests: sslots.iter().map(|x| x.0).collect(),
        send,
        scounts: vec![slen; sslots.len()],
        sdispls: sslots
            .iter()
            .map(|x| if alltoall { x.1 * slen } else { 0 })
            .collect(),
    };
    run(s, comm, id, c, st, std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Neighbor_allgather", |s| {
        neighbor(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    call("MPI_Neighbor_alltoall", |s| {
        neighbor(
            s, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true,
        )
    })
}

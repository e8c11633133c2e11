//! Virtual topologies: Cartesian (`MPI_Cart_create`, `_coords`, `_rank`,
//! `_shift`, `_sub`, `_get`, `MPI_Cartdim_get`, `MPI_Dims_create`),
//! distributed graphs (`MPI_Dist_graph_create_adjacent`, `_create`,
//! `_neighbors_count`, `_neighbors`), MPI-1 graphs (`MPI_Graph_create`,
//! `_get`, `_neighbors_count`, `_neighbors`, `MPI_Graphdims_get`), the
//! mapping queries (`MPI_Cart_map`, `MPI_Graph_map`) and `MPI_Topo_test`;
//! the neighbourhood
//! collectives over them are in neighbor.rs. Ranks are never reordered.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::os::raw::c_int;
use std::sync::Arc;

use tandem::coll::CollCall;
use tandem::coll::SchedId;
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::comm::register;
use crate::ext::CommExt;
use crate::info;
use crate::state::{self, call, call_local, Fail, State};

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
    /// MPI-1 graph: node i's neighbours are `edges[index[i-1]..index[i]]`.
    Graph {
        index: Vec<c_int>,
        edges: Vec<c_int>,
    },
}

impl Topo {
    /// A graph node's neighbours.
    fn graph_neighbours(index: &[c_int], edges: &[c_int], node: usize) -> Vec<c_int> {
        let lo = if node == 0 {
            0
        } else {
            index[node - 1] as usize
        };
        edges[lo..index[node] as usize].to_vec()
    }
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
        // A failure below leaves no communicator behind.
        // SAFETY: checked non-null.
        unsafe { put(comm_cart, MPI_COMM_NULL) };
        args::intra_comm(s, comm_old)?;
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
        let topo = Topo::Cart {
            dims: d,
            periods: p.iter().map(|&x| x != 0).collect(),
        };
        with_topology(
            s,
            comm_old,
            total,
            topo,
            "grid",
            ErrorClass::Dims,
            comm_cart,
        )
    })
}

/// The `k` factors of `n` as close to each other as possible (the smallest
/// difference between the largest and the smallest, then the largest
/// smallest, second smallest, ...), largest first: 72 in two dimensions is
/// 9 x 8, not 12 x 6; 5040 in three is 21 x 16 x 15 rather than
/// 20 x 18 x 14 (what MPICH gives, so that programs see the same grids).
fn balanced(n: i64, k: usize) -> Vec<i64> {
    let divisors: Vec<i64> = (1..)
        .take_while(|d| d * d <= n)
        .filter(|d| n % d == 0)
        .flat_map(|d| [d, n / d])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // The largest g with g^r <= m.
    fn root(m: i64, r: usize) -> i64 {
        let mut g = (m as f64).powf(1.0 / r as f64).round() as i64;
        while g > 1 && (g as i128).pow(r as u32) > m as i128 {
            g -= 1;
        }
        while ((g + 1) as i128).pow(r as u32) <= m as i128 {
            g += 1;
        }
        g.max(1)
    }
    // Searches non-increasing factor lists of `m` in `r` more factors, each
    // at most `cap`, keeping the best whole list. A candidate is skipped
    // when even the best ending (the rest all equal) spreads more than the
    // best list so far.
    fn search(
        divisors: &[i64],
        m: i64,
        r: usize,
        cap: i64,
        cur: &mut Vec<i64>,
        best: &mut Option<(i64, Vec<i64>)>,
    ) {
        if r == 0 {
            if m == 1 {
                let key = cur[0] - cur[cur.len() - 1];
                let better = best.as_ref().is_none_or(|(b, v)| {
                    key < *b || (key == *b && cur.iter().rev().gt(v.iter().rev()))
                });
                if better {
                    *best = Some((key, cur.clone()));
                }
            }
            return;
        }
        let lowest = root(m, r) + i64::from(root(m, r).pow(r as u32) < m);
        let start = divisors.partition_point(|&d| d < lowest);
        for &f in &divisors[start..] {
            if f > cap {
                break;
            }
            if m % f != 0 {
                continue;
            }
            let first = cur.first().copied().unwrap_or(f);
            let smallest = if r > 1 { f.min(root(m / f, r - 1)) } else { f };
            if let Some((b, _)) = best.as_ref() {
                if first - smallest > *b {
                    if cur.is_empty() {
                        break; // the bound only grows with the first factor
                    }
                    continue;
                }
            }
            cur.push(f);
            search(divisors, m / f, r - 1, f, cur, best);
            cur.pop();
        }
    }
    let mut best = None;
    search(&divisors, n, k, n, &mut Vec::with_capacity(k), &mut best);
    best.map_or_else(|| vec![1; k], |(_, v)| v)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    call_local("MPI_Dims_create", || {
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
        let rest = nnodes / fixed as c_int;
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
        let mut vals = balanced(i64::from(rest), free.len());
        vals.sort_unstable_by(|a, b| b.cmp(a));
        for (k, &i) in free.iter().enumerate() {
            // SAFETY: `i < ndims`.
            unsafe { *dims.add(i) = vals[k] as c_int };
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
        // A failure below leaves no communicator behind.
        // SAFETY: checked non-null.
        unsafe { put(newcomm, MPI_COMM_NULL) };
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
        let ext = CommExt {
            topo: Some(topo),
            ..CommExt::default()
        };
        if state::multiple() {
            let color = Some(color as u32);
            return crate::comm::split_letting_others_in(s, comm, id, color, me, newcomm, ext);
        }
        let new =
            s.rt.comm_split(id, Some(color as u32), me)
                .map_err(|error| Fail { comm, error })?;
        let h = register(s, id, new, ext);
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
            Some(Topo::Graph { .. }) => MPI_GRAPH,
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
        // A failure below leaves no communicator behind.
        // SAFETY: checked non-null.
        unsafe { put(comm_dist_graph, MPI_COMM_NULL) };
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
        let topo = Topo::DistGraph {
            sources: src,
            sweights: sw,
            dests: dst,
            dweights: dw,
            weighted: w1 || w2,
        };
        let ext = CommExt {
            topo: Some(topo),
            ..CommExt::default()
        };
        crate::comm::dup_with_ext(s, comm_old, id, comm_dist_graph, ext)
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
pub(crate) fn neighbourhood(
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
        Some(Topo::Graph { index, edges }) => {
            // Every neighbour is both a source and a destination, in order.
            let mine: Vec<(u32, usize)> = Topo::graph_neighbours(&index, &edges, me as usize)
                .into_iter()
                .enumerate()
                .map(|(i, r)| (r as u32, i))
                .collect();
            let n = mine.len();
            Ok((mine.clone(), mine, n, n))
        }
        None => Err(topo_error(comm, "Cartesian, graph or distributed graph")),
    }
}

/// Creates a communicator of the first `nodes` ranks of `comm_old` with
/// topology `topo` as `*out` (the others get `MPI_COMM_NULL`); `what` names
/// the topology in errors. Ends the call: under `MPI_THREAD_MULTIPLE` its
/// agreement lets other threads in (see `state::block_on`).
fn with_topology(
    s: &mut State,
    comm_old: MPI_Comm,
    nodes: i64,
    topo: Topo,
    what: &str,
    too_big: ErrorClass,
    out: *mut MPI_Comm,
) -> Result<(), Fail> {
    let id = args::intra_comm(s, comm_old)?;
    let c =
        s.rt.comm(id)
            .map_err(|error| Fail {
                comm: comm_old,
                error,
            })?
            .clone();
    if nodes > i64::from(c.size()) {
        return Err(Fail::new(
            comm_old,
            too_big,
            format!(
                "a {what} of {nodes} processes does not fit a communicator of {}",
                c.size()
            ),
        ));
    }
    let members = (i64::from(c.rank) < nodes).then(|| {
        c.group[..nodes as usize]
            .iter()
            .copied()
            .collect::<Arc<[u32]>>()
    });
    let ext = CommExt {
        topo: Some(topo),
        ..CommExt::default()
    };
    if state::multiple() {
        return crate::comm::from_group_letting_others_in(s, comm_old, id, members, out, ext);
    }
    let new = s.rt.comm_from_group(id, members).map_err(|error| Fail {
        comm: comm_old,
        error,
    })?;
    let h = register(s, id, new, ext);
    // SAFETY: checked non-null by the caller.
    unsafe { put(out, h) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_create(
    comm_old: MPI_Comm,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    comm_graph: *mut MPI_Comm,
) -> c_int {
    call("MPI_Graph_create", |s| {
        args::out_ptr(comm_old, comm_graph, "comm_graph")?;
        // A failure below leaves no communicator behind.
        // SAFETY: checked non-null.
        unsafe { put(comm_graph, MPI_COMM_NULL) };
        // SAFETY: `nnodes` entries of index, index[nnodes-1] of edges (MPI contract).
        let idx = unsafe { ints(comm_old, index, nnodes, "index")? };
        let nedges = idx.last().copied().unwrap_or(0);
        if idx.windows(2).any(|w| w[1] < w[0]) || idx.first().is_some_and(|&x| x < 0) {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Arg,
                format!("index {idx:?} is not a non-decreasing sequence of edge counts"),
            ));
        }
        // SAFETY: as above.
        let e = unsafe { ints(comm_old, edges, nedges, "edges")? };
        if let Some(r) = e.iter().find(|&&r| r < 0 || r >= nnodes) {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Rank,
                format!("edge to {r}, which is not a node in 0..{nnodes}"),
            ));
        }
        let topo = Topo::Graph {
            index: idx,
            edges: e,
        };
        with_topology(
            s,
            comm_old,
            i64::from(nnodes),
            topo,
            "graph",
            ErrorClass::Arg,
            comm_graph,
        )
    })
}

fn graph(s: &mut State, comm: MPI_Comm) -> Result<(Vec<c_int>, Vec<c_int>), Fail> {
    let id = args::comm(s, comm)?;
    match &s.entry(id).ext.topo {
        Some(Topo::Graph { index, edges }) => Ok((index.clone(), edges.clone())),
        _ => Err(topo_error(comm, "graph")),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Graphdims_get(
    comm: MPI_Comm,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    call("MPI_Graphdims_get", |s| {
        args::out_ptr(comm, nnodes, "nnodes")?;
        args::out_ptr(comm, nedges, "nedges")?;
        let (index, edges) = graph(s, comm)?;
        // SAFETY: both checked non-null.
        unsafe {
            put(nnodes, index.len() as c_int);
            put(nedges, edges.len() as c_int);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_get(
    comm: MPI_Comm,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    call("MPI_Graph_get", |s| {
        let (idx, e) = graph(s, comm)?;
        for (v, max, p, what) in [
            (&idx, maxindex, index, "index"),
            (&e, maxedges, edges, "edges"),
        ] {
            let n = v.len().min(max.max(0) as usize);
            if n > 0 {
                args::out_ptr(comm, p, what)?;
                // SAFETY: checked non-null; room for `max` entries (MPI contract).
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, n) };
            }
        }
        Ok(())
    })
}

/// Node `rank`'s neighbours in a graph communicator.
fn graph_neighbours_of(s: &mut State, comm: MPI_Comm, rank: c_int) -> Result<Vec<c_int>, Fail> {
    let (index, edges) = graph(s, comm)?;
    if rank < 0 || rank as usize >= index.len() {
        return Err(Fail::new(
            comm,
            ErrorClass::Rank,
            format!("rank {rank} is not a node in 0..{}", index.len()),
        ));
    }
    Ok(Topo::graph_neighbours(&index, &edges, rank as usize))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_neighbors_count(
    comm: MPI_Comm,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    call("MPI_Graph_neighbors_count", |s| {
        args::out_ptr(comm, nneighbors, "nneighbors")?;
        let n = graph_neighbours_of(s, comm, rank)?.len();
        // SAFETY: checked non-null.
        unsafe { put(nneighbors, n as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_neighbors(
    comm: MPI_Comm,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    call("MPI_Graph_neighbors", |s| {
        let v = graph_neighbours_of(s, comm, rank)?;
        let n = v.len().min(maxneighbors.max(0) as usize);
        if n > 0 {
            args::out_ptr(comm, neighbors, "neighbors")?;
            // SAFETY: checked non-null; room for `maxneighbors` (MPI contract).
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), neighbors, n) };
        }
        Ok(())
    })
}

/// The rank a mapping onto `nodes` processes gives the caller: its own
/// (ranks are never reordered), or `MPI_UNDEFINED` past the nodes.
fn map_rank(s: &mut State, comm: MPI_Comm, nodes: i64, out: *mut c_int) -> Result<(), Fail> {
    args::out_ptr(comm, out, "newrank")?;
    let id = args::intra_comm(s, comm)?;
    let c = s.rt.comm(id).map_err(|error| Fail { comm, error })?;
    if nodes < 0 || nodes > i64::from(c.size()) {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!(
                "{nodes} processes do not fit a communicator of {}",
                c.size()
            ),
        ));
    }
    let r = if i64::from(c.rank) < nodes {
        c.rank as c_int
    } else {
        MPI_UNDEFINED
    };
    // SAFETY: checked non-null.
    unsafe { put(out, r) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_map(
    comm: MPI_Comm,
    nnodes: c_int,
    _index: *const c_int,
    _edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    call("MPI_Graph_map", |s| {
        map_rank(s, comm, i64::from(nnodes), newrank)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_map(
    comm: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    _periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    call("MPI_Cart_map", |s| {
        // SAFETY: `ndims` entries (MPI contract).
        let d = unsafe { ints(comm, dims, ndims, "dims")? };
        if d.iter().any(|&x| x <= 0) {
            return Err(Fail::new(
                comm,
                ErrorClass::Dims,
                format!("invalid dimensions {d:?}"),
            ));
        }
        map_rank(s, comm, d.iter().map(|&x| i64::from(x)).product(), newrank)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_create(
    comm_old: MPI_Comm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_: *const c_int,
    info_: MPI_Info,
    _reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    call("MPI_Dist_graph_create", |s| {
        args::out_ptr(comm_old, comm_dist_graph, "comm_dist_graph")?;
        // A failure below leaves no communicator behind.
        // SAFETY: checked non-null.
        unsafe { put(comm_dist_graph, MPI_COMM_NULL) };
        info::check_optional(s, info_)?;
        let id = args::intra_comm(s, comm_old)?;
        let size =
            s.rt.comm(id)
                .map_err(|error| Fail {
                    comm: comm_old,
                    error,
                })?
                .size() as usize;
        // SAFETY: `n` sources and degrees, their sum of destinations and
        // weights (MPI contract).
        let (src, deg) = unsafe {
            (
                ints(comm_old, sources, n, "sources")?,
                ints(comm_old, degrees, n, "degrees")?,
            )
        };
        if let Some(d) = deg.iter().find(|&&d| d < 0) {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Arg,
                format!("negative degree {d}"),
            ));
        }
        let total = deg
            .iter()
            .try_fold(0 as c_int, |a, &d| a.checked_add(d))
            .ok_or_else(|| {
                Fail::new(
                    comm_old,
                    ErrorClass::Arg,
                    "the degrees add up to more edges than an int counts",
                )
            })?;
        // SAFETY: as above.
        let (dst, (w, weighted)) = unsafe {
            (
                ints(comm_old, destinations, total, "destinations")?,
                weights(comm_old, weights_, total)?,
            )
        };
        if let Some(r) = src
            .iter()
            .chain(&dst)
            .find(|&&r| r < 0 || r as usize >= size)
        {
            return Err(Fail::new(
                comm_old,
                ErrorClass::Rank,
                format!("neighbour {r} is not in 0..{size}"),
            ));
        }
        // Each edge u -> v goes to u as an out-edge and to v as an in-edge:
        // records (u, v, weight, 0 for out / 1 for in), exchanged all to all.
        let mut per: Vec<Vec<c_int>> = vec![Vec::new(); size];
        let mut e = 0;
        for (&u, &d) in src.iter().zip(&deg) {
            for _ in 0..d {
                let (v, wt) = (dst[e], w[e]);
                per[u as usize].extend([u, v, wt, 0]);
                per[v as usize].extend([u, v, wt, 1]);
                e += 1;
            }
        }
        let mut ex = EdgeExchange {
            comm: id,
            scounts: per.iter().map(|v| (v.len() * 4) as u64).collect(),
            send: per.concat(),
            rcounts: vec![0u64; size],
            recv: Vec::new(),
        };
        let fail = move |error| Fail {
            comm: comm_old,
            error,
        };
        // The exchange and the duplicate are started collectives waited for:
        // under MPI_THREAD_MULTIPLE the waits let other threads in.
        // SAFETY: `ex` owns the buffers and moves, with their heap memory in
        // place, into the wait below, which sees each schedule complete.
        let counts = unsafe { ex.start_counts(s) }.map_err(fail)?;
        let mut step = Some(DistStep::Counts(counts));
        state::block_on(s, move |s, may_end| loop {
            let sid = match step.as_ref().expect("run until it ends, not after") {
                DistStep::Counts(x) | DistStep::Records(x) | DistStep::Dup(_, x) => *x,
            };
            if let Err(e) = crate::coll::sched_done(s, sid, may_end)? {
                if let Some(DistStep::Dup(h, _)) = step {
                    crate::comm::discard(s, h);
                }
                return Some(Err(fail(e)));
            }
            step = Some(match step.take().expect("looked at above") {
                // SAFETY: as for the counts.
                DistStep::Counts(_) => match unsafe { ex.start_records(s) } {
                    Ok(x) => DistStep::Records(x),
                    Err(e) => return Some(Err(fail(e))),
                },
                DistStep::Records(_) => match s.rt.comm_idup(id) {
                    Ok((new, x)) => {
                        let ext = CommExt {
                            topo: Some(ex.topology(weighted)),
                            ..CommExt::default()
                        };
                        DistStep::Dup(register(s, id, Some(new), ext), x)
                    }
                    Err(e) => return Some(Err(fail(e))),
                },
                DistStep::Dup(h, _) => {
                    // SAFETY: checked non-null.
                    unsafe { put(comm_dist_graph, h) };
                    return Some(Ok(()));
                }
            });
        })
    })
}

/// Where `MPI_Dist_graph_create` stands: the exchange of record counts, of
/// the records, then the duplicate's agreement (its handle registered).
enum DistStep {
    Counts(SchedId),
    Records(SchedId),
    Dup(MPI_Comm, SchedId),
}

/// `MPI_Dist_graph_create`'s all-to-all of edge records (four ints each).
struct EdgeExchange {
    comm: CommId,
    /// Bytes of records for each rank, and the records in rank order.
    scounts: Vec<u64>,
    send: Vec<c_int>,
    /// Bytes of records from each rank, and the records.
    rcounts: Vec<u64>,
    recv: Vec<c_int>,
}

impl EdgeExchange {
    /// Starts the exchange of counts.
    ///
    /// # Safety
    /// `self`'s buffers must stay in place until the schedule completes.
    unsafe fn start_counts(&mut self, s: &mut State) -> tandem::Result<SchedId> {
        // SAFETY: both buffers hold a u64 per rank (the caller keeps them).
        unsafe {
            s.rt.coll_start(
                self.comm,
                CollCall::Alltoall {
                    send: Some(self.scounts.as_ptr().cast()),
                    recv: self.rcounts.as_mut_ptr().cast(),
                    len: 8,
                },
            )
        }
    }

    /// Starts the exchange of records, once the counts are in.
    ///
    /// # Safety
    /// As [`EdgeExchange::start_counts`].
    unsafe fn start_records(&mut self, s: &mut State) -> tandem::Result<SchedId> {
        let offsets = |c: &[u64]| -> Vec<usize> {
            c.iter()
                .scan(0usize, |at, &x| {
                    let o = *at;
                    *at += x as usize;
                    Some(o)
                })
                .collect()
        };
        let rbytes: Vec<usize> = self.rcounts.iter().map(|&c| c as usize).collect();
        self.recv = vec![0; rbytes.iter().sum::<usize>() / std::mem::size_of::<c_int>()];
        // SAFETY: the counts and displacements lie within both buffers (the
        // caller keeps them in place).
        unsafe {
            s.rt.coll_start(
                self.comm,
                CollCall::Alltoallv {
                    send: Some(self.send.as_ptr().cast()),
                    scounts: self.scounts.iter().map(|&c| c as usize).collect(),
                    sdispls: offsets(&self.scounts),
                    recv: self.recv.as_mut_ptr().cast(),
                    rcounts: rbytes,
                    rdispls: offsets(&self.rcounts),
                },
            )
        }
    }

    /// This rank's edges, from the records received.
    fn topology(&self, weighted: bool) -> Topo {
        let (mut ins, mut insw, mut outs, mut outsw) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in self.recv.chunks_exact(4) {
            if r[3] == 0 {
                outs.push(r[1]);
                outsw.push(r[2]);
            } else {
                ins.push(r[0]);
                insw.push(r[2]);
            }
        }
        Topo::DistGraph {
            sources: ins,
            sweights: insw,
            dests: outs,
            dweights: outsw,
            weighted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::balanced;

    #[test]
    fn dims_are_as_close_as_the_factors_allow() {
        assert_eq!(balanced(72, 2), [9, 8]);
        assert_eq!(balanced(8, 3), [2, 2, 2]);
        assert_eq!(balanced(7, 2), [7, 1]);
        assert_eq!(balanced(1, 3), [1, 1, 1]);
        assert_eq!(balanced(12, 1), [12]);
        // Equal spreads: the larger smallest factor, then the next.
        assert_eq!(balanced(5040, 3), [21, 16, 15]);
        assert_eq!(balanced(98784, 5), [14, 14, 9, 8, 7]);
        // Many dimensions for few nodes: ones at the end.
        assert_eq!(balanced(6, 4), [3, 2, 1, 1]);
    }
}

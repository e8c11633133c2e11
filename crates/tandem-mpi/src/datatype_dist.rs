//! The remaining datatype constructors and queries:
//! `MPI_Type_create_darray` (HPF block, cyclic and undistributed
//! dimensions, C and Fortran order), `MPI_Type_match_size`,
//! `MPI_Type_create_f90_integer/_real/_complex` and
//! `MPI_Type_get_value_index`.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::c_int;

use tandem::datatype::Layout;
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype::{
    array, build_error, contents, create, layout_any, register_committed, Contents,
};
use crate::state::{call_local, Fail};

fn arg_error(msg: String) -> Fail {
    Fail::new(MPI_COMM_WORLD, ErrorClass::Arg, msg)
}

/// How one dimension of a distributed array is split.
#[derive(Clone, Copy)]
struct Dim {
    gsize: usize,
    distrib: c_int,
    darg: c_int,
    psize: usize,
}

/// The runs `(first index, length)` of dimension `d` that the process at
/// coordinate `coord` owns, in increasing order (MPI-5.0 5.1.4).
fn local_runs(d: Dim, coord: usize) -> Result<Vec<(usize, usize)>, Fail> {
    let darg = |default: usize| -> Result<usize, Fail> {
        match d.darg {
            MPI_DISTRIBUTE_DFLT_DARG => Ok(default),
            a if a > 0 => Ok(a as usize),
            a => Err(arg_error(format!(
                "distribution argument {a} is not positive"
            ))),
        }
    };
    match d.distrib {
        MPI_DISTRIBUTE_NONE => {
            if d.psize != 1 {
                return Err(arg_error(format!(
                    "an undistributed dimension needs 1 process, not {}",
                    d.psize
                )));
            }
            Ok(vec![(0, d.gsize)])
        }
        MPI_DISTRIBUTE_BLOCK => {
            let blk = darg(d.gsize.div_ceil(d.psize))?;
            if blk.saturating_mul(d.psize) < d.gsize {
                return Err(arg_error(format!(
                    "blocks of {blk} on {} processes do not cover {} elements",
                    d.psize, d.gsize
                )));
            }
            let start = coord * blk;
            Ok(if start < d.gsize {
                vec![(start, blk.min(d.gsize - start))]
            } else {
                Vec::new()
            })
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let blk = darg(1)?;
            let cycle = blk * d.psize;
            let mut runs = Vec::new();
            let mut start = coord * blk;
            while start < d.gsize {
                runs.push((start, blk.min(d.gsize - start)));
                start += cycle;
            }
            Ok(runs)
        }
        other => Err(arg_error(format!("invalid distribution {other}"))),
    }
}

/// The layout of a process's part of a distributed array.
fn darray_layout(
    size: c_int,
    rank: c_int,
    dims: &[Dim],
    order: c_int,
    old: &Layout,
) -> Result<Layout, Fail> {
    if size <= 0 || rank < 0 || rank >= size {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Rank,
            format!("rank {rank} is not in 0..{size}"),
        ));
    }
    let grid = dims
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(d.psize))
        .unwrap_or(0);
    if grid != size as usize {
        return Err(arg_error(format!(
            "the process grid has {grid} processes, not size {size}"
        )));
    }
    // Coordinates in the process grid, row-major whatever the array order.
    let mut coords = vec![0usize; dims.len()];
    let mut r = rank as usize;
    for (i, d) in dims.iter().enumerate().rev() {
        coords[i] = r % d.psize;
        r /= d.psize;
    }
    let c_order = match order {
        MPI_ORDER_C => true,
        MPI_ORDER_FORTRAN => false,
        _ => return Err(arg_error(format!("invalid order {order}"))),
    };
    // From the fastest-varying dimension outwards: each level is the
    // owned runs of its dimension, of the level inside, spread over the
    // dimension's whole extent.
    let order_inner_first: Vec<usize> = if c_order {
        (0..dims.len()).rev().collect()
    } else {
        (0..dims.len()).collect()
    };
    let mut inner = old.clone();
    let mut stride = old.extent;
    for i in order_inner_first {
        let d = dims[i];
        let runs = local_runs(d, coords[i])?;
        let lens: Vec<usize> = runs.iter().map(|&(_, n)| n).collect();
        let disps: Vec<isize> = runs.iter().map(|&(s, _)| s as isize * stride).collect();
        let t = Layout::hindexed(&lens, &disps, &inner).map_err(build_error)?;
        let span = stride
            .checked_mul(d.gsize as isize)
            .ok_or_else(|| arg_error("the global array's extent overflows".into()))?;
        inner = Layout::resized(&t, 0, span);
        stride = span;
    }
    Ok(inner)
}

/// Both forms of `MPI_Type_create_darray`.
/// The global sizes as the call gave them: ints, or (`_c`) large counts,
/// which the envelope keeps apart (MPI-4).
enum Given {
    Ints(Vec<c_int>),
    Large(Vec<MPI_Count>),
}

#[allow(clippy::too_many_arguments)]
unsafe fn darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: Vec<usize>,
    gsizes_given: Given,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let n = gsizes.len();
        // SAFETY: `ndims` entries each (MPI contract).
        let (dist, darg, ps) = unsafe {
            (
                array(distribs, n, "array_of_distribs")?,
                array(dargs, n, "array_of_dargs")?,
                array(psizes, n, "array_of_psizes")?,
            )
        };
        let mut dims = Vec::with_capacity(n);
        for i in 0..n {
            if ps[i] <= 0 {
                return Err(arg_error(format!(
                    "array_of_psizes[{i}] = {} is not positive",
                    ps[i]
                )));
            }
            if gsizes[i] == 0 {
                return Err(arg_error(format!("array_of_gsizes[{i}] is not positive")));
            }
            dims.push(Dim {
                gsize: gsizes[i],
                distrib: dist[i],
                darg: darg[i],
                psize: ps[i] as usize,
            });
        }
        let old = layout_any(MPI_COMM_WORLD, oldtype)?;
        let l = darray_layout(size, rank, &dims, order, &old)?;
        let mut ints = vec![size, rank, ndims];
        if let Given::Ints(g) = &gsizes_given {
            ints.extend_from_slice(g);
        }
        ints.extend_from_slice(dist);
        ints.extend_from_slice(darg);
        ints.extend_from_slice(ps);
        ints.push(order);
        let mut c = contents(MPI_COMBINER_DARRAY, &ints, &[], &[oldtype]);
        if let Given::Large(g) = gsizes_given {
            c.large = g;
        }
        Ok((l, c))
    })
}

fn ndims_arg(ndims: c_int) -> Result<usize, Fail> {
    match usize::try_from(ndims) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(arg_error(format!("ndims {ndims} is not positive"))),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const c_int,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_darray", || {
        let n = ndims_arg(ndims)?;
        // SAFETY: `ndims` entries (MPI contract).
        let g = unsafe { array(array_of_gsizes, n, "array_of_gsizes")? };
        let sizes = g.iter().map(|&x| usize::try_from(x).unwrap_or(0)).collect();
        // SAFETY: the MPI contract on the arrays.
        unsafe {
            darray(
                size,
                rank,
                ndims,
                sizes,
                Given::Ints(g.to_vec()),
                array_of_distribs,
                array_of_dargs,
                array_of_psizes,
                order,
                oldtype,
                newtype,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_darray_c(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const MPI_Count,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_darray_c", || {
        let n = ndims_arg(ndims)?;
        // SAFETY: `ndims` entries (MPI contract).
        let g = unsafe { array(array_of_gsizes, n, "array_of_gsizes")? };
        let sizes = g.iter().map(|&x| usize::try_from(x).unwrap_or(0)).collect();
        // SAFETY: the MPI contract on the arrays.
        unsafe {
            darray(
                size,
                rank,
                ndims,
                sizes,
                Given::Large(g.to_vec()),
                array_of_distribs,
                array_of_dargs,
                array_of_psizes,
                order,
                oldtype,
                newtype,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    datatype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_match_size", || {
        args::out_ptr(MPI_COMM_WORLD, datatype, "datatype")?;
        // The C types where there is one (they reduce), else the Fortran
        // type of that size.
        let found = match (typeclass, size) {
            (MPI_TYPECLASS_INTEGER, 1) => MPI_INT8_T,
            (MPI_TYPECLASS_INTEGER, 2) => MPI_INT16_T,
            (MPI_TYPECLASS_INTEGER, 4) => MPI_INT32_T,
            (MPI_TYPECLASS_INTEGER, 8) => MPI_INT64_T,
            (MPI_TYPECLASS_INTEGER, 16) => MPI_INTEGER16,
            (MPI_TYPECLASS_REAL, 2) => MPI_REAL2,
            (MPI_TYPECLASS_REAL, 4) => MPI_FLOAT,
            (MPI_TYPECLASS_REAL, 8) => MPI_DOUBLE,
            (MPI_TYPECLASS_REAL, 16) => MPI_LONG_DOUBLE,
            (MPI_TYPECLASS_COMPLEX, 4) => MPI_COMPLEX4,
            (MPI_TYPECLASS_COMPLEX, 8) => MPI_C_FLOAT_COMPLEX,
            (MPI_TYPECLASS_COMPLEX, 16) => MPI_C_DOUBLE_COMPLEX,
            (MPI_TYPECLASS_COMPLEX, 32) => MPI_C_LONG_DOUBLE_COMPLEX,
            (MPI_TYPECLASS_INTEGER | MPI_TYPECLASS_REAL | MPI_TYPECLASS_COMPLEX, _) => {
                return Err(arg_error(format!(
                    "no predefined datatype of class {typeclass} has {size} bytes"
                )))
            }
            _ => return Err(arg_error(format!("invalid type class {typeclass}"))),
        };
        // SAFETY: checked non-null.
        unsafe { put(datatype, found) };
        Ok(())
    })
}

/// The Fortran type of `SELECTED_REAL_KIND(p, r)` on IEEE hardware
/// (`MPI_UNDEFINED` leaves a bound free); `None` if there is none.
fn real_kind(p: c_int, r: c_int) -> Option<usize> {
    let fits = |max_p: c_int, max_r: c_int| {
        (p == MPI_UNDEFINED || (0..=max_p).contains(&p))
            && (r == MPI_UNDEFINED || (0..=max_r).contains(&r))
    };
    if p == MPI_UNDEFINED && r == MPI_UNDEFINED {
        return None;
    }
    [(6, 37, 4), (15, 307, 8), (33, 4931, 16)]
        .into_iter()
        .find(|&(mp, mr, _)| fits(mp, mr))
        .map(|(_, _, bytes)| bytes)
}

/// Registers a `MPI_Type_create_f90_*` type: the named type's layout,
/// remembering the parameters (MPI-5.0 20.2.5: no datatypes in its
/// contents, usable without a commit).
fn f90_type(
    named: MPI_Datatype,
    combiner: c_int,
    ints: &[c_int],
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, newtype, "newtype")?;
    let l = layout_any(MPI_COMM_WORLD, named)?;
    let h = register_committed(
        (*l).clone(),
        Contents {
            combiner,
            ints: ints.to_vec(),
            ..Contents::default()
        },
    );
    // SAFETY: checked non-null.
    unsafe { put(newtype, h) };
    Ok(())
}

fn no_kind(what: &str) -> Fail {
    arg_error(format!(
        "no Fortran {what} kind has this precision and range"
    ))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_f90_integer(
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_f90_integer", || {
        // SELECTED_INT_KIND(r): the smallest integer holding 10^r.
        let named = match r {
            0..=2 => MPI_INTEGER1,
            3..=4 => MPI_INTEGER2,
            5..=9 => MPI_INTEGER4,
            10..=18 => MPI_INTEGER8,
            19..=38 => MPI_INTEGER16,
            _ => return Err(no_kind("INTEGER")),
        };
        f90_type(named, MPI_COMBINER_F90_INTEGER, &[r], newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_f90_real(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_f90_real", || {
        let named = match real_kind(p, r) {
            Some(4) => MPI_REAL4,
            Some(8) => MPI_REAL8,
            Some(_) => MPI_REAL16,
            None => return Err(no_kind("REAL")),
        };
        f90_type(named, MPI_COMBINER_F90_REAL, &[p, r], newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_f90_complex(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_f90_complex", || {
        let named = match real_kind(p, r) {
            Some(4) => MPI_COMPLEX8,
            Some(8) => MPI_COMPLEX16,
            Some(_) => MPI_COMPLEX32,
            None => return Err(no_kind("COMPLEX")),
        };
        f90_type(named, MPI_COMBINER_F90_COMPLEX, &[p, r], newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_value_index(
    value_type: MPI_Datatype,
    index_type: MPI_Datatype,
    pair_type: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_get_value_index", || {
        layout_any(MPI_COMM_WORLD, value_type)?;
        layout_any(MPI_COMM_WORLD, index_type)?;
        args::out_ptr(MPI_COMM_WORLD, pair_type, "pair_type")?;
        // The named pair types; Tandem builds no unnamed ones, so any other
        // combination has none (MPI_DATATYPE_NULL).
        let pair = match (value_type, index_type) {
            (MPI_FLOAT, MPI_INT) => MPI_FLOAT_INT,
            (MPI_DOUBLE, MPI_INT) => MPI_DOUBLE_INT,
            (MPI_LONG, MPI_INT) => MPI_LONG_INT,
            (MPI_INT, MPI_INT) => MPI_2INT,
            (MPI_SHORT, MPI_INT) => MPI_SHORT_INT,
            (MPI_LONG_DOUBLE, MPI_INT) => MPI_LONG_DOUBLE_INT,
            (MPI_REAL, MPI_REAL) => MPI_2REAL,
            (MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION) => MPI_2DOUBLE_PRECISION,
            (MPI_INTEGER, MPI_INTEGER) => MPI_2INTEGER,
            _ => MPI_DATATYPE_NULL,
        };
        // SAFETY: checked non-null.
        unsafe { put(pair_type, pair) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem::datatype::Prim;

    fn dim(gsize: usize, distrib: c_int, darg: c_int, psize: usize) -> Dim {
        Dim {
            gsize,
            distrib,
            darg,
            psize,
        }
    }

    #[test]
    fn runs_of_each_distribution() {
        let b = dim(10, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_DFLT_DARG, 3);
        assert_eq!(local_runs(b, 0).ok().unwrap(), vec![(0, 4)]);
        assert_eq!(local_runs(b, 2).ok().unwrap(), vec![(8, 2)]);
        let c = dim(10, MPI_DISTRIBUTE_CYCLIC, 2, 3);
        assert_eq!(local_runs(c, 1).ok().unwrap(), vec![(2, 2), (8, 2)]);
        assert_eq!(local_runs(c, 2).ok().unwrap(), vec![(4, 2)]);
        assert!(local_runs(dim(10, MPI_DISTRIBUTE_BLOCK, 3, 3), 0).is_err());
        assert!(local_runs(dim(10, MPI_DISTRIBUTE_NONE, 0, 2), 0).is_err());
    }

    #[test]
    fn two_dimensional_block_cyclic_in_both_orders() {
        let int = Layout::prim(Prim::I32);
        // 4 x 6 ints on a 2 x 2 grid: rows by block, columns cyclic.
        let dims = [
            dim(4, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_DFLT_DARG, 2),
            dim(6, MPI_DISTRIBUTE_CYCLIC, 1, 2),
        ];
        // Rank 1 is coordinate (0, 1): rows 0-1, columns 1, 3, 5.
        let l = darray_layout(4, 1, &dims, MPI_ORDER_C, &int).ok().unwrap();
        let offs: Vec<isize> = l.blocks.iter().map(|b| b.off / 4).collect();
        assert_eq!(offs, vec![1, 3, 5, 7, 9, 11]);
        assert_eq!(l.extent, 24 * 4);
        assert_eq!(l.size, 6 * 4);
        // Fortran order: dimension 0 varies fastest (element (i, j) at i + 4j).
        let l = darray_layout(4, 1, &dims, MPI_ORDER_FORTRAN, &int)
            .ok()
            .unwrap();
        let offs: Vec<isize> = l.blocks.iter().map(|b| b.off / 4).collect();
        assert_eq!(offs, vec![4, 12, 20]);
        assert_eq!(l.blocks[0].len, 8);
    }
}

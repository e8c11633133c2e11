//! Derived datatype constructors in their int forms (`MPI_Type_vector`)
//! and MPI-4 large-count forms (`MPI_Type_vector_c`), one implementation
//! for both: counts and displacements are read as 64-bit values, so a `_c`
//! constructor takes any count the layout can hold (`MPI_Type_contiguous_c`
//! of 5 GB of `MPI_CHAR` is one block). And what they leave for
//! `MPI_Type_get_envelope`/`_contents`: a `_c` constructor's `MPI_Count`
//! arguments are its large counts, in MPI-4's order (for the subarray and
//! darray constructors the sizes only; their other arguments stay ints).
//! The int forms of the decoding calls refuse a type with large counts
//! (`MPI_ERR_TYPE`): they have nowhere to put them.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::c_int;

use tandem::datatype::Layout;
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype::{
    array, build_error, create, entry_contents, is_predefined, layout_any, Contents,
};
use crate::state::{call_local, Fail};

/// How a constructor was called: `int` counts and `MPI_Aint`
/// displacements, or `MPI_Count` for both (the `_c` forms).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Int,
    Large,
}

/// An integer argument widened to 64 bits.
trait Wide: Copy {
    fn wide(self) -> i64;
}

impl Wide for c_int {
    fn wide(self) -> i64 {
        self.into()
    }
}

impl Wide for i64 {
    fn wide(self) -> i64 {
        self
    }
}

impl Wide for isize {
    fn wide(self) -> i64 {
        // MPI_Aint is 64 bits on every target Tandem builds for.
        self as i64
    }
}

/// `n` entries of a C array of integers, widened (empty when `n == 0`).
///
/// # Safety
/// `p` must be valid for `n` reads when `n > 0`.
unsafe fn wide<T: Wide>(p: *const T, n: usize, what: &str) -> Result<Vec<i64>, Fail> {
    // SAFETY: the caller's promise.
    Ok(unsafe { array(p, n, what)? }
        .iter()
        .map(|x| x.wide())
        .collect())
}

fn count_of(v: i64, what: &str) -> Result<usize, Fail> {
    usize::try_from(v).map_err(|_| {
        Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Count,
            format!("negative {what} {v}"),
        )
    })
}

fn counts_of(v: &[i64], what: &str) -> Result<Vec<usize>, Fail> {
    v.iter().map(|&x| count_of(x, what)).collect()
}

fn disps_of(v: &[i64]) -> Vec<isize> {
    // 64-bit targets only (see `Wide for isize`).
    v.iter().map(|&x| x as isize).collect()
}

/// The envelope of a constructor called in `form` whose integer arguments
/// are `ints` and displacements `aints` in the int form; in the large form
/// both are large counts, ints first. An int-form value came from an `int`
/// or an `MPI_Aint`, so it fits.
fn record(
    form: Form,
    combiner: c_int,
    ints: Vec<i64>,
    aints: Vec<i64>,
    types: &[MPI_Datatype],
) -> Contents {
    match form {
        Form::Int => Contents {
            combiner,
            ints: ints.iter().map(|&x| x as c_int).collect(),
            aints: disps_of(&aints),
            large: Vec::new(),
            types: types.to_vec(),
        },
        Form::Large => Contents {
            combiner,
            ints: Vec::new(),
            aints: Vec::new(),
            large: ints.into_iter().chain(aints).collect(),
            types: types.to_vec(),
        },
    }
}

fn contiguous(
    form: Form,
    count: i64,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let old = layout_any(MPI_COMM_WORLD, oldtype)?;
        let l = Layout::contiguous(count_of(count, "count")?, &old).map_err(build_error)?;
        let c = record(
            form,
            MPI_COMBINER_CONTIGUOUS,
            vec![count],
            vec![],
            &[oldtype],
        );
        Ok((l, c))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_contiguous", || {
        contiguous(Form::Int, count.into(), oldtype, newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_contiguous_c(
    count: MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_contiguous_c", || {
        contiguous(Form::Large, count, oldtype, newtype)
    })
}

/// `MPI_Type_vector` (`stride` in elements) or, with `bytes`,
/// `MPI_Type_create_hvector`.
fn vector(
    form: Form,
    bytes: bool,
    count: i64,
    blocklength: i64,
    stride: i64,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let old = layout_any(MPI_COMM_WORLD, oldtype)?;
        let (n, bl) = (
            count_of(count, "count")?,
            count_of(blocklength, "blocklength")?,
        );
        let l = if bytes {
            Layout::hvector(n, bl, stride as isize, &old)
        } else {
            Layout::vector(n, bl, stride as isize, &old)
        }
        .map_err(build_error)?;
        let c = if bytes {
            record(
                form,
                MPI_COMBINER_HVECTOR,
                vec![count, blocklength],
                vec![stride],
                &[oldtype],
            )
        } else {
            record(
                form,
                MPI_COMBINER_VECTOR,
                vec![count, blocklength, stride],
                vec![],
                &[oldtype],
            )
        };
        Ok((l, c))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_vector", || {
        let (c, b, s) = (count.into(), blocklength.into(), stride.into());
        vector(Form::Int, false, c, b, s, oldtype, newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_vector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_vector_c", || {
        vector(
            Form::Large,
            false,
            count,
            blocklength,
            stride,
            oldtype,
            newtype,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_hvector", || {
        let (c, b, s) = (count.into(), blocklength.into(), stride.wide());
        vector(Form::Int, true, c, b, s, oldtype, newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_hvector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_hvector_c", || {
        vector(
            Form::Large,
            true,
            count,
            blocklength,
            stride,
            oldtype,
            newtype,
        )
    })
}

/// The four indexed constructors: one block length for all (`block`) or
/// one each, displacements in elements or (`bytes`) in bytes.
enum Lengths {
    Each(Vec<i64>),
    Block(i64),
}

fn indexed(
    form: Form,
    bytes: bool,
    count: i64,
    lengths: Lengths,
    disps: Vec<i64>,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let n = count_of(count, "count")?;
        let old = layout_any(MPI_COMM_WORLD, oldtype)?;
        let (lens, mut ints) = match &lengths {
            Lengths::Each(v) => (counts_of(v, "blocklength")?, v.clone()),
            Lengths::Block(b) => (vec![count_of(*b, "blocklength")?; n], vec![*b]),
        };
        ints.insert(0, count);
        let d = disps_of(&disps);
        let l = if bytes {
            Layout::hindexed(&lens, &d, &old)
        } else {
            Layout::indexed(&lens, &d, &old)
        }
        .map_err(build_error)?;
        let block = matches!(lengths, Lengths::Block(_));
        let combiner = match (bytes, block) {
            (false, false) => MPI_COMBINER_INDEXED,
            (true, false) => MPI_COMBINER_HINDEXED,
            (false, true) => MPI_COMBINER_INDEXED_BLOCK,
            (true, true) => MPI_COMBINER_HINDEXED_BLOCK,
        };
        let c = if bytes {
            record(form, combiner, ints, disps, &[oldtype])
        } else {
            ints.extend(disps);
            record(form, combiner, ints, vec![], &[oldtype])
        };
        Ok((l, c))
    })
}

/// Reads `count` block lengths and displacements of an indexed
/// constructor and builds it.
///
/// # Safety
/// The arrays must hold `count` entries each (MPI contract).
unsafe fn indexed_from<L: Wide, D: Wide>(
    form: Form,
    bytes: bool,
    count: i64,
    blocklengths: *const L,
    disps: *const D,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    let n = count_of(count, "count")?;
    // SAFETY: the caller's promise.
    let (bl, d) = unsafe {
        (
            wide(blocklengths, n, "blocklengths")?,
            wide(disps, n, "displacements")?,
        )
    };
    indexed(form, bytes, count, Lengths::Each(bl), d, oldtype, newtype)
}

/// As [`indexed_from`], with one block length for all.
///
/// # Safety
/// `disps` must hold `count` entries (MPI contract).
unsafe fn block_from<D: Wide>(
    form: Form,
    bytes: bool,
    count: i64,
    blocklength: i64,
    disps: *const D,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    let n = count_of(count, "count")?;
    // SAFETY: the caller's promise.
    let d = unsafe { wide(disps, n, "displacements")? };
    let lengths = Lengths::Block(blocklength);
    indexed(form, bytes, count, lengths, d, oldtype, newtype)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_indexed(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_indexed", || {
        let (b, d) = (blocklengths, displacements);
        // SAFETY: MPI contract: `count` entries each.
        unsafe { indexed_from(Form::Int, false, count.into(), b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_indexed_c(
    count: MPI_Count,
    blocklengths: *const MPI_Count,
    displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_indexed_c", || {
        let (b, d) = (blocklengths, displacements);
        // SAFETY: MPI contract: `count` entries each.
        unsafe { indexed_from(Form::Large, false, count, b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_hindexed(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_hindexed", || {
        let (b, d) = (blocklengths, displacements);
        // SAFETY: MPI contract: `count` entries each.
        unsafe { indexed_from(Form::Int, true, count.into(), b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_hindexed_c(
    count: MPI_Count,
    blocklengths: *const MPI_Count,
    displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_hindexed_c", || {
        let (b, d) = (blocklengths, displacements);
        // SAFETY: MPI contract: `count` entries each.
        unsafe { indexed_from(Form::Large, true, count, b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    displacements: *const c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_indexed_block", || {
        let (c, b, d) = (count.into(), blocklength.into(), displacements);
        // SAFETY: MPI contract: `count` entries.
        unsafe { block_from(Form::Int, false, c, b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_indexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_indexed_block_c", || {
        let (c, b, d) = (count, blocklength, displacements);
        // SAFETY: MPI contract: `count` entries.
        unsafe { block_from(Form::Large, false, c, b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    displacements: *const MPI_Aint,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_hindexed_block", || {
        let (c, b, d) = (count.into(), blocklength.into(), displacements);
        // SAFETY: MPI contract: `count` entries.
        unsafe { block_from(Form::Int, true, c, b, d, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_hindexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    displacements: *const MPI_Count,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_hindexed_block_c", || {
        let (c, b, d) = (count, blocklength, displacements);
        // SAFETY: MPI contract: `count` entries.
        unsafe { block_from(Form::Large, true, c, b, d, oldtype, newtype) }
    })
}

/// `MPI_Type_create_struct` in either form.
///
/// # Safety
/// The arrays must hold `count` entries each (MPI contract).
unsafe fn create_struct<L: Wide, D: Wide>(
    form: Form,
    count: i64,
    blocklengths: *const L,
    displacements: *const D,
    types: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let n = count_of(count, "count")?;
        // SAFETY: the caller's promise.
        let (bl, d, ts) = unsafe {
            (
                wide(blocklengths, n, "blocklengths")?,
                wide(displacements, n, "displacements")?,
                array(types, n, "types")?,
            )
        };
        let layouts = ts
            .iter()
            .map(|&t| layout_any(MPI_COMM_WORLD, t))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Layout> = layouts.iter().map(|l| &**l).collect();
        let l = Layout::create_struct(&counts_of(&bl, "blocklength")?, &disps_of(&d), &refs)
            .map_err(build_error)?;
        let mut ints = vec![count];
        ints.extend(bl);
        Ok((l, record(form, MPI_COMBINER_STRUCT, ints, d, ts)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_struct(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const MPI_Aint,
    types_: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_struct", || {
        let (b, d) = (blocklengths, displacements);
        // SAFETY: MPI contract: `count` entries each.
        unsafe { create_struct(Form::Int, count.into(), b, d, types_, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_struct_c(
    count: MPI_Count,
    blocklengths: *const MPI_Count,
    displacements: *const MPI_Count,
    types_: *const MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_struct_c", || {
        let (b, d) = (blocklengths, displacements);
        // SAFETY: MPI contract: `count` entries each.
        unsafe { create_struct(Form::Large, count, b, d, types_, newtype) }
    })
}

fn resized(
    form: Form,
    oldtype: MPI_Datatype,
    lb: i64,
    extent: i64,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let old = layout_any(MPI_COMM_WORLD, oldtype)?;
        let l = Layout::resized(&old, lb as isize, extent as isize);
        let c = record(
            form,
            MPI_COMBINER_RESIZED,
            vec![],
            vec![lb, extent],
            &[oldtype],
        );
        Ok((l, c))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_resized(
    oldtype: MPI_Datatype,
    lb: MPI_Aint,
    extent: MPI_Aint,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_resized", || {
        resized(Form::Int, oldtype, lb.wide(), extent.wide(), newtype)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_resized_c(
    oldtype: MPI_Datatype,
    lb: MPI_Count,
    extent: MPI_Count,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_resized_c", || {
        resized(Form::Large, oldtype, lb, extent, newtype)
    })
}

/// `MPI_Type_create_subarray` in either form.
///
/// # Safety
/// The arrays must hold `ndims` entries each (MPI contract).
#[allow(clippy::too_many_arguments)]
unsafe fn subarray<T: Wide>(
    form: Form,
    ndims: c_int,
    sizes: *const T,
    subsizes: *const T,
    starts: *const T,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> Result<(), Fail> {
    create(newtype, || {
        let n = count_of(ndims.into(), "ndims")?;
        if n == 0 {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "ndims must be positive",
            ));
        }
        // SAFETY: the caller's promise.
        let (sz, sub, st) = unsafe {
            (
                wide(sizes, n, "sizes")?,
                wide(subsizes, n, "subsizes")?,
                wide(starts, n, "starts")?,
            )
        };
        let c_order = match order {
            MPI_ORDER_C => true,
            MPI_ORDER_FORTRAN => false,
            _ => {
                return Err(Fail::new(
                    MPI_COMM_WORLD,
                    ErrorClass::Arg,
                    format!("invalid order {order}"),
                ))
            }
        };
        let old = layout_any(MPI_COMM_WORLD, oldtype)?;
        let l = Layout::subarray(
            &counts_of(&sz, "size")?,
            &counts_of(&sub, "subsize")?,
            &counts_of(&st, "start")?,
            c_order,
            &old,
        )
        .map_err(build_error)?;
        let dims: Vec<i64> = sz.into_iter().chain(sub).chain(st).collect();
        let c = match form {
            Form::Int => {
                let mut ints = vec![ndims];
                ints.extend(dims.iter().map(|&x| x as c_int));
                ints.push(order);
                Contents {
                    combiner: MPI_COMBINER_SUBARRAY,
                    ints,
                    types: vec![oldtype],
                    ..Contents::default()
                }
            }
            Form::Large => Contents {
                combiner: MPI_COMBINER_SUBARRAY,
                ints: vec![ndims, order],
                large: dims,
                types: vec![oldtype],
                ..Contents::default()
            },
        };
        Ok((l, c))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_subarray(
    ndims: c_int,
    sizes: *const c_int,
    subsizes: *const c_int,
    starts: *const c_int,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_subarray", || {
        let (s, u, t) = (sizes, subsizes, starts);
        // SAFETY: MPI contract: `ndims` entries each.
        unsafe { subarray(Form::Int, ndims, s, u, t, order, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_subarray_c(
    ndims: c_int,
    sizes: *const MPI_Count,
    subsizes: *const MPI_Count,
    starts: *const MPI_Count,
    order: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_create_subarray_c", || {
        let (s, u, t) = (sizes, subsizes, starts);
        // SAFETY: MPI contract: `ndims` entries each.
        unsafe { subarray(Form::Large, ndims, s, u, t, order, oldtype, newtype) }
    })
}

/// What a datatype was made from: `NAMED` for a predefined one.
fn contents_of(datatype: MPI_Datatype) -> Result<Contents, Fail> {
    if is_predefined(datatype) {
        return Ok(Contents {
            combiner: MPI_COMBINER_NAMED,
            ..Contents::default()
        });
    }
    entry_contents(datatype)
}

/// The int forms' refusal of a type with large counts.
fn no_large(c: &Contents, func: &str) -> Result<(), Fail> {
    if c.large.is_empty() {
        return Ok(());
    }
    Err(Fail::new(
        MPI_COMM_WORLD,
        ErrorClass::Type,
        format!(
            "the datatype was made by a large-count constructor, whose {} large counts only {func}_c returns",
            c.large.len()
        ),
    ))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_envelope(
    datatype: MPI_Datatype,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    call_local("MPI_Type_get_envelope", || {
        for p in [num_integers, num_addresses, num_datatypes, combiner] {
            args::out_ptr(MPI_COMM_WORLD, p, "output")?;
        }
        let c = contents_of(datatype)?;
        no_large(&c, "MPI_Type_get_envelope")?;
        // SAFETY: all checked non-null.
        unsafe {
            put(num_integers, c.ints.len() as c_int);
            put(num_addresses, c.aints.len() as c_int);
            put(num_datatypes, c.types.len() as c_int);
            put(combiner, c.combiner);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_envelope_c(
    datatype: MPI_Datatype,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    call_local("MPI_Type_get_envelope_c", || {
        for p in [num_integers, num_addresses, num_large_counts, num_datatypes] {
            args::out_ptr(MPI_COMM_WORLD, p, "output")?;
        }
        args::out_ptr(MPI_COMM_WORLD, combiner, "combiner")?;
        let c = contents_of(datatype)?;
        // SAFETY: all checked non-null.
        unsafe {
            put(num_integers, c.ints.len() as MPI_Count);
            put(num_addresses, c.aints.len() as MPI_Count);
            put(num_large_counts, c.large.len() as MPI_Count);
            put(num_datatypes, c.types.len() as MPI_Count);
            put(combiner, c.combiner);
        }
        Ok(())
    })
}

/// Copies `c` into the caller's arrays after checking their capacities
/// (`None`: the int form, which has no large counts).
///
/// # Safety
/// Each array must hold as many entries as its capacity says (MPI
/// contract); null only when nothing is written.
unsafe fn put_contents(
    datatype: MPI_Datatype,
    c: &Contents,
    caps: [i64; 4],
    integers: *mut c_int,
    addresses: *mut MPI_Aint,
    large_counts: *mut MPI_Count,
    datatypes: *mut MPI_Datatype,
) -> Result<(), Fail> {
    if is_predefined(datatype) {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Type,
            "MPI_Type_get_contents of a predefined datatype",
        ));
    }
    let lens = [c.ints.len(), c.aints.len(), c.large.len(), c.types.len()];
    if caps.iter().zip(lens).any(|(&cap, len)| cap < len as i64) {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            "output arrays too small for the datatype's contents",
        ));
    }
    // SAFETY: the caller's promise, with the capacities checked above.
    unsafe {
        std::ptr::copy_nonoverlapping(c.ints.as_ptr(), integers, c.ints.len());
        std::ptr::copy_nonoverlapping(c.aints.as_ptr(), addresses, c.aints.len());
        std::ptr::copy_nonoverlapping(c.large.as_ptr(), large_counts, c.large.len());
        for i in 0..c.types.len() {
            datatypes
                .add(i)
                .write(crate::datatype::handed_out(datatype, i));
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_contents(
    datatype: MPI_Datatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    integers: *mut c_int,
    addresses: *mut MPI_Aint,
    datatypes: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_get_contents", || {
        let c = contents_of(datatype)?;
        no_large(&c, "MPI_Type_get_contents")?;
        let caps = [
            max_integers.into(),
            max_addresses.into(),
            0,
            max_datatypes.into(),
        ];
        let none = std::ptr::null_mut();
        // SAFETY: the MPI contract on the arrays.
        unsafe { put_contents(datatype, &c, caps, integers, addresses, none, datatypes) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_contents_c(
    datatype: MPI_Datatype,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    integers: *mut c_int,
    addresses: *mut MPI_Aint,
    large_counts: *mut MPI_Count,
    datatypes: *mut MPI_Datatype,
) -> c_int {
    call_local("MPI_Type_get_contents_c", || {
        let c = contents_of(datatype)?;
        let caps = [max_integers, max_addresses, max_large_counts, max_datatypes];
        // SAFETY: the MPI contract on the arrays.
        unsafe {
            put_contents(
                datatype,
                &c,
                caps,
                integers,
                addresses,
                large_counts,
                datatypes,
            )
        }
    })
}

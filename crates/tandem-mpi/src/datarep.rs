//! File data representations: how a file view's data is stored.
//!
//! - "native" (and "internal", which is native here): memory bytes as they
//!   are.
//! - "external32": the standard's portable representation (big-endian,
//!   IEEE), converted with the `MPI_Pack_external` tables, for views and
//!   buffers whose primitives keep their native size in it (every C type
//!   but `long` and `wchar_t`, which external32 narrows; those are refused
//!   with `MPI_ERR_UNSUPPORTED_DATAREP`). Keeping sizes lets a view be laid
//!   out once, natively, for both.
//! - user representations (`MPI_Register_datarep`, `_c`): the application's
//!   conversion functions, called with the memory buffer and datatype of
//!   each access; their extent function must give every primitive its
//!   native size, for the same reason (checked when a view names one).
#![allow(clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Arc;

use tandem::datatype::{PairKind, Prim};
use tandem::ErrorClass;

use crate::abi::*;
use crate::datatype::{self, Typed};
use crate::external::{self, Conv};
use crate::state::{call, Fail, State};

/// One registered representation's functions.
enum Conversion {
    /// `MPI_CONVERSION_FN_NULL`: the bytes are stored as they are.
    Null,
    Int(MPI_Datarep_conversion_function),
    Large(MPI_Datarep_conversion_function_c),
}

/// A representation `MPI_Register_datarep` registered.
pub struct UserRep {
    read: Conversion,
    write: Conversion,
    extent: Option<MPI_Datarep_extent_function>,
    /// The application's `extra_state` (an address), handed back to its
    /// functions.
    extra: usize,
}

/// The representations registered in this process (they last until
/// `MPI_Finalize`; the standard has no way to remove one).
#[derive(Default)]
pub struct Datareps {
    user: HashMap<String, Arc<UserRep>>,
}

/// The representation a file view uses.
#[derive(Clone, Default)]
pub enum Datarep {
    #[default]
    Native,
    External32,
    User(Arc<UserRep>),
}

fn unsupported(msg: impl Into<String>) -> Fail {
    Fail::new(MPI_COMM_WORLD, ErrorClass::UnsupportedDatarep, msg)
}

/// Resolves a view's representation, checking that its elementary and
/// file types can be laid out natively in it.
pub fn resolve(
    s: &State,
    name: &str,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
) -> Result<Datarep, Fail> {
    match name {
        "native" | "internal" => Ok(Datarep::Native),
        "external32" => {
            for dt in [etype, filetype] {
                let t = datatype::typed(MPI_COMM_WORLD, std::ptr::null_mut(), 0, dt)?;
                if external::same_size_convs(dt, &t).is_none() {
                    return Err(unsupported(format!(
                        "external32 stores an element of datatype {dt:#x} in a different \
                         size than memory (C long and wchar_t are narrowed); Tandem keeps \
                         views in external32 to types of unchanged size"
                    )));
                }
            }
            Ok(Datarep::External32)
        }
        _ => {
            let rep = s.ext.datareps.user.get(name).cloned().ok_or_else(|| {
                unsupported(format!(
                    "data representation {name:?} is neither \"native\", \"internal\", \
                     \"external32\" nor registered (MPI_Register_datarep)"
                ))
            })?;
            for dt in [etype, filetype] {
                check_user_extents(&rep, name, dt)?;
            }
            Ok(Datarep::User(rep))
        }
    }
}

/// A predefined datatype for each primitive, to ask a user representation's
/// extent function about.
fn prim_handle(p: Prim) -> MPI_Datatype {
    match p {
        Prim::I8 => MPI_SIGNED_CHAR,
        Prim::U8 => MPI_UNSIGNED_CHAR,
        Prim::I16 => MPI_SHORT,
        Prim::U16 => MPI_UNSIGNED_SHORT,
        Prim::I32 => MPI_INT,
        Prim::U32 => MPI_UNSIGNED,
        Prim::I64 => MPI_LONG_LONG,
        Prim::U64 => MPI_UNSIGNED_LONG_LONG,
        Prim::F32 => MPI_FLOAT,
        Prim::F64 => MPI_DOUBLE,
        Prim::LongDouble => MPI_LONG_DOUBLE,
        Prim::Bool => MPI_C_BOOL,
        Prim::Logical4 => MPI_LOGICAL,
        Prim::C32 => MPI_C_FLOAT_COMPLEX,
        Prim::C64 => MPI_C_DOUBLE_COMPLEX,
        Prim::CLongDouble => MPI_C_LONG_DOUBLE_COMPLEX,
        Prim::Byte | Prim::Opaque(_) => MPI_BYTE,
        Prim::Pair(k) => match k {
            PairKind::F32 => MPI_FLOAT_INT,
            PairKind::RealReal => MPI_2REAL,
            PairKind::DoubleDouble => MPI_2DOUBLE_PRECISION,
            PairKind::F64 => MPI_DOUBLE_INT,
            PairKind::I64 => MPI_LONG_INT,
            PairKind::I32 => MPI_2INT,
            PairKind::I16 => MPI_SHORT_INT,
            PairKind::LongDouble => MPI_LONG_DOUBLE_INT,
        },
    }
}

/// Asks the extent function about `dt` (if predefined) or each primitive
/// of its signature, and refuses a file extent other than the native one.
fn check_user_extents(rep: &UserRep, name: &str, dt: MPI_Datatype) -> Result<(), Fail> {
    let Some(f) = rep.extent else {
        return Err(unsupported(format!(
            "data representation {name:?} has no extent function"
        )));
    };
    let layout = datatype::layout(MPI_COMM_WORLD, dt)?;
    let asked: Vec<(MPI_Datatype, usize)> = if datatype::is_predefined(dt) {
        vec![(dt, layout.size)]
    } else {
        layout
            .prims
            .iter()
            .map(|&(p, _)| {
                let h = prim_handle(p);
                let size = datatype::packed_predefined(h).unwrap_or(0);
                (h, size)
            })
            .collect()
    };
    for (h, native) in asked {
        let mut extent: MPI_Aint = -1;
        // SAFETY: the application registered `f` as an extent function;
        // `extent` is a valid out pointer for the call.
        let rc = unsafe { f(h, &mut extent, rep.extra as *mut c_void) };
        if rc != MPI_SUCCESS {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Other,
                format!("the extent function of {name:?} failed for datatype {h:#x} ({rc})"),
            ));
        }
        if usize::try_from(extent).ok() != Some(native) {
            return Err(unsupported(format!(
                "data representation {name:?} gives datatype {h:#x} a file extent of \
                 {extent} bytes against {native} in memory; Tandem supports \
                 representations that keep sizes"
            )));
        }
    }
    Ok(())
}

/// `MPI_File_get_type_extent`: a datatype's extent in the file. A
/// predefined datatype has its size in the representation (4 bytes for
/// `MPI_LONG` in external32, what the extent function says for a
/// registered one); a derived one, its memory extent (the views Tandem
/// accepts keep sizes).
pub fn file_extent(rep: &Datarep, dt: MPI_Datatype) -> Result<MPI_Aint, Fail> {
    let layout = datatype::layout_any(MPI_COMM_WORLD, dt)?;
    let native = layout.extent as MPI_Aint;
    if !datatype::is_predefined(dt) {
        return Ok(native);
    }
    match rep {
        Datarep::Native => Ok(native),
        Datarep::External32 => {
            let t = Typed {
                ptr: std::ptr::null_mut(),
                count: 1,
                layout,
            };
            Ok(external::external_size_of(dt, &t) as MPI_Aint)
        }
        Datarep::User(rep) => match rep.extent {
            None => Ok(native),
            Some(f) => {
                let mut extent: MPI_Aint = -1;
                // SAFETY: the application's extent function; `extent` is a
                // valid out pointer.
                let rc = unsafe { f(dt, &mut extent, rep.extra as *mut c_void) };
                if rc == MPI_SUCCESS {
                    Ok(extent)
                } else {
                    Err(Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::Other,
                        format!("the extent function failed for datatype {dt:#x} ({rc})"),
                    ))
                }
            }
        },
    }
}

/// What one access converts.
pub enum Plan {
    Native,
    External32(Vec<Conv>),
    User {
        rep: Arc<UserRep>,
        dt: MPI_Datatype,
        buf: *mut c_void,
        count: usize,
    },
}

impl Plan {
    /// Whether the data must go through a staging buffer.
    pub fn converts(&self) -> bool {
        !matches!(self, Plan::Native)
    }
}

/// The conversion an access of `count` elements of `dt` at `buf` needs.
pub fn plan(rep: &Datarep, buf: *mut c_void, dt: MPI_Datatype, t: &Typed) -> Result<Plan, Fail> {
    Ok(match rep {
        Datarep::Native => Plan::Native,
        Datarep::External32 => {
            Plan::External32(external::same_size_convs(dt, t).ok_or_else(|| {
                unsupported(format!(
                    "external32 stores datatype {dt:#x} in a different size than memory \
                     (C long and wchar_t are narrowed)"
                ))
            })?)
        }
        Datarep::User(rep) => Plan::User {
            rep: rep.clone(),
            dt,
            buf,
            count: t.count,
        },
    })
}

fn conversion_failed(rc: c_int) -> Fail {
    Fail {
        comm: MPI_COMM_WORLD,
        error: crate::errcodes::from_callback(
            rc,
            format!("the data representation's conversion function returned {rc}"),
        ),
    }
}

/// # Safety
/// `f` is the application's conversion function; the buffers hold `count`
/// elements of `dt` (memory) and their file bytes.
unsafe fn convert(
    f: &Conversion,
    buf: *mut c_void,
    dt: MPI_Datatype,
    count: usize,
    file: &mut [u8],
    extra: usize,
) -> Result<bool, Fail> {
    let extra = extra as *mut c_void;
    let rc = match f {
        Conversion::Null => return Ok(false),
        Conversion::Int(f) => {
            let n = c_int::try_from(count).map_err(|_| {
                Fail::new(
                    MPI_COMM_WORLD,
                    ErrorClass::Count,
                    "more elements than an int counts: register the representation with \
                     MPI_Register_datarep_c",
                )
            })?;
            // SAFETY: the caller's promise.
            unsafe { f(buf, dt, n, file.as_mut_ptr().cast(), 0, extra) }
        }
        // SAFETY: the caller's promise.
        Conversion::Large(f) => unsafe {
            f(
                buf,
                dt,
                count as MPI_Count,
                file.as_mut_ptr().cast(),
                0,
                extra,
            )
        },
    };
    if rc == MPI_SUCCESS {
        Ok(true)
    } else {
        Err(conversion_failed(rc))
    }
}

/// Turns `packed`, the data of a write packed natively (its length is the
/// size in the file), into the file's bytes.
///
/// # Safety
/// For a user representation, the plan's buffer holds its elements.
pub unsafe fn to_file(plan: &Plan, packed: &mut [u8]) -> Result<(), Fail> {
    match plan {
        Plan::Native => {}
        Plan::External32(convs) => external::to_external_in_place(convs, packed),
        Plan::User {
            rep,
            dt,
            buf,
            count,
        } => {
            // SAFETY: the caller's promise; `packed` has room for the file
            // bytes (sizes are native, checked at the view).
            unsafe { convert(&rep.write, *buf, *dt, *count, packed, rep.extra)? };
        }
    }
    Ok(())
}

/// Converts `file` (the first `n` bytes read) into memory: in place to
/// packed native data, or, for a user representation, straight into the
/// application's buffer (then true: nothing left to unpack).
///
/// # Safety
/// As for [`to_file`], and the buffer is valid for writes.
pub unsafe fn from_file(plan: &Plan, file: &mut [u8], elem: usize) -> Result<bool, Fail> {
    match plan {
        Plan::Native => Ok(false),
        Plan::External32(convs) => {
            external::from_external_in_place(convs, file);
            Ok(false)
        }
        Plan::User { rep, dt, buf, .. } => {
            // Only whole elements that were read are converted.
            let count = file.len().checked_div(elem).unwrap_or(0);
            // SAFETY: the caller's promise.
            unsafe { convert(&rep.read, *buf, *dt, count, file, rep.extra) }
        }
    }
}

/// # Safety
/// `datarep` is a C string; the functions are the application's.
unsafe fn register(
    s: &mut State,
    datarep: *const c_char,
    read: Conversion,
    write: Conversion,
    extent: Option<MPI_Datarep_extent_function>,
    extra: *mut c_void,
) -> Result<(), Fail> {
    crate::args::out_ptr(MPI_COMM_WORLD, datarep.cast_mut(), "datarep")?;
    // SAFETY: a C string by the MPI contract.
    let name = unsafe { CStr::from_ptr(datarep) }
        .to_string_lossy()
        .into_owned();
    if name.is_empty() || name.len() >= MPI_MAX_DATAREP_STRING {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!(
                "a data representation's name must have 1 to {} characters",
                MPI_MAX_DATAREP_STRING - 1
            ),
        ));
    }
    if matches!(name.as_str(), "native" | "internal" | "external32")
        || s.ext.datareps.user.contains_key(&name)
    {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::DupDatarep,
            format!("data representation {name:?} is already defined"),
        ));
    }
    let rep = UserRep {
        read,
        write,
        extent,
        extra: extra as usize,
    };
    s.ext.datareps.user.insert(name, Arc::new(rep));
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Register_datarep(
    datarep: *const c_char,
    read_conversion_fn: Option<MPI_Datarep_conversion_function>,
    write_conversion_fn: Option<MPI_Datarep_conversion_function>,
    dtype_file_extent_fn: Option<MPI_Datarep_extent_function>,
    extra_state: *mut c_void,
) -> c_int {
    let conv =
        |f: Option<MPI_Datarep_conversion_function>| f.map_or(Conversion::Null, Conversion::Int);
    call("MPI_Register_datarep", |s| {
        // SAFETY: the MPI contract on the arguments.
        unsafe {
            register(
                s,
                datarep,
                conv(read_conversion_fn),
                conv(write_conversion_fn),
                dtype_file_extent_fn,
                extra_state,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Register_datarep_c(
    datarep: *const c_char,
    read_conversion_fn: Option<MPI_Datarep_conversion_function_c>,
    write_conversion_fn: Option<MPI_Datarep_conversion_function_c>,
    dtype_file_extent_fn: Option<MPI_Datarep_extent_function>,
    extra_state: *mut c_void,
) -> c_int {
    let conv = |f: Option<MPI_Datarep_conversion_function_c>| {
        f.map_or(Conversion::Null, Conversion::Large)
    };
    call("MPI_Register_datarep_c", |s| {
        // SAFETY: the MPI contract on the arguments.
        unsafe {
            register(
                s,
                datarep,
                conv(read_conversion_fn),
                conv(write_conversion_fn),
                dtype_file_extent_fn,
                extra_state,
            )
        }
    })
}

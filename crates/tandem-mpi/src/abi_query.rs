//! The MPI-5.0 ABI queries: `MPI_Abi_get_version`, `MPI_Abi_get_info`,
//! the Fortran registration (`MPI_Abi_set/get_fortran_info`,
//! `_fortran_booleans`), and the status field accessors
//! `MPI_Status_get/set_source`, `_tag`, `_error`.
//!
//! Tandem has no Fortran bindings, so it does not know the Fortran
//! compiler: `MPI_Abi_get_fortran_info` gives `MPI_INFO_NULL` and
//! `MPI_Abi_get_fortran_booleans` "not set" until a Fortran layer registers
//! them, once (a second registration is `MPI_ERR_ABI`, as the standard
//! says). Tandem's Fortran datatypes have fixed sizes (`MPI_INTEGER`,
//! `MPI_LOGICAL` and `MPI_REAL` 4 bytes, `MPI_DOUBLE_PRECISION` 8), so a
//! registration stating other default sizes is refused with
//! `MPI_ERR_UNSUPPORTED_OPERATION` rather than recorded and ignored.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::info;
use crate::state::{call, call_stateless, Fail};

#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_version(
    abi_major: *mut c_int,
    abi_minor: *mut c_int,
) -> c_int {
    // Callable at any time, before MPI_Init and after MPI_Finalize too.
    call_stateless("MPI_Abi_get_version", || {
        if abi_major.is_null() || abi_minor.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null; ints the caller owns.
        unsafe {
            put(abi_major, MPI_ABI_VERSION);
            put(abi_minor, MPI_ABI_SUBVERSION);
        }
        MPI_SUCCESS
    })
}

/// The keys of `MPI_Abi_get_info` (MPI-5.0 20.2).
fn abi_info() -> Vec<(String, String)> {
    [
        ("mpi_aint_size", std::mem::size_of::<MPI_Aint>()),
        ("mpi_count_size", std::mem::size_of::<MPI_Count>()),
        ("mpi_offset_size", std::mem::size_of::<MPI_Offset>()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_info(info_: *mut MPI_Info) -> c_int {
    call("MPI_Abi_get_info", |s| {
        args::out_ptr(MPI_COMM_WORLD, info_, "info")?;
        let h = info::add(s, abi_info());
        // SAFETY: checked non-null.
        unsafe { put(info_, h) };
        Ok(())
    })
}

/// What a Fortran layer registered.
struct Fortran {
    info: Option<Vec<(String, String)>>,
    /// Size of LOGICAL, and the bytes of .TRUE. and .FALSE.
    booleans: Option<(usize, Vec<u8>, Vec<u8>)>,
}

static FORTRAN: Mutex<Fortran> = Mutex::new(Fortran {
    info: None,
    booleans: None,
});

fn fortran() -> std::sync::MutexGuard<'static, Fortran> {
    FORTRAN.lock().unwrap_or_else(|p| p.into_inner())
}

fn already_set(what: &str) -> Fail {
    Fail::new(
        MPI_COMM_WORLD,
        ErrorClass::Abi,
        format!("the Fortran {what} are already set; only the first call counts"),
    )
}

/// The default Fortran sizes Tandem's datatypes have.
const FORTRAN_SIZES: [(&str, usize); 4] = [
    ("mpi_logical_size", 4),
    ("mpi_integer_size", 4),
    ("mpi_real_size", 4),
    ("mpi_double_precision_size", 8),
];

#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_set_fortran_info(info_: MPI_Info) -> c_int {
    call("MPI_Abi_set_fortran_info", |s| {
        let pairs = info::pairs(s, info_)?;
        if fortran().info.is_some() {
            return Err(already_set("properties"));
        }
        for (key, size) in FORTRAN_SIZES {
            let Some((_, v)) = pairs.iter().find(|(k, _)| k == key) else {
                continue;
            };
            match v.trim().parse::<usize>() {
                Ok(n) if n == size => {}
                Ok(n) => {
                    return Err(Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::Unsupported,
                        format!("{key} = {n}: Tandem's Fortran datatypes have {size} bytes"),
                    ))
                }
                Err(_) => {
                    return Err(Fail::new(
                        MPI_COMM_WORLD,
                        ErrorClass::InfoValue,
                        format!("{key} = {v:?} is not a size"),
                    ))
                }
            }
        }
        fortran().info = Some(pairs);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_fortran_info(info_: *mut MPI_Info) -> c_int {
    call("MPI_Abi_get_fortran_info", |s| {
        args::out_ptr(MPI_COMM_WORLD, info_, "info")?;
        let known = fortran().info.clone();
        let h = match known {
            Some(pairs) => info::add(s, pairs),
            None => MPI_INFO_NULL,
        };
        // SAFETY: checked non-null.
        unsafe { put(info_, h) };
        Ok(())
    })
}

fn logical_size(n: c_int) -> Result<usize, Fail> {
    match usize::try_from(n) {
        Ok(n) if n.is_power_of_two() && n <= 16 => Ok(n),
        _ => Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!("logical_size {n} is not 1, 2, 4, 8 or 16"),
        )),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_set_fortran_booleans(
    logical_size_: c_int,
    logical_true: *mut c_void,
    logical_false: *mut c_void,
) -> c_int {
    call("MPI_Abi_set_fortran_booleans", |_| {
        let n = logical_size(logical_size_)?;
        args::out_ptr(MPI_COMM_WORLD, logical_true, "logical_true")?;
        args::out_ptr(MPI_COMM_WORLD, logical_false, "logical_false")?;
        let mut f = fortran();
        if f.booleans.is_some() {
            return Err(already_set("booleans"));
        }
        // SAFETY: checked non-null; each points to a LOGICAL of `n` bytes
        // (the MPI contract).
        let (t, fl) = unsafe {
            (
                std::slice::from_raw_parts(logical_true.cast::<u8>(), n).to_vec(),
                std::slice::from_raw_parts(logical_false.cast::<u8>(), n).to_vec(),
            )
        };
        if t == fl {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "the values given for .TRUE. and .FALSE. are the same",
            ));
        }
        f.booleans = Some((n, t, fl));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abi_get_fortran_booleans(
    logical_size_: c_int,
    logical_true: *mut c_void,
    logical_false: *mut c_void,
    is_set: *mut c_int,
) -> c_int {
    call("MPI_Abi_get_fortran_booleans", |_| {
        let n = logical_size(logical_size_)?;
        args::out_ptr(MPI_COMM_WORLD, is_set, "is_set")?;
        let known = fortran().booleans.clone();
        match known {
            // Values for another LOGICAL kind are not known.
            Some((size, t, f)) if size == n => {
                args::out_ptr(MPI_COMM_WORLD, logical_true, "logical_true")?;
                args::out_ptr(MPI_COMM_WORLD, logical_false, "logical_false")?;
                // SAFETY: checked non-null; each holds a LOGICAL of `n`
                // bytes (the MPI contract); `is_set` checked non-null.
                unsafe {
                    std::ptr::copy_nonoverlapping(t.as_ptr(), logical_true.cast::<u8>(), n);
                    std::ptr::copy_nonoverlapping(f.as_ptr(), logical_false.cast::<u8>(), n);
                    put(is_set, 1);
                }
            }
            // SAFETY: checked non-null.
            _ => unsafe { put(is_set, 0) },
        }
        Ok(())
    })
}

/// Reads one public field of a status; needs no library state (a
/// generalized request's query callback may call it).
fn get_field(status: *const MPI_Status, out: *mut c_int, field: fn(&MPI_Status) -> c_int) -> c_int {
    if status.is_null() || out.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: checked non-null; a status and an int the caller owns.
    unsafe { put(out, field(&*status)) };
    MPI_SUCCESS
}

fn set_field(status: *mut MPI_Status, value: c_int, field: fn(&mut MPI_Status, c_int)) -> c_int {
    if status.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: checked non-null; a status the caller owns.
    field(unsafe { &mut *status }, value);
    MPI_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_get_source(
    status: *const MPI_Status,
    source: *mut c_int,
) -> c_int {
    call_stateless("MPI_Status_get_source", || {
        get_field(status, source, |s| s.MPI_SOURCE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_get_tag(status: *const MPI_Status, tag: *mut c_int) -> c_int {
    call_stateless("MPI_Status_get_tag", || {
        get_field(status, tag, |s| s.MPI_TAG)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_get_error(
    status: *const MPI_Status,
    error: *mut c_int,
) -> c_int {
    call_stateless("MPI_Status_get_error", || {
        get_field(status, error, |s| s.MPI_ERROR)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_source(status: *mut MPI_Status, source: c_int) -> c_int {
    call_stateless("MPI_Status_set_source", || {
        set_field(status, source, |s, v| s.MPI_SOURCE = v)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_tag(status: *mut MPI_Status, tag: c_int) -> c_int {
    call_stateless("MPI_Status_set_tag", || {
        set_field(status, tag, |s, v| s.MPI_TAG = v)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Status_set_error(status: *mut MPI_Status, error: c_int) -> c_int {
    call_stateless("MPI_Status_set_error", || {
        set_field(status, error, |s, v| s.MPI_ERROR = v)
    })
}

/// `MPI_Status_c2f`: a Fortran status is eight INTEGERs laid out as
/// `MPI_Status` (`MPI_F_STATUS_SIZE`, `MPI_F_SOURCE` ...).
#[no_mangle]
pub unsafe extern "C" fn MPI_Status_c2f(
    c_status: *const MPI_Status,
    f_status: *mut MPI_Fint,
) -> c_int {
    call_stateless("MPI_Status_c2f", || {
        if c_status.is_null() || f_status.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null; a status and MPI_F_STATUS_SIZE integers
        // the caller owns (the layouts are the same size, checked in abi.rs).
        unsafe { f_status.cast::<MPI_Status>().write_unaligned(*c_status) };
        MPI_SUCCESS
    })
}

/// `MPI_Status_f2c`: the other way.
#[no_mangle]
pub unsafe extern "C" fn MPI_Status_f2c(
    f_status: *const MPI_Fint,
    c_status: *mut MPI_Status,
) -> c_int {
    call_stateless("MPI_Status_f2c", || {
        if c_status.is_null() || f_status.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: as in MPI_Status_c2f.
        unsafe { c_status.write(f_status.cast::<MPI_Status>().read_unaligned()) };
        MPI_SUCCESS
    })
}

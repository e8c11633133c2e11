//! The Fortran bindings (`mpif.h`, `use mpi`, `use mpi_f08`): what the
//! generated entry points (`fortran_generated.rs`, written by
//! `scripts/gen-fortran.py` from `include/mpi.h`) share, and the few
//! routines whose Fortran form is not a mechanical translation of the C one.
//!
//! gfortran passes every argument by reference and each CHARACTER
//! argument's length after the others. Handles are INTEGERs: the MPI-5.0
//! ABI's `MPI_<Kind>_toint` values. A Fortran status is eight INTEGERs laid
//! out as the C `MPI_Status`, so statuses pass through. `MPI_BOTTOM`,
//! `MPI_IN_PLACE`, `MPI_STATUS_IGNORE` and the other sentinels are Fortran
//! variables (common blocks in `mpif.h`, `bind(C)` variables in the
//! modules) defined here; a call recognises them by address.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]
#![allow(non_upper_case_globals)]

use std::cell::UnsafeCell;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::abi::*;
use crate::handle_int;

#[path = "fortran_generated.rs"]
mod generated;

/// A Fortran user reduction: `USER_FUNCTION(INVEC, INOUTVEC, LEN, DATATYPE)`.
pub type FortranUserFunction =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);

/// The storage of one Fortran sentinel. The program may write to it (it is
/// an ordinary variable to the compiler), so it lives in writable memory.
#[repr(C)]
pub struct Sentinel<const N: usize>(UnsafeCell<[c_int; N]>);

// SAFETY: the library never reads or writes the contents, only compares
// addresses.
unsafe impl<const N: usize> Sync for Sentinel<N> {}

impl<const N: usize> Sentinel<N> {
    const fn new() -> Self {
        Sentinel(UnsafeCell::new([0; N]))
    }
}

/// A sentinel of CHARACTER type (`MPI_ARGV_NULL`, `MPI_ARGVS_NULL`):
/// one-byte characters.
#[repr(C)]
pub struct CharSentinel<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: as for Sentinel.
unsafe impl<const N: usize> Sync for CharSentinel<N> {}

impl<const N: usize> CharSentinel<N> {
    const fn new() -> Self {
        CharSentinel(UnsafeCell::new([b' '; N]))
    }
}

// The names are the common blocks' (gfortran adds an underscore); the sizes
// are those mpif.h declares.
#[no_mangle]
pub static tandem_status_ignore_: Sentinel<8> = Sentinel::new();
#[no_mangle]
pub static tandem_statuses_ignore_: Sentinel<8> = Sentinel::new();
#[no_mangle]
pub static tandem_bottom_: Sentinel<1> = Sentinel::new();
#[no_mangle]
pub static tandem_in_place_: Sentinel<1> = Sentinel::new();
#[no_mangle]
pub static tandem_errcodes_ignore_: Sentinel<1> = Sentinel::new();
#[no_mangle]
pub static tandem_unweighted_: Sentinel<1> = Sentinel::new();
#[no_mangle]
pub static tandem_weights_empty_: Sentinel<1> = Sentinel::new();
#[no_mangle]
pub static tandem_argv_null_: CharSentinel<1> = CharSentinel::new();
#[no_mangle]
pub static tandem_argvs_null_: CharSentinel<1> = CharSentinel::new();

/// The sentinels' addresses as the program sees them.
struct Addresses {
    status_ignore: usize,
    statuses_ignore: usize,
    bottom: usize,
    in_place: usize,
    unweighted: usize,
    weights_empty: usize,
    errcodes_ignore: usize,
    argv_null: usize,
    argvs_null: usize,
}

/// The address of a sentinel's one definition in the process. An
/// executable that names a common block or variable keeps its own copy
/// (a common symbol, or a copy relocation) and the dynamic linker binds
/// every reference to that copy, so the library asks the dynamic linker
/// rather than taking the address of its own definition.
fn canonical<T>(name: &[u8], own: &T) -> usize {
    debug_assert!(name.ends_with(b"\0"));
    // SAFETY: `name` is NUL-terminated; dlsym only reads it.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) };
    if found.is_null() {
        own as *const T as usize
    } else {
        found as usize
    }
}

fn addresses() -> &'static Addresses {
    static ADDRESSES: OnceLock<Addresses> = OnceLock::new();
    ADDRESSES.get_or_init(|| Addresses {
        status_ignore: canonical(b"tandem_status_ignore_\0", &tandem_status_ignore_),
        statuses_ignore: canonical(b"tandem_statuses_ignore_\0", &tandem_statuses_ignore_),
        bottom: canonical(b"tandem_bottom_\0", &tandem_bottom_),
        in_place: canonical(b"tandem_in_place_\0", &tandem_in_place_),
        unweighted: canonical(b"tandem_unweighted_\0", &tandem_unweighted_),
        weights_empty: canonical(b"tandem_weights_empty_\0", &tandem_weights_empty_),
        errcodes_ignore: canonical(b"tandem_errcodes_ignore_\0", &tandem_errcodes_ignore_),
        argv_null: canonical(b"tandem_argv_null_\0", &tandem_argv_null_),
        argvs_null: canonical(b"tandem_argvs_null_\0", &tandem_argvs_null_),
    })
}

/// A choice buffer: Fortran's `MPI_BOTTOM` and `MPI_IN_PLACE` become C's.
fn fix_choice(p: *mut c_void) -> *mut c_void {
    let a = addresses();
    match p as usize {
        x if x == a.bottom => std::ptr::null_mut(),
        x if x == a.in_place => std::ptr::without_provenance_mut(MPI_IN_PLACE),
        _ => p,
    }
}

/// A status or array of statuses: `MPI_STATUS_IGNORE` and
/// `MPI_STATUSES_IGNORE` become C's (null).
fn fix_status(p: *mut MPI_Status) -> *mut MPI_Status {
    let a = addresses();
    let x = p as usize;
    if x == a.status_ignore || x == a.statuses_ignore {
        std::ptr::null_mut()
    } else {
        p
    }
}

/// A weights array: `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` become C's.
fn fix_weights(p: *mut c_int) -> *mut c_int {
    let a = addresses();
    match p as usize {
        x if x == a.unweighted => MPI_UNWEIGHTED as *mut c_int,
        x if x == a.weights_empty => MPI_WEIGHTS_EMPTY as *mut c_int,
        _ => p,
    }
}

/// The C string of a Fortran CHARACTER argument: trailing blanks dropped,
/// cut at a NUL if there is one.
///
/// # Safety
/// `p` addresses `len` bytes.
unsafe fn str_in(p: *const c_char, len: usize) -> CString {
    let bytes: &[u8] = if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    };
    let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    CString::new(&bytes[..end]).unwrap_or_default()
}

/// The C string of an info key or value from Fortran: as [`str_in`], and
/// leading blanks dropped too (the standard makes leading and trailing
/// blanks of Fortran info keys and values not significant).
///
/// # Safety
/// `p` addresses `len` bytes.
unsafe fn info_str_in(p: *const c_char, len: usize) -> CString {
    // SAFETY: the caller's contract.
    let s = unsafe { str_in(p, len) };
    let bytes = s.as_bytes();
    let start = bytes.iter().position(|&b| b != b' ').unwrap_or(bytes.len());
    if start == 0 {
        s
    } else {
        CString::new(&bytes[start..]).unwrap_or_default()
    }
}

/// The smallest buffer an output string gets from C: the longest string
/// any MPI function writes (`MPI_MAX_LIBRARY_VERSION_STRING`).
const STR_OUT_MIN: usize = 8192;

/// Copies a C string into a Fortran CHARACTER of `len` bytes, blank-padded
/// (cut if longer).
///
/// # Safety
/// `out` addresses `len` writable bytes.
unsafe fn str_out(c: &[c_char], out: *mut c_char, len: usize) {
    if out.is_null() || len == 0 {
        return;
    }
    let n = c.iter().position(|&b| b == 0).unwrap_or(c.len()).min(len);
    // SAFETY: the caller's contract; `n <= len` and `n <= c.len()`.
    unsafe {
        std::ptr::copy_nonoverlapping(c.as_ptr(), out, n);
        std::ptr::write_bytes(out.add(n), b' ', len - n);
    }
}

/// Converts `n` INTEGER handles (none when `n` is not positive).
///
/// # Safety
/// `p` addresses `n` INTEGERs.
unsafe fn handles_in<H>(p: *const c_int, n: c_int, f: extern "C" fn(c_int) -> H) -> Vec<H> {
    if p.is_null() || n <= 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
        .iter()
        .map(|&x| f(x))
        .collect()
}

/// Writes handles back as INTEGERs.
///
/// # Safety
/// `p` addresses `v.len()` INTEGERs.
unsafe fn handles_out<H: Copy>(v: &[H], p: *mut c_int, f: extern "C" fn(H) -> c_int) {
    for (i, &h) in v.iter().enumerate() {
        // SAFETY: the caller's contract.
        unsafe { *p.add(i) = f(h) };
    }
}

/// Stores the error code; `mpi_f08`'s `ierror` is optional (absent: null).
///
/// # Safety
/// `p` is null or writable.
unsafe fn set_ierror(p: *mut c_int, rc: c_int) {
    if !p.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *p = rc };
    }
}

/// Fortran counts indices from 1.
///
/// # Safety
/// `p` addresses `n` INTEGERs when `n` is positive.
unsafe fn indices_to_fortran(p: *mut c_int, n: c_int) {
    if n == MPI_UNDEFINED || n <= 0 || p.is_null() {
        return;
    }
    for i in 0..n as usize {
        // SAFETY: the caller's contract.
        unsafe { *p.add(i) += 1 };
    }
}

/// How many datatypes an `alltoallw` call reads per side: the group size
/// (the remote group's for an intercommunicator), or for the neighbour
/// forms the in- or out-degree. 0 when the communicator is not valid (the
/// call itself then reports the error).
fn alltoallw_types(comm: MPI_Comm, neighbor: bool, send: bool) -> c_int {
    let mut n: c_int = 0;
    // SAFETY: every pointer is to a local.
    unsafe {
        if !neighbor {
            let mut inter: c_int = 0;
            if crate::pmpi::PMPI_Comm_test_inter(comm, &mut inter) != MPI_SUCCESS {
                return 0;
            }
            let rc = if inter != 0 {
                crate::pmpi::PMPI_Comm_remote_size(comm, &mut n)
            } else {
                crate::pmpi::PMPI_Comm_size(comm, &mut n)
            };
            return if rc == MPI_SUCCESS { n } else { 0 };
        }
        let mut topo: c_int = 0;
        if crate::pmpi::PMPI_Topo_test(comm, &mut topo) != MPI_SUCCESS {
            return 0;
        }
        match topo {
            MPI_CART if crate::pmpi::PMPI_Cartdim_get(comm, &mut n) == MPI_SUCCESS => 2 * n,
            MPI_GRAPH => {
                let mut rank: c_int = 0;
                if crate::pmpi::PMPI_Comm_rank(comm, &mut rank) == MPI_SUCCESS
                    && crate::pmpi::PMPI_Graph_neighbors_count(comm, rank, &mut n) == MPI_SUCCESS
                {
                    n
                } else {
                    0
                }
            }
            MPI_DIST_GRAPH => {
                let (mut indeg, mut outdeg, mut weighted) = (0, 0, 0);
                if crate::pmpi::PMPI_Dist_graph_neighbors_count(
                    comm,
                    &mut indeg,
                    &mut outdeg,
                    &mut weighted,
                ) == MPI_SUCCESS
                {
                    if send {
                        outdeg
                    } else {
                        indeg
                    }
                } else {
                    0
                }
            }
            _ => 0,
        }
    }
}

// ---------------------------------------------------------------------------
// Routines whose Fortran form differs from the C one
// ---------------------------------------------------------------------------

/// `MPI_INIT(IERROR)`: Fortran has no argc/argv.
#[no_mangle]
pub unsafe extern "C" fn mpi_init_(ierror: *mut c_int) {
    // SAFETY: MPI_Init accepts null arguments; ierror is null or writable.
    unsafe {
        let rc = crate::pmpi::PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut());
        set_ierror(ierror, rc);
    }
}

/// `MPI_INIT_THREAD(REQUIRED, PROVIDED, IERROR)`.
#[no_mangle]
pub unsafe extern "C" fn mpi_init_thread_(
    required: *const c_int,
    provided: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: gfortran passes valid references.
    unsafe {
        let rc = crate::pmpi::PMPI_Init_thread(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            *required,
            provided,
        );
        set_ierror(ierror, rc);
    }
}

/// `DOUBLE PRECISION MPI_WTIME()`.
#[no_mangle]
pub unsafe extern "C" fn mpi_wtime_() -> f64 {
    // SAFETY: no arguments.
    unsafe { crate::pmpi::PMPI_Wtime() }
}

/// `DOUBLE PRECISION MPI_WTICK()`.
#[no_mangle]
pub unsafe extern "C" fn mpi_wtick_() -> f64 {
    // SAFETY: no arguments.
    unsafe { crate::pmpi::PMPI_Wtick() }
}

/// `INTEGER(KIND=MPI_ADDRESS_KIND) MPI_AINT_ADD(BASE, DISP)`.
#[no_mangle]
pub unsafe extern "C" fn mpi_aint_add_(base: *const MPI_Aint, disp: *const MPI_Aint) -> MPI_Aint {
    // SAFETY: gfortran passes valid references.
    unsafe { crate::pmpi::PMPI_Aint_add(*base, *disp) }
}

/// `INTEGER(KIND=MPI_ADDRESS_KIND) MPI_AINT_DIFF(ADDR1, ADDR2)`.
#[no_mangle]
pub unsafe extern "C" fn mpi_aint_diff_(a: *const MPI_Aint, b: *const MPI_Aint) -> MPI_Aint {
    // SAFETY: gfortran passes valid references.
    unsafe { crate::pmpi::PMPI_Aint_diff(*a, *b) }
}

/// `MPI_PCONTROL(LEVEL)`: does nothing, as in C.
#[no_mangle]
pub unsafe extern "C" fn mpi_pcontrol_(_level: *const c_int) {}

/// `MPI_OP_CREATE(USER_FN, COMMUTE, OP, IERROR)`.
#[no_mangle]
pub unsafe extern "C" fn mpi_op_create_(
    user_fn: Option<FortranUserFunction>,
    commute: *const c_int,
    op: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: gfortran passes valid references.
    unsafe {
        let mut h: MPI_Op = MPI_OP_NULL;
        let rc = match user_fn {
            Some(f) => crate::ops::create_fortran(&mut h, f, *commute),
            // The C function reports a missing function.
            None => crate::pmpi::PMPI_Op_create(None, *commute, &mut h),
        };
        *op = handle_int::MPI_Op_toint(h);
        set_ierror(ierror, rc);
    }
}

/// Attributes the library sets whose C value points at an integer: Fortran
/// gets the integer. (For `MPI_WIN_BASE` C gives the address itself.)
fn points_at_int(keyval: c_int) -> bool {
    matches!(
        keyval,
        MPI_TAG_UB
            | MPI_IO
            | MPI_HOST
            | MPI_WTIME_IS_GLOBAL
            | MPI_APPNUM
            | MPI_LASTUSEDCODE
            | MPI_UNIVERSE_SIZE
            | MPI_WIN_DISP_UNIT
            | MPI_WIN_CREATE_FLAVOR
            | MPI_WIN_MODEL
    )
}

/// `MPI_<KIND>_GET_ATTR(OBJ, KEYVAL, ATTRIBUTE_VAL, FLAG, IERROR)`: the
/// value is an INTEGER(KIND=MPI_ADDRESS_KIND) (a default INTEGER in the
/// MPI-1 `MPI_ATTR_GET`).
///
/// # Safety
/// `flag` and `ierror` as gfortran passes them.
unsafe fn get_attr(
    get: impl FnOnce(*mut c_void, *mut c_int) -> c_int,
    keyval: c_int,
    flag: *mut c_int,
    ierror: *mut c_int,
) -> Option<MPI_Aint> {
    let mut v: *mut c_void = std::ptr::null_mut();
    let rc = get((&mut v as *mut *mut c_void).cast(), flag);
    // SAFETY: the caller's contract; on success with the flag set, `v` is
    // the attribute, which for the library's own attributes points at
    // their value.
    unsafe {
        set_ierror(ierror, rc);
        if rc != MPI_SUCCESS || *flag == 0 {
            return None;
        }
        Some(if points_at_int(keyval) {
            *v.cast::<c_int>() as MPI_Aint
        } else if keyval == MPI_WIN_SIZE {
            *v.cast::<MPI_Aint>()
        } else {
            v as MPI_Aint
        })
    }
}

macro_rules! attr_routines {
    ($get:ident, $set:ident, $cget:ident, $cset:ident, $fromint:ident, $val:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $get(
            obj: *const c_int,
            keyval: *const c_int,
            value: *mut $val,
            flag: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: gfortran passes valid references.
            unsafe {
                let h = handle_int::$fromint(*obj);
                let k = *keyval;
                let got = get_attr(|v, f| crate::pmpi::$cget(h, k, v, f), k, flag, ierror);
                if let Some(x) = got {
                    *value = x as $val;
                }
            }
        }

        #[no_mangle]
        pub unsafe extern "C" fn $set(
            obj: *const c_int,
            keyval: *const c_int,
            value: *const $val,
            ierror: *mut c_int,
        ) {
            // SAFETY: gfortran passes valid references; the value is kept
            // as a pointer-sized integer, as the standard says.
            unsafe {
                let rc = crate::pmpi::$cset(
                    handle_int::$fromint(*obj),
                    *keyval,
                    *value as MPI_Aint as *mut c_void,
                );
                set_ierror(ierror, rc);
            }
        }
    };
}

attr_routines!(
    mpi_comm_get_attr_,
    mpi_comm_set_attr_,
    PMPI_Comm_get_attr,
    PMPI_Comm_set_attr,
    MPI_Comm_fromint,
    MPI_Aint
);
attr_routines!(
    mpi_type_get_attr_,
    mpi_type_set_attr_,
    PMPI_Type_get_attr,
    PMPI_Type_set_attr,
    MPI_Type_fromint,
    MPI_Aint
);
attr_routines!(
    mpi_win_get_attr_,
    mpi_win_set_attr_,
    PMPI_Win_get_attr,
    PMPI_Win_set_attr,
    MPI_Win_fromint,
    MPI_Aint
);
// The MPI-1 forms, whose value is a default INTEGER.
attr_routines!(
    mpi_attr_get_,
    mpi_attr_put_,
    PMPI_Comm_get_attr,
    PMPI_Comm_set_attr,
    MPI_Comm_fromint,
    c_int
);

/// `MPI_INFO_GET(INFO, KEY, VALUELEN, VALUE, FLAG, IERROR)`.
#[no_mangle]
pub unsafe extern "C" fn mpi_info_get_(
    info: *const c_int,
    key: *const c_char,
    valuelen: *const c_int,
    value: *mut c_char,
    flag: *mut c_int,
    ierror: *mut c_int,
    key_len: usize,
    value_len: usize,
) {
    // SAFETY: gfortran passes valid references and lengths.
    unsafe {
        let k = info_str_in(key, key_len);
        let want = (*valuelen).max(0) as usize;
        let mut buf = vec![0 as c_char; want + 1];
        let rc = crate::pmpi::PMPI_Info_get(
            handle_int::MPI_Info_fromint(*info),
            k.as_ptr(),
            *valuelen,
            buf.as_mut_ptr(),
            flag,
        );
        if rc == MPI_SUCCESS && *flag != 0 {
            str_out(&buf, value, value_len);
        }
        set_ierror(ierror, rc);
    }
}

/// `MPI_INFO_GET_STRING(INFO, KEY, BUFLEN, VALUE, FLAG, IERROR)`: BUFLEN is
/// how many characters of VALUE the call may write on entry (none when it
/// is 0: VALUE is left as it is) and the value's length on return (Fortran
/// strings have no terminating NUL).
#[no_mangle]
pub unsafe extern "C" fn mpi_info_get_string_(
    info: *const c_int,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
    ierror: *mut c_int,
    key_len: usize,
    value_len: usize,
) {
    // SAFETY: gfortran passes valid references and lengths.
    unsafe {
        let k = info_str_in(key, key_len);
        let room = ((*buflen).max(0) as usize).min(value_len);
        let mut buf = vec![0 as c_char; room + 1];
        // C writes nothing when its buffer length is 0.
        let mut cbuflen = if room == 0 { 0 } else { (room + 1) as c_int };
        let rc = crate::pmpi::PMPI_Info_get_string(
            handle_int::MPI_Info_fromint(*info),
            k.as_ptr(),
            &mut cbuflen,
            buf.as_mut_ptr(),
            flag,
        );
        if rc == MPI_SUCCESS && *flag != 0 {
            str_out(&buf, value, room);
            *buflen = cbuflen - 1;
        }
        set_ierror(ierror, rc);
    }
}

/// An array of error codes: `MPI_ERRCODES_IGNORE` becomes C's (null).
fn fix_errcodes(p: *mut c_int) -> *mut c_int {
    if p as usize == addresses().errcodes_ignore {
        std::ptr::null_mut()
    } else {
        p
    }
}

/// The arguments of one command from a Fortran array of CHARACTER*(`len`)
/// elements `stride` elements apart, ending at the first blank element.
///
/// # Safety
/// `p` addresses the elements up to and including a blank one.
unsafe fn argv_in(p: *const c_char, len: usize, stride: usize) -> Vec<CString> {
    let mut out = Vec::new();
    if len == 0 {
        return out;
    }
    loop {
        // SAFETY: the caller's contract: element `out.len()` exists.
        let s = unsafe { str_in(p.add(out.len() * stride * len), len) };
        if s.as_bytes().is_empty() {
            return out;
        }
        out.push(s);
    }
}

/// The NULL-terminated `char *` array C takes for a list of arguments.
fn argv_ptrs(v: &[CString]) -> Vec<*mut c_char> {
    v.iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// `MPI_COMM_SPAWN(COMMAND, ARGV, MAXPROCS, INFO, ROOT, COMM, INTERCOMM,
/// ARRAY_OF_ERRCODES, IERROR)`: ARGV is a CHARACTER array ending with a
/// blank element, or `MPI_ARGV_NULL`.
#[no_mangle]
pub unsafe extern "C" fn mpi_comm_spawn_(
    command: *const c_char,
    argv: *const c_char,
    maxprocs: *const c_int,
    info: *const c_int,
    root: *const c_int,
    comm: *const c_int,
    intercomm: *mut c_int,
    errcodes: *mut c_int,
    ierror: *mut c_int,
    command_len: usize,
    argv_len: usize,
) {
    // SAFETY: gfortran passes valid references and lengths; ARGV ends with
    // a blank element (the standard's contract) unless it is the sentinel.
    unsafe {
        let cmd = str_in(command, command_len);
        let args = if argv as usize == addresses().argv_null {
            None
        } else {
            Some(argv_in(argv, argv_len, 1))
        };
        let mut ptrs = args.as_deref().map(argv_ptrs);
        let mut h: MPI_Comm = MPI_COMM_NULL;
        let rc = crate::pmpi::PMPI_Comm_spawn(
            cmd.as_ptr(),
            ptrs.as_mut()
                .map_or(std::ptr::null_mut(), |p| p.as_mut_ptr()),
            *maxprocs,
            handle_int::MPI_Info_fromint(*info),
            *root,
            handle_int::MPI_Comm_fromint(*comm),
            &mut h,
            fix_errcodes(errcodes),
        );
        *intercomm = handle_int::MPI_Comm_toint(h);
        set_ierror(ierror, rc);
    }
}

/// `MPI_COMM_SPAWN_MULTIPLE(COUNT, ARRAY_OF_COMMANDS, ARRAY_OF_ARGV,
/// ARRAY_OF_MAXPROCS, ARRAY_OF_INFO, ROOT, COMM, INTERCOMM,
/// ARRAY_OF_ERRCODES, IERROR)`: ARRAY_OF_ARGV(COUNT, *) holds command i's
/// arguments in row i, each row ending with a blank element, or is
/// `MPI_ARGVS_NULL`.
#[no_mangle]
pub unsafe extern "C" fn mpi_comm_spawn_multiple_(
    count: *const c_int,
    commands: *const c_char,
    argvs: *const c_char,
    maxprocs: *const c_int,
    infos: *const c_int,
    root: *const c_int,
    comm: *const c_int,
    intercomm: *mut c_int,
    errcodes: *mut c_int,
    ierror: *mut c_int,
    commands_len: usize,
    argvs_len: usize,
) {
    // SAFETY: gfortran passes valid references and lengths; the arrays
    // have COUNT rows (the standard's contract).
    unsafe {
        let n = (*count).max(0) as usize;
        let cmds: Vec<CString> = (0..n)
            .map(|i| str_in(commands.add(i * commands_len), commands_len))
            .collect();
        let mut cmd_ptrs: Vec<*mut c_char> = cmds.iter().map(|c| c.as_ptr().cast_mut()).collect();
        let args: Option<Vec<Vec<CString>>> = if argvs as usize == addresses().argvs_null {
            None
        } else {
            Some(
                (0..n)
                    .map(|i| argv_in(argvs.add(i * argvs_len), argvs_len, n))
                    .collect(),
            )
        };
        let mut arg_ptrs: Option<Vec<Vec<*mut c_char>>> = args
            .as_ref()
            .map(|a| a.iter().map(|v| argv_ptrs(v)).collect());
        let mut rows: Option<Vec<*mut *mut c_char>> = arg_ptrs
            .as_mut()
            .map(|a| a.iter_mut().map(|v| v.as_mut_ptr()).collect());
        let h_infos = handles_in(infos, *count, handle_int::MPI_Info_fromint);
        let mut h: MPI_Comm = MPI_COMM_NULL;
        let rc = crate::pmpi::PMPI_Comm_spawn_multiple(
            *count,
            cmd_ptrs.as_mut_ptr(),
            rows.as_mut()
                .map_or(std::ptr::null_mut(), |r| r.as_mut_ptr()),
            maxprocs,
            h_infos.as_ptr(),
            *root,
            handle_int::MPI_Comm_fromint(*comm),
            &mut h,
            fix_errcodes(errcodes),
        );
        *intercomm = handle_int::MPI_Comm_toint(h);
        set_ierror(ierror, rc);
    }
}

// The profiling names of the routines above.
macro_rules! profiled {
    ($($p:ident => $f:ident ($($a:ident: $t:ty),*) $(-> $r:ty)?;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $p($($a: $t),*) $(-> $r)? {
            // SAFETY: the same contract as the function it forwards to.
            unsafe { $f($($a),*) }
        }
    )*};
}

profiled! {
    pmpi_init_ => mpi_init_(ierror: *mut c_int);
    pmpi_init_thread_ => mpi_init_thread_(required: *const c_int, provided: *mut c_int, ierror: *mut c_int);
    pmpi_wtime_ => mpi_wtime_() -> f64;
    pmpi_wtick_ => mpi_wtick_() -> f64;
    pmpi_aint_add_ => mpi_aint_add_(a: *const MPI_Aint, b: *const MPI_Aint) -> MPI_Aint;
    pmpi_aint_diff_ => mpi_aint_diff_(a: *const MPI_Aint, b: *const MPI_Aint) -> MPI_Aint;
    pmpi_pcontrol_ => mpi_pcontrol_(level: *const c_int);
    pmpi_op_create_ => mpi_op_create_(f: Option<FortranUserFunction>, commute: *const c_int, op: *mut c_int, ierror: *mut c_int);
    pmpi_comm_get_attr_ => mpi_comm_get_attr_(o: *const c_int, k: *const c_int, v: *mut MPI_Aint, f: *mut c_int, e: *mut c_int);
    pmpi_comm_set_attr_ => mpi_comm_set_attr_(o: *const c_int, k: *const c_int, v: *const MPI_Aint, e: *mut c_int);
    pmpi_type_get_attr_ => mpi_type_get_attr_(o: *const c_int, k: *const c_int, v: *mut MPI_Aint, f: *mut c_int, e: *mut c_int);
    pmpi_type_set_attr_ => mpi_type_set_attr_(o: *const c_int, k: *const c_int, v: *const MPI_Aint, e: *mut c_int);
    pmpi_win_get_attr_ => mpi_win_get_attr_(o: *const c_int, k: *const c_int, v: *mut MPI_Aint, f: *mut c_int, e: *mut c_int);
    pmpi_win_set_attr_ => mpi_win_set_attr_(o: *const c_int, k: *const c_int, v: *const MPI_Aint, e: *mut c_int);
    pmpi_attr_get_ => mpi_attr_get_(o: *const c_int, k: *const c_int, v: *mut c_int, f: *mut c_int, e: *mut c_int);
    pmpi_attr_put_ => mpi_attr_put_(o: *const c_int, k: *const c_int, v: *const c_int, e: *mut c_int);
    pmpi_info_get_ => mpi_info_get_(i: *const c_int, k: *const c_char, l: *const c_int, v: *mut c_char, f: *mut c_int, e: *mut c_int, kl: usize, vl: usize);
    pmpi_comm_spawn_ => mpi_comm_spawn_(c: *const c_char, a: *const c_char, m: *const c_int, i: *const c_int, r: *const c_int, o: *const c_int, x: *mut c_int, e: *mut c_int, ie: *mut c_int, cl: usize, al: usize);
    pmpi_comm_spawn_multiple_ => mpi_comm_spawn_multiple_(n: *const c_int, c: *const c_char, a: *const c_char, m: *const c_int, i: *const c_int, r: *const c_int, o: *const c_int, x: *mut c_int, e: *mut c_int, ie: *mut c_int, cl: usize, al: usize);
    pmpi_info_get_string_ => mpi_info_get_string_(i: *const c_int, k: *const c_char, l: *mut c_int, v: *mut c_char, f: *mut c_int, e: *mut c_int, kl: usize, vl: usize);
}

// `==` and `/=` on mpi_f08's handle types (each a one-INTEGER type):
// default LOGICAL functions, which gfortran returns as a C int.
macro_rules! handle_compare {
    ($($eq:ident $ne:ident;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $eq(a: *const c_int, b: *const c_int) -> c_int {
            // SAFETY: gfortran passes valid references.
            unsafe { c_int::from(*a == *b) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $ne(a: *const c_int, b: *const c_int) -> c_int {
            // SAFETY: gfortran passes valid references.
            unsafe { c_int::from(*a != *b) }
        }
    )*};
}

handle_compare! {
    tandem_f08_comm_eq_ tandem_f08_comm_ne_;
    tandem_f08_type_eq_ tandem_f08_type_ne_;
    tandem_f08_group_eq_ tandem_f08_group_ne_;
    tandem_f08_info_eq_ tandem_f08_info_ne_;
    tandem_f08_win_eq_ tandem_f08_win_ne_;
    tandem_f08_file_eq_ tandem_f08_file_ne_;
    tandem_f08_op_eq_ tandem_f08_op_ne_;
    tandem_f08_errhandler_eq_ tandem_f08_errhandler_ne_;
    tandem_f08_request_eq_ tandem_f08_request_ne_;
    tandem_f08_message_eq_ tandem_f08_message_ne_;
    tandem_f08_session_eq_ tandem_f08_session_ne_;
}

// ---------------------------------------------------------------------------
// Attribute callbacks written in Fortran
// ---------------------------------------------------------------------------

/// `COPY_FN(OLDOBJ, KEYVAL, EXTRA_STATE, ATTRIBUTE_VAL_IN, ATTRIBUTE_VAL_OUT,
/// FLAG, IERROR)`; the values are INTEGER(KIND=MPI_ADDRESS_KIND), or
/// default INTEGERs for the MPI-1 `MPI_KEYVAL_CREATE`.
pub type FortranCopyFunction = unsafe extern "C" fn(
    *mut c_int,
    *mut c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
    *mut c_int,
);
/// `DELETE_FN(OBJ, KEYVAL, ATTRIBUTE_VAL, EXTRA_STATE, IERROR)`.
pub type FortranDeleteFunction =
    unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_void, *mut c_void, *mut c_int);

/// The object kind of a Fortran key value, for its handles' integers.
#[derive(Clone, Copy)]
enum AttrKind {
    Comm,
    Type,
    Win,
}

impl AttrKind {
    fn toint(self, h: usize) -> c_int {
        match self {
            AttrKind::Comm => handle_int::MPI_Comm_toint(h),
            AttrKind::Type => handle_int::MPI_Type_toint(h),
            AttrKind::Win => handle_int::MPI_Win_toint(h),
        }
    }
}

/// What the C key value carries as its extra state: the Fortran callbacks
/// and the program's own extra state. It lives as long as the process (a
/// key value's callbacks may run after the key is freed).
struct FortranKeyval {
    kind: AttrKind,
    copy: Option<FortranCopyFunction>,
    delete: Option<FortranDeleteFunction>,
    extra: MPI_Aint,
    /// `MPI_KEYVAL_CREATE`: values and extra state are default INTEGERs.
    narrow: bool,
}

/// The C copy callback of every Fortran key value.
unsafe extern "C" fn fortran_copy(
    old: usize,
    keyval: c_int,
    extra: *mut c_void,
    value_in: *mut c_void,
    value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: `extra` is the FortranKeyval this key was made with (it is
    // never freed); the library passes valid `value_out` and `flag`.
    unsafe {
        let k = &*extra.cast::<FortranKeyval>();
        let Some(copy) = k.copy else {
            *flag = 0;
            return MPI_SUCCESS;
        };
        let mut h = k.kind.toint(old);
        let mut key = keyval;
        let mut ierr = MPI_SUCCESS;
        let mut f: c_int = 0;
        let out = if k.narrow {
            let mut ex = k.extra as c_int;
            let mut vin = value_in as usize as c_int;
            let mut vout: c_int = 0;
            copy(
                &mut h,
                &mut key,
                (&mut ex as *mut c_int).cast(),
                (&mut vin as *mut c_int).cast(),
                (&mut vout as *mut c_int).cast(),
                &mut f,
                &mut ierr,
            );
            vout as MPI_Aint
        } else {
            let mut ex = k.extra;
            let mut vin = value_in as MPI_Aint;
            let mut vout: MPI_Aint = 0;
            copy(
                &mut h,
                &mut key,
                (&mut ex as *mut MPI_Aint).cast(),
                (&mut vin as *mut MPI_Aint).cast(),
                (&mut vout as *mut MPI_Aint).cast(),
                &mut f,
                &mut ierr,
            );
            vout
        };
        *value_out.cast::<usize>() = out as usize;
        *flag = f;
        ierr
    }
}

/// The C delete callback of every Fortran key value.
unsafe extern "C" fn fortran_delete(
    obj: usize,
    keyval: c_int,
    value: *mut c_void,
    extra: *mut c_void,
) -> c_int {
    // SAFETY: as in fortran_copy.
    unsafe {
        let k = &*extra.cast::<FortranKeyval>();
        let Some(delete) = k.delete else {
            return MPI_SUCCESS;
        };
        let mut h = k.kind.toint(obj);
        let mut key = keyval;
        let mut ierr = MPI_SUCCESS;
        if k.narrow {
            let mut ex = k.extra as c_int;
            let mut v = value as usize as c_int;
            delete(
                &mut h,
                &mut key,
                (&mut v as *mut c_int).cast(),
                (&mut ex as *mut c_int).cast(),
                &mut ierr,
            );
        } else {
            let mut ex = k.extra;
            let mut v = value as MPI_Aint;
            delete(
                &mut h,
                &mut key,
                (&mut v as *mut MPI_Aint).cast(),
                (&mut ex as *mut MPI_Aint).cast(),
                &mut ierr,
            );
        }
        ierr
    }
}

type CreateKeyval = unsafe extern "C" fn(usize, usize, *mut c_int, *mut c_void) -> c_int;

/// `MPI_<KIND>_CREATE_KEYVAL(COPY_FN, DELETE_FN, KEYVAL, EXTRA_STATE,
/// IERROR)`: a C key value whose callbacks call the Fortran ones.
///
/// # Safety
/// The arguments as gfortran passes them.
unsafe fn create_keyval(
    create: CreateKeyval,
    kind: AttrKind,
    narrow: bool,
    copy: Option<FortranCopyFunction>,
    delete: Option<FortranDeleteFunction>,
    keyval: *mut c_int,
    extra: *const c_void,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let extra = if narrow {
            *extra.cast::<c_int>() as MPI_Aint
        } else {
            *extra.cast::<MPI_Aint>()
        };
        let state = Box::into_raw(Box::new(FortranKeyval {
            kind,
            copy,
            delete,
            extra,
            narrow,
        }));
        let rc = create(
            if copy.is_some() {
                fortran_copy as *const () as usize
            } else {
                0
            },
            if delete.is_some() {
                fortran_delete as *const () as usize
            } else {
                0
            },
            keyval,
            state.cast(),
        );
        if rc != MPI_SUCCESS {
            drop(Box::from_raw(state));
        }
        set_ierror(ierror, rc);
    }
}

macro_rules! keyval_routines {
    ($($name:ident $pname:ident => $c:ident, $kind:ident, $narrow:expr;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            copy: Option<FortranCopyFunction>,
            delete: Option<FortranDeleteFunction>,
            keyval: *mut c_int,
            extra: *const c_void,
            ierror: *mut c_int,
        ) {
            // SAFETY: gfortran passes valid references.
            unsafe {
                create_keyval(
                    crate::pmpi::$c,
                    AttrKind::$kind,
                    $narrow,
                    copy,
                    delete,
                    keyval,
                    extra,
                    ierror,
                )
            }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $pname(
            copy: Option<FortranCopyFunction>,
            delete: Option<FortranDeleteFunction>,
            keyval: *mut c_int,
            extra: *const c_void,
            ierror: *mut c_int,
        ) {
            // SAFETY: the same contract as the function it forwards to.
            unsafe { $name(copy, delete, keyval, extra, ierror) }
        }
    )*};
}

keyval_routines! {
    mpi_comm_create_keyval_ pmpi_comm_create_keyval_ => PMPI_Comm_create_keyval, Comm, false;
    mpi_type_create_keyval_ pmpi_type_create_keyval_ => PMPI_Type_create_keyval, Type, false;
    mpi_win_create_keyval_ pmpi_win_create_keyval_ => PMPI_Win_create_keyval, Win, false;
    mpi_keyval_create_ pmpi_keyval_create_ => PMPI_Keyval_create, Comm, true;
}

// The predefined callbacks, as Fortran procedures: MPI_*_NULL_COPY_FN
// copies nothing, MPI_*_DUP_FN copies the value, MPI_*_NULL_DELETE_FN does
// nothing. The values are INTEGER(KIND=MPI_ADDRESS_KIND), default INTEGERs
// in the MPI-1 forms.
macro_rules! predefined_callbacks {
    ($($null_copy:ident $dup:ident $null_delete:ident $val:ty;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $null_copy(
            _old: *mut c_int,
            _key: *mut c_int,
            _extra: *mut c_void,
            _vin: *mut c_void,
            _vout: *mut c_void,
            flag: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: called as a copy callback, with valid references.
            unsafe {
                *flag = 0;
                *ierror = MPI_SUCCESS;
            }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $dup(
            _old: *mut c_int,
            _key: *mut c_int,
            _extra: *mut c_void,
            vin: *mut c_void,
            vout: *mut c_void,
            flag: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: called as a copy callback, with valid references to
            // values of this width.
            unsafe {
                *vout.cast::<$val>() = *vin.cast::<$val>();
                *flag = 1;
                *ierror = MPI_SUCCESS;
            }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $null_delete(
            _obj: *mut c_int,
            _key: *mut c_int,
            _value: *mut c_void,
            _extra: *mut c_void,
            ierror: *mut c_int,
        ) {
            // SAFETY: called as a delete callback, with valid references.
            unsafe { *ierror = MPI_SUCCESS };
        }
    )*};
}

predefined_callbacks! {
    mpi_comm_null_copy_fn_ mpi_comm_dup_fn_ mpi_comm_null_delete_fn_ MPI_Aint;
    mpi_type_null_copy_fn_ mpi_type_dup_fn_ mpi_type_null_delete_fn_ MPI_Aint;
    mpi_win_null_copy_fn_ mpi_win_dup_fn_ mpi_win_null_delete_fn_ MPI_Aint;
    mpi_null_copy_fn_ mpi_dup_fn_ mpi_null_delete_fn_ c_int;
}

// ---------------------------------------------------------------------------
// Error handlers written in Fortran
// ---------------------------------------------------------------------------

/// `SUBROUTINE HANDLER(OBJECT, ERROR_CODE)`, both INTEGERs.
pub type FortranErrhandlerFunction = unsafe extern "C" fn(*mut c_int, *mut c_int);

/// `MPI_<KIND>_CREATE_ERRHANDLER(FUNCTION, ERRHANDLER, IERROR)`.
///
/// # Safety
/// The arguments as gfortran passes them.
unsafe fn create_errhandler(
    func: &'static str,
    kind: crate::errhandler::Kind,
    f: Option<FortranErrhandlerFunction>,
    errhandler: *mut c_int,
    ierror: *mut c_int,
) {
    let mut h: MPI_Errhandler = MPI_ERRHANDLER_NULL;
    let rc = crate::state::call(func, |s| {
        let Some(f) = f else {
            return Err(crate::state::Fail::new(
                MPI_COMM_WORLD,
                tandem::ErrorClass::Arg,
                "no error handler function",
            ));
        };
        h = s
            .ext
            .errhandlers
            .create_any(kind, crate::errhandler::HandlerFn::Fortran(f));
        Ok(())
    });
    // SAFETY: the caller's contract.
    unsafe {
        if !errhandler.is_null() {
            *errhandler = handle_int::MPI_Errhandler_toint(h);
        }
        set_ierror(ierror, rc);
    }
}

macro_rules! errhandler_routines {
    ($($name:ident $pname:ident => $c:literal, $kind:ident;)*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            f: Option<FortranErrhandlerFunction>,
            errhandler: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: gfortran passes valid references.
            unsafe { create_errhandler($c, crate::errhandler::Kind::$kind, f, errhandler, ierror) }
        }
        #[no_mangle]
        pub unsafe extern "C" fn $pname(
            f: Option<FortranErrhandlerFunction>,
            errhandler: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: the same contract as the function it forwards to.
            unsafe { $name(f, errhandler, ierror) }
        }
    )*};
}

errhandler_routines! {
    mpi_comm_create_errhandler_ pmpi_comm_create_errhandler_ => "MPI_Comm_create_errhandler", Comm;
    mpi_win_create_errhandler_ pmpi_win_create_errhandler_ => "MPI_Win_create_errhandler", Win;
    mpi_file_create_errhandler_ pmpi_file_create_errhandler_ => "MPI_File_create_errhandler", File;
}

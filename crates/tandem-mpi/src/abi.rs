//! Types and constants of the MPI-5.0 standard ABI, as seen from Rust.
//!
//! Every value here must equal the one in `include/mpi.h` (which follows the
//! standard). Handles are pointers on the C side; they are pointer-sized
//! integers here, which every platform Tandem supports passes identically.
//! Special addresses (`MPI_IN_PLACE`, `MPI_STATUS_IGNORE`, ...) and the
//! predefined attribute callbacks (`MPI_COMM_DUP_FN`, ...) are also given as
//! `usize`: compare the incoming pointer's address with them.

#![allow(non_camel_case_types, non_upper_case_globals, dead_code)]

use libc::{c_char, c_int, c_void};
use std::mem::size_of;

// ---------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------

pub const MPI_VERSION: c_int = 5;
pub const MPI_SUBVERSION: c_int = 0;
pub const MPI_ABI_VERSION: c_int = 1;
pub const MPI_ABI_SUBVERSION: c_int = 0;

// ---------------------------------------------------------------------------
// Integer and handle types
// ---------------------------------------------------------------------------

pub type MPI_Aint = isize;
pub type MPI_Count = i64;
pub type MPI_Offset = i64;
/// Not part of the standard ABI; the header defines it as `int`.
pub type MPI_Fint = c_int;

pub type MPI_Comm = usize;
pub type MPI_Datatype = usize;
pub type MPI_Op = usize;
pub type MPI_Request = usize;
pub type MPI_Errhandler = usize;
pub type MPI_Group = usize;
pub type MPI_Info = usize;
pub type MPI_Win = usize;
pub type MPI_Message = usize;
pub type MPI_Session = usize;
pub type MPI_File = usize;

// ---------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------

/// `MPI_Status`: three public fields and five ints for the library.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_snake_case)]
pub struct MPI_Status {
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
    pub internal: [c_int; 5],
}

const _: () = assert!(size_of::<MPI_Status>() == 32);
const _: () = assert!(std::mem::align_of::<MPI_Status>() == 4);

/// Fortran view of a status: `MPI_F_STATUS_SIZE` INTEGERs.
pub const MPI_F_STATUS_SIZE: c_int = 8;
pub const MPI_F_SOURCE: c_int = 0;
pub const MPI_F_TAG: c_int = 1;
pub const MPI_F_ERROR: c_int = 2;

// ---------------------------------------------------------------------------
// Predefined handles
// ---------------------------------------------------------------------------

// Reduction operations
pub const MPI_OP_NULL: MPI_Op = 0x020;
pub const MPI_SUM: MPI_Op = 0x021;
pub const MPI_MIN: MPI_Op = 0x022;
pub const MPI_MAX: MPI_Op = 0x023;
pub const MPI_PROD: MPI_Op = 0x024;
pub const MPI_BAND: MPI_Op = 0x028;
pub const MPI_BOR: MPI_Op = 0x029;
pub const MPI_BXOR: MPI_Op = 0x02a;
pub const MPI_LAND: MPI_Op = 0x030;
pub const MPI_LOR: MPI_Op = 0x031;
pub const MPI_LXOR: MPI_Op = 0x032;
pub const MPI_MINLOC: MPI_Op = 0x038;
pub const MPI_MAXLOC: MPI_Op = 0x039;
pub const MPI_REPLACE: MPI_Op = 0x03c;
pub const MPI_NO_OP: MPI_Op = 0x03d;

// Communicators and groups
pub const MPI_COMM_NULL: MPI_Comm = 0x100;
pub const MPI_COMM_WORLD: MPI_Comm = 0x101;
pub const MPI_COMM_SELF: MPI_Comm = 0x102;
pub const MPI_GROUP_NULL: MPI_Group = 0x108;
pub const MPI_GROUP_EMPTY: MPI_Group = 0x109;

// Windows, files, sessions, messages
pub const MPI_WIN_NULL: MPI_Win = 0x110;
pub const MPI_FILE_NULL: MPI_File = 0x118;
pub const MPI_SESSION_NULL: MPI_Session = 0x120;
pub const MPI_MESSAGE_NULL: MPI_Message = 0x128;
pub const MPI_MESSAGE_NO_PROC: MPI_Message = 0x129;

// Info objects
pub const MPI_INFO_NULL: MPI_Info = 0x130;
pub const MPI_INFO_ENV: MPI_Info = 0x131;

// Error handlers
pub const MPI_ERRHANDLER_NULL: MPI_Errhandler = 0x140;
pub const MPI_ERRORS_ARE_FATAL: MPI_Errhandler = 0x141;
pub const MPI_ERRORS_ABORT: MPI_Errhandler = 0x142;
pub const MPI_ERRORS_RETURN: MPI_Errhandler = 0x143;

// Requests
pub const MPI_REQUEST_NULL: MPI_Request = 0x180;

// Datatypes: null, and the address/count/offset integers
pub const MPI_DATATYPE_NULL: MPI_Datatype = 0x200;
pub const MPI_AINT: MPI_Datatype = 0x201;
pub const MPI_COUNT: MPI_Datatype = 0x202;
pub const MPI_OFFSET: MPI_Datatype = 0x203;
pub const MPI_PACKED: MPI_Datatype = 0x207;

// C integer and floating-point types
pub const MPI_SHORT: MPI_Datatype = 0x208;
pub const MPI_INT: MPI_Datatype = 0x209;
pub const MPI_LONG: MPI_Datatype = 0x20a;
pub const MPI_LONG_LONG: MPI_Datatype = 0x20b;
pub const MPI_LONG_LONG_INT: MPI_Datatype = MPI_LONG_LONG;
pub const MPI_UNSIGNED_SHORT: MPI_Datatype = 0x20c;
pub const MPI_UNSIGNED: MPI_Datatype = 0x20d;
pub const MPI_UNSIGNED_LONG: MPI_Datatype = 0x20e;
pub const MPI_UNSIGNED_LONG_LONG: MPI_Datatype = 0x20f;
pub const MPI_FLOAT: MPI_Datatype = 0x210;
pub const MPI_DOUBLE: MPI_Datatype = 0x214;
pub const MPI_LONG_DOUBLE: MPI_Datatype = 0x220;

// C and C++ complex types
pub const MPI_C_FLOAT_COMPLEX: MPI_Datatype = 0x212;
pub const MPI_C_COMPLEX: MPI_Datatype = MPI_C_FLOAT_COMPLEX;
pub const MPI_CXX_FLOAT_COMPLEX: MPI_Datatype = 0x213;
pub const MPI_C_DOUBLE_COMPLEX: MPI_Datatype = 0x216;
pub const MPI_CXX_DOUBLE_COMPLEX: MPI_Datatype = 0x217;
pub const MPI_C_LONG_DOUBLE_COMPLEX: MPI_Datatype = 0x224;
pub const MPI_CXX_LONG_DOUBLE_COMPLEX: MPI_Datatype = 0x225;

// Fortran types
pub const MPI_LOGICAL: MPI_Datatype = 0x218;
pub const MPI_INTEGER: MPI_Datatype = 0x219;
pub const MPI_REAL: MPI_Datatype = 0x21a;
pub const MPI_COMPLEX: MPI_Datatype = 0x21b;
pub const MPI_DOUBLE_PRECISION: MPI_Datatype = 0x21c;
pub const MPI_DOUBLE_COMPLEX: MPI_Datatype = 0x21d;
pub const MPI_CHARACTER: MPI_Datatype = 0x21e;

// Value-index pairs for MPI_MINLOC / MPI_MAXLOC
pub const MPI_FLOAT_INT: MPI_Datatype = 0x228;
pub const MPI_DOUBLE_INT: MPI_Datatype = 0x229;
pub const MPI_LONG_INT: MPI_Datatype = 0x22a;
pub const MPI_2INT: MPI_Datatype = 0x22b;
pub const MPI_SHORT_INT: MPI_Datatype = 0x22c;
pub const MPI_LONG_DOUBLE_INT: MPI_Datatype = 0x22d;
pub const MPI_2REAL: MPI_Datatype = 0x230;
pub const MPI_2DOUBLE_PRECISION: MPI_Datatype = 0x231;
pub const MPI_2INTEGER: MPI_Datatype = 0x232;

// Booleans and wide characters
pub const MPI_C_BOOL: MPI_Datatype = 0x238;
pub const MPI_CXX_BOOL: MPI_Datatype = 0x239;
pub const MPI_WCHAR: MPI_Datatype = 0x23c;

// Byte-sized and fixed-width C types
pub const MPI_INT8_T: MPI_Datatype = 0x240;
pub const MPI_UINT8_T: MPI_Datatype = 0x241;
pub const MPI_CHAR: MPI_Datatype = 0x243;
pub const MPI_SIGNED_CHAR: MPI_Datatype = 0x244;
pub const MPI_UNSIGNED_CHAR: MPI_Datatype = 0x245;
pub const MPI_BYTE: MPI_Datatype = 0x247;
pub const MPI_INT16_T: MPI_Datatype = 0x248;
pub const MPI_UINT16_T: MPI_Datatype = 0x249;
pub const MPI_INT32_T: MPI_Datatype = 0x250;
pub const MPI_UINT32_T: MPI_Datatype = 0x251;
pub const MPI_INT64_T: MPI_Datatype = 0x258;
pub const MPI_UINT64_T: MPI_Datatype = 0x259;

// Fortran types of explicit size (the suffix is the size in bytes)
pub const MPI_LOGICAL1: MPI_Datatype = 0x2c0;
pub const MPI_INTEGER1: MPI_Datatype = 0x2c1;
pub const MPI_LOGICAL2: MPI_Datatype = 0x2c8;
pub const MPI_INTEGER2: MPI_Datatype = 0x2c9;
pub const MPI_REAL2: MPI_Datatype = 0x2ca;
pub const MPI_LOGICAL4: MPI_Datatype = 0x2d0;
pub const MPI_INTEGER4: MPI_Datatype = 0x2d1;
pub const MPI_REAL4: MPI_Datatype = 0x2d2;
pub const MPI_COMPLEX4: MPI_Datatype = 0x2d3;
pub const MPI_LOGICAL8: MPI_Datatype = 0x2d8;
pub const MPI_INTEGER8: MPI_Datatype = 0x2d9;
pub const MPI_REAL8: MPI_Datatype = 0x2da;
pub const MPI_COMPLEX8: MPI_Datatype = 0x2db;
pub const MPI_LOGICAL16: MPI_Datatype = 0x2e0;
pub const MPI_INTEGER16: MPI_Datatype = 0x2e1;
pub const MPI_REAL16: MPI_Datatype = 0x2e2;
pub const MPI_COMPLEX16: MPI_Datatype = 0x2e3;
pub const MPI_COMPLEX32: MPI_Datatype = 0x2eb;

// ---------------------------------------------------------------------------
// Return codes and error classes
// ---------------------------------------------------------------------------

pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_REQUEST: c_int = 7;
pub const MPI_ERR_ROOT: c_int = 8;
pub const MPI_ERR_GROUP: c_int = 9;
pub const MPI_ERR_OP: c_int = 10;
pub const MPI_ERR_TOPOLOGY: c_int = 11;
pub const MPI_ERR_DIMS: c_int = 12;
pub const MPI_ERR_ARG: c_int = 13;
pub const MPI_ERR_UNKNOWN: c_int = 14;
pub const MPI_ERR_TRUNCATE: c_int = 15;
pub const MPI_ERR_OTHER: c_int = 16;
pub const MPI_ERR_INTERN: c_int = 17;
pub const MPI_ERR_PENDING: c_int = 18;
pub const MPI_ERR_IN_STATUS: c_int = 19;
pub const MPI_ERR_ACCESS: c_int = 20;
pub const MPI_ERR_AMODE: c_int = 21;
pub const MPI_ERR_ASSERT: c_int = 22;
pub const MPI_ERR_BAD_FILE: c_int = 23;
pub const MPI_ERR_BASE: c_int = 24;
pub const MPI_ERR_CONVERSION: c_int = 25;
pub const MPI_ERR_DISP: c_int = 26;
pub const MPI_ERR_DUP_DATAREP: c_int = 27;
pub const MPI_ERR_FILE_EXISTS: c_int = 28;
pub const MPI_ERR_FILE_IN_USE: c_int = 29;
pub const MPI_ERR_FILE: c_int = 30;
pub const MPI_ERR_INFO_KEY: c_int = 31;
pub const MPI_ERR_INFO_NOKEY: c_int = 32;
pub const MPI_ERR_INFO_VALUE: c_int = 33;
pub const MPI_ERR_INFO: c_int = 34;
pub const MPI_ERR_IO: c_int = 35;
pub const MPI_ERR_KEYVAL: c_int = 36;
pub const MPI_ERR_LOCKTYPE: c_int = 37;
pub const MPI_ERR_NAME: c_int = 38;
pub const MPI_ERR_NO_MEM: c_int = 39;
pub const MPI_ERR_NOT_SAME: c_int = 40;
pub const MPI_ERR_NO_SPACE: c_int = 41;
pub const MPI_ERR_NO_SUCH_FILE: c_int = 42;
pub const MPI_ERR_PORT: c_int = 43;
pub const MPI_ERR_QUOTA: c_int = 44;
pub const MPI_ERR_READ_ONLY: c_int = 45;
pub const MPI_ERR_RMA_ATTACH: c_int = 46;
pub const MPI_ERR_RMA_CONFLICT: c_int = 47;
pub const MPI_ERR_RMA_RANGE: c_int = 48;
pub const MPI_ERR_RMA_SHARED: c_int = 49;
pub const MPI_ERR_RMA_SYNC: c_int = 50;
pub const MPI_ERR_SERVICE: c_int = 51;
pub const MPI_ERR_SIZE: c_int = 52;
pub const MPI_ERR_SPAWN: c_int = 53;
pub const MPI_ERR_UNSUPPORTED_DATAREP: c_int = 54;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 55;
pub const MPI_ERR_WIN: c_int = 56;
pub const MPI_ERR_RMA_FLAVOR: c_int = 57;
pub const MPI_ERR_PROC_ABORTED: c_int = 58;
pub const MPI_ERR_VALUE_TOO_LARGE: c_int = 59;
pub const MPI_ERR_SESSION: c_int = 60;
pub const MPI_ERR_ERRHANDLER: c_int = 61;
pub const MPI_ERR_ABI: c_int = 62;

// Tool information interface
pub const MPI_T_ERR_CANNOT_INIT: c_int = 1001;
pub const MPI_T_ERR_NOT_ACCESSIBLE: c_int = 1002;
pub const MPI_T_ERR_NOT_INITIALIZED: c_int = 1003;
pub const MPI_T_ERR_NOT_SUPPORTED: c_int = 1004;
pub const MPI_T_ERR_MEMORY: c_int = 1005;
pub const MPI_T_ERR_INVALID: c_int = 1006;
pub const MPI_T_ERR_INVALID_INDEX: c_int = 1007;
pub const MPI_T_ERR_INVALID_ITEM: c_int = 1008;
pub const MPI_T_ERR_INVALID_SESSION: c_int = 1009;
pub const MPI_T_ERR_INVALID_HANDLE: c_int = 1010;
pub const MPI_T_ERR_INVALID_NAME: c_int = 1011;
pub const MPI_T_ERR_OUT_OF_HANDLES: c_int = 1012;
pub const MPI_T_ERR_OUT_OF_SESSIONS: c_int = 1013;
pub const MPI_T_ERR_CVAR_SET_NOT_NOW: c_int = 1014;
pub const MPI_T_ERR_CVAR_SET_NEVER: c_int = 1015;
pub const MPI_T_ERR_PVAR_NO_WRITE: c_int = 1016;
pub const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 1017;
pub const MPI_T_ERR_PVAR_NO_ATOMIC: c_int = 1018;

/// Largest error code the library may hand out (error classes and codes
/// added with `MPI_Add_error_class`/`_code` stay at or below it).
pub const MPI_ERR_LASTCODE: c_int = 16383;

// ---------------------------------------------------------------------------
// Special addresses and "ignore" arguments (compare with the pointer's
// address)
// ---------------------------------------------------------------------------

pub const MPI_BOTTOM: usize = 0;
pub const MPI_IN_PLACE: usize = 1;
pub const MPI_BUFFER_AUTOMATIC: usize = 2;

pub const MPI_ARGV_NULL: usize = 0;
pub const MPI_ARGVS_NULL: usize = 0;
pub const MPI_ERRCODES_IGNORE: usize = 0;
pub const MPI_STATUS_IGNORE: usize = 0;
pub const MPI_STATUSES_IGNORE: usize = 0;
pub const MPI_UNWEIGHTED: usize = 10;
pub const MPI_WEIGHTS_EMPTY: usize = 11;

// ---------------------------------------------------------------------------
// String buffer sizes (including the terminating NUL)
// ---------------------------------------------------------------------------

pub const MPI_MAX_DATAREP_STRING: usize = 128;
pub const MPI_MAX_ERROR_STRING: usize = 512;
pub const MPI_MAX_INFO_KEY: usize = 256;
pub const MPI_MAX_INFO_VAL: usize = 1024;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MPI_MAX_OBJECT_NAME: usize = 128;
pub const MPI_MAX_PORT_NAME: usize = 1024;
pub const MPI_MAX_PROCESSOR_NAME: usize = 256;
pub const MPI_MAX_STRINGTAG_LEN: usize = 1024;
pub const MPI_MAX_PSET_NAME_LEN: usize = 1024;

/// Upper bound of the per-message overhead of buffered sends.
pub const MPI_BSEND_OVERHEAD: c_int = 512;

// ---------------------------------------------------------------------------
// Bit flags
// ---------------------------------------------------------------------------

// MPI_File_open access modes
pub const MPI_MODE_APPEND: c_int = 1;
pub const MPI_MODE_CREATE: c_int = 2;
pub const MPI_MODE_DELETE_ON_CLOSE: c_int = 4;
pub const MPI_MODE_EXCL: c_int = 8;
pub const MPI_MODE_RDONLY: c_int = 16;
pub const MPI_MODE_RDWR: c_int = 32;
pub const MPI_MODE_SEQUENTIAL: c_int = 64;
pub const MPI_MODE_UNIQUE_OPEN: c_int = 128;
pub const MPI_MODE_WRONLY: c_int = 256;

// One-sided synchronization assertions
pub const MPI_MODE_NOCHECK: c_int = 1024;
pub const MPI_MODE_NOPRECEDE: c_int = 2048;
pub const MPI_MODE_NOPUT: c_int = 4096;
pub const MPI_MODE_NOSTORE: c_int = 8192;
pub const MPI_MODE_NOSUCCEED: c_int = 16384;

// ---------------------------------------------------------------------------
// Integer constants
// ---------------------------------------------------------------------------

// Wildcards and special ranks (all negative)
pub const MPI_ANY_SOURCE: c_int = -1;
pub const MPI_ANY_TAG: c_int = -2;
pub const MPI_PROC_NULL: c_int = -3;
pub const MPI_ROOT: c_int = -4;
pub const MPI_UNDEFINED: c_int = -32766;

// Thread support levels, in increasing order
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1024;
pub const MPI_THREAD_SERIALIZED: c_int = 2048;
pub const MPI_THREAD_MULTIPLE: c_int = 4096;

// Array storage order (subarray / darray)
pub const MPI_ORDER_C: c_int = 12;
pub const MPI_ORDER_FORTRAN: c_int = 15;

// Distributions (darray)
pub const MPI_DISTRIBUTE_NONE: c_int = 16;
pub const MPI_DISTRIBUTE_BLOCK: c_int = 17;
pub const MPI_DISTRIBUTE_CYCLIC: c_int = 18;
pub const MPI_DISTRIBUTE_DFLT_DARG: c_int = 19;

// Type constructors, as reported by MPI_Type_get_envelope
pub const MPI_COMBINER_NAMED: c_int = 101;
pub const MPI_COMBINER_DUP: c_int = 102;
pub const MPI_COMBINER_CONTIGUOUS: c_int = 103;
pub const MPI_COMBINER_VECTOR: c_int = 104;
pub const MPI_COMBINER_HVECTOR: c_int = 105;
pub const MPI_COMBINER_INDEXED: c_int = 106;
pub const MPI_COMBINER_HINDEXED: c_int = 107;
pub const MPI_COMBINER_INDEXED_BLOCK: c_int = 108;
pub const MPI_COMBINER_HINDEXED_BLOCK: c_int = 109;
pub const MPI_COMBINER_STRUCT: c_int = 110;
pub const MPI_COMBINER_SUBARRAY: c_int = 111;
pub const MPI_COMBINER_DARRAY: c_int = 112;
pub const MPI_COMBINER_F90_REAL: c_int = 113;
pub const MPI_COMBINER_F90_COMPLEX: c_int = 114;
pub const MPI_COMBINER_F90_INTEGER: c_int = 115;
pub const MPI_COMBINER_RESIZED: c_int = 116;
pub const MPI_COMBINER_VALUE_INDEX: c_int = 117;

// Type classes for MPI_Type_match_size
pub const MPIX_TYPECLASS_LOGICAL: c_int = 191;
pub const MPI_TYPECLASS_INTEGER: c_int = 192;
pub const MPI_TYPECLASS_REAL: c_int = 193;
pub const MPI_TYPECLASS_COMPLEX: c_int = 194;

// Results of MPI_Comm_compare / MPI_Group_compare
pub const MPI_IDENT: c_int = 201;
pub const MPI_CONGRUENT: c_int = 202;
pub const MPI_SIMILAR: c_int = 203;
pub const MPI_UNEQUAL: c_int = 204;

// Virtual topologies (MPI_Topo_test)
pub const MPI_CART: c_int = 211;
pub const MPI_GRAPH: c_int = 212;
pub const MPI_DIST_GRAPH: c_int = 213;

// Split types (MPI_Comm_split_type)
pub const MPI_COMM_TYPE_SHARED: c_int = 221;
pub const MPI_COMM_TYPE_HW_UNGUIDED: c_int = 222;
pub const MPI_COMM_TYPE_HW_GUIDED: c_int = 223;
pub const MPI_COMM_TYPE_RESOURCE_GUIDED: c_int = 224;

// Passive-target lock types
pub const MPI_LOCK_EXCLUSIVE: c_int = 301;
pub const MPI_LOCK_SHARED: c_int = 302;

// How a window was created
pub const MPI_WIN_FLAVOR_CREATE: c_int = 311;
pub const MPI_WIN_FLAVOR_ALLOCATE: c_int = 312;
pub const MPI_WIN_FLAVOR_DYNAMIC: c_int = 313;
pub const MPI_WIN_FLAVOR_SHARED: c_int = 314;

// Window memory models
pub const MPI_WIN_UNIFIED: c_int = 321;
pub const MPI_WIN_SEPARATE: c_int = 322;

// MPI_File_seek whence
pub const MPI_SEEK_CUR: c_int = 401;
pub const MPI_SEEK_END: c_int = 402;
pub const MPI_SEEK_SET: c_int = 403;

pub const MPI_DISPLACEMENT_CURRENT: MPI_Offset = -1;

// Attribute keys
pub const MPI_KEYVAL_INVALID: c_int = 0;
// set on MPI_COMM_WORLD
pub const MPI_TAG_UB: c_int = 501;
pub const MPI_IO: c_int = 502;
pub const MPI_HOST: c_int = 503;
pub const MPI_WTIME_IS_GLOBAL: c_int = 504;
pub const MPI_APPNUM: c_int = 505;
pub const MPI_LASTUSEDCODE: c_int = 506;
pub const MPI_UNIVERSE_SIZE: c_int = 507;
// set on every window
pub const MPI_WIN_BASE: c_int = 601;
pub const MPI_WIN_DISP_UNIT: c_int = 602;
pub const MPI_WIN_SIZE: c_int = 603;
pub const MPI_WIN_CREATE_FLAVOR: c_int = 604;
pub const MPI_WIN_MODEL: c_int = 605;

// ---------------------------------------------------------------------------
// User callbacks
// ---------------------------------------------------------------------------

pub type MPI_User_function = unsafe extern "C" fn(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    datatype: *mut MPI_Datatype,
);
pub type MPI_User_function_c = unsafe extern "C" fn(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut MPI_Count,
    datatype: *mut MPI_Datatype,
);

pub type MPI_Grequest_query_function =
    unsafe extern "C" fn(extra_state: *mut c_void, status: *mut MPI_Status) -> c_int;
pub type MPI_Grequest_free_function = unsafe extern "C" fn(extra_state: *mut c_void) -> c_int;
pub type MPI_Grequest_cancel_function =
    unsafe extern "C" fn(extra_state: *mut c_void, complete: c_int) -> c_int;

/// Copy callback of a communicator, datatype or window attribute; the
/// first argument is the object's handle (the same for the deprecated
/// `MPI_Copy_function`).
pub type MPI_Copy_function = unsafe extern "C" fn(
    object: usize,
    keyval: c_int,
    extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int;
pub type MPI_Comm_copy_attr_function = MPI_Copy_function;
pub type MPI_Type_copy_attr_function = MPI_Copy_function;
pub type MPI_Win_copy_attr_function = MPI_Copy_function;

/// Delete callback of an attribute; the first argument is the object's
/// handle.
pub type MPI_Delete_function = unsafe extern "C" fn(
    object: usize,
    keyval: c_int,
    attribute_val: *mut c_void,
    extra_state: *mut c_void,
) -> c_int;
pub type MPI_Comm_delete_attr_function = MPI_Delete_function;
pub type MPI_Type_delete_attr_function = MPI_Delete_function;
pub type MPI_Win_delete_attr_function = MPI_Delete_function;

pub type MPI_Datarep_extent_function = unsafe extern "C" fn(
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
    extra_state: *mut c_void,
) -> c_int;
pub type MPI_Datarep_conversion_function = unsafe extern "C" fn(
    userbuf: *mut c_void,
    datatype: MPI_Datatype,
    count: c_int,
    filebuf: *mut c_void,
    position: MPI_Offset,
    extra_state: *mut c_void,
) -> c_int;
pub type MPI_Datarep_conversion_function_c = unsafe extern "C" fn(
    userbuf: *mut c_void,
    datatype: MPI_Datatype,
    count: MPI_Count,
    filebuf: *mut c_void,
    position: MPI_Offset,
    extra_state: *mut c_void,
) -> c_int;

/// Error handler of a communicator, window, file or session: called with a
/// pointer to the object's handle and to the error code (C declares it
/// variadic; no extra arguments are ever passed).
pub type MPI_Comm_errhandler_function =
    unsafe extern "C" fn(comm: *mut MPI_Comm, error_code: *mut c_int, ...);
pub type MPI_File_errhandler_function =
    unsafe extern "C" fn(file: *mut MPI_File, error_code: *mut c_int, ...);
pub type MPI_Win_errhandler_function =
    unsafe extern "C" fn(win: *mut MPI_Win, error_code: *mut c_int, ...);
pub type MPI_Session_errhandler_function =
    unsafe extern "C" fn(session: *mut MPI_Session, error_code: *mut c_int, ...);

// Predefined attribute callbacks: sentinel addresses, not functions.
// 0 = do not copy / nothing to delete, 1 = copy the attribute value.
pub const MPI_NULL_COPY_FN: usize = 0;
pub const MPI_DUP_FN: usize = 1;
pub const MPI_NULL_DELETE_FN: usize = 0;
pub const MPI_COMM_NULL_COPY_FN: usize = 0;
pub const MPI_COMM_DUP_FN: usize = 1;
pub const MPI_COMM_NULL_DELETE_FN: usize = 0;
pub const MPI_TYPE_NULL_COPY_FN: usize = 0;
pub const MPI_TYPE_DUP_FN: usize = 1;
pub const MPI_TYPE_NULL_DELETE_FN: usize = 0;
pub const MPI_WIN_NULL_COPY_FN: usize = 0;
pub const MPI_WIN_DUP_FN: usize = 1;
pub const MPI_WIN_NULL_DELETE_FN: usize = 0;
pub const MPI_CONVERSION_FN_NULL: usize = 0;
pub const MPI_CONVERSION_FN_NULL_C: usize = 0;

// ---------------------------------------------------------------------------
// Tool information interface (MPI_T)
// ---------------------------------------------------------------------------

pub type MPI_T_enum = usize;
pub type MPI_T_cvar_handle = usize;
pub type MPI_T_pvar_handle = usize;
pub type MPI_T_pvar_session = usize;
pub type MPI_T_event_registration = usize;
pub type MPI_T_event_instance = usize;

pub const MPI_T_ENUM_NULL: MPI_T_enum = 0;
pub const MPI_T_CVAR_HANDLE_NULL: MPI_T_cvar_handle = 0;
pub const MPI_T_PVAR_SESSION_NULL: MPI_T_pvar_session = 0;
pub const MPI_T_PVAR_HANDLE_NULL: MPI_T_pvar_handle = 0;
pub const MPI_T_PVAR_ALL_HANDLES: MPI_T_pvar_handle = 1;

/// C enum `MPI_T_cb_safety` (an `int` on every supported platform).
pub type MPI_T_cb_safety = c_int;
pub const MPI_T_CB_REQUIRE_NONE: MPI_T_cb_safety = 0x00;
pub const MPI_T_CB_REQUIRE_MPI_RESTRICTED: MPI_T_cb_safety = 0x03;
pub const MPI_T_CB_REQUIRE_THREAD_SAFE: MPI_T_cb_safety = 0x0f;
pub const MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE: MPI_T_cb_safety = 0x3f;

/// C enum `MPI_T_source_order`.
pub type MPI_T_source_order = c_int;
pub const MPI_T_SOURCE_ORDERED: MPI_T_source_order = 1;
pub const MPI_T_SOURCE_UNORDERED: MPI_T_source_order = 2;

// Verbosity: audience (user/tuner/mpidev) | detail (basic/detail/all)
pub const MPI_T_VERBOSITY_USER_BASIC: c_int = 0x09;
pub const MPI_T_VERBOSITY_USER_DETAIL: c_int = 0x0a;
pub const MPI_T_VERBOSITY_USER_ALL: c_int = 0x0c;
pub const MPI_T_VERBOSITY_TUNER_BASIC: c_int = 0x11;
pub const MPI_T_VERBOSITY_TUNER_DETAIL: c_int = 0x12;
pub const MPI_T_VERBOSITY_TUNER_ALL: c_int = 0x14;
pub const MPI_T_VERBOSITY_MPIDEV_BASIC: c_int = 0x21;
pub const MPI_T_VERBOSITY_MPIDEV_DETAIL: c_int = 0x22;
pub const MPI_T_VERBOSITY_MPIDEV_ALL: c_int = 0x24;

// Kind of object a variable is bound to
pub const MPI_T_BIND_NO_OBJECT: c_int = 1;
pub const MPI_T_BIND_MPI_COMM: c_int = 2;
pub const MPI_T_BIND_MPI_DATATYPE: c_int = 3;
pub const MPI_T_BIND_MPI_ERRHANDLER: c_int = 4;
pub const MPI_T_BIND_MPI_FILE: c_int = 5;
pub const MPI_T_BIND_MPI_GROUP: c_int = 6;
pub const MPI_T_BIND_MPI_OP: c_int = 7;
pub const MPI_T_BIND_MPI_REQUEST: c_int = 8;
pub const MPI_T_BIND_MPI_WIN: c_int = 9;
pub const MPI_T_BIND_MPI_MESSAGE: c_int = 10;
pub const MPI_T_BIND_MPI_INFO: c_int = 11;
pub const MPI_T_BIND_MPI_SESSION: c_int = 12;

// Scope of a control variable
pub const MPI_T_SCOPE_CONSTANT: c_int = 1;
pub const MPI_T_SCOPE_READONLY: c_int = 2;
pub const MPI_T_SCOPE_LOCAL: c_int = 3;
pub const MPI_T_SCOPE_GROUP: c_int = 4;
pub const MPI_T_SCOPE_GROUP_EQ: c_int = 5;
pub const MPI_T_SCOPE_ALL: c_int = 6;
pub const MPI_T_SCOPE_ALL_EQ: c_int = 7;

// Performance variable classes
pub const MPI_T_PVAR_CLASS_STATE: c_int = 1;
pub const MPI_T_PVAR_CLASS_LEVEL: c_int = 2;
pub const MPI_T_PVAR_CLASS_SIZE: c_int = 3;
pub const MPI_T_PVAR_CLASS_PERCENTAGE: c_int = 4;
pub const MPI_T_PVAR_CLASS_HIGHWATERMARK: c_int = 5;
pub const MPI_T_PVAR_CLASS_LOWWATERMARK: c_int = 6;
pub const MPI_T_PVAR_CLASS_COUNTER: c_int = 7;
pub const MPI_T_PVAR_CLASS_AGGREGATE: c_int = 8;
pub const MPI_T_PVAR_CLASS_TIMER: c_int = 9;
pub const MPI_T_PVAR_CLASS_GENERIC: c_int = 10;

pub type MPI_T_event_cb_function = unsafe extern "C" fn(
    event_instance: MPI_T_event_instance,
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    user_data: *mut c_void,
);
pub type MPI_T_event_free_cb_function = unsafe extern "C" fn(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    user_data: *mut c_void,
);
pub type MPI_T_event_dropped_cb_function = unsafe extern "C" fn(
    count: MPI_Count,
    event_registration: MPI_T_event_registration,
    source_index: c_int,
    cb_safety: MPI_T_cb_safety,
    user_data: *mut c_void,
);

// ---------------------------------------------------------------------------
// Predefined datatypes: sizes and names
// ---------------------------------------------------------------------------

/// C `long double` on x86_64 and aarch64 Linux: 16 bytes, 16-aligned
/// (x87 80-bit padded, resp. IEEE binary128).
#[repr(C, align(16))]
struct LongDouble([u8; 16]);

/// Layouts of the C value-index pair structs.
#[repr(C)]
struct Pair<V> {
    value: V,
    index: c_int,
}

/// Size in bytes of a predefined datatype, `None` if `dt` is not one (this
/// includes `MPI_DATATYPE_NULL`).
pub fn predefined_datatype_size(dt: MPI_Datatype) -> Option<usize> {
    use libc::{
        c_double, c_float, c_long, c_longlong, c_schar, c_short, c_uchar, c_uint, c_ulong,
        c_ulonglong, c_ushort, wchar_t,
    };
    let size = match dt {
        MPI_AINT => size_of::<MPI_Aint>(),
        MPI_COUNT => size_of::<MPI_Count>(),
        MPI_OFFSET => size_of::<MPI_Offset>(),
        MPI_PACKED | MPI_BYTE => 1,

        MPI_SHORT => size_of::<c_short>(),
        MPI_INT => size_of::<c_int>(),
        MPI_LONG => size_of::<c_long>(),
        MPI_LONG_LONG => size_of::<c_longlong>(),
        MPI_UNSIGNED_SHORT => size_of::<c_ushort>(),
        MPI_UNSIGNED => size_of::<c_uint>(),
        MPI_UNSIGNED_LONG => size_of::<c_ulong>(),
        MPI_UNSIGNED_LONG_LONG => size_of::<c_ulonglong>(),
        MPI_FLOAT => size_of::<c_float>(),
        MPI_DOUBLE => size_of::<c_double>(),
        MPI_LONG_DOUBLE => size_of::<LongDouble>(),

        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX => size_of::<[c_float; 2]>(),
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX => size_of::<[c_double; 2]>(),
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => size_of::<[LongDouble; 2]>(),

        // Default Fortran INTEGER, LOGICAL and REAL are 4 bytes.
        MPI_LOGICAL | MPI_INTEGER => size_of::<i32>(),
        MPI_REAL => size_of::<f32>(),
        MPI_COMPLEX => size_of::<[f32; 2]>(),
        MPI_DOUBLE_PRECISION => size_of::<f64>(),
        MPI_DOUBLE_COMPLEX => size_of::<[f64; 2]>(),
        MPI_CHARACTER => 1,

        MPI_FLOAT_INT => size_of::<Pair<c_float>>(),
        MPI_DOUBLE_INT => size_of::<Pair<c_double>>(),
        MPI_LONG_INT => size_of::<Pair<c_long>>(),
        MPI_2INT => size_of::<Pair<c_int>>(),
        MPI_SHORT_INT => size_of::<Pair<c_short>>(),
        MPI_LONG_DOUBLE_INT => size_of::<Pair<LongDouble>>(),
        MPI_2REAL => size_of::<[f32; 2]>(),
        MPI_2DOUBLE_PRECISION => size_of::<[f64; 2]>(),
        MPI_2INTEGER => size_of::<[i32; 2]>(),

        // Rust's bool has the layout of C _Bool.
        MPI_C_BOOL | MPI_CXX_BOOL => size_of::<bool>(),
        MPI_WCHAR => size_of::<wchar_t>(),

        MPI_INT8_T => size_of::<i8>(),
        MPI_UINT8_T => size_of::<u8>(),
        MPI_CHAR => size_of::<c_char>(),
        MPI_SIGNED_CHAR => size_of::<c_schar>(),
        MPI_UNSIGNED_CHAR => size_of::<c_uchar>(),
        MPI_INT16_T => size_of::<i16>(),
        MPI_UINT16_T => size_of::<u16>(),
        MPI_INT32_T => size_of::<i32>(),
        MPI_UINT32_T => size_of::<u32>(),
        MPI_INT64_T => size_of::<i64>(),
        MPI_UINT64_T => size_of::<u64>(),

        // The suffix is the total size; COMPLEXn is two REAL(n/2).
        MPI_LOGICAL1 | MPI_INTEGER1 => 1,
        MPI_LOGICAL2 | MPI_INTEGER2 | MPI_REAL2 => 2,
        MPI_LOGICAL4 | MPI_INTEGER4 | MPI_REAL4 | MPI_COMPLEX4 => 4,
        MPI_LOGICAL8 | MPI_INTEGER8 | MPI_REAL8 | MPI_COMPLEX8 => 8,
        MPI_LOGICAL16 | MPI_INTEGER16 | MPI_REAL16 | MPI_COMPLEX16 => 16,
        MPI_COMPLEX32 => 32,

        _ => return None,
    };
    Some(size)
}

/// Name of a predefined datatype (the one `MPI_Type_get_name` reports);
/// aliases such as `MPI_LONG_LONG_INT` give the name of the type they
/// alias. `None` if `dt` is not a predefined datatype.
pub fn predefined_datatype_name(dt: MPI_Datatype) -> Option<&'static str> {
    let name = match dt {
        MPI_AINT => "MPI_AINT",
        MPI_COUNT => "MPI_COUNT",
        MPI_OFFSET => "MPI_OFFSET",
        MPI_PACKED => "MPI_PACKED",
        MPI_SHORT => "MPI_SHORT",
        MPI_INT => "MPI_INT",
        MPI_LONG => "MPI_LONG",
        MPI_LONG_LONG => "MPI_LONG_LONG",
        MPI_UNSIGNED_SHORT => "MPI_UNSIGNED_SHORT",
        MPI_UNSIGNED => "MPI_UNSIGNED",
        MPI_UNSIGNED_LONG => "MPI_UNSIGNED_LONG",
        MPI_UNSIGNED_LONG_LONG => "MPI_UNSIGNED_LONG_LONG",
        MPI_FLOAT => "MPI_FLOAT",
        MPI_DOUBLE => "MPI_DOUBLE",
        MPI_LONG_DOUBLE => "MPI_LONG_DOUBLE",
        MPI_C_FLOAT_COMPLEX => "MPI_C_FLOAT_COMPLEX",
        MPI_CXX_FLOAT_COMPLEX => "MPI_CXX_FLOAT_COMPLEX",
        MPI_C_DOUBLE_COMPLEX => "MPI_C_DOUBLE_COMPLEX",
        MPI_CXX_DOUBLE_COMPLEX => "MPI_CXX_DOUBLE_COMPLEX",
        MPI_C_LONG_DOUBLE_COMPLEX => "MPI_C_LONG_DOUBLE_COMPLEX",
        MPI_CXX_LONG_DOUBLE_COMPLEX => "MPI_CXX_LONG_DOUBLE_COMPLEX",
        MPI_LOGICAL => "MPI_LOGICAL",
        MPI_INTEGER => "MPI_INTEGER",
        MPI_REAL => "MPI_REAL",
        MPI_COMPLEX => "MPI_COMPLEX",
        MPI_DOUBLE_PRECISION => "MPI_DOUBLE_PRECISION",
        MPI_DOUBLE_COMPLEX => "MPI_DOUBLE_COMPLEX",
        MPI_CHARACTER => "MPI_CHARACTER",
        MPI_FLOAT_INT => "MPI_FLOAT_INT",
        MPI_DOUBLE_INT => "MPI_DOUBLE_INT",
        MPI_LONG_INT => "MPI_LONG_INT",
        MPI_2INT => "MPI_2INT",
        MPI_SHORT_INT => "MPI_SHORT_INT",
        MPI_LONG_DOUBLE_INT => "MPI_LONG_DOUBLE_INT",
        MPI_2REAL => "MPI_2REAL",
        MPI_2DOUBLE_PRECISION => "MPI_2DOUBLE_PRECISION",
        MPI_2INTEGER => "MPI_2INTEGER",
        MPI_C_BOOL => "MPI_C_BOOL",
        MPI_CXX_BOOL => "MPI_CXX_BOOL",
        MPI_WCHAR => "MPI_WCHAR",
        MPI_INT8_T => "MPI_INT8_T",
        MPI_UINT8_T => "MPI_UINT8_T",
        MPI_CHAR => "MPI_CHAR",
        MPI_SIGNED_CHAR => "MPI_SIGNED_CHAR",
        MPI_UNSIGNED_CHAR => "MPI_UNSIGNED_CHAR",
        MPI_BYTE => "MPI_BYTE",
        MPI_INT16_T => "MPI_INT16_T",
        MPI_UINT16_T => "MPI_UINT16_T",
        MPI_INT32_T => "MPI_INT32_T",
        MPI_UINT32_T => "MPI_UINT32_T",
        MPI_INT64_T => "MPI_INT64_T",
        MPI_UINT64_T => "MPI_UINT64_T",
        MPI_LOGICAL1 => "MPI_LOGICAL1",
        MPI_INTEGER1 => "MPI_INTEGER1",
        MPI_LOGICAL2 => "MPI_LOGICAL2",
        MPI_INTEGER2 => "MPI_INTEGER2",
        MPI_REAL2 => "MPI_REAL2",
        MPI_LOGICAL4 => "MPI_LOGICAL4",
        MPI_INTEGER4 => "MPI_INTEGER4",
        MPI_REAL4 => "MPI_REAL4",
        MPI_COMPLEX4 => "MPI_COMPLEX4",
        MPI_LOGICAL8 => "MPI_LOGICAL8",
        MPI_INTEGER8 => "MPI_INTEGER8",
        MPI_REAL8 => "MPI_REAL8",
        MPI_COMPLEX8 => "MPI_COMPLEX8",
        MPI_LOGICAL16 => "MPI_LOGICAL16",
        MPI_INTEGER16 => "MPI_INTEGER16",
        MPI_REAL16 => "MPI_REAL16",
        MPI_COMPLEX16 => "MPI_COMPLEX16",
        MPI_COMPLEX32 => "MPI_COMPLEX32",
        _ => return None,
    };
    Some(name)
}

// ---------------------------------------------------------------------------
// Error classes: descriptions
// ---------------------------------------------------------------------------

/// One-sentence description of an error class, for `MPI_Error_string`.
/// `None` if `class` is not a predefined error class.
pub fn error_class_description(class: c_int) -> Option<&'static str> {
    let text = match class {
        MPI_SUCCESS => "no error",
        MPI_ERR_BUFFER => "invalid buffer pointer",
        MPI_ERR_COUNT => "invalid count argument",
        MPI_ERR_TYPE => "invalid datatype",
        MPI_ERR_TAG => "invalid tag",
        MPI_ERR_COMM => "invalid communicator",
        MPI_ERR_RANK => "invalid rank",
        MPI_ERR_REQUEST => "invalid request",
        MPI_ERR_ROOT => "invalid root rank",
        MPI_ERR_GROUP => "invalid group",
        MPI_ERR_OP => "invalid reduction operation",
        MPI_ERR_TOPOLOGY => "invalid topology, or the communicator has none",
        MPI_ERR_DIMS => "invalid number of dimensions or dimension size",
        MPI_ERR_ARG => "invalid argument",
        MPI_ERR_UNKNOWN => "unknown error",
        MPI_ERR_TRUNCATE => "message truncated: the receive buffer is too small",
        MPI_ERR_OTHER => "other error",
        MPI_ERR_INTERN => "internal error in the MPI library",
        MPI_ERR_PENDING => "the operation has not completed yet",
        MPI_ERR_IN_STATUS => "an operation failed: see the error field of its status",
        MPI_ERR_ACCESS => "permission denied",
        MPI_ERR_AMODE => "invalid file access mode",
        MPI_ERR_ASSERT => "invalid assertion argument",
        MPI_ERR_BAD_FILE => "invalid file name",
        MPI_ERR_BASE => "invalid base address",
        MPI_ERR_CONVERSION => "a data conversion function failed",
        MPI_ERR_DISP => "invalid displacement",
        MPI_ERR_DUP_DATAREP => "a data representation with this name is already registered",
        MPI_ERR_FILE_EXISTS => "the file already exists",
        MPI_ERR_FILE_IN_USE => "the file is in use by another process",
        MPI_ERR_FILE => "invalid file handle",
        MPI_ERR_INFO_KEY => "info key is empty or longer than MPI_MAX_INFO_KEY",
        MPI_ERR_INFO_NOKEY => "info key not found",
        MPI_ERR_INFO_VALUE => "info value is longer than MPI_MAX_INFO_VAL",
        MPI_ERR_INFO => "invalid info object",
        MPI_ERR_IO => "input/output error",
        MPI_ERR_KEYVAL => "invalid attribute key",
        MPI_ERR_LOCKTYPE => "invalid lock type",
        MPI_ERR_NAME => "service name not found",
        MPI_ERR_NO_MEM => "out of memory",
        MPI_ERR_NOT_SAME => "processes disagree on the arguments or order of a collective call",
        MPI_ERR_NO_SPACE => "no space left on the storage device",
        MPI_ERR_NO_SUCH_FILE => "no such file",
        MPI_ERR_PORT => "invalid port name",
        MPI_ERR_QUOTA => "storage quota exceeded",
        MPI_ERR_READ_ONLY => "the file or file system is read-only",
        MPI_ERR_RMA_ATTACH => "memory cannot be attached to the window",
        MPI_ERR_RMA_CONFLICT => "conflicting accesses to a window location",
        MPI_ERR_RMA_RANGE => "target memory lies outside the window",
        MPI_ERR_RMA_SHARED => "memory cannot be shared between the processes",
        MPI_ERR_RMA_SYNC => "one-sided call outside a matching synchronization epoch",
        MPI_ERR_SERVICE => "invalid service name",
        MPI_ERR_SIZE => "invalid size argument",
        MPI_ERR_SPAWN => "processes could not be spawned",
        MPI_ERR_UNSUPPORTED_DATAREP => "unsupported data representation",
        MPI_ERR_UNSUPPORTED_OPERATION => "operation not supported",
        MPI_ERR_WIN => "invalid window",
        MPI_ERR_RMA_FLAVOR => "operation not allowed on a window of this flavor",
        MPI_ERR_PROC_ABORTED => "a process taking part in the operation has aborted",
        MPI_ERR_VALUE_TOO_LARGE => "a value is too large to be stored in the output argument",
        MPI_ERR_SESSION => "invalid session",
        MPI_ERR_ERRHANDLER => "invalid error handler",
        MPI_ERR_ABI => "ABI-related error (e.g. Fortran ABI settings that cannot be changed)",

        MPI_T_ERR_CANNOT_INIT => "the tool interface cannot be initialized",
        MPI_T_ERR_NOT_ACCESSIBLE => "the requested tool functionality is not accessible",
        MPI_T_ERR_NOT_INITIALIZED => "the tool interface is not initialized",
        MPI_T_ERR_NOT_SUPPORTED => "the requested tool functionality is not supported",
        MPI_T_ERR_MEMORY => "out of memory in the tool interface",
        MPI_T_ERR_INVALID => "invalid use of the tool interface or invalid argument",
        MPI_T_ERR_INVALID_INDEX => "invalid variable, category, event or source index",
        MPI_T_ERR_INVALID_ITEM => "invalid item index",
        MPI_T_ERR_INVALID_SESSION => "invalid performance variable session",
        MPI_T_ERR_INVALID_HANDLE => "invalid tool interface handle",
        MPI_T_ERR_INVALID_NAME => "no variable, category or event has this name",
        MPI_T_ERR_OUT_OF_HANDLES => "no more tool interface handles available",
        MPI_T_ERR_OUT_OF_SESSIONS => "no more performance variable sessions available",
        MPI_T_ERR_CVAR_SET_NOT_NOW => "the control variable cannot be set now",
        MPI_T_ERR_CVAR_SET_NEVER => "the control variable can no longer be set",
        MPI_T_ERR_PVAR_NO_WRITE => "the performance variable cannot be written or reset",
        MPI_T_ERR_PVAR_NO_STARTSTOP => "the performance variable cannot be started or stopped",
        MPI_T_ERR_PVAR_NO_ATOMIC => "the performance variable cannot be read and reset atomically",
        _ => return None,
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, value)` of every `pub const NAME: MPI_Datatype = 0x...;` in
    /// this file (aliases, written as another constant's name, are skipped).
    fn datatype_consts() -> Vec<(&'static str, usize)> {
        let source: &'static str = include_str!("abi.rs");
        let mut found = Vec::new();
        for line in source.lines() {
            let Some(rest) = line.trim().strip_prefix("pub const ") else {
                continue;
            };
            let Some((name, rest)) = rest.split_once(": MPI_Datatype = 0x") else {
                continue;
            };
            let hex = rest.trim_end_matches(';');
            found.push((name, usize::from_str_radix(hex, 16).unwrap()));
        }
        found
    }

    #[test]
    fn status_layout() {
        assert_eq!(size_of::<MPI_Status>(), 32);
        assert_eq!(std::mem::offset_of!(MPI_Status, MPI_SOURCE), 0);
        assert_eq!(std::mem::offset_of!(MPI_Status, MPI_TAG), 4);
        assert_eq!(std::mem::offset_of!(MPI_Status, MPI_ERROR), 8);
        assert_eq!(std::mem::offset_of!(MPI_Status, internal), 12);
        // MPI_Status_c2f/f2c copy a status to and from a Fortran one.
        assert_eq!(
            size_of::<MPI_Status>(),
            MPI_F_STATUS_SIZE as usize * size_of::<MPI_Fint>()
        );
    }

    #[test]
    fn some_sizes() {
        assert_eq!(predefined_datatype_size(MPI_INT), Some(4));
        assert_eq!(predefined_datatype_size(MPI_LONG), Some(8));
        assert_eq!(predefined_datatype_size(MPI_LONG_LONG_INT), Some(8));
        assert_eq!(predefined_datatype_size(MPI_DOUBLE), Some(8));
        assert_eq!(predefined_datatype_size(MPI_LONG_DOUBLE), Some(16));
        assert_eq!(predefined_datatype_size(MPI_C_COMPLEX), Some(8));
        assert_eq!(
            predefined_datatype_size(MPI_C_LONG_DOUBLE_COMPLEX),
            Some(32)
        );
        assert_eq!(predefined_datatype_size(MPI_FLOAT_INT), Some(8));
        assert_eq!(predefined_datatype_size(MPI_DOUBLE_INT), Some(16));
        assert_eq!(predefined_datatype_size(MPI_LONG_INT), Some(16));
        assert_eq!(predefined_datatype_size(MPI_SHORT_INT), Some(8));
        assert_eq!(predefined_datatype_size(MPI_2INT), Some(8));
        assert_eq!(predefined_datatype_size(MPI_LONG_DOUBLE_INT), Some(32));
        assert_eq!(predefined_datatype_size(MPI_PACKED), Some(1));
        assert_eq!(predefined_datatype_size(MPI_BYTE), Some(1));
        assert_eq!(predefined_datatype_size(MPI_C_BOOL), Some(1));
        assert_eq!(predefined_datatype_size(MPI_WCHAR), Some(4));
        assert_eq!(predefined_datatype_size(MPI_AINT), Some(8));
        assert_eq!(predefined_datatype_size(MPI_COUNT), Some(8));
        assert_eq!(predefined_datatype_size(MPI_OFFSET), Some(8));
        assert_eq!(predefined_datatype_size(MPI_INTEGER), Some(4));
        assert_eq!(predefined_datatype_size(MPI_REAL), Some(4));
        assert_eq!(predefined_datatype_size(MPI_LOGICAL), Some(4));
        assert_eq!(predefined_datatype_size(MPI_DOUBLE_PRECISION), Some(8));
        assert_eq!(predefined_datatype_size(MPI_COMPLEX), Some(8));
        assert_eq!(predefined_datatype_size(MPI_DOUBLE_COMPLEX), Some(16));
        assert_eq!(predefined_datatype_size(MPI_2REAL), Some(8));
        assert_eq!(predefined_datatype_size(MPI_2DOUBLE_PRECISION), Some(16));
        assert_eq!(predefined_datatype_size(MPI_2INTEGER), Some(8));
        assert_eq!(predefined_datatype_size(MPI_COMPLEX4), Some(4));
        assert_eq!(predefined_datatype_size(MPI_INTEGER16), Some(16));
        assert_eq!(predefined_datatype_size(MPI_COMPLEX32), Some(32));
        assert_eq!(predefined_datatype_size(MPI_CHARACTER), Some(1));
        assert_eq!(predefined_datatype_size(MPI_UINT64_T), Some(8));
    }

    #[test]
    fn not_datatypes() {
        for dt in [
            MPI_DATATYPE_NULL,
            0,
            MPI_COMM_WORLD,
            MPI_SUM,
            0x204,
            0x2ff,
            0x1000,
        ] {
            assert_eq!(predefined_datatype_size(dt), None, "{dt:#x}");
            assert_eq!(predefined_datatype_name(dt), None, "{dt:#x}");
        }
    }

    #[test]
    fn every_datatype_has_size_and_name() {
        let consts = datatype_consts();
        // 70 predefined datatypes (not counting aliases) and MPI_DATATYPE_NULL.
        assert_eq!(consts.len(), 71);
        for (name, value) in consts {
            if name == "MPI_DATATYPE_NULL" {
                continue;
            }
            assert!(predefined_datatype_size(value).is_some(), "{name}");
            assert_eq!(predefined_datatype_name(value), Some(name));
        }
        assert_eq!(
            predefined_datatype_name(MPI_LONG_LONG_INT),
            Some("MPI_LONG_LONG")
        );
        assert_eq!(
            predefined_datatype_name(MPI_C_COMPLEX),
            Some("MPI_C_FLOAT_COMPLEX")
        );
    }

    #[test]
    fn datatype_values_are_distinct() {
        let mut values: Vec<usize> = datatype_consts().into_iter().map(|(_, v)| v).collect();
        let n = values.len();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), n);
    }

    #[test]
    fn every_error_class_has_a_description() {
        for class in MPI_SUCCESS..=MPI_ERR_ABI {
            let text = error_class_description(class);
            assert!(text.is_some_and(|t| !t.is_empty() && t.len() < MPI_MAX_ERROR_STRING));
        }
        for class in MPI_T_ERR_CANNOT_INIT..=MPI_T_ERR_PVAR_NO_ATOMIC {
            assert!(error_class_description(class).is_some(), "{class}");
        }
        assert_eq!(
            error_class_description(MPI_ERR_TRUNCATE),
            Some("message truncated: the receive buffer is too small")
        );
        assert_eq!(error_class_description(MPI_ERR_ABI + 1), None);
        assert_eq!(error_class_description(-1), None);
        assert_eq!(error_class_description(MPI_ERR_LASTCODE), None);
    }

    #[test]
    fn ordering_guarantees() {
        const { assert!(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED) };
        const { assert!(MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED) };
        const { assert!(MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE) };
        const { assert!(MPI_ANY_SOURCE < 0 && MPI_ANY_TAG < 0 && MPI_PROC_NULL < 0) };
        const { assert!(MPI_ERR_ABI <= MPI_ERR_LASTCODE) };
    }
}

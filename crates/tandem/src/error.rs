//! Errors, classified by MPI error class.

use std::fmt;

/// MPI error classes the core can raise. The numeric values are the MPI-5.0
/// standard ABI's, so the C layer passes them through unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorClass {
    Buffer = 1,
    Count = 2,
    Type = 3,
    Tag = 4,
    Comm = 5,
    Rank = 6,
    Request = 7,
    Root = 8,
    Group = 9,
    Op = 10,
    Topology = 11,
    Dims = 12,
    Arg = 13,
    Unknown = 14,
    Truncate = 15,
    Other = 16,
    Intern = 17,
    Pending = 18,
    InStatus = 19,
    /// File access refused (permissions).
    Access = 20,
    /// Invalid file access mode.
    Amode = 21,
    Assert = 22,
    /// Invalid file name.
    BadFile = 23,
    Base = 24,
    Conversion = 25,
    Disp = 26,
    DupDatarep = 27,
    FileExists = 28,
    FileInUse = 29,
    /// Invalid file handle.
    File = 30,
    InfoKey = 31,
    InfoNokey = 32,
    InfoValue = 33,
    Info = 34,
    /// An I/O error not covered by a more specific class.
    Io = 35,
    Keyval = 36,
    Locktype = 37,
    NoMem = 39,
    /// Arguments of a collective differ where they must be the same.
    NotSame = 40,
    NoSpace = 41,
    NoSuchFile = 42,
    Quota = 44,
    ReadOnly = 45,
    RmaAttach = 46,
    RmaConflict = 47,
    RmaRange = 48,
    /// Memory cannot be shared between the processes (MPI_ERR_RMA_SHARED).
    RmaShared = 49,
    RmaSync = 50,
    Size = 52,
    UnsupportedDatarep = 54,
    Unsupported = 55,
    Win = 56,
    RmaFlavor = 57,
    /// A peer process went away (MPI_ERR_PROC_ABORTED).
    ProcAborted = 58,
    /// Dynamic processes, which Tandem does not have (MPI_ERR_NAME,
    /// MPI_ERR_PORT, MPI_ERR_SPAWN).
    Name = 38,
    Port = 43,
    Service = 51,
    Spawn = 53,
    /// An invalid session handle (MPI_ERR_SESSION).
    Session = 60,
    /// An invalid error handler (MPI_ERR_ERRHANDLER).
    Errhandler = 61,
    /// A second attempt to register the Fortran ABI (MPI_ERR_ABI).
    Abi = 62,
}

impl ErrorClass {
    /// The MPI error class number.
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// An error with its class and a human-readable reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub class: ErrorClass,
    pub message: String,
    /// The code to report instead of the class's own, for an error the
    /// application chose (a callback's return value: a class, or a code it
    /// added); `None` for the errors the library finds.
    pub code: Option<i32>,
}

impl Error {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Error {
        Error {
            class,
            message: message.into(),
            code: None,
        }
    }

    /// The error code a failing call returns.
    pub fn code(&self) -> i32 {
        self.code.unwrap_or(self.class.code())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Result type of the core.
pub type Result<T> = std::result::Result<T, Error>;

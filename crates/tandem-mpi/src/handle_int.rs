//! Handle serialization of the MPI-5.0 ABI: `MPI_<Kind>_toint` and
//! `MPI_<Kind>_fromint`, which give every handle a C `int` and back.
//!
//! Predefined handles are their own integers (the standard fixes them to
//! the handle constants, all below 4096). Tandem's user handles of most
//! kinds are small too (a base far above 4095 plus a table index), so they
//! are their own integers as well while they stay below 2^30. The others
//! (point-to-point requests carry a generation above bit 32; request-table
//! handles reach 2^32; any handle a future kind makes large) get integers
//! from 2^30 up out of a table per kind:
//!
//! * requests by a reuse key: no two live requests share one (the slab or
//!   table index), so the table holds at most one entry per index in use
//!   and does not grow with the number of requests a program makes;
//! * anything else by its value, once, for the life of the process.
//!
//! The functions need no library state (a Fortran binding calls them on
//! every handle it passes), so the table is process-wide behind a mutex.
#![allow(clippy::missing_safety_doc)]

use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::abi::*;

/// Handles below this are their own integers.
const DIRECT_LIMIT: usize = 1 << 30;
/// Integers of requests by reuse key: `DIRECT_LIMIT + key`, below this.
const KEYED_LIMIT: usize = DIRECT_LIMIT + (1 << 29);

#[derive(Clone, Copy)]
enum Kind {
    Comm,
    Errhandler,
    File,
    Group,
    Info,
    Message,
    Op,
    Request,
    Session,
    Type,
    Win,
}

const KINDS: usize = 11;

impl Kind {
    fn null(self) -> usize {
        match self {
            Kind::Comm => MPI_COMM_NULL,
            Kind::Errhandler => MPI_ERRHANDLER_NULL,
            Kind::File => MPI_FILE_NULL,
            Kind::Group => MPI_GROUP_NULL,
            Kind::Info => MPI_INFO_NULL,
            Kind::Message => MPI_MESSAGE_NULL,
            Kind::Op => MPI_OP_NULL,
            Kind::Request => MPI_REQUEST_NULL,
            Kind::Session => MPI_SESSION_NULL,
            Kind::Type => MPI_DATATYPE_NULL,
            Kind::Win => MPI_WIN_NULL,
        }
    }

    /// A key no two live handles of the kind share, for the kinds whose
    /// large handles are reused slots (see the module comment).
    fn reuse_key(self, h: usize) -> Option<usize> {
        match self {
            // Point-to-point requests: generation << 32 | slab index;
            // request-table handles: generation << 20 | table index.
            Kind::Request if h >= 1 << 32 => Some(2 * (h & 0xffff_ffff)),
            Kind::Request => Some(2 * (h & 0xf_ffff) + 1),
            _ => None,
        }
    }
}

/// The large handles of one kind that have been given integers.
#[derive(Default)]
struct Table {
    /// By reuse key: the handle now holding it.
    keyed: BTreeMap<usize, usize>,
    /// Handles numbered by value: integer `KEYED_LIMIT + i` is `by_int[i]`.
    by_int: Vec<usize>,
    by_handle: BTreeMap<usize, usize>,
}

static TABLES: Mutex<Vec<Table>> = Mutex::new(Vec::new());

fn with_table<R>(kind: Kind, f: impl FnOnce(&mut Table) -> R) -> R {
    let mut t = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    if t.is_empty() {
        t.resize_with(KINDS, Table::default);
    }
    f(&mut t[kind as usize])
}

fn to_int(kind: Kind, h: usize) -> c_int {
    if h < DIRECT_LIMIT {
        return h as c_int;
    }
    with_table(kind, |t| {
        if let Some(key) = kind.reuse_key(h).filter(|k| DIRECT_LIMIT + k < KEYED_LIMIT) {
            t.keyed.insert(key, h);
            return (DIRECT_LIMIT + key) as c_int;
        }
        if let Some(&i) = t.by_handle.get(&h) {
            return (KEYED_LIMIT + i) as c_int;
        }
        let i = t.by_int.len();
        if KEYED_LIMIT + i > c_int::MAX as usize {
            // Out of integers (2^29 distinct large handles): the call is
            // erroneous by then in practice; the null handle's integer.
            return kind.null() as c_int;
        }
        t.by_int.push(h);
        t.by_handle.insert(h, i);
        (KEYED_LIMIT + i) as c_int
    })
}

fn from_int(kind: Kind, i: c_int) -> usize {
    let Ok(i) = usize::try_from(i) else {
        return kind.null();
    };
    if i < DIRECT_LIMIT {
        return i;
    }
    with_table(kind, |t| {
        if i < KEYED_LIMIT {
            t.keyed.get(&(i - DIRECT_LIMIT)).copied()
        } else {
            t.by_int.get(i - KEYED_LIMIT).copied()
        }
    })
    .unwrap_or(kind.null())
}

/// Runs a conversion without letting a panic reach C (the functions have
/// no error code; a failure gives the null handle or its integer).
fn guarded<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

macro_rules! conversions {
    ($($kind:ident, $ty:ty, $toint:ident, $fromint:ident;)*) => {
        $(
            fn $toint(handle: $ty) -> c_int {
                guarded(Kind::$kind.null() as c_int, || to_int(Kind::$kind, handle))
            }

            fn $fromint(value: c_int) -> $ty {
                guarded(Kind::$kind.null(), || from_int(Kind::$kind, value))
            }
        )*
    };
}

// Spelled out (not generated by the macro) so that build.rs, which reads the
// sources for exported MPI functions, gives each its PMPI_ alias.
#[no_mangle]
pub extern "C" fn MPI_Comm_toint(comm: MPI_Comm) -> c_int {
    comm_toint(comm)
}
#[no_mangle]
pub extern "C" fn MPI_Comm_fromint(comm: c_int) -> MPI_Comm {
    comm_fromint(comm)
}
#[no_mangle]
pub extern "C" fn MPI_Errhandler_toint(errhandler: MPI_Errhandler) -> c_int {
    errhandler_toint(errhandler)
}
#[no_mangle]
pub extern "C" fn MPI_Errhandler_fromint(errhandler: c_int) -> MPI_Errhandler {
    errhandler_fromint(errhandler)
}
#[no_mangle]
pub extern "C" fn MPI_File_toint(file: MPI_File) -> c_int {
    file_toint(file)
}
#[no_mangle]
pub extern "C" fn MPI_File_fromint(file: c_int) -> MPI_File {
    file_fromint(file)
}
#[no_mangle]
pub extern "C" fn MPI_Group_toint(group: MPI_Group) -> c_int {
    group_toint(group)
}
#[no_mangle]
pub extern "C" fn MPI_Group_fromint(group: c_int) -> MPI_Group {
    group_fromint(group)
}
#[no_mangle]
pub extern "C" fn MPI_Info_toint(info: MPI_Info) -> c_int {
    info_toint(info)
}
#[no_mangle]
pub extern "C" fn MPI_Info_fromint(info: c_int) -> MPI_Info {
    info_fromint(info)
}
#[no_mangle]
pub extern "C" fn MPI_Message_toint(message: MPI_Message) -> c_int {
    message_toint(message)
}
#[no_mangle]
pub extern "C" fn MPI_Message_fromint(message: c_int) -> MPI_Message {
    message_fromint(message)
}
#[no_mangle]
pub extern "C" fn MPI_Op_toint(op: MPI_Op) -> c_int {
    op_toint(op)
}
#[no_mangle]
pub extern "C" fn MPI_Op_fromint(op: c_int) -> MPI_Op {
    op_fromint(op)
}
#[no_mangle]
pub extern "C" fn MPI_Request_toint(request: MPI_Request) -> c_int {
    request_toint(request)
}
#[no_mangle]
pub extern "C" fn MPI_Request_fromint(request: c_int) -> MPI_Request {
    request_fromint(request)
}
#[no_mangle]
pub extern "C" fn MPI_Session_toint(session: MPI_Session) -> c_int {
    session_toint(session)
}
#[no_mangle]
pub extern "C" fn MPI_Session_fromint(session: c_int) -> MPI_Session {
    session_fromint(session)
}
#[no_mangle]
pub extern "C" fn MPI_Type_toint(datatype: MPI_Datatype) -> c_int {
    type_toint(datatype)
}
#[no_mangle]
pub extern "C" fn MPI_Type_fromint(datatype: c_int) -> MPI_Datatype {
    type_fromint(datatype)
}
#[no_mangle]
pub extern "C" fn MPI_Win_toint(win: MPI_Win) -> c_int {
    win_toint(win)
}
#[no_mangle]
pub extern "C" fn MPI_Win_fromint(win: c_int) -> MPI_Win {
    win_fromint(win)
}

conversions! {
    Comm, MPI_Comm, comm_toint, comm_fromint;
    Errhandler, MPI_Errhandler, errhandler_toint, errhandler_fromint;
    File, MPI_File, file_toint, file_fromint;
    Group, MPI_Group, group_toint, group_fromint;
    Info, MPI_Info, info_toint, info_fromint;
    Message, MPI_Message, message_toint, message_fromint;
    Op, MPI_Op, op_toint, op_fromint;
    Request, MPI_Request, request_toint, request_fromint;
    Session, MPI_Session, session_toint, session_fromint;
    Type, MPI_Datatype, type_toint, type_fromint;
    Win, MPI_Win, win_toint, win_fromint;
}

// Fortran handles (MPI_<Kind>_c2f, _f2c): Tandem's Fortran bindings name
// every object by its `MPI_<Kind>_toint` integer, so the conversions are
// those. Spelled out for build.rs's PMPI_ aliases, as above.
#[no_mangle]
pub extern "C" fn MPI_Comm_c2f(comm: MPI_Comm) -> MPI_Fint {
    comm_toint(comm)
}
#[no_mangle]
pub extern "C" fn MPI_Comm_f2c(comm: MPI_Fint) -> MPI_Comm {
    comm_fromint(comm)
}
#[no_mangle]
pub extern "C" fn MPI_Errhandler_c2f(errhandler: MPI_Errhandler) -> MPI_Fint {
    errhandler_toint(errhandler)
}
#[no_mangle]
pub extern "C" fn MPI_Errhandler_f2c(errhandler: MPI_Fint) -> MPI_Errhandler {
    errhandler_fromint(errhandler)
}
#[no_mangle]
pub extern "C" fn MPI_File_c2f(file: MPI_File) -> MPI_Fint {
    file_toint(file)
}
#[no_mangle]
pub extern "C" fn MPI_File_f2c(file: MPI_Fint) -> MPI_File {
    file_fromint(file)
}
#[no_mangle]
pub extern "C" fn MPI_Group_c2f(group: MPI_Group) -> MPI_Fint {
    group_toint(group)
}
#[no_mangle]
pub extern "C" fn MPI_Group_f2c(group: MPI_Fint) -> MPI_Group {
    group_fromint(group)
}
#[no_mangle]
pub extern "C" fn MPI_Info_c2f(info: MPI_Info) -> MPI_Fint {
    info_toint(info)
}
#[no_mangle]
pub extern "C" fn MPI_Info_f2c(info: MPI_Fint) -> MPI_Info {
    info_fromint(info)
}
#[no_mangle]
pub extern "C" fn MPI_Message_c2f(message: MPI_Message) -> MPI_Fint {
    message_toint(message)
}
#[no_mangle]
pub extern "C" fn MPI_Message_f2c(message: MPI_Fint) -> MPI_Message {
    message_fromint(message)
}
#[no_mangle]
pub extern "C" fn MPI_Op_c2f(op: MPI_Op) -> MPI_Fint {
    op_toint(op)
}
#[no_mangle]
pub extern "C" fn MPI_Op_f2c(op: MPI_Fint) -> MPI_Op {
    op_fromint(op)
}
#[no_mangle]
pub extern "C" fn MPI_Request_c2f(request: MPI_Request) -> MPI_Fint {
    request_toint(request)
}
#[no_mangle]
pub extern "C" fn MPI_Request_f2c(request: MPI_Fint) -> MPI_Request {
    request_fromint(request)
}
#[no_mangle]
pub extern "C" fn MPI_Session_c2f(session: MPI_Session) -> MPI_Fint {
    session_toint(session)
}
#[no_mangle]
pub extern "C" fn MPI_Session_f2c(session: MPI_Fint) -> MPI_Session {
    session_fromint(session)
}
#[no_mangle]
pub extern "C" fn MPI_Type_c2f(datatype: MPI_Datatype) -> MPI_Fint {
    type_toint(datatype)
}
#[no_mangle]
pub extern "C" fn MPI_Type_f2c(datatype: MPI_Fint) -> MPI_Datatype {
    type_fromint(datatype)
}
#[no_mangle]
pub extern "C" fn MPI_Win_c2f(win: MPI_Win) -> MPI_Fint {
    win_toint(win)
}
#[no_mangle]
pub extern "C" fn MPI_Win_f2c(win: MPI_Fint) -> MPI_Win {
    win_fromint(win)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_and_small_handles_are_their_own_integers() {
        assert_eq!(to_int(Kind::Comm, MPI_COMM_WORLD), 0x101);
        assert_eq!(from_int(Kind::Comm, 0x102), MPI_COMM_SELF);
        assert_eq!(to_int(Kind::Type, 0x0100_0005), 0x0100_0005);
        assert_eq!(from_int(Kind::Type, -7), MPI_DATATYPE_NULL);
    }

    #[test]
    fn large_request_handles_round_trip_and_reuse_their_slot() {
        let a = (7usize << 32) | 12;
        let b = (8usize << 32) | 12;
        let ia = to_int(Kind::Request, a);
        assert!(ia as usize >= DIRECT_LIMIT);
        assert_eq!(from_int(Kind::Request, ia), a);
        assert_eq!(to_int(Kind::Request, a), ia);
        // The same slab index later: the same integer, now for the new handle.
        assert_eq!(to_int(Kind::Request, b), ia);
        assert_eq!(from_int(Kind::Request, ia), b);
        let table = (3000usize << 20) | 5;
        let it = to_int(Kind::Request, table);
        assert_ne!(it, ia);
        assert_eq!(from_int(Kind::Request, it), table);
    }

    #[test]
    fn other_large_handles_are_numbered_once() {
        let h = (1usize << 40) + 3;
        let i = to_int(Kind::Message, h);
        assert!(i as usize >= KEYED_LIMIT);
        assert_eq!(to_int(Kind::Message, h), i);
        assert_eq!(from_int(Kind::Message, i), h);
        assert_eq!(from_int(Kind::Message, i + 1000), MPI_MESSAGE_NULL);
    }
}

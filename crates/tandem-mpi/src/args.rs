//! Argument checking and conversions shared by the exported functions.

use std::os::raw::c_int;

use tandem::p2p::Status;
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::state::{Fail, State};

/// The largest tag Tandem accepts (the value of the `MPI_TAG_UB` attribute).
pub const TAG_UB: c_int = c_int::MAX;

/// A validated source argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Null,
    Any,
    Rank(u32),
}

/// Validates a communicator handle.
#[inline]
pub fn comm(state: &State, comm: MPI_Comm) -> Result<CommId, Fail> {
    state.comm_id(comm).map_err(|e| Fail { comm, error: e })
}

/// Extent in bytes of a datatype Tandem can move: the spacing of elements
/// in a buffer, and what travels per element (hosts are alike).
pub fn type_size(comm: MPI_Comm, dt: MPI_Datatype) -> Result<usize, Fail> {
    // Data travels packed: the datatype's size, padding excluded (derived
    // datatypes included, see datatype.rs).
    crate::datatype::packed_size(comm, dt)
}

/// Validates a communicator handle that must not be an intercommunicator
/// (for the operations Tandem has only on intracommunicators).
pub fn intra_comm(state: &State, comm: MPI_Comm) -> Result<CommId, Fail> {
    let id = self::comm(state, comm)?;
    match state.rt.comm(id) {
        Ok(c) if c.is_inter() => Err(Fail {
            comm,
            error: tandem::intercomm::unsupported(),
        }),
        _ => Ok(id),
    }
}

/// Checks a destination rank (a remote rank on an intercommunicator);
/// `None` for `MPI_PROC_NULL`.
pub fn dest(state: &State, comm: MPI_Comm, id: CommId, dest: c_int) -> Result<Option<u32>, Fail> {
    let size = state
        .rt
        .comm(id)
        .map_err(|e| Fail { comm, error: e })?
        .peer_count();
    match dest {
        MPI_PROC_NULL => Ok(None),
        d if d >= 0 && (d as u32) < size => Ok(Some(d as u32)),
        d => Err(rank_error(comm, d, size)),
    }
}

/// The error for rank `r` of a communicator of `size` ranks.
#[cold]
pub fn rank_error(comm: MPI_Comm, r: c_int, size: u32) -> Fail {
    Fail::new(
        comm,
        ErrorClass::Rank,
        format!("rank {r} is not in 0..{size}"),
    )
}

/// Checks a source rank (wildcards allowed).
pub fn source(state: &State, comm: MPI_Comm, id: CommId, src: c_int) -> Result<Source, Fail> {
    match src {
        MPI_ANY_SOURCE => Ok(Source::Any),
        other => Ok(match dest(state, comm, id, other)? {
            None => Source::Null,
            Some(r) => Source::Rank(r),
        }),
    }
}

/// Checks a tag for sending.
#[inline]
pub fn send_tag(comm: MPI_Comm, tag: c_int) -> Result<i32, Fail> {
    if (0..=TAG_UB).contains(&tag) {
        Ok(tag)
    } else {
        Err(Fail::new(
            comm,
            ErrorClass::Tag,
            format!("invalid tag {tag} for a send"),
        ))
    }
}

/// Checks a tag for receiving; `None` for `MPI_ANY_TAG`.
#[inline]
pub fn recv_tag(comm: MPI_Comm, tag: c_int) -> Result<Option<i32>, Fail> {
    if tag == MPI_ANY_TAG {
        Ok(None)
    } else if (0..=TAG_UB).contains(&tag) {
        Ok(Some(tag))
    } else {
        Err(Fail::new(
            comm,
            ErrorClass::Tag,
            format!("invalid tag {tag} for a receive"),
        ))
    }
}

/// Checks an output pointer.
pub fn out_ptr<T>(comm: MPI_Comm, p: *mut T, what: &str) -> Result<(), Fail> {
    if p.is_null() {
        Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!("NULL {what} pointer"),
        ))
    } else {
        Ok(())
    }
}

/// Writes `v` through a pointer already checked with [`out_ptr`].
///
/// # Safety
/// `p` must be non-null and valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, v: T) {
    // SAFETY: the caller's promise.
    unsafe { p.write(v) }
}

/// Fills an `MPI_Status` (if not `MPI_STATUS_IGNORE`) but its error
/// field, which only calls completing several operations set (the
/// standard: single-completion calls leave it as it was).
///
/// # Safety
/// `status` must be null or valid for writes of `MPI_Status`.
pub unsafe fn write_status(status: *mut MPI_Status, st: &Status) {
    // SAFETY: the caller's promise.
    unsafe { write_fields(status, st, None) }
}

/// [`write_status`] for calls completing several operations: the error
/// field too.
///
/// # Safety
/// As [`write_status`].
pub unsafe fn write_status_and_error(status: *mut MPI_Status, st: &Status) {
    let error = st.error.as_ref().map_or(MPI_SUCCESS, |e| e.code());
    // SAFETY: the caller's promise.
    unsafe { write_fields(status, st, Some(error)) }
}

/// Writes the fields of a status, the error field only when given (the
/// others are written one by one: the error field, never read, may be
/// uninitialized memory).
///
/// # Safety
/// As [`write_status`].
unsafe fn write_fields(status: *mut MPI_Status, st: &Status, error: Option<c_int>) {
    if status.is_null() {
        return;
    }
    let count = st.count as u64;
    let internal = [
        count as u32 as c_int,
        (count >> 32) as u32 as c_int,
        c_int::from(st.cancelled),
        0,
        0,
    ];
    // SAFETY: the caller's promise: valid for writes of a whole status.
    unsafe {
        (&raw mut (*status).MPI_SOURCE).write(st.source.map_or(MPI_PROC_NULL, |r| r as c_int));
        (&raw mut (*status).MPI_TAG).write(st.tag.unwrap_or(MPI_ANY_TAG));
        (&raw mut (*status).internal).write(internal);
        if let Some(e) = error {
            (&raw mut (*status).MPI_ERROR).write(e);
        }
    }
}

/// The status of an operation on `MPI_REQUEST_NULL` (the standard's empty status).
///
/// # Safety
/// As [`write_status`].
pub unsafe fn write_empty_status(status: *mut MPI_Status) {
    if status.is_null() {
        return;
    }
    // SAFETY: the caller's promise.
    unsafe {
        status.write(MPI_Status {
            MPI_SOURCE: MPI_ANY_SOURCE,
            MPI_TAG: MPI_ANY_TAG,
            MPI_ERROR: MPI_SUCCESS,
            internal: [0; 5],
        })
    }
}

/// Bytes recorded in a status.
pub fn status_bytes(s: &MPI_Status) -> u64 {
    u64::from(s.internal[0] as u32) | (u64::from(s.internal[1] as u32) << 32)
}

/// Records `bytes` in a status (`MPI_Status_set_elements`).
pub fn set_status_bytes(s: &mut MPI_Status, bytes: u64) {
    s.internal[0] = bytes as u32 as c_int;
    s.internal[1] = (bytes >> 32) as u32 as c_int;
}

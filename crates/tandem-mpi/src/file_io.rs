//! MPI-IO data access: reads and writes at explicit offsets, at the
//! individual file pointer and at the shared one, blocking, non-blocking
//! (done within the call: the request returned is complete) and split
//! collective, with their large-count `_c` forms.
//!
//! Each access packs the memory datatype (or uses the memory itself when it
//! is contiguous), maps the view's data bytes to file byte ranges
//! (file_view.rs) and does one `pread`/`pwrite` per range. The status
//! records the bytes moved, so `MPI_Get_count` and `MPI_Get_elements` work;
//! a read stops at the end of the file. The blocking collective forms end
//! with a barrier on the file's private communicator (so data written by
//! `MPI_File_write_all` is in the file at every rank once each returns, as
//! programs written against two-phase implementations expect); the ordered
//! forms place each rank's data after the lower ranks', from the sizes
//! every rank learns.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::io;
use std::os::raw::{c_int, c_void};
use std::os::unix::fs::FileExt;

use tandem::coll::CollCall;
use tandem::p2p::Status;
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::datarep::{self, Plan};
use crate::datatype::{self, Typed};
use crate::file::{
    allgather, barrier, check_not_sequential, check_writable, file_call, file_fail, io_fail,
    RangeLock,
};
use crate::request::{self, Op};
use crate::state::{Fail, State};

/// Where an access starts.
#[derive(Clone, Copy)]
enum Pos {
    /// An explicit offset, in elementary types of the view.
    At(MPI_Offset),
    Individual,
    Shared,
    /// At the shared pointer, in rank order (collective).
    Ordered,
}

/// How the call is made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Independent,
    /// A blocking collective.
    Collective,
    /// Non-blocking, or the begin of a split collective (whose end has the barrier).
    Deferred,
}

/// Checks a buffer description with a large count.
fn typed(buf: *mut c_void, count: MPI_Count, dt: MPI_Datatype) -> Result<Typed, Fail> {
    let count = usize::try_from(count)
        .map_err(|_| file_fail(ErrorClass::Count, format!("negative count {count}")))?;
    let layout = datatype::layout(MPI_COMM_WORLD, dt)?;
    if count.checked_mul(layout.size).is_none() {
        return Err(file_fail(
            ErrorClass::Count,
            "count times datatype size overflows",
        ));
    }
    let t = Typed {
        ptr: buf.cast(),
        count,
        layout,
    };
    if t.bytes() > 0 && buf.is_null() && datatype::is_predefined(dt) {
        return Err(file_fail(
            ErrorClass::Buffer,
            format!("NULL buffer for {count} elements"),
        ));
    }
    Ok(t)
}

/// Reads into `buf` from `off` until it is full or the file ends; the bytes read.
fn read_full(fd: &std::fs::File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match fd.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Largest stretch of file one `pread` covers when a read skips the holes
/// between nearby ranges by reading them too.
const SIEVE_SPAN: u64 = 4 << 20;
/// Largest hole read along: copying a few KiB costs about what a system call does.
const SIEVE_GAP: u64 = 4 << 10;

/// Reads the file `ranges` into `data`, one after the other; the bytes
/// read (fewer than asked for when the file ends). Nearby ranges (holes of
/// at most `SIEVE_GAP` between them) are read in one `pread` of the
/// stretch they span, up to `SIEVE_SPAN`, as ROMIO's data sieving does, so
/// a view of many small blocks costs few system calls. (Writes go range by
/// range: sieving them would write the holes back, which is only safe if
/// every writer locks.)
fn read_ranges(fd: &std::fs::File, ranges: &[(u64, u64)], data: &mut [u8]) -> io::Result<usize> {
    let mut at = 0usize;
    let mut stretch = Vec::new();
    let mut i = 0;
    while i < ranges.len() {
        let start = ranges[i].0;
        let mut end = start + ranges[i].1;
        let mut j = i + 1;
        while let Some(&(off, len)) = ranges.get(j) {
            let new_end = end.max(off + len);
            if off < start || off > end + SIEVE_GAP || new_end - start > SIEVE_SPAN {
                break;
            }
            end = new_end;
            j += 1;
        }
        if j == i + 1 {
            let chunk = &mut data[at..at + ranges[i].1 as usize];
            let n = read_full(fd, chunk, start)?;
            at += n;
            if n < chunk.len() {
                return Ok(at);
            }
        } else {
            stretch.resize((end - start) as usize, 0);
            let got = read_full(fd, &mut stretch, start)? as u64;
            for &(off, len) in &ranges[i..j] {
                let rel = off - start;
                let avail = got.saturating_sub(rel).min(len) as usize;
                data[at..at + avail].copy_from_slice(&stretch[rel as usize..rel as usize + avail]);
                at += avail;
                if (avail as u64) < len {
                    return Ok(at);
                }
            }
        }
        i = j;
    }
    Ok(at)
}

/// Writes packed `data` to the file `ranges`, one after the other.
fn write_ranges(fd: &std::fs::File, ranges: &[(u64, u64)], data: &[u8]) -> io::Result<usize> {
    let mut at = 0usize;
    for &(off, len) in ranges {
        fd.write_all_at(&data[at..at + len as usize], off)?;
        at += len as usize;
    }
    Ok(at)
}

/// One access by this rank; the bytes of data it covers start at data byte
/// `pos` of the view.
fn move_data(
    s: &mut State,
    fh: MPI_File,
    write: bool,
    pos: u64,
    t: &Typed,
    plan: &Plan,
) -> Result<usize, Fail> {
    let f = s.files.get(fh)?;
    let bytes = t.bytes();
    if bytes == 0 {
        return Ok(0);
    }
    let mut ranges = Vec::new();
    f.view.ranges(pos, bytes as u64, &mut ranges);
    let _lock = if f.atomic {
        let first = ranges[0].0;
        let last = ranges.last().map_or(first, |r| r.0 + r.1);
        Some(
            RangeLock::new(&f.fd, write, first, last - first)
                .map_err(|e| io_fail(&e, "cannot lock the file for an atomic access"))?,
        )
    } else {
        None
    };
    let what = if write {
        "cannot write the file"
    } else {
        "cannot read the file"
    };
    let fail = |e: io::Error| io_fail(&e, what);
    if plan.converts() {
        // Another data representation: through a staging buffer.
        if write {
            let mut data = match t.direct() {
                // SAFETY: the buffer holds `count` contiguous elements from
                // `p`, valid for reads (MPI contract).
                Some(p) => unsafe { std::slice::from_raw_parts(p.cast_const(), bytes) }.to_vec(),
                // SAFETY: the buffer is valid for reads as its datatype describes.
                None => unsafe { t.pack() },
            };
            // SAFETY: the plan's buffer is this access's (MPI contract).
            unsafe { datarep::to_file(plan, &mut data)? };
            return write_ranges(&f.fd, &ranges, &data).map_err(fail);
        }
        let mut data = vec![0u8; bytes];
        let n = read_ranges(&f.fd, &ranges, &mut data).map_err(fail)?;
        // SAFETY: the plan's buffer is this access's, valid for writes.
        let done = unsafe { datarep::from_file(plan, &mut data[..n], t.layout.size)? };
        if !done {
            // SAFETY: the buffer is valid for writes as its datatype describes.
            unsafe { t.unpack(&data[..n]) };
        }
        return Ok(n);
    }
    match (t.direct(), write) {
        (Some(p), true) => {
            // SAFETY: the buffer holds `count` contiguous elements of its
            // datatype from `p`, valid for reads (MPI contract).
            let mem = unsafe { std::slice::from_raw_parts(p.cast_const(), bytes) };
            write_ranges(&f.fd, &ranges, mem).map_err(fail)
        }
        (Some(p), false) => {
            // SAFETY: as above, and valid for writes: it receives a read.
            let mem = unsafe { std::slice::from_raw_parts_mut(p, bytes) };
            read_ranges(&f.fd, &ranges, mem).map_err(fail)
        }
        (None, true) => {
            // SAFETY: the buffer is valid for reads as its datatype describes.
            let packed = unsafe { t.pack() };
            write_ranges(&f.fd, &ranges, &packed).map_err(fail)
        }
        (None, false) => {
            let mut packed = vec![0u8; bytes];
            let n = read_ranges(&f.fd, &ranges, &mut packed).map_err(fail)?;
            // SAFETY: the buffer is valid for writes as its datatype describes.
            unsafe { t.unpack(&packed[..n]) };
            Ok(n)
        }
    }
}

/// Checks what this rank's part of an access needs; its buffer and size
/// in elementary types.
fn check(
    s: &State,
    fh: MPI_File,
    write: bool,
    pos: Pos,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
) -> Result<(Typed, u64, Plan), Fail> {
    let f = s.files.get(fh)?;
    if write {
        check_writable(f)?;
    } else if f.amode & MPI_MODE_WRONLY != 0 {
        return Err(file_fail(
            ErrorClass::Access,
            "the file was opened write-only",
        ));
    }
    match pos {
        Pos::At(off) => {
            check_not_sequential(f)?;
            if off < 0 {
                return Err(file_fail(ErrorClass::Arg, format!("negative offset {off}")));
            }
        }
        Pos::Individual => check_not_sequential(f)?,
        Pos::Shared | Pos::Ordered => {}
    }
    let t = typed(buf, count, dt)?;
    let plan = datarep::plan(&f.rep, buf, dt, &t)?;
    let esize = f.view.esize;
    if !(t.bytes() as u64).is_multiple_of(esize) {
        return Err(file_fail(
            ErrorClass::Io,
            format!(
                "{} bytes are not a whole number of elementary types of {esize} bytes",
                t.bytes()
            ),
        ));
    }
    let etypes = t.bytes() as u64 / esize;
    Ok((t, etypes, plan))
}

/// The ordered accesses' start, in elementary types: every rank learns the
/// others' sizes, rank 0 advances the shared pointer by their sum, and this
/// rank starts after the lower ranks' data.
fn ordered_start(s: &mut State, fh: MPI_File, mine: Option<u64>) -> Result<u64, Fail> {
    let f = s.files.get(fh)?;
    let (comm, rank) = (f.comm, f.rank as usize);
    let sizes = allgather(s, comm, &[mine.unwrap_or(0) as i64])?;
    let total: u64 = sizes.iter().map(|&n| n as u64).sum();
    let before: u64 = sizes[..rank].iter().map(|&n| n as u64).sum();
    // Rank 0's pointer before, or its failure, for everyone.
    let mut base = [0i64, 0i64];
    if rank == 0 {
        match s.files.get_mut(fh)?.shared.fetch_add(total) {
            Ok(v) => base[0] = v as i64,
            Err(f) => base[1] = i64::from(f.error.class.code()),
        }
    }
    // SAFETY: `base` outlives the broadcast, which completes here.
    unsafe {
        s.rt.coll(
            comm,
            CollCall::Bcast {
                buf: base.as_mut_ptr().cast(),
                len: 16,
                root: 0,
            },
        )
    }
    .map_err(|e| file_fail(e.class, e.message))?;
    if base[1] != 0 {
        return Err(file_fail(
            ErrorClass::Io,
            "rank 0 could not advance the shared file pointer",
        ));
    }
    Ok(base[0] as u64 + before)
}

/// One access, of any kind; its status.
fn access(
    s: &mut State,
    fh: MPI_File,
    write: bool,
    pos: Pos,
    mode: Mode,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
) -> Result<Status, Fail> {
    let comm = s.files.get(fh)?.comm;
    let checked = check(s, fh, write, pos, buf, count, dt);
    let result = (|| {
        // Ranks that failed their checks still take part in the ordering.
        let start = if let Pos::Ordered = pos {
            let mine = checked.as_ref().ok().map(|c| c.1);
            Some(ordered_start(s, fh, mine))
        } else {
            None
        };
        let (t, etypes, plan) = checked?;
        let f = s.files.get_mut(fh)?;
        let esize = f.view.esize;
        let first = match pos {
            Pos::At(off) => off as u64,
            Pos::Individual => f.pointer,
            Pos::Shared => f.shared.fetch_add(etypes)?,
            Pos::Ordered => start.expect("computed above")?,
        };
        let n = move_data(s, fh, write, first * esize, &t, &plan)?;
        if let Pos::Individual = pos {
            s.files.get_mut(fh)?.pointer = first + (n as u64).div_ceil(esize);
        }
        Ok(Status {
            count: n,
            ..Status::default()
        })
    })();
    if mode == Mode::Collective && !matches!(pos, Pos::Ordered) {
        barrier(s, comm)?;
    }
    result
}

/// A blocking access.
unsafe fn blocking(
    func: &'static str,
    fh: MPI_File,
    write: bool,
    pos: Pos,
    collective: bool,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    status: *mut MPI_Status,
) -> c_int {
    let mode = if collective {
        Mode::Collective
    } else {
        Mode::Independent
    };
    file_call(func, fh, |s| {
        let st = access(s, fh, write, pos, mode, buf, count, dt)?;
        // SAFETY: `status` is MPI_STATUS_IGNORE (null) or the application's status.
        unsafe { args::write_status(status, &st) };
        Ok(())
    })
}

/// A non-blocking access, done at once: the request is complete.
unsafe fn nonblocking(
    func: &'static str,
    fh: MPI_File,
    write: bool,
    pos: Pos,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
    req: *mut MPI_Request,
) -> c_int {
    file_call(func, fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, req, "request")?;
        let st = access(s, fh, write, pos, Mode::Deferred, buf, count, dt)?;
        let h = request::handle(s, MPI_COMM_WORLD, Op::Done(st));
        // SAFETY: checked non-null.
        unsafe { put(req, h) };
        Ok(())
    })
}

/// The begin of a split collective: the access happens here, its status
/// waits for the end.
unsafe fn begin(
    func: &'static str,
    fh: MPI_File,
    write: bool,
    pos: Pos,
    buf: *mut c_void,
    count: MPI_Count,
    dt: MPI_Datatype,
) -> c_int {
    file_call(func, fh, |s| {
        if s.files.get(fh)?.split.is_some() {
            return Err(file_fail(
                ErrorClass::Io,
                "a split collective is already in progress on this file",
            ));
        }
        let st = access(s, fh, write, pos, Mode::Deferred, buf, count, dt)?;
        s.files.get_mut(fh)?.split = Some(st);
        Ok(())
    })
}

/// The end of a split collective: a barrier, as the blocking forms end.
unsafe fn end(func: &'static str, fh: MPI_File, status: *mut MPI_Status) -> c_int {
    file_call(func, fh, |s| {
        let comm = s.files.get(fh)?.comm;
        barrier(s, comm)?;
        let st = s.files.get_mut(fh)?.split.take().ok_or_else(|| {
            file_fail(ErrorClass::Io, "no split collective was begun on this file")
        })?;
        // SAFETY: `status` is MPI_STATUS_IGNORE (null) or the application's status.
        unsafe { args::write_status(status, &st) };
        Ok(())
    })
}

/// Defines each exported function and its `PMPI_` twin (the build script
/// only sees functions written out, so these carry their own).
macro_rules! file_functions {
    (@one $name:ident $pname:ident ($($arg:ident : $ty:ty),*) $body:block) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int $body

        #[no_mangle]
        pub unsafe extern "C" fn $pname($($arg: $ty),*) -> c_int {
            // SAFETY: the same contract as the function it forwards to.
            unsafe { $name($($arg),*) }
        }
    };
    // Explicit offsets.
    (at $($name:ident $pname:ident $write:literal $coll:literal $buf:ty, $cnt:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, offset: MPI_Offset, buf: $buf, count: $cnt,
            datatype: MPI_Datatype, status: *mut MPI_Status) {
            // SAFETY: forwarded from the application's call.
            unsafe { blocking(stringify!($name), fh, $write, Pos::At(offset), $coll,
                buf as *const c_void as *mut c_void, i64::from(count), datatype, status) }
        });
    )*};
    (iat $($name:ident $pname:ident $write:literal $buf:ty, $cnt:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, offset: MPI_Offset, buf: $buf, count: $cnt,
            datatype: MPI_Datatype, request: *mut MPI_Request) {
            // SAFETY: forwarded from the application's call.
            unsafe { nonblocking(stringify!($name), fh, $write, Pos::At(offset),
                buf as *const c_void as *mut c_void, i64::from(count), datatype, request) }
        });
    )*};
    (at_begin $($name:ident $pname:ident $write:literal $buf:ty, $cnt:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, offset: MPI_Offset, buf: $buf, count: $cnt,
            datatype: MPI_Datatype) {
            // SAFETY: forwarded from the application's call.
            unsafe { begin(stringify!($name), fh, $write, Pos::At(offset),
                buf as *const c_void as *mut c_void, i64::from(count), datatype) }
        });
    )*};
    // The individual and shared file pointers.
    (ptr $($name:ident $pname:ident $write:literal $pos:ident $coll:literal $buf:ty, $cnt:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, buf: $buf, count: $cnt,
            datatype: MPI_Datatype, status: *mut MPI_Status) {
            // SAFETY: forwarded from the application's call.
            unsafe { blocking(stringify!($name), fh, $write, Pos::$pos, $coll,
                buf as *const c_void as *mut c_void, i64::from(count), datatype, status) }
        });
    )*};
    (iptr $($name:ident $pname:ident $write:literal $pos:ident $buf:ty, $cnt:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, buf: $buf, count: $cnt,
            datatype: MPI_Datatype, request: *mut MPI_Request) {
            // SAFETY: forwarded from the application's call.
            unsafe { nonblocking(stringify!($name), fh, $write, Pos::$pos,
                buf as *const c_void as *mut c_void, i64::from(count), datatype, request) }
        });
    )*};
    (ptr_begin $($name:ident $pname:ident $write:literal $pos:ident $buf:ty, $cnt:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, buf: $buf, count: $cnt,
            datatype: MPI_Datatype) {
            // SAFETY: forwarded from the application's call.
            unsafe { begin(stringify!($name), fh, $write, Pos::$pos,
                buf as *const c_void as *mut c_void, i64::from(count), datatype) }
        });
    )*};
    (end $($name:ident $pname:ident $buf:ty;)*) => {$(
        file_functions!(@one $name $pname (fh: MPI_File, buf: $buf, status: *mut MPI_Status) {
            let _ = buf;
            // SAFETY: forwarded from the application's call.
            unsafe { end(stringify!($name), fh, status) }
        });
    )*};
}

file_functions! { at
    MPI_File_read_at PMPI_File_read_at false false *mut c_void, c_int;
    MPI_File_read_at_c PMPI_File_read_at_c false false *mut c_void, MPI_Count;
    MPI_File_read_at_all PMPI_File_read_at_all false true *mut c_void, c_int;
    MPI_File_read_at_all_c PMPI_File_read_at_all_c false true *mut c_void, MPI_Count;
    MPI_File_write_at PMPI_File_write_at true false *const c_void, c_int;
    MPI_File_write_at_c PMPI_File_write_at_c true false *const c_void, MPI_Count;
    MPI_File_write_at_all PMPI_File_write_at_all true true *const c_void, c_int;
    MPI_File_write_at_all_c PMPI_File_write_at_all_c true true *const c_void, MPI_Count;
}

file_functions! { iat
    MPI_File_iread_at PMPI_File_iread_at false *mut c_void, c_int;
    MPI_File_iread_at_c PMPI_File_iread_at_c false *mut c_void, MPI_Count;
    MPI_File_iread_at_all PMPI_File_iread_at_all false *mut c_void, c_int;
    MPI_File_iread_at_all_c PMPI_File_iread_at_all_c false *mut c_void, MPI_Count;
    MPI_File_iwrite_at PMPI_File_iwrite_at true *const c_void, c_int;
    MPI_File_iwrite_at_c PMPI_File_iwrite_at_c true *const c_void, MPI_Count;
    MPI_File_iwrite_at_all PMPI_File_iwrite_at_all true *const c_void, c_int;
    MPI_File_iwrite_at_all_c PMPI_File_iwrite_at_all_c true *const c_void, MPI_Count;
}

file_functions! { at_begin
    MPI_File_read_at_all_begin PMPI_File_read_at_all_begin false *mut c_void, c_int;
    MPI_File_read_at_all_begin_c PMPI_File_read_at_all_begin_c false *mut c_void, MPI_Count;
    MPI_File_write_at_all_begin PMPI_File_write_at_all_begin true *const c_void, c_int;
    MPI_File_write_at_all_begin_c PMPI_File_write_at_all_begin_c true *const c_void, MPI_Count;
}

file_functions! { ptr
    MPI_File_read PMPI_File_read false Individual false *mut c_void, c_int;
    MPI_File_read_c PMPI_File_read_c false Individual false *mut c_void, MPI_Count;
    MPI_File_read_all PMPI_File_read_all false Individual true *mut c_void, c_int;
    MPI_File_read_all_c PMPI_File_read_all_c false Individual true *mut c_void, MPI_Count;
    MPI_File_write PMPI_File_write true Individual false *const c_void, c_int;
    MPI_File_write_c PMPI_File_write_c true Individual false *const c_void, MPI_Count;
    MPI_File_write_all PMPI_File_write_all true Individual true *const c_void, c_int;
    MPI_File_write_all_c PMPI_File_write_all_c true Individual true *const c_void, MPI_Count;
    MPI_File_read_shared PMPI_File_read_shared false Shared false *mut c_void, c_int;
    MPI_File_read_shared_c PMPI_File_read_shared_c false Shared false *mut c_void, MPI_Count;
    MPI_File_write_shared PMPI_File_write_shared true Shared false *const c_void, c_int;
    MPI_File_write_shared_c PMPI_File_write_shared_c true Shared false *const c_void, MPI_Count;
    MPI_File_read_ordered PMPI_File_read_ordered false Ordered true *mut c_void, c_int;
    MPI_File_read_ordered_c PMPI_File_read_ordered_c false Ordered true *mut c_void, MPI_Count;
    MPI_File_write_ordered PMPI_File_write_ordered true Ordered true *const c_void, c_int;
    MPI_File_write_ordered_c PMPI_File_write_ordered_c true Ordered true *const c_void, MPI_Count;
}

file_functions! { iptr
    MPI_File_iread PMPI_File_iread false Individual *mut c_void, c_int;
    MPI_File_iread_c PMPI_File_iread_c false Individual *mut c_void, MPI_Count;
    MPI_File_iread_all PMPI_File_iread_all false Individual *mut c_void, c_int;
    MPI_File_iread_all_c PMPI_File_iread_all_c false Individual *mut c_void, MPI_Count;
    MPI_File_iwrite PMPI_File_iwrite true Individual *const c_void, c_int;
    MPI_File_iwrite_c PMPI_File_iwrite_c true Individual *const c_void, MPI_Count;
    MPI_File_iwrite_all PMPI_File_iwrite_all true Individual *const c_void, c_int;
    MPI_File_iwrite_all_c PMPI_File_iwrite_all_c true Individual *const c_void, MPI_Count;
    MPI_File_iread_shared PMPI_File_iread_shared false Shared *mut c_void, c_int;
    MPI_File_iread_shared_c PMPI_File_iread_shared_c false Shared *mut c_void, MPI_Count;
    MPI_File_iwrite_shared PMPI_File_iwrite_shared true Shared *const c_void, c_int;
    MPI_File_iwrite_shared_c PMPI_File_iwrite_shared_c true Shared *const c_void, MPI_Count;
}

file_functions! { ptr_begin
    MPI_File_read_all_begin PMPI_File_read_all_begin false Individual *mut c_void, c_int;
    MPI_File_read_all_begin_c PMPI_File_read_all_begin_c false Individual *mut c_void, MPI_Count;
    MPI_File_write_all_begin PMPI_File_write_all_begin true Individual *const c_void, c_int;
    MPI_File_write_all_begin_c PMPI_File_write_all_begin_c true Individual *const c_void, MPI_Count;
    MPI_File_read_ordered_begin PMPI_File_read_ordered_begin false Ordered *mut c_void, c_int;
    MPI_File_read_ordered_begin_c PMPI_File_read_ordered_begin_c false Ordered *mut c_void, MPI_Count;
    MPI_File_write_ordered_begin PMPI_File_write_ordered_begin true Ordered *const c_void, c_int;
    MPI_File_write_ordered_begin_c PMPI_File_write_ordered_begin_c true Ordered *const c_void, MPI_Count;
}

file_functions! { end
    MPI_File_read_at_all_end PMPI_File_read_at_all_end *mut c_void;
    MPI_File_write_at_all_end PMPI_File_write_at_all_end *const c_void;
    MPI_File_read_all_end PMPI_File_read_all_end *mut c_void;
    MPI_File_write_all_end PMPI_File_write_all_end *const c_void;
    MPI_File_read_ordered_end PMPI_File_read_ordered_end *mut c_void;
    MPI_File_write_ordered_end PMPI_File_write_ordered_end *const c_void;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(n: usize) -> std::fs::File {
        let path = std::env::temp_dir().join(format!("tandem-read-ranges-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all_at(&bytes, 0).unwrap();
        f
    }

    fn expect(ranges: &[(u64, u64)], size: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for &(off, len) in ranges {
            for b in off..(off + len).min(size) {
                out.push((b as usize * 7 % 251) as u8);
            }
            if off + len > size {
                break;
            }
        }
        out
    }

    #[test]
    fn sieved_reads_match_range_by_range_reads_and_stop_at_the_end() {
        let f = file_of(20000);
        // Nearby blocks (one stretch), far ones (alone), past the end in a
        // stretch and alone, overlapping ones.
        let cases: [&[(u64, u64)]; 4] = [
            &[(0, 4), (8, 4), (16, 4), (24, 4), (500, 10), (9000, 20)],
            &[(100, 50), (120, 4), (200, 3)],
            &[(10, 1), (12, 1), (19995, 3), (19999, 8), (20005, 2)],
            &[(0, 4), (9000, 16), (19990, 20), (30000, 5)],
        ];
        for ranges in cases {
            let total: u64 = ranges.iter().map(|r| r.1).sum();
            let mut data = vec![0u8; total as usize];
            let n = read_ranges(&f, ranges, &mut data).unwrap();
            let want = expect(ranges, 20000);
            assert_eq!(n, want.len(), "{ranges:?}");
            assert_eq!(&data[..n], &want[..], "{ranges:?}");
        }
    }
}

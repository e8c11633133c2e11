//! MPI-IO over POSIX files: opening, closing, deleting, sizes, hints,
//! atomicity, views, file pointers and error handlers (the data access
//! functions are in file_io.rs, the view's offset mapping in file_view.rs).
//!
//! * Every rank opens the file itself and reads and writes its own bytes
//!   with `pread`/`pwrite`: no aggregation of requests between ranks.
//! * A file keeps a private duplicate of its communicator, so its
//!   collectives (the agreement on the access mode and on errors, the
//!   barriers of the collective data accesses, the ordered accesses' sizes)
//!   never match the application's traffic.
//! * Collective calls that can fail on some ranks only (open, set_size,
//!   set_view, ...) agree on the outcome: every rank returns the class of
//!   the lowest-numbered rank that failed.
//! * The shared file pointer lives in a hidden side file next to the file,
//!   read and updated under an `fcntl` lock (as ROMIO does), rather than at
//!   rank 0 of the communicator: a pointer held by a rank and updated
//!   through messages would need that rank to make progress while it
//!   computes, which Tandem's progress engine only does under some
//!   policies; the lock works for ranks on one host and on a shared file
//!   system, and needs no peer. The side file is created on first use and
//!   removed at close.
//! * Atomic mode (`MPI_File_set_atomicity`) takes an `fcntl` lock over the
//!   byte range each access covers.

use std::ffi::CStr;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::raw::{c_char, c_int};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tandem::coll::CollCall;
use tandem::p2p::Status;
use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::file_view::View;
use crate::state::{call_with, Fail, Outcome, State};
use crate::{datatype, errhandler, group, info};

/// First handle value of files.
const FILE_BASE: usize = 0x40000;

/// An open file.
pub struct File {
    /// The private duplicate of the communicator.
    pub comm: CommId,
    pub rank: u32,
    pub fd: fs::File,
    path: PathBuf,
    pub amode: c_int,
    pub atomic: bool,
    errhandler: MPI_Errhandler,
    hints: Vec<(String, String)>,
    pub view: Arc<View>,
    /// The view's types as given (copies of derived ones, see datatype::duplicate).
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: String,
    /// What `datarep` names (see datarep.rs).
    pub rep: crate::datarep::Datarep,
    /// The individual file pointer, in elementary types of the view.
    pub pointer: u64,
    pub shared: SharedPointer,
    /// The outcome of a split collective begun and not yet ended.
    pub split: Option<Status>,
}

/// The open files, and the error handler of `MPI_FILE_NULL` (the one
/// errors in `MPI_File_open` and `MPI_File_delete` go to, and the one new
/// files start with).
pub struct Files {
    slots: Vec<Option<File>>,
    null_errhandler: MPI_Errhandler,
}

impl Default for Files {
    fn default() -> Files {
        Files {
            slots: Vec::new(),
            // The standard's default for files.
            null_errhandler: MPI_ERRORS_RETURN,
        }
    }
}

pub(crate) fn file_fail(class: ErrorClass, msg: impl Into<String>) -> Fail {
    Fail::new(MPI_COMM_WORLD, class, msg)
}

impl Files {
    pub fn get(&self, fh: MPI_File) -> Result<&File, Fail> {
        fh.checked_sub(FILE_BASE)
            .and_then(|i| self.slots.get(i))
            .and_then(Option::as_ref)
            .ok_or_else(|| bad_handle(fh))
    }

    pub fn get_mut(&mut self, fh: MPI_File) -> Result<&mut File, Fail> {
        fh.checked_sub(FILE_BASE)
            .and_then(|i| self.slots.get_mut(i))
            .and_then(Option::as_mut)
            .ok_or_else(|| bad_handle(fh))
    }

    fn add(&mut self, f: File) -> MPI_File {
        let i = match self.slots.iter().position(Option::is_none) {
            Some(i) => {
                self.slots[i] = Some(f);
                i
            }
            None => {
                self.slots.push(Some(f));
                self.slots.len() - 1
            }
        };
        FILE_BASE + i
    }

    fn take(&mut self, fh: MPI_File) -> Option<File> {
        self.slots.get_mut(fh.checked_sub(FILE_BASE)?)?.take()
    }
}

fn bad_handle(fh: MPI_File) -> Fail {
    let what = if fh == MPI_FILE_NULL {
        "MPI_FILE_NULL is not an open file".to_string()
    } else {
        format!("invalid file handle {fh:#x}")
    };
    file_fail(ErrorClass::File, what)
}

/// Runs a file call: errors go to the file's error handler, or to
/// `MPI_FILE_NULL`'s when there is no valid file.
pub(crate) fn file_call(
    func: &'static str,
    fh: MPI_File,
    body: impl FnOnce(&mut State) -> Outcome,
) -> c_int {
    call_with(func, body, |s, func, f| {
        let (handler, target) = match s.files.get(fh) {
            Ok(file) => (file.errhandler, fh),
            Err(_) => (s.files.null_errhandler, MPI_FILE_NULL),
        };
        errhandler::raise_to(s, func, handler, target, f)
    })
}

/// The error class of a failed system call on a file.
pub(crate) fn io_class(e: &io::Error) -> ErrorClass {
    match e.raw_os_error() {
        Some(libc::ENOENT) => ErrorClass::NoSuchFile,
        Some(libc::EEXIST) => ErrorClass::FileExists,
        Some(libc::EACCES | libc::EPERM) => ErrorClass::Access,
        Some(libc::EROFS) => ErrorClass::ReadOnly,
        Some(libc::ENOSPC | libc::EFBIG) => ErrorClass::NoSpace,
        Some(libc::EDQUOT) => ErrorClass::Quota,
        Some(libc::ETXTBSY | libc::EBUSY) => ErrorClass::FileInUse,
        Some(libc::EISDIR | libc::ENOTDIR | libc::ENAMETOOLONG | libc::ELOOP) => {
            ErrorClass::BadFile
        }
        _ => ErrorClass::Io,
    }
}

pub(crate) fn io_fail(e: &io::Error, what: &str) -> Fail {
    file_fail(io_class(e), format!("{what}: {e}"))
}

/// The classes a rank may report to the others in an agreement.
const AGREED_CLASSES: [ErrorClass; 24] = [
    ErrorClass::Access,
    ErrorClass::Amode,
    ErrorClass::BadFile,
    ErrorClass::FileExists,
    ErrorClass::FileInUse,
    ErrorClass::File,
    ErrorClass::Io,
    ErrorClass::NotSame,
    ErrorClass::NoSpace,
    ErrorClass::NoSuchFile,
    ErrorClass::Quota,
    ErrorClass::ReadOnly,
    ErrorClass::UnsupportedDatarep,
    ErrorClass::Unsupported,
    ErrorClass::Arg,
    ErrorClass::Type,
    ErrorClass::Count,
    ErrorClass::Buffer,
    ErrorClass::Info,
    ErrorClass::InfoKey,
    ErrorClass::InfoValue,
    ErrorClass::Comm,
    ErrorClass::Disp,
    ErrorClass::Other,
];

fn class_of_code(code: i64) -> ErrorClass {
    AGREED_CLASSES
        .into_iter()
        .find(|c| i64::from(c.code()) == code)
        .unwrap_or(ErrorClass::Other)
}

/// Gathers `mine` (the same length at every rank) from every rank of `comm`.
pub(crate) fn allgather(s: &mut State, comm: CommId, mine: &[i64]) -> Result<Vec<i64>, Fail> {
    let words: Vec<u64> = mine.iter().map(|&v| v as u64).collect();
    let all =
        s.rt.allgather_u64(comm, &words)
            .map_err(|e| file_fail(e.class, e.message))?;
    Ok(all.into_iter().map(|v| v as i64).collect())
}

/// Agrees on the outcome of a collective step: every rank returns an error
/// of the class of the lowest-numbered rank that failed (with its own
/// message if it failed itself), or its own value if none did.
pub(crate) fn agree<T>(s: &mut State, comm: CommId, local: Result<T, Fail>) -> Result<T, Fail> {
    let code = local
        .as_ref()
        .err()
        .map_or(0, |f| i64::from(f.error.class.code()));
    let all = allgather(s, comm, &[code])?;
    let Some((rank, &first)) = all.iter().enumerate().find(|&(_, &c)| c != 0) else {
        return local;
    };
    let class = class_of_code(first);
    match local {
        Err(f) if f.error.class == class => Err(f),
        _ => Err(file_fail(
            class,
            format!("the collective call failed at rank {rank} of the file's communicator"),
        )),
    }
}

pub(crate) fn barrier(s: &mut State, comm: CommId) -> Outcome {
    // SAFETY: a barrier moves no data.
    unsafe { s.rt.coll(comm, CollCall::Barrier) }.map_err(|e| file_fail(e.class, e.message))
}

/// A file name from C, without a ROMIO-style file system prefix (`ufs:`).
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
unsafe fn path_arg(name: *const c_char) -> Result<PathBuf, Fail> {
    if name.is_null() {
        return Err(file_fail(ErrorClass::BadFile, "NULL file name"));
    }
    // SAFETY: the caller's promise.
    let text = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    const PREFIXES: [&str; 8] = [
        "ufs", "nfs", "lustre", "gpfs", "pvfs2", "panfs", "xfs", "testfs",
    ];
    let text = match text.split_once(':') {
        Some((fs, rest)) if PREFIXES.contains(&fs) => rest.to_string(),
        _ => text,
    };
    if text.is_empty() {
        return Err(file_fail(ErrorClass::BadFile, "empty file name"));
    }
    Ok(PathBuf::from(text))
}

/// Checks an access mode: exactly one of read-only, write-only and
/// read-write, and no creation of a read-only file.
fn check_amode(amode: c_int) -> Result<(), Fail> {
    let known = MPI_MODE_RDONLY
        | MPI_MODE_WRONLY
        | MPI_MODE_RDWR
        | MPI_MODE_CREATE
        | MPI_MODE_EXCL
        | MPI_MODE_DELETE_ON_CLOSE
        | MPI_MODE_UNIQUE_OPEN
        | MPI_MODE_SEQUENTIAL
        | MPI_MODE_APPEND;
    let bad = |why: &str| {
        Err(file_fail(
            ErrorClass::Amode,
            format!("access mode {amode}: {why}"),
        ))
    };
    if amode & !known != 0 {
        return bad("unknown bits");
    }
    let rw = [MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR]
        .iter()
        .filter(|&&m| amode & m != 0)
        .count();
    if rw != 1 {
        return bad("exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR is needed");
    }
    if amode & MPI_MODE_RDONLY != 0 && amode & (MPI_MODE_CREATE | MPI_MODE_EXCL) != 0 {
        return bad("MPI_MODE_RDONLY with MPI_MODE_CREATE or MPI_MODE_EXCL");
    }
    if amode & MPI_MODE_RDWR != 0 && amode & MPI_MODE_SEQUENTIAL != 0 {
        return bad("MPI_MODE_RDWR with MPI_MODE_SEQUENTIAL");
    }
    Ok(())
}

/// Opens `path` as `amode` says; `create` whether this rank creates it
/// (with `MPI_MODE_EXCL`, only one rank may).
fn open_path(path: &Path, amode: c_int, create: bool) -> Result<fs::File, Fail> {
    let mut o = OpenOptions::new();
    o.read(amode & (MPI_MODE_RDONLY | MPI_MODE_RDWR) != 0)
        .write(amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR) != 0);
    if amode & MPI_MODE_CREATE != 0 {
        if create && amode & MPI_MODE_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
    }
    o.custom_flags(libc::O_CLOEXEC);
    let f = o
        .open(path)
        .map_err(|e| io_fail(&e, &format!("cannot open {}", path.display())))?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(file_fail(
            ErrorClass::BadFile,
            format!("{} is a directory", path.display()),
        ));
    }
    Ok(f)
}

/// Opens made by this process, for unique side file names.
static OPENS: AtomicU64 = AtomicU64::new(0);

/// The shared file pointer: a side file holding its value (in elementary
/// types of the view), created on first use.
pub struct SharedPointer {
    path: PathBuf,
    fd: Option<fs::File>,
    /// Its value while the side file is absent or empty.
    initial: u64,
}

/// An `fcntl` lock, released on drop.
pub(crate) struct RangeLock<'a> {
    fd: &'a fs::File,
    start: u64,
    len: u64,
}

fn fcntl_lock(fd: &fs::File, kind: c_int, start: u64, len: u64) -> io::Result<()> {
    // SAFETY: a zeroed flock is a valid value (plain integers).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start as libc::off_t;
    fl.l_len = len as libc::off_t;
    loop {
        // SAFETY: F_SETLKW with a valid flock on an open descriptor.
        let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETLKW, &fl) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl<'a> RangeLock<'a> {
    /// Locks `[start, start + len)` (0: to the end) for writing or reading.
    pub(crate) fn new(
        fd: &'a fs::File,
        write: bool,
        start: u64,
        len: u64,
    ) -> io::Result<RangeLock<'a>> {
        let kind = if write { libc::F_WRLCK } else { libc::F_RDLCK };
        fcntl_lock(fd, kind, start, len)?;
        Ok(RangeLock { fd, start, len })
    }
}

impl Drop for RangeLock<'_> {
    fn drop(&mut self) {
        let _ = fcntl_lock(self.fd, libc::F_UNLCK, self.start, self.len);
    }
}

impl SharedPointer {
    fn side_file(&mut self) -> Result<&fs::File, Fail> {
        if self.fd.is_none() {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(&self.path)
                .map_err(|e| {
                    io_fail(
                        &e,
                        &format!(
                            "cannot create the shared file pointer's file {}",
                            self.path.display()
                        ),
                    )
                })?;
            self.fd = Some(f);
        }
        Ok(self.fd.as_ref().expect("opened above"))
    }

    fn read_value(fd: &fs::File, initial: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            match fd.read_at(&mut b[got..], got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(if got == 8 {
            u64::from_ne_bytes(b)
        } else {
            initial
        })
    }

    /// Adds `n` to the pointer; its value before.
    pub fn fetch_add(&mut self, n: u64) -> Result<u64, Fail> {
        let initial = self.initial;
        let fd = self.side_file()?;
        let fail = |e: io::Error| io_fail(&e, "shared file pointer");
        let _lock = RangeLock::new(fd, true, 0, 0).map_err(fail)?;
        let v = Self::read_value(fd, initial).map_err(fail)?;
        if n > 0 {
            fd.write_all_at(&(v + n).to_ne_bytes(), 0).map_err(fail)?;
        }
        Ok(v)
    }

    pub fn get(&mut self) -> Result<u64, Fail> {
        self.fetch_add(0)
    }

    pub fn set(&mut self, v: u64) -> Result<(), Fail> {
        let fd = self.side_file()?;
        let fail = |e: io::Error| io_fail(&e, "shared file pointer");
        let _lock = RangeLock::new(fd, true, 0, 0).map_err(fail)?;
        fd.write_all_at(&v.to_ne_bytes(), 0).map_err(fail)
    }

    /// Back to zero after a new view: rewrites the side file if there is
    /// one (at one rank), and forgets an initial value.
    fn reset(&mut self, writer: bool) -> Result<(), Fail> {
        self.initial = 0;
        if !writer {
            return Ok(());
        }
        if self.fd.is_none() && !self.path.exists() {
            return Ok(());
        }
        self.set(0)
    }
}

/// The side file of the shared file pointer of `path`, unique to one open.
fn side_path(path: &Path, pid: i64, serial: i64, clock: i64) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new(""));
    dir.join(format!(".{name}.tandem-shfp.{pid}.{serial}.{clock}"))
}

/// What MPI_File_open checks locally before the ranks agree.
fn open_args(
    s: &State,
    filename: *const c_char,
    amode: c_int,
    info_: MPI_Info,
) -> Result<(PathBuf, Vec<(String, String)>), Fail> {
    // SAFETY: the application passes a C string (or NULL, refused).
    let path = unsafe { path_arg(filename) }?;
    check_amode(amode)?;
    let hints = if info_ == MPI_INFO_NULL {
        Vec::new()
    } else {
        info::pairs(s, info_)?
    };
    Ok((path, hints))
}

/// The open itself, on the private communicator `comm`.
fn open_on(
    s: &mut State,
    comm: CommId,
    local: Result<(PathBuf, Vec<(String, String)>), Fail>,
    amode: c_int,
) -> Result<File, Fail> {
    let rank =
        s.rt.comm(comm)
            .map_err(|e| file_fail(e.class, e.message))?
            .rank;
    // 1. Everyone's arguments were fine, and the access modes are the same.
    let code = local
        .as_ref()
        .err()
        .map_or(0, |f| i64::from(f.error.class.code()));
    // Rank 0's process id, open count and clock name the side file: unique
    // on its host, and across hosts sharing a file system all but surely.
    let serial = OPENS.fetch_add(1, Ordering::Relaxed) as i64;
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mine = [
        i64::from(amode),
        code,
        i64::from(std::process::id()),
        serial,
        i64::from(clock),
    ];
    let all = allgather(s, comm, &mine)?;
    let (path, hints) = agree(s, comm, local)?;
    if all.chunks_exact(5).any(|r| r[0] != i64::from(amode)) {
        return Err(file_fail(
            ErrorClass::NotSame,
            "the ranks passed different access modes to MPI_File_open",
        ));
    }
    let shared_path = side_path(&path, all[2], all[3], all[4]);
    // 2. Rank 0 creates the file (alone with MPI_MODE_EXCL), then the others open it.
    let first = if rank == 0 {
        Some(open_path(&path, amode, true))
    } else {
        None
    };
    let first_code = match &first {
        Some(Err(f)) => i64::from(f.error.class.code()),
        _ => 0,
    };
    let codes = allgather(s, comm, &[first_code])?;
    let opened = match first {
        Some(r) => r,
        None if codes[0] != 0 => Err(file_fail(
            class_of_code(codes[0]),
            format!("cannot open {} (at rank 0)", path.display()),
        )),
        None => open_path(&path, amode, false),
    };
    // 3. Every rank opened it.
    let fd = agree(s, comm, opened)?;
    let size = if amode & MPI_MODE_APPEND != 0 {
        fd.metadata()
            .map_err(|e| io_fail(&e, "cannot read the file's size"))?
            .len()
    } else {
        0
    };
    Ok(File {
        comm,
        rank,
        fd,
        path,
        amode,
        atomic: false,
        errhandler: s.files.null_errhandler,
        hints,
        view: Arc::new(View::bytes()),
        etype: MPI_BYTE,
        filetype: MPI_BYTE,
        datarep: "native".into(),
        rep: Default::default(),
        pointer: size,
        shared: SharedPointer {
            path: shared_path,
            fd: None,
            initial: size,
        },
        split: None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_open(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
    fh: *mut MPI_File,
) -> c_int {
    file_call("MPI_File_open", MPI_FILE_NULL, |s| {
        let cid =
            args::intra_comm(s, comm).map_err(|f| file_fail(f.error.class, f.error.message))?;
        // A bad argument at one rank fails the open at all, not only there.
        let local = args::out_ptr(MPI_COMM_WORLD, fh, "fh")
            .and_then(|()| open_args(s, filename, amode, info));
        let private =
            s.rt.comm_dup(cid)
                .map_err(|e| file_fail(e.class, e.message))?;
        match open_on(s, private, local, amode) {
            Ok(f) => {
                let h = s.files.add(f);
                // SAFETY: checked non-null.
                unsafe { put(fh, h) };
                Ok(())
            }
            Err(f) => {
                let _ = s.rt.comm_free(private);
                Err(f)
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_close(fh: *mut MPI_File) -> c_int {
    let h = if fh.is_null() {
        MPI_FILE_NULL
    } else {
        // SAFETY: checked non-null.
        unsafe { *fh }
    };
    file_call("MPI_File_close", h, |s| {
        args::out_ptr(MPI_COMM_WORLD, fh, "fh")?;
        let comm = s.files.get(h)?.comm;
        // Every rank's accesses are over before the files go.
        barrier(s, comm)?;
        let f = s.files.take(h).expect("checked above");
        let mut result = Ok(());
        if f.rank == 0 {
            let _ = fs::remove_file(&f.shared.path);
            if f.amode & MPI_MODE_DELETE_ON_CLOSE != 0 {
                if let Err(e) = fs::remove_file(&f.path) {
                    result = Err(io_fail(&e, "cannot delete the file on close"));
                }
            }
        }
        datatype::release(f.etype);
        datatype::release(f.filetype);
        drop(f);
        let result = agree(s, comm, result);
        let _ = s.rt.comm_free(comm);
        // SAFETY: checked non-null.
        unsafe { put(fh, MPI_FILE_NULL) };
        result
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_delete(filename: *const c_char, info: MPI_Info) -> c_int {
    file_call("MPI_File_delete", MPI_FILE_NULL, |s| {
        info::check_optional(s, info)?;
        // SAFETY: the application passes a C string (or NULL, refused).
        let path = unsafe { path_arg(filename) }?;
        fs::remove_file(&path)
            .map_err(|e| io_fail(&e, &format!("cannot delete {}", path.display())))
    })
}

/// Refuses an operation the access mode rules out.
pub(crate) fn check_writable(f: &File) -> Outcome {
    if f.amode & MPI_MODE_RDONLY != 0 {
        return Err(file_fail(
            ErrorClass::ReadOnly,
            "the file was opened read-only",
        ));
    }
    Ok(())
}

pub(crate) fn check_not_sequential(f: &File) -> Outcome {
    if f.amode & MPI_MODE_SEQUENTIAL != 0 {
        return Err(file_fail(
            ErrorClass::Unsupported,
            "not allowed on a file opened with MPI_MODE_SEQUENTIAL",
        ));
    }
    Ok(())
}

fn offset_arg(v: MPI_Offset, what: &str) -> Result<u64, Fail> {
    u64::try_from(v).map_err(|_| file_fail(ErrorClass::Arg, format!("negative {what} {v}")))
}

/// `MPI_File_set_size` and `MPI_File_preallocate`: rank 0 changes the
/// file, the others learn how it went.
fn resize(s: &mut State, fh: MPI_File, size: MPI_Offset, grow_only: bool) -> Outcome {
    let f = s.files.get(fh)?;
    let comm = f.comm;
    let local = (|| {
        let size = offset_arg(size, "size")?;
        check_writable(f)?;
        check_not_sequential(f)?;
        Ok(size)
    })();
    let size = agree(s, comm, local)?;
    let f = s.files.get(fh)?;
    let mut result = Ok(());
    if f.rank == 0 {
        let fail = |e: io::Error| io_fail(&e, "cannot change the file's size");
        result = if grow_only {
            let now = f.fd.metadata().map_err(fail)?.len();
            if size > now {
                // SAFETY: posix_fallocate on an open descriptor.
                let rc = unsafe { libc::posix_fallocate(f.fd.as_raw_fd(), 0, size as libc::off_t) };
                match rc {
                    0 => Ok(()),
                    libc::EOPNOTSUPP | libc::EINVAL => f.fd.set_len(size).map_err(fail),
                    e => Err(fail(io::Error::from_raw_os_error(e))),
                }
            } else {
                Ok(())
            }
        } else {
            f.fd.set_len(size).map_err(fail)
        };
    }
    agree(s, comm, result)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_size(fh: MPI_File, size: MPI_Offset) -> c_int {
    file_call("MPI_File_set_size", fh, |s| resize(s, fh, size, false))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_preallocate(fh: MPI_File, size: MPI_Offset) -> c_int {
    file_call("MPI_File_preallocate", fh, |s| resize(s, fh, size, true))
}

pub(crate) fn file_size(f: &File) -> Result<u64, Fail> {
    f.fd.metadata()
        .map(|m| m.len())
        .map_err(|e| io_fail(&e, "cannot read the file's size"))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_size(fh: MPI_File, size: *mut MPI_Offset) -> c_int {
    file_call("MPI_File_get_size", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        let n = file_size(s.files.get(fh)?)?;
        // SAFETY: checked non-null.
        unsafe { put(size, n as MPI_Offset) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_sync(fh: MPI_File) -> c_int {
    file_call("MPI_File_sync", fh, |s| {
        let f = s.files.get(fh)?;
        let comm = f.comm;
        let local =
            f.fd.sync_data()
                .map_err(|e| io_fail(&e, "cannot flush the file"));
        agree(s, comm, local)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_amode(fh: MPI_File, amode: *mut c_int) -> c_int {
    file_call("MPI_File_get_amode", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, amode, "amode")?;
        let a = s.files.get(fh)?.amode;
        // SAFETY: checked non-null.
        unsafe { put(amode, a) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_group(fh: MPI_File, g: *mut MPI_Group) -> c_int {
    file_call("MPI_File_get_group", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, g, "group")?;
        let comm = s.files.get(fh)?.comm;
        let members =
            s.rt.comm(comm)
                .map_err(|e| file_fail(e.class, e.message))?
                .group
                .clone();
        let h = group::add(s, members);
        // SAFETY: checked non-null.
        unsafe { put(g, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_info(fh: MPI_File, info_used: *mut MPI_Info) -> c_int {
    file_call("MPI_File_get_info", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, info_used, "info_used")?;
        let hints = s.files.get(fh)?.hints.clone();
        let h = info::add(s, hints);
        // SAFETY: checked non-null.
        unsafe { put(info_used, h) };
        Ok(())
    })
}

/// Remembers hints (none changes what Tandem does; `MPI_File_get_info`
/// gives them back).
fn merge_hints(f: &mut File, new: Vec<(String, String)>) {
    for (k, v) in new {
        match f.hints.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => f.hints.push((k, v)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_info(fh: MPI_File, info_: MPI_Info) -> c_int {
    file_call("MPI_File_set_info", fh, |s| {
        s.files.get(fh)?;
        let new = if info_ == MPI_INFO_NULL {
            Vec::new()
        } else {
            info::pairs(s, info_)?
        };
        merge_hints(s.files.get_mut(fh)?, new);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_atomicity(fh: MPI_File, flag: c_int) -> c_int {
    file_call("MPI_File_set_atomicity", fh, |s| {
        let comm = s.files.get(fh)?.comm;
        let all = allgather(s, comm, &[i64::from(flag != 0)])?;
        if all.iter().any(|&v| v != all[0]) {
            return Err(file_fail(
                ErrorClass::NotSame,
                "the ranks passed different flags to MPI_File_set_atomicity",
            ));
        }
        s.files.get_mut(fh)?.atomic = flag != 0;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_atomicity(fh: MPI_File, flag: *mut c_int) -> c_int {
    file_call("MPI_File_get_atomicity", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        let a = s.files.get(fh)?.atomic;
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(a)) };
        Ok(())
    })
}

// ---------------------------------------------------------------------
// Views and file pointers.

#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_view(
    fh: MPI_File,
    disp: MPI_Offset,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: *const c_char,
    info_: MPI_Info,
) -> c_int {
    file_call("MPI_File_set_view", fh, |s| {
        let f = s.files.get(fh)?;
        let comm = f.comm;
        let sequential = f.amode & MPI_MODE_SEQUENTIAL != 0;
        let read_only = f.amode & MPI_MODE_RDONLY != 0;
        let current_disp = if disp == MPI_DISPLACEMENT_CURRENT && sequential {
            // The shared file pointer's byte in the file, read before the
            // agreement (nobody moves it during a collective call).
            let f = s.files.get_mut(fh)?;
            let view = f.view.clone();
            f.shared.get().map(|p| view.file_offset(p * view.esize))
        } else {
            Ok(0)
        };
        let hints = if info_ == MPI_INFO_NULL {
            Ok(Vec::new())
        } else {
            info::pairs(s, info_)
        };
        let local = (|| {
            let hints = hints?;
            let rep = if datarep.is_null() {
                return Err(file_fail(ErrorClass::Arg, "NULL data representation"));
            } else {
                // SAFETY: the application passes a C string.
                unsafe { CStr::from_ptr(datarep) }
                    .to_string_lossy()
                    .into_owned()
            };
            let resolved = crate::datarep::resolve(s, &rep, etype, filetype)?;
            let disp = if disp == MPI_DISPLACEMENT_CURRENT {
                if !sequential {
                    return Err(file_fail(
                        ErrorClass::Arg,
                        "MPI_DISPLACEMENT_CURRENT needs MPI_MODE_SEQUENTIAL",
                    ));
                }
                current_disp?
            } else {
                offset_arg(disp, "displacement")?
            };
            let el = datatype::layout(MPI_COMM_WORLD, etype)?;
            let fl = datatype::layout(MPI_COMM_WORLD, filetype)?;
            let view = View::new(disp, &el, &fl, read_only).map_err(|(c, m)| file_fail(c, m))?;
            // Copied before the agreement, so that a rank whose copy fails
            // says so there instead of leaving the others waiting.
            let etype_copy = datatype::duplicate(MPI_COMM_WORLD, etype)?;
            let filetype_copy = datatype::duplicate(MPI_COMM_WORLD, filetype)
                .inspect_err(|_| datatype::release(etype_copy))?;
            Ok((view, (rep, resolved), hints, etype_copy, filetype_copy))
        })();
        let copies = local.as_ref().ok().map(|l| (l.3, l.4));
        let (view, (rep, resolved), hints, etype_copy, filetype_copy) = agree(s, comm, local)
            .inspect_err(|_| {
                if let Some((e, f)) = copies {
                    datatype::release(e);
                    datatype::release(f);
                }
            })?;
        let f = s.files.get_mut(fh)?;
        datatype::release(f.etype);
        datatype::release(f.filetype);
        f.etype = etype_copy;
        f.filetype = filetype_copy;
        f.view = Arc::new(view);
        f.datarep = rep;
        f.rep = resolved;
        f.pointer = 0;
        merge_hints(f, hints);
        let writer = f.rank == 0;
        let reset = f.shared.reset(writer);
        // Nobody uses the shared pointer before it is back to zero.
        agree(s, comm, reset)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_view(
    fh: MPI_File,
    disp: *mut MPI_Offset,
    etype: *mut MPI_Datatype,
    filetype: *mut MPI_Datatype,
    datarep: *mut c_char,
) -> c_int {
    file_call("MPI_File_get_view", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, disp, "disp")?;
        args::out_ptr(MPI_COMM_WORLD, etype, "etype")?;
        args::out_ptr(MPI_COMM_WORLD, filetype, "filetype")?;
        args::out_ptr(MPI_COMM_WORLD, datarep, "datarep")?;
        let f = s.files.get(fh)?;
        let (d, e, t) = (f.view.disp, f.etype, f.filetype);
        let rep = f.datarep.clone();
        // Derived types come back as new handles the application frees.
        let e = datatype::duplicate(MPI_COMM_WORLD, e)?;
        let t = datatype::duplicate(MPI_COMM_WORLD, t)?;
        let bytes = rep.as_bytes();
        let n = bytes.len().min(MPI_MAX_DATAREP_STRING - 1);
        // SAFETY: all checked non-null; `datarep` holds
        // MPI_MAX_DATAREP_STRING characters (the standard's contract).
        unsafe {
            put(disp, d as MPI_Offset);
            put(etype, e);
            put(filetype, t);
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), datarep, n);
            *datarep.add(n) = 0;
        }
        Ok(())
    })
}

/// The new position of a seek; an error if before the start.
fn seek_target(whence: c_int, offset: MPI_Offset, current: u64, end: u64) -> Result<u64, Fail> {
    let base = match whence {
        MPI_SEEK_SET => 0,
        MPI_SEEK_CUR => current as i128,
        MPI_SEEK_END => end as i128,
        w => {
            return Err(file_fail(
                ErrorClass::Arg,
                format!("invalid whence {w} (MPI_SEEK_SET, _CUR or _END)"),
            ))
        }
    };
    let to = base + i128::from(offset);
    u64::try_from(to)
        .map_err(|_| file_fail(ErrorClass::Arg, format!("seek to negative offset {to}")))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_seek(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
    file_call("MPI_File_seek", fh, |s| {
        let f = s.files.get(fh)?;
        check_not_sequential(f)?;
        let end = if whence == MPI_SEEK_END {
            f.view.end_offset(file_size(f)?)
        } else {
            0
        };
        let to = seek_target(whence, offset, f.pointer, end)?;
        s.files.get_mut(fh)?.pointer = to;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_position(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
    file_call("MPI_File_get_position", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, offset, "offset")?;
        let f = s.files.get(fh)?;
        check_not_sequential(f)?;
        // SAFETY: checked non-null.
        unsafe { put(offset, f.pointer as MPI_Offset) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_byte_offset(
    fh: MPI_File,
    offset: MPI_Offset,
    disp: *mut MPI_Offset,
) -> c_int {
    file_call("MPI_File_get_byte_offset", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, disp, "disp")?;
        let f = s.files.get(fh)?;
        check_not_sequential(f)?;
        let o = offset_arg(offset, "offset")?;
        let b = f.view.file_offset(o * f.view.esize);
        // SAFETY: checked non-null.
        unsafe { put(disp, b as MPI_Offset) };
        Ok(())
    })
}

fn type_extent(s: &State, fh: MPI_File, dt: MPI_Datatype) -> Result<MPI_Aint, Fail> {
    crate::datarep::file_extent(&s.files.get(fh)?.rep, dt)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_type_extent(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
) -> c_int {
    file_call("MPI_File_get_type_extent", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, extent, "extent")?;
        let e = type_extent(s, fh, datatype)?;
        // SAFETY: checked non-null.
        unsafe { put(extent, e) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_type_extent_c(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Count,
) -> c_int {
    file_call("MPI_File_get_type_extent_c", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, extent, "extent")?;
        let e = type_extent(s, fh, datatype)?;
        // SAFETY: checked non-null.
        unsafe { put(extent, e as MPI_Count) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_seek_shared(
    fh: MPI_File,
    offset: MPI_Offset,
    whence: c_int,
) -> c_int {
    file_call("MPI_File_seek_shared", fh, |s| {
        let f = s.files.get(fh)?;
        let comm = f.comm;
        let all = allgather(s, comm, &[offset, i64::from(whence)])?;
        if all
            .chunks_exact(2)
            .any(|r| r != [offset, i64::from(whence)])
        {
            return Err(file_fail(
                ErrorClass::NotSame,
                "the ranks passed different offsets to MPI_File_seek_shared",
            ));
        }
        let f = s.files.get_mut(fh)?;
        let mut result = Ok(());
        if f.rank == 0 {
            result = (|| {
                let end = if whence == MPI_SEEK_END {
                    f.view.end_offset(file_size(f)?)
                } else {
                    0
                };
                let current = f.shared.get()?;
                let to = seek_target(whence, offset, current, end)?;
                f.shared.set(to)
            })();
        }
        agree(s, comm, result)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_position_shared(
    fh: MPI_File,
    offset: *mut MPI_Offset,
) -> c_int {
    file_call("MPI_File_get_position_shared", fh, |s| {
        args::out_ptr(MPI_COMM_WORLD, offset, "offset")?;
        let p = s.files.get_mut(fh)?.shared.get()?;
        // SAFETY: checked non-null.
        unsafe { put(offset, p as MPI_Offset) };
        Ok(())
    })
}

// ---------------------------------------------------------------------
// Error handlers.

#[no_mangle]
pub unsafe extern "C" fn MPI_File_create_errhandler(
    file_errhandler_fn: Option<MPI_File_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    file_call("MPI_File_create_errhandler", MPI_FILE_NULL, |s| {
        args::out_ptr(MPI_COMM_WORLD, errhandler, "errhandler")?;
        let Some(func) = file_errhandler_fn else {
            return Err(file_fail(ErrorClass::Arg, "NULL error handler function"));
        };
        let h = s.ext.errhandlers.create(errhandler::Kind::File, func);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_set_errhandler(
    file: MPI_File,
    errhandler: MPI_Errhandler,
) -> c_int {
    file_call("MPI_File_set_errhandler", file, |s| {
        if file != MPI_FILE_NULL {
            s.files.get(file)?;
        }
        if !s
            .ext
            .errhandlers
            .valid_for(errhandler, errhandler::Kind::File)
        {
            return Err(file_fail(
                ErrorClass::Arg,
                format!("invalid file error handler {errhandler:#x}"),
            ));
        }
        if file == MPI_FILE_NULL {
            s.files.null_errhandler = errhandler;
        } else {
            s.files.get_mut(file)?.errhandler = errhandler;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_get_errhandler(
    file: MPI_File,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    file_call("MPI_File_get_errhandler", file, |s| {
        args::out_ptr(MPI_COMM_WORLD, errhandler, "errhandler")?;
        let h = if file == MPI_FILE_NULL {
            s.files.null_errhandler
        } else {
            s.files.get(file)?.errhandler
        };
        s.ext.errhandlers.add_ref(h);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_File_call_errhandler(fh: MPI_File, errorcode: c_int) -> c_int {
    file_call("MPI_File_call_errhandler", fh, |s| {
        let handler = if fh == MPI_FILE_NULL {
            s.files.null_errhandler
        } else {
            s.files.get(fh)?.errhandler
        };
        let why = format!("error code {errorcode} raised by MPI_File_call_errhandler");
        errhandler::invoke(s, "MPI_File_call_errhandler", handler, fh, errorcode, &why);
        Ok(())
    })
}

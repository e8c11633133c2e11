//! Thin, safe wrappers over the few raw system calls the command needs.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Puts a descriptor into non-blocking mode.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL only read and write the file status flags of
    // `fd`; an invalid descriptor makes fcntl fail with EBADF, nothing worse.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What one `read` produced.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    Data(usize),
    WouldBlock,
    Eof,
}

/// One `read(2)` into `buf`, retried on EINTR.
pub fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<ReadOutcome> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the
        // duration of the call.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            return Ok(ReadOutcome::Data(n as usize));
        }
        if n == 0 {
            return Ok(ReadOutcome::Eof);
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
            _ => return Err(err),
        }
    }
}

/// One `write(2)` from `data`, retried on EINTR; `Ok(0)` means it would block.
pub fn write_fd(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `data` is valid for reads of `data.len()` bytes for the
        // duration of the call.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(err),
        }
    }
}

/// Writes all of `data`, waiting for the descriptor if it happens to be
/// non-blocking (our stdout may be shared with a process that set O_NONBLOCK).
pub fn write_all(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = write_fd(fd, data)?;
        if n == 0 {
            let mut pfd = [libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            }];
            poll(&mut pfd, None)?;
            continue;
        }
        data = &data[n..];
    }
    Ok(())
}

/// `poll(2)`; `None` waits without a time limit. EINTR counts as "nothing ready".
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms: libc::c_int = match timeout {
        None => -1,
        // Round up so a deadline 0.3 ms away does not become a busy 0 ms poll.
        Some(t) => t.as_micros().div_ceil(1000).min(libc::c_int::MAX as u128) as libc::c_int,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()`
    // pollfd structures, which the kernel only writes `revents` into.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(n as usize)
}

/// Sends `signal` to every process in process group `pgid`; a group that is
/// already gone is not an error.
pub fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    if pgid <= 1 {
        return; // never kill(-1) or kill(0): that would hit far more than a rank
    }
    // SAFETY: kill has no memory-safety preconditions; the guard above keeps
    // the target a single process group.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Sends `signal` to one process.
pub fn signal_process(pid: libc::pid_t, signal: libc::c_int) {
    if pid <= 1 {
        return; // never kill(-1), kill(0) or init
    }
    // SAFETY: kill has no memory-safety preconditions; the guard above keeps
    // the target a single process.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Raises the soft limit on open descriptors towards `wanted` (at most the
/// hard limit) and returns the previous limit, so children can get it back.
pub fn raise_fd_limit(wanted: u64) -> Option<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < wanted as libc::rlim_t {
        let raised = libc::rlimit {
            rlim_cur: (wanted as libc::rlim_t).min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; failure leaves the limit unchanged.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(lim);
        }
    }
    None
}

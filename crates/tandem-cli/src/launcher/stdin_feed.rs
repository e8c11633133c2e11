//! Feeding the launcher's stdin to rank 0 (the other ranks get /dev/null).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys::{self, ReadOutcome};

const CHUNK: usize = 64 * 1024;

/// Copies our stdin into rank 0's stdin pipe, one chunk at a time: stdin is
/// read only when the previous chunk has been written, so a rank that does
/// not read its input holds the launcher's stdin back instead of filling
/// the launcher's memory.
pub struct StdinFeed {
    /// Rank 0's stdin; dropping it gives rank 0 EOF.
    pipe: Option<OwnedFd>,
    /// A chunk read from stdin, `written` bytes of it already passed on.
    pending: Vec<u8>,
    written: usize,
}

impl StdinFeed {
    pub fn new(pipe: Option<OwnedFd>) -> StdinFeed {
        let mut feed = StdinFeed {
            pipe,
            pending: Vec::new(),
            written: 0,
        };
        match &feed.pipe {
            Some(p) if sys::set_nonblocking(p.as_raw_fd()).is_ok() && stdin_is_worth_reading() => {}
            _ => feed.close(),
        }
        feed
    }

    /// Our stdin, when we want to read from it.
    pub fn source_fd(&self) -> Option<RawFd> {
        (self.pipe.is_some() && self.pending.is_empty()).then_some(libc::STDIN_FILENO)
    }

    /// Rank 0's pipe, when we have something to write into it.
    pub fn sink_fd(&self) -> Option<RawFd> {
        self.pipe
            .as_ref()
            .filter(|_| !self.pending.is_empty())
            .map(|p| p.as_raw_fd())
    }

    /// Our stdin is readable (or at EOF / in error).
    pub fn on_source_ready(&mut self) {
        if self.pipe.is_none() {
            return;
        }
        let mut buf = vec![0u8; CHUNK];
        // Our stdin stays in blocking mode (it is shared with whoever started
        // us); poll said it is readable, so this read returns promptly.
        match sys::read_fd(libc::STDIN_FILENO, &mut buf) {
            Ok(ReadOutcome::Data(n)) => {
                buf.truncate(n);
                self.pending = buf;
                self.written = 0;
                self.on_sink_ready();
            }
            Ok(ReadOutcome::WouldBlock) => {}
            Ok(ReadOutcome::Eof) | Err(_) => self.close(),
        }
    }

    /// Rank 0's pipe has room (or its reader is gone).
    pub fn on_sink_ready(&mut self) {
        let Some(pipe) = &self.pipe else { return };
        while self.written < self.pending.len() {
            match sys::write_fd(pipe.as_raw_fd(), &self.pending[self.written..]) {
                Ok(0) => return, // full: wait for POLLOUT
                Ok(n) => self.written += n,
                Err(_) => {
                    // Rank 0 closed its stdin or exited: stop forwarding.
                    self.close();
                    return;
                }
            }
        }
        self.pending.clear();
        self.written = 0;
    }

    /// Stops forwarding and gives rank 0 EOF.
    pub fn close(&mut self) {
        self.pending.clear();
        self.pipe = None;
    }
}

/// False when there is nothing to forward: stdin is closed, is /dev/null, or
/// is a terminal this job does not own (reading it from the background would
/// stop the launcher with SIGTTIN).
pub fn stdin_is_worth_reading() -> bool {
    // SAFETY: `st` is plain data that fstat fills in on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes.
    if unsafe { libc::fstat(libc::STDIN_FILENO, &mut st) } != 0 {
        return false;
    }
    if st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3) {
        return false; // /dev/null
    }
    // SAFETY: isatty, tcgetpgrp and getpgrp have no memory-safety preconditions.
    unsafe {
        if libc::isatty(libc::STDIN_FILENO) == 1
            && libc::tcgetpgrp(libc::STDIN_FILENO) != libc::getpgrp()
        {
            return false;
        }
    }
    true
}

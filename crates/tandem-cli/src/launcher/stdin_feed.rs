//! Feeding the launcher's stdin to rank 0 (the other ranks get /dev/null);
//! in a replicated job, to every replica of rank 0 on this host.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys;

/// One process's stdin pipe and how much of the current chunk it took.
struct FeedPipe {
    process: u32,
    fd: OwnedFd,
    written: usize,
}

/// Copies chunks of our stdin (read by the job's event loop) into the
/// stdin pipes of rank 0's processes here. The next chunk is taken only
/// when every pipe has written the previous one, so a process that does
/// not read its input holds the launcher's stdin back instead of filling
/// the launcher's memory.
pub struct StdinFeed {
    /// Dropping a pipe gives its process EOF.
    pipes: Vec<Option<FeedPipe>>,
    /// A chunk read from stdin; each pipe has written a prefix of it.
    pending: Vec<u8>,
}

impl StdinFeed {
    pub fn new() -> StdinFeed {
        StdinFeed {
            pipes: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// Feeds `process`'s stdin too (when there is anything to feed: else
    /// the pipe is dropped and the process reads EOF at once).
    pub fn add(&mut self, process: u32, pipe: Option<OwnedFd>) {
        if let Some(fd) = pipe {
            if sys::set_nonblocking(fd.as_raw_fd()).is_ok() && stdin_is_worth_reading() {
                self.pipes.push(Some(FeedPipe {
                    process,
                    fd,
                    written: 0,
                }));
            }
        }
    }

    /// Whether some process here still takes our stdin.
    pub fn is_open(&self) -> bool {
        self.pipes.iter().any(Option::is_some)
    }

    /// Whether the next chunk of our stdin can be given.
    pub fn wants_input(&self) -> bool {
        self.is_open() && self.pending.is_empty()
    }

    /// A chunk of our stdin for every pipe.
    pub fn give(&mut self, data: &[u8]) {
        if !self.is_open() {
            return;
        }
        self.pending = data.to_vec();
        for i in 0..self.pipes.len() {
            if let Some(p) = &mut self.pipes[i] {
                p.written = 0;
            }
            self.on_sink_ready(i);
        }
    }

    /// The pipes that have something left to write, by index.
    pub fn sink_fds(&self) -> Vec<(usize, RawFd)> {
        self.pipes
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                (p.written < self.pending.len()).then(|| (i, p.fd.as_raw_fd()))
            })
            .collect()
    }

    /// Pipe `i` has room (or its reader is gone).
    pub fn on_sink_ready(&mut self, i: usize) {
        let Some(Some(p)) = self.pipes.get_mut(i) else {
            return;
        };
        while p.written < self.pending.len() {
            match sys::write_fd(p.fd.as_raw_fd(), &self.pending[p.written..]) {
                Ok(0) => break, // full: wait for POLLOUT
                Ok(n) => p.written += n,
                Err(_) => {
                    // The process closed its stdin or exited: stop feeding it.
                    self.pipes[i] = None;
                    break;
                }
            }
        }
        let pending = self.pending.len();
        if self.pipes.iter().flatten().all(|p| p.written == pending) {
            self.pending.clear();
            for p in self.pipes.iter_mut().flatten() {
                p.written = 0;
            }
        }
    }

    /// `process` has ended: stop feeding it.
    pub fn close_process(&mut self, process: u32) {
        for i in 0..self.pipes.len() {
            if self.pipes[i].as_ref().is_some_and(|p| p.process == process) {
                self.pipes[i] = None;
                // The others may be done with the current chunk now.
                if let Some(j) = self.pipes.iter().position(Option::is_some) {
                    self.on_sink_ready(j);
                } else {
                    self.pending.clear();
                }
            }
        }
    }

    /// Stops forwarding and gives every process EOF.
    pub fn close(&mut self) {
        self.pending.clear();
        self.pipes.clear();
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

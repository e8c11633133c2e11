//! Signals as readable events: the signals the launcher handles are blocked
//! and read from a signalfd inside the event loop, so no handler ever runs
//! asynchronously.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Signals that stop the job; they are forwarded to every rank.
pub const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A signalfd receiving SIGCHLD and the stop signals.
pub struct SignalQueue {
    fd: OwnedFd,
}

impl SignalQueue {
    /// Blocks SIGCHLD and the stop signals in this (single-threaded) process
    /// and opens a signalfd for them. Ranks get an empty mask back before
    /// exec (see `supervise::prepare_child`).
    pub fn open() -> io::Result<SignalQueue> {
        // SAFETY: sigset_t is plain data; sigemptyset initializes it fully.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t owned by this frame; the signal
        // numbers are valid constants.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            for s in STOP_SIGNALS {
                libc::sigaddset(&mut set, s);
            }
        }
        // SAFETY: `set` is initialized; a null old-set pointer is allowed.
        if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `set` is initialized; -1 asks for a new descriptor.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: signalfd just returned this descriptor and nothing else owns it.
        Ok(SignalQueue {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Every signal delivered since the last call, oldest first.
    pub fn drain(&self) -> Vec<libc::c_int> {
        let mut out = Vec::new();
        loop {
            // SAFETY: signalfd_siginfo is plain data; all-zero is a valid value.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: `info` is valid for writes of `size` bytes.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n as usize == size {
                out.push(info.ssi_signo as libc::c_int);
                continue;
            }
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return out; // EAGAIN: nothing more pending
        }
    }
}

/// The conventional name of a signal, e.g. "SIGKILL".
pub fn signal_name(signal: libc::c_int) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        s if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&s) => {
            return format!("SIGRTMIN+{}", s - libc::SIGRTMIN());
        }
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(200), "signal 200");
    }
}

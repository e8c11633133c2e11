//! The `signal` progress policy (Kumar et al., "Lock-free Asynchronous
//! Rendezvous Design for MPI Point-to-Point Communication"): a helper
//! thread that wakes only for rendezvous starts, and a signal handler
//! on the application thread that advances them.
//!
//! * Shared-memory peers ring the helper's doorbell when they publish an
//!   RTS, while the rank asks for it (the `WAKE_HELPER_RNDV` bit of its
//!   wake-up word): from when the application thread leaves the library
//!   with a receive posted until it leaves with none (Kumar et al.: the
//!   signal is disabled while nothing is expected, so a program that only
//!   makes blocking calls never pays a wake-up). The helper never touches
//!   the communication state.
//! * Woken, the helper signals the application thread (`SIGRTMIN +
//!   progress_signal`, with `tgkill`) only if that thread is outside the
//!   library and has a non-blocking receive posted (it says so on leaving
//!   the library). Otherwise the event is ignored (counted) and handled at
//!   the next MPI call. If the application thread is inside the library
//!   with non-blocking receives posted, the helper asks to be told when it
//!   leaves and decides then. An RTS ignored because nothing was posted is
//!   handled by the next MPI call (`MPI_Irecv` looks at the rings once), and
//!   when the application leaves with its first receive posted it rings the
//!   helper itself if frames wait in the rings.
//! * The handler takes ownership of the state with one compare-and-swap
//!   (failing, it returns: the thread it interrupted is inside the
//!   library), answers the RTS frames waiting at the heads of the rings
//!   that match posted receives (CTW where the sender may write into this
//!   process, CTS elsewhere), gives ownership back and returns. Completion
//!   raises no further signal: the sender writes and its WROTE is handled
//!   by the next MPI call.
//!
//! # Why the handler is async-signal-safe
//!
//! A signal handler may run between any two instructions of the thread it
//! interrupts, which may hold locks (malloc's arena lock, stdio's, a Rust
//! `Mutex`) or be in the middle of updating any data structure. The handler
//! therefore:
//!
//! * touches library state only after winning the ownership word with a
//!   lock-free compare-and-swap ([`Ownership::try_acquire`]); winning it proves
//!   that no thread, the interrupted one included, is inside the library,
//!   so no library structure is half-updated; losing it, it returns at once;
//! * allocates and frees nothing, so it never enters malloc (whose lock the
//!   interrupted thread may hold): it peeks frames in place in the shared
//!   segment, matches against the posted-receive queue and the request slab
//!   (both allocated before; removing from a `VecDeque` never reallocates),
//!   writes its answer into a free ring cell (checked first; it never
//!   queues) and adds to counters; anything needing more is left alone
//!   (`p2p`'s handler.rs);
//! * takes no lock and makes no system call but `write` to an eventfd (to
//!   wake a sleeping peer or the helper), which is async-signal-safe;
//! * saves and restores `errno`, and cannot unwind: a panic (there is no
//!   path to one) would abort the process rather than unwind into the
//!   interrupted code.
//!
//! Interrupted system calls of the application restart (`SA_RESTART`),
//! except those Linux never restarts (`nanosleep`, `poll`, `select`, ...):
//! a program sleeping with a non-blocking receive posted may wake early.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::background::{Driven, Library};
use super::helper::{
    self, spawn, stopping, wait_any, IDLE_TIMEOUT_MS, SIGNALS_IGNORED, SIGNALS_SENT, WAKEUPS,
};
use super::ownership::Ownership;
use super::WAKE_HELPER_RNDV;
use crate::stats::Counters;
use crate::transport::shm::drain;

/// The application thread (the one that called MPI_Init).
static APP_TID: AtomicI32 = AtomicI32::new(0);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The application thread left the library with receives posted.
static RECV_POSTED: AtomicBool = AtomicBool::new(false);
/// Signals that found the application thread inside the library.
static IGNORED_IN_HANDLER: AtomicU64 = AtomicU64::new(0);
/// The disposition the signal had before MPI_Init.
static PREVIOUS: Mutex<Option<libc::sigaction>> = Mutex::new(None);
/// What the handler drives, and the ownership word it takes first (a
/// handler has no arguments to be given them by).
static LIBRARY: OnceLock<&'static dyn Library> = OnceLock::new();

/// Starts the policy: installs the handler, asks shared-memory peers to
/// ring the helper for rendezvous starts, starts the helper. False (the
/// library then behaves as under `adaptive`) without shared-memory peers
/// to wait for, or if the signal cannot be used.
pub(super) fn start(lib: &'static dyn Library, driven: &mut dyn Driven) -> bool {
    let settings = driven.settings().clone();
    let engine = driven.engine();
    // Only shared-memory peers ring the doorbell (ranks on other hosts are
    // advanced by MPI calls, see docs/src/limitations.md).
    let Some(doorbell) = engine.helper_fd() else {
        return false;
    };
    let sig = libc::SIGRTMIN().saturating_add(settings.uint("progress_signal").min(64) as i32);
    if sig > libc::SIGRTMAX() {
        eprintln!(
            "tandem: warning: progress_signal={} is beyond SIGRTMAX ({} real-time signals here); MPI calls alone drive communication",
            settings.uint("progress_signal"),
            libc::SIGRTMAX() - libc::SIGRTMIN() + 1
        );
        return false;
    }
    // SAFETY: an all-zero sigaction is a valid value to fill in; the
    // handler is an `extern "C" fn(c_int)`, as sa_sigaction expects
    // without SA_SIGINFO; `old` receives the previous disposition.
    let installed = unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &act, &mut old) == 0 {
            *PREVIOUS.lock().unwrap_or_else(|p| p.into_inner()) = Some(old);
            true
        } else {
            false
        }
    };
    if !installed {
        eprintln!(
            "tandem: warning: cannot install a handler for signal {sig} ({}); MPI calls alone drive communication",
            std::io::Error::last_os_error()
        );
        return false;
    }
    // One library per process: a later start finds the same one set.
    let _ = LIBRARY.set(lib);
    SIGNAL.store(sig, Ordering::Relaxed);
    // SAFETY: plain syscall without arguments.
    APP_TID.store(
        unsafe { libc::syscall(libc::SYS_gettid) } as i32,
        Ordering::Relaxed,
    );
    RECV_POSTED.store(false, Ordering::Relaxed);
    // Only here with shared memory: its peers are not on TCP.
    let started = spawn(&settings, false, move |kick_fd| {
        run(lib.ownership(), kick_fd, doorbell)
    });
    if !started {
        restore();
    }
    started
}

/// Stops the helper and puts the signal's previous disposition back;
/// returns what the helper and the handler counted outside the state.
pub(super) fn stop() -> Counters {
    let mut c = Counters::default();
    if SIGNAL.load(Ordering::Relaxed) == 0 {
        return c;
    }
    c.merge(&helper::stop());
    // Every signal the helper sent was delivered before the join in `stop`
    // returned (a pending signal is delivered on the way back from the
    // system call), so nothing arrives after this.
    restore();
    c.signals_ignored += IGNORED_IN_HANDLER.swap(0, Ordering::Relaxed);
    c
}

fn restore() {
    let sig = SIGNAL.swap(0, Ordering::Relaxed);
    if let Some(old) = PREVIOUS.lock().unwrap_or_else(|p| p.into_inner()).take() {
        // SAFETY: restores the disposition `sigaction` gave us.
        unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
    }
}

/// The application thread leaves the library: whether it expects a
/// message it is not waiting for. When it starts to (its first receive
/// posted), peers are asked to ring the helper for rendezvous starts, and
/// one that arrived while it was inside expecting nothing (ignored then)
/// is looked for: the helper is rung if anything waits in the rings. When
/// it stops, peers are told not to ring.
pub(super) fn on_leave(driven: &mut dyn Driven) {
    let posted = driven.posted_receives() > 0;
    let was = RECV_POSTED.swap(posted, Ordering::Relaxed);
    let engine = driven.engine();
    if posted && !was && !engine.arm_helper(WAKE_HELPER_RNDV) {
        engine.ring_helper();
    } else if !posted && was {
        engine.disarm_helper(WAKE_HELPER_RNDV);
    }
}

fn send_signal() {
    // SAFETY: plain syscall signalling a thread of this process.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            APP_TID.load(Ordering::Relaxed),
            SIGNAL.load(Ordering::Relaxed),
        )
    };
    SIGNALS_SENT.fetch_add(1, Ordering::Relaxed);
}

/// The helper: sleep until a peer rings for a rendezvous start, then
/// signal the application thread or leave the event to its next MPI call.
fn run(ownership: &Ownership, kick_fd: RawFd, doorbell: RawFd) {
    loop {
        wait_any(&[kick_fd, doorbell], IDLE_TIMEOUT_MS);
        if stopping() {
            return;
        }
        drain(kick_fd);
        if !rang(doorbell) {
            continue;
        }
        WAKEUPS.fetch_add(1, Ordering::Relaxed);
        if !RECV_POSTED.load(Ordering::Relaxed) {
            SIGNALS_IGNORED.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if !ownership.is_free() && ownership.want() {
            // Inside the library with receives posted: decide when it leaves.
            wait_any(&[kick_fd], IDLE_TIMEOUT_MS);
            drain(kick_fd);
        }
        if ownership.is_free() && RECV_POSTED.load(Ordering::Relaxed) {
            send_signal();
        } else {
            SIGNALS_IGNORED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Empties the doorbell; whether it had been rung.
fn rang(fd: RawFd) -> bool {
    let mut buf = 0u64;
    // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
    unsafe { libc::read(fd, (&mut buf as *mut u64).cast(), 8) == 8 }
}

/// The handler (see the module documentation for why it is safe here).
extern "C" fn on_signal(_sig: libc::c_int) {
    // SAFETY: errno is thread-local; the pointer is valid for this thread.
    let errno = unsafe { *libc::__errno_location() };
    let done = std::panic::catch_unwind(|| {
        let Some(lib) = LIBRARY.get() else {
            return;
        };
        let ownership = lib.ownership();
        match ownership.try_acquire() {
            Some(mut held) => {
                if let Some(driven) = lib.driven(&mut held) {
                    if driven.progress_from_signal() > 0 {
                        ownership.progress_made();
                    }
                    driven.engine().counters_mut().signals_handled += 1;
                }
                drop(held);
            }
            None => {
                IGNORED_IN_HANDLER.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    if done.is_err() {
        std::process::abort();
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

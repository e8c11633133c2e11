//! The progress helper thread, and the `thread` policy it serves alone.
//!
//! Under `thread` the helper sleeps until a transport has news for this
//! rank while its application thread is outside the library: a socket is
//! ready, or a shared-memory peer rang the helper's doorbell (peers ring it
//! only while the helper asks them to, which it does exactly when nobody
//! is inside the library: the application thread withdraws the request on
//! entering and renews it on leaving, see [`on_enter`] and [`on_leave`]).
//! It then takes ownership of the communication state with one atomic
//! operation ([`Ownership`]), drives communication (receives matched
//! meanwhile ask senders on this host to write straight into them: see
//! `p2p`'s direct.rs)
//! and gives ownership back. It never busy-loops: if it finds the
//! application inside, it asks to be told when it leaves and sleeps.
//!
//! Where it runs matters as much as when: left to the scheduler, a helper
//! stays on the core of the thread that started it, which is exactly the
//! core the computation it should overlap is using. With `progress_cpu=auto`
//! it is pinned elsewhere (see [`super::placement::helper_cpu`]).
//!
//! The `signal` policy (signal.rs) starts its own helper with the same
//! scheduling, pinning, kick descriptor and counters.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

use super::background::{Driven, Library};
use super::ownership::Ownership;
use super::{placement, QUEUED_SLEEP_MS, WAKE_HELPER_ANY};
use crate::params::Settings;
use crate::stats::Counters;
use crate::transport::shm::drain;

static STOP: AtomicBool = AtomicBool::new(false);
static HANDLE: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);
/// The helper's private eventfd: rung when the application leaves the
/// library and the helper asked to be told (or has work left to it).
static KICK_FD: AtomicI32 = AtomicI32::new(-1);

/// The helper asked to be told when the application leaves the library,
/// and the application left without telling it (see [`on_leave`]).
static HELPER_UNTOLD: AtomicBool = AtomicBool::new(false);

/// What the helper counts without owning the state (merged at finalize).
pub(super) static WAKEUPS: AtomicU64 = AtomicU64::new(0);
pub(super) static SIGNALS_SENT: AtomicU64 = AtomicU64::new(0);
pub(super) static SIGNALS_IGNORED: AtomicU64 = AtomicU64::new(0);

/// Longest sleep: a safety net only (every wake-up is exact otherwise).
pub(super) const IDLE_TIMEOUT_MS: i32 = 50;
/// Whether the last to leave the library (the application or the helper)
/// left frames waiting for ring room (over TCP the socket wakes the
/// helper; looking there would cost a pass over every rank at each MPI
/// call): the helper then sleeps at most `QUEUED_SLEEP_MS`, as the owner
/// does (the consumer that frees ring room may miss the helper's doorbell
/// request in a rare race; see `Engine::sleep_armed`).
static LEFT_QUEUED: AtomicBool = AtomicBool::new(false);
/// Rounds of progress per turn while work keeps coming.
const ROUNDS_PER_TURN: u32 = 64;

/// Rings the helper's kick descriptor. Async-signal-safe (one `write`).
pub(super) fn kick() {
    let fd = KICK_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd, which
        // stays open until the helper has stopped (see `stop`).
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// Waits up to `timeout_ms` for any of `fds` (negative entries are skipped).
pub(super) fn wait_any(fds: &[RawFd], timeout_ms: i32) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `len` pollfds; the descriptors stay
    // open until the helper has stopped (finalize stops it first).
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
}

/// Creates the kick descriptor and starts a helper running `body`.
/// `host_peers_on_tcp`: ranks of this host talk over TCP, not shared memory
/// (it decides where `progress_cpu=auto` puts the helper).
pub(super) fn spawn(
    settings: &Settings,
    host_peers_on_tcp: bool,
    body: impl FnOnce(RawFd) + Send + 'static,
) -> bool {
    // SAFETY: plain syscall; the result is checked.
    let kick_fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if kick_fd < 0 {
        eprintln!(
            "tandem: warning: cannot start the progress thread ({}); MPI calls alone drive communication",
            std::io::Error::last_os_error()
        );
        return false;
    }
    KICK_FD.store(kick_fd, Ordering::Release);
    STOP.store(false, Ordering::Release);
    let sched = settings.text("progress_sched").to_string();
    let priority = settings.uint("progress_priority");
    let cpu = settings.text("progress_cpu").to_string();
    // MPI_Init returns only once the helper is placed (and named), so it
    // never runs a moment on the computing core.
    let (placed, wait_placed) = std::sync::mpsc::sync_channel::<()>(1);
    let spawned = std::thread::Builder::new()
        .name("tandem-progress".into())
        .spawn(move || {
            configure(&sched, priority, &cpu, host_peers_on_tcp);
            let _ = placed.send(());
            body(kick_fd);
        });
    match spawned {
        Ok(h) => {
            let _ = wait_placed.recv();
            *HANDLE.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
            true
        }
        Err(e) => {
            eprintln!("tandem: warning: cannot start the progress thread ({e}); MPI calls alone drive communication");
            KICK_FD.store(-1, Ordering::Release);
            // SAFETY: closing the descriptor created above, which nothing uses.
            unsafe { libc::close(kick_fd) };
            false
        }
    }
}

/// Whether the helper must stop.
pub(super) fn stopping() -> bool {
    STOP.load(Ordering::Acquire)
}

/// The helper's kick descriptor, -1 when none runs.
pub(super) fn kick_fd() -> RawFd {
    KICK_FD.load(Ordering::Acquire)
}

/// Starts the `thread` policy's helper, which reaches what it drives
/// through `lib`; `driven` is that, lent by the caller, who holds the
/// library. False if it could not start.
pub(super) fn start(lib: &'static dyn Library, driven: &mut dyn Driven) -> bool {
    let engine = driven.engine();
    let tcp = engine.tcp_fd();
    let doorbell = engine.helper_fd().unwrap_or(-1);
    let host_peers_on_tcp = !engine.has_shm();
    let settings = driven.settings().clone();
    let started = spawn(&settings, host_peers_on_tcp, move |kick| {
        run(lib, kick, doorbell, tcp)
    });
    if started {
        // Nobody is inside the library once MPI_Init returns.
        on_leave(lib.ownership(), driven);
    }
    started
}

/// Stops the helper (whichever policy started it), waits for it, and
/// returns what it counted.
pub(super) fn stop() -> Counters {
    STOP.store(true, Ordering::Release);
    kick();
    let handle = HANDLE.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(h) = handle {
        let _ = h.join();
    }
    let fd = KICK_FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: our eventfd; the helper that used it has exited.
        unsafe { libc::close(fd) };
    }
    Counters {
        helper_wakeups: WAKEUPS.swap(0, Ordering::Relaxed),
        signals_sent: SIGNALS_SENT.swap(0, Ordering::Relaxed),
        signals_ignored: SIGNALS_IGNORED.swap(0, Ordering::Relaxed),
        ..Counters::default()
    }
}

/// The application thread enters the library: it drives communication
/// itself now, so peers need not ring the helper.
pub(super) fn on_enter(driven: &mut dyn Driven) {
    driven.engine().disarm_helper(WAKE_HELPER_ANY);
}

/// The application thread leaves the library: peers ring the helper from
/// now on, and if something arrived already, the helper is told at once.
/// Leaving with nothing that can progress (no request alive, no memory
/// exposed to one-sided access: after any blocking call of a two-sided
/// program), it leaves a helper that asked to be told asleep: nothing can
/// progress until the next call anyway (a socket ready meanwhile, say the next message of a
/// ping-pong, waits for it), and waking the helper on its peer's core for
/// every message cost a TCP ping-pong a tenth of its bandwidth. The helper
/// is told as soon as the application leaves with work alive again.
pub(super) fn on_leave(ownership: &Ownership, driven: &mut dyn Driven) {
    if !driven.progress_matters() {
        if ownership.unwant() {
            HELPER_UNTOLD.store(true, Ordering::Relaxed);
        }
    } else if HELPER_UNTOLD.swap(false, Ordering::Relaxed) {
        kick();
    }
    let engine = driven.engine();
    LEFT_QUEUED.store(engine.shm_has_queued(), Ordering::Relaxed);
    if !engine.arm_helper(WAKE_HELPER_ANY) {
        engine.ring_helper();
    }
}

/// Whether any of `fds` is readable now.
fn readable_now(fds: &[RawFd]) -> bool {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `len` pollfds (see `wait_any`).
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, 0) > 0 }
}

/// Applies the scheduling policy and CPU the parameters ask for; where the
/// system refuses, says so and carries on.
fn configure(sched: &str, priority: u64, cpu: &str, host_peers_on_tcp: bool) {
    // The rank's own thread may be pinned to one CPU; the helper should be
    // free to run on another.
    placement::unbind_current_thread();
    let policy = match sched {
        "fifo" => Some(libc::SCHED_FIFO),
        "rr" => Some(libc::SCHED_RR),
        _ => None,
    };
    if let Some(policy) = policy {
        let param = libc::sched_param {
            sched_priority: priority.min(99) as libc::c_int,
        };
        // SAFETY: sets the calling thread's policy (tid 0); `param` is valid.
        if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
            eprintln!(
                "tandem: warning: progress_sched={sched} refused ({}); the progress thread uses the normal policy",
                std::io::Error::last_os_error()
            );
        }
    }
    let cpu = cpu.trim();
    let target = match cpu {
        "auto" => placement::helper_cpu(host_peers_on_tcp),
        "own" => placement::own_cpu(),
        "any" | "" => None,
        _ => match cpu.parse::<usize>() {
            Ok(n) if n < libc::CPU_SETSIZE as usize => Some(n),
            _ => {
                eprintln!("tandem: warning: progress_cpu='{cpu}' is not a CPU number, auto, own or any; ignored");
                None
            }
        },
    };
    if let Some(n) = target {
        // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes
        // inside it; the call reads it for its size.
        let ok = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(n, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        };
        if !ok {
            eprintln!(
                "tandem: warning: cannot pin the progress thread to CPU {n} ({})",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The `thread` policy's loop: sleep until a socket is ready, a peer rings
/// the doorbell or the application leaves work behind; then serve.
fn run(lib: &'static dyn Library, kick_fd: RawFd, doorbell: RawFd, tcp: RawFd) {
    let fds = [kick_fd, doorbell, tcp];
    loop {
        let timeout = if LEFT_QUEUED.load(Ordering::Relaxed) {
            QUEUED_SLEEP_MS
        } else {
            IDLE_TIMEOUT_MS
        };
        wait_any(&fds, timeout);
        if stopping() {
            return;
        }
        drain(kick_fd);
        if doorbell >= 0 {
            drain(doorbell);
        }
        WAKEUPS.fetch_add(1, Ordering::Relaxed);
        serve(lib, kick_fd, &fds[1..]);
    }
}

/// Drives communication while the application thread is outside the
/// library, until nothing is left to do (`news`: the doorbell and the
/// sockets).
fn serve(lib: &dyn Library, kick_fd: RawFd, news: &[RawFd]) {
    let ownership = lib.ownership();
    loop {
        if stopping() {
            return;
        }
        let Some(mut held) = ownership.try_acquire() else {
            // The application is inside and drives communication itself;
            // be told when it leaves, then take over only if it left
            // something (in a ping-pong it usually has not, and taking the
            // state would only delay its next call).
            if ownership.want() {
                wait_any(&[kick_fd], IDLE_TIMEOUT_MS);
                drain(kick_fd);
                if !readable_now(news) {
                    return;
                }
            }
            continue;
        };
        let Some(driven) = lib.driven(&mut held) else {
            return;
        };
        driven.engine().disarm_helper(WAKE_HELPER_ANY);
        // Receives matched now are matched while the application computes.
        driven.set_async_matching(true);
        let mut yielded = false;
        for _ in 0..ROUNDS_PER_TURN {
            // Counted for threads waiting to come back (the progress hook).
            let did = driven.drive_round();
            // The application wants in: it drives communication itself now,
            // on its own core, faster than this thread can beside its peer.
            yielded = ownership.app_waiting();
            if !did || yielded {
                break;
            }
        }
        driven.set_async_matching(false);
        LEFT_QUEUED.store(driven.engine().shm_has_queued(), Ordering::Relaxed);
        // Ask peers to ring again; if something came meanwhile, go round.
        let idle = driven.engine().arm_helper(WAKE_HELPER_ANY);
        drop(held);
        if idle || yielded {
            return;
        }
    }
}

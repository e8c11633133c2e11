//! The `thread` progress policy: a helper thread that sleeps until a
//! transport has news for this rank (socket readiness, a shared-memory
//! peer's wake-up, a peer's exit) and then, if the application thread is
//! outside the library, takes ownership of the communication state with
//! one atomic operation, drives communication, and gives it back. It never
//! waits for the application thread and never busy-loops.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use tandem::params::Settings;

use crate::state::Owner;

static STOP: AtomicBool = AtomicBool::new(false);
static HANDLE: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

/// How long the helper sleeps at most: a wake-up armed by the helper can be
/// consumed by the application thread's own waiting, so the helper looks
/// again now and then.
const POLL_TIMEOUT_MS: i32 = 2;
/// Pause when the application thread holds the state (it is driving
/// communication itself meanwhile).
const BUSY_PAUSE: Duration = Duration::from_micros(100);
/// Rounds of progress per wake-up while work keeps coming.
const ROUNDS_PER_WAKEUP: u32 = 64;

/// Starts the helper thread, watching the engine's descriptor `fd`.
pub fn start(fd: RawFd, settings: &Settings) {
    STOP.store(false, Ordering::Release);
    let sched = settings.text("progress_sched").to_string();
    let priority = settings.uint("progress_priority");
    let cpu = settings.text("progress_cpu").to_string();
    let spawned = std::thread::Builder::new()
        .name("tandem-progress".into())
        .spawn(move || {
            configure(&sched, priority, &cpu);
            run(fd);
        });
    match spawned {
        Ok(h) => *HANDLE.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
        Err(e) => eprintln!("tandem: warning: cannot start the progress thread ({e}); MPI calls alone drive communication"),
    }
}

/// Stops the helper thread and waits for it.
pub fn stop() {
    STOP.store(true, Ordering::Release);
    let handle = HANDLE.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(h) = handle {
        let _ = h.join();
    }
}

/// Applies the scheduling policy and CPU the parameters ask for; where the
/// system refuses, says so and carries on.
fn configure(sched: &str, priority: u64, cpu: &str) {
    // The rank's own thread may be pinned to one CPU; the helper should be
    // free to run on another.
    tandem::runtime::unbind_current_thread();
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
    if !cpu.trim().is_empty() {
        match cpu.trim().parse::<usize>() {
            Ok(n) if n < libc::CPU_SETSIZE as usize => {
                // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET
                // writes inside it; the call reads it for its size.
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
            _ => eprintln!("tandem: warning: progress_cpu='{cpu}' is not a CPU number; ignored"),
        }
    }
}

fn run(fd: RawFd) {
    loop {
        if STOP.load(Ordering::Acquire) {
            return;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; the descriptor outlives this thread
        // (finalize stops the thread before it closes anything).
        unsafe { libc::poll(&mut pfd, 1, POLL_TIMEOUT_MS) };
        if STOP.load(Ordering::Acquire) {
            return;
        }
        let Some(mut owner) = Owner::try_acquire() else {
            std::thread::sleep(BUSY_PAUSE);
            continue;
        };
        let Some(state) = owner.slot().as_mut() else {
            return;
        };
        state.rt.p2p().engine().disarm_wakeup();
        for _ in 0..ROUNDS_PER_WAKEUP {
            let did = state.rt.p2p().progress(false);
            state.rt.progress_once();
            if !did {
                break;
            }
        }
        // Ask shared-memory peers to wake us; if something arrived while
        // arming, go round again at once.
        state.rt.p2p().engine().arm_wakeup();
        drop(owner);
    }
}

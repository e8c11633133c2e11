//! How long a cache line takes to go from one CPU to another and back.
//!
//! On a virtual machine the host may move the guest's CPUs between physical
//! cores that share a cache and cores that do not, and back, while nothing
//! in the guest changes: on the 2-core test VM this round trip is ~60-110
//! ns in one placement and ~400-450 ns in the other, each lasting seconds
//! to minutes, and shared-memory ping-pong of 4-64 KiB is 3-4x slower in
//! the second. `tandem bench` measures it before and after every launch so
//! that a reader can tell which state a measurement was made in.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Round trips timed together (so that reading the clock costs little).
const BATCH: u32 = 256;

/// A cache line of its own for the bouncing counter.
#[repr(align(128))]
struct Line(AtomicU64);

/// Tells the peer thread to stop (the counter never gets this far).
const STOP: u64 = u64::MAX;

fn pin(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data that CPU_ZERO/CPU_SET initialise;
    // sched_setaffinity(0, ...) only changes the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The first two CPUs this process may run on (where `tandem run` pins
/// the first two ranks of a host), if it may run on two.
pub fn first_two_cpus() -> Option<(usize, usize)> {
    // SAFETY: as in `pin`; sched_getaffinity fills the set it is given.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| {
        // SAFETY: c is below CPU_SETSIZE, the set's size.
        unsafe { libc::CPU_ISSET(c, &set) }
    });
    Some((cpus.next()?, cpus.next()?))
}

/// The median round trip, in nanoseconds, of a cache line between a
/// thread on CPU `a` and one on CPU `b`, over about `window`; `None` when
/// the threads cannot be pinned there or hardly ran (a busy machine).
pub fn round_trip_ns(a: usize, b: usize, window: Duration) -> Option<f64> {
    let line = Arc::new(Line(AtomicU64::new(0)));
    let deadline = Instant::now() + window;
    // The answering side: turns every odd value into the next even one.
    let peer_line = Arc::clone(&line);
    let peer = thread::spawn(move || {
        let pinned = pin(b);
        let mut spins = 0u32;
        loop {
            let v = peer_line.0.load(Ordering::Acquire);
            if v == STOP {
                return pinned;
            }
            if v % 2 == 1 {
                peer_line.0.store(v + 1, Ordering::Release);
            } else {
                spins = spins.wrapping_add(1);
                // Never spin past the window by much, whatever the other
                // side does.
                if spins.is_multiple_of(4096) && Instant::now() > deadline + window {
                    return pinned;
                }
                std::hint::spin_loop();
            }
        }
    });
    // The asking side, on its own thread so that no pinning stays on the
    // caller (children inherit it).
    let ask_line = Arc::clone(&line);
    let asker = thread::spawn(move || {
        let pinned = pin(a);
        let mut batches: Vec<f64> = Vec::new();
        let mut v = 0u64;
        'outer: while Instant::now() < deadline {
            let t0 = Instant::now();
            for _ in 0..BATCH {
                ask_line.0.store(v + 1, Ordering::Release);
                let mut spins = 0u32;
                while ask_line.0.load(Ordering::Acquire) != v + 2 {
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(4096) && Instant::now() > deadline {
                        break 'outer;
                    }
                    std::hint::spin_loop();
                }
                v += 2;
            }
            batches.push(t0.elapsed().as_nanos() as f64 / f64::from(BATCH));
        }
        ask_line.0.store(STOP, Ordering::Release);
        (pinned, batches)
    });
    let (asker_pinned, mut batches) = asker.join().ok()?;
    let peer_pinned = peer.join().ok()?;
    if !asker_pinned || !peer_pinned || batches.len() < 5 {
        return None;
    }
    batches.sort_by(f64::total_cmp);
    Some(batches[batches.len() / 2])
}

/// The probe `tandem bench` runs around each launch: the first two CPUs,
/// 20 ms.
pub fn probe() -> Option<f64> {
    let (a, b) = first_two_cpus()?;
    round_trip_ns(a, b, Duration::from_millis(20))
}

/// "cache-line round trip between CPUs 0 and 1 around the launches: 95 to
/// 102 ns", or `None` without probes.
pub fn range_text(probes: &[f64]) -> Option<String> {
    let (lo, hi) = range(probes)?;
    let (a, b) = first_two_cpus().unwrap_or((0, 1));
    Some(format!(
        "cache-line round trip between CPUs {a} and {b} around the launches: {lo:.0} to {hi:.0} ns"
    ))
}

/// The smallest and largest probe, if any.
fn range(probes: &[f64]) -> Option<(f64, f64)> {
    let lo = probes.iter().copied().reduce(f64::min)?;
    let hi = probes.iter().copied().reduce(f64::max)?;
    Some((lo, hi))
}

/// A note when the probes of a run (nanoseconds) differ by more than half
/// again: the machine changed state between them.
pub fn note(probes: &[f64]) -> Option<String> {
    let (lo, hi) = range(probes)?;
    (hi > 1.5 * lo).then(|| {
        format!(
            "note: a cache line's round trip between the first two CPUs took {lo:.0} to {hi:.0} ns in the \
             probes around the launches: the machine changed state during the run (on a virtual machine, the \
             host moving its CPUs), and shared-memory times differ between the states"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_takes_a_plausible_time() {
        let Some((a, b)) = first_two_cpus() else {
            return; // one CPU: nothing to measure
        };
        let ns = round_trip_ns(a, b, Duration::from_millis(20));
        // A busy machine may leave too few batches; when measured, a
        // cache-line round trip between cores is between 10 ns and 100 us.
        if let Some(ns) = ns {
            assert!((10.0..100_000.0).contains(&ns), "{ns} ns");
        }
    }

    #[test]
    fn the_note_names_a_change_of_state() {
        assert!(note(&[100.0, 110.0, 95.0]).is_none());
        assert!(note(&[100.0]).is_none());
        let n = note(&[100.0, 420.0]).unwrap();
        assert!(n.contains("100 to 420 ns"), "{n}");
    }
}

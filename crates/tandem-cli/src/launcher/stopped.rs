//! Noticing rank processes that are stopped (SIGSTOP, SIGTSTP, a debugger).
//!
//! A stopped process keeps its connections open, so its peers cannot tell
//! it from a slow one; only its host can, from the process's state. The
//! master and every per-host helper watch their own processes with a
//! [`StopWatch`] and report those stopped longer than a limit: a replica
//! is then declared failed (its rank goes on with its other replicas), a
//! rank of an unreplicated job is named on stderr (`stall_warn_s`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tandem::params::Settings;

/// How long a process may stay stopped before it is reported: a replica
/// `replica_timeout_ms`, a rank of an unreplicated job `stall_warn_s`.
pub fn limit(settings: &Settings, replicated: bool) -> Duration {
    if replicated {
        Duration::from_millis(settings.uint("replica_timeout_ms"))
    } else {
        Duration::from_secs(settings.uint("stall_warn_s"))
    }
}

/// Watches processes, by a key of the caller's (the world rank), for
/// being stopped longer than a limit.
pub struct StopWatch {
    limit: Duration,
    every: Duration,
    last_check: Instant,
    /// Processes seen stopped: since when, and whether reported already.
    seen: HashMap<u32, (Instant, bool)>,
}

impl StopWatch {
    /// `None` for a zero limit (the watch is off).
    pub fn new(limit: Duration) -> Option<StopWatch> {
        (!limit.is_zero()).then(|| StopWatch {
            limit,
            every: (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1)),
            last_check: Instant::now(),
            seen: HashMap::new(),
        })
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// When [`StopWatch::check`] next has something to do.
    pub fn next_check(&self) -> Instant {
        self.last_check + self.every
    }

    /// The processes of `procs` (key, pid) that have now been stopped
    /// longer than the limit, each reported once per stop, with how long.
    pub fn check(
        &mut self,
        now: Instant,
        procs: impl Iterator<Item = (u32, libc::pid_t)>,
    ) -> Vec<(u32, Duration)> {
        if now < self.next_check() {
            return Vec::new();
        }
        // A watcher that was itself stopped (the whole job suspended, then
        // resumed) cannot tell how long the others were: it starts over.
        if now.saturating_duration_since(self.last_check) > 2 * self.every + Duration::from_secs(1)
        {
            self.seen.clear();
        }
        self.last_check = now;
        let mut over = Vec::new();
        let mut seen = HashMap::new();
        for (key, pid) in procs {
            if pid <= 0 || !is_stopped(pid) {
                continue;
            }
            let (since, reported) = self.seen.get(&key).copied().unwrap_or((now, false));
            let stopped_for = now.saturating_duration_since(since);
            let report = !reported && stopped_for >= self.limit;
            if report {
                over.push((key, stopped_for));
            }
            seen.insert(key, (since, reported || report));
        }
        self.seen = seen;
        over
    }
}

/// Whether process `pid` is stopped by a signal or traced and stopped
/// (state `T` or `t` in /proc/PID/stat).
pub fn is_stopped(pid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    process_state(&stat).is_some_and(|s| s == b'T' || s == b't')
}

/// The state letter of a /proc/PID/stat line: the first field after the
/// command name, which is in parentheses and may itself hold ") ".
fn process_state(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat[close + 1..]
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_after_a_tricky_command_name() {
        assert_eq!(process_state(b"12 (a) T (b) S 1 2 3"), Some(b'S'));
        assert_eq!(process_state(b"12 (ring) T 1 12 12"), Some(b'T'));
        assert_eq!(process_state(b"garbage"), None);
    }

    #[test]
    fn a_stopped_child_is_reported_once_after_the_limit() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id() as libc::pid_t;
        let mut watch = StopWatch::new(Duration::from_millis(200)).expect("limit is not zero");
        let t0 = Instant::now() + Duration::from_millis(50);
        assert!(watch.check(t0, [(7, pid)].into_iter()).is_empty());
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let deadline = t0 + Duration::from_secs(5);
        while !is_stopped(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(is_stopped(pid));
        let t1 = t0 + Duration::from_millis(60);
        assert!(watch.check(t1, [(7, pid)].into_iter()).is_empty());
        let t2 = t1 + Duration::from_millis(220);
        let over = watch.check(t2, [(7, pid)].into_iter());
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].0, 7);
        assert!(over[0].1 >= Duration::from_millis(200));
        let t3 = t2 + Duration::from_millis(60);
        assert!(
            watch.check(t3, [(7, pid)].into_iter()).is_empty(),
            "reported once"
        );
        // A watcher that missed a long stretch starts over.
        let t4 = t3 + Duration::from_secs(10);
        assert!(watch.check(t4, [(7, pid)].into_iter()).is_empty());
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = child.wait();
    }
}

//! Noticing rank processes that are stopped (SIGSTOP, SIGTSTP, a debugger),
//! and jobs whose ranks all wait (none uses the CPU).
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

/// Watches whether every rank of a job has stopped using the CPU: all of
/// them waiting, on each other (a deadlock: a receive or a collective
/// that nothing will match) or on something outside the job. A waiting
/// rank sleeps in the kernel, so its CPU time stands still, where a
/// computing one's grows; the library's own wake-ups (timers, a few a
/// second) stay below [`BUSY_TICKS`] per check.
pub struct IdleWatch {
    limit: Duration,
    every: Duration,
    last_check: Instant,
    /// Each process's CPU time (clock ticks) at the last check.
    ticks: HashMap<u32, u64>,
    /// Since when no process has been busy, and whether that was reported.
    idle_since: Option<Instant>,
    reported: bool,
}

/// CPU time (clock ticks, usually 10 ms) a process may use between two
/// checks and still count as waiting.
const BUSY_TICKS: u64 = 2;

impl IdleWatch {
    /// `None` for a zero limit (the watch is off).
    pub fn new(limit: Duration) -> Option<IdleWatch> {
        (!limit.is_zero()).then(|| IdleWatch {
            limit,
            every: (limit / 4).clamp(Duration::from_millis(100), Duration::from_secs(2)),
            last_check: Instant::now(),
            ticks: HashMap::new(),
            idle_since: None,
            reported: false,
        })
    }

    /// When [`IdleWatch::check`] next has something to do.
    pub fn next_check(&self) -> Instant {
        self.last_check + self.every
    }

    /// Whether every process was waiting at the last check, and since when.
    pub fn all_idle_since(&self) -> Option<Instant> {
        self.idle_since
    }

    /// Looks at `procs` (key, pid): `Some(how long)` once, when none of
    /// them has used the CPU for the limit; again only after one has. A
    /// stopped process counts as busy: those waiting on it are not
    /// deadlocked, and its stop is named on its own ([`StopWatch`]).
    pub fn check(
        &mut self,
        now: Instant,
        procs: impl Iterator<Item = (u32, libc::pid_t)>,
    ) -> Option<Duration> {
        if now < self.next_check() {
            return None;
        }
        // A watcher that was itself stopped cannot tell: it starts over.
        let missed = now.saturating_duration_since(self.last_check)
            > 2 * self.every + Duration::from_secs(1);
        self.last_check = now;
        let mut busy = missed;
        let mut ticks = HashMap::new();
        for (key, pid) in procs {
            let Some((state, t)) = read_stat(pid).as_deref().and_then(stat_state_and_ticks) else {
                continue;
            };
            busy |= state == b'T' || state == b't';
            busy |= self
                .ticks
                .get(&key)
                .is_none_or(|&before| t.saturating_sub(before) > BUSY_TICKS);
            ticks.insert(key, t);
        }
        self.ticks = ticks;
        if busy || self.ticks.is_empty() {
            self.idle_since = None;
            self.reported = false;
            return None;
        }
        let since = *self.idle_since.get_or_insert(now);
        let idle_for = now.saturating_duration_since(since);
        if self.reported || idle_for < self.limit {
            return None;
        }
        self.reported = true;
        Some(idle_for)
    }
}

fn read_stat(pid: libc::pid_t) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/stat")).ok()
}

/// The state letter and the user and system CPU time of the process and
/// all its threads, in clock ticks (fields 3, 14 and 15), of a
/// /proc/PID/stat line.
fn stat_state_and_ticks(stat: &[u8]) -> Option<(u8, u64)> {
    let state = process_state(stat)?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((state, user + system))
}

/// Whether process `pid` is stopped by a signal or traced and stopped
/// (state `T` or `t` in /proc/PID/stat).
pub fn is_stopped(pid: libc::pid_t) -> bool {
    let Some(stat) = read_stat(pid) else {
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
    fn cpu_time_after_a_tricky_command_name() {
        let line = b"12 (a) b) S 1 12 12 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0";
        assert_eq!(stat_state_and_ticks(line), Some((b'S', 12)));
        assert_eq!(stat_state_and_ticks(b"12 (x) S 1"), None);
    }

    #[test]
    fn sleepers_are_reported_idle_once_and_a_spinner_never() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = sleeper.id() as libc::pid_t;
        let mut watch = IdleWatch::new(Duration::from_millis(400)).expect("limit is not zero");
        let t0 = Instant::now() + Duration::from_millis(100);
        assert_eq!(watch.check(t0, [(0, pid)].into_iter()), None, "first sight");
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(watch.check(t1, [(0, pid)].into_iter()), None);
        let t2 = t1 + Duration::from_millis(450);
        assert!(watch.check(t2, [(0, pid)].into_iter()).is_some());
        let t3 = t2 + Duration::from_millis(100);
        assert_eq!(watch.check(t3, [(0, pid)].into_iter()), None, "once");
        // This test's own process spins meanwhile: busy, never reported.
        let me = std::process::id() as libc::pid_t;
        let mut spin = IdleWatch::new(Duration::from_millis(200)).expect("limit is not zero");
        let mut t = Instant::now();
        let mut reported = false;
        for _ in 0..6 {
            let until = Instant::now() + Duration::from_millis(110);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            t += Duration::from_millis(110);
            reported |= spin.check(t, [(0, me)].into_iter()).is_some();
        }
        assert!(!reported);
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = sleeper.wait();
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

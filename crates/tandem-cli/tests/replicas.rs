//! Replicated ranks (`tandem run --replicas R`), end to end: C programs
//! built with `tandem cc` lose replicas (killed or stopped by the test's
//! fault hook, tests/c/replica_hook.h) and must still print what an
//! unreplicated run prints, exit 0, and leave nothing behind; a rank that
//! loses every replica ends the job with its name. Every job runs under the
//! harness's watchdog: a hang fails.

mod common;
mod multihost_netns;

use std::time::Duration;

use common::{compile, counters, field, run, JOB_TIMEOUT};

/// The lines of stdout, sorted (ranks print in any order).
fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// A small deterministic generator for the fault plans (xorshift).
struct Plan(u64);

impl Plan {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const RANKS: u32 = 4;
const RING_ARGS: [&str; 3] = ["120", "1000", "300"];

fn ring_reference() -> Vec<String> {
    let ring = compile("replica_ring");
    let plain = run(RANKS, &[], &ring, &RING_ARGS, JOB_TIMEOUT);
    assert!(plain.status.success(), "{}", plain.describe());
    let lines = sorted_lines(&plain.stdout);
    assert_eq!(lines.len(), RANKS as usize, "{}", plain.describe());
    lines
}

/// (a) One replica of every rank killed at a random step, for 20 seeds
/// (`REPLICA_SEEDS`):
/// the same checksums as without replicas, exit 0, every loss reported.
#[test]
fn ring_survives_one_replica_of_every_rank_killed() {
    // REPLICA_SEEDS=100 for a longer run.
    let seeds = std::env::var("REPLICA_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    ring_under_kills(&[], 1..=seeds);
}

/// The same under the VolpexMPI report's pull protocol, for 5 seeds.
#[test]
fn ring_survives_kills_under_the_pull_protocol() {
    ring_under_kills(&["--set", "replica_protocol=pull"], 101..=105);
}

fn ring_under_kills(extra: &[&str], seeds: std::ops::RangeInclusive<u64>) {
    let ring = compile("replica_ring");
    let want = ring_reference();
    for seed in seeds {
        let mut plan = Plan(0x9e37_79b9_7f4a_7c15 ^ seed);
        let faults: Vec<String> = (0..RANKS)
            .map(|r| {
                let replica = plan.below(2) as u32;
                let step = plan.below(110);
                format!("{}:{step}:9", replica * RANKS + r)
            })
            .collect();
        let faults = faults.join(",");
        let mut cmd = std::process::Command::new(common::TANDEM);
        cmd.args(["run", "-n", &RANKS.to_string(), "--replicas", "2"])
            .args(extra)
            .arg(&ring)
            .args(RING_ARGS)
            .env("REPLICA_FAULTS", &faults);
        let out = common::run_command(cmd, JOB_TIMEOUT);
        assert!(
            out.status.success(),
            "seed {seed}, faults {faults}: {}",
            out.describe()
        );
        assert_eq!(
            sorted_lines(&out.stdout),
            want,
            "seed {seed}, faults {faults}: {}",
            out.describe()
        );
        for r in 0..RANKS {
            assert!(
                out.stderr.contains(&format!("tandem: rank {r} replica")),
                "seed {seed}: the loss of rank {r}'s replica is not reported: {}",
                out.describe()
            );
        }
        assert!(out.leftovers.is_empty(), "{}", out.describe());
    }
}

/// (b) Both replicas of rank 2 killed: the job ends soon, non-zero, and
/// says which rank was lost.
#[test]
fn losing_every_replica_of_a_rank_ends_the_job_naming_it() {
    let ring = compile("replica_ring");
    let mut cmd = std::process::Command::new(common::TANDEM);
    cmd.args(["run", "-n", "4", "--replicas", "2"])
        .arg(&ring)
        .args(["400", "1000", "1000"])
        .env("REPLICA_FAULTS", "2:30:9,6:60:9");
    let out = common::run_command(cmd, JOB_TIMEOUT);
    assert!(!out.status.success(), "{}", out.describe());
    assert!(
        out.stderr.contains("rank 2 lost all its 2 replicas"),
        "{}",
        out.describe()
    );
    // The program alone would take 400 steps of 1 ms.
    assert!(out.elapsed < Duration::from_secs(20), "{}", out.describe());
    assert!(out.leftovers.is_empty(), "{}", out.describe());
}

/// (c) A replica stopped with SIGSTOP does not hold the others back: they
/// finish with the right output and the stopped one is stopped for good.
#[test]
fn a_stopped_replica_does_not_hold_the_job() {
    let ring = compile("replica_ring");
    let want = ring_reference();
    let mut cmd = std::process::Command::new(common::TANDEM);
    cmd.args(["run", "-n", "4", "--replicas", "2"])
        .args(["--set", "replica_timeout_ms=500"])
        .arg(&ring)
        .args(RING_ARGS)
        .env("REPLICA_FAULTS", "6:40:19");
    let out = common::run_command(cmd, JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    assert_eq!(sorted_lines(&out.stdout), want, "{}", out.describe());
    assert!(
        out.stderr.contains("rank 2 replica 1"),
        "the stopped replica is not named: {}",
        out.describe()
    );
    assert!(out.leftovers.is_empty(), "{}", out.describe());
}

/// A rank whose only live replica finishes while a slow replica of another
/// rank still sends to it: the slow replica's sends complete (the rank
/// took those messages from the fast replica) and it finishes too, instead
/// of failing on a rank it takes for lost.
#[test]
fn a_slow_replica_outlives_the_rank_it_sends_to() {
    let prog = compile("replica_laggard");
    let mut cmd = std::process::Command::new(common::TANDEM);
    cmd.args(["run", "-n", "2", "--replicas", "2"])
        .arg(&prog)
        .arg("300")
        // Process 2 is rank 0's replica 1; process 3 is rank 1's replica 1.
        .env("REPLICA_FAULTS", "2:0:9")
        .env("REPLICA_SLOW", "3");
    let out = common::run_command(cmd, JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    assert_eq!(out.stdout.trim(), "sum 44850", "{}", out.describe());
    assert!(
        !out.stderr.contains("rank 1 replica"),
        "rank 1's slow replica failed: {}",
        out.describe()
    );
    assert!(out.leftovers.is_empty(), "{}", out.describe());
}

/// (d) 100,000 messages of 1 KiB to a slow receiver: every byte arrives
/// in order and the senders' logs never hold more than their cap.
#[test]
fn a_flood_to_a_slow_receiver_stays_within_the_log_cap() {
    let flood = compile("replica_flood");
    let out = run(
        2,
        &[
            "--replicas",
            "2",
            "--set",
            "replica_log_bytes=256k",
            "--set",
            "stats=json",
        ],
        &flood,
        &["100000", "1024", "2000"],
        JOB_TIMEOUT,
    );
    assert!(out.status.success(), "{}", out.describe());
    assert!(
        out.has_line("rank 1: 100000 messages intact, sum 13056000000"),
        "{}",
        out.describe()
    );
    let rows = counters(&out.stdout);
    assert_eq!(rows.len(), 2, "{}", out.describe());
    for row in &rows {
        let most = field(row, "max_replica_log_bytes");
        assert!(
            most <= 256 * 1024,
            "log held {most} bytes: {}",
            out.describe()
        );
    }
    assert!(
        field(&rows[0], "max_replica_log_bytes") > 0,
        "{}",
        out.describe()
    );
}

/// The match orders replica_wild's manager replicas wrote.
fn manager_orders(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("order directory")
        .filter_map(|e| e.ok())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).unwrap_or_default())
        })
        .collect();
    v.sort();
    v
}

/// (e) MPI_ANY_SOURCE receives match the same senders in the same order on
/// every replica of the manager, and survive the loss of the leading one,
/// also when it is stopped rather than killed (its follower, waiting for its
/// decisions, would wait for ever; the launcher declares it failed).
#[test]
fn wildcard_receives_match_alike_on_every_replica() {
    let wild = compile("replica_wild");
    for (case, faults, protocol, told) in [
        ("plain", "", "push", ""),
        // Three replicas, the first two leaders killed in turn.
        (
            "three-leaders-killed",
            "4:100:9,0:150:9",
            "push",
            "rank 0 replica 1",
        ),
        (
            "leader-killed",
            "0:150:9,5:40:9",
            "push",
            "rank 0 replica 0",
        ),
        (
            "pull-leader-killed",
            "0:150:9,5:40:9",
            "pull",
            "rank 0 replica 0",
        ),
        ("leader-stopped", "0:150:19", "push", "was stopped"),
    ] {
        let dir =
            std::env::temp_dir().join(format!("tandem-replica-wild-{}-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let prefix = dir.join("order");
        let mut cmd = std::process::Command::new(common::TANDEM);
        let replicas = if case.starts_with("three") { "3" } else { "2" };
        cmd.args(["run", "-n", "4", "--replicas", replicas])
            .args(["--set", &format!("replica_protocol={protocol}")])
            .args(["--set", "replica_timeout_ms=500"])
            .arg(&wild)
            .arg("400")
            .arg(&prefix)
            .env("REPLICA_FAULTS", faults);
        let out = common::run_command(cmd, JOB_TIMEOUT);
        assert!(out.status.success(), "{case}: {}", out.describe());
        assert!(
            out.stdout.starts_with("manager: 400 results"),
            "{case}: {}",
            out.describe()
        );
        assert_eq!(out.stdout.lines().count(), 1, "{case}: {}", out.describe());
        assert!(out.stderr.contains(told), "{case}: {}", out.describe());
        assert!(out.leftovers.is_empty(), "{case}: {}", out.describe());
        let orders = manager_orders(&dir);
        if faults.is_empty() {
            assert_eq!(orders.len(), 2, "{case}: {orders:?}");
            assert_eq!(orders[0].1.lines().count(), 400);
            assert_eq!(
                orders[0].1, orders[1].1,
                "the manager's replicas matched differently"
            );
        } else {
            // The leader died before writing; the survivor took all 400.
            assert_eq!(orders.len(), 1, "{case}: {orders:?}");
            assert_eq!(orders[0].1.lines().count(), 400);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// On one host the replicas' messages go through shared memory: TCP sees
/// only the frames between replicas of one rank (a handful here), where
/// with TCP alone it carries every message.
#[test]
fn replicas_on_one_host_talk_through_shared_memory() {
    let ring = compile("replica_ring");
    for (extra, shared) in [(&[][..], true), (&["--set", "transports=tcp"][..], false)] {
        let mut cmd = std::process::Command::new(common::TANDEM);
        cmd.args(["run", "-n", &RANKS.to_string(), "--replicas", "2"])
            .args(["--set", "stats=1"])
            .args(extra)
            .arg(&ring)
            .args(RING_ARGS);
        let out = common::run_command(cmd, JOB_TIMEOUT);
        assert!(out.status.success(), "{extra:?}: {}", out.describe());
        // The counters table's totals (one replica of each rank).
        let total = |name: &str| -> u64 {
            out.stderr
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("no {name} counter: {}", out.describe()))
        };
        let (socket_reads, messages) = (total("recv_ready"), total("eager_msgs"));
        assert!(messages > 100, "{extra:?}: {messages} messages");
        assert_eq!(
            socket_reads * 4 < messages,
            shared,
            "{extra:?}: {socket_reads} socket readiness events for {messages} messages"
        );
    }
}

/// One-sided communication is refused with replicas, with the standard
/// error class, and the job goes on.
#[test]
fn windows_are_refused_with_replicas() {
    let prog = compile("replica_refusals");
    let out = run(3, &["--replicas", "2"], &prog, &[], JOB_TIMEOUT);
    common::assert_pass(&out, "replica_refusals");
}

/// (f) `replica_verify=hash`: a replica whose data differs from its
/// sibling's (one bit of one allreduce contribution) is reported, naming
/// the sender rank; without differences nothing is reported and the
/// checksums are the unreplicated run's.
#[test]
fn verification_reports_a_replica_that_sends_other_data() {
    let ring = compile("replica_ring");
    let want = ring_reference();
    let mut clean = std::process::Command::new(common::TANDEM);
    clean
        .args(["run", "-n", "4", "--replicas", "2"])
        .args(["--set", "replica_verify=hash", "--set", "stats=json"])
        .arg(&ring)
        .args(RING_ARGS);
    let out = common::run_command(clean, JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    let lines: Vec<String> = sorted_lines(&out.stdout)
        .into_iter()
        .filter(|l| !l.starts_with('{'))
        .collect();
    assert_eq!(lines, want, "{}", out.describe());
    assert!(!out.stderr.contains("differs"), "{}", out.describe());
    assert_eq!(common::counter_total(&out.stdout, "replica_mismatches"), 0);

    // Process 5 is replica 1 of rank 1.
    let mut flipped = std::process::Command::new(common::TANDEM);
    flipped
        .args(["run", "-n", "4", "--replicas", "2"])
        .args(["--set", "replica_verify=hash"])
        .arg(&ring)
        .args(RING_ARGS)
        .env("REPLICA_FLIP", "5:30");
    let out = common::run_command(flipped, JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("differs between the replicas of rank 1")),
        "no mismatch reported: {}",
        out.describe()
    );
}

/// (g) Across hosts (network namespaces): replica 0 of every rank on one
/// host, replica 1 on another; every process of the second host dies at
/// once, and the job finishes on the first with the unreplicated checksums.
/// (f) with three replicas: the copies of a message one replica of rank
/// 1 corrupts are outvoted; every other rank takes the copy its other two
/// replicas agree on, and computes what an unreplicated run computes.
#[test]
fn three_replicas_outvote_a_corrupted_copy() {
    let ring = compile("replica_ring");
    let want = ring_reference();
    let mut cmd = std::process::Command::new(common::TANDEM);
    cmd.args(["run", "-n", "4", "--replicas", "3"])
        .args(["--set", "replica_verify=hash", "--set", "stats=json"])
        .arg(&ring)
        .args(RING_ARGS)
        // Process 5 is replica 1 of rank 1.
        .env("REPLICA_FLIP", "5:30");
    let out = common::run_command(cmd, JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    // Rank 1's own line may come from its corrupted replica.
    let others = |lines: Vec<String>| -> Vec<String> {
        lines
            .into_iter()
            .filter(|l| !l.starts_with('{') && !l.starts_with("rank 1 "))
            .collect()
    };
    assert_eq!(
        others(sorted_lines(&out.stdout)),
        others(want),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("differs between the replicas of rank 1")),
        "no mismatch reported: {}",
        out.describe()
    );
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("took the majority's copy of message") && l.contains("from rank 1")),
        "no majority copy taken: {}",
        out.describe()
    );
    // (The counters shown are one replica's per rank, which may have taken
    // its good copy before the odd hash came: not asserted.)
}

#[test]
fn losing_a_whole_host_of_replicas_over_tcp() {
    let Some(hosts) = multihost_netns::hosts_or_skip(3, None, "losing_a_whole_host_of_replicas")
    else {
        return;
    };
    let ring = compile("replica_ring");
    let want = ring_reference();
    let list = format!("{}:4,{}:4", hosts.names[1], hosts.names[2]);
    let mut cmd = multihost_netns::tandem_run(&hosts, 0);
    cmd.args(["--host", &list, "-n", "4", "--replicas", "2"])
        .arg(&ring)
        .args(RING_ARGS)
        .env("REPLICA_FAULTS", "4:50:9,5:50:9,6:50:9,7:50:9");
    let out = common::run_command(cmd, Duration::from_secs(120));
    assert!(out.status.success(), "{}", out.describe());
    assert_eq!(sorted_lines(&out.stdout), want, "{}", out.describe());
    for r in 0..RANKS {
        let line = out
            .stderr
            .lines()
            .find(|l| l.contains(&format!("rank {r} replica 1")))
            .unwrap_or_else(|| panic!("rank {r}'s replica 1 not reported: {}", out.describe()));
        assert!(line.contains(&hosts.names[2]), "{line}");
    }
}

/// Timing-dependent outcomes (MPI_Waitany's index, MPI_Iprobe's and
/// MPI_Probe's finds with MPI_ANY_SOURCE, how many MPI_Test calls fail,
/// what each MPI_Testsome finds) are the leader's on every replica, also
/// once the leader is lost.
#[test]
fn timing_dependent_outcomes_are_alike_on_every_replica() {
    let prog = compile("replica_choices");
    // With three replicas, two survivors of rank 0 follow the first leader,
    // then one leads the other: both must see the same outcomes.
    for (case, faults, replicas) in [
        ("plain", "", "2"),
        ("leader-killed", "0:15:9,6:10:9", "2"),
        ("three-leader-killed", "0:15:9", "3"),
    ] {
        let dir = std::env::temp_dir().join(format!(
            "tandem-replica-choices-{}-{case}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let prefix = dir.join("seen");
        let mut cmd = std::process::Command::new(common::TANDEM);
        cmd.args(["run", "-n", "4", "--replicas", replicas])
            .arg(&prog)
            .arg("30")
            .arg(&prefix)
            .env("REPLICA_FAULTS", faults);
        let out = common::run_command(cmd, JOB_TIMEOUT);
        assert!(out.status.success(), "{case}: {}", out.describe());
        assert!(
            out.has_line("rank 0: 30 rounds"),
            "{case}: {}",
            out.describe()
        );
        let survivor = std::fs::read_to_string(dir.join("seen.4")).unwrap_or_default();
        let rounds = survivor
            .lines()
            .filter(|l| l.starts_with("waitany"))
            .count();
        assert_eq!(rounds, 30, "{case}: {survivor}");
        assert!(
            survivor.lines().any(|l| l.starts_with("testsome")),
            "{case}"
        );
        let other = match (faults.is_empty(), replicas) {
            (true, _) => Some("seen.0"),
            (false, "3") => Some("seen.8"),
            _ => None,
        };
        if let Some(other) = other {
            let seen = std::fs::read_to_string(dir.join(other)).unwrap_or_default();
            assert_eq!(
                seen, survivor,
                "{case}: the replicas of rank 0 saw different outcomes"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// (c) over TCP: the leading replica of the wildcard manager, on another
/// host, is stopped; that host's helper notices, the launcher declares it
/// failed, and its follower takes over with every result.
#[test]
fn a_stopped_leader_on_another_host_is_declared_failed() {
    let Some(hosts) = multihost_netns::hosts_or_skip(3, None, "a_stopped_leader_on_another_host")
    else {
        return;
    };
    let wild = compile("replica_wild");
    let dir = std::env::temp_dir().join(format!("tandem-replica-stop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let list = format!("{}:4,{}:4", hosts.names[1], hosts.names[2]);
    let mut cmd = multihost_netns::tandem_run(&hosts, 0);
    cmd.args(["--host", &list, "-n", "4", "--replicas", "2"])
        .args(["--set", "replica_timeout_ms=500"])
        .arg(&wild)
        .arg("400")
        .arg(dir.join("order"))
        .env("REPLICA_FAULTS", "0:150:19");
    let out = common::run_command(cmd, Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", out.describe());
    assert!(
        out.stdout.starts_with("manager: 400 results"),
        "{}",
        out.describe()
    );
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("rank 0 replica 0"))
        .unwrap_or_else(|| panic!("the stopped leader is not named: {}", out.describe()));
    assert!(line.contains("was stopped"), "{line}");
    assert!(line.contains(&hosts.names[1]), "{line}");
    assert!(out.leftovers.is_empty(), "{}", out.describe());
}

/// A leader replica runs at most `DECISIONS_AHEAD` choices (here MPI_Test
/// outcomes) ahead of a sibling that reads nothing for a while: it waits
/// for it, and the sibling catches up and finishes alike; one that stays
/// away past `replica_timeout_ms` is declared failed, named, and the job
/// goes on without it.
#[test]
fn a_leader_waits_for_a_slow_sibling_then_leaves_it_behind() {
    let prog = compile("replica_polls");
    for (sleep_ms, timeout_ms, dropped) in [(1200, 5000, false), (2500, 500, true)] {
        let mut cmd = std::process::Command::new(common::TANDEM);
        cmd.args(["run", "-n", "2", "--replicas", "2", "--set", "stats=json"])
            .args(["--set", &format!("replica_timeout_ms={timeout_ms}")])
            .arg(&prog)
            .arg("1800")
            // Process 2: rank 0's replica 1.
            .env("REPLICA_FAULTS", format!("2:0:-{sleep_ms}"));
        let out = common::run_command(cmd, JOB_TIMEOUT);
        assert!(out.status.success(), "{sleep_ms} ms: {}", out.describe());
        let lines: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with("rank 0: "))
            .collect();
        // Replicas that took other branches would print other counts.
        assert_eq!(lines.len(), 1, "{sleep_ms} ms: {}", out.describe());
        let rows = counters(&out.stdout);
        let waits = field(&rows[0], "replica_decision_waits");
        assert!(waits >= 1, "{sleep_ms} ms: the leader never waited");
        let named = out
            .stderr
            .contains("rank 0 replica 1 fell 16384 or more decisions behind its leader");
        assert_eq!(named, dropped, "{sleep_ms} ms: {}", out.describe());
        assert!(out.leftovers.is_empty(), "{}", out.describe());
    }
}

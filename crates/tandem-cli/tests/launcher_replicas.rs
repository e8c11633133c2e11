//! `tandem run --replicas R`: every rank runs as R processes (the VolpexMPI
//! model), process p being replica p / N of rank p % N.
//!
//! * the processes and their variables; the flag and parameter checked;
//! * each line of a rank appears once, whichever replica wrote it, also
//!   when the replica that was ahead dies mid-line;
//! * a dead replica is reported and the job goes on; a rank that loses
//!   every replica ends the job fast; MPI_Abort ends it as ever;
//! * the replicas still running when every rank has finished are stopped
//!   after `replica_timeout_ms`, which is no failure;
//! * stdin reaches every replica of rank 0;
//! * fences wait only for the processes that have not ended;
//! * one replica is the plain job;
//! * across hosts (network namespaces; SKIP where they cannot be made):
//!   replicas on different hosts, a host lost mid-job, remote stdin and a
//!   remote replica stopped.
//!
//! Every job runs under a deadline (`common::run_command`), which also
//! finds any process of the job left behind.

mod common;
mod multihost_netns;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{run_command, Outcome, TANDEM};

/// Deadline for every job here.
const LIMIT: Duration = Duration::from_secs(60);

/// Names the fake rank's scenario (not `TANDEM_*`: the launcher would take
/// it for a parameter).
const SCENARIO_VAR: &str = "REPLICA_TEST_SCENARIO";

fn tandem(args: &[&str]) -> Outcome {
    let mut cmd = Command::new(TANDEM);
    cmd.args(args);
    run_command(cmd, LIMIT)
}

/// A fresh directory for the processes of one test to write into.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("tandem-replicas-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(name)).ok()
    }

    fn count(&self) -> usize {
        std::fs::read_dir(&self.0).unwrap().count()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The lines of `text`, sorted.
fn sorted_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// Fails unless the job exited 0 and left nothing behind.
fn assert_success(out: &Outcome) {
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.leftovers.is_empty(), "{out:?}");
}

// ---- (a) processes, variables, the flag ----

#[test]
fn every_replica_is_a_process_with_its_own_number() {
    for how in [["--replicas", "2"], ["--set", "replicas=2"]] {
        let dir = TempDir::new(&format!("vars-{}", how[0].trim_start_matches('-')));
        let script = format!(
            "echo \"$TANDEM_JOB_RANK $TANDEM_JOB_SIZE $TANDEM_JOB_REPLICAS $TANDEM_JOB_LOCAL_SIZE\" > {}/p-$TANDEM_JOB_RANK",
            dir.path()
        );
        let out = tandem(&["run", "-n", "3", how[0], how[1], "sh", "-c", &script]);
        assert_success(&out);
        assert_eq!(out.stderr, "", "{out:?}");
        assert_eq!(dir.count(), 6, "{out:?}");
        for p in 0..6 {
            assert_eq!(
                dir.read(&format!("p-{p}")).as_deref(),
                Some(format!("{p} 6 2 6\n").as_str()),
                "process {p}: {out:?}"
            );
        }
    }
}

#[test]
fn replica_counts_are_checked_and_documented() {
    for args in [
        &["--replicas", "0"][..],
        &["--replicas", "17"],
        &["--set", "replicas=17"],
    ] {
        let mut all = vec!["run", "-n", "2"];
        all.extend_from_slice(args);
        all.extend(["sh", "-c", "echo ran"]);
        let out = tandem(&all);
        assert_eq!(out.code(), Some(2), "{out:?}");
        assert!(out.stderr.contains("replicas"), "{out:?}");
        assert_eq!(out.stdout, "", "{out:?}");
    }
    let mut cmd = Command::new(TANDEM);
    cmd.args(["run", "-n", "2", "true"])
        .env("TANDEM_REPLICAS", "0");
    let out = run_command(cmd, LIMIT);
    assert_eq!(out.code(), Some(2), "{out:?}");

    let out = tandem(&["run", "--help"]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains("--replicas"))
        .collect();
    assert_eq!(lines.len(), 1, "{out:?}");
}

// ---- (b) output once ----

#[test]
fn each_line_of_a_rank_appears_once() {
    let script = r#"r=$((TANDEM_JOB_RANK % 3)); for i in 1 2 3 4 5; do echo "out $r $i"; echo "err $r $i" >&2; done; printf "tail $r""#;
    let out = tandem(&[
        "run",
        "-n",
        "3",
        "--replicas",
        "3",
        "--tag-output",
        "sh",
        "-c",
        script,
    ]);
    assert_success(&out);
    let mut want_out = Vec::new();
    let mut want_err = Vec::new();
    for r in 0..3 {
        for i in 1..=5 {
            want_out.push(format!("[{r}] out {r} {i}"));
            want_err.push(format!("[{r}] err {r} {i}"));
        }
        want_out.push(format!("[{r}] tail {r}"));
    }
    want_out.sort();
    want_err.sort();
    assert_eq!(sorted_lines(&out.stdout), want_out, "{out:?}");
    assert_eq!(sorted_lines(&out.stderr), want_err, "{out:?}");
    // In order within each rank.
    for r in 0..3 {
        let mine: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("[{r}] out")))
            .collect();
        let expect: Vec<String> = (1..=5).map(|i| format!("[{r}] out {r} {i}")).collect();
        assert_eq!(mine, expect, "{out:?}");
    }
}

// ---- (c) a replica dies ----

#[test]
fn killed_replica_is_reported_and_its_partner_carries_on() {
    // Replica 1 of rank 1 prints four lines and part of the fifth, then
    // dies; replica 0 starts late and finishes. Nothing is lost, nothing
    // repeated, the cut line comes whole.
    let script = r#"
        r=$((TANDEM_JOB_RANK % 3)); k=$((TANDEM_JOB_RANK / 3))
        if [ $k = 0 ]; then sleep 0.5; fi
        i=1
        while [ $i -le 8 ]; do
            if [ $r = 1 ] && [ $k = 1 ] && [ $i = 5 ]; then printf "rank $r line $i"; kill -9 $$; fi
            echo "rank $r line $i"
            i=$((i + 1))
        done"#;
    let out = tandem(&["run", "-n", "3", "--replicas", "2", "sh", "-c", script]);
    assert_success(&out);
    let mut want: Vec<String> = Vec::new();
    for r in 0..3 {
        for i in 1..=8 {
            want.push(format!("rank {r} line {i}"));
        }
    }
    want.sort();
    assert_eq!(sorted_lines(&out.stdout), want, "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].starts_with("tandem: rank 1 replica 1 (host ")
            && lines[0].contains(", pid ")
            && lines[0]
                .ends_with("was killed by signal 9 (SIGKILL); continuing on its other replicas"),
        "{out:?}"
    );
}

#[test]
fn replicas_exiting_badly_are_failures_only_when_all_do() {
    // Rank 0's replica 1 exits 3: reported, the job still succeeds.
    let out = tandem(&[
        "run",
        "-n",
        "2",
        "--replicas",
        "2",
        "sh",
        "-c",
        r#"if [ $TANDEM_JOB_RANK = 2 ]; then exit 3; fi; sleep 0.3; echo ok"#,
    ]);
    assert_success(&out);
    assert_eq!(out.stdout, "ok\nok\n", "{out:?}");
    assert!(
        out.stderr.contains("rank 0 replica 1 (host ")
            && out
                .stderr
                .contains("exited with status 3; continuing on its other replicas"),
        "{out:?}"
    );
    // Every replica of rank 1 exits 3: the job's status is 3.
    let out = tandem(&[
        "run",
        "-n",
        "2",
        "--replicas",
        "2",
        "sh",
        "-c",
        r#"if [ $((TANDEM_JOB_RANK % 2)) = 1 ]; then exit 3; fi; sleep 30"#,
    ]);
    assert_eq!(out.code(), Some(3), "{out:?}");
    assert!(
        out.stderr
            .contains("tandem: rank 1 lost all its 2 replicas"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(5), "{out:?}");
    assert!(out.leftovers.is_empty(), "{out:?}");
}

// ---- (d) a rank loses every replica ----

#[test]
fn rank_losing_all_its_replicas_ends_the_job_quickly() {
    let script = r#"if [ $((TANDEM_JOB_RANK % 3)) = 1 ]; then kill -9 $$; fi; sleep 30"#;
    let out = tandem(&["run", "-n", "3", "--replicas", "2", "sh", "-c", script]);
    assert_eq!(out.code(), Some(128 + 9), "{out:?}");
    assert!(out.elapsed < Duration::from_millis(2500), "{out:?}");
    assert!(
        out.stderr
            .contains("tandem: rank 1 lost all its 2 replicas; the last, replica "),
        "{out:?}"
    );
    assert!(out.stderr.contains("SIGKILL"), "{out:?}");
    // The first to die was still one of two.
    assert!(
        out.stderr.contains("continuing on its other replicas"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("rank 0"), "{out:?}");
    assert!(!out.stderr.contains("rank 2"), "{out:?}");
    assert!(out.leftovers.is_empty(), "{out:?}");
}

// ---- (e) the last replicas are stopped ----

#[test]
fn replica_still_running_after_its_rank_finished_is_stopped() {
    let script = r#"echo "rank $((TANDEM_JOB_RANK % 2)) done"; if [ $TANDEM_JOB_RANK = 3 ]; then sleep 1000; fi"#;
    let out = tandem(&[
        "run",
        "-n",
        "2",
        "--replicas",
        "2",
        "--set",
        "replica_timeout_ms=500",
        "sh",
        "-c",
        script,
    ]);
    assert_success(&out);
    assert_eq!(
        sorted_lines(&out.stdout),
        ["rank 0 done", "rank 1 done"],
        "{out:?}"
    );
    assert_eq!(
        out.stderr,
        "tandem: rank 1 replica 1 did not finish within replica_timeout_ms (500 ms) of its rank's other replicas; stopped it\n",
        "{out:?}"
    );
    assert!(out.elapsed >= Duration::from_millis(500), "{out:?}");
    assert!(out.elapsed < Duration::from_secs(5), "{out:?}");
}

/// A stopped (SIGSTOP) replica is stopped for good too.
#[test]
fn suspended_replica_is_stopped_too() {
    let script = r#"if [ $TANDEM_JOB_RANK = 1 ]; then kill -STOP $$; fi; echo done"#;
    let out = tandem(&[
        "run",
        "-n",
        "1",
        "--replicas",
        "2",
        "--set",
        "replica_timeout_ms=200",
        "sh",
        "-c",
        script,
    ]);
    assert_success(&out);
    assert_eq!(out.stdout, "done\n", "{out:?}");
    assert!(
        out.stderr.contains("rank 0 replica 1 did not finish"),
        "{out:?}"
    );
}

// ---- stdin ----

#[test]
fn stdin_reaches_every_replica_of_rank_zero() {
    let dir = TempDir::new("stdin");
    let script = format!(
        "cat > {d}/in-$TANDEM_JOB_RANK; cat {d}/in-$TANDEM_JOB_RANK; echo done",
        d = dir.path()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"printf 'hello\nworld\n' | "$0" "$@""#)
        .arg(TANDEM)
        .args([
            "run",
            "-n",
            "2",
            "--replicas",
            "3",
            "--tag-output",
            "sh",
            "-c",
        ])
        .arg(&script);
    let out = run_command(cmd, LIMIT);
    assert_success(&out);
    assert_eq!(
        sorted_lines(&out.stdout),
        ["[0] done", "[0] hello", "[0] world", "[1] done"],
        "{out:?}"
    );
    for p in 0..6 {
        let want = if p % 2 == 0 { "hello\nworld\n" } else { "" };
        assert_eq!(dir.read(&format!("in-{p}")).as_deref(), Some(want), "{p}");
    }
}

// ---- (f) one replica is the plain job ----

#[test]
fn one_replica_is_the_plain_job() {
    // Rank 1 fails once rank 0 has finished.
    let script = r#"echo "out $TANDEM_JOB_RANK"; echo "err $TANDEM_JOB_RANK" >&2; test -z "$TANDEM_JOB_REPLICAS" || echo replicas set; if [ $TANDEM_JOB_RANK = 1 ]; then sleep 0.3; exit 3; fi"#;
    let plain = tandem(&["run", "-n", "2", "--tag-output", "sh", "-c", script]);
    let one = tandem(&[
        "run",
        "-n",
        "2",
        "--replicas",
        "1",
        "--tag-output",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(plain.code(), Some(3), "{plain:?}");
    assert_eq!(one.code(), Some(3), "{one:?}");
    assert!(!one.stdout.contains("replicas set"), "{one:?}");
    assert!(one.stderr.contains("tandem: rank 1 (pid "), "{one:?}");
    // Up to the pid in the message.
    let strip = |s: &str| -> Vec<String> {
        sorted_lines(s)
            .into_iter()
            .map(|l| match l.find("(pid ") {
                Some(i) => l[..i].to_string(),
                None => l,
            })
            .collect()
    };
    assert_eq!(
        strip(&plain.stderr),
        strip(&one.stderr),
        "{plain:?}\n{one:?}"
    );
    assert_eq!(
        sorted_lines(&plain.stdout),
        sorted_lines(&one.stdout),
        "{plain:?}\n{one:?}"
    );
}

// ---- the key-value service, with this binary as the processes ----

/// Runs `scenario` as the processes of `tandem run -n <n> --replicas <r>`.
fn fake_job(n: u32, r: u32, scenario: &str) -> Outcome {
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new(TANDEM);
    cmd.args(["run", "-n", &n.to_string(), "--replicas", &r.to_string()])
        .arg(me)
        .args(["fake_replica", "--exact", "--nocapture", "--test-threads=1"])
        .env(SCENARIO_VAR, scenario);
    run_command(cmd, LIMIT)
}

/// The service's line protocol, spoken directly.
struct Link {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Link {
    fn connect(process: u32) -> Link {
        let addr = std::env::var("TANDEM_JOB_ADDR").expect("launched by tandem");
        let fd = std::env::var("TANDEM_JOB_SECRET_FD").expect("launched by tandem");
        let secret = std::fs::read_to_string(format!("/proc/self/fd/{fd}")).unwrap();
        let stream = TcpStream::connect(addr).unwrap();
        let mut link = Link {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert_eq!(link.request(&format!("HELLO {secret} {process}")), "OK");
        link
    }

    fn send(&mut self, line: &str) {
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    fn request(&mut self, line: &str) -> String {
        self.send(line);
        let mut reply = String::new();
        self.reader.read_line(&mut reply).unwrap();
        reply.trim_end().to_string()
    }
}

/// Not a test on its own: the body of a process started by `fake_job`.
#[test]
fn fake_replica() {
    let Ok(scenario) = std::env::var(SCENARIO_VAR) else {
        return;
    };
    let num = |name: &str| -> u32 { std::env::var(name).unwrap().parse().unwrap() };
    let p = num("TANDEM_JOB_RANK");
    let size = num("TANDEM_JOB_SIZE");
    let replicas = num("TANDEM_JOB_REPLICAS");
    let n = size / replicas;
    let (rank, replica) = (p % n, p / n);
    let code = match scenario.as_str() {
        // Two ranks, two replicas. Rank 0's replica 1 leaves without
        // MPI_Finalize before the fence, rank 1's replica 1 dies in it;
        // the others fence, exchange values and finish.
        "fence" => {
            let mut link = Link::connect(p);
            match p {
                2 => 0,
                3 => {
                    link.send("FENCE");
                    std::thread::sleep(Duration::from_millis(300));
                    3
                }
                _ => {
                    assert_eq!(link.request(&format!("PUT key-{rank} value-{rank}")), "OK");
                    assert_eq!(link.request("FENCE"), "OK");
                    let other = (rank + 1) % n;
                    assert_eq!(
                        link.request(&format!("GET key-{other}")),
                        format!("VALUE value-{other}")
                    );
                    assert_eq!(link.request("FINALIZE"), "OK");
                    println!("rank {rank} fenced");
                    0
                }
            }
        }
        "abort" => {
            let mut link = Link::connect(p);
            if rank == 1 && replica == 0 {
                link.send("ABORT 7 out of cheese");
            }
            std::thread::sleep(Duration::from_secs(30));
            0
        }
        other => panic!("unknown scenario {other}"),
    };
    std::process::exit(code);
}

#[test]
fn fence_waits_only_for_processes_that_have_not_ended() {
    let out = fake_job(2, 2, "fence");
    assert_success(&out);
    assert!(out.stdout.contains("rank 0 fenced\n"), "{out:?}");
    assert!(out.stdout.contains("rank 1 fenced\n"), "{out:?}");
    assert_eq!(out.stdout.matches("fenced").count(), 2, "{out:?}");
    assert!(
        out.stderr.contains("tandem: rank 0 replica 1 (host ")
            && out
                .stderr
                .contains("exited without calling MPI_Finalize; continuing on its other replicas"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("tandem: rank 1 replica 1 (host ")
            && out
                .stderr
                .contains("exited with status 3; continuing on its other replicas"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
}

#[test]
fn abort_ends_a_replicated_job() {
    let out = fake_job(2, 2, "abort");
    assert_eq!(out.code(), Some(7), "{out:?}");
    assert!(
        out.stderr
            .contains("tandem: rank 1 replica 0 called MPI_Abort with error code 7: out of cheese"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
    assert!(out.leftovers.is_empty(), "{out:?}");
}

// ---- across hosts ----

/// 3 namespace hosts x 2 slots, 3 ranks x 2 replicas by node: each rank's
/// replicas on two hosts. Host 1's helper is killed mid-job: its
/// processes are reported lost, the job finishes with every line once.
/// Then 2 hosts, stdin for rank 0's replicas on both, and a remote
/// replica stopped after its rank finished.
#[test]
fn replicas_across_hosts() {
    let Some(hosts) = multihost_netns::hosts_or_skip(3, None, "replicas_across_hosts") else {
        return;
    };
    let dir = TempDir::new("hosts");
    let lost = hosts.address(1);
    let script = format!(
        r#"echo "$TANDEM_JOB_NODE_ADDR" > {d}/at-$TANDEM_JOB_RANK
        r=$((TANDEM_JOB_RANK % 3))
        echo "rank $r line 1"
        if [ "$TANDEM_JOB_NODE_ADDR" = "{lost}" ]; then
            if [ $r = 1 ]; then sleep 0.2; kill -9 $PPID; fi
            sleep 30
        fi
        sleep 1
        echo "rank $r line 2""#,
        d = dir.path()
    );
    let mut cmd = multihost_netns::tandem_run(&hosts, 0);
    cmd.args(["--host", &hosts.host_list(2), "--map-by", "node"])
        .args(["-n", "3", "--replicas", "2", "sh", "-c", &script]);
    let out = run_command(cmd, LIMIT);
    assert_success(&out);
    for r in 0..3 {
        let a = dir.read(&format!("at-{r}"));
        let b = dir.read(&format!("at-{}", r + 3));
        assert!(
            a.is_some() && b.is_some() && a != b,
            "rank {r}: {a:?} {b:?}\n{out:?}"
        );
    }
    let mut want: Vec<String> = (0..3)
        .flat_map(|r| [format!("rank {r} line 1"), format!("rank {r} line 2")])
        .collect();
    want.sort();
    assert_eq!(sorted_lines(&out.stdout), want, "{out:?}");
    let lost_lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains(&format!("was lost with host {}", hosts.names[1])))
        .collect();
    assert_eq!(lost_lines.len(), 2, "{out:?}");
    assert!(
        lost_lines
            .iter()
            .all(|l| l.ends_with("; continuing on its other replicas")),
        "{out:?}"
    );
    assert!(!out.stderr.contains("warning"), "{out:?}");

    // Two hosts: rank 0's replicas (processes 0 and 2) on both read stdin;
    // process 3 on the second host hangs and is stopped.
    let dir = TempDir::new("hosts-stdin");
    let script = format!(
        r#"cat > {d}/in-$TANDEM_JOB_RANK; echo "rank $((TANDEM_JOB_RANK % 2)) done"
        if [ $TANDEM_JOB_RANK = 3 ]; then sleep 1000; fi"#,
        d = dir.path()
    );
    let two = format!("{}:2,{}:2", hosts.names[0], hosts.names[1]);
    let inner = multihost_netns::tandem_run(&hosts, 0);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"printf 'line one\nline two\n' | "$0" "$@""#)
        .arg(inner.get_program())
        .args(inner.get_args())
        .args(["--host", &two, "--replicas", "2"])
        .args(["--set", "replica_timeout_ms=300", "sh", "-c", &script]);
    let out = run_command(cmd, LIMIT);
    assert_success(&out);
    assert_eq!(
        sorted_lines(&out.stdout),
        ["rank 0 done", "rank 1 done"],
        "{out:?}"
    );
    for p in 0..4 {
        let want = if p % 2 == 0 {
            "line one\nline two\n"
        } else {
            ""
        };
        assert_eq!(
            dir.read(&format!("in-{p}")).as_deref(),
            Some(want),
            "{p}\n{out:?}"
        );
    }
    assert!(
        out.stderr
            .contains("tandem: rank 1 replica 1 did not finish within replica_timeout_ms"),
        "{out:?}"
    );
}

/// The warning when a host list leaves some rank's replicas together.
#[test]
fn replicas_sharing_a_host_are_warned_about() {
    let out = tandem(&[
        "run",
        "--host",
        "localhost:4",
        "-n",
        "2",
        "--replicas",
        "2",
        "true",
    ]);
    assert_success(&out);
    assert_eq!(
        out.stderr,
        "tandem: warning: all 2 replicas of rank 0 share host localhost; losing that host ends the job (2 of 2 ranks have all their replicas on one host)\n",
        "{out:?}"
    );
    // Without a host list nothing is said.
    let out = tandem(&["run", "-n", "2", "--replicas", "2", "true"]);
    assert_success(&out);
    assert_eq!(out.stderr, "", "{out:?}");
}

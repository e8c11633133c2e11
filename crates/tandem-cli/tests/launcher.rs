//! End-to-end tests of the `tandem` command: real jobs through the launcher.
//!
//! Every job runs under a deadline (the helper kills the launcher if it is
//! exceeded, and PR_SET_PDEATHSIG takes the ranks with it), and tests that
//! end jobs abnormally check that no process of any rank is left.
//!
//! Ranks that speak the key-value protocol are this test binary itself:
//! `tandem run ... <this binary> fake_rank --exact` runs the `fake_rank`
//! "test", which acts out the scenario named in `FAKE_RANK_SCENARIO`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tandem::bootstrap::{encode_secret, JobInfo, MasterLink};

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");
/// Names the fake rank's scenario (not `TANDEM_*`: the launcher would
/// reject it as an unknown parameter).
const SCENARIO_VAR: &str = "FAKE_RANK_SCENARIO";

/// A finished `tandem` process.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Finished {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {:?} after {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// A running `tandem` whose output is collected line by line.
struct Running {
    child: Child,
    started: Instant,
    stdout_lines: mpsc::Receiver<String>,
    stdout: Vec<String>,
    stderr: thread::JoinHandle<String>,
}

fn start(program: &str, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Running {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn_retrying(&mut cmd);
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let text = text.to_string();
        thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let (tx, rx) = mpsc::channel();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    thread::spawn(move || {
        // Line by line as they come; a final partial line is kept as it is.
        let mut line = Vec::new();
        while out.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
            line.clear();
        }
    });
    let mut err = child.stderr.take().unwrap();
    let stderr = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    Running {
        child,
        started: Instant::now(),
        stdout_lines: rx,
        stdout: Vec::new(),
        stderr,
    }
}

/// Spawns `cmd`, retrying while the executable is "busy": a freshly copied
/// binary stays busy while any child forked by another test thread during
/// the copy still holds the written descriptor (until it execs).
fn spawn_retrying(cmd: &mut Command) -> Child {
    for _ in 0..100 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                thread::sleep(Duration::from_millis(20))
            }
            other => return other.expect("start tandem"),
        }
    }
    panic!("executable stayed busy");
}

impl Running {
    /// Waits for the process to end; kills it (and fails the test) after `limit`.
    fn finish(mut self, limit: Duration) -> Finished {
        let deadline = self.started + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stderr = self.stderr.join().unwrap_or_default();
                panic!("tandem did not finish within {limit:?}; stderr:\n{stderr}");
            }
            thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        self.stdout.extend(self.stdout_lines.iter());
        Finished {
            status,
            stdout: self.stdout.concat(),
            stderr: self.stderr.join().unwrap_or_default(),
            elapsed,
        }
    }

    /// Waits until stdout has shown `count` lines containing `needle`.
    fn wait_for_lines(&mut self, needle: &str, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.stdout.iter().filter(|l| l.contains(needle)).count() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout_lines.recv_timeout(left) {
                Ok(line) => self.stdout.push(line),
                Err(_) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "saw only {:?} waiting for {count} x {needle:?}",
                        self.stdout
                    );
                }
            }
        }
    }
}

fn tandem(args: &[&str]) -> Finished {
    start(TANDEM, args, &[], None).finish(Duration::from_secs(20))
}

fn tandem_env(args: &[&str], env: &[(&str, &str)]) -> Finished {
    start(TANDEM, args, env, None).finish(Duration::from_secs(20))
}

/// Set in each job's environment, so the processes of one test's job can
/// be found (ranks and anything they started inherit it).
const MARKER_VAR: &str = "LAUNCHER_TEST_MARKER";

fn new_marker(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// Live (not zombie) processes whose environment carries `marker`.
fn marked_processes(marker: &str) -> Vec<String> {
    let needle = format!("{MARKER_VAR}={marker}\0").into_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .windows(needle.len())
            .any(|w| w == needle.as_slice())
        {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ..."; comm may hold spaces and parens.
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        if state != Some("Z") {
            found.push(stat);
        }
    }
    found
}

fn assert_nothing_left(marker: &str) {
    let left = marked_processes(marker);
    assert!(
        left.is_empty(),
        "processes of the job survived it: {left:?}"
    );
}

/// Runs `tandem args` with `marker` in its environment.
fn tandem_marked(args: &[&str], marker: &str) -> Finished {
    start(TANDEM, args, &[(MARKER_VAR, marker)], None).finish(Duration::from_secs(20))
}

#[test]
fn successful_plain_programs_exit_zero() {
    let out = tandem(&["run", "-n", "3", "true"]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(out.stderr, "", "{out:?}");
}

#[test]
fn failing_rank_is_named_and_its_status_propagates() {
    let out = tandem(&[
        "run",
        "-n",
        "2",
        "sh",
        "-c",
        "exit $((TANDEM_JOB_RANK * 3))",
    ]);
    assert_eq!(out.code(), Some(3), "{out:?}");
    assert!(out.stderr.contains("tandem: rank 1 (pid "), "{out:?}");
    assert!(out.stderr.contains("exited with status 3"), "{out:?}");

    let out = tandem(&["run", "-n", "2", "false"]);
    assert_eq!(out.code(), Some(1), "{out:?}");
    assert!(out.stderr.contains("exited with status 1"), "{out:?}");
}

#[test]
fn killed_rank_stops_the_job_quickly_and_leaves_nothing() {
    let marker = new_marker("killed-rank");
    let script = r#"if [ "$TANDEM_JOB_RANK" = 1 ]; then kill -9 $$; fi; sleep 30"#;
    let out = tandem_marked(&["run", "-n", "3", "sh", "-c", script], &marker);
    assert_ne!(out.code(), Some(0), "{out:?}");
    assert_eq!(out.code(), Some(128 + 9), "{out:?}");
    assert!(out.elapsed < Duration::from_millis(2500), "{out:?}");
    assert!(out.stderr.contains("rank 1 (pid "), "{out:?}");
    assert!(
        out.stderr.contains("was killed by signal 9 (SIGKILL)"),
        "{out:?}"
    );
    // The ranks the launcher stopped are summarized, not reported as failures.
    assert!(!out.stderr.contains("rank 0"), "{out:?}");
    assert!(!out.stderr.contains("rank 2"), "{out:?}");
    assert_nothing_left(&marker);
}

#[test]
fn rank_ignoring_sigterm_is_killed_after_the_grace_period() {
    let marker = new_marker("ignores-sigterm");
    let script = r#"trap '' TERM; if [ "$TANDEM_JOB_RANK" = 0 ]; then exit 5; fi; sleep 30"#;
    let out = tandem_marked(&["run", "-n", "2", "sh", "-c", script], &marker);
    assert_eq!(out.code(), Some(5), "{out:?}");
    assert!(out.elapsed < Duration::from_millis(2500), "{out:?}");
    assert!(out.stderr.contains("rank 0 (pid "), "{out:?}");
    assert!(
        out.stderr.contains("stopped the remaining 1 rank"),
        "{out:?}"
    );
    assert_nothing_left(&marker);
}

#[test]
fn background_processes_of_ranks_do_not_outlive_the_job() {
    // One stays in the rank's process group, one escapes it with setsid.
    let marker = new_marker("background");
    let script = "sleep 31 & setsid sleep 32 & echo started";
    let out = tandem_marked(&["run", "-n", "2", "sh", "-c", script], &marker);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, "started\nstarted\n", "{out:?}");
    assert_nothing_left(&marker);
}

#[test]
fn ranks_start_with_no_signal_blocked_and_sigpipe_not_ignored() {
    let out = tandem(&[
        "run",
        "-n",
        "1",
        "grep",
        "-E",
        "^Sig(Blk|Ign)",
        "/proc/self/status",
    ]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let mask = |name: &str, status: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).expect(name);
        u64::from_str_radix(line[name.len()..].trim(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:", &out.stdout), 0, "{out:?}");
    let sigpipe_bit = 1u64 << (libc::SIGPIPE - 1);
    assert_eq!(mask("SigIgn:", &out.stdout) & sigpipe_bit, 0, "{out:?}");
}

#[test]
fn missing_program_is_a_clear_error() {
    let out = tandem(&["run", "-n", "2", "no-such-program-for-tandem"]);
    assert_eq!(out.code(), Some(127), "{out:?}");
    assert!(out.stderr.contains("no-such-program-for-tandem"), "{out:?}");
    assert!(out.stderr.contains("not found"), "{out:?}");
}

/// `--per-host N` (`--ppn`, `--npernode`) starts N processes per host: on
/// one host, N ranks when -n is not given, and a larger -n is refused.
#[test]
fn per_host_sets_the_ranks_of_a_host() {
    let out = tandem(&[
        "run",
        "--ppn",
        "3",
        "sh",
        "-c",
        "echo size $TANDEM_JOB_SIZE",
    ]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(
        out.stdout.lines().filter(|l| *l == "size 3").count(),
        3,
        "{out:?}"
    );
    let out = tandem(&["run", "-n", "4", "--per-host", "2", "true"]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("--per-host allows 2"), "{out:?}");
}

/// A mistyped option is not run as the program: it is refused, with the
/// option it is nearest to.
/// `--` ends tandem run's options (the program may start with a dash);
/// `tandem run --version` answers as every other name does.
#[test]
fn double_dash_ends_the_options_and_version_is_answered() {
    let out = tandem(&[
        "run",
        "-n",
        "2",
        "--",
        "sh",
        "-c",
        "echo rank $TANDEM_JOB_RANK",
    ]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(
        out.stdout.contains("rank 0\n") && out.stdout.contains("rank 1\n"),
        "{out:?}"
    );
    for args in [&["--version"][..], &["run", "--version"][..]] {
        let out = tandem(args);
        assert_eq!(out.code(), Some(0), "{args:?}: {out:?}");
        assert!(
            out.stdout.contains(env!("CARGO_PKG_VERSION")),
            "{args:?}: {out:?}"
        );
    }
}

#[test]
fn a_mistyped_option_is_refused_with_a_suggestion() {
    let out = tandem(&["run", "-n", "2", "--tag-ouput", "true"]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("unknown option '--tag-ouput' (did you mean --tag-output?)"),
        "{out:?}"
    );
    let out = tandem(&["run", "-n", "2", "--zzzzzzzz", "true"]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(
        out.stderr.contains("unknown option '--zzzzzzzz';"),
        "{out:?}"
    );
}

#[test]
fn tag_output_prefixes_every_line() {
    let script =
        "echo line-$TANDEM_JOB_RANK; echo err-$TANDEM_JOB_RANK >&2; printf tail-$TANDEM_JOB_RANK";
    let out = tandem(&["run", "-n", "3", "--tag-output", "sh", "-c", script]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    let mut expected = Vec::new();
    for r in 0..3 {
        expected.push(format!("[{r}] line-{r}"));
        expected.push(format!("[{r}] tail-{r}"));
    }
    expected.sort();
    assert_eq!(lines, expected, "{out:?}");
    for r in 0..3 {
        assert!(out.stderr.contains(&format!("[{r}] err-{r}\n")), "{out:?}");
    }
}

#[test]
fn untagged_output_is_passed_through_unchanged() {
    let out = tandem(&["run", "-n", "1", "printf", "a\\nb"]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, "a\nb");
}

#[test]
fn stdin_reaches_rank_zero_only() {
    let args = [
        "run",
        "-n",
        "3",
        "--tag-output",
        "sh",
        "-c",
        "cat; echo done",
    ];
    let out = start(TANDEM, &args, &[], Some("hello\nworld\n")).finish(Duration::from_secs(20));
    assert_eq!(out.code(), Some(0), "{out:?}");
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["[0] done", "[0] hello", "[0] world", "[1] done", "[2] done"],
        "{out:?}"
    );
}

#[test]
fn set_passes_parameters_to_ranks() {
    let out = tandem(&[
        "run",
        "-n",
        "1",
        "--set",
        "eager_limit=128k",
        "sh",
        "-c",
        "echo $TANDEM_EAGER_LIMIT",
    ]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, "128k\n");
}

#[test]
fn unknown_parameters_fail_before_launch_with_a_suggestion() {
    let out = tandem(&[
        "run",
        "-n",
        "1",
        "--set",
        "eager_limt=1",
        "sh",
        "-c",
        "echo ran",
    ]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("'eager_limit'"), "{out:?}");
    assert_eq!(out.stdout, "");

    let out = tandem(&["run", "-n", "1", "--set", "spin_us=fast", "true"]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("spin_us"), "{out:?}");

    let out = tandem_env(&["run", "-n", "1", "true"], &[("TANDEM_EAGER_LIMT", "1")]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("TANDEM_EAGER_LIMT"), "{out:?}");
    assert!(out.stderr.contains("'eager_limit'"), "{out:?}");
}

/// A job stopped for running longer than its 0.5 s limit: status 124, the
/// reason said, soon, nothing left behind.
fn assert_timed_out(out: &Finished, marker: &str) {
    assert_eq!(out.code(), Some(124), "{out:?}");
    assert!(
        out.stderr
            .contains("tandem: job exceeded the timeout of 0.5 s"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(5), "{out:?}");
    assert_nothing_left(marker);
}

#[test]
fn timeout_stops_the_job() {
    let marker = new_marker("timeout");
    let args = ["run", "-n", "2", "--timeout", "0.5", "sh", "-c", "sleep 30"];
    assert_timed_out(&tandem_marked(&args, &marker), &marker);
}

/// `--wdir DIR` starts every rank in DIR; a relative program path that
/// names a file where tandem was called still names it.
#[test]
fn ranks_start_in_the_working_directory_given() {
    let dir = std::env::temp_dir().join(format!("tandem-wdir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let want = dir.canonicalize().unwrap();
    let dir_arg = dir.to_str().unwrap();
    let out = tandem(&["run", "-n", "2", "--wdir", dir_arg, "sh", "-c", "pwd -P"]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(
        lines.iter().all(|l| std::path::Path::new(l) == want),
        "{out:?}"
    );
    let missing = tandem(&["run", "-n", "1", "--wdir", "/no/such/dir", "true"]);
    assert_eq!(missing.code(), Some(2), "{missing:?}");
    assert!(missing.stderr.contains("-wdir /no/such/dir"), "{missing:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// MPMD: `PROG ARGS : -n N PROG ARGS` (also with -np, and through the mpirun name) runs
/// each program on its ranks, in order, with its number in
/// TANDEM_JOB_APPNUM; a program without its count, or an option after ':'
/// other than -n, is refused before anything starts.
#[test]
fn programs_separated_by_colons_run_on_their_own_ranks() {
    let mpirun = Path::new(TANDEM).with_file_name("mpirun");
    let echo = |tag: &str| format!("echo {tag} $TANDEM_JOB_RANK $TANDEM_JOB_APPNUM");
    // `tandem run` also takes mpirun's one-dash spelling, -np.
    for (exe, count) in [
        (Path::new(TANDEM), "-n"),
        (Path::new(TANDEM), "-np"),
        (mpirun.as_path(), "-np"),
    ] {
        let (a, b) = (echo("first"), echo("second"));
        let mut args = vec![];
        if exe == Path::new(TANDEM) {
            args.push("run");
        }
        args.extend([count, "1", "sh", "-c", &a, ":", count, "2", "sh", "-c", &b]);
        let out = start(exe.to_str().unwrap(), &args, &[], None).finish(Duration::from_secs(20));
        assert_eq!(out.code(), Some(0), "{out:?}");
        let mut lines: Vec<&str> = out.stdout.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            vec!["first 0 0", "second 1 1", "second 2 1"],
            "{out:?}"
        );
    }
    let no_count = tandem(&["run", "-n", "1", "true", ":", "true"]);
    assert_eq!(no_count.code(), Some(2), "{no_count:?}");
    assert!(
        no_count.stderr.contains("give each its number of ranks"),
        "{no_count:?}"
    );
    let stray = tandem(&["run", "-n", "1", "true", ":", "--tag-output", "true"]);
    assert_eq!(stray.code(), Some(2), "{stray:?}");
    assert!(stray.stderr.contains("not '--tag-output'"), "{stray:?}");
}

/// Ranks that all wait, none using the CPU, for `stall_warn_s` (here they
/// sleep, as ranks blocked on each other in MPI do) are named as waiting,
/// and the timeout says so; ranks that compute are not.
#[test]
fn ranks_that_all_wait_are_named_as_waiting() {
    let args = [
        "run",
        "-n",
        "2",
        "--timeout",
        "3",
        "--set",
        "stall_warn_s=1",
        "sh",
        "-c",
        "sleep 30",
    ];
    let out = tandem(&args);
    assert_eq!(out.code(), Some(124), "{out:?}");
    assert!(
        out.stderr
            .contains("no rank has used the CPU for 1 s: all 2 running ranks are waiting"),
        "{out:?}"
    );
    assert!(out.stderr.contains("none using the CPU"), "{out:?}");
    let busy = [
        "run",
        "-n",
        "1",
        "--timeout",
        "2.5",
        "--set",
        "stall_warn_s=1",
        "sh",
        "-c",
        "while :; do :; done",
    ];
    let out = tandem(&busy);
    assert_eq!(out.code(), Some(124), "{out:?}");
    assert!(!out.stderr.contains("used the CPU"), "{out:?}");
}

/// A rank stopped by a signal is named as stopped after `stall_warn_s`
/// (the job waits for it: a scheduler may have suspended it), and again by
/// the timeout that ends the job; the running rank is not named.
#[test]
fn a_stopped_rank_is_named() {
    let marker = new_marker("stopped");
    let script = r#"if [ "$TANDEM_JOB_RANK" = 1 ]; then kill -STOP $$; fi; sleep 30"#;
    let args = [
        "run",
        "-n",
        "2",
        "--timeout",
        "2.5",
        "--set",
        "stall_warn_s=1",
        "sh",
        "-c",
        script,
    ];
    let out = tandem_marked(&args, &marker);
    assert_eq!(out.code(), Some(124), "{out:?}");
    // The rank waiting on the stopped one is not taken for a deadlock.
    assert!(!out.stderr.contains("used the CPU"), "{out:?}");
    assert!(
        out.stderr.contains("tandem: rank 1 (pid ")
            && out
                .stderr
                .contains("has been stopped (SIGSTOP, SIGTSTP or a debugger) for 1 s"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("rank 0 (pid "), "{out:?}");
    assert!(
        out.stderr
            .contains("tandem: job exceeded the timeout of 2.5 s (rank 1 is stopped)"),
        "{out:?}"
    );
    assert_nothing_left(&marker);
}

/// `MPIEXEC_TIMEOUT`, which MPICH's and Open MPI's launchers honour and
/// test suites set, limits the job when `--timeout` is not given; a bad
/// value is refused before anything starts.
#[test]
fn mpiexec_timeout_from_the_environment() {
    let marker = new_marker("mpiexec-timeout");
    let args = ["run", "-n", "2", "sh", "-c", "sleep 30"];
    let env = [(MARKER_VAR, marker.as_str()), ("MPIEXEC_TIMEOUT", "0.5")];
    let out = start(TANDEM, &args, &env, None).finish(Duration::from_secs(20));
    assert_timed_out(&out, &marker);

    // --timeout wins over the environment.
    let out = tandem_env(
        &["run", "-n", "1", "--timeout", "20", "sh", "-c", "sleep 1"],
        &[("MPIEXEC_TIMEOUT", "0.2")],
    );
    assert_eq!(out.code(), Some(0), "{out:?}");

    let out = tandem_env(&["run", "-n", "1", "true"], &[("MPIEXEC_TIMEOUT", "soon")]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("MPIEXEC_TIMEOUT='soon'"), "{out:?}");

    let out = tandem_env(&["run", "-n", "1", "true"], &[("MPIEXEC_TIMEOUT", "")]);
    assert_eq!(out.code(), Some(0), "{out:?}");
}

#[test]
fn sigterm_to_the_launcher_stops_everything() {
    let marker = new_marker("sigterm");
    let args = ["run", "-n", "3", "sh", "-c", "echo started; sleep 30"];
    let mut job = start(TANDEM, &args, &[(MARKER_VAR, &marker)], None);
    job.wait_for_lines("started", 3, Duration::from_secs(10));
    let launcher = job.child.id() as i32;
    // SAFETY: kill has no memory-safety preconditions; the pid is our child.
    unsafe {
        libc::kill(launcher, libc::SIGTERM);
    }
    let out = job.finish(Duration::from_secs(5));
    assert_eq!(out.code(), Some(128 + libc::SIGTERM), "{out:?}");
    assert!(out.stderr.contains("SIGTERM"), "{out:?}");
    assert_nothing_left(&marker);
}

// ---- the key-value service, with this binary as the ranks ----

/// Runs `scenario` as the ranks of a `tandem run -n <n>` job.
fn fake_job(n: u32, scenario: &str) -> Finished {
    let me = std::env::current_exe().unwrap();
    let n = n.to_string();
    let args = [
        "run",
        "-n",
        &n,
        "--timeout",
        "20",
        me.to_str().unwrap(),
        "fake_rank",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ];
    start(TANDEM, &args, &[(SCENARIO_VAR, scenario)], None).finish(Duration::from_secs(30))
}

/// Not a test on its own: the body of a rank started by `fake_job`.
#[test]
fn fake_rank() {
    let Ok(scenario) = std::env::var(SCENARIO_VAR) else {
        return;
    };
    let job = JobInfo::from_env().expect("job environment");
    let code = match scenario.as_str() {
        "kv" => kv_rank(&job),
        "no-finalize" => {
            let _link = MasterLink::connect(&job).expect("connect");
            if job.rank == 1 {
                0 // leave without FINALIZE
            } else {
                thread::sleep(Duration::from_secs(30));
                0
            }
        }
        "fence-alone" => {
            // Rank 1 is not an MPI program at all; rank 0 waits for it in a fence.
            if job.rank == 0 {
                let mut link = MasterLink::connect(&job).expect("connect");
                let _ = link.fence();
                thread::sleep(Duration::from_secs(30));
            }
            0
        }
        "abort" => {
            let mut link = MasterLink::connect(&job).expect("connect");
            if job.rank == 1 {
                link.abort(7, "out of cheese");
            }
            thread::sleep(Duration::from_secs(30));
            0
        }
        other => panic!("unknown scenario {other}"),
    };
    std::process::exit(code);
}

/// PUT, FENCE, GET, repeated fences and FINALIZE; rank 1 first checks that
/// bad clients are turned away without disturbing the job.
fn kv_rank(job: &JobInfo) -> i32 {
    assert_eq!(job.size, 3);
    assert_eq!(job.local_size, 3);
    assert!(job.id.len() > 4, "{}", job.id);
    let addr = job.master.clone().expect("launched by tandem");
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    if job.rank == 1 {
        let mut wrong = job.secret;
        wrong[0] ^= 1;
        assert_rejected(
            &addr,
            format!("HELLO {} 1\n", encode_secret(&wrong)).as_bytes(),
        );
        assert_rejected(&addr, b"GET key-0\n");
        assert_rejected(
            &addr,
            format!("HELLO {} 3\n", encode_secret(&job.secret)).as_bytes(),
        );
        assert_rejected(
            &addr,
            format!("HELLO {} 1 extra\n", encode_secret(&job.secret)).as_bytes(),
        );
        assert_rejected(&addr, &vec![b'A'; 70 * 1024]);
        println!("rank 1: bad clients rejected");
    }
    let mut link = MasterLink::connect(job).expect("connect");
    if job.rank == 1 {
        // A second HELLO for a rank already connected is refused too.
        assert_rejected(
            &addr,
            format!("HELLO {} 1\n", encode_secret(&job.secret)).as_bytes(),
        );
    }
    let me = job.rank;
    let next = (me + 1) % job.size;
    // Several rounds: fences repeat, and each round's values are seen by all.
    for round in 0..3 {
        link.put(&format!("key-{round}-{me}"), &format!("value-{round}-{me}"))
            .unwrap();
        link.fence().unwrap();
        let got = link.get(&format!("key-{round}-{next}")).unwrap();
        assert_eq!(got, Some(format!("value-{round}-{next}")));
        assert_eq!(link.get("no-such-key").unwrap(), None);
    }
    link.fence().unwrap();
    link.finalize().unwrap();
    println!("rank {me}: kv ok");
    0
}

/// Sends `bytes` on a new connection and expects the launcher to close it.
fn assert_rejected(addr: &str, bytes: &[u8]) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let mut reply = String::new();
    match BufReader::new(&stream).read_line(&mut reply) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the launcher to close the connection, got {other:?} {reply:?}"),
    }
}

#[test]
fn kv_service_put_fence_get_finalize() {
    let out = fake_job(3, "kv");
    assert_eq!(out.code(), Some(0), "{out:?}");
    for r in 0..3 {
        assert!(out.stdout.contains(&format!("rank {r}: kv ok")), "{out:?}");
    }
    assert!(
        out.stdout.contains("rank 1: bad clients rejected"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("tandem:"), "{out:?}");
}

#[test]
fn rank_leaving_without_finalize_is_reported() {
    let out = fake_job(2, "no-finalize");
    assert_eq!(out.code(), Some(1), "{out:?}");
    assert!(out.stderr.contains("tandem: rank 1 (pid "), "{out:?}");
    assert!(
        out.stderr.contains("exited without calling MPI_Finalize"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
}

#[test]
fn fence_that_can_never_complete_stops_the_job() {
    let out = fake_job(2, "fence-alone");
    assert_eq!(out.code(), Some(1), "{out:?}");
    assert!(
        out.stderr.contains("rank 1 (pid ") && out.stderr.contains("waiting for it in a fence"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
}

#[test]
fn abort_ends_the_job_with_its_code() {
    let out = fake_job(2, "abort");
    assert_eq!(out.code(), Some(7), "{out:?}");
    assert!(
        out.stderr
            .contains("tandem: rank 1 called MPI_Abort with error code 7: out of cheese"),
        "{out:?}"
    );
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
}

// ---- tandem cc and tandem info ----

/// A fake installation `<prefix>/{bin/tandem, lib/libmpi_abi.so, include/mpi.h}`.
struct FakePrefix(PathBuf);

impl FakePrefix {
    fn new(name: &str, with_library: bool) -> FakePrefix {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fake-prefix-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["bin", "lib", "include"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        // A hard link cannot be "busy"; copy only across file systems.
        if std::fs::hard_link(TANDEM, dir.join("bin/tandem")).is_err() {
            std::fs::copy(TANDEM, dir.join("bin/tandem")).unwrap();
        }
        std::fs::write(dir.join("include/mpi.h"), "").unwrap();
        if with_library {
            std::fs::write(dir.join("lib/libmpi_abi.so"), "").unwrap();
        }
        FakePrefix(dir.canonicalize().unwrap())
    }

    fn tandem(&self, args: &[&str], env: &[(&str, &str)]) -> Finished {
        let exe = self.0.join("bin/tandem");
        start(exe.to_str().unwrap(), args, env, None).finish(Duration::from_secs(20))
    }
}

impl Drop for FakePrefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn cc_showme_adds_include_and_library() {
    let prefix = FakePrefix::new("cc", true);
    let p = prefix.0.display();
    let out = prefix.tandem(&["cc", "--showme", "x.c", "-o", "x"], &[("TANDEM_CC", "")]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert_eq!(
        out.stdout.trim_end(),
        format!("cc -I{p}/include x.c -o x -L{p}/lib -Wl,-rpath,{p}/lib -lmpi_abi")
    );

    let out = prefix.tandem(&["cc", "--showme", "-c", "x.c"], &[("TANDEM_CC", "")]);
    assert_eq!(
        out.stdout.trim_end(),
        format!("cc -I{p}/include -c x.c"),
        "{out:?}"
    );

    let out = prefix.tandem(
        &["cxx", "--showme", "x.cc"],
        &[("TANDEM_CXX", "g++ -std=c++17")],
    );
    assert!(
        out.stdout
            .starts_with(&format!("g++ -std=c++17 -I{p}/include x.cc ")),
        "{out:?}"
    );
}

#[test]
fn cc_exit_status_is_the_compilers() {
    let prefix = FakePrefix::new("cc-status", true);
    assert_eq!(
        prefix
            .tandem(&["cc", "x.c"], &[("TANDEM_CC", "true")])
            .code(),
        Some(0)
    );
    assert_eq!(
        prefix
            .tandem(&["cc", "x.c"], &[("TANDEM_CC", "false")])
            .code(),
        Some(1)
    );
    let out = prefix.tandem(
        &["cc", "x.c"],
        &[("TANDEM_CC", "no-such-compiler-for-tandem")],
    );
    assert_eq!(out.code(), Some(127), "{out:?}");
    assert!(
        out.stderr.contains("no-such-compiler-for-tandem"),
        "{out:?}"
    );
}

#[test]
fn cc_without_a_library_is_a_clear_error() {
    let prefix = FakePrefix::new("cc-missing", false);
    let out = prefix.tandem(&["cc", "--showme", "x.c"], &[]);
    assert_eq!(out.code(), Some(1), "{out:?}");
    assert!(out.stderr.contains("libmpi_abi.so"), "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("{}/lib/libmpi_abi.so", prefix.0.display())),
        "{out:?}"
    );
}

#[test]
fn info_lists_every_parameter() {
    let out = tandem_env(&["info"], &[("TANDEM_SPIN_US", "7")]);
    assert_eq!(out.code(), Some(0), "{out:?}");
    assert!(out.stdout.contains(env!("CARGO_PKG_VERSION")), "{out:?}");
    assert!(out.stdout.contains("MPI 5.0"), "{out:?}");
    assert!(out.stdout.contains("tcp"), "{out:?}");
    for p in tandem::params::REGISTRY {
        let row = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{} ", p.name)));
        let row = row.unwrap_or_else(|| panic!("no row for {}: {out:?}", p.name));
        assert!(row.contains(&p.type_name()), "{row}");
        assert!(out.stdout.contains(p.help), "{out:?}");
    }
    let spin = out
        .stdout
        .lines()
        .find(|l| l.starts_with("spin_us "))
        .unwrap();
    assert!(
        spin.contains(" 7 ") && spin.ends_with("environment"),
        "{spin}"
    );

    let json = tandem(&["info", "--json"]);
    assert_eq!(json.code(), Some(0), "{json:?}");
    for p in tandem::params::REGISTRY {
        assert!(
            json.stdout.contains(&format!("{{\"name\": \"{}\"", p.name)),
            "{json:?}"
        );
    }
    assert!(json.stdout.trim_start().starts_with('{') && json.stdout.trim_end().ends_with('}'));
}

#[test]
fn info_reports_bad_environment() {
    let out = tandem_env(&["info"], &[("TANDEM_SPIN_US", "fast")]);
    assert_eq!(out.code(), Some(1), "{out:?}");
    assert!(out.stderr.contains("spin_us"), "{out:?}");
    assert!(out.stdout.contains("eager_limit"), "{out:?}");
}

#[test]
fn unknown_subcommand_is_an_error() {
    let out = tandem(&["frobnicate"]);
    assert_eq!(out.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("frobnicate"), "{out:?}");
}

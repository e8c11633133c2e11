//! Helpers for integration tests that build C programs with `tandem cc` and
//! run them as jobs with `tandem run`.
//!
//! * [`compile`] builds `tests/c/<name>.c` once per test process (concurrent
//!   callers wait for the one build) into `$CARGO_TARGET_TMPDIR/ctests/`.
//! * [`run`] runs `tandem run -n NP [extra args] PROGRAM [args]` under a hard
//!   deadline. Every job carries a marker variable in its environment, which
//!   the ranks inherit, so whatever is left of a job afterwards can be found
//!   in `/proc`, reported (as [`Outcome::leftovers`]) and killed.
//! * [`assert_pass`] checks the self-checking programs' convention: exit
//!   status 0 and a `PASS <name>` line.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The `tandem` binary under test.
pub const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

/// Deadline for an ordinary job.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// Environment variable that marks the processes of one job. Not `TANDEM_*`:
/// the launcher treats those as parameters and rejects unknown ones.
const MARKER_VAR: &str = "MPI_P2P_TEST_MARKER";

/// How long the processes of a job that has ended may take to disappear.
const LEFTOVER_GRACE: Duration = Duration::from_secs(1);

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Where compiled test programs go.
pub fn ctests_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ctests")
}

/// The outcome of a build, shared by every test that needs the program.
type Build = Arc<Mutex<Option<Result<PathBuf, String>>>>;

fn builds() -> &'static Mutex<HashMap<String, Build>> {
    static BUILDS: OnceLock<Mutex<HashMap<String, Build>>> = OnceLock::new();
    BUILDS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Compiles `tests/c/<name>.c` with `tandem cc -O2 -Wall` (once per test
/// process) and returns the executable; panics with the compiler's output if
/// that fails.
pub fn compile(name: &str) -> PathBuf {
    let src = repo_root().join("tests/c").join(format!("{name}.c"));
    compile_source(&src, name)
}

/// Compiles the C file `src` into `ctests/<out_name>` (once per test process
/// and `out_name`).
pub fn compile_source(src: &Path, out_name: &str) -> PathBuf {
    let build = {
        let mut map = builds().lock().unwrap_or_else(|e| e.into_inner());
        map.entry(out_name.to_string()).or_default().clone()
    };
    let mut slot = build.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        *slot = Some(build_program(src, out_name));
    }
    match slot.as_ref() {
        Some(Ok(path)) => path.clone(),
        Some(Err(message)) => panic!("{message}"),
        None => unreachable!("the build result was just stored"),
    }
}

fn build_program(src: &Path, out_name: &str) -> Result<PathBuf, String> {
    let dir = ctests_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let out = dir.join(out_name);
    // Built under a temporary name and renamed, so that a half-written file
    // is never run.
    let tmp = dir.join(format!("{out_name}.tmp{}", std::process::id()));
    let mut cmd = Command::new(TANDEM);
    cmd.args(["cc", "-O2", "-Wall", "-o"])
        .arg(&tmp)
        .arg(src)
        .stdin(Stdio::null());
    let shown = format!("tandem cc -O2 -Wall -o {} {}", out.display(), src.display());
    let output = cmd
        .output()
        .map_err(|e| format!("cannot start `{shown}`: {e}"))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "`{shown}` failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            output.status,
            text(&output.stdout),
            text(&output.stderr)
        ));
    }
    if !output.stderr.is_empty() {
        eprintln!("`{shown}` printed:\n{}", text(&output.stderr));
    }
    std::fs::rename(&tmp, &out).map_err(|e| format!("cannot rename {}: {e}", tmp.display()))?;
    Ok(out)
}

/// A finished job.
pub struct Outcome {
    /// How `tandem run` (or the program run directly) ended.
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From the start to the end of the launcher.
    pub elapsed: Duration,
    /// Wall-clock time at which the launcher's end was seen.
    pub ended_at: SystemTime,
    /// Processes of the job still alive [`LEFTOVER_GRACE`] after the
    /// launcher ended (they have been killed since).
    pub leftovers: Vec<u32>,
    /// The command line, for messages.
    pub command: String,
}

impl Outcome {
    /// The exit code, `None` if killed by a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// stdout followed by stderr.
    pub fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Whether stdout has a line `line`, allowing a `[rank] ` prefix as
    /// `tandem run --tag-output` writes it.
    pub fn has_line(&self, line: &str) -> bool {
        self.stdout.lines().any(|l| {
            let l = l.trim_end();
            let l = match (l.starts_with('['), l.find("] ")) {
                (true, Some(i)) => &l[i + 2..],
                _ => l,
            };
            l == line
        })
    }

    /// Everything about the run, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "command: {}\nstatus: {}, after {:.2?}{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command,
            self.status,
            self.elapsed,
            if self.leftovers.is_empty() {
                String::new()
            } else {
                format!(
                    "\nprocesses still alive {LEFTOVER_GRACE:?} after the end (killed): {:?}",
                    self.leftovers
                )
            },
            self.stdout,
            self.stderr
        )
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Runs `tandem run -n np [extra_args] prog [args]`; see [`run_command`].
pub fn run(np: u32, extra_args: &[&str], prog: &Path, args: &[&str], timeout: Duration) -> Outcome {
    let mut cmd = Command::new(TANDEM);
    cmd.arg("run")
        .arg("-n")
        .arg(np.to_string())
        .args(extra_args)
        .arg(prog)
        .args(args);
    run_command(cmd, timeout)
}

/// Runs `cmd` with stdin closed and its output collected. If it has not ended
/// after `timeout`, it is killed with SIGKILL, every process of the job is
/// killed too, and the test fails. After the end, processes of the job that
/// do not disappear within a second are killed and listed in
/// [`Outcome::leftovers`].
pub fn run_command(mut cmd: Command, timeout: Duration) -> Outcome {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let marker = format!(
        "{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    );
    let command = describe_command(&cmd);
    cmd.env(MARKER_VAR, &marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = spawn_retrying(&mut cmd, &command);
    let stdout = collect(child.stdout.take().expect("piped stdout"));
    let stderr = collect(child.stderr.take().expect("piped stderr"));

    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => panic!("waiting for `{command}`: {e}"),
        }
        if started.elapsed() >= timeout {
            let _ = child.kill();
            let status = child.wait().ok();
            let killed = kill_marked(&marker);
            let out = stdout.finish(Duration::from_secs(5));
            let err = stderr.finish(Duration::from_secs(5));
            panic!(
                "`{command}` did not finish within {timeout:?}: killed it ({status:?}) and {} process(es) of the \
                 job {killed:?}\n--- stdout ---\n{out}\n--- stderr ---\n{err}",
                killed.len()
            );
        }
        thread::sleep(Duration::from_millis(5));
    };
    let ended_at = SystemTime::now();
    let elapsed = started.elapsed();

    let leftovers = wait_marked_gone(&marker, LEFTOVER_GRACE);
    let stdout = stdout.finish(Duration::from_secs(5));
    let stderr = stderr.finish(Duration::from_secs(5));
    Outcome {
        status,
        stdout,
        stderr,
        elapsed,
        ended_at,
        leftovers,
        command,
    }
}

/// Fails the test unless the job exited 0, printed `PASS <name>`, printed no
/// FAIL line and left no process behind.
pub fn assert_pass(outcome: &Outcome, name: &str) {
    let want = format!("PASS {name}");
    let mut problems = Vec::new();
    if !outcome.status.success() {
        problems.push(format!("{} (expected exit status 0)", outcome.status));
    }
    if !outcome.has_line(&want) {
        problems.push(format!("no line \"{want}\" on stdout"));
    }
    if outcome.output().contains(": FAIL ") {
        problems.push("a FAIL line was printed".to_string());
    }
    if !outcome.leftovers.is_empty() {
        problems.push(format!(
            "processes left after the job: {:?}",
            outcome.leftovers
        ));
    }
    assert!(
        problems.is_empty(),
        "{name}: {}\n{}",
        problems.join("; "),
        outcome.describe()
    );
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The pids the ranks printed as `rank R pid P` lines.
pub fn printed_pids(stdout: &str) -> Vec<u32> {
    stdout
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "pid")?;
            if at >= 2 && words[at - 2] == "rank" {
                words.get(at + 1)?.parse().ok()
            } else {
                None
            }
        })
        .collect()
}

/// Whether `text` mentions rank `rank` ("rank 1" not followed by a digit).
pub fn mentions_rank(text: &str, rank: u32) -> bool {
    let needle = format!("rank {rank}");
    text.to_ascii_lowercase()
        .match_indices(&needle)
        .any(|(i, _)| {
            !text[i + needle.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
}

fn describe_command(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// Spawns `cmd`, retrying while the executable is busy (ETXTBSY: a file
/// just written may still be open in a child forked meanwhile by another
/// test thread, until that child execs).
fn spawn_retrying(cmd: &mut Command, shown: &str) -> Child {
    for _ in 0..100 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("cannot start `{shown}`: {e}"),
            Ok(child) => return child,
        }
    }
    panic!("cannot start `{shown}`: the executable stayed busy");
}

/// Output of a pipe, read on its own thread as it comes.
struct Collector {
    data: Arc<Mutex<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

fn collect(mut pipe: impl Read + Send + 'static) -> Collector {
    let data = Arc::new(Mutex::new(Vec::new()));
    let (tx, done) = std::sync::mpsc::channel();
    let sink = Arc::clone(&data);
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => sink
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    Collector { data, done }
}

impl Collector {
    /// What was read, after waiting up to `limit` for the end of the pipe
    /// (a stray process may hold it open).
    fn finish(self, limit: Duration) -> String {
        let _ = self.done.recv_timeout(limit);
        let data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&data).into_owned()
    }
}

/// Live (not zombie) processes whose environment carries the marker.
fn marked_processes(marker: &str) -> Vec<u32> {
    let needle = format!("{MARKER_VAR}={marker}\0").into_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_slice()))
        })
        .filter(|&pid| alive(pid))
        .collect()
}

/// Kills every process of the job with SIGKILL; returns their pids.
fn kill_marked(marker: &str) -> Vec<u32> {
    let mut killed = Vec::new();
    // A process may start another while we look: a few passes.
    for _ in 0..5 {
        let found = marked_processes(marker);
        if found.is_empty() {
            break;
        }
        for pid in found {
            // SAFETY: kill(2) with a pid read from /proc just now; the
            // environment marker makes it one of this job's processes.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    killed
}

/// Waits up to `grace` for the job's processes to go; kills and returns
/// those still there.
fn wait_marked_gone(marker: &str, grace: Duration) -> Vec<u32> {
    let deadline = Instant::now() + grace;
    loop {
        if marked_processes(marker).is_empty() {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            return kill_marked(marker);
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The counters of each rank a job printed with `--set stats=json`, by rank.
pub fn counters(stdout: &str) -> Vec<serde_json::Value> {
    let mut rows: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "counters")
        .collect();
    rows.sort_by_key(|v| v["rank"].as_u64());
    rows
}

/// Counter `name` of one rank's row (see [`counters`]).
pub fn field(v: &serde_json::Value, name: &str) -> u64 {
    v[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {v}"))
}

/// Counter `name` summed over every rank a job printed (see [`counters`]).
pub fn counter_total(stdout: &str, name: &str) -> u64 {
    counters(stdout).iter().map(|v| field(v, name)).sum()
}

/// Configures tests/cmake-ctest (a C and C++ project with ctest tests) in
/// `build` with `cmake_args` and `PATH` led by `path_first`, builds it and
/// runs ctest; panics unless FindMPI took Tandem's mpiexec from
/// `want_mpiexec` and its library for both languages from `want_lib`, and
/// every test passed. `None` when cmake is not installed.
pub fn cmake_ctest(
    build: &Path,
    cmake_args: &[String],
    path_first: Option<&Path>,
    want_mpiexec: &Path,
    want_lib: &Path,
) -> Option<()> {
    let have_cmake = Command::new("cmake")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_cmake {
        eprintln!("SKIP: cmake is not installed (scripts/setup.sh installs it)");
        return None;
    }
    let path = match path_first {
        Some(dir) => format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        None => std::env::var("PATH").unwrap_or_default(),
    };
    let step = |cmd: &mut Command| -> String {
        let out = cmd
            .env("PATH", &path)
            .env_remove("MPI_HOME")
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{cmd:?} failed:\n{text}");
        text
    };
    let configured = step(
        Command::new("cmake")
            .arg("-S")
            .arg(repo_root().join("tests/cmake-ctest"))
            .arg("-B")
            .arg(build)
            .args(cmake_args),
    );
    assert!(
        configured.contains(&format!("MPIEXEC_EXECUTABLE: {}", want_mpiexec.display())),
        "FindMPI took another mpiexec:\n{configured}"
    );
    for lang in ["MPI_C", "MPI_CXX"] {
        assert!(
            configured.contains(&format!(
                "Found {lang}: {}/libmpi_abi.so",
                want_lib.display()
            )),
            "FindMPI took another library for {lang}:\n{configured}"
        );
    }
    step(Command::new("cmake").arg("--build").arg(build));
    let tested = step(
        Command::new("ctest")
            .arg("--output-on-failure")
            .current_dir(build),
    );
    assert!(tested.contains("100% tests passed"), "{tested}");
    Some(())
}

/// A fresh, empty directory for test `name`, outside the checkout (so that
/// what a test builds there cannot lean on the build tree by accident).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether `tool --version` runs.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `cmd`, which must succeed; returns its stdout.
pub fn must(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

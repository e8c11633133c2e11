//! Launching a built kernel and reading its records (one JSON object per
//! line on stdout), with its progress shown (see [`super::progress`]).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::core_latency;
use super::mpi::{Library, Placement, Transport};

/// One launch of a kernel.
pub struct Launch<'a> {
    pub lib: &'a Library,
    pub program: &'a Path,
    pub np: u32,
    /// Kernel parameters (NAME=VALUE words for the program).
    pub kernel_args: Vec<String>,
    /// Library parameters.
    pub lib_set: Vec<(String, String)>,
    pub transport: Transport,
    pub timeout: Duration,
    /// Shown before the progress bar.
    pub label: String,
    pub progress: bool,
    /// Ranks on other hosts (Tandem only).
    pub placement: Option<&'a Placement>,
}

/// What a launch produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutput {
    pub mpi: String,
    /// The library's own version line (MPI_Get_library_version, first line).
    pub library_version: String,
    pub mpi_version: String,
    pub np: u32,
    pub transport: String,
    pub command: String,
    pub kernel_args: Vec<String>,
    pub seconds: f64,
    /// Measurement records (every record but start/plan/progress/end).
    pub records: Vec<Value>,
    /// A cache line's round trip between the first two CPUs just before
    /// and just after the launch, in nanoseconds (see
    /// [`super::core_latency`]); empty for launches across hosts or where
    /// it could not be measured.
    pub core_round_trip_ns: Vec<f64>,
    /// The library whose kernel the same launch timed too, batch for
    /// batch (see [`super::RunSpec::shared_pair`]); its run is listed
    /// beside this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_with: Option<String>,
    /// What Tandem's launcher said on stderr of a launch that succeeded
    /// (its `tandem: ...` lines), such as a replica lost and the job going
    /// on without it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub launcher_notes: Vec<String>,
}

/// The launcher's own lines in a job's stderr.
fn launcher_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with("tandem: "))
        .map(|l| l.trim_end().to_string())
        .collect()
}

fn shell_words(argv: &[std::ffi::OsString], env: &[(String, String)]) -> String {
    let mut words: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    words.extend(argv.iter().map(|w| {
        let t = w.to_string_lossy();
        if t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c))
            && !t.is_empty()
        {
            t.into_owned()
        } else {
            format!("'{}'", t.replace('\'', r"'\''"))
        }
    }));
    words.join(" ")
}

/// Runs the kernel to its end; an error carries the job's output.
pub fn launch(l: &Launch) -> Result<RunOutput, String> {
    let (argv, env) = l.lib.launch_command(
        l.np,
        &l.lib_set,
        &l.transport,
        l.program,
        &l.kernel_args,
        l.placement,
    );
    let command = shell_words(&argv, &env);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if l.placement.is_some() {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: child_defaults makes only async-signal-safe calls
        // (sigprocmask, prctl), as code between fork and exec must.
        unsafe {
            cmd.pre_exec(|| crate::netns::child_defaults());
        }
    }
    let local = l.placement.is_none();
    let mut core_round_trip_ns: Vec<f64> = Vec::new();
    if local {
        core_round_trip_ns.extend(core_latency::probe());
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_thread = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel::<String>();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });

    let bar = if l.progress {
        super::progress::launch_bar(&l.label)
    } else {
        None
    };

    let mut records = Vec::new();
    let mut other = Vec::new();
    let mut library_version = String::new();
    let mut mpi_version = String::new();
    let mut error: Option<String> = None;
    let mut ended = false;
    let mut timed_out = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let v: Option<Value> = if line.trim_start().starts_with('{') {
                    serde_json::from_str(line.trim()).ok()
                } else {
                    None
                };
                let Some(v) = v else {
                    other.push(line);
                    continue;
                };
                match v.get("type").and_then(Value::as_str) {
                    Some("start") => {
                        library_version = v
                            .get("library")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .lines()
                            .next()
                            .unwrap_or("")
                            .trim()
                            .to_string();
                        mpi_version = v
                            .get("mpi_version")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                    }
                    Some("plan") => {
                        if let (Some(b), Some(n)) = (&bar, v.get("steps").and_then(Value::as_u64)) {
                            b.set_length(n.max(1));
                        }
                    }
                    Some("progress") => {
                        if let Some(b) = &bar {
                            b.inc(1);
                            b.set_message(
                                v.get("what")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                            );
                        }
                    }
                    Some("end") => ended = true,
                    Some("error") => {
                        if error.is_none() {
                            error = Some(
                                v.get("message")
                                    .and_then(Value::as_str)
                                    .unwrap_or("?")
                                    .to_string(),
                            );
                        }
                    }
                    _ => records.push(v),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if started.elapsed() > l.timeout {
                    timed_out = true;
                    stop(&mut child);
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for `{command}`: {e}"))?;
    if l.progress {
        super::progress::launch_done(bar.clone());
    }
    let err_text = err_thread.join().unwrap_or_default();
    let seconds = started.elapsed().as_secs_f64();
    let details = || {
        let mut d = String::new();
        if !other.is_empty() {
            d.push_str("\n--- output ---\n");
            d.push_str(&other.join("\n"));
        }
        if !err_text.trim().is_empty() {
            d.push_str("\n--- errors ---\n");
            d.push_str(err_text.trim_end());
        }
        d
    };
    if timed_out {
        return Err(format!(
            "`{command}` did not finish within {:?} and was stopped (raise --timeout){}",
            l.timeout,
            details()
        ));
    }
    if let Some(e) = error {
        return Err(format!("{}: {e} (`{command}`){}", l.lib.name, details()));
    }
    if !status.success() || !ended {
        return Err(format!(
            "`{command}` failed ({status}{}){}",
            if ended { "" } else { ", no end record" },
            details()
        ));
    }
    if local {
        core_round_trip_ns.extend(core_latency::probe());
    }
    Ok(RunOutput {
        mpi: l.lib.name.clone(),
        library_version,
        mpi_version,
        np: l.np,
        transport: l.transport.name().to_string(),
        command,
        kernel_args: l.kernel_args.clone(),
        seconds,
        records,
        core_round_trip_ns,
        shared_with: None,
        launcher_notes: launcher_lines(&err_text),
    })
}

/// Asks the launcher to stop (SIGTERM, which every launcher forwards to its
/// ranks), then kills it if it does not go within 3 s.
fn stop(child: &mut std::process::Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on the pid of our own child, which has not been
    // waited for, so the pid cannot have been reused.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
}

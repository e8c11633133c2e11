//! `tandem _host HOST`: the per-host helper of a job across hosts.
//!
//! The master starts one per remote host through the agent (`ssh HOST
//! tandem _host HOST`, `ip netns exec HOST tandem _host HOST`, ...). It
//! reads the job from its stdin (see `channel`), finds which of the
//! master's addresses it can reach, creates this host's shared-memory
//! resources, starts the host's ranks (each in its own process group, with
//! PR_SET_PDEATHSIG), forwards their output and exit statuses on its stdout,
//! and obeys the master's signals. When its stdin closes — the master is
//! gone — or it is itself told to stop, it kills every rank at once: no
//! rank outlives its job.

use std::ffi::{OsStr, OsString};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use tandem::bootstrap::env as job_env;
use tandem::params::Settings;
use tandem::transport::shm::env as shm_env;

use super::channel::{encode, Decoder, Record};
use super::host_setup;
use super::job::{os_error_text, spawn_error};
use super::signals::{SignalQueue, STOP_SIGNALS};
use super::stopped::{self, StopWatch};
use super::supervise::{self, App, RankCommand, Termination};
use crate::{parameters, sys};

/// Time for the ranks to go after SIGKILL before the helper leaves anyway.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// What the master sent.
#[derive(Default)]
struct Spec {
    size: u32,
    hosts: u32,
    id: String,
    secret: String,
    connect_timeout: Duration,
    masters: Vec<String>,
    ranks: Vec<u32>,
    /// The job's programs (MPMD: several).
    apps: Vec<App>,
    env: Vec<(String, String)>,
    cwd: Option<OsString>,
    /// The processes here that read the master's stdin: world rank 0 (in a
    /// replicated job, its replicas here).
    stdin: Vec<u32>,
}

struct Rank {
    rank: u32,
    pid: libc::pid_t,
    running: bool,
    /// stdout and stderr pipes, until EOF.
    pipes: [Option<std::os::fd::OwnedFd>; 2],
}

/// Writes a record to the master; false when the master is gone.
fn send(words: &[&str], payload: &[u8]) -> bool {
    sys::write_all(libc::STDOUT_FILENO, &encode(words, payload)).is_ok()
}

fn fail(status: i32, message: &str) -> i32 {
    send(&["fail", &status.to_string()], message.as_bytes());
    status
}

/// Runs the helper; returns its exit status.
pub fn main(host: &str) -> i32 {
    let mut decoder = Decoder::default();
    let spec = match read_spec(&mut decoder) {
        Ok(Some(spec)) => spec,
        Ok(None) => return 1, // the master went away before sending the job
        Err(msg) => return fail(1, &format!("host {host}: {msg}")),
    };
    let (master, node_addr) = match probe_master(&spec) {
        Ok(found) => found,
        Err(msg) => return fail(1, &format!("host {host}: {msg}")),
    };
    let signals = match SignalQueue::open() {
        Ok(s) => s,
        Err(e) => return fail(1, &format!("host {host}: signal handling: {e}")),
    };
    supervise::become_subreaper();
    if let Some(dir) = &spec.cwd {
        // As mpirun does: ranks start where the master was, if that exists here.
        let _ = std::env::set_current_dir(dir);
    }
    let local_size = spec.ranks.len() as u32;
    let mut env = spec.env.clone();
    env.extend([
        (job_env::SIZE.to_string(), spec.size.to_string()),
        (job_env::LOCAL_SIZE.to_string(), local_size.to_string()),
        (job_env::ADDR.to_string(), master.to_string()),
        (job_env::ID.to_string(), spec.id.clone()),
        (job_env::HOSTS.to_string(), spec.hosts.to_string()),
        (job_env::NODE_ADDR.to_string(), node_addr.clone()),
    ]);
    let settings = match host_settings(&env) {
        Ok(s) => s,
        Err(msg) => return fail(1, &format!("host {host}: {msg}")),
    };
    env.extend(host_setup::rseq_tunables(&settings, local_size, &env));
    let command = RankCommand {
        apps: spec.apps.clone(),
        env,
        env_remove: parameters::TOOL_VARS
            .iter()
            .map(|s| s.to_string())
            .collect(),
        original_fd_limit: sys::raise_fd_limit(4 * u64::from(local_size) + 256),
        secret: spec.secret.clone(),
    };
    let shm = match host_setup::shared_memory(local_size, &settings) {
        Ok(s) => s,
        Err(msg) => return fail(1, &format!("host {host}: {msg}")),
    };
    // Replicas of every rank (processes count them; see bootstrap.rs).
    let replicas = command
        .env
        .iter()
        .find(|(k, _)| k == job_env::REPLICAS)
        .and_then(|(_, v)| v.parse::<u32>().ok())
        .filter(|&r| r >= 1 && spec.size.is_multiple_of(r))
        .unwrap_or(1);
    let mut ranks = Vec::new();
    let mut rank0_stdin = Vec::new();
    for (local, &rank) in spec.ranks.iter().enumerate() {
        let mut rank_env = vec![(job_env::RANK.to_string(), rank.to_string())];
        match &shm {
            Some(h) => rank_env.extend(h.env(local as u32)),
            // Without a segment a rank still learns its place on the host
            // (it chooses its CPU by it).
            None => rank_env.push((shm_env::LOCAL_RANK.to_string(), local.to_string())),
        }
        let logical = spec.size / replicas;
        rank_env.extend(supervise::conventional_env(
            rank % logical,
            logical,
            local as u32,
            local_size,
        ));
        let (appnum, app) = command.app_of(rank % logical);
        rank_env.push((job_env::APPNUM.to_string(), appnum.to_string()));
        match supervise::spawn_rank(&command, app, &rank_env, spec.stdin.contains(&rank)) {
            Ok(s) => {
                for fd in [&s.stdout, &s.stderr] {
                    let _ = sys::set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(fd));
                }
                if let Some(p) = s.stdin {
                    if sys::set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(&p)).is_ok() {
                        rank0_stdin.push(StdinPipe {
                            rank,
                            fd: p,
                            written: 0,
                        });
                    }
                }
                send(&["pid", &rank.to_string(), &s.pid.to_string()], b"");
                ranks.push(Rank {
                    rank,
                    pid: s.pid,
                    running: true,
                    pipes: [Some(s.stdout), Some(s.stderr)],
                });
            }
            Err(e) => {
                let (msg, code) = spawn_error(rank, &app.program, &e);
                let msg = msg.trim_start_matches("tandem: ").to_string();
                kill_all(&ranks);
                return fail(code, &format!("host {host}: {msg}"));
            }
        }
    }
    drop(shm);
    let stop_watch = StopWatch::new(stopped::limit(&settings, replicas > 1));
    if !send(&["ready", &node_addr], b"") {
        kill_all(&ranks);
        return 1;
    }
    Helper {
        ranks,
        signals,
        decoder,
        buf: vec![0u8; 64 * 1024],
        stdin: rank0_stdin,
        stdin_pending: Vec::new(),
        stdin_eof: false,
        stop_watch,
        command,
        settings,
    }
    .run()
}

/// Reads records up to `start`; `None` at EOF.
fn read_spec(decoder: &mut Decoder) -> Result<Option<Spec>, String> {
    let mut spec = Spec {
        connect_timeout: Duration::from_secs(10),
        ..Spec::default()
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while let Some(r) = decoder.next_record()? {
            let bad = || format!("malformed '{}' record from the master", r.kind());
            match r.kind() {
                "job" => {
                    spec.size = r.num(1).ok_or_else(bad)?;
                    spec.hosts = r.num(2).ok_or_else(bad)?;
                    spec.id = r.words.get(3).cloned().ok_or_else(bad)?;
                    spec.secret = r.words.get(4).cloned().ok_or_else(bad)?;
                    let ms: u64 = r.num(5).ok_or_else(bad)?;
                    spec.connect_timeout = Duration::from_millis(ms.max(1));
                }
                "master" => spec.masters.push(r.words.get(1).cloned().ok_or_else(bad)?),
                "rank" => spec.ranks.push(r.num(1).ok_or_else(bad)?),
                // `program [RANKS]` starts the next program (MPMD: the
                // last one runs the rest of the ranks); `arg`s follow it.
                "program" => spec.apps.push(App {
                    ranks: match r.words.get(1) {
                        None => u32::MAX,
                        Some(_) => r.num(1).ok_or_else(bad)?,
                    },
                    program: OsStr::from_bytes(&r.payload).to_os_string(),
                    args: Vec::new(),
                    wdir: None,
                }),
                "arg" => spec
                    .apps
                    .last_mut()
                    .ok_or_else(bad)?
                    .args
                    .push(OsStr::from_bytes(&r.payload).to_os_string()),
                "cwd" => spec.cwd = Some(OsStr::from_bytes(&r.payload).to_os_string()),
                // `stdin`: world rank 0; `stdin <rank>`: that process (a
                // replica of rank 0).
                "stdin" => match r.words.get(1) {
                    None => spec.stdin.push(0),
                    Some(_) => spec.stdin.push(r.num(1).ok_or_else(bad)?),
                },
                "env" => {
                    let text = r.text();
                    let (k, v) = text.split_once('=').ok_or_else(bad)?;
                    spec.env.push((k.to_string(), v.to_string()));
                }
                "start" => {
                    if spec.size == 0
                        || spec.ranks.is_empty()
                        || spec.masters.is_empty()
                        || spec.apps.is_empty()
                    {
                        return Err("incomplete job from the master".into());
                    }
                    return Ok(Some(spec));
                }
                other => return Err(format!("unexpected '{other}' record from the master")),
            }
        }
        match sys::read_fd(libc::STDIN_FILENO, &mut buf) {
            Ok(sys::ReadOutcome::Data(n)) => decoder.push(&buf[..n]),
            Ok(sys::ReadOutcome::WouldBlock) => {
                let mut fds = [libc::pollfd {
                    fd: libc::STDIN_FILENO,
                    events: libc::POLLIN,
                    revents: 0,
                }];
                let _ = sys::poll(&mut fds, None);
            }
            Ok(sys::ReadOutcome::Eof) | Err(_) => return Ok(None),
        }
    }
}

/// The first of the master's addresses this host can reach, and this
/// host's address on that connection.
fn probe_master(spec: &Spec) -> Result<(SocketAddr, String), String> {
    let mut tried = Vec::new();
    for text in &spec.masters {
        let Ok(addr) = text.parse::<SocketAddr>() else {
            tried.push(format!("{text} (malformed)"));
            continue;
        };
        match TcpStream::connect_timeout(&addr, spec.connect_timeout) {
            Ok(s) => match is_our_master(&s, &spec.secret, spec.connect_timeout) {
                Ok(()) => match s.local_addr() {
                    Ok(local) => return Ok((addr, local.ip().to_string())),
                    Err(e) => tried.push(format!("{addr} ({e})")),
                },
                Err(why) => tried.push(format!("{addr} ({why})")),
            },
            Err(e) => tried.push(format!(
                "{addr} ({}: {})",
                os_error_text(&e),
                tandem::transport::tcp::likely_cause(&e)
            )),
        }
    }
    Err(format!(
        "cannot reach the launcher at any of its addresses within {} s each: {}",
        spec.connect_timeout.as_secs_f64(),
        tried.join("; ")
    ))
}

/// Asks the service at the other end of `s` whether it is this job's
/// master (another program may listen at an address that, from this host,
/// names a different machine).
fn is_our_master(mut s: &TcpStream, secret: &str, timeout: Duration) -> Result<(), String> {
    use std::io::{Read, Write};
    let _ = s.set_read_timeout(Some(timeout));
    s.write_all(format!("PING {secret}\n").as_bytes())
        .map_err(|e| format!("cannot talk to it: {e}"))?;
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while reply.len() < 16 {
        match s.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => reply.push(byte[0]),
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("no answer: {e}")),
        }
    }
    if reply == b"PONG" {
        Ok(())
    } else {
        Err("something else answers there, not this job's launcher".into())
    }
}

/// The parameters of the job as this host's ranks will see them.
fn host_settings(env: &[(String, String)]) -> Result<Settings, String> {
    let mut vars = Vec::new();
    for (k, v) in parameters::parameter_vars() {
        vars.push((k, v?));
    }
    vars.extend(
        env.iter()
            .filter(|(k, _)| {
                k.starts_with(tandem::params::ENV_PREFIX)
                    && !k.starts_with(tandem::params::JOB_ENV_PREFIX)
            })
            .cloned(),
    );
    Settings::from_vars(vars)
}

fn kill_all(ranks: &[Rank]) {
    for r in ranks.iter().filter(|r| r.running) {
        sys::signal_group(r.pid, libc::SIGKILL);
    }
}

/// The stdin of a process that reads the master's, and how much of the
/// input pending it has taken.
struct StdinPipe {
    rank: u32,
    fd: std::os::fd::OwnedFd,
    written: usize,
}

struct Helper {
    ranks: Vec<Rank>,
    signals: SignalQueue,
    decoder: Decoder,
    buf: Vec<u8>,
    /// Rank 0's stdin (each of its replicas' here), input for them not
    /// written yet by all, and whether the master's stdin has ended.
    stdin: Vec<StdinPipe>,
    stdin_pending: Vec<u8>,
    stdin_eof: bool,
    /// Ranks stopped too long are reported to the master, which decides.
    stop_watch: Option<StopWatch>,
    /// What starts a process here, and the job's parameters: for the
    /// processes of spawned worlds the master places here.
    command: RankCommand,
    settings: Settings,
}

enum Step {
    Go,
    /// The master is gone (or we were told to stop): kill everything.
    Abandon,
}

impl Helper {
    fn run(mut self) -> i32 {
        // Commands that came with the job (read along with it) go first.
        if let Step::Abandon = self.obey_buffered() {
            return self.abandon();
        }
        loop {
            let busy = self
                .ranks
                .iter()
                .any(|r| r.running || r.pipes.iter().any(Option::is_some));
            if !busy {
                self.reap_leftovers();
                send(&["done"], b"");
                return 0;
            }
            let mut fds = vec![
                libc::pollfd {
                    fd: libc::STDIN_FILENO,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.signals.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            for p in &self.stdin {
                if p.written < self.stdin_pending.len() {
                    fds.push(libc::pollfd {
                        fd: std::os::fd::AsRawFd::as_raw_fd(&p.fd),
                        events: libc::POLLOUT,
                        revents: 0,
                    });
                }
            }
            let stdin_slots = 2..fds.len();
            let first_output = fds.len();
            let mut which = Vec::new();
            for (i, r) in self.ranks.iter().enumerate() {
                for (s, p) in r.pipes.iter().enumerate() {
                    if let Some(p) = p {
                        fds.push(libc::pollfd {
                            fd: std::os::fd::AsRawFd::as_raw_fd(p),
                            events: libc::POLLIN,
                            revents: 0,
                        });
                        which.push((i, s));
                    }
                }
            }
            let timeout = self
                .stop_watch
                .as_ref()
                .map(|w| w.next_check().saturating_duration_since(Instant::now()));
            if sys::poll(&mut fds, timeout).is_err() {
                return self.abandon();
            }
            if matches!(self.report_stopped(), Step::Abandon) {
                return self.abandon();
            }
            if fds[stdin_slots].iter().any(|f| f.revents != 0)
                && matches!(self.write_stdin(), Step::Abandon)
            {
                return self.abandon();
            }
            for (pfd, &(i, s)) in fds[first_output..].iter().zip(&which) {
                if pfd.revents != 0 && matches!(self.forward(i, s, 4), Step::Abandon) {
                    return self.abandon();
                }
            }
            if fds[0].revents != 0 && matches!(self.on_command(), Step::Abandon) {
                return self.abandon();
            }
            if fds[1].revents != 0 {
                for sig in self.signals.drain() {
                    if STOP_SIGNALS.contains(&sig) {
                        return self.abandon();
                    }
                    if sig == libc::SIGCHLD && matches!(self.collect_exits(), Step::Abandon) {
                        return self.abandon();
                    }
                }
            }
        }
    }

    /// Tells the master of ranks stopped longer than the limit.
    fn report_stopped(&mut self) -> Step {
        let Some(watch) = self.stop_watch.as_mut() else {
            return Step::Go;
        };
        let running = self.ranks.iter().filter(|r| r.running);
        for (rank, long) in watch.check(Instant::now(), running.map(|r| (r.rank, r.pid))) {
            let ms = long.as_millis().to_string();
            if !send(&["stopped", &rank.to_string(), &ms], b"") {
                return Step::Abandon;
            }
        }
        Step::Go
    }

    /// Forwards what rank `i`'s stream `s` holds (at most `rounds` reads).
    fn forward(&mut self, i: usize, s: usize, rounds: usize) -> Step {
        let rank = self.ranks[i].rank.to_string();
        let stream = (s + 1).to_string();
        for _ in 0..rounds {
            let Some(p) = &self.ranks[i].pipes[s] else {
                break;
            };
            match sys::read_fd(std::os::fd::AsRawFd::as_raw_fd(p), &mut self.buf) {
                Ok(sys::ReadOutcome::Data(n)) => {
                    if !send(&["out", &rank, &stream], &self.buf[..n]) {
                        return Step::Abandon;
                    }
                }
                Ok(sys::ReadOutcome::WouldBlock) => break,
                Ok(sys::ReadOutcome::Eof) | Err(_) => self.ranks[i].pipes[s] = None,
            }
        }
        Step::Go
    }

    fn on_command(&mut self) -> Step {
        match sys::read_fd(libc::STDIN_FILENO, &mut self.buf) {
            Ok(sys::ReadOutcome::Data(n)) => self.decoder.push(&self.buf[..n]),
            Ok(sys::ReadOutcome::WouldBlock) => return Step::Go,
            Ok(sys::ReadOutcome::Eof) | Err(_) => return Step::Abandon,
        }
        self.obey_buffered()
    }

    /// Carries out every complete command received.
    fn obey_buffered(&mut self) -> Step {
        loop {
            match self.decoder.next_record() {
                Ok(Some(r)) => {
                    if let Step::Abandon = self.obey(&r) {
                        return Step::Abandon;
                    }
                }
                Ok(None) => return Step::Go,
                Err(_) => return Step::Abandon,
            }
        }
    }

    fn obey(&mut self, r: &Record) -> Step {
        if r.kind() == "in" {
            if r.payload.is_empty() {
                self.stdin_eof = true;
            } else {
                self.stdin_pending.extend_from_slice(&r.payload);
            }
            return self.write_stdin();
        }
        if r.kind() == "signal" {
            if let Some(sig) = r.num::<i32>(1).filter(|s| (1..=64).contains(s)) {
                for rank in self.ranks.iter().filter(|r| r.running) {
                    sys::signal_group(rank.pid, sig);
                }
            }
        }
        if r.kind() == "spawn" {
            return self.spawn_world(r);
        }
        if r.kind() == "kill" {
            // A replica the master stops: woken first in case it is stopped.
            if let Some(n) = r.num::<u32>(1) {
                for rank in self.ranks.iter().filter(|x| x.running && x.rank == n) {
                    sys::signal_group(rank.pid, libc::SIGCONT);
                    sys::signal_group(rank.pid, libc::SIGKILL);
                }
            }
        }
        Step::Go
    }

    /// Starts this host's share of a world `MPI_Comm_spawn` asked for:
    /// `spawn BASE TOTAL SPAWN ROOT PARENTS RANK,RANK,...` with the spawn
    /// request's programs (resolved by the master) as payload. A process
    /// that cannot start is reported as the host's failure.
    fn spawn_world(&mut self, r: &Record) -> Step {
        let nums: Option<Vec<u32>> = (1..6).map(|i| r.num::<u32>(i)).collect();
        let here: Option<Vec<u32>> = r
            .words
            .get(6)
            .map(|w| w.split(',').map(|x| x.parse().ok()).collect())
            .unwrap_or(None);
        let text = String::from_utf8_lossy(&r.payload).into_owned();
        let words: Vec<&str> = text.split(' ').collect();
        let (Some(nums), Some(here), Some((_, _, apps))) =
            (nums, here, tandem::dynamic::decode_spawn(&words))
        else {
            return Step::Abandon;
        };
        let (base, total, spawn, root, parents) = (nums[0], nums[1], nums[2], nums[3], nums[4]);
        let local_size = here.len() as u32;
        let shm = match host_setup::shared_memory(local_size, &self.settings) {
            Ok(s) => s,
            Err(msg) => {
                send(&["fail", "1"], msg.as_bytes());
                return Step::Go;
            }
        };
        for (local, &world_rank) in here.iter().enumerate() {
            let at = host_setup::SpawnedPlace {
                base,
                total,
                spawn,
                root,
                parents,
                local: local as u32,
                local_size,
                shm: shm.as_ref(),
            };
            let Some((app, env)) = host_setup::spawned_process(&apps, world_rank, &at) else {
                return Step::Abandon;
            };
            let process = base + world_rank;
            match supervise::spawn_rank(&self.command, &app, &env, false) {
                Ok(s) => {
                    for fd in [&s.stdout, &s.stderr] {
                        let _ = sys::set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(fd));
                    }
                    if !send(&["pid", &process.to_string(), &s.pid.to_string()], b"") {
                        return Step::Abandon;
                    }
                    self.ranks.push(Rank {
                        rank: process,
                        pid: s.pid,
                        running: true,
                        pipes: [Some(s.stdout), Some(s.stderr)],
                    });
                }
                Err(e) => {
                    let (msg, code) = spawn_error(process, &app.program, &e);
                    let msg = msg.trim_start_matches("tandem: ").to_string();
                    send(&["fail", &code.to_string()], msg.as_bytes());
                    return Step::Go;
                }
            }
        }
        Step::Go
    }

    /// Writes what rank 0's stdin (each of its replicas' here) takes and
    /// tells the master how much all of them have taken.
    fn write_stdin(&mut self) -> Step {
        let pending = &self.stdin_pending;
        self.stdin.retain_mut(|p| {
            while p.written < pending.len() {
                match sys::write_fd(
                    std::os::fd::AsRawFd::as_raw_fd(&p.fd),
                    &pending[p.written..],
                ) {
                    Ok(0) => break,
                    Ok(n) => p.written += n,
                    // The process closed its stdin or ended: drop the rest.
                    Err(_) => return false,
                }
            }
            true
        });
        let written = self
            .stdin
            .iter()
            .map(|p| p.written)
            .min()
            .unwrap_or(self.stdin_pending.len());
        for p in &mut self.stdin {
            p.written -= written;
        }
        self.stdin_pending.drain(..written);
        if self.stdin_eof && self.stdin_pending.is_empty() {
            self.stdin.clear();
        }
        if written > 0 && !send(&["ack", &written.to_string()], b"") {
            return Step::Abandon;
        }
        Step::Go
    }

    fn collect_exits(&mut self) -> Step {
        while let Some((pid, how)) = supervise::peek_exited_child() {
            let Some(i) = self.ranks.iter().position(|r| r.running && r.pid == pid) else {
                supervise::reap(pid);
                continue;
            };
            sys::signal_group(pid, libc::SIGKILL);
            supervise::reap(pid);
            self.ranks[i].running = false;
            // Its last words come before the news of its end; whatever a
            // process that escaped its group writes later is not waited for.
            for s in 0..2 {
                if let Step::Abandon = self.forward(i, s, 1024) {
                    return Step::Abandon;
                }
            }
            self.ranks[i].pipes = [None, None];
            let rank = self.ranks[i].rank.to_string();
            let ok = match how {
                Termination::Exited(c) => send(&["exit", &rank, "exited", &c.to_string()], b""),
                Termination::Killed {
                    signal,
                    core_dumped,
                } => send(
                    &[
                        "exit",
                        &rank,
                        "killed",
                        &signal.to_string(),
                        if core_dumped { "1" } else { "0" },
                    ],
                    b"",
                ),
                Termination::Unknown => send(&["exit", &rank, "unknown"], b""),
            };
            if !ok {
                return Step::Abandon;
            }
            // Its input, if it read ours, no longer holds the others' back.
            let ended = self.ranks[i].rank;
            if self.stdin.iter().any(|p| p.rank == ended) {
                self.stdin.retain(|p| p.rank != ended);
                if let Step::Abandon = self.write_stdin() {
                    return Step::Abandon;
                }
            }
        }
        Step::Go
    }

    /// Kills every rank and whatever they left, then leaves.
    fn abandon(mut self) -> i32 {
        kill_all(&self.ranks);
        for r in &mut self.ranks {
            r.pipes = [None, None];
        }
        self.reap_leftovers();
        1
    }

    /// Kills and reaps every remaining descendant we adopted.
    fn reap_leftovers(&mut self) {
        let deadline = Instant::now() + KILL_WAIT;
        loop {
            while let Some((pid, _)) = supervise::peek_exited_child() {
                if let Some(r) = self.ranks.iter_mut().find(|r| r.running && r.pid == pid) {
                    r.running = false;
                }
                supervise::reap(pid);
            }
            let left = supervise::children();
            if left.is_empty() || Instant::now() >= deadline {
                return;
            }
            for pid in left {
                sys::signal_process(pid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Shell-quotes `word` (for agents such as ssh that hand the command to a
/// remote shell).
pub fn shell_quote(word: &OsStr) -> String {
    let text = word.to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

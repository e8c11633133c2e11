//! The launcher's single-threaded event loop: one `poll` over the signalfd,
//! the service's sockets, the ranks' output pipes and stdin, with deadlines
//! for the job timeout, the SIGTERM→SIGKILL grace period and unauthenticated
//! connections.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use tandem::bootstrap::{encode_secret, env as job_env, random_secret};
use tandem::params::Settings;
use tandem::stats::{self, Counters};
use tandem::transport::shm::{HostResources, Layout};

use super::kv_service::{self, AbortRequest, KvService};
use super::output::{OutputStream, Sink};
use super::signals::{signal_name, SignalQueue, STOP_SIGNALS};
use super::stdin_feed::StdinFeed;
use super::supervise::{self, RankCommand, Termination};
use crate::{parameters, sys};

/// Time between asking ranks to stop (SIGTERM or the forwarded signal) and
/// SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(1);
/// Time to wait for SIGKILLed ranks to be reaped before giving up on them
/// (a process stuck in the kernel cannot be killed).
const REAP_GRACE: Duration = Duration::from_secs(5);
/// Time to wait for orphans left by the ranks to die at the end of the job.
const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
/// Exit status for `--timeout`, as timeout(1) uses.
const TIMEOUT_STATUS: i32 = 124;

pub struct JobConfig {
    pub ranks: u32,
    pub tag_output: bool,
    pub timeout: Option<f64>,
    pub command: RankCommand,
}

struct RankProcess {
    rank: u32,
    /// Also the id of the rank's process group.
    pid: libc::pid_t,
    running: bool,
}

enum Phase {
    Running,
    /// Ranks have been told to stop; the job ends when all are reaped.
    Stopping {
        exit_code: i32,
        kill_at: Instant,
        killed: bool,
        give_up_at: Option<Instant>,
        /// Ranks still running when the stop began.
        stopped: usize,
    },
}

#[derive(Clone, Copy)]
enum Token {
    Signals,
    Service(kv_service::Token),
    Output(usize),
    StdinSource,
    StdinSink,
}

pub struct Job {
    config: JobConfig,
    signals: SignalQueue,
    service: KvService,
    ranks: Vec<RankProcess>,
    outputs: Vec<OutputStream>,
    stdin: StdinFeed,
    phase: Phase,
    timeout_at: Option<Instant>,
    abandoned: bool,
    read_buf: Vec<u8>,
    /// The `stats` and `stats_file` parameters.
    stats: (String, String),
}

impl Job {
    /// Sets up signals and the service and starts every rank. On failure
    /// returns the exit status (the message has been printed).
    pub fn start(mut config: JobConfig) -> Result<Job, i32> {
        let fail = |what: &str, e: io::Error| {
            eprintln!("tandem: {what}: {}", os_error_text(&e));
            1
        };
        // Block the signals before any child exists, so no SIGCHLD is missed.
        let signals = SignalQueue::open().map_err(|e| fail("cannot set up signal handling", e))?;
        supervise::become_subreaper();
        let secret = encode_secret(&random_secret());
        let service = KvService::bind(config.ranks, secret.clone())
            .map_err(|e| fail("cannot listen on 127.0.0.1", e))?;
        // Three pipes and a socket per rank may exceed the default 1024.
        config.command.original_fd_limit = sys::raise_fd_limit(4 * u64::from(config.ranks) + 256);
        let job_id = format!(
            "{:x}-{}",
            std::process::id(),
            &encode_secret(&random_secret())[..8]
        );
        config.command.env.extend([
            (job_env::SIZE.to_string(), config.ranks.to_string()),
            (job_env::LOCAL_SIZE.to_string(), config.ranks.to_string()),
            (job_env::ADDR.to_string(), service.addr().to_string()),
            (job_env::SECRET.to_string(), secret),
            (job_env::ID.to_string(), job_id),
        ]);
        let settings = job_settings(&config).map_err(|msg| {
            eprintln!("tandem: {msg}");
            2
        })?;
        let host = shared_memory(&config, &settings).map_err(|msg| {
            eprintln!("tandem: {msg}");
            1
        })?;
        let stats = (
            settings.text("stats").to_string(),
            settings.text("stats_file").to_string(),
        );
        let timeout_at = config
            .timeout
            .map(|s| Instant::now() + Duration::from_secs_f64(s));
        let mut job = Job {
            signals,
            service,
            ranks: Vec::new(),
            outputs: Vec::new(),
            stdin: StdinFeed::new(None),
            phase: Phase::Running,
            timeout_at,
            abandoned: false,
            read_buf: vec![0u8; 64 * 1024],
            stats,
            config,
        };
        for rank in 0..job.config.ranks {
            if let Err((msg, code)) = job.spawn(rank, host.as_ref()) {
                eprintln!("{msg}");
                if job.ranks.is_empty() {
                    return Err(code);
                }
                job.begin_stop(code, libc::SIGTERM);
                break;
            }
        }
        // Every rank has its copies of the host's descriptors now.
        drop(host);
        Ok(job)
    }

    fn spawn(&mut self, rank: u32, host: Option<&HostResources>) -> Result<(), (String, i32)> {
        let cmd = &self.config.command;
        let mut rank_env = vec![(job_env::RANK.to_string(), rank.to_string())];
        if let Some(h) = host {
            rank_env.extend(h.env(rank));
        }
        let spawned = supervise::spawn_rank(cmd, &rank_env, rank == 0)
            .map_err(|e| spawn_error(rank, &cmd.program, &e))?;
        self.ranks.push(RankProcess {
            rank,
            pid: spawned.pid,
            running: true,
        });
        let tag = self.config.tag_output;
        for (sink, pipe) in [
            (Sink::Stdout, spawned.stdout),
            (Sink::Stderr, spawned.stderr),
        ] {
            let stream = OutputStream::new(rank, sink, pipe, tag).map_err(|e| {
                (
                    format!("tandem: rank {rank}: output pipe: {}", os_error_text(&e)),
                    1,
                )
            })?;
            self.outputs.push(stream);
        }
        if rank == 0 {
            self.stdin = StdinFeed::new(spawned.stdin);
        }
        Ok(())
    }

    /// Runs the job to the end; returns the launcher's exit status.
    pub fn run(mut self) -> i32 {
        loop {
            let now = Instant::now();
            self.on_timers(now);
            if self.abandoned || self.ranks.iter().all(|r| !r.running) {
                break;
            }
            let (mut fds, tokens) = self.poll_set();
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(now));
            if let Err(e) = sys::poll(&mut fds, timeout) {
                // Cannot wait for anything any more: kill everything and leave
                // (PR_SET_PDEATHSIG takes care of any rank we do not reap).
                eprintln!("tandem: poll failed: {}", os_error_text(&e));
                self.begin_stop(1, libc::SIGKILL);
                self.abandoned = true;
                break;
            }
            for (pfd, &token) in fds.iter().zip(&tokens) {
                if pfd.revents != 0 {
                    self.dispatch(token, pfd.revents);
                }
            }
            self.check_stuck_fence();
        }
        self.finish()
    }

    /// Everything to poll. Signals come last so that, in one round, a
    /// rank's final requests and output are handled before its exit.
    fn poll_set(&self) -> (Vec<libc::pollfd>, Vec<Token>) {
        let mut fds = Vec::new();
        let mut tokens = Vec::new();
        let mut add = |fd, events, token| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            tokens.push(token);
        };
        let mut service = Vec::new();
        self.service.interest(&mut service);
        for (fd, events, token) in service {
            add(fd, events, Token::Service(token));
        }
        for (i, out) in self.outputs.iter().enumerate() {
            if let Some(fd) = out.fd() {
                add(fd, libc::POLLIN, Token::Output(i));
            }
        }
        if let Some(fd) = self.stdin.source_fd() {
            add(fd, libc::POLLIN, Token::StdinSource);
        }
        if let Some(fd) = self.stdin.sink_fd() {
            add(fd, libc::POLLOUT, Token::StdinSink);
        }
        add(self.signals.fd(), libc::POLLIN, Token::Signals);
        (fds, tokens)
    }

    fn dispatch(&mut self, token: Token, revents: libc::c_short) {
        match token {
            Token::Service(t) => {
                if let Some(abort) = self.service.on_ready(t, revents) {
                    self.on_abort(abort);
                }
            }
            Token::Output(i) => self.outputs[i].forward(&mut self.read_buf, 4),
            Token::StdinSource => self.stdin.on_source_ready(),
            Token::StdinSink => self.stdin.on_sink_ready(),
            Token::Signals => {
                for signal in self.signals.drain() {
                    if signal == libc::SIGCHLD {
                        self.collect_exits();
                    } else if STOP_SIGNALS.contains(&signal) {
                        self.on_stop_signal(signal);
                    }
                }
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let phase_deadline = match self.phase {
            Phase::Running => self.timeout_at,
            Phase::Stopping {
                kill_at,
                killed: false,
                ..
            } => Some(kill_at),
            Phase::Stopping { give_up_at, .. } => give_up_at,
        };
        [phase_deadline, self.service.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timers(&mut self, now: Instant) {
        self.service.expire(now);
        match self.phase {
            Phase::Running => {
                if self.timeout_at.is_some_and(|t| t <= now) {
                    let secs = self.config.timeout.unwrap_or_default();
                    eprintln!("tandem: job exceeded the timeout of {secs} s");
                    self.begin_stop(TIMEOUT_STATUS, libc::SIGTERM);
                }
            }
            Phase::Stopping {
                kill_at,
                killed: false,
                ..
            } if kill_at <= now => {
                self.signal_running(libc::SIGKILL);
                if let Phase::Stopping {
                    killed, give_up_at, ..
                } = &mut self.phase
                {
                    *killed = true;
                    *give_up_at = Some(now + REAP_GRACE);
                }
            }
            Phase::Stopping {
                give_up_at: Some(t),
                ..
            } if t <= now => {
                let left: Vec<String> = self
                    .ranks
                    .iter()
                    .filter(|r| r.running)
                    .map(|r| format!("{} (pid {})", r.rank, r.pid))
                    .collect();
                eprintln!(
                    "tandem: rank(s) {} did not end after SIGKILL; giving up on them",
                    left.join(", ")
                );
                self.abandoned = true;
            }
            Phase::Stopping { .. } => {}
        }
    }

    /// Reaps every child that has ended and judges the ranks among them.
    fn collect_exits(&mut self) {
        while let Some((pid, how)) = supervise::peek_exited_child() {
            let Some(i) = self.ranks.iter().position(|r| r.running && r.pid == pid) else {
                supervise::reap(pid); // an orphan we adopted as subreaper
                continue;
            };
            let rank = self.ranks[i].rank;
            // Whatever the rank left behind in its process group goes too;
            // the unreaped zombie keeps the group id from being reused.
            sys::signal_group(pid, libc::SIGKILL);
            supervise::reap(pid);
            self.ranks[i].running = false;
            // Its last words come before any verdict on it.
            for out in self.outputs.iter_mut().filter(|o| o.rank == rank) {
                out.forward(&mut self.read_buf, 1024);
            }
            if rank == 0 {
                self.stdin.close();
            }
            if matches!(self.phase, Phase::Running) {
                if let Some((what, code)) = self.failure(rank, how) {
                    eprintln!("tandem: rank {rank} (pid {pid}) {what}");
                    self.begin_stop(code, libc::SIGTERM);
                }
            }
        }
    }

    /// Kills and reaps every process the ranks left behind that escaped
    /// their process groups (we adopted them as subreaper), so nothing of
    /// the job outlives the launcher.
    fn kill_leftovers(&mut self) {
        let deadline = Instant::now() + LEFTOVER_GRACE;
        loop {
            self.collect_exits();
            let left = supervise::children();
            let now = Instant::now();
            if left.is_empty() || now >= deadline {
                return;
            }
            for pid in left {
                // Still our unreaped child, so the pid cannot have been reused.
                sys::signal_process(pid, libc::SIGKILL);
            }
            let mut fds = [libc::pollfd {
                fd: self.signals.fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            let _ = sys::poll(&mut fds, Some(deadline - now));
            // Stop signals are moot now; SIGCHLD is handled by the loop.
            self.signals.drain();
        }
    }

    /// Why a rank's end fails the job, and the launcher's exit status.
    fn failure(&self, rank: u32, how: Termination) -> Option<(String, i32)> {
        match how {
            Termination::Exited(0)
                if self.service.said_hello(rank) && !self.service.finalized(rank) =>
            {
                Some(("exited without calling MPI_Finalize".to_string(), 1))
            }
            Termination::Exited(0) => None,
            other => Some((other.describe(), other.exit_code())),
        }
    }

    /// A fence can complete only if every rank is alive to enter it; once a
    /// rank has exited, ranks waiting in one would wait forever.
    fn check_stuck_fence(&mut self) {
        if !matches!(self.phase, Phase::Running) || self.service.ranks_in_fence() == 0 {
            return;
        }
        if let Some(gone) = self.ranks.iter().find(|r| !r.running) {
            eprintln!(
                "tandem: rank {} (pid {}) has exited, but other ranks are waiting for it in a fence",
                gone.rank, gone.pid
            );
            self.begin_stop(1, libc::SIGTERM);
        }
    }

    fn on_abort(&mut self, abort: AbortRequest) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let AbortRequest {
            rank,
            code,
            message,
        } = abort;
        if message.is_empty() {
            eprintln!("tandem: rank {rank} called MPI_Abort with error code {code}");
        } else {
            eprintln!("tandem: rank {rank} called MPI_Abort with error code {code}: {message}");
        }
        let status = match code & 0xff {
            0 => 1,
            c => c,
        };
        self.begin_stop(status, libc::SIGTERM);
    }

    fn on_stop_signal(&mut self, signal: libc::c_int) {
        match &mut self.phase {
            Phase::Running => {
                eprintln!("tandem: caught {}; stopping the job", signal_name(signal));
                self.begin_stop(128 + signal, signal);
            }
            // Asked again while stopping: do not wait for the grace period.
            Phase::Stopping {
                kill_at,
                killed: false,
                ..
            } => *kill_at = Instant::now(),
            Phase::Stopping { .. } => {}
        }
    }

    /// Sends `signal` to every running rank's process group and starts the
    /// grace period before SIGKILL. Only the first stop counts.
    fn begin_stop(&mut self, exit_code: i32, signal: libc::c_int) {
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let stopped = self.signal_running(signal);
        // Closing the service tells ranks blocked in a request that the job is over.
        self.service.shutdown();
        self.stdin.close();
        self.phase = Phase::Stopping {
            exit_code,
            kill_at: Instant::now() + KILL_GRACE,
            killed: false,
            give_up_at: None,
            stopped,
        };
    }

    fn signal_running(&self, signal: libc::c_int) -> usize {
        let mut n = 0;
        for r in self.ranks.iter().filter(|r| r.running) {
            sys::signal_group(r.pid, signal);
            n += 1;
        }
        n
    }

    fn finish(mut self) -> i32 {
        self.kill_leftovers();
        for out in &mut self.outputs {
            out.close(&mut self.read_buf);
        }
        match self.phase {
            Phase::Running => {
                let (mode, file) = &self.stats;
                report_counters(&self.service, self.config.ranks, mode, file);
                0
            }
            Phase::Stopping {
                exit_code, stopped, ..
            } => {
                if stopped > 0 {
                    let s = if stopped == 1 { "" } else { "s" };
                    eprintln!("tandem: stopped the remaining {stopped} rank{s}");
                }
                exit_code
            }
        }
    }
}

/// The parameters the ranks will see: the launcher's environment and --set.
fn job_settings(config: &JobConfig) -> Result<Settings, String> {
    let mut vars = Vec::new();
    for (key, value) in parameters::parameter_vars() {
        vars.push((key, value?));
    }
    vars.extend(config.command.env.iter().cloned());
    Settings::from_vars(vars)
}

/// The shared-memory segment and wake-up descriptors for this host's ranks,
/// when the job's parameters ask for the shm transport.
fn shared_memory(config: &JobConfig, settings: &Settings) -> Result<Option<HostResources>, String> {
    let wants_shm = settings
        .text("transports")
        .split(',')
        .any(|t| t.trim() == "shm");
    if !wants_shm || config.ranks < 2 {
        return Ok(None);
    }
    let layout = Layout::from_settings(config.ranks, settings)?;
    HostResources::create(layout)
        .map(Some)
        .map_err(|e| format!("cannot create the shared-memory segment: {e}"))
}

/// Prints (or writes) the counters the ranks published at MPI_Finalize, as
/// the `stats` and `stats_file` parameters ask.
fn report_counters(service: &KvService, ranks: u32, mode: &str, file: &str) {
    let rows: Vec<(u32, Counters)> = (0..ranks)
        .filter_map(|r| {
            let text = service.value(&format!("stats.{r}"))?;
            Counters::decode(text).map(|c| (r, c))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    match mode {
        "1" => eprint!("tandem: progress-engine counters\n{}", stats::table(&rows)),
        "json" => {
            for (r, c) in &rows {
                println!("{}", c.to_json(*r));
            }
        }
        _ => {}
    }
    if !file.is_empty() {
        let body: Vec<String> = rows.iter().map(|(r, c)| c.to_json(*r)).collect();
        if let Err(e) = std::fs::write(file, format!("[\n{}\n]\n", body.join(",\n"))) {
            eprintln!("tandem: cannot write stats_file {file}: {e}");
        }
    }
}

/// A message and exit status for a rank that could not be started: 127 or
/// 126 for a program that cannot be found or executed (as a shell uses
/// them), 1 for a lack of resources.
fn spawn_error(rank: u32, program: &OsStr, e: &io::Error) -> (String, i32) {
    let name = program.to_string_lossy();
    match (e.kind(), e.raw_os_error()) {
        (io::ErrorKind::NotFound, _) if !program.as_bytes().contains(&b'/') => {
            (format!("tandem: cannot run '{name}': command not found (searched PATH)"), 127)
        }
        (io::ErrorKind::NotFound, _) => (format!("tandem: cannot run '{name}': no such file"), 127),
        (io::ErrorKind::PermissionDenied, _) => (
            format!("tandem: cannot run '{name}': permission denied (is it an executable file?)"),
            126,
        ),
        (_, Some(libc::ENOEXEC)) => (format!("tandem: cannot run '{name}': not an executable format"), 126),
        (_, Some(libc::EMFILE | libc::ENFILE)) => (
            format!(
                "tandem: cannot start rank {rank}: {} (each rank needs three pipes and a socket; raise `ulimit -n`)",
                os_error_text(e)
            ),
            1,
        ),
        _ => (format!("tandem: cannot start rank {rank} ('{name}'): {}", os_error_text(e)), 1),
    }
}

/// An error's text without std's " (os error N)" suffix.
fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

//! The launcher's single-threaded event loop: one `poll` over the signalfd,
//! the service's sockets, the ranks' output pipes and stdin, with deadlines
//! for the job timeout, the SIGTERM→SIGKILL grace period and unauthenticated
//! connections.
//!
//! Replicated jobs (`--replicas R`, R > 1; the VolpexMPI model): each of the
//! N ranks runs as R processes, process p being replica p / N of rank
//! p % N. A process that dies (signal, non-zero exit, exit without
//! MPI_Finalize after MPI_Init, lost host) is reported and the job goes on
//! while every rank keeps a replica that runs or has finished normally; a
//! rank that loses all its replicas ends the job as any failure does. Once
//! every rank has a replica that finished normally, the replicas still
//! running get `replica_timeout_ms` to finish and are then stopped, which
//! is no failure. Each line a rank writes appears once (see `output`).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::{Duration, Instant};

use tandem::bootstrap::{encode_secret, env as job_env, random_secret};
use tandem::params::Settings;
use tandem::stats::{self, Counters};
use tandem::transport::shm::{env as shm_env, HostResources};

use super::channel::{encode, STDIN_WINDOW};
use super::host_setup;
use super::kv_service::{self, AbortRequest, KvService, SpawnRequest};
use super::output::{LineSplitter, OutputStream, Printed, Sink};
use super::remote::{self, HostEvent, HostJob, Pipe, RemoteHost};
use super::signals::{signal_name, SignalQueue, STOP_SIGNALS};
use super::stdin_feed::{self, StdinFeed};
use super::stopped::{self, IdleWatch, StopWatch};
use super::supervise::{self, App, RankCommand, Termination};
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
/// Time the helpers have to leave after their ranks have all ended.
const AGENT_GRACE: Duration = Duration::from_secs(5);

pub struct JobConfig {
    /// The job's processes: ranks x replicas.
    pub ranks: u32,
    /// Processes per rank (1: no replication, the job as ever).
    pub replicas: u32,
    /// How long the replicas still running may take once every rank has a
    /// replica that finished (`replica_timeout_ms`).
    pub replica_timeout: Duration,
    /// This host's name in messages about replicas.
    pub local_host: String,
    pub tag_output: bool,
    pub timeout: Option<f64>,
    pub command: RankCommand,
    /// A job across hosts; `None`: every rank on this host, as ever.
    pub multi: Option<MultiHost>,
}

/// Where the ranks of a job across hosts go, and how to get there.
pub struct MultiHost {
    /// World ranks on this host (started directly, no agent).
    pub local_ranks: Vec<u32>,
    /// Other hosts and their world ranks, each reached through the agent.
    pub remote: Vec<(String, Vec<u32>)>,
    /// The agent command's words (`ssh -o BatchMode=yes`).
    pub agent: Vec<String>,
    /// The tandem executable on the other hosts.
    pub tandem_path: OsString,
    /// Variables the remote ranks get besides the parameters (`-x`).
    pub export: Vec<(String, String)>,
    /// How long the hosts have to start their ranks.
    pub launch_timeout: Duration,
}

struct RankProcess {
    rank: u32,
    /// Also the id of the rank's process group (0 while a remote rank's
    /// pid is not known yet).
    pid: libc::pid_t,
    running: bool,
    /// Index into `Job::hosts` for a rank on another host.
    host: Option<usize>,
    /// A replica the launcher stopped because its rank no longer needs it.
    stopping: bool,
    /// Why the launcher declared this replica failed and killed it.
    verdict: Option<String>,
}

/// A remote host where processes of rank 0 read our stdin.
struct RemoteStdin {
    host: usize,
    /// Bytes sent to it and not acknowledged yet.
    in_flight: usize,
    /// Its processes reading our stdin that have not ended.
    processes: Vec<u32>,
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
    /// Our stdin, for rank 0 here or on other hosts.
    StdinSource,
    /// The stdin pipe of a process of rank 0 here.
    StdinSink(usize),
    Host(usize, Pipe),
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
    /// The other hosts of a job across hosts.
    hosts: Vec<RemoteHost>,
    /// Line splitters for the output of remote ranks, by (rank, sink).
    remote_out: HashMap<(u32, u8), LineSplitter>,
    /// When every host must have started its ranks.
    launch_deadline: Option<Instant>,
    /// When helpers still there after their ranks ended are given up.
    agents_deadline: Option<Instant>,
    /// Hosts where rank 0 (or replicas of it) read our stdin.
    remote_stdin: Vec<RemoteStdin>,
    /// Replicated jobs: the lines each rank has printed.
    printed: Printed,
    /// Replicated jobs, per rank: its processes still running, and those
    /// that finished normally; ranks with a replica finished.
    live: Vec<u32>,
    done: Vec<u32>,
    ranks_done: u32,
    /// When the replicas still running after every rank has finished are
    /// stopped, and when those that do not end then are given up.
    replica_deadline: Option<Instant>,
    stragglers_give_up: Option<Instant>,
    /// Watches this host's processes for being stopped (`stopped`).
    stop_watch: Option<StopWatch>,
    /// Watches whether every rank waits (a job of one host, unreplicated:
    /// the master sees every rank's CPU time).
    idle_watch: Option<IdleWatch>,
    /// The job's parameters (a spawned world's shared memory is laid out
    /// by them).
    settings: Settings,
    /// Worlds `MPI_Comm_spawn` started so far: (first process, size).
    spawned: Vec<(u32, u32)>,
}

/// Most processes one `MPI_Comm_spawn` may start.
const MAX_SPAWN: u32 = 4096;

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
        let settings = job_settings(&config).map_err(|msg| {
            eprintln!("tandem: {msg}");
            2
        })?;
        let local_ranks: Vec<u32> = match &config.multi {
            None => (0..config.ranks).collect(),
            Some(m) => m.local_ranks.clone(),
        };
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        // The service listens on loopback for this host's ranks, and on the
        // interfaces that may reach the other hosts (best first).
        let mut ips = vec![loopback];
        let mut node_addr = None;
        if config.multi.is_some() {
            let usable = tandem::transport::tcp::usable_interfaces(
                &tandem::transport::tcp::interfaces(),
                settings.text("tcp_if_include"),
                settings.text("tcp_if_exclude"),
            )
            .map_err(|msg| {
                eprintln!("tandem: {msg}");
                2
            })?;
            if usable.is_empty() {
                eprintln!(
                    "tandem: no network interface for a job across hosts (tcp_if_include '{}', tcp_if_exclude '{}')",
                    settings.text("tcp_if_include"),
                    settings.text("tcp_if_exclude")
                );
                return Err(1);
            }
            node_addr = Some(usable[0].addr.to_string());
            ips.extend(usable.iter().map(|i| IpAddr::V4(i.addr)));
            if local_ranks.is_empty() {
                ips.remove(0);
            }
        }
        let service = KvService::bind(config.ranks, secret.clone(), &ips)
            .map_err(|e| fail("cannot start the job's service", e))?;
        // Three pipes and a socket per rank may exceed the default 1024.
        config.command.original_fd_limit = sys::raise_fd_limit(4 * u64::from(config.ranks) + 256);
        let job_id = format!(
            "{:x}-{}",
            std::process::id(),
            &encode_secret(&random_secret())[..8]
        );
        let hosts_total = match &config.multi {
            None => 1,
            Some(m) => m.remote.len() as u32 + u32::from(!m.local_ranks.is_empty()),
        };
        if config.replicas > 1 {
            config
                .command
                .env
                .push((job_env::REPLICAS.to_string(), config.replicas.to_string()));
        }
        // What remote helpers get: the parameters and exported variables
        // (their own environment may be a login shell's on another machine).
        let mut remote_env: Vec<(String, String)> = Vec::new();
        if let Some(m) = &config.multi {
            for (k, v) in parameters::parameter_vars() {
                if let Ok(v) = v {
                    remote_env.push((k, v));
                }
            }
            remote_env.extend(config.command.env.iter().cloned());
            remote_env.extend(m.export.iter().cloned());
        }
        config.command.env.extend([
            (job_env::SIZE.to_string(), config.ranks.to_string()),
            (
                job_env::LOCAL_SIZE.to_string(),
                local_ranks.len().to_string(),
            ),
            (job_env::ADDR.to_string(), service.addrs()[0].to_string()),
            (job_env::ID.to_string(), job_id.clone()),
        ]);
        config.command.secret = secret.clone();
        if let Some(addr) = &node_addr {
            config.command.env.extend([
                (job_env::HOSTS.to_string(), hosts_total.to_string()),
                (job_env::NODE_ADDR.to_string(), addr.clone()),
            ]);
        }
        config.command.env.extend(host_setup::rseq_tunables(
            &settings,
            local_ranks.len() as u32,
            &config.command.env,
        ));
        let host =
            host_setup::shared_memory(local_ranks.len() as u32, &settings).map_err(|msg| {
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
        let logical = config.ranks / config.replicas;
        let (printed, live, done) = if config.replicas > 1 {
            (
                Printed::new(logical),
                vec![config.replicas; logical as usize],
                vec![0; logical as usize],
            )
        } else {
            (Printed::new(0), Vec::new(), Vec::new())
        };
        let stop_watch = StopWatch::new(stopped::limit(&settings, config.replicas > 1));
        let idle_watch = if config.replicas == 1 && config.multi.is_none() {
            IdleWatch::new(Duration::from_secs(settings.uint("stall_warn_s")))
        } else {
            None
        };
        let mut job = Job {
            signals,
            service,
            ranks: Vec::new(),
            outputs: Vec::new(),
            stdin: StdinFeed::new(),
            phase: Phase::Running,
            timeout_at,
            abandoned: false,
            read_buf: vec![0u8; 64 * 1024],
            stats,
            config,
            hosts: Vec::new(),
            remote_out: HashMap::new(),
            launch_deadline: None,
            agents_deadline: None,
            remote_stdin: Vec::new(),
            printed,
            live,
            done,
            ranks_done: 0,
            replica_deadline: None,
            stragglers_give_up: None,
            stop_watch,
            idle_watch,
            settings: settings.clone(),
            spawned: Vec::new(),
        };
        let local_size = local_ranks.len() as u32;
        for (local, &rank) in local_ranks.iter().enumerate() {
            if let Err((msg, code)) = job.spawn(rank, (local as u32, local_size), host.as_ref()) {
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
        if matches!(job.phase, Phase::Running) {
            // The service's first address is loopback, for this host's ranks.
            let skip = usize::from(!local_ranks.is_empty());
            let masters: Vec<String> = job
                .service
                .addrs()
                .iter()
                .skip(skip)
                .map(|a| a.to_string())
                .collect();
            let connect_timeout_ms = settings.uint("connect_timeout_ms");
            job.start_hosts(&HostJob {
                size: job.config.ranks,
                hosts: hosts_total,
                id: &job_id,
                secret: &secret,
                connect_timeout_ms,
                masters: &masters,
                ranks: &[],
                apps: &job.config.command.apps.clone(),
                env: &remote_env,
                stdin: stdin_feed::stdin_is_worth_reading(),
                logical,
            });
        }
        Ok(job)
    }

    /// Starts the agent of every remote host.
    fn start_hosts(&mut self, template: &HostJob) {
        let Some(multi) = self.config.multi.take() else {
            return;
        };
        for (name, ranks) in &multi.remote {
            let remote_cmd = [
                multi.tandem_path.clone(),
                OsString::from("_host"),
                OsString::from(name),
            ];
            let argv = remote::agent_argv(&multi.agent, name, &remote_cmd);
            let job = HostJob { ranks, ..*template }.encode();
            match RemoteHost::start(name, ranks.clone(), &argv, job) {
                Ok(h) => {
                    let index = self.hosts.len();
                    // Rank 0, or its replicas, here.
                    let logical = template.logical;
                    let readers: Vec<u32> = ranks
                        .iter()
                        .copied()
                        .filter(|r| r.is_multiple_of(logical))
                        .collect();
                    if template.stdin && !readers.is_empty() {
                        self.remote_stdin.push(RemoteStdin {
                            host: index,
                            in_flight: 0,
                            processes: readers,
                        });
                    }
                    for &rank in ranks {
                        self.ranks.push(RankProcess {
                            rank,
                            pid: 0,
                            running: true,
                            host: Some(index),
                            stopping: false,
                            verdict: None,
                        });
                    }
                    self.hosts.push(h);
                }
                Err(e) => {
                    eprintln!(
                        "tandem: host {name}: cannot start the agent '{}': {}",
                        argv[0].to_string_lossy(),
                        os_error_text(&e)
                    );
                    self.begin_stop(
                        if e.kind() == io::ErrorKind::NotFound {
                            127
                        } else {
                            1
                        },
                        libc::SIGTERM,
                    );
                    break;
                }
            }
        }
        self.launch_deadline = Some(Instant::now() + multi.launch_timeout);
        self.config.multi = Some(multi);
    }

    /// Starts process `rank`, number `local.0` of the `local.1` on this host.
    fn spawn(
        &mut self,
        rank: u32,
        (local, local_size): (u32, u32),
        host: Option<&HostResources>,
    ) -> Result<(), (String, i32)> {
        let cmd = &self.config.command;
        let logical = self.logical();
        let mut rank_env = vec![(job_env::RANK.to_string(), rank.to_string())];
        match host {
            Some(h) => rank_env.extend(h.env(local)),
            // Without a segment a rank still learns its place on the host
            // (it chooses its CPU by it).
            None => rank_env.push((shm_env::LOCAL_RANK.to_string(), local.to_string())),
        }
        rank_env.extend(supervise::conventional_env(
            rank % logical,
            logical,
            local,
            local_size,
        ));
        let (appnum, app) = cmd.app_of(rank % logical);
        rank_env.push((job_env::APPNUM.to_string(), appnum.to_string()));
        // Rank 0 (every replica of it) reads our stdin.
        let reads_stdin = rank.is_multiple_of(logical);
        let app = app.clone();
        self.start_process(rank, &app, &rank_env, reads_stdin)
    }

    /// Starts process `rank` running `app`, with its own variables
    /// `rank_env`, reading our stdin or not.
    fn start_process(
        &mut self,
        rank: u32,
        app: &App,
        rank_env: &[(String, String)],
        reads_stdin: bool,
    ) -> Result<(), (String, i32)> {
        let logical = self.logical();
        let spawned = supervise::spawn_rank(&self.config.command, app, rank_env, reads_stdin)
            .map_err(|e| spawn_error(rank, &app.program, &e))?;
        self.ranks.push(RankProcess {
            rank,
            pid: spawned.pid,
            running: true,
            host: None,
            stopping: false,
            verdict: None,
        });
        let tag = self.config.tag_output;
        let replicated = self.replicated();
        for (sink, pipe) in [
            (Sink::Stdout, spawned.stdout),
            (Sink::Stderr, spawned.stderr),
        ] {
            let stream = if replicated {
                OutputStream::replica(rank, rank % logical, sink, pipe, tag)
            } else {
                OutputStream::new(rank, sink, pipe, tag)
            };
            let stream = stream.map_err(|e| {
                (
                    format!("tandem: rank {rank}: output pipe: {}", os_error_text(&e)),
                    1,
                )
            })?;
            self.outputs.push(stream);
        }
        if reads_stdin {
            self.stdin.add(rank, spawned.stdin);
        }
        Ok(())
    }

    /// A parents' root asked for a new world (`MPI_Comm_spawn`): starts it
    /// and answers once its processes are all in `MPI_Init`, or at once
    /// with why not.
    fn on_spawn(&mut self, request: SpawnRequest) {
        match self.start_world(&request) {
            Ok((spawn, base)) => self.service.answer_when_started(
                request.conn,
                base,
                format!("SPAWNED {spawn} {base}"),
            ),
            Err(why) => {
                let why: String = why
                    .chars()
                    .map(|c| if c == '\n' { ' ' } else { c })
                    .collect();
                self.service.answer(request.conn, &format!("ERROR {why}"));
            }
        }
    }

    /// Starts the processes of a spawn request as a new world on this
    /// host: (the spawn's number, the id of its first process).
    fn start_world(&mut self, request: &SpawnRequest) -> Result<(u32, u32), String> {
        let words: Vec<&str> = request.words.iter().map(String::as_str).collect();
        let (root, parents, apps) =
            tandem::dynamic::decode_spawn(&words).ok_or("malformed spawn request")?;
        if !matches!(self.phase, Phase::Running) {
            return Err("the job is ending".into());
        }
        if self.replicated() {
            return Err("a job of replicated ranks (--replicas) cannot spawn processes".into());
        }
        if root != request.rank || parents == 0 || apps.is_empty() {
            return Err("malformed spawn request".into());
        }
        let total: u64 = apps.iter().map(|a| u64::from(a.procs)).sum();
        if total == 0 || total > u64::from(MAX_SPAWN) {
            return Err(format!(
                "cannot start {total} processes in one spawn (at most {MAX_SPAWN})"
            ));
        }
        let total = total as u32;
        if u64::from(self.service.processes()) + u64::from(total)
            > u64::from(tandem::transport::tcp::MAX_PROCESSES)
        {
            return Err("the job has started all the processes it can".into());
        }
        // Every program is found before any process starts (here; other
        // hosts are taken to have it at the same place, as for `tandem run`).
        let mut apps = apps;
        for a in &mut apps {
            a.command = resolve_program(a)?.into_vec();
        }
        // The job's hosts take the new processes in turn, in blocks: this
        // host (None) if it runs ranks, then the others that run.
        let mut places: Vec<Option<usize>> = Vec::new();
        let local_runs = match &self.config.multi {
            None => true,
            Some(m) => !m.local_ranks.is_empty(),
        };
        if local_runs {
            places.push(None);
        }
        places.extend(
            (0..self.hosts.len())
                .filter(|&h| self.hosts[h].agent_running && self.hosts[h].ready)
                .map(Some),
        );
        if places.is_empty() {
            return Err("no host of the job can start processes now".into());
        }
        let per = total / places.len() as u32;
        let extra = total % places.len() as u32;
        let mut shares: Vec<(Option<usize>, Vec<u32>)> = Vec::new();
        let mut next = 0u32;
        for (i, &place) in places.iter().enumerate() {
            let n = per + u32::from((i as u32) < extra);
            shares.push((place, (next..next + n).collect()));
            next += n;
        }
        let base = self.service.add_world(total);
        self.spawned.push((base, total));
        let spawn = self.spawned.len() as u32;
        let request = tandem::dynamic::encode_spawn(root, parents, &apps);
        for (place, ranks) in shares {
            if ranks.is_empty() {
                continue;
            }
            match place {
                Some(h) => {
                    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
                    let words = [
                        "spawn".to_string(),
                        base.to_string(),
                        total.to_string(),
                        spawn.to_string(),
                        root.to_string(),
                        parents.to_string(),
                        list.join(","),
                    ];
                    let words: Vec<&str> = words.iter().map(String::as_str).collect();
                    self.hosts[h].send(encode(&words, request.as_bytes()));
                    for &r in &ranks {
                        self.hosts[h].ranks.push(base + r);
                        self.ranks.push(RankProcess {
                            rank: base + r,
                            pid: 0,
                            running: true,
                            host: Some(h),
                            stopping: false,
                            verdict: None,
                        });
                    }
                }
                None => {
                    self.start_world_here(base, total, spawn, (root, parents), &apps, &ranks)?
                }
            }
        }
        Ok((spawn, base))
    }

    /// Starts world ranks `ranks` of a spawned world (processes from
    /// `base`, `total` in all) on this host.
    fn start_world_here(
        &mut self,
        base: u32,
        total: u32,
        spawn: u32,
        (root, parents): (u32, u32),
        apps: &[tandem::dynamic::SpawnApp],
        ranks: &[u32],
    ) -> Result<(), String> {
        let local_size = ranks.len() as u32;
        let host = host_setup::shared_memory(local_size, &self.settings)?;
        for (local, &i) in ranks.iter().enumerate() {
            let at = host_setup::SpawnedPlace {
                base,
                total,
                spawn,
                root,
                parents,
                local: local as u32,
                local_size,
                shm: host.as_ref(),
            };
            let (app, env) =
                host_setup::spawned_process(apps, i, &at).ok_or("malformed spawn request")?;
            if let Err((msg, _)) = self.start_process(base + i, &app, &env, false) {
                // The processes started already cannot be told apart
                // from a world that failed: the job ends.
                eprintln!("{msg}");
                self.begin_stop(1, libc::SIGTERM);
                return Err(msg);
            }
        }
        Ok(())
    }

    /// Runs the job to the end; returns the launcher's exit status.
    pub fn run(mut self) -> i32 {
        loop {
            let now = Instant::now();
            self.on_timers(now);
            if self.abandoned {
                break;
            }
            if self.ranks.iter().all(|r| !r.running) {
                if self.hosts.iter().all(|h| !h.agent_running) {
                    break;
                }
                // The helpers report `done` and leave; give them a moment.
                if self.agents_deadline.is_none() {
                    self.agents_deadline = Some(now + AGENT_GRACE);
                }
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
        if self.stdin_room().is_some() {
            add(libc::STDIN_FILENO, libc::POLLIN, Token::StdinSource);
        }
        for (slot, fd) in self.stdin.sink_fds() {
            add(fd, libc::POLLOUT, Token::StdinSink(slot));
        }
        let mut pipes = Vec::new();
        for (i, h) in self.hosts.iter().enumerate() {
            pipes.clear();
            h.interest(&mut pipes);
            for &(fd, events, pipe) in &pipes {
                add(fd, events, Token::Host(i, pipe));
            }
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
                for request in self.service.take_spawns() {
                    self.on_spawn(request);
                }
            }
            Token::Output(i) => self.outputs[i].forward(&mut self.read_buf, 4, &mut self.printed),
            Token::StdinSource => self.read_stdin(),
            Token::StdinSink(slot) => self.stdin.on_sink_ready(slot),
            Token::Host(i, Pipe::In) => self.hosts[i].flush(),
            Token::Host(i, Pipe::Out) => {
                let events = self.hosts[i].read_out(&mut self.read_buf, 4);
                self.on_host_events(i, events);
            }
            Token::Host(i, Pipe::Err) => self.hosts[i].read_err(&mut self.read_buf, 4),
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
            Phase::Running => [
                self.timeout_at,
                self.launch_deadline,
                self.replica_deadline,
                self.stragglers_give_up,
                self.stop_watch.as_ref().map(StopWatch::next_check),
                self.idle_watch.as_ref().map(IdleWatch::next_check),
            ]
            .into_iter()
            .flatten()
            .min(),
            Phase::Stopping {
                kill_at,
                killed: false,
                ..
            } => Some(kill_at),
            Phase::Stopping { give_up_at, .. } => give_up_at,
        };
        [
            phase_deadline,
            self.service.next_deadline(),
            self.agents_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_timers(&mut self, now: Instant) {
        self.service.expire(now);
        if self.agents_deadline.is_some_and(|t| t <= now) {
            // Helpers whose ranks have all ended but that do not leave: the
            // end of the job kills them (kill_leftovers).
            self.abandoned = true;
        }
        match self.phase {
            Phase::Running => {
                self.watch_stopped(now);
                self.watch_idle(now);
                if self.timeout_at.is_some_and(|t| t <= now) {
                    let secs = self.config.timeout.unwrap_or_default();
                    let stopped: Vec<String> = self
                        .ranks
                        .iter()
                        .filter(|r| r.running && r.host.is_none() && stopped::is_stopped(r.pid))
                        .map(|r| r.rank.to_string())
                        .collect();
                    let idle = self
                        .idle_watch
                        .as_ref()
                        .and_then(IdleWatch::all_idle_since)
                        .map(|t| now.saturating_duration_since(t));
                    let which = match (stopped.len(), idle) {
                        (0, Some(idle)) if idle.as_secs() >= 1 => format!(
                            " (every rank had been waiting, none using the CPU, for {} s: waiting on each other?)",
                            idle.as_secs()
                        ),
                        (0, _) => String::new(),
                        (1, _) => format!(" (rank {} is stopped)", stopped[0]),
                        _ => format!(" (ranks {} are stopped)", stopped.join(", ")),
                    };
                    eprintln!("tandem: job exceeded the timeout of {secs} s{which}");
                    self.begin_stop(TIMEOUT_STATUS, libc::SIGTERM);
                } else if self.launch_deadline.is_some_and(|t| t <= now) {
                    self.launch_deadline = None;
                    let secs = self
                        .config
                        .multi
                        .as_ref()
                        .map_or(0.0, |m| m.launch_timeout.as_secs_f64());
                    let late: Vec<usize> = (0..self.hosts.len())
                        .filter(|&i| !self.hosts[i].ready && self.hosts[i].agent_running)
                        .collect();
                    for &i in &late {
                        let h = &self.hosts[i];
                        eprintln!(
                            "tandem: host {} did not start its ranks within {secs} s (agent: {})",
                            h.name, h.shown
                        );
                    }
                    if self.replicated() {
                        // Its processes are lost; the job goes on if every
                        // rank has replicas elsewhere. Without its input the
                        // helper kills whatever it started and leaves.
                        for &i in &late {
                            self.hosts[i].close_input();
                            let why = format!(
                                "was lost: host {} did not start in time",
                                self.hosts[i].name
                            );
                            self.lose_host(i, &why, 1);
                        }
                    } else if !late.is_empty() {
                        self.begin_stop(1, libc::SIGTERM);
                    }
                } else if self.replica_deadline.is_some_and(|t| t <= now) {
                    self.replica_deadline = None;
                    self.stop_stragglers(now);
                } else if self.stragglers_give_up.is_some_and(|t| t <= now) {
                    self.stragglers_give_up = None;
                    let left: Vec<String> = (0..self.ranks.len())
                        .filter(|&i| self.ranks[i].running)
                        .map(|i| self.replica_name(i))
                        .collect();
                    if !left.is_empty() {
                        eprintln!(
                            "tandem: {} did not end after SIGKILL; giving up on them",
                            left.join(", ")
                        );
                        self.abandoned = true;
                    }
                }
            }
            Phase::Stopping {
                kill_at,
                killed: false,
                ..
            } if kill_at <= now => {
                self.signal_running(libc::SIGKILL);
                // A helper whose stdin closes kills whatever is left of its
                // ranks and leaves.
                for h in &mut self.hosts {
                    h.close_input();
                }
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
                    .map(|r| match r.host {
                        None => format!("{} (pid {})", r.rank, r.pid),
                        Some(h) => format!("{} (on {})", r.rank, self.hosts[h].name),
                    })
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
            if let Some(h) = self
                .hosts
                .iter()
                .position(|h| h.agent_running && h.pid == pid)
            {
                sys::signal_group(pid, libc::SIGKILL);
                supervise::reap(pid);
                self.on_agent_exit(h, how);
                continue;
            }
            let Some(i) = self
                .ranks
                .iter()
                .position(|r| r.running && r.host.is_none() && r.pid == pid)
            else {
                supervise::reap(pid); // an orphan we adopted as subreaper
                continue;
            };
            let rank = self.ranks[i].rank;
            // Whatever the rank left behind in its process group goes too;
            // the unreaped zombie keeps the group id from being reused.
            sys::signal_group(pid, libc::SIGKILL);
            supervise::reap(pid);
            self.ranks[i].running = false;
            self.service.ended(rank, &how.describe());
            self.stdin.close_process(rank);
            if self.replicated() {
                let failure = self.failure(rank, how);
                for out in self.outputs.iter_mut().filter(|o| o.rank == rank) {
                    out.end(&mut self.read_buf, failure.is_none(), &mut self.printed);
                }
                self.replica_ended(i, failure);
                continue;
            }
            // Its last words come before any verdict on it.
            for out in self.outputs.iter_mut().filter(|o| o.rank == rank) {
                out.forward(&mut self.read_buf, 1024, &mut self.printed);
            }
            self.judge(rank, &format!("(pid {pid})"), how);
        }
    }

    /// How much of our stdin may be read now: rank 0's processes here have
    /// taken the last chunk, and those on other hosts have room in their
    /// window of [`STDIN_WINDOW`] unacknowledged bytes (so a rank that does
    /// not read holds our stdin back instead of filling anyone's memory).
    /// `None`: nobody reads it (any more), or not now.
    fn stdin_room(&self) -> Option<usize> {
        let here = self.stdin.is_open();
        if !here && self.remote_stdin.is_empty() {
            return None;
        }
        if here && !self.stdin.wants_input() {
            return None;
        }
        let room = self
            .remote_stdin
            .iter()
            .map(|t| STDIN_WINDOW.saturating_sub(t.in_flight))
            .fold(self.read_buf.len(), usize::min);
        (room > 0).then_some(room)
    }

    /// Passes a chunk of our stdin to rank 0's processes, here and on
    /// other hosts.
    fn read_stdin(&mut self) {
        let Some(room) = self.stdin_room() else {
            return;
        };
        // Our stdin stays blocking (it is shared); poll said it is readable.
        match sys::read_fd(libc::STDIN_FILENO, &mut self.read_buf[..room]) {
            Ok(sys::ReadOutcome::Data(n)) => {
                let data = &self.read_buf[..n];
                self.stdin.give(data);
                for t in &mut self.remote_stdin {
                    self.hosts[t.host].send(encode(&["in"], data));
                    t.in_flight += n;
                }
            }
            Ok(sys::ReadOutcome::WouldBlock) => {}
            Ok(sys::ReadOutcome::Eof) | Err(_) => {
                self.stdin.close();
                self.close_remote_stdin();
            }
        }
    }

    /// Gives every remote process of rank 0 the end of its input.
    fn close_remote_stdin(&mut self) {
        for t in std::mem::take(&mut self.remote_stdin) {
            self.hosts[t.host].send(encode(&["in"], b""));
        }
    }

    /// Process `rank` of host `h` has ended: when it was the last there
    /// reading our stdin, the host gets the end of its input.
    fn remote_reader_ended(&mut self, h: usize, rank: u32) {
        let Some(j) = self.remote_stdin.iter().position(|t| t.host == h) else {
            return;
        };
        self.remote_stdin[j].processes.retain(|&p| p != rank);
        if self.remote_stdin[j].processes.is_empty() {
            self.remote_stdin.remove(j);
            self.hosts[h].send(encode(&["in"], b""));
        }
    }

    /// Ends the job if `how` a rank ended is a failure.
    fn judge(&mut self, rank: u32, whom: &str, how: Termination) {
        if matches!(self.phase, Phase::Running) {
            if let Some((what, code)) = self.failure(rank, how) {
                eprintln!("tandem: {} {whom} {what}", self.process_name(rank));
                self.begin_stop(code, libc::SIGTERM);
            }
        }
    }

    /// What a helper reported.
    fn on_host_events(&mut self, h: usize, events: Vec<HostEvent>) {
        for event in events {
            match event {
                HostEvent::Pid(rank, pid) => {
                    if let Some(r) = self.ranks.iter_mut().find(|r| r.rank == rank) {
                        r.pid = pid;
                    }
                }
                HostEvent::Output(rank, sink, data) => {
                    let tag = self.config.tag_output;
                    let replicated = self.replicated();
                    // The rank whose lines these are (this process's, unless
                    // replicated); a spawned process's are labelled by its id.
                    let label = if rank < self.config.ranks {
                        rank % self.logical()
                    } else {
                        rank
                    };
                    let key = (rank, sink as u8);
                    let lines = self
                        .remote_out
                        .entry(key)
                        .or_insert_with(|| LineSplitter::new(label, tag));
                    let mut out = Vec::new();
                    if replicated {
                        lines.push_counted(&data, self.printed.count(label, sink), &mut out);
                    } else {
                        lines.push(&data, &mut out);
                    }
                    sink.write(&out);
                }
                HostEvent::Exit(rank, how) => {
                    let Some(i) = self.ranks.iter().position(|r| r.rank == rank && r.running)
                    else {
                        continue;
                    };
                    self.ranks[i].running = false;
                    self.remote_reader_ended(h, rank);
                    self.service.ended(rank, &how.describe());
                    if self.replicated() {
                        let failure = self.failure(rank, how);
                        self.flush_remote_output(rank, failure.is_none());
                        self.replica_ended(i, failure);
                        continue;
                    }
                    self.flush_remote_output(rank, true);
                    let whom = format!("(pid {} on {})", self.ranks[i].pid, self.hosts[h].name);
                    self.judge(rank, &whom, how);
                }
                HostEvent::Stopped(rank, long) => {
                    if let Some(i) = self.ranks.iter().position(|r| r.rank == rank && r.running) {
                        self.on_stopped(i, long);
                    }
                }
                HostEvent::Ack(n) => {
                    if let Some(t) = self.remote_stdin.iter_mut().find(|t| t.host == h) {
                        t.in_flight = t.in_flight.saturating_sub(n);
                    }
                }
                HostEvent::Ready => {
                    self.hosts[h].ready = true;
                    if self.hosts.iter().all(|h| h.ready) {
                        self.launch_deadline = None;
                    }
                }
                HostEvent::Fail(code, message) => {
                    if matches!(self.phase, Phase::Running) {
                        eprintln!("tandem: {message}");
                    }
                    if self.replicated() {
                        let why =
                            format!("was lost: host {} could not start it", self.hosts[h].name);
                        self.lose_host(h, &why, code.max(1));
                        continue;
                    }
                    self.host_lost(h);
                    self.begin_stop(code.max(1), libc::SIGTERM);
                }
                HostEvent::Done => self.hosts[h].done = true,
                HostEvent::Broken(why) => {
                    if matches!(self.phase, Phase::Running) {
                        let name = &self.hosts[h].name;
                        eprintln!("tandem: host {name}: lost the helper: {why}");
                    }
                    self.hosts[h].close_input();
                    if self.replicated() {
                        let why = format!(
                            "was lost with host {}: its helper broke off",
                            self.hosts[h].name
                        );
                        self.lose_host(h, &why, 1);
                        continue;
                    }
                    self.host_lost(h);
                    self.begin_stop(1, libc::SIGTERM);
                }
            }
        }
    }

    /// Every rank of host `h` that is not known to have ended is gone.
    fn host_lost(&mut self, h: usize) -> Vec<u32> {
        let mut lost = Vec::new();
        for r in self
            .ranks
            .iter_mut()
            .filter(|r| r.host == Some(h) && r.running)
        {
            r.running = false;
            lost.push(r.rank);
        }
        for &rank in &lost {
            self.flush_remote_output(rank, false);
        }
        lost
    }

    /// Replicated jobs: the processes of host `h` that had not ended are
    /// lost with it (`why`, exit status `code` if that ends the job).
    fn lose_host(&mut self, h: usize, why: &str, code: i32) {
        self.remote_stdin.retain(|t| t.host != h);
        for i in 0..self.ranks.len() {
            if self.ranks[i].host != Some(h) || !self.ranks[i].running {
                continue;
            }
            self.ranks[i].running = false;
            self.flush_remote_output(self.ranks[i].rank, false);
            self.replica_ended(i, Some((why.to_string(), code)));
        }
    }

    /// The rest of a remote process's output, now that it has ended
    /// (`normally`: a replica's partial last line counts as a line).
    fn flush_remote_output(&mut self, rank: u32, normally: bool) {
        let replicated = self.replicated();
        let label = rank % self.logical();
        for sink in [Sink::Stdout, Sink::Stderr] {
            if let Some(mut lines) = self.remote_out.remove(&(rank, sink as u8)) {
                let mut out = Vec::new();
                if !replicated {
                    lines.finish(&mut out);
                } else if normally {
                    lines.finish_counted(self.printed.count(label, sink), &mut out);
                } else {
                    self.printed.keep_partial(label, sink, lines.take_partial());
                }
                sink.write(&out);
            }
        }
    }

    /// The agent of host `h` ended: what it still had to say first, then
    /// its ranks that did not report their end are lost.
    fn on_agent_exit(&mut self, h: usize, how: Termination) {
        // Its output is complete now (unless something it left holds the
        // pipe open: then what came so far).
        for _ in 0..64 {
            if !self.hosts[h].output_open() {
                break;
            }
            let events = self.hosts[h].read_out(&mut self.read_buf, 64);
            if events.is_empty() {
                break;
            }
            self.on_host_events(h, events);
        }
        self.hosts[h].close(&mut self.read_buf);
        self.hosts[h].agent_running = false;
        if self.replicated() {
            let host = &self.hosts[h];
            let why = format!(
                "was lost with host {}: the agent ({}) {}",
                host.name,
                host.shown,
                how.describe()
            );
            let code = match how {
                Termination::Exited(c) if c != 0 => c,
                _ => 1,
            };
            self.lose_host(h, &why, code);
            return;
        }
        let lost = self.host_lost(h);
        if !lost.is_empty() && matches!(self.phase, Phase::Running) {
            let host = &self.hosts[h];
            let list: Vec<String> = lost.iter().map(u32::to_string).collect();
            eprintln!(
                "tandem: host {}: the agent ({}) {} while rank(s) {} were to run there",
                host.name,
                host.shown,
                how.describe(),
                list.join(", ")
            );
            let code = match how {
                Termination::Exited(c) if c != 0 => c,
                _ => 1,
            };
            self.begin_stop(code, libc::SIGTERM);
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

    /// Checks whether every rank has been waiting, none using the CPU, for
    /// `stall_warn_s`: then says so (once per such stretch); the job waits.
    fn watch_idle(&mut self, now: Instant) {
        let Some(watch) = self.idle_watch.as_mut() else {
            return;
        };
        let running = self.ranks.iter().filter(|r| r.running);
        if let Some(idle) = watch.check(now, running.map(|r| (r.rank, r.pid))) {
            let n = self.ranks.iter().filter(|r| r.running).count();
            let all = if n == 1 {
                "the job's one rank is".to_string()
            } else {
                format!("all {n} running ranks are")
            };
            eprintln!(
                "tandem: no rank has used the CPU for {} s: {all} waiting, on each other (a receive, probe or collective that nothing will match: a deadlock) or on something outside the job; the job waits (--timeout ends it)",
                idle.as_secs()
            );
        }
    }

    /// Checks this host's processes for being stopped too long.
    fn watch_stopped(&mut self, now: Instant) {
        let Some(watch) = self.stop_watch.as_mut() else {
            return;
        };
        let here = self.ranks.iter().filter(|r| r.running && r.host.is_none());
        let over = watch.check(now, here.map(|r| (r.rank, r.pid)));
        for (rank, long) in over {
            if let Some(i) = self.ranks.iter().position(|r| r.rank == rank && r.running) {
                self.on_stopped(i, long);
            }
        }
    }

    /// Process `i` has been stopped (by a signal or a debugger) for `long`:
    /// a replica is declared failed and killed, so that its rank goes on
    /// with its other replicas (its peers cannot tell it from a slow one);
    /// a rank of an unreplicated job is named, and waited for.
    fn on_stopped(&mut self, i: usize, long: Duration) {
        if !matches!(self.phase, Phase::Running) || self.ranks[i].stopping {
            return;
        }
        if !self.replicated() {
            let r = &self.ranks[i];
            let whom = match r.host {
                None => format!("pid {}", r.pid),
                Some(h) => format!("pid {} on {}", r.pid, self.hosts[h].name),
            };
            eprintln!(
                "tandem: rank {} ({whom}) has been stopped (SIGSTOP, SIGTSTP or a debugger) for {} s; the job waits for it",
                r.rank,
                long.as_secs()
            );
            return;
        }
        let limit = self.stop_watch.as_ref().map_or(long, StopWatch::limit);
        self.ranks[i].verdict = Some(format!(
            "was stopped (SIGSTOP or a debugger) for more than replica_timeout_ms ({} ms); declared failed and killed",
            limit.as_millis()
        ));
        match self.ranks[i].host {
            // Not reaped yet, so the group id cannot have been reused.
            None => sys::signal_group(self.ranks[i].pid, libc::SIGKILL),
            Some(h) => {
                let rank = self.ranks[i].rank;
                self.hosts[h].kill(rank);
            }
        }
    }

    /// Why a rank's end fails the job, and the launcher's exit status.
    fn failure(&self, rank: u32, how: Termination) -> Option<(String, i32)> {
        let verdict = self
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .and_then(|r| r.verdict.clone());
        if let Some(why) = verdict {
            return Some((why, how.exit_code()));
        }
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
        // A replicated job's fence waits only for processes that have not
        // ended (`KvService::mark_gone`).
        if !matches!(self.phase, Phase::Running)
            || self.service.ranks_in_fence() == 0
            || self.replicated()
        {
            return;
        }
        // Worlds fence apart: a spawned world that has ended holds up no one.
        let fencing = self.service.worlds_in_fence();
        if let Some(gone) = self
            .ranks
            .iter()
            .find(|r| !r.running && fencing.iter().any(|w| w.contains(&r.rank)))
        {
            eprintln!(
                "tandem: {} (pid {}) has exited, but other ranks are waiting for it in a fence",
                self.process_name(gone.rank),
                gone.pid
            );
            self.begin_stop(1, libc::SIGTERM);
        }
    }

    /// How messages name process `p`: `rank R`, or for a process
    /// `MPI_Comm_spawn` started, its rank in its world and the spawn.
    fn process_name(&self, p: u32) -> String {
        match self
            .spawned
            .iter()
            .position(|&(base, n)| (base..base + n).contains(&p))
        {
            Some(i) => format!(
                "rank {} of spawned world {} (process {p})",
                p - self.spawned[i].0,
                i + 1
            ),
            None => format!("rank {p}"),
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
        let who = if self.replicated() {
            let n = self.logical();
            format!("rank {} replica {}", rank % n, rank / n)
        } else {
            self.process_name(rank)
        };
        if message.is_empty() {
            eprintln!("tandem: {who} called MPI_Abort with error code {code}");
        } else {
            eprintln!("tandem: {who} called MPI_Abort with error code {code}: {message}");
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
        self.close_remote_stdin();
        self.phase = Phase::Stopping {
            exit_code,
            kill_at: Instant::now() + KILL_GRACE,
            killed: false,
            give_up_at: None,
            stopped,
        };
    }

    fn signal_running(&mut self, signal: libc::c_int) -> usize {
        let mut n = 0;
        let mut hosts = vec![false; self.hosts.len()];
        for r in self.ranks.iter().filter(|r| r.running) {
            match r.host {
                None => sys::signal_group(r.pid, signal),
                Some(h) => hosts[h] = true,
            }
            n += 1;
        }
        for (h, wanted) in hosts.into_iter().enumerate() {
            if wanted {
                self.hosts[h].signal(signal);
            }
        }
        n
    }

    /// The job's ranks (its processes unless replicated).
    fn logical(&self) -> u32 {
        self.config.ranks / self.config.replicas
    }

    fn replicated(&self) -> bool {
        self.config.replicas > 1
    }

    /// "rank r replica k (host H, pid P)" for process `i`.
    fn replica_name(&self, i: usize) -> String {
        let p = &self.ranks[i];
        let n = self.logical();
        let host = match p.host {
            None => self.config.local_host.as_str(),
            Some(h) => self.hosts[h].name.as_str(),
        };
        let pid = if p.pid > 0 {
            format!(", pid {}", p.pid)
        } else {
            String::new()
        };
        format!(
            "rank {} replica {} (host {host}{pid})",
            p.rank % n,
            p.rank / n
        )
    }

    /// Replicated jobs: process `i` has ended, normally (`failure` is
    /// `None`) or not (what happened, and the job's exit status should
    /// that end it). Keeps the job going while its rank has another
    /// replica running or finished; starts the last replicas' time once
    /// every rank has finished.
    fn replica_ended(&mut self, i: usize, failure: Option<(String, i32)>) {
        let n = self.logical();
        let p = self.ranks[i].rank;
        let (r, k) = ((p % n) as usize, p / n);
        self.live[r] = self.live[r].saturating_sub(1);
        if failure.is_none() {
            self.done[r] += 1;
            if self.done[r] == 1 {
                self.ranks_done += 1;
            }
        }
        if let Some(abort) = self.service.mark_gone(p) {
            self.on_abort(abort);
        }
        if !matches!(self.phase, Phase::Running) {
            return;
        }
        let Some((what, code)) = failure else {
            if self.ranks_done == n
                && self.replica_deadline.is_none()
                && self.stragglers_give_up.is_none()
                && self.ranks.iter().any(|x| x.running)
            {
                self.replica_deadline = Some(Instant::now() + self.config.replica_timeout);
            }
            return;
        };
        if self.ranks[i].stopping {
            eprintln!(
                "tandem: rank {r} replica {k} did not finish within replica_timeout_ms ({} ms) of its rank's other replicas; stopped it",
                self.config.replica_timeout.as_millis()
            );
        } else if self.live[r] > 0 || self.done[r] > 0 {
            eprintln!(
                "tandem: {} {what}; continuing on its other replicas",
                self.replica_name(i)
            );
        } else {
            // Its last words, such as they are, before the verdict.
            self.printed.flush_partials(Some(r as u32));
            let name = self.replica_name(i);
            let last = name.strip_prefix(&format!("rank {r} ")).unwrap_or(&name);
            eprintln!(
                "tandem: rank {r} lost all its {} replicas; the last, {last}, {what}",
                self.config.replicas
            );
            self.begin_stop(code, libc::SIGTERM);
        }
    }

    /// Replicated jobs: every rank has a replica that finished and the
    /// others had their time; they are stopped (woken first in case they
    /// are stopped by a signal), which is not a failure.
    fn stop_stragglers(&mut self, now: Instant) {
        for i in 0..self.ranks.len() {
            if !self.ranks[i].running {
                continue;
            }
            self.ranks[i].stopping = true;
            match self.ranks[i].host {
                // Not reaped yet, so the group id cannot have been reused.
                None => {
                    sys::signal_group(self.ranks[i].pid, libc::SIGCONT);
                    sys::signal_group(self.ranks[i].pid, libc::SIGKILL);
                }
                Some(h) => {
                    let rank = self.ranks[i].rank;
                    self.hosts[h].kill(rank);
                }
            }
        }
        self.stragglers_give_up = Some(now + REAP_GRACE);
    }

    fn finish(mut self) -> i32 {
        self.kill_leftovers();
        for out in &mut self.outputs {
            out.close(&mut self.read_buf, &mut self.printed);
        }
        let ranks: Vec<u32> = self.remote_out.keys().map(|k| k.0).collect();
        for rank in ranks {
            self.flush_remote_output(rank, false);
        }
        // Partial last lines of replicas that died, where no replica of
        // their rank got further.
        self.printed.flush_partials(None);
        for h in &mut self.hosts {
            h.close(&mut self.read_buf);
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
                if stopped > 0 && self.config.replicas > 1 {
                    let es = if stopped == 1 { "" } else { "es" };
                    eprintln!("tandem: stopped the remaining {stopped} process{es}");
                } else if stopped > 0 {
                    let s = if stopped == 1 { "" } else { "s" };
                    eprintln!("tandem: stopped the remaining {stopped} rank{s}");
                }
                exit_code
            }
        }
    }
}

/// The program a spawned app runs, as `Command` will find it: a name
/// without a slash is looked for in the app's `path` directories (then in
/// `PATH`, which `Command` searches), a relative one from its `wdir`.
fn resolve_program(app: &tandem::dynamic::SpawnApp) -> Result<OsString, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = String::from_utf8_lossy(&app.command).into_owned();
    if app.command.is_empty() {
        return Err("no command to spawn".into());
    }
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let command = std::path::Path::new(OsStr::from_bytes(&app.command));
    if app.command.contains(&b'/') {
        let full = match &app.wdir {
            Some(dir) if command.is_relative() => {
                std::path::Path::new(OsStr::from_bytes(dir)).join(command)
            }
            _ => command.to_path_buf(),
        };
        return if executable(&full) {
            // Absolute, so that a `wdir` does not move it.
            Ok(std::path::absolute(&full).unwrap_or(full).into_os_string())
        } else {
            Err(format!("cannot spawn '{shown}': no such executable file"))
        };
    }
    let dirs = app
        .path
        .iter()
        .flat_map(|p| {
            p.split(|&b| b == b':')
                .map(|d| d.to_vec())
                .collect::<Vec<_>>()
        })
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    p.as_bytes()
                        .split(|&b| b == b':')
                        .map(|d| d.to_vec())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        );
    for dir in dirs.filter(|d| !d.is_empty()) {
        let full = std::path::Path::new(OsStr::from_bytes(&dir)).join(command);
        if executable(&full) {
            return Ok(full.into_os_string());
        }
    }
    Err(format!(
        "cannot spawn '{shown}': not found in the path info key or PATH"
    ))
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
pub(super) fn spawn_error(rank: u32, program: &OsStr, e: &io::Error) -> (String, i32) {
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
pub(super) fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

//! The rank's side of the launcher's key-value and fence service.
//!
//! `tandem run` is the job's master. It gives every rank these environment
//! variables:
//!
//! | variable | meaning |
//! |---|---|
//! | `TANDEM_JOB_RANK` | this rank, `0..size` |
//! | `TANDEM_JOB_SIZE` | ranks in the job |
//! | `TANDEM_JOB_LOCAL_SIZE` | ranks on this host |
//! | `TANDEM_JOB_ADDR` | `host:port` of the master's service (loopback for one host) |
//! | `TANDEM_JOB_SECRET_FD` | a pipe holding the per-job secret (64 hex digits), which the rank reads and closes at `MPI_Init`, so that neither its environment nor the processes it starts carry the secret (`TANDEM_JOB_SECRET`, the secret itself, is read when the pipe is absent) |
//! | `TANDEM_JOB_ID` | a short job identifier |
//! | `TANDEM_JOB_HOSTS` | hosts the job spans (absent: 1; more than one makes TCP listen beyond loopback) |
//! | `TANDEM_JOB_NODE_ADDR` | the address this host used to reach the master (the TCP transport's default listening address in multi-host jobs) |
//! | `TANDEM_JOB_REPLICAS` | replicas per rank (absent: 1). With R replicas of N ranks, `TANDEM_JOB_SIZE` is N x R processes and process p is replica p / N of rank p % N |
//! | `TANDEM_JOB_APPNUM` | which of the job's programs this is (`MPI_APPNUM`; `tandem run -n 1 ./a : -n 2 ./b` has two), from 0 (absent: 0) |
//!
//! The service speaks a line protocol over TCP: one request per line, words
//! separated by single spaces, each answered by one line. Keys and values are
//! printable ASCII without spaces.
//!
//! | request | answer |
//! |---|---|
//! | `HELLO <secret> <rank>` | `OK`; anything else (wrong secret, bad or duplicate rank) and the master closes the connection |
//! | `PING <secret>` (instead of `HELLO`, from `tandem _host`) | `PONG`: this is the job's master |
//! | `PUT <key> <value>` | `OK` |
//! | `GET <key>` | `VALUE <value>` or `MISSING` |
//! | `FENCE` | `OK`, sent once every rank of the job has sent `FENCE` |
//! | `FINALIZE` | `OK`; the rank will exit normally. A rank that said `HELLO` and exits without `FINALIZE` is reported as failed |
//! | `ABORT <code> <message...>` | none: the master reports the abort, stops every rank and exits with `code` |
//!
//! The master sends nothing unasked. When the connection closes, the job is
//! over (the master died or is stopping everyone).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crate::error::{Error, ErrorClass};

/// Names of the job environment variables.
pub mod env {
    pub const RANK: &str = "TANDEM_JOB_RANK";
    pub const SIZE: &str = "TANDEM_JOB_SIZE";
    pub const LOCAL_SIZE: &str = "TANDEM_JOB_LOCAL_SIZE";
    pub const ADDR: &str = "TANDEM_JOB_ADDR";
    pub const SECRET: &str = "TANDEM_JOB_SECRET";
    pub const SECRET_FD: &str = "TANDEM_JOB_SECRET_FD";
    pub const ID: &str = "TANDEM_JOB_ID";
    pub const HOSTS: &str = "TANDEM_JOB_HOSTS";
    pub const NODE_ADDR: &str = "TANDEM_JOB_NODE_ADDR";
    pub const REPLICAS: &str = "TANDEM_JOB_REPLICAS";
    pub const APPNUM: &str = "TANDEM_JOB_APPNUM";
    /// This rank's index among the ranks of its host.
    pub const LOCAL_RANK: &str = "TANDEM_JOB_LOCAL_RANK";
    /// Processes started by `MPI_Comm_spawn`: the job's process id of
    /// their world's rank 0 (processes of the first world are 0..SIZE).
    pub const WORLD_BASE: &str = "TANDEM_JOB_WORLD_BASE";
    /// Processes started by `MPI_Comm_spawn`: `SPAWN_ID:ROOT:SIZE`, the
    /// spawn's number, the process id of the parents' root and the size of
    /// the parents' group.
    pub const PARENT: &str = "TANDEM_JOB_PARENT";
}

/// How long a rank tries to reach the master before giving up.
const MASTER_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the secret from the pipe the launcher left open as descriptor
/// `fd`, and closes it. Anything but a pipe is left alone: the variable
/// may have been inherited by a program the rank started, where the number
/// names another file.
fn read_secret_pipe(fd: &str) -> Result<String, String> {
    let fd: libc::c_int = fd
        .parse()
        .map_err(|_| "not a descriptor number".to_string())?;
    // SAFETY: `stat` is plain data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes; an invalid descriptor only makes
    // fstat fail.
    if fd < 0 || unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err("not open (read already?)".into());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return Err("not a pipe".into());
    }
    let mut buf = [0u8; 2 * SECRET_BYTES + 1];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the range `got..` of `buf` is valid for writes.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0
            || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            break;
        }
    }
    // SAFETY: the descriptor is the secret's pipe, which nothing else uses.
    unsafe { libc::close(fd) };
    String::from_utf8(buf[..got].to_vec()).map_err(|_| "not text".into())
}

/// Length of the job secret in bytes (it travels as twice as many hex digits).
pub const SECRET_BYTES: usize = 32;

/// What a rank learns about its job at start-up.
#[derive(Clone, Debug)]
pub struct JobInfo {
    pub rank: u32,
    pub size: u32,
    pub local_size: u32,
    /// This rank's index among the ranks of its host.
    pub local_rank: u32,
    /// Under a PMIx server: the rank of this host's first rank, which
    /// makes the host's shared-memory segment (`tandem run` makes it
    /// itself).
    pub node_leader: Option<u32>,
    pub secret: [u8; SECRET_BYTES],
    pub id: String,
    /// `None` for a singleton (a program started without `tandem run`).
    pub master: Option<String>,
    /// Hosts the job spans; with more than one, TCP listens beyond loopback.
    pub hosts: u32,
    /// The address this host reached the master from (a hint for TCP).
    pub node_addr: Option<String>,
    /// Replicas of every rank (1: none). With more, `rank` and `size`
    /// count processes (see [`env::REPLICAS`]).
    pub replicas: u32,
    /// Which of the job's programs this process runs (`MPI_APPNUM`).
    pub appnum: u32,
    /// The process id of this world's rank 0: 0, except in a world
    /// `MPI_Comm_spawn` started (process ids are job-wide; see
    /// [`JobInfo::process`]).
    pub world_base: u32,
    /// The spawn that started this world, if one did.
    pub parent: Option<ParentInfo>,
}

/// How processes `MPI_Comm_spawn` started reach their parents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParentInfo {
    /// The spawn's number in the job (its messages' tag).
    pub spawn: u32,
    /// Process id of the parents' root.
    pub root: u32,
    /// Size of the parents' group.
    pub size: u32,
}

impl ParentInfo {
    /// Parses [`env::PARENT`]'s value.
    pub fn parse(text: &str) -> Option<ParentInfo> {
        let mut words = text.split(':').map(|w| w.parse::<u32>().ok());
        let info = ParentInfo {
            spawn: words.next()??,
            root: words.next()??,
            size: words.next()??,
        };
        (words.next().is_none() && info.size > 0).then_some(info)
    }
}

impl JobInfo {
    /// This process's id in the job: its world rank, offset by the
    /// processes of the worlds started before its own.
    pub fn process(&self) -> u32 {
        self.world_base + self.rank
    }
}

impl JobInfo {
    /// Reads the job description from the environment; a program started
    /// without `tandem run` is a singleton job of one rank.
    pub fn from_env() -> Result<JobInfo, Error> {
        let Ok(addr) = std::env::var(env::ADDR) else {
            if let Some(client) = pmi2::Client::from_env() {
                return Self::from_pmi2(client?);
            }
            if let Some(client) = pmix::Client::from_env() {
                return Self::from_pmix(client?);
            }
            check_not_under_a_batch_system()?;
            return Ok(JobInfo {
                rank: 0,
                size: 1,
                local_size: 1,
                local_rank: 0,
                node_leader: None,
                secret: random_secret(),
                id: format!("singleton-{}", std::process::id()),
                master: None,
                hosts: 1,
                node_addr: None,
                replicas: 1,
                appnum: 0,
                world_base: 0,
                parent: None,
            });
        };
        let num = |name: &str| -> Result<u32, Error> {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or_else(|| {
                    Error::new(
                        ErrorClass::Other,
                        format!("launcher variable {name} is missing or malformed"),
                    )
                })
        };
        let rank = num(env::RANK)?;
        let size = num(env::SIZE)?;
        let local_size = num(env::LOCAL_SIZE).unwrap_or(size);
        if size == 0 || rank >= size {
            return Err(Error::new(
                ErrorClass::Other,
                format!("launcher gave rank {rank} of {size}"),
            ));
        }
        let replicas = num(env::REPLICAS).unwrap_or(1).max(1);
        if replicas > crate::replica::MAX_REPLICAS
            || size % replicas != 0
            || (replicas > 1 && size / replicas > crate::replica::MAX_RANKS)
        {
            return Err(Error::new(
                ErrorClass::Other,
                format!("launcher gave {replicas} replicas of a job of {size} processes"),
            ));
        }
        let world_base = num(env::WORLD_BASE).unwrap_or(0);
        let parent = match std::env::var(env::PARENT) {
            Err(_) => None,
            Ok(text) => Some(ParentInfo::parse(&text).ok_or_else(|| {
                Error::new(
                    ErrorClass::Other,
                    format!("launcher variable {} is malformed", env::PARENT),
                )
            })?),
        };
        if u64::from(world_base) + u64::from(size) > u64::from(crate::transport::tcp::MAX_PROCESSES)
            || (replicas > 1 && (world_base > 0 || parent.is_some()))
        {
            return Err(Error::new(
                ErrorClass::Other,
                format!("launcher gave a world of {size} processes from process {world_base}"),
            ));
        }
        let secret_hex = match std::env::var(env::SECRET_FD) {
            Ok(fd) => read_secret_pipe(&fd).map_err(|why| {
                Error::new(
                    ErrorClass::Other,
                    format!("{} ({fd}): {why}", env::SECRET_FD),
                )
            })?,
            Err(_) => std::env::var(env::SECRET).unwrap_or_default(),
        };
        let secret = decode_secret(&secret_hex).ok_or_else(|| {
            Error::new(
                ErrorClass::Other,
                format!(
                    "the job secret ({} or {}) is missing or malformed",
                    env::SECRET_FD,
                    env::SECRET
                ),
            )
        })?;
        Ok(JobInfo {
            rank,
            size,
            local_size,
            local_rank: num(env::LOCAL_RANK).unwrap_or(0),
            node_leader: None,
            secret,
            id: std::env::var(env::ID).unwrap_or_default(),
            master: Some(addr),
            hosts: num(env::HOSTS).unwrap_or(1).max(1),
            node_addr: std::env::var(env::NODE_ADDR).ok().filter(|a| !a.is_empty()),
            replicas,
            appnum: num(env::APPNUM).unwrap_or(0),
            world_base,
            parent,
        })
    }
}

impl JobInfo {
    /// A job started by Slurm's `srun --mpi=pmi2`: rank and size from the
    /// PMI-2 server, a secret rank 0 makes and publishes through it (only
    /// the job's processes reach the server), hosts from the process
    /// mapping. The client waits in [`MANAGER`] for [`MasterLink::connect`].
    fn from_pmi2(mut client: pmi2::Client) -> Result<JobInfo, Error> {
        let (rank, size) = (client.rank, client.size);
        let (hosts, local_size) = client
            .job_attr("PMI_process_mapping")
            .and_then(|m| pmi2::parse_mapping(&m, rank))
            .unwrap_or((1, size));
        let secret = shared_secret(&mut client, rank, "PMI-2")?;
        let slurm = |v: &str| std::env::var(v).unwrap_or_default();
        let id = format!("slurm-{}.{}", slurm("SLURM_JOB_ID"), slurm("SLURM_STEP_ID"));
        *MANAGER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(client));
        Ok(JobInfo {
            rank,
            size,
            local_size: local_size.max(1),
            // srun numbers the tasks of a node.
            local_rank: std::env::var("SLURM_LOCALID")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            node_leader: None,
            secret,
            id,
            master: Some(MANAGER_MASTER.to_string()),
            hosts: hosts.max(1),
            node_addr: None,
            replicas: 1,
            appnum: 0,
            world_base: 0,
            parent: None,
        })
    }

    /// A job started by a PMIx server (`srun --mpi=pmix`, `prterun`, Open
    /// MPI's `mpirun`): rank, size, the ranks of this node and the nodes
    /// from the server, a secret as under PMI-2. The client waits in
    /// [`MANAGER`] for [`MasterLink::connect`].
    fn from_pmix(mut client: pmix::Client) -> Result<JobInfo, Error> {
        let rank = client.rank;
        let secret = shared_secret(&mut client, rank, "PMIx")?;
        let info = JobInfo {
            rank: client.rank,
            size: client.size,
            local_size: client.local_size,
            local_rank: client.local_rank,
            node_leader: client.node_leader,
            secret,
            id: format!("pmix-{}", client.namespace()),
            master: Some(MANAGER_MASTER.to_string()),
            hosts: client.nodes,
            node_addr: None,
            replicas: 1,
            appnum: client.appnum,
            world_base: 0,
            parent: None,
        };
        *MANAGER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(client));
        Ok(info)
    }
}

#[path = "bootstrap_pmi2.rs"]
pub(crate) mod pmi2;

#[path = "bootstrap_pmix.rs"]
mod pmix;

/// `JobInfo::master` of a job whose master is a process manager's server
/// (PMI-2 or PMIx).
const MANAGER_MASTER: &str = "process-manager";

/// What the key-value service of a process manager's server (PMI-2 or
/// PMIx) offers a rank: the operations of [`MasterLink`].
pub(crate) trait ProcessManager: Send {
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error>;
    fn get(&mut self, key: &str) -> Result<Option<String>, Error>;
    fn fence(&mut self) -> Result<(), Error>;
    fn finalize(&mut self) -> Result<(), Error>;
    fn abort(&mut self, code: i32, message: &str);
    /// The connection to the server, if the client has one of its own.
    fn fd(&self) -> RawFd;
}

/// The client between [`JobInfo::from_env`] and [`MasterLink::connect`].
static MANAGER: std::sync::Mutex<Option<Box<dyn ProcessManager>>> = std::sync::Mutex::new(None);

/// The job secret, made by rank 0 and published through the server (only
/// the job's processes reach it).
fn shared_secret(
    manager: &mut dyn ProcessManager,
    rank: u32,
    what: &str,
) -> Result<[u8; SECRET_BYTES], Error> {
    const SECRET_KEY: &str = "tandem.secret";
    if rank == 0 {
        manager.put(SECRET_KEY, &encode_secret(&random_secret()))?;
    }
    manager.fence()?;
    manager
        .get(SECRET_KEY)?
        .and_then(|s| decode_secret(&s))
        .ok_or_else(|| {
            Error::new(
                ErrorClass::Other,
                format!("{what}: rank 0 published no job secret"),
            )
        })
}

/// A program started by a batch system's launcher without a process
/// manager interface Tandem speaks would run as many unrelated singletons:
/// say so instead.
fn check_not_under_a_batch_system() -> Result<(), Error> {
    let tasks = std::env::var("SLURM_STEP_NUM_TASKS")
        .or_else(|_| std::env::var("SLURM_NTASKS"))
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(1);
    let in_step = std::env::var_os("SLURM_STEP_ID").is_some();
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
        return Err(Error::new(
            ErrorClass::Other,
            "started by Open MPI's mpirun, whose processes cannot join a Tandem job: start Tandem programs with `tandem run` (or Tandem's own mpirun)",
        ));
    }
    if in_step && tasks > 1 {
        return Err(Error::new(
            ErrorClass::Other,
            format!(
                "started by srun as one of {tasks} tasks without a process-management interface: use `srun --mpi=pmix` or `srun --mpi=pmi2` (or `tandem run`)"
            ),
        ));
    }
    Ok(())
}

/// Random bytes from the kernel.
pub fn random_secret() -> [u8; SECRET_BYTES] {
    let mut buf = [0u8; SECRET_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`,
        // which is valid for writes for its whole length.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!("getrandom failed: {}", std::io::Error::last_os_error());
        }
    }
    buf
}

/// Hex encoding of a secret.
pub fn encode_secret(secret: &[u8; SECRET_BYTES]) -> String {
    secret.iter().map(|b| format!("{b:02x}")).collect()
}

/// Decodes 64 hex digits.
pub fn decode_secret(hex: &str) -> Option<[u8; SECRET_BYTES]> {
    // Digits only: `from_str_radix` would also take a sign (`+f`).
    if hex.len() != SECRET_BYTES * 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; SECRET_BYTES];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Compares secrets in time independent of where they differ.
pub fn secrets_equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A connection to the master: `tandem run`'s service, the PMI-2 server of
/// a job started by `srun --mpi=pmi2`, or the PMIx server of one started by
/// `srun --mpi=pmix` and other PMIx launchers.
pub struct MasterLink {
    inner: Link,
}

enum Link {
    Tandem {
        reader: BufReader<TcpStream>,
        writer: TcpStream,
    },
    Manager(Box<dyn ProcessManager>),
}

impl MasterLink {
    /// Connects and authenticates.
    pub fn connect(job: &JobInfo) -> Result<MasterLink, Error> {
        let addr = job.master.as_deref().expect("singleton has no master");
        if addr == MANAGER_MASTER {
            let client = MANAGER
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| {
                    Error::new(
                        ErrorClass::Other,
                        "the process manager's connection is already in use",
                    )
                })?;
            return Ok(MasterLink {
                inner: Link::Manager(client),
            });
        }
        let connected = match addr.parse::<std::net::SocketAddr>() {
            Ok(sa) => TcpStream::connect_timeout(&sa, MASTER_CONNECT_TIMEOUT),
            Err(_) => TcpStream::connect(addr),
        };
        let stream = connected.map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!(
                    "cannot reach the launcher at {addr}: {e} ({})",
                    crate::transport::tcp::likely_cause(&e)
                ),
            )
        })?;
        stream.set_nodelay(true).ok();
        let writer = stream
            .try_clone()
            .map_err(|e| Error::new(ErrorClass::Other, format!("launcher socket: {e}")))?;
        let mut link = MasterLink {
            inner: Link::Tandem {
                reader: BufReader::new(stream),
                writer,
            },
        };
        let hello = format!("HELLO {} {}", encode_secret(&job.secret), job.process());
        let reply = link.request(&hello).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!(
                    "the launcher refused rank {} (wrong job secret, or the rank is already connected): {e}",
                    job.rank
                ),
            )
        })?;
        if reply != "OK" {
            return Err(Error::new(
                ErrorClass::Other,
                format!("launcher refused this rank: {reply}"),
            ));
        }
        Ok(link)
    }

    /// The socket, so the progress engine can notice when the master goes away.
    pub fn fd(&self) -> RawFd {
        match &self.inner {
            Link::Tandem { writer, .. } => writer.as_raw_fd(),
            Link::Manager(m) => m.fd(),
        }
    }

    fn send_line(&mut self, line: &str) -> Result<(), Error> {
        let mut msg = String::with_capacity(line.len() + 1);
        msg.push_str(line);
        msg.push('\n');
        let Link::Tandem { writer, .. } = &mut self.inner else {
            return Err(Error::new(ErrorClass::Intern, "not a tandem run master"));
        };
        writer
            .write_all(msg.as_bytes())
            .map_err(|e| Error::new(ErrorClass::Other, format!("lost the launcher: {e}")))
    }

    fn request(&mut self, line: &str) -> Result<String, Error> {
        self.send_line(line)?;
        let mut reply = String::new();
        let Link::Tandem { reader, .. } = &mut self.inner else {
            return Err(Error::new(ErrorClass::Intern, "not a tandem run master"));
        };
        match reader.read_line(&mut reply) {
            Ok(0) => Err(Error::new(
                ErrorClass::Other,
                "the launcher closed the connection (the job is ending)",
            )),
            Ok(_) => Ok(reply.trim_end().to_string()),
            Err(e) => Err(Error::new(
                ErrorClass::Other,
                format!("lost the launcher: {e}"),
            )),
        }
    }

    /// Publishes `key = value`.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        check_token(key)?;
        check_token(value)?;
        if let Link::Manager(c) = &mut self.inner {
            return c.put(key, value);
        }
        expect_ok(self.request(&format!("PUT {key} {value}"))?)
    }

    /// Looks up a key published by any rank before the last fence.
    pub fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        check_token(key)?;
        if let Link::Manager(c) = &mut self.inner {
            return c.get(key);
        }
        let reply = self.request(&format!("GET {key}"))?;
        if let Some(v) = reply.strip_prefix("VALUE ") {
            Ok(Some(v.to_string()))
        } else if reply == "MISSING" {
            Ok(None)
        } else {
            Err(Error::new(
                ErrorClass::Other,
                format!("launcher answered '{reply}' to GET"),
            ))
        }
    }

    /// Forgets `key` (nothing if it is not there).
    pub fn delete(&mut self, key: &str) -> Result<(), Error> {
        check_token(key)?;
        if let Link::Manager(_) = &self.inner {
            return Err(Error::new(
                ErrorClass::Unsupported,
                "the process manager's key-value service cannot forget a key",
            ));
        }
        expect_ok(self.request(&format!("DEL {key}"))?)
    }

    /// Asks the launcher to start processes (`MPI_Comm_spawn`): `request`
    /// is the SPAWN line's words after the verb (see `crate::dynamic`).
    /// The spawn's number and the process id of the new world's rank 0.
    pub fn spawn(&mut self, request: &str) -> Result<(u32, u32), Error> {
        if let Link::Manager(_) = &self.inner {
            return Err(Error::new(
                ErrorClass::Spawn,
                "processes started by a process manager's server (srun, mpirun) cannot spawn \
                 more: start the job with `tandem run`",
            ));
        }
        let reply = self.request(&format!("SPAWN {request}"))?;
        let words: Vec<&str> = reply.split(' ').collect();
        match words.as_slice() {
            ["SPAWNED", id, base] => match (id.parse(), base.parse()) {
                (Ok(id), Ok(base)) => Ok((id, base)),
                _ => Err(Error::new(
                    ErrorClass::Intern,
                    format!("launcher answered '{reply}' to SPAWN"),
                )),
            },
            _ => Err(Error::new(
                ErrorClass::Spawn,
                match reply.strip_prefix("ERROR ") {
                    Some(why) => why.to_string(),
                    None => format!("launcher answered '{reply}' to SPAWN"),
                },
            )),
        }
    }

    /// Waits until every rank has reached the fence.
    pub fn fence(&mut self) -> Result<(), Error> {
        if let Link::Manager(c) = &mut self.inner {
            return c.fence();
        }
        expect_ok(self.request("FENCE")?)
    }

    /// Says this rank finalized cleanly.
    pub fn finalize(&mut self) -> Result<(), Error> {
        if let Link::Manager(c) = &mut self.inner {
            return c.finalize();
        }
        expect_ok(self.request("FINALIZE")?)
    }

    /// Asks the master to end the job with `code`.
    pub fn abort(&mut self, code: i32, message: &str) {
        let clean: String = message
            .chars()
            .map(|c| if c == '\n' { ' ' } else { c })
            .collect();
        if let Link::Manager(c) = &mut self.inner {
            c.abort(code, &clean);
            return;
        }
        let _ = self.send_line(&format!("ABORT {code} {clean}"));
    }

    /// Sets a bound on how long one request may take.
    pub fn set_timeout(&self, t: Option<Duration>) {
        if let Link::Tandem { writer, .. } = &self.inner {
            let _ = writer.set_read_timeout(t);
        }
    }
}

fn expect_ok(reply: String) -> Result<(), Error> {
    if reply == "OK" {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Other,
            format!("launcher answered '{reply}'"),
        ))
    }
}

fn check_token(s: &str) -> Result<(), Error> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Intern,
            format!("'{s}' is not a valid key-value token"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_round_trip() {
        let s = random_secret();
        assert_eq!(decode_secret(&encode_secret(&s)), Some(s));
        assert!(decode_secret("zz").is_none());
        assert!(secrets_equal(&s, &s));
        let mut t = s;
        t[31] ^= 1;
        assert!(!secrets_equal(&s, &t));
    }

    /// `from_str_radix` takes a sign: `+f` passed as a digit pair, so a
    /// secret had more than one accepted spelling.
    #[test]
    fn secret_with_signs_is_refused() {
        assert_eq!(decode_secret(&"+f".repeat(SECRET_BYTES)), None);
        let mut s = encode_secret(&[0xab; SECRET_BYTES]);
        s.replace_range(0..2, "+a");
        assert_eq!(decode_secret(&s), None);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        proptest! {
            #![proptest_config(config())]

            /// Any text decodes or is refused, and what decodes is the
            /// secret's hex spelling (in either case).
            #[test]
            fn prop_decode_secret_is_total_and_canonical(
                text in prop_oneof![
                    any::<String>(),
                    "[0-9a-fA-F+ \\-]{64}",
                    "[0-9a-f]{62}[^0-9a-f]{1}",
                    "[0-9a-fé]{60,66}",
                ],
            ) {
                if let Some(s) = decode_secret(&text) {
                    prop_assert_eq!(encode_secret(&s), text.to_ascii_lowercase());
                }
            }

            #[test]
            fn prop_secret_round_trips(s in any::<[u8; SECRET_BYTES]>()) {
                prop_assert_eq!(decode_secret(&encode_secret(&s)), Some(s));
                prop_assert_eq!(decode_secret(&encode_secret(&s).to_ascii_uppercase()), Some(s));
            }
        }
    }
}

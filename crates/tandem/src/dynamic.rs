//! Processes that join a running job (MPI 4.1 chapter 11.8-11.10): worlds
//! started by `MPI_Comm_spawn`, ports (`MPI_Comm_accept`/`_connect`),
//! published names, and `MPI_Comm_join`.
//!
//! Process ids are job-wide: the first world is 0..N, and each spawn gets
//! the next free block from the launcher, so a communicator's group (its
//! members' process ids) means the same in every world. A process learns of
//! processes started after it when a communicator names them
//! (`P2p::register_context` makes room for them); their TCP connections
//! wait unread until then (`TcpTransport::add_processes`). Between worlds,
//! processes talk over TCP, also on one host.
//!
//! Every connection ends in the leaders' swap of intercommunicator
//! creation (`Runtime::intercomm_over`). The two leaders find each other
//! on the bridge context, which belongs to no communicator: its frames carry
//! their sender's process id as source, so any two processes can use it,
//! and the tag tells the operation:
//!
//! * `[0, 2^28)`: spawn number `n` (the parents' root and the children's
//!   rank 0);
//! * `[2^28, 2^29)`: a connect request to port `n` of the accepting process;
//! * `[2^29, 2^30)`: an accept/connect pair, numbered by the connecting root;
//! * `[2^30, 2^31)`: `MPI_Comm_join`, numbered by the lower process id.

use std::collections::{BTreeSet, HashMap};
use std::os::fd::RawFd;

use crate::error::{Error, ErrorClass, Result};
use crate::intercomm::LeaderLink;
use crate::p2p::{Envelope, SendMode};
use crate::runtime::{CommId, Runtime, SELF, WORLD};
use crate::transport::tcp::MAX_PROCESSES;

/// The context of the leaders' messages (see the module's notes); the
/// communicator id it would belong to is never handed out
/// ([`BRIDGE_CID`]).
const BRIDGE_CONTEXT: u32 = 2 * BRIDGE_CID;
/// Context ids from here on belong to no communicator.
pub(crate) const BRIDGE_CID: u32 = (1 << 21) - 1;
const PORT_TAGS: i32 = 1 << 28;
const PAIR_TAGS: i32 = 1 << 29;
const JOIN_TAGS: i32 = 1 << 30;
const TAG_BITS: u32 = (1 << 28) - 1;
/// What a port's name starts with.
const PORT_PREFIX: &str = "tandem-port";

/// One program of `MPI_Comm_spawn(_multiple)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnApp {
    pub command: Vec<u8>,
    pub args: Vec<Vec<u8>>,
    pub procs: u32,
    /// The `wdir` info key: the directory the processes start in.
    pub wdir: Option<Vec<u8>>,
    /// The `path` info key: directories to look for the command in.
    pub path: Option<Vec<u8>>,
}

/// What a process keeps of the dynamic-process calls.
#[derive(Default)]
pub(crate) struct Dynamic {
    /// The intercommunicator to the parents, in a spawned world.
    parent: Option<CommId>,
    /// Ports this process opened and has not closed.
    ports: BTreeSet<u32>,
    next_port: u32,
    /// Accept/connect pairs this process started as the connecting root.
    next_pair: u32,
    /// Names published by a singleton, which has no launcher to keep them.
    names: HashMap<String, String>,
}

/// `x` and the bytes' hex digits: a token of the launcher's line protocol
/// for any bytes, the empty string included.
pub fn encode_word(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(1 + 2 * bytes.len());
    s.push('x');
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The bytes of an [`encode_word`] token.
pub fn decode_word(word: &str) -> Option<Vec<u8>> {
    let hex = word.strip_prefix('x')?;
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The words of a SPAWN request after the verb: the parents' root and
/// group size, then each program as `PROCS COMMAND NARGS ARG... WDIR PATH`
/// (strings as [`encode_word`] tokens, `-` for no `wdir` or `path`).
pub fn encode_spawn(root: u32, parents: u32, apps: &[SpawnApp]) -> String {
    let mut words = vec![
        root.to_string(),
        parents.to_string(),
        apps.len().to_string(),
    ];
    for a in apps {
        words.push(a.procs.to_string());
        words.push(encode_word(&a.command));
        words.push(a.args.len().to_string());
        words.extend(a.args.iter().map(|w| encode_word(w)));
        for opt in [&a.wdir, &a.path] {
            words.push(opt.as_deref().map_or("-".to_string(), encode_word));
        }
    }
    words.join(" ")
}

/// A SPAWN request's parts: the parents' root and group size, and the
/// programs; `None` if malformed.
pub fn decode_spawn(words: &[&str]) -> Option<(u32, u32, Vec<SpawnApp>)> {
    let mut it = words.iter();
    let mut num = || it.next()?.parse::<u32>().ok();
    let root = num()?;
    let parents = num()?;
    let napps = num()?;
    let mut rest = &words[3..];
    let mut apps = Vec::new();
    for _ in 0..napps {
        let (&[procs, command, nargs], tail) = rest.split_first_chunk::<3>()?;
        let nargs: usize = nargs.parse().ok()?;
        if tail.len() < nargs + 2 {
            return None;
        }
        let opt = |w: &str| -> Option<Option<Vec<u8>>> {
            if w == "-" {
                Some(None)
            } else {
                decode_word(w).map(Some)
            }
        };
        apps.push(SpawnApp {
            procs: procs.parse().ok()?,
            command: decode_word(command)?,
            args: tail[..nargs]
                .iter()
                .map(|w| decode_word(w))
                .collect::<Option<_>>()?,
            wdir: opt(tail[nargs])?,
            path: opt(tail[nargs + 1])?,
        });
        rest = &tail[nargs + 2..];
    }
    rest.is_empty().then_some((root, parents, apps))
}

/// Port `n` of process `process` in job `job`, as its name reads.
fn port_name(job: &str, process: u32, n: u32) -> String {
    format!("{PORT_PREFIX}:{job}:{process}:{n}")
}

/// The (job, process, number) of a port's name.
fn parse_port(name: &str) -> Result<(&str, u32, u32)> {
    let bad = || {
        Error::new(
            ErrorClass::Port,
            format!("'{name}' is not a port name MPI_Open_port gave"),
        )
    };
    let rest = name.strip_prefix(PORT_PREFIX).ok_or_else(bad)?;
    let mut parts = rest.strip_prefix(':').ok_or_else(bad)?.rsplitn(3, ':');
    let n = parts.next().and_then(|w| w.parse::<u32>().ok());
    let process = parts.next().and_then(|w| w.parse::<u32>().ok());
    let job = parts.next();
    match (job, process, n) {
        (Some(job), Some(p), Some(n)) if p < MAX_PROCESSES && n <= TAG_BITS => Ok((job, p, n)),
        _ => Err(bad()),
    }
}

/// The key a published name is kept under.
fn name_key(service: &str) -> String {
    format!("name.{}", encode_word(service.as_bytes()))
}

impl Runtime {
    /// The link of a leader to the leader `other` (a process id) on the
    /// bridge context, for the operation `tag`.
    fn bridge_link(&self, other: u32, tag: i32) -> LeaderLink {
        LeaderLink {
            env: Envelope {
                ctx: BRIDGE_CONTEXT,
                src: self.rank(),
                tag,
            },
            to: (other, other),
        }
    }

    /// Sends `words` to `to` on the bridge context and waits until they
    /// have left.
    fn bridge_send(&mut self, to: u32, tag: i32, words: &[u32]) -> Result<()> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let env = Envelope {
            ctx: BRIDGE_CONTEXT,
            src: self.rank(),
            tag,
        };
        self.p2p.add_processes(to + 1);
        // SAFETY: `bytes` lives until the send completes, below.
        let id = unsafe {
            self.p2p
                .isend(env, to, bytes.as_ptr(), bytes.len(), SendMode::Standard)?
        };
        let st = self.wait_request(id)?;
        st.error.map_or(Ok(()), Err)
    }

    /// Receives `n` words on the bridge context from `from` (any process if
    /// `None`) with `tag`. While it waits, processes this one has not heard
    /// of may connect (a connecting root from a later world): they are
    /// taken in, since the message may be theirs.
    fn bridge_recv(&mut self, from: Option<u32>, tag: i32, n: usize) -> Result<Vec<u32>> {
        let mut buf = vec![0u8; 4 * n];
        // SAFETY: `buf` lives until the receive completes, below.
        let id = unsafe {
            self.p2p.irecv(
                BRIDGE_CONTEXT,
                from.map(|p| (p, p)),
                Some(tag),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        loop {
            self.wait_until(|p, _| p.is_complete(id) != Some(false) || p.has_parked_process());
            if let Some(last) = self.p2p.parked_process() {
                self.p2p.add_processes(last + 1);
            }
            if self.p2p.is_complete(id) != Some(false) {
                break;
            }
        }
        let st = self.p2p.take_if_complete(id).unwrap_or_default();
        if let Some(e) = st.error {
            return Err(e);
        }
        if st.count != buf.len() {
            return Err(Error::new(
                ErrorClass::Intern,
                format!(
                    "a message of {} bytes where {} were due",
                    st.count,
                    buf.len()
                ),
            ));
        }
        Ok(buf
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
            .collect())
    }

    /// `MPI_Comm_spawn(_multiple)`, collective over the intracommunicator
    /// `comm`: the launcher starts `apps` (significant at `root` only) as a
    /// new world, and returns once they are all in `MPI_Init`. The
    /// intercommunicator to them, and how many were started.
    pub fn spawn(
        &mut self,
        comm: CommId,
        root: u32,
        apps: Option<std::result::Result<&[SpawnApp], Error>>,
    ) -> Result<(CommId, u32)> {
        let c = self.comm(comm)?.clone();
        let outcome = (c.rank == root).then(|| self.ask_spawn(c.size(), apps));
        let words = self.share_outcome(comm, root, outcome, 3)?;
        let (spawn, base, total) = (words[0], words[1], words[2]);
        self.p2p.add_processes(base + total);
        let link = (c.rank == root).then(|| Ok(self.bridge_link(base, spawn_tag(spawn))));
        let inter = self.intercomm_over(comm, root, link, total as usize)?;
        Ok((inter, total))
    }

    /// The root's part of [`Runtime::spawn`]: (spawn number, first process
    /// id, processes).
    fn ask_spawn(
        &mut self,
        parents: u32,
        apps: Option<std::result::Result<&[SpawnApp], Error>>,
    ) -> Result<Vec<u32>> {
        let apps =
            apps.ok_or_else(|| Error::new(ErrorClass::Intern, "no programs at the root"))??;
        if self.replicated() {
            return Err(Error::new(
                ErrorClass::Spawn,
                "a job of replicated ranks (--replicas) cannot spawn processes",
            ));
        }
        let total: u64 = apps.iter().map(|a| u64::from(a.procs)).sum();
        if total == 0 || total > u64::from(MAX_PROCESSES) {
            return Err(Error::new(
                ErrorClass::Spawn,
                format!("cannot start {total} processes"),
            ));
        }
        let master = self.master.clone().ok_or_else(|| {
            Error::new(
                ErrorClass::Spawn,
                "a program started without `tandem run` cannot spawn processes: start it with \
                 `tandem run -n 1 PROGRAM`",
            )
        })?;
        let request = encode_spawn(self.rank(), parents, apps);
        let mut link = master.lock().unwrap_or_else(|p| p.into_inner());
        let (spawn, base) = link.spawn(&request)?;
        Ok(vec![spawn, base, total as u32])
    }

    /// In a world `MPI_Comm_spawn` started: connects to the parents (at
    /// the end of `MPI_Init`, collective over the world).
    pub(crate) fn join_parent(&mut self) -> Result<()> {
        let Some(p) = self.job.parent else {
            return Ok(());
        };
        let link = (self.job.rank == 0).then(|| Ok(self.bridge_link(p.root, spawn_tag(p.spawn))));
        let inter = self.intercomm_over(WORLD, 0, link, p.size as usize)?;
        self.dynamic.parent = Some(inter);
        Ok(())
    }

    /// `MPI_Comm_get_parent`: the intercommunicator to the processes that
    /// spawned this world, unless it was freed or disconnected.
    pub fn parent(&self) -> Option<CommId> {
        self.dynamic
            .parent
            .filter(|&id| self.comms.get(id.0).is_some_and(Option::is_some))
    }

    /// The parent intercommunicator is gone (freed or disconnected).
    pub fn forget_parent(&mut self, id: CommId) {
        if self.dynamic.parent == Some(id) {
            self.dynamic.parent = None;
        }
    }

    /// `MPI_Open_port`: a new port of this process, by name.
    pub fn open_port(&mut self) -> Result<String> {
        let n = self.dynamic.next_port;
        if n > TAG_BITS {
            return Err(Error::new(
                ErrorClass::Port,
                "this process has opened all the ports it can",
            ));
        }
        self.dynamic.next_port += 1;
        self.dynamic.ports.insert(n);
        Ok(port_name(&self.job.id, self.rank(), n))
    }

    /// `MPI_Close_port`.
    pub fn close_port(&mut self, name: &str) -> Result<()> {
        let (job, process, n) = parse_port(name)?;
        if job != self.job.id || process != self.rank() || !self.dynamic.ports.remove(&n) {
            return Err(Error::new(
                ErrorClass::Port,
                format!("'{name}' is not a port this process has open"),
            ));
        }
        Ok(())
    }

    /// `MPI_Comm_accept`, collective over the intracommunicator `comm`:
    /// waits at `root` for one connection to `port` (significant there
    /// only), which must be open at this process.
    pub fn accept(&mut self, port: Option<&str>, root: u32, comm: CommId) -> Result<CommId> {
        let c = self.comm(comm)?.clone();
        let outcome = (c.rank == root).then(|| -> Result<Vec<u32>> {
            let name = port.ok_or_else(|| Error::new(ErrorClass::Intern, "no port at the root"))?;
            let (job, process, n) = parse_port(name)?;
            if job != self.job.id || process != self.rank() || !self.dynamic.ports.contains(&n) {
                return Err(Error::new(
                    ErrorClass::Port,
                    format!("'{name}' is not a port this process has open"),
                ));
            }
            // [connecting root, its pair number, its group's size]
            let req = self.bridge_recv(None, PORT_TAGS | n as i32, 3)?;
            let (who, pair, size) = (req[0], req[1], req[2]);
            if who >= MAX_PROCESSES || pair > TAG_BITS || size == 0 || size >= MAX_PROCESSES {
                return Err(Error::new(
                    ErrorClass::Intern,
                    "malformed connection request",
                ));
            }
            self.bridge_send(who, PAIR_TAGS | pair as i32, &[c.size()])?;
            Ok(vec![who, pair, size])
        });
        let words = self.share_outcome(comm, root, outcome, 3)?;
        let (who, pair, size) = (words[0], words[1], words[2]);
        let link = (c.rank == root).then(|| Ok(self.bridge_link(who, PAIR_TAGS | pair as i32)));
        self.intercomm_over(comm, root, link, size as usize)
    }

    /// `MPI_Comm_connect`, collective over the intracommunicator `comm`:
    /// `root` connects to `port` (significant there only), which a process
    /// of this job opened; returns once it accepted.
    pub fn connect(&mut self, port: Option<&str>, root: u32, comm: CommId) -> Result<CommId> {
        let c = self.comm(comm)?.clone();
        let outcome = (c.rank == root).then(|| -> Result<Vec<u32>> {
            let name = port.ok_or_else(|| Error::new(ErrorClass::Intern, "no port at the root"))?;
            let (job, process, n) = parse_port(name)?;
            if job != self.job.id {
                return Err(Error::new(
                    ErrorClass::Port,
                    format!(
                        "port '{name}' belongs to another job: Tandem connects the processes of \
                         one `tandem run` (its spawned ones included)"
                    ),
                ));
            }
            if process == self.rank() && !self.dynamic.ports.contains(&n) {
                return Err(Error::new(
                    ErrorClass::Port,
                    format!("port '{name}' is not open"),
                ));
            }
            let pair = self.dynamic.next_pair & TAG_BITS;
            self.dynamic.next_pair = self.dynamic.next_pair.wrapping_add(1);
            self.bridge_send(
                process,
                PORT_TAGS | n as i32,
                &[self.rank(), pair, c.size()],
            )?;
            let answer = self.bridge_recv(Some(process), PAIR_TAGS | pair as i32, 1)?;
            if answer[0] == 0 || answer[0] >= MAX_PROCESSES {
                return Err(Error::new(
                    ErrorClass::Intern,
                    "malformed answer to a connection",
                ));
            }
            Ok(vec![process, pair, answer[0]])
        });
        let words = self.share_outcome(comm, root, outcome, 3)?;
        let (process, pair, size) = (words[0], words[1], words[2]);
        let link = (c.rank == root).then(|| Ok(self.bridge_link(process, PAIR_TAGS | pair as i32)));
        self.intercomm_over(comm, root, link, size as usize)
    }

    /// `MPI_Publish_name`: `port` under `service`, for every process of the
    /// job (through the launcher).
    pub fn publish_name(&mut self, service: &str, port: &str) -> Result<()> {
        let key = name_key(service);
        let value = encode_word(port.as_bytes());
        let Some(master) = self.master.clone() else {
            if self.dynamic.names.contains_key(&key) {
                return Err(already_published(service));
            }
            self.dynamic.names.insert(key, value);
            return Ok(());
        };
        let mut link = master.lock().unwrap_or_else(|p| p.into_inner());
        if link.get(&key)?.is_some() {
            return Err(already_published(service));
        }
        link.put(&key, &value)
    }

    /// `MPI_Lookup_name`: the port published under `service`.
    pub fn lookup_name(&mut self, service: &str) -> Result<String> {
        let key = name_key(service);
        let found = match self.master.clone() {
            None => self.dynamic.names.get(&key).cloned(),
            Some(master) => master.lock().unwrap_or_else(|p| p.into_inner()).get(&key)?,
        };
        found
            .and_then(|v| decode_word(&v))
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Name,
                    format!("no port is published under '{service}'"),
                )
            })
    }

    /// `MPI_Unpublish_name`.
    pub fn unpublish_name(&mut self, service: &str, port: &str) -> Result<()> {
        let key = name_key(service);
        let value = encode_word(port.as_bytes());
        let missing = || {
            Error::new(
                ErrorClass::Service,
                format!("'{port}' is not published under '{service}'"),
            )
        };
        let Some(master) = self.master.clone() else {
            if self.dynamic.names.get(&key) != Some(&value) {
                return Err(missing());
            }
            self.dynamic.names.remove(&key);
            return Ok(());
        };
        let mut link = master.lock().unwrap_or_else(|p| p.into_inner());
        if link.get(&key)?.as_deref() != Some(value.as_str()) {
            return Err(missing());
        }
        link.delete(&key)
    }

    /// `MPI_Comm_join`: an intercommunicator of this process and the one at
    /// the other end of the connected socket `fd`, a process of this job.
    pub fn join(&mut self, fd: RawFd) -> Result<CommId> {
        let nonce = self.dynamic.next_pair & TAG_BITS;
        self.dynamic.next_pair = self.dynamic.next_pair.wrapping_add(1);
        let mine = join_greeting(&self.job.id, self.rank(), nonce);
        let theirs = exchange_on_socket(fd, &mine)?;
        if theirs[..12] != mine[..12] {
            return Err(Error::new(
                ErrorClass::Other,
                "MPI_Comm_join: the other end is not a process of this Tandem job",
            ));
        }
        let word = |i: usize| u32::from_le_bytes(theirs[i..i + 4].try_into().expect("4 bytes"));
        let (other, their_nonce) = (word(12), word(16) & TAG_BITS);
        if other >= MAX_PROCESSES || other == self.rank() {
            return Err(Error::new(
                ErrorClass::Other,
                "MPI_Comm_join: the other end is this process",
            ));
        }
        let tag = JOIN_TAGS
            | (if self.rank() < other {
                nonce
            } else {
                their_nonce
            }) as i32;
        self.p2p.add_processes(other + 1);
        let link = Some(Ok(self.bridge_link(other, tag)));
        self.intercomm_over(SELF, 0, link, 1)
    }
}

fn already_published(service: &str) -> Error {
    Error::new(
        ErrorClass::Service,
        format!("a port is published under '{service}' already"),
    )
}

/// The tag of spawn number `n` on the bridge context.
fn spawn_tag(n: u32) -> i32 {
    (n & TAG_BITS) as i32
}

/// What each end of `MPI_Comm_join` writes: "TJN1", a hash of the job's
/// id, 4 bytes of zero, its process id and its number for the pair.
fn join_greeting(job: &str, process: u32, nonce: u32) -> [u8; 20] {
    let mut h: u32 = 0x811c_9dc5;
    for &b in job.as_bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let mut g = [0u8; 20];
    g[..4].copy_from_slice(b"TJN1");
    g[4..8].copy_from_slice(&h.to_le_bytes());
    g[12..16].copy_from_slice(&process.to_le_bytes());
    g[16..20].copy_from_slice(&nonce.to_le_bytes());
    g
}

/// Writes `mine` to the socket and reads as many bytes back, waiting as
/// long as it takes (an end that closes the socket ends the wait).
fn exchange_on_socket(fd: RawFd, mine: &[u8; 20]) -> Result<[u8; 20]> {
    let fail = |what: &str| {
        Error::new(
            ErrorClass::Other,
            format!(
                "MPI_Comm_join: {what} on descriptor {fd}: {}",
                std::io::Error::last_os_error()
            ),
        )
    };
    let mut sent = 0;
    let mut theirs = [0u8; 20];
    let mut got = 0;
    while sent < mine.len() || got < theirs.len() {
        let mut p = libc::pollfd {
            fd,
            events: if sent < mine.len() { libc::POLLOUT } else { 0 }
                | if got < theirs.len() { libc::POLLIN } else { 0 },
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(fail("poll failed"));
        }
        if p.revents & libc::POLLNVAL != 0 {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("MPI_Comm_join: descriptor {fd} is not open"),
            ));
        }
        if sent < mine.len() && p.revents & (libc::POLLOUT | libc::POLLERR) != 0 {
            // SAFETY: the range is within `mine`.
            let w = unsafe {
                libc::send(
                    fd,
                    mine[sent..].as_ptr().cast(),
                    mine.len() - sent,
                    libc::MSG_NOSIGNAL,
                )
            };
            if w < 0 {
                let e = std::io::Error::last_os_error().kind();
                if !matches!(
                    e,
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) {
                    return Err(fail("cannot write"));
                }
            } else {
                sent += w as usize;
            }
        }
        if got < theirs.len() && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            // SAFETY: the range is within `theirs`.
            let r =
                unsafe { libc::recv(fd, theirs[got..].as_mut_ptr().cast(), theirs.len() - got, 0) };
            if r == 0 {
                return Err(Error::new(
                    ErrorClass::Other,
                    format!("MPI_Comm_join: the other end closed descriptor {fd}"),
                ));
            }
            if r < 0 {
                let e = std::io::Error::last_os_error().kind();
                if !matches!(
                    e,
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) {
                    return Err(fail("cannot read"));
                }
            } else {
                got += r as usize;
            }
        }
    }
    Ok(theirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_requests_round_trip() {
        let apps = vec![
            SpawnApp {
                command: b"/bin/prog with space".to_vec(),
                args: vec![b"".to_vec(), b"-x".to_vec(), vec![0xff, b' ']],
                procs: 3,
                wdir: Some(b"/tmp".to_vec()),
                path: None,
            },
            SpawnApp {
                command: b"b".to_vec(),
                args: vec![],
                procs: 1,
                wdir: None,
                path: Some(b"/usr/bin:/bin".to_vec()),
            },
        ];
        let line = encode_spawn(7, 2, &apps);
        assert!(line.bytes().all(|b| b.is_ascii_graphic() || b == b' '));
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(decode_spawn(&words), Some((7, 2, apps)));
        // Truncated or padded requests are refused.
        assert_eq!(decode_spawn(&words[..words.len() - 1]), None);
        let mut longer = words.clone();
        longer.push("x");
        assert_eq!(decode_spawn(&longer), None);
        assert_eq!(
            decode_spawn(&["1", "1", "1", "2", "zz", "0", "-", "-"]),
            None
        );
    }

    #[test]
    fn port_names_parse_back() {
        let name = port_name("ab12-cd:x", 5, 9);
        assert_eq!(parse_port(&name).unwrap(), ("ab12-cd:x", 5, 9));
        for bad in [
            "",
            "tandem-port",
            "tandem-port:j:1",
            "other:j:1:2",
            "tandem-port:j:x:2",
        ] {
            assert_eq!(
                parse_port(bad).unwrap_err().class,
                ErrorClass::Port,
                "{bad}"
            );
        }
    }

    #[test]
    fn words_encode_any_bytes() {
        for b in [&b""[..], b"a b", &[0, 255, 10]] {
            assert_eq!(decode_word(&encode_word(b)).as_deref(), Some(b));
        }
        assert_eq!(decode_word("abc"), None);
        assert_eq!(decode_word("x1"), None);
        assert_eq!(decode_word("xzz"), None);
    }
}

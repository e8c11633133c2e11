//! The master's key-value and fence service (the server side of the line
//! protocol documented in `tandem::bootstrap`).
//!
//! Every connection must authenticate with `HELLO <secret> <rank>` first.
//! Anything unexpected from a client — a wrong secret, a malformed or
//! over-long line, a request before HELLO, a rank that already said HELLO,
//! no HELLO within [`HELLO_TIMEOUT`] — silently closes that connection;
//! the job carries on.
//!
//! Ranks here are the job's processes (`TANDEM_JOB_RANK`): in a replicated
//! job, every replica of a rank. There a process that has ended is marked
//! [gone](KvService::mark_gone), and a fence completes once every process
//! not gone has entered it.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use tandem::bootstrap::secrets_equal;

/// Longest request line accepted, without its newline.
pub const MAX_LINE: usize = 64 * 1024;
/// How long a new connection has to say HELLO.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Unauthenticated connections held at once; further ones wait in the
/// listen backlog, so strangers cannot exhaust the launcher's descriptors.
const MAX_HANDSHAKES: usize = 64;
/// Input held for a rank that pipelines requests behind a pending FENCE.
const MAX_BUFFERED_INPUT: usize = 1 << 20;
/// Pause after accept fails for lack of descriptors, so a listener that
/// stays readable does not spin the event loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Replies held for a rank that does not read them.
const MAX_UNSENT_OUTPUT: usize = 16 << 20;

/// One request, parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum Request<'a> {
    Hello {
        secret: &'a str,
        rank: u32,
    },
    /// A per-host helper checking that this is its job's master.
    Ping {
        secret: &'a str,
    },
    Put {
        key: &'a str,
        value: &'a str,
    },
    Get {
        key: &'a str,
    },
    Delete {
        key: &'a str,
    },
    Fence,
    Finalize,
    /// `MPI_Comm_spawn` at a parents' root: the words after the verb (see
    /// `tandem::dynamic::encode_spawn`).
    Spawn {
        words: Vec<&'a str>,
    },
    Abort {
        code: i32,
        message: &'a str,
    },
}

/// Parses one line (without its newline); `None` if it is malformed.
pub fn parse_request(line: &str) -> Option<Request<'_>> {
    // "FENCE " is as malformed as "PUT  k v": words are separated by single spaces.
    let (verb, rest, words): (&str, &str, Vec<&str>) = match line.split_once(' ') {
        Some((verb, rest)) => (verb, rest, rest.split(' ').collect()),
        None => (line, "", Vec::new()),
    };
    match (verb, words.as_slice()) {
        ("HELLO", [secret, rank]) => Some(Request::Hello {
            secret,
            rank: parse_rank(rank)?,
        }),
        ("PING", [secret]) => Some(Request::Ping { secret }),
        ("PUT", [key, value]) if is_token(key) && is_token(value) => {
            Some(Request::Put { key, value })
        }
        ("GET", [key]) if is_token(key) => Some(Request::Get { key }),
        ("DEL", [key]) if is_token(key) => Some(Request::Delete { key }),
        ("SPAWN", w) if w.len() >= 3 && w.iter().all(|w| is_token(w)) => {
            Some(Request::Spawn { words: w.to_vec() })
        }
        ("FENCE", []) => Some(Request::Fence),
        ("FINALIZE", []) => Some(Request::Finalize),
        ("ABORT", _) => {
            // The message is free text, spaces included.
            let (code, message) = rest.split_once(' ').unwrap_or((rest, ""));
            let code = code.parse::<i32>().ok()?;
            Some(Request::Abort { code, message })
        }
        _ => None,
    }
}

fn parse_rank(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Keys and values are non-empty printable ASCII without spaces.
fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic())
}

/// A parents' root asked for processes (`MPI_Comm_spawn`); the job starts
/// them and answers with [`KvService::spawned`] or [`KvService::answer`].
#[derive(Debug, PartialEq, Eq)]
pub struct SpawnRequest {
    /// The service's connection that asked.
    pub conn: u64,
    pub rank: u32,
    pub words: Vec<String>,
}

/// A rank asked to end the job.
#[derive(Debug, PartialEq, Eq)]
pub struct AbortRequest {
    pub rank: u32,
    pub code: i32,
    pub message: String,
}

/// Which of the service's descriptors became ready.
#[derive(Clone, Copy, Debug)]
pub enum Token {
    Listener(usize),
    Conn(u64),
}

#[derive(Clone, Copy)]
enum ConnState {
    AwaitingHello { deadline: Instant },
    Rank { rank: u32, in_fence: bool },
}

struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    state: ConnState,
}

impl Conn {
    fn in_fence(&self) -> bool {
        matches!(self.state, ConnState::Rank { in_fence: true, .. })
    }
}

/// What to do after one request.
enum Step {
    Reply(String),
    /// FENCE: the answer comes when every rank has arrived.
    Wait,
    Close,
    Abort(AbortRequest),
}

/// Processes `base..base + size`, started together.
struct World {
    base: u32,
    size: u32,
    /// Of them, how many wait in a fence.
    in_fence: u32,
    /// The answer owed to the root that spawned this world, given once the
    /// world has passed its first fence (every process is in `MPI_Init`
    /// and has published its address): (connection, answer).
    spawned_answer: Option<(u64, String)>,
}

/// The service: listener, connections, the shared map and fence state.
pub struct KvService {
    /// Empty once the service is shut down.
    listeners: Vec<TcpListener>,
    addrs: Vec<SocketAddr>,
    secret_hex: String,
    size: u32,
    conns: BTreeMap<u64, Conn>,
    next_id: u64,
    store: HashMap<String, String>,
    said_hello: Vec<bool>,
    finalized: Vec<bool>,
    /// Processes that have ended (replicated jobs only), and how many.
    gone: Vec<bool>,
    gone_count: u32,
    /// The job's worlds: the first, and one per `MPI_Comm_spawn`. Each
    /// fences apart.
    worlds: Vec<World>,
    fence_released: bool,
    /// Spawn requests for the job to carry out.
    spawns: Vec<SpawnRequest>,
    accept_paused_until: Option<Instant>,
}

impl KvService {
    /// Listens on a free port of each address in `ips` (loopback alone for
    /// a single-host job) for a job of `size` ranks.
    pub fn bind(size: u32, secret_hex: String, ips: &[IpAddr]) -> io::Result<KvService> {
        let mut listeners = Vec::new();
        let mut addrs = Vec::new();
        for ip in ips {
            let listener = TcpListener::bind((*ip, 0))
                .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {ip}: {e}")))?;
            listener.set_nonblocking(true)?;
            addrs.push(listener.local_addr()?);
            listeners.push(listener);
        }
        Ok(KvService {
            listeners,
            addrs,
            secret_hex,
            size,
            conns: BTreeMap::new(),
            next_id: 0,
            store: HashMap::new(),
            said_hello: vec![false; size as usize],
            finalized: vec![false; size as usize],
            gone: vec![false; size as usize],
            gone_count: 0,
            worlds: vec![World {
                base: 0,
                size,
                in_fence: 0,
                spawned_answer: None,
            }],
            fence_released: false,
            spawns: Vec::new(),
            accept_paused_until: None,
        })
    }

    /// A value some rank published.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.store.get(key).map(String::as_str)
    }

    /// The addresses ranks connect to, in the order of `bind`'s `ips`.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn said_hello(&self, rank: u32) -> bool {
        self.said_hello[rank as usize]
    }

    pub fn finalized(&self, rank: u32) -> bool {
        self.finalized[rank as usize]
    }

    /// Processes currently waiting in a fence.
    pub fn ranks_in_fence(&self) -> u32 {
        self.worlds.iter().map(|w| w.in_fence).sum()
    }

    /// The processes (`base..base + size`) of worlds with processes in a
    /// fence.
    pub fn worlds_in_fence(&self) -> Vec<std::ops::Range<u32>> {
        self.worlds
            .iter()
            .filter(|w| w.in_fence > 0)
            .map(|w| w.base..w.base + w.size)
            .collect()
    }

    /// Processes in the job, spawned ones included.
    pub fn processes(&self) -> u32 {
        self.size
    }

    /// A new world of `size` processes (`MPI_Comm_spawn`): the id of its
    /// first process. Its processes may say HELLO from now on.
    pub fn add_world(&mut self, size: u32) -> u32 {
        let base = self.size;
        self.size += size;
        let n = self.size as usize;
        self.said_hello.resize(n, false);
        self.finalized.resize(n, false);
        self.gone.resize(n, false);
        self.worlds.push(World {
            base,
            size,
            in_fence: 0,
            spawned_answer: None,
        });
        base
    }

    /// The spawn request of `conn` made world number `world`: the root is
    /// told `answer` once every new process has passed its first fence.
    pub fn answer_when_started(&mut self, conn: u64, base: u32, answer: String) {
        if let Some(w) = self.worlds.iter_mut().find(|w| w.base == base) {
            w.spawned_answer = Some((conn, answer));
        }
    }

    /// Process `rank` has ended: if its world was spawned and has not
    /// passed its first fence, the spawning root is told the spawn failed
    /// (it would otherwise wait for ever: a spawned program that never
    /// calls `MPI_Init`, or dies first).
    pub fn ended(&mut self, rank: u32, why: &str) {
        let w = self.world_of(rank);
        if let Some((conn, _)) = self.worlds[w].spawned_answer.take() {
            let text = format!("ERROR spawned process {rank} {why} before MPI_Init completed");
            self.send(conn, &text.replace('\n', " "));
        }
    }

    /// Answers a request now (a spawn that failed).
    pub fn answer(&mut self, conn: u64, answer: &str) {
        self.send(conn, answer);
    }

    /// Spawn requests received since the last call.
    pub fn take_spawns(&mut self) -> Vec<SpawnRequest> {
        std::mem::take(&mut self.spawns)
    }

    /// The world of process `rank`.
    fn world_of(&self, rank: u32) -> usize {
        self.worlds
            .iter()
            .rposition(|w| w.base <= rank)
            .unwrap_or(0)
    }

    /// A replicated job's process `rank` has ended (died or finished): the
    /// fence no longer waits for it. Completing a fence may let requests
    /// queued behind it through, an ABORT among them.
    pub fn mark_gone(&mut self, rank: u32) -> Option<AbortRequest> {
        let gone = self.gone.get_mut(rank as usize)?;
        if *gone {
            return None;
        }
        *gone = true;
        self.gone_count += 1;
        let w = self.world_of(rank);
        if self.worlds[w].in_fence > 0 && self.fence_ready(w) {
            self.release_fence(w);
            return self.process_all();
        }
        None
    }

    /// Whether every process of world `w` that has not ended is in the fence.
    fn fence_ready(&self, w: usize) -> bool {
        let world = &self.worlds[w];
        let range = world.base..world.base + world.size;
        if self.gone_count == 0 {
            return world.in_fence == world.size;
        }
        let gone = self.gone[range.start as usize..range.end as usize]
            .iter()
            .filter(|&&g| g)
            .count() as u32;
        let waiting = self
            .conns
            .values()
            .filter(|c| match c.state {
                ConnState::Rank {
                    rank,
                    in_fence: true,
                } => range.contains(&rank) && !self.gone[rank as usize],
                _ => false,
            })
            .count() as u32;
        waiting > 0 && waiting + gone == world.size
    }

    /// Descriptors to poll, with their events.
    pub fn interest(&self, out: &mut Vec<(RawFd, libc::c_short, Token)>) {
        if self.handshakes() < MAX_HANDSHAKES && self.accept_paused_until.is_none() {
            for (i, l) in self.listeners.iter().enumerate() {
                out.push((l.as_raw_fd(), libc::POLLIN, Token::Listener(i)));
            }
        }
        for (&id, c) in &self.conns {
            let mut events = libc::POLLIN;
            if !c.output.is_empty() {
                events |= libc::POLLOUT;
            }
            out.push((c.stream.as_raw_fd(), events, Token::Conn(id)));
        }
    }

    /// Handles readiness of one descriptor; returns a rank's ABORT request.
    pub fn on_ready(&mut self, token: Token, revents: libc::c_short) -> Option<AbortRequest> {
        match token {
            Token::Listener(i) => {
                self.accept_all(i);
                None
            }
            Token::Conn(id) => {
                if revents & libc::POLLOUT != 0 {
                    self.flush(id);
                }
                if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                    if let Some(abort) = self.read(id) {
                        return Some(abort);
                    }
                }
                if self.fence_released {
                    return self.process_all();
                }
                None
            }
        }
    }

    /// When the next unauthenticated connection times out (or accepting
    /// resumes).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|c| match c.state {
                ConnState::AwaitingHello { deadline } => Some(deadline),
                ConnState::Rank { .. } => None,
            })
            .chain(self.accept_paused_until)
            .min()
    }

    /// Drops connections that did not say HELLO in time; ends an accept pause.
    pub fn expire(&mut self, now: Instant) {
        if self.accept_paused_until.is_some_and(|t| t <= now) {
            self.accept_paused_until = None;
        }
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.state, ConnState::AwaitingHello { deadline } if deadline <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            self.close(id);
        }
    }

    /// Closes the listener and every connection: ranks see the job ending.
    pub fn shutdown(&mut self) {
        self.listeners.clear();
        self.conns.clear();
        for w in &mut self.worlds {
            w.in_fence = 0;
        }
    }

    fn handshakes(&self) -> usize {
        self.conns
            .values()
            .filter(|c| matches!(c.state, ConnState::AwaitingHello { .. }))
            .count()
    }

    fn accept_all(&mut self, index: usize) {
        while self.handshakes() < MAX_HANDSHAKES {
            let Some(listener) = self.listeners.get(index) else {
                return;
            };
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // Out of descriptors (or another transient error): the
                // connection stays queued; try again a little later.
                Err(_) => {
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = stream.set_nodelay(true);
            let id = self.next_id;
            self.next_id += 1;
            self.conns.insert(
                id,
                Conn {
                    stream,
                    input: Vec::new(),
                    output: Vec::new(),
                    state: ConnState::AwaitingHello {
                        deadline: Instant::now() + HELLO_TIMEOUT,
                    },
                },
            );
        }
    }

    /// Reads what the connection has, handling each complete line as it comes.
    fn read(&mut self, id: u64) -> Option<AbortRequest> {
        let mut buf = [0u8; 16 * 1024];
        for _ in 0..64 {
            let conn = self.conns.get_mut(&id)?;
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    self.close(id);
                    return None;
                }
                Ok(n) => {
                    conn.input.extend_from_slice(&buf[..n]);
                    if conn.input.len() > MAX_BUFFERED_INPUT {
                        self.close(id);
                        return None;
                    }
                    if let Some(abort) = self.process_lines(id) {
                        return Some(abort);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(_) => {
                    self.close(id);
                    return None;
                }
            }
        }
        None
    }

    /// Handles the complete lines buffered for `id`, stopping at a FENCE
    /// that is still waiting (its answer must come before later ones).
    fn process_lines(&mut self, id: u64) -> Option<AbortRequest> {
        loop {
            let conn = self.conns.get_mut(&id)?;
            if conn.in_fence() {
                return None;
            }
            let Some(end) = conn.input.iter().position(|&b| b == b'\n') else {
                if conn.input.len() > MAX_LINE {
                    self.close(id);
                }
                return None;
            };
            if end > MAX_LINE {
                self.close(id);
                return None;
            }
            let line: Vec<u8> = conn.input.drain(..=end).collect();
            match self.handle_line(id, &line[..end]) {
                Step::Reply(text) => self.send(id, &text),
                Step::Wait => {}
                Step::Close => {
                    self.close(id);
                    return None;
                }
                Step::Abort(abort) => return Some(abort),
            }
        }
    }

    /// After a fence completes, ranks may have requests queued behind it.
    fn process_all(&mut self) -> Option<AbortRequest> {
        while self.fence_released {
            self.fence_released = false;
            let ids: Vec<u64> = self.conns.keys().copied().collect();
            for id in ids {
                if let Some(abort) = self.process_lines(id) {
                    return Some(abort);
                }
            }
        }
        None
    }

    fn handle_line(&mut self, id: u64, line: &[u8]) -> Step {
        let Some(request) = std::str::from_utf8(line).ok().and_then(parse_request) else {
            return Step::Close;
        };
        let state = self.conns[&id].state;
        let (rank, request) = match (state, request) {
            (ConnState::AwaitingHello { .. }, Request::Hello { secret, rank }) => {
                let ok = secrets_equal(secret.as_bytes(), self.secret_hex.as_bytes())
                    && rank < self.size
                    && !self.said_hello[rank as usize];
                if !ok {
                    return Step::Close;
                }
                self.said_hello[rank as usize] = true;
                self.set_state(
                    id,
                    ConnState::Rank {
                        rank,
                        in_fence: false,
                    },
                );
                return Step::Reply("OK".into());
            }
            (ConnState::AwaitingHello { .. }, Request::Ping { secret }) => {
                return if secrets_equal(secret.as_bytes(), self.secret_hex.as_bytes()) {
                    Step::Reply("PONG".into())
                } else {
                    Step::Close
                };
            }
            (ConnState::AwaitingHello { .. }, _)
            | (ConnState::Rank { .. }, Request::Hello { .. }) => {
                return Step::Close;
            }
            (ConnState::Rank { rank, .. }, request) => (rank, request),
        };
        match request {
            Request::Put { key, value } => {
                self.store.insert(key.to_string(), value.to_string());
                Step::Reply("OK".into())
            }
            Request::Get { key } => Step::Reply(match self.store.get(key) {
                Some(v) => format!("VALUE {v}"),
                None => "MISSING".into(),
            }),
            Request::Delete { key } => {
                self.store.remove(key);
                Step::Reply("OK".into())
            }
            Request::Spawn { words } => {
                self.spawns.push(SpawnRequest {
                    conn: id,
                    rank,
                    words: words.iter().map(|w| w.to_string()).collect(),
                });
                Step::Wait
            }
            Request::Fence => {
                self.set_state(
                    id,
                    ConnState::Rank {
                        rank,
                        in_fence: true,
                    },
                );
                let w = self.world_of(rank);
                self.worlds[w].in_fence += 1;
                if self.fence_ready(w) {
                    self.release_fence(w);
                }
                Step::Wait
            }
            Request::Finalize => {
                self.finalized[rank as usize] = true;
                Step::Reply("OK".into())
            }
            Request::Abort { code, message } => Step::Abort(AbortRequest {
                rank,
                code,
                message: message
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect(),
            }),
            Request::Hello { .. } | Request::Ping { .. } => Step::Close,
        }
    }

    fn set_state(&mut self, id: u64, state: ConnState) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = state;
        }
    }

    /// Every process of world `w` is in the fence: answer them all.
    fn release_fence(&mut self, w: usize) {
        let world = &self.worlds[w];
        let range = world.base..world.base + world.size;
        let waiting: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                matches!(c.state, ConnState::Rank { rank, in_fence: true } if range.contains(&rank))
            })
            .map(|(&id, _)| id)
            .collect();
        for id in waiting {
            if let Some(ConnState::Rank { rank, .. }) = self.conns.get(&id).map(|c| c.state) {
                self.set_state(
                    id,
                    ConnState::Rank {
                        rank,
                        in_fence: false,
                    },
                );
            }
            self.send(id, "OK");
        }
        self.worlds[w].in_fence = 0;
        if let Some((conn, answer)) = self.worlds[w].spawned_answer.take() {
            self.send(conn, &answer);
        }
        self.fence_released = true;
    }

    fn send(&mut self, id: u64, text: &str) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.output.extend_from_slice(text.as_bytes());
        conn.output.push(b'\n');
        if conn.output.len() > MAX_UNSENT_OUTPUT {
            self.close(id);
            return;
        }
        self.flush(id);
    }

    fn flush(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        while !conn.output.is_empty() {
            match conn.stream.write(&conn.output) {
                Ok(0) => break,
                Ok(n) => {
                    conn.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.close(id);
                    return;
                }
            }
        }
    }

    fn close(&mut self, id: u64) {
        if let Some(conn) = self.conns.remove(&id) {
            if let ConnState::Rank {
                rank,
                in_fence: true,
            } = conn.state
            {
                let w = self.world_of(rank);
                self.worlds[w].in_fence -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests() {
        assert_eq!(
            parse_request("HELLO ab 3"),
            Some(Request::Hello {
                secret: "ab",
                rank: 3
            })
        );
        assert_eq!(
            parse_request("PUT k v"),
            Some(Request::Put {
                key: "k",
                value: "v"
            })
        );
        assert_eq!(parse_request("GET k"), Some(Request::Get { key: "k" }));
        assert_eq!(parse_request("FENCE"), Some(Request::Fence));
        assert_eq!(
            parse_request("PING ab"),
            Some(Request::Ping { secret: "ab" })
        );
        assert_eq!(parse_request("FINALIZE"), Some(Request::Finalize));
        assert_eq!(
            parse_request("ABORT 3 it went  wrong"),
            Some(Request::Abort {
                code: 3,
                message: "it went  wrong"
            })
        );
        assert_eq!(
            parse_request("ABORT -1"),
            Some(Request::Abort {
                code: -1,
                message: ""
            })
        );
    }

    /// A replicated job's fence completes once every process that has not
    /// ended is in it, whether the others end before or during it.
    #[test]
    fn fence_does_not_wait_for_processes_gone() {
        use std::io::{BufRead, BufReader};
        let loopback = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
        let mut service = KvService::bind(4, "ab".into(), &[loopback]).unwrap();
        let addr = service.addrs()[0];
        let mut clients = Vec::new();
        for rank in 0..3 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(format!("HELLO ab {rank}\nFENCE\n").as_bytes())
                .unwrap();
            clients.push(s);
        }
        let pump = |service: &mut KvService| {
            for _ in 0..200 {
                let mut interest = Vec::new();
                service.interest(&mut interest);
                for (_, _, token) in interest {
                    service.on_ready(token, libc::POLLIN);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        pump(&mut service);
        assert_eq!(service.ranks_in_fence(), 3);
        // Process 2 dies in the fence, process 3 never came: only 0 and 1 are waited for.
        service.mark_gone(2);
        assert_eq!(service.ranks_in_fence(), 3);
        service.mark_gone(3);
        assert_eq!(service.ranks_in_fence(), 0);
        for s in &clients[..2] {
            // HELLO's answer, then the fence's.
            let mut reader = BufReader::new(s);
            for _ in 0..2 {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                assert_eq!(line, "OK\n");
            }
        }
        // The next fence waits for 0 and 1 alone.
        clients[0].write_all(b"FENCE\n").unwrap();
        pump(&mut service);
        assert_eq!(service.ranks_in_fence(), 1);
        clients[1].write_all(b"FENCE\n").unwrap();
        pump(&mut service);
        assert_eq!(service.ranks_in_fence(), 0);
    }

    /// A spawned world fences apart from the first; its root's SPAWN is
    /// answered once the new world has passed its first fence, and a
    /// process of the new world may say HELLO only once it exists.
    #[test]
    fn spawned_worlds_fence_apart() {
        use std::io::{BufRead, BufReader};
        let loopback = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
        let mut service = KvService::bind(2, "ab".into(), &[loopback]).unwrap();
        let addr = service.addrs()[0];
        let pump = |service: &mut KvService| {
            for _ in 0..100 {
                let mut interest = Vec::new();
                service.interest(&mut interest);
                for (_, _, token) in interest {
                    service.on_ready(token, libc::POLLIN);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let connect = |hello: &str| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(hello.as_bytes()).unwrap();
            s
        };
        let read = |s: &TcpStream| {
            let mut line = String::new();
            BufReader::new(s).read_line(&mut line).unwrap();
            line
        };
        let early = connect("HELLO ab 2\n");
        let root = connect("HELLO ab 0\nSPAWN 0 2 1 2 x61 0 - -\n");
        pump(&mut service);
        assert_eq!(read(&root), "OK\n");
        let asked = service.take_spawns();
        assert_eq!(asked.len(), 1);
        assert_eq!((asked[0].rank, asked[0].words.len()), (0, 8));
        // Process 2 did not exist when it said HELLO: refused.
        let mut buf = [0u8; 8];
        assert_eq!(std::io::Read::read(&mut &early, &mut buf).unwrap_or(0), 0);
        let base = service.add_world(2);
        assert_eq!((base, service.processes()), (2, 4));
        service.answer_when_started(asked[0].conn, base, "SPAWNED 1 2".into());
        let kids: Vec<TcpStream> = (2..4)
            .map(|r| connect(&format!("HELLO ab {r}\nFENCE\n")))
            .collect();
        pump(&mut service);
        // The first world (rank 1 never came) does not hold the new one up.
        for k in &kids {
            let mut reader = BufReader::new(k);
            for _ in 0..2 {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                assert_eq!(line, "OK\n");
            }
        }
        assert_eq!(read(&root), "SPAWNED 1 2\n");
        assert_eq!(service.ranks_in_fence(), 0);
        // Nor does the new world hold the first one's fence up.
        let other = connect("HELLO ab 1\nFENCE\n");
        (&root).write_all(b"FENCE\n").unwrap();
        pump(&mut service);
        assert_eq!(service.ranks_in_fence(), 0);
        assert_eq!(read(&other), "OK\n");
    }

    #[test]
    fn rejects_malformed_requests() {
        for bad in [
            "",
            "HELLO",
            "HELLO s",
            "HELLO s +1",
            "HELLO s 1 2",
            "PUT k",
            "PUT k v w",
            "PUT  k v",
            "GET",
            "GET a b",
            "FENCE now",
            "FINALIZE ",
            "ABORT",
            "ABORT x msg",
            "hello s 1",
            "PUT k\tv x",
        ] {
            assert_eq!(parse_request(bad), None, "{bad:?}");
        }
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        /// A line as a client writes it.
        fn text_of(r: &Request<'_>) -> String {
            match r {
                Request::Hello { secret, rank } => format!("HELLO {secret} {rank}"),
                Request::Ping { secret } => format!("PING {secret}"),
                Request::Put { key, value } => format!("PUT {key} {value}"),
                Request::Get { key } => format!("GET {key}"),
                Request::Delete { key } => format!("DEL {key}"),
                Request::Spawn { words } => format!("SPAWN {}", words.join(" ")),
                Request::Fence => "FENCE".into(),
                Request::Finalize => "FINALIZE".into(),
                Request::Abort { code, message: "" } => format!("ABORT {code}"),
                Request::Abort { code, message } => format!("ABORT {code} {message}"),
            }
        }

        /// Lines made of the protocol's verbs and separators, and noise.
        fn line() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "(HELLO|PING|PUT|GET|DEL|SPAWN|FENCE|FINALIZE|ABORT)?( {1,2}[-+0-9a-zA-Z\t]{0,12}){0,4} ?",
            ]
        }

        proptest! {
            #![proptest_config(config())]

            /// Any line parses or is refused, and what parses reads the
            /// same once written back (numbers may lose a sign or zeros).
            #[test]
            fn prop_kv_parse_request_is_total(line in line()) {
                if let Some(r) = parse_request(&line) {
                    let again = text_of(&r);
                    prop_assert_eq!(parse_request(&again), Some(r));
                }
            }

            #[test]
            fn prop_kv_requests_round_trip(
                token in "[!-~]{1,20}",
                other in "[!-~]{1,20}",
                rank in any::<u32>(),
                code in any::<i32>(),
                message in "[^\n]{0,30}",
                which in 0u8..7,
            ) {
                let r = match which {
                    0 => Request::Hello { secret: &token, rank },
                    1 => Request::Ping { secret: &token },
                    2 => Request::Put { key: &token, value: &other },
                    3 => Request::Get { key: &token },
                    4 => Request::Fence,
                    5 => Request::Finalize,
                    _ => Request::Abort { code, message: &message },
                };
                let text = text_of(&r);
                prop_assert_eq!(parse_request(&text), Some(r));
            }
        }
    }
}

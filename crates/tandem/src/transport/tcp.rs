//! TCP transport: non-blocking sockets driven by epoll.
//!
//! * Connections are opened on the first frame to a peer and begin with a
//!   handshake carrying the job secret, the rank and the protocol version; a
//!   peer without the secret is dropped.
//! * When two ranks connect to each other at once, the connection opened by
//!   the lower rank wins; no frame travels before the handshake is answered,
//!   so nothing is lost on the losing connection.
//! * Header and payload leave in one `sendmsg`; a socket is watched for
//!   writability only while it has queued frames (Gabriel's VolpexMPI
//!   report: polling idle send sockets is pure cost); reads go through a
//!   per-connection buffer, and large payloads are read straight into their
//!   destination.
//! * EOF or an error on a connection reports the peer lost, naming it.

use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::{FrameSink, Payload, PayloadDest, SendState};
use crate::bootstrap::secrets_equal;
use crate::error::{Error, ErrorClass};
use crate::stats::{Counters, Stopwatch};
use crate::wire::{self, FrameKind, Header, Hello, HEADER_LEN, HELLO_LEN, HELLO_REPLY_LEN};

/// Looks up the listening address of a peer (its "business card").
pub type Resolver = Box<dyn FnMut(u32) -> Result<String, Error>>;

/// Settings of the TCP transport.
pub struct TcpConfig {
    pub rank: u32,
    pub size: u32,
    pub secret: [u8; 32],
    /// The address to listen on: loopback for single-host jobs, else the
    /// interface that reaches the other hosts (see [`listen_ip`]).
    pub listen_ip: IpAddr,
    /// Inclusive port range to listen on; `None` for any free port.
    pub port_range: Option<(u16, u16)>,
    pub sndbuf: usize,
    /// Most bytes handed to one `sendmsg` (see the `tcp_send_chunk` parameter).
    pub send_chunk: usize,
    pub rcvbuf: usize,
    /// Congestion control set on every connection (TCP_CONGESTION); `None`:
    /// the system's default (see [`congestion_for`]).
    pub congestion: Option<String>,
    pub connect_timeout: Duration,
    /// How sockets are watched.
    pub poller: Poller,
    /// Whether to time readiness handling (for statistics).
    pub timing: bool,
}

/// How the transport learns which sockets are ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poller {
    /// epoll; a socket is watched for writability only while it has queued
    /// frames.
    Epoll,
    /// Every socket watched for readability and writability on every call,
    /// as select-based engines (VolpexMPI, and the libraries Gabriel's report
    /// compared it with) do; implemented with poll(2). For reproducing that
    /// report's Table II.
    Select,
}

const LISTENER_TOKEN: u64 = u64::MAX;
/// Most processes a job may have, those `MPI_Comm_spawn` starts included
/// (process ids are below it).
pub const MAX_PROCESSES: u32 = 1 << 20;
/// How long the listener rests when this rank is out of descriptors.
const LISTENER_REST: Duration = Duration::from_millis(100);
/// Receive buffer per connection; payloads larger than what is buffered are
/// read straight into their destination.
const RBUF_LEN: usize = 64 * 1024;
/// Payloads from this size on are read straight into their destination
/// when nothing of them is buffered yet; after a frame that large, the next
/// read asks for a header alone, so that a run of such frames skips the
/// copy out of `rbuf` (one more `read` per frame, cheaper than copying).
const DIRECT_MIN: usize = 32 * 1024;
/// Most iovecs handed to one `sendmsg` (two per frame).
const MAX_IOV: usize = 256;
/// Frames batched by [`TcpTransport::send_batched`] leave once this many
/// bytes wait (or at the next progress pass, or with the next frame sent
/// otherwise). Over loopback here one `sendmsg` of 1 MiB moves 8.4 GB/s,
/// one of 256 KiB 5.8 (the kernel's cost per call is that large).
const BATCH_BYTES: usize = 1024 * 1024;
/// With one connection, how often a look still goes to epoll (see
/// `TcpTransport::poll_sole_conn`).
const SOLE_CONN_EPOLL_EVERY: u32 = 32;

/// A frame waiting to leave. The payload pointer stays valid until the frame
/// is reported done: the layer above owns that memory (a send buffer it may
/// not touch until completion, or a buffer it keeps alive).
struct OutFrame {
    header: [u8; HEADER_LEN],
    payload: *const u8,
    len: usize,
    /// Bytes of header and payload already written.
    written: usize,
    token: Option<u64>,
}

impl OutFrame {
    fn new(header: &Header, payload: *const u8, len: usize, token: Option<u64>) -> OutFrame {
        OutFrame {
            header: header.encode(),
            payload,
            len,
            written: 0,
            token,
        }
    }

    fn total(&self) -> usize {
        HEADER_LEN + self.len
    }
}

#[derive(Default)]
struct Peer {
    /// The established connection.
    conn: Option<usize>,
    /// A connection this rank opened that has not been answered yet.
    pending_out: Option<usize>,
    sendq: VecDeque<OutFrame>,
    /// Bytes of frames [`TcpTransport::send_batched`] queued with no send
    /// tried since (0: none).
    batched: usize,
    lost: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    /// Non-blocking connect in progress.
    Connecting,
    /// Hello sent, waiting for the acceptor's answer.
    AwaitReply,
    /// Accepted, waiting for the connector's hello.
    AwaitHello,
    /// Accepted from a process of the job this rank has not heard of yet
    /// (one started later, by `MPI_Comm_spawn`): unread until the layer
    /// above learns of it ([`TcpTransport::add_processes`]).
    Parked,
    Established,
}

struct RxTarget {
    ptr: *mut u8,
    cap: usize,
    owned: Option<Vec<u8>>,
}

enum RxState {
    Header,
    Payload {
        header: Header,
        target: RxTarget,
        /// Payload bytes consumed so far (stored or discarded).
        done: u64,
    },
    /// A header whose payload the layer above cannot take yet.
    Paused {
        header: Header,
    },
}

struct Conn {
    fd: OwnedFd,
    peer: Option<u32>,
    /// Where an outgoing connection goes (for error messages).
    addr: Option<SocketAddr>,
    state: ConnState,
    deadline: Instant,
    hs: [u8; HELLO_LEN],
    hs_len: usize,
    rbuf: Box<[u8]>,
    /// The last frame's payload was at least [`DIRECT_MIN`]: read the next
    /// header alone.
    header_first: bool,
    rstart: usize,
    rend: usize,
    rx: RxState,
    watching_out: bool,
}

/// What happened to a connection while it was being served.
enum Served {
    Fine,
    /// Drop the connection; if it belonged to a peer, the peer is lost.
    Close(String),
}

/// The TCP transport of one rank.
pub struct TcpTransport {
    cfg: TcpConfig,
    epfd: OwnedFd,
    listener: TcpListener,
    address: String,
    conns: Vec<Option<Conn>>,
    peers: Vec<Peer>,
    resolver: Resolver,
    events: Vec<libc::epoll_event>,
    paused: Vec<usize>,
    handshakes: usize,
    /// Connections in [`ConnState::Parked`].
    parked: usize,
    /// For [`TcpTransport::poll_sole_conn`]: looks made, the connection
    /// last used, and bytes read so far (to tell whether a look found any).
    sole_looks: u32,
    sole_conn: Option<usize>,
    bytes_read: u64,
    /// Connections in `conns` (so asking whether TCP is idle costs nothing).
    live_conns: usize,
    /// Losses found outside `progress` (during `send`), reported at the next one.
    lost_pending: Vec<(u32, String)>,
    /// Peers with frames [`TcpTransport::send_batched`] left waiting.
    batched_peers: Vec<u32>,
    /// The peer of the last frame [`TcpTransport::send_batched`] took, if
    /// nothing else was sent and no progress pass ran since: a run.
    run_peer: Option<u32>,
    /// Tokens of batched frames that left with a frame
    /// [`TcpTransport::send`] took (which has no sink to report them to),
    /// reported at the next progress pass.
    done_tokens: Vec<u64>,
    /// What this transport did (readiness events and their handling).
    pub counters: Counters,
    pollfds: Vec<libc::pollfd>,
    /// Out of descriptors, the listener is not watched until then (a
    /// level-triggered listener with connections waiting would wake this
    /// rank at once, again and again).
    listener_resume: Option<Instant>,
}

fn errno() -> io::Error {
    io::Error::last_os_error()
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(errno())
    } else {
        Ok(ret)
    }
}

fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) {
    // SAFETY: `value` lives for the call and its size is passed; a failure only
    // leaves the option at its default.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// The congestion control for connections from `listen_ip`, as the
/// `tcp_congestion` parameter says; `None` keeps the system's default.
/// `auto` picks reno on loopback (a one-host job): there is no network to
/// share, and a pacing algorithm (BBR, a common default) held large transfers
/// to its estimate of a bandwidth that ping-pongs never show it, and sent
/// segments from two CPUs at once, whose reordering triggered spurious
/// retransmissions. Reno is built into every kernel and allowed to every user.
pub fn congestion_for(setting: &str, listen_ip: IpAddr) -> Option<String> {
    match setting.trim() {
        "auto" => listen_ip.is_loopback().then(|| "reno".to_string()),
        "" | "system" => None,
        name => Some(name.to_string()),
    }
}

/// Parses `LOW-HIGH`.
pub fn parse_port_range(text: &str) -> Result<Option<(u16, u16)>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    let (a, b) = t.split_once('-').unwrap_or((t, t));
    let lo: u16 = a
        .trim()
        .parse()
        .map_err(|_| format!("tcp_port_range: bad port '{a}'"))?;
    let hi: u16 = b
        .trim()
        .parse()
        .map_err(|_| format!("tcp_port_range: bad port '{b}'"))?;
    if lo == 0 || lo > hi {
        return Err(format!(
            "tcp_port_range: '{t}' is not LOW-HIGH with 0 < LOW <= HIGH"
        ));
    }
    Ok(Some((lo, hi)))
}

/// The probable reason behind a failed connection, for error messages.
pub fn likely_cause(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::TimedOut && e.raw_os_error().is_none() {
        return "no answer: a firewall dropping packets, the host is down, or an address on an interface that does not reach this host (see tcp_if_include)";
    }
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => {
            "nothing listens there: the process has ended, or a firewall rejects the port"
        }
        Some(libc::ETIMEDOUT) => {
            "no answer: a firewall dropping packets, the host is down, or an address on an interface that does not reach this host (see tcp_if_include)"
        }
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EADDRNOTAVAIL) => {
            "no route from this host: the address is on an interface that does not reach it (see tcp_if_include / tcp_if_exclude)"
        }
        Some(libc::ECONNRESET | libc::EPIPE) => "the connection was reset by the other side",
        _ => "check that the host is up and no firewall blocks the port",
    }
}

/// A network interface address (IPv4, interface up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub addr: Ipv4Addr,
    pub loopback: bool,
}

/// The IPv4 addresses of this host's interfaces that are up.
pub fn interfaces() -> Vec<Interface> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let up = ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() || !up {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr of its family.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        out.push(Interface {
            name: name.to_string_lossy().into_owned(),
            addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0,
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// One item of `tcp_if_include` / `tcp_if_exclude`: an interface name
/// (`eth0`, or a prefix with `*`: `eth*`) or an IPv4 network (`10.1.0.0/16`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum IfPattern {
    Name(String),
    Prefix(String),
    Net(u32, u32),
}

impl IfPattern {
    fn parse(item: &str, param: &str) -> Result<IfPattern, String> {
        if let Some((net, bits)) = item.split_once('/') {
            let net: Ipv4Addr = net.parse().map_err(|_| {
                format!("{param}: '{item}' is not an IPv4 network (like 10.1.0.0/16)")
            })?;
            let bits: u32 = bits
                .parse()
                .ok()
                .filter(|b| *b <= 32)
                .ok_or_else(|| format!("{param}: '{item}' has a bad prefix length"))?;
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            return Ok(IfPattern::Net(u32::from(net) & mask, mask));
        }
        if let Ok(ip) = item.parse::<Ipv4Addr>() {
            return Ok(IfPattern::Net(u32::from(ip), u32::MAX));
        }
        match item.strip_suffix('*') {
            Some(p) => Ok(IfPattern::Prefix(p.to_string())),
            None => Ok(IfPattern::Name(item.to_string())),
        }
    }

    fn matches(&self, i: &Interface) -> bool {
        match self {
            IfPattern::Name(n) => &i.name == n,
            IfPattern::Prefix(p) => i.name.starts_with(p.as_str()),
            IfPattern::Net(net, mask) => u32::from(i.addr) & mask == *net,
        }
    }
}

fn parse_patterns(text: &str, param: &str) -> Result<Vec<IfPattern>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| IfPattern::parse(t, param))
        .collect()
}

/// The interfaces a multi-host job may use, best first: those matching
/// `include` (in its order) or, when it is empty, every interface but
/// loopback; less those matching `exclude`.
pub fn usable_interfaces(
    all: &[Interface],
    include: &str,
    exclude: &str,
) -> Result<Vec<Interface>, String> {
    let inc = parse_patterns(include, "tcp_if_include")?;
    let exc = parse_patterns(exclude, "tcp_if_exclude")?;
    let mut out: Vec<Interface> = Vec::new();
    if inc.is_empty() {
        out.extend(all.iter().filter(|i| !i.loopback).cloned());
    } else {
        for p in &inc {
            for i in all.iter().filter(|i| p.matches(i)) {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
        }
    }
    out.retain(|i| !exc.iter().any(|p| p.matches(i)));
    Ok(out)
}

/// Where a rank's TCP transport listens: loopback when the job has one
/// host; otherwise the interface `tcp_if_include` / `tcp_if_exclude` pick,
/// preferring `hint` (the address this host reached the master from).
pub fn listen_ip(
    include: &str,
    exclude: &str,
    hosts: u32,
    hint: Option<&str>,
) -> Result<IpAddr, String> {
    if hosts <= 1 {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let all = interfaces();
    let usable = usable_interfaces(&all, include, exclude)?;
    let hint: Option<Ipv4Addr> = hint.and_then(|h| h.parse().ok());
    if let Some(h) = hint.filter(|h| usable.iter().any(|i| i.addr == *h)) {
        return Ok(IpAddr::V4(h));
    }
    usable
        .first()
        .map(|i| IpAddr::V4(i.addr))
        .ok_or_else(|| {
            let have: Vec<String> = all.iter().map(|i| format!("{} {}", i.name, i.addr)).collect();
            format!(
                "no network interface to listen on for a job across hosts (tcp_if_include '{include}', \
                 tcp_if_exclude '{exclude}'; this host has: {})",
                have.join(", ")
            )
        })
}

impl TcpTransport {
    /// Listens on loopback (single-host jobs never listen elsewhere).
    pub fn new(cfg: TcpConfig, resolver: Resolver) -> Result<TcpTransport, Error> {
        let listener = Self::listen(cfg.listen_ip, cfg.port_range)?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::new(ErrorClass::Other, format!("tcp listener: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::new(ErrorClass::Other, format!("tcp listener: {e}")))?
            .to_string();
        // SAFETY: plain syscall; the result is checked before use.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(Error::new(
                ErrorClass::Other,
                format!("epoll_create1: {}", errno()),
            ));
        }
        // SAFETY: `ep` is a fresh descriptor that nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(ep) };
        let mut peers = Vec::with_capacity(cfg.size as usize);
        peers.resize_with(cfg.size as usize, Peer::default);
        let t = TcpTransport {
            cfg,
            epfd,
            listener,
            address,
            conns: Vec::new(),
            peers,
            resolver,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            paused: Vec::new(),
            handshakes: 0,
            parked: 0,
            sole_looks: 0,
            sole_conn: None,
            bytes_read: 0,
            live_conns: 0,
            lost_pending: Vec::new(),
            batched_peers: Vec::new(),
            run_peer: None,
            done_tokens: Vec::new(),
            counters: Counters::default(),
            pollfds: Vec::new(),
            listener_resume: None,
        };
        t.epoll_ctl(
            libc::EPOLL_CTL_ADD,
            t.listener.as_raw_fd(),
            libc::EPOLLIN as u32,
            LISTENER_TOKEN,
        )
        .map_err(|e| Error::new(ErrorClass::Other, format!("epoll_ctl: {e}")))?;
        Ok(t)
    }

    fn listen(ip: IpAddr, range: Option<(u16, u16)>) -> Result<TcpListener, Error> {
        let Some((lo, hi)) = range else {
            return TcpListener::bind((ip, 0))
                .map_err(|e| Error::new(ErrorClass::Other, format!("cannot listen on {ip}: {e}")));
        };
        for port in lo..=hi {
            if let Ok(l) = TcpListener::bind((ip, port)) {
                return Ok(l);
            }
        }
        Err(Error::new(
            ErrorClass::Other,
            format!("no free port in tcp_port_range {lo}-{hi} on {ip}"),
        ))
    }

    /// The address peers connect to (this rank's business card).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The epoll descriptor, readable when this transport has events.
    pub fn fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }

    /// Whether any connection exists or is being made (otherwise only the
    /// listener can have news, and strangers can wait).
    pub fn is_active(&self) -> bool {
        self.live_conns > 0 || !self.lost_pending.is_empty()
    }

    /// Whether readiness handling is timed (statistics were asked for).
    pub fn timing(&self) -> bool {
        self.cfg.timing
    }

    /// Whether a handshake is in flight, whose deadline needs a timer, or
    /// the listener waits to be watched again.
    pub fn needs_timer(&self) -> bool {
        self.handshakes > 0 || self.listener_resume.is_some()
    }

    /// Whether any frame is still waiting to leave.
    pub fn has_queued(&self) -> bool {
        self.peers
            .iter()
            .any(|p| !p.sendq.is_empty() && p.lost.is_none())
    }

    fn epoll_ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    /// Queues a frame to `peer` and tries to send it at once. `payload` must
    /// stay valid until the frame is done: immediately if this returns
    /// [`SendState::Done`], else until `on_send_done(token)`. Frames without a
    /// token must have no payload or one that outlives the transport's queue.
    pub fn send(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState, Error> {
        self.run_peer = None;
        let p = peer as usize;
        if let Some(why) = &self.peers[p].lost {
            return Err(Error::new(ErrorClass::ProcAborted, why.clone()));
        }
        let frame = OutFrame::new(header, payload, len, token);
        let established = self.peers[p].conn;
        self.peers[p].sendq.push_back(frame);
        match established {
            Some(c) => {
                // Batched frames before it leave with it.
                if self.peers[p].sendq.len() == 1 || self.peers[p].batched > 0 {
                    if let Served::Close(why) = self.flush(c, None) {
                        self.lose_peer_later(peer, why.clone());
                        return Err(Error::new(ErrorClass::ProcAborted, why));
                    }
                    if self.peers[p].sendq.is_empty() {
                        // This frame's own end is the answer, not a report.
                        if let Some(t) = token {
                            if self.done_tokens.last() == Some(&t) {
                                self.done_tokens.pop();
                            }
                        }
                        return Ok(SendState::Done);
                    }
                }
            }
            None => {
                if self.peers[p].pending_out.is_none() {
                    if let Err(e) = self.connect(peer) {
                        self.lose_peer_later(peer, e.message.clone());
                        return Err(e);
                    }
                }
            }
        }
        Ok(SendState::Queued)
    }

    /// As [`TcpTransport::send`], for a frame that may wait to leave with
    /// those after it in one `sendmsg` (one-sided writes, whose caller
    /// looks for their completion later). The first of a run leaves at
    /// once, as `send` would send it; one that follows it to the same peer
    /// with nothing else sent and no progress pass between is queued, and
    /// the queue is written once `BATCH_BYTES` wait, at the start of the
    /// next progress pass, or with the next frame `send` takes. Never
    /// [`SendState::Done`] unless it left at once.
    ///
    /// With `hold`, the frame waits even when it would lead a run: for a
    /// write its caller expects a frame to follow at once (an RWAPI write
    /// and the small message announcing it), which then takes it along in
    /// one `sendmsg` instead of two.
    pub fn send_batched(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
        hold: bool,
    ) -> Result<SendState, Error> {
        let p = peer as usize;
        let in_run = hold || self.run_peer == Some(peer);
        if !in_run
            || self.peers[p].conn.is_none()
            || self.peers[p].lost.is_some()
            || self.peers[p].batched + HEADER_LEN + len >= BATCH_BYTES
        {
            let sent = self.send(peer, header, payload, len, token);
            self.run_peer = Some(peer);
            return sent;
        }
        if self.peers[p].batched == 0 {
            self.batched_peers.push(peer);
        }
        self.peers[p].batched += HEADER_LEN + len;
        self.counters.tcp_batched += 1;
        self.peers[p]
            .sendq
            .push_back(OutFrame::new(header, payload, len, token));
        self.run_peer = Some(peer);
        Ok(SendState::Queued)
    }

    /// Writes the frames [`TcpTransport::send_batched`] left waiting.
    fn flush_batched(&mut self, sink: &mut dyn FrameSink) -> bool {
        let mut did = false;
        for peer in std::mem::take(&mut self.batched_peers) {
            let p = peer as usize;
            if self.peers[p].batched == 0 {
                continue;
            }
            let Some(c) = self.peers[p].conn else {
                continue;
            };
            did = true;
            if let Served::Close(why) = self.flush(c, Some(sink)) {
                self.close_conn(c, &why, sink);
            }
        }
        did
    }

    fn lose_peer_later(&mut self, peer: u32, why: String) {
        self.mark_lost(peer, &why);
        self.lost_pending.push((peer, why));
    }

    fn new_conn(&mut self, fd: OwnedFd, peer: Option<u32>, state: ConnState) -> usize {
        let conn = Conn {
            fd,
            peer,
            addr: None,
            state,
            deadline: Instant::now() + self.cfg.connect_timeout,
            hs: [0; HELLO_LEN],
            hs_len: 0,
            rbuf: vec![0u8; RBUF_LEN].into_boxed_slice(),
            header_first: false,
            rstart: 0,
            rend: 0,
            rx: RxState::Header,
            watching_out: false,
        };
        self.handshakes += 1;
        self.live_conns += 1;
        if let Some(i) = self.conns.iter().position(Option::is_none) {
            self.conns[i] = Some(conn);
            i
        } else {
            self.conns.push(Some(conn));
            self.conns.len() - 1
        }
    }

    fn tune(&self, fd: RawFd) {
        set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        if self.cfg.sndbuf > 0 {
            set_int_opt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                self.cfg.sndbuf as libc::c_int,
            );
        }
        if self.cfg.rcvbuf > 0 {
            set_int_opt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                self.cfg.rcvbuf as libc::c_int,
            );
        }
        if let Some(name) = &self.cfg.congestion {
            let name = name.as_bytes();
            // SAFETY: `name` lives for the call and its length is passed; a
            // refusal (an algorithm not loaded or not allowed) leaves the
            // system's default.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_CONGESTION,
                    name.as_ptr().cast(),
                    name.len() as libc::socklen_t,
                );
            }
        }
    }

    fn connect(&mut self, peer: u32) -> Result<(), Error> {
        let addr_text = (self.resolver)(peer)?;
        let addr: SocketAddr = addr_text.parse().map_err(|_| {
            Error::new(
                ErrorClass::Other,
                format!("rank {peer} published a malformed address '{addr_text}'"),
            )
        })?;
        let domain = if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe {
            libc::socket(
                domain,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(Error::new(
                ErrorClass::Other,
                format!("socket: {}", errno()),
            ));
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        self.tune(raw);
        let (storage, len) = sockaddr_of(&addr);
        // SAFETY: `storage` holds a valid sockaddr of length `len`.
        let r =
            unsafe { libc::connect(raw, (&storage as *const libc::sockaddr_storage).cast(), len) };
        if r < 0 {
            let e = errno();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(Error::new(
                    ErrorClass::ProcAborted,
                    format!(
                        "cannot connect to rank {peer} at {addr}: {e} ({})",
                        likely_cause(&e)
                    ),
                ));
            }
        }
        let c = self.new_conn(fd, Some(peer), ConnState::Connecting);
        self.conn(c).addr = Some(addr);
        self.peers[peer as usize].pending_out = Some(c);
        self.epoll_ctl(libc::EPOLL_CTL_ADD, raw, libc::EPOLLOUT as u32, c as u64)
            .map_err(|e| Error::new(ErrorClass::Other, format!("epoll_ctl: {e}")))?;
        Ok(())
    }

    /// Drives every connection once: waits up to `timeout_ms` (0 = just poll,
    /// -1 = until something happens) for readiness, then serves it.
    /// Returns whether any event was handled.
    pub fn progress(&mut self, sink: &mut dyn FrameSink, timeout_ms: i32) -> bool {
        let mut did = false;
        self.run_peer = None;
        for (peer, why) in std::mem::take(&mut self.lost_pending) {
            sink.on_peer_lost(peer, &why);
            did = true;
        }
        if !self.paused.is_empty() {
            did |= self.resume_paused(sink);
        }
        if !self.batched_peers.is_empty() {
            did |= self.flush_batched(sink);
        }
        if !self.done_tokens.is_empty() {
            // Taken and put back, so the list keeps its room: a one-sided
            // write's token passes through it on every send.
            let mut tokens = std::mem::take(&mut self.done_tokens);
            for &t in &tokens {
                sink.on_send_done(t);
            }
            tokens.clear();
            self.done_tokens = tokens;
            did = true;
        }
        // Work found above must reach the caller before it may sleep.
        let timeout_ms = if did { 0 } else { timeout_ms };
        let timeout = if timeout_ms != 0 && self.needs_timer() {
            // Wake up in time to enforce handshake deadlines (and to watch
            // the listener again).
            if timeout_ms < 0 {
                100
            } else {
                timeout_ms.min(100)
            }
        } else {
            timeout_ms
        };
        if self.cfg.poller == Poller::Select {
            did |= self.progress_select(sink, timeout);
            if self.handshakes > 0 {
                self.expire_handshakes(sink);
            }
            if self.listener_resume.is_some() {
                self.resume_listener();
            }
            return did;
        }
        if timeout == 0 {
            if let Some(did_read) = self.poll_sole_conn(sink) {
                return did || did_read;
            }
        }
        let n = super::epoll_wait(self.epfd.as_raw_fd(), &mut self.events, timeout);
        for i in 0..n {
            let ev = self.events[i];
            did = true;
            if ev.u64 == LISTENER_TOKEN {
                self.accept_all();
                continue;
            }
            let c = ev.u64 as usize;
            let outcome = self.serve(c, ev.events, sink);
            if let Served::Close(why) = outcome {
                self.close_conn(c, &why, sink);
            }
        }
        if self.handshakes > 0 {
            self.expire_handshakes(sink);
        }
        if self.listener_resume.is_some() {
            self.resume_listener();
        }
        did
    }

    /// Watches the listener again once its pause is over.
    #[cold]
    fn resume_listener(&mut self) {
        if self.listener_resume.is_some_and(|t| Instant::now() >= t) {
            self.listener_resume = None;
            if self.cfg.poller != Poller::Select {
                let fd = self.listener.as_raw_fd();
                // Failing, the listener stays unwatched: strangers and late
                // peers cannot connect, the connections made still work.
                let _ = self.epoll_ctl(
                    libc::EPOLL_CTL_ADD,
                    fd,
                    libc::EPOLLIN as u32,
                    LISTENER_TOKEN,
                );
            }
        }
    }

    /// A look that asks the socket itself instead of epoll, when this rank
    /// has exactly one connection and only reading to do on it (the
    /// 2-rank job, or one rank per host on two hosts): a message then costs
    /// one `read` instead of `epoll_wait` and `read` (5% off an 8-byte TCP
    /// round trip). Every `SOLE_CONN_EPOLL_EVERY`th look still goes to epoll,
    /// for what only it reports (a new connection at the listener). `None`
    /// when it does not apply; else whether anything was read.
    fn poll_sole_conn(&mut self, sink: &mut dyn FrameSink) -> Option<bool> {
        if self.live_conns != 1 || self.handshakes > 0 {
            return None;
        }
        self.sole_looks = self.sole_looks.wrapping_add(1);
        if self.sole_looks.is_multiple_of(SOLE_CONN_EPOLL_EVERY) {
            return None;
        }
        let usable = |k: &Option<Conn>| {
            k.as_ref().is_some_and(|k| {
                k.state == ConnState::Established
                    && !k.watching_out
                    && !matches!(k.rx, RxState::Paused { .. })
            })
        };
        let c = match self.sole_conn {
            Some(c) if self.conns.get(c).is_some_and(usable) => c,
            _ => {
                let c = self.conns.iter().position(usable)?;
                self.sole_conn = Some(c);
                c
            }
        };
        let before = self.bytes_read;
        let watch = Stopwatch::start(self.cfg.timing);
        let served = self.read_frames(c, sink);
        let did_read = self.bytes_read != before;
        if did_read {
            // Counted as epoll would have: a readiness event, and its handling.
            self.counters.recv_ready += 1;
            watch.stop(&mut self.counters.recv_handling_ns);
        }
        if let Served::Close(why) = served {
            self.close_conn(c, &why, sink);
            return Some(true);
        }
        Some(did_read)
    }

    /// The select-style engine: every socket, every call, writability
    /// included (see [`Poller::Select`]).
    fn progress_select(&mut self, sink: &mut dyn FrameSink, timeout: i32) -> bool {
        let mut fds = std::mem::take(&mut self.pollfds);
        fds.clear();
        let mut tokens = Vec::with_capacity(self.conns.len() + 1);
        if self.listener_resume.is_none() {
            fds.push(libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            tokens.push(LISTENER_TOKEN);
        }
        for (i, c) in self.conns.iter().enumerate() {
            let Some(c) = c else { continue };
            let events = match c.state {
                ConnState::Connecting => libc::POLLOUT,
                ConnState::Established if !matches!(c.rx, RxState::Paused { .. }) => {
                    libc::POLLIN | libc::POLLOUT
                }
                ConnState::Established => libc::POLLOUT,
                ConnState::Parked => 0,
                _ => libc::POLLIN,
            };
            fds.push(libc::pollfd {
                fd: c.fd.as_raw_fd(),
                events,
                revents: 0,
            });
            tokens.push(i as u64);
        }
        // SAFETY: `fds` holds `len` initialised pollfd entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        let mut did = false;
        if n > 0 {
            for (pfd, &token) in fds.iter().zip(&tokens) {
                if pfd.revents == 0 {
                    continue;
                }
                if token == LISTENER_TOKEN {
                    did = true;
                    self.accept_all();
                    continue;
                }
                let mut events = 0u32;
                if pfd.revents & libc::POLLIN != 0 {
                    events |= libc::EPOLLIN as u32;
                }
                if pfd.revents & libc::POLLOUT != 0 {
                    events |= libc::EPOLLOUT as u32;
                }
                if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                    events |= (libc::EPOLLHUP | libc::EPOLLERR) as u32;
                }
                let c = token as usize;
                // A writable socket with nothing to send is not news; one
                // with frames queued (or still connecting) is: a send may
                // complete now, and a caller told nothing happened would
                // block without looking (a large MPI_Send then waited for
                // ever on a finished send).
                let news = events != libc::EPOLLOUT as u32
                    || self.conns[c]
                        .as_ref()
                        .is_some_and(|k| k.watching_out || k.state != ConnState::Established);
                let outcome = self.serve(c, events, sink);
                if let Served::Close(why) = outcome {
                    self.close_conn(c, &why, sink);
                }
                did |= news;
            }
        }
        self.pollfds = fds;
        did
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    self.tune(stream.as_raw_fd());
                    // SAFETY: `into_raw_fd` hands over sole ownership of the descriptor.
                    let fd = unsafe { OwnedFd::from_raw_fd(stream.into_raw_fd()) };
                    let raw = fd.as_raw_fd();
                    let c = self.new_conn(fd, None, ConnState::AwaitHello);
                    if self
                        .epoll_ctl(libc::EPOLL_CTL_ADD, raw, libc::EPOLLIN as u32, c as u64)
                        .is_err()
                    {
                        self.conns[c] = None;
                        self.live_conns -= 1;
                        self.handshakes -= 1;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors (or kernel memory): the connections
                // wait in the backlog while the listener rests, and
                // unfinished handshakes expire meanwhile.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    ) =>
                {
                    self.listener_resume = Some(Instant::now() + LISTENER_REST);
                    if self.cfg.poller != Poller::Select {
                        let fd = self.listener.as_raw_fd();
                        let _ = self.epoll_ctl(libc::EPOLL_CTL_DEL, fd, 0, LISTENER_TOKEN);
                    }
                    return;
                }
                // A connection aborted before it was taken: the next may do.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNABORTED | libc::EPROTO | libc::EPERM)
                    ) =>
                {
                    continue
                }
                Err(_) => return,
            }
        }
    }

    fn conn(&mut self, c: usize) -> &mut Conn {
        self.conns[c].as_mut().expect("live connection")
    }

    fn serve(&mut self, c: usize, events: u32, sink: &mut dyn FrameSink) -> Served {
        let Some(conn) = self.conns.get(c).and_then(Option::as_ref) else {
            return Served::Fine;
        };
        match conn.state {
            ConnState::Connecting => self.finish_connect(c),
            ConnState::AwaitReply => self.read_reply(c, sink),
            ConnState::AwaitHello => self.read_hello(c, sink),
            ConnState::Parked => {
                // Always reported, even unasked: a process that left before
                // this rank heard of it.
                if events & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                    self.drop_conn(c);
                }
                Served::Fine
            }
            ConnState::Established => {
                let hangup = events & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
                if hangup && matches!(conn.rx, RxState::Paused { .. }) {
                    return Served::Close(
                        "connection closed while its next message waited for room".into(),
                    );
                }
                if events & libc::EPOLLOUT as u32 != 0 {
                    self.counters.send_ready += 1;
                    let peer = conn.peer.expect("established connection has a peer") as usize;
                    if self.peers[peer].sendq.is_empty() {
                        // The waste Gabriel's report counts: a look-up that
                        // finds nothing to send.
                        self.counters.send_ready_idle += 1;
                    } else {
                        let watch = Stopwatch::start(self.cfg.timing);
                        let served = self.flush(c, Some(&mut *sink));
                        watch.stop(&mut self.counters.send_handling_ns);
                        if let Served::Close(why) = served {
                            return Served::Close(why);
                        }
                    }
                }
                if events & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                    self.counters.recv_ready += 1;
                    let watch = Stopwatch::start(self.cfg.timing);
                    let served = self.read_frames(c, sink);
                    watch.stop(&mut self.counters.recv_handling_ns);
                    return served;
                }
                Served::Fine
            }
        }
    }

    fn finish_connect(&mut self, c: usize) -> Served {
        let fd = self.conn(c).fd.as_raw_fd();
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` and `len` are valid for writes of the sizes given.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r < 0 || err != 0 {
            let e = if r < 0 {
                errno()
            } else {
                io::Error::from_raw_os_error(err)
            };
            return Served::Close(format!("cannot connect: {e}; {}", likely_cause(&e)));
        }
        let hello = Hello {
            version: wire::PROTOCOL_VERSION,
            rank: self.cfg.rank,
            secret: self.cfg.secret,
        }
        .encode();
        // A fresh socket's send buffer always takes 48 bytes; anything less is an error.
        match write_some(fd, &hello) {
            Ok(n) if n == hello.len() => {}
            Ok(_) => return Served::Close("handshake did not fit the socket buffer".into()),
            Err(e) => return Served::Close(format!("cannot send handshake: {e}")),
        }
        self.conn(c).state = ConnState::AwaitReply;
        if self
            .epoll_ctl(libc::EPOLL_CTL_MOD, fd, libc::EPOLLIN as u32, c as u64)
            .is_err()
        {
            return Served::Close("epoll_ctl failed".into());
        }
        Served::Fine
    }

    /// Reads into the handshake buffer up to `want` bytes; Ok(true) when complete.
    fn read_handshake(&mut self, c: usize, want: usize) -> Result<bool, String> {
        let conn = self.conn(c);
        while conn.hs_len < want {
            match read_some(conn.fd.as_raw_fd(), &mut conn.hs[conn.hs_len..want]) {
                Ok(0) => return Err("closed during the handshake".into()),
                Ok(n) => conn.hs_len += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(format!("handshake read failed: {e}")),
            }
        }
        Ok(true)
    }

    fn read_reply(&mut self, c: usize, sink: &mut dyn FrameSink) -> Served {
        match self.read_handshake(c, HELLO_REPLY_LEN) {
            Ok(false) => Served::Fine,
            Err(why) => Served::Close(why),
            Ok(true) => {
                let conn = self.conn(c);
                let reply: [u8; HELLO_REPLY_LEN] = conn.hs[..HELLO_REPLY_LEN].try_into().unwrap();
                let peer = conn.peer.expect("outgoing connection has a peer");
                match wire::decode_hello_reply(&reply) {
                    Ok(true) => {
                        self.peers[peer as usize].pending_out = None;
                        self.establish(c, peer, sink)
                    }
                    // The peer keeps the connection it opened to us.
                    Ok(false) => {
                        self.peers[peer as usize].pending_out = None;
                        self.drop_conn(c);
                        Served::Fine
                    }
                    Err(e) => Served::Close(e.to_string()),
                }
            }
        }
    }

    fn read_hello(&mut self, c: usize, sink: &mut dyn FrameSink) -> Served {
        match self.read_handshake(c, HELLO_LEN) {
            Ok(false) => Served::Fine,
            // A stranger that hung up or sent garbage: drop it quietly.
            Err(_) => {
                self.drop_conn(c);
                Served::Fine
            }
            Ok(true) => {
                let bytes = self.conn(c).hs;
                let hello = match Hello::decode(&bytes) {
                    Ok(h)
                        if h.version == wire::PROTOCOL_VERSION
                            && h.rank < MAX_PROCESSES
                            && h.rank != self.cfg.rank
                            && secrets_equal(&h.secret, &self.cfg.secret) =>
                    {
                        h
                    }
                    _ => {
                        self.drop_conn(c);
                        return Served::Fine;
                    }
                };
                let peer = hello.rank;
                if peer >= self.cfg.size {
                    return self.park(c, peer);
                }
                let p = &self.peers[peer as usize];
                // Simultaneous connects: the connection opened by the lower rank wins.
                let accept = p.conn.is_none()
                    && p.lost.is_none()
                    && (p.pending_out.is_none() || peer < self.cfg.rank);
                let fd = self.conn(c).fd.as_raw_fd();
                let reply = wire::encode_hello_reply(accept);
                if write_some(fd, &reply).ok() != Some(reply.len()) || !accept {
                    self.drop_conn(c);
                    return Served::Fine;
                }
                if let Some(old) = self.peers[peer as usize].pending_out.take() {
                    self.drop_conn(old);
                }
                self.conn(c).peer = Some(peer);
                self.establish(c, peer, sink)
            }
        }
    }

    /// A process this rank does not know yet said hello: it is accepted
    /// (nothing can be connecting to it from here), and left unread until
    /// [`TcpTransport::add_processes`] takes it in.
    fn park(&mut self, c: usize, peer: u32) -> Served {
        if self.parked_peer(peer).is_some() {
            self.drop_conn(c);
            return Served::Fine;
        }
        let fd = self.conn(c).fd.as_raw_fd();
        let reply = wire::encode_hello_reply(true);
        if write_some(fd, &reply).ok() != Some(reply.len())
            || self
                .epoll_ctl(libc::EPOLL_CTL_MOD, fd, 0, c as u64)
                .is_err()
        {
            self.drop_conn(c);
            return Served::Fine;
        }
        self.handshakes -= 1;
        self.parked += 1;
        let conn = self.conn(c);
        conn.state = ConnState::Parked;
        conn.peer = Some(peer);
        Served::Fine
    }

    /// The highest process id among connections waiting for this rank to
    /// hear of their process (see [`TcpTransport::add_processes`]).
    pub fn parked_process(&self) -> Option<u32> {
        if self.parked == 0 {
            return None;
        }
        self.conns
            .iter()
            .flatten()
            .filter(|k| k.state == ConnState::Parked)
            .filter_map(|k| k.peer)
            .max()
    }

    /// The parked connection of `peer`, if any.
    fn parked_peer(&self, peer: u32) -> Option<usize> {
        self.conns.iter().position(|k| {
            k.as_ref()
                .is_some_and(|k| k.state == ConnState::Parked && k.peer == Some(peer))
        })
    }

    /// Processes `0..total` of the job exist now (processes started by
    /// `MPI_Comm_spawn` join at the end): connections they opened before
    /// this rank heard of them are served from here on. Nothing if `total`
    /// is not more than the processes known.
    pub fn add_processes(&mut self, total: u32) {
        if total <= self.cfg.size {
            return;
        }
        let total = total.min(MAX_PROCESSES);
        self.peers.resize_with(total as usize, Peer::default);
        let old = self.cfg.size;
        self.cfg.size = total;
        for peer in old..total {
            if let Some(c) = self.parked_peer(peer) {
                self.parked -= 1;
                // Frames it sent meanwhile wait in the socket, and frames
                // for it in its queue: the next progress pass reads the
                // ones and writes the others.
                let events = (libc::EPOLLIN | libc::EPOLLOUT) as u32;
                match self.mark_established(c, peer, events) {
                    Ok(()) => self.conn(c).watching_out = true,
                    Err(why) => self.lost_pending.push((peer, why)),
                }
            }
        }
    }

    /// Makes connection `c` (out of its handshake, or parked) `peer`'s,
    /// watched for `events`.
    fn mark_established(&mut self, c: usize, peer: u32, events: u32) -> Result<(), String> {
        let conn = self.conn(c);
        conn.state = ConnState::Established;
        conn.hs_len = 0;
        self.peers[peer as usize].conn = Some(c);
        let fd = self.conn(c).fd.as_raw_fd();
        self.epoll_ctl(libc::EPOLL_CTL_MOD, fd, events, c as u64)
            .map_err(|_| "epoll_ctl failed".to_string())
    }

    fn establish(&mut self, c: usize, peer: u32, sink: &mut dyn FrameSink) -> Served {
        self.handshakes -= 1;
        if let Err(why) = self.mark_established(c, peer, libc::EPOLLIN as u32) {
            return Served::Close(why);
        }
        if self.peers[peer as usize].sendq.is_empty() {
            Served::Fine
        } else {
            self.flush(c, Some(sink))
        }
    }

    /// Closes a connection that belongs to no peer (yet), or a losing duplicate.
    fn drop_conn(&mut self, c: usize) {
        if let Some(conn) = self.conns[c].take() {
            self.live_conns -= 1;
            if conn.state == ConnState::Parked {
                self.parked -= 1;
            } else if conn.state != ConnState::Established {
                self.handshakes -= 1;
            }
            let _ = self.epoll_ctl(libc::EPOLL_CTL_DEL, conn.fd.as_raw_fd(), 0, 0);
            self.paused.retain(|&x| x != c);
        }
    }

    fn mark_lost(&mut self, peer: u32, why: &str) {
        let p = &mut self.peers[peer as usize];
        if p.lost.is_none() {
            p.lost = Some(why.to_string());
        }
        p.sendq.clear();
        let conns = [p.conn.take(), p.pending_out.take()];
        for c in conns.into_iter().flatten() {
            self.drop_conn(c);
        }
    }

    fn close_conn(&mut self, c: usize, why: &str, sink: &mut dyn FrameSink) {
        let Some(conn) = self.conns[c].as_ref() else {
            return;
        };
        let peer = conn.peer;
        let conn_addr = conn.addr;
        // Only the peer's working connection, or its only attempt, matters;
        // a losing duplicate may close without harm.
        let owner = peer.filter(|&p| {
            let pe = &self.peers[p as usize];
            pe.conn == Some(c) || (pe.pending_out == Some(c) && pe.conn.is_none())
        });
        if let Some(p) = peer {
            let pe = &mut self.peers[p as usize];
            if pe.pending_out == Some(c) {
                pe.pending_out = None;
            }
        }
        self.drop_conn(c);
        if let Some(p) = owner {
            let reason = match conn_addr {
                Some(a) => format!("rank {p} at {a} is unreachable ({why})"),
                None => format!("rank {p} is unreachable ({why})"),
            };
            self.mark_lost(p, &reason);
            sink.on_peer_lost(p, &reason);
        }
    }

    fn expire_handshakes(&mut self, sink: &mut dyn FrameSink) {
        let now = Instant::now();
        let expired: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .filter(|c| {
                        !matches!(c.state, ConnState::Established | ConnState::Parked)
                            && c.deadline < now
                    })
                    .map(|_| i)
            })
            .collect();
        for c in expired {
            let secs = self.cfg.connect_timeout.as_secs_f64();
            let why = match self.conns[c].as_ref().map(|c| c.state) {
                Some(ConnState::Connecting) => format!(
                    "no answer to the connection within {secs} s: a firewall dropping packets, \
                     or an address on an interface that does not reach this host (see tcp_if_include)"
                ),
                _ => format!(
                    "handshake not completed within {secs} s: the peer is stuck, or is not a rank of this job"
                ),
            };
            self.close_conn(c, &why, sink);
        }
    }

    /// Writes as much of the peer's queue as the socket takes.
    fn flush(&mut self, c: usize, mut sink: Option<&mut dyn FrameSink>) -> Served {
        let conn = self.conns[c].as_ref().expect("live connection");
        let fd = conn.fd.as_raw_fd();
        let peer = conn.peer.expect("established connection has a peer") as usize;
        self.peers[peer].batched = 0;
        loop {
            let q = &mut self.peers[peer].sendq;
            if q.is_empty() {
                break;
            }
            // Left uninitialised: zeroing all MAX_IOV entries (4 KiB) cost
            // more than the rest of a small send's user-space work.
            let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_IOV];
            let mut n_iov = 0;
            let mut bytes = 0;
            // Bounded calls: on loopback a send runs the receiver's side of
            // the stack too, and kernels without preemption (what cloud VMs
            // ship) switch tasks only when it returns, so one 4 MiB call kept
            // a receiver woken on the same core waiting for 3 ms.
            let chunk = self.cfg.send_chunk;
            for f in q.iter() {
                if n_iov + 2 > MAX_IOV || bytes >= chunk {
                    break;
                }
                if f.written < HEADER_LEN {
                    iov[n_iov].write(libc::iovec {
                        iov_base: f.header[f.written..].as_ptr() as *mut libc::c_void,
                        iov_len: HEADER_LEN - f.written,
                    });
                    n_iov += 1;
                    bytes += HEADER_LEN - f.written;
                }
                let off = f.written.saturating_sub(HEADER_LEN);
                if f.len > off {
                    let take = (f.len - off).min(chunk.saturating_sub(bytes).max(1));
                    iov[n_iov].write(libc::iovec {
                        // SAFETY: `off < len` and `take <= len - off`, so the
                        // range stays inside the payload.
                        iov_base: unsafe { f.payload.add(off) } as *mut libc::c_void,
                        iov_len: take,
                    });
                    n_iov += 1;
                    bytes += take;
                }
            }
            // SAFETY: a zeroed msghdr is valid; we set only the iovec fields,
            // which point at the first `n_iov` entries of `iov`, all written
            // above (the kernel reads no further).
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr().cast::<libc::iovec>();
            msg.msg_iovlen = n_iov as _;
            // SAFETY: every iovec describes memory that stays valid until its
            // frame is done (the contract of `send`); MSG_NOSIGNAL turns a
            // closed peer into EPIPE instead of SIGPIPE.
            let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
            if r < 0 {
                let e = errno();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => return Served::Close(format!("send failed: {e}")),
                }
            }
            let mut left = r as usize;
            while left > 0 {
                let f = q
                    .front_mut()
                    .expect("bytes written belong to queued frames");
                let take = left.min(f.total() - f.written);
                f.written += take;
                left -= take;
                if f.written == f.total() {
                    let f = q.pop_front().unwrap();
                    // Without a sink (called from `send`), the caller learns
                    // of its frame's completion from the emptied queue, and
                    // batched frames before it are reported later.
                    match (f.token, sink.as_deref_mut()) {
                        (Some(t), Some(s)) => s.on_send_done(t),
                        (Some(t), None) => self.done_tokens.push(t),
                        (None, _) => {}
                    }
                }
            }
        }
        let want_out = !self.peers[peer].sendq.is_empty();
        let conn = self.conns[c].as_mut().expect("live connection");
        if want_out != conn.watching_out {
            conn.watching_out = want_out;
            return self.rearm(c);
        }
        Served::Fine
    }

    /// Re-registers a connection's interest: readable unless paused,
    /// writable only while frames are queued.
    fn rearm(&mut self, c: usize) -> Served {
        let conn = self.conns[c].as_ref().expect("live connection");
        let mut ev = 0u32;
        if !matches!(conn.rx, RxState::Paused { .. }) {
            ev |= libc::EPOLLIN as u32;
        }
        if conn.watching_out {
            ev |= libc::EPOLLOUT as u32;
        }
        let fd = conn.fd.as_raw_fd();
        if self
            .epoll_ctl(libc::EPOLL_CTL_MOD, fd, ev, c as u64)
            .is_err()
        {
            return Served::Close("epoll_ctl failed".into());
        }
        Served::Fine
    }

    /// Retries connections paused for lack of room above.
    fn resume_paused(&mut self, sink: &mut dyn FrameSink) -> bool {
        let mut did = false;
        for c in std::mem::take(&mut self.paused) {
            let Some(conn) = self.conns.get(c).and_then(Option::as_ref) else {
                continue;
            };
            let RxState::Paused { header } = conn.rx else {
                continue;
            };
            let peer = conn.peer.expect("established connection has a peer");
            let outcome = match sink.on_header(peer, &header) {
                Err(why) => Served::Close(format!("bad frame: {why}")),
                Ok(PayloadDest::Pause) => {
                    self.paused.push(c);
                    continue;
                }
                Ok(dest) => {
                    did = true;
                    self.conn(c).rx = RxState::Payload {
                        header,
                        target: RxTarget::new(dest, header.len),
                        done: 0,
                    };
                    match self.rearm(c) {
                        Served::Fine => self.read_frames(c, sink),
                        closed => closed,
                    }
                }
            };
            if let Served::Close(why) = outcome {
                self.close_conn(c, &why, sink);
            }
        }
        did
    }

    /// Parses and delivers every complete piece in the receive buffer.
    /// Returns Ok(true) when the connection is paused.
    fn parse_buffered(
        &mut self,
        c: usize,
        peer: u32,
        sink: &mut dyn FrameSink,
    ) -> Result<bool, String> {
        loop {
            let conn = self.conns[c].as_mut().expect("live connection");
            match &mut conn.rx {
                RxState::Paused { .. } => return Ok(true),
                RxState::Header => {
                    if conn.rend - conn.rstart < HEADER_LEN {
                        return Ok(false);
                    }
                    let bytes: [u8; HEADER_LEN] = conn.rbuf[conn.rstart..conn.rstart + HEADER_LEN]
                        .try_into()
                        .unwrap();
                    conn.rstart += HEADER_LEN;
                    let h = Header::decode(&bytes).map_err(|e| format!("malformed frame: {e}"))?;
                    // A CLAIMED frame reports a write into an advertised
                    // receive, which only a peer on this host's shared memory
                    // can make; over TCP it would complete a receive that
                    // holds no data.
                    if h.kind == FrameKind::Claimed {
                        return Err(
                            "malformed frame: CLAIMED, which only shared memory carries, \
                                    arrived over TCP"
                                .into(),
                        );
                    }
                    if !h.carries_payload() {
                        sink.on_frame(peer, &h, Payload::Empty)
                            .map_err(|e| format!("bad frame: {e}"))?;
                        continue;
                    }
                    match sink
                        .on_header(peer, &h)
                        .map_err(|e| format!("bad frame: {e}"))?
                    {
                        PayloadDest::Pause => {
                            conn.rx = RxState::Paused { header: h };
                            self.paused.push(c);
                            if let Served::Close(why) = self.rearm(c) {
                                return Err(why);
                            }
                            return Ok(true);
                        }
                        dest => {
                            conn.rx = RxState::Payload {
                                header: h,
                                target: RxTarget::new(dest, h.len),
                                done: 0,
                            }
                        }
                    }
                }
                RxState::Payload {
                    header,
                    target,
                    done,
                } => {
                    let avail = conn.rend - conn.rstart;
                    let remaining = header.len - *done;
                    let take = (avail as u64).min(remaining) as usize;
                    let pos = *done as usize;
                    if pos < target.cap {
                        let n = take.min(target.cap - pos);
                        // SAFETY: `pos + n <= cap`, and the target is valid for
                        // `cap` bytes of writes (the sink's promise for Direct,
                        // our own Vec for Buffer); the source is inside rbuf.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                conn.rbuf[conn.rstart..].as_ptr(),
                                target.ptr.add(pos),
                                n,
                            )
                        };
                    }
                    conn.rstart += take;
                    *done += take as u64;
                    if *done < header.len {
                        return Ok(false);
                    }
                    let h = *header;
                    conn.header_first = h.len >= DIRECT_MIN as u64;
                    let RxState::Payload { target, .. } =
                        std::mem::replace(&mut conn.rx, RxState::Header)
                    else {
                        unreachable!()
                    };
                    sink.on_frame(peer, &h, target.finish(h.len))
                        .map_err(|e| format!("bad frame: {e}"))?;
                }
            }
        }
    }

    /// Reads and delivers frames until the socket would block.
    fn read_frames(&mut self, c: usize, sink: &mut dyn FrameSink) -> Served {
        let peer = self
            .conn(c)
            .peer
            .expect("established connection has a peer");
        loop {
            match self.parse_buffered(c, peer, sink) {
                Err(why) => return Served::Close(why),
                Ok(true) => return Served::Fine,
                Ok(false) => {}
            }
            let conn = self.conns[c].as_mut().expect("live connection");
            let fd = conn.fd.as_raw_fd();
            // Large payloads go straight to their destination, skipping rbuf.
            let direct = match &conn.rx {
                RxState::Payload {
                    header,
                    target,
                    done,
                } if conn.rstart == conn.rend => {
                    let pos = *done as usize;
                    let want =
                        (header.len - *done).min(target.cap.saturating_sub(pos) as u64) as usize;
                    (want >= DIRECT_MIN).then(|| {
                        // SAFETY: `pos + want <= cap`; the target is valid for `cap` bytes.
                        unsafe { std::slice::from_raw_parts_mut(target.ptr.add(pos), want) }
                    })
                }
                _ => None,
            };
            let (result, asked) = match direct {
                Some(dst) => {
                    let asked = dst.len();
                    let r = read_some(fd, dst);
                    if let (Ok(n), RxState::Payload { done, .. }) = (&r, &mut conn.rx) {
                        *done += *n as u64;
                    }
                    (r, asked)
                }
                None => {
                    if conn.rstart == conn.rend {
                        conn.rstart = 0;
                        conn.rend = 0;
                    } else if conn.rstart > 0 {
                        conn.rbuf.copy_within(conn.rstart..conn.rend, 0);
                        conn.rend -= conn.rstart;
                        conn.rstart = 0;
                    }
                    // (Here rstart is 0, and a header state holds less
                    // than a header, or parse_buffered would have taken it.)
                    let asked = if conn.header_first
                        && matches!(conn.rx, RxState::Header)
                        && conn.rend < HEADER_LEN
                    {
                        HEADER_LEN - conn.rend
                    } else {
                        RBUF_LEN - conn.rend
                    };
                    let r = read_some(fd, &mut conn.rbuf[conn.rend..conn.rend + asked]);
                    if let Ok(n) = r {
                        conn.rend += n;
                    }
                    (r, asked)
                }
            };
            match result {
                Ok(0) => return Served::Close("connection closed".into()),
                Ok(n) => {
                    self.bytes_read += n as u64;
                    if n < asked {
                        // The socket is drained for now; level-triggered epoll
                        // reports it again when more arrives.
                        return match self.parse_buffered(c, peer, sink) {
                            Err(why) => Served::Close(why),
                            Ok(_) => Served::Fine,
                        };
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Served::Fine,
                Err(e) => return Served::Close(format!("receive failed: {e}")),
            }
        }
    }

    /// Closes every connection (at finalize, once queues are flushed).
    pub fn close_all(&mut self) {
        for c in 0..self.conns.len() {
            self.drop_conn(c);
        }
        for p in &mut self.peers {
            p.conn = None;
            p.pending_out = None;
            p.sendq.clear();
        }
    }
}

impl RxTarget {
    fn new(dest: PayloadDest, len: u64) -> RxTarget {
        match dest {
            PayloadDest::Direct { ptr, cap } => RxTarget {
                ptr,
                cap,
                owned: None,
            },
            _ => {
                let mut v = vec![0u8; len as usize];
                RxTarget {
                    ptr: v.as_mut_ptr(),
                    cap: v.len(),
                    owned: Some(v),
                }
            }
        }
    }

    fn finish(self, len: u64) -> Payload {
        match self.owned {
            Some(v) => Payload::Buffer(v),
            None => Payload::Direct {
                written: (len as usize).min(self.cap),
            },
        }
    }
}

/// Reads into `buf`; `Ok(0)` is EOF.
fn read_some(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = errno();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn write_some(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for reads of its length; MSG_NOSIGNAL avoids SIGPIPE.
        let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = errno();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn sockaddr_of(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

#[cfg(test)]
mod tests {

    #[test]
    fn interface_patterns_pick_by_name_and_network() {
        let ifs = |v: &[(&str, [u8; 4], bool)]| -> Vec<Interface> {
            v.iter()
                .map(|(n, a, l)| Interface {
                    name: n.to_string(),
                    addr: Ipv4Addr::from(*a),
                    loopback: *l,
                })
                .collect()
        };
        let all = ifs(&[
            ("lo", [127, 0, 0, 1], true),
            ("eth0", [192, 0, 2, 5], false),
            ("ib0", [10, 9, 0, 7], false),
        ]);
        let names = |v: Vec<Interface>| v.into_iter().map(|i| i.name).collect::<Vec<_>>();
        assert_eq!(
            names(usable_interfaces(&all, "", "").unwrap()),
            ["eth0", "ib0"]
        );
        assert_eq!(
            names(usable_interfaces(&all, "10.9.0.0/16", "").unwrap()),
            ["ib0"]
        );
        assert_eq!(
            names(usable_interfaces(&all, "ib0,eth*", "").unwrap()),
            ["ib0", "eth0"]
        );
        assert_eq!(names(usable_interfaces(&all, "", "eth0").unwrap()), ["ib0"]);
        assert_eq!(names(usable_interfaces(&all, "lo", "").unwrap()), ["lo"]);
        assert!(usable_interfaces(&all, "10.0.0.0/40", "").is_err());
        assert!(usable_interfaces(&all, "", "300.1.1.1/8").is_err());
        assert_eq!(
            listen_ip("ib0", "", 1, None).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            "single-host jobs stay on loopback"
        );
    }
    use super::*;
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};

    /// Records what arrives; payloads go into fresh buffers.
    #[derive(Default)]
    struct Recorder {
        frames: Vec<(u32, Header, Vec<u8>)>,
        done: Vec<u64>,
        lost: Vec<(u32, String)>,
    }

    impl FrameSink for Recorder {
        fn on_header(&mut self, _peer: u32, _h: &Header) -> Result<PayloadDest, String> {
            Ok(PayloadDest::Buffer)
        }
        fn on_frame(&mut self, peer: u32, h: &Header, payload: Payload) -> Result<(), String> {
            let data = match payload {
                Payload::Buffer(v) => v,
                _ => Vec::new(),
            };
            self.frames.push((peer, *h, data));
            Ok(())
        }
        fn on_send_done(&mut self, token: u64) {
            self.done.push(token);
        }
        fn on_peer_lost(&mut self, peer: u32, reason: &str) {
            self.lost.push((peer, reason.to_string()));
        }
    }

    fn pair(secret_of_1: [u8; 32]) -> (TcpTransport, TcpTransport) {
        pair_polled_by(secret_of_1, Poller::Epoll)
    }

    fn pair_polled_by(secret_of_1: [u8; 32], poller: Poller) -> (TcpTransport, TcpTransport) {
        pair_with(secret_of_1, poller, None)
    }

    fn pair_with(
        secret_of_1: [u8; 32],
        poller: Poller,
        congestion: Option<&str>,
    ) -> (TcpTransport, TcpTransport) {
        let book: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec![String::new(); 2]));
        let make = |rank: u32, secret: [u8; 32]| {
            let book = book.clone();
            let cfg = TcpConfig {
                rank,
                size: 2,
                secret,
                listen_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port_range: None,
                sndbuf: 0,
                // Small, so frames leave in pieces across calls.
                send_chunk: 4096,
                rcvbuf: 0,
                congestion: congestion.map(str::to_string),
                connect_timeout: Duration::from_secs(5),
                poller,
                timing: false,
            };
            let t = TcpTransport::new(
                cfg,
                Box::new(move |p| Ok(book.lock().unwrap()[p as usize].clone())),
            )
            .unwrap();
            t
        };
        let t0 = make(0, [7; 32]);
        let t1 = make(1, secret_of_1);
        book.lock().unwrap()[0] = t0.address().to_string();
        book.lock().unwrap()[1] = t1.address().to_string();
        (t0, t1)
    }

    fn eager(tag: i32, len: usize) -> Header {
        Header {
            kind: FrameKind::Eager,
            context: 0,
            src: 0,
            tag,
            len: len as u64,
            sreq: 0,
            rreq: 0,
        }
    }

    fn drive(
        t0: &mut TcpTransport,
        r0: &mut Recorder,
        t1: &mut TcpTransport,
        r1: &mut Recorder,
        until: impl Fn(&Recorder, &Recorder) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !until(r0, r1) {
            assert!(Instant::now() < deadline, "transport exchange timed out");
            t0.progress(r0, 0);
            t1.progress(r1, 0);
        }
    }

    /// Frames of every size in a row, large ones among small ones: each
    /// arrives whole and in order, whether its payload was read into the
    /// connection's buffer or straight into its own (after a large frame
    /// the next header is read alone).
    #[test]
    fn large_and_small_frames_interleaved_arrive_intact() {
        let (mut t0, mut t1) = pair([7; 32]);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        let lens = [
            40_000usize,
            8,
            100_000,
            3,
            0,
            32 * 1024,
            32 * 1024,
            5,
            70_000,
            1,
            200_000,
            9,
        ];
        let payloads: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (j * 7 + i * 31) as u8).collect())
            .collect();
        for (i, p) in payloads.iter().enumerate() {
            // (The payloads outlive the exchange, as `send` asks.)
            t0.send(
                1,
                &eager(i as i32, p.len()),
                p.as_ptr(),
                p.len(),
                Some(i as u64),
            )
            .unwrap();
        }
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |_, b| {
            b.frames.len() == lens.len()
        });
        for (i, (peer, h, data)) in r1.frames.iter().enumerate() {
            assert_eq!((*peer, h.tag), (0, i as i32));
            assert_eq!(data, &payloads[i], "frame {i} ({} bytes)", lens[i]);
        }
    }

    /// The congestion control of `t`'s connection to `peer`.
    fn congestion_of(t: &TcpTransport, peer: u32) -> String {
        let c = t.peers[peer as usize].conn.expect("connected");
        let fd = t.conns[c].as_ref().unwrap().fd.as_raw_fd();
        let mut name = [0u8; 16];
        let mut len = name.len() as libc::socklen_t;
        // SAFETY: `name` and `len` are valid for writes of the sizes given.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                name.as_mut_ptr().cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0, "getsockopt TCP_CONGESTION: {}", errno());
        let name = &name[..len as usize];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    }

    #[test]
    fn congestion_control_is_reno_on_loopback_unless_asked_otherwise() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let lan = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(congestion_for("auto", lo).as_deref(), Some("reno"));
        assert_eq!(
            congestion_for("auto", lan),
            None,
            "across hosts: the system's"
        );
        assert_eq!(congestion_for("system", lo), None);
        assert_eq!(congestion_for("", lo), None);
        assert_eq!(congestion_for(" cubic ", lan).as_deref(), Some("cubic"));
        // Both ends of a connection carry the choice: the connecting one
        // and the accepting one.
        let (mut t0, mut t1) = pair_with([7; 32], Poller::Epoll, Some("reno"));
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        t0.send(1, &eager(1, 3), b"abc".as_ptr(), 3, None).unwrap();
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |_, b| {
            b.frames.len() == 1
        });
        assert_eq!(congestion_of(&t0, 1), "reno");
        assert_eq!(congestion_of(&t1, 0), "reno");
    }

    #[test]
    fn select_poller_calls_a_send_finished_on_writability_progress() {
        let (mut t0, mut t1) = pair_polled_by([7; 32], Poller::Select);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        // Far more than the socket buffers hold: the frame stays queued
        // until the peer reads, and leaves on writability alone.
        let big = vec![5u8; 64 << 20];
        t0.send(1, &eager(1, big.len()), big.as_ptr(), big.len(), Some(9))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while r0.done.is_empty() {
            assert!(Instant::now() < deadline, "the send never finished");
            t1.progress(&mut r1, 0);
            // The call that finishes the send must say something happened:
            // a waiting caller told otherwise blocks without looking.
            let did = t0.progress(&mut r0, 0);
            assert!(
                did || r0.done.is_empty(),
                "a send finished in a call that reported nothing"
            );
        }
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |_, b| {
            b.frames.len() == 1
        });
        assert_eq!(r0.done, vec![9]);
        assert!(r1.frames[0].2 == big);
    }

    #[test]
    fn simultaneous_connects_deliver_everything_in_order() {
        let (mut t0, mut t1) = pair([7; 32]);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        let big: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        // Both ranks send before either connection exists.
        for tag in 0..5 {
            t0.send(
                1,
                &eager(tag, big.len()),
                big.as_ptr(),
                big.len(),
                Some(tag as u64),
            )
            .unwrap();
            t1.send(
                0,
                &eager(tag, 3),
                b"abc".as_ptr(),
                3,
                Some(100 + tag as u64),
            )
            .unwrap();
        }
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |a, b| {
            a.frames.len() == 5 && b.frames.len() == 5 && a.done.len() == 5 && b.done.len() == 5
        });
        for (i, (peer, h, data)) in r1.frames.iter().enumerate() {
            assert_eq!((*peer, h.tag), (0, i as i32));
            assert_eq!(data, &big);
        }
        for (i, (peer, h, data)) in r0.frames.iter().enumerate() {
            assert_eq!((*peer, h.tag, data.as_slice()), (1, i as i32, &b"abc"[..]));
        }
        assert!(r0.lost.is_empty() && r1.lost.is_empty());
    }

    #[test]
    fn strangers_are_dropped_and_the_job_carries_on() {
        let (mut t0, mut t1) = pair([7; 32]);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        let mut stranger = std::net::TcpStream::connect(t0.address()).unwrap();
        stranger.write_all(&[0x55; HELLO_LEN]).unwrap();
        stranger.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 16];
        loop {
            t0.progress(&mut r0, 0);
            match stranger.read(&mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => panic!("stranger got {other:?}"),
            }
            assert!(Instant::now() < deadline);
        }
        t1.send(0, &eager(9, 1), b"x".as_ptr(), 1, None).unwrap();
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |a, _| {
            a.frames.len() == 1
        });
        assert!(r0.lost.is_empty());
    }

    #[test]
    fn wrong_secret_never_delivers() {
        let (mut t0, mut t1) = pair([8; 32]);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        t1.send(0, &eager(1, 1), b"x".as_ptr(), 1, None).unwrap();
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |_, b| {
            !b.lost.is_empty()
        });
        assert!(r0.frames.is_empty());
        assert_eq!(r1.lost[0].0, 0);
    }

    #[test]
    fn a_claimed_frame_over_tcp_is_refused_and_the_peer_dropped() {
        let (mut t0, mut t1) = pair([7; 32]);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        let claimed = Header {
            kind: FrameKind::Claimed,
            sreq: 0,
            rreq: 0x10,
            ..eager(3, 4096)
        };
        t1.send(0, &eager(1, 1), b"x".as_ptr(), 1, None).unwrap();
        t1.send(0, &claimed, std::ptr::null(), 0, None).unwrap();
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |a, _| {
            !a.lost.is_empty()
        });
        assert_eq!(r0.frames.len(), 1, "only the frame before the claim");
        assert_eq!(r0.lost[0].0, 1);
        assert!(r0.lost[0].1.contains("CLAIMED"), "{}", r0.lost[0].1);
    }

    #[test]
    fn a_closed_peer_is_reported_lost_by_name() {
        let (mut t0, mut t1) = pair([7; 32]);
        let (mut r0, mut r1) = (Recorder::default(), Recorder::default());
        t1.send(0, &eager(1, 1), b"x".as_ptr(), 1, None).unwrap();
        drive(&mut t0, &mut r0, &mut t1, &mut r1, |a, _| {
            a.frames.len() == 1
        });
        drop(t1);
        let deadline = Instant::now() + Duration::from_secs(5);
        while r0.lost.is_empty() {
            assert!(Instant::now() < deadline);
            t0.progress(&mut r0, 10);
        }
        assert_eq!(r0.lost[0].0, 1);
        assert!(r0.lost[0].1.contains("rank 1"), "{}", r0.lost[0].1);
        let err = t0
            .send(1, &eager(2, 0), std::ptr::null(), 0, None)
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::ProcAborted);
    }

    /// Frame reassembly on a connection whose bytes come from a pipe, so
    /// that every split of the stream can be fed to the real reading code
    /// (`read_frames`, `parse_buffered`) without a peer. The transport
    /// binds its listener on loopback but no connection is made.
    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        /// Longest payload the sink takes, as the layers above bound theirs.
        const SINK_MAX: u64 = 1 << 20;

        /// Takes even tags' payloads into fresh buffers and odd tags' into
        /// a buffer of its own of `sreq % (len + 1)` bytes (the rest is
        /// dropped), as a posted receive shorter than the message would.
        #[derive(Default)]
        struct Collect {
            frames: Vec<(Header, Vec<u8>)>,
            direct: Option<Vec<u8>>,
        }

        impl FrameSink for Collect {
            fn on_header(&mut self, _peer: u32, h: &Header) -> Result<PayloadDest, String> {
                if h.len > SINK_MAX {
                    return Err(format!("{} bytes is too long", h.len));
                }
                if h.tag % 2 == 0 {
                    return Ok(PayloadDest::Buffer);
                }
                let cap = (h.sreq % (h.len + 1)) as usize;
                let mut v = vec![0u8; cap];
                let ptr = v.as_mut_ptr();
                assert!(self.direct.replace(v).is_none(), "one payload at a time");
                Ok(PayloadDest::Direct { ptr, cap })
            }
            fn on_frame(&mut self, _peer: u32, h: &Header, payload: Payload) -> Result<(), String> {
                let data = match payload {
                    Payload::Empty => Vec::new(),
                    Payload::Buffer(v) => v,
                    Payload::Direct { written } => {
                        let mut v = self.direct.take().expect("a direct payload was asked for");
                        assert!(written <= v.len(), "wrote {written} into {} bytes", v.len());
                        v.truncate(written);
                        v
                    }
                };
                self.frames.push((*h, data));
                Ok(())
            }
            fn on_send_done(&mut self, _token: u64) {}
            fn on_peer_lost(&mut self, _peer: u32, _reason: &str) {}
        }

        /// A transport of rank 0 of 2 with an established connection from
        /// rank 1 that reads a pipe; the pipe's write end.
        fn piped() -> (TcpTransport, usize, OwnedFd) {
            let cfg = TcpConfig {
                rank: 0,
                size: 2,
                secret: [7; 32],
                listen_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port_range: None,
                sndbuf: 0,
                send_chunk: 4096,
                rcvbuf: 0,
                congestion: None,
                connect_timeout: Duration::from_secs(5),
                poller: Poller::Epoll,
                timing: false,
            };
            let mut t = TcpTransport::new(cfg, Box::new(|_| Ok(String::new()))).unwrap();
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two descriptors.
            let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
            assert_eq!(r, 0, "pipe2: {}", errno());
            // SAFETY: both descriptors are new and owned by nobody else.
            let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            let c = t.new_conn(rd, Some(1), ConnState::Established);
            (t, c, wr)
        }

        /// Writes `stream` into the pipe in pieces of the given sizes (in
        /// turn), letting the transport read after each; the reason it
        /// dropped the connection, if it did.
        fn feed(stream: &[u8], sizes: &[usize], sink: &mut Collect) -> Option<String> {
            let (mut t, c, wr) = piped();
            let mut rest = stream;
            for &size in sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let mut piece = &rest[..size.min(rest.len())];
                rest = &rest[piece.len()..];
                while !piece.is_empty() {
                    // SAFETY: `piece` is valid for reads of its length.
                    let n =
                        unsafe { libc::write(wr.as_raw_fd(), piece.as_ptr().cast(), piece.len()) };
                    if n > 0 {
                        piece = &piece[n as usize..];
                    } else {
                        assert_eq!(
                            errno().kind(),
                            io::ErrorKind::WouldBlock,
                            "pipe write failed"
                        );
                    }
                    // The pipe holds 64 KiB: read between writes.
                    if let Served::Close(why) = t.read_frames(c, sink) {
                        return Some(why);
                    }
                }
            }
            None
        }

        /// The numbers of every kind but CLAIMED, found through the decoder
        /// so that a new kind is drawn as soon as it exists.
        fn kind_numbers() -> Vec<u8> {
            let probe = Header {
                kind: FrameKind::Eager,
                context: 0,
                src: 0,
                tag: 0,
                len: 0,
                sreq: 0,
                rreq: 0,
            }
            .encode();
            (0..=u8::MAX)
                .filter(|&k| {
                    let mut b = probe;
                    b[1] = k;
                    Header::decode(&b).is_ok_and(|h| h.kind != FrameKind::Claimed)
                })
                .collect()
        }

        /// Frames the reader must accept: any kind but CLAIMED (which TCP
        /// refuses), payloads small, mid-sized and above `DIRECT_MIN`
        /// (read straight into their destination).
        fn frame() -> impl Strategy<Value = Header> {
            (
                proptest::sample::select(kind_numbers()),
                any::<u32>(),
                any::<u32>(),
                0..=i32::MAX,
                prop_oneof![4 => 0u64..64, 2 => 0u64..5000, 1 => 30_000u64..70_000],
                any::<u64>(),
                any::<u64>(),
            )
                .prop_map(|(kind, context, src, tag, len, sreq, rreq)| {
                    let h = Header {
                        kind: FrameKind::Eager,
                        context,
                        src,
                        tag,
                        len,
                        sreq,
                        rreq,
                    };
                    // The kind by its number, through the decoder.
                    let mut b = h.encode();
                    b[1] = kind;
                    Header::decode(&b).expect("a valid header")
                })
        }

        fn split_sizes() -> impl Strategy<Value = Vec<usize>> {
            proptest::collection::vec(prop_oneof![1usize..8, 1usize..200, 1usize..70_000], 1..8)
        }

        /// The stream of `frames`, payload bytes numbered from `seed`.
        fn stream_of(frames: &[Header], seed: u8) -> (Vec<u8>, Vec<Vec<u8>>) {
            let mut stream = Vec::new();
            let mut payloads = Vec::new();
            for (i, h) in frames.iter().enumerate() {
                stream.extend_from_slice(&h.encode());
                let p: Vec<u8> = (0..h.payload_len())
                    .map(|j| seed.wrapping_add(i as u8).wrapping_add((j % 251) as u8))
                    .collect();
                stream.extend_from_slice(&p);
                payloads.push(p);
            }
            (stream, payloads)
        }

        proptest! {
            #![proptest_config(config())]

            /// However the stream is cut, every frame arrives once, in
            /// order, with its payload (or the part its destination holds).
            #[test]
            fn prop_tcp_frames_split_anywhere_arrive_intact(
                frames in proptest::collection::vec(frame(), 0..8),
                sizes in split_sizes(),
                seed in any::<u8>(),
            ) {
                let (stream, payloads) = stream_of(&frames, seed);
                let mut sink = Collect::default();
                let dropped = feed(&stream, &sizes, &mut sink);
                prop_assert_eq!(dropped, None);
                prop_assert_eq!(sink.frames.len(), frames.len());
                for ((h, p), (got_h, got_p)) in frames.iter().zip(&payloads).zip(&sink.frames) {
                    prop_assert_eq!(h, got_h);
                    let keep = if h.carries_payload() && h.tag % 2 == 1 {
                        (h.sreq % (h.len + 1)) as usize
                    } else {
                        p.len()
                    };
                    prop_assert_eq!(&p[..keep], &got_p[..]);
                }
            }

            /// Garbage, or valid frames with bytes overwritten, cut
            /// anywhere: the reader delivers what is well formed and drops
            /// the connection at the first fault, and never panics.
            #[test]
            fn prop_tcp_garbage_never_panics(
                frames in proptest::collection::vec(frame(), 0..4),
                noise in proptest::collection::vec(any::<u8>(), 0..400),
                flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
                sizes in split_sizes(),
            ) {
                let (mut stream, _) = stream_of(&frames, 0);
                stream.extend_from_slice(&noise);
                for (at, byte) in flips {
                    let n = stream.len();
                    if n > 0 {
                        stream[at % n] = byte;
                    }
                }
                let mut sink = Collect::default();
                let _ = feed(&stream, &sizes, &mut sink);
                for (h, p) in &sink.frames {
                    prop_assert!(h.kind != FrameKind::Claimed);
                    prop_assert!(p.len() as u64 <= h.payload_len());
                }
            }
        }
    }
}

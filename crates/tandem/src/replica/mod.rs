//! Replicated ranks (the VolpexMPI report's model for volatile nodes):
//! every rank of the program runs as R processes, and the job goes on while
//! each rank keeps one.
//!
//! Point-to-point above this layer speaks of ranks; the transports below
//! speak of processes. With N ranks and R replicas, process `p` is replica
//! `p / N` of rank `p % N`. Replicas of a rank run the same program, so
//! they send the same messages in the same order; this layer makes each
//! replica receive each message of each sender rank exactly once, in order,
//! from whichever replica of the sender is alive:
//!
//! * Every message from rank s to rank r gets a sequence number (the count
//!   of messages s sent to r before it, carried in the eager frame's `rreq`)
//!   and is kept in the sender replica's log. The send completes once
//!   logged: the log owns a copy.
//! * Replica k of s pushes each message to replica k of r, its partner
//!   (rMPI's parallel protocol: R independent copies of the job while
//!   nothing fails, each message crossing the network once per replica).
//! * A receiver replica takes message n of s only when it has taken n - 1;
//!   anything else is a duplicate (or early) and is dropped.
//! * When the replica a receiver takes s's messages from is lost, the
//!   receiver asks another live replica of s to send it everything from its
//!   next sequence number on (pull from the sender log, the VolpexMPI
//!   report's fallback), and that replica pushes to it from then on too.
//! * Receivers acknowledge what they took to every live replica of the
//!   sender, on traffic thresholds and within `ACK_DELAY_MS`; a sender frees
//!   log entries every live replica of the receiver has acknowledged. At
//!   `replica_log_bytes` a send waits (returned queued, logged when room
//!   comes); when a replica's lag is all that keeps the log full while
//!   another replica of its rank is further on, it is told it fell behind
//!   and stops.
//! * When every replica of a rank is lost, the rank is reported lost to
//!   point-to-point, which ends every operation involving it with an error.
//!
//! Frames go to processes through [`Links`]: shared memory between the
//! processes of one host, TCP between hosts, each pair always the same way,
//! so that each sender's frames arrive in order.
//!
//! Only eager frames are replicated: a replicated job sends every message
//! eagerly (the runtime sets the eager limit to the largest frame and turns
//! the single-copy and direct-write paths off), and any other frame kind
//! handed to this layer is refused. Frames arrive whole before they are
//! passed up, so a sender lost halfway through a frame leaves nothing
//! half-delivered above.

mod verify;

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use crate::error::{Error, ErrorClass, Result};
use crate::transport::{FrameSink, Links, Payload, PayloadDest, SendState};
use crate::wire::{FrameKind, Header};

/// Acknowledge after taking this many messages from one sender rank...
const ACK_EVERY_MSGS: u64 = 32;
/// ...or this many bytes (at most a quarter of the log's cap), or at the
/// latest after this many milliseconds (also when the process sleeps).
const ACK_EVERY_BYTES: u64 = 1 << 20;
pub const ACK_DELAY_MS: i32 = 5;

/// A leader replica runs at most this many decisions and choices
/// (p2p/wildcard.rs) ahead of what each sibling acknowledged hearing, and
/// a sibling that keeps it there for `replica_timeout_ms` has fallen
/// behind. At most the history the layer above keeps: when the leader is
/// lost, a survivor then still holds every decision a slower one lacks.
pub const DECISIONS_AHEAD: u64 = 1 << 14;
/// A follower acknowledges every this many decisions and choices it heard.
const DECISION_ACK_EVERY: u64 = 1 << 10;
const _: () = assert!(DECISIONS_AHEAD as usize <= crate::p2p::DECISION_HISTORY);

/// Token bits of the frames this layer hands the transport: the receiver
/// rank (19 bits), the replica (4 bits), the sequence number (40 bits); the
/// top bit marks a batch of hashes instead.
const TOKEN_SEQ_BITS: u32 = 40;
const TOKEN_REPLICA_BITS: u32 = 4;

/// Most replicas of a rank.
pub const MAX_REPLICAS: u32 = 1 << TOKEN_REPLICA_BITS;
/// Most ranks of a replicated job.
pub const MAX_RANKS: u32 = 1 << 19;
const HASH_TOKEN_BIT: u64 = 1 << 63;

fn token(rank: u32, replica: u32, seq: u64) -> u64 {
    (u64::from(rank) << (TOKEN_SEQ_BITS + TOKEN_REPLICA_BITS))
        | (u64::from(replica) << TOKEN_SEQ_BITS)
        | (seq & ((1 << TOKEN_SEQ_BITS) - 1))
}

fn untoken(t: u64) -> (u32, u32, u64) {
    (
        (t >> (TOKEN_SEQ_BITS + TOKEN_REPLICA_BITS)) as u32,
        ((t >> TOKEN_SEQ_BITS) & ((1 << TOKEN_REPLICA_BITS) - 1)) as u32,
        t & ((1 << TOKEN_SEQ_BITS) - 1),
    )
}

/// Where this process stands in a replicated job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Ranks of the program (N).
    pub ranks: u32,
    /// Replicas of every rank (R).
    pub replicas: u32,
    /// This process (`0..N*R`).
    pub process: u32,
}

impl Placement {
    pub fn rank(&self) -> u32 {
        self.process % self.ranks
    }

    pub fn replica(&self) -> u32 {
        self.process / self.ranks
    }

    /// The process that is replica `replica` of `rank`.
    pub fn process_of(&self, rank: u32, replica: u32) -> u32 {
        replica * self.ranks + rank
    }
}

/// A logged message.
struct Entry {
    header: Header,
    data: Vec<u8>,
    /// Replicas of the receiver whose frame of this entry a transport still
    /// reads (the entry's memory must stay until they are done).
    in_flight: u16,
}

/// What this replica sent to one receiver rank.
#[derive(Default)]
struct Outbound {
    next_seq: u64,
    /// Sequence number of `log[0]`.
    base: u64,
    log: VecDeque<Entry>,
    /// Per replica of the receiver: every message below this was taken.
    acked: Vec<u64>,
    /// Replicas of the receiver this replica sends messages to.
    subscribers: Vec<Subscriber>,
}

/// A replica of a receiver rank that this replica sends messages to.
#[derive(Clone, Copy)]
struct Subscriber {
    replica: u32,
    /// The next message to send it.
    next: u64,
    /// It asked for messages below this (`u64::MAX`: every message; the
    /// pull protocol asks for one at a time).
    limit: u64,
}

/// What this replica took from one sender rank.
#[derive(Default)]
struct Inbound {
    /// The next sequence number to take off the wire.
    expected: u64,
    /// Messages the layer above has taken (`expected` less those held).
    taken: u64,
    /// The replica of the sender messages come from.
    source: u32,
    /// What the last acknowledgement said, and bytes taken since.
    acked: u64,
    bytes_since_ack: u64,
    /// Frames taken off the wire but not yet by the layer above (it
    /// paused: its unexpected-message limit; or, with three or more
    /// replicas verifying, the message's copies are being voted on).
    held: VecDeque<Held>,
    /// Every replica of the sender is lost.
    lost: bool,
    /// The sender rank has finished: a replica of it left after
    /// `MPI_Finalize` and the others are gone. What this replica still
    /// sends it is dropped; it took all the rank sent before it left.
    finished: bool,
}

/// A message taken off the wire and not yet passed up.
struct Held {
    header: Header,
    data: Vec<u8>,
    seq: u64,
    state: HeldState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum HeldState {
    /// May go up.
    Ready,
    /// Waits for other replicas' hashes of it (verify.rs).
    Voting,
    /// The majority's copy is fetched from a replica in the mask `from`
    /// (asked: `asked`), and must hash `hash`.
    Fetching { from: u32, asked: u32, hash: u64 },
}

/// A send waiting for room in the log.
struct Waiting {
    dest: u32,
    header: Header,
    payload: *const u8,
    len: usize,
    /// The caller's token (its payload stays valid until reported), or the
    /// copy this layer made when there was none.
    token: Option<u64>,
    copy: Option<Vec<u8>>,
}

/// Replication state of one process.
pub struct Replicas {
    place: Placement,
    log_cap: usize,
    log_bytes: usize,
    /// Per process: lost (dead, exited, or declared failed).
    dead: Vec<bool>,
    /// Per process: said it finished (`ReplicaDone`) before it left.
    left_finished: Vec<bool>,
    out: Vec<Outbound>,
    inb: Vec<Inbound>,
    /// Sends waiting for log room, in order.
    waiting: VecDeque<Waiting>,
    /// Tokens of waiting sends now logged, to report to the layer above.
    done: Vec<u64>,
    /// Frames to send once the transport is free: (process, header).
    control: Vec<(u32, Header)>,
    /// Frames to processes declared failed here, telling them so.
    farewells: Vec<(u32, Header)>,
    /// Since when sends wait for a full log, and how long a replica may
    /// keep it full before it has fallen behind (`replica_timeout_ms`).
    full_since: Option<Instant>,
    patience: std::time::Duration,
    /// Resumes asked of this replica: (receiver rank, its replica, from,
    /// limit or 0).
    resumes: Vec<(u32, u32, u64, u64)>,
    /// Messages asked of this replica again, for a vote's majority copy:
    /// (receiver rank, its replica, sequence number).
    fetches: Vec<(u32, u32, u64)>,
    /// Receiver ranks with acknowledgements to send.
    ack_due: Vec<u32>,
    /// Ranks every replica of which is lost, to report above: (rank, why).
    lost_ranks: Vec<(u32, String)>,
    pub counters: ReplicaCounters,
    last_ack: Instant,
    /// This replica leads its rank (the lowest-numbered live replica), and
    /// whether the layer above has yet to be told that a sibling was lost
    /// (and whether this replica leads now).
    leader: bool,
    lead_news: bool,
    /// Whether the layer above was told that this replica leads: a new
    /// leader is told once every live sibling handed over what it heard
    /// from the lost leaders, the last of which had number
    /// `handover_from - 1` (`handed_over`: per sibling, the same count).
    lead_told: bool,
    handover_from: u32,
    handed_over: Vec<u32>,
    /// Per sibling replica: decisions and choices sent to it, how many it
    /// acknowledged hearing, and how many this replica heard from it; since
    /// when this leader waits for a sibling ([`DECISIONS_AHEAD`]).
    decisions_told: Vec<u64>,
    decisions_acked: Vec<u64>,
    decisions_heard: Vec<u64>,
    decisions_full_since: Option<Instant>,
    /// `replica_protocol=pull`: receivers ask for each message (the
    /// VolpexMPI report's protocol) instead of partners pushing them.
    pull: bool,
    /// `replica_verify=hash` (verify.rs), with the batches of hashes a
    /// transport still reads, by token.
    verify: Option<verify::Verifier>,
    hash_frames: HashMap<u64, Vec<u8>>,
    next_hash_token: u64,
    last_hashes: Instant,
}

/// What the replication layer did (shown with `--set stats=1`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplicaCounters {
    pub logged_msgs: u64,
    pub log_bytes_max: u64,
    pub duplicates_dropped: u64,
    pub resumes_asked: u64,
    pub resumes_served: u64,
    pub replayed_msgs: u64,
    pub log_waits: u64,
    pub replicas_lost: u64,
    pub decision_waits: u64,
}

impl Replicas {
    pub fn new(
        place: Placement,
        log_cap: usize,
        patience: std::time::Duration,
        verify: bool,
        pull: bool,
    ) -> Replicas {
        let n = place.ranks as usize;
        let r = place.replicas;
        let k = place.replica();
        let out = (0..n)
            .map(|_| Outbound {
                acked: vec![0; r as usize],
                subscribers: if pull {
                    Vec::new()
                } else {
                    vec![Subscriber {
                        replica: k,
                        next: 0,
                        limit: u64::MAX,
                    }]
                },
                ..Outbound::default()
            })
            .collect();
        let inb = (0..n)
            .map(|_| Inbound {
                source: k,
                ..Inbound::default()
            })
            .collect();
        Replicas {
            place,
            log_cap: log_cap.max(1),
            log_bytes: 0,
            dead: vec![false; (place.ranks * place.replicas) as usize],
            left_finished: vec![false; (place.ranks * place.replicas) as usize],
            out,
            inb,
            waiting: VecDeque::new(),
            done: Vec::new(),
            control: Vec::new(),
            farewells: Vec::new(),
            full_since: None,
            patience,
            resumes: Vec::new(),
            fetches: Vec::new(),
            ack_due: Vec::new(),
            lost_ranks: Vec::new(),
            counters: ReplicaCounters::default(),
            last_ack: Instant::now(),
            leader: k == 0,
            lead_news: false,
            lead_told: k == 0,
            handover_from: 0,
            handed_over: vec![0; r as usize],
            decisions_told: vec![0; r as usize],
            decisions_acked: vec![0; r as usize],
            decisions_heard: vec![0; r as usize],
            decisions_full_since: None,
            pull,
            verify: verify.then(|| verify::Verifier::new(place.ranks, place.replicas)),
            hash_frames: HashMap::new(),
            next_hash_token: 0,
            last_hashes: Instant::now(),
        }
    }

    pub fn placement(&self) -> Placement {
        self.place
    }

    /// Whether this replica leads its rank now (and the layer above knows).
    pub fn leads(&self) -> bool {
        self.leader && self.lead_told
    }

    /// Sends `header` (no payload) to every other live replica of this rank.
    pub fn send_to_siblings(&mut self, net: &mut dyn Links, header: &Header) {
        let me = self.place.rank();
        let counted = matches!(
            header.kind,
            FrameKind::ReplicaDecision | FrameKind::ReplicaChoice
        );
        for j in 0..self.place.replicas {
            let p = self.place.process_of(me, j);
            if j != self.place.replica() && !self.dead[p as usize] {
                self.decisions_told[j as usize] += u64::from(counted);
                // A failure is reported by the transport as a loss.
                let _ = net.send(p, header, std::ptr::null(), 0, None);
            }
        }
    }

    /// Whether this leader has run [`DECISIONS_AHEAD`] decisions and
    /// choices ahead of a live sibling: the layer above waits before it
    /// makes another.
    pub fn decisions_ahead(&self) -> bool {
        self.leader && self.lagging_siblings().next().is_some()
    }

    /// The live siblings [`DECISIONS_AHEAD`] behind this replica.
    fn lagging_siblings(&self) -> impl Iterator<Item = u32> + '_ {
        let me = self.place.rank();
        (0..self.place.replicas).filter(move |&j| {
            j != self.place.replica()
                && !self.dead[self.place.process_of(me, j) as usize]
                && self.decisions_told[j as usize] - self.decisions_acked[j as usize]
                    >= DECISIONS_AHEAD
        })
    }

    /// A leader waiting for a sibling to catch up: for `patience`, then the
    /// sibling has fallen behind and is told so.
    fn drop_decision_laggards(&mut self) {
        if !self.decisions_ahead() {
            self.decisions_full_since = None;
            return;
        }
        let since = *self.decisions_full_since.get_or_insert_with(|| {
            self.counters.decision_waits += 1;
            Instant::now()
        });
        if since.elapsed() < self.patience {
            return;
        }
        let me = self.place.rank();
        let laggards: Vec<u32> = self.lagging_siblings().collect();
        for j in laggards {
            let p = self.place.process_of(me, j);
            self.farewells
                .push((p, control(FrameKind::ReplicaBehind, DECISIONS_AHEAD, 0)));
            self.process_lost_as_sender(p);
        }
        self.decisions_full_since = None;
    }

    /// Whether every live sibling handed over what it heard from the lost
    /// leaders (a new leader decides only then).
    fn all_handed_over(&self) -> bool {
        let me = self.place.rank();
        (0..self.place.replicas).all(|j| {
            j == self.place.replica()
                || self.dead[self.place.process_of(me, j) as usize]
                || self.handed_over[j as usize] >= self.handover_from
        })
    }

    /// Tells every other live process that this replica has finished
    /// (`MPI_Finalize`, after every live receiver took what it sent), so
    /// that slower replicas of other ranks, which may still send to this
    /// rank what they sent a faster sibling, do not take its leaving for a
    /// loss.
    pub fn announce_finished(&mut self, net: &mut dyn Links) {
        let me = self
            .place
            .process_of(self.place.rank(), self.place.replica());
        let h = control(FrameKind::ReplicaDone, 0, 0);
        for p in 0..self.dead.len() as u32 {
            if p != me && !self.dead[p as usize] {
                // A failure is reported by the transport as a loss.
                let _ = net.send(p, &h, std::ptr::null(), 0, None);
            }
        }
    }

    /// Bytes the log holds now.
    pub fn log_bytes(&self) -> usize {
        self.log_bytes
    }

    fn ack_every_bytes(&self) -> u64 {
        ACK_EVERY_BYTES.min(self.log_cap as u64 / 4).max(1)
    }

    /// Opens the connection to the partner replica of every other rank (so
    /// that a partner lost before it ever sent is noticed: its connection
    /// fails) with an acknowledgement of nothing, or, pulling, a request
    /// for the first message; and to its siblings, with an acknowledgement
    /// of nothing.
    pub fn greet(&mut self, net: &mut dyn Links) {
        let me = self.place.rank();
        let k = self.place.replica();
        for r in 0..self.place.ranks {
            if r != me {
                let p = self.place.process_of(r, k);
                let h = if self.pull {
                    resume_header(0, 1)
                } else {
                    ack_header(0)
                };
                self.control.push((p, h));
            }
        }
        // The siblings' connections too, before the leader has decisions
        // to send them (what waits for a connection dies with its sender).
        for j in k + 1..self.place.replicas {
            self.control
                .push((self.place.process_of(me, j), ack_header(0)));
        }
        self.send_control(net);
    }

    /// A frame from the layer above to rank `dest`. Eager frames are logged
    /// and pushed to the receiver's subscribed replicas; the send is done
    /// once logged. Others are refused.
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes during the call and,
    /// when the answer is [`SendState::Queued`], until `token` is reported
    /// done (the transports' own contract).
    pub unsafe fn send(
        &mut self,
        net: &mut dyn Links,
        dest: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState> {
        if header.kind != FrameKind::Eager {
            return Err(Error::new(
                ErrorClass::Unsupported,
                format!(
                    "{:?} frames cannot travel between replicated ranks (one-sided \
                     communication and RWAPI are not available with replicas)",
                    header.kind
                ),
            ));
        }
        if self.inb[dest as usize].finished {
            return Ok(SendState::Done);
        }
        if self.inb[dest as usize].lost {
            return Err(Error::new(
                ErrorClass::ProcAborted,
                format!("rank {dest}: every replica is lost"),
            ));
        }
        if !self.waiting.is_empty() || !self.has_room(len) {
            self.counters.log_waits += 1;
            let copy = token.is_none().then(|| {
                // SAFETY: the caller keeps `payload` valid for `len` bytes
                // during the call.
                unsafe { bytes(payload, len) }.to_vec()
            });
            self.waiting.push_back(Waiting {
                dest,
                header: *header,
                payload,
                len,
                token,
                copy,
            });
            self.trim_or_drop_laggards(net);
            self.log_waiting(net);
            return Ok(match token {
                Some(t) if self.done.last() == Some(&t) => {
                    self.done.pop();
                    SendState::Done
                }
                None => SendState::Done,
                Some(_) => SendState::Queued,
            });
        }
        // SAFETY: as above.
        let data = unsafe { bytes(payload, len) }.to_vec();
        self.log_and_push(net, dest, *header, data);
        Ok(SendState::Done)
    }

    fn has_room(&self, len: usize) -> bool {
        self.log_bytes == 0 || self.log_bytes + len <= self.log_cap
    }

    fn log_and_push(&mut self, net: &mut dyn Links, dest: u32, mut header: Header, data: Vec<u8>) {
        let o = &mut self.out[dest as usize];
        let seq = o.next_seq;
        o.next_seq += 1;
        if let Some(v) = self.verify.as_mut() {
            let hash = verify::message_hash(&header, &data);
            let (place, dead, mine) = (self.place, &self.dead, self.place.replica());
            let others = (0..place.replicas)
                .filter(|&j| j != mine && !dead[place.process_of(dest, j) as usize]);
            v.logged(dest, others, seq, hash);
        }
        header.rreq = seq;
        self.log_bytes += data.len();
        self.counters.logged_msgs += 1;
        self.counters.log_bytes_max = self.counters.log_bytes_max.max(self.log_bytes as u64);
        o.log.push_back(Entry {
            header,
            data,
            in_flight: 0,
        });
        for i in 0..self.out[dest as usize].subscribers.len() {
            self.pump(net, dest, i);
        }
    }

    /// Sends subscriber `i` of `dest` what it asked for and is logged.
    fn pump(&mut self, net: &mut dyn Links, dest: u32, i: usize) {
        loop {
            let o = &mut self.out[dest as usize];
            let sub = &mut o.subscribers[i];
            if sub.next >= o.next_seq.min(sub.limit) {
                return;
            }
            let (j, seq) = (sub.replica, sub.next);
            sub.next += 1;
            self.push_entry(net, dest, j, seq);
        }
    }

    /// Sends logged message `seq` to replica `j` of `dest`.
    fn push_entry(&mut self, net: &mut dyn Links, dest: u32, j: u32, seq: u64) {
        let p = self.place.process_of(dest, j);
        let o = &mut self.out[dest as usize];
        if self.dead[p as usize] || o.acked[j as usize] > seq || seq < o.base {
            // Gone, or it took this message from a faster replica.
            return;
        }
        let Some(e) = o.log.get_mut((seq - o.base) as usize) else {
            return;
        };
        let t = token(dest, j, seq);
        match net.send(p, &e.header, e.data.as_ptr(), e.data.len(), Some(t)) {
            Ok(SendState::Queued) => e.in_flight |= 1 << j,
            // Done, or failed: the transport reports the loss itself.
            Ok(SendState::Done) | Err(_) => {}
        }
    }

    /// Logs waiting sends while there is room.
    fn log_waiting(&mut self, net: &mut dyn Links) {
        while let Some(w) = self.waiting.front() {
            if !self.has_room(w.len) {
                break;
            }
            let w = self.waiting.pop_front().expect("front exists");
            let data = match w.copy {
                Some(c) => c,
                // SAFETY: the caller of `send` keeps the payload valid until
                // its token is reported, which happens below.
                None => unsafe { bytes(w.payload, w.len) }.to_vec(),
            };
            self.log_and_push(net, w.dest, w.header, data);
            if let Some(t) = w.token {
                self.done.push(t);
            }
        }
    }

    /// Frees log entries every live replica of their receiver has taken and
    /// no transport still reads; with sends waiting and the log full, a
    /// replica that alone holds the log back while another replica of its
    /// rank is further on is declared failed.
    fn trim_or_drop_laggards(&mut self, net: &mut dyn Links) {
        for d in 0..self.place.ranks {
            self.trim(d);
        }
        if self.waiting.is_empty() || self.has_room(self.waiting[0].len) {
            self.full_since = None;
            return;
        }
        // A replica briefly slower than its sibling is waited for; one that
        // keeps the log full for `patience` has fallen behind.
        let since = *self.full_since.get_or_insert_with(Instant::now);
        if since.elapsed() < self.patience {
            return;
        }
        for d in 0..self.place.ranks {
            let o = &self.out[d as usize];
            if o.log.is_empty() {
                continue;
            }
            let live: Vec<u32> = (0..self.place.replicas)
                .filter(|&j| !self.dead[self.place.process_of(d, j) as usize])
                .collect();
            let furthest = live.iter().map(|&j| o.acked[j as usize]).max();
            let Some(furthest) = furthest else { continue };
            let laggards: Vec<u32> = live
                .iter()
                .copied()
                .filter(|&j| o.acked[j as usize] == o.base && furthest > o.base)
                .collect();
            for j in laggards {
                let p = self.place.process_of(d, j);
                let first_kept = self.out[d as usize].base + 1;
                self.farewells
                    .push((p, control(FrameKind::ReplicaBehind, first_kept, 0)));
                self.process_lost_as_sender(p);
            }
            self.trim(d);
        }
        self.send_control(net);
    }

    fn trim(&mut self, d: u32) {
        let place = self.place;
        let dead = &self.dead;
        let o = &mut self.out[d as usize];
        let low = (0..place.replicas)
            .filter(|&j| !dead[place.process_of(d, j) as usize])
            .map(|j| o.acked[j as usize])
            .min()
            .unwrap_or(o.next_seq);
        while o.base < low {
            match o.log.front() {
                Some(e) if e.in_flight == 0 => {
                    self.log_bytes -= e.data.len();
                    o.log.pop_front();
                    o.base += 1;
                }
                _ => break,
            }
        }
    }

    /// Process `p` (a replica of a receiver rank) no longer counts for this
    /// replica's log: nothing is pushed to it, nothing waits for it.
    fn process_lost_as_sender(&mut self, p: u32) {
        if self.dead[p as usize] {
            return;
        }
        self.dead[p as usize] = true;
        self.counters.replicas_lost += 1;
        let (d, j) = (p % self.place.ranks, p / self.place.ranks);
        if let Some(v) = self.verify.as_mut() {
            v.forget_receiver(d, j);
        }
        let o = &mut self.out[d as usize];
        o.subscribers.retain(|s| s.replica != j);
        for e in o.log.iter_mut() {
            e.in_flight &= !(1 << j);
        }
    }

    /// Process `p` is lost (its connection failed or closed).
    fn process_lost(&mut self, p: u32, why: &str) {
        let (s, j) = (p % self.place.ranks, p / self.place.ranks);
        self.process_lost_as_sender(p);
        let me = self.place.rank();
        if s == me {
            let live = |c: u32| !self.dead[self.place.process_of(me, c) as usize];
            let lowest_live = (0..self.place.replicas).find(|&c| live(c));
            let was_leader = (0..self.place.replicas).find(|&c| c == j || live(c)) == Some(j);
            if !self.leader && lowest_live == Some(self.place.replica()) {
                self.leader = true;
            }
            // Leading or not, the layer above passes on what the lost
            // leader told it, for the siblings that may have missed some;
            // a new leader waits for theirs.
            if was_leader {
                self.lead_news = true;
                self.handover_from = self.handover_from.max(j + 1);
            }
            return;
        }
        self.revote_without(s, j);
        let replicas = self.place.replicas;
        let i = &mut self.inb[s as usize];
        if i.lost || i.source != j {
            return;
        }
        let next = (1..replicas)
            .map(|d| (j + d) % replicas)
            .find(|&c| !self.dead[self.place.process_of(s, c) as usize]);
        match next {
            Some(c) => {
                i.source = c;
                self.counters.resumes_asked += 1;
                let from = i.expected;
                let limit = if self.pull { from + 1 } else { 0 };
                self.control
                    .push((self.place.process_of(s, c), resume_header(from, limit)));
            }
            None if (0..replicas)
                .any(|c| self.left_finished[self.place.process_of(s, c) as usize]) =>
            {
                i.finished = true;
            }
            None => {
                i.lost = true;
                self.lost_ranks.push((
                    s,
                    format!(
                        "rank {s}: all {replicas} replicas are lost (the last: {})",
                        // The transport names processes as ranks.
                        why.replacen(&format!("rank {p} "), &format!("replica {j} "), 1)
                    ),
                ));
            }
        }
    }

    /// Drives the transport once through this layer.
    pub fn progress(&mut self, net: &mut dyn Links, sink: &mut dyn FrameSink) -> bool {
        let mut did = self.deliver_held(sink);
        {
            let mut s = Upward {
                rep: self,
                inner: sink,
            };
            did |= net.progress(&mut s);
        }
        self.after_progress(net, sink);
        did
    }

    /// The layer above as a transport must see it in this job: processes
    /// become ranks, duplicates are dropped, this layer's frames are
    /// handled here. For what a transport reports outside
    /// [`Replicas::progress`] (a local process seen to exit during a
    /// sleep); the next progress pass does what it leaves.
    pub fn upward<'a>(&'a mut self, sink: &'a mut dyn FrameSink) -> impl FrameSink + 'a {
        Upward {
            rep: self,
            inner: sink,
        }
    }

    /// What a progress pass left to do: losses, resumes, acknowledgements,
    /// waiting sends, reports to the layer above.
    pub fn after_progress(&mut self, net: &mut dyn Links, sink: &mut dyn FrameSink) {
        let resumes = std::mem::take(&mut self.resumes);
        for (r, k, from, limit) in resumes {
            self.serve_resume(net, r, k, from, limit);
        }
        for (r, k, seq) in std::mem::take(&mut self.fetches) {
            self.push_entry(net, r, k, seq);
        }
        let due = std::mem::take(&mut self.ack_due);
        for s in due {
            self.ack(s);
        }
        if self.last_ack.elapsed().as_millis() >= ACK_DELAY_MS as u128 {
            self.ack_all();
        }
        if self.leader {
            self.drop_decision_laggards();
        }
        self.send_control(net);
        if let Some(votes) = self.verify.as_ref().map(|v| v.votes()) {
            // Votes hold messages until hashes come: they leave at once.
            let force = votes || self.last_hashes.elapsed().as_millis() >= 2;
            self.send_hashes(net, force);
            if votes {
                self.deliver_held(sink);
            }
        }
        if !self.waiting.is_empty() {
            self.trim_or_drop_laggards(net);
            self.log_waiting(net);
        }
        for t in std::mem::take(&mut self.done) {
            sink.on_send_done(t);
        }
        let pass = std::mem::take(&mut self.lead_news);
        let lead = self.leader && !self.lead_told && self.all_handed_over();
        if pass || lead {
            self.lead_told |= lead;
            let flags = u64::from(lead) | u64::from(pass) << 1;
            let lost = u64::from(self.handover_from.saturating_sub(1));
            let h = control(FrameKind::ReplicaLead, flags, lost);
            if let Err(why) = sink.on_frame(self.place.rank(), &h, Payload::Empty) {
                eprintln!("tandem: rank {}: {why}", self.place.rank());
            }
        }
        for (s, why) in std::mem::take(&mut self.lost_ranks) {
            sink.on_peer_lost(s, &why);
        }
    }

    /// Before the process sleeps: what is queued leaves. Acknowledgements
    /// wait for the sleep's timeout ([`Replicas::acks_due`]): sent at every
    /// sleep they cost a ping-pong two frames, and two wake-ups of sender
    /// replicas that wait too, per message.
    pub fn before_sleep(&mut self, net: &mut dyn Links) {
        self.send_control(net);
        if self.verify.is_some() {
            self.send_hashes(net, true);
        }
    }

    /// Sends the batches of hashes that are due (all with `force`).
    fn send_hashes(&mut self, net: &mut dyn Links, force: bool) {
        let Some(v) = self.verify.as_mut() else {
            return;
        };
        if force {
            self.last_hashes = Instant::now();
        }
        for (d, j, pairs) in v.batches(force) {
            let p = self.place.process_of(d, j);
            if self.dead[p as usize] {
                continue;
            }
            let h = Header {
                len: pairs.len() as u64,
                ..control(FrameKind::ReplicaHashes, 0, 0)
            };
            let t = HASH_TOKEN_BIT | self.next_hash_token;
            self.next_hash_token += 1;
            // The vector's heap buffer does not move when the vector does.
            if let Ok(SendState::Queued) = net.send(p, &h, pairs.as_ptr(), pairs.len(), Some(t)) {
                self.hash_frames.insert(t, pairs);
            }
        }
    }

    /// Whether messages were taken and not acknowledged yet: a sleep then
    /// ends after [`ACK_DELAY_MS`], when they are.
    pub fn acks_due(&self) -> bool {
        self.inb.iter().any(|i| i.acked < i.taken && !i.lost)
    }

    /// Messages checked against another replica's hash, and mismatches.
    pub fn verified(&self) -> (u64, u64) {
        self.verify
            .as_ref()
            .map_or((0, 0), |v| (v.checked, v.mismatches))
    }

    /// Whether this layer holds work a sleep would delay: frames the layer
    /// above paused, or sends waiting for log room.
    pub fn has_pending(&self) -> bool {
        !self.waiting.is_empty()
            || self.decisions_full_since.is_some()
            || self
                .inb
                .iter()
                .any(|i| i.held.front().is_some_and(|h| h.state == HeldState::Ready))
    }

    fn ack_all(&mut self) {
        for s in 0..self.place.ranks {
            if self.inb[s as usize].acked < self.inb[s as usize].taken {
                self.ack(s);
            }
        }
        self.last_ack = Instant::now();
    }

    /// Tells every live replica of `s` what this replica took from it.
    fn ack(&mut self, s: u32) {
        let i = &mut self.inb[s as usize];
        if i.acked == i.taken || i.lost {
            return;
        }
        i.acked = i.taken;
        i.bytes_since_ack = 0;
        let seq = i.taken;
        for j in 0..self.place.replicas {
            let p = self.place.process_of(s, j);
            if !self.dead[p as usize] {
                self.control.push((p, ack_header(seq)));
            }
        }
    }

    fn send_control(&mut self, net: &mut dyn Links) {
        // To replicas this one no longer counts (they are told why).
        for (p, h) in std::mem::take(&mut self.farewells) {
            let _ = net.send(p, &h, std::ptr::null(), 0, None);
        }
        for (p, h) in std::mem::take(&mut self.control) {
            if !self.dead[p as usize] {
                // A failure is reported by the transport as a loss.
                let _ = net.send(p, &h, std::ptr::null(), 0, None);
            }
        }
    }

    /// Replica `k` of rank `r` asks for the messages to `r` from `from` on,
    /// below `limit` (0: every one).
    fn serve_resume(&mut self, net: &mut dyn Links, r: u32, k: u32, from: u64, limit: u64) {
        let p = self.place.process_of(r, k);
        if self.dead[p as usize] {
            return;
        }
        let o = &mut self.out[r as usize];
        if from < o.base {
            self.farewells
                .push((p, control(FrameKind::ReplicaBehind, o.base, 0)));
            self.process_lost_as_sender(p);
            return;
        }
        o.acked[k as usize] = o.acked[k as usize].max(from);
        let limit = if limit == 0 { u64::MAX } else { limit };
        let i = match o.subscribers.iter().position(|s| s.replica == k) {
            Some(i) => {
                // A pull asks again from what it has not taken; what is on
                // its way is not sent twice.
                let sub = &mut o.subscribers[i];
                sub.next = sub.next.max(from);
                sub.limit = sub.limit.max(limit);
                i
            }
            None => {
                self.counters.resumes_served += 1;
                o.subscribers.push(Subscriber {
                    replica: k,
                    next: from,
                    limit,
                });
                o.subscribers.len() - 1
            }
        };
        self.pump(net, r, i);
    }

    /// Hands frames the layer above paused on to it, in order.
    fn deliver_held(&mut self, sink: &mut dyn FrameSink) -> bool {
        let mut did = false;
        for s in 0..self.place.ranks {
            while self.inb[s as usize]
                .held
                .front()
                .is_some_and(|h| h.state == HeldState::Ready)
            {
                let held = &mut self.inb[s as usize].held;
                let mut m = held.pop_front().expect("front exists");
                match pass_up(sink, s, &m.header, std::mem::take(&mut m.data)) {
                    Ok(None) => {
                        did = true;
                        self.taken(s, m.header.len);
                    }
                    Ok(Some(data)) => {
                        m.data = data;
                        self.inb[s as usize].held.push_front(m);
                        break;
                    }
                    Err(why) => {
                        self.inb[s as usize].lost = true;
                        self.lost_ranks.push((s, why));
                        break;
                    }
                }
            }
        }
        did
    }

    /// Voting: held message `seq` of `s` has its verdict.
    fn apply_verdict(&mut self, s: u32, seq: u64, verdict: verify::Verdict) {
        let place = self.place;
        let Some(m) = self.inb[s as usize].held.iter_mut().find(|m| m.seq == seq) else {
            return;
        };
        m.state = match verdict {
            verify::Verdict::Wait => HeldState::Voting,
            verify::Verdict::Take | verify::Verdict::NoMajority => HeldState::Ready,
            verify::Verdict::Fetch { from, hash } => {
                let c = from.trailing_zeros();
                self.control.push((
                    place.process_of(s, c),
                    control(FrameKind::ReplicaFetch, seq, 0),
                ));
                HeldState::Fetching {
                    from,
                    asked: c,
                    hash,
                }
            }
        };
    }

    /// Voting: replica `j` of `s` sent message `seq` again, as asked; true
    /// if it was (the copy replaces the held one when it hashes as the
    /// majority's did).
    fn take_fetched(&mut self, s: u32, j: u32, seq: u64, h: &Header, data: Vec<u8>) -> bool {
        let me = self.place.rank();
        let Some(m) = self.inb[s as usize].held.iter_mut().find(|m| m.seq == seq) else {
            return false;
        };
        let HeldState::Fetching { asked, hash, .. } = m.state else {
            return false;
        };
        if asked != j {
            return false;
        }
        if verify::message_hash(h, &data) == hash {
            eprintln!(
                "tandem: rank {me}: took the majority's copy of message {seq} from rank {s} (replica {j}'s)"
            );
            m.data = data;
        } else {
            eprintln!(
                "tandem: rank {me}: replica {j} of rank {s} sent message {seq} again unlike its hash; kept the copy at hand"
            );
        }
        m.state = HeldState::Ready;
        true
    }

    /// Voting: replica `j` of `s` is lost; messages waiting for its hash
    /// or its copy turn to the others.
    fn revote_without(&mut self, s: u32, j: u32) {
        let place = self.place;
        let Some(v) = self.verify.as_mut() else {
            return;
        };
        if !v.votes() {
            return;
        }
        let dead = &self.dead;
        let live = |r: u32| !dead[place.process_of(s, r) as usize];
        let decided = v.vote_reconsider(s, &live);
        let mut refetch = Vec::new();
        for m in self.inb[s as usize].held.iter_mut() {
            if let HeldState::Fetching { from, asked, hash } = m.state {
                if asked != j {
                    continue;
                }
                let rest = (0..place.replicas)
                    .filter(|&r| from & (1 << r) != 0 && live(r))
                    .fold(0u32, |acc, r| acc | 1 << r);
                if rest == 0 {
                    eprintln!(
                        "tandem: rank {}: every replica of rank {s} that agreed on message {} is lost; kept the copy at hand",
                        place.rank(),
                        m.seq
                    );
                    m.state = HeldState::Ready;
                } else {
                    let c = rest.trailing_zeros();
                    m.state = HeldState::Fetching {
                        from: rest,
                        asked: c,
                        hash,
                    };
                    refetch.push((place.process_of(s, c), m.seq));
                }
            }
        }
        for (p, seq) in refetch {
            self.control
                .push((p, control(FrameKind::ReplicaFetch, seq, 0)));
        }
        for (seq, verdict, found) in decided {
            for m in &found {
                report_mismatch(place.rank(), m);
            }
            self.apply_verdict(s, seq, verdict);
        }
    }

    /// The next message of `s` was taken by the layer above.
    fn taken(&mut self, s: u32, len: u64) {
        let every = self.ack_every_bytes();
        let i = &mut self.inb[s as usize];
        i.taken += 1;
        i.bytes_since_ack += len;
        if i.taken - i.acked >= ACK_EVERY_MSGS || i.bytes_since_ack >= every {
            self.ack_due.push(s);
        }
    }

    /// Whether every live replica of every receiver has acknowledged all
    /// this replica sent (then it may leave).
    pub fn all_acknowledged(&self) -> bool {
        self.waiting.is_empty()
            && (0..self.place.ranks).all(|d| {
                let o = &self.out[d as usize];
                (0..self.place.replicas).all(|j| {
                    self.dead[self.place.process_of(d, j) as usize]
                        || o.acked[j as usize] >= o.next_seq
                })
            })
    }
}

/// Hands a whole eager frame to `sink` as coming from rank `s`; gives the
/// data back if the sink paused.
fn pass_up(
    sink: &mut dyn FrameSink,
    s: u32,
    h: &Header,
    mut data: Vec<u8>,
) -> std::result::Result<Option<Vec<u8>>, String> {
    match sink.on_header(s, h)? {
        PayloadDest::Pause => Ok(Some(data)),
        PayloadDest::Buffer => {
            sink.on_frame(s, h, Payload::Buffer(std::mem::take(&mut data)))?;
            Ok(None)
        }
        PayloadDest::Direct { ptr, cap } => {
            let n = data.len().min(cap);
            // SAFETY: the sink promised `cap` writable bytes at `ptr`; `n`
            // is within both.
            unsafe { crate::transport::copy_bytes(data.as_ptr(), ptr, n) };
            sink.on_frame(s, h, Payload::Direct { written: n })?;
            Ok(None)
        }
    }
}

fn report_mismatch(me: u32, m: &verify::Mismatch) {
    eprintln!(
        "tandem: rank {me}: message {} from rank {} (context {}, tag {}, {} bytes) differs \
         between the replicas of rank {}: replica {}'s copy hashes {:016x}, replica {}'s {:016x}",
        m.seq, m.sender, m.context, m.tag, m.len, m.sender, m.from, m.hash, m.other, m.other_hash
    );
}

/// Asks a sender replica for the messages from `from` on, below `limit`
/// (0: every one).
fn resume_header(from: u64, limit: u64) -> Header {
    control(FrameKind::ReplicaResume, from, limit)
}

fn ack_header(seq: u64) -> Header {
    control(FrameKind::ReplicaAck, seq, 0)
}

/// A frame of this layer's own: no envelope, no payload, two numbers.
fn control(kind: FrameKind, sreq: u64, rreq: u64) -> Header {
    Header {
        kind,
        context: 0,
        src: 0,
        tag: 0,
        len: 0,
        sreq,
        rreq,
    }
}

/// # Safety
/// `ptr` must be valid for reads of `len` bytes while the slice lives.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// The transport's view of this layer during a progress pass: processes
/// become ranks, duplicates are dropped, replication frames are handled
/// here.
struct Upward<'a> {
    rep: &'a mut Replicas,
    inner: &'a mut dyn FrameSink,
}

impl FrameSink for Upward<'_> {
    fn on_header(&mut self, p: u32, h: &Header) -> std::result::Result<PayloadDest, String> {
        if p >= self.rep.place.ranks * self.rep.place.replicas {
            return Err(format!("frame from unknown process {p}"));
        }
        match h.kind {
            FrameKind::Eager | FrameKind::ReplicaHashes => Ok(PayloadDest::Buffer),
            k if h.carries_payload() => Err(format!("{k:?} frame between replicated ranks")),
            _ => Ok(PayloadDest::Buffer),
        }
    }

    fn on_frame(
        &mut self,
        p: u32,
        h: &Header,
        payload: Payload,
    ) -> std::result::Result<(), String> {
        let rep = &mut *self.rep;
        let place = rep.place;
        let (s, j) = (p % place.ranks, p / place.ranks);
        if rep.dead[p as usize] {
            // Declared failed here: what it still says is ignored.
            return Ok(());
        }
        match h.kind {
            FrameKind::Eager => {
                if s == place.rank() {
                    return Err("eager frame from a replica of this rank".into());
                }
                let data = match payload {
                    Payload::Buffer(d) => d,
                    Payload::Empty => Vec::new(),
                    Payload::Direct { .. } => return Err("eager payload not buffered".into()),
                };
                let i = &mut rep.inb[s as usize];
                if h.rreq != i.expected || i.lost {
                    let mut up = *h;
                    up.rreq = 0;
                    let voting = rep.verify.as_ref().is_some_and(|v| v.votes());
                    if !(voting && h.rreq < i.expected && rep.take_fetched(s, j, h.rreq, &up, data))
                    {
                        rep.counters.duplicates_dropped += 1;
                    }
                    return Ok(());
                }
                i.expected += 1;
                if rep.pull {
                    let next = i.expected;
                    let source = place.process_of(s, i.source);
                    rep.control.push((source, resume_header(next, next + 1)));
                }
                let mut up = *h;
                up.rreq = 0;
                let seq = h.rreq;
                let mut verdict = verify::Verdict::Take;
                if let Some(v) = rep.verify.as_mut() {
                    let hash = verify::message_hash(&up, &data);
                    if v.votes() {
                        let dead = &rep.dead;
                        let live = |r: u32| !dead[place.process_of(s, r) as usize];
                        let found;
                        (verdict, found) = v.vote_taken(s, seq, j, &up, hash, &live);
                        for m in &found {
                            report_mismatch(place.rank(), m);
                        }
                    } else if let Some(m) = v.on_taken(s, seq, j, &up, hash) {
                        report_mismatch(place.rank(), &m);
                    }
                }
                let ready = matches!(verdict, verify::Verdict::Take | verify::Verdict::NoMajority);
                let i = &mut rep.inb[s as usize];
                if !ready || !i.held.is_empty() {
                    let state = if ready {
                        HeldState::Ready
                    } else {
                        HeldState::Voting
                    };
                    i.held.push_back(Held {
                        header: up,
                        data,
                        seq,
                        state,
                    });
                    if !ready {
                        rep.apply_verdict(s, seq, verdict);
                    }
                    return Ok(());
                }
                match pass_up(self.inner, s, &up, data)? {
                    None => rep.taken(s, h.len),
                    Some(data) => rep.inb[s as usize].held.push_back(Held {
                        header: up,
                        data,
                        seq,
                        state: HeldState::Ready,
                    }),
                }
                Ok(())
            }
            FrameKind::ReplicaAck if s == place.rank() => {
                let a = &mut rep.decisions_acked[j as usize];
                *a = (*a).max(h.sreq);
                Ok(())
            }
            FrameKind::ReplicaHandover if s == place.rank() => {
                let from = u32::try_from(h.sreq.saturating_add(1)).unwrap_or(u32::MAX);
                let c = &mut rep.handed_over[j as usize];
                *c = (*c).max(from);
                Ok(())
            }
            FrameKind::ReplicaAck => {
                // A receiver replica may have taken more from a faster
                // replica of this rank than this one has sent yet.
                let o = &mut rep.out[s as usize];
                let a = &mut o.acked[j as usize];
                *a = (*a).max(h.sreq);
                rep.trim(s);
                Ok(())
            }
            FrameKind::ReplicaFetch => {
                rep.fetches.push((s, j, h.sreq));
                Ok(())
            }
            FrameKind::ReplicaDone => {
                rep.left_finished[place.process_of(s, j) as usize] = true;
                Ok(())
            }
            FrameKind::ReplicaResume => {
                // Possibly from a message this replica has not sent yet.
                rep.resumes.push((s, j, h.sreq, h.rreq));
                Ok(())
            }
            FrameKind::ReplicaHashes => {
                let Payload::Buffer(pairs) = payload else {
                    return Err("replica hashes not buffered".into());
                };
                if pairs.len() % verify::PAIR != 0 {
                    return Err(format!("replica hashes of {} bytes", pairs.len()));
                }
                let taken_below = rep.inb[s as usize].expected;
                let Some(v) = rep.verify.as_mut() else {
                    return Ok(());
                };
                if !v.votes() {
                    for m in v.on_hashes(s, j, &pairs, taken_below) {
                        report_mismatch(place.rank(), &m);
                    }
                    return Ok(());
                }
                let dead = &rep.dead;
                let live = |r: u32| !dead[place.process_of(s, r) as usize];
                for (seq, verdict, found) in v.vote_hashes(s, j, &pairs, taken_below, &live) {
                    for m in &found {
                        report_mismatch(place.rank(), m);
                    }
                    rep.apply_verdict(s, seq, verdict);
                }
                Ok(())
            }
            FrameKind::ReplicaDecision | FrameKind::ReplicaChoice if s == place.rank() => {
                let heard = &mut rep.decisions_heard[j as usize];
                *heard += 1;
                if heard.is_multiple_of(DECISION_ACK_EVERY) {
                    rep.control.push((p, ack_header(*heard)));
                }
                self.inner.on_frame(s, h, Payload::Empty)
            }
            FrameKind::ReplicaBehind if s == place.rank() => {
                eprintln!(
                    "tandem: rank {s} replica {} fell {} or more decisions behind its leader \
                     replica {j} and did not catch up within replica_timeout_ms; \
                     stopping this replica",
                    place.replica(),
                    h.sreq
                );
                // SAFETY: `_exit` ends the process; nothing runs after it.
                unsafe { libc::_exit(75) }
            }
            FrameKind::ReplicaBehind => {
                eprintln!(
                    "tandem: rank {} replica {} fell behind what rank {s} still keeps \
                     (it needs message {} of it, the oldest kept is {}); stopping this replica",
                    place.rank(),
                    place.replica(),
                    rep.inb[s as usize].expected,
                    h.sreq
                );
                // The job goes on on the other replicas; this one leaves at
                // once, without unwinding through the caller.
                // SAFETY: `_exit` ends the process; nothing runs after it.
                unsafe { libc::_exit(75) }
            }
            k => Err(format!("{k:?} frame between replicated ranks")),
        }
    }

    fn on_send_done(&mut self, t: u64) {
        if t & HASH_TOKEN_BIT != 0 {
            self.rep.hash_frames.remove(&t);
            return;
        }
        let (d, j, seq) = untoken(t);
        let Some(o) = self.rep.out.get_mut(d as usize) else {
            return;
        };
        if seq >= o.base {
            if let Some(e) = o.log.get_mut((seq - o.base) as usize) {
                e.in_flight &= !(1 << j);
            }
        }
        self.rep.trim(d);
    }

    fn on_peer_lost(&mut self, p: u32, reason: &str) {
        if (p as usize) < self.rep.dead.len() {
            self.rep.process_lost(p, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transports, as a list of what was sent.
    #[derive(Default)]
    struct Wire {
        sent: Vec<(u32, Header)>,
    }

    impl Links for Wire {
        fn send(
            &mut self,
            process: u32,
            header: &Header,
            _payload: *const u8,
            _len: usize,
            _token: Option<u64>,
        ) -> Result<SendState> {
            self.sent.push((process, *header));
            Ok(SendState::Done)
        }

        fn progress(&mut self, _sink: &mut dyn FrameSink) -> bool {
            false
        }
    }

    /// The layer above, as a list of what it was told.
    #[derive(Default)]
    struct Above {
        frames: Vec<Header>,
    }

    impl FrameSink for Above {
        fn on_header(&mut self, _: u32, _: &Header) -> std::result::Result<PayloadDest, String> {
            Ok(PayloadDest::Buffer)
        }
        fn on_frame(&mut self, _: u32, h: &Header, _: Payload) -> std::result::Result<(), String> {
            self.frames.push(*h);
            Ok(())
        }
        fn on_send_done(&mut self, _: u64) {}
        fn on_peer_lost(&mut self, _: u32, _: &str) {}
    }

    /// Replica `replica` of a one-rank job with `replicas` replicas.
    fn replica(replica: u32, replicas: u32, patience_ms: u64) -> Replicas {
        let place = Placement {
            ranks: 1,
            replicas,
            process: replica,
        };
        let patience = std::time::Duration::from_millis(patience_ms);
        Replicas::new(place, 1 << 20, patience, false, false)
    }

    fn from(rep: &mut Replicas, p: u32, h: Header) {
        let mut above = Above::default();
        rep.upward(&mut above)
            .on_frame(p, &h, Payload::Empty)
            .expect("frame accepted");
    }

    fn lose(rep: &mut Replicas, p: u32) {
        let mut above = Above::default();
        rep.upward(&mut above).on_peer_lost(p, "killed");
    }

    /// What the layer above hears after a progress pass: the flags of the
    /// `ReplicaLead` frames.
    fn leads_told(rep: &mut Replicas, wire: &mut Wire) -> Vec<u64> {
        let mut above = Above::default();
        rep.after_progress(wire, &mut above);
        above
            .frames
            .iter()
            .filter(|h| h.kind == FrameKind::ReplicaLead)
            .map(|h| h.sreq)
            .collect()
    }

    #[test]
    fn a_new_leader_decides_once_every_live_sibling_handed_over() {
        let mut wire = Wire::default();
        let mut rep = replica(1, 3, 1000);
        lose(&mut rep, 0);
        // It passes on what it heard, and does not lead yet.
        assert_eq!(leads_told(&mut rep, &mut wire), vec![2]);
        assert!(!rep.leads());
        assert_eq!(leads_told(&mut rep, &mut wire), Vec::<u64>::new());
        from(&mut rep, 2, control(FrameKind::ReplicaHandover, 0, 0));
        assert_eq!(leads_told(&mut rep, &mut wire), vec![1]);
        assert!(rep.leads());
    }

    #[test]
    fn a_handover_heard_before_the_loss_counts() {
        let mut wire = Wire::default();
        let mut rep = replica(1, 3, 1000);
        from(&mut rep, 2, control(FrameKind::ReplicaHandover, 0, 0));
        lose(&mut rep, 0);
        assert_eq!(leads_told(&mut rep, &mut wire), vec![3]);
        assert!(rep.leads());
    }

    #[test]
    fn a_sibling_lost_before_it_handed_over_is_not_waited_for() {
        let mut wire = Wire::default();
        let mut rep = replica(1, 3, 1000);
        lose(&mut rep, 0);
        assert_eq!(leads_told(&mut rep, &mut wire), vec![2]);
        lose(&mut rep, 2);
        assert_eq!(leads_told(&mut rep, &mut wire), vec![1]);
    }

    #[test]
    fn an_older_handover_does_not_count_for_a_later_leader() {
        let mut wire = Wire::default();
        // Four replicas: 0 is lost, 1 leads, then 1 is lost and 2 leads;
        // 3's handover from the loss of 0 is not one from the loss of 1.
        let mut rep = replica(2, 4, 1000);
        from(&mut rep, 3, control(FrameKind::ReplicaHandover, 0, 0));
        lose(&mut rep, 0);
        assert_eq!(leads_told(&mut rep, &mut wire), vec![2]);
        lose(&mut rep, 1);
        assert_eq!(leads_told(&mut rep, &mut wire), vec![2]);
        assert!(!rep.leads());
        from(&mut rep, 3, control(FrameKind::ReplicaHandover, 1, 0));
        assert_eq!(leads_told(&mut rep, &mut wire), vec![1]);
    }

    #[test]
    fn a_follower_acknowledges_what_it_heard_from_its_leader() {
        let mut wire = Wire::default();
        let mut rep = replica(1, 2, 1000);
        for n in 0..DECISION_ACK_EVERY {
            from(&mut rep, 0, control(FrameKind::ReplicaChoice, n, 1));
        }
        leads_told(&mut rep, &mut wire);
        let acks: Vec<u64> = wire
            .sent
            .iter()
            .filter(|(p, h)| *p == 0 && h.kind == FrameKind::ReplicaAck)
            .map(|(_, h)| h.sreq)
            .collect();
        assert_eq!(acks, vec![DECISION_ACK_EVERY]);
    }

    #[test]
    fn a_leader_waits_for_a_sibling_then_declares_it_behind() {
        let mut wire = Wire::default();
        let mut rep = replica(0, 2, 0);
        let choice = control(FrameKind::ReplicaChoice, 0, 1);
        for _ in 0..DECISIONS_AHEAD - 1 {
            rep.send_to_siblings(&mut wire, &choice);
        }
        assert!(!rep.decisions_ahead());
        rep.send_to_siblings(&mut wire, &choice);
        assert!(rep.decisions_ahead());
        // What the sibling acknowledges makes room.
        from(&mut rep, 1, ack_header(1));
        assert!(!rep.decisions_ahead());
        rep.send_to_siblings(&mut wire, &choice);
        assert!(rep.decisions_ahead());
        // Out of patience (none here): told it fell behind, no longer
        // waited for.
        wire.sent.clear();
        leads_told(&mut rep, &mut wire);
        assert!(wire
            .sent
            .iter()
            .any(|(p, h)| *p == 1 && h.kind == FrameKind::ReplicaBehind));
        assert!(!rep.decisions_ahead());
        assert_eq!(rep.counters.decision_waits, 1);
    }
}

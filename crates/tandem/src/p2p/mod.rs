//! Point-to-point protocol: MPI matching (per context, source and tag, with
//! wildcards and non-overtaking order), eager and rendezvous protocols, and
//! requests.
//!
//! * Eager (`len <= eager_limit`): one frame carries the message. If a
//!   receive is posted, the transport reads the payload straight into it;
//!   otherwise it is buffered as unexpected. Each sender may have a share
//!   of the receiver's `unexpected_limit` bytes unconsumed there; beyond
//!   it, messages go by rendezvous (credit.rs), so no correct program waits
//!   on a message stuck behind others.
//! * Rendezvous: RTS carries the envelope; the receiver matches it, answers
//!   CTS with its request id and the bytes it can take, and the sender
//!   writes the data from its buffer; the transport reads it straight into
//!   the receive buffer. An unexpected RTS is held as its header only.
//! * Clear to write (direct.rs): a receive matched while its application
//!   thread computes (by the progress helper, the signal handler, or when a
//!   non-blocking receive is posted) can answer the RTS of a sender on this
//!   host with CTW and its buffer address instead; the sender then writes
//!   the data straight into the buffer and says WROTE, so the receiving
//!   side never copies.
//! * Advertised receives (advert.rs): such a receive that names a sender
//!   on this host is advertised to it in shared memory before any RTS;
//!   a sender whose message meets it writes the message in and says
//!   CLAIMED, with no rendezvous at all.
//! * Synchronous sends always use rendezvous, so completion implies a match.
//! * Messages to self never touch a transport.

mod advert;
mod copy_help;
mod credit;
pub use copy_help::{chunk_of as copy_help_chunk, copy_help_share};
mod direct;
mod handler;
mod path;
mod peers;
pub mod request;
mod wildcard;
pub use wildcard::{ChoiceRole, HISTORY as DECISION_HISTORY};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorClass, Result};
use crate::progress::Engine;
use crate::rma::target::{self as remote, Remote};
use crate::stats::Counters;
use crate::transport::shm::ReadRemoteError;
use crate::transport::{
    copy_bytes, whole_frame_in_steps, FrameSink, Payload, PayloadDest, SendState,
};
use crate::wire::{FrameKind, Header};
use path::{Path, PathChooser};
// One-sided names RWAPI reaches through point-to-point (rwapi.rs,
// rwheap.rs); their home is rma.
pub use crate::rma::{OpId, OpState, CALLER_KEY_BIT};
use request::Requests;
pub use request::{ReqId, Request, Stage, Status};

/// What a message carries besides its data: where it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Matching context (communicator).
    pub ctx: u32,
    /// The sender's rank in that communicator.
    pub src: u32,
    pub tag: i32,
}

/// How a send completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// Standard (and ready) mode: eager when small.
    Standard,
    /// Synchronous: completes only once a receive has matched.
    Synchronous,
}

/// Names a message that a matched probe (`MPI_Mprobe`) took out of
/// matching: only a receive given this id ([`P2p::imrecv`]) gets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MsgId(pub u64);

enum Body {
    Eager(Vec<u8>),
    /// A rendezvous announcement; `addr` is the sender's buffer when the
    /// receiver may read it directly (single copy).
    Rts {
        sreq: u64,
        addr: Option<u64>,
    },
    /// A synchronous send to self, waiting for its receive.
    SelfHeld {
        sreq: ReqId,
    },
}

struct Unexpected {
    src: u32,
    peer: u32,
    tag: i32,
    len: u64,
    body: Body,
}

/// The request of a send of `len` bytes at `buf` to world rank `dest`,
/// not started yet.
fn send_request(env: Envelope, dest: u32, buf: *const u8, len: usize) -> Request {
    Request {
        is_send: true,
        stage: Stage::SendQueued,
        context: env.ctx,
        peer: Some(dest),
        src_filter: None,
        tag: Some(env.tag),
        buf: buf as *mut u8,
        len,
        msg_len: len as u64,
        status: Status {
            source: Some(env.src),
            tag: Some(env.tag),
            ..Status::default()
        },
        detached: false,
    }
}

/// Context ids are small integers (two per communicator); a frame naming
/// one beyond this is malformed.
const MAX_CONTEXTS: u32 = 1 << 22;

/// Matching state per context, indexed by context id (a hash map costs more
/// than the rest of matching a message).
#[derive(Default)]
struct ContextTable {
    slots: Vec<Option<Context>>,
}

impl ContextTable {
    fn get(&self, ctx: &u32) -> Option<&Context> {
        self.slots.get(*ctx as usize).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, ctx: &u32) -> Option<&mut Context> {
        self.slots.get_mut(*ctx as usize).and_then(Option::as_mut)
    }

    fn slot(&mut self, ctx: u32) -> &mut Context {
        let i = ctx as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i].get_or_insert_with(Context::default)
    }

    fn remove(&mut self, ctx: &u32) {
        if let Some(slot) = self.slots.get_mut(*ctx as usize) {
            *slot = None;
        }
    }

    fn iter(&self) -> impl Iterator<Item = (u32, &Context)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i as u32, c)))
    }
}

#[derive(Default)]
struct Context {
    /// World ranks of the communicator's members, once it is registered here.
    group: Option<Arc<[u32]>>,
    posted: VecDeque<ReqId>,
    unexpected: VecDeque<Unexpected>,
}

/// A frame the matcher wants sent; sent by [`P2p`] once the transport is free.
pub(crate) struct Outgoing {
    pub(crate) peer: u32,
    pub(crate) header: Header,
    pub(crate) payload: *const u8,
    pub(crate) len: usize,
    pub(crate) token: Option<u64>,
}

impl Outgoing {
    /// A frame with no payload and no completion to report.
    pub(crate) fn control(peer: u32, header: Header) -> Outgoing {
        Outgoing {
            peer,
            header,
            payload: std::ptr::null(),
            len: 0,
            token: None,
        }
    }
}

/// A single-copy read the matcher wants made once the transport is free.
#[derive(Clone, Copy)]
struct Pull {
    rid: ReqId,
    peer: u32,
    addr: u64,
    sreq: u64,
    /// Chosen by [`PathChooser`], which is told how long the read took.
    timed: bool,
}

fn matches(src_filter: Option<u32>, tag_filter: Option<i32>, src: u32, tag: i32) -> bool {
    src_filter.is_none_or(|s| s == src) && tag_filter.is_none_or(|t| t == tag)
}

/// Matching state: the transports' [`FrameSink`].
pub struct Matcher {
    reqs: Requests,
    contexts: ContextTable,
    /// Per peer: the receive its connection is filling right now.
    filling: Vec<Option<ReqId>>,
    unexpected_bytes: usize,
    unexpected_limit: usize,
    /// Eager flow control (none between replicas, which always send eagerly).
    credits: Option<credit::Credits>,
    pub(crate) outbox: Vec<Outgoing>,
    pulls: Vec<Pull>,
    pub(crate) lost: Vec<Option<String>>,
    counters: Counters,
    pub(crate) remote: Remote,
    /// Clear-to-write messages this rank (their sender) must write.
    pushes: Vec<direct::Push>,
    /// Per peer: whether it may be asked to write into this rank's memory.
    direct_from: Vec<bool>,
    /// Receives are being matched while the application thread computes
    /// (or is about to): ask senders that can to write (see direct.rs).
    async_match: bool,
    /// By request slot: a receive posted while `async_match` was set (a
    /// non-blocking one), which asks its sender to write wherever it matches.
    overlapped: Vec<bool>,
    /// Posted receives not matched yet, in every context.
    posted_count: usize,
    /// Messages a matched probe took out of matching, waiting for the
    /// receive that names them (`MPI_Mrecv`), by id.
    matched: std::collections::HashMap<u64, (u32, Unexpected)>,
    /// The id of the next matched message (never reused, never 0).
    next_matched: u64,
    /// Receives to advertise to their senders, by sender (advert.rs).
    advert_wanted: Vec<(u32, ReqId)>,
    /// Senders on this host offer every rendezvous message for reading;
    /// from this size it is always read, below it `paths` decides.
    single_copy_min: u64,
    paths: PathChooser,
    /// Single-copy reads from this size invite the sender to help (0 =
    /// never; see copy_help.rs).
    copy_help_min: u64,
    /// Invitations to help copy this rank (their sender) acts on once it
    /// waits.
    helps: Vec<copy_help::Invitation>,
    /// The application thread waits in the library ([`P2p::wait_for`]).
    waiting: bool,
    /// Reads helped by their sender that wait for its last chunks.
    help_waits: Vec<copy_help::HelpWait>,
    /// Replicated jobs: wildcard receives decided by the leader replica.
    wild: Option<wildcard::Wildcards>,
}

impl Matcher {
    fn context(&mut self, ctx: u32) -> &mut Context {
        self.contexts.slot(ctx)
    }

    /// Queues a message nobody was waiting for, and counts it.
    fn push_unexpected(&mut self, ctx: u32, u: Unexpected) {
        let q = &mut self.contexts.slot(ctx).unexpected;
        q.push_back(u);
        let len = q.len() as u64;
        self.counters.unexpected_msgs += 1;
        self.counters.max_unexpected_queue = self.counters.max_unexpected_queue.max(len);
    }

    /// A sender cancels its rendezvous send `h.sreq`: its RTS goes if no
    /// receive took it; the answer says which.
    fn on_revoke(&mut self, peer: u32, h: &Header) {
        // (A context this rank does not know holds nothing to drop.)
        let dropped = self.contexts.get_mut(&h.context).is_some_and(|c| {
            let at = c.unexpected.iter().position(|u| {
                u.peer == peer && matches!(u.body, Body::Rts { sreq, .. } if sreq == h.sreq)
            });
            at.and_then(|i| c.unexpected.remove(i)).is_some()
        });
        self.outbox.push(Outgoing {
            peer,
            header: Header {
                kind: FrameKind::Revoked,
                context: h.context,
                src: 0,
                tag: i32::from(dropped),
                len: 0,
                sreq: h.sreq,
                rreq: 0,
            },
            payload: std::ptr::null(),
            len: 0,
            token: None,
        });
    }

    /// The receiver's answer to a cancelled send: cancelled if it dropped
    /// the RTS; else the send goes on (its CTS, or the receiver's read,
    /// came or comes) and this answer is nothing.
    fn on_revoked(&mut self, peer: u32, h: &Header) {
        if h.tag != 1 {
            return;
        }
        let id = ReqId(h.sreq);
        match self.reqs.get_mut(id) {
            Some(r) if r.is_send && r.stage == Stage::SendAwaitCts && r.peer == Some(peer) => {
                r.status.cancelled = true;
            }
            _ => return,
        }
        self.complete(id, 0, None);
    }

    fn complete(&mut self, id: ReqId, count: usize, error: Option<Error>) {
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        r.stage = Stage::Complete;
        r.status.count = count;
        if r.status.error.is_none() {
            r.status.error = error;
        }
        if self.wild.is_some() {
            self.wildcard_completed(id);
        }
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        if r.detached {
            self.reqs.remove(id);
        }
    }

    #[inline]
    fn truncation(msg_len: u64, cap: usize) -> Option<Error> {
        (msg_len > cap as u64).then(|| Self::truncation_error(msg_len, cap))
    }

    #[cold]
    fn truncation_error(msg_len: u64, cap: usize) -> Error {
        Error::new(
            ErrorClass::Truncate,
            format!("message of {msg_len} bytes truncated to the receive buffer's {cap} bytes"),
        )
    }

    /// Takes the first posted receive in `ctx` that matches.
    fn take_posted(&mut self, ctx: u32, src: u32, tag: i32) -> Option<ReqId> {
        if self.wild.as_ref().is_some_and(|w| w.holds(ctx)) {
            return None;
        }
        let c = self.contexts.get_mut(&ctx)?;
        let reqs = &self.reqs;
        let fits = |id: &ReqId| {
            reqs.get(*id)
                .is_some_and(|r| matches(r.src_filter, r.tag, src, tag))
        };
        // Most often the oldest posted receive is the one.
        let id = if fits(c.posted.front()?) {
            c.posted.pop_front()
        } else {
            let pos = c.posted.iter().position(fits)?;
            c.posted.remove(pos)
        };
        self.posted_count -= 1;
        id
    }

    fn check_source(&self, ctx: u32, src: u32, peer: u32) -> std::result::Result<(), String> {
        if ctx >= MAX_CONTEXTS {
            return Err(format!(
                "frame names context {ctx}, beyond any communicator"
            ));
        }
        if let Some(group) = self.contexts.get(&ctx).and_then(|c| c.group.as_ref()) {
            if group.get(src as usize) != Some(&peer) {
                return Err(format!(
                    "frame in context {ctx} claims source rank {src} but came from world rank {peer}"
                ));
            }
        }
        Ok(())
    }

    /// The common case of an eager message arriving whole: the oldest
    /// receive posted in its context matches it, and is filled from `data`
    /// and completed, with one look at the context and one at the request.
    /// `false`: not that case, or a frame that fails
    /// [`Matcher::check_source`] (nothing was done; the general path sorts
    /// it out).
    /// Spends credit for an eager message of `len` bytes to `dest` (none
    /// needed between replicas): whether it may go eagerly.
    #[inline]
    fn take_credit(&mut self, dest: u32, len: usize) -> bool {
        match self.credits.as_mut() {
            None => true,
            Some(c) => c.take(dest, len),
        }
    }

    /// A receive consumed `len` bytes of an eager message from `peer`:
    /// credit goes back when due (credit.rs).
    #[inline]
    fn eager_consumed(&mut self, peer: u32, len: usize) {
        if let Some(header) = self.credits.as_mut().and_then(|c| c.consumed(peer, len)) {
            self.outbox.push(Outgoing::control(peer, header));
        }
    }

    fn deliver_to_oldest(&mut self, peer: u32, h: &Header, data: &[u8]) -> bool {
        if h.context >= MAX_CONTEXTS {
            return false;
        }
        let Matcher {
            contexts,
            reqs,
            posted_count,
            ..
        } = self;
        let Some(c) = contexts.get_mut(&h.context) else {
            return false;
        };
        if let Some(group) = &c.group {
            if group.get(h.src as usize) != Some(&peer) {
                return false;
            }
        }
        let Some(&id) = c.posted.front() else {
            return false;
        };
        let Some(r) = reqs.get_mut(id) else {
            return false;
        };
        if !matches(r.src_filter, r.tag, h.src, h.tag) {
            return false;
        }
        c.posted.pop_front();
        *posted_count -= 1;
        let n = data.len().min(r.len);
        // SAFETY: the receive buffer is valid for `r.len` bytes of writes
        // (the promise made when posting it) and `n <= r.len`.
        unsafe { copy_bytes(data.as_ptr(), r.buf, n) };
        r.peer = Some(peer);
        r.msg_len = h.len;
        r.status.source = Some(h.src);
        r.status.tag = Some(h.tag);
        r.status.count = n;
        r.stage = Stage::Complete;
        if r.status.error.is_none() {
            r.status.error = Self::truncation(h.len, r.len);
        }
        if r.detached {
            reqs.remove(id);
        }
        true
    }

    /// Fills a matched receive from a buffered message and completes it.
    fn deliver_buffered(&mut self, id: ReqId, src: u32, tag: i32, data: &[u8]) {
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        let n = data.len().min(r.len);
        if n > 0 {
            // SAFETY: the receive buffer is valid for `r.len` bytes of writes
            // (the caller's promise when posting it) and `n <= r.len`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), r.buf, n) };
        }
        r.status.source = Some(src);
        r.status.tag = Some(tag);
        r.msg_len = data.len() as u64;
        let err = Self::truncation(data.len() as u64, r.len);
        self.complete(id, n, err);
    }

    /// A matched receive answers an RTS from `peer` with CTS.
    /// When the receiver may read the sender's buffer at `addr` itself, the
    /// read is scheduled instead.
    #[allow(clippy::too_many_arguments)]
    fn accept_rts(
        &mut self,
        id: ReqId,
        peer: u32,
        src: u32,
        tag: i32,
        len: u64,
        sreq: u64,
        addr: Option<u64>,
    ) {
        if let Some(why) = &self.lost[peer as usize] {
            let e = Error::new(ErrorClass::ProcAborted, why.clone());
            self.complete(id, 0, Some(e));
            return;
        }
        let write = self.wants_write(id, peer);
        let Some(r) = self.reqs.get_mut(id) else {
            return;
        };
        r.stage = Stage::RecvAwaitData { peer };
        r.peer = Some(peer);
        r.msg_len = len;
        r.status.source = Some(src);
        r.status.tag = Some(tag);
        if write {
            let header = self.clear_to_write(id, sreq);
            self.outbox.push(Outgoing::control(peer, header));
            return;
        }
        if let Some(addr) = addr {
            let forced = len >= self.single_copy_min;
            if forced || self.paths.choose(peer, len) == Path::Pull {
                self.pulls.push(Pull {
                    rid: id,
                    peer,
                    addr,
                    sreq,
                    timed: !forced,
                });
                return;
            }
            self.paths.time_rings(peer, id);
        }
        let take = len.min(r.len as u64);
        let header = Header {
            kind: FrameKind::Cts,
            context: r.context,
            src: 0,
            tag: 0,
            len: take,
            sreq,
            rreq: id.0,
        };
        self.outbox.push(Outgoing::control(peer, header));
    }

    /// A receive matched a synchronous send to self: copy and complete both.
    fn deliver_self_held(&mut self, rid: ReqId, sreq: ReqId) {
        let Some(s) = self.reqs.get(sreq) else {
            return;
        };
        let (sbuf, slen, src, tag) = (
            s.buf as *const u8,
            s.len,
            s.status.source.unwrap_or(0),
            s.tag.unwrap_or(0),
        );
        // SAFETY: the send buffer is valid for `slen` bytes until the send
        // completes, which happens only below.
        let data = unsafe { slice_or_empty(sbuf, slen) };
        self.deliver_buffered(rid, src, tag, data);
        self.complete(sreq, slen, None);
    }
}

/// A slice from a raw buffer; empty for a zero length (the pointer may then be null).
///
/// # Safety
/// For `len > 0`, `ptr` must be valid for reads of `len` bytes for `'a`.
unsafe fn slice_or_empty<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl FrameSink for Matcher {
    /// An eager message in one piece (a small one over shared memory):
    /// matched, copied into the posted receive and completed in one step.
    fn on_whole_frame(
        &mut self,
        peer: u32,
        h: &Header,
        data: &[u8],
    ) -> std::result::Result<bool, String> {
        if h.kind != FrameKind::Eager {
            return whole_frame_in_steps(self, peer, h, data);
        }
        if self.deliver_to_oldest(peer, h, data) {
            self.eager_consumed(peer, data.len());
            return Ok(true);
        }
        self.check_source(h.context, h.src, peer)?;
        if let Some(id) = self.take_posted(h.context, h.src, h.tag) {
            self.eager_consumed(peer, data.len());
            let r = self.reqs.get_mut(id).expect("posted receive is live");
            let n = data.len().min(r.len);
            // SAFETY: the receive buffer is valid for `r.len` bytes of writes
            // (the promise made when posting it) and `n <= r.len`.
            unsafe { copy_bytes(data.as_ptr(), r.buf, n) };
            r.peer = Some(peer);
            r.msg_len = h.len;
            r.status.source = Some(h.src);
            r.status.tag = Some(h.tag);
            let err = Self::truncation(h.len, r.len);
            self.complete(id, n, err);
            return Ok(true);
        }
        if self.unexpected_bytes > 0 && self.unexpected_bytes + data.len() > self.unexpected_limit {
            return Ok(false);
        }
        self.unexpected_bytes += data.len();
        self.push_unexpected(
            h.context,
            Unexpected {
                src: h.src,
                peer,
                tag: h.tag,
                len: h.len,
                body: Body::Eager(data.to_vec()),
            },
        );
        Ok(true)
    }

    fn on_header(&mut self, peer: u32, h: &Header) -> std::result::Result<PayloadDest, String> {
        match h.kind {
            FrameKind::Eager => {
                self.check_source(h.context, h.src, peer)?;
                if let Some(id) = self.take_posted(h.context, h.src, h.tag) {
                    self.eager_consumed(peer, h.len as usize);
                    let r = self.reqs.get_mut(id).expect("posted receive is live");
                    r.stage = Stage::RecvFilling { peer };
                    r.peer = Some(peer);
                    r.msg_len = h.len;
                    r.status.source = Some(h.src);
                    r.status.tag = Some(h.tag);
                    self.filling[peer as usize] = Some(id);
                    return Ok(PayloadDest::Direct {
                        ptr: r.buf,
                        cap: r.len,
                    });
                }
                if self.unexpected_bytes > 0
                    && self.unexpected_bytes + h.len as usize > self.unexpected_limit
                {
                    return Ok(PayloadDest::Pause);
                }
                self.unexpected_bytes += h.len as usize;
                Ok(PayloadDest::Buffer)
            }
            FrameKind::Data => {
                let id = ReqId(h.rreq);
                let r = self
                    .reqs
                    .get(id)
                    .ok_or_else(|| format!("data for unknown receive request {:#x}", h.rreq))?;
                if r.is_send || r.stage != (Stage::RecvAwaitData { peer }) {
                    return Err(format!(
                        "data for receive request {:#x}, which is not waiting for it",
                        h.rreq
                    ));
                }
                if h.len != r.msg_len.min(r.len as u64) {
                    return Err(format!(
                        "data frame of {} bytes where {} were granted",
                        h.len,
                        r.msg_len.min(r.len as u64)
                    ));
                }
                self.filling[peer as usize] = Some(id);
                Ok(PayloadDest::Direct {
                    ptr: r.buf,
                    cap: r.len,
                })
            }
            FrameKind::Put | FrameKind::GetReply | FrameKind::Acc => self.remote.on_header(peer, h),
            _ => Err(format!("{:?} frame with a payload", h.kind)),
        }
    }

    fn on_frame(
        &mut self,
        peer: u32,
        h: &Header,
        payload: Payload,
    ) -> std::result::Result<(), String> {
        match (h.kind, payload) {
            (
                FrameKind::Put
                | FrameKind::GetReply
                | FrameKind::Get
                | FrameKind::Ack
                | FrameKind::Lock
                | FrameKind::Unlock
                | FrameKind::Small
                | FrameKind::Sync,
                Payload::Direct { .. } | Payload::Empty,
            ) => return self.remote.on_frame(peer, h, None, &mut self.outbox),
            (FrameKind::Acc | FrameKind::Put, Payload::Buffer(data)) => {
                return self.remote.on_frame(peer, h, Some(data), &mut self.outbox)
            }
            (FrameKind::Eager, Payload::Buffer(data)) => {
                // A receive posted while this payload was arriving matches it now.
                if let Some(id) = self.take_posted(h.context, h.src, h.tag) {
                    self.unexpected_bytes -= data.len();
                    self.eager_consumed(peer, data.len());
                    self.deliver_buffered(id, h.src, h.tag, &data);
                    return Ok(());
                }
                self.push_unexpected(
                    h.context,
                    Unexpected {
                        src: h.src,
                        peer,
                        tag: h.tag,
                        len: h.len,
                        body: Body::Eager(data),
                    },
                );
            }
            (FrameKind::Eager | FrameKind::Data, Payload::Direct { written }) => {
                let id = self.filling[peer as usize]
                    .take()
                    .ok_or("payload without a receive")?;
                let (msg_len, cap) = {
                    let r = self.reqs.get(id).ok_or("receive vanished")?;
                    (r.msg_len, r.len)
                };
                if h.kind == FrameKind::Data {
                    self.paths.data_done(peer, id, written as u64);
                }
                self.complete(id, written, Self::truncation(msg_len, cap));
            }
            (FrameKind::Rts | FrameKind::Rget, Payload::Empty) => {
                self.check_source(h.context, h.src, peer)?;
                let addr = (h.kind == FrameKind::Rget).then_some(h.rreq);
                if let Some(id) = self.take_posted(h.context, h.src, h.tag) {
                    self.accept_rts(id, peer, h.src, h.tag, h.len, h.sreq, addr);
                } else {
                    self.push_unexpected(
                        h.context,
                        Unexpected {
                            src: h.src,
                            peer,
                            tag: h.tag,
                            len: h.len,
                            body: Body::Rts { sreq: h.sreq, addr },
                        },
                    );
                }
            }
            (FrameKind::Fin, Payload::Empty) => {
                let id = ReqId(h.sreq);
                let r = self
                    .reqs
                    .get(id)
                    .ok_or_else(|| format!("FIN for unknown send request {:#x}", h.sreq))?;
                if !r.is_send || r.stage != Stage::SendAwaitCts || r.peer != Some(peer) {
                    return Err(format!(
                        "FIN for send request {:#x}, which is not waiting for it",
                        h.sreq
                    ));
                }
                let n = r.len;
                self.complete(id, n, None);
            }
            (FrameKind::Cts, Payload::Empty) => {
                let id = ReqId(h.sreq);
                let r = self
                    .reqs
                    .get_mut(id)
                    .ok_or_else(|| format!("CTS for unknown send request {:#x}", h.sreq))?;
                if !r.is_send
                    || r.stage != Stage::SendAwaitCts
                    || r.peer != Some(peer)
                    || h.len > r.len as u64
                {
                    return Err(format!(
                        "CTS for send request {:#x}, which is not waiting for it",
                        h.sreq
                    ));
                }
                r.stage = Stage::SendData;
                let header = Header {
                    kind: FrameKind::Data,
                    context: r.context,
                    src: 0,
                    tag: 0,
                    len: h.len,
                    sreq: id.0,
                    rreq: h.rreq,
                };
                let (payload, len) = (r.buf as *const u8, h.len as usize);
                self.outbox.push(Outgoing {
                    peer,
                    header,
                    payload,
                    len,
                    token: Some(id.0),
                });
            }
            (FrameKind::Ctw, Payload::Empty) => self.on_clear_to_write(peer, h)?,
            (FrameKind::Wrote, Payload::Empty) => self.on_wrote(peer, h)?,
            (FrameKind::Claimed, Payload::Empty) => self.on_claimed(peer, h)?,
            (FrameKind::Revoke, Payload::Empty) => self.on_revoke(peer, h),
            (FrameKind::Revoked, Payload::Empty) => self.on_revoked(peer, h),
            (FrameKind::Help, Payload::Empty) => self.on_help(peer, h)?,
            (FrameKind::Credit, Payload::Empty) => {
                if let Some(c) = self.credits.as_mut() {
                    c.returned(peer, h.sreq);
                }
            }
            (FrameKind::ReplicaDecision, Payload::Empty) => self.on_decision(h)?,
            (FrameKind::ReplicaLead, Payload::Empty) => {
                self.on_sibling_lost(h.sreq & 1 != 0, h.sreq & 2 != 0, h.rreq)
            }
            (FrameKind::ReplicaChoice, Payload::Empty) => self.on_choice(h)?,
            (kind, _) => return Err(format!("unexpected payload shape for a {kind:?} frame")),
        }
        Ok(())
    }

    fn on_send_done(&mut self, token: u64) {
        if token & remote::TOKEN_BIT != 0 {
            self.remote.send_done(token);
            return;
        }
        let id = ReqId(token);
        if let Some(r) = self.reqs.get(id) {
            if matches!(r.stage, Stage::SendQueued | Stage::SendData) {
                let n = r.len;
                self.complete(id, n, None);
            }
        }
    }

    fn on_peer_lost(&mut self, peer: u32, reason: &str) {
        if self.lost[peer as usize].is_some() {
            return;
        }
        self.lost[peer as usize] = Some(reason.to_string());
        self.filling[peer as usize] = None;
        self.remote.peer_lost(peer, reason);
        // Contexts whose wildcard receives can no longer be sure to match.
        let member_of: Vec<u32> = self
            .contexts
            .iter()
            .filter(|(_, c)| c.group.as_ref().is_some_and(|g| g.contains(&peer)))
            .map(|(k, _)| k)
            .collect();
        let doomed = self.reqs.ids_where(|r| {
            r.stage != Stage::Complete
                && (r.peer == Some(peer)
                    || (r.stage == Stage::RecvPosted
                        && r.src_filter.is_none()
                        && member_of.contains(&r.context)))
        });
        for id in doomed {
            if let Some(r) = self.reqs.get(id) {
                if r.stage == Stage::RecvPosted {
                    let ctx = r.context;
                    if let Some(c) = self.contexts.get_mut(&ctx) {
                        let before = c.posted.len();
                        c.posted.retain(|&x| x != id);
                        self.posted_count -= before - c.posted.len();
                    }
                }
            }
            self.complete(
                id,
                0,
                Some(Error::new(ErrorClass::ProcAborted, reason.to_string())),
            );
        }
    }
}

/// Empty polls between two looks at the clock while waiting.
const IDLE_POLLS_PER_CLOCK_READ: u32 = 16;
/// From this size on, a single-copy read waits for its sender to finish
/// helping with the previous one rather than go alone (see
/// `P2p::run_pulls`). Below it, inviting, waiting for the helper's last
/// chunk and its report cost more than the half copy saves: a burst of
/// 64 KiB messages ran at 25 GB/s that way, against 45 alone.
const WAIT_FOR_HELP_MIN: u64 = 256 * 1024;
/// Empty polls between two spin-wait hints (`pause`). The hint lends the
/// core's pipeline to a hardware sibling and reads the peer's cells less
/// often, but on this project's AMD host it lasts 25 ns, as long as a poll:
/// one after every poll left a message that came during it unseen that much
/// longer (8-byte ping-pong 0.1345 us, against 0.1295 with one in four,
/// which is as fast as none; with the ranks on distant cores, where fewer
/// looks help, one in four costs 2.5% against every poll).
const IDLE_POLLS_PER_PAUSE: u32 = 4;
/// Empty polls between two yields of the CPU while spinning (a few
/// microseconds: cheap when the core is ours, and a peer sharing it waits
/// that long instead of a whole spin).
const IDLE_POLLS_PER_YIELD_WHILE_SPINNING: u32 = 8 * IDLE_POLLS_PER_CLOCK_READ;
/// Pure polling before the first such yield: a yield on a busy machine can
/// cost a whole time slice, so answers that come quickly must not pay it.
const SPIN_BEFORE_YIELDING: Duration = Duration::from_micros(50);

/// Settings of the point-to-point layer.
pub struct P2pConfig {
    pub eager_limit: usize,
    /// The eager limit towards ranks on this host (at most `eager_limit`).
    pub shm_eager_limit: usize,
    /// Whether receives matched while the application computes may ask
    /// senders on this host to write into them (`shm_direct_write`).
    pub direct_write: bool,
    pub unexpected_limit: usize,
    pub spin: Duration,
    pub yield_time: Duration,
    /// Rendezvous messages from this size are always read by single copy
    /// when their sender offers it (`shm_single_copy_min`).
    pub single_copy_min: usize,
    /// Single-copy reads from this size invite their sender to help copy
    /// (`shm_copy_help_min`; 0 = never).
    pub copy_help_min: usize,
    /// Ranks run as replicas (replica/): every message travels eagerly,
    /// and a synchronous send completes as a standard one, once logged.
    pub replicated: bool,
}

/// The point-to-point engine of one rank.
pub struct P2p {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) engine: Engine,
    pub(crate) m: Matcher,
    eager_limit: usize,
    shm_eager_limit: usize,
    spin: Duration,
    yield_time: Duration,
    /// Asked by waits that may end early (see [`P2p::wait_for_or_hand_over`]),
    /// with whether progress was made since the last look: whether another
    /// thread should have the library now.
    hand_over: Option<fn(bool) -> bool>,
    /// Told of every pass that did something (see [`P2p::set_progress_hook`]).
    progress_hook: Option<fn()>,
    replicated: bool,
}

impl P2p {
    pub fn new(rank: u32, size: u32, engine: Engine, cfg: P2pConfig) -> P2p {
        let direct_from = (0..size)
            .map(|p| cfg.direct_write && engine.single_copy_with(p))
            .collect();
        P2p {
            rank,
            size,
            engine,
            m: Matcher {
                reqs: Requests::default(),
                contexts: ContextTable::default(),
                filling: vec![None; size as usize],
                unexpected_bytes: 0,
                unexpected_limit: cfg.unexpected_limit,
                credits: (!cfg.replicated && size > 1)
                    .then(|| credit::Credits::new(rank, size, cfg.unexpected_limit)),
                outbox: Vec::new(),
                pulls: Vec::new(),
                counters: Counters::default(),
                lost: vec![None; size as usize],
                remote: Remote::new(rank, size),
                pushes: Vec::new(),
                direct_from,
                async_match: false,
                overlapped: Vec::new(),
                posted_count: 0,
                matched: Default::default(),
                next_matched: 1,
                advert_wanted: Vec::new(),
                single_copy_min: cfg.single_copy_min as u64,
                paths: PathChooser::default(),
                copy_help_min: cfg.copy_help_min as u64,
                helps: Vec::new(),
                waiting: false,
                help_waits: Vec::new(),
                wild: None,
            },
            eager_limit: cfg.eager_limit,
            shm_eager_limit: cfg.shm_eager_limit.min(cfg.eager_limit),
            spin: cfg.spin,
            yield_time: cfg.yield_time,
            hand_over: None,
            progress_hook: None,
            replicated: cfg.replicated,
        }
    }

    /// The highest id of a process that connected before this one heard of
    /// it (see [`crate::transport::tcp::TcpTransport::add_processes`]).
    pub fn parked_process(&self) -> Option<u32> {
        self.engine.parked_process()
    }

    /// Whether a process this one has not heard of has connected.
    pub fn has_parked_process(&self) -> bool {
        self.parked_process().is_some()
    }

    /// Processes `0..total` of the job exist now: `MPI_Comm_spawn` started
    /// some, or a communicator names some this rank had not heard of.
    /// Nothing if they are known already; not for a replicated job.
    pub fn add_processes(&mut self, total: u32) {
        if total <= self.size || self.replicated {
            return;
        }
        let total = total.min(crate::transport::tcp::MAX_PROCESSES);
        let n = total as usize;
        self.engine.add_processes(total);
        let m = &mut self.m;
        m.filling.resize(n, None);
        m.lost.resize(n, None);
        // They are reached over TCP: nothing is written into their memory.
        m.direct_from.resize(n, false);
        m.remote.grow(total);
        match m.credits.as_mut() {
            Some(c) => c.grow(total, m.unexpected_limit),
            None => m.credits = Some(credit::Credits::new(self.rank, total, m.unexpected_limit)),
        }
        self.size = total;
    }

    /// Makes this a replica of a rank, leading it (deciding its wildcard
    /// receives) or following its leader (see wildcard.rs).
    pub fn set_replica_role(&mut self, leader: bool) {
        self.m.wild = Some(wildcard::Wildcards::new(leader));
    }

    /// The smallest single-copy message a waiting sender helps copy (0:
    /// never, as on a host with more ranks than CPUs).
    pub fn copy_help_min(&self) -> u64 {
        self.m.copy_help_min
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// Tells matching which world ranks form the communicator behind `ctx`,
    /// so arriving frames can be checked and wildcard receives failed when a
    /// member dies.
    pub fn register_context(&mut self, ctx: u32, group: Arc<[u32]>) {
        // A communicator may name processes started since this one began.
        if let Some(&last) = group.iter().max() {
            if last >= self.size {
                self.add_processes(last + 1);
            }
        }
        self.m.context(ctx).group = Some(group);
    }

    /// Forgets a context (the communicator was freed).
    pub fn release_context(&mut self, ctx: u32) {
        if let Some(c) = self.m.contexts.get(&ctx) {
            if c.posted.is_empty() && c.unexpected.is_empty() {
                self.m.contexts.remove(&ctx);
            }
        }
    }

    /// A request that is already complete (e.g. for `MPI_PROC_NULL`).
    pub fn completed(&mut self, is_send: bool, status: Status) -> ReqId {
        self.m.reqs.insert(Request {
            is_send,
            stage: Stage::Complete,
            context: 0,
            peer: None,
            src_filter: None,
            tag: None,
            buf: std::ptr::null_mut(),
            len: 0,
            msg_len: 0,
            status,
            detached: false,
        })
    }

    /// Whether a standard-mode message of `len` bytes to `dest` goes
    /// eagerly: up to `shm_eager_limit` to a rank on this host (above it
    /// the receiver may read it in place, faster from 16-32 KiB on, see
    /// path.rs), up to `eager_limit` to others.
    fn eager_fits(&self, dest: u32, len: usize) -> bool {
        len <= self.shm_eager_limit || (len <= self.eager_limit && !self.engine.is_shm_peer(dest))
    }

    /// A standard-mode send that leaves at once and needs no request: an
    /// eager message to another rank that the transport takes whole now
    /// (shared memory with a free cell and nothing queued before it).
    /// Returns whether it was sent; if not, nothing happened and the send
    /// goes through [`P2p::isend`].
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes during the call.
    pub unsafe fn send_now(
        &mut self,
        env: Envelope,
        dest: u32,
        buf: *const u8,
        len: usize,
    ) -> Result<bool> {
        if !self.eager_fits(dest, len) || dest == self.rank || !self.m.take_credit(dest, len) {
            return Ok(false);
        }
        if let Some(why) = &self.m.lost[dest as usize] {
            return Err(Error::new(ErrorClass::ProcAborted, why.clone()));
        }
        let header = Header {
            kind: FrameKind::Eager,
            context: env.ctx,
            src: env.src,
            tag: env.tag,
            len: len as u64,
            sreq: 0,
            rreq: 0,
        };
        // SAFETY: forwarded from the caller.
        // (A failure means the peer is lost: its credit no longer matters.)
        let sent = unsafe { self.engine.try_send(dest, &header, buf, len)? };
        if sent {
            self.m.counters.eager_msgs += 1;
            self.m.counters.eager_bytes += len as u64;
        } else if let Some(c) = self.m.credits.as_mut() {
            // Not sent now: the send goes through isend, which takes again.
            c.returned(dest, len as u64);
        }
        Ok(sent)
    }

    /// Starts a send of `len` bytes at `buf` to world rank `dest`.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes until the request completes.
    pub unsafe fn isend(
        &mut self,
        env: Envelope,
        dest: u32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<ReqId> {
        let mode = if self.replicated {
            SendMode::Standard
        } else {
            mode
        };
        // SAFETY: forwarded from the caller.
        if mode == SendMode::Standard && unsafe { self.send_now(env, dest, buf, len)? } {
            let mut req = send_request(env, dest, buf, len);
            req.stage = Stage::Complete;
            req.status.count = len;
            return Ok(self.m.reqs.insert(req));
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.isend_unsent(env, dest, buf, len, mode) }
    }

    /// As [`P2p::isend`], for a message [`P2p::send_now`] did not send.
    ///
    /// # Safety
    /// As for [`P2p::isend`].
    pub(crate) unsafe fn isend_unsent(
        &mut self,
        env: Envelope,
        dest: u32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<ReqId> {
        let Envelope { ctx, src, tag } = env;
        let mut req = send_request(env, dest, buf, len);
        if let Some(why) = &self.m.lost[dest as usize] {
            return Err(Error::new(ErrorClass::ProcAborted, why.clone()));
        }
        if dest == self.rank {
            return Ok(self.send_to_self(ctx, src, tag, req, mode));
        }
        let eager = mode == SendMode::Standard
            && self.eager_fits(dest, len)
            && self.m.take_credit(dest, len);
        req.stage = if eager {
            Stage::SendQueued
        } else {
            Stage::SendAwaitCts
        };
        let id = self.m.reqs.insert(req);
        if eager {
            self.m.counters.eager_msgs += 1;
            self.m.counters.eager_bytes += len as u64;
        } else {
            self.m.counters.rendezvous_msgs += 1;
            self.m.counters.rendezvous_bytes += len as u64;
        }
        // A receive this host's `dest` advertised for it: write it in.
        if !eager {
            let meets = |key| advert::advert_meets(key, ctx, src, tag);
            if let Some((rreq, addr)) = self.engine.claim_advert(dest, len as u64, meets) {
                return self.write_claimed(id, dest, env, buf, len, rreq, addr);
            }
        }
        // Large messages to a rank on this host: it reads them itself.
        let single_copy = !eager && self.engine.single_copy_to(dest, len);
        let kind = match (eager, single_copy) {
            (true, _) => FrameKind::Eager,
            (false, true) => FrameKind::Rget,
            (false, false) => FrameKind::Rts,
        };
        let header = Header {
            kind,
            context: ctx,
            src,
            tag,
            len: len as u64,
            sreq: id.0,
            rreq: if single_copy { buf as u64 } else { 0 },
        };
        let sent = if eager {
            self.engine.send(dest, &header, buf, len, Some(id.0))
        } else {
            self.engine.send(dest, &header, std::ptr::null(), 0, None)
        };
        match sent {
            Ok(SendState::Done) if eager => self.m.complete(id, len, None),
            Ok(_) => {}
            Err(e) => {
                self.m.reqs.remove(id);
                return Err(e);
            }
        }
        Ok(id)
    }

    fn send_to_self(
        &mut self,
        ctx: u32,
        src: u32,
        tag: i32,
        req: Request,
        mode: SendMode,
    ) -> ReqId {
        let (buf, len) = (req.buf as *const u8, req.len);
        let sync = mode == SendMode::Synchronous;
        let id = self.m.reqs.insert(Request {
            stage: if sync {
                Stage::SendSelfHeld
            } else {
                Stage::SendQueued
            },
            ..req
        });
        if let Some(rid) = self.m.take_posted(ctx, src, tag) {
            // SAFETY: the caller of `isend` keeps `buf` valid for `len` bytes.
            let data = unsafe { slice_or_empty(buf, len) };
            self.m.deliver_buffered(rid, src, tag, data);
            self.m.complete(id, len, None);
            return id;
        }
        let body = if sync {
            Body::SelfHeld { sreq: id }
        } else {
            // SAFETY: as above; the copy makes the send complete at once.
            let data = unsafe { slice_or_empty(buf, len) }.to_vec();
            self.m.unexpected_bytes += len;
            self.m.complete(id, len, None);
            Body::Eager(data)
        };
        let me = self.rank;
        self.m.context(ctx).unexpected.push_back(Unexpected {
            src,
            peer: me,
            tag,
            len: len as u64,
            body,
        });
        id
    }

    /// A new posted receive request (not yet matched), shared by `irecv`
    /// and `imrecv`.
    fn post_recv(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
        buf: *mut u8,
        cap: usize,
    ) -> ReqId {
        let id = self.m.reqs.insert(Request {
            is_send: false,
            stage: Stage::RecvPosted,
            context: ctx,
            peer: src.map(|s| s.1),
            src_filter: src.map(|s| s.0),
            tag,
            buf,
            len: cap,
            msg_len: 0,
            status: Status::default(),
            detached: false,
        });
        self.m.note_overlap(id);
        id
    }

    /// Posts a receive into `cap` bytes at `buf`. `src` is the source filter
    /// as (communicator rank, world rank), `None` for any source.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `cap` bytes until the request completes.
    pub unsafe fn irecv(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
        buf: *mut u8,
        cap: usize,
    ) -> ReqId {
        let id = self.post_recv(ctx, src, tag, buf, cap);
        if self.m.wild.is_some() {
            return self.irecv_replicated(id, ctx, src, tag);
        }
        let src_filter = src.map(|s| s.0);
        let lost = src.is_some_and(|s| self.m.lost[s.1 as usize].is_some());
        let c = self.m.context(ctx);
        let found = if c.unexpected.is_empty() {
            None
        } else {
            c.unexpected
                .iter()
                .position(|u| matches(src_filter, tag, u.src, u.tag))
        };
        if let Some(pos) = found {
            let u = c.unexpected.remove(pos).expect("position is in range");
            self.deliver_unexpected(id, u);
            return id;
        }
        if !lost {
            c.posted.push_back(id);
            self.m.posted_count += 1;
            self.m.consider_advert(id, self.rank, self.shm_eager_limit);
            if !self.m.advert_wanted.is_empty() {
                self.publish_adverts();
            }
            return id;
        }
        if let Some(why) = src.and_then(|s| self.m.lost[s.1 as usize].clone()) {
            self.m
                .complete(id, 0, Some(Error::new(ErrorClass::ProcAborted, why)));
        }
        id
    }

    /// [`P2p::irecv`] in a replicated job, once receive `id` is posted: a
    /// wildcard receive follows the leader replica's decision (wildcard.rs),
    /// and none is matched while its context waits for one.
    #[cold]
    #[inline(never)]
    fn irecv_replicated(
        &mut self,
        id: ReqId,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
    ) -> ReqId {
        if src.is_none() {
            self.wait_for_decision_room();
        }
        let may_match = self.m.wildcard_posted(id, ctx, src.is_none());
        let (src_filter, peer) = self
            .m
            .reqs
            .get(id)
            .map_or((None, None), |r| (r.src_filter, r.peer));
        let lost = peer.and_then(|p| self.m.lost[p as usize].clone());
        let c = self.m.context(ctx);
        let found = if may_match {
            c.unexpected
                .iter()
                .position(|u| matches(src_filter, tag, u.src, u.tag))
        } else {
            None
        };
        if let Some(pos) = found {
            let u = c.unexpected.remove(pos).expect("position is in range");
            self.deliver_unexpected(id, u);
            return id;
        }
        match lost {
            Some(why) => {
                self.m
                    .complete(id, 0, Some(Error::new(ErrorClass::ProcAborted, why)));
            }
            None => {
                c.posted.push_back(id);
                self.m.posted_count += 1;
            }
        }
        id
    }

    /// Gives a message that arrived before its receive to receive `id`
    /// (matched to it), and sends whatever that makes due.
    fn deliver_unexpected(&mut self, id: ReqId, u: Unexpected) {
        match u.body {
            Body::Eager(data) => {
                self.m.unexpected_bytes -= data.len();
                self.m.eager_consumed(u.peer, data.len());
                self.m.deliver_buffered(id, u.src, u.tag, &data);
            }
            Body::Rts { sreq, addr } => self
                .m
                .accept_rts(id, u.peer, u.src, u.tag, u.len, sreq, addr),
            Body::SelfHeld { sreq } => self.m.deliver_self_held(id, sreq),
        }
        self.flush_outbox();
    }

    /// Takes the first message in `ctx` that matches out of matching (a
    /// matched probe): later receives and probes no longer see it.
    fn take_matched(
        &mut self,
        ctx: u32,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Option<(MsgId, Status)> {
        let c = self.m.contexts.get_mut(&ctx)?;
        let pos = c
            .unexpected
            .iter()
            .position(|u| matches(src, tag, u.src, u.tag))?;
        let u = c.unexpected.remove(pos).expect("position is in range");
        let st = Status {
            source: Some(u.src),
            tag: Some(u.tag),
            count: u.len as usize,
            ..Status::default()
        };
        let id = MsgId(self.m.next_matched);
        self.m.next_matched += 1;
        self.m.matched.insert(id.0, (ctx, u));
        Some((id, st))
    }

    /// `MPI_Improbe`: takes a matching message out of matching if one has
    /// arrived.
    pub fn improbe(
        &mut self,
        ctx: u32,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Option<(MsgId, Status)> {
        self.progress();
        self.take_matched(ctx, src, tag)
    }

    /// `MPI_Mprobe`: waits for a matching message and takes it out of
    /// matching. `src` as for [`P2p::probe`].
    pub fn mprobe(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
    ) -> Result<(MsgId, Status)> {
        self.mprobe_marked(ctx, src, tag, false)
            .expect("a probe that may not end early ends with a message")
    }

    /// [`P2p::mprobe`] as [`P2p::probe_or_hand_over`].
    pub fn mprobe_or_hand_over(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
    ) -> Option<Result<(MsgId, Status)>> {
        self.mprobe_marked(ctx, src, tag, true)
    }

    fn mprobe_marked(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
        may_end: bool,
    ) -> Option<Result<(MsgId, Status)>> {
        if let Err(e) = self.probe_marked(ctx, src, tag, may_end)? {
            return Some(Err(e));
        }
        // Nothing ran since the probe found it: the same message is first.
        let found = self.take_matched(ctx, src.map(|s| s.0), tag);
        Some(found.ok_or_else(|| Error::new(ErrorClass::Intern, "probed message vanished")))
    }

    /// The context a matched message belongs to, if `msg` names one.
    pub fn matched_context(&self, msg: MsgId) -> Option<u32> {
        self.m.matched.get(&msg.0).map(|(ctx, _)| *ctx)
    }

    /// `MPI_Imrecv`: receives the message a matched probe took, into `cap`
    /// bytes at `buf`.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `cap` bytes until the request completes.
    pub unsafe fn imrecv(&mut self, msg: MsgId, buf: *mut u8, cap: usize) -> Result<ReqId> {
        let (ctx, u) = self
            .m
            .matched
            .remove(&msg.0)
            .ok_or_else(|| Error::new(ErrorClass::Request, "invalid message handle"))?;
        let id = self.post_recv(ctx, Some((u.src, u.peer)), Some(u.tag), buf, cap);
        self.deliver_unexpected(id, u);
        Ok(id)
    }

    /// Looks for a matching message without receiving it.
    pub fn iprobe(&mut self, ctx: u32, src: Option<u32>, tag: Option<i32>) -> Option<Status> {
        self.progress();
        self.peek(ctx, src, tag)
    }

    fn peek(&self, ctx: u32, src: Option<u32>, tag: Option<i32>) -> Option<Status> {
        let c = self.m.contexts.get(&ctx)?;
        c.unexpected
            .iter()
            .find(|u| matches(src, tag, u.src, u.tag))
            .map(|u| Status {
                source: Some(u.src),
                tag: Some(u.tag),
                count: u.len as usize,
                ..Status::default()
            })
    }

    /// Waits for a matching message without receiving it.
    pub fn probe(&mut self, ctx: u32, src: Option<(u32, u32)>, tag: Option<i32>) -> Result<Status> {
        self.probe_marked(ctx, src, tag, false)
            .expect("a probe that may not end early ends with a message")
    }

    /// [`P2p::probe`] as [`P2p::wait_for_or_hand_over`] waits: `None` when
    /// it stopped for another thread.
    pub fn probe_or_hand_over(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
    ) -> Option<Result<Status>> {
        self.probe_marked(ctx, src, tag, true)
    }

    fn probe_marked(
        &mut self,
        ctx: u32,
        src: Option<(u32, u32)>,
        tag: Option<i32>,
        may_end: bool,
    ) -> Option<Result<Status>> {
        let filter = src.map(|s| s.0);
        let mut found = None;
        let done = self.wait_marked(
            |p| {
                found = p.peek(ctx, filter, tag);
                found.is_some() || src.is_some_and(|s| p.m.lost[s.1 as usize].is_some())
            },
            may_end,
        );
        if !done {
            return None;
        }
        Some(match found {
            Some(st) => Ok(st),
            None => {
                let why = src
                    .and_then(|s| self.m.lost[s.1 as usize].clone())
                    .unwrap_or_default();
                Err(Error::new(ErrorClass::ProcAborted, why))
            }
        })
    }

    /// Whether the request has completed (`None` for an unknown id).
    #[inline]
    pub fn is_complete(&self, id: ReqId) -> Option<bool> {
        self.m.reqs.get(id).map(|r| r.stage == Stage::Complete)
    }

    /// Whether `id` names a live request.
    #[inline]
    pub fn is_live(&self, id: ReqId) -> bool {
        self.m.reqs.get(id).is_some()
    }

    /// The status of a finished request, which stays (`MPI_Request_get_status`).
    pub fn peek_status(&self, id: ReqId) -> Option<Status> {
        self.m
            .reqs
            .get(id)
            .filter(|r| r.stage == Stage::Complete)
            .map(|r| r.status.clone())
    }

    /// Completes and releases a finished request, returning its status.
    #[inline]
    pub fn take_if_complete(&mut self, id: ReqId) -> Option<Status> {
        if self.is_complete(id)? {
            self.m.reqs.remove(id).map(|r| r.status)
        } else {
            None
        }
    }

    /// Drives progress once; if `id` is complete, releases it.
    pub fn test(&mut self, id: ReqId) -> Result<Option<Status>> {
        if !self.is_live(id) {
            return Err(Error::new(ErrorClass::Request, "invalid request"));
        }
        if self.is_complete(id) != Some(true) {
            self.progress();
        }
        Ok(self.take_if_complete(id))
    }

    /// Blocks until `id` completes, then releases it.
    pub fn wait(&mut self, id: ReqId) -> Result<Status> {
        if !self.is_live(id) {
            return Err(Error::new(ErrorClass::Request, "invalid request"));
        }
        self.wait_for(|p| p.is_complete(id) != Some(false));
        Ok(self.take_if_complete(id).unwrap_or_default())
    }

    /// `MPI_Request_free`: the request is released when it completes.
    pub fn detach(&mut self, id: ReqId) -> Result<()> {
        let r = self
            .m
            .reqs
            .get_mut(id)
            .ok_or_else(|| Error::new(ErrorClass::Request, "invalid request"))?;
        if r.stage == Stage::Complete {
            self.m.reqs.remove(id);
        } else {
            r.detached = true;
        }
        Ok(())
    }

    /// Cancels a receive that has not matched yet; sends cannot be cancelled.
    pub fn cancel(&mut self, id: ReqId) -> Result<()> {
        let r = self
            .m
            .reqs
            .get(id)
            .ok_or_else(|| Error::new(ErrorClass::Request, "invalid request"))?;
        if let (Stage::SendAwaitCts, Some(peer)) = (r.stage, r.peer) {
            // A rendezvous send no receive has answered: the receiver drops
            // its RTS if none took it meanwhile (then the send completes
            // cancelled, else as usual), so a wait for it always ends. A
            // send whose data left, an eager one included, completes
            // without being cancelled, as MPI allows.
            let context = r.context;
            self.m.outbox.push(Outgoing {
                peer,
                header: Header {
                    kind: FrameKind::Revoke,
                    context,
                    src: 0,
                    tag: 0,
                    len: 0,
                    sreq: id.0,
                    rreq: 0,
                },
                payload: std::ptr::null(),
                len: 0,
                token: None,
            });
            self.flush_outbox();
            return Ok(());
        }
        if r.stage == Stage::SendSelfHeld {
            // A synchronous send to this rank, waiting for its receive.
            let ctx = r.context;
            let q = &mut self.m.contexts.slot(ctx).unexpected;
            if let Some(i) = q
                .iter()
                .position(|u| matches!(u.body, Body::SelfHeld { sreq } if sreq == id))
            {
                q.remove(i);
                if let Some(r) = self.m.reqs.get_mut(id) {
                    r.status.cancelled = true;
                }
                self.m.complete(id, 0, None);
            }
            return Ok(());
        }
        if r.stage == Stage::RecvPosted {
            let ctx = r.context;
            if let Some(peer) = r.peer {
                if !self.withdraw_for_cancel(id, peer) {
                    return Ok(());
                }
            }
            if let Some(c) = self.m.contexts.get_mut(&ctx) {
                let before = c.posted.len();
                c.posted.retain(|&x| x != id);
                self.m.posted_count -= before - c.posted.len();
            }
            if let Some(r) = self.m.reqs.get_mut(id) {
                r.status.cancelled = true;
            }
            self.m.complete(id, 0, None);
        }
        Ok(())
    }

    /// Makes the single-copy reads matching scheduled (large ones with the
    /// sender's help), then completes them (see [`P2p::finish_pull`]).
    /// A large read from a sender that is helping with another read already
    /// waits for that one to end (a later pass), rather than going alone:
    /// with many messages in flight (a burst of large sends) all but the
    /// first of each pass went alone, and the sender helped with 1% of the
    /// chunks.
    fn run_pulls(&mut self) {
        let mut later = Vec::new();
        for p in std::mem::take(&mut self.m.pulls) {
            let Some(r) = self.m.reqs.get(p.rid) else {
                continue;
            };
            if r.stage != (Stage::RecvAwaitData { peer: p.peer }) {
                continue;
            }
            let (buf, n) = (r.buf, r.msg_len.min(r.len as u64));
            let started = p.timed.then(Instant::now);
            if self.m.copy_help_min != 0 && n >= self.m.copy_help_min {
                if n >= WAIT_FOR_HELP_MIN && self.m.help_waits.iter().any(|w| w.pull.peer == p.peer)
                {
                    later.push(p);
                    continue;
                }
                if let Some(w) = self.read_helped(&p, buf, n, started) {
                    self.m.help_waits.push(w);
                    continue;
                }
            }
            // SAFETY: `buf` is the receive's buffer, writable by the MPI
            // contract until it completes, and `n` is at most its length.
            let read = unsafe { self.engine.read_remote(p.peer, p.addr, buf, n as usize) };
            self.finish_pull(&p, n, read, started);
        }
        if !later.is_empty() {
            later.append(&mut self.m.pulls);
            self.m.pulls = later;
        }
    }

    /// Completes single-copy read `p` of `n` bytes (begun at `started` if
    /// timed) as `read` says: FIN on success; where the kernel refused or
    /// the read failed with the sender alive, CTS, so that the sender
    /// pushes the data through the transport.
    fn finish_pull(
        &mut self,
        p: &Pull,
        n: u64,
        read: std::result::Result<(), ReadRemoteError>,
        started: Option<Instant>,
    ) {
        let Some(r) = self.m.reqs.get(p.rid) else {
            return;
        };
        let (msg_len, cap, ctx) = (r.msg_len, r.len, r.context);
        let reply = |kind, rreq| Outgoing {
            peer: p.peer,
            header: Header {
                kind,
                context: ctx,
                src: 0,
                tag: 0,
                len: n,
                sreq: p.sreq,
                rreq,
            },
            payload: std::ptr::null(),
            len: 0,
            token: None,
        };
        match read {
            Ok(()) => {
                if let Some(t0) = started {
                    let ns = t0.elapsed().as_nanos() as u64;
                    self.m.paths.record(p.peer, n, Path::Pull, ns);
                }
                self.m.counters.single_copy_reads += 1;
                self.m
                    .complete(p.rid, n as usize, Matcher::truncation(msg_len, cap));
                self.m.outbox.push(reply(FrameKind::Fin, 0));
            }
            Err(ReadRemoteError::Failed(why)) if self.m.lost[p.peer as usize].is_some() => {
                self.m
                    .complete(p.rid, 0, Some(Error::new(ErrorClass::ProcAborted, why)));
            }
            // Not permitted, or memory the kernel would not read this
            // way (secret or device memory): the sender, which can read
            // its own buffer, pushes it through the rings. A sender that
            // died meanwhile fails the receive when its loss is seen.
            Err(_) => self.m.outbox.push(reply(FrameKind::Cts, p.rid.0)),
        }
    }

    pub(crate) fn flush_outbox(&mut self) -> bool {
        if !self.m.pulls.is_empty() {
            self.run_pulls();
        }
        if self.m.waiting && !self.m.helps.is_empty() {
            self.run_helps();
        }
        if !self.m.help_waits.is_empty() {
            self.finish_helped_reads();
        }
        if !self.m.pushes.is_empty() {
            self.run_pushes();
        }
        if let Some(w) = self.m.wild.as_mut() {
            for h in std::mem::take(&mut w.out) {
                self.engine.send_to_replicas(&h);
            }
        }
        if self.m.outbox.is_empty() {
            return false;
        }
        for o in std::mem::take(&mut self.m.outbox) {
            match self
                .engine
                .send(o.peer, &o.header, o.payload, o.len, o.token)
            {
                Ok(SendState::Done) => {
                    if let Some(t) = o.token {
                        self.m.on_send_done(t);
                    }
                }
                Ok(SendState::Queued) => {}
                Err(e) => self.m.on_peer_lost(o.peer, &e.message),
            }
        }
        true
    }

    /// Drives communication once, without waiting. Returns whether
    /// anything happened.
    pub fn progress(&mut self) -> bool {
        let did = self.engine.progress(&mut self.m);
        let did = self.finish_pass() || did;
        if did {
            self.progress_made();
        }
        did
    }

    /// Sets what is told of progress (`MPI_THREAD_MULTIPLE`: a thread that
    /// let others in and waits to come back learns that what it waits for
    /// may have finished, whichever thread's call did the work).
    pub fn set_progress_hook(&mut self, hook: Option<fn()>) {
        self.progress_hook = hook;
    }

    fn progress_made(&self) {
        if let Some(hook) = self.progress_hook {
            hook();
        }
    }

    /// The end of every pass: frames matching left to send go, receives
    /// wanting advertisement are published. Whether a frame went.
    fn finish_pass(&mut self) -> bool {
        let did = self.flush_outbox();
        if !self.m.advert_wanted.is_empty() {
            self.publish_adverts();
        }
        did
    }

    /// Drives progress until `ready` holds. After the last activity it
    /// polls for `spin`, then polls and yields the CPU for `yield_time` (so
    /// that ranks sharing a core take turns), then blocks in the kernel
    /// until a peer wakes it.
    pub fn wait_for(&mut self, ready: impl FnMut(&P2p) -> bool) {
        self.wait_marked(ready, false);
    }

    /// Sets what waits that may end early ask (see
    /// [`P2p::wait_for_or_hand_over`]); `None`: they never do.
    pub fn set_hand_over(&mut self, ask: Option<fn(bool) -> bool>) {
        self.hand_over = ask;
    }

    /// [`P2p::wait_for`], except that it returns false, without `ready`
    /// holding, when the function set by [`P2p::set_hand_over`] says
    /// another thread should have the library (`MPI_THREAD_MULTIPLE`: the
    /// caller lets go of it and waits again later).
    pub fn wait_for_or_hand_over(&mut self, ready: impl FnMut(&P2p) -> bool) -> bool {
        self.wait_marked(ready, true)
    }

    fn wait_marked(&mut self, ready: impl FnMut(&P2p) -> bool, may_end: bool) -> bool {
        // Only a rank that waits helps copy (see copy_help.rs).
        let outer = std::mem::replace(&mut self.m.waiting, true);
        let done = self.wait_until(ready, may_end.then_some(self.hand_over).flatten());
        self.m.waiting = outer;
        done
    }

    /// [`P2p::wait_for`], once marked waiting; false when `hand_over` said
    /// to stop.
    fn wait_until(
        &mut self,
        mut ready: impl FnMut(&P2p) -> bool,
        hand_over: Option<fn(bool) -> bool>,
    ) -> bool {
        if ready(self) {
            return true;
        }
        // Reading the clock costs as much as a poll: idleness is timed from
        // the first look at the clock, after some empty polls, so a wait that
        // ends quickly never reads it.
        let mut idle_since: Option<Instant> = None;
        let mut idle_polls: u32 = 0;
        let tcp_busy = self.engine.tcp_active();
        let mut woke = false;
        loop {
            let did = self.progress();
            // Looked at after empty polls too: what the caller waits for
            // may be memory a peer writes without a frame.
            if ready(self) {
                return true;
            }
            if hand_over.is_some_and(|ask| ask(did || std::mem::take(&mut woke))) {
                return false;
            }
            if did {
                idle_since = None;
                idle_polls = 0;
                continue;
            }
            idle_polls = idle_polls.wrapping_add(1);
            // Look at the clock now and then (every time when not spinning:
            // then each poll yields anyway).
            if !self.spin.is_zero() && !idle_polls.is_multiple_of(IDLE_POLLS_PER_CLOCK_READ) {
                if idle_polls.is_multiple_of(IDLE_POLLS_PER_PAUSE) {
                    std::hint::spin_loop();
                }
                continue;
            }
            let idle = idle_since.get_or_insert_with(Instant::now).elapsed();
            if idle < self.spin {
                // A peer may be waiting for this very core (a busy machine
                // packs ranks together): once a quick answer is unlikely,
                // let it run now and then. TCP needs it at once: on a busy
                // machine the kernel finishes loopback deliveries in a
                // thread that a polling rank would starve.
                let yield_now = if tcp_busy {
                    true
                } else {
                    idle >= SPIN_BEFORE_YIELDING
                        && idle_polls.is_multiple_of(IDLE_POLLS_PER_YIELD_WHILE_SPINNING)
                };
                if yield_now {
                    std::thread::yield_now();
                }
                continue;
            }
            if idle < self.spin + self.yield_time {
                std::thread::yield_now();
                continue;
            }
            // Sleep, unless what the caller waits for came after the last
            // look: checked again once peers know to wake this rank, so a
            // change they make to memory it polls (not a frame) is not
            // missed (see `Engine::arm_sleep`).
            // A read helped by its sender waits for chunks the sender
            // claimed: it ends without a frame, so it is polled, not slept
            // on, offering the CPU between looks (with `spin_us=0` this is
            // every pass).
            if self.engine.progress(&mut self.m) {
                self.progress_made();
            } else if !self.m.help_waits.is_empty() || !self.m.pulls.is_empty() {
                std::thread::yield_now();
            } else if self.engine.arm_sleep() {
                if ready(self) {
                    self.engine.disarm_sleep();
                    return true;
                }
                if self.engine.sleep_armed(&mut self.m) {
                    self.progress_made();
                }
                woke = true;
            }
            self.finish_pass();
            if ready(self) {
                return true;
            }
            idle_since = None;
            idle_polls = 0;
        }
    }

    /// Wakes those of `peers` (this rank aside) that sleep in a wait on this
    /// host, to look again at what they wait for (see [`P2p::wait_for`]).
    pub fn wake_peers(&self, peers: &[u32]) {
        self.engine.wake(peers);
    }

    /// Sends every queued frame (bounded by `deadline`), for finalize.
    pub fn flush(&mut self, deadline: Instant) {
        while self.engine.has_queued() && Instant::now() < deadline {
            self.engine.progress(&mut self.m);
            self.flush_outbox();
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// What matching, the engine and the transports did.
    pub fn counters(&self) -> Counters {
        let mut c = self.engine.counters();
        c.merge(&self.m.counters);
        c.path_switches = self.m.paths.switches;
        c
    }
}

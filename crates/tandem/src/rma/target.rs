//! The target side of one-sided access: memory a rank exposes, and the
//! operations peers make on it (write, read, accumulate, compare-and-swap,
//! locks), carried out by the target's progress engine without its
//! application taking part; and the answers that finish the origin's
//! operations ([`super::op_table`]).
//!
//! The origin names a region by the key its owner gave it and an absolute
//! address inside it; the target checks both before touching memory, so a
//! write outside a region, to an unknown key or to a freed region is refused
//! (answered with an error class) and never performed. Keys are never
//! reused, so a stale key cannot reach a newer region.
//!
//! Frames between one pair of ranks are handled in the order they were
//! sent, so an operation followed by a message (or an unlock) to the same
//! target is complete at the target before the message is seen. Every
//! operation that asks for it is acknowledged once done at the target.

use std::collections::{HashMap, VecDeque};

use crate::buf_pool::BufPool;
use crate::int_map::IntMap;

use crate::datatype::Prim;
use crate::error::{Error, ErrorClass};
use crate::ops::{self, PredefOp};
use crate::p2p::Outgoing;
use crate::transport::PayloadDest;
use crate::wire::{FrameKind, Header};

use super::encoding::{
    acc_tag, acc_untag, decode_table, ACC_CAS, ACC_FETCH, ACC_QUIET, ACC_SCATTER, PUT_SCATTER,
};
use super::op_table::{OpId, OpState, OpTable, Pending};
use super::Strided;

/// Send tokens of one-sided frames carry this bit, apart from requests'.
pub(crate) const TOKEN_BIT: u64 = 1 << 63;
/// ... and replies' tokens this one too, apart from operations'.
const REPLY_BIT: u64 = 1 << 62;

#[derive(Clone, Copy)]
struct Region {
    base: usize,
    len: usize,
}

#[derive(Default)]
struct LockState {
    exclusive: bool,
    holders: u32,
    /// Requests not yet granted, in arrival order: (peer, exclusive, op).
    waiting: VecDeque<(u32, bool, u64)>,
}

impl LockState {
    fn grantable(&self, exclusive: bool) -> bool {
        if exclusive {
            self.holders == 0
        } else {
            !self.exclusive
        }
    }
}

/// Keys with this bit are chosen by the layer above (`P2p::expose_keyed`);
/// the engine's own keys never have it.
pub const CALLER_KEY_BIT: u32 = 1 << 31;

/// One-sided state of one rank: its exposed regions and locks (target side)
/// and its operations in flight (origin side).
pub(crate) struct Remote {
    me: u32,
    regions: IntMap<u32, Region>,
    /// Keys naming a changing set of regions (dynamic windows): an access
    /// must fall inside one of them.
    dynamic: IntMap<u32, Vec<Region>>,
    next_key: u32,
    locks: HashMap<u32, LockState>,
    ops: OpTable,
    next_op: u64,
    /// Operations in flight per peer (for flushes).
    in_flight: Vec<u64>,
    /// Their sum (asked on every MPI call under the thread policy).
    in_flight_total: u64,
    /// Reply payloads being sent, by token.
    replies: HashMap<u64, Vec<u8>>,
    /// Buffers of replies already sent, for the next snapshots: with many
    /// gets outstanding, replies in fresh memory cost two to four times
    /// the copy itself.
    spare: BufPool,
    next_reply: u64,
    /// Per peer: the put (origin op, refusal) or read reply (origin op)
    /// whose payload is arriving.
    filling: Vec<Option<(FrameKind, u64, Option<ErrorClass>)>>,
    /// Small messages received and not yet taken, oldest first.
    pub(crate) smalls: VecDeque<(u32, [u8; 16])>,
    /// Refusals of operations already forgotten: (operation, error).
    pub(crate) late: Vec<(u64, Error)>,
}

fn refused(class: ErrorClass, peer: u32) -> Error {
    let what = match class {
        ErrorClass::RmaRange => "outside the exposed region",
        ErrorClass::Win => "to a region that is not exposed (unknown or freed)",
        ErrorClass::Op => "with an operation the target cannot apply",
        ErrorClass::Type => "with an element type the target cannot apply",
        ErrorClass::RmaSync => "that does not match the target's lock state",
        _ => "for an unexpected reason",
    };
    Error::new(
        class,
        format!("one-sided access refused by rank {peer}: {what}"),
    )
}

fn class_from_code(code: i32) -> ErrorClass {
    match code {
        48 => ErrorClass::RmaRange,
        56 => ErrorClass::Win,
        10 => ErrorClass::Op,
        3 => ErrorClass::Type,
        50 => ErrorClass::RmaSync,
        _ => ErrorClass::Other,
    }
}

impl Remote {
    pub(crate) fn new(me: u32, size: u32) -> Remote {
        Remote {
            me,
            regions: IntMap::default(),
            dynamic: IntMap::default(),
            next_key: 1,
            locks: HashMap::new(),
            ops: OpTable::default(),
            next_op: 1,
            in_flight: vec![0; size as usize],
            in_flight_total: 0,
            replies: HashMap::new(),
            spare: reply_pool(),
            next_reply: 1,
            filling: vec![None; size as usize],
            smalls: VecDeque::new(),
            late: Vec::new(),
        }
    }

    /// The job has `size` processes now (`MPI_Comm_spawn` started some).
    pub(crate) fn grow(&mut self, size: u32) {
        if size as usize > self.in_flight.len() {
            self.in_flight.resize(size as usize, 0);
            self.filling.resize_with(size as usize, || None);
        }
    }

    fn new_key(&mut self) -> u32 {
        let key = self.next_key;
        self.next_key = self.next_key.checked_add(1).expect("region keys exhausted");
        assert!(key & CALLER_KEY_BIT == 0, "region keys exhausted");
        key
    }

    pub(crate) fn expose_dynamic(&mut self) -> u32 {
        let key = self.new_key();
        self.dynamic.insert(key, Vec::new());
        key
    }

    pub(crate) fn attach(&mut self, key: u32, base: *mut u8, len: usize) -> bool {
        match self.dynamic.get_mut(&key) {
            Some(v) => {
                v.push(Region {
                    base: base as usize,
                    len,
                });
                true
            }
            None => false,
        }
    }

    pub(crate) fn detach(&mut self, key: u32, base: *const u8) -> bool {
        let Some(v) = self.dynamic.get_mut(&key) else {
            return false;
        };
        match v.iter().position(|r| r.base == base as usize) {
            Some(i) => {
                v.remove(i);
                true
            }
            None => false,
        }
    }

    fn known(&self, key: u32) -> bool {
        self.regions.contains_key(&key) || self.dynamic.contains_key(&key)
    }

    pub(crate) fn expose(&mut self, base: *mut u8, len: usize) -> u32 {
        let key = self.new_key();
        self.regions.insert(
            key,
            Region {
                base: base as usize,
                len,
            },
        );
        key
    }

    pub(crate) fn expose_keyed(&mut self, key: u32, base: *mut u8, len: usize) -> bool {
        if key & CALLER_KEY_BIT == 0 || self.known(key) {
            return false;
        }
        self.regions.insert(
            key,
            Region {
                base: base as usize,
                len,
            },
        );
        true
    }

    pub(crate) fn unexpose(&mut self, key: u32) -> bool {
        self.locks.remove(&key);
        let known = self.dynamic.remove(&key).is_some() | self.regions.remove(&key).is_some();
        if self.regions.is_empty() && self.dynamic.is_empty() {
            // Nothing left to read from: give the memory back.
            self.spare = reply_pool();
        }
        known
    }

    /// The address range `[addr, addr + len)` inside region `key`.
    fn check(&self, key: u32, addr: u64, len: u64) -> std::result::Result<usize, ErrorClass> {
        if let Some(attached) = self.dynamic.get(&key) {
            let inside = |r: &Region| {
                addr.checked_sub(r.base as u64)
                    .and_then(|start| start.checked_add(len))
                    .is_some_and(|end| end <= r.len as u64)
            };
            if attached.iter().any(inside) {
                return Ok(addr as usize);
            }
            // Memory attached in pieces that touch is one range to the
            // application (MPICH's win_dynamic_rma_flush_get writes across
            // two adjacent attachments): walk the pieces that cover it.
            let end = addr.checked_add(len).ok_or(ErrorClass::RmaRange)?;
            let mut at = addr;
            while at < end {
                let next = attached
                    .iter()
                    .find(|r| (r.base as u64) <= at && at < r.base as u64 + r.len as u64)
                    .ok_or(ErrorClass::RmaRange)?;
                at = next.base as u64 + next.len as u64;
            }
            return Ok(addr as usize);
        }
        let r = self.regions.get(&key).ok_or(ErrorClass::Win)?;
        let start = addr
            .checked_sub(r.base as u64)
            .ok_or(ErrorClass::RmaRange)?;
        let end = start.checked_add(len).ok_or(ErrorClass::RmaRange)?;
        if end > r.len as u64 {
            return Err(ErrorClass::RmaRange);
        }
        Ok(addr as usize)
    }

    /// Checks every block of `blocks` against region `key`; their data's
    /// total size. A region is one interval, so the first and last block of
    /// a strided run bound all of them; attached memory of a dynamic window
    /// may have holes, so there each block is checked.
    fn check_blocks(&self, key: u32, blocks: &[Strided]) -> std::result::Result<usize, ErrorClass> {
        let dynamic = self.dynamic.contains_key(&key);
        let mut total = 0usize;
        for b in blocks {
            let len = u64::from(b.len);
            if b.count == 0 || len == 0 {
                continue;
            }
            if dynamic {
                for i in 0..b.count {
                    self.check(key, b.at(i), len)?;
                }
            } else {
                // Without wrapping around the address space (a peer's frame
                // is not trusted), or the ends would not bound the middle.
                let last = i128::from(b.addr) + i128::from(b.count - 1) * i128::from(b.stride);
                let last = u64::try_from(last).map_err(|_| ErrorClass::RmaRange)?;
                self.check(key, b.addr, len)?;
                self.check(key, last, len)?;
            }
            total = total.checked_add(b.bytes()).ok_or(ErrorClass::RmaRange)?;
        }
        Ok(total)
    }

    /// A scattered put: checks every block, then writes them all (or none).
    fn apply_put_scatter(&self, key: u32, payload: &[u8]) -> std::result::Result<(), ErrorClass> {
        let (mut blocks, data) = decode_table(payload)?;
        // Empty blocks name no memory and are not range-checked: not one
        // pointer is made from them, nor a loop run over their count.
        blocks.retain(|b| b.len > 0);
        if self.check_blocks(key, &blocks)? != data.len() {
            return Err(ErrorClass::Intern);
        }
        let mut pos = 0;
        for b in &blocks {
            let len = b.len as usize;
            for i in 0..b.count {
                // SAFETY: `check_blocks` proved every block lies inside a
                // region its owner exposed; `data` holds their bytes in
                // order (its length was checked against the total). They
                // may overlap only if the application passed overlapping
                // buffers, hence `copy`.
                unsafe { std::ptr::copy(data.as_ptr().add(pos), b.at(i) as usize as *mut u8, len) };
                pos += len;
            }
        }
        Ok(())
    }

    pub(crate) fn start(
        &mut self,
        peer: u32,
        lost: Option<&str>,
        acked: bool,
        dest: Option<(usize, usize)>,
        owned: Vec<u8>,
    ) -> u64 {
        let id = self.next_id();
        self.track(id, peer, lost, acked, dest, owned);
        id
    }

    /// A new operation id, not tracked yet.
    pub(crate) fn next_id(&mut self) -> u64 {
        let id = self.next_op;
        self.next_op += 1;
        id
    }

    /// Tracks operation `id`, the newest id handed out (failed at once
    /// when `lost` says the peer is gone).
    pub(crate) fn track(
        &mut self,
        id: u64,
        peer: u32,
        lost: Option<&str>,
        acked: bool,
        dest: Option<(usize, usize)>,
        owned: Vec<u8>,
    ) {
        let mut p = Pending {
            peer,
            local_done: false,
            acked,
            remote_done: false,
            error: None,
            dest,
            _owned: owned,
        };
        if let Some(why) = lost {
            p.local_done = true;
            p.remote_done = true;
            p.error = Some(Error::new(ErrorClass::ProcAborted, why));
        } else {
            self.in_flight[peer as usize] += 1;
            self.in_flight_total += 1;
        }
        self.ops.insert(id, p);
    }

    pub(crate) fn finish(&mut self, id: u64, error: Option<Error>) {
        if let Some(p) = self.ops.get_mut(&id) {
            if !p.remote_done {
                p.remote_done = true;
                p.local_done = true;
                self.in_flight[p.peer as usize] -= 1;
                self.in_flight_total -= 1;
            }
            if p.error.is_none() {
                p.error = error;
            }
        }
    }

    pub(crate) fn local_done(&mut self, id: u64) {
        let Some(p) = self.ops.get_mut(&id) else {
            return;
        };
        p.local_done = true;
        if !p.acked {
            self.finish(id, None);
        }
    }

    pub(crate) fn state(&self, id: OpId) -> Option<OpState> {
        let p = self.ops.get(&id.0)?;
        Some(if p.remote_done {
            OpState::Done(p.error.clone())
        } else if p.local_done {
            OpState::LocalDone
        } else {
            OpState::Pending
        })
    }

    /// Forgets a finished operation, returning its outcome.
    pub(crate) fn take(&mut self, id: OpId) -> Option<Option<Error>> {
        if self.ops.get(&id.0)?.remote_done {
            return self.ops.remove(&id.0).map(|p| p.error);
        }
        None
    }

    /// Whether peers may access this rank's memory, or its own operations
    /// are not done: then progress between calls matters even with no
    /// request alive.
    pub(crate) fn active(&self) -> bool {
        !self.regions.is_empty() || !self.dynamic.is_empty() || self.in_flight_total > 0
    }

    pub(crate) fn in_flight(&self, peer: u32) -> u64 {
        self.in_flight[peer as usize]
    }

    pub(crate) fn send_done(&mut self, token: u64) {
        if token & REPLY_BIT != 0 {
            if let Some(v) = self.replies.remove(&(token & !(TOKEN_BIT | REPLY_BIT))) {
                if v.capacity() >= REPLY_POOL_MIN {
                    self.spare.give(v);
                }
            }
        } else {
            self.local_done(token & !TOKEN_BIT);
        }
    }

    /// Fails everything in flight to `peer`.
    pub(crate) fn peer_lost(&mut self, peer: u32, reason: &str) {
        self.filling[peer as usize] = None;
        let doomed: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, p)| p.peer == peer && !p.remote_done)
            .map(|(k, _)| k)
            .collect();
        for id in doomed {
            self.finish(
                id,
                Some(Error::new(ErrorClass::ProcAborted, reason.to_string())),
            );
        }
        // Its waiting lock requests will never be used.
        for l in self.locks.values_mut() {
            l.waiting.retain(|w| w.0 != peer);
        }
    }

    fn ack(peer: u32, sreq: u64, status: Option<ErrorClass>) -> Outgoing {
        Outgoing {
            peer,
            header: Header {
                kind: FrameKind::Ack,
                context: 0,
                src: 0,
                tag: status.map_or(0, |c| c.code()),
                len: 0,
                sreq,
                rreq: 0,
            },
            payload: std::ptr::null(),
            len: 0,
            token: None,
        }
    }

    fn reply(&mut self, peer: u32, sreq: u64, data: Vec<u8>) -> Outgoing {
        let t = self.next_reply;
        self.next_reply += 1;
        let (ptr, len) = (data.as_ptr(), data.len());
        // The vector's heap buffer does not move when the vector does.
        self.replies.insert(t, data);
        Outgoing {
            peer,
            header: Header {
                kind: FrameKind::GetReply,
                context: 0,
                src: 0,
                tag: 0,
                len: len as u64,
                sreq,
                rreq: 0,
            },
            payload: ptr,
            len,
            token: Some(TOKEN_BIT | REPLY_BIT | t),
        }
    }

    fn refuse_reply(peer: u32, sreq: u64, class: ErrorClass) -> Outgoing {
        let mut o = Self::ack(peer, sreq, Some(class));
        o.header.kind = FrameKind::GetReply;
        o
    }

    /// Answers a granted lock: an `Ack` to a peer, or completion for self.
    fn grant(&mut self, peer: u32, sreq: u64, out: &mut Vec<Outgoing>) {
        if peer == self.me {
            self.finish(sreq, None);
        } else {
            out.push(Self::ack(peer, sreq, None));
        }
    }

    /// A lock request from `peer` (possibly self) for region `key`.
    pub(crate) fn lock(
        &mut self,
        peer: u32,
        key: u32,
        exclusive: bool,
        sreq: u64,
        out: &mut Vec<Outgoing>,
    ) {
        if !self.known(key) {
            if peer == self.me {
                self.finish(sreq, Some(refused(ErrorClass::Win, peer)));
            } else {
                out.push(Self::ack(peer, sreq, Some(ErrorClass::Win)));
            }
            return;
        }
        let l = self.locks.entry(key).or_default();
        if l.waiting.is_empty() && l.grantable(exclusive) {
            l.holders += 1;
            l.exclusive = exclusive;
            self.grant(peer, sreq, out);
        } else {
            l.waiting.push_back((peer, exclusive, sreq));
        }
    }

    /// A lock release from `peer` (possibly self) for region `key`.
    pub(crate) fn unlock(&mut self, peer: u32, key: u32, sreq: u64, out: &mut Vec<Outgoing>) {
        let ok = match self.locks.get_mut(&key) {
            Some(l) if l.holders > 0 => {
                l.holders -= 1;
                if l.holders == 0 {
                    l.exclusive = false;
                }
                true
            }
            _ => false,
        };
        let status = (!ok).then_some(ErrorClass::RmaSync);
        if peer == self.me {
            self.finish(sreq, status.map(|c| refused(c, peer)));
        } else {
            out.push(Self::ack(peer, sreq, status));
        }
        let mut granted = Vec::new();
        if let Some(l) = self.locks.get_mut(&key) {
            while let Some(&(p, excl, id)) = l.waiting.front() {
                if !l.grantable(excl) {
                    break;
                }
                l.waiting.pop_front();
                l.holders += 1;
                l.exclusive = excl;
                granted.push((p, id));
            }
        }
        for (p, id) in granted {
            self.grant(p, id, out);
        }
    }

    /// Where the payload of a one-sided frame from `peer` goes.
    pub(crate) fn on_header(
        &mut self,
        peer: u32,
        h: &Header,
    ) -> std::result::Result<PayloadDest, String> {
        match h.kind {
            FrameKind::Put if h.tag & PUT_SCATTER != 0 => {
                if h.len > crate::wire::MAX_EAGER {
                    return Err(format!("scattered put of {} bytes", h.len));
                }
                Ok(PayloadDest::Buffer)
            }
            FrameKind::Put => {
                let refusal = self.check(h.context, h.rreq, h.len).err();
                self.filling[peer as usize] = Some((FrameKind::Put, h.sreq, refusal));
                Ok(match refusal {
                    None => PayloadDest::Direct {
                        ptr: h.rreq as usize as *mut u8,
                        cap: h.len as usize,
                    },
                    // Read and dropped.
                    Some(_) => PayloadDest::Direct {
                        ptr: std::ptr::NonNull::dangling().as_ptr(),
                        cap: 0,
                    },
                })
            }
            FrameKind::GetReply if h.tag != 0 => {
                // A refusal: no data.
                let class = class_from_code(h.tag);
                self.filling[peer as usize] = Some((FrameKind::GetReply, h.sreq, Some(class)));
                Ok(PayloadDest::Direct {
                    ptr: std::ptr::NonNull::dangling().as_ptr(),
                    cap: 0,
                })
            }
            FrameKind::GetReply => {
                let p = self
                    .ops
                    .get(&h.sreq)
                    .filter(|p| p.peer == peer && !p.remote_done)
                    .ok_or_else(|| format!("read reply for unknown operation {:#x}", h.sreq))?;
                let (addr, len) = p.dest.ok_or("read reply for an operation without one")?;
                if h.len != len as u64 {
                    return Err(format!(
                        "read reply of {} bytes where {len} were asked",
                        h.len
                    ));
                }
                self.filling[peer as usize] = Some((FrameKind::GetReply, h.sreq, None));
                Ok(PayloadDest::Direct {
                    ptr: addr as *mut u8,
                    cap: len,
                })
            }
            FrameKind::Acc => Ok(PayloadDest::Buffer),
            k => Err(format!("{k:?} frame with a payload")),
        }
    }

    /// A complete one-sided frame from `peer`: `data` is the payload of a
    /// buffered `Acc`, `written` what a direct payload placed.
    pub(crate) fn on_frame(
        &mut self,
        peer: u32,
        h: &Header,
        data: Option<Vec<u8>>,
        out: &mut Vec<Outgoing>,
    ) -> std::result::Result<(), String> {
        match h.kind {
            FrameKind::Put if h.tag & PUT_SCATTER != 0 => {
                let data = data.ok_or("scattered put without its payload")?;
                let refusal = self.apply_put_scatter(h.context, &data).err();
                if h.tag & 1 != 0 || refusal.is_some() {
                    out.push(Self::ack(peer, h.sreq, refusal));
                }
            }
            FrameKind::Put => {
                let (_, sreq, refusal) = self.filling[peer as usize]
                    .take()
                    .ok_or("put payload without a header")?;
                // Quiet puts are answered only when refused.
                if h.tag == 1 || refusal.is_some() {
                    out.push(Self::ack(peer, sreq, refusal));
                }
            }
            FrameKind::Sync => out.push(Self::ack(peer, h.sreq, None)),
            FrameKind::GetReply => {
                let (_, sreq, refusal) = self.filling[peer as usize]
                    .take()
                    .ok_or("read reply payload without a header")?;
                self.finish(sreq, refusal.map(|c| refused(c, peer)));
            }
            FrameKind::Ack if h.tag != 0 => {
                // A refusal: of an operation in flight, or of a quiet one
                // that counted as done once sent.
                let err = refused(class_from_code(h.tag), peer);
                match self.ops.get_mut(&h.sreq).filter(|p| p.peer == peer) {
                    Some(p) if p.remote_done => {
                        p.error.get_or_insert(err);
                    }
                    Some(_) => self.finish(h.sreq, Some(err)),
                    None => self.late.push((h.sreq, err)),
                }
            }
            FrameKind::Ack => {
                let known = self
                    .ops
                    .get(&h.sreq)
                    .is_some_and(|p| p.peer == peer && !p.remote_done);
                if !known {
                    return Err(format!(
                        "acknowledgement of unknown operation {:#x}",
                        h.sreq
                    ));
                }
                self.finish(h.sreq, None);
            }
            FrameKind::Get => match self.check(h.context, h.rreq, h.len) {
                Ok(addr) => {
                    // Read now: the reply must carry the contents as of this
                    // point in the frame order.
                    // SAFETY: `check` proved [addr, addr+len) lies inside a
                    // region its owner exposed and has not withdrawn.
                    let data = self.snapshot(unsafe {
                        std::slice::from_raw_parts(addr as *const u8, h.len as usize)
                    });
                    let o = self.reply(peer, h.sreq, data);
                    out.push(o);
                }
                Err(c) => out.push(Self::refuse_reply(peer, h.sreq, c)),
            },
            FrameKind::Acc => {
                let data = data.ok_or("accumulate without its payload")?;
                let fetch = answers_with_old(h.tag);
                match self.apply_acc(h, &data) {
                    Ok(old) if fetch => {
                        let o = self.reply(peer, h.sreq, old);
                        out.push(o);
                    }
                    Ok(_) if h.tag & ACC_QUIET != 0 => {}
                    Ok(_) => out.push(Self::ack(peer, h.sreq, None)),
                    Err(c) if fetch => out.push(Self::refuse_reply(peer, h.sreq, c)),
                    Err(c) => out.push(Self::ack(peer, h.sreq, Some(c))),
                }
            }
            FrameKind::Lock => self.lock(peer, h.context, h.tag == 1, h.sreq, out),
            FrameKind::Unlock => self.unlock(peer, h.context, h.sreq, out),
            FrameKind::Small => {
                let mut m = [0u8; 16];
                m[..8].copy_from_slice(&h.sreq.to_le_bytes());
                m[8..].copy_from_slice(&h.rreq.to_le_bytes());
                self.smalls.push_back((peer, m));
            }
            k => return Err(format!("{k:?} is not a one-sided frame")),
        }
        Ok(())
    }

    /// A copy of `src` for a reply, in a kept buffer when it is large.
    fn snapshot(&mut self, src: &[u8]) -> Vec<u8> {
        let kept = (src.len() >= REPLY_POOL_MIN)
            .then(|| self.spare.take(src.len()))
            .flatten();
        let mut v = kept.unwrap_or_else(|| Vec::with_capacity(src.len()));
        v.extend_from_slice(src);
        v
    }

    /// Applies an accumulate to the target's memory; returns the previous
    /// contents (for fetching forms).
    fn apply_acc(&mut self, h: &Header, data: &[u8]) -> std::result::Result<Vec<u8>, ErrorClass> {
        let (op, prim) = acc_untag(h.tag & 0xffff).ok_or(ErrorClass::Op)?;
        if h.tag & ACC_SCATTER != 0 {
            let fetch = h.tag & ACC_FETCH != 0;
            return self.apply_acc_scatter(h.context, op, prim, data, fetch);
        }
        let cas = h.tag & ACC_CAS != 0;
        let n = if cas { data.len() / 2 } else { data.len() };
        if cas && data.len() != 2 * prim.size() {
            return Err(ErrorClass::Type);
        }
        if prim.size() == 0 || !n.is_multiple_of(prim.size()) {
            return Err(ErrorClass::Type);
        }
        let addr = self.check(h.context, h.rreq, n as u64)?;
        // SAFETY: `check` proved [addr, addr+n) lies inside an exposed
        // region; this rank's own accesses to it are the application's
        // business, as for any one-sided target memory.
        let target = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, n) };
        // Only the fetching forms answer with the previous contents.
        let old = if answers_with_old(h.tag) {
            self.snapshot(target)
        } else {
            Vec::new()
        };
        if cas {
            if target[..] == data[..n] {
                target.copy_from_slice(&data[n..]);
            }
            return Ok(old);
        }
        match op {
            PredefOp::NoOp => {}
            PredefOp::Replace => target.copy_from_slice(data),
            _ => ops::apply(op, prim, data, target).map_err(|_| ErrorClass::Op)?,
        }
        Ok(old)
    }

    /// A scattered accumulate: checks every block, then combines each in
    /// turn; the previous contents of all (when `fetch`), packed in table order.
    fn apply_acc_scatter(
        &mut self,
        key: u32,
        op: PredefOp,
        prim: Prim,
        payload: &[u8],
        fetch: bool,
    ) -> std::result::Result<Vec<u8>, ErrorClass> {
        let (mut blocks, data) = decode_table(payload)?;
        // As for a put: empty blocks are not range-checked, so not used.
        blocks.retain(|b| b.len > 0);
        let total = self.check_blocks(key, &blocks)?;
        if op != PredefOp::NoOp && data.len() != total {
            return Err(ErrorClass::Intern);
        }
        let size = prim.size();
        if size == 0 {
            return Err(ErrorClass::Type);
        }
        // SAFETY: `check_blocks` proved every block lies inside an exposed
        // region (this rank's own accesses to it are the application's
        // business, as for any one-sided target).
        let target = |b: &Strided, i: u32| unsafe {
            std::slice::from_raw_parts_mut(b.at(i) as usize as *mut u8, b.len as usize)
        };
        let combines = !matches!(op, PredefOp::NoOp | PredefOp::Replace);
        if combines
            && blocks
                .iter()
                .any(|b| !(b.len as usize).is_multiple_of(size))
        {
            // A pair type with padding (MPI_SHORT_INT) lies in blocks that
            // are not whole elements: they are gathered into whole ones,
            // combined, and put back.
            if !total.is_multiple_of(size) {
                return Err(ErrorClass::Type);
            }
            let mut whole = Vec::with_capacity(total);
            for b in &blocks {
                for i in 0..b.count {
                    whole.extend_from_slice(target(b, i));
                }
            }
            let old = if fetch { whole.clone() } else { Vec::new() };
            ops::apply(op, prim, data, &mut whole).map_err(|_| ErrorClass::Op)?;
            let mut pos = 0;
            for b in &blocks {
                for i in 0..b.count {
                    let t = target(b, i);
                    t.copy_from_slice(&whole[pos..pos + t.len()]);
                    pos += t.len();
                }
            }
            return Ok(old);
        }
        let mut old = Vec::with_capacity(if fetch { total } else { 0 });
        let mut pos = 0;
        for b in &blocks {
            let len = b.len as usize;
            for i in 0..b.count {
                let target = target(b, i);
                if fetch {
                    old.extend_from_slice(target);
                }
                match op {
                    PredefOp::NoOp => {}
                    PredefOp::Replace => target.copy_from_slice(&data[pos..pos + len]),
                    _ => ops::apply(op, prim, &data[pos..pos + len], target)
                        .map_err(|_| ErrorClass::Op)?,
                }
                pos += len;
            }
        }
        Ok(old)
    }

    /// Local accumulate on self (no frame).
    pub(crate) fn acc_tag_for(op: PredefOp, prim: Prim, fetch: bool, cas: bool) -> Option<i32> {
        let t = acc_tag(op, prim)?;
        let quiet = !fetch && !cas;
        Some(
            t | if fetch { ACC_FETCH } else { 0 }
                | if cas { ACC_CAS } else { 0 }
                | if quiet { ACC_QUIET } else { 0 },
        )
    }

    /// Carries out a one-sided frame addressed to this very rank, as if it
    /// had arrived, without a transport.
    pub(crate) fn on_self(
        &mut self,
        h: &Header,
        data: &[u8],
        out: &mut Vec<Outgoing>,
    ) -> std::result::Result<(), String> {
        let me = self.me;
        match h.kind {
            FrameKind::Put if h.tag & PUT_SCATTER != 0 => {
                let r = self.apply_put_scatter(h.context, data);
                self.finish(h.sreq, r.err().map(|c| refused(c, me)));
            }
            FrameKind::Put => {
                let r = self.check(h.context, h.rreq, h.len);
                if let Ok(addr) = r {
                    // SAFETY: `check` proved the target range is inside an
                    // exposed region; `data` is the caller's buffer of
                    // `len` bytes; they may overlap only if the application
                    // passes overlapping buffers, hence `copy`.
                    unsafe {
                        std::ptr::copy(data.as_ptr(), addr as *mut u8, data.len());
                    }
                }
                self.finish(h.sreq, r.err().map(|c| refused(c, me)));
            }
            FrameKind::Get => {
                let p = self.ops.get(&h.sreq).and_then(|p| p.dest);
                let r = self.check(h.context, h.rreq, h.len);
                if let (Ok(addr), Some((dest, len))) = (r, p) {
                    // SAFETY: source inside an exposed region (checked);
                    // destination is the caller's buffer of `len` bytes.
                    unsafe { std::ptr::copy(addr as *const u8, dest as *mut u8, len) };
                }
                self.finish(h.sreq, r.err().map(|c| refused(c, me)));
            }
            FrameKind::Acc => {
                let fetch = answers_with_old(h.tag);
                let r = self.apply_acc(h, data);
                if let (true, Ok(old), Some((dest, len))) =
                    (fetch, &r, self.ops.get(&h.sreq).and_then(|p| p.dest))
                {
                    let n = len.min(old.len());
                    // SAFETY: the destination is the caller's buffer of `len` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(old.as_ptr(), dest as *mut u8, n) };
                }
                self.finish(h.sreq, r.err().map(|c| refused(c, me)));
            }
            FrameKind::Lock => self.lock(me, h.context, h.tag == 1, h.sreq, out),
            FrameKind::Unlock => self.unlock(me, h.context, h.sreq, out),
            FrameKind::Sync => self.finish(h.sreq, None),
            k => return Err(format!("{k:?} is not a one-sided frame")),
        }
        Ok(())
    }
}

/// Whether an accumulate's tag asks for the previous contents back
/// (fetching forms and compare-and-swap).
fn answers_with_old(tag: i32) -> bool {
    tag & (ACC_FETCH | ACC_CAS) != 0
}

/// Reply buffers kept: at most so many bytes and buffers, none smaller than
/// `REPLY_POOL_MIN` (below it malloc's bins serve as well).
const REPLY_POOL_BYTES: usize = 64 << 20;
const REPLY_POOL_COUNT: usize = 64;
const REPLY_POOL_MIN: usize = 64 << 10;

fn reply_pool() -> BufPool {
    BufPool::new(REPLY_POOL_BYTES, REPLY_POOL_COUNT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rma::encoding::encode_table;

    /// Operations that left at once are never tracked (`put_untracked`):
    /// ids handed out around them stay in order, they have no state, and
    /// a refusal of one is kept as a late error.
    #[test]
    fn untracked_ids_leave_no_state_and_refusals_come_late() {
        let mut r = Remote::new(0, 2);
        let untracked = r.next_id();
        let tracked = r.next_id();
        r.track(tracked, 1, None, false, None, Vec::new());
        let after = r.start(1, None, false, None, Vec::new());
        assert!(untracked < tracked && tracked < after);
        assert_eq!(r.state(OpId(untracked)), None);
        assert_eq!(r.state(OpId(tracked)), Some(OpState::Pending));
        assert_eq!(r.in_flight(1), 2, "only tracked operations count");
        let mut out = Vec::new();
        let refusal = Header {
            kind: FrameKind::Ack,
            context: 0,
            src: 0,
            tag: ErrorClass::RmaRange.code(),
            len: 0,
            sreq: untracked,
            rreq: 0,
        };
        r.on_frame(1, &refusal, None, &mut out).unwrap();
        assert_eq!(r.late.len(), 1);
        assert_eq!(r.late[0].0, untracked);
        assert_eq!(r.late[0].1.class, ErrorClass::RmaRange);
        // The tracked ones are untouched and finish as usual.
        r.local_done(tracked);
        assert_eq!(r.state(OpId(tracked)), Some(OpState::Done(None)));
        assert_eq!(r.state(OpId(after)), Some(OpState::Pending));
    }

    #[test]
    fn range_checks_refuse_outside_and_unknown() {
        let mut r = Remote::new(0, 2);
        let mut mem = vec![0u8; 64];
        let key = r.expose(mem.as_mut_ptr(), 64);
        let base = mem.as_ptr() as u64;
        assert!(r.check(key, base, 64).is_ok());
        assert!(r.check(key, base + 8, 56).is_ok());
        assert_eq!(r.check(key, base + 8, 57), Err(ErrorClass::RmaRange));
        assert_eq!(r.check(key, base - 1, 1), Err(ErrorClass::RmaRange));
        assert_eq!(r.check(key, u64::MAX, 2), Err(ErrorClass::RmaRange));
        assert_eq!(r.check(key + 1, base, 1), Err(ErrorClass::Win));
        assert!(r.unexpose(key));
        assert_eq!(r.check(key, base, 1), Err(ErrorClass::Win));
        // Keys are not reused.
        let key2 = r.expose(mem.as_mut_ptr(), 64);
        assert_ne!(key, key2);
    }

    #[test]
    fn dynamic_ranges_may_span_adjacent_attachments() {
        let mut r = Remote::new(0, 2);
        let mut mem = vec![0u8; 64];
        let key = r.expose_dynamic();
        let base = mem.as_mut_ptr();
        assert!(r.attach(key, base, 16));
        // SAFETY: both inside `mem`.
        assert!(r.attach(key, unsafe { base.add(16) }, 16));
        assert!(r.attach(key, unsafe { base.add(40) }, 8));
        let b = base as u64;
        assert!(r.check(key, b + 8, 24).is_ok());
        assert_eq!(r.check(key, b + 8, 25), Err(ErrorClass::RmaRange));
        assert_eq!(r.check(key, b + 30, 12), Err(ErrorClass::RmaRange));
        assert!(r.check(key, b + 40, 8).is_ok());
    }

    #[test]
    fn scattered_puts_write_strided_blocks_or_nothing() {
        let mut r = Remote::new(0, 2);
        let mut mem = vec![0u8; 64];
        let key = r.expose(mem.as_mut_ptr(), 64);
        let base = mem.as_ptr() as u64;
        // Two bytes every 8 from the end backwards, then one byte at 1.
        let blocks = [
            Strided {
                addr: base + 56,
                len: 2,
                count: 3,
                stride: -8,
            },
            Strided {
                addr: base + 1,
                len: 1,
                count: 1,
                stride: 0,
            },
        ];
        let mut payload = Vec::new();
        encode_table(&blocks, &mut payload);
        payload.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(r.apply_put_scatter(key, &payload), Ok(()));
        let mut want = vec![0u8; 64];
        want[56..58].copy_from_slice(&[1, 2]);
        want[48..50].copy_from_slice(&[3, 4]);
        want[40..42].copy_from_slice(&[5, 6]);
        want[1] = 7;
        assert_eq!(mem, want);
        // A last block past the region: refused, and nothing written.
        let outside = [
            Strided {
                addr: base,
                len: 4,
                count: 1,
                stride: 0,
            },
            Strided {
                addr: base + 8,
                len: 4,
                count: 15,
                stride: 4,
            },
        ];
        let mut payload = Vec::new();
        encode_table(&outside, &mut payload);
        payload.extend_from_slice(&[9u8; 64]);
        assert_eq!(
            r.apply_put_scatter(key, &payload),
            Err(ErrorClass::RmaRange)
        );
        assert_eq!(mem, want);
        // A stride that wraps around the address space is refused.
        let wrap = [Strided {
            addr: base,
            len: 1,
            count: 3,
            stride: i64::MIN,
        }];
        let mut payload = Vec::new();
        encode_table(&wrap, &mut payload);
        payload.extend_from_slice(&[9u8; 3]);
        assert_eq!(
            r.apply_put_scatter(key, &payload),
            Err(ErrorClass::RmaRange)
        );
        assert_eq!(mem, want);
        // Data that does not match the table is refused too.
        let mut payload = Vec::new();
        encode_table(&blocks, &mut payload);
        payload.extend_from_slice(&[1, 2, 3]);
        assert!(r.apply_put_scatter(key, &payload).is_err());
        assert_eq!(mem, want);
    }

    #[test]
    fn locks_grant_in_order_and_exclude() {
        let mut r = Remote::new(0, 3);
        let mut mem = vec![0u8; 8];
        let key = r.expose(mem.as_mut_ptr(), 8);
        let mut out = Vec::new();
        r.lock(1, key, true, 10, &mut out);
        assert_eq!(out.len(), 1, "free lock granted at once");
        r.lock(2, key, false, 11, &mut out);
        r.lock(2, key, true, 12, &mut out);
        assert_eq!(out.len(), 1, "held exclusively: both wait");
        out.clear();
        r.unlock(1, key, 13, &mut out);
        // Ack of the unlock, then the shared grant; the exclusive one waits.
        let acks: Vec<u64> = out.iter().map(|o| o.header.sreq).collect();
        assert_eq!(acks, vec![13, 11]);
        out.clear();
        r.unlock(2, key, 14, &mut out);
        let acks: Vec<u64> = out.iter().map(|o| o.header.sreq).collect();
        assert_eq!(acks, vec![14, 12]);
        out.clear();
        // Unlock without a lock is a synchronisation error.
        r.unlock(2, key, 15, &mut out);
        r.unlock(1, key, 16, &mut out);
        assert_eq!(out[1].header.tag, ErrorClass::RmaSync.code());
    }

    #[test]
    fn accumulate_applies_and_fetches() {
        let mut r = Remote::new(0, 2);
        let mut mem = [1i32, 2, 3, 4];
        let key = r.expose(mem.as_mut_ptr().cast(), 16);
        let add: Vec<u8> = [10i32, 20, 30, 40]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let h = Header {
            kind: FrameKind::Acc,
            context: key,
            src: 0,
            tag: Remote::acc_tag_for(PredefOp::Sum, Prim::I32, true, false).unwrap(),
            len: 16,
            sreq: 1,
            rreq: mem.as_ptr() as u64,
        };
        let old = r.apply_acc(&h, &add).unwrap();
        assert_eq!(old[..4], 1i32.to_le_bytes());
        assert_eq!(mem, [11, 22, 33, 44]);
        // Compare-and-swap: matches the first element, swaps it.
        let mut cas = 11i32.to_le_bytes().to_vec();
        cas.extend(99i32.to_le_bytes());
        let h2 = Header {
            len: 8,
            tag: Remote::acc_tag_for(PredefOp::Replace, Prim::I32, false, true).unwrap(),
            ..h
        };
        let old = r.apply_acc(&h2, &cas).unwrap();
        assert_eq!(old, 11i32.to_le_bytes());
        assert_eq!(mem[0], 99);
        // Beyond the region: refused, memory untouched.
        let h3 = Header {
            rreq: mem.as_ptr() as u64 + 8,
            ..h
        };
        assert_eq!(r.apply_acc(&h3, &add), Err(ErrorClass::RmaRange));
        assert_eq!(mem, [99, 22, 33, 44]);
    }

    /// A scattered table of one empty block, and a region to aim it at.
    fn empty_block_payload(addr: u64, count: u32) -> Vec<u8> {
        let mut payload = Vec::new();
        encode_table(
            &[Strided {
                addr,
                len: 0,
                count,
                stride: 0,
            }],
            &mut payload,
        );
        payload
    }

    /// Empty blocks are not range-checked (they name no memory), so their
    /// address may be anything, null included: the apply loops made a
    /// pointer (`ptr::copy`, `slice::from_raw_parts_mut`) from it anyway,
    /// undefined for null, and an abort where those checks are compiled in.
    #[test]
    fn scattered_empty_blocks_at_null_touch_nothing() {
        let mut r = Remote::new(0, 2);
        let mut mem = vec![5u8; 64];
        let key = r.expose(mem.as_mut_ptr(), 64);
        let payload = empty_block_payload(0, 3);
        assert_eq!(r.apply_put_scatter(key, &payload), Ok(()));
        let old = r
            .apply_acc_scatter(key, PredefOp::Replace, Prim::I32, &payload, true)
            .unwrap();
        assert!(old.is_empty());
        assert_eq!(mem, [5u8; 64]);
    }

    /// An empty block repeated 2^32 - 1 times passes the checks at no
    /// cost; the apply loops then went through every repetition, holding
    /// the engine for seconds.
    #[test]
    fn scattered_empty_block_with_huge_count_returns_at_once() {
        let mut r = Remote::new(0, 2);
        let mut mem = vec![5u8; 64];
        let key = r.expose(mem.as_mut_ptr(), 64);
        let payload = empty_block_payload(mem.as_ptr() as u64, u32::MAX);
        let start = std::time::Instant::now();
        assert_eq!(r.apply_put_scatter(key, &payload), Ok(()));
        assert_eq!(
            r.apply_acc_scatter(key, PredefOp::Replace, Prim::I32, &payload, false),
            Ok(Vec::new())
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(mem, [5u8; 64]);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        fn any_strided() -> impl Strategy<Value = Strided> {
            (any::<u64>(), any::<u32>(), any::<u32>(), any::<i64>()).prop_map(
                |(addr, len, count, stride)| Strided {
                    addr,
                    len,
                    count,
                    stride,
                },
            )
        }

        /// Payloads whose count field is often small enough for the table
        /// to fit, so that decoding gets past the length check.
        fn scattered_payload() -> impl Strategy<Value = Vec<u8>> {
            (
                proptest::collection::vec(any::<u8>(), 0..200),
                prop_oneof![Just(None), (0u32..10).prop_map(Some), Just(Some(u32::MAX))],
            )
                .prop_map(|(mut p, count)| {
                    if let (Some(n), true) = (count, p.len() >= 4) {
                        p[..4].copy_from_slice(&n.to_le_bytes());
                    }
                    p
                })
        }

        /// Bytes of the test buffer; the region is its middle half, the rest
        /// a guard that a scattered put must never touch.
        const BUF: usize = 256;
        const REGION: std::ops::Range<usize> = 64..192;

        /// A block near the region: inside, straddling its ends or outside,
        /// with now and then counts and strides far out of range.
        fn block_near_region() -> impl Strategy<Value = (i64, u32, u32, i64)> {
            (
                prop_oneof![3 => 64i64..160, 1 => -80i64..220],
                prop_oneof![3 => 1u32..12, 1 => 0u32..48],
                prop_oneof![6 => 0u32..5, 1 => Just(u32::MAX)],
                prop_oneof![6 => -24i64..24, 2 => -64i64..64, 1 => Just(i64::MIN), 1 => Just(i64::MAX)],
            )
        }

        /// Writes the blocks into a copy of `buf` the plain way; `None` if
        /// any byte falls outside the region.
        fn model_put(buf: &[u8], base: u64, blocks: &[Strided], data: &[u8]) -> Option<Vec<u8>> {
            let mut out = buf.to_vec();
            let mut pos = 0;
            // Empty blocks name no memory and are skipped, wherever they point.
            for b in blocks.iter().filter(|b| b.len > 0) {
                for i in 0..u64::from(b.count) {
                    let at = i128::from(b.addr) + i128::from(i) * i128::from(b.stride);
                    let off = usize::try_from(at - i128::from(base)).ok()?;
                    let len = b.len as usize;
                    if off < REGION.start || off + len > REGION.end {
                        return None;
                    }
                    out[off..off + len].copy_from_slice(data.get(pos..pos + len)?);
                    pos += len;
                }
            }
            (pos == data.len()).then_some(out)
        }

        proptest! {
            #![proptest_config(config())]

            /// Any payload decodes or is refused; what decodes is exactly
            /// the table's encoding followed by the data.
            #[test]
            fn prop_decode_table_is_total_and_exact(payload in scattered_payload()) {
                if let Ok((blocks, data)) = decode_table(&payload) {
                    let mut again = Vec::new();
                    encode_table(&blocks, &mut again);
                    again.extend_from_slice(data);
                    prop_assert_eq!(again, payload);
                }
            }

            #[test]
            fn prop_table_round_trips(
                blocks in proptest::collection::vec(any_strided(), 0..12),
                data in proptest::collection::vec(any::<u8>(), 0..64),
            ) {
                let mut payload = Vec::new();
                encode_table(&blocks, &mut payload);
                payload.extend_from_slice(&data);
                let (got, rest) = decode_table(&payload).unwrap();
                prop_assert_eq!(got, blocks);
                prop_assert_eq!(rest, &data[..]);
            }

            /// A scattered put from a peer writes exactly its blocks when all
            /// lie inside the region and the data matches, and nothing
            /// otherwise: never a byte outside the region, in a window of
            /// one region or of two attached pieces that touch.
            #[test]
            fn prop_scattered_put_writes_inside_the_region_or_nothing(
                raw in proptest::collection::vec(block_near_region(), 1..5),
                dynamic in any::<bool>(),
                data_extra in prop_oneof![4 => Just(0isize), 1 => -3isize..3],
                fill in any::<u8>(),
            ) {
                let mut mem = vec![0u8; BUF];
                let base = mem.as_ptr() as u64;
                let ptr = mem.as_mut_ptr();
                let mut r = Remote::new(0, 2);
                let key = if dynamic {
                    let key = r.expose_dynamic();
                    let mid = (REGION.start + REGION.end) / 2;
                    // SAFETY: both pointers stay inside `mem`.
                    r.attach(key, unsafe { ptr.add(REGION.start) }, mid - REGION.start);
                    r.attach(key, unsafe { ptr.add(mid) }, REGION.end - mid);
                    key
                } else {
                    // SAFETY: the pointer stays inside `mem`.
                    r.expose(unsafe { ptr.add(REGION.start) }, REGION.len())
                };
                let blocks: Vec<Strided> = raw
                    .iter()
                    .map(|&(off, len, count, stride)| Strided {
                        addr: base.wrapping_add(off as u64),
                        len,
                        // A dynamic window checks each block: keep counts small.
                        count: if dynamic { count.min(6) } else { count },
                        stride,
                    })
                    .collect();
                let want: u64 = blocks.iter().map(|b| u64::from(b.len) * u64::from(b.count)).sum();
                let data_len = (want.min(4096) as isize + data_extra).max(0) as usize;
                let data: Vec<u8> = (0..data_len).map(|i| fill.wrapping_add(i as u8)).collect();
                let mut payload = Vec::new();
                encode_table(&blocks, &mut payload);
                payload.extend_from_slice(&data);
                let before = mem.clone();
                let result = r.apply_put_scatter(key, &payload);
                let expected = model_put(&before, base, &blocks, &data);
                match (&result, expected) {
                    (Ok(()), Some(model)) => prop_assert_eq!(&mem, &model),
                    (Err(_), None) => prop_assert_eq!(&mem, &before),
                    (_, model) => prop_assert!(
                        false,
                        "put gave {:?} where the model says {}",
                        result,
                        if model.is_some() { "it fits" } else { "refuse" }
                    ),
                }
            }
        }
    }
}

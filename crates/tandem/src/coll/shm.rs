//! Small blocking collectives on shared flags, for communicators whose
//! ranks all share this host's memory: no messages, no schedule.
//!
//! At its first such call a communicator maps a segment with one slot per
//! member. A slot holds a sequence number, which only its member writes
//! (one release store per call: "my part of call `s` is here"), and
//! buffers for the parts themselves. A call publishes, then waits for the
//! sequence numbers it needs and reads its peers' buffers in place:
//!
//! * barrier: publish; wait for every member.
//! * allreduce and reduce: copy the input into the own buffer, publish;
//!   wait for every member and combine the buffers in rank order, so every
//!   rank gets the same bits whatever the operation (reduce: only the root
//!   waits and combines).
//! * broadcast and scatter: the root copies the data (scatter: every
//!   block) into its buffer and publishes; the others publish (they took
//!   part) and copy out theirs once the root's number shows it.
//! * allgather (and allgatherv, whose counts every member knows), gather
//!   and all-to-all: every member publishes its block (all-to-all: its
//!   whole row); each reads its blocks from the others' buffers (gather:
//!   only the root waits and reads).
//!
//! A slot's buffers serve calls in turn ([`BUFFERS`] of them); before
//! writing one a member waits until every member has reached the call
//! after the one that used it last, so everyone has finished reading it.
//! Waiting goes through the point-to-point wait (spin, yield, sleep; other
//! requests and schedules keep moving) with the sleep armed before the
//! last look, and every publication wakes the members that sleep, so no
//! publication is missed; a member that dies ends the wait with an error
//! naming it.
//!
//! Members of a correct program decide alike whether a call runs here (the
//! communicator, the operation and its byte count, the parameters). When
//! their counts disagree across the size limit they would not, so every
//! blocking call of a kind served here is numbered on the flags, also one
//! run by messages, which a member announces in its buffer's header: a
//! member on one path that waits for one on the other reads it there and
//! fails the call instead of waiting for ever.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::select::OpKind;
use super::CollCall;
use crate::error::{Error, ErrorClass, Result};
use crate::ops::ReducerRef;
use crate::runtime::{CommId, Runtime};
use crate::shared_mapping::{memfd, SharedMapping};

/// Bytes of a slot's header (its sequence number, alone in a cache line)
/// and of a buffer's (the byte count its member published).
const LINE: usize = 64;

/// Where a buffer's header keeps, after the byte count of its data, the
/// number of the last call that this member ran by messages in that
/// buffer's turn, and the bytes it contributed to it. Calls on the flags
/// leave them alone, so a member at call `s` reads `s` there only if the
/// other ran `s` by messages (an older call of the turn is `s - BUFFERS`
/// or before, and a newer one waits until this member leaves `s`).
const HEADER_CALL: usize = 8;
const HEADER_PART: usize = 16;

/// Buffers per slot, used by calls in turn: a member may be this many
/// calls less one ahead of the slowest (a broadcast's root, a reduce's
/// other members), which keeps ranks sharing a core from waiting on each
/// other at every call (broadcasts of 8 bytes, 4 ranks on 2 cores: 0.55-0.97
/// us per call with 32 against 1.08-1.88 with 8, interleaved). A slot is
/// then 66 KiB with the default limit, faulted in when the segment is set
/// up.
const BUFFERS: u64 = 32;

/// A communicator's shared-flag state.
pub(crate) enum ShmState {
    /// Some member is elsewhere, or the segment could not be mapped.
    Unavailable,
    Ready(ShmColl),
}

pub(crate) struct ShmColl {
    /// Keeps the slots mapped.
    _map: SharedMapping,
    view: View,
    /// Calls made so far (the number the next one publishes, less one).
    seq: u64,
    /// World rank of each member.
    world: Arc<[u32]>,
}

// SAFETY: the view points into the mapping the value owns (and keeps until
// dropped); the library state, and so this, moves between threads only
// under the library's lock, and what the slots hold is synchronised by
// the sequence numbers' release and acquire.
unsafe impl Send for ShmColl {}

/// Where the slots are (copied into wait conditions).
#[derive(Clone, Copy)]
struct View {
    base: *mut u8,
    n: u32,
    me: u32,
    /// Bytes of one buffer's data.
    data: usize,
    /// The size limit (`coll_shm_max`), for messages.
    max: usize,
    /// Bytes of one member's slot.
    slot: usize,
}

impl View {
    /// Bytes of a buffer's data, of a slot and of the segment, for `data`
    /// bytes at most among `n` members (`None` past the address space).
    fn layout(n: u32, data: usize) -> Option<(usize, usize, usize)> {
        let data = data.checked_next_multiple_of(LINE)?;
        let slot = data
            .checked_add(LINE)?
            .checked_mul(BUFFERS as usize)?
            .checked_add(LINE)?;
        Some((data, slot, slot.checked_mul(n as usize)?))
    }

    fn seq(&self, i: u32) -> &AtomicU64 {
        // SAFETY: slot `i` lies inside the mapping (i < n), its first 8
        // bytes are 8-aligned (the mapping is page-aligned, slots are whole
        // cache lines) and only ever accessed atomically.
        unsafe { &*self.base.add(i as usize * self.slot).cast::<AtomicU64>() }
    }

    /// Start of member `i`'s buffer for call `s` (its header; data after).
    fn buffer(&self, i: u32, s: u64) -> *mut u8 {
        let turn = (s % BUFFERS) as usize;
        // In bounds: i < n, and a slot holds its header and every buffer.
        self.base
            .wrapping_add(i as usize * self.slot + LINE + turn * (LINE + self.data))
    }

    /// Whether member `i` ran call `s` by messages.
    ///
    /// # Safety
    /// Member `i`'s number must have been read as `s` or later with
    /// acquire, and this member must not have reached call `s + 1` (so the
    /// member is fewer than [`BUFFERS`] calls past `s`, and its buffer of
    /// `s`'s turn is still that call's).
    unsafe fn ran_by_messages(&self, i: u32, s: u64) -> bool {
        // SAFETY: the header lies in the slot; a member writes it (for
        // calls by messages) before publishing, and not again before this
        // member passes call `s` (see HEADER_CALL).
        unsafe { self.buffer(i, s).add(HEADER_CALL).cast::<u64>().read() == s }
    }

    /// The bytes member `i` contributes to call `s`, which it ran by
    /// messages.
    ///
    /// # Safety
    /// As [`View::ran_by_messages`], which must have said so.
    unsafe fn part_by_messages(&self, i: u32, s: u64) -> usize {
        let b = self.buffer(i, s);
        // SAFETY: the header lies in the slot; the member wrote it before
        // publishing (the caller's acquire pairs with its release) and
        // does not write it again before this member passes call `s`.
        let part = unsafe { b.add(HEADER_PART).cast::<u64>().read() };
        usize::try_from(part).unwrap_or(usize::MAX)
    }

    fn reached(&self, i: u32, s: u64) -> bool {
        self.seq(i).load(Ordering::Acquire) >= s
    }
}

/// What a member reads in another's buffer.
struct Part<'a> {
    len: usize,
    bytes: &'a [u8],
}

impl Runtime {
    /// Runs `call` on shared flags if it qualifies. A call of a kind the
    /// flags serve, on a communicator that has them, but over the size
    /// limit is still numbered and announced ("by messages"), so that
    /// members whose counts straddle the limit find each other out
    /// instead of waiting on different paths.
    ///
    /// # Safety
    /// As [`Runtime::coll_start`] (the pointers need only last for the call).
    pub(crate) unsafe fn coll_shm(&mut self, comm: CommId, call: &CollCall) -> ShmPath {
        let max = self.colls.shm_max;
        if max == 0 {
            return ShmPath::Messages;
        }
        let Ok(c) = self.comm(comm) else {
            return ShmPath::Messages;
        };
        let n = c.group.len();
        if c.is_inter() || n < 2 {
            return ShmPath::Messages;
        }
        // The kind, and the bytes a member publishes (past the address
        // space: more than any limit).
        let (kind, part) = match *call {
            CollCall::Barrier => (OpKind::Barrier, Some(0)),
            CollCall::Bcast { len, .. } => (OpKind::Bcast, Some(len)),
            CollCall::Reduce { len, .. } => (OpKind::Reduce, Some(len)),
            CollCall::Allreduce { len, .. } => (OpKind::Allreduce, Some(len)),
            CollCall::Gather { len, .. } => (OpKind::Gather, Some(len)),
            CollCall::Allgather { len, .. } => (OpKind::Allgather, Some(len)),
            // Every member knows every count, so all decide alike.
            CollCall::Allgatherv {
                ref counts,
                ref displs,
                ..
            } if counts.len() == n && displs.len() == n => {
                (OpKind::Allgatherv, counts.iter().copied().max())
            }
            CollCall::Scatter { len, .. } => (OpKind::Scatter, len.checked_mul(n)),
            CollCall::Alltoall { len, .. } => (OpKind::Alltoall, len.checked_mul(n)),
            _ => return ShmPath::Messages,
        };
        let part = part.unwrap_or(usize::MAX);
        if self.colls.selection.is_forced(kind) {
            return ShmPath::Messages;
        }
        let cid = c.cid;
        // One look-up per call once the communicator has its state. Every
        // member sets it up at the same call, its first of a kind the flags
        // serve, whatever its size.
        let (seq, view, world) = match self.colls.shm.get_mut(&cid) {
            Some(ShmState::Ready(s)) => {
                s.seq += 1;
                (s.seq, s.view, s.world.clone())
            }
            Some(ShmState::Unavailable) => return ShmPath::Messages,
            None => {
                // Marked first: the set-up's own collectives take the messages.
                self.colls.shm.insert(cid, ShmState::Unavailable);
                let mut s = match self.shm_setup(comm, max) {
                    Ok(Some(s)) => s,
                    Ok(None) => return ShmPath::Messages,
                    Err(e) => return ShmPath::Done(Err(e)),
                };
                s.seq = 1;
                let first = (s.seq, s.view, s.world.clone());
                self.colls.shm.insert(cid, ShmState::Ready(s));
                first
            }
        };
        if part > max {
            let announced = self.shm_publish(view, seq, &world, Some(part), None);
            return match announced {
                Ok(()) => ShmPath::Announced(Straddle { view, seq, part }),
                Err(e) => ShmPath::Done(Err(e)),
            };
        }
        self.p2p.engine().counters_mut().coll_flag_calls += 1;
        // SAFETY: forwarded from the caller.
        ShmPath::Done(unsafe { self.shm_run(call, seq, view, &world) })
    }

    /// Maps the communicator's segment at every member (a collective over
    /// the message algorithms); `None` if some member is not on this
    /// host's shared memory or some member could not map it.
    fn shm_setup(&mut self, comm: CommId, max: usize) -> Result<Option<ShmColl>> {
        let c = self.comm(comm)?;
        let (me, world) = (c.rank, c.group.clone());
        let n = world.len() as u32;
        if !self.p2p.all_shm_peers(&world) {
            return Ok(None);
        }
        // Every member computes the same, so all give up alike.
        let Some((data, slot, len)) = View::layout(n, max) else {
            return Ok(None);
        };
        // Member 0 makes the file; the others map it through /proc.
        let mut made = None;
        let mut about = [0u64; 2];
        if me == 0 {
            if let Ok(fd) = memfd(c"tandem-coll-shm", len) {
                about = [u64::from(std::process::id()), fd.as_raw_fd() as u64];
                made = Some(fd);
            }
        }
        // SAFETY: `about` outlives the broadcast, which completes here.
        unsafe {
            self.coll_scheduled(
                comm,
                CollCall::Bcast {
                    buf: about.as_mut_ptr().cast(),
                    len: 16,
                    root: 0,
                },
            )?
        };
        let map = match (&made, about) {
            (Some(fd), _) => SharedMapping::new(fd.as_raw_fd(), len).ok(),
            (None, [0, _]) => None,
            (None, [pid, fd]) => SharedMapping::of_process(pid as u32, fd as i32, len).ok(),
        };
        // Everyone maps it, or nobody uses it; member 0's descriptor may go
        // once all have tried (the mappings keep the file). (The message
        // algorithms run it: the communicator is marked unavailable.)
        let failed = self.allreduce_max_u32(comm, u32::from(map.is_none()))?;
        drop(made);
        let Some(map) = map.filter(|_| failed == 0) else {
            return Ok(None);
        };
        // Its pages now, in one call, rather than a fault per page spread
        // over the first calls (each call uses the next buffer: on this
        // project's VM a 2-rank all-to-all of 256 bytes took 5-6 us for its
        // first 20 calls, 0.4 after).
        map.populate(0, len);
        let view = View {
            base: map.base(),
            n,
            me,
            data,
            max,
            slot,
        };
        Ok(Some(ShmColl {
            _map: map,
            view,
            seq: 0,
            world,
        }))
    }

    /// Call number `seq` of the communicator.
    ///
    /// # Safety
    /// As [`Runtime::coll_shm`].
    #[inline(always)]
    unsafe fn shm_run(&mut self, call: &CollCall, seq: u64, v: View, world: &[u32]) -> Result<()> {
        let flags = None;
        let all = |_: u32| true;
        match *call {
            CollCall::Barrier => {
                self.shm_publish(v, seq, world, flags, None)?;
                self.shm_wait(v, seq, world, all)
            }
            CollCall::Allreduce {
                send,
                recv,
                len,
                ref op,
            } => {
                let input = send.unwrap_or(recv.cast_const());
                self.shm_publish(v, seq, world, flags, Some((input, len)))?;
                self.shm_wait(v, seq, world, all)?;
                // SAFETY: `recv` holds `len` bytes (the caller's promise).
                unsafe { combine(v, seq, op, recv, len) }
            }
            CollCall::Reduce {
                send,
                recv,
                len,
                ref op,
                root,
            } => {
                let input = match send {
                    Some(p) => p,
                    None if v.me == root => recv.cast_const(),
                    None => {
                        return Err(Error::new(
                            ErrorClass::Buffer,
                            "MPI_IN_PLACE is the root's alone in a reduce",
                        ))
                    }
                };
                self.shm_publish(v, seq, world, flags, Some((input, len)))?;
                if v.me != root {
                    return Ok(());
                }
                self.shm_wait(v, seq, world, all)?;
                // SAFETY: as for allreduce (at the root).
                unsafe { combine(v, seq, op, recv, len) }
            }
            CollCall::Bcast { buf, len, root } => {
                if v.me == root {
                    self.shm_publish(v, seq, world, flags, Some((buf, len)))?;
                    return Ok(());
                }
                self.shm_publish(v, seq, world, flags, None)?;
                self.shm_wait(v, seq, world, |i| i == root)?;
                // SAFETY: the root's buffer is published (its number was
                // read with acquire) and not written again before this
                // member reaches the next call.
                let part = unsafe { read(v, root, seq)? };
                let n = part.len.min(len);
                // SAFETY: `buf` holds `len` bytes (the caller's promise);
                // the part holds `part.len`.
                unsafe { std::ptr::copy_nonoverlapping(part.bytes.as_ptr(), buf, n) };
                disagree(root, part.len, len)
            }
            CollCall::Allgather { send, recv, len } => {
                // In place, this member's block of `recv` is its part.
                let input = send.unwrap_or(recv.wrapping_add(v.me as usize * len).cast_const());
                self.shm_publish(v, seq, world, flags, Some((input, len)))?;
                self.shm_wait(v, seq, world, all)?;
                // SAFETY: `recv` holds n blocks of `len` bytes, `send` one
                // (the caller's promise); every part is published.
                unsafe {
                    own_block(v, send, recv, len);
                    gather_parts(v, seq, recv, |i| Place::block(i, len))
                }
            }
            CollCall::Allgatherv {
                send,
                recv,
                ref counts,
                ref displs,
            } => {
                let me = v.me as usize;
                // In place, this member's block of `recv` is its part.
                let input = send.unwrap_or(recv.wrapping_add(displs[me]).cast_const());
                self.shm_publish(v, seq, world, flags, Some((input, counts[me])))?;
                self.shm_wait(v, seq, world, all)?;
                if let Some(send) = send {
                    // SAFETY: `send` holds counts[me] bytes and `recv` that
                    // many at displs[me] (the caller's promise), apart.
                    unsafe {
                        std::ptr::copy_nonoverlapping(send, recv.add(displs[me]), counts[me])
                    };
                }
                // SAFETY: every part is published; `recv` holds counts[i]
                // bytes at displs[i] (the caller's promise).
                unsafe {
                    gather_parts(v, seq, recv, |i| Place {
                        to: displs[i],
                        from: 0,
                        len: counts[i],
                        whole: counts[i],
                    })
                }
            }
            CollCall::Gather {
                send,
                recv,
                len,
                root,
            } => {
                let Some(input) = send.or((v.me == root).then_some(std::ptr::null())) else {
                    return Err(Error::new(
                        ErrorClass::Buffer,
                        "MPI_IN_PLACE is the root's alone in a gather",
                    ));
                };
                if v.me != root {
                    self.shm_publish(v, seq, world, flags, Some((input, len)))?;
                    return Ok(());
                }
                self.shm_publish(v, seq, world, flags, None)?;
                self.shm_wait(v, seq, world, all)?;
                // SAFETY: as for allgather (at the root; null is in place).
                unsafe {
                    own_block(v, (!input.is_null()).then_some(input), recv, len);
                    gather_parts(v, seq, recv, |i| Place::block(i, len))
                }
            }
            CollCall::Scatter {
                send,
                recv,
                len,
                root,
            } => {
                let n = v.n as usize;
                if v.me == root {
                    self.shm_publish(v, seq, world, flags, Some((send, n * len)))?;
                    if let Some(recv) = recv {
                        // SAFETY: the root's block of `send` and `recv` hold
                        // `len` bytes (the caller's promise).
                        unsafe {
                            std::ptr::copy_nonoverlapping(send.add(v.me as usize * len), recv, len)
                        };
                    }
                    return Ok(());
                }
                let Some(recv) = recv else {
                    return Err(Error::new(
                        ErrorClass::Buffer,
                        "MPI_IN_PLACE is the root's alone in a scatter",
                    ));
                };
                self.shm_publish(v, seq, world, flags, None)?;
                self.shm_wait(v, seq, world, |i| i == root)?;
                // SAFETY: the root's part is published (see Bcast).
                let part = unsafe { read(v, root, seq)? };
                disagree(root, part.len, n * len)?;
                let mine = &part.bytes[v.me as usize * len..][..len];
                // SAFETY: `recv` holds `len` bytes (the caller's promise).
                unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), recv, len) };
                Ok(())
            }
            CollCall::Alltoall { send, recv, len } => {
                let n = v.n as usize;
                // In place, the row to send is `recv` itself, copied into
                // the slot before anything lands in it.
                self.shm_publish(
                    v,
                    seq,
                    world,
                    flags,
                    Some((send.unwrap_or(recv.cast_const()), n * len)),
                )?;
                self.shm_wait(v, seq, world, all)?;
                let mine = v.me as usize * len;
                if let Some(send) = send {
                    // SAFETY: block `me` of `send` and of `recv` hold `len`
                    // bytes each and do not overlap (checked above us).
                    unsafe { std::ptr::copy_nonoverlapping(send.add(mine), recv.add(mine), len) };
                }
                // SAFETY: every part is published; `recv` holds n blocks.
                unsafe {
                    gather_parts(v, seq, recv, |i| Place {
                        to: i * len,
                        from: mine,
                        len,
                        whole: n * len,
                    })
                }
            }
            _ => unreachable!("coll_shm admits no other collective"),
        }
    }

    /// Publishes call `seq`, with `data` (if any) in this member's buffer,
    /// or announces that this member runs it by messages, contributing
    /// `by_messages` bytes; wakes the members that sleep. Before writing
    /// the buffer, waits until everyone is done with the call that used it
    /// last.
    #[inline]
    fn shm_publish(
        &mut self,
        v: View,
        seq: u64,
        world: &[u32],
        by_messages: Option<usize>,
        data: Option<(*const u8, usize)>,
    ) -> Result<()> {
        let b = v.buffer(v.me, seq);
        if data.is_some() || by_messages.is_some() {
            self.shm_wait(v, seq.saturating_sub(BUFFERS - 1), world, |_| true)?;
        }
        if let Some(part) = by_messages {
            // SAFETY: the buffer's header is this member's to write: every
            // member has finished the call that used it last (waited for
            // above), and nobody reads it until the release store below.
            unsafe {
                b.add(HEADER_CALL).cast::<u64>().write(seq);
                b.add(HEADER_PART).cast::<u64>().write(part as u64);
            }
        }
        if let Some((src, len)) = data {
            // SAFETY: as above; the buffer holds `v.data >= len` bytes after
            // its header (the call qualified by its size); `src` holds
            // `len` bytes (the caller's promise).
            unsafe {
                b.cast::<u64>().write(len as u64);
                std::ptr::copy_nonoverlapping(src, b.add(LINE), len);
            }
        }
        v.seq(v.me).store(seq, Ordering::Release);
        self.p2p.wake_peers(world);
        Ok(())
    }

    /// Waits until every member `i` with `wanted(i)` has reached call
    /// `seq`; an error naming the first that died first.
    fn shm_wait(
        &mut self,
        v: View,
        seq: u64,
        world: &[u32],
        wanted: impl Fn(u32) -> bool,
    ) -> Result<()> {
        let waiting = |i: u32| i != v.me && wanted(i) && !v.reached(i, seq);
        if seq == 0 || !(0..v.n).any(waiting) {
            return Ok(());
        }
        self.wait_until(|p, _| {
            (0..v.n).all(|i| !waiting(i) || p.peer_known_gone(world[i as usize]))
        });
        for i in (0..v.n).filter(|&i| waiting(i)) {
            if let Some(e) = self.p2p.peer_gone(world[i as usize]) {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// What a call by the message algorithms watches for while it waits: a
/// member that took the flags for the same call.
pub(crate) struct Straddle {
    view: View,
    seq: u64,
    /// The bytes this member contributes.
    part: usize,
}

impl Straddle {
    /// The call's number on the flags.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// A member that ran the call on the flags: its error, as the message
    /// algorithms would report this member's part of the disagreement.
    pub(crate) fn flags_taken(&self) -> Option<Error> {
        let v = self.view;
        (0..v.n)
            .filter(|&i| i != v.me && v.reached(i, self.seq))
            // SAFETY: member `i` has published call `seq` (read with
            // acquire) and this member, still in it, has not reached
            // `seq + 1`, so the header stays.
            .find(|&i| !unsafe { v.ran_by_messages(i, self.seq) })
            .map(|i| straddles(i, v.max, Mine::Exactly(self.part), v.max))
    }
}

/// How the caller of [`Runtime::coll_shm`] runs the call.
pub(crate) enum ShmPath {
    /// By the message algorithms; the flags know nothing of it.
    Messages,
    /// By the message algorithms, announced on the flags.
    Announced(Straddle),
    /// Run on the flags, with this outcome.
    Done(Result<()>),
}

/// What this member knows of its own part in a straddle.
#[derive(Clone, Copy)]
enum Mine {
    /// It ran the call on the flags: at most the limit.
    AtMost,
    /// It ran it by messages, contributing these bytes.
    Exactly(usize),
}

/// The error for a call that member `from` ran by the other path: it
/// contributes `theirs` bytes (at most `max`, the size limit, when it ran
/// on the flags), this member `mine`. Classed as [`disagree`] classes
/// counts that disagree: more than this member's part is a truncation.
fn straddles(from: u32, theirs: usize, mine: Mine, max: usize) -> Error {
    let why = format!(
        "the counts are on either side of coll_shm_max ({max} bytes), so the members ran the \
         collective by different paths"
    );
    match mine {
        Mine::AtMost => Error::new(
            ErrorClass::Truncate,
            format!(
                "rank {from} sent {theirs} bytes where this rank's count and datatype give at \
                 most {max}; {why}"
            ),
        ),
        Mine::Exactly(mine) => Error::new(
            ErrorClass::Other,
            format!(
                "rank {from} sent at most {theirs} bytes where this rank's count and datatype \
                 expect {mine} (the members' counts disagree); {why}"
            ),
        ),
    }
}

/// Member `i`'s published part of call `seq`; an error if it ran the call
/// by messages (the members' counts straddle the size limit).
///
/// # Safety
/// The member's number must have been read as `seq` or later with acquire,
/// and this member must not have reached call `seq + 1`.
unsafe fn read<'a>(v: View, i: u32, seq: u64) -> Result<Part<'a>> {
    // SAFETY: the caller's promise.
    if unsafe { v.ran_by_messages(i, seq) } {
        // SAFETY: as above.
        let theirs = unsafe { v.part_by_messages(i, seq) };
        return Err(straddles(i, theirs, Mine::AtMost, v.max));
    }
    let b = v.buffer(i, seq);
    // SAFETY: the header and `data` bytes lie in the slot; the member wrote
    // them before publishing (the caller's acquire pairs with its release).
    unsafe {
        let len = (b.cast::<u64>().read() as usize).min(v.data);
        Ok(Part {
            len,
            bytes: std::slice::from_raw_parts(b.add(LINE), len),
        })
    }
}

/// This member's own block of `recv` from `send` (`None`: in place, the
/// block is there already).
///
/// # Safety
/// `recv` must hold `n` blocks of `len` bytes and `send` one, apart (the
/// MPI layer checks that buffers do not overlap).
unsafe fn own_block(v: View, send: Option<*const u8>, recv: *mut u8, len: usize) {
    if let Some(send) = send {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(send, recv.add(v.me as usize * len), len) };
    }
}

/// Where [`gather_parts`] puts a member's bytes: `len` bytes from `from`
/// in its part (which must be `whole` bytes) to `to` in `recv`.
struct Place {
    to: usize,
    from: usize,
    len: usize,
    whole: usize,
}

impl Place {
    /// Member `i`'s whole part of `len` bytes, to block `i` of `recv`
    /// (allgather and gather).
    fn block(i: usize, len: usize) -> Place {
        Place {
            to: i * len,
            from: 0,
            len,
            whole: len,
        }
    }
}

/// Copies from every other member `i`'s part of call `seq` into `recv`,
/// where `place(i)` says.
///
/// # Safety
/// As [`combine`]; `recv` must hold `len` bytes at `to` for every place.
unsafe fn gather_parts(
    v: View,
    seq: u64,
    recv: *mut u8,
    place: impl Fn(usize) -> Place,
) -> Result<()> {
    for i in (0..v.n).filter(|&i| i != v.me) {
        let Place {
            to,
            from,
            len,
            whole,
        } = place(i as usize);
        // SAFETY: published (the caller's promise).
        let part = unsafe { read(v, i, seq)? };
        disagree(i, part.len, whole)?;
        // SAFETY: `recv` holds `len` bytes at `to` (the caller's promise);
        // the part holds `whole >= from + len`.
        unsafe {
            std::ptr::copy_nonoverlapping(part.bytes[from..][..len].as_ptr(), recv.add(to), len)
        };
    }
    Ok(())
}

/// `recv = part_0 ∘ (part_1 ∘ (... ∘ part_{n-1}))`, the members' parts of
/// call `seq` in rank order.
///
/// # Safety
/// Every member's part of call `seq` must be published (see [`read`]);
/// `recv` must hold `len` bytes.
unsafe fn combine(v: View, seq: u64, op: &ReducerRef, recv: *mut u8, len: usize) -> Result<()> {
    // SAFETY: the caller's promise.
    let out = unsafe { std::slice::from_raw_parts_mut(recv, len) };
    for i in (0..v.n).rev() {
        // SAFETY: published (the caller's promise).
        let part = unsafe { read(v, i, seq)? };
        if part.len != len {
            let n = part.len.min(len);
            out[..n].copy_from_slice(&part.bytes[..n]);
            return disagree(i, part.len, len);
        }
        if i == v.n - 1 {
            out.copy_from_slice(part.bytes);
        } else {
            op.reduce(part.bytes, out)?;
        }
    }
    Ok(())
}

/// The error for a part of `got` bytes from rank `from` where `want` were
/// expected (as the message algorithms report it: truncation when more
/// came, a disagreement when fewer).
fn disagree(from: u32, got: usize, want: usize) -> Result<()> {
    if got > want {
        Err(Error::new(
            ErrorClass::Truncate,
            format!(
                "rank {from} sent {got} bytes where this rank's count and datatype give {want}"
            ),
        ))
    } else if got < want {
        Err(Error::new(
            ErrorClass::Other,
            format!(
                "rank {from} sent {got} bytes where this rank's count and datatype expect {want} \
                 (the members' counts disagree)"
            ),
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_whole_cache_lines_and_absurd_limits_are_refused() {
        let (data, slot, len) = View::layout(3, 2000).unwrap();
        assert_eq!(data, 2048);
        assert_eq!(slot, LINE + BUFFERS as usize * (LINE + 2048));
        assert_eq!(slot % LINE, 0);
        assert_eq!(len, 3 * slot);
        assert!(View::layout(2, usize::MAX - 10).is_none());
        assert!(View::layout(u32::MAX, usize::MAX / 64).is_none());
    }

    #[test]
    fn a_call_by_messages_is_told_from_one_on_the_flags() {
        let (data, slot, len) = View::layout(2, 128).unwrap();
        let mut mem = vec![0u64; len / 8];
        let v = View {
            base: mem.as_mut_ptr().cast(),
            n: 2,
            me: 0,
            data,
            max: 128,
            slot,
        };
        // Member 1 ran call 40 by messages (3000 bytes), then 41 on the
        // flags, whose turn still holds call 41 - BUFFERS by messages.
        let by_messages = |s: u64, part: u64| {
            let b = v.buffer(1, s);
            // SAFETY: the header lies in `mem`, which nobody else uses.
            unsafe {
                b.add(HEADER_CALL).cast::<u64>().write(s);
                b.add(HEADER_PART).cast::<u64>().write(part);
            }
        };
        by_messages(41 - BUFFERS, 5000);
        by_messages(40, 3000);
        v.seq(1).store(41, Ordering::Release);
        // SAFETY: single-threaded; the headers were written above.
        unsafe {
            assert!(v.ran_by_messages(1, 40));
            assert_eq!(v.part_by_messages(1, 40), 3000);
            assert!(!v.ran_by_messages(1, 41));
            assert!(!v.ran_by_messages(1, 42), "a turn never used");
        }
    }

    #[test]
    fn counts_on_either_side_of_the_limit_get_the_messages_classes() {
        // The root sent 3000 bytes by messages to a rank on the flags.
        let e = straddles(0, 3000, Mine::AtMost, 2048);
        assert_eq!(e.class, ErrorClass::Truncate);
        assert!(
            e.message.contains("rank 0 sent 3000 bytes")
                && e.message.contains("coll_shm_max (2048"),
            "{}",
            e.message
        );
        // A rank expecting 3000 by messages; the root was on the flags.
        let e = straddles(0, 2048, Mine::Exactly(3000), 2048);
        assert_eq!(e.class, ErrorClass::Other);
        assert!(e.message.contains("expect 3000"), "{}", e.message);
    }

    #[test]
    fn parts_that_disagree_are_reported_as_the_messages_report_them() {
        assert!(disagree(1, 8, 8).is_ok());
        assert_eq!(disagree(1, 16, 8).unwrap_err().class, ErrorClass::Truncate);
        let short = disagree(2, 4, 8).unwrap_err();
        assert_eq!(short.class, ErrorClass::Other);
        assert!(
            short.message.contains("rank 2 sent 4 bytes"),
            "{}",
            short.message
        );
    }
}

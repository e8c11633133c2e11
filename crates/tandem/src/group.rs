//! Communicator constructors beyond `comm_dup`: a new communicator over any
//! subgroup of a parent (`MPI_Comm_create`, Cartesian topologies) and
//! `MPI_Comm_split`. Every member of the parent takes part, so that the
//! new context id is agreed with the same agreement as `comm_dup`
//! (coll/agree.rs); disjoint groups created by one call share the id, which is
//! safe because their members never talk to each other in it.

use std::sync::Arc;

use crate::coll::agree::Agreement;
use crate::coll::{CollCall, SchedId};
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::{Envelope, P2p, ReqId, SendMode};
use crate::runtime::{CommId, Runtime};

/// Tags from 2^30 up on a communicator's collective context carry what is
/// not a collective: collectives number theirs below (`Colls::next_tag`),
/// and frames carry no negative tags. [2^30, 2^30 + 2^28) carry
/// `MPI_Comm_create_group`'s (and `MPI_Intercomm_create`'s leader)
/// messages, [2^30 + 2^28, 2^30 + 2^29) those of `MPI_Comm_create_from_group`
/// and `MPI_Intercomm_create_from_groups` (on the world's context, by a hash
/// of their string tag), [2^30 + 2^29, 2^31) partitioned communication's.
/// The user's tag is kept modulo 2^28 (2^29 for partitioned communication),
/// which only concurrent operations of one kind between the same ranks with
/// tags that far apart could confuse.
pub(crate) const CREATE_GROUP_TAGS: i32 = 1 << 30;
const FROM_GROUP_TAGS: i32 = (1 << 30) | (1 << 28);
const PARTITIONED_TAGS: i32 = (1 << 30) | (1 << 29);
const CREATE_GROUP_TAG_BITS: i32 = (1 << 28) - 1;
const USER_TAG_BITS: i32 = (1 << 29) - 1;

/// The tag of `MPI_Comm_create_group`'s messages for the user's `tag`.
pub(crate) fn create_group_tag(tag: i32) -> i32 {
    CREATE_GROUP_TAGS | (tag.max(0) & CREATE_GROUP_TAG_BITS)
}

/// The tag of `MPI_Comm_create_from_group`'s messages for a string tag:
/// FNV-1a of its bytes, folded into the range.
pub fn from_group_tag(stringtag: &[u8]) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in stringtag {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    FROM_GROUP_TAGS | ((h ^ (h >> 28)) as i32 & CREATE_GROUP_TAG_BITS)
}

/// The tag a partitioned message with the user's `tag` carries on the
/// collective context.
pub fn partitioned_tag(tag: i32) -> i32 {
    PARTITIONED_TAGS | (tag.max(0) & USER_TAG_BITS)
}

/// `MPI_Comm_create_group`'s agreement among the group's members, started
/// (see [`Runtime::comm_create_group_start`]).
pub struct GroupMaking {
    env: Envelope,
    members: Arc<[u32]>,
    /// This rank is the first member, which gathers the offers.
    leader: bool,
    /// (parent rank, world rank) of whom this rank talks to: every other
    /// member for the first, the first for the others.
    peers: Vec<(u32, u32)>,
    /// This rank's offer of context ids.
    token: u64,
    /// The largest offer seen so far (this rank's own at first).
    cid: u32,
    /// Requests in flight, their 4-byte buffers, and whether each sends.
    messages: Vec<(ReqId, Box<[u8; 4]>, bool)>,
    /// The first member has sent the largest offer back.
    answered: bool,
}

impl GroupMaking {
    /// Whether a message of the agreement is still in flight.
    pub fn waits_in(&self, p2p: &P2p) -> bool {
        self.messages
            .iter()
            .any(|(id, _, _)| p2p.is_complete(*id) == Some(false))
    }
}

impl Runtime {
    /// Registers a communicator this rank belongs to.
    pub(crate) fn install_comm(&mut self, cid: u32, group: Arc<[u32]>) -> Result<CommId> {
        if cid >= crate::dynamic::BRIDGE_CID {
            return Err(Error::new(
                ErrorClass::Intern,
                "context ids exhausted: too many communicators exist at once",
            ));
        }
        let me = self.rank();
        let rank = group.iter().position(|&w| w == me).ok_or_else(|| {
            Error::new(
                ErrorClass::Group,
                "this rank is not in the new communicator's group",
            )
        })? as u32;
        let c = Comm::new(cid, rank, group);
        self.p2p.register_context(c.p2p_context(), c.group.clone());
        self.p2p.register_context(c.coll_context(), c.group.clone());
        Ok(self.add_comm_slot(c))
    }

    /// Collective over `parent`: a new communicator whose members are the
    /// world ranks `members` in that order (this rank's view; `None` if it
    /// is not a member). Returns the new communicator of this rank, if any.
    pub fn comm_from_group(
        &mut self,
        parent: CommId,
        members: Option<Arc<[u32]>>,
    ) -> Result<Option<CommId>> {
        let making = self.comm_from_group_start(parent, members)?;
        self.comm_made(making)
    }

    /// [`Runtime::comm_from_group`], started: the caller waits for
    /// `making.sched` as it likes (`MPI_THREAD_MULTIPLE`: a wait that lets
    /// other threads in), then calls [`Runtime::comm_made`].
    pub fn comm_from_group_start(
        &mut self,
        parent: CommId,
        members: Option<Arc<[u32]>>,
    ) -> Result<CommMaking> {
        self.comm(parent)?;
        let (sched, agreement) = self.agreement_start(parent)?;
        Ok(CommMaking {
            sched,
            agreement,
            members,
        })
    }

    /// The communicator [`Runtime::comm_from_group_start`] began, once its
    /// agreement is done (waited for here if not).
    pub fn comm_made(&mut self, making: CommMaking) -> Result<Option<CommId>> {
        self.coll_wait(making.sched)?;
        let cid = making.agreement.result().ok_or_else(|| {
            Error::new(ErrorClass::Intern, "context id agreement without a result")
        })?;
        match making.members {
            Some(g) if !g.is_empty() => self.install_comm(cid, g).map(Some),
            _ => Ok(None),
        }
    }

    /// `MPI_Comm_create_from_group`: as `MPI_Comm_create_group` (see
    /// [`Runtime::comm_create_group_start`]) with no parent: the agreement
    /// runs among the world ranks `members` on the world's collective
    /// context, under the tag [`from_group_tag`] gives the string tag.
    pub fn comm_create_from_group(
        &mut self,
        members: Arc<[u32]>,
        stringtag: &[u8],
    ) -> Result<CommId> {
        let mut making = self.comm_create_from_group_start(members, stringtag)?;
        self.group_making_waited(&mut making, false)?;
        self.comm_group_made(making)
    }

    /// Steps `making` (see [`Runtime::group_making_step`]) and waits for its
    /// messages until the agreement is over: true then; false when, with
    /// `may_end`, the wait stopped to let other threads in
    /// (`MPI_THREAD_MULTIPLE`, see [`Runtime::wait_until_or_hand_over_if`]).
    pub fn group_making_waited(&mut self, making: &mut GroupMaking, may_end: bool) -> Result<bool> {
        while !self.group_making_step(making)? {
            if !self.wait_until_or_hand_over_if(|p, _| !making.waits_in(p), may_end) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `MPI_Comm_create_group`, started: collective over the world ranks
    /// `members` only (this rank among them), all of them members of
    /// `parent`: a new communicator of them in that order. Calls on one
    /// parent at the same time are told apart by `tag`. The context id is
    /// the maximum of the members' next free ids, gathered by the first
    /// member and sent back, in messages on the parent's collective context
    /// under tags its collectives never use (see `CREATE_GROUP_TAGS`).
    /// The caller waits with [`Runtime::group_making_waited`] (or steps
    /// with [`Runtime::group_making_step`], waiting as it likes for
    /// [`GroupMaking::waits_in`] to turn false), then calls
    /// [`Runtime::comm_group_made`].
    pub fn comm_create_group_start(
        &mut self,
        parent: CommId,
        members: Arc<[u32]>,
        tag: i32,
    ) -> Result<GroupMaking> {
        self.group_making_start(parent, members, create_group_tag(tag))
    }

    /// [`Runtime::comm_create_from_group`], started (as
    /// [`Runtime::comm_create_group_start`]).
    pub fn comm_create_from_group_start(
        &mut self,
        members: Arc<[u32]>,
        stringtag: &[u8],
    ) -> Result<GroupMaking> {
        self.group_making_start(crate::WORLD, members, from_group_tag(stringtag))
    }

    /// The agreement of a new communicator among `members` (all in
    /// `parent`), in messages with tag `wire_tag` on the parent's
    /// collective context. The largest offer of the members wins: each
    /// sends its offer to the first member, which sends the largest back to
    /// each. The messages are posted here and advanced by
    /// [`Runtime::group_making_step`].
    fn group_making_start(
        &mut self,
        parent: CommId,
        members: Arc<[u32]>,
        wire_tag: i32,
    ) -> Result<GroupMaking> {
        let c = self.comm(parent)?.clone();
        let me = self.rank();
        let index = members
            .iter()
            .position(|&w| w == me)
            .ok_or_else(|| Error::new(ErrorClass::Group, "this rank is not in the group"))?;
        let parent_rank = |w: u32| {
            c.group
                .iter()
                .position(|&x| x == w)
                .map(|r| r as u32)
                .ok_or_else(|| {
                    Error::new(
                        ErrorClass::Group,
                        format!("world rank {w} of the group is not in the communicator"),
                    )
                })
        };
        // Checked before anything is posted or offered.
        let peers: Vec<(u32, u32)> = if index == 0 {
            members[1..]
                .iter()
                .map(|&w| parent_rank(w).map(|r| (r, w)))
                .collect::<Result<_>>()?
        } else {
            vec![(parent_rank(members[0])?, members[0])]
        };
        let env = Envelope {
            ctx: c.coll_context(),
            src: c.rank,
            tag: wire_tag,
        };
        let (token, offer) = self.cids.lock().unwrap_or_else(|p| p.into_inner()).offer();
        let mut making = GroupMaking {
            env,
            members,
            leader: index == 0,
            peers,
            token,
            cid: offer,
            messages: Vec::new(),
            answered: false,
        };
        let posted = if making.leader {
            (0..making.peers.len()).try_for_each(|i| self.group_message(&mut making, i, false))
        } else {
            self.group_message(&mut making, 0, true)
                .and_then(|()| self.group_message(&mut making, 0, false))
        };
        if let Err(e) = posted {
            self.group_making_failed(&mut making);
            return Err(e);
        }
        Ok(making)
    }

    /// Posts the send of `making.cid` to, or the receive from, peer `i`.
    fn group_message(&mut self, making: &mut GroupMaking, i: usize, send: bool) -> Result<()> {
        let (rank, world) = making.peers[i];
        let mut buf = Box::new(making.cid.to_le_bytes());
        // SAFETY: the buffer is heap memory kept in `making.messages` (it
        // stays put when the vector grows) until the request is taken.
        let id = unsafe {
            if send {
                let env = making.env;
                self.p2p
                    .isend(env, world, buf.as_ptr(), 4, SendMode::Standard)?
            } else {
                let (ctx, tag) = (making.env.ctx, making.env.tag);
                self.p2p
                    .irecv(ctx, Some((rank, world)), Some(tag), buf.as_mut_ptr(), 4)
            }
        };
        making.messages.push((id, buf, send));
        Ok(())
    }

    /// Advances `making` once its messages are done: the first member, having
    /// every offer, sends back the largest. True when the agreement is
    /// over; an error withdraws this rank's offer.
    pub fn group_making_step(&mut self, making: &mut GroupMaking) -> Result<bool> {
        if making.waits_in(&self.p2p) {
            return Ok(false);
        }
        if let Err(e) = self.group_messages_taken(making) {
            self.group_making_failed(making);
            return Err(e);
        }
        if making.leader && !making.answered {
            making.answered = true;
            if let Err(e) =
                (0..making.peers.len()).try_for_each(|i| self.group_message(making, i, true))
            {
                self.group_making_failed(making);
                return Err(e);
            }
            return Ok(making.messages.is_empty());
        }
        Ok(true)
    }

    /// Takes `making`'s finished messages, folding received offers into
    /// its context id.
    /// Every one is taken, even after a failed one.
    fn group_messages_taken(&mut self, making: &mut GroupMaking) -> Result<()> {
        let mut outcome = Ok(());
        for (id, buf, send) in std::mem::take(&mut making.messages) {
            let st = self.p2p.take_if_complete(id).unwrap_or_default();
            let failed = match st.error {
                Some(e) => Some(e),
                None if !send && st.count != 4 => Some(Error::new(
                    ErrorClass::Intern,
                    format!("context id message of {} bytes", st.count),
                )),
                None => {
                    if !send {
                        making.cid = making.cid.max(u32::from_le_bytes(*buf));
                    }
                    None
                }
            };
            if let (Some(e), Ok(())) = (failed, &outcome) {
                outcome = Err(e);
            }
        }
        outcome
    }

    /// Withdraws the offer of a failed agreement (u32::MAX is never taken).
    /// Messages still in flight keep their buffers: the engine may yet
    /// read or fill them (4 bytes each, left behind only after an error).
    fn group_making_failed(&mut self, making: &mut GroupMaking) {
        self.cids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .settle(making.token, u32::MAX);
        for (_, buf, _) in making.messages.drain(..) {
            Box::leak(buf);
        }
    }

    /// The communicator [`Runtime::comm_create_group_start`] began, once
    /// [`Runtime::group_making_step`] said done.
    pub fn comm_group_made(&mut self, making: GroupMaking) -> Result<CommId> {
        // Each member's offer is past the ids it took or claimed before; an
        // MPI_Comm_idup of this rank in flight may have claimed the maximum
        // since, which this scheme (no second round) cannot undo.
        let cid = making.cid;
        if !self
            .cids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .settle(making.token, cid)
        {
            return Err(Error::new(
                ErrorClass::Intern,
                format!(
                    "context id {cid} of MPI_Comm_create_group was claimed meanwhile by an \
                     MPI_Comm_idup in flight at this rank"
                ),
            ));
        }
        self.install_comm(cid, making.members)
    }

    /// `MPI_Comm_split`: ranks with the same `color` (`None` = undefined)
    /// form a communicator, ordered by `key` then by rank in the parent.
    pub fn comm_split(
        &mut self,
        parent: CommId,
        color: Option<u32>,
        key: i32,
    ) -> Result<Option<CommId>> {
        let c = self.comm(parent)?.clone();
        if c.is_inter() {
            return self.intercomm_split(parent, color, key);
        }
        let mine = split_entry(color, key);
        let mut all = vec![0u8; SPLIT_ENTRY * c.size() as usize];
        // SAFETY: both buffers outlive the collective, waited for here.
        let gather = unsafe { self.comm_split_start(parent, &mine, &mut all)? };
        self.coll_wait(gather)?;
        let members = self.split_members(parent, color, &all)?;
        self.comm_from_group(parent, members)
    }

    /// The first step of [`Runtime::comm_split`] (of an
    /// intracommunicator), started: the allgather of every member's
    /// [`split_entry`] into `all` ([`SPLIT_ENTRY`] bytes per member). Once
    /// it is done, [`Runtime::split_members`] reads `all`, and
    /// [`Runtime::comm_from_group_start`] goes on.
    ///
    /// # Safety
    /// `mine` and `all` must stay valid, and `all` unread, until the
    /// schedule completes.
    pub unsafe fn comm_split_start(
        &mut self,
        parent: CommId,
        mine: &[u8; SPLIT_ENTRY],
        all: &mut [u8],
    ) -> Result<SchedId> {
        let n = self.comm(parent)?.size() as usize;
        if all.len() != SPLIT_ENTRY * n {
            return Err(Error::new(
                ErrorClass::Intern,
                "split buffer of the wrong size",
            ));
        }
        // SAFETY: the caller keeps both buffers valid until it completes.
        unsafe {
            self.coll_start(
                parent,
                CollCall::Allgather {
                    send: Some(mine.as_ptr()),
                    recv: all.as_mut_ptr(),
                    len: SPLIT_ENTRY,
                },
            )
        }
    }

    /// The world ranks of this rank's part of a split of `parent` (in
    /// order), from every member's entry; `None` for an undefined `color`.
    pub fn split_members(
        &self,
        parent: CommId,
        color: Option<u32>,
        all: &[u8],
    ) -> Result<Option<Arc<[u32]>>> {
        let c = self.comm(parent)?;
        let n = c.size() as usize;
        if all.len() != SPLIT_ENTRY * n {
            return Err(Error::new(
                ErrorClass::Intern,
                "split buffer of the wrong size",
            ));
        }
        let entry = |r: usize| {
            let e = &all[SPLIT_ENTRY * r..SPLIT_ENTRY * (r + 1)];
            let col = i32::from_le_bytes(e[..4].try_into().expect("4 bytes"));
            let key = i32::from_le_bytes(e[4..].try_into().expect("4 bytes"));
            (col, key)
        };
        Ok(color.map(|col| {
            let mut ranks: Vec<usize> = (0..n).filter(|&r| entry(r).0 == col as i32).collect();
            ranks.sort_by_key(|&r| (entry(r).1, r));
            ranks
                .iter()
                .map(|&r| c.world_rank(r as u32))
                .collect::<Arc<[u32]>>()
        }))
    }
}

/// Bytes each member contributes to a split: its color (-1 for undefined)
/// and its key.
pub const SPLIT_ENTRY: usize = 8;

/// This member's contribution to a split.
pub fn split_entry(color: Option<u32>, key: i32) -> [u8; SPLIT_ENTRY] {
    let mut mine = [0u8; SPLIT_ENTRY];
    mine[..4].copy_from_slice(&color.map_or(-1i32, |x| x as i32).to_le_bytes());
    mine[4..].copy_from_slice(&key.to_le_bytes());
    mine
}

/// A communicator being made by an agreement over its parent (see
/// [`Runtime::comm_from_group_start`]).
pub struct CommMaking {
    /// The agreement's schedule, to wait for.
    pub sched: SchedId,
    agreement: Arc<Agreement>,
    members: Option<Arc<[u32]>>,
}

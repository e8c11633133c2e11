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
use crate::p2p::{Envelope, SendMode};
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

impl Runtime {
    /// Registers a communicator this rank belongs to.
    pub(crate) fn install_comm(&mut self, cid: u32, group: Arc<[u32]>) -> Result<CommId> {
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

    /// `MPI_Comm_create_group`: collective over the world ranks `members`
    /// only (this rank among them), all of them members of `parent`: a new
    /// communicator of them in that order. Calls on one parent at the same
    /// time are told apart by `tag`. The context id is the maximum of the
    /// members' next free ids, gathered by the first member and sent back,
    /// in messages on the parent's collective context under tags its
    /// collectives never use (see [`CREATE_GROUP_TAGS`]).
    pub fn comm_create_group(
        &mut self,
        parent: CommId,
        members: Arc<[u32]>,
        tag: i32,
    ) -> Result<CommId> {
        self.create_group_on(parent, members, create_group_tag(tag))
    }

    /// `MPI_Comm_create_from_group`: as [`Runtime::comm_create_group`] with
    /// no parent: the agreement runs among the world ranks `members` on the
    /// world's collective context, under the tag [`from_group_tag`] gives
    /// the string tag.
    pub fn comm_create_from_group(
        &mut self,
        members: Arc<[u32]>,
        stringtag: &[u8],
    ) -> Result<CommId> {
        self.create_group_on(crate::WORLD, members, from_group_tag(stringtag))
    }

    /// The agreement of a new communicator among `members` (all in
    /// `parent`), in messages with tag `wire_tag` on the parent's
    /// collective context.
    fn create_group_on(
        &mut self,
        parent: CommId,
        members: Arc<[u32]>,
        wire_tag: i32,
    ) -> Result<CommId> {
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
        let env = Envelope {
            ctx: c.coll_context(),
            src: c.rank,
            tag: wire_tag,
        };
        let (token, offer) = self.cids.lock().unwrap_or_else(|p| p.into_inner()).offer();
        let agreed = self.create_group_max(env, &members, index, offer, parent_rank);
        let cid = match agreed {
            Ok(cid) => cid,
            Err(e) => {
                // Withdraws the offer: u32::MAX is never taken.
                self.cids
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .settle(token, u32::MAX);
                return Err(e);
            }
        };
        // Each member's offer is past the ids it took or claimed before; an
        // MPI_Comm_idup of this rank in flight may have claimed the maximum
        // since, which this scheme (no second round) cannot undo.
        if !self
            .cids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .settle(token, cid)
        {
            return Err(Error::new(
                ErrorClass::Intern,
                format!(
                    "context id {cid} of MPI_Comm_create_group was claimed meanwhile by an \
                     MPI_Comm_idup in flight at this rank"
                ),
            ));
        }
        self.install_comm(cid, members)
    }

    /// The maximum of the members' offers: gathered by the first member
    /// (`index` 0) and sent back.
    fn create_group_max(
        &mut self,
        env: Envelope,
        members: &[u32],
        index: usize,
        offer: u32,
        parent_rank: impl Fn(u32) -> Result<u32>,
    ) -> Result<u32> {
        let mut cid = offer;
        if members.len() > 1 {
            let leader = members[0];
            if index == 0 {
                for &w in &members[1..] {
                    let v = self.exchange_u32(env, None, Some((parent_rank(w)?, w)))?;
                    cid = cid.max(v);
                }
                for &w in &members[1..] {
                    self.exchange_u32(env, Some((w, cid)), None)?;
                }
            } else {
                let from = (parent_rank(leader)?, leader);
                self.exchange_u32(env, Some((leader, cid)), None)?;
                cid = self.exchange_u32(env, None, Some(from))?;
            }
        }
        Ok(cid)
    }

    /// Sends a `u32` to world rank `to.0` or receives one from
    /// (communicator rank, world rank) `from`, and waits for it.
    fn exchange_u32(
        &mut self,
        env: Envelope,
        to: Option<(u32, u32)>,
        from: Option<(u32, u32)>,
    ) -> Result<u32> {
        let mut buf = [0u8; 4];
        let id = match (to, from) {
            (Some((world, value)), _) => {
                buf = value.to_le_bytes();
                // SAFETY: `buf` outlives the request, waited for below.
                unsafe {
                    self.p2p
                        .isend(env, world, buf.as_ptr(), 4, SendMode::Standard)?
                }
            }
            // SAFETY: as above.
            (None, Some(src)) => unsafe {
                self.p2p
                    .irecv(env.ctx, Some(src), Some(env.tag), buf.as_mut_ptr(), 4)
            },
            (None, None) => return Ok(0),
        };
        self.wait_until(|p, _| p.is_complete(id) != Some(false));
        let st = self.p2p.take_if_complete(id).unwrap_or_default();
        if let Some(e) = st.error {
            return Err(e);
        }
        if from.is_some() && st.count != 4 {
            return Err(Error::new(
                ErrorClass::Intern,
                format!("context id message of {} bytes", st.count),
            ));
        }
        Ok(u32::from_le_bytes(buf))
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

//! Intercommunicators: a local and a remote group. Point-to-point calls
//! address the remote group (see [`crate::comm::Comm::peers`]); each
//! intercommunicator carries a hidden intracommunicator over its local group
//! on which collectives run their local parts, and its own collective
//! context carries the messages between the groups (the remote group is the
//! group registered for both of its contexts, so arriving frames are checked
//! against it).
//!
//! Context ids: every member of both groups must take the same id, above
//! its next free one. Each group agrees on its maximum over its local
//! communicator (as `comm_dup` does), the two leaders swap theirs, and each
//! leader broadcasts the larger to its group. The hidden local
//! intracommunicator takes the id after it (free on every member too).
//!
//! Collectives (coll/inter.rs) follow the standard's definitions: one
//! schedule per call, blocking or not, of point-to-point steps between the
//! groups and intracommunicator collectives on the local group; the
//! v-variants are direct messages between the ranks concerned.

use std::sync::Arc;

use crate::coll::CollCall;
use crate::comm::{Comm, Inter};
use crate::error::{Error, ErrorClass, Result};
use crate::group::{create_group_tag, from_group_tag};
use crate::p2p::{Envelope, ReqId, SendMode};
use crate::runtime::{CommId, Runtime};

/// The error of a collective (or constructor) that intercommunicators do
/// not support.
pub fn unsupported() -> Error {
    Error::new(
        ErrorClass::Comm,
        "not supported on an intercommunicator (Tandem has the blocking, non-blocking and \
         persistent barrier, bcast, reduce, allreduce, reduce_scatter(_block), gather(v), \
         scatter(v), allgather(v) and alltoall(v, w) on intercommunicators; the standard \
         defines no scans there)",
    )
}

fn not_inter() -> Error {
    Error::new(ErrorClass::Comm, "not an intercommunicator")
}

/// The root argument of a rooted collective on an intercommunicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterRoot {
    /// This rank is the root (`MPI_ROOT`).
    Me,
    /// Another rank of this rank's group is the root (`MPI_PROC_NULL`).
    Idle,
    /// Rank `r` of the remote group is the root.
    Remote(u32),
}

/// How a leader reaches the other group's leader: the envelope of its
/// messages and the other leader as (communicator rank, world rank).
#[derive(Clone, Copy, Debug)]
pub struct LeaderLink {
    pub env: Envelope,
    pub to: (u32, u32),
}

/// What the local leader of `MPI_Intercomm_create` brings: the peer
/// communicator, the remote leader's rank in it and the tag; or the error
/// its own arguments gave (the rest of its group is told, so nobody waits).
pub type PeerArgs = std::result::Result<(CommId, u32, i32), Error>;

/// Error classes a failed leader passes on to its group.
fn class_from_code(code: u32) -> ErrorClass {
    [
        ErrorClass::Comm,
        ErrorClass::Rank,
        ErrorClass::Tag,
        ErrorClass::Arg,
        ErrorClass::Group,
        ErrorClass::Truncate,
        ErrorClass::ProcAborted,
        ErrorClass::Intern,
        // Those of the dynamic-process calls (dynamic.rs).
        ErrorClass::Spawn,
        ErrorClass::Port,
        ErrorClass::Name,
        ErrorClass::Service,
        ErrorClass::Unsupported,
        ErrorClass::Root,
    ]
    .into_iter()
    .find(|c| c.code() as u32 == code)
    .unwrap_or(ErrorClass::Other)
}

impl Runtime {
    /// This rank's offer towards a context id both groups agree on (the
    /// maximum of every member's), registered so that agreements in flight
    /// here (`MPI_Comm_idup`) claim what they take meanwhile; and the token
    /// to settle it with (coll/agree.rs). An error before settling leaves
    /// the offer registered, which only keeps later claims recorded.
    fn cid_offer(&self) -> (u64, u32) {
        self.cids.lock().unwrap_or_else(|p| p.into_inner()).offer()
    }

    /// Takes the `n` context ids from `cid`, agreed after the offer that
    /// gave `token`. An `MPI_Comm_idup` in flight at this rank may have
    /// claimed one meanwhile, which this scheme (no second round) cannot
    /// undo: an error, as for `MPI_Comm_create_group`.
    fn cid_take(&self, token: u64, cid: u32, n: u32) -> Result<()> {
        if self
            .cids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .settle_range(token, cid, n)
        {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Intern,
                format!(
                    "context id {cid} of a new communicator was claimed meanwhile by an \
                     MPI_Comm_idup in flight at this rank"
                ),
            ))
        }
    }

    /// The communicator `id` and its intercommunicator part.
    pub(crate) fn inter_of(&self, id: CommId) -> Result<(Comm, Inter)> {
        let c = self.comm(id)?.clone();
        let inter = c.inter.clone().ok_or_else(not_inter)?;
        Ok((c, inter))
    }

    /// Registers an intercommunicator of this rank's group `local` and the
    /// remote group `remote` under context id `cid`, with its hidden local
    /// intracommunicator under `cid + 1`.
    fn install_inter(&mut self, cid: u32, local: Arc<[u32]>, remote: Arc<[u32]>) -> Result<CommId> {
        let hidden = self.install_comm(cid + 1, local.clone())?;
        let id = self.install_comm(cid, local)?;
        let c = self.comms[id.0].as_mut().expect("just installed");
        c.inter = Some(Inter {
            remote: remote.clone(),
            local: hidden,
        });
        // Frames on both contexts come from the remote group.
        let (p2p_ctx, coll_ctx) = (c.p2p_context(), c.coll_context());
        self.p2p.register_context(p2p_ctx, remote.clone());
        self.p2p.register_context(coll_ctx, remote);
        Ok(id)
    }

    /// Waits for a point-to-point request of an intercommunicator
    /// operation; its error if it failed, and the bytes it moved.
    fn finish(&mut self, id: ReqId) -> Result<usize> {
        let st = self.wait_request(id)?;
        match st.error {
            Some(e) => Err(e),
            None => Ok(st.count),
        }
    }

    /// Sends `len` bytes and receives up to `cap` bytes over `link` at the
    /// same time (neither can hold the other up); the bytes received.
    ///
    /// # Safety
    /// `send` must be valid for reads of `len` bytes, `recv` for writes of
    /// `cap` bytes, for the call.
    unsafe fn swap_bytes(
        &mut self,
        link: LeaderLink,
        send: *const u8,
        len: usize,
        recv: *mut u8,
        cap: usize,
    ) -> Result<usize> {
        // The send first: if it fails, no receive is left posted into
        // memory the caller is about to free.
        // SAFETY: the caller's promise; both complete below.
        let s = unsafe {
            self.p2p
                .isend(link.env, link.to.1, send, len, SendMode::Standard)?
        };
        // SAFETY: as above.
        let r = unsafe {
            self.p2p
                .irecv(link.env.ctx, Some(link.to), Some(link.env.tag), recv, cap)
        };
        let got = self.finish(r);
        self.finish(s)?;
        got
    }

    /// The leaders' swap of `mine` (at most `cap` words each way), then the
    /// other group's words broadcast over `local` from its rank `leader`.
    /// `link` is `Some` on the leader only (an error there is passed on to
    /// the whole group, with its class).
    fn swap_words(
        &mut self,
        local: CommId,
        leader: u32,
        link: Option<std::result::Result<LeaderLink, Error>>,
        mine: &[u32],
        cap: usize,
    ) -> Result<Vec<u32>> {
        // The leader's outcome, shared as [words received, the words...].
        let outcome = link.map(|link| {
            let link = link?;
            let send: Vec<u8> = mine.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut recv = vec![0u8; 4 * cap];
            // SAFETY: both buffers live until the swap completes, in it.
            let n = unsafe {
                self.swap_bytes(
                    link,
                    send.as_ptr(),
                    send.len(),
                    recv.as_mut_ptr(),
                    recv.len(),
                )
            }?;
            if n % 4 != 0 {
                return Err(Error::new(
                    ErrorClass::Intern,
                    format!("intercommunicator leaders' message of {n} bytes"),
                ));
            }
            let mut words = vec![(n / 4) as u32];
            words.extend(
                recv[..n]
                    .chunks_exact(4)
                    .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes"))),
            );
            Ok(words)
        });
        let words = self.share_outcome(local, leader, outcome, 1 + cap)?;
        let n = (words[0] as usize).min(cap);
        Ok(words[1..1 + n].to_vec())
    }

    /// Broadcasts the root's outcome over `comm`: `[0, words...]` or the
    /// class of the root's error; every member gets the words or an error.
    pub(crate) fn share_outcome(
        &mut self,
        comm: CommId,
        root: u32,
        outcome: Option<Result<Vec<u32>>>,
        n: usize,
    ) -> Result<Vec<u32>> {
        let mut msg = vec![0u32; 1 + n];
        let mut failure = None;
        match outcome {
            Some(Ok(words)) => {
                msg[1..1 + words.len().min(n)].copy_from_slice(&words[..words.len().min(n)])
            }
            Some(Err(e)) => {
                msg[0] = e.class.code() as u32;
                failure = Some(e);
            }
            None => {}
        }
        let mut bytes: Vec<u8> = msg.iter().flat_map(|w| w.to_le_bytes()).collect();
        // SAFETY: `bytes` outlives the broadcast, which completes here.
        unsafe {
            self.coll(
                comm,
                CollCall::Bcast {
                    buf: bytes.as_mut_ptr(),
                    len: bytes.len(),
                    root,
                },
            )?
        };
        if let Some(e) = failure {
            return Err(e);
        }
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
            .collect();
        if words[0] != 0 {
            return Err(Error::new(
                class_from_code(words[0]),
                "the root failed (see the error it reported)",
            ));
        }
        Ok(words[1..].to_vec())
    }

    /// The link between the leaders (local rank 0 of each group) of an
    /// intercommunicator, for its next collective operation.
    fn leader_link(&mut self, c: &Comm) -> Option<std::result::Result<LeaderLink, Error>> {
        let tag = self.colls.next_tag(c.cid);
        let inter = c.inter.as_ref()?;
        (c.rank == 0).then(|| {
            Ok(LeaderLink {
                env: Envelope {
                    ctx: c.coll_context(),
                    src: 0,
                    tag,
                },
                to: (0, inter.remote[0]),
            })
        })
    }

    /// `MPI_Intercomm_create`, collective over `local` (an intracommunicator)
    /// and the remote group: its local rank `leader` talks to the remote
    /// leader over the peer communicator (`peer` is significant there only).
    pub fn intercomm_create(
        &mut self,
        local: CommId,
        leader: u32,
        peer: Option<PeerArgs>,
    ) -> Result<CommId> {
        // The user's tag tells concurrent creations on one peer
        // communicator apart; kept modulo 2^28 in the tag range of
        // MPI_Comm_create_group's messages.
        let peer = peer.map(|p| p.map(|(pc, rl, tag)| (pc, rl, create_group_tag(tag))));
        self.intercomm_create_tagged(local, leader, peer)
    }

    /// `MPI_Intercomm_create_from_groups`: collective over the world ranks
    /// `local` and `remote` (disjoint, this rank in `local`), whose leaders
    /// are world ranks `local[local_leader]` and `remote_leader`. The local
    /// group first makes an intracommunicator of itself as
    /// `MPI_Comm_create_from_group` does; its leader then talks to the
    /// remote one on the world's collective context, under the tag of the
    /// string tag (see [`from_group_tag`]).
    pub fn intercomm_create_from_groups(
        &mut self,
        local: Arc<[u32]>,
        local_leader: u32,
        remote_leader: u32,
        stringtag: &[u8],
    ) -> Result<CommId> {
        let tag = from_group_tag(stringtag);
        let intra = self.comm_create_from_group(local, stringtag)?;
        let made = self.intercomm_create_tagged(
            intra,
            local_leader,
            Some(Ok((crate::WORLD, remote_leader, tag))),
        );
        let freed = self.comm_free(intra);
        let id = made?;
        freed.map(|()| id)
    }

    /// [`Runtime::intercomm_create`] with the leaders' message tag (on the
    /// peer's collective context) given as it goes on the wire.
    fn intercomm_create_tagged(
        &mut self,
        local: CommId,
        leader: u32,
        peer: Option<PeerArgs>,
    ) -> Result<CommId> {
        let c = self.comm(local)?.clone();
        if c.is_inter() {
            return Err(Error::new(
                ErrorClass::Comm,
                "the local communicator must be an intracommunicator",
            ));
        }
        if leader >= c.size() {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("local leader {leader} is not in 0..{}", c.size()),
            ));
        }
        let me = self.rank();
        let link = if c.rank == leader {
            let missing = || {
                Err(Error::new(
                    ErrorClass::Intern,
                    "no peer arguments at the leader",
                ))
            };
            Some(
                peer.unwrap_or_else(missing)
                    .and_then(|(pc, remote_leader, tag)| {
                        let p = self.comm(pc)?;
                        if p.is_inter() {
                            return Err(Error::new(
                                ErrorClass::Comm,
                                "the peer communicator must be an intracommunicator",
                            ));
                        }
                        if remote_leader >= p.size() {
                            return Err(Error::new(
                                ErrorClass::Rank,
                                format!("remote leader {remote_leader} is not in 0..{}", p.size()),
                            ));
                        }
                        let world = p.world_rank(remote_leader);
                        if c.group.contains(&world) {
                            return Err(Error::new(
                                ErrorClass::Rank,
                                format!(
                            "remote leader {remote_leader} (world rank {world}) is in the local \
                             group{}",
                            if world == me { " (it is this rank)" } else { "" }
                        ),
                            ));
                        }
                        Ok(LeaderLink {
                            env: Envelope {
                                ctx: p.coll_context(),
                                src: p.rank,
                                tag,
                            },
                            to: (remote_leader, world),
                        })
                    }),
            )
        } else {
            None
        };
        // The remote group is in the peer communicator: processes this
        // rank knows.
        let cap = self.p2p.size() as usize;
        self.intercomm_over(local, leader, link, cap)
    }

    /// The part of every intercommunicator creation after the leaders have
    /// found each other: collective over the intracommunicator `local`,
    /// whose rank `leader` swaps over `link` (`Some` there only) the
    /// group's offer of a context id and its process ids with the other
    /// leader, a group of at most `cap` processes.
    pub(crate) fn intercomm_over(
        &mut self,
        local: CommId,
        leader: u32,
        link: Option<std::result::Result<LeaderLink, Error>>,
        cap: usize,
    ) -> Result<CommId> {
        let c = self.comm(local)?.clone();
        let (token, seen) = self.cid_offer();
        let mine = self.allreduce_max_u32(local, seen)?;
        let mut words = vec![mine];
        words.extend(c.group.iter());
        let theirs = self.swap_words(local, leader, link, &words, 1 + cap)?;
        let Some((&their_cid, remote)) = theirs.split_first() else {
            return Err(Error::new(
                ErrorClass::Intern,
                "empty message from the remote leader",
            ));
        };
        if remote.is_empty()
            || remote
                .iter()
                .any(|&w| w >= crate::transport::tcp::MAX_PROCESSES)
        {
            return Err(Error::new(
                ErrorClass::Intern,
                "malformed remote group from the remote leader",
            ));
        }
        if let Some(w) = remote.iter().find(|w| c.group.contains(w)) {
            return Err(Error::new(
                ErrorClass::Comm,
                format!("the local and remote groups overlap (world rank {w} is in both)"),
            ));
        }
        let cid = mine.max(their_cid);
        self.cid_take(token, cid, 2)?;
        self.install_inter(cid, c.group.clone(), Arc::from(remote))
    }

    /// `MPI_Comm_dup` of an intercommunicator: same groups, a new context
    /// agreed by both.
    pub fn intercomm_dup(&mut self, id: CommId) -> Result<CommId> {
        let (c, inter) = self.inter_of(id)?;
        let (token, seen) = self.cid_offer();
        let mine = self.allreduce_max_u32(inter.local, seen)?;
        let link = self.leader_link(&c);
        let theirs = self.swap_words(inter.local, 0, link, &[mine], 1)?;
        let cid = mine.max(theirs.first().copied().unwrap_or(0));
        self.cid_take(token, cid, 2)?;
        self.install_inter(cid, c.group.clone(), inter.remote.clone())
    }

    /// `MPI_Intercomm_merge`: an intracommunicator of both groups, the
    /// group that passed `high = false` first (when both pass the same,
    /// the group whose leader has the lower world rank).
    pub fn intercomm_merge(&mut self, id: CommId, high: bool) -> Result<CommId> {
        let (c, inter) = self.inter_of(id)?;
        let (token, seen) = self.cid_offer();
        let mine = self.allreduce_max_u32(inter.local, seen)?;
        let link = self.leader_link(&c);
        let theirs = self.swap_words(inter.local, 0, link, &[mine, u32::from(high)], 2)?;
        let [their_cid, their_high] = theirs[..] else {
            return Err(Error::new(
                ErrorClass::Intern,
                "malformed merge message from the remote leader",
            ));
        };
        let their_high = their_high != 0;
        let we_first = if high != their_high {
            !high
        } else {
            c.group[0] < inter.remote[0]
        };
        let (first, second) = if we_first {
            (&c.group, &inter.remote)
        } else {
            (&inter.remote, &c.group)
        };
        let all: Arc<[u32]> = first.iter().chain(second.iter()).copied().collect();
        let cid = mine.max(their_cid);
        self.cid_take(token, cid, 1)?;
        self.install_comm(cid, all)
    }

    /// `MPI_Comm_split` of an intercommunicator: the ranks of each group
    /// with one colour form the new local group, those of the other group
    /// with that colour the remote one (ordered by key, then rank). `None`
    /// where the colour is undefined or one side has nobody with it.
    pub fn intercomm_split(
        &mut self,
        id: CommId,
        color: Option<u32>,
        key: i32,
    ) -> Result<Option<CommId>> {
        let (c, inter) = self.inter_of(id)?;
        let n = c.size() as usize;
        let mut entry = [0u8; 8];
        entry[..4].copy_from_slice(&color.unwrap_or(u32::MAX).to_le_bytes());
        entry[4..].copy_from_slice(&key.to_le_bytes());
        let mut all = vec![0u8; 8 * n];
        // SAFETY: both buffers outlive the collective, which completes here.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Allgather {
                    send: Some(entry.as_ptr()),
                    recv: all.as_mut_ptr(),
                    len: 8,
                },
            )?
        };
        let table: Vec<u32> = all
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
            .collect();
        let (token, seen) = self.cid_offer();
        let mine = self.allreduce_max_u32(inter.local, seen)?;
        let mut words = vec![mine];
        words.extend(&table);
        let link = self.leader_link(&c);
        let theirs = self.swap_words(inter.local, 0, link, &words, 1 + 2 * inter.remote.len())?;
        if theirs.len() != 1 + 2 * inter.remote.len() {
            return Err(Error::new(
                ErrorClass::Intern,
                "malformed split message from the remote leader",
            ));
        }
        let cid = mine.max(theirs[0]);
        // Every member moves past the ids, used or not.
        self.cid_take(token, cid, 2)?;
        let Some(color) = color else {
            return Ok(None);
        };
        let pick = |table: &[u32], members: &[u32]| -> Arc<[u32]> {
            let mut ranks: Vec<usize> = (0..members.len())
                .filter(|&r| table[2 * r] == color)
                .collect();
            ranks.sort_by_key(|&r| (table[2 * r + 1] as i32, r));
            ranks.iter().map(|&r| members[r]).collect()
        };
        let local = pick(&table, &c.group);
        let remote = pick(&theirs[1..], &inter.remote);
        if remote.is_empty() {
            return Ok(None);
        }
        self.install_inter(cid, local, remote).map(Some)
    }

    /// `MPI_Comm_create` on an intercommunicator: each group names its
    /// part (`members`, world ranks of its local group, the same on all of
    /// it); those of both parts form a new intercommunicator. `None` for
    /// the ranks outside their group's part, and for all when either part
    /// is empty.
    pub fn intercomm_create_sub(
        &mut self,
        id: CommId,
        members: Arc<[u32]>,
    ) -> Result<Option<CommId>> {
        let (c, inter) = self.inter_of(id)?;
        let (token, seen) = self.cid_offer();
        let mine = self.allreduce_max_u32(inter.local, seen)?;
        let mut words = vec![mine];
        words.extend(members.iter());
        let link = self.leader_link(&c);
        let theirs = self.swap_words(inter.local, 0, link, &words, 1 + inter.remote.len())?;
        let Some((&their_cid, remote)) = theirs.split_first() else {
            return Err(Error::new(
                ErrorClass::Intern,
                "empty message from the remote leader",
            ));
        };
        if let Some(w) = remote.iter().find(|w| !inter.remote.contains(w)) {
            return Err(Error::new(
                ErrorClass::Intern,
                format!("world rank {w} of the remote part is not in the remote group"),
            ));
        }
        let cid = mine.max(their_cid);
        // Every member moves past the ids, used or not.
        self.cid_take(token, cid, 2)?;
        if remote.is_empty() || !members.contains(&self.rank()) {
            return Ok(None);
        }
        self.install_inter(cid, members, Arc::from(remote))
            .map(Some)
    }
}

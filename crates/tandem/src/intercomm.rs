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
//! Collectives follow the standard's definitions, built from
//! point-to-point between the groups and intracommunicator collectives on
//! the local group; the v-variants are direct messages between the ranks
//! concerned. The non-blocking forms run the same steps as one schedule
//! (coll/inter.rs).

use std::sync::Arc;

use crate::coll::ops::ReducerRef;
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
        // [error class or 0, words, the words...]
        let mut msg = vec![0u32; 2 + cap];
        let mut failure = None;
        if let Some(link) = link {
            let got = match link {
                Ok(link) => {
                    let send: Vec<u8> = mine.iter().flat_map(|w| w.to_le_bytes()).collect();
                    let mut recv = vec![0u8; 4 * cap];
                    // SAFETY: both buffers live until the swap completes, in it.
                    unsafe {
                        self.swap_bytes(
                            link,
                            send.as_ptr(),
                            send.len(),
                            recv.as_mut_ptr(),
                            recv.len(),
                        )
                    }
                    .and_then(|n| {
                        if n % 4 == 0 {
                            Ok(recv[..n].to_vec())
                        } else {
                            Err(Error::new(
                                ErrorClass::Intern,
                                format!("intercommunicator leaders' message of {n} bytes"),
                            ))
                        }
                    })
                }
                Err(e) => Err(e),
            };
            match got {
                Ok(bytes) => {
                    msg[1] = (bytes.len() / 4) as u32;
                    for (i, w) in bytes.chunks_exact(4).enumerate() {
                        msg[2 + i] = u32::from_le_bytes(w.try_into().expect("4 bytes"));
                    }
                }
                Err(e) => {
                    msg[0] = e.class.code() as u32;
                    failure = Some(e);
                }
            }
        }
        let mut bytes: Vec<u8> = msg.iter().flat_map(|w| w.to_le_bytes()).collect();
        // SAFETY: `bytes` outlives the broadcast, which completes here.
        unsafe {
            self.coll(
                local,
                CollCall::Bcast {
                    buf: bytes.as_mut_ptr(),
                    len: bytes.len(),
                    root: leader,
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
                "the group's leader failed (see the error it reported)",
            ));
        }
        let n = (words[1] as usize).min(cap);
        Ok(words[2..2 + n].to_vec())
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
        let (token, seen) = self.cid_offer();
        let mine = self.allreduce_max_u32(local, seen)?;
        let world_size = self.size() as usize;
        let link = if c.rank == leader {
            let me = self.rank();
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
        let mut words = vec![mine];
        words.extend(c.group.iter());
        let theirs = self.swap_words(local, leader, link, &words, 1 + world_size)?;
        let Some((&their_cid, remote)) = theirs.split_first() else {
            return Err(Error::new(
                ErrorClass::Intern,
                "empty message from the remote leader",
            ));
        };
        if remote.is_empty() || remote.iter().any(|&w| w as usize >= world_size) {
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

    /// `MPI_Barrier` on an intercommunicator: nobody leaves before every
    /// member of the other group has entered.
    pub fn inter_barrier(&mut self, id: CommId) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let link = self.leader_link(&c);
        // SAFETY: barriers move no data.
        unsafe { self.coll(inter.local, CollCall::Barrier)? };
        if let Some(link) = link {
            let mut none = [0u8; 1];
            // SAFETY: zero bytes move.
            unsafe { self.swap_bytes(link?, none.as_ptr(), 0, none.as_mut_ptr(), 0)? };
        }
        // SAFETY: as above.
        unsafe { self.coll(inter.local, CollCall::Barrier) }
    }

    /// Sends `len` bytes at `buf` to remote rank `to` and waits.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes for the call.
    unsafe fn inter_send(
        &mut self,
        c: &Comm,
        tag: i32,
        to: u32,
        buf: *const u8,
        len: usize,
    ) -> Result<()> {
        let env = Envelope {
            ctx: c.coll_context(),
            src: c.rank,
            tag,
        };
        // SAFETY: the caller's promise; waited for below.
        let id = unsafe {
            self.p2p
                .isend(env, c.peer_world_rank(to), buf, len, SendMode::Standard)?
        };
        self.finish(id).map(|_| ())
    }

    /// A rooted collective whose root `r` is in the other group: this
    /// group combines its data at its rank 0 with `call` (a collective on
    /// the hidden local communicator `local` that writes `bytes` to the
    /// buffer it is given there), and rank 0 sends the result to the root.
    ///
    /// # Safety
    /// The buffers `call` names besides the one it is given must be valid
    /// as that collective requires, for the call.
    unsafe fn combine_for_remote_root(
        &mut self,
        c: &Comm,
        local: CommId,
        tag: i32,
        r: u32,
        bytes: usize,
        call: impl FnOnce(*mut u8) -> CollCall,
    ) -> Result<()> {
        let mut combined = vec![0u8; if c.rank == 0 { bytes } else { 0 }];
        let out = if c.rank == 0 {
            combined.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the caller's promise for the other buffers; `combined`
        // outlives the collective.
        unsafe { self.coll(local, call(out))? };
        if c.rank == 0 {
            // SAFETY: `combined` holds `bytes` bytes.
            unsafe { self.inter_send(c, tag, r, combined.as_ptr(), bytes)? };
        }
        Ok(())
    }

    /// Receives exactly `len` bytes into `buf` from remote rank `from`.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes for the call.
    unsafe fn inter_recv(
        &mut self,
        c: &Comm,
        tag: i32,
        from: u32,
        buf: *mut u8,
        len: usize,
    ) -> Result<()> {
        let src = (from, c.peer_world_rank(from));
        // SAFETY: the caller's promise; waited for below.
        let id = unsafe {
            self.p2p
                .irecv(c.coll_context(), Some(src), Some(tag), buf, len)
        };
        let got = self.finish(id)?;
        short_check(got, len)
    }

    /// `MPI_Bcast` on an intercommunicator: the root sends to the remote
    /// group's rank 0, which broadcasts in its group.
    ///
    /// # Safety
    /// `buf` must be valid for `len` bytes of reads at the root, writes in
    /// the remote group, for the call.
    pub unsafe fn inter_bcast(
        &mut self,
        id: CommId,
        buf: *mut u8,
        len: usize,
        root: InterRoot,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let tag = self.colls.next_tag(c.cid);
        match root {
            InterRoot::Idle => Ok(()),
            // SAFETY: the caller's promise.
            InterRoot::Me => unsafe { self.inter_send(&c, tag, 0, buf, len) },
            InterRoot::Remote(r) => {
                if c.rank == 0 {
                    // SAFETY: the caller's promise.
                    unsafe { self.inter_recv(&c, tag, r, buf, len)? };
                }
                // SAFETY: as above.
                unsafe { self.coll(inter.local, CollCall::Bcast { buf, len, root: 0 }) }
            }
        }
    }

    /// `MPI_Reduce` on an intercommunicator: the remote group reduces to
    /// its rank 0, which sends the result to the root.
    ///
    /// # Safety
    /// `send` must be valid for reads of `len` bytes in the remote group,
    /// `recv` for writes of `len` bytes at the root, for the call.
    pub unsafe fn inter_reduce(
        &mut self,
        id: CommId,
        send: *const u8,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
        root: InterRoot,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let tag = self.colls.next_tag(c.cid);
        match root {
            InterRoot::Idle => Ok(()),
            // SAFETY: the caller's promise.
            InterRoot::Me => unsafe { self.inter_recv(&c, tag, 0, recv, len) },
            // SAFETY: the caller's promise for `send`.
            InterRoot::Remote(r) => unsafe {
                self.combine_for_remote_root(&c, inter.local, tag, r, len, |out| CollCall::Reduce {
                    send: Some(send),
                    recv: out,
                    len,
                    op,
                    root: 0,
                })
            },
        }
    }

    /// `MPI_Allreduce` on an intercommunicator: each group gets the
    /// reduction of the other group's data (each reduces to its rank 0,
    /// the two swap, each broadcasts what it got).
    ///
    /// # Safety
    /// `send` must be valid for reads and `recv` for writes of `len` bytes
    /// for the call.
    pub unsafe fn inter_allreduce(
        &mut self,
        id: CommId,
        send: *const u8,
        recv: *mut u8,
        len: usize,
        op: ReducerRef,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let link = self.leader_link(&c);
        let mut part = vec![0u8; if link.is_some() { len } else { 0 }];
        let out = if link.is_some() {
            part.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the caller's promise for `send`; `part` outlives the collective.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Reduce {
                    send: Some(send),
                    recv: out,
                    len,
                    op,
                    root: 0,
                },
            )?
        };
        if let Some(link) = link {
            // SAFETY: `part` holds `len` bytes; `recv` by the caller's promise.
            let got = unsafe { self.swap_bytes(link?, part.as_ptr(), len, recv, len)? };
            short_check(got, len)?;
        }
        // SAFETY: the caller's promise.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Bcast {
                    buf: recv,
                    len,
                    root: 0,
                },
            )
        }
    }

    /// `MPI_Reduce_scatter` on an intercommunicator: the reduction of the
    /// other group's vectors, scattered over this group by `counts` (bytes
    /// per local rank; both groups' totals match). Each group reduces at
    /// its rank 0, the two swap, each scatters what it got.
    ///
    /// # Safety
    /// `send` must be valid for reads of the total of `counts` bytes and
    /// `recv` for writes of this rank's count, for the call.
    pub unsafe fn inter_reduce_scatter(
        &mut self,
        id: CommId,
        send: *const u8,
        recv: *mut u8,
        counts: Vec<usize>,
        op: ReducerRef,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let link = self.leader_link(&c);
        let total: usize = counts.iter().sum();
        let here = if link.is_some() { total } else { 0 };
        let (mut part, mut theirs) = (vec![0u8; here], vec![0u8; here]);
        let out = if link.is_some() {
            part.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: the caller's promise for `send`; `part` outlives the collective.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Reduce {
                    send: Some(send),
                    recv: out,
                    len: total,
                    op,
                    root: 0,
                },
            )?
        };
        if let Some(link) = link {
            // SAFETY: both buffers hold `total` bytes.
            let got = unsafe {
                self.swap_bytes(link?, part.as_ptr(), total, theirs.as_mut_ptr(), total)?
            };
            short_check(got, total)?;
        }
        let displs: Vec<usize> = counts
            .iter()
            .scan(0, |at, &n| {
                let d = *at;
                *at += n;
                Some(d)
            })
            .collect();
        let recvlen = counts[c.rank as usize];
        // SAFETY: `theirs` outlives the collective; `recv` by the caller's promise.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Scatterv {
                    send: theirs.as_ptr(),
                    counts,
                    displs,
                    recv: Some(recv),
                    recvlen,
                    root: 0,
                },
            )
        }
    }

    /// `MPI_Gather` on an intercommunicator: the remote group gathers at
    /// its rank 0, which sends the whole to the root. `len`: one rank's
    /// block (`recv` at the root holds one per remote rank).
    ///
    /// # Safety
    /// `send` must be valid for reads of `len` bytes in the remote group,
    /// `recv` for writes of `len` bytes per remote rank at the root.
    pub unsafe fn inter_gather(
        &mut self,
        id: CommId,
        send: *const u8,
        recv: *mut u8,
        len: usize,
        root: InterRoot,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let tag = self.colls.next_tag(c.cid);
        match root {
            InterRoot::Idle => Ok(()),
            InterRoot::Me => {
                let whole = len * inter.remote.len();
                // SAFETY: the caller's promise.
                unsafe { self.inter_recv(&c, tag, 0, recv, whole) }
            }
            InterRoot::Remote(r) => {
                let whole = len * c.group.len();
                // SAFETY: the caller's promise for `send`.
                unsafe {
                    self.combine_for_remote_root(&c, inter.local, tag, r, whole, |out| {
                        CollCall::Gather {
                            send: Some(send),
                            recv: out,
                            len,
                            root: 0,
                        }
                    })
                }
            }
        }
    }

    /// `MPI_Scatter` on an intercommunicator: the root sends everything to
    /// the remote group's rank 0, which scatters it in its group. `len`:
    /// one rank's block.
    ///
    /// # Safety
    /// `send` must be valid for reads of `len` bytes per remote rank at the
    /// root, `recv` for writes of `len` bytes in the remote group.
    pub unsafe fn inter_scatter(
        &mut self,
        id: CommId,
        send: *const u8,
        recv: *mut u8,
        len: usize,
        root: InterRoot,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let tag = self.colls.next_tag(c.cid);
        match root {
            InterRoot::Idle => Ok(()),
            InterRoot::Me => {
                let whole = len * inter.remote.len();
                // SAFETY: the caller's promise.
                unsafe { self.inter_send(&c, tag, 0, send, whole) }
            }
            InterRoot::Remote(r) => {
                let whole = len * c.group.len();
                let mut all = vec![0u8; if c.rank == 0 { whole } else { 0 }];
                if c.rank == 0 {
                    // SAFETY: `all` holds `whole` bytes.
                    unsafe { self.inter_recv(&c, tag, r, all.as_mut_ptr(), whole)? };
                }
                // SAFETY: `all` outlives the collective; `recv` by the
                // caller's promise.
                unsafe {
                    self.coll(
                        inter.local,
                        CollCall::Scatter {
                            send: all.as_ptr(),
                            recv: Some(recv),
                            len,
                            root: 0,
                        },
                    )
                }
            }
        }
    }

    /// `MPI_Allgather` on an intercommunicator: every rank gets the blocks
    /// of the whole remote group (each group gathers at its rank 0, the two
    /// swap, each broadcasts what it got). `send_len`: this rank's block;
    /// `recv_len`: a remote rank's.
    ///
    /// # Safety
    /// `send` must be valid for reads of `send_len` bytes, `recv` for writes
    /// of `recv_len` bytes per remote rank, for the call.
    pub unsafe fn inter_allgather(
        &mut self,
        id: CommId,
        send: *const u8,
        send_len: usize,
        recv: *mut u8,
        recv_len: usize,
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let link = self.leader_link(&c);
        let mine = send_len * c.group.len();
        let theirs = recv_len * inter.remote.len();
        let mut all = vec![0u8; if link.is_some() { mine } else { 0 }];
        // SAFETY: the caller's promise for `send`; `all` outlives it.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Gather {
                    send: Some(send),
                    recv: all.as_mut_ptr(),
                    len: send_len,
                    root: 0,
                },
            )?
        };
        if let Some(link) = link {
            // SAFETY: `all` holds `mine` bytes; `recv` by the caller's promise.
            let got = unsafe { self.swap_bytes(link?, all.as_ptr(), mine, recv, theirs)? };
            short_check(got, theirs)?;
        }
        // SAFETY: the caller's promise.
        unsafe {
            self.coll(
                inter.local,
                CollCall::Bcast {
                    buf: recv,
                    len: theirs,
                    root: 0,
                },
            )
        }
    }

    /// `MPI_Alltoall` on an intercommunicator: block `j` of `send` goes to
    /// remote rank `j`, block `j` of `recv` comes from it; all at once.
    ///
    /// # Safety
    /// `send` must be valid for reads of `send_len` bytes and `recv` for
    /// writes of `recv_len` bytes per remote rank, for the call.
    pub unsafe fn inter_alltoall(
        &mut self,
        id: CommId,
        send: *const u8,
        send_len: usize,
        recv: *mut u8,
        recv_len: usize,
    ) -> Result<()> {
        let n = self.inter_of(id)?.1.remote.len() as u32;
        let sends: Vec<_> = (0..n)
            .map(|j| (j, send.wrapping_add(j as usize * send_len), send_len))
            .collect();
        let recvs: Vec<_> = (0..n)
            .map(|j| (j, recv.wrapping_add(j as usize * recv_len), recv_len))
            .collect();
        // SAFETY: the blocks are in the caller's buffers.
        unsafe { self.inter_pairwise(id, &sends, &recvs) }
    }

    /// The messages between the groups of one collective, all at once:
    /// each send is (remote rank, bytes, length), each receive (remote
    /// rank, buffer, length), and must be filled exactly. The v-variants
    /// (gatherv, scatterv, allgatherv, alltoallv, alltoallw) are made of it. Every
    /// member calls it once per collective, with or without messages.
    ///
    /// # Safety
    /// Every send's bytes must be valid for reads and every receive's
    /// buffer for writes of their lengths, for the call.
    pub unsafe fn inter_pairwise(
        &mut self,
        id: CommId,
        sends: &[(u32, *const u8, usize)],
        recvs: &[(u32, *mut u8, usize)],
    ) -> Result<()> {
        let (c, inter) = self.inter_of(id)?;
        let tag = self.colls.next_tag(c.cid);
        let n = inter.remote.len() as u32;
        let mut peers = sends.iter().map(|m| m.0).chain(recvs.iter().map(|m| m.0));
        if let Some(j) = peers.find(|&j| j >= n) {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("remote rank {j} is not in 0..{n}"),
            ));
        }
        let ctx = c.coll_context();
        let env = Envelope {
            ctx,
            src: c.rank,
            tag,
        };
        let mut reqs = Vec::with_capacity(sends.len() + recvs.len());
        let mut failed = None;
        for &(j, buf, len) in recvs {
            let from = (j, inter.remote[j as usize]);
            // SAFETY: the caller's promise; every request is waited for below.
            reqs.push((
                unsafe { self.p2p.irecv(ctx, Some(from), Some(tag), buf, len) },
                Some(len),
            ));
        }
        for &(j, buf, len) in sends {
            let to = inter.remote[j as usize];
            // SAFETY: as above.
            match unsafe { self.p2p.isend(env, to, buf, len, SendMode::Standard) } {
                Ok(s) => reqs.push((s, None)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for (r, want) in reqs {
            let done = self
                .finish(r)
                .and_then(|got| want.map_or(Ok(()), |w| short_check(got, w)));
            if let Err(e) = done {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// A collective's message must fill the block it lands in (the type
/// signatures on both sides must match).
fn short_check(got: usize, want: usize) -> Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(Error::new(
            ErrorClass::Truncate,
            format!("the other group sent {got} bytes where {want} were expected (the type signatures differ)"),
        ))
    }
}

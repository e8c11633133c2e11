//! Communicators: a group of world ranks and the matching contexts that keep
//! their traffic apart.

use std::sync::Arc;

use crate::runtime::CommId;

/// A communicator as the engine sees it.
#[derive(Clone, Debug)]
pub struct Comm {
    /// Context id; point-to-point traffic uses `2 * cid`, collectives `2 * cid + 1`.
    pub cid: u32,
    /// This rank's rank in the communicator (in its local group).
    pub rank: u32,
    /// World rank of each member, by communicator rank (the local group).
    pub group: Arc<[u32]>,
    /// What an intercommunicator has besides: `None` for an intracommunicator.
    pub inter: Option<Inter>,
}

/// The other side of an intercommunicator.
#[derive(Clone, Debug)]
pub struct Inter {
    /// World rank of each member of the remote group, by remote rank: the
    /// ranks point-to-point calls address.
    pub remote: Arc<[u32]>,
    /// A hidden intracommunicator over the local group (a context of its
    /// own), on which intercommunicator collectives run their local parts.
    pub local: CommId,
}

impl Comm {
    pub fn new(cid: u32, rank: u32, group: Arc<[u32]>) -> Comm {
        Comm {
            cid,
            rank,
            group,
            inter: None,
        }
    }

    /// Size of the local group.
    pub fn size(&self) -> u32 {
        self.group.len() as u32
    }

    /// Whether this is an intercommunicator.
    pub fn is_inter(&self) -> bool {
        self.inter.is_some()
    }

    /// The ranks point-to-point calls address: the remote group of an
    /// intercommunicator, else the group itself.
    pub fn peers(&self) -> &Arc<[u32]> {
        match &self.inter {
            Some(i) => &i.remote,
            None => &self.group,
        }
    }

    /// How many ranks point-to-point calls can address.
    pub fn peer_count(&self) -> u32 {
        self.peers().len() as u32
    }

    /// World rank of peer `r` (a remote rank on an intercommunicator; it
    /// must be in range).
    pub fn peer_world_rank(&self, r: u32) -> u32 {
        self.peers()[r as usize]
    }

    /// Matching context of point-to-point messages.
    pub fn p2p_context(&self) -> u32 {
        2 * self.cid
    }

    /// Matching context of collective traffic, apart from user messages.
    pub fn coll_context(&self) -> u32 {
        2 * self.cid + 1
    }

    /// World rank of communicator rank `r` (which must be in range).
    pub fn world_rank(&self, r: u32) -> u32 {
        self.group[r as usize]
    }
}

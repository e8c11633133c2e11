//! Communicators: a group of world ranks and the matching contexts that keep
//! their traffic apart.

use std::sync::Arc;

/// A communicator as the engine sees it.
#[derive(Clone, Debug)]
pub struct Comm {
    /// Context id; point-to-point traffic uses `2 * cid`, collectives `2 * cid + 1`.
    pub cid: u32,
    /// This rank's rank in the communicator.
    pub rank: u32,
    /// World rank of each member, by communicator rank.
    pub group: Arc<[u32]>,
}

impl Comm {
    pub fn new(cid: u32, rank: u32, group: Arc<[u32]>) -> Comm {
        Comm { cid, rank, group }
    }

    pub fn size(&self) -> u32 {
        self.group.len() as u32
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

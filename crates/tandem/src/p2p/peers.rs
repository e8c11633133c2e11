//! What this rank knows of its peers: whether one is gone, and whether it
//! is reached through shared memory.

use super::P2p;
use crate::error::{Error, ErrorClass};

impl P2p {
    /// Whether `peer` is known to be gone; asks the kernel first when it is
    /// a shared-memory peer (so a peer that died since the last sleep is
    /// seen now). The reason, if gone.
    pub fn peer_gone(&mut self, peer: u32) -> Option<Error> {
        if peer >= self.size || peer == self.rank {
            return None;
        }
        if self.m.lost[peer as usize].is_none() && self.engine.check_exited(peer, &mut self.m) {
            self.flush_outbox();
        }
        self.m.lost[peer as usize]
            .as_ref()
            .map(|why| Error::new(ErrorClass::ProcAborted, why.clone()))
    }

    /// Whether `peer` is known to be gone, without asking anything.
    pub fn peer_known_gone(&self, peer: u32) -> bool {
        self.m.lost.get(peer as usize).is_some_and(Option::is_some)
    }

    /// Whether `peer` is a rank on this host reached through shared memory.
    pub fn is_shm_peer(&self, peer: u32) -> bool {
        peer < self.size && self.engine.is_shm_peer(peer)
    }

    /// Whether every one of `ranks` but this rank is reached through shared
    /// memory (so all of them can map one segment, and wake each other).
    pub fn all_shm_peers(&self, ranks: &[u32]) -> bool {
        ranks.iter().all(|&p| p == self.rank || self.is_shm_peer(p))
    }
}

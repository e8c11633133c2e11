//! Communicator constructors beyond `comm_dup`: a new communicator over any
//! subgroup of a parent (`MPI_Comm_create`, Cartesian topologies) and
//! `MPI_Comm_split`. Every member of the parent takes part, so that the
//! new context id is agreed with the same maximum-over-the-parent scheme as
//! `comm_dup`; disjoint groups created by one call share the id, which is
//! safe because their members never talk to each other in it.

use std::sync::Arc;

use crate::coll::CollCall;
use crate::comm::Comm;
use crate::error::{Error, ErrorClass, Result};
use crate::runtime::{CommId, Runtime};

impl Runtime {
    /// Registers a communicator this rank belongs to.
    fn install_comm(&mut self, cid: u32, group: Arc<[u32]>) -> Result<CommId> {
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
        let slot = self
            .comms
            .iter()
            .skip(2)
            .position(Option::is_none)
            .map(|i| i + 2);
        Ok(match slot {
            Some(i) => {
                self.comms[i] = Some(c);
                CommId(i)
            }
            None => {
                self.comms.push(Some(c));
                CommId(self.comms.len() - 1)
            }
        })
    }

    /// Collective over `parent`: a new communicator whose members are the
    /// world ranks `members` in that order (this rank's view; `None` if it
    /// is not a member). Returns the new communicator of this rank, if any.
    pub fn comm_from_group(
        &mut self,
        parent: CommId,
        members: Option<Arc<[u32]>>,
    ) -> Result<Option<CommId>> {
        self.comm(parent)?;
        let cid = self.allreduce_max_u32(parent, self.next_cid)?;
        self.next_cid = cid + 1;
        match members {
            Some(g) if !g.is_empty() => self.install_comm(cid, g).map(Some),
            _ => Ok(None),
        }
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
        let n = c.size() as usize;
        let mut mine = [0u8; 8];
        mine[..4].copy_from_slice(&color.map_or(-1i32, |x| x as i32).to_le_bytes());
        mine[4..].copy_from_slice(&key.to_le_bytes());
        let mut all = vec![0u8; 8 * n];
        // SAFETY: both buffers outlive the collective, which completes here.
        unsafe {
            self.coll(
                parent,
                CollCall::Allgather {
                    send: Some(mine.as_ptr()),
                    recv: all.as_mut_ptr(),
                    len: 8,
                },
            )?
        };
        let entry = |r: usize| {
            let col = i32::from_le_bytes(all[8 * r..8 * r + 4].try_into().expect("4 bytes"));
            let key = i32::from_le_bytes(all[8 * r + 4..8 * r + 8].try_into().expect("4 bytes"));
            (col, key)
        };
        let members = color.map(|col| {
            let mut ranks: Vec<usize> = (0..n).filter(|&r| entry(r).0 == col as i32).collect();
            ranks.sort_by_key(|&r| (entry(r).1, r));
            ranks
                .iter()
                .map(|&r| c.world_rank(r as u32))
                .collect::<Arc<[u32]>>()
        });
        self.comm_from_group(parent, members)
    }
}

//! Collectives, built on point-to-point in each communicator's collective
//! context. For now: the barrier and the small reduction that agrees on new
//! context ids; the algorithm catalogue grows here.

use crate::comm::Comm;
use crate::error::Result;
use crate::p2p::{Envelope, P2p, SendMode};

const TAG_BARRIER: i32 = 1;
const TAG_ALLREDUCE: i32 = 2;

fn sendrecv(
    p2p: &mut P2p,
    comm: &Comm,
    to: u32,
    from: u32,
    tag: i32,
    out: &[u8],
    inp: &mut [u8],
) -> Result<()> {
    let ctx = comm.coll_context();
    // SAFETY: both buffers outlive the requests, which are waited for below.
    let r = unsafe {
        p2p.irecv(
            ctx,
            Some((from, comm.world_rank(from))),
            Some(tag),
            inp.as_mut_ptr(),
            inp.len(),
        )
    };
    let env = Envelope {
        ctx,
        src: comm.rank,
        tag,
    };
    // SAFETY: as above.
    let s = unsafe {
        p2p.isend(
            env,
            comm.world_rank(to),
            out.as_ptr(),
            out.len(),
            SendMode::Standard,
        )
    };
    let s = match s {
        Ok(s) => s,
        Err(e) => {
            let _ = p2p.cancel(r);
            let _ = p2p.wait(r);
            return Err(e);
        }
    };
    let rs = p2p.wait(r)?;
    let ss = p2p.wait(s)?;
    if let Some(e) = rs.error.or(ss.error) {
        return Err(e);
    }
    Ok(())
}

/// Dissemination barrier: ceil(log2 n) rounds of zero-byte messages, any n.
pub fn barrier(p2p: &mut P2p, comm: &Comm) -> Result<()> {
    let n = comm.size();
    let mut k = 1;
    while k < n {
        let to = (comm.rank + k) % n;
        let from = (comm.rank + n - k) % n;
        sendrecv(p2p, comm, to, from, TAG_BARRIER, &[], &mut [])?;
        k *= 2;
    }
    Ok(())
}

/// The maximum of `value` over the communicator, known to every member
/// (recursive doubling with a fold for non-powers of two).
pub fn allreduce_max_u32(p2p: &mut P2p, comm: &Comm, value: u32) -> Result<u32> {
    let n = comm.size();
    let me = comm.rank;
    let mut acc = value;
    let pof2 = if n.is_power_of_two() {
        n
    } else {
        n.next_power_of_two() / 2
    };
    let extra = n - pof2;
    let mut buf = [0u8; 4];
    // Ranks past the largest power of two hand their value to a partner first.
    if me >= pof2 {
        let partner = me - pof2;
        sendrecv(
            p2p,
            comm,
            partner,
            partner,
            TAG_ALLREDUCE,
            &acc.to_le_bytes(),
            &mut buf,
        )?;
        // The second exchange brings back the result.
        sendrecv(
            p2p,
            comm,
            partner,
            partner,
            TAG_ALLREDUCE,
            &acc.to_le_bytes(),
            &mut buf,
        )?;
        return Ok(u32::from_le_bytes(buf));
    }
    if me < extra {
        sendrecv(
            p2p,
            comm,
            me + pof2,
            me + pof2,
            TAG_ALLREDUCE,
            &acc.to_le_bytes(),
            &mut buf,
        )?;
        acc = acc.max(u32::from_le_bytes(buf));
    }
    let mut mask = 1;
    while mask < pof2 {
        let partner = me ^ mask;
        sendrecv(
            p2p,
            comm,
            partner,
            partner,
            TAG_ALLREDUCE,
            &acc.to_le_bytes(),
            &mut buf,
        )?;
        acc = acc.max(u32::from_le_bytes(buf));
        mask <<= 1;
    }
    if me < extra {
        sendrecv(
            p2p,
            comm,
            me + pof2,
            me + pof2,
            TAG_ALLREDUCE,
            &acc.to_le_bytes(),
            &mut buf,
        )?;
    }
    Ok(acc)
}

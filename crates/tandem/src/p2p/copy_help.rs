//! Copy help: two CPUs copy one large single-copy message.
//!
//! A single-copy read (`process_vm_readv`) runs on the receiver's CPU alone,
//! while the sender of a blocking send, or of a request it waits for, sits
//! in the library until the read ends. From `shm_copy_help_min` on, the
//! receiver splits the copy into chunks, invites the sender (HELP, carrying
//! the receive buffer's address) and starts reading; a sender that sees the
//! invitation writes chunks into the receive buffer (`process_vm_writev`)
//! until none is left. Both claim chunks from one counter the two share
//! (transport/shm.rs), so a sender that computes, or answers late, costs
//! the receiver nothing but the invitation. The receive completes, and FIN
//! goes, once every chunk the sender claimed is written.
//!
//! Only a rank that waits in the library helps: invitations seen while the
//! application computes (by the progress helper thread or the signal
//! handler) are declined, their CPU being the application's, and one seen
//! inside a call that starts or tests a request waits for the rank to wait
//! (a non-blocking send returns at once, whatever its receiver does).

use std::time::Instant;

use super::{Matcher, P2p, Pull, ReqId, Stage};
use crate::shared_mapping::page_size;
use crate::transport::shm::{ReadRemoteError, HELP_FAILED};
use crate::wire::{FrameKind, Header};

/// Bytes of one chunk of an `n`-byte copy: half of it (whole pages), so
/// that a sender that comes at once takes the second half and each side
/// pays one system call; at most 1 MiB, so that a sender that comes late
/// still finds chunks left of a large message. Chunks are whole pages (of
/// the system's size; 1 MiB is a multiple of every common one), so that
/// the two sides of a page-aligned buffer never pin the same page. Their
/// number is even, so that two CPUs claiming in turn copy alike (with
/// 1 MiB chunks, 3 MiB left one CPU 2 MiB to copy: it took 50 us against
/// 4 MiB's 60).
/// (Rounding to pages can make the count odd again, 257 MiB for one: then
/// the next even count is tried, a few times at most.)
pub fn chunk_of(n: u64) -> usize {
    let n = n as usize;
    let mut chunks = n.div_ceil(MAX_CHUNK).max(2).next_multiple_of(2);
    let mut chunk = 0;
    for _ in 0..4 {
        chunk = n
            .div_ceil(chunks)
            .next_multiple_of(page_size())
            .min(MAX_CHUNK);
        if n.div_ceil(chunk).is_multiple_of(2) {
            break;
        }
        chunks += 2;
    }
    chunk
}

const MAX_CHUNK: usize = 1 << 20;

/// Bytes of an `n`-byte helped copy that the busier of its two CPUs
/// copies when both claim chunks from the start at one speed: every other
/// chunk, from the receiver's first, so ceil(c/2) of c chunks (the last
/// of them short where c is odd, which whole pages can still make of a
/// small copy). `n` where the copy has fewer than two chunks (it is read
/// alone). What the time of a helped copy follows. For `tandem bench`'s
/// model.
pub fn copy_help_share(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let chunk = chunk_of(n) as u64;
    let c = n.div_ceil(chunk);
    if c < 2 {
        n
    } else if c.is_multiple_of(2) {
        c / 2 * chunk
    } else {
        c / 2 * chunk + (n - (c - 1) * chunk)
    }
}

/// An invitation this rank, the sender, acts on.
pub(super) struct Invitation {
    sid: ReqId,
    peer: u32,
    /// The receive buffer's address in the receiver.
    addr: u64,
    len: usize,
    generation: u32,
    chunk: usize,
}

/// A read whose sender claimed chunks it has not written yet.
pub(super) struct HelpWait {
    pub(super) pull: Pull,
    buf: *mut u8,
    n: u64,
    /// Chunks the sender claimed.
    helper_chunks: u32,
    /// How this rank's own reads went.
    read: Result<(), ReadRemoteError>,
    started: Option<Instant>,
    /// Looks that found the sender's chunks unfinished.
    looks: u32,
}

/// Unfinished looks between two checks that the sender still lives.
const LOOKS_PER_EXIT_CHECK: u32 = 256;

impl Matcher {
    /// HELP from `peer`: schedule writing chunks of the send it names.
    pub(super) fn on_help(&mut self, peer: u32, h: &Header) -> Result<(), String> {
        let id = ReqId(h.sreq);
        let r = self
            .reqs
            .get(id)
            .ok_or_else(|| format!("HELP for unknown send request {:#x}", h.sreq))?;
        if !r.is_send
            || r.stage != Stage::SendAwaitCts
            || r.peer != Some(peer)
            || h.len > r.len as u64
            || h.src == 0
        {
            return Err(format!(
                "HELP for send request {:#x}, which is not waiting for it",
                h.sreq
            ));
        }
        if !self.async_match {
            // Invitations to sends that ended meanwhile (their rank never
            // waited since) go.
            let reqs = &self.reqs;
            self.helps.retain(|i| {
                reqs.get(i.sid)
                    .is_some_and(|r| r.stage == Stage::SendAwaitCts)
            });
            self.helps.push(Invitation {
                sid: id,
                peer,
                addr: h.rreq,
                len: h.len as usize,
                generation: h.context,
                chunk: h.src as usize,
            });
        }
        Ok(())
    }
}

impl P2p {
    /// Starts single-copy read `p` of `n` bytes into `buf` with its
    /// sender's help: invites it, then reads chunks until none is left.
    /// `None` if no help could be asked (a copy with that sender is open
    /// already, or it is too short to share); the caller reads alone then.
    pub(super) fn read_helped(
        &mut self,
        p: &Pull,
        buf: *mut u8,
        n: u64,
        started: Option<Instant>,
    ) -> Option<HelpWait> {
        let chunk = chunk_of(n);
        let chunks = u32::try_from((n as usize).div_ceil(chunk)).ok()?;
        if chunks < 2 {
            return None;
        }
        let generation = self.engine.open_help(p.peer, chunks)?;
        let invite = Header {
            kind: FrameKind::Help,
            context: generation,
            src: chunk as u32,
            tag: 0,
            len: n,
            sreq: p.sreq,
            rreq: buf as u64,
        };
        if self
            .engine
            .send(p.peer, &invite, std::ptr::null(), 0, None)
            .is_err()
        {
            // The sender is gone: the read alone fails and says so.
            self.engine.close_help(p.peer);
            return None;
        }
        let mut own = 0u32;
        let mut read = Ok(());
        while let Some(k) = self.engine.claim_chunk(p.peer, true, generation, chunks) {
            own += 1;
            let off = k as usize * chunk;
            let len = chunk.min(n as usize - off);
            // SAFETY: `off < n`, and `n` bytes fit the receive buffer.
            let dst = unsafe { buf.add(off) };
            // SAFETY: `dst` is `off` bytes into the receive buffer, which
            // holds `n >= off + len` writable bytes until the receive ends.
            let r = unsafe {
                self.engine
                    .read_remote(p.peer, p.addr + off as u64, dst, len)
            };
            if r.is_err() {
                // Stop the sender too; the caller falls back once the
                // chunks it claimed are written.
                own += self.engine.claim_rest(p.peer, generation, chunks);
                read = r;
                break;
            }
        }
        Some(HelpWait {
            pull: *p,
            buf,
            n,
            helper_chunks: chunks - own,
            read,
            started,
            looks: 0,
        })
    }

    /// Completes the helped reads whose sender wrote every chunk it
    /// claimed. A chunk it could not write is read again here (the whole
    /// message: a rare path).
    pub(super) fn finish_helped_reads(&mut self) {
        for mut w in std::mem::take(&mut self.m.help_waits) {
            let peer = w.pull.peer;
            let waiting = self
                .m
                .reqs
                .get(w.pull.rid)
                .is_some_and(|r| r.stage == (Stage::RecvAwaitData { peer }));
            if !waiting {
                // Failed meanwhile (the sender was lost).
                self.engine.close_help(peer);
                continue;
            }
            let helped = self.engine.helped(peer);
            if helped & !HELP_FAILED < w.helper_chunks {
                w.looks = w.looks.wrapping_add(1);
                if w.looks.is_multiple_of(LOOKS_PER_EXIT_CHECK) {
                    // A sender that died mid-chunk never reports it.
                    self.engine.check_exited(peer, &mut self.m);
                }
                self.m.help_waits.push(w);
                continue;
            }
            self.engine.close_help(peer);
            let mut read = w.read;
            if read.is_ok() && helped & HELP_FAILED != 0 {
                // SAFETY: `w.buf` is the receive buffer, `w.n` bytes long,
                // writable until the receive ends (at `finish_pull`).
                read = unsafe {
                    self.engine
                        .read_remote(peer, w.pull.addr, w.buf, w.n as usize)
                };
            }
            self.finish_pull(&w.pull, w.n, read, w.started);
        }
    }

    /// Acts on the invitations to help copy: writes chunks of the sends
    /// they name until none is left.
    pub(super) fn run_helps(&mut self) {
        for inv in std::mem::take(&mut self.m.helps) {
            let Some(r) = self.m.reqs.get(inv.sid) else {
                continue;
            };
            if r.stage != Stage::SendAwaitCts {
                continue;
            }
            let buf = r.buf as *const u8;
            let Ok(chunks) = u32::try_from(inv.len.div_ceil(inv.chunk)) else {
                continue;
            };
            while let Some(k) = self
                .engine
                .claim_chunk(inv.peer, false, inv.generation, chunks)
            {
                let off = k as usize * inv.chunk;
                let len = inv.chunk.min(inv.len - off);
                // SAFETY: `off < inv.len`, at most the send buffer's length
                // (checked when the invitation came); the send waits for
                // FIN, so its buffer lives.
                let src = unsafe { buf.add(off) };
                // SAFETY: as for `src`: `len` bytes of the live send buffer.
                let ok = unsafe {
                    self.engine
                        .write_remote(inv.peer, inv.addr + off as u64, src, len)
                }
                .is_ok();
                self.engine.report_helped(inv.peer, inv.generation, ok);
                if !ok {
                    break;
                }
                self.m.counters.helped_chunks += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busier_cpu_copies_every_other_chunk() {
        const MI: u64 = 1 << 20;
        let page = page_size() as u64;
        // Up to 2 MiB: two halves, one each.
        assert_eq!(copy_help_share(64 << 10), 32 << 10);
        assert_eq!(copy_help_share(2 * MI), MI);
        // An even number of 1 MiB chunks: half each.
        assert_eq!(copy_help_share(4 * MI), 2 * MI);
        assert_eq!(copy_help_share(6 * MI), 3 * MI);
        // Where 1 MiB chunks would be an odd number, more, smaller ones.
        assert_eq!(chunk_of(3 * MI), 768 << 10);
        assert_eq!(copy_help_share(3 * MI), 3 * MI / 2);
        assert_eq!(copy_help_share(5 * MI), 3 * chunk_of(5 * MI) as u64);
        // (Each of the busier CPU's three chunks rounds up by under a page.)
        assert!(copy_help_share(5 * MI) - 5 * MI / 2 < 3 * page);
        assert!(copy_help_share(4 * MI + 4096) - (2 * MI + 2048) < 3 * page);
        for n in [3 * MI, 5 * MI, 7 * MI + 12345, 65 * MI, 257 * MI] {
            let c = n.div_ceil(chunk_of(n) as u64);
            assert!(c.is_multiple_of(2), "{n} bytes in {c} chunks");
            assert!(chunk_of(n) as u64 <= MI);
        }
        // Halves are whole pages.
        assert_eq!(copy_help_share(2 * page + 1), 2 * page);
        // One chunk: read alone.
        assert_eq!(copy_help_share(1), 1);
        assert_eq!(copy_help_share(0), 0);
    }
}

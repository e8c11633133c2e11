//! Windows whose memory every member maps: one memory file (memfd) made
//! by the first member, holding every member's lock words and segment,
//! mapped by every member at its own address.

use std::sync::atomic::AtomicU64;

use crate::error::{Error, ErrorClass, Result};
use crate::shared_mapping::{memfd, SharedMapping};
use crate::{CommId, Runtime};

/// Bytes of each member's lock words at the start of a shared window's
/// file: its reader-writer word, and a line further its accumulate mutex
/// (apart, so that accumulates do not take the line lock waiters poll).
const CTRL_STRIDE: usize = 128;
const MUTEX_AT: usize = 64;

/// A shared window's memory: one memory file holding every member's lock
/// words and segment, mapped by every member (at its own address).
pub(crate) struct Shared {
    pub(crate) map: SharedMapping,
    /// Each member's segment: where it starts in the file, and its size.
    pub(crate) segments: Vec<(usize, usize)>,
    /// One-sided operations are loads and stores into this memory
    /// ([`super::direct`]); otherwise they go through the engine.
    pub(crate) direct: bool,
}

impl Shared {
    /// This process's address of `rank`'s segment; null for an empty one
    /// (as MPICH does: a program may test for it).
    pub(crate) fn address(&self, rank: usize) -> *mut u8 {
        match self.segments[rank] {
            (_, size) if size > 0 => self.start(rank),
            _ => std::ptr::null_mut(),
        }
    }

    /// Where `rank`'s segment starts in this process, even an empty one.
    pub(crate) fn start(&self, rank: usize) -> *mut u8 {
        // SAFETY: every segment starts within the mapping or at its end,
        // laid out when it was made.
        unsafe { self.map.base().add(self.segments[rank].0) }
    }

    /// `rank`'s reader-writer lock word.
    pub(crate) fn lock_word(&self, rank: usize) -> &AtomicU64 {
        self.word(rank * CTRL_STRIDE)
    }

    /// `rank`'s accumulate mutex word.
    pub(crate) fn mutex_word(&self, rank: usize) -> &AtomicU64 {
        self.word(rank * CTRL_STRIDE + MUTEX_AT)
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at + 8 <= self.segments.first().map_or(0, |s| s.0));
        // SAFETY: the control area lies before the first segment, inside
        // the mapping, page-aligned at its start, so `at` (a multiple of 64)
        // is 8-byte aligned; the words are only ever used atomically, by
        // every process mapping the file.
        unsafe { &*self.map.base().add(at).cast::<AtomicU64>() }
    }
}

/// Where segments of a noncontiguous shared window start: page boundaries,
/// so that no two members' segments share a page (nor a cache line).
const NONCONTIG_ALIGN: usize = 4096;

/// How [`share_memory`] is asked to share a window's memory.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// MPI_Win_allocate_shared: the memory must be shared; members on
    /// different hosts, or memory that cannot be made, are errors.
    Required,
    /// MPI_Win_allocate: shared only to let operations go direct, when every
    /// member can; otherwise (other hosts, `rma_direct=0`, memory that
    /// cannot be mapped) each member allocates its own.
    ForDirect,
}

/// Makes the memory of a shared window on `wcomm` (collective): checks that
/// every member is on this host, lays out the lock words and the segments
/// (contiguous unless some member asked for `noncontig`), has the first
/// member make one memory file for them all and every member map it.
/// `host`: this host's identity (members with equal ones share memory).
/// `direct`: this member may do operations as loads and stores (they are
/// direct only if every member may). All members return the same outcome;
/// `None` when `ForDirect` sharing was not possible.
pub(crate) fn share_memory(
    rt: &mut Runtime,
    wcomm: CommId,
    host: u64,
    size: usize,
    noncontig: bool,
    direct: bool,
    sharing: Sharing,
) -> Result<Option<Shared>> {
    let c = rt.comm(wcomm)?;
    let me = c.rank as usize;
    let all = rt.allgather_u64(wcomm, &[host, size as u64, noncontig as u64, direct as u64])?;
    let members: Vec<&[u64]> = all.chunks_exact(4).collect();
    let direct = members.iter().all(|m| m[3] != 0);
    if let Some(r) = members.iter().position(|m| m[0] != members[0][0]) {
        if sharing == Sharing::ForDirect {
            return Ok(None);
        }
        return Err(Error::new(
            ErrorClass::RmaShared,
            format!(
                "MPI_Win_allocate_shared: ranks 0 and {r} of the communicator are on different \
                 hosts (use MPI_Comm_split_type with MPI_COMM_TYPE_SHARED)"
            ),
        ));
    }
    if sharing == Sharing::ForDirect && !direct {
        return Ok(None);
    }
    let noncontig = members.iter().any(|m| m[2] != 0);
    let sizes: Vec<u64> = members.iter().map(|m| m[1]).collect();
    let (segments, end) = lay_out(&sizes, noncontig)?;
    // The first member makes the file and says where it is; the others map
    // it through /proc. Whoever fails says so in the second exchange, so
    // that every member fails alike.
    let mut error: Option<String> = None;
    let mut map: Option<SharedMapping> = None;
    let mut file = None;
    if me == 0 {
        match memfd(c"tandem-win-shared", end).and_then(|f| {
            let m = SharedMapping::new(std::os::fd::AsRawFd::as_raw_fd(&f), end)?;
            Ok((f, m))
        }) {
            Ok((f, m)) => {
                file = Some(f);
                map = Some(m);
            }
            Err(e) => error = Some(format!("cannot make a memory file of {end} bytes: {e}")),
        }
    }
    let place = [
        u64::from(std::process::id()),
        file.as_ref()
            .map_or(u64::MAX, |f| std::os::fd::AsRawFd::as_raw_fd(f) as u64),
    ];
    let places = rt.allgather_u64(wcomm, &place)?;
    if me != 0 {
        let (pid, fd) = (places[0], places[1]);
        if fd == u64::MAX {
            error = Some("rank 0 could not make the memory".into());
        } else {
            match SharedMapping::of_process(pid as u32, fd as i32, end) {
                Ok(m) => map = Some(m),
                Err(e) => {
                    error = Some(format!(
                        "cannot map rank 0's memory file (/proc/{pid}/fd/{fd}): {e}"
                    ))
                }
            }
        }
    }
    let oks = rt.allgather_u64(wcomm, &[u64::from(error.is_none())])?;
    // Every member has mapped the file (or failed): its descriptor can go,
    // the mappings keep the memory.
    drop(file);
    let failed = oks.iter().position(|&ok| ok == 0);
    match (map, failed) {
        (Some(map), None) => Ok(Some(Shared {
            map,
            segments,
            direct,
        })),
        _ if sharing == Sharing::ForDirect => Ok(None),
        (_, Some(r)) => Err(Error::new(
            ErrorClass::RmaShared,
            format!(
                "MPI_Win_allocate_shared: {}",
                error.unwrap_or_else(|| format!("rank {r} could not map the window's memory"))
            ),
        )),
        (None, None) => Err(Error::new(
            ErrorClass::Intern,
            "MPI_Win_allocate_shared: no mapping, and no member failed",
        )),
    }
}

/// Where each member's segment lies in a shared window's file of members
/// of `sizes` bytes, after the lock words (a page of them at least, so
/// that segments start on a page boundary), each on a page of its own when
/// `noncontig`; and the file's size.
fn lay_out(sizes: &[u64], noncontig: bool) -> Result<(Vec<(usize, usize)>, usize)> {
    let too_large = || Error::new(ErrorClass::Size, "shared window too large");
    let mut segments = Vec::with_capacity(sizes.len());
    let mut end = sizes
        .len()
        .checked_mul(CTRL_STRIDE)
        .and_then(|b| b.checked_next_multiple_of(NONCONTIG_ALIGN))
        .ok_or_else(too_large)?;
    for &size in sizes {
        let start = if noncontig {
            end.checked_next_multiple_of(NONCONTIG_ALIGN)
        } else {
            Some(end)
        };
        let len = usize::try_from(size).ok();
        let next = start.zip(len).and_then(|(a, b)| a.checked_add(b));
        let (Some(start), Some(len), Some(next)) = (start, len, next) else {
            return Err(too_large());
        };
        segments.push((start, len));
        end = next;
    }
    Ok((segments, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_follow_the_lock_words_contiguous_or_page_aligned() {
        let (segs, end) = lay_out(&[10, 0, 100], false).unwrap();
        assert_eq!(segs, [(4096, 10), (4106, 0), (4106, 100)]);
        assert_eq!(end, 4206);
        let (segs, end) = lay_out(&[10, 0, 100], true).unwrap();
        assert_eq!(segs, [(4096, 10), (8192, 0), (8192, 100)]);
        assert_eq!(end, 8292);
        // 64 members' lock words take two pages.
        let (segs, _) = lay_out(&[1; 64], false).unwrap();
        assert_eq!(segs[0].0, 8192);
    }

    #[test]
    fn oversized_segments_are_refused() {
        let e = lay_out(&[u64::MAX, 1], false).unwrap_err();
        assert_eq!(e.class, ErrorClass::Size);
        assert_eq!(e.message, "shared window too large");
    }
}

//! Where a one-sided operation's data lies at its target: the target
//! datatype's contiguous runs, and how they are grouped into engine
//! operations (big runs alone, small ones by the thousand in scattered
//! operations, regular ones compressed into strided blocks).

use std::sync::Arc;

use super::window::Target;
use super::Strided;
use crate::datatype::Layout;
use crate::error::{Error, ErrorClass, Result};

/// The target's contiguous runs of a one-sided operation, (address,
/// bytes): one, held inline (a predefined or contiguous datatype: most
/// operations, which then allocate nothing), or many.
#[derive(Debug)]
pub enum Runs {
    One((u64, usize)),
    Many(Vec<(u64, usize)>),
}

impl std::ops::Deref for Runs {
    type Target = [(u64, usize)];
    fn deref(&self) -> &[(u64, usize)] {
        match self {
            Runs::One(r) => std::slice::from_ref(r),
            Runs::Many(v) => v,
        }
    }
}

/// A target datatype as [`target_runs`] needs it.
pub enum TargetType {
    /// A predefined type whose elements lie packed: their size.
    Packed(usize),
    Layout(Arc<Layout>),
}

/// The target's contiguous runs for `count` elements of `tt` at
/// displacement `disp` in member `t`'s exposed memory `tg` (addresses
/// themselves in a `dynamic` window), adjacent runs merged, and their
/// bytes.
#[inline(always)]
pub fn target_runs(
    tg: &Target,
    dynamic: bool,
    t: u32,
    disp: isize,
    count: usize,
    tt: &TargetType,
) -> Result<(Runs, usize)> {
    if disp < 0 && !dynamic {
        return Err(Error::new(
            ErrorClass::Disp,
            format!("negative target displacement {disp}"),
        ));
    }
    let start = if dynamic {
        disp as u64
    } else {
        tg.base
            .wrapping_add((disp as u64).wrapping_mul(tg.disp_unit))
    };
    let contiguous = match tt {
        TargetType::Packed(elem) => Some((0, *elem)),
        TargetType::Layout(l) => l.contiguous_at().map(|off| (off, l.size)),
    };
    let (runs, bytes) = match (contiguous, tt) {
        // Elements without gaps (a predefined type, a contiguous one) make
        // one run, found without a look at each element (a put of 1 MiB
        // of bytes would otherwise loop a million turns, 1.4 ms).
        (Some((off, size)), _) => {
            let len = size * count;
            let runs = if len > 0 {
                Runs::One((start.wrapping_add(off as i64 as u64), len))
            } else {
                Runs::Many(Vec::new())
            };
            (runs, len)
        }
        (None, TargetType::Layout(l)) => {
            let mut runs = Vec::new();
            push_element_runs(&mut runs, start, count, l);
            (Runs::Many(runs), l.size * count)
        }
        (None, TargetType::Packed(_)) => unreachable!("packed types are contiguous"),
    };
    if !dynamic {
        let end = tg.base + tg.size;
        for &(a, n) in runs.iter() {
            if a < tg.base || a.checked_add(n as u64).is_none_or(|e| e > end) {
                return Err(Error::new(
                    ErrorClass::RmaRange,
                    format!("access beyond rank {t}'s window of {} bytes", tg.size),
                ));
            }
        }
    }
    Ok((runs, bytes))
}

/// [`target_runs`] element by element: each block of each of `count`
/// elements from `start`, adjacent ones merged.
pub fn push_element_runs(runs: &mut Vec<(u64, usize)>, start: u64, count: usize, layout: &Layout) {
    for i in 0..count {
        let elem = start.wrapping_add((i as i64 * layout.extent as i64) as u64);
        for b in &layout.blocks {
            let addr = elem.wrapping_add(b.off as i64 as u64);
            match runs.last_mut() {
                Some(last) if last.0.wrapping_add(last.1 as u64) == addr => last.1 += b.len,
                _ => runs.push((addr, b.len)),
            }
        }
    }
}

/// Runs of at least this many bytes are operations of their own.
pub const OWN_OP_MIN: usize = 64 * 1024;
/// Data bytes of one scattered operation at most.
pub const SCATTER_BYTES: usize = 4 << 20;
/// Strided blocks of one scattered operation at most (their table is
/// 24 bytes each).
pub const SCATTER_BLOCKS: usize = 64 * 1024;

/// Part of a one-sided operation: its data is `[pos, pos + bytes)` of the
/// packed origin data.
#[derive(Debug)]
pub enum Piece {
    /// One contiguous run at `addr`.
    Run { addr: u64, pos: usize, bytes: usize },
    /// Several runs, in order.
    Scattered {
        blocks: Vec<Strided>,
        pos: usize,
        bytes: usize,
    },
}

/// Groups the target's runs into pieces: big runs alone, small ones in
/// scattered operations, adjacent equal runs at a fixed stride merged into
/// one strided block (a column of a matrix is one).
pub fn pieces(runs: &[(u64, usize)]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut cur: Vec<Strided> = Vec::new();
    let (mut start, mut bytes, mut pos) = (0usize, 0usize, 0usize);
    let close = |out: &mut Vec<Piece>, cur: &mut Vec<Strided>, start: usize, bytes: usize| {
        match cur.as_slice() {
            [] => {}
            [b] if b.count == 1 => out.push(Piece::Run {
                addr: b.addr,
                pos: start,
                bytes,
            }),
            _ => out.push(Piece::Scattered {
                blocks: std::mem::take(cur),
                pos: start,
                bytes,
            }),
        }
        cur.clear();
    };
    for &(addr, len) in runs {
        if len >= OWN_OP_MIN {
            close(&mut out, &mut cur, start, bytes);
            out.push(Piece::Run {
                addr,
                pos,
                bytes: len,
            });
            pos += len;
            (start, bytes) = (pos, 0);
            continue;
        }
        if bytes + len > SCATTER_BYTES {
            close(&mut out, &mut cur, start, bytes);
            (start, bytes) = (pos, 0);
        }
        let merged = match cur.last_mut() {
            Some(b) if b.len as usize == len && b.count < u32::MAX => {
                let stride = addr.wrapping_sub(b.addr) as i64;
                if b.count == 1 {
                    b.stride = stride;
                    b.count = 2;
                    true
                } else if stride == b.stride.wrapping_mul(i64::from(b.count)) {
                    b.count += 1;
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if !merged {
            if cur.len() == SCATTER_BLOCKS {
                close(&mut out, &mut cur, start, bytes);
                (start, bytes) = (pos, 0);
            }
            cur.push(Strided {
                addr,
                len: len as u32,
                count: 1,
                stride: 0,
            });
        }
        bytes += len;
        pos += len;
    }
    close(&mut out, &mut cur, start, bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Block, Prim};

    fn target(base: u64, size: u64, disp_unit: u64) -> Target {
        Target {
            key: 1,
            base,
            size,
            disp_unit,
        }
    }

    #[test]
    fn packed_types_make_one_run_at_the_displacement() {
        let tg = target(0x1000, 256, 8);
        let (runs, bytes) = target_runs(&tg, false, 0, 2, 4, &TargetType::Packed(8)).unwrap();
        assert_eq!(&*runs, &[(0x1010, 32)]);
        assert_eq!(bytes, 32);
        let (runs, bytes) = target_runs(&tg, false, 0, 0, 0, &TargetType::Packed(8)).unwrap();
        assert!(runs.is_empty());
        assert_eq!(bytes, 0);
    }

    #[test]
    fn accesses_outside_the_window_are_refused() {
        let tg = target(0x1000, 64, 1);
        let e = target_runs(&tg, false, 3, 60, 8, &TargetType::Packed(1)).unwrap_err();
        assert_eq!(e.class, ErrorClass::RmaRange);
        assert_eq!(e.message, "access beyond rank 3's window of 64 bytes");
        let e = target_runs(&tg, false, 0, -1, 1, &TargetType::Packed(1)).unwrap_err();
        assert_eq!(e.class, ErrorClass::Disp);
        // Dynamic windows take addresses and leave range checks to the target.
        let (runs, _) = target_runs(&tg, true, 0, 0x9000, 4, &TargetType::Packed(1)).unwrap();
        assert_eq!(&*runs, &[(0x9000, 4)]);
    }

    #[test]
    fn element_runs_merge_only_when_adjacent() {
        // Two 4-byte blocks with a 4-byte gap, extent 16.
        let gappy = Layout {
            blocks: vec![Block { off: 0, len: 4 }, Block { off: 8, len: 4 }],
            extent: 16,
            ..Layout::prim(Prim::I32)
        };
        let mut runs = Vec::new();
        push_element_runs(&mut runs, 100, 2, &gappy);
        assert_eq!(runs, [(100, 4), (108, 4), (116, 4), (124, 4)]);
        // The second block ends where the next element's first starts.
        let touching = Layout {
            blocks: vec![Block { off: 0, len: 4 }, Block { off: 8, len: 8 }],
            extent: 16,
            ..Layout::prim(Prim::I32)
        };
        let mut runs = Vec::new();
        push_element_runs(&mut runs, 100, 2, &touching);
        assert_eq!(runs, [(100, 4), (108, 12), (124, 8)]);
    }

    #[test]
    fn pieces_keep_big_runs_alone_and_compress_regular_small_ones() {
        let runs: Vec<(u64, usize)> = (0..10).map(|i| (1000 + i * 64, 8)).collect();
        let p = pieces(&runs);
        assert_eq!(p.len(), 1);
        match &p[0] {
            Piece::Scattered { blocks, pos, bytes } => {
                assert_eq!(
                    blocks,
                    &[Strided {
                        addr: 1000,
                        len: 8,
                        count: 10,
                        stride: 64
                    }]
                );
                assert_eq!((*pos, *bytes), (0, 80));
            }
            Piece::Run { .. } => panic!("ten runs are scattered"),
        }
        let big = [(0u64, 8usize), (4096, OWN_OP_MIN), (1 << 20, 8)];
        let shape: Vec<(u64, usize, usize)> = pieces(&big)
            .iter()
            .map(|p| match p {
                Piece::Run { addr, pos, bytes } => (*addr, *pos, *bytes),
                Piece::Scattered { .. } => panic!("single runs stay runs"),
            })
            .collect();
        assert_eq!(
            shape,
            [
                (0, 0, 8),
                (4096, 8, OWN_OP_MIN),
                (1 << 20, 8 + OWN_OP_MIN, 8)
            ]
        );
    }

    #[test]
    fn scattered_pieces_stay_under_their_byte_limit_and_follow_each_other() {
        let len = OWN_OP_MIN - 1;
        let runs: Vec<(u64, usize)> = (0..200u64)
            .map(|i| (i * i * 3 * OWN_OP_MIN as u64, len))
            .collect();
        let mut seen = 0;
        for p in pieces(&runs) {
            let (pos, bytes) = match p {
                Piece::Run { pos, bytes, .. } | Piece::Scattered { pos, bytes, .. } => (pos, bytes),
            };
            assert!(bytes <= SCATTER_BYTES);
            assert_eq!(pos, seen, "pieces follow each other in the packed data");
            seen += bytes;
        }
        assert_eq!(seen, 200 * len);
    }
}

//! How one-sided operations are written in frames: the flags and the
//! (operation, element type) pair packed into an `Acc` frame's tag, and the
//! table of [`Strided`] target blocks at the head of a scattered payload.

use crate::datatype::{PairKind, Prim};
use crate::error::{Error, ErrorClass, Result};
use crate::ops::{self, PredefOp};

/// Flag in an `Acc` frame's tag: reply with the previous contents.
pub(crate) const ACC_FETCH: i32 = 1 << 16;
/// Flag in an `Acc` frame's tag: compare-and-swap (payload: compare, swap).
pub(crate) const ACC_CAS: i32 = 1 << 17;
/// Flag in an `Acc` frame's tag: answer only a refusal.
pub(crate) const ACC_QUIET: i32 = 1 << 18;
/// Flag in an `Acc` frame's tag, and bit 1 of a `Put` frame's: the payload
/// is a table of [`Strided`] target blocks followed by their data packed in
/// table order (for `MPI_NO_OP`, no data), and `rreq` is unused. One frame
/// carries a scattered datatype's thousands of blocks.
pub(crate) const ACC_SCATTER: i32 = 1 << 19;
pub(crate) const PUT_SCATTER: i32 = 2;
/// Bytes of one encoded [`Strided`] block, and of the table's count.
pub(crate) const STRIDED_LEN: usize = 24;

/// Target blocks of a scattered one-sided operation: `count` blocks of
/// `len` bytes, the first at `addr`, each `stride` bytes after the one
/// before (a datatype's blocks compress to few of these when regular).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    pub addr: u64,
    pub len: u32,
    pub count: u32,
    pub stride: i64,
}

impl Strided {
    /// Address of block `i`.
    pub(crate) fn at(&self, i: u32) -> u64 {
        self.addr
            .wrapping_add((i64::from(i).wrapping_mul(self.stride)) as u64)
    }

    /// Bytes of data of all its blocks.
    pub fn bytes(&self) -> usize {
        self.len as usize * self.count as usize
    }
}

/// Appends the table of `blocks` to `out`.
pub(crate) fn encode_table(blocks: &[Strided], out: &mut Vec<u8>) {
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    for b in blocks {
        out.extend_from_slice(&b.addr.to_le_bytes());
        out.extend_from_slice(&b.len.to_le_bytes());
        out.extend_from_slice(&b.count.to_le_bytes());
        out.extend_from_slice(&b.stride.to_le_bytes());
    }
}

/// The table at the start of a scattered payload, and the data after it.
pub(crate) fn decode_table(
    payload: &[u8],
) -> std::result::Result<(Vec<Strided>, &[u8]), ErrorClass> {
    let n = payload
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or(ErrorClass::Intern)?;
    let end = n
        .checked_mul(STRIDED_LEN)
        .and_then(|t| t.checked_add(4))
        .filter(|&e| e <= payload.len())
        .ok_or(ErrorClass::Intern)?;
    let blocks = payload[4..end]
        .chunks_exact(STRIDED_LEN)
        .map(|c| Strided {
            addr: u64::from_le_bytes(c[0..8].try_into().expect("8 bytes")),
            len: u32::from_le_bytes(c[8..12].try_into().expect("4 bytes")),
            count: u32::from_le_bytes(c[12..16].try_into().expect("4 bytes")),
            stride: i64::from_le_bytes(c[16..24].try_into().expect("8 bytes")),
        })
        .collect();
    Ok((blocks, &payload[end..]))
}

/// The operations and element types an `Acc` frame's tag names, by index.
const OPS: [PredefOp; 14] = [
    PredefOp::Sum,
    PredefOp::Prod,
    PredefOp::Min,
    PredefOp::Max,
    PredefOp::Land,
    PredefOp::Lor,
    PredefOp::Lxor,
    PredefOp::Band,
    PredefOp::Bor,
    PredefOp::Bxor,
    PredefOp::MinLoc,
    PredefOp::MaxLoc,
    PredefOp::Replace,
    PredefOp::NoOp,
];

const PRIMS: [Prim; 25] = [
    Prim::I8,
    Prim::I16,
    Prim::I32,
    Prim::I64,
    Prim::U8,
    Prim::U16,
    Prim::U32,
    Prim::U64,
    Prim::F32,
    Prim::F64,
    Prim::LongDouble,
    Prim::Bool,
    Prim::Logical4,
    Prim::C32,
    Prim::C64,
    Prim::CLongDouble,
    Prim::Byte,
    Prim::Pair(PairKind::F32),
    Prim::Pair(PairKind::F64),
    Prim::Pair(PairKind::I64),
    Prim::Pair(PairKind::I32),
    Prim::Pair(PairKind::I16),
    Prim::Pair(PairKind::LongDouble),
    Prim::Pair(PairKind::RealReal),
    Prim::Pair(PairKind::DoubleDouble),
];

/// The operation and element type of an accumulate, packed into a tag.
pub(crate) fn acc_tag(op: PredefOp, prim: Prim) -> Option<i32> {
    let o = OPS.iter().position(|&x| x == op)?;
    let p = PRIMS.iter().position(|&x| x == prim)?;
    Some(o as i32 | ((p as i32) << 8))
}

pub(crate) fn acc_untag(tag: i32) -> Option<(PredefOp, Prim)> {
    let op = *OPS.get((tag & 0xff) as usize)?;
    let prim = *PRIMS.get(((tag >> 8) & 0xff) as usize)?;
    Some((op, prim))
}

/// Whether one-sided frames can describe `prim` (opaque Fortran types
/// cannot be computed on; moving them is a plain put).
pub fn accumulate_supported(op: PredefOp, prim: Prim) -> bool {
    acc_tag(op, prim).is_some()
        && (matches!(op, PredefOp::Replace | PredefOp::NoOp) || ops::applies(op, prim))
}

/// The payload of a scattered operation: the table of `blocks`, then
/// `data` (`len` bytes) if any.
///
/// # Safety
/// `data`, if given, must be valid for reads of `len` bytes.
pub(crate) unsafe fn scattered_payload(
    blocks: &[Strided],
    data: Option<(*const u8, usize)>,
) -> Result<Vec<u8>> {
    let len = data.map_or(0, |d| d.1);
    let size = 4 + blocks.len() * STRIDED_LEN + len;
    if size as u64 > crate::wire::MAX_EAGER || blocks.len() > u32::MAX as usize {
        return Err(Error::new(
            ErrorClass::Count,
            "one scattered operation carries at most 64 MiB",
        ));
    }
    let mut payload = Vec::with_capacity(size);
    encode_table(blocks, &mut payload);
    if let Some((p, n)) = data.filter(|d| d.1 > 0) {
        // SAFETY: the caller's promise.
        payload.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulate_tags_round_trip() {
        for &op in &OPS {
            for &prim in &PRIMS {
                let t = acc_tag(op, prim).unwrap();
                assert!(t >= 0);
                assert_eq!(acc_untag(t), Some((op, prim)));
            }
        }
        assert_eq!(acc_untag(0xff), None);
    }
}

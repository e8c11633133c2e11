//! Datatypes as the engine sees them: where the bytes of one element lie in
//! memory (a list of contiguous blocks), its bounds, and its signature (the
//! primitive values it is made of, in order).
//!
//! Data travels *packed*: the blocks of each element one after the other,
//! without the gaps between them. A layout whose element is one block as
//! wide as its extent ([`Layout::contiguous_at`]) is moved straight from and
//! into the user's buffer; any other is packed into a staging buffer on the
//! send side and unpacked on the receive side.

use std::sync::Arc;

/// A primitive value: what reductions and `MPI_Get_elements` look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prim {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    /// C `long double` (x87 80-bit in 16 bytes on x86_64).
    LongDouble,
    /// C `_Bool` / `bool` (one byte).
    Bool,
    /// Fortran `LOGICAL` of 4 bytes (non-zero is true).
    Logical4,
    /// Complex of two `float`.
    C32,
    /// Complex of two `double`.
    C64,
    /// Complex of two `long double`.
    CLongDouble,
    /// Raw bytes (`MPI_BYTE`, `MPI_PACKED`): bitwise operations only.
    Byte,
    /// A value-index pair for `MPI_MINLOC` / `MPI_MAXLOC`.
    Pair(PairKind),
    /// Moved only, never reduced (Fortran types Tandem cannot compute on).
    Opaque(u8),
}

/// The value part of a value-index pair (the index is a C `int`, except in
/// Fortran's `MPI_2REAL` and `MPI_2DOUBLE_PRECISION`, whose index is a real
/// of the value's kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PairKind {
    F32,
    F64,
    I64,
    I32,
    I16,
    LongDouble,
    /// `MPI_2REAL`: two REALs.
    RealReal,
    /// `MPI_2DOUBLE_PRECISION`: two DOUBLE PRECISIONs.
    DoubleDouble,
}

impl PairKind {
    /// Bytes of the value.
    pub fn value_size(self) -> usize {
        match self {
            PairKind::F32 | PairKind::I32 | PairKind::RealReal => 4,
            PairKind::F64 | PairKind::I64 | PairKind::DoubleDouble => 8,
            PairKind::I16 => 2,
            PairKind::LongDouble => 16,
        }
    }

    /// Bytes of the index.
    pub fn index_size(self) -> usize {
        match self {
            PairKind::RealReal | PairKind::DoubleDouble => self.value_size(),
            _ => 4,
        }
    }

    /// Offset of the index in the C struct `{ V value; int index; }`.
    pub fn index_offset(self) -> usize {
        self.value_size().max(4)
    }

    /// `sizeof` the C struct.
    pub fn extent(self) -> usize {
        let align = self.value_size().clamp(4, 16);
        (self.index_offset() + self.index_size()).div_ceil(align) * align
    }
}

impl Prim {
    /// Bytes of data (packed).
    pub fn size(self) -> usize {
        match self {
            Prim::I8 | Prim::U8 | Prim::Bool | Prim::Byte => 1,
            Prim::I16 | Prim::U16 => 2,
            Prim::I32 | Prim::U32 | Prim::F32 | Prim::Logical4 => 4,
            Prim::I64 | Prim::U64 | Prim::F64 | Prim::C32 => 8,
            Prim::LongDouble | Prim::C64 => 16,
            Prim::CLongDouble => 32,
            Prim::Pair(k) => k.value_size() + k.index_size(),
            Prim::Opaque(n) => n as usize,
        }
    }

    /// Basic elements in one value (`MPI_Get_elements`): the pair types
    /// (`MPI_DOUBLE_INT` ...) count as their value and their int.
    pub fn elements(self) -> usize {
        match self {
            Prim::Pair(_) => 2,
            _ => 1,
        }
    }

    /// Alignment in memory (for the padding of structs).
    pub fn align(self) -> usize {
        match self {
            Prim::C32 => 4,
            Prim::C64 => 8,
            Prim::CLongDouble | Prim::LongDouble => 16,
            Prim::Pair(k) => k.value_size().clamp(4, 16),
            Prim::Opaque(n) => (n as usize).clamp(1, 8),
            p => p.size(),
        }
    }

    /// Bytes in memory (`sizeof`).
    pub fn extent(self) -> usize {
        match self {
            Prim::Pair(k) => k.extent(),
            p => p.size(),
        }
    }

    /// The contiguous runs of data inside one value, relative to its start.
    fn blocks(self) -> Vec<Block> {
        match self {
            Prim::Pair(k) if k.index_offset() != k.value_size() => vec![
                Block {
                    off: 0,
                    len: k.value_size(),
                },
                Block {
                    off: k.index_offset() as isize,
                    len: k.index_size(),
                },
            ],
            p => vec![Block {
                off: 0,
                len: p.size(),
            }],
        }
    }
}

/// A contiguous run of bytes of one element, relative to the element's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub off: isize,
    pub len: usize,
}

/// The memory layout and signature of one element of a datatype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of data in one element (`MPI_Type_size`).
    pub size: usize,
    /// Lower bound and extent (`MPI_Type_get_extent`).
    pub lb: isize,
    pub extent: isize,
    /// Bounds of the bytes really occupied (`MPI_Type_get_true_extent`).
    pub true_lb: isize,
    pub true_extent: isize,
    /// Contiguous runs of one element, in typemap order, adjacent ones merged.
    pub blocks: Vec<Block>,
    /// The signature, run-length encoded.
    pub prims: Vec<(Prim, usize)>,
    /// Largest alignment of the primitives (struct padding).
    pub align: usize,
    /// Bounds set explicitly (by `create_resized`), which struct padding respects.
    pub explicit_bounds: bool,
}

fn push_block(blocks: &mut Vec<Block>, b: Block) {
    if b.len == 0 {
        return;
    }
    if let Some(last) = blocks.last_mut() {
        if last.off + last.len as isize == b.off {
            last.len += b.len;
            return;
        }
    }
    blocks.push(b);
}

/// Widens the bounds `lb`..`ub` and adds to `size` for `n` copies of `t`
/// placed at `disp`, one extent apart.
const OVERFLOW: &str = "datatype extent overflows";

fn n_copies_done(
    lb: &mut Option<isize>,
    ub: &mut Option<isize>,
    size: &mut usize,
    disp: isize,
    n: usize,
    t: &Layout,
) -> std::result::Result<(), String> {
    let first = disp.checked_add(t.lb).ok_or(OVERFLOW)?;
    let last = isize::try_from(n - 1)
        .ok()
        .and_then(|k| k.checked_mul(t.extent))
        .and_then(|x| x.checked_add(disp))
        .and_then(|x| x.checked_add(t.ub()))
        .ok_or(OVERFLOW)?;
    let lo = first.min(last.checked_sub(t.extent).ok_or(OVERFLOW)?);
    let hi = last.max(first.checked_add(t.extent).ok_or(OVERFLOW)?);
    *lb = Some(lb.map_or(lo, |x| x.min(lo)));
    *ub = Some(ub.map_or(hi, |x| x.max(hi)));
    *size = size
        .checked_add(t.size.checked_mul(n).ok_or("datatype size overflows")?)
        .ok_or("datatype size overflows")?;
    Ok(())
}

fn push_prims(prims: &mut Vec<(Prim, usize)>, p: Prim, n: usize) {
    if n == 0 {
        return;
    }
    if let Some(last) = prims.last_mut() {
        if last.0 == p {
            last.1 += n;
            return;
        }
    }
    prims.push((p, n));
}

/// Errors of the constructors: a message for `MPI_ERR_ARG` / `MPI_ERR_COUNT`.
pub type BuildResult = std::result::Result<Layout, String>;

/// Largest number of blocks a flattened layout may have.
const MAX_BLOCKS: usize = 1 << 24;

impl Layout {
    /// A predefined type made of one primitive.
    pub fn prim(p: Prim) -> Layout {
        let ext = p.extent() as isize;
        Layout {
            size: p.size(),
            lb: 0,
            extent: ext,
            true_lb: 0,
            true_extent: ext,
            blocks: p.blocks(),
            prims: vec![(p, 1)],
            align: p.align(),
            explicit_bounds: false,
        }
    }

    /// The upper bound.
    pub fn ub(&self) -> isize {
        self.lb + self.extent
    }

    /// If one element is a single run of data as wide as the extent (so that
    /// `count` elements are `count * size` contiguous bytes), the offset of
    /// that run from the buffer address.
    pub fn contiguous_at(&self) -> Option<isize> {
        match self.blocks.as_slice() {
            [] => Some(0),
            [b] if b.len as isize == self.extent => Some(b.off),
            _ => None,
        }
    }

    /// The only primitive of the signature, if there is exactly one kind.
    pub fn single_prim(&self) -> Option<Prim> {
        let first = self.prims.first()?.0;
        self.prims.iter().all(|&(p, _)| p == first).then_some(first)
    }

    /// Primitive values in one element.
    pub fn prim_count(&self) -> usize {
        self.prims.iter().map(|&(_, n)| n).sum()
    }

    /// A layout made of `parts`: (displacement in bytes, block length in
    /// elements, element layout), as `MPI_Type_create_struct` describes it;
    /// every other constructor is a special case.
    fn compose(parts: &[(isize, usize, &Layout)], is_struct: bool) -> BuildResult {
        let mut blocks = Vec::new();
        let mut size = 0usize;
        let mut lb: Option<isize> = None;
        let mut ub: Option<isize> = None;
        let mut align = 1;
        let mut explicit = false;
        for &(disp, n, t) in parts {
            if n == 0 {
                continue;
            }
            align = align.max(t.align);
            explicit |= t.explicit_bounds;
            // Copies of an element that is one run as wide as its extent
            // join into one run: no per-copy blocks, so `MPI_Type_contiguous(INT_MAX,
            // MPI_CHAR)` is one block, not two billion.
            if let [b] = t.blocks.as_slice() {
                // (A signature of several kinds of values would still grow
                // by `n` entries: left to the block count check below.)
                if b.len as isize == t.extent && t.prims.len() == 1 {
                    let len = b.len.checked_mul(n).ok_or("datatype size overflows")?;
                    push_block(
                        &mut blocks,
                        Block {
                            off: disp.checked_add(b.off).ok_or(OVERFLOW)?,
                            len,
                        },
                    );
                    n_copies_done(&mut lb, &mut ub, &mut size, disp, n, t)?;
                    continue;
                }
            }
            let total = t
                .blocks
                .len()
                .checked_mul(n)
                .and_then(|x| x.checked_add(blocks.len()))
                .filter(|&x| x <= MAX_BLOCKS)
                .ok_or("the datatype has too many separate blocks")?;
            blocks.reserve(total - blocks.len());
            for j in 0..n {
                let base = (j as isize)
                    .checked_mul(t.extent)
                    .and_then(|x| x.checked_add(disp))
                    .ok_or(OVERFLOW)?;
                for b in &t.blocks {
                    push_block(
                        &mut blocks,
                        Block {
                            off: base.checked_add(b.off).ok_or(OVERFLOW)?,
                            len: b.len,
                        },
                    );
                }
            }
            n_copies_done(&mut lb, &mut ub, &mut size, disp, n, t)?;
        }
        let mut prims = Vec::new();
        for &(_, n, t) in parts {
            if t.prims.len() == 1 {
                push_prims(&mut prims, t.prims[0].0, t.prims[0].1 * n);
            } else {
                for _ in 0..n {
                    for &(p, c) in &t.prims {
                        push_prims(&mut prims, p, c);
                    }
                }
            }
        }
        let lb = lb.unwrap_or(0);
        let mut ub = ub.unwrap_or(0);
        if is_struct && !explicit {
            let ext = ub - lb;
            let a = align as isize;
            ub = lb + (ext + a - 1).div_euclid(a) * a;
        }
        let (true_lb, true_ub) = if blocks.is_empty() {
            (0, 0)
        } else {
            let lo = blocks.iter().map(|b| b.off).min().unwrap_or(0);
            let hi = blocks
                .iter()
                .map(|b| b.off + b.len as isize)
                .max()
                .unwrap_or(0);
            (lo, hi)
        };
        Ok(Layout {
            size,
            lb,
            extent: ub - lb,
            true_lb,
            true_extent: true_ub - true_lb,
            blocks,
            prims,
            align,
            explicit_bounds: explicit,
        })
    }

    /// `MPI_Type_contiguous`.
    pub fn contiguous(count: usize, old: &Layout) -> BuildResult {
        Self::compose(&[(0, count, old)], false)
    }

    /// `MPI_Type_create_hvector` (`stride` in bytes).
    pub fn hvector(count: usize, blocklen: usize, stride: isize, old: &Layout) -> BuildResult {
        // Blocks that touch one another make one run: the same type map as
        // `count * blocklen` contiguous elements.
        let one_run = matches!(old.blocks.as_slice(), [b] if b.len as isize == old.extent);
        if one_run && blocklen > 0 && Some(stride) == (blocklen as isize).checked_mul(old.extent) {
            let n = count
                .checked_mul(blocklen)
                .ok_or("datatype size overflows")?;
            return Self::contiguous(n, old);
        }
        // Refused before the list of blocks is built: two billion of them
        // would exhaust memory (the process aborts), not fail the call.
        if count > MAX_BLOCKS {
            return Err("the datatype has too many separate blocks".into());
        }
        let parts = (0..count)
            .map(|i| {
                Ok((
                    (i as isize).checked_mul(stride).ok_or(OVERFLOW)?,
                    blocklen,
                    old,
                ))
            })
            .collect::<std::result::Result<Vec<(isize, usize, &Layout)>, String>>()?;
        Self::compose(&parts, false)
    }

    /// `MPI_Type_vector` (`stride` in elements of `old`).
    pub fn vector(count: usize, blocklen: usize, stride: isize, old: &Layout) -> BuildResult {
        let bytes = stride.checked_mul(old.extent).ok_or(OVERFLOW)?;
        Self::hvector(count, blocklen, bytes, old)
    }

    /// `MPI_Type_create_hindexed` (displacements in bytes).
    pub fn hindexed(blocklens: &[usize], disps: &[isize], old: &Layout) -> BuildResult {
        let parts: Vec<(isize, usize, &Layout)> = blocklens
            .iter()
            .zip(disps)
            .map(|(&n, &d)| (d, n, old))
            .collect();
        Self::compose(&parts, false)
    }

    /// `MPI_Type_indexed` (displacements in elements of `old`).
    pub fn indexed(blocklens: &[usize], disps: &[isize], old: &Layout) -> BuildResult {
        let bytes = disps
            .iter()
            .map(|&d| {
                d.checked_mul(old.extent)
                    .ok_or_else(|| OVERFLOW.to_string())
            })
            .collect::<std::result::Result<Vec<isize>, String>>()?;
        Self::hindexed(blocklens, &bytes, old)
    }

    /// `MPI_Type_create_struct`.
    pub fn create_struct(blocklens: &[usize], disps: &[isize], types: &[&Layout]) -> BuildResult {
        let parts: Vec<(isize, usize, &Layout)> = blocklens
            .iter()
            .zip(disps)
            .zip(types)
            .map(|((&n, &d), &t)| (d, n, t))
            .collect();
        Self::compose(&parts, true)
    }

    /// `MPI_Type_create_resized`.
    pub fn resized(old: &Layout, lb: isize, extent: isize) -> Layout {
        Layout {
            lb,
            extent,
            explicit_bounds: true,
            ..old.clone()
        }
    }

    /// `MPI_Type_create_subarray` (C or Fortran order).
    pub fn subarray(
        sizes: &[usize],
        subsizes: &[usize],
        starts: &[usize],
        c_order: bool,
        old: &Layout,
    ) -> BuildResult {
        let nd = sizes.len();
        // Dimensions from the fastest-varying one.
        let order: Vec<usize> = if c_order {
            (0..nd).rev().collect()
        } else {
            (0..nd).collect()
        };
        let mut t = old.clone();
        let mut stride = old.extent;
        let mut offset: isize = 0;
        for &d in &order {
            if subsizes[d]
                .checked_add(starts[d])
                .is_none_or(|end| end > sizes[d])
                || subsizes[d] == 0
            {
                return Err(format!(
                    "subarray dimension {d}: start {} + subsize {} exceeds size {}",
                    starts[d], subsizes[d], sizes[d]
                ));
            }
            offset = isize::try_from(starts[d])
                .ok()
                .and_then(|s| s.checked_mul(stride))
                .and_then(|x| x.checked_add(offset))
                .ok_or(OVERFLOW)?;
            t = Self::hvector(subsizes[d], 1, stride, &t)?;
            stride = isize::try_from(sizes[d])
                .ok()
                .and_then(|n| n.checked_mul(stride))
                .ok_or(OVERFLOW)?;
        }
        let shifted = Self::hindexed(&[1], &[offset], &t)?;
        Ok(Self::resized(&shifted, old.lb, stride))
    }

    /// Packs `count` elements at `src` into `out` (appended).
    ///
    /// # Safety
    /// `src` must be valid for reads of every byte the layout's blocks
    /// cover for `count` elements.
    pub unsafe fn pack(&self, src: *const u8, count: usize, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(self.size * count);
        if let Some(off) = self.contiguous_at() {
            let n = self.size * count;
            if n > 0 {
                // SAFETY: the caller's promise: `count` contiguous elements at `src + off`.
                out.extend_from_slice(unsafe { std::slice::from_raw_parts(src.offset(off), n) });
            }
            return;
        }
        // SAFETY: the new length is within the reserved capacity; every byte
        // is written below before anyone reads it.
        unsafe { out.set_len(start + self.size * count) };
        let mut at = start;
        for i in 0..count {
            let base = i as isize * self.extent;
            for b in &self.blocks {
                // SAFETY: the caller's promise covers the block; `out` has room.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.offset(base + b.off),
                        out.as_mut_ptr().add(at),
                        b.len,
                    )
                };
                at += b.len;
            }
        }
    }

    /// Unpacks `data` (at most `count` elements; a shorter `data` fills a
    /// prefix) into `dst`; returns the bytes used.
    ///
    /// # Safety
    /// `dst` must be valid for writes of every byte the layout's blocks
    /// cover for `count` elements.
    pub unsafe fn unpack(&self, data: &[u8], dst: *mut u8, count: usize) -> usize {
        let total = data.len().min(self.size * count);
        if let Some(off) = self.contiguous_at() {
            if total > 0 {
                // SAFETY: the caller's promise.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst.offset(off), total) };
            }
            return total;
        }
        let mut at = 0usize;
        'outer: for i in 0..count {
            let base = i as isize * self.extent;
            for b in &self.blocks {
                if at >= total {
                    break 'outer;
                }
                let n = b.len.min(total - at);
                // SAFETY: the caller's promise covers the block; `data` has `n` more bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr().add(at),
                        dst.offset(base + b.off),
                        n,
                    )
                };
                at += n;
            }
        }
        at
    }

    /// Primitive values in `bytes` bytes of packed data (`MPI_Get_elements`);
    /// `None` if they end inside a value.
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return Some(0);
        }
        let whole = bytes / self.size;
        let mut rest = bytes % self.size;
        let per_value: usize = self.prims.iter().map(|&(p, c)| c * p.elements()).sum();
        let mut n = whole * per_value;
        for &(p, c) in &self.prims {
            if rest == 0 {
                break;
            }
            let s = p.size();
            let take = (rest / s).min(c);
            n += take * p.elements();
            rest -= take * s;
            if take < c {
                // A pair cut after its value still holds that value.
                if let Prim::Pair(k) = p {
                    if rest >= k.value_size() {
                        n += 1;
                        rest -= k.value_size();
                    }
                }
                break;
            }
        }
        (rest == 0).then_some(n)
    }
}

/// A shared, immutable layout.
pub type LayoutRef = Arc<Layout>;

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Layout {
        Layout::prim(Prim::I32)
    }

    #[test]
    fn elements_count_both_halves_of_pairs() {
        let di = Layout::prim(Prim::Pair(PairKind::F64));
        // Two MPI_DOUBLE_INT values are four basic elements.
        assert_eq!(di.elements_in(2 * 12), Some(4));
        // One whole pair and the double of the next: three.
        assert_eq!(di.elements_in(12 + 8), Some(3));
        // Ending inside the double is no whole number of elements.
        assert_eq!(di.elements_in(12 + 4), None);
        assert_eq!(int().elements_in(12), Some(3));
    }

    #[test]
    fn vector_blocks_bounds_and_pack_round_trip() {
        let v = Layout::vector(3, 2, 4, &int()).unwrap();
        assert_eq!(v.size, 24);
        assert_eq!(v.lb, 0);
        assert_eq!(v.extent, (2 * 4 + 2) * 4);
        assert_eq!(v.blocks.len(), 3);
        assert_eq!(v.contiguous_at(), None);
        let src: Vec<i32> = (0..40).collect();
        let mut packed = Vec::new();
        // SAFETY: `src` covers two elements (extent 40 bytes, stride 40).
        unsafe { v.pack(src.as_ptr().cast(), 2, &mut packed) };
        let vals: Vec<i32> = packed
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, vec![0, 1, 4, 5, 8, 9, 10, 11, 14, 15, 18, 19]);
        let mut dst = vec![-1i32; 40];
        // SAFETY: as above.
        let used = unsafe { v.unpack(&packed, dst.as_mut_ptr().cast(), 2) };
        assert_eq!(used, 48);
        for (i, &x) in dst.iter().enumerate().take(20) {
            let inside = [0, 1, 4, 5, 8, 9].contains(&(i % 10));
            assert_eq!(x, if inside { i as i32 } else { -1 }, "index {i}");
        }
    }

    #[test]
    fn contiguous_merges_into_one_block() {
        let c = Layout::contiguous(5, &int()).unwrap();
        assert_eq!(c.blocks, vec![Block { off: 0, len: 20 }]);
        assert_eq!(c.contiguous_at(), Some(0));
        assert_eq!(c.elements_in(8), Some(2));
        assert_eq!(c.elements_in(6), None);
    }

    #[test]
    fn two_billion_bytes_in_a_row_are_one_block() {
        // The BigMPI idiom: chunks of INT_MAX bytes, then a few of those.
        let ch = Layout::prim(Prim::I8);
        let chunk = Layout::contiguous(i32::MAX as usize, &ch).unwrap();
        assert_eq!(
            chunk.blocks,
            vec![Block {
                off: 0,
                len: i32::MAX as usize
            }]
        );
        let chunks = Layout::contiguous(3, &chunk).unwrap();
        assert_eq!(chunks.size, 3 * i32::MAX as usize);
        assert_eq!(chunks.extent, 3 * i32::MAX as isize);
        assert_eq!(chunks.blocks.len(), 1);
        // Runs that are not as wide as their extent stay separate blocks.
        let gap = Layout::vector(2, 1, 2, &int()).unwrap();
        assert_eq!(Layout::contiguous(3, &gap).unwrap().blocks.len(), 4);
        // A vector whose blocks touch is one run too.
        let v = Layout::vector(3 << 30, 2, 2, &ch).unwrap();
        assert_eq!(
            v.blocks,
            vec![Block {
                off: 0,
                len: 6 << 30
            }]
        );
        assert_eq!(v.extent, 6 << 30);
    }

    #[test]
    fn a_billion_separate_blocks_fail_without_exhausting_memory() {
        let four_ints = Layout::contiguous(4, &int()).unwrap();
        let gaps = Layout::vector(i32::MAX as usize / 2, 1, 3, &four_ints);
        assert_eq!(
            gaps.unwrap_err(),
            "the datatype has too many separate blocks"
        );
        // Nor contiguous copies of a run holding two kinds of values.
        let f = Layout::prim(Prim::F32);
        let mixed = Layout::create_struct(&[1, 1], &[0, 4], &[&int(), &f]).unwrap();
        assert_eq!(mixed.blocks, vec![Block { off: 0, len: 8 }]);
        assert_eq!(mixed.extent, 8);
        assert!(Layout::contiguous(i32::MAX as usize, &mixed).is_err());
    }

    #[test]
    fn an_extent_beyond_isize_fails() {
        // 8 GiB, 2^31 times: more than isize::MAX bytes (was a wrapped,
        // negative extent).
        let big = Layout::contiguous(i32::MAX as usize, &int()).unwrap();
        assert_eq!(
            Layout::contiguous(i32::MAX as usize, &big).unwrap_err(),
            "datatype extent overflows"
        );
    }

    #[test]
    fn struct_is_padded_to_alignment_unless_resized() {
        let d = Layout::prim(Prim::F64);
        let ch = Layout::prim(Prim::I8);
        let s = Layout::create_struct(&[1, 1], &[0, 8], &[&d, &ch]).unwrap();
        assert_eq!(s.size, 9);
        assert_eq!(s.extent, 16);
        assert_eq!(s.true_extent, 9);
        assert_eq!(s.elements_in(9 + 8), Some(3));
        let r = Layout::resized(&s, 0, 9);
        assert_eq!(r.extent, 9);
        assert_eq!(r.contiguous_at(), Some(0));
    }

    #[test]
    fn pair_types_have_padding() {
        let p = Layout::prim(Prim::Pair(PairKind::F64));
        assert_eq!(p.size, 12);
        assert_eq!(p.extent, 16);
        assert_eq!(p.contiguous_at(), None);
        let p = Layout::prim(Prim::Pair(PairKind::I16));
        assert_eq!(p.size, 6);
        assert_eq!(p.extent, 8);
        let p = Layout::prim(Prim::Pair(PairKind::I32));
        assert_eq!(p.contiguous_at(), Some(0));
    }

    #[test]
    fn negative_stride_and_resized_bounds() {
        let v = Layout::hvector(3, 1, -8, &int()).unwrap();
        assert_eq!(v.lb, -16);
        assert_eq!(v.extent, 20);
        assert_eq!(v.true_lb, -16);
        let sub = Layout::subarray(&[4, 5], &[2, 3], &[1, 1], true, &int()).unwrap();
        assert_eq!(sub.size, 24);
        assert_eq!(sub.extent, 80);
        assert_eq!(sub.blocks[0], Block { off: 24, len: 12 });
    }
}

//! MPI-IO file views: which bytes of a file a rank sees. A view is a
//! displacement, an elementary type (the unit of offsets) and a filetype
//! that tiles the file from the displacement, one copy per filetype extent;
//! the data the rank sees is the filetype's blocks, tile after tile, which
//! this module turns into file byte ranges with the datatype engine's
//! flattened block list (binary search over the blocks' cumulative sizes,
//! so a view of many small blocks costs a logarithm per access, not a walk).

use std::sync::Arc;

use tandem::datatype::Layout;
use tandem::ErrorClass;

/// Checks that a view's type has its blocks at non-negative, increasing
/// displacements, not overlapping unless `overlap_ok`.
fn monotonic(t: &Layout, overlap_ok: bool) -> Result<(), &'static str> {
    let mut prev: Option<(isize, isize)> = None;
    for b in &t.blocks {
        if b.off < 0 {
            return Err("a block at a negative displacement");
        }
        if let Some((start, end)) = prev {
            if b.off < start {
                return Err("blocks at decreasing displacements");
            }
            if b.off < end && !overlap_ok {
                return Err("overlapping blocks");
            }
        }
        prev = Some((b.off, b.off + b.len as isize));
    }
    Ok(())
}

/// A view, as the data access functions use it.
#[derive(Clone)]
pub struct View {
    /// Bytes from the start of the file to the first tile.
    pub disp: u64,
    /// Bytes per elementary datatype (offsets count in these).
    pub esize: u64,
    /// Filetype extent: the distance between tiles.
    extent: u64,
    /// The filetype's blocks, offsets relative to a tile's start.
    blocks: Vec<(u64, u64)>,
    /// Data bytes of the blocks before each block, and the total at the end.
    before: Vec<u64>,
}

impl View {
    /// A view over `etype` and `filetype` from `disp`; the error class and
    /// a message if they cannot make one: no data, not whole elementary
    /// types (`MPI_ERR_TYPE`), or, as ROMIO has it, blocks at negative or
    /// decreasing displacements or overlapping (`MPI_ERR_IO`; overlaps are
    /// allowed in a file opened read-only).
    pub fn new(
        disp: u64,
        etype: &Layout,
        filetype: &Arc<Layout>,
        read_only: bool,
    ) -> Result<View, (ErrorClass, String)> {
        let type_err = |m: String| Err((ErrorClass::Type, m));
        if etype.size == 0 {
            return type_err("the elementary datatype holds no data".into());
        }
        if filetype.size == 0 || filetype.extent <= 0 {
            return type_err("the filetype holds no data or has no positive extent".into());
        }
        if !filetype.size.is_multiple_of(etype.size) {
            return type_err(format!(
                "the filetype ({} bytes) is not made of whole elementary types ({} bytes)",
                filetype.size, etype.size
            ));
        }
        for (what, t) in [("elementary datatype", etype), ("filetype", &**filetype)] {
            monotonic(t, read_only).map_err(|m| (ErrorClass::Io, format!("the {what} has {m}")))?;
        }
        let mut blocks = Vec::with_capacity(filetype.blocks.len());
        let mut before = Vec::with_capacity(filetype.blocks.len() + 1);
        let mut total = 0u64;
        for b in &filetype.blocks {
            let off = b.off as u64;
            before.push(total);
            blocks.push((off, b.len as u64));
            total += b.len as u64;
        }
        before.push(total);
        Ok(View {
            disp,
            esize: etype.size as u64,
            extent: filetype.extent as u64,
            blocks,
            before,
        })
    }

    /// The default view: the file as bytes.
    pub fn bytes() -> View {
        View {
            disp: 0,
            esize: 1,
            extent: 1,
            blocks: vec![(0, 1)],
            before: vec![0, 1],
        }
    }

    /// Data bytes per tile.
    fn tile_size(&self) -> u64 {
        *self.before.last().unwrap_or(&0)
    }

    /// Whether the data is one contiguous run from the displacement.
    fn contiguous(&self) -> bool {
        self.blocks.len() == 1 && self.blocks[0] == (0, self.extent)
    }

    /// The block holding data byte `within` of a tile, and the byte's
    /// distance into it.
    fn locate(&self, within: u64) -> (usize, u64) {
        // The last block starting at or before `within`.
        let i = self.before[..self.blocks.len()].partition_point(|&b| b <= within) - 1;
        (i, within - self.before[i])
    }

    /// File byte of data byte `pos` of the view (a position exactly at the
    /// end of a block maps to the start of the next one).
    pub fn file_offset(&self, pos: u64) -> u64 {
        if self.contiguous() {
            return self.disp + pos;
        }
        let (tile, within) = (pos / self.tile_size(), pos % self.tile_size());
        let (i, into) = self.locate(within);
        self.disp + tile * self.extent + self.blocks[i].0 + into
    }

    /// Appends the file byte ranges `(offset, length)` of data bytes
    /// `[pos, pos + len)` of the view to `out`, merging adjacent ones.
    pub fn ranges(&self, pos: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        let mut push = |off: u64, n: u64| {
            if n == 0 {
                return;
            }
            match out.last_mut() {
                Some(last) if last.0 + last.1 == off => last.1 += n,
                _ => out.push((off, n)),
            }
        };
        if self.contiguous() {
            push(self.disp + pos, len);
            return;
        }
        let ts = self.tile_size();
        let (mut tile, within) = (pos / ts, pos % ts);
        let (mut i, mut into) = self.locate(within);
        let mut left = len;
        while left > 0 {
            let (off, blen) = self.blocks[i];
            let n = (blen - into).min(left);
            push(self.disp + tile * self.extent + off + into, n);
            left -= n;
            into = 0;
            i += 1;
            if i == self.blocks.len() {
                i = 0;
                tile += 1;
            }
        }
    }

    /// Data bytes of the view that lie below file byte `end` (those a file
    /// of `end` bytes holds).
    pub fn data_below(&self, end: u64) -> u64 {
        if end <= self.disp {
            return 0;
        }
        let rel = end - self.disp;
        let (tiles, rest) = (rel / self.extent, rel % self.extent);
        let partial: u64 = self
            .blocks
            .iter()
            .map(|&(off, len)| rest.saturating_sub(off).min(len))
            .sum();
        tiles * self.tile_size() + partial
    }

    /// The offset, in elementary types, of the end of a file of `size`
    /// bytes (`MPI_SEEK_END`, `MPI_MODE_APPEND`): the first elementary type
    /// not wholly before it.
    pub fn end_offset(&self, size: u64) -> u64 {
        self.data_below(size).div_ceil(self.esize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem::datatype::Prim;

    fn int() -> Layout {
        Layout::prim(Prim::I32)
    }

    #[test]
    fn contiguous_view_is_one_range_from_the_displacement() {
        let v = View::new(100, &int(), &Arc::new(int()), false).unwrap();
        let mut r = Vec::new();
        v.ranges(8, 40, &mut r);
        assert_eq!(r, vec![(108, 40)]);
        assert_eq!(v.file_offset(8), 108);
        assert_eq!(v.end_offset(100), 0);
        assert_eq!(v.end_offset(110), 3);
    }

    #[test]
    fn strided_view_maps_tile_after_tile() {
        // Two ints of every six, the rank's blocks at byte 8 of each tile:
        // a vector of 1 block of 2 ints resized to an extent of 24 bytes,
        // placed by an hindexed-like offset via the displacement.
        let block = Layout::contiguous(2, &int()).unwrap();
        let ft = Arc::new(Layout::resized(&block, 0, 24));
        let v = View::new(8, &int(), &ft, false).unwrap();
        let mut r = Vec::new();
        v.ranges(0, 20, &mut r);
        assert_eq!(r, vec![(8, 8), (32, 8), (56, 4)]);
        r.clear();
        // From the middle of a block.
        v.ranges(4, 8, &mut r);
        assert_eq!(r, vec![(12, 4), (32, 4)]);
        // The end of a block maps to the start of the next tile's.
        assert_eq!(v.file_offset(8), 32);
        // A 40-byte file holds the first tile's 8 bytes and 8 of the second.
        assert_eq!(v.data_below(40), 16);
        assert_eq!(v.data_below(36), 12);
        assert_eq!(v.end_offset(34), 3);
    }

    #[test]
    fn vector_filetype_blocks_merge_across_tiles_when_adjacent() {
        let ft = Arc::new(Layout::vector(2, 1, 2, &int()).unwrap());
        // Blocks at 0 and 8, extent 12: the second tile starts at 12.
        let v = View::new(0, &int(), &ft, false).unwrap();
        let mut r = Vec::new();
        v.ranges(0, 16, &mut r);
        assert_eq!(r, vec![(0, 4), (8, 8), (20, 4)]);
    }

    #[test]
    fn bad_filetypes_are_refused() {
        let ch = Layout::prim(Prim::I8);
        let three = Arc::new(Layout::contiguous(3, &ch).unwrap());
        assert_eq!(
            View::new(0, &int(), &three, false).err().unwrap().0,
            ErrorClass::Type
        );
        let neg = Arc::new(Layout::hvector(2, 1, -8, &int()).unwrap());
        assert_eq!(
            View::new(0, &int(), &neg, false).err().unwrap().0,
            ErrorClass::Io
        );
        // Blocks of 3 ints at 0 and 1 int at 1: overlapping, fine read-only.
        let overlap = Arc::new(Layout::indexed(&[3, 1], &[0, 1], &int()).unwrap());
        assert_eq!(
            View::new(0, &int(), &overlap, false).err().unwrap().0,
            ErrorClass::Io
        );
        assert!(View::new(0, &int(), &overlap, true).is_ok());
        let decreasing = Arc::new(Layout::indexed(&[1, 1], &[3, 0], &int()).unwrap());
        assert!(View::new(0, &int(), &decreasing, true).is_err());
    }
}

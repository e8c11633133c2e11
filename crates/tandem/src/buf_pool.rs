//! Byte buffers kept for reuse. A fresh buffer of a MiB or more faults its
//! pages in one by one, and glibc hands large freed blocks back to the
//! kernel, so code that needs such buffers over and over (one-sided reply
//! snapshots, collective staging) keeps the old ones instead.

/// Buffers kept up to a number and a total capacity.
pub struct BufPool {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
    max_bytes: usize,
    max_count: usize,
}

impl BufPool {
    pub const fn new(max_bytes: usize, max_count: usize) -> BufPool {
        BufPool {
            bufs: Vec::new(),
            bytes: 0,
            max_bytes,
            max_count,
        }
    }

    /// The smallest kept buffer that holds `len` bytes, emptied.
    pub fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        let i = (self.bufs.iter().enumerate())
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)?;
        let mut b = self.bufs.swap_remove(i);
        self.bytes -= b.capacity();
        b.clear();
        Some(b)
    }

    /// Keeps `b` if there is room for it.
    pub fn give(&mut self, b: Vec<u8>) {
        let cap = b.capacity();
        if cap > 0 && self.bufs.len() < self.max_count && self.bytes + cap <= self.max_bytes {
            self.bytes += cap;
            self.bufs.push(b);
        }
    }

    /// Every buffer kept.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Their total capacity.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_fitting_buffer_is_taken_and_limits_hold() {
        let mut pool = BufPool::new(1000, 3);
        let (big, small) = (Vec::<u8>::with_capacity(600), Vec::<u8>::with_capacity(100));
        let (big_at, small_at) = (big.as_ptr(), small.as_ptr());
        pool.give(big);
        pool.give(small);
        pool.give(Vec::new()); // nothing to keep
        assert_eq!((pool.len(), pool.bytes()), (2, 700));
        assert_eq!(pool.take(50).map(|b| b.as_ptr()), Some(small_at));
        assert!(pool.take(700).is_none());
        let b = pool.take(100).unwrap();
        assert_eq!((b.as_ptr(), b.len()), (big_at, 0));
        assert!(pool.is_empty() && pool.bytes() == 0);
        // Room: 1000 bytes and 3 buffers.
        pool.give(b);
        pool.give(Vec::with_capacity(500)); // over the bytes
        pool.give(Vec::with_capacity(200));
        pool.give(Vec::with_capacity(100));
        pool.give(Vec::with_capacity(10)); // over the count
        assert_eq!((pool.len(), pool.bytes()), (3, 900));
    }
}

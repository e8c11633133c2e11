//! The free ranges of a region carved into blocks: first fit, and ranges
//! merged with their neighbours when given back. Shared by the heaps that
//! peers map (the shared heap of large allocations, `shm_heap`, and
//! RWAPI's heap in the MPI layer).

use std::collections::BTreeMap;

/// Offset -> length of every free range, none adjacent to another.
#[derive(Debug, Default)]
pub struct FreeRanges(BTreeMap<usize, usize>);

impl FreeRanges {
    pub const fn new() -> FreeRanges {
        FreeRanges(BTreeMap::new())
    }

    /// Takes `len` bytes from the lowest free range that holds them at an
    /// offset whose address (`base` + offset) is a multiple of `align` (a
    /// power of two); the rest of that range stays free. Its offset.
    pub fn carve(&mut self, base: usize, align: usize, len: usize) -> Option<usize> {
        let (at, flen, start) = self.0.iter().find_map(|(&at, &flen)| {
            let start = (base.checked_add(at)?.checked_add(align - 1)? & !(align - 1)) - base;
            (start.checked_add(len)? <= at + flen).then_some((at, flen, start))
        })?;
        self.0.remove(&at);
        if start > at {
            self.0.insert(at, start - at);
        }
        if start + len < at + flen {
            self.0.insert(start + len, at + flen - start - len);
        }
        Some(start)
    }

    /// Takes `at..at + len` if all of it is free (growing the block that
    /// ends at `at`); whether it did.
    pub fn take_at(&mut self, at: usize, len: usize) -> bool {
        match self.0.get(&at) {
            Some(&flen) if flen >= len => {
                self.0.remove(&at);
                if flen > len {
                    self.0.insert(at + len, flen - len);
                }
                true
            }
            _ => false,
        }
    }

    /// Frees `at..at + len`, merged with the free ranges around it.
    pub fn give_back(&mut self, mut at: usize, mut len: usize) {
        if let Some((&prev, &plen)) = self.0.range(..at).next_back() {
            if prev + plen == at {
                self.0.remove(&prev);
                at = prev;
                len += plen;
            }
        }
        if let Some(next) = self.0.remove(&(at + len)) {
            len += next;
        }
        self.0.insert(at, len);
    }

    /// How many separate free ranges there are.
    pub fn count(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_carved_first_fit_and_merged_when_given_back() {
        let mut f = FreeRanges::new();
        f.give_back(0, 100);
        assert_eq!(f.carve(0, 1, 30), Some(0));
        // Aligned by address: base 8 + offset 56 is a multiple of 64.
        assert_eq!(f.carve(8, 64, 10), Some(56));
        assert_eq!(f.count(), 2, "30..56 and 66..100 stay free");
        assert_eq!(f.carve(0, 1, 50), None);
        assert!(f.take_at(66, 4));
        assert!(!f.take_at(70, 40));
        f.give_back(0, 30);
        f.give_back(56, 10);
        f.give_back(66, 4);
        assert_eq!(f.count(), 1);
        assert_eq!(f.carve(0, 1, 100), Some(0));
        assert_eq!(f.count(), 0);
    }
}

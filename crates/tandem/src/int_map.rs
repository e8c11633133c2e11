//! Hash maps keyed by integers the library hands out itself (region keys,
//! block addresses, context ids, operation kinds), with a multiplicative
//! hash instead of the standard SipHash: a look-up sits on the path of
//! every one-sided write and every collective, where SipHash cost about a
//! hundred instructions per key. The keys come from
//! this job's own ranks, so resistance to chosen keys buys nothing here.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hash map with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// Multiply-rotate hashing of integer keys (the Fx hash of rustc).
#[derive(Clone, Copy, Default)]
pub struct IntHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IntHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IntHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn write_isize(&mut self, n: isize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_apart_and_back() {
        let mut m: IntMap<u32, u32> = IntMap::default();
        // Sequential keys, and keys with the high bit the RWAPI heap uses.
        for k in 0..1000u32 {
            m.insert(k, k * 2);
            m.insert(k | 1 << 31, k * 3);
        }
        assert_eq!(m.len(), 2000);
        for k in 0..1000u32 {
            assert_eq!(m[&k], k * 2);
            assert_eq!(m[&(k | 1 << 31)], k * 3);
        }
        assert!(!m.contains_key(&1000));
        let mut h1 = IntHasher::default();
        let mut h2 = IntHasher::default();
        h1.write_u32(1);
        h2.write_u32(2);
        assert_ne!(h1.finish(), h2.finish());
    }
}

//! Locks that live in memory shared between the processes of a host: a
//! reader-writer lock and a mutex, each one 64-bit word. MPI windows whose
//! memory every member maps use them for passive-target epochs
//! (`MPI_Win_lock`) and to keep accumulates atomic, so that no target
//! process takes part. Only the attempts are here; how a caller waits
//! between them (spin, yield, sleep until woken, look for dead holders) is
//! its business. Holders are named by rank + 1, so a waiter can ask
//! whether the holder is still alive.

use std::sync::atomic::{AtomicU64, Ordering};

/// Reader-writer word: the low 32 bits count shared holders, bits 32-62
/// hold the exclusive holder's rank + 1 (0: none), and the top bit says an
/// exclusive request waits: new shared holds are refused meanwhile, so a
/// stream of readers cannot keep a writer out for ever (seconds at a time,
/// measured with 7 ranks in lock_all loops on 2 cores, before).
pub struct RwWord<'a>(pub &'a AtomicU64);

const EXCLUSIVE_SHIFT: u32 = 32;
const SHARED_MASK: u64 = (1 << EXCLUSIVE_SHIFT) - 1;
const WRITER_WAITS: u64 = 1 << 63;
const EXCLUSIVE_MASK: u64 = !SHARED_MASK & !WRITER_WAITS;

impl RwWord<'_> {
    /// Takes the lock exclusively for `rank` if nobody holds it; else says
    /// that a writer waits (the caller tries again until it gets the lock,
    /// or calls [`RwWord::give_up`]).
    pub fn try_exclusive(&self, rank: u32) -> bool {
        let mine = (u64::from(rank) + 1) << EXCLUSIVE_SHIFT;
        let mut v = self.0.load(Ordering::Relaxed);
        loop {
            let (next, taken) = if v & !WRITER_WAITS == 0 {
                (mine, true)
            } else if v & WRITER_WAITS == 0 {
                (v | WRITER_WAITS, false)
            } else {
                return false;
            };
            match self
                .0
                .compare_exchange_weak(v, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return taken,
                Err(now) => v = now,
            }
        }
    }

    /// Takes a shared hold if nobody holds the lock exclusively and no
    /// exclusive request waits.
    pub fn try_shared(&self) -> bool {
        let mut v = self.0.load(Ordering::Relaxed);
        loop {
            if v & !SHARED_MASK != 0 || v & SHARED_MASK == SHARED_MASK {
                return false;
            }
            match self
                .0
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// Gives an exclusive hold back: what the holder wrote is visible to
    /// whoever takes the lock next.
    pub fn release_exclusive(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// Gives a shared hold back.
    pub fn release_shared(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// An exclusive request that will not try again withdraws its claim, so
    /// that readers are not refused on its behalf (another waiting writer
    /// claims again at its next try).
    pub fn give_up(&self) {
        self.0.fetch_and(!WRITER_WAITS, Ordering::Relaxed);
    }

    /// The rank holding the lock exclusively, if one does.
    pub fn exclusive_holder(&self) -> Option<u32> {
        let h = (self.0.load(Ordering::Relaxed) & EXCLUSIVE_MASK) >> EXCLUSIVE_SHIFT;
        (h != 0).then(|| (h - 1) as u32)
    }
}

/// Mutex word: 0 when free, else the holder's rank + 1.
pub struct MutexWord<'a>(pub &'a AtomicU64);

impl MutexWord<'_> {
    /// Takes the mutex for `rank` if it is free.
    pub fn try_lock(&self, rank: u32) -> bool {
        // Read first: waiters then spin on a shared cache line instead of
        // taking it from the holder with every attempt.
        self.0.load(Ordering::Relaxed) == 0
            && self
                .0
                .compare_exchange(0, u64::from(rank) + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Frees the mutex: what the holder wrote is visible to the next one.
    pub fn unlock(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// The rank holding the mutex, if one does.
    pub fn holder(&self) -> Option<u32> {
        let h = self.0.load(Ordering::Relaxed);
        (h != 0).then(|| (h - 1) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn exclusive_excludes_everyone_and_shared_share() {
        let w = AtomicU64::new(0);
        let l = RwWord(&w);
        assert!(l.try_shared());
        assert!(l.try_shared());
        assert!(!l.try_exclusive(3), "exclusive while shared holders remain");
        l.release_shared();
        l.release_shared();
        assert!(l.try_exclusive(3));
        assert_eq!(l.exclusive_holder(), Some(3));
        assert!(!l.try_shared());
        assert!(!l.try_exclusive(4));
        l.release_exclusive();
        assert_eq!(l.exclusive_holder(), None);
        assert!(l.try_shared());
    }

    #[test]
    fn a_waiting_writer_keeps_new_readers_out() {
        let w = AtomicU64::new(0);
        let l = RwWord(&w);
        assert!(l.try_shared());
        assert!(!l.try_exclusive(2), "a reader holds it");
        assert!(!l.try_shared(), "a writer waits: no new reader");
        assert_eq!(l.exclusive_holder(), None);
        l.release_shared();
        assert!(l.try_exclusive(2), "the last reader left");
        assert_eq!(l.exclusive_holder(), Some(2));
        l.release_exclusive();
        assert!(l.try_shared());
        assert!(!l.try_exclusive(5));
        l.give_up();
        assert!(l.try_shared(), "the writer gave up");
        l.release_shared();
        l.release_shared();
        assert_eq!(w.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn mutex_names_its_holder_and_serialises_threads() {
        let w = Arc::new(AtomicU64::new(0));
        let m = MutexWord(&w);
        assert!(m.try_lock(0));
        assert_eq!(m.holder(), Some(0));
        assert!(!m.try_lock(1));
        m.unlock();
        assert_eq!(m.holder(), None);
        // A non-atomic read-modify-write under the mutex loses no update.
        let counter = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4u32)
            .map(|r| {
                let (w, counter) = (w.clone(), counter.clone());
                std::thread::spawn(move || {
                    let m = MutexWord(&w);
                    for _ in 0..20_000 {
                        while !m.try_lock(r) {
                            std::hint::spin_loop();
                        }
                        let v = counter.load(Ordering::Relaxed);
                        counter.store(v + 1, Ordering::Relaxed);
                        m.unlock();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 80_000);
    }
}

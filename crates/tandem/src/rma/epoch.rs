//! A window's synchronisation state at this member: which access and
//! exposure epochs are open (fence, locks, post/start groups), and whether
//! an access to a target falls inside one.

use crate::error::{Error, ErrorClass, Result};

/// Whether this member holds a target's lock, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockHeld {
    No,
    /// Granted by the target.
    Yes,
    /// Taken in the window's shared memory (see `super::direct::lock`).
    Word {
        exclusive: bool,
    },
    /// Under an assertion that no other member conflicts: no lock was
    /// asked for.
    NoCheck,
}

/// The epochs open at this member of a window.
#[derive(Debug)]
pub struct Epochs {
    locks: Vec<LockHeld>,
    lock_all: bool,
    fence_open: bool,
    start_group: Option<Vec<u32>>,
    post_group: Option<Vec<u32>>,
}

impl Epochs {
    /// No epoch open, for a window of `members` members.
    pub fn new(members: usize) -> Epochs {
        Epochs {
            locks: vec![LockHeld::No; members],
            lock_all: false,
            fence_open: false,
            start_group: None,
            post_group: None,
        }
    }

    /// How target `t`'s lock is held.
    pub fn lock(&self, t: u32) -> LockHeld {
        self.locks[t as usize]
    }

    pub fn set_lock(&mut self, t: u32, held: LockHeld) {
        self.locks[t as usize] = held;
    }

    /// Whether a lock-all epoch is open.
    pub fn lock_all(&self) -> bool {
        self.lock_all
    }

    pub fn set_lock_all(&mut self, open: bool) {
        self.lock_all = open;
    }

    /// Whether any passive-target epoch is open (lock-all, or a lock).
    pub fn any_lock(&self) -> bool {
        self.lock_all || self.locks.iter().any(|&l| l != LockHeld::No)
    }

    /// Whether a passive-target epoch covers target `t`.
    pub fn passive(&self, t: u32) -> bool {
        self.lock_all || self.locks[t as usize] != LockHeld::No
    }

    /// Opens (or closes) the access epoch between fences.
    pub fn set_fence_open(&mut self, open: bool) {
        self.fence_open = open;
    }

    /// The targets of the open start (access) epoch.
    pub fn start_group(&self) -> Option<&[u32]> {
        self.start_group.as_deref()
    }

    pub fn set_start_group(&mut self, group: Option<Vec<u32>>) {
        self.start_group = group;
    }

    /// The origins of the open post (exposure) epoch.
    pub fn post_group(&self) -> Option<&[u32]> {
        self.post_group.as_deref()
    }

    pub fn set_post_group(&mut self, group: Option<Vec<u32>>) {
        self.post_group = group;
    }

    /// Checks that an access to target `t` is inside an epoch.
    #[inline(always)]
    pub fn check_access(&self, t: u32) -> Result<()> {
        let ok = self.fence_open
            || self.lock_all
            || self.locks[t as usize] != LockHeld::No
            || self.start_group.as_ref().is_some_and(|g| g.contains(&t));
        if ok {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::RmaSync,
                format!("access to rank {t} outside an access epoch (fence, lock or start first)"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_need_an_epoch_of_some_kind() {
        let mut e = Epochs::new(3);
        let err = e.check_access(1).unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaSync);
        e.set_fence_open(true);
        assert!(e.check_access(1).is_ok());
        e.set_fence_open(false);
        e.set_start_group(Some(vec![2]));
        assert!(e.check_access(2).is_ok());
        assert!(e.check_access(1).is_err());
        e.set_start_group(None);
        e.set_lock(1, LockHeld::Yes);
        assert!(e.check_access(1).is_ok() && e.check_access(0).is_err());
        e.set_lock(1, LockHeld::No);
        e.set_lock_all(true);
        assert!((0..3).all(|t| e.check_access(t).is_ok()));
    }

    #[test]
    fn passive_epochs_cover_their_targets() {
        let mut e = Epochs::new(2);
        assert!(!e.any_lock() && !e.passive(0));
        e.set_lock(0, LockHeld::Word { exclusive: true });
        assert!(e.any_lock() && e.passive(0) && !e.passive(1));
        e.set_lock(0, LockHeld::No);
        assert!(!e.any_lock());
        e.set_lock_all(true);
        assert!(e.any_lock() && e.passive(1));
        e.set_lock_all(false);
        e.set_lock(1, LockHeld::NoCheck);
        assert!(e.passive(1) && e.lock(1) == LockHeld::NoCheck);
    }

    #[test]
    fn post_and_start_groups_open_and_close() {
        let mut e = Epochs::new(4);
        assert_eq!(e.post_group(), None);
        e.set_post_group(Some(vec![1, 3]));
        assert_eq!(e.post_group(), Some(&[1, 3][..]));
        e.set_post_group(None);
        assert_eq!(e.post_group(), None);
        e.set_start_group(Some(vec![0]));
        assert_eq!(e.start_group(), Some(&[0][..]));
    }
}

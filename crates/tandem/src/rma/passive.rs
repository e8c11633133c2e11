//! Passive-target synchronisation: taking and giving back a target's lock,
//! through the target's engine or, for direct windows, in the window's
//! shared memory. Each is a step that a wait letting other threads in
//! (`MPI_THREAD_MULTIPLE`) may stop and run again later.

use super::completion::{wait_serving, Completion};
use super::epoch::LockHeld;
use super::window::Window;
use super::{direct, OpId, OpState};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::P2p;
use crate::Runtime;

/// Where a lock or unlock of one target stands, across the runs of its
/// step.
#[derive(Default)]
pub struct Passive {
    /// The lock or unlock request sent to the target's engine.
    op: Option<OpId>,
    /// The unlock's wait for the operations to the target.
    ops: Option<Completion>,
    /// What that wait found (the lock is given back whatever it was).
    done: Option<Result<()>>,
    polls: u32,
    waited: bool,
}

/// Waits until `op` is answered; false when the wait stopped early.
/// `serving`: as [`wait_serving`] waits.
fn wait_op(rt: &mut Runtime, op: OpId, may_end: bool, serving: Option<&mut bool>) -> bool {
    let answered = |p2p: &P2p| {
        !matches!(
            p2p.op_state(op),
            Some(OpState::Pending | OpState::LocalDone)
        )
    };
    if let Some(waited) = serving {
        return wait_serving(rt, answered, may_end, waited);
    }
    rt.wait_until_or_hand_over_if(|p2p, _| answered(p2p), may_end)
}

impl Window {
    /// Takes the lock of member `t` (see [`Passive`]); `nocheck`: the
    /// program asserts no conflict, so none is asked for. `None` when the
    /// wait stopped early.
    pub fn lock_step(
        &mut self,
        rt: &mut Runtime,
        t: u32,
        exclusive: bool,
        nocheck: bool,
        st: &mut Passive,
        may_end: bool,
    ) -> Option<Result<()>> {
        if self.epochs.lock(t) != LockHeld::No {
            return Some(Err(Error::new(
                ErrorClass::RmaSync,
                format!("rank {t} is already locked in this window"),
            )));
        }
        let held = if nocheck {
            // Nothing to wait for, but others may wait for this rank (see
            // `wait_serving`).
            rt.progress_once();
            LockHeld::NoCheck
        } else if direct::is_direct(self) {
            if let Err(e) = direct::lock(rt, self, t, exclusive, &mut st.polls, may_end)? {
                return Some(Err(e));
            }
            LockHeld::Word { exclusive }
        } else {
            let id = match st.op {
                Some(id) => id,
                None => {
                    let (world, key) = (self.group()[t as usize], self.target(t).key);
                    match rt.p2p().lock(world, key, exclusive) {
                        Ok(id) => *st.op.insert(id),
                        Err(e) => return Some(Err(e)),
                    }
                }
            };
            if !wait_op(rt, id, may_end, Some(&mut st.waited)) {
                return None;
            }
            if let Some(Err(e)) = rt.p2p().op_take(id) {
                return Some(Err(e));
            }
            LockHeld::Yes
        };
        self.epochs.set_lock(t, held);
        Some(Ok(()))
    }

    /// Gives back the lock of member `t` once the operations to it are
    /// complete (see [`Passive`]); `wake`: members asleep on a lock word
    /// look again (an unlock of every member wakes them once, after the
    /// last).
    pub fn unlock_step(
        &mut self,
        rt: &mut Runtime,
        t: u32,
        wake: bool,
        st: &mut Passive,
        may_end: bool,
    ) -> Option<Result<()>> {
        let held = self.epochs.lock(t);
        if held == LockHeld::No {
            return Some(Err(Error::new(
                ErrorClass::RmaSync,
                format!("rank {t} is not locked in this window"),
            )));
        }
        if st.done.is_none() {
            if st.ops.is_none() {
                match Completion::start(rt, self, Some(t)) {
                    Ok(c) => st.ops = Some(c),
                    Err(e) => st.done = Some(Err(e)),
                }
            }
            if let Some(c) = st.ops.as_mut() {
                if !c.wait(rt, may_end) {
                    return None;
                }
                let c = st.ops.take().expect("looked at above");
                // The lock is released even when an operation failed.
                st.done = Some(c.finish(rt, self));
            }
        }
        if let LockHeld::Word { exclusive } = held {
            direct::unlock(rt, self, t, exclusive, wake);
        }
        if held == LockHeld::Yes {
            let id = match st.op {
                Some(id) => id,
                None => {
                    let (world, key) = (self.group()[t as usize], self.target(t).key);
                    match rt.p2p().unlock(world, key) {
                        Ok(id) => *st.op.insert(id),
                        Err(e) => return Some(Err(e)),
                    }
                }
            };
            if !wait_op(rt, id, may_end, None) {
                return None;
            }
            if let Some(Err(e)) = rt.p2p().op_take(id) {
                return Some(Err(e));
            }
        }
        self.epochs.set_lock(t, LockHeld::No);
        st.done.take()
    }
}

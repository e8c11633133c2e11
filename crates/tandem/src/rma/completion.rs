//! Remote completion of a window's operations: waiting until the targets
//! have carried them out (what fence, flush, unlock and complete wait for),
//! then finishing reads into packed buffers.

use super::window::Window;
use super::{direct, OpId, OpState};
use crate::error::{Error, Result};
use crate::p2p::P2p;
use crate::Runtime;

/// Drives progress until `ready` holds, and polls the transports once if
/// it held at the first look. Operations on this rank's own window complete
/// without a look at the transports, so a rank that polls its own window
/// (lock, read, unlock on itself, until another rank's write shows up)
/// would otherwise never carry out the others' operations nor grant their
/// locks, and everyone would wait for ever: MPI requires progress for
/// passive-target operations inside MPI calls. A wait that had to wait drove
/// progress already, so remote operations pay nothing more. With `may_end`
/// (`MPI_THREAD_MULTIPLE`: the wait may stop to let other threads in)
/// false when it stopped; `waited` carries on across such stops.
pub(crate) fn wait_serving(
    rt: &mut Runtime,
    mut ready: impl FnMut(&P2p) -> bool,
    may_end: bool,
    waited: &mut bool,
) -> bool {
    let mut look = |p2p: &P2p| {
        let r = ready(p2p);
        *waited |= !r;
        r
    };
    if !rt.wait_until_or_hand_over_if(|p2p, _| look(p2p), may_end) {
        return false;
    }
    if !*waited {
        rt.progress_once();
    }
    true
}

/// The wait for a window's operations (to one target, or all) to complete
/// at their targets, in three steps so that a call whose wait lets other
/// threads in can stop and resume it.
pub struct Completion {
    target: Option<u32>,
    /// Operations issued before this number are the ones waited for.
    upto: u64,
    /// The operations (and one sync per target) to wait for; `None` for a
    /// window whose operations complete as they are made (direct).
    ids: Option<Vec<OpId>>,
    /// How many of `ids` were found complete: a put of a scattered datatype
    /// is one operation per block (a million for a transposed 1000x1000
    /// matrix), and the ones found done are not looked at again, or every
    /// poll would scan them all.
    done: usize,
    waited: bool,
}

impl Completion {
    /// Starts waiting for `w`'s operations to `target` (or all) issued so far.
    pub fn start(rt: &mut Runtime, w: &Window, target: Option<u32>) -> Result<Completion> {
        let mut c = Completion {
            target,
            upto: w.issued,
            ids: None,
            done: 0,
            waited: false,
        };
        if direct::is_direct(w) {
            direct::complete();
            return Ok(c);
        }
        let mine = |t: u32| target.is_none_or(|x| t == x);
        let mut ids: Vec<OpId> = w
            .pending
            .iter()
            .filter(|p| mine(p.target))
            .map(|p| p.id)
            .collect();
        let mut targets: Vec<u32> = w
            .pending
            .iter()
            .filter(|p| mine(p.target))
            .map(|p| w.group()[p.target as usize])
            .collect();
        targets.sort_unstable();
        targets.dedup();
        // Writes and accumulates are answered only when refused: one sync
        // per target says when everything before it is carried out.
        for t in targets {
            ids.push(rt.p2p().sync(t)?);
        }
        c.ids = Some(ids);
        Ok(c)
    }

    /// Waits (see `wait_serving`) until every operation is complete; with
    /// `may_end`, false when it stopped to let other threads in.
    pub fn wait(&mut self, rt: &mut Runtime, may_end: bool) -> bool {
        let Some(ids) = &self.ids else {
            return true;
        };
        let done = &mut self.done;
        let ready = |p2p: &P2p| {
            while let Some(&id) = ids.get(*done) {
                if matches!(
                    p2p.op_state(id),
                    Some(OpState::Pending | OpState::LocalDone)
                ) {
                    return false;
                }
                *done += 1;
            }
            true
        };
        wait_serving(rt, ready, may_end, &mut self.waited)
    }

    /// Collects the operations' outcomes (once [`Completion::wait`] said
    /// true): the first failure.
    pub fn take_outcomes(&self, rt: &mut Runtime) -> Option<Error> {
        let mut first: Option<Error> = None;
        for &id in self.ids.iter().flatten() {
            if let Some(Err(e)) = rt.p2p().op_take(id) {
                first.get_or_insert(e);
            }
        }
        first
    }

    /// Forgets the operations waited for and unpacks the reads into packed
    /// buffers (after [`Completion::take_outcomes`]).
    pub fn settle(self, w: &mut Window) {
        if self.ids.is_none() {
            return;
        }
        let (target, upto) = (self.target, self.upto);
        // Only what this completion waited for: operations issued since
        // (by another thread, while it let others in) stay pending.
        let mine = |t: u32, seq: u64| seq < upto && target.is_none_or(|x| x == t);
        w.pending.retain(|p| !mine(p.target, p.seq));
        w.keep.retain(|&(t, seq, _)| !mine(t, seq));
        let (done, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut w.unpacks)
            .into_iter()
            .partition(|u| mine(u.target, u.seq));
        w.unpacks = rest;
        for u in done {
            // SAFETY: the origin buffer was checked when the read started and
            // the application keeps it valid until the read completes (now).
            unsafe { u.dest.unpack(&u.data) };
        }
    }

    /// [`Completion::take_outcomes`] then [`Completion::settle`].
    pub fn finish(self, rt: &mut Runtime, w: &mut Window) -> Result<()> {
        let first = self.take_outcomes(rt);
        self.settle(w);
        first.map_or(Ok(()), Err)
    }
}

impl Window {
    /// Waits until this window's operations (to `target`, or all) are
    /// complete at their targets, then finishes reads into packed buffers.
    pub fn complete_ops(&mut self, rt: &mut Runtime, target: Option<u32>) -> Result<()> {
        let mut c = Completion::start(rt, self, target)?;
        c.wait(rt, false);
        c.finish(rt, self)
    }
}

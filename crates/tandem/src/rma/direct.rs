//! One-sided operations as loads and stores, on windows whose memory every
//! member maps: those of MPI_Win_allocate_shared, and those of
//! MPI_Win_allocate when every member is on this host; both only when
//! every member reaches the others through shared memory (an unlock must
//! be able to wake a sleeping waiter) and `rma_direct` is on.
//!
//! * A put or get is a copy between the origin buffer and the target's
//!   segment as this process maps it; it is complete, at origin and
//!   target, when the call returns. Flushes and unlocks have nothing left
//!   to wait for.
//! * Accumulates (and compare-and-swap) take the target's accumulate mutex,
//!   a word in the shared memory, for the whole operation: every member
//!   goes this way for such a window, so they are atomic with respect to
//!   each other, as MPI requires.
//! * `MPI_Win_lock` takes the target's reader-writer word (an exclusive
//!   request that waits bars new shared holders); unlocking gives it back
//!   and wakes members that sleep in a wait, to look again.
//! * Through the engine an operation took a message to the target and an
//!   answer back, and the target's progress engine had to run: 0.6-1.2 us
//!   for a small put, get or fetch-and-op between two ranks of one host.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::buffer::{landing, origin_bytes, Origin};
use super::window::{Access, Window};
use crate::datatype::Prim;
use crate::error::{Error, ErrorClass, Result};
use crate::ops::{self, PredefOp};
use crate::p2p::P2p;
use crate::shm_lock::{MutexWord, RwWord};
use crate::Runtime;

/// Target `t`'s memory as this process reaches it.
pub(crate) struct Reach {
    /// Added to an address in the target's own space (as
    /// [`super::runs::target_runs`] gives them) makes it one in this process.
    delta: u64,
    mutex: *const AtomicU64,
    /// The whole mapping: origin buffers inside it may overlap the target.
    mapped: (usize, usize),
}

impl Reach {
    fn at(&self, addr: u64) -> *mut u8 {
        addr.wrapping_add(self.delta) as usize as *mut u8
    }

    fn overlaps(&self, p: *const u8, len: usize) -> bool {
        let (lo, hi) = (p as usize, (p as usize).saturating_add(len));
        lo < self.mapped.1 && self.mapped.0 < hi
    }
}

/// How `t` of window `w` is reached directly, if its operations go so.
#[inline(always)]
pub(crate) fn reach(w: &Window, t: u32) -> Option<Reach> {
    let sh = w.shared.as_ref().filter(|sh| sh.direct)?;
    let start = sh.start(t as usize) as u64;
    let base = sh.map.base() as usize;
    Some(Reach {
        delta: start.wrapping_sub(w.targets[t as usize].base),
        mutex: sh.mutex_word(t as usize),
        mapped: (base, base + sh.map.len()),
    })
}

/// Whether window `w`'s operations are loads and stores.
#[inline(always)]
pub(crate) fn is_direct(w: &Window) -> bool {
    w.shared.as_ref().is_some_and(|sh| sh.direct)
}

fn counted(rt: &mut Runtime) {
    rt.p2p().engine().counters_mut().rma_direct += 1;
}

/// `MPI_Put` into `a`'s runs, from origin `o` (as many bytes, checked).
#[inline(always)]
pub(crate) fn put(rt: &mut Runtime, a: &Access, r: &Reach, o: &Origin) -> Result<()> {
    let (data, _packed) = origin_bytes(o);
    // SAFETY: `target_runs` checked every run lies in the target's
    // segment, which this process maps; `data` holds the packed origin
    // data of `a.bytes` bytes. The origin may lie in the window itself (a
    // program may put from its own segment), hence `copy`.
    each_run(a, r, |pos, target, len| unsafe {
        std::ptr::copy(data.add(pos), target, len)
    });
    counted(rt);
    Ok(())
}

/// `MPI_Get` from `a`'s runs into origin `o`.
#[inline(always)]
pub(crate) fn get_into(rt: &mut Runtime, a: &Access, r: &Reach, o: &Origin) -> Result<()> {
    let (dest, unpack) = landing(o, a.target);
    // SAFETY: as in `put`, the other way; `dest` is the user's contiguous
    // buffer or `unpack`'s, of `a.bytes` bytes.
    each_run(a, r, |pos, target, len| unsafe {
        std::ptr::copy(target, dest.add(pos), len)
    });
    if let Some(u) = unpack {
        // SAFETY: the origin buffer was checked by the layer above.
        unsafe { u.dest.unpack(&u.data) };
    }
    counted(rt);
    Ok(())
}

/// An accumulate or its fetching form: `data` (the packed origin, ignored
/// for MPI_NO_OP) combined into `a`'s runs with `op` under the target's
/// mutex; with `fetch`, the previous contents land there (packed; the
/// caller unpacks).
pub(crate) fn accumulate(
    rt: &mut Runtime,
    a: &Access,
    r: &Reach,
    op: PredefOp,
    prim: Prim,
    data: *const u8,
    fetch: Option<*mut u8>,
) -> Result<()> {
    let combines = !matches!(op, PredefOp::Replace | PredefOp::NoOp);
    // A pair type with padding (MPI_SHORT_INT ...) lies in runs that are
    // not whole elements: those are gathered into whole ones, combined,
    // and put back, all under the mutex.
    let split = combines
        && a.runs
            .iter()
            .any(|&(_, len)| !len.is_multiple_of(prim.size()));
    if split && !a.bytes.is_multiple_of(prim.size()) {
        return Err(Error::new(
            ErrorClass::Type,
            "accumulate of a part of an element",
        ));
    }
    let mut gathered = if split {
        vec![0u8; a.bytes]
    } else {
        Vec::new()
    };
    // Buffers inside the window's memory could overlap the target: they
    // are read, and written, through copies of their own.
    // SAFETY: `data` holds `a.bytes` bytes (the packed origin data).
    let own_data = (op != PredefOp::NoOp && r.overlaps(data, a.bytes))
        .then(|| unsafe { std::slice::from_raw_parts(data, a.bytes) }.to_vec());
    let data = own_data.as_ref().map_or(data, |v| v.as_ptr());
    let mut old = fetch
        .filter(|&f| r.overlaps(f, a.bytes))
        .map(|_| vec![0u8; a.bytes]);
    let fetch_to = old.as_mut().map(|v| v.as_mut_ptr()).or(fetch);
    // SAFETY: the word lies in the mapping, which lives as long as the
    // window, and the window outlives this call.
    let mutex = MutexWord(unsafe { &*r.mutex });
    hold(rt, &mutex)?;
    let mut fail = None;
    // SAFETY: runs lie in the target's mapped segment (checked by
    // `target_runs`) and hold `a.bytes` bytes in all; `fetch_to` and
    // `data` hold `a.bytes` bytes and do not overlap the target (copies
    // above where they might), `gathered` too when split. Other members
    // change these bytes only under the mutex held here; the target's own
    // stores meanwhile are the program's business, as for any one-sided
    // target memory.
    unsafe {
        if split {
            each_run(a, r, |pos, target, len| {
                std::ptr::copy_nonoverlapping(target, gathered.as_mut_ptr().add(pos), len)
            });
            if let Some(f) = fetch_to {
                std::ptr::copy_nonoverlapping(gathered.as_ptr(), f, a.bytes);
            }
            let inp = std::slice::from_raw_parts(data, a.bytes);
            fail = ops::apply(op, prim, inp, &mut gathered).err();
            if fail.is_none() {
                each_run(a, r, |pos, target, len| {
                    std::ptr::copy_nonoverlapping(gathered.as_ptr().add(pos), target, len)
                });
            }
        } else {
            each_run(a, r, |pos, target, len| {
                if let Some(f) = fetch_to {
                    std::ptr::copy_nonoverlapping(target, f.add(pos), len);
                }
                match op {
                    PredefOp::NoOp => {}
                    PredefOp::Replace => std::ptr::copy_nonoverlapping(data.add(pos), target, len),
                    _ if fail.is_some() => {}
                    _ => {
                        let inp = std::slice::from_raw_parts(data.add(pos), len);
                        let inout = std::slice::from_raw_parts_mut(target, len);
                        fail = ops::apply(op, prim, inp, inout).err();
                    }
                }
            });
        }
    }
    mutex.unlock();
    if let Some(e) = fail {
        return Err(e);
    }
    if let (Some(old), Some(f)) = (old, fetch) {
        // SAFETY: `f` holds `a.bytes` bytes (the caller's result buffer).
        unsafe { std::ptr::copy(old.as_ptr(), f, a.bytes) };
    }
    counted(rt);
    Ok(())
}

/// Calls `f(pos, target, len)` for each of `a`'s runs in turn: where it
/// starts in the packed data, where it lies in this process, its bytes.
fn each_run(a: &Access, r: &Reach, mut f: impl FnMut(usize, *mut u8, usize)) {
    let mut pos = 0;
    for &(addr, len) in a.runs.iter() {
        f(pos, r.at(addr), len);
        pos += len;
    }
}

/// Compare-and-swap of one element of `prim` at `a`'s only run.
pub(crate) fn compare_and_swap(
    rt: &mut Runtime,
    a: &Access,
    r: &Reach,
    prim: Prim,
    compare: *const u8,
    origin: *const u8,
    result: *mut u8,
) -> Result<()> {
    const MAX: usize = 16;
    let n = prim.size();
    let Some(&(addr, _)) = a.runs.first().filter(|_| n <= MAX) else {
        return Err(Error::new(
            ErrorClass::Type,
            "compare-and-swap takes one element of at most 16 bytes",
        ));
    };
    let (mut cmp, mut new, mut old) = ([0u8; MAX], [0u8; MAX], [0u8; MAX]);
    // Copies first: the caller's buffers could lie in the window.
    // SAFETY: each holds one element of `n` bytes (MPI contract), and
    // n <= MAX.
    unsafe {
        std::ptr::copy(compare, cmp.as_mut_ptr(), n);
        std::ptr::copy(origin, new.as_mut_ptr(), n);
    }
    // SAFETY: as in `accumulate`.
    let mutex = MutexWord(unsafe { &*r.mutex });
    hold(rt, &mutex)?;
    let target = r.at(addr);
    // SAFETY: the element lies in the target's mapped segment (checked by
    // `target_runs`), changed by other members only under the mutex.
    unsafe {
        std::ptr::copy_nonoverlapping(target, old.as_mut_ptr(), n);
        if old[..n] == cmp[..n] {
            std::ptr::copy_nonoverlapping(new.as_ptr(), target, n);
        }
    }
    mutex.unlock();
    // SAFETY: one element of `n` bytes (MPI contract).
    unsafe { std::ptr::copy(old.as_ptr(), result, n) };
    counted(rt);
    Ok(())
}

/// Takes `mutex`. Holders keep it for one operation, so waiting spins,
/// then offers the CPU (the holder may be descheduled on a busy host);
/// now and then it asks whether the holder still lives.
fn hold(rt: &mut Runtime, mutex: &MutexWord) -> Result<()> {
    let me = rt.rank();
    let mut rounds: u32 = 0;
    loop {
        for _ in 0..64 {
            if mutex.try_lock(me) {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        rounds = rounds.wrapping_add(1);
        std::thread::yield_now();
        if rounds.is_multiple_of(1024) {
            if let Some(e) = mutex.holder().and_then(|h| rt.p2p().peer_gone(h)) {
                return Err(Error::new(
                    e.class,
                    format!("an accumulate waits for a rank that is gone: {}", e.message),
                ));
            }
        }
    }
}

/// Takes target `t`'s lock of window `w` (shared or exclusive), waiting
/// as any blocking call does (spin, yield, sleep until a member unlocks);
/// with `may_end`, `None` when the wait stopped to let other threads in
/// (`polls` carries on across such stops).
pub(crate) fn lock(
    rt: &mut Runtime,
    w: &Window,
    t: u32,
    exclusive: bool,
    polls: &mut u32,
    may_end: bool,
) -> Option<Result<()>> {
    let sh = w
        .shared
        .as_ref()
        .expect("a direct window shares its memory");
    let word: *const AtomicU64 = sh.lock_word(t as usize);
    let me = rt.rank();
    // SAFETY: the word lies in the window's mapping, which outlives this
    // call (only MPI_Win_free drops it, and a window is not freed while a
    // call on it runs).
    let word = RwWord(unsafe { &*word });
    let attempt = |word: &RwWord| {
        if exclusive {
            word.try_exclusive(me)
        } else {
            word.try_shared()
        }
    };
    if attempt(&word) {
        return Some(Ok(()));
    }
    let members = w.group().clone();
    let (mut held, mut gone) = (false, None);
    // The condition may be asked again after it held once: the lock is
    // taken once.
    let mut look = |p2p: &P2p| {
        held = held || attempt(&word);
        if held {
            return true;
        }
        *polls = polls.wrapping_add(1);
        if polls.is_multiple_of(64) {
            // An exclusive holder is named; shared ones are not, so then
            // any member gone is reason enough.
            gone = match word.exclusive_holder() {
                Some(h) => p2p.peer_known_gone(h).then_some(h),
                None => members.iter().copied().find(|&p| p2p.peer_known_gone(p)),
            };
        }
        gone.is_some()
    };
    if may_end {
        if !rt.wait_until_or_hand_over(|p2p, _| look(p2p)) {
            return None;
        }
    } else {
        rt.wait_until(|p2p, _| look(p2p));
    }
    if exclusive && gone.is_some() {
        // Readers it kept out may sleep: they look again.
        word.give_up();
        rt.p2p().wake_peers(&members);
    }
    Some(match gone {
        Some(p) => Err(Error::new(
            ErrorClass::ProcAborted,
            format!("MPI_Win_lock: rank {p} of the job, a member of the window, is gone"),
        )),
        None => Ok(()),
    })
}

/// Gives target `t`'s lock back; with `wake`, members asleep in a wait
/// look again.
pub(crate) fn unlock(rt: &mut Runtime, w: &Window, t: u32, exclusive: bool, wake: bool) {
    let sh = w
        .shared
        .as_ref()
        .expect("a direct window shares its memory");
    let word = RwWord(sh.lock_word(t as usize));
    if exclusive {
        word.release_exclusive();
    } else {
        word.release_shared();
    }
    if wake {
        rt.p2p().wake_peers(w.group());
    }
}

/// Remote completion: every operation already is; a full fence orders this
/// process's stores before whatever synchronisation follows.
pub(crate) fn complete() {
    fence(Ordering::SeqCst);
}

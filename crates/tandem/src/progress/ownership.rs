//! The ownership word: all communication state has one owner at a time.
//!
//! The application thread, the progress helper thread and the signal
//! handler pass ownership with one atomic operation each way. Beside the
//! held bit the word carries requests to the holder: the helper wants to
//! be told when the holder leaves ([`Ownership::want`]); the application
//! thread waits to enter (a helper holding the state then gives it back at
//! once); threads sleep on the word under `MPI_THREAD_MULTIPLE` (a futex)
//! until the holder lets go, which then wakes them. A blocked call under
//! `MPI_THREAD_MULTIPLE` stops its wait to let others in when
//! [`Ownership::hand_over_now`] says so, and takes the library back with
//! [`Ownership::reacquire`].

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};

/// Values of the word: nobody holds the state, somebody does, and flags
/// beside it (see the module documentation).
const FREE: u32 = 0;
const HELD: u32 = 1;
const WANTED: u32 = 2;
const APP_WAITING: u32 = 4;
const SLEEPERS: u32 = 8;

/// How long a thread waiting to enter sleeps before looking again, should
/// a wake-up be missed (none should be: the holder wakes sleepers when it
/// lets go).
const ENTRY_SLEEP_NS: i64 = 10_000_000;
/// How many times a thread that wants to start a call yields while another
/// holds the library before it sleeps until it is let in.
const ENTRY_YIELDS: u32 = 64;
/// How many times a blocked call that let others in yields for one of
/// them to take the library before it takes it back itself.
const LET_IN_YIELDS: u32 = 16;

/// Who holds the library, and who waits for it.
pub struct Ownership {
    word: AtomicU32,
    /// The thread that holds the word (its `pthread_self`), 0 when none:
    /// how a call made from inside a callback the library runs is
    /// recognised. (A thread-local flag would cost a `__tls_get_addr` call
    /// per look in a shared library, three per MPI call.)
    holder: AtomicUsize,
    /// `MPI_THREAD_MULTIPLE`: threads wanting in sleep on the word, and a
    /// blocked call lets them in.
    multiple: AtomicBool,
    /// The progress helper's kick descriptor, -1 without a helper: rung
    /// when the holder leaves and the helper asked to be told.
    helper_kick: AtomicI32,
    /// The runtime's kick descriptor (`Engine::kick_fd`), -1 when none: a
    /// thread that wants in wakes a holder asleep in a wait.
    holder_kick: AtomicI32,
    /// Under `MPI_THREAD_MULTIPLE`: how many passes made progress, whoever
    /// made them (see [`Ownership::progress_made`]).
    epoch: AtomicU32,
    /// The progress count when the holder last stopped its wait to let
    /// others in: what it had looked at (see [`Ownership::handed_at`]).
    handed_at: AtomicU32,
    /// Longest sleep on the word before looking again (a safety net).
    entry_sleep_ns: i64,
}

/// A call from the thread that holds the library already (from inside a
/// callback the library runs): the state is in use further up its stack.
#[derive(Debug)]
pub struct Reentered;

/// Proof of holding the library; lets go on drop, also while unwinding.
pub struct Held<'a> {
    owner: &'a Ownership,
}

/// The calling thread's identity for [`Ownership::holder`] (never 0).
// Every MPI call enters and leaves through the C ABI crate: what it
// reaches here per call is `#[inline]`, or it stays a call across crates.
#[inline]
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// Writes 1 to eventfd `fd` if there is one. Async-signal-safe.
fn ring(fd: RawFd) {
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from `one` to an eventfd its owner keeps
        // open while it is published here (it is withdrawn before it
        // closes); a full counter fails harmlessly.
        unsafe { libc::write(fd, (&raw const one).cast(), std::mem::size_of::<u64>()) };
    }
}

impl Default for Ownership {
    fn default() -> Ownership {
        Ownership::new()
    }
}

impl Ownership {
    /// Free, one thread at a time, no helper.
    pub const fn new() -> Ownership {
        Ownership {
            word: AtomicU32::new(FREE),
            holder: AtomicUsize::new(0),
            multiple: AtomicBool::new(false),
            helper_kick: AtomicI32::new(-1),
            holder_kick: AtomicI32::new(-1),
            epoch: AtomicU32::new(0),
            handed_at: AtomicU32::new(0),
            entry_sleep_ns: ENTRY_SLEEP_NS,
        }
    }

    /// As [`Ownership::new`], with sleepers on the word looking again only
    /// after `ns` nanoseconds: a long sleep makes a lost wake-up hang.
    #[cfg(test)]
    const fn with_entry_sleep(ns: i64) -> Ownership {
        Ownership {
            entry_sleep_ns: ns,
            ..Ownership::new()
        }
    }

    /// Takes ownership if nobody holds it and the application thread is
    /// not waiting to (the helper thread never waits for the application
    /// thread, and gives way to it). Lock-free, so a signal handler may
    /// call it.
    pub fn try_acquire(&self) -> Option<Held<'_>> {
        self.word
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| self.held())
    }

    /// Takes the library for the calling thread, waiting for a helper that
    /// holds it (or, under `MPI_THREAD_MULTIPLE`, another application
    /// thread). Fails if the calling thread holds it already: waiting
    /// would wait for ever.
    #[inline(always)]
    pub fn acquire(&self) -> Result<Held<'_>, Reentered> {
        // The common case, kept short enough to inline into every call.
        match self
            .word
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => Ok(self.held()),
            Err(cur) => self.acquire_contended(cur),
        }
    }

    /// [`Ownership::acquire`] when the library was not free at first look.
    #[cold]
    #[inline(never)]
    fn acquire_contended(&self, mut cur: u32) -> Result<Held<'_>, Reentered> {
        let mut yields = 0u32;
        loop {
            if cur & HELD == 0 {
                // Free: take it.
                match self.take_free(cur) {
                    Ok(held) => return Ok(held),
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            // Held: perhaps by this very thread (looked at only now, to keep
            // the common entry short).
            if self.held_here() {
                return Err(Reentered);
            }
            if cur & APP_WAITING == 0 {
                // Ask the holder to let us in: a helper thread gives the
                // state back at once, a call blocked in a wait at its next
                // look (woken, should it sleep).
                match self.mark(cur, APP_WAITING) {
                    Ok(_) => {
                        cur |= APP_WAITING;
                        if self.multiple() {
                            self.kick_holder();
                        }
                    }
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            if self.multiple() && yields >= ENTRY_YIELDS {
                cur = self.sleep_while_held(cur);
                continue;
            }
            // Our turn comes soon: the helper, or another application
            // thread's call, lets go.
            yields += 1;
            std::thread::yield_now();
            cur = self.word.load(Ordering::Relaxed);
        }
    }

    /// Takes the library back for a blocked call that let other threads in
    /// (after [`Ownership::give_way`]): sleeps until it is free, asking to
    /// be let in only if progress was made since the call last looked at
    /// what it waits for (`seen`, from [`Ownership::handed_at`]); otherwise
    /// the holder lets it in when it makes progress.
    pub fn reacquire(&self, seen: u32) -> Held<'_> {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur & HELD == 0 {
                // Free: take it.
                match self.take_free(cur) {
                    Ok(held) => return held,
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            if cur & SLEEPERS == 0 {
                match self.mark(cur, SLEEPERS) {
                    Ok(_) => cur |= SLEEPERS,
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            // The holder counts progress before it looks for sleepers, and
            // we marked ourselves before looking at the count (both in one
            // total order): either it saw us, or we see its progress.
            if cur & APP_WAITING == 0 && self.epoch.load(Ordering::SeqCst) != seen {
                match self.mark(cur, APP_WAITING) {
                    Ok(_) => {
                        cur |= APP_WAITING;
                        self.kick_holder();
                    }
                    Err(now) => {
                        cur = now;
                        continue;
                    }
                }
            }
            cur = self.sleep_while_held(cur);
        }
    }

    /// Takes the library, seen free as `cur`; or the word as it is now.
    fn take_free(&self, cur: u32) -> Result<Held<'_>, u32> {
        self.word
            .compare_exchange_weak(cur, HELD, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| self.held())
    }

    /// Sets `flag` in the word, seen as `cur`; or the word as it is now.
    fn mark(&self, cur: u32, flag: u32) -> Result<u32, u32> {
        self.word
            .compare_exchange(cur, cur | flag, Ordering::SeqCst, Ordering::Relaxed)
    }

    /// Marks the calling thread as the holder.
    #[inline]
    fn held(&self) -> Held<'_> {
        self.holder.store(this_thread(), Ordering::Relaxed);
        Held { owner: self }
    }

    /// Whether the calling thread holds the library (it runs a callback
    /// from inside it): then the state cannot be reached from here.
    #[inline]
    pub fn held_here(&self) -> bool {
        // Only this thread writes its own identity there, and clears it
        // before letting go: seeing it means holding.
        self.holder.load(Ordering::Relaxed) == this_thread()
    }

    /// Whether nobody holds the library right now.
    #[inline]
    pub fn is_free(&self) -> bool {
        self.word.load(Ordering::Relaxed) == FREE
    }

    /// Whether the application thread waits to enter (a helper holding
    /// the state should give it back).
    pub fn app_waiting(&self) -> bool {
        self.word.load(Ordering::Relaxed) & APP_WAITING != 0
    }

    /// For the helper thread: asks whoever holds the library to ring the
    /// helper's kick descriptor when it leaves. False if nobody holds it
    /// any more (then just try again).
    pub fn want(&self) -> bool {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur == FREE {
                return false;
            }
            if cur & WANTED != 0 {
                return true;
            }
            match self.word.compare_exchange_weak(
                cur,
                cur | WANTED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// For the holder: withdraws a helper's request to be told when it
    /// leaves; whether there was one.
    pub fn unwant(&self) -> bool {
        self.word.fetch_and(!WANTED, Ordering::Relaxed) & WANTED != 0
    }

    /// Whether `MPI_THREAD_MULTIPLE` is in force.
    #[inline]
    pub fn multiple(&self) -> bool {
        self.multiple.load(Ordering::Relaxed)
    }

    /// Lets threads call at once from now on (`MPI_THREAD_MULTIPLE`):
    /// threads wanting in sleep on the word, and wake a holder asleep in a
    /// wait through `holder_kick` (an eventfd, or -1).
    pub fn allow_multiple(&self, holder_kick: RawFd) {
        self.holder_kick.store(holder_kick, Ordering::Relaxed);
        self.multiple.store(true, Ordering::Release);
    }

    /// Withdraws the holder's kick descriptor before it closes.
    pub fn forget_holder_kick(&self) {
        self.holder_kick.store(-1, Ordering::Relaxed);
    }

    /// Publishes the progress helper's kick descriptor (an eventfd), rung
    /// when the holder leaves after [`Ownership::want`]; -1: no helper any
    /// more (then letting go is a plain store, unless under
    /// `MPI_THREAD_MULTIPLE`).
    pub fn set_helper_kick(&self, fd: RawFd) {
        self.helper_kick.store(fd, Ordering::Release);
    }

    /// Wakes the holder if it sleeps in a wait.
    fn kick_holder(&self) {
        ring(self.holder_kick.load(Ordering::Relaxed));
    }

    /// Marks a sleeper on the held word `cur` and sleeps until the holder
    /// lets go (or the entry sleep passes); the word as it is then.
    fn sleep_while_held(&self, mut cur: u32) -> u32 {
        if cur & SLEEPERS == 0 {
            match self.mark(cur, SLEEPERS) {
                Ok(_) => cur |= SLEEPERS,
                Err(now) => return now,
            }
        }
        let timeout = libc::timespec {
            tv_sec: (self.entry_sleep_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (self.entry_sleep_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: the futex word is a live, aligned u32 (borrowed from
        // `self`); the kernel compares it with `cur` and sleeps only while
        // they are equal; `timeout` is valid for the call.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                cur,
                &timeout as *const libc::timespec,
            )
        };
        self.word.load(Ordering::Relaxed)
    }

    fn wake_sleepers(&self) {
        // SAFETY: a live, aligned u32; waking has no other effect.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            )
        };
    }

    /// Asked by a blocked call's wait under `MPI_THREAD_MULTIPLE`, `did`
    /// saying whether progress was made since its last look: whether it
    /// should let other threads in now. Yes when a thread wants to start a
    /// call, or when threads sleep that waited for something this progress
    /// may have finished.
    pub fn hand_over_now(&self, did: bool) -> bool {
        // Counted again (`progress_made` counted the pass's frames): `did`
        // also covers a wake-up by a peer's change to memory polled, not a
        // frame.
        if did {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
        let b = self.word.load(Ordering::SeqCst);
        let go = b & APP_WAITING != 0 || (did && b & SLEEPERS != 0);
        if go {
            // Its own progress is seen: only later progress by others
            // should make it ask to be let back in.
            self.handed_at
                .store(self.epoch.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        go
    }

    /// Counts progress, whoever made it: any call's pass that did
    /// something, the progress helper thread's, the progress signal
    /// handler's. A call that let other threads in, and sleeps to take the
    /// library back, asks the holder to let it in once it sees the count
    /// moved (see [`Ownership::reacquire`]). Counting only the passes of
    /// blocked calls' waits lost wake-ups: a request finished by another
    /// call's progress, or by the helper, went unseen while the next holder
    /// slept in a wait of its own, and both waited for ever
    /// (tests/c/thread_multiple.c over TCP with `progress=thread`, on a
    /// loaded machine). Called while holding the library (an atomic add:
    /// fine in a signal handler).
    pub fn progress_made(&self) {
        if self.multiple() {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The progress count the holder had seen when it last stopped its
    /// wait to let others in; read while holding (only the holder writes
    /// it), for [`Ownership::reacquire`].
    pub fn handed_at(&self) -> u32 {
        self.handed_at.load(Ordering::Relaxed)
    }

    /// After letting go to let others in: yields a little for one of the
    /// threads that asked to take the library before asking again.
    pub fn give_way(&self) {
        for _ in 0..LET_IN_YIELDS {
            if self.word.load(Ordering::Relaxed) & HELD != 0 {
                break;
            }
            std::thread::yield_now();
        }
    }
}

impl Held<'_> {
    /// The word held.
    pub fn ownership(&self) -> &Ownership {
        self.owner
    }
}

impl Drop for Held<'_> {
    // Inlined into every MPI call's exit: out of line it costs a call and
    // its frame per MPI call (about 20 instructions on an 8-byte send).
    #[inline(always)]
    fn drop(&mut self) {
        let o = self.owner;
        o.holder.store(0, Ordering::Relaxed);
        // Without a helper thread nobody asks to be told (WANTED), and
        // without MPI_THREAD_MULTIPLE nobody sleeps on the word: a plain
        // store lets go, as in any spin lock (a read-modify-write costs
        // some nanoseconds more, on every MPI call). Otherwise a single
        // read-modify-write sees WANTED or SLEEPERS set before it (same
        // word), so no request to be told goes unanswered. (A helper's
        // descriptor is withdrawn before it is stopped, and kicked.)
        let helper_kick = o.helper_kick.load(Ordering::Relaxed);
        if helper_kick < 0 && !o.multiple() {
            o.word.store(FREE, Ordering::Release);
            return;
        }
        o.let_go_told(helper_kick);
    }
}

impl Ownership {
    /// [`Held`]'s drop when a helper thread or other application threads
    /// may have asked to be told.
    #[cold]
    #[inline(never)]
    fn let_go_told(&self, helper_kick: i32) {
        let was = self.word.swap(FREE, Ordering::Release);
        if was & WANTED != 0 {
            ring(helper_kick);
        }
        if was & SLEEPERS != 0 {
            self.wake_sleepers();
        }
    }
}

#[cfg(test)]
mod tests;

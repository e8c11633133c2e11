//! The ownership word under threads: only one holder at a time, a waiter
//! is let in, requests to be told are answered, sleepers are woken.
//!
//! Sleepers on the word look again after 10 ms in the library, which hides
//! a lost wake-up as a delay; here they sleep for minutes, so that a lost
//! wake-up hangs and the watchdog fails the test.

use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::{Ownership, Reentered, APP_WAITING, SLEEPERS};

/// Sleepers on the word never look again by themselves within a test.
const NEVER_NS: i64 = 600 * 1_000_000_000;

/// A counter incremented without atomics, read and written apart with a
/// yield between now and then: only exclusive access keeps its count.
struct Unguarded(UnsafeCell<u64>);

// SAFETY: the tests touch the counter only while holding the ownership
// word under test; a word that lets two threads in shows as lost counts.
unsafe impl Sync for Unguarded {}

impl Unguarded {
    fn new() -> Unguarded {
        Unguarded(UnsafeCell::new(0))
    }

    fn bump(&self) {
        // SAFETY: called only while holding the word (see above); volatile
        // so that the read and the write stay two accesses.
        unsafe {
            let v = std::ptr::read_volatile(self.0.get());
            if v.is_multiple_of(8) {
                std::thread::yield_now();
            }
            std::ptr::write_volatile(self.0.get(), v + 1);
        }
    }

    fn get(&self) -> u64 {
        // SAFETY: read after every thread that wrote it was joined.
        unsafe { *self.0.get() }
    }
}

/// Runs `body` on a thread of its own and fails if it takes longer than a
/// minute (a lost wake-up, or a lock never let go, hangs).
fn within_a_minute(body: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => runner.join().unwrap(),
        // The body panicked: join to pass its panic on.
        Err(mpsc::RecvTimeoutError::Disconnected) => runner.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: a wake-up was lost"),
    }
}

fn leak(o: Ownership) -> &'static Ownership {
    Box::leak(Box::new(o))
}

fn eventfd() -> OwnedFd {
    // SAFETY: plain syscall; checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor, owned from here.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Waits up to `ms` for the eventfd to be rung; its count (0: not rung).
fn rung(fd: &OwnedFd, ms: i32) -> u64 {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) };
    let mut count = 0u64;
    // SAFETY: reads 8 bytes into `count` from a non-blocking eventfd; when
    // nothing was written it fails and leaves `count` at 0.
    unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    count
}

/// Waits until the word has `bits` set.
fn until_marked(o: &Ownership, bits: u32) {
    while o.word.load(Ordering::SeqCst) & bits != bits {
        std::thread::yield_now();
    }
}

/// Four threads count under the word; every count survives.
fn contend(o: &'static Ownership, threads: u64, rounds: u64) {
    let counter: &'static Unguarded = Box::leak(Box::new(Unguarded::new()));
    within_a_minute(move || {
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..rounds {
                        let held = o.acquire().expect("not held by this thread");
                        counter.bump();
                        drop(held);
                    }
                });
            }
        });
        assert_eq!(
            counter.get(),
            threads * rounds,
            "two threads held the word at once"
        );
        assert!(o.is_free());
    });
}

#[test]
fn one_holder_at_a_time_among_four_threads() {
    contend(leak(Ownership::new()), 4, 20_000);
}

#[test]
fn one_holder_at_a_time_among_four_threads_that_sleep_on_the_word() {
    let o = leak(Ownership::with_entry_sleep(NEVER_NS));
    o.allow_multiple(-1);
    contend(o, 4, 5_000);
}

#[test]
fn a_helper_taking_the_word_when_free_never_shares_it() {
    let o = leak(Ownership::new());
    let kick = eventfd();
    o.set_helper_kick(kick.as_raw_fd());
    let counter: &'static Unguarded = Box::leak(Box::new(Unguarded::new()));
    let helped: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
    within_a_minute(move || {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            // The helper: takes the word only when free, asks to be told
            // otherwise, and gives way to a waiting application thread.
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    match o.try_acquire() {
                        Some(held) => {
                            counter.bump();
                            helped.fetch_add(1, Ordering::Relaxed);
                            if o.app_waiting() {
                                drop(held);
                                std::thread::yield_now();
                            }
                        }
                        None => {
                            o.want();
                            std::thread::yield_now();
                        }
                    }
                }
            });
            let apps: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        for _ in 0..10_000 {
                            let held = o.acquire().unwrap();
                            counter.bump();
                            o.unwant();
                            drop(held);
                        }
                    })
                })
                .collect();
            for a in apps {
                a.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(counter.get(), 30_000 + helped.load(Ordering::Relaxed));
    });
    drop(kick);
}

#[test]
fn a_waiting_thread_is_let_in_when_the_holder_lets_go() {
    for multiple in [false, true] {
        let o = leak(Ownership::with_entry_sleep(NEVER_NS));
        if multiple {
            o.allow_multiple(-1);
        }
        within_a_minute(move || {
            let held = o.acquire().unwrap();
            let released: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
            let waiter = std::thread::spawn(move || {
                let _held = o.acquire().unwrap();
                assert!(released.load(Ordering::SeqCst), "entered while held");
            });
            // It asks to be let in; the helper could not take the word.
            until_marked(o, APP_WAITING);
            assert!(o.app_waiting());
            assert!(o.try_acquire().is_none());
            if multiple {
                // It sleeps on the word now: letting go must wake it.
                until_marked(o, SLEEPERS);
            }
            released.store(true, Ordering::SeqCst);
            drop(held);
            waiter.join().unwrap();
            assert!(o.is_free());
        });
    }
}

#[test]
fn sleepers_are_woken_every_time() {
    let o = leak(Ownership::with_entry_sleep(NEVER_NS));
    o.allow_multiple(-1);
    within_a_minute(move || {
        for _ in 0..50 {
            let held = o.acquire().unwrap();
            let waiter = std::thread::spawn(move || drop(o.acquire().unwrap()));
            until_marked(o, SLEEPERS);
            drop(held);
            waiter.join().unwrap();
        }
    });
}

#[test]
fn a_helper_that_asked_is_told_when_the_holder_leaves() {
    let o = leak(Ownership::new());
    let kick = eventfd();
    o.set_helper_kick(kick.as_raw_fd());
    assert!(!o.want(), "nobody holds it: nothing to wait for");
    let held = o.acquire().unwrap();
    assert!(std::thread::scope(|s| s.spawn(|| o.want()).join().unwrap()));
    drop(held);
    assert_eq!(rung(&kick, 5_000), 1, "the request to be told was lost");
    // A request the holder withdraws is not answered.
    let held = o.acquire().unwrap();
    assert!(o.want());
    assert!(o.unwant());
    drop(held);
    assert_eq!(rung(&kick, 0), 0);
    // Without a helper, letting go is a plain store.
    o.set_helper_kick(-1);
    let held = o.acquire().unwrap();
    drop(held);
    assert!(o.is_free());
}

#[test]
fn a_call_from_the_holding_thread_is_refused_not_deadlocked() {
    let o = Ownership::new();
    let held = o.acquire().unwrap();
    assert!(o.held_here());
    assert!(matches!(o.acquire(), Err(Reentered)));
    drop(held);
    assert!(!o.held_here());
    assert!(o.acquire().is_ok());
}

#[test]
fn a_blocked_call_that_let_others_in_comes_back_when_progress_is_made() {
    let o = leak(Ownership::with_entry_sleep(NEVER_NS));
    let holder_kick = eventfd();
    o.allow_multiple(holder_kick.as_raw_fd());
    let fd = holder_kick.as_raw_fd();
    within_a_minute(move || {
        // The holder makes no progress: a blocked call waiting to come
        // back is not let in for nothing.
        let held = o.acquire().unwrap();
        let seen = o.handed_at();
        let blocked = std::thread::spawn(move || drop(o.reacquire(seen)));
        until_marked(o, SLEEPERS);
        assert!(!o.hand_over_now(false));
        // Progress: the blocked call may have what it waits for.
        assert!(o.hand_over_now(true));
        drop(held);
        blocked.join().unwrap();

        // SAFETY: `holder_kick` outlives this closure (the test joins it
        // before dropping the descriptor); this copy is never closed.
        let kick = std::mem::ManuallyDrop::new(unsafe { OwnedFd::from_raw_fd(fd) });
        rung(&kick, 0);

        // Progress made while it was away (by anyone): it asks to be let
        // in, and wakes the holder's wait to say so.
        let held = o.acquire().unwrap();
        let seen = o.handed_at();
        o.progress_made();
        let blocked = std::thread::spawn(move || drop(o.reacquire(seen)));
        until_marked(o, APP_WAITING | SLEEPERS);
        assert!(rung(&kick, 5_000) >= 1, "the holder's wait was not woken");
        assert!(o.hand_over_now(false));
        drop(held);
        blocked.join().unwrap();
        assert!(o.is_free());
    });
    drop(holder_kick);
}

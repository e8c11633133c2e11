//! Communication driven while the application is outside the library: the
//! `thread` and `signal` policies' entry points, and what they need from
//! the layers above the engine.
//!
//! The helper thread and the signal handler drive point-to-point matching
//! and collective schedules, which sit above this layer, and reach them
//! through the state of the layer that keeps the runtime (the C ABI), which
//! the core does not know. Both are given as traits: [`Driven`] (the
//! runtime implements it) and [`Library`] (the keeper of the runtime
//! implements it).

use std::sync::atomic::{AtomicU8, Ordering};

use super::ownership::{Held, Ownership};
use super::{helper, signal, Engine, Policy};
use crate::params::Settings;
use crate::stats::Counters;

/// What the helper thread and the signal handler drive.
pub trait Driven {
    /// The engine beneath.
    fn engine(&mut self) -> &mut Engine;
    /// The parameters in force.
    fn settings(&self) -> &Settings;
    /// One round of the helper: drives point-to-point once (whether that
    /// did anything), then what waits on it (collective schedules).
    fn drive_round(&mut self) -> bool;
    /// Whether receives matched from now on are matched while the
    /// application computes (see `p2p`'s direct.rs).
    fn set_async_matching(&mut self, on: bool);
    /// Whether anything can progress (a request alive, memory exposed to
    /// one-sided access).
    fn progress_matters(&mut self) -> bool;
    /// How many receives are posted.
    fn posted_receives(&mut self) -> usize;
    /// For the signal handler: answers the rendezvous starts waiting at
    /// the heads of the rings (see `p2p`'s handler.rs); how many.
    fn progress_from_signal(&mut self) -> usize;
}

/// The keeper of the runtime: how the helper thread and the signal
/// handler take the library and reach what they drive.
pub trait Library: Sync + 'static {
    /// The word that gives the state one owner at a time.
    fn ownership(&self) -> &Ownership;
    /// What to drive, while `held` (of [`Library::ownership`]) proves
    /// ownership; `None` once the runtime is torn down.
    fn driven<'a>(&'a self, held: &'a mut Held<'_>) -> Option<&'a mut dyn Driven>;
}

/// The policy whose helper runs, for the hooks on entering and leaving
/// the library (0: none).
static RUNNING: AtomicU8 = AtomicU8::new(NONE);
const NONE: u8 = 0;
const THREAD: u8 = 1;
const SIGNAL: u8 = 2;

/// Starts the helper the engine's policy asks for (none under `poll` and
/// `adaptive`); `driven` is lent by the caller, who holds the library.
/// Whether one runs (if it cannot start, MPI calls alone drive
/// communication, as under `adaptive`).
pub fn start(lib: &'static dyn Library, driven: &mut dyn Driven) -> bool {
    let (started, running) = match driven.engine().policy() {
        Policy::Thread => (helper::start(lib, driven), THREAD),
        Policy::Signal => (signal::start(lib, driven), SIGNAL),
        Policy::Poll | Policy::Adaptive => (false, NONE),
    };
    if started {
        lib.ownership().set_helper_kick(helper::kick_fd());
        RUNNING.store(running, Ordering::Release);
    }
    started
}

/// Stops the helper and the signal handler, if they run (before the state
/// they drive goes), and returns what they counted outside the engine.
pub fn stop(ownership: &Ownership) -> Counters {
    RUNNING.store(NONE, Ordering::Release);
    ownership.set_helper_kick(-1);
    let mut counted = signal::stop();
    counted.merge(&helper::stop());
    counted
}

/// On entering the library.
#[inline]
pub fn on_enter(driven: &mut dyn Driven) {
    if RUNNING.load(Ordering::Relaxed) == THREAD {
        helper::on_enter(driven);
    }
}

/// On leaving the library.
#[inline]
pub fn on_leave(ownership: &Ownership, driven: &mut dyn Driven) {
    match RUNNING.load(Ordering::Relaxed) {
        THREAD => helper::on_leave(ownership, driven),
        SIGNAL => signal::on_leave(driven),
        _ => {}
    }
}

/// Whether a helper advances communication while the application
/// computes (then a receive posted now is one the application will compute
/// beside).
#[inline]
pub fn running() -> bool {
    RUNNING.load(Ordering::Relaxed) != NONE
}

//! Progress: who drives communication, and how ranks wait.
//!
//! * [`engine`]: the engine that owns the transports and drives them.
//! * [`policy`]: the `progress` parameter, parsed once.
//! * [`ownership`]: the word that gives all communication state one owner
//!   at a time (application threads, the helper thread, the signal
//!   handler), and hands it over.
//! * [`background`]: communication driven while the application computes:
//!   the helper thread of the `thread` policy (`helper.rs`) and the
//!   `signal` policy (`signal.rs`).
//! * [`placement`]: the CPUs a rank and its helper run on.
//!
//! The spin, yield, then block wait of a blocking call is point-to-point's
//! (`P2p::wait_for`), which sleeps through [`Engine::arm_sleep`] and
//! [`Engine::sleep_armed`].

pub mod background;
pub mod engine;
mod helper;
pub mod ownership;
pub mod placement;
pub mod policy;
mod signal;

pub use background::{Driven, Library};
pub use engine::{Engine, QUEUED_SLEEP_MS, WAKE_HELPER_ANY, WAKE_HELPER_RNDV};
pub use ownership::{Held, Ownership, Reentered};
pub use policy::Policy;

//! Progress: who drives communication, and how ranks wait.
//!
//! * [`engine`]: the engine that owns the transports and drives them.
//! * [`policy`]: the `progress` parameter, parsed once.
//! * [`ownership`]: the word that gives all communication state one owner
//!   at a time (application threads, the helper thread, the signal
//!   handler), and hands it over.

pub mod engine;
pub mod ownership;
pub mod policy;

pub use engine::{Engine, QUEUED_SLEEP_MS, WAKE_HELPER_ANY, WAKE_HELPER_RNDV};
pub use ownership::{Held, Ownership, Reentered};
pub use policy::Policy;

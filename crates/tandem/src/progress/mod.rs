//! Progress: who drives communication, and how ranks wait.
//!
//! * [`engine`]: the engine that owns the transports and drives them.
//! * [`policy`]: the `progress` parameter, parsed once.

pub mod engine;
pub mod policy;

pub use engine::{Engine, QUEUED_SLEEP_MS, WAKE_HELPER_ANY, WAKE_HELPER_RNDV};
pub use policy::Policy;

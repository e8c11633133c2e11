//! Tandem core: the engine beneath the MPI C ABI and the Rust API.
//!
//! Layers, bottom to top (each knows only the one beneath it):
//! [`wire`] (frame headers), [`transport`] (moves frames), [`progress`]
//! (owns and drives transports), [`p2p`] (matching, eager, rendezvous,
//! requests), [`coll`] (collectives on point-to-point). [`params`] and
//! [`bootstrap`] are shared by all layers and by the `tandem` command.

pub mod bootstrap;
pub mod error;
pub mod params;

pub use error::{Error, ErrorClass, Result};

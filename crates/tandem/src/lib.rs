//! Tandem core: the engine beneath the MPI C ABI, and its Rust API.
//!
//! Layers, bottom to top (each knows only the one beneath it):
//! [`wire`] (frame headers), [`transport`] (moves frames), [`progress`]
//! (owns and drives transports), [`p2p`] (matching, eager, rendezvous,
//! requests), [`rma`] (one-sided access) and [`rwapi`] (the Remote-Write
//! API) on it, [`coll`] (collectives on point-to-point), [`runtime`] (the
//! Rust API: init, communicators, finalize). [`params`] and [`bootstrap`] are
//! shared by all layers and by the `tandem` command.

pub mod bootstrap;
pub mod buf_pool;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod dynamic;
pub mod error;
pub mod free_ranges;
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
pub mod int_map;
pub mod intercomm;
pub mod ops;
pub mod p2p;
pub mod pages;
pub mod params;
pub mod progress;
pub mod replica;
pub mod rma;
pub mod runtime;
pub mod rwapi;
pub mod shared_mapping;
pub mod shm_heap;
pub mod shm_lock;
pub mod stats;
pub mod transport;
pub mod wire;

pub use error::{Error, ErrorClass, Result};
pub use runtime::{CommId, Runtime, SELF, WORLD};

/// The property tests' settings: a quick run by default, which
/// PROPTEST_CASES raises (scripts/fuzz.sh), and no failure files written
/// under the source tree.
#[cfg(test)]
pub(crate) fn prop_config() -> proptest::prelude::ProptestConfig {
    proptest::prelude::ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    }
}

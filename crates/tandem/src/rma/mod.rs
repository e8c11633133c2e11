//! One-sided communication: memory a rank exposes to its peers and the
//! operations they make on it (write, read, accumulate, compare-and-swap,
//! locks), carried out by the target's progress engine; and windows, the
//! MPI model on top of them.
//!
//! The engine's operations:
//! * `target`: the target side, serving the one-sided frames that
//!   point-to-point hands over, and the answers that finish the origin's
//!   operations.
//! * `origin`: the operations as the layers above start them, on
//!   point-to-point's outgoing path.
//! * `op_table`: the origin's operations in flight.
//! * `encoding`: how one-sided operations are written in frames.
//!
//! Windows:
//! * [`window`]: a window at one member, its creation and operations.
//! * [`runs`]: where an operation's data lies at the target, and how it is
//!   split into engine operations.
//! * [`buffer`]: origin buffers, packed and unpacked.
//! * [`epoch`]: which epochs are open.
//! * [`completion`] and [`passive`]: remote completion, locks.
//! * `shared` and `direct`: windows in memory every member maps, whose
//!   operations are loads and stores.

pub mod buffer;
pub mod completion;
mod direct;
pub(crate) mod encoding;
pub mod epoch;
mod op_table;
mod origin;
pub mod passive;
pub mod runs;
mod shared;
pub(crate) mod target;
pub mod window;

pub use buffer::{Origin, TypedBuf};
pub use completion::Completion;
pub use encoding::{accumulate_supported, Strided};
pub use epoch::{Epochs, LockHeld};
pub use op_table::{OpId, OpState};
pub use passive::Passive;
pub use runs::TargetType;
pub use target::CALLER_KEY_BIT;
pub use window::{Access, Flavor, Target, Window, TAG_COMPLETE, TAG_POST};

//! One-sided communication: memory a rank exposes to its peers and the
//! operations they make on it (write, read, accumulate, compare-and-swap,
//! locks), carried out by the target's progress engine.
//!
//! * [`target`]: the target side, serving one-sided frames that
//!   point-to-point hands over, and the origin side's bookkeeping of the
//!   answers.
//! * [`origin`]: the operations as the layers above start them, on
//!   point-to-point's outgoing path.
//! * [`op_table`]: the origin's operations in flight.
//! * [`encoding`]: how one-sided operations are written in frames.

mod encoding;
mod op_table;
mod origin;
pub(crate) mod target;

pub use encoding::{accumulate_supported, Strided};
pub use op_table::{OpId, OpState};
pub use target::CALLER_KEY_BIT;

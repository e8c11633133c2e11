//! What a callback may ask about a communicator while the library runs it.
//!
//! A user-defined reduction runs inside the library, with the state in use
//! further up its thread's stack, so the state cannot answer it. The
//! communicator queries a reduction may make (`MPI_Comm_rank`, `_size`,
//! `_remote_size`, `_test_inter`) are answered from this table instead: each
//! live communicator's shape, written when the library registers or frees
//! the communicator. The lock is only ever held for a copy in or out, never
//! across a callback, so it cannot deadlock with the library's own lock.

use std::os::raw::c_int;
use std::sync::Mutex;

use tandem::comm::Comm;
use tandem::CommId;

use crate::abi::{MPI_Comm, MPI_ERR_COMM, MPI_SUCCESS};
use crate::state::{self, Outcome, Owner, State};

/// The fixed facts of one communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub rank: u32,
    pub size: u32,
    /// The remote group's size; `None` for an intracommunicator.
    pub remote_size: Option<u32>,
}

impl Shape {
    pub fn of(c: &Comm) -> Shape {
        Shape {
            rank: c.rank,
            size: c.size(),
            remote_size: c.is_inter().then(|| c.peers().len() as u32),
        }
    }
}

/// Shapes by the runtime's communicator index.
static SHAPES: Mutex<Vec<Option<Shape>>> = Mutex::new(Vec::new());

fn table() -> std::sync::MutexGuard<'static, Vec<Option<Shape>>> {
    // Poisoning needs a panic while the lock is held, and nothing held
    // under it can panic; the table is whole either way.
    SHAPES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records communicator `id`'s shape.
pub fn record(id: CommId, shape: Shape) {
    let mut t = table();
    if t.len() <= id.0 {
        t.resize(id.0 + 1, None);
    }
    t[id.0] = Some(shape);
}

/// Forgets communicator `id` (freed).
pub fn forget(id: CommId) {
    if let Some(slot) = table().get_mut(id.0) {
        *slot = None;
    }
}

/// Forgets every communicator (the state is torn down).
pub fn clear() {
    table().clear();
}

/// The shape of communicator `id`, if it is live.
pub fn lookup(id: CommId) -> Option<Shape> {
    table().get(id.0).copied().flatten()
}

/// Runs communicator query `func` on `comm`. Inside a callback the library
/// runs, `from_shape` answers from the table, and an error comes back as
/// its class's code without error handlers (they need the state); an
/// unknown communicator is `MPI_ERR_COMM`. Elsewhere it is an ordinary call
/// running `body`.
pub fn query(
    func: &'static str,
    comm: MPI_Comm,
    from_shape: impl FnOnce(Shape) -> Outcome,
    body: impl FnOnce(&mut State) -> Outcome,
) -> c_int {
    if Owner::held_here() {
        return state::call_stateless(func, || match State::comm_index(comm).and_then(lookup) {
            None => MPI_ERR_COMM,
            Some(shape) => match from_shape(shape) {
                Ok(()) => MPI_SUCCESS,
                Err(f) => f.error.class.code(),
            },
        });
    }
    state::call(func, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_shapes_are_found_until_forgotten() {
        // One test touches the global table, so tests cannot race on it.
        clear();
        let a = Shape {
            rank: 1,
            size: 4,
            remote_size: None,
        };
        let b = Shape {
            rank: 0,
            size: 2,
            remote_size: Some(3),
        };
        record(CommId(5), a);
        record(CommId(0), b);
        assert_eq!(lookup(CommId(5)), Some(a));
        assert_eq!(lookup(CommId(0)), Some(b));
        assert_eq!(lookup(CommId(3)), None);
        assert_eq!(lookup(CommId(99)), None);
        forget(CommId(5));
        assert_eq!(lookup(CommId(5)), None);
        forget(CommId(99));
        clear();
        assert_eq!(lookup(CommId(0)), None);
    }
}

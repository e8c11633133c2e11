//! The origin side's record of its one-sided operations in flight: their
//! ids, where each stands, and what its answer must fill in.

use std::collections::VecDeque;

use crate::error::Error;

/// A one-sided operation started by this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub u64);

/// Where an operation is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpState {
    /// The local buffer is still in use.
    Pending,
    /// The local buffer may be reused; the target has not confirmed yet.
    LocalDone,
    /// Done at the target (or failed).
    Done(Option<Error>),
}

pub(crate) struct Pending {
    pub(crate) peer: u32,
    pub(crate) local_done: bool,
    /// Whether the target answers (otherwise done once local).
    pub(crate) acked: bool,
    pub(crate) remote_done: bool,
    pub(crate) error: Option<Error>,
    /// Where a reply's data goes (read, fetch): address and length.
    pub(crate) dest: Option<(usize, usize)>,
    /// A payload built for the operation (compare-and-swap), in flight.
    pub(crate) _owned: Vec<u8>,
}

/// Operations in flight by id. Ids only grow and most operations finish in
/// order, so a window of slots from the oldest live id is a cheap map.
#[derive(Default)]
pub(crate) struct OpTable {
    first: u64,
    slots: VecDeque<Option<Pending>>,
}

impl OpTable {
    pub(crate) fn insert(&mut self, id: u64, p: Pending) {
        if self.slots.is_empty() {
            self.first = id;
        }
        debug_assert!(id >= self.first + self.slots.len() as u64);
        while self.first + (self.slots.len() as u64) < id {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(p));
    }

    pub(crate) fn get(&self, id: &u64) -> Option<&Pending> {
        let i = id.checked_sub(self.first)?;
        self.slots.get(usize::try_from(i).ok()?)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: &u64) -> Option<&mut Pending> {
        let i = id.checked_sub(self.first)?;
        self.slots.get_mut(usize::try_from(i).ok()?)?.as_mut()
    }

    pub(crate) fn remove(&mut self, id: &u64) -> Option<Pending> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        let p = self.slots.get_mut(i)?.take();
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.first += 1;
        }
        p
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Pending)> {
        let first = self.first;
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(i, p)| p.as_ref().map(|p| (first + i as u64, p)))
    }
}

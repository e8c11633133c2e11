//! State the MPI layer keeps beside the runtime's: tables of requests,
//! operations, groups, attribute keys and info objects, the buffered-send
//! buffer, and per-communicator extras (name, attributes, topology).

use std::os::raw::c_int;

/// Process-wide tables (one per `MPI_Init`).
#[derive(Default)]
pub struct Ext {
    pub reqs: crate::request::ReqTable,
    pub ops: crate::ops::OpTable,
    pub groups: crate::group::GroupTable,
    pub keyvals: crate::attr::Keyvals,
    pub infos: crate::info::InfoTable,
    pub bsend: crate::bsend::Bsend,
    /// Messages taken by a matched probe and not yet received: the
    /// communicator each came on, by the core's message id.
    pub messages: std::collections::HashMap<u64, crate::abi::MPI_Comm>,
    /// Error handlers the application created.
    pub errhandlers: crate::errhandler::Errhandlers,
}

/// What the MPI layer knows of a communicator beyond the runtime.
#[derive(Clone, Default)]
pub struct CommExt {
    pub name: String,
    /// Attribute values by key, in the order they were set.
    pub attrs: Attrs,
    pub topo: Option<crate::topo::Topo>,
}

/// A communicator's attributes, oldest first: MPI_Finalize deletes those of
/// `MPI_COMM_SELF` newest first, as the standard requires.
#[derive(Clone, Default)]
pub struct Attrs(Vec<(c_int, usize)>);

impl Attrs {
    pub fn get(&self, key: c_int) -> Option<usize> {
        self.0.iter().find(|&&(k, _)| k == key).map(|&(_, v)| v)
    }

    /// Sets `key` to `value`; a key set again counts as set now.
    pub fn set(&mut self, key: c_int, value: usize) {
        self.remove(key);
        self.0.push((key, value));
    }

    pub fn remove(&mut self, key: c_int) -> Option<usize> {
        let i = self.0.iter().position(|&(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    /// The attributes, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (c_int, usize)> + '_ {
        self.0.iter().copied()
    }

    /// Removes every attribute, returning them newest first.
    pub fn take_newest_first(&mut self) -> Vec<(c_int, usize)> {
        let mut all = std::mem::take(&mut self.0);
        all.reverse();
        all
    }
}

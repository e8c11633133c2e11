//! State the MPI layer keeps beside the runtime's: tables of requests,
//! operations, groups, attribute keys and info objects, the buffered-send
//! buffer, and per-communicator extras (name, attributes, topology).

use std::collections::BTreeMap;
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
}

/// What the MPI layer knows of a communicator beyond the runtime.
#[derive(Clone, Default)]
pub struct CommExt {
    pub name: String,
    /// Attribute values by key.
    pub attrs: BTreeMap<c_int, usize>,
    pub topo: Option<crate::topo::Topo>,
}

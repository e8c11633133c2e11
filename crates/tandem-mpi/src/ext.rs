//! State the MPI layer keeps beside the runtime's: tables of requests,
//! operations, groups and attributes (info objects live in info.rs), the buffered-send
//! buffer, and per-communicator extras (name, topology).

/// Process-wide tables (one per `MPI_Init`).
#[derive(Default)]
pub struct Ext {
    pub reqs: crate::request::ReqTable,
    pub ops: crate::ops::OpTable,
    pub groups: crate::group::GroupTable,
    pub attrs: crate::attr::Attributes,
    pub bsend: crate::bsend::Bsend,
    /// Data representations the application registered.
    pub datareps: crate::datarep::Datareps,
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
    pub topo: Option<crate::topo::Topo>,
}

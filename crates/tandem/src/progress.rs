//! The progress engine: owns the transports and drives them.
//!
//! For now it drives the TCP transport on every call (the `poll` policy of
//! the common MPI libraries); the waiting policy (spin, then block in the
//! kernel) lives with the caller's wait loop.

use std::time::Instant;

use crate::error::Result;
use crate::transport::tcp::TcpTransport;
use crate::transport::{FrameSink, SendState};
use crate::wire::Header;

/// Owns every transport of a rank.
pub struct Engine {
    tcp: TcpTransport,
}

impl Engine {
    pub fn new(tcp: TcpTransport) -> Engine {
        Engine { tcp }
    }

    /// The address other ranks use to reach this one.
    pub fn address(&self) -> &str {
        self.tcp.address()
    }

    /// Hands a frame to the transport that reaches `peer`.
    pub fn send(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState> {
        self.tcp.send(peer, header, payload, len, token)
    }

    /// Drives every transport once; with `block`, first waits in the kernel
    /// until one has something to do.
    pub fn progress(&mut self, sink: &mut dyn FrameSink, block: bool) -> bool {
        self.tcp.progress(sink, if block { -1 } else { 0 })
    }

    /// Whether frames are still waiting to leave.
    pub fn has_queued(&self) -> bool {
        self.tcp.has_queued()
    }

    /// Closes every connection.
    pub fn shutdown(&mut self, _deadline: Instant) {
        self.tcp.close_all();
    }
}

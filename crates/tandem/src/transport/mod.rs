//! Transports move frames between ranks. They know nothing of tags,
//! communicators or requests: the layer above tells them, through
//! [`FrameSink`], where each arriving payload goes, and learns from them when a
//! queued frame has left and when a peer is gone.

pub mod shm;
pub mod tcp;

use crate::wire::Header;

/// Where the payload of an arriving frame goes, decided by the layer above
/// when the header has been read.
pub enum PayloadDest {
    /// Straight into memory the layer above owns (a posted receive buffer):
    /// the first `cap` bytes land at `ptr`, any excess is discarded.
    Direct { ptr: *mut u8, cap: usize },
    /// Into a new buffer handed back with the completed frame.
    Buffer,
    /// Not now: stop reading from this peer until the layer above has room
    /// (it is held back by TCP flow control; nothing is dropped).
    Pause,
}

/// The payload of a completed frame.
pub enum Payload {
    /// The frame kind carries no payload.
    Empty,
    /// `written` bytes were placed at the [`PayloadDest::Direct`] pointer.
    Direct { written: usize },
    /// The whole payload, for [`PayloadDest::Buffer`].
    Buffer(Vec<u8>),
}

/// The layer above a transport, as the transport sees it.
pub trait FrameSink {
    /// A header arrived from `peer` (a world rank). Returns where its payload
    /// goes, or an error if the header is not acceptable (the connection is
    /// then dropped and the peer reported lost).
    fn on_header(&mut self, peer: u32, header: &Header) -> Result<PayloadDest, String>;
    /// A frame is complete.
    fn on_frame(&mut self, peer: u32, header: &Header, payload: Payload) -> Result<(), String>;
    /// A queued frame sent with a completion token has fully left.
    fn on_send_done(&mut self, token: u64);
    /// `peer` is gone; every operation involving it must end with an error.
    fn on_peer_lost(&mut self, peer: u32, reason: &str);
}

/// Whether a frame handed to a transport has left already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendState {
    /// Every byte was handed to the kernel; the payload memory is free.
    Done,
    /// Queued; the token will be reported through [`FrameSink::on_send_done`].
    Queued,
}

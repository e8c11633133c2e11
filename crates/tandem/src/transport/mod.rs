//! Transports move frames between ranks. They know nothing of tags,
//! communicators or requests: the layer above tells them, through
//! [`FrameSink`], where each arriving payload goes, and learns from them when a
//! queued frame has left and when a peer is gone.

pub mod shm;
pub mod shm_share;
pub mod tcp;

use crate::wire::Header;
use std::os::fd::RawFd;

/// Waits up to `timeout_ms` (-1: for ever, 0: not at all) for readiness on
/// epoll instance `epfd`, filling `events`; how many entries were filled
/// (0 on an interruption or error: the caller polls again anyway).
pub(crate) fn epoll_wait(epfd: RawFd, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
    let len = libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `events` is valid for writes of `len` entries.
    let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), len, timeout_ms) };
    n.max(0) as usize
}

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
    /// A frame that carries a payload arrived whole, `data` being all of it
    /// (a small message in one shared-memory cell): the same as
    /// [`FrameSink::on_header`], the copy it asks for and
    /// [`FrameSink::on_frame`], which sinks may do in one step. `Ok(false)`
    /// means not now (as [`PayloadDest::Pause`]): nothing was taken.
    fn on_whole_frame(&mut self, peer: u32, header: &Header, data: &[u8]) -> Result<bool, String> {
        whole_frame_in_steps(self, peer, header, data)
    }
    /// A queued frame sent with a completion token has fully left.
    fn on_send_done(&mut self, token: u64);
    /// `peer` is gone; every operation involving it must end with an error.
    fn on_peer_lost(&mut self, peer: u32, reason: &str);
}

/// Frames to processes by number, each over the transport that reaches it:
/// what the replication layer (replica/) sends through and drives, since
/// it speaks of processes where the layers above speak of ranks.
pub trait Links {
    /// As the transports' `send`: `payload` must stay valid for `len`
    /// bytes until the frame has left or its token is reported done.
    fn send(
        &mut self,
        process: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> crate::error::Result<SendState>;
    /// Drives every transport once, without waiting.
    fn progress(&mut self, sink: &mut dyn FrameSink) -> bool;
}

/// What [`FrameSink::on_whole_frame`] does unless a sink does better:
/// [`FrameSink::on_header`], the copy, [`FrameSink::on_frame`].
pub fn whole_frame_in_steps<S: FrameSink + ?Sized>(
    sink: &mut S,
    peer: u32,
    header: &Header,
    data: &[u8],
) -> Result<bool, String> {
    let payload = match sink.on_header(peer, header)? {
        PayloadDest::Pause => return Ok(false),
        PayloadDest::Direct { ptr, cap } => {
            let n = data.len().min(cap);
            // SAFETY: the sink promised `cap` writable bytes at `ptr`; `n`
            // is within both.
            unsafe { copy_bytes(data.as_ptr(), ptr, n) };
            Payload::Direct { written: n }
        }
        PayloadDest::Buffer => Payload::Buffer(data.to_vec()),
    };
    sink.on_frame(peer, header, payload)?;
    Ok(true)
}

/// Copies `n` bytes; small copies (every inline shared-memory payload)
/// without a call to `memcpy`.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`.
#[inline(always)]
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's promise; every access is within the first `n` bytes.
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                *dst = *src;
                *dst.add(n / 2) = *src.add(n / 2);
                *dst.add(n - 1) = *src.add(n - 1);
            }
            4..=8 => {
                let a = src.cast::<u32>().read_unaligned();
                let b = src.add(n - 4).cast::<u32>().read_unaligned();
                dst.cast::<u32>().write_unaligned(a);
                dst.add(n - 4).cast::<u32>().write_unaligned(b);
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// Whether a frame handed to a transport has left already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendState {
    /// Every byte was handed to the kernel; the payload memory is free.
    Done,
    /// Queued; the token will be reported through [`FrameSink::on_send_done`].
    Queued,
}

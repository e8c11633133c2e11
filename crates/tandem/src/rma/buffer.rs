//! Origin-side buffers of one-sided operations: the bytes to send (the
//! user's memory, or a packed copy when the datatype has gaps) and where
//! read data lands (the user's memory, or a buffer unpacked into it once
//! the read is complete).

use std::sync::Arc;

use crate::datatype::Layout;

/// `count` elements of a datatype with gaps at `ptr`.
#[derive(Clone)]
pub struct TypedBuf {
    pub ptr: *mut u8,
    pub count: usize,
    pub layout: Arc<Layout>,
}

impl TypedBuf {
    /// Bytes of packed data.
    pub fn bytes(&self) -> usize {
        self.layout.size * self.count
    }

    /// The data packed (a copy).
    ///
    /// # Safety
    /// The buffer must be valid for reads as the datatype describes.
    unsafe fn pack(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // SAFETY: the caller's promise.
        unsafe { self.layout.pack(self.ptr, self.count, &mut out) };
        out
    }

    /// Unpacks `data` into the buffer.
    ///
    /// # Safety
    /// The buffer must be valid for writes as the datatype describes.
    pub(crate) unsafe fn unpack(&self, data: &[u8]) {
        // SAFETY: the caller's promise.
        unsafe { self.layout.unpack(data, self.ptr, self.count) };
    }
}

/// An origin-side buffer of a one-sided call.
pub enum Origin {
    /// Its bytes lie contiguously from here.
    Flat(*mut u8),
    /// They do not: packed before writes, unpacked after reads.
    Typed(TypedBuf),
}

/// A read whose data arrives packed and is unpacked once complete.
pub(crate) struct Unpack {
    pub(crate) target: u32,
    /// When it was issued (see `Window::issued`).
    pub(crate) seq: u64,
    pub(crate) data: Vec<u8>,
    pub(crate) dest: TypedBuf,
}

/// Origin data ready to send: the user's memory or a packed copy.
#[inline(always)]
pub(crate) fn origin_bytes(o: &Origin) -> (*const u8, Option<Vec<u8>>) {
    match o {
        Origin::Flat(p) => (*p, None),
        Origin::Typed(t) => {
            // SAFETY: the buffer was checked by the layer above; the MPI
            // contract makes it readable as the datatype describes.
            let v = unsafe { t.pack() };
            (v.as_ptr(), Some(v))
        }
    }
}

/// Where data read from the target lands: the user's buffer when it is
/// contiguous, else a buffer unpacked into it on completion.
#[inline(always)]
pub(crate) fn landing(o: &Origin, target: u32) -> (*mut u8, Option<Unpack>) {
    match o {
        Origin::Flat(p) => (*p, None),
        Origin::Typed(t) => {
            let mut data = vec![0u8; t.bytes()];
            let p = data.as_mut_ptr();
            (
                p,
                Some(Unpack {
                    target,
                    // Numbered when recorded.
                    seq: 0,
                    data,
                    dest: t.clone(),
                }),
            )
        }
    }
}

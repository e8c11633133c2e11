//! The wire format: frame headers and the connection handshake, encoded and
//! validated in one place.
//!
//! Every frame starts with a fixed 40-byte little-endian header:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0 | magic | `0x54` ('T') |
//! | 1 | kind | [`FrameKind`] |
//! | 2..4 | reserved | zero |
//! | 4..8 | context | matching context (communicator) |
//! | 8..12 | src | sender's rank in that communicator |
//! | 12..16 | tag | message tag |
//! | 16..24 | len | message length in bytes (for `Data`/`Cts`: the bytes that will travel) |
//! | 24..32 | sreq | sender's request id (rendezvous) |
//! | 32..40 | rreq | receiver's request id (rendezvous); for `Rget`, the sender's buffer address |
//!
//! `Ctw` (clear to write) puts the receiver's buffer address where a
//! control frame needs no envelope: `context` holds its low 32 bits and
//! `src` its high 32 bits (see [`Header::clear_to_write`]).
//!
//! Between replicas of ranks (see replica/), an `Eager` frame's `rreq`
//! carries the message's sequence number from its sender rank to its
//! receiver rank.
//!
//! `Eager`, `Data`, `Put`, `GetReply`, `Acc` and `ReplicaHashes` frames are followed by
//! `len` payload bytes; the other kinds carry none. Decoding is total: any byte string either decodes to a
//! well-formed header or to a [`WireError`].

use std::fmt;

/// Size of an encoded frame header.
pub const HEADER_LEN: usize = 40;
/// First byte of every frame.
pub const MAGIC: u8 = 0x54;
/// Version of the frame protocol, checked in the handshake.
pub const PROTOCOL_VERSION: u16 = 1;
/// No eager payload may exceed this, whatever a peer's eager limit is.
pub const MAX_EAGER: u64 = 64 << 20;
/// No batch of replica hashes may exceed this.
pub const MAX_HASHES: u64 = 1 << 20;
/// No message may exceed this (MPI counts are 64-bit; memory is not).
pub const MAX_MESSAGE: u64 = 1 << 46;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// A whole message; payload follows.
    Eager = 1,
    /// Request to send a large message; no payload.
    Rts = 2,
    /// Clear to send: the receiver matched an RTS and posted its buffer.
    Cts = 3,
    /// Rendezvous data for a receive request; payload follows.
    Data = 4,
    /// Request to send where the receiver reads the data itself from the
    /// sender's memory (single copy); `rreq` carries the sender's buffer
    /// address. No payload.
    Rget = 5,
    /// The receiver has read a single-copy message; no payload.
    Fin = 6,
    /// One-sided write into memory the target exposed: `context` names the
    /// region, `rreq` the target address, `sreq` the origin's operation
    /// (answered by `Ack` if refused, or always when `tag` bit 0 is set);
    /// payload follows. With `tag` bit 1 the payload is a table of strided
    /// target blocks and their data (`rreq` unused; see rma/encoding.rs), as
    /// for an `Acc` whose tag carries the scatter flag.
    Put = 7,
    /// One-sided read: `context`, `rreq` and `len` as for `Put`; answered by
    /// `GetReply`. No payload.
    Get = 8,
    /// Data read for the origin's operation `sreq`; `tag` is 0 or the MPI
    /// error class that refused it; payload follows.
    GetReply = 9,
    /// One-sided accumulate: `context` and `rreq` as for `Put`, `tag` packs
    /// the operation, the element type and flags (fetch, compare-and-swap);
    /// payload follows.
    Acc = 10,
    /// Completion of the origin's operation `sreq`; `tag` is 0 or the MPI
    /// error class that refused it. No payload.
    Ack = 11,
    /// Lock request for region `context` (`tag` 1: exclusive, 0: shared),
    /// answered by `Ack` once granted. No payload.
    Lock = 12,
    /// Release of a lock on region `context`, answered by `Ack`. No payload.
    Unlock = 13,
    /// A 16-byte small message (RWAPI), carried in `sreq` and `rreq`. No
    /// payload.
    Small = 14,
    /// Asks for an `Ack` once everything sent before it is carried out. No
    /// payload.
    Sync = 15,
    /// Clear to write: the receiver matched an RTS and asks the sender to
    /// write `len` bytes straight into its buffer (same host, where the
    /// kernel permits); `rreq` is the receive request, the buffer address
    /// travels in `context` and `src`. No payload.
    Ctw = 16,
    /// The sender has written a clear-to-write message into the receiver's
    /// buffer; `rreq` names the receive. No payload.
    Wrote = 17,
    /// The sender matched a receive the receiver had advertised before the
    /// message left (same host; see p2p/advert.rs) and wrote the message
    /// into it: `rreq` names the receive, `context`, `src`, `tag` and `len`
    /// are the message's envelope. With `sreq` nonzero the write was refused
    /// and a DATA frame for `rreq` follows (answering send `sreq`). No
    /// payload.
    Claimed = 18,
    /// The sender cancels its rendezvous send `sreq` (`MPI_Cancel`):
    /// `context` is the message's. The receiver drops the RTS if no receive
    /// has taken it, and answers `Revoked` either way. No payload.
    Revoke = 19,
    /// Answer to `Revoke` for send `sreq`: `tag` 1 if the RTS was dropped
    /// (the send is cancelled), 0 if a receive had taken it (the send
    /// completes as usual). No payload.
    Revoked = 20,
    /// The receiver of single-copy message `sreq` (an `Rget`) reads it
    /// chunk by chunk and invites the sender to write chunks of it too
    /// (same host; see p2p/copy_help.rs): `rreq` is the receive buffer's
    /// address, `len` the bytes to copy, `context` the generation of the
    /// copy and `src` the chunk size. No payload.
    Help = 21,
    /// Replicas (replica/): the receiver replica that sends it asks this
    /// sender replica to send it the messages to its rank from sequence
    /// number `sreq` on, below `rreq` (0: every later one). No payload.
    ReplicaResume = 22,
    /// Replicas: the sending receiver replica has taken every message of
    /// this rank to its rank below sequence number `sreq`. No payload.
    ReplicaAck = 23,
    /// Replicas: this sender no longer keeps the messages the receiver
    /// replica needs next (`sreq`, the first it keeps); the receiver has
    /// fallen behind and stops. No payload.
    ReplicaBehind = 24,
    /// Replicas: the rank's leader replica matched its wildcard receive
    /// number `sreq` with the sender of rank `src` in communicator context
    /// `context`, world rank `tag` (see p2p/wildcard.rs). No payload.
    ReplicaDecision = 25,
    /// Replicas: handed up by the replication layer, never sent: with bit 1
    /// of `sreq`, this rank's leader replica (number `rreq`) was lost and
    /// what this replica heard from it goes to its siblings; with bit 0,
    /// this replica leads its rank from now on. No payload.
    ReplicaLead = 26,
    /// Replicas, with `replica_verify=hash`: hashes of messages this sender
    /// replica logged for the receiving replica's rank, to check the copies
    /// it gets from another replica against (see replica/verify.rs); the
    /// payload is `len` bytes of (sequence number, hash) pairs, 8 bytes
    /// each, little-endian.
    ReplicaHashes = 27,
    /// Replicas: the rank's leader replica made its choice number `sreq`
    /// (the outcome of a test, a probe, or which request a wait-any found
    /// done) and it came out as `rreq` (see p2p/wildcard.rs). No payload.
    ReplicaChoice = 28,
    /// Replicas, voting on copies (`replica_verify=hash`, three or more
    /// replicas): the receiver replica that sends it asks this sender
    /// replica for its copy of message `sreq` again (see replica/verify.rs).
    /// No payload.
    ReplicaFetch = 29,
    /// Flow control (p2p/credit.rs): the receiver consumed `sreq` more
    /// bytes of this sender's eager messages, which it may send eagerly
    /// again. No payload.
    Credit = 30,
    /// Replicas: the sending replica has finished (`MPI_Finalize`) and is
    /// about to leave; its connection closing next is not a loss. No
    /// payload.
    ReplicaDone = 31,
    /// Replicas: the sending replica has passed on to its siblings every
    /// decision and choice it heard from the lost leader replica number
    /// `sreq`; a new leader decides only once each live sibling said so
    /// (see p2p/wildcard.rs). No payload.
    ReplicaHandover = 32,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        match b {
            1 => Some(FrameKind::Eager),
            2 => Some(FrameKind::Rts),
            3 => Some(FrameKind::Cts),
            4 => Some(FrameKind::Data),
            5 => Some(FrameKind::Rget),
            6 => Some(FrameKind::Fin),
            7 => Some(FrameKind::Put),
            8 => Some(FrameKind::Get),
            9 => Some(FrameKind::GetReply),
            10 => Some(FrameKind::Acc),
            11 => Some(FrameKind::Ack),
            12 => Some(FrameKind::Lock),
            13 => Some(FrameKind::Unlock),
            14 => Some(FrameKind::Small),
            15 => Some(FrameKind::Sync),
            16 => Some(FrameKind::Ctw),
            17 => Some(FrameKind::Wrote),
            18 => Some(FrameKind::Claimed),
            19 => Some(FrameKind::Revoke),
            20 => Some(FrameKind::Revoked),
            21 => Some(FrameKind::Help),
            22 => Some(FrameKind::ReplicaResume),
            23 => Some(FrameKind::ReplicaAck),
            24 => Some(FrameKind::ReplicaBehind),
            25 => Some(FrameKind::ReplicaDecision),
            26 => Some(FrameKind::ReplicaLead),
            27 => Some(FrameKind::ReplicaHashes),
            28 => Some(FrameKind::ReplicaChoice),
            29 => Some(FrameKind::ReplicaFetch),
            30 => Some(FrameKind::Credit),
            31 => Some(FrameKind::ReplicaDone),
            32 => Some(FrameKind::ReplicaHandover),
            _ => None,
        }
    }
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: FrameKind,
    pub context: u32,
    pub src: u32,
    pub tag: i32,
    pub len: u64,
    pub sreq: u64,
    pub rreq: u64,
}

/// Why bytes did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    BadMagic(u8),
    UnknownKind(u8),
    ReservedNotZero,
    TooLong { kind: FrameKind, len: u64 },
    NegativeTag(i32),
    BadHandshake(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadMagic(b) => {
                write!(f, "frame does not start with the magic byte (got {b:#04x})")
            }
            WireError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            WireError::ReservedNotZero => write!(f, "reserved header bytes are not zero"),
            WireError::TooLong { kind, len } => {
                write!(f, "{kind:?} frame claims {len} bytes, over the limit")
            }
            WireError::NegativeTag(t) => write!(f, "frame carries negative tag {t}"),
            WireError::BadHandshake(why) => write!(f, "bad handshake: {why}"),
        }
    }
}

impl Header {
    /// Whether a payload (possibly empty) follows this header.
    pub fn carries_payload(&self) -> bool {
        matches!(
            self.kind,
            FrameKind::Eager
                | FrameKind::Data
                | FrameKind::Put
                | FrameKind::GetReply
                | FrameKind::Acc
                | FrameKind::ReplicaHashes
        )
    }

    /// Bytes of payload that follow this header on the wire.
    pub fn payload_len(&self) -> u64 {
        if self.carries_payload() {
            self.len
        } else {
            0
        }
    }

    /// A clear-to-write frame: `len` bytes may be written at `addr` for
    /// receive `rreq`, answering send `sreq`.
    pub fn clear_to_write(sreq: u64, rreq: u64, len: u64, addr: u64) -> Header {
        Header {
            kind: FrameKind::Ctw,
            context: addr as u32,
            src: (addr >> 32) as u32,
            tag: 0,
            len,
            sreq,
            rreq,
        }
    }

    /// The buffer address a [`FrameKind::Ctw`] frame carries.
    pub fn write_addr(&self) -> u64 {
        u64::from(self.context) | (u64::from(self.src) << 32)
    }

    /// Encodes into the fixed-size wire form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = MAGIC;
        b[1] = self.kind as u8;
        b[4..8].copy_from_slice(&self.context.to_le_bytes());
        b[8..12].copy_from_slice(&self.src.to_le_bytes());
        b[12..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.sreq.to_le_bytes());
        b[32..40].copy_from_slice(&self.rreq.to_le_bytes());
        b
    }

    /// Decodes and validates a header.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, WireError> {
        if b[0] != MAGIC {
            return Err(WireError::BadMagic(b[0]));
        }
        let kind = FrameKind::from_u8(b[1]).ok_or(WireError::UnknownKind(b[1]))?;
        if b[2] != 0 || b[3] != 0 {
            return Err(WireError::ReservedNotZero);
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let h = Header {
            kind,
            context: u32_at(4),
            src: u32_at(8),
            tag: u32_at(12) as i32,
            len: u64_at(16),
            sreq: u64_at(24),
            rreq: u64_at(32),
        };
        let limit = match kind {
            // Both are buffered whole before use.
            FrameKind::Eager | FrameKind::Acc => MAX_EAGER,
            FrameKind::ReplicaHashes => MAX_HASHES,
            _ => MAX_MESSAGE,
        };
        if h.len > limit {
            return Err(WireError::TooLong { kind, len: h.len });
        }
        if h.tag < 0 {
            return Err(WireError::NegativeTag(h.tag));
        }
        Ok(h)
    }
}

/// Size of the handshake a connecting rank sends.
pub const HELLO_LEN: usize = 48;
/// Size of the answer to a handshake.
pub const HELLO_REPLY_LEN: usize = 8;
const HELLO_MAGIC: &[u8; 4] = b"TNDM";

/// The first bytes on every connection between ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub rank: u32,
    pub secret: [u8; 32],
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(HELLO_MAGIC);
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[8..12].copy_from_slice(&self.rank.to_le_bytes());
        b[16..48].copy_from_slice(&self.secret);
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, WireError> {
        if &b[0..4] != HELLO_MAGIC {
            return Err(WireError::BadHandshake("wrong magic"));
        }
        if b[6..8] != [0, 0] || b[12..16] != [0; 4] {
            return Err(WireError::BadHandshake("reserved bytes not zero"));
        }
        let mut secret = [0u8; 32];
        secret.copy_from_slice(&b[16..48]);
        Ok(Hello {
            version: u16::from_le_bytes([b[4], b[5]]),
            rank: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            secret,
        })
    }
}

/// The acceptor's answer: keep this connection, or drop it (the other one
/// between the same two ranks wins).
pub fn encode_hello_reply(accept: bool) -> [u8; HELLO_REPLY_LEN] {
    let mut b = [0u8; HELLO_REPLY_LEN];
    b[0..4].copy_from_slice(HELLO_MAGIC);
    b[4] = u8::from(accept);
    b
}

/// Decodes the acceptor's answer.
pub fn decode_hello_reply(b: &[u8; HELLO_REPLY_LEN]) -> Result<bool, WireError> {
    if &b[0..4] != HELLO_MAGIC || b[5..8] != [0; 3] || b[4] > 1 {
        return Err(WireError::BadHandshake("malformed reply"));
    }
    Ok(b[4] == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: FrameKind::Rts,
            context: 7,
            src: 3,
            tag: 42,
            len: 1 << 30,
            sreq: 0xdead_beef_0000_0001,
            rreq: 0,
        }
    }

    #[test]
    fn header_round_trips() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode()), Ok(h));
        assert_eq!(h.payload_len(), 0);
        let e = Header {
            kind: FrameKind::Eager,
            len: 5,
            ..h
        };
        assert_eq!(e.payload_len(), 5);
        let c = Header::clear_to_write(3, 4, 1 << 20, 0x7fff_1234_5678_9ab0);
        let d = Header::decode(&c.encode()).unwrap();
        assert_eq!(
            (d.kind, d.write_addr(), d.payload_len()),
            (FrameKind::Ctw, 0x7fff_1234_5678_9ab0, 0)
        );
        let w = Header {
            kind: FrameKind::Wrote,
            ..h
        };
        assert_eq!(Header::decode(&w.encode()), Ok(w));
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let good = sample().encode();
        let mut b = good;
        b[0] = 0;
        assert!(matches!(Header::decode(&b), Err(WireError::BadMagic(0))));
        let mut b = good;
        b[1] = 200;
        assert!(matches!(
            Header::decode(&b),
            Err(WireError::UnknownKind(200))
        ));
        let mut b = good;
        b[3] = 1;
        assert_eq!(Header::decode(&b), Err(WireError::ReservedNotZero));
        let mut b = good;
        b[1] = FrameKind::Eager as u8;
        assert!(matches!(Header::decode(&b), Err(WireError::TooLong { .. })));
        let mut b = good;
        b[12..16].copy_from_slice(&(-5i32).to_le_bytes());
        assert_eq!(Header::decode(&b), Err(WireError::NegativeTag(-5)));
    }

    /// Every possible byte string decodes to a header or an error; none panics.
    #[test]
    fn decoding_is_total_on_random_input() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            let mut b = [0u8; HEADER_LEN];
            for x in b.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *x = state as u8;
            }
            // Bias towards plausible frames so that deeper checks are reached.
            if state.is_multiple_of(2) {
                b[0] = MAGIC;
                b[1] = (state % 7) as u8;
                b[2] = 0;
                b[3] = 0;
            }
            if let Ok(h) = Header::decode(&b) {
                assert_eq!(Header::decode(&h.encode()), Ok(h));
            }
        }
    }

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        let h = Hello {
            version: PROTOCOL_VERSION,
            rank: 5,
            secret: [7; 32],
        };
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        assert!(Hello::decode(&[0u8; HELLO_LEN]).is_err());
        assert_eq!(decode_hello_reply(&encode_hello_reply(true)), Ok(true));
        assert_eq!(decode_hello_reply(&encode_hello_reply(false)), Ok(false));
        assert!(decode_hello_reply(&[1u8; HELLO_REPLY_LEN]).is_err());
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        /// Every kind there is, found through the decoder's own table so
        /// that a new kind is drawn as soon as it exists.
        fn all_kinds() -> Vec<FrameKind> {
            (0..=u8::MAX).filter_map(FrameKind::from_u8).collect()
        }

        fn any_kind() -> impl Strategy<Value = FrameKind> {
            proptest::sample::select(all_kinds())
        }

        /// A header `decode` must accept: a known kind, a tag that is not
        /// negative and a length within the kind's limit.
        fn valid_header() -> impl Strategy<Value = Header> {
            (
                any_kind(),
                any::<u32>(),
                any::<u32>(),
                0..=i32::MAX,
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
            )
                .prop_map(|(kind, context, src, tag, len, sreq, rreq)| {
                    let limit = match kind {
                        FrameKind::Eager | FrameKind::Acc => MAX_EAGER,
                        FrameKind::ReplicaHashes => MAX_HASHES,
                        _ => MAX_MESSAGE,
                    };
                    Header {
                        kind,
                        context,
                        src,
                        tag,
                        len: len % (limit + 1),
                        sreq,
                        rreq,
                    }
                })
        }

        /// Raw headers, half of them with a plausible start so that the
        /// checks past the magic byte and the kind are reached.
        fn raw_header() -> impl Strategy<Value = [u8; HEADER_LEN]> {
            (any::<[u8; HEADER_LEN]>(), any::<bool>(), 0u8..40).prop_map(
                |(mut b, plausible, kind)| {
                    if plausible {
                        b[0] = MAGIC;
                        b[1] = kind;
                        b[2] = 0;
                        b[3] = 0;
                    }
                    b
                },
            )
        }

        proptest! {
            #![proptest_config(config())]

            /// Any 40 bytes decode or are refused; an accepted header is the
            /// only encoding of itself.
            #[test]
            fn prop_header_decode_is_total_and_canonical(b in raw_header()) {
                if let Ok(h) = Header::decode(&b) {
                    prop_assert_eq!(h.encode(), b);
                    prop_assert!(h.tag >= 0);
                    prop_assert!(h.payload_len() <= MAX_MESSAGE);
                }
            }

            #[test]
            fn prop_header_round_trips(h in valid_header()) {
                prop_assert_eq!(Header::decode(&h.encode()), Ok(h));
            }

            /// A length or tag out of bounds is refused for every kind.
            #[test]
            fn prop_header_refuses_negative_tags_and_long_lengths(
                h in valid_header(),
                tag in i32::MIN..0,
                excess in 1u64..=u64::MAX - MAX_MESSAGE,
            ) {
                let negative = Header { tag, ..h };
                prop_assert_eq!(Header::decode(&negative.encode()), Err(WireError::NegativeTag(tag)));
                let long = Header { len: MAX_MESSAGE + excess, ..h };
                let refused = matches!(Header::decode(&long.encode()), Err(WireError::TooLong { .. }));
                prop_assert!(refused);
            }

            #[test]
            fn prop_clear_to_write_carries_its_address(
                sreq in any::<u64>(),
                rreq in any::<u64>(),
                len in 0..=MAX_MESSAGE,
                addr in any::<u64>(),
            ) {
                let d = Header::decode(&Header::clear_to_write(sreq, rreq, len, addr).encode()).unwrap();
                prop_assert_eq!((d.kind, d.write_addr(), d.sreq, d.rreq, d.len), (FrameKind::Ctw, addr, sreq, rreq, len));
            }

            #[test]
            fn prop_hello_decode_is_total_and_canonical(b in any::<[u8; HELLO_LEN]>(), plausible in any::<bool>()) {
                let mut b = b;
                if plausible {
                    b[0..4].copy_from_slice(HELLO_MAGIC);
                    b[6..8].fill(0);
                    b[12..16].fill(0);
                }
                if let Ok(h) = Hello::decode(&b) {
                    prop_assert_eq!(h.encode(), b);
                }
            }

            #[test]
            fn prop_hello_round_trips(version in any::<u16>(), rank in any::<u32>(), secret in any::<[u8; 32]>()) {
                let h = Hello { version, rank, secret };
                prop_assert_eq!(Hello::decode(&h.encode()), Ok(h));
            }

            #[test]
            fn prop_hello_reply_decode_is_total_and_canonical(b in any::<[u8; HELLO_REPLY_LEN]>(), plausible in any::<bool>()) {
                let mut b = b;
                if plausible {
                    b[0..4].copy_from_slice(HELLO_MAGIC);
                    b[4] &= 1;
                    b[5..8].fill(0);
                }
                if let Ok(accept) = decode_hello_reply(&b) {
                    prop_assert_eq!(encode_hello_reply(accept), b);
                }
            }
        }

        /// Each kind decodes from its own number, so that drawing numbers
        /// through `from_u8` draws every kind once.
        #[test]
        fn kinds_decode_from_their_own_numbers() {
            assert!(!all_kinds().is_empty());
            for b in 0..=u8::MAX {
                if let Some(k) = FrameKind::from_u8(b) {
                    assert_eq!(k as u8, b);
                }
            }
            assert_eq!(FrameKind::from_u8(0), None);
        }
    }
}

//! Entry points for coverage-guided fuzzing (the cargo-fuzz targets in
//! `fuzz/`, run with a nightly toolchain): one per decoder of bytes another
//! process wrote. Each takes any bytes, decodes them, and panics only on a
//! finding: a decoder that panics, or accepts bytes it would not have
//! written itself (what it accepts must encode back to the same bytes). The
//! property tests (`prop_` in the decoders' modules, `scripts/fuzz.sh`)
//! drive the same decoders with structured inputs on stable Rust; the test
//! below gives every entry point a short fixed-seed pass in CI.
//!
//! Not part of the API.

use crate::bootstrap::{decode_secret, encode_secret};
use crate::stats::Counters;
use crate::wire::{
    decode_hello_reply, encode_hello_reply, Header, Hello, HEADER_LEN, HELLO_LEN, HELLO_REPLY_LEN,
    MAX_MESSAGE,
};

/// A decoder's entry point: takes any bytes, panics only on a finding.
pub type EntryPoint = fn(&[u8]);

/// Every entry point, by the name of its cargo-fuzz target.
pub const ENTRY_POINTS: &[(&str, EntryPoint)] = &[
    ("frame_header", frame_header),
    ("hello", hello),
    ("hello_reply", hello_reply),
    ("job_secret", job_secret),
    ("rma_table", rma_table),
    ("pmi2_answer", pmi2_answer),
    ("coll_rules", coll_rules),
    ("counters", counters),
];

/// A frame header: the first 40 bytes.
pub fn frame_header(data: &[u8]) {
    let Some(b) = data.first_chunk::<HEADER_LEN>() else {
        return;
    };
    if let Ok(h) = Header::decode(b) {
        assert_eq!(&h.encode(), b, "an accepted header is its own encoding");
        assert!(h.tag >= 0, "a negative tag was accepted");
        assert!(
            h.payload_len() <= MAX_MESSAGE,
            "an over-long payload was accepted"
        );
    }
}

/// The hello a connecting rank sends: the first 48 bytes.
pub fn hello(data: &[u8]) {
    let Some(b) = data.first_chunk::<HELLO_LEN>() else {
        return;
    };
    if let Ok(h) = Hello::decode(b) {
        assert_eq!(&h.encode(), b, "an accepted hello is its own encoding");
    }
}

/// The answer to a hello: the first 8 bytes.
pub fn hello_reply(data: &[u8]) {
    let Some(b) = data.first_chunk::<HELLO_REPLY_LEN>() else {
        return;
    };
    if let Ok(accept) = decode_hello_reply(b) {
        assert_eq!(
            &encode_hello_reply(accept),
            b,
            "an accepted reply is its own encoding"
        );
    }
}

/// The job secret as the launcher passes it (hex text).
pub fn job_secret(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some(s) = decode_secret(&text) {
        assert_eq!(
            encode_secret(&s),
            text.to_ascii_lowercase(),
            "a secret decoded from text that does not spell it"
        );
    }
}

/// The block table of a scattered one-sided payload.
pub fn rma_table(data: &[u8]) {
    if let Ok((blocks, rest)) = crate::rma::encoding::decode_table(data) {
        let mut again = Vec::new();
        crate::rma::encoding::encode_table(&blocks, &mut again);
        again.extend_from_slice(rest);
        assert_eq!(
            again, data,
            "a decoded table does not encode back to its bytes"
        );
    }
}

/// A PMI-2 server's answer (key-value pairs, and the process mapping of
/// the rank given by the first four bytes).
pub fn pmi2_answer(data: &[u8]) {
    let (rank, text) = match data.split_first_chunk::<4>() {
        Some((r, rest)) => (u32::from_le_bytes(*r), rest),
        None => (0, data),
    };
    let text = String::from_utf8_lossy(text);
    let _ = crate::bootstrap::pmi2::parse_pairs(&text);
    let _ = crate::bootstrap::pmi2::parse_mapping(&text, rank);
}

/// A `coll_rules` file.
pub fn coll_rules(data: &[u8]) {
    let _ = crate::coll::select::parse_rules(&String::from_utf8_lossy(data));
}

/// The counters a rank reports to the launcher (`--set stats=1`).
pub fn counters(data: &[u8]) {
    if let Some(c) = Counters::decode(&String::from_utf8_lossy(data)) {
        assert_eq!(
            Counters::decode(&c.encode()),
            Some(c),
            "decoded counters do not survive their own encoding"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short fixed-seed pass over every entry point: random bytes, and
    /// valid encodings with a few bytes changed (which reach past the
    /// first checks).
    #[test]
    fn every_entry_point_takes_any_bytes() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let valid: Vec<Vec<u8>> = vec![
            Header::clear_to_write(1, 2, 300, 0x1000).encode().to_vec(),
            Hello {
                version: 1,
                rank: 3,
                secret: [7; 32],
            }
            .encode()
            .to_vec(),
            encode_hello_reply(true).to_vec(),
            encode_secret(&[9; 32]).into_bytes(),
            b"cmd=get-result rc=0 value=(vector,(0,2,1))\n".to_vec(),
            br#"{"bcast": [{"max_bytes": 1024, "algorithm": "binomial"}]}"#.to_vec(),
        ];
        for (name, entry) in ENTRY_POINTS {
            for i in 0..4000 {
                let mut data = if i % 2 == 0 {
                    let len = (next() % 96) as usize;
                    (0..len).map(|_| next() as u8).collect()
                } else {
                    valid[(next() as usize) % valid.len()].clone()
                };
                for _ in 0..(next() % 3) {
                    if !data.is_empty() {
                        let at = (next() as usize) % data.len();
                        data[at] = next() as u8;
                    }
                }
                let outcome = std::panic::catch_unwind(|| entry(&data));
                assert!(outcome.is_ok(), "{name} panicked on {data:?}");
            }
        }
    }
}

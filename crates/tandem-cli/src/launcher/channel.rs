//! The channel between the master (`tandem run`) and a per-host helper
//! (`tandem _host`), carried over the agent's stdin and stdout (`ssh`,
//! `ip netns exec`, ...), so nothing of the job — its secret included —
//! ever appears on a command line or in a file.
//!
//! A record is one line of space-separated ASCII words whose last word is
//! the length of a payload of raw bytes that follows the newline:
//! `out 3 1 12\nhello world\n`.
//!
//! Master to helper, the job (ending with `start`), then commands:
//!
//! | record | meaning |
//! |---|---|
//! | `job <size> <hosts> <id> <secret> <connect_timeout_ms>` | the job |
//! | `master <host:port>` | an address of the master's service (repeated, best first) |
//! | `rank <world rank>` | a rank of this host (repeated; the order gives the local ranks) |
//! | `program` + bytes, `arg` + bytes, `env` + `NAME=VALUE`, `cwd` + bytes | what to run |
//! | `stdin` | world rank 0 (on this host) reads what follows in `in` records |
//! | `stdin <rank>` | in a replicated job: process `rank`, a replica of rank 0, does (repeated) |
//! | `start` | the job is complete: start the ranks |
//! | `signal <number>` | send a signal to every rank still running |
//! | `kill <rank>` | stop one process: SIGCONT, then SIGKILL (a replica its rank no longer needs) |
//! | `in` + bytes | input for rank 0 (for all its replicas here); no bytes: its end |
//!
//! Helper to master:
//!
//! | record | meaning |
//! |---|---|
//! | `ready <node address>` | every rank started; the address this host reached the master from |
//! | `pid <rank> <pid>` | a rank's process id on its host |
//! | `out <rank> <1 or 2>` + bytes | a rank's stdout or stderr |
//! | `exit <rank> exited <status>` / `exit <rank> killed <signal> <core 0/1>` | a rank ended |
//! | `fail <exit status>` + message | the helper could not start the job; it exits |
//! | `ack <bytes>` | that much of rank 0's input was written to it (to all its replicas here; the master keeps at most [`STDIN_WINDOW`] bytes in flight) |
//! | `done` | every rank has ended; the helper exits |
//!
//! EOF on the helper's stdin means the master is gone: the helper kills its
//! ranks at once.
//!
//! In a replicated job (`--replicas R`) a "rank" in these records is one of
//! the job's processes, its `TANDEM_JOB_RANK`: replica p / N of rank p % N.

/// Input for a remote rank 0 sent but not yet acknowledged, at most.
pub const STDIN_WINDOW: usize = 1 << 20;

/// Longest record line accepted.
const MAX_LINE: usize = 4096;
/// Largest payload accepted.
const MAX_PAYLOAD: usize = 16 << 20;

/// Encodes one record.
pub fn encode(words: &[&str], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + payload.len());
    for w in words {
        debug_assert!(!w.is_empty() && w.bytes().all(|b| b.is_ascii_graphic()));
        out.extend_from_slice(w.as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(payload);
    out
}

/// A decoded record.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    pub words: Vec<String>,
    pub payload: Vec<u8>,
}

impl Record {
    /// The record's kind (its first word).
    pub fn kind(&self) -> &str {
        self.words.first().map(String::as_str).unwrap_or("")
    }

    /// Word `i` parsed as a number.
    pub fn num<T: std::str::FromStr>(&self, i: usize) -> Option<T> {
        self.words.get(i)?.parse().ok()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}

/// Splits a byte stream into records.
#[derive(Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete record, `Ok(None)` if more bytes are needed, or an
    /// error for a malformed stream.
    pub fn next_record(&mut self) -> Result<Option<Record>, String> {
        let Some(end) = self.buf.iter().position(|&b| b == b'\n') else {
            if self.buf.len() > MAX_LINE {
                return Err("record line too long".into());
            }
            return Ok(None);
        };
        if end > MAX_LINE {
            return Err("record line too long".into());
        }
        let line = std::str::from_utf8(&self.buf[..end])
            .map_err(|_| "record line is not text".to_string())?;
        let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
        let len: usize = words
            .pop()
            .and_then(|w| w.parse().ok())
            .filter(|&n| n <= MAX_PAYLOAD)
            .ok_or_else(|| format!("malformed record '{}'", line.escape_debug()))?;
        if words.is_empty() || words.iter().any(|w| w.is_empty()) {
            return Err(format!("malformed record '{}'", line.escape_debug()));
        }
        if self.buf.len() < end + 1 + len {
            return Ok(None);
        }
        let payload = self.buf[end + 1..end + 1 + len].to_vec();
        self.buf.drain(..end + 1 + len);
        Ok(Some(Record { words, payload }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_pieces() {
        let mut stream = encode(&["out", "3", "1"], b"hello\nworld");
        stream.extend(encode(&["done"], b""));
        let mut d = Decoder::default();
        let mut got = Vec::new();
        for b in &stream {
            d.push(std::slice::from_ref(b));
            while let Some(r) = d.next_record().unwrap() {
                got.push(r);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].words, ["out", "3", "1"]);
        assert_eq!(got[0].num::<u32>(1), Some(3));
        assert_eq!(got[0].payload, b"hello\nworld");
        assert_eq!(got[1].kind(), "done");
    }

    #[test]
    fn malformed_records() {
        for bad in [&b"out x\n"[..], b"5\n", b"a  3\n", b"a -1\n"] {
            let mut d = Decoder::default();
            d.push(bad);
            assert!(d.next_record().is_err(), "{bad:?}");
        }
        let mut d = Decoder::default();
        d.push(&vec![b'a'; MAX_LINE + 2]);
        assert!(d.next_record().is_err());
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        /// Pushes `stream` cut into pieces of the given sizes (in turn),
        /// taking records after each; the records, and the error that ended
        /// the stream if one did.
        fn decode_in_pieces(stream: &[u8], sizes: &[usize]) -> (Vec<Record>, Option<String>) {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            let mut rest = stream;
            for &size in sizes.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, after) = rest.split_at(size.min(rest.len()));
                rest = after;
                d.push(piece);
                loop {
                    match d.next_record() {
                        Ok(Some(r)) => got.push(r),
                        Ok(None) => break,
                        Err(e) => return (got, Some(e)),
                    }
                }
            }
            (got, None)
        }

        fn split_sizes() -> impl Strategy<Value = Vec<usize>> {
            proptest::collection::vec(prop_oneof![1usize..4, 1usize..64, 1usize..5000], 1..8)
        }

        fn record() -> impl Strategy<Value = (Vec<String>, Vec<u8>)> {
            (
                proptest::collection::vec("[!-~]{1,12}", 1..6),
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..64),
                    proptest::collection::vec(any::<u8>(), 0..3000),
                ],
            )
        }

        /// Streams close to records: numbers, spaces and newlines in the
        /// places a line has them, and plain noise.
        fn near_stream() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..600),
                "([a-z]{0,3}( [0-9]{0,3}){0,3}( -?[0-9+]{0,20})?\n?[a-z\n]{0,5}){0,8}"
                    .prop_map(String::into_bytes),
                proptest::collection::vec(
                    prop_oneof![Just(b'a'), Just(b' '), Just(b'\n')],
                    4090..4200
                ),
            ]
        }

        proptest! {
            #![proptest_config(config())]

            /// Records encoded one after another come back whole and in
            /// order, however the stream is cut.
            #[test]
            fn prop_channel_records_round_trip_across_any_split(
                records in proptest::collection::vec(record(), 0..6),
                sizes in split_sizes(),
            ) {
                let mut stream = Vec::new();
                for (words, payload) in &records {
                    let words: Vec<&str> = words.iter().map(String::as_str).collect();
                    stream.extend(encode(&words, payload));
                }
                let (got, err) = decode_in_pieces(&stream, &sizes);
                prop_assert_eq!(err, None);
                let want: Vec<Record> = records
                    .into_iter()
                    .map(|(words, payload)| Record { words, payload })
                    .collect();
                prop_assert_eq!(got, want);
            }

            /// Any bytes in any pieces: records or an error, never a panic;
            /// what comes out has words and a payload within the limit.
            #[test]
            fn prop_channel_decoder_never_panics(stream in near_stream(), sizes in split_sizes()) {
                let (got, _) = decode_in_pieces(&stream, &sizes);
                for r in got {
                    prop_assert!(!r.words.is_empty() && r.words.iter().all(|w| !w.is_empty()));
                    prop_assert!(r.payload.len() <= MAX_PAYLOAD);
                }
            }
        }
    }
}

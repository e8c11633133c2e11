//! The client side of PMI-2, the process-management interface Slurm offers
//! with `srun --mpi=pmi2`: ranks started by `srun` (without `tandem run`)
//! learn their rank and size and exchange their addresses through it.
//!
//! The protocol runs over the descriptor in `PMI_FD`. It starts with one
//! PMI-1 style line (`cmd=init pmi_version=2 pmi_subversion=0\n`, answered
//! by `cmd=response_to_init ... rc=0\n`); after that every message is a
//! 6-character, space-padded decimal length followed by that many bytes of
//! `key=value;` pairs (a `;` inside a value is doubled). The commands used:
//! `fullinit`, `info-getjobattr` (`PMI_process_mapping`), `kvs-put`,
//! `kvs-fence`, `kvs-get`, `finalize` and `abort`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use crate::error::{Error, ErrorClass};

/// Longest message accepted from the server.
const MAX_MESSAGE: usize = 1 << 20;

fn err(msg: impl Into<String>) -> Error {
    Error::new(ErrorClass::Other, format!("PMI-2: {}", msg.into()))
}

/// A connection to the PMI-2 server (Slurm's step daemon).
pub struct Client {
    file: File,
    pub rank: u32,
    pub size: u32,
}

impl Client {
    /// `None` unless `PMI_FD` says we run under a PMI-2 server.
    pub fn from_env() -> Option<Result<Client, Error>> {
        let fd_text = std::env::var("PMI_FD").ok()?;
        Some(Self::connect(&fd_text))
    }

    fn connect(fd_text: &str) -> Result<Client, Error> {
        let fd: RawFd = fd_text
            .trim()
            .parse()
            .ok()
            .filter(|fd| *fd > 2)
            .ok_or_else(|| err(format!("PMI_FD is not a descriptor: '{fd_text}'")))?;
        // SAFETY: fcntl(F_GETFD) only asks whether `fd` is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(err(format!(
                "PMI_FD={fd} is not open (was this started by srun --mpi=pmi2?)"
            )));
        }
        // SAFETY: the descriptor was handed to this process to own by the
        // PMI server and nothing else in the process uses it.
        let file = unsafe { File::from_raw_fd(fd) };
        // SAFETY: plain fcntl on the descriptor we now own: keep it out of
        // programs the rank execs.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        let mut client = Client {
            file,
            rank: 0,
            size: 0,
        };
        client
            .file
            .write_all(b"cmd=init pmi_version=2 pmi_subversion=0\n")
            .map_err(|e| err(format!("init: {e}")))?;
        let line = client.read_line()?;
        let words: HashMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        if words.get("cmd") != Some(&"response_to_init") || words.get("rc") != Some(&"0") {
            return Err(err(format!("the server refused init: '{line}'")));
        }
        let pmirank = std::env::var("PMI_RANK")
            .or_else(|_| std::env::var("SLURM_PROCID"))
            .unwrap_or_else(|_| "0".into());
        let jobid = std::env::var("PMI_JOBID")
            .or_else(|_| std::env::var("SLURM_JOB_ID"))
            .unwrap_or_default();
        let r = client.command(
            "fullinit",
            &[
                ("pmijobid", &jobid),
                ("pmirank", &pmirank),
                ("threaded", "FALSE"),
            ],
        )?;
        let num = |key: &str| -> Result<u32, Error> {
            r.get(key)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| err(format!("fullinit answer lacks '{key}'")))
        };
        client.rank = num("rank")?;
        client.size = num("size")?;
        if client.size == 0 || client.rank >= client.size {
            return Err(err(format!(
                "the server gave rank {} of {}",
                client.rank, client.size
            )));
        }
        Ok(client)
    }

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    fn read_line(&mut self) -> Result<String, Error> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        loop {
            match self.file.read(&mut b) {
                Ok(0) => return Err(err("the server closed the connection")),
                Ok(_) if b[0] == b'\n' => break,
                Ok(_) => line.push(b[0]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err(format!("read: {e}"))),
            }
            if line.len() > MAX_MESSAGE {
                return Err(err("answer too long"));
            }
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    /// Sends `cmd` with its pairs (no answer awaited).
    fn send(&mut self, cmd: &str, pairs: &[(&str, &str)]) -> Result<(), Error> {
        let mut body = format!("cmd={cmd};");
        for (k, v) in pairs {
            body.push_str(k);
            body.push('=');
            body.push_str(&v.replace(';', ";;"));
            body.push(';');
        }
        let msg = format!("{:<6}{body}", body.len());
        self.file
            .write_all(msg.as_bytes())
            .map_err(|e| err(format!("{cmd}: {e}")))
    }

    /// Sends `cmd` and returns the answer's pairs; an answer with `rc`
    /// other than 0 is an error.
    pub fn command(
        &mut self,
        cmd: &str,
        pairs: &[(&str, &str)],
    ) -> Result<HashMap<String, String>, Error> {
        self.send(cmd, pairs)?;
        let mut len = [0u8; 6];
        self.file
            .read_exact(&mut len)
            .map_err(|e| err(format!("{cmd}: no answer: {e}")))?;
        let n: usize = std::str::from_utf8(&len)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .filter(|&n| n <= MAX_MESSAGE)
            .ok_or_else(|| err(format!("{cmd}: malformed answer length {len:?}")))?;
        let mut body = vec![0u8; n];
        self.file
            .read_exact(&mut body)
            .map_err(|e| err(format!("{cmd}: truncated answer: {e}")))?;
        let answer = parse_pairs(&String::from_utf8_lossy(&body));
        let want = format!("{cmd}-response");
        if answer.get("cmd").map(String::as_str) != Some(want.as_str()) {
            return Err(err(format!(
                "{cmd}: unexpected answer '{}'",
                String::from_utf8_lossy(&body)
            )));
        }
        match answer.get("rc").map(String::as_str) {
            Some("0") | None => Ok(answer),
            Some(rc) => Err(err(format!(
                "{cmd} failed with rc {rc}{}",
                answer
                    .get("errmsg")
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
        }
    }

    /// A job attribute (`PMI_process_mapping`, ...).
    pub fn job_attr(&mut self, key: &str) -> Option<String> {
        let a = self.command("info-getjobattr", &[("key", key)]).ok()?;
        match a.get("found").map(String::as_str) {
            Some("TRUE") => a.get("value").cloned(),
            _ => None,
        }
    }
}

/// Parses `k=v;k=v;` with `;;` standing for a `;` inside a value.
pub(crate) fn parse_pairs(body: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut key = String::new();
    let mut cur = String::new();
    let mut in_value = false;
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ';' if chars.peek() == Some(&';') && in_value => {
                chars.next();
                cur.push(';');
            }
            ';' => {
                if in_value {
                    out.insert(std::mem::take(&mut key), std::mem::take(&mut cur));
                }
                in_value = false;
                cur.clear();
            }
            '=' if !in_value => {
                key = std::mem::take(&mut cur);
                in_value = true;
            }
            c => cur.push(c),
        }
    }
    if in_value {
        out.insert(key, cur);
    }
    out
}

/// From `PMI_process_mapping` (`(vector,(0,2,4))`: starting at node 0, 2
/// nodes of 4 consecutive ranks): the number of nodes and how many ranks
/// share `rank`'s node.
pub fn parse_mapping(text: &str, rank: u32) -> Option<(u32, u32)> {
    let inner = text.trim().strip_prefix("(vector,")?.strip_suffix(')')?;
    let mut nodes = 0u32;
    let mut first_rank = 0u64;
    let mut mine = None;
    for block in inner
        .split("),")
        .map(|b| b.trim_matches(|c| c == '(' || c == ')' || c == ' '))
    {
        if block.is_empty() {
            continue;
        }
        let nums: Vec<u32> = block
            .split(',')
            .map(|n| n.trim().parse().ok())
            .collect::<Option<Vec<u32>>>()?;
        let [start, count, per] = nums[..] else {
            return None;
        };
        nodes = nodes.max(start.checked_add(count)?);
        let span = u64::from(count) * u64::from(per);
        // Saturating: a server's blocks may add up to more ranks than a u64
        // counts, and every rank lies below that anyway.
        let end = first_rank.saturating_add(span);
        if mine.is_none() && u64::from(rank) < end {
            mine = Some(per);
        }
        first_rank = end;
    }
    Some((nodes, mine?))
}

impl super::ProcessManager for Client {
    fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        self.command("kvs-put", &[("key", key), ("value", value)])
            .map(|_| ())
    }

    fn get(&mut self, key: &str) -> Result<Option<String>, Error> {
        let a = self.command("kvs-get", &[("srcid", "-1"), ("key", key)])?;
        Ok(match a.get("found").map(String::as_str) {
            Some("TRUE") => a.get("value").cloned(),
            _ => None,
        })
    }

    fn fence(&mut self) -> Result<(), Error> {
        self.command("kvs-fence", &[]).map(|_| ())
    }

    fn finalize(&mut self) -> Result<(), Error> {
        self.command("finalize", &[]).map(|_| ())
    }

    fn abort(&mut self, code: i32, message: &str) {
        let message = format!("error code {code}: {message}");
        let _ = self.send("abort", &[("isworldabort", "TRUE"), ("msg", &message)]);
    }

    fn fd(&self) -> RawFd {
        Client::fd(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_with_escapes() {
        let p = parse_pairs("cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b=c;");
        assert_eq!(p["cmd"], "kvs-get-response");
        assert_eq!(p["value"], "a;b=c");
        assert_eq!(p["found"], "TRUE");
    }

    #[test]
    fn process_mappings() {
        assert_eq!(parse_mapping("(vector,(0,1,4))", 3), Some((1, 4)));
        assert_eq!(parse_mapping("(vector,(0,2,4))", 5), Some((2, 4)));
        assert_eq!(parse_mapping("(vector,(0,2,2),(2,1,1))", 4), Some((3, 1)));
        assert_eq!(parse_mapping("nonsense", 0), None);
    }

    /// A mapping whose blocks add up to more than 2^64 ranks: the running
    /// count overflowed (a panic where overflow is checked).
    #[test]
    fn mapping_beyond_u64_ranks_does_not_overflow() {
        let m = "(vector,(0,4294967295,4294967295),(0,4294967295,4294967295))";
        assert_eq!(parse_mapping(m, 0), Some((u32::MAX, u32::MAX)));
        assert_eq!(parse_mapping(m, u32::MAX), Some((u32::MAX, u32::MAX)));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        /// Text made mostly of the characters the parsers look for, so that
        /// most inputs are near misses rather than plain noise.
        fn pmi_text() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "[a-z0-9=; ]{0,40}",
                "(\\(vector,)?[0-9(), ]{0,40}\\)?",
                "\\(vector,(\\([0-9]{1,11},[0-9]{1,11},[0-9]{1,11}\\),?){0,4}\\)",
            ]
        }

        /// (nodes in a block, ranks per node) of a valid mapping.
        fn mapping_blocks() -> impl Strategy<Value = Vec<(u32, u32)>> {
            proptest::collection::vec((1u32..6, 1u32..6), 1..6)
        }

        /// Blocks laid one after another from node 0, as PMI servers write them.
        fn mapping_text(blocks: &[(u32, u32)]) -> String {
            let mut start = 0;
            let parts: Vec<String> = blocks
                .iter()
                .map(|&(count, per)| {
                    let p = format!("({start},{count},{per})");
                    start += count;
                    p
                })
                .collect();
            format!("(vector,{})", parts.join(","))
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn prop_parse_pairs_is_total(text in pmi_text()) {
                let _ = parse_pairs(&text);
            }

            #[test]
            fn prop_parse_mapping_is_total(text in pmi_text(), rank in any::<u32>()) {
                let _ = parse_mapping(&text, rank);
            }

            /// Pairs escaped as `Client::send` escapes them come back as they went.
            #[test]
            fn prop_parse_pairs_round_trips(
                pairs in proptest::collection::btree_map("[a-z_-]{1,10}", "[ -~]{0,16}", 0..6),
            ) {
                let body: String = pairs
                    .iter()
                    .map(|(k, v)| format!("{k}={};", v.replace(';', ";;")))
                    .collect();
                let got: BTreeMap<String, String> = parse_pairs(&body).into_iter().collect();
                prop_assert_eq!(got, pairs);
            }

            /// Every rank of a valid mapping finds its block's ranks per
            /// node, and the node count is the blocks' total; a rank past
            /// the end finds none.
            #[test]
            fn prop_mapping_round_trips(blocks in mapping_blocks(), pick in any::<u32>()) {
                let text = mapping_text(&blocks);
                let nodes: u32 = blocks.iter().map(|b| b.0).sum();
                let ranks: u32 = blocks.iter().map(|b| b.0 * b.1).sum();
                let rank = pick % (ranks + 2);
                let mut first = 0;
                let mut want = None;
                for &(count, per) in &blocks {
                    if want.is_none() && rank < first + count * per {
                        want = Some(per);
                    }
                    first += count * per;
                }
                prop_assert_eq!(parse_mapping(&text, rank), want.map(|per| (nodes, per)));
            }
        }
    }
}

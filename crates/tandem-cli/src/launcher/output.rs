//! Forwarding each rank's stdout and stderr to the launcher's, whole lines at
//! a time, so lines from different ranks never mix.
//!
//! In a replicated job (`--replicas R`) the R processes of a rank write the
//! same lines; each line of a rank appears once. Per rank and stream,
//! [`Printed`] counts the lines printed so far, and each process's splitter
//! counts the lines it has produced: a process's n-th line is printed only
//! if n is past the count (which then becomes n). When the process that was
//! ahead dies, another replica carries on from where the output stopped.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::sys::{self, ReadOutcome};

/// A partial line longer than this is passed on without waiting for its
/// end, so a rank writing binary data cannot make the launcher grow forever.
const MAX_PENDING: usize = 1 << 20;

/// Where a stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Stderr,
}

impl Sink {
    /// The sink for stream 1 (stdout) or 2 (stderr).
    pub fn from_number(n: u32) -> Option<Sink> {
        match n {
            1 => Some(Sink::Stdout),
            2 => Some(Sink::Stderr),
            _ => None,
        }
    }

    fn fd(self) -> RawFd {
        match self {
            Sink::Stdout => libc::STDOUT_FILENO,
            Sink::Stderr => libc::STDERR_FILENO,
        }
    }

    /// Writes `data`. Errors (say, a closed pipe after `| head`) drop the
    /// output; the job itself carries on.
    pub fn write(self, data: &[u8]) {
        if !data.is_empty() {
            let _ = sys::write_all(self.fd(), data);
        }
    }
}

/// Splits a byte stream into lines, optionally tagged `[rank] `.
///
/// Untagged output is passed on byte for byte (a partial line is held until
/// its newline, EOF, or [`MAX_PENDING`]). Tagged output always consists of
/// whole lines: a trailing partial line gets a newline.
pub struct LineSplitter {
    prefix: Option<Vec<u8>>,
    pending: Vec<u8>,
    /// Lines produced so far (counted mode, for replicas).
    produced: u64,
}

impl LineSplitter {
    pub fn new(rank: u32, tag: bool) -> LineSplitter {
        LineSplitter {
            prefix: tag.then(|| format!("[{rank}] ").into_bytes()),
            pending: Vec::new(),
            produced: 0,
        }
    }

    /// Lines that all start with `prefix` (and always end with a newline).
    pub fn with_prefix(prefix: &str) -> LineSplitter {
        LineSplitter {
            prefix: Some(prefix.as_bytes().to_vec()),
            pending: Vec::new(),
            produced: 0,
        }
    }

    /// Counted mode (one replica's stream): like [`push`](Self::push), but
    /// a line is appended to `out` only if its number is past `*printed`,
    /// which then becomes its number. A partial line is cut at exactly
    /// [`MAX_PENDING`] bytes (not wherever a read ended), so that identical
    /// replicas number their output identically.
    pub fn push_counted(&mut self, mut data: &[u8], printed: &mut u64, out: &mut Vec<u8>) {
        while let Some(pos) = data.iter().position(|&b| b == b'\n') {
            let (line, rest) = data.split_at(pos + 1);
            self.count_unit(line, false, printed, out);
            data = rest;
        }
        self.pending.extend_from_slice(data);
        while self.pending.len() >= MAX_PENDING {
            let rest = self.pending.split_off(MAX_PENDING);
            self.count_unit(&[], true, printed, out);
            self.pending = rest;
        }
    }

    /// Counted mode at the end of a replica that finished normally: its
    /// partial last line counts as a line.
    pub fn finish_counted(&mut self, printed: &mut u64, out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            self.count_unit(&[], true, printed, out);
        }
    }

    /// Counted mode at the end of a replica that died: its partial last
    /// line (perhaps cut short), as its number and the bytes to print.
    pub fn take_partial(&mut self) -> Option<(u64, Vec<u8>)> {
        if self.pending.is_empty() {
            return None;
        }
        let mut unit = Vec::new();
        self.emit(&[], &mut unit);
        if self.prefix.is_some() {
            unit.push(b'\n');
        }
        Some((self.produced + 1, unit))
    }

    /// One more line: `pending` + `tail` (+ a newline for a tagged partial).
    fn count_unit(&mut self, tail: &[u8], partial: bool, printed: &mut u64, out: &mut Vec<u8>) {
        self.produced += 1;
        if self.produced <= *printed {
            self.pending.clear();
            return;
        }
        *printed = self.produced;
        self.emit(tail, out);
        if partial && self.prefix.is_some() {
            out.push(b'\n');
        }
    }

    /// Appends the complete lines of `pending + data` to `out`.
    pub fn push(&mut self, mut data: &[u8], out: &mut Vec<u8>) {
        while let Some(pos) = data.iter().position(|&b| b == b'\n') {
            self.emit(&data[..=pos], out);
            data = &data[pos + 1..];
        }
        self.pending.extend_from_slice(data);
        if self.pending.len() >= MAX_PENDING {
            self.finish(out);
        }
    }

    /// Appends whatever partial line is left (at EOF).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            return;
        }
        self.emit(&[], out);
        if self.prefix.is_some() {
            out.push(b'\n');
        }
    }

    fn emit(&mut self, tail: &[u8], out: &mut Vec<u8>) {
        if let Some(p) = &self.prefix {
            out.extend_from_slice(p);
        }
        out.append(&mut self.pending);
        out.extend_from_slice(tail);
    }
}

/// Partial last lines kept per (rank, stream): (line number, bytes).
type Partials = HashMap<(u32, usize), Vec<(u64, Vec<u8>)>>;

/// The lines each rank of a replicated job has printed, per stream, and
/// the partial last lines of replicas that died, which are printed at the
/// end if no other replica of their rank got that far.
#[derive(Default)]
pub struct Printed {
    counts: Vec<[u64; 2]>,
    /// (rank, stream) -> (line number, bytes) of dead replicas' partial lines.
    partials: Partials,
}

impl Printed {
    /// For a job of `ranks` ranks (0 for a job without replicas).
    pub fn new(ranks: u32) -> Printed {
        Printed {
            counts: vec![[0, 0]; ranks as usize],
            partials: HashMap::new(),
        }
    }

    /// The count of lines printed for `rank`'s stream `sink`.
    pub fn count(&mut self, rank: u32, sink: Sink) -> &mut u64 {
        &mut self.counts[rank as usize][sink as usize]
    }

    /// Keeps a dead replica's partial last line (its number and bytes).
    pub fn keep_partial(&mut self, rank: u32, sink: Sink, partial: Option<(u64, Vec<u8>)>) {
        if let Some(p) = partial {
            if p.0 > self.counts[rank as usize][sink as usize] {
                self.partials
                    .entry((rank, sink as usize))
                    .or_default()
                    .push(p);
            }
        }
    }

    /// Prints the kept partial lines of `rank` (all ranks: `None`) that
    /// continue its output.
    pub fn flush_partials(&mut self, rank: Option<u32>) {
        for (sink, bytes) in self.continuations(rank) {
            sink.write(&bytes);
        }
    }

    /// Takes the kept partial lines of `rank` (all: `None`) that continue
    /// its output: the longest of those numbered just past the count,
    /// repeatedly; the others are dropped.
    fn continuations(&mut self, rank: Option<u32>) -> Vec<(Sink, Vec<u8>)> {
        let mut keys: Vec<(u32, usize)> = self
            .partials
            .keys()
            .filter(|k| rank.is_none_or(|r| k.0 == r))
            .copied()
            .collect();
        keys.sort_unstable();
        let mut out = Vec::new();
        for key in keys {
            let Some(mut list) = self.partials.remove(&key) else {
                continue;
            };
            let sink = if key.1 == 0 {
                Sink::Stdout
            } else {
                Sink::Stderr
            };
            let count = &mut self.counts[key.0 as usize][key.1];
            loop {
                let next = *count + 1;
                let best = list
                    .iter()
                    .enumerate()
                    .filter(|(_, (n, _))| *n == next)
                    .max_by_key(|(_, (_, bytes))| bytes.len())
                    .map(|(i, _)| i);
                let Some(i) = best else { break };
                let (_, bytes) = list.swap_remove(i);
                out.push((sink, bytes));
                *count = next;
            }
        }
        out
    }
}

/// One rank's stdout or stderr pipe and where its lines go.
pub struct OutputStream {
    /// The process (in a replicated job, process p of rank p % N).
    pub rank: u32,
    sink: Sink,
    pipe: Option<OwnedFd>,
    lines: LineSplitter,
    /// In a replicated job: the rank whose printed lines these are counted
    /// against.
    replica_of: Option<u32>,
}

impl OutputStream {
    pub fn new(rank: u32, sink: Sink, pipe: OwnedFd, tag: bool) -> std::io::Result<OutputStream> {
        sys::set_nonblocking(pipe.as_raw_fd())?;
        Ok(OutputStream {
            rank,
            sink,
            pipe: Some(pipe),
            lines: LineSplitter::new(rank, tag),
            replica_of: None,
        })
    }

    /// A replica's stream: process `process` of rank `rank` (which tags
    /// its lines).
    pub fn replica(
        process: u32,
        rank: u32,
        sink: Sink,
        pipe: OwnedFd,
        tag: bool,
    ) -> std::io::Result<OutputStream> {
        let mut stream = OutputStream::new(process, sink, pipe, tag)?;
        stream.lines = LineSplitter::new(rank, tag);
        stream.replica_of = Some(rank);
        Ok(stream)
    }

    /// The pipe to poll, until it reaches EOF.
    pub fn fd(&self) -> Option<RawFd> {
        self.pipe.as_ref().map(|p| p.as_raw_fd())
    }

    /// Reads what the pipe holds right now (at most `rounds` reads) and
    /// forwards the complete lines; at EOF also the last partial line
    /// (a replica's waits for [`end`](Self::end)).
    pub fn forward(&mut self, buf: &mut [u8], rounds: usize, printed: &mut Printed) {
        let mut out = Vec::new();
        for _ in 0..rounds {
            let Some(pipe) = &self.pipe else { break };
            match sys::read_fd(pipe.as_raw_fd(), buf) {
                Ok(ReadOutcome::Data(n)) => match self.replica_of {
                    None => self.lines.push(&buf[..n], &mut out),
                    Some(r) => {
                        self.lines
                            .push_counted(&buf[..n], printed.count(r, self.sink), &mut out)
                    }
                },
                Ok(ReadOutcome::WouldBlock) => break,
                Ok(ReadOutcome::Eof) | Err(_) => {
                    if self.replica_of.is_none() {
                        self.lines.finish(&mut out);
                    }
                    self.pipe = None;
                }
            }
        }
        self.sink.write(&out);
    }

    /// A replica's process has ended (`normally`, or died): what is left
    /// in the pipe, then its partial last line, which counts as a line if
    /// it finished normally and is kept aside if it died.
    pub fn end(&mut self, buf: &mut [u8], normally: bool, printed: &mut Printed) {
        self.forward(buf, 1024, printed);
        let Some(r) = self.replica_of else { return };
        if normally {
            let mut out = Vec::new();
            self.lines
                .finish_counted(printed.count(r, self.sink), &mut out);
            self.sink.write(&out);
        } else {
            printed.keep_partial(r, self.sink, self.lines.take_partial());
        }
    }

    /// Forwards everything left and stops (the job is over; a process that
    /// escaped the rank's process group may still hold the pipe open).
    pub fn close(&mut self, buf: &mut [u8], printed: &mut Printed) {
        self.forward(buf, 1024, printed);
        match self.replica_of {
            None => {
                let mut out = Vec::new();
                self.lines.finish(&mut out);
                self.sink.write(&out);
            }
            // Whatever a replica had not ended is at most a partial line.
            Some(r) => printed.keep_partial(r, self.sink, self.lines.take_partial()),
        }
        self.pipe = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tag: bool, chunks: &[&[u8]]) -> Vec<u8> {
        let mut s = LineSplitter::new(2, tag);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn untagged_is_byte_exact() {
        assert_eq!(
            run(false, &[b"ab", b"c\nde", b"f\n", b"tail"]),
            b"abc\ndef\ntail"
        );
    }

    #[test]
    fn tagged_lines_get_prefix_and_final_newline() {
        assert_eq!(
            run(true, &[b"ab", b"c\nde", b"f\n", b"tail"]),
            b"[2] abc\n[2] def\n[2] tail\n"
        );
        assert_eq!(run(true, &[b"x\n"]), b"[2] x\n");
    }

    /// Two replicas writing the same stream in different chunks, the first
    /// dying mid-line: every line once, the cut line from the survivor.
    #[test]
    fn replicas_print_each_line_once() {
        let mut printed = 0u64;
        let mut out = Vec::new();
        let mut a = LineSplitter::new(1, true);
        let mut b = LineSplitter::new(1, true);
        a.push_counted(b"one\ntw", &mut printed, &mut out);
        b.push_counted(b"o", &mut printed, &mut out);
        a.push_counted(b"o\nthr", &mut printed, &mut out);
        // a dies here: its "thr" is cut short.
        assert_eq!(a.take_partial(), Some((3, b"[1] thr\n".to_vec())));
        b.push_counted(b"ne\ntwo\nthree\nfour", &mut printed, &mut out);
        b.finish_counted(&mut printed, &mut out);
        assert_eq!(out, b"[1] one\n[1] two\n[1] three\n[1] four\n");
        assert_eq!(printed, 4);
    }

    #[test]
    fn replica_long_lines_are_cut_where_the_bytes_say() {
        let long = vec![b'x'; MAX_PENDING + 10];
        let mut printed = 0u64;
        let mut out = Vec::new();
        let mut a = LineSplitter::new(0, false);
        for chunk in long.chunks(4096) {
            a.push_counted(chunk, &mut printed, &mut out);
        }
        a.push_counted(b"\n", &mut printed, &mut out);
        assert_eq!(printed, 2);
        let mut b = LineSplitter::new(0, false);
        let mut out_b = Vec::new();
        b.push_counted(&long, &mut printed, &mut out_b);
        b.push_counted(b"\nmore\n", &mut printed, &mut out_b);
        assert_eq!(out.len(), MAX_PENDING + 11);
        assert_eq!(out_b, b"more\n");
    }

    #[test]
    fn kept_partial_lines_continue_the_output() {
        let mut p = Printed::new(2);
        *p.count(1, Sink::Stdout) = 4;
        p.keep_partial(1, Sink::Stdout, Some((4, b"old".to_vec())));
        p.keep_partial(1, Sink::Stdout, Some((5, b"a".to_vec())));
        p.keep_partial(1, Sink::Stdout, Some((5, b"ab".to_vec())));
        assert_eq!(p.partials[&(1, 0)].len(), 2);
        assert!(p.continuations(Some(0)).is_empty());
        assert_eq!(p.partials.len(), 1);
        p.keep_partial(1, Sink::Stdout, Some((6, b"c".to_vec())));
        assert_eq!(
            p.continuations(Some(1)),
            vec![
                (Sink::Stdout, b"ab".to_vec()),
                (Sink::Stdout, b"c".to_vec())
            ]
        );
        assert_eq!(*p.count(1, Sink::Stdout), 6);
        assert!(p.partials.is_empty());
    }

    #[test]
    fn partial_lines_wait_for_their_end() {
        let mut s = LineSplitter::new(0, false);
        let mut out = Vec::new();
        s.push(b"no newline yet", &mut out);
        assert!(out.is_empty());
        s.push(b"!\n", &mut out);
        assert_eq!(out, b"no newline yet!\n");
    }
}

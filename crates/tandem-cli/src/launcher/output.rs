//! Forwarding each rank's stdout and stderr to the launcher's, whole lines at
//! a time, so lines from different ranks never mix.

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
}

impl LineSplitter {
    pub fn new(rank: u32, tag: bool) -> LineSplitter {
        LineSplitter {
            prefix: tag.then(|| format!("[{rank}] ").into_bytes()),
            pending: Vec::new(),
        }
    }

    /// Lines that all start with `prefix` (and always end with a newline).
    pub fn with_prefix(prefix: &str) -> LineSplitter {
        LineSplitter {
            prefix: Some(prefix.as_bytes().to_vec()),
            pending: Vec::new(),
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

/// One rank's stdout or stderr pipe and where its lines go.
pub struct OutputStream {
    pub rank: u32,
    sink: Sink,
    pipe: Option<OwnedFd>,
    lines: LineSplitter,
}

impl OutputStream {
    pub fn new(rank: u32, sink: Sink, pipe: OwnedFd, tag: bool) -> std::io::Result<OutputStream> {
        sys::set_nonblocking(pipe.as_raw_fd())?;
        Ok(OutputStream {
            rank,
            sink,
            pipe: Some(pipe),
            lines: LineSplitter::new(rank, tag),
        })
    }

    /// The pipe to poll, until it reaches EOF.
    pub fn fd(&self) -> Option<RawFd> {
        self.pipe.as_ref().map(|p| p.as_raw_fd())
    }

    /// Reads what the pipe holds right now (at most `rounds` reads) and
    /// forwards the complete lines; at EOF also the last partial line.
    pub fn forward(&mut self, buf: &mut [u8], rounds: usize) {
        let mut out = Vec::new();
        for _ in 0..rounds {
            let Some(pipe) = &self.pipe else { break };
            match sys::read_fd(pipe.as_raw_fd(), buf) {
                Ok(ReadOutcome::Data(n)) => self.lines.push(&buf[..n], &mut out),
                Ok(ReadOutcome::WouldBlock) => break,
                Ok(ReadOutcome::Eof) | Err(_) => {
                    self.lines.finish(&mut out);
                    self.pipe = None;
                }
            }
        }
        self.sink.write(&out);
    }

    /// Forwards everything left and stops (the job is over; a process that
    /// escaped the rank's process group may still hold the pipe open).
    pub fn close(&mut self, buf: &mut [u8]) {
        self.forward(buf, 1024);
        let mut out = Vec::new();
        self.lines.finish(&mut out);
        self.sink.write(&out);
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

//! The master's side of a remote host: the agent process that runs
//! `tandem _host` there, and the channel to that helper (see `channel`).

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use super::channel::{encode, Decoder};
use super::hostd::shell_quote;
use super::output::{LineSplitter, Sink};
use super::supervise::{self, Termination};
use crate::sys::{self, ReadOutcome};

/// The agent used when `--agent` is not given.
pub const DEFAULT_AGENT: &str = "ssh -o BatchMode=yes";

/// Input queued for a helper that does not read it is bounded.
const MAX_PENDING_INPUT: usize = 4 << 20;

/// Splits an agent command into words: whitespace separates them, single
/// and double quotes group them, a backslash escapes the next character.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                cur.push(chars.next().ok_or("--agent: trailing backslash")?);
                in_word = true;
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("--agent: unbalanced quote in '{text}'"));
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err("--agent: empty command".into());
    }
    Ok(words)
}

/// The agent's command line for `host`: `{host}` in the agent's words is
/// replaced by the host; without it the host is appended (as ssh takes it).
/// Then the remote command; for agents that hand it to a remote shell (ssh,
/// rsh) its words are shell-quoted.
pub fn agent_argv(agent: &[String], host: &str, remote: &[OsString]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    let mut substituted = false;
    for w in agent {
        if w.contains("{host}") {
            substituted = true;
        }
        argv.push(OsString::from(w.replace("{host}", host)));
    }
    if !substituted {
        argv.push(OsString::from(host));
    }
    let program = std::path::Path::new(&agent[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let via_shell = ["ssh", "rsh", "slogin", "oarsh"].contains(&program.as_str());
    for w in remote {
        if via_shell {
            argv.push(OsString::from(shell_quote(w)));
        } else {
            argv.push(w.clone());
        }
    }
    argv
}

/// What a helper said.
pub enum HostEvent {
    Pid(u32, libc::pid_t),
    Output(u32, Sink, Vec<u8>),
    Exit(u32, Termination),
    /// A rank has been stopped (by a signal or a debugger) this long.
    Stopped(u32, std::time::Duration),
    Ready,
    /// Bytes of rank 0's input written to it.
    Ack(usize),
    Fail(i32, String),
    Done,
    /// The helper's stream is garbled; the host is lost.
    Broken(String),
}

/// Which of a host's descriptors is ready.
#[derive(Clone, Copy, Debug)]
pub enum Pipe {
    In,
    Out,
    Err,
}

/// One remote host of the job.
pub struct RemoteHost {
    pub name: String,
    /// World ranks placed here.
    pub ranks: Vec<u32>,
    /// The agent's pid (also its process group).
    pub pid: libc::pid_t,
    pub agent_running: bool,
    /// The agent's command, for messages.
    pub shown: String,
    pub ready: bool,
    pub done: bool,
    to: Option<OwnedFd>,
    pending: Vec<u8>,
    from: Option<OwnedFd>,
    decoder: Decoder,
    err: Option<OwnedFd>,
    err_lines: LineSplitter,
}

impl RemoteHost {
    /// Starts the agent and queues the job for the helper.
    pub fn start(
        name: &str,
        ranks: Vec<u32>,
        argv: &[OsString],
        job: Vec<u8>,
    ) -> io::Result<RemoteHost> {
        let shown: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
        let spawned = supervise::spawn_agent(argv)?;
        for fd in [&spawned.stdin, &spawned.stdout, &spawned.stderr] {
            sys::set_nonblocking(fd.as_raw_fd())?;
        }
        let mut host = RemoteHost {
            name: name.to_string(),
            ranks,
            pid: spawned.pid,
            agent_running: true,
            shown: shown.join(" "),
            ready: false,
            done: false,
            to: Some(spawned.stdin),
            pending: Vec::new(),
            from: Some(spawned.stdout),
            decoder: Decoder::default(),
            err: Some(spawned.stderr),
            err_lines: LineSplitter::with_prefix(&format!("tandem: host {name}: ")),
        };
        host.send(job);
        Ok(host)
    }

    /// Descriptors to poll.
    pub fn interest(&self, out: &mut Vec<(RawFd, libc::c_short, Pipe)>) {
        if let Some(fd) = &self.to {
            if !self.pending.is_empty() {
                out.push((fd.as_raw_fd(), libc::POLLOUT, Pipe::In));
            }
        }
        if let Some(fd) = &self.from {
            out.push((fd.as_raw_fd(), libc::POLLIN, Pipe::Out));
        }
        if let Some(fd) = &self.err {
            out.push((fd.as_raw_fd(), libc::POLLIN, Pipe::Err));
        }
    }

    /// Queues bytes for the helper and writes what the pipe takes.
    pub fn send(&mut self, data: Vec<u8>) {
        if self.to.is_none() {
            return;
        }
        self.pending.extend_from_slice(&data);
        if self.pending.len() > MAX_PENDING_INPUT {
            self.close_input();
            return;
        }
        self.flush();
    }

    /// Asks the helper to signal every rank it still runs.
    pub fn signal(&mut self, signal: libc::c_int) {
        self.send(encode(&["signal", &signal.to_string()], b""));
    }

    /// Asks the helper to stop one process (SIGCONT, then SIGKILL).
    pub fn kill(&mut self, rank: u32) {
        self.send(encode(&["kill", &rank.to_string()], b""));
    }

    pub fn flush(&mut self) {
        let Some(fd) = &self.to else { return };
        while !self.pending.is_empty() {
            match sys::write_fd(fd.as_raw_fd(), &self.pending) {
                Ok(0) => return,
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(_) => {
                    self.close_input();
                    return;
                }
            }
        }
    }

    /// Closes the helper's stdin: it kills its ranks and leaves.
    pub fn close_input(&mut self) {
        self.to = None;
        self.pending.clear();
    }

    /// Reads the helper's stdout (at most `rounds` reads) and decodes it.
    pub fn read_out(&mut self, buf: &mut [u8], rounds: usize) -> Vec<HostEvent> {
        let mut events = Vec::new();
        for _ in 0..rounds {
            let Some(fd) = &self.from else { break };
            match sys::read_fd(fd.as_raw_fd(), buf) {
                Ok(ReadOutcome::Data(n)) => self.decoder.push(&buf[..n]),
                Ok(ReadOutcome::WouldBlock) => break,
                Ok(ReadOutcome::Eof) | Err(_) => self.from = None,
            }
            self.decode(&mut events);
        }
        events
    }

    fn decode(&mut self, events: &mut Vec<HostEvent>) {
        loop {
            let r = match self.decoder.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    self.from = None;
                    events.push(HostEvent::Broken(e));
                    return;
                }
            };
            let rank_here = |r: Option<u32>| r.filter(|x| self.ranks.contains(x));
            let event = match r.kind() {
                "pid" => rank_here(r.num(1))
                    .zip(r.num(2))
                    .map(|(k, p)| HostEvent::Pid(k, p)),
                "out" => rank_here(r.num(1))
                    .zip(r.num(2).and_then(Sink::from_number))
                    .map(|(k, s)| HostEvent::Output(k, s, r.payload.clone())),
                "exit" => rank_here(r.num(1)).and_then(|k| {
                    let how = match r.words.get(2).map(String::as_str) {
                        Some("exited") => Termination::Exited(r.num(3)?),
                        Some("killed") => Termination::Killed {
                            signal: r.num(3)?,
                            core_dumped: r.words.get(4).is_some_and(|w| w == "1"),
                        },
                        _ => Termination::Unknown,
                    };
                    Some(HostEvent::Exit(k, how))
                }),
                "stopped" => rank_here(r.num(1))
                    .zip(r.num(2))
                    .map(|(k, ms)| HostEvent::Stopped(k, std::time::Duration::from_millis(ms))),
                "ready" => Some(HostEvent::Ready),
                "ack" => r.num(1).map(HostEvent::Ack),
                "fail" => Some(HostEvent::Fail(r.num(1).unwrap_or(1), r.text())),
                "done" => Some(HostEvent::Done),
                _ => None,
            };
            match event {
                Some(e) => events.push(e),
                None => {
                    self.from = None;
                    events.push(HostEvent::Broken(format!(
                        "malformed '{}' record from the helper",
                        r.kind()
                    )));
                    return;
                }
            }
        }
    }

    /// Passes the agent's own messages (ssh's "Permission denied", ...) on
    /// to our stderr, prefixed with the host.
    pub fn read_err(&mut self, buf: &mut [u8], rounds: usize) {
        let mut out = Vec::new();
        for _ in 0..rounds {
            let Some(fd) = &self.err else { break };
            match sys::read_fd(fd.as_raw_fd(), buf) {
                Ok(ReadOutcome::Data(n)) => self.err_lines.push(&buf[..n], &mut out),
                Ok(ReadOutcome::WouldBlock) => break,
                Ok(ReadOutcome::Eof) | Err(_) => {
                    self.err_lines.finish(&mut out);
                    self.err = None;
                }
            }
        }
        Sink::Stderr.write(&out);
    }

    /// Whether the helper's stdout is still open.
    pub fn output_open(&self) -> bool {
        self.from.is_some()
    }

    /// Forwards what is left of the agent's stderr and stops reading.
    pub fn close(&mut self, buf: &mut [u8]) {
        self.read_err(buf, 64);
        let mut out = Vec::new();
        self.err_lines.finish(&mut out);
        Sink::Stderr.write(&out);
        self.err = None;
        self.from = None;
        self.close_input();
    }
}

/// The job for a helper, as `channel` records.
pub struct HostJob<'a> {
    pub size: u32,
    pub hosts: u32,
    pub id: &'a str,
    pub secret: &'a str,
    pub connect_timeout_ms: u64,
    pub masters: &'a [String],
    pub ranks: &'a [u32],
    pub apps: &'a [super::supervise::App],
    pub env: &'a [(String, String)],
    /// Whether rank 0, if it is on this host, reads the master's stdin.
    pub stdin: bool,
    /// The ranks of the job; fewer than `size` when they are replicated
    /// (then every replica of rank 0 reads the master's stdin).
    pub logical: u32,
}

impl HostJob<'_> {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = encode(
            &[
                "job",
                &self.size.to_string(),
                &self.hosts.to_string(),
                self.id,
                self.secret,
                &self.connect_timeout_ms.to_string(),
            ],
            b"",
        );
        for m in self.masters {
            out.extend(encode(&["master", m], b""));
        }
        for r in self.ranks {
            out.extend(encode(&["rank", &r.to_string()], b""));
        }
        for app in self.apps {
            out.extend(encode(
                &["program", &app.ranks.to_string()],
                app.program.as_bytes(),
            ));
            for a in &app.args {
                out.extend(encode(&["arg"], a.as_bytes()));
            }
        }
        for (k, v) in self.env {
            out.extend(encode(&["env"], format!("{k}={v}").as_bytes()));
        }
        if self.stdin && self.logical < self.size {
            for r in self.ranks.iter().filter(|r| r.is_multiple_of(self.logical)) {
                out.extend(encode(&["stdin", &r.to_string()], b""));
            }
        } else if self.stdin && self.ranks.contains(&0) {
            out.extend(encode(&["stdin"], b""));
        }
        if let Ok(cwd) = std::env::current_dir() {
            out.extend(encode(&["cwd"], cwd.as_os_str().as_bytes()));
        }
        out.extend(encode(&["start"], b""));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn agent_words() {
        assert_eq!(
            split_words("ssh -o BatchMode=yes").unwrap(),
            ["ssh", "-o", "BatchMode=yes"]
        );
        assert_eq!(
            split_words(r#"ip netns exec '{host}' "a b" c\ d"#).unwrap(),
            ["ip", "netns", "exec", "{host}", "a b", "c d"]
        );
        assert!(split_words("ssh 'x").is_err());
        assert!(split_words("  ").is_err());
    }

    #[test]
    fn agent_command_lines() {
        let remote = os(&["/opt/t dir/tandem", "_host", "n1"]);
        let ssh = split_words(DEFAULT_AGENT).unwrap();
        assert_eq!(
            agent_argv(&ssh, "n1", &remote),
            os(&[
                "ssh",
                "-o",
                "BatchMode=yes",
                "n1",
                "'/opt/t dir/tandem'",
                "_host",
                "n1"
            ])
        );
        let netns = split_words("ip netns exec {host}").unwrap();
        assert_eq!(
            agent_argv(&netns, "h2", &remote),
            os(&[
                "ip",
                "netns",
                "exec",
                "h2",
                "/opt/t dir/tandem",
                "_host",
                "n1"
            ])
        );
    }
}

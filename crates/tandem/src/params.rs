//! The one parameter registry.
//!
//! Every tunable is declared here once, with its type, default and help text.
//! `TANDEM_<NAME>` environment variables, `tandem run --set name=value` and
//! `tandem info` are all derived from this table.

use std::collections::BTreeMap;

/// The type of a parameter's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `0/1`, `true/false`, `yes/no`, `on/off`.
    Bool,
    /// A non-negative integer.
    UInt,
    /// A byte count; accepts suffixes `k`, `m`, `g` (powers of 1024) and `kib`, `mib`, `gib`.
    Bytes,
    /// One of a fixed list of words.
    Choice(&'static [&'static str]),
    /// Free text (a path, a list).
    Text,
}

/// One registered parameter.
#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub help: &'static str,
}

/// Prefix of the environment variables that carry parameters to ranks.
pub const ENV_PREFIX: &str = "TANDEM_";

/// Environment variables the launcher sets for its own use (not parameters).
pub const JOB_ENV_PREFIX: &str = "TANDEM_JOB_";

/// `TANDEM_*` variables that configure the `tandem` command itself (`tandem
/// cc` reads them); they are not parameters.
pub const TOOL_ENV: &[&str] = &[
    "TANDEM_CC",
    "TANDEM_CXX",
    "TANDEM_FC",
    "TANDEM_FORTRAN_CACHE",
];

/// All parameters, in the order `tandem info` lists them.
pub static REGISTRY: &[Param] = &[
    Param {
        name: "eager_limit",
        kind: Kind::Bytes,
        default: "64k",
        help: "largest message sent eagerly (to ranks on this host, shm_eager_limit if lower); larger ones use rendezvous (RTS/CTS, then data straight into the receive buffer)",
    },
    Param {
        name: "shm_eager_limit",
        kind: Kind::Bytes,
        default: "16k",
        help: "largest message sent eagerly to a rank on this host (at most eager_limit); larger ones are offered to the receiver to read in place, which on the VM this was measured on was faster from 32 KiB on, and 2-3x faster when the host keeps the two CPUs apart; left at its default on a host with more ranks than CPUs, eager_limit applies instead (a rendezvous there waits for its receiver to be scheduled)",
    },
    Param {
        name: "transports",
        kind: Kind::Text,
        default: "shm,tcp",
        help: "comma-separated transports: shm between ranks on one host, tcp between hosts (tcp alone forces TCP everywhere)",
    },
    Param {
        name: "progress",
        kind: Kind::Choice(&["poll", "adaptive", "thread", "signal"]),
        default: "adaptive",
        help: "who drives the transports: poll = every MPI call drives every transport (what the common MPI libraries do); adaptive = MPI calls drive only transports with work, idle TCP now and then; thread = also a helper thread, asleep until a transport has news, drives communication while the application computes; signal = a helper thread woken only by rendezvous starts signals the application thread, whose handler matches them and answers (Kumar et al.'s asynchronous rendezvous)",
    },
    Param {
        name: "progress_signal",
        kind: Kind::UInt,
        default: "3",
        help: "progress=signal: the real-time signal used is SIGRTMIN plus this (it must not be one the application uses)",
    },
    Param {
        name: "bind",
        kind: Kind::Choice(&["auto", "core", "socket", "none"]),
        default: "auto",
        help: "pin each rank to its CPUs (bind_cpus of them, one by default): auto = when a host has enough CPUs for its ranks (so a busy machine cannot pack two polling ranks onto one core); core = always; socket = to every CPU of the sockets its CPUs are on; none = never (`tandem run --bind-to`)",
    },
    Param {
        name: "bind_cpus",
        kind: Kind::UInt,
        default: "1",
        help: "CPUs each pinned rank gets, for programs that run threads of their own (OpenMP); consecutive in the order bind_order gives (`tandem run -c N`)",
    },
    Param {
        name: "bind_order",
        kind: Kind::Choice(&["core", "socket"]),
        default: "core",
        help: "the order in which a host's ranks take its CPUs: core = in CPU order; socket = round robin over the sockets (`tandem run --map-by socket`)",
    },
    Param {
        name: "progress_sched",
        kind: Kind::Choice(&["other", "fifo", "rr"]),
        default: "other",
        help: "scheduling policy of the progress helper thread (fifo and rr need the privilege to use real-time scheduling; a warning, not a failure, where refused)",
    },
    Param {
        name: "progress_priority",
        kind: Kind::UInt,
        default: "1",
        help: "real-time priority of the progress helper thread under progress_sched=fifo or rr",
    },
    Param {
        name: "progress_cpu",
        kind: Kind::Text,
        default: "auto",
        help: "CPU the progress helper thread is pinned to: auto = when the rank is pinned (bind), a CPU no rank of the host is pinned to if there is one, else, with shared memory between the host's ranks, the next rank's CPU (a computing rank's helper then runs where its peer waits, not on the core it would steal from), and over TCP the rank's own CPU (there the helper copies the data out of the socket itself, which beside the sending peer would take turns with its copy in); wherever the scheduler puts it when the rank is not pinned; own = the rank's own CPU; any = wherever the scheduler puts it; or a CPU number",
    },
    Param {
        name: "tcp_poller",
        kind: Kind::Choice(&["epoll", "select"]),
        default: "epoll",
        help: "how TCP sockets are watched: epoll, writability only while data is queued; select = every socket for writability on every call, as in Gabriel's VolpexMPI report (to reproduce its Table II)",
    },
    Param {
        name: "stats",
        kind: Kind::Choice(&["0", "1", "json"]),
        default: "0",
        help: "progress-engine counters: 1 = tandem run prints a per-rank table and totals at the end of the job; json = one {\"type\":\"counters\"} line per rank on stdout",
    },
    Param {
        name: "stats_file",
        kind: Kind::Text,
        default: "",
        help: "also write the counters of every rank as JSON to this file (tandem run, at the end of the job)",
    },
    Param {
        name: "shm_cells",
        kind: Kind::UInt,
        default: "16",
        help: "cells in each shared-memory ring (one ring per ordered pair of ranks on a host)",
    },
    Param {
        name: "shm_cell_size",
        kind: Kind::Bytes,
        default: "32k",
        help: "bytes per shared-memory cell, 64 of them header; larger frames span consecutive cells",
    },
    Param {
        name: "shm_single_copy",
        kind: Kind::Bool,
        default: "1",
        help: "let receivers read large messages straight from the sender's memory (process_vm_readv) where the kernel permits; 0 forces the pipelined copy through the rings",
    },
    Param {
        name: "shm_heap",
        kind: Kind::Bool,
        default: "1",
        help: "with more than one rank on the host, place allocations of at least shm_heap_min bytes (malloc and its relatives, which libmpi_abi exports) in a memory file the host's other ranks map, so that a large message between such buffers is copied with memcpy instead of the kernel's slower cross-process copy; only with shared memory among the transports and shm_single_copy on; needs the same permission as shm_single_copy; freed blocks up to 64 MiB in all are kept for reuse; a page's first touch costs about 1 us more than a private page's here; 0 leaves all allocation to the C library (use it under valgrind memcheck, which does not see blocks from this heap)",
    },
    Param {
        name: "shm_heap_min",
        kind: Kind::Bytes,
        default: "256k",
        help: "smallest allocation placed in the shared heap (see shm_heap; at least 64k)",
    },
    Param {
        name: "shm_direct_write",
        kind: Kind::Bool,
        default: "1",
        help: "under progress=thread|signal, a large non-blocking receive from a sender on this host is advertised to it before the message leaves, or answers its RTS with clear to write: the sender writes the data straight into it (process_vm_writev), so the receiving side never copies and is not interrupted; needs the same permission as shm_single_copy",
    },
    Param {
        name: "shm_path_choice",
        kind: Kind::Bool,
        default: "1",
        help: "rendezvous messages below shm_single_copy_min from a rank on this host go the way their receiver measured faster, per sender and size (powers of two): single copy or the rings (the slower way is tried again now and then, so a change is followed; on a VM the rings are faster when the host keeps the two CPUs on a shared cache and several times slower when it does not); 0 always uses the rings there; needs the same permission as shm_single_copy",
    },
    Param {
        name: "shm_single_copy_min",
        kind: Kind::Bytes,
        default: "64m",
        help: "smallest rendezvous message always read with a single copy over shared memory (below it, shm_path_choice decides, or the rings carry it; single copy leaves the sender's CPU free)",
    },
    Param {
        name: "shm_copy_help_min",
        kind: Kind::Bytes,
        default: "64k",
        help: "smallest message read with a single copy whose sender is invited to copy part of it: while the receiver reads chunks, a sender waiting in the library writes others into the receive buffer (process_vm_writev), so two CPUs copy; 0 = never; left at its default on a host with more ranks than CPUs, never (the sender is rarely running then)",
    },
    Param {
        name: "rwapi_direct",
        kind: Kind::Bool,
        default: "1",
        help: "RWAPI writes between ranks on one host are copies straight into the target's mapped heap (the target takes no part); 0 sends them through the engine as put frames, deposited by the target's progress engine",
    },
    Param {
        name: "rma_direct",
        kind: Kind::Bool,
        default: "1",
        help: "MPI windows from MPI_Win_allocate whose members all share this host, reached through shared memory (not with transports=tcp), live in shared memory as those of MPI_Win_allocate_shared do, and one-sided operations on both kinds are loads and stores into the target's memory, with locks and accumulates kept atomic by words in that memory (the target takes no part); 0 sends them through the engine, carried out by the target's progress engine",
    },
    Param {
        name: "rwapi_heap",
        kind: Kind::Bytes,
        default: "256m",
        help: "size of each rank's RWAPI heap (a memory file peers on its host map; virtual until touched): rwapi_alloc carves blocks from it, and blocks that do not fit are private memory written through the engine",
    },
    Param {
        name: "coll_barrier",
        kind: Kind::Choice(&["auto", "dissemination", "linear", "binomial"]),
        default: "auto",
        help: "barrier algorithm (auto = the selection rules; `tandem info --coll` lists algorithms and rules)",
    },
    Param {
        name: "coll_bcast",
        kind: Kind::Choice(&["auto", "binomial", "linear", "scatter_allgather"]),
        default: "auto",
        help: "broadcast algorithm (auto = the selection rules)",
    },
    Param {
        name: "coll_reduce",
        kind: Kind::Choice(&["auto", "binomial", "linear"]),
        default: "auto",
        help: "reduce algorithm (auto = the selection rules)",
    },
    Param {
        name: "coll_allreduce",
        kind: Kind::Choice(&["auto", "reduce_bcast", "recursive_doubling", "ring"]),
        default: "auto",
        help: "allreduce algorithm (auto = the selection rules; ring needs a commutative operation)",
    },
    Param {
        name: "coll_gather",
        kind: Kind::Choice(&["auto", "linear", "binomial"]),
        default: "auto",
        help: "gather algorithm (auto = the selection rules)",
    },
    Param {
        name: "coll_scatter",
        kind: Kind::Choice(&["auto", "linear", "binomial"]),
        default: "auto",
        help: "scatter algorithm (auto = the selection rules)",
    },
    Param {
        name: "coll_allgather",
        kind: Kind::Choice(&["auto", "ring", "recursive_doubling", "bruck"]),
        default: "auto",
        help: "allgather algorithm (auto = the selection rules; recursive_doubling needs a power-of-two communicator)",
    },
    Param {
        name: "coll_alltoall",
        kind: Kind::Choice(&["auto", "linear", "pairwise", "bruck"]),
        default: "auto",
        help: "alltoall algorithm (auto = the selection rules)",
    },
    Param {
        name: "coll_alltoallv",
        kind: Kind::Choice(&["auto", "linear", "pairwise"]),
        default: "auto",
        help: "alltoallv algorithm (auto = the selection rules)",
    },
    Param {
        name: "coll_reduce_scatter",
        kind: Kind::Choice(&["auto", "reduce_scatterv", "ring"]),
        default: "auto",
        help: "reduce-scatter algorithm, also for reduce_scatter_block (auto = the selection rules; ring needs a commutative operation)",
    },
    Param {
        name: "coll_shm_max",
        kind: Kind::Bytes,
        default: "2k",
        help: "bytes a rank contributes at most to a blocking collective run on shared flags when all of a communicator's ranks share this host's memory (barrier always; broadcast, reduce, allreduce, gather and allgather: the message or one block; scatter and all-to-all: all n blocks): each rank publishes its part in a slot of a segment the communicator maps (at its first such call) and the others read it there, no messages; 0 = always the message algorithms",
    },
    Param {
        name: "coll_rules",
        kind: Kind::Text,
        default: "",
        help: "JSON file of collective selection rules replacing the built-in table of each operation it lists (format: `tandem info --coll`)",
    },
    Param {
        name: "spin_us",
        kind: Kind::UInt,
        default: "1000",
        help: "microseconds a waiting rank polls before it yields or blocks (when a host has more ranks than CPUs and spin_us/yield_us are left at their defaults: 0 spin, 2000 yield)",
    },
    Param {
        name: "yield_us",
        kind: Kind::UInt,
        default: "0",
        help: "microseconds a waiting rank then polls while yielding the CPU, before it blocks in the kernel until a peer wakes it",
    },
    Param {
        name: "rseq",
        kind: Kind::Choice(&["auto", "keep", "off"]),
        default: "auto",
        help: "glibc's restartable-sequences registration in the ranks `tandem run` starts: auto = off (GLIBC_TUNABLES=glibc.pthread.rseq=0) on a host with more ranks than CPUs, where ranks that wait take turns on the CPUs and the kernel updates each one's rseq area at every switch (four processes yielding on one CPU of this project's test VM: 1.32 against 1.47 us per turn); keep = glibc's default; off = always off. A GLIBC_TUNABLES that already names glibc.pthread.rseq is left alone",
    },
    Param {
        name: "unexpected_limit",
        kind: Kind::Bytes,
        default: "64m",
        help: "bytes of unexpected eager messages a rank buffers: each other rank may have its share (this over the number of other ranks) unconsumed there, and sends beyond it by rendezvous (only the envelope waits), so the message a receive waits for is never stuck behind others",
    },
    Param {
        name: "tcp_send_chunk",
        kind: Kind::Bytes,
        default: "0",
        help: "most bytes handed to one sendmsg (0 = no limit: as much as the socket takes). A bound makes a send return to the progress engine between pieces, which on a kernel without preemption lets a receiver or helper thread on the same core run meanwhile; on this project's test VM (Linux 6.18) no limit was faster everywhere: 4 MiB ping-pong over loopback 500 against 640 us at 512k with one rank per core, no slower with both ranks on one core or 4 ranks on 2 cores",
    },
    Param {
        name: "tcp_sndbuf",
        kind: Kind::Bytes,
        default: "0",
        help: "SO_SNDBUF for TCP connections (0 = kernel default with auto-tuning)",
    },
    Param {
        name: "tcp_rcvbuf",
        kind: Kind::Bytes,
        default: "0",
        help: "SO_RCVBUF for TCP connections (0 = kernel default with auto-tuning)",
    },
    Param {
        name: "tcp_congestion",
        kind: Kind::Text,
        default: "auto",
        help: "congestion control of Tandem's TCP connections: auto = reno between the ranks of a one-host job (loopback has no network to share, and a pacing algorithm such as BBR, a common system default, slowed and reordered large transfers there), the system's default across hosts; system = always the system's default; or an algorithm's name (cubic, reno, bbr; one not loaded or not allowed leaves the system's default)",
    },
    Param {
        name: "tcp_port_range",
        kind: Kind::Text,
        default: "",
        help: "ports the TCP transport may listen on, as LOW-HIGH (empty = any free port); for firewalls",
    },
    Param {
        name: "tcp_if_include",
        kind: Kind::Text,
        default: "",
        help: "jobs across hosts: the interfaces TCP may listen on, best first, as names (eth0, eth*) or IPv4 networks (10.1.0.0/16), comma-separated; empty = the interface this host reaches the launcher through, else any but loopback. Single-host jobs always use loopback",
    },
    Param {
        name: "tcp_if_exclude",
        kind: Kind::Text,
        default: "",
        help: "jobs across hosts: interfaces (names or IPv4 networks) TCP must not listen on; also keeps the launcher from offering them",
    },
    Param {
        name: "connect_timeout_ms",
        kind: Kind::UInt,
        default: "10000",
        help: "milliseconds to wait for a TCP connection and its handshake before reporting the peer unreachable",
    },
    Param {
        name: "stall_warn_s",
        kind: Kind::UInt,
        default: "120",
        help: "seconds a rank may stay stopped (SIGSTOP, SIGTSTP, a debugger) before the launcher names it on stderr, and that every rank of a one-host job may wait without using the CPU (a deadlock?) before the launcher says so; the job keeps waiting (0 = never). A stopped replica of a replicated job is instead declared failed after replica_timeout_ms",
    },
    Param {
        name: "replicas",
        kind: Kind::UInt,
        default: "1",
        help: "replicas of every rank (tandem run --replicas R): each rank runs as R processes, placed on different hosts where the host list allows, and the job finishes while every rank keeps one live replica (the VolpexMPI report's volatile-node model)",
    },
    Param {
        name: "replica_timeout_ms",
        kind: Kind::UInt,
        default: "3000",
        help: "replicas: how long a replica may keep a sender's full log waiting, or its leader replica waiting for it to catch up with the leader's decisions, or stay stopped (SIGSTOP, a debugger), before it is declared failed, and how long the launcher waits for the last replicas of a finished job before stopping them",
    },
    Param {
        name: "replica_protocol",
        kind: Kind::Choice(&["push", "pull"]),
        default: "push",
        help: "replicas: push = each sender replica sends every message to its partner replica of the receiver (rMPI's parallel protocol), which turns to another sender replica's log only when its partner is lost; pull = every receiver replica asks for each message in turn, as the VolpexMPI report's receivers do",
    },
    Param {
        name: "replica_verify",
        kind: Kind::Choice(&["none", "hash"]),
        default: "none",
        help: "replicas: hash = every replica checks each message it takes against a hash another replica of the sender computed on its own copy, and reports a mismatch (a corrupted payload, or sender replicas that diverged) naming the ranks, the message's tag and size",
    },
    Param {
        name: "replica_log_bytes",
        kind: Kind::Bytes,
        default: "256m",
        help: "replicas: most bytes of sent messages a replica keeps for receivers that may still ask for them; at the cap a send waits until every live replica of its receiver has acknowledged older messages, and a replica that lags past what is kept is declared failed",
    },
];

/// Finds a parameter by name (case-insensitive).
pub fn lookup(name: &str) -> Option<&'static Param> {
    let lower = name.to_ascii_lowercase();
    REGISTRY.iter().find(|p| p.name == lower)
}

/// Groups of parameters, by name prefix: (group, description). The MPI tool
/// interface (MPI_T) shows each as a category.
pub static GROUPS: &[(&str, &str)] = &[
    (
        "messages",
        "point-to-point protocol, transports and connections",
    ),
    ("progress", "who drives communication, and how ranks wait"),
    ("shm", "the shared-memory transport"),
    ("tcp", "the TCP transport"),
    ("coll", "collective algorithm selection"),
    ("rwapi", "the Remote-Write API"),
    ("stats", "progress-engine counters"),
    ("replica", "replicated ranks for volatile nodes"),
    ("job", "what the launcher watches in a running job"),
];

impl Param {
    /// The group (see [`GROUPS`]) the parameter belongs to.
    pub fn group(&self) -> &'static str {
        let n = self.name;
        if n.starts_with("progress") || ["bind", "spin_us", "yield_us", "rseq"].contains(&n) {
            "progress"
        } else if n.starts_with("shm_") {
            "shm"
        } else if n.starts_with("tcp_") {
            "tcp"
        } else if n.starts_with("coll_") {
            "coll"
        } else if n.starts_with("rwapi_") {
            "rwapi"
        } else if n.starts_with("stats") {
            "stats"
        } else if n.starts_with("replica") {
            "replica"
        } else if n.starts_with("stall") {
            "job"
        } else {
            "messages"
        }
    }
}

/// The environment variable that carries `name`.
pub fn env_name(name: &str) -> String {
    format!("{ENV_PREFIX}{}", name.to_ascii_uppercase())
}

/// Registered names close to `name` (for "did you mean" messages).
pub fn suggest(name: &str) -> Vec<&'static str> {
    let lower = name.to_ascii_lowercase();
    // Names that contain what was typed (or are contained in it) first,
    // then by edit distance.
    let mut scored: Vec<(bool, usize, &'static str)> = REGISTRY
        .iter()
        .map(|p| {
            let related = p.name.contains(&lower) || lower.contains(p.name);
            (!related, edit_distance(&lower, p.name), p.name)
        })
        .filter(|&(unrelated, d, _)| !unrelated || d <= 3.max(lower.len() / 3))
        .collect();
    scored.sort();
    scored.into_iter().map(|(_, _, n)| n).take(3).collect()
}

/// A message for an unknown parameter name, listing close matches.
pub fn unknown_message(name: &str) -> String {
    let close = suggest(name);
    if close.is_empty() {
        format!("unknown parameter '{name}' (`tandem info` lists them all)")
    } else {
        format!(
            "unknown parameter '{name}'; did you mean {}? (`tandem info` lists them all)",
            close
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Bool(bool),
    UInt(u64),
    Text(String),
}

impl Param {
    /// Parses `text` as a value of this parameter, or explains why it cannot.
    pub fn parse(&self, text: &str) -> Result<Value, String> {
        let t = text.trim();
        match self.kind {
            Kind::Bool => match t.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(Value::Bool(true)),
                "0" | "false" | "no" | "off" => Ok(Value::Bool(false)),
                _ => Err(format!(
                    "{}: expected a boolean (0/1), got '{t}'",
                    self.name
                )),
            },
            Kind::UInt => t
                .parse::<u64>()
                .map(Value::UInt)
                .map_err(|_| format!("{}: expected a non-negative integer, got '{t}'", self.name)),
            Kind::Bytes => parse_bytes(t).map(Value::UInt).ok_or_else(|| {
                format!(
                    "{}: expected a byte count like 65536 or 64k, got '{t}'",
                    self.name
                )
            }),
            Kind::Choice(options) => {
                let lower = t.to_ascii_lowercase();
                if options.contains(&lower.as_str()) {
                    Ok(Value::Text(lower))
                } else {
                    Err(format!(
                        "{}: expected one of {}, got '{t}'",
                        self.name,
                        options.join(", ")
                    ))
                }
            }
            Kind::Text => Ok(Value::Text(t.to_string())),
        }
    }

    /// A short description of the accepted values, for `tandem info`.
    pub fn type_name(&self) -> String {
        match self.kind {
            Kind::Bool => "bool".into(),
            Kind::UInt => "uint".into(),
            Kind::Bytes => "bytes".into(),
            Kind::Choice(o) => o.join("|"),
            Kind::Text => "text".into(),
        }
    }
}

/// Parses `65536`, `64k`, `64KiB`, `1m`, `2g`.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, suffix) = lower.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mult: u64 = match suffix.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Where a parameter's current value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Default,
    Environment,
}

/// The values in force for one process: defaults overridden by `TANDEM_<NAME>`.
#[derive(Clone, Debug)]
pub struct Settings {
    values: BTreeMap<&'static str, (Value, Source)>,
}

impl Settings {
    /// Reads every registered parameter from the environment.
    ///
    /// Fails with a clear message on a malformed value or on a `TANDEM_*`
    /// variable that names no parameter.
    pub fn from_env() -> Result<Settings, String> {
        let mut vars = Vec::new();
        for (key, value) in std::env::vars_os() {
            let Ok(key) = key.into_string() else {
                continue;
            };
            if key.starts_with(ENV_PREFIX) {
                let value = value.into_string().map_err(|_| {
                    format!("environment variable {key}: the value is not valid UTF-8")
                })?;
                vars.push((key, value));
            }
        }
        Self::from_vars(vars)
    }

    /// Like [`Settings::from_env`] with explicit variables (for tests).
    pub fn from_vars<I: IntoIterator<Item = (String, String)>>(
        vars: I,
    ) -> Result<Settings, String> {
        let mut values = BTreeMap::new();
        for p in REGISTRY {
            let v = p.parse(p.default).expect("registry default must parse");
            values.insert(p.name, (v, Source::Default));
        }
        for (key, val) in vars {
            let Some(rest) = key.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            if key.starts_with(JOB_ENV_PREFIX) || TOOL_ENV.contains(&key.as_str()) {
                continue;
            }
            let Some(p) = lookup(rest) else {
                return Err(format!(
                    "environment variable {key}: {}",
                    unknown_message(&rest.to_ascii_lowercase())
                ));
            };
            let v = p.parse(&val)?;
            values.insert(p.name, (v, Source::Environment));
        }
        Ok(Settings { values })
    }

    fn get(&self, name: &str) -> &Value {
        &self
            .values
            .get(name)
            .unwrap_or_else(|| panic!("parameter {name} is not registered"))
            .0
    }

    /// The value of an integer or byte-count parameter.
    pub fn uint(&self, name: &str) -> u64 {
        match self.get(name) {
            Value::UInt(v) => *v,
            other => panic!("parameter {name} is not an integer: {other:?}"),
        }
    }

    /// The value of a boolean parameter.
    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            Value::Bool(v) => *v,
            other => panic!("parameter {name} is not a boolean: {other:?}"),
        }
    }

    /// The value of a text or choice parameter.
    pub fn text(&self, name: &str) -> &str {
        match self.get(name) {
            Value::Text(v) => v,
            other => panic!("parameter {name} is not text: {other:?}"),
        }
    }

    /// The current value as text and where it came from, for `tandem info`.
    pub fn describe(&self, name: &str) -> (String, Source) {
        let (v, s) = &self.values[name];
        let text = match v {
            Value::Bool(b) => u8::from(*b).to_string(),
            Value::UInt(n) => n.to_string(),
            Value::Text(t) => t.clone(),
        };
        (text, *s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_env_overrides() {
        let s = Settings::from_vars(vec![("TANDEM_EAGER_LIMIT".to_string(), "128k".to_string())])
            .unwrap();
        assert_eq!(s.uint("eager_limit"), 128 * 1024);
        assert_eq!(s.describe("eager_limit").1, Source::Environment);
        assert_eq!(s.uint("spin_us"), 1000);
        assert_eq!(s.describe("spin_us").1, Source::Default);
    }

    #[test]
    fn unknown_env_name_is_an_error_with_suggestion() {
        let err = Settings::from_vars(vec![("TANDEM_EAGER_LIMT".to_string(), "1".to_string())])
            .unwrap_err();
        assert!(err.contains("eager_limit"), "{err}");
    }

    #[test]
    fn job_variables_are_not_parameters() {
        assert!(
            Settings::from_vars(vec![("TANDEM_JOB_RANK".to_string(), "3".to_string())]).is_ok()
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        let p = lookup("eager_limit").unwrap();
        assert!(p.parse("12q").is_err());
        assert!(p.parse("-1").is_err());
        assert_eq!(p.parse("4MiB").unwrap(), Value::UInt(4 << 20));
    }

    #[test]
    fn every_group_has_parameters_and_every_parameter_a_group() {
        for (g, _) in GROUPS {
            assert!(
                REGISTRY.iter().any(|p| p.group() == *g),
                "group {g} is empty"
            );
        }
        for p in REGISTRY {
            assert!(GROUPS.iter().any(|(g, _)| *g == p.group()), "{}", p.name);
        }
    }

    #[test]
    fn suggestions_find_close_names() {
        assert_eq!(suggest("spin").first(), Some(&"spin_us"));
        assert_eq!(suggest("eager_limt").first(), Some(&"eager_limit"));
        assert!(unknown_message("zzzzzzzzzzzzzzzzzzzz").contains("tandem info"));
    }
}

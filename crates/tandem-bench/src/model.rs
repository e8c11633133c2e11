//! `tandem bench model`: the communication models of Table 1 of Noor,
//! Alhaisoni and Liotta, "An Empirical Study of MPI over PC Clusters", fitted
//! to measurements.
//!
//! * Hockney, T(m) = l + m/b, fitted to the ping-pong one-way times so
//!   that the largest relative error is least (relative, so that 8 B
//!   counts as much as 4 MiB; minimax, since a model is judged by its
//!   worst size) with l >= 0: as one line over every size, and per protocol
//!   regime, a latency each for the sizes sent eagerly, by rendezvous, by
//!   single copy and with copy help, since a protocol switch changes the
//!   start-up cost (PLogP's parameters depend on the size too), with a
//!   bandwidth per memory cell within it for the bytes past the cell's
//!   limit, since a working set past a cache level or the TLB's reach
//!   changes the cost per byte (see [`memory_limits`], `fit_cells`).
//!   Tandem's limits come from its parameters (`eager_limit`,
//!   `shm_single_copy_min`, `shm_copy_help_min`, `shm_heap`,
//!   `tcp_send_chunk`, with the run's `--set` values), the caches from the
//!   machine; for other libraries, whose limits tandem bench does not know, the breaks are put where two or
//!   three lines fit best, as PLogP does for LogP.
//! * LogGP, T(m) = o_s + (m-1)G + L + o_r, from the other kernels as
//!   Kielmann and Bal measure it: o_s and o_r are the MPI_Isend and
//!   MPI_Irecv overheads of the smallest message (overhead kernel), g the
//!   time per message of a burst of the smallest messages, G the slope of
//!   the burst's time per message over size, and L what the smallest
//!   ping-pong leaves after the overheads.
//!
//! Each model's largest and median relative error over the ping-pong sizes
//! is reported; from the Hockney fit come linear and tree collective times
//! next to `coll`'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::analyze::{self, Table};
use super::kernels::{self, size_text};
use super::mpi::{self, Family, Transport};
use super::output::{self, num, Machine};
use super::plot::{self, Plot, Series};
use super::stats::{fit_line_relative, max_relative_error, median_relative_error, Summary};
use super::{run_spec, split_set, KernelResult, ModelArgs, RunSpec};

/// The agreement the model must reach with the measured ping-pong.
pub const TARGET_ERROR: f64 = 0.15;

/// One Hockney line, valid for sizes in [from, to].
#[derive(Clone, Debug, Serialize)]
pub struct Hockney {
    /// What the line covers: a protocol ("eager", "rendezvous", "single
    /// copy") and, where the memory hierarchy splits it, the cache level
    /// its working set has left ("rendezvous, past L2"); or "all sizes",
    /// or a range of sizes.
    pub regime: String,
    /// The protocol regime (or regimes) whose latency it shares.
    pub protocol: String,
    /// Latency, seconds (shared by the cells of one protocol).
    pub l: f64,
    /// Bandwidth, bytes per second: of the bytes from `past` on (all of
    /// them for a protocol's first line).
    pub b: f64,
    /// Bytes from which `b` applies: 0, or for a later memory cell of the
    /// same protocol the limit it starts at (the bytes below still move at
    /// the earlier cells' bandwidths, see `fit_cells`).
    pub past: f64,
    /// Seconds the bytes below `past` take at the earlier cells'
    /// bandwidths, so that T(m) = l + before + (m - past)/b.
    pub before: f64,
    /// From this size on two CPUs copy a message (copy help), and its
    /// bytes take the time of the busier one's share (see `help_factor`).
    pub help_from: Option<f64>,
    /// Goodness of fit over this line's sizes: 1 - relative residual sum
    /// of squares / relative total sum of squares.
    pub r2: f64,
    /// Largest and median |predicted - measured| / measured over its sizes.
    pub max_error: f64,
    pub median_error: f64,
    /// Measured sizes the line was fitted to.
    pub sizes: usize,
    pub from: f64,
    pub to: f64,
}

/// One or more Hockney lines over consecutive ranges of sizes.
#[derive(Clone, Debug, Serialize)]
pub struct HockneyFit {
    pub segments: Vec<Hockney>,
    /// Where the breaks between lines come from.
    pub breaks: String,
    /// Largest |predicted - measured| / measured over the fitted sizes.
    pub max_error: f64,
    /// Median of the same.
    pub median_error: f64,
}

impl Hockney {
    /// T(m) = l + before + (m - past)/b, the bytes' time scaled by
    /// `help_factor` under copy help.
    pub fn predict(&self, m: f64) -> f64 {
        self.line().predict(m)
    }

    fn line(&self) -> Line {
        Line {
            l: self.l,
            b: self.b,
            past: self.past,
            before: self.before,
            help_from: self.help_from,
        }
    }
}

/// How much longer the bytes of an m-byte message take than an even
/// split between two CPUs would, where copy help starts at `from`: the
/// busier CPU copies tandem's `copy_help_share(m)` bytes of it (chunks of
/// at most 1 MiB claimed in turn: an odd number of chunks leaves one CPU
/// a chunk more), so 2 share / m; 1 below `from` or without copy help.
fn help_factor(from: Option<f64>, m: f64) -> f64 {
    match from {
        Some(f) if m >= f && m >= 1.0 => 2.0 * tandem::p2p::copy_help_share(m as u64) as f64 / m,
        _ => 1.0,
    }
}

impl HockneyFit {
    pub fn predict(&self, m: f64) -> f64 {
        self.segments
            .iter()
            .find(|s| m <= s.to)
            .or(self.segments.last())
            .expect("a fit has a segment")
            .predict(m)
    }

    fn with_errors(segments: Vec<Hockney>, breaks: &str, points: &[(f64, f64)]) -> HockneyFit {
        let mut fit = HockneyFit {
            segments,
            breaks: breaks.to_string(),
            max_error: 0.0,
            median_error: 0.0,
        };
        let pairs: Vec<(f64, f64)> = points.iter().map(|&(m, t)| (fit.predict(m), t)).collect();
        fit.max_error = max_relative_error(pairs.iter().copied());
        fit.median_error = median_relative_error(pairs);
        fit
    }
}

/// Line `line` over `points`, with its goodness of fit; `line` has no
/// error fields filled in yet.
fn segment(points: &[(f64, f64)], protocol: &str, regime: &str, line: Line) -> Option<Hockney> {
    let Line {
        l,
        b,
        past,
        before,
        help_from,
    } = line;
    let pairs = || points.iter().map(|&(m, t)| (line.predict(m), t));
    let w = |t: f64| 1.0 / (t * t);
    let sw: f64 = points.iter().map(|p| w(p.1)).sum();
    let mean = points.iter().map(|p| w(p.1) * p.1).sum::<f64>() / sw;
    let ss_tot: f64 = points.iter().map(|p| w(p.1) * (p.1 - mean).powi(2)).sum();
    let ss_res: f64 = pairs().map(|(p, t)| w(t) * (p - t).powi(2)).sum();
    Some(Hockney {
        regime: regime.to_string(),
        protocol: protocol.to_string(),
        l,
        b,
        past,
        before,
        help_from,
        r2: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        },
        max_error: max_relative_error(pairs()),
        median_error: median_relative_error(pairs()),
        sizes: points.len(),
        from: points.first()?.0,
        to: points.last()?.0,
    })
}

/// T(m) = l + before + (m - past)/b: a Hockney line, or the part of one
/// past a memory limit (see [`Hockney`]).
#[derive(Clone, Copy, Debug)]
struct Line {
    l: f64,
    b: f64,
    past: f64,
    before: f64,
    help_from: Option<f64>,
}

impl Line {
    fn hockney(l: f64, b: f64) -> Line {
        Line {
            l,
            b,
            past: 0.0,
            before: 0.0,
            help_from: None,
        }
    }

    fn predict(&self, m: f64) -> f64 {
        self.l + help_factor(self.help_from, m) * (self.before + (m - self.past) / self.b)
    }
}

/// The line of least largest relative error over `points` (see
/// [`fit_shared_latency_minimax`]).
fn fit_segment(points: &[(f64, f64)], regime: &str) -> Option<Hockney> {
    let (l, xs) = fit_shared_latency_minimax(&[points], &[0.0], None)?;
    segment(points, regime, regime, Line::hockney(l, 1.0 / xs[0]))
}

/// Fits one Hockney line to (size, seconds) points sorted by size.
pub fn fit_hockney(points: &[(f64, f64)]) -> Option<HockneyFit> {
    let seg = fit_segment(points, "all sizes")?;
    Some(HockneyFit::with_errors(vec![seg], "none", points))
}

/// A level of the memory hierarchy as the machine describes it: a data
/// or unified cache (`/sys/devices/system/cpu/cpu0/cache/index*`) or the
/// reach of the data TLB (`/proc/cpuinfo`'s "TLB size", x86 AMD).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MemoryLevel {
    /// "L1d", "L2", "L3", "TLB".
    pub name: String,
    pub bytes: u64,
    /// Processors sharing it.
    pub cpus: usize,
}

/// The data caches and TLB reach of CPU 0, innermost first (empty where
/// the system does not say).
pub fn memory_levels() -> Vec<MemoryLevel> {
    let mut levels = Vec::new();
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        let Some(kind) = read("type") else { break };
        if kind.trim() == "Instruction" {
            continue;
        }
        let (Some(level), Some(size)) = (read("level"), read("size").and_then(|s| bytes_of(&s)))
        else {
            continue;
        };
        let cpus = read("shared_cpu_list").map(|l| cpu_count(&l)).unwrap_or(1);
        let suffix = if kind.trim() == "Data" { "d" } else { "" };
        levels.push(MemoryLevel {
            name: format!("L{}{suffix}", level.trim()),
            bytes: size,
            cpus,
        });
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if let Some(pages) = cpuinfo
        .lines()
        .find(|l| l.starts_with("TLB size"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().strip_suffix("4K pages"))
        .and_then(|n| n.trim().parse::<u64>().ok())
    {
        levels.push(MemoryLevel {
            name: "TLB".into(),
            bytes: pages * 4096,
            cpus: 1,
        });
    }
    levels
}

/// "512K" -> 524288 (sysfs cache sizes).
fn bytes_of(s: &str) -> Option<u64> {
    let s = s.trim();
    let (n, k) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    n.parse::<u64>().ok()?.checked_mul(k)
}

/// "0-1,4" -> 3.
fn cpu_count(list: &str) -> usize {
    list.trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

/// A size past which messages move at another bandwidth though they
/// start alike: the working set leaves a cache level, or TCP hands a
/// message to the kernel in several calls.
#[derive(Clone, Debug, Serialize)]
pub struct BandwidthLimit {
    /// The largest size still before the limit.
    pub limit: f64,
    /// What the sizes above have left, for the regime's name ("L2").
    pub name: String,
    /// Why the limit is there, for the reader.
    pub why: String,
}

/// The ranks of a ping-pong: the working sets of both meet in a cache
/// their cores share.
const PINGPONG_RANKS: usize = 2;

/// The memory levels' limits for a ping-pong whose ranks each touch a
/// send and a receive buffer of m bytes and `staging` bytes per direction
/// of the transport's own memory (shared-memory ring cells) up to m, for
/// messages up to `staged_to` bytes (larger ones pass no staging): a
/// rank's working set is 2m + 2 min(m, staging) (2m past `staged_to`),
/// and a cache shared by the cores of both ranks holds both. (With copy
/// help each CPU copies part of both directions, touching its share of
/// all four buffers: the same bytes in all.) A level counts as left once the
/// working set exceeds half of it: caches are set-associative and hold
/// other data (the library, the stack, page tables, and in a virtual
/// machine other guests' data in a shared cache), the usual allowance
/// when blocking for a cache. On the 2-core test VM a copy loop slows
/// from 35 to 16 GB/s as 4 buffers grow from 8 to 16 MiB (L3: 32 MiB),
/// and a walk touching one line per page slows 5x past 4-6 MiB of pages
/// (TLB reach: 10 MiB). The last cache level has a second limit where the
/// working set exceeds all of it: past that, every copy goes to memory
/// (on the test VM shared-memory ping-pong falls from 17 to 10 GB/s
/// between 4 and 8 MiB, while both ranks' working sets grow from 18 to
/// 34 MiB).
pub fn memory_limits(levels: &[MemoryLevel], staging: f64, staged_to: f64) -> Vec<BandwidthLimit> {
    let mut out = Vec::new();
    // The size past which the working set first exceeds `usable`: the
    // largest m with 2m + 2 min(m, staging) <= usable, or if every staged
    // size fits, the largest with 2m <= usable.
    let largest = |usable: f64| {
        let staged = if usable / 4.0 <= staging {
            usable / 4.0
        } else {
            (usable - 2.0 * staging) / 2.0
        };
        if staged >= staged_to {
            usable / 2.0
        } else {
            staged
        }
    };
    let staging_text = match (staging > 0.0, staged_to.is_finite()) {
        (false, _) => String::new(),
        (true, false) => format!(" + ring cells 2 min(m, {})", size_text(staging as u64)),
        (true, true) => format!(
            " + ring cells 2 min(m, {}) up to {}",
            size_text(staging as u64),
            size_text(staged_to as u64)
        ),
    };
    let last_cache = levels
        .iter()
        .filter(|lv| lv.name.starts_with('L'))
        .max_by_key(|lv| lv.bytes);
    for lv in levels {
        let share = lv.cpus.clamp(1, PINGPONG_RANKS) as f64;
        let usable = lv.bytes as f64 / 2.0 / share;
        let m = largest(usable);
        let ranks = if share > 1.0 {
            "both ranks' "
        } else {
            "one rank's "
        };
        let cpus_text = if lv.cpus > 1 {
            format!(" shared by {} cpus", lv.cpus)
        } else {
            " per core".into()
        };
        if last_cache.is_some_and(|c| std::ptr::eq(c, lv)) {
            let all = largest(lv.bytes as f64 / share);
            out.push(BandwidthLimit {
                limit: all.floor(),
                name: format!("all of {}", lv.name),
                why: format!(
                    "{} {}{cpus_text}: {ranks}working set (buffers 2m{staging_text}) over all of it above {}, \
                     so copies go to memory",
                    lv.name,
                    size_text(lv.bytes),
                    size_text(all.floor() as u64)
                ),
            });
        }
        out.push(BandwidthLimit {
            limit: m.floor(),
            name: lv.name.clone(),
            why: format!(
                "{} {}{cpus_text}: {ranks}working set (buffers 2m{staging_text}) over half of it above {}",
                lv.name,
                size_text(lv.bytes),
                size_text(m.floor() as u64)
            ),
        });
    }
    out
}

/// Where a library changes protocol: regime `names[i]` takes the sizes up
/// to and including `limits[i]` that no earlier regime takes; the last
/// takes the rest. Within a protocol, `bandwidth` limits split the sizes
/// into cells that share the protocol's latency but not its bandwidth.
#[derive(Clone, Debug, Serialize)]
pub struct Protocols {
    pub limits: Vec<f64>,
    pub names: Vec<String>,
    /// Where the limits come from, for the reader.
    pub source: String,
    /// Sorted by limit.
    pub bandwidth: Vec<BandwidthLimit>,
    /// The first size two CPUs copy (copy help, see
    /// `Protocols::add_copy_help`); `None` where none do.
    pub copy_help: Option<f64>,
}

impl Protocols {
    /// The regime of a message of `m` bytes.
    fn index(&self, m: f64) -> usize {
        self.limits
            .iter()
            .position(|&l| m <= l)
            .unwrap_or(self.limits.len())
    }

    /// The bandwidth cell of a message of `m` bytes: how many bandwidth
    /// limits it is above.
    fn band(&self, m: f64) -> usize {
        self.bandwidth.iter().filter(|b| m > b.limit).count()
    }

    /// What the sizes of cell `band` have left: the last limit below them.
    fn band_name(&self, band: usize) -> Option<&str> {
        band.checked_sub(1)
            .and_then(|i| self.bandwidth.get(i))
            .map(|b| b.name.as_str())
    }

    /// The smallest size of regime `i` is just above this.
    fn lower(&self, i: usize) -> f64 {
        i.checked_sub(1).map_or(0.0, |j| self.limits[j])
    }

    /// Copy help from `help` bytes on (`shm_copy_help_min`): over shared
    /// memory a message read in place (single copy, or rendezvous under
    /// `shm_path_choice`) from `help` bytes on is copied by two CPUs, its
    /// sender writing part of it into the receive buffer while the
    /// receiver reads the rest (p2p/copy_help.rs). That costs an
    /// invitation at the start, a latency of its own, and moves the bytes
    /// at up to twice one CPU's rate: a protocol switch. Splits the regime
    /// `help` falls in and names those from it on "..., copy help".
    fn add_copy_help(&mut self, help: f64, path_choice: bool) {
        let read = |name: &str| {
            name.starts_with("single copy") || (path_choice && name.starts_with("rendezvous"))
        };
        let last_without = help - 1.0;
        let i = self.index(help);
        if read(&self.names[i]) && last_without > self.lower(i) {
            self.limits.insert(i, last_without);
            let name = self.names[i].clone();
            self.names.insert(i, name);
        }
        for j in 0..self.names.len() {
            if self.lower(j) >= last_without && read(&self.names[j]) {
                self.names[j] += ", copy help";
                let first = (self.lower(j) + 1.0).max(help);
                self.copy_help = Some(self.copy_help.map_or(first, |f: f64| f.min(first)));
            }
        }
        if self.copy_help.is_some() {
            let _ = write!(
                self.source,
                ", shm_copy_help_min = {}: from it a message read in place is copied by two \
                 CPUs, the busier one's share of its chunks (at most 1 MiB each, claimed in \
                 turn) setting the time",
                size_text(help as u64)
            );
        }
    }

    fn add_bandwidth(&mut self, mut limits: Vec<BandwidthLimit>) {
        self.bandwidth.append(&mut limits);
        self.bandwidth.sort_by(|a, b| a.limit.total_cmp(&b.limit));
    }
}

/// Tandem's protocol regimes under `settings`, for a ping-pong over
/// `transport` on a machine with memory `levels` and `cpus` usable CPUs,
/// whose ranks each allocate their send and receive buffers of `buffers`
/// bytes (the largest size; bench/bench.h): eager up to `eager_limit`
/// (`shm_eager_limit` over shared memory), rendezvous above; over shared
/// memory, eager messages that fit one ring cell (`shm_cell_size` less its
/// 64-byte header) apart from those spanning cells, whose copy-in and
/// copy-out overlap, rendezvous read in place or pushed through the rings
/// as the receiver measured faster (`shm_path_choice`), single copy from
/// `shm_single_copy_min` where it is enabled, and reads in place from
/// `shm_copy_help_min` on apart from smaller ones (copy help, see
/// `Protocols::add_copy_help`). Where the runtime lets a parameter left
/// at its default give way on a host with more ranks than CPUs, so does
/// this (`shm_eager_limit`, `shm_copy_help_min`). Bandwidth limits: the
/// memory levels (see [`memory_limits`]; over shared memory the rings'
/// cells are staging, for every message, or with the shared heap
/// (`shm_heap`, which holds buffers from `shm_heap_min` on) for eager
/// messages only, rendezvous data then being copied straight between the
/// ranks' heaps; TCP's socket buffers are the kernel's and not counted)
/// and, over TCP, `tcp_send_chunk`, above which a message takes several
/// send calls.
pub fn tandem_protocols(
    settings: &tandem::params::Settings,
    transport: &Transport,
    levels: &[MemoryLevel],
    cpus: usize,
    buffers: u64,
) -> Protocols {
    let shm = match transport {
        Transport::Tcp => false,
        Transport::Shm => true,
        Transport::Default => settings.text("transports").split(',').any(|t| t == "shm"),
        Transport::Other(t) => t.split(',').any(|t| t == "shm"),
    };
    // As the runtime decides (runtime.rs, default_on_oversubscribed_host).
    let gives_way = |name: &str| {
        PINGPONG_RANKS > cpus && settings.describe(name).1 == tandem::params::Source::Default
    };
    let mut eager = settings.uint("eager_limit");
    let mut source = format!("eager_limit = {}", size_text(eager));
    let shm_eager = settings.uint("shm_eager_limit");
    if shm && shm_eager < eager {
        if gives_way("shm_eager_limit") {
            source += " (shm_eager_limit, left at its default, gives way: more ranks than CPUs)";
        } else {
            eager = shm_eager;
            source = format!("shm_eager_limit = {}", size_text(eager));
        }
    }
    let eager = eager as f64;
    let mut p = Protocols {
        limits: vec![eager],
        names: vec!["eager".into(), "rendezvous".into()],
        source,
        bandwidth: Vec::new(),
        copy_help: None,
    };
    if !shm {
        p.add_bandwidth(memory_limits(levels, 0.0, f64::INFINITY));
        let chunk = settings.uint("tcp_send_chunk");
        if chunk > 0 {
            p.add_bandwidth(vec![BandwidthLimit {
                limit: chunk as f64,
                name: "one send call".into(),
                why: format!(
                    "tcp_send_chunk = {}: larger messages take several send calls",
                    size_text(chunk)
                ),
            }]);
        }
        return p;
    }
    let cell_size = settings.uint("shm_cell_size") as f64;
    let ring = settings.uint("shm_cells") as f64 * cell_size;
    let cell = cell_size - 64.0;
    if cell > 0.0 && cell < eager {
        p.limits.insert(0, cell);
        p.names = vec![
            "eager, one cell".into(),
            "eager, across cells".into(),
            "rendezvous".into(),
        ];
        let _ = write!(p.source, ", one shm cell up to {}", size_text(cell as u64));
    }
    let single_copy = settings.bool("shm_single_copy");
    let min = settings.uint("shm_single_copy_min") as f64;
    let path_choice = settings.bool("shm_path_choice");
    if single_copy {
        if min <= eager + 1.0 {
            *p.names.last_mut().expect("a regime") = "single copy".into();
        } else {
            if path_choice {
                p.source += ", rendezvous read in place or through the rings as measured faster";
            }
            p.limits.push(min - 1.0);
            p.names.push("single copy".into());
        }
        let _ = write!(
            p.source,
            ", shm_single_copy_min = {}",
            size_text(min as u64)
        );
    }
    // The shared heap holds the buffers, and every rendezvous message may
    // be read in place (under shm_path_choice, as measured faster: a
    // memcpy from the peer's heap against the rings' two copies).
    let heap_min = settings
        .uint("shm_heap_min")
        .max(tandem::shm_heap::FLOOR as u64);
    let heap = single_copy
        && (path_choice || min <= eager + 1.0)
        && settings.bool("shm_heap")
        && buffers >= heap_min;
    if heap {
        let _ = write!(
            p.source,
            ", shm_heap: the ping-pong's buffers ({} each, shm_heap_min = {}) lie in the shared \
             heap, so a rendezvous message is read in place with memcpy (faster than the rings' \
             two copies) and the rings carry eager messages only",
            size_text(buffers),
            size_text(heap_min)
        );
        p.add_bandwidth(memory_limits(levels, ring.min(eager), eager));
    } else {
        p.add_bandwidth(memory_limits(levels, ring, f64::INFINITY));
    }
    let help = if gives_way("shm_copy_help_min") {
        0
    } else {
        settings.uint("shm_copy_help_min")
    };
    if single_copy && help > 0 {
        p.add_copy_help(help as f64, path_choice);
    }
    p
}

/// The protocol regimes of a ping-pong of `library` with library
/// parameters `lib_set` (NAME, VALUE) over `transport` on this machine,
/// whose buffers hold `buffers` bytes (its largest size): Tandem's from
/// its parameter registry, the environment's `TANDEM_*` and `lib_set`;
/// `None` for other libraries.
pub fn protocols_of(
    family: Family,
    lib_set: &[(String, String)],
    transport: &Transport,
    buffers: u64,
) -> Result<Option<Protocols>, String> {
    if family != Family::Tandem {
        return Ok(None);
    }
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with(tandem::params::ENV_PREFIX))
        .collect();
    vars.extend(
        lib_set
            .iter()
            .map(|(k, v)| (tandem::params::env_name(k), v.clone())),
    );
    let settings = tandem::params::Settings::from_vars(vars)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(Some(tandem_protocols(
        &settings,
        transport,
        &memory_levels(),
        cpus,
        buffers,
    )))
}

/// The name of regimes that share a line: their common protocol ("eager"
/// for "eager, one cell" and "eager, across cells"), else all of them.
fn merged_name(names: &[String]) -> String {
    let base = |n: &String| n.split(", ").next().unwrap_or("").to_string();
    match names.first() {
        Some(first) if names.len() > 1 && names.iter().all(|n| base(n) == base(first)) => {
            base(first)
        }
        _ => names.join(" + "),
    }
}

/// One latency per protocol regime and one bandwidth per cell of it (see
/// [`Protocols`]). A regime with fewer than three measured sizes (a line
/// through two points fits anything, noise included), or whose times do
/// not grow with size, cannot have a line of its own and shares a
/// neighbour's: the one whose shared line predicts the sizes better
/// (shared-memory messages spanning ring cells, say, are copied in a
/// pipeline like rendezvous messages, not one cell at a time like smaller
/// eager ones). Within a regime, neighbouring cells share a bandwidth
/// unless their own ones explain the times better by more than the
/// parameters they cost (see `fit_cells`).
pub fn fit_hockney_protocols(points: &[(f64, f64)], protocols: &Protocols) -> Option<HockneyFit> {
    let mut groups: Vec<Group> = Vec::new();
    let mut current = usize::MAX;
    for &p in points {
        let i = protocols.index(p.0);
        if i != current {
            groups.push((vec![protocols.names[i].clone()], Vec::new()));
            current = i;
        }
        groups.last_mut()?.1.push(p);
    }
    let mut source = protocols.source.clone();
    for b in &protocols.bandwidth {
        let _ = write!(source, "; {}", b.why);
    }
    fit_groups(groups, &source, points, protocols)
}

/// Consecutive groups of points, one per regime that has any: the
/// regimes' names and their (size, seconds) points.
type Group = (Vec<String>, Vec<(f64, f64)>);

/// A line per group, merging groups that cannot have their own (see
/// [`fit_hockney_protocols`]) into the neighbour that predicts best.
fn fit_groups(
    groups: Vec<Group>,
    source: &str,
    points: &[(f64, f64)],
    protocols: &Protocols,
) -> Option<HockneyFit> {
    let fits: Vec<Option<Vec<Hockney>>> = groups
        .iter()
        .map(|(names, pts)| fit_cells(pts, &merged_name(names), protocols))
        .collect();
    let Some(bad) = fits.iter().position(Option::is_none) else {
        let segments = fits.into_iter().flatten().flatten().collect();
        return Some(HockneyFit::with_errors(segments, source, points));
    };
    if groups.len() == 1 {
        return None;
    }
    let merged = |into: usize| {
        let mut g = groups.clone();
        let (mut names, mut pts) = g.remove(bad);
        if into < bad {
            let t = &mut g[into];
            t.0.append(&mut names);
            t.1.append(&mut pts);
        } else {
            // `into` was bad + 1; after the removal it is at `bad`.
            let t = &mut g[bad];
            names.append(&mut t.0);
            pts.append(&mut t.1);
            *t = (names, pts);
        }
        fit_groups(g, source, points, protocols)
    };
    let before = if bad > 0 { merged(bad - 1) } else { None };
    let after = if bad + 1 < groups.len() {
        merged(bad + 1)
    } else {
        None
    };
    match (before, after) {
        (Some(a), Some(b)) => Some(if b.max_error < a.max_error { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Bytes of an m-byte message that block `k` of consecutive blocks
/// starting at `starts` (sorted, the first 0) carries: those from its
/// start up to the next block's.
fn bytes_in(m: f64, starts: &[f64], k: usize) -> f64 {
    let hi = starts.get(k + 1).copied().unwrap_or(f64::INFINITY);
    (m.min(hi) - starts[k]).max(0.0)
}

/// T(m) = l + the sum over blocks k of bytes_in(m, k) x_k, the bytes'
/// time scaled by [`help_factor`] from copy help's first size `help` on.
fn blocks_time(l: f64, xs: &[f64], starts: &[f64], help: Option<f64>, m: f64) -> f64 {
    l + help_factor(help, m)
        * xs.iter()
            .enumerate()
            .map(|(k, x)| bytes_in(m, starts, k) * x)
            .sum::<f64>()
}

/// The coefficients c that minimise the sum over rows i of
/// w_i (rows_i . c - t_i)^2: the normal equations, columns scaled to a
/// largest entry of 1, solved by Gaussian elimination with partial
/// pivoting. `None` when they are singular.
fn weighted_least_squares(rows: &[Vec<f64>], t: &[f64], w: &[f64]) -> Option<Vec<f64>> {
    let n = rows.first()?.len();
    let scale: Vec<f64> = (0..n)
        .map(|j| rows.iter().map(|r| r[j].abs()).fold(0.0, f64::max))
        .collect();
    if scale.iter().any(|&s| !(s > 0.0 && s.is_finite())) {
        return None;
    }
    let mut a = vec![vec![0.0; n + 1]; n];
    for ((r, &ti), &wi) in rows.iter().zip(t).zip(w) {
        for i in 0..n {
            let ri = r[i] / scale[i];
            for j in 0..n {
                a[i][j] += wi * ri * r[j] / scale[j];
            }
            a[i][n] += wi * ri * ti;
        }
    }
    let largest = (0..n).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        // Also catches NaN.
        if a[pivot][col].abs().partial_cmp(&(largest * 1e-13)) != Some(std::cmp::Ordering::Greater)
        {
            return None;
        }
        a.swap(col, pivot);
        let (above, below) = a.split_at_mut(col + 1);
        let top = &above[col];
        for row in below {
            let f = row[col] / top[col];
            for (x, y) in row[col..].iter_mut().zip(&top[col..]) {
                *x -= f * y;
            }
        }
    }
    let mut c = vec![0.0; n];
    for i in (0..n).rev() {
        let rest: f64 = (i + 1..n).map(|j| a[i][j] * c[j]).sum();
        c[i] = (a[i][n] - rest) / a[i][i];
    }
    let c: Vec<f64> = c.iter().zip(&scale).map(|(c, s)| c / s).collect();
    c.iter().all(|c| c.is_finite()).then_some(c)
}

/// Least relative squares of T(m) = l + the sum over blocks k of
/// bytes_in(m, k) x_k (see [`blocks_time`]) over consecutive blocks of
/// (size, seconds) points, block k's bandwidth starting at `starts[k]`
/// (the first at 0): one x (seconds per byte) per block, l >= 0 shared,
/// each point also weighted by its entry in `weights` (one per point,
/// block by block), the bytes' time scaled by [`help_factor`] from copy
/// help's first size `help` on. With one block and no copy help, a
/// Hockney line. Returns (l, x per block).
fn fit_shared_latency(
    cells: &[&[(f64, f64)]],
    starts: &[f64],
    help: Option<f64>,
    weights: &[Vec<f64>],
) -> Option<(f64, Vec<f64>)> {
    let (mut rows, mut t, mut w) = (Vec::new(), Vec::new(), Vec::new());
    for (c, u) in cells.iter().zip(weights) {
        for (p, &u) in c.iter().zip(u) {
            let mut row = vec![1.0];
            let f = help_factor(help, p.0);
            row.extend((0..cells.len()).map(|k| f * bytes_in(p.0, starts, k)));
            rows.push(row);
            t.push(p.1);
            w.push(u / (p.1 * p.1));
        }
    }
    let c = weighted_least_squares(&rows, &t, &w)?;
    if c[0] >= 0.0 {
        return Some((c[0], c[1..].to_vec()));
    }
    // The latency is held at 0: the bandwidths alone.
    let rows: Vec<Vec<f64>> = rows.into_iter().map(|r| r[1..].to_vec()).collect();
    Some((0.0, weighted_least_squares(&rows, &t, &w)?))
}

/// The (l, x per block) of [`fit_shared_latency`] whose largest relative
/// error is least, rather than its sum of squares: the model is judged by
/// its worst size ("within 15% at every size"), so that is what it is
/// fitted for. Lawson's iteration: least relative squares, each point's
/// weight then multiplied by its error, repeated, tends to the minimax
/// line; it starts from plain least relative squares and keeps the best
/// it meets, so it never does worse than that. `None` when no fit has a
/// positive, finite cost per byte in every block.
fn fit_shared_latency_minimax(
    cells: &[&[(f64, f64)]],
    starts: &[f64],
    help: Option<f64>,
) -> Option<(f64, Vec<f64>)> {
    let mut weights: Vec<Vec<f64>> = cells.iter().map(|c| vec![1.0; c.len()]).collect();
    let mut best: Option<(f64, (f64, Vec<f64>))> = None;
    for _ in 0..200 {
        let Some((l, xs)) = fit_shared_latency(cells, starts, help, &weights) else {
            break;
        };
        if xs.iter().any(|&x| x <= 0.0 || !x.is_finite()) {
            break;
        }
        let errors: Vec<Vec<f64>> = cells
            .iter()
            .map(|c| {
                c.iter()
                    .map(|p| ((blocks_time(l, &xs, starts, help, p.0) - p.1) / p.1).abs())
                    .collect()
            })
            .collect();
        let worst = errors.iter().flatten().fold(0.0f64, |a, &e| a.max(e));
        if best.as_ref().is_none_or(|b| worst < b.0) {
            best = Some((worst, (l, xs)));
        }
        // A floor keeps a point that is met exactly from dropping out for
        // good; an exact fit ends the iteration.
        let mut sum = 0.0;
        for (u, e) in weights.iter_mut().flatten().zip(errors.iter().flatten()) {
            *u *= e.max(1e-12);
            sum += *u;
        }
        if worst < 1e-12 || !(sum > 0.0 && sum.is_finite()) {
            break;
        }
        for u in weights.iter_mut().flatten() {
            *u /= sum;
        }
    }
    best.map(|b| b.1)
}

/// The lines of one protocol regime over `pts` (sorted by size): its
/// latency, and a bandwidth per block of neighbouring bandwidth cells.
/// A block's bandwidth is that of the bytes past the limit it starts at:
/// the bytes of a message below the limit move as they do in the smaller
/// messages, so T(m) is continuous, with a kink at the limit. A working
/// set past a cache level does not lose all of it: the bytes that still
/// fit keep their speed (a last-level cache keeps part of a working set
/// too large for it, and the fall spreads over sizes; on the 2-core test
/// VM the shared-heap ping-pong's bandwidth falls from 80 to 19 GB/s
/// between 4 and 16 MiB, while the time of each byte past the L3 stays
/// near one value), so a cell's line continues the one before it rather
/// than starting again from the latency. Every way of joining
/// neighbouring cells into blocks of at least two sizes is tried, and the
/// one with the least corrected Akaike criterion (AICc, on the relative
/// residuals) kept: a cell past a cache level has a bandwidth of its own
/// only where that explains the times better than the extra parameter
/// costs, so noise does not buy lines. `None` when the regime has fewer
/// than three sizes or no block grows with size.
fn fit_cells(pts: &[(f64, f64)], name: &str, protocols: &Protocols) -> Option<Vec<Hockney>> {
    if pts.len() < 3 {
        return None;
    }
    // Cells: consecutive runs of one band.
    let mut cells: Vec<(usize, usize)> = Vec::new(); // (band, end index)
    for (i, p) in pts.iter().enumerate() {
        let band = protocols.band(p.0);
        match cells.last_mut() {
            Some(c) if c.0 == band => c.1 = i + 1,
            _ => cells.push((band, i + 1)),
        }
    }
    let n = pts.len() as f64;
    let mut best: Option<(f64, Vec<Hockney>)> = None;
    // Bit i set: a block ends after cell i.
    for mask in 0u32..(1 << (cells.len() - 1)) {
        // (start, end, first cell)
        let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
        let (mut start, mut first) = (0, 0);
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() || mask & (1 << i) != 0 {
                blocks.push((start, c.1, first));
                (start, first) = (c.1, i + 1);
            }
        }
        let k = blocks.len() as f64 + 1.0;
        if blocks.iter().any(|b| b.1 - b.0 < 2) || (blocks.len() > 1 && n - k - 1.0 <= 0.0) {
            continue;
        }
        let slices: Vec<&[(f64, f64)]> = blocks.iter().map(|b| &pts[b.0..b.1]).collect();
        // Where each block's bandwidth starts: the first at no bytes, a
        // later one at the limit below its first cell.
        let starts: Vec<f64> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| match (i, cells[b.2].0.checked_sub(1)) {
                (0, _) | (_, None) => 0.0,
                (_, Some(j)) => protocols.bandwidth[j].limit,
            })
            .collect();
        let ones: Vec<Vec<f64>> = slices.iter().map(|s| vec![1.0; s.len()]).collect();
        let help = protocols.copy_help;
        let Some((l, xs)) = fit_shared_latency(&slices, &starts, help, &ones) else {
            continue;
        };
        if xs.iter().any(|&x| x <= 0.0 || !x.is_finite()) {
            continue;
        }
        let rss: f64 = pts
            .iter()
            .map(|p| ((blocks_time(l, &xs, &starts, help, p.0) - p.1) / p.1).powi(2))
            .sum();
        // A floor keeps exact (synthetic) fits comparable: then the fewest
        // parameters win.
        let rss = rss.max(n * 1e-18);
        let aicc = if n - k - 1.0 > 0.0 {
            n * (rss / n).ln() + 2.0 * k + 2.0 * k * (k + 1.0) / (n - k - 1.0)
        } else {
            f64::INFINITY
        };
        if best.as_ref().is_some_and(|b| b.0 <= aicc) {
            continue;
        }
        // The blocks are chosen on least squares (the criterion needs a
        // likelihood); their lines are then the minimax ones.
        let Some((l, xs)) = fit_shared_latency_minimax(&slices, &starts, help) else {
            continue;
        };
        let multi = blocks.len() > 1;
        let segs: Option<Vec<Hockney>> = blocks
            .iter()
            .zip(&slices)
            .enumerate()
            .map(|(i, (b, s))| {
                // Named by what all its sizes have left, where it matters.
                let band = cells[b.2].0;
                let regime = match (protocols.band_name(band), protocols.bandwidth.first()) {
                    (Some(c), _) if multi => format!("{name}, past {c}"),
                    (None, Some(first)) if multi => format!("{name}, within {}", first.name),
                    _ => name.to_string(),
                };
                let before = (0..i).map(|j| (starts[j + 1] - starts[j]) * xs[j]).sum();
                let line = Line {
                    l,
                    b: 1.0 / xs[i],
                    past: starts[i],
                    before,
                    help_from: help,
                };
                segment(s, name, &regime, line)
            })
            .collect();
        if let Some(segs) = segs {
            best = Some((aicc, segs));
        }
    }
    best.map(|b| b.1)
}

/// Fits `k` Hockney lines to consecutive ranges of sizes (each of at
/// least three sizes), with the breaks that minimise the largest relative
/// error: Hockney with parameters that depend on the message size, as
/// PLogP does for LogP (Noor et al., Table 1). For libraries whose protocol
/// limits are unknown.
pub fn fit_hockney_k(points: &[(f64, f64)], k: usize) -> Option<HockneyFit> {
    const MIN: usize = 3;
    let n = points.len();
    if k == 0 || n < k * MIN {
        return None;
    }
    let mut best: Option<HockneyFit> = None;
    // Every choice of k-1 breaks, as the first index of each later segment.
    let mut breaks: Vec<usize> = (1..k).map(|i| i * MIN).collect();
    loop {
        let mut bounds = vec![0];
        bounds.extend(&breaks);
        bounds.push(n);
        let segments: Option<Vec<Hockney>> = bounds
            .windows(2)
            .map(|w| {
                let range = format!(
                    "{} .. {}",
                    size_text(points[w[0]].0 as u64),
                    size_text(points[w[1] - 1].0 as u64)
                );
                fit_segment(&points[w[0]..w[1]], &range)
            })
            .collect();
        if let Some(segments) = segments {
            let fit = HockneyFit::with_errors(segments, "where the lines fit best", points);
            if best.as_ref().is_none_or(|b| fit.max_error < b.max_error) {
                best = Some(fit);
            }
        }
        // Next combination: advance the last break that can move.
        let mut i = breaks.len();
        loop {
            if i == 0 {
                return best;
            }
            i -= 1;
            let limit = n - (breaks.len() - i) * MIN;
            if breaks[i] < limit {
                breaks[i] += 1;
                for j in i + 1..breaks.len() {
                    breaks[j] = breaks[j - 1] + MIN;
                }
                break;
            }
        }
    }
}

/// The piecewise fit with the fewest lines (two or three) that predicts
/// every size within the target, else the best of them.
pub fn fit_hockney_piecewise(points: &[(f64, f64)]) -> Option<HockneyFit> {
    let two = fit_hockney_k(points, 2);
    if two.as_ref().is_some_and(|f| f.max_error <= TARGET_ERROR) {
        return two;
    }
    let three = fit_hockney_k(points, 3);
    match (two, three) {
        (Some(a), Some(b)) => Some(if b.max_error < a.max_error { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// LogGP parameters (seconds; G in seconds per byte).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LogGp {
    pub l: f64,
    pub o_s: f64,
    pub o_r: f64,
    pub g: f64,
    pub big_g: f64,
    pub max_error: f64,
    pub median_error: f64,
}

impl LogGp {
    /// T(m) = o_s + (m-1)G + L + o_r.
    pub fn predict(&self, m: f64) -> f64 {
        self.o_s + (m - 1.0).max(0.0) * self.big_g + self.l + self.o_r
    }
}

/// The line of long messages: of the last protocol's lines (they share
/// its latency), the one over most sizes, the later on a tie; a cell past
/// the caches holds the largest sizes but only a few of them, and one
/// G stands for all long messages in LogGP.
fn long_messages(h: &HockneyFit) -> Option<&Hockney> {
    let last = h.segments.last()?;
    h.segments
        .iter()
        .filter(|s| s.protocol == last.protocol)
        .max_by_key(|s| s.sizes)
}

/// Derives LogGP: G, the gap per byte of long messages, is the slope of
/// the ping-pong over its long messages (see `long_messages`); o_s and o_r are the measured overheads,
/// scaled down together if they exceed what the smallest ping-pong leaves
/// (then L = 0); L is the rest of the smallest ping-pong; g is the time per
/// message of a burst of the smallest messages. `burst_big_g`, the slope
/// of the burst's time per message, is returned as a cross-check.
pub fn fit_loggp(
    pingpong: &[(f64, f64)],
    large: &Hockney,
    burst: &[(f64, f64)],
    o_s: f64,
    o_r: f64,
) -> Option<(LogGp, Option<f64>, bool)> {
    let &(m0, t0) = pingpong.first()?;
    let g = burst.first().map(|p| p.1).unwrap_or(0.0);
    let burst_big_g = fit_line_relative(burst).map(|f| f.b.max(0.0));
    let big_g = 1.0 / large.b;
    let fixed = (t0 - (m0 - 1.0).max(0.0) * big_g).max(0.0);
    let (mut o_s, mut o_r) = (o_s, o_r);
    let scaled = o_s + o_r > fixed;
    if scaled {
        let k = fixed / (o_s + o_r);
        o_s *= k;
        o_r *= k;
    }
    let l = (fixed - o_s - o_r).max(0.0);
    let mut fit = LogGp {
        l,
        o_s,
        o_r,
        g,
        big_g,
        max_error: 0.0,
        median_error: 0.0,
    };
    fit.max_error = max_relative_error(pingpong.iter().map(|&(m, t)| (fit.predict(m), t)));
    fit.median_error = median_relative_error(pingpong.iter().map(|&(m, t)| (fit.predict(m), t)));
    Some((fit, burst_big_g, scaled))
}

fn log2_ceil(p: u64) -> f64 {
    (p as f64).log2().ceil()
}

/// Predicted (linear, tree) times of a `coll` point from a Hockney fit,
/// including the closing barrier of the procedure (a dissemination
/// barrier: ceil(log2 p) empty messages); `None` for the reductions, which
/// Noor et al. do not model (their time includes arithmetic).
pub fn predict_coll(h: &HockneyFit, op: &str, p: u64, m: f64) -> Option<(f64, f64)> {
    let t = |x: f64| h.predict(x);
    let steps = log2_ceil(p);
    let barrier = steps * t(0.0);
    let l = h.predict(0.0);
    let per_byte = |x: f64| t(x) - l;
    let (linear, tree) = match op {
        "bcast" => ((p - 1) as f64 * t(m), steps * t(m)),
        "gather" | "scatter" => (
            (p - 1) as f64 * t(m),
            steps * l + per_byte((p - 1) as f64 * m),
        ),
        // Pairwise exchange (p-1 steps) against Bruck (log p steps of p/2 blocks).
        "alltoall" => ((p - 1) as f64 * t(m), steps * t(p as f64 / 2.0 * m)),
        "p2p" => (t(m), t(m)),
        _ => return None,
    };
    Some((linear + barrier, tree + barrier))
}

/// Points (size, seconds) of a table's first metric (microseconds), each
/// the statistic `pick` takes of its repetitions.
fn points_us(t: &Table, group: Option<&str>, pick: fn(&Summary) -> f64) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = t
        .rows
        .iter()
        .filter(|r| group.is_none_or(|g| r.group == g))
        .filter_map(|r| {
            r.values
                .first()
                .copied()
                .flatten()
                .map(|s| (r.x, pick(&s) * 1e-6))
        })
        .filter(|p| p.1 > 0.0)
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// The fastest of a size's repetitions: what the models are fitted to.
fn fastest(s: &Summary) -> f64 {
    s.min
}

fn median(s: &Summary) -> f64 {
    s.median
}

/// One ping-pong size, times in seconds: measured, and as each model
/// predicts it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Prediction {
    pub size: f64,
    /// The fastest repetition's one-way time (Noor et al.'s minimum round
    /// trip time), which the models are fitted to and checked against.
    pub measured: f64,
    /// The median over the repetitions, for comparison.
    pub median: f64,
    pub hockney: Option<f64>,
    pub piecewise: Option<f64>,
    pub loggp: Option<f64>,
}

/// Everything the model command found.
#[derive(Clone, Debug, Serialize)]
pub struct ModelResult {
    pub machine: Machine,
    pub mpi: String,
    pub hockney: Option<HockneyFit>,
    /// One line per protocol regime (Tandem), or two or three lines where
    /// they fit best (other libraries).
    pub piecewise: Option<HockneyFit>,
    /// The protocol regimes, where known.
    pub protocols: Option<Protocols>,
    pub loggp: Option<LogGp>,
    /// G from the burst's slope, as a cross-check of LogGP's G.
    pub burst_big_g: Option<f64>,
    /// Per ping-pong size: measured and predicted, in seconds.
    pub pingpong: Vec<Prediction>,
    /// Repetitions per ping-pong size (the most any size had).
    pub pingpong_repetitions: usize,
    /// Cache-line round trips between the first two CPUs probed around the
    /// ping-pong's launches, ns (see [`super::core_latency`]).
    pub core_probes: Vec<f64>,
    /// (op, ranks taking part, size, measured minimum time, linear, tree)
    /// in seconds.
    pub collectives: Vec<(String, u64, u64, f64, f64, f64)>,
    /// Ping-pong sizes whose median is more than the target above their
    /// fastest repetition: the machine was slower for part of the run
    /// (on a virtual machine, typically the host moving its CPUs), so the
    /// median mixes two states of the machine that no one model describes.
    pub unsteady_sizes: Vec<f64>,
    pub notes: Vec<String>,
    pub measurements: Vec<KernelResult>,
}

impl ModelResult {
    /// The best Hockney fit (two lines if they fit better).
    pub fn best_hockney(&self) -> Option<&HockneyFit> {
        match (&self.hockney, &self.piecewise) {
            (Some(a), Some(b)) => Some(if b.max_error < a.max_error { b } else { a }),
            (a, b) => a.as_ref().or(b.as_ref()),
        }
    }

    /// What the piecewise Hockney fit is called.
    pub fn piecewise_name(&self) -> &'static str {
        if self.protocols.is_some() {
            "Hockney per protocol"
        } else {
            "piecewise Hockney"
        }
    }

    /// The smallest largest-error of the ping-pong predictions, and which model.
    pub fn best_error(&self) -> Option<(f64, &'static str)> {
        let mut c = Vec::new();
        if let Some(h) = &self.hockney {
            c.push((h.max_error, "Hockney"));
        }
        if let Some(h) = &self.piecewise {
            c.push((h.max_error, self.piecewise_name()));
        }
        if let Some(h) = &self.loggp {
            c.push((h.max_error, "LogGP"));
        }
        c.into_iter().min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// Fits the models to the tables of pingpong, burst, overhead and coll;
/// `protocols` are the library's protocol regimes where known.
pub fn fit(
    mpi_name: &str,
    protocols: Option<&Protocols>,
    pingpong: Option<&Table>,
    burst: Option<&Table>,
    overhead: Option<&Table>,
    coll: Option<&Table>,
) -> ModelResult {
    let mut notes = Vec::new();
    // The models describe the machine undisturbed, so they are fitted to
    // each size's fastest repetition (Noor et al. measure minimum round-trip
    // times for the same reason): noise only ever adds time, and a median
    // over repetitions that caught the machine in different states fits
    // no one line.
    let pp = pingpong
        .map(|t| points_us(t, None, fastest))
        .unwrap_or_default();
    let pp_median = pingpong
        .map(|t| points_us(t, None, median))
        .unwrap_or_default();
    let bu = burst
        .map(|t| points_us(t, None, fastest))
        .unwrap_or_default();
    let hockney = fit_hockney(&pp);
    let piecewise = match protocols {
        Some(p) => fit_hockney_protocols(&pp, p),
        None => fit_hockney_piecewise(&pp),
    };
    if hockney.is_none() {
        notes.push(
            "no single-line Hockney fit: ping-pong needs at least two sizes, and times that grow with size"
                .into(),
        );
    }
    let first_overhead = |op: &str| -> Option<f64> {
        overhead.and_then(|t| points_us(t, Some(op), median).first().map(|p| p.1))
    };
    let (o_s, o_r) = match (first_overhead("isend"), first_overhead("irecv")) {
        (Some(s), Some(r)) => (s, r),
        _ => {
            notes.push("no overhead measurements: LogGP assumes o_s = o_r = 0".into());
            (0.0, 0.0)
        }
    };
    let large = piecewise
        .as_ref()
        .or(hockney.as_ref())
        .and_then(|h| long_messages(h).cloned());
    let (loggp, burst_big_g) = match large.and_then(|lg| fit_loggp(&pp, &lg, &bu, o_s, o_r)) {
        Some((l, bg, scaled)) => {
            if scaled {
                notes.push(format!(
                    "LogGP: the measured overheads (o_s {} us + o_r {} us) exceed the smallest one-way time, \
                     so they are scaled down to fit it and L = 0 (the post-work-wait overhead also counts work \
                     that overlaps the peer's, such as system calls on TCP loopback)",
                    us(o_s),
                    us(o_r)
                ));
            }
            (Some(l), bg)
        }
        None => (None, None),
    };
    if bu.is_empty() {
        notes.push("no burst measurements: LogGP's g is unknown (0)".into());
    }
    let pingpong_rows: Vec<Prediction> = pp
        .iter()
        .map(|&(m, t)| Prediction {
            size: m,
            measured: t,
            median: pp_median.iter().find(|p| p.0 == m).map_or(t, |p| p.1),
            hockney: hockney.as_ref().map(|h| h.predict(m)),
            piecewise: piecewise.as_ref().map(|h| h.predict(m)),
            loggp: loggp.as_ref().map(|h| h.predict(m)),
        })
        .collect();
    let unsteady_sizes = pingpong_rows
        .iter()
        .filter(|p| p.median > p.measured * (1.0 + TARGET_ERROR))
        .map(|p| p.size)
        .collect();
    let mut result = ModelResult {
        machine: Machine::describe(),
        mpi: mpi_name.to_string(),
        hockney,
        piecewise,
        protocols: protocols.cloned(),
        loggp,
        burst_big_g,
        pingpong: pingpong_rows,
        collectives: Vec::new(),
        unsteady_sizes,
        pingpong_repetitions: pingpong
            .and_then(|t| {
                t.rows
                    .iter()
                    .filter_map(|r| r.values.first().copied().flatten().map(|s| s.n))
                    .max()
            })
            .unwrap_or(0),
        core_probes: Vec::new(),
        notes,
        measurements: Vec::new(),
    };
    if let (Some(h), Some(c)) = (result.best_hockney().cloned(), coll) {
        for r in &c.rows {
            let get = |k: &str| r.keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let (Some(op), Some(nodes)) =
                (get("op"), get("nodes").and_then(|n| n.parse::<u64>().ok()))
            else {
                continue;
            };
            let Some(size) = r
                .keys
                .iter()
                .find(|(n, _)| n == "size")
                .and_then(|(_, v)| parse_size_text(v))
            else {
                continue;
            };
            let Some(mrt) = r.values.first().copied().flatten() else {
                continue;
            };
            let Some((lin, tree)) = predict_coll(&h, &op, nodes, size as f64) else {
                continue;
            };
            result
                .collectives
                .push((op, nodes, size, mrt.median * 1e-6, lin, tree));
        }
    }
    result
}

/// "64 KiB" -> 65536.
fn parse_size_text(t: &str) -> Option<u64> {
    let (n, unit) = t.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "B" => n,
        "KiB" => n << 10,
        "MiB" => n << 20,
        _ => return None,
    })
}

fn pct(e: f64) -> String {
    format!("{:.1}%", e * 100.0)
}

fn us(s: f64) -> String {
    num(s * 1e6)
}

/// The model as text.
pub fn text(r: &ModelResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Models of {} (Noor, Alhaisoni and Liotta, Table 1); times are one-way (half a ping-pong round trip)",
        r.mpi
    );
    let _ = writeln!(o);
    let seg = |h: &Hockney| {
        let past = if h.past > 0.0 {
            format!(" past {}", size_text(h.past as u64))
        } else {
            String::new()
        };
        format!(
            "l = {} us, b = {} MB/s{past} (R2 {:.4})",
            us(h.l),
            num(h.b / 1e6),
            h.r2
        )
    };
    if let Some(h) = &r.hockney {
        let _ = writeln!(
            o,
            "Hockney T(m) = l + m/b, one line:   {}",
            seg(&h.segments[0])
        );
        let _ = writeln!(
            o,
            "    relative error: max {}, median {}",
            pct(h.max_error),
            pct(h.median_error)
        );
    }
    if let Some(h) = &r.piecewise {
        if let Some(p) = &r.protocols {
            let _ = writeln!(
                o,
                "Hockney per protocol regime (latency) and memory cell (bandwidth), \
                 lines of least largest relative error:"
            );
            let _ = writeln!(o, "    protocol switches: {}", p.source);
            for b in &p.bandwidth {
                let _ = writeln!(o, "    bandwidth limit: {}", b.why);
            }
            let _ = writeln!(
                o,
                "    (a cell keeps a bandwidth of its own where the corrected Akaike criterion \
                 says it earns it, that of the bytes past the limit it starts at; a regime of \
                 fewer than 3 sizes shares a neighbour's line)"
            );
        } else {
            let _ = writeln!(
                o,
                "Hockney, {} lines over the ranges of sizes where they fit best (PLogP-style; \
                 tandem bench does not know this library's protocol limits):",
                h.segments.len()
            );
        }
        // Regimes are named where the protocols are known; otherwise the
        // name would only repeat the range of sizes.
        let named = r.protocols.is_some();
        let label = |s: &Hockney| {
            if named {
                format!("{}  ", s.regime)
            } else {
                String::new()
            }
        };
        let width = h.segments.iter().map(|s| label(s).len()).max().unwrap_or(0);
        for s in &h.segments {
            let _ = writeln!(
                o,
                "    {:width$}{} .. {}: {}; {} sizes, error max {}, median {}",
                label(s),
                size_text(s.from as u64),
                size_text(s.to as u64),
                seg(s),
                s.sizes,
                pct(s.max_error),
                pct(s.median_error)
            );
        }
        let _ = writeln!(
            o,
            "    relative error: max {}, median {}",
            pct(h.max_error),
            pct(h.median_error)
        );
    }
    if let Some(l) = &r.loggp {
        let _ = writeln!(o, "LogGP T(m) = o_s + (m-1)G + L + o_r:");
        let _ = writeln!(
            o,
            "    L = {} us, o_s = {} us, o_r = {} us, g = {} us, G = {} ns/byte ({} MB/s)",
            us(l.l),
            us(l.o_s),
            us(l.o_r),
            us(l.g),
            num(l.big_g * 1e9),
            if l.big_g > 0.0 {
                num(1.0 / l.big_g / 1e6)
            } else {
                "-".into()
            }
        );
        let _ = writeln!(
            o,
            "    relative error: max {}, median {}",
            pct(l.max_error),
            pct(l.median_error)
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    if let Some(n) = loaded_note(r) {
        let _ = writeln!(o, "note: {n}");
    }
    if let Some(c) = core_line(r) {
        let _ = writeln!(o, "{c}");
    }
    if !r.pingpong.is_empty() {
        let _ = writeln!(o);
        let (header, rows) = prediction_table(r, true);
        o.push_str(&output::layout(&header, &rows, 1));
        if let Some(w) = within_line(r) {
            let _ = writeln!(o, "{w}");
        }
        for l in basis_lines(r, true) {
            let _ = writeln!(o, "{l}");
        }
    }
    if !r.collectives.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "{COLLECTIVES_INTRO}");
        let (header, rows) = collective_table(r);
        o.push_str(&output::layout(&header, &rows, 3));
    }
    o
}

/// Why no model of the library predicts the times, when the machine was
/// loaded during the measurements.
pub fn loaded_note(r: &ModelResult) -> Option<String> {
    let m = r.measurements.iter().find(|m| m.machine.loaded())?;
    Some(format!(
        "the machine was loaded (load average {:.2} on {} cores, these ranks included): the \
         times include other programs' interference, which no model of the library predicts",
        m.machine.load_average.unwrap_or(0.0),
        m.machine.cores
    ))
}

/// The cache-line round trips probed around the ping-pong: a note when
/// they varied, else their range.
pub fn core_line(r: &ModelResult) -> Option<String> {
    super::core_latency::note(&r.core_probes)
        .or_else(|| super::core_latency::range_text(&r.core_probes))
}

/// Per ping-pong size, the measured times and each model's prediction
/// and error: a header and rows; with `marks`, an unsteady size's median
/// is marked " !".
pub fn prediction_table(r: &ModelResult, marks: bool) -> (Vec<String>, Vec<Vec<String>>) {
    let header: Vec<String> = [
        "size",
        "fastest (us)",
        "median",
        "Hockney",
        "err",
        if r.protocols.is_some() {
            "per protocol"
        } else {
            "piecewise"
        },
        "err",
        "LogGP",
        "err",
    ]
    .map(String::from)
    .to_vec();
    let cell = |p: Option<f64>, t: f64| match p {
        Some(p) => (us(p), format!("{:+.1}%", (p - t) / t * 100.0)),
        None => ("-".into(), "-".into()),
    };
    let rows: Vec<Vec<String>> = r
        .pingpong
        .iter()
        .map(|p| {
            let t = p.measured;
            let (a, ae) = cell(p.hockney, t);
            let (b, be) = cell(p.piecewise, t);
            let (c, ce) = cell(p.loggp, t);
            let med = if marks && r.unsteady_sizes.contains(&p.size) {
                format!("{} !", us(p.median))
            } else {
                us(p.median)
            };
            vec![size_text(p.size as u64), us(t), med, a, ae, b, be, c, ce]
        })
        .collect();
    (header, rows)
}

/// Whether the best model predicts every ping-pong size within the target.
pub fn within_line(r: &ModelResult) -> Option<String> {
    let (e, which) = r.best_error()?;
    Some(format!(
        "ping-pong predicted within {:.0}% at every size: {} (best: {which}, largest error {})",
        TARGET_ERROR * 100.0,
        if e <= TARGET_ERROR { "yes" } else { "no" },
        pct(e)
    ))
}

/// What the errors are measured against, and how unsteady the medians
/// were; with `marks`, the unsteady sizes are said to be marked " !".
pub fn basis_lines(r: &ModelResult, marks: bool) -> Vec<String> {
    let mut v = vec![format!(
        "errors are against the fastest of each size's {} repetitions (the machine undisturbed; Noor et al. \
         use minimum round trips too)",
        r.pingpong_repetitions
    )];
    if let Some(h) = r.best_hockney() {
        v.push(format!(
            "against the medians instead, the best Hockney fit's largest error is {}",
            pct(max_relative_error(
                r.pingpong.iter().map(|p| (h.predict(p.size), p.median))
            ))
        ));
    }
    if !r.unsteady_sizes.is_empty() {
        v.push(format!(
            "the median is more than {:.0}% above the fastest repetition at {} of {} sizes ({}{}): \
             the machine was slower for part of the run (other programs, or on a virtual machine the host \
             moving its CPUs), so the medians mix two machine states",
            TARGET_ERROR * 100.0,
            r.unsteady_sizes.len(),
            r.pingpong.len(),
            if marks { "marked !: " } else { "" },
            r.unsteady_sizes
                .iter()
                .map(|&m| size_text(m as u64))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    v
}

/// What the collectives' table compares.
pub const COLLECTIVES_INTRO: &str =
    "Collectives: measured minimum time (barrier, start, op, barrier, end) against the Hockney fit \
     (linear: root or pairs one after another; tree: binomial, Bruck for alltoall; plus the closing barrier)";

/// The collectives measured and as the best Hockney fit predicts them: a
/// header and rows.
pub fn collective_table(r: &ModelResult) -> (Vec<String>, Vec<Vec<String>>) {
    let header: Vec<String> = [
        "op",
        "ranks",
        "size",
        "measured (us)",
        "linear",
        "tree",
        "closest",
    ]
    .map(String::from)
    .to_vec();
    let rows: Vec<Vec<String>> = r
        .collectives
        .iter()
        .map(|(op, n, s, meas, lin, tree)| {
            let closest = if (lin - meas).abs() <= (tree - meas).abs() {
                "linear"
            } else {
                "tree"
            };
            vec![
                op.clone(),
                n.to_string(),
                size_text(*s),
                us(*meas),
                us(*lin),
                us(*tree),
                closest.to_string(),
            ]
        })
        .collect();
    (header, rows)
}

/// One model's fitted parameters, for a table.
#[derive(Clone, Debug)]
pub struct ParameterTable {
    /// "Hockney", "Hockney per protocol", "LogGP".
    pub model: String,
    pub formula: &'static str,
    /// Whether it predicts the ping-pong best.
    pub best: bool,
    pub parts: Vec<ParameterPart>,
    /// Largest and median relative error over the ping-pong sizes.
    pub max_error: f64,
    pub median_error: f64,
}

/// The parameters that hold over a range of sizes.
#[derive(Clone, Debug)]
pub struct ParameterPart {
    /// The sizes (and where known the protocol regime) they hold for.
    pub sizes: String,
    /// (name, value with its unit)
    pub params: Vec<(String, String)>,
    /// Largest and median relative error over these sizes, where the
    /// part is not the whole model.
    pub errors: Option<(f64, f64)>,
}

fn bandwidth(b: f64) -> String {
    format!("{} MB/s", num(b / 1e6))
}

/// A time in microseconds; what rounding leaves of a zero is shown as 0.
fn latency(l: f64) -> String {
    format!("{} \u{b5}s", us(if l.abs() < 1e-12 { 0.0 } else { l }))
}

fn size_range(from: f64, to: f64) -> String {
    format!(
        "{} \u{2013} {}",
        size_text(from as u64),
        size_text(to as u64)
    )
}

/// A Hockney line's parameters.
fn hockney_params(h: &Hockney) -> Vec<(String, String)> {
    vec![
        ("latency \u{3b1}".into(), latency(h.l)),
        (
            if h.past > 0.0 {
                format!("bandwidth 1/\u{3b2} past {}", size_text(h.past as u64))
            } else {
                "bandwidth 1/\u{3b2}".into()
            },
            bandwidth(h.b),
        ),
    ]
}

/// Each model's fitted parameters with units, and its errors.
pub fn parameter_tables(r: &ModelResult) -> Vec<ParameterTable> {
    let best = r.best_error().map(|b| b.1);
    let mut v = Vec::new();
    if let Some(h) = &r.hockney {
        let s = &h.segments[0];
        v.push(ParameterTable {
            model: "Hockney".into(),
            formula: "T(m) = \u{3b1} + \u{3b2}m, one line",
            best: best == Some("Hockney"),
            parts: vec![ParameterPart {
                sizes: size_range(s.from, s.to),
                params: hockney_params(s),
                errors: None,
            }],
            max_error: h.max_error,
            median_error: h.median_error,
        });
    }
    if let Some(h) = &r.piecewise {
        let name = r.piecewise_name();
        v.push(ParameterTable {
            model: name.into(),
            formula: if r.protocols.is_some() {
                "T(m) = \u{3b1} + \u{3b2}m, a latency per protocol, a bandwidth per memory cell"
            } else {
                "T(m) = \u{3b1} + \u{3b2}m, a line per range of sizes"
            },
            best: best == Some(name),
            parts: h
                .segments
                .iter()
                .map(|s| ParameterPart {
                    sizes: if r.protocols.is_some() {
                        format!("{}: {}", s.regime, size_range(s.from, s.to))
                    } else {
                        size_range(s.from, s.to)
                    },
                    params: hockney_params(s),
                    errors: (h.segments.len() > 1).then_some((s.max_error, s.median_error)),
                })
                .collect(),
            max_error: h.max_error,
            median_error: h.median_error,
        });
    }
    if let Some(l) = &r.loggp {
        let sizes = match (r.pingpong.first(), r.pingpong.last()) {
            (Some(a), Some(b)) => size_range(a.size, b.size),
            _ => "all sizes".into(),
        };
        let per_byte = |g: f64| {
            if g > 0.0 {
                format!("{} ns/byte ({})", num(g * 1e9), bandwidth(1.0 / g))
            } else {
                format!("{} ns/byte", num(g * 1e9))
            }
        };
        let mut params = vec![
            ("L, latency".into(), latency(l.l)),
            ("o_s, send overhead".into(), latency(l.o_s)),
            ("o_r, receive overhead".into(), latency(l.o_r)),
            ("g, gap per message".into(), latency(l.g)),
            ("G, gap per byte".into(), per_byte(l.big_g)),
        ];
        if let Some(g) = r.burst_big_g {
            params.push(("G from the burst's slope (cross-check)".into(), per_byte(g)));
        }
        v.push(ParameterTable {
            model: "LogGP".into(),
            formula: "T(m) = o_s + (m-1)G + L + o_r",
            best: best == Some("LogGP"),
            parts: vec![ParameterPart {
                sizes,
                params,
                errors: None,
            }],
            max_error: l.max_error,
            median_error: l.median_error,
        });
    }
    v
}

/// Each model's error per ping-pong size, (predicted - measured) /
/// measured in percent, as a plot whose series have the colours and
/// markers of [`plot_of`]'s (the measured times are the zero line).
pub fn error_plot_of(r: &ModelResult) -> Plot {
    let base = plot_of(r);
    let series = base
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| Series {
            name: if i == 0 {
                "measured (fastest)".into()
            } else {
                s.name.clone()
            },
            points: s
                .points
                .iter()
                .filter_map(|p| {
                    let t = r.pingpong.iter().find(|q| q.size == p.0)?.measured * 1e6;
                    let e = if i == 0 { 0.0 } else { (p.1 - t) / t * 100.0 };
                    Some((p.0, e, e, e))
                })
                .collect(),
        })
        .collect();
    Plot {
        title: format!("model error, {}: (predicted - measured) / measured", r.mpi),
        y_label: "error (%)".into(),
        log_y: false,
        series,
        ..base
    }
}

/// The measured and predicted ping-pong times as a plot.
pub fn plot_of(r: &ModelResult) -> Plot {
    let mut series = vec![Series {
        name: "measured (fastest, to median)".into(),
        points: r
            .pingpong
            .iter()
            .map(|p| (p.size, p.measured * 1e6, p.measured * 1e6, p.median * 1e6))
            .collect(),
    }];
    let mut add = |name: &str, f: &dyn Fn(&Prediction) -> Option<f64>| {
        let pts: Vec<(f64, f64, f64, f64)> = r
            .pingpong
            .iter()
            .filter_map(|p| f(p).map(|y| (p.size, y * 1e6, y * 1e6, y * 1e6)))
            .collect();
        if !pts.is_empty() {
            series.push(Series {
                name: name.into(),
                points: pts,
            });
        }
    };
    add("Hockney", &|p| p.hockney);
    add(r.piecewise_name(), &|p| p.piecewise);
    add("LogGP", &|p| p.loggp);
    let xs: Vec<f64> = r
        .pingpong
        .iter()
        .map(|p| p.size)
        .filter(|x| *x > 0.0)
        .collect();
    let log = xs.len() > 1 && plot::wants_log(xs[0], xs[xs.len() - 1]);
    Plot {
        title: format!("ping-pong one-way time, {}: measured and models", r.mpi),
        x_label: "message size (bytes)".into(),
        y_label: "time (us)".into(),
        log_x: log,
        log_y: log,
        x_bytes: true,
        x_integer: false,
        series,
    }
}

/// A kernel's table loaded from a `--json` document, with Tandem's
/// protocol regimes for that run when the table is Tandem's.
struct Loaded {
    kernel: String,
    table: Table,
    protocols: Option<Protocols>,
    /// The runs' cache-line round-trip probes, ns.
    core_probes: Vec<f64>,
}

/// One document's records of one kernel, before pooling.
struct LoadedRecords {
    kernel: String,
    records: Vec<Value>,
    params: BTreeMap<String, String>,
    protocols: Option<Protocols>,
    core_probes: Vec<f64>,
}

/// Loads `--json` documents of kernels (or of `tandem bench model`, whose
/// measurements they hold, or a report's results.json, whose sections
/// over `transport` are taken): one table per kernel, for library `mpi`
/// (or the document's first library). Documents of one kernel with the
/// same parameters (a report's second ping-pong pass, or files given
/// together) are pooled into one table, as more repetitions of the same
/// measurement; of a kernel run with other parameters the first is used.
fn load(paths: &[std::path::PathBuf], mpi: &str, transport: &str) -> Result<Vec<Loaded>, String> {
    let mut pooled: Vec<LoadedRecords> = Vec::new();
    for doc in load_records(paths, mpi, transport)? {
        match pooled
            .iter_mut()
            .find(|p| p.kernel == doc.kernel && p.params == doc.params)
        {
            Some(p) => {
                analyze::pool(&mut p.records, doc.records);
                p.core_probes.extend(doc.core_probes);
            }
            None => pooled.push(doc),
        }
    }
    Ok(pooled
        .into_iter()
        .map(|p| Loaded {
            table: analyze::analyse(&p.kernel, &p.records, &p.params),
            kernel: p.kernel,
            protocols: p.protocols,
            core_probes: p.core_probes,
        })
        .collect())
}

fn load_records(
    paths: &[std::path::PathBuf],
    mpi: &str,
    transport: &str,
) -> Result<Vec<LoadedRecords>, String> {
    let mut out = Vec::new();
    for p in paths {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a tandem bench JSON file: {e}", p.display()))?;
        // A `tandem bench report`'s results.json: its sections over
        // `transport`.
        let sections = doc.get("sections").and_then(Value::as_array).map(|s| {
            s.iter()
                .filter(|s| s.get("transport").and_then(Value::as_str) == Some(transport))
                .filter_map(|s| s.get("result").filter(|r| r.is_object()).cloned())
                .collect::<Vec<_>>()
        });
        let docs = match (doc.get("measurements").and_then(Value::as_array), sections) {
            (Some(m), _) => m.clone(),
            (None, Some(s)) if s.is_empty() => {
                return Err(format!(
                    "{}: no report sections over transport {transport} (see --transport)",
                    p.display()
                ))
            }
            (None, Some(s)) => s,
            (None, None) => vec![doc],
        };
        for doc in docs {
            out.push(load_document(&doc, mpi).map_err(|e| format!("{}: {e}", p.display()))?);
        }
    }
    Ok(out)
}

fn load_document(doc: &Value, mpi: &str) -> Result<LoadedRecords, String> {
    let kernel = doc
        .get("kernel")
        .and_then(Value::as_str)
        .ok_or("no kernel")?
        .to_string();
    let runs = doc
        .get("runs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let libs: Vec<&str> = runs
        .iter()
        .filter_map(|r| r.get("mpi").and_then(Value::as_str))
        .collect();
    let lib = if libs.contains(&mpi) {
        mpi
    } else {
        libs.first().copied().unwrap_or(mpi)
    };
    let mut records = Vec::new();
    let mut core_probes = Vec::new();
    for r in &runs {
        if r.get("mpi").and_then(Value::as_str) != Some(lib) {
            continue;
        }
        core_probes.extend(
            r.get("core_round_trip_ns")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64),
        );
        let run_records = r.get("records").and_then(Value::as_array).cloned();
        analyze::pool(&mut records, run_records.unwrap_or_default());
    }
    let params: BTreeMap<String, String> = doc
        .get("params")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default();
    // Library parameters: [library or "", name, value].
    let lib_set: Vec<(String, String)> = doc
        .get("library_params")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|w| {
                    let w = w.as_array()?;
                    let (l, k, v) = (
                        w.first()?.as_str()?,
                        w.get(1)?.as_str()?,
                        w.get(2)?.as_str()?,
                    );
                    (l.is_empty() || l == lib).then(|| (k.to_string(), v.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let transport = Transport::parse(
        doc.get("transport")
            .and_then(Value::as_str)
            .unwrap_or("default"),
    );
    let family = if lib == "tandem" {
        Family::Tandem
    } else {
        Family::OpenMpi
    };
    let protocols = protocols_of(family, &lib_set, &transport, largest_size(&params))?;
    Ok(LoadedRecords {
        kernel,
        records,
        params,
        protocols,
        core_probes,
    })
}

/// The largest ping-pong size the model measures: the last cell past the
/// last cache level then has sizes enough for a bandwidth of its own.
pub const PINGPONG_MAX: u64 = 16 << 20;

/// The ping-pong sizes the model is fitted to and checked against: every
/// power of two from 1 B to `max`, and where a protocol regime would have
/// fewer than three of them (its own line needs three) or a memory cell
/// within one fewer than two (its own bandwidth needs two), the sizes
/// halfway between powers of two (3 x 2^k) that fall in it. Without known
/// protocols, the powers of two.
pub fn pingpong_sizes(protocols: Option<&Protocols>, max: u64) -> Vec<u64> {
    let powers: Vec<u64> = (0..64)
        .map(|k| 1u64 << k)
        .take_while(|&m| m <= max)
        .collect();
    let Some(p) = protocols else {
        return powers;
    };
    let regime = |m: u64| p.index(m as f64);
    let cell = |m: u64| (p.index(m as f64), p.band(m as f64));
    let mut sizes = powers.clone();
    for h in (0..63).map(|k| 3u64 << k).take_while(|&m| m <= max) {
        let in_regime = powers.iter().filter(|&&m| regime(m) == regime(h)).count();
        let in_cell = powers.iter().filter(|&&m| cell(m) == cell(h)).count();
        if in_regime < 3 || in_cell < 2 {
            sizes.push(h);
        }
    }
    sizes.sort_unstable();
    sizes
}

/// The largest of a kernel's `sizes` parameter (a comma list of bytes),
/// [`PINGPONG_MAX`] when it has none.
pub fn largest_size(params: &BTreeMap<String, String>) -> u64 {
    params
        .get("sizes")
        .and_then(|s| {
            s.split(',')
                .filter_map(|v| v.trim().parse::<u64>().ok())
                .max()
        })
        .unwrap_or(PINGPONG_MAX)
}

/// The measurements the model needs, as specs; the ping-pong over
/// `pingpong` sizes (see [`pingpong_sizes`]).
pub fn specs(
    lib: &mpi::Library,
    duration: f64,
    repeat: u32,
    coll_np: u32,
    set: &[String],
    transport: &Transport,
    pingpong: &[u64],
) -> Result<Vec<RunSpec>, String> {
    let mut out = Vec::new();
    let pingpong = pingpong
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let plan: [(&str, u32, &str, bool); 4] = [
        ("pingpong", 2, &pingpong, true),
        ("burst", 2, "1:4m:4", true),
        ("overhead", 2, "8,1k,64k,1m", false),
        ("coll", coll_np, "1k,64k,1m", false),
    ];
    for (name, np, sizes, timed) in plan {
        if np == 0 {
            continue;
        }
        let kernel = kernels::find(name).expect("kernel in the catalogue");
        let mut params = BTreeMap::new();
        params.insert(
            "sizes".to_string(),
            kernels::parse_sizes(sizes)?
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
        if timed {
            params.insert("duration".into(), duration.to_string());
        }
        let rep = match name {
            "overhead" => repeat.clamp(1, 3),
            "coll" => (repeat * 2).max(5),
            _ => repeat,
        };
        params.insert("repeat".into(), rep.to_string());
        let lib_set = split_set(kernel, set, std::slice::from_ref(lib), &mut params)?;
        out.push(RunSpec {
            kernel,
            libs: vec![lib.clone()],
            np,
            np_list: if name == "coll" {
                (2..=np).collect()
            } else {
                Vec::new()
            },
            params,
            lib_set,
            transport: transport.clone(),
            rounds: 1,
            timeout: Duration::from_secs(1800),
            progress: true,
            placement: None,
            separate_launches: false,
            notes: vec![],
            other_library_timeout: None,
        });
    }
    Ok(out)
}

/// Runs the specs; a kernel the library cannot build (missing collectives)
/// is skipped with a note.
pub fn measure(specs: &[RunSpec], notes: &mut Vec<String>) -> Result<Vec<KernelResult>, String> {
    super::progress::start("model", specs.iter().map(super::planned_launches).sum());
    let out = measure_each(specs, notes);
    super::progress::finish();
    out
}

fn measure_each(specs: &[RunSpec], notes: &mut Vec<String>) -> Result<Vec<KernelResult>, String> {
    let mut out = Vec::new();
    for s in specs {
        match super::build::build(s.kernel, &s.libs[0]) {
            Err(super::build::BuildError::Missing(message)) => {
                notes.push(format!("{message}: skipped"));
                continue;
            }
            Err(e) => return Err(e.to_string()),
            Ok(_) => {}
        }
        out.push(run_spec(s)?);
    }
    Ok(out)
}

fn table_of<'a>(results: &'a [(String, Table)], kernel: &str) -> Option<&'a Table> {
    results.iter().find(|(k, _)| k == kernel).map(|(_, t)| t)
}

pub fn command(a: &ModelArgs) -> Result<(), String> {
    if let Some(p) = &a.plot {
        plot::check_path(p)?;
    }
    // `--set transports=X` means `--transport X`, as for the kernels.
    let mut transport = Transport::parse(&a.transport);
    let mut set = Vec::new();
    for w in &a.set {
        match w.strip_prefix("transports=") {
            Some(t) => transport = Transport::parse(t),
            None => set.push(w.clone()),
        }
    }
    let (tables, measurements, mut notes, protocols, core_probes) = if a.from.is_empty() {
        let lib = mpi::resolve(&a.mpi)?;
        let kernel = kernels::find("pingpong").expect("kernel in the catalogue");
        let lib_set: Vec<(String, String)> = split_set(
            kernel,
            &set,
            std::slice::from_ref(&lib),
            &mut BTreeMap::new(),
        )?
        .into_iter()
        .filter(|(l, _, _)| l.is_empty() || *l == lib.name)
        .map(|(_, k, v)| (k, v))
        .collect();
        let planned = protocols_of(lib.family, &lib_set, &transport, PINGPONG_MAX)?;
        let specs = specs(
            &lib,
            a.duration,
            a.repeat.max(1),
            a.coll_np,
            &set,
            &transport,
            &pingpong_sizes(planned.as_ref(), PINGPONG_MAX),
        )?;
        // The ping-pong's buffers are as large as its largest size (a
        // `--set sizes=...` may have changed them).
        let largest = specs
            .first()
            .map_or(PINGPONG_MAX, |s| largest_size(&s.params));
        let protocols = protocols_of(lib.family, &lib_set, &transport, largest)?;
        let mut notes = Vec::new();
        let results = measure(&specs, &mut notes)?;
        let tables: Vec<(String, Table)> = results
            .iter()
            .map(|r| (r.kernel.clone(), r.tables[0].1.clone()))
            .collect();
        let probes = results
            .iter()
            .filter(|r| r.kernel == "pingpong")
            .flat_map(|r| r.core_probes())
            .collect();
        (tables, results, notes, protocols, probes)
    } else {
        let loaded = load(&a.from, &a.mpi, transport.name())?;
        let protocols = loaded
            .iter()
            .find(|l| l.kernel == "pingpong")
            .and_then(|l| l.protocols.clone());
        let probes = loaded
            .iter()
            .filter(|l| l.kernel == "pingpong")
            .flat_map(|l| l.core_probes.iter().copied())
            .collect();
        let tables = loaded.into_iter().map(|l| (l.kernel, l.table)).collect();
        (tables, Vec::new(), Vec::new(), protocols, probes)
    };
    let mut r = fit(
        &a.mpi,
        protocols.as_ref(),
        table_of(&tables, "pingpong"),
        table_of(&tables, "burst"),
        table_of(&tables, "overhead"),
        table_of(&tables, "coll"),
    );
    if table_of(&tables, "pingpong").is_none() {
        return Err(
            "the model needs ping-pong measurements (a pingpong --json file with --from)".into(),
        );
    }
    notes.append(&mut r.notes);
    r.notes = notes;
    r.measurements = measurements;
    r.core_probes = core_probes;
    print!("{}", text(&r));
    if let Some(p) = &a.json {
        let text =
            serde_json::to_string_pretty(&r).map_err(|e| format!("cannot encode JSON: {e}"))?;
        output::write_file(p, text.as_bytes())?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &a.plot {
        plot::write(&plot_of(&r), Path::new(p))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic() -> Vec<(f64, f64)> {
        // Eager up to 64 KiB: 8 us + 1 ns/B; rendezvous: 30 us + 0.25 ns/B.
        (0..=22)
            .map(|k| {
                let m = (1u64 << k) as f64;
                let t = if m <= 65536.0 {
                    8e-6 + m * 1e-9
                } else {
                    30e-6 + m * 0.25e-9
                };
                (m, t)
            })
            .collect()
    }

    #[test]
    fn hockney_single_line_exact() {
        let pts: Vec<(f64, f64)> = (0..12)
            .map(|k| ((4u64 << k) as f64, 5e-6 + (4u64 << k) as f64 / 2e9))
            .collect();
        let h = fit_hockney(&pts).unwrap();
        assert!((h.segments[0].l - 5e-6).abs() < 1e-12);
        assert!((h.segments[0].b - 2e9).abs() / 2e9 < 1e-9);
        assert!(h.max_error < 1e-9);
    }

    #[test]
    fn two_lines_find_the_protocol_switch() {
        let pts = synthetic();
        let one = fit_hockney(&pts).unwrap();
        let two = fit_hockney_k(&pts, 2).unwrap();
        assert!(
            one.max_error > 0.15,
            "one line fits too well: {}",
            one.max_error
        );
        assert!(two.max_error < 1e-6, "{}", two.max_error);
        assert_eq!(two.segments[0].to, 65536.0);
        assert!((two.segments[1].l - 30e-6).abs() < 1e-10);
        assert!((two.predict(1048576.0) - (30e-6 + 1048576.0 * 0.25e-9)).abs() < 1e-12);
    }

    fn two_protocols() -> Protocols {
        Protocols {
            limits: vec![65536.0],
            names: vec!["eager".into(), "rendezvous".into()],
            source: "test".into(),
            bandwidth: vec![],
            copy_help: None,
        }
    }

    #[test]
    fn one_line_per_protocol_recovers_both() {
        let pts = synthetic();
        let f = fit_hockney_protocols(&pts, &two_protocols()).unwrap();
        assert_eq!(f.segments.len(), 2);
        let (e, r) = (&f.segments[0], &f.segments[1]);
        assert_eq!((e.regime.as_str(), e.from, e.to), ("eager", 1.0, 65536.0));
        assert_eq!(
            (r.regime.as_str(), r.from, r.to),
            ("rendezvous", 131072.0, 4194304.0)
        );
        assert!((e.l - 8e-6).abs() < 1e-12 && (e.b - 1e9).abs() / 1e9 < 1e-9);
        assert!((r.l - 30e-6).abs() < 1e-12 && (r.b - 4e9).abs() / 4e9 < 1e-9);
        assert!(f.max_error < 1e-9 && f.median_error < 1e-9);
        // One line over both regimes misses by far more.
        let one = fit_hockney(&pts).unwrap();
        assert!(one.max_error > 0.15 && one.median_error > 0.01, "{one:?}");
    }

    #[test]
    fn protocol_fit_weighs_every_size_alike() {
        // +-5% alternating noise on the two regimes: minimising relative
        // errors keeps every size, 1 B as well as 4 MiB, within about the
        // noise; absolute least squares would give the microsecond sizes
        // away to the millisecond ones.
        let pts: Vec<(f64, f64)> = synthetic()
            .into_iter()
            .enumerate()
            .map(|(i, (m, t))| (m, t * if i % 2 == 0 { 1.05 } else { 0.95 }))
            .collect();
        let f = fit_hockney_protocols(&pts, &two_protocols()).unwrap();
        assert!(f.max_error < 0.07, "{f:?}");
        assert!((f.segments[0].l - 8e-6).abs() / 8e-6 < 0.05, "{f:?}");
        assert!((f.segments[1].b - 4e9).abs() / 4e9 < 0.05, "{f:?}");
        // Plain least squares on the same points: the small sizes are off.
        let w = vec![1.0; pts.len()];
        let plain = super::super::stats::fit_line(&pts[..17], &w[..17]).unwrap();
        let small_err = ((plain.a + plain.b) - pts[0].1).abs() / pts[0].1;
        assert!(small_err > f.max_error, "{small_err}");
    }

    #[test]
    fn three_protocols_and_thin_regimes() {
        // Eager to 64 KiB, rendezvous to 1 MiB - 1, single copy from 1 MiB.
        let t = |m: f64| {
            if m <= 65536.0 {
                5e-6 + m * 1e-9
            } else if m < 1048576.0 {
                20e-6 + m * 0.5e-9
            } else {
                60e-6 + m * 0.2e-9
            }
        };
        let pts: Vec<(f64, f64)> = (0..=22)
            .map(|k| ((1u64 << k) as f64, t((1u64 << k) as f64)))
            .collect();
        let p = Protocols {
            limits: vec![65536.0, 1048575.0],
            names: vec!["eager".into(), "rendezvous".into(), "single copy".into()],
            source: "test".into(),
            bandwidth: vec![],
            copy_help: None,
        };
        let f = fit_hockney_protocols(&pts, &p).unwrap();
        let names: Vec<&str> = f.segments.iter().map(|s| s.regime.as_str()).collect();
        assert_eq!(names, ["eager", "rendezvous", "single copy"]);
        assert!(f.max_error < 1e-9, "{f:?}");
        assert!((f.segments[2].l - 60e-6).abs() < 1e-12);
        // A regime whose sizes got slower with size (noise) shares a
        // neighbour's line: the one that predicts them better (here the
        // later one).
        let mut noisy = pts.clone();
        noisy[17].1 = noisy[16].1 * 0.9;
        noisy[18].1 = noisy[16].1 * 0.8;
        noisy[19].1 = noisy[16].1 * 0.7;
        let p2 = Protocols {
            limits: vec![65536.0, 524288.0],
            names: vec!["eager".into(), "rendezvous".into(), "single copy".into()],
            source: "test".into(),
            bandwidth: vec![],
            copy_help: None,
        };
        let f = fit_hockney_protocols(&noisy, &p2).unwrap();
        let names: Vec<&str> = f.segments.iter().map(|s| s.regime.as_str()).collect();
        assert_eq!(names, ["eager", "rendezvous + single copy"]);
        let split = noisy.iter().position(|p| p.0 > 524288.0).unwrap();
        let with_eager = fit_groups(
            vec![
                (
                    vec!["eager".into(), "rendezvous".into()],
                    noisy[..split].to_vec(),
                ),
                (vec!["single copy".into()], noisy[split..].to_vec()),
            ],
            "test",
            &noisy,
            &p2,
        )
        .unwrap();
        assert!(f.max_error <= with_eager.max_error, "{f:?} {with_eager:?}");
        // Measured only up to 256 KiB: rendezvous has two sizes, too few
        // for a line of its own, and shares eager's; single copy is absent.
        let f = fit_hockney_protocols(&pts[..=18], &p).unwrap();
        assert_eq!(f.segments.len(), 1);
        assert_eq!(f.segments[0].regime, "eager + rendezvous");
        assert_eq!(f.segments[0].to, 262144.0);
    }

    #[test]
    fn merged_regime_names() {
        let n = |v: &[&str]| merged_name(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(n(&["eager, one cell", "eager, across cells"]), "eager");
        assert_eq!(n(&["eager, one cell"]), "eager, one cell");
        assert_eq!(n(&["eager", "rendezvous"]), "eager + rendezvous");
    }

    #[test]
    fn latency_is_never_negative() {
        // A regime whose points lie on a line through -10 us: l is held at 0.
        let pts: Vec<(f64, f64)> = (17..=22)
            .map(|k| {
                let m = (1u64 << k) as f64;
                (m, m * 1e-9 - 10e-6)
            })
            .collect();
        let p = Protocols {
            limits: vec![],
            names: vec!["rendezvous".into()],
            source: "test".into(),
            bandwidth: vec![],
            copy_help: None,
        };
        let f = fit_hockney_protocols(&pts, &p).unwrap();
        assert_eq!(f.segments[0].l, 0.0);
        assert!(f.segments[0].b > 0.0);
    }

    /// A ping-pong's buffers: 16 MiB each, as the report's.
    const BUFFERS: u64 = 16 << 20;

    #[test]
    fn tandem_regimes_from_parameters() {
        use tandem::params::Settings;
        let vars = |v: &[(&str, &str)]| {
            Settings::from_vars(v.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
        };
        let of = |v: &[(&str, &str)], t: &Transport| tandem_protocols(&vars(v), t, &[], 2, BUFFERS);
        let tcp = of(&[], &Transport::Tcp);
        assert_eq!(tcp.limits, [65536.0]);
        assert_eq!(tcp.names, ["eager", "rendezvous"]);
        assert_eq!(tcp.copy_help, None);
        // No bound on a send call by default; one set is a bandwidth regime.
        assert!(tcp.bandwidth.iter().all(|b| b.name != "one send call"));
        let tcp = of(&[("TANDEM_TCP_SEND_CHUNK", "512k")], &Transport::Tcp);
        let chunk: Vec<(f64, &str)> = tcp
            .bandwidth
            .iter()
            .map(|b| (b.limit, b.name.as_str()))
            .collect();
        assert_eq!(chunk, [(524288.0, "one send call")]);
        // Over shared memory, from shm_copy_help_min (64 KiB) on two CPUs
        // copy what is read in place: rendezvous under shm_path_choice,
        // and single copy.
        let shm = of(&[], &Transport::Shm);
        assert_eq!(shm.limits, [16384.0, 65535.0, (64u64 << 20) as f64 - 1.0]);
        assert_eq!(
            shm.names,
            [
                "eager",
                "rendezvous",
                "rendezvous, copy help",
                "single copy, copy help"
            ]
        );
        assert_eq!(shm.copy_help, Some(65536.0));
        assert!(
            shm.source.contains("shm_eager_limit = 16 KiB")
                && shm.source.contains("as measured faster")
                && shm.source.contains("shm_single_copy_min = 64 MiB")
                && shm.source.contains("shm_copy_help_min = 64 KiB"),
            "{}",
            shm.source
        );
        let no_help = of(&[("TANDEM_SHM_COPY_HELP_MIN", "0")], &Transport::Shm);
        assert_eq!(no_help.names, ["eager", "rendezvous", "single copy"]);
        assert_eq!(no_help.copy_help, None);
        let cells = of(&[("TANDEM_SHM_EAGER_LIMIT", "64k")], &Transport::Shm);
        assert_eq!(
            cells.names,
            [
                "eager, one cell",
                "eager, across cells",
                "rendezvous, copy help",
                "single copy, copy help"
            ]
        );
        assert_eq!(cells.copy_help, Some(65537.0));
        let v = [
            ("TANDEM_EAGER_LIMIT", "16k"),
            ("TANDEM_SHM_SINGLE_COPY_MIN", "16k"),
        ];
        let low = of(&v, &Transport::Default);
        assert_eq!(low.limits, [16384.0, 65535.0]);
        assert_eq!(
            low.names,
            ["eager", "single copy", "single copy, copy help"]
        );
        let off = of(
            &[
                ("TANDEM_SHM_SINGLE_COPY", "0"),
                ("TANDEM_SHM_CELL_SIZE", "128k"),
            ],
            &Transport::Shm,
        );
        assert_eq!(off.names, ["eager", "rendezvous"]);
        assert_eq!(off.copy_help, None);
        // Through protocols_of: --set values win; other libraries have none.
        let p = protocols_of(
            Family::Tandem,
            &[("eager_limit".into(), "4k".into())],
            &Transport::Tcp,
            BUFFERS,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.limits, [4096.0]);
        assert!(protocols_of(Family::OpenMpi, &[], &Transport::Tcp, BUFFERS)
            .unwrap()
            .is_none());
    }

    #[test]
    fn copy_help_only_where_messages_are_read_in_place() {
        use tandem::params::Settings;
        let of = |v: &[(&str, &str)], cpus: usize| {
            let s =
                Settings::from_vars(v.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap();
            tandem_protocols(&s, &Transport::Shm, &[], cpus, BUFFERS)
        };
        // Rendezvous always through the rings below shm_single_copy_min:
        // only single copy is read in place, and helped from its start.
        let rings = of(
            &[
                ("TANDEM_SHM_PATH_CHOICE", "0"),
                ("TANDEM_SHM_SINGLE_COPY_MIN", "1m"),
            ],
            2,
        );
        assert_eq!(rings.limits, [16384.0, 1048575.0]);
        assert_eq!(
            rings.names,
            ["eager", "rendezvous", "single copy, copy help"]
        );
        assert_eq!(rings.copy_help, Some(1048576.0));
        // Copy help starting inside single copy splits it.
        let late = of(
            &[
                ("TANDEM_SHM_PATH_CHOICE", "0"),
                ("TANDEM_SHM_SINGLE_COPY_MIN", "1m"),
                ("TANDEM_SHM_COPY_HELP_MIN", "4m"),
            ],
            2,
        );
        assert_eq!(late.limits, [16384.0, 1048575.0, 4194303.0]);
        assert_eq!(
            late.names,
            [
                "eager",
                "rendezvous",
                "single copy",
                "single copy, copy help"
            ]
        );
        assert_eq!(late.copy_help, Some(4194304.0));
        // More ranks than CPUs: shm_eager_limit and shm_copy_help_min left
        // at their defaults give way, as the runtime lets them; set, they
        // hold.
        let one = of(&[], 1);
        assert_eq!(one.limits, [32704.0, 65536.0, (64u64 << 20) as f64 - 1.0]);
        assert_eq!(
            one.names,
            [
                "eager, one cell",
                "eager, across cells",
                "rendezvous",
                "single copy"
            ]
        );
        assert_eq!(one.copy_help, None);
        assert!(one.source.contains("gives way"), "{}", one.source);
        let set = of(
            &[
                ("TANDEM_SHM_EAGER_LIMIT", "16k"),
                ("TANDEM_SHM_COPY_HELP_MIN", "64k"),
            ],
            1,
        );
        assert_eq!(set.copy_help, Some(65536.0));
        assert_eq!(set.limits[0], 16384.0);
    }

    #[test]
    fn the_shared_heap_takes_the_rings_out_of_rendezvous() {
        use tandem::params::Settings;
        let of = |v: &[(&str, &str)], buffers: u64| {
            let s =
                Settings::from_vars(v.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap();
            tandem_protocols(&s, &Transport::Shm, &vm_levels(), 2, buffers)
        };
        let limits = |p: &Protocols| -> Vec<(String, f64)> {
            p.bandwidth
                .iter()
                .map(|b| (b.name.clone(), b.limit))
                .collect()
        };
        const MI: f64 = 1048576.0;
        // With the heap the rings carry eager messages (up to 16 KiB)
        // only: a rendezvous rank's working set is its buffers, 2m.
        let heap = of(&[("TANDEM_SHM_HEAP", "1")], BUFFERS);
        assert_eq!(
            limits(&heap),
            [
                ("L1d".to_string(), 4096.0),
                ("L2".to_string(), 131072.0),
                ("TLB".to_string(), 2.5 * MI),
                ("L3".to_string(), 4.0 * MI),
                ("all of L3".to_string(), 8.0 * MI),
            ]
        );
        assert!(heap.source.contains("shm_heap"), "{}", heap.source);
        assert!(
            heap.bandwidth[1]
                .why
                .contains("ring cells 2 min(m, 16 KiB) up to 16 KiB"),
            "{}",
            heap.bandwidth[1].why
        );
        // Without it, or with buffers too small for it (below shm_heap_min),
        // or with single copy off, every message passes the rings' cells.
        let rings = [
            ("L1d".to_string(), 4096.0),
            ("L2".to_string(), 65536.0),
            ("TLB".to_string(), 2.0 * MI),
            ("L3".to_string(), 3.5 * MI),
            ("all of L3".to_string(), 7.5 * MI),
        ];
        assert_eq!(limits(&of(&[("TANDEM_SHM_HEAP", "0")], BUFFERS)), rings);
        assert_eq!(limits(&of(&[("TANDEM_SHM_HEAP", "1")], 128 << 10)), rings);
        let no_copy = of(
            &[("TANDEM_SHM_HEAP", "1"), ("TANDEM_SHM_SINGLE_COPY", "0")],
            BUFFERS,
        );
        assert_eq!(limits(&no_copy), rings);
        assert!(!no_copy.source.contains("shm_heap"), "{}", no_copy.source);
    }

    /// The test VM's hierarchy: L1d 32 KiB and L2 512 KiB per core, L3
    /// 32 MiB shared by both cores, TLB reach 2560 pages of 4 KiB.
    fn vm_levels() -> Vec<MemoryLevel> {
        let lv = |name: &str, bytes: u64, cpus: usize| MemoryLevel {
            name: name.into(),
            bytes,
            cpus,
        };
        vec![
            lv("L1d", 32 << 10, 1),
            lv("L2", 512 << 10, 1),
            lv("L3", 32 << 20, 2),
            lv("TLB", 2560 * 4096, 1),
        ]
    }

    #[test]
    fn memory_limits_from_working_sets() {
        let limits = |staging: f64| -> Vec<(String, f64)> {
            memory_limits(&vm_levels(), staging, f64::INFINITY)
                .into_iter()
                .map(|b| (b.name, b.limit))
                .collect()
        };
        const MI: f64 = 1048576.0;
        // Shared memory, rings of 512 KiB: a rank's working set is
        // 2m + 2 min(m, 512 KiB), both ranks' in the shared L3, each
        // level counted full at half its size, and the last one left for
        // memory past all of it.
        assert_eq!(
            limits(512.0 * 1024.0),
            [
                ("L1d".to_string(), 4096.0),
                ("L2".to_string(), 65536.0),
                ("all of L3".to_string(), 7.5 * MI),
                ("L3".to_string(), 3.5 * MI),
                ("TLB".to_string(), 2.0 * MI),
            ]
        );
        // TCP: the buffers alone.
        assert_eq!(
            limits(0.0),
            [
                ("L1d".to_string(), 8192.0),
                ("L2".to_string(), 131072.0),
                ("all of L3".to_string(), 8.0 * MI),
                ("L3".to_string(), 4.0 * MI),
                ("TLB".to_string(), 2.5 * MI),
            ]
        );
        assert_eq!(bytes_of("512K\n"), Some(512 << 10));
        assert_eq!(bytes_of("32768K"), Some(32 << 20));
        assert_eq!(bytes_of("2M"), Some(2 << 20));
        assert_eq!(cpu_count("0-1\n"), 2);
        assert_eq!(cpu_count("0,2-3"), 3);
        assert_eq!(cpu_count("0"), 1);
    }

    /// Rendezvous over shared memory through the rings (no shared heap,
    /// no copy help) on the VM's limits: 1 us + m / 20 GB/s while the
    /// working set stays in the caches (up to 2 MiB), and the bytes past
    /// the L3's limit (half of it: 3.5 MiB) at 7 GB/s (4 and 8 MiB).
    fn cache_cliff() -> (Vec<(f64, f64)>, Protocols) {
        let settings = tandem::params::Settings::from_vars(
            [("TANDEM_SHM_HEAP", "0"), ("TANDEM_SHM_COPY_HELP_MIN", "0")]
                .map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .unwrap();
        let p = tandem_protocols(&settings, &Transport::Shm, &vm_levels(), 2, BUFFERS);
        let pts = (17..=23)
            .map(|k| {
                let m = (1u64 << k) as f64;
                (
                    m,
                    1e-6 + m.min(3.5 * MI) / 20e9 + (m - 3.5 * MI).max(0.0) / 7e9,
                )
            })
            .collect();
        (pts, p)
    }

    const MI: f64 = 1048576.0;

    #[test]
    fn a_message_past_the_caches_gets_its_own_bandwidth() {
        let (pts, p) = cache_cliff();
        let f = fit_hockney_protocols(&pts, &p).unwrap();
        let names: Vec<&str> = f.segments.iter().map(|s| s.regime.as_str()).collect();
        assert_eq!(
            names,
            ["rendezvous, past L2", "rendezvous, past L3"],
            "{f:?}"
        );
        assert!(f.max_error < 1e-6, "{f:?}");
        let (a, b) = (&f.segments[0], &f.segments[1]);
        assert_eq!(
            (a.from, a.to, b.from, b.to),
            (131072.0, 2097152.0, 4194304.0, 8388608.0)
        );
        // One latency for the protocol, a bandwidth per cell: that of the
        // bytes past the limit the cell starts at.
        assert!((a.l - 1e-6).abs() < 1e-12 && a.l == b.l, "{f:?}");
        assert!((a.b - 20e9).abs() / 20e9 < 1e-6 && (b.b - 7e9).abs() / 7e9 < 1e-6);
        assert_eq!((a.past, a.before), (0.0, 0.0));
        assert_eq!(b.past, 3.5 * MI);
        assert!((b.before - 3.5 * MI / 20e9).abs() < 1e-12, "{b:?}");
        let t8 = 1e-6 + 3.5 * MI / 20e9 + 4.5 * MI / 7e9;
        assert!((f.predict(8.0 * MI) - t8).abs() < 1e-12);
        assert!(a.r2 > 0.999999 && b.max_error < 1e-6 && b.sizes == 2);
        // LogGP's G comes from the protocol's line over most sizes.
        assert_eq!(long_messages(&f).unwrap().b, a.b);
        // Without the memory hierarchy, one line per protocol misses the
        // cliff by far more than the target.
        let plain = Protocols {
            bandwidth: vec![],
            ..p.clone()
        };
        let g = fit_hockney_protocols(&pts, &plain).unwrap();
        assert_eq!(g.segments.len(), 1);
        assert!(g.max_error > TARGET_ERROR, "{g:?}");
    }

    /// The shared heap's ping-pong on the VM's limits (TLB 2.5 MiB, half
    /// of the L3 4 MiB, all of it 8 MiB): 0.6 us + the bytes up to 4 MiB
    /// at 90 GB/s, those up to 8 MiB at 25 GB/s and the rest at 13 GB/s,
    /// each message's bytes taking the busier CPU's share of the copy.
    fn heap_spill() -> (Vec<(f64, f64)>, Protocols) {
        let settings = tandem::params::Settings::from_vars(
            [("TANDEM_SHM_HEAP", "1")].map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .unwrap();
        let p = tandem_protocols(&settings, &Transport::Shm, &vm_levels(), 2, BUFFERS);
        let bytes = |m: f64| {
            m.min(4.0 * MI) / 90e9
                + (m.min(8.0 * MI) - 4.0 * MI).max(0.0) / 25e9
                + (m - 8.0 * MI).max(0.0) / 13e9
        };
        let pts = pingpong_sizes(Some(&p), BUFFERS)
            .into_iter()
            .filter(|&m| m >= 64 << 10)
            .map(|m| {
                let m = m as f64;
                let share = tandem::p2p::copy_help_share(m as u64) as f64;
                (m, 0.6e-6 + bytes(m) * 2.0 * share / m)
            })
            .collect();
        (pts, p)
    }

    #[test]
    fn a_gradual_spill_past_the_l3_is_followed() {
        let (pts, p) = heap_spill();
        assert!(pts.iter().any(|q| q.0 == 3.0 * MI) && pts.iter().any(|q| q.0 == 12.0 * MI));
        let f = fit_hockney_protocols(&pts, &p).unwrap();
        assert!(f.max_error < 1e-6, "{f:?}");
        let lines: Vec<(&str, f64, f64)> = f
            .segments
            .iter()
            .map(|s| (s.regime.as_str(), s.past, (s.b / 1e9 * 1e3).round() / 1e3))
            .collect();
        assert_eq!(
            lines,
            [
                ("rendezvous, copy help, past L1d", 0.0, 90.0),
                ("rendezvous, copy help, past L3", 4.0 * MI, 25.0),
                ("rendezvous, copy help, past all of L3", 8.0 * MI, 13.0),
            ],
            "{f:?}"
        );
        // 3 MiB is four chunks of 768 KiB, two for each CPU: the same
        // line as the powers of two.
        let t3 = f.predict(3.0 * MI);
        assert!((t3 - (0.6e-6 + 3.0 * MI / 90e9)).abs() < 1e-12, "{t3}");
    }

    #[test]
    fn the_ping_pong_measures_what_the_model_needs() {
        use tandem::params::Settings;
        let powers: Vec<u64> = (0..=24).map(|k| 1 << k).collect();
        assert_eq!(pingpong_sizes(None, BUFFERS), powers);
        let of = |v: &[(&str, &str)], t: &Transport| {
            let s =
                Settings::from_vars(v.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap();
            tandem_protocols(&s, t, &vm_levels(), 2, BUFFERS)
        };
        let extra = |p: &Protocols| -> Vec<u64> {
            pingpong_sizes(Some(p), BUFFERS)
                .into_iter()
                .filter(|m| !m.is_power_of_two())
                .collect()
        };
        const K: u64 = 1024;
        const M: u64 = 1024 * 1024;
        // Shared memory with the heap: rendezvous read by one CPU (16 to
        // 64 KiB) had one size, and the cells from the TLB's limit up one
        // each.
        let heap = of(&[("TANDEM_SHM_HEAP", "1")], &Transport::Shm);
        assert_eq!(extra(&heap), [24 * K, 48 * K, 3 * M, 6 * M, 12 * M]);
        // Without it the rings' cells move the limits: the cell from the
        // TLB's 2 MiB to 3.5 MiB had no size, the one up to 7.5 MiB one (4
        // MiB), the next two (8 and 16 MiB).
        let rings = of(&[("TANDEM_SHM_HEAP", "0")], &Transport::Shm);
        assert_eq!(extra(&rings), [24 * K, 48 * K, 3 * M, 6 * M]);
        let tcp = of(&[], &Transport::Tcp);
        assert_eq!(extra(&tcp), [96 * K, 3 * M, 6 * M, 12 * M]);
    }

    #[test]
    fn noise_does_not_buy_a_bandwidth() {
        // One line with +-4% alternating noise across the L3 limit: the
        // cell past it would fit its two sizes a little better, not by
        // enough to pay for its parameter.
        let (_, p) = cache_cliff();
        let pts: Vec<(f64, f64)> = (17..=23)
            .map(|k| {
                let m = (1u64 << k) as f64;
                (m, (1e-6 + m / 20e9) * if k % 2 == 0 { 1.04 } else { 0.96 })
            })
            .collect();
        let f = fit_hockney_protocols(&pts, &p).unwrap();
        assert_eq!(f.segments.len(), 1, "{f:?}");
        assert_eq!(f.segments[0].regime, "rendezvous");
        assert!(f.max_error < 0.06, "{f:?}");
    }

    #[test]
    fn models_fit_the_fastest_repetitions_and_unsteady_medians_are_named() {
        // Ping-pong one-way times in microseconds: fastest repetitions on
        // the line 5 + m/1000; the 16 B median 40% above its fastest.
        let row = |m: f64, us: f64, spread: f64| analyze::Row {
            keys: vec![],
            group: String::new(),
            x: m,
            values: vec![Some(super::super::stats::Summary {
                n: 10,
                median: us * (1.0 + spread),
                lo: us,
                hi: us * (1.0 + 2.0 * spread),
                min: us,
                max: us * (1.0 + 2.0 * spread),
                mean: us * (1.0 + spread),
            })],
        };
        let table = Table {
            kernel: "pingpong".into(),
            key_names: vec![],
            x_label: String::new(),
            x_log: true,
            metrics: vec![],
            rows: vec![
                row(1.0, 5.001, 0.05),
                row(16.0, 5.016, 0.4),
                row(256.0, 5.256, 0.1),
                row(4096.0, 9.096, 0.05),
            ],
        };
        let r = fit("tandem", None, Some(&table), None, None, None);
        assert_eq!(r.unsteady_sizes, [16.0]);
        let h = r.hockney.as_ref().unwrap();
        assert!(h.max_error < 1e-6, "{h:?}");
        assert!((r.pingpong[1].median - 5.016e-6 * 1.4).abs() < 1e-12);
        assert!(
            text(&r).contains("more than 15% above the fastest repetition at 1 of 4 sizes"),
            "{}",
            text(&r)
        );
        // The report's parameter table: the line's latency and bandwidth
        // with units, the whole model's errors.
        let tables = parameter_tables(&r);
        let one = tables.iter().find(|t| t.model == "Hockney").unwrap();
        let params = &one.parts[0].params;
        assert_eq!(params[0].0, "latency \u{3b1}");
        assert!(
            params[0].1.starts_with('5') && params[0].1.ends_with(" \u{b5}s"),
            "{params:?}"
        );
        assert_eq!(params[1].0, "bandwidth 1/\u{3b2}");
        assert!(
            params[1].1.starts_with("1000") && params[1].1.ends_with(" MB/s"),
            "{params:?}"
        );
        assert_eq!(one.parts[0].sizes, "1 B \u{2013} 4 KiB");
        assert!(one.max_error < 1e-6);
        assert_eq!(tables.iter().filter(|t| t.best).count(), 1);
        // The error plot: the measured times as the zero line, then each
        // model in the order (and so the colours) of the time plot.
        let (times, errors) = (plot_of(&r), error_plot_of(&r));
        assert_eq!(times.series.len(), errors.series.len());
        assert!(errors.series[0].points.iter().all(|p| p.1 == 0.0));
        assert!(errors.series[1].points.iter().all(|p| p.1.abs() < 1e-3));
        assert!(!errors.log_y && errors.log_x == times.log_x);
    }

    #[test]
    fn shared_latency_is_exact() {
        // 3 + 2 per byte up to 4.5 bytes, 0.5 per byte past them.
        let t = |m: f64| 3.0 + 2.0 * m.min(4.5) + 0.5 * (m - 4.5).max(0.0);
        let a: Vec<(f64, f64)> = (1..5).map(|k| (k as f64, t(k as f64))).collect();
        let b: Vec<(f64, f64)> = (5..9).map(|k| (k as f64, t(k as f64))).collect();
        let ones = [vec![1.0; 4], vec![1.0; 4]];
        let starts = [0.0, 4.5];
        let (l, xs) = fit_shared_latency(&[&a, &b], &starts, None, &ones).unwrap();
        assert!((l - 3.0).abs() < 1e-9 && (xs[0] - 2.0).abs() < 1e-9 && (xs[1] - 0.5).abs() < 1e-9);
        let (l, xs) = fit_shared_latency_minimax(&[&a, &b], &starts, None).unwrap();
        assert!((l - 3.0).abs() < 1e-9 && (xs[0] - 2.0).abs() < 1e-9 && (xs[1] - 0.5).abs() < 1e-9);
        assert!((blocks_time(l, &xs, &starts, None, 8.0) - t(8.0)).abs() < 1e-9);
    }

    #[test]
    fn minimax_line_halves_the_worst_error() {
        // A line with one size 20% slow: least relative squares spreads the
        // outlier thinly and leaves it ~16% off; the minimax line meets it
        // and the others halfway, about 9.5% each way, and no worse.
        let mut pts: Vec<(f64, f64)> = (0..12)
            .map(|k| {
                let m = (1u64 << (2 * k)) as f64;
                (m, 1e-6 + m * 1e-10)
            })
            .collect();
        pts[3].1 *= 1.2;
        let ones = [vec![1.0; pts.len()]];
        let (l, xs) = fit_shared_latency(&[&pts], &[0.0], None, &ones).unwrap();
        let worst = |l: f64, x: f64| max_relative_error(pts.iter().map(|&(m, t)| (l + m * x, t)));
        let squares = worst(l, xs[0]);
        let (lm, xm) = fit_shared_latency_minimax(&[&pts], &[0.0], None).unwrap();
        let minimax = worst(lm, xm[0]);
        assert!(squares > 0.14, "{squares}");
        assert!(minimax < 0.1 && minimax < squares, "{minimax} {squares}");
        // Through fit_segment too.
        let seg = fit_segment(&pts, "all").unwrap();
        assert!((seg.max_error - minimax).abs() < 1e-9);
    }

    #[test]
    fn loggp_from_overheads_and_burst() {
        // T = o_s + (m-1)G + L + o_r with o_s = 2, o_r = 3, L = 4 us, G = 0.5 ns/B.
        let pp: Vec<(f64, f64)> = (0..10)
            .map(|k| {
                let m = (1u64 << (2 * k)) as f64;
                (m, 9e-6 + (m - 1.0) * 0.5e-9)
            })
            .collect();
        let burst: Vec<(f64, f64)> = pp.iter().map(|&(m, _)| (m, 1e-6 + m * 0.5e-9)).collect();
        let large = fit_hockney(&pp).unwrap().segments[0].clone();
        let (l, bg, scaled) = fit_loggp(&pp, &large, &burst, 2e-6, 3e-6).unwrap();
        assert!(!scaled);
        assert!((l.l - 4e-6).abs() < 1e-10, "{}", l.l);
        assert!((l.big_g - 0.5e-9).abs() < 1e-13);
        assert!((bg.unwrap() - 0.5e-9).abs() < 1e-13);
        assert!((l.g - (1e-6 + 0.5e-9)).abs() < 1e-12);
        assert!(l.max_error < 1e-6);
        // Overheads larger than the one-way time are scaled to fit, L = 0.
        let (l, _, scaled) = fit_loggp(&pp, &large, &burst, 6e-6, 12e-6).unwrap();
        assert!(scaled);
        assert_eq!(l.l, 0.0);
        assert!((l.o_s + l.o_r - 9e-6).abs() < 1e-12);
        assert!((l.o_r / l.o_s - 2.0).abs() < 1e-9);
    }

    #[test]
    fn three_lines_when_two_do_not_fit() {
        // Three regimes: inline up to 1 KiB, copy up to 64 KiB, zero-copy above.
        let pts: Vec<(f64, f64)> = (0..=22)
            .map(|k| {
                let m = (1u64 << k) as f64;
                let t = if m <= 1024.0 {
                    5e-6 + m * 0.1e-9
                } else if m <= 65536.0 {
                    9e-6 + m * 1e-9
                } else {
                    40e-6 + m * 0.25e-9
                };
                (m, t)
            })
            .collect();
        let three = fit_hockney_k(&pts, 3).unwrap();
        assert!(three.max_error < 1e-6, "{}", three.max_error);
        assert_eq!(three.segments[0].to, 1024.0);
        assert_eq!(three.segments[1].to, 65536.0);
        let pw = fit_hockney_piecewise(&pts).unwrap();
        assert_eq!(pw.segments.len(), 3);
        // Too few points for three lines of three.
        assert!(fit_hockney_k(&pts[..8], 3).is_none());
    }

    #[test]
    fn collective_predictions() {
        let h = fit_hockney(&[(0.0, 10e-6), (1e6, 10e-6 + 1e-3)]).unwrap();
        // 8 ranks, 1 MB: linear bcast 7 * 1010 us, tree 3 * 1010 us, + barrier 3 * 10 us.
        let (lin, tree) = predict_coll(&h, "bcast", 8, 1e6).unwrap();
        assert!((lin - (7.0 * 1010e-6 + 30e-6)).abs() < 1e-9);
        assert!((tree - (3.0 * 1010e-6 + 30e-6)).abs() < 1e-9);
        // Scatter tree: 3 latencies + 7 MB of data.
        let (_, tree) = predict_coll(&h, "scatter", 8, 1e6).unwrap();
        assert!((tree - (30e-6 + 7e-3 + 30e-6)).abs() < 1e-9);
        assert!(predict_coll(&h, "allreduce", 8, 1e6).is_none());
        assert_eq!(parse_size_text("64 KiB"), Some(65536));
        assert_eq!(parse_size_text("3 B"), Some(3));
    }
}

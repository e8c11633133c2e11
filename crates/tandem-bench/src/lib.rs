//! `tandem bench`: the measurement methods of the source papers as C
//! kernels (bench/*.c, plain MPI), built with any MPI's compiler wrapper,
//! launched with its launcher, and summarised with medians and confidence
//! intervals; comparisons between libraries, model fits and a report.

pub mod analyze;
pub mod build;
pub mod core_latency;
pub mod kernels;
pub mod model;
pub mod mpi;
pub mod netns;
pub mod output;
pub mod overhead;
pub mod plot;
pub mod progress;
pub mod raster;
pub mod report;
pub mod run;
pub mod stats;
pub mod summary;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

use analyze::Table;
use kernels::{Kernel, Replication};
use mpi::{Family, Library, Placement, Transport};
use output::Machine;
use run::RunOutput;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Round trip between ranks 0 and 1, fixed duration per size (Ben Fredj and Renault)
    Pingpong(KernelArgs),
    /// Bidirectional round trip: both ranks send at once (Ben Fredj and Renault)
    Bidir(KernelArgs),
    /// Burst: rank 0 sends as fast as it can (Ben Fredj and Renault)
    Burst(KernelArgs),
    /// MPI_Isend / MPI_Irecv overhead and availability, post-work-wait (Doerfler and Brightwell)
    Overhead(KernelArgs),
    /// Collectives by barrier-start-op-barrier-end over rank counts (Noor et al.)
    Coll(KernelArgs),
    /// The Isend/Irecv/Waitall all-to-all of Gabriel's VolpexMPI case study
    Alltoallv(KernelArgs),
    /// Cannon's matrix multiplication with overlapped shifts (Kumar et al.)
    Cannon(KernelArgs),
    /// Time to solution of a checked all-to-all computation: unreplicated,
    /// replicated, and losing a replica halfway (the VolpexMPI report)
    Tts(KernelArgs),
    /// Run one kernel on several MPI libraries, interleaved, with ratios
    Compare(CompareArgs),
    /// Fit Hockney and LogGP to ping-pong, burst and overhead; predict collectives
    Model(ModelArgs),
    /// The quick suite as one self-contained HTML page
    Report(report::ReportArgs),
    /// List the kernels and their parameters
    List,
}

/// Options shared by every kernel run.
#[derive(Args, Debug, Clone)]
pub struct KernelArgs {
    /// Ranks (default: the kernel's, 2 or 4)
    #[arg(long = "np", short = 'n', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub np: Option<u32>,
    /// MPI library: tandem, openmpi, mpich or the path of an MPI C compiler wrapper
    /// (compare: a comma-separated list, first is the reference)
    #[arg(long, value_name = "MPI")]
    pub mpi: Option<String>,
    /// A kernel parameter (see `tandem bench list`), or else a library
    /// parameter (Tandem: `tandem run --set`, Open MPI: --mca, MPICH:
    /// environment); LIB:NAME=VALUE gives it to one library only
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Message sizes: MIN:MAX (powers of 2), MIN:MAX:FACTOR, or a comma list (k, m suffixes)
    #[arg(long, value_name = "SPEC")]
    pub sizes: Option<String>,
    /// Seconds per timed batch (pingpong, bidir, burst)
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Timed repetitions per point
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub repeat: Option<u32>,
    /// Transport to force: tcp (default: what Tandem has today), shm, or default (each library's own choice)
    #[arg(long, value_name = "T", default_value = "tcp")]
    pub transport: String,
    /// Write every measurement, the machine and the versions as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the table as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the main metric as a plot, SVG or PNG by the file's extension
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    pub plot: Option<PathBuf>,
    /// Stop a launch that runs longer than this many seconds
    #[arg(long, value_name = "S", default_value_t = 1800.0)]
    pub timeout: f64,
    /// Run across hosts: netns:K makes K network namespaces joined by a
    /// bridge (needs root; removed afterwards, also on failure or Ctrl-C)
    /// and spreads the ranks over them, talking TCP (Tandem and Open MPI)
    #[arg(long, value_name = "netns:K")]
    pub hosts: Option<String>,
    /// With --hosts netns:K: limit every host's link to this rate with a
    /// token bucket (tc tbf), e.g. 1gbit for the papers' Gigabit Ethernet
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Run Tandem with replicated ranks: R processes per rank (`tandem run
    /// --replicas R`), or a list such as 1,2 to measure unreplicated and
    /// replicated in the same run, launches interleaved as compare does; the
    /// replicated runs are the libraries tandem-r2, ... (tts adds
    /// tandem-r2-kill, which loses one replica halfway; tts's default: 1,2)
    #[arg(long, value_name = "R[,R...]")]
    pub replicas: Option<String>,
}

/// Launches per library of a comparison (also of a kernel run with
/// several replica counts).
pub const DEFAULT_ROUNDS: u32 = 5;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The kernel: pingpong, bidir, burst, overhead, coll, alltoallv, cannon, tts
    #[arg(value_name = "KERNEL")]
    pub kernel: String,
    #[command(flatten)]
    pub common: KernelArgs,
    /// Launches per library, alternating between libraries (the repetitions are split among them);
    /// ratios are paired within rounds, leaving out rounds in which the machine changed state
    /// (cache-line probes around the launches more than 1.5x apart) while most rounds did not
    #[arg(long, value_name = "K", default_value_t = DEFAULT_ROUNDS)]
    pub rounds: u32,
    /// Launch rwapi and tandem apart (by default, compared on a kernel with an RWAPI variant, they
    /// run in the same launches, their batches alternating, which launch-to-launch noise cannot
    /// tell apart)
    #[arg(long)]
    pub separate_launches: bool,
}

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// MPI library to model
    #[arg(long, default_value = "tandem")]
    pub mpi: String,
    /// Use these `--json` outputs of pingpong, burst, overhead and coll (or a `bench report` results.json, its sections over --transport) instead of measuring
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// Ranks for the collective measurements (0: skip them)
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub coll_np: u32,
    /// Seconds per timed batch of ping-pong and burst (many short batches
    /// sample a virtual machine's changing speed better than a few long
    /// ones, so the fastest of each size comes from the same state)
    #[arg(long, value_name = "S", default_value_t = 0.015)]
    pub duration: f64,
    /// Repetitions per point
    #[arg(long, value_name = "R", default_value_t = 20)]
    pub repeat: u32,
    /// Library parameters, as for the kernels
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Transport to force (tcp, shm, default)
    #[arg(long, default_value = "tcp")]
    pub transport: String,
    /// Write the measurements and the fits as JSON
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw measured and predicted ping-pong times as a plot (.svg or .png)
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    pub plot: Option<PathBuf>,
}

/// Everything needed to run one kernel on one or more libraries.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub kernel: &'static Kernel,
    pub libs: Vec<Library>,
    pub np: u32,
    /// For coll: one launch per rank count (each its own job).
    pub np_list: Vec<u32>,
    /// Kernel parameters (NAME -> VALUE), sizes already expanded.
    pub params: BTreeMap<String, String>,
    /// Library parameters: (library name or "" for all, NAME, VALUE).
    pub lib_set: Vec<(String, String, String)>,
    pub transport: Transport,
    /// Launches per library (interleaved); the repetitions are split.
    pub rounds: u32,
    pub timeout: Duration,
    pub progress: bool,
    /// Ranks on other hosts (`--hosts`).
    pub placement: Option<Placement>,
    /// Launch `rwapi` and `tandem` apart even where they could share
    /// launches (see [`RunSpec::shared_pair`]).
    pub separate_launches: bool,
    /// What the run leaves out or changes, for its output (replicated
    /// variants skipped, ...).
    pub notes: Vec<String>,
    /// Another MPI library's launch that does not finish within this (or
    /// fails) leaves that library out of the run, with a note, instead of
    /// failing it: the report goes on with what works. `None`: every
    /// launch has `timeout`, and any failure fails the run.
    pub other_library_timeout: Option<Duration>,
}

impl RunSpec {
    /// The libraries `rwapi` and `tandem` (their indices), when both are
    /// compared on a kernel with an RWAPI variant and no parameter is given
    /// to one of them alone: they are then measured in the same launches,
    /// the RWAPI kernel timing MPI's body too, batch for batch. Launches
    /// differ (process placement, the library's physical pages) by more
    /// than what separates two APIs of one library over TCP, so pairing
    /// within a launch is what tells them apart.
    pub fn shared_pair(&self) -> Option<(usize, usize)> {
        if self.separate_launches || self.kernel.rwapi.is_none() {
            return None;
        }
        let find = |name: &str| {
            self.libs
                .iter()
                .position(|l| l.name == name && l.family == Family::Tandem)
        };
        let (rw, mpi) = (find("rwapi")?, find("tandem")?);
        let alone = |name: &str| self.lib_set.iter().any(|(l, _, _)| l == name);
        (!alone("rwapi") && !alone("tandem")).then_some((rw, mpi))
    }
}

/// Splits the output of a launch that timed both APIs (`with=mpi`) into
/// the RWAPI kernel's and MPI's, as if each had been launched alone:
/// samples go by their "api" (which is dropped), other records stay with
/// the RWAPI launch.
fn split_shared(out: RunOutput, mpi_name: &str) -> (RunOutput, RunOutput) {
    let mut rw = out;
    rw.shared_with = Some(mpi_name.to_string());
    let mut mpi = RunOutput {
        mpi: mpi_name.to_string(),
        records: Vec::new(),
        shared_with: Some(rw.mpi.clone()),
        ..rw.clone()
    };
    let records = std::mem::take(&mut rw.records);
    for mut rec in records {
        let api = rec
            .as_object_mut()
            .and_then(|o| o.remove("api"))
            .and_then(|a| a.as_str().map(str::to_string));
        match api.as_deref() {
            Some("mpi") => mpi.records.push(rec),
            _ => rw.records.push(rec),
        }
    }
    (rw, mpi)
}

/// The outcome of a RunSpec: per library the runs and the table.
#[derive(Clone, Debug, Serialize)]
pub struct KernelResult {
    /// Format version of this document.
    pub tandem_bench: u32,
    pub kernel: String,
    pub machine: Machine,
    pub np: u32,
    pub transport: String,
    /// The hosts the ranks ran on, when not this machine alone.
    pub hosts: Option<String>,
    pub params: BTreeMap<String, String>,
    pub library_params: Vec<(String, String, String)>,
    pub runs: Vec<RunOutput>,
    /// (library, table) in the order of the libraries.
    pub tables: Vec<(String, Table)>,
    /// The two libraries measured in the same launches (see
    /// [`RunSpec::shared_pair`]), if any.
    pub shared_launches: Option<(String, String)>,
    /// What the run left out or changed (see [`RunSpec::notes`]), and how
    /// the replicated configurations ran.
    pub notes: Vec<String>,
}

impl KernelResult {
    pub fn table_refs(&self) -> Vec<(String, &Table)> {
        self.tables.iter().map(|(l, t)| (l.clone(), t)).collect()
    }

    /// The cache-line round trips probed around the launches, ns.
    pub fn core_probes(&self) -> Vec<f64> {
        self.runs
            .iter()
            .flat_map(|r| r.core_round_trip_ns.iter().copied())
            .collect()
    }

    /// "core-to-core round trip 95-102 ns" over the probes, if any.
    pub fn core_probes_text(&self) -> Option<String> {
        core_latency::range_text(&self.core_probes())
    }

    /// Library name -> version line, from the runs.
    pub fn versions(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = Vec::new();
        for r in &self.runs {
            if !v.iter().any(|(l, _)| *l == r.mpi) {
                v.push((r.mpi.clone(), r.library_version.clone()));
            }
        }
        v
    }
}

/// Splits --set words into kernel parameters and library parameters.
pub fn split_set(
    kernel: &Kernel,
    set: &[String],
    libs: &[Library],
    params: &mut BTreeMap<String, String>,
) -> Result<Vec<(String, String, String)>, String> {
    let mut lib_set = Vec::new();
    for word in set {
        let (name, value) = word
            .split_once('=')
            .filter(|(n, _)| !n.is_empty())
            .ok_or_else(|| format!("--set {word}: expected NAME=VALUE"))?;
        if let Some((lib, pname)) = name.split_once(':') {
            if !libs.iter().any(|l| l.name == lib) {
                return Err(format!(
                    "--set {word}: '{lib}' is not one of the libraries of this run ({})",
                    libs.iter()
                        .map(|l| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            lib_set.push((lib.to_string(), pname.to_string(), value.to_string()));
        } else if kernel.has_param(name) {
            if name == "sizes" {
                let sizes = kernels::parse_sizes(value)?;
                params.insert(name.into(), join_sizes(&sizes));
            } else {
                params.insert(name.to_string(), value.to_string());
            }
        } else {
            lib_set.push((String::new(), name.to_string(), value.to_string()));
        }
    }
    Ok(lib_set)
}

fn join_sizes(sizes: &[u64]) -> String {
    sizes
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `--replicas`: a replica count or a comma list of them, each from
/// 1 to the largest the replication layer (and so the launcher) takes,
/// repeats dropped.
pub fn parse_replicas(text: &str) -> Result<Vec<u32>, String> {
    let max = tandem::replica::MAX_REPLICAS;
    let mut out: Vec<u32> = Vec::new();
    for w in text.split(',') {
        let r = w
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|r| (1..=max).contains(r))
            .ok_or_else(|| {
                format!("--replicas {text}: expected replica counts from 1 to {max}, e.g. 2 or 1,2")
            })?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

/// The libraries to run with replica counts `replicas`: each Tandem
/// library once per count, `tandem` for 1 and `tandem-rR` for R > 1 (and
/// `tandem-rR-kill` after it for a time-to-solution kernel), in the order
/// of the libraries, then of the counts. Replicated jobs refuse RWAPI and
/// one-sided communication, and a kernel whose messages depend on the
/// clock would make the replicas of a rank diverge: `rwapi`, kernels that
/// use windows and kernels of [`Replication::Refused`] keep their
/// unreplicated run (when 1 is listed) and a note says what was skipped
/// and why; other MPI libraries run unreplicated, also with a note.
pub fn with_replicas(
    kernel: &Kernel,
    libs: &[Library],
    replicas: &[u32],
) -> Result<(Vec<Library>, Vec<String>), String> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let unreplicated = replicas.contains(&1);
    let counts: Vec<u32> = replicas.iter().copied().filter(|&r| r > 1).collect();
    let names = |base: &str| {
        counts
            .iter()
            .map(|r| format!("{base}-r{r}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for lib in libs {
        let refused = if lib.family != Family::Tandem {
            if !counts.is_empty() {
                notes.push(format!(
                    "{} runs unreplicated: --replicas is Tandem's",
                    lib.name
                ));
            }
            out.push(lib.clone());
            continue;
        } else if lib.name == "rwapi" {
            Some("replicated jobs refuse RWAPI (rwapi_init fails: a remote write is a request and an answer between two processes, which another replica cannot replay)")
        } else if kernel.uses_one_sided() {
            Some("replicated jobs refuse one-sided communication (window creation fails with MPI_ERR_UNSUPPORTED_OPERATION)")
        } else if let Replication::Refused(why) = kernel.replication {
            Some(why)
        } else {
            None
        };
        if let Some(why) = refused {
            if !counts.is_empty() {
                notes.push(format!(
                    "{} skipped for {}: {why}",
                    names(&lib.name),
                    kernel.name
                ));
            }
            if unreplicated {
                out.push(lib.clone());
            }
            continue;
        }
        for &r in replicas {
            if r == 1 {
                out.push(lib.clone());
                continue;
            }
            out.push(lib.replicated(r, false));
            if kernel.time_to_solution {
                out.push(lib.replicated(r, true));
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "--replicas {}: nothing left to run ({})",
            replicas
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            notes.join("; ")
        ));
    }
    Ok((out, notes))
}

/// The iteration counts a launch of a pair kernel ran, one per size of
/// `sizes` (comma list); None if a size has no sample.
fn iterations_of(records: &[Value], sizes: &str) -> Option<Vec<u64>> {
    sizes
        .split(',')
        .map(|s| {
            let size: u64 = s.trim().parse().ok()?;
            records
                .iter()
                .find(|r| r["type"] == "sample" && r["size"].as_u64() == Some(size))
                .and_then(|r| r["iters"].as_u64())
        })
        .collect()
}

/// The kernel's `iters` parameter from the counts of several launches:
/// per size the median (of two, the larger), so that a launch that
/// calibrated in a slow moment (few iterations) does not set them.
fn median_iterations(launches: &[Vec<u64>]) -> Option<String> {
    let first = launches.first()?;
    let counts: Vec<String> = (0..first.len())
        .map(|k| {
            let mut v: Vec<u64> = launches.iter().filter_map(|l| l.get(k).copied()).collect();
            v.sort_unstable();
            v[v.len() / 2].to_string()
        })
        .collect();
    Some(counts.join(","))
}

/// The process a `-kill` configuration loses and the step at which (the
/// solve's middle): the last process, replica R-1 of rank N-1, so the
/// leaders of every rank and the output of rank 0 stay.
pub fn kill_plan(
    lib: &Library,
    np: u32,
    params: &BTreeMap<String, String>,
) -> Option<(u32, u64, u64)> {
    if !lib.kill_halfway || lib.replicas < 2 {
        return None;
    }
    let steps = params
        .get("steps")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(kernels::TTS_STEPS);
    Some((np * lib.replicas - 1, steps / 2, steps))
}

/// Builds a RunSpec from command-line options.
pub fn spec_from_args(
    kernel: &'static Kernel,
    a: &KernelArgs,
    default_mpi: &str,
    rounds: u32,
) -> Result<RunSpec, String> {
    let mut notes = Vec::new();
    let mut default_mpi = default_mpi.to_string();
    if a.mpi.is_none() && kernel.time_to_solution {
        // The experiment sets Open MPI beside Tandem where it is installed.
        match mpi::resolve("openmpi") {
            Ok(_) => default_mpi = "tandem,openmpi".into(),
            Err(e) => {
                default_mpi = "tandem".into();
                notes.push(format!("measuring Tandem alone: {e}"));
            }
        }
    }
    let libs = a
        .mpi
        .as_deref()
        .unwrap_or(&default_mpi)
        .split(',')
        .map(|s| mpi::resolve(s.trim()))
        .collect::<Result<Vec<Library>, String>>()?;
    let replicas = match (&a.replicas, kernel.time_to_solution) {
        (Some(r), _) => Some(parse_replicas(r)?),
        (None, true) => Some(vec![1, 2]),
        (None, false) => None,
    };
    let libs = match &replicas {
        Some(r) => {
            let (libs, more) = with_replicas(kernel, &libs, r)?;
            notes.extend(more);
            libs
        }
        None => libs,
    };
    let np = a.np.unwrap_or(kernel.default_np);
    kernel.check_np(np)?;
    let mut params = BTreeMap::new();
    if let Some(s) = kernel.default_sizes {
        params.insert("sizes".to_string(), join_sizes(&kernels::parse_sizes(s)?));
    }
    if let Some(spec) = &a.sizes {
        if !kernel.has_param("sizes") {
            return Err(format!("{} takes no message sizes", kernel.name));
        }
        params.insert(
            "sizes".to_string(),
            join_sizes(&kernels::parse_sizes(spec)?),
        );
    }
    if let Some(d) = a.duration {
        if !kernel.takes_duration {
            return Err(format!(
                "{} does not run for a fixed duration; use --repeat (or --set) instead",
                kernel.name
            ));
        }
        if !(d.is_finite() && d > 0.0 && d <= 3600.0) {
            return Err(format!(
                "--duration {d}: expected seconds between 0 and 3600"
            ));
        }
        params.insert("duration".into(), d.to_string());
    }
    if let Some(r) = a.repeat {
        params.insert("repeat".into(), r.to_string());
    }
    let mut lib_set = split_set(kernel, &a.set, &libs, &mut params)?;
    if kernel.time_to_solution {
        let sizes = params.get("sizes").map_or(0, |s| s.split(',').count());
        if sizes != 1 {
            return Err(format!(
                "{} solves one problem: give one size (--sizes 32k), not {sizes}",
                kernel.name
            ));
        }
    }
    if let Some(name) = params.keys().find(|k| kernel.is_rwapi_param(k)) {
        if !libs.iter().any(|l| l.name == "rwapi") {
            return Err(format!(
                "--set {name}: a parameter of {}'s RWAPI variant, which runs as the library rwapi \
                 (e.g. --mpi rwapi or --mpi rwapi,tandem)",
                kernel.name
            ));
        }
    }
    // `--set transports=X` means the same as `--transport X`.
    let mut transport = Transport::parse(&a.transport);
    if let Some(i) = lib_set
        .iter()
        .position(|(l, k, _)| l.is_empty() && k == "transports")
    {
        transport = Transport::parse(&lib_set.remove(i).2);
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0) {
        return Err("--timeout: expected a positive number of seconds".into());
    }
    let np_list = node_counts(kernel, np, &mut params)?;
    let rounds = if kernel.time_to_solution {
        // One solve per launch: a lost replica stays lost for the rest of
        // its launch.
        params
            .get("repeat")
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| default_repeat(kernel))
    } else {
        rounds
    };
    Ok(RunSpec {
        kernel,
        libs,
        np,
        np_list,
        params,
        lib_set,
        transport,
        rounds: rounds.max(1),
        timeout: Duration::from_secs_f64(a.timeout),
        progress: true,
        placement: None,
        separate_launches: false,
        notes,
        other_library_timeout: None,
    })
}

/// For coll, the rank counts (taken out of the kernel parameters): the
/// `nodes` list, default 2..=np. Other kernels: none.
pub fn node_counts(
    kernel: &Kernel,
    np: u32,
    params: &mut BTreeMap<String, String>,
) -> Result<Vec<u32>, String> {
    if kernel.name != "coll" {
        return Ok(Vec::new());
    }
    match params.remove("nodes") {
        None => Ok((2..=np.max(2)).collect()),
        Some(list) => list
            .split(',')
            .map(|w| {
                w.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (2..=1024).contains(n))
                    .ok_or_else(|| format!("nodes={list}: expected rank counts from 2 to 1024"))
            })
            .collect(),
    }
}

/// The repetitions a kernel does by default (for splitting among rounds).
fn default_repeat(kernel: &Kernel) -> u32 {
    match kernel.name {
        "overhead" | "cannon" | "tts" => 5,
        "coll" => 20,
        _ => 10,
    }
}

/// The order the libraries launch in, in round `round`: reversed every
/// other round, because the library launched first in a round was
/// measured slower than when launched second (RWAPI against MPI over TCP:
/// 5-14% at 8 B to 32 KiB), and a comparison must not depend on the order
/// the libraries were named in.
fn launch_order(round: u32, libs: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..libs).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// How many launches [`run_spec`] makes of `spec` (not counting the
/// untimed calibration launches of replicated runs).
pub fn planned_launches(spec: &RunSpec) -> u64 {
    let repeat: u32 = spec
        .params
        .get("repeat")
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| default_repeat(spec.kernel));
    let rounds = spec.rounds.min(repeat).max(1);
    let libs = spec.libs.len() - usize::from(spec.shared_pair().is_some());
    let nps = spec.np_list.len().max(1);
    u64::from(rounds) * libs as u64 * nps as u64
}

/// Builds and runs a spec: every library `rounds` times, interleaved, in
/// alternating order.
pub fn run_spec(spec: &RunSpec) -> Result<KernelResult, String> {
    let shared = spec.shared_pair();
    let mut exes = Vec::new();
    for (i, lib) in spec.libs.iter().enumerate() {
        if shared.is_some_and(|(_, mpi)| mpi == i) {
            // Timed inside the RWAPI kernel's launches.
            exes.push(PathBuf::new());
            continue;
        }
        let exe = build::build(spec.kernel, lib).map_err(|e| e.to_string())?;
        exes.push(exe);
    }
    let repeat: u32 = spec
        .params
        .get("repeat")
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| default_repeat(spec.kernel));
    let rounds = spec.rounds.min(repeat).max(1);
    let mut runs = Vec::new();
    let mut pooled: Vec<Vec<Value>> = vec![Vec::new(); spec.libs.len()];
    // Other libraries left out after a failed launch (other_library_timeout).
    let mut dropped: Vec<Option<String>> = vec![None; spec.libs.len()];
    // Per unreplicated library, the iteration counts of its launches so
    // far, for the replicated launches of a kernel calibrated by the clock.
    let mut calibrated: BTreeMap<String, Vec<Vec<u64>>> = BTreeMap::new();
    let fixed_iterations = spec.kernel.replication == Replication::FixedIterations
        && !spec.params.contains_key("iters");
    for round in 0..rounds {
        // Spread the repetitions: the first rounds take the remainder.
        let share = repeat / rounds + u32::from(round < repeat % rounds);
        let nps = if spec.np_list.is_empty() {
            vec![spec.np]
        } else {
            spec.np_list.clone()
        };
        for i in launch_order(round, spec.libs.len()) {
            let lib = &spec.libs[i];
            if dropped[i].is_some() {
                continue;
            }
            let forgiving = spec
                .other_library_timeout
                .filter(|_| lib.family != Family::Tandem);
            let shared_mpi = match shared {
                Some((_, mpi)) if mpi == i => continue,
                Some((rw, mpi)) if rw == i => Some(mpi),
                _ => None,
            };
            for &np in &nps {
                let mut params = spec.params.clone();
                if rounds > 1 {
                    params.insert("repeat".into(), share.to_string());
                }
                if shared_mpi.is_some() {
                    params.insert("with".into(), "mpi".into());
                }
                if lib.name != "rwapi" {
                    params.retain(|k, _| !spec.kernel.is_rwapi_param(k));
                }
                if let Some((process, step, _)) = kill_plan(lib, np, &spec.params) {
                    params.insert("kill".into(), format!("{process}:{step}"));
                }
                if fixed_iterations && lib.replicas > 1 {
                    let base = lib.base_name().to_string();
                    if !calibrated.contains_key(&base) {
                        // No unreplicated launch yet: one, untimed, to
                        // calibrate.
                        let mut once = params.clone();
                        once.insert("repeat".into(), "1".into());
                        let unreplicated = Library {
                            replicas: 1,
                            kill_halfway: false,
                            name: base.clone(),
                            ..lib.clone()
                        };
                        let out = run::launch(&run::Launch {
                            lib: &unreplicated,
                            program: &exes[i],
                            np,
                            kernel_args: once.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                            lib_set: lib_set_of(spec, &unreplicated),
                            transport: spec.transport.clone(),
                            timeout: spec.timeout,
                            label: format!("{} {base} (calibration)", spec.kernel.name),
                            progress: spec.progress,
                            placement: spec.placement.as_ref(),
                        })?;
                        let sizes = params.get("sizes").cloned().unwrap_or_default();
                        if let Some(iters) = iterations_of(&out.records, &sizes) {
                            calibrated.entry(base.clone()).or_default().push(iters);
                        }
                    }
                    let iters = calibrated
                        .get(&base)
                        .and_then(|l| median_iterations(l))
                        .ok_or_else(|| {
                            format!(
                                "{}: no iteration counts to run {} with",
                                spec.kernel.name, lib.name
                            )
                        })?;
                    params.insert("iters".into(), iters);
                }
                let kernel_args: Vec<String> =
                    params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let lib_set = lib_set_of(spec, lib);
                let mut label = format!("{} {}", spec.kernel.name, lib.name);
                if let Some(mpi) = shared_mpi {
                    label.push_str(&format!("+{}", spec.libs[mpi].name));
                }
                label.push_str(&format!(" {}", spec.transport.name()));
                if nps.len() > 1 {
                    label.push_str(&format!(" np={np}"));
                }
                if rounds > 1 {
                    label.push_str(&format!(" {}/{}", round + 1, rounds));
                }
                let launched = run::launch(&run::Launch {
                    lib,
                    program: &exes[i],
                    np,
                    kernel_args,
                    lib_set,
                    transport: spec.transport.clone(),
                    timeout: forgiving.unwrap_or(spec.timeout),
                    label,
                    progress: spec.progress,
                    placement: spec.placement.as_ref(),
                });
                let out = match (launched, forgiving) {
                    (Ok(out), _) => out,
                    (Err(e), None) => return Err(e),
                    (Err(e), Some(_)) => {
                        // The report's limit, not the user's --timeout.
                        let first = e
                            .lines()
                            .next()
                            .unwrap_or_default()
                            .replace(" (raise --timeout)", "");
                        progress::note(&format!(
                            "tandem bench: leaving {} out of {}: {first}",
                            lib.name, spec.kernel.name
                        ));
                        dropped[i] = Some(first);
                        break;
                    }
                };
                // Repetition numbers stay distinct across rounds.
                if let Some(mpi) = shared_mpi {
                    let (rw_out, mpi_out) = split_shared(out, &spec.libs[mpi].name);
                    analyze::pool(&mut pooled[mpi], mpi_out.records.clone());
                    analyze::pool(&mut pooled[i], rw_out.records.clone());
                    runs.push(rw_out);
                    runs.push(mpi_out);
                    continue;
                }
                let mut out = out;
                if fixed_iterations && lib.replicas == 1 && lib.family == Family::Tandem {
                    if let Some(iters) =
                        iterations_of(&out.records, spec.params.get("sizes").map_or("", |s| s))
                    {
                        calibrated.entry(lib.name.clone()).or_default().push(iters);
                    }
                }
                if spec.kernel.time_to_solution {
                    // The launch's own time, start-up and finalisation
                    // included, beside the solve's.
                    for r in &mut out.records {
                        r["wall"] = Value::from(out.seconds);
                    }
                }
                analyze::pool(&mut pooled[i], out.records.clone());
                runs.push(out);
            }
        }
    }
    let tables = spec
        .libs
        .iter()
        .zip(&pooled)
        .zip(&dropped)
        .filter(|(_, gone)| gone.is_none())
        .map(|((lib, recs), _)| {
            (
                lib.name.clone(),
                analyze::analyse(spec.kernel.name, recs, &spec.params),
            )
        })
        .collect();
    Ok(KernelResult {
        tandem_bench: 1,
        kernel: spec.kernel.name.to_string(),
        machine: Machine::describe(),
        np: spec.np,
        transport: spec.transport.name().to_string(),
        hosts: spec.placement.as_ref().map(|p| p.describe.clone()),
        params: spec.params.clone(),
        library_params: spec.lib_set.clone(),
        runs,
        tables,
        shared_launches: shared
            .map(|(rw, mpi)| (spec.libs[rw].name.clone(), spec.libs[mpi].name.clone())),
        notes: run_notes(spec)
            .into_iter()
            .chain(spec.libs.iter().zip(&dropped).filter_map(|(lib, why)| {
                why.as_ref()
                    .map(|why| format!("{} left out of this kernel: {why}", lib.name))
            }))
            .collect(),
    })
}

/// The library parameters of `lib`'s launches.
fn lib_set_of(spec: &RunSpec, lib: &Library) -> Vec<(String, String)> {
    spec.lib_set
        .iter()
        .filter(|(l, _, _)| l.is_empty() || *l == lib.name)
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The spec's notes, then what each replicated configuration is.
fn run_notes(spec: &RunSpec) -> Vec<String> {
    let mut notes = spec.notes.clone();
    for lib in spec.libs.iter().filter(|l| l.replicas > 1) {
        let n = spec.np;
        let mut text = format!(
            "{}: every rank runs as {} processes (tandem run --replicas {})",
            lib.name, lib.replicas, lib.replicas
        );
        if spec.np_list.is_empty() {
            text.push_str(&format!(", {} in all", n * lib.replicas));
        }
        if let Some((p, step, steps)) = kill_plan(lib, n, &spec.params) {
            text.push_str(&format!(
                "; process {p} (replica {} of rank {}) kills itself (SIGKILL) at step {step} of {steps} \
                 of each launch's solve",
                p / n,
                p % n
            ));
        }
        if spec.kernel.replication == Replication::FixedIterations
            && !spec.params.contains_key("iters")
        {
            text.push_str(
                "; each batch runs the iterations the unreplicated launches before it calibrated \
                 (per size the median over them: replicas must send the same messages, and calibrating \
                 by each one's clock would not), so it lasts longer than the duration by the slowdown",
            );
        }
        if spec.placement.is_some() {
            text.push_str("; the launcher puts the replicas of a rank on different hosts where there are enough");
        }
        notes.push(text);
    }
    notes
}

/// Paired ratios of a comparison, keyed by (library, metric index, row
/// key): the median over the rounds of the ratio between the library's
/// launch and the first library's launch of the same round. Launches of
/// one round run one after the other, so drift and machine states that
/// last seconds (a VM's host moving its CPUs) hit both alike, where a
/// ratio of medians pooled over all rounds can compare one library's fast
/// state with the other's slow one.
pub type PairedRatios = BTreeMap<(String, usize, String), f64>;

/// Rounds whose launches all saw the machine in one state: the cache-line
/// probes taken around them (see [`core_latency::note`]) within 1.5x of
/// each other, or not taken. The k-th launch of each library makes round k.
pub fn steady_rounds(result: &KernelResult) -> Vec<bool> {
    let mut libs: Vec<&str> = Vec::new();
    for r in &result.runs {
        if !libs.contains(&r.mpi.as_str()) {
            libs.push(&r.mpi);
        }
    }
    let launches: Vec<Vec<&RunOutput>> = libs
        .iter()
        .map(|&lib| result.runs.iter().filter(|r| r.mpi == lib).collect())
        .collect();
    let rounds = launches.iter().map(Vec::len).min().unwrap_or(0);
    (0..rounds)
        .map(|k| {
            let probes: Vec<f64> = launches
                .iter()
                .flat_map(|l| l[k].core_round_trip_ns.iter().copied())
                .collect();
            core_latency::note(&probes).is_none()
        })
        .collect()
}

/// The rounds [`paired_ratios`] uses: the steady ones (see
/// [`steady_rounds`]) when they are at least half, else all (a machine that
/// changed state in most rounds is better described by every round than
/// by a few).
pub fn rounds_used(result: &KernelResult) -> Vec<bool> {
    let steady = steady_rounds(result);
    let n = steady.iter().filter(|&&s| s).count();
    if 2 * n >= steady.len() {
        steady
    } else {
        vec![true; steady.len()]
    }
}

/// A line saying how many rounds [`paired_ratios`] left out, if any.
pub fn rounds_used_text(result: &KernelResult) -> Option<String> {
    let used = rounds_used(result);
    let left = used.iter().filter(|&&u| !u).count();
    (left > 0).then(|| {
        format!(
            "{left} of {} rounds left out of the paired ratios: the machine changed state within them \
             (cache-line probes around their launches more than 1.5x apart)",
            used.len()
        )
    })
}

pub fn paired_ratios(result: &KernelResult) -> PairedRatios {
    let mut out = PairedRatios::new();
    // The reference is the first library named, whose launch need not
    // come first (one timed inside another's launch never does).
    let Some(first) = result
        .tables
        .first()
        .map(|(l, _)| l.clone())
        .or_else(|| result.runs.first().map(|r| r.mpi.clone()))
    else {
        return out;
    };
    let used = rounds_used(result);
    let launches_of =
        |lib: &str| -> Vec<&RunOutput> { result.runs.iter().filter(|r| r.mpi == lib).collect() };
    let base = launches_of(&first);
    let mut libs: Vec<&str> = Vec::new();
    for r in &result.runs {
        if r.mpi != first && !libs.contains(&r.mpi.as_str()) {
            libs.push(&r.mpi);
        }
    }
    let table = |r: &RunOutput| analyze::analyse(&result.kernel, &r.records, &result.params);
    // The records of one repetition of a launch.
    let rep_table = |r: &RunOutput, rep: &Value| {
        let recs: Vec<Value> = r
            .records
            .iter()
            .filter(|x| x.get("rep") == Some(rep))
            .cloned()
            .collect();
        analyze::analyse(&result.kernel, &recs, &result.params)
    };
    let base_tables: Vec<Table> = base.iter().map(|r| table(r)).collect();
    for lib in libs {
        let mut ratios: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
        let mut add = |bt: &Table, t: &Table| {
            for row in &bt.rows {
                let Some(other) = t.rows.iter().find(|o| o.key() == row.key()) else {
                    continue;
                };
                for (mi, (a, b)) in row.values.iter().zip(&other.values).enumerate() {
                    if let (Some(a), Some(b)) = (a, b) {
                        if a.median != 0.0 && (b.median / a.median).is_finite() {
                            ratios
                                .entry((mi, row.key()))
                                .or_default()
                                .push(b.median / a.median);
                        }
                    }
                }
            }
        };
        // The k-th launch of each library belongs to the same round.
        for (((bt, base_run), run), _) in base_tables
            .iter()
            .zip(&base)
            .zip(launches_of(lib))
            .zip(&used)
            .filter(|(_, &u)| u)
        {
            if run.shared_with.as_deref() == Some(first.as_str()) {
                // One launch timed both, their batches of a repetition
                // side by side: paired repetition by repetition.
                let mut reps: Vec<&Value> = Vec::new();
                for rep in run.records.iter().filter_map(|x| x.get("rep")) {
                    if !reps.contains(&rep) {
                        reps.push(rep);
                    }
                }
                for rep in reps {
                    add(&rep_table(base_run, rep), &rep_table(run, rep));
                }
            } else {
                add(bt, &table(run));
            }
        }
        for ((mi, key), mut v) in ratios {
            // Most rounds must give a ratio (a figure that is 0 in the
            // first library's launches, such as an availability, gives
            // none); else the medians' ratio stands.
            if 2 * v.len() < used.iter().filter(|&&u| u).count() {
                continue;
            }
            v.sort_by(f64::total_cmp);
            out.insert((lib.to_string(), mi, key), stats::median_sorted(&v));
        }
    }
    out
}

/// Per metric, a table with each library's median and its ratio to the
/// first library's: the paired ratio where `paired` has one (see
/// [`paired_ratios`]), else the ratio of the medians.
pub fn compare_text(tables: &[(String, &Table)], paired: &PairedRatios) -> String {
    let Some((first_lib, first)) = tables.first() else {
        return String::new();
    };
    let mut out = String::new();
    for (mi, m) in first.metrics.iter().enumerate() {
        let mut header: Vec<String> = first.key_names.clone();
        for (li, (lib, _)) in tables.iter().enumerate() {
            header.push(format!("{lib} {} ({})", m.name, m.unit));
            if li > 0 {
                header.push(if paired.is_empty() {
                    format!("{lib}/{first_lib}")
                } else {
                    format!("{lib}/{first_lib} (paired)")
                });
            }
        }
        let mut rows = Vec::new();
        for r in &first.rows {
            let key = r.key();
            let mut cells: Vec<String> = r.keys.iter().map(|(_, v)| v.clone()).collect();
            let base = r.values.get(mi).copied().flatten();
            for (li, (lib, t)) in tables.iter().enumerate() {
                let v = t
                    .rows
                    .iter()
                    .find(|o| o.key() == key)
                    .and_then(|o| o.values.get(mi).copied().flatten());
                cells.push(output::cell(&v));
                if li > 0 {
                    let ratio =
                        paired
                            .get(&(lib.clone(), mi, key.clone()))
                            .copied()
                            .or(match (v, base) {
                                (Some(v), Some(b)) if b.median != 0.0 => Some(v.median / b.median),
                                _ => None,
                            });
                    cells.push(match ratio {
                        Some(x) => format!("{x:.2}x"),
                        None => "-".into(),
                    });
                }
            }
            rows.push(cells);
        }
        out.push_str(&output::layout(&header, &rows, first.key_names.len()));
        out.push('\n');
    }
    let ratios_are = if paired.is_empty() {
        "ratios are of the medians".to_string()
    } else {
        "ratios marked (paired) are the median over the rounds of the ratio between the libraries' \
         launches of one round, which run one after the other (in alternating order), so that drift \
         and machine states lasting seconds hit both alike; a median of ratios, not the ratio of the \
         two medians beside it, so the two can differ (a point without a ratio in most rounds shows \
         the medians' ratio)"
            .to_string()
    };
    out.push_str(&format!(
        "median [{:.0}% confidence interval]; {ratios_are} ({}: lower is better for times, higher for throughput and availability)\n",
        stats::CI_LEVEL * 100.0,
        tables.iter().skip(1).map(|(l, _)| format!("{l}/{first_lib}")).collect::<Vec<_>>().join(", ")
    ));
    for (lib, t) in tables {
        let w = output::spread_warnings(t);
        if !w.is_empty() {
            out.push_str(&format!("{lib}: {w}"));
        }
    }
    out
}

/// Writes the --json, --csv and --plot outputs of a result.
pub fn write_outputs(
    result: &KernelResult,
    json: Option<&PathBuf>,
    csv: Option<&PathBuf>,
    plot_path: Option<&PathBuf>,
) -> Result<(), String> {
    if let Some(p) = json {
        let text =
            serde_json::to_string_pretty(result).map_err(|e| format!("cannot encode JSON: {e}"))?;
        output::write_file(p, text.as_bytes())?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = csv {
        output::write_file(p, output::csv(&result.table_refs()).as_bytes())?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = plot_path {
        let title = format!(
            "{} ({} ranks, {})",
            result.kernel,
            result.np,
            result
                .versions()
                .iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(" vs ")
        );
        let plot = plot::of_tables(&result.table_refs(), 0, &title)
            .ok_or_else(|| "nothing to plot".to_string())?;
        plot::write(&plot, p)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn header_lines(result: &KernelResult) -> String {
    let mut s = format!(
        "{} on {} ranks, transport {}; {}\n",
        result.kernel,
        result.np,
        result.transport,
        result.machine.one_line()
    );
    if let Some(h) = &result.hosts {
        s.push_str(&format!("  hosts: {h}\n"));
    }
    if let Some(n) = core_latency::note(&result.core_probes()) {
        s.push_str(&format!("  {n}\n"));
    } else if let Some(c) = result.core_probes_text() {
        s.push_str(&format!("  {c}\n"));
    }
    for (lib, version) in result.versions() {
        s.push_str(&format!("  {lib}: {version}\n"));
    }
    if let Some((rw, mpi)) = &result.shared_launches {
        s.push_str(&format!(
            "  {rw} and {mpi} ran in the same launches, their batches alternating size by size, so \
             their ratios compare them on one process placement and machine state \
             (--separate-launches launches them apart)\n"
        ));
    }
    for n in &result.notes {
        s.push_str(&format!("  note: {n}\n"));
    }
    if !result.params.is_empty() {
        s.push_str(&format!(
            "  parameters: {}\n",
            result
                .params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    s
}

fn kernel_command(
    kernel: &'static Kernel,
    a: &KernelArgs,
    compare: Option<&CompareArgs>,
) -> Result<(), String> {
    let spec = match compare {
        Some(c) => RunSpec {
            separate_launches: c.separate_launches,
            // With --replicas, the comparison is Tandem's with itself.
            ..spec_from_args(
                kernel,
                a,
                if a.replicas.is_some() {
                    "tandem"
                } else {
                    "tandem,openmpi"
                },
                c.rounds,
            )?
        },
        None => {
            let mut spec = spec_from_args(kernel, a, "tandem", 1)?;
            if spec.libs.len() > 1 && !kernel.time_to_solution {
                // Replicated and not: interleaved as compare does.
                spec.rounds = DEFAULT_ROUNDS;
            }
            spec
        }
    };
    if let Some(p) = &a.plot {
        plot::check_path(p)?;
    }
    let mut spec = spec;
    // Dropped at the end of this function: the namespaces go with it.
    let _hosts = match &a.hosts {
        Some(h) => Some(place_on_hosts(&mut spec, h, a.rate.as_deref())?),
        None if a.rate.is_some() => {
            return Err("--rate limits the links between hosts: give --hosts netns:K too".into())
        }
        None => None,
    };
    if compare.is_some() && spec.libs.len() < 2 {
        return Err("compare needs at least two libraries, e.g. --mpi tandem,openmpi".into());
    }
    for (lib, name, _) in &spec.lib_set {
        let targets: Vec<&Library> = spec
            .libs
            .iter()
            .filter(|l| lib.is_empty() || l.name == *lib)
            .collect();
        for l in targets {
            eprintln!(
                "note: --set {name}: not a {} parameter, {}",
                kernel.name,
                l.set_explanation()
            );
        }
    }
    let launches = planned_launches(&spec);
    if launches > 1 {
        progress::start(
            if compare.is_some() {
                "compare"
            } else {
                kernel.name
            },
            launches,
        );
    }
    let result = run_spec(&spec);
    progress::finish();
    let result = result?;
    print!("{}", header_lines(&result));
    println!();
    if result.tables.len() == 1 {
        print!("{}", output::text_table(&result.tables[0].1));
    } else {
        print!(
            "{}",
            compare_text(&result.table_refs(), &paired_ratios(&result))
        );
        if let Some((rw, mpi)) = &result.shared_launches {
            println!(
                "{mpi}/{rw}: the two launches of a round are one launch, in which their batches alternate; \
                 its ratios are paired repetition by repetition (each pair of batches side by side)"
            );
        }
        if let Some(t) = rounds_used_text(&result) {
            println!("{t}");
        }
    }
    print!("{}", output::counters_text(&result.runs));
    if result.kernel == "tts" {
        print!("{}", solutions_text(&result));
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    write_outputs(&result, a.json.as_ref(), a.csv.as_ref(), a.plot.as_ref())
}

/// Per library of a time-to-solution run: how many solves verified, the
/// results they gave (every configuration of a correct run gives the same
/// one), and the replicas its launches lost (from the launcher's notes).
pub fn solutions_text(result: &KernelResult) -> String {
    let mut out = String::new();
    let mut results: Vec<String> = Vec::new();
    for (lib, _) in &result.tables {
        let runs: Vec<&RunOutput> = result.runs.iter().filter(|r| r.mpi == *lib).collect();
        let solves: Vec<&Value> = runs
            .iter()
            .flat_map(|r| r.records.iter())
            .filter(|r| r["type"] == "tts")
            .collect();
        let verified = solves.iter().filter(|r| r["ok"] == true).count();
        let bad: u64 = solves.iter().filter_map(|r| r["bad_blocks"].as_u64()).sum();
        let lost = runs
            .iter()
            .filter(|r| {
                r.launcher_notes
                    .iter()
                    .any(|n| n.contains("continuing on its other replicas"))
            })
            .count();
        for r in &solves {
            if let Some(x) = r["result"].as_str() {
                if !results.iter().any(|y| y == x) {
                    results.push(x.to_string());
                }
            }
        }
        out.push_str(&format!(
            "{lib}: {verified} of {} solves verified{}",
            solves.len(),
            if bad > 0 {
                format!(" ({bad} wrong blocks received)")
            } else {
                String::new()
            }
        ));
        if runs.iter().any(|r| r.mpi.ends_with("-kill")) || lost > 0 {
            out.push_str(&format!(
                "; {lost} of {} launches lost a replica and went on",
                runs.len()
            ));
        }
        out.push('\n');
    }
    match results.as_slice() {
        [one] => out.push_str(&format!("every solve gave the result {one}\n")),
        [] => {}
        many => out.push_str(&format!(
            "the solves gave {} different results: {}\n",
            many.len(),
            many.join(", ")
        )),
    }
    out
}

/// Namespace hosts made for a run, removed on drop with the temporary
/// directories Open MPI's agent gave them.
struct PlacedHosts {
    hosts: crate::netns::Hosts,
    tmp_dirs: bool,
}

impl Drop for PlacedHosts {
    fn drop(&mut self) {
        if self.tmp_dirs {
            for name in &self.hosts.names {
                let _ = std::fs::remove_dir_all(
                    std::env::temp_dir().join(format!("tandem-netns-{name}")),
                );
            }
        }
    }
}

/// Makes the hosts of `--hosts SPEC [--rate R]` and places the spec's ranks
/// on them; the hosts last as long as the returned value.
fn place_on_hosts(
    spec: &mut RunSpec,
    hosts: &str,
    rate: Option<&str>,
) -> Result<PlacedHosts, String> {
    let k: usize = hosts
        .strip_prefix("netns:")
        .and_then(|k| k.parse().ok())
        .filter(|k| (1..=64).contains(k))
        .ok_or_else(|| {
            format!(
                "--hosts {hosts}: expected netns:K, K network namespaces (1 to 64) standing in for hosts"
            )
        })?;
    if let Some(other) = spec.libs.iter().find(|l| l.family == Family::Mpich) {
        return Err(format!(
            "--hosts {hosts} runs Tandem and Open MPI only for now: {} would have to be started across the \
             namespaces by its own launcher; measure it without --hosts",
            other.name
        ));
    }
    let rsh_agent = if spec.libs.iter().any(|l| l.family == Family::OpenMpi) {
        Some(write_rsh_agent()?)
    } else {
        None
    };
    let bucket = match rate {
        Some(r) => {
            let burst = crate::netns::burst_for(r).ok_or_else(|| {
                format!("--rate {r}: expected a tc rate such as 1gbit, 100mbit or 500kbit")
            })?;
            Some((r.to_string(), burst))
        }
        None => None,
    };
    // Before any thread starts: Ctrl-C and SIGTERM must remove the
    // namespaces too.
    crate::netns::remove_on_signals()?;
    let made = crate::netns::Hosts::create(
        k,
        bucket.as_ref().map(|(r, b)| (r.as_str(), b.as_str())),
        crate::netns::COMMAND_SUBNET,
    )
    .map_err(|e| {
        format!(
            "network namespaces cannot be created here ({e}): --hosts netns:K needs root (or CAP_NET_ADMIN \
             and CAP_SYS_ADMIN) and iproute2 (apt-get install iproute2)"
        )
    })?;
    let most = spec
        .np_list
        .iter()
        .copied()
        .max()
        .unwrap_or(spec.np)
        .max(spec.np);
    // Room for every process of the most replicated library; fewer ranks
    // fill the first hosts.
    let replicas = spec.libs.iter().map(|l| l.replicas).max().unwrap_or(1);
    let slots = ((most * replicas) as usize).div_ceil(k).max(1) as u32;
    let mut describe = format!(
        "{k} network namespace{} on a bridge ({}), {slots} slot{} each",
        if k == 1 { "" } else { "s" },
        made.network(),
        if slots == 1 { "" } else { "s" }
    );
    if let Some((r, b)) = &bucket {
        describe.push_str(&format!(
            ", each link limited to {r} (tc tbf, burst {b} bytes)"
        ));
    }
    spec.placement = Some(Placement {
        enter: vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            made.names[0].clone(),
        ],
        hosts: made.host_list(slots),
        agent: crate::netns::AGENT.into(),
        set: vec![("tcp_if_include".into(), made.network())],
        network: made.network(),
        rsh_agent: rsh_agent.clone(),
        describe,
    });
    Ok(PlacedHosts {
        hosts: made,
        tmp_dirs: rsh_agent.is_some(),
    })
}

/// Open MPI's remote shell for namespace hosts: its rsh launcher hands the
/// agent a host and a shell command, as it would to ssh. The hosts share
/// one file system and one host name, so each gets a temporary directory
/// of its own: Open MPI's daemons name their working directories and
/// topology files under it by host name, and without it the daemons of two
/// "hosts" collide there (mkdir failing with "File exists", a daemon
/// crashing in hwloc_shmem_topology_write). Kept beside the built kernels;
/// returns its path.
fn write_rsh_agent() -> Result<PathBuf, String> {
    const AGENT: &str = "#!/bin/sh\n\
         # Open MPI's rsh agent for tandem bench --hosts netns:K: runs the command it is\n\
         # handed inside the network namespace named as the host, with a TMPDIR of its own.\n\
         host=$1; shift\n\
         dir=\"${TMPDIR:-/tmp}/tandem-netns-$host\"\n\
         mkdir -p \"$dir\" || exit 1\n\
         exec ip netns exec \"$host\" env TMPDIR=\"$dir\" sh -c \"$*\"\n";
    let dir = build::cache_dir();
    let path = dir.join("netns-rsh-agent");
    if std::fs::read_to_string(&path).is_ok_and(|t| t == AGENT) {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!("netns-rsh-agent.tmp{}", std::process::id()));
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(&tmp, AGENT)
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn list() {
    for k in kernels::KERNELS {
        println!(
            "{:10} {} (default {} ranks{})",
            k.name,
            k.about,
            k.default_np,
            if k.square_np { ", a square number" } else { "" }
        );
        for p in k.params {
            println!("    {:11} {}", p.name, p.help);
        }
        for p in k.rwapi_params() {
            println!("    {:11} (--mpi rwapi only) {}", p.name, p.help);
        }
    }
    println!();
    println!("tandem bench compare KERNEL --mpi tandem,openmpi   runs libraries interleaved, with ratios");
    println!("tandem bench model                                 fits Hockney and LogGP, predicts collectives");
    println!("tandem bench report --out DIR                      the quick suite as one HTML page");
}

/// Runs `tandem bench ...`; returns the exit status. `tandem_include_dir`
/// is where the running `tandem` command finds Tandem's `mpi.h`, or why it
/// cannot: the bench compiles and runs kernels through that command
/// (`tandem cc`, `tandem run`), and keys its build cache on the header.
pub fn main(args: BenchArgs, tandem_include_dir: Result<PathBuf, String>) -> i32 {
    mpi::set_tandem_include_dir(tandem_include_dir);
    let r = match args.command {
        BenchCommand::Pingpong(a) => kernel_command(kernel("pingpong"), &a, None),
        BenchCommand::Bidir(a) => kernel_command(kernel("bidir"), &a, None),
        BenchCommand::Burst(a) => kernel_command(kernel("burst"), &a, None),
        BenchCommand::Overhead(a) => kernel_command(kernel("overhead"), &a, None),
        BenchCommand::Coll(a) => kernel_command(kernel("coll"), &a, None),
        BenchCommand::Alltoallv(a) => kernel_command(kernel("alltoallv"), &a, None),
        BenchCommand::Cannon(a) => kernel_command(kernel("cannon"), &a, None),
        BenchCommand::Tts(a) => kernel_command(kernel("tts"), &a, None),
        BenchCommand::Compare(c) => match kernels::find(&c.kernel) {
            Some(k) => kernel_command(k, &c.common, Some(&c)),
            None => Err(format!(
                "unknown kernel '{}': expected one of {}",
                c.kernel,
                kernels::KERNELS
                    .iter()
                    .map(|k| k.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        },
        BenchCommand::Model(m) => model::command(&m),
        BenchCommand::Report(r) => report::command(&r),
        BenchCommand::List => {
            list();
            Ok(())
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("tandem bench: {e}");
            1
        }
    }
}

fn kernel(name: &str) -> &'static Kernel {
    kernels::find(name).expect("kernel in the catalogue")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tandem_lib(name: &str) -> Library {
        Library {
            name: name.into(),
            family: Family::Tandem,
            cc: vec![],
            launcher: vec![],
            replicas: 1,
            kill_halfway: false,
        }
    }

    fn spec_of(kernel: &str, libs: &[&str], lib_set: &[(&str, &str, &str)]) -> RunSpec {
        RunSpec {
            kernel: kernels::find(kernel).unwrap(),
            libs: libs.iter().map(|l| tandem_lib(l)).collect(),
            np: 2,
            np_list: vec![],
            params: BTreeMap::new(),
            lib_set: lib_set
                .iter()
                .map(|(l, k, v)| (l.to_string(), k.to_string(), v.to_string()))
                .collect(),
            transport: Transport::parse("tcp"),
            rounds: 1,
            timeout: Duration::from_secs(1),
            progress: false,
            placement: None,
            separate_launches: false,
            notes: vec![],
            other_library_timeout: None,
        }
    }

    #[test]
    fn rwapi_and_tandem_share_launches_unless_told_apart() {
        let both = spec_of("pingpong", &["tandem", "rwapi"], &[]);
        assert_eq!(both.shared_pair(), Some((1, 0)));
        let three = spec_of(
            "burst",
            &["rwapi", "openmpi", "tandem"],
            &[("", "eager_limit", "1k")],
        );
        assert_eq!(three.shared_pair(), Some((0, 2)));
        // Asked to launch apart; a parameter for one of them alone; a
        // kernel without an RWAPI variant; only one of the two.
        let apart = RunSpec {
            separate_launches: true,
            ..both.clone()
        };
        assert_eq!(apart.shared_pair(), None);
        let one_set = spec_of(
            "pingpong",
            &["rwapi", "tandem"],
            &[("tandem", "eager_limit", "1k")],
        );
        assert_eq!(one_set.shared_pair(), None);
        assert_eq!(
            spec_of("overhead", &["rwapi", "tandem"], &[]).shared_pair(),
            None
        );
        assert_eq!(
            spec_of("pingpong", &["rwapi", "openmpi"], &[]).shared_pair(),
            None
        );
    }

    #[test]
    fn a_shared_launch_splits_by_api() {
        let mut out = launch("rwapi", 1.0);
        out.records = vec![
            serde_json::json!({"type":"sample","api":"rwapi","size":8,"rep":0,"n":10,"t":1.0}),
            serde_json::json!({"type":"sample","api":"mpi","size":8,"rep":0,"n":10,"t":2.0}),
            serde_json::json!({"type":"counters","rank":0}),
            serde_json::json!({"type":"sample","api":"mpi","size":8,"rep":1,"n":10,"t":3.0}),
        ];
        let (rw, mpi) = split_shared(out, "tandem");
        assert_eq!((rw.mpi.as_str(), mpi.mpi.as_str()), ("rwapi", "tandem"));
        let ts = |o: &RunOutput| -> Vec<f64> {
            o.records.iter().filter_map(|r| r["t"].as_f64()).collect()
        };
        assert_eq!(ts(&rw), [1.0]);
        assert_eq!(ts(&mpi), [2.0, 3.0]);
        // Other records stay with the RWAPI launch; "api" is gone.
        assert_eq!(rw.records.len(), 2);
        assert!(rw
            .records
            .iter()
            .chain(&mpi.records)
            .all(|r| r.get("api").is_none()));
        assert_eq!(rw.core_round_trip_ns, mpi.core_round_trip_ns);
    }

    /// A launch of `mpi` whose ping-pong of 8 bytes took `us` per message.
    fn launch(mpi: &str, us: f64) -> RunOutput {
        RunOutput {
            mpi: mpi.into(),
            library_version: String::new(),
            mpi_version: String::new(),
            np: 2,
            transport: "shm".into(),
            command: String::new(),
            kernel_args: vec![],
            seconds: 0.0,
            records: vec![serde_json::json!({
                "type": "sample", "size": 8, "rep": 0, "iters": 1000, "n": 2000,
                "t": us * 2000.0 * 1e-6
            })],
            core_round_trip_ns: vec![],
            shared_with: None,
            launcher_notes: vec![],
        }
    }

    #[test]
    fn a_shared_launch_is_paired_repetition_by_repetition() {
        // One launch, three repetitions, the machine slowing down through
        // it, and MPI's third batch caught in a fast moment. Per launch,
        // the medians' ratio is 2/2 = 1; the repetitions, each pair of
        // batches side by side, say 1.5, 1.5 and 0.5.
        let sample = |rep: u32, us: f64| {
            serde_json::json!({"type":"sample","api":"x","size":8,"rep":rep,"iters":1000,"n":2000,
                               "t": us * 2000.0 * 1e-6})
        };
        let mut out = launch("rwapi", 0.0);
        out.records.clear();
        for (rep, (rw, mpi)) in [(1.0, 1.5), (2.0, 3.0), (4.0, 2.0)].into_iter().enumerate() {
            for (api, us) in [("rwapi", rw), ("mpi", mpi)] {
                let mut r = sample(rep as u32, us);
                r["api"] = api.into();
                out.records.push(r);
            }
        }
        let (rw, mpi) = split_shared(out, "tandem");
        let mut result = result_of(vec![rw, mpi]);
        result.tables = vec![
            ("rwapi".into(), table_of(&result.runs[0])),
            ("tandem".into(), table_of(&result.runs[1])),
        ];
        let paired = paired_ratios(&result);
        let key = result.tables[0].1.rows[0].key();
        let latency = paired[&("tandem".to_string(), 0, key)];
        assert!((latency - 1.5).abs() < 1e-9, "{latency}");
    }

    fn table_of(r: &RunOutput) -> Table {
        analyze::analyse("pingpong", &r.records, &BTreeMap::new())
    }

    fn names(libs: &[Library]) -> Vec<&str> {
        libs.iter().map(|l| l.name.as_str()).collect()
    }

    #[test]
    fn replica_counts_expand_the_libraries() {
        assert_eq!(parse_replicas("1,2,2").unwrap(), [1, 2]);
        assert_eq!(parse_replicas("3").unwrap(), [3]);
        for bad in ["0", "x", "1,,2", "17"] {
            let e = parse_replicas(bad).unwrap_err();
            assert!(e.contains("from 1 to 16"), "{bad}: {e}");
        }
        let ompi = Library {
            family: Family::OpenMpi,
            ..tandem_lib("openmpi")
        };
        let libs = [tandem_lib("tandem"), tandem_lib("rwapi"), ompi];
        let pingpong = kernels::find("pingpong").unwrap();
        let (out, notes) = with_replicas(pingpong, &libs, &[1, 2]).unwrap();
        assert_eq!(names(&out), ["tandem", "tandem-r2", "rwapi", "openmpi"]);
        assert_eq!(out[1].replicas, 2);
        assert!(!out[1].kill_halfway);
        assert!(
            notes
                .iter()
                .any(|n| n
                    .starts_with("rwapi-r2 skipped for pingpong: replicated jobs refuse RWAPI")),
            "{notes:?}"
        );
        assert!(notes
            .iter()
            .any(|n| n.starts_with("openmpi runs unreplicated")));
        // Replicated only; a time to solution adds the run that loses a
        // replica halfway.
        let tts = kernels::find("tts").unwrap();
        let (out, _) = with_replicas(tts, &libs[..1], &[2, 3]).unwrap();
        assert_eq!(
            names(&out),
            ["tandem-r2", "tandem-r2-kill", "tandem-r3", "tandem-r3-kill"]
        );
        let (out, notes) = with_replicas(tts, &libs[..1], &[1]).unwrap();
        assert_eq!(names(&out), ["tandem"]);
        assert!(notes.is_empty());
        // RWAPI alone, replicated: nothing left, and the error says why.
        let e = with_replicas(pingpong, &libs[1..2], &[2]).unwrap_err();
        assert!(
            e.contains("nothing left") && e.contains("refuse RWAPI"),
            "{e}"
        );
    }

    #[test]
    fn replicated_launches_run_the_median_calibration() {
        let records: Vec<Value> = [(8, 2000), (4194304, 6), (8, 2000)]
            .iter()
            .map(|(s, i)| serde_json::json!({"type":"sample","size":s,"iters":i,"rep":0,"n":1,"t":1.0}))
            .collect();
        assert_eq!(iterations_of(&records, "8,4194304"), Some(vec![2000, 6]));
        assert_eq!(iterations_of(&records, "8,16"), None);
        let launches = vec![vec![2000, 6], vec![4, 15], vec![3000, 14]];
        assert_eq!(median_iterations(&launches).as_deref(), Some("2000,14"));
        assert_eq!(
            median_iterations(&launches[..2]).as_deref(),
            Some("2000,15")
        );
        assert_eq!(median_iterations(&[]), None);
    }

    #[test]
    fn the_kill_configuration_loses_the_last_process_halfway() {
        let kill = tandem_lib("tandem").replicated(2, true);
        let mut params = BTreeMap::new();
        assert_eq!(
            kill_plan(&kill, 4, &params),
            Some((7, kernels::TTS_STEPS / 2, kernels::TTS_STEPS))
        );
        params.insert("steps".to_string(), "41".to_string());
        assert_eq!(kill_plan(&kill, 2, &params), Some((3, 20, 41)));
        let r2 = tandem_lib("tandem").replicated(2, false);
        assert_eq!(kill_plan(&r2, 2, &params), None);
    }

    #[test]
    fn rounds_alternate_the_launch_order() {
        assert_eq!(launch_order(0, 3), [0, 1, 2]);
        assert_eq!(launch_order(1, 3), [2, 1, 0]);
        assert_eq!(launch_order(2, 2), [0, 1]);
        assert_eq!(launch_order(5, 1), [0]);
    }

    fn result_of(runs: Vec<RunOutput>) -> KernelResult {
        KernelResult {
            tandem_bench: 1,
            kernel: "pingpong".into(),
            machine: Machine::describe(),
            np: 2,
            transport: "tcp".into(),
            hosts: None,
            params: BTreeMap::new(),
            library_params: vec![],
            tables: vec![],
            shared_launches: None,
            notes: vec![],
            runs,
        }
    }

    #[test]
    fn rounds_whose_machine_state_changed_are_left_out() {
        let probed = |mpi: &str, us: f64, ns: [f64; 2]| RunOutput {
            core_round_trip_ns: ns.to_vec(),
            ..launch(mpi, us)
        };
        // Round 2: the CPUs moved apart between the two launches, and the
        // second library's time with them.
        let runs = vec![
            probed("rwapi", 1.0, [70.0, 75.0]),
            probed("tandem", 1.1, [72.0, 70.0]),
            probed("rwapi", 1.0, [70.0, 72.0]),
            probed("tandem", 6.0, [340.0, 350.0]),
            probed("rwapi", 1.0, [330.0, 340.0]),
            probed("tandem", 1.2, [345.0, 335.0]),
        ];
        let result = result_of(runs);
        assert_eq!(steady_rounds(&result), [true, false, true]);
        let paired = paired_ratios(&result);
        let latency = paired.values().next().copied().expect("a paired ratio");
        // The median of rounds 1 and 3 (1.1 and 1.2); with round 2, 1.2.
        assert!((latency - 1.15).abs() < 1e-9, "{latency}");
        let text = rounds_used_text(&result).expect("a round left out");
        assert!(text.starts_with("1 of 3 rounds"), "{text}");

        // Most rounds unsteady: every round counts, and nothing is said.
        let mut runs = result.runs.clone();
        runs[1].core_round_trip_ns = vec![70.0, 300.0];
        let result = result_of(runs);
        assert_eq!(steady_rounds(&result), [false, false, true]);
        assert_eq!(rounds_used(&result), [true, true, true]);
        assert!(rounds_used_text(&result).is_none());
        // Unprobed launches (across hosts) are steady.
        assert_eq!(
            steady_rounds(&result_of(vec![launch("a", 1.0), launch("b", 2.0)])),
            [true]
        );
    }

    #[test]
    fn paired_ratios_compare_launches_of_one_round() {
        // Round 2 caught openmpi's launch in a state 4x slower; pooled
        // medians would say openmpi is 8x slower, the rounds say 2x.
        let rounds = [(1.0, 2.0), (1.0, 8.0), (4.0, 8.0)];
        let runs: Vec<RunOutput> = rounds
            .iter()
            .flat_map(|&(t, o)| [launch("tandem", t), launch("openmpi", o)])
            .collect();
        let pooled = |lib: &str| {
            let recs: Vec<Value> = runs
                .iter()
                .filter(|r| r.mpi == lib)
                .flat_map(|r| r.records.clone())
                .collect();
            analyze::analyse("pingpong", &recs, &BTreeMap::new())
        };
        let result = KernelResult {
            tandem_bench: 1,
            kernel: "pingpong".into(),
            machine: Machine::describe(),
            np: 2,
            transport: "shm".into(),
            hosts: None,
            params: BTreeMap::new(),
            library_params: vec![],
            tables: vec![
                ("tandem".into(), pooled("tandem")),
                ("openmpi".into(), pooled("openmpi")),
            ],
            runs,
            shared_launches: None,
            notes: vec![],
        };
        let paired = paired_ratios(&result);
        let key = result.tables[0].1.rows[0].key();
        let latency = paired[&("openmpi".to_string(), 0, key.clone())];
        assert!((latency - 2.0).abs() < 1e-9, "{latency}");
        let throughput = paired[&("openmpi".to_string(), 1, key)];
        assert!((throughput - 0.5).abs() < 1e-9, "{throughput}");
        let text = compare_text(&result.table_refs(), &paired);
        assert!(text.contains("2.00x") && !text.contains("8.00x"), "{text}");
        // The header and the footnote say the ratio is a median of paired
        // ratios, so that it may differ from the medians' ratio.
        assert!(text.contains("openmpi/tandem (paired)"), "{text}");
        assert!(text.contains("not the ratio of the two medians"), "{text}");
        // Without pairing, the ratio of the pooled medians.
        let unpaired = compare_text(&result.table_refs(), &PairedRatios::new());
        assert!(unpaired.contains("8.00x"), "{unpaired}");
        assert!(!unpaired.contains("(paired)"), "{unpaired}");
        assert!(unpaired.contains("ratios are of the medians"), "{unpaired}");
        // The reference stays the first library named when another's
        // launch comes first in the runs (tandem's MPI timed inside a
        // later launch of rwapi).
        let mut swapped = result.clone();
        for pair in swapped.runs.chunks_mut(2) {
            pair.swap(0, 1);
        }
        assert_eq!(paired_ratios(&swapped), paired);
    }
}

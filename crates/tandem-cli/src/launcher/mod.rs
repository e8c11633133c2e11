//! `tandem run`: starts the ranks of a job and is the job's master — it
//! serves the key-value/fence protocol of `tandem::bootstrap`, forwards
//! output and stdin, and ends the whole job when any part of it fails.
//!
//! Ranks on this host are started directly. With a host list (`--host`,
//! `--hostfile`) ranks on other hosts are started through an agent (`ssh`
//! by default), one call per host, which runs the per-host helper
//! `tandem _host` there (`hostd`).
//!
//! With `--replicas R` (parameter `replicas`) every rank runs as R
//! processes placed on different hosts where the host list allows
//! (`hosts::place_replicas`), and the job survives the loss of all but one
//! replica of each rank (`job`).

mod channel;
mod foreign_mpi;
mod host_setup;
mod hostd;
mod hosts;
mod job;
mod kv_service;
mod output;
mod remote;
mod signals;
mod stdin_feed;
mod stopped;
mod supervise;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::parameters;
use hosts::{HostSlots, MapBy};
use job::{Job, JobConfig, MultiHost};
use supervise::{App, RankCommand};
use tandem::params::Settings;

pub use hostd::main as host_main;
pub use remote::DEFAULT_AGENT;

/// What `tandem run` was asked to do.
pub struct RunOptions {
    /// `None`: as many as the hosts have slots (a host list is required).
    pub ranks: Option<u32>,
    pub set: Vec<String>,
    pub tag_output: bool,
    pub timeout: Option<f64>,
    pub program: OsString,
    pub args: Vec<OsString>,
    /// `--host` lists (repeatable, joined).
    pub hosts: Vec<String>,
    pub hostfile: Option<PathBuf>,
    pub map_by: Option<String>,
    pub agent: Option<String>,
    /// `-x NAME[=VALUE]`: variables for every rank.
    pub export: Vec<String>,
    pub launch_timeout: Option<f64>,
    /// The tandem executable on the other hosts (default: this one's path).
    pub remote_tandem: Option<OsString>,
    /// `-wdir DIR`: where the ranks start, on every host (default: here).
    pub wdir: Option<PathBuf>,
    /// `--per-host N` (`-ppn`, `--npernode`, `--map-by ppr:N:node`): every
    /// host takes N processes, whatever slots the host list gives it.
    pub per_host: Option<u32>,
}

/// Most replicas of a rank: as many as the replication layer tells apart.
pub const MAX_REPLICAS: u64 = tandem::replica::MAX_REPLICAS as u64;

/// Runs the job; returns the launcher's exit status.
pub fn run(opts: RunOptions) -> i32 {
    match prepare(opts) {
        Ok(config) => match Job::start(config) {
            Ok(job) => job.run(),
            Err(code) => code,
        },
        Err((msg, code)) => {
            eprintln!("tandem: {msg}");
            code
        }
    }
}

/// The job's time limit from `MPIEXEC_TIMEOUT` (seconds), which MPICH's and
/// Open MPI's launchers honour and test suites set, when `--timeout` is not
/// given; empty or unset means none.
fn timeout_from_env(value: Option<std::ffi::OsString>) -> Result<Option<f64>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(s)),
        _ => Err(format!(
            "MPIEXEC_TIMEOUT='{text}' is not a positive number of seconds"
        )),
    }
}

/// Checks the options and works out where every rank goes.
fn prepare(mut opts: RunOptions) -> Result<JobConfig, (String, i32)> {
    let usage = |msg: String| (msg, 2);
    let mut apps = split_apps(
        opts.ranks,
        std::mem::take(&mut opts.program),
        std::mem::take(&mut opts.args),
    )
    .map_err(usage)?;
    if apps.len() > 1 {
        let total = apps
            .iter()
            .try_fold(0u32, |t, a| t.checked_add(a.ranks))
            .filter(|&t| t <= 65536)
            .ok_or_else(|| usage("the programs' ranks add up to more than 65536".into()))?;
        opts.ranks = Some(total);
    }
    // Catch every parameter mistake before anything starts.
    parameters::settings_from_env().map_err(usage)?;
    let mut param_env = parameters::parse_set_items(&opts.set).map_err(usage)?;
    let export = parse_exports(&opts.export).map_err(usage)?;
    param_env.extend(export.iter().cloned());
    let (replicas, replica_timeout) = replication(&param_env).map_err(usage)?;
    let host_list = host_list(&opts).map_err(usage)?;
    let map_by = MapBy::parse(opts.map_by.as_deref().unwrap_or("slot")).map_err(usage)?;
    let mut local_host = hosts::hostname();
    if local_host.is_empty() {
        local_host = "localhost".into();
    }
    let (ranks, multi) = match host_list {
        None => {
            if let (Some(p), Some(n)) = (opts.per_host, opts.ranks) {
                if n.saturating_mul(replicas) > p {
                    return Err(usage(format!(
                        "{n} ranks x {replicas} replica(s) on this one host, but --per-host allows {p}; give more hosts with --host / --hostfile"
                    )));
                }
            }
            let n =
                opts.ranks
                    .or(opts.per_host.map(|p| (p / replicas).max(1)))
                    .ok_or_else(|| {
                        usage(
                    "give the number of ranks with -n N (or hosts with --host / --hostfile)".into(),
                )
                    })?;
            let total = n
                .checked_mul(replicas)
                .filter(|&t| t <= 1 << 20)
                .ok_or_else(|| {
                    usage(format!(
                        "{n} ranks x {replicas} replicas are too many processes"
                    ))
                })?;
            (total, None)
        }
        Some(list) => {
            let placed =
                hosts::place_replicas(&list, opts.ranks, replicas, map_by).map_err(usage)?;
            let total: u32 = placed.iter().map(|p| p.len() as u32).sum();
            if replicas > 1 {
                if let Some((rank, h, count)) = hosts::shared_replicas(&placed, total / replicas) {
                    eprintln!(
                        "tandem: warning: all {replicas} replicas of rank {rank} share host {}; losing that host ends the job ({count} of {} ranks have all their replicas on one host)",
                        list[h].name,
                        total / replicas
                    );
                }
            }
            if let Some(h) = list.iter().find(|h| hosts::is_local(&h.name)) {
                local_host = h.name.clone();
            }
            let mut local_ranks = Vec::new();
            let mut remote = Vec::new();
            for (h, ranks) in list.iter().zip(placed) {
                if ranks.is_empty() {
                    continue;
                }
                if hosts::is_local(&h.name) {
                    local_ranks.extend(ranks);
                } else {
                    remote.push((h.name.clone(), ranks));
                }
            }
            local_ranks.sort_unstable();
            if remote.is_empty() {
                // Every rank is here: exactly the single-host job.
                (total, None)
            } else {
                let agent = remote::split_words(opts.agent.as_deref().unwrap_or(DEFAULT_AGENT))
                    .map_err(usage)?;
                let tandem_path = match opts.remote_tandem.clone() {
                    Some(p) => p,
                    None => std::env::current_exe()
                        .map_err(|e| (format!("cannot find the tandem executable: {e}"), 1))?
                        .into_os_string(),
                };
                let launch_timeout = Duration::from_secs_f64(opts.launch_timeout.unwrap_or(60.0));
                (
                    total,
                    Some(MultiHost {
                        local_ranks,
                        remote,
                        agent,
                        tandem_path,
                        export: export.clone(),
                        launch_timeout,
                    }),
                )
            }
        }
    };
    let timeout = match opts.timeout {
        Some(t) => Some(t),
        None => timeout_from_env(std::env::var_os("MPIEXEC_TIMEOUT")).map_err(usage)?,
    };
    // Ranks start where the launcher is (the helpers on other hosts are
    // told its directory), so the launcher moves there, after it has read
    // the host file named relative to where it was called.
    if let Some(dir) = &opts.wdir {
        // A relative program path that names a file here keeps naming it
        // (else it is looked for in DIR, as the ranks see it).
        for app in &mut apps {
            let path = std::path::Path::new(&app.program);
            if path.is_relative() && path.components().count() > 1 && path.exists() {
                if let Ok(abs) = std::path::absolute(path) {
                    app.program = abs.into_os_string();
                }
            }
        }
        std::env::set_current_dir(dir)
            .map_err(|e| usage(format!("-wdir {}: {e}", dir.display())))?;
    }
    if let Some(msg) = apps.iter().find_map(|a| foreign_mpi::check(&a.program)) {
        return Err((msg, 1));
    }
    Ok(JobConfig {
        ranks,
        replicas,
        replica_timeout,
        local_host,
        tag_output: opts.tag_output,
        timeout,
        command: RankCommand {
            apps,
            env: param_env,
            env_remove: parameters::TOOL_VARS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            original_fd_limit: None,
            secret: String::new(),
        },
        multi,
    })
}

/// The programs of `PROGRAM ARGS : -n N PROGRAM ARGS : ...` (MPMD, as
/// mpirun takes it: `first_ranks` is the first program's `-n`), each with
/// how many ranks run it; one program runs every rank.
fn split_apps(
    first_ranks: Option<u32>,
    program: OsString,
    args: Vec<OsString>,
) -> Result<Vec<App>, String> {
    let mut segments = vec![vec![program]];
    for a in args {
        if a == ":" {
            segments.push(Vec::new());
        } else {
            segments.last_mut().expect("one segment at least").push(a);
        }
    }
    let mut apps = Vec::new();
    for (i, words) in segments.into_iter().enumerate() {
        let mut words = words.into_iter().peekable();
        let mut ranks = if i == 0 { first_ranks } else { None };
        // The first program's options are `tandem run`'s own.
        while let Some(w) = words.peek().and_then(|w| w.to_str()).filter(|_| i > 0) {
            let count = match w {
                "-n" | "-np" | "--np" | "--n" | "-c" => {
                    words.next();
                    words.next()
                }
                _ if w.starts_with("--np=") || w.starts_with("-n=") => {
                    let v = w.split_once('=').map(|(_, v)| OsString::from(v));
                    words.next();
                    v
                }
                _ if w.starts_with('-') => {
                    return Err(format!(
                        "after ':' only -n N may come before the program, not '{w}' (options for every program go before the first)"
                    ))
                }
                _ => break,
            };
            let n = count
                .as_ref()
                .and_then(|c| c.to_str())
                .and_then(|c| c.parse::<u32>().ok())
                .filter(|&n| n >= 1)
                .ok_or_else(|| {
                    format!("program {}: -n takes a number of ranks, at least 1", i + 1)
                })?;
            ranks = Some(n);
        }
        let Some(program) = words.next() else {
            return Err(format!("no program after ':' (program {})", i + 1));
        };
        apps.push(App {
            ranks: ranks.unwrap_or(u32::MAX),
            program,
            args: words.collect(),
            wdir: None,
        });
    }
    if apps.len() > 1 {
        if let Some(i) = apps.iter().position(|a| a.ranks == u32::MAX) {
            return Err(format!(
                "with several programs (':'), give each its number of ranks: -n N PROGRAM : -n M PROGRAM (program {} has none)",
                i + 1
            ));
        }
    }
    Ok(apps)
}

/// The `replicas` parameter (from the environment or `--set`, which
/// `--replicas` becomes), checked, and `replica_timeout_ms`.
fn replication(param_env: &[(String, String)]) -> Result<(u32, Duration), String> {
    let mut vars = Vec::new();
    for (key, value) in parameters::parameter_vars() {
        vars.push((key, value?));
    }
    vars.extend(param_env.iter().cloned());
    let settings = Settings::from_vars(vars)?;
    let replicas = settings.uint("replicas");
    if !(1..=MAX_REPLICAS).contains(&replicas) {
        return Err(format!(
            "replicas: a rank runs as 1 to {MAX_REPLICAS} replicas, not {replicas}"
        ));
    }
    let timeout = Duration::from_millis(settings.uint("replica_timeout_ms"));
    Ok((replicas as u32, timeout))
}

/// The hosts of `--host` and `--hostfile`, if any were given.
fn host_list(opts: &RunOptions) -> Result<Option<Vec<HostSlots>>, String> {
    let mut list: Vec<HostSlots> = Vec::new();
    for h in &opts.hosts {
        list.extend(hosts::parse_host_list(h)?);
    }
    if let Some(path) = &opts.hostfile {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the host file {}: {e}", path.display()))?;
        list.extend(hosts::parse_hostfile(&text, &path.display().to_string())?);
    }
    if list.is_empty() {
        return Ok(None);
    }
    // Repeated hosts (in --host and the file) add up.
    let mut merged: Vec<HostSlots> = Vec::new();
    for h in list {
        match merged.iter_mut().find(|m| m.name == h.name) {
            Some(m) => m.slots = m.slots.saturating_add(h.slots),
            None => merged.push(h),
        }
    }
    if let Some(p) = opts.per_host {
        for h in &mut merged {
            h.slots = p;
        }
    }
    Ok(Some(merged))
}

/// `-x NAME=VALUE` or `-x NAME` (the value of NAME here).
fn parse_exports(items: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in items {
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => match std::env::var(item) {
                Ok(v) => (item.clone(), v),
                Err(_) => continue, // not set here: nothing to pass on
            },
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!("-x: '{name}' is not a variable name"));
        }
        if name.starts_with(tandem::params::ENV_PREFIX) {
            return Err(format!(
                "-x: {name}: set parameters with --set (or TANDEM_* in the environment, which is passed on)"
            ));
        }
        out.push((name, value));
    }
    Ok(out)
}

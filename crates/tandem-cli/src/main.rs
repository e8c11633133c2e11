//! `tandem`: run MPI jobs (`run`), compile MPI programs (`cc`, `cxx`),
//! show the configuration (`info`) and measure (`bench`).

mod compiler;
mod info;
mod install_layout;
mod launcher;
mod mpi_names;
mod parameters;
mod sys;

use std::ffi::OsString;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tandem",
    version,
    about = "Tandem: an MPI library with its own launcher"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROGRAM as N ranks of one job, on this machine or across hosts
    #[command(version = concat!("(Tandem ", env!("CARGO_PKG_VERSION"), ")"))]
    Run(RunArgs),
    /// The per-host helper of a job across hosts (started by `tandem run`
    /// through the agent; reads the job from stdin)
    #[command(name = "_host", hide = true)]
    Host {
        /// The host's name, as the master calls it
        host: String,
    },
    /// Run COMMAND with network namespaces standing in for hosts, removed
    /// afterwards (for scripts; `tandem bench --hosts netns:K` does the same
    /// for the kernels). COMMAND finds them in NETNS_HOSTS (names, space
    /// separated), NETNS_NETWORK (their /24) and NETNS_AGENT
    #[command(name = "_netns", hide = true)]
    Netns {
        /// How many hosts
        #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=64))]
        hosts: u32,
        /// Limit every host's link to this rate (tc tbf), e.g. 1gbit
        #[arg(long, value_name = "RATE")]
        rate: Option<String>,
        /// The token bucket in bytes [default: about 1 ms of the rate]
        #[arg(long, value_name = "BYTES")]
        burst: Option<String>,
        /// The command and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// Compile and link a C program against Tandem (compiler: $TANDEM_CC or cc)
    #[command(disable_help_flag = true)]
    Cc(CompilerArgs),
    /// Compile and link a C++ program against Tandem (compiler: $TANDEM_CXX or c++)
    #[command(name = "cxx", alias = "c++", disable_help_flag = true)]
    Cxx(CompilerArgs),
    /// Compile and link a Fortran program against Tandem: mpif.h, `use mpi`,
    /// `use mpi_f08` (compiler: $TANDEM_FC or gfortran)
    #[command(name = "fc", disable_help_flag = true)]
    Fc(CompilerArgs),
    /// Show the version, the installation and every parameter
    Info {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        /// List the collective algorithms and the selection rules in force
        #[arg(long)]
        coll: bool,
    },
    /// Benchmarks: kernels on Tandem and other MPIs, comparisons, models, a report
    Bench(tandem_bench::BenchArgs),
    /// Write the manual pages (tandem.1, tandem-run.1, ...) into DIR, from
    /// these very definitions (scripts/install.sh installs them)
    #[command(name = "_man", hide = true)]
    Man {
        /// The directory to write them to
        dir: std::path::PathBuf,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Number of ranks (with hosts: at most their slots; default all of them)
    #[arg(short = 'n', short_alias = 'c', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    ranks: Option<u32>,
    /// Hosts and their slots: a:4,b:4 (repeatable). Ranks on hosts other
    /// than this one are started through the agent
    #[arg(short = 'H', long = "host", value_name = "HOST[:SLOTS],...")]
    hosts: Vec<String>,
    /// A file of hosts, one per line: `name`, `name:4` or `name slots=4`; # comments
    #[arg(long, value_name = "FILE")]
    hostfile: Option<std::path::PathBuf>,
    /// Rank placement: slot = fill each host in turn (default), node = round
    /// robin, ppr:N:node = N ranks on every host (as --per-host N), socket =
    /// as slot, a host's ranks taking its sockets in turn
    #[arg(long, value_name = "slot|node|ppr:N:node|socket")]
    map_by: Option<String>,
    /// Pin each rank to its own CPUs (core), to the sockets of its CPUs
    /// (socket), or not at all (none), for example for OpenMP threads;
    /// default: pin where a host has a CPU for every rank (`--set bind`)
    #[arg(long, value_name = "none|core|socket", value_parser = ["none", "core", "hwthread", "socket", "package"])]
    bind_to: Option<String>,
    /// CPUs each rank is pinned to (its threads share them), for hybrid
    /// MPI+OpenMP programs; implies --bind-to core unless given (`--set bind_cpus`)
    #[arg(long = "cpus-per-rank", visible_alias = "cpus-per-proc", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    cpus_per_rank: Option<u32>,
    /// Command that runs a command on a host ({host} is replaced by the host,
    /// else the host is appended) [default: ssh -o BatchMode=yes]
    #[arg(long, value_name = "COMMAND")]
    agent: Option<String>,
    /// Pass variable NAME (with VALUE, or its value here) to every rank (repeatable)
    #[arg(short = 'x', long = "export", value_name = "NAME[=VALUE]")]
    export: Vec<String>,
    /// Seconds the other hosts have to start their ranks [default: 60]
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    launch_timeout: Option<f64>,
    /// The tandem executable on the other hosts [default: this one's path]
    #[arg(long, value_name = "PATH")]
    remote_tandem: Option<OsString>,
    /// Set a parameter for every rank (repeatable; `tandem info` lists them)
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Prefix every output line with "[rank] "
    #[arg(long)]
    tag_output: bool,
    /// Run every rank as R processes, on different hosts where possible, so the job survives losing all but one (1 to 16) [default: 1]
    #[arg(long, value_name = "R")]
    replicas: Option<u64>,
    /// Stop the job (exit status 124) if it runs longer than this
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
    /// Start the ranks in this directory, on every host (default: the current one)
    #[arg(long = "wdir", visible_alias = "wd", value_name = "DIR")]
    wdir: Option<std::path::PathBuf>,
    /// Start N processes on every host, whatever slots the host list gives
    #[arg(long = "per-host", visible_aliases = ["npernode", "ppn"], value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    per_host: Option<u32>,
    /// The program to run (searched on PATH unless it contains a '/') and
    /// its arguments; options after PROGRAM are the program's
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

#[derive(Args)]
struct CompilerArgs {
    /// Compiler arguments; `--showme` prints the command instead of running it
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<OsString>,
}

fn parse_timeout(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(s),
        _ => Err(format!(
            "expected a positive number of seconds, got '{text}'"
        )),
    }
}

fn main() {
    // Called as mpicc, mpicxx, mpifort, mpirun or mpiexec (links the build makes)?
    let mut argv = std::env::args_os();
    if let Some(argv0) = argv.next() {
        if let Some(status) = mpi_names::dispatch(&argv0, argv.collect()) {
            std::process::exit(status);
        }
    }
    let cli = Cli::parse_from(mpirun_spellings(std::env::args_os().collect()));
    let status = match cli.command {
        Command::Run(mut a) => {
            let program = a.command.remove(0);
            if let Some(msg) = unknown_run_option(&program) {
                eprintln!("tandem run: {msg}");
                std::process::exit(2);
            }
            // The `replicas` parameter, as `--set replicas=R` (which it overrides).
            if let Some(r) = a.replicas {
                a.set.push(format!("replicas={r}"));
            }
            let placement = match rank_placement(
                a.map_by.take(),
                a.bind_to.take(),
                a.cpus_per_rank,
                a.per_host,
            ) {
                Ok(p) => p,
                Err(msg) => {
                    eprintln!("tandem run: {msg}");
                    std::process::exit(2);
                }
            };
            a.set.extend(placement.set);
            a.map_by = placement.map_by;
            a.per_host = placement.per_host;
            launcher::run(launcher::RunOptions {
                ranks: a.ranks,
                set: a.set,
                tag_output: a.tag_output,
                timeout: a.timeout,
                program,
                args: a.command,
                hosts: a.hosts,
                hostfile: a.hostfile,
                map_by: a.map_by,
                agent: a.agent,
                export: a.export,
                launch_timeout: a.launch_timeout,
                remote_tandem: a.remote_tandem,
                wdir: a.wdir,
                per_host: a.per_host,
            })
        }
        Command::Host { host } => launcher::host_main(&host),
        Command::Netns {
            hosts,
            rate,
            burst,
            command,
        } => tandem_bench::netns::run_with_hosts(
            hosts as usize,
            rate.as_deref(),
            burst.as_deref(),
            &command,
        ),
        Command::Cc(a) => mpi_names::compiler_wrapper(compiler::Language::C, a.args),
        Command::Cxx(a) => mpi_names::compiler_wrapper(compiler::Language::Cxx, a.args),
        Command::Fc(a) => mpi_names::compiler_wrapper(compiler::Language::Fortran, a.args),
        Command::Info { coll: true, .. } => {
            print!("{}", tandem::coll::describe());
            0
        }
        Command::Info { json, .. } => info::run(json),
        Command::Bench(a) => {
            tandem_bench::main(a, install_layout::locate().map(|layout| layout.include_dir))
        }
        Command::Man { dir } => match write_man_pages(&dir) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("tandem _man: {}: {e}", dir.display());
                1
            }
        },
    };
    std::process::exit(status);
}

/// What `--map-by`, `--bind-to` and `-c` ask for: the host placement
/// the launcher makes, and the parameters that pin ranks on a host.
struct RankPlacement {
    map_by: Option<String>,
    per_host: Option<u32>,
    set: Vec<String>,
}

fn rank_placement(
    map_by: Option<String>,
    bind_to: Option<String>,
    cpus: Option<u32>,
    per_host: Option<u32>,
) -> Result<RankPlacement, String> {
    let mut p = RankPlacement {
        map_by: None,
        per_host,
        set: Vec::new(),
    };
    match map_by.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None => {}
        Some("socket" | "package") => p.set.push("bind_order=socket".into()),
        Some(ppr) if ppr.starts_with("ppr:") => {
            let n = ppr
                .strip_prefix("ppr:")
                .and_then(|r| r.strip_suffix(":node").or(r.strip_suffix(":host")))
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("--map-by: expected ppr:N:node, got '{ppr}'"))?;
            if per_host.is_some_and(|q| q != n) {
                return Err(format!(
                    "--map-by {ppr} and --per-host {} disagree",
                    per_host.unwrap_or(0)
                ));
            }
            p.per_host = Some(n);
        }
        Some(other) => p.map_by = Some(other.to_string()),
    }
    let bind = match bind_to.as_deref() {
        Some("hwthread") => Some("core"),
        Some("package") => Some("socket"),
        Some(b) => Some(b),
        None => cpus.map(|_| "core"),
    };
    if let Some(b) = bind {
        p.set.push(format!("bind={b}"));
    }
    if let Some(n) = cpus {
        if bind == Some("none") {
            return Err(
                "--cpus-per-rank asks for CPUs per rank, --bind-to none for no pinning: pick one"
                    .into(),
            );
        }
        p.set.push(format!("bind_cpus={n}"));
    }
    Ok(p)
}

/// `tandem run`'s options as people type them for mpirun, with one dash
/// (`-np 4`, `-wdir DIR`, `-host a,b`, `-ppn 2`), spelled as clap reads
/// them (`--np 4` ...); only before the program, whose own arguments are
/// left alone.
fn mpirun_spellings(mut argv: Vec<OsString>) -> Vec<OsString> {
    if argv.get(1).is_none_or(|a| a != "run") {
        return argv;
    }
    // Options that take the next word as their value.
    const VALUED: &[&str] = &[
        "-n",
        "--np",
        "-H",
        "--host",
        "--hostfile",
        "--map-by",
        "--agent",
        "-x",
        "--export",
        "--launch-timeout",
        "--remote-tandem",
        "--set",
        "--replicas",
        "--timeout",
        "--wdir",
        "--wd",
        "--per-host",
        "--npernode",
        "--ppn",
        "--bind-to",
        "-c",
        "--cpus-per-rank",
        "--cpus-per-proc",
    ];
    const ONE_DASH: &[(&str, &str)] = &[
        ("-np", "--np"),
        ("-wdir", "--wdir"),
        ("-wd", "--wd"),
        ("-host", "--host"),
        ("-hostfile", "--hostfile"),
        ("-ppn", "--ppn"),
        ("-npernode", "--npernode"),
        ("-bind-to", "--bind-to"),
        ("-map-by", "--map-by"),
        ("-cpus-per-proc", "--cpus-per-proc"),
    ];
    let mut i = 2;
    while i < argv.len() {
        let Some(word) = argv[i].to_str() else {
            break;
        };
        if let Some((_, long)) = ONE_DASH.iter().find(|(short, _)| *short == word) {
            argv[i] = OsString::from(long);
        }
        let word = argv[i].to_str().unwrap_or_default();
        if !word.starts_with('-') {
            break; // the program
        }
        i += if VALUED.contains(&word) { 2 } else { 1 };
    }
    argv
}

/// `tandem.1`, and `tandem-SUB.1` for every visible subcommand, in `dir`.
fn write_man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir)?;
    let root = Cli::command();
    let version = root.get_version().unwrap_or_default().to_string();
    let mut pages = vec![("tandem".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("tandem-{}", sub.get_name());
        pages.push((
            name.clone(),
            sub.clone().name(name).version(version.clone()),
        ));
    }
    for (name, cmd) in pages {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .source(format!("Tandem {version}"))
            .manual("Tandem")
            .render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.1")), page)?;
    }
    Ok(())
}

/// `tandem run` takes the first word it does not know as the program, so
/// a mistyped option would be run as one: a word that starts with '-' and
/// names no file is refused, with the nearest option.
fn unknown_run_option(program: &OsString) -> Option<String> {
    let word = program.to_str()?;
    if !word.starts_with('-') || std::path::Path::new(word).exists() {
        return None;
    }
    let name = word.split('=').next().unwrap_or(word);
    let cli = <Cli as clap::CommandFactory>::command();
    let run = cli.find_subcommand("run")?;
    let options: Vec<String> = run
        .get_arguments()
        .flat_map(|a| {
            let long = a.get_long().map(|l| format!("--{l}"));
            let aliases = a
                .get_visible_aliases()
                .unwrap_or_default()
                .into_iter()
                .map(|l| format!("--{l}"));
            long.into_iter().chain(aliases)
        })
        .collect();
    let nearest = options
        .iter()
        .map(|o| (edit_distance(name, o), o))
        .min()
        .filter(|(d, _)| *d <= 3)
        .map(|(_, o)| format!(" (did you mean {o}?)"))
        .unwrap_or_default();
    Some(format!(
        "unknown option '{name}'{nearest}; `tandem run --help` lists the options (a program whose name starts with '-' needs a path: ./{word})"
    ))
}

/// Levenshtein distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The property tests' settings: a quick run by default, which
/// PROPTEST_CASES raises (scripts/fuzz.sh), and no failure files written
/// under the source tree.
#[cfg(test)]
pub(crate) fn prop_config() -> proptest::prelude::ProptestConfig {
    proptest::prelude::ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_by_bind_to_and_c_become_host_placement_and_parameters() {
        let p = rank_placement(Some("ppr:2:node".into()), None, None, None).unwrap();
        assert_eq!((p.map_by, p.per_host, p.set.len()), (None, Some(2), 0));
        let p = rank_placement(
            Some("socket".into()),
            Some("hwthread".into()),
            Some(4),
            None,
        )
        .unwrap();
        assert_eq!(p.set, ["bind_order=socket", "bind=core", "bind_cpus=4"]);
        let p = rank_placement(Some("node".into()), Some("package".into()), None, None).unwrap();
        assert_eq!(
            (p.map_by.as_deref(), p.set),
            (Some("node"), vec!["bind=socket".to_string()])
        );
        assert!(rank_placement(Some("ppr:x:node".into()), None, None, None).is_err());
        assert!(rank_placement(Some("ppr:2:node".into()), None, None, Some(3)).is_err());
        assert!(rank_placement(None, Some("none".into()), Some(2), None).is_err());
    }

    #[test]
    fn mpirun_spellings_are_read_before_the_program_only() {
        let os = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            mpirun_spellings(os(&[
                "tandem", "run", "-np", "4", "-wdir", "/d", "./a", "-np", "2"
            ])),
            os(&["tandem", "run", "--np", "4", "--wdir", "/d", "./a", "-np", "2"])
        );
        // A value that looks like one of them is a value.
        assert_eq!(
            mpirun_spellings(os(&["tandem", "run", "--set", "-np", "./a"])),
            os(&["tandem", "run", "--set", "-np", "./a"])
        );
        assert_eq!(
            mpirun_spellings(os(&["tandem", "cc", "-np"])),
            os(&["tandem", "cc", "-np"])
        );
    }
}

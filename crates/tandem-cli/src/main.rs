//! `tandem`: run MPI jobs (`run`), compile MPI programs (`cc`, `cxx`),
//! show the configuration (`info`) and measure (`bench`).

mod bench;
mod compiler;
mod info;
mod install_layout;
mod launcher;
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
    /// Run PROGRAM as N ranks of one job on this machine
    Run(RunArgs),
    /// Compile and link a C program against Tandem (compiler: $TANDEM_CC or cc)
    #[command(disable_help_flag = true)]
    Cc(CompilerArgs),
    /// Compile and link a C++ program against Tandem (compiler: $TANDEM_CXX or c++)
    #[command(name = "cxx", alias = "c++", disable_help_flag = true)]
    Cxx(CompilerArgs),
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
    Bench(bench::BenchArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Number of ranks
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    ranks: u32,
    /// Set a parameter for every rank (repeatable; `tandem info` lists them)
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Prefix every output line with "[rank] "
    #[arg(long)]
    tag_output: bool,
    /// Stop the job (exit status 124) if it runs longer than this
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    timeout: Option<f64>,
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
    let cli = Cli::parse();
    let status = match cli.command {
        Command::Run(mut a) => {
            let program = a.command.remove(0);
            launcher::run(launcher::RunOptions {
                ranks: a.ranks,
                set: a.set,
                tag_output: a.tag_output,
                timeout: a.timeout,
                program,
                args: a.command,
            })
        }
        Command::Cc(a) => compiler::run(compiler::Language::C, a.args),
        Command::Cxx(a) => compiler::run(compiler::Language::Cxx, a.args),
        Command::Info { coll: true, .. } => {
            print!("{}", tandem::coll::describe());
            0
        }
        Command::Info { json, .. } => info::run(json),
        Command::Bench(a) => bench::main(a),
    };
    std::process::exit(status);
}

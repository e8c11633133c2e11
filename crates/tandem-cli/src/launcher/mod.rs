//! `tandem run`: starts the ranks of a job on this machine and is the job's
//! master — it serves the key-value/fence protocol of `tandem::bootstrap`,
//! forwards output and stdin, and ends the whole job when any part of it
//! fails.

mod job;
mod kv_service;
mod output;
mod signals;
mod stdin_feed;
mod supervise;

use std::ffi::OsString;

use crate::parameters;
use job::{Job, JobConfig};
use supervise::RankCommand;

/// What `tandem run` was asked to do.
pub struct RunOptions {
    pub ranks: u32,
    pub set: Vec<String>,
    pub tag_output: bool,
    pub timeout: Option<f64>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// Runs the job; returns the launcher's exit status.
pub fn run(opts: RunOptions) -> i32 {
    // Catch every parameter mistake before anything starts.
    if let Err(msg) = parameters::settings_from_env() {
        eprintln!("tandem: {msg}");
        return 2;
    }
    let param_env = match parameters::parse_set_items(&opts.set) {
        Ok(vars) => vars,
        Err(msg) => {
            eprintln!("tandem: {msg}");
            return 2;
        }
    };
    let config = JobConfig {
        ranks: opts.ranks,
        tag_output: opts.tag_output,
        timeout: opts.timeout,
        command: RankCommand {
            program: opts.program,
            args: opts.args,
            env: param_env,
            env_remove: parameters::TOOL_VARS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            original_fd_limit: None,
        },
    };
    match Job::start(config) {
        Ok(job) => job.run(),
        Err(code) => code,
    }
}

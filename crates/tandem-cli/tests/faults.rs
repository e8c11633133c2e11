//! Fault injection: a rank killed, stopped or exiting at a random step of
//! a collective-heavy and a one-sided-heavy program (tests/c/fault_inject.c),
//! under every transport and progress policy. Each run must end (within 2 s
//! of a death, at the timeout for a stopped rank), with a non-zero status
//! and a message naming the rank, and leave no process behind.
//!
//! By default every scenario (program x fault) runs `FAULT_SEEDS` (20)
//! seeds, the transport and policy turning with the seed; with
//! `FAULT_ALL_CONFIGS=1` every seed runs under all eight configurations.
//! `FAULT_SEEDS=100 FAULT_ALL_CONFIGS=1 cargo test --release -p tandem-cli
//! --test faults` is the long run.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

/// Ranks of every run.
const RANKS: u32 = 3;
/// Steps of the program (ITERS x STEPS in fault_inject.c).
const STEPS: u64 = 60 * 6;
/// The job's timeout when a rank is stopped: the fault comes within the
/// first STOP_STEPS steps, which take well under 0.1 s on an idle machine;
/// the margin is for a loaded one.
const STOP_TIMEOUT_S: f64 = 3.0;
/// Steps a stopped rank may run before it stops.
const STOP_STEPS: u64 = 120;

const CONFIGS: [(&str, &str); 8] = [
    ("shm", "adaptive"),
    ("tcp", "adaptive"),
    ("shm", "poll"),
    ("tcp", "poll"),
    ("shm", "thread"),
    ("tcp", "thread"),
    ("shm", "signal"),
    ("tcp", "signal"),
];

/// splitmix64: the victim and the step of a seed.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// One run: what went wrong, if anything.
fn check_run(
    prog: &std::path::Path,
    workload: &str,
    fault: &str,
    seed: u64,
    (transport, policy): (&str, &str),
) -> Option<String> {
    let r = mix(seed ^ mix(workload.len() as u64 * 31 + fault.len() as u64));
    let victim = (r % u64::from(RANKS)) as u32;
    let step = (r >> 8) % if fault == "stop" { STOP_STEPS } else { STEPS };
    let transports = format!(
        "transports={}",
        if transport == "shm" { "shm,tcp" } else { "tcp" }
    );
    let progress = format!("progress={policy}");
    let timeout = STOP_TIMEOUT_S.to_string();
    let mut extra = vec!["--set", &transports, "--set", &progress];
    if fault == "stop" {
        extra.extend(["--timeout", &timeout]);
    }
    let victim_arg = victim.to_string();
    let step_arg = step.to_string();
    let outcome = run(
        RANKS,
        &extra,
        prog,
        &[workload, &victim_arg, fault, &step_arg],
        Duration::from_secs(20),
    );
    let mut problems = Vec::new();
    if outcome.status.success() {
        problems.push("the job succeeded".to_string());
    }
    if !outcome.leftovers.is_empty() {
        problems.push(format!("processes left: {:?}", outcome.leftovers));
    }
    if outcome.output().contains(": FAIL ") || outcome.has_line("PASS fault_inject") {
        problems.push("a rank went on past the fault as if nothing happened".into());
    }
    let marker = format!("rank {victim}: fault {fault} at ");
    let fault_at: Option<f64> = outcome
        .stdout
        .lines()
        .find_map(|l| l.split(&marker).nth(1))
        .and_then(|t| t.trim().parse().ok());
    let err = &outcome.stderr;
    match (fault, fault_at) {
        (_, None) => problems.push(format!("no \"{marker}T\" line")),
        ("stop", Some(_)) => {
            if outcome.code() != Some(124) {
                problems.push(format!("status {} (expected 124)", outcome.status));
            }
            if !err.contains(&format!("(rank {victim} is stopped)")) {
                problems.push(format!(
                    "the timeout does not name rank {victim} as stopped"
                ));
            }
            let limit = Duration::from_secs_f64(STOP_TIMEOUT_S + 2.0);
            if outcome.elapsed > limit {
                problems.push(format!("took {:?} (limit {limit:?})", outcome.elapsed));
            }
        }
        (_, Some(at)) => {
            let after = epoch_secs(outcome.ended_at) - at;
            if after > 2.0 {
                problems.push(format!("ended {after:.3} s after the fault (limit 2 s)"));
            }
            let named = match fault {
                "kill" => err.contains("SIGKILL") || err.contains("signal 9"),
                _ => err.contains("exited with status 3"),
            };
            if !mentions_rank(err, victim) || !named {
                problems.push(format!(
                    "stderr does not name rank {victim} and its {fault}"
                ));
            }
        }
    }
    (!problems.is_empty()).then(|| {
        format!(
            "{workload} {fault} seed {seed} ({transport}, {policy}), rank {victim} at step {step}: {}\n{}",
            problems.join("; "),
            outcome.describe()
        )
    })
}

fn scenario(workload: &str, fault: &str) {
    let prog = compile("fault_inject");
    let seeds = env_number("FAULT_SEEDS", 20);
    let all = env_number("FAULT_ALL_CONFIGS", 0) != 0;
    let mut failures = Vec::new();
    let mut runs = 0;
    for seed in 0..seeds {
        let configs: Vec<(&str, &str)> = if all {
            CONFIGS.to_vec()
        } else {
            vec![CONFIGS[(seed % CONFIGS.len() as u64) as usize]]
        };
        for config in configs {
            runs += 1;
            if let Some(f) = check_run(&prog, workload, fault, seed, config) {
                failures.push(f);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs went wrong; the first:\n{}",
        failures.len(),
        failures[0]
    );
}

#[test]
fn collectives_killed_rank() {
    scenario("coll", "kill");
}

#[test]
fn collectives_exiting_rank() {
    scenario("coll", "exit");
}

#[test]
fn collectives_stopped_rank() {
    scenario("coll", "stop");
}

#[test]
fn one_sided_killed_rank() {
    scenario("rma", "kill");
}

#[test]
fn one_sided_exiting_rank() {
    scenario("rma", "exit");
}

#[test]
fn one_sided_stopped_rank() {
    scenario("rma", "stop");
}

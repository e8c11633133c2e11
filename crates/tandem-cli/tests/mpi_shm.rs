//! The shared-memory transport, end to end: oversubscribed rings, waiting
//! that does not burn the CPU a computing rank needs, and nothing left in
//! /dev/shm by any job, including killed ones. (The point-to-point suite in
//! `mpi_p2p.rs` already runs over shared memory, with and without
//! single-copy reads, and over TCP.)

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{compile, compile_source, repo_root, run, JOB_TIMEOUT};

fn example(name: &str) -> std::path::PathBuf {
    compile_source(
        &repo_root().join("examples").join(format!("{name}.c")),
        name,
    )
}

fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// 8 ranks on this 2-core machine pass a token many times around a ring;
/// the program checks the token's final value.
#[test]
fn ring_of_8_ranks_on_2_cores() {
    let prog = example("ring");
    for transport in [&[][..], &["--set", "transports=tcp"][..]] {
        let outcome = run(8, transport, &prog, &["4000"], JOB_TIMEOUT);
        assert!(outcome.status.success(), "{}", outcome.describe());
        assert!(
            outcome.stdout.contains("ring: 8 ranks, 4000 hops"),
            "{}",
            outcome.describe()
        );
    }
}

/// Ranks waiting in a barrier while one computes: the job completes and
/// reports the waiters' CPU time (the figure itself is a benchmark, not a test).
#[test]
fn waiters_in_a_barrier_let_a_computing_rank_finish() {
    let prog = example("barrier_wait");
    let outcome = run(6, &[], &prog, &["0.2"], JOB_TIMEOUT);
    assert!(outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.stdout.contains("the 5 waiters used"),
        "{}",
        outcome.describe()
    );
}

/// Neither a finished nor a killed job leaves anything under /dev/shm.
#[test]
fn no_files_left_in_dev_shm() {
    let before = dev_shm();
    let ok = compile("pingpong_sizes");
    let outcome = run(3, &[], &ok, &["65536"], JOB_TIMEOUT);
    assert!(outcome.status.success(), "{}", outcome.describe());
    let killed = compile("killed_rank");
    let outcome = run(3, &[], &killed, &[], Duration::from_secs(30));
    assert!(!outcome.status.success());
    let after = dev_shm();
    let new: Vec<_> = after.difference(&before).collect();
    assert!(new.is_empty(), "left in /dev/shm: {new:?}");
}

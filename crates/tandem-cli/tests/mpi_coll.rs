//! Collectives end to end: the self-checking C programs `coll_*.c` and
//! `persistent_coll.c` built with `tandem cc` and run with `tandem run`,
//! once per algorithm of the catalogue (forced with
//! `--set coll_<op>=<algorithm>`), with the built-in rules, and with a rules
//! file.
//!
//! `coll_all` loops internally over every communicator size from 1 to the
//! job's size (sub-communicators from `MPI_Comm_split`), so one 9-rank run
//! covers sizes 1 to 9 for every collective.

mod common;

use common::{assert_pass, compile, run, JOB_TIMEOUT};

/// Every algorithm of every operation with a choice, in three runs (the
/// first, second and third algorithm of each operation's list).
const FORCED: [&[&str]; 3] = [
    &[
        "coll_barrier=linear",
        "coll_bcast=linear",
        "coll_reduce=linear",
        "coll_allreduce=reduce_bcast",
        "coll_gather=linear",
        "coll_scatter=linear",
        "coll_allgather=ring",
        "coll_alltoall=linear",
        "coll_alltoallv=linear",
        "coll_reduce_scatter=reduce_scatterv",
    ],
    &[
        "coll_barrier=binomial",
        "coll_bcast=binomial",
        "coll_reduce=binomial",
        "coll_allreduce=recursive_doubling",
        "coll_gather=binomial",
        "coll_scatter=binomial",
        "coll_allgather=recursive_doubling",
        "coll_alltoall=pairwise",
        "coll_alltoallv=pairwise",
        "coll_reduce_scatter=ring",
    ],
    &[
        "coll_barrier=dissemination",
        "coll_bcast=scatter_allgather",
        "coll_allreduce=ring",
        "coll_allgather=bruck",
        "coll_alltoall=bruck",
    ],
];

fn set_args(settings: &[&str]) -> Vec<String> {
    settings
        .iter()
        .flat_map(|s| ["--set".to_string(), s.to_string()])
        .collect()
}

fn run_coll_all(np: u32, settings: &[&str], args: &[&str]) -> common::Outcome {
    let prog = compile("coll_all");
    let extra = set_args(settings);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let outcome = run(np, &extra, &prog, args, JOB_TIMEOUT);
    assert_pass(&outcome, "coll_all");
    outcome
}

#[test]
fn coll_all_first_algorithms_sizes_1_to_9() {
    run_coll_all(9, FORCED[0], &[]);
}

#[test]
fn coll_all_second_algorithms_sizes_1_to_9() {
    let outcome = run_coll_all(9, FORCED[1], &[]);
    // recursive doubling cannot serve 9 ranks: one warning, then the rules.
    assert!(
        outcome
            .stderr
            .contains("coll_allgather=recursive_doubling cannot serve this call"),
        "{}",
        outcome.describe()
    );
}

#[test]
fn coll_all_third_algorithms_sizes_1_to_9() {
    run_coll_all(9, FORCED[2], &[]);
}

#[test]
fn coll_all_automatic_choice_sizes_1_to_9() {
    run_coll_all(9, &[], &[]);
}

#[test]
fn coll_all_automatic_choice_sizes_1_to_4() {
    run_coll_all(4, &[], &["262144"]);
}

#[test]
fn coll_all_with_a_rules_file() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("coll_rules_test.json");
    std::fs::write(
        &path,
        r#"{
  "bcast": [ { "comm_max": 2, "algorithm": "linear" }, { "bytes_max": 4000, "algorithm": "scatter_allgather" }, { "algorithm": "binomial" } ],
  "allreduce": [ { "bytes_min": 1, "bytes_max": 100, "algorithm": "ring" }, { "algorithm": "reduce_bcast" } ],
  "alltoall": [ { "algorithm": "bruck" } ]
}"#,
    )
    .unwrap();
    let rules = format!("coll_rules={}", path.display());
    run_coll_all(5, &[&rules], &["65536"]);
}

#[test]
fn a_bad_rules_file_is_a_clear_error() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("coll_rules_bad.json");
    std::fs::write(&path, r#"{ "bcast": [ { "algorithm": "telepathy" } ] }"#).unwrap();
    let prog = compile("coll_all");
    let rules = format!("coll_rules={}", path.display());
    let outcome = run(2, &["--set", &rules], &prog, &[], JOB_TIMEOUT);
    assert!(!outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.stderr.contains("telepathy") && outcome.stderr.contains("coll_rules"),
        "{}",
        outcome.describe()
    );
    assert!(outcome.leftovers.is_empty(), "{}", outcome.describe());
}

#[test]
fn coll_ops_np1() {
    let outcome = run(1, &[], &compile("coll_ops"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "coll_ops");
}

#[test]
fn coll_ops_np4() {
    let outcome = run(4, &[], &compile("coll_ops"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "coll_ops");
}

#[test]
fn coll_ops_np7_forced_linear_and_ring() {
    let extra = set_args(&[
        "coll_reduce=linear",
        "coll_allreduce=ring",
        "coll_allgather=bruck",
    ]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let outcome = run(7, &extra, &compile("coll_ops"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "coll_ops");
}

/// MPI_Alltoallw with a datatype per peer, in place and not: on 3 ranks
/// (in place with contiguous types once returned the receiver's own data
/// from 3 on), on 4 over TCP with the pairwise algorithm, and on 5.
#[test]
fn alltoallw_np3() {
    let outcome = run(3, &[], &compile("alltoallw"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "alltoallw");
}

#[test]
fn alltoallw_np4_tcp_pairwise() {
    let extra = set_args(&["transports=tcp", "coll_alltoallv=pairwise"]);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let outcome = run(4, &extra, &compile("alltoallw"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "alltoallw");
}

#[test]
fn alltoallw_np5() {
    let outcome = run(5, &[], &compile("alltoallw"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "alltoallw");
}

/// Persistent collectives: started five times each with new data in the
/// bound buffers, on one rank, an odd number, and over TCP with the
/// second algorithm of each operation forced.
#[test]
fn persistent_coll_np1() {
    let outcome = run(1, &[], &compile("persistent_coll"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "persistent_coll");
}

#[test]
fn persistent_coll_np3() {
    let outcome = run(3, &[], &compile("persistent_coll"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "persistent_coll");
}

#[test]
fn persistent_coll_np4_tcp_forced() {
    let mut settings = FORCED[1].to_vec();
    settings.push("transports=tcp");
    let extra = set_args(&settings);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let outcome = run(4, &extra, &compile("persistent_coll"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "persistent_coll");
}

/// examples/coll_loop.c, the per-call timing of small collectives, runs
/// every operation it offers and checks its allreduce result.
#[test]
fn coll_loop_example_runs_every_operation() {
    let prog = common::compile_source(
        &common::repo_root().join("examples/coll_loop.c"),
        "coll_loop",
    );
    for op in ["barrier", "bcast", "allreduce", "alltoall"] {
        let outcome = run(3, &[], &prog, &["200", op, "16"], JOB_TIMEOUT);
        assert!(outcome.status.success(), "{op}: {}", outcome.describe());
        let lines = outcome
            .stdout
            .lines()
            .filter(|l| {
                l.starts_with(&format!("{op} 16 B, 3 ranks: ")) && l.ends_with(" us per call")
            })
            .count();
        assert_eq!(lines, 3, "{op}: {}", outcome.describe());
    }
}

/// Small blocking collectives on shared flags (`coll_shm_max`): results
/// checked call by call while members run ahead of each other, across the
/// size limit, in place, with a non-commutative operation, beside a
/// non-blocking collective, on communicators made and freed in a loop, and
/// with counts that disagree; on 2 ranks, on 5 sharing the 2 cores, under
/// the helper-thread and signal policies, and the same program by the
/// message algorithms (limit 0, and over TCP).
#[test]
fn coll_shm_on_shared_flags_and_by_messages() {
    let prog = compile("coll_shm");
    // (ranks, parameters, whether the flags serve the calls)
    for (np, settings, flags) in [
        (2, &[][..], true),
        (5, &[][..], true),
        (3, &["progress=thread"][..], true),
        (3, &["progress=signal"][..], true),
        (3, &["coll_shm_max=0"][..], false),
        (3, &["transports=tcp"][..], false),
    ] {
        let mut settings = settings.to_vec();
        settings.push("stats=1");
        let extra = set_args(&settings);
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let outcome = run(np, &extra, &prog, &[], JOB_TIMEOUT);
        assert!(
            outcome.status.success() && outcome.has_line("PASS coll_shm"),
            "np {np} {settings:?}: {}",
            outcome.describe()
        );
        // The counters table's total of collectives run on the flags.
        let total: u64 = outcome
            .stderr
            .lines()
            .find(|l| l.starts_with("coll_flag_calls "))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no coll_flag_calls counter: {}", outcome.describe()));
        assert_eq!(
            total > 0,
            flags,
            "np {np} {settings:?}: {total} calls on flags"
        );
    }
}

/// A non-blocking collective started before a barrier on one rank and
/// after it on the others (mpi4py's emulated `Iagree` test).
#[test]
fn nonblocking_collectives_are_numbered_apart_from_blocking_ones() {
    let prog = compile("nbc_apart");
    for np in [1, 2, 3] {
        assert_pass(&run(np, &[], &prog, &[], JOB_TIMEOUT), "nbc_apart");
    }
    let tcp = ["--set", "transports=tcp"];
    assert_pass(&run(3, &tcp, &prog, &[], JOB_TIMEOUT), "nbc_apart");
}

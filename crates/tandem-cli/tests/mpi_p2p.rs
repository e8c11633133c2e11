//! Point-to-point MPI, end to end: the self-checking C programs of
//! `tests/c/` built with `tandem cc` and run with `tandem run`, the failure
//! scenarios (fatal error, killed rank, MPI_Abort, strangers on the job's
//! ports), the ABI layout check and the ping-pong example.
//!
//! Every job runs under a deadline (60 s; the failure scenarios must also end
//! within a few seconds), and no process of a job may outlive it.

mod common;

use std::net::TcpListener;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{
    alive, assert_pass, compile, compile_source, counter_total, mentions_rank, printed_pids,
    repo_root, run, run_command, Outcome, JOB_TIMEOUT,
};

/// The transport configurations every program runs under: shared memory
/// (the default on one host: each receiver sends rendezvous messages the way
/// it measured faster, single copy or the rings, so both run), shared memory
/// with the rings only, with single-copy reads from 64 KiB on, TCP
/// everywhere, and
/// TCP driven by the select-style engine under the `poll` policy, both
/// transports under the `thread` policy (a helper thread drives them too,
/// and non-blocking receives on shared memory ask senders to write into
/// them), and both under the `signal` policy (rendezvous starts on shared
/// memory advanced by a signal handler; TCP advanced by MPI calls).
const TRANSPORTS: &[&[&str]] = &[
    &[],
    &["--set", "shm_path_choice=0"],
    &["--set", "shm_single_copy_min=64k"],
    &["--set", "transports=tcp"],
    &[
        "--set",
        "transports=tcp",
        "--set",
        "progress=poll",
        "--set",
        "tcp_poller=select",
    ],
    &["--set", "progress=thread"],
    &["--set", "transports=tcp", "--set", "progress=thread"],
    &["--set", "progress=signal"],
    &["--set", "transports=tcp", "--set", "progress=signal"],
];

/// Builds `tests/c/<name>.c`, runs it on `np` ranks under every transport
/// configuration and expects `PASS <name>` each time.
fn run_pass(name: &str, np: u32, args: &[&str]) {
    let prog = compile(name);
    for transport in TRANSPORTS {
        // Shown with the failure, so it says which configuration broke.
        eprintln!(
            "{name} on {np} ranks, launcher options [{}]",
            transport.join(" ")
        );
        let outcome = run(np, transport, &prog, args, JOB_TIMEOUT);
        assert_pass(&outcome, name);
    }
}

macro_rules! pass_tests {
    ($($test:ident: $name:literal, $np:literal $(, $arg:literal)*;)*) => {
        $(
            #[test]
            fn $test() {
                run_pass($name, $np, &[$($arg),*]);
            }
        )*
    };
}

pass_tests! {
    // The full 16 MiB sweep twice per run (2 and 4 ranks); 3 ranks up to 1 MiB.
    pingpong_sizes_np2: "pingpong_sizes", 2;
    pingpong_sizes_np3: "pingpong_sizes", 3, "1048576";
    pingpong_sizes_np4: "pingpong_sizes", 4;
    // Windows of rendezvous messages, some read in place while others stream
    // through the rings (on shared memory with the default path choice).
    mixed_ways_np2: "mixed_ways", 2;
    // Sent from and received into memory no other process may read or
    // write (memfd_secret): single copy falls back to the rings.
    secret_buffers_np2: "secret_buffers", 2;
    secret_receive_buffers_np2: "secret_buffers", 2, "receive";
    rma_np2: "rma", 2;
    rma_np3: "rma", 3;
    // Scattered datatypes on the target: packed operations, every element checked.
    rma_scattered_np2: "rma_scattered", 2;
    rma_scattered_np3: "rma_scattered", 3;
    // 64 KiB-2 MiB gets (read straight from a target on this host) and
    // puts, many outstanding, every byte checked; then through the engine.
    rma_large_np2: "rma_large", 2;
    rma_large_np3: "rma_large", 3;
    rma_large_np2_engine: "rma_large", 2, "--set", "shm_single_copy=0";
    rma_large_np3_tcp: "rma_large", 3, "--set", "transports=tcp";
    rma_request_np2: "rma_request", 2;
    rma_request_np3: "rma_request", 3;
    // Windows from MPI_Win_allocate between ranks of one host are shared
    // memory, operated on directly: these go through the engine instead.
    rma_scattered_np3_engine: "rma_scattered", 3, "--set", "rma_direct=0";
    rma_request_np2_engine: "rma_request", 2, "--set", "rma_direct=0";
    rma_self_progress_np3_engine: "rma_self_progress", 3, "--set", "rma_direct=0";
    // A target polling its own window serves the others' operations.
    rma_self_progress_np3: "rma_self_progress", 3;
    rma_self_progress_np4: "rma_self_progress", 4;
    // MPI_Win_sync polling loops see puts and local stores.
    win_sync_np2: "win_sync", 2;
    win_sync_np3: "win_sync", 3;
    rwapi_np2_with_64mib: "rwapi_basic", 2, "big";
    rwapi_np3_with_mpi: "rwapi_basic", 3, "mpi";
    // MPI_THREAD_SERIALIZED: three threads per rank take turns making the
    // calls (requests started by one, completed by the next; errors and a
    // user error handler from threads other than the one that set them).
    serialized_threads_np2: "serialized_threads", 2;
    serialized_threads_np3: "serialized_threads", 3;
    // MPI_THREAD_MULTIPLE: threads call at once; blocking receives, sends,
    // probes, Waitany/Waitall and collectives on per-thread communicators
    // let the other threads in (each part hangs where a blocked call keeps
    // the library).
    thread_multiple_np2: "thread_multiple", 2;
    thread_multiple_np3: "thread_multiple", 3;
    // Ranks asking for different thread levels still meet in blocking
    // collectives (they hung where one rank ran them as schedules and the
    // others over shared flags).
    thread_levels_mixed_np2: "thread_levels_mixed", 2;
    thread_levels_mixed_np4: "thread_levels_mixed", 4;
    wildcards_np2: "wildcards", 2;
    wildcards_np3: "wildcards", 3;
    wildcards_np4: "wildcards", 4;
    ordering_np2: "ordering", 2;
    ordering_np3: "ordering", 3;
    ordering_np4: "ordering", 4;
    truncate_np2: "truncate", 2;
    truncate_np3: "truncate", 3;
    truncate_np4: "truncate", 4;
    // A wait for a cancelled send ends: unreceived rendezvous sends are
    // cancelled and never delivered, received ones delivered whole.
    cancel_send_np2: "cancel_send", 2;
    probe_np2: "probe", 2;
    probe_np3: "probe", 3;
    probe_np4: "probe", 4;
    mprobe_np2: "mprobe", 2;
    mprobe_np3: "mprobe", 3;
    isendrecv_np1: "isendrecv", 1;
    isendrecv_np2: "isendrecv", 2;
    isendrecv_np3: "isendrecv", 3;
    request_status_np1: "request_status", 1;
    request_status_np2: "request_status", 2;
    request_status_np3: "request_status", 3;
    many_requests_np1: "many_requests", 1;
    many_requests_np2: "many_requests", 2;
    many_requests_np3: "many_requests", 3;
    many_requests_np4: "many_requests", 4;
    self_send_np1: "self_send", 1;
    self_send_np2: "self_send", 2;
    self_send_np3: "self_send", 3;
    self_send_np4: "self_send", 4;
    ssend_rsend_np2: "ssend_rsend", 2;
    ssend_rsend_np3: "ssend_rsend", 3;
    ssend_rsend_np4: "ssend_rsend", 4;
    comm_dup_np2: "comm_dup", 2;
    comm_dup_np3: "comm_dup", 3;
    comm_dup_np4: "comm_dup", 4;
    comm_idup_np1: "comm_idup", 1;
    comm_idup_np2: "comm_idup", 2;
    comm_idup_np3: "comm_idup", 3;
    comm_idup_np4: "comm_idup", 4;
    comm_create_group_np1: "comm_create_group", 1;
    comm_create_group_np3: "comm_create_group", 3;
    comm_create_group_np4: "comm_create_group", 4;
    errors_np1: "errors", 1;
    errors_np2: "errors", 2;
    errors_np3: "errors", 3;
    errors_np4: "errors", 4;
    errhandlers_np1: "errhandlers", 1;
    errhandlers_np2: "errhandlers", 2;
    errhandlers_np3: "errhandlers", 3;
    init_query_np1: "init_query", 1;
    init_query_np2: "init_query", 2;
    init_query_np3: "init_query", 3;
    init_query_np4: "init_query", 4;
    // Programs that need 2 ranks skip cleanly (and still say PASS) on 1.
    ordering_np1_skips: "ordering", 1;
}

/// Unexpected messages beyond the receiver's budget: with a 256 KiB
/// budget, 9.4 MiB of messages sent before any receive is posted still
/// arrive intact and in order.
#[test]
fn flow_control_holds_back_senders_without_loss() {
    let prog = compile("flow_control");
    for np in [2, 3] {
        let outcome = run(
            np,
            &["--set", "unexpected_limit=256k"],
            &prog,
            &[],
            JOB_TIMEOUT,
        );
        assert_pass(&outcome, "flow_control");
    }
}

/// A correct program whose receiver waits for a message sent after more
/// unexpected data than it buffers finishes (flood_order.c): once a
/// sender's share of the budget is spent its messages go by rendezvous, so
/// matching reaches the one the receiver waits for. On shared memory and
/// TCP; tags out of order, MPI_ANY_SOURCE, and a receiver that posts
/// nothing until everything was sent; also with 3 ranks (a share is a
/// third of the budget) and at the default budget.
#[test]
fn a_message_behind_more_than_the_budget_still_arrives() {
    let prog = compile("flood_order");
    let cases: &[(u32, &[&str], &[&str])] = &[
        (2, &["--set", "unexpected_limit=1m"], &["100", "16384"]),
        (
            2,
            &["--set", "unexpected_limit=1m", "--set", "transports=tcp"],
            &["100", "16384"],
        ),
        (
            2,
            &["--set", "unexpected_limit=1m"],
            &["100", "16384", "any"],
        ),
        (
            2,
            &["--set", "unexpected_limit=1m", "--set", "transports=tcp"],
            &["300", "8192", "late"],
        ),
        (
            3,
            &["--set", "unexpected_limit=256k"],
            &["500", "4096", "any"],
        ),
        (2, &[], &["5000", "16384"]),
        (2, &["--set", "transports=tcp"], &["1200", "65536"]),
    ];
    for (np, set, args) in cases {
        let outcome = run(*np, set, &prog, args, JOB_TIMEOUT);
        assert_pass(&outcome, "flood_order");
    }
}

/// Fails unless the job failed as a failure scenario should: not success,
/// neither PASS nor FAIL printed, no process left behind, and every pid the
/// ranks printed gone.
fn assert_failed_cleanly(outcome: &Outcome, name: &str) {
    assert!(
        !outcome.status.success(),
        "{name}: the job should have failed\n{}",
        outcome.describe()
    );
    assert!(
        !outcome.has_line(&format!("PASS {name}")),
        "{name}: printed PASS although it should have been stopped\n{}",
        outcome.describe()
    );
    assert!(
        !outcome.output().contains(": FAIL "),
        "{name}: the program reported a failed check (an MPI call returned where it should not have)\n{}",
        outcome.describe()
    );
    assert!(
        outcome.leftovers.is_empty(),
        "{name}: processes outlived the job\n{}",
        outcome.describe()
    );
    for pid in printed_pids(&outcome.stdout) {
        assert!(
            !alive(pid),
            "{name}: rank process {pid} still alive\n{}",
            outcome.describe()
        );
    }
}

/// Runs `tests/c/<name>.c` on `np` ranks, expecting the job to fail
/// cleanly and soon (a hang would run into the job timeout).
fn run_expect_fatal(name: &str, np: u32) -> Outcome {
    let prog = compile(name);
    let outcome = run(np, &[], &prog, &[], JOB_TIMEOUT);
    assert_failed_cleanly(&outcome, name);
    assert!(
        outcome.elapsed < Duration::from_secs(10),
        "{name}: the job took {:?} to end\n{}",
        outcome.elapsed,
        outcome.describe()
    );
    outcome
}

#[test]
fn fatal_error_ends_the_job_naming_rank_function_and_reason() {
    let outcome = run_expect_fatal("fatal_error", 3);
    // The program's own lines go to stdout; the error report must be on stderr.
    let err = &outcome.stderr;
    let reason = ["MPI_ERR_RANK", "invalid rank", "99"];
    assert!(
        err.contains("MPI_Send") && mentions_rank(err, 1) && reason.iter().any(|r| err.contains(r)),
        "stderr should name rank 1, MPI_Send and the reason (one of {reason:?})\n{}",
        outcome.describe()
    );
}

#[test]
fn an_mpi_call_from_a_user_reduction_ends_the_job_naming_it() {
    // It used to wait for ever on the library its own thread held.
    let outcome = run_expect_fatal("callback_reentry", 2);
    assert!(
        outcome.stderr.contains("MPI_Comm_get_name") && outcome.stderr.contains("callback"),
        "stderr should name MPI_Comm_get_name and the callback\n{}",
        outcome.describe()
    );
}

#[test]
fn a_user_reduction_may_ask_about_its_datatype() {
    for np in [1, 3] {
        let outcome = run(np, &[], &compile("reduction_queries"), &[], JOB_TIMEOUT);
        assert_pass(&outcome, "reduction_queries");
    }
}

#[test]
fn a_put_of_a_million_scattered_blocks_completes_at_the_fence() {
    // The million blocks travel packed (strided blocks in a few frames).
    let prog = compile("rma_transpose");
    for options in [
        &[][..],
        &["--set", "progress=thread"][..],
        &["--set", "transports=tcp"][..],
    ] {
        let outcome = run(2, options, &prog, &[], JOB_TIMEOUT);
        assert_pass(&outcome, "rma_transpose");
    }
}

/// Seconds since the epoch.
fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

#[test]
fn killed_rank_ends_the_job_within_two_seconds() {
    let prog = compile("killed_rank");
    let outcome = run(3, &[], &prog, &[], JOB_TIMEOUT);
    assert_failed_cleanly(&outcome, "killed_rank");
    assert!(
        outcome.elapsed < Duration::from_secs(5),
        "the job took {:?} in all (limit 5 s)\n{}",
        outcome.elapsed,
        outcome.describe()
    );
    let killed_at: f64 = outcome
        .stdout
        .lines()
        .find_map(|l| l.split("rank 1: raising SIGKILL at ").nth(1))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no \"rank 1: raising SIGKILL at T\" line\n{}",
                outcome.describe()
            )
        });
    let after = epoch_secs(outcome.ended_at) - killed_at;
    assert!(
        after < 2.0,
        "tandem run ended {after:.3} s after rank 1 killed itself (limit 2 s)\n{}",
        outcome.describe()
    );
    let err = &outcome.stderr;
    assert!(
        mentions_rank(err, 1) && (err.contains("SIGKILL") || err.contains("signal 9")),
        "stderr should name rank 1 and SIGKILL (or signal 9)\n{}",
        outcome.describe()
    );
}

/// RWAPI between two nodes on one host: a write is a copy into the
/// target's mapped heap, so the target sees the data while it makes no
/// call at all (and refusals are known when the write returns). Through the
/// engine (TCP, `rwapi_direct=0`, blocks too big for the heap) the same
/// program checks the same data with the target driving progress.
#[test]
fn rwapi_direct_writes_need_no_target_call() {
    let prog = compile("rwapi_direct");
    let configs: &[(&[&str], &[&str])] = &[
        (&[], &["nocalls"]),
        (&["--set", "progress=thread"], &["nocalls"]),
        (&["--set", "progress=signal"], &["nocalls"]),
        (&["--set", "transports=tcp"], &[]),
        (&["--set", "rwapi_direct=0"], &[]),
        // The 8 MiB block does not fit: private memory, through the engine.
        (&["--set", "rwapi_heap=1m"], &[]),
    ];
    for (opts, args) in configs {
        eprintln!(
            "rwapi_direct, launcher options [{}] {args:?}",
            opts.join(" ")
        );
        let outcome = run(2, opts, &prog, args, JOB_TIMEOUT);
        assert_pass(&outcome, "rwapi_direct");
    }
}

/// Large RWAPI writes between two nodes of one host that both poll: the
/// target copies chunks of each write for its writer (`rwapi_helped`), and
/// every write still lands whole before its last byte. Through the engine
/// (TCP), without sharing (`shm_copy_help_min=0`, as on a host with more
/// ranks than CPUs) and on the plain direct path the same data arrives, and
/// no chunk is shared. A one-way stream (the target answers with small
/// messages, never writing back) is shared too: the writer asks its target
/// to map its heap.
#[test]
fn rwapi_large_writes_are_shared_with_a_polling_target() {
    let prog = compile("rwapi_shared");
    for (opts, args, shared) in [
        (&[][..], &[][..], true),
        (&[][..], &["oneway"][..], true),
        (&["--set", "progress=thread"][..], &[][..], true),
        (
            &["--set", "shm_copy_help_min=0"][..],
            &["oneway"][..],
            false,
        ),
        (&["--set", "shm_copy_help_min=0"][..], &[][..], false),
        (&["--set", "transports=tcp"][..], &["oneway"][..], false),
    ] {
        let opts = [opts, &["--set", "stats=json"][..]].concat();
        // A target that polls helps when it catches a write in the act; on
        // a loaded machine (other tests beside this one) its empty polls
        // yield the CPU and it may miss every write of a run, so a run
        // that should share gets three tries. Every run checks every byte.
        for attempt in 1..=3 {
            let outcome = run(2, &opts, &prog, args, JOB_TIMEOUT);
            assert_pass(&outcome, "rwapi_shared");
            let n = counter_total(&outcome.stdout, "rwapi_helped");
            if !shared || n > 0 || attempt == 3 {
                assert_eq!(shared, n > 0, "rwapi_helped = {n}\n{}", outcome.describe());
                break;
            }
        }
    }
}

/// Runs `name` (a program making runs of one-sided writes) over TCP, where
/// writes must wait to leave together (`tcp_batched`), with the progress
/// thread too, and over shared memory, directly or through the engine
/// (`engine_opt`), where none may wait; the program checks every byte.
fn one_sided_runs(name: &str, engine_opt: &str) {
    let prog = compile(name);
    for (np, opts, batched) in [
        (2, &["--set", "transports=tcp"][..], true),
        (
            3,
            &["--set", "transports=tcp", "--set", "progress=thread"][..],
            true,
        ),
        (3, &[][..], false),
        (2, &["--set", engine_opt][..], false),
    ] {
        let opts = [opts, &["--set", "stats=json"][..]].concat();
        let outcome = run(np, &opts, &prog, &[], JOB_TIMEOUT);
        assert_pass(&outcome, name);
        let n = counter_total(&outcome.stdout, "tcp_batched");
        assert_eq!(batched, n > 0, "tcp_batched = {n}\n{}", outcome.describe());
    }
}

/// Runs of small RWAPI writes to one node: over TCP all but the first of a
/// run wait to leave together in one sendmsg, and every byte still lands,
/// before the notice that follows the run, after 20 ms of computing with
/// no RWAPI call, and after rwapi_flush.
#[test]
fn rwapi_write_runs_leave_together_over_tcp() {
    one_sided_runs("rwapi_runs", "rwapi_direct=0");
}

/// Single RWAPI writes, each announced by a small message (Ben Fredj and
/// Renault's pattern): over TCP a write announced at once last time waits for
/// its notice and leaves with it in one sendmsg, and every byte is there when
/// the notice arrives, also after 5 ms of computing between the two.
#[test]
fn rwapi_writes_leave_with_their_notice_over_tcp() {
    one_sided_runs("rwapi_notice", "rwapi_direct=0");
}

/// Runs of MPI_Put, some with MPI_Accumulate among them, to one target:
/// over TCP all but the first of a run wait to leave together, and every
/// byte and sum lands by the flush or fence that completes them.
#[test]
fn rma_put_runs_leave_together_over_tcp() {
    one_sided_runs("rma_put_runs", "rma_direct=0");
}

/// MPI windows whose ranks share a host (MPI_Win_allocate and
/// MPI_Win_allocate_shared): locks, accumulates (MAXLOC of a padded pair
/// type too), compare-and-swap and fetch-and-op from every rank at once
/// stay exclusive and atomic, a writer gets its locks while readers keep
/// reading, and all of it works while the target makes no call at all. Through the engine
/// (`rma_direct=0`, TCP) the same program checks the same counts with
/// the target driving progress.
#[test]
fn rma_direct_operations_need_no_target_call() {
    let prog = compile("rma_direct");
    let configs: &[(u32, &[&str], &[&str])] = &[
        (3, &[], &["nocalls"]),
        (4, &[], &["nocalls", "shared"]),
        // More ranks than cores: lock and mutex holders get descheduled,
        // and seven readers must not keep a writer out.
        (8, &[], &["nocalls"]),
        (3, &["--set", "progress=thread"], &["nocalls"]),
        (3, &["--set", "rma_direct=0"], &[]),
        (2, &["--set", "rma_direct=0"], &["shared"]),
        (3, &["--set", "transports=tcp"], &[]),
        (2, &["--set", "transports=tcp"], &["shared"]),
    ];
    for (np, opts, args) in configs {
        eprintln!(
            "rma_direct on {np} ranks, launcher options [{}] {args:?}",
            opts.join(" ")
        );
        let outcome = run(*np, opts, &prog, args, JOB_TIMEOUT);
        assert_pass(&outcome, "rma_direct");
    }
}

/// The check above has teeth: through the engine, a target that makes no
/// call grants no lock and applies nothing.
#[test]
fn rma_engine_operations_wait_for_the_target() {
    let prog = compile("rma_direct");
    let outcome = run(
        3,
        &["--set", "rma_direct=0"],
        &prog,
        &["nocalls=2"],
        JOB_TIMEOUT,
    );
    assert!(
        !outcome.stdout.contains("PASS") && outcome.stderr.contains("without calls"),
        "{}",
        outcome.describe()
    );
}

/// The check above has teeth: through the engine, a target that makes no
/// call never gets the data.
#[test]
fn rwapi_engine_writes_wait_for_the_target() {
    let prog = compile("rwapi_direct");
    let outcome = run(
        2,
        &["--set", "rwapi_direct=0"],
        &prog,
        &["nocalls=1"],
        JOB_TIMEOUT,
    );
    assert!(
        !outcome.stdout.contains("PASS") && outcome.stderr.contains("without calls"),
        "{}",
        outcome.describe()
    );
}

/// RWAPI with its heap too small for the 64 MiB blocks (they are private
/// memory written through the engine while the small ones stay direct),
/// and with the direct path off.
#[test]
fn rwapi_heap_fallback_and_direct_off() {
    let prog = compile("rwapi_basic");
    for opts in [
        &["--set", "rwapi_heap=1m"][..],
        &["--set", "rwapi_direct=0"][..],
        &["--set", "transports=tcp", "--set", "rwapi_heap=1m"][..],
    ] {
        eprintln!("rwapi_basic big, launcher options [{}]", opts.join(" "));
        let outcome = run(2, opts, &prog, &["big"], JOB_TIMEOUT);
        assert_pass(&outcome, "rwapi_basic");
    }
}

/// RWAPI writes outstanding to a node that dies: the job ends fast, naming
/// it, on shared memory and on TCP.
#[test]
fn rwapi_node_killed_with_writes_outstanding() {
    let prog = compile("rwapi_killed");
    for transport in [&[][..], &["--set", "transports=tcp"][..]] {
        let outcome = run(2, transport, &prog, &[], JOB_TIMEOUT);
        assert_failed_cleanly(&outcome, "rwapi_killed");
        assert!(
            outcome.elapsed < Duration::from_secs(5),
            "the job took {:?} (limit 5 s)\n{}",
            outcome.elapsed,
            outcome.describe()
        );
        // Either the launcher reports the death first, or the writer does,
        // with the class of a peer gone.
        let err = &outcome.stderr;
        assert!(
            (mentions_rank(err, 1) && (err.contains("SIGKILL") || err.contains("signal 9")))
                || err.contains("rwapi_flush returned -58"),
            "stderr should name rank 1 and SIGKILL (or the writer RWAPI_ERR_GONE)\n{}",
            outcome.describe()
        );
        assert!(
            !err.contains("rwapi_flush returned 0"),
            "writes to a dead node cannot have completed\n{}",
            outcome.describe()
        );
    }
}

#[test]
fn abort_ends_the_job_with_its_error_code() {
    let prog = compile("abort");
    let outcome = run(3, &[], &prog, &[], JOB_TIMEOUT);
    assert_failed_cleanly(&outcome, "abort");
    assert_eq!(
        outcome.code(),
        Some(7),
        "exit status\n{}",
        outcome.describe()
    );
    assert!(
        outcome.elapsed < Duration::from_secs(5),
        "the job took {:?} in all (limit 5 s)\n{}",
        outcome.elapsed,
        outcome.describe()
    );
    let err = &outcome.stderr;
    assert!(
        mentions_rank(err, 0) && err.contains("MPI_Abort"),
        "stderr should name rank 0 and MPI_Abort\n{}",
        outcome.describe()
    );
}

/// A range of `len` loopback ports that are free now, below the kernel's
/// ephemeral range (32768 and up) so that no other job's ranks, which listen
/// on ephemeral ports, can be in it.
fn free_port_range(len: u16) -> (u16, u16) {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos()
        ^ std::process::id();
    for attempt in 0..50u32 {
        let low = 20000 + (seed.wrapping_add(attempt.wrapping_mul(7919)) % 12000) as u16;
        let high = low + len - 1;
        if (low..=high).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return (low, high);
        }
    }
    panic!("found no {len} free ports in 20000-32767");
}

#[test]
fn bad_peer_strangers_do_not_disturb_the_job() {
    let prog = compile("bad_peer");
    let np = 3;
    let (low, high) = free_port_range(20);
    let set = format!("tcp_port_range={low}-{high}");
    let outcome = run(np, &["--set", &set], &prog, &[], JOB_TIMEOUT);
    assert_pass(&outcome, "bad_peer");
    // The stranger part really ran: each rank listens in the range.
    let hits: Option<u32> = outcome
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("sent garbage to "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok());
    assert!(
        hits.is_some_and(|h| h >= np),
        "expected garbage sent to at least {np} listening ports in {low}-{high}, got {hits:?}\n{}",
        outcome.describe()
    );
    assert!(
        outcome
            .stdout
            .contains("the launcher's service closed the connection of a stranger"),
        "the key-value service check did not run\n{}",
        outcome.describe()
    );
}

#[test]
fn abi_layout() {
    let src = repo_root().join("tests/c/abi_layout.c");
    if !src.exists() {
        eprintln!("skipped: {} does not exist", src.display());
        return;
    }
    let prog = compile_source(&src, "abi_layout");
    let outcome = run_command(std::process::Command::new(&prog), JOB_TIMEOUT);
    assert!(
        outcome.status.success() && outcome.leftovers.is_empty(),
        "abi_layout failed\n{}",
        outcome.describe()
    );
}

/// Parses the ping-pong example's rows: (size, latency in us, bandwidth in MB/s).
fn pingpong_rows(outcome: &Outcome) -> Vec<(u64, f64, f64)> {
    outcome
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let parsed = (f.len() == 3)
                .then(|| Some((f[0].parse().ok()?, f[1].parse().ok()?, f[2].parse().ok()?)))
                .flatten();
            parsed.unwrap_or_else(|| panic!("unexpected line {l:?}\n{}", outcome.describe()))
        })
        .collect()
}

#[test]
fn pingpong_example_prints_one_row_per_size() {
    let src = repo_root().join("examples/pingpong.c");
    let prog = compile_source(&src, "pingpong_example");

    let outcome = run(2, &[], &prog, &["-m", "65536", "-r", "3"], JOB_TIMEOUT);
    assert!(
        outcome.status.success() && outcome.leftovers.is_empty(),
        "{}",
        outcome.describe()
    );
    assert!(
        outcome.stdout.starts_with("# Tandem ping-pong"),
        "the first line should be the title\n{}",
        outcome.describe()
    );
    assert!(
        outcome.has_line("# Size          Latency(us)     Bandwidth(MB/s)"),
        "no column header\n{}",
        outcome.describe()
    );
    let rows = pingpong_rows(&outcome);
    let sizes: Vec<u64> = rows.iter().map(|r| r.0).collect();
    let expected: Vec<u64> = std::iter::once(0)
        .chain((0..=16).map(|k| 1u64 << k))
        .collect();
    assert_eq!(sizes, expected, "message sizes\n{}", outcome.describe());
    for &(size, latency, bandwidth) in &rows {
        assert!(
            latency.is_finite() && latency > 0.0,
            "latency {latency} for {size} bytes\n{}",
            outcome.describe()
        );
        // Bandwidth is size / latency (bytes per microsecond = MB/s), as far
        // as the two decimals printed allow (latency is rounded to 0.005 us,
        // which matters below a microsecond); tiny messages on a busy
        // machine may well print 0.00.
        let expected = size as f64 / latency;
        let tolerance = 0.006 + expected * (0.01 + 0.005 / latency);
        assert!(
            bandwidth.is_finite()
                && bandwidth >= 0.0
                && (size > 0 || bandwidth == 0.0)
                && (bandwidth - expected).abs() <= tolerance,
            "bandwidth {bandwidth} for {size} bytes at {latency} us (expected about {expected:.3})\n{}",
            outcome.describe()
        );
    }
    assert!(
        rows.iter()
            .any(|&(size, _, bandwidth)| size > 0 && bandwidth > 0.0),
        "no positive bandwidth at all\n{}",
        outcome.describe()
    );

    // Extra ranks wait at the final barrier; everyone exits 0.
    let outcome = run(3, &[], &prog, &["-m", "1k", "-r", "2"], JOB_TIMEOUT);
    assert!(
        outcome.status.success() && outcome.leftovers.is_empty(),
        "{}",
        outcome.describe()
    );
    assert_eq!(
        pingpong_rows(&outcome).len(),
        12,
        "rows for sizes 0..=1024\n{}",
        outcome.describe()
    );
}

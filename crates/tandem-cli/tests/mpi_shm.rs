//! The shared-memory transport, end to end: oversubscribed rings, waiting
//! that does not burn the CPU a computing rank needs, and nothing left in
//! /dev/shm by any job, including killed ones. (The point-to-point suite in
//! `mpi_p2p.rs` already runs over shared memory, with and without
//! single-copy reads, and over TCP.)

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{compile, compile_source, counter_total, repo_root, run, JOB_TIMEOUT};

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

/// Each rank's main thread and progress helper thread, as the placement
/// program prints them: (rank, main CPUs, helper CPUs or "none").
fn placements(stdout: &str) -> Vec<(u32, String, String)> {
    let mut v: Vec<(u32, String, String)> = stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 7 || f[0] != "placement" {
                return None;
            }
            Some((f[2].parse().ok()?, f[4].to_string(), f[6].to_string()))
        })
        .collect();
    v.sort();
    v
}

/// With no more ranks than CPUs, ranks are pinned to different CPUs, with
/// or without shared memory (TCP-only jobs once pinned every rank to the
/// first CPU: ranks learnt their place on the host from the shared-memory
/// variables only); a progress helper thread is kept off its own rank's CPU
/// (`progress_cpu=auto`), where it would take its time from the computation
/// it is meant to overlap.
#[test]
fn ranks_and_helpers_are_placed_apart() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: this machine has one CPU");
        return;
    }
    let prog = compile("placement");
    for options in [
        &[][..],
        &["--set", "transports=tcp"][..],
        &["--set", "progress=thread"][..],
        &["--set", "progress=signal", "--set", "transports=shm,tcp"][..],
    ] {
        let outcome = run(2, options, &prog, &[], JOB_TIMEOUT);
        assert!(
            outcome.status.success() && outcome.has_line("PASS placement"),
            "{}",
            outcome.describe()
        );
        let p = placements(&outcome.stdout);
        assert_eq!(p.len(), 2, "two placement lines\n{}", outcome.describe());
        let (a, b) = (&p[0].1, &p[1].1);
        assert!(
            a.parse::<usize>().is_ok() && b.parse::<usize>().is_ok() && a != b,
            "[{}]: ranks should be pinned to one CPU each, and different ones: {a} and {b}",
            options.join(" ")
        );
        for (rank, main, helper) in &p {
            let wants_helper = options.iter().any(|o| o.starts_with("progress="));
            assert_eq!(
                helper != "none",
                wants_helper,
                "[{}]: rank {rank}'s helper thread: {helper}",
                options.join(" ")
            );
            if wants_helper {
                assert_ne!(
                    helper,
                    main,
                    "[{}]: rank {rank}'s helper shares its CPU",
                    options.join(" ")
                );
            }
        }
    }
}

/// The CPUs of a `Cpus_allowed_list` ("0-2,5").
fn cpu_list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
        out.extend(a..=b);
    }
    out
}

/// mpirun's binding flags: `--bind-to none` leaves every rank all CPUs,
/// `--bind-to core` one each, `--cpus-per-rank N` N each (for OpenMP threads),
/// `--bind-to socket` the whole socket; `--map-by ppr:1:node` is one rank
/// per host. (This machine's CPUs may share one socket: then the socket is
/// all of them.)
#[test]
fn binding_flags_pin_as_asked() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("skipped: this machine has one CPU");
        return;
    }
    let prog = compile("placement");
    let all = format!("0-{}", cpus - 1);
    let pinned = |options: &[&str], ranks: u32| {
        let outcome = run(ranks, options, &prog, &[], JOB_TIMEOUT);
        assert!(
            outcome.status.success() && outcome.has_line("PASS placement"),
            "{}",
            outcome.describe()
        );
        let p = placements(&outcome.stdout);
        assert_eq!(p.len(), ranks as usize, "{}", outcome.describe());
        p.into_iter().map(|(_, main, _)| main).collect::<Vec<_>>()
    };
    assert_eq!(
        pinned(&["--bind-to", "none"], 2),
        [all.clone(), all.clone()]
    );
    assert_eq!(pinned(&["-bind-to", "core"], 2), ["0", "1"]);
    assert_eq!(pinned(&["--cpus-per-rank", "2"], 1), ["0-1"]);
    // The CPUs of CPU 0's socket, as sysfs tells them.
    let package = |c: usize| {
        std::fs::read_to_string(format!(
            "/sys/devices/system/cpu/cpu{c}/topology/physical_package_id"
        ))
        .map(|t| t.trim().to_string())
        .unwrap_or_default()
    };
    let first_socket: Vec<usize> = (0..cpus).filter(|&c| package(c) == package(0)).collect();
    let socket = pinned(&["--bind-to", "socket"], 1);
    assert_eq!(
        cpu_list(&socket[0]),
        first_socket,
        "--bind-to socket: {socket:?}"
    );
    assert_eq!(pinned(&["--map-by", "ppr:1:node"], 1).len(), 1);
    // The ranks of a host take its sockets in turn (one socket: in order).
    let spread = pinned(&["--map-by", "socket"], 2);
    let second = (0..cpus)
        .find(|&c| package(c) != package(0))
        .unwrap_or(1)
        .to_string();
    assert_eq!(spread, ["0".to_string(), second], "--map-by socket");
    let refused = run(
        1,
        &["-c", "2", "--bind-to", "none"],
        &prog,
        &[],
        JOB_TIMEOUT,
    );
    assert_eq!(refused.code(), Some(2), "{}", refused.describe());
}

/// The shared heap (`shm_heap`, on by default): large blocks from malloc
/// and its relatives live in a memory file peers map when a host has more
/// than one rank, and behave as the C library's would (contents, zeroing,
/// alignment, fork); large messages between them arrive intact and are
/// copied through the peer's heap (`heap_copies`). With `shm_heap=0`, one
/// rank on the host, no shared memory or no single copy, no block is there
/// and nothing is copied that way.
#[test]
fn large_blocks_live_in_a_heap_peers_map() {
    let prog = compile("shm_heap");
    for (ranks, options, mode, copies) in [
        (2, &[][..], "heap", true),
        (3, &[][..], "heap", true),
        (2, &["--set", "shm_heap=0"][..], "libc", false),
        (2, &["--set", "shm_single_copy=0"][..], "libc", false),
        (2, &["--set", "transports=tcp"][..], "libc", false),
        (1, &[][..], "libc", false),
    ] {
        let options = [options, &["--set", "stats=json"][..]].concat();
        let outcome = run(ranks, &options, &prog, &[mode], JOB_TIMEOUT);
        assert!(
            outcome.status.success() && outcome.has_line("PASS shm_heap"),
            "{}",
            outcome.describe()
        );
        let n = counter_total(&outcome.stdout, "heap_copies");
        assert_eq!(copies, n > 0, "heap_copies = {n}\n{}", outcome.describe());
    }
}

/// glibc's `__rseq_size` as each rank of `ranks` printed it.
fn rseq_sizes(prog: &std::path::Path, ranks: u32, options: &[&str]) -> Vec<i64> {
    let outcome = run(ranks, options, prog, &[], JOB_TIMEOUT);
    assert!(
        outcome.status.success() && outcome.has_line("PASS rseq_registration"),
        "{}",
        outcome.describe()
    );
    let sizes: Vec<i64> = outcome
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("rseq rank "))
        .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
        .collect();
    assert_eq!(sizes.len(), ranks as usize, "{}", outcome.describe());
    sizes
}

/// On a host with more ranks than CPUs the launcher asks glibc not to
/// register restartable sequences in the ranks (`rseq=auto`), whose
/// bookkeeping the kernel redoes at every switch between waiting ranks;
/// `rseq=keep` leaves glibc's default, and so does a host with a CPU per
/// rank. `rseq=off` turns it off anywhere.
#[test]
fn rseq_registration_is_off_where_ranks_outnumber_cpus() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let prog = compile("rseq_registration");
    let kept = rseq_sizes(&prog, 2, &["--set", "rseq=keep"]);
    if kept.iter().any(|&s| s <= 0) {
        eprintln!("skipped: this C library or kernel registers no rseq ({kept:?})");
        return;
    }
    assert_eq!(rseq_sizes(&prog, 2, &["--set", "rseq=off"]), [0, 0]);
    if cpus >= 2 {
        assert!(rseq_sizes(&prog, 2, &[]).iter().all(|&s| s > 0));
    }
    // Oversubscribing a big machine would take long; 8 CPUs is plenty here.
    if cpus <= 8 {
        let over = cpus + 1;
        assert_eq!(rseq_sizes(&prog, over, &[]), vec![0; over as usize]);
        let kept = rseq_sizes(&prog, over, &["--set", "rseq=keep"]);
        assert!(kept.iter().all(|&s| s > 0), "{kept:?}");
    }
}

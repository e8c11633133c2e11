//! The progress engine's counters, checked for exactness on a scripted
//! exchange, and the VolpexMPI report's finding: a select-style engine that polls every
//! socket for writability sees "send ready" far more often than it has
//! anything to send, while the epoll engine wastes none.

mod common;

use common::{assert_pass, compile, counter_total, counters, field, run, JOB_TIMEOUT};

#[test]
fn counters_count_exactly_what_was_sent() {
    let prog = compile("counted_exchange");
    for transport in ["shm,tcp", "tcp"] {
        let set = format!("transports={transport}");
        let outcome = run(
            3,
            // (Set explicitly: left at its default, it gives way to
            // eager_limit on 3 ranks sharing 2 cores.)
            &[
                "--set",
                "stats=json",
                "--set",
                &set,
                "--set",
                "shm_eager_limit=16k",
            ],
            &prog,
            &[],
            JOB_TIMEOUT,
        );
        assert_pass(&outcome, "counted_exchange");
        let rows = counters(&outcome.stdout);
        assert_eq!(
            rows.len(),
            3,
            "one counters line per rank\n{}",
            outcome.describe()
        );
        // The ten 1 MiB messages went by rendezvous, from rank 0 only, and
        // over shared memory the 32 KiB all-to-all blocks too (above
        // shm_eager_limit): 10 from each rank (5 rounds to 2 peers; blocks
        // to itself never reach a transport).
        let blocks = if transport == "tcp" { 0 } else { 10 };
        assert_eq!(
            field(&rows[0], "rendezvous_msgs"),
            10 + blocks,
            "{}",
            rows[0]
        );
        assert_eq!(
            field(&rows[0], "rendezvous_bytes"),
            (10 << 20) + blocks * 32 * 1024
        );
        assert_eq!(field(&rows[1], "rendezvous_msgs"), blocks);
        // Rank 0's eager sends to other ranks: 20 small ones and, over
        // TCP, the 10 blocks, plus the final barrier's messages.
        let eager = field(&rows[0], "eager_msgs");
        let least = 30 - blocks;
        assert!((least..=least + 4).contains(&eager), "{}", rows[0]);
        assert!(field(&rows[0], "progress_calls") > 0);
    }
}

#[test]
fn select_engine_wastes_send_ready_events_and_epoll_does_not() {
    let prog = compile("counted_exchange");
    let common = ["--set", "stats=json", "--set", "transports=tcp"];
    let select = run(
        4,
        &[
            &common[..],
            &["--set", "tcp_poller=select", "--set", "progress=poll"],
        ]
        .concat(),
        &prog,
        &[],
        JOB_TIMEOUT,
    );
    assert_pass(&select, "counted_exchange");
    let epoll = run(
        4,
        &[&common[..], &["--set", "tcp_poller=epoll"]].concat(),
        &prog,
        &[],
        JOB_TIMEOUT,
    );
    assert_pass(&epoll, "counted_exchange");
    let idle = |o: &common::Outcome| {
        counters(&o.stdout)
            .iter()
            .map(|v| field(v, "send_ready_idle"))
            .sum::<u64>()
    };
    let sent = |o: &common::Outcome| {
        counters(&o.stdout)
            .iter()
            .map(|v| field(v, "eager_msgs"))
            .sum::<u64>()
    };
    assert!(idle(&select) > 0, "select saw no idle send-ready events");
    assert_eq!(
        idle(&epoll),
        0,
        "epoll watched a socket with nothing to send"
    );
    assert!(sent(&select) > 0);
}

/// Under `thread` and `signal`, hundreds of large receives complete while
/// the application thread allocates, reallocates and frees memory without
/// calling MPI (under `signal` the handler interrupts it, inside malloc as
/// often as not); every status, byte and guard byte is checked. Ten runs:
/// `signal` on shared memory (four, and one where senders may not write so
/// the handler answers CTS), `thread` on shared memory (three) and TCP
/// (two). The mechanisms must really have run: the handler answered
/// rendezvous starts, and senders wrote straight into receive buffers.
#[test]
fn receives_complete_during_malloc_heavy_computation_under_thread_and_signal() {
    let prog = compile("progress_stress");
    let runs: &[(&[&str], u32)] = &[
        (&["--set", "progress=signal"], 4),
        (
            &["--set", "progress=signal", "--set", "shm_direct_write=0"],
            1,
        ),
        (&["--set", "progress=thread"], 3),
        (&["--set", "progress=thread", "--set", "transports=tcp"], 2),
    ];
    let mut answered_in_handler = 0;
    let mut written_by_senders = 0;
    for (config, times) in runs {
        for round in 0..*times {
            eprintln!("round {round}, [{}]", config.join(" "));
            let options = [&["--set", "stats=json"][..], config].concat();
            let outcome = run(2, &options, &prog, &["1000"], JOB_TIMEOUT);
            assert_pass(&outcome, "progress_stress");
            let total = |name: &str| counter_total(&outcome.stdout, name);
            answered_in_handler += total("signal_rndv_answered");
            written_by_senders += total("direct_writes");
        }
    }
    assert!(
        answered_in_handler > 0,
        "the signal handler never answered a rendezvous start"
    );
    assert!(
        written_by_senders > 0,
        "no sender ever wrote into a receive buffer"
    );
}

/// Large non-blocking receives posted before their message leaves: under
/// `thread` and `signal` each is advertised to its sender on this host,
/// which writes the message straight in, with no rendezvous. The scripted
/// exchange makes every one of the 21 messages meet its receive posted and
/// its sender's ring drained, so exactly 21 go that way; with
/// `shm_direct_write=0` none may.
#[test]
fn advertised_receives_are_written_by_their_senders() {
    let prog = compile("advert_recv");
    let runs: &[(&[&str], u64)] = &[
        (&["--set", "progress=signal"], 21),
        (&["--set", "progress=thread"], 21),
        (
            &["--set", "progress=signal", "--set", "shm_direct_write=0"],
            0,
        ),
        (&["--set", "progress=adaptive"], 0),
    ];
    for (config, prematched) in runs {
        let options = [&["--set", "stats=json"][..], config].concat();
        let outcome = run(2, &options, &prog, &["exact"], JOB_TIMEOUT);
        assert_pass(&outcome, "advert_recv");
        let rows = counters(&outcome.stdout);
        assert_eq!(field(&rows[0], "rendezvous_msgs"), 21, "{}", rows[0]);
        assert_eq!(
            field(&rows[0], "prematched_writes"),
            *prematched,
            "[{}] {}",
            config.join(" "),
            rows[0]
        );
    }
}

/// Matching order against earlier and wildcard receives, cancellation
/// before and after the message, and truncation, with receives advertised
/// (or not, under `adaptive` and over TCP): the same answers.
#[test]
fn advertised_receives_keep_matching_order_cancel_and_truncation() {
    let prog = compile("advert_recv");
    let runs: &[(u32, &[&str])] = &[
        (2, &["--set", "progress=signal"]),
        (3, &["--set", "progress=signal"]),
        (2, &["--set", "progress=thread"]),
        (3, &["--set", "progress=thread"]),
        (2, &["--set", "progress=adaptive"]),
        (3, &["--set", "progress=thread", "--set", "transports=tcp"]),
    ];
    for (np, config) in runs {
        let outcome = run(*np, config, &prog, &["rules"], JOB_TIMEOUT);
        assert_pass(&outcome, "advert_recv");
    }
}

/// Rendezvous messages between ranks on one host: by default their
/// receiver measures both ways (single copy and the rings) and picks the
/// faster per sender and size, so a sweep with a few messages per size
/// uses both, every byte checked by pingpong_sizes; `shm_path_choice=0`
/// uses only the rings, `shm_single_copy_min=16k` only single copy.
#[test]
fn receivers_on_one_host_measure_both_ways_unless_told_which() {
    let prog = compile("pingpong_sizes");
    let runs: &[(&[&str], &str)] = &[
        (&[], "both"),
        (&["--set", "shm_path_choice=0"], "rings"),
        (&["--set", "shm_single_copy_min=16k"], "single copy"),
    ];
    for (config, expect) in runs {
        let options = [&["--set", "stats=json"][..], config].concat();
        let outcome = run(2, &options, &prog, &["4194304"], JOB_TIMEOUT);
        assert_pass(&outcome, "pingpong_sizes");
        let total = |name: &str| counter_total(&outcome.stdout, name);
        let (read, rendezvous) = (total("single_copy_reads"), total("rendezvous_msgs"));
        let ok = match *expect {
            "both" => read > 0 && read < rendezvous,
            "rings" => read == 0 && rendezvous > 0,
            _ => read == rendezvous && read > 0,
        };
        assert!(
            ok,
            "[{}]: {read} of {rendezvous} rendezvous messages read by single copy, expected {expect}",
            config.join(" ")
        );
    }
}

/// A single-copy read from `shm_copy_help_min` (64 KiB) on invites its
/// sender, which waits in the library, to write chunks of it: the senders
/// of pingpong_sizes (every byte checked) write some (`helped_chunks`); with
/// `shm_copy_help_min=0` none; on a host with fewer CPUs than ranks, left
/// at its default, none either.
#[test]
fn senders_on_one_host_help_copy_what_their_receivers_read() {
    let prog = compile("pingpong_sizes");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs: &[(u32, &[&str], bool)] = &[
        (2, &["--set", "shm_single_copy_min=16k"], true),
        (
            2,
            &[
                "--set",
                "shm_single_copy_min=16k",
                "--set",
                "shm_copy_help_min=0",
            ],
            false,
        ),
        (3, &["--set", "shm_single_copy_min=16k"], cpus >= 3),
    ];
    for (np, config, helped) in runs {
        let options = [&["--set", "stats=json"][..], config].concat();
        let outcome = run(*np, &options, &prog, &["4194304"], JOB_TIMEOUT);
        assert_pass(&outcome, "pingpong_sizes");
        let total = |name: &str| counter_total(&outcome.stdout, name);
        let (chunks, read) = (total("helped_chunks"), total("single_copy_reads"));
        assert!(read > 0, "[{}]: no single-copy reads", config.join(" "));
        assert_eq!(
            chunks > 0,
            *helped,
            "{np} ranks [{}]: senders wrote {chunks} chunks of {read} single-copy reads",
            config.join(" ")
        );
    }
}

/// A burst of large messages in flight (burst_helped: 4 rounds of 24
/// non-blocking 1 MiB sends, every byte checked): the receiver reads them
/// one at a time, each with the waiting sender's help, instead of reading
/// all but the first of a batch alone. Each message is two chunks, so the
/// sender can write 96; it wrote 5 when the receiver went alone, 96 alone
/// on the machine now, 23 and more with four such jobs on its two CPUs.
#[test]
fn a_burst_of_large_sends_is_copied_with_the_senders_help() {
    let prog = compile("burst_helped");
    let options = ["--set", "stats=json", "--set", "shm_single_copy_min=64k"];
    let outcome = run(2, &options, &prog, &[], JOB_TIMEOUT);
    assert_pass(&outcome, "burst_helped");
    let chunks = counter_total(&outcome.stdout, "helped_chunks");
    let reads = counter_total(&outcome.stdout, "single_copy_reads");
    assert_eq!(reads, 96, "single-copy reads\n{}", outcome.describe());
    assert!(
        chunks >= 20,
        "the sender wrote {chunks} chunks of 96 messages\n{}",
        outcome.describe()
    );
}

/// With more ranks on a host than CPUs, `shm_eager_limit` left at its
/// default gives way to `eager_limit` (a rendezvous would wait for its
/// receiver to be scheduled): counted_exchange's 32 KiB blocks go eagerly
/// on 3 ranks here, by rendezvous on a host with 3 CPUs or more.
#[test]
fn oversubscribed_hosts_keep_mid_size_messages_eager() {
    let prog = compile("counted_exchange");
    let outcome = run(3, &["--set", "stats=json"], &prog, &[], JOB_TIMEOUT);
    assert_pass(&outcome, "counted_exchange");
    let rows = counters(&outcome.stdout);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let blocks = if cpus < 3 { 0 } else { 10 };
    assert_eq!(
        field(&rows[0], "rendezvous_msgs"),
        10 + blocks,
        "{cpus} CPUs: {}",
        rows[0]
    );
}

/// The TCP ports process `pid` listens on (its sockets in LISTEN state).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    l.strip_prefix("socket:[")?
                        .strip_suffix(']')
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // local_address, ..., st (0A = LISTEN), ..., inode
            (f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]))
                .then(|| u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok())
                .flatten()
        })
        .collect()
}

/// CPU time (user + system) of process `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat, counted after the command name.
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

/// A rank waiting in `MPI_Recv` while strangers hold more connections to
/// its port than its descriptor limit allows stays idle (its listener,
/// out of descriptors, rests instead of waking it at once, again and
/// again), and the message it waits for still arrives.
#[test]
fn a_waiting_rank_stays_idle_when_strangers_exhaust_its_descriptors() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let prog = compile("fd_siege");
    let mut cmd = std::process::Command::new(common::TANDEM);
    cmd.args(["run", "-n", "2", "--set", "transports=tcp"])
        .arg(&prog)
        .arg("4000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let limit = libc::rlimit {
        rlim_cur: 64,
        rlim_max: 64,
    };
    // SAFETY: setrlimit is async-signal-safe and only changes the child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("tandem run starts");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("rank 0 says it waits");
    let pid: u32 = line
        .trim()
        .strip_prefix("waiting ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let ports = listening_ports(pid);
    assert!(!ports.is_empty(), "rank 0 (pid {pid}) listens on no port");
    let mut held = Vec::new();
    for _ in 0..120 {
        for &port in &ports {
            if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                held.push(s);
            }
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = cpu_ticks(pid);
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let used = cpu_ticks(pid) - before;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    drop(held);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    let status = child.wait().expect("tandem run ends");
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err);
    assert!(status.success(), "{status}: {rest}{err}");
    assert!(rest.contains("PASS fd_siege"), "{rest}{err}");
    // Idle: at most a tenth of a core over the two seconds (busy: 2 s).
    assert!(
        used * 10 <= 2 * hz,
        "the waiting rank used {used} ticks of {hz}/s over 2 s of siege"
    );
}

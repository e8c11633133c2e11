//! Jobs across hosts: network namespaces joined by a bridge stand in for
//! machines (see `multihost_netns`), the master runs in the first one and
//! starts the others' ranks through `--agent "ip netns exec {host}"`.
//!
//! * the point-to-point and collective C programs across 4 hosts;
//! * a remote rank killed: the job ends fast and names it;
//! * the master killed: every remote rank is gone within 5 s;
//! * a host that cannot reach the master: a clear error within the timeout;
//! * a 1 Gbit/s token bucket on every host: ping-pong bandwidth stays under it;
//! * processes spawned in a job across hosts spread over its hosts;
//! * host lists whose ranks are all local need no agent at all.
//!
//! Where namespaces cannot be created (not root) the namespace tests say
//! SKIP and pass. Only the hosts' own 10.213.0.0/24 addresses and loopback
//! are ever used.

mod common;
mod multihost_netns;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    alive, assert_pass, compile, compile_source, mentions_rank, printed_pids, repo_root,
    run_command, TANDEM,
};
use multihost_netns::{hosts_or_skip, tandem_run, tandem_run_on, Hosts, AGENT};

/// Deadline for a job across hosts.
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `name` on 4 hosts x 2 ranks (placed by slot, then by node) and
/// expects PASS.
fn run_across(hosts: &Hosts, name: &str, args: &[&str]) {
    let prog = compile(name);
    for map_by in ["slot", "node"] {
        let mut cmd = tandem_run(hosts, 0);
        cmd.args(["--host", &hosts.host_list(2), "--map-by", map_by])
            .arg(&prog)
            .args(args);
        eprintln!(
            "{name} across {} hosts, --map-by {map_by}",
            hosts.names.len()
        );
        let outcome = run_command(cmd, JOB_TIMEOUT);
        assert_pass(&outcome, name);
    }
}

#[test]
fn point_to_point_and_collectives_across_four_hosts() {
    let Some(hosts) = hosts_or_skip(4, None, "point_to_point_and_collectives_across_four_hosts")
    else {
        return;
    };
    run_across(&hosts, "pingpong_sizes", &["4194304"]);
    run_across(&hosts, "wildcards", &[]);
    run_across(&hosts, "ordering", &[]);
    run_across(&hosts, "coll_all", &[]);
}

/// `MPI_Comm_spawn` in a job across hosts: the new processes are spread
/// over the job's hosts and reach their parents, each other and ports over
/// TCP between the hosts.
#[test]
fn spawned_worlds_span_the_hosts() {
    let Some(hosts) = hosts_or_skip(3, None, "spawned_worlds_span_the_hosts") else {
        return;
    };
    let prog = compile("spawn");
    let mut cmd = tandem_run(&hosts, 0);
    cmd.args(["--host", &hosts.host_list(1), "--tag-output"])
        .arg(&prog)
        .arg("across");
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert_pass(&outcome, "spawn");
}

#[test]
fn local_and_remote_ranks_in_one_job() {
    // The master's own host (localhost) runs two ranks directly, the two
    // other namespaces two each through the agent.
    let Some(hosts) = hosts_or_skip(3, None, "local_and_remote_ranks_in_one_job") else {
        return;
    };
    // The hosts come from a host file, in its three spellings.
    let prog = compile("coll_all");
    let hostfile = std::env::temp_dir().join(format!("tandem-hosts-{}", std::process::id()));
    std::fs::write(
        &hostfile,
        format!(
            "# this machine, then two namespaces\nlocalhost slots=2\n{}:2\n{} 2   # last\n",
            hosts.names[1], hosts.names[2]
        ),
    )
    .unwrap();
    let mut cmd = tandem_run(&hosts, 0);
    cmd.arg("--hostfile")
        .arg(&hostfile)
        .arg("--tag-output")
        .arg(&prog);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    let _ = std::fs::remove_file(&hostfile);
    assert_pass(&outcome, "coll_all");
}

#[test]
fn remote_rank_killed_ends_the_job_fast_naming_it() {
    let Some(hosts) = hosts_or_skip(3, None, "remote_rank_killed_ends_the_job_fast_naming_it")
    else {
        return;
    };
    let prog = compile("killed_rank");
    let mut cmd = tandem_run(&hosts, 0);
    // By node: rank 1 (the one that kills itself) is on the second host.
    cmd.args(["--host", &hosts.host_list(2), "--map-by", "node"])
        .arg(&prog);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(!outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.elapsed < Duration::from_secs(10),
        "the job took {:?} (limit 10 s)\n{}",
        outcome.elapsed,
        outcome.describe()
    );
    let err = &outcome.stderr;
    assert!(
        mentions_rank(err, 1) && err.contains("SIGKILL") && err.contains(&hosts.names[1]),
        "stderr should name rank 1, SIGKILL and its host\n{}",
        outcome.describe()
    );
    assert!(outcome.leftovers.is_empty(), "{}", outcome.describe());
    let pids = printed_pids(&outcome.stdout);
    assert_eq!(pids.len(), 6, "{}", outcome.describe());
    for pid in pids {
        assert!(
            !alive(pid),
            "rank process {pid} survived\n{}",
            outcome.describe()
        );
    }
}

#[test]
fn master_killed_leaves_no_rank_on_any_host() {
    let Some(hosts) = hosts_or_skip(3, None, "master_killed_leaves_no_rank_on_any_host") else {
        return;
    };
    let mut cmd = tandem_run(&hosts, 0);
    cmd.args(["--host", &hosts.host_list(2)])
        .args([
            "sh",
            "-c",
            r#"echo "rank $TANDEM_JOB_RANK pid $$"; exec sleep 60"#,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut master = cmd.spawn().expect("start tandem run");
    let mut lines = BufReader::new(master.stdout.take().expect("piped"));
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while printed_pids(&text).len() < 6 && Instant::now() < deadline {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        text.push_str(&line);
    }
    let pids = printed_pids(&text);
    // `ip netns exec` execs, so the child is the master itself.
    let _ = master.kill();
    let _ = master.wait();
    assert_eq!(pids.len(), 6, "not every rank started:\n{text}");
    let killed_at = Instant::now();
    while pids.iter().any(|&p| alive(p)) && killed_at.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        // SAFETY: kill(2) on a pid a rank of this test printed.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
    assert!(
        left.is_empty(),
        "ranks {left:?} still alive 5 s after the master was killed"
    );
    // The hosts' helpers exit once their ranks have: give them the same
    // time (looking at once raced with their exit).
    let mut helpers = helper_processes(&hosts);
    while !helpers.is_empty() && killed_at.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
        helpers = helper_processes(&hosts);
    }
    assert!(
        helpers.is_empty(),
        "helpers {helpers:?} still alive 5 s after the master was killed"
    );
}

/// `tandem _host` processes of these hosts still running.
fn helper_processes(hosts: &Hosts) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains("_host") && hosts.names.iter().any(|n| c.contains(n.as_str()))
            }) && alive(pid)
        })
        .collect()
}

#[test]
fn unreachable_host_is_a_clear_error_within_the_timeout() {
    let Some(hosts) = hosts_or_skip(
        3,
        None,
        "unreachable_host_is_a_clear_error_within_the_timeout",
    ) else {
        return;
    };
    hosts.unplug(2).expect("unplug host 2");
    let prog = compile("pingpong_sizes");
    let mut cmd = tandem_run(&hosts, 0);
    cmd.args(["--host", &hosts.host_list(1)])
        .args(["--set", "connect_timeout_ms=2000"])
        .arg(&prog);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(!outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.elapsed < Duration::from_secs(15),
        "took {:?} (connect timeout 2 s)\n{}",
        outcome.elapsed,
        outcome.describe()
    );
    let err = &outcome.stderr;
    assert!(
        err.contains(&format!("host {}", hosts.names[2]))
            && err.contains("cannot reach the launcher"),
        "stderr should name the host that cannot reach the launcher\n{}",
        outcome.describe()
    );
    assert!(outcome.leftovers.is_empty(), "{}", outcome.describe());
}

#[test]
fn unreachable_peer_is_named_with_address_and_cause() {
    // Host 1's ranks listen only on a dummy interface that host 0 has no
    // route to; a rank on host 0 sending to rank 1 must say where it tried
    // and why that failed, at once rather than after a timeout.
    let Some(hosts) = hosts_or_skip(2, None, "unreachable_peer_is_named_with_address_and_cause")
    else {
        return;
    };
    hosts
        .add_dead_end(1, "10.214.0.2")
        .expect("dummy interface");
    let prog = compile("pingpong_sizes");
    let include = format!("10.214.0.0/24,{}/32", hosts.address(0));
    let mut cmd = tandem_run_on(&hosts, 0, &include);
    cmd.args(["--host", &hosts.host_list(1)])
        .args(["--set", "connect_timeout_ms=3000"])
        .arg(&prog);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(!outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.elapsed < Duration::from_secs(20),
        "{}",
        outcome.describe()
    );
    let err = &outcome.stderr;
    assert!(
        err.contains("rank 1 at 10.214.0.2:") && err.contains("tcp_if_include"),
        "the error should give rank 1's address and point at tcp_if_include\n{}",
        outcome.describe()
    );
    assert!(outcome.leftovers.is_empty(), "{}", outcome.describe());
}

#[test]
fn missing_host_is_the_agents_error() {
    let Some(hosts) = hosts_or_skip(1, None, "missing_host_is_the_agents_error") else {
        return;
    };
    let mut cmd = tandem_run(&hosts, 0);
    let list = format!("{}:1,{}-nosuch:1", hosts.names[0], hosts.names[0]);
    cmd.args(["--host", &list]).args(["sh", "-c", "sleep 30"]);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(!outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.elapsed < Duration::from_secs(10),
        "{}",
        outcome.describe()
    );
    assert!(
        outcome.stderr.contains("-nosuch") && outcome.stderr.contains("agent"),
        "{}",
        outcome.describe()
    );
}

/// The 4 MiB bandwidth (MB/s) that examples/pingpong.c printed.
fn bandwidth_at_4mib(stdout: &str) -> Option<f64> {
    stdout.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() == 3 && w[0] == "4194304").then(|| w[2].parse().ok())?
    })
}

#[test]
fn rate_limited_link_caps_the_bandwidth() {
    // 1 Gbit/s = 125 MB/s on the wire; payload bandwidth must stay below.
    // The bucket (32 KiB) lets at most 32 KiB of a 4 MiB message pass
    // faster than the rate; Ethernet, IP and TCP headers cost more than that.
    let Some(hosts) = hosts_or_skip(
        2,
        Some(("1gbit", "32kb")),
        "rate_limited_link_caps_the_bandwidth",
    ) else {
        return;
    };
    let src = repo_root().join("examples/pingpong.c");
    let prog = compile_source(&src, "pingpong_example");
    let mut cmd = tandem_run(&hosts, 0);
    cmd.args(["--host", &hosts.host_list(1)])
        .arg(&prog)
        .args(["-m", "4m", "-r", "3"]);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(outcome.status.success(), "{}", outcome.describe());
    let bw = bandwidth_at_4mib(&outcome.stdout)
        .unwrap_or_else(|| panic!("no 4 MiB row\n{}", outcome.describe()));
    eprintln!("4 MiB ping-pong over a 1 Gbit/s token bucket: {bw:.1} MB/s");
    assert!(
        bw > 0.0 && bw <= 125.0,
        "measured {bw} MB/s over a link limited to 125 MB/s\n{}",
        outcome.describe()
    );
}

#[test]
fn host_list_of_this_machine_only_needs_no_agent() {
    // `false` as the agent would fail the job if it were used.
    let mut cmd = Command::new(TANDEM);
    cmd.args([
        "run",
        "--host",
        "localhost:2,127.0.0.1:1",
        "--agent",
        "false",
    ])
    .args([
        "sh",
        "-c",
        r#"echo "rank $TANDEM_JOB_RANK of $TANDEM_JOB_SIZE""#,
    ]);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(outcome.status.success(), "{}", outcome.describe());
    for r in 0..3 {
        assert!(
            outcome.has_line(&format!("rank {r} of 3")),
            "{}",
            outcome.describe()
        );
    }
}

#[test]
fn host_list_errors_are_reported_before_anything_starts() {
    for (args, needle) in [
        (vec!["--host", "a:0"], "slot count"),
        (vec!["-n", "5", "--host", "a:2,b:2"], "only 4 slots"),
        (vec!["--host", "a", "--map-by", "l3cache"], "--map-by"),
        (vec!["--host", "a", "--agent", "ssh 'x"], "quote"),
        (vec!["--hostfile", "/nonexistent/hosts"], "host file"),
    ] {
        let mut cmd = Command::new(TANDEM);
        cmd.arg("run").args(&args).arg("true");
        let outcome = run_command(cmd, JOB_TIMEOUT);
        assert_eq!(outcome.code(), Some(2), "{args:?}\n{}", outcome.describe());
        assert!(
            outcome.stderr.contains(needle),
            "{args:?}\n{}",
            outcome.describe()
        );
    }
}

#[test]
fn agent_runs_once_per_host_with_the_host_substituted() {
    // A fake agent that records its arguments and runs the helper here.
    let dir = std::env::temp_dir().join(format!("tandem-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("calls");
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\necho \"$*\" >> {}\nshift\nexec \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&agent)
        .status()
        .unwrap();
    let mut cmd = Command::new(TANDEM);
    cmd.args(["run", "--host", "fakehost1:2,fakehost2:1", "--tag-output"])
        .arg("--agent")
        .arg(format!("{} {{host}}", agent.display()))
                .args(["--set", "tcp_if_include=lo", "-x", "MH_EXPORTED=passed on"])
        .args([
            "sh",
            "-c",
            r#"echo "rank $TANDEM_JOB_RANK of $TANDEM_JOB_SIZE on $TANDEM_JOB_HOSTS hosts: $MH_EXPORTED""#,
        ]);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(outcome.status.success(), "{}", outcome.describe());
    for r in 0..3 {
        assert!(
            outcome.has_line(&format!("rank {r} of 3 on 2 hosts: passed on")),
            "{}",
            outcome.describe()
        );
    }
    // The two agents run at once: their lines may come in either order.
    let mut calls: Vec<&str> = calls.lines().collect();
    calls.sort_unstable();
    assert_eq!(calls.len(), 2, "one agent call per host: {calls:?}");
    assert!(
        calls[0].starts_with("fakehost1 ") && calls[0].ends_with("_host fakehost1"),
        "{calls:?}"
    );
    assert!(calls[1].starts_with("fakehost2 "), "{calls:?}");
    // Nothing but the host on the helper's command line: the secret and the
    // master's address travel on its stdin.
    assert!(calls.iter().all(|c| c.split(' ').count() == 4), "{calls:?}");
    let _ = AGENT;
}

#[test]
fn stdin_reaches_a_remote_rank_zero_intact() {
    // Rank 0 on another "host" (a fake agent that runs the helper here)
    // reads 3 MB of our stdin, more than the 1 MiB the master keeps in flight.
    let dir = std::env::temp_dir().join(format!("tandem-stdin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("input");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(&input, &data).unwrap();
    let agent = dir.join("agent.sh");
    std::fs::write(&agent, "#!/bin/sh\nshift\nexec \"$@\"\n").unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&agent)
        .status()
        .unwrap();
    let expected = Command::new("sh")
        .arg("-c")
        .arg(format!("cksum < {}", input.display()))
        .output()
        .expect("cksum");
    let expected = String::from_utf8_lossy(&expected.stdout).trim().to_string();
    let script = format!(
        "exec {TANDEM} run --host far1:1,far2:1 --agent {} --set tcp_if_include=lo \
         --tag-output cksum < {}",
        agent.display(),
        input.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.has_line(&expected)
            && outcome.stdout.contains("[0] ")
            && outcome.has_line("4294967295 0"),
        "rank 0 should read all of stdin ({expected}) and rank 1 nothing\n{}",
        outcome.describe()
    );
}

/// MPMD across hosts: `-n 2 PROG a : -n 2 PROG b` over two hosts of two
/// slots; each rank runs its own program's arguments and knows its
/// MPI_APPNUM, and all four make one MPI_COMM_WORLD.
#[test]
fn programs_separated_by_colons_share_one_job_across_hosts() {
    let Some(hosts) = hosts_or_skip(3, None, "programs_separated_by_colons") else {
        return;
    };
    let prog = compile("mpmd_apps");
    let list = format!("{}:2,{}:2", hosts.names[1], hosts.names[2]);
    let mut cmd = tandem_run(&hosts, 0);
    cmd.args(["--host", &list, "-n", "2"])
        .arg(&prog)
        .arg("a")
        .args([":", "-n", "2"])
        .arg(&prog)
        .arg("b");
    let out = run_command(cmd, JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "rank 0 of 4 app 0 arg a",
            "rank 1 of 4 app 0 arg a",
            "rank 2 of 4 app 1 arg b",
            "rank 3 of 4 app 1 arg b"
        ],
        "{}",
        out.describe()
    );
}

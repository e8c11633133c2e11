//! Network namespaces as test hosts.
//!
//! [`Hosts::create`] makes K namespaces `tnd-<pid>-<n>-h<i>`, each with an
//! `eth0` whose peer is attached to a bridge in a namespace of its own
//! (`...-sw`), addresses 10.213.0.<i+1>/24 inside them only (each set of
//! hosts has its own bridge, so sets never see each other), and optionally
//! a token-bucket rate limit on every `eth0` (`tc qdisc ... tbf rate 1gbit`)
//! to emulate Gigabit Ethernet. Jobs run across them with `tandem run
//! --agent "ip netns exec {host}"`, the master in the first namespace. The
//! namespaces (and with them every interface) are removed when the value is
//! dropped — when the test fails too — and namespaces left by a test process
//! that died are removed by the next one.

#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The agent that runs a command "on" a namespace host.
pub const AGENT: &str = "ip netns exec {host}";
/// The hosts' network; the only addresses any multi-host test uses.
pub const SUBNET: &str = "10.213.0.0/24";

const PREFIX: &str = "tnd-";

/// A set of namespace hosts, removed on drop.
pub struct Hosts {
    pub names: Vec<String>,
    switch: String,
    created: Vec<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn list() -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Removes namespaces of test processes that no longer exist.
fn remove_stale() {
    for name in list() {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", &name]);
        }
    }
}

impl Hosts {
    /// Creates `k` hosts, each `eth0` limited to `rate` (a tc rate such as
    /// `1gbit`) with a token bucket of `burst` bytes when given. `Err` says
    /// why namespaces cannot be made here (the test then skips).
    pub fn create(k: usize, rate: Option<(&str, &str)>) -> Result<Hosts, String> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        remove_stale();
        let base = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut hosts = Hosts {
            names: Vec::new(),
            switch: format!("{base}-sw"),
            created: Vec::new(),
        };
        ip(&["netns", "add", &hosts.switch])?;
        hosts.created.push(hosts.switch.clone());
        let sw = hosts.switch.clone();
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        for i in 0..k {
            let name = format!("{base}-h{i}");
            ip(&["netns", "add", &name])?;
            hosts.created.push(name.clone());
            let port = format!("p{i}");
            ip(&[
                "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &name,
            ])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0", "up"])?;
            let addr = format!("{}/24", Self::address(i));
            ip(&["-n", &name, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
            if let Some((rate, burst)) = rate {
                let out = Command::new("ip")
                    .args([
                        "netns", "exec", &name, "tc", "qdisc", "add", "dev", "eth0", "root",
                    ])
                    .args(["tbf", "rate", rate, "burst", burst, "latency", "400ms"])
                    .output()
                    .map_err(|e| format!("cannot run tc: {e}"))?;
                if !out.status.success() {
                    return Err(format!(
                        "tc tbf failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
            }
            hosts.names.push(name);
        }
        Ok(hosts)
    }

    /// Host `i`'s address.
    pub fn address(i: usize) -> String {
        format!("10.213.0.{}", i + 1)
    }

    /// Cuts host `i` off the bridge (its packets go nowhere).
    pub fn unplug(&self, i: usize) -> Result<(), String> {
        ip(&["-n", &self.switch, "link", "set", &format!("p{i}"), "down"])
    }

    /// Gives host `i` a second interface, `d0` with `addr/24`, that no other
    /// host can reach (one end of a veth pair whose other end, `d1`, stays
    /// inside the host too).
    pub fn add_dead_end(&self, i: usize, addr: &str) -> Result<(), String> {
        let ns = &self.names[i];
        ip(&[
            "-n", ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1",
        ])?;
        ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", "d0"])?;
        ip(&["-n", ns, "link", "set", "d1", "up"])?;
        ip(&["-n", ns, "link", "set", "d0", "up"])
    }

    /// `host:slots,...` for `--host`.
    pub fn host_list(&self, slots: u32) -> String {
        self.names
            .iter()
            .map(|n| format!("{n}:{slots}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `ip netns exec <host i> tandem run --agent ... --set tcp_if_include=...`,
    /// to which the test adds its options and program.
    pub fn tandem_run(&self, i: usize) -> Command {
        self.tandem_run_on(i, SUBNET)
    }

    /// Like [`Hosts::tandem_run`] with `tcp_if_include=include`.
    pub fn tandem_run_on(&self, i: usize, include: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &self.names[i],
            crate::common::TANDEM,
            "run",
        ])
        .args(["--agent", AGENT, "--set"])
        .arg(format!("tcp_if_include={include}"));
        cmd
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for name in self.created.iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Makes the hosts, or says plainly why the test cannot run here.
pub fn hosts_or_skip(k: usize, rate: Option<(&str, &str)>, test: &str) -> Option<Hosts> {
    match Hosts::create(k, rate) {
        Ok(h) => Some(h),
        Err(why) => {
            eprintln!(
                "SKIP {test}: network namespaces cannot be created on this machine ({why}); \
                 these tests need root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2"
            );
            None
        }
    }
}

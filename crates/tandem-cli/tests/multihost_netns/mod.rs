//! Network namespaces as test hosts: the implementation `tandem bench
//! --hosts netns:K` uses (`tandem_bench::netns`), plus what the tests add
//! to it: their subnet, `tandem run` inside the first host, and skipping
//! with a clear message where namespaces cannot be made.

#![allow(dead_code)]

use std::process::Command;

pub use tandem_bench::netns::{Hosts, AGENT};

/// The hosts' network; the only addresses any multi-host test uses.
pub const SUBNET: &str = "10.213.0.0/24";

/// `ip netns exec <host i> tandem run --agent ... --set tcp_if_include=...`,
/// to which the test adds its options and program.
pub fn tandem_run(hosts: &Hosts, i: usize) -> Command {
    tandem_run_on(hosts, i, SUBNET)
}

/// Like [`tandem_run`] with `tcp_if_include=include`.
pub fn tandem_run_on(hosts: &Hosts, i: usize, include: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        &hosts.names[i],
        crate::common::TANDEM,
        "run",
    ])
    .args(["--agent", AGENT, "--set"])
    .arg(format!("tcp_if_include={include}"));
    cmd
}

/// Makes the hosts, or says plainly why the test cannot run here.
pub fn hosts_or_skip(k: usize, rate: Option<(&str, &str)>, test: &str) -> Option<Hosts> {
    match Hosts::create(k, rate, "10.213.0") {
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

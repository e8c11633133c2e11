//! Network namespaces as hosts, for `tandem bench --hosts netns:K`,
//! `tandem _netns` and the multi-host tests.
//!
//! [`Hosts::create`] makes K namespaces `tnd-<pid>-<n>-h<i>`, each with an
//! `eth0` whose peer is attached to a bridge in a namespace of its own
//! (`...-sw`), addresses `<subnet>.<i+1>/24` inside them only (each set of
//! hosts has its own bridge, so sets never see each other, and nothing is
//! added to the machine's own network), and optionally a token-bucket rate
//! limit on every `eth0` (`tc qdisc ... tbf rate 1gbit`) to emulate Gigabit
//! Ethernet. Jobs run across them with `tandem run --agent "ip netns exec
//! {host}"`, the master in the first one. The namespaces, and with them
//! every interface, are removed when the value is dropped (on errors and
//! panics too), by [`remove_on_signals`] on Ctrl-C or SIGTERM, and those
//! of a process that died anyway are removed by the next one that makes
//! hosts.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// The agent that runs a command "on" a namespace host.
pub const AGENT: &str = "ip netns exec {host}";

/// Prefix of every namespace made here; the process id follows.
const PREFIX: &str = "tnd-";

/// Namespaces this process made and has not removed yet, for the signal
/// thread.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A set of namespace hosts, removed on drop.
pub struct Hosts {
    pub names: Vec<String>,
    /// The first three octets of the hosts' /24 network.
    subnet: String,
    switch: String,
    created: Vec<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "there is no `ip` command (Debian package iproute2)".to_string()
            } else {
                format!("cannot run `ip`: {e}")
            }
        })?;
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
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Removes namespaces of processes that no longer exist.
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

/// A tc rate (`1gbit`, `100mbit`, `500kbit`, `2.5gbit`) in bytes per
/// second.
pub fn rate_bytes(rate: &str) -> Option<f64> {
    let lower = rate.to_ascii_lowercase();
    let digits = lower.strip_suffix("bit")?;
    let (number, scale) = match digits.chars().last()? {
        'k' => (&digits[..digits.len() - 1], 1e3),
        'm' => (&digits[..digits.len() - 1], 1e6),
        'g' => (&digits[..digits.len() - 1], 1e9),
        _ => (digits, 1.0),
    };
    let n: f64 = number.parse().ok()?;
    (n.is_finite() && n > 0.0).then_some(n * scale / 8.0)
}

/// The token bucket for `rate`: about one millisecond of it, and no less
/// than 16 KiB (a bucket smaller than a few packets makes the link
/// erratic).
pub fn burst_for(rate: &str) -> Option<String> {
    let bytes = rate_bytes(rate)?;
    Some(format!("{}", (bytes / 1000.0).max(16384.0).round() as u64))
}

impl Hosts {
    /// Creates `k` hosts on `subnet` (three octets, e.g. "10.213.0"), each
    /// `eth0` limited to `rate` (a tc rate such as `1gbit`) with a token
    /// bucket of `burst` bytes when given. `Err` says why namespaces cannot
    /// be made here.
    pub fn create(k: usize, rate: Option<(&str, &str)>, subnet: &str) -> Result<Hosts, String> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        remove_stale();
        let base = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut hosts = Hosts {
            names: Vec::new(),
            subnet: subnet.to_string(),
            switch: format!("{base}-sw"),
            created: Vec::new(),
        };
        let sw = hosts.switch.clone();
        hosts.add_namespace(&sw)?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        for i in 0..k {
            let name = format!("{base}-h{i}");
            hosts.add_namespace(&name)?;
            let port = format!("p{i}");
            ip(&[
                "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &name,
            ])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0", "up"])?;
            let addr = format!("{}/24", hosts.address(i));
            ip(&["-n", &name, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
            if let Some((rate, burst)) = rate {
                let out = Command::new("ip")
                    .args([
                        "netns", "exec", &name, "tc", "qdisc", "add", "dev", "eth0", "root",
                    ])
                    .args(["tbf", "rate", rate, "burst", burst, "latency", "400ms"])
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run tc: {e}"))?;
                if !out.status.success() {
                    return Err(format!(
                        "`tc qdisc add dev eth0 root tbf rate {rate} burst {burst} latency 400ms` failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
            }
            hosts.names.push(name);
        }
        Ok(hosts)
    }

    fn add_namespace(&mut self, name: &str) -> Result<(), String> {
        // Registered first, so a signal arriving in between removes it too.
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.to_string());
        self.created.push(name.to_string());
        ip(&["netns", "add", name])
    }

    /// Host `i`'s address.
    pub fn address(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }

    /// The hosts' network, for `tcp_if_include`.
    pub fn network(&self) -> String {
        format!("{}.0/24", self.subnet)
    }

    /// Cuts host `i` off the bridge (its packets go nowhere).
    #[allow(dead_code)] // for the multi-host tests
    pub fn unplug(&self, i: usize) -> Result<(), String> {
        ip(&["-n", &self.switch, "link", "set", &format!("p{i}"), "down"])
    }

    /// Gives host `i` a second interface, `d0` with `addr/24`, that no other
    /// host can reach (one end of a veth pair whose other end, `d1`, stays
    /// inside the host too).
    #[allow(dead_code)] // for the multi-host tests
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
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        for name in self.created.iter().rev() {
            let _ = ip(&["netns", "del", name]);
            live.retain(|n| n != name);
        }
    }
}

/// From now on SIGINT, SIGTERM and SIGHUP remove the namespaces this
/// process has made, then end it with the usual status (128 + signal).
/// Call it before any other thread starts: the signals are blocked in the
/// calling thread (and so in every thread it starts) and taken by a thread
/// of their own. Children must unblock them before exec.
pub fn remove_on_signals() -> Result<(), String> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it fully.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t owned by this frame; the signal
    // numbers are valid constants.
    unsafe {
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
    }
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(format!(
            "cannot block signals: {}",
            std::io::Error::from_raw_os_error(rc)
        ));
    }
    std::thread::Builder::new()
        .name("netns-signals".into())
        .spawn(move || loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: `set` is an initialised sigset_t that this closure
            // owns; `signal` is valid for writes.
            if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                continue;
            }
            let names: Vec<String> = LIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for name in names.iter().rev() {
                let _ = ip(&["netns", "del", name]);
            }
            let what = match signal {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            eprintln!(
                "tandem: {what}: stopped, and removed the network namespaces {}",
                names.join(", ")
            );
            std::process::exit(128 + signal);
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the signal thread: {e}"))
}

/// Puts the calling process (a child between fork and exec) back to no
/// blocked signals, and asks for SIGTERM when its parent dies: a job
/// started in namespaces stops with the command that started it.
///
/// # Safety
/// Only async-signal-safe calls: fit for `CommandExt::pre_exec`.
pub unsafe fn child_defaults() -> std::io::Result<()> {
    // SAFETY: sigset_t is plain data; all-zero is a valid value; sigemptyset
    // and sigprocmask are async-signal-safe; a null old-set pointer is
    // allowed.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // prctl(PR_SET_PDEATHSIG) only changes this process's attributes.
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The subnet (three octets) of the namespaces the `tandem` command makes
/// (`tandem bench --hosts`, `tandem _netns`); the tests use their own.
pub const COMMAND_SUBNET: &str = "10.231.0";

/// `tandem _netns`: runs `command` with `k` namespace hosts (the names in
/// NETNS_HOSTS, their network in NETNS_NETWORK, the agent in NETNS_AGENT),
/// then removes them; returns the command's exit status.
pub fn run_with_hosts(
    k: usize,
    rate: Option<&str>,
    burst: Option<&str>,
    command: &[std::ffi::OsString],
) -> i32 {
    let fail = |e: String| {
        eprintln!("tandem _netns: {e}");
        1
    };
    let bucket = match rate {
        Some(r) => match burst.map(str::to_string).or_else(|| burst_for(r)) {
            Some(b) => Some((r, b)),
            None => return fail(format!("--rate {r}: expected a tc rate such as 1gbit")),
        },
        None => None,
    };
    if let Err(e) = remove_on_signals() {
        return fail(e);
    }
    let hosts = match Hosts::create(k, bucket.as_ref().map(|(r, b)| (*r, b.as_str())), COMMAND_SUBNET) {
        Ok(h) => h,
        Err(e) => {
            return fail(format!(
                "network namespaces cannot be created here ({e}); they need root (or CAP_NET_ADMIN and \
                 CAP_SYS_ADMIN) and iproute2"
            ))
        }
    };
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("NETNS_HOSTS", hosts.names.join(" "))
        .env("NETNS_NETWORK", hosts.network())
        .env("NETNS_AGENT", AGENT);
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: child_defaults makes only async-signal-safe calls.
        unsafe {
            cmd.pre_exec(|| child_defaults());
        }
    }
    let status = match cmd.status() {
        Ok(s) => s,
        Err(e) => return fail(format!("cannot run {}: {e}", command[0].to_string_lossy())),
    };
    drop(hosts);
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(rate_bytes("1gbit"), Some(125e6));
        assert_eq!(rate_bytes("100Mbit"), Some(12.5e6));
        assert_eq!(rate_bytes("2.5gbit"), Some(312.5e6));
        assert_eq!(rate_bytes("800bit"), Some(100.0));
        assert_eq!(rate_bytes("1gbps"), None);
        assert_eq!(rate_bytes("fast"), None);
        assert_eq!(rate_bytes("0mbit"), None);
        assert_eq!(burst_for("1gbit").as_deref(), Some("125000"));
        assert_eq!(burst_for("10mbit").as_deref(), Some("16384"));
    }
}

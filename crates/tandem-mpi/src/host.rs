//! This host: its name, and the identity that decides which processes
//! share it (`MPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`, shared
//! windows), so that both always agree.

/// The host name (`gethostname`), if there is one.
pub fn name() -> Option<String> {
    let mut host = [0u8; 256];
    // SAFETY: `host` is valid for its length minus the final NUL kept.
    let rc = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len() - 1) };
    (rc == 0).then(|| {
        let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
        String::from_utf8_lossy(&host[..end]).into_owned()
    })
}

/// FNV-1a over the kernel's boot id and the host name: processes with the
/// same value run under one kernel and can map each other's memory. The
/// boot id tells apart machines that share a name (cloned VMs, containers
/// named alike).
pub fn identity() -> u64 {
    let boot = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let name = name().unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in boot.iter().chain(&[0u8]).chain(name.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

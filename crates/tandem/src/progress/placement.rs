//! Where a rank and its progress helper thread run (the `bind` and
//! `progress_cpu` parameters): a rank pinned to one CPU so that a busy
//! machine cannot pack two polling ranks onto one core, and its helper
//! placed where it does not take the computing core.

use crate::params::Settings;

/// The CPUs this process was allowed before [`bind_to_core`] narrowed the
/// main thread to one (threads Tandem starts later, like the progress
/// helper, get these back).
static ORIGINAL_CPUS: std::sync::OnceLock<libc::cpu_set_t> = std::sync::OnceLock::new();

/// Where a pinned rank's progress helper thread may go (see [`helper_cpu`]).
#[derive(Clone, Copy)]
struct HelperPlaces {
    /// The CPU the rank itself is pinned to.
    own: usize,
    /// A CPU no rank of the host is pinned to, if there is one.
    free: Option<usize>,
    /// The CPU of the next rank on the host.
    next: usize,
}

/// Set when the rank is pinned (see [`bind_to_core`]).
static HELPER_PLACES: std::sync::OnceLock<HelperPlaces> = std::sync::OnceLock::new();

/// The CPU for this rank's progress helper thread when it is left to
/// Tandem (`progress_cpu=auto`): `None` when the rank is not pinned (then
/// the scheduler places the helper). A pinned rank's helper goes to a CPU
/// no rank of the host is pinned to if there is one. Otherwise it depends
/// on who copies the data its helper receives:
/// - ranks of the host talk through shared memory (`host_peers_on_tcp`
///   false): the next rank's CPU. The helper there only matches and
///   answers (senders write the data themselves), and when this rank
///   computes its peer is likely waiting there; the helper must not take
///   the computing core (the scheduler, left alone, keeps a thread beside
///   the one that started it).
/// - they talk over TCP: the rank's own CPU. The helper copies every byte
///   out of the socket itself, and beside a peer that is sending to it the
///   two copies would take turns on one core (a 4 MiB receive overlapped
///   with 300 µs of computation took twice as long as with no helper).
pub fn helper_cpu(host_peers_on_tcp: bool) -> Option<usize> {
    HELPER_PLACES
        .get()
        .map(|places| places.pick(host_peers_on_tcp))
}

impl HelperPlaces {
    fn pick(&self, host_peers_on_tcp: bool) -> usize {
        match (self.free, host_peers_on_tcp) {
            (Some(free), _) => free,
            (None, true) => self.own,
            (None, false) => self.next,
        }
    }
}

/// The CPU this rank is pinned to, if it is.
pub fn own_cpu() -> Option<usize> {
    HELPER_PLACES.get().map(|p| p.own)
}

/// Restores the CPUs the process had before binding, for the calling thread.
pub fn unbind_current_thread() {
    if let Some(set) = ORIGINAL_CPUS.get() {
        // SAFETY: `set` is a valid cpu_set_t of the size passed.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    }
}

/// With `bind=auto` (and a host with no more ranks than CPUs) or
/// `bind=core`, pins this rank's thread to one CPU of those it may use,
/// chosen by its rank on the host, so that a busy machine cannot pack two
/// polling ranks onto one core (Open MPI binds by default for the same
/// reason). Oversubscribed hosts stay unbound: ranks must be able to move.
pub fn bind_to_core(settings: &Settings, local_size: u32) {
    let mode = settings.text("bind");
    let cpus = usable_cpus();
    // A rank alone on its host has nobody to be packed with.
    if mode == "none" || (mode == "auto" && (local_size < 2 || local_size as usize > cpus)) {
        return;
    }
    let local_rank: usize = std::env::var(crate::transport::shm::env::LOCAL_RANK)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: an all-zero cpu_set_t is valid; the calls read and write
    // sets of the size passed.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return;
        }
        let ids: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        if ids.is_empty() {
            return;
        }
        let _ = ORIGINAL_CPUS.set(allowed);
        let mine = ids[local_rank % ids.len()];
        let local = local_size as usize;
        let _ = HELPER_PLACES.set(HelperPlaces {
            own: mine,
            free: (ids.len() > local).then(|| ids[local + local_rank % (ids.len() - local)]),
            next: ids[(local_rank + 1) % ids.len()],
        });
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(mine, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}

/// CPUs this process may run on.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::HelperPlaces;

    #[test]
    fn helper_goes_to_a_free_cpu_else_beside_its_peer_or_home_over_tcp() {
        let busy = HelperPlaces {
            own: 0,
            free: None,
            next: 1,
        };
        assert_eq!(busy.pick(false), 1, "shared memory: the next rank's CPU");
        assert_eq!(busy.pick(true), 0, "TCP: the rank's own CPU");
        let spare = HelperPlaces {
            free: Some(3),
            ..busy
        };
        assert_eq!(spare.pick(false), 3);
        assert_eq!(spare.pick(true), 3);
    }
}

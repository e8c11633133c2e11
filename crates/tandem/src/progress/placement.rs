//! Where a rank and its progress helper thread run (the `bind` and
//! `progress_cpu` parameters): a rank pinned to one CPU so that a busy
//! machine cannot pack two polling ranks onto one core, and its helper
//! placed where it does not take the computing core.

use crate::params::Settings;

/// The CPUs this process was allowed before [`bind_rank`] narrowed the
/// main thread to its own (threads Tandem starts later, like the progress
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

/// Set when the rank is pinned (see [`bind_rank`]).
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

/// Pins this rank's thread to its CPUs: `bind_cpus` of those it may use
/// (one by default), chosen by its rank on the host, in the order
/// `bind_order` gives; with `bind=socket`, to every CPU of the sockets
/// those are on. `bind=auto` pins only when the host has CPUs enough for
/// all its ranks, so that a busy machine cannot pack two polling ranks onto
/// one core (Open MPI binds by default for the same reason) while
/// oversubscribed ranks can still move; `bind=core` and `socket` always
/// pin, `none` never.
pub fn bind_rank(settings: &Settings, local_rank: u32, local_size: u32) {
    let mode = settings.text("bind");
    let per = usize::try_from(settings.uint("bind_cpus"))
        .unwrap_or(1)
        .max(1);
    let cpus = usable_cpus();
    // A rank alone on its host has nobody to be packed with.
    let needed = (local_size as usize).saturating_mul(per);
    if mode == "none" || (mode == "auto" && (local_size < 2 || needed > cpus)) {
        return;
    }
    let local_rank = local_rank as usize;
    // SAFETY: an all-zero cpu_set_t is valid; the calls read and write
    // sets of the size passed.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<Cpu> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .map(|id| Cpu {
                id,
                socket: socket_of(id),
            })
            .collect();
        let order = settings.text("bind_order");
        let Some((set, places)) = choose(&cpus, local_rank, local_size as usize, per, mode, order)
        else {
            return;
        };
        let _ = ORIGINAL_CPUS.set(allowed);
        let _ = HELPER_PLACES.set(places);
        let mut mine: libc::cpu_set_t = std::mem::zeroed();
        for c in set {
            libc::CPU_SET(c, &mut mine);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mine);
    }
}

/// A CPU the process may use, and its socket (physical package).
#[derive(Clone, Copy, Debug)]
struct Cpu {
    id: usize,
    socket: u32,
}

/// The socket of CPU `id`, from sysfs (0 where it does not say).
fn socket_of(id: usize) -> u32 {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{id}/topology/physical_package_id"
    ))
    .ok()
    .and_then(|t| t.trim().parse().ok())
    .unwrap_or(0)
}

/// The CPUs of local rank `rank` of `ranks`, taking `per` consecutive
/// CPUs each in `order` (`core`: CPU order; `socket`: round robin over
/// the sockets), widened to their whole sockets with `mode` socket; and
/// where its helper thread may go. `None` without CPUs.
fn choose(
    cpus: &[Cpu],
    rank: usize,
    ranks: usize,
    per: usize,
    mode: &str,
    order: &str,
) -> Option<(Vec<usize>, HelperPlaces)> {
    if cpus.is_empty() {
        return None;
    }
    let mut ordered: Vec<Cpu> = cpus.to_vec();
    if order == "socket" {
        // The i-th CPU of every socket, then the (i+1)-th ...
        let mut sockets: Vec<u32> = cpus.iter().map(|c| c.socket).collect();
        sockets.sort_unstable();
        sockets.dedup();
        let nth = |c: &Cpu| {
            cpus.iter()
                .filter(|o| o.socket == c.socket && o.id < c.id)
                .count()
        };
        ordered.sort_by_key(|c| (nth(c), sockets.iter().position(|&s| s == c.socket)));
    }
    let n = ordered.len();
    let at = |i: usize| ordered[i % n];
    let mut set: Vec<usize> = (0..per).map(|k| at(rank * per + k).id).collect();
    if mode == "socket" {
        let mine: Vec<u32> = (0..per).map(|k| at(rank * per + k).socket).collect();
        set = cpus
            .iter()
            .filter(|c| mine.contains(&c.socket))
            .map(|c| c.id)
            .collect();
    }
    set.sort_unstable();
    set.dedup();
    let taken = ranks.saturating_mul(per);
    let places = HelperPlaces {
        own: at(rank * per).id,
        free: (n > taken).then(|| at(taken + rank % (n - taken)).id),
        next: at((rank + 1) * per).id,
    };
    Some((set, places))
}

/// CPUs this process may run on.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::{choose, Cpu, HelperPlaces};

    /// Two sockets of two CPUs: 0 and 1 on socket 0, 2 and 3 on socket 1.
    fn two_sockets() -> Vec<Cpu> {
        (0..4)
            .map(|id| Cpu {
                id,
                socket: (id / 2) as u32,
            })
            .collect()
    }

    #[test]
    fn ranks_take_their_cpus_in_the_order_asked() {
        let cpus = two_sockets();
        let set = |rank, per, mode, order| choose(&cpus, rank, 2, per, mode, order).unwrap().0;
        assert_eq!(set(0, 1, "core", "core"), [0]);
        assert_eq!(set(1, 1, "core", "core"), [1]);
        // -c 2: two consecutive CPUs each.
        assert_eq!(set(1, 2, "core", "core"), [2, 3]);
        // --map-by socket: the ranks alternate between the sockets.
        assert_eq!(set(1, 1, "core", "socket"), [2]);
        // --bind-to socket: the whole socket of the rank's CPU.
        assert_eq!(set(0, 1, "socket", "core"), [0, 1]);
        assert_eq!(set(1, 1, "socket", "socket"), [2, 3]);
        // More CPUs asked than there are: wrap around.
        assert_eq!(set(1, 3, "core", "core"), [0, 1, 3]);
        let places = choose(&cpus, 0, 2, 1, "core", "core").unwrap().1;
        assert_eq!((places.own, places.free, places.next), (0, Some(2), 1));
        assert!(choose(&[], 0, 1, 1, "core", "core").is_none());
    }

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

//! Which way a rendezvous message from a rank on this host travels: read
//! by the receiver straight from the sender's memory (single copy,
//! `process_vm_readv`), or pushed by the sender through the shared-memory
//! rings after a CTS. The receiver decides, per sender and per size class
//! (powers of two), by the copy times it measured for each way.
//!
//! Why measure rather than fix a threshold: on a virtual machine the host
//! may place the two CPUs close (sharing a cache: the rings win, 10-25%
//! from 256 KiB on) or far apart (every cache line crosses to the other
//! side: the rings are 4-7x slower, single copy is unaffected), and the
//! placement changes while a job runs.
//!
//! The faster way is taken; the other is tried again after a gap that
//! doubles each time it loses (up to [`MAX_PROBE_GAP`] messages), so a
//! change in placement is noticed and a stable one costs little.

use std::time::Instant;

use super::request::ReqId;

/// How a rendezvous message travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
    /// The receiver reads the sender's buffer (single copy).
    Pull,
    /// The sender pushes it through the rings (after a CTS).
    Rings,
}

impl Path {
    fn index(self) -> usize {
        match self {
            Path::Pull => 0,
            Path::Rings => 1,
        }
    }

    fn other(self) -> Path {
        match self {
            Path::Pull => Path::Rings,
            Path::Rings => Path::Pull,
        }
    }
}

/// Size classes: up to 32 KiB, 32-64 KiB, ..., the last open-ended (from
/// 128 MiB).
const CLASSES: usize = 14;
const FIRST_CLASS_LOG2: u32 = 14;
/// Messages between tries of the slower way, at first and at most.
const FIRST_PROBE_GAP: u32 = 8;
pub(super) const MAX_PROBE_GAP: u32 = 1024;
/// Messages in a row that a try (and the first measurement) takes the
/// other way; the fastest of them counts, since the first after a change
/// of way finds cold caches.
const TRY_RUN: u8 = 2;

#[derive(Clone, Copy, Default)]
struct Class {
    /// Per way: nanoseconds per KiB, 0 until measured. For the way in use
    /// a smoothed value; for the other the fastest of its last try.
    cost: [f32; 2],
    /// Per way: messages measured (saturating).
    samples: [u8; 2],
    /// The way being tried, and how many more messages take it.
    trying: Option<(Path, u8)>,
    /// Messages left before the slower way is tried again.
    until_probe: u32,
    /// What `until_probe` was last set to.
    gap: u32,
    /// The way in use when the last try began.
    in_use_at_try: Option<Path>,
}

impl Class {
    /// The faster way measured, once both are.
    fn best(&self) -> Option<Path> {
        let [pull, rings] = self.cost;
        (pull > 0.0 && rings > 0.0).then_some(if pull <= rings {
            Path::Pull
        } else {
            Path::Rings
        })
    }

    fn choose(&mut self) -> Path {
        if let Some((way, left)) = self.trying.as_mut() {
            if *left > 0 {
                *left -= 1;
                return *way;
            }
            self.trying = None;
        }
        // Measure each way first, single copy first.
        for way in [Path::Pull, Path::Rings] {
            if self.samples[way.index()] < TRY_RUN {
                return way;
            }
        }
        let Some(best) = self.best() else {
            return Path::Pull;
        };
        if self.in_use_at_try.is_none() {
            // Both just measured: the first try comes after a gap.
            self.in_use_at_try = Some(best);
            self.gap = FIRST_PROBE_GAP;
            self.until_probe = FIRST_PROBE_GAP;
        }
        if self.until_probe > 0 {
            self.until_probe -= 1;
            return best;
        }
        // Time to try the other way, less often each time it has lost.
        self.gap = if self.in_use_at_try == Some(best) {
            (self.gap * 2).clamp(FIRST_PROBE_GAP, MAX_PROBE_GAP)
        } else {
            FIRST_PROBE_GAP
        };
        self.in_use_at_try = Some(best);
        self.until_probe = self.gap;
        let way = best.other();
        self.trying = Some((way, TRY_RUN - 1));
        way
    }

    fn record(&mut self, path: Path, per_kib: f32) {
        let i = path.index();
        let old = self.cost[i];
        let trying = self
            .trying
            .and_then(|(w, left)| (w == path).then_some(left));
        self.cost[i] = if old == 0.0 || trying == Some(TRY_RUN - 1) {
            // A first measurement, or the first of a try: what was known
            // of this way is old.
            per_kib
        } else if trying.is_some() || self.samples[i] < TRY_RUN {
            old.min(per_kib)
        } else {
            // The way in use, smoothed; one slow message (an interrupt,
            // a page fault) moves it by a quarter at most.
            old * 0.75 + per_kib.min(old * 2.0) * 0.25
        };
        self.samples[i] = self.samples[i].saturating_add(1);
    }
}

/// A ring transfer being timed: the receive, and since when the rings
/// carry it (its CTS, or the end of a transfer ahead of it from the same
/// sender, whichever came later).
#[derive(Clone, Copy)]
struct Timed {
    rid: ReqId,
    since: Instant,
}

#[derive(Default)]
struct Peer {
    classes: [Class; CLASSES],
    timed: Option<Timed>,
}

/// The choice for every sender on this host (by world rank, made on first
/// use).
#[derive(Default)]
pub(super) struct PathChooser {
    peers: Vec<Option<Box<Peer>>>,
    /// Times a way was chosen other than the one in use before (reported
    /// as the `path_switches` counter).
    pub switches: u64,
}

fn class_of(len: u64) -> usize {
    let log2 = 63 - len.max(1).leading_zeros();
    (log2.saturating_sub(FIRST_CLASS_LOG2) as usize).min(CLASSES - 1)
}

impl PathChooser {
    fn peer(&mut self, peer: u32) -> &mut Peer {
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize_with(i + 1, || None);
        }
        self.peers[i].get_or_insert_with(Box::default)
    }

    /// The way the next message of `len` bytes from `peer` should take.
    pub fn choose(&mut self, peer: u32, len: u64) -> Path {
        self.peer(peer).classes[class_of(len)].choose()
    }

    /// `len` bytes from `peer` took `ns` nanoseconds to copy by `path`.
    pub fn record(&mut self, peer: u32, len: u64, path: Path, ns: u64) {
        if len == 0 {
            return;
        }
        let per_kib = (ns.max(1) as f32) * 1024.0 / len as f32;
        let c = &mut self.peer(peer).classes[class_of(len)];
        // Switches count once both ways are measured.
        let before = c.samples.iter().all(|&n| n >= TRY_RUN).then(|| c.best());
        c.record(path, per_kib);
        let after = c.best();
        if before.is_some_and(|b| b != after) {
            self.switches += 1;
        }
    }

    /// Receive `rid` from `peer` was answered with a CTS: time its ring
    /// transfer (one at a time per peer; a newer one replaces it). Timed
    /// from the CTS so that the copy into the first cells counts, as the
    /// whole copy does for single copy.
    pub fn time_rings(&mut self, peer: u32, rid: ReqId) {
        self.peer(peer).timed = Some(Timed {
            rid,
            since: Instant::now(),
        });
    }

    /// The data of receive `rid` from `peer`, `len` bytes, has all arrived
    /// through the rings.
    pub fn data_done(&mut self, peer: u32, rid: ReqId, len: u64) {
        let Some(Some(p)) = self.peers.get_mut(peer as usize) else {
            return;
        };
        let Some(t) = p.timed.as_mut() else {
            return;
        };
        if t.rid != rid {
            // A transfer ahead of the timed one: that one starts now.
            t.since = Instant::now();
            return;
        }
        let ns = t.since.elapsed().as_nanos() as u64;
        p.timed = None;
        self.record(peer, len, Path::Rings, ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    /// Feeds `n` choices for a 1 MiB message from peer 3, charging each
    /// way its cost in ns per KiB; returns how many went each way.
    fn run(p: &mut PathChooser, n: usize, pull: u64, rings: u64) -> (usize, usize) {
        let (mut pulls, mut ringed) = (0, 0);
        for _ in 0..n {
            let way = p.choose(3, 1024 * K);
            let cost = match way {
                Path::Pull => {
                    pulls += 1;
                    pull
                }
                Path::Rings => {
                    ringed += 1;
                    rings
                }
            };
            p.record(3, 1024 * K, way, cost * 1024);
        }
        (pulls, ringed)
    }

    #[test]
    fn size_classes_are_powers_of_two_from_16_kib() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(16 * K + 1), 0);
        assert_eq!(class_of(32 * K - 1), 0);
        assert_eq!(class_of(32 * K), 1);
        assert_eq!(class_of(128 * K - 1), 2);
        assert_eq!(class_of(4096 * K), 8);
        assert_eq!(class_of(128 * 1024 * K - 1), CLASSES - 2);
        assert_eq!(class_of(u64::MAX), CLASSES - 1);
    }

    #[test]
    fn measures_each_way_twice_then_takes_the_faster_and_tries_the_other_now_and_then() {
        let mut p = PathChooser::default();
        let mut take = |way: Path, ns: u64| {
            assert_eq!(p.choose(3, 256 * K), way);
            p.record(3, 256 * K, way, ns);
        };
        // The fastest of each pair counts (the first after a change of way
        // is slow).
        take(Path::Pull, 90_000);
        take(Path::Pull, 40_000);
        take(Path::Rings, 90_000);
        take(Path::Rings, 20_000);
        for _ in 0..FIRST_PROBE_GAP {
            take(Path::Rings, 20_000);
        }
        // A try of the slower way: two messages; it loses again.
        take(Path::Pull, 50_000);
        take(Path::Pull, 30_000);
        for _ in 0..2 * FIRST_PROBE_GAP {
            take(Path::Rings, 20_000);
        }
        // The next try, after twice the gap, finds it faster: it stays.
        take(Path::Pull, 30_000);
        take(Path::Pull, 10_000);
        for _ in 0..=FIRST_PROBE_GAP {
            take(Path::Pull, 10_000);
        }
        assert_eq!(p.switches, 1);
        // Other sizes and other peers are chosen on their own.
        assert_eq!(p.choose(3, 4096 * K), Path::Pull);
        assert_eq!(p.choose(4, 256 * K), Path::Pull);
        assert_eq!(p.peer(4).classes[class_of(256 * K)].samples, [0, 0]);
    }

    #[test]
    fn one_slow_message_does_not_change_the_way() {
        let mut p = PathChooser::default();
        run(&mut p, 100, 80, 60);
        let (pulls, _) = {
            let way = p.choose(3, 1024 * K);
            assert_eq!(way, Path::Rings);
            p.record(3, 1024 * K, way, 1300 * 1024);
            run(&mut p, 4, 80, 60)
        };
        assert_eq!((pulls, p.switches), (0, 0));
    }

    #[test]
    fn a_way_that_keeps_losing_is_tried_ever_less_often() {
        let mut p = PathChooser::default();
        let (pulls, ringed) = run(&mut p, 5000, 80, 60);
        // Eight tries at growing gaps, then one every MAX_PROBE_GAP.
        assert!(ringed > 4900, "{pulls} pulls, {ringed} through the rings");
        assert!(
            (8..=30).contains(&pulls),
            "{pulls} pulls, {ringed} through the rings"
        );
        assert_eq!(p.switches, 0);
    }

    #[test]
    fn follows_a_change_of_placement_within_one_gap() {
        let mut p = PathChooser::default();
        run(&mut p, 3000, 80, 60);
        // The rings become 7x slower: at most one gap goes by before the
        // next try of single copy, which then wins and stays.
        let (pulls, ringed) = run(&mut p, 1000, 80, 450);
        assert!(
            ringed <= MAX_PROBE_GAP as usize + 8,
            "{pulls} pulls, {ringed} through the rings"
        );
        assert_eq!(p.switches, 1);
        // And back: the rings get fast again.
        let (_, ringed) = run(&mut p, 1000, 80, 60);
        assert!(ringed > 700, "{ringed} through the rings");
        assert_eq!(p.switches, 2);
    }

    #[test]
    fn a_ring_transfer_is_timed_from_its_cts_or_the_transfer_ahead_of_it() {
        let mut p = PathChooser::default();
        let rid = ReqId(7);
        p.time_rings(2, rid);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // A transfer ahead of it ends: the timed one starts from there.
        p.data_done(2, ReqId(8), 256 * K);
        assert_eq!(p.peer(2).classes[class_of(256 * K)].cost, [0.0, 0.0]);
        std::thread::sleep(std::time::Duration::from_millis(2));
        p.data_done(2, rid, 256 * K);
        let rings = p.peer(2).classes[class_of(256 * K)].cost[Path::Rings.index()];
        // 2 ms for 256 KiB: at least 7800 ns per KiB, and not the 22 ms
        // since the CTS (86,000 ns per KiB).
        assert!((7800.0..40_000.0).contains(&rings), "{rings}");
        assert!(p.peer(2).timed.is_none());
        // Peers never seen, and transfers not timed, are left alone.
        p.data_done(9, rid, 256 * K);
        p.data_done(2, rid, 256 * K);
        assert_eq!(p.peer(2).classes[class_of(256 * K)].cost[0], 0.0);
    }
}

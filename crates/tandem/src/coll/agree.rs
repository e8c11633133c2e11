//! Agreement on a new communicator's context id, as a schedule, so that it
//! can run non-blocking (`MPI_Comm_idup`) beside other agreements and
//! collectives, on the same parent or on others.
//!
//! Each rank hands out ids from a counter that only grows. A round of an
//! agreement takes the maximum of the members' candidates (each at least
//! its counter), then every member checks that no other agreement of its
//! own claimed that id since it offered its candidate, and claims it; a
//! second maximum says whether every member could. If one could not (two
//! agreements in flight at once picked the same id), the claims of the
//! round are given back and the next round starts above it, with a little
//! per-rank jitter so two agreements that collided do not collide again in
//! step. An id taken at a rank before it offered its candidate is below
//! that candidate (claiming an id moves the counter past it), and one taken
//! after is in the claimed set, so an id is never taken twice, nor one
//! that any earlier communicator had.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use super::sched::{Act, Buf, Builder, RemoteGroup, Schedule};
use crate::error::{Error, ErrorClass};

/// Context ids are below this (a communicator uses contexts `2 cid` and
/// `2 cid + 1`, which must fit a `u32`).
const CID_LIMIT: u32 = (1 << 31) - 1;
/// Rounds an agreement may take before it gives up (collisions are rare
/// and jittered apart; this only bounds a wait that could otherwise not end).
const MAX_ROUNDS: u32 = 1000;

/// One rank's context id counter and the claims that agreements in flight
/// must not take again.
#[derive(Debug)]
pub struct CidAlloc {
    /// Every id taken or claimed at this rank is below it.
    next: u32,
    /// Ids taken or claimed while agreements are in flight, from the
    /// smallest candidate one of them offered up (lower ones cannot be what
    /// they agree on).
    claimed: BTreeSet<u32>,
    /// Agreements in flight: the candidate each offered in its current round.
    active: HashMap<u64, u32>,
    next_agreement: u64,
    /// State of the jitter's generator.
    jitter: u64,
}

impl CidAlloc {
    /// A counter whose first free id is `first`; `seed` varies the jitter
    /// between ranks.
    pub fn new(first: u32, seed: u64) -> CidAlloc {
        CidAlloc {
            next: first,
            claimed: BTreeSet::new(),
            active: HashMap::new(),
            next_agreement: 0,
            jitter: seed | 1,
        }
    }

    /// For schemes that agree by other means (the maximum of the members'
    /// offers): this rank's offer, and a token to settle it with.
    pub fn offer(&mut self) -> (u64, u32) {
        self.next_agreement += 1;
        let token = self.next_agreement;
        self.active.insert(token, self.next);
        (token, self.next)
    }

    /// Takes `cid`, agreed after [`CidAlloc::offer`] gave `token`, unless
    /// it is below the offer or an agreement of this rank claimed it since.
    pub fn settle(&mut self, token: u64, cid: u32) -> bool {
        self.settle_range(token, cid, 1)
    }

    /// [`CidAlloc::settle`] for the `n` consecutive ids from `cid` (an
    /// intercommunicator takes two: its own and its hidden local one's).
    pub fn settle_range(&mut self, token: u64, cid: u32, n: u32) -> bool {
        let offered = self.active.remove(&token);
        let end = cid.checked_add(n).filter(|&e| e <= CID_LIMIT);
        let free = offered.is_some_and(|o| cid >= o)
            && end.is_some()
            && !(cid..cid.saturating_add(n)).any(|c| self.claimed.contains(&c));
        if let (true, Some(end)) = (free, end) {
            self.next = self.next.max(end);
            if !self.active.is_empty() {
                self.claimed.extend(cid..end);
            }
        }
        self.prune();
        free
    }

    fn random_below(&mut self, n: u64) -> u32 {
        // xorshift64
        let mut x = self.jitter;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.jitter = x;
        (x % n) as u32
    }

    /// Drops claims no agreement in flight could agree on.
    fn prune(&mut self) {
        match self.active.values().min() {
            None => self.claimed.clear(),
            Some(&low) => self.claimed = self.claimed.split_off(&low),
        }
    }
}

/// Locks the counter; a panic elsewhere cannot leave it inconsistent (each
/// update is a few assignments), so a poisoned lock is used as is.
fn lock(a: &Mutex<CidAlloc>) -> MutexGuard<'_, CidAlloc> {
    a.lock().unwrap_or_else(|p| p.into_inner())
}

/// One agreement's state, shared by its schedule's steps and its owner.
#[derive(Debug)]
pub struct Agreement {
    alloc: Arc<Mutex<CidAlloc>>,
    id: u64,
    /// How many consecutive ids from the agreed one it takes (an
    /// intercommunicator's own and its hidden local one's: two).
    width: u32,
    inner: Mutex<AgreeState>,
}

#[derive(Debug, Default)]
struct AgreeState {
    round: u32,
    /// The next round's candidates are at least this.
    floor: u32,
    /// This round's maximum candidate, and whether this rank claimed it.
    candidate: u32,
    claimed: bool,
    result: Option<u32>,
}

impl Agreement {
    fn state(&self) -> MutexGuard<'_, AgreeState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The agreed id, once the schedule has completed without error.
    pub fn result(&self) -> Option<u32> {
        self.state().result
    }

    /// Gives back this rank's claim of the round, if any.
    fn release(&self, st: &mut AgreeState, a: &mut CidAlloc) {
        if st.claimed {
            for c in st.candidate..st.candidate + self.width {
                a.claimed.remove(&c);
            }
            st.claimed = false;
        }
    }
}

impl Drop for Agreement {
    fn drop(&mut self) {
        let mut a = lock(&self.alloc);
        let mut st = self.state();
        if st.result.is_none() {
            self.release(&mut st, &mut a);
        }
        a.active.remove(&self.id);
        a.prune();
    }
}

/// Reads the two `u32` of an agreement message.
fn pair(b: &[u8]) -> [u32; 2] {
    [
        u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
        u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
    ]
}

fn set_pair(b: &mut [u8], v: [u32; 2]) {
    b[0..4].copy_from_slice(&v[0].to_le_bytes());
    b[4..8].copy_from_slice(&v[1].to_le_bytes());
}

/// Staging buffers: the running maximum, and a child's contribution.
const ACC: Buf = Buf::Tmp(0);
const CHILD: Buf = Buf::Tmp(1);

/// A phase that keeps in `ACC` the element-wise maximum of it and `CHILD`.
fn take_max() -> Vec<Act> {
    vec![Act::Call(Box::new(|t| {
        let c = pair(t.get(1));
        let acc = pair(t.get(0));
        set_pair(t.get(0), [acc[0].max(c[0]), acc[1].max(c[1])]);
        Ok(())
    }))]
}

/// Phases of an element-wise maximum of the two `u32` in `ACC` over the
/// `n` ranks, known to all: a binomial reduce to rank 0, then a binomial
/// broadcast back. With `remote`, over both groups of an intercommunicator:
/// between the two, the leaders (rank 0 of each group) swap their groups'
/// maxima and take the larger.
fn allreduce_max(n: u32, me: u32, remote: bool) -> Vec<Vec<Act>> {
    let mut phases = Vec::new();
    let mut mask = 1;
    while mask < n {
        if me & mask != 0 {
            phases.push(vec![Act::Send {
                to: me - mask,
                buf: ACC,
                off: 0,
                len: 8,
            }]);
            break;
        }
        if me + mask < n {
            phases.push(vec![Act::Recv {
                from: me + mask,
                buf: CHILD,
                off: 0,
                len: 8,
            }]);
            phases.push(take_max());
        }
        mask <<= 1;
    }
    if remote && me == 0 {
        phases.push(vec![
            Act::SendRemote {
                to: 0,
                buf: ACC,
                off: 0,
                len: 8,
            },
            Act::RecvRemote {
                from: 0,
                buf: CHILD,
                off: 0,
                len: 8,
            },
        ]);
        phases.push(take_max());
    }
    // Broadcast: receive from the parent (the rank without this rank's
    // lowest set bit), then send down to ranks me + 2^k for 2^k below it.
    let mut mask = 1;
    while mask < n {
        if me & mask != 0 {
            phases.push(vec![Act::Recv {
                from: me - mask,
                buf: ACC,
                off: 0,
                len: 8,
            }]);
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if me + mask < n {
            sends.push(Act::Send {
                to: me + mask,
                buf: ACC,
                off: 0,
                len: 8,
            });
        }
        mask >>= 1;
    }
    if !sends.is_empty() {
        phases.push(sends);
    }
    phases
}

/// The phases of one round, the last of which decides whether another
/// round follows.
fn round(ag: &Arc<Agreement>, n: u32, me: u32, remote: bool) -> Vec<Vec<Act>> {
    let mut phases = Vec::new();
    let offer = Arc::clone(ag);
    phases.push(vec![Act::Call(Box::new(move |t| {
        let mut a = lock(&offer.alloc);
        let mut st = offer.state();
        st.round += 1;
        if st.round > MAX_ROUNDS {
            return Err(Error::new(
                ErrorClass::Intern,
                format!("no context id agreed after {MAX_ROUNDS} rounds"),
            ));
        }
        let candidate = a.next.max(st.floor);
        a.active.insert(offer.id, candidate);
        a.prune();
        set_pair(t.get(0), [candidate, 0]);
        Ok(())
    }))]);
    phases.extend(allreduce_max(n, me, remote));
    let check = Arc::clone(ag);
    phases.push(vec![Act::Call(Box::new(move |t| {
        let c = pair(t.get(0))[0];
        let end = c.checked_add(check.width).filter(|&e| e <= CID_LIMIT);
        let Some(end) = end else {
            return Err(Error::new(
                ErrorClass::Intern,
                "out of communicator context ids",
            ));
        };
        let mut a = lock(&check.alloc);
        let mut st = check.state();
        st.candidate = c;
        st.claimed = !(c..end).any(|i| a.claimed.contains(&i));
        if st.claimed {
            a.claimed.extend(c..end);
            a.next = a.next.max(end);
        }
        set_pair(t.get(0), [u32::from(!st.claimed), 0]);
        Ok(())
    }))]);
    phases.extend(allreduce_max(n, me, remote));
    let decide = Arc::clone(ag);
    phases.push(vec![Act::Extend(Box::new(move |t| {
        let refused = pair(t.get(0))[0] != 0;
        let more = {
            let mut a = lock(&decide.alloc);
            let mut st = decide.state();
            if refused {
                decide.release(&mut st, &mut a);
                // Past the collision, by a per-rank amount (the maximum is
                // taken), so that the agreements that met there part.
                let jitter = a.random_below(8);
                st.floor = st.candidate.saturating_add(1 + jitter);
                true
            } else {
                st.result = Some(st.candidate);
                // The id stays in the claimed set while others are in
                // flight: it is taken now.
                a.active.remove(&decide.id);
                a.prune();
                false
            }
        };
        Ok(if more {
            round(&decide, n, me, remote)
        } else {
            Vec::new()
        })
    }))]);
    phases
}

/// Builds this rank's schedule of a context id agreement among `n` ranks
/// (this one is `me`), and the handle to read its result from. With
/// `remote`, the agreement spans both groups of an intercommunicator (`n`
/// and `group` are the local one) and takes two consecutive ids.
pub(crate) fn schedule(
    alloc: &Arc<Mutex<CidAlloc>>,
    n: u32,
    me: u32,
    ctx: u32,
    tag: i32,
    group: Arc<[u32]>,
    remote: Option<RemoteGroup>,
) -> (Schedule, Arc<Agreement>) {
    let id = {
        let mut a = lock(alloc);
        a.next_agreement += 1;
        a.next_agreement
    };
    let ag = Arc::new(Agreement {
        alloc: Arc::clone(alloc),
        id,
        width: if remote.is_some() { 2 } else { 1 },
        inner: Mutex::new(AgreeState::default()),
    });
    let mut b = Builder::new(n, me);
    b.tmp(8);
    b.tmp(8);
    for p in round(&ag, n, me, remote.is_some()) {
        b.phase(p);
    }
    let s = b.finish(ctx, tag, group);
    let s = match remote {
        Some(r) => s.with_remote(r),
        None => s,
    };
    (s, ag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::sched::sim::{RankNet, World};

    fn allocs(firsts: &[u32]) -> Vec<Arc<Mutex<CidAlloc>>> {
        firsts
            .iter()
            .enumerate()
            .map(|(r, &f)| Arc::new(Mutex::new(CidAlloc::new(f, 0x9e37_79b9 * (r as u64 + 1)))))
            .collect()
    }

    /// Agreements `k` = 0.. over all `n` ranks in contexts `100 + k`,
    /// advanced in an order a seeded generator picks (so ranks start them in
    /// different orders); the id each rank got for each.
    fn run(allocs: &[Arc<Mutex<CidAlloc>>], k: usize, seed: u64) -> Vec<Vec<u32>> {
        let n = allocs.len() as u32;
        let group: Arc<[u32]> = (0..n).collect();
        let mut scheds = Vec::new();
        for r in 0..n {
            let mut mine = Vec::new();
            for a in 0..k {
                mine.push(schedule(
                    &allocs[r as usize],
                    n,
                    r,
                    100 + a as u32,
                    7,
                    group.clone(),
                    None,
                ));
            }
            scheds.push(mine);
        }
        let mut world = World::default();
        let mut x = seed | 1;
        for _ in 0..1_000_000 {
            if scheds.iter().flatten().all(|(s, _)| s.is_finished()) {
                break;
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = (x % u64::from(n)) as usize;
            let a = ((x >> 20) % k as u64) as usize;
            let mut net = RankNet {
                world: &mut world,
                me: r as u32,
            };
            scheds[r][a].0.advance(&mut net);
        }
        scheds
            .iter()
            .map(|mine| {
                mine.iter()
                    .map(|(s, ag)| {
                        assert!(s.is_finished(), "an agreement did not finish");
                        assert!(s.error().is_none(), "{:?}", s.error());
                        ag.result().expect("a result")
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn ranges_settle_against_claims_in_flight() {
        let mut a = CidAlloc::new(5, 1);
        let (mine, offer) = a.offer();
        assert_eq!(offer, 5);
        // Another agreement of this rank, in flight meanwhile, takes 8.
        let (other, _) = a.offer();
        assert!(a.settle(other, 8));
        assert!(!a.settle_range(mine, 7, 2), "8 was claimed since the offer");
        let (mine, offer) = a.offer();
        assert_eq!(offer, 9);
        assert!(a.settle_range(mine, 9, 2));
        assert_eq!(a.offer().1, 11, "the counter moves past both");
    }

    #[test]
    fn one_agreement_takes_the_largest_offer_on_every_size() {
        for n in 1..=9u32 {
            let firsts: Vec<u32> = (0..n).map(|r| 2 + (r * 7) % 5).collect();
            let al = allocs(&firsts);
            let ids = run(&al, 1, 1);
            let want = *firsts.iter().max().unwrap();
            for r in 0..n as usize {
                assert_eq!(ids[r][0], want, "rank {r} of {n}");
                let a = lock(&al[r]);
                assert_eq!(a.next, want + 1);
                assert!(a.active.is_empty() && a.claimed.is_empty());
            }
        }
    }

    #[test]
    fn agreements_in_flight_together_never_share_an_id() {
        let mut collided = false;
        for seed in 1..200u64 {
            let n = 2 + (seed % 4) as usize;
            let k = 2 + (seed % 3) as usize;
            let al = allocs(&vec![2; n]);
            let ids = run(&al, k, seed * 0x2545_f491);
            for a in 0..k {
                for r in 1..n {
                    assert_eq!(
                        ids[r][a], ids[0][a],
                        "seed {seed}: agreement {a} at rank {r}"
                    );
                }
                for b in 0..a {
                    assert_ne!(ids[0][a], ids[0][b], "seed {seed}: agreements {a} and {b}");
                }
            }
            // All started at 2: more than one round somewhere means they met.
            collided |= ids[0].iter().any(|&c| c > 2 + k as u32);
            for a in &al {
                let a = lock(a);
                assert!(a.active.is_empty() && a.claimed.is_empty(), "{a:?}");
                assert!(ids[0].iter().all(|&c| c < a.next));
            }
        }
        assert!(collided, "no seed made two agreements collide");
    }
}

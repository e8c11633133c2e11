//! `replica_verify=hash`: every replica of a receiver checks each message
//! against a hash that another replica of the sender computed on its own
//! copy (RedMPI's idea, on the replicas Tandem already has). A mismatch
//! means a corrupted payload, or replicas of the sender that diverged (a
//! program that sends what it read from a clock or a random seed); it is
//! reported naming the ranks, the message, its context, tag and size.
//!
//! Every sender replica hashes each message it logs and sends the hashes,
//! in batches, to the replicas of the receiver it does not push messages
//! to. With two replicas a receiver replica compares the hash of each
//! message it takes with the hash from the other replica of the sender,
//! whichever arrives first, and passes the message up meanwhile.
//!
//! With three or more, it votes ([`Ballot`]): a message is held until a
//! second replica of the sender vouches for the same copy; when two other
//! replicas agree on a different copy, theirs is fetched and passed up
//! instead (the majority's); when every replica has answered, or is lost,
//! and no two agree, the copy at hand goes up, reported.

use std::collections::BTreeMap;

use crate::wire::Header;

/// Bytes of one (sequence number, hash) pair in a hashes frame.
pub(super) const PAIR: usize = 16;
/// A batch leaves once it holds this many pairs (or before a sleep).
const BATCH: usize = 64;
/// Most entries kept per sender rank on either side of the comparison;
/// beyond, the oldest are forgotten (left unchecked).
const KEEP: usize = 1 << 16;

/// A message's hash: its envelope and every payload byte.
pub fn message_hash(h: &Header, data: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |acc: u64, w: u64| (acc ^ w).wrapping_mul(K).rotate_left(29);
    let mut acc = mix(
        u64::from(h.context),
        u64::from(h.src) << 32 | u64::from(h.tag as u32),
    );
    acc = mix(acc, data.len() as u64);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        acc = mix(acc, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let mut tail = [0u8; 8];
    let rest = words.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    mix(acc, u64::from_le_bytes(tail)) ^ (acc >> 32)
}

/// A message taken, waiting for another replica's hash of it.
struct Taken {
    from: u32,
    hash: u64,
    context: u32,
    tag: i32,
    len: u64,
}

/// What a mismatch is reported with.
pub struct Mismatch {
    pub sender: u32,
    pub seq: u64,
    pub context: u32,
    pub tag: i32,
    pub len: u64,
    pub from: u32,
    pub hash: u64,
    pub other: u32,
    pub other_hash: u64,
}

/// With three or more replicas: what to do with a message taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Hold it: not enough hashes yet.
    Wait,
    /// Another replica's copy agrees: pass it up.
    Take,
    /// Two or more other replicas agree on another copy: fetch theirs (from
    /// any replica in the mask `from`), which must hash `hash`.
    Fetch { from: u32, hash: u64 },
    /// Every replica has answered or is lost and no two agree: pass up the
    /// copy at hand.
    NoMajority,
}

/// The copies of one message known to a receiver replica.
#[derive(Default)]
struct Ballot {
    own: Option<Taken>,
    /// (replica, hash) from the other replicas of the sender.
    votes: Vec<(u32, u64)>,
}

/// The verification state of one replica.
pub(super) struct Verifier {
    /// Per receiver rank and replica: pairs to send.
    outgoing: Vec<Vec<Vec<u8>>>,
    /// Per sender rank: messages taken, by sequence number.
    taken: Vec<BTreeMap<u64, Taken>>,
    /// Per sender rank: hashes that came before their message: sequence
    /// number -> (replica, hash).
    early: Vec<BTreeMap<u64, (u32, u64)>>,
    /// Three or more replicas: per sender rank, the messages being voted on.
    ballots: Option<Vec<BTreeMap<u64, Ballot>>>,
    replicas: u32,
    pub(super) checked: u64,
    pub(super) mismatches: u64,
}

impl Verifier {
    pub(super) fn new(ranks: u32, replicas: u32) -> Verifier {
        Verifier {
            outgoing: (0..ranks)
                .map(|_| vec![Vec::new(); replicas as usize])
                .collect(),
            taken: (0..ranks).map(|_| BTreeMap::new()).collect(),
            early: (0..ranks).map(|_| BTreeMap::new()).collect(),
            ballots: (replicas >= 3).then(|| (0..ranks).map(|_| BTreeMap::new()).collect()),
            replicas,
            checked: 0,
            mismatches: 0,
        }
    }

    /// Whether messages are voted on (three or more replicas).
    pub(super) fn votes(&self) -> bool {
        self.ballots.is_some()
    }

    /// Voting: this replica took message `seq` of `sender` from replica
    /// `from`; `live(j)` says whether replica `j` of the sender is alive.
    pub(super) fn vote_taken(
        &mut self,
        sender: u32,
        seq: u64,
        from: u32,
        h: &Header,
        hash: u64,
        live: &dyn Fn(u32) -> bool,
    ) -> (Verdict, Vec<Mismatch>) {
        let Some(ballots) = self.ballots.as_mut() else {
            return (Verdict::Take, Vec::new());
        };
        let b = ballots[sender as usize].entry(seq).or_default();
        b.own = Some(Taken {
            from,
            hash,
            context: h.context,
            tag: h.tag,
            len: h.len,
        });
        self.settle(sender, seq, live)
    }

    /// Voting: hashes from replica `other` of `sender`; `taken_below` is
    /// the next message this replica takes off the wire. The verdicts of
    /// the messages they decide.
    pub(super) fn vote_hashes(
        &mut self,
        sender: u32,
        other: u32,
        pairs: &[u8],
        taken_below: u64,
        live: &dyn Fn(u32) -> bool,
    ) -> Vec<(u64, Verdict, Vec<Mismatch>)> {
        let mut decided = Vec::new();
        let Some(ballots) = self.ballots.as_mut() else {
            return decided;
        };
        let mine = &mut ballots[sender as usize];
        let mut touched = Vec::new();
        for p in pairs.chunks_exact(PAIR) {
            let seq = u64::from_le_bytes(p[..8].try_into().expect("8 bytes"));
            let hash = u64::from_le_bytes(p[8..].try_into().expect("8 bytes"));
            // Below `taken_below` without a ballot: decided already.
            if seq < taken_below && !mine.contains_key(&seq) {
                continue;
            }
            let b = mine.entry(seq).or_default();
            if !b.votes.iter().any(|&(r, _)| r == other) {
                b.votes.push((other, hash));
            }
            if b.own.is_some() {
                touched.push(seq);
            }
        }
        // Early hashes of messages far ahead: forgotten, unchecked.
        while mine.len() > KEEP {
            mine.pop_last();
        }
        for seq in touched {
            let (v, m) = self.settle(sender, seq, live);
            if v != Verdict::Wait {
                decided.push((seq, v, m));
            }
        }
        decided
    }

    /// Voting: replicas of `sender` were lost; the messages that no longer
    /// wait for them, with their verdicts.
    pub(super) fn vote_reconsider(
        &mut self,
        sender: u32,
        live: &dyn Fn(u32) -> bool,
    ) -> Vec<(u64, Verdict, Vec<Mismatch>)> {
        let Some(ballots) = self.ballots.as_ref() else {
            return Vec::new();
        };
        let open: Vec<u64> = ballots[sender as usize]
            .iter()
            .filter(|(_, b)| b.own.is_some())
            .map(|(&seq, _)| seq)
            .collect();
        let mut decided = Vec::new();
        for seq in open {
            let (v, m) = self.settle(sender, seq, live);
            if v != Verdict::Wait {
                decided.push((seq, v, m));
            }
        }
        decided
    }

    /// Decides message `seq` of `sender` if its ballot allows, forgetting
    /// the ballot then.
    fn settle(
        &mut self,
        sender: u32,
        seq: u64,
        live: &dyn Fn(u32) -> bool,
    ) -> (Verdict, Vec<Mismatch>) {
        let replicas = self.replicas;
        let Some(ballots) = self.ballots.as_mut() else {
            return (Verdict::Take, Vec::new());
        };
        let Some(b) = ballots[sender as usize].get(&seq) else {
            return (Verdict::Wait, Vec::new());
        };
        let verdict = tally(b, replicas, live);
        if verdict == Verdict::Wait {
            return (verdict, Vec::new());
        }
        let b = ballots[sender as usize].remove(&seq).expect("present");
        let own = b.own.expect("decided ballots have a copy");
        self.checked += 1;
        let mut found = Vec::new();
        for &(other, other_hash) in &b.votes {
            if other == own.from {
                continue;
            }
            if let Some(m) = self.compare(sender, seq, &own, other, other_hash) {
                found.push(m);
            }
        }
        (verdict, found)
    }

    /// This replica logged message `seq` to `dest` with hash `hash`: its
    /// hash goes to the replicas of `dest` in `to`.
    pub(super) fn logged(&mut self, dest: u32, to: impl Iterator<Item = u32>, seq: u64, hash: u64) {
        for j in to {
            let b = &mut self.outgoing[dest as usize][j as usize];
            b.extend_from_slice(&seq.to_le_bytes());
            b.extend_from_slice(&hash.to_le_bytes());
        }
    }

    /// Batches ready to leave (all of them with `force`): (rank, replica,
    /// pairs).
    pub(super) fn batches(&mut self, force: bool) -> Vec<(u32, u32, Vec<u8>)> {
        let mut out = Vec::new();
        for (d, per) in self.outgoing.iter_mut().enumerate() {
            for (j, b) in per.iter_mut().enumerate() {
                if !b.is_empty() && (force || b.len() >= BATCH * PAIR) {
                    out.push((d as u32, j as u32, std::mem::take(b)));
                }
            }
        }
        out
    }

    /// Drops what waits to go to a lost process.
    pub(super) fn forget_receiver(&mut self, dest: u32, replica: u32) {
        if let Some(b) = self
            .outgoing
            .get_mut(dest as usize)
            .and_then(|p| p.get_mut(replica as usize))
        {
            *b = Vec::new();
        }
    }

    /// This replica took message `seq` of `sender`, from replica `from`.
    pub(super) fn on_taken(
        &mut self,
        sender: u32,
        seq: u64,
        from: u32,
        h: &Header,
        hash: u64,
    ) -> Option<Mismatch> {
        let t = Taken {
            from,
            hash,
            context: h.context,
            tag: h.tag,
            len: h.len,
        };
        let early = &mut self.early[sender as usize];
        if let Some(&(other, other_hash)) = early.get(&seq) {
            if other != from {
                early.remove(&seq);
                return self.compare(sender, seq, &t, other, other_hash);
            }
        }
        let taken = &mut self.taken[sender as usize];
        taken.insert(seq, t);
        if taken.len() > KEEP {
            taken.pop_first();
        }
        None
    }

    /// A batch of hashes from replica `other` of `sender`.
    pub(super) fn on_hashes(
        &mut self,
        sender: u32,
        other: u32,
        pairs: &[u8],
        taken_below: u64,
    ) -> Vec<Mismatch> {
        let mut found = Vec::new();
        for p in pairs.chunks_exact(PAIR) {
            let seq = u64::from_le_bytes(p[..8].try_into().expect("8 bytes"));
            let hash = u64::from_le_bytes(p[8..].try_into().expect("8 bytes"));
            let taken = &mut self.taken[sender as usize];
            match taken.get(&seq) {
                Some(t) if t.from != other => {
                    let t = taken.remove(&seq).expect("present");
                    if let Some(m) = self.compare(sender, seq, &t, other, hash) {
                        found.push(m);
                    }
                }
                // From the replica the message itself came from.
                Some(_) => {}
                // Taken and checked already, or taken from `other` itself.
                None if seq < taken_below => {}
                None => {
                    let early = &mut self.early[sender as usize];
                    early.insert(seq, (other, hash));
                    if early.len() > KEEP {
                        early.pop_first();
                    }
                }
            }
        }
        found
    }

    fn compare(
        &mut self,
        sender: u32,
        seq: u64,
        t: &Taken,
        other: u32,
        other_hash: u64,
    ) -> Option<Mismatch> {
        if self.ballots.is_none() {
            self.checked += 1;
        }
        if t.hash == other_hash {
            return None;
        }
        self.mismatches += 1;
        Some(Mismatch {
            sender,
            seq,
            context: t.context,
            tag: t.tag,
            len: t.len,
            from: t.from,
            hash: t.hash,
            other,
            other_hash,
        })
    }
}

/// The verdict a ballot allows now.
fn tally(b: &Ballot, replicas: u32, live: &dyn Fn(u32) -> bool) -> Verdict {
    let Some(own) = &b.own else {
        return Verdict::Wait;
    };
    // A replica's hash of the copy it sent itself proves nothing (after a
    // resume the replica a message came from also sends its hash).
    let others = || b.votes.iter().filter(|v| v.0 != own.from);
    if others().any(|&(_, h)| h == own.hash) {
        return Verdict::Take;
    }
    // The largest group of other replicas that agree with each other,
    // if it has two and one of them is alive to send its copy.
    let mut best: Option<(u32, u32, u64)> = None;
    for &(_, h) in others() {
        let agree: Vec<u32> = others().filter(|v| v.1 == h).map(|v| v.0).collect();
        let from = agree
            .iter()
            .filter(|&&r| live(r))
            .fold(0u32, |m, &r| m | 1 << r);
        let n = agree.len() as u32;
        if n >= 2 && from != 0 && best.is_none_or(|(bn, _, _)| n > bn) {
            best = Some((n, from, h));
        }
    }
    if let Some((_, from, hash)) = best {
        return Verdict::Fetch { from, hash };
    }
    let answered = |r: u32| r == own.from || b.votes.iter().any(|v| v.0 == r);
    if (0..replicas).all(|r| answered(r) || !live(r)) {
        Verdict::NoMajority
    } else {
        Verdict::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FrameKind;

    fn header(len: u64) -> Header {
        Header {
            kind: FrameKind::Eager,
            context: 4,
            src: 1,
            tag: 7,
            len,
            sreq: 0,
            rreq: 0,
        }
    }

    #[test]
    fn hash_sees_every_byte_and_the_envelope() {
        let data: Vec<u8> = (0..100u8).collect();
        let base = message_hash(&header(100), &data);
        for i in 0..data.len() {
            let mut d = data.clone();
            d[i] ^= 1;
            assert_ne!(message_hash(&header(100), &d), base, "byte {i}");
        }
        let mut h = header(100);
        h.tag = 8;
        assert_ne!(message_hash(&h, &data), base);
        assert_ne!(message_hash(&header(99), &data[..99]), base);
    }

    fn pairs(list: &[(u64, u64)]) -> Vec<u8> {
        let mut v = Vec::new();
        for (seq, hash) in list {
            v.extend_from_slice(&seq.to_le_bytes());
            v.extend_from_slice(&hash.to_le_bytes());
        }
        v
    }

    #[test]
    fn three_replicas_vote() {
        let all = |_: u32| true;
        let mut v = Verifier::new(2, 3);
        assert!(v.votes());
        let h = header(3);
        let good = message_hash(&h, b"abc");
        let bad = message_hash(&h, b"abd");
        // Message 0: a second copy agrees, the third comes later.
        assert_eq!(v.vote_taken(1, 0, 0, &h, good, &all).0, Verdict::Wait);
        let d = v.vote_hashes(1, 1, &pairs(&[(0, good)]), 1, &all);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].0, d[0].1), (0, Verdict::Take));
        assert!(d[0].2.is_empty());
        assert!(v
            .vote_hashes(1, 2, &pairs(&[(0, good)]), 1, &all)
            .is_empty());
        // Message 1: the copy at hand is the odd one; both hashes came first.
        assert!(v
            .vote_hashes(1, 1, &pairs(&[(1, good)]), 1, &all)
            .is_empty());
        assert!(v
            .vote_hashes(1, 2, &pairs(&[(1, good)]), 1, &all)
            .is_empty());
        let (verdict, m) = v.vote_taken(1, 1, 0, &h, bad, &all);
        assert_eq!(
            verdict,
            Verdict::Fetch {
                from: 0b110,
                hash: good
            }
        );
        assert_eq!(m.len(), 2);
        // Message 2: the copies differ; decided once the last replica is lost.
        assert_eq!(v.vote_taken(1, 2, 0, &h, good, &all).0, Verdict::Wait);
        assert!(v.vote_hashes(1, 1, &pairs(&[(2, bad)]), 3, &all).is_empty());
        assert!(v.vote_reconsider(1, &all).is_empty());
        let d = v.vote_reconsider(1, &|r| r != 2);
        assert_eq!((d[0].0, d[0].1), (2, Verdict::NoMajority));
        // The hash of the replica a copy came from is no second opinion.
        assert_eq!(v.vote_taken(1, 3, 1, &h, bad, &all).0, Verdict::Wait);
        assert!(v.vote_hashes(1, 1, &pairs(&[(3, bad)]), 4, &all).is_empty());
        assert_eq!((v.checked, v.mismatches), (3, 3));
    }

    #[test]
    fn hashes_before_or_after_their_message_are_compared_once() {
        let mut v = Verifier::new(2, 2);
        let h = header(3);
        let good = message_hash(&h, b"abc");
        let bad = message_hash(&h, b"abd");
        // Message 0 first, its hash later; message 1's hash first.
        assert!(v.on_taken(1, 0, 1, &h, good).is_none());
        let mut pairs = Vec::new();
        for (seq, hash) in [(0u64, good), (1, bad)] {
            pairs.extend_from_slice(&seq.to_le_bytes());
            pairs.extend_from_slice(&hash.to_le_bytes());
        }
        assert!(v.on_hashes(1, 0, &pairs, 1).is_empty());
        let m = v.on_taken(1, 1, 1, &h, good).expect("a mismatch");
        assert_eq!((m.sender, m.seq, m.from, m.other, m.len), (1, 1, 1, 0, 3));
        assert_eq!((v.checked, v.mismatches), (2, 1));
        // A hash from the replica the message came from proves nothing.
        assert!(v.on_taken(1, 2, 0, &h, good).is_none());
        let mut own = Vec::new();
        own.extend_from_slice(&2u64.to_le_bytes());
        own.extend_from_slice(&bad.to_le_bytes());
        assert!(v.on_hashes(1, 0, &own, 2).is_empty());
        assert_eq!(v.checked, 2);
    }
}

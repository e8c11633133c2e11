//! Wildcard receives in a replicated job: every replica of a rank must
//! match each `MPI_ANY_SOURCE` receive with the same sender, or replicas
//! would diverge (and a receiver that turns to another replica of this rank
//! would get another program's messages).
//!
//! Replicas number their wildcard receives in the order they post them
//! (the same order: they run the same program). The rank's leader replica
//! (the lowest-numbered live one; replica/ says which) matches them as
//! usual and tells the others which sender each one matched (a
//! `ReplicaDecision` frame: `sreq` the number, `src` the sender's rank in
//! the communicator, `tag` its world rank). A follower posts a wildcard
//! receive whose decision it has as a receive from that sender; one whose
//! decision has not come yet holds matching in its context: arriving
//! messages wait as unexpected and later receives are not matched, so none
//! of them takes a message the wildcard receive may be given. Once every
//! decision of the context is in, the posted receives are matched against
//! the waiting messages in the order they were posted, which gives what the
//! leader got (with every source fixed, MPI matching does not depend on
//! when messages arrive).
//!
//! Other outcomes that depend on timing (whether `MPI_Test` finds its
//! request done, which request `MPI_Waitany`/`_Testany` finds, what
//! `MPI_Iprobe` or a wildcard `MPI_Probe` finds) are choices: the layer
//! above numbers them in program order, the leader makes each and sends it
//! (`ReplicaChoice`: `sreq` the number, `rreq` the outcome), and the others
//! wait for it and follow it.
//!
//! When the leader is lost the next replica leads: it follows what the old
//! leader decided that it has not reached yet, its undecided receives
//! become ordinary wildcard receives again, and it decides from then on
//! (also the choices it was waiting for). With three or more replicas the
//! survivors may have heard different amounts of the old leader: each
//! passes the last [`HISTORY`] decisions and choices it received on to
//! the others, then a `ReplicaHandover`; they take those they lack and
//! ignore the rest. The replication layer tells the new leader that it
//! leads only once every live sibling handed over, so it never decides
//! what a sibling already followed; and it keeps a leader within
//! `DECISIONS_AHEAD` of each sibling, so the history a survivor keeps
//! reaches back as far as a slower one can lack.

use std::collections::{HashMap, VecDeque};

/// Decisions and choices from the leader a replica keeps, to pass on to
/// its siblings when the leader is lost (the replication layer keeps a
/// leader fewer than this ahead of any sibling).
pub const HISTORY: usize = 1 << 16;

use super::{matches, Body, Matcher, ReqId};
use crate::wire::{FrameKind, Header};

/// Wildcard-receive state of a replica.
#[derive(Default)]
pub(super) struct Wildcards {
    leader: bool,
    /// Number of the next wildcard receive posted.
    next: u64,
    /// Leader: its wildcard receives not matched yet, and their numbers.
    leading: HashMap<u64, u64>,
    /// Follower: decisions whose receive is not posted yet: number ->
    /// (communicator rank, world rank).
    decided: HashMap<u64, (u32, u32)>,
    /// Follower: posted wildcard receives waiting for their decision.
    undecided: Vec<(ReqId, u64, u32)>,
    /// Follower: contexts whose matching waits for decisions, with how many.
    held: HashMap<u32, usize>,
    /// Decisions to send to the other replicas of this rank.
    pub(super) out: Vec<Header>,
    /// Number of the next choice.
    next_choice: u64,
    /// Follower: choices the leader made that are not followed yet.
    choices: HashMap<u64, u64>,
    /// Choices settled so far (they are settled in order).
    choices_settled: u64,
    /// The last decisions and choices received from a leader.
    history: VecDeque<Header>,
}

impl Wildcards {
    /// Keeps a decision or choice heard from the leader.
    fn remember(&mut self, h: &Header) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(*h);
    }

    pub(super) fn new(leader: bool) -> Wildcards {
        Wildcards {
            leader,
            ..Wildcards::default()
        }
    }

    /// Whether matching in `ctx` waits for a decision.
    #[inline]
    pub(super) fn holds(&self, ctx: u32) -> bool {
        !self.held.is_empty() && self.held.contains_key(&ctx)
    }
}

impl Matcher {
    /// The leader made choice `h.sreq`: it came out as `h.rreq`.
    pub(super) fn on_choice(&mut self, h: &Header) -> Result<(), String> {
        let Some(w) = self.wild.as_mut() else {
            return Err("replica choice in a job without replicas".into());
        };
        // Settled already (a sibling passing on what the leader said).
        if h.sreq < w.choices_settled || w.choices.contains_key(&h.sreq) {
            return Ok(());
        }
        w.choices.insert(h.sreq, h.rreq);
        w.remember(h);
        Ok(())
    }

    /// A receive was posted in `ctx` with source filter `src`; returns the
    /// source it must take instead (a follower's decided wildcard), and
    /// whether it may be matched now.
    #[cold]
    #[inline(never)]
    pub(super) fn wildcard_posted(&mut self, id: ReqId, ctx: u32, any_source: bool) -> bool {
        let Some(w) = self.wild.as_mut() else {
            return true;
        };
        if !any_source {
            return !w.holds(ctx);
        }
        let n = w.next;
        w.next += 1;
        if w.leader && w.decided.is_empty() {
            w.leading.insert(id.0, n);
            return true;
        }
        // A new leader follows what the old one decided before it decides.
        if let Some((src, world)) = w.decided.remove(&n) {
            let held = w.holds(ctx);
            if let Some(r) = self.reqs.get_mut(id) {
                r.src_filter = Some(src);
                r.peer = Some(world);
            }
            return !held;
        }
        if w.leader {
            w.leading.insert(id.0, n);
            return true;
        }
        w.undecided.push((id, n, ctx));
        *w.held.entry(ctx).or_insert(0) += 1;
        false
    }

    /// Receive `id` completed: a leader tells the others whom its wildcard
    /// receive matched.
    #[cold]
    #[inline(never)]
    pub(super) fn wildcard_completed(&mut self, id: ReqId) {
        let Some(w) = self.wild.as_mut() else {
            return;
        };
        if w.leading.is_empty() {
            return;
        }
        let Some(n) = w.leading.remove(&id.0) else {
            return;
        };
        let Some(r) = self.reqs.get(id) else {
            return;
        };
        let Some(src) = r.status.source else {
            return;
        };
        let world = self
            .contexts
            .get(&r.context)
            .and_then(|c| c.group.as_ref())
            .and_then(|g| g.get(src as usize).copied())
            .or(r.peer)
            .unwrap_or(u32::MAX);
        w.out.push(Header {
            kind: FrameKind::ReplicaDecision,
            context: r.context,
            src,
            tag: world as i32,
            len: 0,
            sreq: n,
            rreq: 0,
        });
    }

    /// The leader decided wildcard receive `h.sreq`.
    pub(super) fn on_decision(&mut self, h: &Header) -> Result<(), String> {
        let Some(w) = self.wild.as_mut() else {
            return Err("wildcard decision in a job without replicas".into());
        };
        let (n, src, world) = (h.sreq, h.src, h.tag as u32);
        if w.leader {
            // A decision of the lost leader, passed on by a sibling: one
            // this replica has not reached is followed; a receive posted
            // and not matched yet takes it (its own decision would have
            // gone out when it matched).
            if n >= w.next {
                if w.decided.insert(n, (src, world)).is_none() {
                    w.remember(h);
                }
                return Ok(());
            }
            let Some((&id, _)) = w.leading.iter().find(|&(_, &m)| m == n) else {
                return Ok(());
            };
            w.leading.remove(&id);
            w.remember(h);
            if let Some(r) = self.reqs.get_mut(ReqId(id)) {
                r.src_filter = Some(src);
                r.peer = Some(world);
            }
            let ctx = self.reqs.get(ReqId(id)).map(|r| r.context);
            if let Some(ctx) = ctx {
                self.rematch(ctx);
            }
            return Ok(());
        }
        let Some(pos) = w.undecided.iter().position(|&(_, m, _)| m == n) else {
            // Posted and decided already, or known: a sibling's copy.
            if n >= w.next && w.decided.insert(n, (src, world)).is_none() {
                w.remember(h);
            }
            return Ok(());
        };
        w.remember(h);
        let (id, _, ctx) = w.undecided.remove(pos);
        let left = w.held.get_mut(&ctx).map(|c| {
            *c -= 1;
            *c
        });
        if left == Some(0) {
            w.held.remove(&ctx);
        }
        if let Some(r) = self.reqs.get_mut(id) {
            r.src_filter = Some(src);
            r.peer = Some(world);
        }
        if left == Some(0) {
            self.rematch(ctx);
        }
        Ok(())
    }

    /// The rank's leader replica, number `lost`, was lost (`pass`): what
    /// this replica heard from it goes to its siblings, which may have
    /// missed some, followed by a `ReplicaHandover`. This one leads now
    /// (`leads`, once each live sibling handed over): it matches its
    /// undecided wildcard receives as usual, and decides.
    pub(super) fn on_sibling_lost(&mut self, leads: bool, pass: bool, lost: u64) {
        let Some(w) = self.wild.as_mut() else {
            return;
        };
        if pass {
            w.out.extend(w.history.iter().copied());
            w.out.push(Header {
                kind: FrameKind::ReplicaHandover,
                context: 0,
                src: 0,
                tag: 0,
                len: 0,
                sreq: lost,
                rreq: 0,
            });
        }
        if !leads || w.leader {
            return;
        }
        w.leader = true;
        for (id, n, _) in std::mem::take(&mut w.undecided) {
            w.leading.insert(id.0, n);
        }
        let held: Vec<u32> = w.held.drain().map(|(c, _)| c).collect();
        for ctx in held {
            self.rematch(ctx);
        }
    }

    /// Matches the posted receives of `ctx`, in the order they were posted,
    /// against its waiting messages, in the order they came.
    fn rematch(&mut self, ctx: u32) {
        let Some(c) = self.contexts.get_mut(&ctx) else {
            return;
        };
        let posted: Vec<ReqId> = c.posted.drain(..).collect();
        let mut kept = std::collections::VecDeque::new();
        for id in posted {
            let Some(r) = self.reqs.get(id) else {
                continue;
            };
            let (sf, tf) = (r.src_filter, r.tag);
            let c = self.contexts.get_mut(&ctx).expect("context exists");
            let Some(pos) = c
                .unexpected
                .iter()
                .position(|u| matches(sf, tf, u.src, u.tag))
            else {
                kept.push_back(id);
                continue;
            };
            let u = c.unexpected.remove(pos).expect("position is in range");
            self.posted_count -= 1;
            match u.body {
                Body::Eager(data) => {
                    self.unexpected_bytes -= data.len();
                    self.eager_consumed(u.peer, data.len());
                    self.deliver_buffered(id, u.src, u.tag, &data);
                }
                Body::SelfHeld { sreq } => self.deliver_self_held(id, sreq),
                Body::Rts { sreq, addr } => {
                    self.accept_rts(id, u.peer, u.src, u.tag, u.len, sreq, addr)
                }
            }
        }
        if let Some(c) = self.contexts.get_mut(&ctx) {
            c.posted = kept;
        }
    }
}

/// Where a replica stands at one of its rank's choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChoiceRole {
    /// This replica leads: it chooses, then calls [`P2p::choose`](super::P2p::choose).
    Lead(u64),
    /// The leader chose this outcome.
    Follow(u64),
}

impl super::P2p {
    /// The number of this replica's next choice; `None` outside a
    /// replicated job (nothing to agree on).
    pub fn next_choice(&mut self) -> Option<u64> {
        let w = self.m.wild.as_mut()?;
        let n = w.next_choice;
        w.next_choice += 1;
        Some(n)
    }

    /// Whether choice `n` can be settled now: the leader's outcome came, or
    /// this replica leads (its leader was lost meanwhile).
    pub fn choice_settled(&self, n: u64) -> bool {
        self.m
            .wild
            .as_ref()
            .is_none_or(|w| w.leader || w.choices.contains_key(&n))
    }

    /// Waits until choice `n` is settled, and says how.
    pub fn choice_role(&mut self, n: u64) -> ChoiceRole {
        if !self.choice_settled(n) {
            self.wait_for(|p| p.choice_settled(n));
        }
        let followed = match self.m.wild.as_mut() {
            // A new leader follows what the old one chose before it chooses.
            Some(w) => {
                w.choices_settled = w.choices_settled.max(n + 1);
                w.choices.remove(&n)
            }
            None => None,
        };
        match followed {
            Some(v) => ChoiceRole::Follow(v),
            None => {
                self.wait_for_decision_room();
                ChoiceRole::Lead(n)
            }
        }
    }

    /// A leader about to decide: waits while a sibling is too far behind
    /// (the replication layer's `DECISIONS_AHEAD`), until it catches up or
    /// is declared failed.
    pub(super) fn wait_for_decision_room(&mut self) {
        if self.engine.replica_decisions_ahead() {
            self.wait_for(|p| !p.engine.replica_decisions_ahead());
        }
    }

    /// The leader's choice `n` came out as `outcome`: the other replicas
    /// are told.
    pub fn choose(&mut self, n: u64, outcome: u64) {
        if let Some(w) = self.m.wild.as_mut() {
            w.out.push(Header {
                kind: FrameKind::ReplicaChoice,
                context: 0,
                src: 0,
                tag: 0,
                len: 0,
                sreq: n,
                rreq: outcome,
            });
            self.flush_outbox();
        }
    }
}

//! The algorithm catalogue and the selection rules.
//!
//! [`CATALOGUE`] lists every algorithm of every collective with what it
//! needs (a power-of-two communicator, a commutative operation). Selection
//! goes: the per-operation parameter (`coll_bcast=binomial`) if it names an
//! algorithm that can serve the call; otherwise the first rule of the
//! operation's rule table that matches the communicator size and message
//! size and whose algorithm can serve the call; otherwise the first
//! catalogue entry that can. A forced algorithm that cannot serve a call is
//! replaced this way, with a one-time warning.
//!
//! The rule tables are [`DEFAULT_RULES`], or a JSON file named by
//! `coll_rules`, which replaces the tables of the operations it lists:
//!
//! ```json
//! { "bcast": [ { "comm_max": 8, "bytes_max": 65536, "algorithm": "binomial" },
//!              { "algorithm": "scatter_allgather" } ] }
//! ```
//!
//! Bounds are inclusive; omitted bounds are open. The message size a rule
//! looks at is, per operation: bcast, reduce, allreduce, scan: the whole
//! buffer; reduce_scatter: the whole vector (the sum of the counts);
//! gather, scatter, allgather: one rank's block; alltoall: one pair's
//! block; barrier, alltoallv and the v-variants: 0.

use std::collections::HashSet;

use crate::int_map::IntMap;
use crate::params::Settings;

/// The collective operations with a choice of algorithms (and the others,
/// which have one each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Scatter,
    Allgather,
    Alltoall,
    Alltoallv,
    Gatherv,
    Scatterv,
    Allgatherv,
    ReduceScatter,
    Scan,
    Exscan,
    Neighbor,
}

impl OpKind {
    pub const ALL: [OpKind; 16] = [
        OpKind::Barrier,
        OpKind::Bcast,
        OpKind::Reduce,
        OpKind::Allreduce,
        OpKind::Gather,
        OpKind::Scatter,
        OpKind::Allgather,
        OpKind::Alltoall,
        OpKind::Alltoallv,
        OpKind::Gatherv,
        OpKind::Scatterv,
        OpKind::Allgatherv,
        OpKind::ReduceScatter,
        OpKind::Scan,
        OpKind::Exscan,
        OpKind::Neighbor,
    ];

    /// The name in parameters and rule files.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Barrier => "barrier",
            OpKind::Bcast => "bcast",
            OpKind::Reduce => "reduce",
            OpKind::Allreduce => "allreduce",
            OpKind::Gather => "gather",
            OpKind::Scatter => "scatter",
            OpKind::Allgather => "allgather",
            OpKind::Alltoall => "alltoall",
            OpKind::Alltoallv => "alltoallv",
            OpKind::Gatherv => "gatherv",
            OpKind::Scatterv => "scatterv",
            OpKind::Allgatherv => "allgatherv",
            OpKind::ReduceScatter => "reduce_scatter",
            OpKind::Scan => "scan",
            OpKind::Exscan => "exscan",
            OpKind::Neighbor => "neighbor",
        }
    }

    pub fn from_name(s: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The parameter that forces an algorithm, for operations with a choice.
    pub fn param(self) -> Option<&'static str> {
        Some(match self {
            OpKind::Barrier => "coll_barrier",
            OpKind::Bcast => "coll_bcast",
            OpKind::Reduce => "coll_reduce",
            OpKind::Allreduce => "coll_allreduce",
            OpKind::Gather => "coll_gather",
            OpKind::Scatter => "coll_scatter",
            OpKind::Allgather => "coll_allgather",
            OpKind::Alltoall => "coll_alltoall",
            OpKind::Alltoallv => "coll_alltoallv",
            OpKind::ReduceScatter => "coll_reduce_scatter",
            _ => return None,
        })
    }
}

/// What an algorithm needs of a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// The communicator size is a power of two.
    pub pow2: bool,
    /// The reduction operation is commutative.
    pub commutative: bool,
}

/// One algorithm of the catalogue.
#[derive(Debug)]
pub struct Algo {
    pub op: OpKind,
    pub name: &'static str,
    pub needs: Needs,
    pub help: &'static str,
}

const ANY: Needs = Needs {
    pow2: false,
    commutative: false,
};
const POW2: Needs = Needs {
    pow2: true,
    commutative: false,
};
const COMMUTATIVE: Needs = Needs {
    pow2: false,
    commutative: true,
};

/// Every algorithm, by operation; the first of each operation is the
/// fallback of last resort and needs nothing.
pub static CATALOGUE: &[Algo] = &[
    Algo {
        op: OpKind::Barrier,
        name: "dissemination",
        needs: ANY,
        help: "ceil(log2 n) rounds, each rank sends to rank+2^k (dissemination / butterfly)",
    },
    Algo {
        op: OpKind::Barrier,
        name: "linear",
        needs: ANY,
        help: "every rank reports to rank 0, which counts them and releases everyone",
    },
    Algo {
        op: OpKind::Barrier,
        name: "binomial",
        needs: ANY,
        help: "arrival up a binomial tree to rank 0, release down it",
    },
    Algo {
        op: OpKind::Bcast,
        name: "binomial",
        needs: ANY,
        help: "binomial tree from the root, log2 n steps",
    },
    Algo {
        op: OpKind::Bcast,
        name: "linear",
        needs: ANY,
        help: "the root sends to every rank, all sends posted at once",
    },
    Algo {
        op: OpKind::Bcast,
        name: "scatter_allgather",
        needs: ANY,
        help: "binomial scatter of n chunks, then a ring allgather (large messages)",
    },
    Algo {
        op: OpKind::Reduce,
        name: "binomial",
        needs: ANY,
        help: "binomial tree (rooted at rank 0 plus one hop for non-commutative operations)",
    },
    Algo {
        op: OpKind::Reduce,
        name: "linear",
        needs: ANY,
        help: "the root receives every contribution and folds them in rank order",
    },
    Algo {
        op: OpKind::Allreduce,
        name: "reduce_bcast",
        needs: ANY,
        help: "binomial reduce to rank 0, then binomial broadcast",
    },
    Algo {
        op: OpKind::Allreduce,
        name: "recursive_doubling",
        needs: ANY,
        help: "log2 n pairwise exchanges of the whole vector (non-powers of two fold first)",
    },
    Algo {
        op: OpKind::Allreduce,
        name: "ring",
        needs: COMMUTATIVE,
        help: "ring reduce-scatter then ring allgather: 2(n-1) steps of 1/n of the vector",
    },
    Algo {
        op: OpKind::Gather,
        name: "linear",
        needs: ANY,
        help: "the root posts a receive from every rank",
    },
    Algo {
        op: OpKind::Gather,
        name: "binomial",
        needs: ANY,
        help: "binomial tree, subtrees' blocks aggregated on the way up",
    },
    Algo {
        op: OpKind::Scatter,
        name: "linear",
        needs: ANY,
        help: "the root posts a send to every rank",
    },
    Algo {
        op: OpKind::Scatter,
        name: "binomial",
        needs: ANY,
        help: "binomial tree, subtrees' blocks split on the way down",
    },
    Algo {
        op: OpKind::Allgather,
        name: "ring",
        needs: ANY,
        help: "n-1 steps, each passing one block to the right",
    },
    Algo {
        op: OpKind::Allgather,
        name: "recursive_doubling",
        needs: POW2,
        help: "log2 n exchanges of doubling size (powers of two only)",
    },
    Algo {
        op: OpKind::Allgather,
        name: "bruck",
        needs: ANY,
        help: "Bruck: ceil(log2 n) exchanges for any n, then a local rotation",
    },
    Algo {
        op: OpKind::Alltoall,
        name: "linear",
        needs: ANY,
        help: "every receive and send posted at once, then one wait for all",
    },
    Algo {
        op: OpKind::Alltoall,
        name: "pairwise",
        needs: ANY,
        help: "n-1 steps, in step k send to rank+k and receive from rank-k",
    },
    Algo {
        op: OpKind::Alltoall,
        name: "bruck",
        needs: ANY,
        help: "Bruck: log2 n exchanges of packed blocks (small messages, many ranks)",
    },
    Algo {
        op: OpKind::Alltoallv,
        name: "linear",
        needs: ANY,
        help: "every receive and send posted at once, then one wait for all",
    },
    Algo {
        op: OpKind::Alltoallv,
        name: "pairwise",
        needs: ANY,
        help: "n-1 steps, in step k send to rank+k and receive from rank-k",
    },
    Algo {
        op: OpKind::Gatherv,
        name: "linear",
        needs: ANY,
        help: "the root posts a receive from every rank",
    },
    Algo {
        op: OpKind::Scatterv,
        name: "linear",
        needs: ANY,
        help: "the root posts a send to every rank",
    },
    Algo {
        op: OpKind::Allgatherv,
        name: "ring",
        needs: ANY,
        help: "n-1 steps, each passing one block to the right",
    },
    Algo {
        op: OpKind::ReduceScatter,
        name: "reduce_scatterv",
        needs: ANY,
        help: "binomial reduce to rank 0 in rank order, then a linear scatter",
    },
    Algo {
        op: OpKind::ReduceScatter,
        name: "ring",
        needs: COMMUTATIVE,
        help: "n-1 steps, each passing one partly reduced block to the right",
    },
    Algo {
        op: OpKind::Scan,
        name: "recursive_doubling",
        needs: ANY,
        help: "log2 n exchanges of partial results, rank order kept",
    },
    Algo {
        op: OpKind::Exscan,
        name: "recursive_doubling",
        needs: ANY,
        help: "log2 n exchanges of partial results, rank order kept",
    },
    Algo {
        op: OpKind::Neighbor,
        name: "linear",
        needs: ANY,
        help: "every neighbour's receive and send posted at once",
    },
];

/// Names of the algorithms of `op`, as the parameter accepts them.
pub fn algorithm_names(op: OpKind) -> Vec<&'static str> {
    CATALOGUE
        .iter()
        .filter(|a| a.op == op)
        .map(|a| a.name)
        .collect()
}

fn find(op: OpKind, name: &str) -> Option<&'static Algo> {
    CATALOGUE.iter().find(|a| a.op == op && a.name == name)
}

/// One line of a rule table; bounds inclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub comm_min: u32,
    pub comm_max: u32,
    pub bytes_min: u64,
    pub bytes_max: u64,
    pub algo: &'static str,
}

const fn rule(
    comm_min: u32,
    comm_max: u32,
    bytes_max: u64,
    algo: &'static str,
) -> (u32, u32, u64, &'static str) {
    (comm_min, comm_max, bytes_max, algo)
}

const U: u32 = u32::MAX;
const B: u64 = u64::MAX;

/// The built-in rule tables: (operation, [(comm_min, comm_max, bytes_max, algorithm)]).
#[allow(clippy::type_complexity)]
pub static DEFAULT_RULES: &[(OpKind, &[(u32, u32, u64, &str)])] = &[
    (OpKind::Barrier, &[rule(0, U, B, "dissemination")]),
    (
        OpKind::Bcast,
        &[
            rule(0, 3, B, "binomial"),
            rule(0, U, 128 * 1024, "binomial"),
            rule(0, U, B, "scatter_allgather"),
        ],
    ),
    (OpKind::Reduce, &[rule(0, U, B, "binomial")]),
    (
        OpKind::Allreduce,
        &[
            rule(0, U, 64 * 1024, "recursive_doubling"),
            rule(0, U, B, "ring"),
            rule(0, U, B, "reduce_bcast"),
        ],
    ),
    (
        OpKind::Gather,
        &[rule(0, U, 4096, "binomial"), rule(0, U, B, "linear")],
    ),
    (
        OpKind::Scatter,
        &[rule(0, U, 4096, "binomial"), rule(0, U, B, "linear")],
    ),
    (
        OpKind::Allgather,
        &[
            rule(0, U, 8192, "recursive_doubling"),
            rule(0, U, 8192, "bruck"),
            rule(0, U, B, "ring"),
        ],
    ),
    (
        OpKind::Alltoall,
        &[
            rule(8, U, 256, "bruck"),
            rule(0, U, 32 * 1024, "linear"),
            rule(0, U, B, "pairwise"),
        ],
    ),
    (OpKind::Alltoallv, &[rule(0, U, B, "linear")]),
    (
        OpKind::ReduceScatter,
        &[
            rule(0, 2, B, "ring"),
            rule(0, U, 8192, "reduce_scatterv"),
            rule(0, U, B, "ring"),
        ],
    ),
];

/// What the selection knows of a call (the same on every rank).
#[derive(Clone, Copy, Debug)]
pub struct CallInfo {
    pub n: u32,
    pub bytes: u64,
    pub commutative: bool,
}

fn why_not(a: &Algo, c: &CallInfo) -> Option<String> {
    if a.needs.pow2 && !c.n.is_power_of_two() {
        return Some(format!(
            "needs a power-of-two communicator, this one has {} ranks",
            c.n
        ));
    }
    if a.needs.commutative && !c.commutative {
        return Some("needs a commutative operation".into());
    }
    None
}

/// The rules and overrides in force.
pub struct Selection {
    rules: IntMap<OpKind, Vec<Rule>>,
    forced: IntMap<OpKind, &'static Algo>,
    rules_source: String,
    warned: HashSet<(OpKind, &'static str)>,
}

fn default_rules() -> IntMap<OpKind, Vec<Rule>> {
    DEFAULT_RULES
        .iter()
        .map(|(op, rs)| {
            (
                *op,
                rs.iter()
                    .map(|&(comm_min, comm_max, bytes_max, algo)| Rule {
                        comm_min,
                        comm_max,
                        bytes_min: 0,
                        bytes_max,
                        algo,
                    })
                    .collect(),
            )
        })
        .collect()
}

/// Parses a rules file's text; the tables of the operations it lists.
pub fn parse_rules(text: &str) -> Result<IntMap<OpKind, Vec<Rule>>, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let obj = v
        .as_object()
        .ok_or("the top level must be an object mapping operations to rule lists")?;
    let mut out = IntMap::default();
    for (key, list) in obj {
        let op = OpKind::from_name(key).ok_or_else(|| {
            format!(
                "unknown operation '{key}' (known: {})",
                OpKind::ALL.map(OpKind::name).join(", ")
            )
        })?;
        let items = list
            .as_array()
            .ok_or_else(|| format!("{key}: expected a list of rules"))?;
        let mut rules = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let o = item
                .as_object()
                .ok_or_else(|| format!("{key}[{i}]: expected an object"))?;
            let mut r = Rule {
                comm_min: 0,
                comm_max: u32::MAX,
                bytes_min: 0,
                bytes_max: u64::MAX,
                algo: "",
            };
            for (f, val) in o {
                let num = || {
                    val.as_u64()
                        .ok_or_else(|| format!("{key}[{i}].{f}: expected a non-negative integer"))
                };
                match f.as_str() {
                    "comm_min" => r.comm_min = num()?.min(u64::from(u32::MAX)) as u32,
                    "comm_max" => r.comm_max = num()?.min(u64::from(u32::MAX)) as u32,
                    "bytes_min" => r.bytes_min = num()?,
                    "bytes_max" => r.bytes_max = num()?,
                    "algorithm" => {
                        let name = val
                            .as_str()
                            .ok_or_else(|| format!("{key}[{i}].algorithm: expected a string"))?;
                        r.algo = find(op, name)
                            .ok_or_else(|| {
                                format!(
                                    "{key}[{i}]: unknown algorithm '{name}' (known: {})",
                                    algorithm_names(op).join(", ")
                                )
                            })?
                            .name;
                    }
                    other => {
                        return Err(format!(
                            "{key}[{i}]: unknown field '{other}' (known: comm_min, comm_max, bytes_min, bytes_max, algorithm)"
                        ))
                    }
                }
            }
            if r.algo.is_empty() {
                return Err(format!("{key}[{i}]: no algorithm"));
            }
            rules.push(r);
        }
        out.insert(op, rules);
    }
    Ok(out)
}

impl Selection {
    /// The built-in rules and no overrides.
    pub fn defaults() -> Selection {
        Selection {
            rules: default_rules(),
            forced: IntMap::default(),
            rules_source: "built-in".into(),
            warned: HashSet::new(),
        }
    }

    /// From the parameters `coll_<op>` and `coll_rules`.
    pub fn from_settings(settings: &Settings) -> Result<Selection, String> {
        let mut s = Selection::defaults();
        let path = settings.text("coll_rules");
        if !path.is_empty() {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("coll_rules: cannot read {path}: {e}"))?;
            let parsed = parse_rules(&text).map_err(|e| format!("coll_rules: {path}: {e}"))?;
            s.rules.extend(parsed);
            s.rules_source = path.to_string();
        }
        for op in OpKind::ALL {
            let Some(p) = op.param() else { continue };
            let v = settings.text(p);
            if v != "auto" {
                let a = find(op, v).ok_or_else(|| {
                    format!(
                        "{p}: unknown algorithm '{v}' (known: auto, {})",
                        algorithm_names(op).join(", ")
                    )
                })?;
                s.forced.insert(op, a);
            }
        }
        Ok(s)
    }

    /// Forces (or with `None` releases) the algorithm of `op`.
    pub fn force(&mut self, op: OpKind, name: Option<&str>) -> Result<(), String> {
        match name {
            None => {
                self.forced.remove(&op);
            }
            Some(n) => {
                let a =
                    find(op, n).ok_or_else(|| format!("unknown {} algorithm '{n}'", op.name()))?;
                self.forced.insert(op, a);
            }
        }
        Ok(())
    }

    /// Whether a parameter forces the algorithm of `op`.
    pub fn is_forced(&self, op: OpKind) -> bool {
        self.forced.contains_key(&op)
    }

    /// The algorithm for a call, and a warning to print if a forced one
    /// could not serve it (once per operation and algorithm).
    pub fn choose(&mut self, op: OpKind, c: &CallInfo) -> (&'static Algo, Option<String>) {
        let mut warning = None;
        if let Some(a) = self.forced.get(&op).copied() {
            match why_not(a, c) {
                None => return (a, None),
                Some(why) => {
                    if self.warned.insert((op, a.name)) {
                        warning = Some(format!(
                            "{}={} cannot serve this call ({why}); using the automatic choice",
                            op.param().unwrap_or("coll"),
                            a.name
                        ));
                    }
                }
            }
        }
        if let Some(rules) = self.rules.get(&op) {
            for r in rules {
                if (r.comm_min..=r.comm_max).contains(&c.n)
                    && (r.bytes_min..=r.bytes_max).contains(&c.bytes)
                {
                    if let Some(a) = find(op, r.algo).filter(|a| why_not(a, c).is_none()) {
                        return (a, warning);
                    }
                }
            }
        }
        let a = CATALOGUE
            .iter()
            .find(|a| a.op == op && why_not(a, c).is_none())
            .expect("every operation has an algorithm that needs nothing");
        (a, warning)
    }

    /// The catalogue and the rules in force, for `tandem info --coll`.
    pub fn describe(&self) -> String {
        let mut out = String::from("Collective algorithms (restrictions in brackets):\n");
        for op in OpKind::ALL {
            let forced = self.forced.get(&op).map(|a| a.name);
            out += &format!(
                "  {}{}\n",
                op.name(),
                match (op.param(), forced) {
                    (Some(p), Some(f)) => format!("   [{p}={f}]"),
                    (Some(p), None) => format!("   [{p}=auto]"),
                    _ => String::new(),
                }
            );
            for a in CATALOGUE.iter().filter(|a| a.op == op) {
                let mut needs = Vec::new();
                if a.needs.pow2 {
                    needs.push("power-of-two sizes");
                }
                if a.needs.commutative {
                    needs.push("commutative ops");
                }
                let needs = if needs.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", needs.join(", "))
                };
                out += &format!("    {:<20} {}{needs}\n", a.name, a.help);
            }
        }
        out += &format!(
            "\nSelection rules ({}; first match whose algorithm can serve the call wins):\n",
            self.rules_source
        );
        let mut ops: Vec<&OpKind> = self.rules.keys().collect();
        ops.sort();
        for op in ops {
            for r in &self.rules[op] {
                let range = |lo: u64, hi: u64| match (lo, hi) {
                    (0, u64::MAX) => "any".to_string(),
                    (0, h) => format!("<= {h}"),
                    (l, u64::MAX) => format!(">= {l}"),
                    (l, h) => format!("{l}..{h}"),
                };
                let comm_hi = if r.comm_max == u32::MAX {
                    u64::MAX
                } else {
                    u64::from(r.comm_max)
                };
                out += &format!(
                    "  {:<10} ranks {:<10} bytes {:<12} -> {}\n",
                    op.name(),
                    range(u64::from(r.comm_min), comm_hi),
                    range(r.bytes_min, r.bytes_max),
                    r.algo
                );
            }
        }
        out
    }
}

/// The catalogue and rules the parameters of this process select (for
/// `tandem info --coll`).
pub fn describe() -> String {
    match Settings::from_env()
        .map_err(|e| e.to_string())
        .and_then(|s| Selection::from_settings(&s))
    {
        Ok(s) => format!(
            "{}\nBefore these, blocking barriers, broadcasts, reduces, allreduces, gathers, \
             allgathers, scatters and all-to-alls in which a rank contributes at most \
             coll_shm_max bytes (now {} bytes; 0 = never) run on shared flags when every rank of \
             the communicator shares this host's memory, unless a coll_<op> parameter forces an \
             algorithm.\n",
            s.describe(),
            Settings::from_env().map_or(0, |p| p.uint("coll_shm_max"))
        ),
        Err(e) => format!(
            "{}\n(error in the parameters: {e})\n",
            Selection::defaults().describe()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(n: u32, bytes: u64, commutative: bool) -> CallInfo {
        CallInfo {
            n,
            bytes,
            commutative,
        }
    }

    #[test]
    fn defaults_follow_size_and_restrictions() {
        let mut s = Selection::defaults();
        assert_eq!(
            s.choose(OpKind::Allgather, &call(8, 100, true)).0.name,
            "recursive_doubling"
        );
        assert_eq!(
            s.choose(OpKind::Allgather, &call(6, 100, true)).0.name,
            "bruck"
        );
        assert_eq!(
            s.choose(OpKind::Allgather, &call(6, 1 << 20, true)).0.name,
            "ring"
        );
        assert_eq!(
            s.choose(OpKind::Allreduce, &call(6, 1 << 20, true)).0.name,
            "ring"
        );
        assert_eq!(
            s.choose(OpKind::Allreduce, &call(6, 1 << 20, false)).0.name,
            "reduce_bcast"
        );
        assert_eq!(
            s.choose(OpKind::Scan, &call(6, 1, false)).0.name,
            "recursive_doubling"
        );
    }

    #[test]
    fn forced_algorithm_falls_back_once_with_a_warning() {
        let mut s = Selection::defaults();
        s.force(OpKind::Allgather, Some("recursive_doubling"))
            .unwrap();
        let (a, w) = s.choose(OpKind::Allgather, &call(6, 100, true));
        assert_eq!(a.name, "bruck");
        assert!(w.unwrap().contains("power-of-two"));
        assert!(s.choose(OpKind::Allgather, &call(6, 100, true)).1.is_none());
        assert_eq!(
            s.choose(OpKind::Allgather, &call(4, 1 << 20, true)).0.name,
            "recursive_doubling"
        );
    }

    #[test]
    fn rules_files_are_parsed_and_checked() {
        let r = parse_rules(
            r#"{"bcast": [{"comm_max": 4, "algorithm": "linear"}, {"algorithm": "binomial"}]}"#,
        )
        .unwrap();
        assert_eq!(r[&OpKind::Bcast].len(), 2);
        assert_eq!(r[&OpKind::Bcast][0].comm_max, 4);
        assert!(parse_rules(r#"{"bcast": [{"algorithm": "nope"}]}"#)
            .unwrap_err()
            .contains("binomial"));
        assert!(parse_rules(r#"{"bcastt": []}"#).is_err());
        assert!(parse_rules(r#"{"bcast": [{"comm_mx": 3, "algorithm": "linear"}]}"#).is_err());
        assert!(parse_rules("[").is_err());
    }

    #[test]
    fn describe_lists_every_algorithm() {
        let d = Selection::defaults().describe();
        for a in CATALOGUE {
            assert!(d.contains(a.name));
        }
        assert!(d.contains("power-of-two"));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;
        use serde_json::{Map, Value};

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        /// Names a rules file uses, and some it must refuse.
        fn name() -> impl Strategy<Value = String> {
            let known: Vec<String> = OpKind::ALL
                .iter()
                .map(|k| k.name().to_string())
                .chain(
                    [
                        "comm_min",
                        "comm_max",
                        "bytes_min",
                        "bytes_max",
                        "algorithm",
                    ]
                    .map(String::from),
                )
                .chain(CATALOGUE.iter().map(|a| a.name.to_string()))
                .collect();
            prop_oneof![3 => proptest::sample::select(known), 1 => any::<String>()]
        }

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(Value::from),
                (0u64..10).prop_map(Value::from),
                name().prop_map(Value::from),
            ]
        }

        /// Any JSON, its object keys and strings mostly names a rules file uses.
        fn json() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(4, 64, 6, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    proptest::collection::vec((name(), inner), 0..6)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
                ]
            })
        }

        /// Shaped like a rules file (operations to lists of rule objects),
        /// with names and values now and then wrong.
        fn rules_shaped() -> impl Strategy<Value = Value> {
            let rule = proptest::collection::vec((name(), leaf()), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>()));
            proptest::collection::vec((name(), proptest::collection::vec(rule, 0..4)), 0..4)
                .prop_map(|ops| {
                    Value::Object(
                        ops.into_iter()
                            .map(|(k, rules)| (k, Value::Array(rules)))
                            .collect::<Map<_, _>>(),
                    )
                })
        }

        /// Rules that parsed name only their operation's algorithms, and a
        /// selection following them serves every call.
        fn check_accepted(text: &str, calls: &[(u32, u64, bool)]) -> Result<(), TestCaseError> {
            let Ok(rules) = parse_rules(text) else {
                return Ok(());
            };
            for op in OpKind::ALL {
                for r in rules.get(&op).into_iter().flatten() {
                    prop_assert!(algorithm_names(op).contains(&r.algo), "{:?} {}", op, r.algo);
                }
            }
            let mut s = Selection {
                rules,
                ..Selection::defaults()
            };
            for &(n, bytes, commutative) in calls {
                for op in OpKind::ALL {
                    let c = CallInfo {
                        n: n.max(1),
                        bytes,
                        commutative,
                    };
                    let (a, _) = s.choose(op, &c);
                    prop_assert_eq!(a.op, op);
                    prop_assert!(why_not(a, &c).is_none());
                }
            }
            Ok(())
        }

        fn calls() -> impl Strategy<Value = Vec<(u32, u64, bool)>> {
            proptest::collection::vec(
                (
                    0u32..70,
                    prop_oneof![0u64..100_000, any::<u64>()],
                    any::<bool>(),
                ),
                1..4,
            )
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn prop_parse_rules_is_total_on_text(text in prop_oneof![any::<String>(), "[\\[\\]{}\":,0-9a-z ]{0,60}"]) {
                check_accepted(&text, &[(4, 64, true)])?;
            }

            #[test]
            fn prop_parse_rules_is_total_on_json(v in json(), calls in calls()) {
                check_accepted(&v.to_string(), &calls)?;
            }

            #[test]
            fn prop_parse_rules_is_total_on_rules_shaped_json(v in rules_shaped(), calls in calls()) {
                check_accepted(&v.to_string(), &calls)?;
            }

            /// Nesting far deeper than any rules file is refused, not a
            /// stack overflow.
            #[test]
            fn prop_parse_rules_refuses_deep_nesting(depth in 0usize..50_000, object in any::<bool>()) {
                let (open, close) = if object { ("{\"bcast\":", "}") } else { ("[", "]") };
                let text = format!("{}0{}", open.repeat(depth), close.repeat(depth));
                prop_assert!(parse_rules(&text).is_err());
            }
        }
    }
}

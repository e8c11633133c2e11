//! From a kernel's records to a table: one row per measured point (size,
//! operation, rank count...), each metric summarised by its median and 90%
//! confidence interval over the repetitions.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::kernels::size_text;
use super::overhead::{self, Point, Thresholds};
use super::stats::Summary;

/// A metric column.
#[derive(Clone, Debug, Serialize)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub lower_is_better: bool,
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Label columns, e.g. [("op","isend"), ("size","64 KiB")].
    pub keys: Vec<(String, String)>,
    /// The curve this row belongs to in a plot ("" for a single curve).
    pub group: String,
    /// Abscissa in plots.
    pub x: f64,
    /// One entry per metric of the table.
    pub values: Vec<Option<Summary>>,
}

impl Row {
    /// The keys as one string, to match rows across libraries.
    pub fn key(&self) -> String {
        self.keys
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A kernel's results.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub kernel: String,
    pub key_names: Vec<String>,
    pub x_label: String,
    /// Whether x spans decades (log axis in plots).
    pub x_log: bool,
    pub metrics: Vec<Metric>,
    pub rows: Vec<Row>,
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn of_type<'a>(records: &'a [Value], t: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    records
        .iter()
        .filter(move |r| r.get("type").and_then(Value::as_str) == Some(t))
}

/// Adds the records of another run of the same measurement to `records`,
/// its repetition numbers following the largest there, so that pooled
/// repetitions stay distinct.
pub fn pool(records: &mut Vec<Value>, more: Vec<Value>) {
    let rep = |r: &Value| r.get("rep").and_then(Value::as_u64);
    let offset = records.iter().filter_map(rep).max().map_or(0, |m| m + 1);
    records.extend(more.into_iter().map(|mut r| {
        if let Some(n) = rep(&r) {
            r["rep"] = Value::from(n + offset);
        }
        r
    }));
}

/// Builds the table of `kernel` from its records. `params` are the kernel
/// parameters the run used (for the overhead thresholds).
pub fn analyse(kernel: &str, records: &[Value], params: &BTreeMap<String, String>) -> Table {
    match kernel {
        "pingpong" | "bidir" | "burst" => pair_table(kernel, records),
        "overhead" => overhead_table(records, params),
        "coll" => coll_table(records),
        "alltoallv" => alltoallv_table(records),
        "cannon" => cannon_table(records),
        "tts" => tts_table(records),
        other => Table {
            kernel: other.to_string(),
            key_names: vec![],
            x_label: String::new(),
            x_log: false,
            metrics: vec![],
            rows: vec![],
        },
    }
}

fn pair_table(kernel: &str, records: &[Value]) -> Table {
    // size -> (latencies, throughputs)
    let mut by_size: BTreeMap<u64, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in of_type(records, "sample") {
        let (Some(s), Some(n), Some(t)) = (f(r, "size"), f(r, "n"), f(r, "t")) else {
            continue;
        };
        if n <= 0.0 || t <= 0.0 {
            continue;
        }
        let e = by_size.entry(s as u64).or_default();
        e.0.push(t / n * 1e6);
        e.1.push(n * s / t / 1e6);
    }
    let rows = by_size
        .into_iter()
        .map(|(s, (lat, thr))| Row {
            keys: vec![("size".into(), size_text(s))],
            group: String::new(),
            x: s as f64,
            values: vec![Summary::of(&lat), Summary::of(&thr)],
        })
        .collect();
    let latency = match kernel {
        "burst" => "time per message",
        _ => "latency",
    };
    Table {
        kernel: kernel.to_string(),
        key_names: vec!["size".into()],
        x_label: "message size (bytes)".into(),
        x_log: true,
        metrics: vec![
            Metric {
                name: latency,
                unit: "us",
                lower_is_better: true,
            },
            Metric {
                name: "throughput",
                unit: "MB/s",
                lower_is_better: false,
            },
        ],
        rows,
    }
}

/// The thresholds a run of the overhead kernel used.
pub fn thresholds(params: &BTreeMap<String, String>) -> Thresholds {
    let d = Thresholds::default();
    let get = |k: &str, dflt: f64| params.get(k).and_then(|v| v.parse().ok()).unwrap_or(dflt);
    Thresholds {
        base: get("base", d.base),
        stop: get("stop", d.stop),
        confirm: get("confirm", d.confirm as f64) as usize,
    }
}

/// Per (op, size): the analyses of each repetition's series.
pub fn overhead_series(
    records: &[Value],
    th: &Thresholds,
) -> BTreeMap<(String, u64), Vec<overhead::Analysis>> {
    let mut series: BTreeMap<(String, u64, u64), Vec<(u64, Point)>> = BTreeMap::new();
    for r in of_type(records, "ovh_point") {
        let (Some(op), Some(s), Some(rep), Some(i), Some(it), Some(wt)) = (
            r.get("op").and_then(Value::as_str),
            f(r, "size"),
            f(r, "rep"),
            f(r, "i"),
            f(r, "iter_t"),
            f(r, "work_t"),
        ) else {
            continue;
        };
        series
            .entry((op.to_string(), s as u64, rep as u64))
            .or_default()
            .push((
                i as u64,
                Point {
                    iter_t: it,
                    work_t: wt,
                },
            ));
    }
    let mut out: BTreeMap<(String, u64), Vec<overhead::Analysis>> = BTreeMap::new();
    for ((op, s, _), mut pts) in series {
        pts.sort_by_key(|p| p.0);
        let pts: Vec<Point> = pts.into_iter().map(|p| p.1).collect();
        let entry = out.entry((op, s)).or_default();
        if let Some(a) = overhead::analyse(&pts, th) {
            entry.push(a);
        }
    }
    out
}

fn overhead_table(records: &[Value], params: &BTreeMap<String, String>) -> Table {
    let th = thresholds(params);
    let mut rows = Vec::new();
    let series = overhead_series(records, &th);
    // isend before irecv, then by size.
    let mut keys: Vec<&(String, u64)> = series.keys().collect();
    keys.sort_by_key(|(op, s)| (op != "isend", *s));
    for key in keys {
        let list = &series[key];
        let (op, s) = key;
        let ovh: Vec<f64> = list.iter().map(|a| a.overhead * 1e6).collect();
        let avail: Vec<f64> = list.iter().map(|a| a.availability * 100.0).collect();
        let tr: Vec<f64> = list.iter().map(|a| a.transfer_t * 1e6).collect();
        rows.push(Row {
            keys: vec![("op".into(), op.clone()), ("size".into(), size_text(*s))],
            group: op.clone(),
            x: *s as f64,
            values: vec![Summary::of(&ovh), Summary::of(&avail), Summary::of(&tr)],
        });
    }
    Table {
        kernel: "overhead".into(),
        key_names: vec!["op".into(), "size".into()],
        x_label: "message size (bytes)".into(),
        x_log: true,
        metrics: vec![
            Metric {
                name: "overhead",
                unit: "us",
                lower_is_better: true,
            },
            Metric {
                name: "availability",
                unit: "%",
                lower_is_better: false,
            },
            Metric {
                name: "transfer time",
                unit: "us",
                lower_is_better: true,
            },
        ],
        rows,
    }
}

fn coll_table(records: &[Value]) -> Table {
    let order = [
        "alltoall",
        "bcast",
        "gather",
        "scatter",
        "p2p",
        "allreduce",
        "reduce",
        "reduce_scatter",
    ];
    // (op order, size, ranks, op) -> every time measured (all launches).
    let mut times: BTreeMap<(usize, u64, u64, String), Vec<f64>> = BTreeMap::new();
    for r in of_type(records, "coll") {
        let (Some(op), Some(n), Some(s), Some(list)) = (
            r.get("op").and_then(Value::as_str),
            f(r, "nodes"),
            f(r, "size"),
            r.get("times").and_then(Value::as_array),
        ) else {
            continue;
        };
        let rank = order.iter().position(|o| *o == op).unwrap_or(order.len());
        times
            .entry((rank, s as u64, n as u64, op.to_string()))
            .or_default()
            .extend(list.iter().filter_map(Value::as_f64).map(|x| x * 1e6));
    }
    let rows = times
        .into_iter()
        .filter_map(|((_, s, n, op), t)| {
            let sum = Summary::of(&t)?;
            Some(Row {
                keys: vec![
                    ("op".into(), op.clone()),
                    ("nodes".into(), n.to_string()),
                    ("size".into(), size_text(s)),
                ],
                group: format!("{op} {}", size_text(s)),
                x: n as f64,
                values: vec![Some(Summary::exact(sum.min)), Some(sum)],
            })
        })
        .collect();
    Table {
        kernel: "coll".into(),
        key_names: vec!["op".into(), "nodes".into(), "size".into()],
        x_label: "ranks".into(),
        x_log: false,
        metrics: vec![
            Metric {
                name: "minimum",
                unit: "us",
                lower_is_better: true,
            },
            Metric {
                name: "time",
                unit: "us",
                lower_is_better: true,
            },
        ],
        rows,
    }
}

fn alltoallv_table(records: &[Value]) -> Table {
    let mut by_size: BTreeMap<u64, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in of_type(records, "a2av") {
        let (Some(s), Some(it), Some(t), Some(bytes)) =
            (f(r, "size"), f(r, "iters"), f(r, "t"), f(r, "bytes"))
        else {
            continue;
        };
        if it <= 0.0 || t <= 0.0 {
            continue;
        }
        let e = by_size.entry(s as u64).or_default();
        let per = t / it;
        e.0.push(per * 1e3);
        e.1.push(bytes / per / 1e6);
    }
    Table {
        kernel: "alltoallv".into(),
        key_names: vec!["size".into()],
        x_label: "bytes per pair".into(),
        x_log: true,
        metrics: vec![
            Metric {
                name: "time per exchange",
                unit: "ms",
                lower_is_better: true,
            },
            Metric {
                name: "throughput (all ranks)",
                unit: "MB/s",
                lower_is_better: false,
            },
        ],
        rows: by_size
            .into_iter()
            .map(|(s, (t, b))| Row {
                keys: vec![("size".into(), size_text(s))],
                group: String::new(),
                x: s as f64,
                values: vec![Summary::of(&t), Summary::of(&b)],
            })
            .collect(),
    }
}

fn cannon_table(records: &[Value]) -> Table {
    type Acc = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut by: BTreeMap<(u64, u64, u64), Acc> = BTreeMap::new();
    for r in of_type(records, "cannon") {
        let (Some(n), Some(q), Some(ov), Some(total), Some(wait), Some(comp)) = (
            f(r, "n"),
            f(r, "q"),
            f(r, "overlap"),
            f(r, "total"),
            f(r, "wait"),
            f(r, "compute_avg"),
        ) else {
            continue;
        };
        let e = by.entry((n as u64, q as u64, ov as u64)).or_default();
        e.0.push(total * 1e3);
        e.1.push(wait * 1e3);
        e.2.push(if total > 0.0 {
            wait / total * 100.0
        } else {
            0.0
        });
        e.3.push(comp * 1e3);
    }
    Table {
        kernel: "cannon".into(),
        key_names: vec!["n".into(), "grid".into(), "overlap".into()],
        x_label: "matrix dimension".into(),
        x_log: false,
        metrics: vec![
            Metric {
                name: "total",
                unit: "ms",
                lower_is_better: true,
            },
            Metric {
                name: "in MPI_Wait (slowest rank)",
                unit: "ms",
                lower_is_better: true,
            },
            Metric {
                name: "waiting share",
                unit: "%",
                lower_is_better: true,
            },
            Metric {
                name: "computing (average rank)",
                unit: "ms",
                lower_is_better: true,
            },
        ],
        rows: by
            .into_iter()
            .map(|((n, q, ov), (t, w, sh, c))| Row {
                keys: vec![
                    ("n".into(), n.to_string()),
                    ("grid".into(), format!("{q}x{q}")),
                    ("overlap".into(), if ov == 1 { "yes" } else { "no" }.into()),
                ],
                group: String::new(),
                x: n as f64,
                values: vec![
                    Summary::of(&t),
                    Summary::of(&w),
                    Summary::of(&sh),
                    Summary::of(&c),
                ],
            })
            .collect(),
    }
}

/// The time-to-solution kernel: per problem (size, steps) the solve's time
/// (the slowest rank's), the launch's from start to exit (`wall`, added by
/// `tandem bench`: start-up, the solve, finalisation, the wait for lost
/// replicas), and the share of solves whose result verified.
fn tts_table(records: &[Value]) -> Table {
    type Acc = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut by: BTreeMap<(u64, u64), Acc> = BTreeMap::new();
    for r in of_type(records, "tts") {
        let (Some(s), Some(steps), Some(t)) = (f(r, "size"), f(r, "steps"), f(r, "t")) else {
            continue;
        };
        let e = by.entry((s as u64, steps as u64)).or_default();
        e.0.push(t);
        if let Some(w) = f(r, "wall") {
            e.1.push(w);
        }
        let ok = r.get("ok").and_then(Value::as_bool) == Some(true);
        e.2.push(if ok { 100.0 } else { 0.0 });
    }
    Table {
        kernel: "tts".into(),
        key_names: vec!["size".into(), "steps".into()],
        x_label: "bytes per pair".into(),
        x_log: true,
        metrics: vec![
            Metric {
                name: "time to solution",
                unit: "s",
                lower_is_better: true,
            },
            Metric {
                name: "launch to exit",
                unit: "s",
                lower_is_better: true,
            },
            Metric {
                name: "verified",
                unit: "%",
                lower_is_better: false,
            },
        ],
        rows: by
            .into_iter()
            .map(|((s, steps), (t, w, ok))| Row {
                keys: vec![
                    ("size".into(), size_text(s)),
                    ("steps".into(), steps.to_string()),
                ],
                group: String::new(),
                x: s as f64,
                values: vec![Summary::of(&t), Summary::of(&w), Summary::of(&ok)],
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pingpong_latency_and_throughput() {
        let recs: Vec<Value> = (0..5)
            .map(|rep| json!({"type":"sample","size":1000,"rep":rep,"iters":50,"n":100,"t":0.001}))
            .collect();
        let t = analyse("pingpong", &recs, &BTreeMap::new());
        assert_eq!(t.rows.len(), 1);
        let lat = t.rows[0].values[0].unwrap();
        assert!((lat.median - 10.0).abs() < 1e-9); // 1 ms / 100 messages
        let thr = t.rows[0].values[1].unwrap();
        assert!((thr.median - 100.0).abs() < 1e-9); // 100 kB in 1 ms
    }

    #[test]
    fn overhead_from_points() {
        // transfer 100 us, overhead 20 us, as in the analysis tests.
        let mut recs = Vec::new();
        for rep in 0..3 {
            for i in 0..40 {
                let w = i as f64 * 5e-6;
                recs.push(
                    json!({"type":"ovh_point","op":"isend","size":65536,"rep":rep,"i":i,
                                 "work":w,"iter_t":(100e-6f64).max(w + 20e-6),"work_t":w}),
                );
            }
        }
        let t = analyse("overhead", &recs, &BTreeMap::new());
        assert_eq!(t.rows.len(), 1);
        assert!((t.rows[0].values[0].unwrap().median - 20.0).abs() < 1e-6);
        assert!((t.rows[0].values[1].unwrap().median - 80.0).abs() < 1e-6);
        assert_eq!(t.rows[0].key(), "op=isend size=64 KiB");
    }

    #[test]
    fn time_to_solution_and_verification() {
        let recs = vec![
            json!({"type":"tts","size":32768,"steps":100,"rep":0,"t":2.0,"ok":true,"wall":2.5}),
            json!({"type":"tts","size":32768,"steps":100,"rep":1,"t":3.0,"ok":false,"wall":3.5}),
            json!({"type":"tts","size":32768,"steps":100,"rep":2,"t":4.0,"ok":true,"wall":4.5}),
        ];
        let t = analyse("tts", &recs, &BTreeMap::new());
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0].key(), "size=32 KiB steps=100");
        let v = |i: usize| t.rows[0].values[i].unwrap();
        assert_eq!(v(0).median, 3.0);
        assert_eq!(v(1).median, 3.5);
        assert!((v(2).mean - 200.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn coll_minimum_round_trip() {
        let recs = vec![
            json!({"type":"coll","op":"bcast","nodes":4,"size":1024,"times":[3e-6,1e-6,2e-6]}),
        ];
        let t = analyse("coll", &recs, &BTreeMap::new());
        assert_eq!(t.rows[0].values[0].unwrap().median, 1.0);
        assert_eq!(t.rows[0].values[1].unwrap().median, 2.0);
    }
}

//! The report's summary: per transport, a handful of figures (latency,
//! bandwidth, overlap, an application kernel, collectives) for every
//! library of the run, each with a one-line verdict that sets the first
//! library (Tandem) against the others.

use serde::Serialize;

use super::analyze::{Row, Table};
use super::stats::Summary;
use super::KernelResult;

/// One figure of the summary.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub transport: String,
    /// What the figure answers: latency, bandwidth, overlap, application,
    /// collectives.
    pub question: &'static str,
    /// What was measured, e.g. "one-way latency, 1 B ping-pong".
    pub what: String,
    pub unit: &'static str,
    pub lower_is_better: bool,
    /// Per library of the run, its value (None: not measured).
    pub values: Vec<(String, Option<Summary>)>,
    /// The sentence a reader takes away.
    pub verdict: String,
}

/// How a library is called in prose.
pub fn display_name(lib: &str) -> String {
    match lib {
        "tandem" => "Tandem".into(),
        "openmpi" => "Open MPI".into(),
        "mpich" => "MPICH".into(),
        other => other.into(),
    }
}

/// How a transport is called in prose.
pub fn transport_name(t: &str) -> String {
    match t {
        "shm" => "shared-memory".into(),
        "tcp" => "TCP".into(),
        other => other.into(),
    }
}

/// Three significant digits, without trailing zeros.
pub fn short(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    let s = if a == 0.0 {
        return "0".into();
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.001 {
        format!("{x:.3}")
    } else {
        return format!("{x:.2e}");
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A value with its unit: MB/s past 1000 as GB/s.
pub fn with_unit(x: f64, unit: &str) -> String {
    match unit {
        "MB/s" if x >= 1000.0 => format!("{} GB/s", short(x / 1000.0)),
        "%" => format!("{}%", short(x)),
        u => format!("{} {u}", short(x)),
    }
}

/// Whether two measurements' confidence intervals overlap: the difference
/// is then within the noise of the run.
fn overlap(a: &Summary, b: &Summary) -> bool {
    a.lo <= b.hi && b.lo <= a.hi
}

fn table<'a>(res: &'a KernelResult, lib: &str) -> Option<&'a Table> {
    res.tables.iter().find(|(l, _)| l == lib).map(|(_, t)| t)
}

fn key<'a>(r: &'a Row, name: &str) -> Option<&'a str> {
    r.keys
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn value(r: &Row, metric: usize) -> Option<Summary> {
    r.values.get(metric).copied().flatten()
}

/// The comparison part of a verdict: "1.3x Open MPI's 0.72 us: slower".
fn against(
    subject: &Summary,
    lib: &str,
    other: Option<&Summary>,
    unit: &str,
    lower_is_better: bool,
) -> String {
    let name = display_name(lib);
    let Some(o) = other else {
        return format!("{name} not measured");
    };
    if unit == "%" {
        let d = subject.median - o.median;
        let word = if overlap(subject, o) {
            "within noise"
        } else if d > 0.0 {
            "more"
        } else {
            "less"
        };
        return format!("{name} {}, {word}", with_unit(o.median, unit));
    }
    if o.median == 0.0 {
        return format!("{name} {}", with_unit(o.median, unit));
    }
    let ratio = subject.median / o.median;
    let word = if overlap(subject, o) {
        "within noise"
    } else if (ratio < 1.0) == lower_is_better {
        if lower_is_better {
            "faster"
        } else {
            "higher"
        }
    } else if lower_is_better {
        "slower"
    } else {
        "lower"
    };
    format!(
        "{}x {name}'s {}, {word}",
        short(ratio),
        with_unit(o.median, unit)
    )
}

/// A figure from each library's value; the verdict reads "`lead`:
/// VALUE \u{2014} RATIOx OTHER's VALUE, faster; ...".
fn figure(
    transport: &str,
    question: &'static str,
    what: String,
    lead: String,
    unit: &'static str,
    lower_is_better: bool,
    values: Vec<(String, Option<Summary>)>,
) -> Figure {
    let verdict = match values.first() {
        Some((_, Some(s))) => {
            let mut v = format!("{lead}: {}", with_unit(s.median, unit));
            let others: Vec<String> = values
                .iter()
                .skip(1)
                .map(|(l, o)| against(s, l, o.as_ref(), unit, lower_is_better))
                .collect();
            if !others.is_empty() {
                v.push_str(" \u{2014} ");
                v.push_str(&others.join("; "));
            }
            v
        }
        Some((lib, None)) => format!("{lead}: not measured for {}", display_name(lib)),
        None => format!("{lead}: not measured"),
    };
    Figure {
        transport: transport.to_string(),
        question,
        what,
        unit,
        lower_is_better,
        values,
        verdict,
    }
}

/// The figures of one transport, from its kernels' results (`find` gives
/// the result of a kernel, e.g. "pingpong"; for cannon, its run with
/// shifts overlapped), for `libs` in the run's order.
pub fn figures<'a>(
    transport: &str,
    libs: &[String],
    find: impl Fn(&str) -> Option<&'a KernelResult>,
) -> Vec<Figure> {
    let tn = transport_name(transport);
    let mut out = Vec::new();
    if let Some(res) = find("pingpong") {
        // Latency: the smallest size.
        let size = res
            .tables
            .first()
            .and_then(|(_, t)| t.rows.first())
            .and_then(|r| key(r, "size"))
            .unwrap_or("")
            .to_string();
        let values = libs
            .iter()
            .map(|l| {
                let v = table(res, l)
                    .and_then(|t| {
                        t.rows
                            .iter()
                            .find(|r| key(r, "size") == Some(size.as_str()))
                    })
                    .and_then(|r| value(r, 0));
                (l.clone(), v)
            })
            .collect();
        out.push(figure(
            transport,
            "latency",
            format!("one-way latency, {size} ping-pong"),
            format!("{tn} latency ({size})"),
            "us",
            true,
            values,
        ));
        // Bandwidth: each library's best size.
        let values: Vec<(String, Option<Summary>)> = libs
            .iter()
            .map(|l| {
                let best = table(res, l).and_then(|t| {
                    t.rows
                        .iter()
                        .filter_map(|r| value(r, 1))
                        .max_by(|a, b| a.median.total_cmp(&b.median))
                });
                (l.clone(), best)
            })
            .collect();
        out.push(figure(
            transport,
            "bandwidth",
            "ping-pong throughput, the best message size of each library".into(),
            format!("{tn} bandwidth (peak)"),
            "MB/s",
            false,
            values,
        ));
    }
    if let Some(res) = find("overhead") {
        for op in ["isend", "irecv"] {
            // Availability at the largest size of the op.
            let size = res
                .tables
                .first()
                .and_then(|(_, t)| t.rows.iter().rfind(|r| key(r, "op") == Some(op)))
                .and_then(|r| key(r, "size"))
                .map(str::to_string);
            let Some(size) = size else { continue };
            let values = libs
                .iter()
                .map(|l| {
                    let v = table(res, l)
                        .and_then(|t| {
                            t.rows.iter().find(|r| {
                                key(r, "op") == Some(op) && key(r, "size") == Some(size.as_str())
                            })
                        })
                        .and_then(|r| value(r, 1));
                    (l.clone(), v)
                })
                .collect();
            let call = if op == "isend" {
                "MPI_Isend"
            } else {
                "MPI_Irecv"
            };
            out.push(figure(
                transport,
                "overlap",
                format!(
                    "availability: the share of a {size} {call}'s transfer the rank can spend computing"
                ),
                format!("{tn} overlap, computing during a {size} {call}"),
                "%",
                false,
                values,
            ));
        }
    }
    if let Some(res) = find("cannon") {
        let values = libs
            .iter()
            .map(|l| {
                (
                    l.clone(),
                    table(res, l)
                        .and_then(|t| t.rows.first())
                        .and_then(|r| value(r, 0)),
                )
            })
            .collect();
        let n = res.params.get("n").cloned().unwrap_or_default();
        out.push(figure(
            transport,
            "application",
            format!(
                "Cannon's matrix multiplication, n = {n} on {} ranks, shifts overlapped with computing",
                res.np
            ),
            format!("{tn} Cannon (n = {n}, {} ranks)", res.np),
            "ms",
            true,
            values,
        ));
    }
    if let Some(res) = find("coll") {
        out.extend(collectives(transport, &tn, libs, res));
    }
    out
}

/// The collectives at the largest rank count: the geometric mean of each
/// library's median times over the (operation, size) points every library
/// has, and for the first library against each other one how many points
/// are faster, slower or within noise.
fn collectives(transport: &str, tn: &str, libs: &[String], res: &KernelResult) -> Option<Figure> {
    let first = table(res, libs.first()?)?;
    let ranks = first
        .rows
        .iter()
        .filter_map(|r| key(r, "nodes").and_then(|n| n.parse::<u64>().ok()))
        .max()?;
    let ranks_text = ranks.to_string();
    // Points of the first library at that rank count, which every library has.
    let points: Vec<String> = first
        .rows
        .iter()
        .filter(|r| key(r, "nodes") == Some(ranks_text.as_str()))
        .filter(|r| {
            libs.iter().all(|l| {
                table(res, l)
                    .and_then(|t| t.rows.iter().find(|o| o.key() == r.key()))
                    .and_then(|o| value(o, 1))
                    .is_some()
            })
        })
        .map(|r| r.key())
        .collect();
    if points.is_empty() {
        return None;
    }
    let of = |l: &str, k: &str| -> Option<Summary> {
        table(res, l)
            .and_then(|t| t.rows.iter().find(|o| o.key() == k))
            .and_then(|o| value(o, 1))
    };
    let geo = |l: &str, pick: fn(&Summary) -> f64| -> f64 {
        let logs: Vec<f64> = points
            .iter()
            .filter_map(|k| of(l, k))
            .map(|s| pick(&s).max(1e-12).ln())
            .collect();
        (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
    };
    let values: Vec<(String, Option<Summary>)> = libs
        .iter()
        .map(|l| {
            let mut s = Summary::exact(geo(l, |s| s.median));
            s.lo = geo(l, |s| s.lo);
            s.hi = geo(l, |s| s.hi);
            s.n = points.len();
            (l.clone(), Some(s))
        })
        .collect();
    let lead = format!(
        "{tn} collectives ({ranks} ranks, geometric mean of {} operation and size points)",
        points.len()
    );
    let mut verdict = match values.first() {
        Some((_, Some(s))) => format!("{lead}: {}", with_unit(s.median, "us")),
        _ => lead.clone(),
    };
    let others: Vec<String> = libs
        .iter()
        .skip(1)
        .map(|l| {
            let (mut faster, mut slower, mut even) = (0, 0, 0);
            for k in &points {
                match (of(&libs[0], k), of(l, k)) {
                    (Some(a), Some(b)) if overlap(&a, &b) => even += 1,
                    (Some(a), Some(b)) if a.median < b.median => faster += 1,
                    (Some(_), Some(_)) => slower += 1,
                    _ => {}
                }
            }
            let ratio = geo(&libs[0], |s| s.median) / geo(l, |s| s.median);
            format!(
                "{}x {}'s {}, faster at {faster}, slower at {slower}, within noise at {even}",
                short(ratio),
                display_name(l),
                with_unit(geo(l, |s| s.median), "us")
            )
        })
        .collect();
    if !others.is_empty() {
        verdict.push_str(" \u{2014} ");
        verdict.push_str(&others.join("; "));
    }
    Some(Figure {
        transport: transport.to_string(),
        question: "collectives",
        what: format!(
            "alltoall, bcast, gather, scatter, p2p at {ranks} ranks: geometric mean of the median times"
        ),
        unit: "us",
        lower_is_better: true,
        values,
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(median: f64, lo: f64, hi: f64) -> Summary {
        Summary {
            n: 5,
            median,
            lo,
            hi,
            min: lo,
            max: hi,
            mean: median,
        }
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short(0.1534), "0.153");
        assert_eq!(short(1.0), "1");
        assert_eq!(short(12.345), "12.3");
        assert_eq!(short(8893.2), "8893");
        assert_eq!(with_unit(8893.2, "MB/s"), "8.89 GB/s");
        assert_eq!(with_unit(950.0, "MB/s"), "950 MB/s");
        assert_eq!(with_unit(95.0, "%"), "95%");
    }

    #[test]
    fn verdicts_say_which_is_better_or_that_noise_decides() {
        let f = figure(
            "shm",
            "latency",
            String::new(),
            "shared-memory latency".into(),
            "us",
            true,
            vec![
                ("tandem".into(), Some(s(0.15, 0.14, 0.16))),
                ("openmpi".into(), Some(s(0.30, 0.29, 0.31))),
                ("mpich".into(), Some(s(0.155, 0.15, 0.17))),
            ],
        );
        assert_eq!(
            f.verdict,
            "shared-memory latency: 0.15 us \u{2014} 0.5x Open MPI's 0.3 us, faster; \
             0.968x MPICH's 0.155 us, within noise"
        );
        let f = figure(
            "tcp",
            "bandwidth",
            String::new(),
            "TCP bandwidth".into(),
            "MB/s",
            false,
            vec![
                ("tandem".into(), Some(s(1000.0, 990.0, 1010.0))),
                ("openmpi".into(), Some(s(2000.0, 1990.0, 2010.0))),
            ],
        );
        assert_eq!(
            f.verdict,
            "TCP bandwidth: 1 GB/s \u{2014} 0.5x Open MPI's 2 GB/s, lower"
        );
        let f = figure(
            "tcp",
            "overlap",
            String::new(),
            "overlap".into(),
            "%",
            false,
            vec![
                ("tandem".into(), Some(s(95.0, 94.0, 96.0))),
                ("openmpi".into(), None),
            ],
        );
        assert_eq!(f.verdict, "overlap: 95% \u{2014} Open MPI not measured");
        // Alone: the figure without comparison.
        let f = figure(
            "tcp",
            "latency",
            String::new(),
            "TCP latency".into(),
            "us",
            true,
            vec![("tandem".into(), Some(s(9.0, 8.0, 10.0)))],
        );
        assert_eq!(f.verdict, "TCP latency: 9 us");
    }
}

//! `tandem bench model`: the communication models of seed 002's Table 1
//! fitted to measurements.
//!
//! * Hockney, T(m) = l + m/b, fitted to the ping-pong one-way times by least
//!   relative squares, as one line and as two lines with a break at the
//!   size that fits best (a protocol switch such as eager to rendezvous
//!   bends the curve; seeds 001 and 003 point at these knees).
//! * LogGP, T(m) = o_s + (m-1)G + L + o_r, from the other kernels as
//!   Kielmann and Bal measure it: o_s and o_r are the MPI_Isend and
//!   MPI_Irecv overheads of the smallest message (overhead kernel), g the
//!   time per message of a burst of the smallest messages, G the slope of
//!   the burst's time per message over size, and L what the smallest
//!   ping-pong leaves after the overheads.
//!
//! Both predict ping-pong times (checked against the measurement) and, from
//! the Hockney fit, linear and tree collective times next to `coll`'s.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::analyze::{self, Table};
use super::kernels::{self, size_text};
use super::mpi::{self, Transport};
use super::output::{self, num, Machine};
use super::plot::{self, Plot, Series};
use super::stats::{fit_line_relative, max_relative_error};
use super::{run_spec, split_set, KernelResult, ModelArgs, RunSpec};

/// The agreement the model must reach with the measured ping-pong.
pub const TARGET_ERROR: f64 = 0.15;

/// One Hockney line, valid for sizes in [from, to].
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Hockney {
    /// Latency, seconds.
    pub l: f64,
    /// Bandwidth, bytes per second.
    pub b: f64,
    pub r2: f64,
    pub from: f64,
    pub to: f64,
}

/// One or two Hockney lines.
#[derive(Clone, Debug, Serialize)]
pub struct HockneyFit {
    pub segments: Vec<Hockney>,
    /// Largest |predicted - measured| / measured over the fitted sizes.
    pub max_error: f64,
    pub mean_error: f64,
}

impl HockneyFit {
    pub fn predict(&self, m: f64) -> f64 {
        let seg = self
            .segments
            .iter()
            .find(|s| m <= s.to)
            .or(self.segments.last())
            .expect("a fit has a segment");
        seg.l + m / seg.b
    }
}

fn fit_segment(points: &[(f64, f64)]) -> Option<Hockney> {
    let f = fit_line_relative(points)?;
    if f.b <= 0.0 {
        return None;
    }
    Some(Hockney {
        l: f.a,
        b: 1.0 / f.b,
        r2: f.r2,
        from: points.first()?.0,
        to: points.last()?.0,
    })
}

fn errors(fit: &HockneyFit, points: &[(f64, f64)]) -> (f64, f64) {
    let errs: Vec<f64> = points
        .iter()
        .map(|&(m, t)| ((fit.predict(m) - t) / t).abs())
        .collect();
    let max = errs.iter().copied().fold(0.0, f64::max);
    (max, errs.iter().sum::<f64>() / errs.len().max(1) as f64)
}

/// Fits one Hockney line to (size, seconds) points sorted by size.
pub fn fit_hockney(points: &[(f64, f64)]) -> Option<HockneyFit> {
    let seg = fit_segment(points)?;
    let mut fit = HockneyFit {
        segments: vec![seg],
        max_error: 0.0,
        mean_error: 0.0,
    };
    (fit.max_error, fit.mean_error) = errors(&fit, points);
    Some(fit)
}

/// Fits `k` Hockney lines to consecutive ranges of sizes (each of at
/// least three sizes), with the breaks that minimise the largest relative
/// error: Hockney with parameters that depend on the message size, as
/// PLogP does for LogP (seed 002, Table 1).
pub fn fit_hockney_k(points: &[(f64, f64)], k: usize) -> Option<HockneyFit> {
    const MIN: usize = 3;
    let n = points.len();
    if k == 0 || n < k * MIN {
        return None;
    }
    let mut best: Option<HockneyFit> = None;
    // Every choice of k-1 breaks, as the first index of each later segment.
    let mut breaks: Vec<usize> = (1..k).map(|i| i * MIN).collect();
    loop {
        let mut bounds = vec![0];
        bounds.extend(&breaks);
        bounds.push(n);
        let segments: Option<Vec<Hockney>> = bounds
            .windows(2)
            .map(|w| {
                let mut seg = fit_segment(&points[w[0]..w[1]])?;
                seg.to = points[w[1] - 1].0;
                Some(seg)
            })
            .collect();
        if let Some(segments) = segments {
            let mut fit = HockneyFit {
                segments,
                max_error: 0.0,
                mean_error: 0.0,
            };
            (fit.max_error, fit.mean_error) = errors(&fit, points);
            if best.as_ref().is_none_or(|b| fit.max_error < b.max_error) {
                best = Some(fit);
            }
        }
        // Next combination: advance the last break that can move.
        let mut i = breaks.len();
        loop {
            if i == 0 {
                return best;
            }
            i -= 1;
            let limit = n - (breaks.len() - i) * MIN;
            if breaks[i] < limit {
                breaks[i] += 1;
                for j in i + 1..breaks.len() {
                    breaks[j] = breaks[j - 1] + MIN;
                }
                break;
            }
        }
    }
}

/// The piecewise fit with the fewest lines (two or three) that predicts
/// every size within the target, else the best of them.
pub fn fit_hockney_piecewise(points: &[(f64, f64)]) -> Option<HockneyFit> {
    let two = fit_hockney_k(points, 2);
    if two.as_ref().is_some_and(|f| f.max_error <= TARGET_ERROR) {
        return two;
    }
    let three = fit_hockney_k(points, 3);
    match (two, three) {
        (Some(a), Some(b)) => Some(if b.max_error < a.max_error { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// LogGP parameters (seconds; G in seconds per byte).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LogGp {
    pub l: f64,
    pub o_s: f64,
    pub o_r: f64,
    pub g: f64,
    pub big_g: f64,
    pub max_error: f64,
    pub mean_error: f64,
}

impl LogGp {
    /// T(m) = o_s + (m-1)G + L + o_r.
    pub fn predict(&self, m: f64) -> f64 {
        self.o_s + (m - 1.0).max(0.0) * self.big_g + self.l + self.o_r
    }
}

/// Derives LogGP: G, the gap per byte of long messages, is the slope of
/// the ping-pong over its largest sizes (the last line of the piecewise
/// Hockney fit, or of one line); o_s and o_r are the measured overheads,
/// scaled down together if they exceed what the smallest ping-pong leaves
/// (then L = 0); L is the rest of the smallest ping-pong; g is the time per
/// message of a burst of the smallest messages. `burst_big_g`, the slope
/// of the burst's time per message, is returned as a cross-check.
pub fn fit_loggp(
    pingpong: &[(f64, f64)],
    large: &Hockney,
    burst: &[(f64, f64)],
    o_s: f64,
    o_r: f64,
) -> Option<(LogGp, Option<f64>, bool)> {
    let &(m0, t0) = pingpong.first()?;
    let g = burst.first().map(|p| p.1).unwrap_or(0.0);
    let burst_big_g = fit_line_relative(burst).map(|f| f.b.max(0.0));
    let big_g = 1.0 / large.b;
    let fixed = (t0 - (m0 - 1.0).max(0.0) * big_g).max(0.0);
    let (mut o_s, mut o_r) = (o_s, o_r);
    let scaled = o_s + o_r > fixed;
    if scaled {
        let k = fixed / (o_s + o_r);
        o_s *= k;
        o_r *= k;
    }
    let l = (fixed - o_s - o_r).max(0.0);
    let mut fit = LogGp {
        l,
        o_s,
        o_r,
        g,
        big_g,
        max_error: 0.0,
        mean_error: 0.0,
    };
    fit.max_error = max_relative_error(pingpong.iter().map(|&(m, t)| (fit.predict(m), t)));
    fit.mean_error = pingpong
        .iter()
        .map(|&(m, t)| ((fit.predict(m) - t) / t).abs())
        .sum::<f64>()
        / pingpong.len() as f64;
    Some((fit, burst_big_g, scaled))
}

fn log2_ceil(p: u64) -> f64 {
    (p as f64).log2().ceil()
}

/// Predicted (linear, tree) times of a `coll` point from a Hockney fit,
/// including the closing barrier of the procedure (a dissemination
/// barrier: ceil(log2 p) empty messages).
pub fn predict_coll(h: &HockneyFit, op: &str, p: u64, m: f64) -> (f64, f64) {
    let t = |x: f64| h.predict(x);
    let steps = log2_ceil(p);
    let barrier = steps * t(0.0);
    let l = h.predict(0.0);
    let per_byte = |x: f64| t(x) - l;
    let (linear, tree) = match op {
        "bcast" => ((p - 1) as f64 * t(m), steps * t(m)),
        "gather" | "scatter" => (
            (p - 1) as f64 * t(m),
            steps * l + per_byte((p - 1) as f64 * m),
        ),
        // Pairwise exchange (p-1 steps) against Bruck (log p steps of p/2 blocks).
        "alltoall" => ((p - 1) as f64 * t(m), steps * t(p as f64 / 2.0 * m)),
        _ => (t(m), t(m)),
    };
    (linear + barrier, tree + barrier)
}

/// Points (size, seconds) of a table's first metric (microseconds).
fn points_us(t: &Table, group: Option<&str>) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = t
        .rows
        .iter()
        .filter(|r| group.is_none_or(|g| r.group == g))
        .filter_map(|r| {
            r.values
                .first()
                .copied()
                .flatten()
                .map(|s| (r.x, s.median * 1e-6))
        })
        .filter(|p| p.1 > 0.0)
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// One ping-pong size: (size, measured, Hockney, piecewise Hockney, LogGP),
/// in seconds.
pub type Prediction = (f64, f64, Option<f64>, Option<f64>, Option<f64>);

/// Everything the model command found.
#[derive(Clone, Debug, Serialize)]
pub struct ModelResult {
    pub machine: Machine,
    pub mpi: String,
    pub hockney: Option<HockneyFit>,
    /// Two or three lines over ranges of sizes.
    pub piecewise: Option<HockneyFit>,
    pub loggp: Option<LogGp>,
    /// G from the burst's slope, as a cross-check of LogGP's G.
    pub burst_big_g: Option<f64>,
    /// (size, measured, Hockney, piecewise Hockney, LogGP) in seconds.
    pub pingpong: Vec<Prediction>,
    /// (op, nodes, size, measured MRT, linear, tree) in seconds.
    pub collectives: Vec<(String, u64, u64, f64, f64, f64)>,
    pub notes: Vec<String>,
    pub measurements: Vec<KernelResult>,
}

impl ModelResult {
    /// The best Hockney fit (two lines if they fit better).
    pub fn best_hockney(&self) -> Option<&HockneyFit> {
        match (&self.hockney, &self.piecewise) {
            (Some(a), Some(b)) => Some(if b.max_error < a.max_error { b } else { a }),
            (a, b) => a.as_ref().or(b.as_ref()),
        }
    }

    /// The smallest largest-error of the ping-pong predictions, and which model.
    pub fn best_error(&self) -> Option<(f64, &'static str)> {
        let mut c = Vec::new();
        if let Some(h) = &self.hockney {
            c.push((h.max_error, "Hockney"));
        }
        if let Some(h) = &self.piecewise {
            c.push((h.max_error, "piecewise Hockney"));
        }
        if let Some(h) = &self.loggp {
            c.push((h.max_error, "LogGP"));
        }
        c.into_iter().min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// Fits the models to the tables of pingpong, burst, overhead and coll.
pub fn fit(
    mpi_name: &str,
    pingpong: Option<&Table>,
    burst: Option<&Table>,
    overhead: Option<&Table>,
    coll: Option<&Table>,
) -> ModelResult {
    let mut notes = Vec::new();
    let pp = pingpong.map(|t| points_us(t, None)).unwrap_or_default();
    let bu = burst.map(|t| points_us(t, None)).unwrap_or_default();
    let hockney = fit_hockney(&pp);
    let piecewise = fit_hockney_piecewise(&pp);
    if hockney.is_none() {
        notes.push(
            "no single-line Hockney fit: ping-pong needs at least two sizes, and times that grow with size"
                .into(),
        );
    }
    let first_overhead = |op: &str| -> Option<f64> {
        overhead.and_then(|t| points_us(t, Some(op)).first().map(|p| p.1))
    };
    let (o_s, o_r) = match (first_overhead("isend"), first_overhead("irecv")) {
        (Some(s), Some(r)) => (s, r),
        _ => {
            notes.push("no overhead measurements: LogGP assumes o_s = o_r = 0".into());
            (0.0, 0.0)
        }
    };
    let large = piecewise
        .as_ref()
        .or(hockney.as_ref())
        .and_then(|h| h.segments.last().copied());
    let (loggp, burst_big_g) = match large.and_then(|lg| fit_loggp(&pp, &lg, &bu, o_s, o_r)) {
        Some((l, bg, scaled)) => {
            if scaled {
                notes.push(format!(
                    "LogGP: the measured overheads (o_s {} us + o_r {} us) exceed the smallest one-way time, \
                     so they are scaled down to fit it and L = 0 (the post-work-wait overhead also counts work \
                     that overlaps the peer's, such as system calls on TCP loopback)",
                    us(o_s),
                    us(o_r)
                ));
            }
            (Some(l), bg)
        }
        None => (None, None),
    };
    if bu.is_empty() {
        notes.push("no burst measurements: LogGP's g is unknown (0)".into());
    }
    let pingpong_rows = pp
        .iter()
        .map(|&(m, t)| {
            (
                m,
                t,
                hockney.as_ref().map(|h| h.predict(m)),
                piecewise.as_ref().map(|h| h.predict(m)),
                loggp.as_ref().map(|h| h.predict(m)),
            )
        })
        .collect();
    let mut result = ModelResult {
        machine: Machine::describe(),
        mpi: mpi_name.to_string(),
        hockney,
        piecewise,
        loggp,
        burst_big_g,
        pingpong: pingpong_rows,
        collectives: Vec::new(),
        notes,
        measurements: Vec::new(),
    };
    if let (Some(h), Some(c)) = (result.best_hockney().cloned(), coll) {
        for r in &c.rows {
            let get = |k: &str| r.keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let (Some(op), Some(nodes)) =
                (get("op"), get("nodes").and_then(|n| n.parse::<u64>().ok()))
            else {
                continue;
            };
            let Some(size) = r
                .keys
                .iter()
                .find(|(n, _)| n == "size")
                .and_then(|(_, v)| parse_size_text(v))
            else {
                continue;
            };
            let Some(mrt) = r.values.first().copied().flatten() else {
                continue;
            };
            let (lin, tree) = predict_coll(&h, &op, nodes, size as f64);
            result
                .collectives
                .push((op, nodes, size, mrt.median * 1e-6, lin, tree));
        }
    }
    result
}

/// "64 KiB" -> 65536.
fn parse_size_text(t: &str) -> Option<u64> {
    let (n, unit) = t.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "B" => n,
        "KiB" => n << 10,
        "MiB" => n << 20,
        _ => return None,
    })
}

fn pct(e: f64) -> String {
    format!("{:.1}%", e * 100.0)
}

fn us(s: f64) -> String {
    num(s * 1e6)
}

/// The model as text.
pub fn text(r: &ModelResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Models of {} (seed 002, Table 1); times are one-way (half a ping-pong round trip)",
        r.mpi
    );
    let _ = writeln!(o);
    let seg = |h: &Hockney| {
        format!(
            "l = {} us, b = {} MB/s (R2 {:.4})",
            us(h.l),
            num(h.b / 1e6),
            h.r2
        )
    };
    if let Some(h) = &r.hockney {
        let _ = writeln!(
            o,
            "Hockney T(m) = l + m/b, one line:   {}",
            seg(&h.segments[0])
        );
        let _ = writeln!(
            o,
            "    max error {}, mean {}",
            pct(h.max_error),
            pct(h.mean_error)
        );
    }
    if let Some(h) = &r.piecewise {
        let _ = writeln!(
            o,
            "Hockney, {} lines over ranges of sizes (PLogP-style):",
            h.segments.len()
        );
        for s in &h.segments {
            let _ = writeln!(
                o,
                "    {} .. {}: {}",
                size_text(s.from as u64),
                size_text(s.to as u64),
                seg(s)
            );
        }
        let _ = writeln!(
            o,
            "    max error {}, mean {}",
            pct(h.max_error),
            pct(h.mean_error)
        );
    }
    if let Some(l) = &r.loggp {
        let _ = writeln!(o, "LogGP T(m) = o_s + (m-1)G + L + o_r:");
        let _ = writeln!(
            o,
            "    L = {} us, o_s = {} us, o_r = {} us, g = {} us, G = {} ns/byte ({} MB/s)",
            us(l.l),
            us(l.o_s),
            us(l.o_r),
            us(l.g),
            num(l.big_g * 1e9),
            if l.big_g > 0.0 {
                num(1.0 / l.big_g / 1e6)
            } else {
                "-".into()
            }
        );
        let _ = writeln!(
            o,
            "    max error {}, mean {}",
            pct(l.max_error),
            pct(l.mean_error)
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    if !r.pingpong.is_empty() {
        let _ = writeln!(o);
        let header: Vec<String> = [
            "size",
            "measured (us)",
            "Hockney",
            "err",
            "piecewise",
            "err",
            "LogGP",
            "err",
        ]
        .map(String::from)
        .to_vec();
        let cell = |p: Option<f64>, t: f64| match p {
            Some(p) => (us(p), format!("{:+.1}%", (p - t) / t * 100.0)),
            None => ("-".into(), "-".into()),
        };
        let rows: Vec<Vec<String>> = r
            .pingpong
            .iter()
            .map(|&(m, t, h, h2, l)| {
                let (a, ae) = cell(h, t);
                let (b, be) = cell(h2, t);
                let (c, ce) = cell(l, t);
                vec![size_text(m as u64), us(t), a, ae, b, be, c, ce]
            })
            .collect();
        o.push_str(&output::layout(&header, &rows, 1));
        if let Some((e, which)) = r.best_error() {
            let _ = writeln!(
                o,
                "ping-pong predicted within {:.0}% at every size: {} (best: {which}, largest error {})",
                TARGET_ERROR * 100.0,
                if e <= TARGET_ERROR { "yes" } else { "no" },
                pct(e)
            );
        }
    }
    if !r.collectives.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Collectives: measured minimum time (barrier, start, op, barrier, end) against the Hockney fit \
             (linear: root or pairs one after another; tree: binomial, Bruck for alltoall; plus the closing barrier)"
        );
        let header: Vec<String> = [
            "op",
            "nodes",
            "size",
            "measured (us)",
            "linear",
            "tree",
            "closest",
        ]
        .map(String::from)
        .to_vec();
        let rows: Vec<Vec<String>> = r
            .collectives
            .iter()
            .map(|(op, n, s, meas, lin, tree)| {
                let closest = if (lin - meas).abs() <= (tree - meas).abs() {
                    "linear"
                } else {
                    "tree"
                };
                vec![
                    op.clone(),
                    n.to_string(),
                    size_text(*s),
                    us(*meas),
                    us(*lin),
                    us(*tree),
                    closest.to_string(),
                ]
            })
            .collect();
        o.push_str(&output::layout(&header, &rows, 3));
    }
    o
}

/// The measured and predicted ping-pong times as a plot.
pub fn plot_of(r: &ModelResult) -> Plot {
    let mut series = vec![Series {
        name: "measured".into(),
        points: r
            .pingpong
            .iter()
            .map(|p| (p.0, p.1 * 1e6, p.1 * 1e6, p.1 * 1e6))
            .collect(),
    }];
    let mut add = |name: &str, f: &dyn Fn(&Prediction) -> Option<f64>| {
        let pts: Vec<(f64, f64, f64, f64)> = r
            .pingpong
            .iter()
            .filter_map(|p| f(p).map(|y| (p.0, y * 1e6, y * 1e6, y * 1e6)))
            .collect();
        if !pts.is_empty() {
            series.push(Series {
                name: name.into(),
                points: pts,
            });
        }
    };
    add("Hockney", &|p| p.2);
    add("piecewise Hockney", &|p| p.3);
    add("LogGP", &|p| p.4);
    let xs: Vec<f64> = r
        .pingpong
        .iter()
        .map(|p| p.0)
        .filter(|x| *x > 0.0)
        .collect();
    let log = xs.len() > 1 && plot::wants_log(xs[0], xs[xs.len() - 1]);
    Plot {
        title: format!("ping-pong one-way time, {}: measured and models", r.mpi),
        x_label: "message size (bytes)".into(),
        y_label: "time (us)".into(),
        log_x: log,
        log_y: log,
        x_bytes: true,
        x_integer: false,
        series,
    }
}

/// Loads `--json` documents: (kernel, table) per document, for library
/// `mpi` (or the document's first library).
fn load(paths: &[std::path::PathBuf], mpi: &str) -> Result<Vec<(String, Table)>, String> {
    let mut out = Vec::new();
    for p in paths {
        let text =
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a tandem bench JSON file: {e}", p.display()))?;
        let kernel = doc
            .get("kernel")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{}: no kernel", p.display()))?
            .to_string();
        let runs = doc
            .get("runs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let libs: Vec<&str> = runs
            .iter()
            .filter_map(|r| r.get("mpi").and_then(Value::as_str))
            .collect();
        let lib = if libs.contains(&mpi) {
            mpi
        } else {
            libs.first().copied().unwrap_or(mpi)
        };
        let mut records = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            if r.get("mpi").and_then(Value::as_str) != Some(lib) {
                continue;
            }
            for rec in r
                .get("records")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
            {
                let mut rec = rec;
                if let Some(rep) = rec.get("rep").and_then(Value::as_u64) {
                    rec["rep"] = Value::from(rep + 100_000 * i as u64);
                }
                records.push(rec);
            }
        }
        let params: BTreeMap<String, String> = doc
            .get("params")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        out.push((kernel.clone(), analyze::analyse(&kernel, &records, &params)));
    }
    Ok(out)
}

/// The measurements the model needs, as specs.
pub fn specs(
    lib: &mpi::Library,
    duration: f64,
    repeat: u32,
    coll_np: u32,
    set: &[String],
    transport: &Transport,
) -> Result<Vec<RunSpec>, String> {
    let mut out = Vec::new();
    let plan: [(&str, u32, &str, bool); 4] = [
        ("pingpong", 2, "1:4m:2", true),
        ("burst", 2, "1:4m:4", true),
        ("overhead", 2, "8,1k,64k,1m", false),
        ("coll", coll_np, "1k,64k,1m", false),
    ];
    for (name, np, sizes, timed) in plan {
        if np == 0 {
            continue;
        }
        let kernel = kernels::find(name).expect("kernel in the catalogue");
        let mut params = BTreeMap::new();
        params.insert(
            "sizes".to_string(),
            kernels::parse_sizes(sizes)?
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
        if timed {
            params.insert("duration".into(), duration.to_string());
        }
        let rep = match name {
            "overhead" => repeat.clamp(1, 3),
            "coll" => (repeat * 2).max(5),
            _ => repeat,
        };
        params.insert("repeat".into(), rep.to_string());
        let lib_set = split_set(kernel, set, std::slice::from_ref(lib), &mut params)?;
        out.push(RunSpec {
            kernel,
            libs: vec![lib.clone()],
            np,
            np_list: if name == "coll" {
                (2..=np).collect()
            } else {
                Vec::new()
            },
            params,
            lib_set,
            transport: transport.clone(),
            rounds: 1,
            timeout: Duration::from_secs(1800),
            progress: true,
        });
    }
    Ok(out)
}

/// Runs the specs; a kernel the library cannot build (missing collectives)
/// is skipped with a note.
pub fn measure(specs: &[RunSpec], notes: &mut Vec<String>) -> Result<Vec<KernelResult>, String> {
    let mut out = Vec::new();
    for s in specs {
        match super::build::build(s.kernel, &s.libs[0]) {
            Err(super::build::BuildError::Missing(message)) => {
                notes.push(format!("{message}: skipped"));
                continue;
            }
            Err(e) => return Err(e.to_string()),
            Ok(_) => {}
        }
        out.push(run_spec(s)?);
    }
    Ok(out)
}

fn table_of<'a>(results: &'a [(String, Table)], kernel: &str) -> Option<&'a Table> {
    results.iter().find(|(k, _)| k == kernel).map(|(_, t)| t)
}

pub fn command(a: &ModelArgs) -> Result<(), String> {
    if let Some(p) = &a.plot {
        plot::check_path(p)?;
    }
    let (tables, measurements, mut notes) = if a.from.is_empty() {
        let lib = mpi::resolve(&a.mpi)?;
        let specs = specs(
            &lib,
            a.duration,
            a.repeat.max(1),
            a.coll_np,
            &a.set,
            &Transport::parse(&a.transport),
        )?;
        let mut notes = Vec::new();
        let results = measure(&specs, &mut notes)?;
        let tables: Vec<(String, Table)> = results
            .iter()
            .map(|r| (r.kernel.clone(), r.tables[0].1.clone()))
            .collect();
        (tables, results, notes)
    } else {
        (load(&a.from, &a.mpi)?, Vec::new(), Vec::new())
    };
    let mut r = fit(
        &a.mpi,
        table_of(&tables, "pingpong"),
        table_of(&tables, "burst"),
        table_of(&tables, "overhead"),
        table_of(&tables, "coll"),
    );
    if table_of(&tables, "pingpong").is_none() {
        return Err(
            "the model needs ping-pong measurements (a pingpong --json file with --from)".into(),
        );
    }
    notes.append(&mut r.notes);
    r.notes = notes;
    r.measurements = measurements;
    print!("{}", text(&r));
    if let Some(p) = &a.json {
        let text =
            serde_json::to_string_pretty(&r).map_err(|e| format!("cannot encode JSON: {e}"))?;
        output::write_file(p, text.as_bytes())?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &a.plot {
        plot::write(&plot_of(&r), Path::new(p))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic() -> Vec<(f64, f64)> {
        // Eager up to 64 KiB: 8 us + 1 ns/B; rendezvous: 30 us + 0.25 ns/B.
        (0..=22)
            .map(|k| {
                let m = (1u64 << k) as f64;
                let t = if m <= 65536.0 {
                    8e-6 + m * 1e-9
                } else {
                    30e-6 + m * 0.25e-9
                };
                (m, t)
            })
            .collect()
    }

    #[test]
    fn hockney_single_line_exact() {
        let pts: Vec<(f64, f64)> = (0..12)
            .map(|k| ((4u64 << k) as f64, 5e-6 + (4u64 << k) as f64 / 2e9))
            .collect();
        let h = fit_hockney(&pts).unwrap();
        assert!((h.segments[0].l - 5e-6).abs() < 1e-12);
        assert!((h.segments[0].b - 2e9).abs() / 2e9 < 1e-9);
        assert!(h.max_error < 1e-9);
    }

    #[test]
    fn two_lines_find_the_protocol_switch() {
        let pts = synthetic();
        let one = fit_hockney(&pts).unwrap();
        let two = fit_hockney_k(&pts, 2).unwrap();
        assert!(
            one.max_error > 0.15,
            "one line fits too well: {}",
            one.max_error
        );
        assert!(two.max_error < 1e-6, "{}", two.max_error);
        assert_eq!(two.segments[0].to, 65536.0);
        assert!((two.segments[1].l - 30e-6).abs() < 1e-10);
        assert!((two.predict(1048576.0) - (30e-6 + 1048576.0 * 0.25e-9)).abs() < 1e-12);
    }

    #[test]
    fn loggp_from_overheads_and_burst() {
        // T = o_s + (m-1)G + L + o_r with o_s = 2, o_r = 3, L = 4 us, G = 0.5 ns/B.
        let pp: Vec<(f64, f64)> = (0..10)
            .map(|k| {
                let m = (1u64 << (2 * k)) as f64;
                (m, 9e-6 + (m - 1.0) * 0.5e-9)
            })
            .collect();
        let burst: Vec<(f64, f64)> = pp.iter().map(|&(m, _)| (m, 1e-6 + m * 0.5e-9)).collect();
        let large = fit_hockney(&pp).unwrap().segments[0];
        let (l, bg, scaled) = fit_loggp(&pp, &large, &burst, 2e-6, 3e-6).unwrap();
        assert!(!scaled);
        assert!((l.l - 4e-6).abs() < 1e-10, "{}", l.l);
        assert!((l.big_g - 0.5e-9).abs() < 1e-13);
        assert!((bg.unwrap() - 0.5e-9).abs() < 1e-13);
        assert!((l.g - (1e-6 + 0.5e-9)).abs() < 1e-12);
        assert!(l.max_error < 1e-6);
        // Overheads larger than the one-way time are scaled to fit, L = 0.
        let (l, _, scaled) = fit_loggp(&pp, &large, &burst, 6e-6, 12e-6).unwrap();
        assert!(scaled);
        assert_eq!(l.l, 0.0);
        assert!((l.o_s + l.o_r - 9e-6).abs() < 1e-12);
        assert!((l.o_r / l.o_s - 2.0).abs() < 1e-9);
    }

    #[test]
    fn three_lines_when_two_do_not_fit() {
        // Three regimes: inline up to 1 KiB, copy up to 64 KiB, zero-copy above.
        let pts: Vec<(f64, f64)> = (0..=22)
            .map(|k| {
                let m = (1u64 << k) as f64;
                let t = if m <= 1024.0 {
                    5e-6 + m * 0.1e-9
                } else if m <= 65536.0 {
                    9e-6 + m * 1e-9
                } else {
                    40e-6 + m * 0.25e-9
                };
                (m, t)
            })
            .collect();
        let three = fit_hockney_k(&pts, 3).unwrap();
        assert!(three.max_error < 1e-6, "{}", three.max_error);
        assert_eq!(three.segments[0].to, 1024.0);
        assert_eq!(three.segments[1].to, 65536.0);
        let pw = fit_hockney_piecewise(&pts).unwrap();
        assert_eq!(pw.segments.len(), 3);
        // Too few points for three lines of three.
        assert!(fit_hockney_k(&pts[..8], 3).is_none());
    }

    #[test]
    fn collective_predictions() {
        let h = fit_hockney(&[(0.0, 10e-6), (1e6, 10e-6 + 1e-3)]).unwrap();
        // 8 nodes, 1 MB: linear bcast 7 * 1010 us, tree 3 * 1010 us, + barrier 3 * 10 us.
        let (lin, tree) = predict_coll(&h, "bcast", 8, 1e6);
        assert!((lin - (7.0 * 1010e-6 + 30e-6)).abs() < 1e-9);
        assert!((tree - (3.0 * 1010e-6 + 30e-6)).abs() < 1e-9);
        // Scatter tree: 3 latencies + 7 MB of data.
        let (_, tree) = predict_coll(&h, "scatter", 8, 1e6);
        assert!((tree - (30e-6 + 7e-3 + 30e-6)).abs() < 1e-9);
        assert_eq!(parse_size_text("64 KiB"), Some(65536));
        assert_eq!(parse_size_text("3 B"), Some(3));
    }
}

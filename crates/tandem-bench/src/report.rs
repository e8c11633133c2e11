//! `tandem bench report`: the quick suite (ping-pong, bidirectional,
//! burst, overhead, all-to-all exchange, Cannon, collectives where the
//! library has them, and the models) over each transport, written as one
//! self-contained HTML page with inline SVG plots.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use super::analyze::{self, Table};
use super::build::{self, BuildError};
use super::core_latency;
use super::kernels::{self, Kernel};
use super::model::{self, ModelResult};
use super::mpi::{self, Family, Library, Transport};
use super::output::{self, Machine};
use super::plot;
use super::progress;
use super::stats::{CI_LEVEL, WIDE_SPREAD};
use super::summary::{self, Figure};
use super::{run_spec, split_set, KernelResult, RunSpec};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Directory for index.html and results.json
    #[arg(long, value_name = "DIR", default_value = "bench-report")]
    pub out: PathBuf,
    /// MPI libraries, comma-separated, the first the reference: more than
    /// one makes every section a comparison. Default: auto, that is Tandem
    /// and every MPI library installed here (Open MPI, MPICH); `--mpi
    /// tandem` measures Tandem alone (also the default with --replicas)
    #[arg(long, value_name = "LIST")]
    pub mpi: Option<String>,
    /// transports=LIST (default: every transport `tandem info` lists), or a
    /// library parameter passed to every run
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Seconds per timed batch of ping-pong, bidir and burst (many short
    /// batches sample a virtual machine's changing speed better than a few
    /// long ones, so the fastest of each size comes from the same state)
    #[arg(long, value_name = "S", default_value_t = 0.015)]
    pub duration: f64,
    /// Repetitions per point
    #[arg(long, value_name = "R", default_value_t = 20)]
    pub repeat: u32,
    /// Ranks of the multi-rank kernels (alltoallv, coll; cannon uses the
    /// largest square not above it)
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub np: u32,
    /// Tandem with replicated ranks beside (1,2) or instead of (2) the
    /// unreplicated runs, every section a comparison of them; a replica
    /// count above 1 adds the time-to-solution section (tts)
    #[arg(long, value_name = "R[,R...]")]
    pub replicas: Option<String>,
}

/// One section of the report.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    pub transport: String,
    pub kernel: String,
    pub title: String,
    pub result: Option<KernelResult>,
    /// Why it is missing, when it is.
    pub skipped: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub command: String,
    pub libraries: Vec<(String, String)>,
    pub transports: Vec<String>,
    pub seconds: f64,
    pub sections: Vec<Section>,
    pub models: Vec<(String, ModelResult)>,
    /// The figures the page opens with.
    pub summary: Vec<Figure>,
    /// Libraries `--mpi auto` looked for and did not find, with how to
    /// install them.
    pub not_found: Vec<String>,
}

/// The transports Tandem has: those `tandem info --json` lists, and those
/// named in the default of its `transports` parameter (shared memory first).
fn tandem_transports() -> Vec<String> {
    let Ok(exe) = std::env::current_exe() else {
        return vec!["tcp".into()];
    };
    let info = std::process::Command::new(exe)
        .args(["info", "--json"])
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .unwrap_or_default();
    let mut list: Vec<String> = info
        .get("parameters")
        .and_then(|p| p.as_array())
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("name").and_then(|n| n.as_str()) == Some("transports"))
        })
        .and_then(|p| p.get("default").and_then(|d| d.as_str()))
        .map(|d| d.split(',').map(|t| t.trim().to_string()).collect())
        .unwrap_or_default();
    for t in info
        .get("transports")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str())
    {
        list.push(t.to_string());
    }
    let mut seen = Vec::new();
    list.retain(|t| {
        !t.is_empty() && !seen.contains(t) && {
            seen.push(t.clone());
            true
        }
    });
    if list.is_empty() {
        vec!["tcp".into()]
    } else {
        list
    }
}

struct Plan {
    kernel: &'static Kernel,
    title: &'static str,
    np: u32,
    /// Run on Tandem alone, once per progress policy (`progress`), instead
    /// of on every library.
    per_policy: bool,
    params: Vec<(&'static str, String)>,
}

/// Tandem's progress policies (the `progress` parameter), in the order the
/// progress-engine section shows them.
const PROGRESS_POLICIES: [&str; 4] = ["poll", "adaptive", "thread", "signal"];

/// How long a launch of another MPI library may take in the report before
/// that library is left out of the kernel (a report kernel's launch takes
/// seconds; an oversubscribed library that spins can take for ever).
const OTHER_LIBRARY_TIMEOUT: Duration = Duration::from_secs(90);

/// The report's kernels; the ping-pong over `pingpong` sizes (see
/// [`model::pingpong_sizes`]); with `replicated`, the time to solution.
fn plans(a: &ReportArgs, pingpong: &[u64], replicated: bool) -> Result<Vec<Plan>, String> {
    let sizes = |s: &str| -> Result<String, String> {
        Ok(kernels::parse_sizes(s)?
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","))
    };
    let d = a.duration.to_string();
    let r = a.repeat.max(1);
    let q = (1..=a.np.max(1))
        .take_while(|q| q * q <= a.np)
        .last()
        .unwrap_or(1);
    let k = |n: &str| kernels::find(n).expect("kernel in the catalogue");
    let mut plans = vec![
        Plan {
            kernel: k("pingpong"),
            title: "Ping-pong (Ben Fredj and Renault): one-way latency and throughput",
            np: 2,
            per_policy: false,
            params: vec![
                (
                    "sizes",
                    pingpong
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                ("duration", d.clone()),
                ("repeat", r.to_string()),
            ],
        },
        Plan {
            kernel: k("bidir"),
            title: "Bidirectional ping-pong (Ben Fredj and Renault)",
            np: 2,
            per_policy: false,
            params: vec![
                ("sizes", sizes("1:4m:4")?),
                ("duration", d.clone()),
                ("repeat", r.to_string()),
            ],
        },
        Plan {
            kernel: k("burst"),
            title: "Burst (Ben Fredj and Renault): time per message when sending as fast as possible",
            np: 2,
            per_policy: false,
            params: vec![
                ("sizes", sizes("1:4m:4")?),
                ("duration", d),
                ("repeat", r.to_string()),
            ],
        },
        Plan {
            kernel: k("overhead"),
            title: "MPI_Isend / MPI_Irecv overhead and application availability (Doerfler and Brightwell)",
            np: 2,
            per_policy: false,
            params: vec![
                ("sizes", sizes("8,1k,16k,64k,256k,1m")?),
                ("repeat", r.clamp(1, 3).to_string()),
            ],
        },
        Plan {
            kernel: k("overhead"),
            title: "Progress engine: how much of a transfer overlaps computation under each of Tandem's progress policies (poll, adaptive, thread, signal)",
            np: 2,
            per_policy: true,
            params: vec![
                ("sizes", sizes("1k,64k,1m")?),
                ("repeat", r.clamp(1, 3).to_string()),
            ],
        },
        Plan {
            kernel: k("alltoallv"),
            title: "All-to-all exchange of Gabriel's VolpexMPI report (Isend/Irecv/Waitall, ~32 KiB per pair)",
            np: a.np.max(1),
            per_policy: false,
            params: vec![("repeat", r.to_string())],
        },
        Plan {
            kernel: k("cannon"),
            title: "Cannon's matrix multiplication, shifts overlapped with computation (Kumar et al.)",
            np: q * q,
            per_policy: false,
            params: vec![
                ("n", (256 / q * q).to_string()),
                ("repeat", r.clamp(1, 3).to_string()),
            ],
        },
        Plan {
            kernel: k("cannon"),
            title: "Cannon's matrix multiplication, shifts after computation (no overlap)",
            np: q * q,
            per_policy: false,
            params: vec![
                ("n", (256 / q * q).to_string()),
                ("repeat", r.clamp(1, 3).to_string()),
                ("overlap", "0".into()),
            ],
        },
        Plan {
            kernel: k("coll"),
            title: "Collectives (Noor, Alhaisoni and Liotta): barrier, start, operation, barrier, end",
            np: a.np.max(2),
            per_policy: false,
            params: vec![
                ("sizes", sizes("1k,64k,1m")?),
                ("repeat", (r * 2).to_string()),
            ],
        },
    ];
    if replicated {
        plans.push(Plan {
            kernel: k("tts"),
            title: "Time to solution, replicated and losing a replica halfway (the VolpexMPI report's experiment)",
            np: a.np.max(1),
            per_policy: false,
            params: vec![
                ("sizes", sizes("32k")?),
                ("steps", "200".into()),
                ("repeat", r.clamp(1, 3).to_string()),
            ],
        });
    }
    Ok(plans)
}

/// The measurement records of `lib`'s runs in `res`.
fn records_of(res: &KernelResult, lib: &str) -> Vec<Value> {
    res.runs
        .iter()
        .filter(|r| r.mpi == lib)
        .flat_map(|r| r.records.iter().cloned())
        .collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn html_table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut h = String::from("<table><thead><tr>");
    for c in header {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr></thead><tbody>");
    for r in rows {
        h.push_str("<tr>");
        for c in r {
            // The page shows noise as bands and one sentence per section,
            // not as a mark on each cell.
            let _ = write!(h, "<td>{}</td>", esc(c.trim_end_matches(" !")));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>\n");
    h
}

fn tables_html(tables: &[(String, &Table)]) -> String {
    let Some((first_lib, first)) = tables.first() else {
        return String::new();
    };
    let mut header: Vec<String> = first.key_names.clone();
    for (li, (lib, _)) in tables.iter().enumerate() {
        for m in &first.metrics {
            header.push(if tables.len() > 1 {
                format!("{lib}: {} ({})", m.name, m.unit)
            } else {
                format!("{} ({})", m.name, m.unit)
            });
        }
        if li > 0 {
            header.push(format!("{lib}/{first_lib} ({})", first.metrics[0].name));
        }
    }
    let rows: Vec<Vec<String>> = first
        .rows
        .iter()
        .map(|r| {
            let mut c: Vec<String> = r.keys.iter().map(|(_, v)| v.clone()).collect();
            for (li, (_, t)) in tables.iter().enumerate() {
                let other = t.rows.iter().find(|o| o.key() == r.key());
                for mi in 0..first.metrics.len() {
                    c.push(output::cell(
                        &other.and_then(|o| o.values.get(mi).copied().flatten()),
                    ));
                }
                if li > 0 {
                    let v = other.and_then(|o| o.values.first().copied().flatten());
                    let b = r.values.first().copied().flatten();
                    c.push(match (v, b) {
                        (Some(v), Some(b)) if b.median != 0.0 => {
                            format!("{:.2}x", v.median / b.median)
                        }
                        _ => "-".into(),
                    });
                }
            }
            c
        })
        .collect();
    html_table(&header, &rows)
}

/// Plot size in the page: two side by side fit its width, and the page
/// shows them at this size, so their text keeps its pixel size.
const PLOT_SIZE: (u32, u32) = (540, 360);

fn svg_of(tables: &[(String, &Table)], metric: usize, title: &str) -> String {
    plot::of_tables(tables, metric, title)
        .and_then(|p| plot::svg(&p, PLOT_SIZE).ok())
        .map(|s| format!("<div class=\"plot\">{s}</div>\n"))
        .unwrap_or_default()
}

/// The collectives as small multiples: one plot per operation, a curve
/// per (library, size), instead of every operation on one plot.
fn coll_svgs(tables: &[(String, &Table)], transport: &str) -> String {
    let Some((_, first)) = tables.first() else {
        return String::new();
    };
    let mut ops: Vec<String> = Vec::new();
    for r in &first.rows {
        if let Some((_, op)) = r.keys.iter().find(|(k, _)| k == "op") {
            if !ops.contains(op) {
                ops.push(op.clone());
            }
        }
    }
    let mut h = String::new();
    for op in ops {
        let per_op: Vec<(String, Table)> = tables
            .iter()
            .map(|(lib, t)| {
                let mut t = (*t).clone();
                t.rows
                    .retain(|r| r.keys.iter().any(|(k, v)| k == "op" && *v == op));
                for r in &mut t.rows {
                    r.group = r
                        .keys
                        .iter()
                        .find(|(k, _)| k == "size")
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default();
                }
                (lib.clone(), t)
            })
            .collect();
        let refs: Vec<(String, &Table)> = per_op.iter().map(|(l, t)| (l.clone(), t)).collect();
        h.push_str(&svg_of(&refs, 1, &format!("{op} ({transport})")));
    }
    h
}

fn pct(e: f64) -> String {
    format!("{:.1}%", e * 100.0)
}

/// The models' fitted parameters as one table: a row per parameter,
/// grouped by model and by the sizes they hold for, with each model's
/// (or each range's) largest and median error.
fn parameters_html(m: &ModelResult) -> String {
    let tables = model::parameter_tables(m);
    if tables.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<table class=\"model\"><thead><tr><th>Model</th><th>Sizes</th><th>Parameter</th>\
         <th>Value</th><th>Largest error</th><th>Median error</th></tr></thead><tbody>\n",
    );
    for t in &tables {
        let whole = t.parts.len() > 1;
        let rows: usize =
            t.parts.iter().map(|p| p.params.len()).sum::<usize>() + usize::from(whole);
        let mut first = true;
        for p in &t.parts {
            let (max, median) = p.errors.unwrap_or((t.max_error, t.median_error));
            for (i, (name, value)) in p.params.iter().enumerate() {
                h.push_str(if t.best {
                    "<tr class=\"best\">"
                } else {
                    "<tr>"
                });
                if first {
                    let _ = write!(
                        h,
                        "<td class=\"m\" rowspan=\"{rows}\"><b>{}</b>{}<div class=\"formula\">{}</div></td>",
                        esc(&t.model),
                        if t.best { " (best)" } else { "" },
                        esc(t.formula)
                    );
                    first = false;
                }
                let n = p.params.len();
                if i == 0 {
                    let _ = write!(h, "<td class=\"s\" rowspan=\"{n}\">{}</td>", esc(&p.sizes));
                }
                let _ = write!(
                    h,
                    "<td>{}</td><td class=\"v\">{}</td>",
                    esc(name),
                    esc(value)
                );
                if i == 0 {
                    let _ = write!(
                        h,
                        "<td class=\"v\" rowspan=\"{n}\">{}</td><td class=\"v\" rowspan=\"{n}\">{}</td>",
                        pct(max),
                        pct(median)
                    );
                }
                h.push_str("</tr>\n");
            }
        }
        if whole {
            let _ = writeln!(
                h,
                "<tr{}><td>all sizes</td><td>whole model</td><td></td>\
                 <td class=\"v\">{}</td><td class=\"v\">{}</td></tr>",
                if t.best { " class=\"best\"" } else { "" },
                pct(t.max_error),
                pct(t.median_error)
            );
        }
    }
    h.push_str("</tbody></table>\n");
    h
}

/// A transport's models: measured and predicted times and the models'
/// errors as plots, their fitted parameters as a table, and the numbers
/// per size and the collectives folded below.
fn model_html(m: &ModelResult) -> String {
    let mut h = String::new();
    if !m.pingpong.is_empty() {
        h.push_str("<div class=\"plots\">\n");
        for (p, size) in [
            (model::plot_of(m), (900, 460)),
            (model::error_plot_of(m), (900, 380)),
        ] {
            if let Ok(s) = plot::svg(&p, size) {
                let _ = writeln!(h, "<div class=\"plot wide\">{s}</div>");
            }
        }
        h.push_str("</div>\n");
    }
    if let Some(w) = model::within_line(m) {
        let _ = writeln!(h, "<p>{}</p>", esc(&sentence(&w)));
    }
    h.push_str(&parameters_html(m));
    if let Some(p) = &m.protocols {
        h.push_str(
            "<details><summary>Where the protocol regimes and memory cells come from</summary>\
             <ul class=\"params\">\n",
        );
        let _ = writeln!(
            h,
            "<li>{}</li>",
            esc(&sentence(&format!("protocol switches: {}", p.source)))
        );
        for b in &p.bandwidth {
            let _ = writeln!(
                h,
                "<li>{}</li>",
                esc(&sentence(&format!("bandwidth limit: {}", b.why)))
            );
        }
        h.push_str("</ul></details>\n");
    }
    let mut notes: Vec<String> = m.notes.clone();
    notes.extend(model::loaded_note(m));
    notes.extend(model::core_line(m));
    for n in &notes {
        let _ = writeln!(h, "<p class=\"params\">{}</p>", esc(&sentence(n)));
    }
    if !m.pingpong.is_empty() {
        h.push_str("<details><summary>Table: measured and predicted per size</summary>\n");
        let (header, rows) = model::prediction_table(m, false);
        h.push_str(&html_table(&header, &rows));
        for l in model::basis_lines(m, false) {
            let _ = writeln!(h, "<p class=\"params\">{}</p>", esc(&sentence(&l)));
        }
        h.push_str("</details>\n");
    }
    if !m.collectives.is_empty() {
        let _ = writeln!(
            h,
            "<details><summary>Table: collectives measured and predicted</summary>\n<p class=\"params\">{}</p>",
            esc(&sentence(model::COLLECTIVES_INTRO))
        );
        let (header, rows) = model::collective_table(m);
        h.push_str(&html_table(&header, &rows));
        h.push_str("</details>\n");
    }
    h
}

/// `s` as a sentence: its first letter upper-case, a full stop at its end.
fn sentence(s: &str) -> String {
    let mut c = s.chars();
    let mut t: String = c
        .next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default();
    if !t.ends_with('.') {
        t.push('.');
    }
    t
}

/// The questions the page answers, in order, with the kernels that answer
/// each.
const QUESTIONS: [(&str, &str, &[&str]); 4] = [
    (
        "latency",
        "Latency and bandwidth",
        &["pingpong", "bidir", "burst"],
    ),
    (
        "overlap",
        "Overlap of communication and computation",
        &["overhead", "cannon"],
    ),
    (
        "collectives",
        "Collectives and all-to-all exchange",
        &["coll", "alltoallv"],
    ),
    ("replication", "Replication", &["tts"]),
];

/// How noisy a section's figures were, in one sentence, or None when every
/// interval is narrow.
fn noise_sentence(refs: &[(String, &Table)]) -> Option<String> {
    let parts: Vec<String> = refs
        .iter()
        .filter_map(|(lib, t)| {
            let all = t
                .rows
                .iter()
                .filter(|r| r.values.first().copied().flatten().is_some());
            let total = all.clone().count();
            let wide = all
                .filter(|r| {
                    r.values
                        .first()
                        .copied()
                        .flatten()
                        .is_some_and(|s| s.is_wide())
                })
                .count();
            (wide > 0).then(|| format!("{lib} {wide} of {total}"))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "Noisy: {} points have an interval wider than {:.0}% of the median (wide bands); \
             rerun with a larger --repeat to tell them apart.",
            parts.join(", "),
            WIDE_SPREAD * 100.0
        )
    })
}

fn section_html(h: &mut String, i: usize, s: &Section, cores: usize) {
    let _ = writeln!(
        h,
        "<h3 id=\"s{i}\">{} &mdash; {}</h3>",
        esc(&s.title),
        esc(&summary::transport_name(&s.transport))
    );
    if let Some(why) = &s.skipped {
        let _ = writeln!(h, "<p class=\"note\">Skipped: {}</p>", esc(why));
        return;
    }
    let Some(res) = &s.result else { return };
    let refs = res.table_refs();
    let first = &refs[0].1;
    if first.rows.len() > 1 {
        h.push_str("<div class=\"plots\">\n");
        if s.kernel == "coll" {
            h.push_str(&coll_svgs(&refs, &s.transport));
        } else {
            let what = match s.kernel.as_str() {
                "pingpong" | "bidir" | "burst" => format!("{} latency", s.kernel),
                k => k.to_string(),
            };
            h.push_str(&svg_of(&refs, 0, &format!("{what} ({})", s.transport)));
            if s.kernel == "overhead" {
                h.push_str(&svg_of(
                    &refs,
                    1,
                    &format!("availability ({})", s.transport),
                ));
            }
            if matches!(s.kernel.as_str(), "pingpong" | "burst" | "bidir") {
                h.push_str(&svg_of(
                    &refs,
                    1,
                    &format!("{} throughput ({})", s.kernel, s.transport),
                ));
            }
        }
        h.push_str("</div>\n");
    }
    if let Some(n) = noise_sentence(&refs) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&n));
    }
    if res.np as usize > cores {
        let _ = writeln!(
            h,
            "<p class=\"note\">{} ranks on {} cores: ranks share cores, so these times include waiting \
             for the scheduler (how a library waits matters as much as how it sends).</p>",
            res.np, cores
        );
    }
    for n in &res.notes {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(n));
    }
    if let Some(n) = core_latency::note(&res.core_probes()) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&n));
    }
    let _ = writeln!(
        h,
        "<details{}><summary>Table: median [{:.0}% confidence interval]</summary>",
        if first.rows.len() > 1 { "" } else { " open" },
        CI_LEVEL * 100.0
    );
    h.push_str(&tables_html(&refs));
    if s.kernel == "tts" {
        let _ = writeln!(h, "<pre>{}</pre>", esc(&super::solutions_text(res)));
    }
    let _ = writeln!(
        h,
        "<p class=\"params\">{} ranks; parameters: <code>{}</code>{}</p>",
        res.np,
        esc(&res
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")),
        res.core_probes_text()
            .map(|c| format!("; {}", esc(&c)))
            .unwrap_or_default()
    );
    h.push_str("</details>\n");
    let counters = output::counters_text(&res.runs);
    if !counters.is_empty() {
        let _ = writeln!(
            h,
            "<details><summary>Progress-engine counters</summary><pre>{}</pre></details>",
            esc(&counters)
        );
    }
}

/// The summary: per transport, one line per figure.
fn summary_html(h: &mut String, r: &Report) {
    h.push_str("<h2 id=\"summary\">Summary</h2>\n");
    let names: Vec<String> = r
        .libraries
        .iter()
        .map(|(l, _)| summary::display_name(l))
        .collect();
    let mut intro = match names.split_first() {
        Some((first, [])) => format!("{first} alone"),
        Some((first, rest)) => format!("{first} against {}", rest.join(" and ")),
        None => "No library ran".into(),
    };
    if !r.not_found.is_empty() {
        let _ = write!(intro, " (not found here: {})", r.not_found.join("; "));
    }
    let _ = writeln!(
        h,
        "<p>{}. Each figure is a median over the repetitions; a ratio is {}'s median over the \
         other library's, and <i>within noise</i> means their {:.0}% confidence intervals overlap.</p>",
        esc(&intro),
        esc(names.first().map_or("the first library", String::as_str)),
        CI_LEVEL * 100.0
    );
    for t in &r.transports {
        let figs: Vec<&Figure> = r.summary.iter().filter(|f| f.transport == *t).collect();
        if figs.is_empty() {
            continue;
        }
        let _ = writeln!(
            h,
            "<h3 class=\"sum\">{}</h3>\n<ul class=\"summary\">",
            esc(&summary::transport_name(t))
        );
        for f in figs {
            let _ = writeln!(
                h,
                "<li title=\"{}\"><a href=\"#q-{}\">{}</a></li>",
                esc(&f.what),
                f.question
                    .replace("bandwidth", "latency")
                    .replace("application", "overlap"),
                esc(&f.verdict)
            );
        }
        h.push_str("</ul>\n");
    }
}

/// The page.
pub fn html(r: &Report) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Tandem benchmark report</title>\n<style>\n\
         body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}\n\
         table{border-collapse:collapse;margin:0.6em 0;font-size:0.9em;display:block;overflow-x:auto}\n\
         th,td{border:1px solid #ccc;padding:0.2em 0.5em;text-align:right;white-space:nowrap}\n\
         th{background:#f0f0f0} td:first-child,th:first-child{text-align:left}\n\
         pre{background:#f7f7f7;padding:0.6em;white-space:pre-wrap;font-size:0.85em}\n\
         code{overflow-wrap:anywhere} .params{font-size:0.9em;color:#555}\n\
         .plots{display:flex;flex-wrap:wrap;gap:8px} .plot{flex:0 1 540px;min-width:0}\n\
         .plot.wide{flex-basis:900px} .plot svg{max-width:100%;height:auto;display:block}\n\
         .note{color:#8a6d3b} h2{border-bottom:1px solid #ddd;margin-top:2em}\n\
         ul.summary{font-size:1.05em;margin:0.3em 0 1em} ul.summary a{color:inherit;text-decoration:none}\n\
         h3.sum{margin-bottom:0.2em} details{margin:0.4em 0} summary{cursor:pointer;color:#245}\n\
         table.model td{text-align:left;vertical-align:top} table.model td.v{text-align:right}\n\
         table.model tr.best td{background:#f3f8ee} .formula{font-size:0.85em;color:#555}\n\
         table.model th{text-align:left} table.model td.m{white-space:normal;min-width:10em;max-width:14em}\n\
         table.model td.s{white-space:normal;max-width:12em}\n\
         </style></head><body>\n<h1>Tandem benchmark report</h1>\n",
    );
    let m = &r.machine;
    let _ = writeln!(
        h,
        "<p>{} &middot; {} cores &middot; {} GiB &middot; {} &middot; {} &middot; Linux {} &middot; {} &middot; took {:.0} s</p>",
        esc(&m.hostname),
        m.cores,
        m.memory_gib,
        esc(&m.cpu),
        esc(&m.os),
        esc(&m.kernel),
        esc(&m.date),
        r.seconds
    );
    summary_html(&mut h, r);
    let _ = writeln!(
        h,
        "<h2>Reading the plots</h2>\n<p>Lines join the medians over the repetitions. The shaded band \
         around a line spans the {:.0}% confidence interval of each median: where two bands overlap, \
         this run cannot tell the two apart, because the machine's noise is as large as the \
         difference. The numbers are in the table folded under each plot. Each run's parameters, \
         library versions and raw records are in results.json beside this page.</p>",
        CI_LEVEL * 100.0
    );
    h.push_str("<details><summary>Libraries, transports and command</summary><ul>\n");
    for (lib, v) in &r.libraries {
        let _ = writeln!(h, "<li><b>{}</b>: {}</li>", esc(lib), esc(v));
    }
    let _ = writeln!(h, "<li>transports: {}</li>", esc(&r.transports.join(", ")));
    let _ = writeln!(h, "<li>command: <code>{}</code></li>", esc(&r.command));
    h.push_str("</ul></details>\n");
    // Sections by question, then by kernel, then by transport.
    let order = |s: &Section| {
        QUESTIONS
            .iter()
            .enumerate()
            .find_map(|(qi, (_, _, ks))| ks.iter().position(|k| *k == s.kernel).map(|ki| (qi, ki)))
            .unwrap_or((QUESTIONS.len(), 0))
    };
    let mut idx: Vec<usize> = (0..r.sections.len()).collect();
    idx.sort_by_key(|&i| {
        let (q, k) = order(&r.sections[i]);
        let t = r
            .transports
            .iter()
            .position(|t| *t == r.sections[i].transport)
            .unwrap_or(0);
        (q, k, t, i)
    });
    h.push_str("<h2>Contents</h2><ul>\n");
    let mut open_q = None;
    for &i in &idx {
        let s = &r.sections[i];
        let (q, _) = order(s);
        if open_q != Some(q) {
            if open_q.is_some() {
                h.push_str("</ul></li>\n");
            }
            let title = QUESTIONS.get(q).map_or("Other", |x| x.1);
            let _ = writeln!(h, "<li>{}<ul>", esc(title));
            open_q = Some(q);
        }
        let _ = writeln!(
            h,
            "<li><a href=\"#s{i}\">{} ({})</a></li>",
            esc(&s.title),
            esc(&summary::transport_name(&s.transport))
        );
    }
    if open_q.is_some() {
        h.push_str("</ul></li>\n");
    }
    if !r.models.is_empty() {
        h.push_str("<li>Models<ul>\n");
        for (t, _) in &r.models {
            let _ = writeln!(
                h,
                "<li><a href=\"#model-{}\">Models ({})</a></li>",
                esc(t),
                esc(&summary::transport_name(t))
            );
        }
        h.push_str("</ul></li>\n");
    }
    h.push_str("</ul>\n");
    let mut open_q = None;
    for &i in &idx {
        let s = &r.sections[i];
        let (q, _) = order(s);
        if open_q != Some(q) {
            let (id, title) = QUESTIONS.get(q).map_or(("other", "Other"), |x| (x.0, x.1));
            let _ = writeln!(h, "<h2 id=\"q-{id}\">{}</h2>", esc(title));
            open_q = Some(q);
        }
        section_html(&mut h, i, s, r.machine.cores);
    }
    if !r.models.is_empty() {
        h.push_str(
            "<h2 id=\"q-models\">Models</h2>\n<p>Hockney and LogGP fitted to each size's fastest \
             ping-pong repetition. Per transport: the measured times with each model's prediction, \
             each model's error per size, and a table of the fitted parameters with the largest \
             and median relative error over the sizes; the numbers per size and the collectives \
             the models predict are folded below.</p>\n",
        );
    }
    for (t, m) in &r.models {
        let _ = writeln!(
            h,
            "<h3 id=\"model-{}\">Models &mdash; {}</h3>",
            esc(t),
            esc(&summary::transport_name(t))
        );
        h.push_str(&model_html(m));
    }
    h.push_str("</body></html>\n");
    h
}

pub fn command(a: &ReportArgs) -> Result<(), String> {
    let started = Instant::now();
    // With --replicas the question is Tandem's with itself.
    let list = a.mpi.clone().unwrap_or_else(|| {
        if a.replicas.is_some() {
            "tandem".into()
        } else {
            "auto".into()
        }
    });
    let libs: Vec<Library> = mpi::resolve_list(&list)?;
    let not_found: Vec<String> = if list.split(',').any(|w| w.trim() == "auto") {
        ["openmpi", "mpich"]
            .into_iter()
            .filter(|n| !libs.iter().any(|l| l.name == *n))
            .filter_map(|n| mpi::resolve(n).err())
            .collect()
    } else {
        Vec::new()
    };
    if !(a.duration.is_finite() && a.duration > 0.0) {
        return Err("--duration: expected a positive number of seconds".into());
    }
    let mut transports = tandem_transports();
    let mut rest = Vec::new();
    for w in &a.set {
        match w.split_once('=') {
            Some(("transports", v)) => {
                transports = v
                    .split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect();
            }
            _ => rest.push(w.clone()),
        }
    }
    if transports.is_empty() {
        return Err("--set transports=...: no transport named".into());
    }
    let replicas = a
        .replicas
        .as_deref()
        .map(super::parse_replicas)
        .transpose()?;
    let replicated = replicas.as_ref().is_some_and(|r| r.iter().any(|&r| r > 1));
    let mut sections = Vec::new();
    let mut models = Vec::new();
    let mut versions: Vec<(String, String)> = Vec::new();
    // The launches to come, for the progress bar.
    let mut launches = 0u64;
    for p in plans(a, &[1], replicated)? {
        let run_libs = match &replicas {
            Some(r) => super::with_replicas(p.kernel, &libs, r).map_or(0, |(l, _)| l.len()),
            None => libs.len(),
        };
        let mut params: BTreeMap<String, String> = p
            .params
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let nps = super::node_counts(p.kernel, p.np, &mut params)?
            .len()
            .max(1);
        let repeat: u32 = params
            .get("repeat")
            .and_then(|r| r.parse().ok())
            .unwrap_or(1);
        let rounds = report_rounds(p.kernel, repeat, run_libs).min(repeat).max(1);
        launches += u64::from(rounds) * (run_libs * nps) as u64;
    }
    progress::start("report", launches * transports.len() as u64);
    let measured = measure(
        a,
        &libs,
        &transports,
        &rest,
        replicas.as_ref(),
        replicated,
        &mut sections,
        &mut models,
        &mut versions,
    );
    progress::finish();
    measured?;
    let lib_names: Vec<String> = libs.iter().map(|l| l.name.clone()).collect();
    let mut figures = Vec::new();
    for t in &transports {
        let find = |kernel: &str| {
            sections
                .iter()
                .filter(|s| s.transport == *t && s.kernel == kernel)
                .filter_map(|s| s.result.as_ref())
                .find(|r| r.params.get("overlap").map(String::as_str) != Some("0"))
        };
        figures.extend(summary::figures(t, &lib_names, find));
    }
    let report = Report {
        machine: Machine::describe(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        libraries: versions,
        transports,
        seconds: started.elapsed().as_secs_f64(),
        sections,
        models,
        summary: figures,
        not_found,
    };
    let index = a.out.join("index.html");
    output::write_file(&index, html(&report).as_bytes())?;
    let json =
        serde_json::to_string_pretty(&report).map_err(|e| format!("cannot encode JSON: {e}"))?;
    output::write_file(&a.out.join("results.json"), json.as_bytes())?;
    for f in &report.summary {
        println!("{}", f.verdict);
    }
    println!(
        "wrote {} and results.json ({} sections, {:.0} s)",
        index.display(),
        report.sections.len(),
        report.seconds
    );
    Ok(())
}

/// Launches per library of a report section: a time to solution once per
/// repetition, a comparison two (interleaved), else one.
fn report_rounds(kernel: &Kernel, repeat: u32, libs: usize) -> u32 {
    if kernel.time_to_solution {
        repeat
    } else if libs > 1 {
        2
    } else {
        1
    }
}

/// Runs the report's kernels over each transport, filling its sections,
/// its models and the libraries' versions.
#[allow(clippy::too_many_arguments)]
fn measure(
    a: &ReportArgs,
    libs: &[Library],
    transports: &[String],
    rest: &[String],
    replicas: Option<&Vec<u32>>,
    replicated: bool,
    sections: &mut Vec<Section>,
    models: &mut Vec<(String, ModelResult)>,
    versions: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for t in transports {
        let transport = Transport::parse(t);
        let mut tables: BTreeMap<&str, Table> = BTreeMap::new();
        let mut pingpong_probes: Vec<f64> = Vec::new();
        // The ping-pong run and its first library's records, for a second
        // pass (see below).
        let mut pingpong_run: Option<(RunSpec, Vec<Value>)> = None;
        // The ping-pong's sizes come from the model's regimes and cells.
        let pingpong = kernels::find("pingpong").expect("kernel in the catalogue");
        let lib_set: Vec<(String, String)> = split_set(pingpong, rest, libs, &mut BTreeMap::new())?
            .into_iter()
            .filter(|(l, _, _)| l.is_empty() || *l == libs[0].name)
            .map(|(_, k, v)| (k, v))
            .collect();
        let planned =
            model::protocols_of(libs[0].family, &lib_set, &transport, model::PINGPONG_MAX)?;
        let pingpong_sizes = model::pingpong_sizes(planned.as_ref(), model::PINGPONG_MAX);
        let mut largest = model::PINGPONG_MAX;
        for p in plans(a, &pingpong_sizes, replicated)? {
            let mut params: BTreeMap<String, String> = p
                .params
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            let mut rest = rest.to_vec();
            let (run_libs, notes) = match replicas {
                _ if p.per_policy => {
                    let tandem = libs
                        .iter()
                        .find(|l| l.family == Family::Tandem && l.name == "tandem");
                    let Some(tandem) = tandem.filter(|_| !replicated) else {
                        continue;
                    };
                    let mut variants = Vec::new();
                    for policy in PROGRESS_POLICIES {
                        let name = format!("tandem-{policy}");
                        rest.push(format!("{name}:progress={policy}"));
                        variants.push(Library {
                            name,
                            ..tandem.clone()
                        });
                    }
                    (variants, Vec::new())
                }
                Some(r) => match super::with_replicas(p.kernel, libs, r) {
                    Ok(x) => x,
                    Err(why) => {
                        progress::note(&format!(
                            "tandem bench report: skipping {}: {why}",
                            p.kernel.name
                        ));
                        sections.push(Section {
                            transport: t.clone(),
                            kernel: p.kernel.name.to_string(),
                            title: p.title.to_string(),
                            result: None,
                            skipped: Some(why),
                        });
                        continue;
                    }
                },
                None => (libs.to_vec(), Vec::new()),
            };
            let lib_set = split_set(p.kernel, &rest, &run_libs, &mut params)?;
            let repeat: u32 = params
                .get("repeat")
                .and_then(|r| r.parse().ok())
                .unwrap_or(1);
            let spec = RunSpec {
                kernel: p.kernel,
                libs: run_libs.clone(),
                np: p.np,
                np_list: super::node_counts(p.kernel, p.np, &mut params.clone())?,
                params,
                lib_set,
                transport: transport.clone(),
                rounds: report_rounds(p.kernel, repeat, run_libs.len()),
                timeout: Duration::from_secs(600),
                progress: true,
                placement: None,
                separate_launches: false,
                notes,
                other_library_timeout: Some(OTHER_LIBRARY_TIMEOUT),
            };
            let skipped = run_libs
                .iter()
                .find_map(|l| match build::build(p.kernel, l) {
                    Err(BuildError::Missing(message)) => Some(message),
                    _ => None,
                });
            let section = |result, skipped| Section {
                transport: t.clone(),
                kernel: p.kernel.name.to_string(),
                title: p.title.to_string(),
                result,
                skipped,
            };
            if let Some(why) = skipped {
                progress::note(&format!(
                    "tandem bench report: {why}; skipping {}",
                    p.kernel.name
                ));
                sections.push(section(None, Some(why)));
                continue;
            }
            match run_spec(&spec) {
                Ok(res) => {
                    // The policies are Tandem's own, not libraries of the run.
                    for v in res.versions().into_iter().filter(|_| !p.per_policy) {
                        if !versions.iter().any(|(l, _)| *l == v.0) {
                            versions.push(v);
                        }
                    }
                    if p.kernel.name == "pingpong" {
                        largest = model::largest_size(&spec.params);
                        pingpong_probes = res.core_probes();
                        pingpong_run = Some((spec.clone(), records_of(&res, &libs[0].name)));
                    }
                    tables
                        .entry(p.kernel.name)
                        .or_insert_with(|| res.tables[0].1.clone());
                    sections.push(section(Some(res), None));
                }
                Err(e) => {
                    progress::note(&format!(
                        "tandem bench report: {} on {t}: {e}",
                        p.kernel.name
                    ));
                    sections.push(section(None, Some(e)));
                }
            }
        }
        if tables.contains_key("pingpong") {
            // Its buffers are as large as its largest size.
            let protocols = model::protocols_of(libs[0].family, &lib_set, &transport, largest)?;
            let fit = |pingpong: Option<&Table>| {
                model::fit(
                    &libs[0].name,
                    protocols.as_ref(),
                    pingpong,
                    tables.get("burst"),
                    tables.get("overhead"),
                    tables.get("coll"),
                )
            };
            let mut m = fit(tables.get("pingpong"));
            // A virtual machine whose host moved its CPUs during most of the
            // ping-pong leaves sizes without a batch in the fast state; the
            // model, fitted to each size's fastest batch, then misses them.
            // Such a run is measured once more and the two passes' batches
            // pooled, in the open (its own section, a note in the model).
            let missed = m.best_error().is_some_and(|(e, _)| e > model::TARGET_ERROR);
            if let (true, false, Some((spec, first))) =
                (missed, m.unsteady_sizes.is_empty(), pingpong_run.take())
            {
                let unsteady = m.unsteady_sizes.len();
                progress::note(&format!(
                    "tandem bench report: the {t} ping-pong was unsteady at {unsteady} sizes \
                     and the model missed; measuring it once more"
                ));
                progress::more(super::planned_launches(&spec));
                match run_spec(&spec) {
                    Ok(res) => {
                        pingpong_probes.extend(res.core_probes());
                        let mut records = first;
                        analyze::pool(&mut records, records_of(&res, &libs[0].name));
                        let pooled = analyze::analyse("pingpong", &records, &spec.params);
                        m = fit(Some(&pooled));
                        m.notes.push(format!(
                            "the ping-pong was measured twice and the passes' batches pooled: \
                             the first was unsteady (median more than {:.0}% above the \
                             fastest) at {unsteady} sizes and the model missed",
                            model::TARGET_ERROR * 100.0
                        ));
                        sections.push(Section {
                            transport: t.clone(),
                            kernel: "pingpong".into(),
                            title: "Ping-pong, second pass for the model (the first was unsteady)"
                                .into(),
                            result: Some(res),
                            skipped: None,
                        });
                    }
                    Err(e) => {
                        progress::note(&format!("tandem bench report: pingpong again on {t}: {e}"))
                    }
                }
            }
            m.core_probes = std::mem::take(&mut pingpong_probes);
            models.push((t.clone(), m));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::Row;
    use crate::stats::Summary;

    /// A ping-pong table on two lines: 2 us + 1 GB/s below 64 KiB, 10 us
    /// + 2 GB/s from it (times in microseconds, as the kernel's).
    fn pingpong() -> Table {
        let row = |m: f64| {
            let us = if m < 65536.0 {
                2.0 + m / 1000.0
            } else {
                10.0 + m / 2000.0
            };
            Row {
                keys: vec![],
                group: String::new(),
                x: m,
                values: vec![Some(Summary {
                    n: 5,
                    median: us * 1.02,
                    lo: us,
                    hi: us * 1.05,
                    min: us,
                    max: us * 1.1,
                    mean: us * 1.03,
                })],
            }
        };
        Table {
            kernel: "pingpong".into(),
            key_names: vec![],
            x_label: String::new(),
            x_log: true,
            metrics: vec![],
            rows: (0..=22).map(|k| row(f64::from(1u32 << k))).collect(),
        }
    }

    #[test]
    fn models_as_plots_and_a_parameter_table() {
        let protocols = model::Protocols {
            limits: vec![65536.0],
            names: vec!["eager".into(), "rendezvous".into()],
            source: "eager_limit".into(),
            bandwidth: vec![],
            copy_help: None,
        };
        let m = model::fit(
            "tandem",
            Some(&protocols),
            Some(&pingpong()),
            None,
            None,
            None,
        );
        let h = model_html(&m);
        assert_eq!(h.matches("<svg").count(), 2, "{h}");
        assert!(!h.contains("<pre>"));
        let table = &h[h.find("<table class=\"model\">").unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        for word in [
            "<b>Hockney</b>",
            "<b>Hockney per protocol</b> (best)",
            "eager: 1 B \u{2013} ",
            "rendezvous: ",
            "latency \u{3b1}",
            "bandwidth 1/\u{3b2}",
            "whole model",
        ] {
            assert!(table.contains(word), "no {word}: {table}");
        }
        // Every row fills the six columns, counting the cells that rows
        // above span into it.
        let mut spans: Vec<usize> = Vec::new();
        for row in table.split("<tr").skip(2) {
            let mut cols = spans.len();
            spans = spans
                .into_iter()
                .map(|s| s - 1)
                .filter(|&s| s > 0)
                .collect();
            for cell in row.split("<td").skip(1) {
                cols += 1;
                let span = cell
                    .split_once("rowspan=\"")
                    .filter(|(a, _)| !a.contains('>'))
                    .and_then(|(_, b)| b.split('"').next()?.parse::<usize>().ok())
                    .unwrap_or(1);
                if span > 1 {
                    spans.push(span - 1);
                }
            }
            assert_eq!(cols, 6, "{row}\n{table}");
        }
        assert!(spans.is_empty(), "{spans:?}");
    }
}

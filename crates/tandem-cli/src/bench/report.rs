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
use super::mpi::{self, Library, Transport};
use super::output::{self, Machine};
use super::plot;
use super::stats::{CI_LEVEL, WIDE_SPREAD};
use super::{run_spec, split_set, KernelResult, RunSpec};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Directory for index.html and results.json
    #[arg(long, value_name = "DIR", default_value = "bench-report")]
    pub out: PathBuf,
    /// MPI libraries (comma-separated; more than one makes every section a comparison)
    #[arg(long, default_value = "tandem")]
    pub mpi: String,
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
    params: Vec<(&'static str, String)>,
}

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
            params: vec![
                ("sizes", sizes("8,1k,16k,64k,256k,1m")?),
                ("repeat", r.clamp(1, 3).to_string()),
            ],
        },
        Plan {
            kernel: k("alltoallv"),
            title: "All-to-all exchange of Gabriel's VolpexMPI report (Isend/Irecv/Waitall, ~32 KiB per pair)",
            np: a.np.max(1),
            params: vec![("repeat", r.to_string())],
        },
        Plan {
            kernel: k("cannon"),
            title: "Cannon's matrix multiplication, shifts overlapped with computation (Kumar et al.)",
            np: q * q,
            params: vec![
                ("n", (256 / q * q).to_string()),
                ("repeat", r.clamp(1, 3).to_string()),
            ],
        },
        Plan {
            kernel: k("cannon"),
            title: "Cannon's matrix multiplication, shifts after computation (no overlap)",
            np: q * q,
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
            let class = if c.ends_with(" !") {
                " class=\"wide\""
            } else {
                ""
            };
            let _ = write!(h, "<td{class}>{}</td>", esc(c));
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

fn svg_of(tables: &[(String, &Table)], metric: usize, title: &str) -> String {
    plot::of_tables(tables, metric, title)
        .and_then(|p| plot::svg(&p, (760, 440)).ok())
        .map(|s| format!("<div class=\"plot\">{s}</div>\n"))
        .unwrap_or_default()
}

fn model_html(m: &ModelResult) -> String {
    let mut h = String::new();
    let _ = writeln!(h, "<pre>{}</pre>", esc(&model::text(m)));
    if !m.pingpong.is_empty() {
        if let Ok(s) = plot::svg(&model::plot_of(m), (760, 440)) {
            let _ = writeln!(h, "<div class=\"plot\">{s}</div>");
        }
    }
    h
}

/// The page.
pub fn html(r: &Report) -> String {
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>Tandem benchmark report</title>\n<style>\n\
         body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n\
         table{border-collapse:collapse;margin:0.6em 0;font-size:0.9em}\n\
         th,td{border:1px solid #ccc;padding:0.2em 0.5em;text-align:right}\n\
         th{background:#f0f0f0} td:first-child,th:first-child{text-align:left}\n\
         td.wide{background:#fff3cd}\n pre{background:#f7f7f7;padding:0.6em;overflow-x:auto;font-size:0.85em}\n\
         .plot svg{max-width:100%;height:auto} .note{color:#8a6d3b}\n h2{border-bottom:1px solid #ddd;margin-top:2em}\n\
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
    h.push_str("<ul>\n");
    for (lib, v) in &r.libraries {
        let _ = writeln!(h, "<li><b>{}</b>: {}</li>", esc(lib), esc(v));
    }
    let _ = writeln!(h, "<li>transports: {}</li>", esc(&r.transports.join(", ")));
    let _ = writeln!(h, "<li>command: <code>{}</code></li>", esc(&r.command));
    h.push_str("</ul>\n");
    let _ = writeln!(
        h,
        "<p>Every figure is the median over the repetitions with its {:.0}% confidence interval in brackets; \
         cells shaded yellow have an interval wider than {:.0}% of the median (a noisy machine: rerun with a \
         larger --duration or --repeat). Each run's parameters, library versions and raw records are in \
         results.json beside this page.</p>",
        CI_LEVEL * 100.0,
        WIDE_SPREAD * 100.0
    );
    h.push_str("<h2>Contents</h2><ul>\n");
    for (i, s) in r.sections.iter().enumerate() {
        let _ = writeln!(
            h,
            "<li><a href=\"#s{i}\">{} ({})</a></li>",
            esc(&s.title),
            esc(&s.transport)
        );
    }
    for (t, _) in &r.models {
        let _ = writeln!(
            h,
            "<li><a href=\"#model-{0}\">Models ({0})</a></li>",
            esc(t)
        );
    }
    h.push_str("</ul>\n");
    for (i, s) in r.sections.iter().enumerate() {
        let _ = writeln!(
            h,
            "<h2 id=\"s{i}\">{} &mdash; {}</h2>",
            esc(&s.title),
            esc(&s.transport)
        );
        if let Some(why) = &s.skipped {
            let _ = writeln!(h, "<p class=\"note\">Skipped: {}</p>", esc(why));
            continue;
        }
        let Some(res) = &s.result else { continue };
        let _ = writeln!(
            h,
            "<p>{} ranks; parameters: <code>{}</code>{}</p>",
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
        if let Some(n) = core_latency::note(&res.core_probes()) {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&n));
        }
        for n in &res.notes {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(n));
        }
        let refs = res.table_refs();
        let first = &refs[0].1;
        if !first.rows.is_empty() && first.rows.len() > 1 {
            h.push_str(&svg_of(
                &refs,
                0,
                &format!("{} ({})", s.kernel, s.transport),
            ));
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
        if res.np as usize > r.machine.cores {
            let _ = writeln!(
                h,
                "<p class=\"note\">{} ranks on {} cores: ranks share cores, so these times include waiting \
                 for the scheduler (how a library waits matters as much as how it sends).</p>",
                res.np, r.machine.cores
            );
        }
        h.push_str(&tables_html(&refs));
        if s.kernel == "tts" {
            let _ = writeln!(h, "<pre>{}</pre>", esc(&super::solutions_text(res)));
        }
        let counters = output::counters_text(&res.runs);
        if !counters.is_empty() {
            let _ = writeln!(h, "<pre>{}</pre>", esc(&counters));
        }
        for (lib, t) in &refs {
            let w = output::spread_warnings(t);
            if !w.is_empty() {
                let _ = writeln!(h, "<p class=\"note\">{}: {}</p>", esc(lib), esc(&w));
            }
        }
    }
    for (t, m) in &r.models {
        let _ = writeln!(h, "<h2 id=\"model-{0}\">Models &mdash; {0}</h2>", esc(t));
        h.push_str(&model_html(m));
    }
    h.push_str("</body></html>\n");
    h
}

pub fn command(a: &ReportArgs) -> Result<(), String> {
    let started = Instant::now();
    let libs: Vec<Library> = a
        .mpi
        .split(',')
        .map(|s| mpi::resolve(s.trim()))
        .collect::<Result<_, _>>()?;
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
    for t in &transports {
        let transport = Transport::parse(t);
        let mut tables: BTreeMap<&str, Table> = BTreeMap::new();
        let mut pingpong_probes: Vec<f64> = Vec::new();
        // The ping-pong run and its first library's records, for a second
        // pass (see below).
        let mut pingpong_run: Option<(RunSpec, Vec<Value>)> = None;
        // The ping-pong's sizes come from the model's regimes and cells.
        let pingpong = kernels::find("pingpong").expect("kernel in the catalogue");
        let lib_set: Vec<(String, String)> =
            split_set(pingpong, &rest, &libs, &mut BTreeMap::new())?
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
            let (run_libs, mut notes) = match &replicas {
                Some(r) => match super::with_replicas(p.kernel, &libs, r) {
                    Ok(x) => x,
                    Err(why) => {
                        eprintln!("tandem bench report: skipping {}: {why}", p.kernel.name);
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
                None => (libs.clone(), Vec::new()),
            };
            notes.extend(super::replicated_transport_note(&run_libs, &transport));
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
                rounds: if p.kernel.time_to_solution {
                    repeat
                } else if run_libs.len() > 1 {
                    2
                } else {
                    1
                },
                timeout: Duration::from_secs(600),
                progress: true,
                placement: None,
                separate_launches: false,
                notes,
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
                eprintln!("tandem bench report: {why}; skipping {}", p.kernel.name);
                sections.push(section(None, Some(why)));
                continue;
            }
            match run_spec(&spec) {
                Ok(res) => {
                    for v in res.versions() {
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
                    eprintln!("tandem bench report: {} on {t}: {e}", p.kernel.name);
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
                eprintln!(
                    "tandem bench report: the {t} ping-pong was unsteady at {unsteady} sizes \
                     and the model missed; measuring it once more"
                );
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
                    Err(e) => eprintln!("tandem bench report: pingpong again on {t}: {e}"),
                }
            }
            m.core_probes = std::mem::take(&mut pingpong_probes);
            models.push((t.clone(), m));
        }
    }
    let report = Report {
        machine: Machine::describe(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        libraries: versions,
        transports,
        seconds: started.elapsed().as_secs_f64(),
        sections,
        models,
    };
    let index = a.out.join("index.html");
    output::write_file(&index, html(&report).as_bytes())?;
    let json =
        serde_json::to_string_pretty(&report).map_err(|e| format!("cannot encode JSON: {e}"))?;
    output::write_file(&a.out.join("results.json"), json.as_bytes())?;
    for (t, m) in &report.models {
        let small = m.pingpong.first().map(|p| {
            format!(
                "{} us at {}",
                output::num(p.measured * 1e6),
                kernels::size_text(p.size as u64)
            )
        });
        let large = m.pingpong.last().map(|p| {
            format!(
                "{} MB/s at {}",
                output::num(p.size / p.measured / 1e6),
                kernels::size_text(p.size as u64)
            )
        });
        println!(
            "[{t}] ping-pong (fastest repetitions) {}, {}; models: {}",
            small.unwrap_or_default(),
            large.unwrap_or_default(),
            m.best_error()
                .map(|(e, which)| format!("{which} within {:.1}% at every size", e * 100.0))
                .unwrap_or_else(|| "none".into())
        );
    }
    println!(
        "wrote {} and results.json ({} sections, {:.0} s)",
        index.display(),
        report.sections.len(),
        report.seconds
    );
    Ok(())
}

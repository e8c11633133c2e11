//! Tables on the terminal, JSON and CSV files, and the description of the
//! machine every output records.

use std::fmt::Write as _;

use serde::Serialize;

use super::analyze::Table;
use super::stats::{Summary, CI_LEVEL, WIDE_SPREAD};

/// The machine the numbers come from.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub hostname: String,
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub os: String,
    pub kernel: String,
    pub tandem_version: String,
    /// UTC, ISO 8601.
    pub date: String,
    /// The 1-minute load average when the record was made (the run's own
    /// ranks included).
    pub load_average: Option<f64>,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch.
pub fn iso_date(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Civil from days (H. Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Machine {
    pub fn describe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("unknown")
            .trim()
            .to_string();
        let memory_kib: f64 = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .unwrap_or("unknown")
            .trim_matches('"')
            .to_string();
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Machine {
            hostname: read("/proc/sys/kernel/hostname").trim().to_string(),
            cpu,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_gib: (memory_kib / 1048576.0 * 10.0).round() / 10.0,
            os,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            tandem_version: env!("CARGO_PKG_VERSION").to_string(),
            date: iso_date(secs),
            load_average: read("/proc/loadavg")
                .split_whitespace()
                .next()
                .and_then(|l| l.parse().ok()),
        }
    }

    /// Whether more was running than the machine has cores: timings then
    /// include other programs' interference.
    pub fn loaded(&self) -> bool {
        self.load_average.is_some_and(|l| l > self.cores as f64)
    }

    pub fn one_line(&self) -> String {
        let mut s = format!(
            "{} ({} cores, {:.0} GiB, {}), {}, Linux {}",
            self.hostname, self.cores, self.memory_gib, self.cpu, self.os, self.kernel
        );
        if let Some(l) = self.load_average {
            s.push_str(&format!(", load average {l:.2}"));
        }
        s
    }
}

/// A number with about 4 significant digits.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 10000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else if a >= 1.0 {
        format!("{x:.3}")
    } else if a >= 0.01 {
        format!("{x:.4}")
    } else {
        format!("{x:.3e}")
    }
}

/// "median [lo, hi]" for a table cell; "!" marks a wide spread.
pub fn cell(s: &Option<Summary>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 => num(s.median),
        Some(s) => format!(
            "{} [{}, {}]{}",
            num(s.median),
            num(s.lo),
            num(s.hi),
            if s.is_wide() { " !" } else { "" }
        ),
    }
}

/// Lays out rows of cells in aligned columns (the first `left` columns
/// left-aligned, the others right-aligned).
pub fn layout(header: &[String], rows: &[Vec<String>], left: usize) -> String {
    let cols = header.len();
    let mut width = vec![0usize; cols];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, r: &[String]| {
        let mut parts = Vec::new();
        for (i, c) in r.iter().enumerate().take(cols) {
            let pad = width[i].saturating_sub(c.chars().count());
            if i < left {
                parts.push(format!("{c}{}", " ".repeat(pad)));
            } else {
                parts.push(format!("{}{c}", " ".repeat(pad)));
            }
        }
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, header);
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for r in rows {
        line(&mut out, r);
    }
    out
}

/// The table as text, with a note on the interval and on wide spreads.
pub fn text_table(t: &Table) -> String {
    let mut header: Vec<String> = t.key_names.clone();
    header.extend(t.metrics.iter().map(|m| format!("{} ({})", m.name, m.unit)));
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            let mut c: Vec<String> = r.keys.iter().map(|(_, v)| v.clone()).collect();
            c.extend(r.values.iter().map(cell));
            c
        })
        .collect();
    let mut out = layout(&header, &rows, t.key_names.len());
    let _ = writeln!(
        out,
        "median [{:.0}% confidence interval of the median] over the repetitions",
        CI_LEVEL * 100.0
    );
    out.push_str(&spread_warnings(t));
    out
}

/// Warnings for rows whose primary metric has a wide interval.
pub fn spread_warnings(t: &Table) -> String {
    let wide: Vec<String> = t
        .rows
        .iter()
        .filter(|r| {
            r.values
                .first()
                .and_then(|v| v.as_ref())
                .is_some_and(|s| s.is_wide())
        })
        .map(|r| {
            r.keys
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    if wide.is_empty() {
        String::new()
    } else {
        format!(
            "warning: wide spread (interval over {:.0}% of the median, marked !) at {}: the machine is noisy; \
             use a larger --repeat (or a longer --duration where the kernel takes one)\n",
            WIDE_SPREAD * 100.0,
            wide.join(", ")
        )
    }
}

/// Progress-engine counters a library reported (records of type
/// "counters", one per rank and launch): every numeric field summed over
/// ranks and launches, per library. Empty when there are none.
pub fn counters_text(runs: &[super::run::RunOutput]) -> String {
    let mut per_lib: Vec<(String, std::collections::BTreeMap<String, f64>, usize)> = Vec::new();
    for r in runs {
        for rec in &r.records {
            if rec.get("type").and_then(|t| t.as_str()) != Some("counters") {
                continue;
            }
            let Some(obj) = rec.as_object() else { continue };
            let i = match per_lib.iter().position(|(l, _, _)| *l == r.mpi) {
                Some(i) => i,
                None => {
                    per_lib.push((r.mpi.clone(), Default::default(), 0));
                    per_lib.len() - 1
                }
            };
            per_lib[i].2 += 1;
            for (k, v) in obj {
                if let (Some(x), false) = (v.as_f64(), k == "rank") {
                    *per_lib[i].1.entry(k.clone()).or_insert(0.0) += x;
                }
            }
        }
    }
    let mut out = String::new();
    for (lib, sums, n) in per_lib {
        let _ = writeln!(
            out,
            "{lib}: progress counters, summed over {n} rank reports:"
        );
        for (k, v) in sums {
            let _ = writeln!(out, "    {k:32} {}", num(v));
        }
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// CSV: one line per row and library, every metric's median, interval,
/// minimum and count.
pub fn csv(tables: &[(String, &Table)]) -> String {
    let mut out = String::new();
    let Some((_, first)) = tables.first() else {
        return out;
    };
    let mut header = vec!["mpi".to_string()];
    header.extend(first.key_names.iter().cloned());
    for m in &first.metrics {
        let base = format!("{} ({})", m.name, m.unit);
        for part in ["median", "ci_lo", "ci_hi", "min", "n"] {
            header.push(format!("{base} {part}"));
        }
    }
    let _ = writeln!(
        out,
        "{}",
        header
            .iter()
            .map(|h| csv_field(h))
            .collect::<Vec<_>>()
            .join(",")
    );
    for (lib, t) in tables {
        for r in &t.rows {
            let mut f = vec![csv_field(lib)];
            f.extend(r.keys.iter().map(|(_, v)| csv_field(v)));
            for v in &r.values {
                match v {
                    Some(s) => {
                        f.extend([s.median, s.lo, s.hi, s.min].map(|x| format!("{x}")));
                        f.push(s.n.to_string());
                    }
                    None => f.extend(std::iter::repeat_n(String::new(), 5)),
                }
            }
            let _ = writeln!(out, "{}", f.join(","));
        }
    }
    out
}

/// Writes `text` to `path`, with a clear error.
pub fn write_file(path: &std::path::Path, text: &[u8]) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(iso_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_date(951782400), "2000-02-29T00:00:00Z");
        assert_eq!(iso_date(1700000000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn numbers_and_cells() {
        assert_eq!(num(7.7234), "7.723");
        assert_eq!(num(1234.56), "1234.6");
        assert_eq!(num(0.0), "0");
        assert_eq!(cell(&None), "-");
        let s = Summary::of(&[1.0, 2.0, 3.0]);
        assert_eq!(cell(&s), "2.000 [1.000, 3.000] !");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }

    #[test]
    fn counters_are_summed_over_ranks() {
        let run = |mpi: &str, records: Vec<serde_json::Value>| super::super::run::RunOutput {
            mpi: mpi.into(),
            library_version: String::new(),
            mpi_version: String::new(),
            np: 2,
            transport: "tcp".into(),
            command: String::new(),
            kernel_args: vec![],
            seconds: 0.0,
            records,
            core_round_trip_ns: vec![],
            shared_with: None,
            launcher_notes: vec![],
        };
        let runs = vec![run(
            "tandem",
            vec![
                serde_json::json!({"type":"counters","rank":0,"progress_calls":10,"send_ready":4}),
                serde_json::json!({"type":"counters","rank":1,"progress_calls":5,"send_ready":1}),
                serde_json::json!({"type":"a2av","t":1.0}),
            ],
        )];
        let t = counters_text(&runs);
        assert!(t.contains("2 rank reports"), "{t}");
        assert!(t.contains("progress_calls") && t.contains("15"), "{t}");
        assert!(!t.contains("rank  "), "{t}");
        assert!(counters_text(&[run("x", vec![])]).is_empty());
    }

    #[test]
    fn aligned_layout() {
        let t = layout(
            &["size".into(), "x".into()],
            &[
                vec!["8 B".into(), "1".into()],
                vec!["64 KiB".into(), "100".into()],
            ],
            1,
        );
        assert_eq!(t, "size      x\n------  ---\n8 B       1\n64 KiB  100\n");
    }
}

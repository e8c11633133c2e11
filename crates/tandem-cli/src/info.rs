//! `tandem info`: what this build of Tandem is and how it is configured.

use tandem::params::{self, Settings, Source, REGISTRY};

use crate::install_layout;
use crate::parameters;

const MPI_STANDARD: &str = "MPI 5.0 (standard ABI)";
const MPI_VERSION: (u32, u32) = (5, 0);
const TRANSPORTS: &[&str] = &["shm", "tcp"];

/// One registered parameter as `tandem info` shows it.
struct ParamRow {
    name: &'static str,
    type_name: String,
    default: &'static str,
    value: String,
    source: &'static str,
    env: String,
    help: &'static str,
}

/// Prints the report; returns 1 if the environment holds invalid parameters
/// (they are listed on stderr and shown at their defaults).
pub fn run(json: bool) -> i32 {
    let (settings, problems) = settings_with_problems();
    for p in &problems {
        eprintln!("tandem: warning: {p}");
    }
    let rows: Vec<ParamRow> = REGISTRY
        .iter()
        .map(|p| {
            let (value, source) = settings.describe(p.name);
            ParamRow {
                name: p.name,
                type_name: p.type_name(),
                default: p.default,
                value,
                source: match source {
                    Source::Default => "default",
                    Source::Environment => "environment",
                },
                env: params::env_name(p.name),
                help: p.help,
            }
        })
        .collect();
    let layout = install_layout::locate();
    let text = if json {
        render_json(&layout, &rows)
    } else {
        render_text(&layout, &rows)
    };
    print!("{text}");
    i32::from(!problems.is_empty())
}

/// The settings from the environment, leaving out (and reporting) each
/// variable that is not a valid parameter, so the report can still be made.
fn settings_with_problems() -> (Settings, Vec<String>) {
    let mut good = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in parameters::parameter_vars() {
        let checked =
            value.and_then(|v| Settings::from_vars([(key.clone(), v.clone())]).map(|_| v));
        match checked {
            Ok(v) => good.push((key, v)),
            Err(msg) => problems.push(msg),
        }
    }
    let settings = Settings::from_vars(good).expect("each variable was checked on its own");
    (settings, problems)
}

fn render_text(layout: &Result<install_layout::Layout, String>, rows: &[ParamRow]) -> String {
    let mut out = String::new();
    out.push_str(&format!("Tandem {}\n", env!("CARGO_PKG_VERSION")));
    out.push_str(&format!("MPI standard:  {MPI_STANDARD}\n"));
    out.push_str(&format!("transports:    {}\n", TRANSPORTS.join(", ")));
    // Containers and hardened kernels refuse process_vm_readv; shared memory
    // then uses the pipelined copy, which only this line and the counters show.
    let single_copy = if tandem::transport::shm::single_copy_permitted() {
        "permitted (process_vm_readv)"
    } else {
        "not permitted here; shared memory uses the pipelined copy"
    };
    out.push_str(&format!("single copy:   {single_copy}\n"));
    match layout {
        Ok(l) => {
            out.push_str(&format!("include dir:   {}\n", l.include_dir.display()));
            out.push_str(&format!("library dir:   {}\n", l.lib_dir.display()));
        }
        Err(msg) => {
            out.push_str("include dir:   not found\n");
            out.push_str("library dir:   not found\n");
            out.push_str(&format!("               ({msg})\n"));
        }
    }
    out.push_str("\nParameters (set TANDEM_<NAME>=value, or `tandem run --set name=value`):\n\n");
    let header = ["NAME", "TYPE", "DEFAULT", "VALUE", "SOURCE"];
    // An empty value would look like a missing column.
    let shown = |v: &'static str| if v.is_empty() { "\"\"" } else { v };
    let cells: Vec<[&str; 5]> = rows
        .iter()
        .map(|r| {
            let value = if r.value.is_empty() {
                "\"\""
            } else {
                r.value.as_str()
            };
            [
                r.name,
                r.type_name.as_str(),
                shown(r.default),
                value,
                r.source,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cols: &[&str; 5]| {
        let padded: Vec<String> = cols
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    out.push_str(&line(&header));
    for (row, c) in rows.iter().zip(&cells) {
        out.push_str(&line(c));
        out.push_str(&format!("    {}\n", row.help));
    }
    out
}

fn render_json(layout: &Result<install_layout::Layout, String>, rows: &[ParamRow]) -> String {
    let (include, lib, error) = match layout {
        Ok(l) => (
            json_string(&l.include_dir.to_string_lossy()),
            json_string(&l.lib_dir.to_string_lossy()),
            "null".to_string(),
        ),
        Err(msg) => ("null".into(), "null".into(), json_string(msg)),
    };
    let transports: Vec<String> = TRANSPORTS.iter().map(|t| json_string(t)).collect();
    let params: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "    {{\"name\": {}, \"type\": {}, \"default\": {}, \"value\": {}, \"source\": {}, \"env\": {}, \"help\": {}}}",
                json_string(r.name),
                json_string(&r.type_name),
                json_string(r.default),
                json_string(&r.value),
                json_string(r.source),
                json_string(&r.env),
                json_string(r.help)
            )
        })
        .collect();
    format!(
        "{{\n  \"version\": {},\n  \"mpi_standard\": {},\n  \"mpi_version\": [{}, {}],\n  \"transports\": [{}],\n  \
         \"include_dir\": {include},\n  \"lib_dir\": {lib},\n  \"layout_error\": {error},\n  \"parameters\": [\n{}\n  ]\n}}\n",
        json_string(env!("CARGO_PKG_VERSION")),
        json_string(MPI_STANDARD),
        MPI_VERSION.0,
        MPI_VERSION.1,
        transports.join(", "),
        params.join(",\n")
    )
}

/// A JSON string literal.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}

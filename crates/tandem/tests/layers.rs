//! No module of the core refers to a layer above its own (see the layers
//! in docs/src/design.md): every `crate::X` path in `src/` (imports and
//! qualified paths alike, outside comments, strings, `#[cfg(test)]`
//! modules and the `tests.rs` files that hold such modules) must name a module of the same layer or one beneath, unless
//! [`KNOWN_UPWARD`] lists that file's reference with its reason.
//!
//! A new top-level module, or a file no module owns, fails the test until
//! it is given a layer in [`LAYERS`]. An entry of [`KNOWN_UPWARD`] that no
//! longer matches a reference fails too, so the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The core's top-level modules, bottom layer first. `datatype` and `ops`
/// describe data (block lists, reduction arithmetic) and need nothing
/// above them; one-sided operations and the collectives use them.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "error",
            "params",
            "stats",
            "wire",
            "int_map",
            "free_ranges",
            "buf_pool",
            "shm_lock",
            "shared_mapping",
            "pages",
            "datatype",
            "ops",
        ],
    ),
    // What a rank learns from the launcher, and memory shared on its host.
    ("job and host", &["bootstrap", "shm_heap"]),
    ("transports", &["transport"]),
    ("progress engine", &["progress"]),
    // Point-to-point hands one-sided frames to rma's target side, and
    // rma's origin operations are point-to-point's: one layer.
    ("point-to-point and one-sided operations", &["p2p", "rma"]),
    ("replication", &["replica"]),
    ("collectives", &["coll"]),
    // The Remote-Write API, on the one-sided operations.
    ("remote write", &["rwapi"]),
    (
        "Rust API",
        &["runtime", "comm", "group", "intercomm", "dynamic"],
    ),
    // The fuzzers' way in to every decoder (fuzz/).
    ("fuzzing entry points", &["fuzzing"]),
];

/// Files that belong to a module other than the one their path names
/// (included with `#[path]`).
const INCLUDED_FILES: &[(&str, &str)] = &[
    ("bootstrap_pmi2.rs", "bootstrap"),
    ("bootstrap_pmix.rs", "bootstrap"),
];

/// Today's upward references: (file under src/, module it reaches up to,
/// why).
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[
    (
        "bootstrap.rs",
        "replica",
        "checks the job's replica count against the replication layer's limits",
    ),
    (
        "bootstrap.rs",
        "transport",
        "names the likely cause of a failed connection with tcp::likely_cause",
    ),
    (
        "progress/engine.rs",
        "replica",
        "the engine owns the replicas' state and their acknowledgement timer",
    ),
    (
        "coll/api.rs",
        "runtime",
        "collectives add methods to Runtime",
    ),
    (
        "coll/api.rs",
        "intercomm",
        "refuses intercommunicators with intercomm::unsupported",
    ),
    (
        "coll/inter.rs",
        "runtime",
        "intercommunicator collectives are methods of Runtime",
    ),
    (
        "coll/inter.rs",
        "intercomm",
        "intercommunicator collectives read the intercommunicator's roots",
    ),
    (
        "coll/shm.rs",
        "runtime",
        "shared-flag collectives are methods of Runtime",
    ),
    (
        "rma/completion.rs",
        "runtime",
        "MPI windows (rma/window.rs and its helpers) work on the Runtime for communicators and collectives",
    ),
    (
        "rma/direct.rs",
        "runtime",
        "MPI windows (rma/window.rs and its helpers) work on the Runtime for communicators and collectives",
    ),
    (
        "rma/passive.rs",
        "runtime",
        "MPI windows (rma/window.rs and its helpers) work on the Runtime for communicators and collectives",
    ),
    (
        "rma/shared.rs",
        "runtime",
        "MPI windows (rma/window.rs and its helpers) work on the Runtime for communicators and collectives",
    ),
    (
        "rma/window.rs",
        "runtime",
        "MPI windows (rma/window.rs and its helpers) work on the Runtime for communicators and collectives",
    ),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as paths relative to `root`.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The source with comments, string and character literals blanked out
/// (line breaks kept), so that only code is searched.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, bytes: &[u8]| {
        out.extend(bytes.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }))
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = 0;
            loop {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else {
                    j += 1;
                }
            }
        } else if rest[0] == b'r'
            && (i == 0 || !ident(b[i - 1]) || b[i - 1] == b'b')
            && rest[1..]
                .iter()
                .position(|&c| c != b'#')
                .is_some_and(|p| rest[1 + p] == b'"')
        {
            // A raw string: r"..." or r#"..."#.
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = 2 + hashes;
            body + rest[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .expect("raw string is closed")
                + close.len()
        } else if rest[0] == b'"' {
            let mut j = 1;
            while rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == b'\'' && rest.len() > 3 && rest[1] == b'\\' {
            // An escaped character: '\n', '\'', '\u{..}'.
            3 + rest[3..].iter().position(|&c| c == b'\'').unwrap() + 1
        } else if rest[0] == b'\'' && rest.len() > 2 && rest[2] == b'\'' {
            3
        } else {
            out.push(rest[0]);
            i += 1;
            continue;
        };
        blank(&mut out, &rest[..end]);
        i += end;
    }
    String::from_utf8(out).expect("blanking keeps the text ASCII-separated")
}

/// The code without `#[cfg(test)]` items (their braces are matched).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at its block's closing brace, or at a `;` first
        // (`#[cfg(test)] use ...;`, `#[cfg(test)] mod tests;`).
        let open = after.find('{');
        let semi = after.find(';');
        let end = match (open, semi) {
            (Some(o), Some(s)) if s < o => s + 1,
            (Some(o), _) => {
                let mut depth = 0;
                let mut end = after.len();
                for (j, c) in after[o..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = o + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The first path segment after every `crate::`, `crate::{a, b::c}`
/// counting each of its items.
fn crate_references(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for (at, _) in code.match_indices("crate::") {
        if code[..at].chars().last().is_some_and(ident_char) {
            continue; // e.g. `tandem_crate::`
        }
        let after = &code[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (c == ',' && depth == 1) {
                    let name: String = item.trim().chars().take_while(|&c| ident_char(c)).collect();
                    if !name.is_empty() {
                        found.insert(name);
                    }
                    item.clear();
                    if depth == 0 {
                        break;
                    }
                } else {
                    item.push(c);
                }
            }
        } else {
            let name: String = after.chars().take_while(|&c| ident_char(c)).collect();
            found.insert(name);
        }
    }
    found
}

/// Names lib.rs re-exports at the crate root (`pub use error::{Error, ...}`),
/// with the module each comes from.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let (module, names) = rest.split_once("::").expect("pub use module::...");
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap().trim();
            map.insert(name.to_string(), module.to_string());
        }
    }
    map
}

/// The module named by lib.rs's `pub mod` / `mod` lines.
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.to_string())
        })
        .collect()
}

/// The top-level module a file under src/ belongs to.
fn owner(file: &str) -> String {
    if let Some((_, module)) = INCLUDED_FILES.iter().find(|(f, _)| *f == file) {
        return module.to_string();
    }
    let first = file.split('/').next().unwrap();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn no_module_refers_to_a_layer_above_it() {
    let src = src_dir();
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layer_of: BTreeMap<&str, (usize, &str)> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, (layer, modules))| modules.iter().map(move |m| (*m, (i, *layer))))
        .collect();
    let reexports = root_reexports(&lib);
    let mut problems = Vec::new();

    let declared = declared_modules(&lib);
    for module in &declared {
        if !layer_of.contains_key(module.as_str()) {
            problems.push(format!("module {module} has no layer in LAYERS"));
        }
    }
    for module in layer_of.keys() {
        if !declared.contains(*module) {
            problems.push(format!(
                "LAYERS names {module}, which lib.rs does not declare"
            ));
        }
    }

    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    files.sort();
    let mut upward = BTreeSet::new();
    // A `tests.rs` is a module's `#[cfg(test)] mod tests;`: test code,
    // which may drive the module through the layers above it.
    let is_tests = |f: &str| f == "lib.rs" || f.ends_with("/tests.rs");
    for file in files.iter().filter(|f| !is_tests(f)) {
        let module = owner(file);
        let Some(&(from, from_layer)) = layer_of.get(module.as_str()) else {
            problems.push(format!("{file}: module {module} has no layer in LAYERS"));
            continue;
        };
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        for name in crate_references(&without_tests(&code_only(&text))) {
            let target = reexports.get(&name).cloned().unwrap_or(name);
            if target == module {
                continue;
            }
            let Some(&(to, to_layer)) = layer_of.get(target.as_str()) else {
                // A root item of lib.rs itself (such as a test helper).
                continue;
            };
            if to > from {
                upward.insert((file.clone(), target.clone(), from_layer, to_layer));
            }
        }
    }

    let known: BTreeSet<(&str, &str)> = KNOWN_UPWARD.iter().map(|(f, m, _)| (*f, *m)).collect();
    for (file, target, from_layer, to_layer) in &upward {
        if !known.contains(&(file.as_str(), target.as_str())) {
            problems.push(format!(
                "{file} ({from_layer}) refers to {target} ({to_layer}), a layer above"
            ));
        }
    }
    for (file, target) in known {
        if !upward
            .iter()
            .any(|(f, t, _, _)| f.as_str() == file && t.as_str() == target)
        {
            problems.push(format!(
                "KNOWN_UPWARD lists {file} -> {target}, which it no longer has: remove it"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_scanner_sees_code_only() {
    let text = r##"
use crate::{wire::Header, error::{Error, Result}};
// crate::comment
/* crate::block /* nested */ crate::still */
let s = "crate::string \" crate::escaped";
let r = r#"crate::raw "quoted""#;
let c = '"'; let q = '\''; let lifetime: &'static str = "crate::in_string";
fn f() -> crate::transport::Kind { crate::p2p::go() }
#[cfg(test)]
mod tests {
    use crate::runtime::Runtime;
}
"##;
    let refs = crate_references(&without_tests(&code_only(text)));
    let expected: BTreeSet<String> = ["wire", "error", "transport", "p2p"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(refs, expected);
}

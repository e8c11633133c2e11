//! Generates the profiling interface: for every exported `MPI_X` in `src/`,
//! an exported `PMPI_X` with the same signature that calls it (see
//! `src/pmpi.rs`), and links the shared library with
//! `-Bsymbolic-functions`, so that a tool's own `MPI_X` (which calls
//! `PMPI_X`) never captures the library's internal calls, and with the
//! standard ABI's SONAME, `libmpi_abi.so.1`.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let src = Path::new("src");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
    // The MPI-5.0 standard ABI's major version is 1: programs record
    // `libmpi_abi.so.1`, which any implementation of that ABI provides
    // (the build tree has it as a link, made by crates/tandem-cli/build.rs).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    let mut files: Vec<_> = std::fs::read_dir(src)
        .expect("src/ is readable")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for path in files {
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if module == "lib" || module == "pmpi" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source is readable");
        for (name, params, ret) in exported(&text) {
            if !seen.insert(name.clone()) {
                panic!("{name} is exported twice");
            }
            let args: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
            let decl: Vec<String> = params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
            writeln!(
                out,
                "#[no_mangle]\npub unsafe extern \"C\" fn P{name}({}) -> {ret} {{\n    // SAFETY: the same contract as the function it forwards to.\n    unsafe {{ crate::{module}::{name}({}) }}\n}}\n",
                decl.join(", "),
                args.join(", ")
            )
            .unwrap();
        }
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("pmpi_generated.rs");
    std::fs::write(dest, out).unwrap();
}

/// (name, [(param, type)], return type) of every `extern "C" fn MPI_...`.
/// An exported function: name, (parameter, type) pairs, return type.
type Exported = (String, Vec<(String, String)>, String);

fn exported(text: &str) -> Vec<Exported> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("extern \"C\" fn MPI_") {
        let after = &rest[at + "extern \"C\" fn ".len()..];
        let open = after.find('(').unwrap();
        let name = after[..open].trim().to_string();
        // The matching parenthesis.
        let mut depth = 0;
        let mut close = 0;
        for (i, c) in after[open..].char_indices() {
            match c {
                '(' | '[' | '<' => depth += 1,
                ')' | ']' | '>' if !(c == '>' && after.as_bytes()[open + i - 1] == b'-') => {
                    depth -= 1;
                    if depth == 0 && c == ')' {
                        close = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inside = &after[open + 1..close];
        let mut params = Vec::new();
        let mut depth = 0;
        let mut cur = String::new();
        for c in inside.chars() {
            match c {
                '(' | '[' | '<' => depth += 1,
                ')' | ']' | '>' => depth -= 1,
                _ => {}
            }
            if c == ',' && depth == 0 {
                params.push(std::mem::take(&mut cur));
            } else {
                cur.push(c);
            }
        }
        params.push(cur);
        let params: Vec<(String, String)> = params
            .iter()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty() && *p != "...")
            .map(|p| {
                let (n, t) = p.split_once(':').expect("name: type");
                (
                    n.trim().to_string(),
                    t.split_whitespace().collect::<Vec<_>>().join(" "),
                )
            })
            .collect();
        let tail = &after[close + 1..];
        let brace = tail.find('{').unwrap();
        let ret = tail[..brace]
            .trim()
            .trim_start_matches("->")
            .trim()
            .to_string();
        found.push((name, params, ret));
        rest = &after[close..];
    }
    found
}

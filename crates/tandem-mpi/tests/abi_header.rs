//! `include/mpi.h` and the library agree: every constant `src/abi.rs`
//! defines has the header's value (and a matching Rust type), every constant
//! the header defines is in `abi.rs` (save the exceptions listed below), and
//! every function the header declares is exported by the built
//! `libmpi_abi.so`.
//!
//! Both files are read as text: the header with a small parser for the few
//! forms it uses (`#define NAME VALUE`, enum members, casts such as
//! `((MPI_Comm)0x101)`), `abi.rs` line by line (`pub const NAME: TYPE =
//! VALUE;`). A form neither parser knows fails the test rather than being
//! skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// Header constants `abi.rs` deliberately leaves out.
const ONLY_IN_HEADER: &[(&str, &str)] = &[
    ("TANDEM_MPI_H", "the header's include guard"),
    (
        "TANDEM",
        "lets C programs detect Tandem; the library has no use for it",
    ),
    (
        "TANDEM_VERSION_STRING",
        "the library takes its version from Cargo (env::library_version)",
    ),
];

/// Functions the header declares that the library does not export (yet).
const NOT_EXPORTED: &[(&str, &str)] = &[];

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// What a constant is, besides its value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// An integer `#define` (`#define N 5`).
    Define,
    /// A member of an anonymous enum: a C int.
    Int,
    /// A member of the named C enum type (`typedef enum T {..} T`).
    EnumOf(String),
    /// A value cast to a (non-pointer) type: a handle, `MPI_Offset`.
    Cast(String),
    /// A value cast to a pointer type: a special address.
    Pointer,
    /// A string literal.
    Str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Constant {
    kind: Kind,
    value: i128,
}

/// `5`, `0x2a`, `-32766`.
fn int_literal(text: &str) -> Option<i128> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest.trim()),
        None => (false, text),
    };
    let magnitude = match digits.strip_prefix("0x") {
        Some(hex) => i128::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The header without comments, preprocessor conditionals kept.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("comment is closed");
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// The value of a `#define`'s replacement text; aliases are resolved later.
enum DefineValue {
    Known(Constant),
    Alias(String),
    /// No replacement text (an include guard).
    Empty,
}

fn define_value(text: &str) -> DefineValue {
    let text = text.trim();
    if text.is_empty() {
        return DefineValue::Empty;
    }
    if text.starts_with('"') && text.ends_with('"') {
        return DefineValue::Known(Constant {
            kind: Kind::Str,
            value: 0,
        });
    }
    if let Some(value) = int_literal(text) {
        return DefineValue::Known(Constant {
            kind: Kind::Define,
            value,
        });
    }
    if is_identifier(text) {
        return DefineValue::Alias(text.to_string());
    }
    // ((TYPE)VALUE) or ((TYPE *)VALUE)
    let inner = text
        .strip_prefix("((")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or_else(|| panic!("mpi.h: unknown #define form {text:?}"));
    let (ty, value) = inner
        .split_once(')')
        .unwrap_or_else(|| panic!("mpi.h: unknown #define form {text:?}"));
    let value =
        int_literal(value).unwrap_or_else(|| panic!("mpi.h: unknown #define value {text:?}"));
    let kind = if ty.contains('*') {
        Kind::Pointer
    } else {
        Kind::Cast(ty.trim().to_string())
    };
    DefineValue::Known(Constant { kind, value })
}

/// Every constant the header defines: `#define`s and enum members. `None`
/// for a macro without a value.
fn header_constants(header: &str) -> BTreeMap<String, Option<Constant>> {
    let text = without_comments(header);
    let mut found: BTreeMap<String, Option<Constant>> = BTreeMap::new();
    let mut aliases = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.trim();
        let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let entry = match define_value(value) {
            DefineValue::Known(c) => Some(c),
            DefineValue::Alias(target) => {
                aliases.push((name.to_string(), target));
                continue;
            }
            DefineValue::Empty => None,
        };
        assert!(
            found.insert(name.to_string(), entry).is_none(),
            "mpi.h defines {name} twice"
        );
    }
    // Enums: `enum [tag] { A = v, ... } [typedef name];`
    let mut rest = text.as_str();
    while let Some(at) = rest.find("enum") {
        let after = &rest[at + "enum".len()..];
        let word_before = rest[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let Some(open) = after.find('{') else { break };
        let tag = after[..open].trim();
        if word_before || !(tag.is_empty() || is_identifier(tag)) {
            // "enum" inside a longer word, or `enum T *` in a declaration.
            rest = after;
            continue;
        }
        let close = after.find('}').expect("enum is closed");
        let kind = if tag.is_empty() {
            Kind::Int
        } else {
            Kind::EnumOf(tag.to_string())
        };
        for member in after[open + 1..close].split(',') {
            let member = member.trim();
            if member.is_empty() {
                continue;
            }
            let (name, value) = member
                .split_once('=')
                .unwrap_or_else(|| panic!("mpi.h: enum member without a value: {member:?}"));
            let value = int_literal(value)
                .unwrap_or_else(|| panic!("mpi.h: unknown enum value {member:?}"));
            let name = name.trim();
            let constant = Constant {
                kind: kind.clone(),
                value,
            };
            assert!(
                found.insert(name.to_string(), Some(constant)).is_none(),
                "mpi.h defines {name} twice"
            );
        }
        rest = &after[close..];
    }
    for (name, target) in aliases {
        let value = found
            .get(&target)
            .unwrap_or_else(|| panic!("mpi.h: {name} aliases unknown {target}"))
            .clone();
        found.insert(name, value);
    }
    found
}

/// `(type, value)` of every `pub const NAME: TYPE = VALUE;` in `abi.rs`
/// outside its tests, aliases resolved.
fn rust_constants(source: &str) -> BTreeMap<String, (String, i128)> {
    let code = source
        .split("#[cfg(test)]")
        .next()
        .expect("split yields a first part");
    let mut found = BTreeMap::new();
    let mut aliases = Vec::new();
    for line in code.lines() {
        let Some(rest) = line.trim().strip_prefix("pub const ") else {
            continue;
        };
        let parsed = rest.strip_suffix(';').and_then(|r| {
            let (name, r) = r.split_once(':')?;
            let (ty, value) = r.split_once('=')?;
            Some((name.trim(), ty.trim(), value.trim()))
        });
        let Some((name, ty, value)) = parsed else {
            panic!("abi.rs: unknown constant form {line:?}");
        };
        if let Some(v) = int_literal(value) {
            found.insert(name.to_string(), (ty.to_string(), v));
        } else if is_identifier(value) {
            aliases.push((name.to_string(), ty.to_string(), value.to_string()));
        } else {
            panic!("abi.rs: unknown constant value {line:?}");
        }
    }
    for (name, ty, target) in aliases {
        let (_, value) = *found
            .get(&target)
            .unwrap_or_else(|| panic!("abi.rs: {name} aliases unknown {target}"));
        found.insert(name, (ty, value));
    }
    found
}

/// Whether a Rust constant of type `ty` stands for a C constant of `kind`.
fn types_agree(kind: &Kind, ty: &str) -> bool {
    match kind {
        Kind::Int => ty == "c_int",
        // String sizes are also Rust lengths.
        Kind::Define => ty == "c_int" || ty == "usize",
        Kind::EnumOf(tag) => ty == tag,
        // Handle types are usize aliases of the same name.
        Kind::Cast(c_type) => ty == c_type,
        // Special addresses: compared with a pointer's address.
        Kind::Pointer => ty == "usize",
        Kind::Str => false,
    }
}

#[test]
fn abi_rs_constants_equal_the_header() {
    let header = header_constants(&repo_file("include/mpi.h"));
    let rust = rust_constants(&repo_file("crates/tandem-mpi/src/abi.rs"));
    // Sanity: the parsers found the bulk of both files.
    assert!(header.len() > 350, "{} header constants", header.len());
    assert!(rust.len() > 350, "{} abi.rs constants", rust.len());

    let mut problems = Vec::new();
    for (name, (ty, value)) in &rust {
        match header.get(name) {
            None => problems.push(format!("{name}: in abi.rs, not in mpi.h")),
            Some(None) => problems.push(format!("{name}: has no value in mpi.h")),
            Some(Some(c)) => {
                if c.value != *value {
                    problems.push(format!(
                        "{name}: abi.rs says {value:#x}, mpi.h says {:#x}",
                        c.value
                    ));
                }
                if !types_agree(&c.kind, ty) {
                    problems.push(format!(
                        "{name}: abi.rs type {ty} does not match mpi.h's {:?}",
                        c.kind
                    ));
                }
            }
        }
    }
    let exceptions: BTreeSet<&str> = ONLY_IN_HEADER.iter().map(|(n, _)| *n).collect();
    for name in header.keys() {
        if !rust.contains_key(name) && !exceptions.contains(name.as_str()) {
            problems.push(format!("{name}: in mpi.h, not in abi.rs"));
        }
    }
    for name in &exceptions {
        if !header.contains_key(*name) {
            problems.push(format!("{name}: listed in ONLY_IN_HEADER, not in mpi.h"));
        }
        if rust.contains_key(*name) {
            problems.push(format!("{name}: listed in ONLY_IN_HEADER, but in abi.rs"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Names of the functions the header declares, in order.
fn header_functions(header: &str) -> Vec<String> {
    let text: String = without_comments(header)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names = Vec::new();
    for statement in text.split(';') {
        let statement = statement.trim();
        let Some(open) = statement.find('(') else {
            continue; // a type, an enum, the C++ braces
        };
        if statement.starts_with("typedef") {
            continue;
        }
        let before = statement[..open].trim_end();
        let name = before
            .rsplit(|c: char| c.is_whitespace() || c == '*')
            .next()
            .unwrap_or_default();
        assert!(
            name.starts_with("MPI_") || name.starts_with("PMPI_") || name.starts_with("MPIX_"),
            "mpi.h: unknown declaration {statement:?}"
        );
        names.push(name.to_string());
    }
    names
}

/// The library built with this test: `cargo test` links it into the
/// `deps/` directory this test runs from (only `cargo build` copies it up
/// to `target/<profile>/`, which is the fallback).
fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    let profile = deps.parent().expect("profile directory");
    [deps, profile]
        .iter()
        .map(|dir| dir.join("libmpi_abi.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no libmpi_abi.so in {}", profile.display()))
}

#[test]
fn every_declared_function_is_exported() {
    let declared = header_functions(&repo_file("include/mpi.h"));
    assert!(declared.len() > 1000, "{} declarations", declared.len());
    let unique: BTreeSet<&str> = declared.iter().map(String::as_str).collect();
    assert_eq!(unique.len(), declared.len(), "a function is declared twice");
    for name in &declared {
        if let Some(base) = name.strip_prefix("MPI_") {
            assert!(
                unique.contains(format!("PMPI_{base}").as_str()),
                "mpi.h declares {name} without PMPI_{base}"
            );
        }
    }

    let path = built_library();
    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path. Loading runs the library's
    // initialisers, which only set up Rust's runtime; MPI is not started.
    let lib = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen {} failed", path.display());

    let excused: BTreeSet<&str> = NOT_EXPORTED.iter().map(|(n, _)| *n).collect();
    let mut problems = Vec::new();
    for name in &declared {
        let c_name = CString::new(name.as_str()).unwrap();
        // SAFETY: `lib` is a live handle from dlopen and the name is
        // NUL-terminated; the symbol is only compared with null.
        let exported = !unsafe { libc::dlsym(lib, c_name.as_ptr()) }.is_null();
        match (exported, excused.contains(name.as_str())) {
            (false, false) => problems.push(format!("{name}: declared, not exported")),
            (true, true) => problems.push(format!("{name}: in NOT_EXPORTED, but exported")),
            _ => {}
        }
    }
    for name in &excused {
        if !unique.contains(name) {
            problems.push(format!("{name}: in NOT_EXPORTED, not declared in mpi.h"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} ({} declared):\n{}",
        path.display(),
        declared.len(),
        problems.join("\n")
    );
}

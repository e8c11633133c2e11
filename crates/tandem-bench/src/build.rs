//! Building a kernel with an MPI's compiler wrapper, cached by the hash of
//! the sources and of the wrapper's configuration.
//!
//! The cache lives in `<target>/bench-kernels/` when `tandem` runs from a
//! build tree (`target/<profile>/tandem`), else in
//! `$XDG_CACHE_HOME/tandem/bench-kernels/` (default `~/.cache`).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::kernels::{Kernel, COMMON_HEADER, RWAPI_HEADER};
use super::mpi::Library;

/// Why a kernel could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The library lacks MPI functions the kernel calls.
    Missing(String),
    Other(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Missing(message) | BuildError::Other(message) => f.write_str(message),
        }
    }
}

/// FNV-1a, 64 bits: a stable hash for cache keys.
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Where built kernels are kept.
pub fn cache_dir() -> PathBuf {
    if let Ok(exe) = std::env::current_exe().and_then(|p| p.canonicalize()) {
        // target/<profile>/tandem
        if let Some(target) = exe.parent().and_then(|p| p.parent()) {
            if target.file_name().is_some_and(|n| n == "target") {
                return target.join("bench-kernels");
            }
        }
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("tandem").join("bench-kernels")
}

/// The MPI functions named in "undefined reference to `MPI_X'" lines.
pub fn missing_functions(compiler_output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in compiler_output.lines() {
        if let Some(i) = line.find("undefined reference to") {
            let rest = &line[i + "undefined reference to".len()..];
            let name: String = rest
                .trim_start_matches([' ', '`', '\'', '"', '\u{2018}'])
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.starts_with("MPI_") && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// Builds `kernel` with `lib` (or finds it in the cache); returns the
/// executable. A replicated variant of a library (`tandem-r2`) runs the
/// library's own executable.
pub fn build(kernel: &Kernel, lib: &Library) -> Result<PathBuf, BuildError> {
    let lib_name = lib.base_name();
    // The library `rwapi` is Tandem running the kernel's RWAPI variant.
    // Its source includes the MPI kernel's file, for its body: both are
    // written, under their own names.
    let mpi_file = format!("{}.c", kernel.name);
    let (file, source) = if lib_name == "rwapi" {
        let variant = kernel.rwapi.as_ref().ok_or_else(|| {
            BuildError::Other(format!(
                "kernel {} has no RWAPI variant (those with one: pingpong, bidir, burst)",
                kernel.name
            ))
        })?;
        (format!("rw_{}.c", kernel.name), variant.source)
    } else {
        (mpi_file.clone(), kernel.source)
    };
    let mut key_text = Vec::new();
    key_text.extend_from_slice(source.as_bytes());
    if lib_name == "rwapi" {
        key_text.extend_from_slice(kernel.source.as_bytes());
    }
    key_text.extend_from_slice(COMMON_HEADER.1.as_bytes());
    key_text.extend_from_slice(RWAPI_HEADER.1.as_bytes());
    key_text.extend_from_slice(lib.identity().as_bytes());
    let key = fnv1a(&key_text);
    let dir = cache_dir();
    let exe = dir.join(format!("{}-{lib_name}-{key:016x}", kernel.name));
    if exe.is_file() {
        return Ok(exe);
    }
    // Sources and output under names of this process, so that concurrent
    // builds of the same kernel never see each other's half-written files;
    // the executable appears by an atomic rename.
    let src_dir = dir.join(format!("src-{key:016x}-{}", std::process::id()));
    std::fs::create_dir_all(&src_dir)
        .map_err(|e| BuildError::Other(format!("cannot create {}: {e}", src_dir.display())))?;
    let src = src_dir.join(&file);
    for (path, text) in [
        (&src_dir.join(&mpi_file), kernel.source),
        (&src, source),
        (&src_dir.join(COMMON_HEADER.0), COMMON_HEADER.1),
        (&src_dir.join(RWAPI_HEADER.0), RWAPI_HEADER.1),
    ] {
        std::fs::write(path, text)
            .map_err(|e| BuildError::Other(format!("cannot write {}: {e}", path.display())))?;
    }
    let tmp = dir.join(format!(
        "{}-{lib_name}-{key:016x}.tmp{}",
        kernel.name,
        std::process::id()
    ));
    let mut cmd = Command::new(&lib.cc[0]);
    cmd.args(&lib.cc[1..])
        .arg("-O2")
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .stdin(Stdio::null());
    let shown = format!(
        "{} -O2 -o {} {}",
        lib.cc
            .iter()
            .map(|w| w.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        exe.display(),
        src.display()
    );
    let out = cmd.output();
    let _ = std::fs::remove_dir_all(&src_dir);
    let out = out.map_err(|e| BuildError::Other(format!("cannot run `{shown}`: {e}")))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let missing = missing_functions(&text);
        if !missing.is_empty() {
            return Err(BuildError::Missing(format!(
                "the {} kernel needs {}, which {} does not provide (yet)",
                kernel.name,
                missing.join(", "),
                lib.name
            )));
        }
        return Err(BuildError::Other(format!(
            "building the {} kernel failed: `{shown}`\n{text}",
            kernel.name
        )));
    }
    std::fs::rename(&tmp, &exe)
        .map_err(|e| BuildError::Other(format!("cannot rename {}: {e}", tmp.display())))?;
    Ok(exe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_missing_mpi_functions() {
        let text = "/usr/bin/ld: /tmp/cc.o: in function `run_op':\n\
                    coll.c:(.text+0x2a): undefined reference to `MPI_Alltoall'\n\
                    coll.c:(.text+0x4b): undefined reference to `MPI_Bcast'\n\
                    coll.c:(.text+0x9b): undefined reference to `MPI_Bcast'\n\
                    x.c:(.text+0x1): undefined reference to `helper'\n";
        assert_eq!(missing_functions(text), vec!["MPI_Alltoall", "MPI_Bcast"]);
        assert!(missing_functions("error: expected ';'").is_empty());
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }
}

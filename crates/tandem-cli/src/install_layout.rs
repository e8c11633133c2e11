//! Where Tandem's header (`mpi.h`) and library (`libmpi_abi.so`) are, found
//! relative to the running `tandem` executable.
//!
//! Two layouts are recognised:
//! * the build tree: `<repo>/target/<profile>/tandem` next to
//!   `libmpi_abi.so`, with the headers in `<repo>/include`;
//! * an installation: `<prefix>/bin/tandem`, `<prefix>/lib/libmpi_abi.so`,
//!   `<prefix>/include/mpi.h`.

use std::path::{Path, PathBuf};

pub const LIBRARY_FILE: &str = "libmpi_abi.so";
pub const LIBRARY_NAME: &str = "mpi_abi";
pub const HEADER_FILE: &str = "mpi.h";

/// The directories `tandem cc` passes to the compiler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub include_dir: PathBuf,
    pub lib_dir: PathBuf,
}

/// Finds the layout around the running executable.
pub fn locate() -> Result<Layout, String> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find the running tandem executable: {e}"))?;
    locate_from(&exe)
}

/// Finds the layout around `exe` (a canonical path).
pub fn locate_from(exe: &Path) -> Result<Layout, String> {
    let exe_dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [
        // build tree: target/<profile>/tandem → <repo>/include
        (exe_dir.to_path_buf(), exe_dir.join("../../include")),
        // installation: <prefix>/bin/tandem
        (exe_dir.join("../lib"), exe_dir.join("../include")),
    ];
    let mut looked = Vec::new();
    for (lib_dir, include_dir) in candidates {
        let lib = lib_dir.join(LIBRARY_FILE);
        let header = include_dir.join(HEADER_FILE);
        if let (Ok(lib), Ok(header)) = (lib.canonicalize(), header.canonicalize()) {
            if lib.is_file() && header.is_file() {
                return Ok(Layout {
                    include_dir: header
                        .parent()
                        .map(Path::to_path_buf)
                        .unwrap_or(include_dir),
                    lib_dir: lib.parent().map(Path::to_path_buf).unwrap_or(lib_dir),
                });
            }
        }
        looked.push(format!(
            "{} with {}",
            tidy(&lib).display(),
            tidy(&header).display()
        ));
    }
    Err(format!(
        "cannot find Tandem's {HEADER_FILE} and {LIBRARY_FILE} for {} (looked for {}); \
         build the whole workspace with `cargo build --release`, or install Tandem as <prefix>/bin, <prefix>/lib, <prefix>/include",
        exe.display(),
        looked.join(", and ")
    ))
}

/// `a/b/../c` → `a/c`, for readable messages (no symlinks are resolved).
fn tidy(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_folds_parent_components() {
        assert_eq!(
            tidy(Path::new("/r/target/release/../../include/mpi.h")),
            Path::new("/r/include/mpi.h")
        );
    }

    #[test]
    fn missing_layout_is_explained() {
        let err = locate_from(Path::new("/nonexistent/bin/tandem")).unwrap_err();
        assert!(err.contains("/nonexistent/lib/libmpi_abi.so"), "{err}");
        assert!(err.contains("/nonexistent/bin/libmpi_abi.so"), "{err}");
    }
}

//! The Fortran bindings end to end: a program in each binding style
//! (`mpif.h` in fixed form, `use mpi`, `use mpi_f08`) from tests/fortran,
//! built with `tandem fc` or the `mpifort` name and run with `tandem run`
//! on 2 and 3 ranks. Each program checks its own results and prints one OK
//! line per part; a mismatch aborts the job.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{repo_root, run, JOB_TIMEOUT, TANDEM};

/// Builds tests/fortran/`file` with `compiler` (a `tandem` subcommand or
/// an MPI name next to it) into the test's scratch directory.
fn build(file: &str, compiler: &[&str]) -> PathBuf {
    let src = repo_root().join("tests/fortran").join(file);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ftests");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(file.split('.').next().unwrap());
    let mut cmd = Command::new(compiler[0]);
    cmd.args(&compiler[1..])
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(&src)
        // The compiled modules go to a cache of this test's own.
        .env("TANDEM_FORTRAN_CACHE", dir.join("modules"))
        // A program's own modules (.mod files) are written here.
        .current_dir(&dir)
        .stdin(Stdio::null());
    let output = cmd.output().expect("the compiler wrapper starts");
    assert!(
        output.status.success(),
        "building {file} failed (is gfortran installed? scripts/setup.sh installs it):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

fn check_runs(prog: &Path, parts: &[&str]) {
    for np in [2, 3] {
        let out = run(np, &[], prog, &[], JOB_TIMEOUT);
        assert!(out.status.success(), "{}", out.describe());
        let want: Vec<String> = parts.iter().map(|p| format!("OK {p}")).collect();
        let got: Vec<String> = out.stdout.lines().map(str::to_string).collect();
        assert_eq!(got, want, "{}", out.describe());
        assert!(out.leftovers.is_empty(), "{}", out.describe());
    }
}

#[test]
fn mpif_h_in_fixed_form() {
    let prog = build("f77_basics.f", &[TANDEM, "fc"]);
    check_runs(
        &prog,
        &[
            "point-to-point",
            "collectives",
            "strings",
            "constants",
            "spawn",
        ],
    );
}

#[test]
fn the_mpi_module() {
    let mpifort = Path::new(TANDEM).with_file_name("mpifort");
    let prog = build("use_mpi.f90", &[mpifort.to_str().unwrap()]);
    check_runs(
        &prog,
        &[
            "datatypes",
            "communicators",
            "one-sided",
            "user op",
            "alltoallw",
            "info",
            "constants",
            "sizeof",
            "spawn",
        ],
    );
}

#[test]
fn the_mpi_f08_module() {
    let prog = build("use_mpi_f08.f90", &[TANDEM, "fc"]);
    check_runs(
        &prog,
        &[
            "handles",
            "errors",
            "requests",
            "datatypes",
            "constants",
            "sizeof",
            "spawn",
        ],
    );
}

/// Info keys and values from Fortran lose their leading and trailing
/// blanks; `MPI_INFO_GET_STRING` writes at most BUFLEN characters.
#[test]
fn info_keys_and_values() {
    let prog = build("info_keys.f90", &[TANDEM, "fc"]);
    check_runs(&prog, &["blanks", "get_string"]);
}

/// `MPI_Comm_spawn` from `mpi_f08`: an argument list, error codes, the
/// children's parent intercommunicator.
#[test]
fn spawn_from_fortran() {
    let prog = build("spawn_f08.f90", &[TANDEM, "fc"]);
    check_runs(&prog, &["spawn"]);
}

/// `--showme` names the module directory and mpif.h's, as build systems
/// (CMake's FindMPI) read them.
#[test]
fn the_wrapper_shows_its_flags() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ftests-showme");
    let out = Command::new(Path::new(TANDEM).with_file_name("mpif90"))
        .arg("--showme:compile")
        .env("TANDEM_FORTRAN_CACHE", &dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let include = repo_root().join("include");
    assert!(text.contains(&format!("-I{}", include.display())), "{text}");
    let modules = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("-I"))
        .find(|d| d.starts_with(dir.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no module directory in {text}"));
    for m in ["mpi.mod", "mpi_f08.mod"] {
        assert!(
            Path::new(modules).join(m).is_file(),
            "{m} missing in {modules}"
        );
    }
}

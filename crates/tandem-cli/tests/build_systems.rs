//! Where build systems already are: the `mpicc` / `mpicxx` / `mpirun` /
//! `mpiexec` names the build makes next to `tandem`, their Open MPI and
//! MPICH style flags, the pkg-config file, and a CMake project that finds
//! Tandem with `find_package(MPI)` (tests/cmake/), built and run.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{have, repo_root, run_command, scratch, TANDEM};

const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// target/<profile>/, where the build puts tandem and the MPI names.
fn bin_dir() -> PathBuf {
    Path::new(TANDEM).parent().unwrap().to_path_buf()
}

fn output(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_build_makes_the_mpi_names() {
    for name in ["mpicc", "mpicxx", "mpic++", "mpirun", "mpiexec"] {
        let path = bin_dir().join(name);
        assert!(
            path.exists(),
            "{} is missing after the build",
            path.display()
        );
    }
}

#[test]
fn compiler_names_show_their_flags() {
    let mpicc = bin_dir().join("mpicc");
    let inc = repo_root().join("include");
    let (ok, compile, err) = output(Command::new(&mpicc).arg("--showme:compile"));
    assert!(ok, "{err}");
    assert_eq!(compile.trim(), format!("-I{}", inc.display()));
    let (ok, link, err) = output(Command::new(&mpicc).arg("--showme:link"));
    assert!(ok, "{err}");
    assert!(link.contains("-lmpi_abi") && link.contains("-L/"), "{link}");
    let (ok, show, _) = output(Command::new(&mpicc).args(["-show", "x.c"]));
    assert!(
        ok && show.contains("x.c") && show.contains("-lmpi_abi"),
        "{show}"
    );
    let (ok, info, _) = output(Command::new(&mpicc).args(["-compile-info", "x.c"]));
    assert!(
        ok && info.contains(" -c") && !info.contains("-lmpi_abi"),
        "{info}"
    );
    let (ok, cxx, _) = output(Command::new(bin_dir().join("mpicxx")).args(["--showme", "x.cc"]));
    assert!(ok && cxx.contains("x.cc"), "{cxx}");
}

#[test]
fn mpicc_builds_and_mpirun_and_mpiexec_run() {
    let dir = scratch("names");
    let exe = dir.join("hello");
    let (ok, _, err) = output(
        Command::new(bin_dir().join("mpicc"))
            .arg("-O2")
            .arg("-o")
            .arg(&exe)
            .arg(repo_root().join("tests/cmake/mpi_hello.c")),
    );
    assert!(ok, "mpicc failed: {err}");
    for (launcher, flag) in [("mpirun", "-np"), ("mpiexec", "-n")] {
        let mut cmd = Command::new(bin_dir().join(launcher));
        cmd.args([flag, "3", "-x", "HELLO_TEST=1", "--host", "localhost:3"])
            .arg(&exe);
        let outcome = run_command(cmd, JOB_TIMEOUT);
        assert!(outcome.status.success(), "{}", outcome.describe());
        assert!(
            outcome.has_line("PASS cmake_hello (3 ranks)"),
            "{}",
            outcome.describe()
        );
    }
    let mut cmd = Command::new(bin_dir().join("mpirun"));
    cmd.args(["--bogus-option", "true"]);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert_eq!(outcome.code(), Some(2), "{}", outcome.describe());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pkg_config_file_builds_a_program() {
    if !have("pkg-config") {
        eprintln!("SKIP pkg_config_file_builds_a_program: pkg-config is not installed (scripts/setup.sh installs it)");
        return;
    }
    let pc_dir = bin_dir().join("pkgconfig");
    let (ok, flags, err) = output(
        Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", &pc_dir)
            .args(["--cflags", "--libs", "tandem-mpi"]),
    );
    assert!(ok, "pkg-config failed: {err}");
    assert!(flags.contains("-lmpi_abi"), "{flags}");
    let dir = scratch("pkgconfig");
    let exe = dir.join("hello");
    let mut cc = Command::new("cc");
    cc.arg("-o")
        .arg(&exe)
        .arg(repo_root().join("tests/cmake/mpi_hello.c"))
        .args(flags.split_whitespace());
    let (ok, _, err) = output(&mut cc);
    assert!(ok, "cc with pkg-config flags failed: {err}");
    let mut cmd = Command::new(TANDEM);
    cmd.args(["run", "-n", "2"]).arg(&exe);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(
        outcome.has_line("PASS cmake_hello (2 ranks)"),
        "{}",
        outcome.describe()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cmake_find_package_mpi_builds_and_runs() {
    if !have("cmake") {
        eprintln!("SKIP cmake_find_package_mpi_builds_and_runs: cmake is not installed (scripts/setup.sh installs it)");
        return;
    }
    let build = scratch("cmake");
    let mpicc = bin_dir().join("mpicc");
    let (ok, out, err) = output(
        Command::new("cmake")
            .arg("-S")
            .arg(repo_root().join("tests/cmake"))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DMPI_C_COMPILER={}", mpicc.display())),
    );
    assert!(ok, "cmake configure failed\n{out}\n{err}");
    assert!(
        out.contains(&format!(
            "MPI_C_INCLUDE_DIRS: {}",
            repo_root().join("include").display()
        )),
        "FindMPI did not take Tandem's include directory\n{out}"
    );
    let (ok, out, err) = output(Command::new("cmake").arg("--build").arg(&build));
    assert!(ok, "cmake build failed\n{out}\n{err}");
    let mut cmd = Command::new(bin_dir().join("mpiexec"));
    cmd.args(["-n", "4"]).arg(build.join("mpi_hello"));
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.has_line("PASS cmake_hello (4 ranks)"),
        "{}",
        outcome.describe()
    );
    let _ = std::fs::remove_dir_all(&build);
}

/// CMake's FindMPI finds all three Fortran bindings through `mpifort`, and
/// a `use mpi_f08` program it builds runs.
#[test]
fn cmake_finds_the_fortran_bindings() {
    if !have("cmake") {
        eprintln!("SKIP cmake_finds_the_fortran_bindings: cmake is not installed (scripts/setup.sh installs it)");
        return;
    }
    let build = scratch("cmake-fortran");
    let mpifort = bin_dir().join("mpifort");
    let cache = build.join("modules");
    let (ok, out, err) = output(
        Command::new("cmake")
            .arg("-S")
            .arg(repo_root().join("tests/cmake-fortran"))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DMPI_Fortran_COMPILER={}", mpifort.display()))
            .env("TANDEM_FORTRAN_CACHE", &cache),
    );
    assert!(ok, "cmake configure failed\n{out}\n{err}");
    assert!(
        out.contains("MPI Fortran bindings: mpif.h TRUE, mpi TRUE, mpi_f08 TRUE"),
        "FindMPI did not find every Fortran binding\n{out}"
    );
    let (ok, out, err) = output(
        Command::new("cmake")
            .arg("--build")
            .arg(&build)
            .env("TANDEM_FORTRAN_CACHE", &cache),
    );
    assert!(ok, "cmake build failed\n{out}\n{err}");
    let mut cmd = Command::new(bin_dir().join("mpiexec"));
    cmd.args(["-n", "2"]).arg(build.join("use_mpi_f08"));
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(outcome.status.success(), "{}", outcome.describe());
    assert!(outcome.has_line("OK datatypes"), "{}", outcome.describe());
    let _ = std::fs::remove_dir_all(&build);
}

/// CMake's FindMPI pointed at the build tree by `MPI_HOME`, or by `PATH`,
/// takes Tandem's mpiexec and its library for C and C++ (not those of
/// another MPI installed beside it: FindMPI finds mpiexec first, then the
/// compilers beside it), and ctest runs the project's tests with it.
#[test]
fn cmake_finds_tandem_by_mpi_home_or_path_for_c_cxx_and_ctest() {
    let release = bin_dir().canonicalize().unwrap();
    let bin = release.join("bin");
    let mpiexec = bin.join("mpiexec");
    let build = scratch("cmake-ctest-home");
    let home = format!("-DMPI_HOME={}", release.display());
    if common::cmake_ctest(&build, &[home], None, &mpiexec, &release).is_none() {
        return;
    }
    let _ = std::fs::remove_dir_all(&build);
    let build = scratch("cmake-ctest-path");
    common::cmake_ctest(&build, &[], Some(&bin), &mpiexec, &release);
    let _ = std::fs::remove_dir_all(&build);
}

/// Meson finds Tandem through its MPI lookup (`dependency('mpi')`, which
/// asks the first `mpicc` on `PATH`) and through pkg-config
/// (`dependency('tandem-mpi')`); each build links the standard ABI's
/// library and runs (tests/meson).
#[test]
fn meson_finds_tandem_by_path_and_by_pkg_config() {
    if !have("meson") || !have("ninja") {
        eprintln!("SKIP meson_finds_tandem_by_path_and_by_pkg_config: meson or ninja is not installed (scripts/setup.sh installs them)");
        return;
    }
    let release = bin_dir().canonicalize().unwrap();
    let path = format!(
        "{}:{}",
        release.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // (dependency, the variable that points Meson at Tandem, its value, what Meson says)
    let pkg_config = release.join("pkgconfig").display().to_string();
    let ways = [
        ("mpi", "PATH", path, "mpicc found: YES"),
        (
            "tandem-mpi",
            "PKG_CONFIG_PATH",
            pkg_config,
            "Run-time dependency tandem-mpi found: YES",
        ),
    ];
    for (dep, var, value, said) in ways {
        let build = scratch(&format!("meson-{dep}"));
        let mut setup = Command::new("meson");
        setup
            .arg("setup")
            .arg(&build)
            .arg(repo_root().join("tests/meson"))
            .arg(format!("-Dmpi={dep}"))
            .env(var, &value);
        let (ok, out, err) = output(&mut setup);
        assert!(ok, "meson setup ({dep}) failed\n{out}\n{err}");
        assert!(out.contains(said), "{dep}: Meson found another MPI\n{out}");
        let (ok, out, err) = output(Command::new("ninja").arg("-C").arg(&build));
        assert!(ok, "ninja ({dep}) failed\n{out}\n{err}");
        let exe = build.join("meson_hello");
        let (_, dynamic, _) = output(Command::new("readelf").arg("-d").arg(&exe));
        assert!(dynamic.contains("[libmpi_abi.so.1]"), "{dep}: {dynamic}");
        let mut cmd = Command::new(bin_dir().join("mpirun"));
        cmd.args(["-n", "3"]).arg(&exe);
        let outcome = run_command(cmd, JOB_TIMEOUT);
        assert!(
            outcome.has_line("PASS meson_hello (3 ranks)"),
            "{dep}: {}",
            outcome.describe()
        );
        let _ = std::fs::remove_dir_all(&build);
    }
}

/// An autotools project (tests/autotools) configured with `CC=mpicc`
/// checks for mpi.h and MPI_Init, builds, links the standard ABI's library
/// and runs.
#[test]
fn autotools_builds_with_the_mpicc_wrapper() {
    if !have("autoreconf") || !have("make") {
        eprintln!("SKIP autotools_builds_with_the_mpicc_wrapper: autoconf, automake or make is not installed (scripts/setup.sh installs them)");
        return;
    }
    // autoreconf writes into the source directory: work on a copy.
    let dir = scratch("autotools");
    for file in ["configure.ac", "Makefile.am", "autotools_hello.c"] {
        std::fs::copy(
            repo_root().join("tests/autotools").join(file),
            dir.join(file),
        )
        .unwrap();
    }
    let mpicc = bin_dir().canonicalize().unwrap().join("bin/mpicc");
    for step in [
        vec!["autoreconf".to_string(), "-i".to_string()],
        vec!["./configure".to_string(), format!("CC={}", mpicc.display())],
        vec!["make".to_string()],
    ] {
        let (ok, out, err) = output(Command::new(&step[0]).args(&step[1..]).current_dir(&dir));
        assert!(ok, "{step:?} failed\n{out}\n{err}");
    }
    let exe = dir.join("autotools_hello");
    let (_, dynamic, _) = output(Command::new("readelf").arg("-d").arg(&exe));
    assert!(dynamic.contains("[libmpi_abi.so.1]"), "{dynamic}");
    let mut cmd = Command::new(bin_dir().join("mpirun"));
    cmd.args(["-n", "3"]).arg(&exe);
    let outcome = run_command(cmd, JOB_TIMEOUT);
    assert!(
        outcome.has_line("PASS autotools_hello (3 ranks)"),
        "{}",
        outcome.describe()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! `scripts/install.sh`: a prefix installation, and the Debian package
//! unpacked, each build C, C++ and Fortran programs with their own wrappers
//! that run with their own launcher and depend on nothing in the checkout.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{have, must, repo_root, run_command, scratch};

const JOB_TIMEOUT: Duration = Duration::from_secs(60);

fn install_script() -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/install.sh"));
    cmd
}

const C_SOURCE: &str = r#"#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("c: %d ranks, sum %d\n", size, sum);
    MPI_Finalize();
    return 0;
}
"#;

const CXX_SOURCE: &str = r#"#include <mpi.h>
#include <iostream>
#include <vector>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<int> all(size);
    MPI_Allgather(&rank, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rank == 0) std::cout << "c++: last " << all.back() << "\n";
    MPI_Finalize();
}
"#;

const FORTRAN_SOURCE: &str = "program hello
  use mpi_f08
  integer :: rank, size, total
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) print '(a,i0)', 'fortran: sum ', total
  call MPI_Finalize()
end program
";

/// Builds the three programs with the wrappers in `bin`, runs each on
/// three ranks with `bin/mpirun`, and checks that each finds the library in
/// `lib` and nothing in the checkout.
fn build_and_run_with(bin: &Path, lib: &Path, work: &Path) {
    let mut programs = vec![
        ("mpicc", "hello.c", C_SOURCE, "c: 3 ranks, sum 3"),
        ("mpicxx", "hello.cpp", CXX_SOURCE, "c++: last 2"),
    ];
    if have("gfortran") {
        programs.push(("mpifort", "hello.f90", FORTRAN_SOURCE, "fortran: sum 3"));
    } else {
        eprintln!("skipping the Fortran program: gfortran is not installed");
    }
    let repo = repo_root().canonicalize().unwrap();
    for (wrapper, file, source, want) in programs {
        let src = work.join(file);
        std::fs::write(&src, source).unwrap();
        let exe = work.join(format!("{file}.out"));
        // The module cache of `mpifort` goes to the scratch directory.
        must(
            Command::new(bin.join(wrapper))
                .env_remove("LD_LIBRARY_PATH")
                .env("XDG_CACHE_HOME", work.join("cache"))
                .arg(&src)
                .arg("-o")
                .arg(&exe),
        );
        let dynamic = must(Command::new("readelf").arg("-d").arg(&exe));
        assert!(
            dynamic.contains("[libmpi_abi.so.1]"),
            "{wrapper}: not linked against the standard ABI's SONAME: {dynamic}"
        );
        assert!(
            dynamic.contains(&format!("[{}]", lib.display())),
            "{wrapper}: the program's runpath is not {}: {dynamic}",
            lib.display()
        );
        // Cargo's test runner points LD_LIBRARY_PATH into the build tree.
        let resolved = must(Command::new("ldd").env_remove("LD_LIBRARY_PATH").arg(&exe));
        assert!(
            resolved.contains(&format!("{}/libmpi_abi.so.1", lib.display())),
            "{wrapper}: {resolved}"
        );
        assert!(
            !resolved.contains(&repo.display().to_string()),
            "{wrapper}: the program needs the checkout: {resolved}"
        );
        let mut run = Command::new(bin.join("mpirun"));
        run.env_remove("LD_LIBRARY_PATH")
            .args(["-n", "3"])
            .arg(&exe);
        let out = run_command(run, JOB_TIMEOUT);
        assert!(out.status.success(), "{wrapper}: {}", out.describe());
        assert_eq!(out.stdout.trim(), want, "{wrapper}: {}", out.describe());
    }
}

#[test]
fn a_prefix_installation_stands_on_its_own() {
    let work = scratch("install-prefix");
    let prefix = work.join("prefix");
    must(
        install_script()
            .arg("--prefix")
            .arg(&prefix)
            .arg("--no-build"),
    );
    let lib = prefix.join("lib");
    for file in [
        "bin/tandem",
        "bin/mpicc",
        "bin/mpiCC",
        "bin/mpifort",
        "bin/mpiexec",
        "lib/libmpi_abi.so.1.0.0",
        "lib/libmpi_abi.so.1",
        "lib/libmpi_abi.so",
        "lib/libmpi_abi.a",
        "lib/pkgconfig/mpi.pc",
        "include/mpi.h",
        "include/mpif.h",
        "include/fortran/mpi_f08.f90",
        "share/man/man1/tandem-run.1.gz",
        "share/man/man1/mpirun.1.gz",
    ] {
        assert!(prefix.join(file).exists(), "{file} is not installed");
    }
    let soname = must(
        Command::new("readelf")
            .arg("-d")
            .arg(lib.join("libmpi_abi.so.1.0.0")),
    );
    assert!(
        soname.contains("Library soname: [libmpi_abi.so.1]"),
        "{soname}"
    );
    // Stripped: a fraction of the build tree's library.
    let size = std::fs::metadata(lib.join("libmpi_abi.so.1.0.0"))
        .unwrap()
        .len();
    assert!(size < 12 << 20, "libmpi_abi.so is {size} bytes");
    build_and_run_with(&prefix.join("bin"), &lib, &work);
    if have("pkg-config") {
        let flags = must(
            Command::new("pkg-config")
                .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
                .args(["--cflags", "--libs", "mpi"]),
        );
        let include = flags
            .split_whitespace()
            .find_map(|w| w.strip_prefix("-I"))
            .unwrap_or_else(|| panic!("no -I in {flags}"));
        assert_eq!(
            Path::new(include).canonicalize().unwrap(),
            prefix.join("include").canonicalize().unwrap(),
            "{flags}"
        );
    }
    // CMake's FindMPI, pointed at the prefix, takes Tandem for C, C++ and
    // ctest.
    common::cmake_ctest(
        &work.join("cmake"),
        &[format!("-DMPI_HOME={}", prefix.display())],
        None,
        &prefix.join("bin/mpiexec"),
        &lib,
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn the_debian_package_unpacks_into_a_working_installation() {
    if !have("dpkg-deb") {
        eprintln!("skipping: dpkg-deb is not installed");
        return;
    }
    let work = scratch("install-deb");
    let said = must(install_script().args(["--deb", "--no-build"]));
    let deb = said
        .split_whitespace()
        .find(|w| w.ends_with(".deb"))
        .map(|w| repo_root().join(w))
        .unwrap_or_else(|| panic!("no package named in: {said}"));
    let fields = must(
        Command::new("dpkg-deb")
            .arg("-f")
            .arg(&deb)
            .args(["Package", "Architecture"]),
    );
    assert!(fields.contains("Package: tandem-mpi"), "{fields}");
    let root = work.join("root");
    must(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    // Debian's own mpicc and mpirun stay Debian's: only `tandem` is in /usr/bin.
    let usr_bin: Vec<String> = std::fs::read_dir(root.join("usr/bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(usr_bin, vec!["tandem".to_string()]);
    let opt = root.join("opt/tandem");
    build_and_run_with(&opt.join("bin"), &opt.join("lib"), &work);
    let _ = std::fs::remove_dir_all(&work);
}

//! Living beside other MPI libraries: ranks get the variables their
//! launchers set (which wrapper scripts read to pick a GPU or a CPU per
//! rank), and a program built against one of them is refused by name
//! instead of running as unrelated one-rank jobs.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{have, must, run, run_command, scratch, TANDEM};

const JOB_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn ranks_see_the_variables_other_launchers_set() {
    let dir = scratch("conventional-env");
    let src = dir.join("env.c");
    std::fs::write(
        &src,
        r#"#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static const char *get(const char *n) { const char *v = getenv(n); return v ? v : "-"; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("%d %s %s %s %s %s %s %s %s\n", rank, get("OMPI_COMM_WORLD_RANK"),
           get("OMPI_COMM_WORLD_SIZE"), get("OMPI_COMM_WORLD_LOCAL_RANK"),
           get("OMPI_COMM_WORLD_LOCAL_SIZE"), get("PMI_RANK"), get("PMI_SIZE"),
           get("MPI_LOCALRANKID"), get("MPI_LOCALNRANKS"));
    MPI_Finalize();
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("env");
    must(Command::new(TANDEM).arg("cc").arg(&src).arg("-o").arg(&exe));
    let out = run(3, &[], &exe, &[], JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "0 0 3 0 3 0 3 0 3",
            "1 1 3 1 3 1 3 1 3",
            "2 2 3 2 3 2 3 2 3"
        ],
        "{}",
        out.describe()
    );
    // A replica is its rank; its host has every process of the job.
    let out = run(2, &["--replicas", "2"], &exe, &[], JOB_TIMEOUT);
    assert!(out.status.success(), "{}", out.describe());
    for line in out.stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[1], words[0], "{line}");
        assert_eq!((words[2], words[4]), ("2", "4"), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_program_built_against_another_mpi_is_refused_by_name() {
    let dir = scratch("foreign-mpi");
    // A stand-in for Open MPI's library: what the program records is its name.
    let lib_src = dir.join("fake.c");
    std::fs::write(
        &lib_src,
        "int MPI_Init(int *c, char ***v) { (void)c; (void)v; return 0; }\n",
    )
    .unwrap();
    must(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libmpi.so.40", "-o"])
            .arg(dir.join("libmpi.so.40"))
            .arg(&lib_src),
    );
    let prog_src = dir.join("prog.c");
    std::fs::write(
        &prog_src,
        "int MPI_Init(int *, char ***);\nint main(int c, char **v) { return MPI_Init(&c, &v); }\n",
    )
    .unwrap();
    let exe = dir.join("prog");
    must(
        Command::new("cc")
            .arg(&prog_src)
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", dir.display()))
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .arg("-l:libmpi.so.40"),
    );
    let mut cmd = Command::new(TANDEM);
    cmd.args(["run", "-n", "2"]).arg(&exe);
    let out = run_command(cmd, JOB_TIMEOUT);
    assert_eq!(out.status.code(), Some(1), "{}", out.describe());
    assert!(
        out.stderr
            .contains("was built against Open MPI (it needs libmpi.so.40), not Tandem"),
        "{}",
        out.describe()
    );
    assert!(out.stdout.is_empty(), "{}", out.describe());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Another MPI's launcher that is a PMIx server (Open MPI's mpirun) starts
/// a Tandem program as one job: the ranks learn rank, size and each other
/// through PMIx. Skipped where Open MPI is not installed.
#[test]
fn another_launcher_speaking_pmix_starts_a_tandem_job() {
    if !have("mpirun.openmpi") {
        eprintln!("SKIP: Open MPI's mpirun is not installed (it serves PMIx to its processes)");
        return;
    }
    let prog = common::compile("coll_all");
    let mut cmd = Command::new("mpirun.openmpi");
    cmd.args(["--oversubscribe", "-n", "3"])
        .arg(&prog)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = run_command(cmd, JOB_TIMEOUT);
    common::assert_pass(&out, "coll_all");
}

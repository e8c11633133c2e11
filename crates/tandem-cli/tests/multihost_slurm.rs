//! Under Slurm: a one-machine cluster (slurmctld and slurmd with a minimal
//! configuration of their own, on loopback ports, authentication off) runs
//! Tandem programs through `srun --mpi=pmi2` and `srun --mpi=pmix` with no
//! `tandem run`: ranks find each other through PMI-2 or PMIx, a job passes, a rank's exit status comes
//! back through srun, and srun without PMI-2 is a clear error.
//!
//! Skips (saying so) where Slurm is not installed (scripts/setup.sh installs
//! it) or its daemons cannot start here (not root). Every step is bounded.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_pass, compile, compile_source, run_command};

const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// The daemons of the test cluster; stopped on drop.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe { libc::kill(d.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for d in &mut self.daemons {
            while d.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn found(program: &str) -> bool {
    [
        "/usr/bin",
        "/usr/sbin",
        "/usr/local/bin",
        "/usr/local/sbin",
        "/bin",
        "/sbin",
    ]
    .iter()
    .any(|d| Path::new(d).join(program).exists())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn short_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its length.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    name.split('.').next().unwrap_or("localhost").to_string()
}

/// Starts the cluster, or says why it cannot run here.
fn start_cluster() -> Result<Cluster, String> {
    for p in ["slurmctld", "slurmd", "srun", "sinfo"] {
        if !found(p) {
            return Err(format!(
                "{p} is not installed (apt-get install slurmctld slurmd slurm-client)"
            ));
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the Slurm daemons need root".into());
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["state", "spool"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
    }
    let host = short_hostname();
    let d = dir.display();
    let conf = dir.join("slurm.conf");
    let text = format!(
        "ClusterName=tandemtest\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmctldPort={}\n\
         SlurmdPort={}\n\
         SlurmUser=root\nSlurmdUser=root\n\
         AuthType=auth/none\nCredType=cred/none\n\
         StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
         ProctrackType=proctrack/pgid\nTaskPlugin=task/none\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
         SchedulerType=sched/builtin\nMpiDefault=none\nReturnToService=2\n\
         JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
         SlurmdParameters=config_overrides\n\
         NodeName={host} NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000 State=UNKNOWN\n\
         PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
        free_port(),
        free_port()
    );
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    let mut cluster = Cluster {
        dir,
        conf,
        daemons: Vec::new(),
    };
    for (daemon, args) in [
        ("slurmctld", &["-D", "-c", "-i"][..]),
        ("slurmd", &["-D"][..]),
    ] {
        let child = Command::new(daemon)
            .args(args)
            .arg("-f")
            .arg(&cluster.conf)
            .env("SLURM_CONF", &cluster.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {daemon}: {e}"))?;
        cluster.daemons.push(child);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("sinfo")
            .args(["-h", "-o", "%T"])
            .env("SLURM_CONF", &cluster.conf)
            .output();
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle") {
            return Ok(cluster);
        }
        for d in &mut cluster.daemons {
            if let Ok(Some(status)) = d.try_wait() {
                return Err(format!(
                    "a Slurm daemon exited at start ({status}); logs in {}",
                    cluster.dir.display()
                ));
            }
        }
        if Instant::now() >= deadline {
            let log = std::fs::read_to_string(cluster.dir.join("slurmd.log")).unwrap_or_default();
            return Err(format!(
                "the node did not become idle within 30 s; slurmd.log:\n{log}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn srun(cluster: &Cluster, args: &[&str], prog: &Path) -> common::Outcome {
    let mut cmd = Command::new("srun");
    cmd.env("SLURM_CONF", &cluster.conf)
        .args(["--immediate=30", "--kill-on-bad-exit=1"])
        .args(args)
        .arg(prog);
    run_command(cmd, JOB_TIMEOUT)
}

const EXIT_STATUS_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
/* Every rank finalizes; rank 1 then exits with status 3. */
int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d of %d\n", rank, size);
    MPI_Finalize();
    return rank == 1 ? 3 : 0;
}
"#;

/// Whether this Slurm has the process-management interface `name`.
fn has_mpi_plugin(cluster: &Cluster, name: &str) -> bool {
    Command::new("srun")
        .env("SLURM_CONF", &cluster.conf)
        .arg("--mpi=list")
        .output()
        .is_ok_and(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.split_whitespace().any(|w| w.trim_matches(',') == name)
        })
}

/// Under PMI-2 and PMIx (where Slurm has its plugin), Tandem programs run
/// with no `tandem run`.
const SHARED_SEGMENT_C: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <string.h>
/* Prints whether this rank maps its host's shared-memory segment (a memfd
 * named tandem-shm in /proc/self/maps) once MPI_Init is done. */
int main(int argc, char **argv)
{
    int rank, found = 0;
    char line[512];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        found |= strstr(line, "memfd:tandem-shm") != NULL;
    if (maps)
        fclose(maps);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d shared segment %s\n", rank, found ? "yes" : "no");
    MPI_Finalize();
    return 0;
}
"#;

#[test]
fn srun_with_pmi2_and_pmix_runs_tandem_programs() {
    let cluster = match start_cluster() {
        Ok(c) => c,
        Err(why) => {
            eprintln!(
                "SKIP srun_with_pmi2_and_pmix_runs_tandem_programs: Slurm cannot run here: {why}"
            );
            return;
        }
    };
    let src = Path::new(env!("CARGO_TARGET_TMPDIR")).join("slurm_exit_status.c");
    std::fs::write(&src, EXIT_STATUS_C).unwrap();
    let exit_status = compile_source(&src, "slurm_exit_status");
    let coll_all = compile("coll_all");
    let src = Path::new(env!("CARGO_TARGET_TMPDIR")).join("slurm_shared_segment.c");
    std::fs::write(&src, SHARED_SEGMENT_C).unwrap();
    let segment_probe = compile_source(&src, "slurm_shared_segment");
    for interface in ["pmi2", "pmix"] {
        if interface == "pmix" && !has_mpi_plugin(&cluster, "pmix") {
            eprintln!("SKIP srun --mpi=pmix: this Slurm has no PMIx plugin");
            continue;
        }
        let mpi = format!("--mpi={interface}");
        // A job passes: collectives over the ranks the server told about
        // each other.
        let outcome = srun(&cluster, &["-n", "4", &mpi], &coll_all);
        assert_pass(&outcome, "coll_all");

        // A rank's exit status comes back through srun.
        let outcome = srun(&cluster, &["-n", "2", &mpi], &exit_status);
        assert_eq!(outcome.code(), Some(3), "{mpi}: {}", outcome.describe());
        assert!(
            outcome.has_line("rank 0 of 2") && outcome.has_line("rank 1 of 2"),
            "{mpi}: {}",
            outcome.describe()
        );

        // Under PMIx the ranks of a node share memory (the first makes the
        // segment and hands it to the others); under PMI-2 they talk TCP.
        let outcome = srun(&cluster, &["-n", "3", &mpi], &segment_probe);
        let shared = if interface == "pmix" { "yes" } else { "no" };
        for r in 0..3 {
            assert!(
                outcome.has_line(&format!("rank {r} shared segment {shared}")),
                "{mpi}: {}",
                outcome.describe()
            );
        }
    }

    // Without a process-management interface the ranks say what is
    // missing instead of running alone.
    let outcome = srun(&cluster, &["-n", "2", "--mpi=none"], &coll_all);
    assert!(!outcome.status.success(), "{}", outcome.describe());
    assert!(
        outcome.stderr.contains("--mpi=pmix") && outcome.stderr.contains("--mpi=pmi2"),
        "{}",
        outcome.describe()
    );
}

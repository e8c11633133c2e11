//! The MPI libraries a kernel can be built and run with: Tandem itself,
//! Debian's Open MPI and MPICH, or any MPI given by the path of its C
//! compiler wrapper. Each knows its compiler, its launcher, the flags a
//! launcher needs (more ranks than cores, root, a transport forced) and how
//! to install it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the `tandem` command running the bench finds Tandem's `mpi.h`, or
/// why it cannot (given once, to [`crate::main`]).
static TANDEM_INCLUDE_DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();

pub(crate) fn set_tandem_include_dir(dir: Result<PathBuf, String>) {
    let _ = TANDEM_INCLUDE_DIR.set(dir);
}

/// Tandem's header directory; an error if Tandem's header and library
/// cannot be found, or the bench runs outside the `tandem` command.
fn tandem_include_dir() -> Result<PathBuf, String> {
    TANDEM_INCLUDE_DIR
        .get()
        .cloned()
        .unwrap_or_else(|| Err("Tandem is measured through the tandem command only".into()))
}

/// The families of MPI launchers, which take different options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Tandem,
    OpenMpi,
    Mpich,
}

/// One MPI library, ready to build and launch kernels.
#[derive(Clone, Debug)]
pub struct Library {
    /// Short name used in tables: tandem, openmpi, mpich, or the wrapper's
    /// file name.
    pub name: String,
    pub family: Family,
    /// The compiler wrapper command (words).
    pub cc: Vec<OsString>,
    /// The launcher command (words) before the rank count.
    pub launcher: Vec<OsString>,
    /// Processes per rank (Tandem's `--replicas`); 1: unreplicated.
    pub replicas: u32,
    /// One replica of one rank is killed halfway through each launch (see
    /// [`Library::replicated`]; kernels that measure a time to solution).
    pub kill_halfway: bool,
}

/// Ranks placed on other hosts: the launcher started inside `enter` (a
/// command prefix, such as `ip netns exec HOST0`), `tandem run` with
/// `--host hosts`, `--agent agent` and parameters `set`; Open MPI's
/// `mpirun` with `--host hosts`, the remote shell `rsh_agent` (a script
/// that runs the command it is handed inside the host) and TCP on
/// `network` alone.
#[derive(Clone, Debug)]
pub struct Placement {
    pub enter: Vec<String>,
    pub hosts: String,
    pub agent: String,
    pub set: Vec<(String, String)>,
    /// The hosts' network (CIDR).
    pub network: String,
    /// Open MPI's `plm_rsh_agent` (None: Open MPI cannot be placed).
    pub rsh_agent: Option<PathBuf>,
    /// What the hosts are, for tables and JSON.
    pub describe: String,
}

/// Which transport to force for a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Each library's default (shared memory where it has it).
    Default,
    /// TCP only (Tandem today, and what makes a fair comparison with it).
    Tcp,
    /// Shared memory within the host.
    Shm,
    /// Any other name: passed to Tandem's `transports` parameter.
    Other(String),
}

impl Transport {
    pub fn parse(text: &str) -> Transport {
        match text {
            "default" | "any" => Transport::Default,
            "tcp" => Transport::Tcp,
            "shm" => Transport::Shm,
            other => Transport::Other(other.to_string()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Transport::Default => "default",
            Transport::Tcp => "tcp",
            Transport::Shm => "shm",
            Transport::Other(s) => s,
        }
    }
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn install_hint(family: Family) -> &'static str {
    match family {
        Family::OpenMpi => "apt-get install openmpi-bin libopenmpi-dev",
        Family::Mpich => "apt-get install mpich libmpich-dev",
        Family::Tandem => "cargo build --release (in the Tandem source tree)",
    }
}

/// Resolves `tandem`, `rwapi` (Tandem, RWAPI variant of the kernel),
/// `openmpi`, `mpich` or the path of an MPI C compiler wrapper.
pub fn resolve(spec: &str) -> Result<Library, String> {
    match spec {
        // `rwapi`: Tandem running a kernel's RWAPI variant (Ben Fredj and
        // Renault's remote writes), to set beside MPI send/receive.
        "tandem" | "rwapi" => {
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot find the running tandem executable: {e}"))?;
            tandem_include_dir()?;
            Ok(Library {
                name: spec.into(),
                family: Family::Tandem,
                cc: vec![exe.clone().into(), "cc".into()],
                launcher: vec![exe.into(), "run".into()],
                replicas: 1,
                kill_halfway: false,
            })
        }
        "openmpi" | "open-mpi" | "ompi" => {
            let (cc, run) = (which("mpicc.openmpi"), which("mpirun.openmpi"));
            match (cc, run) {
                (Some(cc), Some(run)) => Ok(Library {
                    name: "openmpi".into(),
                    family: Family::OpenMpi,
                    cc: vec![cc.into()],
                    launcher: vec![run.into()],
                    replicas: 1,
                    kill_halfway: false,
                }),
                _ => Err(format!(
                    "Open MPI is not installed (no mpicc.openmpi / mpirun.openmpi on PATH): {}",
                    install_hint(Family::OpenMpi)
                )),
            }
        }
        "mpich" => {
            let (cc, run) = (which("mpicc.mpich"), which("mpirun.mpich"));
            match (cc, run) {
                (Some(cc), Some(run)) => Ok(Library {
                    name: "mpich".into(),
                    family: Family::Mpich,
                    cc: vec![cc.into()],
                    launcher: vec![run.into()],
                    replicas: 1,
                    kill_halfway: false,
                }),
                _ => Err(format!(
                    "MPICH is not installed (no mpicc.mpich / mpirun.mpich on PATH): {}",
                    install_hint(Family::Mpich)
                )),
            }
        }
        path if path.contains('/') => custom(Path::new(path)),
        other => Err(format!(
            "unknown MPI '{other}': expected tandem, rwapi, openmpi, mpich or the path of an MPI C compiler wrapper (e.g. /opt/mpi/bin/mpicc)"
        )),
    }
}

/// The other MPI libraries installed here, in a fixed order: Debian's
/// Open MPI and MPICH where their compiler wrapper and launcher are on
/// PATH.
pub fn detect() -> Vec<Library> {
    ["openmpi", "mpich"]
        .into_iter()
        .filter_map(|name| resolve(name).ok())
        .collect()
}

/// The libraries a `--mpi` list names; `auto` stands for Tandem and every
/// library [`detect`] finds.
pub fn resolve_list(list: &str) -> Result<Vec<Library>, String> {
    let mut libs: Vec<Library> = Vec::new();
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let more = if word == "auto" {
            let mut v = vec![resolve("tandem")?];
            v.extend(detect());
            v
        } else {
            vec![resolve(word)?]
        };
        for l in more {
            if !libs.iter().any(|x| x.name == l.name) {
                libs.push(l);
            }
        }
    }
    if libs.is_empty() {
        return Err("--mpi: no library named".into());
    }
    Ok(libs)
}

/// An MPI given by its compiler wrapper: its family from the wrapper's
/// options, its launcher beside it (mpicc.X -> mpirun.X, else mpirun or
/// mpiexec).
fn custom(cc: &Path) -> Result<Library, String> {
    if !cc.is_file() {
        return Err(format!("{}: no such compiler wrapper", cc.display()));
    }
    let shows = |flag: &str| {
        Command::new(cc)
            .arg(flag)
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
    };
    let family = if shows("--showme") {
        Family::OpenMpi
    } else if shows("-show") {
        Family::Mpich
    } else {
        return Err(format!(
            "{}: not an Open MPI (--showme) or MPICH-style (-show) compiler wrapper",
            cc.display()
        ));
    };
    let dir = cc.parent().unwrap_or(Path::new("."));
    let file = cc
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut candidates = Vec::new();
    if let Some(suffix) = file.strip_prefix("mpicc") {
        candidates.push(format!("mpirun{suffix}"));
        candidates.push(format!("mpiexec{suffix}"));
    }
    candidates.push("mpirun".into());
    candidates.push("mpiexec".into());
    let run = candidates
        .iter()
        .map(|c| dir.join(c))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("no mpirun or mpiexec beside {}", cc.display()))?;
    Ok(Library {
        name: file,
        family,
        cc: vec![cc.into()],
        launcher: vec![run.into()],
        replicas: 1,
        kill_halfway: false,
    })
}

impl Library {
    /// This Tandem library with every rank run as `replicas` processes
    /// (`tandem run --replicas`), named `NAME-rR`; with `kill_halfway`, one
    /// replica of one rank is killed halfway through each launch, named
    /// `NAME-rR-kill`. The kernel is the same executable.
    pub fn replicated(&self, replicas: u32, kill_halfway: bool) -> Library {
        let mut lib = Library {
            replicas,
            kill_halfway,
            ..self.clone()
        };
        lib.name = format!("{}{}", self.base_name(), lib.variant_suffix());
        lib
    }

    fn variant_suffix(&self) -> String {
        let mut s = String::new();
        if self.replicas > 1 {
            s.push_str(&format!("-r{}", self.replicas));
        }
        if self.kill_halfway {
            s.push_str("-kill");
        }
        s
    }

    /// The library's name without its replication suffix: what the kernel
    /// is built with.
    pub fn base_name(&self) -> &str {
        self.name
            .strip_suffix(&self.variant_suffix())
            .unwrap_or(&self.name)
    }

    /// Text that identifies the wrapper's configuration, for the build
    /// cache key: what it would run, and for Tandem the header.
    pub fn identity(&self) -> String {
        let mut id = format!("{:?}", self.cc);
        let flag = match self.family {
            Family::Tandem => "--showme",
            Family::OpenMpi => "--showme",
            Family::Mpich => "-show",
        };
        if let Ok(out) = Command::new(&self.cc[0])
            .args(&self.cc[1..])
            .arg(flag)
            .output()
        {
            id.push_str(&String::from_utf8_lossy(&out.stdout));
        }
        if self.family == Family::Tandem {
            if let Ok(include_dir) = tandem_include_dir() {
                if let Ok(h) = std::fs::read(include_dir.join("mpi.h")) {
                    id.push_str(&format!("{:016x}", super::build::fnv1a(&h)));
                }
            }
        }
        id
    }

    /// The launch command for `np` ranks of `program args`, with library
    /// parameters `lib_set` (NAME=VALUE), a forced transport and, for
    /// Tandem, a placement on other hosts. Returns the argv and the
    /// environment to add.
    pub fn launch_command(
        &self,
        np: u32,
        lib_set: &[(String, String)],
        transport: &Transport,
        program: &Path,
        args: &[String],
        placement: Option<&Placement>,
    ) -> (Vec<OsString>, Vec<(String, String)>) {
        let mut argv = self.launcher.clone();
        let mut env = Vec::new();
        match self.family {
            Family::Tandem => {
                argv.push("-n".into());
                argv.push(np.to_string().into());
                if self.replicas > 1 {
                    argv.push("--replicas".into());
                    argv.push(self.replicas.to_string().into());
                }
                if let Some(p) = placement {
                    let mut entered: Vec<OsString> = p.enter.iter().map(OsString::from).collect();
                    entered.append(&mut argv);
                    argv = entered;
                    argv.extend(["--host", &p.hosts, "--agent", &p.agent].map(OsString::from));
                    for (k, v) in &p.set {
                        argv.push("--set".into());
                        argv.push(format!("{k}={v}").into());
                    }
                }
                match transport {
                    Transport::Default => {}
                    t => {
                        argv.push("--set".into());
                        argv.push(format!("transports={}", t.name()).into());
                    }
                }
                for (k, v) in lib_set {
                    argv.push("--set".into());
                    argv.push(format!("{k}={v}").into());
                }
            }
            Family::OpenMpi => {
                env.push(("OMPI_ALLOW_RUN_AS_ROOT".into(), "1".into()));
                env.push(("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".into(), "1".into()));
                argv.push("--oversubscribe".into());
                argv.push("-n".into());
                argv.push(np.to_string().into());
                if let Some(p) = placement {
                    // mpirun runs in the first host and starts its daemons
                    // in the others through the agent; TCP on the hosts'
                    // network only, and no binding (the hosts share cores).
                    let mut entered: Vec<OsString> = p.enter.iter().map(OsString::from).collect();
                    entered.append(&mut argv);
                    argv = entered;
                    argv.extend(["--host", &p.hosts, "--bind-to", "none"].map(OsString::from));
                    if let Some(agent) = &p.rsh_agent {
                        argv.extend(["--mca", "plm_rsh_agent"].map(OsString::from));
                        argv.push(agent.into());
                    }
                    for key in ["btl_tcp_if_include", "oob_tcp_if_include"] {
                        argv.extend(["--mca", key, &p.network].map(OsString::from));
                    }
                }
                match transport {
                    Transport::Tcp => {
                        argv.extend(["--mca", "btl", "tcp,self"].map(OsString::from));
                    }
                    Transport::Shm => {
                        argv.extend(["--mca", "btl", "vader,self"].map(OsString::from));
                    }
                    _ => {}
                }
                for (k, v) in lib_set {
                    argv.push("--mca".into());
                    argv.push(k.into());
                    argv.push(v.into());
                }
            }
            Family::Mpich => {
                argv.push("-n".into());
                argv.push(np.to_string().into());
                match transport {
                    Transport::Tcp => {
                        env.push(("MPIR_CVAR_NOLOCAL".into(), "1".into()));
                        env.push(("UCX_TLS".into(), "tcp,self".into()));
                    }
                    Transport::Shm => {
                        env.push(("MPIR_CVAR_NOLOCAL".into(), "0".into()));
                    }
                    _ => {}
                }
                for (k, v) in lib_set {
                    env.push((k.clone(), v.clone()));
                }
            }
        }
        argv.push(program.into());
        argv.extend(args.iter().map(OsString::from));
        (argv, env)
    }

    /// How a library parameter given with --set reaches this library, for
    /// messages.
    pub fn set_explanation(&self) -> &'static str {
        match self.family {
            Family::Tandem => "passed to `tandem run --set`",
            Family::OpenMpi => "passed as `--mca NAME VALUE`",
            Family::Mpich => "set in the environment (MPICH reads MPIR_CVAR_* variables)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_missing_libraries_explain() {
        let e = resolve("lam").unwrap_err();
        assert!(e.contains("tandem, rwapi, openmpi, mpich"), "{e}");
        let e = resolve("/nonexistent/mpicc").unwrap_err();
        assert!(e.contains("no such compiler wrapper"), "{e}");
        assert!(install_hint(Family::OpenMpi).starts_with("apt-get install"));
    }

    #[test]
    fn detection_finds_the_installed_libraries() {
        let on_path = |p: &str| which(p).is_some();
        let found: Vec<String> = detect().into_iter().map(|l| l.name).collect();
        let expected: Vec<&str> = [("openmpi", "openmpi"), ("mpich", "mpich")]
            .into_iter()
            .filter(|(_, suffix)| {
                on_path(&format!("mpicc.{suffix}")) && on_path(&format!("mpirun.{suffix}"))
            })
            .map(|(name, _)| name)
            .collect();
        assert_eq!(found, expected);
        // auto: Tandem first, then those; named twice, listed once.
        if let Ok(libs) = resolve_list("auto,openmpi") {
            let names: Vec<&str> = libs.iter().map(|l| l.name.as_str()).collect();
            assert_eq!(names[0], "tandem");
            assert_eq!(&names[1..], expected.as_slice());
        }
        assert!(resolve_list(" , ").unwrap_err().contains("no library"));
    }

    #[test]
    fn launch_flags_per_family() {
        let lib = Library {
            name: "openmpi".into(),
            family: Family::OpenMpi,
            cc: vec!["mpicc".into()],
            launcher: vec!["mpirun".into()],
            replicas: 1,
            kill_halfway: false,
        };
        let set = vec![("coll_tuned_use_dynamic_rules".to_string(), "1".to_string())];
        let (argv, env) = lib.launch_command(
            4,
            &set,
            &Transport::Tcp,
            Path::new("/k"),
            &["a=1".into()],
            None,
        );
        let words: Vec<String> = argv
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            words.join(" "),
            "mpirun --oversubscribe -n 4 --mca btl tcp,self --mca coll_tuned_use_dynamic_rules 1 /k a=1"
        );
        assert!(env.iter().any(|(k, _)| k == "OMPI_ALLOW_RUN_AS_ROOT"));
        let tandem = Library {
            family: Family::Tandem,
            launcher: vec!["tandem".into(), "run".into()],
            ..lib
        };
        let (argv, _) = tandem.launch_command(2, &[], &Transport::Tcp, Path::new("/k"), &[], None);
        let words: Vec<String> = argv
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(words.join(" "), "tandem run -n 2 --set transports=tcp /k");
        let placement = Placement {
            enter: vec!["ip".into(), "netns".into(), "exec".into(), "h0".into()],
            hosts: "h0:1,h1:1".into(),
            agent: "ip netns exec {host}".into(),
            set: vec![("tcp_if_include".into(), "10.231.0.0/24".into())],
            network: "10.231.0.0/24".into(),
            rsh_agent: Some("/cache/agent".into()),
            describe: String::new(),
        };
        let (argv, _) = tandem.launch_command(
            2,
            &[],
            &Transport::Tcp,
            Path::new("/k"),
            &[],
            Some(&placement),
        );
        let words: Vec<String> = argv
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            words,
            [
                "ip",
                "netns",
                "exec",
                "h0",
                "tandem",
                "run",
                "-n",
                "2",
                "--host",
                "h0:1,h1:1",
                "--agent",
                "ip netns exec {host}",
                "--set",
                "tcp_if_include=10.231.0.0/24",
                "--set",
                "transports=tcp",
                "/k"
            ]
        );
    }

    #[test]
    fn replicated_variants_and_placed_open_mpi() {
        let tandem = Library {
            name: "tandem".into(),
            family: Family::Tandem,
            cc: vec!["tandem".into(), "cc".into()],
            launcher: vec!["tandem".into(), "run".into()],
            replicas: 1,
            kill_halfway: false,
        };
        let r2 = tandem.replicated(2, false);
        let kill = r2.replicated(2, true);
        assert_eq!(
            (r2.name.as_str(), kill.name.as_str()),
            ("tandem-r2", "tandem-r2-kill")
        );
        assert_eq!((r2.base_name(), kill.base_name()), ("tandem", "tandem"));
        assert_eq!(tandem.base_name(), "tandem");
        let words = |argv: Vec<OsString>| -> String {
            argv.iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (argv, _) = kill.launch_command(2, &[], &Transport::Tcp, Path::new("/k"), &[], None);
        assert_eq!(
            words(argv),
            "tandem run -n 2 --replicas 2 --set transports=tcp /k"
        );
        let placement = Placement {
            enter: vec!["ip".into(), "netns".into(), "exec".into(), "h0".into()],
            hosts: "h0:1,h1:1".into(),
            agent: "ip netns exec {host}".into(),
            set: vec![],
            network: "10.231.0.0/24".into(),
            rsh_agent: Some("/cache/agent".into()),
            describe: String::new(),
        };
        let ompi = Library {
            name: "openmpi".into(),
            family: Family::OpenMpi,
            cc: vec!["mpicc".into()],
            launcher: vec!["mpirun".into()],
            replicas: 1,
            kill_halfway: false,
        };
        let (argv, _) = ompi.launch_command(
            2,
            &[],
            &Transport::Tcp,
            Path::new("/k"),
            &[],
            Some(&placement),
        );
        assert_eq!(
            words(argv),
            "ip netns exec h0 mpirun --oversubscribe -n 2 --host h0:1,h1:1 --bind-to none \
             --mca plm_rsh_agent /cache/agent --mca btl_tcp_if_include 10.231.0.0/24 \
             --mca oob_tcp_if_include 10.231.0.0/24 --mca btl tcp,self /k"
        );
    }
}

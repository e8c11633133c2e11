//! The names build systems and scripts look for: `mpicc`, `mpicxx`
//! (`mpic++`, `mpiCC`), `mpifort` (`mpif90`, `mpif77`), `mpirun` and `mpiexec` are links to `tandem` (the
//! build makes them next to it, see build.rs) and this module dispatches on
//! the name, accepting the flags common to Open MPI's and MPICH's wrappers:
//!
//! * compilers: `--showme` / `-show` (the whole command),
//!   `--showme:compile`, `--showme:link`, `--showme:incdirs`,
//!   `--showme:libdirs`, `--showme:libs`, `--showme:version`,
//!   `-compile-info`, `-link-info`; everything else goes to the compiler;
//! * launchers: `-n`/`-np`/`-c`, `-H`/`--host`/`-hosts`,
//!   `--hostfile`/`-hostfile`/`-f`/`--machinefile`, `-x VAR[=VAL]`,
//!   `-genv VAR VAL`, `--map-by slot|node|ppr:N:node|socket`, `--bynode`,
//!   `--byslot`, `-ppn`/`--npernode`/`-N`, `-wdir`, `--bind-to
//!   core|socket|none`, `--cpus-per-proc N`,
//!   `--prefix DIR` (DIR/bin/tandem on the other hosts), `--tag-output`,
//!   `--timeout S`, `--launch-agent CMD` (or `--mca plm_rsh_agent CMD`),
//!   tandem's own `--set`, `--agent`; `--rank-by` is accepted with a
//!   warning; options that only tune other MPIs (`--mca`,
//!   `--oversubscribe`, `--allow-run-as-root`, ...) are accepted and
//!   ignored.

use std::ffi::OsString;
use std::path::Path;

use crate::compiler::{self, Language};
use crate::install_layout::{self, LIBRARY_NAME};
use crate::launcher::{self, RunOptions};

/// What the name asks for, if it is one of the MPI names.
pub fn dispatch(argv0: &OsString, args: Vec<OsString>) -> Option<i32> {
    let name = Path::new(argv0).file_name()?.to_string_lossy().into_owned();
    match name.as_str() {
        "mpicc" => Some(compiler_wrapper(Language::C, args)),
        "mpicxx" | "mpic++" | "mpiCC" => Some(compiler_wrapper(Language::Cxx, args)),
        "mpifort" | "mpif90" | "mpif77" => Some(compiler_wrapper(Language::Fortran, args)),
        "mpirun" | "mpiexec" => Some(mpirun(&name, args)),
        _ => None,
    }
}

/// The compiler wrapper with every flag the common MPIs' wrappers take
/// (also what `tandem cc` and `tandem cxx` run).
pub fn compiler_wrapper(language: Language, args: Vec<OsString>) -> i32 {
    let info = args.iter().find_map(|a| {
        let a = a.to_str()?;
        match a {
            "--showme:compile" | "-showme:compile" | "--showme:incdirs" | "-showme:incdirs"
            | "--showme:link" | "-showme:link" | "--showme:libdirs" | "-showme:libdirs"
            | "--showme:libs" | "-showme:libs" | "--showme:version" | "-showme:version" => {
                Some(a.trim_start_matches('-').to_string())
            }
            _ => None,
        }
    });
    if let Some(what) = info {
        let layout = match install_layout::locate() {
            Ok(l) => l,
            Err(msg) => {
                eprintln!("tandem: {msg}");
                return 1;
            }
        };
        let compiler = language.compiler_command();
        let extra = match compiler::language_flags(language, &compiler, &layout) {
            Ok(f) => f,
            Err(msg) => {
                eprintln!("tandem: {msg}");
                return 1;
            }
        };
        let extra: Vec<String> = extra
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        let mut inc = layout.include_dir.display().to_string();
        let mut compile = format!("-I{inc}");
        for f in &extra {
            compile.push(' ');
            compile.push_str(f);
            if let Some(dir) = f.strip_prefix("-I") {
                inc.push(' ');
                inc.push_str(dir);
            }
        }
        let lib = layout.lib_dir.display().to_string();
        let line = match what.as_str() {
            "showme:compile" => compile,
            "showme:incdirs" => inc,
            "showme:link" => format!("-L{lib} -Wl,-rpath,{lib} -l{LIBRARY_NAME}"),
            "showme:libdirs" => lib,
            "showme:libs" => LIBRARY_NAME.to_string(),
            _ => format!(
                "Tandem {} (MPI 5.0 standard ABI)",
                env!("CARGO_PKG_VERSION")
            ),
        };
        println!("{line}");
        return 0;
    }
    // MPICH's forms print the whole command (for a compile step or a link).
    let mut out = Vec::new();
    let mut show = false;
    for a in args {
        match a.to_str() {
            Some("-show" | "--show" | "-showme" | "--showme") => show = true,
            Some("-compile-info") => {
                show = true;
                out.push(OsString::from("-c"));
            }
            Some("-link-info") => show = true,
            _ => out.push(a),
        }
    }
    if show {
        out.push(OsString::from("--showme"));
    }
    compiler::run(language, out)
}

const RUN_USAGE: &str =
    "usage: {launcher} [-n N] [-H HOST[:SLOTS],...] [--hostfile FILE] [-x VAR[=VALUE]] \
[--map-by slot|node|ppr:N:node|socket] [-ppn N] [--bind-to core|socket|none] [--cpus-per-proc N] [-wdir DIR] [--tag-output] [--timeout S] [--agent CMD] \
[--set NAME=VALUE] PROGRAM [ARGS...]
(Tandem's launcher under the mpirun/mpiexec name; `tandem run --help` explains every option)";

fn mpirun(name: &str, args: Vec<OsString>) -> i32 {
    let usage = || RUN_USAGE.replace("{launcher}", name);
    if args
        .first()
        .is_some_and(|a| a == "--version" || a == "-version" || a == "-V")
    {
        println!("{name} (Tandem {})", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    match parse_mpirun(args) {
        Ok(Some(opts)) => launcher::run(opts),
        Ok(None) => {
            println!("{}", usage());
            0
        }
        Err(msg) => {
            eprintln!("{name}: {msg}\n{}", usage());
            2
        }
    }
}

/// The N of `-ppn N` (1 to 65536).
fn per_host_count(flag: &str, v: &str) -> Result<u32, String> {
    v.parse()
        .ok()
        .filter(|n| (1..=65536).contains(n))
        .ok_or_else(|| format!("{flag}: '{v}' is not a number of processes per host"))
}

/// mpirun's options as `tandem run`'s; `None` for `--help`.
fn parse_mpirun(args: Vec<OsString>) -> Result<Option<RunOptions>, String> {
    let mut opts = RunOptions {
        ranks: None,
        set: Vec::new(),
        tag_output: false,
        timeout: None,
        program: OsString::new(),
        args: Vec::new(),
        hosts: Vec::new(),
        hostfile: None,
        map_by: None,
        agent: None,
        export: Vec::new(),
        launch_timeout: None,
        remote_tandem: None,
        wdir: None,
        per_host: None,
    };
    let mut it = args.into_iter();
    let text = |v: Option<OsString>, flag: &str| -> Result<String, String> {
        v.and_then(|v| v.into_string().ok())
            .ok_or_else(|| format!("{flag} needs a value"))
    };
    while let Some(arg) = it.next() {
        let Some(a) = arg.to_str().map(str::to_string) else {
            opts.program = arg;
            break;
        };
        // --flag=value
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(OsString::from(v))),
            _ => (a.clone(), None),
        };
        let mut value = |flag: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => text(Some(v), flag),
                None => text(it.next(), flag),
            }
        };
        match flag.as_str() {
            "-h" | "--help" | "-help" => return Ok(None),
            "--" => {
                opts.program = it.next().ok_or("no program given")?;
                break;
            }
            "-n" | "-np" | "-c" | "--n" | "--np" => {
                let v = value(&flag)?;
                let n: u32 = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=65536).contains(n))
                    .ok_or_else(|| {
                        format!("{flag}: '{v}' is not a number of ranks (1 to 65536)")
                    })?;
                opts.ranks = Some(n);
            }
            "-H" | "--host" | "-host" | "--hosts" | "-hosts" => opts.hosts.push(value(&flag)?),
            "--hostfile" | "-hostfile" | "-f" | "--machinefile" | "-machinefile"
            | "--default-hostfile" => opts.hostfile = Some(value(&flag)?.into()),
            "-x" => opts.export.push(value(&flag)?),
            "-genv" | "-env" => {
                let var = value(&flag)?;
                let val = text(it.next(), &flag)?;
                opts.export.push(format!("{var}={val}"));
            }
            "--map-by" | "-map-by" => {
                let v = value(&flag)?;
                // Open MPI's ppr:N:node (N processes per node).
                if let Some(n) = v.strip_prefix("ppr:").and_then(|r| r.strip_suffix(":node")) {
                    opts.per_host = Some(per_host_count(&flag, n)?);
                } else {
                    match v.split(':').next().unwrap_or("") {
                        // A host's ranks take its sockets in turn.
                        "socket" | "package" => opts.set.push("bind_order=socket".into()),
                        how => opts.map_by = Some(how.to_string()),
                    }
                }
            }
            "-ppn" | "--ppn" | "-npernode" | "--npernode" | "-N" | "--per-host" => {
                let v = value(&flag)?;
                opts.per_host = Some(per_host_count(&flag, &v)?);
            }
            "--bynode" | "-bynode" => opts.map_by = Some("node".into()),
            "--byslot" | "-byslot" => opts.map_by = Some("slot".into()),
            "--tag-output" | "-tag-output" | "-l" | "-prepend-rank" => opts.tag_output = true,
            "--timeout" | "-timeout" => {
                let v = value(&flag)?;
                opts.timeout = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s > 0.0)
                        .ok_or_else(|| format!("{flag}: '{v}' is not a number of seconds"))?,
                );
            }
            "--agent" | "--launch-agent" | "-launch-agent" | "-launcher-exec"
            | "-bootstrap-exec" => opts.agent = Some(value(&flag)?),
            "--set" => opts.set.push(value(&flag)?),
            "--mca" | "-mca" | "--gmca" | "-gmca" => {
                let key = value(&flag)?;
                let val = text(it.next(), &flag)?;
                if key == "plm_rsh_agent" || key == "orte_rsh_agent" {
                    opts.agent = Some(val);
                }
            }
            "-wdir" | "--wdir" | "-wd" | "--wd" => opts.wdir = Some(value(&flag)?.into()),
            "--bind-to" | "-bind-to" | "-bind" => {
                let v = value(&flag)?;
                let bind = match v.split(':').next().unwrap_or("") {
                    "none" => "none",
                    "core" | "hwthread" | "cpu" => "core",
                    "socket" | "package" => "socket",
                    other => {
                        return Err(format!(
                            "{flag} {other}: Tandem binds each rank to its cores (core), the \
                             sockets they are on (socket) or not at all (none)"
                        ))
                    }
                };
                opts.set.push(format!("bind={bind}"));
            }
            "--cpus-per-proc" | "-cpus-per-proc" | "--cpus-per-rank" | "-cpus-per-rank" => {
                let v = value(&flag)?;
                let n: u32 = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=4096).contains(n))
                    .ok_or_else(|| format!("{flag}: '{v}' is not a number of CPUs"))?;
                opts.set.push(format!("bind_cpus={n}"));
            }
            // Open MPI's installation prefix on the other hosts: Tandem's
            // launcher runs DIR/bin/tandem there.
            "--prefix" | "-prefix" => {
                let dir = value(&flag)?;
                opts.remote_tandem = Some(
                    std::path::Path::new(&dir)
                        .join("bin/tandem")
                        .into_os_string(),
                );
            }
            "--rank-by" | "-rank-by" => {
                let v = value(&flag)?;
                eprintln!(
                    "{flag} {v}: ignored; Tandem numbers ranks in the order --map-by places them"
                );
            }
            "-launcher" | "-bootstrap" => {
                value(&flag)?;
            }
            "--oversubscribe"
            | "-oversubscribe"
            | "--allow-run-as-root"
            | "-allow-run-as-root"
            | "-v"
            | "--verbose"
            | "-q"
            | "--quiet"
            | "--report-bindings"
            | "--display-map"
            | "--use-hwthread-cpus" => {}
            f if f.starts_with('-') && f.len() > 1 => {
                return Err(format!("unknown option '{f}'"));
            }
            _ => {
                opts.program = arg;
                break;
            }
        }
    }
    if opts.program.is_empty() {
        return Err("no program given".into());
    }
    opts.args = it.collect();
    Ok(Some(opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> RunOptions {
        parse_mpirun(words.iter().map(OsString::from).collect())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn processes_per_host() {
        for words in [
            &["-ppn", "2", "./prog"][..],
            &["--npernode", "2", "./prog"],
            &["-N", "2", "./prog"],
            &["--map-by", "ppr:2:node", "./prog"],
        ] {
            let o = parse(words);
            assert_eq!(o.per_host, Some(2), "{words:?}");
            assert_eq!(o.program, "./prog");
        }
        assert!(parse_mpirun(["-ppn", "0", "./p"].iter().map(OsString::from).collect()).is_err());
        let o = parse(&["--prefix", "/opt/tandem", "./prog"]);
        assert_eq!(
            o.remote_tandem.as_deref(),
            Some(std::ffi::OsStr::new("/opt/tandem/bin/tandem"))
        );
    }

    #[test]
    fn working_directory_and_binding_are_kept_or_refused() {
        let o = parse(&["-wdir", "/data", "--bind-to", "none", "./prog"]);
        assert_eq!(o.wdir.as_deref(), Some(std::path::Path::new("/data")));
        assert_eq!(o.set, ["bind=none"]);
        let o = parse(&["-wd", "d", "--bind-to=core:overload-allowed", "./prog"]);
        assert_eq!(o.wdir.as_deref(), Some(std::path::Path::new("d")));
        assert_eq!(o.set, ["bind=core"]);
        let o = parse(&["--bind-to", "socket", "--map-by", "socket", "./prog"]);
        assert_eq!(o.set, ["bind=socket", "bind_order=socket"]);
        let o = parse(&["--cpus-per-proc", "4", "./prog"]);
        assert_eq!(o.set, ["bind_cpus=4"]);
        let err = parse_mpirun(
            ["--bind-to", "l3cache", "./prog"]
                .iter()
                .map(OsString::from)
                .collect(),
        )
        .err()
        .expect("cache binding is refused");
        assert!(err.contains("l3cache"), "{err}");
        assert!(!RUN_USAGE
            .replace("{launcher}", "mpirun")
            .contains("--set mpirun"));
    }

    #[test]
    fn mpirun_flags() {
        let o = parse(&[
            "-np",
            "4",
            "-H",
            "a:2,b:2",
            "-x",
            "FOO=1",
            "--map-by",
            "node:PE=1",
            "--mca",
            "btl",
            "tcp,self",
            "--tag-output",
            "./prog",
            "-n",
            "3",
        ]);
        assert_eq!(o.ranks, Some(4));
        assert_eq!(o.hosts, ["a:2,b:2"]);
        assert_eq!(o.export, ["FOO=1"]);
        assert_eq!(o.map_by.as_deref(), Some("node"));
        assert!(o.tag_output);
        assert_eq!(o.program, "./prog");
        assert_eq!(o.args, ["-n", "3"]);
        let o = parse(&[
            "--hostfile=hf",
            "-genv",
            "A",
            "b c",
            "--mca",
            "plm_rsh_agent",
            "rsh",
            "p",
        ]);
        assert_eq!(o.hostfile.as_deref(), Some(Path::new("hf")));
        assert_eq!(o.export, ["A=b c"]);
        assert_eq!(o.agent.as_deref(), Some("rsh"));
        assert!(parse_mpirun(vec!["--bogus".into(), "p".into()]).is_err());
        assert!(parse_mpirun(vec!["-n".into(), "2".into()]).is_err());
        assert!(parse_mpirun(vec!["--help".into()]).unwrap().is_none());
    }
}

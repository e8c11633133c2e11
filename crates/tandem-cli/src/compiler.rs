//! `tandem cc` / `tandem cxx` / `tandem fc`: the system compiler with
//! Tandem's include directory and, when linking, its library (with an
//! rpath, so the program runs without installing anything or setting
//! LD_LIBRARY_PATH).
//!
//! For Fortran the include directory holds `mpif.h`, and the `mpi` and
//! `mpi_f08` modules are compiled from `include/fortran/*.f90` by the
//! user's own compiler (a .mod file only works with the compiler version
//! that wrote it) into a cache directory, once per compiler version and
//! module source; the modules hold only constants and interfaces, so there
//! is no Fortran object code to link.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::install_layout::{self, Layout, LIBRARY_NAME};

/// Which compiler to wrap.
#[derive(Clone, Copy, Debug)]
pub enum Language {
    C,
    Cxx,
    Fortran,
}

impl Language {
    /// The variable that overrides the compiler, and the default compiler.
    fn compiler(self) -> (&'static str, &'static str) {
        match self {
            Language::C => ("TANDEM_CC", "cc"),
            Language::Cxx => ("TANDEM_CXX", "c++"),
            Language::Fortran => ("TANDEM_FC", "gfortran"),
        }
    }
}

/// Runs (or with `--showme`, prints) the compiler command; returns the exit
/// status when the compiler could not be started (on success we exec it).
pub fn run(language: Language, raw_args: Vec<OsString>) -> i32 {
    let showme = raw_args.iter().any(|a| a == "--showme");
    let user_args: Vec<OsString> = raw_args.into_iter().filter(|a| a != "--showme").collect();
    let layout = match install_layout::locate() {
        Ok(l) => l,
        Err(msg) => {
            eprintln!("tandem: {msg}");
            return 1;
        }
    };
    let compiler = language.compiler_command();
    let extra = match language_flags(language, &compiler, &layout) {
        Ok(f) => f,
        Err(msg) => {
            eprintln!("tandem: {msg}");
            return 1;
        }
    };
    let mut argv = command_line(&compiler, &layout, &user_args);
    argv.splice(compiler.len()..compiler.len(), extra);
    if showme {
        let words: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
        println!("{}", words.join(" "));
        return 0;
    }
    // Become the compiler: its exit status and signals are ours.
    let err = Command::new(&argv[0]).args(&argv[1..]).exec();
    eprintln!(
        "tandem: cannot run the compiler '{}': {err}",
        argv[0].to_string_lossy()
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

impl Language {
    /// The compiler command, from its variable or the default.
    pub fn compiler_command(self) -> Vec<OsString> {
        let (var, default) = self.compiler();
        compiler_words(std::env::var_os(var), default)
    }
}

/// Flags a language needs besides the include directory: for Fortran, the
/// module directory, and `-fallow-argument-mismatch` for gfortran 10 and
/// later, which otherwise rejects the same MPI routine called with buffers
/// of different types in one file (as every `mpif.h` program does).
pub fn language_flags(
    language: Language,
    compiler: &[OsString],
    layout: &Layout,
) -> Result<Vec<OsString>, String> {
    if !matches!(language, Language::Fortran) {
        return Ok(Vec::new());
    }
    let version = compiler_version(compiler)?;
    let modules = fortran_modules(compiler, &version, layout)?;
    let mut flags = vec![join("-I", &modules)];
    if gfortran_major(&version).is_some_and(|m| m >= 10) {
        flags.push(OsString::from("-fallow-argument-mismatch"));
    }
    Ok(flags)
}

/// The first line of `COMPILER --version`.
fn compiler_version(compiler: &[OsString]) -> Result<String, String> {
    let out = Command::new(&compiler[0])
        .args(&compiler[1..])
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "cannot run the Fortran compiler '{}': {e} (install gfortran, or set TANDEM_FC)",
                compiler[0].to_string_lossy()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// gfortran's major version from its `--version` line
/// ("GNU Fortran (Debian 12.2.0-14) 12.2.0").
fn gfortran_major(version: &str) -> Option<u32> {
    if !version.starts_with("GNU Fortran") {
        return None;
    }
    let last = version.split_whitespace().last()?;
    last.split('.').next()?.parse().ok()
}

/// The module sources, in the order they are compiled.
const FORTRAN_MODULES: [&str; 2] = ["mpi.f90", "mpi_f08.f90"];

/// The directory with `mpi.mod` and `mpi_f08.mod` for this compiler,
/// compiling them on first use.
fn fortran_modules(
    compiler: &[OsString],
    version: &str,
    layout: &Layout,
) -> Result<std::path::PathBuf, String> {
    let src_dir = layout.include_dir.join("fortran");
    let mut key = Fnv::new();
    for w in compiler {
        key.add(w.as_bytes());
    }
    key.add(version.as_bytes());
    let mut sources = Vec::new();
    for name in FORTRAN_MODULES {
        let path = src_dir.join(name);
        let text = std::fs::read(&path).map_err(|e| {
            format!(
                "cannot read the Fortran module source {}: {e}",
                path.display()
            )
        })?;
        key.add(&text);
        sources.push(path);
    }
    let dir = fortran_cache_root().join(format!("{:016x}", key.0));
    if FORTRAN_MODULES
        .iter()
        .all(|m| dir.join(m.replace(".f90", ".mod")).is_file())
    {
        return Ok(dir);
    }
    // Compile into a directory of our own and rename it into place, so
    // that compilers running at once (make -j) never see half a module.
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    for src in &sources {
        let out = Command::new(&compiler[0])
            .args(&compiler[1..])
            .arg("-fsyntax-only")
            .arg(join("-J", &tmp))
            .arg(src)
            .current_dir(&tmp)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run the Fortran compiler: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(format!(
                "the Fortran compiler '{}' cannot compile {}:\n{}",
                compiler[0].to_string_lossy(),
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another compiler got there first.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!("cannot create {}", dir.display()))
    }
}

/// Where compiled modules are kept: `$TANDEM_FORTRAN_CACHE`, else
/// `$XDG_CACHE_HOME/tandem/fortran`, else `~/.cache/tandem/fortran`.
fn fortran_cache_root() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("TANDEM_FORTRAN_CACHE").filter(|d| !d.is_empty()) {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("tandem").join("fortran")
}

/// FNV-1a, 64 bits: a key for the module cache, not a security measure.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
}

/// `$TANDEM_CC` may hold a command with options ("ccache gcc -m64"); words are
/// separated by whitespace.
fn compiler_words(setting: Option<OsString>, default: &str) -> Vec<OsString> {
    let words: Vec<OsString> = setting
        .as_deref()
        .map(|s| {
            s.as_bytes()
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
                .map(|w| OsStr::from_bytes(w).to_os_string())
                .collect()
        })
        .unwrap_or_default();
    if words.is_empty() {
        vec![OsString::from(default)]
    } else {
        words
    }
}

/// Whether the arguments ask for no link step (compile, preprocess,
/// assemble or dependency generation only).
fn compile_only(args: &[OsString]) -> bool {
    args.iter()
        .any(|a| ["-c", "-E", "-S", "-M", "-MM"].iter().any(|flag| a == flag))
}

/// The full compiler command.
fn command_line(compiler: &[OsString], layout: &Layout, user_args: &[OsString]) -> Vec<OsString> {
    let mut argv = compiler.to_vec();
    argv.push(join("-I", &layout.include_dir));
    argv.extend(user_args.iter().cloned());
    if !compile_only(user_args) {
        argv.push(join("-L", &layout.lib_dir));
        argv.push(join("-Wl,-rpath,", &layout.lib_dir));
        argv.push(OsString::from(format!("-l{LIBRARY_NAME}")));
    }
    argv
}

fn join(flag: &str, dir: &std::path::Path) -> OsString {
    let mut s = OsString::from(flag);
    s.push(dir.as_os_str());
    s
}

/// Quotes a word for a POSIX shell, leaving plain words alone.
fn shell_quote(word: &OsStr) -> String {
    let text = word.to_string_lossy();
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn layout() -> Layout {
        Layout {
            include_dir: PathBuf::from("/t/include"),
            lib_dir: PathBuf::from("/t/lib"),
        }
    }

    #[test]
    fn links_unless_compile_only() {
        let link = command_line(&os(&["cc"]), &layout(), &os(&["-O2", "x.c", "-o", "x"]));
        assert_eq!(
            link,
            os(&[
                "cc",
                "-I/t/include",
                "-O2",
                "x.c",
                "-o",
                "x",
                "-L/t/lib",
                "-Wl,-rpath,/t/lib",
                "-lmpi_abi"
            ])
        );
        for flag in ["-c", "-E", "-S", "-M", "-MM"] {
            let argv = command_line(&os(&["cc"]), &layout(), &os(&[flag, "x.c"]));
            assert_eq!(argv, os(&["cc", "-I/t/include", flag, "x.c"]));
        }
        // -MD writes dependencies as a side effect of a normal build.
        assert!(command_line(&os(&["cc"]), &layout(), &os(&["-MD", "x.c"]))
            .contains(&OsString::from("-lmpi_abi")));
    }

    #[test]
    fn compiler_setting_may_have_words() {
        assert_eq!(
            compiler_words(Some("ccache  gcc".into()), "cc"),
            os(&["ccache", "gcc"])
        );
        assert_eq!(compiler_words(Some(" ".into()), "cc"), os(&["cc"]));
        assert_eq!(compiler_words(None, "c++"), os(&["c++"]));
    }

    #[test]
    fn gfortran_versions() {
        assert_eq!(
            gfortran_major("GNU Fortran (Debian 12.2.0-14+deb12u1) 12.2.0"),
            Some(12)
        );
        assert_eq!(gfortran_major("GNU Fortran (GCC) 9.4.0"), Some(9));
        assert_eq!(gfortran_major("ifx (IFX) 2024.0.0"), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote(OsStr::new("-I/a/b")), "-I/a/b");
        assert_eq!(shell_quote(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_quote(OsStr::new("it's")), r"'it'\''s'");
        assert_eq!(shell_quote(OsStr::new("")), "''");
    }
}

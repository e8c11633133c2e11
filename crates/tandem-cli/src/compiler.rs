//! `tandem cc` / `tandem cxx`: the system compiler with Tandem's include
//! directory and, when linking, its library (with an rpath, so the program
//! runs without installing anything or setting LD_LIBRARY_PATH).

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
}

impl Language {
    /// The variable that overrides the compiler, and the default compiler.
    fn compiler(self) -> (&'static str, &'static str) {
        match self {
            Language::C => ("TANDEM_CC", "cc"),
            Language::Cxx => ("TANDEM_CXX", "c++"),
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
    let (var, default) = language.compiler();
    let compiler = compiler_words(std::env::var_os(var), default);
    let argv = command_line(&compiler, &layout, &user_args);
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
    fn quoting() {
        assert_eq!(shell_quote(OsStr::new("-I/a/b")), "-I/a/b");
        assert_eq!(shell_quote(OsStr::new("a b")), "'a b'");
        assert_eq!(shell_quote(OsStr::new("it's")), r"'it'\''s'");
        assert_eq!(shell_quote(OsStr::new("")), "''");
    }
}

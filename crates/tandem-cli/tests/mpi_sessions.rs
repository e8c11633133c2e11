//! MPI-4 sessions end to end: the self-checking C program `sessions.c`
//! (a session before MPI_Init, process sets, communicators from groups
//! made by their members only, session error handlers, MPI_Init and a
//! second session beside the first, MPI_Finalize before the last
//! MPI_Session_finalize) built with `tandem cc` and run with `tandem run`
//! on several job sizes; and sessions opened again after the last one
//! closed, before the world model or with none (`session_reinit.c`).

mod common;

use common::{assert_pass, compile, run, JOB_TIMEOUT};

fn run_pass(name: &str, np: u32, extra: &[&str]) {
    let outcome = run(np, extra, &compile(name), &[], JOB_TIMEOUT);
    assert_pass(&outcome, name);
}

macro_rules! pass_tests {
    ($($test:ident: $name:literal, $np:literal $(, $arg:literal)*;)*) => {
        $(
            #[test]
            fn $test() {
                run_pass($name, $np, &[$($arg),*]);
            }
        )*
    };
}

pass_tests! {
    sessions_np1: "sessions", 1;
    sessions_np2: "sessions", 2;
    sessions_np3: "sessions", 3;
    sessions_np5: "sessions", 5;
    sessions_np4_tcp: "sessions", 4, "--set", "transports=tcp";
    session_reinit_np1: "session_reinit", 1;
    session_reinit_np3: "session_reinit", 3;
    session_reinit_np2_tcp: "session_reinit", 2, "--set", "transports=tcp";
}

/// Sessions opened and closed in turn, and no world model: the runtime the
/// last `MPI_Session_finalize` left idle ends at exit, and the job ends
/// cleanly.
#[test]
fn session_reinit_sessions_only_np3() {
    let outcome = run(
        3,
        &[],
        &compile("session_reinit"),
        &["sessions-only"],
        JOB_TIMEOUT,
    );
    assert_pass(&outcome, "session_reinit");
}

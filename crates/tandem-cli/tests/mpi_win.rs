//! Shared-memory windows end to end: the self-checking C program
//! `win_shared.c` built with `tandem cc` and run with `tandem run` on
//! several job sizes, over TCP (the window's memory is shared by the
//! host's ranks whatever the transport), with the progress thread, and
//! with one-sided operations through the engine (`rma_direct=0`).

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
    win_shared_np1: "win_shared", 1;
    win_shared_np2: "win_shared", 2;
    win_shared_np3: "win_shared", 3;
    win_shared_np5: "win_shared", 5;
    win_shared_np4_tcp: "win_shared", 4, "--set", "transports=tcp";
    // The helper thread applies the one-sided operations while ranks load
    // and store.
    win_shared_np3_thread: "win_shared", 3, "--set", "progress=thread";
    // Operations through the engine, not loads and stores.
    win_shared_np3_engine: "win_shared", 3, "--set", "rma_direct=0";
}

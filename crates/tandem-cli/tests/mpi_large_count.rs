//! The MPI-4 large-count (`_c`) forms, end to end: the self-checking C
//! program `large_count.c` built with `tandem cc` and run with `tandem run`
//! on several job sizes, over TCP too. It compares every `_c` call with its
//! int form, checks 64-bit sizes, extents and status counts, and the
//! `MPI_ERR_COUNT` of counts that do not fit; `big_message.c` moves one
//! message of more than `INT_MAX` bytes each way, every word checked.

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
    large_count_np1: "large_count", 1;
    large_count_np2: "large_count", 2;
    large_count_np4: "large_count", 4;
    large_count_np3_tcp: "large_count", 3, "--set", "transports=tcp";
    big_message_np2: "big_message", 2;
    big_message_np3_tcp: "big_message", 3, "--set", "transports=tcp";
}

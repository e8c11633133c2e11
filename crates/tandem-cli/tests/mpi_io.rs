//! MPI-IO end to end: the self-checking C programs `file_io.c` (open,
//! close, delete and their errors, sizes, error handlers, explicit-offset
//! accesses), `file_view.c` (views with derived filetypes, individual file
//! pointers) and `file_shared.c` (the shared file pointer and the ordered
//! accesses), built with `tandem cc` and run with `tandem run` on several
//! job sizes, over TCP too.

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
    file_io_np1: "file_io", 1;
    file_io_np3: "file_io", 3;
    file_io_np4_tcp: "file_io", 4, "--set", "transports=tcp";
    file_view_np1: "file_view", 1;
    file_view_np2: "file_view", 2;
    file_view_np4: "file_view", 4;
    file_view_np3_tcp: "file_view", 3, "--set", "transports=tcp";
    file_shared_np1: "file_shared", 1;
    file_shared_np3: "file_shared", 3;
    file_shared_np5: "file_shared", 5;
    file_shared_np4_tcp: "file_shared", 4, "--set", "transports=tcp";
    file_datarep_np1: "file_datarep", 1;
    file_datarep_np3: "file_datarep", 3;
}

//! The MPI functions beyond the common core, end to end: the MPI-5.0 ABI
//! queries and handle serialization, the dynamic-process calls Tandem
//! refuses (`abi_misc.c`), distributed-array datatypes, external32
//! packing and the datatype queries (`datatype_misc.c`), MPI-4.1 buffers
//! for buffered sends (`buffer_misc.c`), partitioned communication
//! (`part_misc.c`), the job secret kept from what ranks start
//! (`secret_hidden.c`), datatype queries in reductions, decoded constituents
//! and generalized requests as mpi4py uses them (`callback_queries.c`),
//! built with `tandem cc` and run with
//! `tandem run` on several job sizes.

mod common;

use common::{assert_pass, compile, run, JOB_TIMEOUT};

fn run_pass(name: &str, np: u32, extra: &[&str]) {
    // abi_misc checks that MPI_INFO_ENV holds these arguments.
    let outcome = run(np, extra, &compile(name), &["one", "two"], JOB_TIMEOUT);
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
    secret_hidden_np2: "secret_hidden", 2;
    callback_queries_np1: "callback_queries", 1;
    callback_queries_np2: "callback_queries", 2;
    abi_misc_np1: "abi_misc", 1;
    abi_misc_np3: "abi_misc", 3;
    buffer_misc_np1: "buffer_misc", 1;
    buffer_misc_np3: "buffer_misc", 3;
    buffer_misc_np3_tcp: "buffer_misc", 3, "--set", "transports=tcp";
    part_misc_np1: "part_misc", 1;
    part_misc_np2: "part_misc", 2;
    part_misc_np5: "part_misc", 5;
    part_misc_np3_tcp: "part_misc", 3, "--set", "transports=tcp";
    datatype_misc_np1: "datatype_misc", 1;
    datatype_misc_np4: "datatype_misc", 4;
    datatype_misc_np6: "datatype_misc", 6;
}

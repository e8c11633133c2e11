//! The MPI tool information interface end to end: the self-checking C
//! program `mpi_t.c` (control variables from the parameter registry,
//! performance variables from the engine's counters, categories, error
//! codes, use before MPI_Init and after MPI_Finalize) built with
//! `tandem cc` and run with `tandem run`, with parameters set differently
//! (the program checks the values it reads against the job's settings).

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
    mpi_t_np2: "mpi_t", 2;
    mpi_t_np3_stats: "mpi_t", 3, "--set", "stats=1";
    mpi_t_np2_settings: "mpi_t", 2, "--set", "eager_limit=48k", "--set", "progress=thread";
    mpi_t_np2_tcp: "mpi_t", 2, "--set", "transports=tcp";
}

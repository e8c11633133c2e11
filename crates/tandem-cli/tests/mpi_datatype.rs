//! Derived datatypes end to end: `dt_roundtrip.c` (constructors, queries,
//! pack/unpack, point-to-point through the eager and rendezvous paths,
//! collectives on derived types) built with `tandem cc` and run with
//! `tandem run`.

mod common;

use common::{assert_pass, compile, run, JOB_TIMEOUT};

fn run_pass(np: u32, extra: &[&str]) {
    let outcome = run(np, extra, &compile("dt_roundtrip"), &[], JOB_TIMEOUT);
    assert_pass(&outcome, "dt_roundtrip");
}

#[test]
fn dt_roundtrip_np1() {
    run_pass(1, &[]);
}

#[test]
fn dt_roundtrip_np2() {
    run_pass(2, &[]);
}

#[test]
fn dt_roundtrip_np3_small_eager_limit() {
    // Most messages take the rendezvous path.
    run_pass(3, &["--set", "eager_limit=1k"]);
}

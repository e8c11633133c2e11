//! Communicators, groups, attributes, topologies, persistent requests,
//! buffered sends and info objects, intercommunicators, end to end: the
//! self-checking C programs `comm_topo.c`, `graph_topo.c`, `neighbor_coll.c`,
//! `finalize_attrs.c`, `attr_callbacks.c`, `grequest.c`, `persist_misc.c`,
//! `intercomm.c`, `intercomm_nbc.c` and `spawn.c` built with `tandem cc` and run with
//! `tandem run` on several job sizes.

mod common;

use common::{assert_pass, compile, run, JOB_TIMEOUT};

fn run_pass(name: &str, np: u32, extra: &[&str]) {
    let outcome = run(np, extra, &compile(name), &[], JOB_TIMEOUT);
    assert_pass(&outcome, name);
}

/// A spawned process that dies ends the job at once, named as the launcher
/// knows it (its rank in its world, and which spawn).
#[test]
fn spawned_process_death_ends_the_job_naming_it() {
    let outcome = run(2, &[], &compile("spawn"), &["die"], JOB_TIMEOUT);
    assert_eq!(outcome.status.code(), Some(128 + 9), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("rank 1 of spawned world 1 (process 3) (pid "),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("SIGKILL"), "{outcome:?}");
    assert!(
        outcome.elapsed < std::time::Duration::from_secs(5),
        "{outcome:?}"
    );
    assert!(!outcome.stdout.contains("PASS"), "{outcome:?}");
    assert!(outcome.leftovers.is_empty(), "{outcome:?}");
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
    comm_topo_np1: "comm_topo", 1;
    comm_topo_np2: "comm_topo", 2;
    comm_topo_np4: "comm_topo", 4;
    comm_topo_np6: "comm_topo", 6;
    comm_topo_np7: "comm_topo", 7;
    finalize_attrs_np1: "finalize_attrs", 1;
    finalize_attrs_np3: "finalize_attrs", 3;
    attr_callbacks_np1: "attr_callbacks", 1;
    attr_callbacks_np3: "attr_callbacks", 3;
    graph_topo_np1: "graph_topo", 1;
    graph_topo_np3: "graph_topo", 3;
    graph_topo_np5: "graph_topo", 5;
    grequest_np1: "grequest", 1;
    grequest_np3: "grequest", 3;
    neighbor_coll_np1: "neighbor_coll", 1;
    neighbor_coll_np4: "neighbor_coll", 4;
    neighbor_coll_np6_tcp: "neighbor_coll", 6, "--set", "transports=tcp";
    persist_misc_np1: "persist_misc", 1;
    persist_misc_np2: "persist_misc", 2;
    // Binomial broadcast: ranks blocked in MPI_Recv must forward the
    // non-blocking broadcast for the others to finish.
    persist_misc_np5_binomial: "persist_misc", 5, "--set", "coll_bcast=binomial";
    persist_misc_np4_scatter_allgather: "persist_misc", 4, "--set", "coll_bcast=scatter_allgather";
    // Groups of equal and unequal sizes; the 200 KiB messages go by
    // rendezvous, over TCP too.
    intercomm_np2: "intercomm", 2;
    intercomm_np4: "intercomm", 4;
    intercomm_np5: "intercomm", 5;
    intercomm_np4_tcp: "intercomm", 4, "--set", "transports=tcp";
    // Non-blocking collectives on an intercommunicator, each group in
    // turn posting late (after messages the other sends once it posted).
    intercomm_nbc_np2: "intercomm_nbc", 2;
    intercomm_nbc_np4: "intercomm_nbc", 4;
    intercomm_nbc_np5: "intercomm_nbc", 5;
    intercomm_nbc_np4_tcp: "intercomm_nbc", 4, "--set", "transports=tcp";
    // Dynamic processes: spawned worlds, ports, names, join.
    spawn_np1: "spawn", 1;
    spawn_np2: "spawn", 2;
    spawn_np3: "spawn", 3;
    spawn_np2_tcp: "spawn", 2, "--set", "transports=tcp";
    spawn_np2_thread: "spawn", 2, "--set", "progress=thread";
}

#!/usr/bin/env bash
# Long fuzzing run of the property tests (every test whose name contains
# `prop_`): the decoders of bytes another process wrote — frame headers and
# the handshake (wire.rs), scattered one-sided tables (p2p/remote.rs), TCP
# frame reassembly over arbitrary splits (transport/tcp.rs), PMI-2 answers
# (bootstrap_pmi2.rs), collective rules files (coll/select.rs), counters and
# the job secret (stats.rs, bootstrap.rs), and the launcher's record and
# key-value protocols (tandem-cli launcher/channel.rs, kv_service.rs), and
# the ELF dynamic section a program names its libraries in
# (launcher/foreign_mpi.rs).
#
# Cases per property: CASES (default 10,000,000; the unit-test default is
# 2,000). At the default, expect about 3 hours on two cores after the build,
# most of it in the launcher's record decoder (about 1.8 h alone) and TCP
# reassembly (about 1 h); CASES=200000 takes about 4 minutes. A failure
# prints the minimal input; no files are written.
#
# Usage: scripts/fuzz.sh            # CASES=10000000
#        CASES=200000 scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES="${CASES:-10000000}"
# proptest stops shrinking after 2^32 iterations by default; a generous
# limit keeps a failure's report prompt.
export PROPTEST_MAX_SHRINK_ITERS="${PROPTEST_MAX_SHRINK_ITERS:-100000}"
exec cargo test --release -p tandem -p tandem-cli prop_ -- --test-threads=2

#!/usr/bin/env bash
# The test suite: formatting, lints, unit tests and multi-process
# integration tests (C programs built with `tandem cc`, run with `tandem run`).
set -euo pipefail
cd "$(dirname "$0")/.."
TANDEM_SETUP_TESTS=1 source scripts/setup.sh

cargo fmt --all --check
# The Fortran bindings are generated from include/mpi.h; they must be current.
python3 scripts/gen-fortran.py --check
cargo build --release --workspace
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --release --workspace

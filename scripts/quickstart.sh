#!/usr/bin/env bash
# Builds Tandem, runs its ping-pong example on 2 local ranks (one per core on
# a 2-core machine, so the figures are not those of ranks sharing cores),
# then the quick benchmark suite (`tandem bench report`) into
# target/bench-report/, and prints where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo build --release --workspace
mkdir -p target/examples
target/release/tandem cc -O2 examples/pingpong.c -o target/examples/pingpong
echo "== tandem run -n 2 target/examples/pingpong   (ranks 0 and 1 ping-pong over shared memory)"
target/release/tandem run -n 2 target/examples/pingpong -m 1m
echo "== tandem bench report --out target/bench-report   (the quick suite: a few minutes)"
target/release/tandem bench report --out target/bench-report
echo "Report: $(pwd)/target/bench-report/index.html (open it in a browser; the measurements are in results.json beside it)"

#!/usr/bin/env bash
# Builds Tandem, runs its ping-pong example on 4 local ranks, then the quick
# benchmark suite (`tandem bench report`) into target/bench-report/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo build --release --workspace
mkdir -p target/examples
target/release/tandem cc -O2 examples/pingpong.c -o target/examples/pingpong
echo "== tandem run -n 4 target/examples/pingpong   (ranks 0 and 1 ping-pong; shared memory)"
target/release/tandem run -n 4 target/examples/pingpong -m 1m
echo "== tandem bench report --out target/bench-report   (the quick suite, about a minute)"
target/release/tandem bench report --out target/bench-report
echo "Report: $(pwd)/target/bench-report/index.html"

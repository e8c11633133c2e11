#!/usr/bin/env bash
# Builds Tandem and runs its ping-pong example on 4 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo build --release --workspace
mkdir -p target/examples
target/release/tandem cc -O2 examples/pingpong.c -o target/examples/pingpong
echo "tandem run -n 4 target/examples/pingpong   (ranks 0 and 1 ping-pong over TCP loopback)"
target/release/tandem run -n 4 target/examples/pingpong

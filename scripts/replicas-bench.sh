#!/usr/bin/env bash
# Replicated ranks against unreplicated ones, with `tandem bench --replicas`,
# in one run (every comparison interleaves its launches):
#   1. ping-pong, 2 ranks x 2 replicas on 4 network namespace hosts whose
#      links are limited to 1 Gbit/s (each process on a host of its own),
#      against 2 ranks on 2 of them: the 8 B latency ratio and the 4 MiB
#      bandwidth ratio;
#   2. the same on this host alone (shared memory);
#   3. the VolpexMPI report's experiment (Gabriel, "Influence of the
#      Progress Engine...", UH-CS-10-02) on the namespace hosts: time to
#      solution unreplicated, with 2 replicas, with 2 replicas of which one
#      is killed halfway, and with Open MPI when it is installed.
# Needs root (network namespaces) and a release build. Each step prints its
# tables; the JSON files keep every record, in OUT (default
# target/replicas-bench). REPEAT and DURATION set the ping-pong's
# repetitions and seconds per batch (default 20 and 0.2), SOLVES and STEPS
# the time to solution's launches per configuration and exchanges (default
# 10 and 4000), NP its ranks (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-target/replicas-bench}
repeat=${REPEAT:-20}
duration=${DURATION:-0.2}
solves=${SOLVES:-10}
steps=${STEPS:-4000}
np=${NP:-2}
tandem=target/release/tandem
mkdir -p "$out"

step() {
    local name=$1
    shift
    echo "== $name: tandem $*"
    "$tandem" "$@" --json "$out/$name.json" | tee "$out/$name.txt"
    echo
}

step pingpong-netns bench pingpong --replicas 1,2 --hosts netns:4 --rate 1gbit \
    --sizes 8,4m --duration "$duration" --repeat "$repeat"
step pingpong-local bench pingpong --replicas 1,2 --transport shm \
    --sizes 8,4m --duration "$duration" --repeat "$repeat"
step tts-netns bench tts --np "$np" --hosts netns:4 --rate 1gbit \
    --set steps="$steps" --repeat "$solves"

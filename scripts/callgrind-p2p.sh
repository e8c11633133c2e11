#!/usr/bin/env bash
# Instructions per MPI call on the small-message path: runs
# examples/p2p_calls.c on 2 ranks with rank 0 under callgrind (rank 1 runs
# natively), in blocking and non-blocking mode, and prints each MPI
# function's inclusive instruction count divided by its number of calls
# (MPI_Wait: the mean of a send's and a receive's).
#
# Rank 0 counts to DELAY (default 200000, about 10 ms under callgrind)
# before each receive, outside MPI, so that the answer is normally there
# when it receives: the counts are then those of a receive that polls once.
# On a busy machine rank 1 sometimes answers late and rank 0 polls an empty
# ring meanwhile, so each mode runs RUNS times (default 3) and the run with
# the fewest progress calls per receive is shown, with that number (1.00
# means no empty poll). Instruction counts do not depend on how busy the
# machine is, unlike timings. Needs valgrind (apt-get install valgrind).
#     scripts/callgrind-p2p.sh [BYTES]      (default 8)
# TRANSPORTS=tcp measures the TCP path instead of shared memory.
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=${1:-8}
iters=${ITERS:-1000}
delay=${DELAY:-200000}
runs=${RUNS:-3}
command -v valgrind >/dev/null || { echo "valgrind is not installed: apt-get install valgrind" >&2; exit 1; }
mkdir -p target/examples target/callgrind
target/release/tandem cc -O2 -g examples/p2p_calls.c -o target/examples/p2p_calls
wrap=target/callgrind/rank0-under-callgrind.sh
cat >"$wrap" <<'W'
#!/bin/sh
if [ "$TANDEM_JOB_RANK" = 0 ]; then
    exec valgrind --tool=callgrind --callgrind-out-file="$CALLGRIND_OUT" "$@"
fi
exec "$@"
W
chmod +x "$wrap"
calls=$((iters + 100))
for mode in blocking nonblocking; do
    best=""
    for run in $(seq "$runs"); do
        out=$PWD/target/callgrind/p2p_calls.$mode.$run.out
        # A long spin: rank 0 must never block in the kernel while it is measured.
        CALLGRIND_OUT=$out target/release/tandem run -n 2 --set spin_us=100000 ${TRANSPORTS:+--set transports=$TRANSPORTS} --timeout 600 \
            "$wrap" "$PWD/target/examples/p2p_calls" -n "$iters" -s "$bytes" -m "$mode" -d "$delay" >/dev/null 2>&1
        summary=$(callgrind_annotate --inclusive=yes --tree=calling --threshold=100 "$out" 2>/dev/null |
            awk -v calls="$calls" '
                / \*  [^ ]*:P?MPI_(Send|Recv|Isend|Irecv|Wait) \[/ {
                    ir = $1; gsub(",", "", ir); name = $0
                    sub(/ \[.*/, "", name); sub(/.*:P?/, "", name)
                    n = (name == "MPI_Wait") ? 2 * calls : calls
                    line = line sprintf("  %-10s %8.0f\n", name, ir / n)
                }
                / >   [^ ]*ShmTransport::progress \(/ && !seen {
                    c = $0; sub(/.*\(/, "", c); sub(/x\).*/, "", c); gsub(",", "", c); polls = c; seen = 1
                }
                END { printf "%.2f\n%s", polls / calls, line }')
        polls=$(head -1 <<<"$summary")
        if [ -z "$best" ] || awk -v a="$polls" -v b="$(head -1 <<<"$best")" 'BEGIN { exit !(a < b) }'; then
            best=$summary
        fi
    done
    echo "$mode, $bytes bytes, instructions per call (rank 0, $calls calls each; $(head -1 <<<"$best") progress calls per receive):"
    tail -n +2 <<<"$best"
done

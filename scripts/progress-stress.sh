#!/usr/bin/env bash
# The progress issue's stress test, RUNS times per configuration (default
# 25, so 100 runs over the four): tests/c/progress_stress.c, in which rank 1
# does malloc-heavy computation without calling MPI while 300 large
# non-blocking receives complete, then checks every status, byte and guard
# byte. Configurations: progress=signal and progress=thread, each over shared
# memory and over TCP. Each run has a time limit (TIMEOUT seconds, default
# 120), so a deadlock shows as a failure, not a hang. Prints one line per
# configuration (passed / failed / timed out, median seconds) and exits
# non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-25}
limit=${TIMEOUT:-120}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
target/release/tandem cc -O2 -Itests/c tests/c/progress_stress.c -o "$tmp/progress_stress" || exit 1
configs=(
    "--set progress=signal"
    "--set progress=signal --set transports=tcp"
    "--set progress=thread"
    "--set progress=thread --set transports=tcp"
)
bad=0
for config in "${configs[@]}"; do
    pass=0 fail=0 hung=0
    : >"$tmp/times"
    for i in $(seq "$runs"); do
        start=$(date +%s%N)
        # shellcheck disable=SC2086
        timeout "$limit" target/release/tandem run -n 2 $config "$tmp/progress_stress" 1000 \
            >"$tmp/out" 2>&1
        rc=$?
        end=$(date +%s%N)
        echo $(((end - start) / 1000000)) >>"$tmp/times"
        if [ $rc -eq 0 ]; then
            pass=$((pass + 1))
        elif [ $rc -eq 124 ]; then
            hung=$((hung + 1))
            echo "run $i [$config] timed out after ${limit}s:" >&2
            tail -5 "$tmp/out" >&2
        else
            fail=$((fail + 1))
            echo "run $i [$config] failed (exit $rc):" >&2
            tail -5 "$tmp/out" >&2
        fi
    done
    med=$(sort -n "$tmp/times" | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)] / 1000}')
    printf '%-45s passed %3d  failed %3d  timed out %3d  median %ss\n' "[$config]" "$pass" "$fail" "$hung" "$med"
    [ $((fail + hung)) -eq 0 ] || bad=1
done
exit $bad

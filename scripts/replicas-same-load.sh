#!/usr/bin/env bash
# How much of the latency of replicated ranks is the replication protocol
# and how much the CPU the extra processes take. On a machine with fewer
# cores than processes, 2 ranks x 2 replicas share the cores four ways, so
# replicated ping-pong is compared with two unreplicated ping-pong jobs
# running at once (the same four processes on the same cores) as well as
# with one alone. Ping-pong of 8 bytes over TCP (--set transports=tcp),
# bench/pingpong.c built with `tandem cc`; ROUNDS rounds (default 10), each
# launching the three configurations one after the other; prints each
# round's half round trips and the medians of the per-round ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-10}
tandem=$PWD/target/release/tandem
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tandem" cc -O2 -Ibench bench/pingpong.c -o "$work/pingpong" -lm

# Half round trip in microseconds, from the kernel's JSON sample line.
half_rtt() {
    awk -F'[:,}]' '/"type":"sample"/ {
        for (i = 1; i < NF; i++) { if ($i ~ /"n"$/) n = $(i + 1); if ($i ~ /"t"$/) t = $(i + 1) }
        printf "%.2f\n", t / n * 1e6 }'
}
pingpong() {
    "$tandem" run -n 2 --set transports=tcp "$@" "$work/pingpong" sizes=8 duration=0.5 repeat=1 | half_rtt
}

echo "round  r2_us  two_jobs_us  alone_us"
for i in $(seq 1 "$rounds"); do
    r2=$(pingpong --replicas 2)
    pingpong >"$work/other" &
    mine=$(pingpong)
    wait
    two=$(printf '%s\n%s\n' "$mine" "$(cat "$work/other")" | sort -n | tail -1)
    alone=$(pingpong)
    echo "$i  $r2  $two  $alone"
done | tee "$work/rounds"
awk 'function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     NR > 1 { n++; s[n] = $2 / $3; l[n] = $2 / $4 }
     END { printf "median ratio, 2 replicas / two unreplicated jobs at once: %.2fx\n", median(s, n)
           printf "median ratio, 2 replicas / one unreplicated job:        %.2fx\n", median(l, n) }' "$work/rounds"

#!/usr/bin/env bash
# examples/pingpong.c between two network namespaces joined by a bridge, each
# side's eth0 limited to RATE (default 1gbit: Gigabit Ethernet) by a token
# bucket of BURST bytes (default 128kb, about 1 ms at 1 Gbit/s), with Tandem
# (`tandem run --host ... --agent "ip netns exec {host}"`) and, when it is
# installed, Open MPI (`mpirun.openmpi` with an ssh-like agent that enters
# the namespace, `--bind-to none`, TCP only), interleaved RUNS times (default
# 3); prints the median 8-byte latency and 4 MiB bandwidth of each, and what
# share of the link rate that is. Needs root. The namespaces are made and
# removed (also on failure or Ctrl-C) by `tandem _netns`, the code behind
# `tandem bench --hosts netns:K`, which runs this script again inside them;
# only their own 10.231.0.0/24 addresses are used.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
rate=${RATE:-1gbit}
burst=${BURST:-128kb}
if [ -z "${NETNS_HOSTS:-}" ]; then
    exec target/release/tandem _netns --hosts 2 --rate "$rate" --burst "$burst" "$PWD/scripts/netns-pingpong.sh" "$@"
fi
read -r h0 h1 <<<"$NETNS_HOSTS"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
target/release/tandem cc -O2 examples/pingpong.c -o "$tmp/pingpong"
have_ompi=0
if command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null; then
    have_ompi=1
    mpicc.openmpi -O2 examples/pingpong.c -o "$tmp/pingpong.openmpi"
    # Open MPI's rsh launcher hands the agent a shell command, as to ssh.
    printf '#!/bin/sh\nhost=$1; shift\nexec ip netns exec "$host" sh -c "$*"\n' >"$tmp/nsagent"
    chmod +x "$tmp/nsagent"
else
    echo "(Open MPI not installed: apt-get install openmpi-bin libopenmpi-dev; measuring Tandem only)" >&2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pick='$1==8 {l=$2} $1==4194304 {b=$3} END {print l, b}'
out="$tmp/results"
for _ in $(seq "$runs"); do
    echo "tandem $(ip netns exec "$h0" target/release/tandem run --host "$h0:1,$h1:1" \
        --agent "ip netns exec {host}" --set tcp_if_include="$NETNS_NETWORK" \
        "$tmp/pingpong" -m 4m | awk "$pick")" >>"$out"
    if [ "$have_ompi" = 1 ]; then
        echo "openmpi $(cd "$tmp" && ip netns exec "$h0" timeout 600 mpirun.openmpi --host "$h0:1,$h1:1" -np 2 \
            --bind-to none --mca plm_rsh_agent "$tmp/nsagent" --mca btl tcp,self \
            --mca btl_tcp_if_include "$NETNS_NETWORK" --mca oob_tcp_if_include "$NETNS_NETWORK" \
            "$tmp/pingpong.openmpi" -m 4m 2>/dev/null | awk "$pick")" >>"$out"
    fi
done
python3 - "$out" "$rate" "$burst" <<'PY'
import re, statistics, sys
path, rate, burst = sys.argv[1:4]
m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
link = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8 / 1e6 if m else None
runs = {}
for line in open(path):
    words = line.split()
    if len(words) == 3:
        runs.setdefault(words[0], []).append((float(words[1]), float(words[2])))
print(f"# 2 namespaces, eth0 limited by tbf rate {rate} burst {burst}" + (f" ({link:.1f} MB/s)" if link else ""))
med = {}
for lib, v in runs.items():
    lats = sorted(r[0] for r in v); bws = sorted(r[1] for r in v)
    med[lib] = (statistics.median(lats), statistics.median(bws))
    share = f", {100 * med[lib][1] / link:.1f}% of the link" if link else ""
    print(f"{lib:8} 8 B latency median {med[lib][0]:8.2f} us (range {lats[0]:.2f}-{lats[-1]:.2f})   "
          f"4 MiB bandwidth median {med[lib][1]:7.1f} MB/s (range {bws[0]:.1f}-{bws[-1]:.1f}){share}")
if "tandem" in med and "openmpi" in med:
    print(f"tandem/openmpi: latency {med['tandem'][0] / med['openmpi'][0]:.2f}x, bandwidth {med['tandem'][1] / med['openmpi'][1]:.2f}x")
PY

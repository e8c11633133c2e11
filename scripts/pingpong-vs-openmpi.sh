#!/usr/bin/env bash
# Runs examples/pingpong.c on 2 ranks with Tandem forced to TCP loopback and with
# Debian's Open MPI forced to TCP (`--mca btl tcp,self`), interleaved RUNS
# times, and prints the median 8-byte latency and 4 MiB bandwidth of each
# and their ratios. Needs `apt-get install openmpi-bin libopenmpi-dev`; Open
# MPI is only measured, never used by Tandem.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-6}
command -v mpicc.openmpi >/dev/null || { echo "Open MPI is not installed: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p target/examples
target/release/tandem cc -O2 examples/pingpong.c -o target/examples/pingpong
mpicc.openmpi -O2 examples/pingpong.c -o target/examples/pingpong.openmpi
pick='$1==8 {l=$2} $1==4194304 {b=$3} END {print l, b}'
out=$(mktemp)
for _ in $(seq "$runs"); do
    echo "tandem $(target/release/tandem run -n 2 --set transports=tcp target/examples/pingpong -r 20 | awk "$pick")" >>"$out"
    echo "openmpi $(mpirun.openmpi -n 2 --mca btl tcp,self target/examples/pingpong.openmpi -r 20 | awk "$pick")" >>"$out"
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    lib, lat, bw = line.split()
    runs.setdefault(lib, []).append((float(lat), float(bw)))
med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
for lib, v in runs.items():
    lats = sorted(r[0] for r in v); bws = sorted(r[1] for r in v)
    print(f"{lib:8} 8 B latency median {med[lib][0]:7.2f} us (range {lats[0]:.2f}-{lats[-1]:.2f})   "
          f"4 MiB bandwidth median {med[lib][1]:8.1f} MB/s (range {bws[0]:.0f}-{bws[-1]:.0f})")
print(f"tandem/openmpi: latency {med['tandem'][0] / med['openmpi'][0]:.2f}x, bandwidth {med['tandem'][1] / med['openmpi'][1]:.2f}x")
PY
rm -f "$out"

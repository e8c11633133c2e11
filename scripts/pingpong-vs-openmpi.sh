#!/usr/bin/env bash
# Runs examples/pingpong.c on 2 ranks with Tandem forced to TCP loopback and with
# Debian's Open MPI forced to TCP (`--mca btl tcp,self`), interleaved RUNS
# times, and prints the median 8-byte latency and 4 MiB bandwidth of each
# (with their ranges) and their ratios. Needs `apt-get install openmpi-bin
# libopenmpi-dev`; Open MPI is only measured, never used by Tandem.
#
#   TRANSPORTS="shm tcp"  also measures shared memory (Open MPI: vader)
#   BEFORE=DIR            also measures another Tandem build, installed as
#                         DIR/bin/tandem, DIR/lib, DIR/include (to compare a
#                         change against the build before it, in one run)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-6}
transports=${TRANSPORTS:-tcp}
command -v mpicc.openmpi >/dev/null || { echo "Open MPI is not installed: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p target/examples
target/release/tandem cc -O2 examples/pingpong.c -o target/examples/pingpong
mpicc.openmpi -O2 examples/pingpong.c -o target/examples/pingpong.openmpi
if [ -n "${BEFORE:-}" ]; then
    "$BEFORE/bin/tandem" cc -O2 examples/pingpong.c -o target/examples/pingpong.before
fi
pick='$1==8 {l=$2} $1==4194304 {b=$3} END {print l, b}'
out=$(mktemp)
for _ in $(seq "$runs"); do
    for t in $transports; do
        case $t in
            tcp) btl=tcp,self ;;
            shm) btl=vader,self ;;
            *) echo "TRANSPORTS: $t is neither shm nor tcp" >&2; exit 2 ;;
        esac
        echo "$t tandem $(target/release/tandem run -n 2 --set transports="$t" target/examples/pingpong -r 20 | awk "$pick")" >>"$out"
        if [ -n "${BEFORE:-}" ]; then
            echo "$t before $("$BEFORE/bin/tandem" run -n 2 --set transports="$t" target/examples/pingpong.before -r 20 | awk "$pick")" >>"$out"
        fi
        echo "$t openmpi $(mpirun.openmpi -n 2 --mca btl "$btl" target/examples/pingpong.openmpi -r 20 | awk "$pick")" >>"$out"
    done
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, lib, lat, bw = line.split()
    runs.setdefault((t, lib), []).append((float(lat), float(bw)))
med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
for (t, lib), v in sorted(runs.items()):
    lats = sorted(r[0] for r in v); bws = sorted(r[1] for r in v)
    print(f"{t} {lib:8} 8 B latency median {med[(t, lib)][0]:7.2f} us (range {lats[0]:.2f}-{lats[-1]:.2f})   "
          f"4 MiB bandwidth median {med[(t, lib)][1]:8.1f} MB/s (range {bws[0]:.0f}-{bws[-1]:.0f})")
for t in sorted({t for t, _ in runs}):
    for other in ("openmpi", "before"):
        if (t, other) in med:
            a, b = med[(t, "tandem")], med[(t, other)]
            print(f"{t} tandem/{other}: latency {a[0] / b[0]:.2f}x, bandwidth {a[1] / b[1]:.2f}x")
PY
rm -f "$out"

#!/usr/bin/env bash
# Shared memory, 2 ranks: runs examples/pingpong.c with Tandem (its default
# transport on one host) and with Debian's Open MPI (its default vader
# path), interleaved RUNS times, plus examples/memcpy_bw.c (one core's
# memcpy of 4 MiB) in every round, and prints the medians of the 8-byte
# latency and of the 1 MiB and 4 MiB bandwidths, with their ratios (and
# the median of the 8-byte ratios within each round); then
# the same with buffers from MPI_Alloc_mem (pingpong -a), which Tandem
# backs with transparent huge pages from 2 MiB. Extra
# arguments go to `tandem run` (e.g. --set shm_single_copy_min=1m). Needs
# `apt-get install openmpi-bin libopenmpi-dev`; Open MPI is only measured,
# never used by Tandem.
#
# FRESH=1: every round runs both libraries from fresh copies of their files
# (Tandem's libmpi_abi.so; Open MPI's libmpi, libopen-pal, libopen-rte and
# plugins), so each round draws new page-cache pages for the code. On this
# VM the 8-byte latency of one copy of a library can differ from another's
# by 10% (see docs/src/performance.md); one installed copy is one draw.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-7}
command -v mpicc.openmpi >/dev/null || { echo "Open MPI is not installed: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p target/examples
target/release/tandem cc -O2 examples/pingpong.c -o target/examples/pingpong
mpicc.openmpi -O2 examples/pingpong.c -o target/examples/pingpong.openmpi
cc -O2 examples/memcpy_bw.c -o target/examples/memcpy_bw
pick='$1==8 {l=$2} $1==1048576 {m=$3} $1==4194304 {b=$3} END {print l, m, b}'
out=$(mktemp)
copies=$(mktemp -d)
trap 'rm -rf "$copies"' EXIT
ompi=(mpirun.openmpi)
if [ "${FRESH:-0}" = 1 ]; then
    # Open MPI's libraries as the program loads them, and its plugin directory.
    mapfile -t ompi_libs < <(ldd target/examples/pingpong.openmpi |
        awk '/lib(mpi|open-pal|open-rte)\.so/ {print $3}')
    ompi_plugins=$(ompi_info --path pkglibdir --parsable | sed 's/^path:pkglibdir://')
fi
for round in $(seq "$runs"); do
    if [ "${FRESH:-0}" = 1 ]; then
        rm -rf "$copies"/t "$copies"/o
        mkdir -p "$copies"/t "$copies"/o
        cp target/release/libmpi_abi.so "$copies"/t/
        cp -L "${ompi_libs[@]}" "$copies"/o/
        cp -r "$ompi_plugins" "$copies"/o/plugins
        export LD_LIBRARY_PATH="$copies"/t
        ompi=(env LD_LIBRARY_PATH="$copies"/o mpirun.openmpi -x LD_LIBRARY_PATH
            --mca mca_base_component_path "$copies"/o/plugins)
    fi
    # Launched in alternating order: a library launched second in a round
    # can find the machine in another state than the first.
    if [ $((round % 2)) = 0 ]; then
        echo "openmpi $("${ompi[@]}" -n 2 target/examples/pingpong.openmpi -r 20 | awk "$pick")" >>"$out"
        echo "tandem $(target/release/tandem run -n 2 "$@" target/examples/pingpong -r 20 | awk "$pick")" >>"$out"
    else
        echo "tandem $(target/release/tandem run -n 2 "$@" target/examples/pingpong -r 20 | awk "$pick")" >>"$out"
        echo "openmpi $("${ompi[@]}" -n 2 target/examples/pingpong.openmpi -r 20 | awk "$pick")" >>"$out"
    fi
    echo "tandem-a $(target/release/tandem run -n 2 "$@" target/examples/pingpong -a -r 20 | awk "$pick")" >>"$out"
    echo "openmpi-a $("${ompi[@]}" -n 2 target/examples/pingpong.openmpi -a -r 20 | awk "$pick")" >>"$out"
    echo "memcpy 0 0 $(target/examples/memcpy_bw | awk '{print $(NF-1)}')" >>"$out"
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    lib, *v = line.split()
    runs.setdefault(lib, []).append([float(x) for x in v])
med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in runs.items()}
def rng(lib, i):
    xs = sorted(r[i] for r in runs[lib])
    return f"{xs[0]:.3f}-{xs[-1]:.3f}" if i == 0 else f"{xs[0]:.0f}-{xs[-1]:.0f}"
for lib in ("tandem", "openmpi", "tandem-a", "openmpi-a"):
    m = med[lib]
    print(f"{lib:9} 8 B {m[0]:6.3f} us ({rng(lib, 0)})   1 MiB {m[1]:6.0f} MB/s ({rng(lib, 1)})   "
          f"4 MiB {m[2]:6.0f} MB/s ({rng(lib, 2)})")
print(f"memcpy    4 MiB {med['memcpy'][2]:6.0f} MB/s ({rng('memcpy', 2)})")
t, o = med["tandem"], med["openmpi"]
print(f"tandem/openmpi: 8 B latency {t[0] / o[0]:.2f}x, 1 MiB bandwidth {t[1] / o[1]:.2f}x, "
      f"4 MiB bandwidth {t[2] / o[2]:.2f}x; tandem 4 MiB / memcpy {t[2] / med['memcpy'][2]:.2f}x")
# The host moves the two CPUs closer or apart between launches, which
# changes the 8-byte latency by 2-3x: a ratio of the two launches of one
# round (seconds apart, usually in one placement) is steadier than the
# ratio of medians.
paired = sorted(a[0] / b[0] for a, b in zip(runs["tandem"], runs["openmpi"]))
print(f"8 B latency, ratio within each round: median {statistics.median(paired):.3f}x "
      f"({paired[0]:.3f}-{paired[-1]:.3f}x over {len(paired)} rounds)")
t, o = med["tandem-a"], med["openmpi-a"]
print(f"with MPI_Alloc_mem buffers (-a): 1 MiB bandwidth {t[1] / o[1]:.2f}x, 4 MiB bandwidth {t[2] / o[2]:.2f}x; "
      f"tandem 4 MiB / memcpy {t[2] / med['memcpy'][2]:.2f}x")
PY
rm -f "$out"

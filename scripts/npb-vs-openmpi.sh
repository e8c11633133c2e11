#!/usr/bin/env bash
# The NAS Parallel Benchmarks (NPB 3.4, MPI) on Tandem and on Debian's
# Open MPI, built from the same sources and run interleaved, ROUNDS times
# each: prints each benchmark's median time, the spread (min-max), the
# verification, and Tandem's time over Open MPI's.
#
#   NPB_DIR=/path/to/NPB3.4-MPI scripts/npb-vs-openmpi.sh [CLASS] [RANKS] [ROUNDS] [BENCHMARKS...]
#   (defaults: B 4 1 bt cg ep ft is lu mg sp)
#
# NPB is not part of Tandem: get it from NASA's NAS site and point NPB_DIR at
# its NPB3.4-MPI directory (it is copied, not changed). Needs gfortran and
# Open MPI (`apt-get install openmpi-bin libopenmpi-dev`).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
class=${1:-B}
ranks=${2:-4}
rounds=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
benchmarks=("$@")
[ ${#benchmarks[@]} -gt 0 ] || benchmarks=(bt cg ep ft is lu mg sp)
: "${NPB_DIR:?set NPB_DIR to the NPB3.4-MPI directory}"
[ -f "$NPB_DIR/config/make.def.template" ] || { echo "npb: $NPB_DIR is not an NPB3.4-MPI directory" >&2; exit 2; }
command -v mpifort.openmpi >/dev/null || { echo "npb: Open MPI's mpifort.openmpi is not installed" >&2; exit 2; }

cargo build --release --quiet
tandem=$repo/target/release/tandem
work=${NPB_WORK:-$repo/target/npb}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# One copy of the sources per library, configured by make.def.
setup() { # dir fc cc
    local dir=$1
    if [ ! -d "$dir" ]; then
        mkdir -p "$(dirname "$dir")"
        cp -r "$NPB_DIR" "$dir"
        # Nothing built by another compiler or MPI.
        find "$dir" \( -name '*.o' -o -name '*.a' -o -name '*.mod' -o -name npbparams.h \) -delete
        rm -f "$dir"/bin/*
    fi
    sed -e "s|^MPIFC = .*|MPIFC = $2|" -e "s|^MPICC = .*|MPICC = $3|" \
        -e "s|^FFLAGS\t= .*|FFLAGS\t= -O3 -fallow-argument-mismatch|" \
        -e "s|^RAND   = .*|RAND   = randdp|" \
        "$dir/config/make.def.template" > "$dir/config/make.def"
}
setup "$work/tandem" "$tandem fc" "$tandem cc"
setup "$work/openmpi" "mpifort.openmpi" "mpicc.openmpi"
for lib in tandem openmpi; do
    for b in "${benchmarks[@]}"; do
        [ -x "$work/$lib/bin/$b.$class.x" ] ||
            make -C "$work/$lib" "$b" CLASS="$class" >"$work/$lib-$b.log" 2>&1 ||
            { echo "npb: building $b for $lib failed; see $work/$lib-$b.log" >&2; exit 1; }
    done
done

run() { # lib bench -> "seconds verified"
    local out
    if [ "$1" = tandem ]; then
        out=$("$tandem" run -n "$ranks" "$work/tandem/bin/$2.$class.x" 2>&1) || true
    else
        out=$(mpirun.openmpi --oversubscribe -n "$ranks" "$work/openmpi/bin/$2.$class.x" 2>&1) || true
    fi
    echo "$(awk '/Time in seconds/ {print $5}' <<<"$out") $(awk '/Verification    =/ {print $3}' <<<"$out")"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

printf '%-4s %22s %22s %8s\n' "NPB" "Tandem s (min-max)" "Open MPI s (min-max)" "ratio"
for b in "${benchmarks[@]}"; do
    t=() o=() ok=SUCCESSFUL
    for ((r = 0; r < rounds; r++)); do
        # Interleaved, the order alternating, so drift hits both alike.
        for lib in $([ $((r % 2)) = 0 ] && echo "openmpi tandem" || echo "tandem openmpi"); do
            read -r secs ver < <(run "$lib" "$b")
            [ "$ver" = SUCCESSFUL ] || ok="FAILED($lib)"
            if [ "$lib" = tandem ]; then t+=("${secs:-nan}"); else o+=("${secs:-nan}"); fi
        done
    done
    tm=$(printf '%s\n' "${t[@]}" | median)
    om=$(printf '%s\n' "${o[@]}" | median)
    tr=$(printf '%s\n' "${t[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)
    orr=$(printf '%s\n' "${o[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)
    printf '%-4s %8.3f (%11s) %8.3f (%11s) %7.2fx %s\n' "$b.$class" "$tm" "$tr" "$om" "$orr" \
        "$(echo "$tm / $om" | bc -l)" "$ok"
done

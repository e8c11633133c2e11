#!/usr/bin/env bash
# mpi4py's own test suite against this checkout's Tandem, as mpi4py's
# authors run it: mpi4py from PyPI, built with Tandem's mpicc into a
# virtual environment, then `python test/main.py` in its source tree under
# `tandem run` on 1, 2 and 3 ranks (or the counts given as arguments).
#
#   scripts/mpi4py-tests.sh [RANKS...]
#
# The build is kept in target/mpi4py and reused while mpi4py's version,
# Tandem's mpi.h are unchanged. Nothing of mpi4py is skipped for Tandem;
# mpi4py itself skips tests of Python packages that are not installed
# (NumPy is; CuPy, Numba, CFFI, PyYAML and dill are not), of ULFM's
# MPI_Comm_revoke (not in Tandem), and of other job sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

MPI4PY_VERSION=4.1.2
# The tests of buffers from NumPy arrays need NumPy (a binary wheel).
NUMPY_SPEC="numpy>=1.26,<3"
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(1 2 3)

release="$root/target/release"
[ -x "$release/tandem" ] && [ -e "$release/libmpi_abi.so" ] || {
    echo "mpi4py-tests: build Tandem first (cargo build --release)" >&2
    exit 2
}
python=$(command -v python3) || { echo "mpi4py-tests: python3 is not installed" >&2; exit 2; }

dir="$root/target/mpi4py"
venv="$dir/venv"
src="$dir/mpi4py-$MPI4PY_VERSION"
stamp="$dir/stamp"
want="$MPI4PY_VERSION $NUMPY_SPEC $(sha256sum include/mpi.h | cut -c1-16)"

if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "mpi4py-tests: building mpi4py $MPI4PY_VERSION against Tandem (target/mpi4py)"
    rm -rf "$dir"
    mkdir -p "$dir"
    "$python" -m venv "$venv"
    # The source distribution holds the test suite.
    "$venv/bin/pip" download --quiet --no-binary :all: --no-deps \
        "mpi4py==$MPI4PY_VERSION" -d "$dir"
    tar -xzf "$dir/mpi4py-$MPI4PY_VERSION.tar.gz" -C "$dir"
    # Built without optimisation: the C extension compiles in a fraction of
    # the time, and the suite tests behaviour, not speed.
    MPICC="$release/mpicc" CFLAGS="-O0 -g0" \
        "$venv/bin/pip" install --quiet --no-cache-dir "$src"
    "$venv/bin/pip" install --quiet --only-binary :all: "$NUMPY_SPEC"
    echo "$want" > "$stamp"
fi

status=0
for n in "${ranks[@]}"; do
    log="$dir/suite-np$n.log"
    echo "mpi4py-tests: $n rank(s)"
    # The suite must end by itself; the timeout only stops a hang.
    if (cd "$src" && PATH="$release/bin:$PATH" "$release/tandem" run -n "$n" --timeout 600 \
            "$venv/bin/python" test/main.py) > "$log" 2>&1 \
        && grep -q '^OK' "$log"; then
        echo "  $(grep -m1 '^Ran ' "$log"): $(grep -m1 '^OK' "$log")"
    else
        echo "mpi4py-tests: FAILED on $n rank(s); the end of $log:" >&2
        tail -n 40 "$log" >&2
        status=1
    fi
done
# mpi4py.futures: a pool of spawned workers, the common way to start them.
echo "mpi4py-tests: mpi4py.futures pool"
if out=$(PATH="$release/bin:$PATH" "$release/tandem" run -n 1 --timeout 120 \
        "$venv/bin/python" "$root/tests/python/futures_pool.py" 2>&1) \
    && grep -q '^PASS futures_pool' <<<"$out"; then
    echo "  PASS futures_pool"
else
    echo "mpi4py-tests: mpi4py.futures pool FAILED:" >&2
    echo "$out" >&2
    status=1
fi
exit $status

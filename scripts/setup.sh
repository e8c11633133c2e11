#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build Tandem (a C compiler,
# gfortran, pkg-config, Rust, and the font `tandem bench --plot FILE.png` draws text
# with) and, with TANDEM_SETUP_TESTS=1, what the tests use (iproute2,
# cmake, Slurm, Chromium). Sourced by the other scripts; safe to run again.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v curl >/dev/null 2>&1 || need_apt+=(curl ca-certificates)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
# `tandem fc` (mpifort) wraps gfortran.
command -v gfortran >/dev/null 2>&1 || need_apt+=(gfortran)
if [ "${TANDEM_SETUP_TESTS:-0}" = 1 ]; then
    # The tests' extras (scripts/test.sh asks for them): network namespaces
    # as hosts (ip, tc), a CMake project that finds Tandem with
    # find_package(MPI), and a one-machine Slurm cluster for
    # `srun --mpi=pmi2` and `srun --mpi=pmix` jobs.
    command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
    command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
    # A Meson project that finds Tandem (tests/meson).
    command -v meson >/dev/null 2>&1 || need_apt+=(meson)
    command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
    # An autotools project that builds with CC=mpicc (tests/autotools).
    command -v autoreconf >/dev/null 2>&1 || need_apt+=(autoconf automake)
    # The check that the generated Fortran bindings are current.
    command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
    # mpi4py's test suite (scripts/mpi4py-tests.sh) builds into a venv.
    if ! command -v python3 >/dev/null 2>&1 \
        || ! python3 -c 'import ensurepip, os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' >/dev/null 2>&1; then
        need_apt+=(python3-venv python3-dev)
    fi
    command -v srun >/dev/null 2>&1 || need_apt+=(slurmd slurmctld slurm-client)
    # Its PMIx plugin (`srun --mpi=pmix`) and the OpenPMIx client library
    # Tandem loads under it; the plugin opens the unversioned libpmix.so,
    # which only libpmix-dev provides.
    dpkg -s slurm-wlm-basic-plugins >/dev/null 2>&1 || need_apt+=(slurm-wlm-basic-plugins)
    ldconfig -p 2>/dev/null | grep -q 'libpmix.so.2 ' || need_apt+=(libpmix2)
    ldconfig -p 2>/dev/null | grep -q 'libpmix.so ' || need_apt+=(libpmix-dev)
    # Headless Chromium: the benchmark report's page checked in a browser.
    command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}" >&2
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The oldest Rust that builds Tandem (rust-version in Cargo.toml).
rust_needed=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml" | head -1)

# Debian 12's own current Rust (rustc-web, cargo-web), for machines that
# cannot reach rustup's site; it has no clippy or rustfmt, so the tests
# then skip those checks (scripts/test.sh says so).
debian_rust() {
    local candidate
    candidate=$(apt-cache policy cargo-web 2>/dev/null | sed -n 's/^ *Candidate: \([0-9.]*\).*/\1/p')
    if [ -z "$candidate" ] || [ "$(printf '%s\n%s\n' "$rust_needed" "$candidate" | sort -V | head -1)" != "$rust_needed" ]; then
        echo "setup: Debian offers no Rust of at least $rust_needed (cargo-web: ${candidate:-none})" >&2
        return 1
    fi
    echo "setup: installing Debian's Rust $candidate (rustc-web, cargo-web)" >&2
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq rustc-web cargo-web >/dev/null
}

if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    elif curl --proto '=https' --tlsv1.2 -sSf --max-time 20 -o /tmp/rustup-init.$$ https://sh.rustup.rs; then
        echo "setup: installing Rust (stable) with rustup" >&2
        sh /tmp/rustup-init.$$ -y --profile minimal -c clippy,rustfmt >&2
        rm -f /tmp/rustup-init.$$
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        rm -f /tmp/rustup-init.$$
        echo "setup: rustup's site cannot be reached; trying Debian's Rust" >&2
        if ! debian_rust; then
            echo "setup: no Rust: install Rust $rust_needed or later (https://rustup.rs) and run this again" >&2
            exit 1
        fi
    fi
fi

# The tests build the documentation book (docs/) with mdBook.
if [ "${TANDEM_SETUP_TESTS:-0}" = 1 ] && ! command -v mdbook >/dev/null 2>&1; then
    echo "setup: installing mdbook with cargo" >&2
    cargo install --locked --quiet mdbook >&2
fi

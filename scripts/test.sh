#!/usr/bin/env bash
# The test suite: formatting, lints, unit tests and multi-process
# integration tests (C and Fortran programs built with `tandem cc` and
# `tandem fc`, run with `tandem run`), mpi4py's own test suite, and the
# documentation book.
set -euo pipefail
cd "$(dirname "$0")/.."
TANDEM_SETUP_TESTS=1 source scripts/setup.sh

# Debian's own Rust (see setup.sh) has no rustfmt or clippy.
if cargo fmt --version >/dev/null 2>&1; then
    cargo fmt --all --check
else
    echo "test: rustfmt is not installed (Debian's Rust has none): formatting not checked" >&2
fi
# The Fortran bindings are generated from include/mpi.h; they must be current.
python3 scripts/gen-fortran.py --check
# The declared rust-version covers the locked dependencies.
python3 scripts/check-rust-version.py
cargo build --release --workspace
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --release --workspace --all-targets -- -D warnings
else
    echo "test: clippy is not installed (Debian's Rust has none): lints not checked" >&2
fi
# The cargo-fuzz targets (fuzz/, run with a nightly toolchain) still build.
CARGO_TARGET_DIR=target/fuzz cargo check --release --locked --manifest-path fuzz/Cargo.toml
# The API documentation builds without warnings (broken or private links).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo test --release --workspace
# mpi4py's own test suite on 1, 2 and 3 ranks (built from PyPI into target/mpi4py).
scripts/mpi4py-tests.sh
# The documentation builds as a book (its links are checked by the tests).
book=$(mktemp -d)
mdbook build docs --dest-dir "$book"
rm -rf "$book"

#!/usr/bin/env bash
# Installs Tandem under a prefix, or makes a Debian package of it.
#
#     scripts/install.sh --prefix DIR [--no-build]
#     scripts/install.sh --deb [--no-build]
#
# --prefix DIR lays out
#     DIR/bin            tandem; mpicc, mpicxx, mpic++, mpiCC, mpifort, mpif90,
#                        mpif77, mpirun, mpiexec (links to tandem)
#     DIR/lib            libmpi_abi.so.1.0.0 (SONAME libmpi_abi.so.1, the MPI-5.0
#                        standard ABI's major version), its links libmpi_abi.so.1
#                        and libmpi_abi.so, and the static libmpi_abi.a
#     DIR/lib/pkgconfig  tandem-mpi.pc (also as mpi.pc, mpi-c.pc, mpi-cxx.pc), with
#                        paths relative to where they lie
#     DIR/include        mpi.h, mpif.h, rwapi.h, fortran/ (the module sources
#                        `tandem fc` compiles once per compiler)
#     DIR/share/man/man1 tandem(1), tandem-run(1), tandem-cc(1), ... and mpicc(1),
#                        mpirun(1), ... pointing to them
# Programs built with DIR/bin/mpicc find the library in DIR/lib (an rpath):
# they keep running when the checkout is moved or deleted. Nothing outside
# DIR is touched. Binaries are stripped.
#
# --deb builds target/debian/tandem-mpi_<version>_<arch>.deb: the same layout
# under /opt/tandem, and /usr/bin/tandem. The mpicc/mpirun names stay in
# /opt/tandem/bin (put it first on PATH to use them), so the package never
# takes them from Debian's Open MPI or MPICH.
#
# Both build first (cargo build --release) unless --no-build is given.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,/^set -e/p' "$0" | sed -e '/^set -e/d' -e 's/^# \{0,1\}//'
    exit "${1:-2}"
}

prefix=""
deb=0
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --deb) deb=1; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) usage 0 ;;
        *) echo "install.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
if [ "$deb" = 0 ] && [ -z "$prefix" ]; then
    echo "install.sh: give --prefix DIR or --deb" >&2
    usage
fi

built=target/release
if [ "$build" = 1 ]; then
    cargo build --release --locked
fi
for f in "$built/tandem" "$built/libmpi_abi.so" "$built/libmpi_abi.a" include/mpi.h; do
    if [ ! -f "$f" ]; then
        echo "install.sh: $f is missing: build with 'cargo build --release' first (or drop --no-build)" >&2
        exit 1
    fi
done
version=$("$built/tandem" --version | awk '{print $2}')

# Copies file $1 to $2 with mode $3, stripped of what a debugger alone needs.
put() {
    install -m "$3" "$1" "$2"
    if command -v strip >/dev/null; then
        strip --strip-unneeded "$2" 2>/dev/null || strip --strip-debug "$2"
    fi
}

# Lays Tandem out under $1.
install_to() {
    local p=$1
    install -d "$p/bin" "$p/lib/pkgconfig" "$p/include" "$p/share/man/man1"
    put "$built/tandem" "$p/bin/tandem" 755
    for name in mpicc mpicxx mpic++ mpiCC mpifort mpif90 mpif77 mpirun mpiexec; do
        ln -sfn tandem "$p/bin/$name"
    done
    put "$built/libmpi_abi.so" "$p/lib/libmpi_abi.so.1.0.0" 755
    ln -sfn libmpi_abi.so.1.0.0 "$p/lib/libmpi_abi.so.1"
    ln -sfn libmpi_abi.so.1 "$p/lib/libmpi_abi.so"
    install -m 644 "$built/libmpi_abi.a" "$p/lib/libmpi_abi.a"
    strip --strip-debug "$p/lib/libmpi_abi.a" 2>/dev/null || true
    cp -R include/. "$p/include/"
    local pc
    pc=$(cat <<EOF
# Tandem's MPI library (installed by scripts/install.sh; paths relative to this file)
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: tandem-mpi
Description: Tandem, an MPI library with a Rust core (MPI-5.0 standard ABI)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lmpi_abi
EOF
)
    for name in tandem-mpi mpi mpi-c mpi-cxx; do
        printf '%s\n' "$pc" >"$p/lib/pkgconfig/$name.pc"
    done
    "$p/bin/tandem" _man "$p/share/man/man1"
    gzip -9nf "$p"/share/man/man1/*.1
    for alias in mpicc:cc mpicxx:cxx mpic++:cxx mpiCC:cxx mpifort:fc mpif90:fc mpif77:fc \
        mpirun:run mpiexec:run; do
        ln -sfn "tandem-${alias#*:}.1.gz" "$p/share/man/man1/${alias%%:*}.1.gz"
    done
}

if [ "$deb" = 0 ]; then
    mkdir -p "$prefix"
    prefix=$(cd "$prefix" && pwd)
    install_to "$prefix"
    echo "Installed Tandem $version in $prefix."
    echo "Put $prefix/bin first on PATH (mpicc, mpirun, ...), or call $prefix/bin/tandem."
    exit 0
fi

arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install_to "$stage/opt/tandem"
install -d "$stage/usr/bin" "$stage/DEBIAN"
ln -sfn ../../opt/tandem/bin/tandem "$stage/usr/bin/tandem"
size=$(du -sk "$stage/opt" | awk '{print $1}')
cat >"$stage/DEBIAN/control" <<EOF
Package: tandem-mpi
Version: $version
Architecture: $arch
Maintainer: Tandem developers <tandem@localhost>
Installed-Size: $size
Depends: libc6
Recommends: gcc, g++, gfortran
Section: devel
Priority: optional
Description: MPI library (MPI-5.0 standard ABI) with its own launcher
 Tandem runs MPI programs on shared memory and TCP, with a progress engine
 whose policy you choose, replicated ranks for machines that come and go,
 and benchmarks that compare it with the other MPI libraries installed.
 Installed in /opt/tandem: put /opt/tandem/bin first on PATH for mpicc,
 mpicxx, mpifort and mpirun; /usr/bin/tandem is always there.
EOF
mkdir -p target/debian
out="target/debian/tandem-mpi_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$out" >/dev/null
echo "Built $out (install with: apt-get install ./$out)"

//! Makes the names build systems look for next to the `tandem` executable
//! (target/<profile>/): `mpicc`, `mpicxx`, `mpic++`, `mpiCC`, `mpifort`, `mpif90`,
//! `mpif77`, `mpirun` and `mpiexec`
//! as symbolic links to `tandem` (which dispatches on its name), also in
//! target/<profile>/bin/ beside a link to `tandem`,
//! `libmpi_abi.so.1` (the library's SONAME, which programs record) as a
//! link to `libmpi_abi.so`, and pkg-config files in
//! target/<profile>/pkgconfig/ (`tandem-mpi.pc`, also as `mpi.pc`,
//! `mpi-c.pc` and `mpi-cxx.pc`) describing the build tree.

use std::path::{Path, PathBuf};

const NAMES: &[&str] = &[
    "mpicc", "mpicxx", "mpic++", "mpiCC", "mpifort", "mpif90", "mpif77", "mpirun", "mpiexec",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let Some(out) = std::env::var_os("OUT_DIR") else {
        return;
    };
    // OUT_DIR is target/<profile>/build/<crate>-<hash>/out.
    let Some(profile_dir) = Path::new(&out).ancestors().nth(3).map(Path::to_path_buf) else {
        return;
    };
    if std::fs::create_dir_all(&profile_dir).is_err() {
        return;
    }
    // target/<profile>/bin too, so that the build tree is laid out as an
    // installation's prefix for tools that look in PREFIX/bin (CMake's
    // FindMPI with MPI_HOME finds mpiexec there, then the compilers beside it).
    let bin = profile_dir.join("bin");
    let _ = std::fs::create_dir_all(&bin);
    link(&bin, "tandem", "../tandem");
    for name in NAMES {
        link(&profile_dir, name, "tandem");
        link(&bin, name, "tandem");
    }
    link(&profile_dir, "libmpi_abi.so.1", "libmpi_abi.so");
    write_pkgconfig(&profile_dir);
}

/// Makes `dir/name` a symbolic link to `target`, unless it is one already.
fn link(dir: &Path, name: &str, target: &str) {
    let link = dir.join(name);
    if std::fs::symlink_metadata(&link).is_ok() {
        if std::fs::read_link(&link).is_ok_and(|t| t == Path::new(target)) {
            return;
        }
        let _ = std::fs::remove_file(&link);
    }
    if let Err(e) = std::os::unix::fs::symlink(target, &link) {
        println!("cargo:warning=cannot create {}: {e}", link.display());
    }
}

fn write_pkgconfig(profile_dir: &Path) {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let repo = manifest.join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let include = repo.join("include");
    let lib = profile_dir
        .canonicalize()
        .unwrap_or(profile_dir.to_path_buf());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let text = format!(
        "# Tandem's MPI library in the build tree (made by crates/tandem-cli/build.rs)\n\
         includedir={}\n\
         libdir={}\n\
         \n\
         Name: tandem-mpi\n\
         Description: Tandem, an MPI library with a Rust core (MPI-5.0 standard ABI)\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lmpi_abi\n",
        include.display(),
        lib.display()
    );
    let dir = profile_dir.join("pkgconfig");
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    for name in ["tandem-mpi", "mpi", "mpi-c", "mpi-cxx"] {
        let path = dir.join(format!("{name}.pc"));
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            let _ = std::fs::write(&path, &text);
        }
    }
}

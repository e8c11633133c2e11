//! Tandem's MPI C ABI: `libmpi_abi.so` / `libmpi_abi.a`, following the
//! MPI-5.0 standard ABI (see `include/mpi.h`).
//!
//! Every exported function goes through `state::call`: it takes ownership
//! of the library state with one atomic operation, checks its arguments,
//! turns errors into MPI error classes handled by the communicator's error
//! handler, and never lets a panic unwind into C.

pub mod abi;
mod abi_query;
mod args;
mod attr;
mod bsend;
mod coll;
mod comm;
mod comm_shape;
mod datarep;
mod datatype;
mod datatype_ctor;
mod datatype_dist;
mod dynamic;
mod env;
mod env_info;
mod errcodes;
mod errhandler;
mod ext;
mod external;
mod file;
mod file_io;
mod file_view;
mod fortran;
mod grequest;
mod group;
mod handle_int;
mod host;
mod info;
mod intercomm;
mod large_count;
mod malloc;
mod misc;
mod neighbor;
mod ops;
mod part;
mod persistent;
mod persistent_coll;
mod pmpi;
mod pt2pt;
mod request;
mod rwapi;
mod session;
mod state;
mod tool;
mod topo;
mod win;
mod xfer;

pub use env::library_version;

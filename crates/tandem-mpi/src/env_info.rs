//! The environment as info objects: `MPI_INFO_ENV` (what the process was
//! started with), `MPI_Info_create_env` (the same for given arguments) and
//! `MPI_Get_hw_resource_info`.
//!
//! The keys are the standard's (MPI-5.0 11.2.3) for what Tandem knows:
//! `command` and `argv` (the arguments), `maxprocs` (processes started
//! together: the job's size), `host`, `wdir` (the working directory).
//! `soft`, `arch` and `file` describe spawn requests, which Tandem has
//! not, and `thread_level` a thread level asked for at launch, which
//! `tandem run` has no option for, so they are absent.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int};

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::info;
use crate::state::{call, Fail};

/// How many processes were started together: the launcher's job size
/// (`tandem run`, or a PMI launcher), else 1 (a process started on its own).
fn job_size() -> String {
    [tandem::bootstrap::env::SIZE, "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|x| x.parse::<u32>().is_ok()))
        .unwrap_or_else(|| "1".to_string())
}

/// The environment keys for a process started with `args`. They describe
/// the start, so they are the same before and after `MPI_Init`.
pub fn env_pairs(args: &[String]) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    if let Some((command, rest)) = args.split_first() {
        pairs.push(("command".to_string(), command.clone()));
        if !rest.is_empty() {
            pairs.push(("argv".to_string(), rest.join(" ")));
        }
    }
    pairs.push(("maxprocs".to_string(), job_size()));
    if let Some(h) = crate::host::name() {
        pairs.push(("host".to_string(), h));
    }
    if let Ok(dir) = std::env::current_dir() {
        pairs.push(("wdir".to_string(), dir.to_string_lossy().into_owned()));
    }
    pairs
}

/// The keys of `MPI_INFO_ENV`: the arguments this process started with.
pub fn process_env() -> Vec<(String, String)> {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    env_pairs(&args)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_create_env(
    argc: c_int,
    argv: *mut *mut c_char,
    info_: *mut MPI_Info,
) -> c_int {
    // Callable before MPI_Init (and after MPI_Finalize), as the standard says.
    info::info_call("MPI_Info_create_env", |s| {
        args::out_ptr(MPI_COMM_WORLD, info_, "info")?;
        let n = usize::try_from(argc).map_err(|_| {
            Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                format!("negative argc {argc}"),
            )
        })?;
        let mut given = Vec::with_capacity(n);
        if n > 0 {
            args::out_ptr(MPI_COMM_WORLD, argv, "argv")?;
            for i in 0..n {
                // SAFETY: `argc` entries (the MPI contract, as main's).
                let p = unsafe { *argv.add(i) };
                if p.is_null() {
                    break;
                }
                // SAFETY: a C string (the MPI contract).
                let a = unsafe { std::ffi::CStr::from_ptr(p) };
                given.push(a.to_string_lossy().into_owned());
            }
        }
        let _ = s;
        let h = info::add_any(env_pairs(&given));
        // SAFETY: checked non-null.
        unsafe { put(info_, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_hw_resource_info(hw_info: *mut MPI_Info) -> c_int {
    call("MPI_Get_hw_resource_info", |s| {
        args::out_ptr(MPI_COMM_WORLD, hw_info, "hw_info")?;
        // The one resource type Tandem splits communicators by
        // (MPI_COMM_TYPE_SHARED, MPI_COMM_TYPE_RESOURCE_GUIDED's
        // "mpi_shared_memory"), and the host it is on.
        let mut pairs = vec![(
            "mpi_hw_resource_type".to_string(),
            "mpi_shared_memory".to_string(),
        )];
        if let Some(h) = crate::host::name() {
            pairs.push(("host".to_string(), h));
        }
        let h = info::add(s, pairs);
        // SAFETY: checked non-null.
        unsafe { put(hw_info, h) };
        Ok(())
    })
}

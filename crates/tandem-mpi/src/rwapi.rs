//! The C functions of the Remote-Write API (`include/rwapi.h`): argument
//! checks, the conversions between rwapi.h's types and the core's, and the
//! call boundary. The engine and the heap are the core's
//! (`tandem::rwapi`). Errors are returned as negated MPI error classes,
//! never raised through MPI's error handlers.

use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tandem::rwapi::{Net, RwapiCall, StartError};
use tandem::ErrorClass;

use crate::abi::MPI_THREAD_SINGLE;
use crate::state::{self, Owner, State};

/// The network address of a block (`rwapi_net`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RwapiNet {
    pub addr: u64,
    pub key: u32,
    pub node: i32,
}

/// A small message (`rwapi_small`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RwapiSmall {
    pub bytes: [u8; 16],
}

const OK: c_int = 0;
const ERR_ARG: c_int = -13;
const ERR_NODE: c_int = -6;
const ERR_INIT: c_int = -16;

fn neg(class: ErrorClass) -> c_int {
    -class.code()
}

fn rc(r: Result<(), ErrorClass>) -> c_int {
    r.map_or_else(neg, |()| OK)
}

impl RwapiNet {
    /// The core's address; a negative node is one no node has.
    fn to_core(self) -> Net {
        Net {
            addr: self.addr,
            key: self.key,
            node: u32::try_from(self.node).unwrap_or(u32::MAX),
        }
    }
}

/// Runs `body` on the library state; `fail` when there is none or on panic.
fn with_state<T: Copy>(func: &str, fail: T, body: impl FnOnce(&mut State) -> T) -> T {
    catch_unwind(AssertUnwindSafe(|| {
        let mut owner = Owner::acquire(func);
        match owner.slot().as_mut() {
            Some(s) => {
                state::enter(s);
                let r = body(s);
                state::leave(s);
                r
            }
            None => fail,
        }
    }))
    .unwrap_or_else(|_| {
        eprintln!("tandem: internal error in {func}");
        fail
    })
}

/// Runs `body` with RWAPI started; `fail` otherwise.
fn with_rw<T: Copy>(func: &str, fail: T, body: impl FnOnce(RwapiCall<'_>) -> T) -> T {
    with_state(func, fail, |s| s.rt.rwapi().map_or(fail, body))
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_init(_argc: c_int, _argv: *mut *mut c_char) -> c_int {
    if state::is_finalized() {
        return ERR_INIT;
    }
    let owns_mpi = !state::is_initialized();
    if owns_mpi {
        let rc = state::initialize("rwapi_init", MPI_THREAD_SINGLE);
        if rc != 0 {
            return -rc;
        }
    }
    with_state("rwapi_init", ERR_INIT, |s| {
        if s.rt.rwapi().is_some() {
            return OK;
        }
        match s.rt.rwapi_init() {
            Ok(()) => {
                s.rwapi_owns_mpi = owns_mpi;
                OK
            }
            Err(StartError::Replicated) => {
                eprintln!("rwapi_init: RWAPI is not available in a job with replicas");
                ERR_INIT
            }
            Err(StartError::Failed(e)) => neg(e.class),
        }
    })
}

#[no_mangle]
pub extern "C" fn rwapi_flush() -> c_int {
    with_rw("rwapi_flush", ERR_INIT, |mut rw| rc(rw.flush()))
}

#[no_mangle]
pub extern "C" fn rwapi_finalize() -> c_int {
    let done = with_state("rwapi_finalize", None, |s| {
        let r = s.rt.rwapi_finalize()?;
        Some((rc(r), s.rwapi_owns_mpi))
    });
    let Some((rc, owns_mpi)) = done else {
        return ERR_INIT;
    };
    if owns_mpi {
        let fin = state::finalize("rwapi_finalize");
        if fin != 0 && rc == OK {
            return -fin;
        }
    }
    rc
}

#[no_mangle]
pub extern "C" fn rwapi_rank() -> c_int {
    with_rw("rwapi_rank", ERR_INIT, |mut rw| rw.rank() as c_int)
}

#[no_mangle]
pub extern "C" fn rwapi_size() -> c_int {
    with_rw("rwapi_size", ERR_INIT, |mut rw| rw.size() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_alloc(size: usize, net: *mut RwapiNet) -> *mut u8 {
    if size == 0 || net.is_null() {
        return std::ptr::null_mut();
    }
    with_rw("rwapi_alloc", std::ptr::null_mut(), |mut rw| {
        let Some((base, at)) = rw.alloc(size) else {
            return std::ptr::null_mut();
        };
        // SAFETY: checked non-null; the caller's out-parameter.
        unsafe {
            *net = RwapiNet {
                addr: at.addr,
                key: at.key,
                node: at.node as i32,
            };
        }
        base
    })
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_free(ptr: *mut u8) -> c_int {
    with_rw("rwapi_free", ERR_INIT, |mut rw| rc(rw.free(ptr)))
}

#[no_mangle]
pub extern "C" fn rwapi_send(node: c_int, small: RwapiSmall) -> c_int {
    with_rw("rwapi_send", ERR_INIT, |mut rw| {
        let Ok(node) = u32::try_from(node) else {
            return ERR_NODE;
        };
        rc(rw.send(node, &small.bytes))
    })
}

#[no_mangle]
pub unsafe extern "C" fn rwapi_receive(node: *mut c_int, small: *mut RwapiSmall) -> c_int {
    if node.is_null() || small.is_null() {
        return ERR_ARG;
    }
    with_rw("rwapi_receive", ERR_INIT, |mut rw| match rw.receive() {
        None => 0,
        Some((from, bytes)) => {
            // SAFETY: checked non-null; the caller's out-parameters.
            unsafe {
                *node = from as c_int;
                *small = RwapiSmall { bytes };
            }
            1
        }
    })
}

#[no_mangle]
pub extern "C" fn rwapi_write(node: c_int, local: RwapiNet, remote: RwapiNet, size: usize) -> i64 {
    with_rw("rwapi_write", i64::from(ERR_INIT), |mut rw| {
        let Ok(node) = u32::try_from(node) else {
            return i64::from(ERR_NODE);
        };
        match rw.write(node, local.to_core(), remote.to_core(), size) {
            Ok(sid) => sid as i64,
            Err(class) => i64::from(neg(class)),
        }
    })
}

#[no_mangle]
pub extern "C" fn rwapi_issent(sid: i64) -> c_int {
    with_rw("rwapi_issent", ERR_INIT, |mut rw| {
        // Send ids are positive; 0 is none.
        match rw.issent(u64::try_from(sid).unwrap_or(0)) {
            Ok(sent) => c_int::from(sent),
            Err(class) => neg(class),
        }
    })
}

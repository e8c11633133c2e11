//! Communicator attributes: the predefined ones (`MPI_TAG_UB`, `MPI_HOST`,
//! `MPI_IO`, `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`, `MPI_APPNUM`,
//! `MPI_LASTUSEDCODE`) and user key values with copy and delete callbacks
//! (`MPI_Comm_create_keyval` and the deprecated MPI-1 forms).
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::state::{call, Fail, State};

/// First user key value (above the predefined attribute keys).
const KEYVAL_BASE: c_int = 1000;

#[derive(Clone, Copy)]
struct Keyval {
    /// A function address, or the sentinels 0 (do not copy) / 1 (copy the value).
    copy: usize,
    /// A function address, or 0 (nothing to do).
    delete: usize,
    extra: *mut c_void,
    /// Freed by the application: unusable for new calls, but attributes
    /// still set with it keep its callbacks until they are deleted.
    freed: bool,
}

/// The user key values of the process.
#[derive(Default)]
pub struct Keyvals {
    keys: Vec<Option<Keyval>>,
}

/// The key value `k` as the application may use it (not freed).
fn keyval(s: &State, k: c_int) -> Result<Keyval, Fail> {
    keyval_any(s, k).filter(|kv| !kv.freed).ok_or_else(|| {
        Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Keyval,
            format!("invalid attribute key {k}"),
        )
    })
}

/// The key value `k`, freed or not (for the callbacks of attributes set
/// before it was freed).
fn keyval_any(s: &State, k: c_int) -> Option<Keyval> {
    usize::try_from(k - KEYVAL_BASE)
        .ok()
        .and_then(|i| s.ext.keyvals.keys.get(i).copied().flatten())
}

/// Gives a freed key value's slot back once no communicator has an
/// attribute with it.
fn reclaim_if_unused(s: &mut State, k: c_int) {
    if !keyval_any(s, k).is_some_and(|kv| kv.freed) {
        return;
    }
    let in_use = s
        .comms
        .iter()
        .flatten()
        .any(|c| c.ext.attrs.get(k).is_some());
    if !in_use {
        s.ext.keyvals.keys[(k - KEYVAL_BASE) as usize] = None;
    }
}

// Values of the predefined attributes: the attribute value is a pointer to them.
static TAG_UB: AtomicI32 = AtomicI32::new(crate::args::TAG_UB);
static HOST: AtomicI32 = AtomicI32::new(MPI_PROC_NULL);
static IO: AtomicI32 = AtomicI32::new(MPI_ANY_SOURCE);
static WTIME_IS_GLOBAL: AtomicI32 = AtomicI32::new(0);
static UNIVERSE_SIZE: AtomicI32 = AtomicI32::new(1);
static APPNUM: AtomicI32 = AtomicI32::new(0);
static LASTUSEDCODE: AtomicI32 = AtomicI32::new(MPI_ERR_LASTCODE);

/// Sets the value of `MPI_LASTUSEDCODE` (error codes were added or removed).
pub fn set_last_used_code(code: c_int) {
    LASTUSEDCODE.store(code, Ordering::Relaxed);
}

fn predefined(s: &State, k: c_int) -> Option<*mut c_void> {
    let v: &AtomicI32 = match k {
        MPI_TAG_UB => &TAG_UB,
        MPI_HOST => &HOST,
        MPI_IO => &IO,
        MPI_WTIME_IS_GLOBAL => &WTIME_IS_GLOBAL,
        MPI_UNIVERSE_SIZE => {
            UNIVERSE_SIZE.store(s.rt.size() as c_int, Ordering::Relaxed);
            &UNIVERSE_SIZE
        }
        MPI_APPNUM => &APPNUM,
        MPI_LASTUSEDCODE => &LASTUSEDCODE,
        _ => return None,
    };
    Some(v.as_ptr().cast())
}

fn create_keyval(
    s: &mut State,
    copy: usize,
    delete: usize,
    extra: *mut c_void,
    out: *mut c_int,
) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, out, "keyval")?;
    let k = Some(Keyval {
        copy,
        delete,
        extra,
        freed: false,
    });
    let t = &mut s.ext.keyvals.keys;
    let i = match t.iter().position(Option::is_none) {
        Some(i) => {
            t[i] = k;
            i
        }
        None => {
            t.push(k);
            t.len() - 1
        }
    };
    // SAFETY: checked non-null.
    unsafe { put(out, KEYVAL_BASE + i as c_int) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_keyval(
    copy_fn: usize,
    delete_fn: usize,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    call("MPI_Comm_create_keyval", |s| {
        create_keyval(s, copy_fn, delete_fn, extra_state, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Keyval_create(
    copy_fn: usize,
    delete_fn: usize,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    call("MPI_Keyval_create", |s| {
        create_keyval(s, copy_fn, delete_fn, extra_state, keyval)
    })
}

fn free_keyval(s: &mut State, k: *mut c_int) -> Result<(), Fail> {
    args::out_ptr(MPI_COMM_WORLD, k, "keyval")?;
    // SAFETY: checked non-null.
    let v = unsafe { *k };
    keyval(s, v)?;
    // Attributes already set keep their callbacks until deleted (the
    // standard's reference counting); the key is unusable from now on.
    if let Some(kv) = s.ext.keyvals.keys[(v - KEYVAL_BASE) as usize].as_mut() {
        kv.freed = true;
    }
    reclaim_if_unused(s, v);
    // SAFETY: checked non-null.
    unsafe { put(k, MPI_KEYVAL_INVALID) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
    call("MPI_Comm_free_keyval", |s| free_keyval(s, keyval))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Keyval_free(keyval: *mut c_int) -> c_int {
    call("MPI_Keyval_free", |s| free_keyval(s, keyval))
}

/// Calls the delete callback of `k` for value `v` on communicator `h`.
fn run_delete(s: &State, h: MPI_Comm, k: c_int, v: usize) -> Result<(), Fail> {
    let Some(kv) = keyval_any(s, k) else {
        return Ok(());
    };
    if kv.delete > 1 {
        // SAFETY: a non-sentinel address given as an MPI_Comm_delete_attr_function.
        let f: MPI_Delete_function =
            unsafe { std::mem::transmute::<usize, MPI_Delete_function>(kv.delete) };
        // SAFETY: the user callback follows MPI_Comm_delete_attr_function's contract.
        let rc = unsafe { f(h, k, v as *mut c_void, kv.extra) };
        if rc != MPI_SUCCESS {
            return Err(Fail::new(
                h,
                ErrorClass::Other,
                format!("attribute delete callback returned {rc}"),
            ));
        }
    }
    Ok(())
}

fn set_attr(s: &mut State, comm: MPI_Comm, k: c_int, v: usize) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    if predefined(s, k).is_some() {
        return Err(Fail::new(
            comm,
            ErrorClass::Keyval,
            format!("attribute {k} is predefined and read-only"),
        ));
    }
    keyval(s, k)?;
    if let Some(old) = s.entry(id).ext.attrs.get(k) {
        run_delete(s, comm, k, old)?;
    }
    s.entry(id).ext.attrs.set(k, v);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_attr(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    call("MPI_Comm_set_attr", |s| {
        set_attr(s, comm, keyval, attribute_val as usize)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_put(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    call("MPI_Attr_put", |s| {
        set_attr(s, comm, keyval, attribute_val as usize)
    })
}

fn get_attr(
    s: &mut State,
    comm: MPI_Comm,
    k: c_int,
    out: *mut c_void,
    flag: *mut c_int,
) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    args::out_ptr(comm, out, "attribute_val")?;
    args::out_ptr(comm, flag, "flag")?;
    let v = match predefined(s, k) {
        Some(p) => Some(p as usize),
        None => {
            keyval(s, k)?;
            s.entry(id).ext.attrs.get(k)
        }
    };
    // SAFETY: both checked non-null; `attribute_val` points to a `void *`
    // by the standard.
    unsafe {
        put(flag, c_int::from(v.is_some()));
        if let Some(v) = v {
            *out.cast::<usize>() = v;
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Comm_get_attr", |s| {
        get_attr(s, comm, keyval, attribute_val, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_get(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Attr_get", |s| {
        get_attr(s, comm, keyval, attribute_val, flag)
    })
}

fn delete_attr(s: &mut State, comm: MPI_Comm, k: c_int) -> Result<(), Fail> {
    let id = args::comm(s, comm)?;
    keyval(s, k)?;
    let v = s.entry(id).ext.attrs.get(k).ok_or_else(|| {
        Fail::new(
            comm,
            ErrorClass::Keyval,
            format!("attribute {k} is not set on this communicator"),
        )
    })?;
    run_delete(s, comm, k, v)?;
    s.entry(id).ext.attrs.remove(k);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_delete_attr(comm: MPI_Comm, keyval: c_int) -> c_int {
    call("MPI_Comm_delete_attr", |s| delete_attr(s, comm, keyval))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
    call("MPI_Attr_delete", |s| delete_attr(s, comm, keyval))
}

/// Copies the attributes of `old` (handle `oldh`) to `new` per their copy
/// callbacks (`MPI_Comm_dup`).
pub fn copy_all(s: &mut State, oldh: MPI_Comm, old: CommId, new: CommId) -> Result<(), Fail> {
    let attrs: Vec<(c_int, usize)> = s.entry(old).ext.attrs.iter().collect();
    for (k, v) in attrs {
        let Some(kv) = keyval_any(s, k) else {
            continue;
        };
        let copied = match kv.copy {
            0 => None,
            1 => Some(v),
            f => {
                // SAFETY: a non-sentinel address given as an MPI_Comm_copy_attr_function.
                let f: MPI_Copy_function =
                    unsafe { std::mem::transmute::<usize, MPI_Copy_function>(f) };
                let mut out: usize = 0;
                let mut flag: c_int = 0;
                // SAFETY: the user callback follows MPI_Comm_copy_attr_function's contract.
                let rc = unsafe {
                    f(
                        oldh,
                        k,
                        kv.extra,
                        v as *mut c_void,
                        (&mut out as *mut usize).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    return Err(Fail::new(
                        oldh,
                        ErrorClass::Other,
                        format!("attribute copy callback returned {rc}"),
                    ));
                }
                (flag != 0).then_some(out)
            }
        };
        if let Some(c) = copied {
            s.entry(new).ext.attrs.set(k, c);
        }
    }
    Ok(())
}

/// Runs the delete callbacks of every attribute of a communicator being
/// freed, newest first.
pub fn delete_all(s: &mut State, h: MPI_Comm, id: CommId) -> Result<(), Fail> {
    let attrs = s.entry(id).ext.attrs.take_newest_first();
    for (k, v) in attrs {
        run_delete(s, h, k, v)?;
        reclaim_if_unused(s, k);
    }
    Ok(())
}

//! `MPI_Info` objects: ordered key-value pairs. Handles are
//! `INFO_BASE + index`; `MPI_INFO_ENV` is a read-only info holding the
//! environment the process started in (env_info.rs).
//!
//! The standard lets a program use info objects before `MPI_Init` and
//! after `MPI_Finalize` (to pass hints to the initialisation, or from
//! `MPI_Info_create_env`), so the objects live in a process-wide table
//! rather than in the library state, and the calls work in every phase:
//! while MPI is initialised through the usual error handlers, otherwise
//! returning the error class.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int};
use std::sync::{Mutex, MutexGuard};

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::state::{self, call, call_stateless, Fail, Outcome, State};

/// First handle of info objects.
pub const INFO_BASE: usize = 0x0400_0000;

type Pairs = Vec<(String, String)>;

static TABLE: Mutex<Vec<Option<Pairs>>> = Mutex::new(Vec::new());

fn table() -> MutexGuard<'static, Vec<Option<Pairs>>> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

fn info_error(h: MPI_Info) -> Fail {
    Fail::new(
        MPI_COMM_WORLD,
        ErrorClass::Info,
        format!("invalid info handle {h:#x}"),
    )
}

/// The pairs of an info handle (`s`: the library state while MPI is
/// initialised, which none needs now).
fn pairs_in(s: Option<&State>, h: MPI_Info) -> Result<Pairs, Fail> {
    let _ = s;
    if h == MPI_INFO_ENV {
        return Ok(crate::env_info::process_env());
    }
    table()
        .get(h.wrapping_sub(INFO_BASE))
        .cloned()
        .flatten()
        .ok_or_else(|| info_error(h))
}

/// Runs `f` on the pairs of a (writable) info object.
fn with_pairs_mut<R>(h: MPI_Info, f: impl FnOnce(&mut Pairs) -> R) -> Result<R, Fail> {
    let mut t = table();
    let p = t
        .get_mut(h.wrapping_sub(INFO_BASE))
        .and_then(Option::as_mut)
        .ok_or_else(|| info_error(h))?;
    Ok(f(p))
}

/// The pairs of an info handle (`MPI_INFO_NULL` is not one).
pub fn pairs(s: &State, h: MPI_Info) -> Result<Pairs, Fail> {
    pairs_in(Some(s), h)
}

/// Checks an info argument that may be `MPI_INFO_NULL`.
pub fn check_optional(s: &State, h: MPI_Info) -> Result<(), Fail> {
    if h == MPI_INFO_NULL {
        Ok(())
    } else {
        pairs(s, h).map(|_| ())
    }
}

fn add_pairs(v: Pairs) -> MPI_Info {
    let mut t = table();
    let i = match t.iter().position(Option::is_none) {
        Some(i) => {
            t[i] = Some(v);
            i
        }
        None => {
            t.push(Some(v));
            t.len() - 1
        }
    };
    INFO_BASE + i
}

pub(crate) fn add(_s: &mut State, v: Pairs) -> MPI_Info {
    add_pairs(v)
}

/// [`add`] in any phase (see [`info_call`]).
pub(crate) fn add_any(v: Pairs) -> MPI_Info {
    add_pairs(v)
}

/// Runs an info call in any phase: with the library state and its error
/// handlers while MPI is initialised, else on its own, returning the error
/// class.
pub(crate) fn info_call(func: &'static str, body: impl FnOnce(Option<&State>) -> Outcome) -> c_int {
    if state::is_initialized() && !state::is_finalized() {
        call(func, |s| body(Some(s)))
    } else {
        call_stateless(func, || match body(None) {
            Ok(()) => MPI_SUCCESS,
            Err(f) => f.error.class.code(),
        })
    }
}

/// Reads a C string argument, checking its length.
///
/// # Safety
/// `p` must be null or a valid C string.
unsafe fn text(
    p: *const c_char,
    max: usize,
    class: ErrorClass,
    what: &str,
) -> Result<String, Fail> {
    if p.is_null() {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Arg,
            format!("NULL {what}"),
        ));
    }
    // SAFETY: the caller's promise.
    let s = unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned();
    if s.is_empty() && what == "key" || s.len() >= max {
        return Err(Fail::new(
            MPI_COMM_WORLD,
            class,
            format!("{what} is empty or too long"),
        ));
    }
    Ok(s)
}

/// Copies `v` into a C buffer of `cap` bytes (NUL-terminated, truncated).
///
/// # Safety
/// `out` must be valid for `cap` bytes.
unsafe fn copy_out(v: &str, out: *mut c_char, cap: usize) {
    if cap == 0 {
        return;
    }
    let n = v.len().min(cap - 1);
    // SAFETY: the caller's promise; `n + 1 <= cap`.
    unsafe {
        std::ptr::copy_nonoverlapping(v.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_create(info: *mut MPI_Info) -> c_int {
    info_call("MPI_Info_create", |s| {
        args::out_ptr(MPI_COMM_WORLD, info, "info")?;
        let _ = s;
        let h = add_pairs(Vec::new());
        // SAFETY: checked non-null.
        unsafe { put(info, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_set(
    info: MPI_Info,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    info_call("MPI_Info_set", |s| {
        // SAFETY: C strings by the MPI contract.
        let (k, v) = unsafe {
            (
                text(key, MPI_MAX_INFO_KEY, ErrorClass::InfoKey, "key")?,
                text(value, MPI_MAX_INFO_VAL, ErrorClass::InfoValue, "value")?,
            )
        };
        let _ = s;
        set_pair_in(info, k, v)
    })
}

/// Sets `key` to `value` in an info object, replacing any earlier value.
pub fn set_pair(_s: &mut State, info: MPI_Info, key: String, value: String) -> Result<(), Fail> {
    set_pair_in(info, key, value)
}

fn set_pair_in(info: MPI_Info, key: String, value: String) -> Result<(), Fail> {
    with_pairs_mut(info, |p| match p.iter_mut().find(|(x, _)| *x == key) {
        Some(e) => e.1 = value,
        None => p.push((key, value)),
    })
}

fn lookup(s: Option<&State>, info: MPI_Info, key: *const c_char) -> Result<Option<String>, Fail> {
    // SAFETY: a C string by the MPI contract.
    let k = unsafe { text(key, MPI_MAX_INFO_KEY, ErrorClass::InfoKey, "key")? };
    Ok(pairs_in(s, info)?
        .into_iter()
        .find(|(x, _)| *x == k)
        .map(|(_, v)| v))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get(
    info: MPI_Info,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    info_call("MPI_Info_get", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        let v = lookup(s, info, key)?;
        // SAFETY: checked non-null; `value` holds `valuelen + 1` bytes by the standard.
        unsafe {
            put(flag, c_int::from(v.is_some()));
            if let Some(v) = v {
                args::out_ptr(MPI_COMM_WORLD, value, "value")?;
                copy_out(&v, value, valuelen.max(0) as usize + 1);
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_string(
    info: MPI_Info,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    info_call("MPI_Info_get_string", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        args::out_ptr(MPI_COMM_WORLD, buflen, "buflen")?;
        let v = lookup(s, info, key)?;
        // SAFETY: checked non-null; `value` holds `*buflen` bytes by the standard.
        unsafe {
            put(flag, c_int::from(v.is_some()));
            if let Some(v) = v {
                let cap = (*buflen).max(0) as usize;
                if cap > 0 && !value.is_null() {
                    copy_out(&v, value, cap);
                }
                put(buflen, v.len() as c_int + 1);
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_valuelen(
    info: MPI_Info,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    info_call("MPI_Info_get_valuelen", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        args::out_ptr(MPI_COMM_WORLD, valuelen, "valuelen")?;
        let v = lookup(s, info, key)?;
        // SAFETY: both checked non-null.
        unsafe {
            put(flag, c_int::from(v.is_some()));
            if let Some(v) = v {
                put(valuelen, v.len() as c_int);
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
    info_call("MPI_Info_delete", |s| {
        // SAFETY: a C string by the MPI contract.
        let k = unsafe { text(key, MPI_MAX_INFO_KEY, ErrorClass::InfoKey, "key")? };
        let _ = s;
        let removed = with_pairs_mut(info, |p| {
            let before = p.len();
            p.retain(|(x, _)| *x != k);
            p.len() != before
        })?;
        if !removed {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::InfoNokey,
                format!("no key '{k}'"),
            ));
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_nkeys(info: MPI_Info, nkeys: *mut c_int) -> c_int {
    info_call("MPI_Info_get_nkeys", |s| {
        args::out_ptr(MPI_COMM_WORLD, nkeys, "nkeys")?;
        let n = pairs_in(s, info)?.len();
        // SAFETY: checked non-null.
        unsafe { put(nkeys, n as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_get_nthkey(info: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
    info_call("MPI_Info_get_nthkey", |s| {
        args::out_ptr(MPI_COMM_WORLD, key, "key")?;
        let p = pairs_in(s, info)?;
        let k = usize::try_from(n)
            .ok()
            .and_then(|i| p.get(i))
            .ok_or_else(|| {
                Fail::new(
                    MPI_COMM_WORLD,
                    ErrorClass::Arg,
                    format!("no key number {n}"),
                )
            })?;
        // SAFETY: the standard requires MPI_MAX_INFO_KEY bytes at `key`.
        unsafe { copy_out(&k.0, key, MPI_MAX_INFO_KEY) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
    info_call("MPI_Info_dup", |s| {
        args::out_ptr(MPI_COMM_WORLD, newinfo, "newinfo")?;
        let p = pairs_in(s, info)?;
        let h = add_pairs(p);
        // SAFETY: checked non-null.
        unsafe { put(newinfo, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Info_free(info: *mut MPI_Info) -> c_int {
    info_call("MPI_Info_free", |s| {
        args::out_ptr(MPI_COMM_WORLD, info, "info")?;
        // SAFETY: checked non-null.
        let h = unsafe { *info };
        let _ = s;
        with_pairs_mut(h, |_| ())?;
        table()[h - INFO_BASE] = None;
        // SAFETY: checked non-null.
        unsafe { put(info, MPI_INFO_NULL) };
        Ok(())
    })
}

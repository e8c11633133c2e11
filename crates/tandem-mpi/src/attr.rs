//! Attributes: the predefined communicator attributes (`MPI_TAG_UB`,
//! `MPI_HOST`, `MPI_IO`, `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`,
//! `MPI_APPNUM`, `MPI_LASTUSEDCODE`) and user key values with copy and
//! delete callbacks on communicators, datatypes and windows
//! (`MPI_{Comm,Type,Win}_create_keyval` and the deprecated MPI-1 forms).
//!
//! The callbacks are user code that may make MPI calls (libraries hang
//! their clean-up on `MPI_COMM_SELF`'s attributes at `MPI_Finalize`, and
//! delete callbacks free the communicators and datatypes they cached). So
//! they never run while the library's state is held: a call that runs
//! them enters the library to check its arguments and take the attributes,
//! leaves it to run the callbacks, and enters again to finish (see
//! [`staged`]).
#![allow(clippy::missing_safety_doc)]

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put};
use crate::state::{call, Fail, Outcome, State};

/// First user key value (above the predefined attribute keys).
const KEYVAL_BASE: c_int = 1000;

/// The kind of object an attribute hangs on; a key value serves one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Comm,
    Type,
    Win,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Comm => "communicator",
            Kind::Type => "datatype",
            Kind::Win => "window",
        }
    }
}

#[derive(Clone, Copy)]
struct Keyval {
    kind: Kind,
    /// A function address, or the sentinels 0 (do not copy) / 1 (copy the value).
    copy: usize,
    /// A function address, or 0 (nothing to do).
    delete: usize,
    extra: *mut c_void,
    /// Freed by the application: unusable for new calls, but attributes
    /// still set with it keep its callbacks until they are deleted.
    freed: bool,
}

/// The user key values of the process and the attributes set with them.
#[derive(Default)]
pub struct Attributes {
    keys: Vec<Option<Keyval>>,
    /// Values by object (kind and handle), oldest first: MPI_Finalize
    /// deletes those of `MPI_COMM_SELF` newest first, as the standard
    /// requires, and a key set again counts as set at that moment.
    values: HashMap<(Kind, usize), Vec<(c_int, usize)>>,
}

impl Attributes {
    fn get(&self, kind: Kind, h: usize, key: c_int) -> Option<usize> {
        self.values
            .get(&(kind, h))?
            .iter()
            .find(|&&(k, _)| k == key)
            .map(|&(_, v)| v)
    }

    fn set(&mut self, kind: Kind, h: usize, key: c_int, value: usize) {
        self.remove(kind, h, key);
        self.values.entry((kind, h)).or_default().push((key, value));
    }

    fn remove(&mut self, kind: Kind, h: usize, key: c_int) -> Option<usize> {
        let list = self.values.get_mut(&(kind, h))?;
        let i = list.iter().position(|&(k, _)| k == key)?;
        let (_, v) = list.remove(i);
        if list.is_empty() {
            self.values.remove(&(kind, h));
        }
        Some(v)
    }

    /// The object's attributes, oldest first.
    fn all(&self, kind: Kind, h: usize) -> Vec<(c_int, usize)> {
        self.values.get(&(kind, h)).cloned().unwrap_or_default()
    }

    fn in_use(&self, key: c_int) -> bool {
        self.values.values().flatten().any(|&(k, _)| k == key)
    }
}

/// The key value `k` for objects of `kind`, as the application may use it
/// (not freed).
fn keyval(s: &State, kind: Kind, k: c_int) -> Result<Keyval, Fail> {
    match keyval_any(s, k) {
        Some(kv) if !kv.freed && kv.kind == kind => Ok(kv),
        Some(kv) if !kv.freed => Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Keyval,
            format!(
                "attribute key {k} is a {} key, not a {} key",
                kv.kind.name(),
                kind.name()
            ),
        )),
        _ => Err(Fail::new(
            MPI_COMM_WORLD,
            ErrorClass::Keyval,
            format!("invalid attribute key {k}"),
        )),
    }
}

/// The key value `k` for reaching attributes already set on objects of
/// `kind`: a freed key still names them until the last is deleted (the
/// standard's reference counting; its slot is reclaimed after that
/// attribute's delete callback), so getting, deleting and freeing it again
/// stay valid until then, as in MPICH.
fn keyval_in_use(s: &State, kind: Kind, k: c_int) -> Result<Keyval, Fail> {
    match keyval_any(s, k) {
        Some(kv) if kv.freed && kv.kind == kind => Ok(kv),
        _ => keyval(s, kind, k),
    }
}

/// The key value `k`, freed or not (for the callbacks of attributes set
/// before it was freed).
fn keyval_any(s: &State, k: c_int) -> Option<Keyval> {
    usize::try_from(k - KEYVAL_BASE)
        .ok()
        .and_then(|i| s.ext.attrs.keys.get(i).copied().flatten())
}

/// Gives a freed key value's slot back once no object has an attribute
/// with it.
fn reclaim_if_unused(s: &mut State, k: c_int) {
    if keyval_any(s, k).is_some_and(|kv| kv.freed) && !s.ext.attrs.in_use(k) {
        s.ext.attrs.keys[(k - KEYVAL_BASE) as usize] = None;
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

fn predefined_comm_attr(s: &State, k: c_int) -> Option<*mut c_void> {
    let v: &AtomicI32 = match k {
        MPI_TAG_UB => &TAG_UB,
        MPI_HOST => &HOST,
        MPI_IO => &IO,
        MPI_WTIME_IS_GLOBAL => &WTIME_IS_GLOBAL,
        MPI_UNIVERSE_SIZE => {
            UNIVERSE_SIZE.store(s.rt.size() as c_int, Ordering::Relaxed);
            &UNIVERSE_SIZE
        }
        MPI_APPNUM => {
            APPNUM.store(
                c_int::try_from(s.rt.appnum()).unwrap_or(c_int::MAX),
                Ordering::Relaxed,
            );
            &APPNUM
        }
        MPI_LASTUSEDCODE => &LASTUSEDCODE,
        _ => return None,
    };
    Some(v.as_ptr().cast())
}

/// The communicator whose error handler an error about object `h` of
/// `kind` goes to outside window calls.
fn err_comm(kind: Kind, h: usize) -> MPI_Comm {
    if kind == Kind::Comm {
        h
    } else {
        MPI_COMM_WORLD
    }
}

/// Checks that `h` is a valid object of `kind`.
fn check_object(s: &State, kind: Kind, h: usize) -> Outcome {
    match kind {
        Kind::Comm => args::comm(s, h).map(drop),
        Kind::Type => crate::datatype::layout_any(MPI_COMM_WORLD, h).map(drop),
        Kind::Win => crate::win::check(s, h),
    }
}

/// Enters the library for `func` on an object of `kind`: errors go to the
/// window's handler for windows, to the communicator's otherwise.
fn in_library(
    func: &'static str,
    kind: Kind,
    h: usize,
    body: impl FnOnce(&mut State) -> Outcome,
) -> c_int {
    match kind {
        Kind::Win => crate::win::win_call(func, h, body),
        Kind::Comm | Kind::Type => call(func, body),
    }
}

/// Runs `prepare` inside the library, then `outside` with the library
/// released (the user's attribute callbacks, which may make MPI calls),
/// then `finish` inside the library again with what both returned.
fn staged<P, R>(
    func: &'static str,
    kind: Kind,
    h: usize,
    prepare: impl FnOnce(&mut State) -> Result<P, Fail>,
    outside: impl FnOnce(&P) -> R,
    finish: impl FnOnce(&mut State, P, R) -> Outcome,
) -> c_int {
    let mut prepared = None;
    let rc = in_library(func, kind, h, |s| {
        prepared = Some(prepare(s)?);
        Ok(())
    });
    let Some(p) = prepared.filter(|_| rc == MPI_SUCCESS) else {
        return rc;
    };
    let r = outside(&p);
    in_library(func, kind, h, |s| finish(s, p, r))
}

/// A delete callback to run: the attribute `key` of object `h` had `value`.
#[derive(Clone, Copy)]
struct Deletion {
    h: usize,
    key: c_int,
    value: usize,
    delete: usize,
    extra: *mut c_void,
}

impl Deletion {
    fn of(s: &State, h: usize, key: c_int, value: usize) -> Deletion {
        let kv = keyval_any(s, key);
        Deletion {
            h,
            key,
            value,
            delete: kv.map_or(0, |kv| kv.delete),
            extra: kv.map_or(std::ptr::null_mut(), |kv| kv.extra),
        }
    }

    /// Calls the callback (none for the null delete function); its code.
    fn run(&self) -> c_int {
        if self.delete <= 1 {
            return MPI_SUCCESS;
        }
        // SAFETY: a non-sentinel address the application gave as this key's
        // delete function, whose contract MPI_Delete_function states.
        unsafe {
            let f = std::mem::transmute::<usize, MPI_Delete_function>(self.delete);
            f(self.h, self.key, self.value as *mut c_void, self.extra)
        }
    }
}

/// Runs deletions in order; on a failure, its index and code (the later
/// ones are not run).
fn run_deletions(list: &[Deletion]) -> Result<(), (usize, c_int)> {
    for (i, d) in list.iter().enumerate() {
        let rc = d.run();
        if rc != MPI_SUCCESS {
            return Err((i, rc));
        }
    }
    Ok(())
}

fn callback_failed(kind: Kind, h: usize, which: &str, key: c_int, rc: c_int) -> Fail {
    Fail {
        comm: err_comm(kind, h),
        error: crate::errcodes::from_callback(
            rc,
            format!(
                "the {} attribute {which} callback of key {key} returned {rc}",
                kind.name()
            ),
        ),
    }
}

/// A copy callback to run when object `old` is duplicated.
#[derive(Clone, Copy)]
struct Copying {
    old: usize,
    key: c_int,
    value: usize,
    copy: usize,
    extra: *mut c_void,
}

impl Copying {
    /// The value the duplicate gets (`None`: no attribute), or the
    /// callback's error code.
    fn run(&self) -> Result<Option<usize>, c_int> {
        match self.copy {
            0 => Ok(None),
            1 => Ok(Some(self.value)),
            f => {
                let mut out: usize = 0;
                let mut flag: c_int = 0;
                // SAFETY: a non-sentinel address the application gave as
                // this key's copy function (MPI_Copy_function's contract);
                // `out` and `flag` are valid for writes for the call.
                let rc = unsafe {
                    let f = std::mem::transmute::<usize, MPI_Copy_function>(f);
                    f(
                        self.old,
                        self.key,
                        self.extra,
                        self.value as *mut c_void,
                        (&mut out as *mut usize).cast(),
                        &mut flag,
                    )
                };
                if rc != MPI_SUCCESS {
                    Err(rc)
                } else {
                    Ok((flag != 0).then_some(out))
                }
            }
        }
    }
}

/// Duplicates an object with its attributes: `create` makes the duplicate
/// of `old` inside the library and returns its handle; the copy callbacks
/// then run outside it, and their values are set on the duplicate. If one
/// fails, the values already copied are deleted again and `discard` undoes
/// the duplicate (`MPI_Comm_dup`, `MPI_Type_dup`).
pub fn duplicate(
    func: &'static str,
    kind: Kind,
    old: usize,
    create: impl FnOnce(&mut State) -> Result<usize, Fail>,
    discard: impl FnOnce(&mut State, usize),
) -> c_int {
    staged(
        func,
        kind,
        old,
        |s| {
            let new = create(s)?;
            let copies: Vec<Copying> = s
                .ext
                .attrs
                .all(kind, old)
                .into_iter()
                .filter_map(|(key, value)| {
                    let kv = keyval_any(s, key)?;
                    Some(Copying {
                        old,
                        key,
                        value,
                        copy: kv.copy,
                        extra: kv.extra,
                    })
                })
                .collect();
            let deletes: Vec<(usize, *mut c_void)> = copies
                .iter()
                .map(|c| {
                    keyval_any(s, c.key)
                        .map_or((0, std::ptr::null_mut()), |kv| (kv.delete, kv.extra))
                })
                .collect();
            Ok((new, copies, deletes))
        },
        |(new, copies, deletes)| {
            let mut made = Vec::new();
            for (c, &(delete, extra)) in copies.iter().zip(deletes) {
                match c.run() {
                    Ok(Some(v)) => made.push((c.key, v, delete, extra)),
                    Ok(None) => {}
                    Err(rc) => {
                        // The duplicate goes: its values are deleted again.
                        for &(key, value, delete, extra) in made.iter().rev() {
                            let _ = Deletion {
                                h: *new,
                                key,
                                value,
                                delete,
                                extra,
                            }
                            .run();
                        }
                        return Err((c.key, rc));
                    }
                }
            }
            Ok(made)
        },
        |s, (new, _, _), made| match made {
            Ok(made) => {
                for (key, value, _, _) in made {
                    s.ext.attrs.set(kind, new, key, value);
                }
                Ok(())
            }
            Err((key, rc)) => {
                discard(s, new);
                Err(callback_failed(kind, old, "copy", key, rc))
            }
        },
    )
}

/// Frees an object after deleting its attributes, newest first: `check`
/// validates the call inside the library, the delete callbacks run
/// outside it, and `free` (inside again) does the rest. If a callback
/// fails, the object keeps that attribute and the ones not yet deleted,
/// and is not freed (`MPI_Comm_free`, `MPI_Type_free`, `MPI_Win_free`,
/// and `MPI_Finalize` for `MPI_COMM_SELF`).
pub fn free_object(
    func: &'static str,
    kind: Kind,
    h: usize,
    check: impl FnOnce(&mut State) -> Outcome,
    free: impl FnOnce(&mut State) -> Outcome,
) -> c_int {
    staged(
        func,
        kind,
        h,
        |s| {
            check(s)?;
            let mut all = s.ext.attrs.all(kind, h);
            all.reverse();
            for &(key, _) in &all {
                s.ext.attrs.remove(kind, h, key);
            }
            Ok(all
                .into_iter()
                .map(|(key, value)| Deletion::of(s, h, key, value))
                .collect::<Vec<_>>())
        },
        |list| run_deletions(list),
        |s, list, r| {
            for d in &list {
                reclaim_if_unused(s, d.key);
            }
            match r {
                Ok(()) => free(s),
                Err((i, rc)) => {
                    // Back, oldest first, ahead of anything set meanwhile.
                    let mut kept: Vec<(c_int, usize)> =
                        list[i..].iter().rev().map(|d| (d.key, d.value)).collect();
                    kept.extend(s.ext.attrs.all(kind, h));
                    s.ext.attrs.values.insert((kind, h), kept);
                    Err(callback_failed(kind, h, "delete", list[i].key, rc))
                }
            }
        },
    )
}

fn create_keyval(
    s: &mut State,
    kind: Kind,
    copy: usize,
    delete: usize,
    extra: *mut c_void,
    out: *mut c_int,
) -> Outcome {
    args::out_ptr(MPI_COMM_WORLD, out, "keyval")?;
    let k = Some(Keyval {
        kind,
        copy,
        delete,
        extra,
        freed: false,
    });
    let t = &mut s.ext.attrs.keys;
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

fn free_keyval(s: &mut State, kind: Kind, k: *mut c_int) -> Outcome {
    args::out_ptr(MPI_COMM_WORLD, k, "keyval")?;
    // SAFETY: checked non-null.
    let v = unsafe { *k };
    keyval_in_use(s, kind, v)?;
    // Attributes already set keep their callbacks until deleted (the
    // standard's reference counting); the key is unusable from now on.
    if let Some(kv) = s.ext.attrs.keys[(v - KEYVAL_BASE) as usize].as_mut() {
        kv.freed = true;
    }
    reclaim_if_unused(s, v);
    // SAFETY: checked non-null.
    unsafe { put(k, MPI_KEYVAL_INVALID) };
    Ok(())
}

/// Sets attribute `key` of object `h`; a value it had before is deleted
/// first (its callback runs outside the library).
fn set_attr(func: &'static str, kind: Kind, h: usize, key: c_int, value: usize) -> c_int {
    staged(
        func,
        kind,
        h,
        |s| {
            check_object(s, kind, h)?;
            if kind == Kind::Comm && predefined_comm_attr(s, key).is_some() {
                return Err(Fail::new(
                    h,
                    ErrorClass::Keyval,
                    format!("attribute {key} is predefined and read-only"),
                ));
            }
            keyval(s, kind, key)?;
            Ok(s.ext
                .attrs
                .get(kind, h, key)
                .map(|old| Deletion::of(s, h, key, old)))
        },
        |old| old.map_or(MPI_SUCCESS, |d| d.run()),
        |s, _, rc| {
            if rc != MPI_SUCCESS {
                return Err(callback_failed(kind, h, "delete", key, rc));
            }
            check_object(s, kind, h)?;
            s.ext.attrs.set(kind, h, key, value);
            Ok(())
        },
    )
}

/// Reads attribute `key` of object `h` (`predefined`: the kind's own
/// read-only attributes).
fn get_attr(
    s: &mut State,
    kind: Kind,
    h: usize,
    key: c_int,
    out: *mut c_void,
    flag: *mut c_int,
) -> Outcome {
    check_object(s, kind, h)?;
    args::out_ptr(err_comm(kind, h), out, "attribute_val")?;
    args::out_ptr(err_comm(kind, h), flag, "flag")?;
    let predefined = match kind {
        Kind::Comm => predefined_comm_attr(s, key),
        Kind::Win => crate::win::predefined_attr(s, h, key)?,
        Kind::Type => None,
    };
    let v = match predefined {
        Some(p) => Some(p as usize),
        None => {
            keyval_in_use(s, kind, key)?;
            s.ext.attrs.get(kind, h, key)
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

/// Deletes attribute `key` of object `h` (its callback runs outside the
/// library; if it fails, the attribute stays).
fn delete_attr(func: &'static str, kind: Kind, h: usize, key: c_int) -> c_int {
    staged(
        func,
        kind,
        h,
        |s| {
            check_object(s, kind, h)?;
            keyval_in_use(s, kind, key)?;
            let v = s.ext.attrs.get(kind, h, key).ok_or_else(|| {
                Fail::new(
                    err_comm(kind, h),
                    ErrorClass::Keyval,
                    format!("attribute {key} is not set on this {}", kind.name()),
                )
            })?;
            Ok(Deletion::of(s, h, key, v))
        },
        |d| d.run(),
        |s, d, rc| {
            if rc != MPI_SUCCESS {
                return Err(callback_failed(kind, h, "delete", key, rc));
            }
            if s.ext.attrs.get(kind, h, key) == Some(d.value) {
                s.ext.attrs.remove(kind, h, key);
            }
            reclaim_if_unused(s, key);
            Ok(())
        },
    )
}

// Communicators.

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_keyval(
    copy_fn: usize,
    delete_fn: usize,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    call("MPI_Comm_create_keyval", |s| {
        create_keyval(s, Kind::Comm, copy_fn, delete_fn, extra_state, keyval)
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
        create_keyval(s, Kind::Comm, copy_fn, delete_fn, extra_state, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
    call("MPI_Comm_free_keyval", |s| {
        free_keyval(s, Kind::Comm, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Keyval_free(keyval: *mut c_int) -> c_int {
    call("MPI_Keyval_free", |s| free_keyval(s, Kind::Comm, keyval))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_attr(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    set_attr(
        "MPI_Comm_set_attr",
        Kind::Comm,
        comm,
        keyval,
        attribute_val as usize,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_put(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    set_attr(
        "MPI_Attr_put",
        Kind::Comm,
        comm,
        keyval,
        attribute_val as usize,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_attr(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Comm_get_attr", |s| {
        get_attr(s, Kind::Comm, comm, keyval, attribute_val, flag)
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
        get_attr(s, Kind::Comm, comm, keyval, attribute_val, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_delete_attr(comm: MPI_Comm, keyval: c_int) -> c_int {
    delete_attr("MPI_Comm_delete_attr", Kind::Comm, comm, keyval)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
    delete_attr("MPI_Attr_delete", Kind::Comm, comm, keyval)
}

// Datatypes.

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_keyval(
    copy_fn: usize,
    delete_fn: usize,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    call("MPI_Type_create_keyval", |s| {
        create_keyval(s, Kind::Type, copy_fn, delete_fn, extra_state, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
    call("MPI_Type_free_keyval", |s| {
        free_keyval(s, Kind::Type, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_set_attr(
    datatype: MPI_Datatype,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    set_attr(
        "MPI_Type_set_attr",
        Kind::Type,
        datatype,
        keyval,
        attribute_val as usize,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_attr(
    datatype: MPI_Datatype,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Type_get_attr", |s| {
        get_attr(s, Kind::Type, datatype, keyval, attribute_val, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_delete_attr(datatype: MPI_Datatype, keyval: c_int) -> c_int {
    delete_attr("MPI_Type_delete_attr", Kind::Type, datatype, keyval)
}

// Windows.

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_keyval(
    copy_fn: usize,
    delete_fn: usize,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    call("MPI_Win_create_keyval", |s| {
        create_keyval(s, Kind::Win, copy_fn, delete_fn, extra_state, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_free_keyval(keyval: *mut c_int) -> c_int {
    call("MPI_Win_free_keyval", |s| free_keyval(s, Kind::Win, keyval))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_attr(
    win: MPI_Win,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    set_attr(
        "MPI_Win_set_attr",
        Kind::Win,
        win,
        keyval,
        attribute_val as usize,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_attr(
    win: MPI_Win,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    crate::win::win_call("MPI_Win_get_attr", win, |s| {
        get_attr(s, Kind::Win, win, keyval, attribute_val, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_delete_attr(win: MPI_Win, keyval: c_int) -> c_int {
    delete_attr("MPI_Win_delete_attr", Kind::Win, win, keyval)
}

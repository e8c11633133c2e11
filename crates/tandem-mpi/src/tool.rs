//! The MPI tool information interface (MPI_T).
//!
//! * Control variables are the parameters of the one registry
//!   (`tandem::params`, what `tandem info` prints), with the values this
//!   process runs with (`TANDEM_<NAME>`, as `tandem run --set` passes
//!   them). Every parameter is read once when a process starts, so none can
//!   be changed at run time: their scope is `MPI_T_SCOPE_CONSTANT` and
//!   `MPI_T_cvar_write` answers `MPI_T_ERR_CVAR_SET_NEVER`. Booleans are
//!   `MPI_INT` (0/1), integers and byte counts `MPI_UNSIGNED_LONG_LONG`,
//!   choices `MPI_INT` with an enumeration of the words, text `MPI_CHAR`.
//! * Performance variables are the progress engine's counters
//!   (`tandem::stats`), all `MPI_UNSIGNED_LONG_LONG`: counters and timers
//!   (nanoseconds; timed only with `stats=1`) start stopped in a handle,
//!   count from zero while started, and may be reset and written; the
//!   high-water mark is continuous and read-only. Before `MPI_Init` they
//!   read 0, after `MPI_Finalize` their last values.
//! * Categories are the registry's parameter groups; "stats" also holds
//!   the performance variables. There are no events and no event sources.
//!
//! The interface has its own lock and reference-counted initialisation,
//! so it works before `MPI_Init` and after `MPI_Finalize`, from any thread.
//! Errors are returned as `MPI_T_ERR_*` codes (the MPI_T calls have no
//! error handlers).
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use tandem::params::{Kind, Settings, GROUPS, REGISTRY};
use tandem::stats::Counters;

use crate::abi::*;
use crate::args::put;
use crate::state::{call_stateless, Owner};

/// First handle values (0 is each kind's NULL handle, 1 MPI_T_PVAR_ALL_HANDLES).
const ENUM_BASE: usize = 0x5100;
const CVAR_HANDLE_BASE: usize = 0x5200_0000;
const SESSION_BASE: usize = 0x5300_0000;
const PVAR_HANDLE_BASE: usize = 0x5400_0000;

/// A performance variable's handle in a session.
struct PvarHandle {
    session: usize,
    pvar: usize,
    running: bool,
    /// The counter's value when last started (or reset, written).
    base: u64,
    /// What was counted in earlier started periods (or written).
    value: u64,
}

struct Tool {
    inits: u32,
    settings: Option<Settings>,
    cvar_handles: Vec<Option<usize>>,
    sessions: Vec<bool>,
    pvar_handles: Vec<Option<PvarHandle>>,
    /// The counters as last read from the library (kept for after
    /// MPI_Finalize); `None` before any was.
    last: Option<Counters>,
}

static TOOL: Mutex<Tool> = Mutex::new(Tool {
    inits: 0,
    settings: None,
    cvar_handles: Vec::new(),
    sessions: Vec::new(),
    pvar_handles: Vec::new(),
    last: None,
});

type TResult = Result<(), c_int>;

fn lock() -> MutexGuard<'static, Tool> {
    TOOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs an MPI_T call that needs the interface initialised.
fn tcall(func: &'static str, body: impl FnOnce(&mut Tool) -> TResult) -> c_int {
    call_stateless(func, || {
        let mut t = lock();
        if t.inits == 0 {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        match body(&mut t) {
            Ok(()) => MPI_SUCCESS,
            Err(code) => code,
        }
    })
}

/// Writes `value` through `p` unless it is NULL (MPI_T's get_info calls
/// ignore NULL outputs).
unsafe fn put_opt<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: non-null; writable by the MPI contract.
        unsafe { put(p, value) };
    }
}

/// MPI_T's string convention: `len` in is the buffer's size; the string is
/// copied (truncated, always NUL-terminated) when `out` is not NULL and
/// `len` is positive; `len` out is the length stored (or, without a
/// buffer, needed), terminator included. A NULL `len` returns nothing.
unsafe fn put_string(text: &str, out: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    // SAFETY: non-null; readable and writable by the MPI contract.
    let cap = unsafe { *len };
    let bytes = text.as_bytes();
    let stored = if !out.is_null() && cap > 0 {
        let n = bytes.len().min(cap as usize - 1);
        // SAFETY: `out` has room for `cap` bytes (MPI contract), n < cap.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), n);
            *out.add(n) = 0;
        }
        n
    } else {
        bytes.len()
    };
    // SAFETY: as above.
    unsafe { *len = (stored + 1) as c_int };
}

/// A C string argument (names to look up).
unsafe fn read_str<'a>(name: *const c_char) -> Result<&'a str, c_int> {
    if name.is_null() {
        return Err(MPI_T_ERR_INVALID);
    }
    // SAFETY: non-null and NUL-terminated by the MPI contract.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| MPI_T_ERR_INVALID_NAME)
}

fn nonnull<T>(p: *const T) -> TResult {
    if p.is_null() {
        Err(MPI_T_ERR_INVALID)
    } else {
        Ok(())
    }
}

// ----------------------------------------------------------------- init

#[no_mangle]
pub unsafe extern "C" fn MPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    call_stateless("MPI_T_init_thread", || {
        if provided.is_null() {
            return MPI_T_ERR_INVALID;
        }
        let mut t = lock();
        if t.settings.is_none() {
            // The values the library runs with (MPI_Init reads the same
            // variables; a malformed one makes it fail with its message,
            // here the defaults stand in).
            match Settings::from_env().or_else(|_| Settings::from_vars(Vec::new())) {
                Ok(s) => t.settings = Some(s),
                Err(_) => return MPI_T_ERR_CANNOT_INIT,
            }
        }
        t.inits += 1;
        let levels = [
            MPI_THREAD_SINGLE,
            MPI_THREAD_FUNNELED,
            MPI_THREAD_SERIALIZED,
            MPI_THREAD_MULTIPLE,
        ];
        // Every MPI_T call takes the interface's lock: any level is safe.
        let level = if levels.contains(&required) {
            required
        } else {
            MPI_THREAD_MULTIPLE
        };
        // SAFETY: checked non-null.
        unsafe { put(provided, level) };
        MPI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_finalize() -> c_int {
    tcall("MPI_T_finalize", |t| {
        t.inits -= 1;
        if t.inits == 0 {
            // Handles and sessions do not outlive the last user.
            t.cvar_handles.clear();
            t.sessions.clear();
            t.pvar_handles.clear();
        }
        Ok(())
    })
}

// -------------------------------------------------------- control variables

/// The MPI datatype of a parameter's value and its enumeration, if any.
fn cvar_type(i: usize) -> (MPI_Datatype, MPI_T_enum) {
    match REGISTRY[i].kind {
        Kind::Bool => (MPI_INT, MPI_T_ENUM_NULL),
        Kind::UInt | Kind::Bytes => (MPI_UNSIGNED_LONG_LONG, MPI_T_ENUM_NULL),
        Kind::Choice(_) => (MPI_INT, ENUM_BASE + i),
        Kind::Text => (MPI_CHAR, MPI_T_ENUM_NULL),
    }
}

fn cvar_index(i: c_int) -> Result<usize, c_int> {
    usize::try_from(i)
        .ok()
        .filter(|&i| i < REGISTRY.len())
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

/// The current value of parameter `i` as text.
fn cvar_text(t: &Tool, i: usize) -> String {
    t.settings
        .as_ref()
        .map(|s| s.describe(REGISTRY[i].name).0)
        .unwrap_or_default()
}

/// Elements of parameter `i`'s value (characters and terminator for text).
fn cvar_count(t: &Tool, i: usize) -> c_int {
    match REGISTRY[i].kind {
        Kind::Text => cvar_text(t, i).len() as c_int + 1,
        _ => 1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_get_num(num_cvar: *mut c_int) -> c_int {
    tcall("MPI_T_cvar_get_num", |_| {
        nonnull(num_cvar)?;
        // SAFETY: checked non-null.
        unsafe { put(num_cvar, REGISTRY.len() as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_get_info(
    cvar_index_: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    datatype: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    scope: *mut c_int,
) -> c_int {
    tcall("MPI_T_cvar_get_info", |_| {
        let i = cvar_index(cvar_index_)?;
        let p = &REGISTRY[i];
        let (dt, en) = cvar_type(i);
        // SAFETY: NULL outputs are skipped; the others are writable.
        unsafe {
            put_string(p.name, name, name_len);
            put_opt(verbosity, MPI_T_VERBOSITY_TUNER_BASIC);
            put_opt(datatype, dt);
            put_opt(enumtype, en);
            put_string(p.help, desc, desc_len);
            put_opt(bind, MPI_T_BIND_NO_OBJECT);
            put_opt(scope, MPI_T_SCOPE_CONSTANT);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_get_index(
    name: *const c_char,
    cvar_index_: *mut c_int,
) -> c_int {
    tcall("MPI_T_cvar_get_index", |_| {
        nonnull(cvar_index_)?;
        // SAFETY: forwarded C string.
        let name = unsafe { read_str(name) }?;
        let i = REGISTRY
            .iter()
            .position(|p| p.name == name)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: checked non-null.
        unsafe { put(cvar_index_, i as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_handle_alloc(
    cvar_index_: c_int,
    _obj_handle: *mut c_void,
    handle: *mut MPI_T_cvar_handle,
    count: *mut c_int,
) -> c_int {
    tcall("MPI_T_cvar_handle_alloc", |t| {
        let i = cvar_index(cvar_index_)?;
        nonnull(handle)?;
        nonnull(count)?;
        let slot = free_slot(&mut t.cvar_handles);
        t.cvar_handles[slot] = Some(i);
        let n = cvar_count(t, i);
        // SAFETY: checked non-null.
        unsafe {
            put(handle, CVAR_HANDLE_BASE + slot);
            put(count, n);
        }
        Ok(())
    })
}

/// The first free slot of `v`, a new one if none.
fn free_slot<T>(v: &mut Vec<Option<T>>) -> usize {
    match v.iter().position(Option::is_none) {
        Some(i) => i,
        None => {
            v.push(None);
            v.len() - 1
        }
    }
}

fn cvar_of(t: &Tool, h: MPI_T_cvar_handle) -> Result<usize, c_int> {
    h.checked_sub(CVAR_HANDLE_BASE)
        .and_then(|s| t.cvar_handles.get(s).copied().flatten())
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_handle_free(handle: *mut MPI_T_cvar_handle) -> c_int {
    tcall("MPI_T_cvar_handle_free", |t| {
        nonnull(handle)?;
        // SAFETY: checked non-null.
        let h = unsafe { *handle };
        cvar_of(t, h)?;
        t.cvar_handles[h - CVAR_HANDLE_BASE] = None;
        // SAFETY: checked non-null.
        unsafe { put(handle, MPI_T_CVAR_HANDLE_NULL) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_read(handle: MPI_T_cvar_handle, buf: *mut c_void) -> c_int {
    tcall("MPI_T_cvar_read", |t| {
        let i = cvar_of(t, handle)?;
        nonnull(buf)?;
        let p = &REGISTRY[i];
        let s = t.settings.as_ref().ok_or(MPI_T_ERR_NOT_INITIALIZED)?;
        // SAFETY: `buf` holds the variable's count of its datatype (MPI
        // contract; cvar_handle_alloc said how many).
        unsafe {
            match p.kind {
                Kind::Bool => put(buf.cast::<c_int>(), c_int::from(s.bool(p.name))),
                Kind::UInt | Kind::Bytes => put(buf.cast::<u64>(), s.uint(p.name)),
                Kind::Choice(words) => {
                    let v = s.text(p.name);
                    let k = words.iter().position(|w| *w == v).unwrap_or(0);
                    put(buf.cast::<c_int>(), k as c_int);
                }
                Kind::Text => {
                    let v = s.text(p.name).as_bytes();
                    std::ptr::copy_nonoverlapping(v.as_ptr(), buf.cast::<u8>(), v.len());
                    *buf.cast::<u8>().add(v.len()) = 0;
                }
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_write(handle: MPI_T_cvar_handle, buf: *const c_void) -> c_int {
    tcall("MPI_T_cvar_write", |t| {
        cvar_of(t, handle)?;
        nonnull(buf)?;
        // Parameters are read once when the process starts.
        Err(MPI_T_ERR_CVAR_SET_NEVER)
    })
}

// ----------------------------------------------------------- enumerations

fn enum_words(e: MPI_T_enum) -> Result<(&'static str, &'static [&'static str]), c_int> {
    let p = e
        .checked_sub(ENUM_BASE)
        .and_then(|i| REGISTRY.get(i))
        .ok_or(MPI_T_ERR_INVALID_HANDLE)?;
    match p.kind {
        Kind::Choice(words) => Ok((p.name, words)),
        _ => Err(MPI_T_ERR_INVALID_HANDLE),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_enum_get_info(
    enumtype: MPI_T_enum,
    num: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    tcall("MPI_T_enum_get_info", |_| {
        let (n, words) = enum_words(enumtype)?;
        // SAFETY: NULL outputs are skipped; the others are writable.
        unsafe {
            put_opt(num, words.len() as c_int);
            put_string(n, name, name_len);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_enum_get_item(
    enumtype: MPI_T_enum,
    indx: c_int,
    value: *mut c_int,
    name: *mut c_char,
    name_len: *mut c_int,
) -> c_int {
    tcall("MPI_T_enum_get_item", |_| {
        let (_, words) = enum_words(enumtype)?;
        let w = usize::try_from(indx)
            .ok()
            .and_then(|i| words.get(i))
            .ok_or(MPI_T_ERR_INVALID_INDEX)?;
        // SAFETY: NULL outputs are skipped; the others are writable.
        unsafe {
            put_opt(value, indx);
            put_string(w, name, name_len);
        }
        Ok(())
    })
}

// ---------------------------------------------------- performance variables

/// The counters' names, in their stable order.
fn pvar_names() -> [&'static str; tandem::stats::COUNTERS] {
    Counters::default().fields().map(|(n, _)| n)
}

fn pvar_index(i: c_int) -> Result<usize, c_int> {
    usize::try_from(i)
        .ok()
        .filter(|&i| i < pvar_names().len())
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

fn pvar_class(i: usize) -> c_int {
    let n = pvar_names()[i];
    if n.starts_with("max_") {
        MPI_T_PVAR_CLASS_HIGHWATERMARK
    } else if n.ends_with("_ns") {
        MPI_T_PVAR_CLASS_TIMER
    } else {
        MPI_T_PVAR_CLASS_COUNTER
    }
}

/// A high-water mark is what it is: always on, neither reset nor written.
fn continuous(i: usize) -> bool {
    pvar_class(i) == MPI_T_PVAR_CLASS_HIGHWATERMARK
}

/// The library's counters now; `None` before MPI_Init and after
/// MPI_Finalize, and inside a callback the library runs (its state is in
/// use further up this thread's stack). Never called with the interface's
/// lock held: a thread holding the library may be waiting for that lock
/// (a callback calling MPI_T) while this one would wait for the library.
fn read_counters() -> Option<Counters> {
    if Owner::held_here() {
        return None;
    }
    let mut owner = Owner::acquire("MPI_T_pvar_read");
    owner.slot().as_ref().map(|s| s.rt.counters())
}

/// As [`tcall`], for calls that read the counters: they are read first,
/// and the last reading stands where the library cannot be read.
fn tcall_counting(func: &'static str, body: impl FnOnce(&mut Tool) -> TResult) -> c_int {
    call_stateless(func, || {
        let fresh = read_counters();
        let mut t = lock();
        if t.inits == 0 {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        if fresh.is_some() {
            t.last = fresh;
        }
        match body(&mut t) {
            Ok(()) => MPI_SUCCESS,
            Err(code) => code,
        }
    })
}

/// Counter `i` as last read (by [`tcall_counting`]).
fn counter_now(t: &Tool, i: usize) -> u64 {
    t.last.unwrap_or_default().fields()[i].1
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_get_num(num_pvar: *mut c_int) -> c_int {
    tcall("MPI_T_pvar_get_num", |_| {
        nonnull(num_pvar)?;
        // SAFETY: checked non-null.
        unsafe { put(num_pvar, pvar_names().len() as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_get_info(
    pvar_index_: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    var_class: *mut c_int,
    datatype: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    readonly: *mut c_int,
    continuous_: *mut c_int,
    atomic: *mut c_int,
) -> c_int {
    tcall("MPI_T_pvar_get_info", |_| {
        let i = pvar_index(pvar_index_)?;
        let n = pvar_names()[i];
        let fixed = c_int::from(continuous(i));
        // SAFETY: NULL outputs are skipped; the others are writable.
        unsafe {
            put_string(n, name, name_len);
            put_opt(verbosity, MPI_T_VERBOSITY_USER_BASIC);
            put_opt(var_class, pvar_class(i));
            put_opt(datatype, MPI_UNSIGNED_LONG_LONG);
            put_opt(enumtype, MPI_T_ENUM_NULL);
            put_string(Counters::describe(n).unwrap_or(""), desc, desc_len);
            put_opt(bind, MPI_T_BIND_NO_OBJECT);
            put_opt(readonly, fixed);
            put_opt(continuous_, fixed);
            // Read and reset happen under one lock, at one reading.
            put_opt(atomic, 1);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_get_index(
    name: *const c_char,
    var_class: c_int,
    pvar_index_: *mut c_int,
) -> c_int {
    tcall("MPI_T_pvar_get_index", |_| {
        nonnull(pvar_index_)?;
        // SAFETY: forwarded C string.
        let name = unsafe { read_str(name) }?;
        let i = pvar_names()
            .iter()
            .enumerate()
            .position(|(i, n)| *n == name && pvar_class(i) == var_class)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: checked non-null.
        unsafe { put(pvar_index_, i as c_int) };
        Ok(())
    })
}

fn session_of(t: &Tool, s: MPI_T_pvar_session) -> Result<usize, c_int> {
    s.checked_sub(SESSION_BASE)
        .filter(|&i| t.sessions.get(i) == Some(&true))
        .ok_or(MPI_T_ERR_INVALID_SESSION)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_session_create(session: *mut MPI_T_pvar_session) -> c_int {
    tcall("MPI_T_pvar_session_create", |t| {
        nonnull(session)?;
        let slot = match t.sessions.iter().position(|&live| !live) {
            Some(i) => i,
            None => {
                t.sessions.push(false);
                t.sessions.len() - 1
            }
        };
        t.sessions[slot] = true;
        // SAFETY: checked non-null.
        unsafe { put(session, SESSION_BASE + slot) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_session_free(session: *mut MPI_T_pvar_session) -> c_int {
    tcall("MPI_T_pvar_session_free", |t| {
        nonnull(session)?;
        // SAFETY: checked non-null.
        let s = session_of(t, unsafe { *session })?;
        t.sessions[s] = false;
        for h in t.pvar_handles.iter_mut() {
            if h.as_ref().is_some_and(|h| h.session == s) {
                *h = None;
            }
        }
        // SAFETY: checked non-null.
        unsafe { put(session, MPI_T_PVAR_SESSION_NULL) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_handle_alloc(
    session: MPI_T_pvar_session,
    pvar_index_: c_int,
    _obj_handle: *mut c_void,
    handle: *mut MPI_T_pvar_handle,
    count: *mut c_int,
) -> c_int {
    tcall_counting("MPI_T_pvar_handle_alloc", |t| {
        let s = session_of(t, session)?;
        let i = pvar_index(pvar_index_)?;
        nonnull(handle)?;
        nonnull(count)?;
        let running = continuous(i);
        let base = if running { 0 } else { counter_now(t, i) };
        let slot = free_slot(&mut t.pvar_handles);
        t.pvar_handles[slot] = Some(PvarHandle {
            session: s,
            pvar: i,
            running,
            base,
            value: 0,
        });
        // SAFETY: checked non-null.
        unsafe {
            put(handle, PVAR_HANDLE_BASE + slot);
            put(count, 1);
        }
        Ok(())
    })
}

/// The slot of handle `h` of session `session` (which is checked first).
fn handle_of(t: &Tool, session: MPI_T_pvar_session, h: MPI_T_pvar_handle) -> Result<usize, c_int> {
    let s = session_of(t, session)?;
    h.checked_sub(PVAR_HANDLE_BASE)
        .filter(|&i| {
            t.pvar_handles
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|p| p.session == s)
        })
        .ok_or(MPI_T_ERR_INVALID_HANDLE)
}

/// The slots `h` names: one handle, or with MPI_T_PVAR_ALL_HANDLES all of
/// the session's.
fn handles_of(
    t: &Tool,
    session: MPI_T_pvar_session,
    h: MPI_T_pvar_handle,
) -> Result<Vec<usize>, c_int> {
    if h == MPI_T_PVAR_ALL_HANDLES {
        let s = session_of(t, session)?;
        Ok((0..t.pvar_handles.len())
            .filter(|&i| t.pvar_handles[i].as_ref().is_some_and(|p| p.session == s))
            .collect())
    } else {
        handle_of(t, session, h).map(|i| vec![i])
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_handle_free(
    session: MPI_T_pvar_session,
    handle: *mut MPI_T_pvar_handle,
) -> c_int {
    tcall("MPI_T_pvar_handle_free", |t| {
        nonnull(handle)?;
        // SAFETY: checked non-null.
        let slot = handle_of(t, session, unsafe { *handle })?;
        t.pvar_handles[slot] = None;
        // SAFETY: checked non-null.
        unsafe { put(handle, MPI_T_PVAR_HANDLE_NULL) };
        Ok(())
    })
}

/// The value handle `slot` shows now.
fn handle_value(t: &mut Tool, slot: usize) -> u64 {
    let (pvar, running, base, value) = {
        let h = t.pvar_handles[slot].as_ref().expect("checked handle");
        (h.pvar, h.running, h.base, h.value)
    };
    let now = counter_now(t, pvar);
    if continuous(pvar) {
        now
    } else if running {
        value.wrapping_add(now.wrapping_sub(base))
    } else {
        value
    }
}

/// Starts (`on`) or stops the handles `h` names; with
/// MPI_T_PVAR_ALL_HANDLES continuous variables are left alone.
fn start_stop(
    t: &mut Tool,
    session: MPI_T_pvar_session,
    h: MPI_T_pvar_handle,
    on: bool,
) -> TResult {
    let slots = handles_of(t, session, h)?;
    for slot in slots {
        let pvar = t.pvar_handles[slot].as_ref().expect("checked handle").pvar;
        if continuous(pvar) {
            if h == MPI_T_PVAR_ALL_HANDLES {
                continue;
            }
            return Err(MPI_T_ERR_PVAR_NO_STARTSTOP);
        }
        let now = counter_now(t, pvar);
        let p = t.pvar_handles[slot].as_mut().expect("checked handle");
        if on && !p.running {
            p.base = now;
        } else if !on && p.running {
            p.value = p.value.wrapping_add(now.wrapping_sub(p.base));
        }
        p.running = on;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_start(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    tcall_counting("MPI_T_pvar_start", |t| start_stop(t, session, handle, true))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_stop(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    tcall_counting("MPI_T_pvar_stop", |t| start_stop(t, session, handle, false))
}

/// Sets the handles `h` names to `value` (reset: 0), counting on from now.
fn set_value(
    t: &mut Tool,
    session: MPI_T_pvar_session,
    h: MPI_T_pvar_handle,
    value: u64,
) -> TResult {
    let slots = handles_of(t, session, h)?;
    for slot in slots {
        let pvar = t.pvar_handles[slot].as_ref().expect("checked handle").pvar;
        if continuous(pvar) {
            if h == MPI_T_PVAR_ALL_HANDLES {
                continue;
            }
            return Err(MPI_T_ERR_PVAR_NO_WRITE);
        }
        let now = counter_now(t, pvar);
        let p = t.pvar_handles[slot].as_mut().expect("checked handle");
        p.value = value;
        p.base = now;
    }
    Ok(())
}

/// Reads one handle (MPI_T_PVAR_ALL_HANDLES is not one) into `buf`.
fn read_into(
    t: &mut Tool,
    session: MPI_T_pvar_session,
    h: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> Result<usize, c_int> {
    let slot = handle_of(t, session, h)?;
    nonnull(buf)?;
    let v = handle_value(t, slot);
    // SAFETY: checked non-null; holds one unsigned long long (MPI contract).
    unsafe { put(buf.cast::<u64>(), v) };
    Ok(slot)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_read(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    tcall_counting("MPI_T_pvar_read", |t| {
        read_into(t, session, handle, buf).map(drop)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_readreset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    tcall_counting("MPI_T_pvar_readreset", |t| {
        let slot = handle_of(t, session, handle)?;
        let pvar = t.pvar_handles[slot].as_ref().expect("checked handle").pvar;
        if continuous(pvar) {
            return Err(MPI_T_ERR_PVAR_NO_WRITE);
        }
        read_into(t, session, handle, buf)?;
        // The reading just taken is the new base: nothing counted between.
        let now = counter_now(t, pvar);
        let p = t.pvar_handles[slot].as_mut().expect("checked handle");
        p.value = 0;
        p.base = now;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_reset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    tcall_counting("MPI_T_pvar_reset", |t| set_value(t, session, handle, 0))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_pvar_write(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *const c_void,
) -> c_int {
    tcall_counting("MPI_T_pvar_write", |t| {
        if handle == MPI_T_PVAR_ALL_HANDLES {
            return Err(MPI_T_ERR_INVALID_HANDLE);
        }
        handle_of(t, session, handle)?;
        nonnull(buf)?;
        // SAFETY: checked non-null; holds one unsigned long long.
        let v = unsafe { buf.cast::<u64>().read_unaligned() };
        set_value(t, session, handle, v)
    })
}

// ------------------------------------------------------------- categories

/// Category `c`: its name, description, control and performance variables.
fn category(c: usize) -> (&'static str, &'static str, Vec<usize>, Vec<usize>) {
    let (name, desc) = GROUPS[c];
    let cvars = (0..REGISTRY.len())
        .filter(|&i| REGISTRY[i].group() == name)
        .collect();
    let pvars = if name == "stats" {
        (0..pvar_names().len()).collect()
    } else {
        Vec::new()
    };
    (name, desc, cvars, pvars)
}

fn category_index(c: c_int) -> Result<usize, c_int> {
    usize::try_from(c)
        .ok()
        .filter(|&c| c < GROUPS.len())
        .ok_or(MPI_T_ERR_INVALID_INDEX)
}

/// Writes up to `len` of `items` to `out`.
unsafe fn put_indices(items: &[usize], len: c_int, out: *mut c_int) -> TResult {
    let n = items.len().min(len.max(0) as usize);
    if n > 0 {
        nonnull(out)?;
    }
    for (k, &i) in items.iter().take(n).enumerate() {
        // SAFETY: `out` has room for `len` ints (MPI contract), k < len.
        unsafe { *out.add(k) = i as c_int };
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_num(num_cat: *mut c_int) -> c_int {
    tcall("MPI_T_category_get_num", |_| {
        nonnull(num_cat)?;
        // SAFETY: checked non-null.
        unsafe { put(num_cat, GROUPS.len() as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_info(
    cat_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    desc: *mut c_char,
    desc_len: *mut c_int,
    num_cvars: *mut c_int,
    num_pvars: *mut c_int,
    num_categories: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_info", |_| {
        let (n, d, cvars, pvars) = category(category_index(cat_index)?);
        // SAFETY: NULL outputs are skipped; the others are writable.
        unsafe {
            put_string(n, name, name_len);
            put_string(d, desc, desc_len);
            put_opt(num_cvars, cvars.len() as c_int);
            put_opt(num_pvars, pvars.len() as c_int);
            put_opt(num_categories, 0);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_index(
    name: *const c_char,
    cat_index: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_index", |_| {
        nonnull(cat_index)?;
        // SAFETY: forwarded C string.
        let name = unsafe { read_str(name) }?;
        let c = GROUPS
            .iter()
            .position(|(g, _)| *g == name)
            .ok_or(MPI_T_ERR_INVALID_NAME)?;
        // SAFETY: checked non-null.
        unsafe { put(cat_index, c as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_cvars(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_cvars", |_| {
        let (_, _, cvars, _) = category(category_index(cat_index)?);
        // SAFETY: forwarded.
        unsafe { put_indices(&cvars, len, indices) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_pvars(
    cat_index: c_int,
    len: c_int,
    indices: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_pvars", |_| {
        let (_, _, _, pvars) = category(category_index(cat_index)?);
        // SAFETY: forwarded.
        unsafe { put_indices(&pvars, len, indices) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_categories(
    cat_index: c_int,
    _len: c_int,
    _indices: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_categories", |_| {
        // Categories hold no categories.
        category_index(cat_index).map(drop)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_num_events(
    cat_index: c_int,
    num_events: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_num_events", |_| {
        category_index(cat_index)?;
        nonnull(num_events)?;
        // SAFETY: checked non-null.
        unsafe { put(num_events, 0) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_get_events(
    cat_index: c_int,
    _len: c_int,
    _indices: *mut c_int,
) -> c_int {
    tcall("MPI_T_category_get_events", |_| {
        category_index(cat_index).map(drop)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_category_changed(update_number: *mut c_int) -> c_int {
    tcall("MPI_T_category_changed", |_| {
        nonnull(update_number)?;
        // The variables and categories never change.
        // SAFETY: checked non-null.
        unsafe { put(update_number, 0) };
        Ok(())
    })
}

// ------------------------------------------------- events and their sources

#[no_mangle]
pub unsafe extern "C" fn MPI_T_source_get_num(num_sources: *mut c_int) -> c_int {
    tcall("MPI_T_source_get_num", |_| {
        nonnull(num_sources)?;
        // SAFETY: checked non-null.
        unsafe { put(num_sources, 0) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_source_get_info(
    _source_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _ordering: *mut MPI_T_source_order,
    _ticks_per_second: *mut MPI_Count,
    _max_ticks: *mut MPI_Count,
    _info: *mut MPI_Info,
) -> c_int {
    tcall("MPI_T_source_get_info", |_| Err(MPI_T_ERR_INVALID_INDEX))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_source_get_timestamp(
    _source_index: c_int,
    _timestamp: *mut MPI_Count,
) -> c_int {
    tcall("MPI_T_source_get_timestamp", |_| {
        Err(MPI_T_ERR_INVALID_INDEX)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_get_num(num_events: *mut c_int) -> c_int {
    tcall("MPI_T_event_get_num", |_| {
        nonnull(num_events)?;
        // SAFETY: checked non-null.
        unsafe { put(num_events, 0) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_get_info(
    _event_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _verbosity: *mut c_int,
    _array_of_datatypes: *mut MPI_Datatype,
    _array_of_displacements: *mut MPI_Aint,
    _num_elements: *mut c_int,
    _enumtype: *mut MPI_T_enum,
    _info: *mut MPI_Info,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _bind: *mut c_int,
) -> c_int {
    tcall("MPI_T_event_get_info", |_| Err(MPI_T_ERR_INVALID_INDEX))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_get_index(
    name: *const c_char,
    event_index: *mut c_int,
) -> c_int {
    tcall("MPI_T_event_get_index", |_| {
        nonnull(event_index)?;
        // SAFETY: forwarded C string.
        unsafe { read_str(name) }?;
        Err(MPI_T_ERR_INVALID_NAME)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_handle_alloc(
    _event_index: c_int,
    _obj_handle: *mut c_void,
    _info: MPI_Info,
    _event_registration: *mut MPI_T_event_registration,
) -> c_int {
    tcall("MPI_T_event_handle_alloc", |_| Err(MPI_T_ERR_INVALID_INDEX))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_handle_free(
    _event_registration: MPI_T_event_registration,
    _user_data: *mut c_void,
    _free_cb_function: Option<MPI_T_event_free_cb_function>,
) -> c_int {
    tcall("MPI_T_event_handle_free", |_| Err(MPI_T_ERR_INVALID_HANDLE))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_handle_get_info(
    _event_registration: MPI_T_event_registration,
    _info_used: *mut MPI_Info,
) -> c_int {
    tcall("MPI_T_event_handle_get_info", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_handle_set_info(
    _event_registration: MPI_T_event_registration,
    _info: MPI_Info,
) -> c_int {
    tcall("MPI_T_event_handle_set_info", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_register_callback(
    _event_registration: MPI_T_event_registration,
    _cb_safety: MPI_T_cb_safety,
    _info: MPI_Info,
    _user_data: *mut c_void,
    _event_cb_function: Option<MPI_T_event_cb_function>,
) -> c_int {
    tcall("MPI_T_event_register_callback", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_callback_get_info(
    _event_registration: MPI_T_event_registration,
    _cb_safety: MPI_T_cb_safety,
    _info_used: *mut MPI_Info,
) -> c_int {
    tcall("MPI_T_event_callback_get_info", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_callback_set_info(
    _event_registration: MPI_T_event_registration,
    _cb_safety: MPI_T_cb_safety,
    _info: MPI_Info,
) -> c_int {
    tcall("MPI_T_event_callback_set_info", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_set_dropped_handler(
    _event_registration: MPI_T_event_registration,
    _dropped_cb_function: Option<MPI_T_event_dropped_cb_function>,
) -> c_int {
    tcall("MPI_T_event_set_dropped_handler", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_copy(
    _event_instance: MPI_T_event_instance,
    _buffer: *mut c_void,
) -> c_int {
    tcall("MPI_T_event_copy", |_| Err(MPI_T_ERR_INVALID_HANDLE))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_read(
    _event_instance: MPI_T_event_instance,
    _element_index: c_int,
    _buffer: *mut c_void,
) -> c_int {
    tcall("MPI_T_event_read", |_| Err(MPI_T_ERR_INVALID_HANDLE))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_get_timestamp(
    _event_instance: MPI_T_event_instance,
    _event_timestamp: *mut MPI_Count,
) -> c_int {
    tcall("MPI_T_event_get_timestamp", |_| {
        Err(MPI_T_ERR_INVALID_HANDLE)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_T_event_get_source(
    _event_instance: MPI_T_event_instance,
    _source_index: *mut c_int,
) -> c_int {
    tcall("MPI_T_event_get_source", |_| Err(MPI_T_ERR_INVALID_HANDLE))
}

//! MPI one-sided communication (windows): argument checks, the window
//! handle table and the calls, on the core's window engine
//! ([`tandem::rma`]). Waits that may let other threads in
//! (`MPI_THREAD_MULTIPLE`, see `state::block_on`) are driven from here, a
//! step of the engine at a time.

use std::os::raw::{c_char, c_int, c_void};

use tandem::datatype::{Layout, Prim};
use tandem::ops::PredefOp;
use tandem::p2p::{P2p, Status};
use tandem::rma::{self, Completion, Flavor, Origin, Passive, TargetType, TypedBuf, Window};
use tandem::{CommId, Error, ErrorClass, Runtime};

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype;
use crate::state::{self, call, call_with, Fail, Outcome, State};
use crate::{errhandler, group, info, ops, request};

/// First handle value of windows.
const WIN_BASE: usize = 0x30000;

pub struct Win {
    engine: Window,
    /// The creating communicator, whose rank numbering the window uses.
    user_comm: MPI_Comm,
    flavor: c_int,
    errhandler: MPI_Errhandler,
    name: String,
    /// Storage the predefined attributes point into.
    attr_size: Box<MPI_Aint>,
    attr_disp_unit: Box<c_int>,
    attr_flavor: Box<c_int>,
    attr_model: Box<c_int>,
}

fn win_fail(class: ErrorClass, msg: impl Into<String>) -> Fail {
    Fail::new(MPI_COMM_WORLD, class, msg)
}

fn index(win: MPI_Win) -> Option<usize> {
    win.checked_sub(WIN_BASE)
}

fn get(s: &State, win: MPI_Win) -> Result<&Win, Fail> {
    index(win)
        .and_then(|i| s.wins.get(i))
        .and_then(Option::as_ref)
        .ok_or_else(|| win_fail(ErrorClass::Win, format!("invalid window handle {win:#x}")))
}

fn get_mut(s: &mut State, win: MPI_Win) -> Result<&mut Win, Fail> {
    index(win)
        .and_then(|i| s.wins.get_mut(i))
        .and_then(Option::as_mut)
        .ok_or_else(|| win_fail(ErrorClass::Win, format!("invalid window handle {win:#x}")))
}

/// Runs a window call: errors go to the window's error handler.
pub(crate) fn win_call(
    func: &'static str,
    win: MPI_Win,
    body: impl FnOnce(&mut State) -> Outcome,
) -> c_int {
    call_with(func, body, |s, func, f| {
        match get(s, win).map(|w| w.errhandler) {
            Ok(handler) => errhandler::raise_to(s, func, handler, win, f),
            // An invalid window has no handler: its errors go to
            // MPI_COMM_SELF's, as those on an invalid communicator do.
            Err(_) => {
                let handler = s.entry(tandem::SELF).errhandler;
                errhandler::raise_to(s, func, handler, MPI_COMM_SELF, f)
            }
        }
    })
}

fn engine_fail(e: Error) -> Fail {
    win_fail(e.class, e.message)
}

/// The runtime and window `win`, apart.
fn split(s: &mut State, win: MPI_Win) -> Result<(&mut Runtime, &mut Win), Fail> {
    let w = index(win)
        .and_then(|i| s.wins.get_mut(i))
        .and_then(Option::as_mut)
        .ok_or_else(|| win_fail(ErrorClass::Win, format!("invalid window handle {win:#x}")))?;
    Ok((&mut s.rt, w))
}

/// The engine's flavor of an MPI window flavor.
fn flavor_of(flavor: c_int) -> Flavor {
    match flavor {
        MPI_WIN_FLAVOR_ALLOCATE => Flavor::Allocate,
        MPI_WIN_FLAVOR_DYNAMIC => Flavor::Dynamic,
        MPI_WIN_FLAVOR_SHARED => Flavor::Shared,
        _ => Flavor::Create,
    }
}

/// Creates a window over `[base, base + size)` (or a dynamic one).
fn create(
    s: &mut State,
    base: *mut u8,
    size: usize,
    disp_unit: usize,
    comm: MPI_Comm,
    flavor: c_int,
) -> Result<MPI_Win, Fail> {
    let cid = args::intra_comm(s, comm)?;
    let engine = Window::create(&mut s.rt, cid, base, size, disp_unit, flavor_of(flavor))
        .map_err(engine_fail)?;
    Ok(insert(s, engine, comm, flavor, size, disp_unit))
}

/// Gives window `engine`, created on `comm`, a handle.
fn insert(
    s: &mut State,
    engine: Window,
    comm: MPI_Comm,
    flavor: c_int,
    size: usize,
    disp_unit: usize,
) -> MPI_Win {
    let w = Win {
        engine,
        user_comm: comm,
        flavor,
        errhandler: MPI_ERRORS_ARE_FATAL,
        name: String::new(),
        attr_size: Box::new(size as MPI_Aint),
        attr_disp_unit: Box::new(disp_unit as c_int),
        attr_flavor: Box::new(flavor),
        attr_model: Box::new(MPI_WIN_UNIFIED),
    };
    let slot = match s.wins.iter().position(Option::is_none) {
        Some(i) => i,
        None => {
            s.wins.push(None);
            s.wins.len() - 1
        }
    };
    s.wins[slot] = Some(w);
    WIN_BASE + slot
}

fn check_size_disp(size: MPI_Aint, disp_unit: MPI_Aint) -> Result<(), Fail> {
    if size < 0 {
        return Err(win_fail(
            ErrorClass::Size,
            format!("negative window size {size}"),
        ));
    }
    if disp_unit <= 0 {
        return Err(win_fail(
            ErrorClass::Disp,
            format!("displacement unit {disp_unit} is not positive"),
        ));
    }
    Ok(())
}

unsafe fn win_create(
    func: &'static str,
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, win, "win")?;
        check_size_disp(size, disp_unit)?;
        if size > 0 && base.is_null() {
            return Err(win_fail(
                ErrorClass::Base,
                "NULL base for a non-empty window",
            ));
        }
        let h = create(
            s,
            base.cast(),
            size as usize,
            disp_unit as usize,
            comm,
            MPI_WIN_FLAVOR_CREATE,
        )?;
        // SAFETY: checked non-null.
        unsafe { put(win, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    _info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        win_create(
            "MPI_Win_create",
            base,
            size,
            disp_unit as MPI_Aint,
            comm,
            win,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    _info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { win_create("MPI_Win_create_c", base, size, disp_unit, comm, win) }
}

unsafe fn win_allocate(
    func: &'static str,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, win, "win")?;
        args::out_ptr(comm, baseptr, "baseptr")?;
        check_size_disp(size, disp_unit)?;
        let cid = args::intra_comm(s, comm)?;
        let (engine, mem) = Window::allocate(
            &mut s.rt,
            cid,
            crate::host::identity(),
            size as usize,
            disp_unit as usize,
        )
        .map_err(engine_fail)?;
        let h = insert(
            s,
            engine,
            comm,
            MPI_WIN_FLAVOR_ALLOCATE,
            size as usize,
            disp_unit as usize,
        );
        // SAFETY: checked non-null; baseptr points to a `void *` (MPI).
        unsafe {
            put(baseptr.cast::<*mut c_void>(), mem.cast());
            put(win, h);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    _info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        win_allocate(
            "MPI_Win_allocate",
            size,
            disp_unit as MPI_Aint,
            comm,
            baseptr,
            win,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    _info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { win_allocate("MPI_Win_allocate_c", size, disp_unit, comm, baseptr, win) }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_dynamic(
    _info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    call("MPI_Win_create_dynamic", |s| {
        args::out_ptr(comm, win, "win")?;
        let h = create(s, std::ptr::null_mut(), 0, 1, comm, MPI_WIN_FLAVOR_DYNAMIC)?;
        // SAFETY: checked non-null.
        unsafe { put(win, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_attach(win: MPI_Win, base: *mut c_void, size: MPI_Aint) -> c_int {
    win_call("MPI_Win_attach", win, |s| {
        let w = get(s, win)?;
        if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
            return Err(win_fail(
                ErrorClass::RmaFlavor,
                "MPI_Win_attach needs a window from MPI_Win_create_dynamic",
            ));
        }
        if size < 0 || (size > 0 && base.is_null()) {
            return Err(win_fail(ErrorClass::RmaAttach, "invalid memory to attach"));
        }
        let (rt, w) = split(s, win)?;
        w.engine.attach(rt, base.cast(), size as usize);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_detach(win: MPI_Win, base: *const c_void) -> c_int {
    win_call("MPI_Win_detach", win, |s| {
        let w = get(s, win)?;
        if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
            return Err(win_fail(
                ErrorClass::RmaFlavor,
                "MPI_Win_detach needs a window from MPI_Win_create_dynamic",
            ));
        }
        let (rt, w) = split(s, win)?;
        if !w.engine.detach(rt, base.cast()) {
            return Err(win_fail(
                ErrorClass::RmaAttach,
                "memory not attached to this window",
            ));
        }
        Ok(())
    })
}

/// Waits until this window's operations (to `target`, or all) are complete
/// at their targets, then finishes reads into packed buffers.
fn complete_ops(s: &mut State, win: MPI_Win, target: Option<u32>) -> Result<(), Fail> {
    let (rt, w) = split(s, win)?;
    w.engine.complete_ops(rt, target).map_err(engine_fail)
}

/// Starts the wait of [`complete_ops`] in steps (see [`Completion`]).
fn completion_start(s: &mut State, win: MPI_Win, target: Option<u32>) -> Result<Completion, Fail> {
    let (rt, w) = split(s, win)?;
    Completion::start(rt, &w.engine, target).map_err(engine_fail)
}

/// Ends a [`Completion`] whose wait is over.
fn completion_finish(s: &mut State, win: MPI_Win, c: Completion) -> Result<(), Fail> {
    let first = c.take_outcomes(&mut s.rt);
    c.settle(&mut get_mut(s, win)?.engine);
    first.map_or(Ok(()), |e| Err(engine_fail(e)))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_free(win: *mut MPI_Win) -> c_int {
    let h = if win.is_null() {
        MPI_WIN_NULL
    } else {
        // SAFETY: checked non-null.
        unsafe { *win }
    };
    let freeable = |s: &State| -> Outcome {
        args::out_ptr(MPI_COMM_WORLD, win, "win")?;
        let epochs = &get(s, h)?.engine.epochs;
        if epochs.any_lock() || epochs.start_group().is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_free inside an access epoch (unlock or complete first)",
            ));
        }
        Ok(())
    };
    // Delete callbacks run first, outside the library (see attr.rs).
    crate::attr::free_object(
        "MPI_Win_free",
        crate::attr::Kind::Win,
        h,
        |s| freeable(s),
        |s| {
            freeable(s)?;
            let comm = get(s, h)?.engine.comm();
            // Nobody may still be reaching into this memory when it goes:
            // its operations are complete and every member is past the
            // barrier.
            ops_then(s, h, None, Some(comm), move |s| release(s, h, win))
        },
    )
}

/// The end of `MPI_Win_free` of `h`, once no member reaches into it.
fn release(s: &mut State, h: MPI_Win, win: *mut MPI_Win) -> Outcome {
    let w = index(h)
        .and_then(|i| s.wins.get_mut(i))
        .and_then(Option::take)
        .ok_or_else(|| win_fail(ErrorClass::Win, "window freed meanwhile"))?;
    w.engine.free(&mut s.rt);
    // SAFETY: `win` was checked non-null (`freeable`).
    unsafe { put(win, MPI_WIN_NULL) };
    Ok(())
}

/// A target rank of a window: `None` for MPI_PROC_NULL.
#[inline(always)]
fn target_rank(w: &Win, rank: c_int) -> Result<Option<u32>, Fail> {
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    if rank < 0 || rank as usize >= w.engine.members() {
        return Err(win_fail(
            ErrorClass::Rank,
            format!("target rank {rank} is not in 0..{}", w.engine.members()),
        ));
    }
    Ok(Some(rank as u32))
}

/// The predefined element type of an accumulate's data.
fn acc_prim(origin: &Layout, target: &Layout) -> Result<Prim, Fail> {
    let t = target.single_prim();
    let o = origin.single_prim();
    match (o, t) {
        (Some(a), Some(b)) if a == b => Ok(a),
        (None, Some(b)) if origin.size == 0 => Ok(b),
        _ => Err(win_fail(
            ErrorClass::Type,
            "accumulate needs origin and target datatypes of one and the same predefined type",
        )),
    }
}

/// A one-sided call's target side, validated.
struct Access {
    core: rma::Access,
    /// The window's communicator (for argument errors).
    comm: MPI_Comm,
    /// The target datatype.
    dt: MPI_Datatype,
}

/// Validates a one-sided call's target side; `None` for MPI_PROC_NULL.
#[inline(always)]
fn access(
    s: &State,
    win: MPI_Win,
    rank: c_int,
    disp: MPI_Aint,
    count: c_int,
    dt: MPI_Datatype,
) -> Result<Option<Access>, Fail> {
    let w = get(s, win)?;
    let Some(t) = target_rank(w, rank)? else {
        return Ok(None);
    };
    w.engine.epochs.check_access(t).map_err(engine_fail)?;
    if count < 0 {
        return Err(win_fail(
            ErrorClass::Count,
            format!("negative target count {count}"),
        ));
    }
    // Predefined types need no look at their layout.
    let tt = match datatype::packed_predefined(dt) {
        Some(elem) => TargetType::Packed(elem),
        None => TargetType::Layout(datatype::layout(w.user_comm, dt)?),
    };
    let core = w
        .engine
        .access(t, disp, count as usize, &tt)
        .map_err(engine_fail)?;
    Ok(Some(Access {
        core,
        comm: w.user_comm,
        dt,
    }))
}

/// An origin-side buffer of a one-sided call, which must hold as many bytes
/// as the target data.
#[inline(always)]
fn origin_buf(
    a: &Access,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
) -> Result<Origin, Fail> {
    if let Some(elem) = datatype::packed_predefined(dt) {
        let len = datatype::packed_len(a.comm, buf, MPI_Count::from(count), elem)?;
        if len != a.core.bytes {
            return Err(mismatch(len, a.core.bytes));
        }
        return Ok(Origin::Flat(buf as *mut u8));
    }
    let o = datatype::typed(a.comm, buf, count, dt)?;
    if o.bytes() != a.core.bytes {
        return Err(mismatch(o.bytes(), a.core.bytes));
    }
    Ok(match o.direct() {
        Some(p) => Origin::Flat(p),
        None => Origin::Typed(TypedBuf {
            ptr: o.ptr,
            count: o.count,
            layout: o.layout,
        }),
    })
}

fn mismatch(o: usize, t: usize) -> Fail {
    win_fail(
        ErrorClass::Type,
        format!("origin carries {o} bytes, the target datatype {t}"),
    )
}

/// `MPI_Put`'s work, for it and `MPI_Rput`.
#[allow(clippy::too_many_arguments)]
fn put_op(
    s: &mut State,
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> Outcome {
    let Some(a) = access(
        s,
        win,
        target_rank,
        target_disp,
        target_count,
        target_datatype,
    )?
    else {
        return Ok(());
    };
    let o = origin_buf(&a, origin_addr, origin_count, origin_datatype)?;
    let (rt, w) = split(s, win)?;
    // SAFETY: the origin buffer was checked against the access; the MPI
    // contract keeps it readable until the operation completes.
    unsafe { w.engine.put(rt, &a.core, &o) }.map_err(engine_fail)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Put(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Put", win, |s| {
        put_op(
            s,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
        )
    })
}

/// `MPI_Get`'s work, for it and `MPI_Rget`.
#[allow(clippy::too_many_arguments)]
fn get_op(
    s: &mut State,
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> Outcome {
    let Some(a) = access(
        s,
        win,
        target_rank,
        target_disp,
        target_count,
        target_datatype,
    )?
    else {
        return Ok(());
    };
    let o = origin_buf(&a, origin_addr, origin_count, origin_datatype)?;
    let (rt, w) = split(s, win)?;
    // SAFETY: the origin buffer was checked against the access; the MPI
    // contract keeps it writable until the operation completes.
    unsafe { w.engine.get(rt, &a.core, &o) }.map_err(engine_fail)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Get", win, |s| {
        get_op(
            s,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
        )
    })
}

/// Accumulate and its fetching forms: combines the origin data into the
/// target with `op`; with `result`, the previous contents land there.
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate(
    s: &mut State,
    win: MPI_Win,
    origin: Option<(*const c_void, c_int, MPI_Datatype)>,
    result: Option<(*mut c_void, c_int, MPI_Datatype)>,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
) -> Outcome {
    let Some(a) = access(
        s,
        win,
        target_rank,
        target_disp,
        target_count,
        target_datatype,
    )?
    else {
        return Ok(());
    };
    let pop = ops::predefined(op).ok_or_else(|| {
        win_fail(
            ErrorClass::Op,
            "one-sided accumulate takes predefined operations only",
        )
    })?;
    let o = match origin {
        Some((p, c, dt)) if pop != PredefOp::NoOp => Some((origin_buf(&a, p, c, dt)?, dt)),
        _ => None,
    };
    if o.is_none() && pop != PredefOp::NoOp {
        return Err(win_fail(
            ErrorClass::Op,
            "MPI_Accumulate cannot take MPI_NO_OP",
        ));
    }
    // Nothing to move: done, whatever the datatypes (MPI allows a zero-size
    // origin against any target type).
    if a.core.bytes == 0 {
        return Ok(());
    }
    let odt = o.as_ref().map(|&(_, dt)| dt);
    // One predefined type on both sides is its element type, found
    // without a look at layouts (fetch-and-op, most accumulates).
    let prim = match datatype::predefined_prim(a.dt).filter(|_| odt.is_none_or(|d| d == a.dt)) {
        Some(p) => p,
        None => {
            let tl = datatype::layout(a.comm, a.dt)?;
            match odt {
                Some(d) if d != a.dt => acc_prim(&*datatype::layout(a.comm, d)?, &tl)?,
                _ => acc_prim(&tl, &tl)?,
            }
        }
    };
    let o = o.map(|(o, _)| o);
    if !rma::accumulate_supported(pop, prim) {
        return Err(win_fail(
            ErrorClass::Op,
            format!("{} does not apply to this datatype", pop.name()),
        ));
    }
    // Replacing and reading move bytes. A pair type with padding (short and
    // int) is split into runs that are not whole pairs, which the target
    // could not apply as pairs; as bytes they are fine, and one frame (the
    // runs of up to 4 MiB travel together) is applied at once, so elements
    // stay atomic.
    let prim = match (pop, prim) {
        (PredefOp::Replace | PredefOp::NoOp, Prim::Pair(_)) => Prim::Byte,
        _ => prim,
    };
    let result = match result {
        Some((p, c, dt)) => Some(origin_buf(&a, p, c, dt)?),
        None => None,
    };
    let (rt, w) = split(s, win)?;
    // SAFETY: both buffers were checked against the access; the MPI
    // contract keeps them valid until the operation completes.
    unsafe {
        w.engine
            .accumulate(rt, &a.core, pop, prim, o.as_ref(), result.as_ref())
    }
    .map_err(engine_fail)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Accumulate", win, |s| {
        // SAFETY: forwarded from the caller (MPI contract on the buffers).
        unsafe {
            accumulate(
                s,
                win,
                Some((origin_addr, origin_count, origin_datatype)),
                None,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Get_accumulate", win, |s| {
        // SAFETY: forwarded from the caller (MPI contract on the buffers).
        unsafe {
            accumulate(
                s,
                win,
                Some((origin_addr, origin_count, origin_datatype)),
                Some((result_addr, result_count, result_datatype)),
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                op,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Fetch_and_op(
    origin_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Fetch_and_op", win, |s| {
        if !datatype::is_predefined(datatype) {
            return Err(win_fail(
                ErrorClass::Type,
                "MPI_Fetch_and_op takes a predefined datatype",
            ));
        }
        // SAFETY: forwarded from the caller (MPI contract on the buffers).
        unsafe {
            accumulate(
                s,
                win,
                Some((origin_addr, 1, datatype)),
                Some((result_addr, 1, datatype)),
                target_rank,
                target_disp,
                1,
                datatype,
                op,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Compare_and_swap(
    origin_addr: *const c_void,
    compare_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Compare_and_swap", win, |s| {
        let Some(a) = access(s, win, target_rank, target_disp, 1, datatype)? else {
            return Ok(());
        };
        // The standard allows integer, logical, byte and multi-language
        // (address, offset, count) types: comparing floating-point values
        // bitwise would not be an equality test (0.0 and -0.0, NaNs).
        let prim = datatype::predefined_prim(datatype)
            .filter(|p| {
                !matches!(
                    p,
                    Prim::F32
                        | Prim::F64
                        | Prim::LongDouble
                        | Prim::C32
                        | Prim::C64
                        | Prim::CLongDouble
                        | Prim::Pair(_)
                )
            })
            .ok_or_else(|| {
                win_fail(
                    ErrorClass::Type,
                    "compare-and-swap takes one predefined integer, logical or byte element",
                )
            })?;
        if origin_addr.is_null() || compare_addr.is_null() || result_addr.is_null() {
            return Err(win_fail(ErrorClass::Buffer, "NULL buffer"));
        }
        let (rt, w) = split(s, win)?;
        // SAFETY: one element each (checked non-null; MPI contract).
        unsafe {
            w.engine.compare_and_swap(
                rt,
                &a.core,
                prim,
                compare_addr.cast(),
                origin_addr.cast(),
                result_addr.cast(),
            )
        }
        .map_err(engine_fail)
    })
}

/// Request-based operations (`MPI_Rput` ...), allowed in passive-target
/// epochs only: the operation, then the wait for it (and anything else
/// this rank sent the target) to complete at the target, so the request is
/// complete when the call returns (the standard lets completion come at
/// any time; it only has to come).
fn request_op(
    s: &mut State,
    win: MPI_Win,
    rank: c_int,
    request: *mut MPI_Request,
    op: impl FnOnce(&mut State) -> Outcome,
) -> Outcome {
    args::out_ptr(MPI_COMM_WORLD, request, "request")?;
    let w = get(s, win)?;
    let t = target_rank(w, rank)?;
    if let Some(t) = t {
        if !w.engine.epochs.passive(t) {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "request-based one-sided operation outside a passive-target (lock) epoch",
            ));
        }
    }
    op(s)?;
    if let Some(t) = t {
        complete_ops(s, win, Some(t))?;
    }
    let comm = get(s, win)?.user_comm;
    let h = request::handle(s, comm, request::Op::Done(Status::default()));
    // SAFETY: checked non-null.
    unsafe { put(request, h) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rput(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    win_call("MPI_Rput", win, |s| {
        request_op(s, win, target_rank, request, |s| {
            put_op(
                s,
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                win,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rget(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    win_call("MPI_Rget", win, |s| {
        request_op(s, win, target_rank, request, |s| {
            get_op(
                s,
                origin_addr,
                origin_count,
                origin_datatype,
                target_rank,
                target_disp,
                target_count,
                target_datatype,
                win,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Raccumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    win_call("MPI_Raccumulate", win, |s| {
        request_op(s, win, target_rank, request, |s| {
            // SAFETY: forwarded from the caller (MPI contract on the buffers).
            unsafe {
                accumulate(
                    s,
                    win,
                    Some((origin_addr, origin_count, origin_datatype)),
                    None,
                    target_rank,
                    target_disp,
                    target_count,
                    target_datatype,
                    op,
                )
            }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Rget_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    win_call("MPI_Rget_accumulate", win, |s| {
        request_op(s, win, target_rank, request, |s| {
            // SAFETY: forwarded from the caller (MPI contract on the buffers).
            unsafe {
                accumulate(
                    s,
                    win,
                    Some((origin_addr, origin_count, origin_datatype)),
                    Some((result_addr, result_count, result_datatype)),
                    target_rank,
                    target_disp,
                    target_count,
                    target_datatype,
                    op,
                )
            }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_fence(assert: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_fence", win, |s| {
        let w = get(s, win)?;
        if w.engine.epochs.any_lock() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_fence inside a lock epoch",
            ));
        }
        let comm = w.engine.comm();
        let barrier = assert & MPI_MODE_NOPRECEDE == 0 || assert & MPI_MODE_NOSUCCEED == 0;
        let open = assert & MPI_MODE_NOSUCCEED == 0;
        ops_then(s, win, None, barrier.then_some(comm), move |s| {
            get_mut(s, win).map(|w| w.engine.epochs.set_fence_open(open))
        })
    })
}

/// Waits until `win`'s operations (to `target`, or all) are complete,
/// then, with `barrier`, for a barrier on that communicator, and ends the
/// call with `then`: a fence, a flush, MPI_Win_complete and MPI_Win_free.
/// Under `MPI_THREAD_MULTIPLE` both waits let other threads in (one such
/// call must not keep out the thread that sends what another rank waits
/// for before its own), the barrier being a started one; otherwise they
/// wait to the end, the barrier taking the shared-flag path where it may.
fn ops_then(
    s: &mut State,
    win: MPI_Win,
    target: Option<u32>,
    barrier: Option<CommId>,
    mut then: impl FnMut(&mut State) -> Outcome + 'static,
) -> Outcome {
    // A failed operation is reported after the barrier: the other members
    // wait in it for this one.
    if !state::multiple() {
        let ops = complete_ops(s, win, target);
        let met = barrier.map_or(Ok(()), |comm| s.rt.barrier(comm).map_err(engine_fail));
        ops.and(met)?;
        return then(s);
    }
    let mut ops = Some(completion_start(s, win, target)?);
    let mut failed: Option<Fail> = None;
    let mut started: Option<tandem::coll::SchedId> = None;
    state::block_on(s, move |s, may_end| {
        if let Some(c) = ops.as_mut() {
            if !c.wait(&mut s.rt, may_end) {
                return None;
            }
            let c = ops.take().expect("looked at above");
            failed = completion_finish(s, win, c).err();
            if let Some(comm) = barrier {
                // SAFETY: a barrier moves no user data.
                match unsafe { s.rt.coll_start(comm, tandem::coll::CollCall::Barrier) } {
                    Ok(sid) => started = Some(sid),
                    Err(e) => return Some(Err(failed.take().unwrap_or(engine_fail(e)))),
                }
            }
        }
        if let Some(sid) = started {
            let met = crate::coll::sched_done(s, sid, may_end)?;
            started = None;
            if let Err(e) = met {
                return Some(Err(failed.take().unwrap_or(engine_fail(e))));
            }
        }
        match failed.take() {
            Some(f) => Some(Err(f)),
            None => Some(then(s)),
        }
    })
}

/// Takes the lock of `t` (see [`Passive`]); `None` when the wait stopped
/// early.
fn lock_one(
    s: &mut State,
    win: MPI_Win,
    t: u32,
    exclusive: bool,
    assert: c_int,
    st: &mut Passive,
    may_end: bool,
) -> Option<Outcome> {
    let (rt, w) = match split(s, win) {
        Ok(parts) => parts,
        Err(f) => return Some(Err(f)),
    };
    let nocheck = assert & MPI_MODE_NOCHECK != 0;
    let done = w.engine.lock_step(rt, t, exclusive, nocheck, st, may_end)?;
    Some(done.map_err(engine_fail))
}

/// Gives back the lock of `t` (see [`Passive`]); `wake`: members asleep on
/// a lock word look again (MPI_Win_unlock_all wakes them once, after the
/// last).
fn unlock_one(
    s: &mut State,
    win: MPI_Win,
    t: u32,
    wake: bool,
    st: &mut Passive,
    may_end: bool,
) -> Option<Outcome> {
    let (rt, w) = match split(s, win) {
        Ok(parts) => parts,
        Err(f) => return Some(Err(f)),
    };
    let done = w.engine.unlock_step(rt, t, wake, st, may_end)?;
    Some(done.map_err(engine_fail))
}

/// Runs `one` for targets `from..to` in turn as a blocking call's last step
/// (see `state::block_on`), then `then`.
fn passive_each(
    s: &mut State,
    win: MPI_Win,
    targets: std::ops::Range<u32>,
    mut one: impl FnMut(&mut State, u32, &mut Passive, bool) -> Option<Outcome> + 'static,
    mut then: impl FnMut(&mut State) -> Outcome + 'static,
) -> Outcome {
    let mut next = targets.start;
    let end = targets.end;
    let mut st = Passive::default();
    // Keys are never handed out twice: a window freed by another thread
    // while this call let it in, and its slot reused, is not this one.
    let key = get(s, win)?.engine.key();
    state::block_on(s, move |s, may_end| {
        if !get(s, win).is_ok_and(|w| w.engine.key() == key) {
            return Some(Err(win_fail(
                ErrorClass::Win,
                "the window was freed while this call waited",
            )));
        }
        while next < end {
            if let Err(f) = one(s, next, &mut st, may_end)? {
                return Some(Err(f));
            }
            next += 1;
            st = Passive::default();
        }
        Some(then(s))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_lock(
    lock_type: c_int,
    rank: c_int,
    assert: c_int,
    win: MPI_Win,
) -> c_int {
    win_call("MPI_Win_lock", win, |s| {
        let exclusive = match lock_type {
            MPI_LOCK_EXCLUSIVE => true,
            MPI_LOCK_SHARED => false,
            _ => {
                return Err(win_fail(
                    ErrorClass::Locktype,
                    format!(
                        "lock type {lock_type} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"
                    ),
                ))
            }
        };
        let w = get(s, win)?;
        let Some(t) = target_rank(w, rank)? else {
            return Ok(());
        };
        if w.engine.epochs.lock_all() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock inside MPI_Win_lock_all",
            ));
        }
        if w.engine.epochs.start_group().is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock inside an MPI_Win_start access epoch",
            ));
        }
        passive_each(
            s,
            win,
            t..t + 1,
            move |s, t, st, may_end| lock_one(s, win, t, exclusive, assert, st, may_end),
            |_| Ok(()),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_unlock(rank: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_unlock", win, |s| {
        let w = get(s, win)?;
        let Some(t) = target_rank(w, rank)? else {
            return Ok(());
        };
        if w.engine.epochs.lock_all() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_unlock inside MPI_Win_lock_all",
            ));
        }
        passive_each(
            s,
            win,
            t..t + 1,
            move |s, t, st, may_end| unlock_one(s, win, t, true, st, may_end),
            |_| Ok(()),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_lock_all(assert: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_lock_all", win, |s| {
        let w = get(s, win)?;
        if w.engine.epochs.any_lock() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock_all inside a lock epoch",
            ));
        }
        if w.engine.epochs.start_group().is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock_all inside an MPI_Win_start access epoch",
            ));
        }
        passive_each(
            s,
            win,
            0..w.engine.members() as u32,
            move |s, t, st, may_end| lock_one(s, win, t, false, assert, st, may_end),
            move |s| get_mut(s, win).map(|w| w.engine.epochs.set_lock_all(true)),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_unlock_all(win: MPI_Win) -> c_int {
    win_call("MPI_Win_unlock_all", win, |s| {
        let w = get(s, win)?;
        if !w.engine.epochs.lock_all() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_unlock_all without MPI_Win_lock_all",
            ));
        }
        let n = w.engine.members() as u32;
        passive_each(
            s,
            win,
            0..n,
            move |s, t, st, may_end| unlock_one(s, win, t, t + 1 == n, st, may_end),
            move |s| get_mut(s, win).map(|w| w.engine.epochs.set_lock_all(false)),
        )
    })
}

/// Flushes need a passive-target epoch on the rank (or all).
fn flush(s: &mut State, win: MPI_Win, rank: Option<c_int>) -> Outcome {
    let w = get(s, win)?;
    let t = match rank {
        Some(r) => match target_rank(w, r)? {
            Some(t) => Some(t),
            None => return Ok(()),
        },
        None => None,
    };
    let locked = match t {
        Some(t) => w.engine.epochs.passive(t),
        None => w.engine.epochs.any_lock(),
    };
    if !locked {
        return Err(win_fail(
            ErrorClass::RmaSync,
            "flush outside a passive-target (lock) epoch",
        ));
    }
    ops_then(s, win, t, None, |_| Ok(()))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush(rank: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_flush", win, |s| flush(s, win, Some(rank)))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush_all(win: MPI_Win) -> c_int {
    win_call("MPI_Win_flush_all", win, |s| flush(s, win, None))
}

/// Local completion is implied by remote completion, which is what is
/// waited for (reads complete locally only once their data is here anyway).
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush_local(rank: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_flush_local", win, |s| flush(s, win, Some(rank)))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_flush_local_all(win: MPI_Win) -> c_int {
    win_call("MPI_Win_flush_local_all", win, |s| flush(s, win, None))
}

/// The window's memory is one copy (the unified model), so syncing the
/// public and private copies is a full memory fence. It also drives
/// progress once: a rank that polls its own window for another rank's
/// write, with MPI_Win_sync between the reads and no other MPI call, must
/// see that write carried out by its own progress engine (as in
/// `wait_serving`) or it would wait for ever.
#[no_mangle]
pub unsafe extern "C" fn MPI_Win_sync(win: MPI_Win) -> c_int {
    win_call("MPI_Win_sync", win, |s| {
        get(s, win)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        s.rt.progress_once();
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    })
}

/// Window ranks of a group's members.
fn window_ranks(s: &State, win: MPI_Win, g: MPI_Group) -> Result<Vec<u32>, Fail> {
    let w = get(s, win)?;
    let members = group::members(s, g)?;
    members
        .iter()
        .map(|m| {
            w.engine
                .group()
                .iter()
                .position(|x| x == m)
                .map(|p| p as u32)
                .ok_or_else(|| win_fail(ErrorClass::Group, "group member not in the window"))
        })
        .collect()
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_post(g: MPI_Group, _assert: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_post", win, |s| {
        let ranks = window_ranks(s, win, g)?;
        let (rt, w) = split(s, win)?;
        if w.engine.epochs.post_group().is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_post twice without MPI_Win_wait",
            ));
        }
        w.engine
            .notify(rt, &ranks, rma::TAG_POST)
            .map_err(engine_fail)?;
        w.engine.epochs.set_post_group(Some(ranks));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_start(g: MPI_Group, _assert: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_start", win, |s| {
        let ranks = window_ranks(s, win, g)?;
        let w = get(s, win)?;
        if w.engine.epochs.start_group().is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_start twice without MPI_Win_complete",
            ));
        }
        if w.engine.epochs.any_lock() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_start inside a lock epoch (unlock first)",
            ));
        }
        let comm = w.engine.comm();
        let group = ranks.clone();
        notices_then(s, comm, &ranks, rma::TAG_POST, move |s| {
            let epochs = &mut get_mut(s, win)?.engine.epochs;
            epochs.set_start_group(Some(group.clone()));
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_complete(win: MPI_Win) -> c_int {
    win_call("MPI_Win_complete", win, |s| {
        let Some(ranks) = get(s, win)?
            .engine
            .epochs
            .start_group()
            .map(<[u32]>::to_vec)
        else {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_complete without MPI_Win_start",
            ));
        };
        let finish = move |s: &mut State| {
            let (rt, w) = split(s, win)?;
            w.engine
                .notify(rt, &ranks, rma::TAG_COMPLETE)
                .map_err(engine_fail)?;
            w.engine.epochs.set_start_group(None);
            Ok(())
        };
        ops_then(s, win, None, None, finish)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_wait(win: MPI_Win) -> c_int {
    win_call("MPI_Win_wait", win, |s| {
        let Some(ranks) = get(s, win)?.engine.epochs.post_group().map(<[u32]>::to_vec) else {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_wait without MPI_Win_post",
            ));
        };
        let comm = get(s, win)?.engine.comm();
        notices_then(s, comm, &ranks, rma::TAG_COMPLETE, move |s| {
            get_mut(s, win)?.engine.epochs.set_post_group(None);
            Ok(())
        })
    })
}

/// Receives the empty notice `tag` (a post, or a completion) from each of
/// `ranks` of `comm`, then ends the call with `then`; under
/// `MPI_THREAD_MULTIPLE` the wait lets other threads in (see
/// `state::block_on`).
fn notices_then(
    s: &mut State,
    comm: CommId,
    ranks: &[u32],
    tag: i32,
    mut then: impl FnMut(&mut State) -> Outcome + 'static,
) -> Outcome {
    if !state::multiple() {
        for &r in ranks {
            s.rt.recv(comm, Some(r), Some(tag), &mut [])
                .map_err(engine_fail)?;
        }
        return then(s);
    }
    let mut ids = Vec::with_capacity(ranks.len());
    for &r in ranks {
        // SAFETY: an empty buffer: nothing is ever written through it.
        match unsafe {
            s.rt.irecv(
                comm,
                Some(r),
                Some(tag),
                std::ptr::NonNull::dangling().as_ptr(),
                0,
            )
        } {
            Ok(id) => ids.push(id),
            Err(e) => {
                // None may match a later notice.
                for &id in &ids {
                    let _ = s.rt.p2p().cancel(id);
                    let _ = s.rt.p2p().take_if_complete(id);
                }
                return Err(engine_fail(e));
            }
        }
    }
    state::block_on(s, move |s, may_end| {
        let all_in = |p: &P2p| ids.iter().all(|&id| p.is_complete(id) != Some(false));
        if !s.rt.wait_until_or_hand_over_if(|p, _| all_in(p), may_end) {
            return None;
        }
        let mut first = None;
        for &id in &ids {
            let st = s.rt.p2p().take_if_complete(id).unwrap_or_default();
            if let (None, Some(e)) = (&first, st.error) {
                first = Some(engine_fail(e));
            }
        }
        Some(match first {
            Some(f) => Err(f),
            None => then(s),
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_test(win: MPI_Win, flag: *mut c_int) -> c_int {
    win_call("MPI_Win_test", win, |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        let (rt, w) = split(s, win)?;
        let Some(ranks) = w.engine.epochs.post_group().map(<[u32]>::to_vec) else {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_test without MPI_Win_post",
            ));
        };
        let all = w
            .engine
            .take_notices_if_all(rt, &ranks, rma::TAG_COMPLETE)
            .map_err(engine_fail)?;
        if all {
            w.engine.epochs.set_post_group(None);
        }
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(all)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_group(win: MPI_Win, g: *mut MPI_Group) -> c_int {
    win_call("MPI_Win_get_group", win, |s| {
        args::out_ptr(MPI_COMM_WORLD, g, "group")?;
        let members = get(s, win)?.engine.group().clone();
        let h = group::add(s, members);
        // SAFETY: checked non-null.
        unsafe { put(g, h) };
        Ok(())
    })
}

/// Checks that `win` is a window (attr.rs).
pub(crate) fn check(s: &State, win: MPI_Win) -> Outcome {
    get(s, win).map(drop)
}

/// The value of a window's predefined attribute `keyval` (`None`: not one
/// of them).
pub(crate) fn predefined_attr(
    s: &State,
    win: MPI_Win,
    keyval: c_int,
) -> Result<Option<*mut c_void>, Fail> {
    let w = get(s, win)?;
    Ok(match keyval {
        MPI_WIN_BASE => Some(w.engine.base() as *mut c_void),
        MPI_WIN_SIZE => Some((&*w.attr_size as *const MPI_Aint).cast_mut().cast()),
        MPI_WIN_DISP_UNIT => Some((&*w.attr_disp_unit as *const c_int).cast_mut().cast()),
        MPI_WIN_CREATE_FLAVOR => Some((&*w.attr_flavor as *const c_int).cast_mut().cast()),
        MPI_WIN_MODEL => Some((&*w.attr_model as *const c_int).cast_mut().cast()),
        _ => None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_errhandler(win: MPI_Win, errhandler: MPI_Errhandler) -> c_int {
    win_call("MPI_Win_set_errhandler", win, |s| {
        get(s, win)?;
        if !s
            .ext
            .errhandlers
            .valid_for(errhandler, errhandler::Kind::Win)
        {
            return Err(win_fail(
                ErrorClass::Arg,
                format!("invalid window error handler {errhandler:#x}"),
            ));
        }
        get_mut(s, win)?.errhandler = errhandler;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_create_errhandler(
    win_errhandler_fn: Option<MPI_Win_errhandler_function>,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    call("MPI_Win_create_errhandler", |s| {
        args::out_ptr(MPI_COMM_WORLD, errhandler, "errhandler")?;
        let Some(func) = win_errhandler_fn else {
            return Err(Fail::new(
                MPI_COMM_WORLD,
                ErrorClass::Arg,
                "NULL error handler function",
            ));
        };
        let h = s.ext.errhandlers.create(errhandler::Kind::Win, func);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_call_errhandler(win: MPI_Win, errorcode: c_int) -> c_int {
    win_call("MPI_Win_call_errhandler", win, |s| {
        let handler = get(s, win)?.errhandler;
        let why = format!("error code {errorcode} raised by MPI_Win_call_errhandler");
        errhandler::invoke(s, "MPI_Win_call_errhandler", handler, win, errorcode, &why);
        // The handler was called (or returns): the call itself succeeded.
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_errhandler(
    win: MPI_Win,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    win_call("MPI_Win_get_errhandler", win, |s| {
        args::out_ptr(MPI_COMM_WORLD, errhandler, "errhandler")?;
        let h = get(s, win)?.errhandler;
        s.ext.errhandlers.add_ref(h);
        // SAFETY: checked non-null.
        unsafe { put(errhandler, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_set_name(win: MPI_Win, name: *const c_char) -> c_int {
    win_call("MPI_Win_set_name", win, |s| {
        if name.is_null() {
            return Err(win_fail(ErrorClass::Arg, "NULL name"));
        }
        // SAFETY: checked non-null; a C string by the MPI contract.
        let n = unsafe { datatype::read_name(name) };
        get_mut(s, win)?.name = n;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_get_name(
    win: MPI_Win,
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    win_call("MPI_Win_get_name", win, |s| {
        // MPI-4.1: the null handle has a name too.
        if win == MPI_WIN_NULL {
            return datatype::write_name("MPI_WIN_NULL", name, resultlen);
        }
        let n = get(s, win)?.name.clone();
        datatype::write_name(&n, name, resultlen)
    })
}

/// Info key asking for segments that need not be contiguous.
const NONCONTIG_KEY: &str = "alloc_shared_noncontig";
/// Whether info `h` (or MPI_INFO_NULL) sets `key` to "true".
fn info_true(s: &State, h: MPI_Info, key: &str) -> Result<bool, Fail> {
    if h == MPI_INFO_NULL {
        return Ok(false);
    }
    Ok(info::pairs(s, h)?
        .iter()
        .any(|(k, v)| k == key && v.trim().eq_ignore_ascii_case("true")))
}

unsafe fn win_allocate_shared(
    func: &'static str,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info_: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, win, "win")?;
        args::out_ptr(comm, baseptr, "baseptr")?;
        check_size_disp(size, disp_unit)?;
        info::check_optional(s, info_)?;
        let noncontig = info_true(s, info_, NONCONTIG_KEY)?;
        let cid = args::intra_comm(s, comm)?;
        let (engine, base) = Window::allocate_shared(
            &mut s.rt,
            cid,
            crate::host::identity(),
            size as usize,
            disp_unit as usize,
            noncontig,
        )
        .map_err(engine_fail)?;
        let h = insert(
            s,
            engine,
            comm,
            MPI_WIN_FLAVOR_SHARED,
            size as usize,
            disp_unit as usize,
        );
        // SAFETY: checked non-null; baseptr points to a `void *` (MPI).
        unsafe {
            put(baseptr.cast::<*mut c_void>(), base.cast::<c_void>());
            put(win, h);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        win_allocate_shared(
            "MPI_Win_allocate_shared",
            size,
            disp_unit as MPI_Aint,
            info,
            comm,
            baseptr,
            win,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        win_allocate_shared(
            "MPI_Win_allocate_shared_c",
            size,
            disp_unit,
            info,
            comm,
            baseptr,
            win,
        )
    }
}

/// `rank`'s segment as this process reaches it: (size, displacement unit,
/// address). MPI_PROC_NULL: the first member's with a non-zero size.
/// Windows of other flavors share no memory (MPI-4.1 allows the query on
/// them): only this process's own segment is reachable, the others are
/// reported empty at NULL.
fn shared_segment(s: &State, win: MPI_Win, rank: c_int) -> Result<(u64, u64, *mut c_void), Fail> {
    let w = get(s, win)?;
    let t = if rank == MPI_PROC_NULL {
        None
    } else {
        match target_rank(w, rank)? {
            Some(t) => Some(t),
            None => unreachable!("MPI_PROC_NULL handled above"),
        }
    };
    let (size, unit, base) = w.engine.segment(&s.rt, t).map_err(engine_fail)?;
    Ok((size, unit, base.cast()))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_shared_query(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    win_call("MPI_Win_shared_query", win, |s| {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        args::out_ptr(MPI_COMM_WORLD, disp_unit, "disp_unit")?;
        args::out_ptr(MPI_COMM_WORLD, baseptr, "baseptr")?;
        let (n, unit, base) = shared_segment(s, win, rank)?;
        // SAFETY: checked non-null; baseptr points to a `void *` (MPI).
        unsafe {
            put(size, n as MPI_Aint);
            put(disp_unit, unit as c_int);
            put(baseptr.cast::<*mut c_void>(), base);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_shared_query_c(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    win_call("MPI_Win_shared_query_c", win, |s| {
        args::out_ptr(MPI_COMM_WORLD, size, "size")?;
        args::out_ptr(MPI_COMM_WORLD, disp_unit, "disp_unit")?;
        args::out_ptr(MPI_COMM_WORLD, baseptr, "baseptr")?;
        let (n, unit, base) = shared_segment(s, win, rank)?;
        // SAFETY: checked non-null; baseptr points to a `void *` (MPI).
        unsafe {
            put(size, n as MPI_Aint);
            put(disp_unit, unit as MPI_Aint);
            put(baseptr.cast::<*mut c_void>(), base);
        }
        Ok(())
    })
}

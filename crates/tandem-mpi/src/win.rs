//! MPI one-sided communication (windows) on the engine's one-sided
//! operations.
//!
//! * Every window has a private duplicate of its communicator (fences,
//!   post/start/complete/wait notices) and an exposed region at each member
//!   (a key per member, exchanged at creation; dynamic windows expose a key
//!   whose regions come and go with attach/detach, and are addressed by
//!   absolute address).
//! * Operations are split into the target datatype's contiguous runs: runs
//!   of 64 KiB or more are one engine operation each (their data lands in
//!   place), smaller ones travel by the thousand in scattered operations
//!   (one frame: a table of strided blocks and their packed data, up to
//!   4 MiB); origin data that is not contiguous is packed first, and reads
//!   into such buffers are unpacked once complete.
//! * Every operation is acknowledged by its target once applied there, so
//!   waiting for the acknowledgements is remote completion: that is what
//!   fence, unlock, flush and complete do. Accumulates are applied by the
//!   target's progress engine one at a time, hence atomic per element.
//! * Lock requests are queued at the target by its progress engine and
//!   granted in order (shared ones together); `MPI_Win_lock` returns once
//!   granted.
//! * Windows whose memory every member maps (MPI_Win_allocate_shared, and
//!   MPI_Win_allocate when every member is on this host) skip all of this:
//!   operations are loads and stores, locks and accumulates words in that
//!   memory ([`direct`]).

use std::alloc::Layout as AllocLayout;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tandem::datatype::{Layout, Prim};
use tandem::ops::PredefOp;
use tandem::p2p::{OpId, OpState, P2p, Status, Strided};
use tandem::shared_mapping::{memfd, SharedMapping};
use tandem::{CommId, Error, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::datatype::{self, Typed};
use crate::state::{self, call, call_with, Fail, Outcome, State};
use crate::{errhandler, group, info, ops, request};

mod direct;

/// First handle value of windows.
const WIN_BASE: usize = 0x30000;
/// Tags of the post/start and complete/wait notices on the private communicator.
const TAG_POST: i32 = 1;
const TAG_COMPLETE: i32 = 2;
/// Alignment of memory from MPI_Win_allocate.
const ALLOC_ALIGN: usize = 64;

/// What a member exposes, as every member learns it at creation.
#[derive(Clone, Copy, Default)]
struct Target {
    key: u32,
    base: u64,
    size: u64,
    disp_unit: u64,
}

/// Bytes of each member's lock words at the start of a shared window's
/// file: its reader-writer word, and a line further its accumulate mutex
/// (apart, so that accumulates do not take the line lock waiters poll).
const CTRL_STRIDE: usize = 128;
const MUTEX_AT: usize = 64;

/// A shared window's memory: one memory file holding every member's lock
/// words and segment, mapped by every member (at its own address).
struct Shared {
    map: SharedMapping,
    /// Each member's segment: where it starts in the file, and its size.
    segments: Vec<(usize, usize)>,
    /// One-sided operations are loads and stores into this memory
    /// ([`direct`]); otherwise they go through the engine.
    direct: bool,
}

impl Shared {
    /// This process's address of `rank`'s segment; null for an empty one
    /// (as MPICH does: a program may test for it).
    fn address(&self, rank: usize) -> *mut c_void {
        match self.segments[rank] {
            (_, size) if size > 0 => self.start(rank).cast(),
            _ => std::ptr::null_mut(),
        }
    }

    /// Where `rank`'s segment starts in this process, even an empty one.
    fn start(&self, rank: usize) -> *mut u8 {
        // SAFETY: every segment starts within the mapping or at its end,
        // laid out when it was made.
        unsafe { self.map.base().add(self.segments[rank].0) }
    }

    /// `rank`'s reader-writer lock word.
    fn lock_word(&self, rank: usize) -> &AtomicU64 {
        self.word(rank * CTRL_STRIDE)
    }

    /// `rank`'s accumulate mutex word.
    fn mutex_word(&self, rank: usize) -> &AtomicU64 {
        self.word(rank * CTRL_STRIDE + MUTEX_AT)
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at + 8 <= self.segments.first().map_or(0, |s| s.0));
        // SAFETY: the control area lies before the first segment, inside
        // the mapping, page-aligned at its start, so `at` (a multiple of 64)
        // is 8-byte aligned; the words are only ever used atomically, by
        // every process mapping the file.
        unsafe { &*self.map.base().add(at).cast::<AtomicU64>() }
    }
}

/// A read whose data arrives packed and is unpacked once complete.
struct Unpack {
    target: u32,
    /// When it was issued (see [`Win::issued`]).
    seq: u64,
    data: Vec<u8>,
    dest: Typed,
}

/// An engine operation of this window not yet known to be complete.
struct Pending {
    id: OpId,
    target: u32,
    /// When it was issued (see [`Win::issued`]).
    seq: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LockHeld {
    No,
    /// Granted by the target.
    Yes,
    /// Taken in the window's shared memory ([`direct::lock`]).
    Word {
        exclusive: bool,
    },
    /// Under MPI_MODE_NOCHECK: no lock was asked for.
    NoCheck,
}

pub struct Win {
    comm: CommId,
    /// The creating communicator, whose rank numbering the window uses.
    user_comm: MPI_Comm,
    group: Arc<[u32]>,
    key: u32,
    base: usize,
    flavor: c_int,
    /// Memory from MPI_Win_allocate: (address, layout).
    owned: Option<(usize, AllocLayout)>,
    /// The memory of a window from MPI_Win_allocate_shared.
    shared: Option<Shared>,
    targets: Vec<Target>,
    pending: Vec<Pending>,
    unpacks: Vec<Unpack>,
    /// Packed origin data that operations in flight read, by target and
    /// issue number.
    keep: Vec<(u32, u64, Vec<u8>)>,
    /// Operations issued so far, which numbers them: a completion finishes
    /// only those issued before it began (under `MPI_THREAD_MULTIPLE`
    /// another thread may issue more while it waits).
    issued: u64,
    locks: Vec<LockHeld>,
    lock_all: bool,
    fence_open: bool,
    start_group: Option<Vec<u32>>,
    post_group: Option<Vec<u32>>,
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

/// Creates a window over `[base, base + size)` (or a dynamic one).
fn create(
    s: &mut State,
    base: *mut u8,
    size: usize,
    disp_unit: usize,
    comm: MPI_Comm,
    flavor: c_int,
    owned: Option<(usize, AllocLayout)>,
) -> Result<MPI_Win, Fail> {
    let cid = args::intra_comm(s, comm)?;
    let wcomm = s.rt.comm_dup(cid).map_err(engine_fail)?;
    create_on(s, wcomm, comm, base, size, disp_unit, flavor, owned, None)
}

/// Creates a window over `[base, base + size)` on `wcomm`, the window's
/// private duplicate of `comm`.
#[allow(clippy::too_many_arguments)]
fn create_on(
    s: &mut State,
    wcomm: CommId,
    comm: MPI_Comm,
    base: *mut u8,
    size: usize,
    disp_unit: usize,
    flavor: c_int,
    owned: Option<(usize, AllocLayout)>,
    shared: Option<Shared>,
) -> Result<MPI_Win, Fail> {
    if s.rt.replicated() {
        // Window operations are requests and answers between two processes,
        // which the replication layer cannot replay from another replica.
        let _ = s.rt.comm_free(wcomm);
        return Err(engine_fail(Error::new(
            ErrorClass::Unsupported,
            "one-sided communication is not available in a job with replicas (tandem run --replicas)",
        )));
    }
    let c = s.rt.comm(wcomm).map_err(engine_fail)?;
    let (group, n) = (c.group.clone(), c.size() as usize);
    let key = if flavor == MPI_WIN_FLAVOR_DYNAMIC {
        s.rt.p2p().expose_dynamic()
    } else {
        s.rt.p2p().expose(base, size)
    };
    let mine = [key as u64, base as u64, size as u64, disp_unit as u64];
    let all = match s.rt.allgather_u64(wcomm, &mine) {
        Ok(all) if all.len() == 4 * n => all,
        // Nothing of the window is left behind.
        other => {
            s.rt.p2p().unexpose(key);
            let _ = s.rt.comm_free(wcomm);
            return Err(match other {
                Err(e) => engine_fail(e),
                Ok(_) => win_fail(ErrorClass::Intern, "short window address exchange"),
            });
        }
    };
    let targets = all
        .chunks_exact(4)
        .map(|t| Target {
            key: t[0] as u32,
            base: t[1],
            size: t[2],
            disp_unit: t[3],
        })
        .collect();
    let w = Win {
        comm: wcomm,
        user_comm: comm,
        group,
        key,
        base: base as usize,
        flavor,
        owned,
        shared,
        targets,
        pending: Vec::new(),
        unpacks: Vec::new(),
        keep: Vec::new(),
        issued: 0,
        locks: vec![LockHeld::No; n],
        lock_all: false,
        fence_open: false,
        start_group: None,
        post_group: None,
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
    Ok(WIN_BASE + slot)
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
            None,
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
        let wcomm = s.rt.comm_dup(cid).map_err(engine_fail)?;
        let (h, mem) = allocate_on(s, wcomm, comm, size as usize, disp_unit as usize)?;
        // SAFETY: checked non-null; baseptr points to a `void *` (MPI).
        unsafe {
            put(baseptr.cast::<*mut c_void>(), mem.cast());
            put(win, h);
        }
        Ok(())
    })
}

/// Whether this member of `wcomm` reaches every other one through shared
/// memory, so that a window's operations could be loads and stores (and
/// an unlock can wake a member asleep on its lock word).
fn all_on_shm(s: &mut State, wcomm: CommId) -> Result<bool, Fail> {
    let group = s.rt.comm(wcomm).map_err(engine_fail)?.group.clone();
    Ok(s.rt.p2p().all_shm_peers(&group))
}

/// MPI_Win_allocate's window on `wcomm`: in shared memory when every
/// member is on this host (and `rma_direct` allows), so that operations
/// are loads and stores; else in private memory, reached through the
/// engine. The window and its memory; on failure `wcomm` is freed.
fn allocate_on(
    s: &mut State,
    wcomm: CommId,
    comm: MPI_Comm,
    size: usize,
    disp_unit: usize,
) -> Result<(MPI_Win, *mut u8), Fail> {
    let freeing = |s: &mut State, f: Fail| {
        let _ = s.rt.comm_free(wcomm);
        f
    };
    let direct = match all_on_shm(s, wcomm) {
        Ok(all) => all && s.rt.settings().bool("rma_direct"),
        Err(f) => return Err(freeing(s, f)),
    };
    // Segments on their own pages: no false sharing between members.
    let shared = share_memory(s, wcomm, size, true, direct, Sharing::ForDirect)
        .map_err(|f| freeing(s, f))?;
    let (mem, owned) = match &shared {
        Some(sh) => match s.rt.comm(wcomm) {
            Ok(c) => (sh.start(c.rank as usize), None),
            Err(e) => return Err(freeing(s, engine_fail(e))),
        },
        None => {
            let Ok(layout) = AllocLayout::from_size_align(size.max(1), ALLOC_ALIGN) else {
                return Err(freeing(
                    s,
                    win_fail(ErrorClass::Size, "window size too large"),
                ));
            };
            // SAFETY: the layout has a non-zero size.
            let mem = unsafe { std::alloc::alloc_zeroed(layout) };
            if mem.is_null() {
                return Err(freeing(
                    s,
                    win_fail(ErrorClass::NoMem, "cannot allocate the window"),
                ));
            }
            (mem, Some((mem as usize, layout)))
        }
    };
    // create_on frees `wcomm` when it fails.
    let h = create_on(
        s,
        wcomm,
        comm,
        mem,
        size,
        disp_unit,
        MPI_WIN_FLAVOR_ALLOCATE,
        owned,
        shared,
    );
    match h {
        Ok(h) => Ok((h, mem)),
        Err(f) => {
            if let Some((mem, layout)) = owned {
                // SAFETY: allocated above with this layout, never exposed.
                unsafe { std::alloc::dealloc(mem as *mut u8, layout) };
            }
            Err(f)
        }
    }
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
        let h = create(
            s,
            std::ptr::null_mut(),
            0,
            1,
            comm,
            MPI_WIN_FLAVOR_DYNAMIC,
            None,
        )?;
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
        let key = w.key;
        s.rt.p2p().attach(key, base.cast(), size as usize);
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
        let key = w.key;
        if !s.rt.p2p().detach_region(key, base.cast()) {
            return Err(win_fail(
                ErrorClass::RmaAttach,
                "memory not attached to this window",
            ));
        }
        Ok(())
    })
}

/// Drives progress until `ready` holds, and polls the transports once if
/// it held at the first look. Operations on this rank's own window complete
/// without a look at the transports, so a rank that polls its own window
/// (lock, read, unlock on itself, until another rank's write shows up)
/// would otherwise never carry out the others' operations nor grant their
/// locks, and everyone would wait for ever: MPI requires progress for
/// passive-target operations inside MPI calls. A wait that had to wait drove
/// progress already, so remote operations pay nothing more. With `may_end`
/// (`MPI_THREAD_MULTIPLE`, see `state::block_on`) false when it stopped to
/// let other threads in; `waited` carries on across such stops.
fn wait_serving(
    s: &mut State,
    mut ready: impl FnMut(&P2p) -> bool,
    may_end: bool,
    waited: &mut bool,
) -> bool {
    let mut look = |p2p: &P2p| {
        let r = ready(p2p);
        *waited |= !r;
        r
    };
    if !s.rt.wait_until_or_hand_over_if(|p2p, _| look(p2p), may_end) {
        return false;
    }
    if !*waited {
        s.rt.progress_once();
    }
    true
}

/// Waits until this window's operations (to `target`, or all) are complete
/// at their targets, then finishes reads into packed buffers.
fn complete_ops(s: &mut State, win: MPI_Win, target: Option<u32>) -> Result<(), Fail> {
    let mut c = Completion::start(s, win, target)?;
    c.wait(s, false);
    c.finish(s, win)
}

/// The wait of [`complete_ops`], in three steps so that a call whose wait
/// lets other threads in (`MPI_THREAD_MULTIPLE`, see `state::block_on`)
/// can stop and resume it.
struct Completion {
    target: Option<u32>,
    /// Operations issued before this number are the ones waited for.
    upto: u64,
    /// The operations (and one sync per target) to wait for; `None` for a
    /// window whose operations complete as they are made (direct).
    ids: Option<Vec<OpId>>,
    /// How many of `ids` were found complete: a put of a scattered datatype
    /// is one operation per block (a million for a transposed 1000x1000
    /// matrix), and the ones found done are not looked at again, or every
    /// poll would scan them all.
    done: usize,
    waited: bool,
}

impl Completion {
    fn start(s: &mut State, win: MPI_Win, target: Option<u32>) -> Result<Completion, Fail> {
        let i = index(win).expect("validated window");
        let mut c = Completion {
            target,
            upto: s.wins[i].as_ref().map_or(0, |w| w.issued),
            ids: None,
            done: 0,
            waited: false,
        };
        if s.wins[i].as_ref().is_some_and(direct::is_direct) {
            direct::complete();
            return Ok(c);
        }
        let (mut ids, targets): (Vec<OpId>, Vec<u32>) = {
            let w = s.wins[i].as_ref().expect("validated window");
            let ids = w
                .pending
                .iter()
                .filter(|p| target.is_none_or(|t| p.target == t))
                .map(|p| p.id)
                .collect();
            let mut targets: Vec<u32> = w
                .pending
                .iter()
                .filter(|p| target.is_none_or(|t| p.target == t))
                .map(|p| w.group[p.target as usize])
                .collect();
            targets.sort_unstable();
            targets.dedup();
            (ids, targets)
        };
        // Writes and accumulates are answered only when refused: one sync
        // per target says when everything before it is carried out.
        for t in targets {
            ids.push(s.rt.p2p().sync(t).map_err(engine_fail)?);
        }
        c.ids = Some(ids);
        Ok(c)
    }

    /// Waits (see [`wait_serving`]) until every operation is complete; with
    /// `may_end`, false when it stopped to let other threads in.
    fn wait(&mut self, s: &mut State, may_end: bool) -> bool {
        let Some(ids) = &self.ids else {
            return true;
        };
        let done = &mut self.done;
        let ready = |p2p: &P2p| {
            while let Some(&id) = ids.get(*done) {
                if matches!(
                    p2p.op_state(id),
                    Some(OpState::Pending | OpState::LocalDone)
                ) {
                    return false;
                }
                *done += 1;
            }
            true
        };
        wait_serving(s, ready, may_end, &mut self.waited)
    }

    /// Collects the operations' outcomes (once [`Completion::wait`] said
    /// true) and unpacks the reads into packed buffers.
    fn finish(self, s: &mut State, win: MPI_Win) -> Result<(), Fail> {
        let Some(ids) = self.ids else {
            return Ok(());
        };
        let mut first: Option<Error> = None;
        for &id in &ids {
            if let Some(Err(e)) = s.rt.p2p().op_take(id) {
                first.get_or_insert(e);
            }
        }
        let (target, upto) = (self.target, self.upto);
        let w = get_mut(s, win)?;
        // Only what this completion waited for: operations issued since
        // (by another thread, while it let others in) stay pending.
        let mine = |t: u32, seq: u64| seq < upto && target.is_none_or(|x| x == t);
        w.pending.retain(|p| !mine(p.target, p.seq));
        w.keep.retain(|&(t, seq, _)| !mine(t, seq));
        let (done, rest): (Vec<Unpack>, Vec<Unpack>) = std::mem::take(&mut w.unpacks)
            .into_iter()
            .partition(|u| mine(u.target, u.seq));
        w.unpacks = rest;
        for u in done {
            // SAFETY: the origin buffer was checked when the read started and
            // the application keeps it valid until the read completes (now).
            unsafe { u.dest.unpack(&u.data) };
        }
        match first {
            Some(e) => Err(engine_fail(e)),
            None => Ok(()),
        }
    }
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
        let w = get(s, h)?;
        if w.lock_all || w.locks.iter().any(|&l| l != LockHeld::No) || w.start_group.is_some() {
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
            let comm = get(s, h)?.comm;
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
    s.rt.p2p().unexpose(w.key);
    let _ = s.rt.comm_free(w.comm);
    // A shared window's mapping goes with `w`: after the barrier no member
    // reads or writes it any more.
    if let Some((mem, layout)) = w.owned {
        // SAFETY: allocated by MPI_Win_allocate with this layout, and no
        // longer exposed.
        unsafe { std::alloc::dealloc(mem as *mut u8, layout) };
    }
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
    if rank < 0 || rank as usize >= w.targets.len() {
        return Err(win_fail(
            ErrorClass::Rank,
            format!("target rank {rank} is not in 0..{}", w.targets.len()),
        ));
    }
    Ok(Some(rank as u32))
}

/// Checks that an access to `t` is inside an epoch.
#[inline(always)]
fn check_epoch(w: &Win, t: u32) -> Result<(), Fail> {
    let ok = w.fence_open
        || w.lock_all
        || w.locks[t as usize] != LockHeld::No
        || w.start_group.as_ref().is_some_and(|g| g.contains(&t));
    if ok {
        Ok(())
    } else {
        Err(win_fail(
            ErrorClass::RmaSync,
            format!("access to rank {t} outside an access epoch (fence, lock or start first)"),
        ))
    }
}

/// The target's contiguous runs of a one-sided operation, (address,
/// bytes): one, held inline (a predefined or contiguous datatype: most
/// operations, which then allocate nothing), or many.
enum Runs {
    One((u64, usize)),
    Many(Vec<(u64, usize)>),
}

impl std::ops::Deref for Runs {
    type Target = [(u64, usize)];
    fn deref(&self) -> &[(u64, usize)] {
        match self {
            Runs::One(r) => std::slice::from_ref(r),
            Runs::Many(v) => v,
        }
    }
}

/// A target datatype as [`target_runs`] needs it.
enum TargetType {
    /// A predefined type whose elements lie packed: their size.
    Packed(usize),
    Layout(Arc<Layout>),
}

/// The target's contiguous runs for `count` elements of `tt` at
/// displacement `disp`, adjacent runs merged, and their bytes.
#[inline(always)]
fn target_runs(
    w: &Win,
    t: u32,
    disp: MPI_Aint,
    count: usize,
    tt: &TargetType,
) -> Result<(Runs, usize), Fail> {
    if disp < 0 && w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
        return Err(win_fail(
            ErrorClass::Disp,
            format!("negative target displacement {disp}"),
        ));
    }
    let tg = w.targets[t as usize];
    let start = if w.flavor == MPI_WIN_FLAVOR_DYNAMIC {
        disp as u64
    } else {
        tg.base
            .wrapping_add((disp as u64).wrapping_mul(tg.disp_unit))
    };
    let contiguous = match tt {
        TargetType::Packed(elem) => Some((0, *elem)),
        TargetType::Layout(l) => l.contiguous_at().map(|off| (off, l.size)),
    };
    let (runs, bytes) = match (contiguous, tt) {
        // Elements without gaps (a predefined type, a contiguous one) make
        // one run, found without a look at each element (1.4 ms for a put
        // of 1 MiB as MPI_BYTE, a loop of a million turns, before).
        (Some((off, size)), _) => {
            let len = size * count;
            let runs = if len > 0 {
                Runs::One((start.wrapping_add(off as i64 as u64), len))
            } else {
                Runs::Many(Vec::new())
            };
            (runs, len)
        }
        (None, TargetType::Layout(l)) => {
            let mut runs = Vec::new();
            push_element_runs(&mut runs, start, count, l);
            (Runs::Many(runs), l.size * count)
        }
        (None, TargetType::Packed(_)) => unreachable!("packed types are contiguous"),
    };
    if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
        let end = tg.base + tg.size;
        for &(a, n) in runs.iter() {
            if a < tg.base || a.checked_add(n as u64).is_none_or(|e| e > end) {
                return Err(win_fail(
                    ErrorClass::RmaRange,
                    format!("access beyond rank {t}'s window of {} bytes", tg.size),
                ));
            }
        }
    }
    Ok((runs, bytes))
}

/// [`target_runs`] element by element: each block of each of `count`
/// elements from `start`, adjacent ones merged.
fn push_element_runs(runs: &mut Vec<(u64, usize)>, start: u64, count: usize, layout: &Layout) {
    for i in 0..count {
        let elem = start.wrapping_add((i as i64 * layout.extent as i64) as u64);
        for b in &layout.blocks {
            let addr = elem.wrapping_add(b.off as i64 as u64);
            match runs.last_mut() {
                Some(last) if last.0.wrapping_add(last.1 as u64) == addr => last.1 += b.len,
                _ => runs.push((addr, b.len)),
            }
        }
    }
}

/// Runs of at least this many bytes are operations of their own.
const OWN_OP_MIN: usize = 64 * 1024;
/// Data bytes of one scattered operation at most.
const SCATTER_BYTES: usize = 4 << 20;
/// Strided blocks of one scattered operation at most (their table is
/// 24 bytes each).
const SCATTER_BLOCKS: usize = 64 * 1024;

/// Part of a one-sided operation: its data is `[pos, pos + bytes)` of the
/// packed origin data.
enum Piece {
    /// One contiguous run at `addr`.
    Run { addr: u64, pos: usize, bytes: usize },
    /// Several runs, in order.
    Scattered {
        blocks: Vec<Strided>,
        pos: usize,
        bytes: usize,
    },
}

/// Groups the target's runs into pieces: big runs alone, small ones in
/// scattered operations, adjacent equal runs at a fixed stride merged into
/// one strided block (a column of a matrix is one).
fn pieces(runs: &[(u64, usize)]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut cur: Vec<Strided> = Vec::new();
    let (mut start, mut bytes, mut pos) = (0usize, 0usize, 0usize);
    let close = |out: &mut Vec<Piece>, cur: &mut Vec<Strided>, start: usize, bytes: usize| {
        match cur.as_slice() {
            [] => {}
            [b] if b.count == 1 => out.push(Piece::Run {
                addr: b.addr,
                pos: start,
                bytes,
            }),
            _ => out.push(Piece::Scattered {
                blocks: std::mem::take(cur),
                pos: start,
                bytes,
            }),
        }
        cur.clear();
    };
    for &(addr, len) in runs {
        if len >= OWN_OP_MIN {
            close(&mut out, &mut cur, start, bytes);
            out.push(Piece::Run {
                addr,
                pos,
                bytes: len,
            });
            pos += len;
            (start, bytes) = (pos, 0);
            continue;
        }
        if bytes + len > SCATTER_BYTES {
            close(&mut out, &mut cur, start, bytes);
            (start, bytes) = (pos, 0);
        }
        let merged = match cur.last_mut() {
            Some(b) if b.len as usize == len && b.count < u32::MAX => {
                let stride = addr.wrapping_sub(b.addr) as i64;
                if b.count == 1 {
                    b.stride = stride;
                    b.count = 2;
                    true
                } else if stride == b.stride.wrapping_mul(i64::from(b.count)) {
                    b.count += 1;
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if !merged {
            if cur.len() == SCATTER_BLOCKS {
                close(&mut out, &mut cur, start, bytes);
                (start, bytes) = (pos, 0);
            }
            cur.push(Strided {
                addr,
                len: len as u32,
                count: 1,
                stride: 0,
            });
        }
        bytes += len;
        pos += len;
    }
    close(&mut out, &mut cur, start, bytes);
    out
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

/// An origin-side buffer of a one-sided call.
enum Origin {
    /// Its bytes lie contiguously from here.
    Flat(*mut u8),
    /// They do not: packed before writes, unpacked after reads.
    Typed(Typed),
}

/// Origin data ready to send: the user's memory or a packed copy.
#[inline(always)]
fn origin_bytes(o: &Origin) -> (*const u8, Option<Vec<u8>>) {
    match o {
        Origin::Flat(p) => (*p, None),
        Origin::Typed(t) => {
            // SAFETY: the buffer was checked by `datatype::typed`; the MPI
            // contract makes it readable as the datatype describes.
            let v = unsafe { t.pack() };
            (v.as_ptr(), Some(v))
        }
    }
}

struct Access {
    win: MPI_Win,
    /// The window's communicator (for argument errors).
    comm: MPI_Comm,
    /// The target's rank in the window's group and in the job.
    target: u32,
    world: u32,
    /// The target's key for the window's memory.
    key: u32,
    /// The target datatype.
    dt: MPI_Datatype,
    /// Where the target data lies, in runs of contiguous bytes.
    runs: Runs,
    /// How many bytes the target data holds.
    bytes: usize,
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
    check_epoch(w, t)?;
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
    let (runs, bytes) = target_runs(w, t, disp, count as usize, &tt)?;
    Ok(Some(Access {
        win,
        comm: w.user_comm,
        target: t,
        world: w.group[t as usize],
        key: w.targets[t as usize].key,
        dt,
        runs,
        bytes,
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
        if len != a.bytes {
            return Err(mismatch(len, a.bytes));
        }
        return Ok(Origin::Flat(buf as *mut u8));
    }
    let o = datatype::typed(a.comm, buf, count, dt)?;
    if o.bytes() != a.bytes {
        return Err(mismatch(o.bytes(), a.bytes));
    }
    Ok(match o.direct() {
        Some(p) => Origin::Flat(p),
        None => Origin::Typed(o),
    })
}

/// Where data read from the target lands: the user's buffer when it is
/// contiguous, else a buffer unpacked into it on completion.
#[inline(always)]
fn landing(o: &Origin, target: u32) -> (*mut u8, Option<Unpack>) {
    match o {
        Origin::Flat(p) => (*p, None),
        Origin::Typed(t) => {
            let mut data = vec![0u8; t.bytes()];
            let p = data.as_mut_ptr();
            (
                p,
                Some(Unpack {
                    target,
                    // Numbered when recorded.
                    seq: 0,
                    data,
                    dest: t.clone(),
                }),
            )
        }
    }
}

fn record(
    s: &mut State,
    a: &Access,
    ids: Vec<OpId>,
    keep: Option<Vec<u8>>,
    unpack: Option<Unpack>,
) -> Outcome {
    let w = get_mut(s, a.win)?;
    let seq = w.issued;
    w.issued += 1;
    w.pending.extend(ids.into_iter().map(|id| Pending {
        id,
        target: a.target,
        seq,
    }));
    if let Some(k) = keep {
        w.keep.push((a.target, seq, k));
    }
    if let Some(u) = unpack {
        w.unpacks.push(Unpack { seq, ..u });
    }
    Ok(())
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
    if let Some(r) = direct::reach(get(s, win)?, a.target) {
        return direct::put(s, &a, &r, &o);
    }
    let (data, keep) = origin_bytes(&o);
    let mut ids = Vec::new();
    for piece in pieces(&a.runs) {
        // SAFETY: `data` holds the packed origin data (the user's buffer
        // or `keep`, kept until the operation completes), of which each
        // piece's [pos, pos + bytes) is in range since the sizes matched.
        let r = unsafe {
            match &piece {
                Piece::Run { addr, pos, bytes } => {
                    s.rt.p2p()
                        .put(a.world, a.key, *addr, data.add(*pos), *bytes)
                }
                Piece::Scattered { blocks, pos, bytes } => {
                    s.rt.p2p()
                        .put_scattered(a.world, a.key, blocks, data.add(*pos), *bytes)
                }
            }
        };
        ids.push(r.map_err(engine_fail)?);
    }
    record(s, &a, ids, keep, None)
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

/// Reads from this size on are copied straight out of a target on this
/// host ([`read_directly`]). Below it the rings are faster than the
/// kernel's cross-process copy and its system call.
const DIRECT_GET_MIN: usize = 64 * 1024;

/// A get of one contiguous run of at least [`DIRECT_GET_MIN`] bytes from
/// a rank on this host into a contiguous origin buffer: copied straight
/// out of the target's memory (`process_vm_readv`) where the kernel allows
/// it, complete when the call returns, with no part taken by the target.
/// Through the engine the target copies the data aside for its reply
/// (the reply must hold the contents as of the request) and then through
/// the rings; with many large gets outstanding those copies' fresh pages
/// made a 1 MiB get take 700 us instead of 120. The epoch rules keep this
/// sound: a lock is granted and a start's posts have come before any get,
/// and a fence has everyone's earlier stores behind it. Dynamic windows
/// keep the engine, whose target checks the address is attached. Whether
/// it was done.
fn read_directly(s: &mut State, a: &Access, dest: *mut u8) -> bool {
    let &[(addr, len)] = &*a.runs else {
        return false;
    };
    if len < DIRECT_GET_MIN || get(s, a.win).is_ok_and(|w| w.flavor == MPI_WIN_FLAVOR_DYNAMIC) {
        return false;
    }
    let p2p = s.rt.p2p();
    if !p2p.engine().single_copy_with(a.world) || p2p.peer_known_gone(a.world) {
        return false;
    }
    // A refusal (not permitted, a peer gone) leaves the engine to do it,
    // and to report what went wrong.
    // SAFETY: `dest` is the get's contiguous origin buffer, which holds the
    // `len` bytes of the single run (the caller's check of the origin
    // against the access), writable by the MPI contract until the get
    // completes, which it does here.
    unsafe { p2p.engine().read_remote(a.world, addr, dest, len) }.is_ok()
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
    if let Some(r) = direct::reach(get(s, win)?, a.target) {
        return direct::get_into(s, &a, &r, &o);
    }
    let (dest, mut unpack) = landing(&o, a.target);
    if unpack.is_none() && read_directly(s, &a, dest) {
        return Ok(());
    }
    let mut ids = Vec::new();
    for piece in pieces(&a.runs) {
        // SAFETY: `dest` is the user's contiguous buffer or the packed
        // buffer kept in `unpack` until completion; each piece's
        // [pos, pos + bytes) is in range since the sizes matched.
        let r = unsafe {
            match &piece {
                Piece::Run { addr, pos, bytes } => {
                    s.rt.p2p()
                        .get(a.world, a.key, *addr, dest.add(*pos), *bytes)
                }
                // A scattered read is a fetch that combines nothing.
                Piece::Scattered { blocks, pos, .. } => s.rt.p2p().accumulate_scattered(
                    a.world,
                    a.key,
                    blocks,
                    PredefOp::NoOp,
                    Prim::Byte,
                    None,
                    Some(dest.add(*pos)),
                ),
            }
        };
        ids.push(r.map_err(engine_fail)?);
    }
    record(s, &a, ids, None, unpack.take())
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
    if a.bytes == 0 {
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
    if !tandem::p2p::accumulate_supported(pop, prim) {
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
    if let Some(r) = direct::reach(get(s, win)?, a.target) {
        let (data, _packed) = o.as_ref().map_or((std::ptr::null(), None), origin_bytes);
        let landed = match result {
            Some((p, c, dt)) => Some(landing(&origin_buf(&a, p, c, dt)?, a.target)),
            None => None,
        };
        let fetch = landed.as_ref().map(|(p, _)| *p);
        direct::accumulate(s, &a, &r, pop, prim, data, fetch)?;
        if let Some((_, Some(u))) = landed {
            // SAFETY: the result buffer was checked by `origin_buf`.
            unsafe { u.dest.unpack(&u.data) };
        }
        return Ok(());
    }
    let (data, keep) = match &o {
        Some(o) => origin_bytes(o),
        // MPI_NO_OP fetches only: the payload is ignored at the target.
        None => {
            let v = vec![0u8; a.bytes];
            (v.as_ptr(), Some(v))
        }
    };
    let (fetch, mut unpack) = match result {
        Some((p, c, dt)) => {
            let (p, u) = landing(&origin_buf(&a, p, c, dt)?, a.target);
            (Some(p), u)
        }
        None => (None, None),
    };
    let mut ids = Vec::new();
    for piece in pieces(&a.runs) {
        // SAFETY: origin data and the fetch buffer are the user's buffers or
        // copies kept until completion; each piece's [pos, pos + bytes) is
        // in range of both.
        let id = unsafe {
            match &piece {
                Piece::Run { addr, pos, bytes } => s.rt.p2p().accumulate(
                    a.world,
                    a.key,
                    *addr,
                    pop,
                    prim,
                    data.add(*pos),
                    *bytes,
                    fetch.map(|f| f.add(*pos)),
                ),
                Piece::Scattered { blocks, pos, .. } => s.rt.p2p().accumulate_scattered(
                    a.world,
                    a.key,
                    blocks,
                    pop,
                    prim,
                    (pop != PredefOp::NoOp).then(|| data.add(*pos)),
                    fetch.map(|f| f.add(*pos)),
                ),
            }
        };
        ids.push(id.map_err(engine_fail)?);
    }
    record(s, &a, ids, keep, unpack.take())
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
        if let Some(r) = direct::reach(get(s, win)?, a.target) {
            return direct::compare_and_swap(
                s,
                &a,
                &r,
                prim,
                compare_addr.cast(),
                origin_addr.cast(),
                result_addr.cast(),
            );
        }
        // SAFETY: one element each (checked non-null; MPI contract).
        let id = unsafe {
            s.rt.p2p().compare_and_swap(
                a.world,
                a.key,
                a.runs[0].0,
                prim,
                compare_addr.cast(),
                origin_addr.cast(),
                result_addr.cast(),
            )
        }
        .map_err(engine_fail)?;
        record(s, &a, vec![id], None, None)
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
        if !w.lock_all && w.locks[t as usize] == LockHeld::No {
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
        if w.lock_all || w.locks.iter().any(|&l| l != LockHeld::No) {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_fence inside a lock epoch",
            ));
        }
        let comm = w.comm;
        let barrier = assert & MPI_MODE_NOPRECEDE == 0 || assert & MPI_MODE_NOSUCCEED == 0;
        let open = assert & MPI_MODE_NOSUCCEED == 0;
        ops_then(s, win, None, barrier.then_some(comm), move |s| {
            get_mut(s, win).map(|w| w.fence_open = open)
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
    let mut ops = Some(Completion::start(s, win, target)?);
    let mut failed: Option<Fail> = None;
    let mut started: Option<tandem::coll::SchedId> = None;
    state::block_on(s, move |s, may_end| {
        if let Some(c) = ops.as_mut() {
            if !c.wait(s, may_end) {
                return None;
            }
            let c = ops.take().expect("looked at above");
            failed = c.finish(s, win).err();
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

/// Where a lock or unlock of one target stands: under
/// `MPI_THREAD_MULTIPLE` its wait may stop to let other threads in, and
/// the step is run again later (see `state::block_on`).
#[derive(Default)]
struct Passive {
    /// The lock or unlock request sent to the target's engine.
    op: Option<OpId>,
    /// The unlock's wait for the operations to the target.
    ops: Option<Completion>,
    /// What that wait found (the lock is given back whatever it was).
    done: Option<Outcome>,
    polls: u32,
    waited: bool,
}

/// Waits until `op` is answered; false when the wait stopped early.
/// `serving`: as [`wait_serving`] waits.
fn wait_op(s: &mut State, op: OpId, may_end: bool, serving: Option<&mut bool>) -> bool {
    let answered = |p2p: &P2p| {
        !matches!(
            p2p.op_state(op),
            Some(OpState::Pending | OpState::LocalDone)
        )
    };
    if let Some(waited) = serving {
        return wait_serving(s, answered, may_end, waited);
    }
    s.rt.wait_until_or_hand_over_if(|p2p, _| answered(p2p), may_end)
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
    let w = match get(s, win) {
        Ok(w) => w,
        Err(f) => return Some(Err(f)),
    };
    if w.locks[t as usize] != LockHeld::No {
        return Some(Err(win_fail(
            ErrorClass::RmaSync,
            format!("rank {t} is already locked in this window"),
        )));
    }
    let held = if assert & MPI_MODE_NOCHECK != 0 {
        // Nothing to wait for, but others may wait for this rank (see
        // `wait_serving`).
        s.rt.progress_once();
        LockHeld::NoCheck
    } else if direct::is_direct(w) {
        if let Err(f) = direct::lock(s, win, t, exclusive, &mut st.polls, may_end)? {
            return Some(Err(f));
        }
        LockHeld::Word { exclusive }
    } else {
        let id = match st.op {
            Some(id) => id,
            None => {
                let (world, key) = (w.group[t as usize], w.targets[t as usize].key);
                match s.rt.p2p().lock(world, key, exclusive) {
                    Ok(id) => *st.op.insert(id),
                    Err(e) => return Some(Err(engine_fail(e))),
                }
            }
        };
        if !wait_op(s, id, may_end, Some(&mut st.waited)) {
            return None;
        }
        if let Some(Err(e)) = s.rt.p2p().op_take(id) {
            return Some(Err(engine_fail(e)));
        }
        LockHeld::Yes
    };
    Some(get_mut(s, win).map(|w| w.locks[t as usize] = held))
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
    let held = match get(s, win) {
        Ok(w) => w.locks[t as usize],
        Err(f) => return Some(Err(f)),
    };
    if held == LockHeld::No {
        return Some(Err(win_fail(
            ErrorClass::RmaSync,
            format!("rank {t} is not locked in this window"),
        )));
    }
    if st.done.is_none() {
        if st.ops.is_none() {
            match Completion::start(s, win, Some(t)) {
                Ok(c) => st.ops = Some(c),
                Err(f) => st.done = Some(Err(f)),
            }
        }
        if let Some(c) = st.ops.as_mut() {
            if !c.wait(s, may_end) {
                return None;
            }
            let c = st.ops.take().expect("looked at above");
            // The lock is released even when an operation failed.
            st.done = Some(c.finish(s, win));
        }
    }
    if let LockHeld::Word { exclusive } = held {
        if let Err(f) = direct::unlock(s, win, t, exclusive, wake) {
            return Some(Err(f));
        }
    }
    if held == LockHeld::Yes {
        let id = match st.op {
            Some(id) => id,
            None => {
                let w = match get(s, win) {
                    Ok(w) => w,
                    Err(f) => return Some(Err(f)),
                };
                let (world, key) = (w.group[t as usize], w.targets[t as usize].key);
                match s.rt.p2p().unlock(world, key) {
                    Ok(id) => *st.op.insert(id),
                    Err(e) => return Some(Err(engine_fail(e))),
                }
            }
        };
        if !wait_op(s, id, may_end, None) {
            return None;
        }
        if let Some(Err(e)) = s.rt.p2p().op_take(id) {
            return Some(Err(engine_fail(e)));
        }
    }
    if let Err(f) = get_mut(s, win).map(|w| w.locks[t as usize] = LockHeld::No) {
        return Some(Err(f));
    }
    st.done.take()
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
    let key = get(s, win)?.key;
    state::block_on(s, move |s, may_end| {
        if !get(s, win).is_ok_and(|w| w.key == key) {
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
        if w.lock_all {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock inside MPI_Win_lock_all",
            ));
        }
        if w.start_group.is_some() {
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
        if w.lock_all {
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
        if w.lock_all || w.locks.iter().any(|&l| l != LockHeld::No) {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock_all inside a lock epoch",
            ));
        }
        if w.start_group.is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_lock_all inside an MPI_Win_start access epoch",
            ));
        }
        passive_each(
            s,
            win,
            0..w.targets.len() as u32,
            move |s, t, st, may_end| lock_one(s, win, t, false, assert, st, may_end),
            move |s| get_mut(s, win).map(|w| w.lock_all = true),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_unlock_all(win: MPI_Win) -> c_int {
    win_call("MPI_Win_unlock_all", win, |s| {
        let w = get(s, win)?;
        if !w.lock_all {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_unlock_all without MPI_Win_lock_all",
            ));
        }
        let n = w.targets.len() as u32;
        passive_each(
            s,
            win,
            0..n,
            move |s, t, st, may_end| unlock_one(s, win, t, t + 1 == n, st, may_end),
            move |s| get_mut(s, win).map(|w| w.lock_all = false),
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
    let locked = w.lock_all
        || match t {
            Some(t) => w.locks[t as usize] != LockHeld::No,
            None => w.locks.iter().any(|&l| l != LockHeld::No),
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
            w.group
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
        let w = get(s, win)?;
        if w.post_group.is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_post twice without MPI_Win_wait",
            ));
        }
        let comm = w.comm;
        for &r in &ranks {
            s.rt.send(comm, r, TAG_POST, &[]).map_err(engine_fail)?;
        }
        get_mut(s, win)?.post_group = Some(ranks);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_start(g: MPI_Group, _assert: c_int, win: MPI_Win) -> c_int {
    win_call("MPI_Win_start", win, |s| {
        let ranks = window_ranks(s, win, g)?;
        let w = get(s, win)?;
        if w.start_group.is_some() {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_start twice without MPI_Win_complete",
            ));
        }
        if w.lock_all || w.locks.iter().any(|&l| l != LockHeld::No) {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_start inside a lock epoch (unlock first)",
            ));
        }
        let comm = w.comm;
        let group = ranks.clone();
        notices_then(s, comm, &ranks, TAG_POST, move |s| {
            get_mut(s, win)?.start_group = Some(group.clone());
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_complete(win: MPI_Win) -> c_int {
    win_call("MPI_Win_complete", win, |s| {
        let Some(ranks) = get(s, win)?.start_group.clone() else {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_complete without MPI_Win_start",
            ));
        };
        let finish = move |s: &mut State| {
            let comm = get(s, win)?.comm;
            for &r in &ranks {
                s.rt.send(comm, r, TAG_COMPLETE, &[]).map_err(engine_fail)?;
            }
            get_mut(s, win)?.start_group = None;
            Ok(())
        };
        ops_then(s, win, None, None, finish)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Win_wait(win: MPI_Win) -> c_int {
    win_call("MPI_Win_wait", win, |s| {
        let Some(ranks) = get(s, win)?.post_group.clone() else {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_wait without MPI_Win_post",
            ));
        };
        let comm = get(s, win)?.comm;
        notices_then(s, comm, &ranks, TAG_COMPLETE, move |s| {
            get_mut(s, win)?.post_group = None;
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
        let Some(ranks) = get(s, win)?.post_group.clone() else {
            return Err(win_fail(
                ErrorClass::RmaSync,
                "MPI_Win_test without MPI_Win_post",
            ));
        };
        let comm = get(s, win)?.comm;
        let mut all = true;
        for &r in &ranks {
            if s.rt
                .iprobe(comm, Some(r), Some(TAG_COMPLETE))
                .map_err(engine_fail)?
                .is_none()
            {
                all = false;
                break;
            }
        }
        if all {
            for &r in &ranks {
                s.rt.recv(comm, Some(r), Some(TAG_COMPLETE), &mut [])
                    .map_err(engine_fail)?;
            }
            get_mut(s, win)?.post_group = None;
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
        let members = get(s, win)?.group.clone();
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
        MPI_WIN_BASE => Some(w.base as *mut c_void),
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
/// Where segments of a noncontiguous shared window start: page boundaries,
/// so that no two members' segments share a page (nor a cache line).
const NONCONTIG_ALIGN: usize = 4096;

/// Whether info `h` (or MPI_INFO_NULL) sets `key` to "true".
fn info_true(s: &State, h: MPI_Info, key: &str) -> Result<bool, Fail> {
    if h == MPI_INFO_NULL {
        return Ok(false);
    }
    Ok(info::pairs(s, h)?
        .iter()
        .any(|(k, v)| k == key && v.trim().eq_ignore_ascii_case("true")))
}

/// How [`share_memory`] is asked to share a window's memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sharing {
    /// MPI_Win_allocate_shared: the memory must be shared; members on
    /// different hosts, or memory that cannot be made, are errors.
    Required,
    /// MPI_Win_allocate: shared only to let operations go direct, when every
    /// member can; otherwise (other hosts, `rma_direct=0`, memory that
    /// cannot be mapped) each member allocates its own.
    ForDirect,
}

/// Makes the memory of a shared window on `wcomm` (collective): checks that
/// every member is on this host, lays out the lock words and the segments
/// (contiguous unless some member asked for `noncontig`), has the first
/// member make one memory file for them all and every member map it.
/// `direct`: this member may do operations as loads and stores (they are
/// direct only if every member may). All members return the same outcome;
/// `None` when `ForDirect` sharing was not possible.
fn share_memory(
    s: &mut State,
    wcomm: CommId,
    size: usize,
    noncontig: bool,
    direct: bool,
    sharing: Sharing,
) -> Result<Option<Shared>, Fail> {
    let c = s.rt.comm(wcomm).map_err(engine_fail)?;
    let (me, n) = (c.rank as usize, c.size() as usize);
    let all =
        s.rt.allgather_u64(
            wcomm,
            &[
                crate::host::identity(),
                size as u64,
                noncontig as u64,
                direct as u64,
            ],
        )
        .map_err(engine_fail)?;
    let members: Vec<&[u64]> = all.chunks_exact(4).collect();
    let direct = members.iter().all(|m| m[3] != 0);
    if let Some(r) = members.iter().position(|m| m[0] != members[0][0]) {
        if sharing == Sharing::ForDirect {
            return Ok(None);
        }
        return Err(win_fail(
            ErrorClass::RmaShared,
            format!(
                "MPI_Win_allocate_shared: ranks 0 and {r} of the communicator are on different \
                 hosts (use MPI_Comm_split_type with MPI_COMM_TYPE_SHARED)"
            ),
        ));
    }
    if sharing == Sharing::ForDirect && !direct {
        return Ok(None);
    }
    let noncontig = members.iter().any(|m| m[2] != 0);
    let mut segments = Vec::with_capacity(n);
    // The lock words come first, a page of them at least, so that segments
    // start on a page boundary.
    let mut end = n
        .checked_mul(CTRL_STRIDE)
        .and_then(|b| b.checked_next_multiple_of(NONCONTIG_ALIGN))
        .ok_or_else(|| win_fail(ErrorClass::Size, "shared window too large"))?;
    for m in &members {
        let start = if noncontig {
            end.checked_next_multiple_of(NONCONTIG_ALIGN)
        } else {
            Some(end)
        };
        let len = usize::try_from(m[1]).ok();
        let next = start.zip(len).and_then(|(a, b)| a.checked_add(b));
        let (Some(start), Some(len), Some(next)) = (start, len, next) else {
            return Err(win_fail(ErrorClass::Size, "shared window too large"));
        };
        segments.push((start, len));
        end = next;
    }
    // The first member makes the file and says where it is; the others map
    // it through /proc. Whoever fails says so in the second exchange, so
    // that every member fails alike.
    let mut error: Option<String> = None;
    let mut map: Option<SharedMapping> = None;
    let mut file = None;
    if me == 0 {
        match memfd(c"tandem-win-shared", end).and_then(|f| {
            let m = SharedMapping::new(std::os::fd::AsRawFd::as_raw_fd(&f), end)?;
            Ok((f, m))
        }) {
            Ok((f, m)) => {
                file = Some(f);
                map = Some(m);
            }
            Err(e) => error = Some(format!("cannot make a memory file of {end} bytes: {e}")),
        }
    }
    let place = [
        u64::from(std::process::id()),
        file.as_ref()
            .map_or(u64::MAX, |f| std::os::fd::AsRawFd::as_raw_fd(f) as u64),
    ];
    let places = s.rt.allgather_u64(wcomm, &place).map_err(engine_fail)?;
    if me != 0 {
        let (pid, fd) = (places[0], places[1]);
        if fd == u64::MAX {
            error = Some("rank 0 could not make the memory".into());
        } else {
            match SharedMapping::of_process(pid as u32, fd as i32, end) {
                Ok(m) => map = Some(m),
                Err(e) => {
                    error = Some(format!(
                        "cannot map rank 0's memory file (/proc/{pid}/fd/{fd}): {e}"
                    ))
                }
            }
        }
    }
    let oks =
        s.rt.allgather_u64(wcomm, &[u64::from(error.is_none())])
            .map_err(engine_fail)?;
    // Every member has mapped the file (or failed): its descriptor can go,
    // the mappings keep the memory.
    drop(file);
    let failed = oks.iter().position(|&ok| ok == 0);
    match (map, failed) {
        (Some(map), None) => Ok(Some(Shared {
            map,
            segments,
            direct,
        })),
        _ if sharing == Sharing::ForDirect => Ok(None),
        (_, Some(r)) => Err(win_fail(
            ErrorClass::RmaShared,
            format!(
                "MPI_Win_allocate_shared: {}",
                error.unwrap_or_else(|| format!("rank {r} could not map the window's memory"))
            ),
        )),
        (None, None) => Err(win_fail(
            ErrorClass::Intern,
            "MPI_Win_allocate_shared: no mapping, and no member failed",
        )),
    }
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
        let wcomm = s.rt.comm_dup(cid).map_err(engine_fail)?;
        // Members reached by TCP (`transports=tcp`) could not wake a rank
        // asleep on a lock word: their operations keep the engine.
        let direct = match all_on_shm(s, wcomm) {
            Ok(all) => all && s.rt.settings().bool("rma_direct"),
            Err(f) => {
                let _ = s.rt.comm_free(wcomm);
                return Err(f);
            }
        };
        let shared = match share_memory(
            s,
            wcomm,
            size as usize,
            noncontig,
            direct,
            Sharing::Required,
        ) {
            Ok(Some(m)) => m,
            Ok(None) => unreachable!("required sharing either shares or fails"),
            Err(f) => {
                let _ = s.rt.comm_free(wcomm);
                return Err(f);
            }
        };
        let me = s.rt.comm(wcomm).map_err(engine_fail)?.rank as usize;
        let base = shared.address(me);
        let h = create_on(
            s,
            wcomm,
            comm,
            base.cast(),
            size as usize,
            disp_unit as usize,
            MPI_WIN_FLAVOR_SHARED,
            None,
            Some(shared),
        )?;
        // SAFETY: checked non-null; baseptr points to a `void *` (MPI).
        unsafe {
            put(baseptr.cast::<*mut c_void>(), base);
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
        w.targets.iter().position(|t| t.size > 0).unwrap_or(0)
    } else {
        match target_rank(w, rank)? {
            Some(t) => t as usize,
            None => unreachable!("MPI_PROC_NULL handled above"),
        }
    };
    let tg = w.targets[t];
    // Windows from MPI_Win_allocate may share memory too (see
    // `allocate_on`), but only for the library's own use.
    match w
        .shared
        .as_ref()
        .filter(|_| w.flavor == MPI_WIN_FLAVOR_SHARED)
    {
        Some(sh) => Ok((tg.size, tg.disp_unit, sh.address(t))),
        None => {
            let me = s.rt.comm(w.comm).map_err(engine_fail)?.rank as usize;
            if t == me && w.flavor != MPI_WIN_FLAVOR_DYNAMIC && tg.size > 0 {
                Ok((tg.size, tg.disp_unit, w.base as *mut c_void))
            } else {
                Ok((0, tg.disp_unit, std::ptr::null_mut()))
            }
        }
    }
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

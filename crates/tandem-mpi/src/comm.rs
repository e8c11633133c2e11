//! Communicator management: `MPI_Comm_dup` (attributes copied by their
//! callbacks, topology kept), `MPI_Comm_free` (delete callbacks run),
//! `MPI_Comm_split`, `MPI_Comm_split_type`, `MPI_Comm_create`,
//! `MPI_Comm_compare`, names, `MPI_Comm_idup`. New context ids are agreed
//! over the parent by the runtime (tandem::coll::agree). Dup, free, split,
//! compare and create take intercommunicators too (intercomm.rs has the
//! rest); idup, create_group and split_type refuse them.
#![allow(clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int};
use std::sync::Arc;

use tandem::{CommId, ErrorClass};

use crate::abi::*;
use crate::args::{self, put};
use crate::comm_shape;
use crate::datatype::{read_name, write_name};
use crate::ext::CommExt;
use crate::state::{self, call, Fail, State};
use crate::{attr, group, info, request};

/// Registers a new runtime communicator with the parent's error handler
/// and the given extras; returns its handle.
pub fn register(s: &mut State, parent: CommId, new: Option<CommId>, ext: CommExt) -> MPI_Comm {
    match new {
        None => MPI_COMM_NULL,
        Some(id) => {
            let (errh, session) = {
                let p = s.entry(parent);
                (p.errhandler, p.session)
            };
            let h = s.add_comm(id, errh);
            let e = s.entry(id);
            e.ext = ext;
            e.session = session;
            h
        }
    }
}

/// Frees a communicator the application never saw or that a failed call
/// made (no attributes, no callbacks).
pub fn discard(s: &mut State, h: MPI_Comm) {
    if let Ok(id) = args::comm(s, h) {
        let _ = s.rt.comm_free(id);
        s.remove_comm(id);
    }
}

/// Registers `new`, a duplicate of `parent`, with the parent's error
/// handler and topology.
pub fn register_duplicate(s: &mut State, parent: CommId, new: CommId) -> MPI_Comm {
    let topo = s.entry(parent).ext.topo.clone();
    register(
        s,
        parent,
        Some(new),
        CommExt {
            topo,
            ..CommExt::default()
        },
    )
}

fn fail(comm: MPI_Comm) -> impl Fn(tandem::Error) -> Fail {
    move |error| Fail { comm, error }
}

/// Duplicates `comm` into `*newcomm`; its attributes are copied by their
/// callbacks, outside the library (see attr.rs).
fn dup(
    func: &'static str,
    comm: MPI_Comm,
    info_: Option<MPI_Info>,
    newcomm: *mut MPI_Comm,
) -> c_int {
    if state::multiple() {
        return dup_letting_others_in(func, comm, info_, newcomm);
    }
    attr::duplicate(
        func,
        attr::Kind::Comm,
        comm,
        |s| {
            if let Some(i) = info_ {
                info::check_optional(s, i)?;
            }
            args::out_ptr(comm, newcomm, "newcomm")?;
            let id = args::comm(s, comm)?;
            let new = s.rt.comm_dup(id).map_err(fail(comm))?;
            let h = register_duplicate(s, id, new);
            // SAFETY: checked non-null.
            unsafe { put(newcomm, h) };
            Ok(h)
        },
        |s, h| {
            discard(s, h);
            // SAFETY: checked non-null before the duplicate was made.
            unsafe { put(newcomm, MPI_COMM_NULL) };
        },
    )
}

/// [`dup`] under `MPI_THREAD_MULTIPLE`: an idup waited for, so that the
/// wait for the other members lets other threads in (see
/// `state::block_on`; a thread of another member may be waiting for a
/// message from one of this rank's before it joins). Attributes are copied
/// before the wait, as for `MPI_Comm_idup`.
fn dup_letting_others_in(
    func: &'static str,
    comm: MPI_Comm,
    info_: Option<MPI_Info>,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let mut req = MPI_REQUEST_NULL;
    let rc = idup(func, comm, info_, newcomm, &mut req);
    if rc != MPI_SUCCESS {
        return rc;
    }
    call(func, move |s| {
        let r = request::classify(s, req)?;
        crate::pt2pt::wait_then(s, vec![r], true, move |s| {
            let done = request::complete(s, r);
            let Some(f) = done.error() else {
                return Ok(());
            };
            // Never agreed on: the duplicate goes.
            // SAFETY: checked non-null by `idup`, which wrote the handle.
            unsafe {
                discard(s, *newcomm);
                put(newcomm, MPI_COMM_NULL);
            }
            Err(f)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    dup("MPI_Comm_dup", comm, None, newcomm)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_dup_with_info(
    comm: MPI_Comm,
    info_: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    dup("MPI_Comm_dup_with_info", comm, Some(info_), newcomm)
}

/// The communicator `*comm` names, if `comm` is not null and it is not a
/// predefined one.
fn freeable(comm: *mut MPI_Comm) -> Result<MPI_Comm, Fail> {
    args::out_ptr(MPI_COMM_WORLD, comm, "comm")?;
    // SAFETY: checked non-null.
    let h = unsafe { *comm };
    if h == MPI_COMM_WORLD || h == MPI_COMM_SELF {
        return Err(Fail::new(
            h,
            ErrorClass::Comm,
            "predefined communicators cannot be freed",
        ));
    }
    Ok(h)
}

/// `MPI_Comm_idup`: the new handle at once (usable once the request
/// completes), attributes copied now by their callbacks (outside the
/// library, see attr.rs), the context id agreed by a schedule on the parent
/// (ordered with its other collectives).
fn idup(
    func: &'static str,
    comm: MPI_Comm,
    info_: Option<MPI_Info>,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let req = std::cell::Cell::new(MPI_REQUEST_NULL);
    attr::duplicate(
        func,
        attr::Kind::Comm,
        comm,
        |s| {
            if let Some(i) = info_ {
                info::check_optional(s, i)?;
            }
            args::out_ptr(comm, newcomm, "newcomm")?;
            args::out_ptr(comm, request, "request")?;
            let id = args::comm(s, comm)?;
            let (new, sched) = s.rt.comm_idup(id).map_err(fail(comm))?;
            let h = register_duplicate(s, id, new);
            let r = request::handle(s, comm, request::Op::Coll(sched));
            req.set(r);
            // SAFETY: both checked non-null.
            unsafe {
                put(newcomm, h);
                put(request, r);
            }
            Ok(h)
        },
        |s, _| {
            // A copy callback failed. The other members still need this
            // rank's part of the agreement: the schedule runs on, freed.
            if let Ok(r) = request::classify(s, req.get()) {
                let _ = request::free(s, r);
            }
            // SAFETY: both checked non-null before the duplicate was made.
            unsafe {
                put(newcomm, MPI_COMM_NULL);
                put(request, MPI_REQUEST_NULL);
            }
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_idup(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    idup("MPI_Comm_idup", comm, None, newcomm, request)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_idup_with_info(
    comm: MPI_Comm,
    info_: MPI_Info,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    idup(
        "MPI_Comm_idup_with_info",
        comm,
        Some(info_),
        newcomm,
        request,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    let h = if comm.is_null() {
        MPI_COMM_NULL
    } else {
        // SAFETY: checked non-null.
        unsafe { *comm }
    };
    // Delete callbacks run first, outside the library (see attr.rs).
    attr::free_object(
        "MPI_Comm_free",
        attr::Kind::Comm,
        h,
        |s| {
            freeable(comm)?;
            args::comm(s, h).map(drop)
        },
        |s| {
            let h = freeable(comm)?;
            let id = args::comm(s, h)?;
            let ctx = s.rt.comm(id).map_err(fail(h))?.coll_context();
            s.rt.comm_free(id).map_err(fail(h))?;
            s.remove_comm(id);
            crate::bsend::forget_comm(s, h);
            crate::part::forget_context(ctx);
            // SAFETY: checked non-null.
            unsafe { put(comm, MPI_COMM_NULL) };
            Ok(())
        },
    )
}

fn split(
    s: &mut State,
    comm: MPI_Comm,
    color: Option<u32>,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> Result<(), Fail> {
    args::out_ptr(comm, newcomm, "newcomm")?;
    let id = args::comm(s, comm)?;
    if state::multiple() && !s.rt.comm(id).map_err(fail(comm))?.is_inter() {
        return split_letting_others_in(s, comm, id, color, key, newcomm, CommExt::default());
    }
    split_now(s, comm, color, key, newcomm)
}

/// [`split`] waiting to the end, whatever the thread level (for callers
/// that look at the result within the same call).
fn split_now(
    s: &mut State,
    comm: MPI_Comm,
    color: Option<u32>,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> Result<(), Fail> {
    args::out_ptr(comm, newcomm, "newcomm")?;
    let id = args::comm(s, comm)?;
    let new = s.rt.comm_split(id, color, key).map_err(fail(comm))?;
    let h = register(s, id, new, CommExt::default());
    // SAFETY: checked non-null.
    unsafe { put(newcomm, h) };
    Ok(())
}

/// Where a communicator made under `MPI_THREAD_MULTIPLE` stands: its waits
/// let other threads in (see `state::block_on`).
enum Making {
    /// A split's allgather of every member's color and key.
    Gathering(tandem::coll::SchedId),
    /// The agreement on the new communicator's context id.
    Agreeing(tandem::group::CommMaking),
}

/// [`split`] of an intracommunicator under `MPI_THREAD_MULTIPLE`: its
/// allgather and its agreement are started collectives waited for, so a
/// split does not keep out the thread that sends what another member waits
/// for before it joins. The new communicator gets `ext` (`MPI_Cart_sub`: its
/// topology). Must end the call (see `state::block_on`).
pub(crate) fn split_letting_others_in(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    color: Option<u32>,
    key: c_int,
    newcomm: *mut MPI_Comm,
    ext: CommExt,
) -> Result<(), Fail> {
    let mine = Box::new(tandem::group::split_entry(color, key));
    let n = s.rt.comm(id).map_err(fail(comm))?.size() as usize;
    let mut all = vec![0u8; tandem::group::SPLIT_ENTRY * n];
    // SAFETY: both buffers move into the wait below, which keeps them (their
    // heap memory stays put) until it has seen the schedule complete.
    let sid = unsafe { s.rt.comm_split_start(id, &mine, &mut all) }.map_err(fail(comm))?;
    let gathered = move |s: &mut State| {
        let _keep = &mine;
        let members = s.rt.split_members(id, color, &all)?;
        s.rt.comm_from_group_start(id, members)
    };
    made_letting_others_in(s, comm, id, newcomm, Making::Gathering(sid), gathered, ext)
}

/// The communicator of `members` (`None`: this rank is not one) made over
/// intracommunicator `id` under `MPI_THREAD_MULTIPLE`: its agreement lets
/// other threads in (see [`split_letting_others_in`]). Registered with
/// `ext` as `*newcomm`; must end the call (see `state::block_on`).
pub(crate) fn from_group_letting_others_in(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    members: Option<Arc<[u32]>>,
    newcomm: *mut MPI_Comm,
    ext: CommExt,
) -> Result<(), Fail> {
    let m =
        s.rt.comm_from_group_start(id, members)
            .map_err(fail(comm))?;
    let never = |_: &mut State| -> tandem::Result<tandem::group::CommMaking> {
        Err(tandem::Error::new(
            ErrorClass::Intern,
            "a communicator made from a group has no allgather",
        ))
    };
    made_letting_others_in(s, comm, id, newcomm, Making::Agreeing(m), never, ext)
}

/// A duplicate of intracommunicator `id`, registered with `ext` as
/// `*newcomm` (the distributed-graph constructors). Under
/// `MPI_THREAD_MULTIPLE` an idup whose wait lets other threads in; must
/// end the call (see `state::block_on`).
pub(crate) fn dup_with_ext(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    newcomm: *mut MPI_Comm,
    ext: CommExt,
) -> Result<(), Fail> {
    if !state::multiple() {
        let new = s.rt.comm_dup(id).map_err(fail(comm))?;
        let h = register(s, id, Some(new), ext);
        // SAFETY: checked non-null by the caller.
        unsafe { put(newcomm, h) };
        return Ok(());
    }
    let (new, sched) = s.rt.comm_idup(id).map_err(fail(comm))?;
    let h = register(s, id, Some(new), ext);
    state::block_on(s, move |s, may_end| {
        match crate::coll::sched_done(s, sched, may_end)? {
            Ok(()) => {
                // SAFETY: checked non-null by the caller.
                unsafe { put(newcomm, h) };
                Some(Ok(()))
            }
            Err(e) => {
                // Never agreed on: the duplicate goes.
                discard(s, h);
                Some(Err(fail(comm)(e)))
            }
        }
    })
}

/// Waits, letting other threads in (see `state::block_on`), until the
/// communicator being made over `id` is done, and registers it, with
/// `ext`, as `*newcomm` (`MPI_COMM_NULL` where this rank is not in it).
/// `gathered` starts the agreement once a split's allgather is done.
fn made_letting_others_in(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    newcomm: *mut MPI_Comm,
    at: Making,
    mut gathered: impl FnMut(&mut State) -> tandem::Result<tandem::group::CommMaking> + 'static,
    ext: CommExt,
) -> Result<(), Fail> {
    let mut at = Some(at);
    let mut ext = Some(ext);
    state::block_on(s, move |s, may_end| loop {
        let sid = match at.as_ref().expect("run until it ends, not after") {
            Making::Gathering(sid) => *sid,
            Making::Agreeing(m) => m.sched,
        };
        if !crate::coll::sched_waited(s, sid, may_end) {
            return None;
        }
        match at.take().expect("looked at above") {
            Making::Gathering(sid) => match s.rt.coll_wait(sid).and_then(|()| gathered(s)) {
                Ok(m) => at = Some(Making::Agreeing(m)),
                Err(e) => return Some(Err(fail(comm)(e))),
            },
            Making::Agreeing(m) => {
                let new = match s.rt.comm_made(m) {
                    Ok(new) => new,
                    Err(e) => return Some(Err(fail(comm)(e))),
                };
                let h = register(s, id, new, ext.take().unwrap_or_default());
                // SAFETY: checked non-null before the wait began.
                unsafe { put(newcomm, h) };
                return Some(Ok(()));
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_split", |s| {
        let color = match color {
            MPI_UNDEFINED => None,
            c if c >= 0 => Some(c as u32),
            c => {
                return Err(Fail::new(
                    comm,
                    ErrorClass::Arg,
                    format!("invalid color {c}"),
                ))
            }
        };
        split(s, comm, color, key, newcomm)
    })
}

/// The info key naming a hardware resource type (MPI_Comm_split_type).
const HW_RESOURCE_KEY: &str = "mpi_hw_resource_type";
/// The resource type the standard reserves for "the ranks sharing memory".
const SHARED_MEMORY_RESOURCE: &str = "mpi_shared_memory";

/// This host's color for `MPI_COMM_TYPE_SHARED`: its identity (the one
/// shared windows check) folded into a non-negative int.
fn host_color() -> u32 {
    let id = crate::host::identity();
    (id ^ id >> 32) as u32 & 0x7fff_ffff
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_split_type(
    comm: MPI_Comm,
    split_type: c_int,
    key: c_int,
    info_: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_split_type", |s| {
        // An intercommunicator splits as MPI_Comm_split splits one: each
        // part is an intercommunicator between the parts of both groups of
        // the same color (MPICH does the same).
        let id = args::comm(s, comm)?;
        let inter = s.rt.comm(id).map_err(fail(comm))?.is_inter();
        info::check_optional(s, info_)?;
        // The only hardware level Tandem knows is the host (shared memory).
        let hinted = || -> Result<Option<String>, Fail> {
            if info_ == MPI_INFO_NULL {
                return Ok(None);
            }
            Ok(info::pairs(s, info_)?
                .into_iter()
                .find(|(k, _)| k == HW_RESOURCE_KEY)
                .map(|(_, v)| v))
        };
        match split_type {
            MPI_UNDEFINED => split(s, comm, None, key, newcomm),
            MPI_COMM_TYPE_SHARED => split(s, comm, Some(host_color()), key, newcomm),
            // Guided: a resource type the implementation does not know, or
            // none, gives MPI_COMM_NULL (the standard's rule); the reserved
            // "mpi_shared_memory" is the host.
            MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED => {
                let color = (hinted()?.as_deref() == Some(SHARED_MEMORY_RESOURCE)).then(host_color);
                split(s, comm, color, key, newcomm)
            }
            // Unguided: each part must be a strict subset of `comm`, else
            // MPI_COMM_NULL; the info object names the level used.
            MPI_COMM_TYPE_HW_UNGUIDED if inter => Err(Fail::new(
                comm,
                ErrorClass::Comm,
                "MPI_COMM_TYPE_HW_UNGUIDED needs an intracommunicator (its parts must be \
                 strict subsets of one group)",
            )),
            MPI_COMM_TYPE_HW_UNGUIDED => {
                // Looked at at once below: waited for to the end.
                split_now(s, comm, Some(host_color()), key, newcomm)?;
                // SAFETY: `split` checked it non-null and wrote it.
                let part = unsafe { *newcomm };
                let part_id = args::comm(s, part)?;
                let part_size = s.rt.comm(part_id).map_err(fail(part))?.size();
                let whole = s.rt.comm(args::comm(s, comm)?).map_err(fail(comm))?.size();
                if part_size == whole {
                    // Same on every rank of `comm`: one host holds them all.
                    // The new communicator has no attributes yet.
                    s.rt.comm_free(part_id).map_err(fail(comm))?;
                    s.remove_comm(part_id);
                    // SAFETY: checked non-null by `split`.
                    unsafe { put(newcomm, MPI_COMM_NULL) };
                } else if info_ != MPI_INFO_NULL {
                    info::set_pair(
                        s,
                        info_,
                        HW_RESOURCE_KEY.into(),
                        SHARED_MEMORY_RESOURCE.into(),
                    )?;
                }
                Ok(())
            }
            t => Err(Fail::new(
                comm,
                ErrorClass::Arg,
                format!("unsupported split type {t}"),
            )),
        }
    })
}

/// The members of `group_`, which must all belong to communicator `comm`
/// (`id`), as MPI_Comm_create and MPI_Comm_create_group require.
fn subgroup(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    group_: MPI_Group,
) -> Result<Arc<[u32]>, Fail> {
    let g = group::members(s, group_).map_err(|f| Fail { comm, ..f })?;
    let parent = s.rt.comm(id).map_err(fail(comm))?.group.clone();
    if let Some(w) = g.iter().find(|w| !parent.contains(w)) {
        return Err(Fail::new(
            comm,
            ErrorClass::Group,
            format!("world rank {w} of the group is not in the communicator"),
        ));
    }
    Ok(g)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create(
    comm: MPI_Comm,
    group_: MPI_Group,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_create", |s| {
        args::out_ptr(comm, newcomm, "newcomm")?;
        let id = args::comm(s, comm)?;
        // On an intercommunicator the group is a part of the local group.
        let g = subgroup(s, comm, id, group_)?;
        let inter = s.rt.comm(id).map_err(fail(comm))?.is_inter();
        if !inter && state::multiple() {
            let members = g.contains(&s.rt.rank()).then(|| g.clone());
            return from_group_letting_others_in(s, comm, id, members, newcomm, CommExt::default());
        }
        let new = if inter {
            s.rt.intercomm_create_sub(id, g)
        } else {
            let me = s.rt.rank();
            let members = g.contains(&me).then(|| g.clone());
            s.rt.comm_from_group(id, members)
        }
        .map_err(fail(comm))?;
        let h = register(s, id, new, CommExt::default());
        // SAFETY: checked non-null.
        unsafe { put(newcomm, h) };
        Ok(())
    })
}

/// `MPI_Comm_create_group` of a member: the members' agreement is stepped
/// through a wait that lets other threads in under
/// `MPI_THREAD_MULTIPLE`. Must end the call.
fn create_group_letting_others_in(
    s: &mut State,
    comm: MPI_Comm,
    id: CommId,
    members: Arc<[u32]>,
    tag: i32,
    newcomm: *mut MPI_Comm,
) -> Result<(), Fail> {
    let making =
        s.rt.comm_create_group_start(id, members, tag)
            .map_err(fail(comm))?;
    group_made_letting_others_in(s, making, comm, newcomm, move |s, new| {
        register(s, id, Some(new), CommExt::default())
    })
}

/// Steps a communicator's agreement among a group's members
/// (`MPI_Comm_create_group`, `MPI_Comm_create_from_group`) through a wait
/// that lets other threads in under `MPI_THREAD_MULTIPLE` (see
/// `state::block_on`; in the other thread levels it waits to the end);
/// `register` makes the new communicator's handle, put in `*newcomm`.
/// Errors name `comm`. Must end the call.
pub(crate) fn group_made_letting_others_in(
    s: &mut State,
    making: tandem::group::GroupMaking,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    register: impl FnOnce(&mut State, CommId) -> MPI_Comm + 'static,
) -> Result<(), Fail> {
    let mut making = Some(making);
    let mut register = Some(register);
    state::block_on(s, move |s, may_end| {
        let m = making.as_mut().expect("run until it ends, not after");
        match s.rt.group_making_waited(m, may_end) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(fail(comm)(e))),
        }
        let m = making.take().expect("looked at above");
        let new = match s.rt.comm_group_made(m) {
            Ok(new) => new,
            Err(e) => return Some(Err(fail(comm)(e))),
        };
        let h = register.take().expect("registered once")(s, new);
        // SAFETY: checked non-null before the wait began.
        unsafe { put(newcomm, h) };
        Some(Ok(()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_create_group(
    comm: MPI_Comm,
    group_: MPI_Group,
    tag: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    call("MPI_Comm_create_group", |s| {
        args::out_ptr(comm, newcomm, "newcomm")?;
        let id = args::intra_comm(s, comm)?;
        let g = subgroup(s, comm, id, group_)?;
        let tag = args::send_tag(comm, tag)?;
        // Only the group's members take part; others get MPI_COMM_NULL.
        if g.contains(&s.rt.rank()) {
            return create_group_letting_others_in(s, comm, id, g, tag, newcomm);
        }
        let h = register(s, id, None, CommExt::default());
        // SAFETY: checked non-null.
        unsafe { put(newcomm, h) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_compare(
    comm1: MPI_Comm,
    comm2: MPI_Comm,
    result: *mut c_int,
) -> c_int {
    call("MPI_Comm_compare", |s| {
        args::out_ptr(comm1, result, "result")?;
        let (a, b) = (args::comm(s, comm1)?, args::comm(s, comm2)?);
        let r = if comm1 == comm2 {
            MPI_IDENT
        } else {
            let ca = s.rt.comm(a).map_err(fail(comm1))?;
            let cb = s.rt.comm(b).map_err(fail(comm2))?;
            // Intercommunicators compare both their groups, pairwise (the
            // remote groups of intracommunicators are their groups again).
            let local = group::compare(&ca.group, &cb.group);
            let remote = group::compare(ca.peers(), cb.peers());
            match (ca.is_inter() == cb.is_inter(), local.max(remote)) {
                (false, _) => MPI_UNEQUAL,
                (true, MPI_IDENT) => MPI_CONGRUENT,
                (true, worst) => worst,
            }
        };
        // SAFETY: checked non-null.
        unsafe { put(result, r) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_name(comm: MPI_Comm, name: *const c_char) -> c_int {
    call("MPI_Comm_set_name", |s| {
        let id = args::comm(s, comm)?;
        args::out_ptr(comm, name as *mut c_char, "name")?;
        // SAFETY: checked non-null; a C string by the MPI contract.
        let text = unsafe { read_name(name) };
        s.entry(id).ext.name = text;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_name(
    comm: MPI_Comm,
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Comm_get_name", |s| {
        // MPI-4.1: the null handle has a name too.
        if comm == MPI_COMM_NULL {
            return write_name("MPI_COMM_NULL", name, resultlen);
        }
        let id = args::comm(s, comm)?;
        let mut text = s.entry(id).ext.name.clone();
        if text.is_empty() {
            text = match comm {
                MPI_COMM_WORLD => "MPI_COMM_WORLD".into(),
                MPI_COMM_SELF => "MPI_COMM_SELF".into(),
                _ => String::new(),
            };
        }
        write_name(&text, name, resultlen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_test_inter(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    let answer = move |inter: bool| {
        args::out_ptr(comm, flag, "flag")?;
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(inter)) };
        Ok(())
    };
    comm_shape::query(
        "MPI_Comm_test_inter",
        comm,
        |shape| answer(shape.remote_size.is_some()),
        |s| {
            let id = args::comm(s, comm)?;
            answer(s.rt.comm(id).map_err(fail(comm))?.is_inter())
        },
    )
}

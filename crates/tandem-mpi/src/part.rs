//! Partitioned communication (MPI-4.0 chapter 4): `MPI_Psend_init`,
//! `MPI_Precv_init` (and `_c`), `MPI_Pready`, `_range`, `_list`,
//! `MPI_Parrived`.
//!
//! A partitioned request is a persistent request (persistent.rs): each
//! `MPI_Start` begins a round, `MPI_Wait`/`MPI_Test` complete it and leave
//! it inactive, `MPI_Request_free` releases it. The design is the simple
//! one the standard allows: the whole buffer travels as one message,
//! sent when the last partition is marked ready. Sender and receiver may
//! split the same buffer into different numbers of partitions (the
//! standard lets them), which one message handles without any mapping;
//! sending each partition on its own would cost a message per partition
//! and need that mapping. The price: `MPI_Parrived` reports a partition
//! once the whole message is there (correct, since the data of a partition
//! is then in place, but never earlier).
//!
//! The message goes in the communicator's collective context, apart from
//! the application's point-to-point messages, in the tag range the core
//! keeps for it (`tandem::group::partitioned_tag`, above the collectives'
//! and `MPI_Comm_create_group`'s): a partitioned message can match only a
//! partitioned receive with the same source and tag. The standard matches
//! partitioned requests in the order of their initialisations, whatever
//! the order of the starts: the k-th `MPI_Psend_init` from a rank to
//! another with a tag on a communicator matches the k-th `MPI_Precv_init`
//! there, so each side numbers them (by context, peer and tag) and the
//! message tag carries the number beside the tag: 20 bits of tag and 9 of
//! number, so tags 2^20 apart, or requests 512 apart, could be confused if
//! in flight together. Successive rounds of one request match in order.
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use std::collections::BTreeMap;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

use tandem::p2p::{Envelope, SendMode, Status};
use tandem::ErrorClass;

use crate::abi::*;
use crate::args::{self, put, Source};
use crate::datatype::Typed;
use crate::info;
use crate::persistent::Spec;
use crate::request::{self, Op};
use crate::state::{call, Fail, State};
use crate::xfer;

/// A round of a partitioned request in flight.
pub struct Round {
    /// Send side: which partitions are ready; `None` once all are and the
    /// message is on its way (and always on the receive side).
    pub ready: Option<Vec<bool>>,
    /// The transfer, once started.
    pub inner: Option<Box<Op>>,
    /// The application's tag (see [`wire_tag`]).
    pub tag: i32,
}

impl Round {
    /// The status the application sees: its own tag.
    pub fn outer_status(&self, mut st: Status) -> Status {
        if st.tag.is_some() {
            st.tag = Some(self.tag);
        }
        st
    }
}

/// The tag a partitioned message carries: the tag and the request's
/// initialisation number (see the module comment).
fn wire_tag(tag: i32, seq: u32) -> i32 {
    tandem::group::partitioned_tag((tag & 0xf_ffff) | (((seq & 0x1ff) as i32) << 20))
}

/// Forgets the initialisation counts of a context being freed: a later
/// communicator may reuse its id with other members, whose counts start at 0.
pub fn forget_context(ctx: u32) {
    INITS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&(c, ..), _| c != ctx);
}

/// Initialisations so far, by (context, sending side, peer, tag).
static INITS: Mutex<BTreeMap<(u32, bool, u32, i32), u32>> = Mutex::new(BTreeMap::new());

/// The number of this initialisation among those with the same context,
/// direction, peer and tag; both sides count alike.
fn next_seq(
    s: &State,
    comm: MPI_Comm,
    send: bool,
    peer: Option<u32>,
    tag: i32,
) -> Result<u32, Fail> {
    let Some(peer) = peer else { return Ok(0) };
    let id = args::comm(s, comm)?;
    let ctx =
        s.rt.comm(id)
            .map_err(|error| Fail { comm, error })?
            .coll_context();
    let mut t = INITS.lock().unwrap_or_else(|p| p.into_inner());
    let n = t.entry((ctx, send, peer, tag)).or_insert(0);
    let seq = *n;
    *n = n.wrapping_add(1);
    Ok(seq)
}

fn part_error(msg: impl Into<String>) -> Fail {
    Fail::new(MPI_COMM_WORLD, ErrorClass::Arg, msg)
}

/// The element count of the whole buffer: `partitions` of `count` each.
fn total(comm: MPI_Comm, partitions: c_int, count: i64) -> Result<(usize, c_int), Fail> {
    let p = usize::try_from(partitions)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| {
            Fail::new(
                comm,
                ErrorClass::Arg,
                format!("partitions {partitions} is not positive"),
            )
        })?;
    if count < 0 {
        return Err(Fail::new(
            comm,
            ErrorClass::Count,
            format!("negative count {count}"),
        ));
    }
    let n = count
        .checked_mul(i64::from(partitions))
        .and_then(|n| c_int::try_from(n).ok())
        .ok_or_else(|| {
            Fail::new(
                comm,
                ErrorClass::Count,
                "partitions times count is beyond 2^31 - 1 elements",
            )
        })?;
    Ok((p, n))
}

fn psend_init(
    func: &'static str,
    buf: *const c_void,
    partitions: c_int,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, request, "request")?;
        args::intra_comm(s, comm)?;
        info::check_optional(s, info_)?;
        let (parts, n) = total(comm, partitions, count)?;
        let (t, dest, tag) = xfer::send_args(s, buf, n, dt, dest, tag, comm)?;
        let seq = next_seq(s, comm, true, dest, tag)?;
        let h = s.ext.reqs.add_persistent(
            comm,
            Spec::Part {
                t,
                partitions: parts,
                peer: dest,
                tag,
                seq,
                comm,
                send: true,
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

fn precv_init(
    func: &'static str,
    buf: *mut c_void,
    partitions: c_int,
    count: i64,
    dt: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    call(func, |s| {
        args::out_ptr(comm, request, "request")?;
        args::intra_comm(s, comm)?;
        info::check_optional(s, info_)?;
        let (parts, n) = total(comm, partitions, count)?;
        let (t, src, tag) = xfer::recv_args(s, buf, n, dt, source, tag, comm)?;
        // Partitioned receives name their sender and tag.
        let peer = match src {
            Source::Any => {
                return Err(Fail::new(
                    comm,
                    ErrorClass::Rank,
                    "MPI_ANY_SOURCE is not allowed in a partitioned receive",
                ))
            }
            Source::Null => None,
            Source::Rank(r) => Some(r),
        };
        let Some(tag) = tag else {
            return Err(Fail::new(
                comm,
                ErrorClass::Tag,
                "MPI_ANY_TAG is not allowed in a partitioned receive",
            ));
        };
        let seq = next_seq(s, comm, false, peer, tag)?;
        let h = s.ext.reqs.add_persistent(
            comm,
            Spec::Part {
                t,
                partitions: parts,
                peer,
                tag,
                seq,
                comm,
                send: false,
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(request, h) };
        Ok(())
    })
}

/// Starts a round (`MPI_Start`): a receive is posted at once; a send waits
/// for its partitions.
pub fn start(
    s: &mut State,
    t: &Typed,
    partitions: usize,
    peer: Option<u32>,
    (tag, seq): (i32, u32),
    comm: MPI_Comm,
    send: bool,
) -> Result<Op, Fail> {
    args::comm(s, comm)?;
    let mut round = Round {
        ready: None,
        inner: None,
        tag,
    };
    if send {
        round.ready = Some(vec![false; partitions]);
    } else {
        round.inner = Some(Box::new(match peer {
            None => Op::Done(null_status()),
            Some(src) => post_recv(s, t, src, wire_tag(tag, seq), comm)?,
        }));
    }
    Ok(Op::Part(Box::new(round)))
}

/// The status of a transfer with `MPI_PROC_NULL`.
fn null_status() -> Status {
    Status {
        source: None,
        tag: None,
        ..Status::default()
    }
}

fn post_recv(s: &mut State, t: &Typed, src: u32, wire: i32, comm: MPI_Comm) -> Result<Op, Fail> {
    let id = args::comm(s, comm)?;
    let c = s.rt.comm(id).map_err(|error| Fail { comm, error })?;
    let (ctx, world) = (c.coll_context(), c.peer_world_rank(src));
    let filter = Some((src, world));
    Ok(match t.direct() {
        // SAFETY: the receive buffer is valid for `bytes` bytes until the
        // request completes (MPI contract).
        Some(p) => Op::P2p(unsafe { s.rt.p2p().irecv(ctx, filter, Some(wire), p, t.bytes()) }),
        None => {
            let mut staging = vec![0u8; t.bytes()];
            // SAFETY: `staging` moves into the operation with its heap
            // memory unchanged and lives until it completes.
            let inner = unsafe {
                s.rt.p2p()
                    .irecv(ctx, filter, Some(wire), staging.as_mut_ptr(), staging.len())
            };
            Op::Staged {
                inner,
                staging,
                unpack: Some(t.clone()),
            }
        }
    })
}

fn send_now(s: &mut State, t: &Typed, dest: u32, wire: i32, comm: MPI_Comm) -> Result<Op, Fail> {
    let id = args::comm(s, comm)?;
    let c = s.rt.comm(id).map_err(|error| Fail { comm, error })?;
    let env = Envelope {
        ctx: c.coll_context(),
        src: c.rank,
        tag: wire,
    };
    let world = c.peer_world_rank(dest);
    let (staging, ptr) = match t.direct() {
        Some(p) => (Vec::new(), p.cast_const()),
        None => {
            // SAFETY: every partition is ready, so the buffer holds the data
            // its datatype describes (MPI contract).
            let data = unsafe { t.pack() };
            let p = data.as_ptr();
            (data, p)
        }
    };
    // SAFETY: the user's buffer (valid until the request completes, MPI
    // contract) or `staging`, whose heap memory moves unchanged into the
    // operation and lives until it completes.
    let inner = unsafe {
        s.rt.p2p()
            .isend(env, world, ptr, t.bytes(), SendMode::Standard)
    }
    .map_err(|error| Fail { comm, error })?;
    Ok(if t.direct().is_some() {
        Op::P2p(inner)
    } else {
        Op::Staged {
            inner,
            staging,
            unpack: None,
        }
    })
}

/// The partitions an `MPI_Pready*` call names.
enum Parts<'a> {
    List(&'a [usize]),
    /// `low..=high`, built into a list only once `high` is known to be a
    /// partition (a huge range must not allocate before it is refused).
    Range(usize, usize),
}

/// Marks partitions ready (all or none: a refused call changes nothing);
/// sends once all are.
fn mark_ready(s: &mut State, h: MPI_Request, parts: Parts) -> Result<(), Fail> {
    let r = request::classify(s, h)?;
    let comm = request::comm_of(s, r);
    let (t, peer, wire, pcomm, partitions) = match s.ext.reqs.persistent(r) {
        Some((
            Spec::Part {
                t,
                partitions,
                peer,
                tag,
                seq,
                comm,
                send: true,
            },
            true,
        )) => (t.clone(), *peer, wire_tag(*tag, *seq), *comm, *partitions),
        Some((Spec::Part { send: true, .. }, false)) => {
            return Err(Fail::new(
                comm,
                ErrorClass::Request,
                "MPI_Pready on a partitioned send that is not started (MPI_Start)",
            ))
        }
        _ => {
            return Err(Fail::new(
                comm,
                ErrorClass::Request,
                format!("request {h:#x} is not a partitioned send"),
            ))
        }
    };
    let beyond = match parts {
        Parts::List(l) => l.iter().copied().find(|&p| p >= partitions),
        Parts::Range(_, high) => (high >= partitions).then_some(high),
    };
    if let Some(bad) = beyond {
        return Err(Fail::new(
            comm,
            ErrorClass::Arg,
            format!("partition {bad} is not in 0..{partitions}"),
        ));
    }
    let range: Vec<usize>;
    let parts = match parts {
        Parts::List(l) => l,
        Parts::Range(low, high) => {
            range = (low..=high).collect();
            &range
        }
    };
    let all_ready = {
        let Some(Op::Part(round)) = s.ext.reqs.active_mut(r) else {
            return Err(part_error("partitioned request without a round"));
        };
        let Some(ready) = round.ready.as_mut() else {
            return Err(Fail::new(
                comm,
                ErrorClass::Arg,
                "every partition of this round is already ready",
            ));
        };
        let mut marked = ready.clone();
        for &p in parts {
            if marked[p] {
                return Err(Fail::new(
                    comm,
                    ErrorClass::Arg,
                    format!("partition {p} is already ready in this round"),
                ));
            }
            marked[p] = true;
        }
        *ready = marked;
        ready.iter().all(|&x| x)
    };
    if all_ready {
        let inner = match peer {
            None => Op::Done(null_status()),
            Some(dest) => send_now(s, &t, dest, wire, pcomm)?,
        };
        if let Some(Op::Part(round)) = s.ext.reqs.active_mut(r) {
            round.ready = None;
            round.inner = Some(Box::new(inner));
        }
    }
    Ok(())
}

/// For `MPI_Cancel` and `MPI_Request_free` (`what`): freeing or
/// cancelling a partitioned request that is active (started and not yet
/// completed by a wait or test) is erroneous (MPI-4.1, partitioned communication). It
/// is refused with `MPI_ERR_REQUEST`: ignored, the partner would wait for
/// ever for partitions this side never marks ready, or receives.
pub(crate) fn refuse_if_active(
    s: &State,
    r: request::Req,
    h: MPI_Request,
    what: &str,
) -> Result<(), Fail> {
    match s.ext.reqs.persistent(r) {
        Some((Spec::Part { .. }, true)) => Err(Fail::new(
            request::comm_of(s, r),
            ErrorClass::Request,
            format!(
                "request {h:#x} is an active partitioned request, which cannot be {what} \
                 until a wait or test completes it"
            ),
        )),
        _ => Ok(()),
    }
}

fn partition_arg(p: c_int) -> Result<usize, Fail> {
    usize::try_from(p).map_err(|_| part_error(format!("negative partition {p}")))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Psend_init(
    buf: *const c_void,
    partitions: c_int,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    psend_init(
        "MPI_Psend_init",
        buf,
        partitions,
        count.into(),
        datatype,
        dest,
        tag,
        comm,
        info_,
        request,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Psend_init_c(
    buf: *const c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    psend_init(
        "MPI_Psend_init_c",
        buf,
        partitions,
        count,
        datatype,
        dest,
        tag,
        comm,
        info_,
        request,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Precv_init(
    buf: *mut c_void,
    partitions: c_int,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    precv_init(
        "MPI_Precv_init",
        buf,
        partitions,
        count.into(),
        datatype,
        source,
        tag,
        comm,
        info_,
        request,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Precv_init_c(
    buf: *mut c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    info_: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    precv_init(
        "MPI_Precv_init_c",
        buf,
        partitions,
        count,
        datatype,
        source,
        tag,
        comm,
        info_,
        request,
    )
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pready(partition: c_int, request: MPI_Request) -> c_int {
    call("MPI_Pready", |s| {
        let p = partition_arg(partition)?;
        mark_ready(s, request, Parts::List(&[p]))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pready_range(
    partition_low: c_int,
    partition_high: c_int,
    request: MPI_Request,
) -> c_int {
    call("MPI_Pready_range", |s| {
        let lo = partition_arg(partition_low)?;
        let hi = partition_arg(partition_high)?;
        if hi < lo {
            return Err(part_error(format!("partition range {lo}..={hi} is empty")));
        }
        mark_ready(s, request, Parts::Range(lo, hi))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Pready_list(
    length: c_int,
    array_of_partitions: *const c_int,
    request: MPI_Request,
) -> c_int {
    call("MPI_Pready_list", |s| {
        let n =
            usize::try_from(length).map_err(|_| part_error(format!("negative length {length}")))?;
        if n == 0 {
            // Nothing to mark; the request must still be a started send.
            return mark_ready(s, request, Parts::List(&[]));
        }
        args::out_ptr(
            MPI_COMM_WORLD,
            array_of_partitions.cast_mut(),
            "array_of_partitions",
        )?;
        // SAFETY: `length` entries (MPI contract).
        let given = unsafe { std::slice::from_raw_parts(array_of_partitions, n) };
        let parts = given
            .iter()
            .map(|&p| partition_arg(p))
            .collect::<Result<Vec<_>, _>>()?;
        mark_ready(s, request, Parts::List(&parts))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Parrived(
    request: MPI_Request,
    partition: c_int,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Parrived", |s| {
        args::out_ptr(MPI_COMM_WORLD, flag, "flag")?;
        // A null request, like an inactive one, has nothing to wait for
        // (MPI-4.1, partitioned communication: MPI_PARRIVED).
        if request == MPI_REQUEST_NULL {
            // SAFETY: checked non-null.
            unsafe { put(flag, 1) };
            return Ok(());
        }
        let p = partition_arg(partition)?;
        let r = request::classify(s, request)?;
        let comm = request::comm_of(s, r);
        let (partitions, active) = match s.ext.reqs.persistent(r) {
            Some((
                Spec::Part {
                    partitions,
                    send: false,
                    ..
                },
                active,
            )) => (*partitions, active),
            _ => {
                return Err(Fail::new(
                    comm,
                    ErrorClass::Request,
                    format!("request {request:#x} is not a partitioned receive"),
                ))
            }
        };
        if p >= partitions {
            return Err(Fail::new(
                comm,
                ErrorClass::Arg,
                format!("partition {p} is not in 0..{partitions}"),
            ));
        }
        // A round's data is in place once its message has arrived; an
        // inactive request's last round completed.
        let arrived = !active || {
            request::poll(s);
            request::is_ready(s, r)
        };
        if arrived && active {
            // Data received through a staging buffer is unpacked now, so
            // that the partition holds it.
            request::peek(s, r);
        }
        // SAFETY: checked non-null.
        unsafe { put(flag, c_int::from(arrived)) };
        Ok(())
    })
}

//! A one-sided window at one member, on the engine's one-sided operations.
//!
//! * Every window has a private duplicate of its communicator (fences,
//!   post/start/complete/wait notices) and an exposed region at each member
//!   (a key per member, exchanged at creation; dynamic windows expose a key
//!   whose regions come and go with attach/detach, and are addressed by
//!   absolute address).
//! * Operations are split into the target datatype's contiguous runs
//!   ([`super::runs`]): runs of 64 KiB or more are one engine operation
//!   each (their data lands in place), smaller ones travel by the thousand
//!   in scattered operations (one frame: a table of strided blocks and
//!   their packed data, up to 4 MiB); origin data that is not contiguous is
//!   packed first, and reads into such buffers are unpacked once complete.
//! * Every operation is acknowledged by its target once applied there, so
//!   waiting for the acknowledgements is remote completion
//!   ([`super::completion`]): that is what fence, unlock, flush and
//!   complete do. Accumulates are applied by the target's progress engine
//!   one at a time, hence atomic per element.
//! * Lock requests are queued at the target by its progress engine and
//!   granted in order (shared ones together); a lock returns once granted
//!   ([`super::passive`]).
//! * Windows whose memory every member maps (`super::shared`) skip all of
//!   this: operations are loads and stores, locks and accumulates words in
//!   that memory (`super::direct`).

use std::alloc::Layout as AllocLayout;
use std::sync::Arc;

use super::buffer::{landing, origin_bytes, Origin, Unpack};
use super::direct;
use super::epoch::Epochs;
use super::runs::{pieces, target_runs, Piece, Runs, TargetType};
use super::shared::{share_memory, Shared, Sharing};
use super::OpId;
use crate::datatype::Prim;
use crate::error::{Error, ErrorClass, Result};
use crate::ops::PredefOp;
use crate::{CommId, Runtime};

/// Tags of the post/start and complete/wait notices on the private communicator.
pub const TAG_POST: i32 = 1;
pub const TAG_COMPLETE: i32 = 2;
/// Alignment of memory from [`Window::allocate`].
const ALLOC_ALIGN: usize = 64;

/// What a member exposes, as every member learns it at creation.
#[derive(Clone, Copy, Debug, Default)]
pub struct Target {
    pub key: u32,
    pub base: u64,
    pub size: u64,
    pub disp_unit: u64,
}

/// How a window's memory came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Memory the application gave.
    Create,
    /// Memory the library allocated.
    Allocate,
    /// Regions attached and detached over time, addressed absolutely.
    Dynamic,
    /// Memory every member maps.
    Shared,
}

/// An engine operation of this window not yet known to be complete.
pub(super) struct Pending {
    pub(super) id: OpId,
    pub(super) target: u32,
    /// When it was issued (see [`Window::issued`]).
    pub(super) seq: u64,
}

/// One member's view of a window.
pub struct Window {
    comm: CommId,
    group: Arc<[u32]>,
    key: u32,
    base: usize,
    flavor: Flavor,
    /// Memory from [`Window::allocate`]: (address, layout).
    owned: Option<(usize, AllocLayout)>,
    /// The memory of a window every member maps.
    pub(super) shared: Option<Shared>,
    pub(super) targets: Vec<Target>,
    pub(super) pending: Vec<Pending>,
    pub(super) unpacks: Vec<Unpack>,
    /// Packed origin data that operations in flight read, by target and
    /// issue number.
    pub(super) keep: Vec<(u32, u64, Vec<u8>)>,
    /// Operations issued so far, which numbers them: a completion finishes
    /// only those issued before it began (under `MPI_THREAD_MULTIPLE`
    /// another thread may issue more while it waits).
    pub(super) issued: u64,
    /// The epochs open at this member.
    pub epochs: Epochs,
}

/// A one-sided call's target side, validated.
pub struct Access {
    /// The target's rank in the window's group and in the job.
    pub target: u32,
    pub world: u32,
    /// The target's key for the window's memory.
    pub key: u32,
    /// Where the target data lies, in runs of contiguous bytes.
    pub runs: Runs,
    /// How many bytes the target data holds.
    pub bytes: usize,
}

/// Whether this member of `wcomm` reaches every other one through shared
/// memory, so that a window's operations could be loads and stores (and
/// an unlock can wake a member asleep on its lock word).
fn all_on_shm(rt: &mut Runtime, wcomm: CommId) -> Result<bool> {
    let group = rt.comm(wcomm)?.group.clone();
    Ok(rt.p2p().all_shm_peers(&group))
}

/// Whether operations may be loads and stores in memory every member
/// maps: all members on shared memory, and `rma_direct` on.
fn may_go_direct(rt: &mut Runtime, wcomm: CommId) -> Result<bool> {
    Ok(all_on_shm(rt, wcomm)? && rt.settings().bool("rma_direct"))
}

impl Window {
    /// A window over `[base, base + size)` (or a dynamic one) on a private
    /// duplicate of `comm` (collective).
    pub fn create(
        rt: &mut Runtime,
        comm: CommId,
        base: *mut u8,
        size: usize,
        disp_unit: usize,
        flavor: Flavor,
    ) -> Result<Window> {
        let wcomm = rt.comm_dup(comm)?;
        Window::create_on(rt, wcomm, base, size, disp_unit, flavor, None, None)
    }

    /// A window over `[base, base + size)` on `wcomm`, the window's private
    /// duplicate of the creating communicator; on failure `wcomm` is freed.
    #[allow(clippy::too_many_arguments)]
    fn create_on(
        rt: &mut Runtime,
        wcomm: CommId,
        base: *mut u8,
        size: usize,
        disp_unit: usize,
        flavor: Flavor,
        owned: Option<(usize, AllocLayout)>,
        shared: Option<Shared>,
    ) -> Result<Window> {
        if rt.replicated() {
            // Window operations are requests and answers between two processes,
            // which the replication layer cannot replay from another replica.
            let _ = rt.comm_free(wcomm);
            return Err(Error::new(
                ErrorClass::Unsupported,
                "one-sided communication is not available in a job with replicas (tandem run --replicas)",
            ));
        }
        let c = rt.comm(wcomm)?;
        let (group, n) = (c.group.clone(), c.size() as usize);
        let key = if flavor == Flavor::Dynamic {
            rt.p2p().expose_dynamic()
        } else {
            rt.p2p().expose(base, size)
        };
        let mine = [key as u64, base as u64, size as u64, disp_unit as u64];
        let all = match rt.allgather_u64(wcomm, &mine) {
            Ok(all) if all.len() == 4 * n => all,
            // Nothing of the window is left behind.
            other => {
                rt.p2p().unexpose(key);
                let _ = rt.comm_free(wcomm);
                return Err(match other {
                    Err(e) => e,
                    Ok(_) => Error::new(ErrorClass::Intern, "short window address exchange"),
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
        Ok(Window {
            comm: wcomm,
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
            epochs: Epochs::new(n),
        })
    }

    /// A window of `size` bytes the library allocates, on a private
    /// duplicate of `comm` (collective): in shared memory when every member
    /// is on this host (`host` is its identity) and `rma_direct` allows, so
    /// that operations are loads and stores; else in private memory,
    /// reached through the engine. The window and its memory.
    pub fn allocate(
        rt: &mut Runtime,
        comm: CommId,
        host: u64,
        size: usize,
        disp_unit: usize,
    ) -> Result<(Window, *mut u8)> {
        let wcomm = rt.comm_dup(comm)?;
        let freeing = |rt: &mut Runtime, e: Error| {
            let _ = rt.comm_free(wcomm);
            e
        };
        let direct = match may_go_direct(rt, wcomm) {
            Ok(direct) => direct,
            Err(e) => return Err(freeing(rt, e)),
        };
        // Segments on their own pages: no false sharing between members.
        let shared = share_memory(rt, wcomm, host, size, true, direct, Sharing::ForDirect)
            .map_err(|e| freeing(rt, e))?;
        let (mem, owned) = match &shared {
            Some(sh) => match rt.comm(wcomm) {
                Ok(c) => (sh.start(c.rank as usize), None),
                Err(e) => return Err(freeing(rt, e)),
            },
            None => {
                let Ok(layout) = AllocLayout::from_size_align(size.max(1), ALLOC_ALIGN) else {
                    return Err(freeing(
                        rt,
                        Error::new(ErrorClass::Size, "window size too large"),
                    ));
                };
                // SAFETY: the layout has a non-zero size.
                let mem = unsafe { std::alloc::alloc_zeroed(layout) };
                if mem.is_null() {
                    return Err(freeing(
                        rt,
                        Error::new(ErrorClass::NoMem, "cannot allocate the window"),
                    ));
                }
                (mem, Some((mem as usize, layout)))
            }
        };
        // create_on frees `wcomm` when it fails.
        let w = Window::create_on(
            rt,
            wcomm,
            mem,
            size,
            disp_unit,
            Flavor::Allocate,
            owned,
            shared,
        );
        match w {
            Ok(w) => Ok((w, mem)),
            Err(e) => {
                if let Some((mem, layout)) = owned {
                    // SAFETY: allocated above with this layout, never exposed.
                    unsafe { std::alloc::dealloc(mem as *mut u8, layout) };
                }
                Err(e)
            }
        }
    }

    /// A window in memory every member maps, of `size` bytes at this
    /// member, on a private duplicate of `comm` (collective); `noncontig`:
    /// segments need not follow each other. Members on other hosts (`host`
    /// is this one's identity), or memory that cannot be made, are errors.
    /// The window and this member's segment (null when empty).
    pub fn allocate_shared(
        rt: &mut Runtime,
        comm: CommId,
        host: u64,
        size: usize,
        disp_unit: usize,
        noncontig: bool,
    ) -> Result<(Window, *mut u8)> {
        let wcomm = rt.comm_dup(comm)?;
        // Members reached by TCP (`transports=tcp`) could not wake a rank
        // asleep on a lock word: their operations keep the engine.
        let direct = match may_go_direct(rt, wcomm) {
            Ok(direct) => direct,
            Err(e) => {
                let _ = rt.comm_free(wcomm);
                return Err(e);
            }
        };
        let shared = match share_memory(rt, wcomm, host, size, noncontig, direct, Sharing::Required)
        {
            Ok(Some(m)) => m,
            Ok(None) => unreachable!("required sharing either shares or fails"),
            Err(e) => {
                let _ = rt.comm_free(wcomm);
                return Err(e);
            }
        };
        let me = rt.comm(wcomm)?.rank as usize;
        let base = shared.address(me);
        let w = Window::create_on(
            rt,
            wcomm,
            base,
            size,
            disp_unit,
            Flavor::Shared,
            None,
            Some(shared),
        )?;
        Ok((w, base))
    }

    /// Withdraws the window's memory and frees its communicator and
    /// allocated memory, once no member reaches into it any more.
    pub fn free(self, rt: &mut Runtime) {
        rt.p2p().unexpose(self.key);
        let _ = rt.comm_free(self.comm);
        // A shared window's mapping goes with `self`: after the barrier no
        // member reads or writes it any more.
        if let Some((mem, layout)) = self.owned {
            // SAFETY: allocated by `Window::allocate` with this layout, and
            // no longer exposed.
            unsafe { std::alloc::dealloc(mem as *mut u8, layout) };
        }
    }

    /// The window's private communicator.
    pub fn comm(&self) -> CommId {
        self.comm
    }

    /// World ranks of the members, by window rank.
    pub fn group(&self) -> &Arc<[u32]> {
        &self.group
    }

    /// The key of this member's exposed memory (never handed out twice).
    pub fn key(&self) -> u32 {
        self.key
    }

    /// This member's base address.
    pub fn base(&self) -> usize {
        self.base
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// How many members the window has.
    pub fn members(&self) -> usize {
        self.targets.len()
    }

    /// What member `t` exposes.
    pub fn target(&self, t: u32) -> &Target {
        &self.targets[t as usize]
    }

    /// Adds `[base, base + len)` to a dynamic window's memory.
    pub fn attach(&self, rt: &mut Runtime, base: *mut u8, len: usize) {
        rt.p2p().attach(self.key, base, len);
    }

    /// Removes the region at `base` from a dynamic window's memory; false
    /// if none starts there.
    pub fn detach(&self, rt: &mut Runtime, base: *const u8) -> bool {
        rt.p2p().detach_region(self.key, base)
    }

    /// Member `t`'s segment as this process reaches it: (size, displacement
    /// unit, address); `None`: the first member with a non-zero size.
    /// Windows other than [`Flavor::Shared`] share no memory: only this
    /// process's own segment is reachable, the others are reported empty at
    /// null.
    pub fn segment(&self, rt: &Runtime, t: Option<u32>) -> Result<(u64, u64, *mut u8)> {
        let t = match t {
            Some(t) => t as usize,
            None => self.targets.iter().position(|t| t.size > 0).unwrap_or(0),
        };
        let tg = self.targets[t];
        // Windows from `allocate` may share memory too, but only for the
        // library's own use.
        match self
            .shared
            .as_ref()
            .filter(|_| self.flavor == Flavor::Shared)
        {
            Some(sh) => Ok((tg.size, tg.disp_unit, sh.address(t))),
            None => {
                let me = rt.comm(self.comm)?.rank as usize;
                if t == me && self.flavor != Flavor::Dynamic && tg.size > 0 {
                    Ok((tg.size, tg.disp_unit, self.base as *mut u8))
                } else {
                    Ok((0, tg.disp_unit, std::ptr::null_mut()))
                }
            }
        }
    }

    /// Validates the target side of an access to member `t` (inside an
    /// epoch, checked by the caller): `count` elements of `tt` at
    /// displacement `disp`.
    #[inline(always)]
    pub fn access(&self, t: u32, disp: isize, count: usize, tt: &TargetType) -> Result<Access> {
        let tg = &self.targets[t as usize];
        let (runs, bytes) = target_runs(tg, self.flavor == Flavor::Dynamic, t, disp, count, tt)?;
        Ok(Access {
            target: t,
            world: self.group[t as usize],
            key: tg.key,
            runs,
            bytes,
        })
    }

    fn record(
        &mut self,
        a: &Access,
        ids: Vec<OpId>,
        keep: Option<Vec<u8>>,
        unpack: Option<Unpack>,
    ) {
        let seq = self.issued;
        self.issued += 1;
        self.pending.extend(ids.into_iter().map(|id| Pending {
            id,
            target: a.target,
            seq,
        }));
        if let Some(k) = keep {
            self.keep.push((a.target, seq, k));
        }
        if let Some(u) = unpack {
            self.unpacks.push(Unpack { seq, ..u });
        }
    }

    /// Writes origin `o` (as many bytes as the access, checked by the
    /// caller) to `a`.
    ///
    /// # Safety
    /// `o` must be valid for reads as it describes until the operation
    /// completes.
    pub unsafe fn put(&mut self, rt: &mut Runtime, a: &Access, o: &Origin) -> Result<()> {
        if let Some(r) = direct::reach(self, a.target) {
            return direct::put(rt, a, &r, o);
        }
        let (data, keep) = origin_bytes(o);
        let mut ids = Vec::new();
        for piece in pieces(&a.runs) {
            // SAFETY: `data` holds the packed origin data (the user's buffer
            // or `keep`, kept until the operation completes), of which each
            // piece's [pos, pos + bytes) is in range since the sizes matched.
            let r = unsafe {
                match &piece {
                    Piece::Run { addr, pos, bytes } => {
                        rt.p2p().put(a.world, a.key, *addr, data.add(*pos), *bytes)
                    }
                    Piece::Scattered { blocks, pos, bytes } => {
                        rt.p2p()
                            .put_scattered(a.world, a.key, blocks, data.add(*pos), *bytes)
                    }
                }
            };
            ids.push(r?);
        }
        self.record(a, ids, keep, None);
        Ok(())
    }

    /// Reads `a` into origin `o` (as many bytes, checked by the caller).
    ///
    /// # Safety
    /// `o` must be valid for writes as it describes until the operation
    /// completes.
    pub unsafe fn get(&mut self, rt: &mut Runtime, a: &Access, o: &Origin) -> Result<()> {
        if let Some(r) = direct::reach(self, a.target) {
            return direct::get_into(rt, a, &r, o);
        }
        let (dest, mut unpack) = landing(o, a.target);
        if unpack.is_none() && self.read_directly(rt, a, dest) {
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
                        rt.p2p().get(a.world, a.key, *addr, dest.add(*pos), *bytes)
                    }
                    // A scattered read is a fetch that combines nothing.
                    Piece::Scattered { blocks, pos, .. } => rt.p2p().accumulate_scattered(
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
            ids.push(r?);
        }
        self.record(a, ids, None, unpack.take());
        Ok(())
    }

    /// A get of one contiguous run of at least [`DIRECT_GET_MIN`] bytes
    /// from a rank on this host into a contiguous origin buffer: copied
    /// straight out of the target's memory (`process_vm_readv`) where the
    /// kernel allows it, complete when the call returns, with no part taken
    /// by the target. Through the engine the target copies the data aside
    /// for its reply (the reply must hold the contents as of the request)
    /// and then through the rings; with many large gets outstanding those
    /// copies' fresh pages made a 1 MiB get take 700 us instead of 120. The
    /// epoch rules keep this sound: a lock is granted and a start's posts
    /// have come before any get, and a fence has everyone's earlier stores
    /// behind it. Dynamic windows keep the engine, whose target checks the
    /// address is attached. Whether it was done.
    fn read_directly(&self, rt: &mut Runtime, a: &Access, dest: *mut u8) -> bool {
        let &[(addr, len)] = &*a.runs else {
            return false;
        };
        if len < DIRECT_GET_MIN || self.flavor == Flavor::Dynamic {
            return false;
        }
        let p2p = rt.p2p();
        if !p2p.engine().single_copy_with(a.world) || p2p.peer_known_gone(a.world) {
            return false;
        }
        // A refusal (not permitted, a peer gone) leaves the engine to do it,
        // and to report what went wrong.
        // SAFETY: `dest` is the get's contiguous origin buffer, which holds
        // the `len` bytes of the single run (the caller's check of the
        // origin against the access), writable by the MPI contract until
        // the get completes, which it does here.
        unsafe { p2p.engine().read_remote(a.world, addr, dest, len) }.is_ok()
    }

    /// Accumulate and its fetching forms: combines origin `data` (packed
    /// origin data; `None` for [`PredefOp::NoOp`]) into `a` with `op` on
    /// elements of `prim`; with `result`, the previous contents land there.
    /// Origin and result hold as many bytes as the access (checked by the
    /// caller), which holds some.
    ///
    /// # Safety
    /// `origin` must be valid for reads and `result` for writes as they
    /// describe until the operation completes.
    pub unsafe fn accumulate(
        &mut self,
        rt: &mut Runtime,
        a: &Access,
        op: PredefOp,
        prim: Prim,
        origin: Option<&Origin>,
        result: Option<&Origin>,
    ) -> Result<()> {
        if let Some(r) = direct::reach(self, a.target) {
            let (data, _packed) = origin.map_or((std::ptr::null(), None), origin_bytes);
            let landed = result.map(|o| landing(o, a.target));
            let fetch = landed.as_ref().map(|(p, _)| *p);
            direct::accumulate(rt, a, &r, op, prim, data, fetch)?;
            if let Some((_, Some(u))) = landed {
                // SAFETY: the result buffer was checked by the caller.
                unsafe { u.dest.unpack(&u.data) };
            }
            return Ok(());
        }
        let (data, keep) = match origin {
            Some(o) => origin_bytes(o),
            // MPI_NO_OP fetches only: the payload is ignored at the target.
            None => {
                let v = vec![0u8; a.bytes];
                (v.as_ptr(), Some(v))
            }
        };
        let (fetch, mut unpack) = match result {
            Some(o) => {
                let (p, u) = landing(o, a.target);
                (Some(p), u)
            }
            None => (None, None),
        };
        let mut ids = Vec::new();
        for piece in pieces(&a.runs) {
            // SAFETY: origin data and the fetch buffer are the user's buffers
            // or copies kept until completion; each piece's [pos, pos + bytes)
            // is in range of both.
            let id = unsafe {
                match &piece {
                    Piece::Run { addr, pos, bytes } => rt.p2p().accumulate(
                        a.world,
                        a.key,
                        *addr,
                        op,
                        prim,
                        data.add(*pos),
                        *bytes,
                        fetch.map(|f| f.add(*pos)),
                    ),
                    Piece::Scattered { blocks, pos, .. } => rt.p2p().accumulate_scattered(
                        a.world,
                        a.key,
                        blocks,
                        op,
                        prim,
                        (op != PredefOp::NoOp).then(|| data.add(*pos)),
                        fetch.map(|f| f.add(*pos)),
                    ),
                }
            };
            ids.push(id?);
        }
        self.record(a, ids, keep, unpack.take());
        Ok(())
    }

    /// Compare-and-swap of one element of `prim` at `a`: where it equals
    /// `compare`, it becomes `origin`; its previous value lands in
    /// `result`.
    ///
    /// # Safety
    /// Each of the three buffers holds one element; `result` stays valid
    /// for writes until the operation completes.
    pub unsafe fn compare_and_swap(
        &mut self,
        rt: &mut Runtime,
        a: &Access,
        prim: Prim,
        compare: *const u8,
        origin: *const u8,
        result: *mut u8,
    ) -> Result<()> {
        if let Some(r) = direct::reach(self, a.target) {
            return direct::compare_and_swap(rt, a, &r, prim, compare, origin, result);
        }
        // SAFETY: one element each (the caller's promise).
        let id = unsafe {
            rt.p2p()
                .compare_and_swap(a.world, a.key, a.runs[0].0, prim, compare, origin, result)
        }?;
        self.record(a, vec![id], None, None);
        Ok(())
    }

    /// Sends the empty notice `tag` ([`TAG_POST`], [`TAG_COMPLETE`]) to
    /// each of the window ranks `ranks`.
    pub fn notify(&self, rt: &mut Runtime, ranks: &[u32], tag: i32) -> Result<()> {
        for &r in ranks {
            rt.send(self.comm, r, tag, &[])?;
        }
        Ok(())
    }

    /// Whether the notice `tag` from every one of `ranks` has come; if so,
    /// they are received.
    pub fn take_notices_if_all(&self, rt: &mut Runtime, ranks: &[u32], tag: i32) -> Result<bool> {
        for &r in ranks {
            if rt.iprobe(self.comm, Some(r), Some(tag))?.is_none() {
                return Ok(false);
            }
        }
        for &r in ranks {
            rt.recv(self.comm, Some(r), Some(tag), &mut [])?;
        }
        Ok(true)
    }
}

/// Reads from this size on are copied straight out of a target on this
/// host ([`Window::read_directly`]). Below it the rings are faster than the
/// kernel's cross-process copy and its system call.
const DIRECT_GET_MIN: usize = 64 * 1024;

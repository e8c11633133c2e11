//! The Rust API: one rank's runtime, from init to finalize.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bootstrap::{JobInfo, MasterLink};
use crate::coll::agree::{self, Agreement, CidAlloc};
use crate::coll::sched::RemoteGroup;
use crate::coll::SchedId;
use crate::comm::{Comm, Inter};
use crate::error::{Error, ErrorClass, Result};
use crate::p2p::{Envelope, MsgId, P2p, P2pConfig, ReqId, SendMode, Status};
use crate::params::Settings;
use crate::progress::{placement, Engine, Policy};
use crate::replica::{Placement, Replicas};
use crate::rwapi::{HeapInfo, Rwapi, RwapiCall, StartError};
use crate::stats::Counters;
use crate::transport::shm::{HostResources, Layout, ShmTransport};
use crate::transport::shm_share;
use crate::transport::tcp::{
    congestion_for, listen_ip, parse_port_range, Poller, TcpConfig, TcpTransport,
};
use crate::{coll, params, progress};

/// Names a communicator of a [`Runtime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommId(pub usize);

/// `MPI_COMM_WORLD`.
pub const WORLD: CommId = CommId(0);
/// `MPI_COMM_SELF`.
pub const SELF: CommId = CommId(1);

/// Key under which a rank publishes its TCP address.
fn card_key(rank: u32) -> String {
    format!("tcp.{rank}")
}

/// The host's shared-memory descriptors for a job started by a PMIx
/// server: its first rank (`leader`) makes them and hands them to the
/// others (see [`crate::transport::shm_share`]), which it keeps (returned)
/// for the life of the job; `None` for a rank alone on its host. Every
/// rank of the job passes one fence here, alone on its host or not (the
/// fence is the whole job's).
#[allow(clippy::type_complexity)]
fn share_host_segment(
    link: &mut MasterLink,
    job: &JobInfo,
    leader: u32,
    settings: &Settings,
) -> Result<Option<(Option<HostResources>, OwnedFd, Vec<OwnedFd>)>> {
    let fail = |what: String| {
        Error::new(
            ErrorClass::Other,
            format!(
                "shared memory between the ranks of this host: {what} (or --set transports=tcp)"
            ),
        )
    };
    let name = format!("tandem-shm-{}-{leader}", job.id);
    let deadline = Instant::now() + Duration::from_millis(settings.uint("connect_timeout_ms"));
    if job.local_size < 2 {
        link.fence()?;
        return Ok(None);
    }
    if job.rank != leader {
        link.fence()?;
        let (segment, wake) =
            shm_share::fetch(&name, &job.secret, 2 * job.local_size as usize, deadline)
                .map_err(|e| fail(format!("from rank {leader}: {e}")))?;
        return Ok(Some((None, segment, wake)));
    }
    let layout = Layout::from_settings(job.local_size, settings).map_err(config_error)?;
    let host = HostResources::create(layout).map_err(|e| fail(e.to_string()))?;
    host.close_on_exec();
    let listener = shm_share::listen(&name).map_err(|e| fail(e.to_string()))?;
    link.fence()?;
    shm_share::serve(&host, &listener, job.local_size - 1, &job.secret, deadline)
        .map_err(|e| fail(e.to_string()))?;
    let (segment, wake) = host.duplicate().map_err(|e| fail(e.to_string()))?;
    Ok(Some((Some(host), segment, wake)))
}

/// One rank of a Tandem job.
pub struct Runtime {
    pub(crate) p2p: P2p,
    pub(crate) comms: Vec<Option<Comm>>,
    pub(crate) master: Option<Arc<Mutex<MasterLink>>>,
    /// The host's shared-memory descriptors, kept by the rank that made
    /// them under a PMIx server.
    _host_shm: Option<HostResources>,
    pub(crate) job: JobInfo,
    settings: Settings,
    /// Context ids: the counter and the claims of agreements in flight.
    pub(crate) cids: Arc<Mutex<CidAlloc>>,
    /// Communicators of `MPI_Comm_idup` whose context id is being agreed.
    pending_dups: Vec<PendingDup>,
    /// Collective schedules in flight and algorithm selection (coll/).
    pub(crate) colls: coll::Colls,
    /// The Remote-Write API, once started. Declared after `p2p`: when the
    /// runtime is dropped, the engine that may still write into its blocks
    /// goes first.
    rwapi: Option<RwapiOn>,
    /// Spawned worlds' parents, ports and names (dynamic.rs).
    pub(crate) dynamic: crate::dynamic::Dynamic,
}

/// The Remote-Write API's state and the communicator of its collectives.
struct RwapiOn {
    comm: CommId,
    rw: Rwapi,
}

/// The context id of a communicator whose agreement has not completed.
const PENDING_CID: u32 = u32::MAX;

/// A communicator slot waiting for its context id.
struct PendingDup {
    comm: CommId,
    agreement: Arc<Agreement>,
    sched: SchedId,
}

fn config_error(msg: String) -> Error {
    Error::new(ErrorClass::Arg, msg)
}

impl Runtime {
    /// Joins the job described by the environment (`tandem run` sets it; a
    /// program started on its own is a job of one rank).
    pub fn init() -> Result<Runtime> {
        let settings = Settings::from_env().map_err(config_error)?;
        let colls = coll::Colls::new(&settings).map_err(config_error)?;
        let mut job = JobInfo::from_env()?;
        let replicated = job.replicas > 1;
        let master = match &job.master {
            Some(_) => Some(Arc::new(Mutex::new(MasterLink::connect(&job)?))),
            None => None,
        };
        let resolver_link = master.clone();
        let resolver = Box::new(move |peer: u32| -> Result<String> {
            let link = resolver_link
                .as_ref()
                .ok_or_else(|| Error::new(ErrorClass::Intern, "a singleton has no peers"))?;
            let mut link = link.lock().unwrap_or_else(|p| p.into_inner());
            link.get(&card_key(peer))?.ok_or_else(|| {
                Error::new(
                    ErrorClass::Other,
                    format!("rank {peer} published no address"),
                )
            })
        });
        let names: Vec<&str> = settings
            .text("transports")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for name in &names {
            if !["shm", "tcp"].contains(name) {
                return Err(config_error(format!(
                    "transports: '{name}' is not available (available: shm, tcp)"
                )));
            }
        }
        let mut host_shm = None;
        let mut shm = match (names.contains(&"shm"), job.node_leader, &master) {
            (false, ..) => None,
            // Under a PMIx server nobody made the host's segment.
            (true, Some(leader), Some(link)) => {
                let mut link = link.lock().unwrap_or_else(|p| p.into_inner());
                match share_host_segment(&mut link, &job, leader, &settings)? {
                    Some((held, segment, wake)) => {
                        host_shm = held;
                        Some(ShmTransport::attach_fds(
                            job.rank,
                            job.local_size,
                            job.local_rank,
                            segment,
                            wake,
                        )?)
                    }
                    None => None,
                }
            }
            (true, ..) => ShmTransport::attach(job.process(), job.local_size, job.local_rank)?,
        };
        let tcp_ip = listen_ip(
            settings.text("tcp_if_include"),
            settings.text("tcp_if_exclude"),
            job.hosts,
            job.node_addr.as_deref(),
        )
        .map_err(config_error)?;
        let tcp = TcpTransport::new(
            TcpConfig {
                rank: job.process(),
                // Process ids are job-wide: a spawned world's come after
                // those of the worlds before it.
                size: job.world_base + job.size,
                secret: job.secret,
                listen_ip: tcp_ip,
                port_range: parse_port_range(settings.text("tcp_port_range"))
                    .map_err(config_error)?,
                sndbuf: settings.uint("tcp_sndbuf") as usize,
                send_chunk: match settings.uint("tcp_send_chunk") as usize {
                    0 => usize::MAX,
                    n => n,
                },
                rcvbuf: settings.uint("tcp_rcvbuf") as usize,
                congestion: congestion_for(settings.text("tcp_congestion"), tcp_ip),
                connect_timeout: Duration::from_millis(settings.uint("connect_timeout_ms")),
                poller: if settings.text("tcp_poller") == "select" {
                    Poller::Select
                } else {
                    Poller::Epoll
                },
                timing: stats_wanted(&settings),
            },
            resolver,
        )?;
        if let Some(link) = &master {
            let mut link = link.lock().unwrap_or_else(|p| p.into_inner());
            link.put(&card_key(job.process()), tcp.address())?;
            link.fence()?;
        }
        if let Some(s) = shm.as_mut() {
            // Replicas exchange frames only: nothing reads a peer's memory.
            s.connect(settings.bool("shm_single_copy") && !replicated, replicated)?;
        }
        // Replicated messages travel eagerly, whole, up to the largest frame
        // (see replica/).
        let eager_limit = if replicated {
            crate::wire::MAX_EAGER as usize
        } else {
            settings.uint("eager_limit").min(crate::wire::MAX_EAGER) as usize
        };
        let single_copy_min = settings.uint("shm_single_copy_min") as usize;
        // Both before `bind_rank` narrows the CPUs this process sees.
        let shm_eager_limit = if replicated {
            eager_limit
        } else {
            shm_eager_limit(&settings, job.local_size, eager_limit)
        };
        let copy_help_min = copy_help_min(&settings, job.local_size);
        // With the path choice, every rendezvous message to a rank on this
        // host is offered for reading and the receiver picks the faster way.
        let offer_min = if settings.bool("shm_path_choice") {
            single_copy_min.min(shm_eager_limit + 1)
        } else {
            single_copy_min
        };
        let engine = Engine::new(
            tcp,
            shm,
            job.world_base + job.size,
            offer_min,
            Policy::from_settings(&settings),
        )?;
        let mut engine = engine;
        if replicated {
            let place = Placement {
                ranks: job.size / job.replicas,
                replicas: job.replicas,
                process: job.rank,
            };
            engine.set_replicas(Replicas::new(
                place,
                settings.uint("replica_log_bytes") as usize,
                Duration::from_millis(settings.uint("replica_timeout_ms")),
                settings.text("replica_verify") == "hash",
                settings.text("replica_protocol") == "pull",
            ));
            // From here on the job is the program's: ranks, not processes.
            job.rank = place.rank();
            job.size = place.ranks;
        }
        let (spin_us, yield_us) = wait_policy(&settings, job.local_size);
        placement::bind_rank(&settings, job.local_rank, job.local_size);
        let mut p2p = P2p::new(
            job.process(),
            job.world_base + job.size,
            engine,
            P2pConfig {
                eager_limit,
                shm_eager_limit,
                direct_write: settings.bool("shm_direct_write") && !replicated,
                unexpected_limit: settings.uint("unexpected_limit") as usize,
                spin: Duration::from_micros(spin_us),
                yield_time: Duration::from_micros(yield_us),
                single_copy_min,
                copy_help_min,
                replicated,
            },
        );
        if replicated {
            let leads = p2p.engine().replicas().is_some_and(|r| r.leads());
            p2p.set_replica_role(leads);
        }
        let world: Arc<[u32]> = (job.world_base..job.world_base + job.size).collect();
        let world = Comm::new(0, job.rank, world);
        let selfc = Comm::new(1, 0, Arc::from(vec![job.process()]));
        for c in [&world, &selfc] {
            p2p.register_context(c.p2p_context(), c.group.clone());
            p2p.register_context(c.coll_context(), c.group.clone());
        }
        let mut colls = colls;
        if replicated {
            // Shared flags would bypass the replication layer.
            colls.shm_max = 0;
        }
        let jitter_seed = (u64::from(job.process()) << 32) ^ u64::from(std::process::id());
        let mut rt = Runtime {
            p2p,
            comms: vec![Some(world), Some(selfc)],
            master,
            _host_shm: host_shm,
            job,
            settings,
            cids: Arc::new(Mutex::new(CidAlloc::new(2, jitter_seed))),
            pending_dups: Vec::new(),
            colls,
            rwapi: None,
            dynamic: Default::default(),
        };
        rt.join_parent()?;
        Ok(rt)
    }

    /// This process's id in the job, which communicators' groups list: its
    /// rank in the world, except in a world `MPI_Comm_spawn` started, whose
    /// ids follow those of the worlds before it (see [`Runtime::world_base`]).
    pub fn rank(&self) -> u32 {
        self.job.process()
    }

    /// The process id of this world's rank 0 (0 but in spawned worlds).
    pub fn world_base(&self) -> u32 {
        self.job.world_base
    }

    /// The process ids of this world, by world rank.
    pub fn world_group(&self) -> Arc<[u32]> {
        (self.job.world_base..self.job.world_base + self.job.size).collect()
    }

    /// Ranks in the world.
    pub fn size(&self) -> u32 {
        self.job.size
    }

    /// Which of the job's programs this rank runs (`MPI_APPNUM`: `tandem
    /// run -n 1 ./a : -n 2 ./b` has two), from 0.
    pub fn appnum(&self) -> u32 {
        self.job.appnum
    }

    /// The parameters in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The point-to-point engine, for layers built on it.
    #[inline]
    pub fn p2p(&mut self) -> &mut P2p {
        &mut self.p2p
    }

    /// A live communicator.
    #[inline]
    pub fn comm(&self, id: CommId) -> Result<&Comm> {
        let c = self
            .comms
            .get(id.0)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::new(ErrorClass::Comm, "invalid communicator"))?;
        if c.cid == PENDING_CID {
            return Err(Error::new(
                ErrorClass::Comm,
                "communicator not usable yet: its MPI_Comm_idup has not completed",
            ));
        }
        Ok(c)
    }

    /// Starts a send to communicator rank `dest`.
    ///
    /// # Safety
    /// `buf` must be valid for reads of `len` bytes until the request completes.
    #[inline]
    pub unsafe fn isend(
        &mut self,
        comm: CommId,
        dest: u32,
        tag: i32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<ReqId> {
        let c = self.comm(comm)?;
        if dest >= c.peer_count() {
            return Err(Error::new(
                ErrorClass::Rank,
                format!("destination rank {dest} is not in 0..{}", c.peer_count()),
            ));
        }
        let (ctx, me, world) = (c.p2p_context(), c.rank, c.peer_world_rank(dest));
        // SAFETY: forwarded from the caller.
        unsafe {
            self.p2p
                .isend(Envelope { ctx, src: me, tag }, world, buf, len, mode)
        }
    }

    /// Posts a receive from communicator rank `src` (`None` = any source).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `cap` bytes until the request completes.
    #[inline]
    pub unsafe fn irecv(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
        buf: *mut u8,
        cap: usize,
    ) -> Result<ReqId> {
        let c = self.comm(comm)?;
        let filter = match src {
            Some(s) if s >= c.peer_count() => {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("source rank {s} is not in 0..{}", c.peer_count()),
                ))
            }
            Some(s) => Some((s, c.peer_world_rank(s))),
            None => None,
        };
        let ctx = c.p2p_context();
        // SAFETY: forwarded from the caller.
        Ok(unsafe { self.p2p.irecv(ctx, filter, tag, buf, cap) })
    }

    /// Sends `data` and waits until the buffer may be reused.
    pub fn send(&mut self, comm: CommId, dest: u32, tag: i32, data: &[u8]) -> Result<()> {
        // SAFETY: `data` outlives the request, which is waited for here.
        let id = unsafe {
            self.isend(
                comm,
                dest,
                tag,
                data.as_ptr(),
                data.len(),
                SendMode::Standard,
            )?
        };
        match self.p2p.wait(id)?.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Receives into `buf` and waits for the message.
    pub fn recv(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
        buf: &mut [u8],
    ) -> Result<Status> {
        // SAFETY: `buf` outlives the request, which is waited for here.
        let id = unsafe { self.irecv(comm, src, tag, buf.as_mut_ptr(), buf.len())? };
        let st = self.p2p.wait(id)?;
        match &st.error {
            Some(e) => Err(e.clone()),
            None => Ok(st),
        }
    }

    /// Waits for a matching message without receiving it.
    pub fn probe(&mut self, comm: CommId, src: Option<u32>, tag: Option<i32>) -> Result<Status> {
        let c = self.comm(comm)?;
        let filter = src.map(|s| (s, c.peer_world_rank(s)));
        let ctx = c.p2p_context();
        self.p2p.probe(ctx, filter, tag)
    }

    /// Waits for a matching message and takes it out of matching (`MPI_Mprobe`).
    pub fn mprobe(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Result<(MsgId, Status)> {
        let c = self.comm(comm)?;
        let filter = src.map(|s| (s, c.peer_world_rank(s)));
        let ctx = c.p2p_context();
        self.p2p.mprobe(ctx, filter, tag)
    }

    /// [`Runtime::probe`], ending early (`None`) as
    /// [`P2p::wait_for_or_hand_over`] does.
    pub fn probe_or_hand_over(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Option<Result<Status>> {
        let c = match self.comm(comm) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let filter = src.map(|s| (s, c.peer_world_rank(s)));
        let ctx = c.p2p_context();
        self.p2p.probe_or_hand_over(ctx, filter, tag)
    }

    /// [`Runtime::mprobe`], ending early (`None`) as
    /// [`P2p::wait_for_or_hand_over`] does.
    pub fn mprobe_or_hand_over(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Option<Result<(MsgId, Status)>> {
        let c = match self.comm(comm) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let filter = src.map(|s| (s, c.peer_world_rank(s)));
        let ctx = c.p2p_context();
        self.p2p.mprobe_or_hand_over(ctx, filter, tag)
    }

    /// Takes a matching message out of matching if one has arrived (`MPI_Improbe`).
    pub fn improbe(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Option<(MsgId, Status)>> {
        let ctx = self.comm(comm)?.p2p_context();
        Ok(self.p2p.improbe(ctx, src, tag))
    }

    /// Checks for a matching message without receiving it.
    pub fn iprobe(
        &mut self,
        comm: CommId,
        src: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Option<Status>> {
        let ctx = self.comm(comm)?.p2p_context();
        Ok(self.p2p.iprobe(ctx, src, tag))
    }

    /// Blocks until every member of `comm` has called it.
    pub fn barrier(&mut self, comm: CommId) -> Result<()> {
        if self.comm(comm)?.is_inter() {
            // SAFETY: a barrier moves no user data.
            let id = unsafe { self.inter_coll_start(comm, coll::inter::InterCall::Barrier)? };
            return self.coll_wait(id);
        }
        // SAFETY: a barrier moves no user data.
        unsafe { self.coll(comm, coll::CollCall::Barrier) }
    }

    /// Starts agreeing on a new context id over `comm` (a collective on
    /// it, ordered with its others).
    pub(crate) fn agreement_start(&mut self, comm: CommId) -> Result<(SchedId, Arc<Agreement>)> {
        let c = self.comm(comm)?;
        let (cid, ctx, rank, group) = (c.cid, c.coll_context(), c.rank, c.group.clone());
        let tag = self.colls.next_tag(cid);
        let (s, ag) = agree::schedule(&self.cids, group.len() as u32, rank, ctx, tag, group, None);
        Ok((self.colls.start(s, &mut self.p2p), ag))
    }

    /// A new context id agreed over `comm`, every member of which calls this.
    pub(crate) fn agree_cid(&mut self, comm: CommId) -> Result<u32> {
        let (id, ag) = self.agreement_start(comm)?;
        self.coll_wait(id)?;
        ag.result()
            .ok_or_else(|| Error::new(ErrorClass::Intern, "context id agreement without a result"))
    }

    /// Puts a communicator in the first free slot.
    pub(crate) fn add_comm_slot(&mut self, c: Comm) -> CommId {
        let slot = self
            .comms
            .iter()
            .skip(2)
            .position(Option::is_none)
            .map(|i| i + 2);
        match slot {
            Some(i) => {
                self.comms[i] = Some(c);
                CommId(i)
            }
            None => {
                self.comms.push(Some(c));
                CommId(self.comms.len() - 1)
            }
        }
    }

    /// A new communicator with the same group and a context of its own.
    pub fn comm_dup(&mut self, comm: CommId) -> Result<CommId> {
        let parent = self.comm(comm)?.clone();
        if parent.is_inter() {
            return self.intercomm_dup(comm);
        }
        let cid = self.agree_cid(comm)?;
        let c = Comm::new(cid, parent.rank, parent.group.clone());
        self.p2p.register_context(c.p2p_context(), c.group.clone());
        self.p2p.register_context(c.coll_context(), c.group.clone());
        Ok(self.add_comm_slot(c))
    }

    /// `MPI_Comm_idup`: the new communicator's id, usable once the returned
    /// schedule has completed (and the runtime has seen it complete: any
    /// wait, test or progress call), and the schedule agreeing on its
    /// context, which is ordered with the parent's other collectives.
    pub fn comm_idup(&mut self, comm: CommId) -> Result<(CommId, SchedId)> {
        let parent = self.comm(comm)?.clone();
        if let Some(inter) = &parent.inter {
            return self.intercomm_idup(&parent, inter);
        }
        let (sched, agreement) = self.agreement_start(comm)?;
        let new = self.add_comm_slot(Comm::new(PENDING_CID, parent.rank, parent.group));
        self.pending_dups.push(PendingDup {
            comm: new,
            agreement,
            sched,
        });
        self.settle_dups();
        Ok((new, sched))
    }

    /// [`Runtime::comm_idup`] of the intercommunicator `parent`: the
    /// agreement runs over its hidden local intracommunicator, its leaders
    /// swapping their groups' maxima on the intercommunicator's context, and
    /// takes two ids (the new one's and its hidden local one's).
    fn intercomm_idup(&mut self, parent: &Comm, inter: &Inter) -> Result<(CommId, SchedId)> {
        let local = self.comm(inter.local)?;
        let (local_cid, ctx) = (local.cid, local.coll_context());
        let tag = self.colls.next_tag(local_cid);
        let remote = RemoteGroup {
            ctx: parent.coll_context(),
            tag: self.colls.next_tag(parent.cid),
            group: inter.remote.clone(),
        };
        let (s, agreement) = agree::schedule(
            &self.cids,
            parent.size(),
            parent.rank,
            ctx,
            tag,
            parent.group.clone(),
            Some(remote),
        );
        let sched = self.colls.start(s, &mut self.p2p);
        let hidden = self.add_comm_slot(Comm::new(PENDING_CID, parent.rank, parent.group.clone()));
        let mut c = Comm::new(PENDING_CID, parent.rank, parent.group.clone());
        c.inter = Some(Inter {
            remote: inter.remote.clone(),
            local: hidden,
        });
        let new = self.add_comm_slot(c);
        self.pending_dups.push(PendingDup {
            comm: new,
            agreement,
            sched,
        });
        self.settle_dups();
        Ok((new, sched))
    }

    /// Gives communicator slot `id` context id `cid` and registers its
    /// contexts (frames on them come from its peers: the remote group of an
    /// intercommunicator).
    fn settle_cid(&mut self, id: CommId, cid: u32) {
        if let Some(Some(c)) = self.comms.get_mut(id.0) {
            c.cid = cid;
            let (pc, cc, peers) = (c.p2p_context(), c.coll_context(), c.peers().clone());
            self.p2p.register_context(pc, peers.clone());
            self.p2p.register_context(cc, peers);
        }
    }

    /// Gives the communicators of completed `MPI_Comm_idup`s their context
    /// ids; ones whose agreement failed stay unusable (the request reports
    /// the error).
    pub(crate) fn settle_dups(&mut self) {
        if self.pending_dups.is_empty() {
            return;
        }
        let mut i = 0;
        while i < self.pending_dups.len() {
            let p = &self.pending_dups[i];
            let finished = self.colls.is_complete(p.sched) != Some(false);
            if !finished {
                i += 1;
                continue;
            }
            let p = self.pending_dups.swap_remove(i);
            if let Some(cid) = p.agreement.result() {
                let hidden = self
                    .comms
                    .get(p.comm.0)
                    .and_then(Option::as_ref)
                    .and_then(|c| c.inter.as_ref())
                    .map(|inter| inter.local);
                self.settle_cid(p.comm, cid);
                if let Some(h) = hidden {
                    self.settle_cid(h, cid + 1);
                }
            }
        }
    }

    /// Releases a communicator (not the predefined ones).
    pub fn comm_free(&mut self, comm: CommId) -> Result<()> {
        if comm == WORLD || comm == SELF {
            return Err(Error::new(
                ErrorClass::Comm,
                "predefined communicators cannot be freed",
            ));
        }
        self.forget_parent(comm);
        let c = self
            .comms
            .get_mut(comm.0)
            .and_then(Option::take)
            .ok_or_else(|| Error::new(ErrorClass::Comm, "invalid communicator"))?;
        if c.cid == PENDING_CID {
            // Freed before its MPI_Comm_idup completed: the agreement runs
            // on (the other members take part in it) and is forgotten.
            self.pending_dups.retain(|p| p.comm != comm);
            if let Some(inter) = c.inter {
                self.comms[inter.local.0] = None;
            }
            return Ok(());
        }
        self.p2p.release_context(c.p2p_context());
        self.p2p.release_context(c.coll_context());
        self.colls.forget(c.cid);
        if let Some(inter) = c.inter {
            // The hidden intracommunicator goes with it.
            self.comm_free(inter.local)?;
        }
        Ok(())
    }

    /// What this rank's engine did so far.
    pub fn counters(&self) -> Counters {
        self.p2p.counters()
    }

    /// Leaves the job cleanly: flushes what is queued, waits for every rank
    /// to arrive, then closes all connections. A replica waits instead for
    /// the acknowledgements of the living (see `Runtime::drain_replica_log`),
    /// without the launcher's fence: a lost or stopped replica never
    /// arrives there.
    pub fn finalize(mut self) -> Result<()> {
        self.p2p.flush(Instant::now() + Duration::from_secs(10));
        let replicated = self.replicated();
        // A rank's counters are its leader replica's (only a leader waits
        // for its siblings to catch up, for one).
        let reports = !replicated || self.p2p.engine().replicas().is_some_and(|r| r.leads());
        if replicated {
            self.drain_replica_log();
            self.p2p.engine().announce_replica_finished();
            self.p2p.flush(Instant::now() + Duration::from_secs(10));
        }
        if let Some(link) = &self.master {
            let mut link = link.lock().unwrap_or_else(|p| p.into_inner());
            if reports && stats_wanted(&self.settings) {
                link.put(
                    &format!("stats.{}", self.job.process()),
                    &self.counters().encode(),
                )?;
            }
            if !replicated {
                link.fence()?;
            }
            self.p2p.engine().shutdown();
            link.finalize()?;
        } else {
            self.p2p.engine().shutdown();
        }
        Ok(())
    }

    /// Waits until every live replica of every rank this replica sent to
    /// has taken all it sent (they may still need its log).
    fn drain_replica_log(&mut self) {
        let patience = Duration::from_millis(self.settings.uint("replica_timeout_ms"));
        // Receivers acknowledge within ACK_DELAY_MS; one lost or stopped is
        // noticed by its connection or stopped by the launcher, so this
        // only guards against a peer that lives and never waits.
        let deadline = Instant::now() + patience * 10 + Duration::from_secs(10);
        loop {
            self.p2p.progress();
            let done = self
                .p2p
                .engine()
                .replicas()
                .is_none_or(|r| r.all_acknowledged());
            if done || Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Whether this job runs every rank as several replicas (then one-sided
    /// communication and RWAPI are not available).
    pub fn replicated(&self) -> bool {
        self.job.replicas > 1
    }

    /// Starts the Remote-Write API (collective over the world); nothing if
    /// it runs already. Refused in a job with replicas.
    pub fn rwapi_init(&mut self) -> std::result::Result<(), StartError> {
        if self.rwapi.is_some() {
            return Ok(());
        }
        if self.replicated() {
            return Err(StartError::Replicated);
        }
        let comm = self.comm_dup(WORLD).map_err(StartError::Failed)?;
        let mut rw = Rwapi::new(&self.p2p, &self.settings);
        let (mine, all) = rw.heap_exchange();
        // SAFETY: `mine` is valid for reads of `len` bytes and `all` for
        // writes of one `len` per rank (HeapInfo is plain old data) during
        // the call.
        let exchanged = unsafe {
            self.coll(
                comm,
                coll::CollCall::Allgather {
                    send: Some((&raw const mine).cast()),
                    recv: all.as_mut_ptr().cast(),
                    len: std::mem::size_of::<HeapInfo>(),
                },
            )
        };
        if let Err(e) = exchanged {
            let _ = self.comm_free(comm);
            return Err(StartError::Failed(e));
        }
        self.rwapi = Some(RwapiOn { comm, rw });
        Ok(())
    }

    /// The Remote-Write API for one call, once started.
    #[inline]
    pub fn rwapi(&mut self) -> Option<RwapiCall<'_>> {
        let on = self.rwapi.as_mut()?;
        Some(RwapiCall::new(&mut on.rw, &mut self.p2p))
    }

    /// Ends the Remote-Write API (collective): flushes every write, waits
    /// for every rank to have done so, frees every block. The first error;
    /// `None` if it was not started.
    pub fn rwapi_finalize(&mut self) -> Option<std::result::Result<(), ErrorClass>> {
        let comm = self.rwapi.as_ref()?.comm;
        let flushed = self.rwapi()?.flush();
        // Every rank's writes are done before any rank leaves.
        let done = match self.barrier(comm) {
            Ok(()) => flushed,
            Err(e) => Err(e.class),
        };
        let _ = self.comm_free(comm);
        let on = self.rwapi.take()?;
        // Every node has flushed (the barrier): no write is copying into
        // the heap any more. Nothing may reach the blocks once they are
        // freed, with the state, below.
        on.rw.withdraw(&mut self.p2p);
        drop(on);
        Some(done)
    }

    /// Ends the whole job with `code`. Does not return.
    pub fn abort(&mut self, code: i32, message: &str) -> ! {
        abort_job(self.master.as_ref(), self.job.process(), code, message)
    }
}

/// What the progress helper thread and the signal handler drive.
impl progress::Driven for Runtime {
    fn engine(&mut self) -> &mut Engine {
        self.p2p.engine()
    }

    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn drive_round(&mut self) -> bool {
        let did = self.p2p.progress();
        self.progress_once();
        did
    }

    fn set_async_matching(&mut self, on: bool) {
        self.p2p.set_async_matching(on);
    }

    fn progress_matters(&mut self) -> bool {
        self.p2p.progress_matters()
    }

    fn posted_receives(&mut self) -> usize {
        self.p2p.posted_receives()
    }

    fn progress_from_signal(&mut self) -> usize {
        self.p2p.progress_from_signal()
    }
}

/// How long a waiting rank polls, then polls while yielding, before it
/// blocks: `spin_us` and `yield_us`, unless a host has more ranks than CPUs
/// and they were left at their defaults. Then polling would steal the time
/// a peer needs to answer, so a waiter yields instead (ranks sharing a core
/// take turns without the cost of a kernel wake-up, about 60 us on a VM),
/// for `OVERSUBSCRIBED_YIELD_US`, and then blocks so that long waits cost
/// nothing.
fn wait_policy(settings: &Settings, local_size: u32) -> (u64, u64) {
    let spin = settings.uint("spin_us");
    let yld = settings.uint("yield_us");
    if default_on_oversubscribed_host(settings, "spin_us", local_size)
        && default_on_oversubscribed_host(settings, "yield_us", local_size)
    {
        (0, OVERSUBSCRIBED_YIELD_US)
    } else {
        (spin, yld)
    }
}

/// The eager limit towards ranks on this host: `shm_eager_limit`, unless
/// it was left at its default on a host with more ranks than CPUs, where a
/// rendezvous waits for its receiver to be scheduled (4 ranks on 2 cores:
/// 32-64 KiB broadcasts and gathers 1.5-2x slower than eager) and
/// `eager_limit` applies instead. Never above `eager_limit`.
fn shm_eager_limit(settings: &Settings, local_size: u32, eager_limit: usize) -> usize {
    if default_on_oversubscribed_host(settings, "shm_eager_limit", local_size) {
        eager_limit
    } else {
        (settings.uint("shm_eager_limit") as usize).min(eager_limit)
    }
}

/// The smallest single-copy message whose sender is invited to help copy
/// (`shm_copy_help_min`; 0 = never). Left at its default on a host with
/// more ranks than CPUs, never: a sender that is not running cannot help,
/// and a receiver would wait for a chunk a descheduled sender claimed.
fn copy_help_min(settings: &Settings, local_size: u32) -> usize {
    if default_on_oversubscribed_host(settings, "shm_copy_help_min", local_size) {
        0
    } else {
        settings.uint("shm_copy_help_min") as usize
    }
}

/// Whether parameter `name` was left at its default and this host has more
/// ranks than CPUs (a default tuned for a rank per CPU then gives way).
/// Call before [`placement::bind_rank`], which narrows the CPUs this process sees.
fn default_on_oversubscribed_host(settings: &Settings, name: &str, local_size: u32) -> bool {
    settings.describe(name).1 == params::Source::Default
        && local_size as usize > placement::usable_cpus()
}

/// Yielding budget on an oversubscribed host (see [`wait_policy`]).
const OVERSUBSCRIBED_YIELD_US: u64 = 2000;

/// Whether the job asked for counters (`stats` or `stats_file`).
fn stats_wanted(settings: &Settings) -> bool {
    settings.text("stats") != "0" || !settings.text("stats_file").is_empty()
}

/// Asks the launcher to end the job, then exits with `code`.
pub fn abort_job(
    master: Option<&Arc<Mutex<MasterLink>>>,
    rank: u32,
    code: i32,
    message: &str,
) -> ! {
    match master {
        Some(link) => {
            let mut link = link.lock().unwrap_or_else(|p| p.into_inner());
            link.abort(code, message);
        }
        None => eprintln!("tandem: rank {rank} called MPI_Abort with error code {code}: {message}"),
    }
    let status = if code & 0xff == 0 { 1 } else { code & 0xff };
    std::process::exit(status)
}

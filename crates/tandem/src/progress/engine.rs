//! The engine: owns the transports, routes frames to the one that reaches
//! each peer, drives them, and blocks in the kernel when there is nothing
//! to do (one epoll set: the TCP sockets, this rank's shared-memory wake-up
//! eventfd, and pidfds of the ranks on this host).
//!
//! Each call drives every transport (idle TCP only now and then, except
//! under the `poll` policy); the waiting policy (spin, then block) lives
//! with the caller's wait loop.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::Policy;
use crate::error::{Error, ErrorClass, Result};
use crate::replica::Replicas;
use crate::stats::{Counters, Stopwatch};
use crate::transport::shm::{Advert, ReadRemoteError, ShmTransport};
pub use crate::transport::shm::{WAKE_HELPER_ANY, WAKE_HELPER_RNDV};
use crate::transport::tcp::TcpTransport;
use crate::transport::{FrameSink, Links, SendState};
use crate::wire::Header;

/// How a peer is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Tcp,
    /// Shared memory, with the peer's index among this host's ranks.
    Shm(u32),
}

const TOKEN_TCP: u64 = u64::MAX;
/// Without TCP connections, the listener is polled once every this many
/// progress calls (and whenever the rank blocks): a few tens of
/// microseconds of polling. Each poll is a system call, which a waiting
/// rank pays when its message lands during it: once every 64 calls it
/// added about 0.02 us to an 8-byte shared-memory ping-pong (0.18 us).
const IDLE_TCP_POLL_EVERY: u32 = 1024;
/// In a replicated job, local processes' exits are looked for once every
/// this many progress calls besides every sleep.
const EXIT_WATCH_EVERY: u32 = 256;
const TOKEN_WAKE: u64 = u64::MAX - 1;
/// The rank's own kick descriptor (see [`Engine::kick_fd`]).
const TOKEN_KICK: u64 = u64::MAX - 2;
/// Longest sleep of a rank whose frames wait for room in a peer's ring:
/// the consumer that frees the room looks at the sleep word without a
/// fence (see `ShmTransport::poll_ring`), so in a rare race it misses a
/// sleep that began as it released the cells; the sleeper then finds the
/// room by itself this much later. (The progress helper thread sleeps no
/// longer either while frames wait: see helper.rs.)
pub const QUEUED_SLEEP_MS: i32 = 10;

/// Owns every transport of a rank.
pub struct Engine {
    tcp: TcpTransport,
    shm: Option<ShmTransport>,
    /// How each peer the layer above names is reached. In a replicated job
    /// those are ranks, and every one is `Tcp` here: the shared-memory
    /// paths that bypass frames stay closed to them, and frames go through
    /// the replication layer, which reaches processes by `process_routes`.
    routes: Vec<Route>,
    process_routes: Vec<Route>,
    epfd: OwnedFd,
    /// An eventfd in `epfd` that another thread of this process writes to
    /// wake a wait sleeping here (see [`Engine::kick_fd`]).
    kick: OwnedFd,
    events: Vec<libc::epoll_event>,
    single_copy_offer_min: usize,
    /// Progress passes so far (wrapping): idle TCP and local exits are
    /// looked at once every so many.
    drive_passes: u32,
    /// The `poll` policy: drive every transport on every call.
    poll_everything: bool,
    policy: Policy,
    counters: Counters,
    /// In a replicated job, the layer that turns ranks into processes
    /// (replica/): every frame to or from a peer passes through it.
    replicas: Option<Replicas>,
}

fn epoll_add(epfd: RawFd, fd: RawFd, token: u64) -> Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `ev` is valid for the call.
    if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(Error::new(
            ErrorClass::Other,
            format!("epoll_ctl: {}", std::io::Error::last_os_error()),
        ));
    }
    Ok(())
}

impl Engine {
    /// `shm` must be connected already; `size` is the world size. Payloads
    /// of at least `single_copy_offer_min` bytes to ranks on this host are
    /// offered to the receiver to read straight from the sender's memory
    /// where permitted (the receiver decides whether it does).
    pub fn new(
        tcp: TcpTransport,
        shm: Option<ShmTransport>,
        size: u32,
        single_copy_offer_min: usize,
        policy: Policy,
    ) -> Result<Engine> {
        // SAFETY: plain syscall; checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(Error::new(
                ErrorClass::Other,
                format!("epoll_create1: {}", std::io::Error::last_os_error()),
            ));
        }
        // SAFETY: fresh descriptor.
        let epfd = unsafe { OwnedFd::from_raw_fd(ep) };
        epoll_add(ep, tcp.fd(), TOKEN_TCP)?;
        // SAFETY: plain syscall; checked.
        let k = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if k < 0 {
            return Err(Error::new(
                ErrorClass::Other,
                format!("eventfd: {}", std::io::Error::last_os_error()),
            ));
        }
        // SAFETY: fresh descriptor.
        let kick = unsafe { OwnedFd::from_raw_fd(k) };
        epoll_add(ep, k, TOKEN_KICK)?;
        let mut routes = vec![Route::Tcp; size as usize];
        if let Some(shm) = &shm {
            epoll_add(ep, shm.wake_fd(), TOKEN_WAKE)?;
            for (i, &w) in shm.world_ranks().iter().enumerate() {
                // (A process that never attached has no world rank.)
                if let Some(r) = routes.get_mut(w as usize) {
                    *r = Route::Shm(i as u32);
                }
                if let Some(fd) = shm.pidfd(i as u32) {
                    epoll_add(ep, fd, i as u64)?;
                }
            }
        }
        Ok(Engine {
            tcp,
            shm,
            routes,
            process_routes: Vec::new(),
            epfd,
            kick,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 32],
            single_copy_offer_min,
            drive_passes: 0,
            poll_everything: policy.polls_everything(),
            policy,
            counters: Counters::default(),
            replicas: None,
        })
    }

    /// See [`TcpTransport::parked_process`].
    pub fn parked_process(&self) -> Option<u32> {
        self.tcp.parked_process()
    }

    /// Processes `0..total` of the job exist now (see
    /// [`TcpTransport::add_processes`]); the new ones are reached over TCP.
    /// Not for a replicated job (which starts no processes).
    pub fn add_processes(&mut self, total: u32) {
        if total as usize > self.routes.len() {
            self.routes.resize(total as usize, Route::Tcp);
            self.tcp.add_processes(total);
        }
    }

    /// Makes this a replicated job's engine: from now on peers are ranks,
    /// and `replicas` maps them to processes. Opens the connections to the
    /// partner replicas (see [`Replicas::greet`]).
    pub fn set_replicas(&mut self, mut replicas: Replicas) {
        let place = replicas.placement();
        self.process_routes =
            std::mem::replace(&mut self.routes, vec![Route::Tcp; place.ranks as usize]);
        // The leader's decisions reach its siblings over TCP also on one
        // host: what a leader handed the kernel is delivered after it dies,
        // and the kernel's buffers hold far more than a ring, where frames
        // beyond the ring's cells wait in the leader's memory and die with
        // it (a follower far behind would miss decisions no survivor keeps).
        // A sibling is lost when its TCP stream ends, after every frame it
        // wrote before it died has been read; its exit seen first would
        // have those ignored, and a follower would lead without them.
        for j in 0..place.replicas {
            let p = place.process_of(place.rank(), j) as usize;
            if let (Route::Shm(local), Some(shm)) = (self.process_routes[p], self.shm.as_mut()) {
                shm.leave_exit_to_other_transport(local);
            }
            self.process_routes[p] = Route::Tcp;
        }
        replicas.greet(&mut self.links().1);
        self.replicas = Some(replicas);
    }

    /// The replication layer, if any, and the transports as it reaches
    /// processes through them.
    fn links(&mut self) -> (Option<&mut Replicas>, ProcessLinks<'_>) {
        let replicated = self.replicas.is_some();
        (
            self.replicas.as_mut(),
            ProcessLinks {
                tcp: &mut self.tcp,
                shm: self.shm.as_mut(),
                routes: &self.process_routes,
                drive_passes: &mut self.drive_passes,
                poll_everything: self.poll_everything,
                replicated,
            },
        )
    }

    /// Sends a control frame to every other live replica of this rank (a
    /// replicated job's wildcard decisions).
    pub fn send_to_replicas(&mut self, header: &Header) {
        if let (Some(rep), mut links) = self.links() {
            rep.send_to_siblings(&mut links, header);
        }
    }

    /// A replicated job's replica has finished: tells the others (see
    /// [`Replicas::announce_finished`]).
    pub fn announce_replica_finished(&mut self) {
        if let (Some(rep), mut links) = self.links() {
            rep.announce_finished(&mut links);
        }
    }

    /// Whether this replicated job's leader replica must wait for a sibling
    /// before it decides again (see [`Replicas::decisions_ahead`]).
    pub fn replica_decisions_ahead(&self) -> bool {
        self.replicas
            .as_ref()
            .is_some_and(Replicas::decisions_ahead)
    }

    /// The replication layer, in a replicated job.
    pub fn replicas(&self) -> Option<&Replicas> {
        self.replicas.as_ref()
    }

    /// The progress policy in force (the `progress` parameter).
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The address other hosts' ranks use to reach this one over TCP.
    pub fn address(&self) -> &str {
        self.tcp.address()
    }

    /// Names of the transports in use.
    pub fn transports(&self) -> Vec<&'static str> {
        let mut t = Vec::new();
        if self.shm.is_some() {
            t.push("shm");
        }
        t.push("tcp");
        t
    }

    /// Hands a frame to the transport that reaches `peer`. `payload` must
    /// stay valid for `len` bytes until the frame is done (the transports'
    /// contract, which the replication layer shares).
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn send(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState> {
        if self.replicas.is_some() {
            return self.send_replicated(peer, header, payload, len, token);
        }
        match (self.routes[peer as usize], self.shm.as_mut()) {
            (Route::Shm(local), Some(shm)) => shm.send(local, header, payload, len, token),
            _ => self.tcp.send(peer, header, payload, len, token),
        }
    }

    /// [`Engine::send`] in a replicated job: through the replication layer.
    #[cold]
    #[inline(never)]
    fn send_replicated(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState> {
        let (Some(rep), mut links) = self.links() else {
            return Err(Error::new(ErrorClass::Intern, "no replication layer"));
        };
        // SAFETY: callers of `send` keep `payload` valid for `len` bytes
        // until the frame has left or its token is reported, as every
        // transport requires (the transports read it later too).
        unsafe { rep.send(&mut links, peer, header, payload, len, token) }
    }

    /// As [`Engine::send`], for a one-sided write that may wait over TCP
    /// to leave with the writes after it in one system call (see
    /// [`TcpTransport::send_batched`], also for `hold`); shared memory
    /// sends it at once.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn send_batched(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
        hold: bool,
    ) -> Result<SendState> {
        if self.replicas.is_some() {
            return self.send_replicated(peer, header, payload, len, token);
        }
        match (self.routes[peer as usize], self.shm.as_mut()) {
            (Route::Shm(local), Some(shm)) => shm.send(local, header, payload, len, token),
            _ => self
                .tcp
                .send_batched(peer, header, payload, len, token, hold),
        }
    }

    /// Hands a frame to the transport only if it can take it whole at once
    /// (shared memory, a free cell, nothing queued before it); returns
    /// whether it did. Then the payload memory is free again.
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes during the call.
    pub unsafe fn try_send(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
    ) -> Result<bool> {
        match (self.routes[peer as usize], self.shm.as_mut()) {
            // SAFETY: forwarded from the caller.
            (Route::Shm(local), Some(shm)) => unsafe { shm.try_send(local, header, payload, len) },
            _ => Ok(false),
        }
    }

    /// Whether a `len`-byte payload to `peer` is offered to the receiver
    /// to read straight from the sender's memory.
    pub fn single_copy_to(&self, peer: u32, len: usize) -> bool {
        len >= self.single_copy_offer_min && self.single_copy_with(peer)
    }

    /// Whether this rank and `peer` may read and write each other's memory
    /// straight ([`Engine::read_remote`], [`Engine::write_remote`]): a rank
    /// on this host, where the kernel permits it and `shm_single_copy` is
    /// on.
    pub fn single_copy_with(&self, peer: u32) -> bool {
        matches!(self.routes[peer as usize], Route::Shm(_))
            && self.shm.as_ref().is_some_and(|s| s.single_copy())
    }

    /// The local index of `peer` and the shared-memory transport, if it is
    /// on this host.
    fn shm_peer(&self, peer: u32) -> Option<(u32, &ShmTransport)> {
        match (self.routes.get(peer as usize), self.shm.as_ref()) {
            (Some(Route::Shm(local)), Some(shm)) => Some((*local, shm)),
            _ => None,
        }
    }

    /// As [`Engine::shm_peer`], to change the transport.
    fn shm_peer_mut(&mut self, peer: u32) -> Option<(u32, &mut ShmTransport)> {
        match (self.routes.get(peer as usize), self.shm.as_mut()) {
            (Some(Route::Shm(local)), Some(shm)) => Some((*local, shm)),
            _ => None,
        }
    }

    /// Opens a copy of `chunks` chunks from `peer` that it may help with
    /// (see [`ShmTransport::open_help`]): its generation, if one could open.
    pub fn open_help(&mut self, peer: u32, chunks: u32) -> Option<u32> {
        let (local, shm) = self.shm_peer_mut(peer)?;
        shm.open_help(local, chunks)
    }

    /// Claims the next chunk of copy `generation` between this rank and
    /// `peer`: from it when `receiving`, else to it.
    pub fn claim_chunk(
        &self,
        peer: u32,
        receiving: bool,
        generation: u32,
        chunks: u32,
    ) -> Option<u32> {
        let (local, shm) = self.shm_peer(peer)?;
        let (receiver, sender) = if receiving {
            (shm.me(), local)
        } else {
            (local, shm.me())
        };
        shm.claim_chunk(receiver, sender, generation, chunks)
    }

    /// Claims every chunk left of the copy from `peer` to this rank.
    pub fn claim_rest(&self, peer: u32, generation: u32, chunks: u32) -> u32 {
        self.shm_peer(peer)
            .map_or(0, |(local, shm)| shm.claim_rest(local, generation, chunks))
    }

    /// This rank, as the sender of copy `generation` to `receiver`: a chunk
    /// it claimed is done, `written` or not.
    pub fn report_helped(&self, receiver: u32, generation: u32, written: bool) {
        if let Some((local, shm)) = self.shm_peer(receiver) {
            shm.report_helped(local, generation, written);
        }
    }

    /// Chunks of the open copy to this rank `peer` is done with (plus
    /// [`crate::transport::shm::HELP_FAILED`] if it failed to write one).
    pub fn helped(&self, peer: u32) -> u32 {
        self.shm_peer(peer)
            .map_or(0, |(local, shm)| shm.helped(local))
    }

    /// Closes the copy from `peer` to this rank.
    pub fn close_help(&mut self, peer: u32) {
        if let Some((local, shm)) = self.shm_peer_mut(peer) {
            shm.close_help(local);
        }
    }

    /// Writes `len` bytes from `src` to `addr` in `peer`'s memory.
    ///
    /// # Safety
    /// As for [`ShmTransport::write_remote`].
    pub unsafe fn write_remote(
        &mut self,
        peer: u32,
        addr: u64,
        src: *const u8,
        len: usize,
    ) -> std::result::Result<(), ReadRemoteError> {
        match self.shm_peer_mut(peer) {
            // SAFETY: the caller's promise, passed on.
            Some((local, shm)) => unsafe { shm.write_remote(local, addr, src, len) },
            None => Err(ReadRemoteError::NotPermitted),
        }
    }

    /// Reads `len` bytes at `addr` in `peer`'s memory into `dst`.
    ///
    /// # Safety
    /// As for [`ShmTransport::read_remote`].
    pub unsafe fn read_remote(
        &mut self,
        peer: u32,
        addr: u64,
        dst: *mut u8,
        len: usize,
    ) -> std::result::Result<(), ReadRemoteError> {
        match self.shm_peer_mut(peer) {
            // SAFETY: the caller's promise, passed on.
            Some((local, shm)) => unsafe { shm.read_remote(local, addr, dst, len) },
            None => Err(ReadRemoteError::NotPermitted),
        }
    }

    /// Drives every transport once, without waiting (a wait that finds
    /// nothing sleeps through [`Engine::arm_sleep`] and
    /// [`Engine::sleep_armed`]).
    pub fn progress(&mut self, sink: &mut dyn FrameSink) -> bool {
        self.counters.progress_calls += 1;
        self.drive(sink)
    }

    /// Announces that this rank is about to sleep, so that peers publishing
    /// to it wake it from now on; false (and nothing announced) when work
    /// arrived meanwhile. Whatever the caller checks after a true answer
    /// (and before [`Engine::sleep_armed`]) cannot be missed: a peer that
    /// changes it afterwards and calls [`Engine::wake`] wakes the sleep.
    pub fn arm_sleep(&mut self) -> bool {
        if self.replicas.is_some() {
            if let (Some(rep), mut links) = self.links() {
                rep.before_sleep(&mut links);
            }
        }
        self.shm.as_mut().is_none_or(|s| s.prepare_sleep())
    }

    /// Withdraws an [`Engine::arm_sleep`] without sleeping.
    pub fn disarm_sleep(&mut self) {
        if let Some(shm) = self.shm.as_mut() {
            shm.after_sleep();
        }
    }

    /// Sleeps, once armed, until a peer wakes this rank (or a socket or a
    /// peer's exit does), then drives what came.
    pub fn sleep_armed(&mut self, sink: &mut dyn FrameSink) -> bool {
        let mut did = false;
        let timeout = if self.replicas.as_ref().is_some_and(Replicas::has_pending) {
            QUEUED_SLEEP_MS
        } else if self.replicas.as_ref().is_some_and(Replicas::acks_due) {
            crate::replica::ACK_DELAY_MS
        } else if self.tcp.needs_timer() {
            100
        } else if self.shm_has_queued() {
            QUEUED_SLEEP_MS
        } else {
            -1
        };
        self.counters.blocks += 1;
        let watch = Stopwatch::start(self.tcp.timing());
        let n = crate::transport::epoll_wait(self.epfd.as_raw_fd(), &mut self.events, timeout);
        watch.stop(&mut self.counters.blocked_ns);
        if let Some(shm) = self.shm.as_mut() {
            shm.after_sleep();
        }
        for i in 0..n {
            match self.events[i].u64 {
                TOKEN_TCP | TOKEN_WAKE => {}
                TOKEN_KICK => {
                    let mut count = 0u64;
                    // SAFETY: reads 8 bytes into `count`; a failure (nothing
                    // to read) leaves it, and the descriptor, as they were.
                    unsafe {
                        libc::read(
                            self.kick.as_raw_fd(),
                            (&raw mut count).cast(),
                            std::mem::size_of::<u64>(),
                        )
                    };
                }
                token => {
                    if let Some(shm) = self.shm.as_mut() {
                        // Processes, in a replicated job: seen as ranks
                        // through the replication layer.
                        match self.replicas.as_mut() {
                            Some(rep) => shm.peer_exited(token as u32, &mut rep.upward(sink)),
                            None => shm.peer_exited(token as u32, sink),
                        }
                        did = true;
                    }
                }
            }
        }
        self.drive(sink) || did
    }

    /// Wakes each of `peers` that sleeps (after [`Engine::arm_sleep`]): for
    /// changes to shared memory they poll that are not frames (collectives
    /// on shared flags). Peers not on this host's shared memory are skipped.
    pub fn wake(&self, peers: &[u32]) {
        if let Some(shm) = self.shm.as_ref() {
            shm.wake_each(
                peers
                    .iter()
                    .filter_map(|&p| match self.routes.get(p as usize) {
                        Some(Route::Shm(local)) => Some(*local),
                        _ => None,
                    }),
            );
        }
    }

    #[inline]
    fn drive(&mut self, sink: &mut dyn FrameSink) -> bool {
        match self.links() {
            (Some(rep), mut links) => rep.progress(&mut links, sink),
            (None, mut links) => links.progress(sink),
        }
    }

    /// A descriptor another thread of this process may write an 8-byte
    /// count to, to wake this rank's wait from its sleep (the wait then
    /// looks at what it waits for, and whether to hand the library over).
    pub fn kick_fd(&self) -> RawFd {
        self.kick.as_raw_fd()
    }

    /// The TCP transport's descriptor: readable when a socket has news.
    pub fn tcp_fd(&self) -> RawFd {
        self.tcp.fd()
    }

    /// Whether ranks of this host talk through shared memory (else over TCP).
    pub fn has_shm(&self) -> bool {
        self.shm.is_some()
    }

    /// The progress helper's doorbell: readable once a shared-memory peer
    /// has rung it (see [`Engine::arm_helper`]); `None` without shared
    /// memory.
    pub fn helper_fd(&self) -> Option<RawFd> {
        self.shm.as_ref().and_then(|s| s.helper_fd())
    }

    /// Asks shared-memory peers to ring the helper's doorbell for the frames
    /// `bits` names ([`WAKE_HELPER_ANY`], [`WAKE_HELPER_RNDV`]); false if a
    /// frame is already there to be handled (the request stays anyway).
    pub fn arm_helper(&mut self, bits: u32) -> bool {
        self.shm.as_mut().is_none_or(|s| s.arm_helper(bits))
    }

    /// Rings this rank's own helper doorbell: for the owner leaving the
    /// library with frames [`Engine::arm_helper`] found waiting.
    pub fn ring_helper(&self) {
        if let Some(shm) = self.shm.as_ref() {
            shm.ring_own_helper();
        }
    }

    /// Withdraws `bits` of [`Engine::arm_helper`].
    pub fn disarm_helper(&mut self, bits: u32) {
        if let Some(shm) = self.shm.as_mut() {
            shm.disarm_helper(bits);
        }
    }

    /// Whether `peer` is reached through shared memory (a rank on this host).
    pub fn is_shm_peer(&self, peer: u32) -> bool {
        self.shm.is_some() && matches!(self.routes[peer as usize], Route::Shm(_))
    }

    /// Asks the kernel, without waiting, whether shared-memory peer `peer`
    /// has exited (its pidfd is readable); if so, reports it lost through
    /// `sink` now rather than at the next sleep. Returns whether it did.
    pub fn check_exited(&mut self, peer: u32, sink: &mut dyn FrameSink) -> bool {
        let (Route::Shm(local), Some(shm)) = (self.routes[peer as usize], self.shm.as_mut()) else {
            return false;
        };
        let Some(fd) = shm.pidfd(local) else {
            return false;
        };
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n > 0 && p.revents != 0 {
            shm.peer_exited(local, sink);
            return true;
        }
        false
    }

    /// Local ranks on this host (shared-memory peers), including this one;
    /// none in a replicated job, whose frames only the replication layer
    /// may take from the rings (the signal handler takes none there).
    pub fn local_ranks(&self) -> u32 {
        match (&self.shm, &self.replicas) {
            (Some(s), None) => s.world_ranks().len() as u32,
            _ => 0,
        }
    }

    /// For the signal handler: the control frame at the head of the ring
    /// from local rank `local`, with that rank's world rank (see
    /// [`ShmTransport::peek_control`]).
    pub fn peek_control(&self, local: u32) -> Option<(u32, Header)> {
        let shm = self.shm.as_ref()?;
        let h = shm.peek_control(local)?;
        Some((shm.world_ranks()[local as usize], h))
    }

    /// Consumes the frame [`Engine::peek_control`] returned.
    pub fn consume_control(&mut self, local: u32) {
        if let Some(shm) = self.shm.as_mut() {
            shm.consume_control(local);
        }
    }

    /// Advertises posted receive `ad` to `peer` (see
    /// [`ShmTransport::publish_advert`]); false where it cannot be.
    pub fn publish_advert(&mut self, peer: u32, ad: &Advert) -> bool {
        match (self.routes[peer as usize], self.shm.as_mut()) {
            (Route::Shm(local), Some(shm)) => shm.publish_advert(local, ad),
            _ => false,
        }
    }

    /// Takes back the advertisement to `peer`; the receive it names if the
    /// peer claimed it first (see [`ShmTransport::withdraw_advert`]).
    pub fn withdraw_advert(&mut self, peer: u32) -> Option<u64> {
        match (self.routes[peer as usize], self.shm.as_mut()) {
            (Route::Shm(local), Some(shm)) => shm.withdraw_advert(local),
            _ => None,
        }
    }

    /// For the signal handler: checks and clears the claim a CLAIMED frame
    /// at the head of local rank `local`'s ring reports.
    pub fn take_claim(&mut self, local: u32, rreq: u64) -> bool {
        self.shm
            .as_mut()
            .is_some_and(|shm| shm.take_claim(local, rreq))
    }

    /// Claims the receive `peer` advertised to this rank, if a message of
    /// `len` bytes that `meets` its key fits it (see
    /// [`ShmTransport::claim_advert`]).
    pub fn claim_advert(
        &mut self,
        peer: u32,
        len: u64,
        meets: impl FnOnce([u64; 2]) -> bool,
    ) -> Option<(u64, u64)> {
        match (self.routes[peer as usize], self.shm.as_mut()) {
            (Route::Shm(local), Some(shm)) => shm.claim_advert(local, len, meets),
            _ => None,
        }
    }

    /// Whether a control frame to `peer` would leave at once, without being
    /// queued (shared memory only).
    pub fn can_send_now(&self, peer: u32) -> bool {
        match (self.routes[peer as usize], self.shm.as_ref()) {
            (Route::Shm(local), Some(shm)) => shm.can_send_now(local),
            _ => false,
        }
    }

    /// Adds what the helper thread and the signal handler counted outside
    /// the engine.
    pub fn add_counters(&mut self, c: &Counters) {
        self.counters.merge(c);
    }

    /// Counts directly, for the signal handler (which owns the engine then).
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }

    /// Whether TCP connections exist (then waiting must leave the kernel
    /// room to deliver).
    pub fn tcp_active(&self) -> bool {
        self.tcp.is_active()
    }

    /// What the engine and its transports did.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters;
        c.merge(&self.tcp.counters);
        if let Some(shm) = &self.shm {
            c.heap_copies += shm.heap_copies;
        }
        if let Some(rep) = &self.replicas {
            c.max_replica_log_bytes = rep.counters.log_bytes_max;
            c.replica_duplicates = rep.counters.duplicates_dropped;
            c.replica_resumes = rep.counters.resumes_asked;
            c.replica_mismatches = rep.verified().1;
            c.replica_decision_waits = rep.counters.decision_waits;
        }
        c
    }

    /// Whether frames are still waiting to leave.
    pub fn has_queued(&self) -> bool {
        self.tcp.has_queued()
            || self.shm_has_queued()
            || self.replicas.as_ref().is_some_and(Replicas::has_pending)
    }

    /// Whether frames wait for room in a shared-memory peer's ring (TCP's
    /// queued frames need no timer: the socket's writability wakes a
    /// sleeper).
    pub fn shm_has_queued(&self) -> bool {
        self.shm.as_ref().is_some_and(|s| s.has_queued())
    }

    /// Closes every connection.
    pub fn shutdown(&mut self) {
        self.tcp.close_all();
    }
}

/// The transports as they reach processes: the engine's own drive, and in a
/// replicated job what the replication layer sends through.
struct ProcessLinks<'a> {
    tcp: &'a mut TcpTransport,
    shm: Option<&'a mut ShmTransport>,
    routes: &'a [Route],
    drive_passes: &'a mut u32,
    poll_everything: bool,
    /// A replicated job's: TCP is polled on every call (siblings always
    /// talk over it, see [`Engine::set_replicas`]), and exited local
    /// processes are looked for now and then also without a sleep (a
    /// replica waiting for its receivers' acknowledgements polls without
    /// sleeping; a receiver lost must not keep it waiting).
    replicated: bool,
}

impl Links for ProcessLinks<'_> {
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn send(
        &mut self,
        process: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState> {
        match (self.routes.get(process as usize), self.shm.as_deref_mut()) {
            (Some(Route::Shm(local)), Some(shm)) => shm.send(*local, header, payload, len, token),
            _ => self.tcp.send(process, header, payload, len, token),
        }
    }

    fn progress(&mut self, sink: &mut dyn FrameSink) -> bool {
        let mut did = false;
        if let Some(shm) = self.shm.as_deref_mut() {
            did |= shm.progress(sink);
            if self.replicated && self.drive_passes.is_multiple_of(EXIT_WATCH_EVERY) {
                did |= shm.reap_exited(sink);
            }
        }
        // Gabriel's VolpexMPI report: asking the kernel about idle sockets on
        // every call is pure cost. Without TCP connections only the listener
        // could have news (a first contact, or a stranger), and that can wait
        // a little.
        *self.drive_passes = self.drive_passes.wrapping_add(1);
        if self.poll_everything
            || self.tcp.is_active()
            || self.replicated
            || self.drive_passes.is_multiple_of(IDLE_TCP_POLL_EVERY)
        {
            did |= self.tcp.progress(sink, 0);
        }
        did
    }
}

//! Shared-memory transport between ranks on one host.
//!
//! * One segment per host job: a memfd the launcher creates and every rank
//!   inherits, so nothing is ever left under /dev/shm, even by a killed job.
//! * Per ordered pair of ranks a single-producer single-consumer ring of
//!   cache-line-aligned cells. A cell is published with one release store of
//!   its sequence number; everything that crosses processes is an offset
//!   into the segment, never a pointer.
//! * A frame (the same 40-byte header as on TCP, then its payload) fills one
//!   cell or several consecutive ones, so the sender copies in while the
//!   receiver copies out.
//! * Large payloads can instead be read by the receiver straight from the
//!   sender's memory with `process_vm_readv` (single copy), where the kernel
//!   permits it.
//! * Large payloads can also be written by the sender straight into the
//!   receiver's buffer with `process_vm_writev`, when the receiver asks for
//!   it (so that a receiver busy computing never copies).
//! * A rank that waits announces it in its control block and sleeps on its
//!   eventfd; a sender that publishes a cell for a sleeping rank writes to
//!   that eventfd. A rank's progress helper thread has an eventfd of its own
//!   (its doorbell) and says in the same word whether it wants every frame
//!   or only rendezvous starts. Peers are watched through pidfds, so a dead
//!   peer wakes its waiters.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::{copy_bytes, FrameSink, Payload, PayloadDest, SendState};
use crate::error::{Error, ErrorClass};
use crate::params::Settings;
use crate::shared_mapping::SharedMapping;
use crate::wire::{FrameKind, Header, HEADER_LEN};

/// Job environment variables of this transport (set by the launcher).
pub mod env {
    /// Inherited descriptor of the host's segment.
    pub const SEGMENT_FD: &str = "TANDEM_JOB_SHM_FD";
    /// Inherited eventfds, comma-separated: one per local rank (woken when it
    /// sleeps), then one per local rank for its progress helper thread.
    pub const WAKE_FDS: &str = "TANDEM_JOB_SHM_WAKE";
    /// This rank's index among the ranks of its host.
    pub const LOCAL_RANK: &str = crate::bootstrap::env::LOCAL_RANK;
}

const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"TNDMSHM1");
const PAGE: usize = 4096;
const LINE: usize = 64;
const CTRL_STRIDE: usize = 2 * LINE;
const CELL_HEADER: usize = LINE;
const FLAG_FIRST: u32 = 1;
/// The payload lies right after the frame header, in the cell's first cache
/// line, so a small message costs the consumer one cache-line transfer.
const FLAG_INLINE: u32 = 2;
/// As [`FLAG_INLINE`], with only the header's first [`SHORT_HEADER`] bytes
/// in the cell: the rest of an eager message's header is its length (the
/// chunk's) and two zero request ids, so a message of up to
/// [`SHORT_INLINE_MAX`] bytes (four doubles) still fits the first line.
const FLAG_SHORT: u32 = 4;

// Offsets inside the segment header page.
const H_MAGIC: usize = 0;
const H_LOCAL_SIZE: usize = 8;
const H_CELLS: usize = 12;
const H_CELL_SIZE: usize = 16;

// Offsets inside a control block.
const C_WORLD: usize = 0;
const C_PID: usize = 4;
const C_READY: usize = 8;
const C_PROBE_ADDR: usize = 16;
/// Where the rank's shared heap is (see `shm_heap`): its file descriptor
/// number, the start of its range and its length (0: no heap).
const C_HEAP_FD: usize = 24;
const C_HEAP_BASE: usize = 32;
const C_HEAP_LEN: usize = 40;
/// A peer's heap is mapped this many bytes at a time, as copies reach it.
const HEAP_WINDOW: u64 = 1 << 30;
/// Alone on its cache line: who wants to be woken when a frame arrives
/// (the `WAKE_*` bits); written only by the thread that owns the rank's
/// communication state, read by every sender.
const C_SLEEPING: usize = LINE;

/// The thread driving communication sleeps on the rank's eventfd.
const WAKE_OWNER: u32 = 1;
/// The progress helper thread waits for any frame (the `thread` policy).
pub const WAKE_HELPER_ANY: u32 = 2;
/// The progress helper thread waits for rendezvous starts only (the
/// `signal` policy).
pub const WAKE_HELPER_RNDV: u32 = 4;

/// Whether a frame of this kind (the encoded header's kind byte) starts a
/// rendezvous, which a helper waiting for rendezvous starts is woken for.
fn starts_rendezvous(kind: u8) -> bool {
    kind == FrameKind::Rts as u8 || kind == FrameKind::Rget as u8
}

// Offsets inside an advertisement slot: one cache line per ordered pair
// of local ranks, written by the receiver, claimed by the sender.
/// Generation << 2 | one of the `ADVERT_*` states.
const A_STATE: usize = 0;
/// The two words of the receive's key (what messages it accepts, encoded
/// by the layer above: p2p/advert.rs).
const A_KEY0: usize = 8;
const A_KEY1: usize = 16;
const A_RREQ: usize = 24;
const A_ADDR: usize = 32;
const A_CAP: usize = 40;
const ADVERT_NONE: u64 = 0;
const ADVERT_OPEN: u64 = 1;
const ADVERT_CLAIMED: u64 = 2;

// Offsets inside a copy-help slot: one cache line per ordered pair of local
// ranks, (receiver, sender), for the single-copy message the two copy
// together (see [`ShmTransport::open_help`]).
/// Generation << 32 | the next chunk not yet claimed by either side.
const C_CLAIM: usize = 0;
/// Generation << 32 | chunks the sender claimed and is done with, plus
/// [`HELP_FAILED`] once if it could not write one.
const C_HELPED: usize = 8;
/// Added to the helped count by a sender whose write failed (it stops).
pub const HELP_FAILED: u32 = 1 << 31;

// Offsets inside a cell.
const CELL_SEQ: usize = 0;
const CELL_CHUNK: usize = 8;
const CELL_FLAGS: usize = 12;
const CELL_FRAME: usize = 16;
/// Where an inline payload starts (after the frame header), and how much fits.
const CELL_INLINE: usize = CELL_FRAME + HEADER_LEN;
const INLINE_MAX: usize = LINE - CELL_INLINE;
/// The header bytes a [`FLAG_SHORT`] cell carries (magic, kind, context,
/// source, tag), where its payload starts, and how much fits.
const SHORT_HEADER: usize = 16;
const CELL_SHORT_INLINE: usize = CELL_FRAME + SHORT_HEADER;
const SHORT_INLINE_MAX: usize = LINE - CELL_SHORT_INLINE;

/// Whether a frame whose whole payload of `chunk` bytes goes in one cell
/// travels in the short form: too long for [`FLAG_INLINE`], short enough
/// for [`FLAG_SHORT`], its header's length `chunk` and its request ids zero
/// (every such eager message).
fn fits_short(h: &[u8; HEADER_LEN], chunk: usize) -> bool {
    (INLINE_MAX + 1..=SHORT_INLINE_MAX).contains(&chunk)
        && h[16..24] == (chunk as u64).to_le_bytes()
        && h[24..].iter().all(|&b| b == 0)
}

/// Where everything lives in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub local_size: u32,
    pub cells: u32,
    pub cell_size: u32,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl Layout {
    /// Checks the parameters of a layout.
    pub fn new(local_size: u32, cells: u32, cell_size: u32) -> Result<Layout, String> {
        if local_size == 0 {
            return Err("a host needs at least one rank".into());
        }
        if !(2..=1 << 16).contains(&cells) {
            return Err(format!("shm_cells: {cells} is not in 2..=65536"));
        }
        if cell_size < 2 * LINE as u32
            || !cell_size.is_multiple_of(LINE as u32)
            || cell_size > 16 << 20
        {
            return Err(format!(
                "shm_cell_size: {cell_size} must be a multiple of 64 between 128 and 16 MiB"
            ));
        }
        let l = Layout {
            local_size,
            cells,
            cell_size,
        };
        if l.total_len() > 1 << 40 {
            return Err(
                "shared segment would exceed 1 TiB; lower shm_cells or shm_cell_size".into(),
            );
        }
        Ok(l)
    }

    /// The layout the parameters ask for.
    pub fn from_settings(local_size: u32, settings: &Settings) -> Result<Layout, String> {
        Layout::new(
            local_size,
            settings.uint("shm_cells").min(u64::from(u32::MAX)) as u32,
            settings.uint("shm_cell_size").min(u64::from(u32::MAX)) as u32,
        )
    }

    fn ctrl(&self, local: u32) -> usize {
        PAGE + local as usize * CTRL_STRIDE
    }

    fn adverts_start(&self) -> usize {
        PAGE + self.local_size as usize * CTRL_STRIDE
    }

    /// Offset of the slot where `receiver` advertises a posted receive to
    /// `sender` (see [`ShmTransport::publish_advert`]).
    fn advert(&self, receiver: u32, sender: u32) -> usize {
        self.adverts_start()
            + (receiver as usize * self.local_size as usize + sender as usize) * LINE
    }

    /// Offset of the slot where `receiver` and `sender` share out the
    /// copy of one single-copy message.
    fn help(&self, receiver: u32, sender: u32) -> usize {
        let n = self.local_size as usize;
        self.adverts_start() + (n * n + receiver as usize * n + sender as usize) * LINE
    }

    fn rings_start(&self) -> usize {
        let n = self.local_size as usize;
        round_up(self.adverts_start() + 2 * n * n * LINE, PAGE)
    }

    fn ring_len(&self) -> usize {
        LINE + self.cells as usize * self.cell_stride()
    }

    /// Distance between two cells of a ring: the cell size, plus a line
    /// when that makes the count of lines odd. Cells a power of two apart
    /// put every cell's first line (the header a poll reads, where a small
    /// message travels whole) in the same set of the L1 cache, which holds
    /// 8-12 lines: the rings to and from a peer then evicted each other's
    /// headers on every message (8-byte ping-pong on this project's VM:
    /// 0.159 us with 32 KiB cells, 512 lines, against 0.125 with 4160-byte
    /// ones, 65 lines).
    fn cell_stride(&self) -> usize {
        let lines = self.cell_size as usize / LINE;
        (lines | 1) * LINE
    }

    /// Offset of the ring carrying frames from `src` to `dst`.
    fn ring(&self, src: u32, dst: u32) -> usize {
        self.rings_start()
            + (src as usize * self.local_size as usize + dst as usize) * self.ring_len()
    }

    /// Payload bytes one cell carries.
    fn cell_capacity(&self) -> usize {
        self.cell_size as usize - CELL_HEADER
    }

    /// Bytes of the whole segment.
    pub fn total_len(&self) -> usize {
        let n = self.local_size as usize;
        self.rings_start() + n * n * self.ring_len()
    }
}

fn errno() -> io::Error {
    io::Error::last_os_error()
}

/// What the launcher creates for the ranks of one host: the segment and
/// one eventfd per rank, all inherited by the ranks.
pub struct HostResources {
    segment: OwnedFd,
    wake: Vec<OwnedFd>,
}

impl HostResources {
    /// Creates the segment (sized by `layout`) and the eventfds. They are
    /// inheritable on purpose: the ranks receive them across exec.
    pub fn create(layout: Layout) -> io::Result<HostResources> {
        // SAFETY: the name is a NUL-terminated literal; flags are valid.
        let fd = unsafe { libc::memfd_create(c"tandem-shm".as_ptr(), 0) };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        let segment = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on our descriptor.
        if unsafe { libc::ftruncate(fd, layout.total_len() as libc::off_t) } < 0 {
            return Err(errno());
        }
        let map = SharedMapping::new(fd, layout.total_len())?;
        map.u64_at(H_MAGIC).store(SEGMENT_MAGIC, Ordering::Relaxed);
        map.u32_at(H_LOCAL_SIZE)
            .store(layout.local_size, Ordering::Relaxed);
        map.u32_at(H_CELLS).store(layout.cells, Ordering::Relaxed);
        map.u32_at(H_CELL_SIZE)
            .store(layout.cell_size, Ordering::Relaxed);
        drop(map);
        // One eventfd per rank, then one per rank's progress helper.
        let mut wake = Vec::with_capacity(2 * layout.local_size as usize);
        for _ in 0..2 * layout.local_size {
            // SAFETY: plain syscall; the result is checked.
            let e = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
            if e < 0 {
                return Err(errno());
            }
            // SAFETY: fresh descriptor.
            wake.push(unsafe { OwnedFd::from_raw_fd(e) });
        }
        Ok(HostResources { segment, wake })
    }

    /// The segment's descriptor and the wake-up eventfds'.
    pub fn descriptors(&self) -> (RawFd, Vec<RawFd>) {
        (
            self.segment.as_raw_fd(),
            self.wake.iter().map(|f| f.as_raw_fd()).collect(),
        )
    }

    /// Copies of the descriptors, for a rank of this process to attach
    /// with (these stay, for others to be given).
    pub fn duplicate(&self) -> io::Result<(OwnedFd, Vec<OwnedFd>)> {
        let wake = self
            .wake
            .iter()
            .map(|f| f.try_clone())
            .collect::<io::Result<Vec<_>>>()?;
        Ok((self.segment.try_clone()?, wake))
    }

    /// Keeps the descriptors out of programs this process execs (they are
    /// inheritable for the launcher's ranks).
    pub fn close_on_exec(&self) {
        let (segment, wake) = self.descriptors();
        for fd in std::iter::once(segment).chain(wake) {
            // SAFETY: plain fcntl on a descriptor this value owns.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }

    /// The variables that tell a rank where its descriptors are.
    pub fn env(&self, local_rank: u32) -> Vec<(String, String)> {
        let wake: Vec<String> = self
            .wake
            .iter()
            .map(|f| f.as_raw_fd().to_string())
            .collect();
        vec![
            (
                env::SEGMENT_FD.to_string(),
                self.segment.as_raw_fd().to_string(),
            ),
            (env::WAKE_FDS.to_string(), wake.join(",")),
            (env::LOCAL_RANK.to_string(), local_rank.to_string()),
        ]
    }
}

/// The segment's mapping is read through checked offsets.
impl SharedMapping {
    fn at(&self, off: usize) -> *mut u8 {
        assert!(off < self.len(), "offset {off} outside the segment");
        // SAFETY: checked to be inside the mapping.
        unsafe { self.base().add(off) }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len());
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned);
        // shared memory is only ever accessed through atomics or through
        // cells whose ownership the ring protocol hands over.
        unsafe { &*(self.base().add(off) as *const AtomicU64) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len());
        // SAFETY: as in `u64_at`.
        unsafe { &*(self.base().add(off) as *const AtomicU32) }
    }
}

/// A frame waiting to leave (see the TCP transport's twin).
struct OutFrame {
    header: [u8; HEADER_LEN],
    payload: *const u8,
    len: usize,
    header_sent: bool,
    sent: usize,
    token: Option<u64>,
}

struct Outbound {
    /// Offset of the ring to the peer.
    ring: usize,
    /// Next position this rank writes in the ring to the peer.
    pos: u64,
    /// The cell of `pos` (`pos % cells`, kept without a division).
    slot: u32,
    /// The consumer's head as last read: its cache line moves between cores
    /// only when this copy says the ring is full.
    head: u64,
    queue: VecDeque<OutFrame>,
}

struct RxTarget {
    ptr: *mut u8,
    cap: usize,
    owned: Option<Vec<u8>>,
}

enum Rx {
    Header,
    Payload {
        header: Header,
        target: RxTarget,
        done: u64,
    },
}

struct Inbound {
    /// Offset of the ring from the peer.
    ring: usize,
    /// Next position this rank reads in the ring from the peer.
    pos: u64,
    /// The cell of `pos` (`pos % cells`).
    slot: u32,
    rx: Rx,
}

/// Why a single-copy read failed.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadRemoteError {
    /// The kernel does not allow it here; use the pipelined copy.
    NotPermitted,
    /// The peer is gone or the read failed.
    Failed(String),
}

/// A posted receive advertised to one sender on this host, who may match
/// its message to it and write it in without a rendezvous (see
/// p2p/advert.rs). The transport moves the key and never reads it: the
/// sender's point-to-point layer decides whether a message meets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advert {
    /// What messages the receive accepts, as the layer above encodes it.
    pub key: [u64; 2],
    pub rreq: u64,
    pub addr: u64,
    pub cap: u64,
}

/// An advertisement this rank has out.
#[derive(Clone, Copy)]
struct Published {
    generation: u64,
    rreq: u64,
    /// The sender claimed it: its CLAIMED frame is on the way.
    claimed: bool,
}

/// Outcome of polling one peer's ring.
enum Polled {
    Idle,
    Worked,
    Malformed(String),
}

/// The shared-memory transport of one rank.
pub struct ShmTransport {
    map: SharedMapping,
    layout: Layout,
    me: u32,
    /// World rank of each local rank (known after [`ShmTransport::connect`]).
    world: Vec<u32>,
    pids: Vec<i32>,
    wake: Vec<OwnedFd>,
    /// The helper threads' doorbells (empty if the launcher made none).
    helper_wake: Vec<OwnedFd>,
    pidfds: Vec<Option<OwnedFd>>,
    out: Vec<Outbound>,
    inb: Vec<Inbound>,
    lost: Vec<Option<String>>,
    /// The other local ranks not lost: what a progress call polls.
    live: Vec<u32>,
    cma: bool,
    /// By local peer: the receive advertised to it, if any.
    adverts: Vec<Option<Published>>,
    /// The generation of the last advertisement published.
    advert_generation: u64,
    /// By local peer: whether a copy it helps with is open (see
    /// [`ShmTransport::open_help`]).
    helping: Vec<bool>,
    /// The generation of the last copy-help opened.
    help_generation: u32,
    /// By local peer: its shared heap, where a copy to or from it is a
    /// `memcpy` instead of a cross-process copy.
    heaps: Vec<PeerHeap>,
    /// Copies done through a peer's heap (see [`ShmTransport::read_remote`]).
    pub heap_copies: u64,
    /// Never read here: peers read it through `process_vm_readv` to probe
    /// whether single-copy reads are permitted; it must live as long as we do.
    _probe_word: Box<u64>,
}

const PROBE_VALUE: u64 = 0x5441_4e44_454d_2121;

/// A peer's shared heap (`shm_heap`), mapped in windows of
/// [`HEAP_WINDOW`] bytes as copies reach them.
#[derive(Default)]
struct PeerHeap {
    fd: RawFd,
    base: u64,
    /// 0: the peer has no heap (or it cannot be mapped from here).
    len: u64,
    file: Option<OwnedFd>,
    windows: Vec<Option<SharedMapping>>,
}

fn parse_fd(text: &str) -> Option<RawFd> {
    text.trim().parse::<RawFd>().ok().filter(|&fd| fd >= 0)
}

impl ShmTransport {
    /// Maps the host's segment named by the launcher's variables and fills
    /// this rank's control block. `None` when the launcher made no segment.
    pub fn attach(
        world_rank: u32,
        local_size: u32,
        local_rank: u32,
    ) -> Result<Option<ShmTransport>, Error> {
        let bad = |what: &str| Error::new(ErrorClass::Other, format!("shared memory: {what}"));
        let Ok(fd_text) = std::env::var(env::SEGMENT_FD) else {
            return Ok(None);
        };
        let seg_fd = parse_fd(&fd_text).ok_or_else(|| bad("malformed segment descriptor"))?;
        let wake_fds: Vec<RawFd> = std::env::var(env::WAKE_FDS)
            .unwrap_or_default()
            .split(',')
            .map(parse_fd)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("malformed wake descriptors"))?;
        // SAFETY: the launcher handed these inherited descriptors to this
        // process alone to own; nothing else in the process uses them.
        let seg = unsafe { OwnedFd::from_raw_fd(seg_fd) };
        // SAFETY: as above.
        let wake: Vec<OwnedFd> = wake_fds
            .iter()
            .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) })
            .collect();
        Self::attach_fds(world_rank, local_size, local_rank, seg, wake).map(Some)
    }

    /// Maps a segment given by descriptor and fills control block `me`.
    pub fn attach_fds(
        world_rank: u32,
        local_size: u32,
        me: u32,
        seg: OwnedFd,
        mut wake: Vec<OwnedFd>,
    ) -> Result<ShmTransport, Error> {
        let bad = |what: &str| Error::new(ErrorClass::Other, format!("shared memory: {what}"));
        let n = local_size as usize;
        if me >= local_size || (wake.len() != n && wake.len() != 2 * n) {
            return Err(bad("descriptors disagree with the local rank count"));
        }
        let helper_wake = wake.split_off(n);
        // SAFETY: an all-zero stat is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `st` is valid for writes; the descriptor is ours.
        if unsafe { libc::fstat(seg.as_raw_fd(), &mut st) } < 0 {
            return Err(bad(&format!("segment descriptor: {}", errno())));
        }
        let len = st.st_size as usize;
        let all_wake = wake.iter().chain(helper_wake.iter());
        for fd in std::iter::once(seg.as_raw_fd()).chain(all_wake.map(|f| f.as_raw_fd())) {
            // SAFETY: plain fcntl; keeps the descriptors out of programs the rank execs.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        if len < PAGE {
            return Err(bad("segment too small"));
        }
        let map =
            SharedMapping::new(seg.as_raw_fd(), len).map_err(|e| bad(&format!("mmap: {e}")))?;
        drop(seg);
        if map.u64_at(H_MAGIC).load(Ordering::Relaxed) != SEGMENT_MAGIC {
            return Err(bad("segment has the wrong magic number"));
        }
        let layout = Layout::new(
            map.u32_at(H_LOCAL_SIZE).load(Ordering::Relaxed),
            map.u32_at(H_CELLS).load(Ordering::Relaxed),
            map.u32_at(H_CELL_SIZE).load(Ordering::Relaxed),
        )
        .map_err(|e| bad(&e))?;
        if layout.local_size != local_size || layout.total_len() != len {
            return Err(bad("segment layout disagrees with the job"));
        }
        let probe_word = Box::new(PROBE_VALUE);
        let ctrl = layout.ctrl(me);
        map.u32_at(ctrl + C_WORLD)
            .store(world_rank, Ordering::Relaxed);
        map.u32_at(ctrl + C_PID)
            .store(std::process::id(), Ordering::Relaxed);
        map.u64_at(ctrl + C_PROBE_ADDR)
            .store(&*probe_word as *const u64 as u64, Ordering::Relaxed);
        map.u32_at(ctrl + C_SLEEPING).store(0, Ordering::Relaxed);
        let (heap_fd, heap_base, heap_len) = crate::shm_heap::published().unwrap_or((-1, 0, 0));
        map.u32_at(ctrl + C_HEAP_FD)
            .store(heap_fd as u32, Ordering::Relaxed);
        map.u64_at(ctrl + C_HEAP_BASE)
            .store(heap_base, Ordering::Relaxed);
        map.u64_at(ctrl + C_HEAP_LEN)
            .store(heap_len, Ordering::Relaxed);
        map.u32_at(ctrl + C_READY).store(1, Ordering::Release);
        Ok(ShmTransport {
            map,
            layout,
            me,
            world: vec![u32::MAX; n],
            pids: vec![0; n],
            wake,
            helper_wake,
            pidfds: (0..n).map(|_| None).collect(),
            out: (0..local_size)
                .map(|peer| Outbound {
                    ring: layout.ring(me, peer),
                    pos: 0,
                    slot: 0,
                    head: 0,
                    queue: VecDeque::new(),
                })
                .collect(),
            inb: (0..local_size)
                .map(|peer| Inbound {
                    ring: layout.ring(peer, me),
                    pos: 0,
                    slot: 0,
                    rx: Rx::Header,
                })
                .collect(),
            lost: vec![None; n],
            live: (0..local_size).filter(|&p| p != me).collect(),
            cma: false,
            adverts: vec![None; n],
            advert_generation: 0,
            helping: vec![false; n],
            help_generation: 0,
            heaps: (0..n).map(|_| PeerHeap::default()).collect(),
            heap_copies: 0,
            _probe_word: probe_word,
        })
    }

    /// Learns who the other local ranks are (every rank has attached: the
    /// caller has passed a fence since), watches them through pidfds, and
    /// probes whether single-copy reads are permitted (unless `allow_cma`
    /// is false). With `absent_lost`, a local process that never attached
    /// (a replica that died starting) is left out as lost, its world rank
    /// unknown ([`u32::MAX`] in [`ShmTransport::world_ranks`]), instead of
    /// failing the connection.
    pub fn connect(&mut self, allow_cma: bool, absent_lost: bool) -> Result<(), Error> {
        for i in 0..self.layout.local_size {
            let ctrl = self.layout.ctrl(i);
            if self.map.u32_at(ctrl + C_READY).load(Ordering::Acquire) != 1 {
                if absent_lost && i != self.me {
                    self.lost[i as usize] = Some(format!("local process {i} never attached"));
                    self.live.retain(|&p| p != i);
                    continue;
                }
                return Err(Error::new(
                    ErrorClass::Other,
                    format!("shared memory: local rank {i} never attached"),
                ));
            }
            self.world[i as usize] = self.map.u32_at(ctrl + C_WORLD).load(Ordering::Relaxed);
            let pid = self.map.u32_at(ctrl + C_PID).load(Ordering::Relaxed) as i32;
            self.pids[i as usize] = pid;
            if i != self.me {
                let len = self.map.u64_at(ctrl + C_HEAP_LEN).load(Ordering::Relaxed);
                self.heaps[i as usize] = PeerHeap {
                    fd: self.map.u32_at(ctrl + C_HEAP_FD).load(Ordering::Relaxed) as RawFd,
                    base: self.map.u64_at(ctrl + C_HEAP_BASE).load(Ordering::Relaxed),
                    // Whole windows only (the heap's length is whole GiB).
                    len: if len.is_multiple_of(HEAP_WINDOW) {
                        len
                    } else {
                        0
                    },
                    file: None,
                    windows: Vec::new(),
                };
                // SAFETY: plain syscall; a failure only loses the early
                // death notice (the launcher still reports the death).
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as RawFd;
                if fd >= 0 {
                    // SAFETY: fresh descriptor.
                    self.pidfds[i as usize] = Some(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        self.cma = allow_cma && self.probe_cma();
        Ok(())
    }

    /// Tries a single-copy read of a neighbour's probe word.
    fn probe_cma(&self) -> bool {
        if self.layout.local_size < 2 {
            return false;
        }
        let peer = (self.me + 1) % self.layout.local_size;
        let addr = self
            .map
            .u64_at(self.layout.ctrl(peer) + C_PROBE_ADDR)
            .load(Ordering::Relaxed);
        let mut value = 0u64;
        let ok = read_process(
            self.pids[peer as usize],
            addr,
            (&mut value as *mut u64).cast(),
            8,
        )
        .is_ok();
        ok && value == PROBE_VALUE
    }

    /// Whether single-copy reads of peers' memory work here.
    pub fn single_copy(&self) -> bool {
        self.cma
    }

    /// World rank of each local rank.
    pub fn world_ranks(&self) -> &[u32] {
        &self.world
    }

    /// This rank's eventfd (readable when a peer woke it).
    pub fn wake_fd(&self) -> RawFd {
        self.wake[self.me as usize].as_raw_fd()
    }

    /// This rank's helper doorbell: readable when a peer rang it (see
    /// [`ShmTransport::arm_helper`]); `None` if the launcher made none.
    pub fn helper_fd(&self) -> Option<RawFd> {
        self.helper_wake
            .get(self.me as usize)
            .map(|f| f.as_raw_fd())
    }

    /// Local rank `i`'s loss is for the transport that carries its frames
    /// to report (a replica's siblings talk over TCP): its exit is no
    /// longer watched here. Closing its pidfd also takes it out of every
    /// epoll set it was in.
    pub fn leave_exit_to_other_transport(&mut self, i: u32) {
        if let Some(fd) = self.pidfds.get_mut(i as usize) {
            *fd = None;
        }
    }

    /// The pidfd watching local rank `i`, if any.
    pub fn pidfd(&self, i: u32) -> Option<RawFd> {
        self.pidfds[i as usize].as_ref().map(|f| f.as_raw_fd())
    }

    /// Offset of cell `slot` of `ring`.
    fn cell(&self, ring: usize, slot: u32) -> usize {
        ring + LINE + slot as usize * self.layout.cell_stride()
    }

    /// At a ring's first use (by either end): the first page of every
    /// cell, which every frame touches, faulted in now. Each frame takes a
    /// cell of its own, so otherwise a pair's first `cells` frames each met
    /// fresh pages (about 3 us per page on this project's VM: a 4 KiB
    /// all-to-all on 2 ranks took 11-14 us per call for its first 14 calls,
    /// 1.3 after); the cost is the same, but paid once, with the first
    /// frame, not spread over the first pass. The rest of a cell, which only
    /// large frames use, still faults in as used.
    fn populate_cells(&self, ring: usize) {
        for slot in 0..self.layout.cells {
            let cell = self.cell(ring, slot);
            self.map.populate(cell, PAGE - cell % PAGE);
        }
    }

    /// The slot after `slot`.
    fn next_slot(&self, slot: u32) -> u32 {
        if slot + 1 == self.layout.cells {
            0
        } else {
            slot + 1
        }
    }

    /// Whether the ring to `peer` has a free cell, reading the consumer's
    /// head only when the cached copy says it is full.
    fn has_room(&mut self, peer: u32) -> bool {
        let cells = u64::from(self.layout.cells);
        let o = &self.out[peer as usize];
        if o.pos - o.head < cells {
            return true;
        }
        let head = self.map.u64_at(o.ring).load(Ordering::Acquire);
        self.out[peer as usize].head = head;
        self.out[peer as usize].pos - head < cells
    }

    /// Writes a frame that fits one cell straight into the ring to `peer`
    /// if nothing is queued before it and a cell is free; returns whether it
    /// did (the payload is then no longer needed). Otherwise nothing happens.
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes during the call.
    pub unsafe fn try_send(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
    ) -> Result<bool, Error> {
        if let Some(why) = &self.lost[peer as usize] {
            return Err(Error::new(ErrorClass::ProcAborted, why.clone()));
        }
        if len > self.layout.cell_capacity()
            || !self.out[peer as usize].queue.is_empty()
            || !self.has_room(peer)
        {
            return Ok(false);
        }
        let o = &self.out[peer as usize];
        let (ring, pos, slot) = (o.ring, o.pos, o.slot);
        // SAFETY: the cell is free; the caller keeps `payload` valid for
        // `len` bytes, and `len` fits the cell.
        unsafe { self.write_cell(ring, pos, slot, Some(&header.encode()), payload, len) };
        let next = self.next_slot(slot);
        let o = &mut self.out[peer as usize];
        o.pos = pos + 1;
        o.slot = next;
        self.wake_if_sleeping(peer, starts_rendezvous(header.kind as u8));
        Ok(true)
    }

    /// Queues a frame to local rank `peer` and pushes what fits at once.
    /// `payload` must stay valid for `len` bytes until the frame is done
    /// (as for the TCP transport's `send`, whose contract this shares).
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn send(
        &mut self,
        peer: u32,
        header: &Header,
        payload: *const u8,
        len: usize,
        token: Option<u64>,
    ) -> Result<SendState, Error> {
        // Fast path: a frame that fits one free cell goes straight in.
        // SAFETY: the caller keeps `payload` valid for `len` bytes.
        if unsafe { self.try_send(peer, header, payload, len)? } {
            return Ok(SendState::Done);
        }
        let q = &mut self.out[peer as usize].queue;
        q.push_back(OutFrame {
            header: header.encode(),
            payload,
            len,
            header_sent: false,
            sent: 0,
            token,
        });
        if q.len() == 1 {
            self.push(peer, None);
            if self.out[peer as usize].queue.is_empty() {
                return Ok(SendState::Done);
            }
        }
        Ok(SendState::Queued)
    }

    /// Copies queued frames into free cells; returns whether any cell was
    /// published. Completed frames with tokens are reported to `sink`
    /// (without one, the caller learns it from the emptied queue).
    fn push(&mut self, peer: u32, mut sink: Option<&mut dyn FrameSink>) -> bool {
        let cap = self.layout.cell_capacity();
        let mut published = false;
        let mut rndv = false;
        loop {
            if self.out[peer as usize].queue.is_empty() || !self.has_room(peer) {
                break;
            }
            let o = &self.out[peer as usize];
            let (ring, pos, slot) = (o.ring, o.pos, o.slot);
            let f = o.queue.front().expect("queue is not empty");
            let chunk = (f.len - f.sent).min(cap);
            let header = (!f.header_sent).then_some(f.header);
            rndv |= header.is_some_and(|h| starts_rendezvous(h[1]));
            // SAFETY: `sent + chunk <= len`, so the pointer stays inside the
            // payload.
            let data = unsafe { f.payload.add(f.sent) };
            // SAFETY: `has_room`, so the cell is ours; the payload is valid
            // until the frame is done (the contract of `send`).
            unsafe { self.write_cell(ring, pos, slot, header.as_ref(), data, chunk) };
            published = true;
            let next = self.next_slot(slot);
            let o = &mut self.out[peer as usize];
            o.pos = pos + 1;
            o.slot = next;
            let f = self.out[peer as usize]
                .queue
                .front_mut()
                .expect("front exists");
            f.header_sent = true;
            f.sent += chunk;
            if f.sent == f.len {
                let f = self.out[peer as usize]
                    .queue
                    .pop_front()
                    .expect("front exists");
                if let (Some(t), Some(s)) = (f.token, sink.as_deref_mut()) {
                    s.on_send_done(t);
                }
            }
        }
        if published {
            self.wake_if_sleeping(peer, rndv);
        }
        published
    }

    /// Fills the cell at `pos` of `ring` and publishes it.
    ///
    /// # Safety
    /// The cell must be free (`pos - head < cells`, so it belongs to this
    /// producer), `chunk` must fit it, and `data` must be valid for `chunk`
    /// bytes.
    #[allow(clippy::too_many_arguments)]
    unsafe fn write_cell(
        &self,
        ring: usize,
        pos: u64,
        slot: u32,
        header: Option<&[u8; HEADER_LEN]>,
        data: *const u8,
        chunk: usize,
    ) {
        if pos == 0 {
            self.populate_cells(ring);
        }
        let cell = self.cell(ring, slot);
        let short = header.is_some_and(|h| fits_short(h, chunk));
        let (flags, at) = match header {
            None => (0, CELL_HEADER),
            Some(_) if short => (FLAG_FIRST | FLAG_SHORT, CELL_SHORT_INLINE),
            Some(_) if chunk <= INLINE_MAX => (FLAG_FIRST | FLAG_INLINE, CELL_INLINE),
            Some(_) => (FLAG_FIRST, CELL_HEADER),
        };
        // SAFETY: the cell lies inside the segment and is ours to fill (the
        // caller's promise); the copies stay within it. (Fixed lengths: a
        // header copy of a known size is a few moves, not a call.)
        unsafe {
            let base = self.map.at(cell);
            match header {
                Some(h) if short => {
                    std::ptr::copy_nonoverlapping(h.as_ptr(), base.add(CELL_FRAME), SHORT_HEADER)
                }
                Some(h) => {
                    std::ptr::copy_nonoverlapping(h.as_ptr(), base.add(CELL_FRAME), HEADER_LEN)
                }
                None => {}
            }
            copy_bytes(data, base.add(at), chunk);
        }
        self.map
            .u32_at(cell + CELL_CHUNK)
            .store(chunk as u32, Ordering::Relaxed);
        self.map
            .u32_at(cell + CELL_FLAGS)
            .store(flags, Ordering::Relaxed);
        // The one release store that hands the cell to the consumer.
        self.map
            .u64_at(cell + CELL_SEQ)
            .store(pos + 1, Ordering::Release);
    }

    /// Wakes each of `peers` (this rank aside) that sleeps, for something
    /// it polls outside the rings, with one fence for all.
    pub fn wake_each(&self, peers: impl Iterator<Item = u32>) {
        // As in `wake_if_sleeping`.
        fence(Ordering::SeqCst);
        for peer in peers.filter(|&p| p != self.me) {
            self.ring_if_sleeping(peer, false);
        }
    }

    /// Wakes `peer` if it sleeps, and its helper thread if that waits for
    /// what was just published (`rndv`: a rendezvous start among it).
    fn wake_if_sleeping(&self, peer: u32, rndv: bool) {
        // Pairs with the fence in `prepare_sleep` (and `arm_helper`): either
        // the sleeper sees our cell, or we see its flag.
        fence(Ordering::SeqCst);
        self.ring_if_sleeping(peer, rndv);
    }

    /// The part of [`ShmTransport::wake_if_sleeping`] after the fence.
    fn ring_if_sleeping(&self, peer: u32, rndv: bool) {
        let flag = self
            .map
            .u32_at(self.layout.ctrl(peer) + C_SLEEPING)
            .load(Ordering::Relaxed);
        if flag == 0 {
            return;
        }
        if flag & WAKE_OWNER != 0 {
            ring(self.wake[peer as usize].as_raw_fd());
        }
        let helper = flag & WAKE_HELPER_ANY != 0 || (rndv && flag & WAKE_HELPER_RNDV != 0);
        if let (true, Some(fd)) = (helper, self.helper_wake.get(peer as usize)) {
            ring(fd.as_raw_fd());
        }
    }

    /// This rank's wake-up word.
    fn wake_word(&self) -> &AtomicU32 {
        self.map.u32_at(self.layout.ctrl(self.me) + C_SLEEPING)
    }

    /// Whether a peer's ring has a cell for this rank, or a ring to a peer
    /// has room for frames waiting to leave.
    fn has_news(&self) -> bool {
        (0..self.layout.local_size).any(|p| {
            p != self.me && self.lost[p as usize].is_none() && (self.ready(p) || self.can_push(p))
        })
    }

    /// Asks peers to ring this rank's helper doorbell for the frames
    /// `bits` names (`WAKE_HELPER_ANY` or `WAKE_HELPER_RNDV`); returns false
    /// (the request stays) if something is already there to be handled.
    /// Only the owner of the communication state calls this.
    pub fn arm_helper(&mut self, bits: u32) -> bool {
        let w = self.wake_word();
        w.store(w.load(Ordering::Relaxed) | bits, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        !self.has_news()
    }

    /// Rings this rank's own helper doorbell (the owner leaves work to it).
    pub fn ring_own_helper(&self) {
        if let Some(fd) = self.helper_fd() {
            ring(fd);
        }
    }

    /// Withdraws `bits` of [`ShmTransport::arm_helper`] (only the owner of
    /// the communication state calls this).
    pub fn disarm_helper(&mut self, bits: u32) {
        let w = self.wake_word();
        let v = w.load(Ordering::Relaxed);
        if v & bits != 0 {
            w.store(v & !bits, Ordering::Relaxed);
        }
    }

    /// Whether frames wait for the ring to `peer` and it has a free cell.
    fn can_push(&self, peer: u32) -> bool {
        let o = &self.out[peer as usize];
        !o.queue.is_empty() && {
            let head = self.map.u64_at(o.ring).load(Ordering::Acquire);
            o.pos - head < u64::from(self.layout.cells)
        }
    }

    /// Whether the ring from `peer` has a cell ready.
    fn ready(&self, peer: u32) -> bool {
        let i = &self.inb[peer as usize];
        self.map
            .u64_at(self.cell(i.ring, i.slot) + CELL_SEQ)
            .load(Ordering::Acquire)
            == i.pos + 1
    }

    /// Drives every ring once: pushes queued frames and delivers arrived ones.
    pub fn progress(&mut self, sink: &mut dyn FrameSink) -> bool {
        let mut did = false;
        let mut i = 0;
        while let Some(&peer) = self.live.get(i) {
            i += 1;
            if !self.out[peer as usize].queue.is_empty() {
                did |= self.push(peer, Some(&mut *sink));
            }
            // An empty ring costs one load.
            if !self.ready(peer) {
                continue;
            }
            match self.poll_ring(peer, sink) {
                Polled::Idle => {}
                Polled::Worked => did = true,
                Polled::Malformed(why) => {
                    let reason = format!(
                        "rank {} sent a malformed frame: {why}",
                        self.world[peer as usize]
                    );
                    self.mark_lost(peer, &reason, sink);
                    // It left `live`: the next peer moved into its place.
                    i -= 1;
                    did = true;
                }
            }
        }
        did
    }

    /// Delivers every ready cell from `peer`.
    fn poll_ring(&mut self, peer: u32, sink: &mut dyn FrameSink) -> Polled {
        // Before any cell of the peer's is released (see `publish_advert`).
        self.withdraw_advert(peer);
        let ring = self.inb[peer as usize].ring;
        let cap = self.layout.cell_capacity();
        let world = self.world[peer as usize];
        let mut worked = false;
        loop {
            let (pos, slot) = (self.inb[peer as usize].pos, self.inb[peer as usize].slot);
            let cell = self.cell(ring, slot);
            if self.map.u64_at(cell + CELL_SEQ).load(Ordering::Acquire) != pos + 1 {
                if worked {
                    // The producer may be asleep waiting for the cells we
                    // freed. No fence before looking (it would hold this
                    // rank until its stores land, on the path from a
                    // message to the answer): a producer that arms its sleep
                    // while our release is still unseen sleeps at most
                    // `QUEUED_SLEEP_MS` (see `Engine::sleep_armed`), and so
                    // does its progress helper thread: a stall in a rare
                    // race, never a hang.
                    self.ring_if_sleeping(peer, false);
                    return Polled::Worked;
                }
                return Polled::Idle;
            }
            if pos == 0 {
                self.populate_cells(ring);
            }
            let chunk = self.map.u32_at(cell + CELL_CHUNK).load(Ordering::Relaxed) as usize;
            let flags = self.map.u32_at(cell + CELL_FLAGS).load(Ordering::Relaxed);
            let inline = flags == FLAG_FIRST | FLAG_INLINE;
            let short = flags == FLAG_FIRST | FLAG_SHORT;
            if chunk > cap
                || (flags & !FLAG_FIRST != 0
                    && !(inline && chunk <= INLINE_MAX)
                    && !(short && chunk <= SHORT_INLINE_MAX))
            {
                return Polled::Malformed(format!("cell with chunk {chunk} and flags {flags:#x}"));
            }
            let first = flags & FLAG_FIRST != 0;
            let data = self.map.at(cell
                + match (inline, short) {
                    (true, _) => CELL_INLINE,
                    (_, true) => CELL_SHORT_INLINE,
                    _ => CELL_HEADER,
                });
            let inb = &mut self.inb[peer as usize];
            match &mut inb.rx {
                Rx::Header => {
                    if !first {
                        return Polled::Malformed(
                            "continuation cell where a frame should start".into(),
                        );
                    }
                    let mut bytes = [0u8; HEADER_LEN];
                    // SAFETY: the published cell is ours to read until we
                    // release it; the header lies inside the cell (a short
                    // one's is followed by payload, inside it too).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.map.at(cell + CELL_FRAME),
                            bytes.as_mut_ptr(),
                            HEADER_LEN,
                        )
                    };
                    if short {
                        // The rest of the header, as `fits_short` left it out.
                        bytes[16..24].copy_from_slice(&(chunk as u64).to_le_bytes());
                        bytes[24..].fill(0);
                    }
                    let h = match Header::decode(&bytes) {
                        Ok(h) => h,
                        Err(e) => return Polled::Malformed(e.to_string()),
                    };
                    if chunk as u64 > h.payload_len() {
                        return Polled::Malformed(
                            "cell carries more than the frame's payload".into(),
                        );
                    }
                    if !h.carries_payload() {
                        if h.kind == FrameKind::Claimed && !self.take_claim(peer, h.rreq) {
                            return Polled::Malformed(format!(
                                "claim of receive {:#x}, which was not advertised to it",
                                h.rreq
                            ));
                        }
                        if let Err(e) = sink.on_frame(world, &h, Payload::Empty) {
                            return Polled::Malformed(e);
                        }
                    } else if chunk as u64 == h.len {
                        // The whole payload is in this cell (every small
                        // message): delivered in one step, read from the
                        // cell, which is released afterwards.
                        // SAFETY: `chunk` bytes inside the published cell,
                        // ours until released.
                        let whole = unsafe { slice_of(data, chunk) };
                        match sink.on_whole_frame(world, &h, whole) {
                            Err(e) => return Polled::Malformed(e),
                            // Leave the cell unread: the sender is held back
                            // by the full ring until there is room above.
                            Ok(false) => return if worked { Polled::Worked } else { Polled::Idle },
                            Ok(true) => {
                                self.release(peer, ring, pos, slot);
                                worked = true;
                                continue;
                            }
                        }
                    } else {
                        match sink.on_header(world, &h) {
                            Err(e) => return Polled::Malformed(e),
                            Ok(PayloadDest::Pause) => {
                                return if worked { Polled::Worked } else { Polled::Idle }
                            }
                            Ok(dest) => {
                                let target = match dest {
                                    PayloadDest::Direct { ptr, cap } => RxTarget {
                                        ptr,
                                        cap,
                                        owned: None,
                                    },
                                    _ => {
                                        let mut v = vec![0u8; h.len as usize];
                                        RxTarget {
                                            ptr: v.as_mut_ptr(),
                                            cap: v.len(),
                                            owned: Some(v),
                                        }
                                    }
                                };
                                self.inb[peer as usize].rx = Rx::Payload {
                                    header: h,
                                    target,
                                    done: 0,
                                };
                            }
                        }
                    }
                }
                Rx::Payload { .. } if first => {
                    return Polled::Malformed("a frame started inside another".into());
                }
                Rx::Payload { .. } => {}
            }
            // Copy this cell's chunk into the frame being received.
            let inb = &mut self.inb[peer as usize];
            if let Rx::Payload {
                header,
                target,
                done,
            } = &mut inb.rx
            {
                if *done + chunk as u64 > header.len {
                    return Polled::Malformed("frame longer than its header says".into());
                }
                let pos_in = *done as usize;
                if pos_in < target.cap {
                    let n = chunk.min(target.cap - pos_in);
                    // SAFETY: the target is valid for `cap` bytes (the sink's
                    // promise, or our own Vec) and `pos_in + n <= cap`; the
                    // source lies inside the published cell.
                    unsafe { copy_bytes(data, target.ptr.add(pos_in), n) };
                }
                *done += chunk as u64;
                if *done == header.len {
                    let h = *header;
                    let Rx::Payload { target, .. } = std::mem::replace(&mut inb.rx, Rx::Header)
                    else {
                        unreachable!()
                    };
                    let payload = match target.owned {
                        Some(v) => Payload::Buffer(v),
                        None => Payload::Direct {
                            written: (h.len as usize).min(target.cap),
                        },
                    };
                    // Release the cell before the callback, which may send.
                    self.release(peer, ring, pos, slot);
                    worked = true;
                    if let Err(e) = sink.on_frame(world, &h, payload) {
                        return Polled::Malformed(e);
                    }
                    continue;
                }
            }
            self.release(peer, ring, pos, slot);
            worked = true;
        }
    }

    /// Hands the cell at `pos` of `peer`'s ring back to its producer.
    fn release(&mut self, peer: u32, ring: usize, pos: u64, slot: u32) {
        let next = self.next_slot(slot);
        let i = &mut self.inb[peer as usize];
        i.pos = pos + 1;
        i.slot = next;
        self.map.u64_at(ring).store(pos + 1, Ordering::Release);
    }

    /// Announces that this rank is about to sleep; returns false (and
    /// withdraws the announcement) if a cell arrived meanwhile.
    pub fn prepare_sleep(&mut self) -> bool {
        let ok = self.arm_helper(WAKE_OWNER);
        if !ok {
            self.disarm_helper(WAKE_OWNER);
        }
        ok
    }

    /// Withdraws the sleep announcement and drains the eventfd. (Only the
    /// owner bit: a helper's request to be woken stays.)
    pub fn after_sleep(&mut self) {
        self.disarm_helper(WAKE_OWNER);
        drain(self.wake_fd());
    }

    /// A local peer's process ended: deliver what it left in its ring, then
    /// report it lost.
    pub fn peer_exited(&mut self, peer: u32, sink: &mut dyn FrameSink) {
        if self.lost[peer as usize].is_some() {
            return;
        }
        if let Polled::Malformed(why) = self.poll_ring(peer, sink) {
            let reason = format!(
                "rank {} sent a malformed frame: {why}",
                self.world[peer as usize]
            );
            self.mark_lost(peer, &reason, sink);
            return;
        }
        let reason = format!(
            "rank {} (pid {}) has exited",
            self.world[peer as usize], self.pids[peer as usize]
        );
        self.mark_lost(peer, &reason, sink);
    }

    /// Asks the kernel, without waiting, which live local peers have
    /// exited (their pidfds are readable), and reports those (as
    /// [`ShmTransport::peer_exited`]); returns whether any had. For waits
    /// that do not sleep in an epoll set watching the pidfds.
    pub fn reap_exited(&mut self, sink: &mut dyn FrameSink) -> bool {
        let (peers, mut fds): (Vec<u32>, Vec<libc::pollfd>) = self
            .live
            .iter()
            .filter_map(|&p| {
                let fd = self.pidfds[p as usize].as_ref()?;
                let pfd = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                Some((p, pfd))
            })
            .unzip();
        // SAFETY: `fds` is valid for `fds.len()` entries; no wait.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        if n <= 0 {
            return false;
        }
        for (p, f) in peers.iter().zip(&fds) {
            if f.revents != 0 {
                self.peer_exited(*p, sink);
            }
        }
        true
    }

    fn mark_lost(&mut self, peer: u32, reason: &str, sink: &mut dyn FrameSink) {
        self.lost[peer as usize] = Some(reason.to_string());
        self.live.retain(|&p| p != peer);
        self.out[peer as usize].queue.clear();
        self.pidfds[peer as usize] = None;
        // Its heap's file lives on while mapped: let it go.
        self.heaps[peer as usize] = PeerHeap::default();
        sink.on_peer_lost(self.world[peer as usize], reason);
    }

    /// Whether frames are still waiting to leave.
    pub fn has_queued(&self) -> bool {
        self.out
            .iter()
            .enumerate()
            .any(|(i, o)| !o.queue.is_empty() && self.lost[i].is_none())
    }

    /// Reads `len` bytes at `addr` in local peer `peer`'s memory into `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` bytes, and not read or
    /// written otherwise during the call.
    pub unsafe fn read_remote(
        &mut self,
        peer: u32,
        addr: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<(), ReadRemoteError> {
        if let Some(why) = &self.lost[peer as usize] {
            return Err(ReadRemoteError::Failed(why.clone()));
        }
        // SAFETY: the caller's promise: `dst` holds `len` writable bytes.
        if unsafe { self.heap_copy(peer, addr, dst, len, false) } {
            return Ok(());
        }
        let r = read_process(self.pids[peer as usize], addr, dst, len);
        if matches!(r, Err(ReadRemoteError::NotPermitted)) {
            self.cma = false;
        }
        r
    }

    /// Writes `len` bytes from `src` to `addr` in local peer `peer`'s memory
    /// (the receiver asked for it: clear to write).
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes during the call.
    pub unsafe fn write_remote(
        &mut self,
        peer: u32,
        addr: u64,
        src: *const u8,
        len: usize,
    ) -> Result<(), ReadRemoteError> {
        if let Some(why) = &self.lost[peer as usize] {
            return Err(ReadRemoteError::Failed(why.clone()));
        }
        // SAFETY: the caller's promise: `src` holds `len` readable bytes.
        if unsafe { self.heap_copy(peer, addr, src as *mut u8, len, true) } {
            return Ok(());
        }
        let r = write_process(self.pids[peer as usize], addr, src, len);
        if matches!(r, Err(ReadRemoteError::NotPermitted)) {
            self.cma = false;
        }
        r
    }

    /// The frame at the head of the ring from local rank `peer`, if a whole
    /// control frame (one without payload) has arrived there and nothing of
    /// the ring is half-read. For the signal handler: it reads shared memory
    /// and a stack copy only, and leaves the frame in place.
    pub fn peek_control(&self, peer: u32) -> Option<Header> {
        if peer == self.me
            || self.lost[peer as usize].is_some()
            || !matches!(self.inb[peer as usize].rx, Rx::Header)
            || !self.ready(peer)
        {
            return None;
        }
        let ring = self.layout.ring(peer, self.me);
        let cell = self.cell(ring, self.inb[peer as usize].slot);
        let chunk = self.map.u32_at(cell + CELL_CHUNK).load(Ordering::Relaxed);
        let flags = self.map.u32_at(cell + CELL_FLAGS).load(Ordering::Relaxed);
        if chunk != 0 || flags & FLAG_FIRST == 0 {
            return None;
        }
        let mut bytes = [0u8; HEADER_LEN];
        // SAFETY: the cell is published (`ready`) and ours to read until we
        // release it; the header lies inside it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.map.at(cell + CELL_FRAME),
                bytes.as_mut_ptr(),
                HEADER_LEN,
            )
        };
        Header::decode(&bytes).ok().filter(|h| !h.carries_payload())
    }

    /// Consumes the frame [`ShmTransport::peek_control`] returned.
    pub fn consume_control(&mut self, peer: u32) {
        self.withdraw_advert(peer);
        let ring = self.layout.ring(peer, self.me);
        let (pos, slot) = (self.inb[peer as usize].pos, self.inb[peer as usize].slot);
        self.release(peer, ring, pos, slot);
        self.wake_if_sleeping(peer, false);
    }

    /// Whether a control frame to `peer` would go out at once (nothing
    /// queued before it, and a free cell).
    pub fn can_send_now(&self, peer: u32) -> bool {
        self.lost[peer as usize].is_none() && self.out[peer as usize].queue.is_empty() && {
            let ring = self.layout.ring(self.me, peer);
            let head = self.map.u64_at(ring).load(Ordering::Acquire);
            self.out[peer as usize].pos - head < u64::from(self.layout.cells)
        }
    }
}

/// Advertised receives: a sender on this host that finds its message's
/// receive already posted writes the message straight into it, with no
/// rendezvous and nothing asked of the receiving process (p2p/advert.rs
/// says when the receiver advertises). The matching rule stays the
/// receiver's: it advertises only a receive that every message from that
/// sender not yet matched would meet first, and the sender claims it only
/// when the receiver has consumed every frame it sent before. Two rules keep
/// a claim from racing with the receiver's own matching:
///
/// * the receiver withdraws its advertisement (one compare-and-swap on the
///   state word) before it releases any cell of the sender's ring, so a
///   sender that sees its ring emptied sees the withdrawal too (the
///   release store of the ring head orders them);
/// * withdrawal and claim are compare-and-swaps of the same word from the
///   same generation: exactly one succeeds.
impl ShmTransport {
    fn advert_word(&self, receiver: u32, sender: u32, field: usize) -> &AtomicU64 {
        self.map
            .u64_at(self.layout.advert(receiver, sender) + field)
    }

    /// Advertises posted receive `ad` to local rank `peer`; false if one is
    /// out already (or claimed), the peer is gone, or the peer could not
    /// write into this process (single copy refused here).
    pub fn publish_advert(&mut self, peer: u32, ad: &Advert) -> bool {
        if peer == self.me
            || !self.cma
            || self.lost[peer as usize].is_some()
            || self.adverts[peer as usize].is_some()
        {
            return false;
        }
        self.advert_generation += 1;
        let generation = self.advert_generation;
        // Pairs with the fence in `claim_advert`: a sender that reads any of
        // the new fields sees the earlier withdrawal and cannot claim the
        // old generation.
        fence(Ordering::Release);
        let me = self.me;
        self.advert_word(me, peer, A_KEY0)
            .store(ad.key[0], Ordering::Relaxed);
        self.advert_word(me, peer, A_KEY1)
            .store(ad.key[1], Ordering::Relaxed);
        self.advert_word(me, peer, A_RREQ)
            .store(ad.rreq, Ordering::Relaxed);
        self.advert_word(me, peer, A_ADDR)
            .store(ad.addr, Ordering::Relaxed);
        self.advert_word(me, peer, A_CAP)
            .store(ad.cap, Ordering::Relaxed);
        self.advert_word(me, peer, A_STATE)
            .store(generation << 2 | ADVERT_OPEN, Ordering::Release);
        self.adverts[peer as usize] = Some(Published {
            generation,
            rreq: ad.rreq,
            claimed: false,
        });
        true
    }

    /// Takes back the advertisement to local rank `peer`, unless it was
    /// claimed: returns the claimed receive then (its CLAIMED frame is on
    /// the way), else `None`.
    pub fn withdraw_advert(&mut self, peer: u32) -> Option<u64> {
        let p = self.adverts[peer as usize]?;
        if p.claimed {
            return Some(p.rreq);
        }
        let open = p.generation << 2 | ADVERT_OPEN;
        let withdrawn = self
            .advert_word(self.me, peer, A_STATE)
            .compare_exchange(
                open,
                p.generation << 2 | ADVERT_NONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if withdrawn {
            self.adverts[peer as usize] = None;
            None
        } else {
            // Only the sender changes an open advertisement: it claimed it.
            self.adverts[peer as usize] = Some(Published { claimed: true, ..p });
            Some(p.rreq)
        }
    }

    /// A CLAIMED frame from local rank `peer` for receive `rreq`: whether
    /// that receive was advertised to it and claimed; clears the slot.
    pub fn take_claim(&mut self, peer: u32, rreq: u64) -> bool {
        let Some(p) = self.adverts[peer as usize] else {
            return false;
        };
        let claimed = p.generation << 2 | ADVERT_CLAIMED;
        let word = self.advert_word(self.me, peer, A_STATE);
        if p.rreq != rreq || word.load(Ordering::Acquire) != claimed {
            return false;
        }
        word.store(p.generation << 2 | ADVERT_NONE, Ordering::Relaxed);
        self.adverts[peer as usize] = None;
        true
    }

    /// Claims the receive local rank `peer` advertised to this rank if a
    /// message of `len` bytes fits it and `meets` says the message meets
    /// its key, every frame sent to `peer` before has been consumed, and
    /// this rank may write into `peer`: returns the receive and its
    /// buffer's address. The caller must then write the message there (or
    /// send it) and send CLAIMED.
    pub fn claim_advert(
        &mut self,
        peer: u32,
        len: u64,
        meets: impl FnOnce([u64; 2]) -> bool,
    ) -> Option<(u64, u64)> {
        if peer == self.me
            || !self.cma
            || self.lost[peer as usize].is_some()
            || !self.out[peer as usize].queue.is_empty()
        {
            return None;
        }
        let state = self
            .advert_word(peer, self.me, A_STATE)
            .load(Ordering::Acquire);
        if state & 3 != ADVERT_OPEN {
            return None;
        }
        let o = &self.out[peer as usize];
        if self.map.u64_at(o.ring).load(Ordering::Acquire) != o.pos {
            return None;
        }
        let key = [
            self.advert_word(peer, self.me, A_KEY0)
                .load(Ordering::Relaxed),
            self.advert_word(peer, self.me, A_KEY1)
                .load(Ordering::Relaxed),
        ];
        let rreq = self
            .advert_word(peer, self.me, A_RREQ)
            .load(Ordering::Relaxed);
        let addr = self
            .advert_word(peer, self.me, A_ADDR)
            .load(Ordering::Relaxed);
        let cap = self
            .advert_word(peer, self.me, A_CAP)
            .load(Ordering::Relaxed);
        // Pairs with the fence in `publish_advert`: fields read from a newer
        // advertisement make the claim below fail.
        fence(Ordering::Acquire);
        if len > cap || !meets(key) {
            return None;
        }
        self.advert_word(peer, self.me, A_STATE)
            .compare_exchange(
                state,
                (state & !3) | ADVERT_CLAIMED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .ok()?;
        Some((rreq, addr))
    }
}

/// Copy help: the receiver of a single-copy message reads it chunk by chunk
/// and invites its sender, which usually waits in the library for the read
/// to end, to write chunks into the receive buffer meanwhile
/// (`process_vm_writev`): two CPUs copy instead of one. Both claim chunks
/// from one counter in the pair's slot, so a sender that is busy (or never
/// looks) leaves every chunk to the receiver, and one that comes late finds
/// nothing left. The counter carries the generation of the copy, so a late
/// invitation cannot claim a chunk of a later copy; the receiver opens the
/// next copy only after the sender wrote every chunk it claimed.
impl ShmTransport {
    /// This rank's index among the ranks of its host.
    pub fn me(&self) -> u32 {
        self.me
    }

    fn help_word(&self, receiver: u32, sender: u32, field: usize) -> &AtomicU64 {
        self.map.u64_at(self.layout.help(receiver, sender) + field)
    }

    /// Opens a copy of `chunks` chunks from local rank `peer` that it may
    /// help with; its generation, or `None` if one is open with it already
    /// (or it is gone).
    pub fn open_help(&mut self, peer: u32, chunks: u32) -> Option<u32> {
        if peer == self.me
            || chunks == 0
            || chunks >= HELP_FAILED
            || self.helping[peer as usize]
            || self.lost[peer as usize].is_some()
        {
            return None;
        }
        self.help_generation = self.help_generation.wrapping_add(1).max(1);
        let generation = u64::from(self.help_generation) << 32;
        let me = self.me;
        self.help_word(me, peer, C_HELPED)
            .store(generation, Ordering::Relaxed);
        // Release: a sender that claims under this generation sees the
        // helped count reset.
        self.help_word(me, peer, C_CLAIM)
            .store(generation, Ordering::Release);
        self.helping[peer as usize] = true;
        Some(self.help_generation)
    }

    /// Claims the next chunk of copy `generation` between `receiver` and
    /// `sender` (this rank is one of them), if any is left.
    pub fn claim_chunk(
        &self,
        receiver: u32,
        sender: u32,
        generation: u32,
        chunks: u32,
    ) -> Option<u32> {
        let word = self.help_word(receiver, sender, C_CLAIM);
        let mut v = word.load(Ordering::Acquire);
        loop {
            if (v >> 32) as u32 != generation || v as u32 >= chunks {
                return None;
            }
            match word.compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(v as u32),
                Err(now) => v = now,
            }
        }
    }

    /// Claims every chunk left of the copy with local rank `peer` (the
    /// receiver's read failed): how many it took.
    pub fn claim_rest(&self, peer: u32, generation: u32, chunks: u32) -> u32 {
        let word = self.help_word(self.me, peer, C_CLAIM);
        let all = u64::from(generation) << 32 | u64::from(chunks);
        let mut v = word.load(Ordering::Acquire);
        loop {
            if (v >> 32) as u32 != generation || v as u32 >= chunks {
                return 0;
            }
            match word.compare_exchange_weak(v, all, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return chunks - v as u32,
                Err(now) => v = now,
            }
        }
    }

    /// The sender's side: a chunk it claimed of local rank `receiver`'s copy
    /// `generation` is done, `written` or not (then the sender stops).
    pub fn report_helped(&self, receiver: u32, generation: u32, written: bool) {
        let word = self.help_word(receiver, self.me, C_HELPED);
        // Only the receiver resets the word, and only after this sender
        // reported every chunk it claimed: the generation still holds.
        debug_assert_eq!((word.load(Ordering::Relaxed) >> 32) as u32, generation);
        let add = if written { 1 } else { 1 + HELP_FAILED };
        // Release: the receiver that sees the count sees the bytes written.
        word.fetch_add(u64::from(add), Ordering::Release);
    }

    /// The receiver's side: chunks of the open copy local rank `peer` is
    /// done with so far, with [`HELP_FAILED`] added if it failed to write one.
    pub fn helped(&self, peer: u32) -> u32 {
        self.help_word(self.me, peer, C_HELPED)
            .load(Ordering::Acquire) as u32
    }

    /// Copies `len` bytes between `local` and `addr` in local peer `peer`'s
    /// memory with `memcpy`, when that range lies in the peer's shared heap
    /// and the heap can be mapped here: to the peer when `to_peer`, else
    /// from it. False (nothing copied) otherwise: the caller then uses the
    /// cross-process copy, which also reports a range the peer does not have.
    ///
    /// # Safety
    /// `local` must hold `len` bytes, writable when reading from the peer.
    unsafe fn heap_copy(
        &mut self,
        peer: u32,
        addr: u64,
        local: *mut u8,
        len: usize,
        to_peer: bool,
    ) -> bool {
        let pid = self.pids[peer as usize];
        let h = &mut self.heaps[peer as usize];
        let off = addr.wrapping_sub(h.base);
        if len == 0 || off >= h.len || len as u64 > h.len - off {
            return false;
        }
        if h.file.is_none() {
            match crate::shared_mapping::open_of_process(pid as u32, h.fd, h.len as usize) {
                Ok(f) => h.file = Some(f),
                Err(_) => {
                    *h = PeerHeap::default();
                    return false;
                }
            }
            h.windows = (0..h.len / HEAP_WINDOW).map(|_| None).collect();
        }
        let fd = h.file.as_ref().map_or(-1, |f| f.as_raw_fd());
        let (first, last) = (off / HEAP_WINDOW, (off + len as u64 - 1) / HEAP_WINDOW);
        for w in first..=last {
            let slot = &mut h.windows[w as usize];
            if slot.is_none() {
                match SharedMapping::new_at(fd, w * HEAP_WINDOW, HEAP_WINDOW as usize) {
                    Ok(m) => *slot = Some(m),
                    Err(_) => {
                        // No room here: the kernel copy, from now on (the
                        // file and the windows mapped so far go).
                        *h = PeerHeap::default();
                        return false;
                    }
                }
            }
        }
        let mut done = 0usize;
        while done < len {
            let at = off + done as u64;
            let w = h.windows[(at / HEAP_WINDOW) as usize]
                .as_ref()
                .expect("mapped above");
            let in_window = (at % HEAP_WINDOW) as usize;
            let n = (len - done).min(HEAP_WINDOW as usize - in_window);
            // SAFETY: `in_window + n` lies inside the window; `local` holds
            // `len` bytes (the caller's promise). The peer's pages are
            // those of the message it told us about, which it leaves alone
            // until the copy is reported done.
            unsafe {
                let theirs = w.base().add(in_window);
                let ours = local.add(done);
                if to_peer {
                    copy_bytes(ours, theirs, n);
                } else {
                    copy_bytes(theirs, ours, n);
                }
            }
            done += n;
        }
        self.heap_copies += 1;
        true
    }

    /// Closes the copy with local rank `peer` (every chunk it claimed is
    /// written, or it is lost): another may open.
    pub fn close_help(&mut self, peer: u32) {
        self.helping[peer as usize] = false;
    }
}
/// Adds one to an eventfd (wakes whoever waits on it).
fn ring(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we hold;
    // `write` is async-signal-safe.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Empties a non-blocking eventfd.
pub fn drain(fd: RawFd) {
    let mut buf = 0u64;
    // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd.
    unsafe { libc::read(fd, (&mut buf as *mut u64).cast(), 8) };
}

/// Copies `len` bytes from `src` to `addr` in process `pid` (single copy,
/// by the sender).
fn write_process(pid: i32, addr: u64, src: *const u8, len: usize) -> Result<(), ReadRemoteError> {
    copy_process(pid, addr, src as *mut u8, len, true)
}

/// A slice of `n` bytes at `p` (empty when `n == 0`, whatever `p` is).
///
/// # Safety
/// For `n > 0`, `p` must be valid for reads of `n` bytes for `'a`.
unsafe fn slice_of<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// Copies `len` bytes at `addr` in process `pid` to `dst` (single copy).
fn read_process(pid: i32, addr: u64, dst: *mut u8, len: usize) -> Result<(), ReadRemoteError> {
    copy_process(pid, addr, dst, len, false)
}

/// Copies `len` bytes between `local` here and `addr` in process `pid`:
/// to the peer when `to_peer`, else from it.
fn copy_process(
    pid: i32,
    addr: u64,
    local: *mut u8,
    len: usize,
    to_peer: bool,
) -> Result<(), ReadRemoteError> {
    let what = if to_peer { "write to" } else { "read from" };
    let mut done = 0usize;
    while done < len {
        let here = libc::iovec {
            // SAFETY: `done < len`; the caller guarantees `local` holds `len`
            // bytes (readable for a write, writable for a read).
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: len - done,
        };
        let there = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: the local iovec describes memory of the caller as above;
        // the kernel validates the remote one against the peer's mappings.
        let n = unsafe {
            if to_peer {
                libc::process_vm_writev(pid, &here, 1, &there, 1, 0)
            } else {
                libc::process_vm_readv(pid, &here, 1, &there, 1, 0)
            }
        };
        if n < 0 {
            let e = errno();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::ENOSYS) | Some(libc::EACCES) => {
                    ReadRemoteError::NotPermitted
                }
                _ => ReadRemoteError::Failed(format!("single-copy {what} pid {pid} failed: {e}")),
            });
        }
        if n == 0 {
            return Err(ReadRemoteError::Failed(format!(
                "single-copy {what} pid {pid} made no progress"
            )));
        }
        done += n as usize;
    }
    Ok(())
}

/// Whether this kernel lets a process read a sibling's memory with
/// `process_vm_readv` (containers and hardened kernels often refuse).
/// Forks two children and lets one read the other.
pub fn single_copy_permitted() -> bool {
    let value: u64 = PROBE_VALUE;
    let addr = &value as *const u64 as u64;
    // SAFETY: the child only sleeps and exits (async-signal-safe calls).
    let target = unsafe { libc::fork() };
    if target < 0 {
        return false;
    }
    if target == 0 {
        // SAFETY: async-signal-safe calls only.
        unsafe {
            libc::sleep(5);
            libc::_exit(0);
        }
    }
    // SAFETY: as above; the reader makes one syscall and exits.
    let reader = unsafe { libc::fork() };
    if reader == 0 {
        let mut got = 0u64;
        let ok = read_process(target, addr, (&mut got as *mut u64).cast(), 8).is_ok()
            && got == PROBE_VALUE;
        // SAFETY: async-signal-safe exit.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    let ok = if reader > 0 {
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(reader, &mut status, 0) };
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    } else {
        false
    };
    // SAFETY: killing and reaping our own child.
    unsafe {
        libc::kill(target, libc::SIGKILL);
        libc::waitpid(target, &mut status, 0);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FrameKind;

    #[derive(Default)]
    struct Recorder {
        frames: Vec<(u32, Header, Vec<u8>)>,
        done: Vec<u64>,
        lost: Vec<(u32, String)>,
    }

    impl FrameSink for Recorder {
        fn on_header(&mut self, _peer: u32, _h: &Header) -> Result<PayloadDest, String> {
            Ok(PayloadDest::Buffer)
        }
        fn on_frame(&mut self, peer: u32, h: &Header, payload: Payload) -> Result<(), String> {
            let data = match payload {
                Payload::Buffer(v) => v,
                _ => Vec::new(),
            };
            self.frames.push((peer, *h, data));
            Ok(())
        }
        fn on_send_done(&mut self, token: u64) {
            self.done.push(token);
        }
        fn on_peer_lost(&mut self, peer: u32, reason: &str) {
            self.lost.push((peer, reason.to_string()));
        }
    }

    /// Two ranks of one host inside this process (world ranks 10 and 11).
    fn pair(cells: u32, cell_size: u32) -> (ShmTransport, ShmTransport) {
        let host = HostResources::create(Layout::new(2, cells, cell_size).unwrap()).unwrap();
        let attach = |me: u32| {
            let seg = host.segment.try_clone().unwrap();
            let wake = host.wake.iter().map(|f| f.try_clone().unwrap()).collect();
            ShmTransport::attach_fds(10 + me, 2, me, seg, wake).unwrap()
        };
        let (mut a, mut b) = (attach(0), attach(1));
        a.connect(true, false).unwrap();
        b.connect(true, false).unwrap();
        assert_eq!(a.world_ranks(), &[10, 11]);
        (a, b)
    }

    fn eager(tag: i32, len: usize) -> Header {
        Header {
            kind: FrameKind::Eager,
            context: 0,
            src: 0,
            tag,
            len: len as u64,
            sreq: 0,
            rreq: 0,
        }
    }

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn frames_wrap_around_small_rings_intact_and_in_order() {
        let (mut a, mut b) = pair(4, 256);
        let (mut ra, mut rb) = (Recorder::default(), Recorder::default());
        let payloads: Vec<Vec<u8>> = (0..300usize)
            .map(|i| (0..(i * 331) % 5000).map(|j| (i * 7 + j) as u8).collect())
            .collect();
        for (i, p) in payloads.iter().enumerate() {
            a.send(
                1,
                &eager(i as i32, p.len()),
                p.as_ptr(),
                p.len(),
                Some(i as u64),
            )
            .unwrap();
        }
        let mut rounds = 0;
        while rb.frames.len() < payloads.len() {
            a.progress(&mut ra);
            b.progress(&mut rb);
            rounds += 1;
            assert!(rounds < 1_000_000, "ring exchange stalled");
        }
        for (i, (peer, h, data)) in rb.frames.iter().enumerate() {
            assert_eq!((*peer, h.tag), (10, i as i32));
            assert_eq!(data, &payloads[i], "frame {i}");
        }
        // Every frame not finished inside `send` was reported done, in order.
        assert!(ra.done.windows(2).all(|w| w[0] < w[1]));
        assert!(ra.lost.is_empty() && rb.lost.is_empty());
    }

    #[test]
    fn a_sleeping_receiver_is_woken_and_a_full_ring_wakes_its_producer() {
        let (mut a, mut b) = pair(2, 128);
        let (mut ra, mut rb) = (Recorder::default(), Recorder::default());
        assert!(b.prepare_sleep(), "nothing to do: may sleep");
        assert!(!readable(b.wake_fd()));
        let big = vec![3u8; 1000];
        a.send(1, &eager(1, big.len()), big.as_ptr(), big.len(), Some(7))
            .unwrap();
        assert!(
            readable(b.wake_fd()),
            "the sender wakes a sleeping receiver"
        );
        b.after_sleep();
        assert!(!readable(b.wake_fd()));
        // The ring is full and the frame is not done: the producer may sleep...
        assert!(a.prepare_sleep());
        // ...until the consumer frees cells.
        b.progress(&mut rb);
        assert!(
            readable(a.wake_fd()),
            "freeing cells wakes a sleeping producer"
        );
        a.after_sleep();
        while rb.frames.is_empty() {
            a.progress(&mut ra);
            b.progress(&mut rb);
        }
        assert_eq!(rb.frames[0].2, big);
        assert_eq!(ra.done, vec![7]);
    }

    fn control(kind: FrameKind) -> Header {
        Header {
            kind,
            len: 1 << 20,
            sreq: 9,
            ..eager(3, 0)
        }
    }

    #[test]
    fn helper_doorbells_ring_for_what_the_helper_asked() {
        let (mut a, mut b) = pair(8, 256);
        let bell = b.helper_fd().expect("the launcher makes doorbells");
        // Asking for rendezvous starts only: an eager frame does not ring,
        // an RTS does, and the owner's own eventfd stays quiet.
        assert!(b.arm_helper(WAKE_HELPER_RNDV));
        a.send(1, &eager(1, 3), b"abc".as_ptr(), 3, None).unwrap();
        assert!(!readable(bell));
        a.send(1, &control(FrameKind::Rts), std::ptr::null(), 0, None)
            .unwrap();
        assert!(readable(bell));
        assert!(!readable(b.wake_fd()));
        drain(bell);
        // Frames are waiting now: arming for any frame says so.
        assert!(!b.arm_helper(WAKE_HELPER_ANY));
        b.disarm_helper(WAKE_HELPER_ANY | WAKE_HELPER_RNDV);
        a.send(1, &control(FrameKind::Rts), std::ptr::null(), 0, None)
            .unwrap();
        assert!(!readable(bell), "a disarmed helper is not rung");
        // The owner sleeping and waking leaves the helper's request alone.
        let mut rb = Recorder::default();
        b.progress(&mut rb);
        assert!(b.arm_helper(WAKE_HELPER_ANY));
        assert!(b.prepare_sleep());
        b.after_sleep();
        a.send(1, &eager(2, 3), b"def".as_ptr(), 3, None).unwrap();
        assert!(readable(bell));
    }

    #[test]
    fn control_frames_are_peeked_in_place_and_consumed_once() {
        let (mut a, mut b) = pair(4, 256);
        a.send(1, &control(FrameKind::Rts), std::ptr::null(), 0, None)
            .unwrap();
        a.send(1, &eager(4, 3), b"xyz".as_ptr(), 3, None).unwrap();
        let h = b.peek_control(0).expect("an RTS at the head");
        assert_eq!((h.kind, h.sreq), (FrameKind::Rts, 9));
        assert_eq!(b.peek_control(0), Some(h), "peeking leaves it there");
        b.consume_control(0);
        assert_eq!(b.peek_control(0), None, "an eager frame is not control");
        let mut rb = Recorder::default();
        b.progress(&mut rb);
        assert_eq!(rb.frames.len(), 1, "the RTS was consumed once");
        assert_eq!(rb.frames[0].2, b"xyz");
        // A full ring cannot take a frame at once.
        assert!(a.can_send_now(1));
        for _ in 0..4 {
            a.send(1, &control(FrameKind::Rts), std::ptr::null(), 0, None)
                .unwrap();
        }
        assert!(!a.can_send_now(1));
    }

    #[test]
    fn copy_help_shares_each_chunk_once_and_only_within_its_generation() {
        // b (local 1) receives from a (local 0).
        let (a, mut b) = pair(4, 256);
        assert_eq!(b.open_help(1, 4), None, "no copy with oneself");
        let g = b.open_help(0, 4).unwrap();
        assert_eq!(b.open_help(0, 4), None, "one open copy per sender");
        let mut claimed = vec![b.claim_chunk(1, 0, g, 4).unwrap()];
        claimed.push(a.claim_chunk(1, 0, g, 4).unwrap());
        assert_eq!(
            a.claim_chunk(1, 0, g.wrapping_add(1), 4),
            None,
            "other generation"
        );
        claimed.push(a.claim_chunk(1, 0, g, 4).unwrap());
        claimed.push(b.claim_chunk(1, 0, g, 4).unwrap());
        assert_eq!(claimed, [0, 1, 2, 3]);
        assert_eq!(a.claim_chunk(1, 0, g, 4), None, "all claimed");
        assert_eq!(b.helped(0), 0);
        a.report_helped(1, g, true);
        a.report_helped(1, g, false);
        assert_eq!(b.helped(0), 2 + HELP_FAILED);
        b.close_help(0);
        // A later copy resets the count; a late invitation to the old one
        // claims nothing; the receiver can take the rest at once.
        let g2 = b.open_help(0, 3).unwrap();
        assert_ne!(g2, g);
        assert_eq!(b.helped(0), 0);
        assert_eq!(a.claim_chunk(1, 0, g, 4), None);
        assert_eq!(b.claim_chunk(1, 0, g2, 3), Some(0));
        assert_eq!(b.claim_rest(0, g2, 3), 2);
        assert_eq!(a.claim_chunk(1, 0, g2, 3), None);
        assert_eq!(b.claim_rest(0, g2, 3), 0);
    }

    #[test]
    fn advertised_receives_are_claimed_once_and_only_over_a_drained_ring() {
        let (mut a, mut b) = pair(4, 256);
        if !a.single_copy() {
            eprintln!("single copy is not permitted here; nothing to advertise");
            assert!(!b.publish_advert(0, &advert(1)));
            return;
        }
        let mut rb = Recorder::default();
        // b (receiver) advertises to a (sender); a frame of a's still in the
        // ring keeps a from claiming.
        a.send(1, &eager(4, 3), b"xyz".as_ptr(), 3, None).unwrap();
        assert!(b.publish_advert(0, &advert(1)));
        assert!(!b.publish_advert(0, &advert(2)), "one at a time");
        assert_eq!(a.claim_advert(1, 100, meets_key), None, "ring not drained");
        // Draining withdraws it before the frame is released.
        b.progress(&mut rb);
        assert_eq!(a.claim_advert(1, 100, meets_key), None, "withdrawn");
        assert!(b.publish_advert(0, &advert(3)));
        // The key reaches the sender's test as published; size must fit.
        assert_eq!(a.claim_advert(1, 100, |k| k == [7, 6]), None, "key refused");
        assert_eq!(a.claim_advert(1, 4097, meets_key), None, "too long");
        assert_eq!(a.claim_advert(1, 4096, meets_key), Some((3, 0x1000)));
        assert_eq!(a.claim_advert(1, 100, meets_key), None, "claimed once");
        // The receiver cannot take it back; its claim checks out once.
        assert_eq!(b.withdraw_advert(0), Some(3));
        assert!(!b.take_claim(0, 4), "a claim of another receive");
        assert!(b.take_claim(0, 3));
        assert!(!b.take_claim(0, 3), "cleared");
        assert_eq!(b.withdraw_advert(0), None);
        // A withdrawal that wins.
        assert!(b.publish_advert(0, &advert(5)));
        assert_eq!(b.withdraw_advert(0), None);
        assert_eq!(a.claim_advert(1, 100, meets_key), None);
        assert!(b.publish_advert(0, &advert(5)));
        assert_eq!(a.claim_advert(1, 100, meets_key), Some((5, 0x1000)));
    }

    fn meets_key(key: [u64; 2]) -> bool {
        key == [7, 5]
    }

    fn advert(rreq: u64) -> Advert {
        Advert {
            key: [7, 5],
            rreq,
            addr: 0x1000,
            cap: 4096,
        }
    }

    #[test]
    fn single_copy_writes_a_peer_buffer() {
        let (mut a, _b) = pair(4, 256);
        if !a.single_copy() {
            eprintln!("process_vm_writev is not permitted here; skipping");
            return;
        }
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        // SAFETY: `src` is a live buffer of the length given.
        unsafe { a.write_remote(1, dst.as_mut_ptr() as u64, src.as_ptr(), src.len()) }.unwrap();
        assert_eq!(src, dst);
    }

    #[test]
    fn malformed_cells_are_reported_not_trusted() {
        let (mut a, mut b) = pair(4, 256);
        let mut rb = Recorder::default();
        a.send(1, &eager(1, 3), b"abc".as_ptr(), 3, None).unwrap();
        // Corrupt the published cell's frame header.
        let cell = a.cell(a.layout.ring(0, 1), 0);
        // SAFETY: the cell is inside the mapping; nobody reads it concurrently.
        unsafe { *a.map.at(cell + CELL_FRAME) = 0 };
        b.progress(&mut rb);
        assert!(rb.frames.is_empty());
        assert_eq!(rb.lost.len(), 1);
        assert!(rb.lost[0].1.contains("malformed"), "{}", rb.lost[0].1);
    }

    #[test]
    fn short_headers_are_only_for_frames_they_describe_whole() {
        let (mut a, mut b) = pair(4, 256);
        let flags_of = |t: &ShmTransport, slot: u32| {
            let cell = t.cell(t.layout.ring(0, 1), slot);
            t.map.u32_at(cell + CELL_FLAGS).load(Ordering::Relaxed)
        };
        let data: Vec<u8> = (1..=32).collect();
        // An eager message of 20 bytes: short form.
        a.send(1, &eager(5, 20), data.as_ptr(), 20, None).unwrap();
        assert_eq!(flags_of(&a, 0), FLAG_FIRST | FLAG_SHORT);
        // A put of 20 bytes names its target address: full header, own line.
        let put = Header {
            kind: FrameKind::Put,
            context: 3,
            src: 0,
            tag: 0,
            len: 20,
            sreq: 7,
            rreq: 0x1000,
        };
        a.send(1, &put, data.as_ptr(), 20, None).unwrap();
        assert_eq!(flags_of(&a, 1), FLAG_FIRST);
        let mut rb = Recorder::default();
        while rb.frames.len() < 2 {
            b.progress(&mut rb);
        }
        assert_eq!(rb.frames[0].1, eager(5, 20));
        assert_eq!(rb.frames[0].2, &data[..20]);
        assert_eq!(rb.frames[1].1, put);
        assert_eq!(rb.frames[1].2, &data[..20]);

        // A short cell claiming more than fits is malformed.
        a.send(1, &eager(7, 12), data.as_ptr(), 12, None).unwrap();
        let cell = a.cell(a.layout.ring(0, 1), 2);
        a.map
            .u32_at(cell + CELL_CHUNK)
            .store(SHORT_INLINE_MAX as u32 + 1, Ordering::Relaxed);
        b.progress(&mut rb);
        assert_eq!(rb.frames.len(), 2);
        assert!(rb.lost[0].1.contains("malformed"), "{:?}", rb.lost);
    }

    /// Lands every payload straight in a buffer of `cap` bytes per frame.
    struct Direct {
        cap: usize,
        bufs: Vec<Vec<u8>>,
        got: Vec<(i32, usize, Vec<u8>)>,
    }

    impl FrameSink for Direct {
        fn on_header(&mut self, _peer: u32, _h: &Header) -> Result<PayloadDest, String> {
            self.bufs.push(vec![0xee; self.cap]);
            let b = self.bufs.last_mut().unwrap();
            Ok(PayloadDest::Direct {
                ptr: b.as_mut_ptr(),
                cap: self.cap,
            })
        }
        fn on_frame(&mut self, _peer: u32, h: &Header, payload: Payload) -> Result<(), String> {
            let Payload::Direct { written } = payload else {
                return Err("expected a direct payload".into());
            };
            let b = self.bufs.last().unwrap().clone();
            self.got.push((h.tag, written, b));
            Ok(())
        }
        fn on_send_done(&mut self, _token: u64) {}
        fn on_peer_lost(&mut self, _peer: u32, reason: &str) {
            panic!("peer lost: {reason}");
        }
    }

    #[test]
    fn small_frames_travel_inline_and_land_directly() {
        let (mut a, mut b) = pair(4, 256);
        for cap in [0usize, 3, 8, 200] {
            let mut rb = Direct {
                cap,
                bufs: Vec::new(),
                got: Vec::new(),
            };
            // Inline (up to 8 bytes), inline with a short header (to 32),
            // one ordinary cell, and several cells.
            let lens = [
                0usize, 1, 2, 3, 4, 5, 7, 8, 9, 16, 24, 31, 32, 33, 100, 192, 193, 700,
            ];
            let payloads: Vec<Vec<u8>> = lens
                .iter()
                .map(|&n| (0..n).map(|j| (j * 13 + n) as u8).collect())
                .collect();
            for (i, p) in payloads.iter().enumerate() {
                let h = eager(i as i32, p.len());
                let mut sent = false;
                while !sent {
                    // SAFETY: `p` outlives the call.
                    sent = unsafe { a.try_send(1, &h, p.as_ptr(), p.len()) }.unwrap();
                    if !sent {
                        // Too big for a cell, or the ring is full: queue it
                        // and let the receiver drain.
                        if a.send(1, &h, p.as_ptr(), p.len(), None).unwrap() == SendState::Queued {
                            while a.has_queued() {
                                a.progress(&mut Recorder::default());
                                b.progress(&mut rb);
                            }
                        }
                        sent = true;
                    }
                }
            }
            while rb.got.len() < payloads.len() {
                b.progress(&mut rb);
            }
            for (i, (tag, written, buf)) in rb.got.iter().enumerate() {
                let p = &payloads[i];
                let n = p.len().min(cap);
                assert_eq!((*tag, *written), (i as i32, n), "cap {cap}, frame {i}");
                assert_eq!(&buf[..n], &p[..n], "cap {cap}, frame {i}");
                assert!(
                    buf[n..].iter().all(|&x| x == 0xee),
                    "cap {cap}, frame {i}: overrun"
                );
            }
        }
    }

    #[test]
    fn single_copy_reads_a_peer_buffer() {
        let (mut a, _b) = pair(4, 256);
        if !a.single_copy() {
            eprintln!("process_vm_readv is not permitted here; skipping");
            return;
        }
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        // SAFETY: `dst` is a live buffer of the length given.
        unsafe { a.read_remote(1, src.as_ptr() as u64, dst.as_mut_ptr(), dst.len()) }.unwrap();
        assert_eq!(src, dst);
    }

    #[test]
    fn copies_through_a_peer_heap_cross_windows() {
        let (mut a, _b) = pair(4, 256);
        // A "peer heap" of two windows: a sparse memory file of this very
        // process (the pair shares one pid), at a made-up address range.
        let len = 2 * HEAP_WINDOW;
        let file = crate::shared_mapping::memfd(c"test-heap", len as usize).unwrap();
        let base = 0x7000_0000_0000u64;
        a.heaps[1] = PeerHeap {
            fd: file.as_raw_fd(),
            base,
            len,
            file: None,
            windows: Vec::new(),
        };
        let at = HEAP_WINDOW - 1000;
        let src: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
        // SAFETY: `src` is a live buffer of the length given.
        unsafe { a.write_remote(1, base + at, src.as_ptr(), src.len()) }.unwrap();
        let mut back = vec![0u8; src.len()];
        // SAFETY: reads into a live buffer from our own descriptor.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                back.as_mut_ptr().cast(),
                back.len(),
                at as libc::off_t,
            )
        };
        assert_eq!(n as usize, src.len());
        assert_eq!(back, src, "written across the window boundary");
        let mut dst = vec![0u8; src.len()];
        // SAFETY: `dst` is a live buffer of the length given.
        unsafe { a.read_remote(1, base + at, dst.as_mut_ptr(), dst.len()) }.unwrap();
        assert_eq!(dst, src, "read across the window boundary");
        assert_eq!(a.heap_copies, 2);
        // Past the heap's end: not a heap copy (the cross-process copy
        // then reports the address, which this process does not have).
        // SAFETY: `dst` holds 5000 bytes, more than the 20 asked for.
        let r = unsafe { a.read_remote(1, base + len - 10, dst.as_mut_ptr(), 20) };
        assert!(r.is_err());
        assert_eq!(a.heap_copies, 2);
    }

    #[test]
    fn layouts_are_checked() {
        assert!(Layout::new(0, 16, 32768).is_err());
        assert!(Layout::new(2, 1, 32768).is_err());
        assert!(Layout::new(2, 16, 100).is_err());
        let l = Layout::new(3, 16, 32768).unwrap();
        assert!(l.total_len() >= 9 * 16 * 32768);
        assert_eq!(l.ring(0, 1) % LINE, 0);
    }

    #[test]
    fn cell_headers_fall_in_different_cache_sets() {
        // An L1 set is picked by bits 6-11 of the address: the first lines
        // of a ring's cells must not all share them.
        for cell_size in [4096, 4160, 32768, 65536] {
            let l = Layout::new(2, 16, cell_size).unwrap();
            let sets: std::collections::HashSet<usize> = (0..16)
                .map(|i| (l.ring(0, 1) + LINE + i * l.cell_stride()) / LINE % 64)
                .collect();
            assert_eq!(sets.len(), 16, "cell size {cell_size}");
            assert!(l.cell_stride() >= cell_size as usize);
            assert!(l.total_len() >= l.ring(1, 1) + l.ring_len());
        }
    }
}

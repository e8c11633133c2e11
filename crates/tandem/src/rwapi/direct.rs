//! The direct path: between ranks on one host a write is a copy straight
//! into the target's heap ([`super::heap`]), the target taking no part.
//! Each rank decides, per node, on its first write there, whether it can
//! map that node's heap; where it cannot, writes go through the engine.

use crate::error::ErrorClass;
use crate::p2p::P2p;
use crate::params::Settings;

use super::heap::{self, Heap, HeapInfo, Mapping, Refused};
use super::node_set::NodeSet;
use super::{Net, RwapiCall, DIRECT_SID};

/// How this rank writes into a node's heap blocks.
enum Path {
    /// Not decided: the heap is mapped on the first write to it.
    Untried,
    /// Copies into this mapping of the node's heap.
    Mapped(Mapping),
    /// The node is this rank: copies into its own heap.
    Own,
    /// Through the engine (another host, no heap, or the kernel refused).
    Engine,
}

/// The direct path's state.
pub(super) struct Direct {
    pub(super) heap: Option<Heap>,
    /// Every node's heap, as announced when RWAPI started.
    infos: Vec<HeapInfo>,
    paths: Vec<Path>,
    /// Nodes whose heaps are mapped here, in the order they were: the
    /// writers a polling rank looks at for writes to share (`heap::help`).
    mapped: Vec<u32>,
    /// Whether large writes are shared with their targets (not on a host
    /// with more ranks than CPUs, where the target may not be running).
    share: bool,
    pub(super) next_sid: u64,
    /// Nodes written to directly since the last flush.
    pub(super) dirty: NodeSet,
    /// Nodes this rank asked to map its heap (see `heap::ask_help`).
    asked: NodeSet,
    /// The count of asks to map writers' heaps last acted on.
    seen_asks: u64,
}

impl Direct {
    /// Makes this rank's heap (unless `rwapi_direct=0` or `rwapi_heap=0`,
    /// or no other rank shares its memory). Every node's heap is learnt
    /// next, through [`Direct::heap_exchange`].
    pub(super) fn new(p2p: &P2p, settings: &Settings) -> Direct {
        let n = p2p.size() as usize;
        // The heap is how ranks on one host write into each other's
        // blocks. Without such a rank (one per host, or `transports=tcp`)
        // every write goes through the engine anyway, and blocks are
        // private memory, which large ones back with huge pages (see
        // `alloc_private`).
        let me = p2p.rank();
        let shares_memory = (0..p2p.size()).any(|p| p != me && p2p.is_shm_peer(p));
        let heap = if settings.bool("rwapi_direct") && shares_memory {
            usize::try_from(settings.uint("rwapi_heap"))
                .ok()
                .filter(|&len| len > 0)
                .and_then(Heap::create)
        } else {
            None
        };
        Direct {
            heap,
            infos: vec![HeapInfo::default(); n],
            paths: (0..n).map(|_| Path::Untried).collect(),
            mapped: Vec::new(),
            share: p2p.copy_help_min() != 0,
            next_sid: 0,
            dirty: NodeSet::new(n),
            asked: NodeSet::new(n),
            seen_asks: 0,
        }
    }

    /// What peers need to map this rank's heap (`len` 0: it has none),
    /// and the room for every node's, to be filled by an allgather.
    pub(super) fn heap_exchange(&mut self) -> (HeapInfo, &mut [HeapInfo]) {
        let mine = self.heap.as_ref().map(Heap::info).unwrap_or_default();
        (mine, &mut self.infos)
    }

    /// Maps the heaps of writers that asked for it (they share large
    /// writes with this rank, which writes nothing back to them).
    pub(super) fn map_askers(&mut self, p2p: &P2p) {
        let Some(own) = self.heap.as_ref().filter(|_| self.share) else {
            return;
        };
        let count = heap::ask_count(own.mapping());
        if count == self.seen_asks {
            return;
        }
        self.seen_asks = count;
        for w in heap::askers(own.mapping()) {
            if self
                .paths
                .get(w as usize)
                .is_some_and(|p| matches!(p, Path::Untried))
            {
                let _ = self.target(p2p, w);
            }
        }
    }

    /// Copies this rank's part of large writes that writers whose heaps
    /// are mapped here share with it; how many chunks it copied.
    pub(super) fn help_writers(&self, me: u32) -> u64 {
        let Some(own) = self.heap.as_ref().filter(|_| self.share) else {
            return 0;
        };
        let mut chunks = 0;
        for &w in &self.mapped {
            if let Path::Mapped(m) = &self.paths[w as usize] {
                chunks += heap::help(own.mapping(), me, m);
            }
        }
        chunks
    }

    /// The mapping of `node`'s heap and where its owner maps it, deciding
    /// the path on the first call; `None`: through the engine.
    fn target(&mut self, p2p: &P2p, node: u32) -> Option<(&Mapping, u64)> {
        let i = node as usize;
        if matches!(self.paths[i], Path::Untried) {
            self.paths[i] = if self.heap.is_none() || self.infos[i].len == 0 {
                Path::Engine
            } else if node == p2p.rank() {
                Path::Own
            } else if p2p.is_shm_peer(node) {
                // Silently through the engine where the kernel refuses.
                match heap::map_peer(&self.infos[i]) {
                    Some(m) => {
                        self.mapped.push(node);
                        Path::Mapped(m)
                    }
                    None => Path::Engine,
                }
            } else {
                Path::Engine
            };
        }
        let addr = self.infos[i].addr;
        match &self.paths[i] {
            Path::Mapped(m) => Some((m, addr)),
            Path::Own => self.heap.as_ref().map(|h| (h.mapping(), addr)),
            Path::Untried | Path::Engine => None,
        }
    }
}

impl RwapiCall<'_> {
    /// Copies a write straight into `node`'s heap if it can be mapped; its
    /// send id (complete at once, or refused), or `None`: use the engine.
    pub(super) fn write_direct(
        &mut self,
        node: u32,
        local: Net,
        remote: Net,
        size: usize,
    ) -> Option<u64> {
        let me = self.p2p.rank();
        let gone = self.p2p.peer_known_gone(node);
        let rw = &mut *self.rw;
        // Decides the path; looked at again below, with the writer's own
        // heap beside it (`target`'s answer borrows all of `Direct`).
        rw.direct.target(self.p2p, node)?;
        let d = &rw.direct;
        let (map, owner_addr) = match &d.paths[node as usize] {
            Path::Mapped(m) => (m, d.infos[node as usize].addr),
            Path::Own => (d.heap.as_ref()?.mapping(), d.infos[node as usize].addr),
            Path::Untried | Path::Engine => return None,
        };
        // The first large write to a target asks it to map this rank's
        // heap, so that it can help (a target that writes back maps it
        // anyway).
        let ask = matches!(d.paths[node as usize], Path::Mapped(_))
            && d.share
            && d.heap.is_some()
            && size >= heap::HELP_MIN
            && !d.asked.contains(node)
            && heap::ask_help(map, me);
        // A large write to another rank is shared with it if it polls.
        // Asks the kernel (the peer's pidfd): a target that died holding a
        // chunk would otherwise never be noticed here.
        let p2p = &mut *self.p2p;
        let mut alive = || {
            p2p.progress();
            p2p.peer_gone(node).is_none()
        };
        let share = match (&d.paths[node as usize], &d.heap) {
            (Path::Mapped(_), Some(own)) if d.share => Some(heap::Share {
                own: own.mapping(),
                own_addr: own.addr(),
                target: node,
                alive: &mut alive,
            }),
            _ => None,
        };
        let outcome = if gone {
            Err(ErrorClass::ProcAborted)
        } else {
            // SAFETY: the source lies inside a live local block (checked by
            // the caller), which stays allocated during the call.
            unsafe {
                heap::write(
                    map,
                    owner_addr,
                    remote.key,
                    remote.addr,
                    local.addr as usize as *const u8,
                    size,
                    share,
                )
            }
            .map_err(|r| match r {
                Refused::Region => ErrorClass::Win,
                Refused::Range => ErrorClass::RmaRange,
                Refused::Gone => ErrorClass::ProcAborted,
            })
        };
        rw.direct.next_sid += 1;
        let sid = DIRECT_SID | rw.direct.next_sid;
        self.p2p.engine().counters_mut().rwapi_direct += 1;
        if let Err(class) = outcome {
            rw.failed.insert(sid, class);
            rw.first_error.get_or_insert(class);
        }
        rw.direct.dirty.insert(node);
        if ask {
            rw.direct.asked.insert(node);
        }
        Some(sid)
    }
}

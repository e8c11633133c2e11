//! The collective algorithms, each written once as a schedule builder (the
//! same schedule serves the blocking and the non-blocking call). Their
//! restrictions are declared in the catalogue ([`super::select::CATALOGUE`]).
//!
//! Conventions: `b.n` ranks, this one is `b.me`; lengths and offsets are in
//! bytes of packed data; `send: None` means `MPI_IN_PLACE`. Reductions keep
//! rank order (`x0 ∘ x1 ∘ ... ∘ x(n-1)`) unless the algorithm is declared
//! commutative-only.

use super::sched::{Buf, Builder};

fn lowbit(v: u32) -> u32 {
    v & v.wrapping_neg()
}

/// Largest power of two not above `n` (n > 0).
fn pof2_floor(n: u32) -> u32 {
    1 << (31 - n.leading_zeros())
}

/// Relative rank numbering around a root.
#[derive(Clone, Copy)]
struct Rel {
    n: u32,
    root: u32,
}

impl Rel {
    fn of(self, r: u32) -> u32 {
        (r + self.n - self.root) % self.n
    }
    fn abs(self, v: u32) -> u32 {
        (v + self.root) % self.n
    }
}

/// Span of the binomial subtree rooted at relative rank `v` (the smallest
/// power of two at or above `n` for the root).
fn span(v: u32, n: u32) -> u32 {
    if v == 0 {
        n.next_power_of_two()
    } else {
        lowbit(v)
    }
}

// ------------------------------------------------------------------ barrier

/// Everyone reports to rank 0, which then releases everyone.
pub fn barrier_linear(b: &mut Builder) {
    let (n, me) = (b.n, b.me);
    let z = Buf::nowhere();
    if me == 0 {
        for i in 1..n {
            b.recv(i, z, 0, 0);
        }
        b.fence();
        for i in 1..n {
            b.send(i, z, 0, 0);
        }
    } else {
        b.send(0, z, 0, 0);
        b.recv(0, z, 0, 0);
    }
}

/// Arrival up a binomial tree to rank 0, release down the same tree.
pub fn barrier_binomial(b: &mut Builder) {
    let (n, me) = (b.n, b.me);
    let z = Buf::nowhere();
    let top = span(me, n);
    let children: Vec<u32> = (0..32)
        .map(|k| 1u32 << k)
        .take_while(|&m| m < top)
        .map(|m| me + m)
        .filter(|&c| c < n)
        .collect();
    for &c in &children {
        b.recv(c, z, 0, 0);
    }
    b.fence();
    if me != 0 {
        let parent = me - lowbit(me);
        b.send(parent, z, 0, 0);
        b.recv(parent, z, 0, 0);
        b.fence();
    }
    for &c in children.iter().rev() {
        b.send(c, z, 0, 0);
    }
}

/// Dissemination: ceil(log2 n) rounds, in round k a message to me + 2^k.
pub fn barrier_dissemination(b: &mut Builder) {
    let (n, me) = (b.n, b.me);
    let z = Buf::nowhere();
    let mut k = 1;
    while k < n {
        b.send((me + k) % n, z, 0, 0);
        b.recv((me + n - k) % n, z, 0, 0);
        b.fence();
        k *= 2;
    }
}

// -------------------------------------------------------------------- bcast

pub fn bcast_linear(b: &mut Builder, buf: Buf, len: usize, root: u32) {
    if b.me == root {
        for i in (0..b.n).filter(|&i| i != root) {
            b.send(i, buf, 0, len);
        }
    } else {
        b.recv(root, buf, 0, len);
    }
}

pub fn bcast_binomial(b: &mut Builder, buf: Buf, len: usize, root: u32) {
    let n = b.n;
    let rel = Rel { n, root };
    let v = rel.of(b.me);
    if v != 0 {
        b.recv(rel.abs(v - lowbit(v)), buf, 0, len);
        b.fence();
    }
    let mut m = span(v, n) / 2;
    while m > 0 {
        if v + m < n {
            b.send(rel.abs(v + m), buf, 0, len);
        }
        m /= 2;
    }
}

/// Binomial scatter of n chunks, then a ring allgather of them.
pub fn bcast_scatter_allgather(b: &mut Builder, buf: Buf, len: usize, root: u32) {
    let n = b.n;
    let rel = Rel { n, root };
    let v = rel.of(b.me);
    let chunk = len.div_ceil(n as usize);
    let s = |i: u32| (i as usize * chunk).min(len);
    if v != 0 {
        let hi = (v + lowbit(v)).min(n);
        b.recv(rel.abs(v - lowbit(v)), buf, s(v), s(hi) - s(v));
        b.fence();
    }
    let mut m = span(v, n) / 2;
    while m > 0 {
        let c = v + m;
        if c < n {
            let hi = (c + m).min(n);
            b.send(rel.abs(c), buf, s(c), s(hi) - s(c));
        }
        m /= 2;
    }
    b.fence();
    let right = rel.abs((v + 1) % n);
    let left = rel.abs((v + n - 1) % n);
    for step in 0..n - 1 {
        let sc = (v + n - step) % n;
        let rc = (v + 2 * n - step - 1) % n;
        b.send(right, buf, s(sc), s(sc + 1) - s(sc));
        b.recv(left, buf, s(rc), s(rc + 1) - s(rc));
        b.fence();
    }
}

// ------------------------------------------------------------------- reduce

/// The root receives every contribution, then folds them in rank order.
pub fn reduce_linear(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize, root: u32) {
    let (n, me) = (b.n, b.me);
    let mine = send.unwrap_or(recv);
    if me != root {
        b.send(root, mine, 0, len);
        return;
    }
    let parts: Vec<Buf> = (0..n)
        .map(|i| {
            if i == root {
                mine
            } else {
                let t = b.tmp(len);
                b.recv(i, t, 0, len);
                t
            }
        })
        .collect();
    b.fence();
    let acc = b.tmp(len);
    b.copy(parts[n as usize - 1], 0, acc, 0, len);
    for i in (0..n as usize - 1).rev() {
        b.reduce(parts[i], 0, acc, 0, len);
    }
    b.copy(acc, 0, recv, 0, len);
}

/// Binomial tree; rooted at `root` for commutative operations, otherwise
/// at rank 0 (which keeps rank order) with a last hop to the root.
pub fn reduce_binomial(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    len: usize,
    root: u32,
    commutative: bool,
) {
    let (n, me) = (b.n, b.me);
    let tree = Rel {
        n,
        root: if commutative { root } else { 0 },
    };
    let v = tree.of(me);
    let mine = send.unwrap_or(recv);
    // The partial result so far: this rank's own part, read where it lies
    // (a leaf sends it from there) until a child's part is folded in.
    let mut acc = mine;
    let mut spare = None;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            b.send(tree.abs(v - mask), acc, 0, len);
            b.fence();
            break;
        }
        if v + mask < n {
            // The root folds its last child straight into its result.
            let last = v + 2 * mask >= n;
            let into = match spare.take() {
                _ if last && v == 0 && me == root && acc != recv => recv,
                Some(t) => t,
                None => b.tmp(len),
            };
            b.recv(tree.abs(v + mask), into, 0, len);
            b.fence();
            // The child's part comes from higher ranks: acc ∘ child.
            b.reduce(acc, 0, into, 0, len);
            if acc != mine {
                spare = Some(acc);
            }
            acc = into;
        }
        mask <<= 1;
    }
    if v == 0 {
        if me == root {
            b.copy(acc, 0, recv, 0, len);
        } else {
            b.send(root, acc, 0, len);
        }
    } else if me == root {
        b.recv(tree.abs(0), recv, 0, len);
    }
}

// ---------------------------------------------------------------- allreduce

pub fn allreduce_reduce_bcast(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    len: usize,
    commutative: bool,
) {
    reduce_binomial(b, send, recv, len, 0, commutative);
    b.fence();
    bcast_binomial(b, recv, len, 0);
}

/// Recursive doubling; ranks past the largest power of two first fold into
/// a partner and get the result back at the end.
pub fn allreduce_recursive_doubling(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    len: usize,
    commutative: bool,
) {
    let (n, me) = (b.n, b.me);
    if let Some(s) = send {
        b.copy(s, 0, recv, 0, len);
    }
    let acc = recv;
    let t = b.tmp(len);
    let pof2 = pof2_floor(n);
    let rem = n - pof2;
    let newrank = if me < 2 * rem {
        if me % 2 == 0 {
            b.send(me + 1, acc, 0, len);
            b.fence();
            None
        } else {
            b.recv(me - 1, t, 0, len);
            b.fence();
            b.reduce(t, 0, acc, 0, len);
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    };
    if let Some(nr) = newrank {
        let mut mask = 1;
        while mask < pof2 {
            let nd = nr ^ mask;
            let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
            b.send(dst, acc, 0, len);
            b.recv(dst, t, 0, len);
            b.fence();
            if commutative || dst < me {
                b.reduce(t, 0, acc, 0, len);
            } else {
                b.reduce(acc, 0, t, 0, len);
                b.copy(t, 0, acc, 0, len);
            }
            mask <<= 1;
        }
    }
    if me < 2 * rem {
        if me % 2 == 1 {
            b.send(me - 1, acc, 0, len);
        } else {
            b.recv(me + 1, acc, 0, len);
        }
    }
}

/// Chunk `i` of `count` elements split in `n` near-equal parts: (offset, length) in bytes.
fn chunk(i: u32, n: u32, count: usize, es: usize) -> (usize, usize) {
    let (base, extra) = (count / n as usize, count % n as usize);
    let i = i as usize;
    let off = i * base + i.min(extra);
    let cnt = base + usize::from(i < extra);
    (off * es, cnt * es)
}

/// Ring reduce-scatter then ring allgather (commutative operations only).
pub fn allreduce_ring(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize, es: usize) {
    let (n, me) = (b.n, b.me);
    if let Some(s) = send {
        b.copy(s, 0, recv, 0, len);
    }
    let count = len / es.max(1);
    let t = b.tmp(chunk(0, n, count, es).1);
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    for s in 0..n - 1 {
        let (so, sl) = chunk((me + n - s) % n, n, count, es);
        let (ro, rl) = chunk((me + 2 * n - s - 1) % n, n, count, es);
        b.send(right, recv, so, sl);
        b.recv(left, t, 0, rl);
        b.fence();
        b.reduce(t, 0, recv, ro, rl);
    }
    for s in 0..n - 1 {
        let (so, sl) = chunk((me + 1 + n - s) % n, n, count, es);
        let (ro, rl) = chunk((me + n - s) % n, n, count, es);
        b.send(right, recv, so, sl);
        b.recv(left, recv, ro, rl);
        b.fence();
    }
}

// ----------------------------------------------------------- gather/scatter

pub fn gather_linear(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize, root: u32) {
    let (n, me) = (b.n, b.me);
    if me == root {
        for i in (0..n).filter(|&i| i != root) {
            b.recv(i, recv, i as usize * len, len);
        }
        if let Some(s) = send {
            b.copy(s, 0, recv, root as usize * len, len);
        }
    } else if let Some(s) = send {
        b.send(root, s, 0, len);
    }
}

pub fn gather_binomial(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize, root: u32) {
    let n = b.n;
    let rel = Rel { n, root };
    let v = rel.of(b.me);
    let sz = span(v, n).min(n - v) as usize;
    let buf = if v == 0 && root == 0 {
        recv
    } else {
        b.tmp(sz * len)
    };
    match send {
        Some(s) => b.copy(s, 0, buf, 0, len),
        None => b.copy(recv, root as usize * len, buf, 0, len),
    }
    let mut m = 1;
    while m < span(v, n) {
        let c = v + m;
        if c < n {
            let csz = m.min(n - c) as usize;
            b.recv(rel.abs(c), buf, m as usize * len, csz * len);
        }
        m *= 2;
    }
    b.fence();
    if v != 0 {
        b.send(rel.abs(v - lowbit(v)), buf, 0, sz * len);
    } else if root != 0 {
        let head = (n - root) as usize * len;
        b.copy(buf, 0, recv, root as usize * len, head);
        b.copy(buf, head, recv, 0, root as usize * len);
    }
}

pub fn scatter_linear(b: &mut Builder, send: Buf, recv: Option<Buf>, len: usize, root: u32) {
    let (n, me) = (b.n, b.me);
    if me == root {
        for i in (0..n).filter(|&i| i != root) {
            b.send(i, send, i as usize * len, len);
        }
        if let Some(r) = recv {
            b.copy(send, root as usize * len, r, 0, len);
        }
    } else if let Some(r) = recv {
        b.recv(root, r, 0, len);
    }
}

pub fn scatter_binomial(b: &mut Builder, send: Buf, recv: Option<Buf>, len: usize, root: u32) {
    let n = b.n;
    let rel = Rel { n, root };
    let v = rel.of(b.me);
    let sz = span(v, n).min(n - v) as usize;
    let buf = if v == 0 {
        if root == 0 {
            send
        } else {
            let t = b.tmp(n as usize * len);
            let head = (n - root) as usize * len;
            b.copy(send, root as usize * len, t, 0, head);
            b.copy(send, 0, t, head, root as usize * len);
            t
        }
    } else {
        let t = b.tmp(sz * len);
        b.recv(rel.abs(v - lowbit(v)), t, 0, sz * len);
        b.fence();
        t
    };
    let mut m = span(v, n) / 2;
    while m > 0 {
        let c = v + m;
        if c < n {
            b.send(
                rel.abs(c),
                buf,
                m as usize * len,
                m.min(n - c) as usize * len,
            );
        }
        m /= 2;
    }
    if let Some(r) = recv {
        b.copy(buf, 0, r, 0, len);
    }
}

/// Variable-size gather: `counts`/`displs` in bytes (significant at the root).
pub fn gatherv_linear(
    b: &mut Builder,
    send: Option<Buf>,
    sendlen: usize,
    recv: Buf,
    counts: &[usize],
    displs: &[usize],
    root: u32,
) {
    let me = b.me;
    if me == root {
        for i in (0..b.n).filter(|&i| i != root) {
            b.recv(i, recv, displs[i as usize], counts[i as usize]);
        }
        if let Some(s) = send {
            b.copy(
                s,
                0,
                recv,
                displs[root as usize],
                sendlen.min(counts[root as usize]),
            );
        }
    } else if let Some(s) = send {
        b.send(root, s, 0, sendlen);
    }
}

pub fn scatterv_linear(
    b: &mut Builder,
    send: Buf,
    counts: &[usize],
    displs: &[usize],
    recv: Option<Buf>,
    recvlen: usize,
    root: u32,
) {
    let me = b.me;
    if me == root {
        for i in (0..b.n).filter(|&i| i != root) {
            b.send(i, send, displs[i as usize], counts[i as usize]);
        }
        if let Some(r) = recv {
            b.copy(
                send,
                displs[root as usize],
                r,
                0,
                counts[root as usize].min(recvlen),
            );
        }
    } else if let Some(r) = recv {
        b.recv(root, r, 0, recvlen);
    }
}

// ---------------------------------------------------------------- allgather

pub fn allgather_ring(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize) {
    let counts = vec![len; b.n as usize];
    let displs: Vec<usize> = (0..b.n as usize).map(|i| i * len).collect();
    allgatherv_ring(b, send, recv, &counts, &displs);
}

/// Recursive doubling (power-of-two sizes only).
pub fn allgather_recursive_doubling(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize) {
    let (n, me) = (b.n, b.me);
    if let Some(s) = send {
        b.copy(s, 0, recv, me as usize * len, len);
    }
    let mut mask = 1;
    while mask < n {
        let partner = me ^ mask;
        let base = (me / mask * mask) as usize;
        let pbase = (partner / mask * mask) as usize;
        b.send(partner, recv, base * len, mask as usize * len);
        b.recv(partner, recv, pbase * len, mask as usize * len);
        b.fence();
        mask <<= 1;
    }
}

/// Bruck's algorithm: ceil(log2 n) rounds for any n, then a local rotation.
pub fn allgather_bruck(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize) {
    let (n, me) = (b.n, b.me);
    let t = b.tmp(n as usize * len);
    match send {
        Some(s) => b.copy(s, 0, t, 0, len),
        None => b.copy(recv, me as usize * len, t, 0, len),
    }
    let mut k = 1;
    while k < n {
        let cnt = k.min(n - k) as usize;
        b.send((me + n - k) % n, t, 0, cnt * len);
        b.recv((me + k) % n, t, k as usize * len, cnt * len);
        b.fence();
        k <<= 1;
    }
    let head = (n - me) as usize * len;
    b.copy(t, 0, recv, me as usize * len, head);
    b.copy(t, head, recv, 0, me as usize * len);
}

/// Ring with per-rank block sizes (`counts`/`displs` in bytes).
pub fn allgatherv_ring(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    counts: &[usize],
    displs: &[usize],
) {
    let (n, me) = (b.n, b.me);
    if let Some(s) = send {
        b.copy(s, 0, recv, displs[me as usize], counts[me as usize]);
    }
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    for s in 0..n - 1 {
        let sc = ((me + n - s) % n) as usize;
        let rc = ((me + 2 * n - s - 1) % n) as usize;
        b.send(right, recv, displs[sc], counts[sc]);
        b.recv(left, recv, displs[rc], counts[rc]);
        b.fence();
    }
}

// ----------------------------------------------------------------- alltoall

/// For `MPI_IN_PLACE`: a copy of the receive buffer to send from.
fn in_place_source(b: &mut Builder, recv: Buf, len: usize) -> Buf {
    let t = b.tmp(len);
    b.copy(recv, 0, t, 0, len);
    t
}

/// Every receive and send posted at once, then one wait for all.
pub fn alltoall_linear(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize) {
    let n = b.n as usize;
    let counts = vec![len; n];
    let displs: Vec<usize> = (0..n).map(|i| i * len).collect();
    alltoallv_linear(b, send, &counts, &displs, recv, &counts, &displs);
}

pub fn alltoall_pairwise(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize) {
    let n = b.n as usize;
    let counts = vec![len; n];
    let displs: Vec<usize> = (0..n).map(|i| i * len).collect();
    alltoallv_pairwise(b, send, &counts, &displs, recv, &counts, &displs);
}

/// Bruck's algorithm: log2 n rounds of packed blocks.
pub fn alltoall_bruck(b: &mut Builder, send: Option<Buf>, recv: Buf, len: usize) {
    let (n, me) = (b.n, b.me);
    let nn = n as usize;
    let send = match send {
        Some(s) => s,
        None => in_place_source(b, recv, nn * len),
    };
    // t[j] = the block for rank me + j.
    let t = b.tmp(nn * len);
    let head = (n - me) as usize * len;
    b.copy(send, me as usize * len, t, 0, head);
    b.copy(send, 0, t, head, me as usize * len);
    let pk = b.tmp(nn * len);
    let rk = b.tmp(nn * len);
    let mut k = 1;
    while k < n {
        let js: Vec<usize> = (0..nn).filter(|&j| j as u32 & k != 0).collect();
        for (i, &j) in js.iter().enumerate() {
            b.copy(t, j * len, pk, i * len, len);
        }
        b.send((me + k) % n, pk, 0, js.len() * len);
        b.recv((me + n - k) % n, rk, 0, js.len() * len);
        b.fence();
        for (i, &j) in js.iter().enumerate() {
            b.copy(rk, i * len, t, j * len, len);
        }
        k <<= 1;
    }
    // t[j] now holds the block from rank me - j.
    for j in 0..nn {
        let from = (me as usize + nn - j) % nn;
        b.copy(t, j * len, recv, from * len, len);
    }
}

fn extent_of(counts: &[usize], displs: &[usize]) -> usize {
    counts
        .iter()
        .zip(displs)
        .map(|(c, d)| c + d)
        .max()
        .unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallv_linear(
    b: &mut Builder,
    send: Option<Buf>,
    scounts: &[usize],
    sdispls: &[usize],
    recv: Buf,
    rcounts: &[usize],
    rdispls: &[usize],
) {
    let (n, me) = (b.n, b.me);
    let (send, scounts, sdispls) = match send {
        Some(s) => (s, scounts, sdispls),
        None => (
            in_place_source(b, recv, extent_of(rcounts, rdispls)),
            rcounts,
            rdispls,
        ),
    };
    let m = me as usize;
    b.copy(
        send,
        sdispls[m],
        recv,
        rdispls[m],
        scounts[m].min(rcounts[m]),
    );
    for i in 1..n {
        let p = ((me + n - i) % n) as usize;
        b.recv(p as u32, recv, rdispls[p], rcounts[p]);
    }
    for i in 1..n {
        let p = ((me + i) % n) as usize;
        b.send(p as u32, send, sdispls[p], scounts[p]);
    }
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallv_pairwise(
    b: &mut Builder,
    send: Option<Buf>,
    scounts: &[usize],
    sdispls: &[usize],
    recv: Buf,
    rcounts: &[usize],
    rdispls: &[usize],
) {
    let (n, me) = (b.n, b.me);
    let (send, scounts, sdispls) = match send {
        Some(s) => (s, scounts, sdispls),
        None => (
            in_place_source(b, recv, extent_of(rcounts, rdispls)),
            rcounts,
            rdispls,
        ),
    };
    let m = me as usize;
    b.copy(
        send,
        sdispls[m],
        recv,
        rdispls[m],
        scounts[m].min(rcounts[m]),
    );
    for s in 1..n {
        let to = ((me + s) % n) as usize;
        let from = ((me + n - s) % n) as usize;
        b.send(to as u32, send, sdispls[to], scounts[to]);
        b.recv(from as u32, recv, rdispls[from], rcounts[from]);
        b.fence();
    }
}

// ----------------------------------------------- reduce_scatter, scan, exscan

/// Order-keeping reduction to rank 0, then a linear scatter of the blocks
/// (`counts` in bytes).
pub fn reduce_scatter_reduce_scatterv(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    counts: &[usize],
    commutative: bool,
) {
    let total: usize = counts.iter().sum();
    let me = b.me as usize;
    let mine = send.unwrap_or(recv);
    let t = b.tmp(total);
    reduce_binomial(b, Some(mine), t, total, 0, commutative);
    b.fence();
    let displs = offsets(counts);
    scatterv_linear(b, t, counts, &displs, Some(recv), counts[me], 0);
}

/// Ring reduce-scatter for commutative operations (`counts` in bytes): in
/// n-1 steps block j travels from rank j+1 round the ring to rank j,
/// gathering each rank's contribution on the way. Every rank sends and
/// receives one block per step and keeps two blocks of temporary memory,
/// where reducing to rank 0 first moves the whole vector log2 n times and
/// keeps it at every rank.
pub fn reduce_scatter_ring(b: &mut Builder, send: Option<Buf>, recv: Buf, counts: &[usize]) {
    let (n, me) = (b.n as usize, b.me as usize);
    let input = send.unwrap_or(recv);
    if n == 1 {
        b.copy(input, 0, recv, 0, counts[0]);
        return;
    }
    let displs = offsets(counts);
    let widest = counts.iter().copied().max().unwrap_or(0);
    let acc = [b.tmp(widest), b.tmp(widest)];
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    for s in 0..n - 1 {
        // Out: the block this rank joined last step (its own part of it
        // at the first); in: the block the left neighbour sends.
        let out = (2 * n + me - 1 - s) % n;
        let inb = (2 * n + me - 2 - s) % n;
        match s {
            0 => b.send(right as u32, input, displs[out], counts[out]),
            _ => b.send(right as u32, acc[(s - 1) % 2], 0, counts[out]),
        }
        b.recv(left as u32, acc[s % 2], 0, counts[inb]);
        b.fence();
        b.reduce(input, displs[inb], acc[s % 2], 0, counts[inb]);
    }
    // The last block in was this rank's own.
    b.copy(acc[(n - 2) % 2], 0, recv, 0, counts[me]);
}

/// Where each block starts when blocks of `counts` bytes lie end to end.
fn offsets(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// Inclusive prefix reduction by recursive doubling (keeps rank order).
pub fn scan_recursive_doubling(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    len: usize,
    commutative: bool,
) {
    let (n, me) = (b.n, b.me);
    let partial = b.tmp(len);
    let t = b.tmp(len);
    match send {
        Some(s) => {
            b.copy(s, 0, partial, 0, len);
            b.copy(s, 0, recv, 0, len);
        }
        None => b.copy(recv, 0, partial, 0, len),
    }
    let mut mask = 1;
    while mask < n {
        let dst = me ^ mask;
        if dst < n {
            b.send(dst, partial, 0, len);
            b.recv(dst, t, 0, len);
            b.fence();
            if me > dst {
                b.reduce(t, 0, partial, 0, len);
                b.reduce(t, 0, recv, 0, len);
            } else if commutative {
                b.reduce(t, 0, partial, 0, len);
            } else {
                b.reduce(partial, 0, t, 0, len);
                b.copy(t, 0, partial, 0, len);
            }
        }
        mask <<= 1;
    }
}

/// Exclusive prefix reduction by recursive doubling (rank 0's result is undefined).
pub fn exscan_recursive_doubling(
    b: &mut Builder,
    send: Option<Buf>,
    recv: Buf,
    len: usize,
    commutative: bool,
) {
    let (n, me) = (b.n, b.me);
    let partial = b.tmp(len);
    let t = b.tmp(len);
    b.copy(send.unwrap_or(recv), 0, partial, 0, len);
    let mut have = false;
    let mut mask = 1;
    while mask < n {
        let dst = me ^ mask;
        if dst < n {
            b.send(dst, partial, 0, len);
            b.recv(dst, t, 0, len);
            b.fence();
            if me > dst {
                b.reduce(t, 0, partial, 0, len);
                if have {
                    b.reduce(t, 0, recv, 0, len);
                } else {
                    b.copy(t, 0, recv, 0, len);
                    have = true;
                }
            } else if commutative {
                b.reduce(t, 0, partial, 0, len);
            } else {
                b.reduce(partial, 0, t, 0, len);
                b.copy(t, 0, partial, 0, len);
            }
        }
        mask <<= 1;
    }
}

// ---------------------------------------------------------------- neighbors

/// One exchange with explicit peers: receives from `sources[i]` into
/// (`rdispls[i]`, `rcounts[i]`) of `recv`, sends (`sdispls[i]`,
/// `scounts[i]`) of `send` to `dests[i]`; everything posted at once.
#[allow(clippy::too_many_arguments)]
pub fn neighbor_exchange(
    b: &mut Builder,
    sources: &[u32],
    recv: Buf,
    rcounts: &[usize],
    rdispls: &[usize],
    dests: &[u32],
    send: Buf,
    scounts: &[usize],
    sdispls: &[usize],
) {
    for (i, &s) in sources.iter().enumerate() {
        b.recv(s, recv, rdispls[i], rcounts[i]);
    }
    for (i, &d) in dests.iter().enumerate() {
        b.send(d, send, sdispls[i], scounts[i]);
    }
}

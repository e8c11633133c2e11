//! Every algorithm on every communicator size from 1 to 9, on a simulated
//! network, against results computed directly.

#![allow(clippy::needless_range_loop)]

use std::sync::Arc;

use super::ops::{PredefOp, Predefined, Reducer, ReducerRef};
use super::sched::sim::run_all;
use super::select::{OpKind, CATALOGUE};
use super::CollCall;
use crate::datatype::Prim;
use crate::error::Result;

/// 2x2 matrices of wrapping u32: associative, not commutative.
struct MatMul;

fn mat(b: &[u8]) -> [u32; 4] {
    let mut m = [0u32; 4];
    for (i, c) in b.chunks_exact(4).enumerate() {
        m[i] = u32::from_ne_bytes(c.try_into().unwrap());
    }
    m
}

fn mul(a: [u32; 4], b: [u32; 4]) -> [u32; 4] {
    let f = |x: u32, y: u32| x.wrapping_mul(y);
    [
        f(a[0], b[0]).wrapping_add(f(a[1], b[2])),
        f(a[0], b[1]).wrapping_add(f(a[1], b[3])),
        f(a[2], b[0]).wrapping_add(f(a[3], b[2])),
        f(a[2], b[1]).wrapping_add(f(a[3], b[3])),
    ]
}

impl Reducer for MatMul {
    fn commutative(&self) -> bool {
        false
    }
    fn elem_size(&self) -> usize {
        16
    }
    fn reduce(&self, inp: &[u8], inout: &mut [u8]) -> Result<()> {
        for (x, y) in inp.chunks_exact(16).zip(inout.chunks_exact_mut(16)) {
            let r = mul(mat(x), mat(y));
            for (i, v) in r.iter().enumerate() {
                y[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
            }
        }
        Ok(())
    }
}

fn sum() -> ReducerRef {
    Arc::new(Predefined::new(PredefOp::Sum, Prim::I32, 4).unwrap())
}

fn byte(r: u32, i: usize) -> u8 {
    (r as usize * 131 + i * 7 + (i >> 8) * 13 + 1) as u8
}

fn data(r: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| byte(r, i)).collect()
}

fn algos(op: OpKind) -> Vec<&'static str> {
    CATALOGUE
        .iter()
        .filter(|a| a.op == op)
        .map(|a| a.name)
        .collect()
}

/// Runs `calls[r]` on rank r with `algo`; the buffers the calls point to
/// belong to the caller.
fn run(calls: Vec<CollCall>, algo: &str) {
    let n = calls.len() as u32;
    let group: Arc<[u32]> = (0..n).collect();
    let scheds = calls
        .iter()
        .enumerate()
        .map(|(me, c)| c.build(algo, n, me as u32).finish(3, 9, group.clone()))
        .collect();
    let errors = run_all(scheds);
    assert!(
        errors.iter().all(Option::is_none),
        "{algo} on {n}: {errors:?}"
    );
}

/// The reduction of every rank's vector, in rank order.
fn fold(op: &ReducerRef, parts: &[Vec<u8>]) -> Vec<u8> {
    let mut acc = parts.last().unwrap().clone();
    for p in parts.iter().rev().skip(1) {
        op.reduce(p, &mut acc).unwrap();
    }
    acc
}

fn reducers() -> Vec<ReducerRef> {
    vec![sum(), Arc::new(MatMul)]
}

const SIZES: std::ops::RangeInclusive<u32> = 1..=9;

#[test]
fn barrier_every_algorithm() {
    for algo in algos(OpKind::Barrier) {
        for n in SIZES {
            run((0..n).map(|_| CollCall::Barrier).collect(), algo);
        }
    }
}

#[test]
fn bcast_every_algorithm() {
    for algo in algos(OpKind::Bcast) {
        for n in SIZES {
            for len in [0, 1, 13, 1000] {
                for root in [0, n - 1, n / 2] {
                    let mut bufs: Vec<Vec<u8>> = (0..n)
                        .map(|r| {
                            if r == root {
                                data(r, len)
                            } else {
                                vec![0; len]
                            }
                        })
                        .collect();
                    let calls = bufs
                        .iter_mut()
                        .map(|b| CollCall::Bcast {
                            buf: b.as_mut_ptr(),
                            len,
                            root,
                        })
                        .collect();
                    run(calls, algo);
                    for (r, b) in bufs.iter().enumerate() {
                        assert_eq!(
                            b,
                            &data(root, len),
                            "{algo} n={n} len={len} root={root} rank {r}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reduce_every_algorithm_keeps_rank_order() {
    for algo in algos(OpKind::Reduce) {
        for op in reducers() {
            let es = op.elem_size();
            for n in SIZES {
                for count in [0, 1, 5] {
                    for root in [0, n - 1, n / 2] {
                        for in_place in [false, true] {
                            let len = count * es;
                            let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, len)).collect();
                            let mut recvs: Vec<Vec<u8>> = (0..n)
                                .map(|r| {
                                    if in_place && r == root {
                                        sends[r as usize].clone()
                                    } else {
                                        vec![0; len]
                                    }
                                })
                                .collect();
                            let calls = (0..n as usize)
                                .map(|r| CollCall::Reduce {
                                    send: (!(in_place && r as u32 == root))
                                        .then(|| sends[r].as_ptr()),
                                    recv: recvs[r].as_mut_ptr(),
                                    len,
                                    op: op.clone(),
                                    root,
                                })
                                .collect();
                            run(calls, algo);
                            assert_eq!(
                                recvs[root as usize],
                                fold(&op, &sends),
                                "{algo} n={n} count={count} root={root}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn allreduce_scan_exscan_every_algorithm() {
    for op in reducers() {
        let es = op.elem_size();
        for n in SIZES {
            for count in [0, 1, 3, 11] {
                let len = count * es;
                let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, len)).collect();
                let want = fold(&op, &sends);
                for algo in algos(OpKind::Allreduce) {
                    if algo == "ring" && !op.commutative() {
                        continue;
                    }
                    for in_place in [false, true] {
                        let mut recvs: Vec<Vec<u8>> = (0..n)
                            .map(|r| {
                                if in_place {
                                    sends[r as usize].clone()
                                } else {
                                    vec![0; len]
                                }
                            })
                            .collect();
                        let calls = (0..n as usize)
                            .map(|r| CollCall::Allreduce {
                                send: (!in_place).then(|| sends[r].as_ptr()),
                                recv: recvs[r].as_mut_ptr(),
                                len,
                                op: op.clone(),
                            })
                            .collect();
                        run(calls, algo);
                        for (r, got) in recvs.iter().enumerate() {
                            assert_eq!(got, &want, "allreduce {algo} n={n} count={count} rank {r}");
                        }
                    }
                }
                // Scan and exscan: prefixes in rank order.
                let mut recvs: Vec<Vec<u8>> = (0..n).map(|_| vec![0; len]).collect();
                let calls = (0..n as usize)
                    .map(|r| CollCall::Scan {
                        send: Some(sends[r].as_ptr()),
                        recv: recvs[r].as_mut_ptr(),
                        len,
                        op: op.clone(),
                    })
                    .collect();
                run(calls, "recursive_doubling");
                for r in 0..n as usize {
                    assert_eq!(recvs[r], fold(&op, &sends[..=r]), "scan n={n} rank {r}");
                }
                let mut recvs: Vec<Vec<u8>> = (0..n).map(|_| vec![0; len]).collect();
                let calls = (0..n as usize)
                    .map(|r| CollCall::Exscan {
                        send: Some(sends[r].as_ptr()),
                        recv: recvs[r].as_mut_ptr(),
                        len,
                        op: op.clone(),
                    })
                    .collect();
                run(calls, "recursive_doubling");
                for r in 1..n as usize {
                    assert_eq!(recvs[r], fold(&op, &sends[..r]), "exscan n={n} rank {r}");
                }
                // Reduce-scatter: rank r gets r+1 elements (some zero when count is 0).
                let counts: Vec<usize> = (0..n as usize)
                    .map(|r| if count == 0 { 0 } else { (r % 3) * es })
                    .collect();
                let total: usize = counts.iter().sum();
                let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, total)).collect();
                let want = fold(&op, &sends);
                for algo in algos(OpKind::ReduceScatter) {
                    if algo == "ring" && !op.commutative() {
                        continue;
                    }
                    for in_place in [false, true] {
                        // In place the input is the receive buffer (the
                        // whole vector) and the result lands at its start.
                        let mut recvs: Vec<Vec<u8>> = (0..n as usize)
                            .map(|r| match in_place {
                                true => sends[r].clone(),
                                false => vec![0; counts[r]],
                            })
                            .collect();
                        let calls = (0..n as usize)
                            .map(|r| CollCall::ReduceScatter {
                                send: (!in_place).then(|| sends[r].as_ptr()),
                                recv: recvs[r].as_mut_ptr(),
                                counts: counts.clone(),
                                op: op.clone(),
                            })
                            .collect();
                        run(calls, algo);
                        let mut off = 0;
                        for r in 0..n as usize {
                            assert_eq!(
                                recvs[r][..counts[r]],
                                want[off..off + counts[r]],
                                "reduce_scatter {algo} n={n} rank {r} in place {in_place}"
                            );
                            off += counts[r];
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn gather_scatter_every_algorithm() {
    for n in SIZES {
        for len in [0, 3, 100] {
            for root in [0, n - 1, n / 2] {
                for in_place in [false, true] {
                    let all: Vec<u8> = (0..n).flat_map(|r| data(r, len)).collect();
                    for algo in algos(OpKind::Gather) {
                        let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, len)).collect();
                        let mut recv = vec![0u8; n as usize * len];
                        if in_place {
                            recv[root as usize * len..(root as usize + 1) * len]
                                .copy_from_slice(&sends[root as usize]);
                        }
                        let rp = recv.as_mut_ptr();
                        let calls = (0..n)
                            .map(|r| CollCall::Gather {
                                send: (!(in_place && r == root))
                                    .then(|| sends[r as usize].as_ptr()),
                                recv: if r == root { rp } else { std::ptr::null_mut() },
                                len,
                                root,
                            })
                            .collect();
                        run(calls, algo);
                        assert_eq!(recv, all, "gather {algo} n={n} len={len} root={root}");
                    }
                    for algo in algos(OpKind::Scatter) {
                        let mut recvs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; len]).collect();
                        let calls = (0..n)
                            .map(|r| CollCall::Scatter {
                                send: if r == root {
                                    all.as_ptr()
                                } else {
                                    std::ptr::null()
                                },
                                recv: (!(in_place && r == root))
                                    .then(|| recvs[r as usize].as_mut_ptr()),
                                len,
                                root,
                            })
                            .collect();
                        run(calls, algo);
                        for r in 0..n {
                            if !(in_place && r == root) {
                                assert_eq!(
                                    recvs[r as usize],
                                    data(r, len),
                                    "scatter {algo} n={n} len={len} root={root} rank {r}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn allgather_alltoall_every_algorithm() {
    for n in SIZES {
        for len in [0, 1, 7, 300] {
            let all: Vec<u8> = (0..n).flat_map(|r| data(r, len)).collect();
            for algo in algos(OpKind::Allgather) {
                if algo == "recursive_doubling" && !n.is_power_of_two() {
                    continue;
                }
                for in_place in [false, true] {
                    let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, len)).collect();
                    let mut recvs: Vec<Vec<u8>> = (0..n)
                        .map(|r| {
                            let mut v = vec![0u8; n as usize * len];
                            if in_place {
                                v[r as usize * len..(r as usize + 1) * len]
                                    .copy_from_slice(&sends[r as usize]);
                            }
                            v
                        })
                        .collect();
                    let calls = (0..n as usize)
                        .map(|r| CollCall::Allgather {
                            send: (!in_place).then(|| sends[r].as_ptr()),
                            recv: recvs[r].as_mut_ptr(),
                            len,
                        })
                        .collect();
                    run(calls, algo);
                    for r in 0..n as usize {
                        assert_eq!(recvs[r], all, "allgather {algo} n={n} len={len} rank {r}");
                    }
                }
            }
            // Block (i -> j) is data(i*16 + j).
            let block = |i: u32, j: u32| data(i * 16 + j, len);
            for algo in algos(OpKind::Alltoall) {
                for in_place in [false, true] {
                    let sends: Vec<Vec<u8>> = (0..n)
                        .map(|i| (0..n).flat_map(|j| block(i, j)).collect())
                        .collect();
                    let mut recvs: Vec<Vec<u8>> = (0..n as usize)
                        .map(|r| {
                            if in_place {
                                sends[r].clone()
                            } else {
                                vec![0u8; n as usize * len]
                            }
                        })
                        .collect();
                    let calls = (0..n as usize)
                        .map(|r| CollCall::Alltoall {
                            send: (!in_place).then(|| sends[r].as_ptr()),
                            recv: recvs[r].as_mut_ptr(),
                            len,
                        })
                        .collect();
                    run(calls, algo);
                    for j in 0..n {
                        let want: Vec<u8> = (0..n).flat_map(|i| block(i, j)).collect();
                        assert_eq!(
                            recvs[j as usize], want,
                            "alltoall {algo} n={n} len={len} rank {j}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn v_variants() {
    for n in SIZES {
        // Rank i sends (i + j) % 4 * 5 bytes to rank j, blocks in reverse order with gaps.
        let cnt = |i: u32, j: u32| ((i + j) % 4) as usize * 5;
        let layout = |counts: &[usize]| -> Vec<usize> {
            let mut d = vec![0; counts.len()];
            let mut at = 3;
            for k in (0..counts.len()).rev() {
                d[k] = at;
                at += counts[k] + 2;
            }
            d
        };
        for algo in algos(OpKind::Alltoallv) {
            let mut sends = Vec::new();
            let mut recvs = Vec::new();
            let mut calls = Vec::new();
            let mut meta = Vec::new();
            for i in 0..n {
                let sc: Vec<usize> = (0..n).map(|j| cnt(i, j)).collect();
                let sd = layout(&sc);
                let rc: Vec<usize> = (0..n).map(|j| cnt(j, i)).collect();
                let rd = layout(&rc);
                let mut s = vec![0u8; sd.iter().zip(&sc).map(|(d, c)| d + c).max().unwrap() + 4];
                for j in 0..n as usize {
                    s[sd[j]..sd[j] + sc[j]].copy_from_slice(&data(i * 16 + j as u32, sc[j]));
                }
                sends.push(s);
                recvs.push(vec![
                    0xeeu8;
                    rd.iter().zip(&rc).map(|(d, c)| d + c).max().unwrap()
                        + 4
                ]);
                meta.push((sc, sd, rc, rd));
            }
            for i in 0..n as usize {
                let (sc, sd, rc, rd) = meta[i].clone();
                calls.push(CollCall::Alltoallv {
                    send: Some(sends[i].as_ptr()),
                    scounts: sc,
                    sdispls: sd,
                    recv: recvs[i].as_mut_ptr(),
                    rcounts: rc,
                    rdispls: rd,
                });
            }
            run(calls, algo);
            for j in 0..n as usize {
                let (_, _, rc, rd) = &meta[j];
                for i in 0..n as usize {
                    assert_eq!(
                        recvs[j][rd[i]..rd[i] + rc[i]],
                        data(i as u32 * 16 + j as u32, rc[i]),
                        "alltoallv {algo} n={n}"
                    );
                }
                assert_eq!(recvs[j][0..3], [0xee; 3], "gap untouched");
            }
        }
        // Gatherv / scatterv / allgatherv: rank i's block is i*3 bytes.
        let counts: Vec<usize> = (0..n as usize).map(|i| i * 3).collect();
        let displs = layout(&counts);
        let total = displs
            .iter()
            .zip(&counts)
            .map(|(d, c)| d + c)
            .max()
            .unwrap()
            + 1;
        for root in [0, n - 1] {
            let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, r as usize * 3)).collect();
            let mut recv = vec![0u8; total];
            let rp = recv.as_mut_ptr();
            let calls = (0..n as usize)
                .map(|r| CollCall::Gatherv {
                    send: Some(sends[r].as_ptr()),
                    sendlen: counts[r],
                    recv: rp,
                    counts: counts.clone(),
                    displs: displs.clone(),
                    root,
                })
                .collect();
            run(calls, "linear");
            for r in 0..n as usize {
                assert_eq!(
                    recv[displs[r]..displs[r] + counts[r]],
                    sends[r][..],
                    "gatherv n={n}"
                );
            }
            let mut recvs: Vec<Vec<u8>> = counts.iter().map(|&c| vec![0; c]).collect();
            let calls = (0..n as usize)
                .map(|r| CollCall::Scatterv {
                    send: recv.as_ptr(),
                    counts: counts.clone(),
                    displs: displs.clone(),
                    recv: Some(recvs[r].as_mut_ptr()),
                    recvlen: counts[r],
                    root,
                })
                .collect();
            run(calls, "linear");
            assert_eq!(recvs, sends, "scatterv n={n}");
        }
        let sends: Vec<Vec<u8>> = (0..n).map(|r| data(r, r as usize * 3)).collect();
        let mut recvs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; total]).collect();
        let calls = (0..n as usize)
            .map(|r| CollCall::Allgatherv {
                send: Some(sends[r].as_ptr()),
                recv: recvs[r].as_mut_ptr(),
                counts: counts.clone(),
                displs: displs.clone(),
            })
            .collect();
        run(calls, "ring");
        for j in 0..n as usize {
            for r in 0..n as usize {
                assert_eq!(
                    recvs[j][displs[r]..displs[r] + counts[r]],
                    sends[r][..],
                    "allgatherv n={n}"
                );
            }
        }
    }
}

#[test]
fn catalogue_matches_the_parameters() {
    for op in OpKind::ALL {
        let Some(p) = op.param() else { continue };
        let param = crate::params::lookup(p).expect("registered");
        let crate::params::Kind::Choice(choices) = param.kind else {
            panic!("{p} is not a choice")
        };
        let mut want = vec!["auto"];
        want.extend(algos(op));
        let mut got = choices.to_vec();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{p}");
    }
}

/// A root that sends fewer bytes than the other rank's count asks for: that
/// rank's collective fails, under every broadcast algorithm, rather than
/// returning a half-filled buffer as a success; where the root's message
/// is what arrives short, the error names both sizes. (Algorithms that
/// split the data also send the root a mismatched piece back.)
#[test]
fn a_short_broadcast_is_reported_by_its_receiver() {
    let all = algos(OpKind::Bcast);
    assert!(all.contains(&"binomial"));
    for algo in all {
        let mut root = data(0, 4);
        let mut other = vec![0u8; 8];
        let calls = [(&mut root, 4), (&mut other, 8)].map(|(b, len)| CollCall::Bcast {
            buf: b.as_mut_ptr(),
            len,
            root: 0,
        });
        let group: Arc<[u32]> = (0..2).collect();
        let scheds = calls
            .iter()
            .enumerate()
            .map(|(me, c)| c.build(algo, 2, me as u32).finish(3, 9, group.clone()))
            .collect();
        let errors = run_all(scheds);
        let e = errors[1].as_ref().expect("the receiver sees the mismatch");
        if algo == "binomial" {
            assert!(errors[0].is_none(), "{algo}: the root: {:?}", errors[0]);
            assert_eq!(e.class, crate::ErrorClass::Other, "{algo}: {e}");
            assert!(e.to_string().contains("sent 4 bytes"), "{algo}: {e}");
            assert!(e.to_string().contains("expect 8"), "{algo}: {e}");
            assert_eq!(
                &other[..4],
                &data(0, 4)[..],
                "{algo}: what was sent arrives"
            );
        }
    }
}

/*
 * rw.h - shared set-up of the RWAPI kernels (rw_pingpong, rw_bidir,
 * rw_burst): Ben Fredj & Renault's three benchmarks with remote writes in place of
 * sends, on the same harness as the MPI kernels (bench.h), so `tandem
 * bench compare` can put the two side by side per size.
 *
 * Ranks 0 and 1 each allocate a source and a destination block with
 * rwapi_alloc and exchange the destination's address (over MPI, before
 * timing). How the target learns that a write has arrived is a parameter:
 *   notify=flag  (default) the last byte of each write is a flag (1) that
 *                the target polls in its destination buffer, driving
 *                progress with rwapi_receive meanwhile, and clears once
 *                seen; the writer clears it in its source once the round
 *                is over. This relies on a write's last byte landing last,
 *                which Tandem does (the transports stream into the buffer,
 *                and a direct write between nodes on one host, a copy into
 *                the target's heap, stores its last byte last);
 *   notify=small a small message sent right after the write (rwapi's
 *                ordering makes the data visible before the notice): the
 *                RWAPI paper's usage pattern, one more frame per write (over TCP
 *                it leaves with the write, in one sendmsg).
 *
 * Tandem only: RWAPI is Tandem's API (`tandem bench rw_pingpong`).
 */
#ifndef TANDEM_BENCH_RW_H
#define TANDEM_BENCH_RW_H

#include "bench.h"
#include <rwapi.h>

static rwapi_net rw_src, rw_dst, rw_peer_dst;
static volatile char *rw_src_mem, *rw_dst_mem;
static int rw_flag = 1;
static rwapi_sid rw_last_sid;
/* Writes alternate between two halves of the destination block: in the
 * bidirectional kernel a writer may be one write ahead of its peer's
 * reading, and its next flag must not land on the one not yet seen. A
 * kernel whose writes strictly alternate with the peer's (rw_pingpong)
 * sets rw_one_half before rw_setup: one destination as large as the
 * largest write, the memory MPI's ping-pong uses, and no more (a second
 * 4 MiB half made the 4 MiB round trip overflow the caches). */
static long rw_half;
static int rw_one_half;
static unsigned long rw_seq_out, rw_seq_in;
/* The MPI kernel's body (from its .c file, included for it), which the
 * parameter with=mpi times in the same launch, batch for batch. */
static bench_body rw_mpi_body;

static void rw_check(int rc, const char *what)
{
    if (rc < 0)
        bench_fail("%s failed: RWAPI error %d", what, rc);
}

/* Waits for the next small message (the arrival notice). */
static inline void rw_wait_notice(void)
{
    int node;
    rwapi_small m;
    for (;;) {
        int r = rwapi_receive(&node, &m);
        rw_check(r, "rwapi_receive");
        if (r == 1)
            return;
    }
}

static inline void rw_notify(int peer)
{
    rwapi_small m;
    memset(&m, 0, sizeof m);
    rw_check(rwapi_send(peer, m), "rwapi_send");
}

/* bench_pair_params hook: RWAPI up, blocks allocated, addresses exchanged. */
static void rw_setup(void)
{
    long sizes[BENCH_MAX_SIZES], maxsize = 1;
    int n = bench_param_sizes("sizes", "1", sizes), i;
    for (i = 0; i < n; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];
    const char *notify = bench_param_str("notify", "flag");
    if (strcmp(notify, "flag") == 0)
        rw_flag = 1;
    else if (strcmp(notify, "small") == 0)
        rw_flag = 0;
    else
        bench_fail("parameter notify=%s: expected flag or small", notify);
    const char *with = bench_param_str("with", "none");
    if (strcmp(with, "mpi") == 0) {
        bench_pair_also = rw_mpi_body;
        bench_pair_api = "rwapi";
        bench_pair_also_api = "mpi";
    } else if (strcmp(with, "none") != 0) {
        bench_fail("parameter with=%s: expected mpi or none", with);
    }
    rw_check(rwapi_init(0, NULL), "rwapi_init");
    if (bench_rank > 1)
        return;
    rw_half = rw_one_half ? 0 : maxsize;
    const size_t dlen = (rw_one_half ? 1 : 2) * (size_t)maxsize;
    char *s = rwapi_alloc((size_t)maxsize, &rw_src);
    char *d = rwapi_alloc(dlen, &rw_dst);
    if (!s || !d)
        bench_fail("rwapi_alloc of %ld bytes failed", maxsize);
    memset(s, 'a' + bench_rank, (size_t)maxsize);
    memset(d, 0, dlen);
    rw_src_mem = s;
    rw_dst_mem = d;
    bench_check(MPI_Sendrecv(&rw_dst, sizeof rw_dst, MPI_BYTE, 1 - bench_rank, BENCH_TAG_CTL,
                             &rw_peer_dst, sizeof rw_peer_dst, MPI_BYTE, 1 - bench_rank,
                             BENCH_TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                "address exchange");
}

/* One write of `size` bytes to the peer (into the half of its block whose
 * turn it is); returns its send id. */
static inline rwapi_sid rw_write(int peer, long size)
{
    rwapi_net dst = rwapi_net_offset(rw_peer_dst, (size_t)((rw_seq_out++ & 1) * rw_half));
    rwapi_sid sid = rwapi_write(peer, rw_src, dst, (size_t)size);
    if (sid < 0)
        bench_fail("rwapi_write of %ld bytes failed: RWAPI error %lld", size, (long long)sid);
    return sid;
}

/* Sends `size` bytes to the peer, announced as `notify` says. */
static inline void rw_send_data(int peer, long size)
{
    if (rw_flag && size > 0) {
        rw_src_mem[size - 1] = 1;
        rw_last_sid = rw_write(peer, size);
    } else {
        rw_last_sid = rw_write(peer, size);
        rw_notify(peer);
    }
}

/* Waits until the peer's `size` bytes are here. */
static inline void rw_wait_data(long size)
{
    volatile char *flag = rw_dst_mem + (rw_seq_in++ & 1) * rw_half + size - 1;
    if (rw_flag && size > 0) {
        int node;
        rwapi_small m;
        while (*flag != 1)
            rw_check(rwapi_receive(&node, &m), "rwapi_receive");
        *flag = 0;
    } else {
        rw_wait_notice();
    }
}

/* After a round: once our last write no longer reads its source, the
 * flag there may go (a large write may still be on its way). */
static inline void rw_round_done(long size)
{
    if (rw_flag && size > 0) {
        int r;
        while ((r = rwapi_issent(rw_last_sid)) == 0)
            ;
        rw_check(r, "rwapi_issent");
        rw_src_mem[size - 1] = 'a' + bench_rank;
    }
}

#endif

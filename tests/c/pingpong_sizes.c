/*
 * pingpong_sizes.c - every message size from 0 B to 16 MiB, across the
 * eager/rendezvous boundaries (by default in Tandem 16 KiB between ranks of
 * one host, 64 KiB over TCP).
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). Pairs (0,1), (2,3) ping-pong;
 * the last rank of an odd-sized job only takes part in the ring pass.
 * Usage: pingpong_sizes [MAXBYTES]   (default 16777216)
 *
 * For each size 0, 1, 2, 4, ..., MAXBYTES:
 *   1. blocking ping-pong (MPI_Send / MPI_Recv, receive count larger than the
 *      message to check that MPI_Get_count reports the message size);
 *   2. non-blocking ping-pong (MPI_Irecv posted first, MPI_Isend, MPI_Wait);
 *   3. non-blocking simultaneous exchange (both sides Irecv + Isend, Waitall);
 *   4. a ring pass: every rank sends to rank+1 and receives from rank-1.
 * Every byte is verified, with guard bytes after every receive buffer.
 */
#include "check.h"

#define NAME "pingpong_sizes"
#define SLACK 16 /* extra receive capacity in the blocking ping-pong */

static unsigned char *sendbuf, *recvbuf;

static void check_counts(const MPI_Status *st, int src, int tag, int bytes, const char *what)
{
    int n = -1;
    tc_check_status(st, src, tag, bytes, what);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    if (bytes % (int)sizeof(int) == 0)
        CHECK_EQ(bytes / (int)sizeof(int), n, "%s: MPI_Get_count(MPI_INT)", what);
    else
        CHECK_EQ(MPI_UNDEFINED, n, "%s: MPI_Get_count(MPI_INT) of %d bytes", what, bytes);
}

static void pingpong_blocking(int rank, int partner, int size, int key)
{
    MPI_Status st;
    const int tag = 1;
    char what[96];
    snprintf(what, sizeof what, "blocking ping-pong of %d bytes with rank %d", size, partner);
    if (rank < partner) {
        tc_fill(sendbuf, size, rank, key);
        CHECK_MPI(MPI_Send(sendbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
        tc_prepare_recv(recvbuf, size, partner, key);
        tc_guard_set(recvbuf, size, SLACK + TC_GUARD);
        CHECK_MPI(MPI_Recv(recvbuf, size + SLACK, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
    } else {
        tc_prepare_recv(recvbuf, size, partner, key);
        tc_guard_set(recvbuf, size, SLACK + TC_GUARD);
        CHECK_MPI(MPI_Recv(recvbuf, size + SLACK, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
    }
    check_counts(&st, partner, tag, size, what);
    tc_verify(recvbuf, size, partner, key, what);
    tc_guard_check(recvbuf, size, SLACK + TC_GUARD, what);
    if (rank > partner) {
        tc_fill(sendbuf, size, rank, key);
        CHECK_MPI(MPI_Send(sendbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
    }
}

static void pingpong_nonblocking(int rank, int partner, int size, int key)
{
    MPI_Request rreq, sreq;
    MPI_Status st;
    const int tag = 2;
    char what[96];
    snprintf(what, sizeof what, "non-blocking ping-pong of %d bytes with rank %d", size, partner);
    tc_prepare_recv(recvbuf, size, partner, key);
    CHECK_MPI(MPI_Irecv(recvbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &rreq));
    if (rank < partner) {
        tc_fill(sendbuf, size, rank, key);
        CHECK_MPI(MPI_Isend(sendbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &sreq));
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        CHECK(sreq == MPI_REQUEST_NULL, "%s: MPI_Wait did not set the send request to MPI_REQUEST_NULL", what);
        CHECK_MPI(MPI_Wait(&rreq, &st));
    } else {
        CHECK_MPI(MPI_Wait(&rreq, &st));
        tc_fill(sendbuf, size, rank, key);
        CHECK_MPI(MPI_Isend(sendbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &sreq));
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    }
    CHECK(rreq == MPI_REQUEST_NULL, "%s: MPI_Wait did not set the receive request to MPI_REQUEST_NULL", what);
    check_counts(&st, partner, tag, size, what);
    tc_check_recv(recvbuf, size, partner, key, what);
}

static void exchange(int rank, int partner, int size, int key)
{
    MPI_Request reqs[2];
    MPI_Status sts[2];
    const int tag = 3;
    char what[96];
    snprintf(what, sizeof what, "simultaneous exchange of %d bytes with rank %d", size, partner);
    tc_prepare_recv(recvbuf, size, partner, key);
    tc_fill(sendbuf, size, rank, key);
    CHECK_MPI(MPI_Irecv(recvbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &reqs[0]));
    CHECK_MPI(MPI_Isend(sendbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &reqs[1]));
    CHECK_MPI(MPI_Waitall(2, reqs, sts));
    CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL, "%s: MPI_Waitall left a request active",
          what);
    check_counts(&sts[0], partner, tag, size, what);
    tc_check_recv(recvbuf, size, partner, key, what);
}

static void ring(int rank, int nranks, int size, int key)
{
    MPI_Request req;
    MPI_Status st;
    const int tag = 4;
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    char what[96];
    snprintf(what, sizeof what, "ring pass of %d bytes from rank %d", size, left);
    tc_prepare_recv(recvbuf, size, left, key);
    tc_fill(sendbuf, size, rank, key);
    CHECK_MPI(MPI_Irecv(recvbuf, size, MPI_BYTE, left, tag, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Send(sendbuf, size, MPI_BYTE, right, tag, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&req, &st));
    check_counts(&st, left, tag, size, what);
    tc_check_recv(recvbuf, size, left, key, what);
}

int main(int argc, char **argv)
{
    int rank, nranks, partner, step = 0;
    long maxsize = 16L * 1024 * 1024, size;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    if (argc > 1) {
        maxsize = strtol(argv[1], NULL, 10);
        CHECK(maxsize >= 0 && maxsize <= 1L << 30, "usage: %s [MAXBYTES] (got \"%s\")", argv[0], argv[1]);
    }
    partner = tc_partner(rank, nranks);

    sendbuf = tc_alloc((size_t)maxsize);
    recvbuf = tc_alloc((size_t)maxsize + SLACK);

    for (size = 0; size <= maxsize; size = size ? size * 2 : 1, step++) {
        int key = step * 8;
        if (partner >= 0) {
            pingpong_blocking(rank, partner, (int)size, key + 1);
            pingpong_nonblocking(rank, partner, (int)size, key + 2);
            exchange(rank, partner, (int)size, key + 3);
        }
        ring(rank, nranks, (int)size, key + 4);
    }
    if (rank == 0) {
        printf("%d sizes from 0 to %ld bytes verified on %d ranks\n", step, maxsize, nranks);
        fflush(stdout);
    }
    free(sendbuf);
    free(recvbuf);
    return tc_finish(NAME);
}

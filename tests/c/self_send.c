/*
 * self_send.c - messages from a rank to itself, and MPI_Sendrecv /
 * MPI_Sendrecv_replace.
 *
 * Ranks: any number (1 included); every rank does the same.
 *   1. MPI_Isend to self, then MPI_Recv (eager 1000 B and 4 MiB);
 *   2. MPI_Irecv from self, then MPI_Send (eager and 4 MiB);
 *   3. MPI_Sendrecv with self (eager and 4 MiB), also with MPI_ANY_SOURCE /
 *      MPI_ANY_TAG on the receive side;
 *   4. MPI_Sendrecv_replace with self;
 *   5. MPI_Sendrecv_replace in a ring (to rank+1, from rank-1), passing a
 *      buffer all the way round: after step s the buffer holds the message
 *      of rank (rank - s); after N steps it is back home (eager and 200 KiB);
 *   6. MPI_Sendrecv in a ring, sizes differing per rank (a receive buffer
 *      larger than the message);
 *   7. no data described as 0 x MPI_DATATYPE_NULL (as MPICH allows and
 *      programs written for it do): a ring of empty messages, a receive
 *      from MPI_PROC_NULL; one element of MPI_DATATYPE_NULL stays an error.
 */
#include "check.h"

#define NAME "self_send"
#define BIG (4 * 1024 * 1024)

static int rank, nranks;
static unsigned char *sbuf, *rbuf;

static void isend_recv(int size, int key)
{
    MPI_Request r;
    MPI_Status st;
    char what[96];
    snprintf(what, sizeof what, "MPI_Isend to self + MPI_Recv of %d bytes", size);
    tc_fill(sbuf, size, rank, key);
    tc_prepare_recv(rbuf, size, rank, key);
    CHECK_MPI(MPI_Isend(sbuf, size, MPI_BYTE, rank, key, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Recv(rbuf, size, MPI_BYTE, rank, key, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    tc_check_status(&st, rank, key, size, what);
    tc_check_recv(rbuf, size, rank, key, what);
}

static void irecv_send(int size, int key)
{
    MPI_Request r;
    MPI_Status st;
    char what[96];
    snprintf(what, sizeof what, "MPI_Irecv from self + MPI_Send of %d bytes", size);
    tc_fill(sbuf, size, rank, key);
    tc_prepare_recv(rbuf, size, rank, key);
    CHECK_MPI(MPI_Irecv(rbuf, size, MPI_BYTE, rank, key, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Send(sbuf, size, MPI_BYTE, rank, key, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, &st));
    tc_check_status(&st, rank, key, size, what);
    tc_check_recv(rbuf, size, rank, key, what);
}

static void sendrecv_self(int size, int key, int wild)
{
    MPI_Status st;
    char what[96];
    snprintf(what, sizeof what, "MPI_Sendrecv with self of %d bytes%s", size, wild ? " (ANY_SOURCE/ANY_TAG)" : "");
    tc_fill(sbuf, size, rank, key);
    tc_prepare_recv(rbuf, size, rank, key);
    CHECK_MPI(MPI_Sendrecv(sbuf, size, MPI_BYTE, rank, key, rbuf, size, MPI_BYTE, wild ? MPI_ANY_SOURCE : rank,
                           wild ? MPI_ANY_TAG : key, MPI_COMM_WORLD, &st));
    tc_check_status(&st, rank, key, size, what);
    tc_check_recv(rbuf, size, rank, key, what);
    tc_verify(sbuf, size, rank, key, "the send buffer after MPI_Sendrecv");
}

static void replace_self(int size, int key)
{
    MPI_Status st;
    char what[96];
    snprintf(what, sizeof what, "MPI_Sendrecv_replace with self of %d bytes", size);
    tc_fill(rbuf, size, rank, key);
    tc_guard_set(rbuf, size, TC_GUARD);
    CHECK_MPI(MPI_Sendrecv_replace(rbuf, size, MPI_BYTE, rank, key, rank, key, MPI_COMM_WORLD, &st));
    tc_check_status(&st, rank, key, size, what);
    tc_check_recv(rbuf, size, rank, key, what);
}

static void replace_ring(int size, int key)
{
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks, step;
    MPI_Status st;
    char what[128];
    tc_fill(rbuf, size, rank, key);
    tc_guard_set(rbuf, size, TC_GUARD);
    for (step = 1; step <= nranks; step++) {
        int origin = ((rank - step) % nranks + nranks) % nranks;
        snprintf(what, sizeof what, "MPI_Sendrecv_replace ring of %d bytes, step %d", size, step);
        CHECK_MPI(MPI_Sendrecv_replace(rbuf, size, MPI_BYTE, right, key + step, left, key + step, MPI_COMM_WORLD,
                                       &st));
        tc_check_status(&st, left, key + step, size, what);
        tc_check_recv(rbuf, size, origin, key, what);
    }
}

static void sendrecv_ring(int key)
{
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    int mysize = 1000 + 9000 * rank, leftsize = 1000 + 9000 * left;
    MPI_Status st;
    tc_fill(sbuf, mysize, rank, key);
    tc_prepare_recv(rbuf, leftsize, left, key);
    tc_guard_set(rbuf, leftsize, 50000 + TC_GUARD);
    CHECK_MPI(MPI_Sendrecv(sbuf, mysize, MPI_BYTE, right, key, rbuf, leftsize + 50000, MPI_BYTE, left, key,
                           MPI_COMM_WORLD, &st));
    tc_check_status(&st, left, key, leftsize, "MPI_Sendrecv ring");
    tc_verify(rbuf, leftsize, left, key, "MPI_Sendrecv ring");
    tc_guard_check(rbuf, leftsize, 50000 + TC_GUARD, "MPI_Sendrecv ring");
}

static void null_type_no_data(int key)
{
    int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
    MPI_Request r;
    MPI_Status st;
    CHECK_MPI(MPI_Irecv(NULL, 0, MPI_DATATYPE_NULL, from, key, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, to, key, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, &st));
    tc_check_status(&st, from, key, 0, "empty message of MPI_DATATYPE_NULL");
    CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, to, key + 1, NULL, 0, MPI_DATATYPE_NULL, from, key + 1,
                           MPI_COMM_WORLD, &st));
    tc_check_status(&st, from, key + 1, 0, "MPI_Sendrecv of MPI_DATATYPE_NULL");
    CHECK_MPI(MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, key, MPI_COMM_WORLD, &st));
    CHECK_EQ(MPI_PROC_NULL, st.MPI_SOURCE, "source of a receive from MPI_PROC_NULL");
    CHECK_EQ(MPI_ANY_TAG, st.MPI_TAG, "tag of a receive from MPI_PROC_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int x = 0;
    tc_expect_class(MPI_Send(&x, 1, MPI_DATATYPE_NULL, to, key, MPI_COMM_WORLD), MPI_ERR_TYPE,
                    "one element of MPI_DATATYPE_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    sbuf = tc_alloc(BIG);
    rbuf = tc_alloc(BIG);

    isend_recv(0, 1);
    isend_recv(1000, 2);
    isend_recv(BIG, 3);
    irecv_send(1000, 4);
    irecv_send(BIG, 5);
    sendrecv_self(1000, 6, 0);
    sendrecv_self(BIG, 7, 0);
    /* wildcards: only while no other rank can send to this one (until now
     * every message went to self; the ring steps start after the barrier) */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    sendrecv_self(70000, 8, 1);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    replace_self(1000, 9);
    replace_self(BIG, 10);
    replace_ring(1000, 100);
    replace_ring(200 * 1024, 200);
    sendrecv_ring(300);
    null_type_no_data(400);

    if (rank == 0)
        printf("self messages and Sendrecv(_replace) rings verified on %d ranks\n", nranks);
    free(sbuf);
    free(rbuf);
    return tc_finish(NAME);
}

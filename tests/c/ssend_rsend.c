/*
 * ssend_rsend.c - synchronous and ready sends.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). In each pair (0,1), (2,3)
 * the even rank is A, the odd rank B; the last rank of an odd-sized job only
 * joins the final barrier.
 *
 *   1. A: MPI_Issend of 8 B (and then of 1 MiB) to B; B does not post the
 *      matching receive until A says "go". A calls MPI_Test 5 times, 20 ms
 *      apart, and each must give flag 0 (a synchronous send cannot complete
 *      before the receive is matched); then A sends "go" and MPI_Waits. B
 *      receives "go" (a different tag), then the synchronous message.
 *   2. MPI_Ssend (eager and rendezvous sizes) to a receive B posted earlier,
 *      and to one B posts later.
 *   3. MPI_Rsend (eager and rendezvous sizes): B posts MPI_Irecv, then tells A
 *      it is ready; A receives that, then MPI_Rsends.
 *   4. MPI_Issend + MPI_Wait where the receive is already posted.
 */
#include "check.h"

#define NAME "ssend_rsend"
#define MIB (1024 * 1024)

static int rank, nranks, partner;
static unsigned char *sbuf, *rbuf;

static void issend_held(int size, int tag)
{
    MPI_Request r;
    int flag, i, go = 1;
    tc_fill(sbuf, size, rank, tag);
    CHECK_MPI(MPI_Issend(sbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
    for (i = 0; i < 5; i++) {
        flag = -1;
        CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        CHECK_EQ(0, flag, "MPI_Test of an MPI_Issend of %d bytes whose receive is not posted yet (test %d)", size, i);
        CHECK(r != MPI_REQUEST_NULL, "MPI_Test with flag 0 freed the request");
        tc_sleep_ms(20);
    }
    CHECK_MPI(MPI_Send(&go, 1, MPI_INT, partner, tag + 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL, "MPI_Wait did not free the Issend request");
}

static void recv_held(int size, int tag)
{
    MPI_Status st;
    int go = 0;
    char what[96];
    CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, partner, tag + 1, MPI_COMM_WORLD, &st));
    CHECK_EQ(1, go, "the go message");
    snprintf(what, sizeof what, "the %d-byte MPI_Issend message", size);
    tc_prepare_recv(rbuf, size, partner, tag);
    CHECK_MPI(MPI_Recv(rbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
    tc_check_status(&st, partner, tag, size, what);
    tc_check_recv(rbuf, size, partner, tag, what);
}

/* B: posts the receive, then tells A it is ready */
static void rsend_target(int size, int tag)
{
    MPI_Request r;
    MPI_Status st;
    int ready = 7;
    char what[96];
    snprintf(what, sizeof what, "the %d-byte MPI_Rsend message", size);
    tc_prepare_recv(rbuf, size, partner, tag);
    CHECK_MPI(MPI_Irecv(rbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Send(&ready, 1, MPI_INT, partner, tag + 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, &st));
    tc_check_status(&st, partner, tag, size, what);
    tc_check_recv(rbuf, size, partner, tag, what);
}

static void rsend_source(int size, int tag)
{
    int ready = 0;
    CHECK_MPI(MPI_Recv(&ready, 1, MPI_INT, partner, tag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_EQ(7, ready, "the ready message");
    tc_fill(sbuf, size, rank, tag);
    CHECK_MPI(MPI_Rsend(sbuf, size, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    partner = tc_partner(rank, nranks);
    sbuf = tc_alloc(MIB);
    rbuf = tc_alloc(MIB);

    if (partner >= 0 && rank % 2 == 0) {
        MPI_Request r;
        issend_held(8, 10);
        issend_held(MIB, 20);
        /* 2: B posts tags 30/31, then sends tag 39; it receives 32/33 later */
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, partner, 39, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        tc_fill(sbuf, 8, rank, 30);
        CHECK_MPI(MPI_Ssend(sbuf, 8, MPI_BYTE, partner, 30, MPI_COMM_WORLD));
        tc_fill(sbuf, MIB, rank, 31);
        CHECK_MPI(MPI_Ssend(sbuf, MIB, MPI_BYTE, partner, 31, MPI_COMM_WORLD));
        tc_fill(sbuf, 8, rank, 32);
        CHECK_MPI(MPI_Ssend(sbuf, 8, MPI_BYTE, partner, 32, MPI_COMM_WORLD));
        tc_fill(sbuf, MIB, rank, 33);
        CHECK_MPI(MPI_Ssend(sbuf, MIB, MPI_BYTE, partner, 33, MPI_COMM_WORLD));
        /* 3 */
        rsend_source(8, 40);
        rsend_source(MIB, 50);
        rsend_source(0, 60);
        /* 4: B posted the receive, then said so */
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, partner, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        tc_fill(sbuf, 100, rank, 70);
        CHECK_MPI(MPI_Issend(sbuf, 100, MPI_BYTE, partner, 70, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (partner >= 0) {
        MPI_Request rr[2], r;
        MPI_Status sts[2], st;
        unsigned char *rbuf2 = tc_alloc(MIB);
        recv_held(8, 10);
        recv_held(MIB, 20);
        /* 2 */
        tc_prepare_recv(rbuf, 8, partner, 30);
        tc_prepare_recv(rbuf2, MIB, partner, 31);
        CHECK_MPI(MPI_Irecv(rbuf, 8, MPI_BYTE, partner, 30, MPI_COMM_WORLD, &rr[0]));
        CHECK_MPI(MPI_Irecv(rbuf2, MIB, MPI_BYTE, partner, 31, MPI_COMM_WORLD, &rr[1]));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, partner, 39, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(2, rr, sts));
        tc_check_status(&sts[0], partner, 30, 8, "MPI_Ssend of 8 B to a posted receive");
        tc_check_recv(rbuf, 8, partner, 30, "MPI_Ssend of 8 B to a posted receive");
        tc_check_status(&sts[1], partner, 31, MIB, "MPI_Ssend of 1 MiB to a posted receive");
        tc_check_recv(rbuf2, MIB, partner, 31, "MPI_Ssend of 1 MiB to a posted receive");
        tc_sleep_ms(10);
        tc_prepare_recv(rbuf, 8, partner, 32);
        CHECK_MPI(MPI_Recv(rbuf, 8, MPI_BYTE, partner, 32, MPI_COMM_WORLD, &st));
        tc_check_status(&st, partner, 32, 8, "MPI_Ssend of 8 B to a late receive");
        tc_check_recv(rbuf, 8, partner, 32, "MPI_Ssend of 8 B to a late receive");
        tc_prepare_recv(rbuf, MIB, partner, 33);
        CHECK_MPI(MPI_Recv(rbuf, MIB, MPI_BYTE, partner, 33, MPI_COMM_WORLD, &st));
        tc_check_status(&st, partner, 33, MIB, "MPI_Ssend of 1 MiB to a late receive");
        tc_check_recv(rbuf, MIB, partner, 33, "MPI_Ssend of 1 MiB to a late receive");
        /* 3 */
        rsend_target(8, 40);
        rsend_target(MIB, 50);
        rsend_target(0, 60);
        /* 4 */
        tc_prepare_recv(rbuf, 100, partner, 70);
        CHECK_MPI(MPI_Irecv(rbuf, 100, MPI_BYTE, partner, 70, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, partner, 79, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, &st));
        tc_check_status(&st, partner, 70, 100, "MPI_Issend to a posted receive");
        tc_check_recv(rbuf, 100, partner, 70, "MPI_Issend to a posted receive");
        free(rbuf2);
    }
    if (rank == 0)
        printf("synchronous and ready sends verified\n");
    free(sbuf);
    free(rbuf);
    return tc_finish(NAME);
}

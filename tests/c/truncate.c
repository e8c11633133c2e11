/*
 * truncate.c - a message longer than the receive buffer: MPI_ERR_TRUNCATE,
 * the buffer is filled but not overrun, and the job goes on.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). In each pair (0,1), (2,3)
 * the even rank sends and the odd rank receives; the last rank of an
 * odd-sized job only joins the final barrier.
 *
 * MPI_ERRORS_RETURN is set on MPI_COMM_WORLD. Cases, each followed by a normal
 * message that must arrive intact:
 *   1. MPI_Recv, eager: 100 B into 10 B;
 *   2. MPI_Recv, rendezvous: 1 MiB into 1000 B (the sender's MPI_Send succeeds);
 *   3. MPI_Irecv + MPI_Wait (eager and rendezvous): MPI_Wait returns an error
 *      of class MPI_ERR_TRUNCATE;
 *   4. MPI_Irecv + MPI_Test loop: MPI_Test returns MPI_ERR_TRUNCATE;
 *   5. MPI_Waitall over a truncated and a normal receive: MPI_ERR_IN_STATUS,
 *      statuses[0].MPI_ERROR of class MPI_ERR_TRUNCATE, statuses[1].MPI_ERROR
 *      MPI_SUCCESS (or MPI_ERR_PENDING, which the standard allows; then the
 *      request is completed with MPI_Wait);
 *   6. tiny messages (over shared memory they travel inline in a cell):
 *      MPI_Recv of 8 B into 3 B, MPI_Irecv + MPI_Wait of 8 B into 5 B.
 * Checked after every truncated receive: the error class, the first bytes
 * (every one of the buffer's bytes holds the message's start; on another MPI
 * the buffer may also be left untouched, which the standard allows), the
 * guard bytes after the buffer, status.MPI_SOURCE and status.MPI_TAG.
 */
#include "check.h"

#define NAME "truncate"
#define MIB (1024 * 1024)

static unsigned char *sbuf, *rbuf;

/* sender side of one case: a long message then a normal one */
static void send_pair(int dest, int big, int tag)
{
    tc_fill(sbuf, big, tc_rank(), tag);
    CHECK_MPI(MPI_Send(sbuf, big, MPI_BYTE, dest, tag, MPI_COMM_WORLD));
    tc_fill(sbuf, big, tc_rank(), tag + 1);
    CHECK_MPI(MPI_Send(sbuf, big, MPI_BYTE, dest, tag + 1, MPI_COMM_WORLD));
}

static void check_truncated(int rc, const MPI_Status *st, int src, int tag, int cap, const char *what)
{
    tc_expect_class(rc, MPI_ERR_TRUNCATE, what);
    if (st) {
        CHECK_EQ(src, st->MPI_SOURCE, "%s: status.MPI_SOURCE", what);
        CHECK_EQ(tag, st->MPI_TAG, "%s: status.MPI_TAG", what);
    }
    if (tc_is_tandem()) {
        tc_verify(rbuf, cap, src, tag, what);
    } else {
        /* the standard does not say what an overflowing receive leaves in the
         * buffer: Open MPI writes the message's start, MPICH nothing */
        unsigned char *untouched = tc_alloc((size_t)cap);
        tc_unfill(untouched, cap, src, tag);
        if (memcmp(untouched, rbuf, (size_t)cap) != 0)
            tc_verify(rbuf, cap, src, tag, what);
        free(untouched);
    }
    tc_guard_check(rbuf, cap, TC_GUARD, what);
}

/* receives the normal message that follows a truncated one */
static void recv_normal(int src, int big, int tag, const char *what)
{
    MPI_Status st;
    char w[128];
    snprintf(w, sizeof w, "normal message after %s", what);
    tc_prepare_recv(rbuf, big, src, tag);
    CHECK_MPI(MPI_Recv(rbuf, big, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st));
    tc_check_status(&st, src, tag, big, w);
    tc_check_recv(rbuf, big, src, tag, w);
}

static void recv_blocking_case(int src, int big, int cap, int tag, const char *what)
{
    MPI_Status st;
    int rc;
    tc_prepare_recv(rbuf, cap, src, tag);
    rc = MPI_Recv(rbuf, cap, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st);
    check_truncated(rc, &st, src, tag, cap, what);
    recv_normal(src, big, tag + 1, what);
}

static void recv_wait_case(int src, int big, int cap, int tag, const char *what)
{
    MPI_Request req;
    MPI_Status st;
    int rc;
    tc_prepare_recv(rbuf, cap, src, tag);
    CHECK_MPI(MPI_Irecv(rbuf, cap, MPI_BYTE, src, tag, MPI_COMM_WORLD, &req));
    rc = MPI_Wait(&req, &st);
    check_truncated(rc, &st, src, tag, cap, what);
    recv_normal(src, big, tag + 1, what);
}

static void recv_test_case(int src, int big, int cap, int tag, const char *what)
{
    MPI_Request req;
    MPI_Status st;
    int rc, flag = 0;
    double t0 = MPI_Wtime();
    tc_prepare_recv(rbuf, cap, src, tag);
    CHECK_MPI(MPI_Irecv(rbuf, cap, MPI_BYTE, src, tag, MPI_COMM_WORLD, &req));
    for (;;) {
        rc = MPI_Test(&req, &flag, &st);
        if (rc != MPI_SUCCESS || flag)
            break;
        tc_deadline(t0, 30, what);
    }
    check_truncated(rc, &st, src, tag, cap, what);
    recv_normal(src, big, tag + 1, what);
}

int main(int argc, char **argv)
{
    int rank, nranks, partner;
    MPI_Errhandler eh;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_Comm_get_errhandler did not return MPI_ERRORS_RETURN");
    partner = tc_partner(rank, nranks);

    sbuf = tc_alloc(MIB);
    rbuf = tc_alloc(MIB);

    if (partner >= 0 && rank % 2 == 0) {
        MPI_Status st;
        send_pair(partner, 100, 10);
        send_pair(partner, MIB, 20);
        send_pair(partner, 100, 30);
        send_pair(partner, MIB, 40);
        send_pair(partner, 100, 50);
        send_pair(partner, MIB, 60);
        /* Waitall case: tags 70 (truncated) and 71 (normal) */
        send_pair(partner, 100, 70);
        send_pair(partner, MIB, 80);
        send_pair(partner, 8, 90);
        send_pair(partner, 8, 92);
        /* the job still works both ways */
        tc_prepare_recv(rbuf, MIB, partner, 99);
        CHECK_MPI(MPI_Recv(rbuf, MIB, MPI_BYTE, partner, 99, MPI_COMM_WORLD, &st));
        tc_check_status(&st, partner, 99, MIB, "final message back from the receiver");
        tc_check_recv(rbuf, MIB, partner, 99, "final message back from the receiver");
    } else if (partner >= 0) {
        int src = partner;
        recv_blocking_case(src, 100, 10, 10, "MPI_Recv of 100 B into 10 B");
        recv_blocking_case(src, MIB, 1000, 20, "MPI_Recv of 1 MiB into 1000 B");
        recv_wait_case(src, 100, 10, 30, "MPI_Irecv+MPI_Wait of 100 B into 10 B");
        recv_wait_case(src, MIB, 1000, 40, "MPI_Irecv+MPI_Wait of 1 MiB into 1000 B");
        recv_test_case(src, 100, 10, 50, "MPI_Irecv+MPI_Test of 100 B into 10 B");
        recv_test_case(src, MIB, 1000, 60, "MPI_Irecv+MPI_Test of 1 MiB into 1000 B");
        {
            /* 70: 100 B into 10 B, 71: 100 B into 100 B, both completed by one MPI_Waitall */
            MPI_Request reqs[2];
            MPI_Status sts[2];
            unsigned char *r2 = tc_alloc(100);
            int rc;
            tc_prepare_recv(rbuf, 10, src, 70);
            tc_prepare_recv(r2, 100, src, 71);
            CHECK_MPI(MPI_Irecv(rbuf, 10, MPI_BYTE, src, 70, MPI_COMM_WORLD, &reqs[0]));
            CHECK_MPI(MPI_Irecv(r2, 100, MPI_BYTE, src, 71, MPI_COMM_WORLD, &reqs[1]));
            sts[0].MPI_ERROR = -1;
            sts[1].MPI_ERROR = -1;
            rc = MPI_Waitall(2, reqs, sts);
            tc_expect_class(rc, MPI_ERR_IN_STATUS, "MPI_Waitall with a truncated receive: return value");
            check_truncated(sts[0].MPI_ERROR, &sts[0], src, 70, 10,
                            "MPI_Waitall with a truncated receive: statuses[0].MPI_ERROR");
            /* the standard allows MPI_ERR_PENDING for a request that was
             * neither completed nor failed (MPICH does that): then finish it */
            if (sts[1].MPI_ERROR == MPI_ERR_PENDING) {
                CHECK(reqs[1] != MPI_REQUEST_NULL, "MPI_Waitall: statuses[1] is MPI_ERR_PENDING but the request was freed");
                CHECK_MPI(MPI_Wait(&reqs[1], &sts[1]));
            } else {
                CHECK_EQ(MPI_SUCCESS, sts[1].MPI_ERROR,
                         "MPI_Waitall: statuses[1].MPI_ERROR of the normal receive (MPI_SUCCESS or MPI_ERR_PENDING)");
            }
            tc_check_status(&sts[1], src, 71, 100, "MPI_Waitall: the normal receive");
            tc_check_recv(r2, 100, src, 71, "MPI_Waitall: the normal receive");
            free(r2);
        }
        recv_blocking_case(src, MIB, 1000, 80, "MPI_Recv of 1 MiB into 1000 B (again)");
        recv_blocking_case(src, 8, 3, 90, "MPI_Recv of 8 B into 3 B");
        recv_wait_case(src, 8, 5, 92, "MPI_Irecv+MPI_Wait of 8 B into 5 B");
        tc_fill(sbuf, MIB, rank, 99);
        CHECK_MPI(MPI_Send(sbuf, MIB, MPI_BYTE, src, 99, MPI_COMM_WORLD));
    }
    free(sbuf);
    free(rbuf);
    return tc_finish(NAME);
}

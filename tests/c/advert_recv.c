/*
 * advert_recv.c - large non-blocking receives posted before their message
 * leaves (under `progress=thread|signal` Tandem advertises such a receive
 * to a sender on the same host, which writes the message straight into
 * it): data, statuses, matching order, cancellation and truncation must be
 * exactly what MPI says, whichever way each message travels.
 *
 *     advert_recv exact   rank 1 posts, then tells rank 0 to send (20 times,
 *                         512 KiB and one of 4 MiB): every message found its
 *                         receive advertised (the harness checks the
 *                         counters: 21 prematched writes)
 *     advert_recv rules   order against earlier receives, wildcards,
 *                         cancel before and after the message, truncation
 *
 * Rank 1 receives from rank 0; other ranks join the wildcard case.
 */
#include "check.h"

#define BIG (512 * 1024)
#define HUGE (4 << 20)
#define READY 900
#define SENT 901

/* Rank 0 waits until rank 1 says its receives are posted. */
static void await_ready(void)
{
    CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, READY, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
}

static void say_ready(void)
{
    CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, READY, MPI_COMM_WORLD));
}

static void exact(int rank)
{
    unsigned char *buf = tc_alloc(HUGE);
    for (int i = 0; i <= 20; i++) {
        size_t n = i == 20 ? HUGE : BIG;
        if (rank == 0) {
            tc_fill(buf, n, 0, i);
            await_ready();
            CHECK_MPI(MPI_Send(buf, (int)n, MPI_BYTE, 1, 7, MPI_COMM_WORLD));
        } else if (rank == 1) {
            MPI_Request r;
            MPI_Status st;
            tc_prepare_recv(buf, n, 0, i);
            CHECK_MPI(MPI_Irecv(buf, (int)n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r));
            say_ready();
            CHECK_MPI(MPI_Wait(&r, &st));
            tc_check_status(&st, 0, 7, (int)n, "advertised receive");
            tc_check_recv(buf, n, 0, i, "advertised receive");
        }
    }
    free(buf);
}

static void rules(int rank, int size)
{
    unsigned char *a = tc_alloc(BIG), *b = tc_alloc(BIG), *c = tc_alloc(BIG);
    MPI_Request ra, rb, rc;
    MPI_Status st;
    int flag;

    /* 1. Two receives from rank 0, the first with any tag: the first
     * message meets the first receive, the second the second. */
    if (rank == 0) {
        tc_fill(a, BIG, 0, 1);
        tc_fill(b, BIG, 0, 2);
        await_ready();
        CHECK_MPI(MPI_Send(a, BIG, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(b, BIG, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
    } else if (rank == 1) {
        tc_prepare_recv(a, BIG, 0, 1);
        tc_prepare_recv(b, BIG, 0, 2);
        CHECK_MPI(MPI_Irecv(a, BIG, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &ra));
        CHECK_MPI(MPI_Irecv(b, BIG, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &rb));
        say_ready();
        CHECK_MPI(MPI_Wait(&rb, &st));
        tc_check_status(&st, 0, 5, BIG, "second receive");
        tc_check_recv(b, BIG, 0, 2, "second receive gets the second message");
        CHECK_MPI(MPI_Wait(&ra, &st));
        tc_check_status(&st, 0, 5, BIG, "first receive");
        tc_check_recv(a, BIG, 0, 1, "first receive gets the first message");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 2. A wildcard receive posted before a receive naming rank 0: rank
     * 0's message must meet the wildcard one. */
    if (rank == 0) {
        tc_fill(a, BIG, 0, 3);
        await_ready();
        CHECK_MPI(MPI_Send(a, BIG, MPI_BYTE, 1, 6, MPI_COMM_WORLD));
    } else if (rank == 1) {
        tc_prepare_recv(a, BIG, 0, 3);
        CHECK_MPI(MPI_Irecv(a, BIG, MPI_BYTE, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &ra));
        CHECK_MPI(MPI_Irecv(b, BIG, MPI_BYTE, 0, 6, MPI_COMM_WORLD, &rb));
        say_ready();
        CHECK_MPI(MPI_Wait(&ra, &st));
        tc_check_status(&st, 0, 6, BIG, "wildcard receive");
        tc_check_recv(a, BIG, 0, 3, "wildcard receive gets rank 0's message");
        /* The later one takes rank 0's next message (two ranks), or is
         * cancelled. */
        if (size > 2) {
            CHECK_MPI(MPI_Cancel(&rb));
            CHECK_MPI(MPI_Wait(&rb, &st));
            CHECK_MPI(MPI_Test_cancelled(&st, &flag));
            CHECK(flag, "an unmatched receive could not be cancelled");
        }
    }
    if (rank == 0 && size <= 2) {
        tc_fill(b, BIG, 0, 4);
        CHECK_MPI(MPI_Send(b, BIG, MPI_BYTE, 1, 6, MPI_COMM_WORLD));
    }
    if (rank == 1 && size <= 2) {
        CHECK_MPI(MPI_Wait(&rb, &st));
        tc_check_status(&st, 0, 6, BIG, "later receive");
        tc_check_recv(b, BIG, 0, 4, "later receive");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 3. Cancelled before the message: the message meets the next receive. */
    if (rank == 0) {
        tc_fill(a, BIG, 0, 5);
        await_ready();
        CHECK_MPI(MPI_Send(a, BIG, MPI_BYTE, 1, 8, MPI_COMM_WORLD));
    } else if (rank == 1) {
        tc_prepare_recv(b, BIG, 0, 5);
        CHECK_MPI(MPI_Irecv(a, BIG, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &ra));
        CHECK_MPI(MPI_Cancel(&ra));
        CHECK_MPI(MPI_Wait(&ra, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(flag, "a receive cancelled before its message was not cancelled");
        CHECK_MPI(MPI_Irecv(b, BIG, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &rb));
        say_ready();
        CHECK_MPI(MPI_Wait(&rb, &st));
        tc_check_status(&st, 0, 8, BIG, "receive after a cancelled one");
        tc_check_recv(b, BIG, 0, 5, "receive after a cancelled one");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 4. Cancelled after the message met it: the cancel fails, the data is
     * there (rank 0's notice travels behind the message). */
    if (rank == 0) {
        tc_fill(a, BIG, 0, 6);
        await_ready();
        CHECK_MPI(MPI_Send(a, BIG, MPI_BYTE, 1, 9, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, SENT, MPI_COMM_WORLD));
    } else if (rank == 1) {
        tc_prepare_recv(a, BIG, 0, 6);
        CHECK_MPI(MPI_Irecv(a, BIG, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &ra));
        say_ready();
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 0, SENT, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Cancel(&ra));
        CHECK_MPI(MPI_Wait(&ra, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(!flag, "a receive whose message had arrived was cancelled");
        tc_check_status(&st, 0, 9, BIG, "receive cancelled too late");
        tc_check_recv(a, BIG, 0, 6, "receive cancelled too late");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* 5. A message larger than the receive (which is still larger than an
     * eager message, so it is advertised): truncated, with the class. */
    if (rank == 0) {
        tc_fill(c, BIG, 0, 7);
        await_ready();
        CHECK_MPI(MPI_Send(c, BIG, MPI_BYTE, 1, 10, MPI_COMM_WORLD));
    } else if (rank == 1) {
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CHECK_MPI(MPI_Irecv(c, BIG / 2, MPI_BYTE, 0, 10, MPI_COMM_WORLD, &rc));
        say_ready();
        int rc_wait = MPI_Wait(&rc, &st);
        tc_expect_class(rc_wait, MPI_ERR_TRUNCATE, "a message larger than its receive");
        tc_verify(c, BIG / 2, 0, 7, "the part of a truncated message that fits");
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tc_require_size(2, "advert_recv");
    int rank = tc_rank(), size = tc_size();
    if (argc > 1 && strcmp(argv[1], "exact") == 0)
        exact(rank);
    else
        rules(rank, size);
    return tc_finish("advert_recv");
}

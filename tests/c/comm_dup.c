/*
 * comm_dup.c - MPI_Comm_dup gives a separate matching context.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). In each pair (0,1), (2,3)
 * the even rank sends and the odd rank receives; the last rank of an
 * odd-sized job only joins the collective calls (MPI_Comm_dup, barriers,
 * MPI_Comm_free).
 *
 *   1. the duplicate has the same rank and size, and a different handle;
 *   2. the sender sends on the duplicate first, then on MPI_COMM_WORLD, same
 *      tag (non-blocking, eager and rendezvous sizes); the receiver receives on
 *      MPI_COMM_WORLD first and must get the WORLD message, then the duplicate
 *      message on the duplicate; also with MPI_ANY_SOURCE/MPI_ANY_TAG;
 *   3. MPI_Iprobe on WORLD does not see a message pending on the duplicate;
 *   4. a duplicate of the duplicate is a third context; MPI_Barrier works on
 *      each;
 *   5. the duplicate inherits the error handler (MPI_ERRORS_RETURN set on
 *      WORLD before the dup);
 *   6. MPI_Comm_free sets the handles to MPI_COMM_NULL, and WORLD still works.
 */
#include "check.h"

#define NAME "comm_dup"

static int rank, nranks, partner;

static void send_both(MPI_Comm first, MPI_Comm second, int size, int tag, int key1, int key2)
{
    unsigned char *b1 = tc_alloc((size_t)size), *b2 = tc_alloc((size_t)size);
    MPI_Request r[2];
    MPI_Status sts[2];
    tc_fill(b1, size, rank, key1);
    tc_fill(b2, size, rank, key2);
    CHECK_MPI(MPI_Isend(b1, size, MPI_BYTE, partner, tag, first, &r[0]));
    CHECK_MPI(MPI_Isend(b2, size, MPI_BYTE, partner, tag, second, &r[1]));
    CHECK_MPI(MPI_Waitall(2, r, sts));
    free(b1);
    free(b2);
}

static void recv_one(MPI_Comm comm, int size, int tag, int key, int wild, const char *what)
{
    unsigned char *b = tc_alloc((size_t)size);
    MPI_Status st;
    tc_prepare_recv(b, size, partner, key);
    CHECK_MPI(MPI_Recv(b, size, MPI_BYTE, wild ? MPI_ANY_SOURCE : partner, wild ? MPI_ANY_TAG : tag, comm, &st));
    tc_check_status(&st, partner, tag, size, what);
    tc_check_recv(b, size, partner, key, what);
    free(b);
}

int main(int argc, char **argv)
{
    MPI_Comm dup = MPI_COMM_NULL, dup2 = MPI_COMM_NULL;
    MPI_Errhandler eh;
    int r2 = -1, s2 = -1, k;
    static const int sizes[] = {16, 200 * 1024};

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    partner = tc_partner(rank, nranks);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(dup != MPI_COMM_NULL, "MPI_Comm_dup returned MPI_COMM_NULL");
    CHECK(dup != MPI_COMM_WORLD, "MPI_Comm_dup returned MPI_COMM_WORLD itself");
    CHECK_MPI(MPI_Comm_rank(dup, &r2));
    CHECK_MPI(MPI_Comm_size(dup, &s2));
    CHECK_EQ(rank, r2, "MPI_Comm_rank of the duplicate");
    CHECK_EQ(nranks, s2, "MPI_Comm_size of the duplicate");
    CHECK_MPI(MPI_Comm_get_errhandler(dup, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "the duplicate did not inherit MPI_ERRORS_RETURN from MPI_COMM_WORLD");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    for (k = 0; k < 2; k++) {
        int size = sizes[k], wild;
        for (wild = 0; wild < 2; wild++) {
            int tag = 5 + 10 * k + wild, key = 100 * k + 10 * wild;
            if (partner >= 0 && rank % 2 == 0) {
                /* dup first, then world, same tag */
                send_both(dup, MPI_COMM_WORLD, size, tag, key + 1, key + 2);
            } else if (partner >= 0) {
                char what[128];
                snprintf(what, sizeof what, "%d-byte receive on MPI_COMM_WORLD%s (a dup message with the same tag was sent first)",
                         size, wild ? " with ANY_SOURCE/ANY_TAG" : "");
                recv_one(MPI_COMM_WORLD, size, tag, key + 2, wild, what);
                snprintf(what, sizeof what, "%d-byte receive on the duplicate%s", size,
                         wild ? " with ANY_SOURCE/ANY_TAG" : "");
                recv_one(dup, size, tag, key + 1, wild, what);
            }
        }
    }

    /* 3: a message pending on dup is invisible on WORLD */
    if (partner >= 0 && rank % 2 == 0) {
        unsigned char b[8];
        tc_fill(b, 8, rank, 500);
        CHECK_MPI(MPI_Send(b, 8, MPI_BYTE, partner, 50, dup));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    } else if (partner >= 0) {
        int flag = -1;
        MPI_Status st;
        /* wait until it is there on dup */
        CHECK_MPI(MPI_Probe(partner, 50, dup, &st));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK_EQ(0, flag, "MPI_Iprobe on MPI_COMM_WORLD while a message is pending only on the duplicate: flag");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        recv_one(dup, 8, 50, 500, 0, "the message pending on the duplicate");
    } else {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* 4: a duplicate of the duplicate */
    CHECK_MPI(MPI_Comm_dup(dup, &dup2));
    CHECK(dup2 != dup && dup2 != MPI_COMM_WORLD && dup2 != MPI_COMM_NULL, "MPI_Comm_dup of the duplicate");
    CHECK_MPI(MPI_Barrier(dup));
    CHECK_MPI(MPI_Barrier(dup2));
    if (partner >= 0 && rank % 2 == 0) {
        send_both(dup2, dup, 32, 7, 601, 602);
        send_both(MPI_COMM_WORLD, dup2, 32, 7, 603, 604);
    } else if (partner >= 0) {
        recv_one(dup, 32, 7, 602, 0, "receive on the first duplicate (second dup sent first)");
        recv_one(dup2, 32, 7, 601, 1, "receive on the second duplicate");
        recv_one(dup2, 32, 7, 604, 1, "receive on the second duplicate (WORLD sent first)");
        recv_one(MPI_COMM_WORLD, 32, 7, 603, 1, "receive on WORLD");
    }

    /* 6 */
    CHECK_MPI(MPI_Comm_free(&dup2));
    CHECK(dup2 == MPI_COMM_NULL, "MPI_Comm_free did not set the handle to MPI_COMM_NULL");
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL, "MPI_Comm_free did not set the handle to MPI_COMM_NULL");
    if (partner >= 0 && rank % 2 == 0) {
        unsigned char b[8];
        tc_fill(b, 8, rank, 700);
        CHECK_MPI(MPI_Send(b, 8, MPI_BYTE, partner, 70, MPI_COMM_WORLD));
    } else if (partner >= 0) {
        recv_one(MPI_COMM_WORLD, 8, 70, 700, 0, "receive on WORLD after MPI_Comm_free");
    }
    if (rank == 0)
        printf("duplicated communicators keep their messages apart\n");
    return tc_finish(NAME);
}

/*
 * wildcards.c - MPI_ANY_SOURCE, MPI_ANY_TAG and both together.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1); uses all ranks.
 * Every rank r != 0 sends to rank 0 in each phase; rank 0 accounts for every
 * message exactly once and checks status.MPI_SOURCE, status.MPI_TAG,
 * MPI_Get_count and every byte.
 *   A. MPI_ANY_SOURCE with a specific tag (messages arrive unexpected or not);
 *   B. a specific source with MPI_ANY_TAG (each sender uses its own tag);
 *   C. MPI_ANY_SOURCE + MPI_ANY_TAG, sizes on both sides of 64 KiB;
 *   D. receives posted before the sends (MPI_Irecv ANY/ANY, then a barrier,
 *      then the sends), completed with MPI_Waitall;
 *   E. a specific-source receive posted before an ANY_SOURCE one: each message
 *      must go to the first posted receive it matches.
 */
#include "check.h"

#define NAME "wildcards"
#define MAXMSG (100 * 1024)

static int nranks, rank;

static int size_a(int src) { return 10 + 7 * src; }
static int tag_b(int src) { return 1000 + src; }
static int tag_c(int src) { return 2000 + 3 * src; }
static int size_c(int src) { return src % 2 ? 70000 + src : 100 + src; }
static int tag_d(int src) { return 3000 + src % 3; }
static int size_d(int src) { return src % 2 ? 1000 + src : 80000 + src; }

static void mark_seen(char *seen, int src, const char *phase)
{
    CHECK(src > 0 && src < nranks, "%s: status.MPI_SOURCE %d is not a sender", phase, src);
    CHECK(!seen[src], "%s: a second message from rank %d", phase, src);
    seen[src] = 1;
}

int main(int argc, char **argv)
{
    MPI_Status st;
    unsigned char *buf, *sbuf;
    char *seen;
    int i, src;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);

    buf = tc_alloc(MAXMSG);
    sbuf = tc_alloc(MAXMSG);
    seen = calloc((size_t)nranks, 1);
    CHECK(seen != NULL, "calloc");

    if (rank != 0) {
        /* A */
        tc_fill(sbuf, size_a(rank), rank, 1);
        CHECK_MPI(MPI_Send(sbuf, size_a(rank), MPI_BYTE, 0, 5, MPI_COMM_WORLD));
        /* B */
        tc_fill(sbuf, 64, rank, 2);
        CHECK_MPI(MPI_Send(sbuf, 64, MPI_BYTE, 0, tag_b(rank), MPI_COMM_WORLD));
        /* C */
        tc_fill(sbuf, size_c(rank), rank, 3);
        CHECK_MPI(MPI_Send(sbuf, size_c(rank), MPI_BYTE, 0, tag_c(rank), MPI_COMM_WORLD));
        /* D */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        tc_fill(sbuf, size_d(rank), rank, 4);
        CHECK_MPI(MPI_Send(sbuf, size_d(rank), MPI_BYTE, 0, tag_d(rank), MPI_COMM_WORLD));
        /* E */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            tc_fill(sbuf, 32, rank, 5);
            CHECK_MPI(MPI_Send(sbuf, 32, MPI_BYTE, 0, 7, MPI_COMM_WORLD));
            tc_fill(sbuf, 33, rank, 6);
            CHECK_MPI(MPI_Send(sbuf, 33, MPI_BYTE, 0, 7, MPI_COMM_WORLD));
        }
    } else {
        /* A: ANY_SOURCE, specific tag */
        for (i = 1; i < nranks; i++) {
            tc_guard_set(buf, 0, MAXMSG + TC_GUARD);
            CHECK_MPI(MPI_Recv(buf, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st));
            src = st.MPI_SOURCE;
            mark_seen(seen, src, "phase A (ANY_SOURCE)");
            tc_check_status(&st, src, 5, size_a(src), "phase A (ANY_SOURCE)");
            tc_verify(buf, size_a(src), src, 1, "phase A (ANY_SOURCE)");
            tc_guard_check(buf, size_a(src), TC_GUARD, "phase A (ANY_SOURCE)");
        }
        /* B: specific source, ANY_TAG */
        for (src = nranks - 1; src >= 1; src--) {
            tc_prepare_recv(buf, 64, src, 2);
            CHECK_MPI(MPI_Recv(buf, 64, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            tc_check_status(&st, src, tag_b(src), 64, "phase B (ANY_TAG)");
            tc_check_recv(buf, 64, src, 2, "phase B (ANY_TAG)");
        }
        /* C: both wildcards */
        memset(seen, 0, (size_t)nranks);
        for (i = 1; i < nranks; i++) {
            tc_guard_set(buf, 0, MAXMSG + TC_GUARD);
            CHECK_MPI(MPI_Recv(buf, MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            src = st.MPI_SOURCE;
            mark_seen(seen, src, "phase C (ANY_SOURCE+ANY_TAG)");
            tc_check_status(&st, src, tag_c(src), size_c(src), "phase C (ANY_SOURCE+ANY_TAG)");
            tc_verify(buf, size_c(src), src, 3, "phase C (ANY_SOURCE+ANY_TAG)");
            tc_guard_check(buf, size_c(src), TC_GUARD, "phase C (ANY_SOURCE+ANY_TAG)");
        }
        /* D: pre-posted wildcard receives */
        {
            MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)nranks);
            MPI_Status *sts = malloc(sizeof(MPI_Status) * (size_t)nranks);
            unsigned char **bufs = malloc(sizeof(unsigned char *) * (size_t)nranks);
            CHECK(reqs && sts && bufs, "malloc");
            for (i = 1; i < nranks; i++) {
                bufs[i] = tc_alloc(MAXMSG);
                tc_guard_set(bufs[i], 0, MAXMSG + TC_GUARD);
                CHECK_MPI(MPI_Irecv(bufs[i], MAXMSG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                    &reqs[i - 1]));
            }
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Waitall(nranks - 1, reqs, sts));
            memset(seen, 0, (size_t)nranks);
            for (i = 1; i < nranks; i++) {
                const MPI_Status *s = &sts[i - 1];
                src = s->MPI_SOURCE;
                CHECK(reqs[i - 1] == MPI_REQUEST_NULL, "phase D: request %d not freed by MPI_Waitall", i - 1);
                mark_seen(seen, src, "phase D (pre-posted ANY/ANY)");
                tc_check_status(s, src, tag_d(src), size_d(src), "phase D (pre-posted ANY/ANY)");
                tc_verify(bufs[i], size_d(src), src, 4, "phase D (pre-posted ANY/ANY)");
                tc_guard_check(bufs[i], size_d(src), TC_GUARD, "phase D (pre-posted ANY/ANY)");
                free(bufs[i]);
            }
            free(reqs);
            free(sts);
            free(bufs);
        }
        /* E: receives posted in the order (1, tag 7), (ANY, tag 7): rank 1's
         * first message must land in the first, its second in the second. */
        {
            MPI_Request reqs[2];
            MPI_Status sts[2];
            unsigned char *b2 = tc_alloc(64);
            tc_prepare_recv(buf, 32, 1, 5);
            tc_prepare_recv(b2, 33, 1, 6);
            CHECK_MPI(MPI_Irecv(buf, 64, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &reqs[0]));
            CHECK_MPI(MPI_Irecv(b2, 64, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &reqs[1]));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Waitall(2, reqs, sts));
            tc_check_status(&sts[0], 1, 7, 32, "phase E: first posted receive");
            tc_check_recv(buf, 32, 1, 5, "phase E: first posted receive");
            tc_check_status(&sts[1], 1, 7, 33, "phase E: second posted receive");
            tc_check_recv(b2, 33, 1, 6, "phase E: second posted receive");
            free(b2);
        }
        printf("wildcard receives from %d senders verified\n", nranks - 1);
    }
    free(buf);
    free(sbuf);
    free(seen);
    return tc_finish(NAME);
}

/*
 * probe.c - MPI_Probe / MPI_Iprobe with specific and wildcard source and tag,
 * MPI_Get_count from the probe status, then a receive of exactly that size.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). In each pair (0,1), (2,3)
 * the even rank sends and the odd rank probes and receives; the last rank of
 * an odd-sized job only joins the barriers.
 *
 *   1. before anything is sent, MPI_Iprobe (specific and wildcard) gives flag 0;
 *   2. messages of 0, 17, 65535, 65536, 65537, 300000 and 2 MiB bytes with
 *      tags 10, 11, ...; for each the receiver probes in one of four ways
 *      (Probe src/tag, Probe ANY_SOURCE/tag, Iprobe loop src/ANY_TAG, Iprobe
 *      loop ANY/ANY), probes a second time (a probe does not consume the
 *      message), allocates exactly MPI_Get_count bytes and receives them;
 *   3. MPI_Get_count with MPI_INT on a message of ints, and MPI_UNDEFINED for
 *      a 7-byte message;
 *   4. after everything was received, MPI_Iprobe gives flag 0 again;
 *   5. a probe for tag B while a message with tag A is pending ahead of it
 *      finds the tag-B message.
 */
#include "check.h"

#define NAME "probe"

static const int sizes[] = {0, 17, 65535, 65536, 65537, 300000, 2 * 1024 * 1024};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static void iprobe_none(int src, const char *when)
{
    int flag = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK_EQ(0, flag, "MPI_Iprobe(ANY_SOURCE, ANY_TAG) %s: flag", when);
    CHECK_MPI(MPI_Iprobe(src, 10, MPI_COMM_WORLD, &flag, &st));
    CHECK_EQ(0, flag, "MPI_Iprobe(%d, 10) %s: flag", src, when);
    CHECK_MPI(MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(0, flag, "MPI_Iprobe(%d, ANY_TAG) %s: flag", src, when);
}

static void do_probe(int mode, int src, int tag, MPI_Status *st, const char *what)
{
    int flag = 0;
    double t0 = MPI_Wtime();
    switch (mode) {
    case 0:
        CHECK_MPI(MPI_Probe(src, tag, MPI_COMM_WORLD, st));
        break;
    case 1:
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, st));
        break;
    case 2:
        while (!flag) {
            CHECK_MPI(MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st));
            tc_deadline(t0, 30, what);
        }
        break;
    default:
        while (!flag) {
            CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st));
            tc_deadline(t0, 30, what);
        }
        break;
    }
}

static const char *mode_name(int mode)
{
    static const char *names[] = {"MPI_Probe(src, tag)", "MPI_Probe(ANY_SOURCE, tag)", "MPI_Iprobe(src, ANY_TAG)",
                                  "MPI_Iprobe(ANY_SOURCE, ANY_TAG)"};
    return names[mode % 4];
}

int main(int argc, char **argv)
{
    int rank, nranks, partner, k;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    partner = tc_partner(rank, nranks);

    /* 1. nothing is pending before the first barrier */
    if (partner >= 0)
        iprobe_none(partner, "before any send");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (partner >= 0 && rank % 2 == 0) {
        unsigned char *sbuf = tc_alloc(2 * 1024 * 1024);
        int ints[1000], i;
        /* 2 */
        for (k = 0; k < NSIZES; k++) {
            tc_fill(sbuf, sizes[k], rank, 10 + k);
            CHECK_MPI(MPI_Send(sbuf, sizes[k], MPI_BYTE, partner, 10 + k, MPI_COMM_WORLD));
        }
        /* 3 */
        for (i = 0; i < 1000; i++)
            ints[i] = i * 7 - 3;
        CHECK_MPI(MPI_Send(ints, 1000, MPI_INT, partner, 50, MPI_COMM_WORLD));
        tc_fill(sbuf, 7, rank, 51);
        CHECK_MPI(MPI_Send(sbuf, 7, MPI_BYTE, partner, 51, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* 4 */
        /* 5: tag 60 first, then tag 61 */
        tc_fill(sbuf, 40, rank, 60);
        CHECK_MPI(MPI_Send(sbuf, 40, MPI_BYTE, partner, 60, MPI_COMM_WORLD));
        tc_fill(sbuf, 41, rank, 61);
        CHECK_MPI(MPI_Send(sbuf, 41, MPI_BYTE, partner, 61, MPI_COMM_WORLD));
        free(sbuf);
    } else if (partner >= 0) {
        int src = partner;
        for (k = 0; k < NSIZES; k++) {
            MPI_Status st, st2;
            int count = -1, count2 = -1, tag = 10 + k;
            unsigned char *buf;
            char what[128];
            snprintf(what, sizeof what, "%s for the %d-byte message", mode_name(k), sizes[k]);
            do_probe(k % 4, src, tag, &st, what);
            CHECK_EQ(src, st.MPI_SOURCE, "%s: status.MPI_SOURCE", what);
            CHECK_EQ(tag, st.MPI_TAG, "%s: status.MPI_TAG", what);
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK_EQ(sizes[k], count, "%s: MPI_Get_count", what);
            /* probing again finds the same message */
            do_probe((k + 1) % 4, src, tag, &st2, what);
            CHECK_EQ(tag, st2.MPI_TAG, "%s: second probe: status.MPI_TAG", what);
            CHECK_MPI(MPI_Get_count(&st2, MPI_BYTE, &count2));
            CHECK_EQ(count, count2, "%s: second probe: MPI_Get_count", what);
            /* receive exactly count bytes */
            buf = tc_alloc((size_t)count);
            tc_prepare_recv(buf, count, st.MPI_SOURCE, st.MPI_TAG);
            CHECK_MPI(MPI_Recv(buf, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
            tc_check_status(&st2, src, tag, count, what);
            tc_check_recv(buf, count, src, tag, what);
            free(buf);
        }
        {
            /* 3 */
            MPI_Status st;
            int count = -1, i, ints[1000];
            unsigned char b7[7 + TC_GUARD];
            CHECK_MPI(MPI_Probe(src, 50, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
            CHECK_EQ(1000, count, "MPI_Get_count(MPI_INT) after MPI_Probe of 1000 ints");
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK_EQ(1000 * (int)sizeof(int), count, "MPI_Get_count(MPI_BYTE) after MPI_Probe of 1000 ints");
            memset(ints, 0, sizeof ints);
            CHECK_MPI(MPI_Recv(ints, 1000, MPI_INT, src, 50, MPI_COMM_WORLD, &st));
            for (i = 0; i < 1000; i++)
                CHECK_EQ(i * 7 - 3, ints[i], "int %d of the 1000-int message", i);
            CHECK_MPI(MPI_Probe(src, 51, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
            CHECK_EQ(MPI_UNDEFINED, count, "MPI_Get_count(MPI_INT) of a 7-byte message");
            tc_prepare_recv(b7, 7, src, 51);
            CHECK_MPI(MPI_Recv(b7, 7, MPI_BYTE, src, 51, MPI_COMM_WORLD, &st));
            tc_check_recv(b7, 7, src, 51, "the 7-byte message");
        }
        /* 4: all consumed; the sender sends nothing more until the barrier */
        iprobe_none(src, "after all messages were received");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        {
            /* 5: probe for tag 61 while tag 60 is ahead of it */
            MPI_Status st;
            int count = -1;
            unsigned char b[64 + TC_GUARD];
            CHECK_MPI(MPI_Probe(src, 61, MPI_COMM_WORLD, &st));
            CHECK_EQ(61, st.MPI_TAG, "MPI_Probe(src, 61) behind a tag-60 message: status.MPI_TAG");
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK_EQ(41, count, "MPI_Probe(src, 61) behind a tag-60 message: MPI_Get_count");
            tc_prepare_recv(b, 41, src, 61);
            CHECK_MPI(MPI_Recv(b, 41, MPI_BYTE, src, 61, MPI_COMM_WORLD, &st));
            tc_check_recv(b, 41, src, 61, "the tag-61 message");
            CHECK_MPI(MPI_Probe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK_EQ(60, st.MPI_TAG, "MPI_Probe(src, ANY_TAG) for the remaining message: status.MPI_TAG");
            tc_prepare_recv(b, 40, src, 60);
            CHECK_MPI(MPI_Recv(b, 64, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            tc_check_status(&st, src, 60, 40, "the tag-60 message");
            tc_verify(b, 40, src, 60, "the tag-60 message");
            tc_guard_check(b, 40, TC_GUARD, "the tag-60 message");
        }
    } else {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (rank == 0)
        printf("probes of %d sizes verified\n", NSIZES);
    return tc_finish(NAME);
}

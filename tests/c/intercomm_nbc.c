/*
 * intercomm_nbc.c - non-blocking collectives on an intercommunicator
 * between the even and the odd ranks of MPI_COMM_WORLD.
 *
 * Ranks: 2 or more (group 0 = even world ranks, group 1 = odd ones; their
 * sizes differ in an odd-sized job).
 *
 *   1. each of MPI_Ibarrier, Ibcast, Ireduce, Iallreduce, Iallgather,
 *      Igather, Iscatter, Ialltoall, Igatherv, Iscatterv, Iallgatherv,
 *      Ialltoallv, Ialltoallw, Ireduce_scatter and Ireduce_scatter_block,
 *      rooted ones with the root (its group's last rank) in each group,
 *      results checked exactly (MPI_PROC_NULL ranks' buffers untouched, no
 *      block written past the remote group's), twice: once with each
 *      group "late". The early group posts the collective, then sends a
 *      synchronous message to a rank of the late group, which waits for
 *      those messages (polling, with a deadline) before it posts its own:
 *      a post that blocked until the collective completed would never get
 *      to its send;
 *   2. MPI_Ibarrier: nobody's request completes before every rank of the
 *      other group has entered (the late group sleeps first; by the clock);
 *   3. several at once: Iallreduce, Ibcast of a strided datatype (unpacked
 *      at completion), Ibarrier on the intercommunicator and an Iallreduce
 *      on the local intracommunicator, completed by one MPI_Waitall;
 *   4. persistent forms (MPI_Bcast_init with the root in group 1,
 *      MPI_Allreduce_init, MPI_Barrier_init), each started twice with new
 *      data, results checked.
 */
#include "check.h"

#define NAME "intercomm_nbc"
#define N 1024

static int rank, nranks, color, lrank, lsize, rsize;
static MPI_Comm local = MPI_COMM_NULL, ic = MPI_COMM_NULL;
static int sbuf[N], rbuf[N];
static int sc[64], sd[64], rc[64], rd[64];
static MPI_Datatype st_[64], rt_[64];
static double entered;

enum {
    BARRIER,
    BCAST,
    REDUCE,
    ALLREDUCE,
    ALLGATHER,
    GATHER,
    SCATTER,
    ALLTOALL,
    GATHERV,
    SCATTERV,
    ALLGATHERV,
    ALLTOALLV,
    ALLTOALLW,
    REDUCE_SCATTER,
    REDUCE_SCATTER_BLOCK,
    KINDS
};

static const char *names[KINDS] = {"MPI_Ibarrier",   "MPI_Ibcast",     "MPI_Ireduce",     "MPI_Iallreduce",
                                   "MPI_Iallgather", "MPI_Igather",    "MPI_Iscatter",    "MPI_Ialltoall",
                                   "MPI_Igatherv",   "MPI_Iscatterv",  "MPI_Iallgatherv", "MPI_Ialltoallv",
                                   "MPI_Ialltoallw", "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block"};

static int rooted(int k)
{
    return k == BCAST || k == REDUCE || k == GATHER || k == SCATTER || k == GATHERV || k == SCATTERV;
}

/* World rank of rank r of group g. */
static int world_of(int g, int r)
{
    return 2 * r + g;
}

static int group_size(int g)
{
    return g == 0 ? (nranks + 1) / 2 : nranks / 2;
}

/* The root argument of a collective whose root is rank `root` of group
 * `rg`. */
static int root_arg(int rg, int root)
{
    if (rg != color)
        return root;
    return lrank == root ? MPI_ROOT : MPI_PROC_NULL;
}

/* Where remote rank j's block of j + 1 ints starts in the v-variants: after
 * the blocks before it and a gap of j ints (left untouched). */
static int v_displ(int j)
{
    return j * (j + 1);
}

/* Reduce_scatter: 12 elements spread over the local group. */
static void rs_counts(int *counts, int *at)
{
    int i;
    *at = 0;
    for (i = 0; i < lsize; i++) {
        counts[i] = 12 / lsize + (i < 12 % lsize);
        if (i < lrank)
            *at += counts[i];
    }
}

static void post(int k, int rg, MPI_Request *req)
{
    int root = group_size(rg) - 1, arg = root_arg(rg, root), i, j, at;
    for (i = 0; i < N; i++) {
        sbuf[i] = -3;
        rbuf[i] = -1;
    }
    switch (k) {
    case BARRIER:
        entered = tc_epoch();
        CHECK_MPI(MPI_Ibarrier(ic, req));
        break;
    case BCAST:
        for (i = 0; i < 6; i++)
            rbuf[i] = arg == MPI_ROOT ? 1000 * rank + i : -1;
        CHECK_MPI(MPI_Ibcast(rbuf, 6, MPI_INT, arg, ic, req));
        break;
    case REDUCE:
        for (i = 0; i < 5; i++)
            sbuf[i] = 10 * rank + i;
        CHECK_MPI(MPI_Ireduce(sbuf, rbuf, 5, MPI_INT, MPI_SUM, arg, ic, req));
        break;
    case ALLREDUCE:
        for (i = 0; i < 3; i++)
            sbuf[i] = rank + i;
        CHECK_MPI(MPI_Iallreduce(sbuf, rbuf, 3, MPI_INT, MPI_SUM, ic, req));
        break;
    case ALLGATHER:
    case GATHER:
        sbuf[0] = 100 * rank;
        sbuf[1] = 100 * rank + 1;
        if (k == ALLGATHER)
            CHECK_MPI(MPI_Iallgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, ic, req));
        else
            CHECK_MPI(MPI_Igather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, arg, ic, req));
        break;
    case SCATTER:
        for (j = 0; j < 64; j++)
            for (i = 0; i < 3; i++)
                sbuf[3 * j + i] = 1000 * rank + 10 * j + i;
        CHECK_MPI(MPI_Iscatter(sbuf, 3, MPI_INT, rbuf, 3, MPI_INT, arg, ic, req));
        break;
    case ALLTOALL:
        for (j = 0; j < rsize; j++)
            for (i = 0; i < 2; i++)
                sbuf[2 * j + i] = 1000 * rank + 10 * j + i;
        CHECK_MPI(MPI_Ialltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, ic, req));
        break;
    case GATHERV:
    case ALLGATHERV:
        /* Each rank sends lrank + 1 ints. */
        for (i = 0; i <= lrank; i++)
            sbuf[i] = 100 * rank + i;
        for (j = 0; j < rsize; j++) {
            rc[j] = j + 1;
            rd[j] = v_displ(j);
        }
        if (k == GATHERV)
            CHECK_MPI(MPI_Igatherv(sbuf, lrank + 1, MPI_INT, rbuf, rc, rd, MPI_INT, arg, ic, req));
        else
            CHECK_MPI(MPI_Iallgatherv(sbuf, lrank + 1, MPI_INT, rbuf, rc, rd, MPI_INT, ic, req));
        break;
    case SCATTERV:
        for (j = 0; j < rsize; j++) {
            sc[j] = j + 1;
            sd[j] = v_displ(j);
            for (i = 0; i <= j; i++)
                sbuf[sd[j] + i] = 1000 * rank + 10 * j + i;
        }
        CHECK_MPI(MPI_Iscatterv(sbuf, sc, sd, MPI_INT, rbuf, lrank + 1, MPI_INT, arg, ic, req));
        break;
    case ALLTOALLV:
    case ALLTOALLW:
        /* A rank of local rank a sends a + b + 1 ints to remote rank b;
         * received with a gap of j ints before block j. */
        for (at = 0, j = 0; j < rsize; j++) {
            sc[j] = lrank + j + 1;
            sd[j] = at;
            for (i = 0; i < sc[j]; i++)
                sbuf[at + i] = 1000 * rank + 10 * j + i;
            at += sc[j];
        }
        for (at = 0, j = 0; j < rsize; j++) {
            at += j;
            rc[j] = j + lrank + 1;
            rd[j] = at;
            at += rc[j];
        }
        if (k == ALLTOALLV) {
            CHECK_MPI(MPI_Ialltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, ic, req));
        } else {
            for (j = 0; j < rsize; j++) {
                sd[j] *= (int)sizeof(int);
                rd[j] *= (int)sizeof(int);
                st_[j] = MPI_INT;
                rt_[j] = MPI_INT;
            }
            CHECK_MPI(MPI_Ialltoallw(sbuf, sc, sd, st_, rbuf, rc, rd, rt_, ic, req));
        }
        break;
    case REDUCE_SCATTER:
        rs_counts(rc, &at);
        for (i = 0; i < 12; i++)
            sbuf[i] = 100 * rank + i;
        CHECK_MPI(MPI_Ireduce_scatter(sbuf, rbuf, rc, MPI_INT, MPI_SUM, ic, req));
        break;
    case REDUCE_SCATTER_BLOCK:
        for (i = 0; i < 2 * lsize; i++)
            sbuf[i] = 100 * rank + i;
        CHECK_MPI(MPI_Ireduce_scatter_block(sbuf, rbuf, 2, MPI_INT, MPI_MAX, ic, req));
        break;
    }
}

/* Checks the results of collective `k` (root in group `rg`), completed. */
static void check(int k, int rg)
{
    int root = group_size(rg) - 1, arg = root_arg(rg, root), i, j, at, want, counts[64];
    const char *what = names[k];
    double left = tc_epoch(), theirs[64];

    switch (k) {
    case BARRIER:
        /* Every rank's entry time, to the other group. */
        CHECK_MPI(MPI_Allgather(&entered, 1, MPI_DOUBLE, theirs, 1, MPI_DOUBLE, ic));
        for (j = 0; j < rsize; j++)
            CHECK(left >= theirs[j], "%s: done at %.6f before remote rank %d entered at %.6f", what, left, j,
                  theirs[j]);
        break;
    case BCAST:
        for (i = 0; i < 6; i++) {
            if (rg == color && arg != MPI_ROOT)
                CHECK_EQ(-1, rbuf[i], "%s: MPI_PROC_NULL rank's buffer untouched", what);
            else
                CHECK_EQ(1000 * world_of(rg, root) + i, rbuf[i], "%s[%d] from group %d", what, i, rg);
        }
        break;
    case REDUCE:
        for (i = 0; i < 5; i++) {
            for (want = 0, j = 0; j < group_size(1 - rg); j++)
                want += 10 * world_of(1 - rg, j) + i;
            if (arg == MPI_ROOT)
                CHECK_EQ(want, rbuf[i], "%s[%d] at the root of group %d", what, i, rg);
            else
                CHECK_EQ(-1, rbuf[i], "%s: non-root's recvbuf untouched", what);
        }
        break;
    case ALLREDUCE:
        for (i = 0; i < 3; i++) {
            for (want = 0, j = 0; j < rsize; j++)
                want += world_of(1 - color, j) + i;
            CHECK_EQ(want, rbuf[i], "%s sum[%d]", what, i);
        }
        CHECK_EQ(-1, rbuf[3], "%s wrote past its count", what);
        break;
    case ALLGATHER:
    case GATHER:
        if (k == GATHER && arg != MPI_ROOT) {
            CHECK_EQ(-1, rbuf[0], "%s: non-root's recvbuf untouched", what);
            break;
        }
        for (j = 0; j < rsize; j++) {
            CHECK_EQ(100 * world_of(1 - color, j), rbuf[2 * j], "%s block %d", what, j);
            CHECK_EQ(100 * world_of(1 - color, j) + 1, rbuf[2 * j + 1], "%s block %d", what, j);
        }
        CHECK_EQ(-1, rbuf[2 * rsize], "%s wrote past the remote group's blocks", what);
        break;
    case SCATTER:
        for (i = 0; i < 3; i++) {
            if (rg == color)
                CHECK_EQ(-1, rbuf[i], "%s: the root's group receives nothing", what);
            else
                CHECK_EQ(1000 * world_of(rg, root) + 10 * lrank + i, rbuf[i], "%s[%d]", what, i);
        }
        break;
    case ALLTOALL:
        for (j = 0; j < rsize; j++)
            for (i = 0; i < 2; i++)
                CHECK_EQ(1000 * world_of(1 - color, j) + 10 * lrank + i, rbuf[2 * j + i], "%s from %d", what, j);
        CHECK_EQ(-1, rbuf[2 * rsize], "%s wrote past the remote group's blocks", what);
        break;
    case GATHERV:
    case ALLGATHERV:
        if (k == GATHERV && arg != MPI_ROOT) {
            for (i = 0; i < 8; i++)
                CHECK_EQ(-1, rbuf[i], "%s: non-root's recvbuf untouched", what);
            break;
        }
        for (j = 0; j < rsize; j++) {
            for (i = 0; i <= j; i++)
                CHECK_EQ(100 * world_of(1 - color, j) + i, rbuf[v_displ(j) + i], "%s block %d[%d]", what, j, i);
            for (i = 0; i < j; i++)
                CHECK_EQ(-1, rbuf[v_displ(j) - 1 - i], "%s: gap before block %d untouched", what, j);
        }
        CHECK_EQ(-1, rbuf[rsize * rsize], "%s wrote past the last block", what);
        break;
    case SCATTERV:
        for (i = 0; i <= lrank + 1; i++) {
            if (rg == color || i == lrank + 1)
                CHECK_EQ(-1, rbuf[i], "%s: nothing received here [%d]", what, i);
            else
                CHECK_EQ(1000 * world_of(rg, root) + 10 * lrank + i, rbuf[i], "%s[%d]", what, i);
        }
        break;
    case ALLTOALLV:
    case ALLTOALLW:
        for (at = 0, j = 0; j < rsize; j++) {
            for (i = 0; i < j; i++)
                CHECK_EQ(-1, rbuf[at + i], "%s: gap before block %d untouched", what, j);
            at += j;
            for (i = 0; i < j + lrank + 1; i++)
                CHECK_EQ(1000 * world_of(1 - color, j) + 10 * lrank + i, rbuf[at + i], "%s from %d[%d]", what, j, i);
            at += j + lrank + 1;
        }
        CHECK_EQ(-1, rbuf[at], "%s wrote past the last block", what);
        break;
    case REDUCE_SCATTER:
        rs_counts(counts, &at);
        for (i = 0; i < counts[lrank]; i++) {
            for (want = 0, j = 0; j < rsize; j++)
                want += 100 * world_of(1 - color, j) + at + i;
            CHECK_EQ(want, rbuf[i], "%s[%d]", what, i);
        }
        CHECK_EQ(-1, rbuf[counts[lrank]], "%s: nothing past this rank's part", what);
        break;
    case REDUCE_SCATTER_BLOCK:
        for (i = 0; i < 2; i++)
            CHECK_EQ(100 * world_of(1 - color, rsize - 1) + 2 * lrank + i, rbuf[i], "%s[%d]", what, i);
        CHECK_EQ(-1, rbuf[2], "%s: nothing past the block", what);
        break;
    }
}

/* One non-blocking collective, group `late` posting it only once it has
 * the messages the other group sends after posting its own. */
static void run_case(int k, int rg, int late)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int tag = 100 + k, token = -1;

    if (color == late) {
        /* Early rank e sends to late rank e % lsize. */
        MPI_Request gate[64];
        int n = 0, e, done = 0, got[64];
        double t0 = tc_epoch();
        for (e = lrank; e < rsize; e += lsize) {
            got[n] = -1;
            CHECK_MPI(MPI_Irecv(&got[n], 1, MPI_INT, e, tag, ic, &gate[n]));
            n++;
        }
        while (!done) {
            CHECK_MPI(MPI_Testall(n, gate, &done, MPI_STATUSES_IGNORE));
            if (!done && tc_epoch() - t0 > 20.0)
                FAIL("%s (root group %d, late group %d): the other group's messages sent after posting it "
                     "never came (its post blocked)",
                     names[k], rg, late);
        }
        for (e = 0; e < n; e++)
            CHECK_EQ(world_of(1 - color, lrank + e * lsize), got[e], "%s: gate message %d", names[k], e);
        if (k == BARRIER)
            tc_sleep_ms(100);
        post(k, rg, &req);
    } else {
        post(k, rg, &req);
        token = rank;
        CHECK_MPI(MPI_Ssend(&token, 1, MPI_INT, lrank % rsize, tag, ic));
    }
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(req == MPI_REQUEST_NULL, "%s: the request is freed by MPI_Wait", names[k]);
    check(k, rg);
}

/* Several at once, completed together. */
static void overlap(void)
{
    int s1[3], r1[3], b[6], i, j, want, lsum = -1, lwant;
    MPI_Datatype strided;
    MPI_Request reqs[4];
    int bcast_root = group_size(0) - 1, arg = root_arg(0, bcast_root);

    CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_INT, &strided));
    CHECK_MPI(MPI_Type_commit(&strided));
    for (i = 0; i < 3; i++) {
        s1[i] = rank * 7 + i;
        r1[i] = -1;
    }
    for (i = 0; i < 6; i++)
        b[i] = arg == MPI_ROOT ? 50 * rank + i : -1;
    CHECK_MPI(MPI_Iallreduce(s1, r1, 3, MPI_INT, MPI_MAX, ic, &reqs[0]));
    CHECK_MPI(MPI_Ibcast(b, 1, strided, arg, ic, &reqs[1]));
    CHECK_MPI(MPI_Ibarrier(ic, &reqs[2]));
    CHECK_MPI(MPI_Iallreduce(&rank, &lsum, 1, MPI_INT, MPI_SUM, local, &reqs[3]));
    CHECK_MPI(MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE));
    for (i = 0; i < 3; i++)
        CHECK_EQ(world_of(1 - color, rsize - 1) * 7 + i, r1[i], "overlap: Iallreduce max[%d]", i);
    for (i = 0; i < 6; i++) {
        if (color == 0 && arg != MPI_ROOT)
            want = -1;
        else if (i % 2 == 0)
            want = 50 * world_of(0, bcast_root) + i;
        else
            want = arg == MPI_ROOT ? 50 * rank + i : -1;
        CHECK_EQ(want, b[i], "overlap: strided Ibcast[%d]", i);
    }
    for (lwant = 0, j = 0; j < lsize; j++)
        lwant += world_of(color, j);
    CHECK_EQ(lwant, lsum, "overlap: Iallreduce on the local communicator");
    CHECK_MPI(MPI_Type_free(&strided));
}

/* Persistent forms: started twice, with new data between. */
static void persistent(void)
{
    MPI_Request reqs[3];
    int b[4], s1[2], r1[2], round, i, j, want, root = group_size(1) - 1, arg = root_arg(1, root);

    CHECK_MPI(MPI_Bcast_init(b, 4, MPI_INT, arg, ic, MPI_INFO_NULL, &reqs[0]));
    CHECK_MPI(MPI_Allreduce_init(s1, r1, 2, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &reqs[1]));
    CHECK_MPI(MPI_Barrier_init(ic, MPI_INFO_NULL, &reqs[2]));
    for (round = 0; round < 2; round++) {
        for (i = 0; i < 4; i++)
            b[i] = arg == MPI_ROOT ? 100 * round + 10 * rank + i : -1;
        for (i = 0; i < 2; i++) {
            s1[i] = 1000 * round + rank + i;
            r1[i] = -1;
        }
        CHECK_MPI(MPI_Startall(3, reqs));
        CHECK_MPI(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));
        for (i = 0; i < 4; i++) {
            want = color == 1 && arg != MPI_ROOT ? -1 : 100 * round + 10 * world_of(1, root) + i;
            CHECK_EQ(want, b[i], "persistent Ibcast round %d [%d]", round, i);
        }
        for (i = 0; i < 2; i++) {
            for (want = 0, j = 0; j < rsize; j++)
                want += 1000 * round + world_of(1 - color, j) + i;
            CHECK_EQ(want, r1[i], "persistent Iallreduce round %d [%d]", round, i);
        }
    }
    for (i = 0; i < 3; i++)
        CHECK_MPI(MPI_Request_free(&reqs[i]));
}

int main(int argc, char **argv)
{
    int k, rg, late;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK(nranks <= 30, "at most 30 ranks (the buffers of the v-variants)");
    color = rank % 2;
    lrank = rank / 2;
    lsize = group_size(color);
    rsize = group_size(1 - color);
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local));
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &ic));

    for (k = 0; k < KINDS; k++) {
        /* The block form needs groups of one size (the same total). */
        if (k == REDUCE_SCATTER_BLOCK && lsize != rsize)
            continue;
        for (late = 0; late < 2; late++)
            for (rg = 0; rg < (rooted(k) ? 2 : 1); rg++)
                run_case(k, rg, late);
    }
    overlap();
    persistent();

    CHECK_MPI(MPI_Comm_free(&ic));
    CHECK_MPI(MPI_Comm_free(&local));
    return tc_finish(NAME);
}

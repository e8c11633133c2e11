/*
 * coll_all.c - every collective on every communicator size from 1 to the
 * job's size (sub-communicators of MPI_COMM_WORLD made with MPI_Comm_split),
 * message sizes from 0 to MAXBYTES, several roots, MPI_IN_PLACE, blocking and
 * non-blocking forms; every element of every result is compared with a
 * reference computed locally.
 *
 * The integration tests run it under different --set coll_<op>=<algorithm>
 * choices so that every algorithm of the catalogue serves it.
 *
 * Arguments: [max_bytes] (default 1 MiB; the largest size is only used by
 * bcast, allreduce and alltoall on the full communicator).
 *
 * Data: element i of rank r's contribution is val(r, i, key), an unsigned
 * hash; reductions use MPI_SUM on MPI_UNSIGNED (wrapping, exact).
 */
#include "check.h"

#define NAME "coll_all"

static int wrank, wsize;

static unsigned val(int r, size_t i, int key)
{
    uint32_t x = (uint32_t)r * 2654435761u ^ (uint32_t)i * 40503u ^ (uint32_t)key * 2246822519u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return x;
}

static unsigned *ubuf(size_t n)
{
    unsigned *p = (unsigned *)malloc((n + 1) * sizeof(unsigned));
    if (!p)
        FAIL("malloc of %zu elements", n);
    return p;
}

static void fill(unsigned *b, size_t n, int r, int key)
{
    size_t i;
    for (i = 0; i < n; i++)
        b[i] = val(r, i, key);
}

static void poison(unsigned *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        b[i] = 0xdeadbeefu;
}

static void expect(const unsigned *got, const unsigned *want, size_t n, const char *what, int k, int count, int root)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (got[i] != want[i])
            FAIL("%s (comm size %d, count %d, root %d): element %zu expected %u got %u", what, k, count, root, i,
                 want[i], got[i]);
}

/* Sum over ranks 0..hi-1 (exclusive) of val(r, i, key). */
static unsigned sum_upto(int hi, size_t i, int key)
{
    unsigned s = 0;
    int r;
    for (r = 0; r < hi; r++)
        s += val(r, i, key);
    return s;
}

static void test_comm(MPI_Comm comm, int max_count, int big)
{
    int k, me, ci, ri, r, i;
    int counts[] = {0, 1, 7, 1000, 20000, 0};
    int ncounts = 5;
    MPI_Comm_size(comm, &k);
    MPI_Comm_rank(comm, &me);
    if (big)
        counts[ncounts++] = max_count;
    CHECK_MPI(MPI_Barrier(comm));
    for (ci = 0; ci < ncounts; ci++) {
        int count = counts[ci];
        size_t n = (size_t)count, kn = (size_t)k * n;
        int roots[3] = {0, k - 1, k / 2};
        int is_big = ci == ncounts - 1 && big;
        unsigned *a = ubuf(kn), *b = ubuf(kn), *want = ubuf(kn);
        int key = count * 16 + k;

        for (ri = 0; ri < 3; ri++) {
            int root = roots[ri];
            if (ri > 0 && roots[ri] == roots[ri - 1])
                continue;
            /* bcast */
            if (me == root)
                fill(a, n, root, key);
            else
                poison(a, n);
            CHECK_MPI(MPI_Bcast(a, count, MPI_UNSIGNED, root, comm));
            fill(want, n, root, key);
            expect(a, want, n, "MPI_Bcast", k, count, root);
            if (is_big)
                continue;
            /* reduce, then in place at the root */
            fill(a, n, me, key + 1);
            poison(b, n);
            CHECK_MPI(MPI_Reduce(a, b, count, MPI_UNSIGNED, MPI_SUM, root, comm));
            if (me == root) {
                for (i = 0; i < count; i++)
                    want[i] = sum_upto(k, i, key + 1);
                expect(b, want, n, "MPI_Reduce", k, count, root);
            }
            if (me == root) {
                fill(b, n, me, key + 1);
                CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, b, count, MPI_UNSIGNED, MPI_SUM, root, comm));
                expect(b, want, n, "MPI_Reduce in place", k, count, root);
            } else {
                CHECK_MPI(MPI_Reduce(a, NULL, count, MPI_UNSIGNED, MPI_SUM, root, comm));
            }
            /* gather, in place at the root */
            fill(a, n, me, key + 2);
            poison(b, kn);
            CHECK_MPI(MPI_Gather(a, count, MPI_UNSIGNED, b, count, MPI_UNSIGNED, root, comm));
            if (me == root) {
                for (r = 0; r < k; r++)
                    fill(want + (size_t)r * n, n, r, key + 2);
                expect(b, want, kn, "MPI_Gather", k, count, root);
                poison(b, kn);
                fill(b + (size_t)root * n, n, root, key + 2);
                CHECK_MPI(MPI_Gather(MPI_IN_PLACE, count, MPI_UNSIGNED, b, count, MPI_UNSIGNED, root, comm));
                expect(b, want, kn, "MPI_Gather in place", k, count, root);
            } else {
                CHECK_MPI(MPI_Gather(a, count, MPI_UNSIGNED, NULL, 0, MPI_UNSIGNED, root, comm));
            }
            /* scatter, in place at the root */
            if (me == root)
                for (r = 0; r < k; r++)
                    fill(a + (size_t)r * n, n, r, key + 3);
            poison(b, n);
            CHECK_MPI(MPI_Scatter(a, count, MPI_UNSIGNED, b, count, MPI_UNSIGNED, root, comm));
            fill(want, n, me, key + 3);
            expect(b, want, n, "MPI_Scatter", k, count, root);
            if (me == root)
                CHECK_MPI(MPI_Scatter(a, count, MPI_UNSIGNED, MPI_IN_PLACE, count, MPI_UNSIGNED, root, comm));
            else
                CHECK_MPI(MPI_Scatter(NULL, 0, MPI_UNSIGNED, b, count, MPI_UNSIGNED, root, comm));
            expect(b, want, n, "MPI_Scatter (root in place)", k, count, root);
            /* gatherv / scatterv: rank r's block has (count + r) % (count + 1) elements, in reverse order */
            {
                int *cnts = (int *)malloc(sizeof(int) * (size_t)k), *dsp = (int *)malloc(sizeof(int) * (size_t)k);
                int total = 0, mine = (count + me) % (count + 1);
                for (r = k - 1; r >= 0; r--) {
                    cnts[r] = (count + r) % (count + 1);
                    dsp[r] = total;
                    total += cnts[r] + 1;
                }
                {
                    unsigned *g = ubuf((size_t)total), *w = ubuf((size_t)total);
                    fill(a, (size_t)mine, me, key + 4);
                    poison(g, (size_t)total);
                    CHECK_MPI(MPI_Gatherv(a, mine, MPI_UNSIGNED, g, cnts, dsp, MPI_UNSIGNED, root, comm));
                    if (me == root) {
                        for (r = 0; r < k; r++) {
                            fill(w + dsp[r], (size_t)cnts[r], r, key + 4);
                            expect(g + dsp[r], w + dsp[r], (size_t)cnts[r], "MPI_Gatherv", k, count, root);
                            if (g[dsp[r] + cnts[r]] != 0xdeadbeefu)
                                FAIL("MPI_Gatherv wrote a gap (comm size %d, count %d)", k, count);
                        }
                    }
                    poison(b, (size_t)mine);
                    CHECK_MPI(MPI_Scatterv(g, cnts, dsp, MPI_UNSIGNED, b, mine, MPI_UNSIGNED, root, comm));
                    fill(want, (size_t)mine, me, key + 4);
                    expect(b, want, (size_t)mine, "MPI_Scatterv", k, count, root);
                    free(g);
                    free(w);
                }
                free(cnts);
                free(dsp);
            }
        }
        /* allreduce, in place */
        fill(a, n, me, key + 5);
        poison(b, n);
        CHECK_MPI(MPI_Allreduce(a, b, count, MPI_UNSIGNED, MPI_SUM, comm));
        for (i = 0; i < count; i++)
            want[i] = sum_upto(k, i, key + 5);
        expect(b, want, n, "MPI_Allreduce", k, count, -1);
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, a, count, MPI_UNSIGNED, MPI_SUM, comm));
        expect(a, want, n, "MPI_Allreduce in place", k, count, -1);
        /* alltoall, in place: block j of rank r is val(r, j*n + i) */
        for (r = 0; r < k; r++)
            fill(a + (size_t)r * n, n, me * 64 + r, key + 6);
        poison(b, kn);
        CHECK_MPI(MPI_Alltoall(a, count, MPI_UNSIGNED, b, count, MPI_UNSIGNED, comm));
        for (r = 0; r < k; r++)
            fill(want + (size_t)r * n, n, r * 64 + me, key + 6);
        expect(b, want, kn, "MPI_Alltoall", k, count, -1);
        CHECK_MPI(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, MPI_UNSIGNED, comm));
        expect(a, want, kn, "MPI_Alltoall in place", k, count, -1);
        if (is_big)
            goto next;
        /* allgather, in place */
        fill(a, n, me, key + 7);
        poison(b, kn);
        CHECK_MPI(MPI_Allgather(a, count, MPI_UNSIGNED, b, count, MPI_UNSIGNED, comm));
        for (r = 0; r < k; r++)
            fill(want + (size_t)r * n, n, r, key + 7);
        expect(b, want, kn, "MPI_Allgather", k, count, -1);
        poison(b, kn);
        fill(b + (size_t)me * n, n, me, key + 7);
        CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, count, MPI_UNSIGNED, comm));
        expect(b, want, kn, "MPI_Allgather in place", k, count, -1);
        /* allgatherv and alltoallv: rank r contributes (r % 3) * count / 2 elements */
        {
            int *rc = (int *)malloc(sizeof(int) * (size_t)k), *rd = (int *)malloc(sizeof(int) * (size_t)k);
            int *sc = (int *)malloc(sizeof(int) * (size_t)k), *sd = (int *)malloc(sizeof(int) * (size_t)k);
            int tot = 0, stot = 0, mine = (me % 3) * count / 2;
            unsigned *g, *w, *s;
            for (r = 0; r < k; r++) {
                rc[r] = (r % 3) * count / 2;
                rd[r] = tot;
                tot += rc[r] + 2;
            }
            g = ubuf((size_t)tot);
            w = ubuf((size_t)tot);
            fill(a, (size_t)mine, me, key + 8);
            poison(g, (size_t)tot);
            CHECK_MPI(MPI_Allgatherv(a, mine, MPI_UNSIGNED, g, rc, rd, MPI_UNSIGNED, comm));
            for (r = 0; r < k; r++) {
                fill(w + rd[r], (size_t)rc[r], r, key + 8);
                expect(g + rd[r], w + rd[r], (size_t)rc[r], "MPI_Allgatherv", k, count, -1);
            }
            /* alltoallv: rank i sends (i + j) % 3 * count / 3 elements to j, blocks reversed */
            for (r = k - 1; r >= 0; r--) {
                sc[r] = (me + r) % 3 * count / 3;
                sd[r] = stot;
                stot += sc[r] + 1;
            }
            tot = 0;
            for (r = 0; r < k; r++) {
                rc[r] = (r + me) % 3 * count / 3;
                rd[r] = tot;
                tot += rc[r] + 1;
            }
            s = ubuf((size_t)stot);
            free(g);
            g = ubuf((size_t)tot);
            for (r = 0; r < k; r++)
                fill(s + sd[r], (size_t)sc[r], me * 64 + r, key + 9);
            poison(g, (size_t)tot);
            CHECK_MPI(MPI_Alltoallv(s, sc, sd, MPI_UNSIGNED, g, rc, rd, MPI_UNSIGNED, comm));
            for (r = 0; r < k; r++) {
                free(w);
                w = ubuf((size_t)rc[r]);
                fill(w, (size_t)rc[r], r * 64 + me, key + 9);
                expect(g + rd[r], w, (size_t)rc[r], "MPI_Alltoallv", k, count, -1);
            }
            /* the same through non-blocking MPI_Ialltoallv */
            {
                MPI_Request rq;
                poison(g, (size_t)tot);
                CHECK_MPI(MPI_Ialltoallv(s, sc, sd, MPI_UNSIGNED, g, rc, rd, MPI_UNSIGNED, comm, &rq));
                CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                CHECK(rq == MPI_REQUEST_NULL, "MPI_Wait resets the request");
                for (r = 0; r < k; r++) {
                    free(w);
                    w = ubuf((size_t)rc[r]);
                    fill(w, (size_t)rc[r], r * 64 + me, key + 9);
                    expect(g + rd[r], w, (size_t)rc[r], "MPI_Ialltoallv", k, count, -1);
                }
            }
            free(s);
            free(g);
            free(w);
            free(rc);
            free(rd);
            free(sc);
            free(sd);
        }
        /* reduce_scatter_block, reduce_scatter, scan, exscan */
        for (r = 0; r < k; r++)
            fill(a + (size_t)r * n, n, me, key + 10 + r);
        poison(b, n);
        CHECK_MPI(MPI_Reduce_scatter_block(a, b, count, MPI_UNSIGNED, MPI_SUM, comm));
        for (i = 0; i < count; i++) {
            unsigned s = 0;
            for (r = 0; r < k; r++)
                s += val(r, (size_t)i, key + 10 + me);
            want[i] = s;
        }
        expect(b, want, n, "MPI_Reduce_scatter_block", k, count, -1);
        {
            int *rc = (int *)malloc(sizeof(int) * (size_t)k), tot = 0, off = 0;
            for (r = 0; r < k; r++) {
                rc[r] = (r + 1) * count / k;
                tot += rc[r];
            }
            for (r = 0; r < me; r++)
                off += rc[r];
            {
                unsigned *s = ubuf((size_t)tot);
                fill(s, (size_t)tot, me, key + 11);
                poison(b, (size_t)rc[me]);
                CHECK_MPI(MPI_Reduce_scatter(s, b, rc, MPI_UNSIGNED, MPI_SUM, comm));
                for (i = 0; i < rc[me]; i++)
                    want[i] = sum_upto(k, (size_t)(off + i), key + 11);
                expect(b, want, (size_t)rc[me], "MPI_Reduce_scatter", k, count, -1);
                fill(s, (size_t)tot, me, key + 11);
                CHECK_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, s, rc, MPI_UNSIGNED, MPI_SUM, comm));
                expect(s, want, (size_t)rc[me], "MPI_Reduce_scatter in place", k, count, -1);
                free(s);
            }
            free(rc);
        }
        fill(a, n, me, key + 12);
        poison(b, n);
        CHECK_MPI(MPI_Scan(a, b, count, MPI_UNSIGNED, MPI_SUM, comm));
        for (i = 0; i < count; i++)
            want[i] = sum_upto(me + 1, i, key + 12);
        expect(b, want, n, "MPI_Scan", k, count, -1);
        CHECK_MPI(MPI_Scan(MPI_IN_PLACE, a, count, MPI_UNSIGNED, MPI_SUM, comm));
        expect(a, want, n, "MPI_Scan in place", k, count, -1);
        fill(a, n, me, key + 13);
        poison(b, n);
        CHECK_MPI(MPI_Exscan(a, b, count, MPI_UNSIGNED, MPI_SUM, comm));
        if (me > 0) {
            for (i = 0; i < count; i++)
                want[i] = sum_upto(me, i, key + 13);
            expect(b, want, n, "MPI_Exscan", k, count, -1);
        }
        /* several non-blocking collectives in flight at once on one
         * communicator, completed in reverse order */
        {
            MPI_Request rq[6];
            unsigned *c1 = ubuf(n), *c2 = ubuf(kn), *c3 = ubuf(kn), *c4 = ubuf(n), *c5 = ubuf(kn), *c6 = ubuf(n);
            int st;
            fill(a, n, me, key + 14);
            for (r = 0; r < k; r++)
                fill(b + (size_t)r * n, n, me * 64 + r, key + 15);
            if (me == 0)
                fill(c1, n, 0, key + 16);
            poison(c2, kn);
            poison(c3, kn);
            poison(c4, n);
            poison(c5, kn);
            poison(c6, n);
            CHECK_MPI(MPI_Ibcast(c1, count, MPI_UNSIGNED, 0, comm, &rq[0]));
            CHECK_MPI(MPI_Iallgather(a, count, MPI_UNSIGNED, c2, count, MPI_UNSIGNED, comm, &rq[1]));
            CHECK_MPI(MPI_Ialltoall(b, count, MPI_UNSIGNED, c3, count, MPI_UNSIGNED, comm, &rq[2]));
            CHECK_MPI(MPI_Iallreduce(a, c4, count, MPI_UNSIGNED, MPI_SUM, comm, &rq[3]));
            CHECK_MPI(MPI_Igather(a, count, MPI_UNSIGNED, c5, count, MPI_UNSIGNED, k - 1, comm, &rq[4]));
            CHECK_MPI(MPI_Ireduce(a, c6, count, MPI_UNSIGNED, MPI_SUM, k - 1, comm, &rq[5]));
            for (st = 5; st >= 0; st--)
                CHECK_MPI(MPI_Wait(&rq[st], MPI_STATUS_IGNORE));
            fill(want, n, 0, key + 16);
            expect(c1, want, n, "MPI_Ibcast", k, count, 0);
            for (r = 0; r < k; r++)
                fill(want + (size_t)r * n, n, r, key + 14);
            expect(c2, want, kn, "MPI_Iallgather", k, count, -1);
            if (me == k - 1)
                expect(c5, want, kn, "MPI_Igather", k, count, k - 1);
            for (r = 0; r < k; r++)
                fill(want + (size_t)r * n, n, r * 64 + me, key + 15);
            expect(c3, want, kn, "MPI_Ialltoall", k, count, -1);
            for (i = 0; i < count; i++)
                want[i] = sum_upto(k, i, key + 14);
            expect(c4, want, n, "MPI_Iallreduce", k, count, -1);
            if (me == k - 1)
                expect(c6, want, n, "MPI_Ireduce", k, count, k - 1);
            /* Iscatter and Ibarrier, completed with MPI_Waitall / MPI_Test */
            if (me == 0)
                for (r = 0; r < k; r++)
                    fill(c2 + (size_t)r * n, n, r, key + 17);
            poison(c1, n);
            CHECK_MPI(MPI_Iscatter(c2, count, MPI_UNSIGNED, c1, count, MPI_UNSIGNED, 0, comm, &rq[0]));
            CHECK_MPI(MPI_Ibarrier(comm, &rq[1]));
            CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            fill(want, n, me, key + 17);
            expect(c1, want, n, "MPI_Iscatter", k, count, 0);
            {
                int flag = 0;
                double t0 = MPI_Wtime();
                CHECK_MPI(MPI_Ibarrier(comm, &rq[0]));
                while (!flag) {
                    CHECK_MPI(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
                    tc_deadline(t0, 30, "MPI_Test on MPI_Ibarrier");
                }
            }
            free(c1);
            free(c2);
            free(c3);
            free(c4);
            free(c5);
            free(c6);
        }
    next:
        free(a);
        free(b);
        free(want);
    }
    CHECK_MPI(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
    int k, max_count = (1 << 20) / (int)sizeof(unsigned);
    CHECK_MPI(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (argc > 1)
        max_count = atoi(argv[1]) / (int)sizeof(unsigned);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    for (k = 1; k <= wsize; k++) {
        MPI_Comm sub;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, wrank < k ? 0 : MPI_UNDEFINED, wrank, &sub));
        if (wrank < k) {
            CHECK(sub != MPI_COMM_NULL, "member of the split has a communicator");
            test_comm(sub, max_count, k == wsize);
            CHECK_MPI(MPI_Comm_free(&sub));
        } else {
            CHECK(sub == MPI_COMM_NULL, "MPI_UNDEFINED color gives MPI_COMM_NULL");
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    return tc_finish(NAME);
}

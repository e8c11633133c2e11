/*
 * rma_direct.c - one-sided operations that several ranks make at once on
 * the same window cells: atomic where MPI says they are, exclusive under
 * exclusive locks, and (with "nocalls") carried out while the target makes
 * no MPI call at all.
 *
 * Ranks: 2 or more. The window comes from MPI_Win_allocate, or with argument
 * "shared" from MPI_Win_allocate_shared. Between ranks of one host Tandem
 * makes both shared memory that every rank loads and stores (rma_direct=1);
 * through the engine (rma_direct=0, TCP) the same checks hold.
 *
 *   atomic:    inside MPI_Win_lock_all every rank, ITERS times,
 *              MPI_Fetch_and_op(MPI_SUM, 1) on rank 0's cell 0, MPI_Accumulate
 *              (MPI_SUM, 1) on the last rank's cell 1, and a compare-and-swap
 *              increment on rank 0's cell 2; every count comes out exact and
 *              the values fetched from cell 0 are 0..n*ITERS-1, each once;
 *   exclusive: every rank, ITERS/4 times, under an exclusive lock of rank 0
 *              gets cell 3, adds one and puts it back: no update is lost;
 *   pairs:     MPI_MAXLOC and MPI_MINLOC accumulates of MPI_SHORT_INT (a
 *              short and an int with padding between) from every rank, and
 *              a fetching one: the winner's value and rank come out;
 *   writer:    the other ranks read 64 KiB of rank 1's window in lock_all
 *              epochs back to back while rank 0 takes 20 exclusive locks
 *              of rank 1, a millisecond apart: it gets them within 10 s
 *              (a lock that let readers in while a writer waited kept it
 *              out for seconds per lock with 8 ranks on 2 cores);
 *   range:     a put past the end of a window fails with MPI_ERR_RMA_RANGE
 *              (errors returned) and writes nothing;
 *   nocalls[=SECONDS]: the last rank polls its own cell 4 with plain loads
 *              and makes no MPI call until every other rank has, under an
 *              exclusive lock, added 1 to it and read its cell 5; it fails
 *              after SECONDS (default 10) "without calls" (what happens
 *              through the engine, where the target must grant locks and
 *              apply operations itself).
 */
#include "check.h"

#define NAME "rma_direct"
#define ITERS 2000
#define CELLS 10
/* Longs of the block readers read in the writer phase, after the cells. */
#define BLOCK 8192
/* Exclusive locks rank 0 takes in the writer phase, and its time limit. */
#define WRITES 20
#define WRITER_LIMIT 10.0

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rank, n, nocalls = 0, shared = 0;
    double limit = 10.0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");
    for (int a = 1; a < argc; a++) {
        if (strncmp(argv[a], "nocalls", 7) == 0) {
            nocalls = 1;
            if (argv[a][7] == '=')
                limit = atof(argv[a] + 8);
        }
        shared |= strcmp(argv[a], "shared") == 0;
    }
    int last = n - 1;

    long *base;
    MPI_Win win;
    if (shared)
        CHECK_MPI(MPI_Win_allocate_shared((CELLS + BLOCK) * sizeof(long), sizeof(long), MPI_INFO_NULL,
                                          MPI_COMM_WORLD, &base, &win));
    else
        CHECK_MPI(MPI_Win_allocate((CELLS + BLOCK) * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                                   &win));
    for (int i = 0; i < CELLS + BLOCK; i++)
        base[i] = 0;
    base[5] = 500 + rank;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* atomic */
    long *fetched = malloc(ITERS * sizeof(long));
    CHECK(fetched != NULL, "malloc");
    const long one = 1;
    CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int i = 0; i < ITERS; i++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[i], MPI_LONG, 0, 0, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, last, 1, 1, MPI_LONG, MPI_SUM, win));
        long seen = 0, old = -1;
        CHECK_MPI(MPI_Fetch_and_op(NULL, &seen, MPI_LONG, 0, 2, MPI_NO_OP, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        for (;;) {
            long next = seen + 1;
            CHECK_MPI(MPI_Compare_and_swap(&next, &seen, &old, MPI_LONG, 0, 2, win));
            CHECK_MPI(MPI_Win_flush(0, win));
            if (old == seen)
                break;
            seen = old;
        }
        CHECK_MPI(MPI_Win_flush_all(win));
    }
    CHECK_MPI(MPI_Win_unlock_all(win));
    for (int i = 1; i < ITERS; i++)
        CHECK(fetched[i] > fetched[i - 1], "fetch-and-op %d fetched %ld after %ld", i, fetched[i], fetched[i - 1]);
    long total = (long)n * ITERS;
    long *all = rank == 0 ? malloc((size_t)total * sizeof(long)) : NULL;
    CHECK_MPI(MPI_Gather(fetched, ITERS, MPI_LONG, all, ITERS, MPI_LONG, 0, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        qsort(all, (size_t)total, sizeof(long), cmp_long);
        for (long i = 0; i < total; i++)
            CHECK_EQ(i, all[i], "the %ld-th smallest value fetched from cell 0", i);
        CHECK_EQ(total, base[0], "fetch-and-op count");
        CHECK_EQ(total, base[2], "compare-and-swap count");
        free(all);
    }
    if (rank == last)
        CHECK_EQ(total, base[1], "accumulate count");
    free(fetched);

    /* exclusive */
    for (int i = 0; i < ITERS / 4; i++) {
        long v = -1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, 0, 3, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v++;
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, 3, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        CHECK_EQ((long)n * (ITERS / 4), base[3], "read-modify-writes under exclusive locks");

    /* pairs: rank r offers (v, r) with v = (r * 7) % n; the largest v
     * (smallest rank on ties) wins MAXLOC, the smallest v MINLOC. */
    typedef struct {
        short v;
        int i;
    } short_int;
    short_int *loc = (short_int *)&base[6];
    if (rank == 0) {
        loc[0].v = -1, loc[0].i = -1;
        loc[1].v = 30000, loc[1].i = -1;
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    short_int mine = {(short)((rank * 7) % n), rank}, seen = {-2, -2};
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    CHECK_MPI(MPI_Accumulate(&mine, 1, MPI_SHORT_INT, 0, 6, 1, MPI_SHORT_INT, MPI_MAXLOC, win));
    CHECK_MPI(MPI_Get_accumulate(&mine, 1, MPI_SHORT_INT, &seen, 1, MPI_SHORT_INT, 0, 7, 1, MPI_SHORT_INT,
                                 MPI_MINLOC, win));
    CHECK_MPI(MPI_Win_unlock(0, win));
    CHECK(seen.v >= 0 && seen.v <= 30000, "MINLOC fetched (%d, %d)", seen.v, seen.i);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        short best = -1, least = 30000;
        int at_best = -1, at_least = -1;
        for (int r = 0; r < n; r++) {
            short v = (short)((r * 7) % n);
            if (v > best)
                best = v, at_best = r;
            if (v < least)
                least = v, at_least = r;
        }
        CHECK(loc[0].v == best && loc[0].i == at_best, "MAXLOC (%d, %d), not (%d, %d)", loc[0].v, loc[0].i, best,
              at_best);
        CHECK(loc[1].v == least && loc[1].i == at_least, "MINLOC (%d, %d), not (%d, %d)", loc[1].v, loc[1].i, least,
              at_least);
    }

    /* writer: cell 8 of rank `wt` says when the readers may stop. */
    int wt = n > 2 ? 1 : 0;
    if (rank == 0) {
        double t0 = MPI_Wtime();
        long v;
        for (int i = 0; i < WRITES; i++) {
            tc_sleep_ms(1);
            v = i;
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, wt, 0, win));
            CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, wt, CELLS, 1, MPI_LONG, win));
            CHECK_MPI(MPI_Win_unlock(wt, win));
        }
        double took = MPI_Wtime() - t0;
        CHECK(took < WRITER_LIMIT, "%d exclusive locks took %.1f s while readers kept reading", WRITES, took);
        v = 1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, wt, 0, win));
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, wt, 8, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(wt, win));
    } else {
        long *block = malloc(BLOCK * sizeof(long)), stop = 0;
        CHECK(block != NULL, "malloc");
        double t0 = MPI_Wtime();
        while (!stop) {
            CHECK_MPI(MPI_Win_lock_all(0, win));
            CHECK_MPI(MPI_Get(block, BLOCK, MPI_LONG, wt, CELLS, BLOCK, MPI_LONG, win));
            CHECK_MPI(MPI_Get(&stop, 1, MPI_LONG, wt, 8, 1, MPI_LONG, win));
            CHECK_MPI(MPI_Win_unlock_all(win));
            tc_deadline(t0, 2 * WRITER_LIMIT, "readers waiting for the writer");
        }
        free(block);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* range */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    long pair[2] = {-7, -7};
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, last, 0, win));
    int rc = MPI_Put(pair, 2, MPI_LONG, last, CELLS + BLOCK - 1, 2, MPI_LONG, win);
    tc_expect_class(rc, MPI_ERR_RMA_RANGE, "a put past the window's end");
    CHECK_MPI(MPI_Win_unlock(last, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == last)
        CHECK_EQ(0, base[CELLS + BLOCK - 1], "the last cell after a refused put");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* nocalls */
    if (nocalls) {
        if (rank == last) {
            double t0 = tc_epoch();
            unsigned long spins = 0;
            while (__atomic_load_n(&base[4], __ATOMIC_ACQUIRE) != n - 1)
                if ((++spins & 0xfff) == 0 && tc_epoch() - t0 > limit)
                    CHECK(0, "cell 4 is %ld after %.0f s without calls, not %d", base[4], limit, n - 1);
        } else {
            long v = -1;
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, last, 0, win));
            CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, last, 4, 1, MPI_LONG, MPI_SUM, win));
            CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, last, 5, 1, MPI_LONG, win));
            CHECK_MPI(MPI_Win_unlock(last, win));
            CHECK_EQ(500 + last, v, "the target's cell 5");
        }
    }
    CHECK_MPI(MPI_Win_free(&win));
    return tc_finish(NAME);
}

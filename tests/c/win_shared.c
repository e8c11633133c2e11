/*
 * win_shared.c - shared-memory windows (MPI_Win_allocate_shared and
 * MPI_Win_shared_query) on a communicator of one host's ranks.
 *
 * Ranks: any number, all on one host (MPI_COMM_TYPE_SHARED must give the
 * whole job).
 *
 *   layout:     segments of different sizes (one empty when there are 3 or
 *               more ranks) are contiguous by default: every rank's segment
 *               starts where the previous rank's ends (an empty one is at
 *               NULL on Tandem, as in MPICH); shared_query gives
 *               each rank's size and disp_unit, MPI_PROC_NULL the first
 *               non-empty segment; the window's attributes say
 *               MPI_WIN_FLAVOR_SHARED and MPI_WIN_UNIFIED.
 *   load/store: every rank stores a pattern into its own segment, then
 *               (MPI_Win_sync, barrier, MPI_Win_sync) reads every segment
 *               through the query pointers; then each rank stores into its
 *               right neighbour's segment and checks what its left
 *               neighbour stored into its own.
 *   rma:        MPI_Put / MPI_Get on the same memory under lock_all and
 *               flush agree with plain loads; a counter in rank 0's segment
 *               is incremented ITERS times by every rank with
 *               MPI_Fetch_and_op: the total is right and the values fetched
 *               are all different (each increment atomic); MPI_Accumulate
 *               and MPI_Compare_and_swap contend on two more cells; a fence
 *               epoch and a post/start/complete/wait epoch put values that
 *               loads see afterwards.
 *   units:      ranks with different disp_units: queries report each one
 *               and MPI_Put displacements are scaled by the target's.
 *   noncontig:  info alloc_shared_noncontig=true: every segment is usable
 *               and (on Tandem) starts on a page boundary.
 *   empty:      a size of 0 everywhere: queries report size 0, epochs work.
 *   errors:     a negative size (MPI_ERR_SIZE), a disp_unit of 0
 *               (MPI_ERR_DISP), a query of a rank outside the window
 *               (MPI_ERR_RANK); a query on a window from MPI_Win_allocate
 *               reports this rank's own memory and nothing of the others'.
 */
#include "check.h"

#include <stdint.h>

#define NAME "win_shared"
#define ITERS 200
#define PAGE 4096

/* Elements of rank r's segment in the main window (rank 1's is empty when
 * there are 3 or more ranks; sizes differ so that a wrong offset shows). */
static int seg_elems(int r, int n) { return (r == 1 && n > 2) ? 0 : 64 + 3 * r; }

/* The value rank r stores at element i of its own segment. */
static int own_value(int r, int i) { return r * 100000 + i + 1; }

/* The first rank with a non-empty segment. */
static int first_nonempty(int n)
{
    for (int r = 0; r < n; r++)
        if (seg_elems(r, n) > 0)
            return r;
    return -1;
}

static void sync_all(MPI_Win win, MPI_Comm comm)
{
    CHECK_MPI(MPI_Win_sync(win));
    CHECK_MPI(MPI_Barrier(comm));
    CHECK_MPI(MPI_Win_sync(win));
}

/* The next / previous rank with a non-empty segment, cyclically. */
static int next_nonempty(int r, int n, int step)
{
    for (int k = 1; k <= n; k++) {
        int t = ((r + step * k) % n + n) % n;
        if (seg_elems(t, n) > 0)
            return t;
    }
    return -1;
}

static void test_main_window(MPI_Comm comm, int rank, int n)
{
    int *mine = NULL;
    MPI_Win win;
    MPI_Aint my_bytes = (MPI_Aint)seg_elems(rank, n) * (MPI_Aint)sizeof(int);
    CHECK_MPI(MPI_Win_allocate_shared(my_bytes, sizeof(int), MPI_INFO_NULL, comm, &mine, &win));

    /* layout */
    int **bases = calloc((size_t)n, sizeof *bases);
    CHECK(bases != NULL, "calloc");
    for (int r = 0; r < n; r++) {
        MPI_Aint size = -1;
        int unit = -1;
        CHECK_MPI(MPI_Win_shared_query(win, r, &size, &unit, &bases[r]));
        CHECK_EQ((long long)seg_elems(r, n) * (long long)sizeof(int), size, "query size of rank %d", r);
        CHECK_EQ((int)sizeof(int), unit, "query disp_unit of rank %d", r);
        if (seg_elems(r, n) == 0 && tc_is_tandem())
            CHECK(bases[r] == NULL, "an empty segment's address is NULL (as in MPICH)");
    }
    /* contiguous by default: each non-empty segment starts where the
     * previous non-empty one ends */
    for (int r = 0, prev = -1; r < n; r++) {
        if (seg_elems(r, n) == 0)
            continue;
        if (prev >= 0)
            CHECK((char *)bases[r] == (char *)bases[prev] + (size_t)seg_elems(prev, n) * sizeof(int),
                  "segment of rank %d does not follow rank %d's (contiguous by default)", r, prev);
        prev = r;
    }
    CHECK(bases[rank] == mine, "query of my own rank gives my baseptr");
    {
        MPI_Aint size = -1;
        int unit = -1;
        int *first = NULL;
        int f = first_nonempty(n);
        CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &size, &unit, &first));
        CHECK(first == bases[f], "MPI_PROC_NULL query gives rank %d's segment", f);
        CHECK_EQ((long long)seg_elems(f, n) * (long long)sizeof(int), size, "MPI_PROC_NULL query size");
    }
    {
        int *flavor = NULL, *model = NULL, found = 0;
        MPI_Aint *wsize = NULL;
        CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &found));
        CHECK(found && *flavor == MPI_WIN_FLAVOR_SHARED, "MPI_WIN_CREATE_FLAVOR is MPI_WIN_FLAVOR_SHARED");
        CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &found));
        CHECK(found && *model == MPI_WIN_UNIFIED, "MPI_WIN_MODEL is MPI_WIN_UNIFIED");
        CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &found));
        CHECK(found, "MPI_WIN_SIZE found");
        CHECK_EQ(my_bytes, *wsize, "MPI_WIN_SIZE");
    }

    /* load/store */
    CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int i = 0; i < seg_elems(rank, n); i++)
        mine[i] = own_value(rank, i);
    sync_all(win, comm);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < seg_elems(r, n); i++)
            CHECK_EQ(own_value(r, i), bases[r][i], "load of rank %d's element %d", r, i);
    sync_all(win, comm);
    int right = next_nonempty(rank, n, 1), left = -1;
    for (int r = 0; r < n; r++)
        if (seg_elems(r, n) > 0 && next_nonempty(r, n, 1) == rank)
            left = r;
    if (seg_elems(rank, n) > 0 && right >= 0)
        bases[right][seg_elems(right, n) - 1] = -1 - rank;
    sync_all(win, comm);
    if (seg_elems(rank, n) > 0)
        CHECK_EQ(-1 - left, mine[seg_elems(rank, n) - 1], "store by my left neighbour %d", left);
    sync_all(win, comm);

    /* rma: put into the right neighbour's element 2, get the left one's */
    int f = first_nonempty(n);
    if (seg_elems(rank, n) > 0 && right >= 0) {
        int v = 7000 + rank, got = 0;
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT, right, 2, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(right, win));
        CHECK_MPI(MPI_Win_sync(win));
        CHECK_EQ(v, bases[right][2], "load after MPI_Put + flush to rank %d", right);
        CHECK_MPI(MPI_Get(&got, 1, MPI_INT, left, 3, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(left, win));
        CHECK_EQ(own_value(left, 3), got, "MPI_Get of rank %d's element 3", left);
    }
    sync_all(win, comm);
    if (seg_elems(rank, n) > 0)
        CHECK_EQ(7000 + left, mine[2], "my element 2 after my left neighbour's MPI_Put");
    /* counter cells in the first non-empty segment: 4 (fetch_and_op),
     * 5 (accumulate), 6 (compare_and_swap winners) */
    if (rank == f) {
        mine[4] = 0;
        mine[5] = 0;
        mine[6] = -1;
    }
    sync_all(win, comm);
    int *fetched = malloc(ITERS * sizeof(int));
    CHECK(fetched != NULL, "malloc");
    int one = 1;
    for (int k = 0; k < ITERS; k++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[k], MPI_INT, f, 4, MPI_SUM, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_INT, f, 5, 1, MPI_INT, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(f, win));
    }
    int cas_old = -2, minus_one = -1;
    CHECK_MPI(MPI_Compare_and_swap(&rank, &minus_one, &cas_old, MPI_INT, f, 6, win));
    CHECK_MPI(MPI_Win_flush(f, win));
    sync_all(win, comm);
    CHECK_EQ(n * ITERS, bases[f][4], "counter after every rank's %d MPI_Fetch_and_op", ITERS);
    CHECK_EQ(n * ITERS, bases[f][5], "cell after every rank's %d MPI_Accumulate", ITERS);
    int winner = bases[f][6];
    CHECK(winner >= 0 && winner < n, "compare_and_swap winner %d is a rank", winner);
    if (rank == winner)
        CHECK_EQ(-1, cas_old, "the winner saw the initial value");
    else
        CHECK_EQ(winner, cas_old, "a loser saw the winner's rank");
    for (int k = 1; k < ITERS; k++)
        CHECK(fetched[k] > fetched[k - 1], "my fetched values increase (%d then %d)", fetched[k - 1], fetched[k]);
    {
        /* every value 0 .. n*ITERS-1 was fetched exactly once */
        int *all = rank == 0 ? malloc((size_t)n * ITERS * sizeof(int)) : NULL;
        CHECK_MPI(MPI_Gather(fetched, ITERS, MPI_INT, all, ITERS, MPI_INT, 0, comm));
        if (rank == 0) {
            char *seen = calloc((size_t)n * ITERS, 1);
            CHECK(seen != NULL, "calloc");
            for (int k = 0; k < n * ITERS; k++) {
                CHECK(all[k] >= 0 && all[k] < n * ITERS, "fetched value %d in range", all[k]);
                CHECK(!seen[all[k]], "value %d fetched twice (increments not atomic)", all[k]);
                seen[all[k]] = 1;
            }
            free(seen);
            free(all);
        }
    }
    free(fetched);
    CHECK_MPI(MPI_Win_unlock_all(win));

    /* fence epoch: everyone puts its rank into element 0 of the right
     * neighbour's segment */
    CHECK_MPI(MPI_Win_fence(0, win));
    if (seg_elems(rank, n) > 0 && right >= 0) {
        int v = 9000 + rank;
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win));
    }
    CHECK_MPI(MPI_Win_fence(0, win));
    if (seg_elems(rank, n) > 0)
        CHECK_EQ(9000 + left, mine[0], "my element 0 after the fence epoch");

    /* post/start/complete/wait: the others put into the first non-empty
     * segment's element 1 + rank (when it has room) */
    {
        MPI_Group g, peers;
        CHECK_MPI(MPI_Win_get_group(win, &g));
        if (rank == f) {
            int excl[1] = {f};
            CHECK_MPI(MPI_Group_excl(g, 1, excl, &peers));
            if (n > 1) {
                CHECK_MPI(MPI_Win_post(peers, 0, win));
                CHECK_MPI(MPI_Win_wait(win));
            }
            for (int r = 0; r < n; r++)
                if (r != f && 8 + r < seg_elems(f, n))
                    CHECK_EQ(-500 - r, mine[8 + r], "element %d after rank %d's put in a PSCW epoch", 8 + r, r);
        } else {
            int incl[1] = {f};
            CHECK_MPI(MPI_Group_incl(g, 1, incl, &peers));
            CHECK_MPI(MPI_Win_start(peers, 0, win));
            if (8 + rank < seg_elems(f, n)) {
                int v = -500 - rank;
                CHECK_MPI(MPI_Put(&v, 1, MPI_INT, f, 8 + rank, 1, MPI_INT, win));
            }
            CHECK_MPI(MPI_Win_complete(win));
        }
        CHECK_MPI(MPI_Group_free(&peers));
        CHECK_MPI(MPI_Group_free(&g));
    }

    CHECK_MPI(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "MPI_Win_free sets MPI_WIN_NULL");
    free(bases);
}

/* Ranks use different displacement units: 1, 8, 4, 1, 8, ... bytes. */
static int unit_of(int r) { return r % 3 == 0 ? 1 : (r % 3 == 1 ? 8 : 4); }

static void test_units(MPI_Comm comm, int rank, int n)
{
    char *mine = NULL;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(64, unit_of(rank), MPI_INFO_NULL, comm, &mine, &win));
    memset(mine, 0, 64);
    CHECK_MPI(MPI_Win_fence(0, win));
    int right = (rank + 1) % n;
    int v = 4242 + rank;
    /* displacement 2 is at byte 2 * unit of the target */
    CHECK_MPI(MPI_Put(&v, 1, MPI_INT, right, 2, 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    int left = (rank + n - 1) % n, got;
    memcpy(&got, mine + 2 * unit_of(rank), sizeof got);
    CHECK_EQ(4242 + left, got, "MPI_Put at displacement 2 in units of %d bytes", unit_of(rank));
    for (int r = 0; r < n; r++) {
        MPI_Aint size = -1, unit_c = -1;
        int unit = -1;
        char *base = NULL, *base_c = NULL;
        CHECK_MPI(MPI_Win_shared_query(win, r, &size, &unit, &base));
        CHECK_EQ(unit_of(r), unit, "disp_unit of rank %d", r);
        CHECK_EQ(64, size, "size of rank %d", r);
        CHECK_MPI(MPI_Win_shared_query_c(win, r, &size, &unit_c, &base_c));
        CHECK_EQ(unit_of(r), unit_c, "disp_unit of rank %d (large-count query)", r);
        CHECK(base == base_c, "both queries give one address");
    }
    CHECK_MPI(MPI_Win_free(&win));
}

static void test_noncontig(MPI_Comm comm, int rank, int n)
{
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    long *mine = NULL;
    MPI_Win win;
    const int elems = 10 + rank;
    CHECK_MPI(MPI_Win_allocate_shared((MPI_Aint)elems * (MPI_Aint)sizeof(long), sizeof(long), info, comm, &mine,
                                      &win));
    CHECK_MPI(MPI_Info_free(&info));
    if (tc_is_tandem())
        CHECK((uintptr_t)mine % PAGE == 0, "noncontiguous segment on a page boundary");
    CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int i = 0; i < elems; i++)
        mine[i] = (long)rank * 1000 + i;
    sync_all(win, comm);
    for (int r = 0; r < n; r++) {
        long *base = NULL;
        MPI_Aint size = -1;
        int unit = -1;
        CHECK_MPI(MPI_Win_shared_query(win, r, &size, &unit, &base));
        CHECK(size >= (MPI_Aint)(10 + r) * (MPI_Aint)sizeof(long), "noncontig size of rank %d", r);
        for (int i = 0; i < 10 + r; i++)
            CHECK_EQ((long)r * 1000 + i, base[i], "noncontig load of rank %d's element %d", r, i);
    }
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Win_free(&win));
}

static void test_empty(MPI_Comm comm)
{
    void *mine = NULL;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared(0, 1, MPI_INFO_NULL, comm, &mine, &win));
    MPI_Aint size = -1;
    int unit = -1;
    void *base = NULL;
    CHECK_MPI(MPI_Win_shared_query(win, MPI_PROC_NULL, &size, &unit, &base));
    CHECK_EQ(0, size, "MPI_PROC_NULL query of an empty window");
    CHECK_MPI(MPI_Win_shared_query(win, 0, &size, &unit, &base));
    CHECK_EQ(0, size, "query of rank 0 of an empty window");
    CHECK_EQ(1, unit, "disp_unit of rank 0 of an empty window");
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Win_free(&win));
}

static void test_errors(MPI_Comm comm, int rank, int n)
{
    void *mine = NULL;
    MPI_Win win = MPI_WIN_NULL;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Win_allocate_shared(-8, 1, MPI_INFO_NULL, comm, &mine, &win), MPI_ERR_SIZE,
                    "negative size");
    tc_expect_class(MPI_Win_allocate_shared(8, 0, MPI_INFO_NULL, comm, &mine, &win), MPI_ERR_DISP,
                    "disp_unit 0");
    CHECK(win == MPI_WIN_NULL, "no window made by the failed calls");

    CHECK_MPI(MPI_Win_allocate_shared(8, 1, MPI_INFO_NULL, comm, &mine, &win));
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Aint size;
    int unit;
    void *base;
    tc_expect_class(MPI_Win_shared_query(win, n, &size, &unit, &base), MPI_ERR_RANK, "query of rank n");
    tc_expect_class(MPI_Win_shared_query(win, -5, &size, &unit, &base), MPI_ERR_RANK, "query of rank -5");
    CHECK_MPI(MPI_Win_free(&win));

    /* a window from MPI_Win_allocate shares nothing: this rank's own memory
     * only (MPI-4.1 lets the query be asked on any window) */
    CHECK_MPI(MPI_Win_allocate(16, 4, MPI_INFO_NULL, comm, &mine, &win));
    CHECK_MPI(MPI_Win_shared_query(win, rank, &size, &unit, &base));
    CHECK(base == mine, "own segment of an MPI_Win_allocate window");
    CHECK_EQ(16, size, "own size of an MPI_Win_allocate window");
    if (n > 1 && tc_is_tandem()) {
        CHECK_MPI(MPI_Win_shared_query(win, (rank + 1) % n, &size, &unit, &base));
        CHECK(base == NULL && size == 0, "another rank's segment of an MPI_Win_allocate window is not shared");
    }
    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
    int rank, n, wn;
    MPI_Comm comm;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm));
    MPI_Comm_size(comm, &n);
    CHECK_EQ(wn, n, "every rank on this host");
    MPI_Comm_rank(comm, &rank);

    test_main_window(comm, rank, n);
    test_units(comm, rank, n);
    test_noncontig(comm, rank, n);
    test_empty(comm);
    /* on MPI_COMM_SELF: a window of one */
    test_noncontig(MPI_COMM_SELF, 0, 1);
    test_errors(comm, rank, n);

    CHECK_MPI(MPI_Comm_free(&comm));
    return tc_finish(NAME);
}

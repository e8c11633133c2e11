/*
 * rma.c - MPI one-sided communication, every byte checked.
 *
 * Ranks: 2 or more.
 *   fence:      each rank puts a block into its right neighbour's window and
 *               gets one from its left neighbour (contiguous, and a strided
 *               MPI_Type_vector on both sides), checked after the fence.
 *   accumulate: every rank adds into rank 0's counters (MPI_SUM) 50 times;
 *               the totals are exact (accumulates are atomic per element).
 *   lock:       exclusive-lock read-modify-write of a shared counter with
 *               MPI_Get + MPI_Put, 20 times per rank: no update lost.
 *   fetch_and_op / compare_and_swap under lock_all + flush: a ticket
 *               counter (every ticket handed out once) and a CAS that only
 *               one rank wins.
 *   get_accumulate with MPI_NO_OP reads atomically.
 *   PSCW:       rank 0 exposes to all, the others put their rank in.
 *   dynamic:    MPI_Win_create_dynamic + MPI_Win_attach, addresses sent in
 *               a message, put and get at absolute addresses.
 *   attributes: MPI_WIN_BASE, SIZE, DISP_UNIT, CREATE_FLAVOR.
 *   errors (MPI_ERRORS_RETURN on the window): out of range ->
 *               MPI_ERR_RMA_RANGE, outside an epoch -> MPI_ERR_RMA_SYNC,
 *               bad lock type -> MPI_ERR_LOCKTYPE, bad rank -> MPI_ERR_RANK,
 *               negative displacement -> MPI_ERR_DISP; compare-and-swap
 *               of MPI_DOUBLE / MPI_FLOAT and fetch-and-op of a derived
 *               datatype -> MPI_ERR_TYPE; a lock inside an MPI_Win_start
 *               epoch, or a start inside a lock epoch -> MPI_ERR_RMA_SYNC;
 *               a call on MPI_WIN_NULL -> MPI_ERR_WIN through
 *               MPI_COMM_SELF's handler.
 */
#include "check.h"

#define NAME "rma"
#define N 1024

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");
    int right = (rank + 1) % n, left = (rank + n - 1) % n;

    /* ---- fence: put to the right, get from the left */
    int *mem = calloc(4 * N, sizeof(int));
    int *got = calloc(4 * N, sizeof(int));
    for (int i = 0; i < N; i++)
        mem[i] = rank * 100000 + i; /* exposed: first N ints */
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mem, 4 * N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int *src = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        src[i] = rank * 7 + i * 3;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(src, N, MPI_INT, right, N, N, MPI_INT, win));       /* into [N, 2N) */
    CHECK_MPI(MPI_Get(got, N, MPI_INT, left, 0, N, MPI_INT, win));        /* from [0, N) */
    /* Strided: every other int of src into [2N, 4N) at stride 2 on the target. */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(N / 2, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    CHECK_MPI(MPI_Put(src, 1, vec, right, 2 * N, 1, vec, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) {
        CHECK_EQ(left * 7 + i * 3, mem[N + i], "put element %d", i);
        CHECK_EQ(left * 100000 + i, got[i], "get element %d", i);
    }
    for (int i = 0; i < N; i += 2)
        CHECK_EQ(left * 7 + i * 3, mem[2 * N + i], "strided put element %d", i);
    for (int i = 1; i < N; i += 2)
        CHECK_EQ(0, mem[2 * N + i], "strided put left element %d alone", i);
    /* Strided get into a strided origin buffer. */
    int *sgot = calloc(N, sizeof(int));
    CHECK_MPI(MPI_Get(sgot, 1, vec, left, 2 * N, 1, vec, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    int left2 = (left + n - 1) % n;
    for (int i = 0; i < N; i += 2)
        CHECK_EQ(left2 * 7 + i * 3, sgot[i], "strided get element %d", i);
    for (int i = 1; i < N; i += 2)
        CHECK_EQ(0, sgot[i], "strided get left element %d alone", i);

    /* ---- accumulate into rank 0 */
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0)
        memset(mem, 0, 4 * N * sizeof(int));
    CHECK_MPI(MPI_Win_fence(0, win));
    int ones[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int k = 0; k < 50; k++)
        CHECK_MPI(MPI_Accumulate(ones, 8, MPI_INT, 0, 0, 8, MPI_INT, MPI_SUM, win));
    /* Ends the fence epochs: lock epochs follow. */
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    if (rank == 0)
        for (int i = 0; i < 8; i++)
            CHECK_EQ(50 * n * (i + 1), mem[i], "accumulated counter %d", i);

    /* ---- exclusive lock: get-modify-put of mem[100] at rank 0 */
    for (int k = 0; k < 20; k++) {
        int v = -1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_INT, 0, 100, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v += 1;
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT, 0, 100, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int v = -1;
        CHECK_MPI(MPI_Get(&v, 1, MPI_INT, 0, 100, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        CHECK_EQ(20 * n, v, "lock-protected counter");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* ---- fetch_and_op tickets and compare_and_swap under lock_all */
    CHECK_MPI(MPI_Win_lock_all(0, win));
    long long tickets[10];
    long long one = 1;
    /* rank 0's mem[200..] as a long long counter, zero from the memset. */
    for (int k = 0; k < 10; k++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &tickets[k], MPI_LONG_LONG, 0, 200, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
    }
    int mine = rank + 1, expect0 = 0, old = -1;
    CHECK_MPI(MPI_Compare_and_swap(&mine, &expect0, &old, MPI_INT, 0, 300, win));
    CHECK_MPI(MPI_Win_flush_all(win));
    int peek = -1, dummy = 0;
    CHECK_MPI(MPI_Get_accumulate(&dummy, 1, MPI_INT, &peek, 1, MPI_INT, 0, 300, 1, MPI_INT, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK(peek >= 1 && peek <= n, "CAS winner %d", peek);
    CHECK(old == 0 ? peek == rank + 1 : old == peek, "CAS saw %d, winner %d", old, peek);
    for (int k = 1; k < 10; k++)
        CHECK(tickets[k] > tickets[k - 1], "tickets increase (%lld then %lld)", tickets[k - 1], tickets[k]);
    /* All tickets are distinct: gather and check 0..10n-1 each once. */
    long long *all = malloc(sizeof(long long) * 10 * n);
    MPI_Allgather(tickets, 10, MPI_LONG_LONG, all, 10, MPI_LONG_LONG, MPI_COMM_WORLD);
    char *seen = calloc(10 * n, 1);
    for (int i = 0; i < 10 * n; i++) {
        CHECK(all[i] >= 0 && all[i] < 10 * n, "ticket %lld in range", all[i]);
        CHECK(!seen[all[i]], "ticket %lld handed out twice", all[i]);
        seen[all[i]] = 1;
    }

    /* ---- errors, with MPI_ERRORS_RETURN on the window */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int rc = MPI_Put(src, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    tc_expect_class(rc, MPI_ERR_RMA_SYNC, "put outside an epoch");
    CHECK_MPI(MPI_Win_fence(0, win));
    rc = MPI_Put(src, 8, MPI_INT, right, 4 * N - 4, 8, MPI_INT, win);
    tc_expect_class(rc, MPI_ERR_RMA_RANGE, "put beyond the window");
    rc = MPI_Put(src, 1, MPI_INT, n, 0, 1, MPI_INT, win);
    tc_expect_class(rc, MPI_ERR_RANK, "put to rank n");
    rc = MPI_Get(got, 1, MPI_INT, right, -1, 1, MPI_INT, win);
    tc_expect_class(rc, MPI_ERR_DISP, "negative displacement");
    CHECK_MPI(MPI_Put(src, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    rc = MPI_Win_lock(12345, 0, 0, win);
    tc_expect_class(rc, MPI_ERR_LOCKTYPE, "bad lock type");
    rc = MPI_Win_unlock(0, win);
    tc_expect_class(rc, MPI_ERR_RMA_SYNC, "unlock without lock");
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    double dv = 1.0, dc = 0.0, dr = -1.0;
    rc = MPI_Compare_and_swap(&dv, &dc, &dr, MPI_DOUBLE, right, 0, win);
    tc_expect_class(rc, MPI_ERR_TYPE, "compare-and-swap of MPI_DOUBLE");
    float fv = 1.0f, fc = 0.0f, fr = -1.0f;
    rc = MPI_Compare_and_swap(&fv, &fc, &fr, MPI_FLOAT, right, 0, win);
    tc_expect_class(rc, MPI_ERR_TYPE, "compare-and-swap of MPI_FLOAT");
    MPI_Datatype two_apart;
    CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &two_apart));
    CHECK_MPI(MPI_Type_commit(&two_apart));
    int fop_in[3] = {1, 1, 1}, fop_out[3] = {0, 0, 0};
    rc = MPI_Fetch_and_op(fop_in, fop_out, two_apart, right, 0, MPI_SUM, win);
    tc_expect_class(rc, MPI_ERR_TYPE, "fetch-and-op of a derived datatype");
    rc = MPI_Win_start(MPI_GROUP_EMPTY, 0, win);
    tc_expect_class(rc, MPI_ERR_RMA_SYNC, "MPI_Win_start inside a lock epoch");
    CHECK_MPI(MPI_Win_unlock(right, win));
    CHECK_MPI(MPI_Type_free(&two_apart));
    MPI_Group world_group;
    CHECK_MPI(MPI_Win_get_group(win, &world_group));
    CHECK_MPI(MPI_Win_post(world_group, 0, win));
    CHECK_MPI(MPI_Win_start(world_group, 0, win));
    rc = MPI_Win_lock(MPI_LOCK_SHARED, right, MPI_MODE_NOCHECK, win);
    tc_expect_class(rc, MPI_ERR_RMA_SYNC, "MPI_Win_lock inside an MPI_Win_start epoch");
    rc = MPI_Win_lock_all(0, win);
    tc_expect_class(rc, MPI_ERR_RMA_SYNC, "MPI_Win_lock_all inside an MPI_Win_start epoch");
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    CHECK_MPI(MPI_Group_free(&world_group));

    /* ---- attributes */
    void *attr;
    int flag = 0;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &attr, &flag));
    CHECK(flag && attr == mem, "MPI_WIN_BASE");
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &attr, &flag));
    CHECK(flag && *(MPI_Aint *)attr == (MPI_Aint)(4 * N * sizeof(int)), "MPI_WIN_SIZE");
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &attr, &flag));
    CHECK(flag && *(int *)attr == (int)sizeof(int), "MPI_WIN_DISP_UNIT");
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &attr, &flag));
    CHECK(flag && *(int *)attr == MPI_WIN_FLAVOR_CREATE, "MPI_WIN_CREATE_FLAVOR");
    CHECK_MPI(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "freed window handle");
    /* An invalid window has no handler of its own: the error goes to
     * MPI_COMM_SELF's, as for an invalid communicator. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Put(&rank, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_WIN,
                    "MPI_Put on MPI_WIN_NULL");
    tc_expect_class(MPI_Win_fence(0, win), MPI_ERR_WIN, "MPI_Win_fence on MPI_WIN_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));

    /* ---- PSCW on an allocated window */
    int *abase = NULL;
    CHECK_MPI(MPI_Win_allocate(n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &abase, &win));
    for (int i = 0; i < n; i++)
        CHECK_EQ(0, abase[i], "allocated window zeroed at %d", i);
    MPI_Group world, g0, others;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero = 0;
    MPI_Group_incl(world, 1, &zero, &g0);
    MPI_Group_excl(world, 1, &zero, &others);
    if (rank == 0) {
        abase[0] = -7;
        CHECK_MPI(MPI_Win_post(others, 0, win));
        CHECK_MPI(MPI_Win_wait(win));
        CHECK_EQ(-7, abase[0], "rank 0's own slot");
        for (int i = 1; i < n; i++)
            CHECK_EQ(i * 11, abase[i], "PSCW slot %d", i);
    } else {
        int v = rank * 11;
        CHECK_MPI(MPI_Win_start(g0, 0, win));
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT, 0, rank, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_complete(win));
    }
    CHECK_MPI(MPI_Win_free(&win));

    /* ---- dynamic window */
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    double *dyn = calloc(64, sizeof(double));
    CHECK_MPI(MPI_Win_attach(win, dyn, 64 * sizeof(double)));
    MPI_Aint mine_addr, right_addr;
    MPI_Get_address(dyn, &mine_addr);
    MPI_Sendrecv(&mine_addr, 1, MPI_AINT, left, 9, &right_addr, 1, MPI_AINT, right, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    double vals[4] = {rank + 0.25, rank + 0.5, rank + 0.75, rank + 1.0};
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    CHECK_MPI(MPI_Put(vals, 4, MPI_DOUBLE, right, right_addr + 8 * sizeof(double), 4, MPI_DOUBLE, win));
    CHECK_MPI(MPI_Win_unlock(right, win));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++)
        CHECK(dyn[8 + i] == left + 0.25 * (i + 1), "dynamic put element %d: %g", i, dyn[8 + i]);
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    rc = MPI_Put(vals, 4, MPI_DOUBLE, right, right_addr + 62 * sizeof(double), 4, MPI_DOUBLE, win);
    if (rc == MPI_SUCCESS) /* only the target can tell: reported at completion */
        rc = MPI_Win_unlock(right, win);
    else
        CHECK_MPI(MPI_Win_unlock(right, win));
    tc_expect_class(rc, MPI_ERR_RMA_RANGE, "put beyond attached memory");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_detach(win, dyn));
    CHECK_MPI(MPI_Win_free(&win));

    MPI_Type_free(&vec);
    free(mem), free(got), free(src), free(sgot), free(all), free(seen), free(dyn);
    MPI_Group_free(&world), MPI_Group_free(&g0), MPI_Group_free(&others);
    tc_finish(NAME);
    return 0;
}

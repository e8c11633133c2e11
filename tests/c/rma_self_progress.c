/*
 * rma_self_progress.c - a target that only accesses its own window still
 * serves the other ranks' passive-target operations.
 *
 * Ranks: 2 or more. Rank 0 waits for the others' one-sided writes to its
 * window by reading its own window in a loop of passive-target calls that
 * target itself only (as MPICH's rma/linked_list_* tests do while chasing a
 * list's tail); it makes no other MPI call meanwhile, and its self-targeted
 * operations complete at once. MPI requires progress inside those calls, so
 * the others' writes (and the lock grants they wait for) must be carried out
 * there; a loop that never sees them fails after 10 s instead of hanging.
 *
 *   nocheck:   shared locks with MPI_MODE_NOCHECK (no lock is asked for);
 *              the others MPI_Fetch_and_op (MPI_REPLACE) their value in,
 *              rank 0 reads with MPI_Fetch_and_op (MPI_NO_OP).
 *   exclusive: exclusive locks; the others MPI_Put their value in once rank
 *              0 grants their lock, rank 0 reads with MPI_Get.
 *   lock_all:  MPI_Win_lock_all; the others MPI_Accumulate (MPI_SUM) and
 *              flush, rank 0 reads with MPI_Get_accumulate (MPI_NO_OP) and
 *              MPI_Win_flush on itself.
 */
#include "check.h"

#define NAME "rma_self_progress"
/* Seconds rank 0 polls before it declares the others' operations lost. */
#define LIMIT 10.0

enum { NOCHECK, EXCLUSIVE, LOCK_ALL, PHASES };

static const char *phase_name[PHASES] = {"nocheck", "exclusive", "lock_all"};

/* The value rank r writes in phase p, and the window cell it goes to. */
static long value(int p, int r) { return 1000L * (p + 1) + r; }
static MPI_Aint cell(int p, int r, int n) { return (MPI_Aint)p * n + r; }

/* Rank 0 reads cell `c` of its own window by the phase's access pattern. */
static long read_self(int p, MPI_Aint c, MPI_Win win)
{
    long v = -1;
    switch (p) {
    case NOCHECK:
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win));
        CHECK_MPI(MPI_Fetch_and_op(NULL, &v, MPI_LONG, 0, c, MPI_NO_OP, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        break;
    case EXCLUSIVE:
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, 0, c, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        break;
    default: /* LOCK_ALL, inside the epoch */
        CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_LONG, &v, 1, MPI_LONG, 0, c, 1, MPI_LONG, MPI_NO_OP, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        break;
    }
    return v;
}

/* Another rank writes its value for phase p into rank 0's window. */
static void write_to_target(int p, int rank, int n, MPI_Win win)
{
    long v = value(p, rank), old = -1;
    MPI_Aint c = cell(p, rank, n);
    switch (p) {
    case NOCHECK:
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win));
        CHECK_MPI(MPI_Fetch_and_op(&v, &old, MPI_LONG, 0, c, MPI_REPLACE, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        CHECK_EQ(0, old, "nocheck: the cell's previous contents");
        break;
    case EXCLUSIVE:
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, c, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        break;
    default: /* LOCK_ALL, inside the epoch */
        CHECK_MPI(MPI_Accumulate(&v, 1, MPI_LONG, 0, c, 1, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        break;
    }
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");

    long *base = NULL;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)(PHASES * n * sizeof(long)), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                               &base, &win));
    for (int i = 0; i < PHASES * n; i++)
        base[i] = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    for (int p = 0; p < PHASES; p++) {
        if (p == LOCK_ALL)
            CHECK_MPI(MPI_Win_lock_all(0, win));
        if (rank == 0) {
            double start = MPI_Wtime();
            for (int r = 1; r < n; r++) {
                long v;
                while ((v = read_self(p, cell(p, r, n), win)) == 0)
                    tc_deadline(start, LIMIT, phase_name[p]);
                CHECK_EQ(value(p, r), v, "%s: cell of rank %d", phase_name[p], r);
            }
        } else {
            /* Rank 0 is in its loop by then: the writes must be served there. */
            tc_sleep_ms(100);
            write_to_target(p, rank, n, win);
        }
        if (p == LOCK_ALL)
            CHECK_MPI(MPI_Win_unlock_all(win));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    CHECK_MPI(MPI_Win_free(&win));
    return tc_finish(NAME);
}

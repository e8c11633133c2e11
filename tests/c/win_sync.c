/*
 * win_sync.c - MPI_Win_sync makes one-sided writes and local stores visible
 * to polling loops in a passive-target epoch.
 *
 * Ranks: 2 or more, all in one MPI_Win_lock_all epoch on a window of longs.
 *
 *   arrive:    every other rank MPI_Puts its value into rank 0's window and
 *              flushes; rank 0 polls its own memory with plain loads and
 *              MPI_Win_sync between them, and makes no other MPI call. The
 *              puts are carried out by rank 0's progress engine, so
 *              MPI_Win_sync must drive progress or the loop never ends.
 *   pingpong:  for each other rank in turn, ROUNDS rounds: the rank puts
 *              round i into rank 0's cell; rank 0 sees it by MPI_Win_sync
 *              polling, then stores the reply i with a plain store followed
 *              by MPI_Win_sync; the rank reads the reply with MPI_Get and
 *              MPI_Win_flush until it shows up.
 *
 * A loop that never sees the value fails after LIMIT seconds instead of
 * hanging.
 */
#include "check.h"

#define NAME "win_sync"
#define LIMIT 10.0
#define ROUNDS 200

/* Window cells: arrive[n], ping[n], pong[n]. */
enum { ARRIVE, PING, PONG, CELLS };

static MPI_Aint cell(int kind, int r, int n) { return (MPI_Aint)kind * n + r; }

/* Rank 0 waits by MPI_Win_sync polling until its cell `c` holds `want`. */
static void wait_local(volatile long *base, MPI_Aint c, long want, MPI_Win win, const char *what)
{
    double start = MPI_Wtime();
    for (;;) {
        CHECK_MPI(MPI_Win_sync(win));
        if (base[c] == want)
            return;
        tc_deadline(start, LIMIT, what);
    }
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");

    long *mem = NULL;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)(CELLS * n * sizeof(long)), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                               &mem, &win));
    volatile long *base = mem;
    for (int i = 0; i < CELLS * n; i++)
        base[i] = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));

    /* arrive */
    if (rank == 0) {
        for (int r = 1; r < n; r++)
            wait_local(base, cell(ARRIVE, r, n), 100L + r, win, "arrive: a put never showed up");
    } else {
        long v = 100L + rank;
        /* Rank 0 is polling by then: the put must be served there. */
        tc_sleep_ms(100);
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, cell(ARRIVE, rank, n), 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* pingpong */
    for (int r = 1; r < n; r++) {
        for (long i = 1; i <= ROUNDS; i++) {
            if (rank == 0) {
                wait_local(base, cell(PING, r, n), i, win, "pingpong: a ping never showed up");
                base[cell(PONG, r, n)] = i;
                CHECK_MPI(MPI_Win_sync(win));
            } else if (rank == r) {
                CHECK_MPI(MPI_Put(&i, 1, MPI_LONG, 0, cell(PING, r, n), 1, MPI_LONG, win));
                CHECK_MPI(MPI_Win_flush(0, win));
                double start = MPI_Wtime();
                long got = 0;
                while (got != i) {
                    CHECK_MPI(MPI_Get(&got, 1, MPI_LONG, 0, cell(PONG, r, n), 1, MPI_LONG, win));
                    CHECK_MPI(MPI_Win_flush(0, win));
                    CHECK(got == i || got == i - 1, "pingpong: reply %ld in round %ld", got, i);
                    tc_deadline(start, LIMIT, "pingpong: a reply never showed up");
                }
            }
        }
    }

    CHECK_MPI(MPI_Win_unlock_all(win));
    /* The local memory agrees with what was written. */
    if (rank == 0)
        for (int r = 1; r < n; r++) {
            CHECK_EQ(100L + r, base[cell(ARRIVE, r, n)], "arrive cell of rank %d", r);
            CHECK_EQ(ROUNDS, base[cell(PING, r, n)], "ping cell of rank %d", r);
        }
    CHECK_MPI(MPI_Win_free(&win));
    return tc_finish(NAME);
}

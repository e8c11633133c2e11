/*
 * fault_inject.c - one rank fails at a chosen step of a collective-heavy or a
 * one-sided-heavy loop, while the others are in the middle of theirs.
 *
 * Usage: fault_inject WORKLOAD VICTIM FAULT STEP
 *   WORKLOAD  coll (allreduce, bcast small and large, alltoall, barrier,
 *             iallreduce) or rma (puts, gets and accumulates in fence
 *             epochs, passive-target gets and accumulates)
 *   VICTIM    the rank that fails
 *   FAULT     kill (raise SIGKILL), stop (raise SIGSTOP) or exit (_exit(3)
 *             without MPI_Finalize)
 *   STEP      the step (0 .. 6 x ITERS - 1) before which it fails
 *
 * Every rank prints "rank R pid P" first. The victim prints
 *     rank V: fault FAULT at <seconds since the epoch>
 * and fails. Results are checked at every step, so a rank that went on with
 * wrong data would FAIL. Run to the end (STEP past the last step), the
 * program prints PASS fault_inject.
 *
 * The harness (crates/tandem-cli/tests/faults.rs) expects a non-zero exit
 * status soon after the fault (kill, exit) or at the job's timeout (stop),
 * a message naming the victim, and no process left.
 */
#include "check.h"
#include <signal.h>
#include <unistd.h>

#define NAME "fault_inject"
#define ITERS 60
#define STEPS 6
#define BIG 40000

static int rank, nranks;

static void maybe_fail(int victim, const char *fault, int step, int at)
{
    if (rank != victim || step != at)
        return;
    printf("rank %d: fault %s at %.6f\n", rank, fault, tc_epoch());
    fflush(stdout);
    if (!strcmp(fault, "kill"))
        raise(SIGKILL);
    else if (!strcmp(fault, "stop"))
        raise(SIGSTOP);
    else
        _exit(3);
}

static void coll_step(int it, int s, long *big, long *row_in, long *row_out)
{
    long mine = rank + 1 + it, sum = 0;
    long expect = (long)nranks * (nranks + 1) / 2 + (long)nranks * it;
    switch (s) {
    case 0:
        CHECK_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == expect, "allreduce %ld at iteration %d (expected %ld)", sum, it, expect);
        break;
    case 1: {
        long v = rank == it % nranks ? it * 7L : -1;
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_LONG, it % nranks, MPI_COMM_WORLD));
        CHECK(v == it * 7L, "bcast %ld at iteration %d", v, it);
        break;
    }
    case 2:
        for (int k = 0; k < BIG; k++)
            big[k] = rank == 0 ? (long)k * it : -1;
        CHECK_MPI(MPI_Bcast(big, BIG, MPI_LONG, 0, MPI_COMM_WORLD));
        CHECK(big[BIG - 1] == (long)(BIG - 1) * it, "large bcast at iteration %d", it);
        break;
    case 3:
        for (int k = 0; k < nranks; k++)
            row_in[k] = rank * 1000L + k + it;
        CHECK_MPI(MPI_Alltoall(row_in, 1, MPI_LONG, row_out, 1, MPI_LONG, MPI_COMM_WORLD));
        for (int k = 0; k < nranks; k++)
            CHECK(row_out[k] == k * 1000L + rank + it, "alltoall block %d at iteration %d", k, it);
        break;
    case 4:
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        break;
    default: {
        MPI_Request req;
        CHECK_MPI(MPI_Iallreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        CHECK(sum == expect, "iallreduce %ld at iteration %d", sum, it);
        break;
    }
    }
}

static void rma_step(MPI_Win win, long *base, int it, int s)
{
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    long v = rank * 100L + it, got = -1, one = 1;
    switch (s) {
    case 0:
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, right, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK(base[0] == left * 100L + it, "put from the left at iteration %d: %ld", it, base[0]);
        break;
    case 1:
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK_MPI(MPI_Get(&got, 1, MPI_LONG, left, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK(got == ((left + nranks - 1) % nranks) * 100L + it, "get at iteration %d: %ld", it, got);
        break;
    case 2:
        if (rank == 0)
            base[1] = 0;
        CHECK_MPI(MPI_Win_fence(0, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, 0, 1, 1, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Win_fence(0, win));
        if (rank == 0)
            CHECK(base[1] == nranks, "accumulate at iteration %d: %ld", it, base[1]);
        break;
    case 3:
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
        CHECK_MPI(MPI_Get(&got, 1, MPI_LONG, right, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(right, win));
        CHECK(got == rank * 100L + it, "passive get at iteration %d: %ld", it, got);
        break;
    case 4:
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, 0, 2, 1, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
        break;
    default:
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        break;
    }
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    if (argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: %s coll|rma VICTIM kill|stop|exit STEP\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *workload = argv[1], *fault = argv[3];
    int victim = atoi(argv[2]), at = atoi(argv[4]);
    printf("rank %d pid %ld\n", rank, (long)getpid());
    fflush(stdout);

    long *big = malloc(BIG * sizeof(long));
    long *row_in = malloc(nranks * sizeof(long)), *row_out = malloc(nranks * sizeof(long));
    long *base = NULL;
    MPI_Win win = MPI_WIN_NULL;
    int rma = !strcmp(workload, "rma");
    if (rma) {
        CHECK_MPI(MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
                                   &base, &win));
        memset(base, 0, 4 * sizeof(long));
    }
    for (int it = 0; it < ITERS; it++) {
        for (int s = 0; s < STEPS; s++) {
            maybe_fail(victim, fault, it * STEPS + s, at);
            if (rma)
                rma_step(win, base, it, s);
            else
                coll_step(it, s, big, row_in, row_out);
        }
    }
    if (rma) {
        CHECK_MPI(MPI_Win_fence(0, win));
        if (rank == 0)
            CHECK(base[2] == (long)nranks * ITERS, "passive accumulates: %ld", base[2]);
        CHECK_MPI(MPI_Win_free(&win));
    }
    free(big);
    free(row_in);
    free(row_out);
    return tc_finish(NAME);
}

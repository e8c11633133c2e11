/*
 * rma_request.c - request-based one-sided operations (MPI_Rput, MPI_Rget,
 * MPI_Raccumulate, MPI_Rget_accumulate).
 *
 * Ranks: 2 or more; each rank works on its right neighbour's window inside
 * one MPI_Win_lock_all epoch.
 *
 *   1. MPI_Rput of a block (and of a strided vector), MPI_Wait, then
 *      MPI_Rget of it back: the data read is what was written;
 *   2. MPI_Raccumulate (MPI_SUM) by every rank into rank 0's counter, then
 *      after a barrier MPI_Rget_accumulate (MPI_NO_OP) reads the exact sum;
 *   3. MPI_PROC_NULL gives a request that is complete at once;
 *   4. with MPI_ERRORS_RETURN, MPI_Rput outside a passive-target epoch gives
 *      MPI_ERR_RMA_SYNC, and a NULL request MPI_ERR_ARG.
 */
#include "check.h"

#define NAME "rma_request"
#define N 256

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");
    int right = (rank + 1) % n;

    int *w;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)(3 * N) * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    for (int i = 0; i < 3 * N; i++)
        w[i] = -1;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));

    /* 1 */
    int out[N], back[N];
    MPI_Request r;
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(N / 2, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    for (int i = 0; i < N; i++)
        out[i] = rank * 10000 + i;
    CHECK_MPI(MPI_Rput(out, N, MPI_INT, right, 0, N, MPI_INT, win, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL, "a waited request is MPI_REQUEST_NULL");
    CHECK_MPI(MPI_Rput(out, N / 2, MPI_INT, right, N, 1, vec, win, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++)
        back[i] = -7;
    CHECK_MPI(MPI_Rget(back, N, MPI_INT, right, 0, N, MPI_INT, win, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++)
        CHECK_EQ(out[i], back[i], "Rget of the Rput block, element %d", i);
    CHECK_MPI(MPI_Rget(back, N / 2, MPI_INT, right, N, 1, vec, win, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < N / 2; i++)
        CHECK_EQ(out[i], back[i], "Rget of the Rput vector, element %d", i);

    /* 2 */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int zero = 0;
        CHECK_MPI(MPI_Rput(&zero, 1, MPI_INT, 0, 2 * N, 1, MPI_INT, win, &r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int one = rank + 1, sum = -1;
    CHECK_MPI(MPI_Raccumulate(&one, 1, MPI_INT, 0, 2 * N, 1, MPI_INT, MPI_SUM, win, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Rget_accumulate(NULL, 0, MPI_INT, &sum, 1, MPI_INT, 0, 2 * N, 1, MPI_INT, MPI_NO_OP, win, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_EQ(n * (n + 1) / 2, sum, "the counter after every rank's MPI_Raccumulate");

    /* 3 */
    int flag = 0;
    CHECK_MPI(MPI_Rput(out, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win, &r));
    CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "an MPI_PROC_NULL request is complete at once");
    CHECK_MPI(MPI_Win_unlock_all(win));

    /* 4 */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Rput(out, 1, MPI_INT, right, 0, 1, MPI_INT, win, &r), MPI_ERR_RMA_SYNC,
                    "MPI_Rput outside an epoch");
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    tc_expect_class(MPI_Rget(back, 1, MPI_INT, right, 0, 1, MPI_INT, win, NULL), MPI_ERR_ARG,
                    "MPI_Rget with a NULL request");
    CHECK_MPI(MPI_Win_unlock(right, win));

    MPI_Type_free(&vec);
    CHECK_MPI(MPI_Win_free(&win));
    return tc_finish(NAME);
}

/*
 * replica_refusals.c - what a job with replicas refuses, with the standard
 * error class and without harm to what follows: window creation gives
 * MPI_ERR_UNSUPPORTED_OPERATION, and point-to-point still works after it.
 */
#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int buf[4] = {0};
    MPI_Win win = MPI_WIN_NULL;
    int rc = MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_UNSUPPORTED_OPERATION) {
        fprintf(stderr, "rank %d: FAIL MPI_Win_create (expected class %d got %d)\n", rank,
                MPI_ERR_UNSUPPORTED_OPERATION, cls);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int token = rank, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 5, &got, 1, MPI_INT,
                 (rank + size - 1) % size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got != (rank + size - 1) % size) {
        fprintf(stderr, "rank %d: FAIL ring after the refusal (got %d)\n", rank, got);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("PASS replica_refusals\n");
    return 0;
}

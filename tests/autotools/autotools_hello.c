/* autotools_hello.c - built by tests/autotools (configure with CC=mpicc).
 * Rank 0 checks an MPI_Reduce of every rank's rank and prints
 * "PASS autotools_hello". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, sum = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    int ok = rank != 0 || sum == size * (size - 1) / 2;
    if (rank == 0)
        printf(ok ? "PASS autotools_hello (%d ranks)\n" : "autotools_hello: FAIL on %d ranks\n", size);
    MPI_Finalize();
    return ok ? 0 : 1;
}

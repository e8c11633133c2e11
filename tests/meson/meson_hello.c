/* meson_hello.c - built by tests/meson/meson.build. Rank 0 gathers every
 * rank's rank and prints "PASS meson_hello" when they are all there. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, ok = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *all = malloc(sizeof(int) * (size_t)size);
    MPI_Gather(&rank, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < size; i++) ok &= all[i] == i;
        printf(ok ? "PASS meson_hello (%d ranks)\n" : "meson_hello: FAIL on %d ranks\n", size);
    }
    free(all);
    MPI_Finalize();
    return ok ? 0 : 1;
}

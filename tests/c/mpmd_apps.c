/*
 * mpmd_apps.c - one program of an MPMD job (tandem run -n 2 ./mpmd_apps a :
 * -n 3 ./mpmd_apps b): every rank prints its rank, the job's size, its
 * MPI_APPNUM and its first argument, after an allreduce over all programs'
 * ranks checks that they form one MPI_COMM_WORLD.
 * Prints: "rank R of N app A arg X".
 */
#include "check.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, flag = 0, *appnum = NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
    CHECK(flag, "MPI_APPNUM is not set");
    int sum = 0;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK_EQ(size * (size - 1) / 2, sum, "allreduce over every program's ranks");
    printf("rank %d of %d app %d arg %s\n", rank, size, *appnum, argc > 1 ? argv[1] : "-");
    MPI_Finalize();
    return 0;
}

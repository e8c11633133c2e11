/* mpi_hello.c - built by tests/cmake/CMakeLists.txt through find_package(MPI).
 * Every rank contributes its rank to an MPI_Allreduce; rank 0 checks the sum
 * and prints "PASS cmake_hello". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, sum = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (sum == size * (size - 1) / 2)
            printf("PASS cmake_hello (%d ranks)\n", size);
        else
            printf("cmake_hello: FAIL sum %d on %d ranks\n", sum, size);
    }
    MPI_Finalize();
    return sum == size * (size - 1) / 2 ? 0 : 1;
}

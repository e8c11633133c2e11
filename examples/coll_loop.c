/*
 * coll_loop.c - the time per call of one small collective called back to
 * back: what a solver that reduces a residual every iteration pays.
 *
 *     tandem run -n N ./coll_loop [CALLS [OP [BYTES]]]
 *
 * OP is barrier, bcast, allreduce or alltoall (default allreduce); BYTES
 * per rank (per pair for alltoall; default 8). Prints the slowest rank's
 * microseconds per call in each of three rounds of CALLS calls (default
 * 20000). Plain MPI (any MPI's mpicc builds it). The allreduce result is
 * checked.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long calls = argc > 1 ? atol(argv[1]) : 20000;
    const char *op = argc > 2 ? argv[2] : "allreduce";
    int bytes = argc > 3 ? atoi(argv[3]) : 8;
    int ints = bytes / (int)sizeof(int) > 0 ? bytes / (int)sizeof(int) : 1;
    if (calls < 1 || bytes < 0 || (strcmp(op, "barrier") && strcmp(op, "bcast") && strcmp(op, "allreduce") &&
                                   strcmp(op, "alltoall"))) {
        if (rank == 0)
            fprintf(stderr, "usage: coll_loop [CALLS [barrier|bcast|allreduce|alltoall [BYTES]]]\n");
        MPI_Finalize();
        return 2;
    }
    size_t room = (size_t)size * (size_t)(bytes > (int)sizeof(int) * ints ? bytes : (int)sizeof(int) * ints);
    int *in = calloc(room, 1), *out = calloc(room, 1);
    if (in == NULL || out == NULL) {
        fprintf(stderr, "coll_loop: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < ints; i++)
        in[i] = rank + 1;
    for (int round = 0; round < 3; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long c = 0; c < calls; c++) {
            if (!strcmp(op, "barrier"))
                MPI_Barrier(MPI_COMM_WORLD);
            else if (!strcmp(op, "bcast"))
                MPI_Bcast(in, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
            else if (!strcmp(op, "allreduce"))
                MPI_Allreduce(in, out, ints, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            else
                MPI_Alltoall(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, MPI_COMM_WORLD);
        }
        double us = (MPI_Wtime() - t0) / (double)calls * 1e6, slowest;
        MPI_Reduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (!strcmp(op, "allreduce") && out[0] != size * (size + 1) / 2) {
            fprintf(stderr, "rank %d: allreduce gave %d, expected %d\n", rank, out[0], size * (size + 1) / 2);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0)
            printf("%s %d B, %d ranks: %.3f us per call\n", op, bytes, size, slowest);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}

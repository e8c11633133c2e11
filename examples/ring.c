/*
 * ring.c - a token travels around all ranks; reports the time per hop.
 *
 *     tandem run -n 8 ./ring [HOPS]        (default 10000 hops)
 *
 * Plain MPI (any MPI's mpicc builds it). With more ranks than cores this
 * measures how well waiting ranks give the CPU to the one holding the token.
 * Every hop adds one to the token, so the final value is checked.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long hops = argc > 1 ? atol(argv[1]) : 10000;
    if (size < 2 || hops < size) {
        if (rank == 0)
            fprintf(stderr, "ring: needs at least 2 ranks and at least one hop per rank\n");
        MPI_Finalize();
        return size < 2 ? 0 : 1;
    }
    long laps = hops / size;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    long token = 0;
    /* One untimed lap so that every connection exists. */
    for (int warm = 0; warm < 2; warm++) {
        double t0 = MPI_Wtime();
        long n = warm == 0 ? 1 : laps;
        for (long lap = 0; lap < n; lap++) {
            if (rank == 0) {
                token++;
                MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
                MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                token++;
                MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (warm == 1 && rank == 0) {
            long expect = (laps + 1) * size;
            if (token != expect) {
                fprintf(stderr, "ring: token is %ld, expected %ld\n", token, expect);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            printf("ring: %d ranks, %ld hops, %.2f us per hop, %.3f s in all\n", size, laps * size,
                   t / (double)(laps * size) * 1e6, t);
        }
    }
    MPI_Finalize();
    return 0;
}

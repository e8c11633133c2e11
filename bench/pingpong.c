/*
 * pingpong.c - round trip between ranks 0 and 1 (Ben Fredj & Renault, figure 1(a)).
 *
 * A message is sent only once the previous one has been received. Every
 * size is calibrated after a warm-up, then `repeat` rounds each time one
 * batch of every size for about `duration` seconds; every batch prints
 *   {"type":"sample","size":S,"rep":R,"iters":I,"n":N,"t":T}
 * with N = 2*I messages transmitted (I round trips) in T seconds, so the
 * latency L = T/N is half a round trip and the throughput is N*S/T.
 *
 * Parameters (NAME=VALUE): sizes=0,1,... duration=0.1 repeat=10 warmup=S
 * Build with any MPI (`mpicc -O2 pingpong.c`) or run through `tandem bench`.
 */
#include "bench.h"

static double pingpong(long size, long iters)
{
    long i;
    double t0 = MPI_Wtime();
    if (bench_rank == 0) {
        for (i = 0; i < iters; i++) {
            MPI_Send(bench_sbuf, (int)size, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(bench_rbuf, (int)size, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        for (i = 0; i < iters; i++) {
            MPI_Recv(bench_rbuf, (int)size, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(bench_sbuf, (int)size, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

#ifndef BENCH_BODY_ONLY /* rw_pingpong.c includes this file for the body alone */
int main(int argc, char **argv)
{
    return bench_pair_main(argc, argv, "pingpong", pingpong, 2, "1,64,4096,65536,1048576");
}
#endif

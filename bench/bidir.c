/*
 * bidir.c - bidirectional round trip between ranks 0 and 1 (Ben Fredj & Renault,
 * figure 1(b)): both ranks send to each other at the same time and wait
 * for both messages before the next exchange, which shows whether a library
 * uses both directions of a link at once.
 *
 * Every batch prints
 *   {"type":"sample","size":S,"rep":R,"iters":I,"n":N,"t":T}
 * with N = 2*I messages transmitted (one each way per exchange) in T
 * seconds on rank 0: L = T/N, aggregate throughput N*S/T.
 *
 * Parameters (NAME=VALUE): sizes=... duration=0.1 repeat=10 warmup=S
 */
#include "bench.h"

static double bidir(long size, long iters)
{
    long i;
    int peer = 1 - bench_rank;
    MPI_Request req[2];
    double t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        MPI_Irecv(bench_rbuf, (int)size, MPI_BYTE, peer, BENCH_TAG_DATA, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(bench_sbuf, (int)size, MPI_BYTE, peer, BENCH_TAG_DATA, MPI_COMM_WORLD, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    return MPI_Wtime() - t0;
}

#ifndef BENCH_BODY_ONLY /* rw_bidir.c includes this file for the body alone */
int main(int argc, char **argv)
{
    return bench_pair_main(argc, argv, "bidir", bidir, 2, "1,64,4096,65536,1048576");
}
#endif

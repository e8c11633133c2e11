/*
 * burst.c - rank 0 sends messages to rank 1 as fast as it can, regardless of
 * whether they have been received (Ben Fredj & Renault, figure 1(c)).
 *
 * Rank 0 keeps `window` non-blocking sends in flight (then waits for them
 * and starts the next window); rank 1 keeps as many receives posted. After
 * the last message rank 1 sends a zero-byte acknowledgement, and rank 0
 * stops its clock when that arrives, so the time covers every message
 * having been received. Every batch prints
 *   {"type":"sample","size":S,"rep":R,"iters":I,"n":N,"t":T}
 * with N = I*window messages in T seconds: L = T/N is the time per message
 * (the gap g of LogP for small messages), N*S/T the throughput.
 *
 * Parameters (NAME=VALUE): sizes=... duration=0.1 repeat=10 warmup=S window=64
 */
#include "bench.h"

#define MAX_WINDOW 1024

static long window = 64;
static MPI_Request reqs[MAX_WINDOW];

static void burst_params(void)
{
    window = bench_param_long("window", 64, 1, MAX_WINDOW);
    bench_pair_msgs = window;
}

static double burst(long size, long iters)
{
    long i, w;
    double t0 = MPI_Wtime();
    if (bench_rank == 0) {
        for (i = 0; i < iters; i++) {
            for (w = 0; w < window; w++)
                MPI_Isend(bench_sbuf, (int)size, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall((int)window, reqs, MPI_STATUSES_IGNORE);
        }
        MPI_Recv(NULL, 0, MPI_BYTE, 1, BENCH_TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (i = 0; i < iters; i++) {
            for (w = 0; w < window; w++)
                MPI_Irecv(bench_rbuf, (int)size, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall((int)window, reqs, MPI_STATUSES_IGNORE);
        }
        MPI_Send(NULL, 0, MPI_BYTE, 0, BENCH_TAG_SYNC, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t0;
}

#ifndef BENCH_BODY_ONLY /* rw_burst.c includes this file for the body alone */
int main(int argc, char **argv)
{
    bench_pair_params = burst_params;
    return bench_pair_main(argc, argv, "burst", burst, 1, "1,64,4096,65536,1048576");
}
#endif

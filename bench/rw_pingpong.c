/*
 * rw_pingpong.c - RWAPI round trip between ranks 0 and 1 (Ben Fredj & Renault, figure
 * 1(a), with remote writes): rank 0 writes `size` bytes into rank 1's block
 * (announced as rw.h describes); rank 1, on its arrival, writes the same
 * back. Output as pingpong.c: N = 2*I writes in T seconds.
 *
 * Parameters (NAME=VALUE): sizes=... duration=0.1 repeat=10 warmup=S
 * notify=flag|small
 */
#define BENCH_BODY_ONLY
#include "pingpong.c" /* pingpong(): MPI's round trip, timed alongside with=mpi */
#include "rw.h"

static double rw_pingpong(long size, long iters)
{
    long i;
    int peer = 1 - bench_rank;
    double t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        if (bench_rank == 0) {
            rw_send_data(peer, size);
            rw_wait_data(size);
        } else {
            rw_wait_data(size);
            rw_send_data(peer, size);
        }
        rw_round_done(size);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    rw_one_half = 1; /* each write waits for the peer's answer */
    rw_mpi_body = pingpong;
    bench_pair_params = rw_setup;
    return bench_pair_main(argc, argv, "rw_pingpong", rw_pingpong, 2, "1,64,4096,65536,1048576");
}

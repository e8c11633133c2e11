/*
 * rw_bidir.c - RWAPI bidirectional round trip (Ben Fredj & Renault, figure 1(b), with
 * remote writes): ranks 0 and 1 both write `size` bytes into the other's
 * block (announced as rw.h describes), then wait for the other's. Output
 * as bidir.c: N = 2*I writes in T seconds.
 *
 * Parameters (NAME=VALUE): sizes=... duration=0.1 repeat=10 warmup=S
 * notify=flag|small
 */
#define BENCH_BODY_ONLY
#include "bidir.c" /* bidir(): MPI's, timed alongside with=mpi */
#include "rw.h"

static double rw_bidir(long size, long iters)
{
    long i;
    int peer = 1 - bench_rank;
    double t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        rw_send_data(peer, size);
        rw_wait_data(size);
        rw_round_done(size);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    rw_mpi_body = bidir;
    bench_pair_params = rw_setup;
    return bench_pair_main(argc, argv, "rw_bidir", rw_bidir, 2, "1,64,4096,65536,1048576");
}

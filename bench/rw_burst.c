/*
 * rw_burst.c - RWAPI burst (Ben Fredj & Renault, figure 1(c), with remote writes):
 * rank 0 issues `window` writes into rank 1's block back to back, waits
 * until their source buffer is free (rwapi_issent), and repeats; after the
 * last batch it sends a small message, and stops its clock when rank 1's
 * answer arrives (rank 1 only drives progress and answers), so the time
 * covers every write having been deposited. Output as burst.c: N = I*window
 * writes in T seconds.
 *
 * Parameters (NAME=VALUE): sizes=... duration=0.1 repeat=10 warmup=S window=64
 * (notify is accepted and has no effect: only the final exchange notifies)
 */
#define BENCH_BODY_ONLY
#include "burst.c" /* burst() and its window: MPI's, timed alongside with=mpi */
#include "rw.h"

static rwapi_sid sids[MAX_WINDOW];

static void rw_burst_params(void)
{
    burst_params();
    rw_setup();
}

static double rw_burst(long size, long iters)
{
    long i, w;
    double t0 = MPI_Wtime();
    if (bench_rank == 0) {
        for (i = 0; i < iters; i++) {
            for (w = 0; w < window; w++)
                sids[w] = rw_write(1, size);
            for (w = 0; w < window; w++) {
                int r;
                while ((r = rwapi_issent(sids[w])) == 0)
                    ;
                rw_check(r, "rwapi_issent");
            }
        }
        rw_notify(1);
        rw_wait_notice();
    } else {
        rw_wait_notice();
        rw_notify(0);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    /* The target never reads what arrives: every write lands in one
     * destination as large as the largest, the memory MPI's burst receives
     * into (two alternating halves doubled the target's footprint, and at
     * 4 MiB overflowed its caches). */
    rw_one_half = 1;
    rw_mpi_body = burst;
    bench_pair_params = rw_burst_params;
    return bench_pair_main(argc, argv, "rw_burst", rw_burst, 1, "1,64,4096,65536,1048576");
}

/*
 * barrier_wait.c - what waiting ranks cost a rank that computes.
 *
 *     tandem run -n 8 ./barrier_wait [SECONDS]      (default 1)
 *
 * Rank 0 computes for about SECONDS (no MPI calls) while every other rank
 * waits in MPI_Barrier; then rank 0 joins the barrier. Rank 0 reports how
 * long its computation took, and the CPU time (user + system, from
 * getrusage) the waiters used meanwhile, summed and as a share of one core.
 * Run it with -n 1 for the computation's time alone. Plain MPI.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A fixed amount of work: about `seconds` on an idle core of this machine. */
static double compute(long iterations)
{
    volatile double x = 1.0;
    for (long i = 0; i < iterations; i++)
        x = x * 1.0000001 + 1e-9;
    return x;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    long iterations = (long)(seconds * 3.0e8);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        double t0 = now();
        double x = compute(iterations);
        double t = now() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
        double waiters = 0.0;
        for (int r = 1; r < size; r++) {
            double c;
            MPI_Recv(&c, 1, MPI_DOUBLE, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            waiters += c;
        }
        printf("barrier_wait: %d ranks, rank 0 computed for %.3f s (result %.3f); the %d waiters used %.3f s of CPU "
               "(%.1f%% of one core)\n",
               size, t, x, size - 1, waiters, t > 0 ? waiters / t * 100.0 : 0.0);
    } else {
        double c0 = cpu_seconds();
        MPI_Barrier(MPI_COMM_WORLD);
        double c = cpu_seconds() - c0;
        MPI_Send(&c, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}

/*
 * overlap.c - how much of a transfer a rank can spend computing: Doerfler & Brightwell's
 * post-work-wait method for one message size.
 *
 *     tandem run -n 2 ./overlap SIZE [--set progress=thread ...]
 *
 * For the receiver (rank 1: MPI_Irecv, compute, MPI_Wait, while rank 0 sends
 * at once with MPI_Send) and then the sender (rank 0: MPI_Isend, compute,
 * MPI_Wait, while rank 1 receives with MPI_Recv), the iteration time is
 * measured as the computation grows in steps of a tenth of the transfer
 * time. The transfer time is the mean iteration time while it stays below
 * 1.03 x the time without computation; the series stops when it exceeds
 * 1.5 x that. At the stop point, overhead = iteration time - the time the
 * same computation takes without messaging (measured then, as Doerfler & Brightwell
 * does: a busy machine makes it differ from the calibration), and
 * availability = 1 - overhead / transfer time: the share of the transfer
 * the rank could have spent computing. Each point is the median of 7
 * repetitions. Plain MPI (any mpicc builds it).
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 7
#define MAX_STEPS 60

static volatile double sink;
static double loops_per_us;

static void compute(double us)
{
    long n = (long)(us * loops_per_us);
    double x = 1.0;
    for (long i = 0; i < n; i++)
        x = x * 1.0000001 + 1e-9;
    sink = x;
}

static void calibrate(void)
{
    long n = 20000000;
    double t0 = MPI_Wtime();
    double x = 1.0;
    for (long i = 0; i < n; i++)
        x = x * 1.0000001 + 1e-9;
    sink = x;
    loops_per_us = n / ((MPI_Wtime() - t0) * 1e6);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One point: median iteration time (us) on the measuring rank `who`, with
 * `work` us of computation between posting and waiting. */
static double point(int rank, int who, char *buf, int size, double work)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (who == 1) { /* the receiver measures */
            if (rank == 1) {
                MPI_Request req;
                MPI_Irecv(buf, size, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &req);
                compute(work);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            } else if (rank == 0) {
                MPI_Send(buf, size, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
            }
        } else { /* the sender measures */
            if (rank == 0) {
                MPI_Request req;
                MPI_Isend(buf, size, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &req);
                compute(work);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, size, MPI_BYTE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
        t[r] = (MPI_Wtime() - t0) * 1e6;
    }
    qsort(t, REPS, sizeof t[0], cmp);
    double med = t[REPS / 2];
    MPI_Bcast(&med, 1, MPI_DOUBLE, who, MPI_COMM_WORLD);
    return med;
}

/* The median time (us) of `work` us of computation alone on rank `who`. */
static double work_alone(int rank, int who, double work)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == who)
            compute(work);
        t[r] = (MPI_Wtime() - t0) * 1e6;
    }
    qsort(t, REPS, sizeof t[0], cmp);
    double med = t[REPS / 2];
    MPI_Bcast(&med, 1, MPI_DOUBLE, who, MPI_COMM_WORLD);
    return med;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2 || nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: overlap SIZE   (on at least 2 ranks)\n");
        MPI_Finalize();
        return 1;
    }
    int size = atoi(argv[1]);
    char *buf = malloc(size > 0 ? (size_t)size : 1);
    memset(buf, 1, size > 0 ? (size_t)size : 1);
    /* Each rank computes with its own calibration: on a shared machine two
     * cores can differ several-fold. */
    calibrate();
    const char *names[2] = {"sender", "receiver"};
    for (int who = 1; who >= 0; who--) {
        point(rank, who, buf, size, 0); /* warm-up */
        double t0 = point(rank, who, buf, size, 0);
        double sum = t0, base = t0, work = 0, t = t0;
        int n = 1;
        for (int step = 1; step <= MAX_STEPS; step++) {
            work = step * t0 / 10.0;
            t = point(rank, who, buf, size, work);
            if (t < 1.03 * base) {
                sum += t;
                n++;
                base = sum / n;
            }
            if (t > 1.5 * base)
                break;
        }
        double overhead = t - work_alone(rank, who, work);
        double avail = 1.0 - overhead / base;
        if (avail < 0)
            avail = 0;
        if (avail > 1)
            avail = 1;
        if (rank == 0)
            printf("overlap %d B %-8s transfer %10.1f us  overhead %10.1f us  availability %5.1f %%\n", size,
                   names[who], base, overhead, avail * 100.0);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}

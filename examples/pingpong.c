/*
 * pingpong.c - point-to-point latency and bandwidth between two ranks.
 *
 * Plain MPI: builds with any MPI's compiler wrapper, e.g.
 *     tandem cc -O2 -o pingpong examples/pingpong.c
 *     tandem run -n 2 ./pingpong
 * (or mpicc / mpirun). Ranks 0 and 1 ping-pong; any further ranks wait at the
 * final barrier.
 *
 * Options:
 *     -m MAXSIZE   largest message in bytes (suffix k or m for KiB / MiB;
 *                  default 4m)
 *     -r REPS      timed batches per size (default 10)
 *     -a           buffers from MPI_Alloc_mem instead of posix_memalign
 *                  (memory the library may prepare for messages; Tandem
 *                  backs large ones with transparent huge pages)
 *
 * For each size 0, 1, 2, 4, ..., MAXSIZE it runs one untimed warm-up batch,
 * then REPS timed batches of round trips (fewer round trips per batch for
 * large messages). Latency is half a round trip in microseconds, the median
 * over the batches; bandwidth is size / latency in MB/s (10^6 bytes per
 * second). The output follows the layout of the OSU micro-benchmarks.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX (4L * 1024 * 1024)
#define DEFAULT_REPS 10

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-m MAXSIZE] [-r REPS] [-a]\n", prog);
    fprintf(stderr, "  -m MAXSIZE  largest message in bytes, suffix k or m allowed (default 4m)\n");
    fprintf(stderr, "  -r REPS     timed batches per message size (default %d)\n", DEFAULT_REPS);
    fprintf(stderr, "  -a          buffers from MPI_Alloc_mem instead of posix_memalign\n");
}

/* Parses "123", "64k", "4m"; -1 on error. */
static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0)
        return -1;
    if (*end == 'k' || *end == 'K') {
        v *= 1024;
        end++;
    } else if (*end == 'm' || *end == 'M') {
        v *= 1024 * 1024;
        end++;
    }
    if (*end != 0 || v > (1L << 30))
        return -1;
    return v;
}

/* Returns 0 if the options are valid. */
static int parse_args(int argc, char **argv, long *maxsize, int *reps, int *alloc_mem)
{
    int i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-a") == 0) {
            *alloc_mem = 1;
        } else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            *maxsize = parse_size(argv[++i]);
            if (*maxsize < 0)
                return -1;
        } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            long r = parse_size(argv[++i]);
            if (r < 1 || r > 1000000)
                return -1;
            *reps = (int)r;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Round trips per timed batch: many for small messages, a few for large ones. */
static int batch_iters(long size)
{
    long iters;
    if (size <= 8192)
        return 100;
    iters = 100L * 8192 / size;
    return iters < 2 ? 2 : (int)iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One batch of round trips; returns the half round-trip time in seconds on
 * rank 0 (0 elsewhere). */
static double batch(int rank, char *sbuf, char *rbuf, int size, int iters)
{
    int i;
    double t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / (2.0 * iters);
}

int main(int argc, char **argv)
{
    int rank, nranks, reps = DEFAULT_REPS, r, alloc_mem = 0;
    long maxsize = DEFAULT_MAX, size, page;
    char *sbuf = NULL, *rbuf = NULL;
    double *times;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    if (parse_args(argc, argv, &maxsize, &reps, &alloc_mem) != 0) {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks (have %d)\n", argv[0], nranks);
        MPI_Finalize();
        return 1;
    }

    if (rank < 2) {
        page = sysconf(_SC_PAGESIZE);
        if (page <= 0)
            page = 4096;
        if (alloc_mem ? MPI_Alloc_mem(maxsize ? maxsize : 1, MPI_INFO_NULL, &sbuf) != MPI_SUCCESS ||
                            MPI_Alloc_mem(maxsize ? maxsize : 1, MPI_INFO_NULL, &rbuf) != MPI_SUCCESS
                      : posix_memalign((void **)&sbuf, (size_t)page, (size_t)(maxsize ? maxsize : 1)) != 0 ||
                            posix_memalign((void **)&rbuf, (size_t)page, (size_t)(maxsize ? maxsize : 1)) != 0) {
            fprintf(stderr, "rank %d: cannot allocate 2 x %ld bytes\n", rank, maxsize);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* touch every page before timing */
        memset(sbuf, 'a' + rank, (size_t)(maxsize ? maxsize : 1));
        memset(rbuf, 0, (size_t)(maxsize ? maxsize : 1));
        times = malloc(sizeof(double) * (size_t)reps);
        if (times == NULL)
            MPI_Abort(MPI_COMM_WORLD, 1);

        if (rank == 0) {
            char lib[MPI_MAX_LIBRARY_VERSION_STRING];
            int len = 0;
            char *nl;
            MPI_Get_library_version(lib, &len);
            nl = strchr(lib, '\n');
            if (nl)
                *nl = 0;
            printf("# Tandem ping-pong (works with any MPI)\n");
            printf("# %s\n", lib);
            printf("# 2 of %d ranks, median of %d batches per size, latency = half round trip\n", nranks, reps);
            printf("# Size          Latency(us)     Bandwidth(MB/s)\n");
            fflush(stdout);
        }

        for (size = 0; size <= maxsize; size = size ? size * 2 : 1) {
            int iters = batch_iters(size);
            batch(rank, sbuf, rbuf, (int)size, iters); /* warm-up */
            for (r = 0; r < reps; r++)
                times[r] = batch(rank, sbuf, rbuf, (int)size, iters);
            if (rank == 0) {
                double median, lat_us, bw;
                qsort(times, (size_t)reps, sizeof(double), cmp_double);
                median = reps % 2 ? times[reps / 2] : (times[reps / 2 - 1] + times[reps / 2]) / 2.0;
                lat_us = median * 1e6;
                bw = size > 0 && lat_us > 0 ? (double)size / lat_us : 0.0;
                printf("%-10d %18.3f %18.2f\n", (int)size, lat_us, bw);
                fflush(stdout);
            }
        }
        free(times);
        if (alloc_mem) {
            MPI_Free_mem(sbuf);
            MPI_Free_mem(rbuf);
        } else {
            free(sbuf);
            free(rbuf);
        }
    }

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

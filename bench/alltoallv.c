/*
 * alltoallv.c - the all-to-all exchange of the VolpexMPI report's case study (the
 * MPI_Alltoallv of NAS IS with 64 processes, ~32 KiB between each pair),
 * written as the paper's listing:
 *
 *     for (i = 0; i < size; i++) {
 *         MPI_Isend(sbuf[i], scnt[i], MPI_BYTE, i, 0, comm, &reqs[2*i]);
 *         MPI_Irecv(rbuf[i], rcnt[i], MPI_BYTE, i, 0, comm, &reqs[2*i+1]);
 *     }
 *     MPI_Waitall(2*size, reqs, stats);
 *
 * (MPI_Alltoallv itself is measured by no kernel yet: this one must run on
 * libraries without collectives.) The count between each
 * pair varies around `size` by up to +-`spread` (the paper saw 27k-37k for
 * an average of 32k), the same on both sides. Each timed sample runs `iters`
 * exchanges (the paper's analysis used 10) between barriers; its time is the
 * slowest rank's. The data received is checked once before timing.
 *
 * Record per sample:
 *   {"type":"a2av","size":S,"rep":R,"iters":I,"t":T,"bytes":B}
 * with B the bytes each exchange moves in total (all pairs, self included).
 * On Tandem, a library that reports progress-engine counters adds its own
 * {"type":"counters",...} lines; `tandem bench` collects them.
 *
 * Parameters (NAME=VALUE): sizes=32768 spread=0.15 iters=10 repeat=10
 * warmup=2
 */
#include "bench.h"

/* Bytes rank `from` sends to rank `to`: deterministic, the same on both sides. */
static long pair_count(long size, double spread, int from, int to)
{
    unsigned long h = (unsigned long)from * 2654435761UL ^ (unsigned long)to * 40503UL;
    double u;
    h ^= h >> 13;
    h *= 0x5bd1e995UL;
    h ^= h >> 15;
    u = (double)(h % 10007) / 10006.0; /* 0..1 */
    return (long)((double)size * (1.0 + spread * (2.0 * u - 1.0)));
}

static int *scnt, *sdsp, *rcnt, *rdsp;
static char *sbuf, *rbuf;
static MPI_Request *reqs;

static void exchange(void)
{
    int i;
    for (i = 0; i < bench_size; i++) {
        MPI_Isend(sbuf + sdsp[i], scnt[i], MPI_BYTE, i, 0, MPI_COMM_WORLD, &reqs[2 * i]);
        MPI_Irecv(rbuf + rdsp[i], rcnt[i], MPI_BYTE, i, 0, MPI_COMM_WORLD, &reqs[2 * i + 1]);
    }
    bench_check(MPI_Waitall(2 * bench_size, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
}

int main(int argc, char **argv)
{
    long sizes[BENCH_MAX_SIZES];
    int nsizes, i, j, k, rep, repeat, iters, warmup;
    double spread;

    bench_init(&argc, &argv, "alltoallv");
    nsizes = bench_param_sizes("sizes", "32768", sizes);
    spread = bench_param_double("spread", 0.15, 0, 0.99);
    iters = (int)bench_param_long("iters", 10, 1, 1000000);
    repeat = (int)bench_param_long("repeat", 10, 1, 1000000);
    warmup = (int)bench_param_long("warmup", 2, 0, 1000000);
    scnt = (int *)malloc(sizeof(int) * (size_t)bench_size * 4);
    reqs = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)bench_size * 2);
    if (scnt == NULL || reqs == NULL)
        bench_fail("out of memory");
    sdsp = scnt + bench_size;
    rcnt = sdsp + bench_size;
    rdsp = rcnt + bench_size;
    bench_start(nsizes * repeat);

    for (k = 0; k < nsizes; k++) {
        long s = sizes[k], stotal = 0, rtotal = 0;
        double bytes = 0;
        char label[64];
        bench_size_label(label, sizeof label, s);
        for (i = 0; i < bench_size; i++) {
            scnt[i] = (int)pair_count(s, spread, bench_rank, i);
            rcnt[i] = (int)pair_count(s, spread, i, bench_rank);
            sdsp[i] = (int)stotal;
            rdsp[i] = (int)rtotal;
            stotal += scnt[i];
            rtotal += rcnt[i];
            for (j = 0; j < bench_size; j++)
                bytes += (double)pair_count(s, spread, i, j);
        }
        sbuf = bench_alloc((size_t)stotal);
        rbuf = bench_alloc((size_t)rtotal);
        /* Check once: every block arrives from the right rank. */
        for (i = 0; i < bench_size; i++)
            memset(sbuf + sdsp[i], (bench_rank * 31 + i) % 251, (size_t)scnt[i]);
        exchange();
        for (i = 0; i < bench_size; i++) {
            unsigned char want = (unsigned char)((i * 31 + bench_rank) % 251);
            if (rcnt[i] > 0 && ((unsigned char)rbuf[rdsp[i]] != want ||
                                (unsigned char)rbuf[rdsp[i] + rcnt[i] - 1] != want))
                bench_fail("wrong data from rank %d", i);
        }
        for (j = 0; j < warmup; j++)
            exchange();
        for (rep = 0; rep < repeat; rep++) {
            double t0, t;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (j = 0; j < iters; j++)
                exchange();
            t = bench_max_to_root(MPI_Wtime() - t0);
            bench_emit("\"type\":\"a2av\",\"size\":%ld,\"rep\":%d,\"iters\":%d,\"t\":%.9g,\"bytes\":%.0f", s,
                       rep, iters, t, bytes);
            bench_step(label);
        }
        free(sbuf);
        free(rbuf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(scnt);
    free(reqs);
    return bench_finish();
}

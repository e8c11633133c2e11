/*
 * cannon.c - Cannon's matrix multiplication C = A * B on a q x q process
 * grid (Kumar et al.'s application kernel): the job's rank count must be a
 * perfect square and the matrix dimension n a multiple of q.
 *
 * Rank (i, j) = i*q + j holds one nb x nb block (nb = n/q) of A, B and C.
 * After the initial skew (A's row i shifted left by i, B's column j up by j)
 * the q steps each multiply the local blocks while the next A block comes
 * from the right neighbour and the next B block from the neighbour below:
 * with overlap=1 the shifts are non-blocking sends and receives posted
 * before the multiplication and completed with MPI_Waitall after it, so
 * the time spent in that wait is what the library could not overlap; with
 * overlap=0 the shifts are MPI_Sendrecv_replace calls after the
 * multiplication (no overlap possible), for comparison.
 *
 * The result is checked at a few entries against the exact value (the
 * matrices hold small integers). Record per repetition:
 *   {"type":"cannon","n":N,"q":Q,"overlap":1,"rep":R,"total":T,"wait":W,"wait_avg":WA,
 *    "compute_avg":CA,"ok":true}
 * T and W are the slowest rank's total time and time in the wait (seconds),
 * WA and CA the averages over ranks.
 *
 * Parameters (NAME=VALUE): n=512 repeat=5 warmup=1 overlap=1
 */
#include "bench.h"

static int q, gi, gj, nb;
static double *a, *b, *c, *a2, *b2;

static double a_val(long r, long col)
{
    return (double)((r * 3 + col * 7) % 11) - 5.0;
}

static double b_val(long r, long col)
{
    return (double)((r * 5 + col * 2) % 13) - 6.0;
}

static int rank_of(int i, int j)
{
    return ((i + q) % q) * q + (j + q) % q;
}

/* c += x * y for nb x nb row-major blocks. */
static void multiply(const double *x, const double *y, double *z)
{
    int i, k, j;
    for (i = 0; i < nb; i++)
        for (k = 0; k < nb; k++) {
            double xik = x[i * nb + k];
            const double *yr = y + k * nb;
            double *zr = z + i * nb;
            for (j = 0; j < nb; j++)
                zr[j] += xik * yr[j];
        }
}

static void fill(void)
{
    int i, j;
    for (i = 0; i < nb; i++)
        for (j = 0; j < nb; j++) {
            a[i * nb + j] = a_val((long)gi * nb + i, (long)gj * nb + j);
            b[i * nb + j] = b_val((long)gi * nb + i, (long)gj * nb + j);
            c[i * nb + j] = 0.0;
        }
}

/* One multiplication; returns the time spent waiting for shifts. */
static double cannon(int overlap, double *compute)
{
    int step, count = nb * nb;
    double wait = 0.0, t;
    MPI_Request req[4];
    *compute = 0.0;
    fill();
    /* Initial skew. */
    if (q > 1) {
        MPI_Sendrecv_replace(a, count, MPI_DOUBLE, rank_of(gi, gj - gi), BENCH_TAG_DATA, rank_of(gi, gj + gi),
                             BENCH_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv_replace(b, count, MPI_DOUBLE, rank_of(gi - gj, gj), BENCH_TAG_DATA + 1,
                             rank_of(gi + gj, gj), BENCH_TAG_DATA + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    for (step = 0; step < q; step++) {
        int shift = q > 1 && step < q - 1;
        if (overlap && shift) {
            MPI_Irecv(a2, count, MPI_DOUBLE, rank_of(gi, gj + 1), BENCH_TAG_DATA, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(b2, count, MPI_DOUBLE, rank_of(gi + 1, gj), BENCH_TAG_DATA + 1, MPI_COMM_WORLD, &req[1]);
            MPI_Isend(a, count, MPI_DOUBLE, rank_of(gi, gj - 1), BENCH_TAG_DATA, MPI_COMM_WORLD, &req[2]);
            MPI_Isend(b, count, MPI_DOUBLE, rank_of(gi - 1, gj), BENCH_TAG_DATA + 1, MPI_COMM_WORLD, &req[3]);
        }
        t = MPI_Wtime();
        multiply(a, b, c);
        *compute += MPI_Wtime() - t;
        if (!shift)
            continue;
        t = MPI_Wtime();
        if (overlap) {
            double *tmp;
            MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
            tmp = a;
            a = a2;
            a2 = tmp;
            tmp = b;
            b = b2;
            b2 = tmp;
        } else {
            MPI_Sendrecv_replace(a, count, MPI_DOUBLE, rank_of(gi, gj - 1), BENCH_TAG_DATA, rank_of(gi, gj + 1),
                                 BENCH_TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv_replace(b, count, MPI_DOUBLE, rank_of(gi - 1, gj), BENCH_TAG_DATA + 1,
                                 rank_of(gi + 1, gj), BENCH_TAG_DATA + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        wait += MPI_Wtime() - t;
    }
    return wait;
}

/* Whether a few entries of the local C block are exact. */
static int check(long n)
{
    int probes[4][2], p;
    probes[0][0] = 0, probes[0][1] = 0;
    probes[1][0] = nb - 1, probes[1][1] = nb - 1;
    probes[2][0] = nb / 2, probes[2][1] = nb / 3;
    probes[3][0] = nb / 3, probes[3][1] = nb - 1;
    for (p = 0; p < 4; p++) {
        long r = (long)gi * nb + probes[p][0], col = (long)gj * nb + probes[p][1], k;
        double want = 0.0;
        for (k = 0; k < n; k++)
            want += a_val(r, k) * b_val(k, col);
        if (c[probes[p][0] * nb + probes[p][1]] != want)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    long n;
    int repeat, warmup, overlap, rep, ok;
    size_t bytes;

    bench_init(&argc, &argv, "cannon");
    n = bench_param_long("n", 512, 1, 1L << 16);
    repeat = (int)bench_param_long("repeat", 5, 1, 100000);
    warmup = (int)bench_param_long("warmup", 1, 0, 100000);
    overlap = (int)bench_param_long("overlap", 1, 0, 1);
    for (q = 1; q * q < bench_size; q++)
        ;
    if (q * q != bench_size)
        bench_fail("cannon needs a square number of ranks (1, 4, 9, 16, ...), not %d", bench_size);
    if (n % q != 0)
        bench_fail("n=%ld must be a multiple of the grid side %d", n, q);
    nb = (int)(n / q);
    gi = bench_rank / q;
    gj = bench_rank % q;
    bytes = sizeof(double) * (size_t)nb * (size_t)nb;
    a = (double *)bench_alloc(bytes);
    b = (double *)bench_alloc(bytes);
    c = (double *)bench_alloc(bytes);
    a2 = (double *)bench_alloc(bytes);
    b2 = (double *)bench_alloc(bytes);
    bench_start(repeat);

    for (rep = 0; rep < warmup; rep++) {
        double compute;
        cannon(overlap, &compute);
    }
    ok = 1;
    for (rep = 0; rep < repeat; rep++) {
        double t0, total, wait, compute, wait_max, wait_sum, total_max, compute_sum;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        wait = cannon(overlap, &compute);
        total = MPI_Wtime() - t0;
        total_max = bench_max_to_root(total);
        wait_max = bench_max_to_root(wait);
        wait_sum = bench_sum_to_root(wait);
        compute_sum = bench_sum_to_root(compute);
        ok = ok && check(n);
        ok = bench_sum_to_root(ok ? 0.0 : 1.0) == 0.0;
        bench_emit("\"type\":\"cannon\",\"n\":%ld,\"q\":%d,\"overlap\":%d,\"rep\":%d,\"total\":%.9g,\"wait\":%.9g,"
                   "\"wait_avg\":%.9g,\"compute_avg\":%.9g,\"ok\":%s",
                   n, q, overlap, rep, total_max, wait_max, wait_sum / bench_size, compute_sum / bench_size,
                   ok ? "true" : "false");
        bench_step("multiplication");
    }
    if (bench_rank == 0 && !ok)
        bench_fail("wrong result");
    MPI_Barrier(MPI_COMM_WORLD);
    return bench_finish();
}

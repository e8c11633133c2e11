/*
 * overhead.c - MPI_Isend / MPI_Irecv overhead and application availability
 * by the post-work-wait method of Doerfler and Brightwell.
 *
 * Rank 0 is measured, rank 1 is its peer. One iteration of the loop is
 *   isend: t0; MPI_Isend; work(w); MPI_Wait; t1
 *   irecv: t0; MPI_Irecv; work(w); MPI_Wait; t1
 * with the peer made ready before t0 (for isend it has posted its receive;
 * for irecv it sends as soon as rank 0 says so, just before t0), so the
 * iteration time is post + work + wait and nothing else.
 *
 * For each operation, size and repetition the work w grows by `step` of the
 * transfer time per point, from none. A point's iteration time is the median
 * of `samples` iterations; its work time is the median of as many runs of
 * the same work without messaging. The transfer time (base_t) is the equally
 * weighted average of the iteration times of the points so far, until one
 * point exceeds `base` times that average; from then on it stays fixed. The
 * series stops once `confirm` points in a row (default 2, so that one
 * disturbed point does not end it; the seed used 1) have an iteration time
 * above `stop` times base_t: at the last one, overhead = iteration time -
 * work time, and availability = 1 - overhead / base_t. `tandem bench`
 * recomputes these from the points.
 *
 * Records:
 *   {"type":"ovh_point","op":"isend","size":S,"rep":R,"i":I,"work":W,"iter_t":X,"work_t":Y}
 *   {"type":"ovh_result","op":"isend","size":S,"rep":R,"base_t":B,"iter_t":X,"work_t":Y,
 *    "overhead":O,"availability":A,"points":N}
 * (times in seconds).
 *
 * Parameters (NAME=VALUE): sizes=... ops=isend,irecv repeat=5 samples=9
 * base=1.03 stop=1.5 confirm=2 step=0.05 max_points=200
 */
#include "bench.h"

#define MAX_SAMPLES 101

static volatile double work_sink;
static double units_per_second = 1e8;
static int samples = 9;

/* A dependent chain of floating-point operations the compiler cannot drop. */
static void work(long units)
{
    double x = work_sink;
    long i;
    for (i = 0; i < units; i++)
        x = x * 0.999999 + 1e-7;
    work_sink = x;
}

static void calibrate_work(void)
{
    long units = 1000;
    for (;;) {
        double t0 = MPI_Wtime(), t;
        work(units);
        t = MPI_Wtime() - t0;
        if (t > 0.02) {
            units_per_second = (double)units / t;
            return;
        }
        units *= 4;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One timed iteration on rank 0. */
static double iteration(int isend, long size, long units)
{
    MPI_Request req;
    double t0, t1;
    if (isend) {
        MPI_Recv(NULL, 0, MPI_BYTE, 1, BENCH_TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t0 = MPI_Wtime();
        MPI_Isend(bench_sbuf, (int)size, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD, &req);
        work(units);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        t1 = MPI_Wtime();
    } else {
        MPI_Send(NULL, 0, MPI_BYTE, 1, BENCH_TAG_SYNC, MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Irecv(bench_rbuf, (int)size, MPI_BYTE, 1, BENCH_TAG_DATA, MPI_COMM_WORLD, &req);
        work(units);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        t1 = MPI_Wtime();
    }
    return t1 - t0;
}

/* Rank 1's side of `count` iterations. */
static void peer(int isend, long size, long count)
{
    long i;
    for (i = 0; i < count; i++) {
        if (isend) {
            MPI_Request req;
            MPI_Irecv(bench_rbuf, (int)size, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD, &req);
            MPI_Send(NULL, 0, MPI_BYTE, 0, BENCH_TAG_SYNC, MPI_COMM_WORLD);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, BENCH_TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(bench_sbuf, (int)size, MPI_BYTE, 0, BENCH_TAG_DATA, MPI_COMM_WORLD);
        }
    }
}

/* Rank 0: the median iteration time of `samples` iterations with `units` of work. */
static double point_iter(int isend, long size, long units)
{
    double v[MAX_SAMPLES];
    int i;
    bench_ctl_send(samples, 1);
    for (i = 0; i < samples; i++)
        v[i] = iteration(isend, size, units);
    return median(v, samples);
}

static double point_work(long units)
{
    double v[MAX_SAMPLES];
    int i;
    for (i = 0; i < samples; i++) {
        double t0 = MPI_Wtime();
        work(units);
        v[i] = MPI_Wtime() - t0;
    }
    return median(v, samples);
}

int main(int argc, char **argv)
{
    long sizes[BENCH_MAX_SIZES];
    int nsizes, i, rep, repeat, max_points, o, confirm;
    double base_thr, stop_thr, step;
    const char *ops;
    const char *op_names[2] = {"isend", "irecv"};
    long maxsize = 0;

    bench_init(&argc, &argv, "overhead");
    nsizes = bench_param_sizes("sizes", "8,1024,16384,65536,262144,1048576", sizes);
    ops = bench_param_str("ops", "isend,irecv");
    repeat = (int)bench_param_long("repeat", 5, 1, 10000);
    samples = (int)bench_param_long("samples", 9, 1, MAX_SAMPLES);
    confirm = (int)bench_param_long("confirm", 2, 1, 100);
    base_thr = bench_param_double("base", 1.03, 1.0001, 10);
    stop_thr = bench_param_double("stop", 1.5, 1.01, 100);
    step = bench_param_double("step", 0.05, 0.001, 1);
    max_points = (int)bench_param_long("max_points", 200, 3, 100000);
    if (stop_thr <= base_thr)
        bench_fail("stop (%g) must be larger than base (%g)", stop_thr, base_thr);
    {
        /* Every op named must be one we know. */
        const char *p = ops;
        while (*p) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (!((len == 5 && strncmp(p, "isend", 5) == 0) || (len == 5 && strncmp(p, "irecv", 5) == 0)))
                bench_fail("ops=%s: expected a comma-separated list of isend, irecv", ops);
            if (!end)
                break;
            p = end + 1;
        }
    }
    if (bench_size < 2)
        bench_fail("overhead needs at least 2 ranks (rank 0 is measured, rank 1 is its peer)");
    for (i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];
    bench_pair_alloc(maxsize);
    bench_start(nsizes * repeat * (bench_list_has(ops, "isend") + bench_list_has(ops, "irecv")));
    if (bench_rank == 0)
        calibrate_work();

    for (o = 0; o < 2; o++) {
        int isend = (o == 0);
        if (!bench_list_has(ops, op_names[o]))
            continue;
        for (i = 0; i < nsizes; i++) {
            long s = sizes[i];
            char label[96], sl[64];
            bench_size_label(sl, sizeof sl, s);
            snprintf(label, sizeof label, "%s %s", op_names[o], sl);
            if (bench_rank == 1) {
                long count;
                while ((count = bench_ctl_recv(0)) > 0)
                    peer(isend, s, count);
                continue;
            }
            if (bench_rank != 0)
                continue;
            /* Warm-up: a few iterations without work. */
            point_iter(isend, s, 0);
            for (rep = 0; rep < repeat; rep++) {
                double base_sum = 0, base_t = 0, wt = 0, it = 0, step_t = 0;
                int base_open = 1, n = 0, stopped = 0, above = 0;
                while (n < max_points) {
                    double target = n * step_t;
                    long units = (long)(target * units_per_second);
                    it = point_iter(isend, s, units);
                    wt = point_work(units);
                    if (n == 0) {
                        base_sum = it;
                        base_t = it;
                        step_t = step * it;
                        if (step_t < 1e-7)
                            step_t = 1e-7;
                    } else if (base_open) {
                        if (it > base_thr * base_t) {
                            base_open = 0;
                        } else {
                            base_sum += it;
                            base_t = base_sum / (n + 1);
                        }
                    }
                    bench_emit("\"type\":\"ovh_point\",\"op\":\"%s\",\"size\":%ld,\"rep\":%d,\"i\":%d,"
                               "\"work\":%.9g,\"iter_t\":%.9g,\"work_t\":%.9g",
                               op_names[o], s, rep, n, target, it, wt);
                    n++;
                    above = it > stop_thr * base_t ? above + 1 : 0;
                    if (above >= confirm) {
                        stopped = 1;
                        break;
                    }
                }
                bench_emit("\"type\":\"ovh_result\",\"op\":\"%s\",\"size\":%ld,\"rep\":%d,\"base_t\":%.9g,"
                           "\"iter_t\":%.9g,\"work_t\":%.9g,\"overhead\":%.9g,\"availability\":%.6f,"
                           "\"points\":%d,\"stopped\":%s",
                           op_names[o], s, rep, base_t, it, wt, it - wt,
                           base_t > 0 ? 1.0 - (it - wt) / base_t : 0.0, n, stopped ? "true" : "false");
                bench_step(label);
            }
            bench_ctl_send(0, 1);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return bench_finish();
}

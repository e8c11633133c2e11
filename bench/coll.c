/*
 * coll.c - collective operations timed by the procedure of Noor, Alhaisoni & Liotta:
 *   1. all processes arrive at a barrier   2. start time
 *   3. the collective                      4. all processes arrive at a barrier
 *   5. end time                            6. PTime = end - start
 * for all-to-all, broadcast, gather, scatter and point-to-point over
 * message sizes, on all the job's ranks; and, when asked for (`ops=`),
 * the reductions the seed leaves out: allreduce, reduce (to rank 0) and
 * reduce_scatter (MPI_Reduce_scatter_block), all sums of floats. `tandem bench coll` launches one
 * job per node count (2..N by default): ranks left out of a smaller group
 * would otherwise wait in the library, and many libraries poll while they
 * wait, taking the cores from the ranks being measured.
 * After `warmup` untimed rounds (20 by default, as micro-benchmark suites
 * warm up: a library's buffers may meet fresh memory on their first pass,
 * a cost paid once that timed rounds should not show), `repeat` timed
 * rounds are taken on the
 * group's rank 0; the seed reports the minimum (MRT), `tandem bench` also
 * the median.
 *
 * Sizes are per-rank blocks, MPI's convention: alltoall sends SIZE bytes to
 * every rank, gather collects SIZE bytes from every rank, scatter hands out
 * SIZE bytes to every rank, bcast sends SIZE bytes, p2p sends SIZE bytes
 * from the group's first rank to its last; allreduce and reduce combine
 * SIZE-byte vectors, reduce_scatter an SIZE-byte block per rank (a vector
 * of SIZE times the node count); reductions round SIZE up to whole floats.
 * (The seed divides a total m by the node count: its m is SIZE times the
 * node count.)
 *
 * Record, per op, node count and size:
 *   {"type":"coll","op":"bcast","nodes":N,"size":S,"times":[T1,T2,...]}
 *
 * Parameters (NAME=VALUE): sizes=... ops=alltoall,bcast,gather,scatter,p2p
 * (also allreduce, reduce, reduce_scatter) repeat=20 warmup=20
 * A collective algorithm is forced through the library's own parameters
 * (`tandem bench coll --set coll_bcast_algorithm=...`, Open MPI's --mca).
 */
#include "bench.h"

static const char *all_ops[] = {"alltoall", "bcast",     "gather", "scatter",
                                 "p2p",      "allreduce", "reduce", "reduce_scatter"};
#define NOPS ((int)(sizeof all_ops / sizeof all_ops[0]))

static void run_op(const char *op, long s, MPI_Comm comm, int me, int n, char *sbuf, char *rbuf)
{
    int c = (int)s, floats = (int)((s + 3) / 4);
    if (strcmp(op, "allreduce") == 0)
        bench_check(MPI_Allreduce(sbuf, rbuf, floats, MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
    else if (strcmp(op, "reduce") == 0)
        bench_check(MPI_Reduce(sbuf, rbuf, floats, MPI_FLOAT, MPI_SUM, 0, comm), "MPI_Reduce");
    else if (strcmp(op, "reduce_scatter") == 0)
        bench_check(MPI_Reduce_scatter_block(sbuf, rbuf, floats, MPI_FLOAT, MPI_SUM, comm),
                    "MPI_Reduce_scatter_block");
    else if (strcmp(op, "alltoall") == 0)
        bench_check(MPI_Alltoall(sbuf, c, MPI_BYTE, rbuf, c, MPI_BYTE, comm), "MPI_Alltoall");
    else if (strcmp(op, "bcast") == 0)
        bench_check(MPI_Bcast(sbuf, c, MPI_BYTE, 0, comm), "MPI_Bcast");
    else if (strcmp(op, "gather") == 0)
        bench_check(MPI_Gather(sbuf, c, MPI_BYTE, rbuf, c, MPI_BYTE, 0, comm), "MPI_Gather");
    else if (strcmp(op, "scatter") == 0)
        bench_check(MPI_Scatter(sbuf, c, MPI_BYTE, rbuf, c, MPI_BYTE, 0, comm), "MPI_Scatter");
    else if (me == 0)
        bench_check(MPI_Send(sbuf, c, MPI_BYTE, n - 1, BENCH_TAG_DATA, comm), "MPI_Send");
    else if (me == n - 1)
        bench_check(MPI_Recv(rbuf, c, MPI_BYTE, 0, BENCH_TAG_DATA, comm, MPI_STATUS_IGNORE), "MPI_Recv");
}

int main(int argc, char **argv)
{
    long sizes[BENCH_MAX_SIZES];
    int nsizes, i, j, o, repeat, warmup, nops = 0, n = 0;
    const char *ops;
    long maxsize = 0;
    MPI_Comm comm = MPI_COMM_WORLD;
    char *sbuf, *rbuf;
    double *times;

    bench_init(&argc, &argv, "coll");
    nsizes = bench_param_sizes("sizes", "1024,65536,1048576", sizes);
    ops = bench_param_str("ops", "alltoall,bcast,gather,scatter,p2p");
    repeat = (int)bench_param_long("repeat", 20, 1, 1000000);
    warmup = (int)bench_param_long("warmup", 20, 0, 1000000);
    if (bench_size < 2)
        bench_fail("coll needs at least 2 ranks");
    n = bench_size;
    for (o = 0; o < NOPS; o++)
        nops += bench_list_has(ops, all_ops[o]);
    {
        const char *p = ops;
        int words = 1;
        for (; *p; p++)
            words += *p == ',';
        if (nops != words)
            bench_fail("ops=%s: expected a comma-separated list of alltoall, bcast, gather, scatter, p2p, "
                       "allreduce, reduce, reduce_scatter",
                       ops);
    }
    for (i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];
    /* Whole floats for the reductions: a 1-byte size is one float. */
    maxsize = (maxsize + 3) / 4 * 4;
    sbuf = bench_alloc((size_t)(maxsize * n));
    rbuf = bench_alloc((size_t)(maxsize * n));
    times = (double *)malloc(sizeof(double) * (size_t)repeat);
    if (times == NULL)
        bench_fail("cannot allocate %d times", repeat);
    bench_start(nops * nsizes);

    for (o = 0; o < NOPS; o++) {
        const char *op = all_ops[o];
        if (!bench_list_has(ops, op))
            continue;
        for (i = 0; i < nsizes; i++) {
            long s = sizes[i];
            char label[96], sl[64];
            bench_size_label(sl, sizeof sl, s);
            snprintf(label, sizeof label, "%s %d nodes %s", op, n, sl);
            for (j = 0; j < warmup; j++) {
                MPI_Barrier(comm);
                run_op(op, s, comm, bench_rank, n, sbuf, rbuf);
            }
            for (j = 0; j < repeat; j++) {
                double t0;
                MPI_Barrier(comm);
                t0 = MPI_Wtime();
                run_op(op, s, comm, bench_rank, n, sbuf, rbuf);
                MPI_Barrier(comm);
                times[j] = MPI_Wtime() - t0;
            }
            if (bench_rank == 0) {
                printf("{\"type\":\"coll\",\"op\":\"%s\",\"nodes\":%d,\"size\":%ld,\"times\":[", op, n, s);
                for (j = 0; j < repeat; j++)
                    printf(j ? ",%.9g" : "%.9g", times[j]);
                printf("]}\n");
                fflush(stdout);
            }
            bench_step(label);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(times);
    return bench_finish();
}

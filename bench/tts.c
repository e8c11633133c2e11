/*
 * tts.c - time to solution of a fixed computation that checks its own
 * result: the experiment of the VolpexMPI report (Gabriel, "Influence of
 * the Progress Engine...", UH-CS-10-02), which timed one program run
 * unreplicated, with two replicas of every rank, and with two replicas of
 * which one is lost halfway through. `tandem bench tts` launches those
 * configurations interleaved (and Open MPI beside them when asked).
 *
 * The computation is `steps` exchanges of alltoallv.c (the Isend/Irecv/
 * Waitall listing of that report, ~`size` bytes between each pair, +-`spread`),
 * each followed by work on what arrived:
 *
 *   every rank i holds a 64-bit state x_i, the same at every start;
 *   at step s it sends rank j a block whose first 16 bytes are x_i and s
 *   and whose rest comes from a generator seeded with (x_i, i, j, s);
 *   it checks every byte of every block it receives against the same
 *   generator, then folds the states it received, in rank order, into its
 *   own: x_i = mix(x_i, x_0, ..., x_{N-1}).
 *
 * A message lost, taken twice, taken out of order or altered changes a
 * block or a state. At the end rank 0 gathers the states and the counts of
 * wrong blocks and replays the states' evolution alone (it depends on the
 * states only), so the result is verified without trusting any exchange.
 *
 * Record per solve:
 *   {"type":"tts","size":S,"steps":K,"rep":R,"t":T,"ok":true,"bad_blocks":B,"result":"<hex>"}
 * with T the slowest rank's seconds from a barrier before the first step to
 * the end of the last (the gathering and the replay are not timed).
 *
 * kill=P:STEP makes the process whose TANDEM_JOB_RANK is P (in a Tandem job
 * with replicas, replica P / N of rank P % N) send itself SIGKILL when it
 * reaches step STEP of the first solve; the idea of the fault hook of the
 * replication tests. `tandem bench tts` gives it to its "-kill"
 * configuration only, with STEP = steps / 2.
 *
 * Parameters (NAME=VALUE): sizes=32768 spread=0.15 steps=1000 repeat=1
 * kill=P:STEP
 */
#include "bench.h"

#include <signal.h>

typedef unsigned long long u64;

/* Bytes rank `from` sends to rank `to` (alltoallv.c's counts), at least
 * the 16 bytes of a block's header. */
static long pair_count(long size, double spread, int from, int to)
{
    unsigned long h = (unsigned long)from * 2654435761UL ^ (unsigned long)to * 40503UL;
    double u;
    long n;
    h ^= h >> 13;
    h *= 0x5bd1e995UL;
    h ^= h >> 15;
    u = (double)(h % 10007) / 10006.0; /* 0..1 */
    n = (long)((double)size * (1.0 + spread * (2.0 * u - 1.0)));
    return n < 16 ? 16 : n;
}

/* splitmix64's finaliser. */
static u64 mix64(u64 x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static u64 initial_state(int rank)
{
    return mix64((u64)rank + 0x9e3779b97f4a7c15ULL);
}

/* The state after folding in the states received at one step. */
static u64 fold(u64 own, const u64 *received, int n)
{
    int i;
    for (i = 0; i < n; i++)
        own = mix64(own ^ (received[i] + 0x9e3779b97f4a7c15ULL * (u64)(i + 1)));
    return own;
}

/* The generator of a block's bytes after its header (xorshift64*). */
static u64 block_seed(u64 x, int from, int to, int step)
{
    u64 s = mix64(x ^ mix64(((u64)from << 42) ^ ((u64)to << 21) ^ (u64)step));
    return s ? s : 1;
}

static u64 next_word(u64 *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dULL;
}

static void fill_block(char *p, long n, u64 x, int from, int to, int step)
{
    u64 s = block_seed(x, from, to, step), w, st = (u64)step;
    long i;
    memcpy(p, &x, 8);
    memcpy(p + 8, &st, 8);
    for (i = 16; i + 8 <= n; i += 8) {
        w = next_word(&s);
        memcpy(p + i, &w, 8);
    }
    if (i < n) {
        w = next_word(&s);
        memcpy(p + i, &w, (size_t)(n - i));
    }
}

/* Whether a received block is what `from` had to send at `step`; its
 * sender's state in *x. */
static int check_block(const char *p, long n, int from, int to, int step, u64 *x)
{
    u64 s, w, st;
    long i;
    memcpy(x, p, 8);
    memcpy(&st, p + 8, 8);
    if (st != (u64)step)
        return 0;
    s = block_seed(*x, from, to, step);
    for (i = 16; i + 8 <= n; i += 8) {
        w = next_word(&s);
        if (memcmp(p + i, &w, 8) != 0)
            return 0;
    }
    if (i < n) {
        w = next_word(&s);
        if (memcmp(p + i, &w, (size_t)(n - i)) != 0)
            return 0;
    }
    return 1;
}

static int *scnt, *sdsp, *rcnt, *rdsp;
static char *sbuf, *rbuf;
static MPI_Request *reqs;
static u64 *received;

static void exchange(void)
{
    int i;
    for (i = 0; i < bench_size; i++) {
        MPI_Isend(sbuf + sdsp[i], scnt[i], MPI_BYTE, i, 0, MPI_COMM_WORLD, &reqs[2 * i]);
        MPI_Irecv(rbuf + rdsp[i], rcnt[i], MPI_BYTE, i, 0, MPI_COMM_WORLD, &reqs[2 * i + 1]);
    }
    bench_check(MPI_Waitall(2 * bench_size, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
}

/* This process's number in the job (TANDEM_JOB_RANK), -1 if unknown. */
static long job_process(void)
{
    const char *me = getenv("TANDEM_JOB_RANK");
    char *end;
    long p;
    if (me == NULL)
        return -1;
    p = strtol(me, &end, 10);
    return end == me || *end != 0 ? -1 : p;
}

/* State and wrong blocks of every rank, at rank 0 (point-to-point only). */
static void gather_states(u64 x, long bad, u64 *xs, long *bads)
{
    int r;
    if (bench_rank != 0) {
        u64 words[2];
        words[0] = x;
        words[1] = (u64)bad;
        bench_check(MPI_Send(words, 2, MPI_UNSIGNED_LONG_LONG, 0, BENCH_TAG_CTL, MPI_COMM_WORLD),
                    "MPI_Send (state)");
        return;
    }
    xs[0] = x;
    bads[0] = bad;
    for (r = 1; r < bench_size; r++) {
        u64 words[2] = {0, 0};
        bench_check(MPI_Recv(words, 2, MPI_UNSIGNED_LONG_LONG, r, BENCH_TAG_CTL, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE),
                    "MPI_Recv (state)");
        xs[r] = words[0];
        bads[r] = (long)words[1];
    }
}

int main(int argc, char **argv)
{
    long sizes[BENCH_MAX_SIZES];
    int nsizes, i, rep, repeat, steps, step, tick;
    long kill_process = -1, kill_step = -1, me;
    double spread;
    const char *kill;
    u64 *xs, *replay, *next;
    long *bads;

    bench_init(&argc, &argv, "tts");
    nsizes = bench_param_sizes("sizes", "32768", sizes);
    spread = bench_param_double("spread", 0.15, 0, 0.99);
    steps = (int)bench_param_long("steps", 1000, 1, 100000000);
    repeat = (int)bench_param_long("repeat", 1, 1, 1000000);
    kill = bench_param("kill");
    if (kill != NULL) {
        char *end;
        kill_process = strtol(kill, &end, 10);
        if (end == kill || *end != ':' || kill_process < 0)
            bench_fail("parameter kill=%s: expected PROCESS:STEP", kill);
        kill_step = strtol(end + 1, &end, 10);
        if (*end != 0 || kill_step < 0 || kill_step >= steps)
            bench_fail("parameter kill=%s: expected PROCESS:STEP with STEP from 0 to %d", kill, steps - 1);
    }
    if (nsizes != 1)
        bench_fail("tts solves one problem: give one size, not %d", nsizes);
    me = job_process();
    if (kill != NULL && me < 0)
        bench_fail("kill=%s needs TANDEM_JOB_RANK (a job started by tandem run)", kill);
    scnt = (int *)malloc(sizeof(int) * (size_t)bench_size * 4);
    reqs = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)bench_size * 2);
    received = (u64 *)malloc(sizeof(u64) * (size_t)bench_size);
    xs = (u64 *)malloc(sizeof(u64) * (size_t)bench_size * 3);
    bads = (long *)malloc(sizeof(long) * (size_t)bench_size);
    if (scnt == NULL || reqs == NULL || received == NULL || xs == NULL || bads == NULL)
        bench_fail("out of memory");
    replay = xs + bench_size;
    next = replay + bench_size;
    sdsp = scnt + bench_size;
    rcnt = sdsp + bench_size;
    rdsp = rcnt + bench_size;
    tick = steps >= 10 ? steps / 10 : 1;
    bench_start(repeat * ((steps + tick - 1) / tick));

    {
        long s = sizes[0], stotal = 0, rtotal = 0;
        for (i = 0; i < bench_size; i++) {
            scnt[i] = (int)pair_count(s, spread, bench_rank, i);
            rcnt[i] = (int)pair_count(s, spread, i, bench_rank);
            sdsp[i] = (int)stotal;
            rdsp[i] = (int)rtotal;
            stotal += scnt[i];
            rtotal += rcnt[i];
        }
        sbuf = bench_alloc((size_t)stotal);
        rbuf = bench_alloc((size_t)rtotal);
        for (rep = 0; rep < repeat; rep++) {
            u64 x = initial_state(bench_rank);
            long bad = 0;
            double t0, t;
            int ok, r;
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (step = 0; step < steps; step++) {
                if (rep == 0 && step == kill_step && me == kill_process)
                    raise(SIGKILL);
                for (i = 0; i < bench_size; i++)
                    fill_block(sbuf + sdsp[i], scnt[i], x, bench_rank, i, step);
                exchange();
                for (i = 0; i < bench_size; i++)
                    if (!check_block(rbuf + rdsp[i], rcnt[i], i, bench_rank, step, &received[i]))
                        bad++;
                x = fold(x, received, bench_size);
                if ((step + 1) % tick == 0 || step + 1 == steps) {
                    char what[64];
                    snprintf(what, sizeof what, "step %d of %d", step + 1, steps);
                    bench_step(what);
                }
            }
            t = bench_max_to_root(MPI_Wtime() - t0);
            gather_states(x, bad, xs, bads);
            if (bench_rank != 0)
                continue;
            /* The states' evolution replayed alone. */
            for (r = 0; r < bench_size; r++)
                replay[r] = initial_state(r);
            for (step = 0; step < steps; step++) {
                for (r = 0; r < bench_size; r++)
                    next[r] = fold(replay[r], replay, bench_size);
                memcpy(replay, next, sizeof(u64) * (size_t)bench_size);
            }
            ok = 1;
            bad = 0;
            for (r = 0; r < bench_size; r++) {
                if (xs[r] != replay[r])
                    ok = 0;
                bad += bads[r];
            }
            if (bad != 0)
                ok = 0;
            {
                u64 result = 0;
                for (r = 0; r < bench_size; r++)
                    result = mix64(result ^ xs[r]);
                bench_emit("\"type\":\"tts\",\"size\":%ld,\"steps\":%d,\"rep\":%d,\"t\":%.9g,\"ok\":%s,"
                           "\"bad_blocks\":%ld,\"result\":\"%016llx\"",
                           s, steps, rep, t, ok ? "true" : "false", bad, result);
            }
        }
        free(sbuf);
        free(rbuf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(scnt);
    free(reqs);
    free(received);
    free(xs);
    free(bads);
    return bench_finish();
}

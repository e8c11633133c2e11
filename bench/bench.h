/*
 * bench.h - helpers shared by Tandem's benchmark kernels in bench/.
 *
 * The kernels are plain C99 against the standard MPI API, so every MPI's
 * compiler wrapper builds them, and `tandem bench` runs the same source on
 * Tandem, Open MPI and MPICH. Each kernel is one .c file that includes this
 * header; nothing else is linked.
 *
 * Parameters come as NAME=VALUE words on the command line (unknown names are
 * an error). Sizes are comma-separated byte counts (`tandem bench` expands
 * MIN:MAX ranges before it starts the kernel).
 *
 * Output: rank 0 prints one JSON object per line on stdout, flushed at once,
 * for `tandem bench` to parse:
 *   {"type":"start", ...}     kernel, ranks, the MPI library's version, parameters
 *   {"type":"plan","steps":N} how many progress steps the run has
 *   {"type":"progress","done":K,"what":"..."}
 *   {"type":"<kernel record>", ...} the measurements (see each kernel)
 *   {"type":"end","seconds":T}
 * Errors: {"type":"error","message":"..."} and MPI_Abort.
 */
#ifndef TANDEM_BENCH_H
#define TANDEM_BENCH_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <mpi.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_PARAMS 32
#define BENCH_MAX_SIZES 64
#define BENCH_TAG_CTL 7001
#define BENCH_TAG_DATA 7002
#define BENCH_TAG_SYNC 7003

static int bench_rank = 0;
static int bench_size = 1;
static int bench_steps_done = 0;
static double bench_t_start = 0.0;

static const char *bench_kernel_name = "?";
static int bench_nparams = 0;
static const char *bench_param_names[BENCH_MAX_PARAMS];
static const char *bench_param_values[BENCH_MAX_PARAMS];
static int bench_param_used[BENCH_MAX_PARAMS];

/* Prints a JSON string literal (with quotes) for s. */
static inline void bench_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* Rank 0 prints one record: `body` is the inside of a JSON object without
 * the braces, e.g. "\"type\":\"x\",\"n\":3". */
static inline void bench_emit(const char *fmt, ...)
{
    va_list ap;
    if (bench_rank != 0)
        return;
    fputc('{', stdout);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputs("}\n", stdout);
    fflush(stdout);
}

/* Reports an error (from any rank) and ends the job. */
static inline void bench_fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fputs("{\"type\":\"error\",\"rank\":", stdout);
    fprintf(stdout, "%d,\"message\":", bench_rank);
    bench_json_string(stdout, msg);
    fputs("}\n", stdout);
    fflush(stdout);
    fprintf(stderr, "%s (rank %d): %s\n", bench_kernel_name, bench_rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static inline void bench_check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        text[0] = 0;
        MPI_Error_string(rc, text, &len);
        bench_fail("%s failed: %s", what, text);
    }
}

/* Looks up parameter `name`; NULL if not given. Marks it used. */
static inline const char *bench_param(const char *name)
{
    int i;
    for (i = 0; i < bench_nparams; i++) {
        if (strcmp(bench_param_names[i], name) == 0) {
            bench_param_used[i] = 1;
            return bench_param_values[i];
        }
    }
    return NULL;
}

static inline double bench_param_double(const char *name, double dflt, double lo, double hi)
{
    const char *v = bench_param(name);
    char *end;
    double d;
    if (v == NULL)
        return dflt;
    d = strtod(v, &end);
    if (end == v || *end != 0 || !(d >= lo && d <= hi))
        bench_fail("parameter %s=%s: expected a number from %g to %g", name, v, lo, hi);
    return d;
}

static inline long bench_param_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = bench_param(name);
    char *end;
    long d;
    if (v == NULL)
        return dflt;
    d = strtol(v, &end, 10);
    if (end == v || *end != 0 || d < lo || d > hi)
        bench_fail("parameter %s=%s: expected an integer from %ld to %ld", name, v, lo, hi);
    return d;
}

static inline const char *bench_param_str(const char *name, const char *dflt)
{
    const char *v = bench_param(name);
    return v ? v : dflt;
}

/* Parses a comma-separated list of byte counts into sizes[]; returns how many. */
static inline int bench_param_sizes(const char *name, const char *dflt, long *sizes)
{
    const char *v = bench_param_str(name, dflt);
    int n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long s = strtol(p, &end, 10);
        if (end == p || s < 0 || s > (1L << 30) || n >= BENCH_MAX_SIZES)
            bench_fail("parameter %s=%s: expected up to %d comma-separated byte counts", name, v,
                       BENCH_MAX_SIZES);
        sizes[n++] = s;
        p = end;
        if (*p == ',')
            p++;
        else if (*p != 0)
            bench_fail("parameter %s=%s: expected comma-separated byte counts", name, v);
    }
    if (n == 0)
        bench_fail("parameter %s is empty", name);
    return n;
}

/* Whether the comma-separated list `list` contains `word`. */
static inline int bench_list_has(const char *list, const char *word)
{
    size_t n = strlen(word);
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

/* MPI_Init, rank/size, and NAME=VALUE arguments. */
static inline void bench_init(int *argc, char ***argv, const char *kernel)
{
    int i;
    bench_kernel_name = kernel;
    bench_check(MPI_Init(argc, argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &bench_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &bench_size);
    for (i = 1; i < *argc; i++) {
        char *eq = strchr((*argv)[i], '=');
        if (eq == NULL || eq == (*argv)[i])
            bench_fail("argument '%s': expected NAME=VALUE", (*argv)[i]);
        if (bench_nparams >= BENCH_MAX_PARAMS)
            bench_fail("too many parameters");
        *eq = 0;
        bench_param_names[bench_nparams] = (*argv)[i];
        bench_param_values[bench_nparams] = eq + 1;
        bench_param_used[bench_nparams] = 0;
        bench_nparams++;
    }
    bench_t_start = MPI_Wtime();
}

/* After the kernel has read its parameters: rejects unknown ones, prints the
 * start record and the plan. */
static inline void bench_start(int steps)
{
    int i, len = 0, major = 0, minor = 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    char host[MPI_MAX_PROCESSOR_NAME];
    for (i = 0; i < bench_nparams; i++)
        if (!bench_param_used[i])
            bench_fail("unknown parameter '%s'", bench_param_names[i]);
    if (bench_rank != 0)
        return;
    version[0] = 0;
    MPI_Get_library_version(version, &len);
    MPI_Get_version(&major, &minor);
    host[0] = 0;
    MPI_Get_processor_name(host, &len);
    fprintf(stdout, "{\"type\":\"start\",\"kernel\":\"%s\",\"np\":%d,\"mpi_version\":\"%d.%d\",\"library\":",
            bench_kernel_name, bench_size, major, minor);
    bench_json_string(stdout, version);
    fputs(",\"host\":", stdout);
    bench_json_string(stdout, host);
    fprintf(stdout, ",\"wtick\":%g,\"params\":{", MPI_Wtick());
    for (i = 0; i < bench_nparams; i++) {
        if (i)
            fputc(',', stdout);
        bench_json_string(stdout, bench_param_names[i]);
        fputc(':', stdout);
        bench_json_string(stdout, bench_param_values[i]);
    }
    fputs("}}\n", stdout);
    bench_emit("\"type\":\"plan\",\"steps\":%d", steps);
}

static inline void bench_step(const char *what)
{
    bench_steps_done++;
    if (bench_rank != 0)
        return;
    fprintf(stdout, "{\"type\":\"progress\",\"done\":%d,\"what\":", bench_steps_done);
    bench_json_string(stdout, what);
    fputs("}\n", stdout);
    fflush(stdout);
}

static inline int bench_finish(void)
{
    bench_emit("\"type\":\"end\",\"seconds\":%.6f", MPI_Wtime() - bench_t_start);
    MPI_Finalize();
    return 0;
}

/* A page-aligned buffer of n bytes (at least 1), filled so that every page
 * is touched before timing. */
static inline char *bench_alloc(size_t n)
{
    void *p = NULL;
    if (n == 0)
        n = 1;
    if (posix_memalign(&p, 4096, n) != 0 || p == NULL)
        bench_fail("cannot allocate %lu bytes", (unsigned long)n);
    memset(p, 'a' + bench_rank % 26, n);
    return (char *)p;
}

/* Rank 0 sends a control word to rank `to` (outside any timed region). */
static inline void bench_ctl_send(long value, int to)
{
    bench_check(MPI_Send(&value, 1, MPI_LONG, to, BENCH_TAG_CTL, MPI_COMM_WORLD), "MPI_Send (control)");
}

static inline long bench_ctl_recv(int from)
{
    long value = 0;
    bench_check(MPI_Recv(&value, 1, MPI_LONG, from, BENCH_TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                "MPI_Recv (control)");
    return value;
}

/* Rank 0 tells every other rank `value` with point-to-point messages only
 * (so kernels that do not measure collectives run on libraries without
 * them). */
static inline long bench_share(long value)
{
    int r;
    if (bench_rank == 0) {
        for (r = 1; r < bench_size; r++)
            bench_ctl_send(value, r);
        return value;
    }
    return bench_ctl_recv(0);
}

/* The largest of every rank's `value`, known to rank 0 (point-to-point only). */
static inline double bench_max_to_root(double value)
{
    int r;
    if (bench_rank == 0) {
        for (r = 1; r < bench_size; r++) {
            double v = 0;
            bench_check(MPI_Recv(&v, 1, MPI_DOUBLE, r, BENCH_TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                        "MPI_Recv (result)");
            if (v > value)
                value = v;
        }
        return value;
    }
    bench_check(MPI_Send(&value, 1, MPI_DOUBLE, 0, BENCH_TAG_CTL, MPI_COMM_WORLD), "MPI_Send (result)");
    return value;
}

/* The sum of every rank's `value`, known to rank 0 (point-to-point only). */
static inline double bench_sum_to_root(double value)
{
    int r;
    if (bench_rank == 0) {
        for (r = 1; r < bench_size; r++) {
            double v = 0;
            bench_check(MPI_Recv(&v, 1, MPI_DOUBLE, r, BENCH_TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                        "MPI_Recv (result)");
            value += v;
        }
        return value;
    }
    bench_check(MPI_Send(&value, 1, MPI_DOUBLE, 0, BENCH_TAG_CTL, MPI_COMM_WORLD), "MPI_Send (result)");
    return value;
}

/*
 * The fixed-duration driver of the two-rank kernels (Ben Fredj & Renault): for each
 * message size, `body(size, iters)` runs `iters` iterations on ranks 0 and 1
 * and returns the elapsed time measured on rank 0. Rank 0 first runs
 * doubling batches as warm-up until `warmup` seconds have passed, derives
 * how many iterations fill `duration` seconds, then runs `repeat` timed
 * batches of that many. Rank 1 follows the control words rank 0 sends
 * between batches (0 ends the size). Other ranks do nothing.
 */
typedef double (*bench_body)(long size, long iters);

/* Reads a two-rank kernel's own parameters (set before bench_pair_main). */
static void (*bench_pair_params)(void) = NULL;

/* Messages transmitted per iteration of a two-rank kernel's body. */
static long bench_pair_msgs = 1;

/* A second body timed in the same launch (set by the params hook; NULL:
 * none), with the names the two bodies' samples carry as "api". Batches of
 * the two alternate size by size, the first of each pair swapped every
 * repetition (AB, BA, AB, ...), so that both run on the same process
 * placement, library pages and machine state, which differ between launches by more than what separates two
 * APIs of one library (RWAPI against MPI over TCP). */
static bench_body bench_pair_also = NULL;
static const char *bench_pair_api = NULL;
static const char *bench_pair_also_api = NULL;

/* Buffers of the two-rank kernels. */
static char *bench_sbuf = NULL;
static char *bench_rbuf = NULL;

static inline void bench_pair_alloc(long maxsize)
{
    bench_sbuf = bench_alloc((size_t)maxsize);
    bench_rbuf = bench_alloc((size_t)maxsize);
}

/* Rank 0 tells rank 1 to run `iters` iterations of size number `index`
 * with body `which` (0: the kernel's, 1: bench_pair_also; index -1: the
 * kernel is over). */
static inline void bench_pair_order_of(int which, long index, long iters)
{
    long words[3];
    words[0] = index;
    words[1] = iters;
    words[2] = which;
    bench_check(MPI_Send(words, 3, MPI_LONG, 1, BENCH_TAG_CTL, MPI_COMM_WORLD), "MPI_Send (control)");
}

static inline void bench_pair_order(long index, long iters)
{
    bench_pair_order_of(0, index, iters);
}

/*
 * The iterations of `body` that take about `duration` seconds, found by
 * timing batches that double in size for `warmup` seconds. The time per
 * iteration is the smallest any batch but the first showed (the first may
 * include connecting to the peer and faulting the buffers in): other
 * programs can only make a batch slower, and one preempted batch must not
 * make every timed batch of the size a few iterations long. A batch
 * shorter than a quarter of the warm-up never ends the calibration.
 */
static inline long bench_calibrate_of(int which, bench_body body, int index, long size,
                                      double duration, double warmup)
{
    long iters = 1;
    double spent = 0.0, best = -1.0;
    int batches = 0;
    for (;;) {
        double t, per;
        bench_pair_order_of(which, index, iters);
        t = body(size, iters);
        spent += t;
        batches++;
        per = t / (double)iters;
        if (batches > 1 && (best < 0 || per < best))
            best = per;
        if ((batches > 1 && spent >= warmup && t >= warmup / 4) || spent >= warmup + duration ||
            iters >= (1L << 40)) {
            double use = best > 0 ? best : per;
            double want = use > 0 ? duration / use : (double)(1L << 30);
            if (want < 1)
                want = 1;
            if (want > (double)(1L << 40))
                want = (double)(1L << 40);
            return (long)want;
        }
        /* Grow fast while a batch is short, then fill what is left of the
         * warm-up. */
        if (t < warmup / 4)
            iters *= 2;
        else {
            long left = (long)((warmup - spent) / (per > 0 ? per : 1e-9));
            if (left > iters)
                iters = left;
        }
    }
}

static inline long bench_calibrate(bench_body body, int index, long size, double duration,
                                   double warmup)
{
    return bench_calibrate_of(0, body, index, size, duration, warmup);
}

/* Rank 1's side: runs what rank 0 orders until it says the kernel is over. */
static inline void bench_follow(bench_body body, const long *sizes)
{
    for (;;) {
        long words[3] = {-1, 0, 0};
        bench_check(MPI_Recv(words, 3, MPI_LONG, 0, BENCH_TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                    "MPI_Recv (control)");
        if (words[0] < 0)
            return;
        (words[2] == 1 && bench_pair_also ? bench_pair_also : body)(sizes[words[0]], words[1]);
    }
}

/* Rank 0: one untimed eighth of a batch (to bring the caches and protocol
 * state back to this size), then the timed batch, and its sample. */
static inline void bench_pair_batch(int which, bench_body body, long size, int index, int rep,
                                    long iters)
{
    double t;
    bench_pair_order_of(which, index, iters / 8 + 1);
    body(size, iters / 8 + 1);
    bench_pair_order_of(which, index, iters);
    t = body(size, iters);
    if (bench_pair_also == NULL)
        bench_emit("\"type\":\"sample\",\"size\":%ld,\"rep\":%d,\"iters\":%ld,\"n\":%ld,\"t\":%.9g",
                   size, rep, iters, iters * bench_pair_msgs, t);
    else
        bench_emit("\"type\":\"sample\",\"api\":\"%s\",\"size\":%ld,\"rep\":%d,\"iters\":%ld,"
                   "\"n\":%ld,\"t\":%.9g",
                   which ? bench_pair_also_api : bench_pair_api, size, rep, iters,
                   iters * bench_pair_msgs, t);
}

static inline void bench_size_label(char *buf, size_t n, long size)
{
    if (size >= (1L << 20) && size % (1L << 20) == 0)
        snprintf(buf, n, "%ld MiB", size >> 20);
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, n, "%ld KiB", size >> 10);
    else
        snprintf(buf, n, "%ld B", size);
}

/*
 * main() of the two-rank fixed-duration kernels (pingpong, bidir, burst).
 * Parameters: sizes (bytes), duration (seconds per timed batch), repeat
 * (timed batches per size), warmup (seconds; default a quarter of duration).
 * Each timed batch prints
 *   {"type":"sample","size":S,"rep":R,"iters":I,"n":N,"t":T}
 * where N = I * msgs_per_iter is the number of messages effectively
 * transmitted and T the elapsed seconds on rank 0, from before the first
 * message is sent to after the last one is received (Ben Fredj & Renault: L = T/N,
 * throughput = N*S/T). With a second body (bench_pair_also), each sample
 * also says which body it timed: "api":"..." after "type".
 *
 * The sizes are interleaved: after every size is calibrated, each round
 * times one batch of every size (preceded by an untimed eighth of a batch,
 * to bring the caches and protocol state back to that size). A burst of
 * load on a shared machine then lands in one batch of many sizes, which
 * the median over the rounds discards, instead of in every batch of a few
 * neighbouring sizes, which would bend the curve there.
 *
 * iters=I1,I2,... (one count per size) replaces the calibration: every
 * batch of size k runs Ik iterations, after one untimed batch of Ik/4 + 1
 * as warm-up. The run then sends the same messages whatever the clocks say,
 * as the replicas of a rank must (`tandem bench --replicas` gives the
 * replicated launches the counts an unreplicated launch calibrated).
 */
static inline int bench_pair_main(int argc, char **argv, const char *kernel, bench_body body,
                                  long msgs_per_iter, const char *default_sizes)
{
    long sizes[BENCH_MAX_SIZES];
    long iters[BENCH_MAX_SIZES], also_iters[BENCH_MAX_SIZES];
    int nsizes, i, rep, repeat;
    double duration, warmup;
    long maxsize = 0;
    const char *fixed;

    bench_init(&argc, &argv, kernel);
    nsizes = bench_param_sizes("sizes", default_sizes, sizes);
    duration = bench_param_double("duration", 0.1, 1e-6, 3600);
    repeat = (int)bench_param_long("repeat", 10, 1, 100000);
    warmup = bench_param_double("warmup", duration / 4, 0, 3600);
    bench_pair_msgs = msgs_per_iter;
    fixed = bench_param("iters");
    if (fixed != NULL && bench_param_sizes("iters", fixed, iters) != nsizes)
        bench_fail("parameter iters=%s: expected one count per size (%d)", fixed, nsizes);
    if (bench_pair_params != NULL)
        bench_pair_params();
    if (fixed != NULL && bench_pair_also != NULL)
        bench_fail("parameter iters=%s: not with a second body (with=...)", fixed);
    if (bench_size < 2)
        bench_fail("%s needs at least 2 ranks (ranks 0 and 1 measure; others wait)", kernel);
    for (i = 0; i < nsizes; i++)
        if (sizes[i] > maxsize)
            maxsize = sizes[i];
    bench_pair_alloc(maxsize);
    bench_start(nsizes * repeat);

    if (bench_rank == 0) {
        for (i = 0; i < nsizes; i++) {
            if (fixed != NULL) {
                if (iters[i] < 1)
                    bench_fail("parameter iters=%s: every count must be at least 1", fixed);
                bench_pair_order(i, iters[i] / 4 + 1);
                body(sizes[i], iters[i] / 4 + 1);
                continue;
            }
            iters[i] = bench_calibrate(body, i, sizes[i], duration, warmup);
            if (bench_pair_also)
                also_iters[i] = bench_calibrate_of(1, bench_pair_also, i, sizes[i], duration, warmup);
        }
        for (rep = 0; rep < repeat; rep++) {
            for (i = 0; i < nsizes; i++) {
                long s = sizes[i];
                char label[64];
                bench_size_label(label, sizeof label, s);
                if (bench_pair_also == NULL) {
                    bench_pair_batch(0, body, s, i, rep, iters[i]);
                } else {
                    /* Each body runs first in every other repetition. */
                    int first = (rep & 1);
                    int k;
                    for (k = 0; k < 2; k++) {
                        int which = first ^ k;
                        bench_pair_batch(which, which ? bench_pair_also : body, s, i, rep,
                                         which ? also_iters[i] : iters[i]);
                    }
                }
                bench_step(label);
            }
        }
        bench_pair_order(-1, 0);
    } else if (bench_rank == 1) {
        bench_follow(body, sizes);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return bench_finish();
}

#endif

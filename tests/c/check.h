/*
 * check.h - shared helpers for Tandem's C test programs (tests/c/).
 *
 * Plain MPI + C99 + POSIX: every program in tests/c also builds with another
 * MPI's mpicc, so a test can be checked against Open MPI or MPICH.
 *
 * Conventions
 *   - A failed check prints one line to stderr,
 *         rank R: FAIL <what> (expected X got Y) [file:line]
 *     and calls MPI_Abort(MPI_COMM_WORLD, 1) (exit(1) if MPI is not usable).
 *   - A passing program ends with tc_finish(name): a barrier, MPI_Finalize,
 *     then rank 0 prints "PASS <name>" to stdout.
 *   - Message contents: byte i of a message keyed (src, key) is
 *     tc_byte(src, key, i), a hash of the three. Receive buffers are first
 *     filled with the bitwise complement of the expected bytes (so every byte
 *     must really be written) and carry TC_GUARD guard bytes after their end
 *     that must come back untouched.
 */
#ifndef TANDEM_TESTS_CHECK_H
#define TANDEM_TESTS_CHECK_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <mpi.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Guard bytes after every buffer from tc_alloc. */
#define TC_GUARD 64

/* ---------------------------------------------------------------- failing */

static inline int tc_mpi_usable(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    if (!init)
        return 0;
    MPI_Finalized(&fin);
    return !fin;
}

/* This process's rank in MPI_COMM_WORLD, -1 when MPI is not usable. */
static inline int tc_rank(void)
{
    int r = -1;
    if (tc_mpi_usable())
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static inline int tc_size(void)
{
    int s = 0;
    if (tc_mpi_usable())
        MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

static inline void tc_die(void)
{
    fflush(stdout);
    fflush(stderr);
    if (tc_mpi_usable())
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static inline void tc_vfail(const char *file, int line, const char *suffix, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "rank %d: FAIL %s%s [%s:%d]\n", tc_rank(), msg, suffix, file, line);
    tc_die();
}

static inline void tc_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_vfail(file, line, "", fmt, ap);
    va_end(ap);
}

static inline void tc_fail_eq(const char *file, int line, long long expected, long long got, const char *fmt, ...)
{
    char suffix[96];
    va_list ap;
    snprintf(suffix, sizeof suffix, " (expected %lld got %lld)", expected, got);
    va_start(ap, fmt);
    tc_vfail(file, line, suffix, fmt, ap);
    va_end(ap);
}

/* FAIL("what %d", x): unconditional failure. */
#define FAIL(...) tc_fail(__FILE__, __LINE__, __VA_ARGS__)

/* CHECK(cond, "what %d", x): fails with the description unless cond holds. */
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            tc_fail(__FILE__, __LINE__, __VA_ARGS__);                                                                  \
    } while (0)

/* CHECK_EQ(expected, got, "what %d", x): integer comparison, both values printed. */
#define CHECK_EQ(expected, got, ...)                                                                                   \
    do {                                                                                                               \
        long long tc_e_ = (long long)(expected), tc_g_ = (long long)(got);                                             \
        if (tc_e_ != tc_g_)                                                                                            \
            tc_fail_eq(__FILE__, __LINE__, tc_e_, tc_g_, __VA_ARGS__);                                                 \
    } while (0)

/* Name of an error class, for messages. */
static inline const char *tc_class_name(int cls)
{
    if (cls == MPI_SUCCESS) return "MPI_SUCCESS";
    if (cls == MPI_ERR_BUFFER) return "MPI_ERR_BUFFER";
    if (cls == MPI_ERR_COUNT) return "MPI_ERR_COUNT";
    if (cls == MPI_ERR_TYPE) return "MPI_ERR_TYPE";
    if (cls == MPI_ERR_TAG) return "MPI_ERR_TAG";
    if (cls == MPI_ERR_COMM) return "MPI_ERR_COMM";
    if (cls == MPI_ERR_RANK) return "MPI_ERR_RANK";
    if (cls == MPI_ERR_REQUEST) return "MPI_ERR_REQUEST";
    if (cls == MPI_ERR_ROOT) return "MPI_ERR_ROOT";
    if (cls == MPI_ERR_GROUP) return "MPI_ERR_GROUP";
    if (cls == MPI_ERR_OP) return "MPI_ERR_OP";
    if (cls == MPI_ERR_TOPOLOGY) return "MPI_ERR_TOPOLOGY";
    if (cls == MPI_ERR_DIMS) return "MPI_ERR_DIMS";
    if (cls == MPI_ERR_ARG) return "MPI_ERR_ARG";
    if (cls == MPI_ERR_UNKNOWN) return "MPI_ERR_UNKNOWN";
    if (cls == MPI_ERR_TRUNCATE) return "MPI_ERR_TRUNCATE";
    if (cls == MPI_ERR_OTHER) return "MPI_ERR_OTHER";
    if (cls == MPI_ERR_INTERN) return "MPI_ERR_INTERN";
    if (cls == MPI_ERR_IN_STATUS) return "MPI_ERR_IN_STATUS";
    if (cls == MPI_ERR_PENDING) return "MPI_ERR_PENDING";
    return "(another class)";
}

/* The error class of an error code (the code itself if MPI_Error_class fails). */
static inline int tc_class_of(int code)
{
    int cls = code;
    if (MPI_Error_class(code, &cls) != MPI_SUCCESS)
        return code;
    return cls;
}

static inline void tc_fail_mpi(const char *file, int line, const char *call, int rc)
{
    char str[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    str[0] = 0;
    if (MPI_Error_string(rc, str, &len) != MPI_SUCCESS)
        snprintf(str, sizeof str, "(MPI_Error_string failed)");
    str[MPI_MAX_ERROR_STRING] = 0;
    tc_fail(file, line, "%s (expected MPI_SUCCESS got %d, class %s: %s)", call, rc, tc_class_name(tc_class_of(rc)),
            str);
}

/* CHECK_MPI(MPI_Send(...)): the call must return MPI_SUCCESS. */
#define CHECK_MPI(call)                                                                                                \
    do {                                                                                                               \
        int tc_rc_ = (call);                                                                                           \
        if (tc_rc_ != MPI_SUCCESS)                                                                                     \
            tc_fail_mpi(__FILE__, __LINE__, #call, tc_rc_);                                                            \
    } while (0)

/*
 * tc_expect_class(rc, MPI_ERR_RANK, "what"): rc must be an error code of the
 * given class, and MPI_Error_string must describe it with a non-empty string.
 */
static inline void tc_expect_class_at(const char *file, int line, int rc, int expected, const char *what)
{
    char str[MPI_MAX_ERROR_STRING + 1];
    int len = -1, cls;
    if (rc == MPI_SUCCESS)
        tc_fail(file, line, "%s (expected %s got MPI_SUCCESS)", what, tc_class_name(expected));
    cls = tc_class_of(rc);
    if (cls != expected)
        tc_fail(file, line, "%s (expected %s got code %d of class %d %s)", what, tc_class_name(expected), rc, cls,
                tc_class_name(cls));
    memset(str, 0, sizeof str);
    if (MPI_Error_string(rc, str, &len) != MPI_SUCCESS)
        tc_fail(file, line, "%s: MPI_Error_string(%d) failed", what, rc);
    if (len <= 0 || len > MPI_MAX_ERROR_STRING || str[0] == 0 || (int)strlen(str) != len)
        tc_fail(file, line, "%s: MPI_Error_string(%d) gave length %d for \"%s\"", what, rc, len, str);
}
#define tc_expect_class(rc, expected, what) tc_expect_class_at(__FILE__, __LINE__, (rc), (expected), (what))

/* -------------------------------------------------------------- patterns */

static inline uint32_t tc_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static inline uint32_t tc_seed(int src, int key)
{
    return tc_mix32((uint32_t)src * 0x9E3779B1U ^ tc_mix32((uint32_t)key + 0x632BE5ABU));
}

static inline uint32_t tc_word(uint32_t seed, size_t w)
{
    return tc_mix32(seed + (uint32_t)w * 0x9E3779B9U + (uint32_t)(w >> 16 >> 16) * 0x85EBCA77U);
}

/* Byte i of the message keyed (src, key). */
static inline unsigned char tc_byte(int src, int key, size_t i)
{
    return (unsigned char)(tc_word(tc_seed(src, key), i >> 2) >> (8 * (i & 3)));
}

/* Fills buf[0..n) with the message keyed (src, key). */
static inline void tc_fill(void *buf, size_t n, int src, int key)
{
    unsigned char *p = (unsigned char *)buf;
    uint32_t seed = tc_seed(src, key);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w = tc_word(seed, i >> 2);
        p[i] = (unsigned char)w;
        p[i + 1] = (unsigned char)(w >> 8);
        p[i + 2] = (unsigned char)(w >> 16);
        p[i + 3] = (unsigned char)(w >> 24);
    }
    for (; i < n; i++)
        p[i] = (unsigned char)(tc_word(seed, i >> 2) >> (8 * (i & 3)));
}

/* Fills buf[0..n) with the complement of the message keyed (src, key), so that
 * a byte the receive does not write cannot pass tc_verify by chance. */
static inline void tc_unfill(void *buf, size_t n, int src, int key)
{
    unsigned char *p = (unsigned char *)buf;
    size_t i;
    tc_fill(buf, n, src, key);
    for (i = 0; i < n; i++)
        p[i] = (unsigned char)~p[i];
}

/* Checks buf[0..n) against the message keyed (src, key); reports the first
 * wrong byte and how many are wrong. */
static inline void tc_verify_at(const char *file, int line, const void *buf, size_t n, int src, int key,
                                const char *what)
{
    const unsigned char *p = (const unsigned char *)buf;
    uint32_t seed = tc_seed(src, key);
    size_t i, first = 0, bad = 0;
    for (i = 0; i < n; i++) {
        unsigned char want = (unsigned char)(tc_word(seed, i >> 2) >> (8 * (i & 3)));
        if (p[i] != want) {
            if (bad == 0)
                first = i;
            bad++;
        }
    }
    if (bad) {
        unsigned char want = tc_byte(src, key, first);
        tc_fail(file, line,
                "%s: byte %zu of %zu (from rank %d key %d) wrong, %zu bytes wrong in all (expected 0x%02x got "
                "0x%02x)",
                what, first, n, src, key, bad, want, p[first]);
    }
}
#define tc_verify(buf, n, src, key, what) tc_verify_at(__FILE__, __LINE__, (buf), (n), (src), (key), (what))

/* ---------------------------------------------------------------- buffers */

static inline unsigned char tc_guard_byte(size_t j)
{
    return (unsigned char)(0xA5U ^ (unsigned)(j * 37U));
}

/* Writes the guard pattern to buf[off..off+len) (the guard byte at offset k
 * is always tc_guard_byte(k), so ranges set and checked may differ). */
static inline void tc_guard_set(void *buf, size_t off, size_t len)
{
    unsigned char *p = (unsigned char *)buf;
    size_t k;
    for (k = off; k < off + len; k++)
        p[k] = tc_guard_byte(k);
}

/* Checks the guard pattern in buf[off..off+len). */
static inline void tc_guard_check_at(const char *file, int line, const void *buf, size_t off, size_t len,
                                     const char *what)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t k;
    for (k = off; k < off + len; k++)
        if (p[k] != tc_guard_byte(k))
            tc_fail(file, line,
                    "%s: guard byte at offset %zu (%zu past the end) was overwritten (expected 0x%02x got 0x%02x)",
                    what, k, k - off, tc_guard_byte(k), p[k]);
}
#define tc_guard_check(buf, off, len, what) tc_guard_check_at(__FILE__, __LINE__, (buf), (off), (len), (what))

/* A buffer of n usable bytes followed by TC_GUARD guard bytes (set). */
static inline unsigned char *tc_alloc(size_t n)
{
    unsigned char *p = (unsigned char *)malloc(n + TC_GUARD);
    if (!p) {
        fprintf(stderr, "rank %d: FAIL malloc(%zu)\n", tc_rank(), n + TC_GUARD);
        tc_die();
    }
    memset(p, 0x5A, n);
    tc_guard_set(p, n, TC_GUARD);
    return p;
}

/* Prepares buf (from tc_alloc, or with at least n + TC_GUARD bytes) to receive
 * the n-byte message keyed (src, key): complement pattern, then guard bytes. */
static inline void tc_prepare_recv(void *buf, size_t n, int src, int key)
{
    tc_unfill(buf, n, src, key);
    tc_guard_set(buf, n, TC_GUARD);
}

/* Verifies a received n-byte message keyed (src, key) and the guard after it. */
static inline void tc_check_recv_at(const char *file, int line, const void *buf, size_t n, int src, int key,
                                    const char *what)
{
    tc_verify_at(file, line, buf, n, src, key, what);
    tc_guard_check_at(file, line, buf, n, TC_GUARD, what);
}
#define tc_check_recv(buf, n, src, key, what) tc_check_recv_at(__FILE__, __LINE__, (buf), (n), (src), (key), (what))

/* Checks source, tag and byte count of a receive status. */
static inline void tc_check_status_at(const char *file, int line, const MPI_Status *st, int src, int tag,
                                      int bytes, const char *what)
{
    int count = -12345;
    if (st->MPI_SOURCE != src)
        tc_fail_eq(file, line, src, st->MPI_SOURCE, "%s: status.MPI_SOURCE", what);
    if (st->MPI_TAG != tag)
        tc_fail_eq(file, line, tag, st->MPI_TAG, "%s: status.MPI_TAG", what);
    if (MPI_Get_count(st, MPI_BYTE, &count) != MPI_SUCCESS)
        tc_fail(file, line, "%s: MPI_Get_count failed", what);
    if (count != bytes)
        tc_fail_eq(file, line, bytes, count, "%s: MPI_Get_count(MPI_BYTE)", what);
}
#define tc_check_status(st, src, tag, bytes, what)                                                                     \
    tc_check_status_at(__FILE__, __LINE__, (st), (src), (tag), (bytes), (what))

/* ------------------------------------------------------------------ misc */

/* Whether the program runs on Tandem (started by `tandem run`, or Tandem's
 * library version string), rather than on another MPI used to cross-check the
 * tests. Only behaviour the MPI standard leaves open is relaxed elsewhere. */
static inline int tc_is_tandem(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    if (getenv("TANDEM_JOB_ADDR") != NULL)
        return 1;
    memset(v, 0, sizeof v);
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS)
        return 0;
    return strstr(v, "Tandem") != NULL || strstr(v, "tandem") != NULL;
}

static inline void tc_sleep_ms(int ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Wall-clock seconds since the epoch (comparable between processes). */
static inline double tc_epoch(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The partner of rank in the pairs (0,1), (2,3), ...; -1 for the last rank of
 * an odd-sized job. */
static inline int tc_partner(int rank, int size)
{
    int p = rank ^ 1;
    return p < size ? p : -1;
}

/* For a program that needs at least min ranks: in a smaller job, rank 0
 * reports the skip, every rank finalizes, and the program exits 0. */
static inline void tc_require_size(int min, const char *name)
{
    int size = tc_size(), rank = tc_rank();
    if (size >= min)
        return;
    if (rank == 0) {
        printf("SKIP %s: needs at least %d ranks, have %d\n", name, min, size);
        fflush(stdout);
    }
    MPI_Finalize();
    if (rank == 0) {
        printf("PASS %s\n", name);
        fflush(stdout);
    }
    exit(0);
}

/* Ends a passing test: barrier, finalize, and "PASS <name>" from rank 0. */
static inline int tc_finish(const char *name)
{
    int rank = tc_rank();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fflush(stderr);
    CHECK_MPI(MPI_Finalize());
    if (rank == 0) {
        printf("PASS %s\n", name);
        fflush(stdout);
    }
    return 0;
}

/* Fails if more than `seconds` have passed since `start` (an MPI_Wtime value);
 * for polling loops that must not spin forever. */
static inline void tc_deadline_at(const char *file, int line, double start, double seconds, const char *what)
{
    if (MPI_Wtime() - start > seconds)
        tc_fail(file, line, "%s: still not done after %.0f s", what, seconds);
}
#define tc_deadline(start, seconds, what) tc_deadline_at(__FILE__, __LINE__, (start), (seconds), (what))

#endif /* TANDEM_TESTS_CHECK_H */

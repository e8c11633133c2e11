/*
 * shm_heap.c - large allocations and the shared heap (parameter shm_heap):
 * blocks of at least shm_heap_min bytes (default 256 KiB) that malloc and its
 * relatives return live in a memory file the host's other ranks map, so
 * that a large message between such buffers is one memcpy.
 *
 * Usage: shm_heap heap|libc
 *   heap: large blocks must be in the heap (a mapping of memfd:tandem-heap in
 *         /proc/self/maps), small ones not;
 *   libc: no block may be (a single rank on the host, or shm_heap=0).
 *
 * Checks, on every rank:
 *   - malloc, calloc, realloc (heap to heap, C library to heap, heap to C
 *     library), posix_memalign, aligned_alloc, memalign-like alignment,
 *     malloc_usable_size: contents kept, zeroed where calloc promises it (also
 *     for a block placed where a freed one was), alignment honoured, EINVAL
 *     for a bad alignment;
 *   - a child made by fork writes into a large block: the parent's copy is
 *     unchanged, and the child can still allocate and free;
 *   - four threads allocate, fill, grow, check and free large blocks of
 *     varying sizes at once (the heap is shared by the process's threads);
 * then, on 2 or more ranks, pairs (0,1), ... exchange messages of 256 KiB to
 * 16 MiB between large blocks, also at unaligned offsets inside them, both
 * ways at once and one way, every byte verified with guard bytes.
 */
#define _GNU_SOURCE
#include "check.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define NAME "shm_heap"

/* Whether p lies in a mapping of the shared heap's memory file. */
static int in_heap(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t a = (uintptr_t)p;
    int found = 0;
    CHECK(f != NULL, "cannot open /proc/self/maps");
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) {
            found = strstr(line, "tandem-heap") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

static int want_heap;

static void expect_place(const void *p, const char *what)
{
    CHECK(p != NULL, "%s: allocation failed", what);
    CHECK_EQ(want_heap, in_heap(p), "%s: in the shared heap", what);
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

static void allocation_calls(int rank)
{
    const size_t big = 3 * 1024 * 1024 + 5;
    unsigned char *a = malloc(big), *c, *r, *small;
    void *al = NULL;

    expect_place(a, "malloc(3 MiB + 5)");
    CHECK_EQ(0, (long long)((uintptr_t)a % 16), "malloc alignment");
    CHECK(malloc_usable_size(a) >= big, "malloc_usable_size %zu < %zu", malloc_usable_size(a), big);
    tc_fill(a, big, rank, 1);

    /* calloc: zero, and zero again where a written block was freed. */
    c = calloc(5, 1024 * 1024);
    expect_place(c, "calloc(5, 1 MiB)");
    CHECK(all_zero(c, 5u << 20), "calloc of 5 MiB is not all zero");
    memset(c, 0xab, 5u << 20);
    free(c);
    c = calloc(1, 5u << 20);
    expect_place(c, "calloc after free");
    CHECK(all_zero(c, 5u << 20), "calloc of 5 MiB after a freed written block is not all zero");
    free(c);

    /* realloc keeps the contents every way. */
    r = realloc(a, 9u << 20);
    expect_place(r, "realloc to 9 MiB");
    tc_verify(r, big, rank, 1, "realloc grown from 3 MiB");
    r = realloc(r, 100);
    CHECK(r != NULL && !in_heap(r), "realloc to 100 bytes leaves the heap");
    tc_verify(r, 100, rank, 1, "realloc shrunk to 100 bytes");
    small = realloc(r, 2u << 20);
    expect_place(small, "realloc of a small block to 2 MiB");
    tc_verify(small, 100, rank, 1, "realloc grown from 100 bytes");
    free(small);

    /* Small blocks stay with the C library. */
    small = malloc(1000);
    CHECK(small != NULL && !in_heap(small), "malloc(1000) is the C library's");
    CHECK(malloc_usable_size(small) >= 1000, "malloc_usable_size of a small block");
    free(small);
    free(NULL);

    /* Alignment. */
    CHECK_EQ(0, posix_memalign(&al, 2u << 20, 3u << 20), "posix_memalign 2 MiB");
    expect_place(al, "posix_memalign(2 MiB, 3 MiB)");
    CHECK_EQ(0, (long long)((uintptr_t)al % (2u << 20)), "posix_memalign alignment");
    memset(al, 1, 3u << 20);
    free(al);
    al = aligned_alloc(65536, 1u << 20);
    expect_place(al, "aligned_alloc(64 KiB, 1 MiB)");
    CHECK_EQ(0, (long long)((uintptr_t)al % 65536), "aligned_alloc alignment");
    free(al);
    CHECK_EQ(EINVAL, posix_memalign(&al, 3, 1u << 20), "posix_memalign with alignment 3");
    errno = 0;
    CHECK(aligned_alloc(96, 1u << 20) == NULL && errno == EINVAL, "aligned_alloc with alignment 96");
}

static void forked_child(int rank)
{
    const size_t n = 4u << 20;
    unsigned char *b = malloc(n);
    pid_t pid;
    int status = 0;

    expect_place(b, "malloc(4 MiB) before fork");
    tc_fill(b, n, rank, 2);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        unsigned char *more = malloc(n);
        int ok = b[0] == tc_byte(rank, 2, 0) && b[n - 1] == tc_byte(rank, 2, n - 1);
        memset(b, 0x5a, n);
        ok = ok && more != NULL && !in_heap(more);
        free(more);
        free(b);
        _exit(ok ? 0 : 3);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child saw a wrong heap (status %d)",
          status);
    tc_verify(b, n, rank, 2, "a large block after a forked child wrote to its copy");
    free(b);
}

#define THREADS 4
#define THREAD_ROUNDS 100

static void *thread_churn(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned seed = 12345u + (unsigned)t;
    unsigned char *keep[3] = {NULL, NULL, NULL};
    size_t keep_n[3] = {0, 0, 0};
    for (int i = 0; i < THREAD_ROUNDS; i++) {
        int k = i % 3;
        size_t n;
        seed = seed * 1103515245u + 12345u;
        n = (256u << 10) + (seed % (1u << 20));
        if (keep[k] != NULL) {
            tc_verify(keep[k], keep_n[k], t, k, "a block another thread's churn must not touch");
            if (i % 2) {
                unsigned char *g = realloc(keep[k], keep_n[k] + (512u << 10));
                CHECK(g != NULL, "realloc in thread %d", t);
                tc_verify(g, keep_n[k], t, k, "a block grown by realloc in a thread");
                keep[k] = g;
            }
            free(keep[k]);
        }
        keep[k] = malloc(n);
        CHECK(keep[k] != NULL, "malloc(%zu) in thread %d", n, t);
        keep_n[k] = n;
        tc_fill(keep[k], n, t, k);
    }
    for (int k = 0; k < 3; k++) {
        tc_verify(keep[k], keep_n[k], t, k, "a thread's last blocks");
        free(keep[k]);
    }
    return NULL;
}

static void threads_at_once(void)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, thread_churn, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_join(th[t], NULL) == 0, "pthread_join");
}

static void exchange(int rank, int partner)
{
    static const size_t sizes[] = {256u << 10, 1u << 20, 3u << 20, 4u << 20, 16u << 20};
    const size_t off = 4097; /* not page-aligned inside the blocks */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *s = malloc(n + off), *r = malloc(n + off + TC_GUARD);
        char what[96];
        MPI_Status st;
        expect_place(s, "send buffer");
        expect_place(r, "receive buffer");
        snprintf(what, sizeof what, "exchange of %zu bytes with rank %d", n, partner);
        /* Both ways at once, from the blocks' starts. */
        tc_fill(s, n, rank, (int)i);
        tc_prepare_recv(r, n, partner, (int)i);
        tc_guard_set(r, n, TC_GUARD);
        CHECK_MPI(MPI_Sendrecv(s, (int)n, MPI_BYTE, partner, 7, r, (int)n, MPI_BYTE, partner, 7, MPI_COMM_WORLD,
                               &st));
        tc_verify(r, n, partner, (int)i, what);
        tc_guard_check(r, n, TC_GUARD, what);
        /* One way, at an unaligned offset inside each block. */
        snprintf(what, sizeof what, "%zu bytes at offset %zu from rank %d", n, off, partner);
        if (rank < partner) {
            tc_fill(s + off, n, rank, 100 + (int)i);
            CHECK_MPI(MPI_Send(s + off, (int)n, MPI_BYTE, partner, 8, MPI_COMM_WORLD));
        } else {
            tc_prepare_recv(r + off, n, partner, 100 + (int)i);
            tc_guard_set(r + off, n, TC_GUARD);
            CHECK_MPI(MPI_Recv(r + off, (int)n, MPI_BYTE, partner, 8, MPI_COMM_WORLD, &st));
            tc_verify(r + off, n, partner, 100 + (int)i, what);
            tc_guard_check(r + off, n, TC_GUARD, what);
        }
        free(s);
        free(r);
    }
}

int main(int argc, char **argv)
{
    int rank, size, partner;
    MPI_Init(&argc, &argv);
    rank = tc_rank();
    size = tc_size();
    CHECK(argc == 2 && (strcmp(argv[1], "heap") == 0 || strcmp(argv[1], "libc") == 0),
          "usage: shm_heap heap|libc");
    want_heap = strcmp(argv[1], "heap") == 0;
    allocation_calls(rank);
    forked_child(rank);
    threads_at_once();
    partner = tc_partner(rank, size);
    if (partner >= 0)
        exchange(rank, partner);
    return tc_finish(NAME);
}

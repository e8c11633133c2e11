/*
 * cma_coop.c - the best a single-copy ping-pong through process_vm_readv /
 * process_vm_writev can do on this machine, without any MPI: the bound a
 * "cooperative single copy" (Tandem issue #3) would have to beat the
 * pipelined copy through the shared-memory rings with. No MPI.
 *
 *     cc -O2 examples/cma_coop.c -o cma_coop && ./cma_coop [BYTES [CHUNK]] [--huge]
 *
 * Two processes (fork) ping-pong BYTES (default 4 MiB) between
 * page-aligned buffers, as examples/pingpong.c does, and each message is
 * moved by one of three schemes, interleaved round by round:
 *   pull   the receiver reads it all (process_vm_readv; Tandem's RGET path)
 *   push   the sender writes it all (process_vm_writev; Tandem's CTW path)
 *   coop   both claim CHUNK-byte pieces (default 512 KiB) with an atomic
 *          fetch-and-add on a descriptor in shared memory: the receiver
 *          reads its pieces, the sender writes its pieces
 * and one core's memcpy of BYTES is timed in the same rounds. With --huge
 * the buffers are 2 MiB aligned and advised MADV_HUGEPAGE (transparent huge
 * pages). Every byte of the last message of each scheme is checked.
 *
 * Prints the median over 21 rounds of 20 round trips per scheme, as
 * bandwidth of half a round trip (10^9 bytes per second), and its ratio to
 * memcpy. There is no matching, no request and no wake-up: the processes
 * spin on the descriptor, so this is an upper bound for a library.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 21
#define TRIPS 20

enum scheme { PULL, PUSH, COOP, SCHEMES };
static const char *scheme_name[SCHEMES] = {"pull", "push", "coop"};

/* One per direction of the ping-pong; every field crossing processes is
 * either an atomic or written once before the processes meet. */
struct lane {
    _Alignas(64) atomic_ulong seq; /* 2k-1: receiver posted message k; 2k: sender saw it done */
    _Alignas(64) atomic_ulong next; /* next unclaimed offset */
    _Alignas(64) atomic_ulong done; /* bytes copied */
    _Alignas(64) unsigned long src_addr, dst_addr;
    int src_pid, dst_pid;
};

struct shared {
    struct lane lane[2]; /* lane d: rank d sends to rank 1-d */
    atomic_int ready[2];
    atomic_int failed; /* a copy failed: both processes stop */
    unsigned long sbuf[2], rbuf[2];
    int pid[2];
};

static size_t bytes, chunk;
static struct shared *sh;

/* Waits until *word reaches `want` (at least, if `at_least`); leaves if the
 * other process failed, so that neither ever spins forever. */
static void spin_until(atomic_ulong *word, unsigned long want, int at_least)
{
    for (;;) {
        unsigned long v = atomic_load(word);
        if (v == want || (at_least && v > want))
            return;
        if (atomic_load(&sh->failed))
            _exit(1);
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *buffer(int huge)
{
    char *p;
    if (posix_memalign((void **)&p, huge ? (size_t)2 << 20 : 4096, bytes) != 0)
        return NULL;
    if (huge)
        madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* Claims pieces of lane `l` until none is left; `sender` writes its pieces
 * into the receiver, the receiver reads its pieces from the sender. */
static void copy_pieces(struct lane *l, int sender, size_t piece)
{
    for (;;) {
        unsigned long off = atomic_fetch_add(&l->next, piece);
        if (off >= bytes)
            return;
        size_t n = bytes - off < piece ? bytes - off : piece;
        struct iovec here, there;
        ssize_t got;
        if (sender) {
            here = (struct iovec){(void *)(l->src_addr + off), n};
            there = (struct iovec){(void *)(l->dst_addr + off), n};
            got = process_vm_writev(l->dst_pid, &here, 1, &there, 1, 0);
        } else {
            here = (struct iovec){(void *)(l->dst_addr + off), n};
            there = (struct iovec){(void *)(l->src_addr + off), n};
            got = process_vm_readv(l->src_pid, &here, 1, &there, 1, 0);
        }
        if (got != (ssize_t)n) {
            perror(sender ? "process_vm_writev" : "process_vm_readv");
            atomic_store(&sh->failed, 1);
            _exit(1);
        }
        atomic_fetch_add(&l->done, n);
    }
}

/* Message number `k` of lane `l`, seen from one side. */
static void message(struct lane *l, int sender, unsigned long k, enum scheme s)
{
    if (!sender) {
        /* Both sides have left copy_pieces for message k-1 (the sender
         * before it said 2k-2, this side before waiting for that), so the
         * counters are free to reset before posting. */
        atomic_store(&l->next, 0);
        atomic_store(&l->done, 0);
        atomic_store(&l->seq, 2 * k - 1);
        if (s == PULL)
            copy_pieces(l, 0, bytes);
        else if (s == COOP)
            copy_pieces(l, 0, chunk);
        spin_until(&l->seq, 2 * k, 0);
    } else {
        spin_until(&l->seq, 2 * k - 1, 0);
        if (s == PUSH)
            copy_pieces(l, 1, bytes);
        else if (s == COOP)
            copy_pieces(l, 1, chunk);
        spin_until(&l->done, bytes, 1);
        atomic_store(&l->seq, 2 * k);
    }
}

int main(int argc, char **argv)
{
    int huge = 0, pos = 0;
    bytes = (size_t)4 << 20;
    chunk = (size_t)512 << 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--huge") == 0)
            huge = 1;
        else if (pos++ == 0)
            bytes = (size_t)atol(argv[i]);
        else
            chunk = (size_t)atol(argv[i]);
    }
    if (bytes < 64 || chunk == 0) {
        fprintf(stderr, "usage: %s [BYTES [CHUNK]] [--huge]\n", argv[0]);
        return 2;
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    int me = child == 0;
    char *sbuf = buffer(huge), *rbuf = buffer(huge), *copy = buffer(huge);
    if (sbuf == NULL || rbuf == NULL || copy == NULL) {
        atomic_store(&sh->failed, 1);
        return 1;
    }
    memset(sbuf, 'a' + me, bytes);
    for (size_t i = 0; i < bytes; i += 4096) /* vary the bytes inside a page too */
        if (i + (i / 4096) % 64 < bytes)
            sbuf[i + (i / 4096) % 64] = (char)(i / 4096);
    memset(rbuf, 0, bytes);
    memset(copy, 0, bytes);
    sh->pid[me] = getpid();
    sh->sbuf[me] = (unsigned long)sbuf;
    sh->rbuf[me] = (unsigned long)rbuf;
    atomic_store(&sh->ready[me], 1);
    while (!atomic_load(&sh->ready[1 - me]))
        if (atomic_load(&sh->failed))
            return 1;
    struct lane *mine = &sh->lane[me], *theirs = &sh->lane[1 - me];
    mine->src_addr = sh->sbuf[me];
    mine->dst_addr = sh->rbuf[1 - me];
    mine->src_pid = sh->pid[me];
    mine->dst_pid = sh->pid[1 - me];
    atomic_store(&sh->ready[me], 2);
    while (atomic_load(&sh->ready[1 - me]) != 2)
        if (atomic_load(&sh->failed))
            return 1;

    double t[SCHEMES + 1][ROUNDS];
    unsigned long k[2] = {0, 0};
    int bad = 0;
    for (int r = -1; r < ROUNDS; r++) {
        for (int s = 0; s < SCHEMES; s++) {
            double t0 = now();
            for (int i = 0; i < TRIPS; i++) {
                if (me == 0) {
                    message(mine, 1, ++k[0], s);
                    message(theirs, 0, ++k[1], s);
                } else {
                    message(theirs, 0, ++k[0], s);
                    message(mine, 1, ++k[1], s);
                }
            }
            if (r >= 0)
                t[s][r] = now() - t0;
            if (r == ROUNDS - 1) {
                /* one more message each way into a cleared buffer, checked */
                memset(rbuf, 0, bytes);
                if (me == 0) {
                    message(mine, 1, ++k[0], s);
                    message(theirs, 0, ++k[1], s);
                } else {
                    message(theirs, 0, ++k[0], s);
                    message(mine, 1, ++k[1], s);
                }
                for (size_t i = 0; i < bytes; i++) {
                    size_t page = i / 4096;
                    char want = i % 4096 == page % 64 ? (char)page : (char)('a' + 1 - me);
                    if (rbuf[i] != want) {
                        fprintf(stderr, "rank %d, %s: byte %zu is %d, not %d\n", me,
                                scheme_name[s], i, rbuf[i], want);
                        bad = 1;
                        break;
                    }
                }
            }
        }
        if (me == 0 && r >= 0) {
            double t0 = now();
            for (int i = 0; i < TRIPS; i++)
                memcpy(copy, sbuf, bytes);
            t[SCHEMES][r] = now() - t0;
        }
    }
    if (me == 1) {
        fflush(stderr);
        _exit(bad);
    }
    int status = 0;
    waitpid(child, &status, 0);
    for (int s = 0; s <= SCHEMES; s++)
        qsort(t[s], ROUNDS, sizeof(double), cmp);
    /* pingpong: TRIPS round trips, each two messages */
    double memcpy_bw = (double)bytes * TRIPS / t[SCHEMES][ROUNDS / 2] / 1e9;
    for (int s = 0; s < SCHEMES; s++) {
        double bw = (double)bytes * 2 * TRIPS / t[s][ROUNDS / 2] / 1e9;
        printf("%-6s %zu bytes, %s pages: %5.1f GB/s = %.2fx memcpy\n", scheme_name[s], bytes,
               huge ? "huge" : "4 KiB", bw, bw / memcpy_bw);
    }
    printf("memcpy %zu bytes: %5.1f GB/s (coop pieces of %zu bytes)\n", bytes, memcpy_bw, chunk);
    return bad || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

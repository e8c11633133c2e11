/*
 * rwapi_basic.c - the Remote-Write API end to end.
 *
 *   - nodes hand out block addresses in small messages, then each writes
 *     to its right-hand neighbour (sizes 1 B .. 4 MiB, at odd offsets) and
 *     announces each write with a small message: when the announcement
 *     arrives the data must be there, byte for byte, and nothing around it
 *     may have changed (write-then-notify ordering);
 *   - rwapi_issent reaches 1, rwapi_flush succeeds;
 *   - refused writes: beyond the end of the target block
 *     (RWAPI_ERR_RANGE, target bytes untouched), into a block the target
 *     freed (RWAPI_ERR_REGION), to a node that does not exist
 *     (RWAPI_ERR_NODE), from memory not from rwapi_alloc;
 *   - 1000 writes outstanding at once, then one flush;
 *   - with argument "mpi": MPI_Init first, RWAPI and MPI traffic mixed;
 *   - with argument "big": one 64 MiB write, every byte checked.
 *
 * Prints "PASS rwapi_basic" on node 0.
 */
#include <rwapi.h>
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rw_check.h"

static unsigned char pattern(int src, int round, size_t i)
{
    return (unsigned char)((src * 131 + round * 31 + i * 7 + (i >> 8)) & 0xff);
}

/* Messages taken from the queue while looking for another kind. */
#define STASH 64
static rwapi_small stash[STASH];
static int stash_from[STASH], stashed;

static int kind_of(const rwapi_small *m) { return m->bytes[0]; }

/* Waits for the next small message of `kind` (0: any) from `want` (-1:
 * any), keeping the others for later. */
static void receive_match(int kind, int want, int *node, rwapi_small *msg)
{
    for (int i = 0; i < stashed; i++) {
        if ((kind == 0 || kind_of(&stash[i]) == kind) && (want < 0 || stash_from[i] == want)) {
            *node = stash_from[i];
            *msg = stash[i];
            memmove(stash + i, stash + i + 1, (size_t)(stashed - i - 1) * sizeof *stash);
            memmove(stash_from + i, stash_from + i + 1, (size_t)(stashed - i - 1) * sizeof(int));
            stashed--;
            return;
        }
    }
    for (;;) {
        int r = rwapi_receive(node, msg);
        CHECK(r >= 0, "rwapi_receive returned %d", r);
        if (r == 0)
            continue;
        if ((kind == 0 || kind_of(msg) == kind) && (want < 0 || *node == want))
            return;
        CHECK(stashed < STASH, "too many stashed messages");
        stash[stashed] = *msg;
        stash_from[stashed++] = *node;
    }
}

static void receive_kind(int kind, int *node, rwapi_small *msg)
{
    receive_match(kind, -1, node, msg);
}

enum { WROTE = 2, VERIFIED = 3, FREED = 4, DONE = 5, REFUSED = 6 };

static rwapi_small make(int kind, uint64_t a, uint32_t b)
{
    rwapi_small m;
    memset(&m, 0, sizeof m);
    m.bytes[0] = (unsigned char)kind;
    memcpy(m.bytes + 4, &b, 4);
    memcpy(m.bytes + 8, &a, 8);
    return m;
}

static uint64_t a_of(const rwapi_small *m)
{
    uint64_t a;
    memcpy(&a, m->bytes + 8, 8);
    return a;
}
static uint32_t b_of(const rwapi_small *m)
{
    uint32_t b;
    memcpy(&b, m->bytes + 4, 4);
    return b;
}

int main(int argc, char **argv)
{
    int with_mpi = 0, big = 0;
    for (int a = 1; a < argc; a++) {
        with_mpi |= strcmp(argv[a], "mpi") == 0;
        big |= strcmp(argv[a], "big") == 0;
    }
    if (with_mpi)
        MPI_Init(&argc, &argv);
    CHECK(rwapi_init(argc, argv) == RWAPI_OK, "rwapi_init");
    me = rwapi_rank();
    int n = rwapi_size();
    CHECK(n >= 2, "needs 2 nodes, got %d", n);
    int right = (me + 1) % n, left = (me + n - 1) % n;

    const size_t block = (4u << 20) + 4096;
    rwapi_net mine, src_net, small_net;
    unsigned char *buf = rwapi_alloc(block, &mine);
    unsigned char *src = rwapi_alloc(block, &src_net);
    unsigned char *tiny = rwapi_alloc(64, &small_net);
    CHECK(buf && src && tiny, "rwapi_alloc");
    CHECK(mine.node == me, "net names its owner");
    for (size_t i = 0; i < block; i++)
        CHECK(buf[i] == 0, "rwapi_alloc memory is zeroed");

    /* Hand the left neighbour our block addresses: the whole net fits in a
     * small message. */
    rwapi_small m;
    memcpy(m.bytes, &mine, sizeof mine);
    CHECK(rwapi_send(left, m) == RWAPI_OK, "rwapi_send");
    memcpy(m.bytes, &small_net, sizeof small_net);
    CHECK(rwapi_send(left, m) == RWAPI_OK, "rwapi_send");
    int from;
    rwapi_net target, target_small;
    receive_match(0, right, &from, &m);
    CHECK(from == right, "address from %d, expected %d", from, right);
    memcpy(&target, m.bytes, sizeof target);
    receive_match(0, right, &from, &m);
    CHECK(from == right, "address from %d, expected %d", from, right);
    memcpy(&target_small, m.bytes, sizeof target_small);
    CHECK(target.node == right && target_small.node == right, "nets name node %d", right);

    if (with_mpi) {
        int token = me, got = -1;
        MPI_Sendrecv(&token, 1, MPI_INT, right, 5, &got, 1, MPI_INT, left, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        CHECK(got == left, "MPI next to RWAPI: got %d", got);
    }

    /* Writes of growing size, each announced by a small message. */
    static const size_t sizes[] = {1, 7, 100, 4096, 65536 + 3, 1 << 20, 4u << 20};
    const int rounds = (int)(sizeof sizes / sizeof sizes[0]);
    for (int round = 0; round < rounds; round++) {
        size_t len = sizes[round], off = (size_t)round * 3 % 4096;
        for (size_t i = 0; i < len; i++)
            src[off + i] = pattern(me, round, i);
        rwapi_sid sid =
            rwapi_write(right, rwapi_net_offset(src_net, off), rwapi_net_offset(target, off), len);
        CHECK(sid > 0, "rwapi_write of %zu bytes returned %lld", len, (long long)sid);
        CHECK(rwapi_send(right, make(WROTE, off, (uint32_t)round)) == RWAPI_OK, "announce");

        receive_kind(WROTE, &from, &m);
        CHECK(from == left && kind_of(&m) == WROTE && b_of(&m) == (uint32_t)round,
              "announcement %d from %d", kind_of(&m), from);
        size_t roff = a_of(&m), rlen = sizes[round];
        for (size_t i = 0; i < rlen; i++)
            CHECK(buf[roff + i] == pattern(left, round, i),
                  "round %d byte %zu of %zu: %u != %u", round, i, rlen, buf[roff + i],
                  pattern(left, round, i));
        /* The writer's next round overwrites this block: tell it we are done. */
        CHECK(rwapi_send(left, make(VERIFIED, 0, (uint32_t)round)) == RWAPI_OK, "verified");
        /* Wait until our source buffer is free before rewriting it. */
        int sent;
        while ((sent = rwapi_issent(sid)) == 0)
            ;
        CHECK(sent == 1, "rwapi_issent returned %d", sent);
        CHECK(rwapi_flush() == RWAPI_OK, "rwapi_flush");
        receive_kind(VERIFIED, &from, &m);
        CHECK(from == right && kind_of(&m) == VERIFIED && b_of(&m) == (uint32_t)round,
              "verification of round %d", round);
    }

    /* Many writes outstanding at once: 1000 of 512 bytes at distinct
     * offsets, one flush, one notice. */
    enum { MANY = 1000, PIECE = 512 };
    for (size_t i = 0; i < (size_t)MANY * PIECE; i++)
        src[i] = pattern(me, 99, i);
    for (int k = 0; k < MANY; k++) {
        rwapi_sid sid = rwapi_write(right, rwapi_net_offset(src_net, (size_t)k * PIECE),
                                    rwapi_net_offset(target, (size_t)(MANY - 1 - k) * PIECE), PIECE);
        CHECK(sid > 0, "write %d of many: %lld", k, (long long)sid);
    }
    CHECK(rwapi_flush() == RWAPI_OK, "flush of many writes");
    CHECK(rwapi_send(right, make(WROTE, 0, 99)) == RWAPI_OK, "announce many");
    receive_kind(WROTE, &from, &m);
    CHECK(from == left && b_of(&m) == 99, "many-writes notice");
    for (int k = 0; k < MANY; k++)
        for (size_t i = 0; i < PIECE; i++)
            CHECK(buf[(size_t)(MANY - 1 - k) * PIECE + i] == pattern(left, 99, (size_t)k * PIECE + i),
                  "many writes: piece %d byte %zu", k, i);
    CHECK(rwapi_send(left, make(VERIFIED, 0, 99)) == RWAPI_OK, "verified many");
    receive_kind(VERIFIED, &from, &m);

    /* One 64 MiB write, when asked ("big"). */
    if (big) {
        const size_t huge = 64u << 20;
        rwapi_net hsrc, hdst, htarget;
        unsigned char *hs = rwapi_alloc(huge, &hsrc), *hd = rwapi_alloc(huge, &hdst);
        CHECK(hs && hd, "rwapi_alloc of 64 MiB");
        for (size_t i = 0; i < huge; i++)
            hs[i] = pattern(me, 64, i);
        memcpy(m.bytes, &hdst, sizeof hdst);
        CHECK(rwapi_send(left, m) == RWAPI_OK, "64 MiB address");
        receive_match(0, right, &from, &m);
        memcpy(&htarget, m.bytes, sizeof htarget);
        CHECK(rwapi_write(right, hsrc, htarget, huge) > 0, "64 MiB write");
        CHECK(rwapi_flush() == RWAPI_OK, "flush of 64 MiB");
        CHECK(rwapi_send(right, make(WROTE, 0, 64)) == RWAPI_OK, "announce 64 MiB");
        receive_kind(WROTE, &from, &m);
        for (size_t i = 0; i < huge; i++)
            CHECK(hd[i] == pattern(left, 64, i), "64 MiB write: byte %zu", i);
        CHECK(rwapi_send(left, make(VERIFIED, 0, 64)) == RWAPI_OK, "verified 64 MiB");
        receive_kind(VERIFIED, &from, &m);
        CHECK(rwapi_free(hs) == RWAPI_OK && rwapi_free(hd) == RWAPI_OK, "free 64 MiB blocks");
    }

    /* Beyond the end of the target's small block: refused whole. */
    memset(src, 0xab, 64);
    rwapi_sid bad = rwapi_write(right, src_net, rwapi_net_offset(target_small, 60), 8);
    CHECK(bad > 0, "an asynchronous refusal still gets a send id (%lld)", (long long)bad);
    int fl = rwapi_flush();
    CHECK(fl == RWAPI_ERR_RANGE, "flush reports the out-of-range write (%d)", fl);
    int st;
    while ((st = rwapi_issent(bad)) == 0)
        ;
    CHECK(st == RWAPI_ERR_RANGE, "issent of the refused write: %d", st);
    CHECK(rwapi_flush() == RWAPI_OK, "a refusal is reported once");
    CHECK(rwapi_send(right, make(REFUSED, 0, 0)) == RWAPI_OK, "refusal seen");

    /* Errors found locally. */
    CHECK(rwapi_write(n, src_net, target, 1) == RWAPI_ERR_NODE, "write to node n");
    CHECK(rwapi_write(-1, src_net, target, 1) == RWAPI_ERR_NODE, "write to node -1");
    CHECK(rwapi_write(right, rwapi_net_offset(src_net, block - 1), target, 2) == RWAPI_ERR_RANGE,
          "source beyond its block");
    rwapi_net forged = src_net;
    forged.key += 1000;
    CHECK(rwapi_write(right, forged, target, 1) < 0, "source not from rwapi_alloc");
    CHECK(rwapi_send(n, m) == RWAPI_ERR_NODE, "small message to node n");
    CHECK(rwapi_issent(1ll << 40) == RWAPI_ERR_SID, "unknown send id");
    CHECK(rwapi_free(src + 1) < 0, "free of a pointer not from rwapi_alloc");

    /* Our small block, untouched by the refused write, is then freed; the
     * left neighbour's write into it must be refused. */
    receive_kind(REFUSED, &from, &m);
    CHECK(from == left, "refusal notice from %d", from);
    for (int i = 0; i < 64; i++)
        CHECK(tiny[i] == 0, "refused write left byte %d alone (%u)", i, tiny[i]);
    CHECK(rwapi_free(tiny) == RWAPI_OK, "rwapi_free");
    CHECK(rwapi_send(left, make(FREED, 0, 0)) == RWAPI_OK, "announce free");
    receive_kind(FREED, &from, &m);
    CHECK(from == right && kind_of(&m) == FREED, "free announcement");
    rwapi_write(right, src_net, target_small, 8);
    CHECK(rwapi_flush() == RWAPI_ERR_REGION, "write into a freed block is refused");

    CHECK(rwapi_send(right, make(DONE, 0, 0)) == RWAPI_OK, "done");
    receive_kind(DONE, &from, &m);
    CHECK(kind_of(&m) == DONE, "last message");
    CHECK(rwapi_free(buf) == RWAPI_OK && rwapi_free(src) == RWAPI_OK, "rwapi_free");
    CHECK(rwapi_finalize() == RWAPI_OK, "rwapi_finalize");
    if (with_mpi)
        MPI_Finalize();
    if (me == 0)
        printf("PASS rwapi_basic\n");
    return 0;
}

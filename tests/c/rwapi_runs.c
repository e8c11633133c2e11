/*
 * rwapi_runs.c - runs of RWAPI writes to one node with no other call
 * between them, which over TCP wait to leave together in one sendmsg
 * (counter tcp_batched): every byte of every write arrives, and arrives
 * before what the writer does next says so.
 *
 * Each node writes to its right neighbour, on a ring, three kinds of run:
 *  1. a run of a few hundred writes of odd sizes and offsets, then a small
 *     message announcing them (the seed's write-then-notify pattern);
 *  2. a run, then 20 ms of computing with no RWAPI call, then the notice;
 *  3. a run, then rwapi_flush, then the notice;
 * and waits, before reusing its source, until rwapi_issent says every
 * write of the run has left. The target checks every byte.
 */
#include <rwapi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rw_check.h"

#define WRITES 300
#define BLOCK (4u << 20)

static unsigned char pattern(int src, int round, size_t i)
{
    return (unsigned char)((src * 151 + round * 29 + i * 13 + (i >> 9)) & 0xff);
}

/* Write k of a run: its offset and size (odd sizes from 1 B to 20 KiB,
 * one after another with gaps, so that a byte out of place shows). */
static size_t size_of(int k) { return 1 + (size_t)k * 69 % 20000; }

static size_t offset_of(int k)
{
    size_t off = 3;
    for (int j = 0; j < k; j++)
        off += size_of(j) + 5;
    return off;
}

enum { WROTE = 2, SEEN = 3 };

static rwapi_small make(int kind, int round)
{
    rwapi_small m;
    memset(&m, 0, sizeof m);
    m.bytes[0] = (unsigned char)kind;
    m.bytes[1] = (unsigned char)round;
    return m;
}

/* Small messages taken while waiting for another one (messages from
 * different nodes may come in any order; from one node, in order). */
#define STASH 16
static rwapi_small stash[STASH];
static int stash_from[STASH], stashed;

/* The next small message from `want`, which must be `kind` of `round`
 * (kind 0: any; then it is returned in *out). */
static void expect_from(int want, int kind, int round, rwapi_small *out)
{
    rwapi_small m;
    int node = -1, found = 0;
    for (int i = 0; i < stashed && !found; i++) {
        if (stash_from[i] == want) {
            m = stash[i];
            node = want;
            memmove(stash + i, stash + i + 1, (size_t)(stashed - i - 1) * sizeof *stash);
            memmove(stash_from + i, stash_from + i + 1, (size_t)(stashed - i - 1) * sizeof(int));
            stashed--;
            found = 1;
        }
    }
    while (!found) {
        int r = rwapi_receive(&node, &m);
        CHECK(r >= 0, "rwapi_receive returned %d", r);
        if (r == 0)
            continue;
        if (node == want) {
            found = 1;
        } else {
            CHECK(stashed < STASH, "too many stashed messages");
            stash[stashed] = m;
            stash_from[stashed++] = node;
        }
    }
    if (out)
        *out = m;
    if (kind)
        CHECK(m.bytes[0] == kind && m.bytes[1] == round,
              "expected kind %d round %d from %d, got kind %d round %d", kind, round, want,
              m.bytes[0], m.bytes[1]);
}

static void expect(int kind, int round, int want) { expect_from(want, kind, round, NULL); }

int main(int argc, char **argv)
{
    CHECK(rwapi_init(argc, argv) == RWAPI_OK, "rwapi_init");
    me = rwapi_rank();
    int n = rwapi_size();
    CHECK(n >= 2, "needs 2 nodes, got %d", n);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    CHECK(offset_of(WRITES) < BLOCK, "the run fits the block");

    rwapi_net dst_net, src_net, target;
    unsigned char *dst = rwapi_alloc(BLOCK, &dst_net);
    unsigned char *src = rwapi_alloc(BLOCK, &src_net);
    CHECK(dst && src, "rwapi_alloc");
    rwapi_small m;
    memcpy(m.bytes, &dst_net, sizeof dst_net);
    CHECK(rwapi_send(left, m) == RWAPI_OK, "rwapi_send");
    int r;
    expect_from(right, 0, 0, &m);
    memcpy(&target, m.bytes, sizeof target);
    CHECK(target.node == right, "the address names node %d", target.node);

    static rwapi_sid sids[WRITES];
    for (int round = 0; round < 9; round++) {
        int kind = round % 3;
        for (int k = 0; k < WRITES; k++) {
            size_t off = offset_of(k);
            for (size_t i = 0; i < size_of(k); i++)
                src[off + i] = pattern(me, round, off + i);
        }
        /* The run: nothing but writes to one node. */
        for (int k = 0; k < WRITES; k++) {
            size_t off = offset_of(k);
            sids[k] = rwapi_write(right, rwapi_net_offset(src_net, off),
                                  rwapi_net_offset(target, off), size_of(k));
            CHECK(sids[k] > 0, "write %d of round %d returned %lld", k, round, (long long)sids[k]);
        }
        if (kind == 1) {
            compute_for(0.02);
        } else if (kind == 2) {
            CHECK(rwapi_flush() == RWAPI_OK, "rwapi_flush");
        }
        CHECK(rwapi_send(right, make(WROTE, round)) == RWAPI_OK, "notice");

        expect(WROTE, round, left);
        for (int k = 0; k < WRITES; k++) {
            size_t off = offset_of(k);
            for (size_t i = 0; i < size_of(k); i++)
                CHECK(dst[off + i] == pattern(left, round, off + i),
                      "round %d write %d (%zu bytes at %zu) byte %zu: %u, expected %u", round, k,
                      size_of(k), off, i, dst[off + i], pattern(left, round, off + i));
            CHECK(dst[off + size_of(k)] == 0, "round %d: the gap after write %d was written",
                  round, k);
        }
        /* The writer's next round overwrites the block: say we are done,
         * and wait until our own writes' sources are free. */
        CHECK(rwapi_send(left, make(SEEN, round)) == RWAPI_OK, "seen");
        for (int k = 0; k < WRITES; k++) {
            while ((r = rwapi_issent(sids[k])) == 0)
                ;
            CHECK(r == 1, "rwapi_issent of write %d returned %d", k, r);
        }
        expect(SEEN, round, right);
    }
    CHECK(rwapi_free(dst) == RWAPI_OK && rwapi_free(src) == RWAPI_OK, "rwapi_free");
    CHECK(rwapi_finalize() == RWAPI_OK, "rwapi_finalize");
    if (me == 0)
        printf("PASS rwapi_runs\n");
    return 0;
}

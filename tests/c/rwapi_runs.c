/*
 * rwapi_runs.c - runs of RWAPI writes to one node with no other call
 * between them, which over TCP wait to leave together in one sendmsg
 * (counter tcp_batched): every byte of every write arrives, and arrives
 * before what the writer does next says so.
 *
 * Each node writes to its right neighbour, on a ring, three kinds of run:
 *  1. a run of a few hundred writes of odd sizes and offsets, then a small
 *     message announcing them (the RWAPI paper's write-then-notify pattern);
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

#include "rw_ring.h"

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

int main(int argc, char **argv)
{
    CHECK(offset_of(WRITES) < BLOCK, "the run fits the block");
    unsigned char *dst, *src;
    rwapi_net src_net, target;
    ring_start(argc, argv, BLOCK, BLOCK, &dst, &src, &src_net, &target);
    int r;

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

/*
 * rwapi_notice.c - the RWAPI paper's usage pattern one write at a time: write a
 * block into the right neighbour, then send it a small message saying so.
 * Over TCP a write that the program has announced at once before waits
 * for its announcement and leaves with it in one sendmsg (counter
 * tcp_batched); every byte must still be there when the notice arrives,
 * also when the writer computes for a while between write and notice (its
 * write then waits that long), and when it makes other calls in between.
 *
 * Rounds cycle through: notice at once; 5 ms of computing, then the
 * notice; rwapi_issent until sent, then the notice. Sizes run from 1 byte
 * to 64 KiB.
 */
#include <rwapi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rw_ring.h"

#define ROUNDS 240
#define BLOCK (64u << 10)

enum { WROTE = 2, SEEN = 3 };

static size_t size_of(int round) { return 1 + (size_t)round * 2741 % BLOCK; }

static unsigned char pattern(int src, int round, size_t i)
{
    return (unsigned char)((src * 37 + round * 11 + i * 7 + (i >> 8)) & 0xff);
}

static void say(int to, int kind, int round)
{
    CHECK(rwapi_send(to, make(kind, round)) == RWAPI_OK, "rwapi_send");
}

int main(int argc, char **argv)
{
    unsigned char *dst, *src;
    rwapi_net src_net, target;
    ring_start(argc, argv, BLOCK + 1, BLOCK, &dst, &src, &src_net, &target);
    int r;

    for (int round = 0; round < ROUNDS; round++) {
        size_t size = size_of(round);
        for (size_t i = 0; i < size; i++)
            src[i] = pattern(me, round, i);
        rwapi_sid sid = rwapi_write(right, src_net, target, size);
        CHECK(sid > 0, "write of round %d returned %lld", round, (long long)sid);
        switch (round % 3) {
        case 0:
            break;
        case 1:
            compute_for(0.005);
            break;
        case 2:
            while ((r = rwapi_issent(sid)) == 0)
                ;
            CHECK(r == 1, "rwapi_issent returned %d", r);
            break;
        }
        say(right, WROTE, round);

        expect(WROTE, round, left);
        size_t got = size_of(round);
        for (size_t i = 0; i < got; i++)
            CHECK(dst[i] == pattern(left, round, i), "round %d (%zu bytes) byte %zu: %u, expected %u",
                  round, got, i, dst[i], pattern(left, round, i));
        CHECK(dst[BLOCK] == 0, "round %d: a byte past the block was written", round);
        /* The writer's next round overwrites the block and our source. */
        say(left, SEEN, round);
        while ((r = rwapi_issent(sid)) == 0)
            ;
        CHECK(r == 1, "rwapi_issent returned %d", r);
        expect(SEEN, round, right);
    }
    CHECK(rwapi_free(dst) == RWAPI_OK && rwapi_free(src) == RWAPI_OK, "rwapi_free");
    CHECK(rwapi_finalize() == RWAPI_OK, "rwapi_finalize");
    if (me == 0)
        printf("PASS rwapi_notice\n");
    return 0;
}

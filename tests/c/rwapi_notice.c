/*
 * rwapi_notice.c - the seed's usage pattern one write at a time: write a
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

#include "rw_check.h"

#define ROUNDS 240
#define BLOCK (64u << 10)

enum { WROTE = 2, SEEN = 3 };

static size_t size_of(int round) { return 1 + (size_t)round * 2741 % BLOCK; }

static unsigned char pattern(int src, int round, size_t i)
{
    return (unsigned char)((src * 37 + round * 11 + i * 7 + (i >> 8)) & 0xff);
}

/* The next small message of `kind` from `from`, which must be of `round`
 * (ROUNDS < 256: one byte holds it). On a ring of 3 or more, the right
 * neighbour's answer may come while we wait for the left one's notice:
 * one message is kept aside. */
static int pending_kind = -1, pending_round, pending_from;

static void expect(int kind, int round, int from)
{
    int node;
    rwapi_small m;
    for (;;) {
        if (pending_kind == kind && pending_from == from) {
            CHECK(pending_round == round, "kind %d: round %d, expected %d", kind, pending_round,
                  round);
            pending_kind = -1;
            return;
        }
        int r = rwapi_receive(&node, &m);
        CHECK(r >= 0, "rwapi_receive returned %d", r);
        if (r == 0)
            continue;
        if (m.bytes[0] == kind && node == from) {
            CHECK(m.bytes[1] == round, "kind %d: round %d, expected %d", kind, m.bytes[1], round);
            return;
        }
        CHECK(pending_kind < 0, "two messages ahead of the one awaited");
        pending_kind = m.bytes[0];
        pending_round = m.bytes[1];
        pending_from = node;
    }
}

static void say(int to, int kind, int round)
{
    rwapi_small m;
    memset(&m, 0, sizeof m);
    m.bytes[0] = (unsigned char)kind;
    m.bytes[1] = (unsigned char)round;
    CHECK(rwapi_send(to, m) == RWAPI_OK, "rwapi_send");
}

int main(int argc, char **argv)
{
    CHECK(rwapi_init(argc, argv) == RWAPI_OK, "rwapi_init");
    me = rwapi_rank();
    int n = rwapi_size();
    CHECK(n >= 2, "needs 2 nodes, got %d", n);
    int right = (me + 1) % n, left = (me + n - 1) % n;

    rwapi_net dst_net, src_net, target;
    unsigned char *dst = rwapi_alloc(BLOCK + 1, &dst_net);
    unsigned char *src = rwapi_alloc(BLOCK, &src_net);
    CHECK(dst && src, "rwapi_alloc");
    rwapi_small m;
    memcpy(m.bytes, &dst_net, sizeof dst_net);
    CHECK(rwapi_send(left, m) == RWAPI_OK, "rwapi_send (address)");
    int node;
    int r;
    /* The right neighbour's address; the left one may already have
     * written and said so (its notice is kept for round 0). */
    for (;;) {
        r = rwapi_receive(&node, &m);
        CHECK(r >= 0, "rwapi_receive returned %d", r);
        if (r == 1 && node == right)
            break;
        if (r == 1) {
            CHECK(pending_kind < 0, "two messages before the address");
            pending_kind = m.bytes[0];
            pending_round = m.bytes[1];
            pending_from = node;
        }
    }
    memcpy(&target, m.bytes, sizeof target);
    CHECK(target.node == right, "the address names node %d", target.node);

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

/*
 * rw_ring.h - the set-up and small-message handling of the RWAPI test
 * programs that write around a ring (rwapi_runs.c, rwapi_notice.c): each
 * node allocates a destination and a source block, tells its left
 * neighbour where its destination is, and learns its right neighbour's;
 * notices are small messages carrying a kind and a round number.
 */
#ifndef TANDEM_TESTS_RW_RING_H
#define TANDEM_TESTS_RW_RING_H

#include <rwapi.h>

#include <string.h>

#include "rw_check.h"

static int right = -1, left = -1;

/* A small message of `kind` for `round` (rounds below 256). */
static inline rwapi_small make(int kind, int round)
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
static inline void expect_from(int want, int kind, int round, rwapi_small *out)
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

static inline void expect(int kind, int round, int want) { expect_from(want, kind, round, NULL); }

/* rwapi_init, the ring's neighbours, a destination of `dst_len` and a
 * source of `src_len` bytes, and the right neighbour's destination in
 * *target. */
static inline void ring_start(int argc, char **argv, size_t dst_len, size_t src_len,
                              unsigned char **dst, unsigned char **src, rwapi_net *src_net,
                              rwapi_net *target)
{
    CHECK(rwapi_init(argc, argv) == RWAPI_OK, "rwapi_init");
    me = rwapi_rank();
    int n = rwapi_size();
    CHECK(n >= 2, "needs 2 nodes, got %d", n);
    right = (me + 1) % n;
    left = (me + n - 1) % n;
    rwapi_net dst_net;
    *dst = rwapi_alloc(dst_len, &dst_net);
    *src = rwapi_alloc(src_len, src_net);
    CHECK(*dst && *src, "rwapi_alloc");
    rwapi_small m;
    memcpy(m.bytes, &dst_net, sizeof dst_net);
    CHECK(rwapi_send(left, m) == RWAPI_OK, "rwapi_send (address)");
    expect_from(right, 0, 0, &m);
    memcpy(target, m.bytes, sizeof *target);
    CHECK(target->node == right, "the address names node %d", target->node);
}

#endif

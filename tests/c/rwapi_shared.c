/*
 * rwapi_shared.c - large RWAPI writes between two nodes of one host that
 * both poll: a writer shares each write of 256 KiB or more with its target,
 * which copies chunks of it inside rwapi_receive (counter rwapi_helped), and
 * the write still lands whole before its last byte.
 *
 * Nodes 0 and 1 each allocate a source and a destination block and swap
 * their destinations' addresses. Then, ping-pong style, for sizes from 256
 * KiB to 8 MiB (odd sizes, at odd offsets inside the blocks), the writer
 * fills its source with a pattern whose last byte is non-zero and writes it;
 * the target polls rwapi_receive until that last byte appears, checks every
 * byte and that nothing past the end was touched, clears it and writes its
 * own answer back. Each size goes ROUNDS times, with a different pattern.
 *
 * With the argument "oneway" only node 0 writes: node 1 answers each write
 * with a small message instead, and so never writes into node 0's heap
 * (the target of a one-way stream must still be asked to help).
 *
 * Prints "PASS rwapi_shared" on node 0.
 */
#include <rwapi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rw_check.h"

#define ROUNDS 4
#define GUARD 64

static unsigned char pattern(int writer, int round, size_t i, size_t n)
{
    if (i == n - 1)
        return (unsigned char)(1 + (writer * 7 + round) % 250); /* never 0 */
    return (unsigned char)((writer * 101 + round * 37 + i * 13 + (i >> 12)) & 0xff);
}

static rwapi_small msg_net(rwapi_net net)
{
    rwapi_small m;
    memcpy(m.bytes, &net, sizeof net);
    return m;
}

static rwapi_net recv_net(void)
{
    int from, r;
    rwapi_small m;
    rwapi_net net;
    while ((r = rwapi_receive(&from, &m)) == 0)
        ;
    CHECK(r == 1, "rwapi_receive returned %d", r);
    memcpy(&net, m.bytes, sizeof net);
    return net;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {(256u << 10) + 1, (1u << 20) - 3, 3u << 20, (8u << 20) - 1};
    const size_t off = 4099, room = (8u << 20) + off + GUARD;
    int peer, first, oneway = argc > 1 && strcmp(argv[1], "oneway") == 0;
    rwapi_net src_net, dst_net, peer_dst;
    unsigned char *src, *dst;

    CHECK(rwapi_init(argc, argv) == RWAPI_OK, "rwapi_init");
    me = rwapi_rank();
    CHECK(rwapi_size() == 2, "needs exactly 2 nodes, got %d", rwapi_size());
    peer = 1 - me;
    src = rwapi_alloc(room, &src_net);
    dst = rwapi_alloc(room, &dst_net);
    CHECK(src && dst, "rwapi_alloc of %zu bytes", room);
    memset(dst, 0, room);
    CHECK(rwapi_send(peer, msg_net(dst_net)) == RWAPI_OK, "rwapi_send");
    peer_dst = recv_net();

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        for (int round = 0; round < ROUNDS; round++) {
            for (first = 0; first < (oneway ? 1 : 2); first++) {
                int writer = first; /* node 0 writes first, then node 1 */
                if (me == writer) {
                    for (size_t i = 0; i < n; i++)
                        src[off + i] = pattern(me, round, i, n);
                    rwapi_sid sid = rwapi_write(peer, rwapi_net_offset(src_net, off),
                                                rwapi_net_offset(peer_dst, off), n);
                    CHECK(sid > 0, "rwapi_write of %zu bytes returned %lld", n, (long long)sid);
                    int r;
                    while ((r = rwapi_issent(sid)) == 0)
                        ;
                    CHECK(r == 1, "rwapi_issent returned %d", r);
                    if (oneway) {
                        /* The target's answer: it has checked and cleared. */
                        int from;
                        rwapi_small m;
                        while ((r = rwapi_receive(&from, &m)) == 0)
                            ;
                        CHECK(r == 1 && from == peer, "answer: rwapi_receive returned %d", r);
                    }
                } else {
                    volatile unsigned char *last = dst + off + n - 1;
                    unsigned char want = pattern(peer, round, n - 1, n);
                    int from;
                    rwapi_small m;
                    while (__atomic_load_n(last, __ATOMIC_ACQUIRE) != want)
                        CHECK(rwapi_receive(&from, &m) >= 0, "rwapi_receive failed");
                    for (size_t i = 0; i < n; i++)
                        if (dst[off + i] != pattern(peer, round, i, n))
                            CHECK(0, "%zu-byte write, round %d: byte %zu is %u, expected %u", n, round, i,
                                  dst[off + i], pattern(peer, round, i, n));
                    for (size_t i = 0; i < off; i++)
                        CHECK(dst[i] == 0, "%zu-byte write: byte %zu before it was touched", n, i);
                    for (size_t i = off + n; i < room; i++)
                        CHECK(dst[i] == 0, "%zu-byte write: byte %zu past its end was touched", n, i - off);
                    memset(dst + off, 0, n);
                    if (oneway)
                        CHECK(rwapi_send(peer, msg_net(dst_net)) == RWAPI_OK, "rwapi_send of the answer");
                }
            }
        }
    }
    CHECK(rwapi_finalize() == RWAPI_OK, "rwapi_finalize");
    if (me == 0)
        printf("PASS rwapi_shared\n");
    return 0;
}

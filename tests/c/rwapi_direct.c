/*
 * rwapi_direct.c - RWAPI writes between two nodes on one host land with
 * the target taking no part (the direct path into its mapped heap).
 *
 *   - node 1 allocates a block and hands node 0 its address in a small
 *     message; for each size (1 B .. 8 MiB, at odd offsets) node 0 writes
 *     the data, then a flag word (a second write); node 1 waits for the
 *     flag and checks every byte;
 *   - with argument "nocalls[=SECONDS]" node 1 waits for the flag WITHOUT
 *     calling RWAPI or MPI (a plain atomic load in a loop, at most SECONDS,
 *     default 10, then FAIL), and node 0 expects each write complete when
 *     rwapi_write returns (rwapi_issent 1 at once) and refusals known at
 *     once; without it node 1 drives progress while it waits (the engine
 *     path: TCP, rwapi_direct=0);
 *   - refusals: a write beyond the end of a block (RWAPI_ERR_RANGE, target
 *     untouched), into a freed block (RWAPI_ERR_REGION), and into a freed
 *     block whose space a new block took (a stale address: RWAPI_ERR_REGION,
 *     the new block untouched).
 *
 * Prints "PASS rwapi_direct" on node 0.
 */
#define _POSIX_C_SOURCE 200809L
#include <rwapi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rw_check.h"

static unsigned char pattern(int round, size_t i)
{
    return (unsigned char)((round * 37 + i * 13 + (i >> 9)) & 0xff);
}

static rwapi_small msg_net(rwapi_net net)
{
    rwapi_small m;
    memcpy(m.bytes, &net, sizeof net);
    return m;
}

static rwapi_net recv_net(void)
{
    int from;
    rwapi_small m;
    int r;
    while ((r = rwapi_receive(&from, &m)) == 0)
        ;
    CHECK(r == 1, "rwapi_receive returned %d", r);
    rwapi_net net;
    memcpy(&net, m.bytes, sizeof net);
    return net;
}

static void recv_any(void)
{
    int from;
    rwapi_small m;
    int r;
    while ((r = rwapi_receive(&from, &m)) == 0)
        ;
    CHECK(r == 1, "rwapi_receive returned %d", r);
}

static void send_mark(int node)
{
    rwapi_small m;
    memset(&m, 0, sizeof m);
    CHECK(rwapi_send(node, m) == RWAPI_OK, "rwapi_send");
}

/* The flag word's value for round r: no zero byte, so a torn read could
 * not look like an earlier value (each write stores its last byte last). */
static uint64_t flag_value(int round)
{
    return 0x0101010101010100ull | (uint64_t)(round + 1);
}

int main(int argc, char **argv)
{
    int nocalls = 0;
    double limit = 10.0;
    for (int a = 1; a < argc; a++)
        if (strncmp(argv[a], "nocalls", 7) == 0) {
            nocalls = 1;
            if (argv[a][7] == '=')
                limit = atof(argv[a] + 8);
        }
    CHECK(rwapi_init(argc, argv) == RWAPI_OK, "rwapi_init");
    me = rwapi_rank();
    CHECK(rwapi_size() == 2, "needs exactly 2 nodes, got %d", rwapi_size());

    static const size_t sizes[] = {1, 7, 64, 100, 4096, 65536 + 3, 1u << 20, 8u << 20};
    enum { ROUNDS = sizeof sizes / sizeof sizes[0] };
    const size_t room = (8u << 20) + 4096, flag_at = room; /* flag word after the data */

    if (me == 1) {
        rwapi_net data_net, tiny_net;
        unsigned char *data = rwapi_alloc(room + 8, &data_net);
        unsigned char *tiny = rwapi_alloc(64, &tiny_net);
        CHECK(data && tiny, "rwapi_alloc");
        CHECK(rwapi_send(0, msg_net(data_net)) == RWAPI_OK, "rwapi_send");
        CHECK(rwapi_send(0, msg_net(tiny_net)) == RWAPI_OK, "rwapi_send");
        uint64_t *flag = (uint64_t *)(data + flag_at);
        for (int round = 0; round < ROUNDS; round++) {
            uint64_t want = flag_value(round);
            if (nocalls) {
                /* No RWAPI or MPI call until the flag is there. */
                double t0 = now();
                unsigned long spins = 0;
                while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != want) {
                    if ((++spins & 0xfff) == 0 && now() - t0 > limit)
                        CHECK(0, "round %d: no write arrived in %.1f s without calls "
                                 "(flag %#llx)",
                              round, limit, (unsigned long long)*flag);
                }
            } else {
                int from;
                rwapi_small m;
                while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != want)
                    CHECK(rwapi_receive(&from, &m) == 0, "unexpected small message");
            }
            size_t len = sizes[round], off = (size_t)round * 5 % 4096;
            for (size_t i = 0; i < len; i++)
                CHECK(data[off + i] == pattern(round, i), "round %d (%zu B): byte %zu is %u, not %u",
                      round, len, i, data[off + i], pattern(round, i));
            send_mark(0); /* checked: the next round may overwrite */
        }
        /* A write beyond the end of the tiny block came and was refused. */
        recv_any();
        for (int i = 0; i < 64; i++)
            CHECK(tiny[i] == 0, "refused write changed tiny byte %d (%u)", i, tiny[i]);
        /* Free it, and let a new block take its place. */
        CHECK(rwapi_free(tiny) == RWAPI_OK, "rwapi_free");
        rwapi_net fresh_net;
        unsigned char *fresh = rwapi_alloc(64, &fresh_net);
        CHECK(fresh, "rwapi_alloc after free");
        if (fresh == tiny)
            printf("node 1: the new block took the freed one's address\n");
        for (int i = 0; i < 64; i++)
            CHECK(fresh[i] == 0, "a reused block is zeroed (byte %d is %u)", i, fresh[i]);
        CHECK(rwapi_send(0, msg_net(fresh_net)) == RWAPI_OK, "rwapi_send");
        recv_any(); /* node 0 is done writing */
        for (int i = 0; i < 64; i++)
            CHECK(fresh[i] == (i < 8 ? 0x5a : 0), "new block byte %d is %u", i, fresh[i]);
        send_mark(0);
        CHECK(rwapi_free(fresh) == RWAPI_OK && rwapi_free(data) == RWAPI_OK, "rwapi_free");
    } else {
        rwapi_net src_net;
        unsigned char *src = rwapi_alloc(room + 8, &src_net);
        CHECK(src, "rwapi_alloc");
        rwapi_net target = recv_net(), tiny = recv_net();
        CHECK(target.node == 1 && tiny.node == 1, "nets name node 1");
        for (int round = 0; round < ROUNDS; round++) {
            size_t len = sizes[round], off = (size_t)round * 5 % 4096;
            for (size_t i = 0; i < len; i++)
                src[off + i] = pattern(round, i);
            uint64_t f = flag_value(round);
            memcpy(src + flag_at, &f, 8);
            rwapi_sid a = rwapi_write(1, rwapi_net_offset(src_net, off),
                                      rwapi_net_offset(target, off), len);
            CHECK(a > 0, "write of %zu bytes: %lld", len, (long long)a);
            if (nocalls)
                CHECK(rwapi_issent(a) == 1, "a direct write is complete when issued");
            rwapi_sid b = rwapi_write(1, rwapi_net_offset(src_net, flag_at),
                                      rwapi_net_offset(target, flag_at), 8);
            CHECK(b > 0, "flag write: %lld", (long long)b);
            if (nocalls)
                CHECK(rwapi_issent(b) == 1, "a direct write is complete when issued");
            CHECK(rwapi_flush() == RWAPI_OK, "rwapi_flush");
            recv_any(); /* node 1 checked this round */
        }

        /* Beyond the end of the tiny block. */
        memset(src, 0xab, 64);
        rwapi_sid bad = rwapi_write(1, src_net, rwapi_net_offset(tiny, 60), 8);
        CHECK(bad > 0, "a refused write still gets a send id (%lld)", (long long)bad);
        int st;
        if (nocalls)
            CHECK((st = rwapi_issent(bad)) == RWAPI_ERR_RANGE, "refused at once: %d", st);
        CHECK((st = rwapi_flush()) == RWAPI_ERR_RANGE, "flush reports RWAPI_ERR_RANGE: %d", st);
        /* Through the engine the refusal is known after the flush. */
        CHECK((st = rwapi_issent(bad)) == RWAPI_ERR_RANGE, "issent of the out-of-range write: %d",
              st);
        CHECK(rwapi_flush() == RWAPI_OK, "a refusal is reported once");
        send_mark(1);

        /* The tiny block was freed and a new one allocated. */
        rwapi_net fresh = recv_net();
        memset(src, 0xee, 8);
        bad = rwapi_write(1, src_net, tiny, 8); /* stale */
        CHECK(bad > 0, "a refused write still gets a send id (%lld)", (long long)bad);
        if (nocalls)
            CHECK((st = rwapi_issent(bad)) == RWAPI_ERR_REGION, "refused at once: %d", st);
        CHECK((st = rwapi_flush()) == RWAPI_ERR_REGION, "flush reports RWAPI_ERR_REGION: %d", st);
        CHECK((st = rwapi_issent(bad)) == RWAPI_ERR_REGION, "issent of the write to a freed block: %d",
              st);
        memset(src, 0x5a, 8);
        rwapi_sid good = rwapi_write(1, src_net, fresh, 8);
        CHECK(good > 0, "write to the new block: %lld", (long long)good);
        CHECK((st = rwapi_flush()) == RWAPI_OK, "flush: %d", st);
        send_mark(1);
        recv_any();
        CHECK(rwapi_free(src) == RWAPI_OK, "rwapi_free");
    }
    CHECK(rwapi_finalize() == RWAPI_OK, "rwapi_finalize");
    if (me == 0)
        printf("PASS rwapi_direct\n");
    return 0;
}

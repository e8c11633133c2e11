/*
 * rwapi.h — Tandem's Remote-Write API (RWAPI), after Ben Fredj and Renault:
 * the smallest set of functions that lets one process write a contiguous
 * block straight into memory another process allocated and advertised,
 * without the receiving application taking part.
 *
 * Build with `tandem cc` (the same library as MPI) and start with
 * `tandem run`. A program may use MPI and RWAPI together; call MPI_Init
 * before rwapi_init and rwapi_finalize before MPI_Finalize in that case.
 *
 * Model
 *   - rwapi_alloc gives memory peers may write into, and its network
 *     address (rwapi_net, 16 bytes: small enough to travel in one small
 *     message). Offsets inside a block are formed with rwapi_net_offset.
 *   - rwapi_write(node, local, remote, size) copies size bytes from the
 *     local block at `local` (which must also come from rwapi_alloc) into
 *     node's block at `remote`. It never blocks; it returns a send id.
 *   - rwapi_issent(sid) is 1 once the local block may be reused.
 *   - Small messages (rwapi_send / rwapi_receive) carry 16 bytes each;
 *     rwapi_receive takes the oldest one pending, from any node.
 *
 * Completion and ordering (what a program may rely on)
 *   - Between one pair of nodes, writes and small messages take effect at
 *     the target in the order they were issued. So the pattern "write the
 *     data, then send a small message saying so" is correct: when the
 *     target receives that small message, the data is in its memory.
 *   - rwapi_issent(sid) == 1 says only that the local buffer may be
 *     reused; it does not say that the data has reached the target
 *     (except for a direct write, below).
 *   - rwapi_flush() waits until every write this process issued is in its
 *     target's memory (remote completion), and reports the first write
 *     that was refused. rwapi_finalize() flushes too.
 *   - Direct writes (nodes on one host): blocks come from a heap each node
 *     shares with the others on its host, and a write is a copy straight
 *     into the target's memory; the target takes no part. Such a write is
 *     complete when rwapi_write returns: the buffer may be reused and the
 *     data is in the target's memory (rwapi_issent is 1 at once, and
 *     rwapi_flush has nothing to wait for). Its last byte is stored last,
 *     so a flag at the end of a write (or in a later write), read with an
 *     acquire load, says the data before it is there. A small message sent
 *     after it still arrives after it (it is published in the shared-
 *     memory ring with a release store, after the copy).
 *   - Other writes go through the target's progress engine, which deposits
 *     the data (from the shared-memory ring on one host, from the socket
 *     between hosts) whenever the target calls into RWAPI or MPI, or at
 *     once, while the target computes, under `--set progress=thread`. That
 *     is the case between hosts, under `--set rwapi_direct=0`, where the
 *     kernel does not let a node map its peer's heap, for blocks that did
 *     not fit the heap (`--set rwapi_heap=BYTES`, 256 MiB by default), and,
 *     to keep the order above, for writes to a node that follow writes to
 *     it through the engine, until the next rwapi_flush.
 *   - Blocks not in a heap (a node alone on its host, `--set
 *     transports=tcp`, blocks that did not fit) are private memory; from
 *     2 MiB on they are aligned to 2 MiB and backed by transparent huge
 *     pages where the kernel offers them.
 *   - Every write is checked: one outside an allocated block, to an
 *     unknown address or to a freed block is refused, never performed;
 *     rwapi_issent / rwapi_flush then return RWAPI_ERR_RANGE or
 *     RWAPI_ERR_REGION (for a direct write, at once).
 *   - Writes to a node that died make rwapi_issent / rwapi_flush return
 *     RWAPI_ERR_GONE once that is known (a direct write into a dead node's
 *     heap does no harm).
 *
 * Errors are negative return values (the negated MPI error class).
 */
#ifndef TANDEM_RWAPI_H
#define TANDEM_RWAPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The network address of memory from rwapi_alloc. */
typedef struct rwapi_net {
    uint64_t addr; /* address in the owner's memory */
    uint32_t key;  /* the block's key at its owner */
    int32_t node;  /* the owner */
} rwapi_net;

/* A small message: 16 bytes of anything. */
typedef struct rwapi_small {
    unsigned char bytes[16];
} rwapi_small;

/* A send id: positive, or a negative error. */
typedef int64_t rwapi_sid;

#define RWAPI_OK 0
#define RWAPI_ERR_ARG (-13)    /* bad argument (null pointer, zero size) */
#define RWAPI_ERR_NODE (-6)    /* no such node */
#define RWAPI_ERR_SID (-7)     /* no such send id */
#define RWAPI_ERR_NOMEM (-39)  /* out of memory */
#define RWAPI_ERR_INIT (-16)   /* not initialized / already finalized */
#define RWAPI_ERR_RANGE (-48)  /* outside an allocated block */
#define RWAPI_ERR_REGION (-56) /* not an allocated block (unknown or freed) */
#define RWAPI_ERR_GONE (-58)   /* the peer process went away */

int rwapi_init(int argc, char **argv);
/* Flushes every outstanding write, then shuts down (collective). */
int rwapi_finalize(void);
int rwapi_rank(void);
int rwapi_size(void);

/* Zeroed memory of `size` bytes peers may write into; its address in *net.
 * NULL on failure. */
void *rwapi_alloc(size_t size, rwapi_net *net);
/* Frees a block from rwapi_alloc; later writes to it are refused. */
int rwapi_free(void *ptr);

int rwapi_send(int node, rwapi_small small);
/* 1 and the oldest pending small message, or 0 when none is pending. */
int rwapi_receive(int *node, rwapi_small *small);

rwapi_sid rwapi_write(int node, rwapi_net local, rwapi_net remote, size_t size);
/* 1: the local buffer may be reused; 0: not yet; negative: the error. */
int rwapi_issent(rwapi_sid sid);
/* Waits until every write issued so far is in its target's memory. */
int rwapi_flush(void);

/* The address `offset` bytes into a block. */
static inline rwapi_net rwapi_net_offset(rwapi_net net, size_t offset) {
    net.addr += (uint64_t)offset;
    return net;
}

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_RWAPI_H */

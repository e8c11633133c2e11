/*
 * thread_multiple.c - MPI_THREAD_MULTIPLE: threads of one rank call MPI at
 * the same time, and a thread blocked in a call does not keep the others
 * out (each part below hangs, and the launcher's deadline fails it, where a
 * blocked call holds the library for its whole wait).
 *
 *   1. self: a thread blocks in MPI_Recv from its own rank; the main thread
 *      sends it the message later (8 B, then 1 MiB, which also blocks the
 *      sender until the receive takes it).
 *   2. pairs: THREADS threads per rank; thread t of an even rank and thread
 *      t of the next odd one ping-pong ROUNDS times with blocking MPI_Send
 *      and MPI_Recv (tag t), eager and rendezvous sizes, every byte checked;
 *      then a ring of MPI_Sendrecv per thread.
 *   3. any: each thread posts receives and sends around the ring and
 *      completes the receives with MPI_Waitany, the sends with MPI_Waitall.
 *   4. collectives: each thread has its own duplicate of MPI_COMM_WORLD and
 *      runs MPI_Allreduce and MPI_Barrier on it ROUNDS times, the threads
 *      of odd ranks starting in the opposite order.
 *   5. probe: a server thread per rank takes messages with
 *      MPI_Probe(MPI_ANY_SOURCE) and MPI_Recv while the other threads of
 *      every rank send them.
 *   6. fence: every rank puts into its right neighbour's window; rank 0's
 *      main thread then waits in MPI_Win_fence while another of its
 *      threads sends, 30 ms later, the message rank 1 receives before its
 *      own fence. The puts are checked after the fence.
 *   7. dup: the same with MPI_Comm_dup of MPI_COMM_WORLD; the duplicate is
 *      then used for an allreduce.
 *   8. lock: rank 1 holds an exclusive lock on rank 0's window (and has put
 *      into it); rank 0 waits in MPI_Win_lock for it while rank 1 unlocks
 *      only after the message from rank 0's second thread.
 *   9. split and create: as 6 and 7 with MPI_Comm_split (by parity, keys
 *      reversing the order) and MPI_Comm_create (the even ranks); the new
 *      communicators' sizes and ranks are checked, and used.
 *  10. post-start-complete-wait: rank 0 waits in MPI_Win_wait for rank 1's
 *      access epoch, then in MPI_Win_start for rank 1's post, rank 1
 *      starting each only after the message from rank 0's second thread;
 *      the puts are checked.
 *  11. free: rank 0 waits in MPI_Win_free for rank 1, which frees only
 *      after the message from rank 0's second thread.
 *  12. topologies: as 6 and 7 with MPI_Cart_create (a 2-D grid, periodic in
 *      its first dimension), MPI_Cart_sub of it (its rows), MPI_Graph_create
 *      (a ring), MPI_Dist_graph_create and _adjacent (a directed ring);
 *      coordinates, sizes, ranks and neighbours are checked, and the rows
 *      used for an allreduce.
 *  13. create_group: as 6 and 7 with MPI_Comm_create_group of every rank in
 *      reverse order (its first member, which gathers the others' offers,
 *      is the last rank); the new communicator's size and ranks are
 *      checked, and used. Then the same with MPI_Comm_create_from_group
 *      of a session's mpi://WORLD.
 */
#include "check.h"

#include <pthread.h>

#define THREADS 4
#define ROUNDS 40
#define BIG (256 * 1024 + 3)
#define SELF_BIG (1024 * 1024)
#define PROBE_EACH 25
#define PROBE_TAG 99
#define LATE_TAG 98

static int rank, size;
static MPI_Comm comms[THREADS];
static MPI_Comm probe_comm;

static int right(void)
{
    return (rank + 1) % size;
}

static int left(void)
{
    return (rank + size - 1) % size;
}

/* ------------------------------------------------------------- 1. self */

static void *self_receiver(void *arg)
{
    size_t n = *(size_t *)arg;
    unsigned char *buf = tc_alloc(n);
    MPI_Status st;
    tc_prepare_recv(buf, n, rank, (int)n);
    CHECK_MPI(MPI_Recv(buf, (int)n, MPI_BYTE, rank, 7, MPI_COMM_WORLD, &st));
    tc_check_recv(buf, n, rank, (int)n, "message to self");
    tc_check_status(&st, rank, 7, n, "message to self");
    free(buf);
    return NULL;
}

static void self_part(size_t n)
{
    pthread_t th;
    unsigned char *buf = tc_alloc(n);
    tc_fill(buf, n, rank, (int)n);
    CHECK(pthread_create(&th, NULL, self_receiver, &n) == 0, "pthread_create");
    tc_sleep_ms(30); /* the receiver is blocked in MPI_Recv by now */
    CHECK_MPI(MPI_Send(buf, (int)n, MPI_BYTE, rank, 7, MPI_COMM_WORLD));
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    free(buf);
}

/* ---------------------------------------------------------- 2. pairs */

static void pairs(int t)
{
    int peer = rank ^ 1;
    unsigned char *out = tc_alloc(BIG), *in = tc_alloc(BIG);
    MPI_Status st;
    if (peer < size) {
        for (int r = 0; r < ROUNDS; r++) {
            size_t n = (r % 2) ? BIG : (size_t)(8 + r);
            int key = t * 1000 + r;
            tc_fill(out, n, rank, key);
            tc_prepare_recv(in, n, peer, key);
            if (rank % 2 == 0) {
                CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st));
            } else {
                CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD));
            }
            tc_check_recv(in, n, peer, key, "ping-pong between threads");
            tc_check_status(&st, peer, t, n, "ping-pong between threads");
        }
    }
    for (int r = 0; r < ROUNDS / 4; r++) {
        size_t n = (r % 2) ? BIG : 64;
        int key = 50000 + t * 100 + r;
        tc_fill(out, n, rank, key);
        tc_prepare_recv(in, n, left(), key);
        CHECK_MPI(MPI_Sendrecv(out, (int)n, MPI_BYTE, right(), 100 + t, in, (int)n, MPI_BYTE, left(), 100 + t,
                               MPI_COMM_WORLD, &st));
        tc_check_recv(in, n, left(), key, "ring of MPI_Sendrecv");
        tc_check_status(&st, left(), 100 + t, n, "ring of MPI_Sendrecv");
    }
    free(out);
    free(in);
}

/* ------------------------------------------------------------ 3. any */

#define ANY_N 4
#define ANY_LEN 40000

static void any(int t)
{
    unsigned char *out[ANY_N], *in[ANY_N];
    MPI_Request rr[ANY_N], sr[ANY_N];
    int seen[ANY_N] = {0};
    for (int k = 0; k < ANY_N; k++) {
        int tag = 200 + t * ANY_N + k;
        out[k] = tc_alloc(ANY_LEN);
        in[k] = tc_alloc(ANY_LEN);
        tc_fill(out[k], ANY_LEN, rank, tag);
        tc_prepare_recv(in[k], ANY_LEN, left(), tag);
        CHECK_MPI(MPI_Irecv(in[k], ANY_LEN, MPI_BYTE, left(), tag, MPI_COMM_WORLD, &rr[k]));
    }
    for (int k = ANY_N - 1; k >= 0; k--)
        CHECK_MPI(MPI_Isend(out[k], ANY_LEN, MPI_BYTE, right(), 200 + t * ANY_N + k, MPI_COMM_WORLD, &sr[k]));
    for (int done = 0; done < ANY_N; done++) {
        int idx = -1;
        MPI_Status st;
        CHECK_MPI(MPI_Waitany(ANY_N, rr, &idx, &st));
        CHECK(idx >= 0 && idx < ANY_N && !seen[idx], "MPI_Waitany gave index %d twice or out of range", idx);
        seen[idx] = 1;
        CHECK_EQ(MPI_REQUEST_NULL, rr[idx], "request after MPI_Waitany");
        tc_check_status(&st, left(), 200 + t * ANY_N + idx, ANY_LEN, "receive completed by MPI_Waitany");
        tc_check_recv(in[idx], ANY_LEN, left(), 200 + t * ANY_N + idx, "receive completed by MPI_Waitany");
    }
    CHECK_MPI(MPI_Waitall(ANY_N, sr, MPI_STATUSES_IGNORE));
    for (int k = 0; k < ANY_N; k++) {
        free(out[k]);
        free(in[k]);
    }
}

/* ---------------------------------------------------- 4. collectives */

static void collectives(int t)
{
    MPI_Comm c = comms[t];
    for (int r = 0; r < ROUNDS; r++) {
        long mine = (long)rank * 1000 + t * 10 + r, sum = -1;
        long expected = 1000L * size * (size - 1) / 2 + (long)size * (t * 10 + r);
        CHECK_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c));
        CHECK_EQ(expected, sum, "thread %d round %d: MPI_Allreduce", t, r);
        if (r % 8 == 0)
            CHECK_MPI(MPI_Barrier(c));
    }
}

/* ---------------------------------------------------------- 5. probe */

static void *probe_server(void *arg)
{
    (void)arg;
    int expected = (size - 1) * THREADS * PROBE_EACH;
    for (int got = 0; got < expected; got++) {
        MPI_Status st;
        int n = -1;
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, PROBE_TAG, probe_comm, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
        CHECK(n >= 16 && n <= 16 + THREADS * PROBE_EACH, "probed size %d", n);
        unsigned char *buf = tc_alloc((size_t)n);
        int key = n; /* the sender keys a message by its size */
        tc_prepare_recv(buf, (size_t)n, st.MPI_SOURCE, key);
        CHECK_MPI(MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, PROBE_TAG, probe_comm, MPI_STATUS_IGNORE));
        tc_check_recv(buf, (size_t)n, st.MPI_SOURCE, key, "message taken after MPI_Probe");
        free(buf);
    }
    return NULL;
}

static void probe_clients(int t)
{
    for (int k = 0; k < PROBE_EACH; k++) {
        size_t n = 16 + (size_t)(t * PROBE_EACH + k);
        unsigned char *buf = tc_alloc(n);
        tc_fill(buf, n, rank, (int)n);
        for (int p = 0; p < size; p++)
            if (p != rank)
                CHECK_MPI(MPI_Send(buf, (int)n, MPI_BYTE, p, PROBE_TAG, probe_comm));
        free(buf);
    }
}

/* ---------------------- 6. fence, 7. dup, 8. lock, 9. split and create */

static void *late_sender(void *arg)
{
    (void)arg;
    int v = 4242;
    tc_sleep_ms(30); /* rank 0 waits in its collective call by now */
    CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 1, LATE_TAG, MPI_COMM_WORLD));
    return NULL;
}

/* Runs `collective` on every rank; rank 1 first receives a message that a
 * second thread of rank 0 sends while rank 0's main thread is in it. */
static void behind_late_send(void (*collective)(void *), void *arg, const char *what)
{
    if (rank == 0) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, late_sender, NULL) == 0, "pthread_create");
        collective(arg);
        CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    } else {
        if (rank == 1) {
            int v = 0;
            MPI_Status st;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, LATE_TAG, MPI_COMM_WORLD, &st));
            CHECK_EQ(4242, v, "message sent while rank 0 is in %s", what);
        }
        collective(arg);
    }
}

static void fence(void *win)
{
    CHECK_MPI(MPI_Win_fence(0, *(MPI_Win *)win));
}

static void fence_part(void)
{
    int *slots = NULL, me = rank;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)(size * sizeof(int)), sizeof(int), MPI_INFO_NULL,
                               MPI_COMM_WORLD, &slots, &win));
    for (int i = 0; i < size; i++)
        slots[i] = -1;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(&me, 1, MPI_INT, right(), rank, 1, MPI_INT, win));
    behind_late_send(fence, &win, "MPI_Win_fence");
    CHECK_EQ(left(), slots[left()], "put before the fence");
    for (int i = 0; i < size; i++)
        if (i != left())
            CHECK_EQ(-1, slots[i], "slot nobody put into");
    CHECK_MPI(MPI_Win_free(&win));
}

static void dup(void *out)
{
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, (MPI_Comm *)out));
}

static void dup_part(void)
{
    MPI_Comm c = MPI_COMM_NULL;
    int sum = 0, one = 1, r = -1;
    behind_late_send(dup, &c, "MPI_Comm_dup");
    CHECK_MPI(MPI_Comm_rank(c, &r));
    CHECK_EQ(rank, r, "rank in the duplicate");
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_EQ(size, sum, "allreduce on the duplicate");
    CHECK_MPI(MPI_Comm_free(&c));
}

static void split(void *out)
{
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, (MPI_Comm *)out));
}

static void split_part(void)
{
    MPI_Comm c = MPI_COMM_NULL;
    int n = -1, r = -1, sum = 0, expect_n = 0, expect_r = 0, expect_sum = 0;
    behind_late_send(split, &c, "MPI_Comm_split");
    for (int i = 0; i < size; i++) {
        if (i % 2 != rank % 2)
            continue;
        expect_n++;
        expect_sum += i;
        expect_r += i > rank; /* keys size - i: the larger ranks first */
    }
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK_MPI(MPI_Comm_rank(c, &r));
    CHECK_EQ(expect_n, n, "size of the split");
    CHECK_EQ(expect_r, r, "rank in the split");
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_EQ(expect_sum, sum, "allreduce on the split");
    CHECK_MPI(MPI_Comm_free(&c));
}

static void create(void *out)
{
    MPI_Group world, evens;
    int ranks[64], n = 0;
    for (int i = 0; i < size && n < 64; i += 2)
        ranks[n++] = i;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_incl(world, n, ranks, &evens));
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, evens, (MPI_Comm *)out));
    CHECK_MPI(MPI_Group_free(&evens));
    CHECK_MPI(MPI_Group_free(&world));
}

static void create_part(void)
{
    MPI_Comm c = MPI_COMM_NULL;
    behind_late_send(create, &c, "MPI_Comm_create");
    if (rank % 2) {
        CHECK(c == MPI_COMM_NULL, "MPI_Comm_create gives odd ranks MPI_COMM_NULL");
        return;
    }
    int n = -1, r = -1;
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK_MPI(MPI_Comm_rank(c, &r));
    CHECK_EQ((size + 1) / 2, n, "size of the created communicator");
    CHECK_EQ(rank / 2, r, "rank in the created communicator");
    CHECK_MPI(MPI_Barrier(c));
    CHECK_MPI(MPI_Comm_free(&c));
}

static MPI_Win pscw_win;
static int *pscw_mem;

static MPI_Group group_of(int r)
{
    MPI_Group world, g;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_incl(world, 1, &r, &g));
    CHECK_MPI(MPI_Group_free(&world));
    return g;
}

/* Rank 0 exposes its window to rank 1 and waits in MPI_Win_wait. */
static void pscw_into_0(void *arg)
{
    (void)arg;
    int eleven = 11;
    if (rank > 1)
        return;
    MPI_Group g = group_of(1 - rank);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_post(g, 0, pscw_win));
        CHECK_MPI(MPI_Win_wait(pscw_win));
        CHECK_EQ(11, *pscw_mem, "put by rank 1 in its access epoch");
    } else {
        CHECK_MPI(MPI_Win_start(g, 0, pscw_win));
        CHECK_MPI(MPI_Put(&eleven, 1, MPI_INT, 0, 0, 1, MPI_INT, pscw_win));
        CHECK_MPI(MPI_Win_complete(pscw_win));
    }
    CHECK_MPI(MPI_Group_free(&g));
}

/* Rank 0 waits in MPI_Win_start until rank 1 posts. */
static void pscw_from_0(void *arg)
{
    (void)arg;
    int twelve = 12;
    if (rank > 1)
        return;
    MPI_Group g = group_of(1 - rank);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_start(g, 0, pscw_win));
        CHECK_MPI(MPI_Put(&twelve, 1, MPI_INT, 1, 0, 1, MPI_INT, pscw_win));
        CHECK_MPI(MPI_Win_complete(pscw_win));
    } else {
        CHECK_MPI(MPI_Win_post(g, 0, pscw_win));
        CHECK_MPI(MPI_Win_wait(pscw_win));
        CHECK_EQ(12, *pscw_mem, "put by rank 0 in its access epoch");
    }
    CHECK_MPI(MPI_Group_free(&g));
}

static void pscw_part(void)
{
    CHECK_MPI(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &pscw_mem,
                               &pscw_win));
    *pscw_mem = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    behind_late_send(pscw_into_0, NULL, "MPI_Win_wait");
    behind_late_send(pscw_from_0, NULL, "MPI_Win_start");
    CHECK_MPI(MPI_Win_free(&pscw_win));
}

static void free_win(void *win)
{
    CHECK_MPI(MPI_Win_free((MPI_Win *)win));
    CHECK(*(MPI_Win *)win == MPI_WIN_NULL, "MPI_Win_free sets MPI_WIN_NULL");
}

static void free_part(void)
{
    int *mem = NULL, me = rank;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    *mem = -1;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(&me, 1, MPI_INT, right(), 0, 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_EQ(left(), *mem, "put before the free");
    behind_late_send(free_win, &win, "MPI_Win_free");
}

static MPI_Win lock_win;
static int *lock_mem;

static void lock_step(void *arg)
{
    (void)arg;
    if (rank == 0) {
        /* Granted once rank 1 unlocks, which it does after the message. */
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, lock_win));
        CHECK_EQ(7, *lock_mem, "put by rank 1 under its lock");
        CHECK_MPI(MPI_Win_unlock(0, lock_win));
    } else if (rank == 1) {
        CHECK_MPI(MPI_Win_unlock(0, lock_win));
    }
}

static void lock_part(void)
{
    int seven = 7;
    CHECK_MPI(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &lock_mem,
                               &lock_win));
    *lock_mem = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, lock_win));
        CHECK_MPI(MPI_Put(&seven, 1, MPI_INT, 0, 0, 1, MPI_INT, lock_win));
        CHECK_MPI(MPI_Win_flush(0, lock_win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    behind_late_send(lock_step, NULL, "MPI_Win_lock");
    CHECK_MPI(MPI_Win_free(&lock_win));
}

/* ----------------------------------------------------------- threads */

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    pairs(t);
    any(t);
    collectives(t);
    probe_clients(t);
    return NULL;
}

/* ---------------------- 12. topology constructors */

static void cart_create(void *out)
{
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    CHECK_MPI(MPI_Dims_create(size, 2, dims));
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, (MPI_Comm *)out));
}

static void cart_rows(void *comms)
{
    MPI_Comm *c = comms;
    int remain[2] = {0, 1};
    CHECK_MPI(MPI_Cart_sub(c[0], remain, &c[1]));
}

static void graph_ring(void *out)
{
    int index[64], edges[128];
    CHECK(size <= 64, "at most 64 ranks");
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + 1) % size;
        edges[2 * i + 1] = (i + size - 1) % size;
    }
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, (MPI_Comm *)out));
}

static void dist_graph_ring(void *out)
{
    int me = rank, one = 1, next = (rank + 1) % size;
    CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &me, &one, &next, MPI_UNWEIGHTED,
                                    MPI_INFO_NULL, 0, (MPI_Comm *)out));
}

static void dist_graph_ring_adjacent(void *out)
{
    int prev = (rank + size - 1) % size, next = (rank + 1) % size;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &prev, MPI_UNWEIGHTED, 1, &next,
                                             MPI_UNWEIGHTED, MPI_INFO_NULL, 0, (MPI_Comm *)out));
}

/* A directed ring made by `make`: each rank hears from the previous one. */
static void check_dist_ring(void (*make)(void *), const char *what)
{
    MPI_Comm g = MPI_COMM_NULL;
    int in = -1, out = -1, weighted = -1, src = -1, dst = -1, got = -1;
    behind_late_send(make, &g, what);
    CHECK_MPI(MPI_Dist_graph_neighbors_count(g, &in, &out, &weighted));
    CHECK(in == 1 && out == 1 && !weighted, "%s: in %d, out %d, weighted %d", what, in, out,
          weighted);
    CHECK_MPI(MPI_Dist_graph_neighbors(g, 1, &src, MPI_UNWEIGHTED, 1, &dst, MPI_UNWEIGHTED));
    CHECK_EQ((rank + size - 1) % size, src, "source in the ring");
    CHECK_EQ((rank + 1) % size, dst, "destination in the ring");
    CHECK_MPI(MPI_Neighbor_allgather(&rank, 1, MPI_INT, &got, 1, MPI_INT, g));
    CHECK_EQ((rank + size - 1) % size, got, "neighbour allgather on the ring");
    CHECK_MPI(MPI_Comm_free(&g));
}

static void topology_part(void)
{
    MPI_Comm c[2] = {MPI_COMM_NULL, MPI_COMM_NULL};
    int dims[2], periods[2], coords[2], n = -1, r = -1, sum = 0, expect = 0;
    behind_late_send(cart_create, &c[0], "MPI_Cart_create");
    CHECK_MPI(MPI_Cart_get(c[0], 2, dims, periods, coords));
    CHECK_EQ(size, dims[0] * dims[1], "grid of every rank");
    CHECK(periods[0] && !periods[1], "periodic in the first dimension only");
    CHECK_EQ(rank / dims[1], coords[0], "row of this rank");
    CHECK_EQ(rank % dims[1], coords[1], "column of this rank");
    behind_late_send(cart_rows, c, "MPI_Cart_sub");
    CHECK_MPI(MPI_Comm_size(c[1], &n));
    CHECK_MPI(MPI_Comm_rank(c[1], &r));
    CHECK_EQ(dims[1], n, "size of a row");
    CHECK_EQ(coords[1], r, "rank in the row");
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c[1]));
    for (int j = 0; j < dims[1]; j++)
        expect += coords[0] * dims[1] + j;
    CHECK_EQ(expect, sum, "allreduce on the row");
    CHECK_MPI(MPI_Comm_free(&c[1]));
    CHECK_MPI(MPI_Comm_free(&c[0]));
    MPI_Comm g = MPI_COMM_NULL;
    int nb[2] = {-1, -1};
    behind_late_send(graph_ring, &g, "MPI_Graph_create");
    CHECK_MPI(MPI_Graph_neighbors_count(g, rank, &n));
    CHECK_EQ(2, n, "neighbours in the ring");
    CHECK_MPI(MPI_Graph_neighbors(g, rank, 2, nb));
    CHECK_EQ((rank + 1) % size, nb[0], "next in the ring");
    CHECK_EQ((rank + size - 1) % size, nb[1], "previous in the ring");
    CHECK_MPI(MPI_Comm_free(&g));
    check_dist_ring(dist_graph_ring, "MPI_Dist_graph_create");
    check_dist_ring(dist_graph_ring_adjacent, "MPI_Dist_graph_create_adjacent");
}

/* ---------------------- 13. create_group */

static void create_group_reversed(void *out)
{
    MPI_Group world, reversed;
    int ranks[64];
    CHECK(size <= 64, "at most 64 ranks");
    for (int i = 0; i < size; i++)
        ranks[i] = size - 1 - i;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_incl(world, size, ranks, &reversed));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, reversed, 7, (MPI_Comm *)out));
    CHECK_MPI(MPI_Group_free(&reversed));
    CHECK_MPI(MPI_Group_free(&world));
}

static void create_from_group(void *group)
{
    MPI_Comm c = MPI_COMM_NULL;
    int n = -1, r = -1, sum = 0;
    CHECK_MPI(MPI_Comm_create_from_group(*(MPI_Group *)group, "tandem.thread_multiple",
                                         MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK_MPI(MPI_Comm_rank(c, &r));
    CHECK_EQ(size, n, "size of the communicator from the session's group");
    CHECK_EQ(rank, r, "rank in the communicator from the session's group");
    CHECK_MPI(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_EQ(size * (size - 1) / 2, sum, "allreduce on the communicator from the group");
    CHECK_MPI(MPI_Comm_free(&c));
}

static void create_group_part(void)
{
    MPI_Comm c = MPI_COMM_NULL;
    int n = -1, r = -1, sum = 0;
    behind_late_send(create_group_reversed, &c, "MPI_Comm_create_group");
    CHECK_MPI(MPI_Comm_size(c, &n));
    CHECK_MPI(MPI_Comm_rank(c, &r));
    CHECK_EQ(size, n, "size of the created group");
    CHECK_EQ(size - 1 - rank, r, "rank in the reversed group");
    CHECK_MPI(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_EQ(size * (size - 1) / 2, sum, "allreduce on the created group");
    CHECK_MPI(MPI_Comm_free(&c));
    MPI_Session session;
    MPI_Group world;
    CHECK_MPI(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session));
    CHECK_MPI(MPI_Group_from_session_pset(session, "mpi://WORLD", &world));
    behind_late_send(create_from_group, &world, "MPI_Comm_create_from_group");
    CHECK_MPI(MPI_Group_free(&world));
    CHECK_MPI(MPI_Session_finalize(&session));
}

int main(int argc, char **argv)
{
    int provided = -1;
    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK_EQ(MPI_THREAD_MULTIPLE, provided, "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided");
    CHECK_MPI(MPI_Query_thread(&provided));
    CHECK_EQ(MPI_THREAD_MULTIPLE, provided, "MPI_Query_thread");
    rank = tc_rank();
    size = tc_size();

    self_part(8);
    self_part(SELF_BIG);

    for (int t = 0; t < THREADS; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &probe_comm));
    pthread_t server, th[THREADS];
    CHECK(pthread_create(&server, NULL, probe_server, NULL) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++) {
        int t = rank % 2 ? THREADS - 1 - i : i;
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    }
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_join(th[t], NULL) == 0, "pthread_join");
    CHECK(pthread_join(server, NULL) == 0, "pthread_join");
    for (int t = 0; t < THREADS; t++)
        CHECK_MPI(MPI_Comm_free(&comms[t]));
    CHECK_MPI(MPI_Comm_free(&probe_comm));
    fence_part();
    dup_part();
    lock_part();
    split_part();
    create_part();
    pscw_part();
    free_part();
    topology_part();
    create_group_part();
    return tc_finish("thread_multiple");
}

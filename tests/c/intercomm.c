/*
 * intercomm.c - intercommunicators: MPI_Intercomm_create between the even
 * and the odd ranks of MPI_COMM_WORLD, point-to-point and collectives on it,
 * merge, dup, split, compare, and the errors of bad arguments.
 *
 * Ranks: 2 or more (group 0 = even world ranks, group 1 = odd ones; their
 * sizes differ in an odd-sized job).
 *
 *   1. shape: MPI_Comm_test_inter, local size/rank/group, remote size/group;
 *   2. point-to-point both ways: every rank sends to every remote rank
 *      (8 bytes and 200 KiB, eager and rendezvous), received with
 *      MPI_ANY_SOURCE (each remote rank seen once, MPI_SOURCE the remote
 *      rank, data checked) and with explicit sources; MPI_Probe with
 *      MPI_ANY_SOURCE; MPI_Sendrecv between partners;
 *   3. collectives, once with the root in each group (the root its group's
 *      last rank): MPI_Barrier (nobody leaves before the other group has
 *      entered, by the clock), MPI_Bcast, MPI_Reduce, MPI_Allreduce,
 *      MPI_Reduce_scatter(_block), MPI_Gather, MPI_Scatter, MPI_Allgather, MPI_Alltoall, the
 *      v-variants (blocks of different sizes with gaps) and MPI_Alltoallw,
 *      with data checks;
 *      MPI_PROC_NULL ranks' buffers stay untouched;
 *   4. MPI_Intercomm_merge with high = group, high = !group (order of the
 *      groups follows) and high = 0 on both (some order, the same on all);
 *   5. MPI_Comm_dup (congruent, its own context), MPI_Comm_compare,
 *      MPI_Comm_create (the even local ranks of each group; an empty part),
 *      MPI_Comm_split (reversed keys, one rank left out);
 *   6. MPI_Comm_idup (twice at once, each a working intercommunicator of
 *      its own context): every leader first waits for messages the remote
 *      ranks send after starting theirs (so it must not block), and the odd
 *      group has one more communicator than the even one (their next free
 *      context ids differ);
 *   7. errors (MPI_ERRORS_RETURN): bad local leader -> MPI_ERR_RANK; remote
 *      leader out of range or in the local group -> MPI_ERR_RANK (on every
 *      rank of the group); bad tag -> MPI_ERR_TAG; an intercommunicator or
 *      MPI_COMM_NULL as local communicator -> MPI_ERR_COMM; remote size and
 *      group of an intracommunicator, merge of one -> MPI_ERR_COMM; a remote
 *      rank out of range -> MPI_ERR_RANK; a bad root -> MPI_ERR_ROOT;
 *      MPI_IN_PLACE -> MPI_ERR_BUFFER; and (on Tandem) operations it does not
 *      have on intercommunicators -> MPI_ERR_COMM.
 */
#include "check.h"

#define NAME "intercomm"
#define BIG (200 * 1024)

static int rank, nranks, color, lrank, lsize, rsize;
static MPI_Comm local = MPI_COMM_NULL, ic = MPI_COMM_NULL;

/* World rank of rank r of group g. */
static int world_of(int g, int r)
{
    return 2 * r + g;
}

static int group_size(int g)
{
    return g == 0 ? (nranks + 1) / 2 : nranks / 2;
}

static void create(void)
{
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local));
    /* The leaders are local rank 0: world ranks 0 and 1. */
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &ic));
}

static void shape(void)
{
    int flag = -1, n = -1, r = -1, result = -1, i, members[64];
    MPI_Group g, wg, want;

    CHECK_MPI(MPI_Comm_test_inter(ic, &flag));
    CHECK_EQ(1, flag, "MPI_Comm_test_inter of the intercommunicator");
    CHECK_MPI(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag));
    CHECK_EQ(0, flag, "MPI_Comm_test_inter of MPI_COMM_WORLD");
    CHECK_MPI(MPI_Comm_size(ic, &n));
    CHECK_EQ(lsize, n, "MPI_Comm_size gives the local group's size");
    CHECK_MPI(MPI_Comm_rank(ic, &r));
    CHECK_EQ(lrank, r, "MPI_Comm_rank gives the rank in the local group");
    CHECK_MPI(MPI_Comm_remote_size(ic, &n));
    CHECK_EQ(rsize, n, "MPI_Comm_remote_size");

    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    for (i = 0; i < lsize; i++)
        members[i] = world_of(color, i);
    CHECK_MPI(MPI_Group_incl(wg, lsize, members, &want));
    CHECK_MPI(MPI_Comm_group(ic, &g));
    CHECK_MPI(MPI_Group_compare(g, want, &result));
    CHECK_EQ(MPI_IDENT, result, "MPI_Comm_group is the local group");
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Group_free(&want));
    for (i = 0; i < rsize; i++)
        members[i] = world_of(1 - color, i);
    CHECK_MPI(MPI_Group_incl(wg, rsize, members, &want));
    CHECK_MPI(MPI_Comm_remote_group(ic, &g));
    CHECK_MPI(MPI_Group_compare(g, want, &result));
    CHECK_EQ(MPI_IDENT, result, "MPI_Comm_remote_group is the other group");
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Group_free(&want));
    CHECK_MPI(MPI_Group_free(&wg));
}

/* Every rank sends `n` bytes to every remote rank (key: the destination's
 * remote rank and `key`), then receives one message from each remote rank,
 * by MPI_ANY_SOURCE when `any`. */
static void exchange(MPI_Comm comm, size_t n, int key, int any)
{
    unsigned char *out = tc_alloc(n * (size_t)rsize), *in = tc_alloc(n);
    MPI_Request reqs[64];
    MPI_Status st;
    int seen[64] = {0}, j, count = -1;

    for (j = 0; j < rsize; j++) {
        tc_fill(out + n * (size_t)j, n, rank, key + j);
        CHECK_MPI(MPI_Isend(out + n * (size_t)j, (int)n, MPI_BYTE, j, key, comm, &reqs[j]));
    }
    for (j = 0; j < rsize; j++) {
        int src = any ? MPI_ANY_SOURCE : j;
        tc_prepare_recv(in, n, 0, 0);
        CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, src, key, comm, &st));
        CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize, "MPI_SOURCE %d is a remote rank", st.MPI_SOURCE);
        CHECK(any || st.MPI_SOURCE == j, "explicit source %d: MPI_SOURCE %d", j, st.MPI_SOURCE);
        CHECK_EQ(0, seen[st.MPI_SOURCE], "remote rank %d seen once", st.MPI_SOURCE);
        seen[st.MPI_SOURCE] = 1;
        CHECK_EQ(key, st.MPI_TAG, "MPI_TAG");
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK_EQ((long long)n, count, "received count");
        /* The sender keyed it with its own world rank and our local rank. */
        tc_check_recv(in, n, world_of(1 - color, st.MPI_SOURCE), key + lrank, "message from the other group");
    }
    CHECK_MPI(MPI_Waitall(rsize, reqs, MPI_STATUSES_IGNORE));
    free(out);
    free(in);
}

static void point_to_point(void)
{
    int partner, got = -1, flag = -1;
    MPI_Status st;

    exchange(ic, 8, 10, 1);
    exchange(ic, 8, 20, 0);
    exchange(ic, BIG, 30, 1);
    exchange(ic, BIG, 40, 0);

    /* Probe with MPI_ANY_SOURCE: remote rank 0 sends one message to each
     * remote rank. */
    if (lrank == 0) {
        int j;
        for (j = 0; j < rsize; j++)
            CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, j, 50, ic));
    }
    CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, 50, ic, &st));
    CHECK_EQ(0, st.MPI_SOURCE, "MPI_Probe: MPI_SOURCE is the remote leader's remote rank");
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, st.MPI_SOURCE, 50, ic, MPI_STATUS_IGNORE));
    CHECK_EQ(1 - color, got, "message from the remote leader (world rank)");

    /* Sendrecv between partners (remote rank lrank, where there is one). */
    partner = lrank < rsize ? lrank : MPI_PROC_NULL;
    got = -1;
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, partner, 60, &got, 1, MPI_INT, partner, 60, ic, &st));
    if (partner != MPI_PROC_NULL) {
        CHECK_EQ(world_of(1 - color, lrank), got, "MPI_Sendrecv with the partner");
        CHECK_EQ(lrank, st.MPI_SOURCE, "MPI_Sendrecv: MPI_SOURCE");
    } else {
        CHECK_EQ(-1, got, "MPI_Sendrecv with MPI_PROC_NULL leaves the buffer");
    }
    /* Nothing left behind. */
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ic, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(0, flag, "no message left on the intercommunicator");
}

/* The root argument of a collective whose root is rank `root` of group
 * `rg`. */
static int root_arg(int rg, int root)
{
    if (rg != color)
        return root;
    return lrank == root ? MPI_ROOT : MPI_PROC_NULL;
}

static void barrier(int sleeper)
{
    double mine, theirs[64], left;
    int j;

    if (color == sleeper)
        tc_sleep_ms(150);
    mine = tc_epoch();
    CHECK_MPI(MPI_Barrier(ic));
    left = tc_epoch();
    /* Every rank's entry time, to the other group. */
    CHECK_MPI(MPI_Allgather(&mine, 1, MPI_DOUBLE, theirs, 1, MPI_DOUBLE, ic));
    for (j = 0; j < rsize; j++)
        CHECK(left >= theirs[j], "barrier: left at %.6f before remote rank %d entered at %.6f", left, j,
              theirs[j]);
}

static void bcast(int rg)
{
    int root = group_size(rg) - 1, buf[6], i, arg = root_arg(rg, root);
    for (i = 0; i < 6; i++)
        buf[i] = arg == MPI_ROOT ? 1000 * rank + i : -1;
    CHECK_MPI(MPI_Bcast(buf, 6, MPI_INT, arg, ic));
    for (i = 0; i < 6; i++) {
        if (rg == color && arg != MPI_ROOT)
            CHECK_EQ(-1, buf[i], "bcast: MPI_PROC_NULL rank's buffer untouched");
        else
            CHECK_EQ(1000 * world_of(rg, root) + i, buf[i], "bcast[%d] from group %d", i, rg);
    }
}

static void reduce(int rg)
{
    int root = group_size(rg) - 1, send[5], recv[5], i, j, arg = root_arg(rg, root);
    for (i = 0; i < 5; i++) {
        send[i] = 10 * rank + i;
        recv[i] = -7;
    }
    CHECK_MPI(MPI_Reduce(send, recv, 5, MPI_INT, MPI_SUM, arg, ic));
    for (i = 0; i < 5; i++) {
        int want = 0;
        for (j = 0; j < group_size(1 - rg); j++)
            want += 10 * world_of(1 - rg, j) + i;
        if (arg == MPI_ROOT)
            CHECK_EQ(want, recv[i], "reduce[%d] at the root of group %d", i, rg);
        else
            CHECK_EQ(-7, recv[i], "reduce: non-root's recvbuf untouched");
    }
}

static void allreduce(void)
{
    int send[3], recv[3], i, j;
    for (i = 0; i < 3; i++)
        send[i] = rank * 3 + i;
    CHECK_MPI(MPI_Allreduce(send, recv, 3, MPI_INT, MPI_MAX, ic));
    for (i = 0; i < 3; i++)
        CHECK_EQ(world_of(1 - color, rsize - 1) * 3 + i, recv[i], "allreduce max[%d]", i);
    for (i = 0; i < 3; i++)
        send[i] = rank + i;
    CHECK_MPI(MPI_Allreduce(send, recv, 3, MPI_INT, MPI_SUM, ic));
    for (i = 0; i < 3; i++) {
        int want = 0;
        for (j = 0; j < rsize; j++)
            want += world_of(1 - color, j) + i;
        CHECK_EQ(want, recv[i], "allreduce sum[%d]", i);
    }
}

/* Reduce_scatter: 12 elements in each group, spread over its ranks; rank i
 * gets its part of the sum of the other group's vectors. */
static void reduce_scatter(void)
{
    int send[12], recv[13], counts[64], i, j, k, at = 0, mine = 0;
    for (i = 0; i < lsize; i++) {
        counts[i] = 12 / lsize + (i < 12 % lsize);
        if (i < lrank)
            at += counts[i];
    }
    for (k = 0; k < 12; k++)
        send[k] = 100 * rank + k;
    for (k = 0; k < 13; k++)
        recv[k] = -1;
    CHECK_MPI(MPI_Reduce_scatter(send, recv, counts, MPI_INT, MPI_SUM, ic));
    for (k = 0; k < counts[lrank]; k++) {
        int want = 0;
        for (j = 0; j < rsize; j++)
            want += 100 * world_of(1 - color, j) + at + k;
        CHECK_EQ(want, recv[k], "reduce_scatter[%d]", k);
        mine++;
    }
    CHECK_EQ(-1, recv[mine], "reduce_scatter: nothing past this rank's part");
    if (lsize == rsize) {
        for (k = 0; k < 13; k++)
            recv[k] = -1;
        CHECK_MPI(MPI_Reduce_scatter_block(send, recv, 2, MPI_INT, MPI_MAX, ic));
        for (k = 0; k < 2; k++)
            CHECK_EQ(100 * world_of(1 - color, rsize - 1) + 2 * lrank + k, recv[k], "reduce_scatter_block[%d]", k);
        CHECK_EQ(-1, recv[2], "reduce_scatter_block: nothing past the block");
    }
}

static void gather(int rg)
{
    int root = group_size(rg) - 1, arg = root_arg(rg, root), send[2], recv[128], j;
    send[0] = 100 * rank;
    send[1] = 100 * rank + 1;
    for (j = 0; j < 128; j++)
        recv[j] = -1;
    CHECK_MPI(MPI_Gather(send, 2, MPI_INT, recv, 2, MPI_INT, arg, ic));
    if (arg == MPI_ROOT) {
        for (j = 0; j < rsize; j++) {
            CHECK_EQ(100 * world_of(1 - color, j), recv[2 * j], "gather block %d", j);
            CHECK_EQ(100 * world_of(1 - color, j) + 1, recv[2 * j + 1], "gather block %d", j);
        }
        CHECK_EQ(-1, recv[2 * rsize], "gather wrote past the remote group's blocks");
    } else {
        CHECK_EQ(-1, recv[0], "gather: non-root's recvbuf untouched");
    }
}

static void scatter(int rg)
{
    int root = group_size(rg) - 1, arg = root_arg(rg, root), send[192], recv[3] = {-1, -1, -1}, j, i;
    for (j = 0; j < 64; j++)
        for (i = 0; i < 3; i++)
            send[3 * j + i] = 1000 * rank + 10 * j + i;
    CHECK_MPI(MPI_Scatter(send, 3, MPI_INT, recv, 3, MPI_INT, arg, ic));
    for (i = 0; i < 3; i++) {
        if (rg == color)
            CHECK_EQ(-1, recv[i], "scatter: the root's group receives nothing");
        else
            CHECK_EQ(1000 * world_of(rg, root) + 10 * lrank + i, recv[i], "scatter[%d]", i);
    }
}

static void allgather(void)
{
    int send[2], recv[128], j;
    send[0] = 100 * rank;
    send[1] = 100 * rank + 1;
    for (j = 0; j < 128; j++)
        recv[j] = -1;
    CHECK_MPI(MPI_Allgather(send, 2, MPI_INT, recv, 2, MPI_INT, ic));
    for (j = 0; j < rsize; j++) {
        CHECK_EQ(100 * world_of(1 - color, j), recv[2 * j], "allgather block %d", j);
        CHECK_EQ(100 * world_of(1 - color, j) + 1, recv[2 * j + 1], "allgather block %d", j);
    }
    CHECK_EQ(-1, recv[2 * rsize], "allgather wrote past the remote group's blocks");
}

static void alltoall(void)
{
    int send[128], recv[128], j, i;
    for (j = 0; j < rsize; j++)
        for (i = 0; i < 2; i++)
            send[2 * j + i] = 1000 * rank + 10 * j + i;
    for (j = 0; j < 128; j++)
        recv[j] = -1;
    CHECK_MPI(MPI_Alltoall(send, 2, MPI_INT, recv, 2, MPI_INT, ic));
    for (j = 0; j < rsize; j++)
        for (i = 0; i < 2; i++)
            CHECK_EQ(1000 * world_of(1 - color, j) + 10 * lrank + i, recv[2 * j + i], "alltoall from %d", j);
    CHECK_EQ(-1, recv[2 * rsize], "alltoall wrote past the remote group's blocks");
}

/* The v-variants: remote rank j's block has j + 1 ints, after a gap of j
 * ints left untouched: at (j(j+1)/2 of blocks) + (j(j+1)/2 of gaps). */
static int v_displ(int j)
{
    return j * (j + 1);
}

static void check_v_blocks(const int *recv, int n, int key_of_block(int), const char *what)
{
    int j, i, end = n * n; /* the end of the last block */
    for (j = 0; j < n; j++) {
        for (i = 0; i < j + 1; i++)
            CHECK_EQ(key_of_block(j) + i, recv[v_displ(j) + i], "%s: block %d [%d]", what, j, i);
        for (i = 0; i < j; i++)
            CHECK_EQ(-1, recv[v_displ(j) - j + i], "%s: gap before block %d untouched", what, j);
    }
    CHECK_EQ(-1, recv[end], "%s: nothing past the last block", what);
}

static int remote_key(int j)
{
    return 100 * world_of(1 - color, j);
}

static void v_variants(int rg)
{
    int root = group_size(rg) - 1, arg = root_arg(rg, root), send[256], recv[256], counts[64], displs[64], j, i;
    for (j = 0; j < rsize; j++) {
        counts[j] = j + 1;
        displs[j] = v_displ(j);
    }
    /* Gatherv: remote rank s sends s + 1 ints. */
    for (i = 0; i < lrank + 1; i++)
        send[i] = 100 * rank + i;
    for (i = 0; i < 256; i++)
        recv[i] = -1;
    CHECK_MPI(MPI_Gatherv(send, lrank + 1, MPI_INT, recv, counts, displs, MPI_INT, arg, ic));
    if (arg == MPI_ROOT)
        check_v_blocks(recv, rsize, remote_key, "gatherv");
    else
        CHECK_EQ(-1, recv[0], "gatherv: non-root's recvbuf untouched");

    /* Scatterv: remote rank s gets s + 1 ints. */
    for (j = 0; j < rsize; j++)
        for (i = 0; i < j + 1; i++)
            send[displs[j] + i] = 1000 * rank + 10 * j + i;
    for (i = 0; i < 256; i++)
        recv[i] = -1;
    CHECK_MPI(MPI_Scatterv(send, counts, displs, MPI_INT, recv, lrank + 1, MPI_INT, arg, ic));
    for (i = 0; i < lrank + 1; i++) {
        if (rg == color)
            CHECK_EQ(-1, recv[i], "scatterv: the root's group receives nothing");
        else
            CHECK_EQ(1000 * world_of(rg, root) + 10 * lrank + i, recv[i], "scatterv[%d]", i);
    }
    CHECK_EQ(-1, recv[lrank + 1], "scatterv: nothing past the block");
}

static void v_all(void)
{
    int send[256], recv[256], scounts[64], sdispls[64], rcounts[64], rdispls[64], j, i;
    /* Allgatherv: remote rank j's j + 1 ints. */
    for (j = 0; j < rsize; j++) {
        rcounts[j] = j + 1;
        rdispls[j] = v_displ(j);
    }
    for (i = 0; i < lrank + 1; i++)
        send[i] = 100 * rank + i;
    for (i = 0; i < 256; i++)
        recv[i] = -1;
    CHECK_MPI(MPI_Allgatherv(send, lrank + 1, MPI_INT, recv, rcounts, rdispls, MPI_INT, ic));
    check_v_blocks(recv, rsize, remote_key, "allgatherv");

    /* Alltoallv: local rank s sends (s + j) % 3 + 1 ints to remote rank j. */
    for (j = 0; j < rsize; j++) {
        scounts[j] = (lrank + j) % 3 + 1;
        sdispls[j] = 4 * j;
        rcounts[j] = (lrank + j) % 3 + 1;
        rdispls[j] = 4 * j;
        for (i = 0; i < scounts[j]; i++)
            send[4 * j + i] = 1000 * rank + 10 * j + i;
    }
    for (i = 0; i < 256; i++)
        recv[i] = -1;
    CHECK_MPI(MPI_Alltoallv(send, scounts, sdispls, MPI_INT, recv, rcounts, rdispls, MPI_INT, ic));
    for (j = 0; j < rsize; j++) {
        for (i = 0; i < rcounts[j]; i++)
            CHECK_EQ(1000 * world_of(1 - color, j) + 10 * lrank + i, recv[4 * j + i], "alltoallv from %d [%d]", j, i);
        for (; i < 4; i++)
            CHECK_EQ(-1, recv[4 * j + i], "alltoallv: past the block from %d", j);
    }

    /* Alltoallw: the same blocks, displacements in bytes. */
    {
        MPI_Datatype types[64];
        for (j = 0; j < rsize; j++) {
            types[j] = MPI_INT;
            sdispls[j] = rdispls[j] = 4 * j * (int)sizeof(int);
        }
        for (i = 0; i < 256; i++)
            recv[i] = -1;
        CHECK_MPI(MPI_Alltoallw(send, scounts, sdispls, types, recv, rcounts, rdispls, types, ic));
        for (j = 0; j < rsize; j++) {
            for (i = 0; i < rcounts[j]; i++)
                CHECK_EQ(1000 * world_of(1 - color, j) + 10 * lrank + i, recv[4 * j + i], "alltoallw from %d [%d]", j,
                         i);
            for (; i < 4; i++)
                CHECK_EQ(-1, recv[4 * j + i], "alltoallw: past the block from %d", j);
        }
    }
}

static void collectives(void)
{
    int rg;
    barrier(0);
    barrier(1);
    for (rg = 0; rg < 2; rg++) {
        bcast(rg);
        reduce(rg);
        gather(rg);
        scatter(rg);
        v_variants(rg);
    }
    v_all();
    allreduce();
    reduce_scatter();
    allgather();
    alltoall();
}

/* The merged communicator's world ranks, by merged rank. */
static void merged_order(MPI_Comm m, int *order)
{
    int n = -1, r = -1;
    CHECK_MPI(MPI_Comm_size(m, &n));
    CHECK_EQ(nranks, n, "merged size");
    CHECK_MPI(MPI_Comm_rank(m, &r));
    CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, order, 1, MPI_INT, m));
    CHECK_EQ(rank, order[r], "merged rank %d", r);
}

static void merge(void)
{
    int order[64], i, r, flag = -1, sum = -1;
    MPI_Comm m;

    for (r = 0; r < 2; r++) {
        /* r = 0: the even group low (first); r = 1: the odd group low. */
        int high = r == 0 ? color : 1 - color, first = r;
        CHECK_MPI(MPI_Intercomm_merge(ic, high, &m));
        CHECK_MPI(MPI_Comm_test_inter(m, &flag));
        CHECK_EQ(0, flag, "a merged communicator is an intracommunicator");
        merged_order(m, order);
        for (i = 0; i < group_size(first); i++)
            CHECK_EQ(world_of(first, i), order[i], "merge (group %d low): rank %d", first, i);
        for (i = 0; i < group_size(1 - first); i++)
            CHECK_EQ(world_of(1 - first, i), order[group_size(first) + i], "merge (group %d low): rank %d", first,
                     group_size(first) + i);
        CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, m));
        CHECK_EQ(nranks * (nranks - 1) / 2, sum, "allreduce on the merged communicator");
        CHECK_MPI(MPI_Comm_free(&m));
    }
    /* Both groups pass the same: either group first, each kept in order. */
    CHECK_MPI(MPI_Intercomm_merge(ic, 0, &m));
    merged_order(m, order);
    {
        int first = order[0] % 2;
        for (i = 0; i < nranks; i++) {
            int g = i < group_size(first) ? first : 1 - first;
            int k = i < group_size(first) ? i : i - group_size(first);
            CHECK_EQ(world_of(g, k), order[i], "merge (both high 0): rank %d", i);
        }
    }
    CHECK_MPI(MPI_Comm_free(&m));
}

static void dup_compare_split(void)
{
    MPI_Comm d, sp;
    int result = -1, flag = -1, got = -1, n = -1, r = -1, i, c, want_local, want_remote, order[64];

    CHECK_MPI(MPI_Comm_dup(ic, &d));
    CHECK_MPI(MPI_Comm_test_inter(d, &flag));
    CHECK_EQ(1, flag, "a dup of an intercommunicator is one");
    CHECK_MPI(MPI_Comm_remote_size(d, &n));
    CHECK_EQ(rsize, n, "dup: remote size");
    CHECK_MPI(MPI_Comm_compare(ic, d, &result));
    CHECK_EQ(MPI_CONGRUENT, result, "compare(intercomm, its dup)");
    CHECK_MPI(MPI_Comm_compare(ic, ic, &result));
    CHECK_EQ(MPI_IDENT, result, "compare(intercomm, itself)");
    CHECK_MPI(MPI_Comm_compare(ic, MPI_COMM_WORLD, &result));
    CHECK_EQ(MPI_UNEQUAL, result, "compare(intercomm, MPI_COMM_WORLD)");
    /* A message on the dup is not seen on the original. */
    if (lrank == 0)
        CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, 0, 70, d));
    if (lrank == 0) {
        MPI_Status st;
        CHECK_MPI(MPI_Probe(0, 70, d, &st));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 70, ic, &flag, MPI_STATUS_IGNORE));
        CHECK_EQ(0, flag, "a message on the dup is not on the original");
        CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 70, d, MPI_STATUS_IGNORE));
        CHECK_EQ(1 - color, got, "message on the dup");
    }
    CHECK_MPI(MPI_Barrier(d));
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK(d == MPI_COMM_NULL, "MPI_Comm_free sets MPI_COMM_NULL");

    /* MPI_Comm_create: each group names its ranks of even local rank. */
    {
        MPI_Group lg, part;
        MPI_Comm cc;
        int range[1][3], rn = (rsize + 1) / 2;
        range[0][0] = 0;
        range[0][1] = lsize - 1;
        range[0][2] = 2;
        CHECK_MPI(MPI_Comm_group(ic, &lg));
        CHECK_MPI(MPI_Group_range_incl(lg, 1, range, &part));
        CHECK_MPI(MPI_Comm_create(ic, part, &cc));
        if (lrank % 2) {
            CHECK(cc == MPI_COMM_NULL, "MPI_Comm_create: outside the part, MPI_COMM_NULL");
        } else {
            CHECK(cc != MPI_COMM_NULL, "MPI_Comm_create: a communicator");
            CHECK_MPI(MPI_Comm_test_inter(cc, &flag));
            CHECK_EQ(1, flag, "MPI_Comm_create on an intercommunicator makes one");
            CHECK_MPI(MPI_Comm_rank(cc, &r));
            CHECK_EQ(lrank / 2, r, "MPI_Comm_create: rank");
            CHECK_MPI(MPI_Comm_remote_size(cc, &n));
            CHECK_EQ(rn, n, "MPI_Comm_create: remote size");
            CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, order, 1, MPI_INT, cc));
            for (i = 0; i < rn; i++)
                CHECK_EQ(world_of(1 - color, 2 * i), order[i], "MPI_Comm_create: remote rank %d", i);
            CHECK_MPI(MPI_Comm_free(&cc));
        }
        CHECK_MPI(MPI_Group_free(&part));
        /* One side's part empty: nobody gets a communicator. */
        CHECK_MPI(MPI_Comm_create(ic, color ? MPI_GROUP_EMPTY : lg, &cc));
        CHECK(cc == MPI_COMM_NULL, "MPI_Comm_create with an empty part: MPI_COMM_NULL");
        CHECK_MPI(MPI_Group_free(&lg));
    }

    /* Split by type: every rank of this job shares one host, so the
     * shared-memory split keeps both groups whole, in key order; with
     * MPI_UNDEFINED nobody gets a communicator. */
    CHECK_MPI(MPI_Comm_split_type(ic, MPI_COMM_TYPE_SHARED, -lrank, MPI_INFO_NULL, &sp));
    CHECK(sp != MPI_COMM_NULL, "split_type shared: a communicator");
    CHECK_MPI(MPI_Comm_test_inter(sp, &flag));
    CHECK_EQ(1, flag, "a split_type of an intercommunicator is one");
    CHECK_MPI(MPI_Comm_size(sp, &n));
    CHECK_EQ(lsize, n, "split_type shared: local size");
    CHECK_MPI(MPI_Comm_remote_size(sp, &n));
    CHECK_EQ(rsize, n, "split_type shared: remote size");
    CHECK_MPI(MPI_Comm_rank(sp, &r));
    CHECK_EQ(lsize - 1 - lrank, r, "split_type shared: local rank in key order");
    CHECK_MPI(MPI_Comm_free(&sp));
    CHECK_MPI(MPI_Comm_split_type(ic, MPI_UNDEFINED, 0, MPI_INFO_NULL, &sp));
    CHECK(sp == MPI_COMM_NULL, "split_type with MPI_UNDEFINED gives MPI_COMM_NULL");

    /* Split: local rank 0 of a group of more than one stays out; the rest
     * in reverse order of local rank. */
    c = (lrank == 0 && lsize > 1) ? MPI_UNDEFINED : 3;
    CHECK_MPI(MPI_Comm_split(ic, c, -lrank, &sp));
    if (c == MPI_UNDEFINED) {
        CHECK(sp == MPI_COMM_NULL, "split with MPI_UNDEFINED gives MPI_COMM_NULL");
        return;
    }
    CHECK(sp != MPI_COMM_NULL, "split: a communicator");
    CHECK_MPI(MPI_Comm_test_inter(sp, &flag));
    CHECK_EQ(1, flag, "a split of an intercommunicator is one");
    want_local = lsize > 1 ? lsize - 1 : 1;
    want_remote = rsize > 1 ? rsize - 1 : 1;
    CHECK_MPI(MPI_Comm_size(sp, &n));
    CHECK_EQ(want_local, n, "split: local size");
    CHECK_MPI(MPI_Comm_remote_size(sp, &n));
    CHECK_EQ(want_remote, n, "split: remote size");
    CHECK_MPI(MPI_Comm_rank(sp, &r));
    CHECK_EQ(lsize - 1 - lrank, r, "split: reversed local rank");
    CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, order, 1, MPI_INT, sp));
    for (i = 0; i < want_remote; i++)
        CHECK_EQ(world_of(1 - color, rsize - 1 - i), order[i], "split: remote rank %d", i);
    CHECK_MPI(MPI_Comm_free(&sp));
}

static void idup(void)
{
    MPI_Comm d[2], stagger = MPI_COMM_NULL;
    MPI_Request req[2];
    int flag = -1, n = -1, result = -1, i, j, got, sum, want;

    if (color == 1)
        CHECK_MPI(MPI_Comm_dup(local, &stagger));
    if (lrank == 0) {
        for (i = 1; i < rsize; i++) {
            got = -1;
            CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, i, 80, ic, MPI_STATUS_IGNORE));
            CHECK_EQ(world_of(1 - color, i), got, "idup: message from remote rank %d", i);
        }
        for (j = 0; j < 2; j++)
            CHECK_MPI(MPI_Comm_idup(ic, &d[j], &req[j]));
    } else {
        for (j = 0; j < 2; j++)
            CHECK_MPI(MPI_Comm_idup(ic, &d[j], &req[j]));
        CHECK_MPI(MPI_Ssend(&rank, 1, MPI_INT, 0, 80, ic));
    }
    CHECK_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    for (j = 0; j < 2; j++) {
        CHECK_MPI(MPI_Comm_test_inter(d[j], &flag));
        CHECK_EQ(1, flag, "idup %d of an intercommunicator is one", j);
        CHECK_MPI(MPI_Comm_remote_size(d[j], &n));
        CHECK_EQ(rsize, n, "idup %d: remote size", j);
        CHECK_MPI(MPI_Comm_compare(ic, d[j], &result));
        CHECK_EQ(MPI_CONGRUENT, result, "compare(intercomm, idup %d)", j);
        /* The sum of the remote group's world ranks. */
        CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, d[j]));
        for (want = 0, i = 0; i < rsize; i++)
            want += world_of(1 - color, i);
        CHECK_EQ(want, sum, "allreduce on idup %d", j);
    }
    /* Each has its own context: a message on the second is not seen on the
     * first nor on the original. */
    if (lrank == 0) {
        CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, 0, 81, d[1]));
        CHECK_MPI(MPI_Probe(0, 81, d[1], MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 81, d[0], &flag, MPI_STATUS_IGNORE));
        CHECK_EQ(0, flag, "a message on idup 1 is not on idup 0");
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 81, ic, &flag, MPI_STATUS_IGNORE));
        CHECK_EQ(0, flag, "a message on idup 1 is not on the original");
        CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 81, d[1], MPI_STATUS_IGNORE));
        CHECK_EQ(world_of(1 - color, 0), got, "message on idup 1");
    }
    CHECK_MPI(MPI_Barrier(d[0]));
    for (j = 0; j < 2; j++)
        CHECK_MPI(MPI_Comm_free(&d[j]));
    if (stagger != MPI_COMM_NULL)
        CHECK_MPI(MPI_Comm_free(&stagger));
}

/* The error classes are Tandem's; another MPI must fail, maybe otherwise. */
#define expect_error(rc, cls, what)                                                                                   \
    do {                                                                                                               \
        if (tc_is_tandem())                                                                                            \
            tc_expect_class((rc), (cls), (what));                                                                      \
        else                                                                                                           \
            CHECK((rc) != MPI_SUCCESS, "%s fails", (what));                                                            \
    } while (0)

static void errors(void)
{
    int rc, n, buf[2] = {0, 0};
    MPI_Comm x = MPI_COMM_NULL;
    MPI_Group g;
    MPI_Request req;

    rc = MPI_Intercomm_create(local, lsize, MPI_COMM_WORLD, 1 - color, 7, &x);
    expect_error(rc, MPI_ERR_RANK, "local leader = local size");
    rc = MPI_Intercomm_create(local, -1, MPI_COMM_WORLD, 1 - color, 7, &x);
    expect_error(rc, MPI_ERR_RANK, "local leader -1");
    rc = MPI_Intercomm_create(MPI_COMM_NULL, 0, MPI_COMM_WORLD, 1 - color, 7, &x);
    expect_error(rc, MPI_ERR_COMM, "MPI_COMM_NULL as local communicator");
    rc = MPI_Intercomm_create(ic, 0, MPI_COMM_WORLD, 1 - color, 7, &x);
    expect_error(rc, MPI_ERR_COMM, "an intercommunicator as local communicator");
    rc = MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, nranks, 7, &x);
    expect_error(rc, MPI_ERR_RANK, "remote leader out of range");
    /* The remote leader is this group's own leader: the leader finds out,
     * and tells its group. */
    rc = MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color, 8, &x);
    expect_error(rc, MPI_ERR_RANK, "remote leader in the local group");
    if (tc_is_tandem()) {
        /* Open MPI takes it. */
        rc = MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, -5, &x);
        expect_error(rc, MPI_ERR_TAG, "tag -5 (on every rank of the group)");
    }
    CHECK(x == MPI_COMM_NULL, "no communicator from failed calls");

    if (tc_is_tandem()) {
        /* Erroneous programs that MPICH lets pass. */
        rc = MPI_Comm_remote_size(MPI_COMM_WORLD, &n);
        expect_error(rc, MPI_ERR_COMM, "MPI_Comm_remote_size of an intracommunicator");
        rc = MPI_Comm_remote_group(MPI_COMM_WORLD, &g);
        expect_error(rc, MPI_ERR_COMM, "MPI_Comm_remote_group of an intracommunicator");
        rc = MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &x);
        expect_error(rc, MPI_ERR_COMM, "MPI_Intercomm_merge of an intracommunicator");
    }
    rc = MPI_Send(buf, 1, MPI_INT, rsize, 0, ic);
    expect_error(rc, MPI_ERR_RANK, "send to remote rank = remote size");
    rc = MPI_Recv(buf, 1, MPI_INT, rsize, 0, ic, MPI_STATUS_IGNORE);
    expect_error(rc, MPI_ERR_RANK, "receive from remote rank = remote size");
    rc = MPI_Bcast(buf, 1, MPI_INT, rsize, ic);
    expect_error(rc, MPI_ERR_ROOT, "bcast root = remote size");
    rc = MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_INT, MPI_SUM, ic);
    expect_error(rc, MPI_ERR_BUFFER, "MPI_IN_PLACE on an intercommunicator");
    if (tc_is_tandem()) {
        MPI_Comm cart;
        int dims[1] = {1}, periods[1] = {0};
        rc = MPI_Scan_init(buf, buf + 1, 1, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &req);
        expect_error(rc, MPI_ERR_COMM, "MPI_Scan_init on an intercommunicator");
        rc = MPI_Scan(buf, buf + 1, 1, MPI_INT, MPI_SUM, ic);
        expect_error(rc, MPI_ERR_COMM, "MPI_Scan on an intercommunicator");
        rc = MPI_Exscan(buf, buf + 1, 1, MPI_INT, MPI_SUM, ic);
        expect_error(rc, MPI_ERR_COMM, "MPI_Exscan on an intercommunicator");
        rc = MPI_Cart_create(ic, 1, dims, periods, 0, &cart);
        expect_error(rc, MPI_ERR_COMM, "MPI_Cart_create on an intercommunicator");
        rc = MPI_Comm_create_group(ic, MPI_GROUP_EMPTY, 0, &x);
        expect_error(rc, MPI_ERR_COMM, "MPI_Comm_create_group on an intercommunicator (not in Tandem)");
    }
    /* The intercommunicator still works after the errors. */
    allreduce();
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK(nranks <= 30, "at most 30 ranks (the buffers of the v-variants)");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    color = rank % 2;
    lrank = rank / 2;
    lsize = group_size(color);
    rsize = group_size(1 - color);

    create();
    shape();
    point_to_point();
    collectives();
    merge();
    dup_compare_split();
    idup();
    errors();
    CHECK_MPI(MPI_Comm_free(&ic));
    CHECK_MPI(MPI_Comm_free(&local));
    return tc_finish(NAME);
}

/*
 * large_count.c - the MPI-4 large-count (_c) forms: every one is called
 * with ordinary counts and its results compared with its int form's (data,
 * statuses, counts); counts beyond int where they are cheap (datatype sizes
 * and extents of 3 GiB, statuses of 5 GiB); negative and too-large counts
 * failing with MPI_ERR_COUNT.
 */
#include "check.h"

#include <limits.h>

#define N 6
#define MAXP 16

static int me, np, next, prev;

static int val(int src, int key, int i) { return src * 100000 + key * 100 + i; }

static void fill(int *b, int n, int src, int key)
{
    for (int i = 0; i < n; i++)
        b[i] = val(src, key, i);
}

static void expect(const int *b, int n, int src, int key, const char *what)
{
    for (int i = 0; i < n; i++)
        if (b[i] != val(src, key, i))
            FAIL("%s[%d] (expected %d got %d)", what, i, val(src, key, i), b[i]);
}

static void same(const void *a, const void *b, size_t n, const char *what)
{
    if (memcmp(a, b, n) != 0)
        FAIL("%s differs from the int form's result", what);
}

static void check_status(MPI_Status *st, int src, int tag, int n, const char *what)
{
    MPI_Count c = -1;
    int ci = -1;
    CHECK_EQ(src, st->MPI_SOURCE, "%s source", what);
    CHECK_EQ(tag, st->MPI_TAG, "%s tag", what);
    CHECK_MPI(MPI_Get_count_c(st, MPI_INT, &c));
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &ci));
    CHECK_EQ(n, c, "%s MPI_Get_count_c", what);
    CHECK_EQ(n, ci, "%s MPI_Get_count", what);
    CHECK_MPI(MPI_Get_elements_c(st, MPI_INT, &c));
    CHECK_EQ(n, c, "%s MPI_Get_elements_c", what);
}

/* ------------------------------------------------------------ point to point */

static void pt2pt(void)
{
    int sb[N], rb[N];
    MPI_Status st;
    MPI_Request rq[2];
    MPI_Message msg;

    fill(sb, N, me, 1);
    CHECK_MPI(MPI_Irecv_c(rb, N, MPI_INT, prev, 1, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Send_c(sb, N, MPI_INT, next, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&rq[0], &st));
    expect(rb, N, prev, 1, "Send_c/Irecv_c");
    check_status(&st, prev, 1, N, "Irecv_c");

    fill(sb, N, me, 2);
    CHECK_MPI(MPI_Isend_c(sb, N, MPI_INT, next, 2, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Recv_c(rb, N, MPI_INT, prev, 2, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    expect(rb, N, prev, 2, "Isend_c/Recv_c");
    check_status(&st, prev, 2, N, "Recv_c");

    int bsize = 4 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    void *bbuf = malloc(bsize);
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));
    /* Bsend, Ssend, Rsend and their I forms: the receive posted first. */
    for (int k = 0; k < 6; k++) {
        int tag = 10 + k;
        fill(sb, N, me, tag);
        CHECK_MPI(MPI_Irecv_c(rb, N, MPI_INT, prev, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        rq[1] = MPI_REQUEST_NULL;
        switch (k) {
        case 0: CHECK_MPI(MPI_Bsend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD)); break;
        case 1: CHECK_MPI(MPI_Ibsend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        case 2: CHECK_MPI(MPI_Issend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        case 3: CHECK_MPI(MPI_Rsend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD)); break;
        case 4: CHECK_MPI(MPI_Irsend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        case 5:
            if (np > 1) {
                CHECK_MPI(MPI_Ssend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD));
            } else {
                CHECK_MPI(MPI_Issend_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1]));
            }
            break;
        }
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        expect(rb, N, prev, tag, "B/S/R send _c");
    }

    /* Persistent point to point. */
    for (int k = 0; k < 4; k++) {
        int tag = 20 + k;
        fill(sb, N, me, tag);
        CHECK_MPI(MPI_Recv_init_c(rb, N, MPI_INT, prev, tag, MPI_COMM_WORLD, &rq[0]));
        switch (k) {
        case 0: CHECK_MPI(MPI_Send_init_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        case 1: CHECK_MPI(MPI_Bsend_init_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        case 2: CHECK_MPI(MPI_Ssend_init_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        case 3: CHECK_MPI(MPI_Rsend_init_c(sb, N, MPI_INT, next, tag, MPI_COMM_WORLD, &rq[1])); break;
        }
        CHECK_MPI(MPI_Start(&rq[0]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Start(&rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        expect(rb, N, prev, tag, "persistent _c");
        CHECK_MPI(MPI_Request_free(&rq[0]));
        CHECK_MPI(MPI_Request_free(&rq[1]));
    }
    void *addr;
    int asize;
    CHECK_MPI(MPI_Buffer_detach(&addr, &asize));
    free(bbuf);

    fill(sb, N, me, 30);
    CHECK_MPI(MPI_Sendrecv_c(sb, N, MPI_INT, next, 30, rb, N, MPI_INT, prev, 30, MPI_COMM_WORLD, &st));
    expect(rb, N, prev, 30, "Sendrecv_c");
    check_status(&st, prev, 30, N, "Sendrecv_c");
    fill(rb, N, me, 31);
    CHECK_MPI(MPI_Sendrecv_replace_c(rb, N, MPI_INT, next, 31, prev, 31, MPI_COMM_WORLD, &st));
    expect(rb, N, prev, 31, "Sendrecv_replace_c");
    fill(sb, N, me, 32);
    CHECK_MPI(MPI_Isendrecv_c(sb, N, MPI_INT, next, 32, rb, N, MPI_INT, prev, 32, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], &st));
    expect(rb, N, prev, 32, "Isendrecv_c");
    check_status(&st, prev, 32, N, "Isendrecv_c");
    fill(rb, N, me, 33);
    CHECK_MPI(MPI_Isendrecv_replace_c(rb, N, MPI_INT, next, 33, prev, 33, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], &st));
    expect(rb, N, prev, 33, "Isendrecv_replace_c");

    fill(sb, N, me, 34);
    CHECK_MPI(MPI_Isend_c(sb, N, MPI_INT, next, 34, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Mprobe(prev, 34, MPI_COMM_WORLD, &msg, &st));
    CHECK_MPI(MPI_Mrecv_c(rb, N, MPI_INT, &msg, &st));
    CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    expect(rb, N, prev, 34, "Mrecv_c");
    check_status(&st, prev, 34, N, "Mrecv_c");
    fill(sb, N, me, 35);
    CHECK_MPI(MPI_Isend_c(sb, N, MPI_INT, next, 35, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Mprobe(prev, 35, MPI_COMM_WORLD, &msg, &st));
    CHECK_MPI(MPI_Imrecv_c(rb, N, MPI_INT, &msg, &rq[0]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    expect(rb, N, prev, 35, "Imrecv_c");

    /* Counts that do not fit fail, before anything is sent: negative ones,
     * more elements of a predefined type than memory holds, and past INT_MAX
     * of a derived datatype (only predefined ones move more; see
     * big_message.c). */
    MPI_Datatype pair;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    tc_expect_class(MPI_Send_c(sb, -1, MPI_INT, next, 36, MPI_COMM_WORLD), MPI_ERR_COUNT, "Send_c count -1");
    tc_expect_class(MPI_Send_c(sb, (MPI_Count)INT_MAX + 1, pair, next, 36, MPI_COMM_WORLD), MPI_ERR_COUNT,
                    "Send_c count INT_MAX+1 of a derived datatype");
    tc_expect_class(MPI_Send_c(sb, (MPI_Count)1 << 62, MPI_INT, next, 36, MPI_COMM_WORLD), MPI_ERR_COUNT,
                    "Send_c count 2^62 of MPI_INT");
    tc_expect_class(MPI_Irecv_c(rb, -(MPI_Count)1 << 40, MPI_INT, prev, 36, MPI_COMM_WORLD, &rq[0]), MPI_ERR_COUNT,
                    "Irecv_c count -2^40");
    tc_expect_class(MPI_Irecv_c(rb, (MPI_Count)INT_MAX + 1, pair, prev, 36, MPI_COMM_WORLD, &rq[0]), MPI_ERR_COUNT,
                    "Irecv_c count INT_MAX+1 of a derived datatype");
    CHECK_MPI(MPI_Type_free(&pair));
}

/* ------------------------------------------------------------- collectives */

#define COLL3(B, I, P, PREP, VERIFY, ...)                                                                              \
    do {                                                                                                               \
        MPI_Request rq_;                                                                                               \
        PREP;                                                                                                          \
        CHECK_MPI(B(__VA_ARGS__));                                                                                     \
        VERIFY;                                                                                                        \
        PREP;                                                                                                          \
        CHECK_MPI(I(__VA_ARGS__, &rq_));                                                                               \
        CHECK_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                                                                  \
        VERIFY;                                                                                                        \
        PREP;                                                                                                          \
        CHECK_MPI(P(__VA_ARGS__, MPI_INFO_NULL, &rq_));                                                                \
        CHECK_MPI(MPI_Start(&rq_));                                                                                    \
        CHECK_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                                                                  \
        VERIFY;                                                                                                        \
        CHECK_MPI(MPI_Request_free(&rq_));                                                                             \
    } while (0)

static int sb[MAXP * N], out[MAXP * N], ref[MAXP * N];
#define CLEAR memset(out, 0xff, sizeof out)
#define SAME(what) same(out, ref, sizeof out, what)
#define REF(call)                                                                                                      \
    do {                                                                                                               \
        memset(ref, 0xff, sizeof ref);                                                                                 \
        memset(out, 0xff, sizeof out);                                                                                 \
        CHECK_MPI(call);                                                                                               \
    } while (0)

static void collectives(void)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int icounts[MAXP] = {0}, idispls[MAXP] = {0}, ibytes[MAXP] = {0};
    MPI_Count counts[MAXP];
    MPI_Aint displs[MAXP], bdispls[MAXP];
    MPI_Datatype types[MAXP];
    for (int i = 0; i < np; i++) {
        icounts[i] = counts[i] = 1 + i % 3;
        idispls[i] = displs[i] = i * N;
        ibytes[i] = bdispls[i] = i * N * (int)sizeof(int);
        types[i] = MPI_INT;
    }
    int mine = icounts[me];
    /* What every peer expects from this rank. */
    int iscounts[MAXP];
    MPI_Count scounts[MAXP];
    for (int i = 0; i < np; i++)
        iscounts[i] = scounts[i] = mine;
    fill(sb, MAXP * N, me, 40);

    /* Bcast: in place on one buffer. */
    memset(ref, 0, sizeof ref);
    if (me == 0)
        fill(ref, N, 0, 41);
    CHECK_MPI(MPI_Bcast(ref, N, MPI_INT, 0, w));
    COLL3(MPI_Bcast_c, MPI_Ibcast_c, MPI_Bcast_init_c, (memset(out, 0, sizeof out), me == 0 ? fill(out, N, 0, 41) : (void)0),
          SAME("Bcast_c"), out, N, MPI_INT, 0, w);

    REF(MPI_Reduce(sb, ref, N, MPI_INT, MPI_SUM, 0, w));
    COLL3(MPI_Reduce_c, MPI_Ireduce_c, MPI_Reduce_init_c, CLEAR, SAME("Reduce_c"), sb, out, N, MPI_INT, MPI_SUM, 0, w);
    REF(MPI_Allreduce(sb, ref, N, MPI_INT, MPI_SUM, w));
    COLL3(MPI_Allreduce_c, MPI_Iallreduce_c, MPI_Allreduce_init_c, CLEAR, SAME("Allreduce_c"), sb, out, N, MPI_INT,
          MPI_SUM, w);
    REF(MPI_Scan(sb, ref, N, MPI_INT, MPI_SUM, w));
    COLL3(MPI_Scan_c, MPI_Iscan_c, MPI_Scan_init_c, CLEAR, SAME("Scan_c"), sb, out, N, MPI_INT, MPI_SUM, w);
    /* Exscan leaves rank 0's result undefined: both buffers start alike. */
    REF(MPI_Exscan(sb, ref, N, MPI_INT, MPI_SUM, w));
    COLL3(MPI_Exscan_c, MPI_Iexscan_c, MPI_Exscan_init_c, CLEAR, (me ? SAME("Exscan_c") : (void)0), sb, out, N,
          MPI_INT, MPI_SUM, w);
    REF(MPI_Reduce_scatter_block(sb, ref, 2, MPI_INT, MPI_SUM, w));
    COLL3(MPI_Reduce_scatter_block_c, MPI_Ireduce_scatter_block_c, MPI_Reduce_scatter_block_init_c, CLEAR,
          SAME("Reduce_scatter_block_c"), sb, out, 2, MPI_INT, MPI_SUM, w);
    REF(MPI_Reduce_scatter(sb, ref, icounts, MPI_INT, MPI_SUM, w));
    COLL3(MPI_Reduce_scatter_c, MPI_Ireduce_scatter_c, MPI_Reduce_scatter_init_c, CLEAR, SAME("Reduce_scatter_c"), sb,
          out, counts, MPI_INT, MPI_SUM, w);

    REF(MPI_Gather(sb, N, MPI_INT, ref, N, MPI_INT, 0, w));
    COLL3(MPI_Gather_c, MPI_Igather_c, MPI_Gather_init_c, CLEAR, SAME("Gather_c"), sb, N, MPI_INT, out, N, MPI_INT, 0,
          w);
    REF(MPI_Gatherv(sb, mine, MPI_INT, ref, icounts, idispls, MPI_INT, 0, w));
    COLL3(MPI_Gatherv_c, MPI_Igatherv_c, MPI_Gatherv_init_c, CLEAR, SAME("Gatherv_c"), sb, mine, MPI_INT, out, counts,
          displs, MPI_INT, 0, w);
    REF(MPI_Scatter(sb, N, MPI_INT, ref, N, MPI_INT, 0, w));
    COLL3(MPI_Scatter_c, MPI_Iscatter_c, MPI_Scatter_init_c, CLEAR, SAME("Scatter_c"), sb, N, MPI_INT, out, N, MPI_INT,
          0, w);
    REF(MPI_Scatterv(sb, icounts, idispls, MPI_INT, ref, mine, MPI_INT, 0, w));
    COLL3(MPI_Scatterv_c, MPI_Iscatterv_c, MPI_Scatterv_init_c, CLEAR, SAME("Scatterv_c"), sb, counts, displs, MPI_INT,
          out, mine, MPI_INT, 0, w);
    REF(MPI_Allgather(sb, N, MPI_INT, ref, N, MPI_INT, w));
    COLL3(MPI_Allgather_c, MPI_Iallgather_c, MPI_Allgather_init_c, CLEAR, SAME("Allgather_c"), sb, N, MPI_INT, out, N,
          MPI_INT, w);
    REF(MPI_Allgatherv(sb, mine, MPI_INT, ref, icounts, idispls, MPI_INT, w));
    COLL3(MPI_Allgatherv_c, MPI_Iallgatherv_c, MPI_Allgatherv_init_c, CLEAR, SAME("Allgatherv_c"), sb, mine, MPI_INT,
          out, counts, displs, MPI_INT, w);
    REF(MPI_Alltoall(sb, N, MPI_INT, ref, N, MPI_INT, w));
    COLL3(MPI_Alltoall_c, MPI_Ialltoall_c, MPI_Alltoall_init_c, CLEAR, SAME("Alltoall_c"), sb, N, MPI_INT, out, N,
          MPI_INT, w);
    REF(MPI_Alltoallv(sb, iscounts, idispls, MPI_INT, ref, icounts, idispls, MPI_INT, w));
    COLL3(MPI_Alltoallv_c, MPI_Ialltoallv_c, MPI_Alltoallv_init_c, CLEAR, SAME("Alltoallv_c"), sb, scounts, displs,
          MPI_INT, out, counts, displs, MPI_INT, w);
    REF(MPI_Alltoallw(sb, iscounts, ibytes, types, ref, icounts, ibytes, types, w));
    COLL3(MPI_Alltoallw_c, MPI_Ialltoallw_c, MPI_Alltoallw_init_c, CLEAR, SAME("Alltoallw_c"), sb, scounts, bdispls,
          types, out, counts, bdispls, types, w);

    /* In place: the ignored sendcount is not checked even when huge. */
    REF(MPI_Allgather(sb + me * N, N, MPI_INT, ref, N, MPI_INT, w));
    memset(out, 0xff, sizeof out);
    memcpy(out + me * N, sb + me * N, N * sizeof(int));
    CHECK_MPI(MPI_Allgather_c(MPI_IN_PLACE, (MPI_Count)1 << 40, MPI_INT, out, N, MPI_INT, w));
    SAME("Allgather_c in place");

    int a[N], b[N], c[N];
    fill(a, N, me, 42);
    fill(b, N, me, 43);
    memcpy(c, b, sizeof b);
    CHECK_MPI(MPI_Reduce_local(a, b, N, MPI_INT, MPI_SUM));
    CHECK_MPI(MPI_Reduce_local_c(a, c, N, MPI_INT, MPI_SUM));
    same(b, c, sizeof b, "Reduce_local_c");

    tc_expect_class(MPI_Bcast_c(out, -1, MPI_INT, 0, w), MPI_ERR_COUNT, "Bcast_c count -1");
    tc_expect_class(MPI_Allreduce_c(sb, out, (MPI_Count)INT_MAX + 1, MPI_INT, MPI_SUM, w), MPI_ERR_COUNT,
                    "Allreduce_c count INT_MAX+1");
    counts[np - 1] = (MPI_Count)1 << 33;
    tc_expect_class(MPI_Allgatherv_c(sb, mine, MPI_INT, out, counts, displs, MPI_INT, w), MPI_ERR_COUNT,
                    "Allgatherv_c recvcounts beyond int");
    counts[np - 1] = 1 + (np - 1) % 3;
    displs[0] = (MPI_Aint)1 << 40;
    tc_expect_class(MPI_Allgatherv_c(sb, mine, MPI_INT, out, counts, displs, MPI_INT, w), MPI_ERR_ARG,
                    "Allgatherv_c displacement beyond int");
    displs[0] = 0;
}

static void neighbours(void)
{
    MPI_Comm ring;
    int dims[1] = {np}, periods[1] = {1};
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    int icounts[2] = {2, 3}, idispls[2] = {0, N}, ibytes[2] = {0, N * (int)sizeof(int)};
    MPI_Count counts[2] = {2, 3};
    /* An allgatherv's neighbours each send 2 (receive counts must match). */
    int igathered[2] = {2, 2};
    MPI_Count gathered[2] = {2, 2};
    MPI_Aint displs[2] = {0, N}, bdispls[2] = {0, N * (MPI_Aint)sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    fill(sb, MAXP * N, me, 50);

    REF(MPI_Neighbor_allgather(sb, N, MPI_INT, ref, N, MPI_INT, ring));
    COLL3(MPI_Neighbor_allgather_c, MPI_Ineighbor_allgather_c, MPI_Neighbor_allgather_init_c, CLEAR,
          SAME("Neighbor_allgather_c"), sb, N, MPI_INT, out, N, MPI_INT, ring);
    REF(MPI_Neighbor_allgatherv(sb, 2, MPI_INT, ref, igathered, idispls, MPI_INT, ring));
    COLL3(MPI_Neighbor_allgatherv_c, MPI_Ineighbor_allgatherv_c, MPI_Neighbor_allgatherv_init_c, CLEAR,
          SAME("Neighbor_allgatherv_c"), sb, 2, MPI_INT, out, gathered, displs, MPI_INT, ring);
    REF(MPI_Neighbor_alltoall(sb, N, MPI_INT, ref, N, MPI_INT, ring));
    COLL3(MPI_Neighbor_alltoall_c, MPI_Ineighbor_alltoall_c, MPI_Neighbor_alltoall_init_c, CLEAR,
          SAME("Neighbor_alltoall_c"), sb, N, MPI_INT, out, N, MPI_INT, ring);
    /* Each side sends as many as the other side receives from it. */
    int isend[2] = {3, 2};
    MPI_Count send[2] = {3, 2};
    REF(MPI_Neighbor_alltoallv(sb, isend, idispls, MPI_INT, ref, icounts, idispls, MPI_INT, ring));
    COLL3(MPI_Neighbor_alltoallv_c, MPI_Ineighbor_alltoallv_c, MPI_Neighbor_alltoallv_init_c, CLEAR,
          SAME("Neighbor_alltoallv_c"), sb, send, displs, MPI_INT, out, counts, displs, MPI_INT, ring);
    REF(MPI_Neighbor_alltoallw(sb, isend, bdispls, types, ref, icounts, bdispls, types, ring));
    COLL3(MPI_Neighbor_alltoallw_c, MPI_Ineighbor_alltoallw_c, MPI_Neighbor_alltoallw_init_c, CLEAR,
          SAME("Neighbor_alltoallw_c"), sb, send, bdispls, types, out, counts, bdispls, types, ring);
    (void)ibytes;
    CHECK_MPI(MPI_Comm_free(&ring));
}

/* --------------------------------------------------------------------- RMA */

static void rma(void)
{
    int mem[8 * N];
    memset(mem, 0, sizeof mem);
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int src[N], got[N], old[N];
    fill(src, N, me, 60);
    MPI_Request rq[4];
    CHECK_MPI(MPI_Win_lock_all(0, win));
    /* Every rank works on its own window only: no races. */
    CHECK_MPI(MPI_Put_c(src, N, MPI_INT, me, 0, N, MPI_INT, win));
    CHECK_MPI(MPI_Accumulate_c(src, N, MPI_INT, me, N, N, MPI_INT, MPI_SUM, win));
    CHECK_MPI(MPI_Rput_c(src, N, MPI_INT, me, 2 * N, N, MPI_INT, win, &rq[0]));
    CHECK_MPI(MPI_Raccumulate_c(src, N, MPI_INT, me, 3 * N, N, MPI_INT, MPI_SUM, win, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Win_flush(me, win));
    CHECK_MPI(MPI_Get_c(got, N, MPI_INT, me, 0, N, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush(me, win));
    expect(got, N, me, 60, "Put_c then Get_c");
    CHECK_MPI(MPI_Rget_c(got, N, MPI_INT, me, N, N, MPI_INT, win, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    expect(got, N, me, 60, "Accumulate_c then Rget_c");
    CHECK_MPI(MPI_Get_accumulate_c(src, N, MPI_INT, old, N, MPI_INT, me, 2 * N, N, MPI_INT, MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_flush(me, win));
    expect(old, N, me, 60, "Rput_c then Get_accumulate_c");
    CHECK_MPI(MPI_Rget_accumulate_c(src, N, MPI_INT, old, N, MPI_INT, me, 3 * N, N, MPI_INT, MPI_NO_OP, win, &rq[0]));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    expect(old, N, me, 60, "Raccumulate_c then Rget_accumulate_c");
    tc_expect_class(MPI_Put_c(src, -3, MPI_INT, me, 0, N, MPI_INT, win), MPI_ERR_COUNT, "Put_c origin_count -3");
    tc_expect_class(MPI_Get_c(got, N, MPI_INT, me, 0, (MPI_Count)1 << 35, MPI_INT, win), MPI_ERR_COUNT,
                    "Get_c target_count 2^35");
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Win_free(&win));
}

/* --------------------------------------------------------------- datatypes */

/* Two datatypes agree: size, extent, true extent and packed bytes of data. */
static void same_type(MPI_Datatype a, MPI_Datatype b, const char *what)
{
    static int data[256];
    for (int i = 0; i < 256; i++)
        data[i] = i * 7 + 1;
    CHECK_MPI(MPI_Type_commit(&a));
    CHECK_MPI(MPI_Type_commit(&b));
    MPI_Count sa, sb_, la, lb, ea, eb;
    int si;
    CHECK_MPI(MPI_Type_size_c(a, &sa));
    CHECK_MPI(MPI_Type_size_c(b, &sb_));
    CHECK_MPI(MPI_Type_size(a, &si));
    CHECK_EQ(sa, sb_, "%s size", what);
    CHECK_EQ(si, sa, "%s int size", what);
    CHECK_MPI(MPI_Type_get_extent_c(a, &la, &ea));
    CHECK_MPI(MPI_Type_get_extent_c(b, &lb, &eb));
    CHECK_EQ(la, lb, "%s lb", what);
    CHECK_EQ(ea, eb, "%s extent", what);
    CHECK_MPI(MPI_Type_get_true_extent_c(a, &la, &ea));
    CHECK_MPI(MPI_Type_get_true_extent_c(b, &lb, &eb));
    CHECK_EQ(la, lb, "%s true lb", what);
    CHECK_EQ(ea, eb, "%s true extent", what);
    char pa[1024], pb[1024];
    MPI_Count pos_c = 0, psize = 0;
    int pos = 0;
    CHECK_MPI(MPI_Pack_size_c(1, a, MPI_COMM_WORLD, &psize));
    CHECK(psize >= sa && psize <= (MPI_Count)sizeof pa, "%s Pack_size_c %lld", what, (long long)psize);
    CHECK_MPI(MPI_Pack(data, 1, a, pa, sizeof pa, &pos, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Pack_c(data, 1, b, pb, sizeof pb, &pos_c, MPI_COMM_WORLD));
    CHECK_EQ(pos, pos_c, "%s Pack_c position", what);
    same(pa, pb, pos, what);
    static int back[256];
    memset(back, 0, sizeof back);
    pos_c = 0;
    CHECK_MPI(MPI_Unpack_c(pb, pos, &pos_c, back, 1, b, MPI_COMM_WORLD));
    CHECK_EQ(pos, pos_c, "%s Unpack_c position", what);
    pos_c = 0;
    CHECK_MPI(MPI_Pack_c(back, 1, a, pb, sizeof pb, &pos_c, MPI_COMM_WORLD));
    same(pa, pb, pos, "Unpack_c round trip");
    CHECK_MPI(MPI_Type_free(&a));
    CHECK_MPI(MPI_Type_free(&b));
}

static void datatypes(void)
{
    MPI_Datatype a, b;
    CHECK_MPI(MPI_Type_contiguous(5, MPI_INT, &a));
    CHECK_MPI(MPI_Type_contiguous_c(5, MPI_INT, &b));
    same_type(a, b, "contiguous_c");
    CHECK_MPI(MPI_Type_vector(3, 2, 4, MPI_INT, &a));
    CHECK_MPI(MPI_Type_vector_c(3, 2, 4, MPI_INT, &b));
    same_type(a, b, "vector_c");
    CHECK_MPI(MPI_Type_create_hvector(3, 2, 20, MPI_INT, &a));
    CHECK_MPI(MPI_Type_create_hvector_c(3, 2, 20, MPI_INT, &b));
    same_type(a, b, "hvector_c");
    int ibl[3] = {1, 2, 3}, idi[3] = {0, 4, 9};
    MPI_Count cbl[3] = {1, 2, 3}, cdi[3] = {0, 4, 9}, cby[3] = {0, 16, 36};
    MPI_Aint aby[3] = {0, 16, 36};
    CHECK_MPI(MPI_Type_indexed(3, ibl, idi, MPI_INT, &a));
    CHECK_MPI(MPI_Type_indexed_c(3, cbl, cdi, MPI_INT, &b));
    same_type(a, b, "indexed_c");
    CHECK_MPI(MPI_Type_create_hindexed(3, ibl, aby, MPI_INT, &a));
    CHECK_MPI(MPI_Type_create_hindexed_c(3, cbl, cby, MPI_INT, &b));
    same_type(a, b, "hindexed_c");
    CHECK_MPI(MPI_Type_create_indexed_block(3, 2, idi, MPI_INT, &a));
    CHECK_MPI(MPI_Type_create_indexed_block_c(3, 2, cdi, MPI_INT, &b));
    same_type(a, b, "indexed_block_c");
    CHECK_MPI(MPI_Type_create_hindexed_block(3, 2, aby, MPI_INT, &a));
    CHECK_MPI(MPI_Type_create_hindexed_block_c(3, 2, cby, MPI_INT, &b));
    same_type(a, b, "hindexed_block_c");
    MPI_Datatype ty[3] = {MPI_INT, MPI_CHAR, MPI_SHORT};
    CHECK_MPI(MPI_Type_create_struct(3, ibl, aby, ty, &a));
    CHECK_MPI(MPI_Type_create_struct_c(3, cbl, cby, ty, &b));
    same_type(a, b, "struct_c");
    int isz[2] = {6, 7}, isub[2] = {2, 3}, ist[2] = {1, 2};
    MPI_Count csz[2] = {6, 7}, csub[2] = {2, 3}, cst[2] = {1, 2};
    CHECK_MPI(MPI_Type_create_subarray(2, isz, isub, ist, MPI_ORDER_C, MPI_INT, &a));
    CHECK_MPI(MPI_Type_create_subarray_c(2, csz, csub, cst, MPI_ORDER_C, MPI_INT, &b));
    same_type(a, b, "subarray_c");
    CHECK_MPI(MPI_Type_create_resized(MPI_INT, -4, 12, &a));
    CHECK_MPI(MPI_Type_create_resized_c(MPI_INT, -4, 12, &b));
    same_type(a, b, "resized_c");

    /* Envelope and contents: a _c constructor's counts are large counts
     * (MPI-4), which the int forms of the decoding calls cannot return. */
    CHECK_MPI(MPI_Type_vector_c(3, 2, 4, MPI_INT, &b));
    MPI_Count ni, na, nl, nd;
    int comb, ints[8], ini, ina, ind;
    MPI_Aint addrs[2];
    MPI_Count larges[8];
    MPI_Datatype dts[2];
    CHECK_MPI(MPI_Type_get_envelope_c(b, &ni, &na, &nl, &nd, &comb));
    CHECK_EQ(MPI_COMBINER_VECTOR, comb, "envelope_c combiner");
    CHECK_EQ(0, ni, "envelope_c integers");
    CHECK_EQ(0, na, "envelope_c addresses");
    CHECK_EQ(3, nl, "envelope_c large counts");
    CHECK_EQ(1, nd, "envelope_c datatypes");
    CHECK_MPI(MPI_Type_get_contents_c(b, 8, 2, 8, 2, ints, addrs, larges, dts));
    CHECK_EQ(3, larges[0], "contents_c count");
    CHECK_EQ(2, larges[1], "contents_c blocklength");
    CHECK_EQ(4, larges[2], "contents_c stride");
    CHECK(dts[0] == MPI_INT, "contents_c datatype");
    tc_expect_class(MPI_Type_get_contents_c(b, 8, 2, 2, 2, ints, addrs, larges, dts), MPI_ERR_ARG,
                    "contents_c with room for 2 of 3 large counts");
    tc_expect_class(MPI_Type_get_envelope(b, &ini, &ina, &ind, &comb), MPI_ERR_TYPE,
                    "int envelope of a _c vector");
    tc_expect_class(MPI_Type_get_contents(b, 8, 2, 2, ints, addrs, dts), MPI_ERR_TYPE,
                    "int contents of a _c vector");
    CHECK_MPI(MPI_Type_free(&b));
    /* The int form's envelope has ints and addresses, no large counts. */
    CHECK_MPI(MPI_Type_create_hvector(3, 2, 20, MPI_INT, &a));
    CHECK_MPI(MPI_Type_get_envelope_c(a, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_HVECTOR && ni == 2 && na == 1 && nl == 0 && nd == 1,
          "envelope_c of an int hvector: %d %lld %lld %lld %lld", comb, (long long)ni, (long long)na,
          (long long)nl, (long long)nd);
    CHECK_MPI(MPI_Type_get_contents(a, 8, 2, 2, ints, addrs, dts));
    CHECK(ints[0] == 3 && ints[1] == 2 && addrs[0] == 20, "contents of an int hvector");
    CHECK_MPI(MPI_Type_free(&a));
    /* hindexed_c: count, block lengths, then displacements, all large. */
    CHECK_MPI(MPI_Type_create_hindexed_c(3, cbl, cby, MPI_INT, &b));
    CHECK_MPI(MPI_Type_get_envelope_c(b, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_HINDEXED && ni == 0 && na == 0 && nl == 7 && nd == 1, "envelope_c of hindexed_c");
    CHECK_MPI(MPI_Type_get_contents_c(b, 8, 2, 8, 2, ints, addrs, larges, dts));
    CHECK(larges[0] == 3 && larges[1] == 1 && larges[3] == 3 && larges[4] == 0 && larges[6] == 36,
          "contents_c of hindexed_c");
    CHECK_MPI(MPI_Type_free(&b));
    /* subarray_c: ndims and order stay ints, the sizes are large. */
    CHECK_MPI(MPI_Type_create_subarray_c(2, csz, csub, cst, MPI_ORDER_FORTRAN, MPI_INT, &b));
    CHECK_MPI(MPI_Type_get_envelope_c(b, &ni, &na, &nl, &nd, &comb));
    CHECK(comb == MPI_COMBINER_SUBARRAY && ni == 2 && na == 0 && nl == 6 && nd == 1, "envelope_c of subarray_c");
    CHECK_MPI(MPI_Type_get_contents_c(b, 8, 2, 8, 2, ints, addrs, larges, dts));
    CHECK(ints[0] == 2 && ints[1] == MPI_ORDER_FORTRAN && larges[0] == 6 && larges[3] == 3 && larges[5] == 2,
          "contents_c of subarray_c");
    CHECK_MPI(MPI_Type_free(&b));

    /* A message of a _c type moves like one of its int twin. */
    {
        int out[12], in[12];
        for (int i = 0; i < 12; i++) {
            out[i] = me * 100 + i;
            in[i] = -1;
        }
        CHECK_MPI(MPI_Type_vector_c(4, 2, 3, MPI_INT, &b));
        CHECK_MPI(MPI_Type_commit(&b));
        CHECK_MPI(MPI_Sendrecv(out, 1, b, next, 61, in, 1, b, prev, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < 12; i++) {
            int want = i % 3 == 2 ? -1 : prev * 100 + i;
            CHECK_EQ(want, in[i], "vector_c message, int %d", i);
        }
        CHECK_MPI(MPI_Type_free(&b));
    }

    /* Beyond int: a 3 GiB datatype (never allocated) and a 5 GiB status. */
    MPI_Datatype mib, gib, big;
    CHECK_MPI(MPI_Type_contiguous_c(1 << 20, MPI_BYTE, &mib));
    CHECK_MPI(MPI_Type_contiguous_c(1 << 10, mib, &gib));
    CHECK_MPI(MPI_Type_free(&mib));
    CHECK_MPI(MPI_Type_contiguous_c(3, gib, &big));
    MPI_Count size, lb, extent;
    int isize;
    CHECK_MPI(MPI_Type_size_c(big, &size));
    CHECK_EQ(3LL << 30, size, "Type_size_c of 3 GiB");
    CHECK_MPI(MPI_Type_size(big, &isize));
    CHECK_EQ(MPI_UNDEFINED, isize, "Type_size of 3 GiB");
    CHECK_MPI(MPI_Type_get_extent_c(big, &lb, &extent));
    CHECK_EQ(0, lb, "Type_get_extent_c lb");
    CHECK_EQ(3LL << 30, extent, "Type_get_extent_c of 3 GiB");
    CHECK_MPI(MPI_Type_get_true_extent_c(big, &lb, &extent));
    CHECK_EQ(3LL << 30, extent, "Type_get_true_extent_c of 3 GiB");
    CHECK_MPI(MPI_Type_commit(&big));
    CHECK_MPI(MPI_Type_commit(&gib));
    CHECK_MPI(MPI_Pack_size_c(2, big, MPI_COMM_WORLD, &size));
    CHECK(size >= 6LL << 30, "Pack_size_c of 6 GiB: %lld", (long long)size);
    MPI_Status st;
    MPI_Count n;
    int ni_;
    CHECK_MPI(MPI_Status_set_elements_c(&st, MPI_BYTE, 5LL << 30));
    CHECK_MPI(MPI_Get_elements_c(&st, MPI_BYTE, &n));
    CHECK_EQ(5LL << 30, n, "Get_elements_c of 5 GiB");
    CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &n));
    CHECK_EQ((5LL << 30) / 4, n, "Get_count_c of 5 GiB in ints");
    CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &ni_));
    CHECK_EQ(MPI_UNDEFINED, ni_, "Get_count of 5 GiB");
    CHECK_MPI(MPI_Get_count_c(&st, gib, &n));
    CHECK_EQ(5, n, "Get_count_c in GiB");
    CHECK_MPI(MPI_Type_free(&big));
    CHECK_MPI(MPI_Type_free(&gib));

    /* Counts past int in the constructors themselves (nothing allocated). */
    CHECK_MPI(MPI_Type_contiguous_c(5LL << 30, MPI_CHAR, &b));
    CHECK_MPI(MPI_Type_size_c(b, &size));
    CHECK_EQ(5LL << 30, size, "contiguous_c of 5 GiB chars");
    CHECK_MPI(MPI_Type_get_envelope_c(b, &ni, &na, &nl, &nd, &comb));
    CHECK_MPI(MPI_Type_get_contents_c(b, 8, 2, 8, 2, ints, addrs, larges, dts));
    CHECK(nl == 1 && larges[0] == 5LL << 30, "contents_c of contiguous_c keeps 5 GiB");
    CHECK_MPI(MPI_Type_free(&b));
    CHECK_MPI(MPI_Type_vector_c(2, (MPI_Count)INT_MAX + 1, 1, MPI_BYTE, &b));
    CHECK_MPI(MPI_Type_size_c(b, &size));
    CHECK_EQ(2 * ((MPI_Count)INT_MAX + 1), size, "vector_c of two 2 GiB blocks");
    CHECK_MPI(MPI_Type_get_extent_c(b, &lb, &extent));
    CHECK_EQ((MPI_Count)INT_MAX + 2, extent, "vector_c of two 2 GiB blocks, extent");
    CHECK_MPI(MPI_Type_free(&b));
    {
        /* 256 blocks of 2,291,328 ints each: 2,346,319,872 bytes. */
        MPI_Count blk = 2346319872LL / 256 / 4, d256[256];
        for (int i = 0; i < 256; i++)
            d256[i] = i * blk;
        CHECK_MPI(MPI_Type_create_indexed_block_c(256, blk, d256, MPI_INT, &b));
        CHECK_MPI(MPI_Type_size_c(b, &size));
        CHECK_EQ(2346319872LL, size, "indexed_block_c past 2 GiB");
        CHECK_MPI(MPI_Type_get_true_extent_c(b, &lb, &extent));
        CHECK(lb == 0 && extent == size, "indexed_block_c true extent %lld", (long long)extent);
        CHECK_MPI(MPI_Type_free(&b));
        int gd = MPI_DISTRIBUTE_BLOCK, ga = MPI_DISTRIBUTE_DFLT_DARG, gp = 1;
        MPI_Count gs = 3000000000LL;
        CHECK_MPI(MPI_Type_create_darray_c(1, 0, 1, &gs, &gd, &ga, &gp, MPI_ORDER_C, MPI_CHAR, &b));
        CHECK_MPI(MPI_Type_size_c(b, &size));
        CHECK_EQ(3000000000LL, size, "darray_c of 3e9 chars");
        CHECK_MPI(MPI_Type_get_envelope_c(b, &ni, &na, &nl, &nd, &comb));
        CHECK(comb == MPI_COMBINER_DARRAY && ni == 7 && nl == 1, "envelope_c of darray_c: %lld ints %lld large",
              (long long)ni, (long long)nl);
        CHECK_MPI(MPI_Type_get_contents_c(b, 8, 2, 8, 2, ints, addrs, larges, dts));
        CHECK(larges[0] == gs && ints[2] == 1 && ints[6] == MPI_ORDER_C, "contents_c of darray_c");
        CHECK_MPI(MPI_Type_free(&b));
    }
    tc_expect_class(MPI_Type_contiguous_c(-1, MPI_INT, &b), MPI_ERR_COUNT, "Type_contiguous_c count -1");
    tc_expect_class(MPI_Type_vector_c(2, -5, 1, MPI_BYTE, &b), MPI_ERR_COUNT, "Type_vector_c blocklength -5");
    tc_expect_class(MPI_Type_vector_c(3, 1, (MPI_Count)1 << 62, MPI_INT, &b), MPI_ERR_ARG,
                    "Type_vector_c stride past the address space");
    tc_expect_class(MPI_Type_contiguous_c((MPI_Count)1 << 62, MPI_INT, &b), MPI_ERR_ARG,
                    "Type_contiguous_c size past the address space");
    tc_expect_class(MPI_Type_indexed_c((MPI_Count)1 << 61, cbl, cdi, MPI_INT, &b), MPI_ERR_COUNT,
                    "Type_indexed_c with arrays longer than memory");
    tc_expect_class(MPI_Status_set_elements_c(&st, MPI_INT, -2), MPI_ERR_COUNT, "Status_set_elements_c -2");
    tc_expect_class(MPI_Pack_size_c(-1, MPI_INT, MPI_COMM_WORLD, &size), MPI_ERR_COUNT, "Pack_size_c -1");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np > MAXP)
        FAIL("at most %d ranks", MAXP);
    next = (me + 1) % np;
    prev = (me + np - 1) % np;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pt2pt();
    collectives();
    neighbours();
    rma();
    datatypes();
    tc_finish("large_count");
    return 0;
}

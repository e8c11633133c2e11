/*
 * neighbor_coll.c - the neighbourhood collectives' v and w forms, their
 * non-blocking and persistent forms, on a 2-D Cartesian grid periodic in
 * one dimension only (so edge ranks have MPI_PROC_NULL neighbours, whose
 * slots must stay untouched) and on a star-shaped distributed graph (rank
 * 0 sends to everyone, everyone else receives from rank 0 only).
 *
 * Slots of a Cartesian communicator: (-dim0, +dim0, -dim1, +dim1); what a
 * rank receives in slot k its neighbour sent from slot k ^ 1.
 */
#include "check.h"

#define NAME "neighbor_coll"
#define GAP 8 /* ints per slot in the buffers */

static int rank, size;

static int nval(int r, int k, int it)
{
    return 10000 * it + 100 * r + k;
}

static void fill(int *b, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = -1;
}

/* The ints of slot k in [k * GAP, (k + 1) * GAP) that were not received
 * must still be -1. */
static void check_rest(const int *b, int k, const int *written, const char *what)
{
    for (int i = 0; i < GAP; i++)
        if (!written[i])
            CHECK_EQ(-1, b[k * GAP + i], "%s: slot %d int %d must be untouched", what, k, i);
}

static void cartesian(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 0}, nb[4];
    int sbuf[4 * GAP], rbuf[4 * GAP], scounts[4], sdispls[4], rcounts[4], rdispls[4];
    MPI_Aint sbytes[4], rbytes[4];
    MPI_Datatype stypes[4], rtypes[4], strided;
    MPI_Comm cart;
    MPI_Request req;

    CHECK_MPI(MPI_Dims_create(size, 2, dims));
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]));
    CHECK_MPI(MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]));
    CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &strided));
    CHECK_MPI(MPI_Type_commit(&strided));

    for (int it = 0; it < 3; it++) {
        /* alltoallv: slot k sends k + 1 ints from k * GAP + 1; a rank
         * receives (k ^ 1) + 1 ints in slot k at k * GAP + 2. Blocking in
         * iteration 0, non-blocking after. */
        for (int k = 0; k < 4; k++) {
            scounts[k] = k + 1;
            sdispls[k] = k * GAP + 1;
            rcounts[k] = (k ^ 1) + 1;
            rdispls[k] = k * GAP + 2;
            for (int j = 0; j < GAP; j++)
                sbuf[k * GAP + j] = nval(rank, k * GAP + j, it);
        }
        fill(rbuf, 4 * GAP);
        if (it == 0) {
            CHECK_MPI(MPI_Neighbor_alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, cart));
        } else {
            CHECK_MPI(MPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, cart,
                                              &req));
            CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        }
        for (int k = 0; k < 4; k++) {
            int written[GAP] = {0};
            if (nb[k] != MPI_PROC_NULL)
                for (int j = 0; j < rcounts[k]; j++) {
                    int from = (k ^ 1) * GAP + 1 + j; /* the neighbour's sbuf index */
                    CHECK_EQ(nval(nb[k], from, it), rbuf[k * GAP + 2 + j], "alltoallv slot %d int %d it %d", k, j,
                             it);
                    written[2 + j] = 1;
                }
            check_rest(rbuf, k, written, "alltoallv");
        }

        /* allgatherv: 3 ints sent to everyone, slot k at (3 - k) * GAP. */
        for (int k = 0; k < 4; k++) {
            rcounts[k] = 3;
            rdispls[k] = (3 - k) * GAP;
        }
        fill(rbuf, 4 * GAP);
        CHECK_MPI(MPI_Ineighbor_allgatherv(sbuf, 3, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, cart, &req));
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        for (int k = 0; k < 4; k++) {
            int written[GAP] = {0};
            if (nb[k] != MPI_PROC_NULL)
                for (int j = 0; j < 3; j++) {
                    CHECK_EQ(nval(nb[k], j, it), rbuf[(3 - k) * GAP + j], "allgatherv slot %d int %d it %d", k, j, it);
                    written[j] = 1;
                }
            check_rest(rbuf, 3 - k, written, "allgatherv");
        }

        /* alltoallw: even slots two contiguous ints, odd slots a strided
         * pair (ints 0 and 2 of the slot); byte displacements. */
        for (int k = 0; k < 4; k++) {
            int odd = k & 1;
            stypes[k] = rtypes[k] = odd ? strided : MPI_INT;
            scounts[k] = rcounts[k] = odd ? 1 : 2;
            sbytes[k] = rbytes[k] = (MPI_Aint)(k * GAP) * (MPI_Aint)sizeof(int);
        }
        fill(rbuf, 4 * GAP);
        CHECK_MPI(MPI_Neighbor_alltoallw(sbuf, scounts, sbytes, stypes, rbuf, rcounts, rbytes, rtypes, cart));
        for (int k = 0; k < 4; k++) {
            int written[GAP] = {0};
            if (nb[k] != MPI_PROC_NULL) {
                /* The neighbour sent slot k ^ 1: its ints 0,1 (even) or 0,2 (odd). */
                int src_odd = (k ^ 1) & 1, dst_odd = k & 1;
                for (int j = 0; j < 2; j++) {
                    int from = (k ^ 1) * GAP + (src_odd ? 2 * j : j);
                    int to = dst_odd ? 2 * j : j;
                    CHECK_EQ(nval(nb[k], from, it), rbuf[k * GAP + to], "alltoallw slot %d pair %d it %d", k, j, it);
                    written[to] = 1;
                }
            }
            check_rest(rbuf, k, written, "alltoallw");
        }
    }

    /* Persistent alltoall of a strided pair per slot, started three times
     * with new data. */
    {
        MPI_Request p;
        CHECK_MPI(MPI_Neighbor_alltoall_init(sbuf, 1, strided, rbuf, 1, strided, cart, MPI_INFO_NULL, &p));
        for (int it = 0; it < 3; it++) {
            for (int i = 0; i < 4 * GAP; i++)
                sbuf[i] = nval(rank, i, it + 7);
            fill(rbuf, 4 * GAP);
            CHECK_MPI(MPI_Start(&p));
            CHECK_MPI(MPI_Wait(&p, MPI_STATUS_IGNORE));
            /* Slot k of a strided-pair buffer: ints 3k and 3k + 2 (extent 3 ints). */
            for (int k = 0; k < 4; k++)
                for (int j = 0; j < 2; j++) {
                    int want = nb[k] == MPI_PROC_NULL ? -1 : nval(nb[k], 3 * (k ^ 1) + 2 * j, it + 7);
                    CHECK_EQ(want, rbuf[3 * k + 2 * j], "persistent alltoall slot %d int %d start %d", k, j, it);
                }
            for (int i = 0; i < 4 * GAP; i++)
                if (i >= 12 || i % 3 == 1)
                    CHECK_EQ(-1, rbuf[i], "persistent alltoall: int %d is not in any slot", i);
        }
        CHECK_MPI(MPI_Request_free(&p));
    }
    CHECK_MPI(MPI_Type_free(&strided));
    CHECK_MPI(MPI_Comm_free(&cart));
}

static void star(void)
{
    MPI_Comm g;
    int nsrc = rank == 0 ? 0 : 1, src = 0, ndst = rank == 0 ? size - 1 : 0;
    int *dsts = malloc((size_t)(size > 1 ? size - 1 : 1) * sizeof(int));
    int *counts = malloc((size_t)(size > 1 ? size - 1 : 1) * sizeof(int));
    int *displs = malloc((size_t)(size > 1 ? size - 1 : 1) * sizeof(int));
    int sbuf[64], rbuf[8], rcount = 0, rdispl = 3;
    MPI_Request req;

    for (int i = 0; i < ndst; i++)
        dsts[i] = i + 1;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, nsrc, &src, MPI_UNWEIGHTED, ndst, dsts, MPI_UNWEIGHTED,
                                             MPI_INFO_NULL, 0, &g));
    /* Rank 0 sends rank d (d = 1..) d % 4 + 1 ints starting at 2 * d. */
    for (int i = 0; i < 64; i++)
        sbuf[i] = nval(rank, i, 3);
    for (int i = 0; i < ndst; i++) {
        counts[i] = dsts[i] % 4 + 1;
        displs[i] = 2 * dsts[i] % 56;
    }
    rcount = rank % 4 + 1;
    fill(rbuf, 8);
    CHECK_MPI(MPI_Ineighbor_alltoallv(sbuf, counts, displs, MPI_INT, rbuf, &rcount, &rdispl, MPI_INT, g, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    for (int i = 0; i < 8; i++) {
        int want = -1;
        if (rank != 0 && i >= 3 && i < 3 + rcount)
            want = nval(0, 2 * rank % 56 + i - 3, 3);
        CHECK_EQ(want, rbuf[i], "star alltoallv int %d", i);
    }
    /* allgather: rank 0's first two ints to everyone. */
    fill(rbuf, 8);
    CHECK_MPI(MPI_Neighbor_allgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, g));
    for (int i = 0; i < 8; i++)
        CHECK_EQ(rank != 0 && i < 2 ? nval(0, i, 3) : -1, rbuf[i], "star allgather int %d", i);
    CHECK_MPI(MPI_Comm_free(&g));
    free(dsts);
    free(counts);
    free(displs);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    cartesian();
    star();
    {
        /* A communicator without a topology is MPI_ERR_TOPOLOGY. */
        int x = 0, y = 0, c = 1, d = 0;
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        tc_expect_class(MPI_Neighbor_allgatherv(&x, 1, MPI_INT, &y, &c, &d, MPI_INT, MPI_COMM_WORLD),
                        MPI_ERR_TOPOLOGY, "MPI_Neighbor_allgatherv on MPI_COMM_WORLD");
    }
    return tc_finish(NAME);
}

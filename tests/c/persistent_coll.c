/*
 * persistent_coll.c - persistent collectives (MPI-4): each request is
 * initialised once and started ITERS times with new data in the same
 * buffers (the arguments are bound at init); every result is checked.
 * Also: MPI_Startall over several persistent collectives, starts in
 * different orders on different ranks, MPI_Start on an active request (MPI_ERR_REQUEST), a
 * non-contiguous datatype (a strided vector) in a persistent broadcast,
 * MPI_Request_free of inactive requests.
 */
#include "check.h"

#define NAME "persistent_coll"
#define ITERS 5
#define N 4

static int rank, size;

/* The value rank r contributes at element i in iteration it. */
static int val(int r, int i, int it)
{
    return 1000 * it + 10 * r + i;
}

int main(int argc, char **argv)
{
    MPI_Request bar, bc, red, allred, scan, exscan, gat, gatv, sca, scav, allg, allgv, a2a, a2av, a2aw, rsb, rs, bcv;
    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();

    int bcbuf[N], redin[N], redout[N], allout[N], scanout[N], exout[N];
    int *gin = malloc(N * sizeof(int)), *gout = malloc((size_t)size * N * sizeof(int));
    int *gvout = malloc((size_t)size * N * sizeof(int)), *gvcounts = malloc(size * sizeof(int));
    int *gvdispls = malloc(size * sizeof(int));
    int *sin = malloc((size_t)size * N * sizeof(int)), sout[N], svout[N];
    int *agout = malloc((size_t)size * N * sizeof(int)), *agvout = malloc((size_t)size * N * sizeof(int));
    int *a2in = malloc((size_t)size * N * sizeof(int)), *a2out = malloc((size_t)size * N * sizeof(int));
    int *a2vout = malloc((size_t)size * N * sizeof(int)), *a2wout = malloc((size_t)size * N * sizeof(int));
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    int *wbytes = malloc(size * sizeof(int));
    MPI_Datatype *wtypes = malloc(size * sizeof(MPI_Datatype));
    int *rsin = malloc((size_t)size * N * sizeof(int)), rsout[N], *rscounts = malloc(size * sizeof(int)), rsvout[N];
    int strided[2 * N];
    MPI_Datatype vec;

    for (int r = 0; r < size; r++) {
        counts[r] = N;
        displs[r] = r * N;
        wbytes[r] = r * N * (int)sizeof(int);
        wtypes[r] = MPI_INT;
        rscounts[r] = N;
        /* gatherv: rank r sends r % N + 1 elements, placed in reverse order. */
        gvcounts[r] = r % N + 1;
        gvdispls[r] = (size - 1 - r) * N;
    }
    CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));

    const int root = size - 1;
    CHECK_MPI(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &bar));
    CHECK_MPI(MPI_Bcast_init(bcbuf, N, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bc));
    CHECK_MPI(MPI_Bcast_init(strided, 1, vec, root, MPI_COMM_WORLD, MPI_INFO_NULL, &bcv));
    CHECK_MPI(MPI_Reduce_init(redin, redout, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, MPI_INFO_NULL, &red));
    CHECK_MPI(MPI_Allreduce_init(redin, allout, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &allred));
    CHECK_MPI(MPI_Scan_init(redin, scanout, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &scan));
    CHECK_MPI(MPI_Exscan_init(redin, exout, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &exscan));
    CHECK_MPI(MPI_Gather_init(gin, N, MPI_INT, gout, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &gat));
    CHECK_MPI(MPI_Gatherv_init(gin, rank % N + 1, MPI_INT, gvout, gvcounts, gvdispls, MPI_INT, 0, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &gatv));
    CHECK_MPI(MPI_Scatter_init(sin, N, MPI_INT, sout, N, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &sca));
    CHECK_MPI(MPI_Scatterv_init(sin, counts, displs, MPI_INT, svout, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL,
                                &scav));
    CHECK_MPI(MPI_Allgather_init(gin, N, MPI_INT, agout, N, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &allg));
    CHECK_MPI(MPI_Allgatherv_init(gin, N, MPI_INT, agvout, counts, displs, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL,
                                  &allgv));
    CHECK_MPI(MPI_Alltoall_init(a2in, N, MPI_INT, a2out, N, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &a2a));
    CHECK_MPI(MPI_Alltoallv_init(a2in, counts, displs, MPI_INT, a2vout, counts, displs, MPI_INT, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &a2av));
    CHECK_MPI(MPI_Alltoallw_init(a2in, counts, wbytes, wtypes, a2wout, counts, wbytes, wtypes, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &a2aw));
    CHECK_MPI(MPI_Reduce_scatter_block_init(rsin, rsout, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rsb));
    CHECK_MPI(MPI_Reduce_scatter_init(rsin, rsvout, rscounts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rs));

    for (int it = 0; it < ITERS; it++) {
        /* New data in the bound buffers. */
        for (int i = 0; i < N; i++) {
            bcbuf[i] = rank == 0 ? val(0, i, it) : -1;
            redin[i] = val(rank, i, it);
            gin[i] = val(rank, i, it);
            strided[2 * i] = rank == root ? val(root, i, it) : -1;
            strided[2 * i + 1] = -7;
        }
        for (int j = 0; j < size * N; j++) {
            sin[j] = val(j / N, j % N, it) + 5;
            a2in[j] = val(rank, j, it); /* block j / N goes to rank j / N */
            rsin[j] = val(rank, j, it);
        }

        CHECK_MPI(MPI_Start(&bar));
        CHECK_MPI(MPI_Wait(&bar, MPI_STATUS_IGNORE));
        CHECK(bar != MPI_REQUEST_NULL, "a completed persistent request stays allocated");

        /* Start several at once; an active one cannot be started again. */
        MPI_Request group[3] = {bc, red, allred};
        CHECK_MPI(MPI_Startall(3, group));
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        tc_expect_class(MPI_Start(&bc), MPI_ERR_REQUEST, "MPI_Start on an active persistent collective");
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        CHECK_MPI(MPI_Waitall(3, group, MPI_STATUSES_IGNORE));
        for (int i = 0; i < N; i++) {
            CHECK_EQ(val(0, i, it), bcbuf[i], "bcast element %d iteration %d", i, it);
            CHECK_EQ(val(size - 1, i, it), allout[i], "allreduce max element %d iteration %d", i, it);
            if (rank == root) {
                long sum = 0;
                for (int r = 0; r < size; r++)
                    sum += val(r, i, it);
                CHECK_EQ(sum, redout[i], "reduce element %d iteration %d", i, it);
            }
        }

        MPI_Request more[14] = {scan, exscan, gat, gatv, sca, scav, allg, allgv, a2a, a2av, a2aw, rsb, rs, bcv};
        for (int k = 0; k < 14; k++)
            CHECK_MPI(MPI_Start(&more[k]));
        CHECK_MPI(MPI_Waitall(14, more, MPI_STATUSES_IGNORE));

        for (int i = 0; i < N; i++) {
            long incl = 0, excl = 0;
            for (int r = 0; r <= rank; r++)
                incl += val(r, i, it);
            excl = incl - val(rank, i, it);
            CHECK_EQ(incl, scanout[i], "scan element %d iteration %d", i, it);
            if (rank > 0)
                CHECK_EQ(excl, exout[i], "exscan element %d iteration %d", i, it);
            CHECK_EQ(val(rank, i, it) + 5, sout[i], "scatter element %d iteration %d", i, it);
            CHECK_EQ(val(rank, i, it) + 5, svout[i], "scatterv element %d iteration %d", i, it);
            CHECK_EQ(val(root, i, it), strided[2 * i], "strided bcast element %d iteration %d", i, it);
            CHECK_EQ(-7, strided[2 * i + 1], "strided bcast gap %d iteration %d", i, it);
            long rsum = 0;
            for (int r = 0; r < size; r++)
                rsum += val(r, rank * N + i, it);
            CHECK_EQ(rsum, rsout[i], "reduce_scatter_block element %d iteration %d", i, it);
            CHECK_EQ(rsum, rsvout[i], "reduce_scatter element %d iteration %d", i, it);
        }
        for (int j = 0; j < size * N; j++) {
            int r = j / N, i = j % N;
            if (rank == root)
                CHECK_EQ(val(r, i, it), gout[j], "gather element %d iteration %d", j, it);
            CHECK_EQ(val(r, i, it), agout[j], "allgather element %d iteration %d", j, it);
            CHECK_EQ(val(r, i, it), agvout[j], "allgatherv element %d iteration %d", j, it);
            /* From rank r, block `rank` of its a2in: val(r, rank*N + i). */
            CHECK_EQ(val(r, rank * N + i, it), a2out[j], "alltoall element %d iteration %d", j, it);
            CHECK_EQ(val(r, rank * N + i, it), a2vout[j], "alltoallv element %d iteration %d", j, it);
            CHECK_EQ(val(r, rank * N + i, it), a2wout[j], "alltoallw element %d iteration %d", j, it);
        }
        if (rank == 0)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < gvcounts[r]; i++)
                    CHECK_EQ(val(r, i, it), gvout[gvdispls[r] + i], "gatherv from %d element %d iteration %d", r,
                             i, it);
        /* The handles in the arrays are the same requests. */
        CHECK(more[0] == scan && group[0] == bc, "persistent handles changed by a wait");
    }

    /* Persistent collectives may be started in different orders on
     * different ranks (only their initialisations are ordered). */
    {
        int v = rank == 0 ? 7 : -1;
        MPI_Request two[2];
        CHECK_MPI(MPI_Bcast_init(&v, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &two[0]));
        CHECK_MPI(MPI_Allreduce_init(MPI_IN_PLACE, redout, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                                     &two[1]));
        for (int it = 0; it < 3; it++) {
            redout[0] = rank + it;
            if (rank % 2 == 0) {
                CHECK_MPI(MPI_Start(&two[0]));
                CHECK_MPI(MPI_Start(&two[1]));
            } else {
                CHECK_MPI(MPI_Start(&two[1]));
                CHECK_MPI(MPI_Start(&two[0]));
            }
            CHECK_MPI(MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
            CHECK_EQ(7, v, "bcast started in a different order on odd ranks, start %d", it);
            CHECK_EQ(size * (size - 1) / 2 + size * it, redout[0], "allreduce started out of order, start %d", it);
        }
        CHECK_MPI(MPI_Request_free(&two[0]));
        CHECK_MPI(MPI_Request_free(&two[1]));
    }

    MPI_Request all[] = {bar, bc, red, allred, scan, exscan, gat, gatv, sca, scav, allg, allgv, a2a, a2av, a2aw, rsb, rs, bcv};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        CHECK_MPI(MPI_Request_free(&all[k]));
        CHECK(all[k] == MPI_REQUEST_NULL, "MPI_Request_free did not null request %zu", k);
    }
    CHECK_MPI(MPI_Type_free(&vec));
    free(gin);
    free(gout);
    free(gvout);
    free(gvcounts);
    free(gvdispls);
    free(sin);
    free(agout);
    free(agvout);
    free(a2in);
    free(a2out);
    free(a2vout);
    free(a2wout);
    free(counts);
    free(displs);
    free(wbytes);
    free(wtypes);
    free(rsin);
    free(rscounts);
    return tc_finish(NAME);
}

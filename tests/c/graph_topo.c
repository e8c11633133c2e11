/*
 * graph_topo.c - MPI-1 graph topologies and MPI_Dist_graph_create:
 *   1. a ring as MPI_Graph_create: MPI_Topo_test, MPI_Graphdims_get,
 *      MPI_Graph_get, MPI_Graph_neighbors(_count) for every node, and the
 *      neighbourhood collectives along its edges;
 *   2. a graph of fewer nodes than ranks: the others get MPI_COMM_NULL;
 *      MPI_Graph_map and MPI_Cart_map say the same;
 *   3. errors: a node out of range (MPI_ERR_RANK), a graph query on a
 *      Cartesian communicator (MPI_ERR_TOPOLOGY); a failed MPI_Graph_create,
 *      MPI_Cart_create or MPI_Dist_graph_create leaves MPI_COMM_NULL;
 *   4. MPI_Dist_graph_create, where rank 0 declares some of everyone's
 *      edges: each rank's in- and out-neighbours and weights, and an
 *      MPI_Neighbor_allgather that follows them.
 */
#include "check.h"

#define NAME "graph_topo"

static int rank, size;

static void ring_graph(void)
{
    int n = size, *index = malloc(n * sizeof(int)), *edges = malloc(2 * n * sizeof(int));
    int st, nn, ne, cnt, nb[2], *gi = malloc(n * sizeof(int)), *ge = malloc(2 * n * sizeof(int));
    MPI_Comm g;

    for (int i = 0; i < n; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + 1) % n;
        edges[2 * i + 1] = (i + n - 1) % n;
    }
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    CHECK_MPI(MPI_Topo_test(g, &st));
    CHECK_EQ(MPI_GRAPH, st, "MPI_Topo_test of a graph");
    CHECK_MPI(MPI_Graphdims_get(g, &nn, &ne));
    CHECK_EQ(n, nn, "MPI_Graphdims_get nodes");
    CHECK_EQ(2 * n, ne, "MPI_Graphdims_get edges");
    CHECK_MPI(MPI_Graph_get(g, n, 2 * n, gi, ge));
    for (int i = 0; i < n; i++)
        CHECK_EQ(index[i], gi[i], "MPI_Graph_get index[%d]", i);
    for (int i = 0; i < 2 * n; i++)
        CHECK_EQ(edges[i], ge[i], "MPI_Graph_get edges[%d]", i);
    for (int r = 0; r < n; r++) {
        CHECK_MPI(MPI_Graph_neighbors_count(g, r, &cnt));
        CHECK_EQ(2, cnt, "neighbours of node %d", r);
        CHECK_MPI(MPI_Graph_neighbors(g, r, 2, nb));
        CHECK(nb[0] == (r + 1) % n && nb[1] == (r + n - 1) % n, "MPI_Graph_neighbors of node %d", r);
    }
    /* Neighbourhood collectives along the edges. */
    int mine[2] = {100 * rank, 100 * rank + 1}, got[2] = {-1, -1};
    CHECK_MPI(MPI_Neighbor_allgather(mine, 1, MPI_INT, got, 1, MPI_INT, g));
    CHECK_EQ(100 * ((rank + 1) % n), got[0], "allgather from the next node");
    CHECK_EQ(100 * ((rank + n - 1) % n), got[1], "allgather from the previous node");
    if (n >= 3) {
        /* The next node sent us its block 1 (we are its previous), the
         * previous one its block 0. */
        CHECK_MPI(MPI_Neighbor_alltoall(mine, 1, MPI_INT, got, 1, MPI_INT, g));
        CHECK_EQ(100 * ((rank + 1) % n) + 1, got[0], "alltoall from the next node");
        CHECK_EQ(100 * ((rank + n - 1) % n), got[1], "alltoall from the previous node");
    }
    CHECK_MPI(MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Graph_neighbors_count(g, n, &cnt), MPI_ERR_RANK, "a node past the graph");
    CHECK_MPI(MPI_Comm_free(&g));
    free(index);
    free(edges);
    free(gi);
    free(ge);
}

static void smaller_graph(void)
{
    int nodes = size > 1 ? size - 1 : 1, newrank = -2;
    int *index = malloc(nodes * sizeof(int)), edge0 = 0;
    MPI_Comm g;
    for (int i = 0; i < nodes; i++)
        index[i] = i == 0 ? 0 : 1; /* node 1 (if any) has the edge 1 -> 0 */
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, nodes, index, &edge0, 0, &g));
    CHECK_MPI(MPI_Graph_map(MPI_COMM_WORLD, nodes, index, &edge0, &newrank));
    if (rank < nodes) {
        int n;
        CHECK(g != MPI_COMM_NULL, "rank %d is a node of the graph", rank);
        CHECK_MPI(MPI_Comm_size(g, &n));
        CHECK_EQ(nodes, n, "graph communicator size");
        CHECK_EQ(rank, newrank, "MPI_Graph_map keeps the rank");
        CHECK_MPI(MPI_Comm_free(&g));
    } else {
        CHECK(g == MPI_COMM_NULL, "rank %d past the nodes gets MPI_COMM_NULL", rank);
        CHECK_EQ(MPI_UNDEFINED, newrank, "MPI_Graph_map past the nodes");
    }
    int dims[1] = {nodes}, periods[1] = {0};
    CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, dims, periods, &newrank));
    CHECK_EQ(rank < nodes ? rank : MPI_UNDEFINED, newrank, "MPI_Cart_map");
    free(index);
}

static void errors(void)
{
    int dims[1] = {size}, periods[1] = {1}, nn, ne, index[1] = {1}, bad = size + 3;
    MPI_Comm cart, g = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));
    CHECK_MPI(MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Graphdims_get(cart, &nn, &ne), MPI_ERR_TOPOLOGY, "MPI_Graphdims_get on a grid");
    CHECK_MPI(MPI_Comm_free(&cart));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Graph_create(MPI_COMM_WORLD, 1, index, &bad, 0, &g), MPI_ERR_RANK,
                    "an edge to a node that does not exist");
    CHECK(g == MPI_COMM_NULL, "a failed MPI_Graph_create leaves MPI_COMM_NULL");
    /* A grid of more nodes than ranks: an error, and no communicator. */
    int big[2] = {size, size + 1}, per2[2] = {0, 0};
    cart = MPI_COMM_WORLD;
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 2, big, per2, 0, &cart) != MPI_SUCCESS,
          "MPI_Cart_create of more nodes than ranks fails");
    CHECK(cart == MPI_COMM_NULL, "a failed MPI_Cart_create leaves MPI_COMM_NULL");
    int nodes[1] = {size + 1}, deg[1] = {0};
    g = MPI_COMM_WORLD;
    CHECK(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, nodes, deg, NULL, MPI_UNWEIGHTED, MPI_INFO_NULL,
                                0, &g) != MPI_SUCCESS,
          "MPI_Dist_graph_create naming a node past the ranks fails");
    CHECK(g == MPI_COMM_NULL, "a failed MPI_Dist_graph_create leaves MPI_COMM_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void dist_graph(void)
{
    /* Every rank declares its edge r -> r+1 (weight 10 + r); rank 0 also
     * declares s -> s+2 (weight 100 + s) for every s. */
    int n = size, srcs[1 + 64], degs[1 + 64], dsts[2 * 64], wts[2 * 64], k = 0, nsrc = 0;
    MPI_Comm g;
    if (n > 64)
        return;
    srcs[nsrc] = rank;
    degs[nsrc++] = 1;
    dsts[k] = (rank + 1) % n;
    wts[k++] = 10 + rank;
    if (rank == 0)
        for (int s = 0; s < n; s++) {
            srcs[nsrc] = s;
            degs[nsrc++] = 1;
            dsts[k] = (s + 2) % n;
            wts[k++] = 100 + s;
        }
    CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, nsrc, srcs, degs, dsts, wts, MPI_INFO_NULL, 0, &g));
    int indeg, outdeg, weighted, in[2], inw[2], out[2], outw[2];
    CHECK_MPI(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
    CHECK_EQ(2, indeg, "in-degree");
    CHECK_EQ(2, outdeg, "out-degree");
    CHECK_EQ(1, weighted, "weighted");
    CHECK_MPI(MPI_Dist_graph_neighbors(g, 2, in, inw, 2, out, outw));
    int seen_in = 0, seen_out = 0;
    for (int i = 0; i < 2; i++) {
        if (in[i] == (rank + n - 1) % n && inw[i] == 10 + in[i] && !(seen_in & 1))
            seen_in |= 1;
        else if (in[i] == (rank + n - 2) % n && inw[i] == 100 + in[i])
            seen_in |= 2;
        if (out[i] == (rank + 1) % n && outw[i] == 10 + rank && !(seen_out & 1))
            seen_out |= 1;
        else if (out[i] == (rank + 2) % n && outw[i] == 100 + rank)
            seen_out |= 2;
    }
    CHECK_EQ(3, seen_in, "in-neighbours (r-1, weight 10+src) and (r-2, weight 100+src): %d,%d w %d,%d", in[0], in[1],
             inw[0], inw[1]);
    CHECK_EQ(3, seen_out, "out-neighbours (r+1, weight 10+r) and (r+2, weight 100+r): %d,%d w %d,%d", out[0], out[1],
             outw[0], outw[1]);
    int mine = 1000 + rank, got[2] = {-1, -1};
    CHECK_MPI(MPI_Neighbor_allgather(&mine, 1, MPI_INT, got, 1, MPI_INT, g));
    for (int i = 0; i < 2; i++)
        CHECK_EQ(1000 + in[i], got[i], "allgather slot %d from in-neighbour %d", i, in[i]);
    CHECK_MPI(MPI_Comm_free(&g));
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    ring_graph();
    smaller_graph();
    errors();
    dist_graph();
    return tc_finish(NAME);
}

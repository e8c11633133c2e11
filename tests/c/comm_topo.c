/*
 * comm_topo.c - communicators, groups, attributes and topologies.
 *
 *   1. MPI_Comm_split by parity with reversed keys: sizes, ranks ordered by
 *      key, traffic and collectives stay inside; MPI_Comm_split_type
 *      (MPI_COMM_TYPE_SHARED: every rank of this host; HW_GUIDED and
 *      RESOURCE_GUIDED give MPI_COMM_NULL without a known resource type and
 *      the host for "mpi_shared_memory"; HW_UNGUIDED gives MPI_COMM_NULL,
 *      the host being the whole job);
 *   2. groups: MPI_Comm_group, incl, excl, range_incl, range_excl, union,
 *      intersection, difference, translate_ranks, compare, size, rank, free;
 *      MPI_Comm_create from a group (members get a communicator, the others
 *      MPI_COMM_NULL); MPI_Comm_compare (IDENT, CONGRUENT, SIMILAR, UNEQUAL);
 *   3. names: MPI_Comm_set_name/get_name, the predefined names (and the
 *      null handles' of communicators, windows and datatypes);
 *   4. attributes: MPI_TAG_UB (>= 32767), MPI_HOST, MPI_IO,
 *      MPI_WTIME_IS_GLOBAL, user keyvals with copy and delete callbacks
 *      (MPI_Comm_dup copies, MPI_Comm_free and MPI_Comm_delete_attr delete,
 *      MPI_COMM_NULL_COPY_FN does not copy);
 *   5. Cartesian topologies: MPI_Dims_create, MPI_Cart_create (periodic in
 *      one dimension), coords, rank, shift, get, Cartdim_get, Topo_test,
 *      MPI_Cart_sub into rows, MPI_Neighbor_allgather and
 *      MPI_Neighbor_alltoall checked against the neighbours' data;
 *   6. distributed graphs: a ring as MPI_Dist_graph_create_adjacent,
 *      neighbors_count/neighbors, neighbourhood collectives on it.
 */
#include "check.h"

#define NAME "comm_topo"

static int rank, size;
static int copies, deletes;
static void hw_split_tests(void);

static int copy_cb(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
    (void)c;
    (void)key;
    CHECK(extra == (void *)&copies, "extra_state passed to the copy callback");
    copies++;
    *(void **)out = (void *)((char *)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_cb(MPI_Comm c, int key, void *val, void *extra)
{
    (void)c;
    (void)key;
    (void)val;
    (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static void split_tests(void)
{
    MPI_Comm half, shared;
    int hr, hs, i, want_size = (size + 1 - rank % 2) / 2, key_rank = 0, sum, want = 0;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half));
    CHECK_MPI(MPI_Comm_size(half, &hs));
    CHECK_MPI(MPI_Comm_rank(half, &hr));
    CHECK_EQ(want_size, hs, "size of the parity communicator");
    /* higher world ranks have lower keys, so they come first */
    for (i = rank + 2; i < size; i += 2)
        key_rank++;
    CHECK_EQ(key_rank, hr, "rank ordered by key in the parity communicator");
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
    for (i = rank % 2; i < size; i += 2)
        want += i;
    CHECK_EQ(want, sum, "MPI_Allreduce inside the parity communicator");
    if (hs > 1) {
        int to = (hr + 1) % hs, from = (hr + hs - 1) % hs, got = -1, mine = rank * 100;
        CHECK_MPI(MPI_Sendrecv(&mine, 1, MPI_INT, to, 7, &got, 1, MPI_INT, from, 7, half, MPI_STATUS_IGNORE));
        CHECK_EQ(rank % 2, got / 100 % 2, "message inside the parity communicator comes from the same parity");
    }
    CHECK_MPI(MPI_Comm_free(&half));
    CHECK(half == MPI_COMM_NULL, "MPI_Comm_free resets the handle");

    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared));
    CHECK_MPI(MPI_Comm_size(shared, &hs));
    CHECK_EQ(size, hs, "every rank shares this host");
    CHECK_MPI(MPI_Comm_free(&shared));
    hw_split_tests();
}

/* The hardware splits of MPI 4 on a job that runs on one host. */
static void hw_split_tests(void)
{
    MPI_Comm part = MPI_COMM_WORLD;
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL + 1];
    int flag = -1, hs = -1;
    /* Guided without a resource type, or with one not known: MPI_COMM_NULL. */
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &part));
    CHECK(part == MPI_COMM_NULL, "MPI_COMM_TYPE_HW_GUIDED with MPI_INFO_NULL gives MPI_COMM_NULL");
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_hw_resource_type", "no_such_resource"));
    part = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &part));
    CHECK(part == MPI_COMM_NULL, "MPI_COMM_TYPE_HW_GUIDED with an unknown resource gives MPI_COMM_NULL");
    part = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_RESOURCE_GUIDED, 0, info, &part));
    CHECK(part == MPI_COMM_NULL, "MPI_COMM_TYPE_RESOURCE_GUIDED with an unknown resource gives MPI_COMM_NULL");
    /* The reserved "mpi_shared_memory" is the host: every rank here. */
    CHECK_MPI(MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory"));
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &part));
    CHECK(part != MPI_COMM_NULL, "MPI_COMM_TYPE_HW_GUIDED with mpi_shared_memory gives a communicator");
    CHECK_MPI(MPI_Comm_size(part, &hs));
    CHECK_EQ(size, hs, "mpi_shared_memory: every rank shares this host");
    CHECK_MPI(MPI_Comm_free(&part));
    CHECK_MPI(MPI_Info_free(&info));
    /* Unguided parts must be strict subsets: the host is all of
     * MPI_COMM_WORLD here, so nothing smaller is known; the info is left
     * without a resource type. */
    CHECK_MPI(MPI_Info_create(&info));
    part = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, 0, info, &part));
    CHECK(part == MPI_COMM_NULL, "MPI_COMM_TYPE_HW_UNGUIDED on one host gives MPI_COMM_NULL");
    CHECK_MPI(MPI_Info_get(info, "mpi_hw_resource_type", MPI_MAX_INFO_VAL, value, &flag));
    CHECK_EQ(0, flag, "no resource type set when MPI_COMM_TYPE_HW_UNGUIDED gives MPI_COMM_NULL");
    CHECK_MPI(MPI_Info_free(&info));
}

static void group_tests(void)
{
    MPI_Group world, evens, odds, first, u, x, d, rng, rng_ex, empty_check;
    int n, r, res, i, even_ranks[64], ne = 0, tr_in[3], tr_out[3];
    int ranges[1][3];
    MPI_Comm c, dup;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_size(world, &n));
    CHECK_EQ(size, n, "MPI_Group_size of the world group");
    CHECK_MPI(MPI_Group_rank(world, &r));
    CHECK_EQ(rank, r, "MPI_Group_rank in the world group");
    for (i = 0; i < size; i += 2)
        even_ranks[ne++] = i;
    CHECK_MPI(MPI_Group_incl(world, ne, even_ranks, &evens));
    CHECK_MPI(MPI_Group_excl(world, ne, even_ranks, &odds));
    CHECK_MPI(MPI_Group_size(evens, &n));
    CHECK_EQ(ne, n, "size of the even group");
    CHECK_MPI(MPI_Group_rank(odds, &r));
    CHECK_EQ(rank % 2 ? rank / 2 : MPI_UNDEFINED, r, "rank in the odd group");
    CHECK_MPI(MPI_Group_union(evens, odds, &u));
    CHECK_MPI(MPI_Group_compare(u, world, &res));
    CHECK_EQ(size > 2 ? MPI_SIMILAR : MPI_IDENT, res, "evens + odds is the world, reordered");
    CHECK_MPI(MPI_Group_intersection(evens, odds, &x));
    CHECK_MPI(MPI_Group_size(x, &n));
    CHECK_EQ(0, n, "evens and odds do not meet");
    CHECK(x == MPI_GROUP_EMPTY, "an empty result is MPI_GROUP_EMPTY");
    CHECK_MPI(MPI_Group_difference(world, odds, &d));
    CHECK_MPI(MPI_Group_compare(d, evens, &res));
    CHECK_EQ(MPI_IDENT, res, "world minus odds is evens");
    ranges[0][0] = size - 1;
    ranges[0][1] = 0;
    ranges[0][2] = -1;
    CHECK_MPI(MPI_Group_range_incl(world, 1, ranges, &rng));
    CHECK_MPI(MPI_Group_rank(rng, &r));
    CHECK_EQ(size - 1 - rank, r, "rank in the reversed group");
    ranges[0][0] = 0;
    ranges[0][1] = size - 1;
    ranges[0][2] = 2;
    CHECK_MPI(MPI_Group_range_excl(world, 1, ranges, &rng_ex));
    CHECK_MPI(MPI_Group_compare(rng_ex, odds, &res));
    CHECK_EQ(MPI_IDENT, res, "range_excl of the evens is the odds");
    tr_in[0] = 0;
    tr_in[1] = size - 1;
    tr_in[2] = MPI_PROC_NULL;
    CHECK_MPI(MPI_Group_translate_ranks(rng, 3, tr_in, world, tr_out));
    CHECK_EQ(size - 1, tr_out[0], "translate rank 0 of the reversed group");
    CHECK_EQ(0, tr_out[1], "translate the last rank of the reversed group");
    CHECK_EQ(MPI_PROC_NULL, tr_out[2], "translate MPI_PROC_NULL");
    /* a communicator of the first half (at least rank 0) */
    {
        int h = (size + 1) / 2, firsts[64];
        for (i = 0; i < h; i++)
            firsts[i] = i;
        CHECK_MPI(MPI_Group_incl(world, h, firsts, &first));
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, first, &c));
        if (rank < h) {
            int cs, cr, v = 1, tot = 0;
            CHECK(c != MPI_COMM_NULL, "a member of the group gets a communicator");
            CHECK_MPI(MPI_Comm_size(c, &cs));
            CHECK_MPI(MPI_Comm_rank(c, &cr));
            CHECK_EQ(h, cs, "size of the created communicator");
            CHECK_EQ(rank, cr, "rank in the created communicator");
            CHECK_MPI(MPI_Allreduce(&v, &tot, 1, MPI_INT, MPI_SUM, c));
            CHECK_EQ(h, tot, "MPI_Allreduce in the created communicator");
            CHECK_MPI(MPI_Comm_free(&c));
        } else {
            CHECK(c == MPI_COMM_NULL, "a non-member gets MPI_COMM_NULL");
        }
    }
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res));
    CHECK_EQ(MPI_IDENT, res, "a communicator is identical to itself");
    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
    CHECK_EQ(MPI_CONGRUENT, res, "a duplicate is congruent");
    {
        MPI_Comm rev;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &rev));
        CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, rev, &res));
        CHECK_EQ(size > 1 ? MPI_SIMILAR : MPI_CONGRUENT, res, "a reordered communicator is similar");
        CHECK_MPI(MPI_Comm_free(&rev));
    }
    if (size > 1) {
        MPI_Comm part;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank == 0, 0, &part));
        CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, part, &res));
        CHECK_EQ(MPI_UNEQUAL, res, "a part of the world is unequal");
        CHECK_MPI(MPI_Comm_free(&part));
    }
    CHECK_MPI(MPI_Comm_free(&dup));
    empty_check = MPI_GROUP_EMPTY;
    CHECK_MPI(MPI_Group_size(empty_check, &n));
    CHECK_EQ(0, n, "MPI_GROUP_EMPTY has no members");
    MPI_Group *all[] = {&world, &evens, &odds, &first, &u, &d, &rng, &rng_ex};
    for (i = 0; i < (int)(sizeof all / sizeof all[0]); i++) {
        CHECK_MPI(MPI_Group_free(all[i]));
        CHECK(*all[i] == MPI_GROUP_NULL, "MPI_Group_free resets the handle");
    }
}

static void name_and_attr_tests(void)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1, flag = 0, key, key2;
    int *ival;
    void *val;
    MPI_Comm dup, dup2;
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "predefined name (got '%s')", name);
    /* MPI-4.1: null handles have names too. */
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_NULL, name, &len));
    CHECK(strcmp(name, "MPI_COMM_NULL") == 0 && len == 13, "name of MPI_COMM_NULL (got '%s')", name);
    CHECK_MPI(MPI_Win_get_name(MPI_WIN_NULL, name, &len));
    CHECK(strcmp(name, "MPI_WIN_NULL") == 0 && len == 12, "name of MPI_WIN_NULL (got '%s')", name);
    CHECK_MPI(MPI_Type_get_name(MPI_DATATYPE_NULL, name, &len));
    CHECK(strcmp(name, "MPI_DATATYPE_NULL") == 0 && len == 17, "name of MPI_DATATYPE_NULL (got '%s')", name);
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_set_name(dup, "tandem dup"));
    CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
    CHECK(strcmp(name, "tandem dup") == 0 && len == 10, "MPI_Comm_get_name after set (got '%s')", name);

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ival, &flag));
    CHECK(flag && *ival >= 32767, "MPI_TAG_UB is set and at least 32767");
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &ival, &flag));
    CHECK(flag, "MPI_HOST is set");
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &ival, &flag));
    CHECK(flag, "MPI_IO is set");
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &ival, &flag));
    CHECK(!flag || *ival == 0 || *ival == 1, "MPI_WTIME_IS_GLOBAL is a boolean");

    CHECK_MPI(MPI_Comm_create_keyval(copy_cb, delete_cb, &key, &copies));
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key2, NULL));
    CHECK_MPI(MPI_Comm_get_attr(dup, key, &val, &flag));
    CHECK_EQ(0, flag, "an attribute not set yet");
    CHECK_MPI(MPI_Comm_set_attr(dup, key, (void *)(size_t)1000));
    CHECK_MPI(MPI_Comm_set_attr(dup, key2, (void *)(size_t)77));
    CHECK_MPI(MPI_Comm_get_attr(dup, key, &val, &flag));
    CHECK(flag && val == (void *)(size_t)1000, "MPI_Comm_get_attr gives the value set");
    CHECK_MPI(MPI_Comm_dup(dup, &dup2));
    CHECK_EQ(1, copies, "the copy callback ran once on MPI_Comm_dup");
    CHECK_MPI(MPI_Comm_get_attr(dup2, key, &val, &flag));
    CHECK(flag && val == (void *)(size_t)1001, "the copy callback's value is on the duplicate");
    CHECK_MPI(MPI_Comm_get_attr(dup2, key2, &val, &flag));
    CHECK_EQ(0, flag, "MPI_COMM_NULL_COPY_FN does not copy");
    CHECK_MPI(MPI_Comm_set_attr(dup, key, (void *)(size_t)2000));
    CHECK_EQ(1, deletes, "replacing an attribute deletes the old value");
    CHECK_MPI(MPI_Comm_delete_attr(dup, key));
    CHECK_EQ(2, deletes, "MPI_Comm_delete_attr runs the delete callback");
    CHECK_MPI(MPI_Comm_get_attr(dup, key, &val, &flag));
    CHECK_EQ(0, flag, "a deleted attribute is gone");
    CHECK_MPI(MPI_Comm_free(&dup2));
    CHECK_EQ(3, deletes, "MPI_Comm_free runs the delete callback");
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK_MPI(MPI_Comm_free_keyval(&key));
    CHECK_EQ(MPI_KEYVAL_INVALID, key, "MPI_Comm_free_keyval resets the key");
    CHECK_MPI(MPI_Comm_free_keyval(&key2));
}

/* rank's value in neighbourhood exchanges */
static int nval(int r, int slot) { return r * 100 + slot; }

static void cart_tests(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 0}, coords[2], r, src, dst, nd, st, i;
    int gd[2], gp[2], gc[2];
    MPI_Comm cart, row;
    CHECK_MPI(MPI_Dims_create(size, 2, dims));
    CHECK_EQ(size, dims[0] * dims[1], "MPI_Dims_create product");
    CHECK(dims[0] >= dims[1], "MPI_Dims_create orders dimensions non-increasingly");
    {
        int d3[3] = {0, 3, 0};
        if (size % 3 == 0) {
            CHECK_MPI(MPI_Dims_create(size, 3, d3));
            CHECK_EQ(3, d3[1], "MPI_Dims_create keeps a fixed dimension");
            CHECK_EQ(size, d3[0] * d3[1] * d3[2], "MPI_Dims_create product with a fixed dimension");
        }
        {
            int d12[2] = {0, 0};
            CHECK_MPI(MPI_Dims_create(12, 2, d12));
            CHECK(d12[0] == 4 && d12[1] == 3, "MPI_Dims_create(12, 2) = 4 x 3 (got %d x %d)", d12[0], d12[1]);
        }
    }
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    CHECK_MPI(MPI_Topo_test(cart, &st));
    CHECK_EQ(MPI_CART, st, "MPI_Topo_test of a Cartesian communicator");
    CHECK_MPI(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK_EQ(MPI_UNDEFINED, st, "MPI_Topo_test of MPI_COMM_WORLD");
    CHECK_MPI(MPI_Cartdim_get(cart, &nd));
    CHECK_EQ(2, nd, "MPI_Cartdim_get");
    CHECK_MPI(MPI_Comm_rank(cart, &r));
    CHECK_EQ(rank, r, "no reordering");
    CHECK_MPI(MPI_Cart_coords(cart, r, 2, coords));
    CHECK_EQ(r / dims[1], coords[0], "row-major coordinate 0");
    CHECK_EQ(r % dims[1], coords[1], "row-major coordinate 1");
    CHECK_MPI(MPI_Cart_rank(cart, coords, &i));
    CHECK_EQ(r, i, "MPI_Cart_rank inverts MPI_Cart_coords");
    CHECK_MPI(MPI_Cart_get(cart, 2, gd, gp, gc));
    CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 && gp[1] == 0 && gc[0] == coords[0] &&
              gc[1] == coords[1],
          "MPI_Cart_get");
    CHECK_MPI(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK_EQ(((coords[0] + dims[0] - 1) % dims[0]) * dims[1] + coords[1], src, "periodic shift source");
    CHECK_EQ(((coords[0] + 1) % dims[0]) * dims[1] + coords[1], dst, "periodic shift destination");
    CHECK_MPI(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    CHECK_EQ(coords[1] == 0 ? MPI_PROC_NULL : r - 1, src, "non-periodic shift source");
    CHECK_EQ(coords[1] == dims[1] - 1 ? MPI_PROC_NULL : r + 1, dst, "non-periodic shift destination");
    {
        /* neighbourhood collectives: slots (-0, +0, -1, +1) */
        int sendall[4], recvall[4], gath[4], k;
        int nb[4];
        MPI_Cart_shift(cart, 0, 1, &nb[0], &nb[1]);
        MPI_Cart_shift(cart, 1, 1, &nb[2], &nb[3]);
        for (k = 0; k < 4; k++) {
            sendall[k] = nval(r, k);
            recvall[k] = gath[k] = -1;
        }
        CHECK_MPI(MPI_Neighbor_allgather(&sendall[0], 1, MPI_INT, gath, 1, MPI_INT, cart));
        CHECK_MPI(MPI_Neighbor_alltoall(sendall, 1, MPI_INT, recvall, 1, MPI_INT, cart));
        for (k = 0; k < 4; k++) {
            if (nb[k] == MPI_PROC_NULL) {
                CHECK_EQ(-1, gath[k], "no data from a missing neighbour (slot %d)", k);
                continue;
            }
            CHECK_EQ(nval(nb[k], 0), gath[k], "MPI_Neighbor_allgather slot %d", k);
            /* the neighbour in the negative direction sent us its positive block */
            CHECK_EQ(nval(nb[k], k ^ 1), recvall[k], "MPI_Neighbor_alltoall slot %d", k);
        }
    }
    {
        int keep[2] = {0, 1}, rs, rr, sum = 0;
        CHECK_MPI(MPI_Cart_sub(cart, keep, &row));
        CHECK_MPI(MPI_Comm_size(row, &rs));
        CHECK_MPI(MPI_Comm_rank(row, &rr));
        CHECK_EQ(dims[1], rs, "MPI_Cart_sub row size");
        CHECK_EQ(coords[1], rr, "MPI_Cart_sub rank is the column");
        CHECK_MPI(MPI_Cartdim_get(row, &nd));
        CHECK_EQ(1, nd, "the row is one-dimensional");
        CHECK_MPI(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, row));
        CHECK_EQ(dims[1] * coords[0] * dims[1] + dims[1] * (dims[1] - 1) / 2, sum, "MPI_Allreduce along the row");
        CHECK_MPI(MPI_Comm_free(&row));
    }
    CHECK_MPI(MPI_Comm_free(&cart));
    /* a grid smaller than the communicator leaves the rest out */
    if (size > 1) {
        int d1[1] = {size - 1}, p1[1] = {0};
        CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, d1, p1, 0, &cart));
        CHECK((rank == size - 1) == (cart == MPI_COMM_NULL), "ranks outside the grid get MPI_COMM_NULL");
        if (cart != MPI_COMM_NULL)
            CHECK_MPI(MPI_Comm_free(&cart));
    }
}

static void graph_tests(void)
{
    int srcs[2] = {(rank + size - 1) % size, (rank + 1) % size};
    int dsts[2] = {(rank + 1) % size, (rank + size - 1) % size};
    int w[2] = {3, 4}, in, out, weighted, gs[2], gsw[2], gd[2], gdw[2], st;
    int sendbuf[2] = {nval(rank, 0), nval(rank, 1)}, recvbuf[2] = {-1, -1}, gath[2] = {-1, -1};
    MPI_Comm g;
    if (size < 3)
        return;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, w, 2, dsts, w, MPI_INFO_NULL, 0, &g));
    CHECK_MPI(MPI_Topo_test(g, &st));
    CHECK_EQ(MPI_DIST_GRAPH, st, "MPI_Topo_test of a distributed graph");
    CHECK_MPI(MPI_Dist_graph_neighbors_count(g, &in, &out, &weighted));
    CHECK(in == 2 && out == 2 && weighted, "MPI_Dist_graph_neighbors_count");
    CHECK_MPI(MPI_Dist_graph_neighbors(g, 2, gs, gsw, 2, gd, gdw));
    CHECK(gs[0] == srcs[0] && gs[1] == srcs[1] && gd[0] == dsts[0] && gd[1] == dsts[1] && gsw[1] == 4 && gdw[0] == 3,
          "MPI_Dist_graph_neighbors");
    CHECK_MPI(MPI_Neighbor_allgather(&sendbuf[0], 1, MPI_INT, gath, 1, MPI_INT, g));
    CHECK_EQ(nval(srcs[0], 0), gath[0], "graph allgather from the left");
    CHECK_EQ(nval(srcs[1], 0), gath[1], "graph allgather from the right");
    CHECK_MPI(MPI_Neighbor_alltoall(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, g));
    /* the left neighbour sent block 0 to its right (us); the right one block 1 */
    CHECK_EQ(nval(srcs[0], 0), recvbuf[0], "graph alltoall from the left");
    CHECK_EQ(nval(srcs[1], 1), recvbuf[1], "graph alltoall from the right");
    CHECK_MPI(MPI_Comm_free(&g));
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    split_tests();
    group_tests();
    name_and_attr_tests();
    cart_tests();
    graph_tests();
    return tc_finish(NAME);
}

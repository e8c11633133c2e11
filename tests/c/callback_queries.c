/*
 * callback_queries.c - what mpi4py's user-defined operations, datatype
 * decoding and generalized requests rely on:
 *
 *  1. a user-defined reduction's function may query its datatype in every
 *     form (MPI_Type_get_extent, _x, _c, MPI_Type_size_c), and ask a
 *     communicator's rank, size, remote size and kind (MPI_COMM_WORLD,
 *     and a duplicate the reduction runs on), in MPI_Reduce_local and
 *     MPI_Allreduce;
 *  2. MPI_Type_get_contents hands back derived constituents the caller
 *     owns: freeing them, as the standard asks, leaves the program's own
 *     type intact and usable; a type's contents outlive its constituents'
 *     handles;
 *  3. a generalized request's status keeps the source its query callback
 *     set, MPI_ANY_SOURCE included, and MPI_Cancel returns the error its
 *     cancel callback returned.
 *
 * Ranks: any.
 */
#include "check.h"

#define NAME "callback_queries"

static int queried, comm_queried;
static MPI_Comm dup_comm = MPI_COMM_NULL;
static int world_rank, world_size;

static void ask_comm(MPI_Comm comm) {
    int rank = -1, size = -1, inter = -1, remote = -1;
    CHECK_MPI(MPI_Comm_rank(comm, &rank));
    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_MPI(MPI_Comm_test_inter(comm, &inter));
    CHECK_EQ(world_rank, rank, "MPI_Comm_rank inside the reduction");
    CHECK_EQ(world_size, size, "MPI_Comm_size inside the reduction");
    CHECK_EQ(0, inter, "MPI_Comm_test_inter inside the reduction");
    tc_expect_class(MPI_Comm_remote_size(comm, &remote), MPI_ERR_COMM,
                    "MPI_Comm_remote_size of an intracommunicator inside the reduction");
    comm_queried++;
}

static void add_pairs(void *in, void *inout, int *len, MPI_Datatype *dt) {
    MPI_Aint lb, extent;
    MPI_Count lb_c, extent_c, size_c;
    CHECK_MPI(MPI_Type_get_extent(*dt, &lb, &extent));
    CHECK_MPI(MPI_Type_get_extent_c(*dt, &lb_c, &extent_c));
    CHECK_MPI(MPI_Type_get_extent_x(*dt, &lb_c, &extent_c));
    CHECK_MPI(MPI_Type_get_true_extent_c(*dt, &lb_c, &extent_c));
    CHECK_MPI(MPI_Type_size_c(*dt, &size_c));
    CHECK_EQ((MPI_Count)extent, extent_c, "the _c extent inside the reduction");
    queried = 1;
    ask_comm(MPI_COMM_WORLD);
    if (dup_comm != MPI_COMM_NULL)
        ask_comm(dup_comm);
    int bad = -1;
    tc_expect_class(MPI_Comm_size(MPI_COMM_NULL, &bad), MPI_ERR_COMM,
                    "MPI_Comm_size of MPI_COMM_NULL inside the reduction");
    int *a = in, *b = inout;
    for (int i = 0; i < 2 * *len; i++)
        b[i] += a[i];
}

static int query_any(void *extra, MPI_Status *st) {
    (void)extra;
    MPI_Status_set_elements(st, MPI_BYTE, 0);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = 7;
    return MPI_SUCCESS;
}
static int free_ok(void *extra) {
    (void)extra;
    return MPI_SUCCESS;
}
static int cancel_fails(void *extra, int complete) {
    (void)extra;
    (void)complete;
    return MPI_ERR_OTHER;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size = tc_size();
    world_size = size;
    world_rank = tc_rank();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* 1. */
    MPI_Datatype pair;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    MPI_Op op;
    CHECK_MPI(MPI_Op_create(add_pairs, 1, &op));
    int in[4] = {1, 2, 3, 4}, out[4] = {10, 20, 30, 40};
    CHECK_MPI(MPI_Reduce_local(in, out, 2, pair, op));
    CHECK(queried && out[0] == 11 && out[3] == 44, "MPI_Reduce_local with the op (got %d %d)", out[0], out[3]);
    int sum[4];
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup_comm));
    CHECK_MPI(MPI_Allreduce(in, sum, 2, pair, op, dup_comm));
    CHECK(sum[0] == size && sum[3] == 4 * size, "MPI_Allreduce with the op (got %d %d)", sum[0], sum[3]);
    /* One rank combines nothing in MPI_Allreduce. */
    CHECK(comm_queried >= (size > 1 ? 2 : 1), "the reduction asked about its communicators (%d times)",
          comm_queried);
    CHECK_MPI(MPI_Comm_free(&dup_comm));
    CHECK_MPI(MPI_Op_free(&op));

    /* 2. */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(3, 1, 2, pair, &vec));
    int ni, na, nd, combiner;
    CHECK_MPI(MPI_Type_get_envelope(vec, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_VECTOR && nd == 1, "the vector's envelope");
    int ints[3];
    MPI_Aint addrs[1];
    MPI_Datatype inner;
    CHECK_MPI(MPI_Type_get_contents(vec, 3, 0, 1, ints, addrs, &inner));
    CHECK_MPI(MPI_Type_get_envelope(inner, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_CONTIGUOUS, "the constituent decodes as the program's type");
    CHECK_MPI(MPI_Type_free(&inner));
    int got = -1;
    CHECK_MPI(MPI_Type_size(pair, &got));
    CHECK_EQ((int)(2 * sizeof(int)), got, "the program's type after freeing the returned one");
    int two[2] = {5, 6}, back[2] = {0, 0};
    CHECK_MPI(MPI_Sendrecv(two, 1, pair, tc_rank(), 3, back, 1, pair, tc_rank(), 3, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    CHECK(back[0] == 5 && back[1] == 6, "the program's type still communicates");
    CHECK_MPI(MPI_Type_free(&vec));

    /* A duplicate outlives the type it was made from: its contents still
     * name what that type was (a contiguous pair), also once the freed
     * handle's number is given to a new type, and every level decodes in
     * turn (mpi4py's type decoder walks them so). */
    MPI_Datatype dup, dup2, other, got_t, got_inner;
    CHECK_MPI(MPI_Type_dup(pair, &dup));
    CHECK_MPI(MPI_Type_dup(dup, &dup2));
    CHECK_MPI(MPI_Type_free(&pair));
    CHECK_MPI(MPI_Type_free(&dup));
    CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &other));
    CHECK_MPI(MPI_Type_get_envelope(dup2, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_DUP && nd == 1, "the duplicate's envelope");
    CHECK_MPI(MPI_Type_get_contents(dup2, 0, 0, 1, NULL, NULL, &got_t));
    CHECK_MPI(MPI_Type_get_envelope(got_t, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_DUP && nd == 1, "the freed duplicate decodes as a duplicate (combiner %d)",
          combiner);
    CHECK_MPI(MPI_Type_get_contents(got_t, 0, 0, 1, NULL, NULL, &got_inner));
    CHECK_MPI(MPI_Type_get_envelope(got_inner, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_CONTIGUOUS && ni == 1 && nd == 1,
          "the freed pair decodes as a contiguous type (combiner %d)", combiner);
    CHECK_MPI(MPI_Type_size(got_inner, &got));
    CHECK_EQ((int)(2 * sizeof(int)), got, "the freed pair's size");
    CHECK_MPI(MPI_Type_free(&got_inner));
    CHECK_MPI(MPI_Type_free(&got_t));
    CHECK_MPI(MPI_Type_free(&other));
    CHECK_MPI(MPI_Type_free(&dup2));

    /* A predefined datatype may be renamed, as mpi4py's tests do. */
    char tname[MPI_MAX_OBJECT_NAME];
    int tlen = 0;
    CHECK_MPI(MPI_Type_get_name(MPI_INT, tname, &tlen));
    CHECK(strcmp(tname, "MPI_INT") == 0, "MPI_INT's name (got %s)", tname);
    CHECK_MPI(MPI_Type_set_name(MPI_INT, "my int"));
    CHECK_MPI(MPI_Type_get_name(MPI_INT, tname, &tlen));
    CHECK(strcmp(tname, "my int") == 0 && tlen == 6, "MPI_INT renamed (got %s)", tname);
    CHECK_MPI(MPI_Type_set_name(MPI_INT, "MPI_INT"));

    /* 3. */
    MPI_Request req;
    CHECK_MPI(MPI_Grequest_start(query_any, free_ok, cancel_fails, NULL, &req));
    int rc = MPI_Cancel(&req);
    tc_expect_class(rc, MPI_ERR_OTHER, "MPI_Cancel when the cancel callback fails");
    CHECK_MPI(MPI_Grequest_complete(req));
    MPI_Status st;
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_EQ(MPI_ANY_SOURCE, st.MPI_SOURCE, "the source the query callback set");
    CHECK_EQ(7, st.MPI_TAG, "the tag the query callback set");

    tc_finish(NAME);
    return 0;
}

/*
 * isendrecv.c - MPI_Isendrecv and MPI_Isendrecv_replace.
 *
 * Ranks: any number (1 included: the ring is then a rank talking to itself).
 * Each rank sends to its right neighbour and receives from its left one.
 *
 *   1. MPI_Isendrecv round the ring with 0, 100, 65537 and 1 MiB bytes
 *      (eager and rendezvous), completed with MPI_Wait or an MPI_Test loop:
 *      the data arrive intact, the status names the left neighbour, the tag
 *      and the size, and its error field is left alone;
 *   2. two MPI_Isendrecv both ways round the ring at once, completed with
 *      MPI_Waitall;
 *   3. MPI_Isendrecv_replace round the ring with 100 and 300000 bytes: the
 *      buffer ends up holding the left neighbour's data; then with a strided
 *      datatype (every other int) whose gaps must stay untouched;
 *   4. MPI_PROC_NULL as both partners: complete, source MPI_PROC_NULL, tag
 *      MPI_ANY_TAG, count 0, buffer untouched;
 *   5. errors (MPI_ERRORS_RETURN): a destination out of range -> MPI_ERR_RANK,
 *      a negative receive tag -> MPI_ERR_TAG, a negative count ->
 *      MPI_ERR_COUNT, MPI_DATATYPE_NULL -> MPI_ERR_TYPE, MPI_COMM_NULL ->
 *      MPI_ERR_COMM, a NULL request pointer -> MPI_ERR_ARG; afterwards an
 *      exchange still works (a failed call leaves no receive behind).
 */
#include "check.h"

#define NAME "isendrecv"

static const int sizes[] = {0, 100, 65537, 1024 * 1024};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static int rank, nranks, left, right;

static void ring(int k)
{
    int n = sizes[k], flag = 0;
    unsigned char *out = tc_alloc((size_t)n), *in = tc_alloc((size_t)n);
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;
    char what[64];
    double t0 = MPI_Wtime();

    snprintf(what, sizeof what, "MPI_Isendrecv of %d bytes", n);
    tc_fill(out, (size_t)n, rank, k);
    tc_prepare_recv(in, (size_t)n, left, k);
    CHECK_MPI(MPI_Isendrecv(out, n, MPI_BYTE, right, 40 + k, in, n, MPI_BYTE, left, 40 + k, MPI_COMM_WORLD, &req));
    CHECK(req != MPI_REQUEST_NULL, "%s: a request", what);
    st.MPI_ERROR = MPI_ERR_DIMS;
    if (k % 2 == 0) {
        CHECK_MPI(MPI_Wait(&req, &st));
    } else {
        while (!flag) {
            CHECK_MPI(MPI_Test(&req, &flag, &st));
            tc_deadline(t0, 30, what);
        }
    }
    CHECK(req == MPI_REQUEST_NULL, "%s: the request is freed", what);
    tc_check_status(&st, left, 40 + k, n, what);
    CHECK_EQ(MPI_ERR_DIMS, st.MPI_ERROR, "%s: the status's error field", what);
    tc_check_recv(in, (size_t)n, left, k, what);
    free(out);
    free(in);
}

static void both_ways(void)
{
    int n = 70000;
    unsigned char *out = tc_alloc((size_t)n), *in[2];
    MPI_Request reqs[2];
    MPI_Status st[2];

    in[0] = tc_alloc((size_t)n);
    in[1] = tc_alloc((size_t)n);
    tc_fill(out, (size_t)n, rank, 60);
    tc_prepare_recv(in[0], (size_t)n, left, 60);
    tc_prepare_recv(in[1], (size_t)n, right, 60);
    CHECK_MPI(MPI_Isendrecv(out, n, MPI_BYTE, right, 61, in[0], n, MPI_BYTE, left, 61, MPI_COMM_WORLD, &reqs[0]));
    CHECK_MPI(MPI_Isendrecv(out, n, MPI_BYTE, left, 62, in[1], n, MPI_BYTE, right, 62, MPI_COMM_WORLD, &reqs[1]));
    CHECK_MPI(MPI_Waitall(2, reqs, st));
    tc_check_status(&st[0], left, 61, n, "both ways: from the left");
    tc_check_status(&st[1], right, 62, n, "both ways: from the right");
    tc_check_recv(in[0], (size_t)n, left, 60, "both ways: from the left");
    tc_check_recv(in[1], (size_t)n, right, 60, "both ways: from the right");
    free(out);
    free(in[0]);
    free(in[1]);
}

static void replace(void)
{
    int sizes_r[2] = {100, 300000}, i, k;
    int ints[64];
    MPI_Datatype vec;
    MPI_Request req;
    MPI_Status st;

    for (k = 0; k < 2; k++) {
        int n = sizes_r[k];
        unsigned char *buf = tc_alloc((size_t)n);
        char what[64];
        snprintf(what, sizeof what, "MPI_Isendrecv_replace of %d bytes", n);
        tc_fill(buf, (size_t)n, rank, 70 + k);
        CHECK_MPI(MPI_Isendrecv_replace(buf, n, MPI_BYTE, right, 70 + k, left, 70 + k, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Wait(&req, &st));
        tc_check_status(&st, left, 70 + k, n, what);
        tc_check_recv(buf, (size_t)n, left, 70 + k, what);
        free(buf);
    }

    /* 16 ints at every other int of `ints`; the gaps stay untouched. */
    CHECK_MPI(MPI_Type_vector(16, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    for (i = 0; i < 64; i++)
        ints[i] = i % 2 == 0 && i < 32 ? rank * 1000 + i : -1;
    CHECK_MPI(MPI_Isendrecv_replace(ints, 1, vec, right, 75, left, 75, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    for (i = 0; i < 64; i++)
        CHECK_EQ(i % 2 == 0 && i < 32 ? left * 1000 + i : -1, ints[i], "strided MPI_Isendrecv_replace: ints[%d]", i);
    CHECK_MPI(MPI_Type_free(&vec));
}

static void proc_null(void)
{
    int x = 5, y = 7, count = -1;
    MPI_Request req;
    MPI_Status st;

    CHECK_MPI(MPI_Isendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 1, &y, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_EQ(MPI_PROC_NULL, st.MPI_SOURCE, "MPI_Isendrecv(MPI_PROC_NULL): status.MPI_SOURCE");
    CHECK_EQ(MPI_ANY_TAG, st.MPI_TAG, "MPI_Isendrecv(MPI_PROC_NULL): status.MPI_TAG");
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(0, count, "MPI_Isendrecv(MPI_PROC_NULL): count");
    CHECK_EQ(7, y, "MPI_Isendrecv(MPI_PROC_NULL) leaves the receive buffer alone");
    CHECK_MPI(MPI_Isendrecv_replace(&x, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_EQ(MPI_PROC_NULL, st.MPI_SOURCE, "MPI_Isendrecv_replace(MPI_PROC_NULL): status.MPI_SOURCE");
    CHECK_EQ(5, x, "MPI_Isendrecv_replace(MPI_PROC_NULL) leaves the buffer alone");
}

static void errors(void)
{
    int x = rank, y = -1, rc;
    MPI_Request req;
    MPI_Status st;

    rc = MPI_Isendrecv(&x, 1, MPI_INT, nranks, 1, &y, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &req);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Isendrecv to rank size");
    rc = MPI_Isendrecv(&x, 1, MPI_INT, right, 1, &y, 1, MPI_INT, left, -3, MPI_COMM_WORLD, &req);
    tc_expect_class(rc, MPI_ERR_TAG, "MPI_Isendrecv with receive tag -3");
    rc = MPI_Isendrecv(&x, -1, MPI_INT, right, 1, &y, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &req);
    tc_expect_class(rc, MPI_ERR_COUNT, "MPI_Isendrecv with send count -1");
    rc = MPI_Isendrecv(&x, 1, MPI_INT, right, 1, &y, 1, MPI_DATATYPE_NULL, left, 1, MPI_COMM_WORLD, &req);
    tc_expect_class(rc, MPI_ERR_TYPE, "MPI_Isendrecv with MPI_DATATYPE_NULL");
    rc = MPI_Isendrecv_replace(&x, 1, MPI_INT, -4, 1, left, 1, MPI_COMM_WORLD, &req);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Isendrecv_replace to rank -4");
    rc = MPI_Isendrecv_replace(&x, 1, MPI_INT, right, 1, left, 1, MPI_COMM_NULL, &req);
    tc_expect_class(rc, MPI_ERR_COMM, "MPI_Isendrecv_replace on MPI_COMM_NULL");
    if (tc_is_tandem()) {
        rc = MPI_Isendrecv(&x, 1, MPI_INT, right, 1, &y, 1, MPI_INT, left, 1, MPI_COMM_WORLD, NULL);
        tc_expect_class(rc, MPI_ERR_ARG, "MPI_Isendrecv with a NULL request pointer");
    }
    /* No receive of the failed calls is left to take this message. */
    CHECK_MPI(MPI_Isendrecv(&x, 1, MPI_INT, right, 1, &y, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_EQ(left, y, "exchange after the errors");
}

int main(int argc, char **argv)
{
    int k;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    left = (rank + nranks - 1) % nranks;
    right = (rank + 1) % nranks;

    for (k = 0; k < NSIZES; k++)
        ring(k);
    both_ways();
    replace();
    proc_null();
    errors();
    return tc_finish(NAME);
}

/*
 * request_status.c - MPI_Request_get_status: the completion of a request
 * without releasing it.
 *
 * Ranks: any number (1 included: then every message goes to self). Each rank
 * receives from its left neighbour and sends to its right one.
 *
 *   1. MPI_REQUEST_NULL: flag 1 and the empty status;
 *   2. a receive posted before its message was sent: flag 0 (the sender waits
 *      for a barrier); then polled until flag 1: source, tag and size in the
 *      status, the handle unchanged, the data in the buffer; asked again the
 *      same; MPI_Wait then releases it with the same status;
 *   3. a rendezvous send (1 MiB) polled with MPI_Request_get_status until
 *      complete, then MPI_Wait;
 *   4. a receive into a strided datatype (staged): once flag is 1 the data
 *      are in place; what the application writes there afterwards survives
 *      MPI_Wait;
 *   5. an inactive persistent request: flag 1 and the empty status;
 *   6. a receive truncated: MPI_Request_get_status returns MPI_ERR_TRUNCATE
 *      (MPI_ERRORS_RETURN), and so does MPI_Wait;
 *   7. MPI_Request_get_status_all / _any / _some over two receives and a
 *      null request: nothing before a send; the one message sent found
 *      (index 1); then all complete with their statuses, the requests left
 *      for MPI_Waitall; over null requests only, MPI_UNDEFINED;
 *   8. a NULL flag pointer -> MPI_ERR_ARG; a garbage handle -> MPI_ERR_REQUEST
 *      (only on Tandem, whose handles can be checked).
 */
#include "check.h"

#define NAME "request_status"

static int rank, nranks, left, right;

/* Polls until flag is 1; returns the call's code. */
static int poll_status(MPI_Request req, MPI_Status *st, const char *what)
{
    int flag = 0, rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();
    while (!flag) {
        rc = MPI_Request_get_status(req, &flag, st);
        if (rc != MPI_SUCCESS)
            CHECK_EQ(1, flag, "%s: flag when the call fails", what);
        tc_deadline(t0, 30, what);
    }
    return rc;
}

static void posted_first(void)
{
    int n = 1000, flag = -1;
    unsigned char *in = tc_alloc((size_t)n), *out = tc_alloc((size_t)n);
    MPI_Request rreq, sreq, keep;
    MPI_Status st, st2;

    tc_prepare_recv(in, (size_t)n, left, 1);
    tc_fill(out, (size_t)n, rank, 1);
    CHECK_MPI(MPI_Irecv(in, n, MPI_BYTE, left, 7, MPI_COMM_WORLD, &rreq));
    keep = rreq;
    CHECK_MPI(MPI_Request_get_status(rreq, &flag, &st));
    CHECK_EQ(0, flag, "get_status before the message was sent");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Isend(out, n, MPI_BYTE, right, 7, MPI_COMM_WORLD, &sreq));
    CHECK_MPI(poll_status(rreq, &st, "section 2"));
    CHECK(rreq == keep, "get_status leaves the handle");
    tc_check_status(&st, left, 7, n, "get_status of the receive");
    tc_check_recv(in, (size_t)n, left, 1, "data after get_status gave flag 1");
    CHECK_MPI(MPI_Request_get_status(rreq, &flag, &st2));
    CHECK_EQ(1, flag, "get_status asked again");
    tc_check_status(&st2, left, 7, n, "get_status asked again");
    CHECK_MPI(MPI_Wait(&rreq, &st2));
    CHECK(rreq == MPI_REQUEST_NULL, "MPI_Wait releases the request after get_status");
    tc_check_status(&st2, left, 7, n, "MPI_Wait after get_status");
    CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    free(in);
    free(out);
}

static void rendezvous_send(void)
{
    int n = 1024 * 1024;
    unsigned char *in = tc_alloc((size_t)n), *out = tc_alloc((size_t)n);
    MPI_Request rreq, sreq;
    MPI_Status st;

    tc_fill(out, (size_t)n, rank, 3);
    tc_prepare_recv(in, (size_t)n, left, 3);
    CHECK_MPI(MPI_Irecv(in, n, MPI_BYTE, left, 8, MPI_COMM_WORLD, &rreq));
    CHECK_MPI(MPI_Isend(out, n, MPI_BYTE, right, 8, MPI_COMM_WORLD, &sreq));
    CHECK_MPI(poll_status(sreq, &st, "section 3: the send"));
    CHECK(sreq != MPI_REQUEST_NULL, "get_status leaves the send request");
    CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&rreq, &st));
    tc_check_status(&st, left, 8, n, "section 3: the receive");
    tc_check_recv(in, (size_t)n, left, 3, "section 3: the receive");
    free(in);
    free(out);
}

static void staged_receive(void)
{
    int out[16], in[32], i;
    MPI_Datatype vec;
    MPI_Request rreq, sreq;
    MPI_Status st;

    CHECK_MPI(MPI_Type_vector(16, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    for (i = 0; i < 16; i++)
        out[i] = rank * 100 + i;
    for (i = 0; i < 32; i++)
        in[i] = -1;
    CHECK_MPI(MPI_Irecv(in, 1, vec, left, 9, MPI_COMM_WORLD, &rreq));
    CHECK_MPI(MPI_Isend(out, 16, MPI_INT, right, 9, MPI_COMM_WORLD, &sreq));
    CHECK_MPI(poll_status(rreq, &st, "section 4"));
    for (i = 0; i < 32; i++)
        CHECK_EQ(i % 2 == 0 ? left * 100 + i / 2 : -1, in[i], "strided receive after get_status: in[%d]", i);
    in[0] = 4242;
    CHECK_MPI(MPI_Wait(&rreq, &st));
    CHECK_EQ(4242, in[0], "a write after get_status survives MPI_Wait");
    CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Type_free(&vec));
}

static void inactive_and_null(void)
{
    int flag = -1, x = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;

    st.MPI_SOURCE = 12345;
    CHECK_MPI(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
    CHECK_EQ(1, flag, "get_status(MPI_REQUEST_NULL): flag");
    CHECK_EQ(MPI_ANY_SOURCE, st.MPI_SOURCE, "get_status(MPI_REQUEST_NULL): empty status source");
    CHECK_EQ(MPI_ANY_TAG, st.MPI_TAG, "get_status(MPI_REQUEST_NULL): empty status tag");

    CHECK_MPI(MPI_Recv_init(&x, 1, MPI_INT, left, 10, MPI_COMM_WORLD, &req));
    flag = -1;
    st.MPI_SOURCE = 12345;
    CHECK_MPI(MPI_Request_get_status(req, &flag, &st));
    CHECK_EQ(1, flag, "get_status of an inactive persistent request: flag");
    CHECK_EQ(MPI_ANY_SOURCE, st.MPI_SOURCE, "get_status of an inactive persistent request: source");
    CHECK_MPI(MPI_Request_free(&req));
}

static void truncated(void)
{
    int out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in[8], rc;
    MPI_Request rreq, sreq;
    MPI_Status st;

    CHECK_MPI(MPI_Irecv(in, 4, MPI_INT, left, 11, MPI_COMM_WORLD, &rreq));
    CHECK_MPI(MPI_Isend(out, 8, MPI_INT, right, 11, MPI_COMM_WORLD, &sreq));
    rc = poll_status(rreq, &st, "section 6");
    tc_expect_class(rc, MPI_ERR_TRUNCATE, "get_status of a truncated receive");
    CHECK(rreq != MPI_REQUEST_NULL, "a failed get_status leaves the request");
    rc = MPI_Wait(&rreq, &st);
    tc_expect_class(rc, MPI_ERR_TRUNCATE, "MPI_Wait of the truncated receive");
    CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
}

/* Section 7: the calls about several requests. */
static void several(void)
{
    int a = -1, b = -1, out_a = rank * 10 + 1, out_b = rank * 10 + 2, flag = -1, index = -2, outcount = -1;
    int indices[3];
    MPI_Request reqs[3], sreq[2];
    MPI_Status st[3];
    double t0;

    CHECK_MPI(MPI_Irecv(&a, 1, MPI_INT, left, 20, MPI_COMM_WORLD, &reqs[0]));
    CHECK_MPI(MPI_Irecv(&b, 1, MPI_INT, left, 21, MPI_COMM_WORLD, &reqs[1]));
    reqs[2] = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Request_get_status_all(3, reqs, &flag, st));
    CHECK_EQ(0, flag, "get_status_all before anything was sent");
    CHECK_MPI(MPI_Request_get_status_any(3, reqs, &index, &flag, &st[0]));
    CHECK_EQ(0, flag, "get_status_any before anything was sent: flag");
    CHECK_EQ(MPI_UNDEFINED, index, "get_status_any before anything was sent: index");
    CHECK_MPI(MPI_Request_get_status_some(3, reqs, &outcount, indices, st));
    CHECK_EQ(0, outcount, "get_status_some before anything was sent");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    CHECK_MPI(MPI_Isend(&out_b, 1, MPI_INT, right, 21, MPI_COMM_WORLD, &sreq[1]));
    t0 = MPI_Wtime();
    for (flag = 0; !flag;) {
        CHECK_MPI(MPI_Request_get_status_any(3, reqs, &index, &flag, &st[0]));
        tc_deadline(t0, 30, "get_status_any");
    }
    CHECK_EQ(1, index, "get_status_any finds the second receive");
    CHECK_EQ(21, st[0].MPI_TAG, "get_status_any: tag");
    CHECK_EQ(left * 10 + 2, b, "data of the second receive");
    CHECK_MPI(MPI_Request_get_status_some(3, reqs, &outcount, indices, st));
    CHECK_EQ(1, outcount, "get_status_some after one message");
    CHECK_EQ(1, indices[0], "get_status_some: index");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    CHECK_MPI(MPI_Isend(&out_a, 1, MPI_INT, right, 20, MPI_COMM_WORLD, &sreq[0]));
    t0 = MPI_Wtime();
    for (flag = 0; !flag;) {
        CHECK_MPI(MPI_Request_get_status_all(3, reqs, &flag, st));
        tc_deadline(t0, 30, "get_status_all");
    }
    tc_check_status(&st[0], left, 20, 4, "get_status_all: the first receive");
    tc_check_status(&st[1], left, 21, 4, "get_status_all: the second receive");
    CHECK_EQ(MPI_ANY_SOURCE, st[2].MPI_SOURCE, "get_status_all: the null request's empty status");
    CHECK(reqs[0] != MPI_REQUEST_NULL && reqs[1] != MPI_REQUEST_NULL, "get_status_all leaves the requests");
    CHECK_MPI(MPI_Waitall(3, reqs, st));
    CHECK_EQ(left * 10 + 1, a, "data of the first receive");
    CHECK_MPI(MPI_Waitall(2, sreq, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Request_get_status_any(3, reqs, &index, &flag, &st[0]));
    CHECK(flag == 1 && index == MPI_UNDEFINED, "get_status_any of null requests: flag %d index %d", flag, index);
    CHECK_MPI(MPI_Request_get_status_some(3, reqs, &outcount, indices, st));
    CHECK_EQ(MPI_UNDEFINED, outcount, "get_status_some of null requests");
}

static void errors(void)
{
    int rc, x = 0;
    MPI_Request req;
    MPI_Status st;

    CHECK_MPI(MPI_Irecv(&x, 1, MPI_INT, left, 12, MPI_COMM_WORLD, &req));
    rc = MPI_Request_get_status(req, NULL, &st);
    tc_expect_class(rc, MPI_ERR_ARG, "get_status with a NULL flag");
    CHECK_MPI(MPI_Cancel(&req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    if (tc_is_tandem()) {
        int flag;
        rc = MPI_Request_get_status((MPI_Request)0x7777, &flag, &st);
        tc_expect_class(rc, MPI_ERR_REQUEST, "get_status of a garbage handle");
    }
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    left = (rank + nranks - 1) % nranks;
    right = (rank + 1) % nranks;

    inactive_and_null();
    posted_first();
    rendezvous_send();
    staged_receive();
    truncated();
    several();
    errors();
    return tc_finish(NAME);
}

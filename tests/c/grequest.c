/*
 * grequest.c - generalized requests and the small MPI-2/3 calls around
 * them: a request the program completes itself is tested, waited for (alone
 * and among point-to-point requests), cancelled and queried; its query
 * callback fills the status with MPI_Status_set_elements(_x) and
 * MPI_Status_set_cancelled, its free callback runs exactly once. Also
 * MPI_Is_thread_main, MPI_Type_size_x / _get_extent_x /
 * _get_true_extent_x, and MPI_Comm/Win_get_info and _set_info.
 */
#include "check.h"

#define NAME "grequest"

struct work {
    int elements;   /* what the query reports */
    int cancelled;  /* set by the cancel callback when not yet complete */
    int queries, frees, cancels;
    int query_rc;
};

static int query_fn(void *extra, MPI_Status *st)
{
    struct work *w = extra;
    w->queries++;
    CHECK_MPI(MPI_Status_set_elements(st, MPI_INT, w->elements));
    CHECK_MPI(MPI_Status_set_cancelled(st, w->cancelled));
    st->MPI_SOURCE = 3;
    st->MPI_TAG = 77;
    return w->query_rc;
}

static int free_fn(void *extra)
{
    ((struct work *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    struct work *w = extra;
    w->cancels++;
    if (!complete)
        w->cancelled = 1;
    return MPI_SUCCESS;
}

static void generalized(void)
{
    struct work w = {5, 0, 0, 0, 0, MPI_SUCCESS};
    MPI_Request r, both[2];
    MPI_Status st;
    int flag = -1, count = -1, rank = tc_rank(), size = tc_size(), got = -1, x = rank;

    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &r));
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK_EQ(0, flag, "MPI_Test before MPI_Grequest_complete");
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK_EQ(1, flag, "MPI_Request_get_status after MPI_Grequest_complete");
    CHECK_EQ(0, w.frees, "MPI_Request_get_status does not free");
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "MPI_Wait frees a completed generalized request");
    CHECK_EQ(1, w.frees, "free callback calls");
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(5, count, "count the query callback set");
    CHECK_EQ(3, st.MPI_SOURCE, "source the query callback set");
    CHECK_EQ(77, st.MPI_TAG, "tag the query callback set");
    MPI_Test_cancelled(&st, &flag);
    CHECK_EQ(0, flag, "not cancelled");

    /* Among a point-to-point receive: MPI_Waitall completes both. */
    w.elements = 2;
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &both[0]));
    CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, (rank + size - 1) % size, 9, MPI_COMM_WORLD, &both[1]));
    CHECK_MPI(MPI_Send(&x, 1, MPI_INT, (rank + 1) % size, 9, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Grequest_complete(both[0]));
    MPI_Status sts[2];
    CHECK_MPI(MPI_Waitall(2, both, sts));
    CHECK_EQ((rank + size - 1) % size, got, "the receive beside the generalized request");
    CHECK_MPI(MPI_Get_count(&sts[0], MPI_INT, &count));
    CHECK_EQ(2, count, "count of the generalized request in MPI_Waitall");
    CHECK_EQ(2, w.frees, "free callback calls after MPI_Waitall");

    /* Cancelled before completion. */
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &r));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_EQ(1, w.cancels, "cancel callback calls");
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Wait(&r, &st));
    MPI_Test_cancelled(&st, &flag);
    CHECK_EQ(1, flag, "cancelled, as the query callback said");
    CHECK_EQ(3, w.frees, "free callback calls after the cancelled one");

    /* A query callback that fails fails the wait. */
    w.query_rc = MPI_ERR_OTHER;
    w.cancelled = 0;
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &r));
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Wait(&r, &st), MPI_ERR_OTHER, "MPI_Wait whose query callback fails");
    CHECK_EQ(4, w.frees, "the free callback still runs");
    tc_expect_class(MPI_Grequest_complete(r), MPI_ERR_REQUEST, "MPI_Grequest_complete of a freed request");
    /* The wait fails with the callback's own code, and the status says it
     * too (MPI_Waitall: MPI_ERR_IN_STATUS). */
    w.query_rc = MPI_ERR_ARG;
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &r));
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_EQ(MPI_ERR_ARG, MPI_Wait(&r, &st), "MPI_Wait whose query callback fails with MPI_ERR_ARG");
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &both[0]));
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &w, &both[1]));
    CHECK_MPI(MPI_Grequest_complete(both[0]));
    CHECK_MPI(MPI_Grequest_complete(both[1]));
    {
        /* Both queries fail. */
        MPI_Status sts[2];
        int rc = MPI_Waitall(2, both, sts);
        CHECK_EQ(MPI_ERR_IN_STATUS, rc, "MPI_Waitall with failing query callbacks");
        CHECK_EQ(MPI_ERR_ARG, sts[0].MPI_ERROR, "status of a generalized request whose query failed");
        CHECK_EQ(MPI_ERR_ARG, sts[1].MPI_ERROR, "status of a generalized request whose query failed");
    }
    w.query_rc = MPI_SUCCESS;
    tc_expect_class(MPI_Grequest_start(query_fn, NULL, cancel_fn, &w, &r), MPI_ERR_ARG,
                    "MPI_Grequest_start without a free callback");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* mpi4py's generalized-request tests: a source the query callback sets to
 * MPI_ANY_SOURCE comes back as it is, and MPI_Cancel returns the error of a
 * cancel callback that fails. */
static int any_source_query(void *extra, MPI_Status *st)
{
    (void)extra;
    CHECK_MPI(MPI_Status_set_elements(st, MPI_BYTE, 0));
    CHECK_MPI(MPI_Status_set_cancelled(st, 0));
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    return MPI_SUCCESS;
}

static int failing_cancel(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_ERR_OTHER;
}

static void wildcard_status_and_failed_cancel(void)
{
    MPI_Request r;
    MPI_Status st;
    int rc, cls;
    struct work w = {0, 0, 0, 0, 0, MPI_SUCCESS};

    CHECK_MPI(MPI_Grequest_start(any_source_query, free_fn, failing_cancel, &w, &r));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rc = MPI_Cancel(&r);
    MPI_Error_class(rc, &cls);
    CHECK_EQ(MPI_ERR_OTHER, cls, "MPI_Cancel whose cancel callback failed");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK_EQ(MPI_ANY_SOURCE, st.MPI_SOURCE, "source the query callback set");
    CHECK_EQ(MPI_ANY_TAG, st.MPI_TAG, "tag the query callback set");
    CHECK_EQ(1, w.frees, "free callback runs once");
}

static void small_calls(void)
{
    int flag = -1, nkeys = -1;
    MPI_Count size = -1, lb = -1, extent = -1;
    MPI_Datatype t;
    MPI_Status st;
    MPI_Info info;
    MPI_Win win;
    int *mem;

    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK_EQ(1, flag, "MPI_Is_thread_main on the thread that called MPI_Init");

    CHECK_MPI(MPI_Type_create_resized(MPI_INT, -4, 12, &t));
    CHECK_MPI(MPI_Type_size_x(t, &size));
    CHECK_EQ(4, size, "MPI_Type_size_x");
    CHECK_MPI(MPI_Type_get_extent_x(t, &lb, &extent));
    CHECK_EQ(-4, lb, "MPI_Type_get_extent_x lb");
    CHECK_EQ(12, extent, "MPI_Type_get_extent_x extent");
    CHECK_MPI(MPI_Type_get_true_extent_x(t, &lb, &extent));
    CHECK_EQ(0, lb, "MPI_Type_get_true_extent_x lb");
    CHECK_EQ(4, extent, "MPI_Type_get_true_extent_x extent");
    CHECK_MPI(MPI_Type_free(&t));

    MPI_Count big = (MPI_Count)3 << 31, elements = -1;
    CHECK_MPI(MPI_Status_set_elements_x(&st, MPI_CHAR, big));
    CHECK_MPI(MPI_Get_elements_x(&st, MPI_CHAR, &elements));
    CHECK(elements == big, "MPI_Status_set_elements_x beyond 2^32 bytes round-trips");

    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "no_locks", "true"));
    CHECK_MPI(MPI_Comm_set_info(MPI_COMM_WORLD, info));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Comm_get_info(MPI_COMM_WORLD, &info));
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys >= 0, "MPI_Comm_get_info gives a usable info object");
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    CHECK_MPI(MPI_Win_set_info(win, MPI_INFO_NULL));
    CHECK_MPI(MPI_Win_get_info(win, &info));
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    generalized();
    wildcard_status_and_failed_cancel();
    small_calls();
    return tc_finish(NAME);
}

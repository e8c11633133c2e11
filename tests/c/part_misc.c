/*
 * part_misc.c - partitioned communication (MPI-4.0): MPI_Psend_init,
 * MPI_Precv_init, MPI_Pready, _range, _list, MPI_Parrived, with MPI_Start,
 * MPI_Startall, MPI_Wait, MPI_Test, MPI_Request_free.
 *
 *   1. a ring: each rank sends 4 partitions of 1000 ints to its right and
 *      receives from its left as 8 partitions of 500 (the standard lets the
 *      sides split differently), five rounds, the partitions marked in a
 *      different order and way each round (MPI_Pready backwards,
 *      _range, _list, ...); MPI_Parrived is polled until true, then the data
 *      is checked; statuses carry the application's tag and source;
 *      a round's data never shows before its last partition is ready
 *      (the receiver tests while the sender holds one partition back and
 *      waits in a barrier);
 *   2. a partitioned round through a derived datatype (every other int);
 *   3. a plain message with the same tag on the same communicator goes to
 *      the plain receive, the partitioned data to the partitioned one;
 *   4. MPI_PROC_NULL peers complete at once;
 *   6. two requests with the same peer and tag match in the order of their
 *      initialisations, though started and made ready in the other order;
 *   5. errors: MPI_Pready before MPI_Start, out of range, twice;
 *      MPI_ANY_SOURCE/MPI_ANY_TAG in MPI_Precv_init; MPI_Parrived on a send.
 */
#include "check.h"

#define NAME "part_misc"
#define N 4000

static int rank, size;

static void ring(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *sb = (int *)malloc(sizeof(int) * N), *rb = (int *)malloc(sizeof(int) * N);
    MPI_Request rq[2];
    MPI_Status st;
    int round, i, flag;
    CHECK_MPI(MPI_Psend_init(sb, 4, N / 4, MPI_INT, right, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    CHECK_MPI(MPI_Precv_init(rb, 8, N / 8, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    for (round = 0; round < 5; round++) {
        for (i = 0; i < N; i++) {
            sb[i] = rank * 1000000 + round * 10000 + i;
            rb[i] = -1;
        }
        if (round % 2)
            CHECK_MPI(MPI_Startall(2, rq));
        else {
            CHECK_MPI(MPI_Start(&rq[1]));
            CHECK_MPI(MPI_Start(&rq[0]));
        }
        switch (round) {
        case 0:
            for (i = 3; i >= 0; i--)
                CHECK_MPI(MPI_Pready(i, rq[0]));
            break;
        case 1:
            CHECK_MPI(MPI_Pready_range(0, 3, rq[0]));
            break;
        case 2: {
            int list[4] = {2, 0, 3, 1};
            CHECK_MPI(MPI_Pready_list(4, list, rq[0]));
            break;
        }
        case 3: {
            /* Hold partition 3 back across a barrier: nothing may arrive. */
            int list[2] = {1, 0};
            CHECK_MPI(MPI_Pready_list(2, list, rq[0]));
            CHECK_MPI(MPI_Pready(2, rq[0]));
            CHECK_MPI(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "a partitioned send completed with a partition not ready");
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Parrived(rq[1], 0, &flag));
            CHECK(!flag, "partition reported arrived before its sender made it ready");
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Pready(3, rq[0]));
            break;
        }
        default:
            CHECK_MPI(MPI_Pready_range(2, 3, rq[0]));
            CHECK_MPI(MPI_Pready_range(0, 1, rq[0]));
            break;
        }
        /* The receiver's last partition arrives in time. */
        {
            double t0 = tc_epoch();
            do {
                CHECK_MPI(MPI_Parrived(rq[1], 7, &flag));
                tc_deadline(t0, 20.0, "MPI_Parrived never reported partition 7");
            } while (!flag);
        }
        for (i = 0; i < N; i++)
            CHECK_EQ(left * 1000000 + round * 10000 + i, rb[i], "round %d element %d", round, i);
        CHECK_MPI(MPI_Wait(&rq[1], &st));
        CHECK_EQ(left, st.MPI_SOURCE, "source of a partitioned receive");
        CHECK_EQ(9, st.MPI_TAG, "tag of a partitioned receive");
        {
            int cnt = -1;
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
            CHECK_EQ(N, cnt, "count of a partitioned receive");
        }
        CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        CHECK(rq[0] != MPI_REQUEST_NULL && rq[1] != MPI_REQUEST_NULL, "partitioned requests stay valid");
        /* Inactive: its last round arrived. */
        CHECK_MPI(MPI_Parrived(rq[1], 0, &flag));
        CHECK(flag, "MPI_Parrived on an inactive request");
    }
    CHECK_MPI(MPI_Request_free(&rq[0]));
    CHECK_MPI(MPI_Request_free(&rq[1]));
    CHECK(rq[0] == MPI_REQUEST_NULL, "MPI_Request_free");
    free(sb);
    free(rb);
}

static void derived(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int sb[40], rb[40], i;
    MPI_Datatype every_other;
    MPI_Request rq[2];
    CHECK_MPI(MPI_Type_vector(5, 1, 2, MPI_INT, &every_other));
    CHECK_MPI(MPI_Type_commit(&every_other));
    for (i = 0; i < 40; i++) {
        sb[i] = rank * 100 + i;
        rb[i] = -1;
    }
    /* 2 partitions of 2 vectors (5 ints each, stride 2), received as one of 4 */
    CHECK_MPI(MPI_Psend_init(sb, 2, 2, every_other, right, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    CHECK_MPI(MPI_Precv_init(rb, 1, 4, every_other, left, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    CHECK_MPI(MPI_Startall(2, rq));
    CHECK_MPI(MPI_Pready(1, rq[0]));
    CHECK_MPI(MPI_Pready(0, rq[0]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    {
        /* Vector k (extent 9 ints) holds ints 9k, 9k+2, ..., 9k+8. */
        int want[40], k, j;
        for (i = 0; i < 40; i++)
            want[i] = -1;
        for (k = 0; k < 4; k++)
            for (j = 0; j < 5; j++)
                want[9 * k + 2 * j] = left * 100 + 9 * k + 2 * j;
        for (i = 0; i < 40; i++)
            CHECK_EQ(want[i], rb[i], "derived datatype element %d", i);
    }
    CHECK_MPI(MPI_Request_free(&rq[0]));
    CHECK_MPI(MPI_Request_free(&rq[1]));
    CHECK_MPI(MPI_Type_free(&every_other));
}

static void apart_from_plain(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int plain_out = 1000 + rank, plain_in = -1, part_out[4], part_in[4], i;
    MPI_Request plain, rq[2];
    for (i = 0; i < 4; i++) {
        part_out[i] = 2000 + rank * 10 + i;
        part_in[i] = -1;
    }
    CHECK_MPI(MPI_Precv_init(part_in, 2, 2, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]));
    CHECK_MPI(MPI_Start(&rq[1]));
    /* A plain receive with the same source and tag, posted after. */
    CHECK_MPI(MPI_Irecv(&plain_in, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &plain));
    CHECK_MPI(MPI_Psend_init(part_out, 2, 2, MPI_INT, right, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]));
    CHECK_MPI(MPI_Start(&rq[0]));
    CHECK_MPI(MPI_Send(&plain_out, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Pready_range(0, 1, rq[0]));
    CHECK_MPI(MPI_Wait(&plain, MPI_STATUS_IGNORE));
    CHECK_EQ(1000 + left, plain_in, "the plain receive got the plain message");
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    for (i = 0; i < 4; i++)
        CHECK_EQ(2000 + left * 10 + i, part_in[i], "partitioned element %d", i);
    CHECK_MPI(MPI_Request_free(&rq[0]));
    CHECK_MPI(MPI_Request_free(&rq[1]));
}

static void proc_null_and_errors(void)
{
    int buf[8], rc, flag = 0, list[2] = {0, 0};
    MPI_Request s, r;
    MPI_Status st;
    CHECK_MPI(MPI_Psend_init(buf, 2, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_MPI(MPI_Precv_init(buf, 2, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rc = MPI_Pready(0, s);
    tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Pready before MPI_Start");
    CHECK_MPI(MPI_Start(&s));
    CHECK_MPI(MPI_Start(&r));
    rc = MPI_Pready(2, s);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Pready of partition 2 of 2");
    rc = MPI_Pready(-1, s);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Pready of partition -1");
    CHECK_MPI(MPI_Pready(0, s));
    rc = MPI_Pready(0, s);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Pready twice");
    rc = MPI_Pready_list(2, list, s);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Pready_list of a ready partition");
    rc = MPI_Parrived(s, 0, &flag);
    tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Parrived on a partitioned send");
    rc = MPI_Pready(0, r);
    tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Pready on a partitioned receive");
    /* Freeing or cancelling an active partitioned request is erroneous:
     * refused, and the request stays as it was. */
    {
        MPI_Request keep = s;
        rc = MPI_Cancel(&s);
        tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Cancel of an active partitioned send");
        rc = MPI_Request_free(&r);
        tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Request_free of an active partitioned receive");
        CHECK(s == keep && r != MPI_REQUEST_NULL, "a refused free or cancel left the handles");
    }
    CHECK_MPI(MPI_Pready(1, s));
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK_EQ(MPI_PROC_NULL, st.MPI_SOURCE, "source of a receive from MPI_PROC_NULL");
    /* Inactive now: both may go; MPI_Parrived on a null request is true. */
    CHECK_MPI(MPI_Request_free(&s));
    CHECK_MPI(MPI_Request_free(&r));
    flag = 0;
    CHECK_MPI(MPI_Parrived(MPI_REQUEST_NULL, 0, &flag));
    CHECK(flag, "MPI_Parrived on MPI_REQUEST_NULL");
    rc = MPI_Precv_init(buf, 2, 4, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Precv_init from MPI_ANY_SOURCE");
    rc = MPI_Precv_init(buf, 2, 4, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    tc_expect_class(rc, MPI_ERR_TAG, "MPI_Precv_init with MPI_ANY_TAG");
    rc = MPI_Psend_init(buf, 0, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Psend_init with 0 partitions");
    rc = MPI_Psend_init(buf, 2, 4, MPI_INT, size, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Psend_init to rank size");
    rc = MPI_Psend_init(buf, 2, -1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &s);
    tc_expect_class(rc, MPI_ERR_COUNT, "MPI_Psend_init with a negative count");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void init_order(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int a[3] = {1, 1, 1}, b[3] = {2, 2, 2}, x[3] = {0, 0, 0}, y[3] = {0, 0, 0};
    MPI_Request s[2], r[2];
    CHECK_MPI(MPI_Psend_init(a, 1, 3, MPI_INT, right, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &s[0]));
    CHECK_MPI(MPI_Psend_init(b, 1, 3, MPI_INT, right, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &s[1]));
    CHECK_MPI(MPI_Precv_init(x, 3, 1, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    CHECK_MPI(MPI_Precv_init(y, 3, 1, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    /* Receives started in order, sends the other way round and b made ready
     * (sent) first: matching by starts would give b to x. */
    CHECK_MPI(MPI_Start(&r[0]));
    CHECK_MPI(MPI_Start(&r[1]));
    CHECK_MPI(MPI_Start(&s[1]));
    CHECK_MPI(MPI_Start(&s[0]));
    CHECK_MPI(MPI_Pready(0, s[1]));
    CHECK_MPI(MPI_Pready(0, s[0]));
    CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
    CHECK(x[0] == 1 && x[2] == 1, "first receive initialised got %d, not the first send's 1", x[0]);
    CHECK(y[0] == 2 && y[2] == 2, "second receive initialised got %d, not the second send's 2", y[0]);
    CHECK_MPI(MPI_Request_free(&s[0]));
    CHECK_MPI(MPI_Request_free(&s[1]));
    CHECK_MPI(MPI_Request_free(&r[0]));
    CHECK_MPI(MPI_Request_free(&r[1]));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ring();
    derived();
    apart_from_plain();
    proc_null_and_errors();
    init_order();
    return tc_finish(NAME);
}

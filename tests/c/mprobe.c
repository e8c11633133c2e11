/*
 * mprobe.c - matched probe and receive: MPI_Mprobe, MPI_Improbe, MPI_Mrecv,
 * MPI_Imrecv.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). In each pair (0,1), (2,3)
 * the even rank sends and the odd rank probes and receives; the last rank of
 * an odd-sized job only does the checks on itself (sections 5-7).
 *
 *   1. before anything is sent, MPI_Improbe gives flag 0 and leaves the
 *      message handle alone;
 *   2. messages of 0, 17, 65536, 65537 and 2 MiB bytes (eager and
 *      rendezvous), tags 10, 11, ...; the receiver takes each with
 *      MPI_Mprobe (specific, then wildcard source and tag) or an MPI_Improbe
 *      loop; the status gives source, tag and size; MPI_Iprobe then no longer
 *      sees the message (it left matching); MPI_Mrecv or MPI_Imrecv + MPI_Wait
 *      receives it intact, with the same status (its error field left
 *      alone), and sets the handle to MPI_MESSAGE_NULL;
 *   3. a matched message is out of matching: two messages with one tag (keys
 *      1 and 2, small and large); the first is mprobed, an MPI_Recv of that
 *      tag then gets the second, and MPI_Mrecv the first;
 *   4. MPI_Mrecv into a buffer too small gives MPI_ERR_TRUNCATE, fills the
 *      buffer and leaves the bytes after it alone; MPI_Mrecv with a strided
 *      datatype (MPI_Type_vector) scatters the data;
 *   5. MPI_PROC_NULL: MPI_Mprobe and MPI_Improbe (flag 1) give
 *      MPI_MESSAGE_NO_PROC and a status with source MPI_PROC_NULL, tag
 *      MPI_ANY_TAG, count 0; MPI_Mrecv and MPI_Imrecv of it give that status
 *      and MPI_MESSAGE_NULL;
 *   6. messages to self (standard and synchronous) are mprobed and received;
 *   7. errors (MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF): MPI_Mrecv of MPI_MESSAGE_NULL or of a
 *      handle already received -> MPI_ERR_REQUEST; MPI_Mprobe with a bad
 *      rank -> MPI_ERR_RANK, a bad tag -> MPI_ERR_TAG; a NULL message
 *      pointer -> MPI_ERR_ARG.
 */
#include "check.h"

#define NAME "mprobe"

static const int sizes[] = {0, 17, 65536, 65537, 2 * 1024 * 1024};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Section 2, receiving side: message k of sizes[k] bytes with tag 10 + k. */
static void receive_one(int k, int src)
{
    int n = sizes[k], tag = 10 + k, flag = 0, way = k % 4;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st, st2;
    unsigned char *buf = tc_alloc((size_t)n);
    char what[96];
    double t0 = MPI_Wtime();

    snprintf(what, sizeof what, "message %d (%d bytes, way %d)", k, n, way);
    switch (way) {
    case 0:
        CHECK_MPI(MPI_Mprobe(src, tag, MPI_COMM_WORLD, &msg, &st));
        break;
    case 1:
        CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st));
        break;
    default:
        while (!flag) {
            CHECK_MPI(MPI_Improbe(way == 2 ? src : MPI_ANY_SOURCE, way == 2 ? tag : MPI_ANY_TAG, MPI_COMM_WORLD,
                                  &flag, &msg, &st));
            tc_deadline(t0, 30, what);
        }
        break;
    }
    CHECK(msg != MPI_MESSAGE_NULL && msg != MPI_MESSAGE_NO_PROC, "%s: a message handle", what);
    tc_check_status(&st, src, tag, n, what);

    /* The message left matching: a plain probe no longer sees it. */
    CHECK_MPI(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(0, flag, "%s: MPI_Iprobe after the matched probe", what);

    tc_prepare_recv(buf, (size_t)n, src, k);
    /* Calls completing one operation leave the error field alone. */
    st2.MPI_ERROR = MPI_ERR_DIMS;
    if (k % 2 == 0) {
        CHECK_MPI(MPI_Mrecv(buf, n, MPI_BYTE, &msg, &st2));
    } else {
        MPI_Request req = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Imrecv(buf, n, MPI_BYTE, &msg, &req));
        CHECK(req != MPI_REQUEST_NULL, "%s: MPI_Imrecv gives a request", what);
        CHECK(msg == MPI_MESSAGE_NULL, "%s: MPI_Imrecv sets the handle to MPI_MESSAGE_NULL", what);
        CHECK_MPI(MPI_Wait(&req, &st2));
    }
    CHECK(msg == MPI_MESSAGE_NULL, "%s: the handle is MPI_MESSAGE_NULL after the receive", what);
    tc_check_status(&st2, src, tag, n, what);
    CHECK_EQ(MPI_ERR_DIMS, st2.MPI_ERROR, "%s: the status's error field after the receive", what);
    tc_check_recv(buf, (size_t)n, src, k, what);
    free(buf);
}

/* Section 3, receiving side. */
static void matched_leaves_matching(int src, int n, int tag)
{
    MPI_Message msg;
    MPI_Status st;
    unsigned char *first = tc_alloc((size_t)n), *second = tc_alloc((size_t)n);

    CHECK_MPI(MPI_Mprobe(src, tag, MPI_COMM_WORLD, &msg, &st));
    tc_check_status(&st, src, tag, n, "section 3: the mprobe");
    tc_prepare_recv(second, (size_t)n, src, 2);
    CHECK_MPI(MPI_Recv(second, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &st));
    tc_check_recv(second, (size_t)n, src, 2, "section 3: MPI_Recv after the mprobe gets the second message");
    tc_prepare_recv(first, (size_t)n, src, 1);
    CHECK_MPI(MPI_Mrecv(first, n, MPI_BYTE, &msg, &st));
    tc_check_status(&st, src, tag, n, "section 3: the mrecv");
    tc_check_recv(first, (size_t)n, src, 1, "section 3: MPI_Mrecv gets the first message");
    free(first);
    free(second);
}

/* Section 4, receiving side: truncation, then a strided datatype. */
static void truncate_and_vector(int src)
{
    MPI_Message msg;
    MPI_Status st;
    MPI_Datatype vec;
    unsigned char *buf = tc_alloc(100);
    int ints[64], i, rc, count = -1;

    CHECK_MPI(MPI_Mprobe(src, 30, MPI_COMM_WORLD, &msg, &st));
    tc_check_status(&st, src, 30, 300, "section 4: mprobe of 300 bytes");
    tc_prepare_recv(buf, 100, src, 30);
    rc = MPI_Mrecv(buf, 100, MPI_BYTE, &msg, &st);
    tc_expect_class(rc, MPI_ERR_TRUNCATE, "MPI_Mrecv of 300 bytes into 100");
    CHECK(msg == MPI_MESSAGE_NULL, "a truncated MPI_Mrecv still consumes the message");
    tc_check_recv(buf, 100, src, 30, "section 4: truncated MPI_Mrecv");

    /* 16 ints land at every other int of `ints`. */
    CHECK_MPI(MPI_Type_vector(16, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    for (i = 0; i < 64; i++)
        ints[i] = -1;
    CHECK_MPI(MPI_Mprobe(src, 31, MPI_COMM_WORLD, &msg, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(16, count, "section 4: ints in the probed message");
    CHECK_MPI(MPI_Mrecv(ints, 1, vec, &msg, &st));
    for (i = 0; i < 32; i++)
        CHECK_EQ(i % 2 == 0 ? 1000 + i / 2 : -1, ints[i], "section 4: ints[%d] after the strided MPI_Mrecv", i);
    CHECK_EQ(-1, ints[32], "section 4: ints[32] past the strided datatype");
    CHECK_MPI(MPI_Type_free(&vec));
    free(buf);
}

static void check_proc_null_status(const MPI_Status *st, const char *what)
{
    int count = -1;
    CHECK_EQ(MPI_PROC_NULL, st->MPI_SOURCE, "%s: status.MPI_SOURCE", what);
    CHECK_EQ(MPI_ANY_TAG, st->MPI_TAG, "%s: status.MPI_TAG", what);
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK_EQ(0, count, "%s: count", what);
}

/* Section 5. */
static void proc_null(void)
{
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Request req;
    MPI_Status st;
    int flag = 0, x = 7;

    CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NO_PROC, "MPI_Mprobe(MPI_PROC_NULL) gives MPI_MESSAGE_NO_PROC");
    check_proc_null_status(&st, "MPI_Mprobe(MPI_PROC_NULL)");
    CHECK_MPI(MPI_Mrecv(&x, 1, MPI_INT, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NULL, "MPI_Mrecv(MPI_MESSAGE_NO_PROC) sets MPI_MESSAGE_NULL");
    check_proc_null_status(&st, "MPI_Mrecv(MPI_MESSAGE_NO_PROC)");
    CHECK_EQ(7, x, "MPI_Mrecv(MPI_MESSAGE_NO_PROC) leaves the buffer alone");

    msg = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
    CHECK_EQ(1, flag, "MPI_Improbe(MPI_PROC_NULL): flag");
    CHECK(msg == MPI_MESSAGE_NO_PROC, "MPI_Improbe(MPI_PROC_NULL) gives MPI_MESSAGE_NO_PROC");
    check_proc_null_status(&st, "MPI_Improbe(MPI_PROC_NULL)");
    CHECK_MPI(MPI_Imrecv(&x, 1, MPI_INT, &msg, &req));
    CHECK(msg == MPI_MESSAGE_NULL, "MPI_Imrecv(MPI_MESSAGE_NO_PROC) sets MPI_MESSAGE_NULL");
    CHECK_MPI(MPI_Wait(&req, &st));
    check_proc_null_status(&st, "MPI_Imrecv(MPI_MESSAGE_NO_PROC)");
}

/* Section 6. */
static void self_messages(int rank)
{
    MPI_Message msg;
    MPI_Request sreq;
    MPI_Status st;
    unsigned char *buf = tc_alloc(70000), *out = tc_alloc(70000);
    int mode;

    for (mode = 0; mode < 2; mode++) {
        int n = mode == 0 ? 40 : 70000, key = 50 + mode;
        tc_fill(out, (size_t)n, rank, key);
        if (mode == 0)
            CHECK_MPI(MPI_Isend(out, n, MPI_BYTE, rank, key, MPI_COMM_WORLD, &sreq));
        else
            CHECK_MPI(MPI_Issend(out, n, MPI_BYTE, rank, key, MPI_COMM_WORLD, &sreq));
        CHECK_MPI(MPI_Mprobe(rank, key, MPI_COMM_WORLD, &msg, &st));
        tc_check_status(&st, rank, key, n, "mprobe of a message to self");
        tc_prepare_recv(buf, (size_t)n, rank, key);
        CHECK_MPI(MPI_Mrecv(buf, n, MPI_BYTE, &msg, &st));
        tc_check_status(&st, rank, key, n, "mrecv of a message to self");
        tc_check_recv(buf, (size_t)n, rank, key, "mrecv of a message to self");
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    }
    free(buf);
    free(out);
}

/* Section 7. */
static void errors(int rank, int nranks)
{
    MPI_Message msg = MPI_MESSAGE_NULL, old;
    MPI_Request sreq;
    MPI_Status st;
    int rc, x = 0, flag;

    rc = MPI_Mrecv(&x, 1, MPI_INT, &msg, &st);
    tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Mrecv(MPI_MESSAGE_NULL)");
    rc = MPI_Imrecv(&x, 1, MPI_INT, &msg, &sreq);
    tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Imrecv(MPI_MESSAGE_NULL)");
    rc = MPI_Mprobe(nranks, 0, MPI_COMM_WORLD, &msg, &st);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Mprobe(size)");
    rc = MPI_Improbe(-7, 0, MPI_COMM_WORLD, &flag, &msg, &st);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Improbe(-7)");
    rc = MPI_Mprobe(rank, -5, MPI_COMM_WORLD, &msg, &st);
    tc_expect_class(rc, MPI_ERR_TAG, "MPI_Mprobe(tag -5)");
    rc = MPI_Mprobe(rank, 0, MPI_COMM_NULL, &msg, &st);
    tc_expect_class(rc, MPI_ERR_COMM, "MPI_Mprobe(MPI_COMM_NULL)");
    if (tc_is_tandem()) {
        rc = MPI_Mprobe(rank, 0, MPI_COMM_WORLD, NULL, &st);
        tc_expect_class(rc, MPI_ERR_ARG, "MPI_Mprobe(NULL message)");
        rc = MPI_Mrecv(&x, 1, MPI_INT, NULL, &st);
        tc_expect_class(rc, MPI_ERR_ARG, "MPI_Mrecv(NULL message)");
    }

    /* A handle received already names nothing. */
    x = 99;
    CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, rank, 60, MPI_COMM_WORLD, &sreq));
    CHECK_MPI(MPI_Mprobe(rank, 60, MPI_COMM_WORLD, &msg, &st));
    old = msg;
    /* A bad buffer is reported and leaves the message to a corrected call. */
    rc = MPI_Mrecv(NULL, 1, MPI_INT, &msg, &st);
    tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Mrecv into a NULL buffer");
    CHECK(msg == old, "a failed argument check leaves the message handle");
    x = 0;
    CHECK_MPI(MPI_Mrecv(&x, 1, MPI_INT, &msg, &st));
    CHECK_EQ(99, x, "MPI_Mrecv of a message to self after a failed call");
    CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    if (tc_is_tandem()) {
        rc = MPI_Mrecv(&x, 1, MPI_INT, &old, &st);
        tc_expect_class(rc, MPI_ERR_REQUEST, "MPI_Mrecv of a handle received already");
    }
}

int main(int argc, char **argv)
{
    int rank, nranks, partner, k, flag = -1;
    MPI_Message msg;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* Errors on MPI_COMM_NULL go to MPI_COMM_SELF's handler. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    partner = tc_partner(rank, nranks);

    /* 1. Nothing has been sent yet. */
    msg = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, MPI_STATUS_IGNORE));
    CHECK_EQ(0, flag, "MPI_Improbe before anything was sent: flag");
    CHECK(msg == MPI_MESSAGE_NULL, "MPI_Improbe without a match leaves the handle alone");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (partner >= 0 && rank % 2 == 0) {
        unsigned char *out = tc_alloc(2 * 1024 * 1024);
        int ints[16], i;
        /* 2. */
        for (k = 0; k < NSIZES; k++) {
            tc_fill(out, (size_t)sizes[k], rank, k);
            CHECK_MPI(MPI_Send(out, sizes[k], MPI_BYTE, partner, 10 + k, MPI_COMM_WORLD));
        }
        /* 3: eager, then rendezvous; the receiver acknowledges each round. */
        for (k = 0; k < 2; k++) {
            int n = k == 0 ? 100 : 200000;
            MPI_Request r[2];
            unsigned char *second = tc_alloc((size_t)n);
            tc_fill(out, (size_t)n, rank, 1);
            tc_fill(second, (size_t)n, rank, 2);
            CHECK_MPI(MPI_Isend(out, n, MPI_BYTE, partner, 20 + k, MPI_COMM_WORLD, &r[0]));
            CHECK_MPI(MPI_Isend(second, n, MPI_BYTE, partner, 20 + k, MPI_COMM_WORLD, &r[1]));
            CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
            free(second);
        }
        /* 4. */
        tc_fill(out, 300, rank, 30);
        CHECK_MPI(MPI_Send(out, 300, MPI_BYTE, partner, 30, MPI_COMM_WORLD));
        for (i = 0; i < 16; i++)
            ints[i] = 1000 + i;
        CHECK_MPI(MPI_Send(ints, 16, MPI_INT, partner, 31, MPI_COMM_WORLD));
        free(out);
    } else if (partner >= 0) {
        for (k = 0; k < NSIZES; k++)
            receive_one(k, partner);
        matched_leaves_matching(partner, 100, 20);
        matched_leaves_matching(partner, 200000, 21);
        truncate_and_vector(partner);
    }

    proc_null();
    self_messages(rank);
    errors(rank, nranks);
    return tc_finish(NAME);
}

/*
 * many_requests.c - many outstanding non-blocking operations and every way of
 * completing them.
 *
 * Ranks: needs 1 (then only messages to self); pairs (0,1), (2,3) also talk to
 * each other; the last rank of an odd-sized job only talks to itself.
 *
 *   1. 1000 MPI_Irecv + 1000 MPI_Isend with the partner and 1000 + 1000 with
 *      self outstanding at once (tags j % 7, mostly small messages, every 97th
 *      above 64 KiB), completed by one MPI_Waitall;
 *   2. rounds of 100 + 100 completed by MPI_Testall loops, MPI_Waitany,
 *      MPI_Waitsome and MPI_Testany, each index reported exactly once, the
 *      completed requests set to MPI_REQUEST_NULL, and MPI_UNDEFINED (index or
 *      outcount) once nothing is active;
 *   3. MPI_REQUEST_NULL: MPI_Wait and MPI_Test return at once with an empty
 *      status (MPI_ANY_SOURCE, MPI_ANY_TAG, count 0); MPI_Waitall, MPI_Testall,
 *      MPI_Waitany, MPI_Testany and MPI_Waitsome on arrays of null requests;
 *   4. MPI_Request_free on active send requests (eager and rendezvous, to the
 *      partner and to self): the messages still arrive;
 *   5. MPI_Cancel on unmatched receives (specific and ANY_SOURCE), then
 *      MPI_Wait and MPI_Test_cancelled gives true; a received status gives false.
 */
#include "check.h"

#define NAME "many_requests"
#define N1 1000
#define N2 100

struct op {
    int is_recv, peer, tag, size, key;
    unsigned char *buf;
};

static int rank, nranks, partner;
static MPI_Request *reqs;
static MPI_Status *sts;
static struct op *ops;
static char *done;
static int nops;

static int msg_size(int j) { return j % 97 == 0 ? 70000 + j : 1 + j % 64; }

static void add_op(int is_recv, int peer, int tag, int size, int key)
{
    struct op *o = &ops[nops];
    o->is_recv = is_recv;
    o->peer = peer;
    o->tag = tag;
    o->size = size;
    o->key = key;
    o->buf = tc_alloc((size_t)size);
    if (is_recv) {
        /* the message comes from peer, keyed with the sender's key */
        tc_prepare_recv(o->buf, size, peer, key);
        CHECK_MPI(MPI_Irecv(o->buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[nops]));
    } else {
        tc_fill(o->buf, size, rank, key);
        CHECK_MPI(MPI_Isend(o->buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[nops]));
    }
    CHECK(reqs[nops] != MPI_REQUEST_NULL, "MPI_I%s returned MPI_REQUEST_NULL", is_recv ? "recv" : "send");
    nops++;
}

/* Starts n messages each way with the partner (if any) and with self, the
 * keys starting at base; interleaves sends and receives. */
static void start_round(int n, int base)
{
    int j;
    nops = 0;
    for (j = 0; j < n; j++) {
        int size = msg_size(j), tag = j % 7, key = base + j;
        if (partner >= 0) {
            add_op(1, partner, tag, size, key);
            add_op(0, partner, tag, size, key);
        }
        add_op(0, rank, tag, size, key + 500000); /* to self: sent before its receive is posted */
        add_op(1, rank, tag, size, key + 500000);
    }
    memset(done, 0, (size_t)nops);
}

/* Checks operation i, completed with status st (NULL: status not available). */
static void complete_op(int i, const MPI_Status *st, const char *how)
{
    struct op *o = &ops[i];
    char what[160];
    CHECK(i >= 0 && i < nops, "%s: index %d out of range 0..%d", how, i, nops - 1);
    CHECK(!done[i], "%s: index %d reported complete twice", how, i);
    CHECK(reqs[i] == MPI_REQUEST_NULL, "%s: completed request %d not set to MPI_REQUEST_NULL", how, i);
    done[i] = 1;
    if (o->is_recv) {
        snprintf(what, sizeof what, "%s: receive %d (%d bytes from rank %d, tag %d)", how, i, o->size, o->peer,
                 o->tag);
        if (st)
            tc_check_status(st, o->peer, o->tag, o->size, what);
        tc_check_recv(o->buf, o->size, o->peer, o->key, what);
    }
}

static void end_round(const char *how)
{
    int i;
    for (i = 0; i < nops; i++) {
        CHECK(done[i], "%s: operation %d never reported complete", how, i);
        free(ops[i].buf);
    }
}

static void round_waitall(void)
{
    int i;
    start_round(N1, 0);
    CHECK_MPI(MPI_Waitall(nops, reqs, sts));
    for (i = 0; i < nops; i++)
        complete_op(i, &sts[i], "MPI_Waitall of all requests");
    end_round("MPI_Waitall");
}

static void round_testall(void)
{
    int i, flag = 0;
    double t0 = MPI_Wtime();
    start_round(N2, 10000);
    while (!flag) {
        CHECK_MPI(MPI_Testall(nops, reqs, &flag, sts));
        if (!flag) {
            /* "no request is modified" while flag is false */
            for (i = 0; i < nops; i++)
                CHECK(reqs[i] != MPI_REQUEST_NULL, "MPI_Testall returned flag 0 but freed request %d", i);
            tc_deadline(t0, 30, "MPI_Testall loop");
        }
    }
    for (i = 0; i < nops; i++)
        complete_op(i, &sts[i], "MPI_Testall");
    end_round("MPI_Testall");
}

static void round_waitany(void)
{
    int k, idx = -5;
    MPI_Status st;
    start_round(N2, 20000);
    for (k = 0; k < nops; k++) {
        CHECK_MPI(MPI_Waitany(nops, reqs, &idx, &st));
        CHECK(idx != MPI_UNDEFINED, "MPI_Waitany returned MPI_UNDEFINED with %d requests still active", nops - k);
        complete_op(idx, &st, "MPI_Waitany");
    }
    CHECK_MPI(MPI_Waitany(nops, reqs, &idx, &st));
    CHECK_EQ(MPI_UNDEFINED, idx, "MPI_Waitany with no active request: index");
    end_round("MPI_Waitany");
}

static void round_waitsome(void)
{
    int k, left, outcount = -5, *idx = malloc(sizeof(int) * (size_t)(4 * N2));
    CHECK(idx != NULL, "malloc");
    start_round(N2, 30000);
    for (left = nops; left > 0; left -= outcount) {
        CHECK_MPI(MPI_Waitsome(nops, reqs, &outcount, idx, sts));
        CHECK(outcount >= 1 && outcount <= left, "MPI_Waitsome: outcount %d with %d requests active", outcount, left);
        for (k = 0; k < outcount; k++)
            complete_op(idx[k], &sts[k], "MPI_Waitsome");
    }
    CHECK_MPI(MPI_Waitsome(nops, reqs, &outcount, idx, sts));
    CHECK_EQ(MPI_UNDEFINED, outcount, "MPI_Waitsome with no active request: outcount");
    end_round("MPI_Waitsome");
    free(idx);
}

static void round_testany(void)
{
    int left, flag, idx;
    MPI_Status st;
    double t0 = MPI_Wtime();
    start_round(N2, 40000);
    for (left = nops; left > 0;) {
        flag = -1;
        idx = -5;
        CHECK_MPI(MPI_Testany(nops, reqs, &idx, &flag, &st));
        CHECK(flag == 0 || flag == 1, "MPI_Testany: flag %d", flag);
        if (flag) {
            CHECK(idx != MPI_UNDEFINED, "MPI_Testany: flag 1 and MPI_UNDEFINED with %d requests active", left);
            complete_op(idx, &st, "MPI_Testany");
            left--;
        } else {
            CHECK_EQ(MPI_UNDEFINED, idx, "MPI_Testany with flag 0: index");
            tc_deadline(t0, 30, "MPI_Testany loop");
        }
    }
    flag = -1;
    CHECK_MPI(MPI_Testany(nops, reqs, &idx, &flag, &st));
    CHECK_EQ(1, flag, "MPI_Testany with no active request: flag");
    CHECK_EQ(MPI_UNDEFINED, idx, "MPI_Testany with no active request: index");
    end_round("MPI_Testany");
}

static void check_empty(const MPI_Status *st, const char *what)
{
    int count = -1;
    CHECK_EQ(MPI_ANY_SOURCE, st->MPI_SOURCE, "%s: empty status MPI_SOURCE", what);
    CHECK_EQ(MPI_ANY_TAG, st->MPI_TAG, "%s: empty status MPI_TAG", what);
    CHECK_MPI(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK_EQ(0, count, "%s: MPI_Get_count of the empty status", what);
}

static void null_requests(void)
{
    MPI_Request r = MPI_REQUEST_NULL, arr[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st, sts3[3];
    int flag, idx, outcount, indices[3];
    double t0 = MPI_Wtime();

    memset(&st, 0x7b, sizeof st);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "MPI_Wait changed MPI_REQUEST_NULL");
    check_empty(&st, "MPI_Wait(MPI_REQUEST_NULL)");
    CHECK(MPI_Wtime() - t0 < 5, "MPI_Wait(MPI_REQUEST_NULL) did not return at once");

    memset(&st, 0x7b, sizeof st);
    flag = -1;
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK_EQ(1, flag, "MPI_Test(MPI_REQUEST_NULL): flag");
    check_empty(&st, "MPI_Test(MPI_REQUEST_NULL)");

    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    memset(sts3, 0x7b, sizeof sts3);
    CHECK_MPI(MPI_Waitall(3, arr, sts3));
    check_empty(&sts3[0], "MPI_Waitall of null requests");
    check_empty(&sts3[2], "MPI_Waitall of null requests");
    flag = -1;
    CHECK_MPI(MPI_Testall(3, arr, &flag, sts3));
    CHECK_EQ(1, flag, "MPI_Testall of null requests: flag");
    idx = -5;
    CHECK_MPI(MPI_Waitany(3, arr, &idx, &st));
    CHECK_EQ(MPI_UNDEFINED, idx, "MPI_Waitany of null requests: index");
    flag = -1;
    idx = -5;
    CHECK_MPI(MPI_Testany(3, arr, &idx, &flag, &st));
    CHECK_EQ(1, flag, "MPI_Testany of null requests: flag");
    CHECK_EQ(MPI_UNDEFINED, idx, "MPI_Testany of null requests: index");
    outcount = -5;
    CHECK_MPI(MPI_Waitsome(3, arr, &outcount, indices, sts3));
    CHECK_EQ(MPI_UNDEFINED, outcount, "MPI_Waitsome of null requests: outcount");
    /* zero-length arrays */
    CHECK_MPI(MPI_Waitall(0, arr, sts3));
    flag = -1;
    CHECK_MPI(MPI_Testall(0, arr, &flag, sts3));
    CHECK_EQ(1, flag, "MPI_Testall of 0 requests: flag");
}

static void freed_sends(void)
{
    /* kept until the end of the program: a freed send may still be reading them */
    static unsigned char *keep[4];
    const int sizes[2] = {100, 200 * 1024};
    int k;
    for (k = 0; k < 2; k++) {
        MPI_Request r;
        int peer = k == 0 ? rank : partner;
        MPI_Status st;
        unsigned char *rb;
        if (peer < 0)
            continue;
        keep[2 * k] = tc_alloc((size_t)sizes[0]);
        keep[2 * k + 1] = tc_alloc((size_t)sizes[1]);
        tc_fill(keep[2 * k], sizes[0], rank, 600 + k);
        tc_fill(keep[2 * k + 1], sizes[1], rank, 700 + k);
        CHECK_MPI(MPI_Isend(keep[2 * k], sizes[0], MPI_BYTE, peer, 600, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL, "MPI_Request_free did not set the request to MPI_REQUEST_NULL");
        CHECK_MPI(MPI_Isend(keep[2 * k + 1], sizes[1], MPI_BYTE, peer, 601, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(r == MPI_REQUEST_NULL, "MPI_Request_free did not set the request to MPI_REQUEST_NULL");

        rb = tc_alloc((size_t)sizes[1]);
        tc_prepare_recv(rb, sizes[1], peer, 700 + k);
        CHECK_MPI(MPI_Recv(rb, sizes[1], MPI_BYTE, peer, 601, MPI_COMM_WORLD, &st));
        tc_check_status(&st, peer, 601, sizes[1], "message of a freed rendezvous send request");
        tc_check_recv(rb, sizes[1], peer, 700 + k, "message of a freed rendezvous send request");
        tc_prepare_recv(rb, sizes[0], peer, 600 + k);
        CHECK_MPI(MPI_Recv(rb, sizes[0], MPI_BYTE, peer, 600, MPI_COMM_WORLD, &st));
        tc_check_status(&st, peer, 600, sizes[0], "message of a freed eager send request");
        tc_check_recv(rb, sizes[0], peer, 600 + k, "message of a freed eager send request");
        free(rb);
    }
}

static void cancelled_recvs(void)
{
    int k, flag;
    unsigned char buf[16];
    MPI_Status st;
    for (k = 0; k < 3; k++) {
        MPI_Request r;
        int src = k == 0 ? rank : k == 1 ? MPI_ANY_SOURCE : partner;
        if (k == 2 && partner < 0)
            continue;
        CHECK_MPI(MPI_Irecv(buf, (int)sizeof buf, MPI_BYTE, src, 999, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Cancel(&r));
        CHECK(r != MPI_REQUEST_NULL, "MPI_Cancel set the request to MPI_REQUEST_NULL");
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL, "MPI_Wait of a cancelled receive left the request active");
        flag = -1;
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(1, flag, "MPI_Test_cancelled after cancelling an unmatched receive (source %d)", src);
    }
    /* a receive that completed normally was not cancelled */
    {
        MPI_Request r;
        unsigned char one = 42;
        CHECK_MPI(MPI_Irecv(buf, 1, MPI_BYTE, rank, 998, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(&one, 1, MPI_BYTE, rank, 998, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_EQ(42, buf[0], "the byte sent to self after the cancelled receives");
        flag = -1;
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK_EQ(0, flag, "MPI_Test_cancelled of a normally completed receive");
    }
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    partner = tc_partner(rank, nranks);

    reqs = malloc(sizeof(MPI_Request) * 4 * N1);
    sts = malloc(sizeof(MPI_Status) * 4 * N1);
    ops = malloc(sizeof(struct op) * 4 * N1);
    done = malloc(4 * N1);
    CHECK(reqs && sts && ops && done, "malloc");

    round_waitall();
    round_testall();
    round_waitany();
    round_waitsome();
    round_testany();
    null_requests();
    freed_sends();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    cancelled_recvs();

    if (rank == 0)
        printf("%d + %d requests per peer completed with Waitall, Testall, Waitany, Waitsome, Testany\n", N1, N2);
    free(reqs);
    free(sts);
    free(ops);
    free(done);
    return tc_finish(NAME);
}

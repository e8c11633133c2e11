/*
 * persist_misc.c - persistent requests, buffered sends, info objects and
 * the rest real programs call; and progress of non-blocking collectives
 * while a rank waits for something else.
 *
 *   1. MPI_Send_init / MPI_Recv_init around a ring, started 20 times with
 *      MPI_Start / MPI_Startall, eager and rendezvous sizes and a derived
 *      datatype; the handles stay valid (inactive) after completion, MPI_Wait
 *      on an inactive request returns at once; MPI_Request_free;
 *   2. MPI_Buffer_attach, MPI_Bsend (also of more data than fits:
 *      MPI_ERR_BUFFER), MPI_Ibsend, MPI_Buffer_detach waiting for delivery;
 *   3. MPI_Info_create/set/get/get_nkeys/get_nthkey/get_valuelen/delete/dup/
 *      free; MPI_Alloc_mem/MPI_Free_mem, small and large (Tandem backs
 *      large ones with huge pages): ranks 0 and 1 exchange 3 MiB + 5 bytes
 *      between such buffers, every byte checked; MPI_Pcontrol; MPI_Wtime,
 *      MPI_Wtick; MPI_Get_address and MPI_Aint_diff;
 *   4. progress: every rank starts MPI_Ibcast (1 MiB, binomial so that ranks
 *      must forward); odd ranks wait for it and then send to their even
 *      neighbour, which sits in MPI_Recv meanwhile. The even ranks' forwarding
 *      happens only if a rank blocked in MPI_Recv still advances its
 *      non-blocking collectives; without that the job deadlocks.
 */
#include "check.h"

#define NAME "persist_misc"

static int rank, size;

static void persistent(void)
{
    int to = (rank + 1) % size, from = (rank + size - 1) % size, it, i, flag;
    int sizes[2] = {100, 40000}; /* ints: 400 B eager, 160 KB rendezvous */
    int si;
    for (si = 0; si < 2; si++) {
        int n = sizes[si];
        int *sb = (int *)malloc(sizeof(int) * (size_t)n), *rb = (int *)malloc(sizeof(int) * (size_t)n);
        MPI_Request rq[2];
        MPI_Status st[2];
        CHECK_MPI(MPI_Recv_init(rb, n, MPI_INT, from, 3, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Send_init(sb, n, MPI_INT, to, 3, MPI_COMM_WORLD, &rq[1]));
        /* an inactive persistent request completes at once with an empty status */
        CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
        CHECK(rq[0] != MPI_REQUEST_NULL, "MPI_Wait keeps an inactive persistent request");
        CHECK_MPI(MPI_Test(&rq[1], &flag, MPI_STATUS_IGNORE));
        CHECK(flag, "MPI_Test of an inactive persistent request is true");
        for (it = 0; it < 20; it++) {
            for (i = 0; i < n; i++) {
                sb[i] = rank * 1000000 + it * 1000 + i % 1000;
                rb[i] = -1;
            }
            if (it % 2) {
                CHECK_MPI(MPI_Startall(2, rq));
            } else {
                CHECK_MPI(MPI_Start(&rq[0]));
                CHECK_MPI(MPI_Start(&rq[1]));
            }
            CHECK_MPI(MPI_Waitall(2, rq, st));
            CHECK(rq[0] != MPI_REQUEST_NULL && rq[1] != MPI_REQUEST_NULL, "persistent handles survive completion");
            CHECK_EQ(from, st[0].MPI_SOURCE, "source of a persistent receive");
            CHECK_EQ(3, st[0].MPI_TAG, "tag of a persistent receive");
            for (i = 0; i < n; i++)
                if (rb[i] != from * 1000000 + it * 1000 + i % 1000)
                    FAIL("persistent receive iteration %d element %d: expected %d got %d", it, i,
                         from * 1000000 + it * 1000 + i % 1000, rb[i]);
        }
        CHECK_MPI(MPI_Request_free(&rq[0]));
        CHECK_MPI(MPI_Request_free(&rq[1]));
        CHECK(rq[0] == MPI_REQUEST_NULL, "MPI_Request_free resets the handle");
        free(sb);
        free(rb);
    }
    /* a persistent exchange of a vector type (every other int) */
    {
        MPI_Datatype v;
        int sb[20], rb[20];
        MPI_Request rq[2];
        CHECK_MPI(MPI_Type_vector(10, 1, 2, MPI_INT, &v));
        CHECK_MPI(MPI_Type_commit(&v));
        CHECK_MPI(MPI_Recv_init(rb, 1, v, from, 4, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Send_init(sb, 1, v, to, 4, MPI_COMM_WORLD, &rq[1]));
        for (it = 0; it < 3; it++) {
            for (i = 0; i < 20; i++) {
                sb[i] = rank * 100 + it * 20 + i;
                rb[i] = -7;
            }
            CHECK_MPI(MPI_Startall(2, rq));
            CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
            for (i = 0; i < 20; i++)
                CHECK_EQ(i % 2 ? -7 : from * 100 + it * 20 + i, rb[i], "persistent vector receive element %d", i);
        }
        CHECK_MPI(MPI_Request_free(&rq[0]));
        CHECK_MPI(MPI_Request_free(&rq[1]));
        CHECK_MPI(MPI_Type_free(&v));
    }
}

static void buffered(void)
{
    int to = (rank + 1) % size, from = (rank + size - 1) % size, i, sz = 0, rc;
    int bufsize = 3 * (1000 * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    char *buf = (char *)malloc((size_t)bufsize);
    void *back = NULL;
    int data[1000], got[1000];
    MPI_Request rq;
    CHECK_MPI(MPI_Buffer_attach(buf, bufsize));
    for (i = 0; i < 1000; i++)
        data[i] = rank * 7 + i;
    CHECK_MPI(MPI_Bsend(data, 1000, MPI_INT, to, 9, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Ibsend(data, 1000, MPI_INT, to, 10, MPI_COMM_WORLD, &rq));
    /* the data may change at once: it was copied */
    for (i = 0; i < 1000; i++)
        data[i] = -1;
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (tc_is_tandem()) {
        /* more than the attached buffer can hold */
        static int big[4000];
        rc = MPI_Bsend(big, 4000, MPI_INT, to, 11, MPI_COMM_WORLD);
        tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Bsend larger than the attached buffer");
    }
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Recv(got, 1000, MPI_INT, from, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (i = 0; i < 1000; i++)
        CHECK_EQ(from * 7 + i, got[i], "MPI_Bsend data element %d", i);
    CHECK_MPI(MPI_Recv(got, 1000, MPI_INT, from, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (i = 0; i < 1000; i++)
        CHECK_EQ(from * 7 + i, got[i], "MPI_Ibsend data element %d", i);
    CHECK_MPI(MPI_Buffer_detach(&back, &sz));
    CHECK(back == buf && sz == bufsize, "MPI_Buffer_detach returns the buffer");
    free(buf);
}

static void info_and_misc(void)
{
    MPI_Info info, dup;
    char key[MPI_MAX_INFO_KEY], val[64];
    int n, flag, len, rc;
    void *mem = NULL;
    double t0, t1;
    MPI_Aint a1, a2;
    int arr[10];
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "alpha", "1"));
    CHECK_MPI(MPI_Info_set(info, "beta", "two"));
    CHECK_MPI(MPI_Info_set(info, "alpha", "one"));
    CHECK_MPI(MPI_Info_get_nkeys(info, &n));
    CHECK_EQ(2, n, "MPI_Info_get_nkeys");
    CHECK_MPI(MPI_Info_get_nthkey(info, 1, key));
    CHECK(strcmp(key, "beta") == 0, "MPI_Info_get_nthkey 1 (got '%s')", key);
    CHECK_MPI(MPI_Info_get(info, "alpha", 63, val, &flag));
    CHECK(flag && strcmp(val, "one") == 0, "MPI_Info_get after overwrite (got '%s')", val);
    CHECK_MPI(MPI_Info_get_valuelen(info, "beta", &len, &flag));
    CHECK(flag && len == 3, "MPI_Info_get_valuelen");
    CHECK_MPI(MPI_Info_get(info, "gamma", 63, val, &flag));
    CHECK_EQ(0, flag, "MPI_Info_get of a missing key");
    CHECK_MPI(MPI_Info_dup(info, &dup));
    CHECK_MPI(MPI_Info_delete(info, "alpha"));
    CHECK_MPI(MPI_Info_get_nkeys(info, &n));
    CHECK_EQ(1, n, "MPI_Info_delete removes the key");
    CHECK_MPI(MPI_Info_get_nkeys(dup, &n));
    CHECK_EQ(2, n, "the duplicate keeps its keys");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    rc = MPI_Info_delete(info, "alpha");
    tc_expect_class(rc, MPI_ERR_INFO_NOKEY, "MPI_Info_delete of a missing key");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Info_free(&dup));
    CHECK(info == MPI_INFO_NULL && dup == MPI_INFO_NULL, "MPI_Info_free resets the handles");

    CHECK_MPI(MPI_Alloc_mem(1 << 16, MPI_INFO_NULL, &mem));
    CHECK(mem != NULL, "MPI_Alloc_mem gives memory");
    memset(mem, 0xab, 1 << 16);
    CHECK_MPI(MPI_Free_mem(mem));
    if (rank < 2 && size >= 2) {
        const size_t big = (3u << 20) + 5;
        unsigned char *out = NULL, *in = NULL;
        int peer = 1 - rank;
        MPI_Status st;
        CHECK_MPI(MPI_Alloc_mem((MPI_Aint)big, MPI_INFO_NULL, &out));
        CHECK_MPI(MPI_Alloc_mem((MPI_Aint)(big + TC_GUARD), MPI_INFO_NULL, &in));
        CHECK(out != NULL && in != NULL && out != in, "MPI_Alloc_mem gives two large blocks");
        for (int round = 0; round < 3; round++) {
            tc_fill(out, big, rank, 40 + round);
            tc_prepare_recv(in, big, peer, 40 + round);
            CHECK_MPI(MPI_Sendrecv(out, (int)big, MPI_BYTE, peer, 40 + round, in, (int)big, MPI_BYTE, peer,
                                   40 + round, MPI_COMM_WORLD, &st));
            tc_check_status(&st, peer, 40 + round, (int)big, "exchange between MPI_Alloc_mem blocks");
            tc_check_recv(in, big, peer, 40 + round, "message between MPI_Alloc_mem blocks");
        }
        CHECK_MPI(MPI_Free_mem(out));
        CHECK_MPI(MPI_Free_mem(in));
    }
    CHECK_MPI(MPI_Pcontrol(1));
    CHECK_MPI(MPI_Pcontrol(0, "with", "extra", "arguments"));
    t0 = MPI_Wtime();
    tc_sleep_ms(20);
    t1 = MPI_Wtime();
    CHECK(t1 - t0 >= 0.015 && t1 - t0 < 5, "MPI_Wtime measures a 20 ms sleep (%g s)", t1 - t0);
    CHECK(MPI_Wtick() > 0 && MPI_Wtick() < 0.01, "MPI_Wtick");
    CHECK_MPI(MPI_Get_address(&arr[7], &a1));
    CHECK_MPI(MPI_Get_address(&arr[2], &a2));
    CHECK_EQ(5 * (long)sizeof(int), (long)MPI_Aint_diff(a1, a2), "MPI_Aint_diff of two addresses");
}

static void progress(void)
{
    int n = 1 << 18, i; /* 1 MiB of ints */
    int *b = (int *)malloc(sizeof(int) * (size_t)n), token = -1;
    MPI_Request rq;
    if (rank == 0)
        for (i = 0; i < n; i++)
            b[i] = i ^ 0x5a5a;
    CHECK_MPI(MPI_Ibcast(b, n, MPI_INT, 0, MPI_COMM_WORLD, &rq));
    if (rank % 2 == 1) {
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        token = rank;
        CHECK_MPI(MPI_Send(&token, 1, MPI_INT, rank - 1, 12, MPI_COMM_WORLD));
    } else {
        if (rank + 1 < size) {
            CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, rank + 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_EQ(rank + 1, token, "token from the odd neighbour");
        }
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
    for (i = 0; i < n; i++)
        if (b[i] != (i ^ 0x5a5a))
            FAIL("MPI_Ibcast element %d: expected %d got %d", i, i ^ 0x5a5a, b[i]);
    free(b);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    persistent();
    buffered();
    info_and_misc();
    progress();
    return tc_finish(NAME);
}

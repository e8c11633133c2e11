/*
 * coll_shm.c - small blocking collectives among ranks of one host, which
 * Tandem runs on shared flags (coll_shm_max): results checked call by
 * call (barrier, broadcast, reduce, allreduce, gather, allgather and
 * allgatherv, scatter, all-to-all) while members run ahead of each other,
 * across the size limit, in place, with a non-commutative operation,
 * beside a non-blocking
 * collective in flight, on sub-communicators made and freed in a loop,
 * and with counts that disagree. Any MPI runs it; the first failed check
 * (tests/c/check.h) names itself and ends the job; "PASS coll_shm" at the
 * end.
 */
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size;


static void nap_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

/* 2x2 integer matrices: a product is not commutative, so the result
 * shows the order the parts were combined in. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                    a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, r, sizeof r);
    }
}

static void mat_of(int r, int *m)
{
    m[0] = 1;
    m[1] = r + 1;
    m[2] = 0;
    m[3] = 1 + (r % 2);
}

/* Broadcasts from every root in turn, the root running ahead of slow
 * members (who nap now and then), each call's payload distinct. */
static void bcasts(MPI_Comm comm, int bytes, int iters)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    unsigned char *buf = malloc(bytes + 1);
    for (int i = 0; i < iters; i++) {
        int root = i % n;
        for (int k = 0; k < bytes; k++)
            buf[k] = r == root ? (unsigned char)(i * 7 + k) : 0xee;
        if (r != root && (i + r) % 17 == 0)
            nap_us(200);
        MPI_Bcast(buf, bytes, MPI_BYTE, root, comm);
        int bad = -1;
        for (int k = 0; k < bytes && bad < 0; k++)
            if (buf[k] != (unsigned char)(i * 7 + k))
                bad = k;
        CHECK(bad < 0, "bcast %d bytes, call %d, root %d: byte %d is %d", bytes, i, root, bad,
              bad < 0 ? 0 : buf[bad]);
    }
    free(buf);
}

/* Allreduce and reduce of `count` longs, in place and not, checked. */
static void reductions(MPI_Comm comm, int count, int iters)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    long *in = malloc(sizeof(long) * count), *out = malloc(sizeof(long) * count);
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < count; k++)
            in[k] = (long)(r + 1) * (i + k);
        long want_sum = (long)n * (n + 1) / 2;
        if ((i + r) % 13 == 0)
            nap_us(100);
        if (i % 2 == 0) {
            MPI_Allreduce(in, out, count, MPI_LONG, MPI_SUM, comm);
        } else {
            memcpy(out, in, sizeof(long) * count);
            MPI_Allreduce(MPI_IN_PLACE, out, count, MPI_LONG, MPI_SUM, comm);
        }
        for (int k = 0; k < count; k++)
            if (out[k] != want_sum * (i + k)) {
                CHECK(0, "allreduce of %d longs, call %d: element %d is %ld, not %ld", count, i,
                      k, out[k], want_sum * (i + k));
                break;
            }
        int root = (i / 2) % n;
        for (int k = 0; k < count; k++)
            out[k] = -1;
        if (r == root && i % 3 == 0) {
            memcpy(out, in, sizeof(long) * count);
            MPI_Reduce(MPI_IN_PLACE, out, count, MPI_LONG, MPI_MAX, root, comm);
        } else {
            MPI_Reduce(in, out, count, MPI_LONG, MPI_MAX, root, comm);
        }
        if (r == root) {
            for (int k = 0; k < count; k++)
                if (out[k] != (long)n * (i + k)) {
                    CHECK(0, "reduce of %d longs to %d, call %d: element %d is %ld, not %ld",
                          count, root, i, k, out[k], (long)n * (i + k));
                    break;
                }
        } else {
            CHECK(out[0] == -1, "reduce wrote the receive buffer of non-root %d", r);
        }
    }
    free(in);
    free(out);
}

static int val(int from, int to, int k, int i)
{
    return from * 1000003 + to * 1009 + k * 7 + i;
}

/* Allgather(v), gather, scatter and all-to-all of `count` ints per block,
 * in place and not, roots in turn, members napping now and then. */
static void blocks(MPI_Comm comm, int count, int iters)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    int *sb = malloc(sizeof(int) * count * n), *rb = malloc(sizeof(int) * count * n);
    for (int i = 0; i < iters; i++) {
        int root = i % n, inplace = i % 2;
        if ((i + r) % 11 == 0)
            nap_us(150);
        /* allgather: block j is rank j's */
        for (int k = 0; k < count * n; k++)
            rb[k] = -1;
        for (int k = 0; k < count; k++)
            (inplace ? rb + r * count : sb)[k] = val(r, 0, k, i);
        MPI_Allgather(inplace ? MPI_IN_PLACE : sb, count, MPI_INT, rb, count, MPI_INT, comm);
        for (int j = 0; j < n; j++)
            for (int k = 0; k < count; k++)
                if (rb[j * count + k] != val(j, 0, k, i)) {
                    CHECK(0, "allgather of %d ints, call %d: block %d element %d is %d", count,
                          i, j, k, rb[j * count + k]);
                    j = n;
                    break;
                }
        /* allgatherv: rank j's block of cnt[j] ints (counts differ), the
         * blocks in reverse rank order with one untouched int after each */
        int *cnt = malloc(sizeof(int) * n), *dsp = malloc(sizeof(int) * n), total = 0;
        for (int j = n - 1; j >= 0; j--) {
            cnt[j] = j % 2 ? count : (count + 1) / 2 + j;
            dsp[j] = total;
            total += cnt[j] + 1;
        }
        int *vb = malloc(sizeof(int) * total);
        for (int k = 0; k < total; k++)
            vb[k] = -1;
        for (int k = 0; k < cnt[r]; k++)
            (inplace ? vb + dsp[r] : sb)[k] = val(r, 4, k, i);
        MPI_Allgatherv(inplace ? MPI_IN_PLACE : sb, cnt[r], MPI_INT, vb, cnt, dsp, MPI_INT, comm);
        for (int j = 0; j < n; j++) {
            for (int k = 0; k < cnt[j]; k++)
                if (vb[dsp[j] + k] != val(j, 4, k, i)) {
                    CHECK(0, "allgatherv of %d ints from %d, call %d: element %d is %d", cnt[j], j, i, k,
                          vb[dsp[j] + k]);
                    break;
                }
            CHECK(vb[dsp[j] + cnt[j]] == -1, "allgatherv, call %d: the int after block %d was written", i, j);
        }
        free(cnt);
        free(dsp);
        free(vb);
        /* gather to root */
        for (int k = 0; k < count * n; k++)
            rb[k] = -1;
        for (int k = 0; k < count; k++)
            (inplace && r == root ? rb + r * count : sb)[k] = val(r, 1, k, i);
        MPI_Gather(inplace && r == root ? MPI_IN_PLACE : sb, count, MPI_INT, rb, count, MPI_INT,
                   root, comm);
        if (r == root)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < count; k++)
                    if (rb[j * count + k] != val(j, 1, k, i)) {
                        CHECK(0, "gather of %d ints to %d, call %d: block %d is wrong", count,
                              root, i, j);
                        j = n;
                        break;
                    }
        /* scatter from root: block j for rank j */
        for (int j = 0; j < n; j++)
            for (int k = 0; k < count; k++)
                sb[j * count + k] = r == root ? val(root, j, k, i) : -2;
        int *mine = rb;
        if (inplace && r == root)
            mine = sb + r * count;
        else
            for (int k = 0; k < count; k++)
                rb[k] = -1;
        MPI_Scatter(sb, count, MPI_INT, inplace && r == root ? MPI_IN_PLACE : rb, count, MPI_INT,
                    root, comm);
        for (int k = 0; k < count; k++)
            if (mine[k] != val(root, r, k, i)) {
                CHECK(0, "scatter of %d ints from %d, call %d: element %d is %d", count, root, i,
                      k, mine[k]);
                break;
            }
        /* all-to-all: block j goes to rank j */
        int *row = inplace ? rb : sb;
        for (int j = 0; j < n; j++)
            for (int k = 0; k < count; k++)
                row[j * count + k] = val(r, j, k, i);
        MPI_Alltoall(inplace ? MPI_IN_PLACE : sb, count, MPI_INT, rb, count, MPI_INT, comm);
        for (int j = 0; j < n; j++)
            for (int k = 0; k < count; k++)
                if (rb[j * count + k] != val(j, r, k, i)) {
                    CHECK(0, "alltoall of %d ints, call %d: block from %d element %d is %d",
                          count, i, j, k, rb[j * count + k]);
                    j = n;
                    break;
                }
    }
    free(sb);
    free(rb);
}

/* A non-commutative operation is combined in rank order, at every rank,
 * for allreduce and reduce. */
static void ordered(MPI_Comm comm, int iters)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    MPI_Op op;
    MPI_Op_create(matmul, 0, &op);
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);
    int want[4] = {1, 0, 0, 1}, m[4], got[4];
    for (int k = 0; k < n; k++) { /* want = m_0 * m_1 * ... * m_{n-1} */
        int mk[4];
        mat_of(k, mk);
        int t[4] = {want[0] * mk[0] + want[1] * mk[2], want[0] * mk[1] + want[1] * mk[3],
                    want[2] * mk[0] + want[3] * mk[2], want[2] * mk[1] + want[3] * mk[3]};
        memcpy(want, t, sizeof t);
    }
    mat_of(r, m);
    for (int i = 0; i < iters; i++) {
        MPI_Allreduce(m, got, 1, mat, op, comm);
        CHECK(memcmp(got, want, sizeof got) == 0,
              "non-commutative allreduce: {%d %d %d %d} not {%d %d %d %d}", got[0], got[1],
              got[2], got[3], want[0], want[1], want[2], want[3]);
        int root = i % n;
        memset(got, 0, sizeof got);
        MPI_Reduce(m, got, 1, mat, op, root, comm);
        if (r == root)
            CHECK(memcmp(got, want, sizeof got) == 0, "non-commutative reduce to %d", root);
    }
    MPI_Type_free(&mat);
    MPI_Op_free(&op);
}

/* The host's monotonic clock, the same for every process of the host. */
static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A barrier holds everyone until the last member arrives: nobody leaves
 * before the member that napped entered (one host's clock). */
static void barrier_holds(MPI_Comm comm)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (int late = 0; late < n; late++) {
        double entered = 0;
        MPI_Barrier(comm);
        if (r == late) {
            nap_us(30000);
            entered = mono();
        }
        MPI_Barrier(comm);
        double left = mono();
        MPI_Bcast(&entered, 1, MPI_DOUBLE, late, comm);
        CHECK(left >= entered, "left the barrier %.6f s before rank %d entered it",
              entered - left, late);
    }
}

/* A blocking collective while a non-blocking one is in flight, which the
 * members complete in different orders. */
static void beside_nonblocking(MPI_Comm comm)
{
    int r, n;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < 50; i++) {
        long a = r + 1, sum_nb = 0, b = 2 * (r + 1), sum_b = 0;
        MPI_Request req;
        MPI_Iallreduce(&a, &sum_nb, 1, MPI_LONG, MPI_SUM, comm, &req);
        if (r % 2 == 0) {
            MPI_Allreduce(&b, &sum_b, 1, MPI_LONG, MPI_SUM, comm);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            MPI_Allreduce(&b, &sum_b, 1, MPI_LONG, MPI_SUM, comm);
        }
        CHECK(sum_nb == (long)n * (n + 1) / 2 && sum_b == (long)n * (n + 1),
              "iallreduce %ld, allreduce %ld", sum_nb, sum_b);
    }
}

/* Counts that disagree (both small): the member given fewer bytes than it
 * asked for, or more, gets an error, not a half-filled buffer. */
static void disagreeing_counts(void)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    char buf[64];
    memset(buf, 1, sizeof buf);
    int count = rank == 0 ? 8 : 16;
    int rc = MPI_Bcast(buf, count, MPI_BYTE, 0, comm);
    if (rank == 0)
        CHECK_MPI(rc);
    else
        tc_expect_class(rc, MPI_ERR_OTHER, "a bcast of 8 bytes into 16");
    count = rank == 0 ? 16 : 8;
    rc = MPI_Bcast(buf, count, MPI_BYTE, 0, comm);
    if (rank != 0)
        tc_expect_class(rc, MPI_ERR_TRUNCATE, "a bcast of 16 bytes into 8");
    /* A rank whose own send and receive signatures differ: it gets the
     * error, the collective still completes everywhere (nobody waits for
     * it) and the blocks of the others arrive intact. */
    int sbuf[10], *rbuf = malloc(sizeof(int) * 10 * size);
    for (int k = 0; k < 10; k++)
        sbuf[k] = rank * 100 + k;
    rc = MPI_Allgather(sbuf, rank == 0 ? 1 : 10, MPI_INT, rbuf, 10, MPI_INT, comm);
    if (rank == 0)
        tc_expect_class(rc, MPI_ERR_OTHER, "an allgather sending 1 int into blocks of 10, at the sender");
    for (int j = 1; j < size; j++)
        CHECK(rbuf[j * 10 + 9] == j * 100 + 9, "block %d of the allgather is wrong", j);
    int *a2a_send = calloc(12 * size, sizeof(int)), *a2a_recv = calloc(10 * size, sizeof(int));
    rc = MPI_Alltoall(a2a_send, rank == 0 ? 12 : 10, MPI_INT, a2a_recv, 10, MPI_INT, comm);
    free(a2a_send);
    free(a2a_recv);
    if (rank == 0)
        tc_expect_class(rc, MPI_ERR_TRUNCATE, "an alltoall sending 12 ints into blocks of 10, at the sender");
    free(rbuf);
    /* Counts on either side of coll_shm_max (2 KiB by default): on shared
     * flags the members would take different paths; each gets the error
     * the message algorithms give it, none waits for ever. Over the limit
     * the root, then under it. */
    char *big = calloc(3000, 1);
    count = rank == 0 ? 3000 : 100;
    rc = MPI_Bcast(big, count, MPI_BYTE, 0, comm);
    if (rank == 0)
        CHECK_MPI(rc);
    else
        tc_expect_class(rc, MPI_ERR_TRUNCATE, "a bcast of 3000 bytes into 100");
    count = rank == 0 ? 100 : 3000;
    rc = MPI_Bcast(big, count, MPI_BYTE, 0, comm);
    if (rank == 0)
        CHECK_MPI(rc);
    else
        tc_expect_class(rc, MPI_ERR_OTHER, "a bcast of 100 bytes into 3000");
    /* An allreduce: the rank over the limit waits for parts that are too
     * short, on either path (the others' outcome depends on the
     * algorithm), and nobody hangs. */
    int *sum_in = calloc(1000, sizeof(int)), *sum_out = calloc(1000, sizeof(int));
    rc = MPI_Allreduce(sum_in, sum_out, rank == size - 1 ? 1000 : 10, MPI_INT, MPI_SUM, comm);
    if (rank == size - 1)
        tc_expect_class(rc, MPI_ERR_OTHER, "an allreduce of 1000 ints where the others give 10");
    free(sum_in);
    free(sum_out);
    free(big);
    MPI_Barrier(comm);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int sizes[] = {1, 8, 100, 2048, 2049, 8192};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        bcasts(MPI_COMM_WORLD, sizes[s], 60);
    int counts[] = {1, 3, 256, 257, 1024};
    for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++)
        reductions(MPI_COMM_WORLD, counts[c], 60);
    /* per-block sizes under the limit, at it for 2 ranks' all-to-all
     * (256 ints x 2 = 2 KiB), and over it */
    int block_counts[] = {1, 5, 128, 256, 600};
    for (unsigned c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++)
        blocks(MPI_COMM_WORLD, block_counts[c], 40);
    ordered(MPI_COMM_WORLD, 20);
    barrier_holds(MPI_COMM_WORLD);
    beside_nonblocking(MPI_COMM_WORLD);
    /* Communicators made, used and freed again and again (each maps its
     * own segment at its first small collective). */
    for (int i = 0; i < 40; i++) {
        MPI_Comm half, dup;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &half);
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        reductions(half, 2, 3);
        bcasts(dup, 16, 3);
        ordered(half, 1);
        blocks(half, 3, 2);
        MPI_Barrier(dup);
        MPI_Comm_free(&half);
        MPI_Comm_free(&dup);
    }
    disagreeing_counts();
    return tc_finish("coll_shm");
}

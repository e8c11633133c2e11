/*
 * alltoallw.c - MPI_Alltoallw with a different datatype per peer, in place
 * and not, blocking and non-blocking.
 *
 * Ranks me and p exchange len(me, p) = (me + p) % 4 + 1 ints (the same both
 * ways, as MPI_IN_PLACE needs), described per peer as:
 *   contiguous  one MPI_Type_contiguous(len) element;
 *   ints        len MPI_INTs;
 *   vector      one MPI_Type_vector(len, 1, 2) element (every other int,
 *               so the library must pack; the ints between stay untouched);
 * and, not in place, contiguous sends into vector receives. Every received
 * int and every int the call must leave alone is checked. (In place with
 * contiguous types, the blocks were once sent from the memory they were
 * received into, and arrived as the receiver's own data from 3 ranks on.)
 */
#include "check.h"

#define NAME "alltoallw"
#define SLOT 16 /* ints per peer in the buffers: room for a vector of 4 with gaps */
#define UNTOUCHED (-7)

enum shape { CONTIGUOUS, INTS, VECTOR };
static const char *shape_name[] = {"contiguous", "ints", "vector"};

static int rank, size;

static int len(int a, int b)
{
    return (a + b) % 4 + 1;
}

/* Element e of what rank `from` sends to rank `to`. */
static int value(int from, int to, int e)
{
    return 100000 * from + 1000 * to + e;
}

/* Position of element e in a block of the given shape. */
static int at(enum shape sh, int e)
{
    return sh == VECTOR ? 2 * e : e;
}

/* One peer's datatype and count for `n` ints in the given shape. */
static void describe(enum shape sh, int n, MPI_Datatype *type, int *count)
{
    switch (sh) {
    case CONTIGUOUS:
        CHECK_MPI(MPI_Type_contiguous(n, MPI_INT, type));
        CHECK_MPI(MPI_Type_commit(type));
        *count = 1;
        break;
    case INTS:
        *type = MPI_INT;
        *count = n;
        break;
    case VECTOR:
        CHECK_MPI(MPI_Type_vector(n, 1, 2, MPI_INT, type));
        CHECK_MPI(MPI_Type_commit(type));
        *count = 1;
        break;
    }
}

static void release(MPI_Datatype *types)
{
    for (int p = 0; p < size; p++)
        if (types[p] != MPI_INT)
            CHECK_MPI(MPI_Type_free(&types[p]));
}

/* Checks that block p of buf holds what p sent (in shape sh) and that every
 * other int is UNTOUCHED. */
static void check_received(const int *buf, enum shape sh, const char *what)
{
    for (int p = 0; p < size; p++) {
        const int *block = buf + p * SLOT;
        for (int i = 0; i < SLOT; i++) {
            int want = UNTOUCHED;
            for (int e = 0; e < len(rank, p); e++)
                if (at(sh, e) == i)
                    want = value(p, rank, e);
            CHECK_EQ(want, block[i], "%s (%s): int %d of the block from rank %d", what, shape_name[sh], i, p);
        }
    }
}

static void in_place(enum shape sh, int nonblocking)
{
    int *buf = malloc(sizeof(int) * SLOT * size), *counts = malloc(sizeof(int) * size),
        *displs = malloc(sizeof(int) * size);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * size);
    CHECK(buf && counts && displs && types, "malloc");
    for (int i = 0; i < SLOT * size; i++)
        buf[i] = UNTOUCHED;
    for (int p = 0; p < size; p++) {
        for (int e = 0; e < len(rank, p); e++)
            buf[p * SLOT + at(sh, e)] = value(rank, p, e);
        describe(sh, len(rank, p), &types[p], &counts[p]);
        displs[p] = p * SLOT * (int)sizeof(int);
    }
    if (nonblocking) {
        MPI_Request rq;
        CHECK_MPI(MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, buf, counts, displs, types, MPI_COMM_WORLD, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    } else {
        CHECK_MPI(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, buf, counts, displs, types, MPI_COMM_WORLD));
    }
    check_received(buf, sh, nonblocking ? "MPI_Ialltoallw in place" : "MPI_Alltoallw in place");
    release(types);
    free(buf);
    free(counts);
    free(displs);
    free(types);
}

static void separate(enum shape ssh, enum shape rsh)
{
    int *sbuf = malloc(sizeof(int) * SLOT * size), *rbuf = malloc(sizeof(int) * SLOT * size);
    int *sc = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size),
        *rd = malloc(sizeof(int) * size);
    MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * size), *rt = malloc(sizeof(MPI_Datatype) * size);
    CHECK(sbuf && rbuf && sc && rc && sd && rd && st && rt, "malloc");
    for (int i = 0; i < SLOT * size; i++)
        sbuf[i] = rbuf[i] = UNTOUCHED;
    for (int p = 0; p < size; p++) {
        /* The send blocks in reverse order, to differ from the receive layout. */
        int slot = size - 1 - p;
        for (int e = 0; e < len(rank, p); e++)
            sbuf[slot * SLOT + at(ssh, e)] = value(rank, p, e);
        describe(ssh, len(rank, p), &st[p], &sc[p]);
        describe(rsh, len(rank, p), &rt[p], &rc[p]);
        sd[p] = slot * SLOT * (int)sizeof(int);
        rd[p] = p * SLOT * (int)sizeof(int);
    }
    CHECK_MPI(MPI_Alltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD));
    check_received(rbuf, rsh, "MPI_Alltoallw");
    for (int p = 0; p < size; p++)
        for (int e = 0; e < len(rank, p); e++)
            CHECK_EQ(value(rank, p, e), sbuf[(size - 1 - p) * SLOT + at(ssh, e)], "send buffer changed");
    release(st);
    release(rt);
    free(sbuf);
    free(rbuf);
    free(sc);
    free(rc);
    free(sd);
    free(rd);
    free(st);
    free(rt);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    for (int round = 0; round < 20; round++) {
        for (enum shape sh = CONTIGUOUS; sh <= VECTOR; sh++) {
            in_place(sh, 0);
            in_place(sh, 1);
        }
        separate(CONTIGUOUS, VECTOR);
        separate(VECTOR, INTS);
        separate(INTS, CONTIGUOUS);
    }
    if (rank == 0)
        printf("MPI_Alltoallw in place and not, contiguous, int and vector blocks per peer, on %d ranks\n", size);
    return tc_finish(NAME);
}

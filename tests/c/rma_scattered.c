/*
 * rma_scattered.c - one-sided operations whose target datatype scatters
 * many blocks (which travel packed, a table of blocks and their data per
 * frame), every element checked, the gaps between blocks too.
 *
 * Ranks: 2 or more; each rank works on its right neighbour's window (and
 * in part 5 on its own).
 *
 *   1. put, target type indexed with irregular lengths and displacements
 *      in decreasing order, some blocks of 64 KiB and more among them;
 *   2. get of the same type into a contiguous buffer and into a vector;
 *   3. accumulate (MPI_SUM) and get_accumulate (MPI_SUM, fetching the old
 *      contents; MPI_NO_OP) on a vector type;
 *   4. many blocks: 100000 single ints at irregular spacing (more blocks
 *      than one frame carries) and 1.5 million ints at stride 2 (more data
 *      than one frame carries);
 *   5. the same indexed put to the rank itself;
 *   6. dynamic window: a vector put at absolute addresses into attached
 *      memory, then one that reaches past it gives MPI_ERR_RMA_RANGE;
 *   7. MPI_SHORT_INT (a pair with padding, so each element is two runs):
 *      MPI_Accumulate with MPI_REPLACE, then MPI_Get_accumulate and
 *      MPI_Fetch_and_op with MPI_NO_OP read it back; an accumulate of zero
 *      bytes succeeds whatever the datatypes (MPI_INT against MPI_DOUBLE).
 */
#include "check.h"

#define NAME "rma_scattered"
/* Window: ints. */
#define WIN_INTS (4 * 1024 * 1024)
#define NBLK 300
#define MANY 100000
#define STRIDED (1500 * 1000)

static int rank, n, right, left;

/* The value written for element i of an operation by rank r. */
static int val(int r, int key, int i) { return r * 1000003 + key * 7919 + i; }

/* The indexed type of part 1: block b has length len[b] at disp[b] (ints),
 * displacements decreasing, gaps between blocks. */
static int len[NBLK], disp[NBLK];

static int make_indexed(MPI_Datatype *t)
{
    int at = 0, total = 0;
    for (int b = NBLK - 1; b >= 0; b--) {
        /* Every 50th block is 20000 ints (80 KB); the others 1 to 9. */
        len[b] = b % 50 == 7 ? 20000 : 1 + (b * 7) % 9;
        disp[b] = at;
        at += len[b] + 1 + b % 4;
        total += len[b];
    }
    CHECK(at < WIN_INTS, "indexed type fits the window");
    CHECK_MPI(MPI_Type_indexed(NBLK, len, disp, MPI_INT, t));
    CHECK_MPI(MPI_Type_commit(t));
    return total;
}

/* Checks window `w` after the indexed put of `from` with key `key`: blocks
 * in type order hold consecutive values, everything else is `fill`. */
static void check_indexed(const int *w, int from, int key, int fill, const char *what)
{
    int i = 0, end = 0;
    for (int b = 0; b < NBLK; b++) {
        for (int k = 0; k < len[b]; k++)
            CHECK_EQ(val(from, key, i++), w[disp[b] + k], "%s: block %d element %d", what, b, k);
        if (disp[b] + len[b] > end)
            end = disp[b] + len[b];
    }
    /* The gaps: mark the blocks, then look at the rest. */
    char *in = calloc((size_t)end, 1);
    CHECK(in != NULL, "calloc");
    for (int b = 0; b < NBLK; b++)
        memset(in + disp[b], 1, (size_t)len[b]);
    for (int x = 0; x < end; x++)
        if (!in[x])
            CHECK_EQ(fill, w[x], "%s: gap element %d", what, x);
    free(in);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");
    right = (rank + 1) % n;
    left = (rank + n - 1) % n;

    int *w;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)WIN_INTS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w, &win));
    int *buf = malloc(sizeof(int) * STRIDED), *buf2 = malloc(sizeof(int) * 2 * STRIDED);
    CHECK(buf && buf2, "malloc");

    /* 1: indexed put */
    MPI_Datatype idx;
    int total = make_indexed(&idx);
    for (int i = 0; i < WIN_INTS; i++)
        w[i] = -1;
    for (int i = 0; i < total; i++)
        buf[i] = val(rank, 1, i);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(buf, total, MPI_INT, right, 0, 1, idx, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    check_indexed(w, left, 1, -1, "indexed put");

    /* 2: get it back, into contiguous memory and into a vector (stride 2) */
    MPI_Datatype ovec;
    CHECK_MPI(MPI_Type_vector(total, 1, 2, MPI_INT, &ovec));
    CHECK_MPI(MPI_Type_commit(&ovec));
    for (int i = 0; i < 2 * total; i++)
        buf2[i] = -5;
    for (int i = 0; i < total; i++)
        buf[i] = -5;
    CHECK_MPI(MPI_Get(buf, total, MPI_INT, right, 0, 1, idx, win));
    CHECK_MPI(MPI_Get(buf2, 1, ovec, right, 0, 1, idx, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < total; i++) {
        CHECK_EQ(val(rank, 1, i), buf[i], "indexed get element %d", i);
        CHECK_EQ(val(rank, 1, i), buf2[2 * i], "indexed get into a vector, element %d", i);
        CHECK_EQ(-5, buf2[2 * i + 1], "indexed get into a vector, gap %d", i);
    }

    /* 3: accumulate on a vector type: 3 ints every 5, 20000 times */
    MPI_Datatype tvec;
    const int VB = 20000;
    CHECK_MPI(MPI_Type_vector(VB, 3, 5, MPI_INT, &tvec));
    CHECK_MPI(MPI_Type_commit(&tvec));
    for (int i = 0; i < 5 * VB; i++)
        w[i] = i;
    for (int i = 0; i < 3 * VB; i++)
        buf[i] = val(rank, 3, i);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate(buf, 3 * VB, MPI_INT, right, 0, 1, tvec, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int b = 0, i = 0; b < VB; b++)
        for (int k = 0; k < 5; k++) {
            int x = 5 * b + k;
            CHECK_EQ(k < 3 ? x + val(left, 3, i++) : x, w[x], "accumulate element %d", x);
        }
    /* get_accumulate: the old contents come back, the sum goes in */
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < 3 * VB; i++)
        buf[i] = 1;
    CHECK_MPI(MPI_Get_accumulate(buf, 3 * VB, MPI_INT, buf2, 3 * VB, MPI_INT, right, 0, 1, tvec, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int b = 0, i = 0; b < VB; b++)
        for (int k = 0; k < 3; k++, i++) {
            int x = 5 * b + k;
            CHECK_EQ(x + val(rank, 3, i), buf2[i], "get_accumulate fetched element %d", x);
            CHECK_EQ(x + val(left, 3, i) + 1, w[x], "get_accumulate element %d", x);
        }
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_INT, buf2, 3 * VB, MPI_INT, right, 0, 1, tvec, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int b = 0, i = 0; b < VB; b++)
        for (int k = 0; k < 3; k++, i++)
            CHECK_EQ(5 * b + k + val(rank, 3, i) + 1, buf2[i], "get_accumulate MPI_NO_OP element %d", i);

    /* 4: many blocks */
    int *many_disp = malloc(sizeof(int) * MANY), *ones = malloc(sizeof(int) * MANY);
    CHECK(many_disp && ones, "malloc");
    for (int i = 0, at = 0; i < MANY; i++) {
        many_disp[i] = at;
        ones[i] = 1;
        at += 2 + (i * 13) % 17;
    }
    MPI_Datatype many, str;
    CHECK_MPI(MPI_Type_indexed(MANY, ones, many_disp, MPI_INT, &many));
    CHECK_MPI(MPI_Type_commit(&many));
    CHECK_MPI(MPI_Type_vector(STRIDED, 1, 2, MPI_INT, &str));
    CHECK_MPI(MPI_Type_commit(&str));
    for (int i = 0; i < WIN_INTS; i++)
        w[i] = -1;
    for (int i = 0; i < MANY; i++)
        buf[i] = val(rank, 4, i);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(buf, MANY, MPI_INT, right, 0, 1, many, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0, b = 0; b < MANY; i++) {
        if (i == many_disp[b])
            CHECK_EQ(val(left, 4, b++), w[i], "many blocks: block %d", b);
        else
            CHECK_EQ(-1, w[i], "many blocks: gap element %d", i);
    }
    for (int i = 0; i < STRIDED; i++)
        buf[i] = val(rank, 5, i);
    CHECK_MPI(MPI_Put(buf, STRIDED, MPI_INT, right, 1, 1, str, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < STRIDED; i++)
        CHECK_EQ(val(left, 5, i), w[1 + 2 * i], "stride 2: element %d", i);
    for (int i = 0; i < STRIDED; i++)
        buf[i] = -9;
    CHECK_MPI(MPI_Get(buf, STRIDED, MPI_INT, right, 1, 1, str, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < STRIDED; i++)
        CHECK_EQ(val(rank, 5, i), buf[i], "stride 2 get: element %d", i);

    /* 5: to itself */
    for (int i = 0; i < WIN_INTS; i++)
        w[i] = -3;
    for (int i = 0; i < total; i++)
        buf[i] = val(rank, 6, i);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    CHECK_MPI(MPI_Put(buf, total, MPI_INT, rank, 0, 1, idx, win));
    CHECK_MPI(MPI_Win_unlock(rank, win));
    check_indexed(w, rank, 6, -3, "indexed put to itself");
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_free(&win));

    /* 6: dynamic window */
    enum { DYN = 4096 };
    int *dyn = malloc(sizeof(int) * DYN);
    CHECK(dyn != NULL, "malloc");
    for (int i = 0; i < DYN; i++)
        dyn[i] = -1;
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_attach(win, dyn, sizeof(int) * DYN));
    MPI_Aint mine, theirs;
    CHECK_MPI(MPI_Get_address(dyn, &mine));
    CHECK_MPI(MPI_Sendrecv(&mine, 1, MPI_AINT, left, 0, &theirs, 1, MPI_AINT, right, 0, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    MPI_Datatype dvec;
    CHECK_MPI(MPI_Type_vector(DYN / 4, 2, 4, MPI_INT, &dvec));
    CHECK_MPI(MPI_Type_commit(&dvec));
    for (int i = 0; i < DYN / 2; i++)
        buf[i] = val(rank, 7, i);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    CHECK_MPI(MPI_Put(buf, DYN / 2, MPI_INT, right, theirs, 1, dvec, win));
    CHECK_MPI(MPI_Win_unlock(right, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int b = 0, i = 0; b < DYN / 4; b++)
        for (int k = 0; k < 4; k++)
            CHECK_EQ(k < 2 ? val(left, 7, i++) : -1, dyn[4 * b + k], "dynamic vector put element %d", 4 * b + k);
    /* One vector further in: its last blocks lie past the attached memory. */
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    int rc = MPI_Put(buf, DYN / 2, MPI_INT, right, theirs + 64 * (MPI_Aint)sizeof(int), 1, dvec, win);
    int rc2 = MPI_Win_unlock(right, win);
    tc_expect_class(rc != MPI_SUCCESS ? rc : rc2, MPI_ERR_RMA_RANGE, "scattered put past attached memory");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_detach(win, dyn));
    CHECK_MPI(MPI_Win_free(&win));

    /* 7 */
    typedef struct {
        short s;
        int i;
    } short_int;
    enum { PAIRS = 64 };
    short_int *pw, pout[PAIRS], pin[PAIRS], one;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)PAIRS * sizeof(short_int), sizeof(short_int), MPI_INFO_NULL, MPI_COMM_WORLD,
                               &pw, &win));
    memset(pw, 0, PAIRS * sizeof(short_int));
    for (int i = 0; i < PAIRS; i++) {
        pout[i].s = (short)(rank * 100 + i);
        pout[i].i = val(rank, 8, i);
    }
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Accumulate(pout, PAIRS, MPI_SHORT_INT, right, 0, PAIRS, MPI_SHORT_INT, MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < PAIRS; i++) {
        CHECK_EQ(left * 100 + i, pw[i].s, "MPI_SHORT_INT replace: short of pair %d", i);
        CHECK_EQ(val(left, 8, i), pw[i].i, "MPI_SHORT_INT replace: int of pair %d", i);
    }
    memset(pin, 0, sizeof pin);
    CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_SHORT_INT, pin, PAIRS, MPI_SHORT_INT, right, 0, PAIRS, MPI_SHORT_INT,
                                 MPI_NO_OP, win));
    CHECK_MPI(MPI_Fetch_and_op(NULL, &one, MPI_SHORT_INT, right, 5, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < PAIRS; i++) {
        CHECK_EQ(rank * 100 + i, pin[i].s, "MPI_SHORT_INT read: short of pair %d", i);
        CHECK_EQ(val(rank, 8, i), pin[i].i, "MPI_SHORT_INT read: int of pair %d", i);
    }
    CHECK_EQ(val(rank, 8, 5), one.i, "MPI_Fetch_and_op MPI_NO_OP of a pair");
    CHECK_MPI(MPI_Accumulate(pout, 0, MPI_INT, right, 0, 0, MPI_DOUBLE, MPI_SUM, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_free(&win));

    MPI_Type_free(&idx);
    MPI_Type_free(&ovec);
    MPI_Type_free(&tvec);
    MPI_Type_free(&many);
    MPI_Type_free(&str);
    MPI_Type_free(&dvec);
    free(many_disp);
    free(ones);
    free(dyn);
    free(buf);
    free(buf2);
    return tc_finish(NAME);
}

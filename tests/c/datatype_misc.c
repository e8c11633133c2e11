/*
 * datatype_misc.c - distributed arrays, external32 packing and the
 * datatype queries.
 *
 *   1. MPI_Type_create_darray: every rank of a 2-D process grid (as many
 *      ranks as the job has) builds its part of an 8 x 9 int array, block x
 *      cyclic(2) and cyclic x none, in C and Fortran order; the elements it
 *      selects (read with MPI_Pack from an array holding each element's
 *      global index) must be exactly those a hand computation gives, in
 *      array order; the extent is the whole array; rank 0 gathers all parts
 *      with the darray types as receive types and every element must be
 *      covered once; envelope and contents; bad arguments;
 *   2. MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size on
 *      "external32": big-endian bytes of ints, shorts, doubles, long (4
 *      bytes), long double (IEEE quad), a struct and a vector; round trips;
 *      another data representation is MPI_ERR_ARG, a short buffer an error;
 *   3. MPI_Type_match_size, MPI_Type_create_f90_integer/real/complex (sizes,
 *      envelopes), MPI_Type_get_value_index.
 */
#include "check.h"

#define NAME "datatype_misc"
#define ROWS 8
#define COLS 9

static int rank, size;

/* Owned indices of one dimension (HPF rules), into out; their number. */
static int owned(int gsize, int distrib, int darg, int psize, int coord, int *out)
{
    int n = 0, i;
    if (distrib == MPI_DISTRIBUTE_NONE) {
        for (i = 0; i < gsize; i++)
            out[n++] = i;
    } else if (distrib == MPI_DISTRIBUTE_BLOCK) {
        int blk = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
        for (i = coord * blk; i < gsize && i < (coord + 1) * blk; i++)
            out[n++] = i;
    } else {
        int blk = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        for (i = 0; i < gsize; i++)
            if ((i / blk) % psize == coord)
                out[n++] = i;
    }
    return n;
}

static void darray_case(int dist0, int darg0, int dist1, int darg1, int order, const char *what)
{
    int gsizes[2] = {ROWS, COLS}, distribs[2] = {dist0, dist1}, dargs[2] = {darg0, darg1};
    int psizes[2] = {0, 0}, dims[2] = {0, 0};
    int global[ROWS * COLS], packed[ROWS * COLS], expect[ROWS * COLS];
    int rows[ROWS], cols[COLS], nr, nc, i, j, n = 0, pos = 0, tsize;
    MPI_Aint lb, extent;
    MPI_Datatype t;

    /* The process grid: undistributed dimensions get 1 process. */
    if (dist0 == MPI_DISTRIBUTE_NONE) {
        psizes[0] = 1;
        psizes[1] = size;
    } else if (dist1 == MPI_DISTRIBUTE_NONE) {
        psizes[0] = size;
        psizes[1] = 1;
    } else {
        CHECK_MPI(MPI_Dims_create(size, 2, dims));
        psizes[0] = dims[0];
        psizes[1] = dims[1];
    }
    /* Row-major process coordinates. */
    nr = owned(ROWS, dist0, darg0, psizes[0], rank / psizes[1], rows);
    nc = owned(COLS, dist1, darg1, psizes[1], rank % psizes[1], cols);

    for (i = 0; i < ROWS * COLS; i++)
        global[i] = i;
    /* Element (r, c) lies at r*COLS + c in C order, r + c*ROWS in Fortran
     * order; memory order is the order packing reads. */
    if (order == MPI_ORDER_C) {
        for (i = 0; i < nr; i++)
            for (j = 0; j < nc; j++)
                expect[n++] = rows[i] * COLS + cols[j];
    } else {
        for (j = 0; j < nc; j++)
            for (i = 0; i < nr; i++)
                expect[n++] = rows[i] + cols[j] * ROWS;
    }

    CHECK_MPI(MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, psizes, order, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    CHECK_MPI(MPI_Type_size(t, &tsize));
    CHECK_EQ(n * (int)sizeof(int), tsize, "%s: size", what);
    CHECK_MPI(MPI_Type_get_extent(t, &lb, &extent));
    CHECK_EQ(0, (long long)lb, "%s: lower bound", what);
    CHECK_EQ(ROWS * COLS * (long long)sizeof(int), (long long)extent, "%s: extent", what);
    CHECK_MPI(MPI_Pack(global, 1, t, packed, sizeof(packed), &pos, MPI_COMM_WORLD));
    for (i = 0; i < n; i++)
        CHECK_EQ(expect[i], packed[i], "%s: element %d of rank %d's part", what, i, rank);

    /* Every element is owned by exactly one rank: rank 0 receives each
     * rank's part through that rank's darray type. */
    {
        int *whole = NULL, *counts = NULL;
        if (rank == 0) {
            whole = (int *)malloc(sizeof(int) * ROWS * COLS);
            counts = (int *)calloc(ROWS * COLS, sizeof(int));
            for (i = 0; i < ROWS * COLS; i++)
                whole[i] = -1;
        }
        {
            MPI_Request r;
            CHECK_MPI(MPI_Isend(global, 1, t, 0, 7, MPI_COMM_WORLD, &r));
            if (rank == 0) {
                int src;
                for (src = 0; src < size; src++) {
                    MPI_Datatype theirs;
                    int k;
                    CHECK_MPI(MPI_Type_create_darray(size, src, 2, gsizes, distribs, dargs, psizes, order, MPI_INT,
                                                     &theirs));
                    CHECK_MPI(MPI_Type_commit(&theirs));
                    for (k = 0; k < ROWS * COLS; k++)
                        whole[k] = -1;
                    CHECK_MPI(MPI_Recv(whole, 1, theirs, src, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                    for (k = 0; k < ROWS * COLS; k++)
                        if (whole[k] != -1) {
                            CHECK_EQ(k, whole[k], "%s: element from rank %d lands at its index", what, src);
                            counts[k]++;
                        }
                    CHECK_MPI(MPI_Type_free(&theirs));
                }
                for (i = 0; i < ROWS * COLS; i++)
                    CHECK_EQ(1, counts[i], "%s: owners of element %d", what, i);
            }
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        free(whole);
        free(counts);
    }

    {
        int ni, na, nd, comb, ints[16];
        MPI_Aint addrs[1];
        MPI_Datatype types[1];
        CHECK_MPI(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
        CHECK_EQ(MPI_COMBINER_DARRAY, comb, "%s: combiner", what);
        CHECK_EQ(4 * 2 + 4, ni, "%s: integers in the envelope", what);
        CHECK_MPI(MPI_Type_get_contents(t, 16, 1, 1, ints, addrs, types));
        CHECK_EQ(size, ints[0], "%s: contents size", what);
        CHECK_EQ(rank, ints[1], "%s: contents rank", what);
        CHECK_EQ(COLS, ints[4], "%s: contents gsizes[1]", what);
        CHECK_EQ(order, ints[11], "%s: contents order", what);
    }
    CHECK_MPI(MPI_Type_free(&t));
}

static void darray_errors(void)
{
    int gsizes[2] = {ROWS, COLS}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, psizes[2] = {size, 1}, rc;
    MPI_Datatype t;
    /* The grid does not have size processes. */
    psizes[1] = 2;
    rc = MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t);
    tc_expect_class(rc, MPI_ERR_ARG, "darray with a wrong process grid");
    psizes[1] = 1;
    /* Blocks too small to cover the dimension. */
    dargs[0] = 1;
    if (size * 1 < ROWS) {
        rc = MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t);
        tc_expect_class(rc, MPI_ERR_ARG, "darray with blocks not covering a dimension");
    }
    dargs[0] = MPI_DISTRIBUTE_DFLT_DARG;
    rc = MPI_Type_create_darray(size, size, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t);
    tc_expect_class(rc, MPI_ERR_RANK, "darray with rank == size");
    rc = MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, psizes, 99, MPI_INT, &t);
    tc_expect_class(rc, MPI_ERR_ARG, "darray with an invalid order");
    rc = MPI_Type_create_darray(size, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_DATATYPE_NULL, &t);
    tc_expect_class(rc, MPI_ERR_TYPE, "darray of MPI_DATATYPE_NULL");
}

static void expect_bytes(const unsigned char *got, const unsigned char *want, int n, const char *what)
{
    int i;
    for (i = 0; i < n; i++)
        CHECK_EQ(want[i], got[i], "%s: byte %d", what, i);
}

static void external32(void)
{
    unsigned char buf[256];
    MPI_Aint pos = 0, sz = 0;
    int ints[3] = {1, -2, 0x01020304}, ints_back[3] = {0, 0, 0}, rc;
    short sh = 0x0a0b;
    double d = 1.0, d_back = 0;
    long l = -3, l_back = 0;
    long double ld = 1.5L, ld_back = 0;
    static const unsigned char ints_be[12] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4};
    static const unsigned char one_be[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
    static const unsigned char quad_1_5[16] = {0x3f, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

    CHECK_MPI(MPI_Pack_external_size("external32", 3, MPI_INT, &sz));
    CHECK_EQ(12, (long long)sz, "external32 size of 3 ints");
    CHECK_MPI(MPI_Pack_external_size("external32", 2, MPI_LONG, &sz));
    CHECK_EQ(8, (long long)sz, "external32 size of 2 longs (4 bytes each)");
    CHECK_MPI(MPI_Pack_external_size("external32", 1, MPI_LONG_DOUBLE, &sz));
    CHECK_EQ(16, (long long)sz, "external32 size of a long double");
    CHECK_MPI(MPI_Pack_external_size("external32", 1, MPI_DOUBLE_INT, &sz));
    CHECK_EQ(12, (long long)sz, "external32 size of MPI_DOUBLE_INT");

    CHECK_MPI(MPI_Pack_external("external32", ints, 3, MPI_INT, buf, sizeof(buf), &pos));
    CHECK_EQ(12, (long long)pos, "position after 3 ints");
    expect_bytes(buf, ints_be, 12, "big-endian ints");
    CHECK_MPI(MPI_Pack_external("external32", &sh, 1, MPI_SHORT, buf, sizeof(buf), &pos));
    CHECK_EQ(0x0a, buf[12], "short high byte first");
    CHECK_EQ(0x0b, buf[13], "short low byte");
    CHECK_MPI(MPI_Pack_external("external32", &d, 1, MPI_DOUBLE, buf, sizeof(buf), &pos));
    expect_bytes(buf + 14, one_be, 8, "double 1.0");
    CHECK_MPI(MPI_Pack_external("external32", &l, 1, MPI_LONG, buf, sizeof(buf), &pos));
    CHECK_EQ(26, (long long)pos, "position after a long");
    CHECK_EQ(0xfd, buf[25], "long -3 low byte");
    CHECK_EQ(0xff, buf[22], "long -3 high byte");
    if (sizeof(long double) == 16) {
        CHECK_MPI(MPI_Pack_external("external32", &ld, 1, MPI_LONG_DOUBLE, buf, sizeof(buf), &pos));
        expect_bytes(buf + 26, quad_1_5, 16, "long double 1.5 as IEEE quad");
    }
    /* Back again. */
    {
        MPI_Aint end = pos;
        short sh_back = 0;
        pos = 0;
        CHECK_MPI(MPI_Unpack_external("external32", buf, end, &pos, ints_back, 3, MPI_INT));
        CHECK_MPI(MPI_Unpack_external("external32", buf, end, &pos, &sh_back, 1, MPI_SHORT));
        CHECK_MPI(MPI_Unpack_external("external32", buf, end, &pos, &d_back, 1, MPI_DOUBLE));
        CHECK_MPI(MPI_Unpack_external("external32", buf, end, &pos, &l_back, 1, MPI_LONG));
        if (sizeof(long double) == 16)
            CHECK_MPI(MPI_Unpack_external("external32", buf, end, &pos, &ld_back, 1, MPI_LONG_DOUBLE));
        CHECK_EQ(end, (long long)pos, "position after unpacking everything");
        CHECK(ints_back[0] == 1 && ints_back[1] == -2 && ints_back[2] == 0x01020304, "ints back");
        CHECK_EQ(0x0a0b, sh_back, "short back");
        CHECK(d_back == 1.0, "double back");
        CHECK_EQ(-3, l_back, "long back");
        if (sizeof(long double) == 16)
            CHECK(ld_back == 1.5L, "long double back");
    }

    /* A derived type: a vector of every other int of 6, and a struct. */
    {
        int six[6] = {10, 11, 12, 13, 14, 15}, six_back[6] = {0, 0, 0, 0, 0, 0};
        struct {
            char c;
            double x;
            int i;
        } s = {'A', -2.0, 7}, s_back;
        int bl[3] = {1, 1, 1};
        MPI_Aint disp[3];
        MPI_Datatype types[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT}, vec, st;
        static const unsigned char s_be[13] = {'A', 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
        CHECK_MPI(MPI_Type_vector(3, 1, 2, MPI_INT, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        pos = 0;
        CHECK_MPI(MPI_Pack_external("external32", six, 1, vec, buf, sizeof(buf), &pos));
        CHECK_EQ(12, (long long)pos, "vector packs 3 ints");
        CHECK_EQ(10, buf[3], "first element of the vector is 10");
        CHECK_EQ(12, buf[7], "second element of the vector is 12");
        CHECK_EQ(14, buf[11], "third element of the vector is 14");
        pos = 0;
        CHECK_MPI(MPI_Unpack_external("external32", buf, 12, &pos, six_back, 1, vec));
        CHECK(six_back[0] == 10 && six_back[1] == 0 && six_back[2] == 12 && six_back[4] == 14, "vector back");
        disp[0] = (char *)&s.c - (char *)&s;
        disp[1] = (char *)&s.x - (char *)&s;
        disp[2] = (char *)&s.i - (char *)&s;
        CHECK_MPI(MPI_Type_create_struct(3, bl, disp, types, &st));
        CHECK_MPI(MPI_Type_commit(&st));
        CHECK_MPI(MPI_Pack_external_size("external32", 1, st, &sz));
        CHECK_EQ(13, (long long)sz, "external32 struct has no padding");
        pos = 0;
        CHECK_MPI(MPI_Pack_external("external32", &s, 1, st, buf, sizeof(buf), &pos));
        expect_bytes(buf, s_be, 13, "struct char, double, int");
        memset(&s_back, 0, sizeof(s_back));
        pos = 0;
        CHECK_MPI(MPI_Unpack_external("external32", buf, 13, &pos, &s_back, 1, st));
        CHECK(s_back.c == 'A' && s_back.x == -2.0 && s_back.i == 7, "struct back");
        CHECK_MPI(MPI_Type_free(&vec));
        CHECK_MPI(MPI_Type_free(&st));
    }

    /* Errors */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    pos = 0;
    rc = MPI_Pack_external("native", ints, 3, MPI_INT, buf, sizeof(buf), &pos);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Pack_external(\"native\")");
    rc = MPI_Pack_external_size("internal", 1, MPI_INT, &sz);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Pack_external_size(\"internal\")");
    pos = 0;
    rc = MPI_Pack_external("external32", ints, 3, MPI_INT, buf, 8, &pos);
    CHECK(rc != MPI_SUCCESS, "packing 12 bytes into 8 succeeded");
    CHECK_EQ(0, (long long)pos, "position moved by a failed pack");
    pos = 4;
    rc = MPI_Unpack_external("external32", buf, 12, &pos, ints_back, 3, MPI_INT);
    CHECK(rc != MPI_SUCCESS, "unpacking 12 bytes from 8 left succeeded");
    rc = MPI_Pack_external("external32", ints, -1, MPI_INT, buf, sizeof(buf), &pos);
    tc_expect_class(rc, MPI_ERR_COUNT, "MPI_Pack_external with a negative count");
    rc = MPI_Pack_external("external32", ints, 1, MPI_DATATYPE_NULL, buf, sizeof(buf), &pos);
    tc_expect_class(rc, MPI_ERR_TYPE, "MPI_Pack_external of MPI_DATATYPE_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void check_size(MPI_Datatype t, int bytes, const char *what)
{
    int s = -1;
    CHECK_MPI(MPI_Type_size(t, &s));
    CHECK_EQ(bytes, s, "%s: size", what);
}

static void check_f90(MPI_Datatype t, int combiner, int bytes, int nints, const char *what)
{
    int ni, na, nd, comb, ints[2] = {0, 0};
    check_size(t, bytes, what);
    CHECK_MPI(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK_EQ(combiner, comb, "%s: combiner", what);
    CHECK_EQ(nints, ni, "%s: integers", what);
    CHECK_EQ(0, nd, "%s: datatypes in the envelope", what);
    CHECK_MPI(MPI_Type_get_contents(t, 2, 0, 0, ints, NULL, NULL));
}

static void queries(void)
{
    MPI_Datatype t;
    int rc, ints[2];
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_REAL, sizeof(double), &t));
    check_size(t, sizeof(double), "match_size REAL 8");
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_REAL, sizeof(float), &t));
    check_size(t, sizeof(float), "match_size REAL 4");
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 8, &t));
    check_size(t, 8, "match_size INTEGER 8");
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 1, &t));
    check_size(t, 1, "match_size INTEGER 1");
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_COMPLEX, 16, &t));
    check_size(t, 16, "match_size COMPLEX 16");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rc = MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &t);
    tc_expect_class(rc, MPI_ERR_ARG, "match_size INTEGER 3");
    rc = MPI_Type_match_size(12345, 4, &t);
    tc_expect_class(rc, MPI_ERR_ARG, "match_size of an invalid class");

    CHECK_MPI(MPI_Type_create_f90_integer(9, &t));
    check_f90(t, MPI_COMBINER_F90_INTEGER, 4, 1, "f90_integer(9)");
    {
        /* usable in communication without a commit */
        int v = 41, back = 0;
        CHECK_MPI(MPI_Sendrecv(&v, 1, t, 0, 1, &back, 1, t, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE));
        CHECK_EQ(41, back, "value through an f90 integer type");
    }
    CHECK_MPI(MPI_Type_create_f90_integer(10, &t));
    check_f90(t, MPI_COMBINER_F90_INTEGER, 8, 1, "f90_integer(10)");
    CHECK_MPI(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &t));
    check_f90(t, MPI_COMBINER_F90_REAL, 4, 2, "f90_real(6, undefined)");
    CHECK_MPI(MPI_Type_get_contents(t, 2, 0, 0, ints, NULL, NULL));
    CHECK_EQ(6, ints[0], "f90_real contents p");
    CHECK_EQ(MPI_UNDEFINED, ints[1], "f90_real contents r");
    CHECK_MPI(MPI_Type_create_f90_real(15, 300, &t));
    check_f90(t, MPI_COMBINER_F90_REAL, 8, 2, "f90_real(15, 300)");
    CHECK_MPI(MPI_Type_create_f90_complex(7, MPI_UNDEFINED, &t));
    check_f90(t, MPI_COMBINER_F90_COMPLEX, 16, 2, "f90_complex(7, undefined)");
    rc = MPI_Type_create_f90_integer(60, &t);
    tc_expect_class(rc, MPI_ERR_ARG, "f90_integer(60)");
    rc = MPI_Type_create_f90_real(40, MPI_UNDEFINED, &t);
    tc_expect_class(rc, MPI_ERR_ARG, "f90_real(40)");

    CHECK_MPI(MPI_Type_get_value_index(MPI_DOUBLE, MPI_INT, &t));
    CHECK(t == MPI_DOUBLE_INT, "value index of double and int");
    CHECK_MPI(MPI_Type_get_value_index(MPI_SHORT, MPI_INT, &t));
    CHECK(t == MPI_SHORT_INT, "value index of short and int");
    CHECK_MPI(MPI_Type_get_value_index(MPI_INTEGER, MPI_INTEGER, &t));
    CHECK(t == MPI_2INTEGER, "value index of INTEGER and INTEGER");
    CHECK_MPI(MPI_Type_get_value_index(MPI_DOUBLE, MPI_LONG, &t));
    CHECK(t == MPI_DATATYPE_NULL, "value index of double and long");
    rc = MPI_Type_get_value_index(MPI_DATATYPE_NULL, MPI_INT, &t);
    tc_expect_class(rc, MPI_ERR_TYPE, "value index of MPI_DATATYPE_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    darray_case(MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_CYCLIC, 2, MPI_ORDER_C,
                "block x cyclic(2), C");
    darray_case(MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_CYCLIC, 2, MPI_ORDER_FORTRAN,
                "block x cyclic(2), Fortran");
    darray_case(MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_DFLT_DARG,
                MPI_ORDER_C, "cyclic x none, C");
    /* Blocks of 3 columns cover the 9 only on 3 or more ranks. */
    darray_case(MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_BLOCK,
                3 * size >= COLS ? 3 : MPI_DISTRIBUTE_DFLT_DARG, MPI_ORDER_FORTRAN, "none x block(3), Fortran");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    darray_errors();
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    external32();
    queries();
    return tc_finish(NAME);
}

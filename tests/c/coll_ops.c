/*
 * coll_ops.c - reduction operations and collective argument checks.
 *
 *   1. every predefined operation on the C types it applies to (integers,
 *      floating point, C _Bool, complex sums and products, MINLOC/MAXLOC on
 *      every pair type), through MPI_Allreduce and MPI_Reduce_local, checked
 *      against a local reference;
 *   2. user-defined operations: a commutative one and a non-commutative one
 *      (2x2 matrix products, which must be applied in rank order) through
 *      MPI_Reduce (every root), MPI_Allreduce, MPI_Scan, MPI_Exscan and
 *      MPI_Reduce_scatter_block; MPI_Op_commutative, MPI_Op_free; a user
 *      operation on a derived (non-contiguous) datatype;
 *   3. with MPI_ERRORS_RETURN: MPI_ERR_OP (a bitwise op on double, MINLOC on
 *      int, MPI_OP_NULL, freeing a predefined op), MPI_ERR_ROOT, MPI_ERR_COUNT,
 *      MPI_ERR_TYPE, MPI_ERR_COMM, MPI_ERR_BUFFER (MPI_IN_PLACE at a non-root,
 *      MPI_IN_PLACE or one buffer twice in MPI_Reduce_local, one buffer as
 *      both send and receive buffer of MPI_Allreduce, MPI_Allgather or
 *      MPI_Alltoall, a send buffer inside the receive buffer, aliased v-forms
 *      and rooted calls refused at the root alone), MPI_ERR_TRUNCATE
 *      from a broadcast whose root sends more than the others take (at the
 *      ranks the root sends to; none is left waiting for one that failed),
 *      MPI_ERR_OTHER from one whose root sends less.
 */
#include "check.h"

#include <complex.h>

#define NAME "coll_ops"

static int rank, size;

/* 2x2 matrices of unsigned ints (wrapping): associative, not commutative. */
typedef struct {
    unsigned m[4];
} mat;

static mat matmul(mat a, mat b)
{
    mat r;
    r.m[0] = a.m[0] * b.m[0] + a.m[1] * b.m[2];
    r.m[1] = a.m[0] * b.m[1] + a.m[1] * b.m[3];
    r.m[2] = a.m[2] * b.m[0] + a.m[3] * b.m[2];
    r.m[3] = a.m[2] * b.m[1] + a.m[3] * b.m[3];
    return r;
}

static mat mat_of(int r, int i)
{
    mat x;
    x.m[0] = (unsigned)(r * 3 + i + 1);
    x.m[1] = (unsigned)(r + 2 * i + 5);
    x.m[2] = (unsigned)(7 * r + i);
    x.m[3] = (unsigned)(r * r + 1);
    return x;
}

static void matmul_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    mat *a = (mat *)in, *b = (mat *)inout;
    int i;
    (void)dt;
    for (i = 0; i < *len; i++)
        b[i] = matmul(a[i], b[i]);
}

/* x ^ y with a rotation: commutative. */
static void xor_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    unsigned *a = (unsigned *)in, *b = (unsigned *)inout;
    int i;
    (void)dt;
    for (i = 0; i < *len; i++)
        b[i] = a[i] ^ b[i];
}

/* xor on elements of the vector type (4 blocks of 1 unsigned, stride 2):
 * a user function is handed buffers laid out as its datatype says. */
static void xor_vec_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    unsigned *a = (unsigned *)in, *b = (unsigned *)inout;
    int e, j;
    (void)dt;
    for (e = 0; e < *len; e++)
        for (j = 0; j < 4; j++)
            b[e * 7 + 2 * j] ^= a[e * 7 + 2 * j];
}

/* The product of mat_of(r, i) for r in [lo, hi). */
static mat prod(int lo, int hi, int i)
{
    mat acc = mat_of(lo, i);
    int r;
    for (r = lo + 1; r < hi; r++)
        acc = matmul(acc, mat_of(r, i));
    return acc;
}

static void check_mats(const mat *got, int n, int lo, int hi, const char *what)
{
    int i, j;
    for (i = 0; i < n; i++) {
        mat w = prod(lo, hi, i);
        for (j = 0; j < 4; j++)
            if (got[i].m[j] != w.m[j])
                FAIL("%s: element %d entry %d expected %u got %u", what, i, j, w.m[j], got[i].m[j]);
    }
}

#define N 5

/* Allreduce of v(r, i) over all ranks with op, compared with fold(). */
#define INT_CASE(T, MT, OP, EXPR_INIT, FOLD)                                                                           \
    do {                                                                                                               \
        T in[N], out[N], want[N];                                                                                      \
        int i_, r_;                                                                                                    \
        for (i_ = 0; i_ < N; i_++) {                                                                                   \
            int r = rank, i = i_;                                                                                      \
            in[i_] = (T)(EXPR_INIT);                                                                                   \
            out[i_] = (T)0;                                                                                            \
        }                                                                                                              \
        CHECK_MPI(MPI_Allreduce(in, out, N, MT, OP, MPI_COMM_WORLD));                                                  \
        for (i_ = 0; i_ < N; i_++) {                                                                                   \
            T acc;                                                                                                     \
            {                                                                                                          \
                int r = 0, i = i_;                                                                                     \
                acc = (T)(EXPR_INIT);                                                                                  \
            }                                                                                                          \
            for (r_ = 1; r_ < size; r_++) {                                                                            \
                int r = r_, i = i_;                                                                                    \
                T x = (T)(EXPR_INIT);                                                                                  \
                acc = (T)(FOLD);                                                                                       \
            }                                                                                                          \
            want[i_] = acc;                                                                                            \
            if (out[i_] != want[i_])                                                                                   \
                FAIL("%s on %s element %d: expected %.17g got %.17g", #OP, #MT, i_, (double)want[i_],                 \
                     (double)out[i_]);                                                                                 \
        }                                                                                                              \
    } while (0)

static void predefined_ops(void)
{
    /* integers: every arithmetic, logical and bitwise op */
    INT_CASE(int, MPI_INT, MPI_SUM, r * 7 - i, acc + x);
    INT_CASE(int, MPI_INT, MPI_PROD, (r % 3) + i - 1, acc * x);
    INT_CASE(int, MPI_INT, MPI_MIN, (r * 37 + i * 11) % 23 - 9, acc < x ? acc : x);
    INT_CASE(int, MPI_INT, MPI_MAX, (r * 37 + i * 11) % 23 - 9, acc > x ? acc : x);
    INT_CASE(int, MPI_INT, MPI_LAND, (r + i) % 4, acc && x);
    INT_CASE(int, MPI_INT, MPI_LOR, (r * i) % 3 == 1, acc || x);
    INT_CASE(int, MPI_INT, MPI_LXOR, (r + i) % 2, (!acc) != (!x));
    INT_CASE(int, MPI_INT, MPI_BAND, 0x7f0f ^ (r << i), acc & x);
    INT_CASE(int, MPI_INT, MPI_BOR, 1 << ((r + i) % 20), acc | x);
    INT_CASE(int, MPI_INT, MPI_BXOR, r * 0x1234567 + i, acc ^ x);
    INT_CASE(long, MPI_LONG, MPI_SUM, (long)r * 100000000000L + i, acc + x);
    INT_CASE(long long, MPI_LONG_LONG, MPI_MAX, (long long)(r - 2) * (i + 1), acc > x ? acc : x);
    INT_CASE(short, MPI_SHORT, MPI_MIN, (short)(r * 5 - i * 3), acc < x ? acc : x);
    INT_CASE(unsigned short, MPI_UNSIGNED_SHORT, MPI_SUM, r * 1000 + i, acc + x);
    INT_CASE(unsigned, MPI_UNSIGNED, MPI_PROD, r + i + 2, acc * x);
    INT_CASE(unsigned long, MPI_UNSIGNED_LONG, MPI_BOR, 1UL << (r + i), acc | x);
    INT_CASE(unsigned long long, MPI_UNSIGNED_LONG_LONG, MPI_BXOR, (unsigned long long)r << 40 | (unsigned)i,
             acc ^ x);
    INT_CASE(signed char, MPI_SIGNED_CHAR, MPI_MAX, r - i, acc > x ? acc : x);
    INT_CASE(unsigned char, MPI_UNSIGNED_CHAR, MPI_BAND, 0xff ^ (1 << ((r + i) % 8)), acc & x);
    INT_CASE(unsigned char, MPI_BYTE, MPI_BXOR, r * 31 + i, acc ^ x);
    INT_CASE(int8_t, MPI_INT8_T, MPI_SUM, r - 2 * i, acc + x);
    INT_CASE(uint16_t, MPI_UINT16_T, MPI_MAX, r * 3 + i, acc > x ? acc : x);
    INT_CASE(int32_t, MPI_INT32_T, MPI_MIN, r * 3 - i, acc < x ? acc : x);
    INT_CASE(int64_t, MPI_INT64_T, MPI_PROD, (r % 2) + 1 + i, acc * x);
    INT_CASE(uint64_t, MPI_UINT64_T, MPI_SUM, (uint64_t)r << 33 | (unsigned)i, acc + x);
    INT_CASE(_Bool, MPI_C_BOOL, MPI_LAND, (r + i) % 3 != 0, acc && x);
    INT_CASE(_Bool, MPI_C_BOOL, MPI_LOR, r == i, acc || x);
    INT_CASE(_Bool, MPI_C_BOOL, MPI_LXOR, (r + i) % 2, acc != x);
    /* floating point: values exactly representable, so any order is exact */
    INT_CASE(double, MPI_DOUBLE, MPI_SUM, r * 0.5 + i, acc + x);
    INT_CASE(double, MPI_DOUBLE, MPI_PROD, (r % 2) ? 2.0 : 0.5 + i, acc * x);
    INT_CASE(double, MPI_DOUBLE, MPI_MIN, (r * 7 % 5) - i * 0.25, acc < x ? acc : x);
    INT_CASE(double, MPI_DOUBLE, MPI_MAX, (r * 7 % 5) - i * 0.25, acc > x ? acc : x);
    INT_CASE(float, MPI_FLOAT, MPI_SUM, r * 0.25f + i, acc + x);
    INT_CASE(float, MPI_FLOAT, MPI_MAX, r * 0.25f - i, acc > x ? acc : x);
    INT_CASE(long double, MPI_LONG_DOUBLE, MPI_SUM, r * 0.125L + i, acc + x);
    INT_CASE(long double, MPI_LONG_DOUBLE, MPI_MIN, r * 0.125L - i, acc < x ? acc : x);

    /* complex sum and product */
    {
        double _Complex in[N], out[N], want;
        float _Complex fin[N], fout[N], fwant;
        int i, r;
        for (i = 0; i < N; i++) {
            in[i] = (rank % 3 - 1) + (i - rank % 2) * I;
            fin[i] = (float)(rank + i) + 0.5f * I;
        }
        CHECK_MPI(MPI_Allreduce(in, out, N, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD));
        for (i = 0; i < N; i++) {
            want = 1;
            for (r = 0; r < size; r++)
                want *= (r % 3 - 1) + (i - r % 2) * I;
            if (out[i] != want)
                FAIL("MPI_PROD on MPI_C_DOUBLE_COMPLEX element %d: expected %g%+gi got %g%+gi", i, creal(want),
                     cimag(want), creal(out[i]), cimag(out[i]));
        }
        CHECK_MPI(MPI_Allreduce(fin, fout, N, MPI_C_FLOAT_COMPLEX, MPI_SUM, MPI_COMM_WORLD));
        for (i = 0; i < N; i++) {
            fwant = 0;
            for (r = 0; r < size; r++)
                fwant += (float)(r + i) + 0.5f * I;
            CHECK(fout[i] == fwant, "MPI_SUM on MPI_C_FLOAT_COMPLEX element %d", i);
        }
    }

    /* MINLOC / MAXLOC on every pair type; ties take the lowest index */
    {
        struct { double v; int i; } d[N], dout[N];
        struct { float v; int i; } f[N], fout[N];
        struct { long v; int i; } l[N], lout[N];
        struct { int v; int i; } ii[N], iout[N];
        struct { short v; int i; } s[N], sout[N];
        struct { long double v; int i; } ld[N], ldout[N];
        int i, r;
        for (i = 0; i < N; i++) {
            int v = (rank * 13 + i * 7) % 5;
            d[i].v = v;
            f[i].v = (float)v;
            l[i].v = v;
            ii[i].v = v;
            s[i].v = (short)v;
            ld[i].v = v;
            d[i].i = f[i].i = l[i].i = ii[i].i = s[i].i = ld[i].i = rank * 10 + i;
        }
        CHECK_MPI(MPI_Allreduce(d, dout, N, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(f, fout, N, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(l, lout, N, MPI_LONG_INT, MPI_MINLOC, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(ii, iout, N, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(s, sout, N, MPI_SHORT_INT, MPI_MINLOC, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Allreduce(ld, ldout, N, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
        for (i = 0; i < N; i++) {
            int minv = 99, mini = -1, maxv = -1, maxi = -1;
            for (r = 0; r < size; r++) {
                int v = (r * 13 + i * 7) % 5;
                if (v < minv) {
                    minv = v;
                    mini = r * 10 + i;
                }
                if (v > maxv) {
                    maxv = v;
                    maxi = r * 10 + i;
                }
            }
            CHECK(dout[i].v == minv && dout[i].i == mini, "MINLOC MPI_DOUBLE_INT %d: (%g,%d) want (%d,%d)", i,
                  dout[i].v, dout[i].i, minv, mini);
            CHECK(fout[i].v == maxv && fout[i].i == maxi, "MAXLOC MPI_FLOAT_INT %d", i);
            CHECK(lout[i].v == minv && lout[i].i == mini, "MINLOC MPI_LONG_INT %d", i);
            CHECK(iout[i].v == maxv && iout[i].i == maxi, "MAXLOC MPI_2INT %d", i);
            CHECK(sout[i].v == minv && sout[i].i == mini, "MINLOC MPI_SHORT_INT %d", i);
            CHECK(ldout[i].v == maxv && ldout[i].i == maxi, "MAXLOC MPI_LONG_DOUBLE_INT %d", i);
        }
    }

    /* MPI_Reduce_local */
    {
        int a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
        CHECK_MPI(MPI_Reduce_local(a, b, 3, MPI_INT, MPI_SUM));
        CHECK(b[0] == 11 && b[1] == 22 && b[2] == 33, "MPI_Reduce_local sum");
    }
    {
        /* Large, and the input left as it was. */
        enum { BIG = 1 << 18 };
        double *x = malloc(BIG * sizeof *x), *y = malloc(BIG * sizeof *y);
        int i, bad = 0;
        CHECK(x && y, "malloc");
        for (i = 0; i < BIG; i++) {
            x[i] = i;
            y[i] = 0.5 * i;
        }
        CHECK_MPI(MPI_Reduce_local(x, y, BIG, MPI_DOUBLE, MPI_MAX));
        CHECK_MPI(MPI_Reduce_local(x, y, BIG, MPI_DOUBLE, MPI_SUM));
        for (i = 0; i < BIG; i++)
            bad += x[i] != i || y[i] != 2.0 * i;
        CHECK_EQ(0, bad, "MPI_Reduce_local of %d doubles: wrong elements", BIG);
        free(x);
        free(y);
    }
}

static void user_ops(void)
{
    MPI_Op mop, xop;
    MPI_Datatype mt;
    mat in[3], out[3], scan[3];
    int commute = -1, root, i;
    unsigned u, uo;

    CHECK_MPI(MPI_Type_contiguous(4, MPI_UNSIGNED, &mt));
    CHECK_MPI(MPI_Type_commit(&mt));
    CHECK_MPI(MPI_Op_create(matmul_op, 0, &mop));
    CHECK_MPI(MPI_Op_create(xor_op, 1, &xop));
    CHECK_MPI(MPI_Op_commutative(mop, &commute));
    CHECK_EQ(0, commute, "MPI_Op_commutative of the matrix product");
    CHECK_MPI(MPI_Op_commutative(xop, &commute));
    CHECK_EQ(1, commute, "MPI_Op_commutative of xor");
    CHECK_MPI(MPI_Op_commutative(MPI_SUM, &commute));
    CHECK_EQ(1, commute, "MPI_Op_commutative of MPI_SUM");

    /* MPI_Reduce_local with it: inoutbuf = inbuf o inoutbuf, in that order. */
    for (i = 0; i < 3; i++) {
        in[i] = mat_of(1, i);
        out[i] = mat_of(2, i);
    }
    CHECK_MPI(MPI_Reduce_local(in, out, 3, mt, mop));
    check_mats(out, 3, 1, 3, "MPI_Reduce_local with a non-commutative op");

    for (i = 0; i < 3; i++)
        in[i] = mat_of(rank, i);
    for (root = 0; root < size; root++) {
        memset(out, 0, sizeof out);
        CHECK_MPI(MPI_Reduce(in, out, 3, mt, mop, root, MPI_COMM_WORLD));
        if (rank == root)
            check_mats(out, 3, 0, size, "MPI_Reduce with a non-commutative op");
    }
    memset(out, 0, sizeof out);
    CHECK_MPI(MPI_Allreduce(in, out, 3, mt, mop, MPI_COMM_WORLD));
    check_mats(out, 3, 0, size, "MPI_Allreduce with a non-commutative op");
    CHECK_MPI(MPI_Scan(in, scan, 3, mt, mop, MPI_COMM_WORLD));
    check_mats(scan, 3, 0, rank + 1, "MPI_Scan with a non-commutative op");
    CHECK_MPI(MPI_Exscan(in, scan, 3, mt, mop, MPI_COMM_WORLD));
    if (rank > 0)
        check_mats(scan, 3, 0, rank, "MPI_Exscan with a non-commutative op");
    {
        mat *all = (mat *)malloc(sizeof(mat) * (size_t)size), got;
        for (i = 0; i < size; i++)
            all[i] = mat_of(rank, i);
        CHECK_MPI(MPI_Reduce_scatter_block(all, &got, 1, mt, mop, MPI_COMM_WORLD));
        {
            mat w = mat_of(0, rank);
            int r, j;
            for (r = 1; r < size; r++)
                w = matmul(w, mat_of(r, rank));
            for (j = 0; j < 4; j++)
                CHECK(got.m[j] == w.m[j], "MPI_Reduce_scatter_block with a non-commutative op, entry %d", j);
        }
        free(all);
    }
    /* a non-blocking reduction with a user op */
    {
        MPI_Request rq;
        memset(out, 0, sizeof out);
        CHECK_MPI(MPI_Iallreduce(in, out, 3, mt, mop, MPI_COMM_WORLD, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        check_mats(out, 3, 0, size, "MPI_Iallreduce with a non-commutative op");
    }
    u = 1u << (rank % 32);
    CHECK_MPI(MPI_Allreduce(&u, &uo, 1, MPI_UNSIGNED, xop, MPI_COMM_WORLD));
    {
        unsigned w = 0;
        int r;
        for (r = 0; r < size; r++)
            w ^= 1u << (r % 32);
        CHECK_EQ(w, uo, "MPI_Allreduce with a commutative user op");
    }
    /* a user op on a non-contiguous datatype: every other unsigned of a vector */
    {
        MPI_Datatype v;
        MPI_Op vop;
        unsigned vin[8], vout[8];
        CHECK_MPI(MPI_Op_create(xor_vec_op, 1, &vop));
        CHECK_MPI(MPI_Type_vector(4, 1, 2, MPI_UNSIGNED, &v));
        CHECK_MPI(MPI_Type_commit(&v));
        for (i = 0; i < 8; i++) {
            vin[i] = (unsigned)(rank * 16 + i);
            vout[i] = 0xdddddddd;
        }
        CHECK_MPI(MPI_Allreduce(vin, vout, 1, v, vop, MPI_COMM_WORLD));
        for (i = 0; i < 8; i++) {
            unsigned w = 0;
            int r;
            for (r = 0; r < size; r++)
                w ^= (unsigned)(r * 16 + i);
            if (i % 2 == 0)
                CHECK_EQ(w, vout[i], "user op on a vector datatype, element %d", i);
            else
                CHECK_EQ(0xdddddddd, vout[i], "user op on a vector datatype leaves gap %d", i);
        }
        CHECK_MPI(MPI_Type_free(&v));
        CHECK_MPI(MPI_Op_free(&vop));
    }
    CHECK_MPI(MPI_Op_free(&mop));
    CHECK(mop == MPI_OP_NULL, "MPI_Op_free resets the handle");
    CHECK_MPI(MPI_Op_free(&xop));
    CHECK_MPI(MPI_Type_free(&mt));
}

static void errors(void)
{
    double d = 1, dout;
    int x = 1, xo, rc;
    MPI_Op op = MPI_SUM;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* errors on MPI_COMM_NULL go to MPI_COMM_SELF's handler */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    rc = MPI_Allreduce(&d, &dout, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_OP, "MPI_BAND on MPI_DOUBLE");
    rc = MPI_Allreduce(&x, &xo, 1, MPI_INT, MPI_MINLOC, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_OP, "MPI_MINLOC on MPI_INT");
    rc = MPI_Reduce(&x, &xo, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_OP, "MPI_OP_NULL");
    rc = MPI_Op_free(&op);
    tc_expect_class(rc, MPI_ERR_OP, "freeing MPI_SUM");
    rc = MPI_Bcast(&x, 1, MPI_INT, size, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_ROOT, "MPI_Bcast root out of range");
    rc = MPI_Reduce(&x, &xo, 1, MPI_INT, MPI_SUM, -5, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_ROOT, "MPI_Reduce negative root");
    rc = MPI_Gather(&x, 1, MPI_INT, &xo, 1, MPI_INT, size + 3, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_ROOT, "MPI_Gather root out of range");
    rc = MPI_Allreduce(&x, &xo, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_COUNT, "MPI_Allreduce negative count");
    rc = MPI_Bcast(&x, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_TYPE, "MPI_Bcast MPI_DATATYPE_NULL");
    rc = MPI_Allreduce(&x, &xo, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL);
    tc_expect_class(rc, MPI_ERR_COMM, "MPI_Allreduce on MPI_COMM_NULL");
    if (tc_is_tandem()) {
        /* Other MPIs need not check (the standard leaves it open). */
        rc = MPI_Bcast(NULL, 4, MPI_INT, 0, MPI_COMM_WORLD);
        tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Bcast NULL buffer");
    }
    if (size > 1) {
        rc = MPI_Reduce(MPI_IN_PLACE, &xo, 1, MPI_INT, MPI_SUM, rank == 0 ? 1 : 0, MPI_COMM_WORLD);
        /* Tandem says MPI_ERR_BUFFER; Open MPI says MPI_ERR_ARG. */
        tc_expect_class(rc, tc_is_tandem() ? MPI_ERR_BUFFER : MPI_ERR_ARG, "MPI_IN_PLACE at a non-root");
    }
    if (tc_is_tandem()) {
        /* MPI_IN_PLACE (the address 1 in Tandem) was read as a buffer. */
        int a[2] = {1, 2};
        rc = MPI_Reduce_local(MPI_IN_PLACE, a, 2, MPI_INT, MPI_SUM);
        tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Reduce_local with MPI_IN_PLACE as inbuf");
        rc = MPI_Reduce_local(a, MPI_IN_PLACE, 2, MPI_INT, MPI_SUM);
        tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Reduce_local with MPI_IN_PLACE as inoutbuf");
        rc = MPI_Reduce_local(a, a, 2, MPI_INT, MPI_SUM);
        tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Reduce_local of a buffer with itself");
        CHECK(a[0] == 1 && a[1] == 2, "a refused MPI_Reduce_local leaves the buffer alone");
    }
    if (tc_is_tandem()) {
        /* One buffer as both send and receive buffer (erroneous; MPI_IN_PLACE
         * is the way): every rank is refused at once, none waits, and the
         * buffer is left alone. Zero elements alias nothing. */
        int *b = malloc((size_t)size * 2 * sizeof(int));
        for (int i = 0; i < 2 * size; i++)
            b[i] = 100 + i;
        tc_expect_class(MPI_Allreduce(b, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                        "MPI_Allreduce with sendbuf == recvbuf");
        tc_expect_class(MPI_Allgather(b, 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                        "MPI_Allgather with sendbuf == recvbuf");
        tc_expect_class(MPI_Alltoall(b, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                        "MPI_Alltoall with sendbuf == recvbuf");
        for (int i = 0; i < 2 * size; i++)
            CHECK(b[i] == 100 + i, "a refused aliased collective leaves the buffer alone (int %d)", i);
        CHECK_MPI(MPI_Allreduce(b, b, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        /* Overlapping, not equal: &b[2 * rank] inside b is refused on every
         * rank, not only where the addresses coincide (rank 0), so no rank
         * starts a collective the others refused. */
        tc_expect_class(MPI_Allgather(&b[2 * rank], 2, MPI_INT, b, 2, MPI_INT, MPI_COMM_WORLD),
                        MPI_ERR_BUFFER, "MPI_Allgather with sendbuf inside recvbuf");
        int *counts = malloc((size_t)size * sizeof(int)), *displs = malloc((size_t)size * sizeof(int));
        for (int i = 0; i < size; i++) {
            counts[i] = 2;
            displs[i] = 2 * i;
        }
        tc_expect_class(MPI_Allgatherv(&b[2 * rank], 2, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD),
                        MPI_ERR_BUFFER, "MPI_Allgatherv with sendbuf inside recvbuf");
        tc_expect_class(MPI_Alltoallv(b, counts, displs, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD),
                        MPI_ERR_BUFFER, "MPI_Alltoallv with sendbuf == recvbuf");
        tc_expect_class(MPI_Reduce_scatter_block(b, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                        "MPI_Reduce_scatter_block with sendbuf == recvbuf");
        /* Rooted ones are refused at the root before anything is sent, so the
         * root alone can make the call and return. */
        if (rank == 0) {
            tc_expect_class(MPI_Gatherv(b, 2, MPI_INT, b, counts, displs, MPI_INT, 0, MPI_COMM_WORLD),
                            MPI_ERR_BUFFER, "MPI_Gatherv with sendbuf == recvbuf at the root");
            tc_expect_class(MPI_Scatterv(b, counts, displs, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD),
                            MPI_ERR_BUFFER, "MPI_Scatterv with sendbuf == recvbuf at the root");
            tc_expect_class(MPI_Gather(&b[1], 2, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                            "MPI_Gather with sendbuf inside recvbuf at the root");
        }
        for (int i = 0; i < 2 * size; i++)
            CHECK(b[i] == 100 + i, "a refused overlapping collective leaves the buffer alone (int %d)", i);
        free(counts);
        free(displs);
        free(b);
    }
    {
        MPI_Datatype t;
        CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &t));
        rc = MPI_Bcast(&x, 1, t, 0, MPI_COMM_WORLD);
        tc_expect_class(rc, MPI_ERR_TYPE, "an uncommitted datatype");
        CHECK_MPI(MPI_Type_free(&t));
    }
    if (size > 1) {
        /* The root sends more than the others take: each of them gets
         * MPI_ERR_TRUNCATE, and none is left waiting for a rank that failed
         * before forwarding (a broadcast tree). */
        int big[8] = {0}, j, k;
        MPI_Request req;
        for (k = 0; k < 2; k++) {
            for (j = 0; j < 8; j++)
                big[j] = rank == 0 ? 40 + j : -1;
            if (k == 0) {
                rc = MPI_Bcast(big, rank == 0 ? 8 : 1, MPI_INT, 0, MPI_COMM_WORLD);
            } else {
                rc = MPI_Ibcast(big, rank == 0 ? 8 : 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
                if (rc == MPI_SUCCESS)
                    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            /* A rank fed by another non-root may get just what it asked for. */
            if (rank != 0) {
                if (rc != MPI_SUCCESS)
                    tc_expect_class(rc, MPI_ERR_TRUNCATE,
                                    k ? "MPI_Ibcast into a smaller buffer" : "MPI_Bcast into a smaller buffer");
                CHECK_EQ(40, big[0], "the start of a truncated broadcast arrives");
                CHECK_EQ(-1, big[1], "nothing past the receive count is written");
            } else {
                CHECK_MPI(rc);
            }
            j = rc != MPI_SUCCESS;
            CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &j, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            CHECK(j >= 1, "some rank saw the truncated broadcast");
        }
    }
    if (size > 1) {
        /* The root sends less than the others expect (counts that disagree):
         * a rank the root sends to directly says so, with MPI_ERR_OTHER
         * naming both sizes, rather than returning a half-filled buffer as
         * if all were well. */
        int big[8], j, k;
        MPI_Request req;
        for (k = 0; k < 2; k++) {
            for (j = 0; j < 8; j++)
                big[j] = rank == 0 ? 60 + j : -1;
            if (k == 0) {
                rc = MPI_Bcast(big, rank == 0 ? 1 : 8, MPI_INT, 0, MPI_COMM_WORLD);
            } else {
                rc = MPI_Ibcast(big, rank == 0 ? 1 : 8, MPI_INT, 0, MPI_COMM_WORLD, &req);
                if (rc == MPI_SUCCESS)
                    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            if (rank == 0)
                CHECK_MPI(rc);
            else if (rc != MPI_SUCCESS)
                tc_expect_class(rc, MPI_ERR_OTHER, k ? "MPI_Ibcast of fewer elements than expected"
                                                     : "MPI_Bcast of fewer elements than expected");
            if (rank != 0)
                CHECK_EQ(60, big[0], "the elements the root sent arrive");
            j = rank != 0 && rc != MPI_SUCCESS;
            CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &j, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            if (tc_is_tandem())
                CHECK(j >= 1, "some rank saw the short broadcast");
        }
        /* A two-rank allreduce whose counts disagree (more ranks could pick
         * different algorithms for the two sizes, and wait for each other). */
        if (size == 2) {
            int in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
            rc = MPI_Allreduce(in, out, rank == 0 ? 1 : 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            j = rc != MPI_SUCCESS;
            CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &j, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            if (tc_is_tandem())
                CHECK(j >= 1, "some rank saw the allreduce whose counts disagree");
        }
    }
    /* everything still works */
    CHECK_MPI(MPI_Allreduce(&x, &xo, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(size, xo, "MPI_Allreduce after errors");
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    predefined_ops();
    user_ops();
    errors();
    return tc_finish(NAME);
}

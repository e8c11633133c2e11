/*
 * dt_roundtrip.c - derived datatypes through every path.
 *
 * Types: vector, indexed, a matrix column resized to one int (the transpose
 * trick), a padded struct {int; double; char[3]}, a 2-D subarray,
 * indexed_block of shorts, hvector with a negative stride, contiguous of a
 * vector, and a dup. For each, the test knows the bytes one element covers
 * (its own reference typemap) and checks:
 *
 *   1. MPI_Type_size, MPI_Type_get_extent, MPI_Type_get_true_extent, names
 *      (MPI_Type_set_name/get_name), MPI_Type_get_envelope's combiner;
 *   2. MPI_Pack_size, MPI_Pack and MPI_Unpack against the reference packing;
 *   3. point-to-point both ways between ranks 0 and 1 (derived -> bytes and
 *      bytes -> derived), with counts giving small (eager) messages and
 *      ones above 64 KiB (rendezvous under every default eager limit),
 *      blocking and non-blocking, MPI_Get_count and
 *      MPI_Get_elements on the status (a partial message too), gaps between
 *      blocks left untouched, and MPI_Sendrecv_replace; MPI_Get_elements
 *      counts each MPI_DOUBLE_INT as two basic elements;
 *   4. collectives on derived types: MPI_Bcast, MPI_Gather into column
 *      types, MPI_Alltoall of structs, MPI_Allreduce(MPI_SUM) on a vector of
 *      doubles, MPI_Iallgather.
 */
#include "check.h"

#include <stddef.h>

#define NAME "dt_roundtrip"

static int rank, size;

typedef struct {
    int a;
    double b;
    char c[3];
} rec;

/* A reference description: blocks (byte offset, length) of one element. */
typedef struct {
    const char *name;
    MPI_Datatype t;
    int nblocks;
    long off[16];
    long len[16];
    long extent, lb;
    int prims; /* primitive values in one element */
    int combiner;
} ref_t;

static long ref_size(const ref_t *r)
{
    long s = 0;
    int i;
    for (i = 0; i < r->nblocks; i++)
        s += r->len[i];
    return s;
}

/* Bytes spanned by count elements from the buffer start (offsets may be negative). */
static void span(const ref_t *r, int count, long *lo, long *hi)
{
    int i, e;
    *lo = 0;
    *hi = 1;
    for (e = 0; e < count; e++)
        for (i = 0; i < r->nblocks; i++) {
            long a = e * r->extent + r->off[i];
            if (a < *lo)
                *lo = a;
            if (a + r->len[i] > *hi)
                *hi = a + r->len[i];
        }
}

static void ref_pack(const ref_t *r, const unsigned char *base, int count, unsigned char *out)
{
    int e, i;
    long at = 0;
    for (e = 0; e < count; e++)
        for (i = 0; i < r->nblocks; i++) {
            memcpy(out + at, base + e * r->extent + r->off[i], (size_t)r->len[i]);
            at += r->len[i];
        }
}

/* A map of the bytes in [lo, hi) that belong to one of the count elements. */
static unsigned char *coverage(const ref_t *r, int count, long lo, long hi)
{
    unsigned char *m = (unsigned char *)calloc((size_t)(hi - lo) + 1, 1);
    int e, i;
    for (e = 0; e < count; e++)
        for (i = 0; i < r->nblocks; i++)
            memset(m + (e * r->extent + r->off[i] - lo), 1, (size_t)r->len[i]);
    return m;
}

static unsigned char pat(long a, int key) { return (unsigned char)((a * 31 + key * 7 + 11) & 0xff); }

/* A buffer covering count elements, filled with the pattern; base returned. */
static unsigned char *mkbuf(const ref_t *r, int count, int key, unsigned char **mem, long *lo_out, long *hi_out)
{
    long lo, hi, a;
    span(r, count, &lo, &hi);
    *mem = (unsigned char *)malloc((size_t)(hi - lo) + 16);
    for (a = lo; a < hi; a++)
        (*mem)[a - lo] = pat(a, key);
    *lo_out = lo;
    *hi_out = hi;
    return *mem - lo;
}

/* Checks that covered bytes hold the pattern and the others hold `poison`. */
static void check_unpacked(const ref_t *r, int count, const unsigned char *base, long lo, long hi, int key,
                           const char *what)
{
    long a;
    unsigned char *m = coverage(r, count, lo, hi);
    for (a = lo; a < hi; a++) {
        unsigned char want = m[a - lo] ? pat(a, key) : 0xEE;
        if (base[a] != want)
            FAIL("%s (%s, count %d): byte %ld expected 0x%02x got 0x%02x", what, r->name, count, a, want, base[a]);
    }
    free(m);
}

static void poison_span(unsigned char *base, long lo, long hi)
{
    memset(base + lo, 0xEE, (size_t)(hi - lo));
}

static void check_queries(ref_t *r)
{
    int sz, ni, na, nd, comb, len;
    MPI_Aint lb, ext, tlb, text;
    char name[MPI_MAX_OBJECT_NAME];
    long lo = 1L << 40, hi = -(1L << 40);
    int i;
    CHECK_MPI(MPI_Type_size(r->t, &sz));
    CHECK_EQ(ref_size(r), sz, "MPI_Type_size of %s", r->name);
    CHECK_MPI(MPI_Type_get_extent(r->t, &lb, &ext));
    CHECK_EQ(r->extent, ext, "extent of %s", r->name);
    CHECK_EQ(r->lb, lb, "lower bound of %s", r->name);
    for (i = 0; i < r->nblocks; i++) {
        if (r->off[i] < lo)
            lo = r->off[i];
        if (r->off[i] + r->len[i] > hi)
            hi = r->off[i] + r->len[i];
    }
    CHECK_MPI(MPI_Type_get_true_extent(r->t, &tlb, &text));
    CHECK_EQ(lo, tlb, "true lower bound of %s", r->name);
    CHECK_EQ(hi - lo, text, "true extent of %s", r->name);
    CHECK_MPI(MPI_Type_set_name(r->t, (char *)r->name));
    CHECK_MPI(MPI_Type_get_name(r->t, name, &len));
    CHECK(strcmp(name, r->name) == 0, "MPI_Type_get_name of %s gave '%s'", r->name, name);
    CHECK_MPI(MPI_Type_get_envelope(r->t, &ni, &na, &nd, &comb));
    CHECK_EQ(r->combiner, comb, "combiner of %s", r->name);
}

static void check_pack(const ref_t *r, int count)
{
    unsigned char *mem, *base, *packed, *mine, *back_mem, *back;
    long lo, hi, n = ref_size(r) * count;
    int psize, pos = 0;
    base = mkbuf(r, count, 1, &mem, &lo, &hi);
    CHECK_MPI(MPI_Pack_size(count, r->t, MPI_COMM_WORLD, &psize));
    CHECK(psize >= n, "MPI_Pack_size of %s x %d: %d < %ld", r->name, count, psize, n);
    packed = (unsigned char *)malloc((size_t)psize + 1);
    mine = (unsigned char *)malloc((size_t)n + 1);
    CHECK_MPI(MPI_Pack(base, count, r->t, packed, psize, &pos, MPI_COMM_WORLD));
    CHECK_EQ(n, pos, "MPI_Pack position of %s", r->name);
    ref_pack(r, base, count, mine);
    CHECK(memcmp(packed, mine, (size_t)n) == 0, "MPI_Pack of %s x %d matches the reference", r->name, count);
    back = mkbuf(r, count, 1, &back_mem, &lo, &hi);
    poison_span(back, lo, hi);
    pos = 0;
    CHECK_MPI(MPI_Unpack(packed, psize, &pos, back, count, r->t, MPI_COMM_WORLD));
    CHECK_EQ(n, pos, "MPI_Unpack position of %s", r->name);
    check_unpacked(r, count, back, lo, hi, 1, "MPI_Unpack");
    free(mem);
    free(back_mem);
    free(packed);
    free(mine);
}

static void check_p2p(const ref_t *r, int count, int nonblocking)
{
    long lo, hi, n = ref_size(r) * count;
    unsigned char *mem, *base, *bytes = (unsigned char *)malloc((size_t)n + 1), *want = (unsigned char *)malloc((size_t)n + 1);
    MPI_Status st;
    int got = -1;
    if (size < 2 || rank > 1)
        goto out;
    base = mkbuf(r, count, count % 13, &mem, &lo, &hi);
    if (rank == 0) {
        /* derived out, bytes back into the derived type */
        if (nonblocking) {
            MPI_Request rq;
            CHECK_MPI(MPI_Isend(base, count, r->t, 1, 5, MPI_COMM_WORLD, &rq));
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else {
            CHECK_MPI(MPI_Send(base, count, r->t, 1, 5, MPI_COMM_WORLD));
        }
        poison_span(base, lo, hi);
        if (nonblocking) {
            MPI_Request rq;
            CHECK_MPI(MPI_Irecv(base, count, r->t, 1, 6, MPI_COMM_WORLD, &rq));
            CHECK_MPI(MPI_Wait(&rq, &st));
        } else {
            CHECK_MPI(MPI_Recv(base, count, r->t, 1, 6, MPI_COMM_WORLD, &st));
        }
        CHECK_MPI(MPI_Get_count(&st, r->t, &got));
        CHECK_EQ(count, got, "MPI_Get_count of %s", r->name);
        CHECK_MPI(MPI_Get_elements(&st, r->t, &got));
        CHECK_EQ(count * r->prims, got, "MPI_Get_elements of %s", r->name);
        check_unpacked(r, count, base, lo, hi, count % 13, "receive into a derived type");
        /* a partial message: one element and the first block of the next */
        if (count >= 2) {
            poison_span(base, lo, hi);
            CHECK_MPI(MPI_Recv(base, count, r->t, 1, 7, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, r->t, &got));
            CHECK_EQ(MPI_UNDEFINED, got, "MPI_Get_count of a partial %s", r->name);
            CHECK_MPI(MPI_Get_elements(&st, r->t, &got));
            CHECK(got > r->prims && got < 2 * r->prims, "MPI_Get_elements of a partial %s: %d", r->name, got);
        }
    } else {
        CHECK_MPI(MPI_Recv(bytes, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &got));
        CHECK_EQ(n, got, "bytes of %s x %d", r->name, count);
        ref_pack(r, base, count, want);
        CHECK(memcmp(bytes, want, (size_t)n) == 0, "packed %s x %d arrives as the reference packing", r->name, count);
        CHECK_MPI(MPI_Send(bytes, (int)n, MPI_BYTE, 0, 6, MPI_COMM_WORLD));
        if (count >= 2)
            CHECK_MPI(MPI_Send(bytes, (int)(ref_size(r) + r->len[0]), MPI_BYTE, 0, 7, MPI_COMM_WORLD));
    }
    free(mem);
out:
    free(bytes);
    free(want);
}

static void check_bcast(const ref_t *r, int count)
{
    long lo, hi;
    unsigned char *mem, *base = mkbuf(r, count, 3, &mem, &lo, &hi);
    if (rank != 0)
        poison_span(base, lo, hi);
    else {
        long a;
        unsigned char *m = coverage(r, count, lo, hi);
        for (a = lo; a < hi; a++)
            if (!m[a - lo])
                base[a] = 0xEE;
        free(m);
    }
    CHECK_MPI(MPI_Bcast(base, count, r->t, 0, MPI_COMM_WORLD));
    check_unpacked(r, count, base, lo, hi, 3, "MPI_Bcast");
    free(mem);
}

/* MPI_Get_elements counts basic elements: each MPI_DOUBLE_INT is a double
 * and an int, so a struct {double; int} received as pairs counts two per
 * pair, and a pair cut after its double counts that double. */
static void check_pair_elements(void)
{
    struct {
        double a;
        int b;
    } out[2] = {{1.5, 2}, {3.5, 4}}, in[2];
    MPI_Status st;
    int n = -1;
    CHECK_MPI(MPI_Sendrecv(out, 2, MPI_DOUBLE_INT, 0, 5, in, 2, MPI_DOUBLE_INT, 0, 5, MPI_COMM_SELF, &st));
    CHECK_MPI(MPI_Get_elements(&st, MPI_DOUBLE_INT, &n));
    CHECK_EQ(4, n, "MPI_Get_elements of two MPI_DOUBLE_INT");
    CHECK_MPI(MPI_Get_count(&st, MPI_DOUBLE_INT, &n));
    CHECK_EQ(2, n, "MPI_Get_count of two MPI_DOUBLE_INT");
    CHECK(in[1].a == 3.5 && in[1].b == 4, "MPI_DOUBLE_INT values received");
    /* One whole pair and the double of the next (packed: 12 + 8 bytes). */
    unsigned char packed[64];
    int pos = 0;
    CHECK_MPI(MPI_Pack(out, 1, MPI_DOUBLE_INT, packed, sizeof packed, &pos, MPI_COMM_SELF));
    CHECK_MPI(MPI_Pack(&out[1].a, 1, MPI_DOUBLE, packed, sizeof packed, &pos, MPI_COMM_SELF));
    CHECK_MPI(MPI_Sendrecv(packed, pos, MPI_PACKED, 0, 6, in, 2, MPI_DOUBLE_INT, 0, 6, MPI_COMM_SELF, &st));
    CHECK_MPI(MPI_Get_elements(&st, MPI_DOUBLE_INT, &n));
    CHECK_EQ(3, n, "MPI_Get_elements of one and a half MPI_DOUBLE_INT");
    CHECK_MPI(MPI_Get_count(&st, MPI_DOUBLE_INT, &n));
    CHECK_EQ(MPI_UNDEFINED, n, "MPI_Get_count of one and a half MPI_DOUBLE_INT");
}

int main(int argc, char **argv)
{
    enum { NT = 9 };
    ref_t refs[NT];
    int i, k;
    MPI_Datatype tmp;
    CHECK_MPI(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    memset(refs, 0, sizeof refs);

    /* 0: vector(3, 2, 5) of int */
    refs[0] = (ref_t){"vec3x2s5", 0, 3, {0, 20, 40}, {8, 8, 8}, 48, 0, 6, MPI_COMBINER_VECTOR};
    CHECK_MPI(MPI_Type_vector(3, 2, 5, MPI_INT, &refs[0].t));
    /* 1: indexed {1,3,2} at {4,0,9} */
    {
        int bl[3] = {1, 3, 2}, d[3] = {4, 0, 9};
        refs[1] = (ref_t){"idx", 0, 3, {16, 0, 36}, {4, 12, 8}, 44, 0, 6, MPI_COMBINER_INDEXED};
        CHECK_MPI(MPI_Type_indexed(3, bl, d, MPI_INT, &refs[1].t));
    }
    /* 2: a column of a 4 x 6 int matrix, resized to one int */
    refs[2] = (ref_t){"column", 0, 4, {0, 24, 48, 72}, {4, 4, 4, 4}, 4, 0, 4, MPI_COMBINER_RESIZED};
    CHECK_MPI(MPI_Type_vector(4, 1, 6, MPI_INT, &tmp));
    CHECK_MPI(MPI_Type_create_resized(tmp, 0, sizeof(int), &refs[2].t));
    CHECK_MPI(MPI_Type_free(&tmp));
    /* 3: struct {int; double; char[3]} */
    {
        int bl[3] = {1, 1, 3};
        MPI_Aint d[3] = {offsetof(rec, a), offsetof(rec, b), offsetof(rec, c)};
        MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        refs[3] = (ref_t){"record", 0, 3, {offsetof(rec, a), offsetof(rec, b), offsetof(rec, c)}, {4, 8, 3}, sizeof(rec), 0, 5,
                          MPI_COMBINER_STRUCT};
        CHECK_MPI(MPI_Type_create_struct(3, bl, d, ts, &refs[3].t));
    }
    /* 4: subarray 3 x 4 at (1, 2) of a 5 x 7 int array, C order */
    {
        int sz[2] = {5, 7}, sub[2] = {3, 4}, st[2] = {1, 2};
        refs[4] = (ref_t){"subarray", 0, 3, {(1 * 7 + 2) * 4, (2 * 7 + 2) * 4, (3 * 7 + 2) * 4}, {16, 16, 16}, 35 * 4, 0, 12,
                          MPI_COMBINER_SUBARRAY};
        CHECK_MPI(MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_INT, &refs[4].t));
    }
    /* 5: indexed_block of shorts, 2 at {0, 3, 7} */
    {
        int d[3] = {0, 3, 7};
        refs[5] = (ref_t){"iblock", 0, 3, {0, 6, 14}, {4, 4, 4}, 18, 0, 6, MPI_COMBINER_INDEXED_BLOCK};
        CHECK_MPI(MPI_Type_create_indexed_block(3, 2, d, MPI_SHORT, &refs[5].t));
    }
    /* 6: hvector of 3 doubles with stride -16 bytes */
    refs[6] = (ref_t){"hvecneg", 0, 3, {0, -16, -32}, {8, 8, 8}, 40, -32, 3, MPI_COMBINER_HVECTOR};
    CHECK_MPI(MPI_Type_create_hvector(3, 1, -16, MPI_DOUBLE, &refs[6].t));
    /* 7: contiguous(2) of vector(2, 1, 3) of int: blocks at 0, 12, 16, 28 */
    refs[7] = (ref_t){"contig_vec", 0, 4, {0, 12, 16, 28}, {4, 4, 4, 4}, 32, 0, 4, MPI_COMBINER_CONTIGUOUS};
    CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_INT, &tmp));
    CHECK_MPI(MPI_Type_contiguous(2, tmp, &refs[7].t));
    CHECK_MPI(MPI_Type_free(&tmp));
    /* 8: a dup of the record type */
    refs[8] = refs[3];
    refs[8].name = "record_dup";
    refs[8].combiner = MPI_COMBINER_DUP;
    for (i = 0; i < NT - 1; i++)
        CHECK_MPI(MPI_Type_commit(&refs[i].t));
    CHECK_MPI(MPI_Type_dup(refs[3].t, &refs[8].t));

    {
        char name[MPI_MAX_OBJECT_NAME];
        int len;
        CHECK_MPI(MPI_Type_get_name(MPI_DOUBLE, name, &len));
        CHECK(strcmp(name, "MPI_DOUBLE") == 0, "the name of MPI_DOUBLE (got '%s')", name);
    }
    for (i = 0; i < NT; i++) {
        /* small, and rendezvous (packed sizes above 64 KiB) */
        int counts[4] = {1, 3, 200, (int)(100000 / ref_size(&refs[i])) + 1};
        check_queries(&refs[i]);
        for (k = 0; k < 4; k++) {
            check_pack(&refs[i], counts[k]);
            check_p2p(&refs[i], counts[k], k % 2);
            check_bcast(&refs[i], counts[k]);
        }
    }

    /* Sendrecv_replace with the column type around a ring */
    {
        int m[24], j, to = (rank + 1) % size, from = (rank + size - 1) % size;
        for (j = 0; j < 24; j++)
            m[j] = rank * 1000 + j;
        CHECK_MPI(MPI_Sendrecv_replace(m, 6, refs[2].t, to, 1, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (j = 0; j < 24; j++)
            CHECK_EQ(from * 1000 + j, m[j], "MPI_Sendrecv_replace with the column type, element %d", j);
    }
    /* Gather rows of 4 ints into columns: root gets the transpose */
    {
        int row[4], *mat = (int *)malloc(sizeof(int) * 4 * (size_t)size), j, r;
        MPI_Datatype col, colr;
        for (j = 0; j < 4; j++)
            row[j] = rank * 10 + j;
        CHECK_MPI(MPI_Type_vector(4, 1, size, MPI_INT, &col));
        CHECK_MPI(MPI_Type_create_resized(col, 0, sizeof(int), &colr));
        CHECK_MPI(MPI_Type_commit(&colr));
        CHECK_MPI(MPI_Gather(row, 4, MPI_INT, mat, 1, colr, 0, MPI_COMM_WORLD));
        if (rank == 0)
            for (j = 0; j < 4; j++)
                for (r = 0; r < size; r++)
                    CHECK_EQ(r * 10 + j, mat[j * size + r], "gathered transpose [%d][%d]", j, r);
        /* and scatter it back out as rows */
        for (j = 0; j < 4; j++)
            row[j] = -1;
        CHECK_MPI(MPI_Scatter(mat, 1, colr, row, 4, MPI_INT, 0, MPI_COMM_WORLD));
        for (j = 0; j < 4; j++)
            CHECK_EQ(rank * 10 + j, row[j], "scattered column %d", j);
        CHECK_MPI(MPI_Type_free(&col));
        CHECK_MPI(MPI_Type_free(&colr));
        free(mat);
    }
    /* Alltoall and Iallgather of records */
    {
        rec *s = (rec *)malloc(sizeof(rec) * (size_t)size), *d = (rec *)malloc(sizeof(rec) * (size_t)size);
        MPI_Request rq;
        int j;
        memset(s, 0, sizeof(rec) * (size_t)size);
        memset(d, 0xEE, sizeof(rec) * (size_t)size);
        for (j = 0; j < size; j++) {
            s[j].a = rank * 100 + j;
            s[j].b = rank + j * 0.5;
            s[j].c[0] = (char)('a' + rank % 26);
            s[j].c[2] = (char)j;
        }
        CHECK_MPI(MPI_Alltoall(s, 1, refs[3].t, d, 1, refs[3].t, MPI_COMM_WORLD));
        for (j = 0; j < size; j++)
            CHECK(d[j].a == j * 100 + rank && d[j].b == j + rank * 0.5 && d[j].c[0] == (char)('a' + j % 26) &&
                      d[j].c[2] == (char)rank,
                  "MPI_Alltoall of records from %d", j);
        memset(d, 0xEE, sizeof(rec) * (size_t)size);
        CHECK_MPI(MPI_Iallgather(&s[0], 1, refs[8].t, d, 1, refs[8].t, MPI_COMM_WORLD, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        for (j = 0; j < size; j++)
            CHECK(d[j].a == j * 100 && d[j].b == j && d[j].c[2] == 0, "MPI_Iallgather of records from %d", j);
        free(s);
        free(d);
    }
    /* Allreduce(SUM) on a vector of doubles: only the covered ones change
     * (Tandem's extension; Open MPI allows predefined ops on predefined
     * types only) */
    if (tc_is_tandem()) {
        double v[12], o[12];
        MPI_Datatype dv;
        int j;
        CHECK_MPI(MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &dv));
        CHECK_MPI(MPI_Type_commit(&dv));
        for (j = 0; j < 12; j++) {
            v[j] = rank + j;
            o[j] = -1;
        }
        CHECK_MPI(MPI_Allreduce(v, o, 1, dv, MPI_SUM, MPI_COMM_WORLD));
        for (j = 0; j < 10; j++) {
            double want = (j % 4 < 2) ? (double)size * (size - 1) / 2 + (double)size * j : -1;
            CHECK(o[j] == want, "MPI_Allreduce on a vector of doubles, element %d: %g", j, o[j]);
        }
        CHECK_MPI(MPI_Type_free(&dv));
    }
    for (i = 0; i < NT; i++) {
        CHECK_MPI(MPI_Type_free(&refs[i].t));
        CHECK(refs[i].t == MPI_DATATYPE_NULL, "MPI_Type_free resets the handle");
    }
    check_pair_elements();
    return tc_finish(NAME);
}

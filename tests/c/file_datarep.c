/*
 * file_datarep.c - MPI-IO data representations other than native.
 *
 * Ranks: any number. Each rank owns a block of N ints (and, in part 1, N
 * doubles after them) in a shared file, at an offset of its rank.
 *
 *   1. external32: ints and doubles written through an external32 view
 *      are big-endian in the file (read back raw through a native byte
 *      view and decoded by hand), and come back as written through the
 *      external32 view, also into a strided memory datatype; file extents
 *      are external32's (MPI_LONG 4 bytes, MPI_INT 4, MPI_DOUBLE 8); a view
 *      of MPI_LONG (which external32 narrows) is MPI_ERR_UNSUPPORTED_DATAREP.
 *   2. a registered representation (MPI_Register_datarep): its write
 *      function's bytes are what the file holds (each byte of an int XORed
 *      with 0x5a, checked raw), its read function turns them back, its
 *      extent function answers MPI_File_get_type_extent; registering the
 *      name again, or "external32", is MPI_ERR_DUP_DATAREP; a
 *      representation whose extent function changes an int's size is
 *      MPI_ERR_UNSUPPORTED_DATAREP at MPI_File_set_view; a conversion
 *      function that fails makes the access fail; an unknown name is
 *      MPI_ERR_UNSUPPORTED_DATAREP.
 */
#include "check.h"

#include <unistd.h>

#define NAME "file_datarep"
#define N 64

static int rank, size;
static char path[300];

static int ival(int r, int i)
{
    return (r + 1) * 100003 - i * 7919;
}

static double dval(int r, int i)
{
    return (r + 1) * 1.5e9 + i / 8.0;
}

static void file_name(void)
{
    char dir[256];
    if (rank == 0) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tandem-datarep-XXXXXX", t && *t ? t : "/tmp");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    }
    CHECK_MPI(MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD));
    snprintf(path, sizeof path, "%s/data", dir);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void external32(void)
{
    MPI_File fh;
    MPI_Offset base = (MPI_Offset)rank * N * (4 + 8);
    int ints[N], back[N];
    double dbls[N];
    for (int i = 0; i < N; i++) {
        ints[i] = ival(rank, i);
        dbls[i] = dval(rank, i);
    }
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_write_at_all(fh, base, ints, N, MPI_INT, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_File_write_at_all(fh, base + N * 4, dbls, N, MPI_DOUBLE, MPI_STATUS_IGNORE));

    MPI_Aint ext = 0;
    CHECK_MPI(MPI_File_get_type_extent(fh, MPI_LONG, &ext));
    CHECK_EQ(4, (long long)ext, "external32 extent of MPI_LONG");
    CHECK_MPI(MPI_File_get_type_extent(fh, MPI_INT, &ext));
    CHECK_EQ(4, (long long)ext, "external32 extent of MPI_INT");
    CHECK_MPI(MPI_File_get_type_extent(fh, MPI_DOUBLE, &ext));
    CHECK_EQ(8, (long long)ext, "external32 extent of MPI_DOUBLE");

    /* Back through external32, the doubles into every other slot of a
     * strided memory type. */
    memset(back, 0, sizeof back);
    CHECK_MPI(MPI_File_read_at_all(fh, base, back, N, MPI_INT, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++)
        CHECK_EQ(ival(rank, i), back[i], "int %d back through external32", i);
    {
        double strided[2 * N];
        MPI_Datatype every_other;
        CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &every_other));
        CHECK_MPI(MPI_Type_commit(&every_other));
        for (int i = 0; i < 2 * N; i++)
            strided[i] = -1.0;
        CHECK_MPI(MPI_File_read_at_all(fh, base + N * 4, strided, 1, every_other, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++) {
            CHECK(strided[2 * i] == dval(rank, i), "double %d back through external32", i);
            CHECK(strided[2 * i + 1] == -1.0, "the gaps of the memory type are left alone (%d)", i);
        }
        CHECK_MPI(MPI_Type_free(&every_other));
    }

    /* The bytes in the file: big-endian. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[N * 12];
    CHECK_MPI(MPI_File_read_at_all(fh, base, raw, N * 12, MPI_BYTE, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++) {
        CHECK_EQ((uint32_t)ival(rank, i), be32(raw + 4 * i), "int %d is big-endian in the file", i);
        uint64_t want, got = (uint64_t)be32(raw + 4 * N + 8 * i) << 32 | be32(raw + 4 * N + 8 * i + 4);
        double d = dval(rank, i);
        memcpy(&want, &d, 8);
        CHECK(got == want, "double %d is big-endian IEEE in the file", i);
    }

    tc_expect_class(MPI_File_set_view(fh, 0, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL),
                    MPI_ERR_UNSUPPORTED_DATAREP, "an external32 view of MPI_LONG (narrowed)");
    tc_expect_class(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no-such-representation", MPI_INFO_NULL),
                    MPI_ERR_UNSUPPORTED_DATAREP, "an unknown data representation");
    CHECK_MPI(MPI_File_close(&fh));
}

/* A registered representation: each byte of an int XORed with 0x5a. */
static int fail_next;

static int xor_ints(void *userbuf, MPI_Datatype dt, int count, void *filebuf, int to_file)
{
    if (dt != MPI_INT || fail_next)
        return MPI_ERR_TYPE;
    unsigned char *u = userbuf, *f = filebuf;
    for (int i = 0; i < count * 4; i++) {
        if (to_file)
            f[i] = u[i] ^ 0x5a;
        else
            u[i] = f[i] ^ 0x5a;
    }
    return MPI_SUCCESS;
}

static int xor_read(void *userbuf, MPI_Datatype dt, int count, void *filebuf, MPI_Offset pos, void *extra)
{
    CHECK(*(int *)extra == 42, "extra_state reaches the read function");
    CHECK_EQ(0, (long long)pos, "position");
    return xor_ints(userbuf, dt, count, filebuf, 0);
}

static int xor_write(void *userbuf, MPI_Datatype dt, int count, void *filebuf, MPI_Offset pos, void *extra)
{
    CHECK(*(int *)extra == 42, "extra_state reaches the write function");
    CHECK_EQ(0, (long long)pos, "position");
    return xor_ints(userbuf, dt, count, filebuf, 1);
}

static int native_extent(MPI_Datatype dt, MPI_Aint *extent, void *extra)
{
    (void)extra;
    MPI_Aint lb;
    return MPI_Type_get_extent(dt, &lb, extent);
}

static int double_extent(MPI_Datatype dt, MPI_Aint *extent, void *extra)
{
    (void)extra;
    MPI_Aint lb;
    int rc = MPI_Type_get_extent(dt, &lb, extent);
    *extent *= 2;
    return rc;
}

static void registered(void)
{
    static int extra = 42;
    MPI_File fh;
    MPI_Offset base = (MPI_Offset)rank * N * 4;
    int ints[N], back[N];
    unsigned char raw[4 * N];

    CHECK_MPI(MPI_Register_datarep("tandem-xor", xor_read, xor_write, native_extent, &extra));
    CHECK_MPI(MPI_Register_datarep("tandem-wide", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, double_extent,
                                   NULL));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Register_datarep("tandem-xor", xor_read, xor_write, native_extent, &extra),
                    MPI_ERR_DUP_DATAREP, "registering a name twice");
    tc_expect_class(MPI_Register_datarep("external32", xor_read, xor_write, native_extent, &extra),
                    MPI_ERR_DUP_DATAREP, "registering external32");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    for (int i = 0; i < N; i++)
        ints[i] = ival(rank, i);
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_File_set_view(fh, base, MPI_INT, MPI_INT, "tandem-xor", MPI_INFO_NULL));
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Offset disp;
    MPI_Datatype et, ft;
    CHECK_MPI(MPI_File_get_view(fh, &disp, &et, &ft, rep));
    CHECK(strcmp(rep, "tandem-xor") == 0, "get_view names the representation (%s)", rep);
    MPI_Aint ext = 0;
    CHECK_MPI(MPI_File_get_type_extent(fh, MPI_INT, &ext));
    CHECK_EQ(4, (long long)ext, "the extent function answers get_type_extent");
    CHECK_MPI(MPI_File_write_at_all(fh, 0, ints, N, MPI_INT, MPI_STATUS_IGNORE));
    memset(back, 0, sizeof back);
    CHECK_MPI(MPI_File_read_at_all(fh, 0, back, N, MPI_INT, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++)
        CHECK_EQ(ival(rank, i), back[i], "int %d back through the registered representation", i);

    fail_next = 1;
    int rc = MPI_File_write_at(fh, 0, ints, N, MPI_INT, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS, "a failing conversion function fails the write");
    rc = MPI_File_read_at(fh, 0, back, N, MPI_INT, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS, "a failing conversion function fails the read");
    fail_next = 0;

    CHECK_MPI(MPI_File_set_view(fh, base, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    CHECK_MPI(MPI_File_read_at_all(fh, 0, raw, 4 * N, MPI_BYTE, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++) {
        unsigned char want[4];
        int v = ival(rank, i);
        memcpy(want, &v, 4);
        for (int j = 0; j < 4; j++)
            CHECK_EQ(want[j] ^ 0x5a, raw[4 * i + j], "byte %d of int %d as the write function made it", j, i);
    }

    tc_expect_class(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "tandem-wide", MPI_INFO_NULL),
                    MPI_ERR_UNSUPPORTED_DATAREP, "a representation that changes sizes");
    CHECK_MPI(MPI_File_close(&fh));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    file_name();
    external32();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    registered();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        unlink(path);
        *strrchr(path, '/') = 0;
        rmdir(path);
    }
    return tc_finish(NAME);
}

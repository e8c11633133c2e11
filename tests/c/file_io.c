/*
 * file_io.c - MPI-IO basics: MPI_File_open's access modes and errors (a
 * missing file, an existing one with MPI_MODE_EXCL, bad and differing
 * access modes: every rank gets the same class), close, delete,
 * MPI_MODE_DELETE_ON_CLOSE, sizes, atomicity, amode, group, info, and the
 * explicit-offset accesses: each rank writes its block with one pattern
 * (contiguous, and through a strided memory datatype) and another rank
 * reads it back with another (blocking, non-blocking, collective, split
 * collective, large-count), every byte checked, counts from MPI_Get_count,
 * short reads at the end of the file. Also the file error handlers (the
 * default MPI_ERRORS_RETURN, one set on MPI_FILE_NULL, a user handler
 * called with the file and the code). Files live in a temporary directory
 * that rank 0 removes.
 */
#include "check.h"

#include <sys/stat.h>
#include <unistd.h>

#define NAME "file_io"
#define N 1000 /* ints per rank's block */

static char dir[256];

static void make_dir(void)
{
    if (tc_rank() == 0) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tandem-file-io-XXXXXX", t && *t ? t : "/tmp");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    }
    CHECK_MPI(MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD));
}

static void path(char *out, const char *name)
{
    snprintf(out, 512, "%s/%s", dir, name);
}

static int value(int rank, int i)
{
    return rank * 100003 + i * 7 + 1;
}

static int handler_calls, handler_code;
static MPI_File handler_file;

static void file_handler(MPI_File *fh, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_file = *fh;
}

/* A handler that clears the error: the call then returns MPI_SUCCESS. */
static void forgiving_handler(MPI_File *fh, int *code, ...)
{
    (void)fh;
    handler_calls++;
    *code = MPI_SUCCESS;
}

static void check_open_errors(void)
{
    int rank = tc_rank(), size = tc_size(), rc;
    char p[512];
    MPI_File fh = MPI_FILE_NULL;
    MPI_Errhandler eh;

    /* The default error handler for files returns. */
    CHECK_MPI(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "default file error handler is MPI_ERRORS_RETURN");

    path(p, "missing");
    rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    tc_expect_class(rc, MPI_ERR_NO_SUCH_FILE, "open of a missing file");
    CHECK(fh == MPI_FILE_NULL, "fh untouched by a failed open");

    path(p, "x");
    rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    tc_expect_class(rc, MPI_ERR_AMODE, "MPI_MODE_RDONLY | MPI_MODE_CREATE");
    rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDONLY | MPI_MODE_WRONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    tc_expect_class(rc, MPI_ERR_AMODE, "two of RDONLY/WRONLY/RDWR");
    rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    tc_expect_class(rc, MPI_ERR_AMODE, "none of RDONLY/WRONLY/RDWR");
    if (size > 1) {
        /* A bad mode at one rank only: every rank fails. */
        int amode = rank == size - 1 ? MPI_MODE_RDONLY | MPI_MODE_EXCL : MPI_MODE_RDWR | MPI_MODE_CREATE;
        rc = MPI_File_open(MPI_COMM_WORLD, p, amode, MPI_INFO_NULL, &fh);
        tc_expect_class(rc, MPI_ERR_AMODE, "bad access mode at the last rank");
        /* Valid but different modes. */
        amode = rank == 0 ? MPI_MODE_RDWR | MPI_MODE_CREATE : MPI_MODE_WRONLY | MPI_MODE_CREATE;
        rc = MPI_File_open(MPI_COMM_WORLD, p, amode, MPI_INFO_NULL, &fh);
        tc_expect_class(rc, MPI_ERR_NOT_SAME, "different access modes");
    }

    if (size > 1) {
        /* An open that fails at one rank only (the last one's directory is
         * missing, as on a node without the shared file system) fails at
         * every rank, with that rank's class. */
        char q[512];
        if (rank == size - 1)
            path(q, "no-such-dir/f");
        else
            path(q, "f");
        rc = MPI_File_open(MPI_COMM_WORLD, q, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
        tc_expect_class(rc, MPI_ERR_NO_SUCH_FILE, "open failing at the last rank only");
        CHECK(fh == MPI_FILE_NULL, "no file from an open failing elsewhere");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0)
            CHECK_MPI(MPI_File_delete(q, MPI_INFO_NULL));
    }

    /* Create exclusively, then again: MPI_ERR_FILE_EXISTS everywhere. */
    path(p, "excl");
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL,
                            &fh));
    CHECK_MPI(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL, "close sets MPI_FILE_NULL");
    rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL, &fh);
    tc_expect_class(rc, MPI_ERR_FILE_EXISTS, "exclusive creation of an existing file");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_MPI(MPI_File_delete(p, MPI_INFO_NULL));
        rc = MPI_File_delete(p, MPI_INFO_NULL);
        tc_expect_class(rc, MPI_ERR_NO_SUCH_FILE, "delete of a deleted file");
    }

    /* A handler on MPI_FILE_NULL gets open's errors. */
    {
        MPI_Errhandler mine;
        CHECK_MPI(MPI_File_create_errhandler(file_handler, &mine));
        CHECK_MPI(MPI_File_set_errhandler(MPI_FILE_NULL, mine));
        handler_calls = 0;
        path(p, "missing");
        rc = MPI_File_open(MPI_COMM_SELF, p, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        tc_expect_class(rc, MPI_ERR_NO_SUCH_FILE, "open of a missing file, user handler");
        CHECK_EQ(1, handler_calls, "handler calls on MPI_FILE_NULL");
        CHECK(handler_file == MPI_FILE_NULL, "handler got MPI_FILE_NULL");
        CHECK_EQ(MPI_ERR_NO_SUCH_FILE, tc_class_of(handler_code), "handler's code");
        CHECK_MPI(MPI_Errhandler_free(&mine));
        CHECK_MPI(MPI_File_create_errhandler(forgiving_handler, &mine));
        CHECK_MPI(MPI_File_set_errhandler(MPI_FILE_NULL, mine));
        CHECK_MPI(MPI_Errhandler_free(&mine));
        handler_calls = 0;
        rc = MPI_File_open(MPI_COMM_SELF, p, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        CHECK_EQ(MPI_SUCCESS, rc, "open of a missing file, handler clearing the code");
        CHECK_EQ(1, handler_calls, "clearing handler calls");
        CHECK(fh == MPI_FILE_NULL, "no file from the failed open");
        CHECK_MPI(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN));
    }
}

static void check_data(void)
{
    int rank = tc_rank(), size = tc_size(), rc, count, flag, amode, result, i;
    int next = (rank + 1) % size;
    char p[512];
    MPI_File fh;
    MPI_Status st;
    MPI_Request req;
    MPI_Offset sz;
    MPI_Group fg, wg;
    MPI_Datatype strided;
    int *out = malloc(2 * N * sizeof(int)), *in = malloc(2 * N * sizeof(int));
    MPI_Offset block = (MPI_Offset)N * sizeof(int);

    path(p, "data");
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_get_amode(fh, &amode));
    CHECK_EQ(MPI_MODE_RDWR | MPI_MODE_CREATE, amode, "amode");
    CHECK_MPI(MPI_File_get_group(fh, &fg));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Group_compare(fg, wg, &result));
    CHECK_EQ(MPI_IDENT, result, "file group");
    MPI_Group_free(&fg);
    MPI_Group_free(&wg);
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK_EQ(0, flag, "atomicity at open");
    CHECK_MPI(MPI_File_set_atomicity(fh, 1));
    CHECK_MPI(MPI_File_get_atomicity(fh, &flag));
    CHECK_EQ(1, flag, "atomicity set");

    /* 1. Contiguous blocks, one per rank, then read by the next rank
     * through a strided memory type (every other int). */
    for (i = 0; i < N; i++)
        out[i] = value(rank, i);
    CHECK_MPI(MPI_File_write_at(fh, rank * block, out, N, MPI_INT, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(N, count, "write_at count");
    CHECK_MPI(MPI_File_sync(fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_get_size(fh, &sz));
    CHECK_EQ(size * block, sz, "file size");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Type_vector(N, 1, 2, MPI_INT, &strided));
    CHECK_MPI(MPI_Type_commit(&strided));
    for (i = 0; i < 2 * N; i++)
        in[i] = -1;
    CHECK_MPI(MPI_File_read_at(fh, next * block, in, 1, strided, &st));
    CHECK_MPI(MPI_Get_count(&st, strided, &count));
    CHECK_EQ(1, count, "read_at count (strided type)");
    CHECK_MPI(MPI_Get_elements(&st, MPI_INT, &count));
    CHECK_EQ(N, count, "read_at elements");
    for (i = 0; i < 2 * N; i++)
        CHECK_EQ(i % 2 ? -1 : value(next, i / 2), in[i], "strided read, int %d", i);

    /* 2. Collective write from a strided memory type into the second half
     * of the file; non-blocking collective read back by the next rank. */
    for (i = 0; i < 2 * N; i++)
        out[i] = i % 2 ? -7 : value(rank + size, i / 2);
    CHECK_MPI(MPI_File_write_at_all(fh, (size + rank) * block, out, 1, strided, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(N, count, "write_at_all count");
    memset(in, 0, N * sizeof(int));
    CHECK_MPI(MPI_File_iread_at_all(fh, (size + next) * block, in, N, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(N, count, "iread_at_all count");
    for (i = 0; i < N; i++)
        CHECK_EQ(value(next + size, i), in[i], "iread_at_all int %d", i);

    /* 3. Non-blocking independent write, split collective read. */
    for (i = 0; i < N; i++)
        out[i] = value(rank + 2 * size, i);
    CHECK_MPI(MPI_File_iwrite_at(fh, (2 * size + rank) * block, out, N, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(N, count, "iwrite_at count");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    memset(in, 0, N * sizeof(int));
    CHECK_MPI(MPI_File_read_at_all_begin(fh, (2 * size + next) * block, in, N, MPI_INT));
    rc = MPI_File_read_at_all_begin(fh, 0, in, N, MPI_INT);
    CHECK(rc != MPI_SUCCESS, "a second split collective while one is pending");
    CHECK_MPI(MPI_File_read_at_all_end(fh, in, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(N, count, "read_at_all_end count");
    for (i = 0; i < N; i++)
        CHECK_EQ(value(next + 2 * size, i), in[i], "split read int %d", i);

    /* 4. Short reads at the end of the file, large-count forms. */
    {
        MPI_Count c;
        MPI_Offset end = 3 * size * block;
        memset(in, 0, 2 * N * sizeof(int));
        CHECK_MPI(MPI_File_read_at_c(fh, end - 10 * (MPI_Offset)sizeof(int), in, (MPI_Count)N, MPI_INT, &st));
        CHECK_MPI(MPI_Get_elements_x(&st, MPI_INT, &c));
        CHECK_EQ(10, c, "short read count");
        for (i = 0; i < 10; i++)
            CHECK_EQ(value(3 * size - 1, N - 10 + i), in[i], "short read int %d", i);
        CHECK_MPI(MPI_File_read_at(fh, end + 100, in, N, MPI_INT, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ(0, count, "read past the end");
        /* Ending inside an int: not a whole number of ints. */
        CHECK_MPI(MPI_File_read_at(fh, end - 6, in, 2, MPI_INT, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ(MPI_UNDEFINED, count, "read ending inside an int");
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK_EQ(6, count, "bytes of a read ending inside an int");
    }

    /* 5. Sizes: preallocate grows only, set_size truncates. */
    CHECK_MPI(MPI_File_preallocate(fh, 4 * size * block));
    CHECK_MPI(MPI_File_get_size(fh, &sz));
    CHECK_EQ(4 * size * block, sz, "size after preallocate");
    CHECK_MPI(MPI_File_preallocate(fh, 10));
    CHECK_MPI(MPI_File_get_size(fh, &sz));
    CHECK_EQ(4 * size * block, sz, "preallocate never shrinks");
    CHECK_MPI(MPI_File_set_size(fh, size * block));
    CHECK_MPI(MPI_File_get_size(fh, &sz));
    CHECK_EQ(size * block, sz, "size after set_size");

    /* 6. Errors go to the file's handler: MPI_ERRORS_RETURN, then a user one. */
    rc = MPI_File_read_at(fh, -4, in, 1, MPI_INT, &st);
    tc_expect_class(rc, MPI_ERR_ARG, "negative offset");
    rc = MPI_File_read_at(fh, 0, in, -1, MPI_INT, &st);
    tc_expect_class(rc, MPI_ERR_COUNT, "negative count");
    {
        MPI_Errhandler mine, got;
        CHECK_MPI(MPI_File_create_errhandler(file_handler, &mine));
        CHECK_MPI(MPI_File_set_errhandler(fh, mine));
        CHECK_MPI(MPI_File_get_errhandler(fh, &got));
        CHECK(got == mine, "get_errhandler gives the handler set");
        CHECK_MPI(MPI_Errhandler_free(&got));
        handler_calls = 0;
        rc = MPI_File_read_at(fh, -4, in, 1, MPI_INT, &st);
        tc_expect_class(rc, MPI_ERR_ARG, "negative offset, user handler");
        CHECK_EQ(1, handler_calls, "user handler calls");
        CHECK(handler_file == fh, "user handler got the file");
        CHECK_EQ(MPI_ERR_ARG, tc_class_of(handler_code), "user handler's code");
        CHECK_MPI(MPI_File_call_errhandler(fh, MPI_ERR_IO));
        CHECK_EQ(2, handler_calls, "call_errhandler");
        CHECK_EQ(MPI_ERR_IO, handler_code, "call_errhandler's code");
        CHECK_MPI(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN));
        CHECK_MPI(MPI_Errhandler_free(&mine));
    }
    CHECK_MPI(MPI_File_close(&fh));
    rc = MPI_File_read_at(fh, 0, in, 1, MPI_INT, &st);
    tc_expect_class(rc, MPI_ERR_FILE, "read on MPI_FILE_NULL");

    /* 7. Read-only and write-only files refuse the other direction. */
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    rc = MPI_File_write_at(fh, 0, out, 1, MPI_INT, &st);
    tc_expect_class(rc, MPI_ERR_READ_ONLY, "write to a read-only file");
    CHECK_MPI(MPI_File_read_at_all(fh, (MPI_Offset)next * block, in, N, MPI_INT, &st));
    for (i = 0; i < N; i++)
        CHECK_EQ(value(next, i), in[i], "read-only reopen int %d", i);
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    rc = MPI_File_read_at(fh, 0, in, 1, MPI_INT, &st);
    tc_expect_class(rc, MPI_ERR_ACCESS, "read from a write-only file");
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        CHECK_MPI(MPI_File_delete(p, MPI_INFO_NULL));

    /* 8. MPI_MODE_DELETE_ON_CLOSE, on a file of one rank (MPI_COMM_SELF). */
    {
        char q[512], name[64];
        struct stat sb;
        snprintf(name, sizeof name, "scratch.%d", rank);
        path(q, name);
        CHECK_MPI(MPI_File_open(MPI_COMM_SELF, q, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE,
                                MPI_INFO_NULL, &fh));
        CHECK_MPI(MPI_File_write_at(fh, 0, out, 4, MPI_INT, &st));
        CHECK_EQ(0, stat(q, &sb), "scratch file exists while open");
        CHECK_MPI(MPI_File_close(&fh));
        CHECK(stat(q, &sb) != 0, "scratch file deleted on close");
    }
    MPI_Type_free(&strided);
    free(out);
    free(in);
}

/* Atomic mode: every rank writes a 256 KiB region of its own byte over the
 * same bytes, then reads the region back, over and over: a read sees one
 * write whole, never bytes of two. */
static void check_atomic(void)
{
    enum { LEN = 256 * 1024, ROUNDS = 8 };
    int rank = tc_rank(), size = tc_size(), r, i;
    char p[512];
    MPI_File fh;
    MPI_Status st;
    unsigned char *w = malloc(LEN), *rd = malloc(LEN);
    path(p, "atomic");
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_set_atomicity(fh, 1));
    memset(w, 'A' + rank % 26, LEN);
    for (r = 0; r < ROUNDS; r++) {
        CHECK_MPI(MPI_File_write_at(fh, 0, w, LEN, MPI_BYTE, &st));
        CHECK_MPI(MPI_File_read_at(fh, 0, rd, LEN, MPI_BYTE, &st));
        for (i = 1; i < LEN; i++)
            if (rd[i] != rd[0])
                FAIL("atomic read round %d mixes writes: byte 0 is %c, byte %d is %c", r, rd[0], i, rd[i]);
        CHECK(rd[0] >= 'A' && rd[0] < 'A' + (size < 26 ? size : 26), "atomic read round %d: byte %c", r, rd[0]);
    }
    CHECK_MPI(MPI_File_close(&fh));
    free(w);
    free(rd);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    make_dir();
    check_open_errors();
    check_data();
    check_atomic();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (tc_rank() == 0)
        CHECK_EQ(0, rmdir(dir), "temporary directory empty and removed");
    return tc_finish(NAME);
}

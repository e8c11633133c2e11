/*
 * file_shared.c - the MPI-IO shared file pointer. Every rank appends K
 * records of R ints with MPI_File_write_shared (and MPI_File_iwrite_shared):
 * the file then holds size * K whole records, each rank's K exactly once,
 * none torn. Ordered writes (blocking and split) place the ranks' records
 * in rank order after them, of different lengths per rank; ordered reads
 * give each rank its own back. Also seek_shared (SET/CUR/END),
 * get_position_shared in etypes of a view, read_shared, MPI_MODE_APPEND
 * (both pointers start at the end), and that the hidden file holding the
 * pointer is gone after close.
 */
#include "check.h"

#include <dirent.h>
#include <unistd.h>

#define NAME "file_shared"
#define K 25 /* records per rank */
#define R 6  /* ints per record: rank, index, then a pattern */

static char dir[256];

static void make_dir(void)
{
    if (tc_rank() == 0) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tandem-file-shared-XXXXXX", t && *t ? t : "/tmp");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    }
    CHECK_MPI(MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD));
}

static void record(int *rec, int rank, int k)
{
    int j;
    rec[0] = rank;
    rec[1] = k;
    for (j = 2; j < R; j++)
        rec[j] = rank * 7919 + k * 31 + j;
}

static void check_record(const int *rec, int rank, int k, const char *what)
{
    int want[R], j;
    record(want, rank, k);
    for (j = 0; j < R; j++)
        CHECK_EQ(want[j], rec[j], "%s: record of rank %d #%d, int %d", what, rank, k, j);
}

/* Ints rank r writes in the ordered phase: (r % 3 + 1) records. */
static int ordered_records(int r)
{
    return r % 3 + 1;
}

static int entries_in_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    CHECK(d != NULL, "opendir %s", dir);
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    int rank, size, k, r, i, count, *seen, rec[R], *buf, base, mine;
    char p[512];
    MPI_File fh;
    MPI_Status st;
    MPI_Request req;
    MPI_Offset pos, sz;

    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    make_dir();
    snprintf(p, sizeof p, "%s/log", dir);
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh));
    /* A view of ints: shared positions count ints. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));

    /* 1. Independent appends through the shared pointer. */
    for (k = 0; k < K; k++) {
        record(rec, rank, k);
        if (k % 2) {
            CHECK_MPI(MPI_File_write_shared(fh, rec, R, MPI_INT, &st));
        } else {
            CHECK_MPI(MPI_File_iwrite_shared(fh, rec, R, MPI_INT, &req));
            CHECK_MPI(MPI_Wait(&req, &st));
        }
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ(R, count, "write_shared count");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK_EQ((MPI_Offset)size * K * R, pos, "shared position after the appends");
    buf = malloc((size_t)size * K * R * sizeof(int));
    seen = calloc((size_t)size * K, sizeof(int));
    CHECK_MPI(MPI_File_read_at_all(fh, 0, buf, size * K * R, MPI_INT, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(size * K * R, count, "whole log read");
    for (i = 0; i < size * K; i++) {
        const int *x = buf + (size_t)i * R;
        CHECK(x[0] >= 0 && x[0] < size && x[1] >= 0 && x[1] < K, "record %d header (%d, %d)", i, x[0], x[1]);
        check_record(x, x[0], x[1], "shared append");
        CHECK_EQ(0, seen[x[0] * K + x[1]], "record of rank %d #%d seen once", x[0], x[1]);
        seen[x[0] * K + x[1]] = 1;
    }
    free(seen);

    /* 2. Ordered writes after them: rank r writes ordered_records(r)
     * records, half blocking, half split. */
    base = size * K * R;
    mine = ordered_records(rank);
    {
        int *o = malloc((size_t)mine * R * sizeof(int));
        for (k = 0; k < mine; k++)
            record(o + k * R, rank, 1000 + k);
        CHECK_MPI(MPI_File_write_ordered(fh, o, R, MPI_INT, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ(R, count, "write_ordered count");
        CHECK_MPI(MPI_File_write_ordered_begin(fh, o + R, (mine - 1) * R, MPI_INT));
        CHECK_MPI(MPI_File_write_ordered_end(fh, o + R, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ((mine - 1) * R, count, "write_ordered_end count");
        free(o);
    }
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    {
        int total = 0;
        for (r = 0; r < size; r++)
            total += ordered_records(r);
        CHECK_EQ(base + (MPI_Offset)total * R, pos, "shared position after ordered writes");
        /* Layout: first call's records in rank order, then the second's. */
        free(buf);
        buf = malloc((size_t)total * R * sizeof(int));
        CHECK_MPI(MPI_File_read_at_all(fh, base, buf, total * R, MPI_INT, &st));
        i = 0;
        for (r = 0; r < size; r++)
            check_record(buf + (size_t)(i++) * R, r, 1000, "first ordered write");
        for (r = 0; r < size; r++)
            for (k = 1; k < ordered_records(r); k++)
                check_record(buf + (size_t)(i++) * R, r, 1000 + k, "second ordered write");
        CHECK_EQ(total, i, "records checked");
    }

    /* 3. Ordered reads from the start: rank r gets the records of the
     * appends that precede it in the order, K records each. */
    CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK_EQ(0, pos, "seek_shared SET");
    {
        int *all = malloc((size_t)size * K * R * sizeof(int)), *got = malloc((size_t)K * R * sizeof(int));
        CHECK_MPI(MPI_File_read_at_all(fh, 0, all, size * K * R, MPI_INT, &st));
        CHECK_MPI(MPI_File_read_ordered(fh, got, K * R, MPI_INT, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ(K * R, count, "read_ordered count");
        CHECK(memcmp(got, all + (size_t)rank * K * R, (size_t)K * R * sizeof(int)) == 0,
              "read_ordered gives this rank's part");
        CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
        CHECK_EQ((MPI_Offset)size * K * R, pos, "position after read_ordered");
        /* seek_shared CUR and END. */
        CHECK_MPI(MPI_File_seek_shared(fh, -R, MPI_SEEK_CUR));
        CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
        CHECK_EQ((MPI_Offset)(size * K - 1) * R, pos, "seek_shared CUR");
        CHECK_MPI(MPI_File_get_size(fh, &sz));
        CHECK_MPI(MPI_File_seek_shared(fh, 0, MPI_SEEK_END));
        CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
        CHECK_EQ(sz / (MPI_Offset)sizeof(int), pos, "seek_shared END");
        /* read_shared from the last append record: one rank gets it, the
         * others read past the end. */
        CHECK_MPI(MPI_File_seek_shared(fh, (MPI_Offset)(size * K - 1) * R, MPI_SEEK_SET));
        CHECK_MPI(MPI_File_read_shared(fh, got, R, MPI_INT, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        CHECK_EQ(R, count, "read_shared count");
        r = 0;
        CHECK_MPI(MPI_Allreduce(got[1] < K && memcmp(got, all + (size_t)(size * K - 1) * R, R * sizeof(int)) == 0
                                    ? &(int){1}
                                    : &(int){0},
                                &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK_EQ(1, r, "ranks that read the last append record");
        free(all);
        free(got);
    }
    free(buf);
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_EQ(1, entries_in_dir(), "only the log is left after close");

    /* 4. MPI_MODE_APPEND: both pointers start at the end (in bytes). */
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_WRONLY | MPI_MODE_APPEND, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ(sz, pos, "individual pointer with MPI_MODE_APPEND");
    CHECK_MPI(MPI_File_get_position_shared(fh, &pos));
    CHECK_EQ(sz, pos, "shared pointer with MPI_MODE_APPEND");
    record(rec, rank, 2000);
    CHECK_MPI(MPI_File_write_ordered(fh, rec, R, MPI_INT, &st));
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh));
    CHECK_MPI(MPI_File_read_at(fh, sz + (MPI_Offset)rank * R * sizeof(int), rec, R, MPI_INT, &st));
    check_record(rec, rank, 2000, "appended ordered record");
    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_EQ(0, entries_in_dir(), "directory empty after delete-on-close");
        CHECK_EQ(0, rmdir(dir), "temporary directory removed");
    }
    return tc_finish(NAME);
}

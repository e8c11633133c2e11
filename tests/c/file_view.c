/*
 * file_view.c - MPI-IO file views and individual file pointers. Each rank
 * sets a strided view (a filetype of B ints resized to size * B ints,
 * displaced by its rank: the ranks' blocks interleave) and writes its data
 * in two collective calls through the individual file pointer; every rank
 * then reads the whole file through the default (byte) view and checks
 * every int, and reads the blocks of another rank through that rank's view
 * into a strided memory type. Also get_view (a new filetype handle),
 * seek (SET/CUR/END), get_position, get_byte_offset, get_type_extent,
 * non-blocking and split collective forms, a vector filetype with holes
 * read at the end of the file, and the errors of set_view (an unknown data
 * representation, a filetype not made of etypes,
 * MPI_DISPLACEMENT_CURRENT without MPI_MODE_SEQUENTIAL).
 */
#include "check.h"

#include <unistd.h>

#define NAME "file_view"
#define B 7    /* ints per block */
#define NB 40  /* blocks per rank */

static char dir[256];

static void make_dir(void)
{
    if (tc_rank() == 0) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/tandem-file-view-XXXXXX", t && *t ? t : "/tmp");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    }
    CHECK_MPI(MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD));
}

static int value(int rank, int i)
{
    return rank * 1000003 + i * 3 + 5;
}

/* The filetype of rank r's interleaved blocks: B ints every size * B ints. */
static MPI_Datatype block_type(int size)
{
    MPI_Datatype contig, ft;
    CHECK_MPI(MPI_Type_contiguous(B, MPI_INT, &contig));
    CHECK_MPI(MPI_Type_create_resized(contig, 0, (MPI_Aint)size * B * sizeof(int), &ft));
    CHECK_MPI(MPI_Type_commit(&ft));
    MPI_Type_free(&contig);
    return ft;
}

static void set_rank_view(MPI_File fh, int r, MPI_Datatype ft)
{
    CHECK_MPI(MPI_File_set_view(fh, (MPI_Offset)r * B * sizeof(int), MPI_INT, ft, "native", MPI_INFO_NULL));
}

int main(int argc, char **argv)
{
    int rank, size, i, count, rc, next;
    char p[512];
    MPI_File fh;
    MPI_Status st;
    MPI_Request req;
    MPI_Datatype ft, strided;
    MPI_Offset pos, off, sz;
    const int n = NB * B; /* ints per rank */
    int *out, *in, *all;

    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    next = (rank + 1) % size;
    make_dir();
    snprintf(p, sizeof p, "%s/view", dir);
    out = malloc(2 * n * sizeof(int));
    in = malloc(2 * n * sizeof(int));
    all = malloc((size_t)size * n * sizeof(int));
    ft = block_type(size);

    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh));
    set_rank_view(fh, rank, ft);

    /* get_view gives the view back; the filetype as a new handle. */
    {
        MPI_Offset d;
        MPI_Datatype et, t;
        char rep[MPI_MAX_DATAREP_STRING];
        int tsize;
        MPI_Aint lb, ext;
        CHECK_MPI(MPI_File_get_view(fh, &d, &et, &t, rep));
        CHECK_EQ((MPI_Offset)rank * B * sizeof(int), d, "view displacement");
        CHECK(et == MPI_INT, "view etype");
        CHECK(strcmp(rep, "native") == 0, "view datarep %s", rep);
        CHECK_MPI(MPI_Type_size(t, &tsize));
        CHECK_EQ(B * sizeof(int), tsize, "view filetype size");
        CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
        CHECK_EQ((MPI_Aint)size * B * sizeof(int), ext, "view filetype extent");
        CHECK_MPI(MPI_Type_free(&t));
        CHECK_MPI(MPI_File_get_type_extent(fh, ft, &ext));
        CHECK_EQ((MPI_Aint)size * B * sizeof(int), ext, "get_type_extent");
    }

    /* Two collective writes through the individual pointer. */
    for (i = 0; i < n; i++)
        out[i] = value(rank, i);
    CHECK_MPI(MPI_File_write_all(fh, out, n / 2, MPI_INT, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(n / 2, count, "first write_all count");
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ(n / 2, pos, "position after the first write");
    CHECK_MPI(MPI_File_iwrite_all(fh, out + n / 2, n - n / 2, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(n - n / 2, count, "iwrite_all count");
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ(n, pos, "position after both writes");
    /* Byte offset of etype 3 * B + 1: tile 3, second int. */
    CHECK_MPI(MPI_File_get_byte_offset(fh, 3 * B + 1, &off));
    CHECK_EQ((MPI_Offset)(rank * B + 3 * size * B + 1) * sizeof(int), off, "get_byte_offset");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_File_get_size(fh, &sz));
    CHECK_EQ((MPI_Offset)size * n * sizeof(int), sz, "file size");

    /* Seeks: END is this rank's last etype + 1 (its block ends the file
     * only for the last rank, but every rank's view holds n ints). */
    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_END));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ(n, pos, "SEEK_END position");
    CHECK_MPI(MPI_File_seek(fh, -2 * B, MPI_SEEK_CUR));
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ(n - 2 * B, pos, "SEEK_CUR position");
    rc = MPI_File_seek(fh, -1, MPI_SEEK_SET);
    tc_expect_class(rc, MPI_ERR_ARG, "seek before the start");
    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_SET));

    /* The whole file through the byte view: every int checked. */
    CHECK_MPI(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    memset(all, 0, (size_t)size * n * sizeof(int));
    CHECK_MPI(MPI_File_read_all(fh, all, size * n, MPI_INT, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(size * n, count, "whole-file read count");
    for (i = 0; i < size * n; i++) {
        int blk = i / B, owner = blk % size, local = (blk / size) * B + i % B;
        CHECK_EQ(value(owner, local), all[i], "file int %d", i);
    }
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ((MPI_Offset)size * n * sizeof(int), pos, "byte position after the whole read");

    /* The next rank's blocks through its view, into every other int. */
    set_rank_view(fh, next, ft);
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK_EQ(0, pos, "set_view resets the position");
    CHECK_MPI(MPI_Type_vector(n, 1, 2, MPI_INT, &strided));
    CHECK_MPI(MPI_Type_commit(&strided));
    for (i = 0; i < 2 * n; i++)
        in[i] = -3;
    CHECK_MPI(MPI_File_read_all_begin(fh, in, 1, strided));
    CHECK_MPI(MPI_File_read_all_end(fh, in, &st));
    CHECK_MPI(MPI_Get_count(&st, strided, &count));
    CHECK_EQ(1, count, "strided read count");
    for (i = 0; i < 2 * n; i++)
        CHECK_EQ(i % 2 ? -3 : value(next, i / 2), in[i], "next rank's view, int %d", i);
    /* Past the end of the view's data: nothing. */
    CHECK_MPI(MPI_File_read(fh, in, 1, MPI_INT, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
    CHECK_EQ(0, count, "read past the end of the view");
    /* Explicit offsets count in etypes of the view: tile 5, int 2. */
    CHECK_MPI(MPI_File_read_at(fh, 5 * B + 2, in, 3, MPI_INT, &st));
    for (i = 0; i < 3; i++)
        CHECK_EQ(value(next, 5 * B + 2 + i), in[i], "read_at in the view, int %d", i);
    CHECK_MPI(MPI_File_iread_at(fh, B - 1, in, 2, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_EQ(value(next, B - 1), in[0], "iread_at across tiles, first");
    CHECK_EQ(value(next, B), in[1], "iread_at across tiles, second");

    /* A vector filetype with holes (2 ints of every 3): a short read at the
     * end of the file stops at the last int there. */
    {
        MPI_Datatype two, holes;
        int total = size * n, want;
        CHECK_MPI(MPI_Type_vector(1, 2, 3, MPI_INT, &two));
        CHECK_MPI(MPI_Type_create_resized(two, 0, 3 * sizeof(int), &holes));
        MPI_Type_free(&two);
        CHECK_MPI(MPI_Type_commit(&holes));
        CHECK_MPI(MPI_File_set_view(fh, 0, MPI_INT, holes, "native", MPI_INFO_NULL));
        CHECK_MPI(MPI_File_read_at(fh, 0, in, 2 * n, MPI_INT, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &count));
        want = (total / 3) * 2 + (total % 3 < 2 ? total % 3 : 2);
        if (want > 2 * n)
            want = 2 * n;
        CHECK_EQ(want, count, "holes view count");
        for (i = 0; i < count; i++) {
            int fi = (i / 2) * 3 + i % 2, blk = fi / B;
            CHECK_EQ(value(blk % size, (blk / size) * B + fi % B), in[i], "holes view int %d", i);
        }
        MPI_Type_free(&holes);
    }

    /* set_view errors, at every rank. */
    rc = MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no-such-representation", MPI_INFO_NULL);
    tc_expect_class(rc, MPI_ERR_UNSUPPORTED_DATAREP, "an unknown datarep");
    {
        MPI_Datatype three;
        CHECK_MPI(MPI_Type_contiguous(3, MPI_SHORT, &three));
        CHECK_MPI(MPI_Type_commit(&three));
        rc = MPI_File_set_view(fh, 0, MPI_INT, three, "native", MPI_INFO_NULL);
        tc_expect_class(rc, MPI_ERR_TYPE, "filetype not made of etypes");
        MPI_Type_free(&three);
    }
    rc = MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    CHECK(rc != MPI_SUCCESS, "MPI_DISPLACEMENT_CURRENT without MPI_MODE_SEQUENTIAL");

    CHECK_MPI(MPI_File_close(&fh));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_MPI(MPI_File_delete(p, MPI_INFO_NULL));
        CHECK_EQ(0, rmdir(dir), "temporary directory empty and removed");
    }
    MPI_Type_free(&strided);
    MPI_Type_free(&ft);
    free(out);
    free(in);
    free(all);
    return tc_finish(NAME);
}

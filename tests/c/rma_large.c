/*
 * rma_large.c - large one-sided transfers (64 KiB to 2 MiB), every byte
 * checked: what a target on this host serves by a direct read of its
 * memory, and through the engine otherwise (over TCP, with
 * shm_single_copy=0, dynamic windows, non-contiguous origins).
 *
 * Ranks: 2 or more; each rank reads from and writes to its right
 * neighbour.
 *   lock, many outstanding: 16 MPI_Get of distinct 128 KiB slices, then
 *               one flush; then 4 of 1 MiB with MPI_Rget.
 *   fence:      a 2 MiB get and a 2 MiB put per rank (MPI_Win_allocate).
 *   PSCW:       a 256 KiB get from the right neighbour.
 *   stores:     the target changes its window between epochs, and the
 *               next get sees the new contents, not the old.
 *   vector:     a get into a strided origin buffer (packed and unpacked).
 *   dynamic:    a 512 KiB get at an attached address.
 */
#include "check.h"

#define NAME "rma_large"
#define SLICE (128 * 1024)
#define SLICES 16
#define BIG (2 * 1024 * 1024)

/* The byte at offset i of rank r's window in round g. */
static unsigned char pattern(int r, long i, int g)
{
    return (unsigned char)(r * 31 + i * 7 + (i >> 12) + g * 13);
}

static void fill(unsigned char *m, long n, int r, int g)
{
    for (long i = 0; i < n; i++)
        m[i] = pattern(r, i, g);
}

static void expect(const unsigned char *got, long off, long n, int r, int g, const char *what)
{
    for (long i = 0; i < n; i++) {
        if (got[i] != pattern(r, off + i, g)) {
            fprintf(stderr, "%s: byte %ld of rank %d's window: expected %d got %d\n", what,
                    off + i, r, pattern(r, off + i, g), got[i]);
            CHECK(0, what);
        }
    }
}

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    unsigned char *got = malloc(BIG);
    CHECK(got != NULL, "malloc");

    /* ---- MPI_Win_create, lock: many gets outstanding, then Rget */
    long wlen = (long)SLICE * SLICES;
    unsigned char *mem = malloc(wlen);
    fill(mem, wlen, rank, 0);
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(mem, wlen, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    memset(got, 0, BIG);
    for (int k = 0; k < SLICES; k++) {
        /* Slices in reverse order: each lands where it belongs. */
        int s = SLICES - 1 - k;
        CHECK_MPI(MPI_Get(got + (long)s * SLICE, SLICE, MPI_BYTE, right, (long)s * SLICE, SLICE,
                          MPI_BYTE, win));
    }
    CHECK_MPI(MPI_Win_flush(right, win));
    expect(got, 0, wlen, right, 0, "16 outstanding gets of 128 KiB");
    MPI_Request rq[4];
    memset(got, 0, BIG);
    for (int k = 0; k < 2; k++)
        CHECK_MPI(MPI_Rget(got + (long)k * (wlen / 2), wlen / 2, MPI_BYTE, right, (long)k * (wlen / 2),
                           wlen / 2, MPI_BYTE, win, &rq[k]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    expect(got, 0, wlen, right, 0, "MPI_Rget of 1 MiB");
    CHECK_MPI(MPI_Win_unlock(right, win));

    /* ---- stores between epochs: the next get sees them */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fill(mem, wlen, rank, 1);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    CHECK_MPI(MPI_Get(got, wlen, MPI_BYTE, right, 0, wlen, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_unlock(right, win));
    expect(got, 0, wlen, right, 1, "a get after the target's own stores");

    /* ---- vector origin: a strided buffer, every other 64 KiB block */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(4, 64 * 1024, 128 * 1024, MPI_BYTE, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    memset(got, 0xEE, BIG);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    CHECK_MPI(MPI_Get(got, 1, vec, right, 0, 4 * 64 * 1024, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_unlock(right, win));
    for (int b = 0; b < 4; b++) {
        expect(got + (long)b * 128 * 1024, (long)b * 64 * 1024, 64 * 1024, right, 1, "vector origin");
        for (long i = 64 * 1024; i < 128 * 1024 && b < 3; i++)
            CHECK(got[(long)b * 128 * 1024 + i] == 0xEE, "vector origin: a gap was written");
    }
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK_MPI(MPI_Win_free(&win));
    free(mem);

    /* ---- MPI_Win_allocate, fence: 2 MiB get and put */
    unsigned char *base;
    CHECK_MPI(MPI_Win_allocate(BIG, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    fill(base, BIG, rank, 2);
    unsigned char *src = malloc(BIG);
    fill(src, BIG, rank, 3);
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Get(got, BIG, MPI_BYTE, right, 0, BIG, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    expect(got, 0, BIG, right, 2, "2 MiB get between fences");
    CHECK_MPI(MPI_Put(src, BIG, MPI_BYTE, right, 0, BIG, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    expect(base, 0, BIG, left, 3, "2 MiB put between fences");

    /* ---- PSCW: a 256 KiB get from the right neighbour */
    fill(base, BIG, rank, 4);
    MPI_Group world, one;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_incl(world, 1, &left, &one));
    CHECK_MPI(MPI_Win_post(one, 0, win));
    CHECK_MPI(MPI_Group_free(&one));
    CHECK_MPI(MPI_Group_incl(world, 1, &right, &one));
    CHECK_MPI(MPI_Win_start(one, 0, win));
    CHECK_MPI(MPI_Get(got, 256 * 1024, MPI_BYTE, right, 4096, 256 * 1024, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    expect(got, 4096, 256 * 1024, right, 4, "PSCW get of 256 KiB");
    CHECK_MPI(MPI_Group_free(&one));
    CHECK_MPI(MPI_Group_free(&world));
    CHECK_MPI(MPI_Win_free(&win));

    /* ---- dynamic window: a 512 KiB get at an attached address */
    long dlen = 512 * 1024;
    unsigned char *dmem = malloc(dlen);
    fill(dmem, dlen, rank, 5);
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_attach(win, dmem, dlen));
    MPI_Aint mine, theirs;
    CHECK_MPI(MPI_Get_address(dmem, &mine));
    CHECK_MPI(MPI_Sendrecv(&mine, 1, MPI_AINT, left, 0, &theirs, 1, MPI_AINT, right, 0, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    CHECK_MPI(MPI_Get(got, dlen, MPI_BYTE, right, theirs, dlen, MPI_BYTE, win));
    CHECK_MPI(MPI_Win_unlock(right, win));
    expect(got, 0, dlen, right, 5, "dynamic window get of 512 KiB");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_detach(win, dmem));
    CHECK_MPI(MPI_Win_free(&win));

    free(dmem);
    free(src);
    free(got);
    return tc_finish(NAME);
}

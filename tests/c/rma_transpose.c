/*
 * rma_transpose.c - one MPI_Put whose target datatype scatters a million
 * 4-byte blocks: a 1000 x 1000 matrix written transposed into the target's
 * window (the vector/hvector transpose of the MPI standard's examples).
 *
 * Ranks: 2 or more (ranks beyond 1 only take part in the fences). Rank 0
 * puts row-major data with a column-major target type; rank 1 checks every
 * element after the closing fence. Such a put was once one operation per
 * block, and completing them at the fence scanned all of them on every
 * poll, so this took minutes; its blocks now travel packed.
 */
#include "check.h"

#define NAME "rma_transpose"
#define ROWS 1000
#define COLS 1000

int main(int argc, char **argv)
{
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2, "needs 2 ranks");
    int *a = malloc(sizeof(int) * ROWS * COLS);
    CHECK(a != NULL, "malloc");
    for (int i = 0; i < ROWS * COLS; i++)
        a[i] = rank == 0 ? i : -1;
    MPI_Win win;
    CHECK_MPI(MPI_Win_create(a, rank == 1 ? sizeof(int) * ROWS * COLS : 0, sizeof(int), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 0) {
        MPI_Datatype column, xpose;
        CHECK_MPI(MPI_Type_vector(ROWS, 1, COLS, MPI_INT, &column));
        CHECK_MPI(MPI_Type_create_hvector(COLS, 1, sizeof(int), column, &xpose));
        CHECK_MPI(MPI_Type_commit(&xpose));
        CHECK_MPI(MPI_Put(a, ROWS * COLS, MPI_INT, 1, 0, 1, xpose, win));
        MPI_Type_free(&column);
        MPI_Type_free(&xpose);
    }
    CHECK_MPI(MPI_Win_fence(0, win));
    if (rank == 1) {
        /* Element (i, j) of the source lands at (j, i). */
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++)
                CHECK_EQ(i * COLS + j, a[j * ROWS + i], "element (%d, %d) of the transpose", j, i);
    }
    CHECK_MPI(MPI_Win_free(&win));
    free(a);
    tc_finish(NAME);
    return 0;
}

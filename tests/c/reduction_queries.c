/*
 * reduction_queries.c - a user-defined reduction may ask about its datatype
 * (MPI_Type_get_extent, _size, _get_true_extent, _get_envelope): those
 * calls need no library state, so they work from inside the reduction,
 * which runs while the library is busy further up the stack. The
 * reduction sums pairs of ints of a derived datatype, in MPI_Allreduce,
 * MPI_Reduce and MPI_Iallreduce.
 */
#include "check.h"

#define NAME "reduction_queries"

static int calls;

static void pair_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    MPI_Aint lb, extent, tlb, textent;
    int size, ni, na, nd, combiner;
    CHECK_MPI(MPI_Type_get_extent(*type, &lb, &extent));
    CHECK_MPI(MPI_Type_size(*type, &size));
    CHECK_MPI(MPI_Type_get_true_extent(*type, &tlb, &textent));
    CHECK_MPI(MPI_Type_get_envelope(*type, &ni, &na, &nd, &combiner));
    CHECK(extent == 2 * (MPI_Aint)sizeof(int) && size == 2 * (int)sizeof(int) && textent == extent &&
              combiner == MPI_COMBINER_CONTIGUOUS,
          "datatype queries inside the reduction (extent %ld size %d combiner %d)", (long)extent, size, combiner);
    for (int i = 0; i < 2 * *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
    calls++;
}

int main(int argc, char **argv)
{
    int rank, size, in[8], out[8];
    MPI_Datatype pair;
    MPI_Op op;
    MPI_Request req;

    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    CHECK_MPI(MPI_Op_create(pair_sum, 1, &op));
    for (int i = 0; i < 8; i++)
        in[i] = rank * 10 + i;
    CHECK_MPI(MPI_Allreduce(in, out, 4, pair, op, MPI_COMM_WORLD));
    for (int i = 0; i < 8; i++)
        CHECK_EQ(10 * size * (size - 1) / 2 + size * i, out[i], "allreduce element %d", i);
    CHECK_MPI(MPI_Reduce(in, out, 4, pair, op, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int i = 0; i < 8; i++)
            CHECK_EQ(10 * size * (size - 1) / 2 + size * i, out[i], "reduce element %d", i);
    CHECK_MPI(MPI_Iallreduce(in, out, 4, pair, op, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    for (int i = 0; i < 8; i++)
        CHECK_EQ(10 * size * (size - 1) / 2 + size * i, out[i], "iallreduce element %d", i);
    if (size > 1)
        CHECK(calls > 0, "the reduction ran");
    CHECK_MPI(MPI_Op_free(&op));
    CHECK_MPI(MPI_Type_free(&pair));
    return tc_finish(NAME);
}

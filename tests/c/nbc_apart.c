/*
 * nbc_apart.c - non-blocking collectives are numbered apart from blocking
 * ones: with each root in turn, the root starts an MPI_Iallreduce before a
 * barrier and the other ranks start theirs after it (what mpi4py's
 * emulated Comm.Iagree test does). Every barrier completes and every
 * reduction gives the bitwise AND of the contributions. The standard asks
 * for one order on every rank; Open MPI and MPICH keep the two kinds apart,
 * and so does Tandem.
 *
 * Ranks: any; arguments: none.
 */
#include "check.h"

#define NAME "nbc_apart"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = tc_rank(), size = tc_size();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int root = 0; root < size; root++) {
        int mine = rank == root ? 0xb : 0xd, and = -1;
        MPI_Request req;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == root) {
            CHECK_MPI(MPI_Iallreduce(&mine, &and, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &req));
            int done = -1;
            CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
            CHECK(size == 1 || !done, "the reduction waits for the others (root %d)", root);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        } else {
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Iallreduce(&mine, &and, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &req));
        }
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        CHECK_EQ(size > 1 ? 0x9 : 0xb, and, "the AND of the contributions (root %d)", root);
    }
    tc_finish(NAME);
    return 0;
}

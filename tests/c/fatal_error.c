/*
 * fatal_error.c - an error under the default MPI_ERRORS_ARE_FATAL ends the job.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). Expected to FAIL as a job:
 * rank 1 calls MPI_Send to rank 99 (out of range, as long as the job has at
 * most 99 ranks) while every other rank waits in MPI_Recv from rank 1.
 *
 * The harness (crates/tandem-cli/tests/mpi_p2p.rs) expects: a non-zero exit
 * status, soon; a message naming rank 1, MPI_Send and the reason (the error
 * class MPI_ERR_RANK or the bad rank 99); no "PASS" and no "FAIL" line.
 * If MPI_Send returns, this program prints a FAIL line itself.
 */
#include "check.h"

#define NAME "fatal_error"

int main(int argc, char **argv)
{
    int rank, nranks, x = 0;
    MPI_Errhandler eh;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK(nranks <= 99, "needs at most 99 ranks");
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "the default error handler of MPI_COMM_WORLD is not MPI_ERRORS_ARE_FATAL");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (rank == 1) {
        int rc;
        printf("rank 1: calling MPI_Send to rank 99 of %d\n", nranks);
        fflush(stdout);
        rc = MPI_Send(&x, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);
        FAIL("MPI_Send to rank 99 of %d returned %d instead of ending the job", nranks, rc);
    } else {
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        FAIL("MPI_Recv from rank 1 returned, but rank 1 never sends");
    }
    return tc_finish(NAME);
}

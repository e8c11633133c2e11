/*
 * abort.c - MPI_Abort(MPI_COMM_WORLD, 7) ends the whole job with status 7.
 *
 * Ranks: any number. Expected to FAIL as a job: after a barrier every rank
 * but 0 waits in MPI_Recv from rank 0 (a message that never comes), and rank
 * 0 calls MPI_Abort(MPI_COMM_WORLD, 7) 200 ms later.
 *
 * Every rank prints "rank R pid P" first so that the harness can check that
 * no rank survives the job. The harness (crates/tandem-cli/tests/mpi_p2p.rs)
 * expects: exit status 7, within 5 s in all; a message naming rank 0 and
 * MPI_Abort; no "PASS" and no "FAIL" line; no rank process left.
 */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, x = 0;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    printf("rank %d pid %ld\n", rank, (long)getpid());
    fflush(stdout);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (rank == 0) {
        tc_sleep_ms(200);
        printf("rank 0: calling MPI_Abort(MPI_COMM_WORLD, 7) at %.6f\n", tc_epoch());
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7);
        FAIL("MPI_Abort returned");
    } else {
        MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        FAIL("MPI_Recv from rank 0 returned, but rank 0 never sends");
    }
    return 1;
}

/*
 * callback_reentry.c - an MPI call that needs the library's state from
 * inside a user-defined reduction ends the job with a message naming it,
 * instead of waiting for ever (datatype queries and a communicator's rank
 * and size work there: reduction_queries.c, callback_queries.c).
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). Expected to FAIL as a job:
 * every rank calls MPI_Allreduce with an operation whose function calls
 * MPI_Comm_get_name. The standard allows that; Tandem does not yet (the
 * library's state is in use further up the stack), and says so.
 *
 * The harness (crates/tandem-cli/tests/mpi_p2p.rs) expects: a non-zero exit
 * status, soon; a message naming MPI_Comm_get_name and the callback; no
 * "PASS" and no "FAIL" line. If the reduction completes, this program
 * prints a FAIL line itself.
 */
#include "check.h"

#define NAME "callback_reentry"

static void sum_after_asking_the_name(void *in, void *inout, int *len, MPI_Datatype *type)
{
    char name[MPI_MAX_OBJECT_NAME];
    int r;
    (void)type;
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &r);
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv)
{
    int rank, nranks, x, sum = 0;
    MPI_Op op;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK_MPI(MPI_Op_create(sum_after_asking_the_name, 1, &op));
    x = rank + 1;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, op, MPI_COMM_WORLD);
    FAIL("MPI_Allreduce returned (sum %d) although its operation called MPI", sum);
    MPI_Finalize();
    return 1;
}

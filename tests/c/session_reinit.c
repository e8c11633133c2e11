/*
 * session_reinit.c - sessions opened and closed one after another: a
 * library may open a session, do its work and close it, several times in
 * one run, with no session open in between (MPI-4: MPI_Session_init can be
 * called again after the last MPI_Session_finalize).
 *
 * Ranks: any number (1 included).
 *
 *   1. three rounds of: MPI_Session_init, the world process set's group, a
 *      communicator from it (a new string tag each round), an allreduce and
 *      a ring exchange checked, everything freed, MPI_Session_finalize;
 *   2. then, unless the argument "sessions-only" is given, the world model:
 *      MPI_Init (MPI_Initialized was 0 until then), an allreduce on
 *      MPI_COMM_WORLD, MPI_Finalize. With "sessions-only" the program
 *      returns from main with no session open and the world model never
 *      started: the runtime ends at exit and the job succeeds.
 */
#include "check.h"

#define NAME "session_reinit"

#define OK(call) CHECK_EQ(MPI_SUCCESS, (call), #call)

static int round_trip(int round)
{
    MPI_Session s = MPI_SESSION_NULL;
    MPI_Group g;
    MPI_Comm c;
    char tag[64];
    int size, rank;

    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    snprintf(tag, sizeof tag, "org.tandem.session_reinit.%d", round);
    OK(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    OK(MPI_Group_free(&g));
    OK(MPI_Comm_size(c, &size));
    OK(MPI_Comm_rank(c, &rank));

    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK_EQ(size, sum, "allreduce in a reopened session");
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = 100 * round + rank, in = -1;
    OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 7, &in, 1, MPI_INT, left, 7, c, MPI_STATUS_IGNORE));
    CHECK_EQ(100 * round + left, in, "ring exchange in a reopened session");

    OK(MPI_Comm_free(&c));
    OK(MPI_Session_finalize(&s));
    CHECK(s == MPI_SESSION_NULL, "finalize clears the handle");
    return rank;
}

int main(int argc, char **argv)
{
    int flag = -1, rank = 0;
    int sessions_only = argc > 1 && strcmp(argv[1], "sessions-only") == 0;

    for (int round = 0; round < 3; round++)
        rank = round_trip(round);

    OK(MPI_Initialized(&flag));
    CHECK_EQ(0, flag, "MPI_Initialized after sessions only");
    if (sessions_only) {
        if (rank == 0)
            printf("PASS %s\n", NAME);
        return 0;
    }

    OK(MPI_Init(&argc, &argv));
    int size, one = 1, sum = 0;
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(size, sum, "allreduce on MPI_COMM_WORLD after the sessions");
    return tc_finish(NAME);
}

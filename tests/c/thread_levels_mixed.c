/*
 * thread_levels_mixed.c - ranks of one job asking for different thread
 * levels: rank 0 MPI_THREAD_MULTIPLE, the others MPI_THREAD_SINGLE (or
 * plain MPI_Init). Each must be told the level it asked for, and small
 * blocking collectives among them (which on one host may go over shared
 * flags, and under MPI_THREAD_MULTIPLE go as schedules) must meet: they
 * hung where the ranks ran them different ways. Reads the launcher's
 * TANDEM_JOB_RANK to choose before MPI_Init_thread.
 */
#include "check.h"

#define ROUNDS 50

int main(int argc, char **argv)
{
    const char *r = getenv("TANDEM_JOB_RANK");
    int job_rank = r ? atoi(r) : 0, provided = -1, asked;
    if (job_rank == 0)
        asked = MPI_THREAD_MULTIPLE;
    else
        asked = job_rank % 2 ? MPI_THREAD_SINGLE : MPI_THREAD_FUNNELED;
    if (job_rank == 3) {
        CHECK_MPI(MPI_Init(&argc, &argv));
        asked = MPI_THREAD_SINGLE;
    } else {
        CHECK_MPI(MPI_Init_thread(&argc, &argv, asked, &provided));
        CHECK_EQ(asked, provided, "provided level");
    }
    CHECK_MPI(MPI_Query_thread(&provided));
    CHECK_EQ(asked, provided, "MPI_Query_thread");
    int rank = tc_rank(), size = tc_size();
    CHECK_EQ(job_rank, rank, "rank in MPI_COMM_WORLD");
    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    for (int i = 0; i < ROUNDS; i++) {
        int one = 1, sum = 0, b = rank == i % size ? 1000 + i : -1;
        MPI_Comm c = i % 2 ? dup : MPI_COMM_WORLD;
        CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
        CHECK_EQ(size, sum, "allreduce %d", i);
        CHECK_MPI(MPI_Bcast(&b, 1, MPI_INT, i % size, c));
        CHECK_EQ(1000 + i, b, "broadcast %d", i);
        CHECK_MPI(MPI_Barrier(c));
    }
    CHECK_MPI(MPI_Comm_free(&dup));
    return tc_finish("thread_levels_mixed");
}

/*
 * killed_rank.c - a rank killed by SIGKILL in the middle of the job.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). Expected to FAIL as a job.
 * Every rank prints "rank R pid P" first (so that the harness can check that
 * no rank survives). Rank 1 exchanges eager and rendezvous messages with every
 * other rank, all ranks pass a barrier, then rank 1 prints
 *     rank 1: raising SIGKILL at <seconds since the epoch>
 * and kills itself with raise(SIGKILL), while the others wait on it: rank 0 in
 * MPI_Recv from rank 1, rank 2 in a 1 MiB MPI_Send to rank 1 (rendezvous,
 * never matched), rank 3 and up in MPI_Recv from MPI_ANY_SOURCE.
 *
 * The harness (crates/tandem-cli/tests/mpi_p2p.rs) expects: a non-zero exit
 * status less than 2 s after the printed time and less than 5 s after the
 * start; a message naming rank 1 and SIGKILL (or signal 9); no "PASS" and no
 * "FAIL" line; no rank process left.
 */
#include "check.h"
#include <signal.h>
#include <unistd.h>

#define NAME "killed_rank"
#define MIB (1024 * 1024)

int main(int argc, char **argv)
{
    int rank, nranks, peer, round;
    unsigned char *sbuf, *rbuf;
    MPI_Status st;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    printf("rank %d pid %ld\n", rank, (long)getpid());
    fflush(stdout);
    sbuf = tc_alloc(MIB);
    rbuf = tc_alloc(MIB);

    /* some normal traffic with rank 1 first */
    for (round = 0; round < 3; round++) {
        int size = round == 1 ? MIB : 1000;
        if (rank == 1) {
            for (peer = 0; peer < nranks; peer++) {
                if (peer == 1)
                    continue;
                tc_fill(sbuf, size, rank, round);
                CHECK_MPI(MPI_Send(sbuf, size, MPI_BYTE, peer, round, MPI_COMM_WORLD));
                tc_prepare_recv(rbuf, size, peer, round);
                CHECK_MPI(MPI_Recv(rbuf, size, MPI_BYTE, peer, round, MPI_COMM_WORLD, &st));
                tc_check_recv(rbuf, size, peer, round, "reply from a peer of rank 1");
            }
        } else {
            tc_prepare_recv(rbuf, size, 1, round);
            CHECK_MPI(MPI_Recv(rbuf, size, MPI_BYTE, 1, round, MPI_COMM_WORLD, &st));
            tc_check_recv(rbuf, size, 1, round, "message from rank 1");
            tc_fill(sbuf, size, rank, round);
            CHECK_MPI(MPI_Send(sbuf, size, MPI_BYTE, 1, round, MPI_COMM_WORLD));
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (rank == 1) {
        tc_sleep_ms(100); /* let the others block */
        printf("rank 1: raising SIGKILL at %.6f\n", tc_epoch());
        fflush(stdout);
        raise(SIGKILL);
        FAIL("still alive after raise(SIGKILL)");
    } else if (rank == 2) {
        MPI_Send(sbuf, MIB, MPI_BYTE, 1, 50, MPI_COMM_WORLD);
        FAIL("a 1 MiB MPI_Send to the killed rank 1 returned");
    } else {
        MPI_Recv(rbuf, 10, MPI_BYTE, rank == 0 ? 1 : MPI_ANY_SOURCE, 50, MPI_COMM_WORLD, &st);
        FAIL("MPI_Recv returned although the killed rank 1 never sent");
    }
    return 1;
}

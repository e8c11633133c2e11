/*
 * p2p_calls.c - a fixed number of small-message round trips between ranks 0
 * and 1, for counting what each MPI call costs (scripts/callgrind-p2p.sh runs
 * rank 0 under callgrind and divides by the number of calls).
 *
 *     tandem cc -O2 examples/p2p_calls.c -o p2p_calls
 *     tandem run -n 2 ./p2p_calls [-n ITERS] [-s BYTES] [-m blocking|nonblocking] [-d SPINS]
 *
 * blocking:    rank 0 MPI_Send then MPI_Recv; rank 1 MPI_Recv then MPI_Send.
 * nonblocking: rank 0 MPI_Irecv, MPI_Isend, MPI_Wait (send), MPI_Wait (recv);
 *              rank 1 MPI_Irecv, MPI_Wait (recv), MPI_Isend, MPI_Wait (send).
 * Each mode runs 100 untimed round trips first, then ITERS (default 10000).
 * Prints the mean half round trip in microseconds.
 *
 * -d SPINS makes rank 0 count to SPINS before it receives (before its
 * MPI_Recv, or before its waits), outside any MPI call: under callgrind,
 * rank 0 runs so slowly that the answer is then always there already, and
 * the receive costs the same every time instead of depending on how many
 * times it polled an empty ring.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, iters = 10000, size = 8, i, nonblocking = 0, warm, delay = 0;
    volatile int spin;
    char *sbuf, *rbuf;
    double t0 = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-n") == 0)
            iters = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-s") == 0)
            size = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "-m") == 0)
            nonblocking = strcmp(argv[i + 1], "nonblocking") == 0;
        else if (strcmp(argv[i], "-d") == 0)
            delay = atoi(argv[i + 1]);
    }
    sbuf = calloc(1, (size_t)size + 1);
    rbuf = calloc(1, (size_t)size + 1);
    if (sbuf == NULL || rbuf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank < 2) {
        int peer = 1 - rank;
        for (warm = 1; warm >= 0; warm--) {
            int n = warm ? 100 : iters;
            if (!warm)
                t0 = MPI_Wtime();
            for (i = 0; i < n; i++) {
                if (nonblocking) {
                    MPI_Request rr, sr;
                    MPI_Irecv(rbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rr);
                    if (rank == 0) {
                        MPI_Isend(sbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &sr);
                        for (spin = 0; spin < delay; spin++)
                            ;
                        MPI_Wait(&sr, MPI_STATUS_IGNORE);
                        MPI_Wait(&rr, MPI_STATUS_IGNORE);
                    } else {
                        MPI_Wait(&rr, MPI_STATUS_IGNORE);
                        MPI_Isend(sbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &sr);
                        MPI_Wait(&sr, MPI_STATUS_IGNORE);
                    }
                } else if (rank == 0) {
                    MPI_Send(sbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    for (spin = 0; spin < delay; spin++)
                        ;
                    MPI_Recv(rbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
        }
        if (rank == 0)
            printf("%s %d bytes: %.3f us per half round trip\n", nonblocking ? "nonblocking" : "blocking",
                   size, (MPI_Wtime() - t0) * 1e6 / (2.0 * iters));
    }
    free(sbuf);
    free(rbuf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

/*
 * burst_helped.c - a burst of large messages between two ranks of one
 * host: rank 0 starts MSGS non-blocking sends of SIZE bytes (an odd size,
 * each from its own buffer, each with its own pattern) and waits for them
 * all; rank 1 posts the receives first, into their own buffers, waits for
 * them all and checks every byte, and that nothing past each message was
 * touched. ROUNDS times, with new patterns. With many large messages in
 * flight the receiver reads them one by one, and the waiting sender helps
 * copy each (counter helped_chunks, asserted by the test that runs this).
 *
 * Prints "PASS burst_helped" on rank 0.
 */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define MSGS 24
#define ROUNDS 4
#define SIZE ((1 << 20) + 3)
#define GUARD 64

static unsigned char pattern(int round, int msg, size_t i)
{
    return (unsigned char)((round * 131 + msg * 29 + i * 7 + (i >> 10)) & 0xff);
}

int main(int argc, char **argv)
{
    int rank, size;
    unsigned char *bufs[MSGS];
    MPI_Request reqs[MSGS];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    for (int m = 0; m < MSGS; m++) {
        bufs[m] = malloc(SIZE + GUARD);
        CHECK(bufs[m] != NULL, "malloc");
    }
    for (int round = 0; round < ROUNDS; round++) {
        if (rank == 0) {
            for (int m = 0; m < MSGS; m++)
                for (size_t i = 0; i < SIZE; i++)
                    bufs[m][i] = pattern(round, m, i);
            MPI_Barrier(MPI_COMM_WORLD);
            for (int m = 0; m < MSGS; m++)
                CHECK(MPI_Isend(bufs[m], SIZE, MPI_BYTE, 1, m, MPI_COMM_WORLD, &reqs[m]) == MPI_SUCCESS,
                      "MPI_Isend %d", m);
            CHECK(MPI_Waitall(MSGS, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "MPI_Waitall (sends)");
        } else {
            for (int m = 0; m < MSGS; m++) {
                memset(bufs[m], 0, SIZE + GUARD);
                CHECK(MPI_Irecv(bufs[m], SIZE, MPI_BYTE, 0, m, MPI_COMM_WORLD, &reqs[m]) == MPI_SUCCESS,
                      "MPI_Irecv %d", m);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            CHECK(MPI_Waitall(MSGS, reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "MPI_Waitall (receives)");
            for (int m = 0; m < MSGS; m++) {
                for (size_t i = 0; i < SIZE; i++)
                    if (bufs[m][i] != pattern(round, m, i))
                        CHECK(0, "round %d, message %d: byte %zu is %u, expected %u", round, m, i, bufs[m][i],
                              pattern(round, m, i));
                for (size_t i = SIZE; i < SIZE + GUARD; i++)
                    CHECK(bufs[m][i] == 0, "round %d, message %d: byte %zu past its end was touched", round, m,
                          i - SIZE);
            }
        }
    }
    for (int m = 0; m < MSGS; m++)
        free(bufs[m]);
    return tc_finish("burst_helped");
}

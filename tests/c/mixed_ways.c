/*
 * mixed_ways.c - rendezvous messages between two ranks of one host while
 * the receiver switches between reading them in place (single copy) and
 * having them pushed through the rings: windows of WINDOW non-blocking
 * messages of 20 KiB to 600 KiB in both directions at once, so that a
 * message read in place can complete while one before it is still
 * streaming through the ring. Every message must arrive whole, with its own
 * contents, in the receive posted for it (matching order), with the right
 * status; guard bytes after every buffer must be untouched.
 *
 * Ranks: 2 (other ranks wait at the final barrier).
 * Usage: mixed_ways [ROUNDS]   (default 40)
 */
#include "check.h"

#define NAME "mixed_ways"
#define WINDOW 8
#define MAXLEN (600 * 1024)

/* The length of message `i` of round `r`: sizes spread over several of the
 * receiver's size classes, changing from round to round. */
static size_t length_of(int r, int i)
{
    static const size_t lens[] = {20 * 1024 + 3, 48 * 1024, 100 * 1024 + 17, 256 * 1024, 333 * 1024 + 1, 600 * 1024};
    return lens[(size_t)(r * 5 + i * 3) % (sizeof lens / sizeof lens[0])];
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    tc_require_size(2, NAME);
    int rank = tc_rank();
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    if (rank < 2) {
        int peer = 1 - rank;
        unsigned char *out[WINDOW], *in[WINDOW];
        for (int i = 0; i < WINDOW; i++) {
            out[i] = tc_alloc(MAXLEN);
            in[i] = tc_alloc(MAXLEN);
        }
        for (int r = 0; r < rounds; r++) {
            MPI_Request reqs[2 * WINDOW];
            for (int i = 0; i < WINDOW; i++) {
                size_t n = length_of(r, i);
                tc_prepare_recv(in[i], n, peer, r * WINDOW + i);
                CHECK_MPI(MPI_Irecv(in[i], (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD, &reqs[i]));
            }
            for (int i = 0; i < WINDOW; i++) {
                size_t n = length_of(r, i);
                tc_fill(out[i], n, rank, r * WINDOW + i);
                CHECK_MPI(MPI_Isend(out[i], (int)n, MPI_BYTE, peer, r, MPI_COMM_WORLD, &reqs[WINDOW + i]));
            }
            MPI_Status st[2 * WINDOW];
            CHECK_MPI(MPI_Waitall(2 * WINDOW, reqs, st));
            for (int i = 0; i < WINDOW; i++) {
                size_t n = length_of(r, i);
                tc_check_status(&st[i], peer, r, (int)n, "mixed_ways receive");
                tc_check_recv(in[i], n, peer, r * WINDOW + i, "mixed_ways message");
            }
        }
        for (int i = 0; i < WINDOW; i++) {
            free(out[i]);
            free(in[i]);
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return tc_finish(NAME);
}

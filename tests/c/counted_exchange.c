/*
 * counted_exchange.c - a scripted exchange whose message counts are known,
 * for checking the progress-engine counters (`--set stats=json`).
 *
 * Rank 0 sends rank 1 exactly 10 messages of 1 MiB (rendezvous) and 20 of
 * 100 bytes (eager); then every pair of ranks exchanges 32 KiB with
 * non-blocking sends and receives and one MPI_Waitall (the VolpexMPI report's listing),
 * five times. Every byte is checked.
 */
#include "check.h"

#define BIG (1 << 20)
#define SMALL 100
#define PAIR (32 * 1024)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tc_require_size(2, "counted_exchange");
    int rank = tc_rank(), size = tc_size();
    unsigned char *buf = tc_alloc(BIG);
    if (rank == 0) {
        for (int i = 0; i < 10; i++) {
            tc_fill(buf, BIG, 0, i);
            CHECK_MPI(MPI_Send(buf, BIG, MPI_BYTE, 1, i, MPI_COMM_WORLD));
        }
        for (int i = 0; i < 20; i++) {
            tc_fill(buf, SMALL, 0, 100 + i);
            CHECK_MPI(MPI_Send(buf, SMALL, MPI_BYTE, 1, 100 + i, MPI_COMM_WORLD));
        }
    } else if (rank == 1) {
        for (int i = 0; i < 10; i++) {
            tc_prepare_recv(buf, BIG, 0, i);
            CHECK_MPI(MPI_Recv(buf, BIG, MPI_BYTE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            tc_check_recv(buf, BIG, 0, i, "large message");
        }
        for (int i = 0; i < 20; i++) {
            tc_prepare_recv(buf, SMALL, 0, 100 + i);
            CHECK_MPI(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 100 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            tc_check_recv(buf, SMALL, 0, 100 + i, "small message");
        }
    }
    unsigned char *out = tc_alloc((size_t)PAIR * size), *in = tc_alloc((size_t)PAIR * size);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
    for (int round = 0; round < 5; round++) {
        for (int p = 0; p < size; p++) {
            tc_fill(out + (size_t)p * PAIR, PAIR, rank, 1000 * round + p);
            tc_prepare_recv(in + (size_t)p * PAIR, PAIR, p, 1000 * round + rank);
        }
        for (int p = 0; p < size; p++) {
            CHECK_MPI(MPI_Isend(out + (size_t)p * PAIR, PAIR, MPI_BYTE, p, 7, MPI_COMM_WORLD, &reqs[2 * p]));
            CHECK_MPI(MPI_Irecv(in + (size_t)p * PAIR, PAIR, MPI_BYTE, p, 7, MPI_COMM_WORLD, &reqs[2 * p + 1]));
        }
        CHECK_MPI(MPI_Waitall(2 * size, reqs, MPI_STATUSES_IGNORE));
        for (int p = 0; p < size; p++)
            tc_verify(in + (size_t)p * PAIR, PAIR, p, 1000 * round + rank, "all-to-all block");
    }
    free(reqs);
    free(out);
    free(in);
    free(buf);
    return tc_finish("counted_exchange");
}

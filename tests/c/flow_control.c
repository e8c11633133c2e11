/*
 * flow_control.c - unexpected eager messages beyond the receiver's buffer
 * budget hold the sender back; nothing is dropped or reordered.
 *
 * Run with a small budget, e.g. `tandem run -n 2 --set unexpected_limit=256k`.
 * Rank 0 sends 200 eager messages of 48 KiB (9.4 MiB in all) to rank 1, which
 * sleeps first so that they all arrive unexpected, then receives them in
 * order and checks every byte. Ranks beyond 1 only take part in the barrier.
 */
#include "check.h"

#define COUNT 200
#define SIZE (48 * 1024)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tc_require_size(2, "flow_control");
    int rank = tc_rank();
    if (rank == 0) {
        unsigned char *buf = tc_alloc((size_t)COUNT * SIZE);
        MPI_Request reqs[COUNT];
        for (int i = 0; i < COUNT; i++) {
            tc_fill(buf + (size_t)i * SIZE, SIZE, 0, i);
            CHECK_MPI(MPI_Isend(buf + (size_t)i * SIZE, SIZE, MPI_BYTE, 1, i % 7, MPI_COMM_WORLD, &reqs[i]));
        }
        CHECK_MPI(MPI_Waitall(COUNT, reqs, MPI_STATUSES_IGNORE));
        free(buf);
    } else if (rank == 1) {
        tc_sleep_ms(300);
        unsigned char *buf = tc_alloc(SIZE);
        for (int i = 0; i < COUNT; i++) {
            MPI_Status st;
            tc_prepare_recv(buf, SIZE, 0, i);
            CHECK_MPI(MPI_Recv(buf, SIZE, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            tc_check_status(&st, 0, i % 7, SIZE, "flow-controlled message");
            tc_check_recv(buf, SIZE, 0, i, "flow-controlled message");
        }
        free(buf);
    }
    return tc_finish("flow_control");
}

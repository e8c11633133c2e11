/*
 * fd_siege.c - a rank that waits while strangers exhaust its descriptors.
 *
 * Rank 0 prints "waiting <pid>" and blocks in MPI_Recv; rank 1 sends after
 * the number of milliseconds given as the argument (default 4000). The
 * test holds connections open to rank 0's port meanwhile, more than its
 * descriptor limit allows, and checks that the waiting rank stays idle and
 * the message still arrives.
 */
#define _DEFAULT_SOURCE
#include "check.h"

#include <unistd.h>

#define NAME "fd_siege"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tc_require_size(2, NAME);
    int rank = tc_rank();
    int delay = argc > 1 ? atoi(argv[1]) : 4000;
    int value = 0;
    if (rank == 0) {
        printf("waiting %d\n", (int)getpid());
        fflush(stdout);
        CHECK_MPI(MPI_Recv(&value, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_EQ(4711, value, "the message sent during the siege");
    } else if (rank == 1) {
        tc_sleep_ms(delay);
        value = 4711;
        CHECK_MPI(MPI_Send(&value, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
    }
    tc_finish(NAME);
    return 0;
}

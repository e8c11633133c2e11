/*
 * replica_polls.c - a test loop much longer than the replicas of a rank
 * can drift apart in: rank 0 polls MPI_Test until rank 1's message comes,
 * which rank 1 sends after a pause. Every MPI_Test outcome is a choice its
 * leader replica makes and its siblings follow (p2p/wildcard.rs), so a
 * sibling that reads nothing for a while (REPLICA_FAULTS with a negative
 * signal, replica_hook.h) has its leader wait for it, and one that reads
 * nothing for longer than replica_timeout_ms is declared failed.
 *
 * Arguments: milliseconds rank 1 waits before it sends.
 * Prints: "rank 0: N tests", alike on every replica of rank 0.
 */
#define _DEFAULT_SOURCE
#include "check.h"
#include "replica_hook.h"

#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int pause_ms = argc > 1 ? atoi(argv[1]) : 1000;
    replica_fault_point(0);
    int v = 0;
    if (rank == 0) {
        MPI_Request req;
        MPI_Irecv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &req);
        long long tests = 0;
        int flag = 0;
        while (!flag) {
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            tests++;
        }
        CHECK(v == 42, "rank 0 got %d, not 42", v);
        printf("rank 0: %lld tests\n", tests);
    } else if (rank == 1) {
        usleep((useconds_t)pause_ms * 1000u);
        v = 42;
        MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
    }
    replica_fault_point(1);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

/*
 * replica_laggard.c - a rank whose only live replica finishes while a slow
 * replica of another rank still sends to it. Rank 1 sends `count` integers
 * to rank 0 one message at a time, after a go-ahead from rank 0, and rank
 * 0 prints their sum. Rank 0 may finish long before rank 1's slow replica
 * has sent its last message (which rank 0 already took from the fast
 * one); with rank 0's other replica killed, the slow replica took the
 * go-ahead from the one that finishes, so it is connected to it.
 *
 * Arguments: count. REPLICA_SLOW=P makes process P (its TANDEM_JOB_RANK)
 * pause 1 ms per message; REPLICA_FAULTS (replica_hook.h) kills replicas.
 */
#define _DEFAULT_SOURCE
#include "check.h"
#include "replica_hook.h"

#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int count = argc > 1 ? atoi(argv[1]) : 200;
    const char *slow = getenv("REPLICA_SLOW");
    const char *me = getenv("TANDEM_JOB_RANK");
    int is_slow = slow && me && atoi(slow) == atoi(me);
    replica_fault_point(0);
    if (rank == 0) {
        int go = 1;
        CHECK_EQ(MPI_SUCCESS, MPI_Send(&go, 1, MPI_INT, 1, 4, MPI_COMM_WORLD), "MPI_Send go");
        long long sum = 0;
        for (int i = 0; i < count; i++) {
            int v;
            CHECK_EQ(MPI_SUCCESS, MPI_Recv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv %d", i);
            CHECK_EQ(i, v, "message %d", i);
            sum += v;
        }
        printf("sum %lld\n", sum);
    } else if (rank == 1) {
        int go = 0;
        CHECK_EQ(MPI_SUCCESS, MPI_Recv(&go, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv go");
        for (int i = 0; i < count; i++) {
            if (is_slow) usleep(1000);
            /* Progress, as a program that also receives makes. */
            int flag = 0;
            CHECK_EQ(MPI_SUCCESS, MPI_Iprobe(0, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe %d", i);
            CHECK_EQ(MPI_SUCCESS, MPI_Send(&i, 1, MPI_INT, 0, 5, MPI_COMM_WORLD), "MPI_Send %d", i);
        }
    }
    MPI_Finalize();
    return 0;
}

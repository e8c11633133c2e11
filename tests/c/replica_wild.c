/*
 * replica_wild.c - a manager/worker program that receives results with
 * MPI_ANY_SOURCE and hands the next task to whichever worker answered, so
 * replicas of the manager that matched differently would send different
 * messages. Every process writes the order it matched to PREFIX.<process>;
 * replicas of the manager must write the same file.
 *
 * Arguments: tasks, PREFIX. REPLICA_FAULTS (replica_hook.h) kills chosen
 * replicas at a task number (the manager: results taken; a worker: tasks
 * done).
 */
#define _DEFAULT_SOURCE
#include "check.h"
#include "replica_hook.h"

#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int tasks = argc > 1 ? atoi(argv[1]) : 100;
    const char *prefix = argc > 2 ? argv[2] : NULL;
    if (rank == 0) {
        int *order = malloc(sizeof(int) * (size_t)(tasks + size));
        int sent = 0, got = 0;
        unsigned long long sum = 0;
        for (int w = 1; w < size; w++) {
            int t = sent < tasks ? sent++ : -1;
            MPI_Send(&t, 1, MPI_INT, w, 1, MPI_COMM_WORLD);
        }
        while (got < sent) {
            replica_fault_point(got);
            long long res[2];
            MPI_Status st;
            MPI_Recv(res, 2, MPI_LONG_LONG, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &st);
            order[got++] = st.MPI_SOURCE;
            if (res[1] != res[0] * res[0] + st.MPI_SOURCE) {
                fprintf(stderr, "rank 0: FAIL result of task %lld from %d\n", res[0], st.MPI_SOURCE);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            sum += (unsigned long long)res[1];
            int next = sent < tasks ? sent++ : -1;
            MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, 1, MPI_COMM_WORLD);
        }
        if (prefix) {
            char name[512];
            const char *me = getenv("TANDEM_JOB_RANK");
            snprintf(name, sizeof name, "%s.%s", prefix, me ? me : "0");
            FILE *f = fopen(name, "w");
            for (int i = 0; i < got; i++) fprintf(f, "%d\n", order[i]);
            fclose(f);
        }
        printf("manager: %d results, sum %llu\n", got, sum);
        free(order);
    } else {
        int done = 0;
        for (;;) {
            int t;
            MPI_Recv(&t, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (t < 0) break;
            replica_fault_point(done++);
            usleep((unsigned)(((t * 7919 + rank * 104729) % 13) * 50));
            long long res[2] = {t, (long long)t * t + rank};
            MPI_Send(res, 2, MPI_LONG_LONG, 0, 2, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

/*
 * replica_flood.c - rank 0 sends COUNT messages of LEN bytes to rank 1,
 * which takes them slowly and checks every byte: with replicas, the
 * senders' logs must stay within replica_log_bytes (senders wait) and
 * nothing may be lost or reordered.
 *
 * Arguments: COUNT, LEN, microseconds rank 1 pauses every 1000 messages.
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
    int count = argc > 1 ? atoi(argv[1]) : 1000;
    int len = argc > 2 ? atoi(argv[2]) : 1024;
    int pause = argc > 3 ? atoi(argv[3]) : 1000;
    unsigned char *buf = malloc((size_t)len + 4);
    unsigned long long sum = 0;
    if (rank == 0) {
        for (int m = 0; m < count; m++) {
            replica_fault_point(m);
            for (int i = 0; i < len; i++) buf[i] = (unsigned char)(m * 13 + i);
            MPI_Send(buf, len, MPI_BYTE, 1, m & 0x7fff, MPI_COMM_WORLD);
        }
    } else if (rank == 1) {
        for (int m = 0; m < count; m++) {
            replica_fault_point(m);
            if (m % 1000 == 0 && pause) usleep((unsigned)pause);
            MPI_Status st;
            MPI_Recv(buf, len, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG != (m & 0x7fff)) {
                fprintf(stderr, "rank 1: FAIL message %d came with tag %d\n", m, st.MPI_TAG);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            for (int i = 0; i < len; i++) {
                if (buf[i] != (unsigned char)(m * 13 + i)) {
                    fprintf(stderr, "rank 1: FAIL byte %d of message %d\n", i, m);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                sum += buf[i];
            }
        }
        printf("rank 1: %d messages intact, sum %llu\n", count, sum);
    }
    free(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

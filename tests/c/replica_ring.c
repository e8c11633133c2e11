/*
 * replica_ring.c - a deterministic ring plus allreduce checksum, for
 * replicated runs: every rank prints its checksum, which must equal an
 * unreplicated run's whatever replicas die on the way.
 *
 * Arguments: steps, message bytes, microseconds of "computing" per step.
 * REPLICA_FAULTS (replica_hook.h) kills or stops chosen replicas;
 * REPLICA_FLIP makes one replica's allreduce contribution differ.
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
    int steps = argc > 1 ? atoi(argv[1]) : 100;
    int len = argc > 2 ? atoi(argv[2]) : 1024;
    int nap = argc > 3 ? atoi(argv[3]) : 0;
    unsigned char *out = malloc(len ? len : 1), *in = malloc(len ? len : 1);
    unsigned long long sum = 0;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    for (int step = 0; step < steps; step++) {
        replica_fault_point(step);
        for (int i = 0; i < len; i++) out[i] = (unsigned char)(rank * 31 + step * 7 + i);
        MPI_Sendrecv(out, len, MPI_BYTE, to, step, in, len, MPI_BYTE, from, step,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < len; i++) {
            if (in[i] != (unsigned char)(from * 31 + step * 7 + i)) {
                fprintf(stderr, "rank %d: FAIL byte %d of step %d\n", rank, i, step);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        unsigned long long local = 0, all = 0;
        for (int i = 0; i < len; i++) local += in[i] * (unsigned long long)(i + 1);
        local += (unsigned long long)rank << 40;
        local = replica_flip_value(step, local);
        MPI_Allreduce(&local, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        sum = sum * 1000003ULL + all;
        if (nap) usleep(nap);
    }
    printf("rank %d of %d: checksum %llu\n", rank, size, sum);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}

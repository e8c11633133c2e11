/*
 * replica_choices.c - outcomes that depend on timing, which every replica
 * of a rank must see alike: the request MPI_Waitany finds, whether
 * MPI_Iprobe(MPI_ANY_SOURCE) finds a message and which, how many MPI_Test
 * calls see a request unfinished, the message MPI_Probe(MPI_ANY_SOURCE)
 * finds, what each MPI_Testsome finds, and the messages MPI_Improbe and
 * MPI_Mprobe take. Rank 0 writes what it saw to PREFIX.<process>; the replicas of
 * rank 0 must write the same file. The workers answer after varying pauses
 * so that the outcomes differ from run to run.
 *
 * Arguments: rounds, PREFIX. REPLICA_FAULTS (replica_hook.h) kills chosen
 * replicas at a round.
 */
#define _DEFAULT_SOURCE
#include "check.h"
#include "replica_hook.h"

#include <unistd.h>

static void pause_for(int rank, int round) {
    usleep((unsigned)(((round * 7919 + rank * 104729) % 7) * 40));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 50;
    const char *prefix = argc > 2 ? argv[2] : NULL;
    int workers = size - 1;
    if (rank == 0) {
        FILE *f = NULL;
        if (prefix) {
            char name[512];
            const char *me = getenv("TANDEM_JOB_RANK");
            snprintf(name, sizeof name, "%s.%s", prefix, me ? me : "0");
            f = fopen(name, "w");
        }
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)workers);
        int *got = malloc(sizeof(int) * (size_t)workers);
        for (int w = 0; w < workers; w++)
            MPI_Irecv(&got[w], 1, MPI_INT, w + 1, 1, MPI_COMM_WORLD, &reqs[w]);
        long long tested = 0, missed = 0;
        for (int round = 0; round < rounds; round++) {
            replica_fault_point(round);
            int idx;
            MPI_Status st;
            /* 1: whichever worker answers first. */
            MPI_Waitany(workers, reqs, &idx, &st);
            if (f) fprintf(f, "waitany %d\n", idx);
            int go = round;
            MPI_Send(&go, 1, MPI_INT, idx + 1, 2, MPI_COMM_WORLD);
            MPI_Irecv(&got[idx], 1, MPI_INT, idx + 1, 1, MPI_COMM_WORLD, &reqs[idx]);
            /* 2: poll for a tag-3 message from anyone. */
            int flag = 0;
            while (!flag) {
                MPI_Iprobe(MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &flag, &st);
                if (!flag) missed++;
            }
            if (f) fprintf(f, "iprobe %d after %lld\n", st.MPI_SOURCE, missed);
            int v;
            MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            /* 3: how long a test loop spins. */
            MPI_Request t;
            int w;
            MPI_Irecv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &t);
            flag = 0;
            while (!flag) {
                MPI_Test(&t, &flag, &st);
                tested++;
            }
            if (f) fprintf(f, "test %d after %lld\n", st.MPI_SOURCE, tested);
            /* 4: a blocking probe of anyone. */
            MPI_Probe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
            MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (f) fprintf(f, "probe %d\n", st.MPI_SOURCE);
            /* 5: what each MPI_Testsome finds, until everyone's tag 6 came. */
            {
                MPI_Request six[64];
                int vals[64], idx6[64], left = workers, outcount;
                for (int w = 0; w < workers; w++)
                    MPI_Irecv(&vals[w], 1, MPI_INT, w + 1, 6, MPI_COMM_WORLD, &six[w]);
                while (left > 0) {
                    MPI_Testsome(workers, six, &outcount, idx6, MPI_STATUSES_IGNORE);
                    if (outcount > 0 && f) {
                        fprintf(f, "testsome");
                        for (int k = 0; k < outcount; k++) fprintf(f, " %d", idx6[k]);
                        fprintf(f, "\n");
                    }
                    if (outcount > 0) left -= outcount;
                }
            }
            /* 6: matched probes of anyone: polled, then blocking. */
            {
                MPI_Message msg;
                long long polls = 0;
                int found = 0;
                while (!found) {
                    MPI_Improbe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &found, &msg, &st);
                    polls++;
                }
                MPI_Mrecv(&v, 1, MPI_INT, &msg, MPI_STATUS_IGNORE);
                if (f) fprintf(f, "improbe %d after %lld\n", st.MPI_SOURCE, polls);
                MPI_Mprobe(MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &msg, &st);
                MPI_Mrecv(&v, 1, MPI_INT, &msg, MPI_STATUS_IGNORE);
                if (f) fprintf(f, "mprobe %d\n", st.MPI_SOURCE);
                for (int k = 0; k < workers - 1; k++) {
                    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
            }
            /* Everyone else's messages of this round. */
            for (int k = 0; k < workers - 1; k++) {
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
        for (int w = 0; w < workers; w++) {
            MPI_Cancel(&reqs[w]);
            MPI_Wait(&reqs[w], MPI_STATUS_IGNORE);
        }
        if (f) fclose(f);
        printf("rank 0: %d rounds\n", rounds);
        free(reqs);
        free(got);
    } else {
        int answered = 0;
        for (int round = 0; round < rounds; round++) {
            replica_fault_point(round);
            int v = rank;
            /* Answer the Waitany of this round only while not picked. */
            if (!answered) {
                pause_for(rank, round);
                MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
                answered = 1;
            }
            pause_for(rank, round + 1);
            MPI_Send(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
            pause_for(rank, round + 2);
            MPI_Send(&v, 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
            pause_for(rank, round + 3);
            MPI_Send(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
            pause_for(rank, round + 4);
            MPI_Send(&v, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
            pause_for(rank, round + 5);
            MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
            pause_for(rank, round + 6);
            MPI_Send(&v, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
            /* Picked by this round's Waitany? */
            int picked = 0;
            MPI_Iprobe(0, 2, MPI_COMM_WORLD, &picked, MPI_STATUS_IGNORE);
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Iprobe(0, 2, MPI_COMM_WORLD, &picked, MPI_STATUS_IGNORE);
            if (picked) {
                int go;
                MPI_Recv(&go, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                answered = 0;
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

/*
 * progress_stress.c - hundreds of large non-blocking receives completing
 * while the application thread does malloc-heavy computation, for the
 * policies that progress communication meanwhile (`--set progress=thread`:
 * a helper thread; `--set progress=signal`: a signal handler interrupting
 * this very computation, inside malloc and free as often as not).
 *
 * Rank 1 posts COUNT receives of 128 KiB to ~512 KiB (odd sizes, posted in
 * a scrambled order, each in its own guarded buffer), tells rank 0 to
 * start, then allocates, reallocates, fills and frees memory for a while
 * without calling MPI, then waits for all and checks every status, every
 * byte and every guard byte. Rank 0 sends the messages in batches with a
 * little computation between them, so rendezvous starts keep arriving
 * during rank 1's computation. Other ranks only finish.
 *
 *     progress_stress [CHURN_ROUNDS]
 */
#include "check.h"

#define COUNT 300
#define BATCH 10
#define GO_TAG (COUNT + 1)

static size_t msg_size(int i)
{
    return (size_t)(128 * 1024 + (i % 7) * 64 * 1024 + (i % 3));
}

static volatile size_t churn_sink;

/* Allocator traffic of many sizes: the signal handler must never need the
 * allocator's lock that this holds most of the time. */
static size_t churn(int rounds)
{
    size_t total = 0;
    for (int r = 0; r < rounds; r++) {
        void *blocks[64];
        for (int i = 0; i < 64; i++) {
            size_t n = 16 + (size_t)((r * 131 + i * 977) % 20000);
            blocks[i] = (i % 5 == 0) ? calloc(1, n) : malloc(n);
            if (blocks[i] == NULL)
                tc_die();
            memset(blocks[i], r + i, n);
            total += n;
        }
        for (int i = 0; i < 64; i += 4) {
            void *p = realloc(blocks[i], 40000 + (size_t)i);
            if (p == NULL)
                tc_die();
            blocks[i] = p;
        }
        for (int i = 63; i >= 0; i--)
            free(blocks[i]);
    }
    churn_sink = total;
    return total;
}

static void spin_briefly(void)
{
    volatile double x = 1.0;
    for (int i = 0; i < 20000; i++)
        x = x * 1.0000001 + 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tc_require_size(2, "progress_stress");
    int rounds = argc > 1 ? atoi(argv[1]) : 3000;
    int rank = tc_rank();
    if (rank == 0) {
        unsigned char *bufs[COUNT];
        MPI_Request reqs[COUNT];
        for (int i = 0; i < COUNT; i++) {
            bufs[i] = tc_alloc(msg_size(i));
            tc_fill(bufs[i], msg_size(i), 0, i);
        }
        int go = 0;
        CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_EQ(1, go, "go token");
        for (int i = 0; i < COUNT; i++) {
            CHECK_MPI(MPI_Isend(bufs[i], (int)msg_size(i), MPI_BYTE, 1, i, MPI_COMM_WORLD, &reqs[i]));
            if (i % BATCH == BATCH - 1)
                spin_briefly();
        }
        CHECK_MPI(MPI_Waitall(COUNT, reqs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < COUNT; i++)
            free(bufs[i]);
    } else if (rank == 1) {
        unsigned char *bufs[COUNT];
        MPI_Request reqs[COUNT];
        MPI_Status st[COUNT];
        for (int k = 0; k < COUNT; k++) {
            /* A scrambled posting order: 7 is coprime with COUNT. */
            int i = (k * 7) % COUNT;
            bufs[i] = tc_alloc(msg_size(i));
            tc_prepare_recv(bufs[i], msg_size(i), 0, i);
            CHECK_MPI(MPI_Irecv(bufs[i], (int)msg_size(i), MPI_BYTE, 0, i, MPI_COMM_WORLD, &reqs[i]));
        }
        int go = 1;
        CHECK_MPI(MPI_Send(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD));
        CHECK(churn(rounds) > 0, "churn");
        CHECK_MPI(MPI_Waitall(COUNT, reqs, st));
        for (int i = 0; i < COUNT; i++) {
            tc_check_status(&st[i], 0, i, (int)msg_size(i), "message received during computation");
            tc_check_recv(bufs[i], msg_size(i), 0, i, "message received during computation");
            free(bufs[i]);
        }
    }
    return tc_finish("progress_stress");
}

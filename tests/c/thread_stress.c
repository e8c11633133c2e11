/*
 * thread_stress.c - large non-blocking receives completing while the
 * application thread does malloc-heavy computation (meant for
 * `--set progress=thread`, where a helper thread drives them meanwhile).
 *
 * Rank 1 posts 200 receives of 256 KiB, then allocates, fills and frees
 * memory for a while without calling MPI, then waits for all and checks
 * every byte. Rank 0 sends the 200 messages. Other ranks only finish.
 */
#include "check.h"

#define COUNT 200
#define SIZE (256 * 1024)

static size_t churn(int rounds)
{
    size_t total = 0;
    for (int r = 0; r < rounds; r++) {
        void *blocks[64];
        for (int i = 0; i < 64; i++) {
            size_t n = 64 + (size_t)((r * 131 + i * 977) % 20000);
            blocks[i] = malloc(n);
            if (blocks[i] == NULL)
                tc_die();
            memset(blocks[i], r + i, n);
            total += n;
        }
        for (int i = 0; i < 64; i++)
            free(blocks[i]);
    }
    return total;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tc_require_size(2, "thread_stress");
    int rank = tc_rank();
    if (rank == 0) {
        unsigned char *buf = tc_alloc((size_t)COUNT * SIZE);
        MPI_Request reqs[COUNT];
        for (int i = 0; i < COUNT; i++) {
            tc_fill(buf + (size_t)i * SIZE, SIZE, 0, i);
            CHECK_MPI(MPI_Isend(buf + (size_t)i * SIZE, SIZE, MPI_BYTE, 1, i, MPI_COMM_WORLD, &reqs[i]));
        }
        CHECK_MPI(MPI_Waitall(COUNT, reqs, MPI_STATUSES_IGNORE));
        free(buf);
    } else if (rank == 1) {
        unsigned char *buf = tc_alloc((size_t)COUNT * SIZE);
        MPI_Request reqs[COUNT];
        for (int i = 0; i < COUNT; i++) {
            tc_prepare_recv(buf + (size_t)i * SIZE, SIZE, 0, i);
            CHECK_MPI(MPI_Irecv(buf + (size_t)i * SIZE, SIZE, MPI_BYTE, 0, i, MPI_COMM_WORLD, &reqs[i]));
        }
        CHECK(churn(3000) > 0, "churn");
        CHECK_MPI(MPI_Waitall(COUNT, reqs, MPI_STATUSES_IGNORE));
        for (int i = 0; i < COUNT; i++)
            tc_verify(buf + (size_t)i * SIZE, SIZE, 0, i, "message received during computation");
        free(buf);
    }
    return tc_finish("thread_stress");
}

/*
 * flood_order.c - a correct program that needs the message it waits for to
 * overtake, in matching, more unexpected data than the receiver buffers.
 *
 * Rank 0 starts COUNT non-blocking sends of SIZE bytes with tag 1, then one
 * with tag 2, and waits for all of them. Rank 1 receives the tag-2 message
 * first, then the COUNT tag-1 messages in order, checking every byte. With
 * `unexpected_limit` below COUNT x SIZE the tag-1 messages cannot all wait
 * at the receiver; the library must still deliver the tag-2 message.
 *
 * Arguments: COUNT SIZE [any|late]. "any": rank 1 receives the tag-1
 * messages with MPI_ANY_SOURCE. "late": rank 1 sleeps first, so that
 * everything arrives before any receive is posted. Ranks beyond 1 only take
 * part in the final barrier.
 */
#define _DEFAULT_SOURCE
#include "check.h"

#include <string.h>

#define NAME "flood_order"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tc_require_size(2, NAME);
    int rank = tc_rank();
    int count = argc > 1 ? atoi(argv[1]) : 100;
    int size = argc > 2 ? atoi(argv[2]) : 16384;
    const char *mode = argc > 3 ? argv[3] : "";
    int any = strcmp(mode, "any") == 0;
    if (rank == 0) {
        unsigned char *buf = tc_alloc((size_t)(count + 1) * size);
        MPI_Request *reqs = (MPI_Request *)tc_alloc(sizeof(MPI_Request) * (count + 1));
        for (int i = 0; i <= count; i++) {
            tc_fill(buf + (size_t)i * size, size, 0, i);
            int tag = i < count ? 1 : 2;
            CHECK_MPI(MPI_Isend(buf + (size_t)i * size, size, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &reqs[i]));
        }
        CHECK_MPI(MPI_Waitall(count + 1, reqs, MPI_STATUSES_IGNORE));
        free(reqs);
        free(buf);
    } else if (rank == 1) {
        if (strcmp(mode, "late") == 0)
            tc_sleep_ms(500);
        unsigned char *buf = tc_alloc(size);
        MPI_Status st;
        CHECK_MPI(MPI_Recv(buf, size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &st));
        tc_verify(buf, size, 0, count, "the tag-2 message");
        for (int i = 0; i < count; i++) {
            CHECK_MPI(MPI_Recv(buf, size, MPI_BYTE, any ? MPI_ANY_SOURCE : 0, 1, MPI_COMM_WORLD, &st));
            CHECK_EQ(0, st.MPI_SOURCE, "source of tag-1 message %d", i);
            tc_verify(buf, size, 0, i, "a tag-1 message");
        }
        free(buf);
    }
    tc_finish(NAME);
    return 0;
}

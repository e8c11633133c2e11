/*
 * big_message.c - one message of more than INT_MAX elements through the
 * large-count forms: rank 0 sends 2^31 + 4096 bytes with MPI_Send_c, rank 1
 * receives them with MPI_Recv_c (MPI_Get_count_c must say all of them),
 * checks every 8-byte word, and sends them back with MPI_Isend_c into rank
 * 0's MPI_Irecv_c over a buffer first cleared, which checks them again.
 * Then the same with MPI_Ssend_c of 2^31 + 8 MPI_UNSIGNED_CHAR. Ranks past 1 only take part in the final barrier.
 */
#include "check.h"

#include <limits.h>

#define NAME "big_message"

static uint64_t word(uint64_t i, uint64_t key) { return (i + key) * 0x9E3779B97F4A7C15ull ^ (i >> 7); }

static void fill(uint64_t *w, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; i++)
        w[i] = word(i, key);
}

static void verify(const uint64_t *w, size_t n, uint64_t key, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (w[i] != word(i, key))
            FAIL("%s: word %zu of %zu is %llx, expected %llx", what, i, n, (unsigned long long)w[i],
                 (unsigned long long)word(i, key));
}

/* One round trip of `count` elements of `dt` (`elem` bytes each). */
static void round_trip(int rank, MPI_Count count, MPI_Datatype dt, size_t elem, int sync, uint64_t key)
{
    size_t bytes = (size_t)count * elem, words = bytes / 8;
    uint64_t *buf = malloc(bytes);
    CHECK(buf != NULL, "malloc of %zu bytes", bytes);
    MPI_Status st;
    MPI_Count got = -1;
    if (rank == 0) {
        fill(buf, words, key);
        if (sync)
            CHECK_MPI(MPI_Ssend_c(buf, count, dt, 1, 7, MPI_COMM_WORLD));
        else
            CHECK_MPI(MPI_Send_c(buf, count, dt, 1, 7, MPI_COMM_WORLD));
        memset(buf, 0, bytes);
        MPI_Request rq;
        CHECK_MPI(MPI_Irecv_c(buf, count, dt, 1, 8, MPI_COMM_WORLD, &rq));
        CHECK_MPI(MPI_Wait(&rq, &st));
        CHECK_MPI(MPI_Get_count_c(&st, dt, &got));
        CHECK(got == count, "MPI_Get_count_c after MPI_Irecv_c: %lld of %lld", (long long)got, (long long)count);
        verify(buf, words, key, "back at rank 0");
    } else if (rank == 1) {
        memset(buf, 0, bytes);
        CHECK_MPI(MPI_Recv_c(buf, count, dt, 0, 7, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count_c(&st, dt, &got));
        CHECK(got == count, "MPI_Get_count_c after MPI_Recv_c: %lld of %lld", (long long)got, (long long)count);
        verify(buf, words, key, "at rank 1");
        MPI_Request rq;
        CHECK_MPI(MPI_Isend_c(buf, count, dt, 0, 8, MPI_COMM_WORLD, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }
    free(buf);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    int rank, size;
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    round_trip(rank, (MPI_Count)INT_MAX + 1 + 4096, MPI_BYTE, 1, 0, 1);
    round_trip(rank, (MPI_Count)INT_MAX + 1 + 8, MPI_UNSIGNED_CHAR, 1, 1, 2);
    tc_finish(NAME);
    return 0;
}

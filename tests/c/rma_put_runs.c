/*
 * rma_put_runs.c - runs of MPI_Put (and MPI_Accumulate) to one target
 * with no other call between them, which over TCP wait to leave together
 * in one sendmsg (counter tcp_batched): every byte arrives by the
 * synchronisation that completes them.
 *
 * Each rank puts 400 small blocks (1 B to 3 KiB, with untouched gaps) into
 * its right neighbour's window, on a ring, in four kinds of epoch:
 *  0. passive (MPI_Win_lock_all), completed by MPI_Win_flush;
 *  1. passive, completed by MPI_Win_flush_local_all, then MPI_Win_flush;
 *  2. active (MPI_Win_fence);
 *  3. passive, the puts interleaved with MPI_Accumulate (MPI_SUM, ints)
 *     into a separate region, which join the runs.
 * The target checks every byte after a barrier.
 */
#include "check.h"

#define PUTS 400
#define GAP 3
#define ACC_INTS 64

static size_t size_of(int k) { return 1 + (size_t)k * 37 % 3000; }

static size_t offset_of(int k)
{
    size_t off = 0;
    for (int j = 0; j < k; j++)
        off += size_of(j) + GAP;
    return off;
}

static unsigned char value(int src, int round, size_t i)
{
    return (unsigned char)((src * 97 + round * 41 + i * 11 + (i >> 7)) & 0xff);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me = tc_rank(), n = tc_size();
    int right = (me + 1) % n, left = (me + n - 1) % n;
    size_t data = offset_of(PUTS);
    size_t bytes = data + ACC_INTS * sizeof(int);
    unsigned char *base, *src = malloc(data);
    CHECK(src != NULL, "malloc");
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    int acc_one[ACC_INTS];
    for (int i = 0; i < ACC_INTS; i++)
        acc_one[i] = me + 1;

    for (int round = 0; round < 8; round++) {
        int kind = round % 4;
        /* The window is cleared, and every rank knows it, before puts. */
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
        memset(base, 0, bytes);
        CHECK_MPI(MPI_Win_unlock(me, win));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (size_t i = 0; i < data; i++)
            src[i] = value(me, round, i);

        if (kind == 2) {
            CHECK_MPI(MPI_Win_fence(0, win));
        } else {
            CHECK_MPI(MPI_Win_lock_all(0, win));
        }
        for (int k = 0; k < PUTS; k++) {
            size_t off = offset_of(k);
            CHECK_MPI(MPI_Put(src + off, (int)size_of(k), MPI_BYTE, right, (MPI_Aint)off,
                              (int)size_of(k), MPI_BYTE, win));
            if (kind == 3 && k % 7 == 0)
                CHECK_MPI(MPI_Accumulate(acc_one, ACC_INTS, MPI_INT, right, (MPI_Aint)data, ACC_INTS,
                                         MPI_INT, MPI_SUM, win));
        }
        if (kind == 2) {
            CHECK_MPI(MPI_Win_fence(0, win));
        } else {
            if (kind == 1)
                CHECK_MPI(MPI_Win_flush_local_all(win));
            CHECK_MPI(MPI_Win_flush(right, win));
            CHECK_MPI(MPI_Win_unlock_all(win));
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
        for (int k = 0; k < PUTS; k++) {
            size_t off = offset_of(k);
            for (size_t i = 0; i < size_of(k); i++)
                CHECK_EQ(value(left, round, off + i), base[off + i],
                         "round %d put %d (%zu bytes at %zu) byte %zu", round, k, size_of(k), off, i);
            for (size_t g = 0; g < GAP; g++)
                CHECK_EQ(0, base[off + size_of(k) + g], "round %d gap after put %d", round, k);
        }
        int *acc = (int *)(base + data);
        int want = kind == 3 ? ((PUTS + 6) / 7) * (left + 1) : 0;
        for (int i = 0; i < ACC_INTS; i++)
            CHECK_EQ(want, acc[i], "round %d accumulated int %d", round, i);
        CHECK_MPI(MPI_Win_unlock(me, win));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Win_free(&win));
    free(src);
    return tc_finish("rma_put_runs");
}

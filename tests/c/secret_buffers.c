/*
 * secret_buffers.c - large messages sent from, and received into, memory
 * that another process cannot read or write with process_vm_readv/writev
 * (memfd_secret: the kernel will not pin it for anyone but its owner). A
 * receiver on the same host that tries to read such a message in place,
 * or a sender asked to write into such a buffer, must fall back to the
 * pipelined copy: every message must arrive whole, none may fail.
 *
 * With the argument "receive" only the receive buffers are secret: the
 * receiver reads in place, and a sender invited to help copy (copy help:
 * it writes part of the message into the receive buffer) fails to, so the
 * receiver must copy that part itself.
 *
 * Where memfd_secret is unavailable the buffers are plain memory (the
 * program says so and still checks every byte).
 *
 * Ranks: 2 (other ranks wait at the final barrier).
 */
#define _GNU_SOURCE
#include "check.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NAME "secret_buffers"
#define MAXLEN (4 * 1024 * 1024)

#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif

/* `len` bytes (plus the guard) of secret memory, or of plain memory. */
static unsigned char *secret_alloc(size_t len, int *secret)
{
    size_t n = len + TC_GUARD;
    int fd = (int)syscall(SYS_memfd_secret, 0);
    if (fd >= 0 && ftruncate(fd, (off_t)n) == 0) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p != MAP_FAILED) {
            *secret = 1;
            return p;
        }
    } else if (fd >= 0) {
        close(fd);
    }
    *secret = 0;
    return tc_alloc(len);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    tc_require_size(2, NAME);
    int rank = tc_rank();
    static const size_t lens[] = {20000, 300 * 1024, MAXLEN};
    if (rank < 2) {
        int receive_only = argc > 1 && strcmp(argv[1], "receive") == 0;
        int peer = 1 - rank, secret_out = 1, secret_in;
        unsigned char *out = receive_only ? tc_alloc(MAXLEN) : secret_alloc(MAXLEN, &secret_out);
        unsigned char *in = secret_alloc(MAXLEN, &secret_in);
        if (rank == 0 && !(secret_out && secret_in))
            printf("%s: memfd_secret unavailable, plain buffers\n", NAME);
        for (int round = 0; round < 4; round++) {
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                size_t n = lens[k];
                int key = round * 10 + (int)k;
                /* Blocking: rank 0 first, then the answer. */
                MPI_Status st;
                if (rank == 0) {
                    tc_fill(out, n, rank, key);
                    CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, peer, key, MPI_COMM_WORLD));
                    tc_prepare_recv(in, n, peer, key);
                    CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, peer, key, MPI_COMM_WORLD, &st));
                } else {
                    tc_prepare_recv(in, n, peer, key);
                    CHECK_MPI(MPI_Recv(in, (int)n, MPI_BYTE, peer, key, MPI_COMM_WORLD, &st));
                    tc_fill(out, n, rank, key);
                    CHECK_MPI(MPI_Send(out, (int)n, MPI_BYTE, peer, key, MPI_COMM_WORLD));
                }
                tc_check_status(&st, peer, key, (int)n, "blocking receive");
                tc_check_recv(in, n, peer, key, "blocking message");
                /* Non-blocking, both ways at once, the receive posted first
                 * (under progress=thread|signal it may be advertised to the
                 * sender, who then tries to write into secret memory). */
                MPI_Request reqs[2];
                tc_prepare_recv(in, n, peer, key + 5);
                CHECK_MPI(MPI_Irecv(in, (int)n, MPI_BYTE, peer, key + 5, MPI_COMM_WORLD, &reqs[0]));
                CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
                tc_fill(out, n, rank, key + 5);
                CHECK_MPI(MPI_Isend(out, (int)n, MPI_BYTE, peer, key + 5, MPI_COMM_WORLD, &reqs[1]));
                MPI_Status sts[2];
                CHECK_MPI(MPI_Waitall(2, reqs, sts));
                tc_check_status(&sts[0], peer, key + 5, (int)n, "non-blocking receive");
                tc_check_recv(in, n, peer, key + 5, "non-blocking message");
            }
        }
    } else {
        /* The pair's barriers. */
        for (int i = 0; i < 4 * 3; i++)
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return tc_finish(NAME);
}

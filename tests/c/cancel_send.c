/*
 * cancel_send.c - MPI_Cancel on send requests: a wait for a cancelled send
 * always returns. A large (rendezvous) send nobody receives is cancelled
 * and never delivered; one whose receive was already posted completes
 * and is delivered, not cancelled; a small send either way (MPI lets the
 * cancellation fail once the data left); a synchronous send to oneself
 * is cancelled; a persistent send likewise. Needs 2 ranks. Plain MPI: a
 * library that also cancels small sends passes; one that cannot cancel
 * an unreceived large send hangs in the first wait (Open MPI 4.1 does).
 */
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;


#define BIG (1 << 20)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tc_require_size(2, "cancel_send");
    char *big = malloc(BIG), *got = malloc(BIG);
    memset(big, 7, BIG);
    MPI_Status st;
    MPI_Request req;
    int flag, rounds = 20;

    for (int i = 0; i < rounds; i++) {
        /* 1: a large send nobody receives: cancelled, and gone. */
        if (rank == 0) {
            MPI_Isend(big, BIG, MPI_BYTE, 1, 100 + i, MPI_COMM_WORLD, &req);
            MPI_Cancel(&req);
            MPI_Wait(&req, &st);
            MPI_Test_cancelled(&st, &flag);
            CHECK(flag, "round %d: an unreceived 1 MiB send was not cancelled", i);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            MPI_Iprobe(0, 100 + i, MPI_COMM_WORLD, &flag, &st);
            CHECK(!flag, "round %d: a cancelled send can still be received", i);
        }
        /* 2: the receive is posted first: the send is delivered, whole. */
        if (rank == 1) {
            memset(got, 0, BIG);
            MPI_Irecv(got, BIG, MPI_BYTE, 0, 200, MPI_COMM_WORLD, &req);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            MPI_Isend(big, BIG, MPI_BYTE, 1, 200, MPI_COMM_WORLD, &req);
            MPI_Cancel(&req);
        }
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &flag);
        if (rank == 1) {
            CHECK(!flag, "round %d: a completed receive says cancelled", i);
            CHECK(got[0] == 7 && got[BIG - 1] == 7, "round %d: the data did not arrive", i);
        }
        int cancelled = flag;
        MPI_Bcast(&cancelled, 1, MPI_INT, 0, MPI_COMM_WORLD);
        /* A send that is cancelled must not be received, and the reverse. */
        if (rank == 1)
            CHECK(!cancelled, "round %d: the sender cancelled a send this rank received", i);
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* 3: a small send: cancelled and gone, or delivered. */
    if (rank == 0) {
        int v = 42;
        MPI_Isend(&v, 1, MPI_INT, 1, 300, MPI_COMM_WORLD, &req);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &flag);
        MPI_Send(&flag, 1, MPI_INT, 1, 301, MPI_COMM_WORLD);
    } else if (rank == 1) {
        int cancelled, v = 0;
        MPI_Recv(&cancelled, 1, MPI_INT, 0, 301, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Iprobe(0, 300, MPI_COMM_WORLD, &flag, &st);
        CHECK(flag != cancelled, "a small send cancelled=%d yet probe found=%d", cancelled, flag);
        if (flag) {
            MPI_Recv(&v, 1, MPI_INT, 0, 300, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(v == 42, "the small send arrived as %d", v);
        }
    }

    /* 4: a synchronous send to this rank itself, never received. */
    {
        int v = 1;
        MPI_Issend(&v, 1, MPI_INT, rank, 400, MPI_COMM_WORLD, &req);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &flag);
        CHECK(flag, "a synchronous send to self was not cancelled");
        MPI_Iprobe(rank, 400, MPI_COMM_WORLD, &flag, &st);
        CHECK(!flag, "a cancelled send to self can still be received");
    }

    /* 5: a persistent large send, started and cancelled, then started
     * again and received. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Send_init(big, BIG, MPI_BYTE, 1, 500, MPI_COMM_WORLD, &req);
        MPI_Start(&req);
        MPI_Cancel(&req);
        MPI_Wait(&req, &st);
        MPI_Test_cancelled(&st, &flag);
        CHECK(flag, "a started persistent send was not cancelled");
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Start(&req);
        MPI_Wait(&req, &st);
        MPI_Request_free(&req);
    } else if (rank == 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        memset(got, 0, BIG);
        MPI_Recv(got, BIG, MPI_BYTE, 0, 500, MPI_COMM_WORLD, &st);
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(n == BIG && got[BIG / 2] == 7, "the persistent send's second start arrived as %d bytes", n);
        MPI_Iprobe(0, 500, MPI_COMM_WORLD, &flag, &st);
        CHECK(!flag, "the cancelled start of the persistent send arrived as well");
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }

    free(big);
    free(got);
    return tc_finish("cancel_send");
}

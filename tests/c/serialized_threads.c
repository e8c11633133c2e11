/*
 * serialized_threads.c - MPI_THREAD_SERIALIZED as the standard defines it:
 * several threads of a process make MPI calls, never two at once. Here
 * three threads per rank take turns (a mutex and a turn counter), so each
 * round of communication is made by a different thread than the last:
 *
 *   - blocking ping-pong between partner ranks, sizes from 8 B to 1 MiB
 *     (eager and rendezvous), every byte verified;
 *   - non-blocking exchanges whose requests are started by one thread and
 *     completed (MPI_Waitall) by the next;
 *   - an allreduce every few rounds;
 *   - a send to an invalid rank from a thread other than the one that set
 *     MPI_ERRORS_RETURN: it must fail with MPI_ERR_RANK and change nothing;
 *     the same on a communicator with a user error handler, which must run
 *     once per error, in the thread that made the call.
 *
 * Checks MPI_Query_thread and MPI_Is_thread_main from the threads too.
 * Ranks: any; a rank without a partner (odd job size) takes part in the
 * collectives only.
 */
#include "check.h"

#include <pthread.h>

#define NAME "serialized_threads"
#define THREADS 3
#define ROUNDS 240
#define MAXBYTES (1 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static int turn; /* the round to be made next */

static int rank, size, partner;
static unsigned char *sendbuf, *recvbuf, *nb_send, *nb_recv;
static MPI_Request pending[2];
static int pending_round = -1;
static MPI_Comm handled; /* a duplicate of MPI_COMM_WORLD with a user error handler */
static int handler_calls, handler_wrong_thread, bad_rank_rounds;
static pthread_t caller;

static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    handler_calls++;
    if (!pthread_equal(pthread_self(), caller))
        handler_wrong_thread++;
}

static int bytes_of(int round)
{
    static const int sizes[] = {8, 1024, 65536, MAXBYTES, 0, 4096};
    return sizes[round % (int)(sizeof sizes / sizeof sizes[0])];
}

/* Completes the non-blocking exchange another thread started. */
static void finish_pending(void)
{
    if (pending_round < 0)
        return;
    MPI_Status sts[2];
    char what[96];
    int n = bytes_of(pending_round);
    CHECK_MPI(MPI_Waitall(2, pending, sts));
    snprintf(what, sizeof what, "round %d: non-blocking receive completed by another thread", pending_round);
    tc_check_status(&sts[0], partner, 1000 + pending_round, n, what);
    tc_check_recv(nb_recv, (size_t)n, partner, pending_round, what);
    pending_round = -1;
}

static void round_blocking(int r)
{
    MPI_Status st;
    char what[96];
    int n = bytes_of(r);
    snprintf(what, sizeof what, "round %d: blocking ping-pong of %d bytes", r, n);
    tc_fill(sendbuf, (size_t)n, rank, r);
    tc_prepare_recv(recvbuf, (size_t)n, partner, r);
    if (rank < partner) {
        CHECK_MPI(MPI_Send(sendbuf, n, MPI_BYTE, partner, r, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(recvbuf, n, MPI_BYTE, partner, r, MPI_COMM_WORLD, &st));
    } else {
        CHECK_MPI(MPI_Recv(recvbuf, n, MPI_BYTE, partner, r, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Send(sendbuf, n, MPI_BYTE, partner, r, MPI_COMM_WORLD));
    }
    tc_check_status(&st, partner, r, n, what);
    tc_check_recv(recvbuf, (size_t)n, partner, r, what);
}

static void round_start_nonblocking(int r)
{
    int n = bytes_of(r);
    tc_fill(nb_send, (size_t)n, rank, r);
    tc_prepare_recv(nb_recv, (size_t)n, partner, r);
    CHECK_MPI(MPI_Irecv(nb_recv, n, MPI_BYTE, partner, 1000 + r, MPI_COMM_WORLD, &pending[0]));
    CHECK_MPI(MPI_Isend(nb_send, n, MPI_BYTE, partner, 1000 + r, MPI_COMM_WORLD, &pending[1]));
    pending_round = r;
}

static void round_allreduce(int r)
{
    long mine = rank + r, sum = -1, expected = (long)size * r + (long)size * (size - 1) / 2;
    CHECK_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(expected, sum, "round %d: allreduce made by thread %d", r, r % THREADS);
}

static void round_bad_rank(int r)
{
    /* MPI_ERRORS_RETURN was set by the main thread, before the workers. */
    int rc = MPI_Send(sendbuf, 8, MPI_BYTE, size + 3, r, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_RANK, "send to an invalid rank from a worker thread");
    caller = pthread_self();
    rc = MPI_Send(sendbuf, 8, MPI_BYTE, size + 3, r, handled);
    tc_expect_class(rc, MPI_ERR_RANK, "send to an invalid rank with a user error handler");
    bad_rank_rounds++;
    CHECK_EQ(bad_rank_rounds, handler_calls, "round %d: user error handler calls", r);
}

static void play(int r)
{
    int provided = -1, is_main = -1;
    CHECK_MPI(MPI_Query_thread(&provided));
    CHECK_EQ(MPI_THREAD_SERIALIZED, provided, "MPI_Query_thread from a worker thread");
    CHECK_MPI(MPI_Is_thread_main(&is_main));
    CHECK_EQ(0, is_main, "MPI_Is_thread_main from a worker thread");
    finish_pending();
    if (r % 11 == 5)
        round_bad_rank(r);
    if (r % 8 == 3)
        round_allreduce(r);
    if (partner < 0)
        return;
    if (r % 5 == 2)
        round_start_nonblocking(r);
    else
        round_blocking(r);
}

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (turn < ROUNDS && turn % THREADS != me)
            pthread_cond_wait(&turn_changed, &lock);
        if (turn >= ROUNDS) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        /* MPI calls only under the mutex: one thread at a time. */
        play(turn);
        turn++;
        pthread_cond_broadcast(&turn_changed);
        pthread_mutex_unlock(&lock);
    }
}

int main(int argc, char **argv)
{
    int provided = -1, is_main = -1;
    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided));
    CHECK_EQ(MPI_THREAD_SERIALIZED, provided, "MPI_Init_thread(MPI_THREAD_SERIALIZED) provided");
    CHECK_MPI(MPI_Is_thread_main(&is_main));
    CHECK_EQ(1, is_main, "MPI_Is_thread_main from the thread that initialised MPI");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &handled));
    CHECK_MPI(MPI_Comm_create_errhandler(count_errors, &eh));
    CHECK_MPI(MPI_Comm_set_errhandler(handled, eh));
    CHECK_MPI(MPI_Errhandler_free(&eh));
    rank = tc_rank();
    size = tc_size();
    partner = tc_partner(rank, size);
    sendbuf = tc_alloc(MAXBYTES);
    recvbuf = tc_alloc(MAXBYTES);
    nb_send = tc_alloc(MAXBYTES);
    nb_recv = tc_alloc(MAXBYTES);

    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    CHECK_EQ(ROUNDS, turn, "rounds made by the worker threads");
    finish_pending();
    CHECK(bad_rank_rounds > 0, "no round tried an invalid rank");
    CHECK_EQ(0, handler_wrong_thread, "user error handler calls in a thread other than the caller");
    CHECK_MPI(MPI_Comm_free(&handled));

    free(sendbuf);
    free(recvbuf);
    free(nb_send);
    free(nb_recv);
    if (rank == 0)
        printf("%d rounds made by %d threads in turn\n", ROUNDS, THREADS);
    return tc_finish(NAME);
}

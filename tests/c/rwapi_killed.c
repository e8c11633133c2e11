/*
 * rwapi_killed.c - a node killed by SIGKILL while writes to it are
 * outstanding. Expected to FAIL as a job, fast, naming node 1.
 *
 * Node 1 hands node 0 its block address and waits for node 0's "go"; then
 * it prints
 *     rank 1: raising SIGKILL at <seconds since the epoch>
 * and kills itself. Node 0 sends "go", then 16 writes of 4 MiB (which
 * node 1 can no longer take), and waits in rwapi_flush: it must end (with
 * RWAPI_ERR_GONE, or be stopped by the launcher), never hang.
 *
 * On one host the writes are copies into node 1's mapped heap, complete
 * when issued: a flush that comes before node 1 is dead rightly succeeds.
 * So node 0 writes and flushes again (for at most 10 s) until a flush
 * fails; writing into the heap of a node that has died must neither crash
 * nor hang it, and the flush after the death says RWAPI_ERR_GONE (unless
 * the launcher has stopped the job first).
 */
#define _POSIX_C_SOURCE 200809L
#include <rwapi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (rwapi_init(argc, argv) != RWAPI_OK)
        return 2;
    int me = rwapi_rank();
    printf("rank %d pid %d\n", me, (int)getpid());
    fflush(stdout);
    const size_t len = 4u << 20;
    rwapi_net net, target;
    char *mem = rwapi_alloc(len, &net);
    rwapi_small m;
    int from;
    if (me == 1) {
        memcpy(m.bytes, &net, sizeof net);
        rwapi_send(0, m);
        while (rwapi_receive(&from, &m) != 1)
            ;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        printf("rank 1: raising SIGKILL at %.6f\n", ts.tv_sec + ts.tv_nsec / 1e9);
        fflush(stdout);
        raise(SIGKILL);
    }
    if (me == 0) {
        while (rwapi_receive(&from, &m) != 1)
            ;
        memcpy(&target, m.bytes, sizeof target);
        memset(mem, 7, len);
        rwapi_send(1, m);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc;
        do {
            for (int i = 0; i < 16; i++)
                rwapi_write(1, net, target, len);
            rc = rwapi_flush();
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (rc == RWAPI_OK && t.tv_sec - t0.tv_sec < 10);
        fprintf(stderr, "rank 0: rwapi_flush returned %d\n", rc);
        return rc == RWAPI_ERR_GONE ? 3 : 4;
    }
    rwapi_finalize();
    return 0;
}

/*
 * bad_peer.c - strangers connecting to the job's ports must not disturb it.
 *
 * Ranks: needs 2 (passes with a SKIP note on 1). Meant to be run as
 *     tandem run -n N --set tcp_port_range=LOW-HIGH bad_peer
 * with a range of ports nothing else uses (the harness picks one).
 *
 * After MPI_Init and a barrier, rank 0
 *   1. connects to 127.0.0.1 on every port of TANDEM_TCP_PORT_RANGE that
 *      accepts a connection (the ranks' listening sockets are among them),
 *      writes 64 bytes of garbage and closes; then connects once more,
 *      sends nothing and closes;
 *   2. connects to the launcher's key-value service (TANDEM_JOB_ADDR,
 *      host:port) and sends a HELLO with a wrong (all-zero) secret: the
 *      service must close the connection (read gives 0 or an error) within
 *      2 s, without answering OK.
 * Then every pair of ranks exchanges verified messages (eager and
 * rendezvous), in both directions, and all pass a barrier: the job carries
 * on. Without the variables (another MPI) the stranger part is skipped.
 */
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#define NAME "bad_peer"

/* Connects to ip:port; -1 if nothing listens there. */
static int connect_to(const char *ip, int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    CHECK(inet_pton(AF_INET, ip, &sa.sin_addr) == 1, "bad IPv4 address \"%s\"", ip);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = (const char *)buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the other side may already have closed: fine */
        p += w;
        n -= (size_t)w;
    }
}

static int strangers_on_ports(void)
{
    const char *range = getenv("TANDEM_TCP_PORT_RANGE");
    int low, high, port, hits = 0;
    unsigned char garbage[64];
    if (range == NULL || sscanf(range, "%d-%d", &low, &high) != 2) {
        printf("no TANDEM_TCP_PORT_RANGE: skipping the garbage connections\n");
        return 0;
    }
    CHECK(low > 0 && high >= low && high - low < 1000, "TANDEM_TCP_PORT_RANGE \"%s\"", range);
    tc_fill(garbage, sizeof garbage, 12345, 0);
    memset(garbage, 0xFF, 16); /* an absurd length or kind, whatever the format */
    for (port = low; port <= high; port++) {
        int fd = connect_to("127.0.0.1", port);
        if (fd < 0)
            continue;
        hits++;
        write_all(fd, garbage, sizeof garbage);
        close(fd);
        fd = connect_to("127.0.0.1", port);
        if (fd >= 0)
            close(fd);
    }
    printf("sent garbage to %d listening port(s) in %d-%d\n", hits, low, high);
    return hits;
}

static void stranger_on_kv_service(void)
{
    const char *addr = getenv("TANDEM_JOB_ADDR");
    char host[256], line[] = "HELLO 0000000000000000000000000000000000000000000000000000000000000000 0\n";
    char reply[256];
    const char *colon;
    int fd, port, got = 0;
    double t0;
    if (addr == NULL) {
        printf("no TANDEM_JOB_ADDR: skipping the key-value service check\n");
        return;
    }
    colon = strrchr(addr, ':');
    CHECK(colon != NULL && colon - addr < (long)sizeof host, "TANDEM_JOB_ADDR \"%s\" is not host:port", addr);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    port = atoi(colon + 1);
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    fd = connect_to(host, port);
    CHECK(fd >= 0, "cannot connect to the launcher's service at %s", addr);
    write_all(fd, line, strlen(line));
    t0 = tc_epoch();
    for (;;) {
        struct pollfd pfd;
        double left = 2.0 - (tc_epoch() - t0);
        ssize_t n;
        CHECK(left > 0, "the launcher's service did not close a connection with a wrong secret within 2 s");
        pfd.fd = fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        n = read(fd, reply + got, sizeof reply - 1 - (size_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* closed (0) or reset (error): as it should */
        got += (int)n;
        reply[got] = 0;
        CHECK(strncmp(reply, "OK", 2) != 0, "the launcher's service answered \"%s\" to a wrong secret", reply);
        if (got >= (int)sizeof reply - 1)
            got = 0;
    }
    close(fd);
    printf("the launcher's service closed the connection of a stranger\n");
}

int main(int argc, char **argv)
{
    int rank, nranks, peer, k;
    unsigned char *sbuf, *rbuf;
    const int sizes[2] = {1000, 300 * 1024};

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    tc_require_size(2, NAME);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (rank == 0) {
        strangers_on_ports();
        stranger_on_kv_service();
        fflush(stdout);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* every ordered pair: lower rank sends first */
    sbuf = tc_alloc(300 * 1024);
    rbuf = tc_alloc(300 * 1024);
    for (peer = 0; peer < nranks; peer++) {
        if (peer == rank)
            continue;
        for (k = 0; k < 2; k++) {
            int size = sizes[k], tag = 10 + k, i;
            for (i = 0; i < 2; i++) {
                MPI_Status st;
                int sending = (i == 0) == (rank < peer);
                if (sending) {
                    tc_fill(sbuf, size, rank, tag * 100 + peer);
                    CHECK_MPI(MPI_Send(sbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
                } else {
                    tc_prepare_recv(rbuf, size, peer, tag * 100 + rank);
                    CHECK_MPI(MPI_Recv(rbuf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
                    tc_check_status(&st, peer, tag, size, "exchange after the strangers");
                    tc_check_recv(rbuf, size, peer, tag * 100 + rank, "exchange after the strangers");
                }
            }
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        printf("all %d ranks exchanged messages after the strangers\n", nranks);
    free(sbuf);
    free(rbuf);
    return tc_finish(NAME);
}

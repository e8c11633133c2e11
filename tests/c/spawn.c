/*
 * spawn.c - dynamic processes: MPI_Comm_spawn(_multiple), ports, names and
 * MPI_Comm_join.
 *
 *   1. the world spawns 3 copies of this program (wdir info key): every
 *      child sees its parents and its own world (also as a session's
 *      mpi://WORLD), exchanges a message with the parents' root,
 *      and both sides merge the intercommunicator and reduce over it; the
 *      children reduce over their own world; all disconnect;
 *   2. MPI_Comm_spawn_multiple of two programs (1 + 2 processes): each
 *      child's MPI_APPNUM and world size;
 *   3. a program that does not exist: MPI_ERR_SPAWN through the
 *      communicator's handler, every error code MPI_ERR_SPAWN, no
 *      intercommunicator; a program that ends without MPI_Init: the same;
 *   4. (2 or more parents) rank 0 alone spawns 2 children, which connect to
 *      a port rank 1 opened: a process meets processes started after it,
 *      that it had not heard of;
 *   5. (2 or more parents) a published name: looked up by another rank,
 *      connected to, unpublished (then MPI_ERR_NAME);
 *   6. (2 or more parents) MPI_Comm_join over a loopback TCP connection.
 *
 * With the argument "across" (ranks on several hosts) the join, which
 * connects over loopback, is left out. With the argument "die", the world spawns 2 children and waits for a
 * message from the second, which kills itself instead: the job must end,
 * naming it.
 */
#include "check.h"

#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define NAME "spawn"

static int rank, size;
static char self_exe[4096];

static int appnum(void)
{
    int *v = NULL, flag = 0;
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &v, &flag));
    CHECK(flag, "MPI_APPNUM is not set");
    return *v;
}

static void exchange_with_remote(MPI_Comm inter, int base)
{
    int n, i, v;
    CHECK_MPI(MPI_Comm_remote_size(inter, &n));
    for (i = 0; i < n; i++) {
        v = base + i;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, i, 7, inter));
    }
    for (i = 0; i < n; i++) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, i, 8, inter, MPI_STATUS_IGNORE));
        CHECK_EQ(2 * (base + i), v, "answer of remote rank %d", i);
    }
}

static void answer_remote_root(MPI_Comm inter, int base, int me)
{
    int v = -1;
    CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 7, inter, MPI_STATUS_IGNORE));
    CHECK_EQ(base + me, v, "message from the other group's root");
    v *= 2;
    CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 8, inter));
}

static int child(int argc, char **argv)
{
    MPI_Comm parent, merged;
    int wrank, wsize, remote, one = 1, sum = 0, psize;
    char cwd[4096], port[MPI_MAX_PORT_NAME];

    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL, "a spawned process has no parent");
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &wrank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
    CHECK_MPI(MPI_Comm_remote_size(parent, &remote));
    CHECK(argc >= 3, "child arguments");
    psize = atoi(argv[2]);
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(wsize, sum, "sum over the children's world");
    {
        /* A session's mpi://WORLD is the children's own world. */
        MPI_Session session;
        MPI_Group pset, world;
        int cmp = -1;
        CHECK_MPI(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session));
        CHECK_MPI(MPI_Group_from_session_pset(session, "mpi://WORLD", &pset));
        CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
        CHECK_MPI(MPI_Group_compare(pset, world, &cmp));
        CHECK_EQ(MPI_IDENT, cmp, "mpi://WORLD of a spawned world");
        CHECK_MPI(MPI_Group_free(&pset));
        CHECK_MPI(MPI_Group_free(&world));
        CHECK_MPI(MPI_Session_finalize(&session));
    }

    if (strcmp(argv[1], "die") == 0) {
        int v;
        if (wrank == 1)
            raise(SIGKILL);
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 7, parent, MPI_STATUS_IGNORE));
    } else if (strcmp(argv[1], "basic") == 0) {
        CHECK_EQ(3, wsize, "children's world size");
        CHECK_EQ(psize, remote, "parents' group size");
        CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
        CHECK(strcmp(cwd, "/tmp") == 0, "wdir: started in %s, not /tmp", cwd);
        answer_remote_root(parent, 1000, wrank);
        CHECK_MPI(MPI_Intercomm_merge(parent, 1, &merged));
        CHECK_MPI(MPI_Comm_size(merged, &sum));
        CHECK_EQ(psize + wsize, sum, "merged size");
        CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged));
        CHECK_EQ(psize + wsize, sum, "sum over the merged communicator");
        CHECK_MPI(MPI_Comm_free(&merged));
    } else if (strcmp(argv[1], "multi") == 0) {
        CHECK_EQ(3, wsize, "children's world size");
        CHECK_EQ(wrank == 0 ? 0 : 1, appnum(), "MPI_APPNUM of child %d", wrank);
        CHECK_EQ(wrank == 0 ? 0 : 1, atoi(argv[3]), "argument of child %d", wrank);
        CHECK_MPI(MPI_Barrier(parent));
    } else if (strcmp(argv[1], "port") == 0) {
        MPI_Comm server;
        CHECK_EQ(1, remote, "parents' group of a spawn over MPI_COMM_SELF");
        if (wrank == 0)
            CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 9, parent, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &server));
        CHECK_MPI(MPI_Comm_remote_size(server, &remote));
        CHECK_EQ(1, remote, "the accepting group's size");
        answer_remote_root(server, 500, wrank);
        CHECK_MPI(MPI_Comm_disconnect(&server));
    }
    CHECK_MPI(MPI_Comm_disconnect(&parent));
    CHECK(parent == MPI_COMM_NULL, "disconnect resets the handle");
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "the parent after a disconnect");
    CHECK_MPI(MPI_Finalize());
    return 0;
}

static void basic(void)
{
    MPI_Comm inter, merged;
    MPI_Info info;
    int errcodes[3] = {-1, -1, -1}, i, n, one = 1, sum = 0, mrank;
    char psize[16];
    char *args[] = {"basic", psize, NULL};

    snprintf(psize, sizeof psize, "%d", size);
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "wdir", "/tmp"));
    CHECK_MPI(MPI_Comm_spawn(self_exe, args, 3, info, 0, MPI_COMM_WORLD, &inter, errcodes));
    CHECK_MPI(MPI_Info_free(&info));
    if (rank == 0)
        for (i = 0; i < 3; i++)
            CHECK_EQ(MPI_SUCCESS, errcodes[i], "errcodes[%d]", i);
    CHECK_MPI(MPI_Comm_remote_size(inter, &n));
    CHECK_EQ(3, n, "children");
    if (rank == 0)
        exchange_with_remote(inter, 1000);
    CHECK_MPI(MPI_Intercomm_merge(inter, 0, &merged));
    CHECK_MPI(MPI_Comm_size(merged, &n));
    CHECK_EQ(size + 3, n, "merged size");
    CHECK_MPI(MPI_Comm_rank(merged, &mrank));
    CHECK_EQ(rank, mrank, "parents come first in the merged communicator");
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK_EQ(size + 3, sum, "sum over the merged communicator");
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_disconnect(&inter));
}

static void multiple(void)
{
    MPI_Comm inter;
    char psize[16];
    char *args0[] = {"multi", psize, "0", NULL}, *args1[] = {"multi", psize, "1", NULL};
    char *cmds[2] = {self_exe, self_exe};
    char **argvs[2] = {args0, args1};
    int maxprocs[2] = {1, 2}, errcodes[3], n;
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};

    snprintf(psize, sizeof psize, "%d", size);
    CHECK_MPI(MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, size - 1, MPI_COMM_WORLD, &inter, errcodes));
    CHECK_MPI(MPI_Comm_remote_size(inter, &n));
    CHECK_EQ(3, n, "children of two programs");
    CHECK_MPI(MPI_Barrier(inter));
    CHECK_MPI(MPI_Comm_disconnect(&inter));
}

static void missing_program(void)
{
    MPI_Comm inter = MPI_COMM_WORLD, dup;
    int errcodes[2] = {0, 0}, rc;

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    rc = MPI_Comm_spawn("/nonexistent/tandem-no-such-program", MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, dup, &inter, errcodes);
    tc_expect_class(rc, MPI_ERR_SPAWN, "spawning a program that does not exist");
    CHECK(inter == MPI_COMM_NULL, "a failed spawn's intercommunicator");
    if (rank == 0) {
        CHECK_EQ(MPI_ERR_SPAWN, errcodes[0], "errcodes[0] of a failed spawn");
        CHECK_EQ(MPI_ERR_SPAWN, errcodes[1], "errcodes[1] of a failed spawn");
    }
    /* A program that ends without MPI_Init: the spawn fails, it does not
       wait for ever. */
    rc = MPI_Comm_spawn("/bin/true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, dup, &inter, MPI_ERRCODES_IGNORE);
    tc_expect_class(rc, MPI_ERR_SPAWN, "spawning a program that is not an MPI program");
    CHECK(inter == MPI_COMM_NULL, "a failed spawn's intercommunicator");
    CHECK_MPI(MPI_Comm_free(&dup));
}

static void late_comers(void)
{
    char port[MPI_MAX_PORT_NAME];
    char psize[] = "1";
    char *args[] = {"port", psize, NULL};
    MPI_Comm inter, clients;

    if (rank == 1) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 9, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &clients));
        exchange_with_remote(clients, 500);
        CHECK_MPI(MPI_Comm_disconnect(&clients));
        CHECK_MPI(MPI_Close_port(port));
    } else if (rank == 0) {
        CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Comm_spawn(self_exe, args, 2, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, MPI_ERRCODES_IGNORE));
        CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 9, inter));
        CHECK_MPI(MPI_Comm_disconnect(&inter));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void names(void)
{
    char port[MPI_MAX_PORT_NAME], found[MPI_MAX_PORT_NAME];
    MPI_Comm other;
    int rc, v = 0;

    /* Calls that name no communicator report to MPI_COMM_WORLD's handler. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (rank == 0) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Publish_name("tandem-spawn-test", MPI_INFO_NULL, port));
        rc = MPI_Publish_name("tandem-spawn-test", MPI_INFO_NULL, port);
        tc_expect_class(rc, MPI_ERR_SERVICE, "publishing a name twice");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) {
        CHECK_MPI(MPI_Lookup_name("tandem-spawn-test", MPI_INFO_NULL, found));
        CHECK_MPI(MPI_Comm_connect(found, MPI_INFO_NULL, 0, MPI_COMM_SELF, &other));
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 3, other, MPI_STATUS_IGNORE));
        CHECK_EQ(77, v, "message over a connection found by name");
        CHECK_MPI(MPI_Comm_disconnect(&other));
    } else if (rank == 0) {
        CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &other));
        v = 77;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 3, other));
        CHECK_MPI(MPI_Comm_disconnect(&other));
        CHECK_MPI(MPI_Unpublish_name("tandem-spawn-test", MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Close_port(port));
        rc = MPI_Close_port(port);
        tc_expect_class(rc, MPI_ERR_PORT, "closing a port twice");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    rc = MPI_Lookup_name("tandem-spawn-test", MPI_INFO_NULL, found);
    tc_expect_class(rc, MPI_ERR_NAME, "looking up an unpublished name");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void join(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = -1, lfd, one = 1, v = -1, remote = 0;
    MPI_Comm inter;

    if (rank > 1)
        return;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (rank == 0) {
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(lfd >= 0, "socket");
        CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0, "bind");
        CHECK(listen(lfd, 1) == 0, "listen");
        CHECK(getsockname(lfd, (struct sockaddr *)&a, &len) == 0, "getsockname");
        CHECK_MPI(MPI_Send(&a.sin_port, sizeof a.sin_port, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0, "accept");
        close(lfd);
    } else {
        CHECK_MPI(MPI_Recv(&a.sin_port, sizeof a.sin_port, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0, "socket");
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    }
    setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
    CHECK_MPI(MPI_Comm_join(fd, &inter));
    CHECK_MPI(MPI_Comm_remote_size(inter, &remote));
    CHECK_EQ(1, remote, "the other end of a join");
    v = rank;
    CHECK_MPI(MPI_Sendrecv_replace(&v, 1, MPI_INT, 0, 4, 0, 4, inter, MPI_STATUS_IGNORE));
    CHECK_EQ(1 - rank, v, "message over a joined socket");
    CHECK_MPI(MPI_Comm_disconnect(&inter));
    close(fd);
}

int main(int argc, char **argv)
{
    MPI_Comm parent;
    ssize_t n;

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_get_parent(&parent));
    if (parent != MPI_COMM_NULL)
        return child(argc, argv);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    CHECK(n > 0, "readlink /proc/self/exe");
    self_exe[n] = 0;

    if (argc > 1 && strcmp(argv[1], "die") == 0) {
        MPI_Comm inter;
        int v;
        char psize[16];
        char *args[] = {"die", psize, NULL};
        snprintf(psize, sizeof psize, "%d", size);
        CHECK_MPI(MPI_Comm_spawn(self_exe, args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE));
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 1, 7, inter, MPI_STATUS_IGNORE));
        CHECK(0, "a message from a child that was killed");
    }
    basic();
    multiple();
    missing_program();
    if (size >= 2) {
        late_comers();
        names();
        if (!(argc > 1 && strcmp(argv[1], "across") == 0))
            join();
    }
    return tc_finish(NAME);
}

/*
 * sessions.c - MPI-4 sessions: the runtime started by MPI_Session_init,
 * process sets, communicators made from a group without a parent, session
 * error handlers, and the world model beside them.
 *
 * Ranks: any number (1 included).
 *
 *   1. before MPI_Init (MPI_Initialized says 0): a session; its process
 *      sets (mpi://WORLD and mpi://SELF by number, with their lengths and
 *      a truncated copy, and their mpi_size); the world group; a
 *      communicator from it with a string tag: size, rank, an allreduce and
 *      a ring exchange; mpi://SELF gives a communicator of size 1;
 *      buffered sends through a session buffer (MPI_Session_attach_buffer,
 *      _c with MPI_BUFFER_AUTOMATIC, flush, iflush, detach) on that
 *      communicator and a duplicate of it; MPI_ERR_BUFFER for a message
 *      larger than the buffer, a second attach, a detach with none;
 *   2. the even ranks and the odd ranks make communicators of themselves
 *      with different tags at the same time; then ranks 0..k (k = size/2)
 *      make one of themselves while the others exchange in the world one
 *      among themselves; an intercommunicator between the even and the odd
 *      ranks (MPI_Intercomm_create_from_groups, the last rank of each group
 *      its leader): remote size, local rank,
 *      an allreduce across it;
 *   3. session error handlers: an unknown process set and a process set
 *      number out of range fail with MPI_ERR_ARG through the session's
 *      MPI_ERRORS_RETURN; a user handler (MPI_Session_create_errhandler)
 *      set on the session is called with the session and the code, by an
 *      error and by MPI_Session_call_errhandler; MPI_Session_get_errhandler
 *      returns it; MPI_Session_get_info gives the thread level; toint and
 *      fromint round-trip the handle;
 *   4. MPI_Init with the session open: a second session, a communicator
 *      from its world group with the same tag is distinct from the first
 *      (a message in one is not received in the other); error classes
 *      (MPI_COMM_SELF returns errors): MPI_SESSION_NULL -> MPI_ERR_SESSION,
 *      MPI_GROUP_NULL -> MPI_ERR_GROUP, NULL stringtag -> MPI_ERR_ARG, a
 *      group without the caller -> MPI_ERR_GROUP (MPI_GROUP_EMPTY gives
 *      MPI_COMM_NULL and success), thread_level NOT_A_LEVEL ->
 *      MPI_ERR_INFO_VALUE, a communicator error
 *      handler given to MPI_Session_init -> MPI_ERR_ERRHANDLER;
 *   5. MPI_Finalize with the first session still open: MPI_Finalized says
 *      1, the session's communicator still works; MPI_Session_finalize sets
 *      the handle to MPI_SESSION_NULL and ends the runtime.
 */
#include "check.h"

#define NAME "sessions"

static int wrank, wsize;

static int handler_calls;
static MPI_Session handler_session;
static int handler_code;

static void session_handler(MPI_Session *s, int *code, ...)
{
    handler_calls++;
    handler_session = *s;
    handler_code = *code;
}

#define OK(call) CHECK_EQ(MPI_SUCCESS, (call), #call)

/* Size, an allreduce and a ring exchange in `comm` made of world ranks
 * members[0..n). */
static void exercise(MPI_Comm comm, const int *members, int n, const char *what)
{
    int size, rank, me = -1;
    OK(MPI_Comm_size(comm, &size));
    OK(MPI_Comm_rank(comm, &rank));
    CHECK_EQ(n, size, "%s: size", what);
    for (int i = 0; i < n; i++)
        if (members[i] == wrank)
            me = i;
    CHECK_EQ(me, rank, "%s: rank", what);
    long sum = 0, expect = 0;
    long mine = 1000 + wrank;
    for (int i = 0; i < n; i++)
        expect += 1000 + members[i];
    OK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, comm));
    CHECK_EQ(expect, sum, "%s: allreduce", what);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = wrank * 7 + 3, in = -1;
    OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 11, &in, 1, MPI_INT, left, 11, comm, MPI_STATUS_IGNORE));
    CHECK_EQ(members[left] * 7 + 3, in, "%s: ring exchange", what);
}

/* A communicator over world ranks members[0..n) made by its members only. */
static MPI_Comm from_members(MPI_Session s, const int *members, int n, const char *tag)
{
    MPI_Group world, sub;
    MPI_Comm comm = MPI_COMM_NULL;
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
    OK(MPI_Group_incl(world, n, members, &sub));
    OK(MPI_Comm_create_from_group(sub, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm));
    CHECK(comm != MPI_COMM_NULL, "%s: a communicator", tag);
    OK(MPI_Group_free(&sub));
    OK(MPI_Group_free(&world));
    return comm;
}

static int pset_size(MPI_Session s, const char *name)
{
    MPI_Info info;
    char value[32];
    int flag = 0;
    OK(MPI_Session_get_pset_info(s, name, &info));
    OK(MPI_Info_get(info, "mpi_size", sizeof value - 1, value, &flag));
    CHECK(flag, "%s has mpi_size", name);
    OK(MPI_Info_free(&info));
    return atoi(value);
}

int main(int argc, char **argv)
{
    int flag = -1;
    MPI_Session s1 = MPI_SESSION_NULL, s2 = MPI_SESSION_NULL;

    /* 1. A session before MPI_Init. */
    OK(MPI_Initialized(&flag));
    CHECK_EQ(0, flag, "MPI_Initialized before everything");
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s1));
    CHECK(s1 != MPI_SESSION_NULL, "a session handle");
    OK(MPI_Initialized(&flag));
    CHECK_EQ(0, flag, "MPI_Initialized with only a session");

    int npsets = 0;
    OK(MPI_Session_get_num_psets(s1, MPI_INFO_NULL, &npsets));
    CHECK(npsets >= 2, "at least two process sets (got %d)", npsets);
    int seen_world = 0, seen_self = 0;
    for (int i = 0; i < npsets; i++) {
        char name[64];
        int len = 0;
        OK(MPI_Session_get_nth_pset(s1, MPI_INFO_NULL, i, &len, name));
        CHECK(len > 1 && len <= (int)sizeof name, "length of process set %d", i);
        int got = len;
        OK(MPI_Session_get_nth_pset(s1, MPI_INFO_NULL, i, &got, name));
        CHECK_EQ(len, got, "length again");
        CHECK_EQ(len - 1, (long long)strlen(name), "name length");
        seen_world += strcmp(name, "mpi://WORLD") == 0;
        seen_self += strcmp(name, "mpi://SELF") == 0;
        char small[4] = {'x', 'x', 'x', 'x'};
        got = 3;
        OK(MPI_Session_get_nth_pset(s1, MPI_INFO_NULL, i, &got, small));
        CHECK(small[2] == 0 && strncmp(small, name, 2) == 0, "truncated copy");
        CHECK(small[3] == 'x', "no byte written past the room");
    }
    CHECK_EQ(1, seen_world, "mpi://WORLD listed");
    CHECK_EQ(1, seen_self, "mpi://SELF listed");
    wsize = pset_size(s1, "mpi://WORLD");
    CHECK(wsize >= 1, "world size %d", wsize);
    CHECK_EQ(1, pset_size(s1, "mpi://SELF"), "mpi_size of mpi://SELF");

    MPI_Group wgroup;
    OK(MPI_Group_from_session_pset(s1, "mpi://WORLD", &wgroup));
    int gsize = 0;
    OK(MPI_Group_size(wgroup, &gsize));
    CHECK_EQ(wsize, gsize, "world group size");
    OK(MPI_Group_rank(wgroup, &wrank));
    MPI_Comm wcomm;
    OK(MPI_Comm_create_from_group(wgroup, "org.tandem.sessions.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &wcomm));
    OK(MPI_Group_free(&wgroup));
    int *all = malloc(sizeof(int) * (size_t)wsize);
    for (int i = 0; i < wsize; i++)
        all[i] = i;
    exercise(wcomm, all, wsize, "world communicator");

    MPI_Group sgroup;
    MPI_Comm scomm;
    OK(MPI_Group_from_session_pset(s1, "mpi://SELF", &sgroup));
    OK(MPI_Comm_create_from_group(sgroup, "org.tandem.sessions.self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &scomm));
    OK(MPI_Group_free(&sgroup));
    exercise(scomm, &wrank, 1, "self communicator");
    OK(MPI_Comm_free(&scomm));

    /* 1b. Buffered sends through the session's buffer (MPI-4.1): with no
     * other buffer attached, a communicator made from the session, and one
     * derived from it, send through it; a message larger than it is
     * refused. */
    {
        enum { N = 4 };
        int room = 2 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
        char *buf = malloc((size_t)room);
        int right = (wrank + 1) % wsize, left = (wrank + wsize - 1) % wsize;
        MPI_Comm dup;
        OK(MPI_Comm_dup(wcomm, &dup));
        OK(MPI_Session_attach_buffer(s1, buf, room));
        tc_expect_class(MPI_Session_attach_buffer(s1, buf, room), MPI_ERR_BUFFER,
                 "a second session buffer");
        for (int round = 0; round < 2; round++) {
            MPI_Comm c = round ? dup : wcomm;
            int out[N], in[N];
            for (int i = 0; i < N; i++)
                out[i] = 1000 * round + 10 * wrank + i;
            OK(MPI_Bsend(out, N, MPI_INT, right, 21, c));
            out[0] = -1; /* the message was copied out at the call */
            OK(MPI_Recv(in, N, MPI_INT, left, 21, c, MPI_STATUS_IGNORE));
            for (int i = 0; i < N; i++)
                CHECK_EQ(1000 * round + 10 * left + i, in[i], "buffered send through the session buffer");
            if (round)
                OK(MPI_Session_flush_buffer(s1));
            else {
                MPI_Request r;
                OK(MPI_Session_iflush_buffer(s1, &r));
                OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            }
        }
        int *big = calloc((size_t)room, 1);
        tc_expect_class(MPI_Bsend(big, room, MPI_BYTE, right, 22, wcomm), MPI_ERR_BUFFER,
                 "a buffered send larger than the session buffer");
        free(big);
        void *got = NULL;
        int got_size = -1;
        OK(MPI_Session_detach_buffer(s1, &got, &got_size));
        CHECK(got == buf && got_size == room, "the session buffer comes back on detach");
        tc_expect_class(MPI_Session_detach_buffer(s1, &got, &got_size), MPI_ERR_BUFFER,
                 "detaching a session buffer that is not attached");
        MPI_Count got_c = -1;
        OK(MPI_Session_attach_buffer_c(s1, MPI_BUFFER_AUTOMATIC, 0));
        OK(MPI_Bsend(all, wsize, MPI_INT, right, 23, dup));
        int *back = malloc(sizeof(int) * (size_t)wsize);
        OK(MPI_Recv(back, wsize, MPI_INT, left, 23, dup, MPI_STATUS_IGNORE));
        CHECK_EQ(wsize - 1, back[wsize - 1], "buffered send through an automatic session buffer");
        OK(MPI_Session_detach_buffer_c(s1, &got, &got_c));
        CHECK(got == MPI_BUFFER_AUTOMATIC && got_c == 0, "the automatic buffer comes back on detach");
        free(back);
        OK(MPI_Comm_free(&dup));
        free(buf);
    }

    /* 2. Subgroups made by their members only. */
    {
        int *half = malloc(sizeof(int) * (size_t)wsize);
        int n = 0;
        for (int i = wrank % 2; i < wsize; i += 2)
            half[n++] = i;
        MPI_Comm c = from_members(s1, half, n, wrank % 2 ? "odd" : "even");
        exercise(c, half, n, "even or odd ranks");
        OK(MPI_Comm_free(&c));

        int k = wsize / 2 + 1;
        if (wrank < k) {
            MPI_Comm low = from_members(s1, all, k, "low ranks");
            exercise(low, all, k, "low ranks");
            OK(MPI_Comm_free(&low));
        } else {
            /* Meanwhile the others exchange among themselves in wcomm. */
            int m = wsize - k, i = wrank - k;
            int right = k + (i + 1) % m, left = k + (i + m - 1) % m;
            int out = wrank, in = -1;
            OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 12, &in, 1, MPI_INT, left, 12, wcomm, MPI_STATUS_IGNORE));
            CHECK_EQ(left, in, "ring among the others while the low ranks create");
        }
        OK(MPI_Barrier(wcomm));

        /* An intercommunicator between the even and the odd ranks. */
        if (wsize >= 2) {
            int *other = malloc(sizeof(int) * (size_t)wsize);
            int m = 0;
            for (int i = 1 - wrank % 2; i < wsize; i += 2)
                other[m++] = i;
            MPI_Group world, mine, theirs;
            MPI_Comm inter;
            OK(MPI_Group_from_session_pset(s1, "mpi://WORLD", &world));
            OK(MPI_Group_incl(world, n, half, &mine));
            OK(MPI_Group_incl(world, m, other, &theirs));
            OK(MPI_Intercomm_create_from_groups(mine, n - 1, theirs, m - 1, "even-odd", MPI_INFO_NULL,
                                                MPI_ERRORS_RETURN, &inter));
            int is_inter = 0, rsize = 0, lrank = -1;
            OK(MPI_Comm_test_inter(inter, &is_inter));
            CHECK_EQ(1, is_inter, "an intercommunicator");
            OK(MPI_Comm_remote_size(inter, &rsize));
            CHECK_EQ(m, rsize, "remote size");
            OK(MPI_Comm_rank(inter, &lrank));
            CHECK_EQ(wrank / 2, lrank, "local rank");
            long mine_v = 1000 + wrank, sum = 0, expect = 0;
            for (int i = 0; i < m; i++)
                expect += 1000 + other[i];
            OK(MPI_Allreduce(&mine_v, &sum, 1, MPI_LONG, MPI_SUM, inter));
            CHECK_EQ(expect, sum, "intercommunicator allreduce (the remote group's sum)");
            OK(MPI_Comm_free(&inter));
            OK(MPI_Group_free(&mine));
            OK(MPI_Group_free(&theirs));
            OK(MPI_Group_free(&world));
            free(other);
        }
        free(half);
    }

    /* 3. Session error handlers and queries. */
    {
        MPI_Group g = MPI_GROUP_NULL;
        CHECK_EQ(MPI_ERR_ARG, MPI_Group_from_session_pset(s1, "mpi://NOWHERE", &g), "unknown process set");
        int len = 0;
        char name[8];
        CHECK_EQ(MPI_ERR_ARG, MPI_Session_get_nth_pset(s1, MPI_INFO_NULL, npsets, &len, name), "pset number out of range");
        CHECK_EQ(MPI_ERR_ARG, MPI_Session_get_pset_info(s1, "mpi://NOWHERE", &(MPI_Info){0}), "pset info of unknown set");

        MPI_Errhandler eh, got;
        OK(MPI_Session_create_errhandler(session_handler, &eh));
        OK(MPI_Session_set_errhandler(s1, eh));
        OK(MPI_Session_get_errhandler(s1, &got));
        CHECK(got == eh, "MPI_Session_get_errhandler returns the handler set");
        OK(MPI_Errhandler_free(&got));
        int rc = MPI_Group_from_session_pset(s1, "mpi://NOWHERE", &g);
        CHECK_EQ(1, handler_calls, "handler called by an error");
        CHECK(handler_session == s1, "handler given the session");
        int cls = -1;
        MPI_Error_class(handler_code, &cls);
        CHECK_EQ(MPI_ERR_ARG, cls, "handler given the error's code");
        CHECK_EQ(MPI_ERR_ARG, rc, "the call returns the code");
        OK(MPI_Session_call_errhandler(s1, MPI_ERR_OTHER));
        CHECK_EQ(2, handler_calls, "handler called by MPI_Session_call_errhandler");
        CHECK_EQ(MPI_ERR_OTHER, handler_code, "with the code given");
        OK(MPI_Session_set_errhandler(s1, MPI_ERRORS_RETURN));
        OK(MPI_Errhandler_free(&eh));

        MPI_Info info;
        char value[64];
        int flag2 = 0;
        OK(MPI_Session_get_info(s1, &info));
        OK(MPI_Info_get(info, "mpi_thread_support_level", sizeof value - 1, value, &flag2));
        CHECK(flag2 && strncmp(value, "MPI_THREAD_", 11) == 0, "thread level in the session's info");
        OK(MPI_Info_free(&info));

        CHECK(MPI_Session_fromint(MPI_Session_toint(s1)) == s1, "toint/fromint round trip");
    }

    /* 4. MPI_Init beside the session, and a second session. */
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Initialized(&flag));
    CHECK_EQ(1, flag, "MPI_Initialized after MPI_Init");
    {
        int r = -1;
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        CHECK_EQ(wrank, r, "rank in MPI_COMM_WORLD");
    }
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2));
    CHECK(s2 != s1, "two sessions are distinct");
    MPI_Comm wcomm2 = from_members(s2, all, wsize, "org.tandem.sessions.world");
    exercise(wcomm2, all, wsize, "second session's world communicator");
    {
        /* A message in one communicator is not received in the other. */
        int right = (wrank + 1) % wsize, left = (wrank + wsize - 1) % wsize;
        int a = 1, b = 2, got = 0, pending = 1;
        MPI_Request req;
        OK(MPI_Isend(&a, 1, MPI_INT, right, 5, wcomm, &req));
        OK(MPI_Probe(left, 5, wcomm, MPI_STATUS_IGNORE));
        OK(MPI_Iprobe(left, 5, wcomm2, &pending, MPI_STATUS_IGNORE));
        CHECK_EQ(0, pending, "no message of the first communicator in the second");
        OK(MPI_Barrier(wcomm2));
        OK(MPI_Send(&b, 1, MPI_INT, right, 5, wcomm2));
        OK(MPI_Recv(&got, 1, MPI_INT, left, 5, wcomm2, MPI_STATUS_IGNORE));
        CHECK_EQ(2, got, "second communicator's message");
        OK(MPI_Recv(&got, 1, MPI_INT, left, 5, wcomm, MPI_STATUS_IGNORE));
        CHECK_EQ(1, got, "first communicator's message");
        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    OK(MPI_Comm_free(&wcomm2));

    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    {
        int n = 0;
        MPI_Comm c = MPI_COMM_NULL;
        MPI_Group world, others;
        CHECK_EQ(MPI_ERR_SESSION, MPI_Session_get_num_psets(MPI_SESSION_NULL, MPI_INFO_NULL, &n), "MPI_SESSION_NULL");
        CHECK_EQ(MPI_ERR_SESSION, MPI_Session_call_errhandler(MPI_SESSION_NULL, MPI_ERR_OTHER), "call_errhandler on MPI_SESSION_NULL");
        CHECK_EQ(MPI_ERR_GROUP, MPI_Comm_create_from_group(MPI_GROUP_NULL, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c), "MPI_GROUP_NULL");
        OK(MPI_Group_from_session_pset(s2, "mpi://WORLD", &world));
        CHECK_EQ(MPI_ERR_ARG, MPI_Comm_create_from_group(world, NULL, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c), "NULL stringtag");
        OK(MPI_Group_excl(world, 1, &wrank, &others));
        if (wsize > 1) /* else the group is empty */
            CHECK_EQ(MPI_ERR_GROUP, MPI_Comm_create_from_group(others, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c),
                     "group without the caller");
        CHECK(c == MPI_COMM_NULL, "no communicator made");
        c = MPI_COMM_SELF;
        OK(MPI_Comm_create_from_group(MPI_GROUP_EMPTY, "empty", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
        CHECK(c == MPI_COMM_NULL, "MPI_GROUP_EMPTY gives MPI_COMM_NULL");
        OK(MPI_Group_free(&others));
        OK(MPI_Group_free(&world));
        MPI_Errhandler ceh;
        MPI_Session s3 = MPI_SESSION_NULL;
        OK(MPI_Comm_create_errhandler((MPI_Comm_errhandler_function *)session_handler, &ceh));
        CHECK_EQ(MPI_ERR_ERRHANDLER, MPI_Session_init(MPI_INFO_NULL, ceh, &s3), "communicator handler for a session");
        OK(MPI_Errhandler_free(&ceh));
        MPI_Info bad;
        OK(MPI_Info_create(&bad));
        OK(MPI_Info_set(bad, "thread_level", "NOT_A_LEVEL"));
        CHECK_EQ(MPI_ERR_INFO_VALUE, MPI_Session_init(bad, MPI_ERRORS_RETURN, &s3), "unknown thread_level");
        OK(MPI_Info_free(&bad));
    }
    OK(MPI_Session_finalize(&s2));
    CHECK(s2 == MPI_SESSION_NULL, "finalize clears the handle");

    /* 5. MPI_Finalize with the first session open. */
    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK_EQ(1, flag, "MPI_Finalized after MPI_Finalize");
    exercise(wcomm, all, wsize, "session communicator after MPI_Finalize");
    OK(MPI_Comm_free(&wcomm));
    OK(MPI_Session_finalize(&s1));
    CHECK(s1 == MPI_SESSION_NULL, "finalize clears the handle");
    free(all);
    if (wrank == 0)
        printf("PASS %s\n", NAME);
    return 0;
}

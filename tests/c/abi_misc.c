/*
 * abi_misc.c - the MPI-5.0 ABI functions and the dynamic-process calls.
 *
 *   1. MPI_Abi_get_version (also before MPI_Init), MPI_Abi_get_info's keys;
 *   2. the Fortran registration: unknown until set, set once (a second call
 *      is MPI_ERR_ABI), read back; booleans for the registered size only;
 *   3. handle serialization: predefined handles give their ABI integers,
 *      user handles of every kind (communicators, groups, datatypes, infos,
 *      operations, error handlers, windows, messages, point-to-point and
 *      table requests) round-trip through MPI_<Kind>_toint/_fromint (and
 *      MPI_<Kind>_c2f/_f2c, the same integers; MPI_Status_c2f/f2c), and the
 *      integers are outside 1..4095 and stable;
 *   4. MPI_Status_get/set_source, _tag, _error;
 *   5. MPI_Comm_get_parent is MPI_COMM_NULL; spawning programs that do
 *      not exist, and ports that are not ports, fail with their classes
 *      through the communicator's error handler (outputs reset), bad
 *      arguments with theirs; a port opens and closes once; a name is
 *      published, found and unpublished; MPI_Comm_disconnect frees a
 *      duplicate of MPI_COMM_WORLD after its messages arrived (spawn.c
 *      covers the calls that work);
 *   6. MPI_INFO_ENV and MPI_Info_create_env: command, argv, maxprocs, wdir,
 *      also before MPI_Init, with the same values; MPI_Get_hw_resource_info.
 */
#include "check.h"

#define NAME "abi_misc"

static int rank, size;

static void versions(void)
{
    int major = -5, minor = -5, flag = 0, nkeys = 0, i;
    MPI_Info info = MPI_INFO_NULL;
    char value[MPI_MAX_INFO_VAL];
    const char *keys[3] = {"mpi_aint_size", "mpi_count_size", "mpi_offset_size"};
    int sizes[3] = {(int)sizeof(MPI_Aint), (int)sizeof(MPI_Count), (int)sizeof(MPI_Offset)};
    CHECK_MPI(MPI_Abi_get_version(&major, &minor));
    CHECK_EQ(MPI_ABI_VERSION, major, "ABI major version");
    CHECK_EQ(MPI_ABI_SUBVERSION, minor, "ABI minor version");
    CHECK_MPI(MPI_Abi_get_info(&info));
    CHECK(info != MPI_INFO_NULL, "MPI_Abi_get_info gave MPI_INFO_NULL");
    CHECK_MPI(MPI_Info_get_nkeys(info, &nkeys));
    CHECK_EQ(3, nkeys, "keys of MPI_Abi_get_info");
    for (i = 0; i < 3; i++) {
        CHECK_MPI(MPI_Info_get(info, keys[i], MPI_MAX_INFO_VAL - 1, value, &flag));
        CHECK(flag, "key %s missing", keys[i]);
        CHECK_EQ(sizes[i], atoi(value), "value of %s", keys[i]);
    }
    CHECK_MPI(MPI_Info_free(&info));
}

static void fortran(void)
{
    MPI_Info info = (MPI_Info)0, set;
    int is_set = -1, rc, flag = 0;
    int t = 1, f = 0, t_out = 77, f_out = 77;
    char value[MPI_MAX_INFO_VAL];
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Abi_get_fortran_info(&info));
    CHECK(info == MPI_INFO_NULL, "Fortran info known before it was set");
    CHECK_MPI(MPI_Abi_get_fortran_booleans(4, &t_out, &f_out, &is_set));
    CHECK_EQ(0, is_set, "Fortran booleans set before they were");
    CHECK_EQ(77, t_out, "logical_true written while not set");

    /* A logical size that is not a power of two */
    rc = MPI_Abi_set_fortran_booleans(3, &t, &f);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Abi_set_fortran_booleans(size 3)");

    CHECK_MPI(MPI_Abi_set_fortran_booleans(4, &t, &f));
    CHECK_MPI(MPI_Abi_get_fortran_booleans(4, &t_out, &f_out, &is_set));
    CHECK_EQ(1, is_set, "Fortran booleans after setting them");
    CHECK_EQ(1, t_out, ".TRUE.");
    CHECK_EQ(0, f_out, ".FALSE.");
    CHECK_MPI(MPI_Abi_get_fortran_booleans(8, &t_out, &f_out, &is_set));
    CHECK_EQ(0, is_set, "booleans of another LOGICAL size");
    rc = MPI_Abi_set_fortran_booleans(4, &f, &t);
    tc_expect_class(rc, MPI_ERR_ABI, "second MPI_Abi_set_fortran_booleans");
    CHECK_MPI(MPI_Abi_get_fortran_booleans(4, &t_out, &f_out, &is_set));
    CHECK_EQ(1, t_out, ".TRUE. after the refused second call");

    CHECK_MPI(MPI_Info_create(&set));
    CHECK_MPI(MPI_Info_set(set, "mpi_integer_size", "8"));
    rc = MPI_Abi_set_fortran_info(set);
    tc_expect_class(rc, MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Abi_set_fortran_info(8-byte INTEGER)");
    CHECK_MPI(MPI_Info_set(set, "mpi_integer_size", "4"));
    CHECK_MPI(MPI_Info_set(set, "mpi_real16_supported", "false"));
    CHECK_MPI(MPI_Abi_set_fortran_info(set));
    rc = MPI_Abi_set_fortran_info(set);
    tc_expect_class(rc, MPI_ERR_ABI, "second MPI_Abi_set_fortran_info");
    CHECK_MPI(MPI_Info_free(&set));
    CHECK_MPI(MPI_Abi_get_fortran_info(&info));
    CHECK(info != MPI_INFO_NULL, "Fortran info unknown after setting it");
    CHECK_MPI(MPI_Info_get(info, "mpi_real16_supported", MPI_MAX_INFO_VAL - 1, value, &flag));
    CHECK(flag && strcmp(value, "false") == 0, "mpi_real16_supported read back");
    CHECK_MPI(MPI_Info_free(&info));
}

static void check_user_int(int v, const char *what)
{
    CHECK(v < 1 || v > 4095, "%s: integer %d in the predefined range", what, v);
}

static void handles(void)
{
    MPI_Comm dup;
    MPI_Group group;
    MPI_Datatype vec;
    MPI_Info info;
    MPI_Op op;
    MPI_Errhandler eh;
    MPI_Win win;
    MPI_Message msg;
    MPI_Request reqs[40], coll;
    int v, i, buf = 0, winmem = 0, ints[40];
    MPI_Status st;

    /* Predefined handles are their ABI integers (MPI-5.0 appendix A). */
    CHECK_EQ(0x101, MPI_Comm_toint(MPI_COMM_WORLD), "MPI_COMM_WORLD");
    CHECK_EQ(0x100, MPI_Comm_toint(MPI_COMM_NULL), "MPI_COMM_NULL");
    CHECK_EQ(0x209, MPI_Type_toint(MPI_INT), "MPI_INT");
    CHECK_EQ(0x021, MPI_Op_toint(MPI_SUM), "MPI_SUM");
    CHECK_EQ(0x180, MPI_Request_toint(MPI_REQUEST_NULL), "MPI_REQUEST_NULL");
    CHECK_EQ(0x109, MPI_Group_toint(MPI_GROUP_EMPTY), "MPI_GROUP_EMPTY");
    CHECK_EQ(0x131, MPI_Info_toint(MPI_INFO_ENV), "MPI_INFO_ENV");
    CHECK_EQ(0x141, MPI_Errhandler_toint(MPI_ERRORS_ARE_FATAL), "MPI_ERRORS_ARE_FATAL");
    CHECK_EQ(0x110, MPI_Win_toint(MPI_WIN_NULL), "MPI_WIN_NULL");
    CHECK_EQ(0x118, MPI_File_toint(MPI_FILE_NULL), "MPI_FILE_NULL");
    CHECK_EQ(0x120, MPI_Session_toint(MPI_SESSION_NULL), "MPI_SESSION_NULL");
    CHECK_EQ(0x129, MPI_Message_toint(MPI_MESSAGE_NO_PROC), "MPI_MESSAGE_NO_PROC");
    CHECK(MPI_Comm_fromint(0x102) == MPI_COMM_SELF, "MPI_Comm_fromint(0x102)");
    CHECK(MPI_Type_fromint(0x214) == MPI_DOUBLE, "MPI_Type_fromint(0x214)");
    CHECK(MPI_Op_fromint(0x023) == MPI_MAX, "MPI_Op_fromint(0x023)");
    CHECK(MPI_Errhandler_fromint(0x143) == MPI_ERRORS_RETURN, "MPI_Errhandler_fromint(0x143)");

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    v = MPI_Comm_toint(dup);
    check_user_int(v, "communicator");
    CHECK_EQ(v, MPI_Comm_toint(dup), "communicator integer is stable");
    CHECK(MPI_Comm_fromint(v) == dup, "communicator round trip");
    {
        int r = -1;
        CHECK_MPI(MPI_Comm_rank(MPI_Comm_fromint(v), &r));
        CHECK_EQ(rank, r, "rank through the converted handle");
    }

    CHECK_MPI(MPI_Comm_group(dup, &group));
    v = MPI_Group_toint(group);
    check_user_int(v, "group");
    CHECK(MPI_Group_fromint(v) == group, "group round trip");

    CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_INT, &vec));
    v = MPI_Type_toint(vec);
    check_user_int(v, "datatype");
    CHECK(MPI_Type_fromint(v) == vec, "datatype round trip");

    CHECK_MPI(MPI_Info_create(&info));
    v = MPI_Info_toint(info);
    check_user_int(v, "info");
    CHECK(MPI_Info_fromint(v) == info, "info round trip");

    CHECK_MPI(MPI_Op_create((MPI_User_function *)0x1, 1, &op));
    v = MPI_Op_toint(op);
    check_user_int(v, "op");
    CHECK(MPI_Op_fromint(v) == op, "op round trip");

    CHECK_MPI(MPI_Comm_create_errhandler((MPI_Comm_errhandler_function *)0x1, &eh));
    v = MPI_Errhandler_toint(eh);
    check_user_int(v, "errhandler");
    CHECK(MPI_Errhandler_fromint(v) == eh, "errhandler round trip");

    /* Fortran handles are the same integers; statuses are eight INTEGERs. */
    CHECK_EQ(0x101, MPI_Comm_c2f(MPI_COMM_WORLD), "MPI_Comm_c2f(MPI_COMM_WORLD)");
    CHECK(MPI_Type_f2c(0x209) == MPI_INT, "MPI_Type_f2c(0x209)");
    CHECK_EQ(MPI_Comm_toint(dup), MPI_Comm_c2f(dup), "MPI_Comm_c2f");
    CHECK(MPI_Comm_f2c(MPI_Comm_c2f(dup)) == dup, "MPI_Comm_f2c");
    CHECK(MPI_Group_f2c(MPI_Group_c2f(group)) == group, "MPI_Group_f2c");
    CHECK(MPI_Type_f2c(MPI_Type_c2f(vec)) == vec, "MPI_Type_f2c");
    CHECK(MPI_Info_f2c(MPI_Info_c2f(info)) == info, "MPI_Info_f2c");
    CHECK(MPI_Op_f2c(MPI_Op_c2f(op)) == op, "MPI_Op_f2c");
    CHECK(MPI_Errhandler_f2c(MPI_Errhandler_c2f(eh)) == eh, "MPI_Errhandler_f2c");
    CHECK(MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL, "MPI_Request_f2c");
    CHECK(MPI_Win_f2c(MPI_Win_c2f(MPI_WIN_NULL)) == MPI_WIN_NULL, "MPI_Win_f2c");
    CHECK(MPI_File_f2c(MPI_File_c2f(MPI_FILE_NULL)) == MPI_FILE_NULL, "MPI_File_f2c");
    CHECK(MPI_Session_f2c(MPI_Session_c2f(MPI_SESSION_NULL)) == MPI_SESSION_NULL, "MPI_Session_f2c");
    CHECK(MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NULL)) == MPI_MESSAGE_NULL, "MPI_Message_f2c");
    {
        MPI_Status c = {0}, back = {0};
        MPI_Fint f[MPI_F_STATUS_SIZE];
        c.MPI_SOURCE = 3;
        c.MPI_TAG = 44;
        c.MPI_ERROR = MPI_ERR_TAG;
        CHECK_MPI(MPI_Status_c2f(&c, f));
        CHECK_EQ(3, f[MPI_F_SOURCE], "Fortran status source");
        CHECK_EQ(44, f[MPI_F_TAG], "Fortran status tag");
        CHECK_EQ(MPI_ERR_TAG, f[MPI_F_ERROR], "Fortran status error");
        CHECK_MPI(MPI_Status_f2c(f, &back));
        CHECK(memcmp(&c, &back, sizeof c) == 0, "status round trip through Fortran");
        CHECK_EQ(MPI_ERR_ARG, MPI_Status_c2f(NULL, f), "MPI_Status_c2f(NULL)");
    }

    CHECK_MPI(MPI_Win_create(&winmem, sizeof(int), sizeof(int), MPI_INFO_NULL, dup, &win));
    v = MPI_Win_toint(win);
    check_user_int(v, "window");
    CHECK(MPI_Win_fromint(v) == win, "window round trip");
    CHECK_MPI(MPI_Win_free(&win));

    /* A message from a matched probe */
    CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, 0, 5, MPI_COMM_SELF));
    CHECK_MPI(MPI_Mprobe(0, 5, MPI_COMM_SELF, &msg, &st));
    v = MPI_Message_toint(msg);
    check_user_int(v, "message");
    msg = MPI_Message_fromint(v);
    CHECK_MPI(MPI_Mrecv(&buf, 1, MPI_INT, &msg, &st));
    CHECK_EQ(rank, buf, "message received through the converted handle");

    /* Point-to-point requests (handles wider than an int) and a collective
     * request, converted while live and completed through the integer. */
    for (i = 0; i < 40; i++) {
        if (i % 2 == 0)
            CHECK_MPI(MPI_Irecv(&ints[i], 1, MPI_INT, 0, i, MPI_COMM_SELF, &reqs[i]));
        else
            CHECK_MPI(MPI_Isend(&ints[i - 1], 0, MPI_INT, 0, i - 1, MPI_COMM_SELF, &reqs[i]));
    }
    for (i = 0; i < 40; i++) {
        int a = MPI_Request_toint(reqs[i]);
        check_user_int(a, "request");
        CHECK_EQ(a, MPI_Request_toint(reqs[i]), "request integer is stable");
        ints[i] = a;
    }
    for (i = 0; i < 40; i++) {
        int j;
        for (j = 0; j < i; j++)
            CHECK(ints[i] != ints[j], "live requests %d and %d share an integer", i, j);
    }
    for (i = 0; i < 40; i++) {
        MPI_Request r = MPI_Request_fromint(ints[i]);
        CHECK(r == reqs[i], "request %d round trip", i);
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Ibarrier(dup, &coll));
    v = MPI_Request_toint(coll);
    check_user_int(v, "collective request");
    coll = MPI_Request_fromint(v);
    CHECK_MPI(MPI_Wait(&coll, MPI_STATUS_IGNORE));

    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK_MPI(MPI_Op_free(&op));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK_MPI(MPI_Group_free(&group));
    CHECK_MPI(MPI_Comm_free(&dup));
}

static void status_fields(void)
{
    MPI_Status st;
    int v = 0;
    CHECK_MPI(MPI_Status_set_source(&st, 3));
    CHECK_MPI(MPI_Status_set_tag(&st, 44));
    CHECK_MPI(MPI_Status_set_error(&st, MPI_ERR_TRUNCATE));
    CHECK_EQ(3, st.MPI_SOURCE, "MPI_SOURCE");
    CHECK_EQ(44, st.MPI_TAG, "MPI_TAG");
    CHECK_EQ(MPI_ERR_TRUNCATE, st.MPI_ERROR, "MPI_ERROR");
    CHECK_MPI(MPI_Status_get_source(&st, &v));
    CHECK_EQ(3, v, "MPI_Status_get_source");
    CHECK_MPI(MPI_Status_get_tag(&st, &v));
    CHECK_EQ(44, v, "MPI_Status_get_tag");
    CHECK_MPI(MPI_Status_get_error(&st, &v));
    CHECK_EQ(MPI_ERR_TRUNCATE, v, "MPI_Status_get_error");
    /* A received message's status through the accessors */
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, 0, 9, &v, 1, MPI_INT, 0, 9, MPI_COMM_SELF, &st));
    CHECK_MPI(MPI_Status_get_source(&st, &v));
    CHECK_EQ(0, v, "source of a message to self on MPI_COMM_SELF");
    CHECK_MPI(MPI_Status_get_tag(&st, &v));
    CHECK_EQ(9, v, "tag of a received message");
}

static int handler_calls;
static int handler_last;

static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_calls++;
    handler_last = *code;
}

static void dynamic(void)
{
    MPI_Comm parent = MPI_COMM_WORLD, inter = MPI_COMM_WORLD, dup;
    MPI_Errhandler eh;
    int errcodes[3] = {0, 0, 0}, rc, cls, maxprocs[2] = {1, 2};
    char port[MPI_MAX_PORT_NAME];
    char *cmds[2] = {"./a", "./b"};
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    int buf = -1;

    CHECK_MPI(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "MPI_Comm_get_parent is not MPI_COMM_NULL");

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_create_errhandler(count_errors, &eh));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, eh));

    rc = MPI_Comm_spawn("./child", MPI_ARGV_NULL, 3, MPI_INFO_NULL, 0, dup, &inter, errcodes);
    tc_expect_class(rc, MPI_ERR_SPAWN, "MPI_Comm_spawn");
    CHECK_EQ(1, handler_calls, "the communicator's handler ran for MPI_Comm_spawn");
    MPI_Error_class(handler_last, &cls);
    CHECK_EQ(MPI_ERR_SPAWN, cls, "class the handler saw");
    CHECK(inter == MPI_COMM_NULL, "intercomm not reset by a failed spawn");
    CHECK_EQ(MPI_ERR_SPAWN, errcodes[2], "errcodes[2] of a failed spawn");
    rc = MPI_Comm_spawn("./child", MPI_ARGV_NULL, 1, MPI_INFO_NULL, size, dup, &inter, MPI_ERRCODES_IGNORE);
    tc_expect_class(rc, MPI_ERR_ROOT, "MPI_Comm_spawn with a root outside the communicator");
    rc = MPI_Comm_spawn_multiple(2, cmds, MPI_ARGVS_NULL, maxprocs, infos, 0, dup, &inter, errcodes);
    tc_expect_class(rc, MPI_ERR_SPAWN, "MPI_Comm_spawn_multiple");
    CHECK_EQ(3, handler_calls, "handler calls after three failed spawns");

    rc = MPI_Comm_accept("tandem-port", MPI_INFO_NULL, 0, dup, &inter);
    tc_expect_class(rc, MPI_ERR_PORT, "MPI_Comm_accept");
    rc = MPI_Comm_connect("tandem-port", MPI_INFO_NULL, 0, dup, &inter);
    tc_expect_class(rc, MPI_ERR_PORT, "MPI_Comm_connect");
    CHECK_EQ(5, handler_calls, "handler calls after accept and connect");

    /* Calls without a communicator report to MPI_COMM_WORLD's handler. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK(strncmp(port, "tandem-port:", 12) == 0, "port name '%s'", port);
    rc = MPI_Close_port("tandem-port");
    tc_expect_class(rc, MPI_ERR_PORT, "MPI_Close_port of a malformed name");
    {
        /* A name per rank: they publish at once. */
        char svc[32], found[MPI_MAX_PORT_NAME];
        snprintf(svc, sizeof svc, "svc-%d", rank);
        CHECK_MPI(MPI_Publish_name(svc, MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Lookup_name(svc, MPI_INFO_NULL, found));
        CHECK(strcmp(found, port) == 0, "looked up '%s', published '%s'", found, port);
        rc = MPI_Unpublish_name(svc, MPI_INFO_NULL, "tandem-port");
        tc_expect_class(rc, MPI_ERR_SERVICE, "MPI_Unpublish_name of another port");
        CHECK_MPI(MPI_Unpublish_name(svc, MPI_INFO_NULL, port));
        rc = MPI_Lookup_name(svc, MPI_INFO_NULL, found);
        tc_expect_class(rc, MPI_ERR_NAME, "MPI_Lookup_name after MPI_Unpublish_name");
    }
    CHECK_MPI(MPI_Close_port(port));
    rc = MPI_Close_port(port);
    tc_expect_class(rc, MPI_ERR_PORT, "MPI_Close_port of a closed port");
    rc = MPI_Comm_join(-1, &inter);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Comm_join(-1)");
    rc = MPI_Lookup_name(NULL, MPI_INFO_NULL, port);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Lookup_name(NULL)");
    /* An invalid communicator's error goes to MPI_COMM_SELF's handler. */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    rc = MPI_Comm_spawn("./child", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_NULL, &inter, MPI_ERRCODES_IGNORE);
    tc_expect_class(rc, MPI_ERR_COMM, "MPI_Comm_spawn on MPI_COMM_NULL");
    {
        MPI_Comm w = MPI_COMM_WORLD;
        rc = MPI_Comm_disconnect(&w);
        tc_expect_class(rc, MPI_ERR_COMM, "MPI_Comm_disconnect(MPI_COMM_WORLD)");
    }

    /* Disconnect after a message around a ring on the communicator. */
    if (size > 1) {
        MPI_Request r;
        CHECK_MPI(MPI_Irecv(&buf, 1, MPI_INT, (rank + size - 1) % size, 1, dup, &r));
        CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, (rank + 1) % size, 1, dup));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_EQ((rank + size - 1) % size, buf, "ring message before disconnect");
    }
    CHECK_MPI(MPI_Comm_disconnect(&dup));
    CHECK(dup == MPI_COMM_NULL, "MPI_Comm_disconnect did not reset the handle");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void get_key(MPI_Info info, const char *key, char *value, const char *what)
{
    int flag = 0;
    CHECK_MPI(MPI_Info_get(info, key, MPI_MAX_INFO_VAL - 1, value, &flag));
    CHECK(flag, "%s: key %s missing", what, key);
}

static void environment(int argc, char **argv)
{
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL], expect[64];
    char *args[3] = {"./prog", "-x", "7"};
    int flag = 1, rc;
    get_key(MPI_INFO_ENV, "command", value, "MPI_INFO_ENV");
    CHECK(strcmp(value, argv[0]) == 0, "MPI_INFO_ENV command %s, not %s", value, argv[0]);
    get_key(MPI_INFO_ENV, "argv", value, "MPI_INFO_ENV");
    CHECK(argc > 1 && strcmp(value, "one two") == 0, "MPI_INFO_ENV argv is \"%s\"", value);
    get_key(MPI_INFO_ENV, "maxprocs", value, "MPI_INFO_ENV");
    CHECK_EQ(size, atoi(value), "MPI_INFO_ENV maxprocs");
    get_key(MPI_INFO_ENV, "wdir", value, "MPI_INFO_ENV");
    /* Read-only */
    rc = MPI_Info_set(MPI_INFO_ENV, "command", "x");
    tc_expect_class(rc, MPI_ERR_INFO, "MPI_Info_set on MPI_INFO_ENV");

    CHECK_MPI(MPI_Info_create_env(3, args, &info));
    get_key(info, "command", value, "MPI_Info_create_env");
    CHECK(strcmp(value, "./prog") == 0, "created env command %s", value);
    get_key(info, "argv", value, "MPI_Info_create_env");
    CHECK(strcmp(value, "-x 7") == 0, "created env argv %s", value);
    snprintf(expect, sizeof expect, "%d", size);
    get_key(info, "maxprocs", value, "MPI_Info_create_env");
    CHECK(strcmp(value, expect) == 0, "created env maxprocs %s", value);
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Info_create_env(0, NULL, &info));
    CHECK_MPI(MPI_Info_get(info, "command", MPI_MAX_INFO_VAL - 1, value, &flag));
    CHECK(!flag, "a command without arguments");
    CHECK_MPI(MPI_Info_free(&info));

    CHECK_MPI(MPI_Get_hw_resource_info(&info));
    get_key(info, "mpi_hw_resource_type", value, "MPI_Get_hw_resource_info");
    CHECK(strcmp(value, "mpi_shared_memory") == 0, "hw resource type %s", value);
    CHECK_MPI(MPI_Info_free(&info));
}

int main(int argc, char **argv)
{
    int major = 0, minor = 0, flag = 0;
    char before[MPI_MAX_INFO_VAL];
    MPI_Info early;
    /* Callable before MPI_Init: the ABI version and info objects. */
    if (MPI_Info_create_env(argc, argv, &early) != MPI_SUCCESS ||
        MPI_Info_get(early, "maxprocs", MPI_MAX_INFO_VAL - 1, before, &flag) != MPI_SUCCESS || !flag) {
        fprintf(stderr, "FAIL MPI_Info_create_env before MPI_Init\n");
        return 1;
    }
    if (MPI_Abi_get_version(&major, &minor) != MPI_SUCCESS || major != MPI_ABI_VERSION) {
        fprintf(stderr, "FAIL MPI_Abi_get_version before MPI_Init\n");
        return 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_EQ(size, atoi(before), "maxprocs of MPI_Info_create_env before MPI_Init");
    {
        char cmd[MPI_MAX_INFO_VAL];
        get_key(early, "command", cmd, "MPI_Info_create_env before MPI_Init");
        CHECK(strcmp(cmd, argv[0]) == 0, "command before MPI_Init %s", cmd);
    }
    CHECK_MPI(MPI_Info_free(&early));
    versions();
    fortran();
    handles();
    status_fields();
    dynamic();
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    environment(argc, argv);
    return tc_finish(NAME);
}

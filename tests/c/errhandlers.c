/*
 * errhandlers.c - user error handlers, and error classes, codes and strings
 * the application adds.
 *
 * Ranks: any number (1 included); every rank checks everything itself.
 *
 *   1. a handler from MPI_Comm_create_errhandler set on a duplicate of
 *      MPI_COMM_WORLD is called once for a real error there (a send to rank
 *      `size`), with that communicator and an MPI_ERR_RANK code, which the
 *      call then returns; the handler itself makes MPI calls (MPI_Comm_rank,
 *      MPI_Error_class); errors elsewhere do not call it;
 *   2. MPI_Comm_get_errhandler gives it back; after MPI_Errhandler_free of
 *      both handles the communicator still uses it, and a duplicate inherits
 *      it (called with the duplicate's handle);
 *   3. MPI_Comm_call_errhandler calls it with the code given and returns
 *      MPI_SUCCESS; under MPI_ERRORS_RETURN it calls nothing and succeeds;
 *   4. MPI_Add_error_class / _code / _string: MPI_Error_class and
 *      MPI_Error_string know them (exact string; "" when none was set), a
 *      code added to MPI_ERR_ARG has that class, MPI_LASTUSEDCODE covers
 *      them, MPI_Comm_call_errhandler passes a user code through; wrong uses
 *      give MPI_ERR_ARG; MPI_Remove_error_string / _code / _class undo them;
 *   5. window handlers: MPI_Win_create_errhandler, called for a put to rank
 *      `size` with the window's handle, and by MPI_Win_call_errhandler; a
 *      communicator handler cannot be set on a window nor the reverse
 *      (MPI_ERR_ARG);
 *   6. MPI_Comm_create_errhandler with a NULL function and MPI_Errhandler_free
 *      of a handle already freed give MPI_ERR_ARG.
 */
#include "check.h"

#define NAME "errhandlers"

static int calls, last_code, inner_rank = -1;
static MPI_Comm last_comm = MPI_COMM_NULL;
static MPI_Win last_win = MPI_WIN_NULL;

static void comm_handler(MPI_Comm *comm, int *code, ...)
{
    int cls = -1;
    calls++;
    last_comm = *comm;
    last_code = *code;
    /* MPI calls from inside a handler work. */
    CHECK_MPI(MPI_Comm_rank(*comm, &inner_rank));
    if (MPI_Error_class(*code, &cls) != MPI_SUCCESS)
        FAIL("MPI_Error_class(%d) inside the error handler", *code);
}

static void win_handler(MPI_Win *win, int *code, ...)
{
    calls++;
    last_win = *win;
    last_code = *code;
}

static void expect_call(MPI_Comm comm, int code_class, const char *what)
{
    CHECK_EQ(1, calls, "%s: handler calls", what);
    CHECK(last_comm == comm, "%s: the handler got the communicator", what);
    CHECK_EQ(code_class, tc_class_of(last_code), "%s: class of the handler's code", what);
    calls = 0;
}

int main(int argc, char **argv)
{
    int rank, nranks, rc, x = 0, flag = 0, cls, len;
    int myclass, mycode, argcode, *lastused = NULL;
    char str[MPI_MAX_ERROR_STRING + 1], longstr[MPI_MAX_ERROR_STRING + 20];
    MPI_Comm dup, dup2;
    MPI_Errhandler eh, got, weh;
    MPI_Win win;
    int winbuf[4] = {0, 0, 0, 0};

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    /* 1. */
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_create_errhandler(comm_handler, &eh));
    CHECK(eh != MPI_ERRHANDLER_NULL, "MPI_Comm_create_errhandler gives a handle");
    CHECK_MPI(MPI_Comm_set_errhandler(dup, eh));
    rc = MPI_Send(&x, 1, MPI_INT, nranks, 0, dup);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Send to rank size with a user handler");
    CHECK_EQ(rc, last_code, "the call returns the code the handler got");
    CHECK_EQ(rank, inner_rank, "MPI_Comm_rank inside the handler");
    expect_call(dup, MPI_ERR_RANK, "send to rank size");
    rc = MPI_Send(&x, 1, MPI_INT, nranks, 0, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Send to rank size on MPI_COMM_WORLD");
    CHECK_EQ(0, calls, "an error on another communicator does not call the handler");

    /* 2. */
    CHECK_MPI(MPI_Comm_get_errhandler(dup, &got));
    CHECK(got == eh, "MPI_Comm_get_errhandler gives the user handler");
    CHECK_MPI(MPI_Errhandler_free(&got));
    CHECK(got == MPI_ERRHANDLER_NULL, "MPI_Errhandler_free resets the handle");
    CHECK_MPI(MPI_Errhandler_free(&eh));
    rc = MPI_Recv(&x, -1, MPI_INT, 0, 0, dup, MPI_STATUS_IGNORE);
    tc_expect_class(rc, MPI_ERR_COUNT, "MPI_Recv with count -1 after the handler was freed");
    expect_call(dup, MPI_ERR_COUNT, "receive with count -1 after the free");
    CHECK_MPI(MPI_Comm_dup(dup, &dup2));
    rc = MPI_Send(&x, 1, MPI_INT, 0, -1, dup2);
    tc_expect_class(rc, MPI_ERR_TAG, "MPI_Send with tag -1 on a duplicate");
    expect_call(dup2, MPI_ERR_TAG, "the duplicate inherits the handler");

    /* 3. */
    CHECK_MPI(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER));
    expect_call(dup, MPI_ERR_OTHER, "MPI_Comm_call_errhandler");
    CHECK_EQ(MPI_ERR_OTHER, last_code, "MPI_Comm_call_errhandler passes the code as given");
    CHECK_MPI(MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER));
    CHECK_EQ(0, calls, "MPI_Comm_call_errhandler under MPI_ERRORS_RETURN");

    /* 4. */
    CHECK_MPI(MPI_Add_error_class(&myclass));
    CHECK_MPI(MPI_Add_error_code(myclass, &mycode));
    CHECK(myclass != mycode, "a new code differs from its class");
    CHECK(myclass > MPI_ERR_LASTCODE && mycode > MPI_ERR_LASTCODE, "added values lie above MPI_ERR_LASTCODE");
    CHECK_MPI(MPI_Error_class(mycode, &cls));
    CHECK_EQ(myclass, cls, "MPI_Error_class of the added code");
    CHECK_MPI(MPI_Error_class(myclass, &cls));
    CHECK_EQ(myclass, cls, "MPI_Error_class of the added class");
    str[0] = 'x';
    len = -1;
    CHECK_MPI(MPI_Error_string(myclass, str, &len));
    CHECK(len == 0 && str[0] == 0, "MPI_Error_string of a class without a string is empty (got %d \"%s\")", len, str);
    CHECK_MPI(MPI_Add_error_string(mycode, "my own error"));
    CHECK_MPI(MPI_Error_string(mycode, str, &len));
    CHECK(strcmp(str, "my own error") == 0 && len == 12, "MPI_Error_string of the added code (got %d \"%s\")", len,
          str);
    CHECK_MPI(MPI_Add_error_string(mycode, "replaced"));
    CHECK_MPI(MPI_Error_string(mycode, str, &len));
    CHECK(strcmp(str, "replaced") == 0, "MPI_Add_error_string replaces the string (got \"%s\")", str);
    CHECK_MPI(MPI_Add_error_code(MPI_ERR_ARG, &argcode));
    CHECK_MPI(MPI_Error_class(argcode, &cls));
    CHECK_EQ(MPI_ERR_ARG, cls, "class of a code added to MPI_ERR_ARG");
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastused, &flag));
    CHECK(flag && lastused != NULL, "MPI_LASTUSEDCODE is set");
    CHECK(*lastused >= myclass && *lastused >= mycode && *lastused >= argcode, "MPI_LASTUSEDCODE %d covers %d %d %d",
          *lastused, myclass, mycode, argcode);
    CHECK_MPI(MPI_Comm_call_errhandler(dup, mycode));
    CHECK_EQ(mycode, last_code, "MPI_Comm_call_errhandler passes a user code");
    expect_call(dup, myclass, "MPI_Comm_call_errhandler with a user code");

    rc = MPI_Add_error_string(MPI_ERR_ARG, "not mine");
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Add_error_string on a predefined class");
    rc = MPI_Add_error_code(mycode, &x);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Add_error_code to a code that is not a class");
    memset(longstr, 'a', sizeof longstr - 1);
    longstr[sizeof longstr - 1] = 0;
    rc = MPI_Add_error_string(mycode, longstr);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Add_error_string longer than MPI_MAX_ERROR_STRING");
    rc = MPI_Remove_error_class(myclass);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Remove_error_class of a class with codes");
    rc = MPI_Remove_error_code(myclass);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Remove_error_code of a class");

    rc = MPI_Remove_error_code(mycode);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Remove_error_code of a code whose string is not removed");
    CHECK_MPI(MPI_Remove_error_string(mycode));
    CHECK_MPI(MPI_Error_string(mycode, str, &len));
    CHECK_EQ(0, len, "MPI_Error_string after MPI_Remove_error_string");
    CHECK_MPI(MPI_Remove_error_code(mycode));
    CHECK_MPI(MPI_Remove_error_code(argcode));
    CHECK_MPI(MPI_Remove_error_class(myclass));
    CHECK(MPI_Error_class(mycode, &cls) != MPI_SUCCESS, "MPI_Error_class of a removed code fails");
    CHECK(MPI_Error_class(myclass, &cls) != MPI_SUCCESS, "MPI_Error_class of a removed class fails");

    /* 5. */
    CHECK_MPI(MPI_Win_create(winbuf, sizeof winbuf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_create_errhandler(win_handler, &weh));
    CHECK_MPI(MPI_Win_set_errhandler(win, weh));
    CHECK_MPI(MPI_Win_fence(0, win));
    rc = MPI_Put(&x, 1, MPI_INT, nranks, 0, 1, MPI_INT, win);
    tc_expect_class(rc, MPI_ERR_RANK, "MPI_Put to rank size with a window handler");
    CHECK_EQ(1, calls, "window handler calls after the bad put");
    CHECK(last_win == win, "the window handler got the window");
    CHECK_EQ(MPI_ERR_RANK, tc_class_of(last_code), "class of the window handler's code");
    calls = 0;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK_EQ(1, calls, "MPI_Win_call_errhandler calls the handler");
    CHECK_EQ(MPI_ERR_OTHER, last_code, "MPI_Win_call_errhandler passes the code");
    calls = 0;
    CHECK_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_create_errhandler(comm_handler, &eh));
    rc = MPI_Win_set_errhandler(win, eh);
    tc_expect_class(rc, MPI_ERR_ARG, "a communicator handler set on a window");
    rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, weh);
    tc_expect_class(rc, MPI_ERR_ARG, "a window handler set on a communicator");
    CHECK_EQ(0, calls, "no handler called for those");
    CHECK_MPI(MPI_Errhandler_free(&weh));
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK_MPI(MPI_Win_free(&win));

    /* 6. */
    rc = MPI_Comm_create_errhandler(NULL, &eh);
    tc_expect_class(rc, MPI_ERR_ARG, "MPI_Comm_create_errhandler(NULL)");
    if (tc_is_tandem()) {
        MPI_Errhandler stale;
        CHECK_MPI(MPI_Comm_create_errhandler(comm_handler, &eh));
        stale = eh;
        CHECK_MPI(MPI_Errhandler_free(&eh));
        rc = MPI_Errhandler_free(&stale);
        tc_expect_class(rc, MPI_ERR_ARG, "MPI_Errhandler_free of a freed handler");
    }
    CHECK_EQ(0, calls, "no handler called by the argument errors");

    CHECK_MPI(MPI_Comm_free(&dup2));
    CHECK_MPI(MPI_Comm_free(&dup));
    return tc_finish(NAME);
}

/*
 * errors.c - with MPI_ERRORS_RETURN, bad arguments return the right error
 * class and the job carries on.
 *
 * Ranks: any number (1 included); every rank checks every error itself.
 * MPI_ERRORS_RETURN is set on MPI_COMM_WORLD and MPI_COMM_SELF (an error on
 * MPI_COMM_NULL is raised on MPI_COMM_SELF's handler). Each error code must be
 * of the expected class and MPI_Error_string must describe it (non-empty).
 *   rank out of range (size, -100, MPI_ANY_SOURCE as a destination) in
 *     MPI_Send / MPI_Recv / MPI_Isend / MPI_Irecv  -> MPI_ERR_RANK
 *   negative tag, MPI_ANY_TAG in a send; negative tag (not ANY_TAG) in a
 *     receive                                      -> MPI_ERR_TAG
 *   negative count                                 -> MPI_ERR_COUNT
 *   MPI_DATATYPE_NULL                              -> MPI_ERR_TYPE
 *   MPI_COMM_NULL                                  -> MPI_ERR_COMM
 *   NULL buffer with count > 0                     -> MPI_ERR_BUFFER
 *   NULL request pointer for MPI_Isend / MPI_Wait  -> MPI_ERR_REQUEST or MPI_ERR_ARG
 *   MPI_Wait on a garbage request handle           -> MPI_ERR_REQUEST
 *     (only on Tandem, whose handles can be checked: another MPI may crash)
 * Then normal communication still works: a ring exchange and a barrier.
 */
#include "check.h"

#define NAME "errors"

static void expect_either(int rc, int c1, int c2, const char *what)
{
    int cls = tc_class_of(rc);
    CHECK(rc != MPI_SUCCESS, "%s (expected %s or %s got MPI_SUCCESS)", what, tc_class_name(c1), tc_class_name(c2));
    tc_expect_class(rc, cls == c2 ? c2 : c1, what);
}

int main(int argc, char **argv)
{
    int rank, nranks, rc, i, out = -1;
    unsigned char buf[64];
    MPI_Request req;
    MPI_Status st;
    MPI_Errhandler eh;
    char what[128];
    const int bad_ranks[3] = {0, -100, MPI_ANY_SOURCE};

    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    memset(buf, 0, sizeof buf);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_Comm_get_errhandler(MPI_COMM_WORLD) after setting MPI_ERRORS_RETURN");
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_SELF, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_Comm_get_errhandler(MPI_COMM_SELF) after setting MPI_ERRORS_RETURN");

    /* MPI_ERR_RANK */
    for (i = 0; i < 3; i++) {
        int bad = i == 0 ? nranks : bad_ranks[i];
        snprintf(what, sizeof what, "MPI_Send to rank %d of %d", bad, nranks);
        tc_expect_class(MPI_Send(buf, 1, MPI_BYTE, bad, 1, MPI_COMM_WORLD), MPI_ERR_RANK, what);
        snprintf(what, sizeof what, "MPI_Isend to rank %d of %d", bad, nranks);
        req = MPI_REQUEST_NULL;
        rc = MPI_Isend(buf, 1, MPI_BYTE, bad, 1, MPI_COMM_WORLD, &req);
        tc_expect_class(rc, MPI_ERR_RANK, what);
        if (bad != MPI_ANY_SOURCE) {
            snprintf(what, sizeof what, "MPI_Recv from rank %d of %d", bad, nranks);
            tc_expect_class(MPI_Recv(buf, 1, MPI_BYTE, bad, 1, MPI_COMM_WORLD, &st), MPI_ERR_RANK, what);
            snprintf(what, sizeof what, "MPI_Irecv from rank %d of %d", bad, nranks);
            tc_expect_class(MPI_Irecv(buf, 1, MPI_BYTE, bad, 1, MPI_COMM_WORLD, &req), MPI_ERR_RANK, what);
        }
    }
    tc_expect_class(MPI_Send(buf, 1, MPI_BYTE, nranks + 1000, 1, MPI_COMM_WORLD), MPI_ERR_RANK,
                    "MPI_Send to rank size+1000");

    /* MPI_ERR_TAG */
    tc_expect_class(MPI_Send(buf, 1, MPI_BYTE, rank, -5, MPI_COMM_WORLD), MPI_ERR_TAG, "MPI_Send with tag -5");
    tc_expect_class(MPI_Send(buf, 1, MPI_BYTE, rank, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG,
                    "MPI_Send with tag MPI_ANY_TAG");
    tc_expect_class(MPI_Isend(buf, 1, MPI_BYTE, rank, -5, MPI_COMM_WORLD, &req), MPI_ERR_TAG,
                    "MPI_Isend with tag -5");
    tc_expect_class(MPI_Recv(buf, 1, MPI_BYTE, rank, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG, "MPI_Recv with tag -5");

    /* MPI_ERR_COUNT */
    tc_expect_class(MPI_Send(buf, -1, MPI_BYTE, rank, 1, MPI_COMM_WORLD), MPI_ERR_COUNT, "MPI_Send with count -1");
    tc_expect_class(MPI_Isend(buf, -1, MPI_BYTE, rank, 1, MPI_COMM_WORLD, &req), MPI_ERR_COUNT,
                    "MPI_Isend with count -1");
    tc_expect_class(MPI_Recv(buf, -1, MPI_BYTE, rank, 1, MPI_COMM_WORLD, &st), MPI_ERR_COUNT,
                    "MPI_Recv with count -1");

    /* MPI_ERR_TYPE */
    tc_expect_class(MPI_Send(buf, 1, MPI_DATATYPE_NULL, rank, 1, MPI_COMM_WORLD), MPI_ERR_TYPE,
                    "MPI_Send with MPI_DATATYPE_NULL");
    tc_expect_class(MPI_Recv(buf, 1, MPI_DATATYPE_NULL, rank, 1, MPI_COMM_WORLD, &st), MPI_ERR_TYPE,
                    "MPI_Recv with MPI_DATATYPE_NULL");

    /* MPI_ERR_COMM (raised on MPI_COMM_SELF's handler) */
    tc_expect_class(MPI_Send(buf, 1, MPI_BYTE, 0, 1, MPI_COMM_NULL), MPI_ERR_COMM, "MPI_Send on MPI_COMM_NULL");
    tc_expect_class(MPI_Recv(buf, 1, MPI_BYTE, 0, 1, MPI_COMM_NULL, &st), MPI_ERR_COMM, "MPI_Recv on MPI_COMM_NULL");
    tc_expect_class(MPI_Isend(buf, 1, MPI_BYTE, 0, 1, MPI_COMM_NULL, &req), MPI_ERR_COMM,
                    "MPI_Isend on MPI_COMM_NULL");
    tc_expect_class(MPI_Comm_rank(MPI_COMM_NULL, &out), MPI_ERR_COMM, "MPI_Comm_rank(MPI_COMM_NULL)");

    /* MPI_ERR_BUFFER */
    tc_expect_class(MPI_Send(NULL, 1, MPI_BYTE, rank, 1, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                    "MPI_Send of a NULL buffer with count 1");
    tc_expect_class(MPI_Isend(NULL, 4, MPI_INT, rank, 1, MPI_COMM_WORLD, &req), MPI_ERR_BUFFER,
                    "MPI_Isend of a NULL buffer with count 4");
    tc_expect_class(MPI_Recv(NULL, 1, MPI_BYTE, rank, 1, MPI_COMM_WORLD, &st), MPI_ERR_BUFFER,
                    "MPI_Recv into a NULL buffer with count 1");

    /* MPI_ERR_REQUEST / MPI_ERR_ARG */
    expect_either(MPI_Isend(buf, 1, MPI_BYTE, rank, 1, MPI_COMM_WORLD, NULL), MPI_ERR_REQUEST, MPI_ERR_ARG,
                  "MPI_Isend with a NULL request pointer");
    expect_either(MPI_Wait(NULL, &st), MPI_ERR_REQUEST, MPI_ERR_ARG, "MPI_Wait with a NULL request pointer");
    if (tc_is_tandem()) {
        const uintptr_t garbage[3] = {0x7a7a7a7a7aUL, 0x12345UL, 0xdeadbeefUL};
        for (i = 0; i < 3; i++) {
            req = (MPI_Request)garbage[i];
            snprintf(what, sizeof what, "MPI_Wait on the garbage request handle %#lx", (unsigned long)garbage[i]);
            tc_expect_class(MPI_Wait(&req, &st), MPI_ERR_REQUEST, what);
        }
    }

    /* error strings of the classes themselves */
    {
        const int classes[] = {MPI_ERR_BUFFER, MPI_ERR_COUNT,  MPI_ERR_TYPE,     MPI_ERR_TAG,   MPI_ERR_COMM,
                               MPI_ERR_RANK,   MPI_ERR_REQUEST, MPI_ERR_TRUNCATE, MPI_ERR_OTHER, MPI_ERR_INTERN,
                               MPI_ERR_ARG};
        char str[MPI_MAX_ERROR_STRING + 1];
        int len, cls;
        for (i = 0; i < (int)(sizeof classes / sizeof classes[0]); i++) {
            CHECK_MPI(MPI_Error_class(classes[i], &cls));
            CHECK_EQ(classes[i], cls, "MPI_Error_class of the class %s itself", tc_class_name(classes[i]));
            len = -1;
            memset(str, 0, sizeof str);
            CHECK_MPI(MPI_Error_string(classes[i], str, &len));
            CHECK(len > 0 && str[0] != 0 && (int)strlen(str) == len, "MPI_Error_string(%s) gave \"%s\" (%d)",
                  tc_class_name(classes[i]), str, len);
        }
        /* Tandem's strings start with the class's name, for every class
         * (window, key and RMA classes read "MPI error" before). */
        if (tc_is_tandem()) {
            const int named[] = {MPI_ERR_WIN, MPI_ERR_KEYVAL, MPI_ERR_RMA_RANGE, MPI_ERR_INFO_KEY, MPI_ERR_SESSION};
            const char *names[] = {"MPI_ERR_WIN", "MPI_ERR_KEYVAL", "MPI_ERR_RMA_RANGE", "MPI_ERR_INFO_KEY",
                                   "MPI_ERR_SESSION"};
            for (i = 0; i < (int)(sizeof named / sizeof named[0]); i++) {
                CHECK_MPI(MPI_Error_string(named[i], str, &len));
                CHECK(strncmp(str, names[i], strlen(names[i])) == 0 && str[strlen(names[i])] == ':',
                      "MPI_Error_string(%s) names its class: \"%s\"", names[i], str);
            }
        }
        CHECK_MPI(MPI_Error_string(MPI_SUCCESS, str, &len));
        CHECK_MPI(MPI_Error_class(MPI_SUCCESS, &cls));
        CHECK_EQ(MPI_SUCCESS, cls, "MPI_Error_class(MPI_SUCCESS)");
    }

    /* the errhandler is still MPI_ERRORS_RETURN and the job still works */
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_Comm_get_errhandler(MPI_COMM_WORLD) after the errors");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    {
        int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
        unsigned char sb[100 * 1024], rb[100 * 1024 + TC_GUARD];
        tc_fill(sb, sizeof sb, rank, 77);
        tc_prepare_recv(rb, sizeof sb, left, 77);
        CHECK_MPI(MPI_Sendrecv(sb, (int)sizeof sb, MPI_BYTE, right, 77, rb, (int)sizeof sb, MPI_BYTE, MPI_ANY_SOURCE,
                               MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        tc_check_status(&st, left, 77, (int)sizeof sb, "ring exchange after the errors");
        tc_check_recv(rb, sizeof sb, left, 77, "ring exchange after the errors");
    }
    if (rank == 0)
        printf("error classes verified\n");
    return tc_finish(NAME);
}

/*
 * comm_idup.c - MPI_Comm_idup: several in flight at once, beside other
 * non-blocking collectives, give distinct working communicators.
 *
 * Ranks: any number (1 included).
 *
 *   1. K idups of MPI_COMM_WORLD in flight together with an MPI_Iallreduce
 *      and an MPI_Ibarrier started between them (and one
 *      MPI_Comm_idup_with_info), completed by one MPI_Waitall in reverse
 *      order; the allreduce's sum is right;
 *   2. every new communicator is congruent to MPI_COMM_WORLD and kept the
 *      attribute set on WORLD with MPI_COMM_DUP_FN;
 *   3. the communicators are distinct: each rank sends one message per
 *      communicator to its right neighbour, last communicator first, all
 *      with the same tag, and receives them with MPI_ANY_SOURCE/MPI_ANY_TAG
 *      first communicator first; each must hold its communicator's data
 *      (a shared context would deliver the wrong one);
 *   4. idups on overlapping parents in flight at once, started in opposite
 *      orders by even and odd ranks (WORLD and a split into halves), then
 *      the same distinctness check over the halves' results and WORLD's;
 *   5. an idup of an idup'ed communicator, and a collective on it;
 *   6. error classes with MPI_ERRORS_RETURN: MPI_COMM_NULL gives
 *      MPI_ERR_COMM, NULL newcomm or request MPI_ERR_ARG.
 */
#include "check.h"

#define NAME "comm_idup"
#define K 5
#define TAG 9
/* Message length: above the eager limit for one of them, to cover both protocols. */
#define SMALL 64
#define LARGE (100 * 1024)

static int rank, nranks;

/* Checks that `n` communicators with the layout of `comm_of_rank` (all the
 * same size as `ref`) are distinct contexts: see 3 above. */
static void check_distinct(MPI_Comm *comms, int n, const char *what)
{
    int size, me;
    CHECK_MPI(MPI_Comm_size(comms[0], &size));
    CHECK_MPI(MPI_Comm_rank(comms[0], &me));
    int right = (me + 1) % size, left = (me + size - 1) % size;
    unsigned char **out = malloc(sizeof *out * (size_t)n);
    MPI_Request *reqs = malloc(sizeof *reqs * (size_t)n);
    CHECK(out && reqs, "malloc");
    for (int i = n - 1; i >= 0; i--) {
        int len = i == 1 ? LARGE : SMALL;
        out[i] = tc_alloc((size_t)len);
        tc_fill(out[i], (size_t)len, me, 100 + i);
        CHECK_MPI(MPI_Isend(out[i], len, MPI_BYTE, right, TAG, comms[i], &reqs[i]));
    }
    for (int i = 0; i < n; i++) {
        int len = i == 1 ? LARGE : SMALL;
        unsigned char *in = tc_alloc(LARGE);
        MPI_Status st;
        int count = -1;
        tc_prepare_recv(in, (size_t)len, left, 100 + i);
        CHECK_MPI(MPI_Recv(in, LARGE, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comms[i], &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK_EQ(len, count, "%s: length of the message on communicator %d", what, i);
        CHECK_EQ(left, st.MPI_SOURCE, "%s: source on communicator %d", what, i);
        tc_check_recv(in, (size_t)len, left, 100 + i, what);
        free(in);
    }
    CHECK_MPI(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++)
        free(out[i]);
    free(out);
    free(reqs);
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));

    int keyval, attr_value = 4242, *got_attr = NULL, flag = 0;
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &keyval, NULL));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, &attr_value));

    /* 1 */
    MPI_Comm dups[K + 1];
    MPI_Request reqs[K + 3];
    long mine = rank + 1, sum = -1;
    int nreq = 0;
    for (int i = 0; i < K; i++) {
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &dups[i], &reqs[nreq++]));
        if (i == 1)
            CHECK_MPI(MPI_Iallreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &reqs[nreq++]));
        if (i == 3)
            CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &reqs[nreq++]));
    }
    CHECK_MPI(MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &dups[K], &reqs[nreq++]));
    /* Complete them last first. */
    for (int i = 0; i < nreq / 2; i++) {
        MPI_Request t = reqs[i];
        reqs[i] = reqs[nreq - 1 - i];
        reqs[nreq - 1 - i] = t;
    }
    CHECK_MPI(MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE));
    CHECK_EQ((long)nranks * (nranks + 1) / 2, sum, "MPI_Iallreduce between the idups");

    /* 2 */
    for (int i = 0; i <= K; i++) {
        int cmp = -1;
        CHECK(dups[i] != MPI_COMM_NULL && dups[i] != MPI_COMM_WORLD, "idup %d handle", i);
        CHECK_MPI(MPI_Comm_compare(dups[i], MPI_COMM_WORLD, &cmp));
        CHECK_EQ(MPI_CONGRUENT, cmp, "idup %d compared with MPI_COMM_WORLD", i);
        for (int j = 0; j < i; j++)
            CHECK(dups[i] != dups[j], "idups %d and %d share a handle", i, j);
        CHECK_MPI(MPI_Comm_get_attr(dups[i], keyval, &got_attr, &flag));
        CHECK(flag && got_attr && *got_attr == attr_value, "idup %d kept the MPI_COMM_DUP_FN attribute", i);
    }

    /* 3 (WORLD among them: a new context must not be WORLD's either) */
    MPI_Comm all[K + 2];
    for (int i = 0; i <= K; i++)
        all[i] = dups[i];
    all[K + 1] = MPI_COMM_WORLD;
    check_distinct(all, K + 2, "idups of WORLD");

    /* 4 */
    MPI_Comm half, half_dup[2], world_dup[2];
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank < nranks / 2, rank, &half));
    MPI_Request r4[4];
    if (rank % 2 == 0) {
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &world_dup[0], &r4[0]));
        CHECK_MPI(MPI_Comm_idup(half, &half_dup[0], &r4[1]));
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &world_dup[1], &r4[2]));
        CHECK_MPI(MPI_Comm_idup(half, &half_dup[1], &r4[3]));
    } else {
        CHECK_MPI(MPI_Comm_idup(half, &half_dup[0], &r4[1]));
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &world_dup[0], &r4[0]));
        CHECK_MPI(MPI_Comm_idup(half, &half_dup[1], &r4[3]));
        CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &world_dup[1], &r4[2]));
    }
    CHECK_MPI(MPI_Waitall(4, r4, MPI_STATUSES_IGNORE));
    MPI_Comm halves[4] = {half_dup[0], half_dup[1], half, MPI_COMM_NULL};
    check_distinct(halves, 3, "idups of a half");
    MPI_Comm worlds[4] = {world_dup[0], world_dup[1], dups[0], MPI_COMM_WORLD};
    check_distinct(worlds, 4, "idups of WORLD beside the halves'");

    /* 5 */
    MPI_Comm again;
    MPI_Request r5;
    long total = -1;
    CHECK_MPI(MPI_Comm_idup(dups[2], &again, &r5));
    CHECK_MPI(MPI_Wait(&r5, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, again));
    CHECK_EQ((long)nranks * (nranks + 1) / 2, total, "MPI_Allreduce on an idup of an idup");
    MPI_Comm pair[2] = {again, dups[2]};
    check_distinct(pair, 2, "an idup of an idup");

    /* 6 */
    MPI_Comm bad = MPI_COMM_NULL;
    MPI_Request breq = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    tc_expect_class(MPI_Comm_idup(MPI_COMM_NULL, &bad, &breq), MPI_ERR_COMM, "MPI_Comm_idup(MPI_COMM_NULL)");
    tc_expect_class(MPI_Comm_idup(MPI_COMM_WORLD, NULL, &breq), MPI_ERR_ARG, "MPI_Comm_idup with NULL newcomm");
    tc_expect_class(MPI_Comm_idup(MPI_COMM_WORLD, &bad, NULL), MPI_ERR_ARG, "MPI_Comm_idup with NULL request");
    CHECK(breq == MPI_REQUEST_NULL, "no request made by the failed calls");

    for (int i = 0; i <= K; i++)
        CHECK_MPI(MPI_Comm_free(&dups[i]));
    for (int i = 0; i < 2; i++) {
        CHECK_MPI(MPI_Comm_free(&half_dup[i]));
        CHECK_MPI(MPI_Comm_free(&world_dup[i]));
    }
    CHECK_MPI(MPI_Comm_free(&again));
    CHECK_MPI(MPI_Comm_free(&half));
    CHECK_MPI(MPI_Comm_free_keyval(&keyval));
    return tc_finish(NAME);
}

/*
 * comm_create_group.c - MPI_Comm_create_group: a communicator made by the
 * members of a group only.
 *
 * Ranks: any number (1 included).
 *
 *   1. the even ranks make a communicator of themselves while the odd ranks
 *      make one of theirs (tags 5 and 6, at the same time): sizes and ranks
 *      as the groups say, the same group as asked (MPI_Group_compare
 *      MPI_IDENT), and a ring exchange and an allreduce in it work;
 *   2. the ranks in reverse order: rank size-1-r in the new communicator;
 *      created twice in a row with one tag, and the two are distinct
 *      communicators (a message in one is not received in the other);
 *   3. a group of this rank alone gives a communicator of size 1;
 *      MPI_GROUP_EMPTY, and a group without this rank, give MPI_COMM_NULL
 *      without communicating;
 *   4. errors (MPI_ERRORS_RETURN): a group with a rank outside the
 *      communicator -> MPI_ERR_GROUP; MPI_GROUP_NULL -> MPI_ERR_GROUP; tag -1
 *      -> MPI_ERR_TAG; MPI_COMM_NULL -> MPI_ERR_COMM; NULL newcomm ->
 *      MPI_ERR_ARG.
 */
#include "check.h"

#define NAME "comm_create_group"

static int rank, nranks;

/* A ring exchange and an allreduce in `comm`, whose members are world ranks
 * `members[0..n)` in that order. */
static void exercise(MPI_Comm comm, const int *members, int n, const char *what)
{
    int size = -1, r = -1, left, right, got = -1, sum = -1, want = 0, i;
    MPI_Group g, wg, asked;
    int result = -1;

    CHECK_MPI(MPI_Comm_size(comm, &size));
    CHECK_EQ(n, size, "%s: size", what);
    CHECK_MPI(MPI_Comm_rank(comm, &r));
    CHECK(r >= 0 && r < n && members[r] == rank, "%s: rank %d is world rank %d", what, r, rank);
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Group_incl(wg, n, members, &asked));
    CHECK_MPI(MPI_Comm_group(comm, &g));
    CHECK_MPI(MPI_Group_compare(g, asked, &result));
    CHECK_EQ(MPI_IDENT, result, "%s: the communicator's group is the one asked for", what);
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Group_free(&asked));
    CHECK_MPI(MPI_Group_free(&wg));

    left = (r + n - 1) % n;
    right = (r + 1) % n;
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, right, 3, &got, 1, MPI_INT, left, 3, comm, MPI_STATUS_IGNORE));
    CHECK_EQ(members[left], got, "%s: ring exchange", what);
    CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm));
    for (i = 0; i < n; i++)
        want += members[i];
    CHECK_EQ(want, sum, "%s: allreduce of world ranks", what);
}

static void halves(void)
{
    int members[64], n = 0, i;
    MPI_Group wg, g;
    MPI_Comm c = MPI_COMM_NULL;

    for (i = rank % 2; i < nranks && n < 64; i += 2)
        members[n++] = i;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Group_incl(wg, n, members, &g));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 5 + rank % 2, &c));
    CHECK(c != MPI_COMM_NULL, "the even/odd half: a communicator");
    exercise(c, members, n, rank % 2 ? "odd ranks" : "even ranks");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Group_free(&wg));
}

static void reversed(void)
{
    int members[64], n = nranks < 64 ? nranks : 64, i, r = -1, x = -1, flag = 0;
    MPI_Group wg, g;
    MPI_Comm a, b;

    if (rank >= n)
        return;
    for (i = 0; i < n; i++)
        members[i] = n - 1 - i;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Group_incl(wg, n, members, &g));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 9, &a));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 9, &b));
    CHECK_MPI(MPI_Comm_rank(a, &r));
    CHECK_EQ(n - 1 - rank, r, "reversed group: rank");
    exercise(a, members, n, "reversed group");
    exercise(b, members, n, "reversed group, made again");
    /* A message to self in `a` is not seen in `b`. */
    CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, r, 4, a));
    CHECK_MPI(MPI_Iprobe(r, 4, b, &flag, MPI_STATUS_IGNORE));
    CHECK_EQ(0, flag, "a message in one communicator is not in the other");
    CHECK_MPI(MPI_Recv(&x, 1, MPI_INT, r, 4, a, MPI_STATUS_IGNORE));
    CHECK_EQ(rank, x, "message to self in the new communicator");
    CHECK_MPI(MPI_Comm_free(&a));
    CHECK_MPI(MPI_Comm_free(&b));
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_MPI(MPI_Group_free(&wg));
}

static void alone_and_empty(void)
{
    int me[1], other[1], size = -1;
    MPI_Group wg, g;
    MPI_Comm c;

    me[0] = rank;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Group_incl(wg, 1, me, &g));
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &c));
    CHECK_MPI(MPI_Comm_size(c, &size));
    CHECK_EQ(1, size, "a group of this rank alone: size");
    CHECK_MPI(MPI_Comm_free(&c));
    CHECK_MPI(MPI_Group_free(&g));

    c = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, MPI_GROUP_EMPTY, 0, &c));
    CHECK(c == MPI_COMM_NULL, "MPI_GROUP_EMPTY gives MPI_COMM_NULL");
    if (nranks > 1) {
        /* Nobody else calls: a non-member's call is local. */
        other[0] = (rank + 1) % nranks;
        CHECK_MPI(MPI_Group_incl(wg, 1, other, &g));
        c = MPI_COMM_WORLD;
        CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &c));
        CHECK(c == MPI_COMM_NULL, "a group without this rank gives MPI_COMM_NULL");
        CHECK_MPI(MPI_Group_free(&g));
    }
    CHECK_MPI(MPI_Group_free(&wg));
}

static void errors(void)
{
    int rc, r2[2];
    MPI_Group wg, selfg, g;
    MPI_Comm c;

    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_SELF, &selfg));
    if (nranks > 1) {
        r2[0] = rank;
        r2[1] = (rank + 1) % nranks;
        CHECK_MPI(MPI_Group_incl(wg, 2, r2, &g));
        rc = MPI_Comm_create_group(MPI_COMM_SELF, g, 0, &c);
        tc_expect_class(rc, MPI_ERR_GROUP, "a group with a rank outside the communicator");
        CHECK_MPI(MPI_Group_free(&g));
    }
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, MPI_GROUP_NULL, 0, &c);
    tc_expect_class(rc, MPI_ERR_GROUP, "MPI_GROUP_NULL");
    rc = MPI_Comm_create_group(MPI_COMM_SELF, selfg, -1, &c);
    tc_expect_class(rc, MPI_ERR_TAG, "tag -1");
    rc = MPI_Comm_create_group(MPI_COMM_NULL, selfg, 0, &c);
    tc_expect_class(rc, MPI_ERR_COMM, "MPI_COMM_NULL");
    if (tc_is_tandem()) {
        rc = MPI_Comm_create_group(MPI_COMM_SELF, selfg, 0, NULL);
        tc_expect_class(rc, MPI_ERR_ARG, "NULL newcomm");
    }
    CHECK_MPI(MPI_Group_free(&selfg));
    CHECK_MPI(MPI_Group_free(&wg));
}

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    halves();
    reversed();
    alone_and_empty();
    errors();
    return tc_finish(NAME);
}

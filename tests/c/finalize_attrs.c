/*
 * finalize_attrs.c - MPI_Finalize deletes the attributes of MPI_COMM_SELF
 * first, newest first, calling each delete callback once while MPI is still
 * usable (the standard's finalization hook); an attribute deleted earlier is
 * not deleted again, and a key set again counts as set at that moment.
 */
#include "check.h"

#define NKEYS 5

static int keys[NKEYS];
#define MAXDELETED 16
static int deleted[MAXDELETED]; /* index into keys, in the order deleted */
static int ndeleted;
static int finalized_in_callback = -1;

static int record_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)extra;
    int which = -1;
    for (int i = 0; i < NKEYS; i++)
        if (keys[i] == keyval)
            which = i;
    if (comm != MPI_COMM_SELF || which < 0 || value != (void *)&keys[which] || ndeleted >= MAXDELETED) {
        fprintf(stderr, "rank %d: FAIL delete callback with unexpected arguments (key %d)\n", tc_rank(), keyval);
        exit(1);
    }
    MPI_Finalized(&finalized_in_callback);
    deleted[ndeleted++] = which;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = tc_rank();
    for (int i = 0; i < NKEYS; i++)
        CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, record_delete, &keys[i], NULL));
    /* Set in the order 3, 1, 4, 0, 2; delete 4 by hand (its callback runs
     * then); set 1 again (a replaced value is deleted, then 1 is newest). */
    const int order[NKEYS] = {3, 1, 4, 0, 2};
    for (int i = 0; i < NKEYS; i++)
        CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, keys[order[i]], &keys[order[i]]));
    CHECK_MPI(MPI_Comm_delete_attr(MPI_COMM_SELF, keys[4]));
    CHECK_EQ(1, ndeleted, "delete callbacks after MPI_Comm_delete_attr");
    CHECK_EQ(4, deleted[0], "key deleted by MPI_Comm_delete_attr");
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, keys[1], &keys[1]));
    CHECK_EQ(2, ndeleted, "delete callbacks after replacing an attribute");
    CHECK_EQ(1, deleted[1], "key whose value was replaced");
    /* The keys may be freed before MPI_Finalize: set attributes keep them. */
    for (int i = 0; i < NKEYS; i++) {
        int k = keys[i];
        CHECK_MPI(MPI_Comm_free_keyval(&k));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fflush(stderr);
    CHECK_MPI(MPI_Finalize());

    /* Left: 3, 0, 2, 1 (oldest first), so MPI_Finalize deletes 1, 2, 0, 3,
     * after the two deletions above. */
    const int expected[] = {4, 1, 1, 2, 0, 3};
    const int nexpected = (int)(sizeof expected / sizeof expected[0]);
    int ok = ndeleted == nexpected && finalized_in_callback == 0;
    for (int i = 0; ok && i < nexpected; i++)
        ok = deleted[i] == expected[i];
    if (!ok) {
        fprintf(stderr, "rank %d: FAIL attributes deleted (expected 4 1 1 2 0 3, MPI_Finalized 0 in callback) got", rank);
        for (int i = 0; i < ndeleted; i++)
            fprintf(stderr, " %d", deleted[i]);
        fprintf(stderr, " (MPI_Finalized %d)\n", finalized_in_callback);
        return 1;
    }
    if (rank == 0)
        printf("PASS finalize_attrs\n");
    return 0;
}

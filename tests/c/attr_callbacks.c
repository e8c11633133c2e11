/*
 * attr_callbacks.c - attribute callbacks on communicators, datatypes and
 * windows may make MPI calls (the standard allows it, and libraries cache
 * duplicated communicators in attributes and free them in the delete
 * callback); a failing callback fails the call that ran it and loses
 * nothing; key values serve one kind of object.
 *
 * - a communicator attribute holds an inner communicator (MPI_Comm_dup'ed
 *   by the copy callback, which also calls MPI_Comm_size) and a datatype;
 *   the delete callback frees both with MPI_Comm_free / MPI_Type_free and
 *   calls MPI_Comm_rank; MPI_Comm_dup and MPI_Comm_free run them;
 * - a datatype attribute (the expected size) whose copy callback calls
 *   MPI_Type_size and whose delete callback calls MPI_Type_get_extent; MPI_Type_dup, MPI_Type_free,
 *   MPI_Type_delete_attr;
 * - a window attribute whose delete callback reads MPI_WIN_BASE; the
 *   predefined window attributes still read; MPI_Win_free runs it;
 * - a delete callback that fails: MPI_Comm_delete_attr and MPI_Comm_free
 *   return an error and the attribute (and communicator) stay; a copy
 *   callback that fails: MPI_Comm_dup returns an error and MPI_COMM_NULL,
 *   and the value copied before it is deleted again;
 * - a type key used on a communicator is MPI_ERR_KEYVAL;
 * - at MPI_Finalize, a delete callback on MPI_COMM_SELF runs an
 *   MPI_Allreduce over MPI_COMM_WORLD.
 */
#include "check.h"

#define NAME "attr_callbacks"

struct cached {
    MPI_Comm inner;
    MPI_Datatype type;
    int magic;
};

static int comm_copies, comm_deletes, type_copies, type_deletes, win_deletes;
/* Nonzero: the code the copy / delete callback fails with. */
static int fail_delete, fail_copy;
static int final_sum = -1;

static int copy_cached(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)key;
    (void)extra;
    struct cached *c = in, *d;
    int n;
    if (fail_copy)
        return fail_copy;
    CHECK_MPI(MPI_Comm_size(old, &n));
    if (c->magic != 42 || n != tc_size())
        FAIL("copy callback: value or communicator wrong (magic %d, size %d)", c->magic, n);
    d = malloc(sizeof *d);
    *d = *c;
    CHECK_MPI(MPI_Comm_dup(c->inner, &d->inner));
    CHECK_MPI(MPI_Type_dup(c->type, &d->type));
    *(void **)out = d;
    *flag = 1;
    comm_copies++;
    return MPI_SUCCESS;
}

static int delete_cached(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)key;
    (void)extra;
    struct cached *c = value;
    int r;
    if (fail_delete)
        return fail_delete;
    CHECK_MPI(MPI_Comm_rank(comm, &r));
    if (r != tc_rank() || c->magic != 42)
        FAIL("delete callback: rank %d or magic %d wrong", r, c->magic);
    CHECK_MPI(MPI_Comm_free(&c->inner));
    CHECK_MPI(MPI_Type_free(&c->type));
    if (c->inner != MPI_COMM_NULL || c->type != MPI_DATATYPE_NULL)
        FAIL("delete callback: MPI_Comm_free / MPI_Type_free did not null their handles");
    free(c);
    comm_deletes++;
    return MPI_SUCCESS;
}

static int copy_type_attr(MPI_Datatype old, int key, void *extra, void *in, void *out, int *flag)
{
    (void)key;
    (void)extra;
    int size;
    CHECK_MPI(MPI_Type_size(old, &size));
    if (size != *(int *)in)
        FAIL("type copy callback: MPI_Type_size gave %d, expected %d", size, *(int *)in);
    *(void **)out = in;
    *flag = 1;
    type_copies++;
    return MPI_SUCCESS;
}

static int delete_type_attr(MPI_Datatype type, int key, void *value, void *extra)
{
    (void)key;
    (void)extra;
    MPI_Aint lb, extent;
    CHECK_MPI(MPI_Type_get_extent(type, &lb, &extent));
    if (extent != *(int *)value)
        FAIL("type delete callback: extent %ld, expected %d", (long)extent, *(int *)value);
    type_deletes++;
    return MPI_SUCCESS;
}

static int delete_win_attr(MPI_Win win, int key, void *value, void *extra)
{
    (void)key;
    (void)extra;
    void *base;
    int flag;
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    if (!flag || base != value)
        FAIL("window delete callback: MPI_WIN_BASE %p (flag %d), attribute %p", base, flag, value);
    win_deletes++;
    return MPI_SUCCESS;
}

static int at_finalize(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm;
    (void)key;
    (void)value;
    (void)extra;
    int one = 1;
    CHECK_MPI(MPI_Allreduce(&one, &final_sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    return MPI_SUCCESS;
}

static void comm_attributes(void)
{
    int key, flag;
    struct cached *c = malloc(sizeof *c), *got;
    MPI_Comm dup, dup2, bad;

    c->magic = 42;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c->inner));
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &c->type));
    CHECK_MPI(MPI_Comm_create_keyval(copy_cached, delete_cached, &key, NULL));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_set_attr(dup, key, c));

    CHECK_MPI(MPI_Comm_dup(dup, &dup2));
    CHECK_EQ(1, comm_copies, "copy callbacks after MPI_Comm_dup");
    CHECK_MPI(MPI_Comm_get_attr(dup2, key, &got, &flag));
    if (!flag || got == c || got->magic != 42)
        FAIL("the duplicate's attribute is not the copy callback's value");
    {
        /* The copied inner communicator works. */
        int x = tc_rank() + 1, sum = 0, n = tc_size();
        CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, got->inner));
        CHECK_EQ(n * (n + 1) / 2, sum, "allreduce over the copied inner communicator");
    }

    /* A failing delete callback: the call fails, nothing is lost. */
    CHECK_MPI(MPI_Comm_set_errhandler(dup2, MPI_ERRORS_RETURN));
    fail_delete = MPI_ERR_OTHER;
    tc_expect_class(MPI_Comm_delete_attr(dup2, key), MPI_ERR_OTHER, "MPI_Comm_delete_attr, callback fails");
    CHECK_MPI(MPI_Comm_get_attr(dup2, key, &got, &flag));
    CHECK_EQ(1, flag, "attribute kept after its delete callback failed");
    MPI_Comm keep = dup2;
    /* The call fails with the callback's own code. */
    fail_delete = MPI_ERR_ARG;
    CHECK_EQ(MPI_ERR_ARG, MPI_Comm_free(&dup2), "MPI_Comm_free, delete callback fails with MPI_ERR_ARG");
    if (dup2 != keep)
        FAIL("MPI_Comm_free changed the handle although it failed");
    CHECK_MPI(MPI_Comm_get_attr(dup2, key, &got, &flag));
    CHECK_EQ(1, flag, "attribute kept after MPI_Comm_free failed");
    CHECK_MPI(MPI_Barrier(dup2));
    fail_delete = 0;

    /* A failing copy callback: MPI_Comm_dup fails and gives MPI_COMM_NULL. */
    CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    fail_copy = MPI_ERR_OTHER;
    bad = MPI_COMM_WORLD;
    tc_expect_class(MPI_Comm_dup(dup, &bad), MPI_ERR_OTHER, "MPI_Comm_dup, copy callback fails");
    if (bad != MPI_COMM_NULL)
        FAIL("MPI_Comm_dup failed but did not return MPI_COMM_NULL");
    {
        /* With a code the application added, the call returns that code;
         * with a value that is no error code, MPI_ERR_OTHER. */
        int cls, code, got_cls = -1;
        CHECK_MPI(MPI_Add_error_class(&cls));
        CHECK_MPI(MPI_Add_error_code(cls, &code));
        fail_copy = code;
        int rc = MPI_Comm_dup(dup, &bad);
        CHECK_EQ(code, rc, "MPI_Comm_dup, copy callback fails with an added code");
        CHECK_MPI(MPI_Error_class(rc, &got_cls));
        CHECK_EQ(cls, got_cls, "class of the code MPI_Comm_dup returned");
        fail_copy = 987654321;
        tc_expect_class(MPI_Comm_dup(dup, &bad), MPI_ERR_OTHER, "MPI_Comm_dup, copy callback returns no error code");
        if (bad != MPI_COMM_NULL)
            FAIL("MPI_Comm_dup failed but did not return MPI_COMM_NULL");
    }
    fail_copy = 0;

    CHECK_MPI(MPI_Comm_free(&dup2));
    CHECK_EQ(1, comm_deletes, "delete callbacks after MPI_Comm_free");
    if (dup2 != MPI_COMM_NULL)
        FAIL("MPI_Comm_free did not return MPI_COMM_NULL");
    int saved = key;
    CHECK_MPI(MPI_Comm_free_keyval(&key));
    /* The freed key still names the attribute on dup (with its callbacks)
     * until that is deleted; a key freed with nothing set is gone. */
    CHECK_MPI(MPI_Comm_get_attr(dup, saved, &got, &flag));
    CHECK(flag && got == c, "a freed key still reads the attribute set with it");
    {
        int lone, lone_copy;
        CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &lone, NULL));
        lone_copy = lone;
        CHECK_MPI(MPI_Comm_free_keyval(&lone));
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        tc_expect_class(MPI_Comm_free_keyval(&lone_copy), MPI_ERR_KEYVAL, "a key freed twice with nothing set");
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK_EQ(2, comm_deletes, "delete callbacks after freeing the original");
}

static void type_attributes(void)
{
    int tkey, ckey, flag, rc;
    int value = 3 * (int)sizeof(double), int_size = (int)sizeof(int);
    void *got;
    MPI_Datatype t, t2;

    CHECK_MPI(MPI_Type_contiguous(3, MPI_DOUBLE, &t));
    CHECK_MPI(MPI_Type_create_keyval(copy_type_attr, delete_type_attr, &tkey, NULL));
    CHECK_MPI(MPI_Type_set_attr(t, tkey, &value));
    CHECK_MPI(MPI_Type_get_attr(t, tkey, &got, &flag));
    if (!flag || got != &value)
        FAIL("MPI_Type_get_attr gave %p (flag %d)", got, flag);
    CHECK_MPI(MPI_Type_dup(t, &t2));
    CHECK_EQ(1, type_copies, "type copy callbacks after MPI_Type_dup");
    CHECK_MPI(MPI_Type_get_attr(t2, tkey, &got, &flag));
    if (!flag || got != &value)
        FAIL("the duplicate type's attribute is %p (flag %d)", got, flag);
    CHECK_MPI(MPI_Type_delete_attr(t2, tkey));
    CHECK_EQ(1, type_deletes, "type delete callbacks after MPI_Type_delete_attr");
    CHECK_MPI(MPI_Type_get_attr(t2, tkey, &got, &flag));
    CHECK_EQ(0, flag, "attribute after MPI_Type_delete_attr");
    CHECK_MPI(MPI_Type_free(&t2));
    CHECK_EQ(1, type_deletes, "no delete callback for a type without the attribute");
    CHECK_MPI(MPI_Type_free(&t));
    CHECK_EQ(2, type_deletes, "type delete callbacks after MPI_Type_free");

    /* Attributes on a predefined type are allowed. */
    CHECK_MPI(MPI_Type_set_attr(MPI_INT, tkey, &int_size));
    CHECK_MPI(MPI_Type_delete_attr(MPI_INT, tkey));
    CHECK_EQ(3, type_deletes, "delete callback of an attribute on MPI_INT");

    /* A type key is not a communicator key, and the other way round. */
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ckey, NULL));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rc = MPI_Comm_set_attr(MPI_COMM_WORLD, tkey, &value);
    tc_expect_class(rc, MPI_ERR_KEYVAL, "a type key on a communicator");
    rc = MPI_Type_set_attr(MPI_INT, ckey, &value);
    tc_expect_class(rc, MPI_ERR_KEYVAL, "a communicator key on a type");
    rc = MPI_Type_get_attr(MPI_DATATYPE_NULL, tkey, &got, &flag);
    tc_expect_class(rc, MPI_ERR_TYPE, "MPI_Type_get_attr on MPI_DATATYPE_NULL");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    CHECK_MPI(MPI_Comm_free_keyval(&ckey));
    CHECK_MPI(MPI_Type_free_keyval(&tkey));
    if (tkey != MPI_KEYVAL_INVALID)
        FAIL("MPI_Type_free_keyval did not set MPI_KEYVAL_INVALID");
}

static void win_attributes(void)
{
    int key, flag, *buf;
    void *got;
    MPI_Aint *size;
    MPI_Win win;

    CHECK_MPI(MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win));
    CHECK_MPI(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, delete_win_attr, &key, NULL));
    CHECK_MPI(MPI_Win_set_attr(win, key, buf));
    CHECK_MPI(MPI_Win_get_attr(win, key, &got, &flag));
    if (!flag || got != buf)
        FAIL("MPI_Win_get_attr gave %p (flag %d), set %p", got, flag, (void *)buf);
    CHECK_MPI(MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag));
    if (!flag || *size != 4 * (MPI_Aint)sizeof(int))
        FAIL("MPI_WIN_SIZE wrong next to a user attribute");
    CHECK_MPI(MPI_Win_free(&win));
    CHECK_EQ(1, win_deletes, "window delete callbacks after MPI_Win_free");
    if (win != MPI_WIN_NULL)
        FAIL("MPI_Win_free did not return MPI_WIN_NULL");
    CHECK_MPI(MPI_Win_free_keyval(&key));
}

int main(int argc, char **argv)
{
    int key, rank, size;
    CHECK_MPI(MPI_Init(&argc, &argv));
    rank = tc_rank();
    size = tc_size();
    comm_attributes();
    type_attributes();
    win_attributes();
    CHECK_MPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &key, NULL));
    CHECK_MPI(MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fflush(stderr);
    CHECK_MPI(MPI_Finalize());
    if (final_sum != size)
        FAIL("the MPI_Allreduce in the finalize callback gave %d", final_sum);
    if (rank == 0) {
        printf("PASS %s\n", NAME);
        fflush(stdout);
    }
    return 0;
}

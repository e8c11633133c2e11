/*
 * mpi_t.c - the MPI tool information interface (MPI_T).
 *
 * Ranks: 2 or more (one rank runs the checks that need no partner).
 *
 *   before MPI_Init: every MPI_T call but MPI_T_init_thread answers
 *     MPI_T_ERR_NOT_INITIALIZED; after MPI_T_init_thread (twice: reference
 *     counted) control variables are enumerated (names unique, each found
 *     again by MPI_T_cvar_get_index), "eager_limit" reads the value the job
 *     runs with (TANDEM_EAGER_LIMIT if set, else 64 KiB) and cannot be
 *     written (MPI_T_ERR_CVAR_SET_NEVER); "progress" is an enumeration that
 *     names its value; "transports" is text; bad indices, names and
 *     handles give their error codes.
 *   categories: every control variable is in exactly one, and the
 *     category "stats" holds every performance variable.
 *   performance variables: "eager_msgs" (a counter) is read in a session
 *     before and after rank 0 sends N small messages to rank 1 with
 *     nothing else in between: the difference is N; stopped, the handle
 *     does not count; reset and readreset start from 0 again. Sessions and
 *     handles are checked (a handle of another session is invalid).
 *   after MPI_Finalize: MPI_T still works until its last MPI_T_finalize,
 *     then answers MPI_T_ERR_NOT_INITIALIZED again.
 */
#include "check.h"

#define NAME "mpi_t"
#define N 37

static int cvar_named(const char *name)
{
    int i = -1;
    CHECK_MPI(MPI_T_cvar_get_index(name, &i));
    return i;
}

static void check_not_initialized(const char *when)
{
    int n = -1;
    CHECK_EQ(MPI_T_ERR_NOT_INITIALIZED, MPI_T_cvar_get_num(&n), "MPI_T_cvar_get_num %s", when);
    CHECK_EQ(MPI_T_ERR_NOT_INITIALIZED, MPI_T_pvar_get_num(&n), "MPI_T_pvar_get_num %s", when);
    CHECK_EQ(MPI_T_ERR_NOT_INITIALIZED, MPI_T_category_get_num(&n), "MPI_T_category_get_num %s", when);
    CHECK_EQ(MPI_T_ERR_NOT_INITIALIZED, MPI_T_finalize(), "MPI_T_finalize %s", when);
}

static unsigned long long expected_eager_limit(void)
{
    const char *v = getenv("TANDEM_EAGER_LIMIT");
    if (v == NULL)
        return 65536;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end == 'k' || *end == 'K')
        n *= 1024;
    return n;
}

static void check_cvars(void)
{
    int num = -1;
    CHECK_MPI(MPI_T_cvar_get_num(&num));
    CHECK(num >= 30, "at least 30 control variables (the parameter registry), got %d", num);
    for (int i = 0; i < num; i++) {
        char name[256], desc[2048];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
        MPI_Datatype dt;
        MPI_T_enum en;
        CHECK_MPI(MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &dt, &en, desc, &desc_len, &bind, &scope));
        CHECK_EQ((int)strlen(name) + 1, name_len, "name length of cvar %d includes the terminator", i);
        CHECK(desc_len > 1, "cvar %s has a description", name);
        CHECK_EQ(MPI_T_BIND_NO_OBJECT, bind, "cvar %s binding", name);
        CHECK(dt == MPI_INT || dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_CHAR, "cvar %s datatype", name);
        CHECK_EQ(i, cvar_named(name), "MPI_T_cvar_get_index(\"%s\")", name);
    }
    /* truncation and length-only queries */
    {
        char small[4];
        int len = sizeof small;
        CHECK_MPI(MPI_T_cvar_get_info(cvar_named("eager_limit"), small, &len, NULL, NULL, NULL, NULL, NULL, NULL,
                                      NULL));
        CHECK(strcmp(small, "eag") == 0, "truncated name \"%s\"", small);
        len = 0;
        CHECK_MPI(MPI_T_cvar_get_info(cvar_named("eager_limit"), NULL, &len, NULL, NULL, NULL, NULL, NULL, NULL,
                                      NULL));
        CHECK_EQ(12, len, "length needed for \"eager_limit\"");
    }

    /* eager_limit: an unsigned long long, read-only */
    int i = cvar_named("eager_limit");
    MPI_Datatype dt;
    int scope;
    CHECK_MPI(MPI_T_cvar_get_info(i, NULL, NULL, NULL, &dt, NULL, NULL, NULL, NULL, &scope));
    CHECK(dt == MPI_UNSIGNED_LONG_LONG, "eager_limit is an MPI_UNSIGNED_LONG_LONG");
    CHECK(scope == MPI_T_SCOPE_CONSTANT || scope == MPI_T_SCOPE_READONLY, "eager_limit cannot be set");
    MPI_T_cvar_handle h;
    int count = -1;
    CHECK_MPI(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
    CHECK_EQ(1, count, "eager_limit count");
    unsigned long long v = 0;
    CHECK_MPI(MPI_T_cvar_read(h, &v));
    CHECK_EQ((long long)expected_eager_limit(), (long long)v, "eager_limit value");
    CHECK_EQ(MPI_T_ERR_CVAR_SET_NEVER, MPI_T_cvar_write(h, &v), "writing eager_limit");
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
    CHECK(h == MPI_T_CVAR_HANDLE_NULL, "freed cvar handle is NULL");
    CHECK_EQ(MPI_T_ERR_INVALID_HANDLE, MPI_T_cvar_read(h, &v), "reading a freed handle");

    /* progress: an enumeration naming its value */
    i = cvar_named("progress");
    MPI_T_enum en;
    CHECK_MPI(MPI_T_cvar_get_info(i, NULL, NULL, NULL, &dt, &en, NULL, NULL, NULL, NULL));
    CHECK(dt == MPI_INT && en != MPI_T_ENUM_NULL, "progress is an enumeration");
    int items = 0;
    char ename[64];
    int elen = sizeof ename;
    CHECK_MPI(MPI_T_enum_get_info(en, &items, ename, &elen));
    CHECK(items >= 3, "progress has %d choices", items);
    CHECK_MPI(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
    int choice = -1;
    CHECK_MPI(MPI_T_cvar_read(h, &choice));
    CHECK_MPI(MPI_T_cvar_handle_free(&h));
    int value = -1;
    char word[64];
    int wlen = sizeof word;
    CHECK_MPI(MPI_T_enum_get_item(en, choice, &value, word, &wlen));
    CHECK_EQ(choice, value, "enumeration item value");
    const char *want = getenv("TANDEM_PROGRESS") ? getenv("TANDEM_PROGRESS") : "adaptive";
    CHECK(strcmp(word, want) == 0, "progress reads \"%s\", expected \"%s\"", word, want);
    CHECK_EQ(MPI_T_ERR_INVALID_INDEX, MPI_T_enum_get_item(en, items, &value, word, &wlen), "item past the end");
    CHECK_EQ(MPI_T_ERR_INVALID_HANDLE, MPI_T_enum_get_info(MPI_T_ENUM_NULL, &items, ename, &elen),
             "MPI_T_ENUM_NULL");

    /* transports: text */
    i = cvar_named("transports");
    CHECK_MPI(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
    char text[256];
    CHECK(count > 0 && count <= (int)sizeof text, "transports count %d", count);
    CHECK_MPI(MPI_T_cvar_read(h, text));
    CHECK_EQ(count, (int)strlen(text) + 1, "transports count is its length and terminator");
    want = getenv("TANDEM_TRANSPORTS") ? getenv("TANDEM_TRANSPORTS") : "shm,tcp";
    CHECK(strcmp(text, want) == 0, "transports reads \"%s\", expected \"%s\"", text, want);
    CHECK_MPI(MPI_T_cvar_handle_free(&h));

    /* errors */
    CHECK_EQ(MPI_T_ERR_INVALID_INDEX, MPI_T_cvar_get_info(num, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
             "cvar index past the end");
    CHECK_EQ(MPI_T_ERR_INVALID_INDEX, MPI_T_cvar_handle_alloc(-1, NULL, &h, &count), "cvar index -1");
    CHECK_EQ(MPI_T_ERR_INVALID_NAME, MPI_T_cvar_get_index("no_such_parameter", &i), "unknown cvar name");
    CHECK_EQ(MPI_T_ERR_INVALID_HANDLE, MPI_T_cvar_read(MPI_T_CVAR_HANDLE_NULL, &v), "MPI_T_CVAR_HANDLE_NULL");
}

static void check_categories(void)
{
    int ncat = 0, ncvar = 0, npvar = 0;
    CHECK_MPI(MPI_T_category_get_num(&ncat));
    CHECK_MPI(MPI_T_cvar_get_num(&ncvar));
    CHECK_MPI(MPI_T_pvar_get_num(&npvar));
    CHECK(ncat >= 2, "categories: %d", ncat);
    int *seen = calloc((size_t)ncvar, sizeof(int));
    for (int c = 0; c < ncat; c++) {
        char name[64];
        int len = sizeof name, nc = -1, np = -1, nsub = -1;
        CHECK_MPI(MPI_T_category_get_info(c, name, &len, NULL, NULL, &nc, &np, &nsub));
        int idx = -1;
        CHECK_MPI(MPI_T_category_get_index(name, &idx));
        CHECK_EQ(c, idx, "category \"%s\" found by name", name);
        int *ids = malloc((size_t)(nc + np + 1) * sizeof(int));
        CHECK_MPI(MPI_T_category_get_cvars(c, nc, ids));
        for (int k = 0; k < nc; k++) {
            CHECK(ids[k] >= 0 && ids[k] < ncvar, "cvar index %d of category %s", ids[k], name);
            seen[ids[k]]++;
        }
        if (strcmp(name, "stats") == 0) {
            CHECK_EQ(npvar, np, "category stats holds every pvar");
            CHECK_MPI(MPI_T_category_get_pvars(c, np, ids));
            for (int k = 0; k < np; k++)
                CHECK_EQ(k, ids[k], "pvar %d of category stats", k);
        }
        free(ids);
    }
    for (int i = 0; i < ncvar; i++)
        CHECK_EQ(1, seen[i], "cvar %d is in exactly one category", i);
    free(seen);
    int idx;
    CHECK_EQ(MPI_T_ERR_INVALID_INDEX, MPI_T_category_get_info(ncat, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
             "category index past the end");
    CHECK_EQ(MPI_T_ERR_INVALID_NAME, MPI_T_category_get_index("nothing", &idx), "unknown category");
    int n = -1;
    CHECK_MPI(MPI_T_source_get_num(&n));
    CHECK_EQ(0, n, "event sources");
    CHECK_MPI(MPI_T_event_get_num(&n));
    CHECK_EQ(0, n, "events");
    CHECK_EQ(MPI_T_ERR_INVALID_INDEX,
             MPI_T_event_get_info(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), "event 0");
}

static unsigned long long read_pvar(MPI_T_pvar_session s, MPI_T_pvar_handle h)
{
    unsigned long long v = 0;
    CHECK_MPI(MPI_T_pvar_read(s, h, &v));
    return v;
}

static void check_pvars(int rank)
{
    int idx = -1, cls, ro, cont, atomic;
    MPI_Datatype dt;
    CHECK_MPI(MPI_T_pvar_get_index("eager_msgs", MPI_T_PVAR_CLASS_COUNTER, &idx));
    CHECK_EQ(MPI_T_ERR_INVALID_NAME, MPI_T_pvar_get_index("eager_msgs", MPI_T_PVAR_CLASS_TIMER, &cls),
             "eager_msgs is no timer");
    CHECK_MPI(MPI_T_pvar_get_info(idx, NULL, NULL, NULL, &cls, &dt, NULL, NULL, NULL, NULL, &ro, &cont, &atomic));
    CHECK(cls == MPI_T_PVAR_CLASS_COUNTER && dt == MPI_UNSIGNED_LONG_LONG, "eager_msgs class and type");
    CHECK(!cont && !ro, "eager_msgs can be started, stopped and reset");

    MPI_T_pvar_session s, other;
    MPI_T_pvar_handle h;
    int count = -1;
    CHECK_MPI(MPI_T_pvar_session_create(&s));
    CHECK_MPI(MPI_T_pvar_session_create(&other));
    CHECK_MPI(MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &count));
    CHECK_EQ(1, count, "eager_msgs count");
    CHECK_EQ(0, (long long)read_pvar(s, h), "a stopped new handle reads 0");
    unsigned long long v;
    CHECK_EQ(MPI_T_ERR_INVALID_HANDLE, MPI_T_pvar_read(other, h, &v), "a handle of another session");
    CHECK_EQ(MPI_T_ERR_INVALID_SESSION, MPI_T_pvar_read(MPI_T_PVAR_SESSION_NULL, h, &v), "the NULL session");
    CHECK_EQ(MPI_T_ERR_INVALID_HANDLE, MPI_T_pvar_read(s, MPI_T_PVAR_ALL_HANDLES, &v), "reading all handles");

    char byte = 1;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        /* stopped: sends are not counted */
        CHECK_MPI(MPI_Send(&byte, 1, MPI_CHAR, 1, 7, MPI_COMM_WORLD));
        CHECK_EQ(0, (long long)read_pvar(s, h), "a stopped handle does not count");
        CHECK_MPI(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
        unsigned long long before = read_pvar(s, h);
        for (int k = 0; k < N; k++)
            CHECK_MPI(MPI_Send(&byte, 1, MPI_CHAR, 1, 7, MPI_COMM_WORLD));
        unsigned long long after = read_pvar(s, h);
        CHECK_EQ(N, (long long)(after - before), "eager_msgs counted the %d sends", N);
        CHECK_MPI(MPI_T_pvar_readreset(s, h, &v));
        CHECK_EQ((long long)after, (long long)v, "readreset reads the value");
        CHECK_EQ(0, (long long)read_pvar(s, h), "after readreset");
        CHECK_MPI(MPI_Send(&byte, 1, MPI_CHAR, 1, 7, MPI_COMM_WORLD));
        CHECK_EQ(1, (long long)read_pvar(s, h), "one send after readreset");
        CHECK_MPI(MPI_T_pvar_stop(s, h));
        CHECK_MPI(MPI_Send(&byte, 1, MPI_CHAR, 1, 7, MPI_COMM_WORLD));
        CHECK_EQ(1, (long long)read_pvar(s, h), "stopped again");
        CHECK_MPI(MPI_T_pvar_reset(s, h));
        CHECK_EQ(0, (long long)read_pvar(s, h), "after reset");
    } else if (rank == 1) {
        for (int k = 0; k < N + 3; k++)
            CHECK_MPI(MPI_Recv(&byte, 1, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* the high-water mark is continuous and read-only */
    CHECK_MPI(MPI_T_pvar_get_index("max_unexpected_queue", MPI_T_PVAR_CLASS_HIGHWATERMARK, &idx));
    MPI_T_pvar_handle hw;
    CHECK_MPI(MPI_T_pvar_handle_alloc(s, idx, NULL, &hw, &count));
    CHECK_EQ(MPI_T_ERR_PVAR_NO_STARTSTOP, MPI_T_pvar_start(s, hw), "starting a continuous variable");
    CHECK_EQ(MPI_T_ERR_PVAR_NO_WRITE, MPI_T_pvar_reset(s, hw), "resetting a read-only variable");
    read_pvar(s, hw);

    CHECK_MPI(MPI_T_pvar_handle_free(s, &h));
    CHECK(h == MPI_T_PVAR_HANDLE_NULL, "freed pvar handle is NULL");
    CHECK_MPI(MPI_T_pvar_session_free(&s));
    CHECK(s == MPI_T_PVAR_SESSION_NULL, "freed session is NULL");
    CHECK_EQ(MPI_T_ERR_INVALID_SESSION, MPI_T_pvar_read(s, hw, &v), "a freed session");
    CHECK_MPI(MPI_T_pvar_session_free(&other));
    int npvar;
    CHECK_MPI(MPI_T_pvar_get_num(&npvar));
    CHECK_EQ(MPI_T_ERR_INVALID_INDEX, MPI_T_pvar_get_info(npvar, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                                          NULL, NULL, NULL, NULL),
             "pvar index past the end");
}

int main(int argc, char **argv)
{
    int provided = -1, rank, size;
    check_not_initialized("before MPI_T_init_thread");
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    check_cvars();
    check_categories();

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks");
    check_cvars();
    check_pvars(rank);
    CHECK_MPI(MPI_T_finalize());
    int n;
    CHECK_MPI(MPI_T_cvar_get_num(&n)); /* one MPI_T_init_thread still counts */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Finalize());

    /* after MPI_Finalize */
    CHECK_MPI(MPI_T_cvar_get_num(&n));
    check_categories();
    CHECK_MPI(MPI_T_finalize());
    check_not_initialized("after the last MPI_T_finalize");
    if (rank == 0)
        printf("PASS %s\n", NAME);
    return 0;
}

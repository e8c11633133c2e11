/*
 * init_query.c - initialization, thread level, version and environment
 * queries, datatype sizes and extents.
 *
 * Ranks: any number (1 included); every rank checks the same things.
 *   - MPI_Initialized gives 0 before MPI_Init_thread and 1 after (and after
 *     MPI_Finalize); MPI_Finalized gives 0 before MPI_Finalize and 1 after;
 *   - MPI_Init_thread(MPI_THREAD_MULTIPLE) provides a valid level and
 *     MPI_Query_thread agrees;
 *   - MPI_Get_version equals the header's MPI_VERSION / MPI_SUBVERSION, is
 *     5.0 on Tandem and at least 3.0 on another MPI;
 *   - MPI_Get_library_version and MPI_Get_processor_name give non-empty
 *     strings whose length is the returned length;
 *   - MPI_Wtime increases (and a 20 ms sleep measures between 10 ms and 5 s);
 *     0 < MPI_Wtick < 1;
 *   - MPI_Type_size / MPI_Type_get_extent of basic types, pair types and
 *     fixed-size integer types match the C types;
 *   - MPI_Comm_rank / MPI_Comm_size of MPI_COMM_SELF are 0 / 1.
 */
#include "check.h"

#include <stdbool.h>

#define NAME "init_query"

struct double_int { double d; int i; };
struct long_int { long l; int i; };
struct float_int { float f; int i; };
struct short_int { short s; int i; };
struct long_double_int { long double ld; int i; };
struct two_int { int a, b; };

static void check_type(MPI_Datatype t, const char *name, int size, long extent)
{
    int s = -1;
    MPI_Aint lb = -1, ext = -1;
    CHECK_MPI(MPI_Type_size(t, &s));
    CHECK_EQ(size, s, "MPI_Type_size(%s)", name);
    CHECK_MPI(MPI_Type_get_extent(t, &lb, &ext));
    CHECK_EQ(0, lb, "MPI_Type_get_extent(%s): lb", name);
    CHECK_EQ(extent, ext, "MPI_Type_get_extent(%s): extent", name);
}

#define BASIC(t, ctype) check_type(t, #t, (int)sizeof(ctype), (long)sizeof(ctype))
#define PAIR(t, ctype, datasize) check_type(t, #t, (int)(datasize), (long)sizeof(ctype))

int main(int argc, char **argv)
{
    int flag = -1, provided = -1, queried = -1, version = -1, subversion = -1, len = -1, rank = -1, size = -1;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING + 1], host[MPI_MAX_PROCESSOR_NAME + 1];
    double t0, t1, tick;
    long spins = 0;

    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(0, flag, "MPI_Initialized before MPI_Init_thread");
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK_EQ(0, flag, "MPI_Finalized before MPI_Init_thread");

    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK_MPI(MPI_Initialized(&flag));
    CHECK_EQ(1, flag, "MPI_Initialized after MPI_Init_thread");
    CHECK_MPI(MPI_Finalized(&flag));
    CHECK_EQ(0, flag, "MPI_Finalized before MPI_Finalize");
    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED || provided == MPI_THREAD_SERIALIZED ||
              provided == MPI_THREAD_MULTIPLE,
          "MPI_Init_thread provided the unknown level %d", provided);
    CHECK_MPI(MPI_Query_thread(&queried));
    CHECK_EQ(provided, queried, "MPI_Query_thread vs. the level MPI_Init_thread provided");
    CHECK(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED && MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED &&
              MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE,
          "the thread level constants are not ordered");

    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size >= 1 && rank >= 0 && rank < size, "rank %d of %d", rank, size);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_SELF, &flag));
    CHECK_EQ(0, flag, "MPI_Comm_rank(MPI_COMM_SELF)");
    CHECK_MPI(MPI_Comm_size(MPI_COMM_SELF, &flag));
    CHECK_EQ(1, flag, "MPI_Comm_size(MPI_COMM_SELF)");

    /* versions */
    CHECK_MPI(MPI_Get_version(&version, &subversion));
    CHECK_EQ(MPI_VERSION, version, "MPI_Get_version: version vs. the header's MPI_VERSION");
    CHECK_EQ(MPI_SUBVERSION, subversion, "MPI_Get_version: subversion vs. the header's MPI_SUBVERSION");
    if (tc_is_tandem()) {
        CHECK_EQ(5, version, "MPI_Get_version on Tandem: version");
        CHECK_EQ(0, subversion, "MPI_Get_version on Tandem: subversion");
    } else {
        CHECK(version >= 3, "MPI_Get_version gave %d.%d", version, subversion);
    }
    memset(lib, 0x55, sizeof lib);
    CHECK_MPI(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING, "MPI_Get_library_version: length %d", len);
    lib[MPI_MAX_LIBRARY_VERSION_STRING] = 0;
    /* the standard: lib[len] is the terminating NUL. Open MPI 4.1 counts the
     * NUL in len, so another MPI may be one off. */
    if (tc_is_tandem() || (long)strlen(lib) != len - 1)
        CHECK_EQ(len, (long)strlen(lib), "MPI_Get_library_version: strlen of the string vs. the returned length");
    memset(host, 0x55, sizeof host);
    CHECK_MPI(MPI_Get_processor_name(host, &len));
    CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME, "MPI_Get_processor_name: length %d", len);
    host[MPI_MAX_PROCESSOR_NAME] = 0;
    CHECK_EQ(len, (long)strlen(host), "MPI_Get_processor_name: strlen of the name vs. the returned length");

    /* clocks */
    tick = MPI_Wtick();
    CHECK(tick > 0 && tick < 1, "MPI_Wtick gave %g", tick);
    t0 = MPI_Wtime();
    do {
        t1 = MPI_Wtime();
        spins++;
        CHECK(t1 >= t0, "MPI_Wtime went backwards (%.9f then %.9f)", t0, t1);
        CHECK(spins < 100000000L, "MPI_Wtime did not advance in 10^8 calls");
    } while (t1 == t0);
    t0 = MPI_Wtime();
    tc_sleep_ms(20);
    t1 = MPI_Wtime();
    CHECK(t1 - t0 >= 0.010 && t1 - t0 < 5.0, "MPI_Wtime measured a 20 ms sleep as %.6f s", t1 - t0);

    /* datatypes */
    BASIC(MPI_CHAR, char);
    BASIC(MPI_SIGNED_CHAR, signed char);
    BASIC(MPI_UNSIGNED_CHAR, unsigned char);
    BASIC(MPI_BYTE, unsigned char);
    BASIC(MPI_SHORT, short);
    BASIC(MPI_UNSIGNED_SHORT, unsigned short);
    BASIC(MPI_INT, int);
    BASIC(MPI_UNSIGNED, unsigned);
    BASIC(MPI_LONG, long);
    BASIC(MPI_UNSIGNED_LONG, unsigned long);
    BASIC(MPI_LONG_LONG, long long);
    BASIC(MPI_LONG_LONG_INT, long long);
    BASIC(MPI_UNSIGNED_LONG_LONG, unsigned long long);
    BASIC(MPI_FLOAT, float);
    BASIC(MPI_DOUBLE, double);
    BASIC(MPI_LONG_DOUBLE, long double);
    BASIC(MPI_WCHAR, wchar_t);
    BASIC(MPI_C_BOOL, bool);
    BASIC(MPI_INT8_T, int8_t);
    BASIC(MPI_INT16_T, int16_t);
    BASIC(MPI_INT32_T, int32_t);
    BASIC(MPI_INT64_T, int64_t);
    BASIC(MPI_UINT8_T, uint8_t);
    BASIC(MPI_UINT16_T, uint16_t);
    BASIC(MPI_UINT32_T, uint32_t);
    BASIC(MPI_UINT64_T, uint64_t);
    BASIC(MPI_AINT, MPI_Aint);
    BASIC(MPI_OFFSET, MPI_Offset);
    BASIC(MPI_COUNT, MPI_Count);
    BASIC(MPI_C_FLOAT_COMPLEX, float _Complex);
    BASIC(MPI_C_DOUBLE_COMPLEX, double _Complex);
    PAIR(MPI_DOUBLE_INT, struct double_int, sizeof(double) + sizeof(int));
    PAIR(MPI_FLOAT_INT, struct float_int, sizeof(float) + sizeof(int));
    PAIR(MPI_LONG_INT, struct long_int, sizeof(long) + sizeof(int));
    PAIR(MPI_SHORT_INT, struct short_int, sizeof(short) + sizeof(int));
    PAIR(MPI_2INT, struct two_int, 2 * sizeof(int));
    PAIR(MPI_LONG_DOUBLE_INT, struct long_double_int, sizeof(long double) + sizeof(int));

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        printf("MPI %d.%d, thread level %d, library: %.60s\n", version, subversion, provided, lib);
        fflush(stdout);
    }
    CHECK_MPI(MPI_Finalize());
    flag = -1;
    MPI_Finalized(&flag);
    if (flag != 1) {
        fprintf(stderr, "rank %d: FAIL MPI_Finalized after MPI_Finalize (expected 1 got %d)\n", rank, flag);
        return 1;
    }
    flag = -1;
    MPI_Initialized(&flag);
    if (flag != 1) {
        fprintf(stderr, "rank %d: FAIL MPI_Initialized after MPI_Finalize (expected 1 got %d)\n", rank, flag);
        return 1;
    }
    if (rank == 0)
        printf("PASS %s\n", NAME);
    return 0;
}

/*
 * Compile-time checks that include/mpi.h has the MPI-5.0 standard ABI
 * layout and values.  Builds as C (C99 or later) and as C++ (C++11 or
 * later); it makes no MPI calls, so it needs no library to link.
 */
#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
#define ABI_CHECK(cond, msg) static_assert(cond, msg)
#else
/* __extension__: _Static_assert is C11, and gcc folds the handle casts */
#define ABI_CHECK(cond, msg) __extension__ _Static_assert(cond, msg)
#endif

/* Status layout */
ABI_CHECK(sizeof(MPI_Status) == 32, "MPI_Status is 32 bytes");
ABI_CHECK(offsetof(MPI_Status, MPI_SOURCE) == 0, "MPI_SOURCE at 0");
ABI_CHECK(offsetof(MPI_Status, MPI_TAG) == 4, "MPI_TAG at 4");
ABI_CHECK(offsetof(MPI_Status, MPI_ERROR) == 8, "MPI_ERROR at 8");

/* Handles and integer types */
ABI_CHECK(sizeof(MPI_Comm) == sizeof(void *), "handles are pointer-sized");
ABI_CHECK(sizeof(MPI_Datatype) == sizeof(void *), "handles are pointer-sized");
ABI_CHECK(sizeof(MPI_Request) == sizeof(void *), "handles are pointer-sized");
ABI_CHECK(sizeof(MPI_Aint) == sizeof(void *), "MPI_Aint is intptr_t");
ABI_CHECK(sizeof(MPI_Offset) == 8, "MPI_Offset is 64-bit");
ABI_CHECK(sizeof(MPI_Count) == 8, "MPI_Count is 64-bit");

/* Integer constants */
ABI_CHECK(MPI_SUCCESS == 0, "MPI_SUCCESS");
ABI_CHECK(MPI_ERR_TRUNCATE == 15, "MPI_ERR_TRUNCATE");
ABI_CHECK(MPI_ERR_ERRHANDLER == 61, "MPI_ERR_ERRHANDLER");
ABI_CHECK(MPI_ERR_LASTCODE == 16383, "MPI_ERR_LASTCODE");
ABI_CHECK(MPI_ANY_SOURCE == -1, "MPI_ANY_SOURCE");
ABI_CHECK(MPI_ANY_TAG == -2, "MPI_ANY_TAG");
ABI_CHECK(MPI_PROC_NULL == -3, "MPI_PROC_NULL");
ABI_CHECK(MPI_ROOT == -4, "MPI_ROOT");
ABI_CHECK(MPI_UNDEFINED == -32766, "MPI_UNDEFINED");
ABI_CHECK(MPI_THREAD_SINGLE == 0, "MPI_THREAD_SINGLE");
ABI_CHECK(MPI_THREAD_MULTIPLE == 4096, "MPI_THREAD_MULTIPLE");
ABI_CHECK(MPI_IDENT == 201, "MPI_IDENT");
ABI_CHECK(MPI_TAG_UB == 501, "MPI_TAG_UB");
ABI_CHECK(MPI_MAX_ERROR_STRING == 512, "MPI_MAX_ERROR_STRING");
ABI_CHECK(MPI_VERSION == 5 && MPI_SUBVERSION == 0, "MPI 5.0");
ABI_CHECK(MPI_ABI_VERSION == 1 && MPI_ABI_SUBVERSION == 0, "ABI 1.0");

/* Handle values.  C++ cannot evaluate an integer-to-pointer cast in a
   constant expression, so these are checked in C only. */
#ifndef __cplusplus
ABI_CHECK(MPI_COMM_WORLD == (MPI_Comm)0x101, "MPI_COMM_WORLD");
ABI_CHECK(MPI_COMM_SELF == (MPI_Comm)0x102, "MPI_COMM_SELF");
ABI_CHECK(MPI_COMM_NULL == (MPI_Comm)0x100, "MPI_COMM_NULL");
ABI_CHECK(MPI_INT == (MPI_Datatype)0x209, "MPI_INT");
ABI_CHECK(MPI_DOUBLE == (MPI_Datatype)0x214, "MPI_DOUBLE");
ABI_CHECK(MPI_BYTE == (MPI_Datatype)0x247, "MPI_BYTE");
ABI_CHECK(MPI_SUM == (MPI_Op)0x021, "MPI_SUM");
ABI_CHECK(MPI_REQUEST_NULL == (MPI_Request)0x180, "MPI_REQUEST_NULL");
ABI_CHECK(MPI_ERRORS_RETURN == (MPI_Errhandler)0x143, "MPI_ERRORS_RETURN");
ABI_CHECK(MPI_IN_PLACE == (void *)1, "MPI_IN_PLACE");
#endif

int main(void) { return 0; }

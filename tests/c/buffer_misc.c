/*
 * buffer_misc.c - MPI-4.1 buffers for buffered sends: per communicator,
 * automatic, and flushes.
 *
 *   1. a buffer attached to a duplicate of MPI_COMM_WORLD serves MPI_Bsend
 *      on it while MPI_COMM_WORLD, with no buffer, refuses (MPI_ERR_BUFFER);
 *      a message larger than the communicator's buffer is refused;
 *      MPI_Comm_flush_buffer returns once the partner received; detaching
 *      gives the address and size back;
 *   2. MPI_BUFFER_AUTOMATIC on the process: 4 MiB of buffered sends with no
 *      buffer given; detach reports MPI_BUFFER_AUTOMATIC;
 *   3. MPI_Buffer_iflush and MPI_Comm_iflush_buffer do not block: every
 *      rank buffers a message to its right neighbour, starts the flush, and
 *      only then receives from its left; the flushes complete after;
 *   4. errors: attaching twice, detaching a communicator's buffer twice,
 *      MPI_COMM_NULL (the process's buffer detached when none is gives NULL);
 *   5. freeing a communicator detaches its buffer: the next communicator
 *      (which may get the same handle) has none.
 */
#include "check.h"

#define NAME "buffer_misc"

static int rank, size;

static void per_comm(void)
{
    MPI_Comm dup;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int n = 1000, i, rc, got_size = 0;
    int *msg = (int *)malloc(sizeof(int) * n), *in = (int *)malloc(sizeof(int) * n);
    int bytes = n * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    char *buf = (char *)malloc(bytes);
    void *got = NULL;
    for (i = 0; i < n; i++)
        msg[i] = rank * 10000 + i;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_attach_buffer(dup, buf, bytes));
    rc = MPI_Bsend(msg, 1, MPI_INT, right, 1, MPI_COMM_WORLD);
    tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Bsend on a communicator without any buffer");
    rc = MPI_Bsend(msg, n + 1, MPI_INT, right, 1, dup);
    tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Bsend larger than the communicator's buffer");
    CHECK_MPI(MPI_Bsend(msg, n, MPI_INT, right, 2, dup));
    /* The buffer is in use until delivered: a second message does not fit. */
    CHECK_MPI(MPI_Recv(in, n, MPI_INT, left, 2, dup, MPI_STATUS_IGNORE));
    CHECK_EQ(left * 10000 + n - 1, in[n - 1], "message through the communicator's buffer");
    CHECK_MPI(MPI_Comm_flush_buffer(dup));
    /* Flushed: the whole buffer is free again. */
    CHECK_MPI(MPI_Bsend(msg, n, MPI_INT, right, 3, dup));
    CHECK_MPI(MPI_Recv(in, n, MPI_INT, left, 3, dup, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Comm_detach_buffer(dup, &got, &got_size));
    CHECK(got == buf, "detached address");
    CHECK_EQ(bytes, got_size, "detached size");
    rc = MPI_Comm_detach_buffer(dup, &got, &got_size);
    tc_expect_class(rc, MPI_ERR_BUFFER, "detaching a communicator's buffer twice");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    rc = MPI_Comm_attach_buffer(MPI_COMM_NULL, buf, bytes);
    tc_expect_class(rc, MPI_ERR_COMM, "attaching a buffer to MPI_COMM_NULL");
    CHECK_MPI(MPI_Comm_free(&dup));
    free(buf);
    free(msg);
    free(in);
}

static void automatic(void)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int n = 1 << 20, i, rc, got_size = -1;
    int *msg = (int *)malloc(sizeof(int) * n), *in = (int *)malloc(sizeof(int) * n);
    void *got = NULL;
    char small[64];
    for (i = 0; i < n; i++)
        msg[i] = i ^ rank;
    CHECK_MPI(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0));
    rc = MPI_Buffer_attach(small, sizeof small);
    tc_expect_class(rc, MPI_ERR_BUFFER, "attaching a second process buffer");
    CHECK_MPI(MPI_Bsend(msg, n, MPI_INT, right, 4, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Bsend(msg, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(in, n, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_EQ((n - 1) ^ left, in[n - 1], "4 MiB through the automatic buffer");
    CHECK_MPI(MPI_Recv(in, 1, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Buffer_flush());
    CHECK_MPI(MPI_Buffer_detach(&got, &got_size));
    CHECK(got == MPI_BUFFER_AUTOMATIC, "detach did not give MPI_BUFFER_AUTOMATIC");
    CHECK_EQ(0, got_size, "size of an automatic buffer");
    got = &got_size;
    got_size = 1;
    CHECK_MPI(MPI_Buffer_detach(&got, &got_size));
    CHECK(got == NULL && got_size == 0, "detaching the process buffer with none attached gives NULL and 0");
    free(msg);
    free(in);
}

static void nonblocking_flush(void)
{
    MPI_Comm dup;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int n = 50000, i; /* 200 KB: beyond the eager limit, so delivery needs the receiver */
    int bytes = n * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    int *x = (int *)malloc(sizeof(int) * n), *y = (int *)malloc(sizeof(int) * n);
    char *pbuf = (char *)malloc(bytes), *cbuf = (char *)malloc(bytes);
    MPI_Request fl[2];
    void *got;
    int got_size;
    for (i = 0; i < n; i++)
        x[i] = rank + i;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Buffer_attach(pbuf, bytes));
    CHECK_MPI(MPI_Comm_attach_buffer(dup, cbuf, bytes));
    CHECK_MPI(MPI_Bsend(x, n, MPI_INT, right, 6, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Bsend(x, n, MPI_INT, right, 7, dup));
    /* Every rank starts both flushes before receiving anything: a flush that
     * waited inside the call would wait for ever. */
    CHECK_MPI(MPI_Buffer_iflush(&fl[0]));
    CHECK_MPI(MPI_Comm_iflush_buffer(dup, &fl[1]));
    CHECK_MPI(MPI_Recv(y, n, MPI_INT, left, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_EQ(left + n - 1, y[n - 1], "message through the process buffer");
    CHECK_MPI(MPI_Recv(y, n, MPI_INT, left, 7, dup, MPI_STATUS_IGNORE));
    CHECK_EQ(left + n - 1, y[n - 1], "message through the communicator buffer");
    CHECK_MPI(MPI_Waitall(2, fl, MPI_STATUSES_IGNORE));
    CHECK(fl[0] == MPI_REQUEST_NULL && fl[1] == MPI_REQUEST_NULL, "flush requests freed");
    CHECK_MPI(MPI_Comm_detach_buffer(dup, &got, &got_size));
    CHECK(got == cbuf, "communicator buffer address");
    CHECK_MPI(MPI_Buffer_detach(&got, &got_size));
    CHECK(got == pbuf, "process buffer address");
    CHECK_MPI(MPI_Comm_free(&dup));
    free(x);
    free(y);
    free(pbuf);
    free(cbuf);
}

static void freed_with_buffer(void)
{
    MPI_Comm a, b;
    int right = (rank + 1) % size, left = (rank + size - 1) % size, x = rank, y = -1, rc;
    char buf[MPI_BSEND_OVERHEAD + 64];
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK_MPI(MPI_Comm_attach_buffer(a, buf, sizeof buf));
    CHECK_MPI(MPI_Bsend(&x, 1, MPI_INT, right, 8, a));
    CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, left, 8, a, MPI_STATUS_IGNORE));
    CHECK_EQ(left, y, "message before the free");
    CHECK_MPI(MPI_Comm_free(&a));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &b));
    CHECK_MPI(MPI_Comm_set_errhandler(b, MPI_ERRORS_RETURN));
    rc = MPI_Bsend(&x, 1, MPI_INT, right, 8, b);
    tc_expect_class(rc, MPI_ERR_BUFFER, "MPI_Bsend on a new communicator after one with a buffer was freed");
    CHECK_MPI(MPI_Comm_free(&b));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    per_comm();
    automatic();
    nonblocking_flush();
    freed_with_buffer();
    return tc_finish(NAME);
}

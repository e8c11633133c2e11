/*
 * secret_hidden.c - after MPI_Init the job's secret is nowhere a process
 * the rank starts could find it: not in the environment
 * (TANDEM_JOB_SECRET), and the pipe the launcher handed it over in
 * (TANDEM_JOB_SECRET_FD) is closed. A shell the rank starts sees no secret.
 *
 * Ranks: any.
 */
#define _GNU_SOURCE
#include "check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME "secret_hidden"

int main(int argc, char **argv) {
    const char *fd_text = getenv("TANDEM_JOB_SECRET_FD");
    int fd = fd_text ? atoi(fd_text) : -1;
    struct stat before, after;
    int open_before = fd >= 0 && fstat(fd, &before) == 0 && S_ISFIFO(before.st_mode);
    MPI_Init(&argc, &argv);
    CHECK(fd >= 0, "the launcher hands the secret over in a pipe");
    CHECK(open_before, "the secret's pipe is open before MPI_Init");
    CHECK(getenv("TANDEM_JOB_SECRET") == NULL, "the secret is in the environment");
    /* MPI_Init may have opened something else under the same number. */
    CHECK(fstat(fd, &after) != 0 || after.st_ino != before.st_ino,
          "the secret's pipe is still open after MPI_Init");
    /* A child inherits the environment. */
    CHECK(system("test -z \"$TANDEM_JOB_SECRET\"") == 0, "a child of the rank finds the secret");
    tc_finish(NAME);
    return 0;
}

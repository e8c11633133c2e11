/*
 * rseq_registration.c - whether glibc registered restartable sequences in
 * this rank (the launcher's `rseq` parameter may ask it not to).
 *
 * Each rank prints, after MPI_Init,
 *     rseq rank R size S
 * where S is glibc's __rseq_size (0: not registered; -1: this C library
 * does not say).
 */
#include "check.h"

extern const unsigned int __rseq_size __attribute__((weak));

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long size = &__rseq_size ? (long)__rseq_size : -1;
    printf("rseq rank %d size %ld\n", tc_rank(), size);
    return tc_finish("rseq_registration");
}

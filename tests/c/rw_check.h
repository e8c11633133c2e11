/*
 * rw_check.h - the failure check of the RWAPI test programs, which cannot
 * use check.h (it reports through MPI): prints the node, the message and
 * the place, then exits non-zero. The program keeps its node number in
 * `me` (-1 until rwapi_init).
 */
#ifndef TANDEM_TESTS_RW_CHECK_H
#define TANDEM_TESTS_RW_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int me = -1;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "node %d: FAIL ", me);                        \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, " [%s:%d]\n", __FILE__, __LINE__);             \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

#endif

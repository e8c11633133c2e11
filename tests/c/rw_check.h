/*
 * rw_check.h - the failure check of the RWAPI test programs, which cannot
 * use check.h (it reports through MPI): prints the node, the message and
 * the place, then exits non-zero. The program keeps its node number in
 * `me` (-1 until rwapi_init). Also a clock, and computing without calls.
 */
#ifndef TANDEM_TESTS_RW_CHECK_H
#define TANDEM_TESTS_RW_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

/* Seconds on a monotonic clock. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Computes for `seconds` without calling RWAPI. */
static inline void compute_for(double seconds)
{
    double t0 = now();
    volatile double x = 1.0;
    while (now() - t0 < seconds)
        x = x * 1.0000001;
}

#endif

/*
 * memcpy_bw.c - what one core's memcpy reaches on 4 MiB buffers: the
 * yardstick for shared-memory bandwidth (a ping-pong cannot move data faster
 * than a copy). No MPI.
 *
 *     cc -O2 examples/memcpy_bw.c -o memcpy_bw && ./memcpy_bw [BYTES]
 *
 * Prints the median over 21 rounds of 20 copies each.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : (size_t)4 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (a == NULL || b == NULL || n < 64)
        return 1;
    memset(a, 1, n);
    memset(b, 2, n);
    double t[21];
    for (int r = 0; r < 21; r++) {
        double t0 = now();
        for (int i = 0; i < 20; i++) {
            memcpy(b, a, n);
            a[i] = b[n - 1 - i];
        }
        t[r] = (now() - t0) / 20;
    }
    qsort(t, 21, sizeof t[0], cmp);
    printf("memcpy %zu bytes: median %.1f us = %.0f MB/s\n", n, t[10] * 1e6, n / t[10] / 1e6);
    free(a);
    free(b);
    return 0;
}

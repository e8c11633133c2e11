/*
 * signal_cost.c - what one signal costs the thread it interrupts, when it
 * comes from a thread on another CPU: the price the `signal` progress
 * policy pays once per rendezvous it answers while the application
 * computes. No MPI.
 *
 *     cc -O2 -pthread examples/signal_cost.c -o signal_cost && ./signal_cost
 *
 * A computing thread pinned to the second usable CPU runs a fixed loop
 * alone, then again while a thread on the first CPU sends it a real-time
 * signal (empty handler) every 200 us; the difference divided by the
 * signals handled is the cost per signal. Prints the median of 5 rounds.
 * Needs two usable CPUs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 5
#define LOOP 100000000L

static volatile long handled;
static volatile int sending;
static pid_t target;
static int cpus[2];

static void on_signal(int sig)
{
    (void)sig;
    handled++;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *signaller(void *arg)
{
    (void)arg;
    pin(cpus[0]);
    struct timespec pause = {0, 200000};
    while (sending) {
        nanosleep(&pause, NULL);
        syscall(SYS_tgkill, getpid(), target, SIGRTMIN);
    }
    return NULL;
}

static double compute(void)
{
    volatile double x = 1.0;
    double t0 = now();
    for (long i = 0; i < LOOP; i++)
        x = x * 1.0000001 + 1e-9;
    return now() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    if (n < 2) {
        fprintf(stderr, "signal_cost: needs two usable CPUs\n");
        return 1;
    }
    signal(SIGRTMIN, on_signal);
    pin(cpus[1]);
    target = (pid_t)syscall(SYS_gettid);
    double cost[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double alone = compute();
        handled = 0;
        sending = 1;
        pthread_t th;
        pthread_create(&th, NULL, signaller, NULL);
        double with = compute();
        sending = 0;
        pthread_join(th, NULL);
        cost[r] = handled > 0 ? (with - alone) / handled * 1e6 : 0.0;
    }
    qsort(cost, ROUNDS, sizeof cost[0], cmp);
    printf("signal from another CPU: %.2f us of the interrupted thread's time (median of %d, range %.2f-%.2f)\n",
           cost[ROUNDS / 2], ROUNDS, cost[0], cost[ROUNDS - 1]);
    return 0;
}

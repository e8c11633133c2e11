/*
 * replica_hook.h - the fault hook of the replication test programs.
 *
 * REPLICA_FAULTS="P:I:SIG,P:I:SIG,..." makes process P of the job (its
 * TANDEM_JOB_RANK: replica P / N of rank P % N) send itself signal SIG (9 =
 * SIGKILL, 19 = SIGSTOP) when it reaches step I of the program. The library
 * knows nothing of it; the test picks the victims and the moments. A
 * negative SIG makes P sleep for -SIG milliseconds instead: it stays alive
 * but reads nothing meanwhile, as a replica on a slow or busy host does.
 *
 * REPLICA_FLIP="P:I" makes process P change bit 0 of the value it passes
 * to replica_flip_value at step I: its replicas then send different data,
 * as a corrupted or diverged replica would.
 */
#ifndef TANDEM_TESTS_REPLICA_HOOK_H
#define TANDEM_TESTS_REPLICA_HOOK_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void replica_fault_point(int step) {
    const char *plan = getenv("REPLICA_FAULTS");
    const char *me = getenv("TANDEM_JOB_RANK");
    if (!plan || !me) return;
    int process = atoi(me);
    const char *p = plan;
    while (*p) {
        int who = -1, at = -1, sig = -1;
        if (sscanf(p, "%d:%d:%d", &who, &at, &sig) == 3 && who == process && at == step) {
            if (sig < 0)
                usleep((useconds_t)(-sig) * 1000u);
            else
                raise(sig);
        }
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
}

static inline unsigned long long replica_flip_value(int step, unsigned long long v) {
    const char *plan = getenv("REPLICA_FLIP");
    const char *me = getenv("TANDEM_JOB_RANK");
    int who = -1, at = -1;
    if (plan && me && sscanf(plan, "%d:%d", &who, &at) == 2 && who == atoi(me) && at == step)
        return v ^ 1;
    return v;
}

#endif

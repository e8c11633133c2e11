/*
 * placement.c - where a rank and its progress helper thread may run.
 *
 * Each rank prints, after MPI_Init,
 *     placement rank R main CPUS helper CPUS
 * where CPUS is the Cpus_allowed_list of the main thread and of the thread
 * named "tandem-progress" ("none" without one), from /proc/self/task.
 */
#include "check.h"

#include <dirent.h>

static void allowed(const char *status_path, char *out, size_t n)
{
    snprintf(out, n, "none");
    FILE *f = fopen(status_path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            char *v = line + 18;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(out, n, "%s", v);
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = tc_rank();
    char main_cpus[256], helper_cpus[256] = "none";
    allowed("/proc/thread-self/status", main_cpus, sizeof main_cpus);
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL, "open /proc/self/task");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, "tandem-progress") == 0) {
            snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
            allowed(path, helper_cpus, sizeof helper_cpus);
        }
    }
    closedir(d);
    printf("placement rank %d main %s helper %s\n", rank, main_cpus, helper_cpus);
    fflush(stdout);
    return tc_finish("placement");
}

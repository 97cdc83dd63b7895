#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "common/cpus.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned hp_cpus_from_cfs(int64_t quota_us, int64_t period_us)
{
    if (quota_us <= 0 || period_us <= 0)
        return 0;
    int64_t cpus = (quota_us + period_us - 1) / period_us;
    return cpus > 0 && cpus < 1 << 20 ? (unsigned)cpus : 0;
}

unsigned hp_cpus_from_cpu_max(const char *line)
{
    char quota[32];
    int64_t period = 0;
    if (!line || sscanf(line, "%31s %" SCNd64, quota, &period) != 2 || strcmp(quota, "max") == 0)
        return 0;
    char *end = NULL;
    long long q = strtoll(quota, &end, 10);
    if (end == quota || *end != '\0')
        return 0;
    return hp_cpus_from_cfs(q, period);
}

/* The first line of a small file, or false. */
static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok;
}

/* cgroup v1's quota under a cpu controller directory, or 0. */
static unsigned cfs_cpus(const char *dir)
{
    char path[600], quota[64], period[64];
    snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
    if (!read_line(path, quota, sizeof(quota)))
        return 0;
    snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
    if (!read_line(path, period, sizeof(period)))
        return 0;
    return hp_cpus_from_cfs(strtoll(quota, NULL, 10), strtoll(period, NULL, 10));
}

/* The quota of this process's own cgroup. Inside a container the cgroup namespace makes it the root of
 * /sys/fs/cgroup; outside one (a host, CI) the process's cgroup paths from /proc/self/cgroup are read. */
static unsigned cgroup_cpus(void)
{
    char line[512], path[600];
    if (read_line("/sys/fs/cgroup/cpu.max", line, sizeof(line)))
        return hp_cpus_from_cpu_max(line);
    unsigned cpus = cfs_cpus("/sys/fs/cgroup/cpu");
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (!cpus && f && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        /* "ID:CONTROLLERS:PATH"; v2 has ID 0 and no controllers. */
        char *controllers = strchr(line, ':'), *cg = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!cg)
            continue;
        *cg++ = '\0';
        controllers++;
        if (strcmp(line, "0") == 0 && *controllers == '\0') {
            char max[128];
            snprintf(path, sizeof(path), "/sys/fs/cgroup%s/cpu.max", cg);
            if (read_line(path, max, sizeof(max)))
                cpus = hp_cpus_from_cpu_max(max);
        } else if (strcmp(controllers, "cpu") == 0 || strstr(controllers, "cpu,") == controllers ||
                   strstr(controllers, ",cpu,") || (strlen(controllers) > 4 &&
                                                    strcmp(controllers + strlen(controllers) - 4, ",cpu") == 0)) {
            snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s", controllers, cg);
            cpus = cfs_cpus(path);
            if (!cpus) {
                snprintf(path, sizeof(path), "/sys/fs/cgroup/cpu%s", cg);
                cpus = cfs_cpus(path);
            }
        }
    }
    if (f)
        fclose(f);
    return cpus;
}

unsigned hp_usable_cpus(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned cpus = online > 0 ? (unsigned)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 && (unsigned)CPU_COUNT(&set) < cpus)
        cpus = (unsigned)CPU_COUNT(&set);
    unsigned quota = cgroup_cpus();
    if (quota > 0 && quota < cpus)
        cpus = quota;
    return cpus > 0 ? cpus : 1;
}

#include "common/cpus.h"

#include "common/cgroup.h"

#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned hp_cpus_from_cfs(int64_t quota_us, int64_t period_us)
{
    if (quota_us <= 0 || period_us <= 0)
        return 0;
    /* Rounded up without quota + period - 1, which could overflow. */
    int64_t cpus = quota_us / period_us + (quota_us % period_us != 0);
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

/* The smaller of two counts where 0 means no limit. */
static unsigned tighter(unsigned a, unsigned b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* A cgroup directory's own limit: v2's cpu.max, or v1's cfs quota and period. 0: none there. */
static uint64_t dir_cpus(const char *dir, bool v2)
{
    char line[128], period[64];
    if (v2)
        return hp_cgroup_read(dir, "cpu.max", line, sizeof(line)) ? hp_cpus_from_cpu_max(line) : 0;
    if (!hp_cgroup_read(dir, "cpu.cfs_quota_us", line, sizeof(line)) ||
        !hp_cgroup_read(dir, "cpu.cfs_period_us", period, sizeof(period)))
        return 0;
    return hp_cpus_from_cfs(strtoll(line, NULL, 10), strtoll(period, NULL, 10));
}

unsigned hp_cpus_from_cgroup(const char *fs_root, const char *proc_cgroup)
{
    return (unsigned)hp_cgroup_limit(fs_root, proc_cgroup, "cpu", dir_cpus);
}

unsigned hp_usable_cpus(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned cpus = online > 0 ? (unsigned)online : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 && (unsigned)CPU_COUNT(&set) < cpus)
        cpus = (unsigned)CPU_COUNT(&set);
    /* Inside a container the cgroup namespace shows the container's own cgroup as "/", at the root. */
    cpus = tighter(cpus, hp_cpus_from_cgroup("/sys/fs/cgroup", "/proc/self/cgroup"));
    return cpus > 0 ? cpus : 1;
}

#include "common/cpus.h"

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

/* The first line of a small file. */
static bool read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok;
}

/* The smaller of two counts where 0 means no limit. */
static unsigned tighter(unsigned a, unsigned b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* dir/file into out; false when it does not fit (then nothing is read). */
static bool join(char *out, size_t len, const char *dir, const char *file)
{
    int n = snprintf(out, len, "%s/%s", dir, file);
    return n >= 0 && (size_t)n < len;
}

/* A cgroup directory's own limit: v2's cpu.max, or v1's cfs quota and period. 0: none there. */
static unsigned dir_cpus(const char *dir, bool v2)
{
    char path[PATH_MAX + 32], line[128], period[64];
    if (v2)
        return join(path, sizeof(path), dir, "cpu.max") && read_line(path, line, sizeof(line))
                   ? hp_cpus_from_cpu_max(line)
                   : 0;
    if (!join(path, sizeof(path), dir, "cpu.cfs_quota_us") || !read_line(path, line, sizeof(line)))
        return 0;
    if (!join(path, sizeof(path), dir, "cpu.cfs_period_us") || !read_line(path, period, sizeof(period)))
        return 0;
    return hp_cpus_from_cfs(strtoll(line, NULL, 10), strtoll(period, NULL, 10));
}

/* The tightest limit from base + cgroup up to base: a parent's quota (a systemd slice's CPUQuota=, a
 * Kubernetes pod's over its containers) binds its children too. */
static unsigned walk_up(const char *base, const char *cgroup, bool v2)
{
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s%s", base, strcmp(cgroup, "/") == 0 ? "" : cgroup);
    if (n < 0 || (size_t)n >= sizeof(dir))
        return 0;
    size_t floor = strlen(base);
    unsigned cpus = 0;
    for (;;) {
        cpus = tighter(cpus, dir_cpus(dir, v2));
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < floor)
            break;
        *slash = '\0';
    }
    return cpus;
}

/* Whether a v1 controller list ("cpu", "cpu,cpuacct", "cpuacct,cpu") names the cpu controller. */
static bool has_cpu(const char *controllers)
{
    size_t len = strlen(controllers);
    for (const char *p = controllers; p < controllers + len;) {
        size_t word = strcspn(p, ",");
        if (word == 3 && strncmp(p, "cpu", 3) == 0)
            return true;
        p += word + 1;
    }
    return false;
}

unsigned hp_cpus_from_cgroup(const char *fs_root, const char *proc_cgroup)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    unsigned cpus = 0;
    char *line = NULL, base[PATH_MAX];
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        /* "ID:CONTROLLERS:PATH": v2 has ID 0 and no controllers; v1 names its controllers. */
        char *controllers = strchr(line, ':'), *cgroup = controllers ? strchr(controllers + 1, ':') : NULL;
        if (!cgroup)
            continue;
        *controllers++ = '\0';
        *cgroup++ = '\0';
        if (strcmp(line, "0") == 0 && *controllers == '\0') {
            cpus = tighter(cpus, walk_up(fs_root, cgroup, true));
        } else if (has_cpu(controllers)) {
            /* The hierarchy is mounted under its controller list, with "cpu" usually a link to it. */
            unsigned here = join(base, sizeof(base), fs_root, controllers) ? walk_up(base, cgroup, false) : 0;
            if (here == 0 && join(base, sizeof(base), fs_root, "cpu"))
                here = walk_up(base, cgroup, false);
            cpus = tighter(cpus, here);
        }
    }
    free(line);
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
    /* Inside a container the cgroup namespace shows the container's own cgroup as "/", at the root. */
    cpus = tighter(cpus, hp_cpus_from_cgroup("/sys/fs/cgroup", "/proc/self/cgroup"));
    return cpus > 0 ? cpus : 1;
}

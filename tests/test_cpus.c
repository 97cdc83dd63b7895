/* common/cpus.h: the CPUs "one per core" pools are sized by. The cgroup quota lines parse as the kernel
 * writes them; the quota is found in fixture cgroup trees (v2 nested, a parent's limit, v1, hybrid, a
 * container's namespace, a long path); the affinity mask bounds the count (a pod pinned to some CPUs). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpus.h"
#include "cgroup_fixture.h"
#include "tap.h"


/* hp_cpus_from_cgroup over the fixture tree, with this /proc/self/cgroup content. */
static unsigned quota_of(const char *tree, const char *proc)
{
    char fs[512], proc_path[512];
    return fixture_tree(tree, proc, fs, sizeof(fs), proc_path, sizeof(proc_path)) ? hp_cpus_from_cgroup(fs, proc_path) : 9999;
}

int main(void)
{
    static const struct { const char *line; unsigned want; } lines[] = {
        {"max 100000\n", 0},     /* no limit */
        {"400000 100000\n", 4},  /* 4 CPUs */
        {"150000 100000\n", 2},  /* 1.5 CPUs: two threads can use the time */
        {"50000 100000\n", 1},   /* half a CPU: still one */
        {"100000 100000", 1},
        {"200000 50000\n", 4},
        {"", 0}, {"garbage\n", 0}, {"12x 100000\n", 0}, {"100000 0\n", 0}, {"-1 100000\n", 0},
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        unsigned got = hp_cpus_from_cpu_max(lines[i].line);
        tap_ok(got == lines[i].want, "cpu.max \"%.*s\": %u CPUs (want %u)", (int)strcspn(lines[i].line, "\n"),
               lines[i].line, got, lines[i].want);
    }
    tap_ok(hp_cpus_from_cfs(-1, 100000) == 0 && hp_cpus_from_cfs(200000, 100000) == 2 &&
               hp_cpus_from_cfs(250000, 100000) == 3 && hp_cpus_from_cfs(100000, 0) == 0,
           "cgroup v1 quota and period: -1 is no limit, 2.5 CPUs round up to 3");

    fixture_begin("cpus");
    /* Fixture trees, each under its own directory, with the /proc/self/cgroup a process in it would read. */
    static const struct {
        const char *tree;
        struct { const char *path, *content; } files[2];
        const char *proc;
        unsigned want;
        const char *what;
    } trees[] = {
        {"a", {{"x/y/cpu.max", "300000 100000\n"}, {"x/cpu.max", "max 100000\n"}}, "0::/x/y\n", 3,
         "cgroup v2: the process's own cpu.max, 3 CPUs"},
        /* A systemd slice's CPUQuota=, a pod over its container: the tighter wins. */
        {"b", {{"slice/cpu.max", "200000 100000\n"}, {"slice/svc/cpu.max", "max 100000\n"}}, "0::/slice/svc\n", 2,
         "cgroup v2: a parent's quota binds a child without one"},
        {"b2", {{"slice/cpu.max", "800000 100000\n"}, {"slice/svc/cpu.max", "250000 100000\n"}},
         "0::/slice/svc\n", 3, "cgroup v2: the child's tighter quota wins over the parent's"},
        {"c", {{"s/cpu.max", "max 100000\n"}}, "0::/s\n", 0, "cgroup v2: no quota anywhere is no limit"},
        /* A container's cgroup namespace: its cgroup is "/" at the root. */
        {"d", {{"cpu.max", "100000 100000\n"}}, "0::/\n", 1, "cgroup v2 in a container: the root's cpu.max"},
        /* The cpu controller mounted with cpuacct; named hierarchies and other controllers ignored. */
        {"e", {{"cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us", "150000\n"},
               {"cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us", "100000\n"}},
         "12:name=systemd:/kubepods/pod1/c1\n5:cpu,cpuacct:/kubepods/pod1/c1\n3:memory:/kubepods/pod1/c1\n", 2,
         "cgroup v1: cpu,cpuacct's cfs quota, 1.5 CPUs round up to 2"},
        {"f", {{"cpu/x/cpu.cfs_quota_us", "-1\n"}, {"cpu/x/cpu.cfs_period_us", "100000\n"}}, "4:cpuacct,cpu:/x\n", 0,
         "cgroup v1: quota -1 is no limit (through the cpu link)"},
        /* Hybrid: v2's line with no limit, v1's cpu with one. */
        {"g", {{"cpu/job/cpu.cfs_quota_us", "400000\n"}, {"cpu/job/cpu.cfs_period_us", "100000\n"}},
         "0::/job\n2:cpu:/job\n", 4, "hybrid v1 and v2: v1's quota is found"},
    };
    for (size_t t = 0; t < sizeof(trees) / sizeof(trees[0]); t++) {
        for (size_t i = 0; i < 2 && trees[t].files[i].path; i++) {
            char rel[300];
            snprintf(rel, sizeof(rel), "%s/%s", trees[t].tree, trees[t].files[i].path);
            fixture_put(rel, trees[t].files[i].content);
        }
        unsigned got = quota_of(trees[t].tree, trees[t].proc);
        tap_ok(got == trees[t].want, "%s (%u)", trees[t].what, got);
    }
    /* A path longer than any fixed line buffer. */
    char longpath[700] = "", rel[800], proc[800];
    for (int i = 0; i < 60; i++)
        strcat(longpath, "/directory");
    snprintf(rel, sizeof(rel), "h%s/cpu.max", longpath);
    fixture_put(rel, "500000 100000\n");
    snprintf(proc, sizeof(proc), "0::%s\n", longpath);
    tap_ok(quota_of("h", proc) == 5, "a cgroup path of %zu characters", strlen(longpath));
    tap_ok(hp_cpus_from_cgroup(fixture_root, "/nonexistent/cgroup") == 0, "no /proc/self/cgroup: no limit");
    fixture_end();

    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned all = hp_usable_cpus();
    tap_ok(all >= 1 && (online < 1 || all <= (unsigned)online), "usable CPUs %u, between 1 and the %ld online",
           all, online);
    unsigned quota = hp_cpus_from_cgroup("/sys/fs/cgroup", "/proc/self/cgroup");

    /* Pinned to one CPU of the current mask, then to two (where there are two), then back. */
    cpu_set_t saved, one;
    tap_ok(sched_getaffinity(0, sizeof(saved), &saved) == 0, "the affinity mask is readable");
    tap_ok(all == (unsigned)CPU_COUNT(&saved) || (quota > 0 && all == quota && quota < (unsigned)CPU_COUNT(&saved)),
           "usable CPUs = the mask's %d, or this process's cgroup quota (%u) where it is smaller",
           CPU_COUNT(&saved), quota);
    int first = -1, second = -1;
    for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
        if (CPU_ISSET(c, &saved)) {
            if (first < 0)
                first = c;
            else
                second = c;
        }
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    tap_ok(sched_setaffinity(0, sizeof(one), &one) == 0 && hp_usable_cpus() == 1,
           "pinned to CPU %d alone: 1 usable CPU", first);
    if (second >= 0) {
        CPU_SET(second, &one);
        unsigned two = sched_setaffinity(0, sizeof(one), &one) == 0 ? hp_usable_cpus() : 0;
        tap_ok(two >= 1 && two <= 2, "pinned to CPUs %d and %d: %u usable (2, or 1 under a quota of 1)", first,
               second, two);
    } else {
        tap_ok(hp_usable_cpus() == 1, "one CPU in the mask: 1 usable CPU");
    }
    tap_ok(sched_setaffinity(0, sizeof(saved), &saved) == 0 && hp_usable_cpus() == all,
           "the mask restored: %u usable CPUs again", all);
    return tap_done();
}

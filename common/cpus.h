/* How many CPUs this process may use: what "one per core" settings size their thread pools by.
 *
 * sysconf(_SC_NPROCESSORS_ONLN) counts the machine's CPUs. In a container that is the node's, not the pod's:
 * a pod given 4 CPUs on a 128-core node would start 128 threads per pool, which then contend for the 4
 * CPUs' worth of time the kernel grants it. This takes the smaller of the affinity mask (cpusets, taskset,
 * Kubernetes' static CPU manager) and the cgroup's CPU quota rounded up (cgroup v2 cpu.max, or v1
 * cpu.cfs_quota_us / cpu.cfs_period_us): what runtimes such as Go's and the JVM's also read. None of the
 * project's libraries does this (glibc's get_nprocs() reads neither), hence this file. */
#ifndef HP_COMMON_CPUS_H
#define HP_COMMON_CPUS_H

#include <stdint.h>

/* At least 1. Reads the affinity mask and a few small files at each call: callers keep the result. */
unsigned hp_usable_cpus(void);

/* The CPUs a cgroup v2 "cpu.max" line grants ("QUOTA PERIOD", or "max PERIOD" for no limit), rounded up;
 * 0 for no limit or a line it cannot read. Exposed for tests. */
unsigned hp_cpus_from_cpu_max(const char *line);

/* The same from cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us (quota -1: no limit). */
unsigned hp_cpus_from_cfs(int64_t quota_us, int64_t period_us);

/* The tightest CPU quota over the cgroups a /proc/PID/cgroup file lists, read under fs_root (normally
 * /sys/fs/cgroup): for cgroup v2 each cpu.max from the process's cgroup up to the root, for v1 each cfs
 * quota in the cpu hierarchy likewise. 0: no quota anywhere. hp_usable_cpus() reads /proc/self/cgroup;
 * tests give fixture trees. */
unsigned hp_cpus_from_cgroup(const char *fs_root, const char *proc_cgroup);

#endif

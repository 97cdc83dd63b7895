/* The limits a process's cgroups set: the tightest value of one limit file over the cgroups that
 * /proc/self/cgroup lists, from the process's own cgroup up to the root (a parent's limit, a systemd
 * slice's or a Kubernetes pod's over its containers, binds its children too). cgroup v2 (the unified
 * hierarchy) and v1 (one hierarchy per controller) both. Used for the CPU quota (common/cpus.h) and the
 * memory limit (common/budget.h); what runtimes such as Go's and the JVM's also read, and none of the
 * project's libraries does (glibc reads neither). */
#ifndef HP_COMMON_CGROUP_H
#define HP_COMMON_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A cgroup directory's own limit (v2: the unified hierarchy's file; v1: the controller's); 0: none there. */
typedef uint64_t (*hp_cgroup_dir_limit)(const char *dir, bool v2);

/* The smallest non-zero limit dir_limit finds over the cgroups a /proc/PID/cgroup file lists, read under
 * fs_root (normally /sys/fs/cgroup); v1_controller names the v1 hierarchy to read ("cpu", "memory"). 0: no
 * limit anywhere. */
uint64_t hp_cgroup_limit(const char *fs_root, const char *proc_cgroup, const char *v1_controller,
                         hp_cgroup_dir_limit dir_limit);

/* The first line of a small file under dir; false when there is none (then buf is unspecified). */
bool hp_cgroup_read(const char *dir, const char *file, char *buf, size_t len);

#endif

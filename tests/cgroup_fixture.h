/* Fixture cgroup trees for the tests of common/cgroup.h's users (test_cpus, test_budget): limit files under a
 * temporary root, and the /proc/self/cgroup that a process in them would read. */
#ifndef HP_TEST_CGROUP_FIXTURE_H
#define HP_TEST_CGROUP_FIXTURE_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"

static char fixture_root[256];

static void fixture_begin(const char *name)
{
    snprintf(fixture_root, sizeof(fixture_root), "/tmp/hdrpostd-test-%s-%d", name, (int)getpid());
    mkdir(fixture_root, 0755);
}

/* root/rel (its directories made) with the given content. */
static void fixture_put(const char *rel, const char *content)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", fixture_root, rel);
    for (char *p = path + strlen(fixture_root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            tap_diag("mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(content, f);
        fclose(f);
    }
}

/* The tree's file system root (root/tree) in fs, and in proc_path a file holding proc, as /proc/self/cgroup
 * would. False when the file cannot be written. */
static bool fixture_tree(const char *tree, const char *proc, char *fs, size_t fs_size, char *proc_path,
                         size_t proc_size)
{
    snprintf(fs, fs_size, "%s/%s", fixture_root, tree);
    snprintf(proc_path, proc_size, "%s/%s.cgroup", fixture_root, tree);
    FILE *f = fopen(proc_path, "w");
    if (!f)
        return false;
    fputs(proc, f);
    fclose(f);
    return true;
}

static void fixture_end(void)
{
    char rm[300];
    snprintf(rm, sizeof(rm), "rm -rf %s", fixture_root);
    if (system(rm) != 0)
        tap_diag("could not remove %s", fixture_root);
}

#endif

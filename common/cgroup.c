#include "common/cgroup.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool hp_cgroup_read(const char *dir, const char *file, char *buf, size_t len)
{
    char path[PATH_MAX + 64];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof(path))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok;
}

/* The smaller of two limits where 0 means none. */
static uint64_t tighter(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* The tightest limit from base + cgroup up to base. */
static uint64_t walk_up(const char *base, const char *cgroup, bool v2, hp_cgroup_dir_limit dir_limit)
{
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s%s", base, strcmp(cgroup, "/") == 0 ? "" : cgroup);
    if (n < 0 || (size_t)n >= sizeof(dir))
        return 0;
    size_t floor = strlen(base);
    uint64_t limit = 0;
    for (;;) {
        limit = tighter(limit, dir_limit(dir, v2));
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < floor)
            break;
        *slash = '\0';
    }
    return limit;
}

/* Whether a v1 controller list ("cpu", "cpu,cpuacct", "cpuacct,cpu") names the controller. */
static bool has_controller(const char *controllers, const char *name)
{
    size_t len = strlen(controllers), want = strlen(name);
    for (const char *p = controllers; p < controllers + len;) {
        size_t word = strcspn(p, ",");
        if (word == want && strncmp(p, name, want) == 0)
            return true;
        p += word + 1;
    }
    return false;
}

uint64_t hp_cgroup_limit(const char *fs_root, const char *proc_cgroup, const char *v1_controller,
                         hp_cgroup_dir_limit dir_limit)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    uint64_t limit = 0;
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
            limit = tighter(limit, walk_up(fs_root, cgroup, true, dir_limit));
        } else if (has_controller(controllers, v1_controller)) {
            /* The hierarchy is mounted under its controller list, with the controller's name usually a
             * link to it. */
            int n = snprintf(base, sizeof(base), "%s/%s", fs_root, controllers);
            uint64_t here = n > 0 && (size_t)n < sizeof(base) ? walk_up(base, cgroup, false, dir_limit) : 0;
            n = snprintf(base, sizeof(base), "%s/%s", fs_root, v1_controller);
            if (here == 0 && n > 0 && (size_t)n < sizeof(base))
                here = walk_up(base, cgroup, false, dir_limit);
            limit = tighter(limit, here);
        }
    }
    free(line);
    fclose(f);
    return limit;
}

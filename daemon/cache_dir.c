#include "daemon/cache_dir.h"

#include <stdio.h>
#include <string.h>

static const char *set(const char *(*env)(const char *), const char *name)
{
    const char *v = env(name);
    return v && v[0] ? v : NULL;
}

static bool fits(int n, size_t len)
{
    return n > 0 && (size_t)n < len;
}

bool hp_cache_dir_pipeline_path(const char *(*env)(const char *name), bool root, char *out, size_t len)
{
    const char *dir = set(env, "CACHE_DIRECTORY");
    size_t first = dir ? strcspn(dir, ":") : 0;
    if (first)
        return fits(snprintf(out, len, "%.*s/pipeline.cache", (int)first, dir), len);
    if (root)
        return fits(snprintf(out, len, "/var/cache/hdrpostd/pipeline.cache"), len);
    if ((dir = set(env, "XDG_CACHE_HOME")))
        return fits(snprintf(out, len, "%s/hdrpostd/pipeline.cache", dir), len);
    if ((dir = set(env, "HOME")))
        return fits(snprintf(out, len, "%s/.cache/hdrpostd/pipeline.cache", dir), len);
    return false;
}

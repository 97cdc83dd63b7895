#include "daemon/cache_dir.h"

#include <stdio.h>
#include <string.h>

/* The variable's value when it is an absolute path; relative ones are to be ignored (the XDG Base Directory
 * Specification: relative to a service's working directory, /, they would be meaningless), and so are empty
 * ones. */
static const char *absolute(const char *(*env)(const char *), const char *name)
{
    const char *v = env(name);
    return v && v[0] == '/' ? v : NULL;
}

static bool fits(int n, size_t len)
{
    return n > 0 && (size_t)n < len;
}

bool hp_cache_dir_pipeline_path(const char *(*env)(const char *name), bool root, char *out, size_t len)
{
    /* systemd gives one absolute path per CacheDirectory= entry, colon-separated: the first absolute one. */
    const char *dir = env("CACHE_DIRECTORY");
    for (const char *at = dir; at && *at; at += strcspn(at, ":"), at += *at == ':') {
        size_t n = strcspn(at, ":");
        if (n && at[0] == '/')
            return fits(snprintf(out, len, "%.*s/pipeline.cache", (int)n, at), len);
    }
    if (root)
        return fits(snprintf(out, len, "/var/cache/hdrpostd/pipeline.cache"), len);
    if ((dir = absolute(env, "XDG_CACHE_HOME")))
        return fits(snprintf(out, len, "%s/hdrpostd/pipeline.cache", dir), len);
    if ((dir = absolute(env, "HOME")))
        return fits(snprintf(out, len, "%s/.cache/hdrpostd/pipeline.cache", dir), len);
    return false;
}

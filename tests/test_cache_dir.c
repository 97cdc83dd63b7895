/* daemon/cache_dir.h: where the pipeline cache goes by default (issue 35: a casual run as a user wrote
 * /var/cache/hdrpostd). Each rule of the order, with the environment a table. */
#include <stdio.h>
#include <string.h>

#include "daemon/cache_dir.h"
#include "tap.h"

static const char *const *vars; /* NAME, VALUE pairs, NULL-terminated */

static const char *lookup(const char *name)
{
    for (const char *const *v = vars; v && v[0]; v += 2)
        if (strcmp(v[0], name) == 0)
            return v[1];
    return NULL;
}

static void expect(const char *what, const char *const *env, bool root, const char *want)
{
    vars = env;
    char out[512] = "";
    bool got = hp_cache_dir_pipeline_path(lookup, root, out, sizeof out);
    if (want)
        tap_ok(got && strcmp(out, want) == 0, "%s: %s (got %s)", what, want, got ? out : "none");
    else
        tap_ok(!got, "%s: no cache (got %s)", what, got ? out : "none");
}

int main(void)
{
    const char *const systemd[] = {"CACHE_DIRECTORY", "/var/cache/hdrpostd", "HOME", "/home/ann", NULL};
    const char *const systemd_two[] = {"CACHE_DIRECTORY", "/var/cache/a:/var/cache/b", NULL};
    const char *const xdg[] = {"XDG_CACHE_HOME", "/home/ann/.xdg", "HOME", "/home/ann", NULL};
    const char *const home[] = {"HOME", "/home/ann", NULL};
    const char *const empty_xdg[] = {"XDG_CACHE_HOME", "", "HOME", "/home/ann", NULL};
    const char *const nothing[] = {NULL};
    const char *const relative_xdg[] = {"XDG_CACHE_HOME", "cache", "HOME", "/home/ann", NULL};
    const char *const relative_home[] = {"HOME", "ann", NULL};
    const char *const systemd_empty_first[] = {"CACHE_DIRECTORY", ":/var/cache/b", NULL};
    expect("a unit with CacheDirectory= (systemd's CACHE_DIRECTORY)", systemd, false,
           "/var/cache/hdrpostd/pipeline.cache");
    expect("CACHE_DIRECTORY wins for root too", systemd, true, "/var/cache/hdrpostd/pipeline.cache");
    expect("the first of several cache directories", systemd_two, false, "/var/cache/a/pipeline.cache");
    expect("root without systemd", home, true, "/var/cache/hdrpostd/pipeline.cache");
    expect("a user with XDG_CACHE_HOME", xdg, false, "/home/ann/.xdg/hdrpostd/pipeline.cache");
    expect("a user with HOME only", home, false, "/home/ann/.cache/hdrpostd/pipeline.cache");
    expect("an empty XDG_CACHE_HOME counts as unset", empty_xdg, false, "/home/ann/.cache/hdrpostd/pipeline.cache");
    expect("a user with neither", nothing, false, NULL);
    expect("a relative XDG_CACHE_HOME counts as unset", relative_xdg, false, "/home/ann/.cache/hdrpostd/pipeline.cache");
    expect("a relative HOME counts as unset", relative_home, false, NULL);
    expect("CACHE_DIRECTORY's first path, past an empty entry", systemd_empty_first, false,
           "/var/cache/b/pipeline.cache");
    vars = home;
    char tiny[16];
    tap_ok(!hp_cache_dir_pipeline_path(lookup, false, tiny, sizeof tiny), "a path that does not fit: no cache");
    return tap_done();
}

/* Where the pipeline cache goes when the pipeline_cache setting is "auto" (its default): the conventions
 * a service and a user's program each follow, so that a casual run as a user writes nothing outside its
 * home. */
#ifndef HP_CACHE_DIR_H
#define HP_CACHE_DIR_H

#include <stdbool.h>
#include <stddef.h>

/* The file's path into out, from (first that applies):
 *   - CACHE_DIRECTORY, which systemd sets for a unit's CacheDirectory= (the first path of a colon-separated list);
 *   - for root, /var/cache/hdrpostd (the FHS's place for a system program's cache);
 *   - for a user, XDG_CACHE_HOME/hdrpostd, else HOME/.cache/hdrpostd (the XDG Base Directory
 *     Specification).
 * Each with "/pipeline.cache". env looks a variable up (getenv, or a test's table); an empty or relative value
 * counts as unset, as the XDG specification says. False when none applies (a user without HOME) or the path does not
 * fit: no cache, which costs warm-up time and nothing else. */
bool hp_cache_dir_pipeline_path(const char *(*env)(const char *name), bool root, char *out, size_t len);

#endif

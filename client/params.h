/* The request parameters of a run: --params FILE|JSON and repeated --set name=value, merged into the
 * query string every frame is posted with, and checked before a single frame is sent by the daemon's own
 * parser (api/frames/params_json.h, over the table of pipeline/params.c), with its messages. */
#ifndef HP_CLIENT_PARAMS_H
#define HP_CLIENT_PARAMS_H

#include <stddef.h>

#include "common/error.h"
#include "pipeline/params.h"

typedef struct hp_param_pair {
    char *name;  /* dotted: "tonemap.operator" */
    char *value; /* as text, as the query carries it */
} hp_param_pair;

typedef struct hp_param_set {
    hp_param_pair *pairs;
    size_t count, cap;
} hp_param_set;

/* --params: a JSON object (nested by stage, dotted keys, or both), inline or the path of a file. */
hp_code hp_param_set_json(hp_param_set *set, const char *file_or_json, hp_err *err);
/* --set name=value, or any pair the client adds itself: replaces an earlier value of the same name. */
hp_code hp_param_set_put(hp_param_set *set, const char *name, const char *value, hp_err *err);
hp_code hp_param_set_assign(hp_param_set *set, const char *name_eq_value, hp_err *err);
/* Takes a name out (a value the exposure lock sets instead). */
void hp_param_set_remove(hp_param_set *set, const char *name);
/* Every pair of over put into set: over wins (--set over --params). */
hp_code hp_param_set_merge(hp_param_set *set, const hp_param_set *over, hp_err *err);
/* The value set for name, or NULL. */
const char *hp_param_set_get(const hp_param_set *set, const char *name);

/* The query string (percent-encoded, without '?'), malloc'd; and the parameters it gives, checked by the
 * daemon's parser (on failure err is the daemon's own message, err->field the parameter). */
hp_code hp_param_set_query(const hp_param_set *set, char **query, hp_params *params, hp_err *err);

void hp_param_set_free(hp_param_set *set);

#endif

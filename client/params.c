#include "client/params.h"

#include "client/grow.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/frames/params_json.h"

hp_code hp_param_set_put(hp_param_set *set, const char *name, const char *value, hp_err *err)
{
    for (size_t i = 0; i < set->count; i++)
        if (!strcmp(set->pairs[i].name, name)) {
            char *v = strdup(value);
            if (!v)
                return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory");
            free(set->pairs[i].value);
            set->pairs[i].value = v;
            return HP_OK;
        }
    if (!hp_grow(&set->pairs, &set->cap, set->count, sizeof(*set->pairs), 16))
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory");
    hp_param_pair p = {.name = strdup(name), .value = strdup(value)};
    if (!p.name || !p.value) {
        free(p.name);
        free(p.value);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory");
    }
    set->pairs[set->count++] = p;
    return HP_OK;
}

hp_code hp_param_set_assign(hp_param_set *set, const char *text, hp_err *err)
{
    const char *eq = strchr(text, '=');
    if (!eq || eq == text)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "--set %s: expected NAME=VALUE, e.g. --set tonemap.operator=agx",
                       text);
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)(eq - text), text);
    return hp_param_set_put(set, name, eq + 1, err);
}

const char *hp_param_set_get(const hp_param_set *set, const char *name)
{
    for (size_t i = 0; i < set->count; i++)
        if (!strcmp(set->pairs[i].name, name))
            return set->pairs[i].value;
    return NULL;
}

/* A JSON object's leaves as dotted pairs: {"tonemap": {"operator": "agx"}} gives tonemap.operator=agx. */
static hp_code flatten(hp_param_set *set, const char *prefix, json_t *obj, hp_err *err)
{
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        char name[128], text[64];
        snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "." : "", key);
        const char *v = text;
        hp_code code = HP_OK;
        if (json_is_object(value))
            code = flatten(set, name, value, err);
        else if (json_is_string(value))
            v = json_string_value(value);
        else if (json_is_integer(value))
            snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(value));
        else if (json_is_real(value))
            snprintf(text, sizeof(text), "%.17g", json_real_value(value));
        else if (json_is_boolean(value))
            v = json_is_true(value) ? "true" : "false";
        else
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "--params: %s is %s; parameters are strings, numbers or "
                           "booleans", name, json_is_null(value) ? "null" : "an array");
        if (code != HP_OK)
            return code;
        if (!json_is_object(value) && (code = hp_param_set_put(set, name, v, err)) != HP_OK)
            return code;
    }
    return HP_OK;
}

hp_code hp_param_set_json(hp_param_set *set, const char *arg, hp_err *err)
{
    json_error_t jerr;
    bool inline_json = arg[strspn(arg, " \t\n")] == '{';
    json_t *obj = inline_json ? json_loads(arg, 0, &jerr) : json_load_file(arg, 0, &jerr);
    if (!obj || !json_is_object(obj)) {
        hp_code code = hp_fail(err, HP_ERR_INVALID_ARGUMENT, "--params %s: %s (line %d, column %d)",
                               inline_json ? "(inline)" : arg, obj ? "not a JSON object" : jerr.text, jerr.line,
                               jerr.column);
        json_decref(obj);
        return code;
    }
    /* The daemon's own JSON reading first (its messages: a key both nested and dotted, an unknown name, a
     * value of the wrong type); then the pairs the query carries. */
    hp_params check;
    hp_params_defaults(&check);
    hp_code code = hp_params_from_json(obj, &check, err);
    if (code == HP_OK)
        code = flatten(set, "", obj, err);
    json_decref(obj);
    return code;
}

void hp_param_set_remove(hp_param_set *set, const char *name)
{
    for (size_t i = 0; i < set->count; i++)
        if (!strcmp(set->pairs[i].name, name)) {
            free(set->pairs[i].name);
            free(set->pairs[i].value);
            set->pairs[i] = set->pairs[--set->count];
            return;
        }
}

hp_code hp_param_set_merge(hp_param_set *set, const hp_param_set *over, hp_err *err)
{
    for (size_t i = 0; i < over->count; i++) {
        hp_code code = hp_param_set_put(set, over->pairs[i].name, over->pairs[i].value, err);
        if (code != HP_OK)
            return code;
    }
    return HP_OK;
}

/* Appends "name=value" percent-encoded (libcurl's escaping: everything but unreserved characters). */
static bool append_pair(char **q, size_t *len, const hp_param_pair *p)
{
    char *name = curl_easy_escape(NULL, p->name, 0), *value = curl_easy_escape(NULL, p->value, 0);
    size_t need = *len + (name ? strlen(name) : 0) + (value ? strlen(value) : 0) + 3;
    char *grown = name && value ? realloc(*q, need) : NULL;
    if (grown) {
        *len += (size_t)snprintf(grown + *len, need - *len, "%s%s=%s", *len ? "&" : "", name, value);
        *q = grown;
    }
    curl_free(name);
    curl_free(value);
    return grown != NULL;
}

hp_code hp_param_set_query(const hp_param_set *set, char **query, hp_params *params, hp_err *err)
{
    char *q = calloc(1, 1);
    size_t len = 0;
    for (size_t i = 0; q && i < set->count; i++)
        if (!append_pair(&q, &len, &set->pairs[i])) {
            free(q);
            q = NULL;
        }
    if (!q)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory building the query");
    hp_params_defaults(params);
    hp_code code = hp_params_from_query_with_look(q, params, err); /* as the daemon will read it */
    if (code != HP_OK) {
        free(q);
        return code;
    }
    *query = q;
    return HP_OK;
}

void hp_param_set_free(hp_param_set *set)
{
    for (size_t i = 0; i < set->count; i++) {
        free(set->pairs[i].name);
        free(set->pairs[i].value);
    }
    free(set->pairs);
    *set = (hp_param_set){0};
}

/* The daemon's own named looks at start (daemon/looks_setup.h). */
#include "daemon/looks_setup.h"

#include <stdlib.h>
#include <string.h>

#include "api/params_json.h"
#include "common/log.h"
#include "pipeline/looks.h"

#define NAME_MAX_LEN 32

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= NAME_MAX_LEN && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* A look sets parameters, not another look: the parameter look inside one would apply nothing (a look is applied
 * first, once), so it is refused rather than silently dropped. */
static bool sets_look(const char *query)
{
    for (const char *at = query; *at;) {
        size_t key = strcspn(at, "=&");
        if (key == 4 && !strncmp(at, "look", 4))
            return true;
        at += strcspn(at, "&");
        at += *at == '&';
    }
    return false;
}

/* One entry "NAME: QUERY", trimmed, checked and added. */
static hp_code add_entry(char *entry, hp_err *err)
{
    char *colon = strchr(entry, ':');
    if (!colon)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: \"%s\" is not NAME: QUERY", entry);
    *colon = '\0';
    char *query = colon + 1;
    for (size_t n = strlen(entry); n && entry[n - 1] == ' '; n--)
        entry[n - 1] = '\0';
    query += strspn(query, " ");
    if (!name_ok(entry))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the name \"%s\" must be 1 to %d of a-z, 0-9, "
                       "'_' and '-' (a look is named in queries and URLs)", entry, NAME_MAX_LEN);
    if (sets_look(query))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the look \"%s\" sets look: a look sets "
                       "parameters, not another look", entry);
    hp_params p;
    hp_params_defaults(&p);
    hp_err why = {0};
    if (hp_params_from_query(query, &p, &why) != HP_OK)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the look \"%s\" (%s): %s", entry, query,
                       why.message);
    hp_code code = hp_looks_add(entry, query, "A look of this daemon's own (its studio_looks setting).", &why);
    if (code != HP_OK)
        return hp_fail(err, code, "studio_looks: %s", why.message);
    hp_info("look \"%s\" (studio_looks): %s", entry, query);
    return HP_OK;
}

hp_code hp_daemon_studio_looks(const char *list, hp_err *err)
{
    if (!list || !list[0])
        return HP_OK;
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "studio_looks: out of memory");
    hp_code code = HP_OK;
    for (char *entry = strtok_r(copy, ";", &save); entry && code == HP_OK; entry = strtok_r(NULL, ";", &save)) {
        entry += strspn(entry, " \t\n");
        for (size_t n = strlen(entry); n && strchr(" \t\n", entry[n - 1]); n--)
            entry[n - 1] = '\0';
        if (*entry)
            code = add_entry(entry, err);
    }
    free(copy);
    return code;
}

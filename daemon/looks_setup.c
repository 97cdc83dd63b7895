/* The daemon's own named looks at start (daemon/looks_setup.h). */
#include "daemon/looks_setup.h"

#include <stdlib.h>
#include <string.h>

#include "api/frames/output_encode.h"
#include "api/frames/params_json.h"
#include "common/log.h"
#include "pipeline/ocio_encoding.h"
#include "pipeline/params_ocio.h"
#include "pipeline/looks.h"

#define NAME_MAX_LEN 32
#define QUERY_MAX_LEN 4096 /* four OCIO names of 255 bytes, each escaped, and a few parameters more */

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= NAME_MAX_LEN && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static void trim(char *text)
{
    for (size_t n = strlen(text); n && strchr(" \t\n", text[n - 1]); n--)
        text[n - 1] = '\0';
}

/* What a request with only the look's parameters would be refused for after its parameters parse: the OCIO
 * display's encoding against output.format (a PQ display needs PNG 16 or AVIF 10/12), which api/frames/render.c checks
 * per request. */
static hp_code renders(const hp_params *p, hp_err *why)
{
    if (!hp_params_ocio_on(p))
        return HP_OK;
    hp_ocio_view_key key;
    hp_code code = hp_params_ocio_key(p, &key, why);
    if (code != HP_OK)
        return code;
    hp_ocio_encoding enc = hp_ocio_encoding_of(hp_params_ocio_config(), key.display, key.view);
    return hp_output_tag_check(p, &enc, key.display, why);
}

/* One entry "NAME: QUERY", trimmed, checked and added. */
static hp_code add_entry(char *entry, hp_err *err)
{
    char *colon = strchr(entry, ':');
    if (!colon)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: \"%s\" is not NAME: QUERY", entry);
    *colon = '\0';
    char *query = colon + 1;
    trim(entry);
    query += strspn(query, " \t\n");
    if (!name_ok(entry))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the name \"%s\" must be 1 to %d of a-z, 0-9, "
                       "'_' and '-' (a look is named in queries and URLs)", entry, NAME_MAX_LEN);
    if (strlen(query) > QUERY_MAX_LEN)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the look \"%s\" is %zu bytes of query, more "
                       "than %d", entry, strlen(query), QUERY_MAX_LEN);
    hp_params p;
    hp_params_defaults(&p);
    hp_err why = {0};
    /* Renderable as it stands: a look is a review's whole request in one word, so one that only renders with
     * more parameters (a PQ display without its output format) is a mistake to say at start. Parsed over the
     * look 1, and again over 2: a query leaves both as they were unless it sets look itself (escapes and all). */
    p.look = 1;
    if (hp_params_from_query(query, &p, &why) != HP_OK || renders(&p, &why) != HP_OK)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the look \"%s\" (%s): %s", entry, query,
                       why.message);
    /* A look sets parameters, not another look: look inside one would apply nothing (a look is applied first,
     * once), so it is refused rather than silently dropped. */
    hp_params two;
    hp_params_defaults(&two);
    two.look = 2;
    if (hp_params_from_query(query, &two, &why) != HP_OK || p.look != 1 || two.look != 2 || p.look_name[0])
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "studio_looks: the look \"%s\" sets look: a look sets "
                       "parameters, not another look", entry);
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
        trim(entry);
        if (*entry)
            code = add_entry(entry, err);
    }
    free(copy);
    return code;
}

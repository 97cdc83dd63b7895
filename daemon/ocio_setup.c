/* A studio's OpenColorIO config at start (daemon/ocio_setup.h). */
#include "daemon/ocio_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "pipeline/ocio_encoding.h"

/* The start-up log's lines about the config: an operator checks there that the daemon read the config meant. */
static void log_config(const hp_ocio_config *c)
{
    const char *name = hp_ocio_config_name(c);
    hp_info("ocio: config %s%s%s%s: %zu display(s), %zu look(s), %zu colour space(s); frames without "
            "input.colorspace are taken as \"%s\" (scene_linear)", hp_ocio_config_path(c), name[0] ? " (\"" : "",
            name, name[0] ? "\")" : "", hp_ocio_count(c, HP_OCIO_DISPLAYS), hp_ocio_count(c, HP_OCIO_LOOKS),
            hp_ocio_count(c, HP_OCIO_COLORSPACES), hp_ocio_default_input(c));
    for (size_t d = 0; d < hp_ocio_count(c, HP_OCIO_DISPLAYS); d++) {
        const char *display = hp_ocio_name(c, HP_OCIO_DISPLAYS, d);
        char views[1024] = "";
        size_t at = 0;
        for (size_t v = 0; v < hp_ocio_view_count(c, display) && at < sizeof views; v++)
            at += (size_t)snprintf(views + at, sizeof views - at, "%s\"%s\"", v ? ", " : "",
                                   hp_ocio_view_name(c, display, v));
        hp_info("ocio: display \"%s\"%s: views %s", display,
                strcmp(display, hp_ocio_default_display(c)) ? "" : " (default)", views);
        /* What each view writes, measured now (pipeline/ocio_encoding.h): the operator sees how its files will be
         * tagged, and OCIO's processors for the measure are made here, not by a request. */
        for (size_t v = 0; v < hp_ocio_view_count(c, display); v++) {
            char what[128];
            hp_ocio_encoding e = hp_ocio_encoding_of(c, display, hp_ocio_view_name(c, display, v));
            hp_info("ocio:   \"%s\" writes %s", hp_ocio_view_name(c, display, v),
                    hp_ocio_encoding_describe(&e, what, sizeof what));
        }
    }
    for (size_t l = 0; l < hp_ocio_count(c, HP_OCIO_LOOKS); l++)
        hp_info("ocio: look \"%s\"", hp_ocio_name(c, HP_OCIO_LOOKS, l));
}

hp_code hp_daemon_ocio_load(const char *path, hp_ocio_config **out, hp_err *err)
{
    *out = NULL;
    if (!path || !path[0])
        return HP_OK;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hp_code code = hp_ocio_config_load(path, out, err);
    if (code != HP_OK)
        return code;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    log_config(*out);
    hp_info("ocio: config loaded and every view built in %.0f ms",
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    return HP_OK;
}

/* One entry, "DISPLAY/VIEW" or "INPUT:DISPLAY/VIEW", into a key (unresolved). */
static hp_code parse_entry(const char *entry, hp_ocio_view_key *key, hp_err *err)
{
    memset(key, 0, sizeof *key);
    const char *colon = strchr(entry, ':'), *dv = colon ? colon + 1 : entry;
    const char *slash = strchr(dv, '/');
    if (!slash || slash == dv || !slash[1] || (colon && colon == entry))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "ocio_warm: \"%s\" is not DISPLAY/VIEW or INPUT:DISPLAY/VIEW",
                       entry);
    if (colon)
        snprintf(key->input, sizeof key->input, "%.*s", (int)(colon - entry), entry);
    snprintf(key->display, sizeof key->display, "%.*s", (int)(slash - dv), dv);
    snprintf(key->view, sizeof key->view, "%s", slash + 1);
    return HP_OK;
}

/* Makes one program for the two frame formats at 8 bits. */
static hp_code warm_one(hp_ocio_stage *stage, hp_ocio_view_key *key, hp_err *err)
{
    hp_code code = hp_ocio_resolve(hp_ocio_stage_config(stage), key, err);
    for (int f = 0; f < 2 && code == HP_OK; f++) {
        hp_ocio_entry *e = NULL;
        bool made;
        code = hp_ocio_stage_acquire(stage, key, f ? HP_PIXEL_RGBA16F : HP_PIXEL_RGBA32F, HP_TONE_OUT_RGBA8, &e,
                                     &made, err);
        hp_ocio_stage_release(stage, e);
    }
    return code;
}

/* Every display and view, from the default input. */
static hp_code warm_all(hp_ocio_stage *stage, hp_err *err)
{
    const hp_ocio_config *c = hp_ocio_stage_config(stage);
    hp_code code = HP_OK;
    for (size_t d = 0; d < hp_ocio_count(c, HP_OCIO_DISPLAYS) && code == HP_OK; d++) {
        const char *display = hp_ocio_name(c, HP_OCIO_DISPLAYS, d);
        for (size_t v = 0; v < hp_ocio_view_count(c, display) && code == HP_OK; v++) {
            hp_ocio_view_key key = {0};
            snprintf(key.display, sizeof key.display, "%s", display);
            snprintf(key.view, sizeof key.view, "%s", hp_ocio_view_name(c, display, v));
            code = warm_one(stage, &key, err);
        }
    }
    return code;
}

hp_code hp_daemon_ocio_warm(hp_ocio_stage *stage, const char *list, hp_err *err)
{
    if (!list || !list[0])
        return HP_OK;
    if (!strcmp(list, "*"))
        return warm_all(stage, err);
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "ocio_warm: out of memory");
    hp_code code = HP_OK;
    for (char *entry = strtok_r(copy, ";", &save); entry && code == HP_OK; entry = strtok_r(NULL, ";", &save)) {
        /* "A/B; C/D": the spaces around an entry are the list's, not the names'. */
        while (*entry == ' ')
            entry++;
        for (size_t n = strlen(entry); n && entry[n - 1] == ' '; n--)
            entry[n - 1] = '\0';
        if (!*entry)
            continue;
        hp_ocio_view_key key;
        code = parse_entry(entry, &key, err);
        if (code == HP_OK)
            code = warm_one(stage, &key, err);
    }
    free(copy);
    return code;
}

/* A request's OCIO parameters against the config loaded at start (pipeline/params.h, "OCIO"; docs/COLOR.md).
 *
 * The config is set once, before the daemon serves: requests read it without a lock (thread creation orders
 * the write before every reader). */
#include <stdio.h>
#include <string.h>

#include "pipeline/params.h"

static const hp_ocio_config *active;
static bool open_names; /* hdrpost: names left to the daemon (hp_params_accept_open_names) */

void hp_params_use_ocio(const hp_ocio_config *config)
{
    active = config;
}

const hp_ocio_config *hp_params_ocio_config(void)
{
    return active;
}

void hp_params_accept_open_names(bool accept)
{
    open_names = accept;
}

bool hp_params_open_names(void)
{
    return active || open_names;
}

bool hp_params_ocio_on(const hp_params *p)
{
    const hp_ocio_params *o = &p->ocio;
    return o->display[0] || o->view[0] || o->looks[0] || o->input[0];
}

/* The first OCIO field the request sets, for the error that there is no config. */
static const char *first_field(const hp_params *p)
{
    return p->ocio.display[0] ? "ocio.display"
           : p->ocio.view[0]  ? "ocio.view"
           : p->ocio.looks[0] ? "ocio.looks"
                              : "input.colorspace";
}

/* A parameter the view replaces, set away from its default: named in the refusal, so that a request never
 * believes its operator or gamma was applied. An explicit default passes: it asks for nothing. */
static hp_code replaced(const hp_params *p, const char *name, hp_err *err)
{
    const hp_param_def *def = hp_param_find(name);
    hp_params defaults;
    hp_params_defaults(&defaults);
    uint32_t now, was;
    memcpy(&now, (const char *)p + def->offset, sizeof now);
    memcpy(&was, (const char *)&defaults + def->offset, sizeof was);
    if (now == was)
        return HP_OK;
    return hp_fail_word(err, HP_ERR_INVALID_ARGUMENT, "ocio_conflict", name,
                        "%s does not apply with an OCIO view: the config's display/view transform takes the place "
                        "of the tone operator, the gamut fold, the display gamma and the output's colour space; "
                        "leave %s out (or at its default) or leave out ocio.*", name, name);
}

hp_code hp_params_ocio_key(const hp_params *p, hp_ocio_view_key *key, hp_err *err)
{
    memset(key, 0, sizeof *key);
    if (!active)
        return hp_fail_word(err, HP_ERR_INVALID_ARGUMENT, "no_ocio_config", first_field(p),
                            "%s names an OpenColorIO display, view, look or colour space, but the daemon has no "
                            "OCIO config (set ocio_config, or the OCIO environment variable, and restart it)",
                            first_field(p));
    snprintf(key->input, sizeof key->input, "%s", p->ocio.input);
    snprintf(key->display, sizeof key->display, "%s", p->ocio.display);
    snprintf(key->view, sizeof key->view, "%s", p->ocio.view);
    snprintf(key->looks, sizeof key->looks, "%s", p->ocio.looks);
    return hp_ocio_resolve(active, key, err);
}

hp_code hp_params_ocio_check(const hp_params *p, hp_err *err)
{
    if (!hp_params_ocio_on(p))
        return HP_OK;
    hp_ocio_view_key key;
    /* Without a config, hdrpost leaves the names to the daemon that has one; the conflicts below need none. */
    hp_code code = !active && open_names ? HP_OK : hp_params_ocio_key(p, &key, err);
    /* input.colorspace with one of hdrpostd's own spaces too: through a view the frame is in a colour space of
     * the config (its scene_linear unless named), and hdrpostd's matrices are not applied. */
    static const char *const replaced_names[] = {"tonemap.operator", "gamma.mode", "gamma.radius",
                                                 "output.colorspace", "input.colorspace"};
    for (size_t i = 0; code == HP_OK && i < sizeof replaced_names / sizeof replaced_names[0]; i++)
        code = replaced(p, replaced_names[i], err);
    return code;
}

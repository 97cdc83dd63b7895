/* The OCIO config requests are checked against, and the client's mode that leaves config names to the daemon
 * (pipeline/params_ocio.h; docs/COLOR.md).
 *
 * The config is set once, before the daemon serves: requests read it without a lock (thread creation orders
 * the write before every reader). */
#include "pipeline/params_ocio.h"

#include <stdio.h>

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

bool hp_params_ocio_unchecked(void)
{
    return !active && open_names;
}

hp_code hp_params_ocio_names(const char *input, const char *display, const char *view, const char *looks,
                             const char *first_field, hp_ocio_view_key *key, hp_err *err)
{
    *key = (hp_ocio_view_key){0};
    if (!active)
        return hp_fail_word(err, HP_ERR_INVALID_ARGUMENT, "no_ocio_config", first_field,
                            "%s names an OpenColorIO display, view, look or colour space, but the daemon has no "
                            "OCIO config (set ocio_config, or the OCIO environment variable, and restart it)",
                            first_field);
    snprintf(key->input, sizeof key->input, "%s", input);
    snprintf(key->display, sizeof key->display, "%s", display);
    snprintf(key->view, sizeof key->view, "%s", view);
    snprintf(key->looks, sizeof key->looks, "%s", looks);
    return hp_ocio_resolve(active, key, err);
}

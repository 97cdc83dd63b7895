/* The OCIO config requests are checked against (issue 34; docs/COLOR.md), apart from the parameter table so
 * that it depends on nothing of it: pipeline/params.c's rules read it, it reads none of them. */
#ifndef HP_PARAMS_OCIO_H
#define HP_PARAMS_OCIO_H

#include <stdbool.h>

#include "ocio/config.h"

/* The config requests are checked against, set once at start before any request (NULL: none): ocio.* and
 * input.colorspace's config names are refused without one (400 no_ocio_config). */
void hp_params_use_ocio(const hp_ocio_config *config);
const hp_ocio_config *hp_params_ocio_config(void);
/* For hdrpost alone (client/), which checks requests with this parser but has no config: true keeps any
 * well-formed name of ocio.* and of an open enum (input.colorspace) for the daemon to check, rather than refusing
 * it (no_ocio_config); the rules that need no config (ocio_conflict) still hold. The daemon never calls it. */
void hp_params_accept_open_names(bool accept);
/* Whether an open enum keeps a name outside its choices: a config is loaded, or open names are accepted. */
bool hp_params_open_names(void);
/* No config, and names left to the daemon: they are not checked here. */
bool hp_params_ocio_unchecked(void);
/* A transform's names into a key, the config's defaults filled in and every name checked against it; without a
 * config, no_ocio_config naming first_field (the request's first OCIO field). */
hp_code hp_params_ocio_names(const char *input, const char *display, const char *view, const char *looks,
                             const char *first_field, hp_ocio_view_key *key, hp_err *err);

#endif

/* The daemon's side of a studio's OpenColorIO config (issue 34; docs/COLOR.md): loading it at start with what
 * the log says of it, and the programs made before ready (ocio_warm). */
#ifndef HP_OCIO_SETUP_H
#define HP_OCIO_SETUP_H

#include "common/error.h"
#include "ocio/config.h"
#include "pipeline/ocio_stage.h"

/* path "": none (*out NULL, HP_OK). Else the config, loaded with every view built (ocio/config.h), its name,
 * displays and views, looks and roles logged; an error carries OCIO's message. */
hp_code hp_daemon_ocio_load(const char *path, hp_ocio_config **out, hp_err *err);

/* Makes the programs an ocio_warm list names (daemon/config.c says its form) for RGBA32F and RGBA16F frames at
 * 8 bits, and logs how long each took. An entry the config does not have is an error naming it. */
hp_code hp_daemon_ocio_warm(hp_ocio_stage *stage, const char *list, hp_err *err);

#endif

/* The daemon's own named looks (issue 34: "named looks may name an OCIO view too"; docs/PARAMETERS.md, "look"): a
 * studio defines its review looks once, in the daemon's settings, and render jobs name them (look=review) instead
 * of repeating a view, its display and a fixed exposure in every request. */
#ifndef HP_LOOKS_SETUP_H
#define HP_LOOKS_SETUP_H

#include "common/error.h"

/* Adds the looks a studio_looks list defines ("NAME: QUERY; ..."; daemon/config.c says its form) after the
 * built-in ones (pipeline/looks.h), each checked as a request's parameters are (the OCIO config registered first,
 * so that its names are checked too), and logs them. An entry that fails is an error naming it and what is wrong.
 * Call once at start, before any request. */
hp_code hp_daemon_studio_looks(const char *list, hp_err *err);

#endif

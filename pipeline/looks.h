/* Named looks (issue 17): a set of parameters applied first, which the request's own parameters then
 * override, whatever the order they come in. One table, beside the parameter table (pipeline/params.c);
 * docs/PARAMETERS.md lists it. */
#ifndef HP_LOOKS_H
#define HP_LOOKS_H

#include <stddef.h>

#include "common/error.h"

typedef struct hp_look {
    const char *name;     /* as the `look` parameter spells it */
    const char *settings; /* the parameters it sets, in the query form ("tonemap.operator=agx&..."); "" none */
    const char *help;     /* one sentence for the docs: what it is for */
} hp_look;

/* The built-in looks, in the `look` parameter's order: hp_looks[0] is `default`, today's look, which sets nothing. */
extern const hp_look hp_looks[];
extern const size_t hp_look_count;

/* A daemon's own looks (its studio_looks setting, daemon/looks_setup.c) come after the built-in ones: the look
 * parameter's value i names hp_look_at(i). Added at start, before any request reads a parameter, and never after:
 * the tables are then read without a lock. At most HP_LOOKS_MAX looks in all. */
#define HP_LOOKS_MAX 64
size_t hp_look_total(void);
const hp_look *hp_look_at(size_t i);
/* Copies name and settings; the caller has checked them (daemon/looks_setup.c). HP_ERR_INVALID_ARGUMENT when the
 * name is taken or the table is full. */
hp_code hp_looks_add(const char *name, const char *settings, const char *help, hp_err *err);
/* Back to the built-in looks alone (tests, and a daemon's stop). */
void hp_looks_reset(void);
/* Every look's name, NULL-terminated: the `look` parameter's choices. */
extern const char *hp_look_names[HP_LOOKS_MAX + 1];

#endif

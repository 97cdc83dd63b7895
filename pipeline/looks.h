/* Named looks (issue 17): a set of parameters applied first, which the request's own parameters then
 * override, whatever the order they come in. One table, beside the parameter table (pipeline/params.c);
 * docs/PARAMETERS.md lists it. */
#ifndef HP_LOOKS_H
#define HP_LOOKS_H

#include <stddef.h>

typedef struct hp_look {
    const char *name;     /* as the `look` parameter spells it */
    const char *settings; /* the parameters it sets, in the query form ("tonemap.operator=agx&..."); "" none */
    const char *help;     /* one sentence for the docs: what it is for */
} hp_look;

/* In the `look` parameter's order: hp_looks[0] is `default`, today's look, which sets nothing. */
extern const hp_look hp_looks[];
extern const size_t hp_look_count;
/* Their names, NULL-terminated: the `look` parameter's choices (made from the same list as the rows). */
extern const char *const hp_look_names[];

#endif

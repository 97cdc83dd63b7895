/* The named looks (pipeline/looks.h). Each is written as the query a client would send for it, so a look is
 * exactly its parameters: api/frames/params_json.c applies it through the query parser, and test_params checks
 * that every one of them parses. One list makes both the rows and the schema's choices.
 *
 * blender: Blender 4.x's default view transform: AgX base, the sRGB display, exposure 0 (the frame's values
 *   as rendered). AgX is the Sobotka/EaryChow formulation of algorithms.md 3.9 (Blender's own look without its
 *   40% hue restoration, docs/PIPELINE.md).
 * aces_filmic: Stephen Hill's fit of the ACES 1.0 RRT and sRGB ODT (algorithms.md 3.5) at the frame's exposure.
 * neutral: Khronos PBR Neutral (algorithms.md 3.10), made to keep base colours as authored.
 * analysis: the scene's exposure read off the picture: each stop of luminance around middle grey its own
 *   colour, the values as rendered (0 EV), the palette written as it is. */
#include "pipeline/looks.h"

#include <stdlib.h>
#include <string.h>

#define HP_LOOKS(X)                                                                                            \
    X(default, "", "Today's defaults: automatic exposure, `reinhard_extended`, Kwon's dynamic local gamma.")   \
    X(blender, "exposure.mode=fixed&exposure.stops=0&tonemap.operator=agx&gamma.mode=srgb",                     \
      "What Blender 4.x's viewport shows for the same render: AgX, the sRGB display, exposure 0 EV.")          \
    X(aces_filmic, "exposure.mode=fixed&exposure.stops=0&tonemap.operator=aces_hill&gamma.mode=srgb",           \
      "The ACES filmic look (Hill's fit of the RRT and sRGB ODT), exposure 0 EV, the sRGB display.")           \
    X(neutral, "exposure.mode=fixed&exposure.stops=0&tonemap.operator=khronos_neutral&gamma.mode=srgb",         \
      "Khronos PBR Neutral at exposure 0 EV, the sRGB display: colours as authored, for products and "          \
      "materials.")                                                                                             \
    X(analysis, "exposure.mode=fixed&exposure.stops=0&tonemap.operator=false_color&gamma.mode=linear",          \
      "Lighting checks: false colour of each pixel's stops around middle grey at 0 EV (tonemap.operator "       \
      "false_color).")

#define HP_LOOK_ROW(name, settings, help) {#name, settings, help},
#define HP_LOOK_NAME(name, settings, help) #name,

const hp_look hp_looks[] = {HP_LOOKS(HP_LOOK_ROW)};
const size_t hp_look_count = sizeof(hp_looks) / sizeof(hp_looks[0]);
const char *hp_look_names[HP_LOOKS_MAX + 1] = {HP_LOOKS(HP_LOOK_NAME) NULL};
_Static_assert(sizeof(hp_looks) / sizeof(hp_looks[0]) < HP_LOOKS_MAX, "room for the built-in looks");

/* The daemon's own looks, after the built-in ones: their rows own their text. */
static hp_look added[HP_LOOKS_MAX];
static size_t added_count;

size_t hp_look_total(void)
{
    return hp_look_count + added_count;
}

const hp_look *hp_look_at(size_t i)
{
    return i < hp_look_count ? &hp_looks[i] : i < hp_look_total() ? &added[i - hp_look_count] : NULL;
}

hp_code hp_looks_add(const char *name, const char *settings, const char *help, hp_err *err)
{
    for (size_t i = 0; i < hp_look_total(); i++)
        if (!strcmp(hp_look_at(i)->name, name))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "the look \"%s\" is already %s", name,
                           i < hp_look_count ? "a built-in look" : "defined");
    if (hp_look_total() >= HP_LOOKS_MAX)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "the look \"%s\" is one too many: %d looks at most, the %zu "
                       "built-in ones included", name, HP_LOOKS_MAX, hp_look_count);
    hp_look row = {strdup(name), strdup(settings), strdup(help)};
    if (!row.name || !row.settings || !row.help) {
        free((char *)row.name), free((char *)row.settings), free((char *)row.help);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "the look \"%s\": out of memory", name);
    }
    added[added_count++] = row;
    hp_look_names[hp_look_total() - 1] = row.name;
    hp_look_names[hp_look_total()] = NULL;
    return HP_OK;
}

void hp_looks_reset(void)
{
    for (size_t i = 0; i < added_count; i++) {
        free((char *)added[i].name), free((char *)added[i].settings), free((char *)added[i].help);
        hp_look_names[hp_look_count + i] = NULL;
    }
    added_count = 0;
}

/* The named looks (pipeline/looks.h). Each is written as the query a client would send for it, so a look is
 * exactly its parameters: api/params_json.c applies it through the query parser, and test_params checks
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
const char *const hp_look_names[] = {HP_LOOKS(HP_LOOK_NAME) NULL};

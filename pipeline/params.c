/* The schema of every per-request parameter: one row per parameter with its JSON name, type, range,
 * default, unit and help. Defaults, validation, the API's messages and docs/PARAMETERS.md all read this
 * table (the redis configuration-table habit), so adding a parameter is one row here plus its field in
 * params.h.
 *
 * Formulas and defaults come from docs/ALGORITHMS.md (cited by section as "A 3.6") and the choices made where
 * sources disagree from docs/DECISIONS.md ("D 7"). */
#include "pipeline/params.h"

#include "hp_dof.h"
#include "pipeline/looks.h"
#include "common/utf8.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- How the table is written ---------------------------------------------------------------------- */

/* Each offset also proves at compile time that the field has the storage its type implies: doubles for
 * numbers, bool, four bytes for integers and enums (the setter stores both as uint32_t; params.h
 * keeps analysis.variant as uint32_t and the other enums as C enums, which GCC and Clang make four
 * bytes for these small non-negative values), and char[HP_PARAM_STRING_MAX + 1] for strings. A mismatch
 * fails to compile rather than scribbling. */
#define P0 ((hp_params *)0)
#define NUMBER_AT(f) (offsetof(hp_params, f) + 0 * sizeof(_Generic(P0->f, double: 1)))
#define BOOL_AT(f) (offsetof(hp_params, f) + 0 * sizeof(_Generic(P0->f, bool: 1)))
#define U32_AT(f) (offsetof(hp_params, f) + 0 * sizeof(_Generic(P0->f, uint32_t: 1)))
#define ENUM_AT(f) (offsetof(hp_params, f) + 0 * sizeof(char[sizeof(P0->f) == sizeof(uint32_t) ? 1 : -1]))
#define STRING_AT(f) (offsetof(hp_params, f) + 0 * sizeof(_Generic(&P0->f, char(*)[HP_PARAM_STRING_MAX + 1]: 1)))

/* An exclusive upper bound: hp_param_def has min_exclusive but no max_exclusive, so (a, b) and [a, b)
 * store the largest double below b as an inclusive max. `v <= BELOW(b)` is exactly `v < b` for every
 * double v. x * (1 - 2^-53) rounds to x's predecessor for any positive normal x; range_text() writes
 * such a bound back as "b)" because it is the one kind of bound that 15 significant digits cannot
 * reproduce. */
#define BELOW(b) ((b) * (1.0 - DBL_EPSILON / 2))

static const char *const analysis_variants[] = {"single_pass", "two_pass", NULL};
static const char *const exposure_modes[] = {"auto", "histogram", "fixed", NULL};
static const char *const tone_operators[] = {"linear", "reinhard", "reinhard_extended", "drago",
                                             "aces_narkowicz", "hable", "lottes", "uchimura",
                                             "aces_hill", "agx", "khronos_neutral", "false_color", NULL};
static const char *const gamma_modes[] = {"local", "local_luminance", "srgb", "linear", NULL};
static const char *const output_formats[] = {"webp", "png", "jpeg", "avif", NULL};
static const char *const output_chromas[] = {"auto", "420", "444", NULL};
static const char *const output_alphas[] = {"auto", "keep", "drop", NULL};
static const char *const png_encoders[] = {"cpu", "gpu", "auto", NULL};
/* An integer with a choices list takes exactly those values. */
static const char *const bit_depths[] = {"8", "10", "12", "16", NULL};
static const char *const input_channels[] = {"1", "3", "4", NULL};
static const char *const input_types[] = {"float32", "float16", NULL};
/* "auto", then pipeline/colorspace.h's hp_colorspace in order (hp_colorspace_name). */
static const char *const input_colorspaces[] = {"auto", "rec709", "rec2020", "acescg", "aces2065", "p3d65", NULL};
_Static_assert(sizeof(input_colorspaces) / sizeof(input_colorspaces[0]) == HP_COLORSPACE_COUNT + 2,
               "input_colorspaces names auto and every hp_colorspace");
/* pipeline/colorspace.h's hp_output_colorspace in order. */
static const char *const output_colorspaces[] = {"srgb", "display_p3", "rec2020", NULL};
_Static_assert(sizeof(output_colorspaces) / sizeof(output_colorspaces[0]) == HP_OUTPUT_COLORSPACE_COUNT + 1,
               "output_colorspaces names every hp_output_colorspace");
static const char *const dof_methods[] = {"gather", "sat", NULL};
static const char *const dof_lenses[] = {"24mm_f2.8", "35mm_f1.4", "50mm_f1.4", "85mm_f1.4", "135mm_f2", NULL};
static const char *const bokeh_blades[] = {"0", "5", "6", "7", "8", "9", NULL};

_Static_assert(sizeof(dof_lenses) / sizeof(dof_lenses[0]) == HP_LENS_COUNT + 1, "dof_lenses names every lens");

void hp_dof_lens_values(hp_dof_lens lens, double *focal_length_mm, double *f_stop)
{
    static const double values[HP_LENS_COUNT][2] = {{24, 2.8}, {35, 1.4}, {50, 1.4}, {85, 1.4}, {135, 2}};
    *focal_length_mm = values[lens < HP_LENS_COUNT ? lens : HP_LENS_50MM_F1_4][0];
    *f_stop = values[lens < HP_LENS_COUNT ? lens : HP_LENS_50MM_F1_4][1];
}

_Static_assert(sizeof(tone_operators) / sizeof(tone_operators[0]) == HP_TONE_OPERATOR_COUNT + 1,
               "tone_operators must name every hp_tone_operator, in enum order");
_Static_assert(HP_EXPOSURE_FIXED == 2 && HP_GAMMA_LINEAR == 3 && HP_OUTPUT_PNG == 1 &&
                   HP_REDUCE_PARAM_TWO_PASS == 1 && HP_TONE_KHRONOS_NEUTRAL == 10 && HP_TONE_FALSE_COLOR == 11,
               "the choices lists follow the enums' order");

#define EXR_ONLY "OpenEXR files"
#define HABLE "operator `hable`"
#define LOTTES "operator `lottes`"
#define UCHIMURA "operator `uchimura`"

const hp_param_def hp_param_schema[] = {
    /* --- look: a named set of the parameters below (pipeline/looks.c) --- */
    {.name = "look", .type = HP_PARAM_ENUM, .offset = U32_AT(look), .def = 0, .choices = hp_look_names, .unit = "",
     .open_offset = STRING_AT(look_name), .open_names = hp_params_ocio_unchecked,
     .help = "A named look, applied first: the parameters it sets are its defaults, and every parameter the "
             "request gives overrides them, in whatever order they come (`GET /v1/params` lists each look's "
             "parameters under `looks`; docs/PARAMETERS.md under Looks). A "
             "daemon may add its own (the `studio_looks` setting; `GET /v1/params` lists them), such as a "
             "studio's OCIO view at a fixed exposure."},
    /* --- input: raw samples instead of a file (api/frames/render.c) --- */
    {.name = "input.width", .type = HP_PARAM_INTEGER, .offset = U32_AT(input.width), .min = 0, .max = 16384,
     .def = 0, .unit = "pixels",
     .help = "Set for a body of raw samples instead of a file: the pixels per row. 0 (the default) means the "
             "body is an OpenEXR, Radiance HDR or PFM file, recognised from its bytes."},
    {.name = "input.height", .type = HP_PARAM_INTEGER, .offset = U32_AT(input.height), .min = 0, .max = 16384,
     .def = 0, .unit = "pixels", .applies = "raw input (`input.width` > 0)",
     .help = "Rows of a raw body, top to bottom. The body must hold exactly width x height x channels samples."},
    {.name = "input.channels", .type = HP_PARAM_INTEGER, .offset = U32_AT(input.channels), .min = 1, .max = 4,
     .def = 4, .choices = input_channels, .unit = "", .applies = "raw input",
     .help = "Interleaved channels of a raw body: 1 (grey), 3 (R, G, B) or 4 (R, G, B, A)."},
    {.name = "input.type", .type = HP_PARAM_ENUM, .offset = U32_AT(input.type), .def = HP_INPUT_FLOAT32,
     .choices = input_types, .unit = "", .applies = "raw input",
     .help = "Sample type of a raw body: IEEE `float32` or `float16`, little-endian."},
    /* Colour spaces (issue 17; pipeline/colorspace.c has the matrices and their sources). */
    {.name = "input.colorspace", .type = HP_PARAM_ENUM, .offset = U32_AT(input.colorspace),
     .def = HP_INPUT_COLORSPACE_AUTO, .choices = input_colorspaces, .unit = "",
     .open_offset = STRING_AT(ocio.input), .open_names = hp_params_open_names,
     .help = "The primaries and white of the frame's linear RGB. With an OCIO config loaded (`ocio_config`) "
             "also any colour space or role of the config (`ACEScg`, `scene_linear`): the frame then goes "
             "through the config's display/view (`ocio.*`, docs/COLOR.md). Else `auto`: an OpenEXR file's `chromaticities` "
             "attribute or a Radiance file's PRIMARIES= line when it has one (any primaries, a white other "
             "than D65 adapted by Bradford), else `rec709`. Named: `rec709` (linear sRGB, D65), `rec2020`, "
             "`acescg` (ACES AP1), `aces2065` (ACES AP0), `p3d65` (linear Display P3). The frame is taken to "
             "linear Rec.709 where the tone stage reads it, colours outside Rec.709 brought in toward the grey "
             "of their own luminance (luminance and hue kept), and its luminance weighs the channels by its "
             "own space's Y row. The answer says which space was used and why."},
    /* Channel names of a multi-layer OpenEXR (api/codecs/image.h, hp_decode_options): "" keeps the decoder's
     * automatic choice, so the default request reads every file as before. A name the file lacks is a
     * 422 from api/frames/render.c, which only the file can tell. */
    {.name = "input.layer", .type = HP_PARAM_STRING, .offset = STRING_AT(input.layer), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = EXR_ONLY,
     .help = "The layer whose R, G, B (and A; or Y alone, as grey) become the colour, named by the prefix of "
             "its channel names: `ViewLayer.Combined` takes Blender's ViewLayer.Combined.R, .G, .B and .A; a "
             "layer in a later part of a multi-part file is found too. Empty: automatic, which takes plain R, "
             "G, B, else the first layer named `*.Combined`, else the first layer with R, G and B, else Y as "
             "grey."},
    {.name = "input.channel_r", .type = HP_PARAM_STRING, .offset = STRING_AT(input.channel_r), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = EXR_ONLY,
     .help = "The channel read as red, by its full name (`ViewLayer.Combined.R`), for colour that is not one "
             "layer's R, G and B: given together with channel_g and channel_b, and instead of a layer. Empty: "
             "from the layer."},
    {.name = "input.channel_g", .type = HP_PARAM_STRING, .offset = STRING_AT(input.channel_g), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = EXR_ONLY,
     .help = "The channel read as green, by its full name; see channel_r."},
    {.name = "input.channel_b", .type = HP_PARAM_STRING, .offset = STRING_AT(input.channel_b), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = EXR_ONLY,
     .help = "The channel read as blue, by its full name; see channel_r."},
    {.name = "input.channel_a", .type = HP_PARAM_STRING, .offset = STRING_AT(input.channel_a), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = EXR_ONLY,
     .help = "The channel read as alpha, by its full name, with a layer, with named channels or with the "
             "automatic choice. Empty: the colour layer's A, or none (alpha 1)."},
    {.name = "input.depth", .type = HP_PARAM_STRING, .offset = STRING_AT(input.depth), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = EXR_ONLY,
     .help = "The depth channel, by its full name (`ViewLayer.Depth.Z`), in the colour's part. Empty: "
             "automatic, which takes Z, else the colour layer's Z, else a channel named `*Depth.Z`, else the "
             "first `<layer>.Z` of a layer that is not a vector."},

    /* --- analysis: the luminance reduction (A 1; D 2-4; pipeline/reduce.h) --- */
    {.name = "analysis.variant", .type = HP_PARAM_ENUM, .offset = U32_AT(analysis.variant),
     .def = HP_REDUCE_PARAM_SINGLE_PASS, .choices = analysis_variants, .unit = "",
     /* A 1.3: FidelityFX SPD-style single dispatch vs Harris's two-level tree; docs/BENCHMARKS.md. */
     .help = "How the luminance reduction runs on the GPU: `single_pass` is one dispatch whose last "
             "workgroup combines the partial results, `two_pass` a shared-memory tree followed by a second "
             "dispatch. Both give the same statistics; single_pass is faster."},
    {.name = "analysis.histogram_min_log2", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(analysis.histogram_min_log2), .min = -64, .max = 63, .def = -16,
     .unit = "log2 luminance",
     /* A 1.4 step 2 (bin 0 holds Y < 2^min); D 4 (256 bins over [-16, 16]). */
     .help = "Lowest edge of the 256-bin luminance histogram, as log2 of the frame's luminance. Darker "
             "pixels go to bin 0, which the histogram mean and the percentiles leave out."},
    {.name = "analysis.histogram_max_log2", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(analysis.histogram_max_log2), .min = -63, .max = 64, .def = 16,
     .unit = "log2 luminance",
     .help = "Highest edge of the luminance histogram, as log2 of the frame's luminance; brighter pixels "
             "count in the top bin. Must be above histogram_min_log2."},

    /* --- exposure (A 1.4, 1.5, 3.2; D 7) --- */
    {.name = "exposure.mode", .type = HP_PARAM_ENUM, .offset = ENUM_AT(exposure.mode), .def = HP_EXPOSURE_AUTO,
     .choices = exposure_modes, .unit = "",
     /* auto: Reinhard 2002 eq. 2, L = (a / L_w) Y (A 3.2); histogram: Bevy's percentile-clipped mean with
      * the bin-centre inverse (A 1.4 step 5, D 4). */
     .help = "How the exposure scale is found: `auto` divides the key by the frame's log-average "
             "luminance (Reinhard 2002), `histogram` by the mean of the luminance histogram between "
             "low_percent and high_percent, and `fixed` ignores the frame's statistics and uses stops, or "
             "key / adaptation when adaptation is given."},
    {.name = "exposure.key", .type = HP_PARAM_NUMBER_OR_AUTO, .offset = NUMBER_AT(exposure.key),
     .aux_offset = BOOL_AT(exposure.key_auto), .min = 0, .min_exclusive = true, .max = 1, .def = 0.18,
     .unit = "", .applies = "modes `auto`, `histogram`; `fixed` when adaptation > 0",
     /* 0.18 middle grey (A 3.2, pfstools key = 0.18); "auto": a = 0.18 * 4^((2 log2 L_w - log2 L_min -
      * log2 L_max) / (log2 L_max - log2 L_min)) with the 1st and 99th percentiles (A 1.5, D 7). */
     .help = "Reinhard's key: the value the adaptation luminance is exposed to, 0.18 being middle grey "
             "(about 0.09 suits low-key scenes, 0.36 to 0.72 high-key ones). `\"auto\"` estimates it "
             "from the log-average and the 1st and 99th percentiles of luminance, which keeps low-key "
             "scenes such as candle light dark."},
    {.name = "exposure.low_percent", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(exposure.low_percent),
     .min = 0, .max = BELOW(100), .def = 10, .unit = "%", .applies = "mode `histogram`",
     /* A 1.4 step 4: first = total * lowPercent / 100 (Bevy); Unreal's AutoExposureLowPercent. */
     .help = "Share of the darkest pixels left out of the histogram mean, in percent of the frame's "
             "pixels. Must be below high_percent."},
    {.name = "exposure.high_percent", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(exposure.high_percent),
     .min = 0, .min_exclusive = true, .max = 100, .def = 90, .unit = "%", .applies = "mode `histogram`",
     .help = "Pixels above this percentile of luminance are left out of the histogram mean, so that a few "
             "highlights do not darken the frame."},
    {.name = "exposure.stops", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(exposure.stops), .min = -32,
     .max = 32, .def = 0, .unit = "stops", .applies = "mode `fixed` when adaptation is 0",
     .help = "Fixed exposure: the frame is multiplied by 2^stops."},
    {.name = "exposure.adaptation", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(exposure.adaptation),
     .min = 0, .max = 1e9, .def = 0, .unit = "frame luminance units", .applies = "mode `fixed`",
     /* Reinhard's scale a / L_w (A 1.5) with L_w given by the client instead of measured. */
     .help = "Adaptation luminance for fixed exposure: the frame is scaled by key / adaptation; 0 uses "
             "stops instead. A client that measured a whole sequence passes the same value with every "
             "frame, so that the shot does not flicker."},
    {.name = "exposure.compensation_ev", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(exposure.compensation_ev),
     .min = -32, .max = 32, .def = 0, .unit = "stops",
     .help = "Exposure compensation after every mode, like a camera's: a further scale of "
             "2^compensation_ev."},

    /* --- dof: the camera's depth of field (A 5; D 1, 8; pipeline/dof.h) --- */
    {.name = "dof.enabled", .type = HP_PARAM_BOOL, .offset = BOOL_AT(dof.enabled), .def = 0, .unit = "",
     .help = "Blur what is out of focus as a lens does, from the frame's depth (a depth channel of the EXR, "
             "or a `depth` part). A request that asks for it without a depth is refused (422)."},
    {.name = "dof.method", .type = HP_PARAM_ENUM, .offset = U32_AT(dof.method), .def = 0, .choices = dof_methods,
     .unit = "", .applies = "dof.enabled",
     /* Gather: near and far fields (A 5.2-5.5); SAT: Hensley et al. 2005, the seed talk's fast path (A 7). */
     .help = "`gather` (quality) blurs the near and far fields apart with an aperture-shaped gather and "
             "composites far first, then near by its coverage, so a blurred foreground spreads over a sharp "
             "background and a sharp subject never bleeds into the background behind it. `sat` (fast) "
             "averages a box of each pixel's CoC from a summed-area table: constant time per pixel, but no "
             "near and far layers."},
    {.name = "dof.lens", .type = HP_PARAM_ENUM, .offset = ENUM_AT(dof.lens), .def = HP_LENS_50MM_F1_4,
     .choices = dof_lenses, .unit = "", .applies = "dof.enabled",
     .help = "A lens by its focal length and widest aperture, which give focal_length_mm and f_stop where "
             "those are `\"auto\"`: `24mm_f2.8` (wide, deep focus), `35mm_f1.4`, `50mm_f1.4` (the normal "
             "fast prime), `85mm_f1.4` (the portrait lens: shallow focus, large bokeh), `135mm_f2`."},
    {.name = "dof.focal_length_mm", .type = HP_PARAM_NUMBER_OR_AUTO, .offset = NUMBER_AT(dof.focal_length_mm),
     .aux_offset = BOOL_AT(dof.focal_length_auto), .def_auto = true, .def = 50, .min = 1, .max = 2000,
     .unit = "mm", .applies = "dof.enabled",
     .help = "Focal length f of the thin lens; `\"auto\"` takes dof.lens's."},
    {.name = "dof.f_stop", .type = HP_PARAM_NUMBER_OR_AUTO, .offset = NUMBER_AT(dof.f_stop),
     .aux_offset = BOOL_AT(dof.f_stop_auto), .def_auto = true, .def = 1.4, .min = 0.5, .max = 128, .unit = "",
     .applies = "dof.enabled",
     .help = "The f-number N: the aperture's diameter is f / N, so a smaller N blurs more. `\"auto\"` "
             "takes dof.lens's."},
    {.name = "dof.focus_distance_m", .type = HP_PARAM_NUMBER_OR_AUTO, .offset = NUMBER_AT(dof.focus_distance_m),
     .aux_offset = BOOL_AT(dof.focus_auto), .def_auto = true, .def = 3, .min = 0, .min_exclusive = true,
     .max = 1e6, .unit = "m", .applies = "dof.enabled",
     .help = "Distance S1 in focus, in metres; it must lie beyond the focal length. `\"auto\"` focuses on "
             "the frame's centre: the median depth of its middle tenth, the background left out."},
    {.name = "dof.sensor_width_mm", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(dof.sensor_width_mm), .min = 1,
     .max = 100, .def = 36, .unit = "mm", .applies = "dof.enabled",
     /* D 8: the sensor width maps to the image width (36 mm full frame). */
     .help = "Width of the sensor, which the frame's width spans (36 for full frame, 24.9 for Super 35): "
             "it converts the CoC on the sensor into pixels."},
    {.name = "dof.depth_scale", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(dof.depth_scale), .min = 0,
     .min_exclusive = true, .max = 1e6, .def = 1, .unit = "m per unit", .applies = "dof.enabled",
     .help = "Metres per unit of the depth channel (0.01 for centimetres). Depths of 1e9 and more, "
             "infinities and NaN are the background, at infinity; depths of 0 or below stay sharp."},
    {.name = "dof.max_coc_px", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(dof.max_coc_px), .min = 1,
     .max = HP_DOF_MAX_COC_PX, .def = 32, .unit = "pixels", .applies = "dof.enabled",
     .help = "Largest radius of the circle of confusion, in pixels; blur beyond it is clamped (near and "
             "far alike)."},

    /* --- bokeh: scattered highlights (A 6; D 9) --- */
    {.name = "bokeh.enabled", .type = HP_PARAM_BOOL, .offset = BOOL_AT(bokeh.enabled), .def = 1, .unit = "",
     .applies = "dof.enabled",
     .help = "Draw bright out-of-focus pixels as sprites in the shape of the aperture, their light spread "
             "over the sprite, instead of gathering them with the rest: crisp discs and polygons where a "
             "gather would smear."},
    {.name = "bokeh.threshold", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(bokeh.threshold), .min = 0,
     .max = 1e9, .def = 4, .unit = "exposed luminance", .applies = "bokeh.enabled",
     .help = "Exposed luminance over which an out-of-focus pixel becomes a sprite (1 is the exposed white of "
             "a Reinhard curve's shoulder; 4 keeps to lights and speculars)."},
    {.name = "bokeh.min_coc_px", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(bokeh.min_coc_px), .min = 0.5,
     .max = HP_DOF_MAX_COC_PX, .def = 2, .unit = "pixels", .applies = "bokeh.enabled",
     .help = "CoC radius under which a bright pixel stays with the gather: too sharp for a sprite to show."},
    {.name = "bokeh.blades", .type = HP_PARAM_INTEGER, .offset = U32_AT(bokeh.blades), .min = 0, .max = 9,
     .def = 7, .choices = bokeh_blades, .unit = "", .applies = "bokeh.enabled",
     .help = "Aperture blades: the sprites, and the gathered blur's kernel, are regular polygons of that many "
             "sides; 0 is a circle (a wide open lens)."},
    {.name = "bokeh.rotation_deg", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(bokeh.rotation_deg), .min = 0,
     .max = 360, .def = 0, .unit = "degrees", .applies = "bokeh.enabled",
     .help = "Rotation of the aperture polygon."},
    {.name = "bokeh.squeeze", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(bokeh.squeeze), .min = 1, .max = 2,
     .def = 1, .unit = "", .applies = "bokeh.enabled",
     .help = "Anamorphic squeeze: sprites this many times taller than wide (1.33 or 2 for anamorphic "
             "lenses, 1 for spherical ones)."},
    {.name = "bokeh.max_sprites", .type = HP_PARAM_INTEGER, .offset = U32_AT(bokeh.max_sprites), .min = 0,
     .max = HP_BOKEH_MAX_SPRITES, .def = 16384, .unit = "sprites", .applies = "bokeh.enabled",
     .help = "The sprite budget. Pixels past it are gathered like the rest; the response says when it was "
             "reached (`X-Bokeh`, and `bokeh` in JSON)."},

    /* --- tonemap (A 3; D 6) --- */
    {.name = "tonemap.operator", .type = HP_PARAM_ENUM, .offset = ENUM_AT(tonemap.op),
     .def = HP_TONE_REINHARD_EXTENDED, .choices = tone_operators, .unit = "",
     /* Luminance operators A 3.1-3.4, 3.6-3.8; RGB operators A 3.5, 3.9, 3.10; which is which: D 6. */
     .help = "Tone curve. On luminance: `linear` (clamp), `reinhard` L/(1+L), `reinhard_extended` (burns "
             "out at white_point), `drago` (adaptive logarithmic), `aces_narkowicz`, `hable` (Uncharted 2 "
             "filmic), `lottes`, `uchimura` (Gran Turismo). On the RGB channels, as their definitions "
             "require: `aces_hill`, `agx`, `khronos_neutral`. For lighting checks: `false_color`, a colour "
             "per stop of exposed luminance around middle grey 0.18 (grey at 0.18; blue, cyan, teal below; "
             "green, yellow, orange, red, pink above; near-black purple at -6 stops and under, white at +6 "
             "and over; blended between whole stops; meant with `gamma.mode=linear`, as `look=analysis`)."},
    {.name = "tonemap.white_point", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.white_point),
     .min = 0, .max = 1e9, .def = 0, .unit = "exposed luminance", .applies = "operator `reinhard_extended`",
     /* A 3.2 eq. 4, L_d = L (1 + L / L_white^2) / (1 + L); pfstools defaults L_white to the scaled max. */
     .help = "Reinhard's L_white: the exposed luminance that maps to 1, above which values burn out; 0 = the "
             "exposed frame's maximum, as in Reinhard's own code."},
    {.name = "tonemap.drago.bias", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.drago_bias), .min = 0,
     .min_exclusive = true, .max = 1, .def = 0.85, .unit = "", .applies = "operator `drago`",
     /* A 3.3: b in (0, 1], 0.7 to 0.9 useful, 0.85 reported optimal (LuminanceHDR docs); pfstools form (D 6). */
     .help = "Drago's bias b, which sets how strongly dark regions are lifted: 0.7 to 0.9 is useful, 0.85 "
             "is the value Drago reports as best."},
    {.name = "tonemap.drago.display_max", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.drago_display_max),
     .min = 1, .max = 10000, .def = 100, .unit = "cd/m²", .applies = "operator `drago`",
     /* A 3.3: L_d(L_wmax) = L_dmax / 100; banterle's default 100. */
     .help = "Drago's display maximum L_dmax: the frame's maximum maps to display_max / 100, so 100 maps it "
             "to 1 and smaller values leave headroom."},
    {.name = "tonemap.drago.scene_log_average", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.drago_scene_log_average), .min = 0, .max = 1e9, .def = 0,
     .unit = "frame luminance units", .applies = "operator `drago`",
     /* A 3.3: L_wa, the world adaptation luminance (the log-average); per frame it pumps a shot. */
     .help = "Drago's world adaptation luminance L_wa, in the frame's units before exposure; 0 = the frame's "
             "own log-average. A client that measured a whole shot passes the shot's, so that the curve does not "
             "change from frame to frame."},
    {.name = "tonemap.drago.scene_max", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.drago_scene_max),
     .min = 0, .max = 1e9, .def = 0, .unit = "frame luminance units", .applies = "operator `drago`",
     /* A 3.3: L_wmax, the maximum world luminance, which maps to display_max / 100. */
     .help = "Drago's maximum world luminance L_wmax, in the frame's units before exposure; 0 = the frame's own "
             "maximum. A client that measured a whole shot passes the shot's."},
    {.name = "tonemap.aces.input_scale", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.aces_input_scale),
     .min = 0, .min_exclusive = true, .max = 16, .def = 1, .unit = "", .applies = "operator `aces_narkowicz`",
     /* A 3.4: Narkowicz, "for the original ACES curve just multiply input by 0.6". */
     .help = "Multiplier on the exposed value before Narkowicz's ACES fit, whose input is pre-exposed so "
             "that 1 maps to about 0.8; 0.6 gives the original ACES range."},
    /* Hable's blog constants, out = U(bias x) / U(W) with U(x) = (x (A x + C B) + D E) / (x (A x + B) + D F)
     * - E / F (A 3.6; D 6). */
    {.name = "tonemap.hable.shoulder_strength", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_a),
     .min = 0, .min_exclusive = true, .max = 10, .def = 0.15, .unit = "", .applies = HABLE,
     .help = "Hable's A, the shoulder strength: how quickly highlights roll off."},
    {.name = "tonemap.hable.linear_strength", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_b),
     .min = 0, .min_exclusive = true, .max = 10, .def = 0.50, .unit = "", .applies = HABLE,
     .help = "Hable's B, the linear strength: the slope of the curve's middle section."},
    {.name = "tonemap.hable.linear_angle", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_c),
     .min = 0, .min_exclusive = true, .max = 10, .def = 0.10, .unit = "", .applies = HABLE,
     .help = "Hable's C, the linear angle: how straight the middle section is."},
    {.name = "tonemap.hable.toe_strength", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_d),
     .min = 0, .min_exclusive = true, .max = 10, .def = 0.20, .unit = "", .applies = HABLE,
     .help = "Hable's D, the toe strength: how much the shadows are compressed."},
    {.name = "tonemap.hable.toe_numerator", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_e),
     .min = 0, .max = 10, .def = 0.02, .unit = "", .applies = HABLE,
     .help = "Hable's E, the toe numerator; with toe_denominator it sets the toe's angle (E/F)."},
    {.name = "tonemap.hable.toe_denominator", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_f),
     .min = 0, .min_exclusive = true, .max = 10, .def = 0.30, .unit = "", .applies = HABLE,
     .help = "Hable's F, the toe denominator."},
    {.name = "tonemap.hable.white", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.hable_white), .min = 0,
     .min_exclusive = true, .max = 1000, .def = 11.2, .unit = "exposed luminance", .applies = HABLE,
     /* A 3.6 pitfall: the bias scales x but not W, so the output reaches 1 at W / bias and is clamped. */
     .help = "Hable's linear white point W: the curve is divided by its value at W, so the output reaches "
             "1 at white / exposure_bias and is clipped above."},
    {.name = "tonemap.hable.exposure_bias", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.hable_exposure_bias), .min = 0, .min_exclusive = true, .max = 100, .def = 2,
     .unit = "", .applies = HABLE,
     .help = "Multiplier on the input before Hable's curve (not on white), 2 in Hable's own code."},
    /* Lottes 2016: f(x) = x^a / (x^(a d) b + c), b and c solving f(midIn) = midOut, f(hdrMax) = 1;
     * defaults and ranges from tizian/tonemapper (A 3.7). */
    {.name = "tonemap.lottes.contrast", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.lottes_contrast),
     .min = 1, .max = 2, .def = 1.6, .unit = "", .applies = LOTTES,
     .help = "Lottes's contrast a, the power of the curve's toe."},
    {.name = "tonemap.lottes.shoulder", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.lottes_shoulder),
     .min = 0.01, .max = 2, .def = 0.977, .unit = "", .applies = LOTTES,
     .help = "Lottes's shoulder d, which bends the highlights towards hdr_max."},
    {.name = "tonemap.lottes.hdr_max", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.lottes_hdr_max),
     .min = 1, .max = 1000, .def = 8, .unit = "exposed luminance", .applies = LOTTES,
     .help = "The exposed luminance that maps to exactly 1 (hdrMax); brighter values are clipped."},
    {.name = "tonemap.lottes.mid_in", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.lottes_mid_in),
     .min = 0, .min_exclusive = true, .max = 1, .def = 0.18, .unit = "exposed luminance", .applies = LOTTES,
     .help = "Input mid grey (midIn), which the curve maps to mid_out. Must be below hdr_max."},
    {.name = "tonemap.lottes.mid_out", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.lottes_mid_out),
     .min = 0, .min_exclusive = true, .max = BELOW(1), .def = 0.267, .unit = "", .applies = LOTTES,
     .help = "Output value of mid_in (midOut)."},
    /* Uchimura 2017: toe m (x/m)^c + b, linear m + a (x - m), shoulder P - (P - S1) exp(CP (x - S0));
     * defaults and ranges from tizian/tonemapper's gran_turismo.h (A 3.8). */
    {.name = "tonemap.uchimura.max_brightness", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.uchimura_max_brightness), .min = 1, .max = 100, .def = 1, .unit = "",
     .applies = UCHIMURA,
     .help = "Uchimura's maximum brightness P, the output that the shoulder approaches."},
    {.name = "tonemap.uchimura.contrast", .type = HP_PARAM_NUMBER, .offset = NUMBER_AT(tonemap.uchimura_contrast),
     .min = 0, .min_exclusive = true, .max = 5, .def = 1, .unit = "", .applies = UCHIMURA,
     .help = "Uchimura's contrast a, the slope of the linear section."},
    {.name = "tonemap.uchimura.linear_start", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.uchimura_linear_start), .min = 0, .min_exclusive = true, .max = 1, .def = 0.22,
     .unit = "exposed luminance", .applies = UCHIMURA,
     .help = "Uchimura's m, where the linear section starts; the toe runs below it. Must be below "
             "max_brightness."},
    {.name = "tonemap.uchimura.linear_length", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.uchimura_linear_length), .min = 0.01, .max = 0.99, .def = 0.4, .unit = "",
     .applies = UCHIMURA,
     .help = "Uchimura's l, the length of the linear section as a share of the room between linear_start "
             "and max_brightness."},
    {.name = "tonemap.uchimura.black_tightness", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.uchimura_black_tightness), .min = 1, .max = 3, .def = 1.33, .unit = "",
     .applies = UCHIMURA,
     .help = "Uchimura's c, the power of the toe: higher values press the blacks down harder."},
    {.name = "tonemap.uchimura.black_offset", .type = HP_PARAM_NUMBER,
     .offset = NUMBER_AT(tonemap.uchimura_black_offset), .min = 0, .max = 1, .def = 0, .unit = "",
     .applies = UCHIMURA,
     .help = "Uchimura's b, added to the toe's output to lift the blacks."},

    /* --- gamma: the output encoding (A 4; D 7) --- */
    {.name = "gamma.mode", .type = HP_PARAM_ENUM, .offset = ENUM_AT(gamma.mode), .def = HP_GAMMA_LOCAL,
     .choices = gamma_modes, .unit = "",
     /* Kwon et al. 2011 via Engel's KGC 2013 article (A 4); per channel by default because applying it to
      * Y alone over-saturates on real frames (D 7). sRGB: IEC 61966-2-1. */
     .help = "Output encoding: `local` raises each RGB channel to Kwon's per-pixel exponent 0.444 + 0.045 "
             "ln(L_an + 0.6034), where L_an is the tone-mapped luminance (exponents 0.421 to 0.465); "
             "`local_luminance` applies that exponent to luminance alone (the original form, which "
             "over-saturates); `srgb` is the standard sRGB curve; `linear` leaves values linear."},
    {.name = "gamma.radius", .type = HP_PARAM_INTEGER, .offset = U32_AT(gamma.radius), .min = 0, .max = 64,
     .def = 0, .unit = "pixels", .applies = "modes `local`, `local_luminance`",
     .help = "Radius of the neighbourhood whose blurred luminance is the adaptation luminance L_an; 0 uses "
             "each pixel's own luminance."},

    /* --- output: quantization and encoding --- */
    {.name = "output.format", .type = HP_PARAM_ENUM, .offset = ENUM_AT(output.format), .def = HP_OUTPUT_WEBP,
     .choices = output_formats, .unit = "",
     .help = "Image format of the response: `webp` (libwebp), `png` (8 or 16 bits; HDR displays tagged with cICP), "
             "`jpeg` (libjpeg-turbo, 8 bits, for review tools and dashboards), `avif` (libavif with aom: 8, 10 or 12 "
             "bits, tagged with CICP; an OCIO HDR display's PQ or HLG)."},
    {.name = "output.quality", .type = HP_PARAM_INTEGER, .offset = U32_AT(output.quality), .min = 0, .max = 100,
     .def = 75, .unit = "", .applies = "format `webp` when lossless is false, `jpeg`, `avif`",
     .help = "WebP, JPEG and AVIF quality: higher is larger, slower and closer to the tone-mapped frame. WebP's "
             "default 75 is libwebp's own (cwebp's): on a 4K render 0.71-0.76 times the encode time of 88 on the "
             "H200 host, for a file 40% smaller at 35.9 dB PSNR against 39.1; use 85-90 for a closer look, or PNG. "
             "AVIF: the quantizer (100 - quality) x 63 / 100 (libavif 1.0's mapping), 100 lossless."},
    {.name = "output.chroma", .type = HP_PARAM_ENUM, .offset = ENUM_AT(output.chroma), .def = HP_CHROMA_AUTO,
     .choices = output_chromas, .unit = "", .applies = "format `jpeg`, `avif`",
     .help = "Chroma subsampling of JPEG and AVIF: `420` (a quarter of the colour samples) or `444` (all); "
             "`auto`: 4:2:0 for JPEG, as review tools expect, 4:4:4 for AVIF, whose HDR grades keep their colour."},
    {.name = "output.lossless", .type = HP_PARAM_BOOL, .offset = BOOL_AT(output.lossless), .def = 0, .unit = "",
     .applies = "format `webp`",
     .help = "Encode WebP losslessly, ignoring quality. PNG is always lossless."},
    {.name = "output.effort", .type = HP_PARAM_INTEGER, .offset = U32_AT(output.effort), .min = 0, .max = 6,
     .def = 2, .unit = "",
     .help = "Encoder effort from 0 (fastest) to 6 (smallest file): the lossy WebP method 0, 0, 0, 1, 2, 4, 6 "
             "(lossless: the preset level round(1.5 effort)); for PNG, 0 to 2 a fast run-length deflate (0 also "
             "filters rows with Sub alone), 3 to 6 zlib's levels 4, 6, 8, 9: slower, smaller on flat graphics "
             "and text."},
    {.name = "output.bit_depth", .type = HP_PARAM_INTEGER, .offset = U32_AT(output.bit_depth), .min = 8,
     .max = 16, .def = 8, .choices = bit_depths, .unit = "bits",
     .help = "Bits per channel of the encoded image: 16 only with format png, 10 and 12 only with avif."},
    /* An alpha at 1 everywhere (a beauty render's) looks the same left out: PNG then has a quarter less to
     * filter and deflate, and libwebp skips its scan and clean-up of the plane (it never stores an opaque
     * alpha anyway). The tone pass finds out as it writes the alpha (tone_state's translucent word: within
     * 0.5% of its time on opaque frames, 1-4% on translucent ones, on the H200). */
    {.name = "output.alpha", .type = HP_PARAM_ENUM, .offset = ENUM_AT(output.alpha), .def = HP_ALPHA_AUTO,
     .choices = output_alphas, .unit = "",
     .help = "Whether the image carries the frame's alpha: `auto` when the frame has alpha and some of it is "
             "below 1 after quantization (an alpha opaque everywhere is left out: PNG is then RGB); `keep` "
             "whenever the frame has alpha (PNG RGBA; lossy and lossless WebP never store an opaque alpha); "
             "`drop` never (the colour is written as it is, not composited)."},
    /* Issue 17: the working space becomes the output's primaries (pipeline/colorspace.h), so the fold into
     * the display's gamut is the one the tone stage already makes. */
    {.name = "output.colorspace", .type = HP_PARAM_ENUM, .offset = ENUM_AT(output.colorspace),
     .def = HP_OUTPUT_SRGB, .choices = output_colorspaces, .unit = "",
     .help = "The display the image is made for: `srgb` (Rec.709 primaries), `display_p3` (P3 primaries, D65; "
             "the sRGB curve under gamma.mode `srgb`) or `rec2020` (BT.2020 primaries; 16-bit PNG only). Its "
             "primaries are the working space: the frame is converted into them where it is read, and a colour "
             "outside them is brought in by the existing gamut fold (toward the grey of its own luminance, "
             "luminance and hue kept), not clipped per channel. PNG carries an ICC profile (iCCP) with cHRM and "
             "gAMA beside it for `display_p3` and `rec2020`, the sRGB chunk for `srgb`; WebP an ICC profile "
             "(ICCP chunk) for `display_p3`."},
    {.name = "output.dither", .type = HP_PARAM_BOOL, .offset = BOOL_AT(output.dither), .def = 1, .unit = "",
     .help = "Add triangular noise of one quantization step before rounding, so that smooth gradients do "
             "not band."},
    /* Issue 34: a studio's OCIO display/view in place of the operator, the gamut fold and the transfer. The
     * names are the config's, checked by hp_params_ocio_check once a config is loaded. */
    {.name = "ocio.display", .type = HP_PARAM_STRING, .offset = STRING_AT(ocio.display), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = "an OCIO config loaded",
     .help = "A display of the daemon's OCIO config (`GET /v1/ocio` lists them): the frame goes through its "
             "view's transform instead of `tonemap.operator`, the gamut fold and the output transfer. \"\": the "
             "config's default display when `ocio.view` or `ocio.looks` is set."},
    {.name = "ocio.view", .type = HP_PARAM_STRING, .offset = STRING_AT(ocio.view), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = "an OCIO config loaded",
     .help = "A view of `ocio.display` (`GET /v1/ocio`). \"\": the display's default view when the display is set."},
    {.name = "ocio.looks", .type = HP_PARAM_STRING, .offset = STRING_AT(ocio.looks), .min = 0,
     .max = HP_PARAM_STRING_MAX, .unit = "", .applies = "an OCIO config loaded",
     .help = "Looks of the config in OCIO's syntax (`+grade, -shot`), applied in place of the view's own. "
             "\"\": the view's own looks."},
    /* Issue 20: the GPU's stream is a different (valid) deflate stream of the same filtered rows, so the
     * decoded samples are the CPU path's exactly; only the compressed bytes cross the bus. auto is the
     * default: on the benchmark host it frees 270 ms of CPU a 4K frame for files of the same size. */
    {.name = "output.png_encoder", .type = HP_PARAM_ENUM, .offset = ENUM_AT(output.png_encoder),
     .def = HP_PNG_ENCODER_AUTO, .choices = png_encoders, .unit = "", .applies = "format `png`",
     .help = "Who filters and deflates a PNG: `cpu` the encoding pool (output.effort's deflate); `gpu` the GPU "
             "right after the tone pass (libpng's filter choice, a deflate stream of 32 KiB segments with "
             "their own Huffman codes; only the compressed bytes are read back; output.effort is then "
             "ignored); `auto` the GPU where the device runs those passes (workgroups of up to 1024 "
             "invocations, fewer where the device has fewer, with 20-24 KiB of shared memory: Vulkan promises "
             "only 16 KiB, desktop GPUs and lavapipe give 32 KiB or more) and `output.effort` is at most 2 (the CPU's run-length levels, whose file sizes the "
             "GPU's match; higher efforts ask for zlib's smaller files), else the CPU, and the CPU for a frame the "
             "GPU path cannot take (over 65535 segments of 32 KiB, or scratch past the device's memory). The decoded samples and the channels are the same "
             "either way (`output.alpha` `auto` included: the passes read the tone pass's finding on the GPU)."},
};

const size_t hp_param_schema_count = sizeof(hp_param_schema) / sizeof(hp_param_schema[0]);

/* --- Reading and writing fields ---------------------------------------------------------------------- */

static void *at(hp_params *p, size_t offset) { return (char *)p + offset; }
static const void *cat(const hp_params *p, size_t offset) { return (const char *)p + offset; }

static size_t choice_count(const char *const *choices)
{
    size_t n = 0;
    while (choices && choices[n])
        n++;
    return n;
}

static uint32_t get_u32(const hp_params *p, size_t offset)
{
    uint32_t v;
    memcpy(&v, cat(p, offset), sizeof(v));
    return v;
}

/* Enums go through memcpy of a uint32_t: the same bytes for the enum fields as for analysis.variant
 * (ENUM_AT proved both are four bytes), with no aliasing question. */
static void put_u32(hp_params *p, size_t offset, uint32_t v) { memcpy(at(p, offset), &v, sizeof(v)); }

/* The field's value as a number: enums as their index, bools as 0/1; strings have none (NaN). */
static double get_value(const hp_params *p, const hp_param_def *def)
{
    switch (def->type) {
    case HP_PARAM_NUMBER:
    case HP_PARAM_NUMBER_OR_AUTO: return *(const double *)cat(p, def->offset);
    case HP_PARAM_INTEGER:
    case HP_PARAM_ENUM: return get_u32(p, def->offset);
    case HP_PARAM_BOOL: return *(const bool *)cat(p, def->offset);
    case HP_PARAM_STRING: return NAN;
    }
    return NAN;
}

/* --- Formatting numbers, ranges and expectations ------------------------------------------------------- */

/* The shortest text that reads back as v: "0.18", "1e9", "-16", "10000". */
static void format_number(double v, char *out, size_t size)
{
    if (isnan(v)) {
        snprintf(out, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, size, v > 0 ? "infinity" : "-infinity");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e7) {
        snprintf(out, size, "%.0f", v == 0 ? 0.0 : v);
        return;
    }
    char buf[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof(buf), "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* "1e+09" -> "1e9", "1e-05" -> "1e-5" */
    char *e = strchr(buf, 'e');
    if (e) {
        char *digits = e + 1;
        bool negative = *digits == '-';
        if (*digits == '+' || *digits == '-')
            digits++;
        while (digits[0] == '0' && digits[1])
            digits++;
        snprintf(e + 1, sizeof(buf) - (size_t)(e + 1 - buf), "%s%s", negative ? "-" : "", digits);
    }
    snprintf(out, size, "%s", buf);
}

/* The upper bound as written and whether it is exclusive (see BELOW). */
static double upper_bound(const hp_param_def *def, bool *exclusive);
double hp_param_max(const hp_param_def *def, bool *exclusive) { return upper_bound(def, exclusive); }

static double upper_bound(const hp_param_def *def, bool *exclusive)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%.15g", def->max);
    double shown = strtod(buf, NULL);
    *exclusive = shown != def->max;
    return shown;
}

/* "[0, 1e9]", "(0, 1]", "[0, 100)", or for an integer with choices "8, 16". */
void hp_param_choices_text(const hp_param_def *def, char *out, size_t size)
{
    /* A list that does not fit (a daemon's many studio looks) ends with where the rest is, never mid-name. */
    static const char more[] = ", ... (GET /v1/params lists them all)";
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; def->choices[i]; i++) {
        size_t need = strlen(def->choices[i]) + (i ? 2 : 0);
        if (n + need + sizeof more > size) {
            snprintf(out + n, size - n, "%s", more);
            return;
        }
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "", def->choices[i]);
    }
}

static void range_text(const hp_param_def *def, char *out, size_t size)
{
    if (def->choices) {
        hp_param_choices_text(def, out, size);
        return;
    }
    bool max_exclusive;
    double max = upper_bound(def, &max_exclusive);
    char lo[32], hi[32];
    format_number(def->min, lo, sizeof(lo));
    format_number(max, hi, sizeof(hi));
    snprintf(out, size, "%c%s, %s%c", def->min_exclusive ? '(' : '[', lo, hi, max_exclusive ? ')' : ']');
}

/* A string parameter's length bounds: "at most 255 bytes", or "1 to 255 bytes" when it may not be empty. */
static void string_length_text(const hp_param_def *def, char *out, size_t size)
{
    if (def->min > 0)
        snprintf(out, size, "%.0f to %.0f bytes", def->min, def->max);
    else
        snprintf(out, size, "at most %.0f bytes", def->max);
}

/* What the parameter accepts, completing "<name> must be ...". */
static void expectation(const hp_param_def *def, char *out, size_t size)
{
    char range[256];
    range_text(def, range, sizeof(range));
    switch (def->type) {
    case HP_PARAM_NUMBER: snprintf(out, size, "a number in %s", range); return;
    case HP_PARAM_NUMBER_OR_AUTO: snprintf(out, size, "a number in %s or \"auto\"", range); return;
    case HP_PARAM_INTEGER:
        if (def->choices)
            snprintf(out, size, "one of %s", range);
        else
            snprintf(out, size, "an integer in %s", range);
        return;
    case HP_PARAM_BOOL: snprintf(out, size, "true or false"); return;
    case HP_PARAM_ENUM: snprintf(out, size, "one of %s", range); return;
    case HP_PARAM_STRING: {
        char length[64];
        string_length_text(def, length, sizeof(length));
        snprintf(out, size, "a string of %s without control characters", length);
        return;
    }
    }
    snprintf(out, size, "valid");
}

static hp_code fail_expected(const hp_param_def *def, hp_err *err, const char *got_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "<name> must be <expectation>, got <what>": the one shape of every value error. */
static hp_code fail_expected(const hp_param_def *def, hp_err *err, const char *got_fmt, ...)
{
    char expect[300], got[120];
    expectation(def, expect, sizeof(expect));
    va_list ap;
    va_start(ap, got_fmt);
    vsnprintf(got, sizeof(got), got_fmt, ap);
    va_end(ap);
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, def->name, "%s must be %s, got %s", def->name, expect,
                         got);
}

static hp_code fail_got_number(const hp_param_def *def, double v, hp_err *err)
{
    char text[40];
    format_number(v, text, sizeof(text));
    return fail_expected(def, err, "%s", text);
}

/* --- Strings ------------------------------------------------------------------------------------------- */

/* Whether len bytes of text are a value the string parameter takes. When not, got says what they are
 * instead, completing "<name> must be ..., got <got>". The text is echoed in JSON and written into log
 * lines and error messages, so it must be UTF-8 (jansson refuses anything else) and free of control
 * characters (C0, DEL and C1), which no channel name needs and which would break a log line. */
static bool string_allowed(const hp_param_def *def, const char *text, size_t len, char *got, size_t size)
{
    if ((double)len > def->max) {
        snprintf(got, size, "%zu bytes", len);
        return false;
    }
    if ((double)len < def->min) {
        snprintf(got, size, "an empty string");
        return false;
    }
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t step = hp_utf8_sequence(u + i, len - i, &cp);
        if (step == 0) {
            snprintf(got, size, "a byte 0x%02X that is not UTF-8 text at byte %zu", u[i], i + 1);
            return false;
        }
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
            snprintf(got, size, "the control character U+%04X at byte %zu", (unsigned)cp, i + 1);
            return false;
        }
        i += step;
    }
    return true;
}

/* --- The schema's interface ---------------------------------------------------------------------------- */

const hp_param_def *hp_param_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < hp_param_schema_count; i++)
        if (strcmp(hp_param_schema[i].name, name) == 0)
            return &hp_param_schema[i];
    return NULL;
}

bool hp_tone_operator_on_rgb(hp_tone_operator op)
{
    /* D 6: these need the colour channels (matrices, min/max channel); the rest are curves on Y. */
    return op == HP_TONE_ACES_HILL || op == HP_TONE_AGX || op == HP_TONE_KHRONOS_NEUTRAL || op == HP_TONE_FALSE_COLOR;
}

void hp_params_defaults(hp_params *p)
{
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        switch (def->type) {
        case HP_PARAM_NUMBER_OR_AUTO:
            *(bool *)at(p, def->aux_offset) = def->def_auto;
            /* fall through */
        case HP_PARAM_NUMBER: *(double *)at(p, def->offset) = def->def; break;
        case HP_PARAM_INTEGER:
        case HP_PARAM_ENUM: put_u32(p, def->offset, (uint32_t)def->def); break;
        case HP_PARAM_BOOL: *(bool *)at(p, def->offset) = def->def != 0; break;
        case HP_PARAM_STRING:
            snprintf(at(p, def->offset), HP_PARAM_STRING_MAX + 1, "%s", def->def_text ? def->def_text : "");
            break;
        }
    }
}

/* Whether v is an allowed value of a number, integer or enum parameter. */
static bool value_allowed(const hp_param_def *def, double v)
{
    if (!isfinite(v))
        return false;
    switch (def->type) {
    case HP_PARAM_NUMBER:
    case HP_PARAM_NUMBER_OR_AUTO:
        return (def->min_exclusive ? v > def->min : v >= def->min) && v <= def->max;
    case HP_PARAM_INTEGER:
        if (v != floor(v) || v < def->min || v > def->max)
            return false;
        if (def->choices) {
            for (size_t i = 0; def->choices[i]; i++)
                if (strtod(def->choices[i], NULL) == v)
                    return true;
            return false;
        }
        return true;
    case HP_PARAM_ENUM: return v >= 0 && v < (double)choice_count(def->choices) && v == floor(v);
    case HP_PARAM_BOOL: return v == 0 || v == 1;
    case HP_PARAM_STRING: return false; /* no number stands for a name */
    }
    return false;
}

hp_code hp_param_set_number(hp_params *p, const hp_param_def *def, double value, hp_err *err)
{
    /* A number never picks an enum choice or a boolean, nor is it a string: the wire spells those as text. */
    if (def->type == HP_PARAM_ENUM || def->type == HP_PARAM_BOOL || def->type == HP_PARAM_STRING ||
        !value_allowed(def, value))
        return fail_got_number(def, value, err);
    switch (def->type) {
    case HP_PARAM_NUMBER_OR_AUTO:
        *(bool *)at(p, def->aux_offset) = false;
        /* fall through */
    case HP_PARAM_NUMBER: *(double *)at(p, def->offset) = value; break;
    case HP_PARAM_INTEGER: put_u32(p, def->offset, (uint32_t)value); break;
    default: break;
    }
    return HP_OK;
}

hp_code hp_param_set_bool(hp_params *p, const hp_param_def *def, bool value, hp_err *err)
{
    if (def->type != HP_PARAM_BOOL)
        return fail_expected(def, err, "%s", value ? "true" : "false");
    *(bool *)at(p, def->offset) = value;
    return HP_OK;
}

/* A number as JSON writes it (optional minus, digits, fraction, exponent), so that a query string reads
 * like the JSON body: no hex, no "inf" or "nan", no leading '+' or spaces. */
static bool parse_number(const char *text, double *out)
{
    const char *s = text;
    if (*s == '-')
        s++;
    if (!(*s >= '0' && *s <= '9'))
        return false;
    for (const char *c = s; *c; c++)
        if (!strchr("0123456789.eE+-", *c))
            return false;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end != '\0')
        return false;
    *out = v; /* overflow gives infinity, which the range check rejects with the value shown */
    return true;
}

/* The user's text in a message: quoted, and cut short when long. */
static void quote_text(const char *text, char *out, size_t size)
{
    size_t len = strlen(text);
    if (len > 60)
        snprintf(out, size, "\"%.60s...\"", text);
    else
        snprintf(out, size, "\"%s\"", text);
}

hp_code hp_param_set_string(hp_params *p, const hp_param_def *def, const char *value, hp_err *err)
{
    char quoted[80];
    quote_text(value, quoted, sizeof(quoted));
    switch (def->type) {
    case HP_PARAM_ENUM:
        for (size_t i = 0; def->choices[i]; i++) {
            if (strcmp(def->choices[i], value) == 0) {
                put_u32(p, def->offset, (uint32_t)i);
                if (def->open_offset)
                    *(char *)at(p, def->open_offset) = '\0';
                return HP_OK;
            }
        }
        /* An open enum keeps another name for whoever can say what it is: hp_params_ocio_check once a config is
         * loaded, or the daemon behind hdrpost. */
        if (def->open_offset && def->open_names()) {
            const hp_param_def text = {.type = HP_PARAM_STRING, .min = 1, .max = HP_PARAM_STRING_MAX};
            char got[120];
            size_t len = strlen(value);
            if (!string_allowed(&text, value, len, got, sizeof(got)))
                return fail_expected(def, err, "%s", got);
            memcpy(at(p, def->open_offset), value, len + 1);
            put_u32(p, def->offset, 0);
            return HP_OK;
        }
        return fail_expected(def, err, "%s", quoted);
    case HP_PARAM_BOOL:
        if (strcmp(value, "true") == 0 || strcmp(value, "false") == 0)
            return hp_param_set_bool(p, def, value[0] == 't', err);
        return fail_expected(def, err, "%s", quoted);
    case HP_PARAM_STRING: {
        char got[120];
        size_t len = strlen(value);
        if (!string_allowed(def, value, len, got, sizeof(got)))
            return fail_expected(def, err, "%s", got);
        memcpy(at(p, def->offset), value, len + 1); /* len <= def->max <= HP_PARAM_STRING_MAX */
        return HP_OK;
    }
    case HP_PARAM_NUMBER_OR_AUTO:
        if (strcmp(value, "auto") == 0) {
            *(bool *)at(p, def->aux_offset) = true;
            return HP_OK;
        }
        /* fall through */
    case HP_PARAM_NUMBER:
    case HP_PARAM_INTEGER: {
        double v;
        if (!parse_number(value, &v))
            return fail_expected(def, err, "%s", quoted);
        return hp_param_set_number(p, def, v, err);
    }
    }
    return fail_expected(def, err, "%s", quoted);
}

/* --- Rules that span fields ---------------------------------------------------------------------------- */

typedef struct param_rule {
    const char *field; /* the parameter the error names */
    const char *doc;   /* for docs/PARAMETERS.md */
    hp_code (*check)(const hp_params *p, const char *field, hp_err *err);
} param_rule;

static hp_code rule_histogram_range(const hp_params *p, const char *field, hp_err *err)
{
    const hp_analysis_params *a = &p->analysis;
    if (a->histogram_max_log2 > a->histogram_min_log2)
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (%g) must be above analysis.histogram_min_log2 (%g)", field, a->histogram_max_log2,
                         a->histogram_min_log2);
}

static hp_code rule_percentiles(const hp_params *p, const char *field, hp_err *err)
{
    const hp_exposure_params *e = &p->exposure;
    if (e->low_percent < e->high_percent)
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (%g) must be below exposure.high_percent (%g): the histogram mean needs pixels "
                         "between them",
                         field, e->low_percent, e->high_percent);
}

static hp_code rule_bit_depth(const hp_params *p, const char *field, hp_err *err)
{
    uint32_t bits = p->output.bit_depth;
    hp_output_format f = p->output.format;
    if (bits == 8 || (bits == 16 && f == HP_OUTPUT_PNG) || ((bits == 10 || bits == 12) && f == HP_OUTPUT_AVIF))
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s %u needs output.format %s (WebP and JPEG store 8 bits per channel, PNG 8 or 16, AVIF 8, "
                         "10 or 12), got format %s", field, bits, bits == 16 ? "png" : "avif",
                         (size_t)f < choice_count(output_formats) ? output_formats[f] : "?");
}

/* BT.2020's gamut is wide enough that 8 bits band visibly across it (BT.2020 itself specifies 10 or 12 bits). */
static hp_code rule_rec2020_png16(const hp_params *p, const char *field, hp_err *err)
{
    if (p->output.colorspace != HP_OUTPUT_REC2020 || (p->output.format == HP_OUTPUT_PNG && p->output.bit_depth == 16) ||
        (p->output.format == HP_OUTPUT_AVIF && p->output.bit_depth > 8))
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s rec2020 needs output.format png with output.bit_depth 16, or avif with 10 or 12 (8 bits "
                         "band across BT.2020's gamut), got format %s with %u bits; use display_p3 for 8-bit, WebP or "
                         "JPEG output",
                         field,
                         (size_t)p->output.format < choice_count(output_formats) ? output_formats[p->output.format]
                                                                                  : "?",
                         p->output.bit_depth);
}

/* The thin lens images nothing at or inside its focal length (S1 - f in the denominator of A 5.1). */
static hp_code rule_focus_beyond_focal(const hp_params *p, const char *field, hp_err *err)
{
    if (!p->dof.enabled || p->dof.focus_auto)
        return HP_OK;
    double f = p->dof.focal_length_mm, N;
    if (p->dof.focal_length_auto)
        hp_dof_lens_values(p->dof.lens, &f, &N);
    if (p->dof.focus_distance_m > f * 1e-3)
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s %g m is not beyond the focal length (%g mm): a lens focuses only on things farther "
                         "than its focal length",
                         field, p->dof.focus_distance_m, f);
}

/* Lottes's b and c (A 3.7). The curve f(x) = x^a / (x^(a d) b + c) reaches both points only when
 * hdrMax > midIn (else the shared denominator (hdrMax^(ad) - midIn^(ad)) midOut is 0), and it stays
 * finite and rising from f(0) = 0 only when b > 0 and c >= 0; otherwise the denominator crosses 0 at
 * some x > 0 and the output goes infinite or negative there. With the ranges of the table that bounds
 * midOut: b > 0 <=> midOut > (midIn/hdrMax)^a, and, for d < 1, c > 0 <=> midOut < (midIn/hdrMax)^(a(1-d))
 * [derived: factor x^(ad) out of each numerator]. */
static hp_code rule_lottes_mid(const hp_params *p, const char *field, hp_err *err)
{
    const hp_tonemap_params *t = &p->tonemap;
    if (t->lottes_mid_in < t->lottes_hdr_max)
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (%g) must be below tonemap.lottes.hdr_max (%g): the curve maps mid_in to mid_out "
                         "and hdr_max to 1",
                         field, t->lottes_mid_in, t->lottes_hdr_max);
}

/* Lottes' b and c solve f(mid_in) = mid_out and f(hdr_max) = 1 (algorithms.md 3.7, Lottes GDC 2016). */
void hp_lottes_constants(const hp_tonemap_params *t, double *b, double *c)
{
    double a = t->lottes_contrast, d = t->lottes_shoulder, hdr = t->lottes_hdr_max;
    double mi = t->lottes_mid_in, mo = t->lottes_mid_out;
    double denom = (pow(hdr, a * d) - pow(mi, a * d)) * mo;
    *b = (-pow(mi, a) + pow(hdr, a) * mo) / denom;
    *c = (pow(hdr, a * d) * pow(mi, a) - pow(hdr, a) * pow(mi, a * d) * mo) / denom;
}

static hp_code rule_raw_size(const hp_params *p, const char *field, hp_err *err)
{
    if ((p->input.width == 0) == (p->input.height == 0))
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "input.width (%u) and input.height (%u) go together: both for raw samples, neither for a file",
                         p->input.width, p->input.height);
}

/* The OpenEXR channel names, in schema order, for the rules below. */
static const char *exr_name(const hp_params *p, int i, const char **field)
{
    static const char *const fields[] = {"input.layer",     "input.channel_r", "input.channel_g",
                                         "input.channel_b", "input.channel_a", "input.depth"};
    const hp_input_params *in = &p->input;
    const char *const values[] = {in->layer, in->channel_r, in->channel_g, in->channel_b, in->channel_a, in->depth};
    *field = fields[i];
    return values[i];
}

#define EXR_NAME_COUNT 6

/* The decoder takes red, green and blue by name only all three at once (api/codecs/image.h); one or two would
 * leave it to guess the rest. */
static hp_code rule_colour_channels(const hp_params *p, const char *field, hp_err *err)
{
    (void)field;
    const char *rgb[3], *names[3];
    int set = 0, given = -1, missing = -1;
    for (int i = 0; i < 3; i++) {
        rgb[i] = exr_name(p, 1 + i, &names[i]);
        if (rgb[i][0])
            set++, given = given < 0 ? i : given;
        else
            missing = missing < 0 ? i : missing;
    }
    if (set == 0 || set == 3)
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, names[missing],
                         "%s is missing beside %s (\"%.100s\"): input.channel_r, input.channel_g and "
                         "input.channel_b name the colour together; to take one layer's R, G and B, give "
                         "input.layer instead",
                         names[missing], names[given], rgb[given]);
}

/* Named channels override a layer in the decoder, so a request with both would have its layer ignored
 * without a word. */
static hp_code rule_layer_or_channels(const hp_params *p, const char *field, hp_err *err)
{
    if (!p->input.layer[0] || !p->input.channel_r[0])
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (\"%.100s\") and input.channel_r, input.channel_g and input.channel_b each choose the "
                         "colour channels: give a layer or the three channels, not both",
                         field, p->input.layer);
}

static hp_code rule_raw_names(const hp_params *p, const char *field, hp_err *err)
{
    (void)field;
    if (p->input.width == 0)
        return HP_OK;
    for (int i = 0; i < EXR_NAME_COUNT; i++) {
        const char *name;
        const char *value = exr_name(p, i, &name);
        if (value[0])
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, name,
                                 "%s (\"%.100s\") names a channel of an OpenEXR file, but the body is raw samples "
                                 "(input.width %u), which have no names",
                                 name, value, p->input.width);
    }
    return HP_OK;
}

static hp_code rule_lottes_pole(const hp_params *p, const char *field, hp_err *err)
{
    const hp_tonemap_params *t = &p->tonemap;
    double a = t->lottes_contrast, d = t->lottes_shoulder, h = t->lottes_hdr_max, m = t->lottes_mid_in;
    double o = t->lottes_mid_out;
    double b, c;
    hp_lottes_constants(t, &b, &c);
    if (b > 0 && c >= 0 && isfinite(b) && isfinite(c))
        return HP_OK;
    double lo = pow(m / h, a), hi = d < 1 ? pow(m / h, a * (1 - d)) : 1;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (%g) must be in (%.6g, %.6g) for these contrast, shoulder, mid_in and hdr_max: "
                         "outside it the curve has a pole (b = %.6g, c = %.6g)",
                         field, o, lo, hi, b, c);
}

/* Uchimura (A 3.8): l0 = (P - m) l / a, S1 = m + a l0 = m + (P - m) l, and the shoulder's
 * C2 = a P / (P - S1) needs S1 < P. With l <= 0.99 < 1 that holds exactly when m < P [derived]; the
 * linear section then ends at m + (P - m) l in output, inside (m, P). In the table's ranges only
 * m = P = 1 breaks it, and the shoulder would divide by zero. */
static hp_code rule_uchimura_linear(const hp_params *p, const char *field, hp_err *err)
{
    const hp_tonemap_params *t = &p->tonemap;
    double m = t->uchimura_linear_start, P = t->uchimura_max_brightness, l = t->uchimura_linear_length;
    /* The second test catches m a few ulps below P, where S1 would round to P. */
    if (m < P && m + (P - m) * l < P)
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (%g) must be below tonemap.uchimura.max_brightness (%g): the linear section ends "
                         "at linear_start + linear_length * (max_brightness - linear_start) and the shoulder "
                         "needs room above it",
                         field, m, P);
}

/* Hable (A 3.6): the output is U(bias x) / U(W); U(0) = 0 and U tends to 1 - E/F, so with E >= F the
 * curve can end at or below 0 and the division flips or explodes [derived]. */
static double hable_u(const hp_tonemap_params *t, double x)
{
    double A = t->hable_a, B = t->hable_b, C = t->hable_c, D = t->hable_d, E = t->hable_e, F = t->hable_f;
    return (x * (A * x + C * B) + D * E) / (x * (A * x + B) + D * F) - E / F;
}

static hp_code rule_hable_white(const hp_params *p, const char *field, hp_err *err)
{
    double u = hable_u(&p->tonemap, p->tonemap.hable_white);
    if (u > 0 && isfinite(u))
        return HP_OK;
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                         "%s (%g) with tonemap.hable.toe_denominator (%g) makes the curve at white %g equal %.6g, "
                         "but it must be positive: lower toe_numerator or raise toe_denominator",
                         field, p->tonemap.hable_e, p->tonemap.hable_f, p->tonemap.hable_white, u);
}

/* --- OCIO: the request's names and what its view replaces (pipeline/params_ocio.h keeps the config) -------- */

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

/* hdrpostd's own name for a colour space ("acescg") given with a view: the config's space spelled the same but
 * for case ("ACEScg") is most likely what was meant, and the config names its spaces its own way. */
static void config_space_hint(const char *own, char *hint, size_t size)
{
    const hp_ocio_config *c = hp_params_ocio_config();
    if (!c)
        return;
    for (size_t i = 0; i < hp_ocio_count(c, HP_OCIO_COLORSPACES); i++)
        if (!strcasecmp(hp_ocio_name(c, HP_OCIO_COLORSPACES, i), own)) {
            snprintf(hint, size, "; the config's own colour space \"%s\" is named as the config spells it",
                     hp_ocio_name(c, HP_OCIO_COLORSPACES, i));
            return;
        }
    snprintf(hint, size, "; to name the frame's colour space, give one of the config's (GET /v1/ocio lists them; "
             "its scene_linear, \"%s\", when left out)", hp_ocio_default_input(c));
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
    char hint[HP_OCIO_NAME_MAX + 160] = "";
    if (!strcmp(name, "input.colorspace"))
        config_space_hint(input_colorspaces[now < HP_COLORSPACE_COUNT + 1 ? now : 0], hint, sizeof hint);
    return hp_fail_word(err, HP_ERR_INVALID_ARGUMENT, "ocio_conflict", name,
                        "%s does not apply with an OCIO view: the config's display/view transform takes the place "
                        "of the tone operator, the gamut fold, the display gamma and the output's colour space; "
                        "leave %s out (or at its default) or leave out ocio.*%s", name, name, hint);
}

hp_code hp_params_ocio_key(const hp_params *p, hp_ocio_view_key *key, hp_err *err)
{
    return hp_params_ocio_names(p->ocio.input, p->ocio.display, p->ocio.view, p->ocio.looks, first_field(p), key, err);
}

hp_code hp_params_ocio_check(const hp_params *p, hp_err *err)
{
    if (!hp_params_ocio_on(p))
        return HP_OK;
    hp_ocio_view_key key;
    /* Without a config, hdrpost leaves the names to the daemon that has one; the conflicts below need none. */
    hp_code code = hp_params_ocio_unchecked() ? HP_OK : hp_params_ocio_key(p, &key, err);
    /* input.colorspace with one of hdrpostd's own spaces too: through a view the frame is in a colour space of
     * the config (its scene_linear unless named), and hdrpostd's matrices are not applied. */
    static const char *const replaced_names[] = {"tonemap.operator", "gamma.mode", "gamma.radius",
                                                 "output.colorspace", "input.colorspace"};
    for (size_t i = 0; code == HP_OK && i < sizeof replaced_names / sizeof replaced_names[0]; i++)
        code = replaced(p, replaced_names[i], err);
    return code;
}

static hp_code rule_ocio(const hp_params *p, const char *field, hp_err *err)
{
    (void)field;
    return hp_params_ocio_check(p, err);
}

static const param_rule rules[] = {
    {"analysis.histogram_max_log2", "`analysis.histogram_max_log2` > `analysis.histogram_min_log2`.",
     rule_histogram_range},
    {"exposure.low_percent", "`exposure.low_percent` < `exposure.high_percent`.", rule_percentiles},
    {"tonemap.hable.toe_numerator",
     "Hable's curve must be positive at `tonemap.hable.white` (it tends to 1 - E/F, so "
     "`toe_numerator` must stay well below `toe_denominator`).",
     rule_hable_white},
    {"tonemap.lottes.mid_in", "`tonemap.lottes.mid_in` < `tonemap.lottes.hdr_max`.", rule_lottes_mid},
    {"tonemap.lottes.mid_out",
     "`tonemap.lottes.mid_out` must leave Lottes's curve without a pole: above (mid_in / hdr_max)^contrast "
     "and, when shoulder < 1, below (mid_in / hdr_max)^(contrast (1 - shoulder)).",
     rule_lottes_pole},
    {"tonemap.uchimura.linear_start",
     "`tonemap.uchimura.linear_start` < `tonemap.uchimura.max_brightness`, so that the linear section, "
     "which ends at linear_start + linear_length (max_brightness - linear_start), leaves room for the "
     "shoulder.",
     rule_uchimura_linear},
    {"output.bit_depth", "`output.bit_depth` 16 only with `output.format` `png`, 10 and 12 only with `avif`.",
     rule_bit_depth},
    {"output.colorspace", "`output.colorspace` `rec2020` only with `output.format` `png` and `output.bit_depth` 16, or "
                          "`avif` with 10 or 12.",
     rule_rec2020_png16},
    {"dof.focus_distance_m", "`dof.focus_distance_m` beyond the focal length (in metres).", rule_focus_beyond_focal},
    {"input.height", "`input.width` and `input.height` are given together (both 0 for a file).", rule_raw_size},
    {"input.channel_r", "`input.channel_r`, `input.channel_g` and `input.channel_b` are given together or not at all.",
     rule_colour_channels},
    {"input.layer", "`input.layer` or the three `input.channel_r`, `_g`, `_b`, not both: each chooses the colour.",
     rule_layer_or_channels},
    {"input.layer", "The OpenEXR names (`input.layer`, `input.channel_*`, `input.depth`) only with a file, not with "
                    "raw samples (`input.width` > 0).",
     rule_raw_names},
    {"ocio.view", "`ocio.*` and an OCIO colour space in `input.colorspace` need an OCIO config (400 `no_ocio_config`); "
                  "their names are the config's; with them `tonemap.operator`, `gamma.*`, `output.colorspace` and "
                  "`input.colorspace`'s own spaces stay at their defaults (400 `ocio_conflict`: the view replaces "
                  "them).",
     rule_ocio},
};

const char *hp_param_rule_doc(size_t i, const char **field)
{
    if (i >= sizeof(rules) / sizeof(rules[0]))
        return NULL;
    *field = rules[i].field;
    return rules[i].doc;
}

hp_code hp_params_check(const hp_params *p, hp_err *err)
{
    /* Every field first, so a struct filled in C (not through the setters) is held to the same table. */
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        if (def->type == HP_PARAM_BOOL)
            continue;
        if (def->type == HP_PARAM_STRING) {
            const char *text = cat(p, def->offset);
            const char *end = memchr(text, '\0', HP_PARAM_STRING_MAX + 1);
            char got[120];
            if (!end)
                return fail_expected(def, err, "%d bytes with no NUL to end them", HP_PARAM_STRING_MAX + 1);
            if (!string_allowed(def, text, (size_t)(end - text), got, sizeof(got)))
                return fail_expected(def, err, "%s", got);
            continue;
        }
        if (def->type == HP_PARAM_NUMBER_OR_AUTO && *(const bool *)cat(p, def->aux_offset))
            continue;
        if (def->open_offset) {
            /* An open enum's text, held as the setter keeps it: the OCIO check reads it as a C string. */
            const hp_param_def open = {.type = HP_PARAM_STRING, .min = 0, .max = HP_PARAM_STRING_MAX};
            const char *text = cat(p, def->open_offset);
            const char *end = memchr(text, '\0', HP_PARAM_STRING_MAX + 1);
            char got[120];
            if (!end)
                return fail_expected(def, err, "a name of %d bytes with no NUL to end it", HP_PARAM_STRING_MAX + 1);
            if (!string_allowed(&open, text, (size_t)(end - text), got, sizeof(got)))
                return fail_expected(def, err, "%s", got);
        }
        double v = get_value(p, def);
        if (!value_allowed(def, v))
            return fail_got_number(def, v, err);
    }
    /* Rules hold whichever mode or operator is chosen, so that a valid request stays valid when only
     * the operator changes. */
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        hp_code code = rules[i].check(p, rules[i].field, err);
        if (code != HP_OK)
            return code;
    }
    return HP_OK;
}

/* --- docs/PARAMETERS.md -------------------------------------------------------------------------------- */

typedef struct stage_doc {
    const char *prefix;
    const char *title;
    const char *text;
} stage_doc;

static const stage_doc stages[] = {
    {"look", "look: named looks",
     "A look is a set of the parameters below under one name, applied before the request's own parameters, "
     "which override it whatever the order they come in (`look=blender&tonemap.operator=hable` is AgX's "
     "exposure and display with Hable's curve). The looks and what each sets:"},
    {"input", "input: how the body is read",
     "The body is an image file, recognised from its bytes (OpenEXR, Radiance HDR, PFM), unless `width` and "
     "`height` describe raw samples. For OpenEXR the names below choose which layer or channels become the "
     "colour and the depth; empty names keep the automatic choice. A name the file does not have is answered "
     "422 with the layers or channels it does have, and so is a name given with a file of another format "
     "(docs/API.md)."},
    {"analysis", "analysis: luminance statistics",
     "The reduction over the scene-linear frame that every later stage reads: log-average, mean, minimum, "
     "maximum and a 256-bin histogram of log2 luminance."},
    {"exposure", "exposure",
     "Scales the scene-linear frame before the tone curve: from the frame's statistics (`auto`, "
     "`histogram`) or from fixed values (`fixed`), then by `compensation_ev` in every mode."},
    {"dof", "dof: depth of field",
     "A thin-lens camera (Potmesil and Chakravarty 1981) on the exposed scene-linear frame, before the tone "
     "curve, so highlights keep their energy: the circle of confusion of each pixel from its depth, "
     "signed near and far."},
    {"bokeh", "bokeh: scattered highlights",
     "Bright out-of-focus pixels drawn as aperture-shaped sprites, their energy counted once."},
    {"tonemap", "tonemap: the tone curve",
     "Maps exposed luminance (or, for `aces_hill`, `agx` and `khronos_neutral`, the exposed RGB channels) "
     "into [0, 1]; `false_color` maps it to a palette instead. Each operator reads only its own parameters."},
    {"gamma", "gamma: output encoding",
     "Encodes the tone-mapped linear values for display. The `local` modes replace the display gamma, so no "
     "sRGB curve is applied after them."},
    {"ocio", "ocio: a studio's OpenColorIO view",
     "With an OCIO config loaded (the `ocio_config` setting; docs/COLOR.md), the config's display/view transform "
     "in place of `tonemap.operator`, the gamut fold and the output transfer, after the exposure and the depth of "
     "field; its names are listed by `GET /v1/ocio`, and the file is tagged with what the display measures as."},
    {"output", "output: the encoded image", "Quantization and the image encoder."},
};

static const char *type_text(const hp_param_def *def)
{
    switch (def->type) {
    case HP_PARAM_NUMBER: return "number";
    case HP_PARAM_NUMBER_OR_AUTO: return "number or `\"auto\"`";
    case HP_PARAM_INTEGER: return "integer";
    case HP_PARAM_BOOL: return "boolean";
    case HP_PARAM_ENUM: return "string";
    case HP_PARAM_STRING: return "string";
    }
    return "?";
}

static void default_text(const hp_param_def *def, char *out, size_t size)
{
    char num[40];
    switch (def->type) {
    case HP_PARAM_NUMBER_OR_AUTO:
        if (def->def_auto) {
            snprintf(out, size, "`\"auto\"`");
            return;
        }
        /* fall through */
    case HP_PARAM_NUMBER:
    case HP_PARAM_INTEGER:
        format_number(def->def, num, sizeof(num));
        snprintf(out, size, "`%s`", num);
        return;
    case HP_PARAM_BOOL: snprintf(out, size, "`%s`", def->def != 0 ? "true" : "false"); return;
    case HP_PARAM_ENUM: snprintf(out, size, "`\"%s\"`", def->choices[(size_t)def->def]); return;
    case HP_PARAM_STRING: snprintf(out, size, "`\"%s\"`", def->def_text ? def->def_text : ""); return;
    }
}

static void allowed_text(const hp_param_def *def, char *out, size_t size)
{
    char range[256];
    switch (def->type) {
    case HP_PARAM_BOOL: snprintf(out, size, "`true`, `false`"); return;
    case HP_PARAM_ENUM: {
        size_t n = 0;
        out[0] = '\0';
        for (size_t i = 0; def->choices[i] && n < size; i++)
            n += (size_t)snprintf(out + n, size - n, "%s`%s`", i ? ", " : "", def->choices[i]);
        return;
    }
    case HP_PARAM_NUMBER_OR_AUTO:
        range_text(def, range, sizeof(range));
        snprintf(out, size, "%s or `\"auto\"`", range);
        return;
    case HP_PARAM_INTEGER:
    case HP_PARAM_NUMBER: range_text(def, out, size); return;
    case HP_PARAM_STRING: string_length_text(def, out, size); return;
    }
}

static bool in_stage(const hp_param_def *def, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(def->name, prefix, n) == 0 && (def->name[n] == '.' || def->name[n] == '\0');
}

/* The looks' table (pipeline/looks.c), under the look stage's text. */
static void write_looks(FILE *out)
{
    fprintf(out, "| look | sets | for |\n|---|---|---|\n");
    for (size_t i = 0; i < hp_look_count; i++) {
        fprintf(out, "| `%s` | ", hp_looks[i].name);
        if (!hp_looks[i].settings[0])
            fprintf(out, "nothing");
        for (const char *s = hp_looks[i].settings; *s;) {
            size_t n = strcspn(s, "&");
            fprintf(out, "%s`%.*s`", s == hp_looks[i].settings ? "" : ", ", (int)n, s);
            s += n + (s[n] == '&');
        }
        fprintf(out, " | %s |\n", hp_looks[i].help);
    }
    fprintf(out, "\n");
}

/* The page's opening: the three ways to send a parameter, the values' types and what is refused. */
static void write_intro(FILE *out)
{
    fprintf(out,
            "# Request parameters\n"
            "\n"
            "<!-- Generated by tools/params_doc from the table in pipeline/params.c; do not edit. After changing\n"
            "     the table: build/tools/params_doc > docs/PARAMETERS.md (the params_doc test checks it). -->\n"
            "\n"
            "Every request may set any of the parameters below; the others keep their defaults. A parameter's\n"
            "name is dotted, stage first (`tonemap.operator`, `tonemap.hable.white`), and there are three ways\n"
            "to send it.\n"
            "\n"
            "A JSON object nested by stage:\n"
            "\n"
            "```json\n"
            "{\"tonemap\": {\"operator\": \"hable\", \"hable\": {\"white\": 8}}, \"output\": {\"format\": \"png\"}}\n"
            "```\n"
            "\n"
            "The same with dotted keys (the two forms may be mixed in one object):\n"
            "\n"
            "```json\n"
            "{\"tonemap.operator\": \"hable\", \"tonemap.hable.white\": 8, \"output.format\": \"png\"}\n"
            "```\n"
            "\n"
            "Or as URL query keys, percent-encoded where needed (`+` stands for a space):\n"
            "\n"
            "```text\n"
            "?tonemap.operator=hable&tonemap.hable.white=8&output.format=png\n"
            "```\n"
            "\n"
            "Values have the JSON types shown in the tables: numbers unquoted, booleans `true` or `false`, choices\n"
            "and names as strings; in a query string they are written the same way without quotes\n"
            "(`exposure.key=auto`, `output.dither=false`, `input.layer=ViewLayer.Combined`). A string holds UTF-8\n"
            "text without control characters, up to the length shown; its default `\"\"` leaves the choice to\n"
            "the daemon, and a query string, which cannot carry an empty value, leaves the key out instead.\n"
            "Nothing is ignored silently: an unknown name, a value of the wrong type or out of its range, NaN or\n"
            "infinity, an empty query value and a parameter given twice (in any spelling) are each refused\n"
            "(HTTP 400) with the error code `invalid_parameter`, a message that names the parameter and what it\n"
            "accepts, and the parameter's dotted name in the error's `field`. Every parameter is checked, also\n"
            "when the chosen mode or operator does not read it, so that a valid request stays valid when only\n"
            "the operator changes. The effective parameters are echoed in the nested form, every field included.\n"
            "\n"
            "Ranges: `[a, b]` includes both ends, `(a, b]` excludes a, `[a, b)` excludes b.\n");
}

/* A table of parameters for each stage (and the looks' list before the look stage's). */
static void write_stage_tables(FILE *out)
{
    for (size_t s = 0; s < sizeof(stages) / sizeof(stages[0]); s++) {
        fprintf(out, "\n## %s\n\n%s\n\n", stages[s].title, stages[s].text);
        if (!strcmp(stages[s].prefix, "look"))
            write_looks(out);
        fprintf(out, "| name | type | default | range or choices | unit | applies to | description |\n");
        fprintf(out, "|---|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < hp_param_schema_count; i++) {
            const hp_param_def *def = &hp_param_schema[i];
            if (!in_stage(def, stages[s].prefix))
                continue;
            char deflt[64], allowed[512];
            default_text(def, deflt, sizeof(deflt));
            allowed_text(def, allowed, sizeof(allowed));
            fprintf(out, "| `%s` | %s | %s | %s | %s | %s | %s |\n", def->name, type_text(def), deflt, allowed,
                    def->unit && def->unit[0] ? def->unit : "", def->applies ? def->applies : "always",
                    def->help);
        }
    }
}

/* The rules that tie parameters together (the rules table's docs). */
static void write_rules(FILE *out)
{
    fprintf(out, "\n## Rules across parameters\n\n"
                 "Checked after every value is set, whatever the order of the keys:\n\n");
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        fprintf(out, "- %s\n", rules[i].doc);
}

/* Requests as a user writes them, and a refusal's message as the setter makes it. */
static void write_examples(FILE *out)
{
    /* The error example is produced by the setter itself, so it cannot drift from what the API says. */
    hp_params p;
    hp_params_defaults(&p);
    hp_err err = {0};
    hp_param_set_number(&p, hp_param_find("tonemap.white_point"), -1, &err);

    fprintf(out,
            "\n## Examples\n"
            "\n"
            "A filmic look at a fixed exposure, as a 16-bit PNG:\n"
            "\n"
            "```json\n"
            "{\"exposure\": {\"mode\": \"fixed\", \"stops\": 1.5},\n"
            " \"tonemap\": {\"operator\": \"hable\"},\n"
            " \"output\": {\"format\": \"png\", \"bit_depth\": 16}}\n"
            "```\n"
            "\n"
            "Every frame of a shot exposed alike, from an adaptation luminance the client measured over the\n"
            "whole sequence, so that the shot does not flicker:\n"
            "\n"
            "```json\n"
            "{\"exposure.mode\": \"fixed\", \"exposure.adaptation\": 0.42, \"exposure.key\": 0.18}\n"
            "```\n"
            "\n"
            "Auto exposure from the histogram with an estimated key, and Drago's operator:\n"
            "\n"
            "```json\n"
            "{\"exposure\": {\"mode\": \"histogram\", \"key\": \"auto\", \"low_percent\": 5, \"high_percent\": 98},\n"
            " \"tonemap\": {\"operator\": \"drago\", \"drago\": {\"bias\": 0.8}}}\n"
            "```\n"
            "\n"
            "AgX with the standard sRGB curve and a lossless WebP, in a query string:\n"
            "\n"
            "```text\n"
            "?tonemap.operator=agx&gamma.mode=srgb&output.lossless=true\n"
            "```\n"
            "\n"
            "From a multi-layer OpenEXR, a layer other than the one chosen by itself, and its depth:\n"
            "\n"
            "```text\n"
            "?input.layer=ViewLayer.Shadow&input.depth=ViewLayer.Depth.Z\n"
            "```\n"
            "\n"
            "Colour put together from channels of several layers, with the alpha of a mask:\n"
            "\n"
            "```json\n"
            "{\"input\": {\"channel_r\": \"Beauty.R\", \"channel_g\": \"Beauty.G\", \"channel_b\": \"Fill.B\",\n"
            "           \"channel_a\": \"Mask.Y\"}}\n"
            "```\n"
            "\n"
            "A value out of range, `{\"tonemap\": {\"white_point\": -1}}`, is refused with code\n"
            "`invalid_parameter`, field `%s` and the message:\n"
            "\n"
            "```text\n"
            "%s\n"
            "```\n",
            err.field, err.message);
}

void hp_params_write_markdown(FILE *out)
{
    write_intro(out);
    write_stage_tables(out);
    write_rules(out);
    write_examples(out);
}

/* Every per-request parameter, grouped by stage: plain C structs with their defaults.
 *
 * The one place that gives each field its JSON name, unit, range, default and help is the schema table
 * in pipeline/params.c (hp_param_schema). The HTTP API parses requests through it (api/frames/params_json.c),
 * docs/PARAMETERS.md is generated from it, and hp_params_defaults() fills these structs from it, so a
 * default cannot differ between the code, the API and the documentation. */
#ifndef HP_PARAMS_H
#define HP_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "ocio/config.h"
#include "pipeline/params_ocio.h"
#include "pipeline/colorspace.h"

typedef enum hp_exposure_mode {
    HP_EXPOSURE_AUTO = 0,      /* key / log-average (Reinhard 2002 eq. 2) */
    HP_EXPOSURE_HISTOGRAM = 1, /* key / percentile-clipped histogram mean (algorithms.md 1.4) */
    HP_EXPOSURE_FIXED = 2,     /* 2^stops, or key / adaptation when an adaptation luminance is given */
} hp_exposure_mode;

typedef struct hp_exposure_params {
    hp_exposure_mode mode;
    double key;             /* Reinhard's key a: the exposed value of the adaptation luminance */
    bool key_auto;          /* estimate the key from the frame (algorithms.md 1.5; DECISIONS.md 7) */
    double low_percent;     /* histogram mode: darkest share of pixels left out, percent */
    double high_percent;    /* histogram mode: pixels above this percentile left out, percent */
    double stops;           /* fixed mode: exposure in stops (scale 2^stops) */
    double adaptation;      /* fixed mode: adaptation luminance in frame units; 0: use stops */
    double compensation_ev; /* every mode: a further 2^compensation_ev */
} hp_exposure_params;

typedef enum hp_tone_operator {
    HP_TONE_LINEAR = 0,
    HP_TONE_REINHARD,
    HP_TONE_REINHARD_EXTENDED,
    HP_TONE_DRAGO,
    HP_TONE_ACES_NARKOWICZ,
    HP_TONE_HABLE,
    HP_TONE_LOTTES,
    HP_TONE_UCHIMURA,
    HP_TONE_ACES_HILL,       /* on RGB */
    HP_TONE_AGX,             /* on RGB */
    HP_TONE_KHRONOS_NEUTRAL, /* on RGB */
    HP_TONE_FALSE_COLOR,     /* luminance to a colour per exposure stop (issue 17's analysis look) */
    HP_TONE_OPERATOR_COUNT
} hp_tone_operator;

/* True for the operators whose definition needs the colour channels (DECISIONS.md 6). */
bool hp_tone_operator_on_rgb(hp_tone_operator op);

typedef struct hp_tonemap_params {
    hp_tone_operator op;
    double white_point;      /* reinhard_extended: L_white in exposed units; 0: the exposed max */
    double drago_bias;       /* Drago's bias b */
    double drago_display_max; /* Drago's L_dmax in cd/m^2; 100 maps the frame's max to 1 */
    /* Drago's world adaptation L_wa and maximum L_wmax in frame luminance units (exposed like the frame);
     * 0: the frame's own log-average and maximum. A shot client passes the shot's (docs/CLIENT.md). */
    double drago_scene_log_average, drago_scene_max;
    double aces_input_scale; /* aces_narkowicz: input multiplier (0.6 gives the original ACES range) */
    double hable_a, hable_b, hable_c, hable_d, hable_e, hable_f; /* Hable's curve constants */
    double hable_white;      /* Hable's linear white point W */
    double hable_exposure_bias;
    double lottes_contrast, lottes_shoulder, lottes_hdr_max, lottes_mid_in, lottes_mid_out;
    double uchimura_max_brightness, uchimura_contrast, uchimura_linear_start, uchimura_linear_length,
        uchimura_black_tightness, uchimura_black_offset;
} hp_tonemap_params;

/* Lottes' b and c from its parameters (algorithms.md 3.7). */
void hp_lottes_constants(const hp_tonemap_params *t, double *b, double *c);

typedef enum hp_gamma_mode {
    HP_GAMMA_LOCAL = 0,           /* Kwon's exponent per pixel, applied to each channel (DECISIONS.md 7) */
    HP_GAMMA_LOCAL_LUMINANCE = 1, /* Kwon's exponent applied to Y alone, the seed's literal form */
    HP_GAMMA_SRGB = 2,            /* the sRGB transfer function (IEC 61966-2-1) on each channel */
    HP_GAMMA_LINEAR = 3,          /* no encoding: linear values quantized */
} hp_gamma_mode;

typedef struct hp_gamma_params {
    hp_gamma_mode mode;
    uint32_t radius; /* local modes: the adaptation luminance is L blurred over this radius, pixels; 0: L itself */
} hp_gamma_params;

typedef enum hp_output_format {
    HP_OUTPUT_WEBP = 0,
    HP_OUTPUT_PNG = 1,
    HP_OUTPUT_JPEG = 2, /* api/codecs/encode_jpeg.h */
    HP_OUTPUT_AVIF = 3, /* api/codecs/encode_avif.h */
} hp_output_format;

/* JPEG's and AVIF's chroma subsampling. */
typedef enum hp_output_chroma {
    HP_CHROMA_AUTO = 0, /* JPEG 4:2:0, AVIF 4:4:4 */
    HP_CHROMA_420 = 1,
    HP_CHROMA_444 = 2,
} hp_output_chroma;

/* Whether the encoded image carries the frame's alpha. */
typedef enum hp_output_alpha {
    HP_ALPHA_AUTO = 0, /* when the frame has alpha and some of it is below 1 after quantization */
    HP_ALPHA_KEEP = 1, /* whenever the frame has alpha */
    HP_ALPHA_DROP = 2, /* never */
} hp_output_alpha;

/* Which encoder writes a PNG's deflate stream (issue 20). */
typedef enum hp_png_encoder {
    HP_PNG_ENCODER_CPU = 0,  /* api/codecs/encode.c: filters and deflate on the encoding pool's cores */
    HP_PNG_ENCODER_GPU = 1,  /* pipeline/png_gpu.c: filters and deflate on the GPU, only the stream read back */
    HP_PNG_ENCODER_AUTO = 2, /* the GPU where the device runs png_gpu's passes and output.effort is at most
                              * HP_PNG_AUTO_GPU_MAX_EFFORT, else the CPU (the default) */
} hp_png_encoder;

/* output.png_encoder auto takes the GPU up to this output.effort: the CPU encoder's run-length deflate
 * levels (api/codecs/encode.c), whose sizes the GPU's stream matches (docs/BENCHMARKS.md, issue 20); the efforts
 * above ask for zlib's smaller files, which only the CPU makes. */
#define HP_PNG_AUTO_GPU_MAX_EFFORT 2u

typedef struct hp_output_params {
    hp_output_format format;
    uint32_t quality;   /* WebP lossy quality, 0..100 */
    bool lossless;      /* WebP lossless */
    uint32_t effort;    /* WebP method / PNG compression effort, 0 (fastest) .. 6 */
    uint32_t bit_depth; /* 8, 16 (PNG only), 10 or 12 (AVIF only): above 8 the GPU writes 16 bits */
    hp_output_chroma chroma; /* JPEG and AVIF */
    hp_output_alpha alpha;
    bool dither;        /* triangular noise of one step before rounding, so gradients do not band */
    hp_output_colorspace colorspace; /* the display's primaries: the working space and the file's tags */
    hp_png_encoder png_encoder;      /* format png: who filters and deflates */
} hp_output_params;

typedef enum hp_reduce_variant_param {
    HP_REDUCE_PARAM_SINGLE_PASS = 0,
    HP_REDUCE_PARAM_TWO_PASS = 1,
} hp_reduce_variant_param;

typedef struct hp_analysis_params {
    uint32_t variant;           /* hp_reduce_variant */
    double histogram_min_log2;  /* lowest histogram edge, log2 of luminance */
    double histogram_max_log2;
} hp_analysis_params;

/* input.colorspace: `auto` (the file's chromaticities, else Rec.709), else a named space, hp_colorspace + 1. */
#define HP_INPUT_COLORSPACE_AUTO 0u

typedef enum hp_input_type {
    HP_INPUT_FLOAT32 = 0,
    HP_INPUT_FLOAT16 = 1,
} hp_input_type;

/* Longest text a string parameter holds, in bytes without the NUL: an OpenEXR channel name's limit
 * (api/codecs/image.h, HP_IMAGE_NAME_MAX), which bounds every string parameter so far. */
#define HP_PARAM_STRING_MAX 255

/* How the frame arrives. Raw samples instead of a file: a render farm that already holds the frame in
 * memory sends it as is. Channel names: which channels of a multi-layer OpenEXR file become the colour
 * and the depth; "" leaves the choice to the decoder (api/codecs/image.h, hp_decode_options). */
typedef struct hp_input_params {
    uint32_t width;    /* pixels per row of a raw body; 0: the body is a file (OpenEXR, Radiance, PFM) */
    uint32_t height;   /* rows of a raw body */
    uint32_t channels; /* 1 (grey), 3 (RGB) or 4 (RGBA), interleaved, rows top to bottom */
    uint32_t type;     /* hp_input_type: IEEE float32 or float16, little-endian */
    uint32_t colorspace; /* HP_INPUT_COLORSPACE_AUTO, else hp_colorspace + 1 (issue 17) */
    char layer[HP_PARAM_STRING_MAX + 1];     /* EXR layer prefix ("ViewLayer.Combined"); "": automatic */
    char channel_r[HP_PARAM_STRING_MAX + 1]; /* EXR channel names, r, g and b together; "": automatic */
    char channel_g[HP_PARAM_STRING_MAX + 1];
    char channel_b[HP_PARAM_STRING_MAX + 1];
    char channel_a[HP_PARAM_STRING_MAX + 1]; /* "": the colour layer's A, or none */
    char depth[HP_PARAM_STRING_MAX + 1];     /* EXR depth channel name; "": automatic */
} hp_input_params;

/* Depth of field (DECISIONS.md 8; algorithms.md 5): the thin-lens camera that turns the frame's depth
 * into circles of confusion. Lengths are those of the real camera; dof.lens names a lens people know and
 * gives the focal length and f-stop wherever those are left "auto". */
typedef enum hp_dof_lens {
    HP_LENS_24MM_F2_8 = 0,
    HP_LENS_35MM_F1_4,
    HP_LENS_50MM_F1_4,
    HP_LENS_85MM_F1_4,
    HP_LENS_135MM_F2,
    HP_LENS_COUNT
} hp_dof_lens;

/* The focal length (mm) and f-number of a named lens. */
void hp_dof_lens_values(hp_dof_lens lens, double *focal_length_mm, double *f_stop);

typedef struct hp_dof_params {
    bool enabled;
    uint32_t method;          /* pipeline/dof.h hp_dof_method: gather (0) or sat (1) */
    hp_dof_lens lens;
    double focal_length_mm;
    bool focal_length_auto;   /* from the lens */
    double f_stop;
    bool f_stop_auto;         /* from the lens */
    double focus_distance_m;
    bool focus_auto;          /* the depth at the frame's centre */
    double sensor_width_mm;   /* spans the frame's width */
    double depth_scale;       /* metres per depth unit */
    double max_coc_px;        /* largest CoC radius, pixels */
} hp_dof_params;

/* Scattered bokeh (DECISIONS.md 9; algorithms.md 6). */
typedef struct hp_bokeh_params {
    bool enabled;
    uint32_t blades;      /* 0: a circle; 5 to 9 */
    uint32_t max_sprites; /* the budget */
    double threshold;     /* exposed luminance over which an out-of-focus pixel becomes a sprite */
    double min_coc_px;    /* radius under which a pixel is too sharp to make one */
    double rotation_deg;
    double squeeze;       /* anamorphic: sprites this many times taller than wide */
} hp_bokeh_params;

/* A studio's OpenColorIO display/view (issue 34; docs/COLOR.md), from the config the daemon loaded at start
 * (ocio/config.h). Empty: not asked for. Any of them set puts the config's transform in place of the tone
 * operator, the gamut fold and the output transfer (hp_params_ocio_on). */
typedef struct hp_ocio_params {
    char display[HP_PARAM_STRING_MAX + 1]; /* "": the config's default display */
    char view[HP_PARAM_STRING_MAX + 1];    /* "": the display's default view */
    char looks[HP_PARAM_STRING_MAX + 1];   /* OCIO's look syntax; "": the view's own looks */
    /* Not a parameter of its own: input.colorspace's text when it names a colour space or role of the config
     * rather than one of hdrpostd's spaces (the schema keeps it here: hp_param_def.open_offset). */
    char input[HP_PARAM_STRING_MAX + 1];
} hp_ocio_params;

typedef struct hp_params {
    hp_input_params input;
    hp_analysis_params analysis;
    hp_exposure_params exposure;
    hp_dof_params dof;
    hp_bokeh_params bokeh;
    hp_tonemap_params tonemap;
    hp_gamma_params gamma;
    hp_output_params output;
    hp_ocio_params ocio;
    uint32_t look; /* hp_looks' index: applied before the other parameters (api/frames/params_json.c) */
    /* Not a parameter of its own: in hdrpost alone, a look the client does not know (a studio look of the
     * daemon's, studio_looks), kept as text for the daemon to check (hp_param_def.open_offset). */
    char look_name[HP_PARAM_STRING_MAX + 1];
    /* Not a request parameter: the frame's colour, resolved by api/ from input.colorspace and the file's
     * chromaticities before the frame is queued (zero: Rec.709, nothing converted). */
    hp_input_color color;
} hp_params;

/* --- The schema ------------------------------------------------------------------------------------ */

typedef enum hp_param_type {
    HP_PARAM_NUMBER,         /* double */
    HP_PARAM_NUMBER_OR_AUTO, /* double, or the string "auto" which sets the bool at aux_offset */
    HP_PARAM_INTEGER,        /* uint32_t */
    HP_PARAM_BOOL,           /* bool */
    HP_PARAM_ENUM,           /* an enum stored as int (or uint32_t), named by `choices` */
    HP_PARAM_STRING,         /* char[HP_PARAM_STRING_MAX + 1], NUL-terminated UTF-8 without control characters */
} hp_param_type;

typedef struct hp_param_def {
    const char *name;      /* dotted: "tonemap.white_point" */
    hp_param_type type;
    size_t offset;         /* into hp_params */
    size_t aux_offset;     /* NUMBER_OR_AUTO: the bool set by "auto" */
    double min, max;       /* inclusive bounds for numbers and integers; strings: length in bytes */
    bool min_exclusive;    /* (min, max] */
    double def;            /* default (enums: the index into choices; bools 0/1; strings: unused) */
    const char *def_text;  /* STRING: the default text; NULL is "" */
    bool def_auto;         /* NUMBER_OR_AUTO: the default is "auto" */
    const char *const *choices; /* ENUM: NULL-terminated names, in enum order */
    const char *unit;      /* shown in the docs: "stops", "pixels", "" */
    const char *applies;   /* which modes or operators read it, or NULL for always */
    const char *help;      /* one or two sentences for docs/PARAMETERS.md */
    /* ENUM: where a name that is none of the choices is kept as text, when open_names says so:
     * input.colorspace's colour spaces of the OCIO config, look's studio looks in hdrpost. 0: none, the choices
     * alone. */
    size_t open_offset;
    bool (*open_names)(void);
} hp_param_def;

extern const hp_param_def hp_param_schema[];
extern const size_t hp_param_schema_count;

/* The largest value as written and whether it is excluded: an exclusive bound is stored as the double just
 * below it (params.c, BELOW), so that "[0, 100)" reads back as 100, exclusive. */
double hp_param_max(const hp_param_def *def, bool *exclusive);
/* The rules across fields (params.c), for documents: the i-th rule's text (Markdown) and in *field the
 * parameter its refusal names; NULL past the last. */
const char *hp_param_rule_doc(size_t i, const char **field);

/* Fills every field with its schema default. */
void hp_params_defaults(hp_params *p);
/* Finds a parameter by its dotted name, or NULL. */
const hp_param_def *hp_param_find(const char *name);
/* An enum's choices, comma-separated, for a message; a list too long for size ends with where the rest is. */
void hp_param_choices_text(const hp_param_def *def, char *out, size_t size);

/* Setting one value, with the checks and messages the API returns (they name the parameter, the
 * expected type or the allowed range). The JSON and query-string front ends both come through here. */
hp_code hp_param_set_number(hp_params *p, const hp_param_def *def, double value, hp_err *err);
hp_code hp_param_set_bool(hp_params *p, const hp_param_def *def, bool value, hp_err *err);
/* Enum choices by name, "auto" for NUMBER_OR_AUTO, strings as they are (length and characters checked),
 * numbers and booleans from text (query strings). */
hp_code hp_param_set_string(hp_params *p, const hp_param_def *def, const char *value, hp_err *err);

/* Checks the rules that span fields (low_percent < high_percent, 16-bit only for PNG...). */
hp_code hp_params_check(const hp_params *p, hp_err *err);

/* --- OCIO (the config and the client's mode: pipeline/params_ocio.h) ------------------------------------ */

/* Whether the request asks for the config's display/view. */
bool hp_params_ocio_on(const hp_params *p);
/* The request's transform with the config's defaults filled in and every name checked (an error names the
 * field and lists the valid names; no config: no_ocio_config). */
hp_code hp_params_ocio_key(const hp_params *p, hp_ocio_view_key *key, hp_err *err);
/* The rule hp_params_check applies: a config is loaded; no parameter the view replaces (tonemap.operator,
 * gamma.*, output.colorspace, input.colorspace's own spaces) is set away from its default; every name is the
 * config's. */
hp_code hp_params_ocio_check(const hp_params *p, hp_err *err);

/* Writes docs/PARAMETERS.md's text from the schema. */
void hp_params_write_markdown(FILE *out);

#endif

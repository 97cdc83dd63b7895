/* The request parameters: the schema table against the specification below, the setters' ranges and
 * messages, the cross-field rules, the JSON and query-string front ends, and the examples in
 * docs/PARAMETERS.md (its path is argv[1]).
 *
 * The spec table here is written from the issue independently of pipeline/params.c: each row's name,
 * field, default and range must match the schema, so the table cannot drift from what was asked. */
#include <float.h>
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/frames/form.h"
#include "api/frames/params_json.h"
#include "ocio/config.h"
#include "pipeline/looks.h"
#include "pipeline/params.h"
#include "tap.h"

/* --- The specification ------------------------------------------------------------------------------ */

typedef struct enum_choice {
    const char *name;
    int value; /* the C enum constant */
} enum_choice;

typedef struct spec {
    const char *name;
    hp_param_type type;
    size_t offset;          /* the hp_params field it sets */
    const char *def;        /* as the docs write it: "0.18", "reinhard_extended", "true" */
    const char *range;      /* numbers: "[a, b]", "(a, b]", "[a, b)", "(a, b)"; lists: "8, 16" */
    const enum_choice *choices;
} spec;

#define F(f) offsetof(hp_params, f)
#define NUM HP_PARAM_NUMBER
#define INT HP_PARAM_INTEGER
#define STR HP_PARAM_STRING

/* The issue's string parameters hold an OpenEXR name, whose limit is 255 bytes. */
#define SPEC_STRING_MAX 255

static const enum_choice variants[] = {{"single_pass", HP_REDUCE_PARAM_SINGLE_PASS},
                                       {"two_pass", HP_REDUCE_PARAM_TWO_PASS}, {NULL, 0}};
static const enum_choice exposure_modes[] = {{"auto", HP_EXPOSURE_AUTO}, {"histogram", HP_EXPOSURE_HISTOGRAM},
                                             {"fixed", HP_EXPOSURE_FIXED}, {NULL, 0}};
static const enum_choice operators[] = {
    {"linear", HP_TONE_LINEAR}, {"reinhard", HP_TONE_REINHARD}, {"reinhard_extended", HP_TONE_REINHARD_EXTENDED},
    {"drago", HP_TONE_DRAGO}, {"aces_narkowicz", HP_TONE_ACES_NARKOWICZ}, {"hable", HP_TONE_HABLE},
    {"lottes", HP_TONE_LOTTES}, {"uchimura", HP_TONE_UCHIMURA}, {"aces_hill", HP_TONE_ACES_HILL},
    {"agx", HP_TONE_AGX}, {"khronos_neutral", HP_TONE_KHRONOS_NEUTRAL}, {"false_color", HP_TONE_FALSE_COLOR}, {NULL, 0}};
static const enum_choice gamma_modes[] = {{"local", HP_GAMMA_LOCAL}, {"local_luminance", HP_GAMMA_LOCAL_LUMINANCE},
                                          {"srgb", HP_GAMMA_SRGB}, {"linear", HP_GAMMA_LINEAR}, {NULL, 0}};
static const enum_choice formats[] = {{"webp", HP_OUTPUT_WEBP}, {"png", HP_OUTPUT_PNG}, {"jpeg", HP_OUTPUT_JPEG},
                                      {"avif", HP_OUTPUT_AVIF}, {NULL, 0}};
static const enum_choice chromas[] = {{"auto", HP_CHROMA_AUTO}, {"420", HP_CHROMA_420}, {"444", HP_CHROMA_444},
                                      {NULL, 0}};
static const enum_choice alphas[] = {{"auto", HP_ALPHA_AUTO}, {"keep", HP_ALPHA_KEEP}, {"drop", HP_ALPHA_DROP}, {NULL, 0}};
static const enum_choice png_encoders[] = {
    {"cpu", HP_PNG_ENCODER_CPU}, {"gpu", HP_PNG_ENCODER_GPU}, {"auto", HP_PNG_ENCODER_AUTO}, {NULL, 0}};
static const enum_choice input_types[] = {{"float32", HP_INPUT_FLOAT32}, {"float16", HP_INPUT_FLOAT16}, {NULL, 0}};
static const enum_choice input_colorspaces[] = {
    {"auto", HP_INPUT_COLORSPACE_AUTO},          {"rec709", HP_COLORSPACE_REC709 + 1},
    {"rec2020", HP_COLORSPACE_REC2020 + 1},      {"acescg", HP_COLORSPACE_ACESCG + 1},
    {"aces2065", HP_COLORSPACE_ACES2065 + 1},    {"p3d65", HP_COLORSPACE_P3D65 + 1}, {NULL, 0}};
static const enum_choice output_colorspaces[] = {
    {"srgb", HP_OUTPUT_SRGB}, {"display_p3", HP_OUTPUT_DISPLAY_P3}, {"rec2020", HP_OUTPUT_REC2020}, {NULL, 0}};
static const enum_choice looks[] = {
    {"default", 0}, {"blender", 1}, {"aces_filmic", 2}, {"neutral", 3}, {"analysis", 4}, {NULL, 0}};
static const enum_choice dof_methods[] = {{"gather", 0}, {"sat", 1}, {NULL, 0}};
static const enum_choice dof_lenses[] = {{"24mm_f2.8", HP_LENS_24MM_F2_8}, {"35mm_f1.4", HP_LENS_35MM_F1_4},
                                         {"50mm_f1.4", HP_LENS_50MM_F1_4}, {"85mm_f1.4", HP_LENS_85MM_F1_4},
                                         {"135mm_f2", HP_LENS_135MM_F2},   {NULL, 0}};

static const spec specs[] = {
    {"look", HP_PARAM_ENUM, F(look), "default", NULL, looks},
    {"input.width", INT, F(input.width), "0", "[0, 16384]", NULL},
    {"input.height", INT, F(input.height), "0", "[0, 16384]", NULL},
    {"input.channels", INT, F(input.channels), "4", "1, 3, 4", NULL},
    {"input.type", HP_PARAM_ENUM, F(input.type), "float32", NULL, input_types},
    {"input.colorspace", HP_PARAM_ENUM, F(input.colorspace), "auto", NULL, input_colorspaces},
    {"input.layer", STR, F(input.layer), "", NULL, NULL},
    {"input.channel_r", STR, F(input.channel_r), "", NULL, NULL},
    {"input.channel_g", STR, F(input.channel_g), "", NULL, NULL},
    {"input.channel_b", STR, F(input.channel_b), "", NULL, NULL},
    {"input.channel_a", STR, F(input.channel_a), "", NULL, NULL},
    {"input.depth", STR, F(input.depth), "", NULL, NULL},
    {"analysis.variant", HP_PARAM_ENUM, F(analysis.variant), "single_pass", NULL, variants},
    {"analysis.histogram_min_log2", NUM, F(analysis.histogram_min_log2), "-16", "[-64, 63]", NULL},
    {"analysis.histogram_max_log2", NUM, F(analysis.histogram_max_log2), "16", "[-63, 64]", NULL},
    {"exposure.mode", HP_PARAM_ENUM, F(exposure.mode), "auto", NULL, exposure_modes},
    {"exposure.key", HP_PARAM_NUMBER_OR_AUTO, F(exposure.key), "0.18", "(0, 1]", NULL},
    {"exposure.low_percent", NUM, F(exposure.low_percent), "10", "[0, 100)", NULL},
    {"exposure.high_percent", NUM, F(exposure.high_percent), "90", "(0, 100]", NULL},
    {"exposure.stops", NUM, F(exposure.stops), "0", "[-32, 32]", NULL},
    {"exposure.adaptation", NUM, F(exposure.adaptation), "0", "[0, 1e9]", NULL},
    {"exposure.compensation_ev", NUM, F(exposure.compensation_ev), "0", "[-32, 32]", NULL},
    {"dof.enabled", HP_PARAM_BOOL, F(dof.enabled), "false", NULL, NULL},
    {"dof.method", HP_PARAM_ENUM, F(dof.method), "gather", NULL, dof_methods},
    {"dof.lens", HP_PARAM_ENUM, F(dof.lens), "50mm_f1.4", NULL, dof_lenses},
    {"dof.focal_length_mm", HP_PARAM_NUMBER_OR_AUTO, F(dof.focal_length_mm), "auto", "[1, 2000]", NULL},
    {"dof.f_stop", HP_PARAM_NUMBER_OR_AUTO, F(dof.f_stop), "auto", "[0.5, 128]", NULL},
    {"dof.focus_distance_m", HP_PARAM_NUMBER_OR_AUTO, F(dof.focus_distance_m), "auto", "(0, 1000000]", NULL},
    {"dof.sensor_width_mm", NUM, F(dof.sensor_width_mm), "36", "[1, 100]", NULL},
    {"dof.depth_scale", NUM, F(dof.depth_scale), "1", "(0, 1000000]", NULL},
    {"dof.max_coc_px", NUM, F(dof.max_coc_px), "32", "[1, 64]", NULL},
    {"bokeh.enabled", HP_PARAM_BOOL, F(bokeh.enabled), "true", NULL, NULL},
    {"bokeh.threshold", NUM, F(bokeh.threshold), "4", "[0, 1e9]", NULL},
    {"bokeh.min_coc_px", NUM, F(bokeh.min_coc_px), "2", "[0.5, 64]", NULL},
    {"bokeh.blades", INT, F(bokeh.blades), "7", "0, 5, 6, 7, 8, 9", NULL},
    {"bokeh.rotation_deg", NUM, F(bokeh.rotation_deg), "0", "[0, 360]", NULL},
    {"bokeh.squeeze", NUM, F(bokeh.squeeze), "1", "[1, 2]", NULL},
    {"bokeh.max_sprites", INT, F(bokeh.max_sprites), "16384", "[0, 65535]", NULL},
    {"tonemap.operator", HP_PARAM_ENUM, F(tonemap.op), "reinhard_extended", NULL, operators},
    {"tonemap.white_point", NUM, F(tonemap.white_point), "0", "[0, 1e9]", NULL},
    {"tonemap.drago.bias", NUM, F(tonemap.drago_bias), "0.85", "(0, 1]", NULL},
    {"tonemap.drago.display_max", NUM, F(tonemap.drago_display_max), "100", "[1, 10000]", NULL},
    {"tonemap.drago.scene_log_average", NUM, F(tonemap.drago_scene_log_average), "0", "[0, 1e9]", NULL},
    {"tonemap.drago.scene_max", NUM, F(tonemap.drago_scene_max), "0", "[0, 1e9]", NULL},
    {"tonemap.aces.input_scale", NUM, F(tonemap.aces_input_scale), "1", "(0, 16]", NULL},
    {"tonemap.hable.shoulder_strength", NUM, F(tonemap.hable_a), "0.15", "(0, 10]", NULL},
    {"tonemap.hable.linear_strength", NUM, F(tonemap.hable_b), "0.50", "(0, 10]", NULL},
    {"tonemap.hable.linear_angle", NUM, F(tonemap.hable_c), "0.10", "(0, 10]", NULL},
    {"tonemap.hable.toe_strength", NUM, F(tonemap.hable_d), "0.20", "(0, 10]", NULL},
    {"tonemap.hable.toe_numerator", NUM, F(tonemap.hable_e), "0.02", "[0, 10]", NULL},
    {"tonemap.hable.toe_denominator", NUM, F(tonemap.hable_f), "0.30", "(0, 10]", NULL},
    {"tonemap.hable.white", NUM, F(tonemap.hable_white), "11.2", "(0, 1000]", NULL},
    {"tonemap.hable.exposure_bias", NUM, F(tonemap.hable_exposure_bias), "2", "(0, 100]", NULL},
    {"tonemap.lottes.contrast", NUM, F(tonemap.lottes_contrast), "1.6", "[1, 2]", NULL},
    {"tonemap.lottes.shoulder", NUM, F(tonemap.lottes_shoulder), "0.977", "[0.01, 2]", NULL},
    {"tonemap.lottes.hdr_max", NUM, F(tonemap.lottes_hdr_max), "8", "[1, 1000]", NULL},
    {"tonemap.lottes.mid_in", NUM, F(tonemap.lottes_mid_in), "0.18", "(0, 1]", NULL},
    {"tonemap.lottes.mid_out", NUM, F(tonemap.lottes_mid_out), "0.267", "(0, 1)", NULL},
    {"tonemap.uchimura.max_brightness", NUM, F(tonemap.uchimura_max_brightness), "1", "[1, 100]", NULL},
    {"tonemap.uchimura.contrast", NUM, F(tonemap.uchimura_contrast), "1", "(0, 5]", NULL},
    {"tonemap.uchimura.linear_start", NUM, F(tonemap.uchimura_linear_start), "0.22", "(0, 1]", NULL},
    {"tonemap.uchimura.linear_length", NUM, F(tonemap.uchimura_linear_length), "0.4", "[0.01, 0.99]", NULL},
    {"tonemap.uchimura.black_tightness", NUM, F(tonemap.uchimura_black_tightness), "1.33", "[1, 3]", NULL},
    {"tonemap.uchimura.black_offset", NUM, F(tonemap.uchimura_black_offset), "0", "[0, 1]", NULL},
    {"gamma.mode", HP_PARAM_ENUM, F(gamma.mode), "local", NULL, gamma_modes},
    {"gamma.radius", INT, F(gamma.radius), "0", "[0, 64]", NULL},
    {"output.format", HP_PARAM_ENUM, F(output.format), "webp", NULL, formats},
    {"output.quality", INT, F(output.quality), "75", "[0, 100]", NULL},
    {"output.lossless", HP_PARAM_BOOL, F(output.lossless), "false", NULL, NULL},
    {"output.effort", INT, F(output.effort), "2", "[0, 6]", NULL},
    {"output.bit_depth", INT, F(output.bit_depth), "8", "8, 10, 12, 16", NULL},
    {"output.chroma", HP_PARAM_ENUM, F(output.chroma), "auto", NULL, chromas},
    {"output.alpha", HP_PARAM_ENUM, F(output.alpha), "auto", NULL, alphas},
    {"output.dither", HP_PARAM_BOOL, F(output.dither), "true", NULL, NULL},
    {"output.colorspace", HP_PARAM_ENUM, F(output.colorspace), "srgb", NULL, output_colorspaces},
    {"output.png_encoder", HP_PARAM_ENUM, F(output.png_encoder), "auto", NULL, png_encoders},
    /* Issue 34: a studio's OCIO display, view and looks; "" asks for nothing (the config's defaults). */
    {"ocio.display", STR, F(ocio.display), "", NULL, NULL},
    {"ocio.view", STR, F(ocio.view), "", NULL, NULL},
    {"ocio.looks", STR, F(ocio.looks), "", NULL, NULL},
};

#define SPEC_COUNT (sizeof(specs) / sizeof(specs[0]))

/* The open enums (issue 34): where a name outside the choices is kept as text, once an OCIO config is loaded
 * (input.colorspace) or in hdrpost for the daemon to check (look: a studio look). Every other parameter has none. */
static const struct {
    const char *name;
    size_t text_offset;
} open_enums[] = {{"input.colorspace", F(ocio.input)}, {"look", F(look_name)}};

#define OPEN_COUNT (sizeof(open_enums) / sizeof(open_enums[0]))

static size_t spec_open_offset(const char *name)
{
    for (size_t i = 0; i < OPEN_COUNT; i++)
        if (strcmp(open_enums[i].name, name) == 0)
            return open_enums[i].text_offset;
    return 0;
}

/* --- Helpers ----------------------------------------------------------------------------------------- */

static hp_params defaults(void)
{
    hp_params p;
    hp_params_defaults(&p);
    return p;
}

/* A field's value as a number, read by the spec's own type: enums as int, bools 0/1; strings have none
 * (NaN: see field_text). */
static double field_value(const hp_params *p, hp_param_type type, size_t offset)
{
    const char *at = (const char *)p + offset;
    double d;
    uint32_t u;
    switch (type) {
    case HP_PARAM_NUMBER:
    case HP_PARAM_NUMBER_OR_AUTO: memcpy(&d, at, sizeof(d)); return d;
    case HP_PARAM_INTEGER:
    case HP_PARAM_ENUM: memcpy(&u, at, sizeof(u)); return u;
    case HP_PARAM_BOOL: return *(const bool *)at;
    case HP_PARAM_STRING: return NAN;
    }
    return NAN;
}

/* A string field's text. */
static const char *field_text(const hp_params *p, size_t offset) { return (const char *)p + offset; }

static double def_value(const hp_param_def *def, const hp_params *p)
{
    return field_value(p, def->type, def->offset);
}

/* One parameter the same in a and b: strings by their text, the rest by value. */
static bool same_value(const hp_param_def *def, const hp_params *a, const hp_params *b)
{
    if (def->type == HP_PARAM_STRING)
        return strcmp(field_text(a, def->offset), field_text(b, def->offset)) == 0;
    return def_value(def, a) == def_value(def, b);
}

/* Equal in every parameter (and the "auto" flag), whatever the padding holds. */
static bool params_equal(const hp_params *a, const hp_params *b, const char **differs)
{
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        bool same = same_value(def, a, b);
        if (def->open_offset) /* an open enum: its kept text too (input.colorspace's config space) */
            same = same && strcmp(field_text(a, def->open_offset), field_text(b, def->open_offset)) == 0;
        if (def->type == HP_PARAM_NUMBER_OR_AUTO) {
            bool auto_a = *(const bool *)((const char *)a + def->aux_offset);
            bool auto_b = *(const bool *)((const char *)b + def->aux_offset);
            same = auto_a == auto_b && (auto_a || same);
        }
        if (!same) {
            if (differs)
                *differs = def->name;
            return false;
        }
    }
    return true;
}

static const spec *spec_for(const char *name)
{
    for (size_t i = 0; i < SPEC_COUNT; i++)
        if (strcmp(specs[i].name, name) == 0)
            return &specs[i];
    return NULL;
}

/* A refusal naming the field, whose message contains each needle (NULL ends the list). */
static bool refused(hp_code code, const hp_err *err, const char *field, ...)
{
    bool ok = code == HP_ERR_INVALID_ARGUMENT && err->code == HP_ERR_INVALID_ARGUMENT &&
              strcmp(err->field, field) == 0;
    va_list ap;
    va_start(ap, field);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        ok = ok && strstr(err->message, needle) != NULL;
    va_end(ap);
    if (!ok)
        tap_diag("code %d, field \"%s\", message: %s", (int)code, err->field, err->message);
    return ok;
}

static hp_code from_json_text(const char *text, hp_params *p, hp_err *err)
{
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        tap_diag("bad JSON in the test: %s: %s", text, jerr.text);
        return HP_ERR_INTERNAL;
    }
    hp_code code = hp_params_from_json(j, p, err);
    json_decref(j);
    return code;
}

typedef struct interval {
    double lo, hi;
    bool lo_open, hi_open;
} interval;

static interval parse_interval(const char *text)
{
    interval r = {0};
    r.lo_open = text[0] == '(';
    char *end;
    r.lo = strtod(text + 1, &end);
    r.hi = strtod(end + 1, &end);
    r.hi_open = *end == ')';
    return r;
}

/* --- Schema against spec ----------------------------------------------------------------------------- */

/* A parameter's help is read on its own (GET /v1/params, the console's form, the OpenAPI document), not only
 * in docs/PARAMETERS.md's table: it must not point at a place on that page (issue 35: "listed under look
 * above" reached the JSON). */
static void test_help_stands_alone(void)
{
    static const char *const page_words[] = {"listed under", "see above", "see below", "above)", "below)"};
    size_t bad = 0;
    for (size_t i = 0; i < hp_param_schema_count; i++)
        for (size_t w = 0; w < sizeof page_words / sizeof page_words[0]; w++)
            if (strstr(hp_param_schema[i].help, page_words[w])) {
                tap_diag("%s's help says \"%s\"", hp_param_schema[i].name, page_words[w]);
                bad++;
            }
    tap_ok(bad == 0, "no parameter's help points at a place on the documentation's page (%zu do)", bad);
}

static void test_schema(void)
{
    size_t matched = 0;
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        if (spec_for(hp_param_schema[i].name))
            matched++;
        else
            tap_diag("in the schema but not in the spec: %s", hp_param_schema[i].name);
    }
    for (size_t i = 0; i < SPEC_COUNT; i++)
        if (!hp_param_find(specs[i].name))
            tap_diag("in the spec but not in the schema: %s", specs[i].name);
    tap_ok(matched == SPEC_COUNT && hp_param_schema_count == SPEC_COUNT,
           "the schema has exactly the %zu parameters of the spec (%zu entries, %zu matched)", SPEC_COUNT,
           hp_param_schema_count, matched);

    bool unique = true;
    for (size_t i = 0; i < hp_param_schema_count; i++)
        for (size_t j = i + 1; j < hp_param_schema_count; j++)
            unique = unique && strcmp(hp_param_schema[i].name, hp_param_schema[j].name) != 0;
    tap_ok(unique, "every schema name is unique");

    for (size_t i = 0; i < SPEC_COUNT; i++) {
        const hp_param_def *def = hp_param_find(specs[i].name);
        if (!def)
            continue;
        tap_ok(def->type == specs[i].type && def->offset == specs[i].offset,
               "%s has the spec's type and sets its field (offset %zu, expected %zu)", specs[i].name,
               def->offset, specs[i].offset);
    }
    size_t open = 0;
    bool open_right = true;
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        size_t want = spec_open_offset(def->name);
        open += def->open_offset != 0;
        if (def->open_offset != want || (want && def->type != HP_PARAM_ENUM)) {
            tap_diag("%s: open_offset %zu, expected %zu", def->name, def->open_offset, want);
            open_right = false;
        }
    }
    tap_ok(open_right && open == OPEN_COUNT,
           "exactly input.colorspace and look are open enums, keeping their text in ocio.input and look_name (%zu "
           "open)", open);

    /* Every byte of hp_params that is not padding belongs to one entry: padding before a field is
     * shorter than the field's alignment, so a gap that could hold the next field is a field the table
     * left out. After the last field (color) only the padding to hp_params' alignment. An open enum's text
     * (ocio.input) is its entry's too, through open_offset. */
    struct span {
        size_t start, size;
        const char *name;
    } spans[3 * SPEC_COUNT + 1] = {{0}};
    size_t n = 0;
    for (size_t i = 0; i < hp_param_schema_count && n + 3 <= 3 * SPEC_COUNT; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        size_t size = def->type == HP_PARAM_BOOL     ? sizeof(bool)
                      : def->type == HP_PARAM_STRING ? HP_PARAM_STRING_MAX + 1
                      : def->type == HP_PARAM_NUMBER || def->type == HP_PARAM_NUMBER_OR_AUTO ? sizeof(double)
                                                                                              : sizeof(uint32_t);
        spans[n++] = (struct span){def->offset, size, def->name};
        if (def->type == HP_PARAM_NUMBER_OR_AUTO)
            spans[n++] = (struct span){def->aux_offset, sizeof(bool), "an \"auto\" flag"};
        if (def->open_offset)
            spans[n++] = (struct span){def->open_offset, HP_PARAM_STRING_MAX + 1, "an open enum's text"};
    }
    /* The one field that is no parameter: the frame's colour, resolved from input.colorspace and the file by
     * api/frames/render.c before the frame is queued (pipeline/params.h). */
    spans[n++] = (struct span){offsetof(hp_params, color), sizeof(hp_input_color), "color (resolved)"};
    for (size_t i = 1; i < n; i++) /* insertion sort by start */
        for (size_t j = i; j > 0 && spans[j - 1].start > spans[j].start; j--) {
            struct span t = spans[j];
            spans[j] = spans[j - 1];
            spans[j - 1] = t;
        }
    bool covered = n > 0 && spans[0].start == 0;
    size_t end = 0;
    for (size_t i = 0; i < n; i++) {
        /* A gap is a forgotten field unless it is padding: shorter than the field after it, or than a
         * double before a field that starts a struct aligned to 8. */
        size_t gap = spans[i].start - end;
        bool padding = gap < spans[i].size || (gap < sizeof(double) && spans[i].start % sizeof(double) == 0);
        if (spans[i].start < end || !padding) {
            tap_diag("bytes %zu..%zu before %s are %s", end, spans[i].start, spans[i].name,
                     spans[i].start < end ? "claimed twice" : "in no entry");
            covered = false;
        }
        end = spans[i].start + spans[i].size;
    }
    covered = covered && (end + _Alignof(hp_params) - 1) / _Alignof(hp_params) * _Alignof(hp_params) == sizeof(hp_params);
    tap_ok(covered, "the schema covers every field of hp_params once (%zu fields and flags, %zu bytes)", n,
           sizeof(hp_params));

    bool helps = true;
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const char *h = hp_param_schema[i].help;
        size_t len = h ? strlen(h) : 0;
        if (len < 10 || h[len - 1] != '.' || strpbrk(h, "|\n") || !hp_param_schema[i].unit) {
            tap_diag("%s: help or unit unfit for the docs table", hp_param_schema[i].name);
            helps = false;
        }
    }
    tap_ok(helps, "every parameter has a unit string and a one-line help sentence without '|'");

    tap_ok(!hp_param_find("tonemap") && !hp_param_find("tonemap.operato") && !hp_param_find("") &&
               !hp_param_find(NULL) && hp_param_find("tonemap.operator") &&
               strcmp(hp_param_find("tonemap.operator")->name, "tonemap.operator") == 0,
           "hp_param_find matches whole dotted names only");

    bool rgb = true;
    for (int op = 0; op < HP_TONE_OPERATOR_COUNT; op++)
        rgb = rgb && hp_tone_operator_on_rgb((hp_tone_operator)op) ==
                         (op == HP_TONE_ACES_HILL || op == HP_TONE_AGX || op == HP_TONE_KHRONOS_NEUTRAL ||
                          op == HP_TONE_FALSE_COLOR);
    tap_ok(rgb, "exactly aces_hill, agx, khronos_neutral and false_color run on RGB");
}

/* --- Defaults ---------------------------------------------------------------------------------------- */

static void test_defaults(void)
{
    hp_params p = defaults();
    for (size_t i = 0; i < SPEC_COUNT; i++) {
        const spec *s = &specs[i];
        const hp_param_def *def = hp_param_find(s->name);
        if (!def)
            continue;
        if (s->type == HP_PARAM_STRING) {
            const char *got = field_text(&p, s->offset);
            tap_ok(strcmp(got, s->def) == 0 && (def->def_text == NULL || strcmp(def->def_text, s->def) == 0),
                   "default %s = \"%s\" (field \"%s\", table %s)", s->name, s->def, got,
                   def->def_text ? def->def_text : "NULL, which is \"\"");
            continue;
        }
        if (s->type == HP_PARAM_NUMBER_OR_AUTO && strcmp(s->def, "auto") == 0) {
            bool flag = *(const bool *)((const char *)&p + def->aux_offset);
            tap_ok(s->type == HP_PARAM_NUMBER_OR_AUTO && def->def_auto && flag, "default %s = \"auto\" (flag %d)",
                   s->name, flag);
            continue;
        }
        double want;
        if (s->type == HP_PARAM_ENUM) {
            want = -1;
            for (const enum_choice *c = s->choices; c->name; c++)
                if (strcmp(c->name, s->def) == 0)
                    want = c->value;
        } else if (s->type == HP_PARAM_BOOL) {
            want = strcmp(s->def, "true") == 0;
        } else {
            want = strtod(s->def, NULL);
        }
        double got = field_value(&p, s->type, s->offset);
        tap_ok(got == want && def->def == want && !def->def_auto, "default %s = %s (field %.17g, table %.17g)",
               s->name, s->def, got, def->def);
    }
    tap_ok(!p.exposure.key_auto, "exposure.key defaults to the number 0.18, not \"auto\"");
    tap_ok(p.ocio.input[0] == '\0' && !hp_params_ocio_on(&p),
           "input.colorspace's kept text (ocio.input) defaults to \"\": the defaults ask for no OCIO view");

    hp_err err = {0};
    tap_ok(hp_params_check(&p, &err) == HP_OK, "the defaults pass hp_params_check: %s", err.message);

    hp_params dirty;
    memset(&dirty, 0xA5, sizeof(dirty));
    hp_params_defaults(&dirty);
    tap_ok(params_equal(&dirty, &p, NULL) && memcmp(&dirty, &p, sizeof(p)) == 0,
           "hp_params_defaults overwrites every byte, whatever was there");
}

/* --- Enums ------------------------------------------------------------------------------------------- */

static void test_enums(void)
{
    hp_err err = {0};
    for (size_t i = 0; i < SPEC_COUNT; i++) {
        const spec *s = &specs[i];
        const hp_param_def *def = hp_param_find(s->name);
        if (s->type != HP_PARAM_ENUM || !def)
            continue;
        size_t count = 0;
        for (const enum_choice *c = s->choices; c->name; c++, count++) {
            hp_params p = defaults();
            /* rec2020 is for 16-bit PNG (a rule across fields): the round trip carries those too. */
            if (s->offset == F(output.colorspace))
                p.output.format = HP_OUTPUT_PNG, p.output.bit_depth = 16;
            hp_code code = hp_param_set_string(&p, def, c->name, &err);
            json_t *j = hp_params_to_json(&p);
            char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
            hp_params back = defaults();
            hp_code back_code = j ? hp_params_from_json(j, &back, &err) : HP_ERR_INTERNAL;
            char needle[128];
            snprintf(needle, sizeof(needle), "\"%s\"", c->name);
            tap_ok(code == HP_OK && field_value(&p, s->type, s->offset) == c->value && text &&
                       strstr(text, needle) && back_code == HP_OK && field_value(&back, s->type, s->offset) == c->value,
                   "%s \"%s\" sets enum value %d and round-trips through JSON", s->name, c->name, c->value);
            free(text);
            json_decref(j);
        }
        tap_ok(def->choices && def->choices[count] == NULL, "%s offers exactly the %zu choices of the spec",
               s->name, count);

        hp_params p = defaults(), before = p;
        char want[600];
        size_t n = (size_t)snprintf(want, sizeof(want), "%s must be one of ", s->name);
        for (const enum_choice *c = s->choices; c->name; c++)
            n += (size_t)snprintf(want + n, sizeof(want) - n, "%s%s", c == s->choices ? "" : ", ", c->name);
        snprintf(want + n, sizeof(want) - n, ", got \"nope\"");
        hp_code code = hp_param_set_string(&p, def, "nope", &err);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && strcmp(err.message, want) == 0 && strcmp(err.field, s->name) == 0 &&
                   params_equal(&p, &before, NULL),
               "%s refuses an unknown choice, listing the choices: %s", s->name, err.message);
    }

    const hp_param_def *op = hp_param_find("tonemap.operator");
    hp_params p = defaults();
    tap_ok(refused(hp_param_set_string(&p, op, "Hable", &err), &err, "tonemap.operator", "got \"Hable\"", NULL),
           "choices are case-sensitive");
    tap_ok(refused(hp_param_set_number(&p, op, 5, &err), &err, "tonemap.operator", "must be one of linear", "got 5",
                   NULL),
           "an enum is not set by its number");
}

/* --- Numeric bounds ---------------------------------------------------------------------------------- */

static bool accepts(const hp_param_def *def, double v)
{
    hp_params p = defaults();
    hp_err err = {0};
    hp_code code = hp_param_set_number(&p, def, v, &err);
    if (code != HP_OK)
        tap_diag("%s refused %.17g: %s", def->name, v, err.message);
    return code == HP_OK && def_value(def, &p) == v;
}

static bool refuses(const hp_param_def *def, double v)
{
    hp_params p = defaults(), before = p;
    hp_err err = {0};
    hp_code code = hp_param_set_number(&p, def, v, &err);
    if (code == HP_OK)
        tap_diag("%s accepted %.17g", def->name, v);
    return code == HP_ERR_INVALID_ARGUMENT && strcmp(err.field, def->name) == 0 && params_equal(&p, &before, NULL);
}

static void test_bounds(void)
{
    for (size_t i = 0; i < SPEC_COUNT; i++) {
        const spec *s = &specs[i];
        const hp_param_def *def = hp_param_find(s->name);
        if (!def || !s->range || (s->range[0] != '[' && s->range[0] != '(')) /* lists: tested below */
            continue;
        interval r = parse_interval(s->range);
        bool integer = s->type == HP_PARAM_INTEGER;
        bool lower, upper;
        if (integer) {
            lower = accepts(def, r.lo) && refuses(def, r.lo - 1);
            upper = accepts(def, r.hi) && refuses(def, r.hi + 1);
        } else {
            lower = r.lo_open ? refuses(def, r.lo) && accepts(def, nextafter(r.lo, INFINITY))
                              : accepts(def, r.lo) && refuses(def, nextafter(r.lo, -INFINITY));
            upper = r.hi_open ? refuses(def, r.hi) && accepts(def, nextafter(r.hi, -INFINITY))
                              : accepts(def, r.hi) && refuses(def, nextafter(r.hi, INFINITY));
        }
        tap_ok(lower, "%s: lower edge of %s enforced", s->name, s->range);
        tap_ok(upper, "%s: upper edge of %s enforced", s->name, s->range);
        tap_ok(refuses(def, NAN) && refuses(def, INFINITY) && refuses(def, -INFINITY),
               "%s: NaN and infinities refused", s->name);
        if (integer)
            tap_ok(refuses(def, r.lo + 0.5), "%s: a fraction is refused", s->name);

        /* The message names the parameter, the type and the range, and shows the value. */
        hp_params p = defaults();
        hp_err err = {0};
        char want[300];
        snprintf(want, sizeof(want), "%s must be %s %s%s, got -1000000", s->name,
                 integer ? "an integer in" : "a number in", s->range,
                 s->type == HP_PARAM_NUMBER_OR_AUTO ? " or \"auto\"" : "");
        hp_param_set_number(&p, def, -1e6, &err);
        tap_ok(strcmp(err.message, want) == 0 && strcmp(err.field, s->name) == 0, "%s: message \"%s\"", s->name,
               err.message);
    }

    const hp_param_def *depth = hp_param_find("output.bit_depth");
    tap_ok(accepts(depth, 8) && accepts(depth, 10) && accepts(depth, 12) && accepts(depth, 16),
           "output.bit_depth takes 8, 10, 12 and 16 (the format is a rule's)");
    tap_ok(refuses(depth, 9) && refuses(depth, 11) && refuses(depth, 14) && refuses(depth, 15) && refuses(depth, 0) &&
               refuses(depth, 32) && refuses(depth, 8.5) && refuses(depth, 10.5),
           "output.bit_depth refuses everything else (9, 11, 14, 15, 0, 32, 8.5, 10.5)");
    hp_params p = defaults();
    hp_err err = {0};
    hp_param_set_number(&p, depth, 11, &err);
    tap_ok(strcmp(err.message, "output.bit_depth must be one of 8, 10, 12, 16, got 11") == 0, "bit_depth message: %s",
           err.message);
    const hp_param_def *channels = hp_param_find("input.channels");
    tap_ok(accepts(channels, 1) && accepts(channels, 3) && accepts(channels, 4) && refuses(channels, 0) &&
               refuses(channels, 2) && refuses(channels, 5) && refuses(channels, 3.5),
           "input.channels takes 1, 3 and 4 and refuses 0, 2, 5, 3.5");
    p = defaults();
    hp_param_set_number(&p, channels, 2, &err);
    tap_ok(strcmp(err.message, "input.channels must be one of 1, 3, 4, got 2") == 0, "channels message: %s",
           err.message);

    p = defaults();
    const hp_param_def *wp = hp_param_find("tonemap.white_point");
    hp_param_set_number(&p, wp, -1, &err);
    tap_ok(strcmp(err.message, "tonemap.white_point must be a number in [0, 1e9], got -1") == 0 &&
               strcmp(err.field, "tonemap.white_point") == 0,
           "the issue's example message: %s", err.message);
    hp_param_set_number(&p, wp, NAN, &err);
    tap_ok(strstr(err.message, "got NaN") != NULL, "a NaN is shown as NaN: %s", err.message);

    const hp_param_def *dither = hp_param_find("output.dither");
    tap_ok(refused(hp_param_set_number(&p, dither, 1, &err), &err, "output.dither", "must be true or false, got 1",
                   NULL) &&
               refused(hp_param_set_bool(&p, wp, true, &err), &err, "tonemap.white_point",
                       "must be a number in [0, 1e9], got true", NULL),
           "booleans and numbers do not stand in for each other");
}

/* --- exposure.key: a number or "auto" ----------------------------------------------------------------- */

static void test_key_auto(void)
{
    const hp_param_def *key = hp_param_find("exposure.key");
    hp_params p = defaults();
    hp_err err = {0};
    hp_code code = hp_param_set_string(&p, key, "auto", &err);
    tap_ok(code == HP_OK && p.exposure.key_auto, "exposure.key \"auto\" sets key_auto");
    code = hp_param_set_number(&p, key, 0.3, &err);
    tap_ok(code == HP_OK && !p.exposure.key_auto && p.exposure.key == 0.3, "a number clears key_auto");

    p = defaults();
    code = from_json_text("{\"exposure\": {\"key\": \"auto\"}}", &p, &err);
    json_t *j = hp_params_to_json(&p);
    json_t *k = json_object_get(json_object_get(j, "exposure"), "key");
    tap_ok(code == HP_OK && p.exposure.key_auto && json_is_string(k) && strcmp(json_string_value(k), "auto") == 0,
           "JSON \"auto\" is read and echoed as \"auto\"");
    json_decref(j);

    p = defaults();
    tap_ok(hp_params_from_query("exposure.key=auto", &p, &err) == HP_OK && p.exposure.key_auto,
           "query exposure.key=auto");
    p = defaults();
    tap_ok(refused(from_json_text("{\"exposure.key\": \"0.5\"}", &p, &err), &err, "exposure.key",
                   "must be a number or the string \"auto\"", "got the string \"0.5\"", NULL) &&
               refused(hp_param_set_string(&p, key, "AUTO", &err), &err, "exposure.key",
                       "a number in (0, 1] or \"auto\", got \"AUTO\"", NULL),
           "a quoted number or another word is not \"auto\"");
}

/* --- Strings: the OpenEXR names ------------------------------------------------------------------------ */

static hp_code check_json(const char *text, hp_err *err);

static void test_strings(void)
{
    static const char *const names[] = {"input.layer", "input.channel_r", "input.channel_g",
                                        "input.channel_b", "input.channel_a", "input.depth"};
    hp_err err = {0};
    bool stated = true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const hp_param_def *def = hp_param_find(names[i]);
        stated = stated && def && def->type == HP_PARAM_STRING && def->min == 0 && def->max == SPEC_STRING_MAX &&
                 HP_PARAM_STRING_MAX == SPEC_STRING_MAX;
    }
    tap_ok(stated, "the six names are strings of 0 to %d bytes (\"\" allowed: it means automatic)", SPEC_STRING_MAX);
    bool fits = true;
    for (size_t i = 0; i < hp_param_schema_count; i++)
        if (hp_param_schema[i].type == HP_PARAM_STRING)
            fits = fits && hp_param_schema[i].max <= HP_PARAM_STRING_MAX && hp_param_schema[i].min >= 0 &&
                   (!hp_param_schema[i].def_text || strlen(hp_param_schema[i].def_text) <= hp_param_schema[i].max);
    tap_ok(fits, "every string parameter's length bound and default fit its array of %d bytes", HP_PARAM_STRING_MAX + 1);

    const hp_param_def *layer = hp_param_find("input.layer");
    hp_params p = defaults();
    tap_ok(from_json_text("{\"input\": {\"layer\": \"ViewLayer.Combined\", \"depth\": \"ViewLayer.Depth.Z\"}}", &p,
                          &err) == HP_OK &&
               strcmp(p.input.layer, "ViewLayer.Combined") == 0 && strcmp(p.input.depth, "ViewLayer.Depth.Z") == 0,
           "a JSON string sets input.layer and input.depth");
    hp_params dotted = defaults();
    tap_ok(from_json_text("{\"input.layer\": \"ViewLayer.Combined\", \"input.depth\": \"ViewLayer.Depth.Z\"}",
                          &dotted, &err) == HP_OK &&
               params_equal(&dotted, &p, NULL),
           "dotted keys set the same names");
    p = defaults();
    tap_ok(from_json_text("{\"input\": {\"channel_r\": \"Beauty.R\", \"channel_g\": \"Diffuse.G\", "
                          "\"channel_b\": \"Beauty.B\", \"channel_a\": \"Mask.Y\"}}", &p, &err) == HP_OK &&
               strcmp(p.input.channel_r, "Beauty.R") == 0 && strcmp(p.input.channel_g, "Diffuse.G") == 0 &&
               strcmp(p.input.channel_b, "Beauty.B") == 0 && strcmp(p.input.channel_a, "Mask.Y") == 0,
           "channel_r, _g, _b and _a take full channel names from JSON");

    p = defaults();
    tap_ok(hp_params_from_query("input.layer=Render+Layer.Combined&input.depth=Ebene%C3%A9.Z", &p, &err) == HP_OK &&
               strcmp(p.input.layer, "Render Layer.Combined") == 0 && strcmp(p.input.depth, "Ebene\xC3\xA9.Z") == 0,
           "query keys set names, percent-decoded ('+' a space, UTF-8 escapes)");
    tap_ok(refused(hp_params_from_query("input.layer=", &p, &err), &err, "input.layer", "has an empty value",
                   "a string", NULL),
           "an empty query value is refused (leave the key out for the automatic choice)");
    p = defaults();
    p.input.layer[0] = 'x';
    tap_ok(from_json_text("{\"input\": {\"layer\": \"\"}}", &p, &err) == HP_OK && p.input.layer[0] == '\0',
           "a JSON \"\" sets the automatic choice back");
    p = defaults();
    tap_ok(hp_param_set_string(&p, layer, "auto", &err) == HP_OK && strcmp(p.input.layer, "auto") == 0,
           "\"auto\" is a name like any other for a string parameter");

    /* Length: 255 bytes is the most. */
    char longest[SPEC_STRING_MAX + 2];
    memset(longest, 'L', SPEC_STRING_MAX);
    longest[SPEC_STRING_MAX] = '\0';
    p = defaults();
    tap_ok(hp_param_set_string(&p, layer, longest, &err) == HP_OK && strlen(p.input.layer) == SPEC_STRING_MAX,
           "a name of %d bytes is taken whole", SPEC_STRING_MAX);
    longest[SPEC_STRING_MAX] = 'L';
    longest[SPEC_STRING_MAX + 1] = '\0';
    hp_params before = defaults();
    p = before;
    hp_code code = hp_param_set_string(&p, layer, longest, &err);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT &&
               strcmp(err.message, "input.layer must be a string of at most 255 bytes without control characters, "
                                   "got 256 bytes") == 0 &&
               strcmp(err.field, "input.layer") == 0 && params_equal(&p, &before, NULL),
           "a name of %d bytes is refused, saying the limit and the length: %s", SPEC_STRING_MAX + 1, err.message);
    char query[40 + 2 * SPEC_STRING_MAX];
    snprintf(query, sizeof(query), "input.channel_a=%s%s", longest, longest);
    tap_ok(refused(hp_params_from_query(query, &p, &err), &err, "input.channel_a", "at most 255 bytes", "got 512 bytes",
                   NULL),
           "a long query value is refused the same way");

    /* Wrong JSON types. */
    struct {
        const char *json, *needle;
    } wrong[] = {
        {"{\"input\": {\"layer\": 5}}",
         "input.layer must be a string of at most 255 bytes without control characters, got 5"},
        {"{\"input\": {\"layer\": true}}", "got true"},
        {"{\"input\": {\"layer\": null}}", "input.layer must be a string, got null"},
        {"{\"input\": {\"layer\": [\"a\"]}}", "input.layer must be a string, got an array"},
        {"{\"input\": {\"layer\": {\"name\": \"a\"}}}", "input.layer must be a string, got an object"},
    };
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        p = defaults();
        tap_ok(refused(from_json_text(wrong[i].json, &p, &err), &err, "input.layer", wrong[i].needle, NULL) &&
                   params_equal(&p, &before, NULL),
               "JSON %s is refused: %s", wrong[i].json, err.message);
    }
    /* The parser refuses \u0000 by default, so the string is made here as a server would never see it. */
    json_t *with_nul = json_pack("{s:{s:o}}", "input", "layer", json_stringn("a\0b", 3));
    p = defaults();
    tap_ok(refused(hp_params_from_json(with_nul, &p, &err), &err, "input.layer",
                   "input.layer must be a string, got a string with a NUL character", NULL) &&
               params_equal(&p, &before, NULL),
           "a JSON string with a NUL inside is refused, not cut at the NUL");
    json_decref(with_nul);
    tap_ok(refused(hp_param_set_number(&p, layer, 1, &err), &err, "input.layer", "got 1", NULL) &&
               refused(hp_param_set_bool(&p, layer, false, &err), &err, "input.layer", "got false", NULL),
           "numbers and booleans do not stand in for a name");

    /* Control characters and bytes that are not UTF-8, from the query (JSON strings are UTF-8 already). */
    struct {
        const char *query, *needle;
    } bad[] = {
        {"input.layer=View%0ALayer", "got the control character U+000A at byte 5"},
        {"input.layer=%09Layer", "got the control character U+0009 at byte 1"},
        {"input.layer=Layer%1B%5B31m", "U+001B at byte 6"},
        {"input.layer=Layer%7F", "U+007F at byte 6"},
        {"input.layer=Layer%C2%85", "U+0085 at byte 6"},
        {"input.layer=Layer%FF", "a byte 0xFF that is not UTF-8 text at byte 6"},
        {"input.layer=%C0%AF", "not UTF-8"},     /* an overlong '/' */
        {"input.layer=%ED%A0%80", "not UTF-8"},  /* a surrogate */
        {"input.layer=%C3", "not UTF-8"},        /* cut short */
        {"input.layer=%F4%90%80%80", "not UTF-8"}, /* above U+10FFFF */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = defaults();
        tap_ok(refused(hp_params_from_query(bad[i].query, &p, &err), &err, "input.layer",
                       "input.layer must be a string of at most 255 bytes without control characters", bad[i].needle,
                       NULL),
               "query %s refused (%s)", bad[i].query, bad[i].needle);
    }
    p = defaults();
    tap_ok(refused(from_json_text("{\"input.depth\": \"Depth\\tZ\"}", &p, &err), &err, "input.depth",
                   "control character U+0009", NULL),
           "a control character in a JSON string is refused");
    p = defaults();
    tap_ok(hp_params_from_query("input.layer=%E2%82%AC%F0%9F%8E%A5.Combined", &p, &err) == HP_OK &&
               strcmp(p.input.layer, "\xE2\x82\xAC\xF0\x9F\x8E\xA5.Combined") == 0,
           "three- and four-byte UTF-8 is taken");

    /* The rules between the names. */
    tap_ok(refused(check_json("{\"input\": {\"channel_r\": \"A.R\"}}", &err), &err, "input.channel_g",
                   "input.channel_g is missing beside input.channel_r", NULL) &&
               refused(check_json("{\"input\": {\"channel_r\": \"A.R\", \"channel_g\": \"A.G\"}}", &err), &err,
                       "input.channel_b", "missing", NULL) &&
               refused(check_json("{\"input\": {\"channel_b\": \"A.B\"}}", &err), &err, "input.channel_r",
                       "missing beside input.channel_b", NULL),
           "channel_r, _g and _b go together; the error names the first one missing");
    tap_ok(refused(check_json("{\"input\": {\"layer\": \"A\", \"channel_r\": \"A.R\", \"channel_g\": \"A.G\", "
                              "\"channel_b\": \"A.B\"}}", &err), &err, "input.layer", "not both", NULL) &&
               check_json("{\"input\": {\"layer\": \"A\", \"channel_a\": \"Mask.Y\", \"depth\": \"Z\"}}",
                          &err) == HP_OK,
           "a layer and named colour channels are refused together; a layer with alpha and depth is taken");
    tap_ok(refused(check_json("{\"input\": {\"width\": 4, \"height\": 4, \"layer\": \"A\"}}", &err), &err,
                   "input.layer", "raw samples", NULL) &&
               refused(check_json("{\"input\": {\"width\": 4, \"height\": 4, \"depth\": \"Z\"}}", &err), &err,
                       "input.depth", "raw samples", NULL),
           "raw samples take no OpenEXR names");

    /* A struct filled in C is held to the same rules. */
    p = defaults();
    memset(p.input.layer, 'a', sizeof(p.input.layer));
    tap_ok(refused(hp_params_check(&p, &err), &err, "input.layer", "no NUL", NULL),
           "hp_params_check refuses a name with no NUL in its array");
    p = defaults();
    strcpy(p.input.depth, "Z\r");
    tap_ok(refused(hp_params_check(&p, &err), &err, "input.depth", "U+000D", NULL),
           "hp_params_check refuses a control character put there in C");

    p = defaults();
    hp_params_from_query("input.layer=Render+Layer%C3%A9.Combined", &p, &err);
    json_t *j = hp_params_to_json(&p);
    json_t *echoed = json_object_get(json_object_get(j, "input"), "layer");
    tap_ok(json_is_string(echoed) && strcmp(json_string_value(echoed), "Render Layer\xC3\xA9.Combined") == 0,
           "the effective parameters echo the name as a JSON string");
    json_decref(j);
}

/* --- Rules across fields ----------------------------------------------------------------------------- */

static hp_code check_json(const char *text, hp_err *err)
{
    hp_params p = defaults();
    return from_json_text(text, &p, err);
}

static void test_rules(void)
{
    hp_err err = {0};
    tap_ok(refused(check_json("{\"exposure\": {\"low_percent\": 50, \"high_percent\": 50}}", &err), &err,
                   "exposure.low_percent", "exposure.high_percent", NULL) &&
               check_json("{\"exposure\": {\"low_percent\": 49.9, \"high_percent\": 50}}", &err) == HP_OK,
           "exposure.low_percent must be below high_percent");
    tap_ok(check_json("{\"exposure\": {\"high_percent\": 5, \"low_percent\": 2}}", &err) == HP_OK,
           "rules are checked after every key is set, not in key order (high 5 before low 2)");
    tap_ok(refused(check_json("{\"analysis\": {\"histogram_min_log2\": 3, \"histogram_max_log2\": 3}}", &err), &err,
                   "analysis.histogram_max_log2", "analysis.histogram_min_log2", NULL) &&
               check_json("{\"analysis\": {\"histogram_min_log2\": -64, \"histogram_max_log2\": -63}}", &err) == HP_OK,
           "analysis.histogram_max_log2 must be above histogram_min_log2");
    tap_ok(refused(check_json("{\"output\": {\"bit_depth\": 16}}", &err), &err, "output.bit_depth", "png", NULL) &&
               check_json("{\"output\": {\"bit_depth\": 16, \"format\": \"png\"}}", &err) == HP_OK,
           "output.bit_depth 16 only with output.format png");
    tap_ok(refused(check_json("{\"output\": {\"bit_depth\": 16, \"format\": \"avif\"}}", &err), &err,
                   "output.bit_depth", "output.bit_depth 16 needs output.format png", "got format avif", NULL) &&
               refused(check_json("{\"output\": {\"bit_depth\": 16, \"format\": \"jpeg\"}}", &err), &err,
                       "output.bit_depth", "needs output.format png", "got format jpeg", NULL),
           "output.bit_depth 16 with avif or jpeg is refused, naming png: %s", err.message);
    static const char *const not_avif[] = {"webp", "png", "jpeg"};
    for (size_t i = 0; i < sizeof(not_avif) / sizeof(not_avif[0]); i++) {
        char ten[96], twelve[96], got[40];
        snprintf(ten, sizeof(ten), "{\"output\": {\"bit_depth\": 10, \"format\": \"%s\"}}", not_avif[i]);
        snprintf(twelve, sizeof(twelve), "{\"output\": {\"bit_depth\": 12, \"format\": \"%s\"}}", not_avif[i]);
        snprintf(got, sizeof(got), "got format %s", not_avif[i]);
        tap_ok(refused(check_json(ten, &err), &err, "output.bit_depth", "output.bit_depth 10 needs output.format avif",
                       got, NULL) &&
                   refused(check_json(twelve, &err), &err, "output.bit_depth",
                           "output.bit_depth 12 needs output.format avif", got, NULL),
               "output.bit_depth 10 and 12 with %s are refused, naming avif", not_avif[i]);
    }
    tap_ok(check_json("{\"output\": {\"bit_depth\": 10, \"format\": \"avif\"}}", &err) == HP_OK &&
               check_json("{\"output\": {\"bit_depth\": 12, \"format\": \"avif\", \"chroma\": \"420\"}}",
                          &err) == HP_OK &&
               check_json("{\"output\": {\"format\": \"avif\"}}", &err) == HP_OK &&
               check_json("{\"output\": {\"format\": \"jpeg\", \"chroma\": \"444\", \"quality\": 90}}", &err) ==
                   HP_OK,
           "avif takes 8, 10 and 12 bits; jpeg 8 bits with either chroma");
    tap_ok(refused(check_json("{\"output\": {\"colorspace\": \"rec2020\"}}", &err), &err, "output.colorspace",
                   "output.bit_depth 16", NULL) &&
               refused(check_json("{\"output\": {\"colorspace\": \"rec2020\", \"format\": \"png\"}}", &err), &err,
                       "output.colorspace", "got format png with 8 bits", NULL) &&
               check_json("{\"output\": {\"colorspace\": \"rec2020\", \"format\": \"png\", \"bit_depth\": 16}}",
                          &err) == HP_OK &&
               check_json("{\"output\": {\"colorspace\": \"display_p3\"}}", &err) == HP_OK,
           "output.colorspace rec2020 only with 16-bit PNG, named in the refusal; display_p3 with anything");
    tap_ok(check_json("{\"output\": {\"colorspace\": \"rec2020\", \"format\": \"avif\", \"bit_depth\": 10}}",
                      &err) == HP_OK &&
               check_json("{\"output\": {\"colorspace\": \"rec2020\", \"format\": \"avif\", \"bit_depth\": 12}}",
                          &err) == HP_OK,
           "output.colorspace rec2020 with avif at 10 or 12 bits is accepted");
    tap_ok(refused(check_json("{\"output\": {\"colorspace\": \"rec2020\", \"format\": \"avif\"}}", &err), &err,
                   "output.colorspace", "avif with 10 or 12", "got format avif with 8 bits", NULL),
           "output.colorspace rec2020 with 8-bit avif is refused: %s", err.message);
    tap_ok(refused(check_json("{\"output\": {\"colorspace\": \"rec2020\", \"format\": \"jpeg\"}}", &err), &err,
                   "output.colorspace", "output.bit_depth 16", "avif with 10 or 12", "got format jpeg with 8 bits",
                   NULL) &&
               check_json("{\"output\": {\"colorspace\": \"display_p3\", \"format\": \"jpeg\"}}", &err) == HP_OK,
           "output.colorspace rec2020 with jpeg is refused naming png 16 and avif 10/12; display_p3 with jpeg is taken");
    tap_ok(refused(check_json("{\"input\": {\"width\": 10}}", &err), &err, "input.height", "go together", NULL) &&
               check_json("{\"input\": {\"width\": 10, \"height\": 2}}", &err) == HP_OK,
           "input.width and input.height go together");
    tap_ok(refused(check_json("{\"tonemap.lottes\": {\"mid_in\": 1, \"hdr_max\": 1}}", &err), &err,
                   "tonemap.lottes.mid_in", "tonemap.lottes.hdr_max", NULL) &&
               check_json("{\"tonemap.lottes\": {\"mid_in\": 1, \"hdr_max\": 1.5, \"mid_out\": 0.9}}", &err) == HP_OK,
           "tonemap.lottes.mid_in must be below hdr_max");
    /* b < 0: mid_out under (mid_in / hdr_max)^contrast = 0.18 */
    tap_ok(refused(check_json("{\"tonemap.lottes\": {\"mid_in\": 0.18, \"hdr_max\": 1, \"contrast\": 1, "
                              "\"mid_out\": 0.1}}", &err),
                   &err, "tonemap.lottes.mid_out", "pole", NULL),
           "Lottes: a mid_out that makes b negative (a pole) is refused");
    /* c < 0: shoulder 0.01, contrast 2, (0.18/1000)^(2 * 0.99) ~ 4e-8 < 0.267 */
    tap_ok(refused(check_json("{\"tonemap.lottes\": {\"shoulder\": 0.01, \"contrast\": 2, \"hdr_max\": 1000}}", &err),
                   &err, "tonemap.lottes.mid_out", "pole", NULL),
           "Lottes: a mid_out that makes c negative (a pole) is refused");
    tap_ok(refused(check_json("{\"tonemap.uchimura\": {\"linear_start\": 1, \"max_brightness\": 1}}", &err), &err,
                   "tonemap.uchimura.linear_start", "tonemap.uchimura.max_brightness", NULL) &&
               check_json("{\"tonemap.uchimura\": {\"linear_start\": 1, \"max_brightness\": 1.01, "
                          "\"linear_length\": 0.99}}", &err) == HP_OK,
           "tonemap.uchimura.linear_start must be below max_brightness (the shoulder needs room)");
    tap_ok(refused(check_json("{\"tonemap.hable\": {\"toe_numerator\": 0.3, \"toe_denominator\": 0.3}}", &err), &err,
                   "tonemap.hable.toe_numerator", "positive", NULL) &&
               check_json("{\"tonemap.hable\": {\"toe_numerator\": 0, \"toe_denominator\": 0.3}}", &err) == HP_OK,
           "Hable: the curve must be positive at the white point");
    tap_ok(refused(check_json("{\"tonemap\": {\"operator\": \"linear\", \"lottes\": {\"mid_in\": 1, \"hdr_max\": 1}}}",
                              &err),
                   &err, "tonemap.lottes.mid_in", NULL),
           "rules hold whichever operator is chosen");

    hp_params p = defaults();
    p.output.quality = 101;
    tap_ok(refused(hp_params_check(&p, &err), &err, "output.quality", "[0, 100], got 101", NULL),
           "hp_params_check holds a struct filled in C to the table's ranges");
    p = defaults();
    p.tonemap.op = (hp_tone_operator)HP_TONE_OPERATOR_COUNT;
    tap_ok(refused(hp_params_check(&p, &err), &err, "tonemap.operator", "got 12", NULL),
           "hp_params_check refuses an enum value outside the choices");
    p = defaults();
    p.exposure.key_auto = true;
    p.exposure.key = -5; /* not read while "auto" */
    tap_ok(hp_params_check(&p, &err) == HP_OK, "hp_params_check ignores exposure.key's number while it is \"auto\"");
}

/* --- JSON ---------------------------------------------------------------------------------------------- */

static void test_json(void)
{
    hp_err err = {0};
    hp_params nested = defaults(), dotted = defaults(), mixed = defaults(), partial = defaults();
    hp_code a = from_json_text("{\"tonemap\": {\"operator\": \"hable\", \"hable\": {\"white\": 8}}, "
                               "\"output\": {\"quality\": 75}}", &nested, &err);
    hp_code b = from_json_text("{\"tonemap.operator\": \"hable\", \"tonemap.hable.white\": 8, \"output.quality\": 75}",
                               &dotted, &err);
    hp_code c = from_json_text("{\"tonemap\": {\"operator\": \"hable\", \"hable.white\": 8}, \"output.quality\": 75}",
                               &mixed, &err);
    hp_code d = from_json_text("{\"tonemap.hable\": {\"white\": 8}, \"tonemap.operator\": \"hable\", "
                               "\"output\": {\"quality\": 75}}", &partial, &err);
    tap_ok(a == HP_OK && nested.tonemap.op == HP_TONE_HABLE && nested.tonemap.hable_white == 8 &&
               nested.output.quality == 75,
           "nested JSON sets the parameters");
    tap_ok(b == HP_OK && params_equal(&dotted, &nested, NULL), "dotted keys set the same parameters");
    tap_ok(c == HP_OK && d == HP_OK && params_equal(&mixed, &nested, NULL) && params_equal(&partial, &nested, NULL),
           "nested and dotted keys mix at any depth");
    hp_params p = defaults(), untouched = defaults();
    tap_ok(from_json_text("{}", &p, &err) == HP_OK && from_json_text("{\"tonemap\": {}}", &p, &err) == HP_OK &&
               params_equal(&p, &untouched, NULL),
           "an empty object, or an empty stage, sets nothing");
    tap_ok(from_json_text("{\"output\": {\"quality\": 75.0}}", &p, &err) == HP_OK && p.output.quality == 75,
           "an integer parameter takes a JSON number with a zero fraction (75.0)");

    /* Unknown keys. */
    p = defaults();
    tap_ok(refused(from_json_text("{\"tonemap\": {\"white_piont\": 4}}", &p, &err), &err, "tonemap.white_piont",
                   "unknown parameter tonemap.white_piont", "did you mean tonemap.white_point?", NULL),
           "an unknown nested key is named in full, with the near name");
    tap_ok(refused(from_json_text("{\"tonemap.operater\": \"hable\"}", &p, &err), &err, "tonemap.operater",
                   "unknown parameter tonemap.operater", "did you mean tonemap.operator?", NULL),
           "an unknown dotted key is named, with the near name");
    tap_ok(refused(from_json_text("{\"tonemapp\": {\"operator\": \"hable\"}}", &p, &err), &err, "tonemapp.operator",
                   "did you mean tonemap.operator?", NULL),
           "under a misspelt stage the full key of the first value is named");
    tap_ok(refused(from_json_text("{\"operator\": \"hable\"}", &p, &err), &err, "operator",
                   "did you mean tonemap.operator?", NULL),
           "a key without its stage suggests the stage");
    tap_ok(refused(from_json_text("{\"tonemap\": {\"hable\": {\"frobnicate\": 1}}}", &p, &err), &err,
                   "tonemap.hable.frobnicate", "unknown parameter tonemap.hable.frobnicate", NULL) &&
               !strstr(err.message, "did you mean"),
           "no suggestion when nothing is near");
    tap_ok(refused(from_json_text("{\"tonemap\": 5}", &p, &err), &err, "tonemap", "group of parameters",
                   "got a number", NULL) &&
               refused(from_json_text("{\"tonemap.hable\": \"soft\"}", &p, &err), &err, "tonemap.hable",
                       "group of parameters such as tonemap.hable.shoulder_strength", NULL),
           "a group given a value is refused as a group");
    tap_ok(refused(from_json_text("{\"nope\": {}}", &p, &err), &err, "nope", "unknown parameter nope", NULL),
           "an unknown key with an empty object is refused");

    /* Wrong JSON types name the expected type. */
    tap_ok(refused(from_json_text("{\"tonemap\": {\"white_point\": \"4\"}}", &p, &err), &err, "tonemap.white_point",
                   "tonemap.white_point must be a number, got the string \"4\"", NULL),
           "a number given a string");
    tap_ok(refused(from_json_text("{\"output\": {\"dither\": 1}}", &p, &err), &err, "output.dither",
                   "output.dither must be true or false, got 1", NULL),
           "a boolean given a number");
    tap_ok(refused(from_json_text("{\"output\": {\"dither\": \"true\"}}", &p, &err), &err, "output.dither",
                   "must be true or false, got the string \"true\"", NULL),
           "a boolean given a string");
    tap_ok(refused(from_json_text("{\"tonemap\": {\"operator\": 5}}", &p, &err), &err, "tonemap.operator",
                   "must be one of linear", "got 5", NULL),
           "an enum given a number");
    tap_ok(refused(from_json_text("{\"tonemap\": {\"operator\": true}}", &p, &err), &err, "tonemap.operator",
                   "must be one of linear", "got true", NULL),
           "an enum given a boolean");
    tap_ok(refused(from_json_text("{\"output\": {\"quality\": true}}", &p, &err), &err, "output.quality",
                   "must be an integer in [0, 100], got true", NULL),
           "an integer given a boolean");
    tap_ok(refused(from_json_text("{\"output\": {\"quality\": null}}", &p, &err), &err, "output.quality",
                   "must be an integer, got null", NULL),
           "null is refused, not read as the default");
    tap_ok(refused(from_json_text("{\"exposure\": {\"stops\": [1]}}", &p, &err), &err, "exposure.stops",
                   "must be a number, got an array", NULL),
           "a number given an array");
    tap_ok(refused(from_json_text("{\"exposure\": {\"stops\": {\"value\": 1}}}", &p, &err), &err, "exposure.stops",
                   "must be a number, got an object", NULL),
           "a number given an object");
    tap_ok(refused(from_json_text("{\"tonemap\": {\"operator\": \"hable\"}, \"tonemap.operator\": \"agx\"}", &p, &err),
                   &err, "tonemap.operator", "given twice", NULL),
           "one parameter in nested and dotted form is refused as given twice");

    json_t *array = json_array();
    tap_ok(hp_params_from_json(array, &p, &err) == HP_ERR_INVALID_ARGUMENT && err.field[0] == '\0' &&
               strstr(err.message, "must be a JSON object, got an array"),
           "the parameters must be an object (no field named)");
    json_decref(array);

    p = defaults();
    p.output.quality = 33;
    hp_params before = p;
    tap_ok(from_json_text("{\"tonemap\": {\"operator\": \"agx\"}, \"output\": {\"quality\": 300}}", &p, &err) ==
                   HP_ERR_INVALID_ARGUMENT &&
               params_equal(&p, &before, NULL),
           "a refused request leaves the parameters as they were, also those set before the error");
    p = defaults();
    before = p;
    tap_ok(from_json_text("{\"output\": {\"bit_depth\": 16}}", &p, &err) == HP_ERR_INVALID_ARGUMENT &&
               params_equal(&p, &before, NULL),
           "a request refused by a rule leaves the parameters as they were");
}

/* --- Query strings ------------------------------------------------------------------------------------- */

static void test_query(void)
{
    hp_err err = {0};
    hp_params p = defaults();
    tap_ok(hp_params_from_query("tonemap.operator=hable&tonemap.hable.white=8&output.quality=75", &p, &err) == HP_OK &&
               p.tonemap.op == HP_TONE_HABLE && p.tonemap.hable_white == 8 && p.output.quality == 75,
           "query pairs set the parameters");
    hp_params untouched = defaults();
    p = defaults();
    tap_ok(hp_params_from_query(NULL, &p, &err) == HP_OK && hp_params_from_query("", &p, &err) == HP_OK &&
               params_equal(&p, &untouched, NULL),
           "an absent or empty query sets nothing");
    p = defaults();
    tap_ok(hp_params_from_query("tonemap%2Eoperator=%61gx&output%2eformat=pn%67", &p, &err) == HP_OK &&
               p.tonemap.op == HP_TONE_AGX && p.output.format == HP_OUTPUT_PNG,
           "percent-escapes are decoded in keys and values, either case of hex");
    tap_ok(refused(hp_params_from_query("tonemap.operator=hable+", &p, &err), &err, "tonemap.operator",
                   "got \"hable \"", NULL),
           "'+' decodes to a space (so \"hable+\" is not a choice)");
    tap_ok(hp_params_from_query("output.dither=false&output.lossless=true&exposure.stops=-1.5e0", &p, &err) == HP_OK &&
               !p.output.dither && p.output.lossless && p.exposure.stops == -1.5,
           "booleans and numbers are read as JSON writes them");

    const char *bad_escapes[] = {"tonemap.operator=%zz", "tonemap.operator=ab%4", "tonemap.operator=ab%", "a%00=1",
                                 "tonemap.operator=hab%00le"};
    for (size_t i = 0; i < sizeof(bad_escapes) / sizeof(bad_escapes[0]); i++) {
        p = defaults();
        hp_code code = hp_params_from_query(bad_escapes[i], &p, &err);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && strstr(err.message, "percent-escape"), "bad escape refused: %s (%s)",
               bad_escapes[i], err.message);
    }

    tap_ok(refused(hp_params_from_query("tonemap.operator=hable&output.quality=80&tonemap.operator=agx", &p, &err),
                   &err, "tonemap.operator", "tonemap.operator is given twice in the query string", NULL),
           "a key given twice is refused");
    tap_ok(refused(hp_params_from_query("tonemap.operator=hable&tonemap%2Eoperator=hable", &p, &err), &err,
                   "tonemap.operator", "given twice", NULL),
           "a key given twice under two spellings is refused, even with the same value");
    tap_ok(refused(hp_params_from_query("tonemap.operator=", &p, &err), &err, "tonemap.operator",
                   "has an empty value", "one of linear", NULL),
           "an empty value is refused, naming what the parameter takes");
    tap_ok(refused(hp_params_from_query("output.dither", &p, &err), &err, "output.dither", "has no value",
                   "true or false", NULL),
           "a key without '=' is refused");
    tap_ok(hp_params_from_query("output.dither=true&&output.quality=5", &p, &err) == HP_ERR_INVALID_ARGUMENT &&
               strstr(err.message, "empty parameter"),
           "an empty pair between '&'s is refused");
    tap_ok(hp_params_from_query("output.dither=true&", &p, &err) == HP_ERR_INVALID_ARGUMENT &&
               hp_params_from_query("&output.dither=true", &p, &err) == HP_ERR_INVALID_ARGUMENT &&
               strstr(err.message, "empty parameter"),
           "a '&' at either end is refused");
    tap_ok(hp_params_from_query("=5", &p, &err) == HP_ERR_INVALID_ARGUMENT && strstr(err.message, "has no name"),
           "a pair without a name is refused");
    tap_ok(refused(hp_params_from_query("tonemap.white_piont=4", &p, &err), &err, "tonemap.white_piont",
                   "unknown parameter tonemap.white_piont", "did you mean tonemap.white_point?", NULL),
           "an unknown query key is named, with the near name");
    tap_ok(refused(hp_params_from_query("tonemap=hable", &p, &err), &err, "tonemap", "group of parameters", NULL),
           "a group name as a query key is refused");

    struct {
        const char *query, *field, *needle;
    } bad_values[] = {
        {"tonemap.white_point=0x10", "tonemap.white_point", "got \"0x10\""},
        {"tonemap.white_point=nan", "tonemap.white_point", "got \"nan\""},
        {"tonemap.white_point=inf", "tonemap.white_point", "got \"inf\""},
        {"tonemap.white_point=1e999", "tonemap.white_point", "got infinity"},
        {"tonemap.white_point=%2B1", "tonemap.white_point", "got \"+1\""},
        {"tonemap.white_point=%201", "tonemap.white_point", "got \" 1\""},
        {"tonemap.white_point=1x", "tonemap.white_point", "got \"1x\""},
        {"output.quality=101", "output.quality", "an integer in [0, 100], got 101"},
        {"output.quality=9.5", "output.quality", "got 9.5"},
        {"output.dither=yes", "output.dither", "true or false, got \"yes\""},
        {"output.bit_depth=16", "output.bit_depth", "png"},
        {"output.bit_depth=12", "output.bit_depth", "needs output.format avif"},
        {"output.chroma=422", "output.chroma", "one of auto, 420, 444, got \"422\""},
        {"output.format=jpg", "output.format", "one of webp, png, jpeg, avif, got \"jpg\""},
    };
    for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
        p = defaults();
        tap_ok(refused(hp_params_from_query(bad_values[i].query, &p, &err), &err, bad_values[i].field,
                       bad_values[i].needle, NULL),
               "query %s refused (%s)", bad_values[i].query, bad_values[i].needle);
    }
    p = defaults();
    tap_ok(hp_params_from_query("tonemap.white_point=1e9", &p, &err) == HP_OK && p.tonemap.white_point == 1e9,
           "an exponent is a number (1e9)");

    p = defaults();
    p.output.quality = 33;
    hp_params before = p;
    tap_ok(hp_params_from_query("tonemap.operator=agx&output.quality=300", &p, &err) == HP_ERR_INVALID_ARGUMENT &&
               params_equal(&p, &before, NULL),
           "a refused query leaves the parameters as they were");
}

/* --- JSON out ----------------------------------------------------------------------------------------- */

static size_t count_leaves(const json_t *obj)
{
    size_t n = 0;
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) n += json_is_object(value) ? count_leaves(value) : 1;
    return n;
}

/* The ways the OpenEXR names can all move off "" and stay valid together: a layer, or three channels (not
 * both), and none with raw samples (the rules). */
typedef enum sample_names {
    NAMES_NONE,     /* raw samples: input.width and height move, the names stay "" */
    NAMES_CHANNELS, /* a file with named channels, alpha and depth */
    NAMES_LAYER,    /* a file with a layer, alpha and depth */
} sample_names;

/* The ACES test config (tests/data/ocio/aces_builtin), loaded once by main; NULL when it would not load. */
static hp_ocio_config *g_aces;

/* The OCIO sample's names, all the ACES config's: a display, one of its views, a look, a colour space. */
#define SAMPLE_DISPLAY "sRGB - Display"
#define SAMPLE_VIEW "Raw"
#define SAMPLE_LOOKS "ACES 1.3 Reference Gamut Compression"
#define SAMPLE_INPUT "ACEScg"

/* The parameters an OCIO view takes the place of: a request with ocio.* leaves them at their defaults. */
static bool replaced_by_view(const char *name)
{
    return strcmp(name, "tonemap.operator") == 0 || strcmp(name, "gamma.mode") == 0 ||
           strcmp(name, "gamma.radius") == 0 || strcmp(name, "output.colorspace") == 0;
}

/* Every parameter moved off its default to another valid value, but for the names that this sample's
 * kind of input cannot take (sample_names). ocio: the OCIO sample (the ACES config registered by the caller):
 * ocio.* and input.colorspace take the config's names and the parameters the view replaces stay; else
 * ocio.* stay "" (without a config they are refused). */
static hp_params everything_changed(sample_names names, bool ocio)
{
    hp_params p = defaults();
    hp_err err = {0};
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        if (names != NAMES_NONE && (def->offset == offsetof(hp_params, input.width) ||
                                    def->offset == offsetof(hp_params, input.height)))
            continue; /* a file, not raw samples */
        bool is_ocio = strncmp(def->name, "ocio.", 5) == 0;
        if ((ocio && replaced_by_view(def->name)) || (!ocio && is_ocio))
            continue;
        if (ocio && (is_ocio || def->open_offset)) {
            const char *name = def->offset == offsetof(hp_params, ocio.display) ? SAMPLE_DISPLAY
                               : def->offset == offsetof(hp_params, ocio.view)  ? SAMPLE_VIEW
                               : def->offset == offsetof(hp_params, ocio.looks) ? SAMPLE_LOOKS
                                                                                : SAMPLE_INPUT;
            if (hp_param_set_string(&p, def, name, &err) != HP_OK)
                tap_diag("OCIO sample: %s", err.message);
            continue;
        }
        switch (def->type) {
        case HP_PARAM_STRING: {
            bool is_layer = def->offset == offsetof(hp_params, input.layer);
            bool is_rgb = def->offset == offsetof(hp_params, input.channel_r) ||
                          def->offset == offsetof(hp_params, input.channel_g) ||
                          def->offset == offsetof(hp_params, input.channel_b);
            if (names == NAMES_NONE || (names == NAMES_CHANNELS && is_layer) || (names == NAMES_LAYER && is_rgb))
                break;
            /* UTF-8 and a space, as Blender writes "Render Layer"; the name itself for uniqueness. */
            char text[HP_PARAM_STRING_MAX + 1];
            snprintf(text, sizeof(text), "Render Layer \xC3\xA9.%s", def->name);
            hp_param_set_string(&p, def, text, &err);
            break;
        }
        case HP_PARAM_ENUM: hp_param_set_string(&p, def, def->choices[def->def == 0 ? 1 : 0], &err); break;
        case HP_PARAM_BOOL: hp_param_set_bool(&p, def, def->def == 0, &err); break;
        case HP_PARAM_INTEGER: hp_param_set_number(&p, def, def->def == def->max ? def->min : def->max, &err); break;
        default: /* half way to the top of the range: the rules still hold (checked below) */
            hp_param_set_number(&p, def, def->def < def->max ? (def->def + def->max) / 2 : (def->def + def->min) / 2,
                                &err);
            break;
        }
    }
    return p;
}

/* The looks (pipeline/looks.c): the schema's choices are the table's names in its order, and every look
 * applies through the query parser to exactly the values its row names (each one differing from the default,
 * or the row would say nothing). */
static void test_looks(void)
{
    bool names = true;
    for (size_t i = 0; i < hp_look_count; i++)
        names = names && hp_look_names[i] && strcmp(hp_look_names[i], hp_looks[i].name) == 0;
    tap_ok(names && hp_look_names[hp_look_count] == NULL && strcmp(hp_looks[0].settings, "") == 0,
           "the look parameter's choices are the %zu looks' names, in order, default first", hp_look_count);
    for (size_t i = 0; i < hp_look_count; i++) {
        hp_params p = defaults(), d = defaults();
        hp_err err = {0};
        hp_code code = hp_params_apply_look(&p, (uint32_t)i, &err);
        size_t differ = 0, rows = hp_looks[i].settings[0] ? 1 : 0;
        for (const char *s = hp_looks[i].settings; *s; s++)
            rows += *s == '&';
        for (size_t k = 0; k < hp_param_schema_count; k++) {
            const hp_param_def *def = &hp_param_schema[k];
            if (def->type == HP_PARAM_STRING)
                continue;
            size_t size = def->type == HP_PARAM_NUMBER || def->type == HP_PARAM_NUMBER_OR_AUTO ? sizeof(double)
                          : def->type == HP_PARAM_BOOL                                          ? sizeof(bool)
                                                                                                : sizeof(uint32_t);
            differ += memcmp((char *)&p + def->offset, (char *)&d + def->offset, size) != 0;
        }
        /* look itself differs too (but for default); exposure.stops=0 is its default, made explicit. */
        size_t stops_default = strstr(hp_looks[i].settings, "exposure.stops=0") ? 1 : 0;
        tap_ok(code == HP_OK && p.look == i && differ == rows - stops_default + (i ? 1 : 0),
               "look %s applies: %zu values differ from the defaults for %zu settings%s%s", hp_looks[i].name, differ,
               rows, code ? ": " : "", code ? err.message : "");
    }
    hp_params p = defaults();
    hp_err err = {0};
    tap_ok(hp_params_apply_look(&p, (uint32_t)hp_look_count, &err) != HP_OK && strcmp(err.field, "look") == 0,
           "a look past the table is refused naming look: %s", err.message);
}

/* The daemon's own looks (hp_looks_add, from studio_looks): after the built-in ones, named by the look parameter,
 * applied as the built-in ones are, echoed by name; a taken name refused; hdrpost (open names, no config) keeps a
 * look it does not know for the daemon, and the daemon refuses one it does not have. */
static void test_studio_looks(void)
{
    hp_err err = {0};
    tap_ok(hp_looks_add("review", "exposure.mode=fixed&exposure.stops=1.5&tonemap.operator=hable", "test", &err) ==
                   HP_OK && hp_look_total() == hp_look_count + 1 && !strcmp(hp_look_names[hp_look_count], "review") &&
               hp_look_names[hp_look_count + 1] == NULL,
           "a studio look is added after the built-in ones, its name among the look parameter's choices: %s",
           err.message);
    hp_params p = defaults();
    hp_code code = hp_params_from_query_with_look("look=review&tonemap.operator=agx", &p, &err);
    tap_ok(code == HP_OK && p.look == hp_look_count && p.exposure.mode == HP_EXPOSURE_FIXED &&
               p.exposure.stops == 1.5 && p.tonemap.op == HP_TONE_AGX,
           "look=review applies its settings, and the request's own tonemap.operator overrides its hable: %s",
           code ? err.message : "");
    json_t *echo = hp_params_to_json(&p);
    tap_ok(echo && !strcmp(json_string_value(json_object_get(echo, "look")) ?: "", "review"),
           "a studio look is echoed by its name");
    json_decref(echo);
    hp_err e2 = {0};
    tap_ok(hp_looks_add("review", "exposure.stops=2", "test", &e2) != HP_OK && strstr(e2.message, "already"),
           "a name taken by a studio look is refused: %s", e2.message);
    hp_err e3 = {0};
    tap_ok(hp_looks_add("blender", "exposure.stops=2", "test", &e3) != HP_OK && strstr(e3.message, "built-in"),
           "a built-in look's name is refused: %s", e3.message);
    hp_looks_reset();
    p = defaults();
    hp_err e4 = {0};
    tap_ok(hp_look_total() == hp_look_count && hp_look_names[hp_look_count] == NULL &&
               hp_params_from_query_with_look("look=review", &p, &e4) != HP_OK && !strcmp(e4.field, "look"),
           "after hp_looks_reset the studio look is gone, and look=review is refused naming look: %s", e4.message);
    const hp_ocio_config *was = hp_params_ocio_config();
    hp_params_use_ocio(NULL);
    hp_params_accept_open_names(true);
    p = defaults();
    hp_err e5 = {0};
    code = hp_params_from_query_with_look("look=dailies&exposure.stops=1", &p, &e5);
    tap_ok(code == HP_OK && p.look == 0 && !strcmp(p.look_name, "dailies") && p.exposure.stops == 1,
           "hdrpost (open names, no config) keeps a look it does not know as text for the daemon: %s",
           code ? e5.message : "");
    echo = hp_params_to_json(&p);
    tap_ok(echo && !strcmp(json_string_value(json_object_get(echo, "look")) ?: "", "dailies"),
           "and writes it back by that name");
    json_decref(echo);
    hp_params_accept_open_names(false);
    p = defaults();
    hp_err e6 = {0};
    tap_ok(hp_params_from_query_with_look("look=dailies", &p, &e6) != HP_OK,
           "the daemon (no open names) refuses a look it does not have: %s", e6.message);
    hp_params_use_ocio(was);
}

static void test_to_json(void)
{
    hp_params p = defaults();
    json_t *j = hp_params_to_json(&p);
    json_t *hable = json_object_get(json_object_get(j, "tonemap"), "hable");
    json_t *layer = json_object_get(json_object_get(j, "input"), "layer");
    tap_ok(j && count_leaves(j) == hp_param_schema_count && json_object_size(j) == 10 /* 9 stages and look */ &&
               json_is_string(json_object_get(j, "look")) &&
               json_is_string(layer) && strcmp(json_string_value(layer), "") == 0 &&
               json_real_value(json_object_get(hable, "white")) == 11.2 &&
               json_integer_value(json_object_get(json_object_get(j, "output"), "quality")) == 75 &&
               json_is_true(json_object_get(json_object_get(j, "output"), "dither")),
           "to_json writes every parameter, nested by stage, with JSON types (%zu values)",
           j ? count_leaves(j) : 0);
    json_decref(j);

    /* Four samples, because the rules let no request set every name at once (a layer or channels, and
     * neither with raw samples; ocio.* only with a config, and then not the operator, gamma or output space);
     * together they move every parameter. The fourth has the ACES config registered, the others none. */
    static const char *const sample_names_text[] = {"raw samples", "named channels", "a layer",
                                                    "an OCIO view, the ACES config loaded"};
    bool moved_any[256] = {false};
    for (int kind = NAMES_NONE; kind <= NAMES_LAYER + 1; kind++) {
        hp_err err = {0};
        bool ocio = kind > NAMES_LAYER;
        hp_params_use_ocio(ocio ? g_aces : NULL);
        hp_params changed = everything_changed(ocio ? NAMES_CHANNELS : (sample_names)kind, ocio);
        if (ocio)
            tap_ok(g_aces && strcmp(changed.ocio.input, SAMPLE_INPUT) == 0 && changed.input.colorspace == 0 &&
                       strcmp(changed.ocio.view, SAMPLE_VIEW) == 0,
                   "the OCIO sample keeps input.colorspace %s as the config's (ocio.input) and sets ocio.*",
                   SAMPLE_INPUT);
        else
            tap_ok(!hp_params_ocio_on(&changed), "the sample with %s sets no ocio.* (no config registered)",
                   sample_names_text[kind]);
        const char *differs = "";
        if (hp_params_check(&changed, &err) != HP_OK)
            tap_diag("%s", err.message);
        tap_ok(err.message[0] == '\0',
               "the round-trip sample with %s (every other parameter half way to its maximum) is valid",
               sample_names_text[kind]);
        for (size_t i = 0; i < hp_param_schema_count && i < 256; i++)
            moved_any[i] = moved_any[i] || !same_value(&hp_param_schema[i], &changed, &p);

        j = hp_params_to_json(&changed);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_t *again = text ? json_loads(text, JSON_REJECT_DUPLICATES, NULL) : NULL;
        hp_params back = defaults();
        hp_code code = again ? hp_params_from_json(again, &back, &err) : HP_ERR_INTERNAL;
        differs = "";
        if (code != HP_OK || !params_equal(&back, &changed, &differs))
            tap_diag("%s %s", err.message, differs);
        tap_ok(code == HP_OK && params_equal(&back, &changed, NULL),
               "to_json -> text -> from_json restores every parameter exactly (sample with %s)",
               sample_names_text[kind]);
        free(text);
        json_decref(again);
        json_decref(j);
        hp_params_use_ocio(NULL);
    }
    size_t moved = 0;
    for (size_t i = 0; i < hp_param_schema_count && i < 256; i++)
        moved += moved_any[i];
    tap_ok(moved == hp_param_schema_count, "the samples move all %zu parameters off their defaults (%zu moved)",
           hp_param_schema_count, moved);

    hp_err err = {0};
    hp_params start = everything_changed(NAMES_LAYER, false);
    j = hp_params_to_json(&p);
    hp_code code = hp_params_from_json(j, &start, &err);
    tap_ok(code == HP_OK && params_equal(&start, &p, NULL), "echoed defaults read back as the defaults");
    json_decref(j);
}

/* --- OCIO (issue 34): the open enum, ocio.* and their rules --------------------------------------------- */

/* A refusal by the OCIO rule: the field, the answer's word, and each needle in the message. */
static bool refused_word(hp_code code, const hp_err *err, const char *field, const char *word, const char *needle)
{
    bool ok = refused(code, err, field, needle, NULL) && err->word && strcmp(err->word, word) == 0;
    if (!ok)
        tap_diag("word %s, wanted %s", err->word ? err->word : "NULL", word);
    return ok;
}

static void test_ocio_params(void)
{
    const hp_param_def *cs = hp_param_find("input.colorspace");
    const hp_param_def *view = hp_param_find("ocio.view");
    hp_err err = {0};

    bool stated = true;
    static const char *const ocio_names[] = {"ocio.display", "ocio.view", "ocio.looks"};
    for (size_t i = 0; i < 3; i++) {
        const hp_param_def *def = hp_param_find(ocio_names[i]);
        stated = stated && def && def->type == HP_PARAM_STRING && def->min == 0 && def->max == SPEC_STRING_MAX;
    }
    tap_ok(stated && sizeof(((hp_params *)0)->ocio.input) == SPEC_STRING_MAX + 1,
           "ocio.display, ocio.view and ocio.looks are strings of 0 to %d bytes, ocio.input holds as much",
           SPEC_STRING_MAX);

    /* No config: the open enum is a closed one, and ocio.* are refused with the word no_ocio_config. */
    hp_params_use_ocio(NULL);
    hp_params p = defaults(), before = defaults();
    tap_ok(!hp_params_ocio_config() && !hp_params_open_names() &&
               refused(hp_param_set_string(&p, cs, "ACEScg", &err), &err, "input.colorspace",
                       "input.colorspace must be one of auto, rec709, rec2020, acescg, aces2065, p3d65, got "
                       "\"ACEScg\"", NULL) &&
               !err.word && params_equal(&p, &before, NULL) && p.ocio.input[0] == '\0',
           "without a config, input.colorspace refuses ACEScg, listing its choices");
    tap_ok(refused(from_json_text("{\"input\": {\"colorspace\": \"ACEScg\"}}", &p, &err), &err, "input.colorspace",
                   "must be one of auto", NULL) &&
               refused(hp_params_from_query("input.colorspace=scene_linear", &p, &err), &err, "input.colorspace",
                       "got \"scene_linear\"", NULL) &&
               params_equal(&p, &before, NULL),
           "without a config, JSON and query refuse a config's colour space or role the same way");
    static const char *const no_config[][2] = {
        {"{\"ocio\": {\"view\": \"Raw\"}}", "ocio.view"},
        {"{\"ocio.display\": \"sRGB - Display\", \"ocio.view\": \"Raw\"}", "ocio.display"},
        {"{\"ocio\": {\"looks\": \"+grade\"}}", "ocio.looks"},
    };
    for (size_t i = 0; i < sizeof(no_config) / sizeof(no_config[0]); i++) {
        p = defaults();
        tap_ok(refused_word(from_json_text(no_config[i][0], &p, &err), &err, no_config[i][1], "no_ocio_config",
                            "but the daemon has no OCIO config") &&
                   params_equal(&p, &before, NULL),
               "without a config, %s is refused naming %s with the word no_ocio_config", no_config[i][0],
               no_config[i][1]);
    }
    p = defaults();
    tap_ok(hp_param_set_string(&p, view, "Raw", &err) == HP_OK && strcmp(p.ocio.view, "Raw") == 0 &&
               refused_word(hp_params_check(&p, &err), &err, "ocio.view", "no_ocio_config", "no OCIO config"),
           "ocio.view is a string its setter takes; hp_params_check's rule refuses it without a config");
    p = defaults();
    snprintf(p.ocio.input, sizeof(p.ocio.input), "ACEScg");
    tap_ok(refused_word(hp_params_check(&p, &err), &err, "input.colorspace", "no_ocio_config",
                        "input.colorspace names an OpenColorIO"),
           "a config's colour space put in ocio.input from C is refused without a config, naming input.colorspace");
    tap_ok(refused(hp_params_from_query("output.quality=300", &p, &err), &err, "output.quality", "got 300", NULL) &&
               err.word == NULL,
           "a later refusal of another kind carries no word (no_ocio_config is not left over)");

    /* hdrpost (client/) checks requests without a config and leaves the names to the daemon. */
    hp_params_accept_open_names(true);
    p = defaults();
    hp_code kept = from_json_text("{\"input.colorspace\": \"Any Space\", \"ocio.view\": \"Any View\"}", &p, &err);
    hp_params q = defaults();
    tap_ok(kept == HP_OK && strcmp(p.ocio.input, "Any Space") == 0 && strcmp(p.ocio.view, "Any View") == 0 &&
               refused_word(from_json_text("{\"ocio.view\": \"Any View\", \"gamma.mode\": \"srgb\"}", &q, &err),
                            &err, "gamma.mode", "ocio_conflict", "gamma.mode does not apply with an OCIO view"),
           "with open names accepted (hdrpost) any name is kept without a config; conflicts are still refused");
    hp_params_accept_open_names(false);
    p = defaults();
    tap_ok(refused(hp_param_set_string(&p, cs, "Any Space", &err), &err, "input.colorspace", "must be one of", NULL),
           "open names turned off again: refused as before");

    if (!g_aces) {
        tap_ok(false, "the ACES test config is loaded (the rest of the OCIO points need it)");
        return;
    }
    hp_params_use_ocio(g_aces);
    tap_ok(hp_params_ocio_config() == g_aces && hp_params_open_names(), "the ACES config is registered");

    /* The open enum with a config: a name outside the choices is kept as text, the enum at auto. */
    p = defaults();
    hp_code code = hp_param_set_string(&p, cs, "ACEScg", &err);
    tap_ok(code == HP_OK && p.input.colorspace == HP_INPUT_COLORSPACE_AUTO && strcmp(p.ocio.input, "ACEScg") == 0 &&
               hp_params_ocio_on(&p) && hp_params_check(&p, &err) == HP_OK,
           "with a config, input.colorspace ACEScg is kept in ocio.input (the enum at auto) and passes the check");
    json_t *j = hp_params_to_json(&p);
    json_t *echoed = json_object_get(json_object_get(j, "input"), "colorspace");
    tap_ok(json_is_string(echoed) && strcmp(json_string_value(echoed), "ACEScg") == 0,
           "the echo (to_json) gives input.colorspace as the config's name (got %s)",
           json_is_string(echoed) ? json_string_value(echoed) : "no string");
    json_decref(j);
    code = hp_param_set_string(&p, cs, "rec2020", &err);
    tap_ok(code == HP_OK && p.input.colorspace == HP_COLORSPACE_REC2020 + 1 && p.ocio.input[0] == '\0' &&
               !hp_params_ocio_on(&p),
           "a later choice (rec2020) clears the kept name");
    p = defaults();
    tap_ok(hp_param_set_string(&p, cs, "acescg", &err) == HP_OK && p.input.colorspace == HP_COLORSPACE_ACESCG + 1 &&
               p.ocio.input[0] == '\0',
           "hdrpostd's own choice (acescg) is the enum, not the config's ACEScg");
    p = defaults();
    tap_ok(hp_params_from_query("input.colorspace=scene_linear", &p, &err) == HP_OK &&
               strcmp(p.ocio.input, "scene_linear") == 0 &&
               from_json_text("{\"input\": {\"colorspace\": \"Linear Rec.709 (sRGB)\"}}", &q, &err) == HP_OK &&
               strcmp(q.ocio.input, "Linear Rec.709 (sRGB)") == 0,
           "a role (scene_linear) from a query and a colour space from JSON are kept");

    p = defaults();
    tap_ok(hp_param_set_string(&p, cs, "NoSuchSpace", &err) == HP_OK &&
               refused(hp_params_check(&p, &err), &err, "input.colorspace", "input.colorspace \"NoSuchSpace\"",
                       "ACEScg", NULL),
           "an unknown name is kept by the setter and refused by hp_params_check naming input.colorspace, "
           "listing the config's spaces");
    p = defaults();
    tap_ok(refused(from_json_text("{\"input.colorspace\": \"NoSuchSpace\"}", &p, &err), &err, "input.colorspace",
                   "neither one of hdrpostd's spaces nor a colour space", NULL) &&
               params_equal(&p, &before, NULL),
           "a request with an unknown colour space is refused and leaves the parameters as they were");
    char longest[SPEC_STRING_MAX + 2];
    memset(longest, 'S', SPEC_STRING_MAX + 1);
    longest[SPEC_STRING_MAX + 1] = '\0';
    p = defaults();
    tap_ok(refused(from_json_text("{\"input.colorspace\": \"\"}", &p, &err), &err, "input.colorspace",
                   "got an empty string", NULL) &&
               refused(hp_params_from_query("input.colorspace=AC%0AEScg", &p, &err), &err, "input.colorspace",
                       "control character U+000A", NULL) &&
               refused(hp_param_set_string(&p, cs, longest, &err), &err, "input.colorspace", "got 256 bytes", NULL) &&
               params_equal(&p, &before, NULL),
           "the kept name is held to a string's limits: not empty, no control characters, 255 bytes");
    p = defaults();
    memset(p.ocio.input, 'a', sizeof(p.ocio.input));
    tap_ok(refused(hp_params_check(&p, &err), &err, "input.colorspace", "no NUL", NULL),
           "hp_params_check refuses a kept name with no NUL in its array (put there in C)");

    /* ocio.* against the config. */
    p = defaults();
    tap_ok(from_json_text("{\"ocio\": {\"display\": \"sRGB - Display\", \"view\": \"Raw\"}}", &p, &err) == HP_OK &&
               strcmp(p.ocio.display, "sRGB - Display") == 0 && strcmp(p.ocio.view, "Raw") == 0 &&
               hp_params_ocio_on(&p),
           "ocio.display sRGB - Display with view Raw is taken");
    static const char *const taken[] = {"{\"ocio.view\": \"ACES 1.0 - SDR Video\"}",
                                        "{\"ocio.looks\": \"+ACES 1.3 Reference Gamut Compression\"}",
                                        "?ocio.display=Rec.2100-PQ+-+Display&input.colorspace=ACEScct"};
    bool all_taken = true;
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
        p = defaults();
        code = taken[i][0] == '?' ? hp_params_from_query(taken[i] + 1, &p, &err) : from_json_text(taken[i], &p, &err);
        if (code != HP_OK)
            tap_diag("%s: %s", taken[i], err.message);
        all_taken = all_taken && code == HP_OK;
    }
    tap_ok(all_taken, "a view of the default display, a look alone, a display and a colour space from a query are taken");
    struct {
        const char *json, *field, *needle;
    } unknown[] = {
        {"{\"ocio\": {\"display\": \"sRGB\"}}", "ocio.display", "sRGB - Display"},
        {"{\"ocio\": {\"display\": \"sRGB - Display\", \"view\": \"Film\"}}", "ocio.view", "Raw"},
        {"{\"ocio\": {\"display\": \"sRGB - Display\", \"view\": \"ACES 1.1 - HDR Video (1000 nits & P3 lim)\"}}",
         "ocio.view", "not a view of the display"},
        {"{\"ocio\": {\"looks\": \"+grade\"}}", "ocio.looks", "Blue Light Artifact Fix"},
    };
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        p = defaults();
        tap_ok(refused(from_json_text(unknown[i].json, &p, &err), &err, unknown[i].field, unknown[i].needle, NULL) &&
                   params_equal(&p, &before, NULL),
               "%s is refused naming %s, listing the config's names", unknown[i].json, unknown[i].field);
    }

    /* What the view replaces stays at its default: word ocio_conflict. */
    static const char *const conflicts[][2] = {
        {"\"tonemap.operator\": \"hable\"", "tonemap.operator"},
        {"\"gamma.mode\": \"srgb\"", "gamma.mode"},
        {"\"gamma.radius\": 4", "gamma.radius"},
        {"\"output.colorspace\": \"display_p3\"", "output.colorspace"},
    };
    for (size_t i = 0; i < sizeof(conflicts) / sizeof(conflicts[0]); i++) {
        char json[160];
        snprintf(json, sizeof(json), "{\"ocio.view\": \"Raw\", %s}", conflicts[i][0]);
        p = defaults();
        tap_ok(refused_word(from_json_text(json, &p, &err), &err, conflicts[i][1], "ocio_conflict",
                            "does not apply with an OCIO view"),
               "%s with an OCIO view is refused naming it (word ocio_conflict)", conflicts[i][1]);
    }
    p = defaults();
    tap_ok(from_json_text("{\"ocio.view\": \"Raw\", \"tonemap.operator\": \"reinhard_extended\", \"gamma\": "
                          "{\"mode\": \"local\", \"radius\": 0}, \"output.colorspace\": \"srgb\"}", &p, &err) == HP_OK,
           "those parameters given at their defaults pass (they ask for nothing)");
    p = defaults();
    tap_ok(refused_word(from_json_text("{\"input.colorspace\": \"ACEScg\", \"tonemap.operator\": \"agx\"}", &p, &err),
                        &err, "tonemap.operator", "ocio_conflict", "tonemap.operator does not apply") &&
               from_json_text("{\"input.colorspace\": \"rec2020\", \"tonemap.operator\": \"agx\"}", &p, &err) == HP_OK,
           "a config's colour space alone asks for the view too (agx refused); hdrpostd's rec2020 with agx is taken");
    hp_params_use_ocio(NULL);
}

/* --- docs/PARAMETERS.md --------------------------------------------------------------------------------- */

static void test_docs(const char *path)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) {
        tap_ok(false, "docs/PARAMETERS.md can be read (%s)", path ? path : "no path given");
        return;
    }
    static char doc[1 << 17];
    size_t len = fread(doc, 1, sizeof(doc) - 1, f);
    fclose(f);
    doc[len] = '\0';

    size_t json_blocks = 0, query_blocks = 0, json_ok = 0, query_ok = 0;
    hp_params first[3];
    size_t firsts = 0;
    for (char *at = doc; (at = strstr(at, "```")); ) {
        bool is_json = strncmp(at, "```json\n", 8) == 0, is_text = strncmp(at, "```text\n", 8) == 0;
        char *body = strchr(at, '\n');
        char *end = body ? strstr(body, "\n```") : NULL;
        if (!end)
            break;
        char saved = end[1];
        end[1] = '\0';
        hp_params p = defaults();
        hp_err err = {0};
        if (is_json) {
            json_blocks++;
            json_ok += from_json_text(body + 1, &p, &err) == HP_OK;
        } else if (is_text && body[1] == '?') {
            query_blocks++;
            end[0] = '\0';
            query_ok += hp_params_from_query(body + 2, &p, &err) == HP_OK;
            end[0] = '\n';
        } else {
            end[1] = saved;
            at = end + 4;
            continue;
        }
        if (err.message[0])
            tap_diag("example refused: %s", err.message);
        if (firsts < 3)
            first[firsts++] = p;
        end[1] = saved;
        at = end + 4;
    }
    tap_ok(json_blocks >= 4 && json_ok == json_blocks, "every JSON example in docs/PARAMETERS.md is accepted (%zu/%zu)",
           json_ok, json_blocks);
    tap_ok(query_blocks >= 2 && query_ok == query_blocks,
           "every query example in docs/PARAMETERS.md is accepted (%zu/%zu)", query_ok, query_blocks);
    tap_ok(firsts == 3 && params_equal(&first[0], &first[1], NULL) && params_equal(&first[0], &first[2], NULL),
           "the docs' nested, dotted and query spellings of one request are the same request");
}

/* --- hp_err's field ----------------------------------------------------------------------------------- */

static void test_err_field(void)
{
    hp_err err = {0};
    hp_fail_field(&err, HP_ERR_INVALID_ARGUMENT, "tonemap.operator", "x");
    hp_fail(&err, HP_ERR_IO, "cannot read");
    tap_ok(err.code == HP_ERR_IO && err.field[0] == '\0', "hp_fail clears a field left by an earlier failure");
    char long_name[300];
    memset(long_name, 'k', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    hp_params p = defaults();
    hp_code code = hp_params_from_query(strcat(strcpy((char[320]){0}, long_name), "=1"), &p, &err);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && strlen(err.field) == sizeof(err.field) - 1 &&
               strncmp(err.field, long_name, sizeof(err.field) - 1) == 0,
           "a long unknown key is cut to the field's %zu bytes", sizeof(err.field));
}

/* --- The params part's parse and the memory budget (api/frames/form.h) -------------------------------------------- */

/* jansson's allocations while it parses, through json_set_alloc_funcs: the bytes held at once, as the
 * allocator sizes them (malloc_usable_size) plus 16 bytes of its own per block. */
static size_t g_json_now, g_json_peak;
static void *counting_malloc(size_t n)
{
    void *p = malloc(n);
    if (p && (g_json_now += malloc_usable_size(p) + 16) > g_json_peak)
        g_json_peak = g_json_now;
    return p;
}
static void counting_free(void *p)
{
    if (p)
        g_json_now -= malloc_usable_size(p) + 16;
    free(p);
}

/* A text of `unit` repeated to HP_PARAMS_PART_MAX bytes between open and close. */
static size_t fill_part(char *buf, const char *open, const char *unit, const char *close, bool numbered)
{
    size_t n = (size_t)sprintf(buf, "%s", open);
    for (int k = 0; n + 32 < (size_t)HP_PARAMS_PART_MAX; k++)
        n += numbered ? (size_t)sprintf(buf + n, unit, k) : (size_t)sprintf(buf + n, "%s", unit);
    if (buf[n - 1] == ',')
        n--;
    return n + (size_t)sprintf(buf + n, "%s", close);
}

/* HP_PARAMS_PARSE_FACTOR is what the budget takes for a params part's parse: jansson must stay under it for
 * the texts that cost it most per byte, at the largest part the form reader keeps. */
static void test_parse_memory(void)
{
    static const struct {
        const char *what, *open, *unit, *close;
        bool numbered;
    } texts[] = {
        {"empty objects", "[", "{},", "]", false},  {"empty arrays", "[", "[],", "]", false},
        {"empty strings", "[", "\"\",", "]", false}, {"small integers", "[", "1,", "]", false},
        {"keys to objects", "{", "\"%d\":{},", "}", true}, {"keys to integers", "{", "\"%d\":0,", "}", true},
    };
    char *buf = malloc(HP_PARAMS_PART_MAX + 64);
    json_set_alloc_funcs(counting_malloc, counting_free);
    double worst = 0;
    for (size_t i = 0; buf && i < sizeof(texts) / sizeof(texts[0]); i++) {
        size_t n = fill_part(buf, texts[i].open, texts[i].unit, texts[i].close, texts[i].numbered);
        g_json_now = g_json_peak = 0;
        json_error_t jerr;
        json_t *j = json_loadb(buf, n, 0, &jerr);
        json_decref(j);
        double ratio = (double)g_json_peak / (double)n;
        worst = ratio > worst ? ratio : worst;
        tap_ok(n <= HP_PARAMS_PART_MAX && ratio <= HP_PARAMS_PARSE_FACTOR,
               "parsing %zu bytes of %s took %zu bytes at most (%.1f per byte; the budget takes %d)", n,
               texts[i].what, g_json_peak, ratio, HP_PARAMS_PARSE_FACTOR);
    }
    json_set_alloc_funcs(malloc, free);
    tap_ok(worst > HP_PARAMS_PARSE_FACTOR / 4.0, "the factor is not far above jansson's worst (%.1f of %d)", worst,
           HP_PARAMS_PARSE_FACTOR);
    free(buf);
}

int main(int argc, char **argv)
{
    hp_err err = {0};
    if (hp_ocio_config_load(HP_TEST_DATA_DIR "/ocio/aces_builtin/config.ocio", &g_aces, &err) != HP_OK) {
        tap_diag("%s", err.message);
        g_aces = NULL;
    }
    test_schema();
    test_help_stands_alone();
    test_defaults();
    test_enums();
    test_bounds();
    test_key_auto();
    test_strings();
    test_rules();
    test_json();
    test_query();
    test_to_json();
    test_looks();
    test_studio_looks();
    test_ocio_params();
    test_docs(argc > 1 ? argv[1] : NULL);
    test_err_field();
    test_parse_memory();
    hp_ocio_config_free(g_aces);
    return tap_done();
}

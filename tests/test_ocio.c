/* The OCIO stage (issue 34; docs/COLOR.md) against OpenColorIO's own CPU processor, on real frames:
 *   - every display and view of two configs: the ACES config of OCIO 2.1's built-in transforms in tests/data/ocio
 *     (SDR and HDR displays, no LUT files) and Blender's from Debian's blender-data (Filmic: a 3D LUT and 1D LUTs;
 *     deploy/debian.sh test fetches it into .cache/blender-ocio, and its absence is a failure);
 *   - each look of each config on its default view;
 *   - 8-bit output within 1 level, 16-bit within 1e-3 relative (and 2 levels near black, where a relative
 *     bound means nothing), on RGBA32F frames and an RGBA16F one;
 *   - a config whose LUT is missing refused at load with OCIO's message naming the file;
 *   - the programs' set: made on first use, kept, evicted least-recently-used at its capacity, made again;
 *   - every bad name refused naming its field and listing the valid names; ocio.* without a config.
 * The GPU runs through the frame graph as the daemon runs it: exposure fixed at +0.5 stops, so the scale
 * applied is checked too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "gpu_test.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/ocio_encoding.h"
#include "pipeline/ocio_stage.h"

static hp_gpu *gpu;
static hp_frame_graph *graph;
static hp_err err;

#define STOPS 0.5

typedef struct frame {
    float *rgba; /* RGBA32F, the values the GPU reads */
    uint32_t w, h;
    hp_pixel_format format;
    uint16_t *half; /* the same as halves for an RGBA16F run (rgba then holds the halves' values) */
} frame;

/* A centred window of a tests/data frame, decoded as the daemon decodes it. */
static bool load_frame(const char *name, uint32_t w, uint32_t h, frame *f)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", HP_TEST_DATA_DIR, name);
    hp_image_info info;
    float *all = hp_image_decode_file(path, HP_LAYOUT_RGBA32F, NULL, &info, &err);
    bool ok = all && info.width >= w && info.height >= h;
    if (ok) {
        f->rgba = malloc((size_t)w * h * 16);
        uint32_t x0 = (info.width - w) / 2, y0 = (info.height - h) / 2;
        for (uint32_t y = 0; y < h; y++)
            memcpy(f->rgba + 4 * (size_t)y * w, all + 4 * ((size_t)(y0 + y) * info.width + x0), (size_t)w * 16);
        f->w = w;
        f->h = h;
        f->format = HP_PIXEL_RGBA32F;
        f->half = NULL;
    }
    free(all);
    return ok;
}

static void to_half(frame *f)
{
    size_t n = (size_t)f->w * f->h * 4;
    f->half = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        f->half[i] = hp_float_to_half(f->rgba[i]);
        f->rgba[i] = hp_half_to_float(f->half[i]);
    }
    f->format = HP_PIXEL_RGBA16F;
}

static void fixed_exposure(hp_params *p)
{
    p->exposure.mode = HP_EXPOSURE_FIXED;
    p->exposure.stops = STOPS;
    p->exposure.adaptation = 0;
    p->exposure.compensation_ev = 0;
    p->output.dither = false;
}

/* The frame through the graph with the entry; the image (bits) copied to out. */
static bool gpu_ocio(const frame *f, const hp_ocio_entry *e, uint32_t bits, void *out, double *scale)
{
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fixed_exposure(&fp.params);
    fp.params.output.format = HP_OUTPUT_PNG;
    fp.params.output.bit_depth = bits;
    fp.params.output.png_encoder = HP_PNG_ENCODER_CPU; /* the image itself is compared, not a PNG */
    fp.ocio = e;
    hp_frame_desc desc = {.width = f->w, .height = f->h, .format = f->format};
    void *staging;
    if (hp_frame_graph_begin(graph, &desc, &staging, &err) != HP_OK)
        return false;
    memcpy(staging, f->half ? (void *)f->half : (void *)f->rgba, (size_t)f->w * f->h * hp_pixel_format_size(f->format));
    hp_frame_result res;
    if (hp_frame_graph_run(graph, &fp, &res, &err) != HP_OK)
        return false;
    memcpy(out, res.pixels, (size_t)f->w * f->h * (bits / 2));
    *scale = res.tone.scale;
    return true;
}

/* Worst difference of the colour channels (alpha must be equal), in levels; *rel: the 16-bit bound's use. */
static bool compare(const void *gpu_px, const void *cpu_px, size_t n, uint32_t bits, double *worst)
{
    *worst = 0;
    bool ok = true;
    for (size_t i = 0; i < 4 * n; i++) {
        double g = bits == 16 ? ((const uint16_t *)gpu_px)[i] : ((const uint8_t *)gpu_px)[i];
        double c = bits == 16 ? ((const uint16_t *)cpu_px)[i] : ((const uint8_t *)cpu_px)[i];
        double d = fabs(g - c);
        if (i % 4 == 3) {
            ok = ok && d == 0;
            continue;
        }
        double bound = bits == 16 ? fmax(1e-3 * c, 2.0) : 1.0;
        ok = ok && d <= bound;
        *worst = fmax(*worst, d);
    }
    return ok;
}

/* One transform at 8 and 16 bits against OCIO's CPU processor. */
static void check_key(hp_ocio_stage *stage, const hp_ocio_config *cfg, hp_ocio_view_key key, const frame *f,
                      const char *what)
{
    hp_err e = {0};
    if (!tap_ok(hp_ocio_resolve(cfg, &key, &e) == HP_OK, "%s: the names resolve: %s", what, e.message))
        return;
    hp_ocio_cpu *cpu = NULL;
    bool made_cpu = hp_ocio_cpu_make(cfg, &key, &cpu, &e) == HP_OK;
    size_t n = (size_t)f->w * f->h;
    void *g = malloc(n * 8), *c = malloc(n * 8);
    for (uint32_t bits = 8; bits <= 16; bits += 8) {
        hp_ocio_entry *entry = NULL;
        bool made = false;
        hp_tone_output kind = bits == 16 ? HP_TONE_OUT_RGBA16 : HP_TONE_OUT_RGBA8;
        bool ok = made_cpu && hp_ocio_stage_acquire(stage, &key, f->format, kind, &entry, &made, &e) == HP_OK;
        double scale = 0, worst = -1;
        ok = ok && gpu_ocio(f, entry, bits, g, &scale);
        if (entry)
            hp_ocio_stage_release(stage, entry);
        ok = ok && fabs(scale - exp2(STOPS)) < 1e-6;
        ok = ok && hp_cpu_ocio(cpu, f->rgba, f->w, f->h, exp2(STOPS), false, bits, c, &e) == HP_OK;
        ok = ok && compare(g, c, n, bits, &worst);
        tap_ok(ok, "%s, %u-bit%s: GPU within %s of OCIO's CPU processor (worst %.0f levels, scale %.4f)%s%s", what,
               bits, f->format == HP_PIXEL_RGBA16F ? " from half" : "", bits == 16 ? "1e-3" : "1 level", worst, scale,
               e.message[0] ? ": " : "", e.message[0] ? e.message : err.message);
        e.message[0] = '\0';
    }
    free(g);
    free(c);
    hp_ocio_cpu_free(cpu);
}

/* Every display and view, then each look on the default view. */
static void check_config(const char *label, const hp_ocio_config *cfg, const char *input, const frame *f)
{
    hp_ocio_stage *stage = NULL;
    if (!tap_ok(hp_ocio_stage_create(gpu, cfg, 64, &stage, &err) == HP_OK, "%s: the stage", label))
        return;
    for (size_t d = 0; d < hp_ocio_count(cfg, HP_OCIO_DISPLAYS); d++) {
        const char *display = hp_ocio_name(cfg, HP_OCIO_DISPLAYS, d);
        for (size_t v = 0; v < hp_ocio_view_count(cfg, display); v++) {
            hp_ocio_view_key key = {0};
            snprintf(key.input, sizeof key.input, "%s", input);
            snprintf(key.display, sizeof key.display, "%s", display);
            snprintf(key.view, sizeof key.view, "%s", hp_ocio_view_name(cfg, display, v));
            char what[700];
            snprintf(what, sizeof what, "%s: %s / %s from %s", label, key.display, key.view, input);
            check_key(stage, cfg, key, f, what);
        }
    }
    for (size_t l = 0; l < hp_ocio_count(cfg, HP_OCIO_LOOKS); l++) {
        hp_ocio_view_key key = {0};
        snprintf(key.input, sizeof key.input, "%s", input);
        snprintf(key.looks, sizeof key.looks, "+%s", hp_ocio_name(cfg, HP_OCIO_LOOKS, l));
        char what[700];
        snprintf(what, sizeof what, "%s: look %s on the default view", label, key.looks);
        check_key(stage, cfg, key, f, what);
    }
    hp_ocio_stage_destroy(&stage);
}

/* The programs' set at capacity 2: first use makes, a second use finds, a third key evicts the least recently
 * used, which is made again on its next use. */
static void check_lru(const hp_ocio_config *cfg)
{
    hp_ocio_stage *stage = NULL;
    hp_ocio_stage_create(gpu, cfg, 2, &stage, &err);
    const char *display = hp_ocio_default_display(cfg);
    size_t views = hp_ocio_view_count(cfg, display);
    if (!tap_ok(stage && views >= 3, "lru: a stage of 2 and a display with 3 views (%zu)", views)) {
        hp_ocio_stage_destroy(&stage);
        return;
    }
    bool made[5];
    int order[5] = {0, 0, 1, 2, 0};
    bool ok = true;
    for (int i = 0; i < 5; i++) {
        hp_ocio_view_key key = {0};
        snprintf(key.display, sizeof key.display, "%s", display);
        snprintf(key.view, sizeof key.view, "%s", hp_ocio_view_name(cfg, display, (size_t)order[i]));
        hp_ocio_resolve(cfg, &key, &err);
        hp_ocio_entry *e = NULL;
        ok = ok && hp_ocio_stage_acquire(stage, &key, HP_PIXEL_RGBA32F, HP_TONE_OUT_RGBA8, &e, &made[i], &err) == HP_OK;
        hp_ocio_stage_release(stage, e);
    }
    hp_ocio_stage_stats st;
    hp_ocio_stage_stats_get(stage, &st);
    tap_ok(ok && made[0] && !made[1] && made[2] && made[3] && made[4],
           "lru: made on first use, found on the second, views 1 and 2 made, view 0 made again after its eviction");
    tap_ok(st.made == 4 && st.hits == 1 && st.evicted == 2 && st.kept == 2 && st.made_ms > 0,
           "lru: 4 made, 1 found, 2 evicted, 2 kept (%llu, %llu, %llu, %u; %.0f ms making)", (unsigned long long)st.made,
           (unsigned long long)st.hits, (unsigned long long)st.evicted, st.kept, st.made_ms);
    /* A held program is not evicted: hold view 0 while two others come. */
    hp_ocio_view_key k0 = {0};
    snprintf(k0.display, sizeof k0.display, "%s", display);
    hp_ocio_resolve(cfg, &k0, &err);
    hp_ocio_entry *held = NULL, *e = NULL;
    bool m;
    hp_ocio_stage_acquire(stage, &k0, HP_PIXEL_RGBA32F, HP_TONE_OUT_RGBA8, &held, &m, &err);
    for (size_t v = 1; v < 3; v++) {
        hp_ocio_view_key k = k0;
        snprintf(k.view, sizeof k.view, "%s", hp_ocio_view_name(cfg, display, v));
        hp_ocio_stage_acquire(stage, &k, HP_PIXEL_RGBA32F, HP_TONE_OUT_RGBA8, &e, &m, &err);
        hp_ocio_stage_release(stage, e);
    }
    hp_ocio_stage_acquire(stage, &k0, HP_PIXEL_RGBA32F, HP_TONE_OUT_RGBA8, &e, &m, &err);
    tap_ok(e == held && !m, "lru: a program a frame holds stays while others come");
    hp_ocio_stage_release(stage, e);
    hp_ocio_stage_release(stage, held);
    hp_ocio_stage_destroy(&stage);
}

static void check_names(const hp_ocio_config *cfg)
{
    struct {
        const char *field, *value, *listed;
    } bad[] = {
        {"ocio.display", "Cinema", "\"sRGB - Display\""},
        {"ocio.view", "Filmic", "\"Un-tone-mapped\""},
        {"ocio.looks", "Warm Grade", "ACES 1.3 Reference Gamut Compression"},
        {"input.colorspace", "ACEScc", "\"ACEScct\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hp_params p;
        hp_params_defaults(&p);
        hp_err e = {0};
        const hp_param_def *def = hp_param_find(bad[i].field);
        hp_code set = hp_param_set_string(&p, def, bad[i].value, &e);
        hp_code code = set == HP_OK ? hp_params_check(&p, &e) : set;
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && !strcmp(e.field, bad[i].field) && strstr(e.message, bad[i].value) &&
                   strstr(e.message, bad[i].listed),
               "%s \"%s\" is refused naming the field and listing the valid names: %s", bad[i].field, bad[i].value,
               e.message);
    }
    hp_params p;
    hp_params_defaults(&p);
    hp_err e = {0};
    hp_param_set_string(&p, hp_param_find("ocio.view"), "ACES 1.0 - SDR Video", &e);
    hp_param_set_string(&p, hp_param_find("tonemap.operator"), "agx", &e);
    tap_ok(hp_params_check(&p, &e) == HP_ERR_INVALID_ARGUMENT && e.word && !strcmp(e.word, "ocio_conflict") &&
               !strcmp(e.field, "tonemap.operator"),
           "tonemap.operator with an OCIO view: ocio_conflict naming tonemap.operator: %s", e.message);
    hp_params_use_ocio(NULL);
    hp_params_defaults(&p);
    hp_param_set_string(&p, hp_param_find("ocio.view"), "ACES 1.0 - SDR Video", &e);
    tap_ok(hp_params_check(&p, &e) == HP_ERR_INVALID_ARGUMENT && e.word && !strcmp(e.word, "no_ocio_config") &&
               !strcmp(e.field, "ocio.view"),
           "ocio.view without a config: no_ocio_config naming ocio.view: %s", e.message);
    hp_params_defaults(&p);
    tap_ok(hp_param_set_string(&p, hp_param_find("input.colorspace"), "ACEScg", &e) == HP_ERR_INVALID_ARGUMENT &&
               !strcmp(e.field, "input.colorspace"),
           "without a config input.colorspace takes hdrpostd's names only: %s", e.message);
    hp_params_use_ocio(cfg);
}

/* The exposure's Y row of a config's colour space (hp_ocio_input_luma) against hdrpostd's own for the same space
 * (pipeline/colorspace.c: its RGB -> XYZ D65, Bradford from another white), which the built-in input.colorspace
 * names use: a frame weighs the same whether its space is named by hdrpostd or by the config. */
static void check_luma(const hp_ocio_config *cfg, const char *space, const double want[3], double tol,
                       const char *source)
{
    double got[3];
    hp_ocio_input_luma(cfg, space, got);
    tap_ok(fabs(got[0] - want[0]) < tol && fabs(got[1] - want[1]) < tol && fabs(got[2] - want[2]) < tol,
           "luma of \"%s\" is %s (%.10f %.10f %.10f; want %.10f %.10f %.10f, within %g)", space, source, got[0],
           got[1], got[2], want[0], want[1], want[2], tol);
}

static void own_luma(hp_colorspace space, double out[3])
{
    hp_input_color c;
    const char *name, *source;
    hp_err e = {0};
    if (hp_input_color_resolve(space + 1, NULL, HP_OUTPUT_SRGB, &c, &name, &source, &e) != HP_OK || !c.convert)
        out[0] = out[1] = out[2] = NAN;
    else
        memcpy(out, c.luma, sizeof c.luma);
}

static void check_lumas(const hp_ocio_config *aces, const hp_ocio_config *blender)
{
    double ap0[3], ap1[3], bt2020[3];
    own_luma(HP_COLORSPACE_ACES2065, ap0);
    own_luma(HP_COLORSPACE_ACESCG, ap1);
    own_luma(HP_COLORSPACE_REC2020, bt2020);
    const double rec709[3] = {HP_LUMA_R, HP_LUMA_G, HP_LUMA_B};
    const double coefs[3] = {0.2126, 0.7152, 0.0722}; /* both configs' luma: line */
    /* OCIO's CPU processor runs in float: 1e-6 is a few of its steps. */
    if (aces) {
        check_luma(aces, "ACES2065-1", ap0, 1e-6, "hdrpostd's aces2065 row");
        check_luma(aces, "ACEScg", ap1, 1e-6, "hdrpostd's acescg row, through the config's AP1 -> AP0");
        check_luma(aces, "Linear Rec.2020", bt2020, 1e-6, "hdrpostd's rec2020 row, through the config");
        check_luma(aces, "ACEScct", coefs, 1e-12, "the config's luma: a log space has no Y row");
        check_luma(aces, "no such space", coefs, 1e-12, "the config's luma for a name it lacks");
    }
    if (blender) {
        /* Blender's Linear -> Linear ACES matrix is written to 7 digits. */
        check_luma(blender, "Linear", rec709, 1e-4, "hdrpostd's rec709 row, through Blender's Linear ACES");
        check_luma(blender, "Filmic Log", coefs, 1e-12, "the config's luma: a log space has no Y row");
    }
}

/* What a display writes, measured through a config whose every space is scene-referred (the AgX configs' way): the
 * interchange XYZ and the display on the same side, so OCIO puts no view transform between them. */
static void check_scene_displays(void)
{
    hp_ocio_config *cfg = NULL;
    hp_err e = {0};
    if (!tap_ok(hp_ocio_config_load(HP_TEST_DATA_DIR "/ocio/scene_displays/config.ocio", &cfg, &e) == HP_OK,
                "the config of scene-referred displays loads: %s", e.message))
        return;
    hp_ocio_encoding srgb = hp_ocio_encoding_of(cfg, "sRGB", "Standard");
    hp_ocio_encoding pq = hp_ocio_encoding_of(cfg, "Rec.2100-PQ", "Standard");
    tap_ok(srgb.known && srgb.primaries == 1 && srgb.transfer == 13,
           "a scene-referred sRGB display is measured as BT.709 primaries, sRGB transfer (got known %d, %u/%u)",
           srgb.known, srgb.primaries, srgb.transfer);
    tap_ok(pq.known && pq.primaries == 9 && pq.transfer == 16,
           "a scene-referred PQ display is measured as BT.2020 primaries, PQ (got known %d, %u/%u)", pq.known,
           pq.primaries, pq.transfer);
    hp_ocio_config_free(cfg);
}

int main(void)
{
    int bail = gpu_test_open(&gpu, &graph, &err);
    if (bail)
        return bail;
    frame park = {0}, street = {0};
    tap_ok(load_frame("pmndrs_park.exr", 160, 96, &park) && load_frame("blender_street_960x540_singlelayer.exr", 128, 72, &street),
           "two real frames: %s", err.message);

    hp_ocio_config *aces = NULL, *blender = NULL, *missing = NULL;
    tap_ok(hp_ocio_config_load(HP_TEST_DATA_DIR "/ocio/aces_builtin/config.ocio", &aces, &err) == HP_OK,
           "the ACES config of OCIO's built-ins loads: %s", err.message);
    tap_ok(hp_ocio_config_load(HP_BLENDER_OCIO "/config.ocio", &blender, &err) == HP_OK,
           "Blender's config loads (deploy/debian.sh test fetches it into .cache/blender-ocio): %s", err.message);
    hp_err e = {0};
    tap_ok(hp_ocio_config_load(HP_TEST_DATA_DIR "/ocio/missing_lut/config.ocio", &missing, &e) != HP_OK &&
               strstr(e.message, "show_grade.cube") && strstr(e.message, "missing_lut/config.ocio"),
           "a config whose LUT is missing is refused at load, with OCIO's message naming the file: %s", e.message);

    check_lumas(aces, blender);
    check_scene_displays();
    if (aces && park.rgba) {
        hp_params_use_ocio(aces);
        check_config("aces", aces, "ACEScg", &park);
        hp_ocio_stage *stage = NULL;
        hp_ocio_stage_create(gpu, aces, 4, &stage, &err);
        hp_ocio_view_key key = {.input = "ACES2065-1"};
        check_key(stage, aces, key, &park, "aces: the default display and view from ACES2065-1");
        hp_ocio_stage_destroy(&stage);
        check_names(aces);
        check_lru(aces);
    }
    if (blender && street.rgba) {
        check_config("blender", blender, "Linear", &street);
        frame half = street;
        half.rgba = malloc((size_t)street.w * street.h * 16);
        memcpy(half.rgba, street.rgba, (size_t)street.w * street.h * 16);
        to_half(&half);
        hp_ocio_stage *stage = NULL;
        hp_ocio_stage_create(gpu, blender, 4, &stage, &err);
        hp_ocio_view_key key = {.input = "Linear", .display = "sRGB", .view = "Filmic"};
        check_key(stage, blender, key, &half, "blender: sRGB / Filmic");
        /* Filmic's 65^3 LUT is nearest-sampled (OCIO interpolates it tetrahedrally itself): read from a buffer. */
        hp_ocio_entry *filmic = NULL;
        bool made = false;
        hp_ocio_view_key resolved = key;
        bool got = hp_ocio_resolve(blender, &resolved, &err) == HP_OK &&
                   hp_ocio_stage_acquire(stage, &resolved, HP_PIXEL_RGBA16F, HP_TONE_OUT_RGBA8, &filmic, &made, &err) ==
                       HP_OK;
        uint32_t buffers = got ? hp_ocio_entry_buffer_luts(filmic) : 0;
        tap_ok(got && buffers == 1, "blender: Filmic's 3D LUT is read from a buffer, its 1D LUT from an image (%u in "
               "buffers)", buffers);
        hp_ocio_stage_release(stage, filmic);
        hp_ocio_stage_destroy(&stage);
        free(half.rgba);
        free(half.half);
    }
    hp_params_use_ocio(NULL);
    hp_ocio_config_free(aces);
    hp_ocio_config_free(blender);
    free(park.rgba);
    free(street.rgba);
    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    gpu_test_validation_clean();
    return tap_done();
}

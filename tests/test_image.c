/* The image decoders (api/codecs/image.h) as a specification.
 *
 * Real frames (tests/data): the park HDRI three ways agrees with itself, and the other frames decode with
 * the properties their README states. EXR frames this test writes with OpenEXR's own writers cover every
 * compression, tiles, half/float/uint channels, an offset data window, Blender's layer names, grey, multi-
 * part files and the refusals. The EXR decoder's fast paths (ZIP through libdeflate, each chunk converted
 * straight from its decompressed bytes) must give the bytes of the library's own path, which
 * HP_EXR_GENERIC_DECODE=1 selects, for every compression, channel type, channel choice and odd size.
 * Damaged input (truncated, bytes flipped in headers and bodies, ZIP chunks that inflate wrong) must fail
 * with a message and never crash. Decompression bombs (more pixels than the body can hold in the format's
 * densest coding) and EXR attributes sized past the end of the file are refused from the header, while
 * constant frames, the most compressible there are, still pass. Run it under valgrind too:
 *     valgrind --error-exitcode=1 --leak-check=full build/tests/test_image
 *
 * Tolerances, stated once:
 *   lossless EXR (NONE, RLE, ZIPS, ZIP, PIZ; PXR24 on half and uint): bit-exact.
 *   PXR24 on float: rounded to 24 bits, |error| <= 2^-15 |value|.
 *   B44, B44A on half: 4x4 blocks of 6-bit steps in a log-like domain; measured here to stay within 2^-5 of
 *     the value plus 2^-10 absolute on the smooth test frames (they leave float and uint channels raw).
 *   DWAA, DWAB on R, G, B (half or float): DCT with quantisation at quality 45; within 2^-4 relative plus
 *     2^-7 absolute on the smooth test frames. A, Z and uint channels are lossless under DWA.
 *   RGBA16F output: always exactly hp_float_to_half() of the RGBA32F output (round to nearest even).
 *   park .pfm vs .exr: the PFM went through pfstools' float XYZ round trip: within 2^-20 of the pixel's
 *     largest |channel|. park .hdr vs .exr: RGBE keeps 8-bit mantissas (decoded at the interval centre),
 *     so within 2^-8 + 2^-20 of the pixel's largest channel, for pixels with no negative channel (RGBE
 *     cannot hold negatives). */
#include <libdeflate.h>
#include <math.h>
#include <openexr.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/codecs/image.h"
#include "api/codecs/image_internal.h"
#include "common/arrival.h"
#include "pipeline/cpu_reference.h"
#include "tap.h"
#include "test_image_exr.h"

/* --- Bytes ------------------------------------------------------------------------------------------ */

typedef struct blob {
    uint8_t *data;
    size_t len;
} blob;

static blob read_data(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", HP_TEST_DATA, name);
    blob b = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return b;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.data = malloc(n > 0 ? (size_t)n : 1);
    if (b.data && n > 0 && fread(b.data, 1, (size_t)n, f) == (size_t)n)
        b.len = (size_t)n;
    fclose(f);
    return b;
}

static blob blob_of(const void *bytes, size_t len)
{
    blob b = {malloc(len ? len : 1), len};
    memcpy(b.data, bytes, len);
    return b;
}

static void blob_free(blob *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

/* The test frames, for a look with other tools: HP_TEST_IMAGE_DUMP=<directory>. */
static void dump(const char *name, const blob *b)
{
    const char *dir = getenv("HP_TEST_IMAGE_DUMP");
    if (!dir)
        return;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b->data, 1, b->len, f);
        fclose(f);
    }
}

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool contains(const char *text, const char *part) { return strstr(text, part) != NULL; }

/* --- Decoding --------------------------------------------------------------------------------------- */

typedef struct decoded {
    hp_image_info info;
    float *rgba;
    uint16_t *half;
    float *depth;
    hp_err err;
} decoded;

static void decoded_free(decoded *d)
{
    free(d->rgba);
    free(d->half);
    free(d->depth);
    d->rgba = d->depth = NULL;
    d->half = NULL;
}

/* Probe, then decode as RGBA32F (with depth when there is some) and as RGBA16F. */
static hp_code decode_both(const blob *b, const hp_decode_options *opt, decoded *d)
{
    memset(d, 0, sizeof(*d));
    hp_code code = hp_image_probe(b->data, b->len, opt, &d->info, &d->err);
    if (code != HP_OK)
        return code;
    size_t px = (size_t)d->info.width * d->info.height;
    d->rgba = malloc(px * 16);
    d->half = malloc(px * 8);
    if (d->info.has_depth)
        d->depth = malloc(px * 4);
    if (!d->rgba || !d->half || (d->info.has_depth && !d->depth))
        return hp_fail(&d->err, HP_ERR_OUT_OF_MEMORY, "test: no memory for %zu pixels", px);
    if ((code = hp_image_decode(b->data, b->len, opt, &d->info, d->rgba, HP_LAYOUT_RGBA32F, d->depth, &d->err)))
        return code;
    hp_image_info again = d->info;
    if ((code = hp_image_decode(b->data, b->len, opt, &again, d->half, HP_LAYOUT_RGBA16F, NULL, &d->err)))
        return code;
    return HP_OK;
}

/* Values where the RGBA16F output is not hp_float_to_half() of the RGBA32F output (NaN matches NaN). */
static size_t half_mismatches(const decoded *d)
{
    size_t bad = 0, n = (size_t)d->info.width * d->info.height * 4;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = hp_float_to_half(d->rgba[i]);
        bool both_nan = isnan(d->rgba[i]) && (d->half[i] & 0x7c00) == 0x7c00 && (d->half[i] & 0x3ff);
        bad += d->half[i] != want && !both_nan;
    }
    return bad;
}

static bool same_float(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }

/* --- Writing EXR with the core library (tools/exr_write.c) ------------------------------------------ */

static bool write_exr_parts(const test_exr_spec *specs, int count, blob *out)
{
    return hp_exr_write_core(specs, count, &out->data, &out->len) == 1;
}

static bool write_exr(const test_exr_spec *spec, blob *out)
{
#ifdef HP_EXR_DWA_CXX
    if (spec->compression == EXR_COMPRESSION_DWAA || spec->compression == EXR_COMPRESSION_DWAB)
        return test_write_exr_cxx(spec, &out->data, &out->len) == 1;
#endif
    return write_exr_parts(spec, 1, out);
}

/* --- Test frames -------------------------------------------------------------------------------------- */

/* A frame's channels, planar, with the value each should decode to. */
typedef struct frame {
    int width, height, count;
    test_exr_channel channels[8];
    char names[8][64];
    void *data[8];
    float *expect[8]; /* width * height floats per channel */
} frame;

static void frame_free(frame *f)
{
    for (int c = 0; c < f->count; c++) {
        free(f->data[c]);
        free(f->expect[c]);
    }
    memset(f, 0, sizeof(*f));
}

/* Smooth, positive, range about 0.02 to 3 (and more for float, with bits half cannot hold). */
static float smooth(int x, int y, int k, bool extra_bits)
{
    double v = 0.02 + 3.0 * (0.5 + 0.5 * sin(x * 0.11 + k)) * (0.5 + 0.5 * cos(y * 0.07 + 2.0 * k));
    if (extra_bits)
        v *= 1.0 + 1e-5 * (double)((x * 7 + y * 13 + k) % 17);
    return (float)v;
}

typedef float (*value_fn)(int x, int y, int k);

static float value_colour(int x, int y, int k) { return smooth(x, y, k, true); }
static float value_alpha(int x, int y, int k) { return 0.25f + 0.75f * (float)((x + y + k) % 5) / 4.0f; }
static float value_uint(int x, int y, int k) { return (float)(x * 1000 + y * 7 + k); }
static float value_depth(int x, int y, int k)
{
    (void)k;
    return y < 4 ? 1e10f : 0.5f + 0.37f * (float)x + 0.11f * (float)y; /* the top rows are sky */
}

/* A new channel's name and buffers (its samples, and the floats the decoder must give for them). */
static int frame_channel(frame *f, const char *name, int type)
{
    int c = f->count++;
    size_t n = (size_t)f->width * f->height;
    snprintf(f->names[c], sizeof(f->names[c]), "%s", name);
    f->data[c] = malloc(n * hp_exr_type_size(type));
    f->expect[c] = malloc(n * 4);
    return c;
}

static void frame_add(frame *f, const char *name, int type, value_fn fn, int k)
{
    int c = frame_channel(f, name, type);
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++) {
            size_t i = (size_t)y * f->width + x;
            float v = fn(x, y, k);
            if (type == EXR_PIXEL_HALF) {
                uint16_t h = hp_float_to_half(v);
                ((uint16_t *)f->data[c])[i] = h;
                f->expect[c][i] = hp_half_to_float(h);
            } else if (type == EXR_PIXEL_UINT) {
                uint32_t u = (uint32_t)v;
                ((uint32_t *)f->data[c])[i] = u;
                f->expect[c][i] = (float)u;
            } else {
                ((float *)f->data[c])[i] = v;
                f->expect[c][i] = v;
            }
        }
    f->channels[c] = (test_exr_channel){f->names[c], type, f->data[c]};
}

static int frame_find(const frame *f, const char *name)
{
    for (int c = 0; c < f->count; c++)
        if (strcmp(f->names[c], name) == 0)
            return c;
    return -1;
}

static test_exr_spec frame_spec(const frame *f, int compression, int tile)
{
    return (test_exr_spec){.width = f->width, .height = f->height, .data_x = 5, .data_y = -3, .display_w = 80,
                           .display_h = 60, .compression = compression, .tile = tile, .channels = f->channels,
                           .channel_count = f->count};
}

typedef enum frame_kind { FRAME_RGBA_HALF, FRAME_RGB_FLOAT_Z, FRAME_MIXED, FRAME_KIND_COUNT } frame_kind;
static const char *const frame_names[] = {"R,G,B,A half", "R,G,B float + Z float", "R half, G float, B uint, A uint"};

static void make_frame(frame *f, frame_kind kind)
{
    memset(f, 0, sizeof(*f));
    f->width = 70, f->height = 45; /* edge tiles of 16 are partial both ways */
    switch (kind) {
    case FRAME_RGBA_HALF:
        frame_add(f, "R", EXR_PIXEL_HALF, value_colour, 0);
        frame_add(f, "G", EXR_PIXEL_HALF, value_colour, 1);
        frame_add(f, "B", EXR_PIXEL_HALF, value_colour, 2);
        frame_add(f, "A", EXR_PIXEL_HALF, value_alpha, 0);
        break;
    case FRAME_RGB_FLOAT_Z:
        frame_add(f, "R", EXR_PIXEL_FLOAT, value_colour, 0);
        frame_add(f, "G", EXR_PIXEL_FLOAT, value_colour, 1);
        frame_add(f, "B", EXR_PIXEL_FLOAT, value_colour, 2);
        frame_add(f, "Z", EXR_PIXEL_FLOAT, value_depth, 0);
        break;
    default:
        frame_add(f, "R", EXR_PIXEL_HALF, value_colour, 0);
        frame_add(f, "G", EXR_PIXEL_FLOAT, value_colour, 1);
        frame_add(f, "B", EXR_PIXEL_UINT, value_uint, 2);
        frame_add(f, "A", EXR_PIXEL_UINT, value_uint, 3);
        break;
    }
}

/* --- Comparing with what was written -------------------------------------------------------------- */

typedef struct tolerance {
    double rel, abs;
} tolerance;

static tolerance tolerance_for(int compression, int type, bool colour)
{
    switch (compression) {
    case EXR_COMPRESSION_PXR24:
        return type == EXR_PIXEL_FLOAT ? (tolerance){0x1p-15, 0.0} : (tolerance){0, 0};
    case EXR_COMPRESSION_B44:
    case EXR_COMPRESSION_B44A:
        return type == EXR_PIXEL_HALF ? (tolerance){0x1p-5, 0x1p-10} : (tolerance){0, 0};
    case EXR_COMPRESSION_DWAA:
    case EXR_COMPRESSION_DWAB:
        return colour && type != EXR_PIXEL_UINT ? (tolerance){0x1p-4, 0x1p-7} : (tolerance){0, 0};
    default:
        return (tolerance){0, 0};
    }
}

/* Compares the RGBA32F output (and depth) with the frame; says the worst error in why. */
static bool matches_frame(const decoded *d, const frame *f, int compression, const char *const slots[4],
                          const char *depth, char *why, size_t len)
{
    double worst = 0.0;
    size_t bad = 0, n = (size_t)f->width * f->height;
    for (int s = 0; s < 5; s++) {
        const char *name = s < 4 ? slots[s] : depth;
        int c = name ? frame_find(f, name) : -1;
        if (s < 4 && !name) { /* absent alpha: 1 */
            for (size_t i = 0; i < n; i++)
                bad += d->rgba[i * 4 + 3] != 1.0f;
            continue;
        }
        if (c < 0)
            continue;
        tolerance tol = tolerance_for(compression, f->channels[c].type, s < 3);
        for (size_t i = 0; i < n; i++) {
            float got = s < 4 ? d->rgba[i * 4 + s] : d->depth[i];
            float want = f->expect[c][i];
            double err = fabs((double)got - want);
            double allowed = tol.rel * fabs(want) + tol.abs;
            if (tol.rel == 0.0 && tol.abs == 0.0 ? !same_float(got, want) : !(err <= allowed))
                bad++;
            if (err / (fabs(want) + 1e-3) > worst)
                worst = err / (fabs(want) + 1e-3);
        }
    }
    snprintf(why, len, "%zu values off, worst relative error %.3g", bad, worst);
    return bad == 0;
}

static const char *const compression_names[] = {"NONE", "RLE", "ZIPS", "ZIP", "PIZ", "PXR24", "B44", "B44A", "DWAA",
                                                 "DWAB"};
static const char *const compression_info[] = {"none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa",
                                               "dwab"};

static void test_written_exr(void)
{
    static const char *const rgba[4] = {"R", "G", "B", "A"};
    static const char *const rgb[4] = {"R", "G", "B", NULL};
    for (int comp = EXR_COMPRESSION_NONE; comp < EXR_COMPRESSION_LAST_TYPE; comp++) {
        for (int kind = 0; kind <= FRAME_KIND_COUNT; kind++) {
            /* the three kinds as scanlines, then RGBA half again as 16 x 16 tiles */
            bool tiled = kind == FRAME_KIND_COUNT;
            frame f;
            make_frame(&f, tiled ? FRAME_RGBA_HALF : (frame_kind)kind);
            test_exr_spec spec = frame_spec(&f, comp, tiled ? 16 : 0);
            spec.decreasing_y = comp == EXR_COMPRESSION_ZIP && kind == FRAME_RGBA_HALF;
            const char *what = tiled ? "R,G,B,A half, 16x16 tiles" : frame_names[kind];
            blob b = {0};
            if (!tap_ok(write_exr(&spec, &b), "EXR %s, %s: written", compression_names[comp], what)) {
                frame_free(&f);
                continue;
            }
            char name[64];
            snprintf(name, sizeof(name), "written_%s_%d.exr", compression_info[comp], kind);
            dump(name, &b);

            decoded d;
            hp_code code = decode_both(&b, NULL, &d);
            const hp_image_info *in = &d.info;
            bool info_ok = code == HP_OK && in->format == HP_IMAGE_EXR && in->width == 70 && in->height == 45 &&
                           in->data_window.min_x == 5 && in->data_window.min_y == -3 &&
                           in->data_window.max_x == 74 && in->data_window.max_y == 41 &&
                           in->display_window.min_x == 0 && in->display_window.max_x == 79 &&
                           in->display_window.max_y == 59 && in->tiled == tiled &&
                           strcmp(in->compression, compression_info[comp]) == 0 &&
                           in->has_depth == (kind == FRAME_RGB_FLOAT_Z) &&
                           in->has_alpha == (kind != FRAME_RGB_FLOAT_Z);
            tap_ok(info_ok, "EXR %s, %s: probe reports 70x45, data window (5,-3)-(74,41), display (0,0)-(79,59), "
                   "%s, %u chunks%s%s", compression_names[comp], what, in->compression, in->chunk_count,
                   code ? ": " : "", code ? d.err.message : "");
            if (code == HP_OK) {
                char why[160];
                bool ok = matches_frame(&d, &f, comp, kind == FRAME_RGB_FLOAT_Z ? rgb : rgba,
                                        kind == FRAME_RGB_FLOAT_Z ? "Z" : NULL, why, sizeof(why));
                if (kind == FRAME_RGB_FLOAT_Z) {
                    uint64_t sky = 4ull * 70;
                    ok = ok && d.info.depth_background == sky && d.info.depth_nonfinite == 0;
                }
                tap_ok(ok, "EXR %s, %s: decoded values match what was written (%s)", compression_names[comp], what,
                       why);
                size_t bad = half_mismatches(&d);
                tap_ok(bad == 0, "EXR %s, %s: RGBA16F is the RGBA32F output rounded to nearest even (%zu differ)",
                       compression_names[comp], what, bad);
            }
            decoded_free(&d);
            blob_free(&b);
            frame_free(&f);
        }
    }
}

/* --- Layers, grey, refusals ----------------------------------------------------------------------- */

static void test_layers(void)
{
    frame f = {.width = 40, .height = 24};
    frame_add(&f, "ViewLayer.AO.R", EXR_PIXEL_HALF, value_colour, 7); /* before Combined in name order */
    frame_add(&f, "ViewLayer.AO.G", EXR_PIXEL_HALF, value_colour, 8);
    frame_add(&f, "ViewLayer.AO.B", EXR_PIXEL_HALF, value_colour, 9);
    frame_add(&f, "ViewLayer.Combined.R", EXR_PIXEL_HALF, value_colour, 0);
    frame_add(&f, "ViewLayer.Combined.G", EXR_PIXEL_HALF, value_colour, 1);
    frame_add(&f, "ViewLayer.Combined.B", EXR_PIXEL_HALF, value_colour, 2);
    frame_add(&f, "ViewLayer.Combined.A", EXR_PIXEL_HALF, value_alpha, 0);
    frame_add(&f, "ViewLayer.Depth.Z", EXR_PIXEL_FLOAT, value_depth, 0);
    test_exr_spec spec = frame_spec(&f, EXR_COMPRESSION_ZIP, 0);
    spec.data_x = spec.data_y = 0, spec.display_w = 40, spec.display_h = 24;
    blob b = {0};
    if (!tap_ok(write_exr(&spec, &b), "Blender-style multi-layer EXR written")) {
        frame_free(&f);
        return;
    }
    dump("written_layers.exr", &b);
    char why[160];

    decoded d;
    hp_code code = decode_both(&b, NULL, &d);
    tap_ok(code == HP_OK && strcmp(d.info.layer, "ViewLayer.Combined") == 0 &&
               strcmp(d.info.channel_names[0], "ViewLayer.Combined.R") == 0 &&
               strcmp(d.info.channel_names[3], "ViewLayer.Combined.A") == 0 &&
               strcmp(d.info.depth_channel, "ViewLayer.Depth.Z") == 0 && d.info.has_alpha && d.info.channel_count == 8,
           "multi-layer: the automatic choice is layer '%s' (not ViewLayer.AO, first by name) with depth '%s'",
           d.info.layer, d.info.depth_channel);
    if (code == HP_OK) {
        static const char *const combined[4] = {"ViewLayer.Combined.R", "ViewLayer.Combined.G", "ViewLayer.Combined.B",
                                                "ViewLayer.Combined.A"};
        bool ok = matches_frame(&d, &f, EXR_COMPRESSION_ZIP, combined, "ViewLayer.Depth.Z", why, sizeof(why));
        tap_ok(ok && d.info.depth_background == 4 * 40, "multi-layer: colour and depth decode exactly, %llu sky samples "
               "(1e10) counted as background (%s)", (unsigned long long)d.info.depth_background, why);
        bool sky_kept = true;
        for (int i = 0; i < 40 * 4; i++)
            sky_kept = sky_kept && d.depth[i] == 1e10f;
        tap_ok(sky_kept, "multi-layer: depth 1e10 passes through unchanged");
    }
    decoded_free(&d);

    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    opt.layer = "ViewLayer.AO";
    code = decode_both(&b, &opt, &d);
    if (tap_ok(code == HP_OK && strcmp(d.info.layer, "ViewLayer.AO") == 0 && !d.info.has_alpha,
               "layer 'ViewLayer.AO' chosen by name, no alpha in it%s%s", code ? ": " : "", code ? d.err.message : "")) {
        static const char *const ao[4] = {"ViewLayer.AO.R", "ViewLayer.AO.G", "ViewLayer.AO.B", NULL};
        tap_ok(matches_frame(&d, &f, EXR_COMPRESSION_ZIP, ao, NULL, why, sizeof(why)),
               "layer 'ViewLayer.AO': values exact and alpha written as 1 (%s)", why);
    }
    decoded_free(&d);

    opt = (hp_decode_options)HP_DECODE_OPTIONS_DEFAULTS;
    opt.channel_r = "ViewLayer.Combined.B", opt.channel_g = "ViewLayer.AO.G", opt.channel_b = "ViewLayer.Combined.R";
    opt.channel_a = "ViewLayer.AO.R";
    code = decode_both(&b, &opt, &d);
    if (tap_ok(code == HP_OK && strcmp(d.info.channel_names[1], "ViewLayer.AO.G") == 0,
               "channels chosen one by one by name%s%s", code ? ": " : "", code ? d.err.message : "")) {
        static const char *const mix[4] = {"ViewLayer.Combined.B", "ViewLayer.AO.G", "ViewLayer.Combined.R",
                                           "ViewLayer.AO.R"};
        tap_ok(matches_frame(&d, &f, EXR_COMPRESSION_ZIP, mix, "ViewLayer.Depth.Z", why, sizeof(why)),
               "channels by name: each lands in its slot (%s)", why);
    }
    decoded_free(&d);

    opt = (hp_decode_options)HP_DECODE_OPTIONS_DEFAULTS;
    opt.layer = "ViewLayer.Diffuse";
    code = decode_both(&b, &opt, &d);
    tap_ok(code == HP_ERR_UNUSABLE && contains(d.err.message, "ViewLayer.Diffuse") &&
               contains(d.err.message, "ViewLayer.Combined.R"),
           "a layer that is not there: HP_ERR_UNUSABLE naming it and the channels found (%s)", d.err.message);
    decoded_free(&d);

    opt = (hp_decode_options)HP_DECODE_OPTIONS_DEFAULTS;
    opt.channel_r = "ViewLayer.Combined.R";
    code = decode_both(&b, &opt, &d);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT, "channel_r without channel_g and channel_b: HP_ERR_INVALID_ARGUMENT (%s)",
           d.err.message);
    decoded_free(&d);
    blob_free(&b);
    frame_free(&f);

    /* Normal.X/Y/Z is a vector, not a depth; Mist.Z alone in its layer is a depth-like pass. */
    frame g = {.width = 8, .height = 8};
    frame_add(&g, "R", EXR_PIXEL_HALF, value_colour, 0);
    frame_add(&g, "G", EXR_PIXEL_HALF, value_colour, 1);
    frame_add(&g, "B", EXR_PIXEL_HALF, value_colour, 2);
    frame_add(&g, "ViewLayer.Normal.X", EXR_PIXEL_FLOAT, value_colour, 3);
    frame_add(&g, "ViewLayer.Normal.Y", EXR_PIXEL_FLOAT, value_colour, 4);
    frame_add(&g, "ViewLayer.Normal.Z", EXR_PIXEL_FLOAT, value_colour, 5);
    spec = frame_spec(&g, EXR_COMPRESSION_RLE, 0);
    if (write_exr(&spec, &b)) {
        hp_image_info info;
        hp_err err;
        code = hp_image_probe(b.data, b.len, NULL, &info, &err);
        tap_ok(code == HP_OK && !info.has_depth, "a vector's Z (ViewLayer.Normal.Z) is not taken for depth");
        blob_free(&b);
    }
    frame_free(&g);
}

static void test_grey_and_refusals(void)
{
    char why[160];
    /* grey: Y only */
    frame f = {.width = 33, .height = 17};
    frame_add(&f, "Y", EXR_PIXEL_FLOAT, value_colour, 0);
    test_exr_spec spec = frame_spec(&f, EXR_COMPRESSION_PIZ, 0);
    blob b = {0};
    decoded d;
    if (write_exr(&spec, &b)) {
        hp_code code = decode_both(&b, NULL, &d);
        static const char *const yyy[4] = {"Y", "Y", "Y", NULL};
        tap_ok(code == HP_OK && d.info.grey && !d.info.has_alpha &&
                   matches_frame(&d, &f, EXR_COMPRESSION_PIZ, yyy, NULL, why, sizeof(why)) && half_mismatches(&d) == 0,
               "grey EXR (Y only): R = G = B = Y, alpha 1 (%s)", code ? d.err.message : why);
        decoded_free(&d);
        blob_free(&b);
    }
    frame_free(&f);

    /* no colour at all */
    frame n = {.width = 8, .height = 4};
    frame_add(&n, "N.X", EXR_PIXEL_FLOAT, value_colour, 0);
    frame_add(&n, "N.Y", EXR_PIXEL_FLOAT, value_colour, 1);
    frame_add(&n, "Z", EXR_PIXEL_FLOAT, value_depth, 0);
    spec = frame_spec(&n, EXR_COMPRESSION_ZIPS, 0);
    if (write_exr(&spec, &b)) {
        hp_code code = decode_both(&b, NULL, &d);
        tap_ok(code == HP_ERR_UNUSABLE && contains(d.err.message, "N.X,N.Y,Z"),
               "EXR without colour channels: HP_ERR_UNUSABLE naming the channels found (%s)", d.err.message);
        decoded_free(&d);
        blob_free(&b);
    }
    frame_free(&n);

    /* luminance-chroma */
    frame l = {.width = 8, .height = 4};
    frame_add(&l, "BY", EXR_PIXEL_HALF, value_colour, 0);
    frame_add(&l, "RY", EXR_PIXEL_HALF, value_colour, 1);
    frame_add(&l, "Y", EXR_PIXEL_HALF, value_colour, 2);
    spec = frame_spec(&l, EXR_COMPRESSION_NONE, 0);
    if (write_exr(&spec, &b)) {
        hp_code code = decode_both(&b, NULL, &d);
        tap_ok(code == HP_ERR_UNUSABLE && contains(d.err.message, "luminance"),
               "luminance-chroma EXR (Y, RY, BY): HP_ERR_UNUSABLE (%s)", d.err.message);
        decoded_free(&d);
        blob_free(&b);
    }
    frame_free(&l);

    /* a named depth channel that is not there */
    frame z = {.width = 8, .height = 4};
    frame_add(&z, "R", EXR_PIXEL_HALF, value_colour, 0);
    frame_add(&z, "G", EXR_PIXEL_HALF, value_colour, 1);
    frame_add(&z, "B", EXR_PIXEL_HALF, value_colour, 2);
    spec = frame_spec(&z, EXR_COMPRESSION_NONE, 0);
    if (write_exr(&spec, &b)) {
        hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
        opt.depth = "depth.V";
        hp_code code = decode_both(&b, &opt, &d);
        tap_ok(code == HP_ERR_UNUSABLE && contains(d.err.message, "depth.V"),
               "a depth channel named but absent: HP_ERR_UNUSABLE naming it (%s)", d.err.message);
        decoded_free(&d);
        blob_free(&b);
    }
    frame_free(&z);
}

/* A one-part scanline EXR written by hand, for what the frame writer cannot make (it writes every channel
 * at full resolution): channels names[i] of types[i] sampled every sampling[i] pixels both ways, each
 * chunk's channels pointed at their data by aim(channel, first line of the chunk, user). */
typedef void (*hand_aim)(exr_coding_channel_info_t *ch, int y, void *user);

static bool write_by_hand(hp_exr_sink *s, int w, int h, exr_compression_t compression, int count,
                          const char *const *names, const exr_pixel_type_t *types, const int *sampling, hand_aim aim,
                          void *user)
{
    exr_context_initializer_t init = EXR_DEFAULT_CONTEXT_INITIALIZER;
    init.user_data = s;
    init.write_fn = hp_exr_sink_write;
    exr_context_t ctx = NULL;
    int part = -1;
    bool ok = exr_start_write(&ctx, "test.exr", EXR_WRITE_FILE_DIRECTLY, &init) == EXR_ERR_SUCCESS &&
              exr_add_part(ctx, "p0", EXR_STORAGE_SCANLINE, &part) == EXR_ERR_SUCCESS &&
              exr_initialize_required_attr_simple(ctx, part, w, h, compression) == EXR_ERR_SUCCESS;
    for (int c = 0; c < count && ok; c++)
        ok = exr_add_channel(ctx, part, names[c], types[c], EXR_PERCEPTUALLY_LOGARITHMIC, sampling[c],
                             sampling[c]) == EXR_ERR_SUCCESS;
    ok = ok && exr_write_header(ctx) == EXR_ERR_SUCCESS;
    exr_encode_pipeline_t enc = EXR_ENCODE_PIPELINE_INITIALIZER;
    bool initialized = false;
    int32_t lines = 1;
    ok = ok && exr_get_scanlines_per_chunk(ctx, part, &lines) == EXR_ERR_SUCCESS;
    for (int y = 0; y < h && ok; y += lines) {
        exr_chunk_info_t ci;
        ok = exr_write_scanline_chunk_info(ctx, part, y, &ci) == EXR_ERR_SUCCESS &&
             (initialized ? exr_encoding_update(ctx, part, &ci, &enc)
                          : exr_encoding_initialize(ctx, part, &ci, &enc)) == EXR_ERR_SUCCESS;
        for (int c = 0; c < enc.channel_count && ok; c++)
            aim(&enc.channels[c], y, user);
        if (ok && !initialized)
            ok = exr_encoding_choose_default_routines(ctx, part, &enc) == EXR_ERR_SUCCESS;
        initialized = initialized || ok;
        ok = ok && exr_encoding_run(ctx, part, &enc) == EXR_ERR_SUCCESS;
    }
    if (initialized)
        exr_encoding_destroy(ctx, &enc);
    if (ctx)
        ok = exr_finish(&ctx) == EXR_ERR_SUCCESS && ok;
    return ok;
}

typedef struct depth_planes {
    const uint16_t *colour; /* grey, every colour channel */
    const float *depth;     /* a quarter of the pixels */
    int w;
} depth_planes;

static void aim_depth_planes(exr_coding_channel_info_t *ch, int y, void *user)
{
    const depth_planes *p = user;
    bool z = strcmp(ch->channel_name, "Z") == 0;
    ch->encode_from_ptr = z ? (const uint8_t *)(p->depth + (y / 2) * (p->w / 2)) : (const uint8_t *)(p->colour + y * p->w);
    ch->user_pixel_stride = z ? 4 : 2;
    ch->user_line_stride = z ? 4 * (p->w / 2) : 2 * p->w;
    ch->user_data_type = z ? EXR_PIXEL_FLOAT : EXR_PIXEL_HALF;
    ch->user_bytes_per_element = z ? 4 : 2;
}

/* A depth channel at a quarter of the colour's resolution: written by hand (the frame writer does full
 * resolution only). */
static void test_subsampled_depth(void)
{
    enum { W = 8, H = 4 };
    uint16_t colour[W * H];
    float depth[(W / 2) * (H / 2)];
    for (int i = 0; i < W * H; i++)
        colour[i] = hp_float_to_half(0.5f);
    for (int i = 0; i < (W / 2) * (H / 2); i++)
        depth[i] = 3.0f;
    hp_exr_sink s = {0};
    static const char *const names[4] = {"B", "G", "R", "Z"};
    static const exr_pixel_type_t types[4] = {EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_FLOAT};
    static const int sampling[4] = {1, 1, 1, 2};
    depth_planes planes = {.colour = colour, .depth = depth, .w = W};
    bool ok = write_by_hand(&s, W, H, EXR_COMPRESSION_NONE, 4, names, types, sampling, aim_depth_planes, &planes);
    blob b = {s.data, s.len};
    if (tap_ok(ok, "EXR with a 2x2-subsampled Z written")) {
        hp_image_info info;
        hp_err err = {0};
        hp_code code = hp_image_probe(b.data, b.len, NULL, &info, &err);
        tap_ok(code == HP_ERR_UNUSABLE && contains(err.message, "size differs"),
               "depth of another size than the colour: HP_ERR_UNUSABLE (%s)", err.message);
    }
    blob_free(&b);
}

static void test_multipart(void)
{
    frame beauty = {.width = 24, .height = 10}, extra = {.width = 12, .height = 6};
    frame_add(&beauty, "R", EXR_PIXEL_HALF, value_colour, 0);
    frame_add(&beauty, "G", EXR_PIXEL_HALF, value_colour, 1);
    frame_add(&beauty, "B", EXR_PIXEL_HALF, value_colour, 2);
    frame_add(&extra, "extra.R", EXR_PIXEL_FLOAT, value_colour, 3);
    frame_add(&extra, "extra.G", EXR_PIXEL_FLOAT, value_colour, 4);
    frame_add(&extra, "extra.B", EXR_PIXEL_FLOAT, value_colour, 5);
    frame_add(&extra, "extra.Z", EXR_PIXEL_FLOAT, value_depth, 0);
    test_exr_spec specs[2] = {frame_spec(&beauty, EXR_COMPRESSION_ZIP, 0), frame_spec(&extra, EXR_COMPRESSION_PIZ, 8)};
    blob b = {0};
    if (tap_ok(write_exr_parts(specs, 2, &b), "two-part EXR written (scanline ZIP + tiled PIZ)")) {
        dump("written_multipart.exr", &b);
        char why[160];
        decoded d;
        hp_code code = decode_both(&b, NULL, &d);
        static const char *const rgb[4] = {"R", "G", "B", NULL};
        tap_ok(code == HP_OK && d.info.part == 0 && d.info.part_count == 2 && d.info.width == 24 &&
                   matches_frame(&d, &beauty, EXR_COMPRESSION_ZIP, rgb, NULL, why, sizeof(why)),
               "multi-part: part 0 is used when nothing is named (%s)", code ? d.err.message : why);
        decoded_free(&d);

        hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
        opt.layer = "extra";
        code = decode_both(&b, &opt, &d);
        static const char *const ex[4] = {"extra.R", "extra.G", "extra.B", NULL};
        tap_ok(code == HP_OK && d.info.part == 1 && d.info.width == 12 && d.info.tiled &&
                   strcmp(d.info.depth_channel, "extra.Z") == 0 &&
                   matches_frame(&d, &extra, EXR_COMPRESSION_PIZ, ex, "extra.Z", why, sizeof(why)),
               "multi-part: layer 'extra' is found in part 1 with its depth (%s)", code ? d.err.message : why);
        decoded_free(&d);
    }
    blob_free(&b);
    frame_free(&beauty);
    frame_free(&extra);
}

/* Values that are not colours pass through: NaN, infinities, negatives, -0, subnormals. */
static void test_hostile_values(void)
{
    static const float values[] = {NAN, INFINITY, -INFINITY, -5.25f, -0.0f, 1e-40f, 3e38f, 65504.0f, 65520.0f,
                                   0x1p-25f, 1.0009765625f + 0x1p-11f /* a tie: rounds to even */};
    enum { N = sizeof(values) / sizeof(values[0]) };
    frame f = {.width = N, .height = 1};
    for (int c = 0; c < 3; c++) {
        int k = f.count++;
        snprintf(f.names[k], sizeof(f.names[k]), "%c", "RGB"[c]);
        f.data[k] = malloc(N * 4);
        f.expect[k] = malloc(N * 4);
        for (int i = 0; i < N; i++)
            ((float *)f.data[k])[i] = f.expect[k][i] = values[(i + c) % N];
        f.channels[k] = (test_exr_channel){f.names[k], EXR_PIXEL_FLOAT, f.data[k]};
    }
    test_exr_spec spec = frame_spec(&f, EXR_COMPRESSION_ZIP, 0);
    blob b = {0};
    if (write_exr(&spec, &b)) {
        decoded d;
        char why[160];
        hp_code code = decode_both(&b, NULL, &d);
        static const char *const rgb[4] = {"R", "G", "B", NULL};
        tap_ok(code == HP_OK && matches_frame(&d, &f, EXR_COMPRESSION_ZIP, rgb, NULL, why, sizeof(why)),
               "EXR float NaN, infinities, negatives, -0 and subnormals pass through bit for bit (%s)",
               code ? d.err.message : why);
        tap_ok(code == HP_OK && half_mismatches(&d) == 0 && d.half[8 * 4] == 0x7c00 && d.half[3 * 4] == 0xc540 &&
                   d.half[10 * 4] == 0x3c02,
               "RGBA16F: 65520 becomes infinity, -5.25 stays, a tie rounds to even (0x%04x)", d.half[10 * 4]);
        decoded_free(&d);
        blob_free(&b);
    }
    frame_free(&f);
}

/* --- Limits and unknown bytes --------------------------------------------------------------------- */

static void test_limits(void)
{
    frame f;
    make_frame(&f, FRAME_RGBA_HALF);
    test_exr_spec spec = frame_spec(&f, EXR_COMPRESSION_ZIP, 0);
    blob b = {0};
    if (write_exr(&spec, &b)) {
        hp_image_info info;
        hp_err err = {0};
        hp_decode_options opt = {.max_width = 64};
        hp_code code = hp_image_probe(b.data, b.len, &opt, &info, &err);
        tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "width 70") && contains(err.message, "64"),
               "max_width 64 refuses a 70-wide EXR (%s)", err.message);
        opt = (hp_decode_options){.max_height = 44};
        code = hp_image_probe(b.data, b.len, &opt, &info, &err);
        tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "height 45") && contains(err.message, "44"),
               "max_height 44 refuses a 45-high EXR (%s)", err.message);
        opt = (hp_decode_options){.max_pixels = 3000};
        code = hp_image_probe(b.data, b.len, &opt, &info, &err);
        tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "3150") && contains(err.message, "3000"),
               "max_pixels 3000 refuses 70 x 45 = 3150 pixels (%s)", err.message);
        float dst[4];
        code = hp_image_decode(b.data, b.len, &opt, &info, dst, HP_LAYOUT_RGBA32F, NULL, &err);
        tap_ok(code == HP_ERR_TOO_LARGE, "decode refuses it too, before touching the destination");
        blob_free(&b);
    }
    frame_free(&f);

    /* A wide EXR cut right after its header: the limit is found from the header alone. */
    frame wide = {.width = 20000, .height = 1};
    frame_add(&wide, "R", EXR_PIXEL_HALF, value_colour, 0);
    frame_add(&wide, "G", EXR_PIXEL_HALF, value_colour, 1);
    frame_add(&wide, "B", EXR_PIXEL_HALF, value_colour, 2);
    spec = frame_spec(&wide, EXR_COMPRESSION_NONE, 0);
    spec.data_x = spec.data_y = 0;
    if (write_exr(&spec, &b)) {
        hp_image_info info;
        hp_err err = {0};
        hp_code code = hp_image_probe(b.data, 400, NULL, &info, &err);
        tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "width 20000") && contains(err.message, "16384"),
               "a 20000-wide EXR is refused by default from its first 400 bytes (%s)", err.message);
        blob_free(&b);
    }
    frame_free(&wide);

    static const char rgbe[] = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 100000 +X 20\n";
    hp_image_info info;
    hp_err err = {0};
    hp_code code = hp_image_probe((const uint8_t *)rgbe, sizeof(rgbe) - 1, NULL, &info, &err);
    tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "height 100000"),
           "a 100000-high Radiance HDR is refused from its header (%s)", err.message);
    static const char pfm[] = "PF\n20000 10\n-1\n";
    code = hp_image_probe((const uint8_t *)pfm, sizeof(pfm) - 1, NULL, &info, &err);
    tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "width 20000"),
           "a 20000-wide PFM is refused from its header (%s)", err.message);
}

static void test_unknown(void)
{
    static const struct {
        const char *what;
        const char *bytes;
        size_t len;
    } cases[] = {
        {"PNG", "\x89PNG\r\n\x1a\n....", 12},
        {"GIF", "GIF89a......", 12},
        {"PPM", "P6\n2 2\n255\n", 11},
        {"empty", "", 0},
        {"3 bytes of the EXR magic", "\x76\x2f\x31", 3},
        {"'PFx'", "PFx 2 2 -1\n", 11},
        {"'#?' of another kind", "#?XYZ\n", 6},
        {"text", "hello, world", 12},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hp_image_info info;
        hp_err err = {0};
        hp_code code = hp_image_probe((const uint8_t *)cases[i].bytes, cases[i].len, NULL, &info, &err);
        tap_ok(code == HP_ERR_UNSUPPORTED_FORMAT && err.message[0] && info.format == HP_IMAGE_UNKNOWN,
               "%s bytes: HP_ERR_UNSUPPORTED_FORMAT (%s)", cases[i].what, err.message);
    }
}

/* --- Radiance RGBE and PFM by hand ---------------------------------------------------------------- */

static float rgbe_value(uint8_t m, uint8_t e) { return e ? ((float)m + 0.5f) * ldexpf(1.0f, e - 136) : 0.0f; }

static blob rgbe_file(const char *header, const uint8_t *body, size_t body_len)
{
    size_t h = strlen(header);
    blob b = {malloc(h + body_len + 1), h + body_len};
    memcpy(b.data, header, h);
    memcpy(b.data + h, body, body_len);
    return b;
}

static hp_code decode_rgbe(const blob *b, decoded *d) { return decode_both(b, NULL, d); }

static void test_rgbe(void)
{
    /* flat and old-style RLE: 5 wide (below 8 every line is old style), 2 rows */
    static const uint8_t flat[] = {
        128, 64, 0, 129, /* row 0 */ 10, 20, 30, 130, 1, 1, 1, 2, /* repeat twice */ 0, 0, 0, 0,
        200, 100, 50, 140, /* row 1 */ 1, 2, 3, 120, 4, 5, 6, 121, 7, 8, 9, 122, 255, 255, 255, 255,
    };
    blob b = rgbe_file("#?RADIANCE\n# made by hand\nFORMAT=32-bit_rle_rgbe\nEXPOSURE=2\nEXPOSURE=3\n\n-Y 2 +X 5\n",
                       flat, sizeof(flat));
    decoded d;
    hp_code code = decode_rgbe(&b, &d);
    static const uint8_t want[10][4] = {{128, 64, 0, 129}, {10, 20, 30, 130}, {10, 20, 30, 130}, {10, 20, 30, 130},
                                        {0, 0, 0, 0},      {200, 100, 50, 140}, {1, 2, 3, 120},   {4, 5, 6, 121},
                                        {7, 8, 9, 122},    {255, 255, 255, 255}};
    bool ok = code == HP_OK && d.info.width == 5 && d.info.height == 2;
    for (int i = 0; ok && i < 10; i++)
        for (int c = 0; c < 3; c++)
            ok = ok && d.rgba[i * 4 + c] == rgbe_value(want[i][c], want[i][3]) && d.rgba[i * 4 + 3] == 1.0f;
    tap_ok(ok, "RGBE flat scanlines and an old-style run decode to (m + 0.5) * 2^(e - 136)%s%s", code ? ": " : "",
           code ? d.err.message : "");
    tap_ok(code == HP_OK && d.rgba[0] == 1.00390625f && d.rgba[1] == 0.50390625f && d.rgba[2] == 0.00390625f &&
               d.rgba[16] == 0.0f,
           "RGBE (128, 64, 0, 129) is (1.00390625, 0.50390625, 0.00390625); exponent 0 is black");
    tap_ok(code == HP_OK && d.info.rgbe_exposure == 6.0 && half_mismatches(&d) == 0,
           "RGBE EXPOSURE=2 and EXPOSURE=3 are reported as 6, values left as stored (%g)", d.info.rgbe_exposure);
    decoded_free(&d);
    blob_free(&b);

    /* new-style RLE, 10 wide: per component a run of 3, a literal of 4, a run of 3; then a flat row */
    uint8_t rle[256];
    size_t n = 0;
    rle[n++] = 2, rle[n++] = 2, rle[n++] = 0, rle[n++] = 10;
    for (int comp = 0; comp < 4; comp++) {
        uint8_t base = comp == 3 ? 128 : (uint8_t)(40 * comp + 10);
        rle[n++] = 128 + 3, rle[n++] = base;
        rle[n++] = 4;
        for (int i = 0; i < 4; i++)
            rle[n++] = (uint8_t)(base + i + 1);
        rle[n++] = 128 + 3, rle[n++] = (uint8_t)(base + 9);
    }
    for (int x = 0; x < 10; x++)
        rle[n++] = (uint8_t)(3 + x), rle[n++] = 7, rle[n++] = 9, rle[n++] = 131;
    b = rgbe_file("#?RGBE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 10\n", rle, n);
    dump("hand_rle.hdr", &b);
    code = decode_rgbe(&b, &d);
    ok = code == HP_OK;
    for (int x = 0; ok && x < 10; x++) {
        for (int comp = 0; comp < 3; comp++) {
            uint8_t base = (uint8_t)(40 * comp + 10), e = (uint8_t)(x < 3 ? 128 : x < 7 ? 128 + x - 2 : 137);
            uint8_t m = (uint8_t)(x < 3 ? base : x < 7 ? base + x - 2 : base + 9);
            ok = ok && d.rgba[x * 4 + comp] == rgbe_value(m, e);
        }
        ok = ok && d.rgba[(10 + x) * 4] == rgbe_value((uint8_t)(3 + x), 131);
    }
    tap_ok(ok, "RGBE new-style RLE (runs and literals per component) then a flat row in one file%s%s",
           code ? ": " : "", code ? d.err.message : "");
    decoded_free(&d);

    /* damaged RLE, each refused with where it went wrong */
    static const struct {
        const char *what;
        size_t at;
        uint8_t value;
        const char *expect;
    } damage[] = {
        {"a run past the width", 4, 128 + 11, "passes the width"},
        {"an empty literal", 6, 0, "is empty"},
        {"a literal past the width", 6, 9, "passes the width"},
        {"a declared width that differs", 3, 11, "declares 11 pixels"},
    };
    for (size_t i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
        blob bad = rgbe_file("#?RGBE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 10\n", rle, n);
        bad.data[bad.len - n + damage[i].at] = damage[i].value;
        code = decode_rgbe(&bad, &d);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(d.err.message, damage[i].expect) &&
                   contains(d.err.message, "scanline 0"),
               "RGBE %s: HP_ERR_INVALID_ARGUMENT at scanline 0 (%s)", damage[i].what, d.err.message);
        decoded_free(&d);
        blob_free(&bad);
    }
    blob_free(&b);

    static const struct {
        const char *what;
        const char *header;
        hp_code code;
        const char *expect;
    } headers[] = {
        {"no FORMAT line", "#?RADIANCE\n\n-Y 1 +X 1\n", HP_ERR_INVALID_ARGUMENT, "no FORMAT"},
        {"XYZE colour", "#?RADIANCE\nFORMAT=32-bit_rle_xyze\n\n-Y 1 +X 1\n", HP_ERR_UNUSABLE, "xyze"},
        {"bottom-up rows (+Y)", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n+Y 1 +X 1\n", HP_ERR_UNUSABLE, "+Y 1 +X 1"},
        {"columns first (+X ... -Y)", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n+X 1 -Y 1\n", HP_ERR_UNUSABLE,
         "orientation"},
        {"right to left (-X)", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 1 -X 1\n", HP_ERR_UNUSABLE, "orientation"},
        {"a garbled resolution line", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y one +X 1\n", HP_ERR_INVALID_ARGUMENT,
         "resolution line"},
        {"a zero height", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 0 +X 1\n", HP_ERR_INVALID_ARGUMENT, "empty"},
        {"a bad EXPOSURE", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\nEXPOSURE=-1\n\n-Y 1 +X 1\n", HP_ERR_INVALID_ARGUMENT,
         "EXPOSURE"},
        {"no resolution line", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n", HP_ERR_INVALID_ARGUMENT, "truncated"},
        {"a run before any pixel", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 1 +X 2\n\x01\x01\x01\x02",
         HP_ERR_INVALID_ARGUMENT, "no pixel before it"},
        {"missing pixels", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 2\n\x10\x10\x10\x80",
         HP_ERR_INVALID_ARGUMENT, "truncated in scanline 0 of 2"},
    };
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        b = blob_of(headers[i].header, strlen(headers[i].header));
        code = decode_rgbe(&b, &d);
        tap_ok(code == headers[i].code && contains(d.err.message, headers[i].expect), "RGBE with %s: %s (%s)",
               headers[i].what, hp_code_name(headers[i].code), d.err.message);
        decoded_free(&d);
        blob_free(&b);
    }

    /* a header line with no end */
    size_t long_len = 6000;
    b = (blob){malloc(long_len), long_len};
    memcpy(b.data, "#?RADIANCE\n", 11);
    memset(b.data + 11, 'x', long_len - 11);
    code = decode_rgbe(&b, &d);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(d.err.message, "longer than"),
           "RGBE header line of 6000 bytes: HP_ERR_INVALID_ARGUMENT (%s)", d.err.message);
    decoded_free(&d);
    blob_free(&b);
}

static void put_float(uint8_t *p, float f, bool little)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        p[little ? i : 3 - i] = (uint8_t)(u >> (8 * i));
}

static void test_pfm(void)
{
    /* grey, big endian (positive scale), 3 x 2: file rows are bottom first */
    uint8_t grey[64];
    int n = snprintf((char *)grey, sizeof(grey), "Pf\n3 2\n2.5\n");
    for (int i = 0; i < 6; i++)
        put_float(grey + n + i * 4, (float)(i + 1), false);
    blob b = blob_of(grey, (size_t)n + 24);
    decoded d;
    hp_code code = decode_both(&b, NULL, &d);
    /* top row is the file's second row: 4, 5, 6 */
    bool ok = code == HP_OK && d.info.grey && d.info.pfm_scale == 2.5 && d.info.width == 3 && d.info.height == 2;
    for (int i = 0; ok && i < 6; i++) {
        float want = (float)(i < 3 ? i + 4 : i - 2);
        ok = d.rgba[i * 4] == want && d.rgba[i * 4 + 1] == want && d.rgba[i * 4 + 2] == want && d.rgba[i * 4 + 3] == 1.0f;
    }
    tap_ok(ok, "PFM 'Pf' big endian: grey copied to R, G, B, rows flipped to top first, |scale| 2.5 reported%s%s",
           code ? ": " : "", code ? d.err.message : "");
    decoded_free(&d);
    blob_free(&b);

    /* colour, little endian, values that are not colours */
    static const float odd[6] = {NAN, INFINITY, -INFINITY, -5.25f, -0.0f, 1e-40f};
    uint8_t colour[128];
    n = snprintf((char *)colour, sizeof(colour), "PF\n2 1\n-1.0\n");
    for (int i = 0; i < 6; i++)
        put_float(colour + n + i * 4, odd[i], true);
    b = blob_of(colour, (size_t)n + 24);
    code = decode_both(&b, NULL, &d);
    ok = code == HP_OK && !d.info.grey;
    for (int i = 0; ok && i < 6; i++)
        ok = same_float(d.rgba[(i / 3) * 4 + i % 3], odd[i]);
    tap_ok(ok && half_mismatches(&d) == 0, "PFM 'PF' little endian: NaN, infinities, negatives, -0, subnormal pass "
           "through%s%s", code ? ": " : "", code ? d.err.message : "");
    decoded_free(&d);

    /* damaged: one byte too many, one too few, bad scale, bad size */
    blob longer = {malloc(b.len + 1), b.len + 1};
    memcpy(longer.data, b.data, b.len);
    longer.data[b.len] = '\n';
    code = decode_both(&longer, NULL, &d);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(d.err.message, "25 bytes"),
           "PFM with a byte after the pixels: HP_ERR_INVALID_ARGUMENT (%s)", d.err.message);
    decoded_free(&d);
    blob_free(&longer);
    b.len--;
    code = decode_both(&b, NULL, &d);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(d.err.message, "truncated"),
           "PFM one byte short: HP_ERR_INVALID_ARGUMENT (%s)", d.err.message);
    decoded_free(&d);
    blob_free(&b);

    static const struct {
        const char *what, *bytes, *expect;
    } headers[] = {
        {"a zero scale", "PF\n1 1\n0\n\0\0\0\0\0\0\0\0\0\0\0\0", "scale"},
        {"a scale that is not a number", "PF\n1 1\nabc\n\0\0\0\0\0\0\0\0\0\0\0\0", "scale"},
        {"a negative width", "PF\n-1 1\n-1\n", "width"},
        {"a zero height", "PF\n1 0\n-1\n", "height"},
        {"no height", "PF\n1", "height"},
    };
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        size_t len = strlen(headers[i].bytes);
        if (contains(headers[i].what, "scale"))
            len += 12;
        b = blob_of(headers[i].bytes, len);
        code = decode_both(&b, NULL, &d);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(d.err.message, headers[i].expect),
               "PFM with %s: HP_ERR_INVALID_ARGUMENT (%s)", headers[i].what, d.err.message);
        decoded_free(&d);
        blob_free(&b);
    }
}

/* --- Real frames ------------------------------------------------------------------------------------ */

static void test_park(void)
{
    blob exr = read_data("pmndrs_park.exr"), hdr = read_data("pmndrs_park.hdr"), pfm = read_data("pmndrs_park.pfm");
    decoded de, dh, dp;
    hp_code ce = decode_both(&exr, NULL, &de), ch = decode_both(&hdr, NULL, &dh), cp = decode_both(&pfm, NULL, &dp);
    tap_ok(ce == HP_OK && de.info.format == HP_IMAGE_EXR && de.info.width == 512 && de.info.height == 256 &&
               strcmp(de.info.compression, "dwab") == 0 && !de.info.has_alpha,
           "park .exr: 512x256 RGB half DWAB decodes%s%s", ce ? ": " : "", ce ? de.err.message : "");
    tap_ok(ch == HP_OK && dh.info.format == HP_IMAGE_RGBE && dh.info.width == 512 && dh.info.height == 256 &&
               dh.info.rgbe_exposure == 1.0,
           "park .hdr: 512x256 Radiance RGBE decodes%s%s", ch ? ": " : "", ch ? dh.err.message : "");
    tap_ok(cp == HP_OK && dp.info.format == HP_IMAGE_PFM && dp.info.width == 512 && dp.info.height == 256 &&
               !dp.info.grey,
           "park .pfm: 512x256 PFM colour decodes%s%s", cp ? ": " : "", cp ? dp.err.message : "");
    if (ce == HP_OK && ch == HP_OK && cp == HP_OK) {
        double worst_pfm = 0, worst_hdr = 0, min_blue = 0;
        size_t bad_pfm = 0, bad_hdr = 0, negative = 0;
        for (size_t i = 0; i < 512 * 256; i++) {
            const float *e = de.rgba + i * 4, *h = dh.rgba + i * 4, *p = dp.rgba + i * 4;
            double m = fmax(fabs(e[0]), fmax(fabs(e[1]), fabs(e[2])));
            bool has_negative = e[0] < 0 || e[1] < 0 || e[2] < 0;
            negative += has_negative;
            min_blue = fmin(min_blue, e[2]);
            for (int c = 0; c < 3; c++) {
                double dpf = fabs((double)p[c] - e[c]), dhd = fabs((double)h[c] - e[c]);
                bad_pfm += dpf > 0x1p-20 * m;
                worst_pfm = fmax(worst_pfm, m > 0 ? dpf / m : dpf);
                if (!has_negative) {
                    bad_hdr += dhd > (0x1p-8 + 0x1p-20) * m;
                    worst_hdr = fmax(worst_hdr, m > 0 ? dhd / m : dhd);
                }
            }
        }
        tap_ok(bad_pfm == 0, "park .pfm agrees with .exr within 2^-20 of each pixel's largest channel "
               "(worst %.3g, %zu off)", worst_pfm, bad_pfm);
        tap_ok(bad_hdr == 0 && worst_hdr > 0, "park .hdr agrees with .exr within 2^-8 + 2^-20 of each pixel's "
               "largest channel, on the %zu pixels without a negative channel (worst %.6g, %zu off)",
               (size_t)512 * 256 - negative, worst_hdr, bad_hdr);
        tap_ok(negative > 0 && min_blue == -1876.0, "park .exr: DWAB ringing negatives pass through (%zu pixels, "
               "blue down to %g)", negative, min_blue);
        size_t b1 = half_mismatches(&de), b2 = half_mismatches(&dh), b3 = half_mismatches(&dp);
        tap_ok(b1 + b2 + b3 == 0, "park: RGBA16F of all three is RGBA32F rounded to nearest even (%zu, %zu, %zu "
               "differ)", b1, b2, b3);
    }
    decoded_free(&de);
    decoded_free(&dh);
    decoded_free(&dp);

    /* the info of one file does not decode another */
    hp_image_info info;
    hp_err err = {0};
    float px[4];
    if (hp_image_probe(hdr.data, hdr.len, NULL, &info, &err) == HP_OK) {
        hp_code code = hp_image_decode(pfm.data, pfm.len, NULL, &info, px, HP_LAYOUT_RGBA32F, NULL, &err);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(err.message, "does not describe"),
               "decode with the info of another file: HP_ERR_INVALID_ARGUMENT (%s)", err.message);
    }
    blob_free(&exr);
    blob_free(&hdr);
    blob_free(&pfm);
}

/* One call of the chunk-range decoder, as a worker thread would make it. */
typedef struct range_job {
    hp_exr_reader *reader;
    uint32_t first, end;
    hp_image_dest dest;
    hp_depth_stats stats;
    hp_err err;
    hp_code code;
} range_job;

static void *range_thread(void *arg)
{
    range_job *job = arg;
    job->code = hp_exr_decode_chunks(job->reader, job->first, job->end, &job->dest, &job->stats, &job->err);
    return NULL;
}

static void test_real_exr(void)
{
    blob b = read_data("psychtoolbox_Desk.exr");
    decoded d;
    hp_code code = decode_both(&b, NULL, &d);
    if (tap_ok(code == HP_OK && d.info.width == 644 && d.info.height == 874 && d.info.has_alpha &&
                   strcmp(d.info.compression, "piz") == 0,
               "Desk: 644x874 RGBA half PIZ decodes%s%s", code ? ": " : "", code ? d.err.message : "")) {
        float lo = INFINITY, hi = -INFINITY, alpha_lo = INFINITY;
        for (size_t i = 0; i < (size_t)644 * 874; i++) {
            for (int c = 0; c < 3; c++)
                lo = fminf(lo, d.rgba[i * 4 + c]), hi = fmaxf(hi, d.rgba[i * 4 + c]);
            alpha_lo = fminf(alpha_lo, d.rgba[i * 4 + 3]);
        }
        tap_ok(lo < 0.0f && hi > 200.0f && hi < 300.0f && half_mismatches(&d) == 0,
               "Desk: values from %g to %g (camera negatives kept, highlights ~230), RGBA16F bit-exact", lo, hi);
        tap_ok(strcmp(d.info.channel_names[3], "A") == 0 && alpha_lo == 1.0f,
               "Desk: alpha comes from its A channel (opaque: minimum %g)", alpha_lo);
    }
    decoded_free(&d);

    /* chunk ranges on two threads give the same frame */
    hp_exr_reader *reader = NULL;
    hp_image_info info = {0};
    hp_err err = {0};
    if (code == HP_OK && hp_exr_open(b.data, b.len, &(hp_decode_options)HP_DECODE_OPTIONS_DEFAULTS, &info, &reader,
                                     &err) == HP_OK) {
        size_t px = (size_t)info.width * info.height;
        float *whole = malloc(px * 16), *split = malloc(px * 16);
        hp_image_info i2 = info;
        hp_image_decode(b.data, b.len, NULL, &i2, whole, HP_LAYOUT_RGBA32F, NULL, &err);
        range_job jobs[2];
        uint32_t half_way = info.chunk_count / 2;
        for (int j = 0; j < 2; j++)
            jobs[j] = (range_job){reader, j ? half_way : 0, j ? info.chunk_count : half_way,
                                  {split, HP_LAYOUT_RGBA32F, NULL, info.width, info.height}};
        pthread_t threads[2];
        for (int j = 0; j < 2; j++)
            pthread_create(&threads[j], NULL, range_thread, &jobs[j]);
        for (int j = 0; j < 2; j++)
            pthread_join(threads[j], NULL);
        tap_ok(jobs[0].code == HP_OK && jobs[1].code == HP_OK && memcmp(whole, split, px * 16) == 0,
               "Desk: chunks %u-%u and %u-%u decoded on two threads give the whole frame", 0, half_way - 1, half_way,
               info.chunk_count - 1);
        hp_code over = hp_exr_decode_chunks(reader, info.chunk_count, info.chunk_count + 1, &jobs[0].dest,
                                            &jobs[0].stats, &err);
        tap_ok(over == HP_ERR_INVALID_ARGUMENT, "a chunk range past the end: HP_ERR_INVALID_ARGUMENT (%s)",
               err.message);
        free(whole);
        free(split);
        hp_exr_close(&reader);
    }
    blob_free(&b);

    b = read_data("blender_city.exr");
    code = decode_both(&b, NULL, &d);
    if (tap_ok(code == HP_OK && d.info.width == 1024 && d.info.height == 512 && strcmp(d.info.compression, "dwab") == 0,
               "blender_city: 1024x512 RGB float DWAB decodes%s%s", code ? ": " : "", code ? d.err.message : "")) {
        size_t nonfinite = 0;
        for (size_t i = 0; i < (size_t)1024 * 512 * 4; i++)
            nonfinite += !isfinite(d.rgba[i]);
        tap_ok(nonfinite == 0 && half_mismatches(&d) == 0,
               "blender_city: finite, RGBA16F is its floats rounded to nearest even");
    }
    decoded_free(&d);
    blob_free(&b);

    b = read_data("blender_street_960x540_singlelayer.exr");
    code = decode_both(&b, NULL, &d);
    if (tap_ok(code == HP_OK && d.info.width == 960 && d.info.height == 540 && d.info.has_depth &&
                   d.info.has_alpha && strcmp(d.info.depth_channel, "Z") == 0 && strcmp(d.info.compression, "zip") == 0,
               "blender_street: 960x540 RGBA half + Z float ZIP decodes with depth%s%s", code ? ": " : "",
               code ? d.err.message : "")) {
        float zmin = INFINITY, zmax = 0;
        size_t sky = 0, not_sky_value = 0;
        for (size_t i = 0; i < (size_t)960 * 540; i++) {
            float z = d.depth[i];
            if (z >= 1e9f) {
                sky++;
                not_sky_value += z != 1e10f;
            } else {
                zmin = fminf(zmin, z), zmax = fmaxf(zmax, z);
            }
        }
        tap_ok(sky == d.info.depth_background && sky == 21369 && not_sky_value == 0 && d.info.depth_nonfinite == 0,
               "blender_street: %zu sky samples of exactly 1e10 reported as background", sky);
        tap_ok(zmin > 0.56f && zmin < 0.58f && zmax <= 30.0f && zmax > 29.0f,
               "blender_street: geometry depth from %g m to %g m (README: 0.568 to 30)", zmin, zmax);
    }
    decoded_free(&d);
    blob_free(&b);
}

/* --- Damage ---------------------------------------------------------------------------------------- */

/* Probe and decode; HP_OK or an error with a message, never anything else. */
static bool survives(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_code *code_out)
{
    hp_image_info info;
    hp_err err = {0};
    hp_code code = hp_image_probe(bytes, len, opt, &info, &err);
    if (code == HP_OK) {
        size_t px = (size_t)info.width * info.height;
        float *rgba = malloc(px * 16), *depth = info.has_depth ? malloc(px * 4) : NULL;
        code = hp_image_decode(bytes, len, opt, &info, rgba, HP_LAYOUT_RGBA32F, depth, &err);
        free(rgba);
        free(depth);
    }
    *code_out = code;
    return code == HP_OK || (err.message[0] && (code == HP_ERR_INVALID_ARGUMENT || code == HP_ERR_TOO_LARGE ||
                                                code == HP_ERR_UNSUPPORTED_FORMAT || code == HP_ERR_UNUSABLE ||
                                                code == HP_ERR_OUT_OF_MEMORY));
}

static void test_truncated(const char *what, const blob *b)
{
    size_t lengths[] = {0, 1, 3, 4, 8, 16, 40, 100, 300, b->len / 4, b->len / 2, b->len - 100, b->len - 1};
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        size_t len = lengths[i];
        if (len >= b->len)
            continue;
        uint8_t *copy = malloc(len ? len : 1); /* its own allocation: valgrind sees any read past it */
        memcpy(copy, b->data, len);
        hp_code code;
        bool ok = survives(copy, len, NULL, &code);
        tap_ok(ok && code != HP_OK, "%s cut to %zu of %zu bytes: %s", what, len, b->len, hp_code_name(code));
        free(copy);
    }
}

static void test_flips(const char *what, const blob *b, size_t region, int trials, uint64_t seed)
{
    /* small limits: a flipped size must not make the test allocate gigabytes */
    hp_decode_options opt = {.max_width = 4096, .max_height = 4096, .max_pixels = 1u << 20};
    rng_state = seed;
    int rejected = 0, accepted = 0, broken = 0;
    uint8_t *copy = malloc(b->len);
    for (int t = 0; t < trials; t++) {
        memcpy(copy, b->data, b->len);
        int flips = 1 + (int)(rng_next() % 4);
        for (int k = 0; k < flips; k++)
            copy[rng_next() % region] ^= (uint8_t)(1 + rng_next() % 255);
        hp_code code;
        if (!survives(copy, b->len, &opt, &code))
            broken++;
        else if (code == HP_OK)
            accepted++;
        else
            rejected++;
    }
    free(copy);
    tap_ok(broken == 0, "%s with bytes flipped in the first %zu bytes, %d times: %d refused with a message, %d still "
           "decode, 0 crashes", what, region, trials, rejected, accepted);
}

static void test_damage(void)
{
    blob park_exr = read_data("pmndrs_park.exr"), park_hdr = read_data("pmndrs_park.hdr"),
         park_pfm = read_data("pmndrs_park.pfm");
    test_truncated("park .exr", &park_exr);
    test_truncated("park .hdr", &park_hdr);
    test_truncated("park .pfm", &park_pfm);

    frame f;
    make_frame(&f, FRAME_RGB_FLOAT_Z);
    static const int comps[] = {EXR_COMPRESSION_ZIP, EXR_COMPRESSION_PIZ, EXR_COMPRESSION_RLE, EXR_COMPRESSION_PXR24,
                                EXR_COMPRESSION_B44, EXR_COMPRESSION_NONE};
    for (size_t i = 0; i < sizeof(comps) / sizeof(comps[0]); i++) {
        test_exr_spec spec = frame_spec(&f, comps[i], i % 2 ? 16 : 0);
        blob b = {0};
        if (!write_exr(&spec, &b))
            continue;
        char what[64];
        snprintf(what, sizeof(what), "EXR %s%s", compression_names[comps[i]], i % 2 ? " tiled" : "");
        if (i < 2)
            test_truncated(what, &b);
        test_flips(what, &b, b.len < 400 ? b.len : 400, 300, 11 + i);
        snprintf(what + strlen(what), sizeof(what) - strlen(what), " (body)");
        test_flips(what, &b, b.len, 200, 101 + i);
        blob_free(&b);
    }
    frame_free(&f);

    test_flips("park .exr", &park_exr, 700, 300, 7);
    test_flips("park .hdr", &park_hdr, 80, 300, 8);
    test_flips("park .hdr (body)", &park_hdr, park_hdr.len, 200, 9);
    test_flips("park .pfm", &park_pfm, 20, 300, 10);
    blob_free(&park_exr);
    blob_free(&park_hdr);
    blob_free(&park_pfm);
}

/* --- Fast paths against the library's own (api/codecs/image_exr.c) --------------------------------------- */

/* The decoder converts straight from each decompressed chunk and inflates ZIP with libdeflate;
 * HP_EXR_GENERIC_DECODE=1 makes it use the library's zlib and unpack instead. Both must give the same
 * bytes for every compression, channel type, layout and size. */
static void use_library_decode(bool on)
{
    if (on)
        setenv("HP_EXR_GENERIC_DECODE", "1", 1);
    else
        unsetenv("HP_EXR_GENERIC_DECODE");
}

/* Mostly smooth values (so that the compressors have something to do), and every seventh sample random
 * bits: NaNs with payloads, infinities, subnormals, -0, huge uints. */
static void frame_add_bits(frame *f, const char *name, int type, int k)
{
    int c = frame_channel(f, name, type);
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++) {
            size_t i = (size_t)y * f->width + x;
            bool noise = rng_next() % 7 == 0;
            uint32_t bits = (uint32_t)rng_next();
            float v = smooth(x, y, k, true);
            if (type == EXR_PIXEL_HALF) {
                uint16_t h = noise ? (uint16_t)bits : hp_float_to_half(v);
                ((uint16_t *)f->data[c])[i] = h;
                f->expect[c][i] = hp_half_to_float(h);
            } else if (type == EXR_PIXEL_UINT) {
                uint32_t u = noise ? bits : (uint32_t)(v * 1000.0f);
                ((uint32_t *)f->data[c])[i] = u;
                f->expect[c][i] = (float)u;
            } else {
                if (noise)
                    memcpy(&v, &bits, 4);
                ((float *)f->data[c])[i] = v;
                f->expect[c][i] = v;
            }
        }
    f->channels[c] = (test_exr_channel){f->names[c], type, f->data[c]};
}

typedef enum agreement { DIFFERENT, SAME_PIXELS, SAME_REFUSAL } agreement;

/* Decoded with both paths (RGBA32F with depth, then RGBA16F): the same bytes and depth counts, or the same
 * refusal; why says what differs. */
static agreement same_both_ways(const blob *b, const hp_decode_options *opt, char *why, size_t len)
{
    decoded fast, lib;
    hp_code fast_code = decode_both(b, opt, &fast);
    use_library_decode(true);
    hp_code lib_code = decode_both(b, opt, &lib);
    use_library_decode(false);
    bool ok = fast_code == HP_OK && lib_code == HP_OK;
    agreement same = DIFFERENT;
    if (!ok) {
        if (fast_code == lib_code && strcmp(fast.err.message, lib.err.message) == 0)
            same = SAME_REFUSAL;
        snprintf(why, len, "fast: %.200s; library: %.200s", fast_code ? fast.err.message : "ok",
                 lib_code ? lib.err.message : "ok");
    } else {
        size_t px = (size_t)fast.info.width * fast.info.height, rgba32 = 0, rgba16 = 0, depth = 0;
        for (size_t i = 0; i < px * 4; i++) {
            rgba32 += memcmp(&fast.rgba[i], &lib.rgba[i], 4) != 0;
            rgba16 += fast.half[i] != lib.half[i];
        }
        for (size_t i = 0; fast.info.has_depth && i < px; i++)
            depth += memcmp(&fast.depth[i], &lib.depth[i], 4) != 0;
        bool counts = fast.info.depth_background == lib.info.depth_background &&
                      fast.info.depth_nonfinite == lib.info.depth_nonfinite;
        same = rgba32 == 0 && rgba16 == 0 && depth == 0 && counts ? SAME_PIXELS : DIFFERENT;
        snprintf(why, len, "%zu RGBA32F, %zu RGBA16F, %zu depth values differ; depth counts %llu/%llu %s %llu/%llu",
                 rgba32, rgba16, depth, (unsigned long long)fast.info.depth_background,
                 (unsigned long long)fast.info.depth_nonfinite, counts ? "=" : "!=",
                 (unsigned long long)lib.info.depth_background, (unsigned long long)lib.info.depth_nonfinite);
    }
    decoded_free(&fast);
    decoded_free(&lib);
    return same;
}

typedef struct channel_def {
    const char *name;
    int type;
} channel_def;

typedef struct channel_set {
    const char *what;
    channel_def channels[8];
} channel_set;

/* Unused channels between the used ones ("N.X", "a.extra"), so each used channel lies at an offset in
 * the line; the writer stores them in name order (A, B, G, N.X, R, Y, Z, a.extra). */
static const channel_set channel_sets[] = {
    {"R,G,B,A half + N.X", {{"R", EXR_PIXEL_HALF}, {"G", EXR_PIXEL_HALF}, {"B", EXR_PIXEL_HALF},
                            {"A", EXR_PIXEL_HALF}, {"N.X", EXR_PIXEL_HALF}}},
    {"R,G,B half", {{"R", EXR_PIXEL_HALF}, {"G", EXR_PIXEL_HALF}, {"B", EXR_PIXEL_HALF}}},
    {"R,G,B float + Z float", {{"R", EXR_PIXEL_FLOAT}, {"G", EXR_PIXEL_FLOAT}, {"B", EXR_PIXEL_FLOAT},
                               {"Z", EXR_PIXEL_FLOAT}}},
    {"R,G,B,A uint + Z half", {{"R", EXR_PIXEL_UINT}, {"G", EXR_PIXEL_UINT}, {"B", EXR_PIXEL_UINT},
                               {"A", EXR_PIXEL_UINT}, {"Z", EXR_PIXEL_HALF}}},
    {"grey Y half + A half", {{"Y", EXR_PIXEL_HALF}, {"A", EXR_PIXEL_HALF}}},
    {"grey Y float + Z uint", {{"Y", EXR_PIXEL_FLOAT}, {"Z", EXR_PIXEL_UINT}}},
    {"R half, G float, B uint, A float, N.X float, Z float, a.extra half",
     {{"R", EXR_PIXEL_HALF}, {"G", EXR_PIXEL_FLOAT}, {"B", EXR_PIXEL_UINT}, {"A", EXR_PIXEL_FLOAT},
      {"N.X", EXR_PIXEL_FLOAT}, {"Z", EXR_PIXEL_FLOAT}, {"a.extra", EXR_PIXEL_HALF}}},
};
enum { MIXED_SET = 6 };

/* Sizes that leave partial chunks and tiles: one column, one row, one pixel, tiles that do not divide. */
static const struct geometry {
    int width, height, tile;
} geometries[] = {{70, 45, 0}, {1, 37, 0}, {33, 1, 0}, {1, 1, 0}, {70, 45, 16}, {13, 9, 7}, {1, 37, 5}};

static void make_set_frame(frame *f, const channel_set *set, int width, int height)
{
    memset(f, 0, sizeof(*f));
    f->width = width, f->height = height;
    for (int c = 0; c < 8 && set->channels[c].name; c++)
        frame_add_bits(f, set->channels[c].name, set->channels[c].type, c);
}

/* Every compression the core decodes x channel sets x sizes, and the channel options on the mixed set:
 * the fast path gives the library's bytes. OpenEXR 3.1.5 writes small B44 chunks (a 1-pixel column, a
 * 6x2 edge tile) larger than their pixels, padded to its 4x4 blocks, and then refuses to read them back:
 * at the small sizes both paths may refuse B44 alike; 70x45 must decode. */
static void test_fast_path_matches_library(void)
{
    hp_decode_options swapped = HP_DECODE_OPTIONS_DEFAULTS, grey = HP_DECODE_OPTIONS_DEFAULTS;
    swapped.channel_r = "B", swapped.channel_g = "R", swapped.channel_b = "G", swapped.channel_a = "N.X";
    swapped.depth = "a.extra";
    grey.channel_r = grey.channel_g = grey.channel_b = "a.extra", grey.channel_a = "G";
    const struct {
        const char *what;
        const hp_decode_options *opt;
    } variants[] = {{"channel_r=B, g=R, b=G, a=N.X, depth=a.extra", &swapped},
                    {"grey channel_r=g=b=a.extra, a=G", &grey}};
    enum { SETS = sizeof(channel_sets) / sizeof(channel_sets[0]), GEOMETRIES = sizeof(geometries) / sizeof(geometries[0]) };
    for (int comp = EXR_COMPRESSION_NONE; comp < EXR_COMPRESSION_DWAA; comp++) {
        for (int v = 0; v < SETS + 2; v++) {
            int set = v < SETS ? v : MIXED_SET;
            const hp_decode_options *opt = v < SETS ? NULL : variants[v - SETS].opt;
            const char *what = v < SETS ? channel_sets[set].what : variants[v - SETS].what;
            rng_state = 1000 + (uint64_t)comp * 100 + (uint64_t)v;
            char why[600] = "";
            int failed = 0, refused = 0;
            bool b44 = comp == EXR_COMPRESSION_B44 || comp == EXR_COMPRESSION_B44A;
            for (int g = 0; g < GEOMETRIES; g++) {
                frame f;
                make_set_frame(&f, &channel_sets[set], geometries[g].width, geometries[g].height);
                test_exr_spec spec = frame_spec(&f, comp, geometries[g].tile);
                blob b = {0};
                char this_why[480];
                bool ok = write_exr(&spec, &b);
                if (!ok)
                    snprintf(this_why, sizeof(this_why), "not written");
                else {
                    agreement same = same_both_ways(&b, opt, this_why, sizeof(this_why));
                    refused += same == SAME_REFUSAL;
                    ok = same == SAME_PIXELS || (same == SAME_REFUSAL && b44 && geometries[g].width != 70);
                }
                if (!ok && !failed++)
                    snprintf(why, sizeof(why), " (first at %dx%d%s: %s)", geometries[g].width, geometries[g].height,
                             geometries[g].tile ? " tiled" : "", this_why);
                blob_free(&b);
                frame_free(&f);
            }
            tap_ok(failed == 0, "EXR %s, %s: the fast path gives the library's bytes at %d sizes (%d refused "
                   "alike)%s", compression_names[comp], what, GEOMETRIES - refused, refused, why);
        }
    }
}

/* The file as the library sees it, for the chunk information of part 0. */
static int64_t blob_read(exr_const_context_t ctxt, void *userdata, void *buffer, uint64_t sz, uint64_t offset,
                         exr_stream_error_func_ptr_t error_cb)
{
    (void)ctxt;
    (void)error_cb;
    const blob *b = userdata;
    if (offset >= b->len)
        return 0;
    size_t n = b->len - (size_t)offset < sz ? b->len - (size_t)offset : (size_t)sz;
    memcpy(buffer, b->data + offset, n);
    return (int64_t)n;
}

static int64_t blob_size(exr_const_context_t ctxt, void *userdata)
{
    (void)ctxt;
    return (int64_t)((const blob *)userdata)->len;
}

/* Scanline chunk `index` of part 0 (its data_offset, packed_size, unpacked_size); *count gets the number
 * of chunks. */
static bool scanline_chunk(const blob *b, int index, exr_chunk_info_t *ci, int *count)
{
    exr_context_initializer_t init = EXR_DEFAULT_CONTEXT_INITIALIZER;
    init.user_data = (void *)b;
    init.read_fn = blob_read;
    init.size_fn = blob_size;
    exr_context_t ctx = NULL;
    exr_attr_box2i_t dw;
    int32_t lines = 0;
    bool ok = exr_start_read(&ctx, "test.exr", &init) == EXR_ERR_SUCCESS &&
              exr_get_chunk_count(ctx, 0, count) == EXR_ERR_SUCCESS &&
              exr_get_data_window(ctx, 0, &dw) == EXR_ERR_SUCCESS &&
              exr_get_scanlines_per_chunk(ctx, 0, &lines) == EXR_ERR_SUCCESS && index < *count &&
              exr_read_scanline_chunk_info(ctx, 0, dw.min.y + index * lines, ci) == EXR_ERR_SUCCESS;
    if (ctx)
        exr_finish(&ctx);
    return ok;
}

/* The lossless compressions keep half bits exactly, NaN payloads included, in RGBA16F; ZIP chunks too
 * random to deflate are stored as they are (packed size = unpacked size) and read as such. */
static void test_fast_path_half_bits(void)
{
    static const char *const rgba[4] = {"R", "G", "B", "A"};
    static const int lossless[] = {EXR_COMPRESSION_NONE, EXR_COMPRESSION_RLE, EXR_COMPRESSION_ZIPS,
                                   EXR_COMPRESSION_ZIP, EXR_COMPRESSION_PIZ, EXR_COMPRESSION_PXR24};
    for (size_t i = 0; i < sizeof(lossless) / sizeof(lossless[0]); i++) {
        rng_state = 77 + i;
        frame f;
        make_set_frame(&f, &channel_sets[0], 70, 45);
        test_exr_spec spec = frame_spec(&f, lossless[i], 0);
        blob b = {0};
        decoded d = {0};
        size_t bad = 0;
        hp_code code = write_exr(&spec, &b) ? decode_both(&b, NULL, &d) : HP_ERR_INTERNAL;
        for (int s = 0; code == HP_OK && s < 4; s++) {
            const uint16_t *written = f.data[frame_find(&f, rgba[s])];
            for (size_t p = 0; p < (size_t)70 * 45; p++)
                bad += d.half[p * 4 + s] != written[p];
        }
        tap_ok(code == HP_OK && bad == 0, "EXR %s: RGBA16F holds the file's half bits exactly (%zu differ)%s%s",
               compression_names[lossless[i]], bad, code ? ": " : "", code ? d.err.message : "");
        decoded_free(&d);
        blob_free(&b);
        frame_free(&f);
    }

    /* every sample random: deflate cannot shrink the chunks */
    frame f = {.width = 64, .height = 40};
    rng_state = 5;
    for (int c = 0; c < 3; c++) {
        int k = f.count++;
        snprintf(f.names[k], sizeof(f.names[k]), "%s", rgba[c]);
        f.data[k] = malloc((size_t)64 * 40 * 2);
        for (size_t p = 0; p < (size_t)64 * 40; p++)
            ((uint16_t *)f.data[k])[p] = (uint16_t)rng_next();
        f.channels[k] = (test_exr_channel){f.names[k], EXR_PIXEL_HALF, f.data[k]};
    }
    test_exr_spec spec = frame_spec(&f, EXR_COMPRESSION_ZIP, 0);
    blob b = {0};
    if (write_exr(&spec, &b)) {
        int raw = 0, count = 0;
        exr_chunk_info_t ci;
        for (int i = 0; scanline_chunk(&b, i, &ci, &count); i++)
            raw += ci.packed_size == ci.unpacked_size;
        decoded d;
        hp_code code = decode_both(&b, NULL, &d);
        size_t bad = 0;
        for (int s = 0; code == HP_OK && s < 3; s++)
            for (size_t p = 0; p < (size_t)64 * 40; p++)
                bad += d.half[p * 4 + s] != ((const uint16_t *)f.data[s])[p];
        tap_ok(code == HP_OK && raw > 0 && bad == 0,
               "EXR ZIP of random halves: %d of %d chunks stored uncompressed, decoded bit for bit (%zu differ)%s%s",
               raw, count, bad, code ? ": " : "", code ? d.err.message : "");
        decoded_free(&d);
        blob_free(&b);
    }
    frame_free(&f);
}

/* A zlib stream of n zero bytes, made with libdeflate (which the decoder links): *len gets its size. */
static uint8_t *zlib_of_zeros(size_t n, size_t *len)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    uint8_t *zeros = calloc(1, n), *out = malloc(n + 64);
    *len = c && zeros && out ? libdeflate_zlib_compress(c, zeros, n, out, n + 64) : 0;
    if (c)
        libdeflate_free_compressor(c);
    free(zeros);
    return out;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Decodes a damaged copy: the error must name the chunk and say what is wrong, and nothing may crash. */
static void expect_chunk_refused(const blob *damaged, const char *what, const char *chunk, const char *reason)
{
    hp_code code;
    bool survived = survives(damaged->data, damaged->len, NULL, &code);
    hp_image_info info;
    hp_err err = {0};
    float *rgba = NULL;
    if (hp_image_probe(damaged->data, damaged->len, NULL, &info, &err) == HP_OK &&
        (rgba = malloc((size_t)info.width * info.height * 16)))
        code = hp_image_decode(damaged->data, damaged->len, NULL, &info, rgba, HP_LAYOUT_RGBA32F, NULL, &err);
    free(rgba);
    tap_ok(survived && code == HP_ERR_INVALID_ARGUMENT && contains(err.message, chunk) &&
               contains(err.message, reason),
           "%s: %s naming %s and '%s' (%s)", what, hp_code_name(code), chunk, reason, err.message);
}

/* ZIP chunks that do not inflate, or inflate to another size than their pixels', are refused by name. */
static void test_zip_damage(void)
{
    frame f;
    make_frame(&f, FRAME_RGBA_HALF); /* 70x45: ZIP chunks of 16 lines, ZIPS of one */
    static const int comps[] = {EXR_COMPRESSION_ZIP, EXR_COMPRESSION_ZIPS};
    for (size_t i = 0; i < 2; i++) {
        test_exr_spec spec = frame_spec(&f, comps[i], 0);
        blob b = {0};
        exr_chunk_info_t ci;
        int count = 0;
        bool ok = write_exr(&spec, &b) && scanline_chunk(&b, 1, &ci, &count) && ci.packed_size < ci.unpacked_size &&
                  ci.packed_size > 64;
        if (!tap_ok(ok, "EXR %s written for damage: chunk 1 of %d deflated (%llu of %llu bytes)",
                    compression_names[comps[i]], count, ok ? (unsigned long long)ci.packed_size : 0ull,
                    ok ? (unsigned long long)ci.unpacked_size : 0ull)) {
            blob_free(&b);
            continue;
        }
        char what[96], chunk[48];
        snprintf(chunk, sizeof(chunk), "chunk 1 (scanlines %d-", comps[i] == EXR_COMPRESSION_ZIP ? 13 : -2);
        const char *name = compression_names[comps[i]];
        size_t at = (size_t)ci.data_offset, size = (size_t)ci.packed_size;

        blob d = blob_of(b.data, b.len);
        for (size_t k = size / 2; k < size / 2 + 8; k++)
            d.data[at + k] ^= 0x5a;
        snprintf(what, sizeof(what), "EXR %s with bytes flipped in chunk 1's deflate data", name);
        expect_chunk_refused(&d, what, chunk, "does not inflate");
        blob_free(&d);

        d = blob_of(b.data, b.len);
        d.data[at + size - 1] ^= 0x01; /* the Adler-32's last byte */
        snprintf(what, sizeof(what), "EXR %s with chunk 1's checksum altered", name);
        expect_chunk_refused(&d, what, chunk, "checksum");
        blob_free(&d);

        d = blob_of(b.data, b.len);
        put_le32(d.data + at - 4, (uint32_t)(size / 2)); /* the chunk's own size field: the stream cut short */
        snprintf(what, sizeof(what), "EXR %s with chunk 1 cut to half its deflate data", name);
        expect_chunk_refused(&d, what, chunk, "does not inflate");
        blob_free(&d);

        /* valid zlib streams of the wrong size: 40 bytes, and one byte more than the chunk's pixels */
        const size_t sizes[2] = {40, (size_t)ci.unpacked_size + 1};
        const char *const reasons[2] = {"fewer bytes", "more bytes"};
        for (int k = 0; k < 2; k++) {
            size_t len = 0;
            uint8_t *stream = zlib_of_zeros(sizes[k], &len);
            d = blob_of(b.data, b.len);
            if (len && len <= size) {
                memcpy(d.data + at, stream, len);
                put_le32(d.data + at - 4, (uint32_t)len);
            }
            snprintf(what, sizeof(what), "EXR %s with chunk 1 a zlib stream of %zu bytes", name, sizes[k]);
            expect_chunk_refused(&d, what, chunk, reasons[k]);
            blob_free(&d);
            free(stream);
        }
        blob_free(&b);
    }
    frame_free(&f);
}

typedef struct chroma_planes {
    const uint16_t *colour[3]; /* R, G, B */
    const uint16_t *chroma;    /* C: a quarter of the pixels */
    int w;
} chroma_planes;

/* A ZIP chunk is 16 lines: y is its first, and the line stride carries the rest. */
static void aim_chroma_planes(exr_coding_channel_info_t *ch, int y, void *user)
{
    const chroma_planes *p = user;
    bool sub = strcmp(ch->channel_name, "C") == 0;
    int plane = strcmp(ch->channel_name, "R") == 0 ? 0 : strcmp(ch->channel_name, "G") == 0 ? 1 : 2;
    ch->encode_from_ptr = sub ? (const uint8_t *)(p->chroma + (y / 2) * (p->w / 2))
                              : (const uint8_t *)(p->colour[plane] + y * p->w);
    ch->user_pixel_stride = 2;
    ch->user_line_stride = 2 * (sub ? p->w / 2 : p->w);
    ch->user_data_type = EXR_PIXEL_HALF;
    ch->user_bytes_per_element = 2;
}

/* A part with a subsampled channel that is not used keeps the library's unpack (which knows which lines
 * hold it) and decodes as written. */
static void test_subsampled_unused_channel(void)
{
    enum { W = 8, H = 6 };
    uint16_t colour[3][W * H], chroma[(W / 2) * (H / 2)];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < W * H; i++)
            colour[c][i] = hp_float_to_half(0.25f * (float)(c + 1) + 0.01f * (float)i);
    for (int i = 0; i < (W / 2) * (H / 2); i++)
        chroma[i] = hp_float_to_half(-1.0f - (float)i);
    hp_exr_sink s = {0};
    static const char *const names[4] = {"B", "C", "G", "R"}; /* C, between B and G, is 2x2-subsampled */
    static const exr_pixel_type_t types[4] = {EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_HALF};
    static const int sampling[4] = {1, 2, 1, 1};
    chroma_planes planes = {.colour = {colour[0], colour[1], colour[2]}, .chroma = chroma, .w = W};
    bool ok = write_by_hand(&s, W, H, EXR_COMPRESSION_ZIP, 4, names, types, sampling, aim_chroma_planes, &planes);
    blob b = {s.data, s.len};
    if (tap_ok(ok, "EXR with R, G, B and a 2x2-subsampled C written")) {
        decoded d;
        hp_code code = decode_both(&b, NULL, &d);
        size_t bad = 0;
        for (int c = 0; code == HP_OK && c < 3; c++)
            for (int i = 0; i < W * H; i++)
                bad += d.half[i * 4 + c] != colour[c][i] || d.half[i * 4 + 3] != 0x3c00;
        tap_ok(code == HP_OK && bad == 0, "a subsampled channel beside the colour: R, G, B decode as written "
               "(%zu differ)%s%s", bad, code ? ": " : "", code ? d.err.message : "");
        decoded_free(&d);
    }
    blob_free(&b);
}

/* One frame's chunks decoded over threads (hp_decode_options.threads) give the same bytes as one thread:
 * a ZIP frame (34 chunks of 16 lines), a PIZ frame and a DWAA frame (17 chunks of 32 lines: up to four
 * threads, each with a C++ reader of its own), every thread count from 2 to 9. */
/* The street frame's colour as halves, DWAA (17 chunks of 32 lines): a frame the C++ library decodes. */
static blob street_dwaa(void)
{
    blob src = read_data("blender_street_960x540_singlelayer.exr"), out = {0};
#ifdef HP_EXR_DWA_CXX
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_err err = {0};
    uint16_t *px = NULL, *planes = NULL;
    if (src.len && hp_image_probe(src.data, src.len, &opt, &info, &err) == HP_OK &&
        (px = malloc((size_t)info.width * info.height * 8)) && (planes = malloc((size_t)info.width * info.height * 8)) &&
        hp_image_decode(src.data, src.len, &opt, &info, px, HP_LAYOUT_RGBA16F, NULL, &err) == HP_OK) {
        size_t n = (size_t)info.width * info.height;
        for (size_t i = 0; i < n; i++)
            for (int c = 0; c < 4; c++)
                planes[(size_t)c * n + i] = px[i * 4 + c];
        test_exr_channel ch[4] = {{"A", EXR_PIXEL_HALF, planes + 3 * n}, {"B", EXR_PIXEL_HALF, planes + 2 * n},
                                  {"G", EXR_PIXEL_HALF, planes + n}, {"R", EXR_PIXEL_HALF, planes}};
        test_exr_spec spec = {.width = (int)info.width, .height = (int)info.height, .display_w = (int)info.width,
                              .display_h = (int)info.height, .compression = EXR_COMPRESSION_DWAA, .channels = ch,
                              .channel_count = 4};
        if (!write_exr(&spec, &out))
            out = (blob){0};
    }
    free(px);
    free(planes);
#endif
    blob_free(&src);
    return out;
}

static void test_threaded_decode(void)
{
    static const char *const files[] = {"blender_street_960x540_singlelayer.exr", "psychtoolbox_Desk.exr",
                                        "the street frame written DWAA"};
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
#ifndef HP_EXR_DWA_CXX
        if (f == 2) /* the core decodes DWAA itself from OpenEXR 3.2: no reader of the C++ library's */
            continue;
#endif
        blob b = f == 2 ? street_dwaa() : read_data(files[f]);
        hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
        hp_image_info info;
        hp_err err = {0};
        bool ok = b.len && hp_image_probe(b.data, b.len, &opt, &info, &err) == HP_OK;
        size_t bytes = ok ? (size_t)info.width * info.height * 16 : 0;
        float *one = ok ? malloc(bytes) : NULL, *many = ok ? malloc(bytes) : NULL;
        float *depth1 = ok ? malloc(bytes / 4) : NULL, *depthn = ok ? malloc(bytes / 4) : NULL;
        ok = ok && one && many && depth1 && depthn &&
             hp_image_decode(b.data, b.len, &opt, &info, one, HP_LAYOUT_RGBA32F, depth1, &err) == HP_OK;
        int differing = 0;
        for (uint32_t t = 2; ok && t <= 9; t++) {
            opt.threads = t;
            memset(many, 0xff, bytes);
            ok = hp_image_decode(b.data, b.len, &opt, &info, many, HP_LAYOUT_RGBA32F, depthn, &err) == HP_OK;
            differing += ok && (memcmp(one, many, bytes) != 0 ||
                                (info.has_depth && memcmp(depth1, depthn, bytes / 4) != 0));
        }
        tap_ok(ok && differing == 0, "%s (%u chunks) decoded on 2..9 threads equals one thread (%d differ)%s%s",
               files[f], ok ? info.chunk_count : 0, differing, ok ? "" : ": ", ok ? "" : err.message);
        free(one);
        free(many);
        free(depth1);
        free(depthn);
        blob_free(&b);
    }
}

/* Frames decoded at once share the threads they ask for (api/codecs/image_exr.c frames_decoding): six decodes of
 * one ZIP frame on six threads, each asking for 8 threads, all give the bytes of one decode alone, and
 * none counts as decoding after. */
typedef struct shared_decode {
    const blob *b;
    hp_image_info info;
    float *out;
    hp_code code;
} shared_decode;

static void *shared_decode_run(void *arg)
{
    shared_decode *d = arg;
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    opt.threads = 8;
    hp_err err = {0};
    d->code = hp_image_decode(d->b->data, d->b->len, &opt, &d->info, d->out, HP_LAYOUT_RGBA32F, NULL, &err);
    return NULL;
}

static void test_decodes_at_once(void)
{
    blob b = read_data("blender_street_960x540_singlelayer.exr");
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_err err = {0};
    bool ok = b.len && hp_image_probe(b.data, b.len, &opt, &info, &err) == HP_OK;
    size_t bytes = ok ? (size_t)info.width * info.height * 16 : 0;
    float *one = ok ? malloc(bytes) : NULL;
    ok = ok && one && hp_image_decode(b.data, b.len, &opt, &info, one, HP_LAYOUT_RGBA32F, NULL, &err) == HP_OK;
    enum { AT_ONCE = 6 };
    shared_decode d[AT_ONCE];
    pthread_t tid[AT_ONCE];
    bool started[AT_ONCE] = {false};
    for (int i = 0; ok && i < AT_ONCE; i++) {
        d[i] = (shared_decode){.b = &b, .info = info, .out = malloc(bytes), .code = HP_ERR_INTERNAL};
        started[i] = d[i].out && pthread_create(&tid[i], NULL, shared_decode_run, &d[i]) == 0;
    }
    int same = 0;
    for (int i = 0; ok && i < AT_ONCE; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        same += started[i] && d[i].code == HP_OK && memcmp(d[i].out, one, bytes) == 0;
        free(d[i].out);
    }
    tap_ok(ok && same == AT_ONCE, "%d decodes of a ZIP frame at once, sharing their threads, equal one alone (%d do)%s%s",
           AT_ONCE, same, ok ? "" : ": ", ok ? "" : err.message);
    tap_ok(hp_image_frames_decoding() == 0, "after them no frame counts as decoding (%u do)",
           hp_image_frames_decoding());
    free(one);
    blob_free(&b);
}

/* A body still arriving (common/arrival.h): a thread hands the bytes over in pieces with pauses while
 * the decoder, on 4 threads taking chunks in file order, waits for each range it reads. */
typedef struct feeder {
    hp_arrival *arrival;
    size_t len, stop_at; /* bytes to hand over; stop_at < len: the body is cut off there */
} feeder;

static void *feed(void *arg)
{
    feeder *f = arg;
    size_t piece = f->len / 23 + 1;
    for (size_t at = 0; at < f->stop_at;) {
        at = at + piece < f->stop_at ? at + piece : f->stop_at;
        hp_arrival_add(f->arrival, at);
        struct timespec pause = {0, 2000000}; /* 2 ms: the decoder catches up and waits again */
        nanosleep(&pause, NULL);
    }
    hp_arrival_end(f->arrival);
    return NULL;
}

static bool decode_arriving(const blob *b, size_t stop_at, float *out, hp_err *err)
{
    hp_arrival arrival;
    hp_arrival_init(&arrival);
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    opt.threads = 4;
    opt.arrival = &arrival;
    feeder f = {.arrival = &arrival, .len = b->len, .stop_at = stop_at};
    pthread_t tid;
    bool started = pthread_create(&tid, NULL, feed, &f) == 0;
    hp_image_info info;
    bool ok = started && hp_image_probe(b->data, b->len, &opt, &info, err) == HP_OK &&
              hp_image_decode(b->data, b->len, &opt, &info, out, HP_LAYOUT_RGBA32F, NULL, err) == HP_OK;
    if (started)
        pthread_join(tid, NULL);
    hp_arrival_destroy(&arrival);
    return ok;
}

static void test_arriving_decode(void)
{
    static const char *const files[] = {"blender_street_960x540_singlelayer.exr", "psychtoolbox_Desk.exr"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        blob b = read_data(files[i]);
        hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
        hp_image_info info;
        hp_err err = {0};
        bool ok = b.len && hp_image_probe(b.data, b.len, &opt, &info, &err) == HP_OK;
        size_t bytes = ok ? (size_t)info.width * info.height * 16 : 0;
        float *whole = ok ? malloc(bytes) : NULL, *arriving = ok ? malloc(bytes) : NULL;
        ok = ok && whole && arriving &&
             hp_image_decode(b.data, b.len, &opt, &info, whole, HP_LAYOUT_RGBA32F, NULL, &err) == HP_OK;
        if (ok)
            memset(arriving, 0xff, bytes);
        bool same = ok && decode_arriving(&b, b.len, arriving, &err) && memcmp(whole, arriving, bytes) == 0;
        tap_ok(same, "%s arriving in 23 pieces, decoded as it comes on 4 threads: the frame decoded whole%s%s", files[i], same ? "" : ": ", same ? "" : err.message);
        hp_err cut = {0};
        bool refused = ok && !decode_arriving(&b, b.len * 2 / 3, arriving, &cut) && cut.message[0];
        tap_ok(refused, "%s cut off at two thirds while decoding: an error, not a hang (%s)", files[i], cut.message);
        free(whole);
        free(arriving);
        blob_free(&b);
    }
}

/* --- Decompression bombs and attribute sizes (issue 21, items 5 and 8) ----------------------------- */

/* The value of attribute name (of type) in an EXR header: its 4-byte size field, or NULL. */
static uint8_t *exr_attr_size(const blob *b, const char *name, const char *type)
{
    char key[128];
    int n = snprintf(key, sizeof(key), "%s%c%s", name, '\0', type) + 1; /* both NULs */
    uint8_t *at = memmem(b->data, b->len, key, (size_t)n);
    return at && at + n + 4 <= b->data + b->len ? at + n : NULL;
}

/* An old-style-RLE Radiance file is refused from its header when it declares more pixels than its bytes
 * can hold in the format's densest honest coding (127/8 pixels a byte); a new-style file at that density
 * still decodes. */
static void test_rgbe_bomb(void)
{
    /* The issue's file: 8192 rows of one pixel and two runs (255 + (31 << 8) = 8191 more) in 12 bytes. */
    static const char header[] = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 8192 +X 8192\n";
    size_t h = sizeof(header) - 1, rows = 8192;
    blob bomb = {malloc(h + rows * 12), h + rows * 12};
    memcpy(bomb.data, header, h);
    static const uint8_t row[12] = {100, 50, 25, 130, 1, 1, 1, 0xff, 1, 1, 1, 0x1f};
    for (size_t y = 0; y < rows; y++)
        memcpy(bomb.data + h + y * 12, row, 12);
    hp_image_info info;
    hp_err err = {0};
    hp_code code = hp_image_probe(bomb.data, bomb.len, NULL, &info, &err);
    tap_ok(code == HP_ERR_TOO_LARGE && contains(err.message, "98355-byte") && contains(err.message, "8192x8192") &&
               contains(err.message, "15.875"),
           "RGBE old-style-RLE bomb (98 KB declaring 8192x8192): HP_ERR_TOO_LARGE from the probe (%s)", err.message);
    if (code == HP_ERR_TOO_LARGE) { /* a destination of one pixel: a decode that began would write past it */
        float one[4];
        code = hp_image_decode(bomb.data, bomb.len, NULL, &info, one, HP_LAYOUT_RGBA32F, NULL, &err);
        tap_ok(code == HP_ERR_TOO_LARGE, "RGBE bomb: the decode refuses it too, before writing a pixel");
    } else {
        tap_ok(false, "RGBE bomb: the decode refuses it too (not tried: the probe accepted it)");
    }
    blob_free(&bomb);

    /* New-style RLE at its densest: 1016 = 8 * 127 wide, every component 8 runs of 127 (68 bytes a row,
     * 14.9 pixels a byte). */
    enum { W = 1016, H = 64 };
    uint8_t line[4 + 4 * 8 * 2];
    size_t n = 0;
    line[n++] = 2, line[n++] = 2, line[n++] = W >> 8, line[n++] = W & 0xff;
    static const uint8_t colour[4] = {200, 100, 50, 129};
    for (int comp = 0; comp < 4; comp++)
        for (int run = 0; run < 8; run++)
            line[n++] = 128 + 127, line[n++] = colour[comp];
    uint8_t *body = malloc(H * n);
    for (int y = 0; y < H; y++)
        memcpy(body + (size_t)y * n, line, n);
    blob dense = rgbe_file("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 64 +X 1016\n", body, H * n);
    free(body);
    decoded d;
    code = decode_rgbe(&dense, &d);
    bool ok = code == HP_OK && d.info.width == W && d.info.height == H;
    for (size_t i = 0; ok && i < (size_t)W * H; i++)
        ok = d.rgba[i * 4] == rgbe_value(200, 129) && d.rgba[i * 4 + 2] == rgbe_value(50, 129);
    tap_ok(ok, "RGBE new-style RLE at its densest (runs of 127, %zu bytes for 1016x64) decodes%s%s", dense.len,
           code ? ": " : "", code ? d.err.message : "");
    decoded_free(&d);
    blob_free(&dense);
}

/* A constant frame: every channel the same plane of value v. */
static bool write_constant_exr(int width, int height, int type, int channels, int compression, float v, blob *out)
{
    static const char *const names[] = {"R", "G", "B", "A"};
    size_t n = (size_t)width * height, size = hp_exr_type_size(type);
    uint8_t *plane = malloc(n * size);
    uint16_t h = hp_float_to_half(v);
    for (size_t i = 0; i < n; i++)
        memcpy(plane + i * size, type == EXR_PIXEL_HALF ? (const void *)&h : (const void *)&v, size);
    test_exr_channel ch[4];
    for (int c = 0; c < channels; c++)
        ch[c] = (test_exr_channel){names[c], type, plane};
    test_exr_spec spec = {.width = width, .height = height, .display_w = width, .display_h = height,
                          .compression = compression, .channels = ch, .channel_count = channels};
    bool ok = write_exr(&spec, out);
    free(plane);
    return ok;
}

/* An EXR declaring more pixels than its compression can fit in its bytes is refused from the header;
 * constant frames, the most compressible there are, pass in every compression. */
static void test_exr_bomb(void)
{
    blob b = {0};
    if (write_constant_exr(16, 16, EXR_PIXEL_HALF, 3, EXR_COMPRESSION_ZIP, 0.5f, &b)) {
        /* the same header declaring 16384x16384 (2^28 pixels, within the default limits) */
        uint8_t *windows[2] = {exr_attr_size(&b, "dataWindow", "box2i"), exr_attr_size(&b, "displayWindow", "box2i")};
        for (int i = 0; i < 2; i++) {
            if (!windows[i])
                continue;
            put_le32(windows[i] + 4 + 8, 16383);
            put_le32(windows[i] + 4 + 12, 16383);
        }
        hp_image_info info;
        hp_err err = {0};
        hp_code code = hp_image_probe(b.data, b.len, NULL, &info, &err);
        tap_ok(windows[0] && windows[1] && code == HP_ERR_TOO_LARGE && contains(err.message, "16384x16384") &&
                   contains(err.message, "zlib"),
               "EXR ZIP of %zu bytes declaring 16384x16384: HP_ERR_TOO_LARGE from the header (%s)", b.len,
               err.message);
        blob_free(&b);
    }

    /* A 4K constant RGBA half ZIP frame (937:1) decodes. */
    if (write_constant_exr(3840, 2160, EXR_PIXEL_HALF, 4, EXR_COMPRESSION_ZIP, 0.75f, &b)) {
        hp_image_info info;
        hp_err err = {0};
        uint16_t *px = malloc((size_t)3840 * 2160 * 8);
        hp_code code = hp_image_probe(b.data, b.len, NULL, &info, &err);
        if (code == HP_OK)
            code = hp_image_decode(b.data, b.len, NULL, &info, px, HP_LAYOUT_RGBA16F, NULL, &err);
        tap_ok(code == HP_OK && px[0] == hp_float_to_half(0.75f) && px[(size_t)3840 * 2160 * 4 - 2] == px[0],
               "EXR constant 4K RGBA half ZIP frame (%zu bytes, %.0f:1) decodes%s%s", b.len,
               3840.0 * 2160 * 8 / (double)b.len, code ? ": " : "", code ? err.message : "");
        free(px);
        blob_free(&b);
    }
    /* Every compression at its best: 16384 wide, RGB float (PXR24 and DWA go past zlib's 1032:1 here). */
    for (int c = EXR_COMPRESSION_NONE; c <= EXR_COMPRESSION_DWAB; c++) {
        if (!write_constant_exr(16384, 256, EXR_PIXEL_FLOAT, 3, c, 0.5f, &b))
            continue;
        hp_image_info info;
        hp_err err = {0};
        hp_code code = hp_image_probe(b.data, b.len, NULL, &info, &err);
        tap_ok(code == HP_OK, "EXR constant 16384x256 RGB float %s frame (%.0f:1) passes the probe%s%s",
               compression_names[c], 16384.0 * 256 * 12 / (double)b.len, code ? ": " : "", code ? err.message : "");
        blob_free(&b);
    }
}

#ifdef HP_EXR_DWA_CXX
/* The virtual memory in use now (kB), from /proc/self/status; 0 when unknown. */
static long vm_size_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* The probe and decode of b in a child process whose address space may grow by 1 GiB at most: the
 * hp_code it ended with, or -1 when it crashed. */
static int decode_in_1gib(const blob *b)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit cap = {.rlim_cur = (rlim_t)(vm_size_kb() + (1 << 20)) * 1024};
        cap.rlim_max = cap.rlim_cur;
        decoded d;
        int code = setrlimit(RLIMIT_AS, &cap) == 0 ? (int)decode_both(b, NULL, &d) : 100;
        _exit(code);
    }
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* An attribute whose size runs past the end of the file is refused before the C++ library (DWAA/DWAB on
 * OpenEXR 3.1) reads the header: it would allocate and zero the size it declares, here 1.9 GB. */
static void test_attribute_sizes(void)
{
    frame f;
    make_frame(&f, FRAME_RGBA_HALF);
    static const struct {
        int compression, as_vector;
        const char *name, *type;
    } cases[] = {
        {EXR_COMPRESSION_DWAA, 0, "type", "string"},      /* the issue's file */
        {EXR_COMPRESSION_DWAB, 1, "notes", "stringvector"}, /* the size of one of its strings */
        {EXR_COMPRESSION_ZIP, 0, "comments", "string"},   /* the C core alone reads on past it */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        test_exr_spec spec = frame_spec(&f, cases[i].compression, 0);
        blob b = {0};
        if (!test_write_exr_cxx_attr(&spec, cases[i].name, "hello", cases[i].as_vector, &b.data, &b.len))
            continue;
        uint8_t *size = exr_attr_size(&b, cases[i].name, cases[i].type);
        if (size) /* the attribute's size, or its first string's */
            put_le32(size + (cases[i].as_vector ? 4 : 0), 1900000000u);
        decoded d;
        hp_code code = decode_both(&b, NULL, &d);
        tap_ok(size && code == HP_ERR_INVALID_ARGUMENT && contains(d.err.message, cases[i].name) &&
                   contains(d.err.message, "1900000000"),
               "EXR %s with a %s attribute declaring 1.9 GB: HP_ERR_INVALID_ARGUMENT naming it (%s)",
               compression_names[cases[i].compression], cases[i].type, d.err.message);
        decoded_free(&d);
        if (i == 0) {
            int child = decode_in_1gib(&b);
            tap_ok(child == HP_ERR_INVALID_ARGUMENT, "... the same with the address space capped at 1 GiB more "
                   "than in use: refused, no allocation of the declared size (%s)",
                   child < 0 ? "crashed" : hp_code_name((hp_code)child));
        }
        blob_free(&b);
    }
    frame_free(&f);
}
#endif

/* What a file says its RGB means (issue 17): OpenEXR's chromaticities attribute, Radiance's PRIMARIES=. */
static void test_chromaticities(void)
{
    static const float ap1[8] = {0.713f, 0.293f, 0.165f, 0.830f, 0.128f, 0.044f, 0.32168f, 0.33767f};
    float px[4 * 4] = {0};
    hp_exr_channel ch[3] = {{"R", 2, px}, {"G", 2, px}, {"B", 2, px}};
    hp_exr_spec spec = {.width = 4, .height = 4, .display_w = 4, .display_h = 4, .compression = 0,
                        .channels = ch, .channel_count = 3, .chromaticities = ap1};
    blob b = {0};
    hp_image_info info;
    hp_err err = {0};
    bool written = hp_exr_write_core(&spec, 1, &b.data, &b.len) == 1;
    hp_code code = written ? hp_image_probe(b.data, b.len, NULL, &info, &err) : HP_ERR_INTERNAL;
    hp_colorspace space = HP_COLORSPACE_COUNT;
    bool same = code == HP_OK && info.has_chromaticities && info.chromaticities.red.x == (double)ap1[0] &&
                info.chromaticities.red.y == (double)ap1[1] && info.chromaticities.green.x == (double)ap1[2] &&
                info.chromaticities.blue.y == (double)ap1[5] && info.chromaticities.white.x == (double)ap1[6] &&
                info.chromaticities.white.y == (double)ap1[7];
    tap_ok(same && hp_colorspace_find(&info.chromaticities, &space) && space == HP_COLORSPACE_ACESCG,
           "EXR chromaticities attribute (AP1) read as written, and found as acescg (%s)", err.message);
    blob_free(&b);
    spec.chromaticities = NULL;
    written = hp_exr_write_core(&spec, 1, &b.data, &b.len) == 1;
    code = written ? hp_image_probe(b.data, b.len, NULL, &info, &err) : HP_ERR_INTERNAL;
    tap_ok(code == HP_OK && !info.has_chromaticities, "EXR without the attribute: no chromaticities");
    blob_free(&b);

    static const uint8_t pixel[4] = {128, 128, 128, 129};
    b = rgbe_file("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\nPRIMARIES= 0.708 0.292 0.170 0.797 0.131 0.046 0.3127 0.3290\n"
                  "\n-Y 1 +X 1\n", pixel, sizeof(pixel));
    code = hp_image_probe(b.data, b.len, NULL, &info, &err);
    tap_ok(code == HP_OK && info.has_chromaticities && hp_colorspace_find(&info.chromaticities, &space) &&
               space == HP_COLORSPACE_REC2020 && info.chromaticities.white.y == 0.3290,
           "RGBE PRIMARIES= line read (BT.2020), found as rec2020 (%s)", err.message);
    blob_free(&b);
    b = rgbe_file("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 1 +X 1\n", pixel, sizeof(pixel));
    code = hp_image_probe(b.data, b.len, NULL, &info, &err);
    tap_ok(code == HP_OK && !info.has_chromaticities, "RGBE without PRIMARIES: no chromaticities");
    blob_free(&b);
    static const char *const bad[] = {"PRIMARIES= 0.64 0.33 0.30 0.60 0.15 0.06 0.3127\n",
                                      "PRIMARIES= 0.64 0.33 0.30 0.60 0.15 0.06 0.3127 0.3290 1\n",
                                      "PRIMARIES= red green blue white\n"};
    for (int i = 0; i < 3; i++) {
        char header[256];
        snprintf(header, sizeof(header), "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n%s\n-Y 1 +X 1\n", bad[i]);
        b = rgbe_file(header, pixel, sizeof(pixel));
        hp_err e = {0};
        code = hp_image_probe(b.data, b.len, NULL, &info, &e);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && contains(e.message, "PRIMARIES"),
               "RGBE with a malformed PRIMARIES line (%d): refused naming it (%s)", i, e.message);
        blob_free(&b);
    }
}

#ifdef HP_EXR_DWA_CXX
/* The heap filled with one byte and handed back, in blocks of every size from 16 bytes to 64 KiB, all held
 * at once before they are freed, so that the allocator's caches and bins of each size hold the byte (larger
 * blocks are mapped afresh, zeroed, by glibc). */
static void scribble_heap(unsigned char byte)
{
    enum { BLOCKS = 2304 };
    static unsigned char *held[BLOCKS];
    for (int k = 0; k < BLOCKS; k++) {
        size_t n = k < 2048 ? 16 + (size_t)k * 16 : (size_t)(k - 2048 + 1) * 256;
        if ((held[k] = malloc(n)))
            memset(held[k], byte, n);
    }
    for (int k = 0; k < BLOCKS; k++)
        free(held[k]);
}

/* tests/fuzz/fuzz_exr found a damaged tiled DWAA part (250x8, grey) that OpenEXR 3.1's C++ library decoded
 * "successfully" from buffers it had allocated and never written: the image was whatever the heap held
 * before. Decoded twice with the heap filled differently before each, the frame must be the same
 * (api/codecs/image_exr_dwa.cpp makes the library's allocations zeroed). */
static void test_dwa_fresh_memory(void)
{
    blob b = read_data("../fuzz/regressions/exr/dwa_heap_250x8_tiled");
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_err err = {0};
    if (!tap_ok(b.len && hp_image_probe(b.data, b.len, &opt, &info, &err) == HP_OK && info.width == 250 &&
                info.height == 8, "the damaged DWA file of fuzz_exr probes as 250x8 (%s)", err.message)) {
        blob_free(&b);
        return;
    }
    size_t bytes = (size_t)info.width * info.height * hp_pixel_layout_size(HP_LAYOUT_RGBA32F);
    uint8_t *out[2] = {malloc(bytes), malloc(bytes)};
    hp_code code[2] = {HP_ERR_OUT_OF_MEMORY, HP_ERR_OUT_OF_MEMORY};
    for (int k = 0; k < 2 && out[0] && out[1]; k++) {
        memset(out[k], k ? 0xff : 0x00, bytes);
        scribble_heap(k ? 0x5a : 0xa5);
        hp_image_info again = info;
        hp_err e = {0};
        code[k] = hp_image_decode(b.data, b.len, &opt, &again, out[k], HP_LAYOUT_RGBA32F, NULL, &e);
    }
    size_t differ = 0;
    for (size_t i = 0; out[0] && out[1] && i < bytes; i++)
        differ += out[0][i] != out[1][i];
    tap_ok(code[0] == code[1] && differ == 0, "a damaged DWA file decodes the same whatever the heap held before "
           "(codes %d and %d, %zu of %zu bytes differ)", code[0], code[1], differ, bytes);
    free(out[0]);
    free(out[1]);
    blob_free(&b);
}
#endif

int main(void)
{
    blob probe = read_data("pmndrs_park.exr");
    if (!probe.len)
        return tap_bail("test data not found in %s", HP_TEST_DATA);
    blob_free(&probe);

    use_library_decode(false); /* the fast paths are under test, whatever the environment says */
    tap_ok(hp_pixel_layout_size(HP_LAYOUT_RGBA16F) == 8 && hp_pixel_layout_size(HP_LAYOUT_RGBA32F) == 16,
           "layouts: RGBA16F is 8 bytes a pixel, RGBA32F 16");
    test_park();
    test_real_exr();
    test_threaded_decode();
    test_decodes_at_once();
    test_arriving_decode();
    test_written_exr();
    test_layers();
    test_grey_and_refusals();
    test_subsampled_depth();
    test_multipart();
    test_hostile_values();
    test_limits();
    test_unknown();
    test_rgbe();
    test_pfm();
    test_damage();
    test_fast_path_matches_library();
    test_fast_path_half_bits();
    test_zip_damage();
    test_subsampled_unused_channel();
    test_rgbe_bomb();
    test_exr_bomb();
    test_chromaticities();
#ifdef HP_EXR_DWA_CXX
    test_attribute_sizes();
    test_dwa_fresh_memory();
#endif
    return tap_done();
}

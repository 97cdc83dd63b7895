/* PNG filtering and deflate on the GPU (pipeline/png_gpu.h, issue 20) against the CPU.
 *
 * For each image (sizes from 1x1 through 1xN, Nx1 and odd sizes to 512x384; RGB and RGBA; 8 and 16 bits;
 * flat, noise, gradients, a synthetic render, stripes; a real frame, RGB and RGBA; one through a second launch
 * shape whose segments are 1 KiB, so that many segments, stored ones and matches reaching into the segment
 * before are exercised):
 *   (a) the GPU's filtered scanlines equal the CPU reference's (hp_png_cpu_filter: the same filter choice)
 *       byte for byte;
 *   (b) the joined zlib stream inflates with zlib to exactly those bytes, ends where it should, and its
 *       Adler-32 (which zlib checks) equals zlib's adler32 of the reference;
 *   (c) a PNG built around it here (signature, IHDR, IDAT, IEND with their CRCs) decodes with libspng to
 *       exactly the input samples.
 * Also: the default launch shape fitted to devices of fewer invocations or less shared memory (hp_png_gpu_fitted_config).
 * No tolerance anywhere: every result is exact. The validation layer is on and any message fails.
 * The compressed size against zlib level 1 and our CPU coder (api/codecs/deflate_runs.h) on the same filtered
 * bytes is a diagnostic, not a pass/fail. */
#include <math.h>
#include <spng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/codecs/deflate_runs.h"
#include "api/codecs/image.h"
#include "pipeline/cpu_reference.h"
#include "api/codecs/image_file.h"
#include "gpu_test.h"
#include "pipeline/png_gpu.h"
#include "png_gpu_run.h"
#include "tap.h"

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef enum image_kind { IMG_FLAT, IMG_NOISE, IMG_GRADIENT, IMG_RENDER, IMG_STRIPES, IMG_KIND_COUNT } image_kind;
static const char *const kind_names[] = {"flat", "noise", "gradient", "render", "stripes"};

/* A sample in [0, 1] of image kind k at (x, y), channel c. */
static double sample(image_kind k, uint32_t x, uint32_t y, uint32_t c, uint32_t w, uint32_t h)
{
    double u = (x + 0.5) / w, v = (y + 0.5) / h;
    switch (k) {
    case IMG_FLAT:
        return c == 3 ? 1.0 : 0.25 + 0.2 * c;
    case IMG_NOISE:
        return (double)(rng_next() >> 11) * 0x1p-53;
    case IMG_GRADIENT:
        return c == 0 ? u : c == 1 ? v : c == 2 ? 0.5 * (u + v) : 1.0 - 0.5 * u;
    case IMG_RENDER: { /* smooth shading, a hard edge, a little grain: what a tone-mapped frame looks like */
        double s = 0.5 + 0.4 * sin(6.0 * u + 3.0 * c) * cos(4.0 * v);
        if ((u - 0.6) * (u - 0.6) + (v - 0.4) * (v - 0.4) < 0.04)
            s = 0.9 - 0.1 * c;
        s += ((double)(rng_next() >> 11) * 0x1p-53 - 0.5) * 0.01;
        return c == 3 ? (x % 7 == 0 ? 0.5 : 1.0) : (s < 0 ? 0 : s > 1 ? 1 : s);
    }
    default: /* stripes: repeated content, the rows and pixels the match candidates look for */
        return ((x / 3 + y / 5 + c) % 4) / 3.0;
    }
}

/* The tone pass's output layout: RGBA8 (R, G, B, A bytes) or RGBA16 (four host-order uint16). */
static void *make_image(image_kind k, uint32_t w, uint32_t h, uint32_t depth, uint64_t seed)
{
    rng_state = seed;
    size_t px = (size_t)w * h;
    uint8_t *img = malloc(px * (depth == 8 ? 4 : 8));
    if (!img)
        return NULL;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < 4; c++) {
                double s = sample(k, x, y, c, w, h);
                size_t i = ((size_t)y * w + x) * 4 + c;
                if (depth == 8) {
                    img[i] = (uint8_t)(s * 255.0 + 0.5);
                } else {
                    uint16_t v = (uint16_t)(s * 65535.0 + 0.5);
                    memcpy(img + 2 * i, &v, 2);
                }
            }
    return img;
}

/* The samples a PNG decoder gives back (SPNG_FMT_RAW: as stored): alpha kept or not, 16-bit big-endian. */
static void expected_samples(const hp_png_gpu_layout *l, const uint8_t *img, uint8_t *out)
{
    for (size_t p = 0; p < (size_t)l->width * l->height; p++)
        for (uint32_t c = 0; c < l->channels; c++) {
            if (l->depth == 8) {
                *out++ = img[p * 4 + c];
            } else {
                uint16_t v;
                memcpy(&v, img + (p * 4 + c) * 2, 2);
                *out++ = (uint8_t)(v >> 8), *out++ = (uint8_t)v;
            }
        }
}

/* --- One run on the GPU ------------------------------------------------------------------------------ */


typedef struct gpu_result {
    uint8_t *filtered; /* filtered_size bytes */
    uint8_t *joined;   /* joined_size */
    uint8_t *table;    /* table_size */
} gpu_result;

static void result_free(gpu_result *g)
{
    free(g->filtered), free(g->joined), free(g->table);
    memset(g, 0, sizeof(*g));
}

/* Uploads the image, runs the passes (tests/png_gpu_run.h) and copies out the filtered bytes, the joined
 * stream and the table. translucent: as png_run. */
static bool run_png(gpu_test_cmd *r, hp_png_gpu *png, const hp_png_gpu_layout *l, const void *image, int translucent,
                    gpu_result *out, hp_err *err)
{
    hp_buffer b[PNG_RUN_BUFFERS];
    memset(b, 0, sizeof(b));
    VkDeviceSize sizes[PNG_RUN_BUFFERS];
    hp_mem_kind kinds[PNG_RUN_BUFFERS];
    png_run_sizes(l, sizes, kinds);
    bool ok = true;
    for (int i = 0; ok && i < PNG_RUN_BUFFERS; i++)
        ok = hp_buffer_create(r->gpu, sizes[i], kinds[i], "test_png", &b[i], err) == HP_OK;
    if (ok) {
        memcpy(b[PNG_RUN_STAGING].mapped, image, l->image_size);
        hp_buffer_flush(r->gpu, &b[PNG_RUN_STAGING]);
        ok = png_run(r->gpu, r->pool, r->cmd, r->fence, b, png, l, translucent);
        if (!ok)
            snprintf(err->message, sizeof(err->message), "command buffer failed");
    }
    if (ok) {
        out->filtered = malloc(l->filtered_size);
        out->joined = malloc(l->joined_size);
        out->table = malloc(l->table_size);
        ok = out->filtered && out->joined && out->table;
    }
    if (ok) {
        memcpy(out->filtered, b[PNG_RUN_RB_FILTERED].mapped, l->filtered_size);
        memcpy(out->joined, b[PNG_RUN_RB_JOINED].mapped, l->joined_size);
        memcpy(out->table, b[PNG_RUN_RB_TABLE].mapped, l->table_size);
    }
    for (int i = 0; i < PNG_RUN_BUFFERS; i++)
        hp_buffer_destroy(r->gpu, &b[i]);
    return ok;
}

/* --- The checks -------------------------------------------------------------------------------------- */

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint8_t *chunk(uint8_t *p, const char type[4], const uint8_t *data, size_t len)
{
    be32(p, (uint32_t)len);
    memcpy(p + 4, type, 4);
    if (len)
        memcpy(p + 8, data, len);
    be32(p + 8 + len, (uint32_t)crc32(crc32(0L, Z_NULL, 0), p + 4, (uInt)(4 + len)));
    return p + 12 + len;
}

/* (c): a PNG around the stream, decoded by libspng; true when its samples are exactly `want`. */
static bool png_decodes(const hp_png_gpu_layout *l, const uint8_t *zlib, size_t zlen, const uint8_t *want,
                        char *why, size_t why_len)
{
    size_t cap = 8 + 25 + 12 + zlen + 12;
    uint8_t *png = malloc(cap), *w = png;
    if (!png)
        return snprintf(why, why_len, "out of memory"), false;
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(w, signature, 8);
    w += 8;
    uint8_t ihdr[13];
    be32(ihdr, l->width), be32(ihdr + 4, l->height);
    ihdr[8] = (uint8_t)l->depth, ihdr[9] = l->channels == 4 ? 6 : 2, ihdr[10] = ihdr[11] = ihdr[12] = 0;
    w = chunk(w, "IHDR", ihdr, 13);
    w = chunk(w, "IDAT", zlib, zlen);
    w = chunk(w, "IEND", NULL, 0);
    spng_ctx *ctx = spng_ctx_new(0);
    size_t size = 0;
    uint8_t *got = NULL;
    int rc = ctx ? spng_set_png_buffer(ctx, png, (size_t)(w - png)) : SPNG_EMEM;
    if (rc == 0)
        rc = spng_decoded_image_size(ctx, SPNG_FMT_RAW, &size);
    if (rc == 0 && !(got = malloc(size)))
        rc = SPNG_EMEM;
    if (rc == 0)
        rc = spng_decode_image(ctx, got, size, SPNG_FMT_RAW, 0);
    size_t want_len = (size_t)l->width * l->height * l->bpp;
    bool ok = rc == 0 && size == want_len && memcmp(got, want, want_len) == 0;
    if (rc)
        snprintf(why, why_len, "libspng: %s", spng_strerror(rc));
    else
        snprintf(why, why_len, "%s", ok ? "samples exact" : "samples differ");
    free(got);
    spng_ctx_free(ctx);
    free(png);
    return ok;
}

typedef struct totals {
    uint64_t raw, gpu, zlib1, runs;
} totals;

/* given: an image in the tone pass's layout (not freed here); NULL: one made of `kind`. */
/* translucent: -1, or output.alpha auto over an RGBA layout (channels 4) with that translucent word: the
 * stream is then checked against the RGB image where it is 0. */
static void check_image_as(gpu_test_cmd *r, hp_png_gpu *png, const char *shape, uint32_t w, uint32_t h,
                           uint32_t channels, uint32_t depth, image_kind kind, const uint8_t *given, bool report,
                           totals *sum, int translucent)
{
    char name[240];
    snprintf(name, sizeof(name), "%s%ux%u %s %u-bit %s%s", shape, w, h, channels == 4 ? "RGBA" : "RGB", depth,
             given ? "" : kind_names[kind], translucent < 0 ? "" : translucent ? ", alpha auto, translucent" :
             ", alpha auto, opaque: RGB");
    hp_err err = {0};
    hp_png_gpu_layout l, run_l;
    if (hp_png_gpu_layout_for(png, w, h, channels, depth, &run_l, &err) != HP_OK ||
        hp_png_gpu_layout_for(png, w, h, translucent == 0 ? 3 : channels, depth, &l, &err) != HP_OK) {
        tap_ok(false, "%s: layout: %s", name, err.message);
        return;
    }
    uint8_t *img = given ? (uint8_t *)given : make_image(kind, w, h, depth, 77 + w * 131 + h * 7 + channels + depth);
    uint8_t *want = malloc(l.filtered_size), *samples = malloc((size_t)w * h * l.bpp);
    size_t zcap = hp_png_gpu_zlib_bound(&l);
    uint8_t *zlib = malloc(zcap), *inflated = malloc(l.filtered_bytes + 1);
    gpu_result g = {0};
    if (!img || !want || !samples || !zlib || !inflated) {
        tap_ok(false, "%s: out of memory", name);
        goto done;
    }
    hp_png_cpu_filter(&l, img, want);
    expected_samples(&l, img, samples);
    if (!run_png(r, png, &run_l, img, translucent, &g, &err)) {
        tap_ok(false, "%s: GPU run: %s", name, err.message);
        goto done;
    }

    /* (a) */
    size_t first_diff = l.filtered_bytes;
    for (size_t i = 0; i < l.filtered_bytes && first_diff == l.filtered_bytes; i++)
        if (g.filtered[i] != want[i])
            first_diff = i;
    if (first_diff == l.filtered_bytes) {
        tap_ok(true, "%s: filtered scanlines == CPU reference (%llu bytes)", name, (unsigned long long)l.filtered_bytes);
    } else {
        size_t row = first_diff / l.stride;
        tap_ok(false, "%s: filtered bytes differ first at %zu (row %zu, column %zu): GPU %u, CPU %u (types %u / %u)",
               name, first_diff, row, first_diff % l.stride, g.filtered[first_diff], want[first_diff],
               g.filtered[row * l.stride], want[row * l.stride]);
    }

    /* (b) */
    size_t zlen = 0;
    bool joined = hp_png_gpu_join(&l, g.joined, g.table, zlib, zcap, &zlen, &err) == HP_OK;
    uLongf out_len = (uLongf)l.filtered_bytes + 1;
    int zrc = joined ? uncompress(inflated, &out_len, zlib, (uLong)zlen) : Z_DATA_ERROR;
    uint32_t adler_want = (uint32_t)adler32(adler32(0L, Z_NULL, 0), want, (uInt)l.filtered_bytes);
    uint32_t adler_got = zlen >= 4 ? (uint32_t)zlib[zlen - 4] << 24 | (uint32_t)zlib[zlen - 3] << 16 |
                                         (uint32_t)zlib[zlen - 2] << 8 | zlib[zlen - 1]
                                   : 0;
    uint32_t btypes[3] = {0};
    for (uint32_t s = 0; s < l.segments; s++) {
        hp_png_gpu_segment seg;
        memcpy(&seg, g.table + s * sizeof(seg), sizeof(seg));
        btypes[seg.btype < 3 ? seg.btype : 0]++;
    }
    tap_ok(joined && zrc == Z_OK && out_len == l.filtered_bytes && memcmp(inflated, want, l.filtered_bytes) == 0 &&
               adler_got == adler_want,
           "%s: zlib inflates the stream (%zu bytes, %u segments: %u stored, %u fixed, %u dynamic) to the "
           "filtered bytes, Adler-32 %08x (want %08x): %s", name, zlen, l.segments, btypes[0], btypes[1], btypes[2], adler_got, adler_want,
           !joined ? err.message : zrc != Z_OK ? zError(zrc) : out_len != l.filtered_bytes ? "length differs" :
           memcmp(inflated, want, l.filtered_bytes) ? "bytes differ" : "exact");

    /* (c) */
    char why[128];
    bool decoded = joined && png_decodes(&l, zlib, zlen, samples, why, sizeof(why));
    tap_ok(decoded, "%s: the PNG decodes with libspng to the input: %s", name, joined ? why : "no stream");

    /* Sizes, for the record. */
    uLongf z1 = compressBound((uLong)l.filtered_bytes);
    uint8_t *zb = malloc(z1 > hp_deflate_runs_bound(l.filtered_bytes) ? z1 : hp_deflate_runs_bound(l.filtered_bytes));
    size_t runs_len = 0;
    if (zb && compress2(zb, &z1, want, (uLong)l.filtered_bytes, 1) == Z_OK &&
        hp_deflate_runs(want, l.filtered_bytes, true, zb, &runs_len)) {
        runs_len += 6; /* zlib header and Adler-32 around it, as the PNG strips have */
        if (report)
            tap_diag("%s: %llu filtered bytes -> GPU %zu (%.3f), zlib level 1 %lu (%.3f), deflate_runs %zu (%.3f)",
                     name, (unsigned long long)l.filtered_bytes, zlen, (double)zlen / (double)l.filtered_bytes,
                     (unsigned long)z1, (double)z1 / (double)l.filtered_bytes, runs_len,
                     (double)runs_len / (double)l.filtered_bytes);
        if (sum) {
            sum->raw += l.filtered_bytes, sum->gpu += zlen, sum->zlib1 += z1, sum->runs += runs_len;
        }
    }
    free(zb);
done:
    result_free(&g);
    if (img != given)
        free(img);
    free(want), free(samples), free(zlib), free(inflated);
}

static void check_image(gpu_test_cmd *r, hp_png_gpu *png, const char *shape, uint32_t w, uint32_t h, uint32_t channels,
                        uint32_t depth, image_kind kind, const uint8_t *given, bool report, totals *sum)
{
    check_image_as(r, png, shape, w, h, channels, depth, kind, given, report, sum, -1);
}

/* Pipelines of another configuration, or NULL after a failed point naming it. */
static hp_png_gpu *pipelines_for(hp_gpu *gpu, const hp_png_gpu_config *cfg, const char *what)
{
    hp_png_gpu *p = NULL;
    hp_err err = {0};
    if (hp_png_gpu_create(gpu, cfg, &p, &err) != HP_OK)
        tap_ok(false, "create %s: %s", what, err.message);
    return p;
}

/* Refused shapes and sizes, with messages naming them. */
static void test_refused(hp_gpu *gpu, hp_png_gpu *png)
{
    hp_png_gpu_layout l;
    hp_err e = {0};
    tap_ok(hp_png_gpu_layout_for(png, 0, 5, 3, 8, &l, &e) == HP_ERR_INVALID_ARGUMENT && strstr(e.message, "0x5"),
           "a 0x5 image is refused: %s", e.message);
    tap_ok(hp_png_gpu_layout_for(png, 5, 5, 2, 8, &l, &e) == HP_ERR_INVALID_ARGUMENT, "2 channels are refused: %s",
           e.message);
    hp_png_gpu_config big = {.workgroup_size = 1024, .chunk_bytes = 64};
    hp_png_gpu *p2 = NULL;
    tap_ok(hp_png_gpu_create(gpu, &big, &p2, &e) == HP_ERR_INVALID_ARGUMENT && !p2,
           "a 64 KiB segment (over one stored block) is refused: %s", e.message);
}

/* The default launch shape fitted to the device: 1024 invocations of 32 bytes where they fit, else half the
 * invocations of twice the bytes (the same 32 KiB segment) until they do. */
static void test_fitted_shape(hp_gpu *gpu, hp_png_gpu *png)
{
    static const struct { uint32_t invocations, size_x, shared, want_wg, want_chunk; } fits[] = {
        {1024, 1024, 49152, 1024, 32}, /* the H200, lavapipe */
        {256, 1024, 49152, 256, 128},  /* 256 invocations at most */
        {1024, 512, 49152, 512, 64},   /* a workgroup's x size of 512 at most */
        {1024, 1024, 22000, 256, 128}, /* shared memory: 512 invocations need 22,480 bytes */
        {1024, 1024, 16384, 32, 1024}, /* nothing fits: the smallest shape, refused by the create */
    };
    for (size_t i = 0; i < sizeof(fits) / sizeof(fits[0]); i++) {
        hp_gpu_info gi = {.max_workgroup_invocations = fits[i].invocations,
                          .max_workgroup_size_x = fits[i].size_x, .max_shared_memory = fits[i].shared};
        hp_png_gpu_config c;
        hp_png_gpu_fitted_config(&gi, &c);
        tap_ok(c.workgroup_size == fits[i].want_wg && c.chunk_bytes == fits[i].want_chunk,
               "a device of %u invocations, x size %u, %u bytes of shared memory: %u invocations of %u bytes "
               "(got %u of %u)", fits[i].invocations, fits[i].size_x, fits[i].shared, fits[i].want_wg,
               fits[i].want_chunk, c.workgroup_size, c.chunk_bytes);
    }
    hp_png_gpu_config here;
    hp_png_gpu_fitted_config(hp_gpu_get_info(gpu), &here);
    const hp_png_gpu_config *used = hp_png_gpu_get_config(png);
    tap_ok(used->workgroup_size == here.workgroup_size && used->chunk_bytes == here.chunk_bytes,
           "the pipelines made without a configuration take the shape fitted to this device: %u x %u",
           used->workgroup_size, used->chunk_bytes);
}

/* Every kind of synthetic image at the small sizes, both depths and channel counts; at 512x384 every kind at
 * 8 bits RGB, their sizes summed beside zlib's and deflate_runs'; a whole 4K frame. */
static void test_synthetic(gpu_test_cmd *r, hp_png_gpu *png)
{
    typedef struct { uint32_t w, h; } size2;
    static const size2 sizes[] = {{1, 1}, {1, 37}, {53, 1}, {3, 2}, {17, 9}, {127, 61}, {301, 203}};
    totals sum = {0};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (uint32_t depth = 8; depth <= 16; depth += 8)
            for (uint32_t channels = 3; channels <= 4; channels++)
                for (int k = 0; k < IMG_KIND_COUNT; k++) {
                    /* Every kind at the small sizes; at the larger ones two kinds each, in turn. */
                    if (s >= 5 && (k + channels + depth / 8 + s) % 3 != 0)
                        continue;
                    check_image(r, png, "", sizes[s].w, sizes[s].h, channels, depth, (image_kind)k, NULL, s >= 5, NULL);
                }
    /* The largest: every kind at 8 bits RGB (what the daemon's PNG mostly is), the sizes summed. */
    for (int k = 0; k < IMG_KIND_COUNT; k++)
        check_image(r, png, "", 512, 384, 3, 8, (image_kind)k, NULL, true, &sum);
    check_image(r, png, "", 512, 384, 4, 16, IMG_RENDER, NULL, true, NULL);
    /* A whole 4K frame (760 segments), as the daemon's largest usual frame: the render kind, RGB 8-bit. */
    check_image(r, png, "4K: ", 3840, 2160, 3, 8, IMG_RENDER, NULL, true, NULL);
    tap_diag("512x384 RGB 8-bit, five kinds together: %llu filtered bytes -> GPU %llu (%.3f), zlib level 1 %llu "
             "(%.3f), deflate_runs %llu (%.3f)", (unsigned long long)sum.raw, (unsigned long long)sum.gpu,
             (double)sum.gpu / (double)sum.raw, (unsigned long long)sum.zlib1, (double)sum.zlib1 / (double)sum.raw,
             (unsigned long long)sum.runs, (double)sum.runs / (double)sum.raw);
}

/* A real frame (tests/data, Blender's street), tone-mapped by the CPU reference with the default
 * parameters to 8 and 16 bits as the tone pass would: RGB as the daemon writes an opaque frame. */
static void test_real_frame(hp_gpu *gpu, gpu_test_cmd *r, hp_png_gpu *png)
{
    const char *path = HP_TEST_DATA "/blender_street_960x540_singlelayer.exr";
    hp_image_info info;
    hp_err e = {0};
    float *frame = hp_image_decode_file(path, HP_LAYOUT_RGBA32F, NULL, &info, &e);
    uint8_t *toned = frame ? malloc((size_t)info.width * info.height * 8) : NULL;
    bool ok = frame && toned;
    for (uint32_t depth = 8; ok && depth <= 16; depth += 8) {
        hp_frame_params fp;
        hp_frame_params_defaults(&fp);
        fp.params.output.bit_depth = depth;
        hp_lum_stats cs;
        hp_tone_state ts;
        ok = hp_cpu_render_frame(frame, HP_PIXEL_RGBA32F, info.width, info.height, &fp.params, &cs, &ts, toned) ==
             HP_OK;
        if (ok)
            check_image(r, png, "blender street tone-mapped, ", info.width, info.height, 3, depth, IMG_FLAT, toned,
                        true, NULL);
        /* RGBA 8-bit, the opaque alpha kept (output.alpha keep), and again with the reprice on: the frame
         * whose runs of zeros the segment's code prices under their length and distance codes, so that
         * most of its matches go out as literals (png_deflate.comp's TOKEN_AS_LITERALS). */
        if (ok && depth == 8) {
            check_image(r, png, "blender street tone-mapped, ", info.width, info.height, 4, depth, IMG_FLAT, toned,
                        true, NULL);
            hp_png_gpu_config rcfg;
            hp_png_gpu_fitted_config(hp_gpu_get_info(gpu), &rcfg);
            rcfg.reprice = true;
            hp_png_gpu *repriced = pipelines_for(gpu, &rcfg, "the reprice pipeline");
            if (repriced)
                check_image(r, repriced, "reprice, blender street tone-mapped, ", info.width, info.height, 4,
                            depth, IMG_FLAT, toned, true, NULL);
            hp_png_gpu_destroy(&repriced);
        }
    }
    if (!ok)
        tap_ok(false, "the real frame %s: %s", path, e.message[0] ? e.message : "cannot read or tone-map");
    free(frame), free(toned);
}

/* output.alpha auto (hp_png_gpu_io.alpha_auto): an RGBA layout, the channels from tone_state's
 * translucent word on the GPU. Opaque: the RGB image's stream, in fewer segments than the dispatch's
 * (those past it do nothing); translucent: the RGBA image's. */
static void test_alpha_auto(gpu_test_cmd *r, hp_png_gpu *png)
{
    for (int translucent = 0; translucent <= 1; translucent++) {
        check_image_as(r, png, "", 301, 203, 4, 8, IMG_RENDER, NULL, false, NULL, translucent);
        check_image_as(r, png, "", 127, 61, 4, 16, IMG_NOISE, NULL, false, NULL, translucent);
        check_image_as(r, png, "", 1, 1, 4, 8, IMG_FLAT, NULL, false, NULL, translucent);
    }
}

/* The deflate pass's switches for bench_png_gpu (hp_png_gpu_config): without the hash table's candidate,
 * with the second Huffman build; every stream still inflates to the filtered bytes. */
static void test_switches(hp_gpu *gpu, gpu_test_cmd *r)
{
    for (int v = 0; v < 2; v++) {
        hp_png_gpu_config sw;
        hp_png_gpu_fitted_config(hp_gpu_get_info(gpu), &sw);
        sw.no_hash_probe = v == 0, sw.reprice = v == 1;
        const char *what = v == 0 ? "no hash probe: " : "reprice: ";
        hp_png_gpu *p2 = pipelines_for(gpu, &sw, what);
        for (int k = 0; p2 && k < IMG_KIND_COUNT; k++)
            check_image(r, p2, what, 301, 203, 3 + (uint32_t)(k & 1), k == 2 ? 16 : 8, (image_kind)k, NULL, false,
                        NULL);
        hp_png_gpu_destroy(&p2);
    }
}

/* Another launch shape: 64 invocations of 16 bytes, segments of 1 KiB. Many segments, stored ones
 * (noise), matches reaching back into earlier segments (stripes, flat). */
static void test_small_shape(hp_gpu *gpu, gpu_test_cmd *r)
{
    hp_png_gpu_config small = {.workgroup_size = 64, .chunk_bytes = 16};
    hp_png_gpu *p2 = pipelines_for(gpu, &small, "the 64 x 16 shape");
    for (int k = 0; p2 && k < IMG_KIND_COUNT; k++)
        check_image(r, p2, "64x16 shape: ", 97, 31, 3 + (uint32_t)(k & 1), k == 2 ? 16 : 8, (image_kind)k, NULL,
                    false, NULL);
    if (p2)
        check_image(r, p2, "64x16 shape: ", 1, 1, 4, 16, IMG_NOISE, NULL, false, NULL);
    hp_png_gpu_destroy(&p2);
}

/* The longest chunks allowed: 32 invocations of 1000 bytes. An invocation's Adler-32 sum then passes
 * 2^32 / 65521 (it overflowed 32 bits before the product was reduced: zlib refused such streams), and one
 * invocation parses a long run of its own. */
static void test_longest_chunks(hp_gpu *gpu, gpu_test_cmd *r)
{
    hp_err e = {0};
    hp_png_gpu_config longest = {.workgroup_size = 32, .chunk_bytes = 1000};
    hp_png_gpu *p2 = pipelines_for(gpu, &longest, "the 32 x 1000 shape");
    if (p2) {
        check_image(r, p2, "32x1000 shape: ", 4000, 3, 3, 8, IMG_NOISE, NULL, false, NULL);
        check_image(r, p2, "32x1000 shape: ", 257, 41, 4, 16, IMG_NOISE, NULL, false, NULL);
    }
    hp_png_gpu_destroy(&p2);
    hp_png_gpu_config too_long = {.workgroup_size = 32, .chunk_bytes = 1025};
    tap_ok(hp_png_gpu_create(gpu, &too_long, &p2, &e) == HP_ERR_INVALID_ARGUMENT && !p2,
           "chunks over 1024 bytes are refused: %s", e.message);
}

int main(void)
{
    hp_err err = {0};
    hp_gpu *gpu = NULL;
    int bail = gpu_test_open(&gpu, NULL, &err);
    if (bail)
        return bail;
    tap_diag("device: %s", hp_gpu_get_info(gpu)->device_name);
    hp_png_gpu *png = NULL;
    if (hp_png_gpu_create(gpu, NULL, &png, &err) != HP_OK)
        return tap_bail("create the PNG pipelines: %s", err.message);
    gpu_test_cmd r;
    if (!gpu_test_cmd_init(&r, gpu))
        return tap_bail("command buffer");

    test_refused(gpu, png);
    test_fitted_shape(gpu, png);
    test_synthetic(&r, png);
    test_real_frame(gpu, &r, png);
    test_alpha_auto(&r, png);
    test_switches(gpu, &r);
    test_small_shape(gpu, &r);
    test_longest_chunks(gpu, &r);

    gpu_test_cmd_destroy(&r);
    hp_png_gpu_destroy(&png);
    hp_gpu_destroy(&gpu);
    gpu_test_validation_clean();
    return tap_done();
}

/* The image encoders (api/encode.h) as a specification: every file is decoded again with the libraries' own
 * decoders (libspng, libwebp's WebPDecodeRGBA) and compared with the frame that went in.
 *
 * Tolerances, stated once:
 *   PNG, 8 and 16 bits, RGB and RGBA, every effort: bit-exact (16-bit samples also read back big-endian raw).
 *   WebP lossless: bit-exact, RGB under fully transparent pixels included (exact = 1).
 *   WebP lossy at quality 90 on a smooth synthetic frame: PSNR over R, G, B >= 38 dB (measured 44.4 dB to
 *     45.8 dB over efforts 0..6 with libwebp 1.2.4; the bound leaves room for other versions), alpha
 *     bit-exact (alpha_quality 100 codes the alpha plane losslessly). Every effort stays above the bound.
 *   WebP from Y'CbCr 4:2:0 planes (hp_encode_webp_yuv420, the daemon's lossy path), converted here by
 *     BT.601 in double, odd size and padded strides: the same PSNR bound and alpha bit-exact; printed
 *     beside libwebp's own conversion of the same frame (44.19 against 44.08 dB with libwebp 1.2.4).
 *   Odd sizes (1x1, 1x7, 7x1, 33x17) in lossy WebP: decodable at the right size, PSNR >= 24 dB. The smooth
 *     pattern squeezed into 7 pixels changes colour by up to a third of the range from pixel to pixel, and
 *     4:2:0 averages chroma over pixel pairs (1x7 measured 25.7 dB, the others 31 dB and up).
 * Effort: PNG effort 6 is smaller than effort 0 on a photo-like 8-bit frame. At 16 bits it need not be:
 * libspng's adaptive filter choice (least sum of absolute byte differences) judges 16-bit samples byte by
 * byte and on smooth synthetic frames loses to SUB alone (effort 0) by up to 15%; on the four frames of
 * tests/data tone-mapped to 16 bits effort 6 was 1% to 5% smaller. So at 16 bits the test asks only that
 * effort changes the file and stays within 25% of effort 0. WebP lossless effort 6 is no larger than effort
 * 0. Times are printed, never asserted.
 *
 * Failure paths: this program interposes malloc, calloc, realloc and free (over glibc's __libc_* entry
 * points) to fail the k-th allocation of an encode, for every k until an encode runs through, on PNG and WebP
 * paths. Each must return HP_OK (a library may recover) or HP_ERR_OUT_OF_MEMORY with a message and an empty
 * result, and never crash. A PNG returned as HP_OK must decode to the frame. A WebP returned as HP_OK after a
 * failed allocation is only counted: libwebp 1.2.4 (Debian 12) loses some allocation failures inside its
 * lossless coder (VP8LEncodeStream takes the worker's unset error code, VP8_ENC_OK, as success), so lossless
 * files and lossy alpha planes can come back damaged; newer libwebp sets picture->error_code on every path.
 * That nothing leaks on any of these paths is valgrind's to say; tell it to leave this program's malloc alone
 * (it would replace it, and no allocation would fail):
 *     valgrind --soname-synonyms=somalloc=nouserintercepts --error-exitcode=1 --leak-check=full \
 *         build/tests/test_encode */
#include <errno.h>
#include <math.h>
#include <spng.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <webp/decode.h>

#include "api/encode.h"
#include "tap.h"

/* --- Failing allocations on demand -------------------------------------------------------------------- */

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);

/* 0: every allocation succeeds. k > 0: the k-th allocation from now fails (one failure, later ones succeed).
 * Counted atomically: libwebp allocates from its worker thread too. */
static atomic_long alloc_countdown;
static atomic_long alloc_count; /* allocations seen while counting */
static atomic_bool alloc_counting;

static bool alloc_should_fail(void)
{
    if (!atomic_load(&alloc_counting))
        return false;
    atomic_fetch_add(&alloc_count, 1);
    if (atomic_load(&alloc_countdown) <= 0 || atomic_fetch_sub(&alloc_countdown, 1) != 1)
        return false;
    errno = ENOMEM; /* as glibc's malloc does: pthread_create() asserts it when a TLS allocation fails */
    return true;
}

void *malloc(size_t size)
{
    return alloc_should_fail() ? NULL : __libc_malloc(size);
}

void *calloc(size_t count, size_t size)
{
    return alloc_should_fail() ? NULL : __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size)
{
    return alloc_should_fail() ? NULL : __libc_realloc(ptr, size);
}

void free(void *ptr)
{
    __libc_free(ptr);
}

/* --- Deterministic frames ----------------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* RGBA rows as hp_encode() takes them: uint8_t for 8 bits, host-order uint16_t for 16. */
typedef struct test_frame {
    uint32_t width, height, bit_depth;
    void *pixels;
} test_frame;

typedef enum frame_kind {
    FRAME_NOISY,  /* gradients plus full-range noise, alpha from 0 to max: every sample value matters */
    FRAME_SMOOTH, /* low-frequency sines, alpha max: what lossy coding is for */
    FRAME_SMOOTH_ALPHA, /* the same with a smooth alpha from 1 to max (no fully transparent pixel) */
    FRAME_PHOTO,  /* smooth shapes with mild grain, alpha max: a tone-mapped render */
} frame_kind;

static uint32_t frame_sample(const test_frame *f, uint32_t x, uint32_t y, uint32_t c)
{
    size_t i = ((size_t)y * f->width + x) * 4 + c;
    return f->bit_depth == 8 ? ((const uint8_t *)f->pixels)[i] : ((const uint16_t *)f->pixels)[i];
}

static test_frame make_frame(uint32_t width, uint32_t height, uint32_t bit_depth, frame_kind kind, uint64_t seed)
{
    test_frame f = {width, height, bit_depth, malloc((size_t)width * height * 4 * (bit_depth / 8))};
    const double max = bit_depth == 8 ? 255.0 : 65535.0;
    rng_state = seed;
    for (uint32_t y = 0; y < height; y++) {
        for (uint32_t x = 0; x < width; x++) {
            double u = width > 1 ? (double)x / (width - 1) : 0.5, v = height > 1 ? (double)y / (height - 1) : 0.5;
            double rgba[4];
            switch (kind) {
            case FRAME_NOISY:
                for (int c = 0; c < 4; c++)
                    rgba[c] = (double)(rng_next() % (uint64_t)(max + 1)) / max;
                rgba[0] = 0.5 * rgba[0] + 0.5 * u; /* some structure, so filters have something to find */
                break;
            case FRAME_SMOOTH:
            case FRAME_SMOOTH_ALPHA:
                rgba[0] = 0.5 + 0.4 * sin(6.0 * u + 1.0) * cos(4.0 * v);
                rgba[1] = 0.5 + 0.4 * sin(5.0 * v + 2.0 * u);
                rgba[2] = 0.3 + 0.6 * u * v;
                rgba[3] = kind == FRAME_SMOOTH ? 1.0 : (1.0 + 254.0 * (0.5 + 0.5 * sin(3.0 * u + 2.0 * v))) / 255.0;
                break;
            case FRAME_PHOTO: {
                double d = hypot(u - 0.4, v - 0.5);
                double grain = ((double)(rng_next() % 1024) / 1023.0 - 0.5) * 0.02;
                rgba[0] = (d < 0.25 ? 0.8 - d : 0.2 + 0.3 * v) + grain;
                rgba[1] = 0.25 + 0.5 * u * (1.0 - v) + grain;
                rgba[2] = 0.6 - 0.4 * v + 0.1 * sin(20.0 * u) + grain;
                rgba[3] = 1.0;
                break;
            }
            }
            for (uint32_t c = 0; c < 4; c++) {
                double s = fmin(fmax(rgba[c], 0.0), 1.0) * max + 0.5;
                size_t i = ((size_t)y * width + x) * 4 + c;
                if (bit_depth == 8)
                    ((uint8_t *)f.pixels)[i] = (uint8_t)s;
                else
                    ((uint16_t *)f.pixels)[i] = (uint16_t)s;
            }
        }
    }
    if (kind == FRAME_NOISY && width * height >= 4) { /* alpha's two ends, for certain */
        for (uint32_t i = 0; i < 2; i++) {
            size_t a = (size_t)i * 4 + 3;
            if (bit_depth == 8)
                ((uint8_t *)f.pixels)[a] = i ? 255 : 0;
            else
                ((uint16_t *)f.pixels)[a] = i ? 65535 : 0;
        }
    }
    return f;
}

static void frame_free(test_frame *f)
{
    free(f->pixels);
    f->pixels = NULL;
}

static hp_output_params output(hp_output_format format, uint32_t quality, bool lossless, uint32_t effort,
                               uint32_t bit_depth)
{
    return (hp_output_params){.format = format, .quality = quality, .lossless = lossless, .effort = effort,
                              .bit_depth = bit_depth, .dither = true};
}

static hp_code encode(const test_frame *f, bool alpha, hp_output_encoding encoding, const hp_output_params *out,
                      hp_encoded *result, hp_err *err)
{
    return hp_encode(f->pixels, f->width, f->height, f->bit_depth, alpha, encoding, out, result, err);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static bool is_empty(const hp_encoded *e)
{
    return e->data == NULL && e->size == 0 && e->mime == NULL;
}

/* --- Reading back ------------------------------------------------------------------------------------- */

/* The PNG decoded in format fmt; NULL (and a diagnostic) when libspng refuses it. */
static uint8_t *png_decode(const hp_encoded *e, int fmt, struct spng_ihdr *ihdr, size_t *len)
{
    spng_ctx *ctx = spng_ctx_new(0);
    uint8_t *pixels = NULL;
    int rc = spng_set_png_buffer(ctx, e->data, e->size);
    if (!rc)
        rc = spng_get_ihdr(ctx, ihdr);
    if (!rc)
        rc = spng_decoded_image_size(ctx, fmt, len);
    if (!rc && !(pixels = malloc(*len)))
        rc = SPNG_EMEM;
    if (!rc)
        rc = spng_decode_image(ctx, pixels, *len, fmt, 0);
    spng_ctx_free(ctx);
    if (rc) {
        tap_diag("libspng: %s", spng_strerror(rc));
        free(pixels);
        return NULL;
    }
    return pixels;
}

/* The PNG read back two ways against the frame: raw (PNG's own layout, 16 bits big-endian), and as libspng
 * gives it to an application (RGBA8 or RGBA16 in host order, alpha max where the file has none). */
static bool png_matches(const hp_encoded *e, const test_frame *f, bool alpha)
{
    struct spng_ihdr ihdr;
    size_t len;
    uint8_t *raw = png_decode(e, SPNG_FMT_RAW, &ihdr, &len);
    if (!raw)
        return false;
    const uint32_t channels = alpha ? 4 : 3, bytes = f->bit_depth / 8, max = f->bit_depth == 8 ? 255 : 65535;
    bool same = ihdr.width == f->width && ihdr.height == f->height && ihdr.bit_depth == f->bit_depth &&
                ihdr.color_type == (alpha ? SPNG_COLOR_TYPE_TRUECOLOR_ALPHA : SPNG_COLOR_TYPE_TRUECOLOR) &&
                ihdr.interlace_method == 0 && len == (size_t)f->width * f->height * channels * bytes;
    for (uint32_t y = 0; same && y < f->height; y++)
        for (uint32_t x = 0; same && x < f->width; x++)
            for (uint32_t c = 0; same && c < channels; c++) {
                const uint8_t *s = raw + (((size_t)y * f->width + x) * channels + c) * bytes;
                uint32_t v = bytes == 1 ? s[0] : (uint32_t)s[0] << 8 | s[1];
                if (v != frame_sample(f, x, y, c)) {
                    tap_diag("raw sample (%u, %u) channel %u: %u, expected %u", x, y, c, v, frame_sample(f, x, y, c));
                    same = false;
                }
            }
    free(raw);

    uint8_t *app = same ? png_decode(e, f->bit_depth == 8 ? SPNG_FMT_RGBA8 : SPNG_FMT_RGBA16, &ihdr, &len) : NULL;
    if (!app)
        return false;
    for (size_t i = 0; same && i < (size_t)f->width * f->height * 4; i++) {
        uint32_t v = bytes == 1 ? app[i] : ((const uint16_t *)(const void *)app)[i];
        uint32_t want = (i % 4 == 3 && !alpha) ? max : frame_sample(f, (uint32_t)(i / 4 % f->width),
                                                                    (uint32_t)(i / 4 / f->width), (uint32_t)(i % 4));
        same = v == want;
    }
    free(app);
    return same;
}

/* The WebP decoded to RGBA8, or NULL; WebPFree() releases it. */
static uint8_t *webp_decode(const hp_encoded *e, int *width, int *height, bool *has_alpha)
{
    WebPBitstreamFeatures features;
    if (WebPGetFeatures(e->data, e->size, &features) != VP8_STATUS_OK)
        return NULL;
    *has_alpha = features.has_alpha;
    return WebPDecodeRGBA(e->data, e->size, width, height);
}

typedef struct webp_check {
    bool decoded;      /* decodable, at the frame's size */
    bool alpha_exact;  /* alpha as written (or 255 everywhere for an RGB file) */
    bool rgb_exact;
    bool has_alpha;    /* the file declares alpha */
    double psnr;       /* over R, G and B, peak 255; INFINITY when exact */
} webp_check;

static webp_check webp_compare(const hp_encoded *e, const test_frame *f, bool alpha)
{
    webp_check r = {0};
    int w = 0, h = 0;
    uint8_t *rgba = webp_decode(e, &w, &h, &r.has_alpha);
    if (!rgba || w != (int)f->width || h != (int)f->height) {
        WebPFree(rgba);
        return r;
    }
    r.decoded = r.alpha_exact = r.rgb_exact = true;
    double sq = 0.0;
    for (uint32_t y = 0; y < f->height; y++)
        for (uint32_t x = 0; x < f->width; x++)
            for (uint32_t c = 0; c < 4; c++) {
                int got = rgba[((size_t)y * f->width + x) * 4 + c];
                int want = (c == 3 && !alpha) ? 255 : (int)frame_sample(f, x, y, c);
                if (c == 3) {
                    r.alpha_exact &= got == want;
                } else {
                    r.rgb_exact &= got == want;
                    sq += (double)(got - want) * (got - want);
                }
            }
    WebPFree(rgba);
    double mse = sq / ((double)f->width * f->height * 3);
    r.psnr = mse > 0 ? 10.0 * log10(255.0 * 255.0 / mse) : INFINITY;
    return r;
}

/* A test frame as BT.601 studio-range planes, in double (the reference the tone pass is tested against
 * in tests/test_tone.c), with strides wider than needed (pad bytes) to show they are honoured. */
typedef struct test_planes {
    uint8_t *mem;
    hp_yuv420 p;
} test_planes;

static uint8_t q8(double v) { return (uint8_t)fmin(fmax(floor(v + 0.5), 0.0), 255.0); }

static test_planes make_planes(const test_frame *f, bool alpha, uint32_t pad)
{
    uint32_t w = f->width, h = f->height, cw = (w + 1) / 2, ch = (h + 1) / 2;
    test_planes t = {0};
    t.p.y_stride = w + pad;
    t.p.uv_stride = cw + pad;
    size_t ysize = (size_t)t.p.y_stride * h, csize = (size_t)t.p.uv_stride * ch;
    t.mem = calloc(1, 2 * ysize + 2 * csize);
    uint8_t *y = t.mem, *u = y + ysize, *v = u + csize, *a = v + csize;
    for (uint32_t r = 0; r < h; r++)
        for (uint32_t x = 0; x < w; x++) {
            double R = frame_sample(f, x, r, 0) / 255.0, G = frame_sample(f, x, r, 1) / 255.0;
            double B = frame_sample(f, x, r, 2) / 255.0;
            y[(size_t)r * t.p.y_stride + x] = q8(16.0 + 65.481 * R + 128.553 * G + 24.966 * B);
            a[(size_t)r * t.p.y_stride + x] = (uint8_t)frame_sample(f, x, r, 3);
        }
    for (uint32_t r = 0; r < ch; r++)
        for (uint32_t x = 0; x < cw; x++) {
            double m[3] = {0, 0, 0};
            for (uint32_t k = 0; k < 4; k++) {
                uint32_t px = 2 * x + (k & 1), py = 2 * r + (k >> 1);
                px = px < w ? px : w - 1, py = py < h ? py : h - 1;
                for (uint32_t c = 0; c < 3; c++)
                    m[c] += frame_sample(f, px, py, c) / (4.0 * 255.0);
            }
            u[(size_t)r * t.p.uv_stride + x] = q8(128.0 - 37.797 * m[0] - 74.203 * m[1] + 112.0 * m[2]);
            v[(size_t)r * t.p.uv_stride + x] = q8(128.0 + 112.0 * m[0] - 93.786 * m[1] - 18.214 * m[2]);
        }
    t.p.y = y, t.p.u = u, t.p.v = v, t.p.a = alpha ? a : NULL;
    return t;
}

/* --- PNG ---------------------------------------------------------------------------------------------- */

static const struct {
    uint32_t width, height;
} odd_sizes[] = {{1, 1}, {1, 7}, {7, 1}, {33, 17}};

static void test_png_round_trips(void)
{
    for (uint32_t depth = 8; depth <= 16; depth += 8) {
        for (int alpha = 0; alpha <= 1; alpha++) {
            for (size_t s = 0; s < sizeof(odd_sizes) / sizeof(odd_sizes[0]); s++) {
                test_frame f = make_frame(odd_sizes[s].width, odd_sizes[s].height, depth, FRAME_NOISY, 7 + s);
                hp_output_params out = output(HP_OUTPUT_PNG, 90, false, 2, depth);
                hp_encoded e;
                hp_err err = {0};
                hp_code code = encode(&f, alpha, HP_ENCODING_SRGB_LIKE, &out, &e, &err);
                tap_ok(code == HP_OK && e.mime && strcmp(e.mime, "image/png") == 0 && png_matches(&e, &f, alpha),
                       "png %u-bit %s %ux%u: decodes to the same samples (%s)", depth, alpha ? "RGBA" : "RGB",
                       f.width, f.height, code == HP_OK ? "ok" : err.message);
                hp_encoded_free(&e);
                frame_free(&f);
            }
        }
    }
    /* Flat frames: long runs in every row, the case the run-length coder (deflate_runs.c) once got wrong
     * (a 60x40 flat RGBA frame made a stream zlib could not inflate), at the fast efforts and both depths. */
    static const struct { uint32_t w, h; } flat_sizes[] = {{60, 40}, {1, 1}, {300, 5}, {257, 3}, {1100, 9}};
    unsigned flat_bad = 0, flat_runs = 0;
    for (size_t s = 0; s < sizeof(flat_sizes) / sizeof(flat_sizes[0]); s++) {
        for (uint32_t depth = 8; depth <= 16; depth += 8) {
            test_frame f = make_frame(flat_sizes[s].w, flat_sizes[s].h, depth, FRAME_NOISY, 3);
            size_t values = (size_t)f.width * f.height * 4;
            for (size_t i = 0; i < values; i++) { /* one colour, one alpha: every row a run */
                uint32_t v = i % 4 == 3 ? 200u : 40u + (uint32_t)(i % 4) * 30u;
                if (depth == 8)
                    ((uint8_t *)f.pixels)[i] = (uint8_t)v;
                else
                    ((uint16_t *)f.pixels)[i] = (uint16_t)(v * 257u);
            }
            for (uint32_t effort = 0; effort <= 2; effort++) {
                hp_output_params out = output(HP_OUTPUT_PNG, 90, false, effort, depth);
                hp_encoded e;
                hp_code code = encode(&f, true, HP_ENCODING_SRGB, &out, &e, NULL);
                flat_runs++;
                if (code != HP_OK || !png_matches(&e, &f, true)) {
                    flat_bad++;
                    tap_diag("flat %ux%u %u-bit effort %u does not decode to its samples", f.width, f.height,
                             depth, effort);
                }
                hp_encoded_free(&e);
            }
            frame_free(&f);
        }
    }
    tap_ok(flat_bad == 0, "png of flat frames (5 sizes, 8 and 16 bits, efforts 0-2): %u of %u decode to the same "
           "samples", flat_runs - flat_bad, flat_runs);

    /* A 16-bit buffer at an odd address: the encoder must not assume 2-byte alignment. */
    test_frame f = make_frame(9, 5, 16, FRAME_NOISY, 99);
    size_t bytes = (size_t)f.width * f.height * 8;
    uint8_t *shifted = malloc(bytes + 1);
    memcpy(shifted + 1, f.pixels, bytes);
    hp_output_params out = output(HP_OUTPUT_PNG, 90, false, 2, 16);
    hp_encoded e;
    hp_code code = hp_encode(shifted + 1, f.width, f.height, 16, true, HP_ENCODING_SRGB, &out, &e, NULL);
    tap_ok(code == HP_OK && png_matches(&e, &f, true), "png 16-bit from an unaligned buffer: same samples");
    hp_encoded_free(&e);
    free(shifted);
    frame_free(&f);
}

static void test_png_effort(void)
{
    for (uint32_t depth = 8; depth <= 16; depth += 8) {
        test_frame f = make_frame(512, 384, depth, depth == 8 ? FRAME_PHOTO : FRAME_SMOOTH, 11);
        size_t size[7] = {0};
        bool exact = true;
        for (uint32_t effort = 0; effort <= 6; effort++) {
            hp_output_params out = output(HP_OUTPUT_PNG, 90, false, effort, depth);
            hp_encoded e;
            hp_err err = {0};
            double t0 = now_ms();
            hp_code code = encode(&f, false, HP_ENCODING_SRGB, &out, &e, &err);
            double ms = now_ms() - t0;
            exact &= code == HP_OK && png_matches(&e, &f, false);
            size[effort] = e.size;
            tap_diag("png %u-bit 512x384 %s effort %u: %zu bytes, %.1f ms", depth, depth == 8 ? "photo" : "smooth",
                     effort, e.size, ms);
            hp_encoded_free(&e);
        }
        tap_ok(exact, "png %u-bit: every effort 0..6 decodes to the same samples", depth);
        if (depth == 8)
            tap_ok(size[6] < size[0], "png 8-bit photo: effort 6 is smaller than effort 0 (%zu < %zu bytes)", size[6],
                   size[0]);
        else /* see the top: at 16 bits libspng's adaptive filter choice can lose to SUB alone */
            tap_ok(size[6] != size[0] && size[6] < size[0] * 5 / 4,
                   "png 16-bit smooth: effort changes the file, effort 6 within 25%% of effort 0 (%zu vs %zu bytes)",
                   size[6], size[0]);
        frame_free(&f);
    }
}

/* The colour chunks of encode.h's table, read back with libspng. */
typedef struct png_chunks {
    bool srgb, gama, chrm, text;
    uint8_t intent;
    uint32_t gamma;
    struct spng_chrm_int chrm_int;
    char keyword[80];
    char comment[512];
} png_chunks;

static bool png_read_chunks(const hp_encoded *e, png_chunks *k)
{
    *k = (png_chunks){0};
    spng_ctx *ctx = spng_ctx_new(0);
    struct spng_ihdr ihdr;
    bool ok = spng_set_png_buffer(ctx, e->data, e->size) == 0 && spng_get_ihdr(ctx, &ihdr) == 0;
    if (ok) {
        k->srgb = spng_get_srgb(ctx, &k->intent) == 0;
        k->gama = spng_get_gama_int(ctx, &k->gamma) == 0;
        k->chrm = spng_get_chrm_int(ctx, &k->chrm_int) == 0;
        uint32_t n = 0;
        if (spng_get_text(ctx, NULL, &n) == 0 && n == 1) {
            struct spng_text text;
            if (spng_get_text(ctx, &text, &n) == 0) {
                k->text = true;
                snprintf(k->keyword, sizeof(k->keyword), "%s", text.keyword);
                snprintf(k->comment, sizeof(k->comment), "%.*s", (int)text.length, text.text);
            }
        }
    }
    spng_ctx_free(ctx);
    return ok;
}

static bool chrm_is_rec709(const png_chunks *k)
{
    const struct spng_chrm_int *c = &k->chrm_int;
    return k->chrm && c->white_point_x == 31270 && c->white_point_y == 32900 && c->red_x == 64000 &&
           c->red_y == 33000 && c->green_x == 30000 && c->green_y == 60000 && c->blue_x == 15000 &&
           c->blue_y == 6000;
}

static void test_png_chunks(void)
{
    test_frame f = make_frame(16, 8, 8, FRAME_SMOOTH, 3);
    hp_output_params out = output(HP_OUTPUT_PNG, 90, false, 2, 8);
    png_chunks k;
    hp_encoded e;

    encode(&f, false, HP_ENCODING_SRGB, &out, &e, NULL);
    tap_ok(png_read_chunks(&e, &k) && k.srgb && k.intent == 0 && k.gama && k.gamma == 45455 && chrm_is_rec709(&k) &&
               !k.text,
           "png encoding srgb: sRGB (perceptual), gAMA 45455 and cHRM Rec.709/D65 for older decoders, no tEXt");
    hp_encoded_free(&e);

    encode(&f, false, HP_ENCODING_LINEAR, &out, &e, NULL);
    tap_ok(png_read_chunks(&e, &k) && !k.srgb && k.gama && k.gamma == 100000 && chrm_is_rec709(&k) && !k.text,
           "png encoding linear: gAMA 100000 (1.0) and cHRM, no sRGB");
    hp_encoded_free(&e);

    encode(&f, false, HP_ENCODING_SRGB_LIKE, &out, &e, NULL);
    tap_ok(png_read_chunks(&e, &k) && !k.srgb && k.gama && k.gamma == 45455 && chrm_is_rec709(&k) && k.text &&
               strcmp(k.keyword, "Comment") == 0 && strstr(k.comment, "Kwon") && strstr(k.comment, "per pixel"),
           "png encoding srgb_like (local gamma): gAMA 45455, cHRM, no sRGB, tEXt Comment naming Kwon's local "
           "gamma (\"%s\")", k.comment);
    hp_encoded_free(&e);

    tap_ok(hp_output_encoding_for_gamma(HP_GAMMA_LOCAL) == HP_ENCODING_SRGB_LIKE &&
               hp_output_encoding_for_gamma(HP_GAMMA_LOCAL_LUMINANCE) == HP_ENCODING_SRGB_LIKE &&
               hp_output_encoding_for_gamma(HP_GAMMA_SRGB) == HP_ENCODING_SRGB &&
               hp_output_encoding_for_gamma(HP_GAMMA_LINEAR) == HP_ENCODING_LINEAR,
           "gamma modes map to encodings: local and local_luminance srgb_like, srgb srgb, linear linear");
    frame_free(&f);
}

/* --- WebP --------------------------------------------------------------------------------------------- */

static void test_webp_lossless(void)
{
    for (int alpha = 0; alpha <= 1; alpha++) {
        for (size_t s = 0; s < sizeof(odd_sizes) / sizeof(odd_sizes[0]); s++) {
            test_frame f = make_frame(odd_sizes[s].width, odd_sizes[s].height, 8, FRAME_NOISY, 21 + s);
            hp_output_params out = output(HP_OUTPUT_WEBP, 90, true, 2, 8);
            hp_encoded e;
            hp_err err = {0};
            hp_code code = encode(&f, alpha, HP_ENCODING_SRGB_LIKE, &out, &e, &err);
            webp_check r = code == HP_OK ? webp_compare(&e, &f, alpha) : (webp_check){0};
            tap_ok(code == HP_OK && strcmp(e.mime, "image/webp") == 0 && r.decoded && r.rgb_exact && r.alpha_exact,
                   "webp lossless %s %ux%u: decodes to the same samples%s (%s)", alpha ? "RGBA" : "RGB", f.width,
                   f.height, alpha ? ", RGB under alpha 0 included" : "", code == HP_OK ? "ok" : err.message);
            hp_encoded_free(&e);
            frame_free(&f);
        }
    }
    /* Effort: sizes fall (or stay), every level decodes exactly. */
    test_frame f = make_frame(256, 192, 8, FRAME_PHOTO, 5);
    size_t size[7] = {0};
    bool exact = true;
    for (uint32_t effort = 0; effort <= 6; effort++) {
        hp_output_params out = output(HP_OUTPUT_WEBP, 90, true, effort, 8);
        hp_encoded e;
        double t0 = now_ms();
        hp_code code = encode(&f, false, HP_ENCODING_SRGB_LIKE, &out, &e, NULL);
        double ms = now_ms() - t0;
        webp_check r = code == HP_OK ? webp_compare(&e, &f, false) : (webp_check){0};
        exact &= r.decoded && r.rgb_exact && r.alpha_exact && !r.has_alpha;
        size[effort] = e.size;
        tap_diag("webp lossless 256x192 effort %u: %zu bytes, %.1f ms", effort, e.size, ms);
        hp_encoded_free(&e);
    }
    tap_ok(exact, "webp lossless: every effort 0..6 decodes to the same samples, RGB files declare no alpha");
    tap_ok(size[6] <= size[0], "webp lossless: effort 6 is no larger than effort 0 (%zu <= %zu bytes)", size[6],
           size[0]);
    frame_free(&f);
}

#define LOSSY_PSNR_MIN 38.0
#define LOSSY_SMALL_PSNR_MIN 24.0

static void test_webp_lossy(void)
{
    for (int alpha = 0; alpha <= 1; alpha++) {
        test_frame f = make_frame(256, 192, 8, alpha ? FRAME_SMOOTH_ALPHA : FRAME_SMOOTH, 13);
        hp_output_params out = output(HP_OUTPUT_WEBP, 90, false, 4, 8);
        hp_encoded e;
        hp_err err = {0};
        hp_code code = encode(&f, alpha, HP_ENCODING_SRGB_LIKE, &out, &e, &err);
        webp_check r = code == HP_OK ? webp_compare(&e, &f, alpha) : (webp_check){0};
        tap_ok(code == HP_OK && r.decoded && r.psnr >= LOSSY_PSNR_MIN && r.alpha_exact && r.has_alpha == alpha,
               "webp lossy q90 %s 256x192 smooth: PSNR %.2f dB >= %.0f, alpha %s, %zu bytes (%s)",
               alpha ? "RGBA" : "RGB", r.psnr, LOSSY_PSNR_MIN, alpha ? "exact" : "absent (decodes as 255)", e.size,
               code == HP_OK ? "ok" : err.message);
        hp_encoded_free(&e);
        frame_free(&f);
    }

    test_frame f = make_frame(256, 192, 8, FRAME_SMOOTH, 13);
    size_t size[7] = {0};
    double worst = INFINITY;
    bool decoded = true;
    for (uint32_t effort = 0; effort <= 6; effort++) {
        hp_output_params out = output(HP_OUTPUT_WEBP, 90, false, effort, 8);
        hp_encoded e;
        double t0 = now_ms();
        hp_code code = encode(&f, false, HP_ENCODING_SRGB_LIKE, &out, &e, NULL);
        double ms = now_ms() - t0;
        webp_check r = code == HP_OK ? webp_compare(&e, &f, false) : (webp_check){0};
        decoded &= r.decoded;
        worst = fmin(worst, r.decoded ? r.psnr : 0.0);
        size[effort] = e.size;
        tap_diag("webp lossy q90 256x192 effort %u: %zu bytes, PSNR %.2f dB, %.1f ms", effort, e.size, r.psnr, ms);
        hp_encoded_free(&e);
    }
    tap_ok(decoded && worst >= LOSSY_PSNR_MIN, "webp lossy q90: every effort 0..6 decodes, worst PSNR %.2f dB >= %.0f",
           worst, LOSSY_PSNR_MIN);
    tap_ok(size[0] != size[6], "webp lossy: effort changes the file (%zu bytes at 0, %zu at 6)", size[0], size[6]);
    frame_free(&f);

    for (int alpha = 0; alpha <= 1; alpha++) {
        for (size_t s = 0; s < sizeof(odd_sizes) / sizeof(odd_sizes[0]); s++) {
            test_frame g = make_frame(odd_sizes[s].width, odd_sizes[s].height, 8,
                                      alpha ? FRAME_SMOOTH_ALPHA : FRAME_SMOOTH, 31 + s);
            hp_output_params out = output(HP_OUTPUT_WEBP, 90, false, 2, 8);
            hp_encoded e;
            hp_code code = encode(&g, alpha, HP_ENCODING_SRGB_LIKE, &out, &e, NULL);
            webp_check r = code == HP_OK ? webp_compare(&e, &g, alpha) : (webp_check){0};
            tap_ok(code == HP_OK && r.decoded && r.psnr >= LOSSY_SMALL_PSNR_MIN && r.alpha_exact,
                   "webp lossy %s %ux%u: decodes at its size, PSNR %.2f dB >= %.0f, alpha %s", alpha ? "RGBA" : "RGB",
                   g.width, g.height, r.psnr, LOSSY_SMALL_PSNR_MIN, alpha ? "exact" : "255");
            hp_encoded_free(&e);
            frame_free(&g);
        }
    }
}

/* --- Limits and refusals ------------------------------------------------------------------------------ */

/* A refusal: the code, the field, words in the message, and an empty result. */
static void expect_refusal(const char *what, hp_code code, hp_code want, const hp_err *err, const hp_encoded *e,
                           const char *field, const char *word1, const char *word2)
{
    tap_ok(code == want && is_empty(e) && strcmp(err->field, field) == 0 && strstr(err->message, word1) &&
               (!word2 || strstr(err->message, word2)),
           "%s: %s, field \"%s\" (\"%s\")", what, hp_code_name(code), err->field, err->message);
}

static void test_limits(void)
{
    /* One row (or column) of the largest sides: the limits cost no memory to test. */
    uint8_t *line = calloc((size_t)(HP_ENCODE_MAX_SIDE + 1) * 4, 2);
    hp_output_params webp = output(HP_OUTPUT_WEBP, 90, false, 0, 8), png = output(HP_OUTPUT_PNG, 90, false, 0, 8);
    hp_encoded e = {(uint8_t *)"x", 1, "stale"}; /* a refusal must clear what was there */
    hp_err err = {0};
    hp_code code;

    code = hp_encode(line, 16384, 1, 8, false, HP_ENCODING_SRGB, &webp, &e, &err);
    expect_refusal("webp 16384x1 is over libwebp's 16383", code, HP_ERR_TOO_LARGE, &err, &e, "output.format", "16383",
                   "png");
    code = hp_encode(line, 1, 16384, 8, true, HP_ENCODING_SRGB, &webp, &e, &err);
    expect_refusal("webp 1x16384 too", code, HP_ERR_TOO_LARGE, &err, &e, "output.format", "16383", "png");
    webp.lossless = true;
    code = hp_encode(line, 16384, 1, 8, false, HP_ENCODING_SRGB, &webp, &e, &err);
    expect_refusal("webp lossless 16384x1 too", code, HP_ERR_TOO_LARGE, &err, &e, "output.format", "16383", "png");
    webp.lossless = false;

    const uint32_t sides[2][2] = {{16383, 1}, {1, 16383}};
    for (int i = 0; i < 2; i++) {
        test_frame f = {sides[i][0], sides[i][1], 8, line};
        code = encode(&f, true, HP_ENCODING_SRGB, &webp, &e, &err);
        webp_check r = code == HP_OK ? webp_compare(&e, &f, true) : (webp_check){0};
        tap_ok(code == HP_OK && r.decoded && r.rgb_exact, "webp %ux%u, libwebp's largest side, encodes and decodes",
               f.width, f.height);
        hp_encoded_free(&e);
    }
    const uint32_t png_sides[2][2] = {{16384, 1}, {1, 16384}};
    for (int i = 0; i < 2; i++) {
        test_frame f = {png_sides[i][0], png_sides[i][1], 8, line};
        code = encode(&f, false, HP_ENCODING_SRGB, &png, &e, &err);
        tap_ok(code == HP_OK && png_matches(&e, &f, false), "png %ux%u, the daemon's largest side, encodes exactly",
               f.width, f.height);
        hp_encoded_free(&e);
    }
    code = hp_encode(line, 16385, 1, 8, false, HP_ENCODING_SRGB, &png, &e, &err);
    expect_refusal("png 16385x1 is over the frame limit", code, HP_ERR_TOO_LARGE, &err, &e, "", "16384", NULL);
    code = hp_encode(line, 1, 16385, 8, false, HP_ENCODING_SRGB, &webp, &e, &err);
    expect_refusal("webp 1x16385 is over the frame limit", code, HP_ERR_TOO_LARGE, &err, &e, "", "16384", NULL);
    code = hp_encode(line, 0, 5, 8, false, HP_ENCODING_SRGB, &png, &e, &err);
    expect_refusal("a frame 0 wide", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "", "empty", NULL);
    code = hp_encode(line, 5, 0, 8, false, HP_ENCODING_SRGB, &webp, &e, &err);
    expect_refusal("a frame 0 high", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "", "empty", NULL);

    hp_output_params webp16 = output(HP_OUTPUT_WEBP, 90, false, 2, 16);
    code = hp_encode(line, 4, 4, 16, false, HP_ENCODING_SRGB, &webp16, &e, &err);
    expect_refusal("16-bit webp", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "output.bit_depth", "output.bit_depth",
                   "png");
    hp_output_params bad = png;
    code = hp_encode(line, 4, 4, 16, false, HP_ENCODING_SRGB, &bad, &e, &err);
    expect_refusal("a 16-bit frame with output.bit_depth 8", code, HP_ERR_INVALID_ARGUMENT, &err, &e,
                   "output.bit_depth", "16", NULL);
    bad.bit_depth = 12;
    code = hp_encode(line, 4, 4, 12, false, HP_ENCODING_SRGB, &bad, &e, &err);
    expect_refusal("bit depth 12", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "output.bit_depth", "8 or 16", NULL);
    bad = png, bad.quality = 101;
    code = hp_encode(line, 4, 4, 8, false, HP_ENCODING_SRGB, &bad, &e, &err);
    expect_refusal("quality 101", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "output.quality", "101", NULL);
    bad = png, bad.effort = 7;
    code = hp_encode(line, 4, 4, 8, false, HP_ENCODING_SRGB, &bad, &e, &err);
    expect_refusal("effort 7", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "output.effort", "7", NULL);
    bad = png, bad.format = (hp_output_format)2;
    code = hp_encode(line, 4, 4, 8, false, HP_ENCODING_SRGB, &bad, &e, &err);
    expect_refusal("format 2", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "output.format", "neither", NULL);
    code = hp_encode(line, 4, 4, 8, false, (hp_output_encoding)3, &png, &e, &err);
    expect_refusal("encoding 3", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "", "hp_output_encoding", NULL);
    code = hp_encode(NULL, 4, 4, 8, false, HP_ENCODING_SRGB, &png, &e, &err);
    expect_refusal("no pixels", code, HP_ERR_INVALID_ARGUMENT, &err, &e, "", "NULL", NULL);
    tap_ok(hp_encode(line, 4, 4, 8, false, HP_ENCODING_SRGB, &png, NULL, NULL) == HP_ERR_INVALID_ARGUMENT,
           "no result: refused, and a NULL err is fine");

    hp_encoded_free(&e);
    hp_encoded_free(NULL);
    code = hp_encode(line, 3, 3, 8, true, HP_ENCODING_SRGB, &png, &e, &err);
    hp_encoded_free(&e);
    hp_encoded_free(&e);
    tap_ok(code == HP_OK && is_empty(&e), "hp_encoded_free: empties the result; twice and NULL are fine");
    free(line);
}

/* --- Every allocation failing in turn ----------------------------------------------------------------- */

static void test_allocation_failures(void)
{
    static const struct {
        const char *name;
        hp_output_format format;
        bool lossless, alpha;
        uint32_t bit_depth, effort;
        hp_output_encoding encoding;
        bool yuv; /* hp_encode_webp_yuv420 from planes */
    } cases[] = {
        {"png 8-bit RGB with tEXt", HP_OUTPUT_PNG, false, false, 8, 2, HP_ENCODING_SRGB_LIKE},
        {"png 8-bit RGBA effort 0", HP_OUTPUT_PNG, false, true, 8, 0, HP_ENCODING_SRGB},
        {"png 16-bit RGBA", HP_OUTPUT_PNG, false, true, 16, 6, HP_ENCODING_LINEAR},
        {"webp lossy RGBA", HP_OUTPUT_WEBP, false, true, 8, 4, HP_ENCODING_SRGB_LIKE},
        {"webp lossy RGB effort 0", HP_OUTPUT_WEBP, false, false, 8, 0, HP_ENCODING_SRGB_LIKE},
        {"webp lossless RGBA", HP_OUTPUT_WEBP, true, true, 8, 2, HP_ENCODING_SRGB_LIKE},
        {"webp from YUV planes with alpha", HP_OUTPUT_WEBP, false, true, 8, 2, HP_ENCODING_SRGB_LIKE, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* 96 x 80: large enough for every code path (two macroblock rows, a lossless transform), small
         * enough to encode a few hundred times. */
        test_frame f = make_frame(96, 80, cases[i].bit_depth, FRAME_SMOOTH_ALPHA, 41);
        hp_output_params out = output(cases[i].format, 80, cases[i].lossless, cases[i].effort, cases[i].bit_depth);
        const bool png = cases[i].format == HP_OUTPUT_PNG;
        test_planes planes = cases[i].yuv ? make_planes(&f, cases[i].alpha, 0) : (test_planes){0};
        long failures = 0, recovered = 0, wrong = 0, damaged = 0;
        bool finished = false;
        for (long k = 1; k < 100000 && !finished; k++) {
            hp_encoded e;
            hp_err err = {0};
            atomic_store(&alloc_count, 0);
            atomic_store(&alloc_countdown, k);
            atomic_store(&alloc_counting, true);
            hp_code code = cases[i].yuv ? hp_encode_webp_yuv420(&planes.p, f.width, f.height, &out, &e, &err)
                                        : encode(&f, cases[i].alpha, cases[i].encoding, &out, &e, &err);
            atomic_store(&alloc_counting, false);
            /* The k-th allocation was never reached: this encode ran with nothing failing. */
            finished = atomic_load(&alloc_countdown) > 0;
            atomic_store(&alloc_countdown, 0);
            if (code == HP_OK) {
                bool good = png ? png_matches(&e, &f, cases[i].alpha) : webp_compare(&e, &f, cases[i].alpha).decoded;
                recovered += !finished;
                if (!good) {
                    tap_diag("%s, allocation %ld failing: HP_OK, but the file does not decode", cases[i].name, k);
                    damaged++;
                    wrong += png || finished; /* libwebp's lost failures are only counted (see the top) */
                }
            } else {
                failures++;
                if (code != HP_ERR_OUT_OF_MEMORY || !is_empty(&e) || !err.message[0]) {
                    tap_diag("%s, allocation %ld failing: %s \"%s\"", cases[i].name, k, hp_code_name(code),
                             err.message);
                    wrong++;
                }
            }
            hp_encoded_free(&e);
        }
        if (failures == 0)
            tap_diag("no allocation failed: malloc is not this program's (valgrind without "
                     "--soname-synonyms=somalloc=nouserintercepts, or a sanitizer)");
        tap_ok(finished && wrong == 0 && failures > 0,
               "%s: each allocation failing in turn gives out_of_memory with an empty result, or HP_OK%s "
               "(%ld out_of_memory, %ld HP_OK%s)",
               cases[i].name, png ? " and the same samples" : "", failures, recovered,
               damaged ? ", of them damaged by libwebp's lost errors: see the diagnostics" : "");
        free(planes.mem);
        frame_free(&f);
    }
}

/* --- WebP from Y'CbCr 4:2:0 planes (hp_encode_webp_yuv420: what the daemon's GPU makes) ---------------- */

static void test_webp_yuv420(void)
{
    /* Odd sizes, padded strides, with and without alpha; the RGB path of the same frame beside it. */
    for (int alpha = 0; alpha <= 1; alpha++) {
        test_frame f = make_frame(257, 193, 8, alpha ? FRAME_SMOOTH_ALPHA : FRAME_SMOOTH, 17);
        test_planes t = make_planes(&f, alpha, 11);
        hp_output_params out = output(HP_OUTPUT_WEBP, 90, false, 2, 8);
        hp_encoded e, rgb;
        hp_err err = {0};
        hp_code code = hp_encode_webp_yuv420(&t.p, f.width, f.height, &out, &e, &err);
        webp_check r = code == HP_OK ? webp_compare(&e, &f, alpha) : (webp_check){0};
        hp_code rc = encode(&f, alpha, HP_ENCODING_SRGB_LIKE, &out, &rgb, NULL);
        webp_check rr = rc == HP_OK ? webp_compare(&rgb, &f, alpha) : (webp_check){0};
        tap_ok(code == HP_OK && r.decoded && r.psnr >= LOSSY_PSNR_MIN && r.alpha_exact && r.has_alpha == alpha &&
                   e.cpu_ms > 0,
               "webp from YUV 4:2:0 planes, q90 %s 257x193 smooth, strides padded: PSNR %.2f dB >= %.0f (libwebp's "
               "own conversion: %.2f dB), alpha %s, %zu bytes (%s)",
               alpha ? "RGBA" : "RGB", r.psnr, LOSSY_PSNR_MIN, rr.psnr, alpha ? "exact" : "absent", e.size,
               code == HP_OK ? "ok" : err.message);
        hp_encoded_free(&e);
        hp_encoded_free(&rgb);
        free(t.mem);
        frame_free(&f);
    }

    test_frame f = make_frame(8, 8, 8, FRAME_SMOOTH, 3);
    test_planes t = make_planes(&f, false, 0);
    hp_encoded e;
    hp_err err = {0};
    hp_output_params lossless = output(HP_OUTPUT_WEBP, 90, true, 2, 8), png = output(HP_OUTPUT_PNG, 90, false, 2, 8);
    hp_output_params ok = output(HP_OUTPUT_WEBP, 90, false, 2, 8);
    hp_code code = hp_encode_webp_yuv420(&t.p, 8, 8, &lossless, &e, &err);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && is_empty(&e) && strcmp(err.field, "output.format") == 0,
           "webp from planes refuses lossless: %s (%s)", hp_code_name(code), err.message);
    code = hp_encode_webp_yuv420(&t.p, 8, 8, &png, &e, &err);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && is_empty(&e), "webp from planes refuses format png: %s (%s)",
           hp_code_name(code), err.message);
    hp_yuv420 narrow = t.p;
    narrow.uv_stride = 3;
    code = hp_encode_webp_yuv420(&narrow, 8, 8, &ok, &e, &err);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && is_empty(&e) && strstr(err.message, "stride"),
           "webp from planes refuses a chroma stride under half the width: %s (%s)", hp_code_name(code), err.message);
    code = hp_encode_webp_yuv420(&t.p, 0, 8, &ok, &e, &err);
    tap_ok(code == HP_ERR_INVALID_ARGUMENT && is_empty(&e), "webp from planes refuses a 0x8 frame: %s (%s)",
           hp_code_name(code), err.message);
    code = hp_encode_webp_yuv420(&t.p, 16384, 8, &ok, &e, &err);
    tap_ok(code != HP_OK && is_empty(&e), "webp from planes refuses a frame wider than its strides: %s (%s)",
           hp_code_name(code), err.message);
    free(t.mem);
    frame_free(&f);
}

/* --- PNG in strips (issue 6: one frame's PNG deflated on several threads) -------------------------- */

static void test_png_strips(void)
{
    static const struct {
        uint32_t width, height, bit_depth, effort, threads;
        bool alpha;
        hp_output_encoding encoding;
    } cases[] = {
        {1100, 1000, 8, 2, 4, false, HP_ENCODING_SRGB_LIKE}, {1100, 1000, 8, 0, 3, true, HP_ENCODING_SRGB},
        {1024, 1024, 16, 6, 5, true, HP_ENCODING_LINEAR},     {16384, 64, 8, 2, 100, false, HP_ENCODING_SRGB},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        test_frame f = make_frame(cases[i].width, cases[i].height, cases[i].bit_depth, FRAME_PHOTO, 500 + i);
        hp_output_params out = output(HP_OUTPUT_PNG, 90, false, cases[i].effort, cases[i].bit_depth);
        hp_encoded one, strips;
        hp_err err = {0};
        hp_encode_set_png_threads(1);
        hp_code c1 = encode(&f, cases[i].alpha, cases[i].encoding, &out, &one, &err);
        hp_encode_set_png_threads(cases[i].threads);
        hp_code c2 = encode(&f, cases[i].alpha, cases[i].encoding, &out, &strips, &err);
        png_chunks k1, k2;
        bool chunks = c1 == HP_OK && c2 == HP_OK && png_read_chunks(&one, &k1) && png_read_chunks(&strips, &k2) &&
                      k1.srgb == k2.srgb && k1.gama == k2.gama && k1.gamma == k2.gamma && chrm_is_rec709(&k2) &&
                      k1.text == k2.text && strcmp(k1.comment, k2.comment) == 0;
        double ratio = c1 == HP_OK && c2 == HP_OK ? (double)strips.size / (double)one.size : 0;
        tap_ok(c2 == HP_OK && png_matches(&strips, &f, cases[i].alpha) && chunks && ratio < 1.03,
               "png %u-bit %s %ux%u effort %u in strips on %u threads: the same samples and chunks as libspng's "
               "single-threaded file, %.1f%% of its size (%s)",
               cases[i].bit_depth, cases[i].alpha ? "RGBA" : "RGB", f.width, f.height, cases[i].effort,
               cases[i].threads, 100 * ratio, c2 == HP_OK ? "ok" : err.message);
        hp_encoded_free(&one);
        hp_encoded_free(&strips);
        frame_free(&f);
    }

    /* Every allocation failing in turn, threads included (a thread that cannot start leaves its strip to
     * the calling thread). */
    test_frame f = make_frame(1024, 1024, 8, FRAME_SMOOTH_ALPHA, 77);
    hp_output_params out = output(HP_OUTPUT_PNG, 90, false, 1, 8);
    hp_encode_set_png_threads(2);
    long failures = 0, recovered = 0, wrong = 0;
    bool finished = false;
    for (long k = 1; k < 10000 && !finished; k++) {
        hp_encoded e;
        hp_err err = {0};
        atomic_store(&alloc_count, 0);
        atomic_store(&alloc_countdown, k);
        atomic_store(&alloc_counting, true);
        hp_code code = encode(&f, true, HP_ENCODING_SRGB_LIKE, &out, &e, &err);
        atomic_store(&alloc_counting, false);
        finished = atomic_load(&alloc_countdown) > 0;
        atomic_store(&alloc_countdown, 0);
        if (code == HP_OK) {
            recovered += !finished;
            wrong += !png_matches(&e, &f, true);
        } else {
            failures++;
            wrong += code != HP_ERR_OUT_OF_MEMORY || !is_empty(&e) || !err.message[0];
        }
        hp_encoded_free(&e);
    }
    tap_ok(finished && wrong == 0 && failures > 0,
           "png in strips: each allocation failing in turn gives out_of_memory with an empty result, or HP_OK and "
           "the same samples (%ld out_of_memory, %ld HP_OK)",
           failures, recovered);
    hp_encode_set_png_threads(0);
    frame_free(&f);
}

int main(void)
{
    test_png_round_trips();
    test_png_effort();
    test_png_chunks();
    test_png_strips();
    test_webp_lossless();
    test_webp_lossy();
    test_webp_yuv420();
    test_limits();
    test_allocation_failures();
    return tap_done();
}

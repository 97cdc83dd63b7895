/* The studio-colour encoders as a specification: JPEG (api/codecs/encode_jpeg.h), AVIF (api/codecs/encode_avif.h) and the
 * PNG tagged with cICP (api/codecs/encode_png_hdr.h). Every file is decoded again by the library's own decoder
 * (libjpeg, libavif with dav1d or libaom, libspng) and compared with the frame that went in.
 *
 * The frames are real: Blender's evening street (tests/data, 960x540, RGBA half), tone-mapped crudely here
 * (Reinhard per channel) to 8-bit sRGB-like code values, and to 16-bit PQ code values (BT.2100 PQ, scene 1.0 at
 * 203 cd/m2, BT.2408's reference white). The alpha of the RGBA cases is made (the render is opaque): a smooth
 * ramp with a hard-edged disc cut out of it, every value from 0 to the maximum.
 *
 * Tolerances, stated once (measured with libjpeg-turbo 2.1.5, libavif 0.11.1 with libaom 3.6.0 and dav1d 1.0.0;
 * the bounds leave room for other versions; Cycles' noise makes the street hard to compress):
 *   JPEG quality 95, 4:4:4, the whole 960x540 frame: PSNR over R, G, B >= 35 dB and mean absolute error
 *     <= 3.5 code values (measured 37.4 dB, 2.51). Quality 95 4:2:0: >= 30 dB, <= 5.0 (32.6, 3.74); quality 60
 *     4:4:4: >= 24 dB, <= 10.5 (26.8, 8.0); both files smaller than quality 95 4:4:4's.
 *   AVIF quality 100 (AV1 lossless), 4:4:4, 10 and 12 bits, a 482x271 crop: each R, G, B within 2 code values
 *     of the input rescaled to the file's depth, round(v * (2^d - 1) / 65535): libavif's Y'CbCr round trip
 *     rounds Y', Cb and Cr to d bits (B' = Y' + 1.8814 Cb: up to 1.44 code values before the last rounding);
 *     measured 2 at both depths. Alpha exact against libavif's own rescaling of it (src/alpha.c, in float):
 *     coded losslessly. The identity matrix at 8 bits: exact. CICP, full range, depth and subsampling read
 *     back equal what was written.
 *   AVIF quality 80 (the default), PSNR in the file's code values: 10-bit 4:4:4 >= 36 dB (measured 38.5),
 *     10-bit 4:2:0 >= 33 dB (35.2), 8-bit sRGB 4:4:4 >= 35 dB (37.3).
 *   PNG with cICP, 8 and 16 bits, RGB and RGBA, through the strips, through libspng and around a zlib stream
 *     (the GPU's path): samples exact, the cICP chunk's four bytes exact (9 16 0 1 for PQ), the only chunk
 *     between IHDR and IDAT (no sRGB, iCCP, gAMA, cHRM).
 * Every bad argument gives its hp_code with a message and an empty result. JPEG and the cICP PNG are also
 * encoded with each allocation failing in turn (malloc interposed as in tests/test_encode.c): out_of_memory
 * and an empty result, or HP_OK and a file that decodes. AVIF cannot be: libavif 0.11 aborts when malloc fails.
 * Leaks are valgrind's to say, with this program's malloc left alone:
 *     valgrind --soname-synonyms=somalloc=nouserintercepts --error-exitcode=1 --leak-check=full \
 *         build/tests/test_encode_formats
 * HDRPOST_BENCH=1 also times a 4K frame (the street tiled 4 x 4) in each format; times are printed, never
 * asserted. */
#include <avif/avif.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <spng.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include <jpeglib.h>

#include "api/codecs/encode.h"
#include "api/codecs/encode_avif.h"
#include "api/codecs/encode_jpeg.h"
#include "api/codecs/encode_png_hdr.h"
#include "api/icc_profiles.h"
#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "tap.h"

/* --- Failing allocations on demand (as tests/test_encode.c) --------------------------------------------- */

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);

static atomic_long alloc_countdown; /* k > 0: the k-th allocation from now fails */
static atomic_bool alloc_counting;

static bool alloc_should_fail(void)
{
    if (!atomic_load(&alloc_counting) || atomic_load(&alloc_countdown) <= 0 ||
        atomic_fetch_sub(&alloc_countdown, 1) != 1)
        return false;
    errno = ENOMEM;
    return true;
}

void *malloc(size_t size) { return alloc_should_fail() ? NULL : __libc_malloc(size); }
void *calloc(size_t count, size_t size) { return alloc_should_fail() ? NULL : __libc_calloc(count, size); }
void *realloc(void *ptr, size_t size) { return alloc_should_fail() ? NULL : __libc_realloc(ptr, size); }
void free(void *ptr) { __libc_free(ptr); }

/* --- The frames --------------------------------------------------------------------------------------- */

typedef struct test_frame {
    uint32_t width, height, bit_depth;
    void *pixels; /* RGBA, uint8_t or host-order uint16_t */
} test_frame;

static float *street;          /* RGBA32F */
static uint32_t street_w, street_h;

static bool load_street(void)
{
    hp_image_info info;
    hp_err e = {0};
    street = hp_image_decode_file(HP_TEST_DATA "/blender_street_960x540_singlelayer.exr", HP_LAYOUT_RGBA32F, NULL,
                                  &info, &e);
    street_w = street ? info.width : 0, street_h = street ? info.height : 0;
    return street != NULL;
}

/* BT.2100 PQ inverse EOTF of luminance / 10000 cd/m2 (SMPTE ST 2084 equation 5.2). */
static double pq_encode(double y)
{
    const double m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32,
                 c3 = 2392.0 / 4096 * 32;
    double p = pow(fmin(fmax(y, 0.0), 1.0), m1);
    return pow((c1 + c2 * p) / (1 + c3 * p), m2);
}

/* The made alpha at (x, y) of a w x h frame, 0..1: a ramp with a disc cut out, 0 in the disc. */
static double made_alpha(uint32_t x, uint32_t y, uint32_t w, uint32_t h)
{
    double u = (double)x / (w - 1), v = (double)y / (h - 1);
    return hypot(u - 0.3, v - 0.6) < 0.15 ? 0.0 : fmin(1.0, 0.1 + u * 0.6 + v * 0.5);
}

/* A width x height window of the street at (x0, y0) (tiled where it runs over), tone-mapped: 8 bits sRGB-like
 * or 16 bits PQ; with_alpha: the made alpha, else opaque. */
static test_frame make_frame(uint32_t width, uint32_t height, uint32_t bit_depth, uint32_t x0, uint32_t y0,
                             bool with_alpha)
{
    test_frame f = {width, height, bit_depth, malloc((size_t)width * height * 4 * (bit_depth / 8))};
    const double max = bit_depth == 8 ? 255.0 : 65535.0;
    for (uint32_t y = 0; y < height; y++) {
        for (uint32_t x = 0; x < width; x++) {
            const float *s = street + (((size_t)(y0 + y) % street_h) * street_w + (x0 + x) % street_w) * 4;
            double v[4];
            for (int c = 0; c < 3; c++) {
                double lin = fmax((double)s[c], 0.0);
                v[c] = bit_depth == 8 ? pow(lin / (1 + lin), 1 / 2.2) : pq_encode(lin * 203.0 / 10000.0);
            }
            v[3] = with_alpha ? made_alpha(x, y, width, height) : 1.0;
            size_t i = ((size_t)y * width + x) * 4;
            for (int c = 0; c < 4; c++) {
                double q = fmin(fmax(v[c], 0.0), 1.0) * max + 0.5;
                if (bit_depth == 8)
                    ((uint8_t *)f.pixels)[i + c] = (uint8_t)q;
                else
                    ((uint16_t *)f.pixels)[i + c] = (uint16_t)q;
            }
        }
    }
    return f;
}

static uint32_t sample(const test_frame *f, size_t pixel, int c)
{
    return f->bit_depth == 8 ? ((const uint8_t *)f->pixels)[pixel * 4 + c]
                             : ((const uint16_t *)f->pixels)[pixel * 4 + c];
}

static bool is_empty(const hp_encoded *e)
{
    return !e->data && !e->size && !e->mime;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Differences of R, G, B against a reference, in code values of `max`. */
typedef struct diff_stats {
    double psnr, mean_abs;
    uint32_t max_abs;
} diff_stats;

typedef struct diff_sum {
    double sq, abs;
    uint32_t max_abs;
    size_t n;
} diff_sum;

static void diff_add(diff_sum *d, double got, double want)
{
    double e = fabs(got - want);
    d->sq += e * e, d->abs += e, d->n++;
    if (e > d->max_abs)
        d->max_abs = (uint32_t)(e + 0.5);
}

static diff_stats diff_result(const diff_sum *d, double max)
{
    double mse = d->n ? d->sq / (double)d->n : 0;
    return (diff_stats){.psnr = mse > 0 ? 10 * log10(max * max / mse) : INFINITY,
                        .mean_abs = d->n ? d->abs / (double)d->n : 0, .max_abs = d->max_abs};
}

/* --- JPEG --------------------------------------------------------------------------------------------- */

typedef struct jpeg_back {
    bool ok;
    uint32_t width, height;
    int luma_h, luma_v;   /* the Y component's sampling factors: 2 2 for 4:2:0, 1 1 for 4:4:4 */
    uint8_t *rgb;         /* malloc'd */
    uint8_t *icc;         /* malloc'd by libjpeg (jpeg_read_icc_profile), or NULL */
    unsigned icc_size;
} jpeg_back;

typedef struct jpeg_decode_failure {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
} jpeg_decode_failure;

static void jpeg_decode_jump(j_common_ptr cinfo)
{
    longjmp(((jpeg_decode_failure *)cinfo->err)->jump, 1);
}

static void jpeg_decode_rows(struct jpeg_decompress_struct *d, jpeg_back *b)
{
    while (d->output_scanline < d->output_height) {
        JSAMPROW row = b->rgb + (size_t)d->output_scanline * b->width * 3;
        jpeg_read_scanlines(d, &row, 1);
    }
}

/* libjpeg's decoder, to RGB; the state lives in *d and *b, outside the function that calls setjmp. */
static bool jpeg_decode_run(struct jpeg_decompress_struct *d, jpeg_decode_failure *fail, const hp_encoded *e,
                            jpeg_back *b)
{
    if (setjmp(fail->jump))
        return false;
    jpeg_create_decompress(d);
    jpeg_mem_src(d, e->data, (unsigned long)e->size);
    jpeg_save_markers(d, JPEG_APP0 + 2, 0xffff); /* ICC_PROFILE markers */
    jpeg_read_header(d, TRUE);
    b->luma_h = d->comp_info[0].h_samp_factor, b->luma_v = d->comp_info[0].v_samp_factor;
    if (!jpeg_read_icc_profile(d, &b->icc, &b->icc_size))
        b->icc = NULL;
    d->out_color_space = JCS_RGB;
    jpeg_start_decompress(d);
    b->width = d->output_width, b->height = d->output_height;
    b->rgb = malloc((size_t)b->width * b->height * 3);
    if (!b->rgb)
        return false;
    jpeg_decode_rows(d, b);
    jpeg_finish_decompress(d);
    return true;
}

static jpeg_back jpeg_decode(const hp_encoded *e)
{
    jpeg_back b = {0};
    struct jpeg_decompress_struct d;
    jpeg_decode_failure fail;
    d.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_decode_jump;
    b.ok = e->data && jpeg_decode_run(&d, &fail, e, &b);
    jpeg_destroy_decompress(&d);
    return b;
}

static void jpeg_back_free(jpeg_back *b)
{
    free(b->rgb);
    free(b->icc);
}

static diff_stats jpeg_compare(const jpeg_back *b, const test_frame *f)
{
    diff_sum d = {0};
    for (size_t p = 0; p < (size_t)f->width * f->height; p++)
        for (int c = 0; c < 3; c++)
            diff_add(&d, b->rgb[p * 3 + c], sample(f, p, c));
    return diff_result(&d, 255);
}

static hp_encoded jpeg_encode(const test_frame *f, uint32_t quality, hp_jpeg_subsampling sub,
                              hp_output_colorspace space, hp_output_encoding encoding, hp_code *code)
{
    hp_jpeg_options opt = {.quality = quality, .subsampling = sub, .colorspace = space};
    hp_encoded e;
    hp_err err = {0};
    *code = hp_encode_jpeg(f->pixels, f->width, f->height, f->bit_depth, encoding, &opt, &e, &err);
    if (*code != HP_OK)
        tap_diag("hp_encode_jpeg: %s %s", hp_code_name(*code), err.message);
    return e;
}

static void test_jpeg_quality(const test_frame *street8)
{
    static const struct {
        uint32_t quality;
        hp_jpeg_subsampling sub;
        double min_psnr, max_mean;
        const char *name;
    } cases[] = {
        {95, HP_JPEG_SUBSAMPLING_444, 35.0, 3.5, "quality 95 4:4:4"},
        {95, HP_JPEG_SUBSAMPLING_420, 30.0, 5.0, "quality 95 4:2:0"},
        {60, HP_JPEG_SUBSAMPLING_444, 24.0, 10.5, "quality 60 4:4:4"},
    };
    size_t first_size = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hp_code code;
        hp_encoded e = jpeg_encode(street8, cases[i].quality, cases[i].sub, HP_OUTPUT_SRGB, HP_ENCODING_SRGB, &code);
        jpeg_back b = jpeg_decode(&e);
        int factor = cases[i].sub == HP_JPEG_SUBSAMPLING_444 ? 1 : 2;
        bool shape = b.ok && b.width == street8->width && b.height == street8->height && b.luma_h == factor &&
                     b.luma_v == factor && !b.icc && e.mime && !strcmp(e.mime, "image/jpeg");
        diff_stats s = shape ? jpeg_compare(&b, street8) : (diff_stats){0};
        tap_ok(code == HP_OK && shape && s.psnr >= cases[i].min_psnr && s.mean_abs <= cases[i].max_mean,
               "jpeg %s, the street %ux%u: decodes by libjpeg at its size and subsampling, no ICC profile (srgb), "
               "PSNR %.2f dB >= %.0f, mean error %.3f <= %.1f (max %u), %zu bytes", cases[i].name, street8->width,
               street8->height, s.psnr, cases[i].min_psnr, s.mean_abs, cases[i].max_mean, s.max_abs, e.size);
        if (i == 0)
            first_size = e.size;
        else
            tap_ok(e.size < first_size, "jpeg %s is smaller than quality 95 4:4:4 (%zu < %zu bytes)", cases[i].name,
                   e.size, first_size);
        jpeg_back_free(&b);
        hp_encoded_free(&e);
    }
}

/* Display P3 carries the same profile as the PNG and WebP of that encoding, whole, in APP2 markers. */
static void test_jpeg_icc(const test_frame *f)
{
    static const hp_output_encoding encodings[] = {HP_ENCODING_SRGB, HP_ENCODING_SRGB_LIKE, HP_ENCODING_LINEAR};
    for (size_t i = 0; i < 3; i++) {
        hp_code code;
        hp_encoded e = jpeg_encode(f, 90, HP_JPEG_SUBSAMPLING_420, HP_OUTPUT_DISPLAY_P3, encodings[i], &code);
        jpeg_back b = jpeg_decode(&e);
        const hp_icc_profile *want = &hp_icc_spaces[HP_OUTPUT_DISPLAY_P3].profile[encodings[i]];
        bool same = b.ok && b.icc && b.icc_size == want->icc_size && !memcmp(b.icc, want->icc, want->icc_size);
        tap_ok(code == HP_OK && same, "jpeg display_p3, encoding %d: libjpeg reads back the ICC profile \"%s\" "
               "byte for byte (%zu bytes)", (int)encodings[i], want->name, want->icc_size);
        jpeg_back_free(&b);
        hp_encoded_free(&e);
    }
}

/* One bad argument: its code, a message, the field where one is named, an empty result. */
static void expect_refusal(hp_code code, hp_code want, const hp_err *err, const hp_encoded *e, const char *field,
                           const char *what)
{
    bool field_ok = !field || !strcmp(err->field, field);
    tap_ok(code == want && err->message[0] && field_ok && (!e || is_empty(e)), "%s: %s%s%s (\"%s\")", what,
           hp_code_name(want), field ? " naming " : "", field ? field : "", err->message);
}

static void test_jpeg_refusals(const test_frame *f)
{
    const hp_jpeg_options good = HP_JPEG_OPTIONS_DEFAULTS;
    static const struct {
        const char *what, *field;
        uint32_t width, height, bit_depth, quality;
        int sub, space, encoding;
        bool null_pixels, null_opt;
        hp_code want;
    } cases[] = {
        {"jpeg of NULL pixels", NULL, 8, 8, 8, 90, 0, 0, 1, true, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg with NULL options", NULL, 8, 8, 8, 90, 0, 0, 1, false, true, HP_ERR_INVALID_ARGUMENT},
        {"jpeg 0 pixels wide", NULL, 0, 8, 8, 90, 0, 0, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg 0 pixels high", NULL, 8, 0, 8, 90, 0, 0, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg quality 0", "output.quality", 8, 8, 8, 0, 0, 0, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg quality 101", "output.quality", 8, 8, 8, 101, 0, 0, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg of 16-bit samples", "output.bit_depth", 8, 8, 16, 90, 0, 0, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg of 10-bit samples", "output.bit_depth", 8, 8, 10, 90, 0, 0, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg subsampling 2", "output.jpeg_subsampling", 8, 8, 8, 90, 2, 0, 1, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"jpeg rec2020", "output.colorspace", 8, 8, 8, 90, 0, 2, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg colour space 7", "output.colorspace", 8, 8, 8, 90, 0, 7, 1, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg encoding 9", NULL, 8, 8, 8, 90, 0, 1, 9, false, false, HP_ERR_INVALID_ARGUMENT},
        {"jpeg 16385 pixels wide", NULL, 16385, 8, 8, 90, 0, 0, 1, false, false, HP_ERR_TOO_LARGE},
        {"jpeg 16385 pixels high", NULL, 8, 16385, 8, 90, 0, 0, 1, false, false, HP_ERR_TOO_LARGE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hp_jpeg_options opt = good;
        opt.quality = cases[i].quality;
        opt.subsampling = (hp_jpeg_subsampling)cases[i].sub;
        opt.colorspace = (hp_output_colorspace)cases[i].space;
        hp_encoded e = {.data = (uint8_t *)1}; /* must come back emptied */
        hp_err err = {0};
        hp_code code = hp_encode_jpeg(cases[i].null_pixels ? NULL : f->pixels, cases[i].width, cases[i].height,
                                      cases[i].bit_depth, (hp_output_encoding)cases[i].encoding,
                                      cases[i].null_opt ? NULL : &opt, &e, &err);
        expect_refusal(code, cases[i].want, &err, &e, cases[i].field, cases[i].what);
    }
    hp_err err = {0};
    hp_code code = hp_encode_jpeg(f->pixels, 8, 8, 8, HP_ENCODING_SRGB, &good, NULL, &err);
    expect_refusal(code, HP_ERR_INVALID_ARGUMENT, &err, NULL, NULL, "jpeg with a NULL result");
}

/* Each allocation failing in turn (libjpeg's pools, the output buffer as it grows): out_of_memory and an
 * empty result, or HP_OK and a file that decodes to the same size. */
static void test_jpeg_allocations(const test_frame *f)
{
    hp_jpeg_options opt = {.quality = 90, .subsampling = HP_JPEG_SUBSAMPLING_420, .colorspace = HP_OUTPUT_DISPLAY_P3};
    long failures = 0, recovered = 0, wrong = 0;
    bool finished = false;
    for (long k = 1; k < 10000 && !finished; k++) {
        hp_encoded e;
        hp_err err = {0};
        atomic_store(&alloc_countdown, k);
        atomic_store(&alloc_counting, true);
        hp_code code = hp_encode_jpeg(f->pixels, f->width, f->height, 8, HP_ENCODING_SRGB, &opt, &e, &err);
        atomic_store(&alloc_counting, false);
        finished = atomic_load(&alloc_countdown) > 0;
        atomic_store(&alloc_countdown, 0);
        if (code == HP_OK) {
            jpeg_back b = jpeg_decode(&e);
            recovered += !finished; /* libjpeg's small pools retry with less slop (jmemmgr.c alloc_small) */
            wrong += !(b.ok && b.width == f->width && b.icc);
            jpeg_back_free(&b);
        } else {
            failures++;
            if (code != HP_ERR_OUT_OF_MEMORY || !is_empty(&e) || !err.message[0]) {
                tap_diag("jpeg, allocation %ld failing: %s \"%s\"", k, hp_code_name(code), err.message);
                wrong++;
            }
        }
        hp_encoded_free(&e);
    }
    tap_ok(finished && failures > 0 && wrong == 0,
           "jpeg %ux%u display_p3: each allocation failing in turn gives out_of_memory with an empty result, or "
           "HP_OK and a tagged file that decodes (%ld out_of_memory, %ld HP_OK)", f->width, f->height, failures,
           recovered);
}

/* --- AVIF --------------------------------------------------------------------------------------------- */

typedef struct avif_back {
    bool ok;
    avifImage *image;  /* as decoded: depth, format, range, CICP, planes */
    avifRGBImage rgb;  /* RGBA at the file's depth */
} avif_back;

static avif_back avif_decode(const hp_encoded *e)
{
    avif_back b = {0};
    avifDecoder *dec = avifDecoderCreate();
    b.image = avifImageCreateEmpty();
    if (avifDecoderReadMemory(dec, b.image, e->data, e->size) == AVIF_RESULT_OK) {
        avifRGBImageSetDefaults(&b.rgb, b.image);
        b.rgb.format = AVIF_RGB_FORMAT_RGBA;
        b.rgb.depth = b.image->depth;
        avifRGBImageAllocatePixels(&b.rgb);
        b.ok = avifImageYUVToRGB(b.image, &b.rgb) == AVIF_RESULT_OK;
    }
    avifDecoderDestroy(dec);
    return b;
}

static void avif_back_free(avif_back *b)
{
    avifRGBImageFreePixels(&b->rgb);
    avifImageDestroy(b->image);
}

/* The input rescaled to the file's depth, as encode_avif.h says libavif does; alpha exactly as libavif 0.11's
 * avifReformatAlpha (src/alpha.c) rounds it, in float: (int)(0.5f + a / in_max * out_max). */
static double rescaled(const test_frame *f, size_t p, int c, uint32_t depth)
{
    double in_max = f->bit_depth == 8 ? 255.0 : 65535.0, out_max = (double)((1u << depth) - 1);
    if (c == 3 && f->bit_depth != depth)
        return (double)(int)(0.5f + (float)sample(f, p, c) / (float)in_max * (float)out_max);
    return floor(sample(f, p, c) * out_max / in_max + 0.5);
}

typedef struct avif_result {
    diff_stats colour;
    uint32_t alpha_max_abs; /* alpha's largest difference, in the file's code values */
} avif_result;

static avif_result avif_compare(const avif_back *b, const test_frame *f)
{
    diff_sum colour = {0}, alpha = {0};
    uint32_t depth = b->image->depth;
    for (size_t p = 0; p < (size_t)f->width * f->height; p++) {
        const uint8_t *row = b->rgb.pixels + (p / f->width) * b->rgb.rowBytes;
        size_t x = p % f->width;
        for (int c = 0; c < 4; c++) {
            double got = depth == 8 ? row[x * 4 + c] : ((const uint16_t *)row)[x * 4 + c];
            diff_add(c < 3 ? &colour : &alpha, got, rescaled(f, p, c, depth));
        }
    }
    return (avif_result){diff_result(&colour, (1u << depth) - 1), alpha.max_abs};
}

/* The file's description, as libavif's decoder reads it. */
static bool avif_described(const avif_back *b, const hp_avif_options *opt, const test_frame *f, bool alpha)
{
    const avifImage *im = b->image;
    avifPixelFormat format = opt->subsampling == HP_AVIF_SUBSAMPLING_444 ? AVIF_PIXEL_FORMAT_YUV444
                                                                         : AVIF_PIXEL_FORMAT_YUV420;
    return b->ok && im->width == f->width && im->height == f->height && im->depth == opt->depth &&
           im->yuvFormat == format && im->yuvRange == AVIF_RANGE_FULL && im->colorPrimaries == opt->cicp.primaries &&
           im->transferCharacteristics == opt->cicp.transfer && im->matrixCoefficients == opt->cicp.matrix &&
           (im->alphaPlane != NULL) == alpha;
}

/* max_colour >= 0: the bound on every R, G, B difference; < 0: min_psnr bounds them instead. */
static void test_avif_case(const test_frame *f, const hp_avif_options *opt, bool alpha, int max_colour,
                           double min_psnr, const char *name)
{
    hp_encoded e;
    hp_err err = {0};
    double t0 = now_ms();
    hp_code code = hp_encode_avif(f->pixels, f->width, f->height, f->bit_depth, alpha, opt, &e, &err);
    double ms = now_ms() - t0;
    if (code != HP_OK)
        tap_diag("hp_encode_avif: %s %s", hp_code_name(code), err.message);
    avif_back b = code == HP_OK ? avif_decode(&e) : (avif_back){0};
    bool described = code == HP_OK && avif_described(&b, opt, f, alpha) && !strcmp(e.mime, "image/avif");
    avif_result r = described ? avif_compare(&b, f) : (avif_result){0};
    if (alpha && r.alpha_max_abs)
        tap_diag("alpha differs by up to %u", r.alpha_max_abs);
    bool colour_ok = max_colour >= 0 ? r.colour.max_abs <= (uint32_t)max_colour : r.colour.psnr >= min_psnr;
    tap_ok(described && colour_ok && (!alpha || r.alpha_max_abs == 0),
           "avif %s, %ux%u %u-bit input: CICP %u/%u/%u full range, depth and subsampling read back; colour max "
           "error %u%s, PSNR %.2f dB%s%s; %zu bytes, %.0f ms", name, f->width, f->height, f->bit_depth,
           opt->cicp.primaries, opt->cicp.transfer, opt->cicp.matrix, r.colour.max_abs,
           max_colour >= 0 ? " (bound)" : "", r.colour.psnr, max_colour >= 0 ? "" : " (bound)",
           alpha ? ", alpha exact" : "", e.size, ms);
    if (!described && b.ok)
        tap_diag("read back: %ux%u depth %u format %d range %d cicp %d/%d/%d alpha %s", b.image->width,
                 b.image->height, b.image->depth, (int)b.image->yuvFormat, (int)b.image->yuvRange,
                 (int)b.image->colorPrimaries, (int)b.image->transferCharacteristics,
                 (int)b.image->matrixCoefficients, b.image->alphaPlane ? "yes" : "no");
    avif_back_free(&b);
    hp_encoded_free(&e);
}

static void test_avif(const test_frame *pq16, const test_frame *pq16_alpha, const test_frame *srgb8)
{
    hp_avif_options opt = HP_AVIF_OPTIONS_DEFAULTS;
    opt.quality = 100;
    opt.depth = 10;
    test_avif_case(pq16, &opt, false, 2, 0, "quality 100 (lossless AV1) 10-bit 4:4:4 BT.2100 PQ");
    opt.depth = 12;
    test_avif_case(pq16_alpha, &opt, true, 2, 0, "quality 100 (lossless AV1) 12-bit 4:4:4 BT.2100 PQ, alpha");
    opt.depth = 10;
    opt.cicp = HP_CICP_BT2100_HLG;
    test_avif_case(pq16_alpha, &opt, true, 2, 0, "quality 100 10-bit 4:4:4 HLG code points, alpha");

    opt = HP_AVIF_OPTIONS_DEFAULTS;
    test_avif_case(pq16, &opt, false, -1, 36.0, "default quality 80, 10-bit 4:4:4 PQ");
    opt.subsampling = HP_AVIF_SUBSAMPLING_420;
    test_avif_case(pq16_alpha, &opt, true, -1, 33.0, "default quality 80, 10-bit 4:2:0 PQ, alpha");
    opt = HP_AVIF_OPTIONS_DEFAULTS;
    opt.depth = 8;
    opt.cicp = HP_CICP_SRGB;
    test_avif_case(srgb8, &opt, false, -1, 35.0, "quality 80, 8-bit 4:4:4 sRGB (1/13/6)");
    opt.cicp = (hp_cicp){HP_CICP_PRIMARIES_BT709, HP_CICP_TRANSFER_SRGB, HP_CICP_MATRIX_IDENTITY};
    opt.quality = 100;
    test_avif_case(srgb8, &opt, false, 0, 0, "quality 100, 8-bit sRGB, identity matrix (GBR: exact)");
}

static void test_avif_refusals(const test_frame *f)
{
    static const struct {
        const char *what, *field;
        uint32_t width, height, bit_depth, depth, quality, speed;
        int sub;
        hp_cicp cicp;
        bool null_pixels, null_opt;
        hp_code want;
    } cases[] = {
        {"avif of NULL pixels", NULL, 8, 8, 16, 10, 80, 9, 0, {9, 16, 9}, true, false, HP_ERR_INVALID_ARGUMENT},
        {"avif with NULL options", NULL, 8, 8, 16, 10, 80, 9, 0, {9, 16, 9}, false, true, HP_ERR_INVALID_ARGUMENT},
        {"avif 0 pixels wide", NULL, 0, 8, 16, 10, 80, 9, 0, {9, 16, 9}, false, false, HP_ERR_INVALID_ARGUMENT},
        {"avif 0 pixels high", NULL, 8, 0, 16, 10, 80, 9, 0, {9, 16, 9}, false, false, HP_ERR_INVALID_ARGUMENT},
        {"avif of 12-bit input samples", "output.bit_depth", 8, 8, 12, 10, 80, 9, 0, {9, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif depth 16", "output.bit_depth", 8, 8, 16, 16, 80, 9, 0, {9, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif depth 9", "output.bit_depth", 8, 8, 16, 9, 80, 9, 0, {9, 16, 9}, false, false, HP_ERR_INVALID_ARGUMENT},
        {"avif depth 8 with PQ", "output.bit_depth", 8, 8, 16, 8, 80, 9, 0, {9, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif quality 101", "output.quality", 8, 8, 16, 10, 101, 9, 0, {9, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif speed 11", "output.effort", 8, 8, 16, 10, 80, 11, 0, {9, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif subsampling 2", "output.avif_subsampling", 8, 8, 16, 10, 80, 9, 2, {9, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif primaries 2 (unspecified)", "output.cicp", 8, 8, 16, 10, 80, 9, 0, {2, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif primaries 13 (reserved)", "output.cicp", 8, 8, 16, 10, 80, 9, 0, {13, 16, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif transfer 0 (reserved)", "output.cicp", 8, 8, 16, 10, 80, 9, 0, {9, 0, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif transfer 19 (reserved)", "output.cicp", 8, 8, 16, 10, 80, 9, 0, {9, 19, 9}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif matrix 10 (BT.2020 constant luminance)", "output.cicp", 8, 8, 16, 10, 80, 9, 0, {9, 16, 10}, false,
         false, HP_ERR_INVALID_ARGUMENT},
        {"avif matrix 14 (ICtCp)", "output.cicp", 8, 8, 16, 10, 80, 9, 0, {9, 16, 14}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif matrix 0 (identity) in 4:2:0", "output.cicp", 8, 8, 16, 10, 80, 9, 1, {9, 16, 0}, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"avif 16385 pixels wide", "output.format", 16385, 8, 16, 10, 80, 9, 0, {9, 16, 9}, false, false,
         HP_ERR_TOO_LARGE},
        {"avif 8705 pixels high", "output.format", 8, 8705, 16, 10, 80, 9, 0, {9, 16, 9}, false, false,
         HP_ERR_TOO_LARGE},
        {"avif 8192x4353 (over AV1's 35651584 pixels)", "output.format", 8192, 4353, 16, 10, 80, 9, 0, {9, 16, 9},
         false, false, HP_ERR_TOO_LARGE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hp_avif_options opt = {.depth = cases[i].depth, .quality = cases[i].quality, .speed = cases[i].speed,
                               .subsampling = (hp_avif_subsampling)cases[i].sub, .cicp = cases[i].cicp};
        hp_encoded e = {.data = (uint8_t *)1};
        hp_err err = {0};
        hp_code code = hp_encode_avif(cases[i].null_pixels ? NULL : f->pixels, cases[i].width, cases[i].height,
                                      cases[i].bit_depth, false, cases[i].null_opt ? NULL : &opt, &e, &err);
        expect_refusal(code, cases[i].want, &err, &e, cases[i].field, cases[i].what);
    }
    hp_avif_options opt = HP_AVIF_OPTIONS_DEFAULTS;
    hp_err err = {0};
    hp_code code = hp_encode_avif(f->pixels, 8, 8, 16, false, &opt, NULL, &err);
    expect_refusal(code, HP_ERR_INVALID_ARGUMENT, &err, NULL, NULL, "avif with a NULL result");
}

/* --- PNG tagged with cICP ------------------------------------------------------------------------------ */

typedef struct png_back {
    bool ok;
    struct spng_ihdr ihdr;
    uint8_t *raw;           /* SPNG_FMT_RAW: PNG's own sample layout, 16-bit big-endian */
    uint8_t cicp[4];
    uint32_t cicp_count;    /* 1: libspng kept one unknown chunk, cICP with 4 bytes; else 0 */
    bool colour_chunks;     /* sRGB, iCCP, gAMA or cHRM read by libspng */
    char order[64];         /* the chunk types in file order, a run of IDATs once: "IHDR cICP IDAT IEND" */
} png_back;

/* The chunk types as they lie in the file (lengths trusted: our own files, each checked by libspng too). */
static void png_chunk_order(const hp_encoded *e, char *order, size_t cap)
{
    order[0] = 0;
    for (size_t at = 8; at + 12 <= e->size;) {
        const uint8_t *p = e->data + at;
        uint32_t len = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        size_t used = strlen(order);
        bool idat_run = used >= 4 && !memcmp(p + 4, "IDAT", 4) && !strcmp(order + used - 4, "IDAT");
        if (!idat_run && used + 6 < cap)
            snprintf(order + used, cap - used, "%s%.4s", used ? " " : "", (const char *)p + 4);
        at += 12 + (size_t)len;
    }
}

static png_back png_decode(const hp_encoded *e)
{
    png_back b = {0};
    if (!e->data)
        return b;
    png_chunk_order(e, b.order, sizeof(b.order));
    spng_ctx *ctx = spng_ctx_new(0);
    size_t size = 0;
    bool ok = ctx && !spng_set_option(ctx, SPNG_KEEP_UNKNOWN_CHUNKS, 1) &&
              !spng_set_png_buffer(ctx, e->data, e->size) && !spng_get_ihdr(ctx, &b.ihdr) &&
              !spng_decoded_image_size(ctx, SPNG_FMT_RAW, &size) && (b.raw = malloc(size)) &&
              !spng_decode_image(ctx, b.raw, size, SPNG_FMT_RAW, 0);
    /* The count first: libspng 0.7.3 leaves it as given when it copies, and copies the first chunk only
     * (spng_get_unknown_chunks: a memcpy of one struct), which is enough for files with one. */
    struct spng_unknown_chunk chunk;
    uint32_t n = 0;
    if (ok && !spng_get_unknown_chunks(ctx, NULL, &n) && n == 1 && !spng_get_unknown_chunks(ctx, &chunk, &n) &&
        !memcmp(chunk.type, "cICP", 4) && chunk.length == 4) {
        memcpy(b.cicp, chunk.data, 4);
        b.cicp_count = 1;
    }
    uint8_t intent;
    uint32_t gamma;
    struct spng_chrm_int chrm;
    struct spng_iccp iccp;
    b.colour_chunks = ok && (!spng_get_srgb(ctx, &intent) || !spng_get_gama_int(ctx, &gamma) ||
                             !spng_get_chrm_int(ctx, &chrm) || !spng_get_iccp(ctx, &iccp));
    b.ok = ok;
    spng_ctx_free(ctx);
    return b;
}

/* The samples as they went in: RGB or RGBA, 16-bit ones big-endian. */
static bool png_samples_match(const png_back *b, const test_frame *f, bool alpha)
{
    const int channels = alpha ? 4 : 3, bytes = f->bit_depth / 8;
    if (!b->ok || b->ihdr.width != f->width || b->ihdr.height != f->height || b->ihdr.bit_depth != f->bit_depth ||
        b->ihdr.color_type != (alpha ? SPNG_COLOR_TYPE_TRUECOLOR_ALPHA : SPNG_COLOR_TYPE_TRUECOLOR))
        return false;
    const uint8_t *r = b->raw;
    for (size_t p = 0; p < (size_t)f->width * f->height; p++) {
        for (int c = 0; c < channels; c++, r += bytes) {
            uint32_t got = bytes == 1 ? r[0] : (uint32_t)r[0] << 8 | r[1];
            if (got != sample(f, p, c))
                return false;
        }
    }
    return true;
}

static bool png_tagged(const png_back *b, const uint8_t want[4])
{
    return b->ok && b->cicp_count == 1 && !memcmp(b->cicp, want, 4) && !b->colour_chunks &&
           !strcmp(b->order, "IHDR cICP IDAT IEND");
}

static hp_output_params png_out(uint32_t effort, uint32_t bit_depth, hp_output_colorspace space)
{
    return (hp_output_params){.format = HP_OUTPUT_PNG, .effort = effort, .bit_depth = bit_depth, .colorspace = space};
}

static void test_png_case(const test_frame *f, bool alpha, uint32_t effort, hp_output_colorspace space,
                          hp_cicp cicp, const char *path)
{
    hp_output_params out = png_out(effort, f->bit_depth, space);
    hp_encoded e;
    hp_err err = {0};
    hp_code code = hp_encode_png_cicp(f->pixels, f->width, f->height, f->bit_depth, alpha, &cicp, &out, &e, &err);
    if (code != HP_OK)
        tap_diag("hp_encode_png_cicp: %s %s", hp_code_name(code), err.message);
    png_back b = png_decode(&e);
    const uint8_t want[4] = {cicp.primaries, cicp.transfer, 0, 1};
    tap_ok(code == HP_OK && png_tagged(&b, want) && png_samples_match(&b, f, alpha) && !strcmp(e.mime, "image/png"),
           "png cICP %u %u 0 1, %ux%u %u-bit %s, effort %u (%s): chunks \"%s\", the cICP bytes exact, no sRGB, "
           "iCCP, gAMA or cHRM, every sample exact (%zu bytes)", cicp.primaries, cicp.transfer, f->width, f->height,
           f->bit_depth, alpha ? "RGBA" : "RGB", effort, path, b.order, e.size);
    free(b.raw);
    hp_encoded_free(&e);
}

/* The rows filtered with filter type 0 and deflated by zlib: the stream the GPU would have made. */
static uint8_t *png_stream(const test_frame *f, bool alpha, size_t room_before, size_t room_after, size_t *len)
{
    const size_t channels = alpha ? 4 : 3, bytes = f->bit_depth / 8, row = 1 + f->width * channels * bytes;
    uint8_t *rows = malloc(row * f->height), *w = rows;
    for (uint32_t y = 0; y < f->height; y++) {
        *w++ = 0;
        for (uint32_t x = 0; x < f->width; x++) {
            for (size_t c = 0; c < channels; c++) {
                uint32_t v = sample(f, (size_t)y * f->width + x, (int)c);
                if (bytes == 2)
                    *w++ = (uint8_t)(v >> 8);
                *w++ = (uint8_t)v;
            }
        }
    }
    uLongf cap = compressBound(row * f->height);
    uint8_t *buf = malloc(room_before + cap + room_after);
    compress2(buf + room_before, &cap, rows, row * f->height, 1);
    free(rows);
    *len = cap;
    return buf;
}

static void test_png_in_place(const test_frame *f)
{
    const hp_cicp cicp = HP_CICP_BT2100_PQ;
    const uint8_t want[4] = {9, 16, 0, 1};
    for (int roomy = 1; roomy >= 0; roomy--) {
        size_t before = roomy ? 64 : 10, len;
        uint8_t *buf = png_stream(f, true, before, 16, &len);
        hp_output_params out = png_out(2, 16, HP_OUTPUT_REC2020);
        hp_encoded e;
        hp_err err = {0};
        hp_code code = hp_encode_png_cicp_in_place(buf + before, len, before, 16, f->width, f->height, 16, true,
                                                   &cicp, &out, &e, &err);
        png_back b = png_decode(&e);
        bool placed = roomy ? e.in_place && e.data == buf + before - (8 + 25 + 16 + 8) : !e.in_place;
        tap_ok(code == HP_OK && placed && png_tagged(&b, want) && png_samples_match(&b, f, true),
               "png cICP around a zlib stream (the GPU's path), %u bytes of room before it: %s, chunks \"%s\", "
               "cICP exact, samples exact", (unsigned)before, roomy ? "written in place" : "copied out", b.order);
        free(b.raw);
        hp_encoded_free(&e);
        free(buf);
    }
}

/* hp_encode_png_in_place without cICP, which shares png_in_place() with the cICP one: its colour chunks. */
static void test_png_in_place_colour_chunks(const test_frame *f)
{
    size_t len;
    uint8_t *buf = png_stream(f, true, 1024, 16, &len);
    hp_output_params out = png_out(2, 16, HP_OUTPUT_REC2020);
    hp_encoded e;
    hp_err err = {0};
    hp_code code = hp_encode_png_in_place(buf + 1024, len, 1024, 16, f->width, f->height, 16, true,
                                          HP_ENCODING_SRGB, &out, &e, &err);
    png_back b = png_decode(&e);
    tap_ok(code == HP_OK && e.in_place && png_samples_match(&b, f, true) && b.colour_chunks && !b.cicp_count &&
               !strcmp(b.order, "IHDR cHRM gAMA iCCP IDAT IEND"),
           "png without cICP around a zlib stream (hp_encode_png_in_place, rec2020): in place, chunks \"%s\", "
           "samples exact", b.order);
    free(b.raw);
    hp_encoded_free(&e);
    free(buf);
}

static void test_png(const test_frame *pq16, const test_frame *pq16_alpha, const test_frame *srgb8)
{
    test_png_case(pq16, false, 2, HP_OUTPUT_REC2020, HP_CICP_BT2100_PQ, "strips, run-length deflate");
    test_png_case(pq16_alpha, true, 4, HP_OUTPUT_REC2020, HP_CICP_BT2100_PQ, "libspng, zlib level 6");
    test_png_case(pq16_alpha, true, 1, HP_OUTPUT_REC2020, HP_CICP_BT2100_HLG, "strips");
    test_png_case(srgb8, false, 4, HP_OUTPUT_SRGB, HP_CICP_SRGB, "libspng");
    test_png_case(srgb8, true, 0, HP_OUTPUT_DISPLAY_P3, HP_CICP_DISPLAY_P3, "strips, SUB filter");
    /* Several strips joined into one stream, on a frame this small. */
    hp_encode_set_png_threads(3);
    hp_encode_set_png_strip_min(1);
    test_png_case(pq16_alpha, true, 5, HP_OUTPUT_REC2020, HP_CICP_BT2100_PQ, "3 strips, zlib level 8");
    hp_encode_set_png_strip_min(0);
    hp_encode_set_png_threads(0);
    test_png_in_place(pq16_alpha);
    test_png_in_place_colour_chunks(pq16_alpha);
}

static void test_png_refusals(const test_frame *f16)
{
    const hp_cicp pq = HP_CICP_BT2100_PQ;
    static const struct {
        const char *what, *field;
        uint32_t width, height, bit_depth, out_depth, effort;
        int format, space;
        hp_cicp cicp;
        bool null_pixels, null_out, null_cicp;
        hp_code want;
    } cases[] = {
        {"png cICP of NULL pixels", NULL, 8, 8, 16, 16, 2, 1, 2, {9, 16, 0}, true, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP with NULL out", NULL, 8, 8, 16, 16, 2, 1, 2, {9, 16, 0}, false, true, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP with NULL code points", "output.cicp", 8, 8, 16, 16, 2, 1, 2, {9, 16, 0}, false, false, true,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP with output.format webp", "output.format", 8, 8, 16, 16, 2, 0, 2, {9, 16, 0}, false, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP primaries 9 on srgb samples", "output.colorspace", 8, 8, 16, 16, 2, 1, 0, {9, 16, 0}, false,
         false, false, HP_ERR_INVALID_ARGUMENT},
        {"png cICP transfer 3 (reserved)", "output.cicp", 8, 8, 16, 16, 2, 1, 2, {9, 3, 0}, false, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP primaries 0 (reserved)", "output.cicp", 8, 8, 16, 16, 2, 1, 2, {0, 16, 0}, false, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP of 10-bit samples", "output.bit_depth", 8, 8, 10, 10, 2, 1, 2, {9, 16, 0}, false, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP, output.bit_depth 8 for 16-bit samples", "output.bit_depth", 8, 8, 16, 8, 2, 1, 2, {9, 16, 0},
         false, false, false, HP_ERR_INVALID_ARGUMENT},
        {"png cICP effort 7", "output.effort", 8, 8, 16, 16, 7, 1, 2, {9, 16, 0}, false, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP 0 pixels wide", NULL, 0, 8, 16, 16, 2, 1, 2, {9, 16, 0}, false, false, false,
         HP_ERR_INVALID_ARGUMENT},
        {"png cICP 16385 pixels high", NULL, 8, 16385, 16, 16, 2, 1, 2, {9, 16, 0}, false, false, false,
         HP_ERR_TOO_LARGE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        hp_output_params out = png_out(cases[i].effort, cases[i].out_depth, (hp_output_colorspace)cases[i].space);
        out.format = (hp_output_format)cases[i].format;
        hp_encoded e = {.data = (uint8_t *)1};
        hp_err err = {0};
        hp_code code = hp_encode_png_cicp(cases[i].null_pixels ? NULL : f16->pixels, cases[i].width, cases[i].height,
                                          cases[i].bit_depth, false, cases[i].null_cicp ? NULL : &cases[i].cicp,
                                          cases[i].null_out ? NULL : &out, &e, &err);
        expect_refusal(code, cases[i].want, &err, &e, cases[i].field, cases[i].what);
    }
    hp_output_params out = png_out(2, 16, HP_OUTPUT_REC2020);
    hp_err err = {0};
    hp_code code = hp_encode_png_cicp(f16->pixels, 8, 8, 16, false, &pq, &out, NULL, &err);
    expect_refusal(code, HP_ERR_INVALID_ARGUMENT, &err, NULL, NULL, "png cICP with a NULL result");
    hp_encoded e = {.data = (uint8_t *)1};
    code = hp_encode_png_cicp_in_place(NULL, 100, 64, 16, 8, 8, 16, false, &pq, &out, &e, &err);
    expect_refusal(code, HP_ERR_INVALID_ARGUMENT, &err, &e, NULL, "png cICP in place around a NULL stream");
    const hp_cicp bad = {9, 99, 0};
    uint8_t stream[64] = {0};
    code = hp_encode_png_cicp_in_place(stream + 32, 8, 32, 16, 8, 8, 16, false, &bad, &out, &e, &err);
    expect_refusal(code, HP_ERR_INVALID_ARGUMENT, &err, &e, "output.cicp", "png cICP in place, transfer 99");
}

/* The cICP PNG through libspng (effort 4) and the strips (effort 2), each allocation failing in turn. */
static void test_png_allocations(const test_frame *f)
{
    const hp_cicp cicp = HP_CICP_BT2100_PQ;
    const uint8_t want[4] = {9, 16, 0, 1};
    for (uint32_t effort = 2; effort <= 4; effort += 2) {
        hp_output_params out = png_out(effort, 16, HP_OUTPUT_REC2020);
        long failures = 0, recovered = 0, wrong = 0;
        bool finished = false;
        for (long k = 1; k < 10000 && !finished; k++) {
            hp_encoded e;
            hp_err err = {0};
            atomic_store(&alloc_countdown, k);
            atomic_store(&alloc_counting, true);
            hp_code code = hp_encode_png_cicp(f->pixels, f->width, f->height, 16, true, &cicp, &out, &e, &err);
            atomic_store(&alloc_counting, false);
            finished = atomic_load(&alloc_countdown) > 0;
            atomic_store(&alloc_countdown, 0);
            if (code == HP_OK) {
                png_back b = png_decode(&e);
                recovered += !finished;
                wrong += !(png_tagged(&b, want) && png_samples_match(&b, f, true));
                free(b.raw);
            } else {
                failures++;
                if (code != HP_ERR_OUT_OF_MEMORY || !is_empty(&e) || !err.message[0]) {
                    tap_diag("png cICP effort %u, allocation %ld failing: %s \"%s\"", effort, k, hp_code_name(code),
                             err.message);
                    wrong++;
                }
            }
            hp_encoded_free(&e);
        }
        tap_ok(finished && failures > 0 && wrong == 0,
               "png cICP %ux%u RGBA16, effort %u (%s): each allocation failing in turn gives out_of_memory with an "
               "empty result, or HP_OK with the tag and the samples (%ld out_of_memory, %ld HP_OK)", f->width,
               f->height, effort, effort == 2 ? "strips" : "libspng", failures, recovered);
    }
}

/* --- 4K timings (HDRPOST_BENCH=1) ---------------------------------------------------------------------- */

static void bench_4k(void)
{
    test_frame pq = make_frame(3840, 2160, 16, 0, 0, false), sdr = make_frame(3840, 2160, 8, 0, 0, false);
    static const uint32_t runs[][2] = {{6, 10}, {7, 10}, {8, 10}, {9, 10}, {10, 10}, {HP_AVIF_SPEED_DEFAULT, 12}};
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        hp_avif_options opt = HP_AVIF_OPTIONS_DEFAULTS;
        opt.speed = runs[i][0];
        opt.depth = runs[i][1];
        hp_encoded e;
        hp_err err = {0};
        double t0 = now_ms();
        hp_code code = hp_encode_avif(pq.pixels, pq.width, pq.height, 16, false, &opt, &e, &err);
        double ms = now_ms() - t0;
        avif_back b = code == HP_OK ? avif_decode(&e) : (avif_back){0};
        avif_result r = b.ok ? avif_compare(&b, &pq) : (avif_result){0};
        tap_diag("4K avif speed %u, %u-bit 4:4:4 PQ, quality %u: %s, %.0f ms, %zu bytes, PSNR %.2f dB", opt.speed,
                 opt.depth, opt.quality, hp_code_name(code), ms, e.size, r.colour.psnr);
        avif_back_free(&b);
        hp_encoded_free(&e);
    }
    for (int sub = 0; sub < 2; sub++) {
        hp_jpeg_options opt = {.quality = 90, .subsampling = (hp_jpeg_subsampling)sub};
        hp_encoded e;
        hp_err err = {0};
        double t0 = now_ms();
        hp_code code = hp_encode_jpeg(sdr.pixels, sdr.width, sdr.height, 8, HP_ENCODING_SRGB, &opt, &e, &err);
        tap_diag("4K jpeg quality 90 %s: %s, %.0f ms, %zu bytes", sub ? "4:4:4" : "4:2:0", hp_code_name(code),
                 now_ms() - t0, e.size);
        hp_encoded_free(&e);
    }
    for (uint32_t effort = 2; effort <= 4; effort += 2) {
        hp_output_params out = png_out(effort, 16, HP_OUTPUT_REC2020);
        const hp_cicp cicp = HP_CICP_BT2100_PQ;
        hp_encoded e;
        hp_err err = {0};
        double t0 = now_ms();
        hp_code code = hp_encode_png_cicp(pq.pixels, pq.width, pq.height, 16, false, &cicp, &out, &e, &err);
        tap_diag("4K png cICP 16-bit RGB effort %u: %s, %.0f ms, %zu bytes", effort, hp_code_name(code),
                 now_ms() - t0, e.size);
        hp_encoded_free(&e);
    }
    free(pq.pixels);
    free(sdr.pixels);
}

int main(void)
{
    if (!load_street())
        return tap_bail("the street frame (tests/data) decodes");
    test_frame srgb8 = make_frame(street_w, street_h, 8, 0, 0, false);
    test_jpeg_quality(&srgb8);
    test_frame crop8 = make_frame(160, 96, 8, 400, 200, false);
    test_jpeg_icc(&crop8);
    test_jpeg_refusals(&crop8);
    test_jpeg_allocations(&crop8);

    /* AVIF on a crop of odd height (4:2:0 rounds the chroma size up): lossless AV1 is slow. */
    test_frame pq16 = make_frame(482, 271, 16, 300, 150, false), pq16a = make_frame(482, 271, 16, 300, 150, true);
    test_frame sdr8 = make_frame(482, 271, 8, 300, 150, false);
    test_avif(&pq16, &pq16a, &sdr8);
    test_avif_refusals(&pq16);

    test_png(&pq16, &pq16a, &sdr8);
    test_png_refusals(&pq16);
    test_frame crop16a = make_frame(96, 64, 16, 400, 200, true);
    test_png_allocations(&crop16a);

    const char *bench = getenv("HDRPOST_BENCH");
    if (bench && !strcmp(bench, "1"))
        bench_4k();
    test_frame *frames[] = {&srgb8, &crop8, &pq16, &pq16a, &sdr8, &crop16a};
    for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++)
        free(frames[i]->pixels);
    free(street);
    return tap_done();
}

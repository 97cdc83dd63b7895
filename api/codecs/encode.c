/* WebP (libwebp) and PNG (libspng) encoders. Every choice (effort mappings, filters, chunks, limits) is
 * documented in encode.h; this file says why only where the code alone does not. */
#include "api/codecs/encode.h"

#include <pthread.h>
#include <libdeflate.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <webp/decode.h>
#include <webp/encode.h>
#include <webp/mux.h>
#include <zlib.h>

#include "api/codecs/crc32_threads.h"
#include "api/codecs/deflate_runs.h"
#include "api/codecs/encode_png_hdr.h"
#include "api/codecs/image.h"
/* Generated at build time by tools/make_icc.c (api/meson.build): the profiles of the wide-gamut outputs and
 * their cHRM values, by hp_output_colorspace and hp_output_encoding. */
#include "api/icc_profiles.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/log.h"

_Static_assert(HP_ENCODE_MAX_SIDE == HP_IMAGE_MAX_SIDE, "the encoders take every frame the decoders give");
_Static_assert(HP_ENCODE_WEBP_MAX_SIDE == WEBP_MAX_DIMENSION, "libwebp's own limit");
/* A row of the largest frame, 16384 pixels x 8 bytes, is 128 KiB: int strides (libwebp) cannot overflow. */
_Static_assert((uint64_t)HP_ENCODE_MAX_SIDE * 8 <= INT32_MAX, "row strides fit in int");

/* The profile that tags an output colour space with samples of this encoding; NULL for sRGB, which the
 * sRGB chunk (PNG) or no tag at all (WebP) already describes. */
static const hp_icc_profile *output_profile(hp_output_colorspace space, hp_output_encoding encoding)
{
    return space == HP_OUTPUT_SRGB ? NULL : &hp_icc_spaces[space].profile[encoding];
}

hp_output_encoding hp_output_encoding_for_gamma(hp_gamma_mode mode)
{
    switch (mode) {
    case HP_GAMMA_SRGB: return HP_ENCODING_SRGB;
    case HP_GAMMA_LINEAR: return HP_ENCODING_LINEAR;
    case HP_GAMMA_LOCAL:
    case HP_GAMMA_LOCAL_LUMINANCE: break;
    }
    return HP_ENCODING_SRGB_LIKE;
}

void hp_encoded_free(hp_encoded *result)
{
    if (!result)
        return;
    if (result->release)
        result->release(result->owner);
    else if (!result->in_place)
        free(result->data);
    *result = (hp_encoded){0};
}

/* The frame as the caller gave it: RGBA rows, tightly packed. */
typedef struct frame {
    const uint8_t *pixels;
    uint32_t width, height;
    uint32_t bit_depth;   /* 8 or 16 */
    bool alpha;           /* write A, or RGB only */
    size_t src_row_bytes; /* width * 4 samples * bit_depth / 8 */
    const hp_yuv420 *yuv; /* lossy WebP from these planes instead of pixels (hp_encode_webp_yuv420) */
    hp_output_encoding encoding; /* the samples' transfer: the colour chunks, and a WebP's ICC profile */
    const uint8_t *cicp;  /* PNG: a cICP chunk's 4 bytes instead of the colour chunks (encode_png_hdr.h), or NULL */
} frame;

/* --- WebP ------------------------------------------------------------------------------------------- */

/* libwebp writes the file through this, into one malloc'd buffer that becomes hp_encoded.data as it is
 * (WebPMemoryWriter's buffer would have to be released with WebPFree instead). */
typedef struct webp_sink {
    uint8_t *data;
    size_t size, capacity;
    bool out_of_memory;
} webp_sink;

static int webp_sink_write(const uint8_t *data, size_t size, const WebPPicture *picture)
{
    webp_sink *sink = picture->custom_ptr;
    if (size == 0)
        return 1;
    if (size > SIZE_MAX - sink->size) {
        sink->out_of_memory = true;
        return 0;
    }
    size_t needed = sink->size + size;
    if (needed > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity : 64 * 1024;
        while (capacity < needed)
            capacity = capacity > SIZE_MAX / 2 ? needed : capacity * 2;
        uint8_t *grown = realloc(sink->data, capacity);
        if (!grown) {
            sink->out_of_memory = true;
            return 0;
        }
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->size, data, size);
    sink->size = needed;
    return 1;
}

static hp_code webp_failure(WebPEncodingError code, bool sink_out_of_memory, const frame *f, uint32_t out_quality,
                            hp_err *err)
{
    switch (code) {
    case VP8_ENC_ERROR_OUT_OF_MEMORY:
    case VP8_ENC_ERROR_BITSTREAM_OUT_OF_MEMORY:
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "libwebp ran out of memory encoding a %ux%u frame", f->width,
                       f->height);
    case VP8_ENC_ERROR_BAD_WRITE:
        if (sink_out_of_memory)
            return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory holding the encoded WebP of a %ux%u frame",
                           f->width, f->height);
        break;
    case VP8_ENC_ERROR_PARTITION0_OVERFLOW:
        return hp_fail_field(err, HP_ERR_TOO_LARGE, "output.format",
                             "a %ux%u frame is too large or detailed for lossy WebP: its prediction modes overflow "
                             "VP8's 512 KiB first partition even without 4x4 intra modes; use output.lossless or "
                             "output.format png",
                             f->width, f->height);
    case VP8_ENC_ERROR_PARTITION_OVERFLOW:
        return hp_fail_field(err, HP_ERR_TOO_LARGE, "output.quality",
                             "a %ux%u frame at quality %u overflows VP8's 16 MiB token partitions; lower "
                             "output.quality, or use output.lossless or output.format png",
                             f->width, f->height, out_quality);
    case VP8_ENC_ERROR_FILE_TOO_BIG:
        return hp_fail_field(err, HP_ERR_TOO_LARGE, "output.format",
                             "the WebP of a %ux%u frame would pass WebP's 4 GiB file limit; use output.format png",
                             f->width, f->height);
    case VP8_ENC_OK:
        /* Failed with no error code: libwebp 1.2 leaves it unset when some of its allocations fail (seen by
         * failing each allocation in turn, tests/test_encode.c), and when its worker thread cannot start. */
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY,
                       "libwebp failed encoding a %ux%u frame without an error code (out of memory or threads)",
                       f->width, f->height);
    default: break;
    }
    return hp_fail(err, HP_ERR_INTERNAL, "libwebp failed to encode a %ux%u frame (WebPEncodingError %d)", f->width,
                   f->height, (int)code);
}

static const char *webp_mux_error_name(WebPMuxError e)
{
    switch (e) {
    case WEBP_MUX_OK: return "WEBP_MUX_OK";
    case WEBP_MUX_NOT_FOUND: return "WEBP_MUX_NOT_FOUND";
    case WEBP_MUX_INVALID_ARGUMENT: return "WEBP_MUX_INVALID_ARGUMENT";
    case WEBP_MUX_BAD_DATA: return "WEBP_MUX_BAD_DATA";
    case WEBP_MUX_MEMORY_ERROR: return "WEBP_MUX_MEMORY_ERROR";
    case WEBP_MUX_NOT_ENOUGH_DATA: return "WEBP_MUX_NOT_ENOUGH_DATA";
    }
    return "unknown";
}

/* The WebP libwebp wrote (file: the simple format, or VP8X with ALPH) tagged with an ICC profile:
 * libwebpmux writes it again in the extended format (WebP container specification, "Extended File Format":
 * VP8X with the ICC flag, then ICCP, then the image's chunks as they were; the image data is copied, not
 * decoded). On success *result holds the new file; file stays the caller's. WebPMuxAssemble() allocates
 * with WebPSafeMalloc(), which is malloc() (libwebp 1.2.4 src/utils/utils.c; WebPFree() is free()), so the
 * file is released by hp_encoded_free() as any other. */
static hp_code webp_add_icc(const webp_sink *file, const hp_icc_profile *icc, const frame *f, hp_encoded *result,
                            hp_err *err)
{
    const WebPData image = {file->data, file->size}, profile = {icc->icc, icc->icc_size};
    /* WebPMuxCreate() answers NULL both when an allocation fails and for data it cannot parse. The data is
     * libwebp's own file: when its header reads, NULL was memory. */
    WebPMux *mux = WebPMuxCreate(&image, 0);
    if (!mux) {
        if (WebPGetInfo(image.bytes, image.size, NULL, NULL))
            return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "libwebpmux ran out of memory reading the WebP of a %ux%u frame",
                           f->width, f->height);
        return hp_fail(err, HP_ERR_INTERNAL, "libwebpmux could not parse libwebp's WebP of a %ux%u frame",
                       f->width, f->height);
    }
    WebPData tagged;
    WebPDataInit(&tagged);
    WebPMuxError code = WebPMuxSetChunk(mux, "ICCP", &profile, 0);
    if (code == WEBP_MUX_OK)
        code = WebPMuxAssemble(mux, &tagged);
    WebPMuxDelete(mux);
    if (code != WEBP_MUX_OK) {
        WebPDataClear(&tagged);
        if (code == WEBP_MUX_MEMORY_ERROR)
            return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "libwebpmux ran out of memory adding the ICC profile to the "
                           "WebP of a %ux%u frame", f->width, f->height);
        return hp_fail(err, HP_ERR_INTERNAL, "libwebpmux failed adding the ICC profile \"%s\": %s (error %d)",
                       icc->name, webp_mux_error_name(code), (int)code);
    }
    *result = (hp_encoded){.data = (uint8_t *)tagged.bytes, .size = tagged.size, .mime = "image/webp"};
    return HP_OK;
}

/* The default quality is libwebp's own, 75 (pipeline/params.c). libwebp encodes a frame on one core, and on
 * the H200 host its encode of the 4K Blender street frame (libwebp 1.2.4, method 0, four rounds) took
 * 211-309 ms at quality 88, 180-250 at 80 and 161-226 at 75, for 1.186, 0.832 and 0.707 MB at 39.05, 37.03
 * and 35.93 dB PSNR: only 75 kept a request within the 250 ms issue 6 asks of the default WebP. Between 78
 * and 88 libwebp's FastMBAnalyze (methods 0 and 1) sends the same macroblocks to 4x4 intra prediction (the
 * spread of a block's sixteen 4x4 means under 8 + 9 * quality / 100 in integers: 15), from 89 more (4x4
 * blocks cost a mode search each: 90 took 1.4 times as long as 88); below that the time goes with the
 * number of coefficients coded.
 *
 * effort 0..6 -> the lossy method. Up to the default effort 2 it is method 0: on a 4K frame at quality 90
 * cwebp's encode took 0.33-0.36 s at method 0, 0.42-0.50 at 1, 0.45-0.63 at 2 (development machine), for
 * files 1.219, 1.198 and 1.183 MB of the same PSNR (46.3, 46.3, 46.2 dB): 3% for half again the time,
 * which a service answering in a few hundred milliseconds does not pay by default. */
static const int webp_method[7] = {0, 0, 0, 1, 2, 4, 6};

/* effort 0..6 -> WebPConfigLosslessPreset level 0..9, round(1.5 * effort): 0, 2, 3, 5, 6, 8, 9. */
static int webp_lossless_level(uint32_t effort)
{
    return (int)((effort * 3 + 1) / 2);
}

/* What WebP cannot store: BT.2020 (it needs 16 bits), more than 8 bits, more than its side. */
static hp_code webp_check(const frame *f, const hp_output_params *out, hp_err *err)
{
    /* hp_params_check() refuses this already (BT.2020 needs 16 bits); hp_encode() is also called directly. */
    if (out->colorspace == HP_OUTPUT_REC2020)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.colorspace",
                             "output.colorspace rec2020 needs output.format png and output.bit_depth 16; WebP stores "
                             "8 bits (use display_p3)");
    if (f->bit_depth != 8)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "output.bit_depth %u needs output.format png: WebP stores 8 bits per channel",
                             f->bit_depth);
    if (f->width > HP_ENCODE_WEBP_MAX_SIDE || f->height > HP_ENCODE_WEBP_MAX_SIDE)
        return hp_fail_field(err, HP_ERR_TOO_LARGE, "output.format",
                             "a %ux%u frame is over WebP's limit of %u pixels a side; use output.format png "
                             "(up to %u)",
                             f->width, f->height, HP_ENCODE_WEBP_MAX_SIDE, HP_ENCODE_MAX_SIDE);
    return HP_OK;
}

/* libwebp's configuration from the output parameters: lossless by effort, or lossy by quality and effort. */
static hp_code webp_configure(const hp_output_params *out, WebPConfig *config, hp_err *err)
{
    if (!WebPConfigInit(config))
        return hp_fail(err, HP_ERR_INTERNAL, "libwebp: WebPConfigInit failed (header and library versions differ)");
    if (out->lossless) {
        if (!WebPConfigLosslessPreset(config, webp_lossless_level(out->effort)))
            return hp_fail(err, HP_ERR_INTERNAL, "libwebp refused lossless preset level %d",
                           webp_lossless_level(out->effort));
        config->exact = 1;
    } else {
        config->quality = (float)out->quality;
        config->method = webp_method[out->effort];
    }
    config->thread_level = 1;
    /* Eight token partitions instead of one: each holds at most 16 MiB (VP8, RFC 6386 9.5), and a photograph
     * of 11000^2 at quality 90 already makes 28 MB. The cost is 21 bytes of partition sizes. */
    config->partitions = 3;
    if (!WebPValidateConfig(config))
        return hp_fail(err, HP_ERR_INTERNAL, "libwebp refused its configuration (quality %u, effort %u, lossless %d)",
                       out->quality, out->effort, (int)out->lossless);
    return HP_OK;
}

/* The frame as libwebp's picture; WebPPictureFree() it after, whatever this returns. */
static hp_code webp_picture(const frame *f, const WebPConfig *config, WebPPicture *picture, hp_err *err)
{
    if (!WebPPictureInit(picture))
        return hp_fail(err, HP_ERR_INTERNAL, "libwebp: WebPPictureInit failed (header and library versions differ)");
    picture->width = (int)f->width;
    picture->height = (int)f->height;
    /* Lossless codes ARGB; lossy codes YUV 4:2:0, converted straight from the rows at import, or given
     * (the picture then views the caller's planes: WebPPictureFree() leaves them alone; without `exact`
     * libwebp may flatten colour under fully transparent alpha in place, and the caller's planes allow it). */
    picture->use_argb = config->lossless;
    if (f->yuv) {
        picture->colorspace = f->yuv->a ? WEBP_YUV420A : WEBP_YUV420;
        picture->y = (uint8_t *)f->yuv->y, picture->u = (uint8_t *)f->yuv->u, picture->v = (uint8_t *)f->yuv->v;
        picture->y_stride = (int)f->yuv->y_stride, picture->uv_stride = (int)f->yuv->uv_stride;
        picture->a = (uint8_t *)f->yuv->a, picture->a_stride = f->yuv->a ? (int)f->yuv->y_stride : 0;
        return HP_OK;
    }
    int stride = (int)f->src_row_bytes;
    int imported = f->alpha ? WebPPictureImportRGBA(picture, f->pixels, stride)
                            : WebPPictureImportRGBX(picture, f->pixels, stride);
    if (!imported)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "libwebp could not allocate its picture of a %ux%u frame", f->width,
                       f->height);
    return HP_OK;
}

/* WebPEncode into sink, once more without 4x4 intra modes where the first partition overflows. */
static int webp_encode_into(WebPConfig *config, WebPPicture *picture, const frame *f, const hp_output_params *out,
                            webp_sink *sink)
{
    picture->writer = webp_sink_write;
    picture->custom_ptr = sink;
    int encoded = WebPEncode(config, picture);
    if (!encoded && picture->error_code == VP8_ENC_ERROR_PARTITION0_OVERFLOW) {
        /* VP8's first partition (every macroblock's prediction modes) holds at most 512 KiB (its size is a
         * 19-bit field, RFC 6386 9.1). libwebp's partition_limit 100 gives up 4x4 intra modes to make room
         * (it acts from method 3, where modes are chosen by rate-distortion; files grow a few percent).
         * Measured on a detailed photograph tiled to size, quality 90, effort 2: 12000^2 fits at once,
         * 13000^2 fits on this second attempt, 14000^2 does not fit at all. */
        hp_warn("webp: the prediction modes of a %ux%u frame overflow VP8's 512 KiB first partition at quality "
                "%u, effort %u; encoding again without 4x4 intra modes (partition_limit 100, effort %u)",
                f->width, f->height, out->quality, out->effort, out->effort < 3 ? 3 : out->effort);
        free(sink->data);
        *sink = (webp_sink){0};
        config->partition_limit = 100;
        if (config->method < 3)
            config->method = 3;
        encoded = WebPEncode(config, picture);
    }
    return encoded;
}

static hp_code encode_webp(const frame *f, const hp_output_params *out, hp_encoded *result, hp_err *err)
{
    WebPConfig config;
    WebPPicture picture = {0}; /* freed safely also where WebPPictureInit refused it */
    hp_code code = webp_check(f, out, err);
    if (code != HP_OK || (code = webp_configure(out, &config, err)) != HP_OK)
        return code;
    if ((code = webp_picture(f, &config, &picture, err)) != HP_OK) {
        WebPPictureFree(&picture);
        return code;
    }
    webp_sink sink = {0};
    int encoded = webp_encode_into(&config, &picture, f, out, &sink);
    WebPEncodingError failure = picture.error_code;
    WebPPictureFree(&picture);
    if (!encoded) {
        free(sink.data);
        return webp_failure(failure, sink.out_of_memory, f, out->quality, err);
    }
    /* The profile says the samples' transfer as PNG's does (encode.h): a viewer that reads the profile shows
     * linear or locally-gamma'd samples as they are, where one curve for all would shift their tones. */
    const hp_icc_profile *icc = output_profile(out->colorspace, f->encoding);
    if (icc) {
        hp_code tagged = webp_add_icc(&sink, icc, f, result, err);
        free(sink.data);
        return tagged;
    }
    *result = (hp_encoded){.data = sink.data, .size = sink.size, .mime = "image/webp"};
    return HP_OK;
}

/* --- PNG -------------------------------------------------------------------------------------------- */

/* effort 0..6 -> how the rows are deflated. Efforts 0 to 2, the default 2 among them, use the run-length
 * coder (deflate_runs.h): on the 4K Blender street frame it wrote 11.3 MB where zlib's level 2 wrote 13.5
 * MB and level 4 (lazy matching) 12.0 MB, in a fraction of the time (docs/BENCHMARKS.md). From effort 3
 * zlib searches for matches, levels 4, 6, 8, 9: slower, and smaller on frames with repeated structure
 * (flat graphics, text). Effort 0 is also Sub-only filtering; efforts 0 and 1 take zlib's level 1 where
 * libspng encodes (small frames at efforts 3 and up only: see hp_encode). */
static const int png_zlib_level[7] = {1, 1, 2, 4, 6, 8, 9};
#define PNG_RUNS_MAX_EFFORT 2u

/* libspng reports a failed allocation under several codes: SPNG_EMEM, SPNG_EZLIB_INIT when deflateInit2
 * fails, SPNG_EBADSTATE on a later call. Its allocator (zlib's included) is ours, so a failure is known
 * for certain: this thread's flag, set by the allocator. libspng calls it from the encoding thread only. */
static _Thread_local bool png_alloc_failed;

static void *png_malloc(size_t size)
{
    void *p = malloc(size);
    png_alloc_failed |= !p;
    return p;
}

static void *png_calloc(size_t count, size_t size)
{
    void *p = calloc(count, size);
    png_alloc_failed |= !p;
    return p;
}

static void *png_realloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size);
    png_alloc_failed |= !p && size;
    return p;
}

static void png_free(void *ptr)
{
    free(ptr);
}

static hp_code png_failure(int code, const char *what, hp_err *err)
{
    if (code == SPNG_EMEM || png_alloc_failed)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "libspng ran out of memory %s (%s)", what, spng_strerror(code));
    return hp_fail(err, HP_ERR_INTERNAL, "libspng failed %s: %s (error %d)", what, spng_strerror(code), code);
}

/* Bytes of one row as PNG stores it, before the filter byte: 3 or 4 samples of 1 or 2 bytes. */
static size_t png_row_bytes(const frame *f)
{
    return (size_t)f->width * (f->alpha ? 4 : 3) * (f->bit_depth / 8);
}

/* Rows go to libspng as they lie in the frame only for RGBA 8: the other layouts drop alpha or swap bytes. */
static bool png_row_as_is(const frame *f)
{
    return f->bit_depth == 8 && f->alpha;
}

/* Row y in PNG's sample layout: alpha dropped when not written, 16-bit samples big-endian (PNG 7.1). The
 * strip encoder of issue 6 packs its rows with this too. */
static void png_pack_row(const frame *f, uint32_t y, uint8_t *dst)
{
    const uint8_t *src = f->pixels + (size_t)y * f->src_row_bytes;
    const uint32_t channels = f->alpha ? 4 : 3;
    if (f->bit_depth == 8 && channels == 4) {
        memcpy(dst, src, (size_t)f->width * 4);
        return;
    }
    if (f->bit_depth == 8) { /* four bytes a pixel, each store overlapping the next pixel's; the last apart */
        for (uint32_t x = 0; x + 1 < f->width; x++, src += 4, dst += 3)
            memcpy(dst, src, 4);
        memcpy(dst, src, 3);
        return;
    }
    for (uint32_t x = 0; x < f->width; x++, src += 8) {
        for (uint32_t c = 0; c < channels; c++) {
            uint16_t v;
            memcpy(&v, src + 2 * c, sizeof(v)); /* the caller's buffer need not be 2-byte aligned */
            *dst++ = (uint8_t)(v >> 8);
            *dst++ = (uint8_t)(v & 0xff);
        }
    }
}

/* The tEXt of the local gamma modes. */
#define PNG_KWON_COMMENT                                                                                      \
    "Samples carry Kwon's dynamic local gamma (hdrpostd): an exponent per pixel near 1/2.2. gAMA gives the " \
    "nearest single exponent; no chunk can describe the per-pixel curve."

/* cHRM of an output colour space: x and y of white, red, green and blue, times 100000 (PNG 11.3.3.1). */
static const uint32_t *png_chrm(hp_output_colorspace space)
{
    /* Rec.709/sRGB primaries and D65 white (IEC 61966-2-1). */
    static const uint32_t srgb[8] = {31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000};
    return space == HP_OUTPUT_SRGB ? srgb : hp_icc_spaces[space].chrm;
}

/* gAMA, cHRM, sRGB or iCCP, and tEXt as encode.h lists them; or, with cicp (4 bytes), the cICP chunk alone
 * (encode_png_hdr.h). comment: the tEXt chunk, written for the local modes; iccp: room for the iCCP or cICP
 * chunk. libspng keeps both pointers (and cicp), not copies, so they live in the caller until spng_ctx_free().
 * The iCCP chunk goes to libspng whole, name, method and compressed profile as make_icc wrote them, as a
 * chunk it need not know (spng_set_unknown_chunks, placed after IHDR: after cHRM and gAMA, where libspng
 * would write its own iCCP). spng_set_iccp() would compress the profile on every request with zlib's own
 * allocator, whose failure libspng reports as a zlib error (SPNG_EZLIB), not as memory, and would write
 * other bytes than the strips' chunk. */
static hp_code png_set_colour_chunks(spng_ctx *ctx, hp_output_colorspace space, hp_output_encoding encoding,
                                     const uint8_t *cicp, struct spng_text *comment, struct spng_unknown_chunk *iccp,
                                     hp_err *err)
{
    if (cicp) { /* libspng 0.7.3 has no spng_set_cicp: a chunk it need not know, right after IHDR */
        *iccp = (struct spng_unknown_chunk){.type = {'c', 'I', 'C', 'P'}, .length = 4, .data = (void *)cicp,
                                            .location = SPNG_AFTER_IHDR};
        int rc = spng_set_unknown_chunks(ctx, iccp, 1);
        return rc == SPNG_OK ? HP_OK : png_failure(rc, "setting the cICP chunk", err);
    }
    const uint32_t *c = png_chrm(space);
    struct spng_chrm_int chrm = {.white_point_x = c[0], .white_point_y = c[1], .red_x = c[2], .red_y = c[3],
                                 .green_x = c[4], .green_y = c[5], .blue_x = c[6], .blue_y = c[7]};
    /* gAMA stores the encoding exponent x 100000: 1/2.2 -> 45455, linear -> 100000. */
    uint32_t gamma = encoding == HP_ENCODING_LINEAR ? 100000 : 45455;
    const hp_icc_profile *icc = output_profile(space, encoding);
    int rc = spng_set_chrm_int(ctx, &chrm);
    if (rc == SPNG_OK)
        rc = spng_set_gama_int(ctx, gamma);
    /* sRGB and iCCP never together: each is an embedded profile, and a file holds one at most (PNG 11.3.3.3). */
    if (rc == SPNG_OK && encoding == HP_ENCODING_SRGB && !icc)
        rc = spng_set_srgb(ctx, 0 /* perceptual rendering intent */);
    if (rc == SPNG_OK && icc) {
        *iccp = (struct spng_unknown_chunk){.type = {'i', 'C', 'C', 'P'}, .length = icc->iccp_size,
                                            .data = (void *)icc->iccp, .location = SPNG_AFTER_IHDR};
        rc = spng_set_unknown_chunks(ctx, iccp, 1);
    }
    if (rc == SPNG_OK && encoding == HP_ENCODING_SRGB_LIKE)
        rc = spng_set_text(ctx, comment, 1);
    return rc == SPNG_OK ? HP_OK : png_failure(rc, "setting the colour chunks", err);
}

static hp_code encode_png(const frame *f, const hp_output_params *out, hp_output_encoding encoding,
                          hp_encoded *result, hp_err *err)
{
    /* malloc underneath: spng_get_png_buffer()'s buffer is released by hp_encoded_free()'s free(). */
    struct spng_alloc alloc = {png_malloc, png_realloc, png_calloc, png_free};
    png_alloc_failed = false;
    spng_ctx *ctx = spng_ctx_new2(&alloc, SPNG_CTX_ENCODER);
    if (!ctx)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "libspng could not allocate an encoder");
    uint8_t *row_buf = NULL;
    hp_code code = HP_OK;
    int rc;

    struct spng_ihdr ihdr = {
        .width = f->width,
        .height = f->height,
        .bit_depth = (uint8_t)f->bit_depth,
        .color_type = f->alpha ? SPNG_COLOR_TYPE_TRUECOLOR_ALPHA : SPNG_COLOR_TYPE_TRUECOLOR,
    };
    if ((rc = spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1)) != SPNG_OK ||
        (rc = spng_set_option(ctx, SPNG_IMG_COMPRESSION_LEVEL, png_zlib_level[out->effort])) != SPNG_OK ||
        (out->effort == 0 && (rc = spng_set_option(ctx, SPNG_FILTER_CHOICE, SPNG_FILTER_CHOICE_SUB)) != SPNG_OK) ||
        (rc = spng_set_ihdr(ctx, &ihdr)) != SPNG_OK) {
        code = png_failure(rc, "setting up the encoder", err);
        goto done;
    }
    char comment_text[] = PNG_KWON_COMMENT; /* spng_text.text is char * */
    struct spng_text comment = {.keyword = "Comment", .type = SPNG_TEXT, .length = sizeof(comment_text) - 1,
                                .text = comment_text};
    struct spng_unknown_chunk iccp;
    if ((code = png_set_colour_chunks(ctx, out->colorspace, encoding, f->cicp, &comment, &iccp, err)) != HP_OK)
        goto done;

    /* Progressive: one row at a time, so no full-size converted copy of the frame is ever made.
     * SPNG_FMT_RAW: rows are already in PNG's byte order (png_pack_row), libspng converts nothing. */
    rc = spng_encode_image(ctx, NULL, 0, SPNG_FMT_RAW, SPNG_ENCODE_PROGRESSIVE | SPNG_ENCODE_FINALIZE);
    if (rc != SPNG_OK) {
        code = png_failure(rc, "starting the image", err);
        goto done;
    }
    const size_t row_bytes = png_row_bytes(f);
    if (!png_row_as_is(f) && !(row_buf = malloc(row_bytes))) {
        code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for a PNG row of %zu bytes", row_bytes);
        goto done;
    }
    for (uint32_t y = 0; y < f->height; y++) {
        const void *row = f->pixels + (size_t)y * f->src_row_bytes;
        if (row_buf) {
            png_pack_row(f, y, row_buf);
            row = row_buf;
        }
        rc = spng_encode_row(ctx, row, row_bytes);
        /* The last row answers SPNG_EOI once the file is finalized (IEND written). */
        if (rc != (y + 1 == f->height ? SPNG_EOI : SPNG_OK)) {
            code = png_failure(rc == SPNG_EOI ? SPNG_EINTERNAL : rc, "encoding a row", err);
            goto done;
        }
    }

    size_t size = 0;
    void *png = spng_get_png_buffer(ctx, &size, &rc);
    if (!png) {
        code = png_failure(rc ? rc : SPNG_EINTERNAL, "handing over the encoded PNG", err);
        goto done;
    }
    *result = (hp_encoded){.data = png, .size = size, .mime = "image/png"};

done:
    free(row_buf);
    spng_ctx_free(ctx);
    return code;
}


/* --- PNG in strips, deflated in parallel (issue 6) ------------------------------------------------- */

/* A large frame's PNG is filtered and deflated in horizontal strips on several threads, then joined into
 * one valid zlib stream, as pigz does for gzip: every strip but the last ends with a sync flush (a byte
 * boundary, an empty stored block), each later strip is primed with the 32 KiB of filtered data before it
 * as its dictionary (so matches across the seam are not lost), and the Adler-32 of the whole is combined
 * from the strips' (adler32_combine). libspng encodes on one thread and has no way to take a stream
 * compressed elsewhere, so the chunks around it (IHDR, cHRM, gAMA, sRGB or iCCP, tEXt, IDAT, IEND, each
 * with its CRC-32) are written here, the same ones encode_png() asks libspng for. Filters are chosen per
 * row as libspng and libpng choose them: the smallest sum of absolute values of the filtered bytes, taken as
 * signed (effort 0: Sub alone). Measured on the H200 host (16 cores): a 4K frame's PNG in docs/BENCHMARKS.md. */

#define STRIP_MIN_PIXELS (1024u * 1024u) /* below this one thread is fast enough */
#define STRIP_WINDOW 32768u              /* deflate's window: the dictionary a strip is primed with */

static unsigned png_strip_threads; /* 0: one per usable CPU (common/cpus.h), counted once */
static pthread_once_t usable_cpus_once = PTHREAD_ONCE_INIT;
static unsigned usable_cpus;

static void count_usable_cpus(void) { usable_cpus = hp_usable_cpus(); }

void hp_encode_set_png_threads(unsigned threads) { png_strip_threads = threads; }

static unsigned png_threads(void)
{
    pthread_once(&usable_cpus_once, count_usable_cpus);
    return png_strip_threads ? png_strip_threads : usable_cpus;
}

static uint64_t png_strip_min_pixels = STRIP_MIN_PIXELS;
void hp_encode_set_png_strip_min(uint64_t pixels) { png_strip_min_pixels = pixels ? pixels : STRIP_MIN_PIXELS; }

typedef struct png_strip {
    const frame *f;
    const hp_output_params *out;
    uint32_t y0, y1;        /* rows */
    uint8_t *filtered;      /* (1 + row_bytes) per row: the filter byte, then the row */
    uint8_t *prev_tail;     /* the filtered data before this strip, up to STRIP_WINDOW bytes (or NULL) */
    size_t prev_tail_len;
    bool last;
    uint8_t *z;             /* the strip's raw deflate output */
    size_t z_len;
    uLong adler;            /* Adler-32 of its filtered data alone */
    void *(*phase)(void *); /* what run_strips runs on it now */
    double cpu_ms;          /* CPU time its threads spent, for hp_encoded.cpu_ms */
    int zrc;                /* Z_OK, or why not */
} png_strip;

static inline uint8_t paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    int bc = pb <= pc ? b : c; /* selects, not branches: the filters are a third of a PNG's time otherwise */
    return (uint8_t)(pa <= pb && pa <= pc ? a : bc);
}

/* One filter type over a row into o[0..n). prev is the row above (zeros for the first). One loop per type
 * with the first pixel apart (no left neighbour) keeps the per-byte work straight-line, which the compiler
 * vectorises (this library is built at -O3: meson.build says why). */
static void png_filter_type(int type, const uint8_t *restrict cur, const uint8_t *restrict prev, size_t n, size_t bpp,
                            uint8_t *restrict o)
{
    size_t first = bpp < n ? bpp : n;
    switch (type) {
    case 0:
        memcpy(o, cur, n);
        break;
    case 1:
        memcpy(o, cur, first);
        for (size_t i = bpp; i < n; i++)
            o[i] = (uint8_t)(cur[i] - cur[i - bpp]);
        break;
    case 2:
        for (size_t i = 0; i < n; i++)
            o[i] = (uint8_t)(cur[i] - prev[i]);
        break;
    case 3:
        for (size_t i = 0; i < first; i++)
            o[i] = (uint8_t)(cur[i] - (prev[i] >> 1));
        for (size_t i = bpp; i < n; i++)
            o[i] = (uint8_t)(cur[i] - ((cur[i - bpp] + prev[i]) >> 1));
        break;
    default: /* Paeth; with no left neighbour it predicts the byte above */
        for (size_t i = 0; i < first; i++)
            o[i] = (uint8_t)(cur[i] - prev[i]);
        for (size_t i = bpp; i < n; i++)
            o[i] = (uint8_t)(cur[i] - paeth(cur[i - bpp], prev[i], prev[i - bpp]));
        break;
    }
}

/* The type whose filtered row has the smallest sum of magnitudes, the bytes taken as signed (the heuristic
 * of libpng and libspng; the first type wins a tie). All five sums in one pass that writes nothing: trying
 * each type into a scratch row and copying the best spent twice as long. Sums fit 32 bits: a row is at most
 * 128 KiB of bytes of magnitude at most 128. */
static int png_filter_choose(const uint8_t *restrict cur, const uint8_t *restrict prev, size_t n, size_t bpp)
{
    uint32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    size_t first = bpp < n ? bpp : n;
#define MAG(v) ((uint32_t)abs((int8_t)(uint8_t)(v)))
    for (size_t i = 0; i < first; i++) {
        s0 += MAG(cur[i]), s1 += MAG(cur[i]), s2 += MAG(cur[i] - prev[i]);
        s3 += MAG(cur[i] - (prev[i] >> 1)), s4 += MAG(cur[i] - prev[i]);
    }
    for (size_t i = bpp; i < n; i++) {
        int x = cur[i], a = cur[i - bpp], b = prev[i], c = prev[i - bpp];
        s0 += MAG(x), s1 += MAG(x - a), s2 += MAG(x - b), s3 += MAG(x - ((a + b) >> 1)), s4 += MAG(x - paeth(a, b, c));
    }
#undef MAG
    uint32_t sums[5] = {s0, s1, s2, s3, s4}, best = s0;
    int type = 0;
    for (int t = 1; t < 5; t++)
        if (sums[t] < best)
            best = sums[t], type = t;
    return type;
}

/* Filters row `cur` (the row above `prev`: zeros for the first) into dst[0] (type) and dst[1..]. */
static void png_filter_row(const uint8_t *cur, const uint8_t *prev, size_t n, size_t bpp, bool sub_only,
                           uint8_t *dst)
{
    int type = sub_only ? 1 : png_filter_choose(cur, prev, n, bpp);
    dst[0] = (uint8_t)type;
    png_filter_type(type, cur, prev, n, bpp, dst + 1);
}

/* Phase 1, one thread per strip: pack and filter its rows. */
static void *png_strip_filter(void *arg)
{
    png_strip *st = arg;
    const frame *f = st->f;
    const size_t row_bytes = png_row_bytes(f), bpp = (f->alpha ? 4 : 3) * (f->bit_depth / 8);
    /* the previous and the current packed row; the previous is zeros above the first row */
    uint8_t *rows = calloc(2, row_bytes);
    st->zrc = Z_MEM_ERROR;
    if (!rows)
        return NULL;
    uint8_t *prev = rows, *cur = rows + row_bytes;
    if (st->y0 > 0)
        png_pack_row(f, st->y0 - 1, prev);
    for (uint32_t y = st->y0; y < st->y1; y++) {
        png_pack_row(f, y, cur);
        png_filter_row(cur, prev, row_bytes, bpp, st->out->effort == 0,
                       st->filtered + (size_t)(y - st->y0) * (1 + row_bytes));
        uint8_t *t = prev;
        prev = cur;
        cur = t;
    }
    free(rows);
    st->zrc = Z_OK;
    return NULL;
}

/* Phase 2, once every strip is filtered: deflate its filtered rows, primed with the 32 KiB before them. */
static void *png_strip_deflate(void *arg)
{
    png_strip *st = arg;
    const size_t row_bytes = png_row_bytes(st->f);
    size_t in_len = (size_t)(st->y1 - st->y0) * (1 + row_bytes);
    st->adler = adler32(adler32(0L, Z_NULL, 0), st->filtered, (uInt)0);
    for (size_t done = 0; done < in_len;) { /* adler32 takes uInt lengths */
        uInt n = (uInt)(in_len - done > (1u << 30) ? (1u << 30) : in_len - done);
        st->adler = adler32(st->adler, st->filtered + done, n);
        done += n;
    }
    if (st->out->effort <= PNG_RUNS_MAX_EFFORT) {
        st->z = malloc(hp_deflate_runs_bound(in_len));
        st->zrc = st->z && hp_deflate_runs(st->filtered, in_len, st->last, st->z, &st->z_len) ? Z_OK : Z_MEM_ERROR;
        return NULL;
    }
    z_stream z = {0};
    int rc = deflateInit2(&z, png_zlib_level[st->out->effort], Z_DEFLATED, -15, 8,
                          Z_FILTERED);
    if (rc != Z_OK) {
        st->zrc = rc;
        return NULL;
    }
    if (st->prev_tail_len)
        rc = deflateSetDictionary(&z, st->prev_tail, (uInt)st->prev_tail_len);
    size_t cap = deflateBound(&z, in_len) + 16;
    st->z = rc == Z_OK ? malloc(cap) : NULL;
    if (!st->z) {
        deflateEnd(&z);
        st->zrc = rc == Z_OK ? Z_MEM_ERROR : rc;
        return NULL;
    }
    z.next_out = st->z;
    z.avail_out = (uInt)cap;
    size_t fed = 0;
    do {
        uInt n = (uInt)(in_len - fed > (1u << 30) ? (1u << 30) : in_len - fed);
        z.next_in = st->filtered + fed;
        z.avail_in = n;
        fed += n;
        rc = deflate(&z, fed < in_len ? Z_NO_FLUSH : st->last ? Z_FINISH : Z_SYNC_FLUSH);
    } while (rc == Z_OK && fed < in_len);
    st->z_len = cap - z.avail_out;
    deflateEnd(&z);
    st->zrc = rc == (st->last ? Z_STREAM_END : Z_OK) ? Z_OK : (rc == Z_OK ? Z_BUF_ERROR : rc);
    return NULL;
}

/* Appends one chunk (length, type, data, CRC-32 of type and data); returns the CPU time (ms) other threads
 * spent on its CRC. */
static double png_chunk(uint8_t **w, const char type[4], const uint8_t *data, size_t len)
{
    uint8_t *p = *w;
    p[0] = (uint8_t)(len >> 24), p[1] = (uint8_t)(len >> 16), p[2] = (uint8_t)(len >> 8), p[3] = (uint8_t)len;
    memcpy(p + 4, type, 4);
    if (len && data != p + 8) /* data already in place: hp_encode_png_in_place */
        memcpy(p + 8, data, len);
    /* libdeflate's CRC-32 (carry-less multiplication where the CPU has it): 4x zlib's on a 4K frame's 11 MB
     * IDAT here (1.1 against 4.5 ms), the chunk writer's main cost once the GPU has deflated the frame; on
     * the PNG threads for a large IDAT (crc32_threads.h). */
    double helpers = 0;
    uint32_t crc = hp_crc32_threads(0, p + 4, 4 + len, png_threads(), &helpers);
    p += 8 + len;
    p[0] = (uint8_t)(crc >> 24), p[1] = (uint8_t)(crc >> 16), p[2] = (uint8_t)(crc >> 8), p[3] = (uint8_t)crc;
    *w = p + 4;
    return helpers;
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void *strip_timed(void *arg)
{
    png_strip *st = arg;
    double c0 = hp_thread_cpu_ms();
    st->phase(st);
    st->cpu_ms += hp_thread_cpu_ms() - c0;
    return NULL;
}

/* A strip's own thread, named for top -H, perf and /proc (strip_timed also runs on the caller's). */
static void *strip_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-png-strip");
    return strip_timed(arg);
}

/* Runs fn on every strip, a thread each; a strip whose thread cannot start runs on this one. */
static void run_strips(void *(*fn)(void *), png_strip *strips, uint32_t n, pthread_t *tid, bool *started)
{
    if (n == 1) {
        strips[0].phase = fn;
        strip_timed(&strips[0]);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        strips[i].phase = fn;
        started[i] = pthread_create(&tid[i], NULL, strip_thread, &strips[i]) == 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            strip_timed(&strips[i]);
    }
}

static hp_code png_write_file(uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                              const hp_output_params *out, hp_output_encoding encoding, const uint8_t *cicp,
                              const uint8_t *zbuf, size_t z_total, hp_encoded *result, hp_err *err);

static hp_code encode_png_strips(const frame *f, const hp_output_params *out, hp_output_encoding encoding,
                                 unsigned threads, hp_encoded *result, hp_err *err)
{
    const size_t row_bytes = png_row_bytes(f), stride = 1 + row_bytes;
    uint32_t n = threads < f->height ? threads : f->height;
    png_strip *strips = calloc(n, sizeof(*strips));
    pthread_t *tid = calloc(n, sizeof(*tid));
    bool *started = calloc(n, sizeof(*started));
    uint8_t *filtered = malloc(stride * f->height);
    hp_code code = HP_OK;
    if (!strips || !tid || !started || !filtered) {
        code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for a %ux%u PNG in strips", f->width, f->height);
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        png_strip *st = &strips[i];
        st->f = f;
        st->out = out;
        st->y0 = (uint32_t)((uint64_t)f->height * i / n);
        st->y1 = (uint32_t)((uint64_t)f->height * (i + 1) / n);
        st->filtered = filtered + (size_t)st->y0 * stride;
        st->last = i + 1 == n;
        size_t before = (size_t)st->y0 * stride;
        st->prev_tail_len = before < STRIP_WINDOW ? before : STRIP_WINDOW;
        st->prev_tail = st->filtered - st->prev_tail_len;
    }
    /* A strip's dictionary is the filtered data of the strip before it, another thread's: every strip is
     * filtered before any is deflated. */
    run_strips(png_strip_filter, strips, n, tid, started);
    bool filtered_ok = true;
    for (uint32_t i = 0; i < n; i++)
        filtered_ok = filtered_ok && strips[i].zrc == Z_OK;
    if (filtered_ok)
        run_strips(png_strip_deflate, strips, n, tid, started);
    for (uint32_t i = 0; i < n; i++) {
        if (strips[i].zrc != Z_OK) {
            code = strips[i].zrc == Z_MEM_ERROR
                       ? hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory deflating a PNG strip")
                       : hp_fail(err, HP_ERR_INTERNAL, "zlib failed deflating a PNG strip (error %d)", strips[i].zrc);
            goto done;
        }
    }

    /* The zlib stream (the strips between a header and the Adler-32), then the file around it. */
    size_t z_total = 2 + 4;
    for (uint32_t i = 0; i < n; i++)
        z_total += strips[i].z_len;
    uint8_t *zbuf = malloc(z_total);
    if (!zbuf) {
        code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte zlib stream", z_total);
        goto done;
    }
    /* zlib header (RFC 1950): deflate, 32 KiB window, the level hint (FLEVEL), FCHECK so that the 16-bit
     * header is a multiple of 31. */
    int level = out->effort <= PNG_RUNS_MAX_EFFORT ? 1 : png_zlib_level[out->effort];
    uint8_t flevel = level <= 1 ? 0 : level <= 5 ? 1 : level == 6 ? 2 : 3;
    uint16_t hdr = (uint16_t)(0x78 << 8 | flevel << 6);
    hdr = (uint16_t)(hdr + (31 - hdr % 31) % 31);
    uint8_t *zw = zbuf;
    *zw++ = (uint8_t)(hdr >> 8), *zw++ = (uint8_t)hdr;
    uLong adler = strips[0].adler;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(zw, strips[i].z, strips[i].z_len);
        zw += strips[i].z_len;
        if (i > 0)
            adler = adler32_combine(adler, strips[i].adler, (z_off_t)((strips[i].y1 - strips[i].y0) * stride));
    }
    be32(zw, (uint32_t)adler);
    code = png_write_file(f->width, f->height, f->bit_depth, f->alpha, out, encoding, f->cicp, zbuf, z_total, result,
                          err);
    free(zbuf);
    for (uint32_t i = 0; code == HP_OK && i < n; i++)
        result->cpu_ms += strips[i].cpu_ms;

done:
    for (uint32_t i = 0; strips && i < n; i++)
        free(strips[i].z);
    free(filtered);
    free(started);
    free(tid);
    free(strips);
    return code;
}

/* The file around a zlib stream: signature, IHDR, the colour chunks, tEXt, IDAT, IEND, each with its CRC.
 * Both the CPU's strips and the GPU's stream (hp_encode_png_deflated, hp_encode_png_in_place) go through
 * these, so that their chunks are the same bytes. */

static const char png_comment[] = "Comment\0" PNG_KWON_COMMENT;
#define PNG_IDAT_MAX ((size_t)1 << 30) /* PNG chunks hold up to 2^31 - 1 bytes */

/* The bytes png_head writes, exactly (hp_encode_png_in_place puts IDAT right after them). */
static size_t png_head_bytes(const hp_output_params *out, hp_output_encoding encoding, const uint8_t *cicp)
{
    if (cicp)
        return 8 + (12 + 13) + (12 + 4);
    const hp_icc_profile *icc = output_profile(out->colorspace, encoding);
    return 8 + (12 + 13) + (12 + 32) + (12 + 4) + (encoding == HP_ENCODING_SRGB && !icc ? 12 + 1 : 0) +
           (icc ? 12 + icc->iccp_size : 0) + (encoding == HP_ENCODING_SRGB_LIKE ? 12 + sizeof(png_comment) - 1 : 0);
}

/* Signature, IHDR and the chunks before IDAT at w (cicp: the cICP chunk alone); returns where they end. */
static uint8_t *png_head(uint8_t *w, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                         const hp_output_params *out, hp_output_encoding encoding, const uint8_t *cicp)
{
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(w, signature, 8);
    w += 8;
    uint8_t ihdr[13];
    be32(ihdr, width);
    be32(ihdr + 4, height);
    ihdr[8] = (uint8_t)bit_depth, ihdr[9] = alpha ? 6 : 2, ihdr[10] = ihdr[11] = ihdr[12] = 0;
    png_chunk(&w, "IHDR", ihdr, 13);
    if (cicp) {
        png_chunk(&w, "cICP", cicp, 4);
        return w;
    }
    /* The chunks png_set_colour_chunks() sets through libspng (encode.h), in the order libspng writes them. */
    const hp_icc_profile *icc = output_profile(out->colorspace, encoding);
    const uint32_t *chrm = png_chrm(out->colorspace);
    uint8_t c[32];
    for (int k = 0; k < 8; k++)
        be32(c + 4 * k, chrm[k]);
    png_chunk(&w, "cHRM", c, 32);
    be32(c, encoding == HP_ENCODING_LINEAR ? 100000 : 45455);
    png_chunk(&w, "gAMA", c, 4);
    if (encoding == HP_ENCODING_SRGB && !icc) {
        c[0] = 0; /* perceptual rendering intent */
        png_chunk(&w, "sRGB", c, 1);
    }
    if (icc)
        png_chunk(&w, "iCCP", icc->iccp, icc->iccp_size);
    if (encoding == HP_ENCODING_SRGB_LIKE)
        png_chunk(&w, "tEXt", (const uint8_t *)png_comment, sizeof(png_comment) - 1);
    return w;
}

static hp_code png_write_file(uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                              const hp_output_params *out, hp_output_encoding encoding, const uint8_t *cicp,
                              const uint8_t *zbuf, size_t z_total, hp_encoded *result, hp_err *err)
{
    size_t idat_chunks = (z_total + PNG_IDAT_MAX - 1) / PNG_IDAT_MAX;
    size_t cap = png_head_bytes(out, encoding, cicp) + 12 * idat_chunks + z_total + 12;
    uint8_t *png = malloc(cap);
    if (!png)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte PNG", cap);
    uint8_t *w = png_head(png, width, height, bit_depth, alpha, out, encoding, cicp);
    double helpers = 0;
    for (size_t at = 0; at < z_total; at += PNG_IDAT_MAX)
        helpers += png_chunk(&w, "IDAT", zbuf + at, z_total - at < PNG_IDAT_MAX ? z_total - at : PNG_IDAT_MAX);
    png_chunk(&w, "IEND", NULL, 0);
    /* The caller adds its own thread's time. */
    *result = (hp_encoded){.data = png, .size = (size_t)(w - png), .mime = "image/png", .cpu_ms = helpers};
    return HP_OK;
}

/* --- The entry points ------------------------------------------------------------------------------- */

/* Quality, effort and colour space within the schema's ranges (hp_params_check() has refused others
 * already; the encoders are also called directly). */
static hp_code check_ranges(const hp_output_params *out, hp_err *err)
{
    if (out->quality > 100)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.quality", "output.quality %u is over 100",
                             out->quality);
    if (out->effort > 6)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.effort", "output.effort %u is over 6",
                             out->effort);
    if ((unsigned)out->colorspace >= HP_OUTPUT_COLORSPACE_COUNT)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.colorspace",
                             "output.colorspace %d is not srgb (0), display_p3 (1) or rec2020 (2)",
                             (int)out->colorspace);
    return HP_OK;
}

hp_code hp_encode_webp_yuv420(const hp_yuv420 *planes, uint32_t width, uint32_t height, hp_output_encoding encoding,
                              const hp_output_params *out,
                              hp_encoded *result, hp_err *err)
{
    if (result)
        *result = (hp_encoded){0};
    if (!planes || !planes->y || !planes->u || !planes->v || !out || !result)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_webp_yuv420: planes, out and result must not be NULL");
    if (out->format != HP_OUTPUT_WEBP || out->lossless || out->bit_depth != 8)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.format",
                             "YUV 4:2:0 planes encode only as lossy 8-bit WebP");
    hp_code range = check_ranges(out, err);
    if (range != HP_OK)
        return range;
    if (width == 0 || height == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "cannot encode an empty %ux%u frame", width, height);
    if (planes->y_stride < width || planes->uv_stride < (width + 1) / 2)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "YUV strides %u and %u are too small for a width of %u",
                       planes->y_stride, planes->uv_stride, width);
    if (encoding != HP_ENCODING_SRGB_LIKE && encoding != HP_ENCODING_SRGB && encoding != HP_ENCODING_LINEAR)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_webp_yuv420: output encoding %d is not an "
                       "hp_output_encoding", (int)encoding);
    const frame f = {.width = width, .height = height, .bit_depth = 8, .alpha = planes->a != NULL, .yuv = planes,
                     .encoding = encoding};
    double c0 = hp_thread_cpu_ms();
    hp_code code = encode_webp(&f, out, result, err);
    if (code == HP_OK)
        result->cpu_ms += hp_thread_cpu_ms() - c0;
    return code;
}

/* hp_encode(), and hp_encode_png_cicp() with cicp (4 bytes; format png only). */
static hp_code encode_frame(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                            hp_output_encoding encoding, const uint8_t *cicp, const hp_output_params *out,
                            hp_encoded *result, hp_err *err)
{
    if (result)
        *result = (hp_encoded){0};
    if (!pixels || !out || !result)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode: pixels, out and result must not be NULL");
    if (out->format != HP_OUTPUT_WEBP && out->format != HP_OUTPUT_PNG)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.format",
                             "output.format %d is neither webp (0) nor png (1)", (int)out->format);
    if (bit_depth != 8 && bit_depth != 16)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "the frame has %u bits per channel; the encoders take 8 or 16", bit_depth);
    if (out->bit_depth != bit_depth)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "output.bit_depth is %u but the frame was quantized to %u bits", out->bit_depth,
                             bit_depth);
    hp_code range = check_ranges(out, err);
    if (range != HP_OK)
        return range;
    if (encoding != HP_ENCODING_SRGB_LIKE && encoding != HP_ENCODING_SRGB && encoding != HP_ENCODING_LINEAR)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode: output encoding %d is not an hp_output_encoding",
                       (int)encoding);
    if (width == 0 || height == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "cannot encode an empty %ux%u frame", width, height);
    if (width > HP_ENCODE_MAX_SIDE || height > HP_ENCODE_MAX_SIDE)
        return hp_fail(err, HP_ERR_TOO_LARGE, "a %ux%u frame is over the limit of %u pixels a side", width, height,
                       HP_ENCODE_MAX_SIDE);

    /* 16384 x 16384 x 8 bytes is 2 GiB: within size_t on any 64-bit host, refused on a 32-bit one. */
    const size_t src_row_bytes = (size_t)width * 4 * (bit_depth / 8);
    if ((uint64_t)src_row_bytes * height > SIZE_MAX)
        return hp_fail(err, HP_ERR_TOO_LARGE, "a %ux%u frame of %u-bit samples is over this host's address space",
                       width, height, bit_depth);
    const frame f = {.pixels = pixels, .width = width, .height = height, .bit_depth = bit_depth, .alpha = alpha,
                     .src_row_bytes = src_row_bytes, .encoding = encoding, .cicp = cicp};
    double c0 = hp_thread_cpu_ms();
    unsigned threads = png_threads();
    /* The run-length coder is used at the fast efforts whatever the size (one strip below
     * STRIP_MIN_PIXELS); zlib's efforts go through libspng on one thread below it. */
    bool small = (uint64_t)width * height < png_strip_min_pixels;
    hp_code code = out->format == HP_OUTPUT_WEBP ? encode_webp(&f, out, result, err)
                   : out->effort <= PNG_RUNS_MAX_EFFORT || (threads > 1 && !small)
                       ? encode_png_strips(&f, out, encoding, small ? 1 : threads, result, err)
                       : encode_png(&f, out, encoding, result, err);
    if (code == HP_OK)
        result->cpu_ms += hp_thread_cpu_ms() - c0;
    return code;
}

hp_code hp_encode(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                  hp_output_encoding encoding, const hp_output_params *out, hp_encoded *result, hp_err *err)
{
    return encode_frame(pixels, width, height, bit_depth, alpha, encoding, NULL, out, result, err);
}

/* What hp_encode_png_deflated and hp_encode_png_in_place take, checked. */
static hp_code deflated_check(const void *zlib, uint32_t width, uint32_t height, uint32_t bit_depth,
                              hp_output_encoding encoding, const hp_output_params *out, hp_encoded *result,
                              hp_err *err)
{
    if (result)
        *result = (hp_encoded){0};
    if (!zlib || !out || !result)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_png_deflated: zlib, out and result must not be NULL");
    if (out->format != HP_OUTPUT_PNG || out->bit_depth != bit_depth || (bit_depth != 8 && bit_depth != 16))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.format", "a %u-bit PNG stream with output.format "
                             "%d and output.bit_depth %u", bit_depth, (int)out->format, out->bit_depth);
    hp_code code = check_ranges(out, err);
    if (code != HP_OK)
        return code;
    if (encoding != HP_ENCODING_SRGB_LIKE && encoding != HP_ENCODING_SRGB && encoding != HP_ENCODING_LINEAR)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_png_deflated: output encoding %d is not an "
                       "hp_output_encoding", (int)encoding);
    if (width == 0 || height == 0 || width > HP_ENCODE_MAX_SIDE || height > HP_ENCODE_MAX_SIDE)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "a %ux%u PNG is outside 1..%u a side", width, height,
                       HP_ENCODE_MAX_SIDE);
    return HP_OK;
}

hp_code hp_encode_png_deflated(const uint8_t *zlib, size_t zlib_len, uint32_t width, uint32_t height,
                               uint32_t bit_depth, bool alpha, hp_output_encoding encoding,
                               const hp_output_params *out, hp_encoded *result, hp_err *err)
{
    hp_code code = deflated_check(zlib, width, height, bit_depth, encoding, out, result, err);
    if (code != HP_OK)
        return code;
    double c0 = hp_thread_cpu_ms();
    code = png_write_file(width, height, bit_depth, alpha, out, encoding, NULL, zlib, zlib_len, result, err);
    if (code == HP_OK)
        result->cpu_ms += hp_thread_cpu_ms() - c0;
    return code;
}

/* hp_encode_png_in_place's file, checked already; cicp: the cICP chunk instead of the colour chunks, or NULL. */
static hp_code png_in_place(uint8_t *zlib, size_t zlib_len, size_t room_before, size_t room_after, uint32_t width,
                            uint32_t height, uint32_t bit_depth, bool alpha, hp_output_encoding encoding,
                            const uint8_t *cicp, const hp_output_params *out, hp_encoded *result, hp_err *err)
{
    double c0 = hp_thread_cpu_ms();
    size_t head = png_head_bytes(out, encoding, cicp) + 8; /* and IDAT's length and type */
    if (head > room_before || room_after < 4 + 12 || zlib_len > PNG_IDAT_MAX) {
        hp_code code = png_write_file(width, height, bit_depth, alpha, out, encoding, cicp, zlib, zlib_len, result,
                                      err);
        if (code == HP_OK)
            result->cpu_ms += hp_thread_cpu_ms() - c0;
        return code;
    }
    uint8_t *start = zlib - head, *w = png_head(start, width, height, bit_depth, alpha, out, encoding, cicp);
    if (w + 8 != zlib) /* png_head_bytes and png_head disagree: a bug, never a file with a hole */
        return hp_fail(err, HP_ERR_INTERNAL, "the PNG's head is %td bytes, not the %zu counted", w - start, head - 8);
    double helpers = png_chunk(&w, "IDAT", zlib, zlib_len); /* w + 8 is zlib: nothing is copied */
    png_chunk(&w, "IEND", NULL, 0);
    *result = (hp_encoded){.data = start, .size = (size_t)(w - start), .mime = "image/png", .in_place = true,
                           .cpu_ms = hp_thread_cpu_ms() - c0 + helpers};
    return HP_OK;
}

hp_code hp_encode_png_in_place(uint8_t *zlib, size_t zlib_len, size_t room_before, size_t room_after, uint32_t width,
                               uint32_t height, uint32_t bit_depth, bool alpha, hp_output_encoding encoding,
                               const hp_output_params *out, hp_encoded *result, hp_err *err)
{
    hp_code code = deflated_check(zlib, width, height, bit_depth, encoding, out, result, err);
    if (code != HP_OK)
        return code;
    return png_in_place(zlib, zlib_len, room_before, room_after, width, height, bit_depth, alpha, encoding, NULL, out,
                        result, err);
}

/* --- PNG tagged with cICP (encode_png_hdr.h) ------------------------------------------------------ */

/* The code points are checked here, beside the PNG that carries them, and the AVIF encoder
 * (encode_avif.c) calls the same check. */

/* ITU-T H.273 (07/2021) tables 2, 3 and 4: the values defined, less 2 (unspecified), which a tag whose
 * purpose is to say what the samples are cannot use. */
static bool primaries_defined(uint8_t v)
{
    return v == 1 || (v >= 4 && v <= 12) || v == 22;
}

static bool transfer_defined(uint8_t v)
{
    return v == 1 || (v >= 4 && v <= 18);
}

/* The matrices libavif 0.11's RGB -> YUV conversion takes (avifPrepareReformatState in src/reformat.c refuses
 * 3, reserved, 10 and 13, the constant-luminance ones, 11, SMPTE ST 2085, and 14 and up, ICtCp onwards). */
static bool matrix_converted(uint8_t v)
{
    return v == 0 || v == 1 || (v >= 4 && v <= 9) || v == 12;
}

hp_code hp_cicp_check(const hp_cicp *cicp, bool with_matrix, const char *field, hp_err *err)
{
    if (!cicp)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field, "no colour code points given");
    if (!primaries_defined(cicp->primaries))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                             "colour primaries %u is not an ITU-T H.273 value that names primaries (1, 4..12, 22; "
                             "1 BT.709, 9 BT.2020, 12 Display P3)", cicp->primaries);
    if (!transfer_defined(cicp->transfer))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                             "transfer characteristics %u is not an ITU-T H.273 value that names a transfer (1, "
                             "4..18; 13 sRGB, 16 PQ, 18 HLG)", cicp->transfer);
    if (with_matrix && !matrix_converted(cicp->matrix))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, field,
                             "matrix coefficients %u are not ones libavif converts RGB with (0, 1, 4..9, 12; 9 "
                             "BT.2020 non-constant luminance, 1 BT.709, 6 BT.601)", cicp->matrix);
    return HP_OK;
}

uint8_t hp_cicp_primaries_of(hp_output_colorspace space)
{
    switch (space) {
    case HP_OUTPUT_SRGB: return HP_CICP_PRIMARIES_BT709;
    case HP_OUTPUT_DISPLAY_P3: return HP_CICP_PRIMARIES_DISPLAY_P3;
    case HP_OUTPUT_REC2020: return HP_CICP_PRIMARIES_BT2020;
    case HP_OUTPUT_COLORSPACE_COUNT: break;
    }
    return 0;
}

/* The cICP chunk's data for cicp, checked against out (format png, the primaries of out->colorspace). */
static hp_code png_cicp_bytes(const hp_cicp *cicp, const hp_output_params *out, uint8_t bytes[4], hp_err *err)
{
    if (!out)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_png_cicp: out must not be NULL");
    if (out->format != HP_OUTPUT_PNG)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.format",
                             "a cICP tag is written in PNG only (output.format %d)", (int)out->format);
    hp_code code = hp_cicp_check(cicp, false, "output.cicp", err);
    if (code != HP_OK)
        return code;
    uint8_t space_primaries = hp_cicp_primaries_of(out->colorspace);
    if (space_primaries && cicp->primaries != space_primaries)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.colorspace",
                             "cICP colour primaries %u would mislabel samples in output.colorspace %d's primaries (%u)",
                             cicp->primaries, (int)out->colorspace, space_primaries);
    /* PNG stores RGB: matrix coefficients 0; the GPU writes full-range code values: VideoFullRangeFlag 1. */
    bytes[0] = cicp->primaries, bytes[1] = cicp->transfer, bytes[2] = 0, bytes[3] = 1;
    return HP_OK;
}

hp_code hp_encode_png_cicp(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                           const hp_cicp *cicp, const hp_output_params *out, hp_encoded *result, hp_err *err)
{
    if (result)
        *result = (hp_encoded){0};
    uint8_t bytes[4]; /* libspng keeps the pointer until its context is freed, within encode_frame */
    hp_code code = png_cicp_bytes(cicp, out, bytes, err);
    if (code != HP_OK)
        return code;
    /* The encoding only chooses colour chunks, which cICP replaces: any valid value. */
    return encode_frame(pixels, width, height, bit_depth, alpha, HP_ENCODING_SRGB, bytes, out, result, err);
}

hp_code hp_encode_png_cicp_in_place(uint8_t *zlib, size_t zlib_len, size_t room_before, size_t room_after,
                                    uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                                    const hp_cicp *cicp, const hp_output_params *out, hp_encoded *result,
                                    hp_err *err)
{
    if (result)
        *result = (hp_encoded){0};
    uint8_t bytes[4];
    hp_code code = png_cicp_bytes(cicp, out, bytes, err);
    if (code == HP_OK)
        code = deflated_check(zlib, width, height, bit_depth, HP_ENCODING_SRGB, out, result, err);
    if (code != HP_OK)
        return code;
    return png_in_place(zlib, zlib_len, room_before, room_after, width, height, bit_depth, alpha, HP_ENCODING_SRGB,
                        bytes, out, result, err);
}

/* AVIF through libavif 0.11 and libaom. Every choice is documented in encode_avif.h; this file says why only
 * where the code alone does not. */
#include "api/codecs/encode_avif.h"

#include <avif/avif.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/cpus.h"

/* libavif's avifRWData is released with avifFree(), which is free() (libavif 0.11 src/mem.c), so the file is
 * handed over as hp_encoded.data and hp_encoded_free() releases it as any other. */

/* quality 0..100 -> AV1 quantizer 0..63, as libavif 1.0's avifQualityToQuantizer (src/write.c). */
static int avif_quantizer(uint32_t quality)
{
    return (int)(((100 - quality) * 63 + 50) / 100);
}

static unsigned floor_log2(unsigned n)
{
    unsigned log2 = 0;
    while (n >>= 1)
        log2++;
    return log2;
}

/* Tiles as libavif 1.0's avifSetTileConfiguration chooses them (0.11's autoTiling assumes 8 threads): one per
 * thread, none under 512 x 512 pixels on average (intra prediction stops at tile edges), 32 at most, and more
 * along the longer side so that tiles come out near square (its splitTilesLog2). */
static void avif_tiles(unsigned threads, uint32_t width, uint32_t height, int *rows_log2, int *cols_log2)
{
    uint64_t tiles = ((uint64_t)width * height + 512 * 512 - 1) / (512 * 512);
    if (tiles > 32)
        tiles = 32;
    if (tiles > threads)
        tiles = threads;
    unsigned log2 = floor_log2((unsigned)tiles);
    uint32_t longer = width >= height ? width : height, shorter = width >= height ? height : width;
    unsigned ratio_log2 = floor_log2(longer / shorter);
    unsigned on_shorter = log2 > ratio_log2 ? (log2 - ratio_log2) / 2 : 0, on_longer = log2 - on_shorter;
    *cols_log2 = (int)(width >= height ? on_longer : on_shorter);
    *rows_log2 = (int)(width >= height ? on_shorter : on_longer);
}

static hp_code avif_check_limits(uint32_t width, uint32_t height, hp_err *err)
{
    if (width == 0 || height == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "cannot encode an empty %ux%u frame", width, height);
    if (width > HP_AVIF_MAX_WIDTH || height > HP_AVIF_MAX_HEIGHT ||
        (uint64_t)width * height > HP_AVIF_MAX_PIXELS)
        return hp_fail_field(err, HP_ERR_TOO_LARGE, "output.format",
                             "a %ux%u frame is over AV1's largest level (6.x: %u x %u, %u pixels); use "
                             "output.format png", width, height, HP_AVIF_MAX_WIDTH, HP_AVIF_MAX_HEIGHT,
                             HP_AVIF_MAX_PIXELS);
    return HP_OK;
}

/* The arguments, each refused with the field at fault. */
static hp_code avif_check(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth,
                          const hp_avif_options *opt, hp_err *err)
{
    if (!pixels || !opt)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_avif: pixels, opt and result must not be NULL");
    if (bit_depth != 8 && bit_depth != 16)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "the frame has %u bits per channel; the encoders take 8 or 16", bit_depth);
    if (opt->depth != 8 && opt->depth != 10 && opt->depth != 12)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "output.bit_depth %u: AVIF stores 8, 10 or 12 bits per channel", opt->depth);
    if (opt->quality > 100)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.quality", "output.quality %u is over 100",
                             opt->quality);
    if (opt->speed > AVIF_SPEED_FASTEST)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.effort",
                             "AVIF speed %u is over libavif's fastest, %d", opt->speed, AVIF_SPEED_FASTEST);
    if ((unsigned)opt->subsampling >= HP_AVIF_SUBSAMPLING_COUNT)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.avif_subsampling",
                             "output.avif_subsampling %d is neither 4:4:4 (0) nor 4:2:0 (1)", (int)opt->subsampling);
    hp_code code = hp_cicp_check(&opt->cicp, true, "output.cicp", err);
    if (code != HP_OK)
        return code;
    if (opt->depth == 8 && (opt->cicp.transfer == HP_CICP_TRANSFER_PQ || opt->cicp.transfer == HP_CICP_TRANSFER_HLG))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "transfer %u (%s) needs output.bit_depth 10 or 12: BT.2100 codes PQ and HLG in 10 or 12 "
                             "bits, and 8 band visibly", opt->cicp.transfer,
                             opt->cicp.transfer == HP_CICP_TRANSFER_PQ ? "PQ" : "HLG");
    if (opt->cicp.matrix == HP_CICP_MATRIX_IDENTITY && opt->subsampling != HP_AVIF_SUBSAMPLING_444)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.cicp",
                             "matrix coefficients 0 (identity, GBR) need 4:4:4: AV1 subsamples no RGB");
    return avif_check_limits(width, height, err);
}

/* libavif's failure as an hp_code, with its own words. */
static hp_code avif_failure(avifResult r, const char *what, const avifDiagnostics *diag, hp_err *err)
{
    return hp_fail(err, r == AVIF_RESULT_OUT_OF_MEMORY ? HP_ERR_OUT_OF_MEMORY : HP_ERR_INTERNAL,
                   "libavif failed %s: %s%s%s", what, avifResultToString(r), diag && diag->error[0] ? ": " : "",
                   diag ? diag->error : "");
}

/* The frame as Y'CbCr (and alpha) of opt's depth, in *image, which the caller destroys. */
static hp_code avif_convert(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                            const hp_avif_options *opt, avifImage **image, hp_err *err)
{
    avifPixelFormat format = opt->subsampling == HP_AVIF_SUBSAMPLING_444 ? AVIF_PIXEL_FORMAT_YUV444
                                                                         : AVIF_PIXEL_FORMAT_YUV420;
    avifImage *im = *image = avifImageCreate(width, height, opt->depth, format);
    im->yuvRange = AVIF_RANGE_FULL;
    im->colorPrimaries = opt->cicp.primaries;
    im->transferCharacteristics = opt->cicp.transfer;
    im->matrixCoefficients = opt->cicp.matrix;
    /* avifImageRGBToYUV allocates the planes (alpha only when the RGB image brings alpha). */
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, im);
    rgb.depth = bit_depth;
    rgb.format = AVIF_RGB_FORMAT_RGBA;
    rgb.ignoreAlpha = !alpha; /* no alpha plane then (0.11 has no RGBX format) */
    /* libavif reads these; its struct is not const. 4 samples x 2 bytes x 16384 fits uint32_t. */
    rgb.pixels = (uint8_t *)pixels;
    rgb.rowBytes = width * 4 * (bit_depth / 8);
    avifResult r = avifImageRGBToYUV(im, &rgb);
    return r == AVIF_RESULT_OK ? HP_OK : avif_failure(r, "converting RGB to Y'CbCr", NULL, err);
}

static hp_code avif_write(const avifImage *image, const hp_avif_options *opt, hp_encoded *result, hp_err *err)
{
    avifEncoder *encoder = avifEncoderCreate();
    unsigned threads = opt->threads ? opt->threads : hp_usable_cpus();
    threads = threads ? threads : 1;
    encoder->codecChoice = AVIF_CODEC_CHOICE_AOM;
    encoder->maxThreads = (int)threads;
    encoder->speed = (int)opt->speed;
    encoder->minQuantizer = encoder->maxQuantizer = avif_quantizer(opt->quality);
    encoder->minQuantizerAlpha = encoder->maxQuantizerAlpha = AVIF_QUANTIZER_LOSSLESS;
    avif_tiles(threads, image->width, image->height, &encoder->tileRowsLog2, &encoder->tileColsLog2);
    avifRWData file = AVIF_DATA_EMPTY;
    avifResult r = avifEncoderWrite(encoder, image, &file);
    hp_code code = HP_OK;
    if (r == AVIF_RESULT_OK)
        *result = (hp_encoded){.data = file.data, .size = file.size, .mime = "image/avif"};
    else {
        code = avif_failure(r, "encoding", &encoder->diag, err);
        avifRWDataFree(&file);
    }
    avifEncoderDestroy(encoder);
    return code;
}

uint32_t hp_avif_speed_for_effort(uint32_t effort)
{
    return effort <= 2 ? HP_AVIF_SPEED_DEFAULT : effort == 3 ? 8 : 6;
}

hp_code hp_encode_avif(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                       const hp_avif_options *opt, hp_encoded *result, hp_err *err)
{
    if (!result)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_avif: pixels, opt and result must not be NULL");
    *result = (hp_encoded){0};
    hp_code code = avif_check(pixels, width, height, bit_depth, opt, err);
    if (code != HP_OK)
        return code;
    if (!avifCodecName(AVIF_CODEC_CHOICE_AOM, AVIF_CODEC_FLAG_CAN_ENCODE))
        return hp_fail(err, HP_ERR_INTERNAL, "this libavif (%s) was built without libaom's encoder", avifVersion());
    double c0 = hp_thread_cpu_ms();
    avifImage *image = NULL;
    code = avif_convert(pixels, width, height, bit_depth, alpha, opt, &image, err);
    if (code == HP_OK)
        code = avif_write(image, opt, result, err);
    avifImageDestroy(image);
    /* libaom's threads are not counted (hp_encoded.cpu_ms: ours only, as libwebp's helper thread). */
    if (code == HP_OK)
        result->cpu_ms = hp_thread_cpu_ms() - c0;
    return code;
}

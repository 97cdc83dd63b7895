/* JPEG encoder (libjpeg-turbo's libjpeg API): review copies of a frame, 8 bits, tagged for its display.
 *
 * Input: hp_encode()'s layout (encode.h): tightly packed RGBA rows, top to bottom, 4 bytes a pixel. JPEG
 * stores no alpha: the A samples are always ignored (as hp_encode() with alpha false), never composited.
 * bit_depth 16 is HP_ERR_INVALID_ARGUMENT naming output.bit_depth (JPEG's baseline and the decoders that
 * matter hold 8 bits; 16-bit frames go to PNG or AVIF).
 *
 * Coding: libjpeg's YCbCr (JFIF, ITU-T T.871: BT.601 matrix, full range), baseline sequential DCT with its
 * accurate integer transform (JDCT_ISLOW), quantization tables of ITU-T T.81 Annex K scaled by
 * jpeg_set_quality() (quality 1..100; 50 is the tables as printed), clamped to baseline's 8-bit entries so
 * that every decoder reads the file; T.81 K.3's Huffman tables (fitted ones cost 2.5-6x the time for 2-4%:
 * encode_jpeg.c).
 * Chroma 4:2:0 (Cb and Cr at half width and height, libjpeg's default) or 4:4:4 (full resolution: sharp
 * coloured edges, text, the false-colour palette; a third to a half larger at the same quality).
 *
 * Colour, as WebP's (encode.h), whose rules and profiles these are:
 *   output.colorspace srgb        no profile: sRGB is what an untagged JPEG is taken to be (T.871 leaves JFIF's
 *                                 RGB primaries unspecified; browsers, and CSS Color 4 for untagged images,
 *                                 assume sRGB), so a profile would only add ~600 bytes to every file.
 *   output.colorspace display_p3  an ICC profile in APP2 "ICC_PROFILE" markers (ICC.1:2010 Annex B.4;
 *                                 jpeg_write_icc_profile()): the same profile of P3 and `encoding`'s transfer
 *                                 that tags PNG and WebP (api/icc_profiles.h, made by tools/make_icc.c).
 *   output.colorspace rec2020     HP_ERR_INVALID_ARGUMENT naming output.colorspace: 8 bits band over
 *                                 BT.2020's gamut (16-bit PNG, or AVIF with BT.2020 code points).
 *
 * Limits: width and height 1 .. HP_ENCODE_MAX_SIDE (16384, under JPEG_MAX_DIMENSION, 65500): 0 is
 * HP_ERR_INVALID_ARGUMENT, more is HP_ERR_TOO_LARGE. quality outside 1..100 and a subsampling or colour space
 * outside its enum are HP_ERR_INVALID_ARGUMENT naming the field.
 *
 * Errors: HP_ERR_INVALID_ARGUMENT, HP_ERR_TOO_LARGE, HP_ERR_OUT_OF_MEMORY (libjpeg's pools or the output
 * buffer), HP_ERR_INTERNAL (libjpeg refused something it should not have; the message is libjpeg's). On any
 * failure *result is {0} and nothing is left allocated.
 *
 * Threading: reentrant; one libjpeg context per call, on the calling thread. */
#ifndef HP_ENCODE_JPEG_H
#define HP_ENCODE_JPEG_H

#include <stdint.h>

#include "api/codecs/encode.h"

typedef enum hp_jpeg_subsampling {
    HP_JPEG_SUBSAMPLING_420 = 0, /* Cb, Cr at half width and height (Y sampled 2x2) */
    HP_JPEG_SUBSAMPLING_444 = 1, /* Cb, Cr at full resolution */
    HP_JPEG_SUBSAMPLING_COUNT
} hp_jpeg_subsampling;

typedef struct hp_jpeg_options {
    uint32_t quality;                 /* 1 (smallest) .. 100 (finest), jpeg_set_quality()'s scale; default 90 */
    hp_jpeg_subsampling subsampling;  /* default 4:2:0 */
    hp_output_colorspace colorspace;  /* the samples' primaries: srgb or display_p3; default srgb */
} hp_jpeg_options;

#define HP_JPEG_OPTIONS_DEFAULTS \
    ((hp_jpeg_options){.quality = 90, .subsampling = HP_JPEG_SUBSAMPLING_420, .colorspace = HP_OUTPUT_SRGB})

/* Encodes width x height pixels (layout above) as a JPEG; mime "image/jpeg", data malloc'd (hp_encoded_free).
 * encoding: the transfer named by a Display P3 profile (ignored for srgb). */
hp_code hp_encode_jpeg(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth,
                       hp_output_encoding encoding, const hp_jpeg_options *opt, hp_encoded *result, hp_err *err);

#endif

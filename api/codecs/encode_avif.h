/* AVIF encoder (libavif 0.11 with libaom): HDR review images, 10 or 12 bits, tagged by H.273 code points.
 *
 * Input: hp_encode()'s layout (encode.h): tightly packed RGBA rows, top to bottom, straight alpha, code values
 * already display-encoded (PQ or HLG over BT.2020, sRGB, ...): bit_depth 8, 4 bytes a pixel, or bit_depth 16,
 * 4 uint16_t a pixel in host byte order, full scale (0 .. 65535, as hp_encode() takes them). libavif rescales
 * them to the file's depth (8, 10 or 12; v * (2^depth - 1) / (2^bit_depth - 1), rounded) while it converts RGB
 * to Y'CbCr with the caller's matrix, full range, in float (libavif's reformat.c). Alpha: as hp_encode(),
 * the caller's choice; kept, it is an AV1 auxiliary image of the same depth coded losslessly (as lossy WebP's
 * alpha_quality 100: mattes keep their edges).
 *
 * Colour: the colr box of type nclx (ISO/IEC 14496-12 ColourInformationBox) and the AV1 sequence header carry cicp's
 * primaries, transfer and matrix with full_range 1 (encode_png_hdr.h: the common code points; BT.2100 PQ is
 * 9/16/9, HLG 9/18/9, sRGB 1/13/6). No ICC profile. The caller answers for the samples matching the tags.
 *
 * Coding: libaom (libavif's codecChoice fixed to aom), its all-intra mode for a still (libavif 0.11 with
 * libaom 3.6), at `speed` (libavif's 0..10; libaom's cpu-used, 10 as 9). Debian's libavif also links rav1e
 * 0.5.1 and SVT-AV1 1.4: SVT codes only 4:2:0 at 8 and 10 bits, and rav1e at its fastest (10) took 16.1 s for
 * 4.48 MB where libaom at 9 took 3.8 s for 3.77 MB (the 4K frame below, conversion excluded, same run). Y'CbCr
 * 4:4:4 (default: no chroma loss, AV1 High profile at 8 and 10 bits, Professional at 12) or 4:2:0 (Main
 * profile at 8 and 10: what hardware decoders take; chroma averaged 2x2 by libavif). Matrix 0 (identity, GBR)
 * needs 4:4:4 (AV1 spec 6.4.2).
 *   quality 0..100 -> quantizer q = ((100 - quality) * 63 + 50) / 100 (libavif 1.0's avifEncoder.quality,
 *   so that the scale keeps its meaning on newer libavif), given as minQuantizer = maxQuantizer = q: libaom's
 *   constant-quality mode with cq-level (min + max) / 2 = q (libavif 0.11 codec_aom.c). quality 100 is q 0,
 *   which libavif 0.11 turns into AV1's lossless mode: the only error left is the Y'CbCr rounding (up to 2 code
 *   values, tests/test_encode_formats.c), at about 5 times the size and 3 times the time of quality 80.
 *
 * Limits: width 1 .. 16384 and height 1 .. 8704, 35651584 pixels at most (AV1 spec Annex A.3, levels 6.x: the
 * largest picture a decoder of a defined level must take; 8K UHD is 33.2 Mpixels). 0 is
 * HP_ERR_INVALID_ARGUMENT, more HP_ERR_TOO_LARGE suggesting png.
 *
 * Errors: HP_ERR_INVALID_ARGUMENT (naming output.bit_depth, output.quality, output.effort, output.cicp,
 * output.avif_subsampling), HP_ERR_TOO_LARGE, HP_ERR_INTERNAL (libavif's avifResult and diagnostics in the
 * message; also a libavif built without libaom's encoder). On any failure *result is {0} and nothing is left
 * allocated. Memory: libavif 0.11 aborts the process when malloc fails (src/mem.c: avifAlloc calls abort()),
 * and libaom's own failures come back as HP_ERR_INTERNAL; nothing here can turn the abort into an error.
 *
 * Threading: reentrant; libaom runs `threads` threads of its own (row multithreading, and one tile per thread
 * of 512 x 512 pixels or more), joined before the call returns. */
#ifndef HP_ENCODE_AVIF_H
#define HP_ENCODE_AVIF_H

#include <stdbool.h>
#include <stdint.h>

#include "api/codecs/encode.h"
#include "api/codecs/encode_png_hdr.h" /* hp_cicp */

#define HP_AVIF_MAX_WIDTH 16384u     /* AV1 Annex A.3 MaxHSize, levels 6.x */
#define HP_AVIF_MAX_HEIGHT 8704u     /* MaxVSize */
#define HP_AVIF_MAX_PIXELS 35651584u /* MaxPicSize */

typedef enum hp_avif_subsampling {
    HP_AVIF_SUBSAMPLING_444 = 0, /* Cb, Cr at full resolution */
    HP_AVIF_SUBSAMPLING_420 = 1, /* Cb, Cr at half width and height */
    HP_AVIF_SUBSAMPLING_COUNT
} hp_avif_subsampling;

typedef struct hp_avif_options {
    uint32_t depth;                  /* bits per sample in the file: 8 (not with PQ or HLG), 10 or 12; default 10 */
    uint32_t quality;                /* 0 (smallest) .. 100 (lossless coding), mapped above; default 80 */
    hp_avif_subsampling subsampling; /* default 4:4:4 */
    hp_cicp cicp;                    /* primaries, transfer, matrix (H.273); default BT.2100 PQ, 9/16/9 */
    uint32_t speed;                  /* libavif's 0 (slowest) .. 10 (fastest); default HP_AVIF_SPEED_DEFAULT */
    uint32_t threads;                /* libaom's threads; 0: the usable cores (common/cpus.h) */
} hp_avif_options;

/* The default speed: 9, libaom's fastest all-intra preset (cpu-used 9; libavif 0.11 clamps 10 to 9, same bytes).
 * The street frame of tests/data tiled to 3840x2160, 16-bit PQ in, 10-bit 4:4:4 quality 80 out, 2 threads on the
 * development machine (2 cores, another test suite running; HDRPOST_BENCH=1 build/tests/test_encode_formats):
 *   speed 6: 20.3 s, 3.57 MB, 39.56 dB | 7: 21.7 s, 3.37 MB | 8: 12.7 s, 3.44 MB, 39.05 dB | 9: 6.0 s, 3.77 MB,
 *   38.62 dB | 10: 7.0 s, the same file as 9. 12 bits at speed 9: 8.3 s, 3.84 MB.
 * 9 halves 8's time for a file 10% larger at 0.4 dB less; libavif's own RGB -> Y'CbCr conversion, one thread,
 * is 0.6 s of it (0.67 s at 12 bits). On more cores libaom's threads share the rest (a tile per thread: 16 at 4K
 * on 16 cores); not measured here. */
#define HP_AVIF_SPEED_DEFAULT 9u

/* output.effort 0..6 -> speed, from the timings above: 0..2 (the default 2 among them) -> 9, 3 -> 8 (twice the
 * time, 9% smaller, +0.4 dB), 4..6 -> 6 (3.4 times, 5% smaller, +0.9 dB; below 6 was not measured). */
uint32_t hp_avif_speed_for_effort(uint32_t effort);

#define HP_AVIF_OPTIONS_DEFAULTS                                                                                  \
    ((hp_avif_options){.depth = 10, .quality = 80, .subsampling = HP_AVIF_SUBSAMPLING_444,                      \
                       .cicp = HP_CICP_BT2100_PQ, .speed = HP_AVIF_SPEED_DEFAULT})

/* Encodes width x height pixels (layout above) as an AVIF still image; mime "image/avif", data malloc'd
 * (hp_encoded_free). alpha: keep the A channel (an alpha auxiliary image) or ignore it. */
hp_code hp_encode_avif(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                       const hp_avif_options *opt, hp_encoded *result, hp_err *err);

#endif

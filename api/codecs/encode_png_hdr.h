/* HDR and wide-gamut tags by code point, and the PNG that carries them (the studio-colour issue).
 *
 * An HDR output (PQ or HLG over BT.2020) cannot be described by the colour chunks of encode.h: no gAMA
 * exponent is ST 2084's or HLG's curve, and the ICC v4 matrix/TRC profiles of tools/make_icc.c say nothing of
 * absolute luminance (PQ's code values are cd/m2). ITU-T H.273 code points can, and both PNG (cICP) and AVIF
 * (the nclx colr box, encode_avif.h) carry them: three numbers the caller chooses, always full range (the GPU
 * writes code values 0 .. 2^n - 1).
 *
 * PNG with cICP (W3C PNG Specification, Third Edition, "cICP Coding-independent code points for video signal
 * type identification", https://www.w3.org/TR/png-3/#cICP-chunk): four bytes, colour primaries, transfer
 * function, matrix coefficients 0 (PNG stores RGB only, so the spec allows no other), video full range 1;
 * placed before IDAT (the spec: before PLTE and IDAT). The file's chunks are IHDR, cICP, IDAT..., IEND and
 * nothing else: no sRGB, iCCP, gAMA or cHRM beside it. The spec ranks cICP above all four (a decoder that
 * reads cICP ignores them), so they would matter only to decoders that do not read cICP, and for those they
 * would lie: no gamma or matrix/TRC profile is PQ or HLG, and a gAMA 1/2.2 on PQ samples would show them as
 * SDR with a confident tag instead of the visibly wrong untagged picture. Same for the non-HDR transfers:
 * one description, from one place.
 *
 * The PNG is written by api/codecs/encode.c's PNG code (these functions are defined there, beside the chunk writer
 * they share with hp_encode()), so every path of hp_encode() serves it: in strips on every core (efforts 0..2,
 * and frames of 1 Mpixel or more), through libspng below that at efforts 3..6 (cICP given to libspng 0.7.3,
 * which has no spng_set_cicp, as an unknown chunk placed after IHDR), and around a zlib stream deflated on the
 * GPU (hp_encode_png_cicp_in_place), where only the chunks and their CRCs are left to the CPU. Samples,
 * alpha and everything else as hp_encode(). A 4K 16-bit RGB frame took 1.66 s at effort 2 on the development
 * machine's 2 busy cores (HDRPOST_BENCH=1 build/tests/test_encode_formats), as hp_encode()'s 16-bit PNG does.
 *
 * Threading: reentrant, as encode.h. */
#ifndef HP_ENCODE_PNG_HDR_H
#define HP_ENCODE_PNG_HDR_H

#include <stdbool.h>
#include <stdint.h>

#include "api/codecs/encode.h"

/* ITU-T H.273 (07/2021) code points; full range always (VideoFullRangeFlag 1). The common values: */
typedef enum hp_cicp_value {
    HP_CICP_PRIMARIES_BT709 = 1,       /* ColourPrimaries: BT.709, sRGB (IEC 61966-2-1) */
    HP_CICP_PRIMARIES_BT2020 = 9,      /* BT.2020, BT.2100 */
    HP_CICP_PRIMARIES_DISPLAY_P3 = 12, /* SMPTE EG 432-1: P3 primaries, D65 white */
    HP_CICP_TRANSFER_BT709 = 1,        /* TransferCharacteristics: BT.709 */
    HP_CICP_TRANSFER_LINEAR = 8,
    HP_CICP_TRANSFER_SRGB = 13,        /* IEC 61966-2-1 */
    HP_CICP_TRANSFER_PQ = 16,          /* SMPTE ST 2084, BT.2100 PQ */
    HP_CICP_TRANSFER_HLG = 18,         /* ARIB STD-B67, BT.2100 HLG */
    HP_CICP_MATRIX_IDENTITY = 0,       /* MatrixCoefficients: GBR, no conversion (PNG's only value) */
    HP_CICP_MATRIX_BT709 = 1,
    HP_CICP_MATRIX_BT601 = 6,          /* BT.601 (625 and 525 lines share the matrix) */
    HP_CICP_MATRIX_BT2020_NCL = 9,     /* BT.2020 non-constant luminance */
} hp_cicp_value;

typedef struct hp_cicp {
    uint8_t primaries; /* H.273 ColourPrimaries: 1, 4..12 or 22 (2, unspecified, and reserved values refused) */
    uint8_t transfer;  /* H.273 TransferCharacteristics: 1 or 4..18 */
    uint8_t matrix;    /* H.273 MatrixCoefficients, AVIF only (PNG writes 0 whatever this says): 0, 1, 4..9, 12
                        * (the matrices libavif 0.11 converts RGB with; 0 needs 4:4:4) */
} hp_cicp;

/* BT.2100 PQ and HLG (BT.2020 primaries, its non-constant-luminance matrix for AVIF). */
#define HP_CICP_BT2100_PQ ((hp_cicp){HP_CICP_PRIMARIES_BT2020, HP_CICP_TRANSFER_PQ, HP_CICP_MATRIX_BT2020_NCL})
#define HP_CICP_BT2100_HLG ((hp_cicp){HP_CICP_PRIMARIES_BT2020, HP_CICP_TRANSFER_HLG, HP_CICP_MATRIX_BT2020_NCL})
/* sRGB and Display P3 with sRGB's transfer; matrix BT.601 as libavif's own default (avifImageCreate) and
 * avifenc's: what every AVIF decoder implements, and 4:4:4 loses nothing by it. */
#define HP_CICP_SRGB ((hp_cicp){HP_CICP_PRIMARIES_BT709, HP_CICP_TRANSFER_SRGB, HP_CICP_MATRIX_BT601})
#define HP_CICP_DISPLAY_P3 ((hp_cicp){HP_CICP_PRIMARIES_DISPLAY_P3, HP_CICP_TRANSFER_SRGB, HP_CICP_MATRIX_BT601})

/* Defined in encode.c, as the PNG functions below. */

/* HP_OK when primaries and transfer are H.273 values that name something (not 2, unspecified, nor reserved);
 * with_matrix: the matrix too, as libavif 0.11 converts it. Else HP_ERR_INVALID_ARGUMENT naming `field`
 * (the request parameter, such as "output.cicp") and the value. */
hp_code hp_cicp_check(const hp_cicp *cicp, bool with_matrix, const char *field, hp_err *err);

/* The primaries code point of an output colour space's samples: 1, 12 or 9; 0 outside the enum. */
uint8_t hp_cicp_primaries_of(hp_output_colorspace space);

/* hp_encode() for format png, tagged with cICP instead of the colour chunks. cicp->primaries must be those of
 * out->colorspace (hp_cicp_primaries_of: the pipeline has converted the samples into them, so another value
 * would mislabel them), else HP_ERR_INVALID_ARGUMENT naming output.colorspace. cicp->matrix is not read.
 * out: format png, bit_depth 8 or 16 and equal to bit_depth, effort 0..6. Alpha, layout, limits, errors,
 * result and threading as hp_encode(). */
hp_code hp_encode_png_cicp(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                           const hp_cicp *cicp, const hp_output_params *out, hp_encoded *result, hp_err *err);

/* hp_encode_png_in_place() tagged with cICP instead of the colour chunks: the file around a zlib stream of the
 * filtered rows made elsewhere (the GPU's), in the caller's buffer where room_before and room_after hold the
 * head and tail, else copied out (in_place false). cicp and out as hp_encode_png_cicp(). */
hp_code hp_encode_png_cicp_in_place(uint8_t *zlib, size_t zlib_len, size_t room_before, size_t room_after,
                                    uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                                    const hp_cicp *cicp, const hp_output_params *out, hp_encoded *result,
                                    hp_err *err);

#endif

/* Image encoders: the tone-mapped frame the pipeline hands back (quantized RGBA rows) becomes the bytes of
 * the response, WebP (libwebp, libwebpmux) or PNG (libspng), tagged with the colour space it is in.
 *
 * Input: tightly packed RGBA rows, top to bottom, no row padding, straight (not premultiplied) alpha:
 *   bit_depth 8:  4 bytes per pixel, R, G, B, A;
 *   bit_depth 16: 4 uint16_t per pixel in host byte order (the encoder converts to PNG's big-endian).
 * Quantization and dither happen on the GPU before this (output.dither is not read here).
 *
 * Alpha is the caller's choice: with alpha false the A samples are ignored and an RGB file is written
 * (about a quarter smaller as raw PNG data; libwebp would drop an all-opaque alpha plane anyway, PNG cannot
 * know to); with alpha true an RGBA file is written.
 *
 * WebP (libwebp's advanced API, WebPConfig + WebPPicture):
 *   lossy     quality = output.quality, method = output.effort; the encoder's RGB->YUV 4:2:0 conversion.
 *   lossless  output.quality is ignored (as the schema says); output.effort picks libwebp's lossless preset
 *             level round(1.5 * effort): effort 0..6 -> level 0, 2, 3, 5, 6, 8, 9 (WebPConfigLosslessPreset:
 *             level 0 is method 0 quality 0, level 9 is method 6 quality 100). exact = 1, so RGB under fully
 *             transparent pixels survives (the pipeline passes the file's alpha through; a client may
 *             composite or edit later, and lossless promises the same pixels back).
 *   Both set thread_level = 1: libwebp may run worker threads of its own (the lossy analysis pass, the
 *   alpha plane beside the colour, competing lossless trials); the caller needs no thread for it.
 *   Lossy uses eight token partitions (partitions = 3), so coefficients may fill 8 x 16 MiB. VP8 keeps every
 *   macroblock's prediction modes in one first partition of at most 512 KiB; a frame that overflows it is
 *   encoded once more without 4x4 intra modes (partition_limit 100, method at least 3; a warning is
 *   logged). Measured with a detailed photograph tiled to size at quality 90, effort 2: 12000 x 12000
 *   fits at once (13 s on 2 cores), 13000 x 13000 on the second attempt (32 s), while 14000 x 14000 and
 *   16383 x 16383 do not fit at all: HP_ERR_TOO_LARGE suggesting lossless or png, after both attempts
 *   (33 s, 40 s; at effort 4 the 16383 x 16383 failure took 400 s). Flat frames fit larger.
 *   8 bits only: bit_depth 16 is HP_ERR_INVALID_ARGUMENT naming output.bit_depth. A side over 16383
 *   (WEBP_MAX_DIMENSION) is HP_ERR_TOO_LARGE naming the limit and suggesting png.
 *   Colour: WebP has no gAMA, cHRM or sRGB chunk, only an ICC profile (the ICCP chunk of the extended
 *   format), and viewers take an untagged WebP as sRGB. So:
 *     output.colorspace srgb        no chunk, as before issue 17 (the same bytes; `encoding` is not said).
 *     output.colorspace display_p3  an ICCP chunk with the profile of P3 and `encoding`'s transfer (the PNG's
 *                                   profile below: sRGB curve, gamma 2.2 for the local modes, linear),
 *                                   added by libwebpmux to the file libwebp wrote (a VP8X header flags it;
 *                                   the image chunks are unchanged: about 640 bytes more). Both entry
 *                                   points, hp_encode() and hp_encode_webp_yuv420(), take `encoding`.
 *     output.colorspace rec2020     HP_ERR_INVALID_ARGUMENT naming output.colorspace (16-bit PNG only, as
 *                                   hp_params_check() says first).
 *
 * PNG, 8 or 16 bits, colour type 2 (RGB) or 6 (RGBA), not interlaced:
 *   Deflate by output.effort: 0..2 (the default 2 among them) the run-length coder of deflate_runs.h
 *   (literals and runs of the previous byte, a Huffman code per 64 KiB: on filtered rows of rendered frames
 *   it is smaller than zlib's fast levels, whose match search finds little, and several times faster);
 *   3..6 zlib levels 4, 6, 8, 9 (lazy matching: slower, smaller on flat graphics and text).
 *   Filters: the adaptive choice of libpng and libspng (all five per row, minimum sum of absolute
 *   differences) from effort 1 up. Effort 0 uses SUB alone: one filter per row instead of five trials.
 *   Measured at zlib level 1 on the four frames of tests/data tone-mapped to 8 bits: SUB took about half the
 *   time of adaptive and its files were 1% smaller to 9% larger; NONE, faster still, was 11% to 26% larger
 *   than SUB.
 *   Colour chunks from `encoding` (the transfer) and output.colorspace (the primaries, which the pipeline has
 *   already converted the samples into; all D65):
 *     HP_ENCODING_SRGB       sRGB (perceptual intent; srgb output only), plus gAMA 1/2.2 (45455) and cHRM
 *                            as the PNG spec (11.3.3.5) recommends for decoders that do not read sRGB.
 *     HP_ENCODING_LINEAR     gAMA 1.0 (100000) and cHRM.
 *     HP_ENCODING_SRGB_LIKE  gAMA 1/2.2 (45455) and cHRM, and a tEXt "Comment" saying the samples carry
 *                            Kwon's dynamic local gamma (an exponent per pixel, near 1/2.2): no chunk can
 *                            describe a per-pixel curve, so gAMA gives its nearest global approximation.
 *   output.colorspace srgb writes exactly these (Rec.709/sRGB primaries in cHRM), as before issue 17.
 *   display_p3 and rec2020 write the same gAMA and tEXt, cHRM with the space's primaries (P3: SMPTE EG
 *   432-1; BT.2020-2), and an iCCP chunk (PNG 11.3.3.3) with an ICC profile (ICC.1:2010 v4 matrix/TRC) of
 *   those primaries and the encoding's transfer: the sRGB curve for HP_ENCODING_SRGB, a pure gamma 2.2 for
 *   HP_ENCODING_SRGB_LIKE (gAMA's exponent), gamma 1.0 for HP_ENCODING_LINEAR. Never the sRGB chunk: it
 *   is an embedded profile too, and a file holds one at most (PNG 11.3.3.3, 11.3.3.5). A browser or viewer
 *   that reads ICC converts the wide-gamut samples to its display (shown untagged, as sRGB, P3 and BT.2020
 *   colours look dull); cHRM and gAMA serve decoders without ICC support, and those that read iCCP ignore
 *   them (11.3.3.3).
 *   The six profiles (596 to 628 bytes, 396 to 439 as iCCP data) are made at build time by
 *   tools/make_icc.c with lcms2 and embedded, the iCCP chunk's compressed data included: tagging allocates
 *   nothing per request and no lcms2 is linked. Chunk order, both encoders: IHDR, cHRM, gAMA, sRGB or
 *   iCCP, tEXt, IDAT (each before IDAT, PNG 5.6; libspng's order).
 *   Frames of 1 Mpixel or more, and every frame at efforts 0..2, are filtered and deflated here
 *   (encode.c), in horizontal strips on several threads (hp_encode_set_png_threads; one strip below 1
 *   Mpixel) joined into one zlib stream; this path keeps the filtered frame in memory (one byte per row
 *   more than the PNG's raw samples). Smaller frames at efforts 3..6 go through libspng: rows converted one
 *   at a time (alpha dropped, 16-bit samples swapped to big-endian) and fed progressively. Both write the
 *   same chunks and samples.
 *
 * Limits: width and height 1 .. HP_ENCODE_MAX_SIDE (16384, the daemon's frame limit) for PNG, 1 .. 16383
 * for WebP; 0 is HP_ERR_INVALID_ARGUMENT, more is HP_ERR_TOO_LARGE. Options outside the schema's ranges
 * (quality > 100, effort > 6, bit_depth not 8 or 16, an unknown format) are HP_ERR_INVALID_ARGUMENT naming
 * the field, even though hp_params_check() has already refused them.
 *
 * Errors: HP_ERR_INVALID_ARGUMENT, HP_ERR_TOO_LARGE, HP_ERR_OUT_OF_MEMORY, HP_ERR_INTERNAL (a library
 * refused something it should not have; the message names the library and its own error). On any failure
 * *result is {NULL, 0, NULL} and nothing is left allocated. Every allocation failing in turn is tested
 * (tests/test_encode.c). One hole is libwebp's: 1.2.4 (Debian 12) loses some allocation failures inside its
 * lossless coder and reports success with a damaged file (lossless, or the alpha plane of lossy); newer
 * libwebp reports them. Nothing here can see it short of decoding the result.
 *
 * Threading: reentrant; nothing is shared between calls (the PNG strip threads are the call's own). */
#ifndef HP_ENCODE_H
#define HP_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "pipeline/params.h"

/* The largest side hp_encode() accepts for PNG (the decoders' HP_IMAGE_MAX_SIDE; checked in encode.c). */
#define HP_ENCODE_MAX_SIDE 16384u
/* The largest side for WebP: libwebp's WEBP_MAX_DIMENSION (checked in encode.c). */
#define HP_ENCODE_WEBP_MAX_SIDE 16383u

/* How the samples were encoded by the gamma stage: a hint for the colour chunks of a PNG. */
typedef enum hp_output_encoding {
    HP_ENCODING_SRGB_LIKE = 0, /* Kwon's dynamic local gamma (gamma modes local, local_luminance) */
    HP_ENCODING_SRGB = 1,      /* the sRGB transfer function, IEC 61966-2-1 (gamma mode srgb) */
    HP_ENCODING_LINEAR = 2,    /* linear values quantized (gamma mode linear) */
} hp_output_encoding;

/* The hint that matches a gamma mode; HP_ENCODING_SRGB_LIKE for a value outside the enum. */
hp_output_encoding hp_output_encoding_for_gamma(hp_gamma_mode mode);

/* An encoded image; release it with hp_encoded_free(). mime is a static string: "image/webp" or
 * "image/png". data is malloc'd, unless in_place: then it lies in the caller's buffer
 * (hp_encode_png_in_place), which release(owner) lets go of when the caller has set them. */
typedef struct hp_encoded {
    uint8_t *data;
    size_t size;      /* bytes */
    const char *mime;
    bool in_place;
    void (*release)(void *owner);
    void *owner;
    double cpu_ms;    /* CPU time spent encoding it, on every thread of ours (the calling thread and the PNG
                       * strips' threads; libwebp's own helper thread is not counted) */
} hp_encoded;

/* Encodes width x height pixels (layout above) in the format of out (format, quality, lossless, effort,
 * bit_depth, colorspace; out->bit_depth must equal bit_depth). alpha: write the A channel (RGBA) or not (RGB).
 * encoding: the transfer in a PNG's colour chunks (ignored for WebP). An output.colorspace outside the enum,
 * or rec2020 in WebP, is HP_ERR_INVALID_ARGUMENT naming output.colorspace. On success fills *result. */
hp_code hp_encode(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth, bool alpha,
                  hp_output_encoding encoding, const hp_output_params *out, hp_encoded *result, hp_err *err);

/* The planes of an 8-bit Y'CbCr 4:2:0 frame (ITU-R BT.601 studio range, as VP8 takes it): U and V at half
 * the width and height, rounded up. a: an alpha plane with y_stride, or NULL. */
typedef struct hp_yuv420 {
    const uint8_t *y, *u, *v, *a;
    uint32_t y_stride, uv_stride; /* bytes */
} hp_yuv420;

/* Lossy WebP from planes converted elsewhere (the GPU's tone pass: pipeline/tone.h HP_TONE_OUT_YUV420), so
 * that libwebp's conversion from RGB, one core's work, is skipped. out: format webp, lossless false, bit
 * depth 8; quality, effort and colorspace as hp_encode() (display_p3 tags the file as hp_encode() does).
 * Errors, result and threading as hp_encode(). libwebp may flatten the colour under fully transparent alpha
 * in the planes themselves (it does so when `exact` is off, as here): they are not const to it. */
hp_code hp_encode_webp_yuv420(const hp_yuv420 *planes, uint32_t width, uint32_t height, hp_output_encoding encoding,
                              const hp_output_params *out,
                              hp_encoded *result, hp_err *err);

/* Frees result->data (or, in place, calls release(owner) where set) and empties *result; NULL and an
 * already freed result are fine. */
void hp_encoded_free(hp_encoded *result);

/* PNG frames of STRIP_MIN_PIXELS (1 Mpixel) or more are filtered and deflated in horizontal strips on this
 * many threads at once and joined into one zlib stream (encode.c); 0, the default, is the number of online
 * cores; 1 encodes on the calling thread (libspng's encoder at efforts 3..6). Process-wide; the daemon sets
 * it from its settings. */
void hp_encode_set_png_threads(unsigned threads);

/* For tests and fuzzing: the frame size (pixels) from which PNGs are encoded in strips, so that the strips'
 * join runs on small frames too; 0 restores STRIP_MIN_PIXELS. Process-wide. */
void hp_encode_set_png_strip_min(uint64_t pixels);

/* A PNG around a zlib stream of its filtered rows made elsewhere: the GPU's (pipeline/png_gpu.h,
 * output.png_encoder gpu; hp_png_gpu_join makes the stream from what was read back). The chunks are
 * encode_png_strips' own (IHDR, the colour chunks or iCCP for out->colorspace and `encoding`, tEXt, IDAT,
 * IEND, with their CRCs), so that the two paths differ only in IDAT's bytes. alpha: colour type 6 (RGBA),
 * else 2 (RGB); out->bit_depth must be bit_depth. The stream is not checked. */
hp_code hp_encode_png_deflated(const uint8_t *zlib, size_t zlib_len, uint32_t width, uint32_t height,
                               uint32_t bit_depth, bool alpha, hp_output_encoding encoding,
                               const hp_output_params *out, hp_encoded *result, hp_err *err);

/* hp_encode_png_deflated without a copy of the stream: the chunks before IDAT are written into the
 * room_before bytes in front of zlib, IDAT's CRC and IEND into the room_after bytes after it, and the file
 * is result->data (result->in_place) inside the caller's buffer, whose release is the caller's (set
 * result->release and owner to hand it to whoever frees the result). Where the room does not hold them, or
 * the stream needs more than one IDAT (over 1 GiB), the file is copied out as hp_encode_png_deflated does
 * (in_place false). HP_PNG_GPU_HEAD_ROOM (pipeline/png_gpu.h) holds every head. */
hp_code hp_encode_png_in_place(uint8_t *zlib, size_t zlib_len, size_t room_before, size_t room_after, uint32_t width,
                               uint32_t height, uint32_t bit_depth, bool alpha, hp_output_encoding encoding,
                               const hp_output_params *out, hp_encoded *result, hp_err *err);

#endif

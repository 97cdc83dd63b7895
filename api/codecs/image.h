/* Image decoders: the frame a client POSTs, as bytes in memory, becomes tightly packed RGBA rows that
 * the pipeline reads (and, optionally, a float depth plane for depth of field).
 *
 * Two steps, so a frame can be decoded straight into GPU staging memory with no copy in between:
 *   hp_image_probe()   reads only the header: format, size, channels, limits. Nothing is decoded.
 *   hp_image_decode()  writes the pixels into memory the caller sized from the probe.
 *
 * Formats are told apart by their magic bytes, never by a name or a content type:
 *   OpenEXR        76 2f 31 01           scanline and tiled (level 0); half, float and uint channels;
 *                                        NONE, RLE, ZIPS, ZIP, PIZ, PXR24, B44, B44A, DWAA, DWAB; data
 *                                        window apart from the display window; layers by name; multi-part
 *   Radiance RGBE  "#?RADIANCE", "#?RGBE" FORMAT=32-bit_rle_rgbe, -Y H +X W; new-style RLE, flat and
 *                                        old-style RLE scanlines
 *   PFM            "PF" colour, "Pf" grey either byte order, rows stored bottom to top
 *
 * Values are never altered: negative, NaN and infinite samples pass through (the pipeline decides what
 * they mean), and so does an EXR depth of 1e10 (Blender's sky). Every input is untrusted network data:
 * each length and offset is checked before it is used, and a damaged file is an error, never a crash.
 *
 * Errors: HP_ERR_UNSUPPORTED_FORMAT (magic bytes of no format above), HP_ERR_INVALID_ARGUMENT
 * (malformed or truncated data, an EXR attribute sized past the end of the file: the message says what and
 * where), HP_ERR_TOO_LARGE (over a limit of hp_decode_options, or more pixels than the bytes given can hold
 * in the format's densest coding, a decompression bomb: found from the header alone), HP_ERR_UNUSABLE (a valid file this daemon cannot use:
 * no colour channels, a depth channel of another size, deep data, XYZE colour, a flipped orientation),
 * HP_ERR_OUT_OF_MEMORY. A failure caused by a name in hp_decode_options (a layer or channel the file does
 * not have, or one that cannot serve) sets err->field to the option's name: "layer", "channel_r",
 * "channel_g", "channel_b", "channel_a" or "depth"; every other failure leaves it empty.
 *
 * Threading: every function is reentrant; nothing is shared between calls. */
#ifndef HP_IMAGE_H
#define HP_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "pipeline/colorspace.h"

#include "api/codecs/image_decoder.h"
#include "api/codecs/image_exr_zip.h"

/* Bytes per pixel: 8 or 16; 0 for a value outside the enum. */
size_t hp_pixel_layout_size(hp_pixel_layout layout);

/* "exr", "rgbe", "pfm" or "unknown". */
const char *hp_image_format_name(hp_image_format format);

/* The format from the first bytes alone (at most 10 are read); HP_IMAGE_UNKNOWN when none matches. */
hp_image_format hp_image_detect(const uint8_t *bytes, size_t len);


/* The limits of opt (NULL: the defaults) for a frame of this size, as a probe checks them: HP_ERR_TOO_LARGE
 * naming the dimension and the limit, or HP_OK. For frames that come without a header (raw samples). */
hp_code hp_image_check_limits_public(uint32_t width, uint32_t height, const hp_decode_options *opt, hp_err *err);

/* Reads the header of bytes[0, len): fills info, checks the limits of opt (NULL: the defaults) and
 * chooses the channels. Reads no pixel data. */
hp_code hp_image_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                       hp_err *err);

/* Decodes the frame into rgba_dst: width * height * hp_pixel_layout_size(dst_layout) bytes, rows top to
 * bottom, alpha 1 where the file has none, grey copied to R, G and B. depth_dst, when not NULL and
 * info->has_depth, receives width * height floats (left untouched when the file has no depth).
 * info must come from hp_image_probe() with the same bytes and options; the header is read again and
 * must agree, and the depth counts are added. On failure the destination holds partial data. */
hp_code hp_image_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                        void *rgba_dst, hp_pixel_layout dst_layout, float *depth_dst, hp_err *err);


#endif

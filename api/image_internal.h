/* Shared by the decoders of api/image*.c; not for other rooms. */
#ifndef HP_IMAGE_INTERNAL_H
#define HP_IMAGE_INTERNAL_H

#include "api/image.h"

/* Where decoded pixels go: the caller's frame, width * height pixels of layout. */
typedef struct hp_image_dest {
    void *rgba;
    hp_pixel_layout layout;
    float *depth; /* NULL: depth not wanted */
    uint32_t width, height;
} hp_image_dest;

typedef struct hp_depth_stats {
    uint64_t background, nonfinite;
} hp_depth_stats;

/* opt with every 0 replaced by its default. */
hp_decode_options hp_image_options_resolve(const hp_decode_options *opt);

/* HP_ERR_TOO_LARGE naming the dimension and the limit, or HP_OK. width and height are 64-bit so that a
 * header's raw values are checked before anything narrows them. */
hp_code hp_image_check_limits(const char *what, uint64_t width, uint64_t height, const hp_decode_options *opt,
                              hp_err *err);

/* Writes one pixel of floats into the frame (rounded to nearest even for RGBA16F). */
void hp_image_store_pixel(const hp_image_dest *dest, size_t index, float r, float g, float b, float a);

/* Every probe fills info completely (after it was zeroed by the caller) or fails. Every decode is given
 * the info of a probe of the same bytes with the same options. */
hp_code hp_exr_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                     hp_err *err);
hp_code hp_exr_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                      const hp_image_dest *dest, hp_depth_stats *stats, hp_err *err);

/* The EXR decoder in its parts, for spreading one frame's chunks over threads: open once (the header is
 * parsed and the channels chosen, as hp_image_probe does), then decode ranges of chunks [first, end) of
 * info->chunk_count. Ranges that do not overlap may be decoded at once on separate threads with one
 * reader; each call adds to its own stats. */
typedef struct hp_exr_reader hp_exr_reader;
hp_code hp_exr_open(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                    hp_exr_reader **out, hp_err *err);
hp_code hp_exr_decode_chunks(hp_exr_reader *reader, uint32_t first, uint32_t end, const hp_image_dest *dest,
                             hp_depth_stats *stats, hp_err *err);
void hp_exr_close(hp_exr_reader **reader);

hp_code hp_rgbe_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                      hp_err *err);
hp_code hp_rgbe_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                       const hp_image_dest *dest, hp_err *err);

hp_code hp_pfm_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                     hp_err *err);
hp_code hp_pfm_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                      const hp_image_dest *dest, hp_err *err);

#endif

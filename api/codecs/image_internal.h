/* The EXR decoder in its parts, for api/codecs/image_exr_zip.c and the tests: not for other rooms. */
#ifndef HP_IMAGE_INTERNAL_H
#define HP_IMAGE_INTERNAL_H

#include "api/codecs/image_decoder.h"

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

#endif

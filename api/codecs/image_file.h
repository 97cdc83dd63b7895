/* A frame file read whole and decoded: for the tools, the benches and the tests, which start from files (the
 * daemon's frames come from sockets and are decoded as they arrive, api/frames/). */
#ifndef HP_IMAGE_FILE_H
#define HP_IMAGE_FILE_H

#include "api/codecs/image.h"

/* The frame at path decoded with the default options into a malloc'd buffer in `layout` (width * height *
 * hp_pixel_layout_size(layout) bytes), its info in *info. When depth is not NULL, *depth gets the frame's depth
 * plane (malloc'd, a float a pixel), or NULL when the frame has none (info->has_depth). NULL, with err naming the
 * file and what failed, when it cannot be read or decoded. */
void *hp_image_decode_file(const char *path, hp_pixel_layout layout, float **depth, hp_image_info *info,
                           hp_err *err);

#endif

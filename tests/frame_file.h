/* A frame file of tests/data decoded as the daemon decodes it (api/codecs/image.h, default options): what the
 * tests that start from a real frame share, so that each says only what it does with the pixels. */
#ifndef HP_TESTS_FRAME_FILE_H
#define HP_TESTS_FRAME_FILE_H

#include <stdio.h>
#include <stdlib.h>

#include "api/codecs/image.h"
#include "common/file.h"

/* The frame at `path` in `layout`, malloc'd (width * height * hp_pixel_layout_size(layout) bytes), its info in
 * *info; NULL, with a message in e naming what failed, when it cannot be read or decoded. */
static inline void *frame_file_decode(const char *path, hp_pixel_layout layout, hp_image_info *info, hp_err *e)
{
    size_t len = 0;
    uint8_t *bytes = hp_read_file(path, &len);
    if (!bytes) {
        snprintf(e->message, sizeof(e->message), "cannot read %.400s", path);
        return NULL;
    }
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    void *frame = NULL;
    if (hp_image_probe(bytes, len, &opt, info, e) == HP_OK) {
        frame = malloc((size_t)info->width * info->height * hp_pixel_layout_size(layout));
        if (!frame)
            snprintf(e->message, sizeof(e->message), "no memory to decode %.400s", path);
        else if (hp_image_decode(bytes, len, &opt, info, frame, layout, NULL, e) != HP_OK)
            free(frame), frame = NULL;
    }
    free(bytes);
    return frame;
}

#endif

#include "api/codecs/image_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"

void *hp_image_decode_file(const char *path, hp_pixel_layout layout, float **depth, hp_image_info *info,
                           hp_err *err)
{
    if (depth)
        *depth = NULL;
    size_t len = 0;
    uint8_t *bytes = hp_read_file(path, &len);
    if (!bytes) {
        hp_fail(err, HP_ERR_IO, "cannot read %.400s: %s", path, strerror(errno));
        return NULL;
    }
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    void *frame = NULL;
    float *z = NULL;
    hp_code code = hp_image_probe(bytes, len, &opt, info, err);
    if (code == HP_OK) {
        size_t n = (size_t)info->width * info->height;
        frame = malloc(n * hp_pixel_layout_size(layout));
        z = depth && info->has_depth ? malloc(n * sizeof(float)) : NULL;
        if (!frame || (depth && info->has_depth && !z))
            code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory");
        else
            code = hp_image_decode(bytes, len, &opt, info, frame, layout, z, err);
    }
    free(bytes);
    if (code == HP_OK) {
        if (depth)
            *depth = z;
        return frame;
    }
    free(frame), free(z);
    char why[sizeof(err->message)]; /* the decoder's message, after the file's name */
    snprintf(why, sizeof(why), "%s", err->message);
    hp_fail(err, code, "%.200s: %s", path, why);
    return NULL;
}

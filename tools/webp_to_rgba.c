/* Decodes a WebP with libwebp to raw RGBA8 rows, for the end-to-end tests (tests/http/test_render.py
 * compares the daemon's WebP with tools/cpu_render's image; Python's standard library has no WebP decoder).
 *
 *     webp_to_rgba IN.webp OUT.rgba    prints "WIDTH HEIGHT HAS_ALPHA" */
#include <stdio.h>
#include <stdlib.h>
#include <webp/decode.h>

#include "common/file.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.webp OUT.rgba\n", argv[0]);
        return 2;
    }
    size_t len = 0;
    uint8_t *data = hp_read_file(argv[1], &len);
    WebPBitstreamFeatures features;
    if (!data || WebPGetFeatures(data, len, &features) != VP8_STATUS_OK) {
        fprintf(stderr, "%s: not a WebP file\n", argv[1]);
        free(data);
        return 1;
    }
    int w = 0, h = 0;
    uint8_t *rgba = WebPDecodeRGBA(data, len, &w, &h);
    free(data);
    FILE *out = rgba ? fopen(argv[2], "wb") : NULL;
    size_t bytes = (size_t)w * (size_t)h * 4;
    int rc = out && fwrite(rgba, 1, bytes, out) == bytes ? 0 : 1;
    if (out && fclose(out) != 0)
        rc = 1;
    WebPFree(rgba);
    if (rc)
        fprintf(stderr, "%s: cannot decode or write %s\n", argv[1], argv[2]);
    else
        printf("%d %d %d\n", w, h, features.has_alpha);
    return rc;
}

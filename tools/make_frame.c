/* Makes a large benchmark frame from a small real one (a real 4K render is too large to keep in the
 * repository; tests/data/README.md lists the real frames): decodes FRAME, scales it up by an integer
 * factor with bilinear interpolation, and writes an RGB(A) half-float OpenEXR with the given compression,
 * in scanlines or in 64x64 tiles. The HTTP tests also use it (factor 1) for one frame in every compression
 * the C core writes.
 *
 * Usage: make_frame IN OUT.exr FACTOR [none|rle|zips|zip|piz|pxr24|b44|b44a] [tiled] */
#include <openexr.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image.h"
#include "common/file.h"
#include "pipeline/cpu_reference.h"
#include "tools/exr_write.h"

int main(int argc, char **argv)
{
    static const char *const names[] = {"none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a"};
    const char *comp = argc > 4 ? argv[4] : "zip";
    int compression = -1;
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (!strcmp(comp, names[i]))
            compression = i; /* exr_compression_t's order */
    bool tiled = argc > 5 && !strcmp(argv[5], "tiled");
    if (argc < 4 || compression < 0 || (argc > 5 && !tiled)) {
        fprintf(stderr, "usage: make_frame IN OUT.exr FACTOR [none|rle|zips|zip|piz|pxr24|b44|b44a] [tiled]\n");
        return 2;
    }
    int factor = atoi(argv[3]);
    size_t len;
    uint8_t *bytes = hp_read_file(argv[1], &len);
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_err err = {0};
    if (!bytes || factor < 1 || hp_image_probe(bytes, len, &opt, &info, &err) != HP_OK) {
        fprintf(stderr, "make_frame: %s\n", bytes ? err.message : "cannot read the input");
        return 1;
    }
    float *src = malloc((size_t)info.width * info.height * 16);
    if (!src || hp_image_decode(bytes, len, &opt, &info, src, HP_LAYOUT_RGBA32F, NULL, &err) != HP_OK) {
        fprintf(stderr, "make_frame: %s\n", src ? err.message : "out of memory");
        return 1;
    }
    int w = (int)info.width * factor, h = (int)info.height * factor;
    uint16_t *planes = malloc((size_t)w * h * 2 * 4);
    if (!planes) {
        fprintf(stderr, "make_frame: out of memory\n");
        return 1;
    }
    for (int y = 0; y < h; y++) {
        float fy = ((float)y + 0.5f) / (float)factor - 0.5f;
        int y0 = fy < 0 ? 0 : (int)fy;
        int y1 = y0 + 1 < (int)info.height ? y0 + 1 : y0;
        float ty = fy < 0 ? 0 : fy - (float)y0;
        for (int x = 0; x < w; x++) {
            float fx = ((float)x + 0.5f) / (float)factor - 0.5f;
            int x0 = fx < 0 ? 0 : (int)fx;
            int x1 = x0 + 1 < (int)info.width ? x0 + 1 : x0;
            float tx = fx < 0 ? 0 : fx - (float)x0;
            for (int c = 0; c < 4; c++) {
                const float *r0 = src + 4 * (size_t)y0 * info.width, *r1 = src + 4 * (size_t)y1 * info.width;
                float a = r0[4 * x0 + c] + (r0[4 * x1 + c] - r0[4 * x0 + c]) * tx;
                float b = r1[4 * x0 + c] + (r1[4 * x1 + c] - r1[4 * x0 + c]) * tx;
                planes[(size_t)c * w * h + (size_t)y * w + x] = hp_float_to_half(a + (b - a) * ty);
            }
        }
    }
    /* EXR lists channels alphabetically: A, B, G, R. */
    hp_exr_channel channels[4] = {{"A", EXR_PIXEL_HALF, planes + (size_t)3 * w * h},
                                  {"B", EXR_PIXEL_HALF, planes + (size_t)2 * w * h},
                                  {"G", EXR_PIXEL_HALF, planes + (size_t)1 * w * h},
                                  {"R", EXR_PIXEL_HALF, planes}};
    hp_exr_spec spec = {.width = w, .height = h, .display_w = w, .display_h = h, .compression = compression,
                        .tile = tiled ? 64 : 0, .channels = channels, .channel_count = info.has_alpha ? 4 : 3};
    if (!info.has_alpha)
        spec.channels = channels + 1;
    uint8_t *out;
    size_t out_len;
    if (!hp_exr_write_core(&spec, 1, &out, &out_len)) {
        fprintf(stderr, "make_frame: the EXR could not be written\n");
        return 1;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, out_len, f) != out_len) {
        fprintf(stderr, "make_frame: cannot write %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    printf("make_frame: %s, %dx%d, half %s%s, %zu bytes\n", argv[2], w, h, comp, tiled ? ", 64x64 tiles" : "",
           out_len);
    free(out);
    free(planes);
    free(src);
    free(bytes);
    return 0;
}

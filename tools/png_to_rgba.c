/* Decodes a PNG with libspng to raw RGBA rows, for the end-to-end tests (tests/http/test_png_gpu.py decodes
 * the daemon's PNG with Python's zlib and its own unfiltering too: two independent decoders).
 *
 *     png_to_rgba IN.png OUT.rgba    prints "WIDTH HEIGHT CHANNELS DEPTH"
 *
 * OUT holds RGBA8, or RGBA16 in host byte order for a 16-bit PNG; an RGB PNG's alpha is the maximum. The
 * CRCs are checked (libspng's default), a bad one fails. */
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/file.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.png OUT.rgba\n", argv[0]);
        return 2;
    }
    size_t len = 0;
    uint8_t *data = hp_read_file(argv[1], &len);
    spng_ctx *ctx = data ? spng_ctx_new(0) : NULL;
    struct spng_ihdr ihdr = {0};
    int rc = !ctx ? 1 : spng_set_png_buffer(ctx, data, len);
    if (rc == 0)
        rc = spng_get_ihdr(ctx, &ihdr);
    int fmt = ihdr.bit_depth == 16 ? SPNG_FMT_RGBA16 : SPNG_FMT_RGBA8;
    size_t bytes = 0;
    if (rc == 0)
        rc = spng_decoded_image_size(ctx, fmt, &bytes);
    uint8_t *rgba = rc == 0 ? malloc(bytes) : NULL;
    if (rc == 0 && !rgba)
        rc = SPNG_EMEM;
    if (rc == 0)
        rc = spng_decode_image(ctx, rgba, bytes, fmt, 0);
    if (rc != 0) {
        fprintf(stderr, "%s: libspng: %s\n", argv[1], ctx ? spng_strerror(rc) : "cannot read");
    } else {
        FILE *out = fopen(argv[2], "wb");
        rc = out && fwrite(rgba, 1, bytes, out) == bytes ? 0 : 1;
        if (out && fclose(out) != 0)
            rc = 1;
        if (rc)
            fprintf(stderr, "cannot write %s\n", argv[2]);
        else
            printf("%u %u %d %u\n", ihdr.width, ihdr.height, ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4 : 3,
                   (unsigned)ihdr.bit_depth);
    }
    free(rgba);
    spng_ctx_free(ctx);
    free(data);
    return rc ? 1 : 0;
}

/* Decodes an AVIF with libavif to raw RGBA rows of its own depth (8 bits: bytes; 10 or 12: little-endian 16-bit
 * words holding the code values), for the end-to-end tests (tests/http/test_ocio.py holds an OCIO view's AVIF to
 * OCIO's CPU processor; Python's standard library has no AVIF decoder).
 *
 *     avif_to_rgba IN.avif OUT.rgba    prints "WIDTH HEIGHT DEPTH PRIMARIES TRANSFER MATRIX FULL_RANGE" */
#include <avif/avif.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/file.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.avif OUT.rgba\n", argv[0]);
        return 2;
    }
    size_t len = 0;
    uint8_t *data = hp_read_file(argv[1], &len);
    avifImage *image = avifImageCreateEmpty();
    avifDecoder *decoder = avifDecoderCreate();
    avifResult r = data && image && decoder ? avifDecoderReadMemory(decoder, image, data, len) : AVIF_RESULT_UNKNOWN_ERROR;
    avifRGBImage rgb;
    int rc = 1;
    if (r == AVIF_RESULT_OK) {
        avifRGBImageSetDefaults(&rgb, image); /* RGBA at the image's own depth */
        avifRGBImageAllocatePixels(&rgb);
        r = avifImageYUVToRGB(image, &rgb);
        FILE *out = r == AVIF_RESULT_OK ? fopen(argv[2], "wb") : NULL;
        size_t row = (size_t)rgb.width * 4 * (rgb.depth > 8 ? 2 : 1);
        rc = out ? 0 : 1;
        for (uint32_t y = 0; out && y < rgb.height; y++)
            if (fwrite(rgb.pixels + (size_t)y * rgb.rowBytes, 1, row, out) != row)
                rc = 1;
        if (out && fclose(out) != 0)
            rc = 1;
        if (!rc)
            printf("%u %u %u %u %u %u %d\n", image->width, image->height, image->depth, image->colorPrimaries,
                   image->transferCharacteristics, image->matrixCoefficients, image->yuvRange == AVIF_RANGE_FULL);
        avifRGBImageFreePixels(&rgb);
    }
    if (rc)
        fprintf(stderr, "%s: %s\n", argv[1], r == AVIF_RESULT_OK ? "cannot write the output" : avifResultToString(r));
    avifDecoderDestroy(decoder);
    if (image)
        avifImageDestroy(image);
    free(data);
    return rc;
}

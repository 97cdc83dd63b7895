/* A test frame for the EXR writers of tests/test_image.c (OpenEXR's C core) and test_image_dwa.cpp (its
 * C++ library, for DWAA/DWAB while the core cannot write them). */
#ifndef HP_TEST_IMAGE_EXR_H
#define HP_TEST_IMAGE_EXR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct test_exr_channel {
    const char *name;
    int type;         /* exr_pixel_type_t: 0 uint, 1 half, 2 float */
    const void *data; /* width * height values of that type, rows top to bottom */
} test_exr_channel;

typedef struct test_exr_spec {
    int width, height;          /* of the data window */
    int data_x, data_y;         /* its top-left corner */
    int display_w, display_h;   /* display window (0, 0) to (w - 1, h - 1) */
    int compression;            /* exr_compression_t */
    int tile;                   /* tile side, 0 for scanlines */
    int decreasing_y;           /* line order (core writer only) */
    const test_exr_channel *channels;
    int channel_count;
} test_exr_spec;

/* The C++ writer: 1 on success, the file in *out (malloc'd). */
int test_write_exr_cxx(const test_exr_spec *spec, uint8_t **out, size_t *len);

#ifdef __cplusplus
}
#endif

#endif

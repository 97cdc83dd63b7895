/* A test frame for the EXR writers of tests/test_image.c (OpenEXR's C core) and test_image_dwa.cpp (its
 * C++ library, for DWAA/DWAB while the core cannot write them). */
#ifndef HP_TEST_IMAGE_EXR_H
#define HP_TEST_IMAGE_EXR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "tools/exr_write.h"

typedef hp_exr_channel test_exr_channel;
typedef hp_exr_spec test_exr_spec;

/* The C++ writer: 1 on success, the file in *out (malloc'd). */
int test_write_exr_cxx(const test_exr_spec *spec, uint8_t **out, size_t *len);

#ifdef __cplusplus
}
#endif

#endif

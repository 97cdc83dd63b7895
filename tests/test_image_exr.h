/* A test frame for the EXR writers of tools/exr_write.h (OpenEXR's C core, and its C++ library for DWAA/DWAB
 * while the core cannot write them). */
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

/* The C++ writer (tools/exr_write.h's, with HP_EXR_WRITE_CXX): 1 on success, the file in *out (malloc'd). */
#define test_write_exr_cxx hp_exr_write_cxx
#define test_write_exr_cxx_attr hp_exr_write_cxx_attr

#ifdef __cplusplus
}
#endif

#endif

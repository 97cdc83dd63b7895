/* Writing OpenEXR files with the library's C core (tools/exr_write.c). */
#ifndef HP_EXR_WRITE_H
#define HP_EXR_WRITE_H

#include <openexr.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hp_exr_channel {
    const char *name;
    int type;         /* exr_pixel_type_t: 0 uint, 1 half, 2 float */
    const void *data; /* width * height values of that type, rows top to bottom */
} hp_exr_channel;

typedef struct hp_exr_spec {
    int width, height;          /* of the data window */
    int data_x, data_y;         /* its top-left corner */
    int display_w, display_h;   /* display window (0, 0) to (w - 1, h - 1) */
    int compression;            /* exr_compression_t */
    int tile;                   /* tile side, 0 for scanlines */
    int decreasing_y;           /* line order (core writer only) */
    const hp_exr_channel *channels;
    int channel_count;
    /* The `chromaticities` attribute: red, green, blue and white xy (8 values), or NULL for none. */
    const float *chromaticities;
} hp_exr_spec;

/* A growing memory buffer for exr_context_initializer_t.write_fn (user_data points at one). */
typedef struct hp_exr_sink {
    uint8_t *data;
    size_t len, cap;
} hp_exr_sink;

int64_t hp_exr_sink_write(exr_const_context_t ctxt, void *userdata, const void *buffer, uint64_t sz, uint64_t offset,
                          exr_stream_error_func_ptr_t error_cb);

/* Bytes per sample of an exr_pixel_type_t. */
size_t hp_exr_type_size(int type);

/* A file of `count` parts named "p0", "p1"...: 1 on success with the file in *out (malloc'd), 0 on failure.
 * The core cannot write DWAA/DWAB in OpenEXR 3.1: hp_exr_write_cxx can. */
int hp_exr_write_core(const hp_exr_spec *specs, int count, uint8_t **out, size_t *len);

#ifdef HP_EXR_WRITE_CXX
/* One part with OpenEXR's C++ library (tools/exr_write_cxx.cpp, where the C core lacks DWAA/DWAB): 1 on success
 * with the file in *out (malloc'd), 0 on failure (the library's words on stderr). No line order choice. */
int hp_exr_write_cxx(const hp_exr_spec *spec, uint8_t **out, size_t *len);
/* The same with one more attribute in the header: a string, or (as_vector) a stringvector of that one string;
 * none when name is NULL (tests/test_image.c's damaged attribute sizes). */
int hp_exr_write_cxx_attr(const hp_exr_spec *spec, const char *name, const char *value, int as_vector, uint8_t **out,
                          size_t *len);
#endif

#ifdef __cplusplus
}
#endif

#endif

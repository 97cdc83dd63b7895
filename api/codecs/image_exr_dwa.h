/* DWAA/DWAB chunks through OpenEXR's C++ library, for as long as the C core cannot decompress them.
 *
 * OpenEXR 3.1's core library answers "DWA/B decompression not yet implemented in C"
 * (EXR_ERR_FEATURE_NOT_IMPLEMENTED); its C++ library, built from the same source package, has the
 * decompressor, but only behind the public C++ classes. So for a DWA part only, each chunk is read with
 * Imf::InputPart (scanlines) or Imf::TiledInputPart (tiles) into the same scratch the core path uses, and
 * image_exr.c converts it to the frame as for every other compression. Built only when the installed
 * OpenEXR is older than 3.2 (api/meson.build), where the C core gained DWA: delete then.
 *
 * The C++ library trusts the sizes in the header: it allocates what an attribute declares before reading
 * it. hp_exr_open (image_exr.c) has checked every attribute's size against the file before any file
 * reaches it, and has refused frames with more pixels than their bytes can hold. */
#ifndef HP_IMAGE_EXR_DWA_H
#define HP_IMAGE_EXR_DWA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/error.h" /* a C header without its own extern "C" */

typedef struct hp_exr_dwa hp_exr_dwa;

/* One channel to read: its name, its exr_pixel_type_t (the file's own: no conversion), and where pixel
 * (x0, y0) of the chunk goes; pixels and lines are `pixel_stride` and `line_stride` bytes apart. */
typedef struct hp_exr_dwa_slot {
    const char *name;
    int type;
    uint8_t *base;
} hp_exr_dwa_slot;

/* What the C core read from the header. The C++ library parses it again on its own, and a damaged header
 * could be read two ways: the pixels are only read when both agree, so that every write stays inside the
 * caller's chunk. */
typedef struct hp_exr_dwa_expect {
    int32_t min_x, min_y, max_x, max_y; /* data window */
    uint32_t tile_w, tile_h;            /* 0 for scanlines */
    const hp_exr_dwa_slot *slots;       /* names and types; base unused here */
    int slot_count;
} hp_exr_dwa_expect;

/* Opens part `part` of the file in memory (bytes must outlive the reader). One reader per thread. */
hp_code hp_exr_dwa_open(const uint8_t *bytes, size_t len, int part, const hp_exr_dwa_expect *expect,
                        hp_exr_dwa **out, hp_err *err);

/* Reads the chunk whose pixels are (x0, y0) to (x0 + w - 1, y0 + h - 1), absolute coordinates: a tile
 * (tile_x, tile_y) at level 0 for a tiled part, else the scanlines y0 to y0 + h - 1 (x0 is then the
 * data window's left edge and w its width). */
hp_code hp_exr_dwa_read(hp_exr_dwa *reader, const hp_exr_dwa_slot *slots, int slot_count, size_t pixel_stride,
                        size_t line_stride, int tiled, int tile_x, int tile_y, int32_t x0, int32_t y0, int32_t w,
                        int32_t h, hp_err *err);

void hp_exr_dwa_close(hp_exr_dwa **reader);

#ifdef __cplusplus
}
#endif

#endif

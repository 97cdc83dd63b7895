/* What a decoder of api/codecs/image_*.c works with, and what it gives api/codecs/image.c: one row of the table
 * there (decoders[]). A new format is a file that defines its hp_image_decoder and that row. The decoders
 * include this header (and EXR's api/codecs/image_internal.h), never api/codecs/image.h: the dispatcher stands
 * above them, so that no file imports one that imports it. */
#ifndef HP_IMAGE_DECODER_H
#define HP_IMAGE_DECODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "pipeline/colorspace.h"

/* How the decoded colour is laid out: 4 channels per pixel in R, G, B, A order, rows top to bottom,
 * tightly packed (no row padding). The numbering is pipeline/reduce.h's hp_pixel_format, so a value
 * passes from one to the other unchanged (checked at compile time in image.c). */
typedef enum hp_pixel_layout {
    HP_LAYOUT_RGBA16F = 0, /* 4 x IEEE half, 8 bytes per pixel; floats rounded to nearest even */
    HP_LAYOUT_RGBA32F = 1, /* 4 x IEEE float, 16 bytes per pixel */
} hp_pixel_layout;

/* A format: its row in api/codecs/image.c's table plus one. Named here are the ones code asks about by name. */
typedef enum hp_image_format {
    HP_IMAGE_UNKNOWN = 0,
    HP_IMAGE_EXR = 1,
    HP_IMAGE_RGBE = 2, /* Radiance .hdr */
    HP_IMAGE_PFM = 3,
} hp_image_format;

typedef struct hp_decode_options {
    /* Limits, checked from the header before any pixel is decoded; a frame over one is HP_ERR_TOO_LARGE.
     * 0 means the default. */
    uint32_t max_width;  /* pixels, default 16384 */
    uint32_t max_height; /* pixels, default 16384 */
    uint64_t max_pixels; /* width * height, default 16384 * 16384 (2^28, the pipeline's frame limit) */

    /* EXR channel choice (ignored for RGBE and PFM). NULL or "" means automatic.
     * layer: the prefix of a layer's channel names without the final dot, e.g. "ViewLayer.Combined" takes
     *   ViewLayer.Combined.R/G/B and .A when present (or .Y alone as grey).
     * channel_r/g/b/a: explicit channel names; r, g and b go together and override layer; a optional.
     * Automatic: plain R, G, B (and A); else the first layer whose last part is "Combined" (Blender's
     * render result); else the first layer with R, G and B; else plain Y, then the first layer with Y,
     * as grey (R = G = B = Y; a Y beside an X is a vector's, not grey). Channels are searched in part 0;
     * a named layer or channel is also searched for in later parts. */
    const char *layer;
    const char *channel_r, *channel_g, *channel_b, *channel_a;
    /* depth: an explicit depth channel name. Automatic: Z; else the colour layer's own Z; else the first
     * channel named *Depth.Z (Blender's ViewLayer.Depth.Z); else the first <layer>.Z of a layer with no X
     * or Y (a vector's Z, as Normal.Z, is not a depth). Depth must be in the colour's part. */
    const char *depth;
    /* EXR: threads that decode one frame's chunks at once (the chunks are independent); 0 or 1: the
     * calling thread alone. DWAA/DWAB parts are decoded on one thread (their decoder is the C++ library's
     * on OpenEXR 3.1). */
    uint32_t threads;
    /* Bytes that may still be arriving (common/arrival.h): the OpenEXR reader waits for each range it
     * reads, so a frame can be decoded while it is received. NULL: every byte is there. Other formats
     * need every byte there. */
    struct hp_arrival *arrival;
    /* Told which rows are final as the chunks of a scanline EXR are decoded (common/rows_ready.h:
     * hp_rows_ready_layout and _piece; the caller starts and finishes it), so that they can be uploaded
     * while the rest decodes. NULL: nobody asks. */
    struct hp_rows_ready *rows;
} hp_decode_options;

#define HP_IMAGE_MAX_SIDE 16384u

#define HP_DECODE_OPTIONS_DEFAULTS \
    {.max_width = HP_IMAGE_MAX_SIDE, .max_height = HP_IMAGE_MAX_SIDE, \
     .max_pixels = (uint64_t)HP_IMAGE_MAX_SIDE * HP_IMAGE_MAX_SIDE}

/* A depth sample at or above this is background, not geometry: Blender writes 1e10 for the sky. */
#define HP_IMAGE_DEPTH_BACKGROUND 1e9f

/* An inclusive pixel rectangle, as OpenEXR's box2i: (min_x, min_y) to (max_x, max_y). */
typedef struct hp_image_window {
    int32_t min_x, min_y, max_x, max_y;
} hp_image_window;

#define HP_IMAGE_NAME_MAX 256  /* an EXR channel name is at most 255 bytes */
#define HP_IMAGE_LIST_MAX 1024 /* channel list text; longer lists end in "..." */

typedef struct hp_image_info {
    hp_image_format format;
    uint32_t width, height;        /* of the output: for EXR the data window, for the others the file */
    hp_image_window data_window;   /* EXR: the pixels stored; RGBE and PFM: (0, 0) to (w - 1, h - 1) */
    hp_image_window display_window; /* EXR: the frame they belong to (may be larger, smaller or offset) */

    uint32_t channel_count;                /* channels in the file (EXR: in the part used) */
    char channel_list[HP_IMAGE_LIST_MAX];  /* their names, comma-separated ("R,G,B" for RGBE and PFM) */
    char layer[HP_IMAGE_NAME_MAX];         /* EXR: the colour layer chosen; "" for plain R, G, B or Y */
    char channel_names[4][HP_IMAGE_NAME_MAX]; /* EXR: the R, G, B, A channels used; "" where absent */
    char depth_channel[HP_IMAGE_NAME_MAX]; /* EXR: the depth channel used; "" when none */
    bool grey;      /* one channel in the file, written to R, G and B */
    bool has_alpha; /* alpha comes from the file; otherwise it is written as 1 */
    bool has_depth; /* hp_image_decode() can fill a depth plane */
    bool half_exact; /* EXR: every colour channel used (and alpha) is half, so RGBA16F holds the frame as
                      * the file has it: half the bytes of RGBA32F to decode, copy and upload */

    /* EXR details, for logs and the client */
    int part;              /* the part decoded (0 unless a named layer lives in a later one) */
    int part_count;
    bool tiled;            /* tiled part (level 0 is decoded: mip and rip levels are ignored) */
    char compression[8];   /* "none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa", "dwab" */
    uint32_t chunk_count;  /* independent blocks of the part (scanline groups or level-0 tiles) */

    /* What the file says its RGB means: OpenEXR's `chromaticities` attribute, Radiance's PRIMARIES= line. Not
     * judged here: pipeline/colorspace.h refuses values that make no RGB space when the frame is converted. */
    bool has_chromaticities;
    hp_chromaticities chromaticities;

    double rgbe_exposure;  /* RGBE: product of the EXPOSURE= lines (1 without); values are as stored,
                            * so radiance in watts/sr/m^2 is value / rgbe_exposure */
    double pfm_scale;      /* PFM: |scale| from the header; values are as stored, never multiplied */

    /* Filled by hp_image_decode() when a depth plane was asked for; 0 otherwise */
    uint64_t depth_background; /* samples >= HP_IMAGE_DEPTH_BACKGROUND (+infinity included) */
    uint64_t depth_nonfinite;  /* NaN or infinite samples */
} hp_image_info;

/* Where decoded pixels go: the caller's frame, width * height pixels of layout. */
typedef struct hp_image_dest {
    void *rgba;
    hp_pixel_layout layout;
    float *depth; /* NULL: depth not wanted */
    uint32_t width, height;
} hp_image_dest;

typedef struct hp_depth_stats {
    uint64_t background, nonfinite;
} hp_depth_stats;

/* opt with every 0 replaced by its default. */
hp_decode_options hp_image_options_resolve(const hp_decode_options *opt);

/* HP_ERR_TOO_LARGE naming the dimension and the limit, or HP_OK. width and height are 64-bit so that a
 * header's raw values are checked before anything narrows them. */
hp_code hp_image_check_limits(const char *what, uint64_t width, uint64_t height, const hp_decode_options *opt,
                              hp_err *err);

/* Writes one pixel of floats into the frame (rounded to nearest even for RGBA16F). */
void hp_image_store_pixel(const hp_image_dest *dest, size_t index, float r, float g, float b, float a);

/* The size of a format without windows (every one but OpenEXR): the data and the display window the whole image. */
void hp_image_info_whole(hp_image_info *info, uint32_t width, uint32_t height);

/* One format: how its first bytes are recognized, its header read and its pixels decoded. Every probe fills
 * info completely (after the dispatcher zeroed it and set the format) or fails; every decode is given the info
 * of a probe of the same bytes with the same options, and adds its depth counts to stats. */
typedef struct hp_image_decoder {
    const char *name;   /* "exr": hp_image_format_name's word */
    const char *magic;  /* the first bytes in words, for the message that names every format we read */
    bool (*sniff)(const uint8_t *bytes, size_t len); /* from the first bytes alone (at most 10 are read) */
    hp_code (*probe)(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                     hp_err *err);
    hp_code (*decode)(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                      const hp_image_dest *dest, hp_depth_stats *stats, hp_err *err);
} hp_image_decoder;

/* EXR frames being decoded in this process now: frames decoding at once share hp_decode_options.threads
 * among them (api/codecs/image_exr.c). For tests. */
uint32_t hp_image_frames_decoding(void);

extern const hp_image_decoder hp_exr_decoder;  /* api/codecs/image_exr.c */
extern const hp_image_decoder hp_rgbe_decoder; /* api/codecs/image_rgbe.c */
extern const hp_image_decoder hp_pfm_decoder;  /* api/codecs/image_pfm.c */

#endif

/* Image decoders: the frame a client POSTs, as bytes in memory, becomes tightly packed RGBA rows that
 * the pipeline reads (and, optionally, a float depth plane for depth of field).
 *
 * Two steps, so a frame can be decoded straight into GPU staging memory with no copy in between:
 *   hp_image_probe()   reads only the header: format, size, channels, limits. Nothing is decoded.
 *   hp_image_decode()  writes the pixels into memory the caller sized from the probe.
 *
 * Formats are told apart by their magic bytes, never by a name or a content type:
 *   OpenEXR        76 2f 31 01           scanline and tiled (level 0); half, float and uint channels;
 *                                        NONE, RLE, ZIPS, ZIP, PIZ, PXR24, B44, B44A, DWAA, DWAB; data
 *                                        window apart from the display window; layers by name; multi-part
 *   Radiance RGBE  "#?RADIANCE", "#?RGBE" FORMAT=32-bit_rle_rgbe, -Y H +X W; new-style RLE, flat and
 *                                        old-style RLE scanlines
 *   PFM            "PF" colour, "Pf" grey either byte order, rows stored bottom to top
 *
 * Values are never altered: negative, NaN and infinite samples pass through (the pipeline decides what
 * they mean), and so does an EXR depth of 1e10 (Blender's sky). Every input is untrusted network data:
 * each length and offset is checked before it is used, and a damaged file is an error, never a crash.
 *
 * Errors: HP_ERR_UNSUPPORTED_FORMAT (magic bytes of no format above), HP_ERR_INVALID_ARGUMENT
 * (malformed or truncated data, an EXR attribute sized past the end of the file: the message says what and
 * where), HP_ERR_TOO_LARGE (over a limit of hp_decode_options, or more pixels than the bytes given can hold
 * in the format's densest coding, a decompression bomb: found from the header alone), HP_ERR_UNUSABLE (a valid file this daemon cannot use:
 * no colour channels, a depth channel of another size, deep data, XYZE colour, a flipped orientation),
 * HP_ERR_OUT_OF_MEMORY. A failure caused by a name in hp_decode_options (a layer or channel the file does
 * not have, or one that cannot serve) sets err->field to the option's name: "layer", "channel_r",
 * "channel_g", "channel_b", "channel_a" or "depth"; every other failure leaves it empty.
 *
 * Threading: every function is reentrant; nothing is shared between calls. */
#ifndef HP_IMAGE_H
#define HP_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "pipeline/colorspace.h"
#include "pipeline/exr_zip_gpu.h"

/* How the decoded colour is laid out: 4 channels per pixel in R, G, B, A order, rows top to bottom,
 * tightly packed (no row padding). The numbering is pipeline/reduce.h's hp_pixel_format, so a value
 * passes from one to the other unchanged (checked at compile time in image.c). */
typedef enum hp_pixel_layout {
    HP_LAYOUT_RGBA16F = 0, /* 4 x IEEE half, 8 bytes per pixel; floats rounded to nearest even */
    HP_LAYOUT_RGBA32F = 1, /* 4 x IEEE float, 16 bytes per pixel */
} hp_pixel_layout;

/* Bytes per pixel: 8 or 16; 0 for a value outside the enum. */
size_t hp_pixel_layout_size(hp_pixel_layout layout);

typedef enum hp_image_format {
    HP_IMAGE_UNKNOWN = 0,
    HP_IMAGE_EXR = 1,
    HP_IMAGE_RGBE = 2, /* Radiance .hdr */
    HP_IMAGE_PFM = 3,
} hp_image_format;

/* "exr", "rgbe", "pfm" or "unknown". */
const char *hp_image_format_name(hp_image_format format);

/* The format from the first bytes alone (at most 10 are read); HP_IMAGE_UNKNOWN when none matches. */
hp_image_format hp_image_detect(const uint8_t *bytes, size_t len);

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

/* The limits of opt (NULL: the defaults) for a frame of this size, as a probe checks them: HP_ERR_TOO_LARGE
 * naming the dimension and the limit, or HP_OK. For frames that come without a header (raw samples). */
hp_code hp_image_check_limits_public(uint32_t width, uint32_t height, const hp_decode_options *opt, hp_err *err);

/* Reads the header of bytes[0, len): fills info, checks the limits of opt (NULL: the defaults) and
 * chooses the channels. Reads no pixel data. */
hp_code hp_image_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                       hp_err *err);

/* Decodes the frame into rgba_dst: width * height * hp_pixel_layout_size(dst_layout) bytes, rows top to
 * bottom, alpha 1 where the file has none, grey copied to R, G and B. depth_dst, when not NULL and
 * info->has_depth, receives width * height floats (left untouched when the file has no depth).
 * info must come from hp_image_probe() with the same bytes and options; the header is read again and
 * must agree, and the depth counts are added. On failure the destination holds partial data. */
hp_code hp_image_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                        void *rgba_dst, hp_pixel_layout dst_layout, float *depth_dst, hp_err *err);

/* EXR frames being decoded in this process now: frames decoding at once share hp_decode_options.threads
 * among them (api/image_exr.c). For tests. */
uint32_t hp_image_frames_decoding(void);

/* EXR ZIP frames inflated on the GPU (pipeline/exr_zip_gpu.h). For a frame whose chunks the GPU can take
 * (scanlines, ZIP or ZIPS, every channel of the part half and unsampled), fills *frame and, with dst, writes
 * the chunk table (frame->table_bytes) at dst and the chunks' bytes as they lie in the file right after it,
 * then HP_EXR_ZIP_PACKED_PAD zero bytes: table_bytes + packed_bytes + HP_EXR_ZIP_PACKED_PAD bytes in all.
 * dst NULL: the sizes only. Each chunk's sizes are checked against the file and its lines, as the CPU's
 * decode checks them; its stream is not looked at (the GPU's status words tell). HP_ERR_UNUSABLE: not such
 * a frame (more than 65535 chunks, or 2 GiB of chunks, included), or dst_size too small: the caller decodes
 * it on the CPU; other codes as hp_image_decode's. The chunks'
 * offsets are the data window's: first_line 0 is the data window's first row. Needs every byte: no
 * arrival. */
/* hp_image_zip_gather's test from the header alone (with opt->arrival it waits only for the header's
 * bytes): HP_OK with the part's planes and chunks, HP_ERR_UNUSABLE (why) when the GPU cannot take it. */
hp_code hp_image_zip_fits(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                          uint32_t *planes, uint32_t *chunks, hp_err *err);

hp_code hp_image_zip_gather(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                            void *dst, size_t dst_size, hp_exr_zip_frame *frame, hp_err *err);

/* The split: a frame hp_image_zip_gather takes, its chunks inflated here (libdeflate, as the CPU's decoder
 * does) and the rest left to the GPU (pipeline/exr_zip_gpu.h's hp_exr_zip_gpu_finish: EXR's predictor, the
 * byte split and the planes, 15% of the decoder's CPU a 4K frame with 16 clients, 30% of one thread's at
 * 8K). Fills *frame and writes at dst the chunk table (frame->table_bytes; each entry's status
 * HP_EXR_ZIP_OK and its stream's Adler-32 in word 7), then every chunk's inflated bytes at its
 * unpacked_offset (frame->unpacked_bytes in all). As the body arrives (opt->arrival), on opt->threads threads
 * shared with the frames decoding as hp_image_decode shares them.
 * HP_ERR_UNUSABLE: not such a frame, or dst_size too small; HP_ERR_INVALID_ARGUMENT: a damaged chunk, in
 * the CPU decoder's words (the caller may still decode it on the CPU for the exact verdict). */
hp_code hp_image_zip_inflate(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                             void *dst, size_t dst_size, hp_exr_zip_frame *frame, hp_err *err);

#endif

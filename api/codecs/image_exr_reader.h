/* The EXR reader's insides, shared by the rooms that read EXR chunks: api/codecs/image_exr.c (the header, the
 * channels, the CPU's decoding) and api/codecs/image_exr_zip.c (ZIP chunks prepared for the GPU). Not for other
 * rooms: api/codecs/image_internal.h is the decoders' common surface, api/codecs/image.h the public one. */
#ifndef HP_IMAGE_EXR_READER_H
#define HP_IMAGE_EXR_READER_H

#include <libdeflate.h>
#include <openexr.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/codecs/image_internal.h"
#include "common/arrival.h"

enum { SLOT_R, SLOT_G, SLOT_B, SLOT_A, SLOT_Z, SLOT_COUNT };

struct hp_exr_reader {
    exr_context_t ctx;
    struct {
        const uint8_t *bytes;
        size_t len;
        hp_arrival *arrival; /* hp_decode_options.arrival: bytes may still be arriving */
    } stream;
    int part;
    int chan[SLOT_COUNT];       /* index in the part's channel list, -1 absent */
    int copy_from[SLOT_COUNT];  /* a colour slot that repeats an earlier one (grey: G and B copy R), or -1 */
    uint16_t type[SLOT_COUNT];  /* exr_pixel_type_t of each slot's channel */
    bool tiled;
    bool dwa_cxx;               /* DWAA/DWAB read through image_exr_dwa.h (the C core lacks them) */
    exr_attr_box2i_t data_window;
    uint32_t width, height;
    int32_t lines_per_chunk;    /* scanline parts */
    uint32_t tile_w, tile_h;    /* tiled parts */
    uint32_t tiles_x, tiles_y;
    uint32_t chunk_count;
    uint32_t chunk_w, chunk_h;  /* the largest chunk, for the scratch */
    exr_compression_t compression;
    bool library_decode;        /* HP_EXR_GENERIC_DECODE: the library's zlib and unpack, then finish_chunk() */
    struct hp_rows_ready *rows; /* hp_decode_options.rows: told as each scanline chunk's rows are final */
    bool direct;                /* convert_chunk() reads the decompressed chunk (see plan_direct_reads) */
    uint32_t pixel_bytes;       /* of every channel of the part together: a decompressed line is width times this */
    uint32_t slot_offset[SLOT_COUNT]; /* bytes of the channels before each slot's, per pixel of a line */
};

/* Where a chunk lands in the frame (relative to the data window) and its size, as image_exr.c computes them
 * from the header; the library's chunk information must agree. */
typedef struct hp_exr_rect {
    uint32_t x, y, w, h;
} hp_exr_rect;

hp_exr_rect hp_exr_rect_of_chunk(const hp_exr_reader *r, uint32_t index);

/* The library's last message on this thread (its error callback writes it), HP_EXR_MESSAGE_SIZE bytes:
 * a decoder that refuses a chunk for a reason of its own writes it there before hp_exr_chunk_fail. */
#define HP_EXR_MESSAGE_SIZE 256
char *hp_exr_last_message(void);

/* HP_ERR_INVALID_ARGUMENT (or what rv maps to) naming the chunk, its scanlines or tile, the step ("reading",
 * "preparing", "decoding") and the last message. */
hp_code hp_exr_chunk_fail(const hp_exr_reader *r, uint32_t index, hp_exr_rect c, exr_result_t rv, const char *step,
                          hp_err *err);

const char *hp_exr_compression_name(exr_compression_t c);
/* Why libdeflate refused a stream, in the CPU decoder's words. */
const char *hp_exr_libdeflate_text(enum libdeflate_result res);

/* --- One frame's chunks over threads ---------------------------------------------------------------- */

typedef struct hp_exr_chunk_worker hp_exr_chunk_worker;
struct hp_exr_chunk_worker {
    hp_exr_reader *reader;
    _Atomic uint32_t *next;
    /* Takes chunks from next until none is left: image_exr.c's decode_all, or image_exr_zip.c's inflate_all. */
    hp_code (*work)(hp_exr_chunk_worker *w);
    const hp_image_dest *dest;            /* decode_all's */
    const struct hp_exr_zip_split *split; /* inflate_all's */
    hp_depth_stats stats;
    uint32_t failed_at;
    hp_err err;
    hp_code code;
};

/* The threads a frame takes (its ask divided by the frames decoding), and it counted among the frames
 * decoding (hp_image_frames_decoding) until hp_exr_frame_done. */
uint32_t hp_exr_frame_threads(const hp_exr_reader *r, const hp_decode_options *opt);
void hp_exr_frame_done(void);
/* proto's work on `threads` threads (this one among them); the first failing chunk's error in the file. */
hp_code hp_exr_decode_threaded(hp_exr_reader *r, uint32_t threads, const hp_exr_chunk_worker *proto,
                               hp_depth_stats *stats, hp_err *err);

#endif

/* PNG filtering and deflate on the GPU (issue 20): the tone pass's RGBA8 or RGBA16 image, already on the
 * GPU, becomes PNG's filtered scanlines and a deflate stream cut into segments, so that only compressed
 * bytes need come back to the CPU.
 *
 * Three dispatches, recorded into a command buffer the caller owns (hp_png_gpu_record):
 *   png_filter_choose  one workgroup per row: the filter type of each row, by libpng's heuristic (the
 *                      smallest sum of the filtered bytes' magnitudes, taken as signed; the first type of
 *                      equal sums), as api/codecs/encode.c chooses;
 *   png_filter_apply   one workgroup per row: the filtered scanlines (type byte, then the row in PNG's
 *                      layout: alpha kept or not, 16-bit samples big-endian);
 *   png_deflate        one workgroup per segment of `segment_bytes` filtered bytes: LZ77 (greedy, matches
 *                      within the invocation's chunk, references up to 32 KiB back, across segments too)
 *                      and one block of whichever is smallest: Huffman codes of the segment's own counts,
 *                      the fixed codes, or stored; every segment but
 *                      the last ends with a sync flush, so they join into one stream. Its table gives each
 *                      segment's byte count and the Adler-32 of its filtered bytes;
 *   png_offsets        one workgroup: each segment's offset in the joined stream (a scan of the counts);
 *   png_compact        one workgroup per segment: the segments end to end in `joined`.
 * shaders/png_filter.comp and shaders/png_deflate.comp say how and why.
 *
 * The host joins the segments into one zlib stream (hp_png_gpu_join: RFC 1950 header, the segments in
 * order, the Adler-32 combined with zlib's adler32_combine). No PNG chunks are written here. */
#ifndef HP_PNG_GPU_H
#define HP_PNG_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/gpu.h"

/* Launch shape, fixed when the pipelines are created (specialization constants). */
typedef struct hp_png_gpu_config {
    uint32_t workgroup_size; /* invocations per workgroup of every pass, a power of two in [32, 1024]; default 1024 */
    uint32_t chunk_bytes;    /* filtered bytes each deflate invocation parses, [16, 1024]; default 32. A segment
                              * is workgroup_size x chunk_bytes bytes, at most 65535 - 5 - 3 (one stored block) */
    /* Two parts of png_deflate.comp, for bench_png_gpu's side-by-side runs (the shader says what each
     * costs and gives): the hash table's candidate, on unless no_hash_probe; the matches priced by a first
     * code and a second Huffman build, off unless reprice. */
    bool no_hash_probe, reprice;
} hp_png_gpu_config;

/* 1024 invocations of 32 bytes: a 4K frame's deflate in 1.3-1.5 ms on an H200 where 256 of 128 took 2.6-3.0, for
 * 0.01-0.12% more bytes (shorter chunks, shorter matches: docs/BENCHMARKS.md, "The PNG encoder's launch shape").
 * With config NULL, a device with fewer invocations or less shared memory a workgroup gets half the invocations
 * of twice the bytes, until they fit (the same 32 KiB segments). */
#define HP_PNG_GPU_CONFIG_DEFAULTS {.workgroup_size = 1024, .chunk_bytes = 32}

/* Per-segment entry of the table (4 words, host byte order). */
typedef struct hp_png_gpu_segment {
    uint32_t bytes;   /* deflate bytes written at the start of the segment's slot */
    uint32_t adler;   /* Adler-32 of the segment's filtered bytes alone */
    uint32_t btype;   /* the block's BTYPE (RFC 1951 3.2.3): 0 stored, 1 fixed Huffman, 2 dynamic Huffman */
    uint32_t offset;  /* where its bytes start in the joined stream (the sum of the bytes before) */
} hp_png_gpu_segment;

/* What an image of a size needs; every size in bytes. */
typedef struct hp_png_gpu_layout {
    uint32_t width, height;    /* pixels, 1..16384 */
    uint32_t channels;         /* samples kept: 3 (RGB) or 4 (RGBA) */
    uint32_t depth;            /* bits per sample: 8 or 16 */
    uint32_t row_bytes;        /* PNG row without its filter byte */
    uint32_t stride;           /* 1 + row_bytes */
    uint32_t bpp;              /* bytes per pixel in PNG's layout */
    uint64_t filtered_bytes;   /* height x stride */
    uint32_t segment_bytes;    /* workgroup_size x chunk_bytes */
    uint32_t segments;         /* deflate workgroups */
    uint32_t slot_bytes;       /* room per segment: segment_bytes + 5 (one stored block), rounded to 4 */
    VkDeviceSize image_size;   /* the tone pass's output: width x height x 4 (RGBA8) or 8 (RGBA16) */
    VkDeviceSize filtered_size, types_size, slots_size, table_size, tokens_size, joined_size;
} hp_png_gpu_layout;

typedef struct hp_png_gpu hp_png_gpu;

/* The defaults fitted to a device (above): as many invocations as it takes, up to the default's 1024, each
 * parsing a longer chunk where there are fewer; 32 invocations when nothing fits (hp_png_gpu_create then says
 * what is missing). */
void hp_png_gpu_fitted_config(const hp_gpu_info *gi, hp_png_gpu_config *out);

/* config NULL: hp_png_gpu_fitted_config's. */
hp_code hp_png_gpu_create(hp_gpu *gpu, const hp_png_gpu_config *config, hp_png_gpu **out, hp_err *err);
void hp_png_gpu_destroy(hp_png_gpu **png);
const hp_png_gpu_config *hp_png_gpu_get_config(const hp_png_gpu *png);

/* The driver's statistics of the deflate pass's pipeline as "name=value, ..." (registers, shared memory, ...;
 * empty without hp_gpu_config.capture_statistics): for bench/bench_png_gpu.c. */
void hp_png_gpu_deflate_statistics(const hp_png_gpu *png, char *buf, size_t len);

/* The buffers an image needs. HP_ERR_INVALID_ARGUMENT for a size, channel count or depth outside the
 * ranges above; HP_ERR_TOO_LARGE when the segments would pass 65535 workgroups. */
hp_code hp_png_gpu_layout_for(const hp_png_gpu *png, uint32_t width, uint32_t height, uint32_t channels,
                              uint32_t depth, hp_png_gpu_layout *out, hp_err *err);

typedef struct hp_png_gpu_io {
    VkDeviceAddress image;     /* the tone pass's RGBA8 / RGBA16 output (host order), image_size bytes */
    const hp_buffer *filtered; /* device, filtered_size: the filtered scanlines (also the deflate's input) */
    const hp_buffer *types;    /* device, types_size: each row's filter type, one word per row */
    const hp_buffer *slots;    /* device, slots_size: segment s's deflate bytes at s x slot_bytes */
    const hp_buffer *table;    /* device, table_size: hp_png_gpu_segment per segment */
    const hp_buffer *tokens;   /* device, tokens_size: the parse's scratch */
    const hp_buffer *joined;   /* device, joined_size: the segments end to end, the raw deflate stream */
    /* output.alpha auto: tone_state's address (shaders/include/hp_shared.h), 0 for none. The layout is
     * then the 4-channel image's, and the passes keep 3 channels unless the tone pass, earlier in the same
     * command buffer, set tone_state's translucent word: the host reads the word back and joins with
     * hp_png_gpu_layout_for(..., 3, ...)'s layout where it is 0 (the table, buffers and room of the
     * 4-channel layout hold the 3-channel image's). */
    VkDeviceAddress alpha_auto;
    /* Optional: HP_PNG_GPU_TIMESTAMPS timestamps written from first_query on (before the first pass, then
     * after each); the caller resets them. VK_NULL_HANDLE: none. */
    VkQueryPool timestamps;
    uint32_t first_query;
} hp_png_gpu_io;

/* The passes, in order, for timestamps: choose, apply, deflate, offsets, compact. */
#define HP_PNG_GPU_PASSES 5
#define HP_PNG_GPU_TIMESTAMPS (HP_PNG_GPU_PASSES + 1)

/* Records the passes (filter choice, filtering, deflate, offsets, compaction), with the barriers between
 * them. The caller records the barrier that makes the image visible before, and the one for whatever reads
 * filtered, table and joined after. What must come back to the host: the table, then the first
 * hp_png_gpu_joined_bytes() bytes of joined. */
void hp_png_gpu_record(hp_png_gpu *png, VkCommandBuffer cmd, const hp_png_gpu_layout *layout,
                       const hp_png_gpu_io *io);

/* The most bytes hp_png_gpu_join() writes. */
size_t hp_png_gpu_zlib_bound(const hp_png_gpu_layout *layout);

/* The bytes of the joined deflate stream, from the table as copied back. */
uint64_t hp_png_gpu_joined_bytes(const hp_png_gpu_layout *layout, const void *table);

/* Room the caller leaves around joined in host memory so that the PNG file can be finished where the GPU
 * wrote the stream, without copying it (hp_png_gpu_seal, then api/codecs/encode.h's hp_encode_png_in_place): the
 * zlib header and the chunks before IDAT go in front, the Adler-32, IDAT's CRC and IEND after. 4 KiB holds
 * every head hdrpostd writes (signature, IHDR, cHRM, gAMA, sRGB or an iCCP of a few hundred bytes, tEXt);
 * a multiple of 256 keeps joined's offset aligned for the shader's words. */
#define HP_PNG_GPU_HEAD_ROOM 4096u
#define HP_PNG_GPU_TAIL_ROOM 64u

/* Where the table and joined lie in one host buffer of host_bytes: the table at 0, joined at joined_offset
 * (after the table, aligned to 256, every device's minStorageBufferOffsetAlignment at most, and the head
 * room), then joined_size and the tail room. */
typedef struct hp_png_gpu_host_layout {
    VkDeviceSize joined_offset, host_bytes;
} hp_png_gpu_host_layout;
hp_png_gpu_host_layout hp_png_gpu_host_layout_for(const hp_png_gpu_layout *layout);

/* The zlib stream made where the GPU wrote it: the RFC 1950 header into the 2 bytes before joined, the
 * Adler-32 (combined as hp_png_gpu_join does) into the 4 after its last byte. joined must have
 * HP_PNG_GPU_HEAD_ROOM before it and hp_png_gpu_joined_bytes() + HP_PNG_GPU_TAIL_ROOM bytes of room; the
 * stream is then *zlib_len bytes from joined - 2. HP_ERR_INTERNAL for an impossible table, as below. */
hp_code hp_png_gpu_seal(const hp_png_gpu_layout *layout, const void *table, uint8_t *joined, size_t *zlib_len,
                        hp_err *err);

/* The zlib stream (RFC 1950) from the joined segments and the table as copied back: header 78 01, the
 * deflate bytes, the big-endian Adler-32 of all filtered bytes, combined from the segments' with zlib's
 * adler32_combine. HP_ERR_INTERNAL when the table is impossible (a segment larger than its slot, offsets
 * that are not the running sum); HP_ERR_INVALID_ARGUMENT when dst is too small. */
hp_code hp_png_gpu_join(const hp_png_gpu_layout *layout, const void *joined, const void *table, uint8_t *dst,
                        size_t capacity, size_t *out_len, hp_err *err);

/* The CPU reference of the filter passes: the same scanlines from the same image (layout's size, channels
 * and depth; image in the tone pass's RGBA8 / RGBA16 host order), filter types chosen by the same rule. */
void hp_png_cpu_filter(const hp_png_gpu_layout *layout, const void *image, uint8_t *filtered);

#endif

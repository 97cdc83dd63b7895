/* EXR's ZIP and ZIPS chunks decoded on the GPU (issue 20): with PNG encoded on the GPU, inflating the
 * frame's chunks on the CPU (libdeflate, three quarters of the decoder's time) was what bounded a node's
 * frames per second. The chunks go to the GPU as they lie in the file, and come out as the pipeline's
 * input image (RGBA16F, or RGBA32F where a colour channel is float).
 *
 * The passes, recorded into a command buffer the caller owns (hp_exr_zip_gpu_record):
 *   exr_inflate  one invocation per chunk inflates the zlib stream into the unpacked buffer and writes the
 *                chunk's status word (HP_EXR_ZIP_OK or why not); in slices on lavapipe;
 *   exr_finish   after it (its last slice), past a barrier: one workgroup per chunk checks the Adler-32,
 *                undoes EXR's byte predictor and byte split and gathers the planes into the image; and
 *                alone for the split (hp_exr_zip_gpu_finish), over chunks the CPU inflated.
 * The wide inflate (hp_exr_zip_gpu_set_wide) finishes its own chunks in the same workgroup.
 * shaders/exr_zip.comp says how and why.
 *
 * What the frame must be: scanlines, ZIP or ZIPS, every channel of the part unsampled (a line of a chunk is then
 * each channel's `width` values in the part's order: half, float or uint, any number of them), R, G, B and A
 * half or float; api/codecs/image.h's hp_image_zip_gather checks that and fills the packed bytes and the chunk
 * table. The image is RGBA16F with the file's half bits where every one of R, G, B and A is half, else RGBA32F
 * (halves widened exactly), as the CPU's decoder writes the frame (hp_image_info.half_exact). A chunk that fails leaves its part of the image undefined: the caller
 * reads the statuses back (hp_exr_zip_gpu_check) and refuses the frame. */
#ifndef HP_EXR_ZIP_GPU_H
#define HP_EXR_ZIP_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/gpu.h"

/* One chunk of the table (HP_EXR_ZIP_CHUNK_WORDS words, hp_shared.h says each). */
typedef struct hp_exr_zip_chunk {
    uint32_t packed_offset, packed_size;
    uint32_t unpacked_offset, unpacked_size;
    uint32_t first_line, lines;
    uint32_t status;
    uint32_t unused;
    uint32_t resume[8]; /* the inflate pass's own: zeros from the host */
} hp_exr_zip_chunk;

/* What a slot (R, G, B, A) reads: hp_exr_zip_frame.slot_type. */
enum { HP_EXR_ZIP_ABSENT, HP_EXR_ZIP_HALF, HP_EXR_ZIP_FLOAT };

typedef struct hp_exr_zip_frame {
    uint32_t width, height;   /* pixels, 1..16384 */
    uint32_t planes;          /* the part's channels, 1..254: a line is a plane of each, width values */
    uint32_t pixel_bytes;     /* a pixel's bytes of every channel together (2 a half, 4 a float or uint) */
    uint32_t lines_per_chunk; /* 16 (ZIP) or 1 (ZIPS) */
    uint32_t chunk_count;     /* ceil(height / lines_per_chunk) */
    uint16_t slot_offset[4];  /* R, G, B and A: a pixel's bytes of the channels before theirs (grey: one for all) */
    uint8_t slot_type[4];     /* R, G, B and A: HP_EXR_ZIP_HALF or _FLOAT; A may be ABSENT (1.0) */
    bool float_image;         /* the image is RGBA32F (a slot is float), else RGBA16F */
    uint64_t table_bytes;     /* chunk_count x sizeof(hp_exr_zip_chunk) */
    uint64_t packed_bytes;    /* the chunks' bytes together; the packed buffer holds 16 more (padding) */
    uint64_t unpacked_bytes;  /* the unpacked buffer: every chunk's bytes, each rounded up to 4 */
    uint32_t max_chunk_bytes; /* the largest chunk's unpacked_size: how many slices it may take */
    int32_t first_row;        /* the data window's first row in the file: chunks' scanlines in messages */
} hp_exr_zip_frame;

/* A frame of halves only, for tests and benchmarks: `planes` channels, R, G, B and A in planes plane_of[0..3]
 * (A 0xff: none). Sets planes, pixel_bytes, the slots and float_image. */
#define HP_EXR_ZIP_NO_PLANE 0xffu
void hp_exr_zip_frame_halves(hp_exr_zip_frame *f, uint32_t planes, const uint8_t plane_of[4]);

/* The image's bytes: 8 a pixel (RGBA16F) or 16 (RGBA32F, float_image). */
uint64_t hp_exr_zip_image_bytes(const hp_exr_zip_frame *f);

/* The padding hp_exr_zip_gpu_record's packed buffer needs after the last chunk's bytes. */
#define HP_EXR_ZIP_PACKED_PAD 16u

typedef struct hp_exr_zip_gpu hp_exr_zip_gpu;

/* slice: loop iterations one inflate dispatch may take per chunk, 0 for the device's own choice: none,
 * except on lavapipe, which ends an invocation after 65535 (shaders/exr_zip.comp says why): 10000 there,
 * and as many dispatches recorded as the largest chunk can need. Without slices (HP_EXR_ZIP_NO_SLICE) it
 * is one dispatch. Either way the finish (the Adler-32, the predictor, the pixels) is a pass of its own
 * after a barrier, every frame's of a batch after every frame's inflate. Tests set slices to run them anywhere,
 * and no slices on lavapipe for chunks small enough; there the shader's work bound stays under lavapipe's
 * loop limit (so that a stream made to be slow stops as a status, not at the limiter), unless
 * HP_EXR_ZIP_AS_A_GPU: no slices and the bound a GPU has, for tests of the shader as a GPU runs it on
 * chunks known to stay under the limit. */
#define HP_EXR_ZIP_NO_SLICE UINT32_MAX
#define HP_EXR_ZIP_AS_A_GPU (UINT32_MAX - 1u)
hp_code hp_exr_zip_gpu_create(hp_gpu *gpu, uint32_t slice, hp_exr_zip_gpu **out, hp_err *err);

/* The wide inflate (shaders/exr_inflate_wide.comp): each chunk's stream decoded by a workgroup of 288 at once
 * (the starts of a lane's span mapped to where it leaves it, the maps followed, matches resolved by pointer
 * jumping) instead of one invocation's serial loop; 2.6 times faster on a 4K frame (docs/BENCHMARKS.md).
 * The daemon's whole inflate on a GPU. It keeps its pointers in the image's memory of each chunk's rows,
 * so every chunk of the table must have rows of its own, as hp_image_zip_gather writes them. Off when
 * created; false where the device lacks storageBuffer8BitAccess or shaderInt8, a workgroup that large or its
 * shared memory, or the pipeline cannot be made (it stays off). */
bool hp_exr_zip_gpu_set_wide(hp_exr_zip_gpu *zip, bool on);
/* The wide inflate's lanes a chunk and the shared memory they take, as the daemon makes it (for its log). */
uint32_t hp_exr_zip_gpu_wide_lanes(void);
uint32_t hp_exr_zip_gpu_wide_shared_bytes(void);
/* For benchmarks and tests, with the wide inflate on: the bits a lane decodes in a window (a multiple of 4, 64
 * to 4096), the starts of its span it maps (a multiple of 4, 4 to 48) and its lanes a chunk (a multiple of 32,
 * 32 to 1024), each 0 for the daemon's own, its pipeline made again; false, the pipeline as it was, where the
 * wide inflate is off or the device cannot run it so (its workgroup or shared memory). */
bool hp_exr_zip_gpu_wide_tune(hp_exr_zip_gpu *zip, uint32_t span, uint32_t entries, uint32_t group);
/* For benchmarks: the wide inflate's phases timed by its first lane's subgroup clock, the cycles of each in
 * the chunk table's words 8-15 (exr_inflate_wide.comp's PH_*) in place of its counts. Needs
 * hp_gpu_info.has_shader_clock; false without it. */
bool hp_exr_zip_gpu_wide_phases(hp_exr_zip_gpu *zip, bool on);
/* For benchmarks: the driver's statistics of the inflate's pipeline in use, the wide one or the serial loop's
 * (hp_compute_statistics: registers, local memory where it spills, shared memory); empty where the driver
 * keeps none. */
void hp_exr_zip_gpu_inflate_statistics(hp_exr_zip_gpu *zip, char *buf, size_t len);

/* The inflate dispatches recorded for this frame: 1 without slices, or wide. */
bool hp_exr_zip_gpu_sliced(const hp_exr_zip_gpu *zip);
uint32_t hp_exr_zip_gpu_dispatches(const hp_exr_zip_gpu *zip, const hp_exr_zip_frame *frame);
void hp_exr_zip_gpu_destroy(hp_exr_zip_gpu **zip);

typedef struct hp_exr_zip_io {
    VkDeviceAddress packed;   /* packed_bytes + HP_EXR_ZIP_PACKED_PAD */
    VkDeviceAddress chunks;   /* chunk_count entries; the passes write their status words */
    VkDeviceAddress unpacked; /* unpacked_bytes, scratch */
    VkDeviceAddress image;    /* width x height RGBA16F or RGBA32F, what the pipeline's first stage reads */
    VkDeviceAddress tables;   /* hp_exr_zip_gpu_tables_bytes, scratch: the serial inflate's code tables, 64-byte
                               * aligned (unused by the wide inflate and the split) */
    /* Optional: HP_EXR_ZIP_GPU_TIMESTAMPS timestamps written from first_query on (before the first pass,
     * then after each); the caller resets them. VK_NULL_HANDLE: none. */
    VkQueryPool timestamps;
    uint32_t first_query;
} hp_exr_zip_io;

#define HP_EXR_ZIP_GPU_PASSES 2 /* inflate (all its dispatches), finish (none after the wide inflate) */
#define HP_EXR_ZIP_GPU_TIMESTAMPS (HP_EXR_ZIP_GPU_PASSES + 1)

/* Records the two passes with the barrier between them. The caller records the barrier that makes the
 * packed bytes and the table visible before, and the one for whatever reads the image and the statuses
 * after. io->tables is required unless the wide inflate is on. */
void hp_exr_zip_gpu_record(hp_exr_zip_gpu *zip, VkCommandBuffer cmd, const hp_exr_zip_frame *frame,
                           const hp_exr_zip_io *io);

/* The words of a status, for a message: "it is not a valid zlib stream", ... */
const char *hp_exr_zip_status_text(uint32_t status);

/* After the passes, with the table read back: HP_OK, or HP_ERR_INVALID_ARGUMENT naming the first chunk
 * that failed, its scanlines (from first_line_in_file, the data window's first row) and why, as the CPU's
 * decoder words it. */
hp_code hp_exr_zip_gpu_check(const hp_exr_zip_frame *frame, const hp_exr_zip_chunk *chunks, int32_t first_line_in_file,
                             hp_err *err);

/* The device memory a frame's run writes: the image (hp_exr_zip_image_bytes) first, then the unpacked
 * chunks, then the serial inflate's tables (hp_exr_zip_gpu_tables_bytes). The split's finish writes the
 * first two alone (hp_exr_zip_gpu_split_output_bytes). */
VkDeviceSize hp_exr_zip_gpu_output_bytes(const hp_exr_zip_frame *frame);
VkDeviceSize hp_exr_zip_gpu_split_output_bytes(const hp_exr_zip_frame *frame);
/* The serial inflate's scratch of a frame: a chunk's code tables (hp_shared.h's HP_EXR_ZIP_TABLE_WORDS), 2%
 * of its unpacked bytes for 16-line ZIP chunks of half RGBA, about a third for ZIPS's one-line ones. */
VkDeviceSize hp_exr_zip_gpu_tables_bytes(const hp_exr_zip_frame *frame);

/* A frame's passes on a decode queue (pipeline/gpu.h's hp_gpu_decode_submit_wait), waited for: what a
 * decoding thread calls, several at once. Frames that arrive while the batches are on the GPU wait and go on
 * together in the next, one submission (exr_zip_gpu.c's batches; as many at once as
 * hp_exr_zip_gpu_batches_in_flight says, one unless set): by the wide inflate while a batch holds at most
 * hp_exr_zip_gpu_batch_tune's chunks, else by the serial loop. input: host
 * memory shaders can read (HP_MEM_READBACK_SHADER), laid out as api/codecs/image.h's hp_image_zip_gather
 * writes it; the passes read it where it lies and write their status words into its table. output: device
 * memory of hp_exr_zip_gpu_output_bytes, the image at its start. Returns hp_exr_zip_gpu_check's verdict (the
 * first damaged chunk named), or the Vulkan failure; *gpu_ms (may be NULL): the frame's share of its batch's
 * time on the GPU. HP_ERR_UNUSABLE: the frame's chunks are too large for this device's finishing pass (over 1 MiB
 * on lavapipe without the wide inflate). A chunk that would take far more work than a deflate encoder's stream needs
 * (include/exr_inflate.glsl's MAX_WORK) stops as HP_EXR_ZIP_UNFINISHED. HP_ERR_DEVICE_LOST (also after 600 s
 * a frame of its batch): the passes may still write input and output; the caller abandons both. The set_wide,
 * wide_tune and wide_phases calls above make pipelines or change which runs: not while runs are
 * in flight. */
hp_code hp_exr_zip_gpu_run(hp_exr_zip_gpu *zip, const hp_exr_zip_frame *frame, const hp_buffer *input,
                           const hp_buffer *output, double *gpu_ms, hp_err *err);
/* The chunks of a batch past which it takes the serial loop rather than the wide inflate: the device's default
 * (two chunks an SM where the SMs are known: a lone 4K frame), the daemon's exr_zip_wide_chunks, and for
 * benchmarks and tests 0 (always the serial loop) or UINT32_MAX (the wide inflate whenever it is on). */
uint32_t hp_exr_zip_gpu_wide_batch_chunks(const hp_gpu *gpu);
void hp_exr_zip_gpu_batch_tune(hp_exr_zip_gpu *zip, uint32_t wide_chunks);
/* At most n batches on the GPU at once (n at least 1, at most hp_gpu_decode_queue_count: each batch is
 * submitted to the least busy decode queue, and those on different queues run side by side): a frame that
 * arrives while fewer run goes at once, in a batch of its own, rather than waiting for the batch on the GPU
 * to end. Returns the count now in force. */
uint32_t hp_exr_zip_gpu_batches_in_flight(hp_exr_zip_gpu *zip, uint32_t n);
/* The batches run so far and the frames in them (hp_exr_zip_gpu_run_together's too). */
void hp_exr_zip_gpu_batch_counts(hp_exr_zip_gpu *zip, unsigned long *batches, unsigned long *frames);
/* The batches since start, for /metrics: by the inflate that took them, [0] the serial loop and [1] the wide
 * inflate (a batch's frames, its GPU time), how many began while another was on the GPU, and a histogram of
 * their frames: sizes[i] the batches of more than hp_exr_zip_batch_bounds[i - 1] frames and at most
 * hp_exr_zip_batch_bounds[i], sizes[HP_EXR_ZIP_BATCH_BOUNDS] those past the last. */
#define HP_EXR_ZIP_BATCH_BOUNDS 8
extern const uint32_t hp_exr_zip_batch_bounds[HP_EXR_ZIP_BATCH_BOUNDS];
typedef struct hp_exr_zip_batch_stats {
    uint64_t batches[2], frames[2];
    double gpu_seconds[2];
    uint64_t beside;
    uint64_t sizes[HP_EXR_ZIP_BATCH_BOUNDS + 1];
} hp_exr_zip_batch_stats;
void hp_exr_zip_gpu_batch_stats(hp_exr_zip_gpu *zip, hp_exr_zip_batch_stats *out);
/* For benchmarks and tests: n frames in one batch, as hp_exr_zip_gpu_run's waiting frames go; the first
 * frame's failure in their order, and *gpu_ms the batch's time on the GPU. */
hp_code hp_exr_zip_gpu_run_together(hp_exr_zip_gpu *zip, uint32_t n, const hp_exr_zip_frame *frames,
                                    const hp_buffer *inputs, const hp_buffer *outputs, double *gpu_ms, hp_err *err);

/* The split: the CPU inflated the frame's chunks (api/codecs/image.h's hp_image_zip_inflate) into input, host
 * memory shaders can read (HP_MEM_READBACK_SHADER): the table, then frame->unpacked_bytes of inflated
 * chunks. On the decode queue, waited for: those bytes copied past the image in output (device memory of
 * hp_exr_zip_gpu_split_output_bytes), then the finishing pass (exr_finish) writes the image. Returns as
 * hp_exr_zip_gpu_run does; *gpu_ms the copy and the pass. HP_ERR_UNUSABLE: chunks over 1 MiB on lavapipe. */
hp_code hp_exr_zip_gpu_finish(hp_exr_zip_gpu *zip, const hp_exr_zip_frame *frame, const hp_buffer *input,
                              const hp_buffer *output, double *gpu_ms, hp_err *err);

/* Copies bytes of host memory into output on the decode queue and waits: a frame decoded on the CPU after
 * the GPU did not finish it, into the device block the frame graph reads. */
hp_code hp_exr_zip_gpu_upload(hp_exr_zip_gpu *zip, const hp_buffer *host, const hp_buffer *output, size_t bytes,
                              hp_err *err);

#endif

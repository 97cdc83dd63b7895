/* EXR's ZIP chunks decoded on the GPU (exr_zip_gpu.h): pipelines, recording, the statuses read back. */
#include "pipeline/exr_zip_gpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/group_commit.h"
#include "hp_shared.h"

static const uint32_t spv_inflate[] =
#include "exr_inflate.spv.inc"
    ;
static const uint32_t spv_finish[] =
#include "exr_finish.spv.inc"
    ;
static const uint32_t spv_wide[] =
#include "exr_inflate_wide.spv.inc"
    ;
/* The same with its phases timed by the subgroup clock (benchmarks only: hp_exr_zip_gpu_wide_phases). */
static const uint32_t spv_wide_phases[] =
#include "exr_inflate_wide_phases.spv.inc"
    ;

/* Push constants; the layout table in shaders/include/exr_zip_io.glsl. */
struct exr_zip_push {
    VkDeviceAddress packed, chunks, unpacked, image;
    uint32_t chunk_count, width, height, pixel_bytes, lines_per_chunk, float_image;
    uint32_t slot[4]; /* a slot's offset | its type << 16 */
    VkDeviceAddress tables;
};
_Static_assert(offsetof(struct exr_zip_push, chunk_count) == 32 && offsetof(struct exr_zip_push, float_image) == 52 &&
               offsetof(struct exr_zip_push, slot) == 56 && offsetof(struct exr_zip_push, tables) == 72 &&
               sizeof(struct exr_zip_push) == 80,
               "push constant layout drifted from exr_zip_io.glsl");
_Static_assert(sizeof(hp_exr_zip_chunk) == HP_EXR_ZIP_CHUNK_WORDS * 4, "chunk entry drifted from hp_shared.h");

#define MAX_DISPATCH 65535u /* maxComputeWorkGroupCount every device gives */

/* shaders/exr_zip.comp's HEADER_COST. Lavapipe's slice: the shader's count of its iterations is not the
 * limiter's, which counted some 3 to 4 times more (tests/test_exr_zip_gpu.c, a Huffman-only stream: with
 * the ring of words 25000 of ours broke a chunk off, 15000 did not; without the ring, 50000 and 30000);
 * 10000 it is, at the cost of more slices. */
#define HEADER_COST 5000u
#define LAVAPIPE_SLICE 10000u
#define MAX_SLICE 50000u

/* The wide inflate's most work a lane on lavapipe, every loop's iterations counted (its limit ends an
 * invocation at 65535 of its own count, which ran 3-4 times the serial shader's; a damaged stream past
 * 10000 of ours was cut short there, exr_inflate_wide.comp's verdict word then left unfinished). */
#define LAVAPIPE_WIDE_WORK 8000u
/* exr_inflate_wide's lanes a chunk (its workgroup) and SPAN, the bits a lane decodes in a window: 288 x 456
 * (a window of some 131,000 bits, as 256 x 512's) was 2-5% faster a frame alone than 256 x 512 on three
 * frames of real texture on the H200, and no slower with 8 at once; 512 lanes fill an SM (docs/BENCHMARKS.md,
 * "The wide inflate's lanes a chunk"). */
#define WIDE_GROUP 288u
#define WIDE_SPAN 456u
#define WIDE_ENTRIES 16u /* exr_inflate_wide.comp's ENTRIES: the starts a lane maps (docs/BENCHMARKS.md: 16 measured best) */

struct hp_exr_zip_gpu {
    hp_gpu *gpu;
    uint32_t slice; /* 0: none, one dispatch */
    uint32_t max_work; /* the serial loop's MAX_WORK without slices (exr_inflate.glsl) */
    bool lavapipe;
    bool wide;          /* hp_exr_zip_gpu_set_wide */
    uint32_t wide_span, wide_entries, wide_group; /* its pipeline's SPAN, ENTRIES, lanes; 0: WIDE_* */
    bool wide_phases;   /* its pipeline the phases-timed variant (hp_exr_zip_gpu_wide_phases) */
    hp_compute inflate, finish, inflate_wide;
    hp_group_commit batches;    /* runs taken together (hp_exr_zip_gpu_run, below) */
    _Atomic uint32_t wide_chunks; /* a batch of more chunks takes the serial loop */
    pthread_mutex_t stats_lock;
    hp_exr_zip_batch_stats stats; /* under stats_lock */
};

const uint32_t hp_exr_zip_batch_bounds[HP_EXR_ZIP_BATCH_BOUNDS] = {1, 2, 3, 4, 6, 8, 12, 16};

hp_code hp_exr_zip_gpu_create(hp_gpu *gpu, uint32_t slice, hp_exr_zip_gpu **out, hp_err *err)
{
    *out = NULL;
    bool as_a_gpu = slice == HP_EXR_ZIP_AS_A_GPU;
    if (as_a_gpu)
        slice = HP_EXR_ZIP_NO_SLICE;
    if (slice != 0 && slice != HP_EXR_ZIP_NO_SLICE && (slice < 2 * HEADER_COST || slice > MAX_SLICE))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "exr_zip_gpu slice %u is outside [%u, %u]", slice, 2 * HEADER_COST,
                       MAX_SLICE);
    hp_exr_zip_gpu *z = calloc(1, sizeof(*z));
    if (!z)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    z->gpu = gpu;
    hp_group_commit_init(&z->batches);
    pthread_mutex_init(&z->stats_lock, NULL);
    z->wide_chunks = hp_exr_zip_gpu_wide_batch_chunks(gpu);
    if (slice == 0)
        slice = strcmp(hp_gpu_get_info(gpu)->driver_name, "llvmpipe") == 0 ? LAVAPIPE_SLICE : HP_EXR_ZIP_NO_SLICE;
    /* slices of at least HEADER_COST of work besides a block's codes, and under lavapipe's limit */
    z->slice = slice == HP_EXR_ZIP_NO_SLICE ? 0 : slice;
    /* without slices, a chunk's most work (include/exr_inflate.glsl's MAX_WORK): the shader's own bound, but under
     * lavapipe's loop limit when the tests ask it for no slices */
    bool lavapipe = z->lavapipe = strcmp(hp_gpu_get_info(gpu)->driver_name, "llvmpipe") == 0;
    z->max_work = z->slice == 0 && lavapipe && !as_a_gpu ? LAVAPIPE_SLICE : 0;
    /* exr_zip.comp's SLICE (constant 0) and MAX_WORK (3; 1 and 2 are not in that module) */
    const uint32_t spec[4] = {z->slice, 0, 0, z->max_work};
    hp_compute_desc inflate = {.name = "exr_inflate", .spirv = spv_inflate, .spirv_size = sizeof(spv_inflate),
                               .push_constant_size = sizeof(struct exr_zip_push), .spec_values = spec,
                               .spec_count = 4};
    hp_compute_desc finish = {.name = "exr_finish", .spirv = spv_finish, .spirv_size = sizeof(spv_finish),
                              .push_constant_size = sizeof(struct exr_zip_push)};
    hp_code rc = hp_compute_create(gpu, &inflate, &z->inflate, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &finish, &z->finish, err);
    if (rc != HP_OK) {
        hp_exr_zip_gpu_destroy(&z);
        return rc;
    }
    *out = z;
    return HP_OK;
}

void hp_exr_zip_gpu_destroy(hp_exr_zip_gpu **zp)
{
    hp_exr_zip_gpu *z = *zp;
    if (!z)
        return;
    hp_compute_destroy(z->gpu, &z->inflate);
    hp_compute_destroy(z->gpu, &z->finish);
    hp_compute_destroy(z->gpu, &z->inflate_wide);
    hp_group_commit_destroy(&z->batches);
    pthread_mutex_destroy(&z->stats_lock);
    free(z);
    *zp = NULL;
}

/* exr_inflate_wide.comp's shared memory for `lanes` lanes mapping `entries` starts each: 2405 words of its own
 * (the code tables, the block's header, the rounds' words: the driver's count at 256 x 16, 21,908 bytes,
 * less what a lane adds), 8 words a lane (its w_start, w_exit, w_out, w_state, w_sum and exr_finish.glsl's
 * three) and a byte a start a lane (w_map). The H200's driver reported exactly this for 192 to 512 lanes
 * (docs/bench-raw/2026-11-29-h200-wide-lanes-*.txt). */
static uint32_t wide_shared_bytes(uint32_t lanes, uint32_t entries)
{
    return 4 * (2405 + 8 * lanes + lanes * entries / 4);
}

uint32_t hp_exr_zip_gpu_wide_lanes(void) { return WIDE_GROUP; }
uint32_t hp_exr_zip_gpu_wide_shared_bytes(void) { return wide_shared_bytes(WIDE_GROUP, WIDE_ENTRIES); }

/* Whether the device can run the wide inflate with these lanes and starts: a workgroup that large, and its
 * shared memory (past them the pipeline would be invalid, not refused). */
static bool wide_fits(const hp_exr_zip_gpu *z, uint32_t lanes, uint32_t entries)
{
    const hp_gpu_info *gi = hp_gpu_get_info(z->gpu);
    return gi->has_8bit_storage && lanes <= gi->max_workgroup_invocations && lanes <= gi->max_workgroup_size_x &&
           wide_shared_bytes(lanes, entries) <= gi->max_shared_memory;
}

bool hp_exr_zip_gpu_set_wide(hp_exr_zip_gpu *z, bool on)
{
    /* Made on first use (the daemon asks on a GPU, for exr_zip_decoder gpu): a device without 8-bit storage,
     * or short of the workgroup or the 23 KB of shared memory, keeps the serial inflate. No slices; its lanes'
     * work bounded under lavapipe's loop limit there. */
    uint32_t lanes = z->wide_group ? z->wide_group : WIDE_GROUP;
    uint32_t entries = z->wide_entries ? z->wide_entries : WIDE_ENTRIES;
    if (on && z->inflate_wide.pipeline == VK_NULL_HANDLE && wide_fits(z, lanes, entries)) {
        const uint32_t spec[6] = {0, 0, lanes, z->lavapipe ? LAVAPIPE_WIDE_WORK : 0,
                                  z->wide_span ? z->wide_span : WIDE_SPAN, entries};
        hp_compute_desc wide = {.name = z->wide_phases ? "exr_inflate_wide_phases" : "exr_inflate_wide",
                                .spirv = z->wide_phases ? spv_wide_phases : spv_wide,
                                .spirv_size = z->wide_phases ? sizeof(spv_wide_phases) : sizeof(spv_wide),
                                .push_constant_size = sizeof(struct exr_zip_push), .spec_values = spec,
                                .spec_count = 6};
        hp_err ignored = {0};
        if (hp_compute_create(z->gpu, &wide, &z->inflate_wide, &ignored) != HP_OK)
            z->inflate_wide = (hp_compute){0};
    }
    z->wide = on && z->inflate_wide.pipeline != VK_NULL_HANDLE;
    return z->wide == on;
}

/* The wide pipeline made again with what z says now (its SPAN, ENTRIES, lanes, variant), as set_wide makes it. */
static bool remake_wide(hp_exr_zip_gpu *z)
{
    hp_compute_destroy(z->gpu, &z->inflate_wide);
    z->inflate_wide = (hp_compute){0};
    return hp_exr_zip_gpu_set_wide(z, z->wide);
}

bool hp_exr_zip_gpu_wide_tune(hp_exr_zip_gpu *z, uint32_t span, uint32_t entries, uint32_t group)
{
    span = span ? span : WIDE_SPAN;
    entries = entries ? entries : WIDE_ENTRIES;
    group = group ? group : WIDE_GROUP;
    if (!z->wide || span < 64 || span > 4096 || span % 4 || entries < 4 || entries > 48 || entries % 4 ||
        group < 32 || group > 1024 || group % 32 || !wide_fits(z, group, entries))
        return false;
    uint32_t was[3] = {z->wide_span, z->wide_entries, z->wide_group};
    z->wide_span = span;
    z->wide_entries = entries;
    z->wide_group = group;
    if (remake_wide(z))
        return true;
    z->wide_span = was[0]; /* the pipeline as it was, where the driver refused this one */
    z->wide_entries = was[1];
    z->wide_group = was[2];
    z->wide = true; /* the failed remake turned it off: the pipeline as it was, made again */
    (void)remake_wide(z);
    return false;
}

void hp_exr_zip_gpu_inflate_statistics(hp_exr_zip_gpu *z, char *buf, size_t len)
{
    buf[0] = 0;
    hp_compute *c = z->wide ? &z->inflate_wide : &z->inflate;
    if (c->pipeline != VK_NULL_HANDLE)
        hp_compute_statistics(z->gpu, c, buf, len);
}

bool hp_exr_zip_gpu_wide_phases(hp_exr_zip_gpu *z, bool on)
{
    if (on && !hp_gpu_get_info(z->gpu)->has_shader_clock)
        return false;
    z->wide_phases = on;
    return remake_wide(z);
}

uint32_t hp_exr_zip_gpu_dispatches(const hp_exr_zip_gpu *z, const hp_exr_zip_frame *f)
{
    if (z->slice == 0 || z->wide)
        return 1;
    /* A valid stream's work: at most 2 iterations a byte (a literal, or a match's symbol and its bytes) and a
     * block's header every 4096 bytes (zlib ends its blocks every 16384 symbols), each slice also building
     * the codes of the block it resumes. Damaged streams that need more end HP_EXR_ZIP_UNFINISHED. */
    uint64_t work = 2ull * f->max_chunk_bytes + (uint64_t)HEADER_COST * (2 + f->max_chunk_bytes / 4096);
    return (uint32_t)(work / (z->slice - HEADER_COST) + 1);
}

static void stamp(VkCommandBuffer cmd, const hp_exr_zip_io *io, uint32_t i)
{
    if (io->timestamps != VK_NULL_HANDLE)
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, io->timestamps, io->first_query + i);
}

static struct exr_zip_push exr_zip_push_of(const hp_exr_zip_frame *f, const hp_exr_zip_io *io)
{
    struct exr_zip_push p = {
        .packed = io->packed, .chunks = io->chunks, .unpacked = io->unpacked, .image = io->image,
        .tables = io->tables, .chunk_count = f->chunk_count, .width = f->width, .height = f->height, .pixel_bytes = f->pixel_bytes,
        .lines_per_chunk = f->lines_per_chunk, .float_image = f->float_image,
    };
    for (int s = 0; s < 4; s++)
        p.slot[s] = (uint32_t)f->slot_offset[s] | (uint32_t)f->slot_type[s] << 16;
    return p;
}

void hp_exr_zip_frame_halves(hp_exr_zip_frame *f, uint32_t planes, const uint8_t plane_of[4])
{
    f->planes = planes;
    f->pixel_bytes = 2 * planes;
    f->float_image = false;
    for (int s = 0; s < 4; s++) {
        bool absent = plane_of[s] == HP_EXR_ZIP_NO_PLANE;
        f->slot_offset[s] = absent ? 0 : (uint16_t)(2 * plane_of[s]);
        f->slot_type[s] = absent ? HP_EXR_ZIP_ABSENT : HP_EXR_ZIP_HALF;
    }
}

uint64_t hp_exr_zip_image_bytes(const hp_exr_zip_frame *f)
{
    return (uint64_t)f->width * f->height * (f->float_image ? 16 : 8);
}

static void pass_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
}

static void dispatch_chunks(VkCommandBuffer cmd, const hp_exr_zip_frame *f)
{
    /* ZIPS's one-line chunks of a 16384-row frame are 16384 workgroups, within the dispatch limit */
    vkCmdDispatch(cmd, f->chunk_count < MAX_DISPATCH ? f->chunk_count : MAX_DISPATCH, 1, 1);
}

/* Frame f's inflate: one dispatch, or its slices' with a barrier between each two (each goes on where the one
 * before stopped). No barrier after it: frames recorded one after another run at once. The wide inflate
 * finishes its own chunks; after the serial loop's the caller records the finish, after a barrier
 * (record_finish). */
static void record_inflate(hp_exr_zip_gpu *z, VkCommandBuffer cmd, const hp_exr_zip_frame *f, const hp_exr_zip_io *io,
                           bool wide)
{
    struct exr_zip_push push = exr_zip_push_of(f, io);
    const hp_compute *inflate = wide ? &z->inflate_wide : &z->inflate;
    stamp(cmd, io, 0);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, inflate->pipeline);
    vkCmdPushConstants(cmd, inflate->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    uint32_t slices = wide ? 1 : hp_exr_zip_gpu_dispatches(z, f);
    for (uint32_t d = 0; d < slices; d++) {
        if (d > 0)
            pass_barrier(cmd);
        dispatch_chunks(cmd, f);
    }
}

static void record_finish(hp_exr_zip_gpu *z, VkCommandBuffer cmd, const hp_exr_zip_frame *f, const hp_exr_zip_io *io)
{
    struct exr_zip_push push = exr_zip_push_of(f, io);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, z->finish.pipeline);
    vkCmdPushConstants(cmd, z->finish.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    dispatch_chunks(cmd, f);
}

/* One frame's passes between its timestamps (io's: 0 before, 1 after the inflate, 2 after the finish). */
static void record_passes(hp_exr_zip_gpu *z, VkCommandBuffer cmd, const hp_exr_zip_frame *f, const hp_exr_zip_io *io,
                          bool wide)
{
    record_inflate(z, cmd, f, io, wide);
    if (!wide)
        pass_barrier(cmd);
    stamp(cmd, io, 1);
    if (!wide)
        record_finish(z, cmd, f, io);
    stamp(cmd, io, 2);
}

void hp_exr_zip_gpu_record(hp_exr_zip_gpu *z, VkCommandBuffer cmd, const hp_exr_zip_frame *f, const hp_exr_zip_io *io)
{
    record_passes(z, cmd, f, io, z->wide);
}

const char *hp_exr_zip_status_text(uint32_t status)
{
    switch (status) {
    case HP_EXR_ZIP_OK:
        return "it inflates";
    case HP_EXR_ZIP_BAD_DATA:
        return "it is not a valid zlib stream (bad data)";
    case HP_EXR_ZIP_SHORT:
        return "it inflates to fewer bytes";
    case HP_EXR_ZIP_LONG:
        return "it inflates to more bytes";
    case HP_EXR_ZIP_CHECKSUM:
        return "it is not a valid zlib stream (bad checksum)";
    case HP_EXR_ZIP_TRUNCATED:
        return "the stream runs past its chunk";
    case HP_EXR_ZIP_UNFINISHED:
        return "it needs more work than this device's slices of the pass allow";
    default:
        return "the GPU's status word is unknown";
    }
}

hp_code hp_exr_zip_gpu_check(const hp_exr_zip_frame *f, const hp_exr_zip_chunk *chunks, int32_t first_line_in_file,
                             hp_err *err)
{
    for (uint32_t i = 0; i < f->chunk_count; i++) {
        const hp_exr_zip_chunk *c = &chunks[i];
        if (c->status == HP_EXR_ZIP_OK)
            continue;
        /* The CPU decoder's wording (api/codecs/image_exr.c's inflate_zip_chunk and hp_exr_chunk_fail). */
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "EXR decoding chunk %u (scanlines %d-%d): ZIP data of %u bytes does not inflate to %u: %s", i,
                       first_line_in_file + (int32_t)c->first_line,
                       first_line_in_file + (int32_t)(c->first_line + c->lines) - 1, c->packed_size, c->unpacked_size,
                       hp_exr_zip_status_text(c->status));
    }
    return HP_OK;
}

bool hp_exr_zip_gpu_sliced(const hp_exr_zip_gpu *z) { return z->slice != 0; }

VkDeviceSize hp_exr_zip_gpu_tables_bytes(const hp_exr_zip_frame *f)
{
    return (VkDeviceSize)f->chunk_count * HP_EXR_ZIP_TABLE_WORDS * 4;
}

/* The output buffer of a run: the image, the unpacked bytes (4 more: the last word's rounding), the tables
 * from the next 64 bytes on (exr_inflate.glsl's blocks need 16; 64: a chunk's tables share no cache line
 * with another's, HP_EXR_ZIP_TABLE_WORDS keeping every chunk's on a 64-byte boundary). */
_Static_assert(HP_EXR_ZIP_TABLE_WORDS * 4 % 64 == 0, "a chunk's tables on a 64-byte boundary");

VkDeviceSize hp_exr_zip_gpu_split_output_bytes(const hp_exr_zip_frame *f)
{
    return hp_exr_zip_image_bytes(f) + f->unpacked_bytes + 4;
}

static VkDeviceSize tables_offset(const hp_exr_zip_frame *f)
{
    return (hp_exr_zip_gpu_split_output_bytes(f) + 63) & ~(VkDeviceSize)63;
}

VkDeviceSize hp_exr_zip_gpu_output_bytes(const hp_exr_zip_frame *f)
{
    return tables_offset(f) + hp_exr_zip_gpu_tables_bytes(f);
}

/* Everything one run holds, made and freed by the call: a run is a frame's decoding on a decoding thread,
 * and making a pool, a buffer, a fence and two queries is microseconds against the passes' milliseconds. */
typedef struct zip_run {
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkQueryPool queries;
} zip_run;

static void run_free(VkDevice dev, zip_run *r)
{
    if (r->queries)
        vkDestroyQueryPool(dev, r->queries, NULL);
    if (r->fence)
        vkDestroyFence(dev, r->fence, NULL);
    if (r->pool)
        vkDestroyCommandPool(dev, r->pool, NULL);
}

static VkResult run_make(hp_gpu *gpu, zip_run *r)
{
    VkDevice dev = hp_gpu_device(gpu);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                  .queueFamilyIndex = hp_gpu_decode_family(gpu)};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = HP_EXR_ZIP_GPU_TIMESTAMPS};
    VkResult res = vkCreateCommandPool(dev, &pi, NULL, &r->pool);
    if (res == VK_SUCCESS)
        res = vkCreateFence(dev, &fi, NULL, &r->fence);
    if (res == VK_SUCCESS)
        res = vkCreateQueryPool(dev, &qi, NULL, &r->queries);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = r->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    if (res == VK_SUCCESS)
        res = vkAllocateCommandBuffers(dev, &ai, &r->cmd);
    return res;
}

/* How long a run may take before the device is taken as lost: a 16384^2 frame's slices on lavapipe take
 * minutes; on a GPU a frame takes tens of milliseconds. A batch of frames has this a frame. */
#define RUN_TIMEOUT_NS (600ull * 1000 * 1000 * 1000)

/* A run's objects made, its command buffer begun with its timestamps reset, and the host's writes to its
 * input flushed (the submission then makes them visible to the device; NULL: the caller flushes its own). */
static VkResult run_begin(hp_gpu *gpu, zip_run *r, const hp_buffer *input)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult res = run_make(gpu, r);
    if (res == VK_SUCCESS)
        res = vkBeginCommandBuffer(r->cmd, &bi);
    if (res == VK_SUCCESS) {
        if (input)
            hp_buffer_flush(gpu, input);
        vkCmdResetQueryPool(r->cmd, r->queries, 0, HP_EXR_ZIP_GPU_TIMESTAMPS);
    }
    return res;
}

/* Submitted on the decode queue and waited for, a run of `frames` frames. On failure the run's objects are
 * freed, except when the device is lost or the wait timed out (reported as lost): the GPU may still use them,
 * so they are left. */
static VkResult run_submit_wait(hp_gpu *gpu, zip_run *r, uint32_t frames)
{
    VkDevice dev = hp_gpu_device(gpu);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &r->cmd};
    VkResult res = hp_gpu_decode_submit_wait(gpu, &si, r->fence, RUN_TIMEOUT_NS * (frames ? frames : 1));
    if (res == VK_TIMEOUT)
        res = VK_ERROR_DEVICE_LOST;
    if (res != VK_SUCCESS && res != VK_ERROR_DEVICE_LOST)
        run_free(dev, r);
    return res;
}

/* The caller's buffers: addresses, input of in_bytes at least, output of out_bytes. */
static bool buffers_fit(const hp_buffer *input, VkDeviceSize in_bytes, const hp_buffer *output,
                        VkDeviceSize out_bytes, hp_err *err)
{
    if (input->address && output->address && output->size >= out_bytes && input->size >= in_bytes)
        return true;
    hp_fail(err, HP_ERR_INTERNAL, "exr_zip_gpu: buffers of %llu and %llu bytes (with addresses %d, %d) for a frame "
            "that needs %llu and %llu", (unsigned long long)input->size, (unsigned long long)output->size,
            input->address != 0, output->address != 0, (unsigned long long)in_bytes, (unsigned long long)out_bytes);
    return false;
}

/* The statuses, written by the passes into the host's table, for the host to read after the fence. */
static void record_statuses_to_host(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
}

/* A recorded run (res: how its recording went) submitted and waited for, its GPU time read, its objects
 * freed, and the statuses in input's table checked. */
static hp_code run_finish(hp_gpu *gpu, zip_run *r, VkResult res, const hp_exr_zip_frame *f, const hp_buffer *input,
                          double *gpu_ms, hp_err *err)
{
    if (res == VK_SUCCESS)
        res = run_submit_wait(gpu, r, 1);
    else
        run_free(hp_gpu_device(gpu), r);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "the EXR decoding passes");
    uint64_t ts[HP_EXR_ZIP_GPU_TIMESTAMPS];
    if (gpu_ms && vkGetQueryPoolResults(hp_gpu_device(gpu), r->queries, 0, HP_EXR_ZIP_GPU_TIMESTAMPS, sizeof(ts), ts,
                                        sizeof(ts[0]), VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
        *gpu_ms = (double)(ts[HP_EXR_ZIP_GPU_TIMESTAMPS - 1] - ts[0]) * hp_gpu_get_info(gpu)->timestamp_period_ns / 1e6;
    run_free(hp_gpu_device(gpu), r);
    hp_buffer_invalidate(gpu, input);
    return hp_exr_zip_gpu_check(f, input->mapped, f->first_row, err);
}

/* On lavapipe the finishing pass runs a chunk in one workgroup of 256, each invocation over 1/256 of it
 * several times: past 1 MiB a chunk that would pass lavapipe's loop limit (a 16384-pixel line of 18 planes
 * gave wrong pixels with a status of OK). Such frames are the CPU's there. */
#define LAVAPIPE_FINISH_CHUNK_MAX (1u << 20)

/* Whether the finishing pass can take f's chunks on this device (see above). */
static hp_code finish_fits(const hp_exr_zip_gpu *z, const hp_exr_zip_frame *f, hp_err *err)
{
    if (z->lavapipe && f->max_chunk_bytes > LAVAPIPE_FINISH_CHUNK_MAX)
        return hp_fail(err, HP_ERR_UNUSABLE, "exr_zip_gpu: chunks of %u bytes are over the %u this device's "
                       "finishing pass takes", f->max_chunk_bytes, LAVAPIPE_FINISH_CHUNK_MAX);
    return HP_OK;
}

/* --- Frames decoded at once: one submission -------------------------------------------------------------
 * Frames submitted apart, each on a decode queue of its own, ran side by side at a fraction of the speed of
 * one submission: 8 street frames from 8 threads by the serial loop took 113 ms, the same chunks in one
 * dispatch 44 ms (H200, docs/BENCHMARKS.md, "Frames' chunks together"). So the runs are taken together
 * (common/group_commit.h): a frame that arrives while the batches are on the GPU waits, and the next batch
 * takes every frame waiting by then, their passes in one command buffer, no barrier between frames. A frame
 * alone goes at once, frames under load go together. Up to hp_exr_zip_gpu_batches_in_flight batches run at
 * once (the daemon's default 2): a batch takes its longest chunk's chain whatever its size, so a frame that
 * arrives just after one began goes in a second beside it rather than waiting the chain out. A batch of at most
 * wide_chunks chunks takes the wide inflate (a frame's latency: 7-11 ms a 4K frame against the serial loop's
 * 23-36), a larger one the serial loop, whose chunks then run some 16 an SM against the wide inflate's 2. */
typedef struct zip_job {
    hp_group_item item; /* first: the batch's items are its jobs */
    const hp_exr_zip_frame *f;
    const hp_buffer *input, *output;
    VkResult res;  /* its batch's recording, submission and wait */
    double gpu_ms; /* its share of its batch's time on the GPU */
} zip_job;

static zip_job *job_next(const zip_job *j) { return (zip_job *)j->item.next; }

/* Where a job's passes read and write: its input's table and packed bytes, its output's image, unpacked bytes
 * and code tables. */
static hp_exr_zip_io job_io(const zip_job *j)
{
    const hp_exr_zip_frame *f = j->f;
    return (hp_exr_zip_io){.chunks = j->input->address, .packed = j->input->address + f->table_bytes,
                           .unpacked = j->output->address + hp_exr_zip_image_bytes(f), .image = j->output->address,
                           .tables = j->output->address + tables_offset(f)};
}

uint32_t hp_exr_zip_gpu_wide_batch_chunks(const hp_gpu *gpu)
{
    /* Two chunks an SM (264 on the H200): a batch of two 4K ZIP frames (256-438 chunks; the city HDRI's RGB
     * pair stays under it) takes the serial loop; a lone frame the wide inflate (run_batch: up to four times
     * this). Alone on the GPU the two cross later (3-12 frames: the serial loop's time hardly grows until the
     * SMs are full, the wide inflate's grows with the batch), but in the daemon the wide inflate takes every
     * SM from the frame graph's passes, and the serial loop, bound by each chunk's chain, leaves them room:
     * 16 clients of exr_zip_decoder gpu went 103 -> 110, 145 -> 139 and 111 -> 148 frames/s (street, city,
     * Desk) from 1056 to 230, in one call (docs/BENCHMARKS.md, "The finish a pass of its own"). 256 where
     * the SMs are not known. */
    uint32_t sms = hp_gpu_get_info(gpu)->sm_count;
    return sms ? 2 * sms : 256;
}

void hp_exr_zip_gpu_batch_tune(hp_exr_zip_gpu *z, uint32_t wide_chunks) { z->wide_chunks = wide_chunks; }

uint32_t hp_exr_zip_gpu_batches_in_flight(hp_exr_zip_gpu *z, uint32_t n)
{
    uint32_t queues = hp_gpu_decode_queue_count(z->gpu);
    n = n < 1 ? 1 : n > queues ? queues : n;
    hp_group_commit_lanes(&z->batches, n);
    return n;
}

void hp_exr_zip_gpu_batch_counts(hp_exr_zip_gpu *z, unsigned long *batches, unsigned long *frames)
{
    hp_group_commit_counts(&z->batches, batches, frames);
}

void hp_exr_zip_gpu_batch_stats(hp_exr_zip_gpu *z, hp_exr_zip_batch_stats *out)
{
    pthread_mutex_lock(&z->stats_lock);
    *out = z->stats;
    pthread_mutex_unlock(&z->stats_lock);
}

/* A batch of `frames` counted by the inflate that took it (wide or not), its GPU time and whether it began
 * while another was on the GPU. */
static void count_batch(hp_exr_zip_gpu *z, uint32_t frames, bool wide, double ms, bool beside)
{
    uint32_t b = 0;
    while (b < HP_EXR_ZIP_BATCH_BOUNDS && frames > hp_exr_zip_batch_bounds[b])
        b++;
    pthread_mutex_lock(&z->stats_lock);
    z->stats.batches[wide]++;
    z->stats.frames[wide] += frames;
    z->stats.gpu_seconds[wide] += ms / 1e3;
    z->stats.beside += beside;
    z->stats.sizes[b]++;
    pthread_mutex_unlock(&z->stats_lock);
}

/* Whether a batch of `frames` frames and `chunks` chunks takes the wide inflate. Lavapipe with the wide inflate
 * on (tests) keeps it: chunks past LAVAPIPE_FINISH_CHUNK_MAX are the wide inflate's only there. A lone frame
 * keeps it up to four times the batches' crossing (8 chunks an SM, the crossing before, under which a lone 8K
 * ZIP frame's 270 chunks stay), for its latency: the serial loop's time is its longest chunk's chain, twice a
 * 4K frame's at 8K. Not when it begins beside another batch (whose SMs it would take); a batch that begins
 * while a lone frame's wide inflate runs still runs beside it. */
static bool batch_takes_wide(const hp_exr_zip_gpu *z, uint32_t frames, uint32_t chunks, bool beside)
{
    uint64_t limit = frames == 1 && !beside ? 4ull * z->wide_chunks : z->wide_chunks;
    return z->wide && (z->lavapipe || z->slice != 0 || chunks <= limit);
}

/* The batch's frames recorded, submitted and waited for: each job's res and its share of the GPU's time. Only
 * the batch's first and last timestamps: a timestamp between dispatches may wait for the ones before it. */
static void run_batch(void *ctx, hp_group_item *first)
{
    hp_exr_zip_gpu *z = ctx;
    hp_gpu *gpu = z->gpu;
    zip_job *jobs = (zip_job *)first;
    uint32_t frames = 0, chunks = 0;
    for (zip_job *j = jobs; j; j = job_next(j)) {
        frames++;
        chunks += j->f->chunk_count;
    }
    bool beside = hp_group_commit_running(&z->batches) > 1; /* another batch on the GPU (batches_in_flight) */
    bool wide = batch_takes_wide(z, frames, chunks, beside);
    zip_run r = {0};
    VkResult res = run_begin(gpu, &r, NULL); /* each frame's input flushed below */
    if (res == VK_SUCCESS) {
        vkCmdWriteTimestamp(r.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r.queries, 0);
        /* The input is the caller's host memory, read by address where it lies: no copy, no barrier before
         * the passes. Every frame's inflate, then (the serial loop's) one barrier and every frame's finish:
         * the inflates overlap, and the finishes run on every SM at once. */
        for (zip_job *j = jobs; j; j = job_next(j)) {
            hp_buffer_flush(gpu, j->input);
            hp_exr_zip_io io = job_io(j);
            record_inflate(z, r.cmd, j->f, &io, wide);
        }
        if (!wide) {
            pass_barrier(r.cmd);
            for (zip_job *j = jobs; j; j = job_next(j)) {
                hp_exr_zip_io io = job_io(j);
                record_finish(z, r.cmd, j->f, &io);
            }
        }
        vkCmdWriteTimestamp(r.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r.queries, 1);
        record_statuses_to_host(r.cmd);
        res = vkEndCommandBuffer(r.cmd);
    }
    if (res == VK_SUCCESS)
        res = run_submit_wait(gpu, &r, frames);
    else
        run_free(hp_gpu_device(gpu), &r);
    uint64_t ts[2]; /* the batch's first and last: queries 0 and 1 */
    double ms = 0;
    if (res == VK_SUCCESS && vkGetQueryPoolResults(hp_gpu_device(gpu), r.queries, 0, 2, sizeof(ts), ts, sizeof(ts[0]),
                                                   VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
        ms = (double)(ts[1] - ts[0]) * hp_gpu_get_info(gpu)->timestamp_period_ns / 1e6;
    if (res == VK_SUCCESS)
        run_free(hp_gpu_device(gpu), &r);
    count_batch(z, frames, wide, ms, beside);
    for (zip_job *j = jobs; j; j = job_next(j)) {
        j->res = res;
        j->gpu_ms = ms / frames;
    }
}

/* A frame the passes can take on this device, into buffers large enough. */
static hp_code run_fits(const hp_exr_zip_gpu *z, const hp_exr_zip_frame *f, const hp_buffer *input,
                        const hp_buffer *output, hp_err *err)
{
    hp_code code = z->wide ? HP_OK : finish_fits(z, f, err); /* the wide inflate finishes its own chunks */
    if (code != HP_OK)
        return code;
    if (!buffers_fit(input, f->table_bytes + f->packed_bytes + HP_EXR_ZIP_PACKED_PAD, output,
                     hp_exr_zip_gpu_output_bytes(f), err))
        return HP_ERR_INTERNAL;
    return HP_OK;
}

/* A run's verdict after its batch: the Vulkan failure, or its statuses checked. */
static hp_code run_verdict(hp_exr_zip_gpu *z, const zip_job *j, double *gpu_ms, hp_err *err)
{
    if (j->res != VK_SUCCESS)
        return hp_vk_fail(err, j->res, "the EXR decoding passes");
    if (gpu_ms)
        *gpu_ms = j->gpu_ms;
    hp_buffer_invalidate(z->gpu, j->input);
    return hp_exr_zip_gpu_check(j->f, j->input->mapped, j->f->first_row, err);
}

hp_code hp_exr_zip_gpu_run_together(hp_exr_zip_gpu *z, uint32_t n, const hp_exr_zip_frame *frames,
                                    const hp_buffer *inputs, const hp_buffer *outputs, double *gpu_ms, hp_err *err)
{
    zip_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
    if (!jobs)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    hp_code code = HP_OK;
    for (uint32_t i = 0; i < n && code == HP_OK; i++) {
        jobs[i] = (zip_job){.item.next = i + 1 < n ? &jobs[i + 1].item : NULL, .f = &frames[i], .input = &inputs[i],
                            .output = &outputs[i]};
        code = run_fits(z, &frames[i], &inputs[i], &outputs[i], err);
    }
    if (code == HP_OK && n > 0) {
        hp_group_commit_alone(&z->batches, &jobs[0].item, run_batch, z);
        if (gpu_ms)
            *gpu_ms = jobs[0].gpu_ms * n; /* each frame's share, the batch's whole */
        for (uint32_t i = 0; i < n && code == HP_OK; i++)
            code = run_verdict(z, &jobs[i], NULL, err);
    }
    free(jobs);
    return code;
}

hp_code hp_exr_zip_gpu_run(hp_exr_zip_gpu *z, const hp_exr_zip_frame *f, const hp_buffer *input,
                           const hp_buffer *output, double *gpu_ms, hp_err *err)
{
    hp_code code = run_fits(z, f, input, output, err);
    if (code != HP_OK)
        return code;
    zip_job me = {.f = f, .input = input, .output = output};
    hp_group_commit_join(&z->batches, &me.item, run_batch, z);
    return run_verdict(z, &me, gpu_ms, err);
}

/* The split's second half (api/codecs/image.h's hp_image_zip_inflate did the first): the inflated chunks copied
 * from host memory into output past the image, then exr_finish over them: the Adler-32 checked again
 * after the copy, EXR's predictor and byte split undone, the planes gathered into the image. */
hp_code hp_exr_zip_gpu_finish(hp_exr_zip_gpu *z, const hp_exr_zip_frame *f, const hp_buffer *input,
                              const hp_buffer *output, double *gpu_ms, hp_err *err)
{
    hp_code code = finish_fits(z, f, err);
    if (code != HP_OK)
        return code;
    VkDeviceSize image_bytes = hp_exr_zip_image_bytes(f);
    if (!buffers_fit(input, f->table_bytes + f->unpacked_bytes, output, hp_exr_zip_gpu_split_output_bytes(f), err))
        return HP_ERR_INTERNAL;
    hp_gpu *gpu = z->gpu;
    zip_run r = {0};
    VkResult res = run_begin(gpu, &r, input);
    if (res == VK_SUCCESS) {
        vkCmdWriteTimestamp(r.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r.queries, 0);
        VkBufferCopy cp = {.srcOffset = f->table_bytes, .dstOffset = image_bytes, .size = f->unpacked_bytes};
        vkCmdCopyBuffer(r.cmd, input->buffer, output->buffer, 1, &cp);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        vkCmdPipelineBarrier(r.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                             NULL, 0, NULL);
        vkCmdWriteTimestamp(r.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, r.queries, 1);
        struct exr_zip_push push = exr_zip_push_of(f, &(hp_exr_zip_io){.chunks = input->address,
                                                                        .unpacked = output->address + image_bytes,
                                                                        .image = output->address});
        vkCmdBindPipeline(r.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, z->finish.pipeline);
        vkCmdPushConstants(r.cmd, z->finish.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
        vkCmdDispatch(r.cmd, f->chunk_count < MAX_DISPATCH ? f->chunk_count : MAX_DISPATCH, 1, 1);
        vkCmdWriteTimestamp(r.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r.queries, 2);
        record_statuses_to_host(r.cmd);
        res = vkEndCommandBuffer(r.cmd);
    }
    return run_finish(gpu, &r, res, f, input, gpu_ms, err);
}

hp_code hp_exr_zip_gpu_upload(hp_exr_zip_gpu *z, const hp_buffer *host, const hp_buffer *output, size_t bytes,
                              hp_err *err)
{
    hp_gpu *gpu = z->gpu;
    zip_run r = {0};
    VkResult res = run_begin(gpu, &r, host);
    if (res == VK_SUCCESS) {
        VkBufferCopy cp = {.size = bytes};
        vkCmdCopyBuffer(r.cmd, host->buffer, output->buffer, 1, &cp);
        res = vkEndCommandBuffer(r.cmd);
    }
    if (res == VK_SUCCESS)
        res = run_submit_wait(gpu, &r, 1);
    else
        run_free(hp_gpu_device(gpu), &r); /* recording failed: nothing was submitted */
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "copying a frame decoded on the CPU to the device");
    run_free(hp_gpu_device(gpu), &r);
    return HP_OK;
}

/* EXR's ZIP chunks decoded on the GPU (exr_zip_gpu.h): pipelines, recording, the statuses read back. */
#include "pipeline/exr_zip_gpu.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hp_shared.h"

static const uint32_t spv_inflate[] =
#include "exr_inflate.spv.inc"
    ;
static const uint32_t spv_unzip[] =
#include "exr_unzip.spv.inc"
    ;

/* Push constants; the layout table in shaders/exr_zip.comp. */
struct exr_zip_push {
    VkDeviceAddress packed, chunks, unpacked, image;
    uint32_t chunk_count, width, height, planes, lines_per_chunk, plane_rgba;
};
_Static_assert(offsetof(struct exr_zip_push, chunk_count) == 32 && offsetof(struct exr_zip_push, plane_rgba) == 52,
               "push constant layout drifted from exr_zip.comp");
_Static_assert(sizeof(hp_exr_zip_chunk) == HP_EXR_ZIP_CHUNK_WORDS * 4, "chunk entry drifted from hp_shared.h");

#define UNZIP_GROUP 64u    /* exr_unzip's local_size_x */
#define MAX_DISPATCH 65535u /* maxComputeWorkGroupCount every device gives */

/* shaders/exr_zip.comp's HEADER_COST. Lavapipe's slice: the shader's count of its iterations is not the
 * limiter's (a loop with a `continue` seems to count twice): 50000 of ours broke off a Huffman-only
 * stream's chunks on lavapipe, 30000 and 20000 did not (tests/test_exr_zip_gpu.c); 25000 it is. */
#define HEADER_COST 5000u
#define LAVAPIPE_SLICE 25000u
#define MAX_SLICE 50000u

struct hp_exr_zip_gpu {
    hp_gpu *gpu;
    uint32_t slice;
    hp_compute inflate, unzip;
};

hp_code hp_exr_zip_gpu_create(hp_gpu *gpu, uint32_t slice, hp_exr_zip_gpu **out, hp_err *err)
{
    *out = NULL;
    if (slice != 0 && (slice < 2 * HEADER_COST || slice > MAX_SLICE))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "exr_zip_gpu slice %u is outside [%u, %u]", slice, 2 * HEADER_COST,
                       MAX_SLICE);
    hp_exr_zip_gpu *z = calloc(1, sizeof(*z));
    if (!z)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    z->gpu = gpu;
    z->slice = slice ? slice : strcmp(hp_gpu_get_info(gpu)->driver_name, "llvmpipe") == 0 ? LAVAPIPE_SLICE : 0;
    hp_compute_desc inflate = {.name = "exr_inflate", .spirv = spv_inflate, .spirv_size = sizeof(spv_inflate),
                               .push_constant_size = sizeof(struct exr_zip_push), .spec_values = &z->slice,
                               .spec_count = 1};
    hp_compute_desc unzip = {.name = "exr_unzip", .spirv = spv_unzip, .spirv_size = sizeof(spv_unzip),
                             .push_constant_size = sizeof(struct exr_zip_push)};
    hp_code rc = hp_compute_create(gpu, &inflate, &z->inflate, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &unzip, &z->unzip, err);
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
    hp_compute_destroy(z->gpu, &z->unzip);
    free(z);
    *zp = NULL;
}

uint32_t hp_exr_zip_gpu_dispatches(const hp_exr_zip_gpu *z, const hp_exr_zip_frame *f)
{
    if (z->slice == 0)
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

void hp_exr_zip_gpu_record(hp_exr_zip_gpu *z, VkCommandBuffer cmd, const hp_exr_zip_frame *f, const hp_exr_zip_io *io)
{
    struct exr_zip_push push = {
        .packed = io->packed, .chunks = io->chunks, .unpacked = io->unpacked, .image = io->image,
        .chunk_count = f->chunk_count, .width = f->width, .height = f->height, .planes = f->planes,
        .lines_per_chunk = f->lines_per_chunk,
        .plane_rgba = (uint32_t)f->plane_of[0] | (uint32_t)f->plane_of[1] << 8 | (uint32_t)f->plane_of[2] << 16 |
                      (uint32_t)f->plane_of[3] << 24,
    };
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    stamp(cmd, io, 0);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, z->inflate.pipeline);
    vkCmdPushConstants(cmd, z->inflate.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    for (uint32_t d = hp_exr_zip_gpu_dispatches(z, f); d > 0; d--) {
        /* ZIPS's one-line chunks of a 16384-row frame are 16384 workgroups, within the dispatch limit */
        vkCmdDispatch(cmd, f->chunk_count < MAX_DISPATCH ? f->chunk_count : MAX_DISPATCH, 1, 1);
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &mb, 0, NULL, 0, NULL);
    }
    stamp(cmd, io, 1);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, z->unzip.pipeline);
    vkCmdPushConstants(cmd, z->unzip.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, (f->width + UNZIP_GROUP - 1) / UNZIP_GROUP, f->height, 1);
    stamp(cmd, io, 2);
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
        /* The CPU decoder's wording (api/image_exr.c's inflate_zip_chunk and chunk_fail). */
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "EXR decoding chunk %u (scanlines %d-%d): ZIP data of %u bytes does not inflate to %u: %s", i,
                       first_line_in_file + (int32_t)c->first_line,
                       first_line_in_file + (int32_t)(c->first_line + c->lines) - 1, c->packed_size, c->unpacked_size,
                       hp_exr_zip_status_text(c->status));
    }
    return HP_OK;
}

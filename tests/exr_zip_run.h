/* One run of the EXR ZIP passes on the GPU (pipeline/exr_zip_gpu.h) over a chunk table and packed bytes
 * in host memory, as the daemon lays them out (api/codecs/image.h's hp_image_zip_gather: the table, then the
 * packed bytes, then padding), with the image and the statuses copied back. Header-only, as
 * tests/gpu_test.h; for tests/test_exr_zip_gpu.c and the fuzz target. */
#ifndef HP_EXR_ZIP_RUN_H
#define HP_EXR_ZIP_RUN_H

#include <stdbool.h>
#include <string.h>

#include "gpu_test.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/exr_zip_gpu.h"

/* What the finish writes for pixel x of line ly of a chunk whose bytes, EXR's predictor and byte split undone,
 * are `plain`: each slot's value as the CPU's decoder converts it (api/codecs/image_exr.c: the file's half bits
 * in RGBA16F; RGBA32F with halves widened by hp_half_to_float, floats as they are), alpha 1.0 where absent.
 * out: 8 or 16 bytes. */
static inline void zip_reference_pixel(const hp_exr_zip_frame *f, const uint8_t *plain, uint32_t ly, uint32_t x,
                                       uint8_t *out)
{
    for (int s = 0; s < 4; s++) {
        const uint8_t *plane = plain + ((size_t)ly * f->pixel_bytes + f->slot_offset[s]) * f->width;
        uint16_t h = 0x3c00;
        float v = 1.0f;
        if (f->slot_type[s] == HP_EXR_ZIP_HALF) {
            memcpy(&h, plane + 2 * (size_t)x, 2);
            v = hp_half_to_float(h);
        } else if (f->slot_type[s] == HP_EXR_ZIP_FLOAT) {
            memcpy(&v, plane + 4 * (size_t)x, 4);
        }
        if (f->float_image)
            memcpy(out + 4 * s, &v, 4);
        else
            memcpy(out + 2 * s, &h, 2);
    }
}

enum { ZIP_RUN_STAGING, ZIP_RUN_INPUT, ZIP_RUN_UNPACKED, ZIP_RUN_IMAGE, ZIP_RUN_RB_IMAGE, ZIP_RUN_RB_TABLE, ZIP_RUN_TABLES,
       ZIP_RUN_BUFFERS };

/* Runs the passes over `input` (table_bytes + packed_bytes + HP_EXR_ZIP_PACKED_PAD bytes). The image
 * (hp_exr_zip_image_bytes: RGBA16F, or RGBA32F) goes to image, the table with its statuses to table. The
 * unpacked scratch, the inflate's tables and the image are filled with garbage first, so that a byte the
 * passes fail to write shows. False when a Vulkan call or an allocation failed. */
/* What the image's memory holds before a run: the wide inflate keeps its pointers there, so a walk that
 * fails leaves the rest of its batch as it was. The default has bit 31 clear; tests set one with it set, as
 * a frame before with negative halves leaves it, which reads as a pointer marked final. */
static uint32_t zip_run_image_fill = 0x7e007e00u;

static inline bool zip_run(gpu_test_cmd *r, hp_exr_zip_gpu *zip, const hp_exr_zip_frame *f, const void *input,
                           void *image, hp_exr_zip_chunk *table)
{
    hp_gpu *gpu = r->gpu;
    VkDevice dev = hp_gpu_device(gpu);
    const VkDeviceSize in_bytes = f->table_bytes + f->packed_bytes + HP_EXR_ZIP_PACKED_PAD;
    const VkDeviceSize image_bytes = hp_exr_zip_image_bytes(f);
    const VkDeviceSize size[ZIP_RUN_BUFFERS] = {in_bytes, in_bytes, f->unpacked_bytes + 4, image_bytes, image_bytes,
                                                f->table_bytes, hp_exr_zip_gpu_tables_bytes(f)};
    const hp_mem_kind kind[ZIP_RUN_BUFFERS] = {HP_MEM_UPLOAD, HP_MEM_DEVICE,   HP_MEM_DEVICE,   HP_MEM_DEVICE,
                                               HP_MEM_READBACK, HP_MEM_READBACK, HP_MEM_DEVICE};
    hp_buffer b[ZIP_RUN_BUFFERS] = {0};
    hp_err err = {0};
    bool ok = true;
    for (int i = 0; i < ZIP_RUN_BUFFERS && ok; i++)
        ok = hp_buffer_create(gpu, size[i], kind[i], "test_exr_zip", &b[i], &err) == HP_OK;
    if (ok) {
        memcpy(b[ZIP_RUN_STAGING].mapped, input, (size_t)in_bytes);
        hp_buffer_flush(gpu, &b[ZIP_RUN_STAGING]);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        ok = vkResetCommandPool(dev, r->pool, 0) == VK_SUCCESS && vkBeginCommandBuffer(r->cmd, &bi) == VK_SUCCESS;
    }
    if (ok) {
        VkBufferCopy up = {.size = in_bytes};
        vkCmdCopyBuffer(r->cmd, b[ZIP_RUN_STAGING].buffer, b[ZIP_RUN_INPUT].buffer, 1, &up);
        vkCmdFillBuffer(r->cmd, b[ZIP_RUN_UNPACKED].buffer, 0, VK_WHOLE_SIZE, 0xa5a5a5a5u);
        vkCmdFillBuffer(r->cmd, b[ZIP_RUN_TABLES].buffer, 0, VK_WHOLE_SIZE, 0x5a5a5a5au);
        vkCmdFillBuffer(r->cmd, b[ZIP_RUN_IMAGE].buffer, 0, VK_WHOLE_SIZE, zip_run_image_fill);
        gpu_test_barrier(r->cmd);
        hp_exr_zip_io io = {.chunks = b[ZIP_RUN_INPUT].address, .packed = b[ZIP_RUN_INPUT].address + f->table_bytes,
                            .unpacked = b[ZIP_RUN_UNPACKED].address, .image = b[ZIP_RUN_IMAGE].address,
                            .tables = b[ZIP_RUN_TABLES].address};
        hp_exr_zip_gpu_record(zip, r->cmd, f, &io);
        gpu_test_barrier(r->cmd);
        VkBufferCopy img = {.size = image_bytes}, tab = {.size = f->table_bytes};
        vkCmdCopyBuffer(r->cmd, b[ZIP_RUN_IMAGE].buffer, b[ZIP_RUN_RB_IMAGE].buffer, 1, &img);
        vkCmdCopyBuffer(r->cmd, b[ZIP_RUN_INPUT].buffer, b[ZIP_RUN_RB_TABLE].buffer, 1, &tab);
        gpu_test_barrier(r->cmd);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &r->cmd};
        ok = vkEndCommandBuffer(r->cmd) == VK_SUCCESS && vkResetFences(dev, 1, &r->fence) == VK_SUCCESS &&
             vkQueueSubmit(hp_gpu_compute_queue(gpu), 1, &si, r->fence) == VK_SUCCESS &&
             vkWaitForFences(dev, 1, &r->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS;
    }
    if (ok) {
        hp_buffer_invalidate(gpu, &b[ZIP_RUN_RB_IMAGE]);
        hp_buffer_invalidate(gpu, &b[ZIP_RUN_RB_TABLE]);
        memcpy(image, b[ZIP_RUN_RB_IMAGE].mapped, (size_t)image_bytes);
        memcpy(table, b[ZIP_RUN_RB_TABLE].mapped, (size_t)f->table_bytes);
    }
    for (int i = 0; i < ZIP_RUN_BUFFERS; i++)
        hp_buffer_destroy(gpu, &b[i]);
    return ok;
}

#endif

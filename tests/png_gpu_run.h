/* One run of PNG's filter and deflate passes on the GPU (pipeline/png_gpu.h) over an image already in
 * host memory, with the results copied back: what tests/test_png_gpu.c and tests/fuzz/fuzz_png_gpu.c both
 * check against the CPU reference. Header-only, as tests/gpu_test.h. */
#ifndef HP_PNG_GPU_RUN_H
#define HP_PNG_GPU_RUN_H

#include <stdbool.h>

#include "pipeline/png_gpu.h"
#include "shaders/include/hp_shared.h" /* tone_state's translucent word */

/* The buffers of a run: the image uploaded from STAGING, the passes' own, a tone_state for output.alpha
 * auto, and the three read back. */
enum {
    PNG_RUN_STAGING, PNG_RUN_IMAGE, PNG_RUN_FILTERED, PNG_RUN_TYPES, PNG_RUN_SLOTS, PNG_RUN_TABLE, PNG_RUN_TOKENS,
    PNG_RUN_JOINED, PNG_RUN_TONE, PNG_RUN_RB_FILTERED, PNG_RUN_RB_JOINED, PNG_RUN_RB_TABLE, PNG_RUN_BUFFERS
};

/* What each buffer needs for layout l (at least), and its kind. */
static inline void png_run_sizes(const hp_png_gpu_layout *l, VkDeviceSize size[PNG_RUN_BUFFERS],
                                 hp_mem_kind kind[PNG_RUN_BUFFERS])
{
    const VkDeviceSize s[PNG_RUN_BUFFERS] = {l->image_size,  l->image_size,  l->filtered_size, l->types_size,
                                             l->slots_size,  l->table_size,  l->tokens_size,   l->joined_size,
                                             HP_TONE_STATE_WORDS * 4, l->filtered_size, l->joined_size, l->table_size};
    for (int i = 0; i < PNG_RUN_BUFFERS; i++) {
        size[i] = s[i];
        kind[i] = i == PNG_RUN_STAGING ? HP_MEM_UPLOAD : i >= PNG_RUN_RB_FILTERED ? HP_MEM_READBACK : HP_MEM_DEVICE;
    }
}

static inline void png_run_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
}

/* The passes over the image in b[PNG_RUN_STAGING] (flushed by the caller), with garbage first where they
 * must write everything they hand back; the filtered bytes, the joined stream and the table then lie,
 * invalidated, in the read-back buffers. translucent: -1 for the channels as laid out; else output.alpha
 * auto with a tone_state whose translucent word is that value. False when a Vulkan call failed. */
static inline bool png_run(hp_gpu *gpu, VkCommandPool pool, VkCommandBuffer cmd, VkFence fence, hp_buffer *b,
                           hp_png_gpu *png, const hp_png_gpu_layout *l, int translucent)
{
    VkDevice dev = hp_gpu_device(gpu);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (vkResetCommandPool(dev, pool, 0) != VK_SUCCESS || vkBeginCommandBuffer(cmd, &bi) != VK_SUCCESS)
        return false;
    VkBufferCopy up = {.size = l->image_size};
    vkCmdCopyBuffer(cmd, b[PNG_RUN_STAGING].buffer, b[PNG_RUN_IMAGE].buffer, 1, &up);
    vkCmdFillBuffer(cmd, b[PNG_RUN_FILTERED].buffer, 0, VK_WHOLE_SIZE, 0xa5a5a5a5u);
    vkCmdFillBuffer(cmd, b[PNG_RUN_SLOTS].buffer, 0, VK_WHOLE_SIZE, 0x5a5a5a5au);
    vkCmdFillBuffer(cmd, b[PNG_RUN_JOINED].buffer, 0, VK_WHOLE_SIZE, 0x3c3c3c3cu);
    vkCmdFillBuffer(cmd, b[PNG_RUN_TONE].buffer, 0, VK_WHOLE_SIZE, 0x7f7f7f7fu);
    vkCmdFillBuffer(cmd, b[PNG_RUN_TONE].buffer, HP_TONE_STATE_TRANSLUCENT * 4, 4, translucent > 0 ? 1u : 0u);
    png_run_barrier(cmd);
    hp_png_gpu_io io = {.image = b[PNG_RUN_IMAGE].address, .filtered = &b[PNG_RUN_FILTERED],
                        .types = &b[PNG_RUN_TYPES], .slots = &b[PNG_RUN_SLOTS], .table = &b[PNG_RUN_TABLE],
                        .tokens = &b[PNG_RUN_TOKENS], .joined = &b[PNG_RUN_JOINED],
                        .alpha_auto = translucent >= 0 ? b[PNG_RUN_TONE].address : 0};
    hp_png_gpu_record(png, cmd, l, &io);
    png_run_barrier(cmd);
    VkBufferCopy f = {.size = l->filtered_size}, s = {.size = l->joined_size}, t = {.size = l->table_size};
    vkCmdCopyBuffer(cmd, b[PNG_RUN_FILTERED].buffer, b[PNG_RUN_RB_FILTERED].buffer, 1, &f);
    vkCmdCopyBuffer(cmd, b[PNG_RUN_JOINED].buffer, b[PNG_RUN_RB_JOINED].buffer, 1, &s);
    vkCmdCopyBuffer(cmd, b[PNG_RUN_TABLE].buffer, b[PNG_RUN_RB_TABLE].buffer, 1, &t);
    png_run_barrier(cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    if (vkEndCommandBuffer(cmd) != VK_SUCCESS || vkQueueSubmit(hp_gpu_compute_queue(gpu), 1, &si, fence) != VK_SUCCESS ||
        vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS || vkResetFences(dev, 1, &fence) != VK_SUCCESS)
        return false;
    for (int i = PNG_RUN_RB_FILTERED; i <= PNG_RUN_RB_TABLE; i++)
        hp_buffer_invalidate(gpu, &b[i]);
    return true;
}

#endif

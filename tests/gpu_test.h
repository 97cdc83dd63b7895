/* What every GPU test shares: the device, with the Khronos validation layer on (any message it prints
 * fails the test), chosen by HDRPOST_TEST_DEVICE when set (an index or a name substring, as the daemon's
 * --device), the pipelines of the frame graph, and the closing check of the validation layer. */
#ifndef HP_GPU_TEST_H
#define HP_GPU_TEST_H

#include <stdbool.h>
#include <stdlib.h>

#include "common/log.h"
#include "pipeline/frame_graph.h"
#include "tap.h"

/* The tests' device, the validation layer on, the log at warnings: for the tests and the GPU fuzz targets. */
static inline hp_code gpu_test_device(hp_gpu **gpu, hp_err *err)
{
    hp_log_set_level(HP_LOG_WARN);
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.validation = true;
    cfg.device = getenv("HDRPOST_TEST_DEVICE");
    return hp_gpu_create(&cfg, gpu, err);
}

/* Returns 0, or the exit status of a test that could not start (one failed point, never a skip). */
static inline int gpu_test_open(hp_gpu **gpu, hp_frame_graph **graph, hp_err *err)
{
    if (gpu_test_device(gpu, err) != HP_OK)
        return tap_bail("create the Vulkan device: %s", err->message);
    if (graph && hp_frame_graph_create(*gpu, graph, err) != HP_OK)
        return tap_bail("create the pipelines: %s", err->message);
    return 0;
}

/* The last point of a GPU test, after every Vulkan object is destroyed (the layer reports leaks then). */
static inline void gpu_test_validation_clean(void)
{
    tap_ok(hp_gpu_validation_messages() == 0, "validation layer reported nothing (%u messages)",
           hp_gpu_validation_messages());
}

/* A command buffer of the test's own on the compute queue, for a stage run directly rather than through the
 * frame graph (other launch shapes, a stage the graph does not run). */
typedef struct gpu_test_cmd {
    hp_gpu *gpu;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
} gpu_test_cmd;

static inline bool gpu_test_cmd_init(gpu_test_cmd *c, hp_gpu *gpu)
{
    c->gpu = gpu;
    VkDevice dev = hp_gpu_device(gpu);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .queueFamilyIndex = hp_gpu_compute_family(gpu)};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vkCreateCommandPool(dev, &pi, NULL, &c->pool) != VK_SUCCESS || vkCreateFence(dev, &fi, NULL, &c->fence) != VK_SUCCESS)
        return false;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = c->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    return vkAllocateCommandBuffers(dev, &ai, &c->cmd) == VK_SUCCESS;
}

static inline void gpu_test_cmd_destroy(gpu_test_cmd *c)
{
    VkDevice dev = hp_gpu_device(c->gpu);
    vkDestroyFence(dev, c->fence, NULL);
    vkDestroyCommandPool(dev, c->pool, NULL);
}

/* Every write before it visible to every access after it: tests run passes back to back. */
static inline void gpu_test_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
}

#endif

/* Holding the GPU's clocks up while the frame graph waits for a frame (clock_hold.h). */
#include "pipeline/clock_hold.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"

static const uint32_t spv_clock_hold[] =
#include "clock_hold.spv.inc"
    ;

/* shaders/clock_hold.comp's push constants. */
struct clock_hold_push {
    VkDeviceAddress sink;
    uint32_t rounds, never;
};

/* The first hold's rounds of HP_CLOCK_HOLD_ROUND steps, before any was timed (docs/BENCHMARKS.md gives what a
 * round takes on an H200). At most lavapipe's 65535 loop iterations (the shader says why). */
#define FIRST_ROUNDS 1000u
/* The shortest time a round took over the last LEARN_WINDOW holds sets the next hold's rounds: the highest
 * clock of late, and one odd sample is forgotten 64 holds on. */
#define LEARN_WINDOW 64u
#define MIN_ROUNDS 64u
#define MAX_ROUNDS HP_CLOCK_HOLD_MAX_ROUNDS

struct hp_clock_hold {
    hp_gpu *gpu;
    hp_compute compute;
    hp_buffer sink;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkQueryPool queries; /* the hold in flight's start and end */
    bool in_flight;
    double ns_per_round[LEARN_WINDOW]; /* the last holds', a ring; 0: none yet */
    uint32_t timed;                    /* holds timed so far */
    _Atomic uint32_t rounds;           /* the next hold's (hp_clock_hold_counts_get reads it from any thread) */
    _Atomic uint64_t holds, held_ns;
};

static void set_rounds(hp_clock_hold *h, double rounds)
{
    atomic_store(&h->rounds, rounds < MIN_ROUNDS ? MIN_ROUNDS : rounds > MAX_ROUNDS ? MAX_ROUNDS : (uint32_t)rounds);
}

static hp_code create_submission(hp_clock_hold *h, hp_err *err)
{
    VkDevice dev = hp_gpu_device(h->gpu);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                  .queueFamilyIndex = hp_gpu_compute_family(h->gpu)};
    VkResult res = vkCreateCommandPool(dev, &pi, NULL, &h->pool);
    if (res == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = h->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        res = vkAllocateCommandBuffers(dev, &ai, &h->cmd);
    }
    if (res == VK_SUCCESS) {
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        res = vkCreateFence(dev, &fi, NULL, &h->fence);
    }
    if (res == VK_SUCCESS) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = 2};
        res = vkCreateQueryPool(dev, &qi, NULL, &h->queries);
    }
    return res == VK_SUCCESS ? HP_OK : hp_vk_fail(err, res, "creating the clock hold's command buffer and fence");
}

hp_code hp_clock_hold_create(hp_gpu *gpu, hp_clock_hold **out, hp_err *err)
{
    *out = NULL;
    hp_clock_hold *h = calloc(1, sizeof(*h));
    if (!h)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    h->gpu = gpu;
    set_rounds(h, FIRST_ROUNDS);
    hp_compute_desc desc = {.name = "clock_hold", .spirv = spv_clock_hold, .spirv_size = sizeof(spv_clock_hold),
                            .push_constant_size = sizeof(struct clock_hold_push)};
    hp_code rc = hp_buffer_create(gpu, 16, HP_MEM_DEVICE, "clock_hold_sink", &h->sink, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &desc, &h->compute, err);
    if (rc == HP_OK)
        rc = create_submission(h, err);
    if (rc != HP_OK) {
        hp_clock_hold_destroy(&h);
        return rc;
    }
    *out = h;
    return HP_OK;
}

void hp_clock_hold_record(const hp_clock_hold *h, VkCommandBuffer cmd, uint32_t groups, uint32_t rounds,
                          uint32_t never)
{
    struct clock_hold_push push = {.sink = h->sink.address, .rounds = rounds < MAX_ROUNDS ? rounds : MAX_ROUNDS,
                                   .never = never};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, h->compute.pipeline);
    vkCmdPushConstants(cmd, h->compute.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, groups ? groups : 1, 1, 1);
}

const hp_buffer *hp_clock_hold_sink(const hp_clock_hold *h) { return &h->sink; }

/* The finished hold's timestamps: its GPU time counted, and the next hold's rounds from the shortest time a
 * round took over the last LEARN_WINDOW holds. */
static void learn(hp_clock_hold *h)
{
    uint64_t ts[2];
    VkResult res = vkGetQueryPoolResults(hp_gpu_device(h->gpu), h->queries, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                         VK_QUERY_RESULT_64_BIT);
    if (res != VK_SUCCESS || ts[1] <= ts[0])
        return;
    double ns = (double)(ts[1] - ts[0]) * hp_gpu_get_info(h->gpu)->timestamp_period_ns;
    atomic_fetch_add(&h->held_ns, (uint64_t)ns);
    h->ns_per_round[h->timed++ % LEARN_WINDOW] = ns / atomic_load(&h->rounds);
    double best = 0;
    for (uint32_t i = 0; i < LEARN_WINDOW && i < h->timed; i++)
        best = best == 0 || h->ns_per_round[i] < best ? h->ns_per_round[i] : best;
    set_rounds(h, HP_CLOCK_HOLD_MS * 1e6 / best);
}

void hp_clock_hold_destroy(hp_clock_hold **hp)
{
    hp_clock_hold *h = *hp;
    if (!h)
        return;
    VkDevice dev = hp_gpu_device(h->gpu);
    if (h->in_flight && vkWaitForFences(dev, 1, &h->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS)
        learn(h);
    if (h->queries)
        vkDestroyQueryPool(dev, h->queries, NULL);
    if (h->fence)
        vkDestroyFence(dev, h->fence, NULL);
    if (h->pool)
        vkDestroyCommandPool(dev, h->pool, NULL);
    hp_compute_destroy(h->gpu, &h->compute);
    hp_buffer_destroy(h->gpu, &h->sink);
    free(h);
    *hp = NULL;
}

hp_code hp_clock_hold_keep(hp_clock_hold *h, hp_err *err)
{
    VkDevice dev = hp_gpu_device(h->gpu);
    if (h->in_flight) {
        VkResult res = vkGetFenceStatus(dev, h->fence);
        if (res == VK_NOT_READY)
            return HP_OK;
        if (res != VK_SUCCESS)
            return hp_vk_fail(err, res, "the clock hold's fence");
        h->in_flight = false;
        learn(h);
        vkResetFences(dev, 1, &h->fence);
    }
    vkResetCommandPool(dev, h->pool, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult res = vkBeginCommandBuffer(h->cmd, &bi);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkBeginCommandBuffer (clock hold)");
    vkCmdResetQueryPool(h->cmd, h->queries, 0, 2);
    vkCmdWriteTimestamp(h->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, h->queries, 0);
    hp_clock_hold_record(h, h->cmd, 1, atomic_load(&h->rounds), 0); /* 0: no invocation ends there (the shader says why) */
    vkCmdWriteTimestamp(h->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, h->queries, 1);
    res = vkEndCommandBuffer(h->cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &h->cmd};
    if (res == VK_SUCCESS)
        res = hp_gpu_submit(h->gpu, &si, h->fence);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "submitting a clock hold");
    h->in_flight = true;
    atomic_fetch_add(&h->holds, 1);
    return HP_OK;
}

void hp_clock_hold_counts_get(const hp_clock_hold *h, hp_clock_hold_counts *out)
{
    *out = (hp_clock_hold_counts){.holds = atomic_load(&h->holds),
                                  .gpu_seconds = (double)atomic_load(&h->held_ns) * 1e-9,
                                  .rounds = atomic_load(&h->rounds)};
}

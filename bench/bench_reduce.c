/* Benchmark of the luminance reduction, for the GPU host (docs/BENCHMARKS.md).
 *
 * For each size (1080p, 4K, 8K), input format (RGBA16F, RGBA32F), variant (single dispatch, two-pass)
 * and launch shape, the stage runs --runs times (default 100) in one command buffer, each run bracketed
 * by timestamp queries; the median and the 10th/90th percentiles are reported. Between runs a 256 MiB
 * buffer is overwritten, outside the timestamps, so every run reads its frame from device memory and not
 * from a warm L2 (an H100's 50 MiB L2 holds a whole 1080p RGBA16F frame).
 *
 * In the same run the device's copy bandwidth is measured: vkCmdCopyBuffer of 1 GiB, median of 20,
 * counting bytes read plus bytes written (the DRAM traffic of a copy). A reduction only reads, so its
 * fraction of that ceiling is bytes read / time / copy bandwidth.
 *
 * Every configuration's result is also checked against the CPU reference once (counts, min, max and
 * histogram exact, log-average 1e-4): a fast wrong answer is not a result.
 *
 * Usage: bench_reduce [--runs N] [--quick] [--device D]
 * --quick runs 1080p only with 10 runs (to check the program itself on lavapipe). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "hp_shared.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/gpu.h"
#include "pipeline/reduce.h"

#define CHECK(expr)                                                                                     \
    do {                                                                                                \
        if (!(expr)) {                                                                                  \
            fprintf(stderr, "bench_reduce: %s failed at line %d: %s\n", #expr, __LINE__, err.message); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

#define VK_CHECK(expr)                                                                                  \
    do {                                                                                                \
        VkResult r_ = (expr);                                                                           \
        if (r_ != VK_SUCCESS) {                                                                         \
            fprintf(stderr, "bench_reduce: %s: %s\n", #expr, hp_vk_result_name(r_));                   \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

static hp_err err;
static hp_gpu *gpu;
static VkDevice dev;
static VkCommandPool pool;
static VkCommandBuffer cmd;
static VkFence fence;
static VkQueryPool queries;
static uint32_t max_queries;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void begin(void)
{
    VK_CHECK(vkResetCommandPool(dev, pool, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_CHECK(vkBeginCommandBuffer(cmd, &bi));
}

static void submit_and_wait(void)
{
    VK_CHECK(vkEndCommandBuffer(cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    VK_CHECK(vkQueueSubmit(hp_gpu_compute_queue(gpu), 1, &si, fence));
    VK_CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
    VK_CHECK(vkResetFences(dev, 1, &fence));
}

static void barrier_all(void)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
}

/* Durations in ms of `runs` timestamp pairs. */
static void read_durations(uint32_t runs, double *ms)
{
    uint64_t *ts = calloc(2 * runs, sizeof(uint64_t));
    VK_CHECK(vkGetQueryPoolResults(dev, queries, 0, 2 * runs, 2 * runs * sizeof(uint64_t), ts, sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    double period_ms = hp_gpu_get_info(gpu)->timestamp_period_ns * 1e-6;
    for (uint32_t i = 0; i < runs; i++)
        ms[i] = (double)(ts[2 * i + 1] - ts[2 * i]) * period_ms;
    free(ts);
}

typedef struct summary {
    double median, p10, p90;
} summary;

static summary summarize(double *ms, uint32_t n)
{
    qsort(ms, n, sizeof(double), cmp_double);
    return (summary){ms[n / 2], ms[n / 10], ms[(n * 9) / 10]};
}

/* Copy bandwidth: 1 GiB buffer to buffer, bytes read + written per second. */
static double measure_copy_bandwidth(uint32_t runs, summary *s)
{
    const VkDeviceSize bytes = 1ull << 30;
    hp_buffer a, b;
    CHECK(hp_buffer_create(gpu, bytes, HP_MEM_DEVICE, "bench_copy_src", &a, &err) == HP_OK);
    CHECK(hp_buffer_create(gpu, bytes, HP_MEM_DEVICE, "bench_copy_dst", &b, &err) == HP_OK);
    begin();
    vkCmdFillBuffer(cmd, a.buffer, 0, VK_WHOLE_SIZE, 0x3f800000u);
    barrier_all();
    vkCmdResetQueryPool(cmd, queries, 0, 2 * runs);
    VkBufferCopy region = {.size = bytes};
    for (uint32_t i = 0; i < runs; i++) {
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i);
        vkCmdCopyBuffer(cmd, i % 2 ? b.buffer : a.buffer, i % 2 ? a.buffer : b.buffer, 1, &region);
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i + 1);
        barrier_all();
    }
    submit_and_wait();
    double *ms = calloc(runs, sizeof(double));
    read_durations(runs, ms);
    *s = summarize(ms, runs);
    free(ms);
    hp_buffer_destroy(gpu, &a);
    hp_buffer_destroy(gpu, &b);
    return 2.0 * (double)bytes / (s->median * 1e-3);
}

/* A frame with the spread of a render: log-normal channels, deterministic. */
static void fill_frame(void *dst, hp_pixel_format format, uint64_t count)
{
    uint64_t state = 42;
    for (uint64_t i = 0; i < count; i++) {
        float p[4];
        for (int c = 0; c < 3; c++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            double u1 = ((state >> 11) + 1) * 0x1p-53;
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            double u2 = (state >> 11) * 0x1p-53;
            p[c] = (float)exp(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * 2.5 - 1.4);
        }
        p[3] = 1.0f;
        if (format == HP_PIXEL_RGBA16F) {
            uint16_t h[4];
            for (int c = 0; c < 4; c++)
                h[c] = hp_float_to_half(p[c]);
            memcpy((uint8_t *)dst + i * 8, h, 8);
        } else {
            memcpy((uint8_t *)dst + i * 16, p, 16);
        }
    }
}

static bool stats_match(const hp_lum_stats *g, const hp_lum_stats *c)
{
    return g->finite_pixels == c->finite_pixels && g->nonfinite_pixels == c->nonfinite_pixels && g->min == c->min &&
           g->max == c->max && fabs(g->log_average - c->log_average) <= 1e-4 * c->log_average &&
           memcmp(g->histogram, c->histogram, sizeof(g->histogram)) == 0;
}

int main(int argc, char **argv)
{
    uint32_t runs = 100;
    bool quick = false;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = true, runs = 10;
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else {
            fprintf(stderr, "usage: bench_reduce [--runs N] [--quick] [--device D]\n");
            return 2;
        }
    }
    if (runs < 10)
        runs = 10;
    hp_log_set_level(HP_LOG_WARN);
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.device = device;
    CHECK(hp_gpu_create(&cfg, &gpu, &err) == HP_OK);
    dev = hp_gpu_device(gpu);
    const hp_gpu_info *gi = hp_gpu_get_info(gpu);

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .queueFamilyIndex = hp_gpu_compute_family(gpu)};
    VK_CHECK(vkCreateCommandPool(dev, &pi, NULL, &pool));
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VK_CHECK(vkAllocateCommandBuffers(dev, &ai, &cmd));
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(dev, &fi, NULL, &fence));
    max_queries = 2 * (runs > 20 ? runs : 20);
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = max_queries};
    VK_CHECK(vkCreateQueryPool(dev, &qi, NULL, &queries));

    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
    printf("# bench_reduce\n\ndevice: %s; driver: %s %s; Vulkan %u.%u.%u; subgroup %u; date %s; runs %u (median, "
           "p10-p90)\n\n",
           gi->device_name, gi->driver_name, gi->driver_info, VK_API_VERSION_MAJOR(gi->api_version),
           VK_API_VERSION_MINOR(gi->api_version), VK_API_VERSION_PATCH(gi->api_version), gi->subgroup_size, date,
           runs);

    summary cs;
    double copy_bw = measure_copy_bandwidth(quick ? 4 : 20, &cs);
    printf("copy bandwidth: %.1f GB/s (1 GiB buffer copy, read + written, median %.3f ms)\n\n", copy_bw / 1e9,
           cs.median);

    /* L2 flush: overwriting 256 MiB between runs evicts the frame. */
    hp_buffer flush;
    CHECK(hp_buffer_create(gpu, 256ull << 20, HP_MEM_DEVICE, "bench_l2_flush", &flush, &err) == HP_OK);
    hp_buffer stats, scratch;
    CHECK(hp_buffer_create(gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "bench_stats", &stats, &err) == HP_OK);
    CHECK(hp_buffer_create(gpu, hp_reduce_scratch_size(0), HP_MEM_DEVICE, "bench_scratch", &scratch, &err) == HP_OK);
    hp_buffer readback;
    CHECK(hp_buffer_create(gpu, HP_STATS_SIZE, HP_MEM_READBACK, "bench_readback", &readback, &err) == HP_OK);

    static const struct { uint32_t w, h; const char *name; } sizes[] = {
        {1920, 1080, "1080p"}, {3840, 2160, "4K"}, {7680, 4320, "8K"}};
    static const hp_reduce_config shapes[] = {
        {.workgroup_size = 256, .fetches = 4, .max_groups = 2048},
        {.workgroup_size = 256, .fetches = 8, .max_groups = 2048},
        {.workgroup_size = 512, .fetches = 4, .max_groups = 2048},
        {.workgroup_size = 256, .fetches = 2, .max_groups = 2048},
    };
    size_t shape_count = quick ? 2 : sizeof(shapes) / sizeof(shapes[0]);
    hp_reduce *reducers[4] = {0};
    for (size_t s = 0; s < shape_count; s++)
        CHECK(hp_reduce_create(gpu, &shapes[s], &reducers[s], &err) == HP_OK);

    printf("| size | format | variant | wg x fetches | MB read | median ms | p10-p90 ms | GB/s | of copy bw | check |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    size_t size_count = quick ? 1 : 3;
    double *ms = calloc(runs, sizeof(double));
    for (size_t z = 0; z < size_count; z++) {
        for (int f = 0; f < 2; f++) {
            hp_pixel_format format = (hp_pixel_format)f;
            uint64_t count = (uint64_t)sizes[z].w * sizes[z].h;
            VkDeviceSize bytes = count * hp_pixel_format_size(format);
            hp_buffer staging, input;
            CHECK(hp_buffer_create(gpu, bytes, HP_MEM_UPLOAD, "bench_staging", &staging, &err) == HP_OK);
            CHECK(hp_buffer_create(gpu, (bytes + 15) & ~15ull, HP_MEM_DEVICE, "bench_frame", &input, &err) == HP_OK);
            fill_frame(staging.mapped, format, count);
            hp_lum_stats want;
            hp_cpu_reduce(staging.mapped, format, count, -16, 16, &want);
            begin();
            VkBufferCopy region = {.size = bytes};
            vkCmdCopyBuffer(cmd, staging.buffer, input.buffer, 1, &region);
            vkCmdFillBuffer(cmd, scratch.buffer, 0, 16, 0);
            barrier_all();
            submit_and_wait();
            hp_buffer_destroy(gpu, &staging);

            for (size_t s = 0; s < shape_count; s++) {
                for (int v = 0; v < 2; v++) {
                    hp_reduce_params params = HP_REDUCE_PARAMS_DEFAULTS;
                    params.variant = (hp_reduce_variant)v;
                    hp_reduce_io io = {.pixels = input.address, .pixel_count = count, .format = format,
                                       .stats = &stats, .scratch = &scratch};
                    begin();
                    vkCmdResetQueryPool(cmd, queries, 0, 2 * runs);
                    for (uint32_t i = 0; i < runs; i++) {
                        vkCmdFillBuffer(cmd, flush.buffer, 0, VK_WHOLE_SIZE, i);
                        barrier_all();
                        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i);
                        hp_reduce_record(reducers[s], cmd, &io, &params);
                        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i + 1);
                        barrier_all();
                    }
                    VkBufferCopy down = {.size = HP_STATS_SIZE};
                    vkCmdCopyBuffer(cmd, stats.buffer, readback.buffer, 1, &down);
                    barrier_all();
                    submit_and_wait();
                    read_durations(runs, ms);
                    summary sm = summarize(ms, runs);
                    hp_buffer_invalidate(gpu, &readback);
                    hp_lum_stats got;
                    hp_reduce_decode_stats(readback.mapped, count, &got);
                    double gbs = (double)bytes / (sm.median * 1e-3) / 1e9;
                    printf("| %s | %s | %s | %u x %u | %.1f | %.4f | %.4f-%.4f | %.0f | %.0f%% | %s |\n", sizes[z].name,
                           hp_pixel_format_name(format), hp_reduce_variant_name(params.variant),
                           shapes[s].workgroup_size, shapes[s].fetches, (double)bytes / 1e6, sm.median, sm.p10, sm.p90,
                           gbs, 100.0 * gbs * 1e9 / copy_bw, stats_match(&got, &want) ? "ok" : "MISMATCH");
                    fflush(stdout);
                }
            }
            hp_buffer_destroy(gpu, &input);
        }
    }
    free(ms);
    for (size_t s = 0; s < shape_count; s++)
        hp_reduce_destroy(&reducers[s]);
    hp_buffer_destroy(gpu, &flush);
    hp_buffer_destroy(gpu, &stats);
    hp_buffer_destroy(gpu, &scratch);
    hp_buffer_destroy(gpu, &readback);
    vkDestroyQueryPool(dev, queries, NULL);
    vkDestroyFence(dev, fence, NULL);
    vkDestroyCommandPool(dev, pool, NULL);
    hp_gpu_destroy(&gpu);
    return 0;
}

/* Benchmark of the luminance reduction, for the GPU host (docs/BENCHMARKS.md).
 *
 * For each size (1080p, 4K, 8K), input format (RGBA16F, RGBA32F), variant (single dispatch, two-pass)
 * and launch shape, the stage runs --runs times (default 100), each run bracketed by timestamp queries;
 * the median and the 10th/90th percentiles are reported. The GPU is first kept busy for two seconds so
 * that it reaches its working clocks. Between runs a 256 MiB
 * buffer is overwritten, outside the timestamps, so every run reads its frame from device memory and not
 * from a warm L2 (an H100's 50 MiB L2 holds a whole 1080p RGBA16F frame).
 *
 * In the same run the device's copy bandwidth is measured before and after: vkCmdCopyBuffer of 1 GiB,
 * median of 20, counting bytes read plus bytes written (the DRAM traffic of a copy). A reduction only reads, so its
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

/* Copy bandwidth: a 1 GiB buffer to another, bytes read + written per second. */
static double measure_copy_bandwidth(uint32_t runs, const hp_buffer *a, const hp_buffer *b, summary *s)
{
    const VkDeviceSize bytes = a->size;
    begin();
    vkCmdFillBuffer(cmd, a->buffer, 0, VK_WHOLE_SIZE, 0x3f800000u);
    barrier_all();
    vkCmdResetQueryPool(cmd, queries, 0, 2 * runs);
    VkBufferCopy region = {.size = bytes};
    for (uint32_t i = 0; i < runs; i++) {
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i);
        vkCmdCopyBuffer(cmd, i % 2 ? b->buffer : a->buffer, i % 2 ? a->buffer : b->buffer, 1, &region);
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i + 1);
        barrier_all();
    }
    submit_and_wait();
    double *ms = calloc(runs, sizeof(double));
    read_durations(runs, ms);
    *s = summarize(ms, runs);
    free(ms);
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

static const uint32_t spv_bandwidth[] =
#include "bench_bandwidth.spv.inc"
    ;

typedef struct probe_push {
    VkDeviceAddress src, dst;
    uint32_t count;
} probe_push;

/* Shader bandwidth: MODE 0 copies src to dst, MODE 1 only reads src (shaders/bench_bandwidth.comp).
 * Returns bytes moved per second: read + written for a copy, read for a read. */
static double measure_shader_bandwidth(const hp_compute *probe, bool copy, const hp_buffer *src, const hp_buffer *dst,
                                       uint32_t groups, uint32_t runs, summary *s)
{
    probe_push push = {.src = src->address, .dst = dst->address, .count = (uint32_t)(src->size / 16)};
    begin();
    vkCmdResetQueryPool(cmd, queries, 0, 2 * runs);
    for (uint32_t i = 0; i < runs; i++) {
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, probe->pipeline);
        vkCmdPushConstants(cmd, probe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
        vkCmdDispatch(cmd, groups, 1, 1);
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i + 1);
        barrier_all();
    }
    submit_and_wait();
    double *ms = calloc(runs, sizeof(double));
    read_durations(runs, ms);
    *s = summarize(ms, runs);
    free(ms);
    return (copy ? 2.0 : 1.0) * (double)src->size / (s->median * 1e-3);
}

/* Keeps the GPU busy for about `seconds` so it reaches its working clocks before anything is timed:
 * an idle NVIDIA GPU runs its memory and cores slowly and takes a while to ramp up. */
static void warm_up(double seconds, hp_buffer *a, hp_buffer *b)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        begin();
        VkBufferCopy region = {.size = a->size < b->size ? a->size : b->size};
        for (int i = 0; i < 16; i++) {
            vkCmdCopyBuffer(cmd, i % 2 ? b->buffer : a->buffer, i % 2 ? a->buffer : b->buffer, 1, &region);
            barrier_all();
        }
        submit_and_wait();
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
}

typedef struct frame {
    const char *name;
    uint32_t w, h;
    hp_pixel_format format;
    hp_buffer input;
    hp_lum_stats want;
    double read_ms; /* the read probe over this frame's bytes: the floor for a kernel that reads it once */
} frame;

typedef struct config {
    hp_reduce_config shape;
    hp_reduce *reduce;
} config;

int main(int argc, char **argv)
{
    uint32_t runs = 100;
    uint32_t rounds = 5;
    bool quick = false;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = true, runs = 10, rounds = 2;
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else {
            fprintf(stderr, "usage: bench_reduce [--runs N] [--quick] [--device D]\n");
            return 2;
        }
    }
    if (runs < 10)
        runs = 10;
    /* Runs are spread over rounds, and the configurations interleaved within a round, so a drift of the
     * clocks during the benchmark spreads over every configuration instead of favouring the later ones. */
    uint32_t per_round = (runs + rounds - 1) / rounds;
    runs = per_round * rounds;
    hp_log_set_level(HP_LOG_WARN);
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.device = device;
    cfg.capture_statistics = true;
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
    max_queries = 2 * (per_round > 20 ? per_round : 20);
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = max_queries};
    VK_CHECK(vkCreateQueryPool(dev, &qi, NULL, &queries));

    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
    printf("# bench_reduce\n\ndevice: %s; driver: %s %s; Vulkan %u.%u.%u; subgroup %u; SMs %u; date %s; "
           "%u runs per configuration in %u interleaved rounds (median, p10-p90)\n\n",
           gi->device_name, gi->driver_name, gi->driver_info, VK_API_VERSION_MAJOR(gi->api_version),
           VK_API_VERSION_MINOR(gi->api_version), VK_API_VERSION_PATCH(gi->api_version), gi->subgroup_size,
           gi->sm_count, date, runs, rounds);

    /* Frames first: building an 8K frame on the CPU takes seconds, during which the GPU would idle. */
    static const struct { uint32_t w, h; const char *name; } sizes[] = {
        {1920, 1080, "1080p"}, {3840, 2160, "4K"}, {7680, 4320, "8K"}};
    size_t size_count = quick ? 1 : 3;
    frame frames[6];
    size_t frame_count = 0;
    for (size_t z = 0; z < size_count; z++) {
        for (int f = 0; f < 2; f++) {
            frame *fr = &frames[frame_count++];
            fr->name = sizes[z].name;
            fr->w = sizes[z].w, fr->h = sizes[z].h;
            fr->format = (hp_pixel_format)f;
            uint64_t count = (uint64_t)fr->w * fr->h;
            VkDeviceSize bytes = count * hp_pixel_format_size(fr->format);
            hp_buffer staging;
            CHECK(hp_buffer_create(gpu, bytes, HP_MEM_UPLOAD, "bench_staging", &staging, &err) == HP_OK);
            CHECK(hp_buffer_create(gpu, (bytes + 15) & ~15ull, HP_MEM_DEVICE, "bench_frame", &fr->input, &err) ==
                  HP_OK);
            fill_frame(staging.mapped, fr->format, count);
            hp_cpu_reduce(staging.mapped, fr->format, count, -16, 16, &fr->want);
            begin();
            VkBufferCopy region = {.size = bytes};
            vkCmdCopyBuffer(cmd, staging.buffer, fr->input.buffer, 1, &region);
            barrier_all();
            submit_and_wait();
            hp_buffer_destroy(gpu, &staging);
        }
    }

    hp_buffer flush; /* overwritten between runs: evicts the frame from L2 */
    CHECK(hp_buffer_create(gpu, 256ull << 20, HP_MEM_DEVICE, "bench_l2_flush", &flush, &err) == HP_OK);
    hp_buffer stats, scratch, readback;
    CHECK(hp_buffer_create(gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "bench_stats", &stats, &err) == HP_OK);
    CHECK(hp_buffer_create(gpu, hp_reduce_scratch_size(0), HP_MEM_DEVICE, "bench_scratch", &scratch, &err) == HP_OK);
    CHECK(hp_buffer_create(gpu, HP_STATS_SIZE, HP_MEM_READBACK, "bench_readback", &readback, &err) == HP_OK);

    /* Launch shapes: the default first. "resident" grids hold exactly what the SMs keep resident at once,
     * where the driver tells the SM count. */
    uint32_t resident_256 = gi->sm_count && gi->warps_per_sm ? gi->sm_count * gi->warps_per_sm * 32 / 256 : 1024;
    if (resident_256 > HP_REDUCE_MAX_GROUPS)
        resident_256 = HP_REDUCE_MAX_GROUPS;
    config configs[] = {
        {.shape = HP_REDUCE_CONFIG_DEFAULTS},
        {.shape = {.workgroup_size = 256, .fetches = 4, .max_groups = 2048}},
        {.shape = {.workgroup_size = 256, .fetches = 8, .max_groups = 2048}},
        {.shape = {.workgroup_size = 256, .fetches = 4, .max_groups = resident_256}},
        {.shape = {.workgroup_size = 256, .fetches = 8, .max_groups = 0}},
        /* Ablations of the default: where the time goes (results wrong by design: check says n/a). */
        {.shape = {.workgroup_size = 512, .fetches = 8, .diag_skip = 1}},
        {.shape = {.workgroup_size = 512, .fetches = 8, .diag_skip = 4}},
        {.shape = {.workgroup_size = 512, .fetches = 8, .diag_skip = 8}},
        {.shape = {.workgroup_size = 512, .fetches = 8, .diag_skip = 11}},
    };
    size_t config_count = quick ? 2 : sizeof(configs) / sizeof(configs[0]);
    begin();
    for (size_t c = 0; c < config_count; c++) {
        CHECK(hp_reduce_create(gpu, &configs[c].shape, &configs[c].reduce, &err) == HP_OK);
        configs[c].shape = *hp_reduce_get_config(configs[c].reduce);
        hp_reduce_init_scratch(configs[c].reduce, cmd, &scratch);
    }
    submit_and_wait();

    for (size_t c = 0; c < config_count; c++) {
        for (int f = 0; f < 2; f++) {
            for (int v = 0; v < 2; v++) {
                char stats_text[1024];
                hp_reduce_statistics(configs[c].reduce, (hp_pixel_format)f, (hp_reduce_variant)v, stats_text,
                                     sizeof(stats_text));
                if (stats_text[0])
                    printf("pipeline %u x %u %s %s (diag %u): %s\n", configs[c].shape.workgroup_size,
                           configs[c].shape.fetches, hp_pixel_format_name((hp_pixel_format)f),
                           hp_reduce_variant_name((hp_reduce_variant)v), configs[c].shape.diag_skip, stats_text);
            }
        }
    }

    hp_buffer copy_a, copy_b;
    CHECK(hp_buffer_create(gpu, 1ull << 30, HP_MEM_DEVICE, "bench_copy_src", &copy_a, &err) == HP_OK);
    CHECK(hp_buffer_create(gpu, 1ull << 30, HP_MEM_DEVICE, "bench_copy_dst", &copy_b, &err) == HP_OK);
    hp_compute probes[2]; /* copy, read */
    for (int m = 0; m < 2; m++) {
        const uint32_t spec[3] = {256, (uint32_t)m, 4};
        hp_compute_desc desc = {.name = m ? "bench_read" : "bench_copy", .spirv = spv_bandwidth,
                                .spirv_size = sizeof(spv_bandwidth), .push_constant_size = sizeof(probe_push),
                                .spec_values = spec, .spec_count = 3};
        CHECK(hp_compute_create(gpu, &desc, &probes[m], &err) == HP_OK);
    }
    warm_up(quick ? 0.2 : 2.0, &copy_a, &copy_b);
    summary cs_before, cs_after, ps;
    uint32_t bw_runs = quick ? 4 : 20;
    double bw_before = measure_copy_bandwidth(bw_runs, &copy_a, &copy_b, &cs_before);
    /* The shader probes at a few grid sizes; the best of each is its ceiling. */
    const uint32_t probe_groups[] = {resident_256, 2048, (uint32_t)(copy_a.size / 16 / 1024)};
    double shader_copy = 0, shader_read = 0;
    for (int i = 0; i < 3; i++) {
        double c = measure_shader_bandwidth(&probes[0], true, &copy_a, &copy_b, probe_groups[i], bw_runs, &ps);
        double r = measure_shader_bandwidth(&probes[1], false, &copy_a, &copy_b, probe_groups[i], bw_runs, &ps);
        printf("shader probe, %u workgroups of 256 x 4 fetches: copy %.1f GB/s (read + written), read %.1f GB/s\n",
               probe_groups[i], c / 1e9, r / 1e9);
        shader_copy = c > shader_copy ? c : shader_copy;
        shader_read = r > shader_read ? r : shader_read;
    }
    printf("\n");
    for (size_t fr = 0; fr < frame_count; fr++) {
        double best = 1e30;
        const uint32_t grids[] = {resident_256, (uint32_t)((frames[fr].input.size / 16 + 1023) / 1024)};
        for (int i = 0; i < 2; i++) {
            measure_shader_bandwidth(&probes[1], false, &frames[fr].input, &copy_b, grids[i], bw_runs, &ps);
            best = ps.median < best ? ps.median : best;
        }
        frames[fr].read_ms = best;
    }

    printf("| size | format | variant | wg x fetches, groups | MB read | median ms | p10-p90 ms | GB/s | of copy bw | of read bw | read probe ms | check |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    size_t cells = frame_count * config_count * 2;
    double *all = calloc(cells * runs, sizeof(double));
    bool *checks = calloc(cells, sizeof(bool));
    double *ms = calloc(per_round, sizeof(double));
    for (size_t fr = 0; fr < frame_count; fr++) {
        for (uint32_t round = 0; round < rounds; round++) {
            for (size_t cell = 0; cell < config_count * 2; cell++) {
                size_t c = cell / 2;
                hp_reduce_params params = HP_REDUCE_PARAMS_DEFAULTS;
                params.variant = (hp_reduce_variant)(cell % 2);
                uint64_t count = (uint64_t)frames[fr].w * frames[fr].h;
                hp_reduce_io io = {.pixels = frames[fr].input.address, .pixel_count = count,
                                   .format = frames[fr].format, .stats = &stats, .scratch = &scratch};
                begin();
                vkCmdResetQueryPool(cmd, queries, 0, 2 * per_round);
                for (uint32_t i = 0; i < per_round; i++) {
                    vkCmdFillBuffer(cmd, flush.buffer, 0, VK_WHOLE_SIZE, i);
                    barrier_all();
                    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i);
                    hp_reduce_record(configs[c].reduce, cmd, &io, &params);
                    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 2 * i + 1);
                    barrier_all();
                }
                VkBufferCopy down = {.size = HP_STATS_SIZE};
                vkCmdCopyBuffer(cmd, stats.buffer, readback.buffer, 1, &down);
                barrier_all();
                submit_and_wait();
                read_durations(per_round, ms);
                size_t at = fr * config_count * 2 + cell;
                memcpy(all + at * runs + round * per_round, ms, per_round * sizeof(double));
                hp_buffer_invalidate(gpu, &readback);
                hp_lum_stats got;
                hp_reduce_decode_stats(readback.mapped, count, &got);
                checks[at] = (round == 0 || checks[at]) && stats_match(&got, &frames[fr].want);
            }
        }
    }
    double bw_after = measure_copy_bandwidth(bw_runs, &copy_a, &copy_b, &cs_after);
    double copy_bw = bw_before > bw_after ? bw_before : bw_after;
    if (shader_copy > copy_bw)
        copy_bw = shader_copy;

    for (size_t fr = 0; fr < frame_count; fr++) {
        VkDeviceSize bytes = (VkDeviceSize)frames[fr].w * frames[fr].h * hp_pixel_format_size(frames[fr].format);
        for (size_t cell = 0; cell < config_count * 2; cell++) {
            size_t c = cell / 2, at = fr * config_count * 2 + cell;
            summary sm = summarize(all + at * runs, runs);
            double gbs = (double)bytes / (sm.median * 1e-3) / 1e9;
            static const char *const ablation[16] = {
                [1] = ", no histogram", [2] = ", no log sum", [3] = ", no histogram or log",
                [4] = ", no bin settling", [8] = ", no final combine", [11] = ", no histogram, log or combine"};
            printf("| %s | %s | %s | %u x %u, %u%s%s | %.1f | %.4f | %.4f-%.4f | %.0f | %.0f%% | %.0f%% | %.4f | %s |\n",
                   frames[fr].name, hp_pixel_format_name(frames[fr].format),
                   hp_reduce_variant_name((hp_reduce_variant)(cell % 2)), configs[c].shape.workgroup_size,
                   configs[c].shape.fetches, configs[c].shape.max_groups, c == 0 ? " (default)" : "",
                   ablation[configs[c].shape.diag_skip & 15] ? ablation[configs[c].shape.diag_skip & 15] : "", (double)bytes / 1e6, sm.median, sm.p10, sm.p90, gbs,
                   100.0 * gbs * 1e9 / copy_bw, 100.0 * gbs * 1e9 / shader_read, frames[fr].read_ms,
                   configs[c].shape.diag_skip ? "n/a" : checks[at] ? "ok" : "MISMATCH");
        }
    }
    printf("\ncopy bandwidth, 1 GiB, bytes read + written: vkCmdCopyBuffer %.1f GB/s before and %.1f GB/s after "
           "(median %.3f / %.3f ms); shader copy %.1f GB/s. Ceiling used: %.1f GB/s. Read ceiling (shader read "
           "of 1 GiB): %.1f GB/s.\n",
           bw_before / 1e9, bw_after / 1e9, cs_before.median, cs_after.median, shader_copy / 1e9, copy_bw / 1e9,
           shader_read / 1e9);

    free(ms);
    free(all);
    free(checks);
    for (size_t c = 0; c < config_count; c++)
        hp_reduce_destroy(&configs[c].reduce);
    hp_compute_destroy(gpu, &probes[0]);
    hp_compute_destroy(gpu, &probes[1]);
    for (size_t fr = 0; fr < frame_count; fr++)
        hp_buffer_destroy(gpu, &frames[fr].input);
    hp_buffer_destroy(gpu, &copy_a);
    hp_buffer_destroy(gpu, &copy_b);
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

/* Shared benchmark machinery (bench/bench_common.h). */
#include "bench/bench_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

VkDeviceSize bench_ceiling_bytes = 1ull << 30;
hp_err bench_err;
hp_gpu *bench_gpu;
VkDevice bench_dev;
static VkCommandPool bench_pool;
VkCommandBuffer bench_cmd;
static VkFence bench_fence;
VkQueryPool bench_queries;
static uint32_t bench_max_queries;

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_begin(void)
{
    VK_CHECK(vkResetCommandPool(bench_dev, bench_pool, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_CHECK(vkBeginCommandBuffer(bench_cmd, &bi));
}

void bench_submit_and_wait(void)
{
    VK_CHECK(vkEndCommandBuffer(bench_cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &bench_cmd};
    VK_CHECK(vkQueueSubmit(hp_gpu_compute_queue(bench_gpu), 1, &si, bench_fence));
    VK_CHECK(vkWaitForFences(bench_dev, 1, &bench_fence, VK_TRUE, UINT64_MAX));
    VK_CHECK(vkResetFences(bench_dev, 1, &bench_fence));
}

void bench_barrier_all(void)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    vkCmdPipelineBarrier(bench_cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
}

/* Durations in ms of `runs` timestamp pairs. */
void bench_read_timestamps(uint32_t n, uint64_t *ts)
{
    VK_CHECK(vkGetQueryPoolResults(bench_dev, bench_queries, 0, n, n * sizeof(uint64_t), ts, sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
}

void bench_read_durations(uint32_t runs, double *ms)
{
    uint64_t *ts = calloc(2 * runs, sizeof(uint64_t));
    VK_CHECK(vkGetQueryPoolResults(bench_dev, bench_queries, 0, 2 * runs, 2 * runs * sizeof(uint64_t), ts, sizeof(uint64_t),
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    double period_ms = hp_gpu_get_info(bench_gpu)->timestamp_period_ns * 1e-6;
    for (uint32_t i = 0; i < runs; i++)
        ms[i] = (double)(ts[2 * i + 1] - ts[2 * i]) * period_ms;
    free(ts);
}


double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof(double), bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

summary bench_summarize(double *ms, uint32_t n)
{
    qsort(ms, n, sizeof(double), bench_cmp_double);
    return (summary){ms[n / 2], ms[n / 10], ms[(n * 9) / 10]};
}

/* Copy bandwidth: a bench_ceiling_bytes buffer to another, bytes read + written per second. */
static double bench_measure_copy_bandwidth(uint32_t runs, const hp_buffer *a, const hp_buffer *b, summary *s)
{
    const VkDeviceSize bytes = a->size;
    bench_begin();
    vkCmdFillBuffer(bench_cmd, a->buffer, 0, VK_WHOLE_SIZE, 0x3f800000u);
    bench_barrier_all();
    vkCmdResetQueryPool(bench_cmd, bench_queries, 0, 2 * runs);
    VkBufferCopy region = {.size = bytes};
    for (uint32_t i = 0; i < runs; i++) {
        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i);
        vkCmdCopyBuffer(bench_cmd, i % 2 ? b->buffer : a->buffer, i % 2 ? a->buffer : b->buffer, 1, &region);
        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i + 1);
        bench_barrier_all();
    }
    bench_submit_and_wait();
    double *ms = calloc(runs, sizeof(double));
    bench_read_durations(runs, ms);
    *s = bench_summarize(ms, runs);
    free(ms);
    return 2.0 * (double)bytes / (s->median * 1e-3);
}

/* A frame with the spread of a render: log-normal channels, deterministic. */
void bench_fill_frame(void *dst, hp_pixel_format format, uint64_t count)
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
        hp_cpu_store_pixel(dst, format, i, p);
    }
}

void bench_set_alpha(void *frame, hp_pixel_format format, uint64_t count, float alpha)
{
    for (uint64_t i = 0; i < count; i++) {
        float p[4];
        hp_cpu_load_pixel(frame, format, i, p);
        p[3] = alpha;
        hp_cpu_store_pixel(frame, format, i, p);
    }
}

bool bench_stats_match(const hp_lum_stats *g, const hp_lum_stats *c)
{
    return g->finite_pixels == c->finite_pixels && g->nonfinite_pixels == c->nonfinite_pixels && g->min == c->min &&
           g->max == c->max && fabs(g->log_average - c->log_average) <= 1e-4 * c->log_average &&
           memcmp(g->histogram, c->histogram, sizeof(g->histogram)) == 0;
}

static const uint32_t bench_spv_bandwidth[] =
#include "bench_bandwidth.spv.inc"
    ;


void bench_record_probe(const hp_compute *probe, const hp_buffer *src, const hp_buffer *dst, uint32_t groups)
{
    probe_push push = {.src = src->address, .dst = dst->address, .count = (uint32_t)(src->size / 16)};
    vkCmdBindPipeline(bench_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, probe->pipeline);
    vkCmdPushConstants(bench_cmd, probe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(bench_cmd, groups, 1, 1);
}

/* Shader bandwidth: MODE 0 copies src to dst, MODE 1 only reads src (shaders/bench_bandwidth.comp).
 * Returns bytes moved per second: read + written for a copy, read for a read. */
static double bench_measure_shader_bandwidth(const hp_compute *probe, bool copy, const hp_buffer *src, const hp_buffer *dst,
                                       uint32_t groups, uint32_t runs, summary *s)
{
    bench_begin();
    vkCmdResetQueryPool(bench_cmd, bench_queries, 0, 2 * runs);
    for (uint32_t i = 0; i < runs; i++) {
        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i);
        bench_record_probe(probe, src, dst, groups);
        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i + 1);
        bench_barrier_all();
    }
    bench_submit_and_wait();
    double *ms = calloc(runs, sizeof(double));
    bench_read_durations(runs, ms);
    *s = bench_summarize(ms, runs);
    free(ms);
    return (copy ? 2.0 : 1.0) * (double)src->size / (s->median * 1e-3);
}

/* Keeps the GPU busy for about `seconds` so it reaches its working clocks before anything is timed:
 * an idle NVIDIA GPU runs its memory and cores slowly and takes a while to ramp up. */
void bench_warm_up(double seconds, const hp_buffer *a, const hp_buffer *b)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        bench_begin();
        VkBufferCopy region = {.size = a->size < b->size ? a->size : b->size};
        for (int i = 0; i < 16; i++) {
            vkCmdCopyBuffer(bench_cmd, i % 2 ? b->buffer : a->buffer, i % 2 ? a->buffer : b->buffer, 1, &region);
            bench_barrier_all();
        }
        bench_submit_and_wait();
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
}


bool bench_parse_args(int argc, char **argv, const char *usage, uint32_t quick_runs, bench_args *a,
                      const char *const *extra, bool *extra_set)
{
    for (int i = 1; i < argc; i++) {
        bool known = false;
        for (size_t e = 0; extra && extra[e]; e++)
            if (strcmp(argv[i], extra[e]) == 0)
                extra_set[e] = known = true;
        if (known)
            continue;
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            a->runs = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            a->quick = true, a->runs = quick_runs;
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            a->device = argv[++i];
        else {
            fprintf(stderr, "usage: %s\n", usage);
            return false;
        }
    }
    return true;
}

void bench_init(const char *device, uint32_t max_queries) { bench_init_with(device, max_queries, false); }

void bench_init_with(const char *device, uint32_t max_queries, bool shader_clock)
{
    hp_log_set_level(HP_LOG_WARN);
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.device = device;
    cfg.capture_statistics = true;
    cfg.shader_clock = shader_clock;
    /* tests/bench_smoke.py runs a benchmark as a test: with the validation layer, as every test. */
    cfg.validation = getenv("HDRPOST_BENCH_VALIDATION") != NULL;
    CHECK(hp_gpu_create(&cfg, &bench_gpu, &bench_err) == HP_OK);
    bench_dev = hp_gpu_device(bench_gpu);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .queueFamilyIndex = hp_gpu_compute_family(bench_gpu)};
    VK_CHECK(vkCreateCommandPool(bench_dev, &pi, NULL, &bench_pool));
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = bench_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VK_CHECK(vkAllocateCommandBuffers(bench_dev, &ai, &bench_cmd));
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(bench_dev, &fi, NULL, &bench_fence));
    bench_max_queries = max_queries < 40 ? 40 : max_queries;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = bench_max_queries};
    VK_CHECK(vkCreateQueryPool(bench_dev, &qi, NULL, &bench_queries));

    const hp_gpu_info *gi = hp_gpu_get_info(bench_gpu);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
    printf("device: %s; driver: %s %s; Vulkan %u.%u.%u; subgroup %u; SMs %u; date %s\n\n", gi->device_name,
           gi->driver_name, gi->driver_info, VK_API_VERSION_MAJOR(gi->api_version), VK_API_VERSION_MINOR(gi->api_version),
           VK_API_VERSION_PATCH(gi->api_version), gi->subgroup_size, gi->sm_count, date);
}

int bench_shutdown(void)
{
    vkDestroyQueryPool(bench_dev, bench_queries, NULL);
    vkDestroyFence(bench_dev, bench_fence, NULL);
    vkDestroyCommandPool(bench_dev, bench_pool, NULL);
    hp_gpu_destroy(&bench_gpu);
    uint32_t messages = hp_gpu_validation_messages();
    if (messages)
        printf("validation layer: %u messages\n", messages);
    return messages ? 1 : 0;
}

void bench_probe_create(hp_compute *out, const char *name, bool copy, uint32_t workgroup_size, uint32_t fetches)
{
    const uint32_t spec[3] = {workgroup_size, copy ? 0u : 1u, fetches};
    hp_compute_desc desc = {.name = name, .spirv = bench_spv_bandwidth, .spirv_size = sizeof(bench_spv_bandwidth),
                            .push_constant_size = sizeof(probe_push), .spec_values = spec, .spec_count = 3};
    CHECK(hp_compute_create(bench_gpu, &desc, out, &bench_err) == HP_OK);
}

void bench_ceilings_begin(bench_ceilings *c, uint32_t runs, double warm_seconds, uint32_t resident_groups)
{
    memset(c, 0, sizeof(*c));
    c->runs = runs;
    CHECK(hp_buffer_create(bench_gpu, bench_ceiling_bytes, HP_MEM_DEVICE, "bench_copy_src", &c->a, &bench_err) ==
          HP_OK);
    CHECK(hp_buffer_create(bench_gpu, bench_ceiling_bytes, HP_MEM_DEVICE, "bench_copy_dst", &c->b, &bench_err) ==
          HP_OK);
    bench_probe_create(&c->probes[0], "bench_copy", true, 256, 4);
    bench_probe_create(&c->probes[1], "bench_read", false, 256, 4);
    bench_warm_up(warm_seconds, &c->a, &c->b);
    c->cmd_copy_before = bench_measure_copy_bandwidth(runs, &c->a, &c->b, &c->cmd_before);
    const uint32_t groups[] = {resident_groups, 2048, bench_grid(c->a.size / 16 / 1024)};
    summary ps;
    for (int i = 0; i < 3; i++) {
        double cp = bench_measure_shader_bandwidth(&c->probes[0], true, &c->a, &c->b, groups[i], runs, &ps);
        double rd = bench_measure_shader_bandwidth(&c->probes[1], false, &c->a, &c->b, groups[i], runs, &ps);
        printf("shader probe, %u workgroups of 256 x 4 fetches: copy %.1f GB/s (read + written), read %.1f GB/s\n",
               groups[i], cp / 1e9, rd / 1e9);
        c->shader_copy = fmax(c->shader_copy, cp);
        c->shader_read = fmax(c->shader_read, rd);
    }
    printf("\n");
}

double bench_read_floor_ms(bench_ceilings *c, const hp_buffer *buffer, uint32_t resident_groups)
{
    double best = 1e30;
    const uint32_t grids[] = {resident_groups, (uint32_t)((buffer->size / 16 + 1023) / 1024)};
    summary ps;
    for (int i = 0; i < 2; i++) {
        bench_measure_shader_bandwidth(&c->probes[1], false, buffer, &c->b, grids[i], c->runs, &ps);
        best = fmin(best, ps.median);
    }
    return best;
}

double bench_ceilings_end(bench_ceilings *c)
{
    c->cmd_copy_after = bench_measure_copy_bandwidth(c->runs, &c->a, &c->b, &c->cmd_after);
    double copy_bw = fmax(fmax(c->cmd_copy_before, c->cmd_copy_after), c->shader_copy);
    printf("\ncopy bandwidth, %.0f MiB, bytes read + written: vkCmdCopyBuffer %.1f GB/s before and %.1f GB/s after "
           "(median %.3f / %.3f ms); shader copy %.1f GB/s. Ceiling used: %.1f GB/s. Read ceiling (shader read "
           "of the same): %.1f GB/s.\n",
           (double)bench_ceiling_bytes / (1 << 20), c->cmd_copy_before / 1e9, c->cmd_copy_after / 1e9, c->cmd_before.median, c->cmd_after.median,
           c->shader_copy / 1e9, copy_bw / 1e9, c->shader_read / 1e9);
    hp_compute_destroy(bench_gpu, &c->probes[0]);
    hp_compute_destroy(bench_gpu, &c->probes[1]);
    hp_buffer_destroy(bench_gpu, &c->a);
    hp_buffer_destroy(bench_gpu, &c->b);
    return copy_bw;
}

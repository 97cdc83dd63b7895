/* The luminance reduction on the GPU against the CPU reference in double precision.
 *
 * Tolerances (issue 2): log-average relative error <= 1e-4; mean <= 1e-4; min and max exact (both sides
 * compute the same fp32 luminance, see hp_cpu_luminance); counts and every histogram bin exact.
 * Sizes from 1x1 to 4096x4096, RGBA16F and RGBA32F, both variants, on random log-normal, constant, black
 * and hostile (NaN, infinite, negative) frames. The validation layer is on; any message fails. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "hp_shared.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/frame_graph.h"
#include "gpu_test.h"
#include "tap.h"

/* --- Deterministic data --------------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1p-53; }

static double rng_normal(void) /* Box-Muller */
{
    double u1 = rng_uniform(), u2 = rng_uniform();
    return sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
}

typedef enum data_kind { DATA_LOGNORMAL, DATA_CONSTANT, DATA_BLACK, DATA_HOSTILE, DATA_KIND_COUNT } data_kind;
static const char *const data_names[] = {"lognormal", "constant", "black", "hostile"};

static void make_pixel(data_kind kind, float p[4])
{
    switch (kind) {
    case DATA_LOGNORMAL: /* a render's spread: ~12 stops either side of 0.25 */
        for (int c = 0; c < 3; c++)
            p[c] = (float)exp(rng_normal() * 2.5 - 1.4);
        break;
    case DATA_CONSTANT:
        p[0] = 0.5f, p[1] = 0.25f, p[2] = 0.125f;
        break;
    case DATA_BLACK:
        p[0] = p[1] = p[2] = 0.0f;
        break;
    case DATA_HOSTILE: {
        for (int c = 0; c < 3; c++)
            p[c] = (float)exp(rng_normal() * 2.5 - 1.4);
        double u = rng_uniform();
        int c = (int)(rng_next() % 3);
        if (u < 0.01)
            p[c] = NAN;
        else if (u < 0.02)
            p[c] = INFINITY;
        else if (u < 0.03)
            p[c] = -INFINITY;
        else if (u < 0.08)
            p[c] = -p[c]; /* a negative channel: clamped to 0 */
        else if (u < 0.10)
            p[0] = -p[0], p[1] = -0.0f, p[2] = -p[2]; /* all non-positive: Y = 0 */
        else if (u < 0.11)
            p[0] = p[1] = p[2] = 0.0f; /* black inside a bright frame: the delta matters */
        break;
    }
    default:
        break;
    }
    p[3] = 1.0f;
}

static void fill_frame(void *dst, hp_pixel_format format, uint64_t count, data_kind kind, uint64_t seed)
{
    rng_state = seed;
    for (uint64_t i = 0; i < count; i++) {
        float p[4];
        make_pixel(kind, p);
        hp_cpu_store_pixel(dst, format, i, p);
    }
}

/* --- Comparison ----------------------------------------------------------------------------------- */

static double rel_err(double got, double want)
{
    if (got == want)
        return 0.0;
    return fabs(got - want) / fmax(fabs(want), 1e-30);
}

static bool compare(const hp_lum_stats *gpu, const hp_lum_stats *cpu, char *why, size_t len)
{
    if (gpu->finite_pixels != cpu->finite_pixels || gpu->nonfinite_pixels != cpu->nonfinite_pixels) {
        snprintf(why, len, "counts: gpu finite %llu nonfinite %llu, cpu %llu %llu",
                 (unsigned long long)gpu->finite_pixels, (unsigned long long)gpu->nonfinite_pixels,
                 (unsigned long long)cpu->finite_pixels, (unsigned long long)cpu->nonfinite_pixels);
        return false;
    }
    if (gpu->min != cpu->min || gpu->max != cpu->max) {
        snprintf(why, len, "min/max: gpu %.9g %.9g, cpu %.9g %.9g", gpu->min, gpu->max, cpu->min, cpu->max);
        return false;
    }
    if (rel_err(gpu->log_average, cpu->log_average) > 1e-4) {
        snprintf(why, len, "log-average: gpu %.9g cpu %.9g (rel %.3g)", gpu->log_average, cpu->log_average,
                 rel_err(gpu->log_average, cpu->log_average));
        return false;
    }
    if (rel_err(gpu->mean, cpu->mean) > 1e-4) {
        snprintf(why, len, "mean: gpu %.9g cpu %.9g", gpu->mean, cpu->mean);
        return false;
    }
    for (int b = 0; b < 256; b++) {
        if (gpu->histogram[b] != cpu->histogram[b]) {
            snprintf(why, len, "histogram bin %d: gpu %u cpu %u", b, gpu->histogram[b], cpu->histogram[b]);
            return false;
        }
    }
    snprintf(why, len, "log-average %.6g (rel err %.2g), mean %.6g, min %.6g, max %.6g", gpu->log_average,
             rel_err(gpu->log_average, cpu->log_average), gpu->mean, gpu->min, gpu->max);
    return true;
}

typedef struct size2 {
    uint32_t w, h;
} size2;

static bool run_frame(hp_frame_graph *graph, const hp_frame_desc *desc, data_kind kind, const hp_reduce_params *rp,
                      hp_lum_stats *stats, hp_err *err)
{
    void *pixels;
    if (hp_frame_graph_begin(graph, desc, &pixels, err) != HP_OK)
        return false;
    fill_frame(pixels, desc->format, (uint64_t)desc->width * desc->height, kind, 1234 + desc->width * 31 + desc->height);
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fp.analyze_only = true;
    fp.params.analysis.variant = rp->variant;
    fp.params.analysis.histogram_min_log2 = rp->hist_min_log2;
    fp.params.analysis.histogram_max_log2 = rp->hist_max_log2;
    hp_frame_result res;
    if (hp_frame_graph_run(graph, &fp, &res, err) != HP_OK)
        return false;
    *stats = res.stats;
    return true;
}

/* --- Other launch shapes and code paths -------------------------------------------------------------
 * The frame graph runs the default shape; these run the stage directly with the others the benchmark
 * compares (shaders/reduce.comp: no prefetch, odd fetch counts, contiguous ranges, the polynomial bin
 * guess, more partials than threads in the final combine), so every path is checked here too. */

/* Uploads `pixels`, runs the stage twice (the second run checks that the scratch buffer reset itself)
 * and decodes the second run's stats. */
static bool direct_reduce(gpu_test_cmd *d, hp_reduce *reduce, const void *pixels, uint64_t count, hp_pixel_format format,
                          const hp_reduce_params *rp, hp_lum_stats *out, hp_err *err)
{
    VkDeviceSize bytes = count * hp_pixel_format_size(format);
    hp_buffer staging = {0}, input = {0}, stats = {0}, scratch = {0}, readback = {0};
    bool ok = hp_buffer_create(d->gpu, bytes, HP_MEM_UPLOAD, "test_staging", &staging, err) == HP_OK &&
              hp_buffer_create(d->gpu, (bytes + 15) & ~15ull, HP_MEM_DEVICE, "test_frame", &input, err) == HP_OK &&
              hp_buffer_create(d->gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "test_stats", &stats, err) == HP_OK &&
              hp_buffer_create(d->gpu, hp_reduce_scratch_size(count), HP_MEM_DEVICE, "test_scratch", &scratch, err) ==
                  HP_OK &&
              hp_buffer_create(d->gpu, HP_STATS_SIZE, HP_MEM_READBACK, "test_readback", &readback, err) == HP_OK;
    if (ok) {
        memcpy(staging.mapped, pixels, bytes);
        hp_buffer_flush(d->gpu, &staging);
        VkDevice dev = hp_gpu_device(d->gpu);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        ok = vkResetCommandPool(dev, d->pool, 0) == VK_SUCCESS && vkBeginCommandBuffer(d->cmd, &bi) == VK_SUCCESS;
        if (ok) {
            VkBufferCopy up = {.size = bytes};
            vkCmdCopyBuffer(d->cmd, staging.buffer, input.buffer, 1, &up);
            hp_reduce_init_scratch(reduce, d->cmd, &scratch);
            gpu_test_barrier(d->cmd);
            hp_reduce_io io = {.pixels = input.address, .pixel_count = count, .format = format, .stats = &stats,
                               .scratch = &scratch};
            for (int run = 0; run < 2; run++) {
                hp_reduce_record(reduce, d->cmd, &io, rp);
                gpu_test_barrier(d->cmd);
            }
            VkBufferCopy down = {.size = HP_STATS_SIZE};
            vkCmdCopyBuffer(d->cmd, stats.buffer, readback.buffer, 1, &down);
            gpu_test_barrier(d->cmd);
            VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                               .pCommandBuffers = &d->cmd};
            ok = vkEndCommandBuffer(d->cmd) == VK_SUCCESS &&
                 vkQueueSubmit(hp_gpu_compute_queue(d->gpu), 1, &si, d->fence) == VK_SUCCESS &&
                 vkWaitForFences(dev, 1, &d->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS &&
                 vkResetFences(dev, 1, &d->fence) == VK_SUCCESS;
            if (!ok)
                snprintf(err->message, sizeof(err->message), "command buffer failed");
        }
        if (ok) {
            hp_buffer_invalidate(d->gpu, &readback);
            hp_reduce_decode_stats(readback.mapped, count, out);
        }
    }
    hp_buffer_destroy(d->gpu, &staging);
    hp_buffer_destroy(d->gpu, &input);
    hp_buffer_destroy(d->gpu, &stats);
    hp_buffer_destroy(d->gpu, &scratch);
    hp_buffer_destroy(d->gpu, &readback);
    return ok;
}

/* A frame with the pixels on either side of every edge of [lo, hi] (as the edge check in main). */
static void fill_edge_pixels(float *rgba, double lo, double hi)
{
    float edges[256];
    hp_reduce_hist_edges(lo, hi, edges);
    for (int k = 1; k < 256; k++) {
        float g = edges[k] / (float)HP_LUMA_G, y;
        float p[4] = {0, g, 0, 1};
        for (int step = 0; step < 64; step++) {
            p[1] = g;
            hp_cpu_luminance(p, &y);
            if (y >= edges[k])
                break;
            g = nextafterf(g, INFINITY);
        }
        float g_hi = g;
        for (int step = 0; step < 64; step++) {
            p[1] = g;
            hp_cpu_luminance(p, &y);
            if (y < edges[k])
                break;
            g = nextafterf(g, 0.0f);
        }
        float below[4] = {0, g, 0, 1}, above[4] = {0, g_hi, 0, 1};
        memcpy(rgba + (size_t)(2 * (k - 1)) * 4, below, 16);
        memcpy(rgba + (size_t)(2 * (k - 1) + 1) * 4, above, 16);
    }
}

static void check_other_shapes(hp_gpu *gpu)
{
    static const hp_reduce_config shapes[] = {
        {.workgroup_size = 64, .fetches = 1, .fetches_fp16 = 1, .max_groups = 7},
        {.workgroup_size = 128, .fetches = 3, .fetches_fp16 = 5, .max_groups = 3, .prefetch = true},
        {.workgroup_size = 256, .fetches = 2, .fetches_fp16 = 16, .max_groups = 5, .prefetch = true, .split = true},
        {.workgroup_size = 512, .fetches = 4, .fetches_fp16 = 4, .max_groups = 2, .prefetch = true, .bin_guess = 1},
        {.workgroup_size = 64, .fetches = 1, .fetches_fp16 = 1, .max_groups = 2048, .prefetch = true},
    };
    gpu_test_cmd d;
    if (!gpu_test_cmd_init(&d, gpu)) {
        tap_ok(false, "command buffer for the launch shapes");
        return;
    }
    /* The hostile frame at an odd size (an RGBA16F frame's last item holds one pixel), and the pixels
     * around every edge of a range. */
    const uint32_t w = 1021, h = 769;
    uint64_t count = (uint64_t)w * h;
    void *hostile[2];
    hp_lum_stats want_hostile[2];
    for (int f = 0; f < 2; f++) {
        hostile[f] = malloc(count * hp_pixel_format_size((hp_pixel_format)f));
        if (!hostile[f])
            exit(tap_bail("out of memory"));
        fill_frame(hostile[f], (hp_pixel_format)f, count, DATA_HOSTILE, 99);
        hp_cpu_reduce(hostile[f], (hp_pixel_format)f, count, -16, 16, &want_hostile[f]);
    }
    float edge_frame[510 * 4];
    fill_edge_pixels(edge_frame, -3, 2);
    hp_lum_stats want_edges;
    hp_cpu_reduce(edge_frame, HP_PIXEL_RGBA32F, 510, -3, 2, &want_edges);

    for (size_t c = 0; c < sizeof(shapes) / sizeof(shapes[0]); c++) {
        hp_err err = {0};
        hp_reduce *reduce = NULL;
        if (hp_reduce_create(gpu, &shapes[c], &reduce, &err) != HP_OK) {
            tap_ok(false, "create launch shape %zu: %s", c, err.message);
            continue;
        }
        const hp_reduce_config *sh = hp_reduce_get_config(reduce);
        char name[128];
        snprintf(name, sizeof(name), "%u x %u/%u, %u groups%s%s%s", sh->workgroup_size, sh->fetches, sh->fetches_fp16,
                 sh->max_groups, sh->prefetch ? ", prefetch" : "", sh->split ? ", split" : "",
                 sh->bin_guess ? ", polynomial bins" : "");
        for (int v = 0; v < 2; v++) {
            hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
            rp.variant = (hp_reduce_variant)v;
            for (int f = 0; f < 2; f++) {
                hp_lum_stats got;
                char why[1200] = "";
                bool ok = direct_reduce(&d, reduce, hostile[f], count, (hp_pixel_format)f, &rp, &got, &err);
                ok = ok ? compare(&got, &want_hostile[f], why, sizeof(why)) : (snprintf(why, sizeof(why), "%s", err.message), false);
                tap_ok(ok, "%s, %s: %ux%u %s hostile: %s", name, hp_reduce_variant_name(rp.variant), w, h,
                       hp_pixel_format_name((hp_pixel_format)f), why);
            }
            rp.hist_min_log2 = -3, rp.hist_max_log2 = 2;
            hp_lum_stats got;
            char why[1200] = "";
            bool ok = direct_reduce(&d, reduce, edge_frame, 510, HP_PIXEL_RGBA32F, &rp, &got, &err);
            ok = ok ? compare(&got, &want_edges, why, sizeof(why)) : (snprintf(why, sizeof(why), "%s", err.message), false);
            tap_ok(ok, "%s, %s: pixels on either side of all 255 edges of [-3, 2]: %s", name,
                   hp_reduce_variant_name(rp.variant), why);
        }
        hp_reduce_destroy(&reduce);
    }
    /* A range so narrow (a thousandth of a stop) that the guess's error bound passes half a bin: every
     * pixel is settled exactly, some from a guess bins away. */
    {
        hp_err err = {0};
        hp_reduce *reduce = NULL;
        bool ok = hp_reduce_create(gpu, NULL, &reduce, &err) == HP_OK;
        const uint32_t nw = 33, nh = 17;
        float px[33 * 17 * 4];
        for (uint32_t i = 0; i < nw * nh; i++) {
            float v = 0.5f * (1.0f + (float)i * 0x1p-20f); /* log2 in [-1, -1 + 0.00077] */
            float p[4] = {v, v, v, 1};
            memcpy(px + 4 * i, p, 16);
        }
        hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
        rp.hist_min_log2 = -1.0, rp.hist_max_log2 = -0.999;
        hp_lum_stats want, got;
        hp_cpu_reduce(px, HP_PIXEL_RGBA32F, nw * nh, rp.hist_min_log2, rp.hist_max_log2, &want);
        char why[1200] = "";
        int occupied = 0;
        for (int b = 0; b < 256; b++)
            occupied += want.histogram[b] != 0;
        ok = ok && direct_reduce(&d, reduce, px, nw * nh, HP_PIXEL_RGBA32F, &rp, &got, &err);
        ok = ok ? compare(&got, &want, why, sizeof(why)) : (snprintf(why, sizeof(why), "%s", err.message), false);
        tap_ok(ok && occupied > 100, "range [-1, -0.999] (%d bins occupied): every pixel settled exactly: %s", occupied, why);
        hp_reduce_destroy(&reduce);
    }
    /* Another RGB space's Y row (issue 17): an ACEScg frame's luminance weighs its channels by AP1's row,
     * not Rec.709's. The same fp32 row on both sides, so counts and bins stay exact; and the two rows must
     * give different statistics, or this would not show that the row reaches the shader. */
    {
        hp_err err = {0};
        hp_reduce *reduce = NULL;
        bool ok = hp_reduce_create(gpu, NULL, &reduce, &err) == HP_OK;
        hp_input_color ap1;
        ok = ok && hp_input_color_make(hp_colorspace_chromaticities(HP_COLORSPACE_ACESCG), HP_OUTPUT_SRGB, &ap1, &err) == HP_OK;
        const uint64_t n = 4099;
        float *px = malloc(n * 16);
        fill_frame(px, HP_PIXEL_RGBA32F, n, DATA_LOGNORMAL, 17);
        hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
        hp_input_color_luma(&ap1, HP_OUTPUT_SRGB, rp.luma);
        hp_lum_stats want, want709, got;
        hp_cpu_reduce_row(px, HP_PIXEL_RGBA32F, n, rp.hist_min_log2, rp.hist_max_log2, rp.luma, &want);
        hp_cpu_reduce(px, HP_PIXEL_RGBA32F, n, rp.hist_min_log2, rp.hist_max_log2, &want709);
        char why[1200] = "";
        ok = ok && direct_reduce(&d, reduce, px, n, HP_PIXEL_RGBA32F, &rp, &got, &err);
        ok = ok ? compare(&got, &want, why, sizeof(why)) : (snprintf(why, sizeof(why), "%s", err.message), false);
        tap_ok(ok && want.log_average != want709.log_average,
               "AP1's Y row (%.6f, %.6f, %.6f): GPU == CPU, log-average %.6f against Rec.709's %.6f: %s",
               (double)rp.luma[0], (double)rp.luma[1], (double)rp.luma[2], want.log_average, want709.log_average, why);
        free(px);
        hp_reduce_destroy(&reduce);
    }
    for (int f = 0; f < 2; f++)
        free(hostile[f]);
    gpu_test_cmd_destroy(&d);
}

int main(void)
{
    hp_err err = {0};
    hp_gpu *gpu = NULL;
    hp_frame_graph *graph = NULL;
    int bail = gpu_test_open(&gpu, &graph, &err);
    if (bail)
        return bail;
    tap_diag("device: %s", hp_gpu_get_info(gpu)->device_name);

    /* Half conversion used to build fp16 frames: exact round trip of every half. */
    {
        int bad = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            float f = hp_half_to_float((uint16_t)h);
            if (!isnan(f) && hp_float_to_half(f) != h)
                bad++;
        }
        tap_ok(bad == 0 && hp_float_to_half(65519.0f) == 0x7bff && hp_float_to_half(65520.0f) == 0x7c00,
               "half <-> float round-trips all 65536 halves (%d mismatches)", bad);
    }

    /* Oracle of algorithms.md 9.7: 16 luminance samples, histogram over [-8, 12]. Pixels are grey
     * (R = G = B = v), whose Y is v within fp32 rounding. */
    {
        static const float samples[16] = {0, 0.01f, 0.05f, 0.1f, 0.18f, 0.18f, 0.25f, 0.4f,
                                          0.5f, 1, 1.5f, 2, 4, 8, 16, 1000};
        static const int oracle_bins[][2] = {{0, 1},   {18, 1},  {47, 1},  {60, 1},  {71, 2},
                                             {77, 1},  {85, 1},  {89, 1},  {102, 1}, {110, 1},
                                             {115, 1}, {128, 1}, {140, 1}, {153, 1}, {229, 1}};
        hp_frame_desc desc = {.width = 4, .height = 4, .format = HP_PIXEL_RGBA32F};
        void *pixels;
        hp_frame_params fp;
        hp_frame_params_defaults(&fp);
        fp.analyze_only = true;
        fp.params.analysis.histogram_min_log2 = -8;
        fp.params.analysis.histogram_max_log2 = 12;
        for (int variant = 0; variant < 2; variant++) {
            fp.params.analysis.variant = (uint32_t)variant;
            hp_frame_result res = {0};
            bool ran = hp_frame_graph_begin(graph, &desc, &pixels, &err) == HP_OK;
            if (ran) {
                for (int i = 0; i < 16; i++) {
                    float p[4] = {samples[i], samples[i], samples[i], 1};
                    memcpy((uint8_t *)pixels + i * 16, p, 16);
                }
                ran = hp_frame_graph_run(graph, &fp, &res, &err) == HP_OK;
            }
            uint32_t want[256] = {0};
            for (size_t i = 0; i < sizeof(oracle_bins) / sizeof(oracle_bins[0]); i++)
                want[oracle_bins[i][0]] = (uint32_t)oracle_bins[i][1];
            bool hist_ok = ran && memcmp(want, res.stats.histogram, sizeof(want)) == 0;
            tap_ok(ran && rel_err(res.stats.log_average, 0.427534403) < 1e-5 &&
                       rel_err(res.stats.mean, 64.635625) < 1e-5 && res.stats.min == 0 &&
                       rel_err(res.stats.max, 1000) < 1e-6 && hist_ok && res.stats.finite_pixels == 16,
                   "%s: algorithms.md 9.7 oracle (log-average %.9g want 0.427534403, mean %.9g want 64.635625, "
                   "histogram %s)", hp_reduce_variant_name((hp_reduce_variant)variant), res.stats.log_average,
                   res.stats.mean, hist_ok ? "matches" : "differs");
        }
    }

    /* Every bin edge from both sides: for each of the 255 edges, the pixel (0, g, 0) whose fp32
     * luminance is the largest value below the edge and the one whose luminance is the smallest at or
     * above it. The GPU settles such pixels against the exact edges; any slip shows as a count off by one. */
    for (int range = 0; range < 2; range++) {
        double lo = range ? -3.0 : -16.0, hi = range ? 2.0 : 16.0;
        float edges[256];
        hp_reduce_hist_edges(lo, hi, edges);
        hp_frame_desc desc = {.width = 510, .height = 1, .format = HP_PIXEL_RGBA32F};
        void *pixels;
        bool ok = hp_frame_graph_begin(graph, &desc, &pixels, &err) == HP_OK;
        for (int k = 1; ok && k < 256; k++) {
            float g = edges[k] / (float)HP_LUMA_G;
            float y;
            float rgba[4] = {0, g, 0, 1};
            /* Walk g by ulps until Y(g) >= edge, then back until Y(g) < edge. */
            for (int step = 0; step < 64; step++) {
                rgba[1] = g;
                hp_cpu_luminance(rgba, &y);
                if (y >= edges[k])
                    break;
                g = nextafterf(g, INFINITY);
            }
            float g_hi = g;
            for (int step = 0; step < 64; step++) {
                rgba[1] = g;
                hp_cpu_luminance(rgba, &y);
                if (y < edges[k])
                    break;
                g = nextafterf(g, 0.0f);
            }
            float below[4] = {0, g, 0, 1}, above[4] = {0, g_hi, 0, 1};
            memcpy((uint8_t *)pixels + (size_t)(2 * (k - 1)) * 16, below, 16);
            memcpy((uint8_t *)pixels + (size_t)(2 * (k - 1) + 1) * 16, above, 16);
        }
        hp_lum_stats want;
        if (ok)
            hp_cpu_reduce(pixels, desc.format, 510, lo, hi, &want);
        /* Each begin hands out the staging of the next frame in flight: the frame is copied in every time. */
        uint8_t frame[510 * 16];
        if (ok)
            memcpy(frame, pixels, sizeof(frame));
        for (int v = 0; ok && v < 2; v++) {
            hp_frame_params fp;
            hp_frame_params_defaults(&fp);
            fp.analyze_only = true;
            fp.params.analysis.variant = (uint32_t)v;
            fp.params.analysis.histogram_min_log2 = lo;
            fp.params.analysis.histogram_max_log2 = hi;
            hp_frame_result res;
            char why[1200] = "";
            bool ran = hp_frame_graph_begin(graph, &desc, &pixels, &err) == HP_OK;
            if (ran)
                memcpy(pixels, frame, sizeof(frame));
            ran = ran && hp_frame_graph_run(graph, &fp, &res, &err) == HP_OK;
            bool same = ran && compare(&res.stats, &want, why, sizeof(why));
            int occupied = 0;
            for (int b = 0; b < 256; b++)
                occupied += want.histogram[b] != 0;
            tap_ok(same && occupied == 256, "%s, range [%g, %g]: pixels on either side of all 255 edges land "
                   "in the exact bins (%d bins occupied): %s", hp_reduce_variant_name((hp_reduce_variant)v), lo, hi,
                   occupied, ran ? why : err.message);
        }
    }

    static const size2 sizes[] = {{1, 1}, {1, 7}, {7, 1}, {33, 17}, {1021, 769}, {1920, 1080}, {4096, 4096}};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        bool large = (uint64_t)sizes[s].w * sizes[s].h >= 1920u * 1080u;
        for (int f = 0; f < 2; f++) {
            for (int k = 0; k < DATA_KIND_COUNT; k++) {
                /* Constant and black frames are cheap to get right at any size and slow on lavapipe at
                 * 4K; they run up to 1021x769 and at 1920x1080. */
                if ((k == DATA_CONSTANT || k == DATA_BLACK) && sizes[s].w == 4096)
                    continue;
                hp_frame_desc desc = {.width = sizes[s].w, .height = sizes[s].h, .format = (hp_pixel_format)f};
                uint64_t count = (uint64_t)desc.width * desc.height;
                /* The CPU reference reads its own copy of the frame, built from the same seed. */
                void *copy = malloc(count * hp_pixel_format_size(desc.format));
                if (!copy)
                    return tap_bail("out of memory");
                fill_frame(copy, desc.format, count, (data_kind)k, 1234 + desc.width * 31 + desc.height);
                hp_lum_stats want;
                hp_cpu_reduce(copy, desc.format, count, -16, 16, &want);
                free(copy);
                for (int v = 0; v < 2; v++) {
                    hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
                    rp.variant = (hp_reduce_variant)v;
                    hp_lum_stats got;
                    char why[1200] = "";
                    bool ok = run_frame(graph, &desc, (data_kind)k, &rp, &got, &err);
                    if (!ok)
                        snprintf(why, sizeof(why), "run failed: %s", err.message);
                    else
                        ok = compare(&got, &want, why, sizeof(why));
                    tap_ok(ok, "%ux%u %s %s %s: %s", desc.width, desc.height, hp_pixel_format_name(desc.format),
                           data_names[k], hp_reduce_variant_name(rp.variant), why);
                }
                (void)large;
            }
        }
    }

    /* Resources for a size are made once: a second frame of a size already seen allocates nothing. */
    {
        hp_frame_desc desc = {.width = 33, .height = 17, .format = HP_PIXEL_RGBA16F};
        hp_lum_stats got;
        hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
        run_frame(graph, &desc, DATA_LOGNORMAL, &rp, &got, &err);
        uint32_t before = hp_gpu_buffers_created(gpu);
        bool ok = run_frame(graph, &desc, DATA_LOGNORMAL, &rp, &got, &err) &&
                  run_frame(graph, &desc, DATA_HOSTILE, &rp, &got, &err);
        uint32_t after = hp_gpu_buffers_created(gpu);
        tap_ok(ok && after == before, "repeated frame size allocates no buffer (%u before, %u after)", before, after);
    }

    /* A histogram range out of bounds is refused with a message naming it. */
    {
        hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
        rp.hist_min_log2 = 3, rp.hist_max_log2 = 2;
        hp_err e = {0};
        tap_ok(hp_reduce_params_check(&rp, &e) == HP_ERR_INVALID_ARGUMENT && strstr(e.message, "max_log2"),
               "an empty histogram range is refused: %s", e.message);
        hp_frame_desc big = {.width = 16385, .height = 2, .format = HP_PIXEL_RGBA32F};
        tap_ok(hp_frame_desc_check(&big, &e) == HP_ERR_TOO_LARGE && strstr(e.message, "16385"),
               "a frame over 16384 pixels wide is refused: %s", e.message);
    }

    check_other_shapes(gpu);

    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    uint32_t messages = hp_gpu_validation_messages();
    tap_ok(messages == 0, "validation layer reported nothing (%u messages)", messages);
    return tap_done();
}

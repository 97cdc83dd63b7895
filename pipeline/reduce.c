/* The luminance reduction stage: pipelines, launch shape and the host view of its results. */
#include "pipeline/reduce.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "hp_shared.h"

static const uint32_t spv_single[] =
#include "reduce_single.spv.inc"
    ;
static const uint32_t spv_partial[] =
#include "reduce_partial.spv.inc"
    ;
static const uint32_t spv_final[] =
#include "reduce_final.spv.inc"
    ;
/* The single dispatch with its workgroups' timeline (benchmarks only: hp_reduce_config.timeline). */
static const uint32_t spv_timeline[] =
#include "reduce_timeline.spv.inc"
    ;

/* Push constants; layout table in shaders/reduce.comp. */
struct reduce_push {
    VkDeviceAddress pixels;
    VkDeviceAddress stats;
    VkDeviceAddress scratch;
    uint32_t pixel_count;
    uint32_t group_count;
    float hist_min_log2;
    float hist_max_log2;
    float hist_a;
    float hist_b;
    float hist_near;
    float luma[3];
};
_Static_assert(sizeof(struct reduce_push) == 64, "push constant layout drifted from reduce.comp");
_Static_assert(offsetof(struct reduce_push, pixel_count) == 24, "push constant layout drifted");
_Static_assert(offsetof(struct reduce_push, hist_a) == 40, "push constant layout drifted");
_Static_assert(offsetof(struct reduce_push, hist_near) == 48, "push constant layout drifted");
_Static_assert(offsetof(struct reduce_push, luma) == 52, "push constant layout drifted");

/* Error bound of the shader's log2 guess for the bin guess `mode` (reduce.comp, guess_log2), in log2
 * units, for |log2 Y| <= l. Mode 0, the log2 instruction: the Vulkan spec ("Precision and Operation of
 * SPIR-V Instructions") allows absolute 2^-21 inside [0.5, 2] and 3 ulp outside. Mode 1, the polynomial:
 * the fit's 1.26e-5, about 2e-6 for the float coefficients and the five roundings of Horner's scheme in
 * [1, 2), and half an ulp for adding the exponent. */
static double guess_log2_error(uint32_t mode, double l)
{
    if (mode == 1)
        return 1.26e-5 + 2e-6 + l * 0x1p-24;
    return fmax(0x1p-21, 3.0 * l * 0x1p-23);
}

/* The shader's bin position w = clamp(log2(Y) * a + b, 0, 255), with a = 254 / range and b = 0.5 - min * a,
 * puts bin k at w in [k - 0.5, k + 0.5) (hp_shared.h). It is rounded to the nearest integer for the guess;
 * a pixel whose w lies closer than the guess's error to a half-integer is settled against the exact fp32
 * edges instead. This returns the threshold on |w - round(w)| above which the shader settles. Error terms,
 * in bins: the log2 guess times a; the float roundings of a and b (2^-24 relative each), of the product
 * and of the sum (the multiply-add may round twice); the rounding of each edge to a float (half an ulp,
 * 2^-24 / ln 2 in log2 units). Twice their sum, plus 2^-20: about 1.8e-4 bins at the default range, so
 * about 4 pixels in 10^4 are settled. A narrow range makes the band wide; past half a bin every pixel
 * is settled, which is exact and merely slower. */
static float near_threshold(double min_log2, double max_log2, uint32_t mode)
{
    double range = max_log2 - min_log2;
    double a = 254.0 / range;
    double b = 0.5 - min_log2 * a;
    double l = fmax(fabs(min_log2), fabs(max_log2)) + 1.0; /* |log2 Y| of a pixel near an edge */
    double err = a * guess_log2_error(mode, l) + (2.0 * a * l + fabs(b) + 255.0) * 0x1p-24 +
                 a * 0x1p-24 / 0.6931471805599453;
    double band = 2.0 * err + 0x1p-20;
    return band >= 0.5 ? -1.0f : (float)(0.5 - band);
}

/* Pixel counts fit the shader's 32-bit indices with room: 16384^2 = 2^28 pixels, and the grid-stride
 * loop's base + stride stays below 2^28 + max_groups * workgroup_size * fetches < 2^32. */
#define HP_MAX_PIXELS (16384ull * 16384ull)
_Static_assert(HP_MAX_PIXELS + (uint64_t)HP_REDUCE_MAX_GROUPS * 1024 * 16 < (1ull << 32),
               "32-bit pixel indices would overflow");
/* Counts of one bin or of all finite pixels fit a uint. */
_Static_assert(HP_MAX_PIXELS <= UINT32_MAX, "pixel counts must fit 32 bits");

struct hp_reduce {
    hp_gpu *gpu;
    hp_reduce_config config;
    hp_compute single[2];  /* by hp_pixel_format */
    hp_compute partial[2]; /* by hp_pixel_format */
    hp_compute final;
    /* Which range each scratch buffer's edges hold, so they are uploaded only when it changes. */
    struct {
        VkBuffer buffer;
        double min, max;
    } scratch_edges[8];
    double edges_min, edges_max; /* the range r->edges was computed for */
    float edges[HP_HIST_BINS];
};

size_t hp_pixel_format_size(hp_pixel_format format) { return format == HP_PIXEL_RGBA16F ? 8 : 16; }

const char *hp_pixel_format_name(hp_pixel_format format)
{
    return format == HP_PIXEL_RGBA16F ? "rgba16f" : "rgba32f";
}

const char *hp_reduce_variant_name(hp_reduce_variant variant)
{
    return variant == HP_REDUCE_TWO_PASS ? "two_pass" : "single_pass";
}

int hp_reduce_variant_parse(const char *name)
{
    if (name && strcmp(name, "single_pass") == 0)
        return HP_REDUCE_SINGLE_PASS;
    if (name && strcmp(name, "two_pass") == 0)
        return HP_REDUCE_TWO_PASS;
    return -1;
}

hp_code hp_reduce_params_check(const hp_reduce_params *p, hp_err *err)
{
    if (p->variant != HP_REDUCE_SINGLE_PASS && p->variant != HP_REDUCE_TWO_PASS)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "reduce.variant must be single_pass or two_pass");
    if (!(p->hist_min_log2 >= -64.0 && p->hist_min_log2 <= 63.0))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "histogram min_log2 %g is outside [-64, 63]", p->hist_min_log2);
    if (!(p->hist_max_log2 > p->hist_min_log2 && p->hist_max_log2 <= 64.0))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "histogram max_log2 %g must be in (min_log2 = %g, 64]",
                       p->hist_max_log2, p->hist_min_log2);
    /* Any RGB space's Y row is a positive mix (hp_rgb_to_xyz refuses white outside the primaries' triangle
     * only; a primary can have Y <= 0, as AP0's blue): finite, and not all zero. */
    if (!(isfinite(p->luma[0]) && isfinite(p->luma[1]) && isfinite(p->luma[2])) ||
        (p->luma[0] == 0.0f && p->luma[1] == 0.0f && p->luma[2] == 0.0f))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "luminance row (%g, %g, %g) is not finite or all zero",
                       (double)p->luma[0], (double)p->luma[1], (double)p->luma[2]);
    return HP_OK;
}

void hp_reduce_hist_edges(double min_log2, double max_log2, float edges[256])
{
    edges[0] = 0.0f;
    for (int k = 1; k < HP_HIST_BINS; k++)
        edges[k] = (float)exp2(min_log2 + (k - 1) * (max_log2 - min_log2) / 254.0);
}

static uint32_t format_fetches(const hp_reduce_config *cfg, bool fp16)
{
    return fp16 && cfg->fetches_fp16 ? cfg->fetches_fp16 : cfg->fetches;
}

/* Shared memory of the largest of the three modules for a workgroup size (shaders/reduce.comp): the
 * histogram of the first pass, the Harris tree of the two-pass partial (one float per thread and
 * statistic), the per-subgroup slots and the last-workgroup flag of the single dispatch. */
static uint32_t shared_bytes(uint32_t workgroup_size, uint32_t subgroup_size)
{
    uint32_t subgroups = (workgroup_size + subgroup_size - 1) / subgroup_size;
    uint32_t first_pass = (HP_HIST_BINS + 2) * 4;
    uint32_t single = first_pass + 4 * subgroups * 4 + 4;
    uint32_t partial = first_pass + 4 * workgroup_size * 4;
    return single > partial ? single : partial;
}

static hp_code create_pipeline(hp_reduce *r, const char *name, const uint32_t *spirv, size_t size, bool fp16,
                               hp_compute *out, hp_err *err)
{
    const uint32_t spec[8] = {r->config.workgroup_size, format_fetches(&r->config, fp16), fp16 ? 1u : 0u,
                              r->config.diag_skip,      r->config.prefetch ? 1u : 0u,    r->config.bin_guess,
                              r->config.split ? 1u : 0u, hp_gpu_get_info(r->gpu)->subgroup_size};
    hp_compute_desc desc = {
        .name = name,
        .spirv = spirv,
        .spirv_size = size,
        .push_constant_size = sizeof(struct reduce_push),
        .spec_values = spec,
        .spec_count = 8,
    };
    return hp_compute_create(r->gpu, &desc, out, err);
}

hp_code hp_reduce_create(hp_gpu *gpu, const hp_reduce_config *config, hp_reduce **out, hp_err *err)
{
    *out = NULL;
    hp_reduce_config cfg = HP_REDUCE_CONFIG_DEFAULTS;
    const hp_gpu_info *gi = hp_gpu_get_info(gpu);
    if (config) {
        cfg = *config;
    } else {
        /* The default shape, narrowed to what the device allows (every device allows 256 invocations:
         * gpu.c; Vulkan guarantees 16 KiB of shared memory), with as many threads per SM. */
        while (cfg.workgroup_size > 64 && (cfg.workgroup_size > gi->max_workgroup_invocations ||
                                           shared_bytes(cfg.workgroup_size, gi->subgroup_size) > gi->max_shared_memory)) {
            cfg.workgroup_size /= 2;
            cfg.groups_per_sm *= 2;
        }
    }
    if (cfg.workgroup_size < 64 || cfg.workgroup_size > 1024 || (cfg.workgroup_size & (cfg.workgroup_size - 1)))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "reduce workgroup_size %u is not a power of two in [64, 1024]",
                       cfg.workgroup_size);
    if (shared_bytes(cfg.workgroup_size, gi->subgroup_size) > gi->max_shared_memory)
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "reduce workgroup_size %u needs %u bytes of shared memory, "
                       "the device has %u", cfg.workgroup_size, shared_bytes(cfg.workgroup_size, gi->subgroup_size),
                       gi->max_shared_memory);
    if (cfg.workgroup_size > gi->max_workgroup_invocations || cfg.workgroup_size < gi->subgroup_size)
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "reduce workgroup_size %u does not fit this device "
                       "(subgroup %u, at most %u invocations)", cfg.workgroup_size, gi->subgroup_size,
                       gi->max_workgroup_invocations);
    if (cfg.fetches_fp16 == 0)
        cfg.fetches_fp16 = cfg.fetches;
    /* The shader flags a block's pixels in a 32-bit mask: at most 32 pixels per thread per block. */
    if (cfg.fetches < 1 || cfg.fetches > 16 || cfg.fetches_fp16 < 1 || cfg.fetches_fp16 > 16)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "reduce fetches %u / %u (fp16) is outside [1, 16]", cfg.fetches,
                       cfg.fetches_fp16);
    if (cfg.bin_guess > 1)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "reduce bin_guess %u is not 0 or 1", cfg.bin_guess);
    if (cfg.timeline && !gi->has_shader_clock)
        return hp_fail(err, HP_ERR_MISSING_FEATURE,
                       "reduce timeline needs VK_KHR_shader_clock (hp_gpu_config.shader_clock)");
    if (cfg.max_groups > HP_REDUCE_MAX_GROUPS)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "reduce max_groups %u is outside [0, %u]", cfg.max_groups,
                       HP_REDUCE_MAX_GROUPS);
    if (cfg.max_groups == 0) {
        /* A grid of a few workgroups per SM, all resident at once: every workgroup runs in the first
         * wave, none waits for a second, and the last workgroup combines few partials. The number per
         * SM is measured (docs/BENCHMARKS.md); without it, what full occupancy would keep resident. */
        uint64_t resident = cfg.groups_per_sm ? (uint64_t)gi->sm_count * cfg.groups_per_sm
                                              : (uint64_t)gi->sm_count * gi->warps_per_sm * 32 / cfg.workgroup_size;
        cfg.max_groups = resident >= 1 && resident <= HP_REDUCE_MAX_GROUPS ? (uint32_t)resident : HP_REDUCE_MAX_GROUPS;
    }
    hp_reduce *r = calloc(1, sizeof(*r));
    if (!r)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    r->gpu = gpu;
    r->config = cfg;
    r->edges_min = r->edges_max = NAN;

    const uint32_t *single = cfg.timeline ? spv_timeline : spv_single;
    size_t single_size = cfg.timeline ? sizeof(spv_timeline) : sizeof(spv_single);
    hp_code rc = create_pipeline(r, cfg.timeline ? "reduce_timeline_rgba16f" : "reduce_single_rgba16f", single,
                                 single_size, true, &r->single[HP_PIXEL_RGBA16F], err);
    if (rc == HP_OK)
        rc = create_pipeline(r, cfg.timeline ? "reduce_timeline_rgba32f" : "reduce_single_rgba32f", single,
                             single_size, false, &r->single[HP_PIXEL_RGBA32F], err);
    if (rc == HP_OK)
        rc = create_pipeline(r, "reduce_partial_rgba16f", spv_partial, sizeof(spv_partial), true,
                             &r->partial[HP_PIXEL_RGBA16F], err);
    if (rc == HP_OK)
        rc = create_pipeline(r, "reduce_partial_rgba32f", spv_partial, sizeof(spv_partial), false,
                             &r->partial[HP_PIXEL_RGBA32F], err);
    if (rc == HP_OK)
        rc = create_pipeline(r, "reduce_final", spv_final, sizeof(spv_final), false, &r->final, err);
    if (rc != HP_OK) {
        hp_reduce_destroy(&r);
        return rc;
    }
    *out = r;
    return HP_OK;
}

void hp_reduce_destroy(hp_reduce **pr)
{
    hp_reduce *r = *pr;
    if (!r)
        return;
    for (int f = 0; f < 2; f++) {
        hp_compute_destroy(r->gpu, &r->single[f]);
        hp_compute_destroy(r->gpu, &r->partial[f]);
    }
    hp_compute_destroy(r->gpu, &r->final);
    free(r);
    *pr = NULL;
}

const hp_reduce_config *hp_reduce_get_config(const hp_reduce *reduce) { return &reduce->config; }

void hp_reduce_statistics(hp_reduce *r, hp_pixel_format format, hp_reduce_variant variant, char *buf, size_t len)
{
    hp_compute_statistics(r->gpu, variant == HP_REDUCE_TWO_PASS ? &r->partial[format] : &r->single[format], buf, len);
}

VkDeviceSize hp_reduce_scratch_size(uint64_t pixels)
{
    (void)pixels; /* the partials are capped at HP_REDUCE_MAX_GROUPS whatever the size */
    return HP_SCRATCH_OFF_PARTIALS + (VkDeviceSize)HP_REDUCE_MAX_GROUPS * HP_SCRATCH_PARTIAL_SIZE;
}

static uint32_t group_count(const hp_reduce_config *cfg, uint64_t pixel_count, hp_pixel_format format)
{
    bool fp16 = format == HP_PIXEL_RGBA16F;
    uint64_t items = fp16 ? (pixel_count + 1) / 2 : pixel_count;
    uint64_t per_group = (uint64_t)cfg->workgroup_size * format_fetches(cfg, fp16);
    uint64_t groups = (items + per_group - 1) / per_group;
    if (groups < 1)
        groups = 1;
    return groups > cfg->max_groups ? cfg->max_groups : (uint32_t)groups;
}

uint32_t hp_reduce_group_count(const hp_reduce *r, uint64_t pixel_count, hp_pixel_format format)
{
    return group_count(&r->config, pixel_count, format);
}

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* The slot that tracks this scratch buffer's edges; a new buffer takes the oldest slot. */
static size_t scratch_slot(hp_reduce *r, VkBuffer buffer)
{
    size_t n = sizeof(r->scratch_edges) / sizeof(r->scratch_edges[0]);
    for (size_t i = 0; i < n; i++)
        if (r->scratch_edges[i].buffer == buffer)
            return i;
    memmove(&r->scratch_edges[1], &r->scratch_edges[0], (n - 1) * sizeof(r->scratch_edges[0]));
    r->scratch_edges[0].buffer = buffer;
    r->scratch_edges[0].min = r->scratch_edges[0].max = NAN;
    return 0;
}

void hp_reduce_init_scratch(hp_reduce *r, VkCommandBuffer cmd, const hp_buffer *scratch)
{
    vkCmdFillBuffer(cmd, scratch->buffer, 0, VK_WHOLE_SIZE, 0);
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    size_t slot = scratch_slot(r, scratch->buffer);
    r->scratch_edges[slot].min = r->scratch_edges[slot].max = NAN; /* a buffer reusing an old handle */
}

void hp_reduce_record(hp_reduce *r, VkCommandBuffer cmd, const hp_reduce_io *io, const hp_reduce_params *params)
{
    size_t slot = scratch_slot(r, io->scratch->buffer);
    if (params->hist_min_log2 != r->scratch_edges[slot].min || params->hist_max_log2 != r->scratch_edges[slot].max) {
        if (params->hist_min_log2 != r->edges_min || params->hist_max_log2 != r->edges_max) {
            hp_reduce_hist_edges(params->hist_min_log2, params->hist_max_log2, r->edges);
            r->edges_min = params->hist_min_log2;
            r->edges_max = params->hist_max_log2;
        }
        /* 1 KiB inline in the command buffer: cheaper than any staging, and rare. */
        vkCmdUpdateBuffer(cmd, io->scratch->buffer, HP_SCRATCH_OFF_EDGES, sizeof(r->edges), r->edges);
        barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        r->scratch_edges[slot].min = params->hist_min_log2;
        r->scratch_edges[slot].max = params->hist_max_log2;
    }

    uint32_t groups = group_count(&r->config, io->pixel_count, io->format);
    struct reduce_push push = {
        .pixels = io->pixels,
        .stats = io->stats->address,
        .scratch = io->scratch->address,
        .pixel_count = (uint32_t)io->pixel_count,
        .group_count = groups,
        .hist_min_log2 = (float)params->hist_min_log2,
        .hist_max_log2 = (float)params->hist_max_log2,
        .hist_a = (float)(254.0 / (params->hist_max_log2 - params->hist_min_log2)),
        .hist_b = (float)(0.5 - params->hist_min_log2 * 254.0 / (params->hist_max_log2 - params->hist_min_log2)),
        .hist_near = near_threshold(params->hist_min_log2, params->hist_max_log2, r->config.bin_guess),
        .luma = {params->luma[0], params->luma[1], params->luma[2]},
    };
    const hp_compute *first = params->variant == HP_REDUCE_TWO_PASS ? &r->partial[io->format] : &r->single[io->format];
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, first->pipeline);
    vkCmdPushConstants(cmd, first->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
    vkCmdDispatch(cmd, groups, 1, 1);

    if (params->variant == HP_REDUCE_TWO_PASS) {
        barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->final.pipeline);
        vkCmdPushConstants(cmd, r->final.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
        vkCmdDispatch(cmd, 1, 1, 1);
    }
}

void hp_reduce_decode_stats(const void *buffer, uint64_t pixel_count, hp_lum_stats *out)
{
    const uint8_t *b = buffer;
    uint32_t u[12];
    float f[12];
    memcpy(u, b, sizeof(u));
    memcpy(f, b, sizeof(f));
    memset(out, 0, sizeof(*out));
    out->pixels = pixel_count;
    out->finite_pixels = u[0];
    out->nonfinite_pixels = u[1];
    if (out->finite_pixels > 0) {
        out->min = f[2];
        out->max = f[3];
        /* The float pairs carry ~48 bits; finish in double. */
        double sum_log = (double)f[4] + (double)f[5];
        double sum_y = (double)f[6] + (double)f[7];
        out->log_average = exp(sum_log / (double)out->finite_pixels);
        out->mean = sum_y / (double)out->finite_pixels;
    }
    out->hist_min_log2 = f[10];
    out->hist_max_log2 = f[11];
    memcpy(out->histogram, b + HP_STATS_OFF_HIST, sizeof(out->histogram));
}

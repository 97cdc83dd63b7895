/* The luminance reduction stage: one pass over the scene-linear frame that produces every statistic
 * the later stages and the client need (DECISIONS.md 2-4): finite and non-finite pixel counts,
 * log-average, mean, min and max luminance, and the 256-bin log2 histogram.
 *
 * Two forms, chosen per frame (both pipelines are created at start-up):
 *   HP_REDUCE_SINGLE_PASS  one dispatch. Each workgroup reduces its share of the frame with subgroup
 *                          arithmetic, writes a partial, bumps an arrival counter, and the last workgroup
 *                          to arrive combines the partials and resets the counter (FidelityFX SPD).
 *   HP_REDUCE_TWO_PASS     the seed's form: a shared-memory tree with sequential addressing per workgroup
 *                          (Harris, "Optimizing Parallel Reduction in CUDA", 2007), then a second
 *                          dispatch of one workgroup over the partials.
 * Both share the per-pixel code and the final combine; docs/BENCHMARKS.md compares them. */
#ifndef HP_REDUCE_H
#define HP_REDUCE_H

#include "hp_shared.h"
#include "pipeline/gpu.h"

typedef enum hp_pixel_format {
    HP_PIXEL_RGBA16F = 0, /* 4 x IEEE half, 8 bytes per pixel */
    HP_PIXEL_RGBA32F = 1, /* 4 x IEEE float, 16 bytes per pixel */
} hp_pixel_format;

size_t hp_pixel_format_size(hp_pixel_format format);
const char *hp_pixel_format_name(hp_pixel_format format);

typedef enum hp_reduce_variant {
    HP_REDUCE_SINGLE_PASS = 0,
    HP_REDUCE_TWO_PASS = 1,
} hp_reduce_variant;

const char *hp_reduce_variant_name(hp_reduce_variant variant);
/* "single_pass" or "two_pass"; returns -1 for anything else. */
int hp_reduce_variant_parse(const char *name);

typedef struct hp_reduce_params {
    hp_reduce_variant variant; /* default HP_REDUCE_SINGLE_PASS (the faster: docs/BENCHMARKS.md) */
    double hist_min_log2;      /* log2 of the lowest histogram edge, [-64, 63], default -16 */
    double hist_max_log2;      /* log2 of the highest edge, (hist_min_log2, 64], default +16 */
    /* Y = luma . RGB: the Y row of the frame's RGB -> XYZ (D65) matrix (pipeline/colorspace.h), as the fp32
     * coefficients the GPU and the CPU reference both use; Rec.709's (HP_LUMA_*) by default (issue 17). */
    float luma[3];
} hp_reduce_params;

#define HP_REDUCE_LUMA_REC709 {(float)HP_LUMA_R, (float)HP_LUMA_G, (float)HP_LUMA_B}
#define HP_REDUCE_PARAMS_DEFAULTS \
    {.variant = HP_REDUCE_SINGLE_PASS, .hist_min_log2 = -16.0, .hist_max_log2 = 16.0, .luma = HP_REDUCE_LUMA_REC709}

hp_code hp_reduce_params_check(const hp_reduce_params *params, hp_err *err);

/* The statistics as the host sees them. Luminance in the frame's own linear units. */
typedef struct hp_lum_stats {
    uint64_t pixels;           /* width * height */
    uint64_t finite_pixels;    /* included in every statistic below */
    uint64_t nonfinite_pixels; /* a NaN or infinite channel: excluded, and written black by later stages */
    double log_average;        /* exp(mean(ln(1e-5 + Y))); 0 when no pixel is finite */
    double mean;               /* arithmetic mean of Y; 0 when no pixel is finite */
    double min, max;           /* of Y (fp32 values, exact); 0 when no pixel is finite */
    double hist_min_log2, hist_max_log2;
    uint32_t histogram[256];   /* bin 0: Y < 2^hist_min_log2; see shaders/include/hp_shared.h */
} hp_lum_stats;

/* Histogram edges: edges[k] for k = 1..255 is the float nearest 2^(min + (k - 1) * (max - min) / 254);
 * edges[0] = 0. Used by the GPU (uploaded each frame) and by the CPU reference alike. */
void hp_reduce_hist_edges(double min_log2, double max_log2, float edges[256]);

/* Launch shape, fixed when the pipelines are created (specialization constants). */
typedef struct hp_reduce_config {
    uint32_t workgroup_size; /* invocations per workgroup, a power of two in [64, 1024] */
    uint32_t fetches;        /* 16-byte loads in flight per thread per block, RGBA32F input, [1, 16] */
    uint32_t fetches_fp16;   /* the same for RGBA16F input (two pixels per load), [1, 16]; 0: `fetches` */
    uint32_t max_groups;     /* workgroups at most; more pixels loop, [0, 2048]. 0: groups_per_sm x the SM
                              * count where the driver tells it (VK_NV_shader_sm_builtins), else what the
                              * device keeps resident at once at full occupancy, else 2048 */
    uint32_t groups_per_sm;  /* see max_groups; 0: full occupancy (SMs x warps per SM x 32 / workgroup size) */
    bool prefetch;           /* software-pipelined loads: the next block's loads in flight during this one's
                              * arithmetic (shaders/reduce.comp) */
    bool split;              /* each workgroup one contiguous range of the frame instead of grid-stride blocks */
    uint32_t bin_guess;      /* histogram bin guess before the exact settling: 0 log2, 1 polynomial of the
                              * mantissa bits (benchmarks compare them) */
    uint32_t diag_skip;      /* benchmarks only: leave parts out to see what they cost (1 histogram, 2 log
                              * sum, 4 exact bin settling, 8 final combine, 16 the arrival and the final
                              * combine: the stage without its serial end); the results are then wrong. 0 */
    bool timeline;           /* benchmarks only: the single dispatch also writes each workgroup's phase times
                              * after the partials (HP_SCRATCH_OFF_TIMELINE; the scratch buffer must be
                              * that much larger). Needs hp_gpu_info.has_shader_clock. false */
} hp_reduce_config;

/* Measured on an H200 (docs/BENCHMARKS.md, "Luminance reduction"). */
#define HP_REDUCE_CONFIG_DEFAULTS                                                                       \
    {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 2, .max_groups = 0, .groups_per_sm = 1,       \
     .prefetch = true, .split = false, .bin_guess = 0}

typedef struct hp_reduce hp_reduce;

/* config NULL: HP_REDUCE_CONFIG_DEFAULTS. */
hp_code hp_reduce_create(hp_gpu *gpu, const hp_reduce_config *config, hp_reduce **out, hp_err *err);
void hp_reduce_destroy(hp_reduce **reduce);
/* The launch shape in use, with max_groups resolved. */
const hp_reduce_config *hp_reduce_get_config(const hp_reduce *reduce);
/* Driver statistics of the first-pass pipeline for a format and variant (see hp_compute_statistics). */
void hp_reduce_statistics(hp_reduce *reduce, hp_pixel_format format, hp_reduce_variant variant, char *buf,
                          size_t len);

/* Workgroups the first pass dispatches for a frame (partials written; timeline entries). */
uint32_t hp_reduce_group_count(const hp_reduce *reduce, uint64_t pixel_count, hp_pixel_format format);

/* Bytes of scratch (arrival counter, edges, partials) a frame of this many pixels needs. */
VkDeviceSize hp_reduce_scratch_size(uint64_t pixels);

typedef struct hp_reduce_io {
    VkDeviceAddress pixels;   /* the frame, tightly packed RGBA rows, its buffer padded to 16 bytes */
    uint64_t pixel_count;     /* width * height, at most 2^28 (16384 x 16384) */
    hp_pixel_format format;
    const hp_buffer *stats;   /* HP_STATS_SIZE bytes, device-local: the result */
    const hp_buffer *scratch; /* hp_reduce_scratch_size() bytes, device-local, set up by hp_reduce_init_scratch */
} hp_reduce_io;

/* Records the one-time set-up of a new scratch buffer: zeroes its counter and histogram accumulators
 * (they reset themselves after that) and forgets which edges it held. A barrier follows inside. */
void hp_reduce_init_scratch(hp_reduce *reduce, VkCommandBuffer cmd, const hp_buffer *scratch);

/* Records the stage into cmd: the edges' upload when the range differs from what the scratch holds,
 * then the dispatch(es). The caller records the barrier that makes the pixels visible before, and the
 * one for whatever reads stats after. Frames that share a scratch buffer must run one after another. */
void hp_reduce_record(hp_reduce *reduce, VkCommandBuffer cmd, const hp_reduce_io *io,
                      const hp_reduce_params *params);

/* Decodes the stats buffer as copied back to the host. */
void hp_reduce_decode_stats(const void *stats_buffer, uint64_t pixel_count, hp_lum_stats *out);

#endif

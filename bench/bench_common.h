/* What the benchmarks share: one device, one command buffer with timestamp queries, the warm-up that
 * brings a GPU to its working clocks, the bandwidth ceilings measured in the same run, and the synthetic
 * frames. Benchmarks run on the GPU host (docs/BENCHMARKS.md); they exit on the first failure. */
#ifndef HP_BENCH_COMMON_H
#define HP_BENCH_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipeline/cpu_reference.h"
#include "pipeline/gpu.h"
#include "pipeline/reduce.h"

#define CHECK(expr)                                                                                     \
    do {                                                                                                \
        if (!(expr)) {                                                                                  \
            fprintf(stderr, "bench: %s failed at line %d: %s\n", #expr, __LINE__, bench_err.message); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

#define VK_CHECK(expr)                                                                                  \
    do {                                                                                                \
        VkResult r_ = (expr);                                                                           \
        if (r_ != VK_SUCCESS) {                                                                         \
            fprintf(stderr, "bench: %s: %s\n", #expr, hp_vk_result_name(r_));                   \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

extern hp_err bench_err;
extern hp_gpu *bench_gpu;
extern VkDevice bench_dev;
extern VkCommandBuffer bench_cmd;
extern VkQueryPool bench_queries;

typedef struct summary {
    double median, p10, p90;
} summary;

typedef struct probe_push {
    VkDeviceAddress src, dst;
    uint32_t count;
} probe_push;

/* The options every benchmark takes: --runs N, --quick (a small run that checks the program itself,
 * anywhere: quick_runs runs), --device D. Returns false, after the usage line, on an argument that is
 * neither one of these nor one of `extra` (NULL-terminated flags without a value, set in extra_set). */
typedef struct bench_args {
    uint32_t runs;
    bool quick;
    const char *device;
} bench_args;
bool bench_parse_args(int argc, char **argv, const char *usage, uint32_t quick_runs, bench_args *a,
                      const char *const *extra, bool *extra_set);

/* Creates the device (with pipeline statistics where the driver gives them), a command buffer, a fence
 * and a pool of `max_queries` timestamps. */
void bench_init(const char *device, uint32_t max_queries);
/* The same, with VK_KHR_shader_clock enabled where the driver has it (bench_reduce --timeline). */
void bench_init_with(const char *device, uint32_t max_queries, bool shader_clock);
/* Destroys what bench_init made; 1 when the validation layer (HDRPOST_BENCH_VALIDATION) reported anything. */
int bench_shutdown(void);

void bench_begin(void);
void bench_submit_and_wait(void);
/* Every write before, visible to every access after. */
void bench_barrier_all(void);
/* Raw timestamps 0..n-1 of the query pool (waits for them). */
void bench_read_timestamps(uint32_t n, uint64_t *ts);
/* Milliseconds between timestamp pairs (2i, 2i + 1) for i < runs. */
void bench_read_durations(uint32_t runs, double *ms);
/* A 1-D grid of n workgroups, at most 65535: the limit every device allows (maxComputeWorkGroupCount);
 * the probes and flushes are grid-stride, so fewer groups cover the same bytes. */
static inline uint32_t bench_grid(uint64_t n) { return n > 65535 ? 65535u : (uint32_t)n; }

/* Sorts v and takes its median (the mean of the middle two for even n; bench_summarize's median is the
 * upper of the two, as its tables always were). */
double bench_median(double *v, size_t n);
/* Sorts ms and takes the median and the 10th and 90th percentiles. */
summary bench_summarize(double *ms, uint32_t n);
/* A deterministic log-normal RGBA frame: about 12 stops either side of 0.25. */
void bench_fill_frame(void *dst, hp_pixel_format format, uint64_t count);
/* Every pixel's alpha set to `alpha` (the tone benchmark's translucent look). */
void bench_set_alpha(void *frame, hp_pixel_format format, uint64_t count, float alpha);
bool bench_stats_match(const hp_lum_stats *g, const hp_lum_stats *c);

/* Ceilings measured in the same run as the stages: vkCmdCopyBuffer of 1 GiB (before and after the
 * stages), the shader copy and the shader read of shaders/bench_bandwidth.comp, all in bytes per second
 * (copies count bytes read plus written). */
typedef struct bench_ceilings {
    hp_buffer a, b;
    hp_compute probes[2]; /* copy, read */
    uint32_t runs;
    double cmd_copy_before, cmd_copy_after, shader_copy, shader_read;
    summary cmd_before, cmd_after;
} bench_ceilings;

/* Bytes of the ceilings' buffers: 1 GiB (the issues' "a copy of at least 1 GiB"); smoke runs of a
 * benchmark on a CPU device make it small. */
extern VkDeviceSize bench_ceiling_bytes;
/* A bandwidth probe (shaders/bench_bandwidth.comp): copy, or read only; grid-stride blocks of
 * workgroup_size x fetches 16-byte loads. */
void bench_probe_create(hp_compute *out, const char *name, bool copy, uint32_t workgroup_size, uint32_t fetches);
/* Records the probe over all of src (a copy writes dst; a read writes dst only if its sum is impossible). */
void bench_record_probe(const hp_compute *probe, const hp_buffer *src, const hp_buffer *dst, uint32_t groups);
/* Allocates, warms the GPU up for `warm_seconds`, measures the "before" figures and prints the probes. */
void bench_ceilings_begin(bench_ceilings *c, uint32_t runs, double warm_seconds, uint32_t resident_groups);
/* Measures the "after" copy, prints the summary line, frees. Returns the copy ceiling: the best copy. */
double bench_ceilings_end(bench_ceilings *c);
/* The read probe over a buffer: the time a kernel that only reads it once takes (the best of two grids). */
double bench_read_floor_ms(bench_ceilings *c, const hp_buffer *buffer, uint32_t resident_groups);
/* Keeps the GPU busy with copies for about `seconds`. */
void bench_warm_up(double seconds, const hp_buffer *a, const hp_buffer *b);

#endif

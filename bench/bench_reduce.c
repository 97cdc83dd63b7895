/* Benchmark of the luminance reduction, for the GPU host (docs/BENCHMARKS.md).
 *
 * For each size (1080p, 4K, 8K), input format (RGBA16F, RGBA32F), variant (single dispatch, two-pass)
 * and launch shape, the stage runs --runs times (default 100), each run bracketed by timestamp queries;
 * the median and the 10th/90th percentiles are reported. The GPU is first kept busy for two seconds so
 * that it reaches its working clocks. Between runs a 256 MiB
 * buffer is overwritten, outside the timestamps, so every run reads its frame from device memory and not
 * from a warm L2 (an H100's 50 MiB L2 holds a whole 1080p RGBA16F frame). That write leaves the L2 full
 * of dirty lines, written back while the timed kernel runs; the default is also timed after a flush that
 * only reads (flush_mode), and the read floor is given after no flush, after the write and after the read.
 *
 * In the same run the device's copy bandwidth is measured before and after: vkCmdCopyBuffer of 1 GiB,
 * median of 20, counting bytes read plus bytes written (the DRAM traffic of a copy). A reduction only reads, so its
 * fraction of that ceiling is bytes read / time / copy bandwidth.
 *
 * Every configuration's result is also checked against the CPU reference once (counts, min, max and
 * histogram exact, log-average 1e-4): a fast wrong answer is not a result.
 *
 * Usage: bench_reduce [--runs N] [--quick] [--smoke] [--sweep] [--timeline] [--after-upload] [--device D]
 * --quick runs 1080p only with 10 runs (to check the program itself on lavapipe); --smoke is --quick with
 * small ceiling and flush buffers (tests/bench_smoke.py). --sweep adds the launch shapes and code paths
 * the default was chosen from. --timeline instead runs the default with each workgroup writing when it
 * reached each phase (shader clocks), and prints where the time between the first workgroup's start and
 * the last one's end goes. --after-upload instead times the default right after the frame's upload from
 * host memory (the daemon's order), with the upload front to back and back to front. The exit status is 1
 * when a result misses the CPU reference (or the validation layer, on with HDRPOST_BENCH_VALIDATION,
 * reported anything). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"
#include "hp_shared.h"

typedef struct frame {
    const char *name;
    uint32_t w, h;
    hp_pixel_format format;
    hp_buffer input;
    hp_lum_stats want;
    double read_ms; /* the read probe over this frame's bytes: the floor for a kernel that reads it once */
    double read_fill_ms, read_clean_ms; /* the same after each flush (flush_mode) */
    double read_shape_ms[2]; /* the read probe in the default's launch shape, x1 and x2 its loads, clean flush */
    hp_buffer staging;       /* --after-upload: the frame in host memory, uploaded before every run */
} frame;

typedef struct config {
    hp_reduce_config shape;
    hp_reduce *reduce;
    bool clean_flush; /* evict the frame from L2 by reading the flush buffer instead of writing it */
} config;

/* How the frame is evicted from L2 before each timed run. FLUSH_FILL (the method of every table so far)
 * writes a 256 MiB buffer: the L2 is then full of dirty lines, which the timed kernel's own reads evict
 * and so write back to HBM while it runs. FLUSH_CLEAN reads the buffer instead (the read probe): the L2
 * holds clean lines that are dropped for free. The difference is the cost of the write-back, which in the
 * daemon would fall on whichever stage follows a write through L2 (the frame's upload). */
typedef enum flush_mode { FLUSH_NONE, FLUSH_FILL, FLUSH_CLEAN } flush_mode;

static void record_flush(flush_mode mode, const hp_buffer *flush, bench_ceilings *ceil, uint32_t i)
{
    if (mode == FLUSH_FILL) {
        vkCmdFillBuffer(bench_cmd, flush->buffer, 0, VK_WHOLE_SIZE, i);
    } else if (mode == FLUSH_CLEAN) {
        bench_record_probe(&ceil->probes[1], flush, &ceil->b, bench_grid(flush->size / 16 / 1024));
    }
    bench_barrier_all();
}

/* Median time of the read probe `probe` with `groups` workgroups over a frame, each run after the flush. */
static double probe_ms(bench_ceilings *ceil, const hp_compute *probe, uint32_t groups, const hp_buffer *frame,
                       const hp_buffer *flush, flush_mode mode, uint32_t runs)
{
    double *ms = calloc(runs, sizeof(double));
    bench_begin();
    vkCmdResetQueryPool(bench_cmd, bench_queries, 0, 2 * runs);
    for (uint32_t i = 0; i < runs; i++) {
        record_flush(mode, flush, ceil, i);
        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i);
        bench_record_probe(probe, frame, &ceil->b, groups);
        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i + 1);
        bench_barrier_all();
    }
    bench_submit_and_wait();
    bench_read_durations(runs, ms);
    double median = bench_summarize(ms, runs).median;
    free(ms);
    return median;
}

/* The read probe over a frame, each run after the given flush: the floor for a kernel that reads the
 * frame once under the same conditions as the stage (best of two grids, median of `runs`). */
static double read_floor_ms(bench_ceilings *ceil, const hp_buffer *frame, const hp_buffer *flush, flush_mode mode,
                            uint32_t resident_groups, uint32_t runs)
{
    const uint32_t grids[] = {resident_groups, bench_grid((frame->size / 16 + 1023) / 1024)};
    double best = 1e30;
    for (int g = 0; g < 2; g++)
        best = fmin(best, probe_ms(ceil, &ceil->probes[1], grids[g], frame, flush, mode, runs));
    return best;
}

/* "512 x 4, 264, prefetch": workgroup size x 16-byte loads per block for this format, workgroups, loop. */
static void shape_label(const hp_reduce_config *s, hp_pixel_format format, char *buf, size_t len)
{
    uint32_t fetches = format == HP_PIXEL_RGBA16F && s->fetches_fp16 ? s->fetches_fp16 : s->fetches;
    snprintf(buf, len, "%u x %u, %u, %s%s%s", s->workgroup_size, fetches, s->max_groups,
             s->prefetch ? "prefetch" : "no prefetch", s->split ? ", split" : "", s->bin_guess ? ", poly bins" : "");
}

/* The phases of shaders/reduce.comp's timeline (HP_REDUCE_TIMELINE): the workgroup's first instruction,
 * its shared-memory set-up done, its first invocation's blocks done, every invocation's blocks done and
 * the workgroup's sums in shared memory, the partial and histogram out, the arrival counted, and (the
 * last workgroup only) the final combine done. */
enum {
    TL_START, TL_SETUP, TL_LOOP0, TL_LOOP, TL_FLUSHED, TL_ARRIVED, TL_COMBINED,
    TL_PARTIALS_IN, TL_HIST_IN, TL_SUMMED, TL_LAST_BEGINS, TL_POINTS
};
_Static_assert(TL_POINTS <= HP_REDUCE_TIMELINE_POINTS, "the shader's timeline slots");
static const char *const tl_names[TL_POINTS] = {
    "start", "set-up", "loop, inv. 0", "loop, all", "partial out", "arrived", "combined (end)",
    "combine: partials in", "combine: histogram in", "combine: summed", "combine: begins"};

/* --timeline: `runs` runs of the default single dispatch per frame, each after the flush, with every
 * workgroup's phase times read back. Per run, each phase's time across the workgroups (earliest, median,
 * latest) from the earliest workgroup's start, in us of the device clock; the table gives the median of
 * each over the runs, beside the timestamp queries' duration of the dispatch. The SM clock gives the
 * per-workgroup durations in cycles. The device clock's unit and resolution are the driver's (nanoseconds
 * on NVIDIA, its %globaltimer): the span printed beside the timestamp queries' duration shows whether the
 * unit holds. The clock reads wait for the values they are placed after (see reduce.comp), which moves
 * the last workgroup's histogram stores after its partial loads: its combine phases are indicative. */
static bool run_timeline(frame *frames, size_t frame_count, uint32_t runs, const hp_buffer *flush,
                         bench_ceilings *ceil, flush_mode mode, hp_reduce_config shape, const char *label)
{
    shape.timeline = true;
    hp_reduce *reduce;
    CHECK(hp_reduce_create(bench_gpu, &shape, &reduce, &bench_err) == HP_OK);
    const VkDeviceSize slice = (VkDeviceSize)HP_REDUCE_MAX_GROUPS * HP_REDUCE_TIMELINE_POINTS * 16;
    hp_buffer stats, scratch, readback, stats_back;
    CHECK(hp_buffer_create(bench_gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "tl_stats", &stats, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_SCRATCH_OFF_TIMELINE + slice, HP_MEM_DEVICE, "tl_scratch", &scratch,
                           &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, slice * runs, HP_MEM_READBACK, "tl_readback", &readback, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_STATS_SIZE, HP_MEM_READBACK, "tl_stats_back", &stats_back, &bench_err) ==
          HP_OK);
    bench_begin();
    hp_reduce_init_scratch(reduce, bench_cmd, &scratch);
    bench_submit_and_wait();

    printf("\n## Timeline of the single dispatch, %s (%s flush), us from the first workgroup's start: "
           "earliest / median / latest workgroup, median of %u runs\n\n",
           label, mode == FLUSH_CLEAN ? "clean" : "write", runs);
    double *dur = calloc(runs, sizeof(double));
    double *span = calloc(runs, sizeof(double));
    double *stat = calloc((size_t)runs * TL_POINTS * 3, sizeof(double)); /* [k][e/m/l][run] */
    double *loop_cycles = calloc((size_t)runs * 2, sizeof(double));
    double *ghz = calloc(runs, sizeof(double));
    double *tmp = calloc(HP_REDUCE_MAX_GROUPS, sizeof(double));
    /* Printed transposed: a row per phase, in time order, a column per frame. */
    enum { TL_ROWS = TL_POINTS + 4, TL_CELL = 40 };
    static const int tl_order[TL_POINTS] = {TL_START, TL_SETUP, TL_LOOP0, TL_LOOP, TL_FLUSHED, TL_ARRIVED,
                                            TL_LAST_BEGINS, TL_PARTIALS_IN, TL_HIST_IN, TL_SUMMED, TL_COMBINED};
    char *cells = calloc(frame_count * TL_ROWS, TL_CELL);
    bool all_ok = true, timeline_ok = true;
    for (size_t fr = 0; fr < frame_count; fr++) {
        uint64_t count = (uint64_t)frames[fr].w * frames[fr].h;
        uint32_t groups = hp_reduce_group_count(reduce, count, frames[fr].format); /* those dispatched */
        VkDeviceSize used = (VkDeviceSize)groups * HP_REDUCE_TIMELINE_POINTS * 16;
        hp_reduce_io io = {.pixels = frames[fr].input.address, .pixel_count = count, .format = frames[fr].format,
                           .stats = &stats, .scratch = &scratch};
        hp_reduce_params params = HP_REDUCE_PARAMS_DEFAULTS;
        bench_begin();
        vkCmdResetQueryPool(bench_cmd, bench_queries, 0, 2 * runs);
        for (uint32_t i = 0; i < runs; i++) {
            vkCmdFillBuffer(bench_cmd, scratch.buffer, HP_SCRATCH_OFF_TIMELINE, used, 0);
            record_flush(mode, flush, ceil, i);
            vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i);
            hp_reduce_record(reduce, bench_cmd, &io, &params);
            vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i + 1);
            bench_barrier_all();
            VkBufferCopy down = {.srcOffset = HP_SCRATCH_OFF_TIMELINE, .dstOffset = slice * i, .size = used};
            vkCmdCopyBuffer(bench_cmd, scratch.buffer, readback.buffer, 1, &down);
            bench_barrier_all();
        }
        VkBufferCopy down = {.size = HP_STATS_SIZE};
        vkCmdCopyBuffer(bench_cmd, stats.buffer, stats_back.buffer, 1, &down);
        bench_barrier_all();
        bench_submit_and_wait();
        /* A fast wrong answer is not a result: the last run against the CPU reference. */
        hp_buffer_invalidate(bench_gpu, &stats_back);
        hp_lum_stats got;
        hp_reduce_decode_stats(stats_back.mapped, count, &got);
        bool ok = shape.diag_skip != 0 || bench_stats_match(&got, &frames[fr].want);
        all_ok = all_ok && ok;
        bench_read_durations(runs, dur);
        hp_buffer_invalidate(bench_gpu, &readback);
        for (uint32_t i = 0; i < runs; i++) {
            const uint32_t *w = (const uint32_t *)((const char *)readback.mapped + slice * i);
            /* (device clock lo, hi, SM clock lo, hi) per point and workgroup */
#define TL_DEV(g, k) ((uint64_t)w[((g) * HP_REDUCE_TIMELINE_POINTS + (k)) * 4] | \
                      (uint64_t)w[((g) * HP_REDUCE_TIMELINE_POINTS + (k)) * 4 + 1] << 32)
#define TL_SM(g, k) ((uint64_t)w[((g) * HP_REDUCE_TIMELINE_POINTS + (k)) * 4 + 2] | \
                     (uint64_t)w[((g) * HP_REDUCE_TIMELINE_POINTS + (k)) * 4 + 3] << 32)
            /* Device-clock times in ns from workgroup 0's start, in 32-bit differences: lavapipe's clock
             * wraps at 32 bits, and a dispatch is far shorter than the 2 s that allows. */
            uint32_t ref = (uint32_t)TL_DEV(0, TL_START);
#define TL_AT(g, k) ((double)(int32_t)((uint32_t)TL_DEV(g, k) - ref))
            double t0 = INFINITY, t_end = -INFINITY;
            for (uint32_t g = 0; g < groups; g++)
                t0 = fmin(t0, TL_AT(g, TL_START));
            /* Every dispatched workgroup wrote its phases, in program order, and one combined. */
            uint32_t combined = 0;
            for (uint32_t g = 0; g < groups; g++) {
                static const int order[] = {TL_START, TL_SETUP, TL_LOOP0, TL_LOOP, TL_FLUSHED, TL_ARRIVED};
                bool in_order = TL_DEV(g, TL_START) != 0;
                for (size_t k = 1; k < sizeof(order) / sizeof(order[0]); k++)
                    in_order = in_order && TL_AT(g, order[k]) >= TL_AT(g, order[k - 1]);
                timeline_ok = timeline_ok && in_order;
                combined += TL_DEV(g, TL_COMBINED) != 0;
            }
            timeline_ok = timeline_ok && combined == 1u;
            for (int k = 0; k < TL_POINTS; k++) {
                uint32_t n = 0;
                for (uint32_t g = 0; g < groups; g++) {
                    if (TL_DEV(g, k) == 0) /* the combine: the last workgroup only */
                        continue;
                    double t = TL_AT(g, k) - t0;
                    tmp[n++] = t * 1e-3;
                    t_end = fmax(t_end, t);
                }
                double *e = stat + ((size_t)k * 3) * runs;
                if (n == 0) {
                    e[i] = e[runs + i] = e[2 * runs + i] = NAN;
                    continue;
                }
                e[runs + i] = bench_median(tmp, n); /* sorted after it */
                e[i] = tmp[0];
                e[2 * runs + i] = tmp[n - 1];
            }
            span[i] = t_end * 1e-3;
            double cyc_sum = 0, ns_sum = 0, cmax = 0;
            for (uint32_t g = 0; g < groups; g++) {
                tmp[g] = (double)(TL_SM(g, TL_LOOP0) - TL_SM(g, TL_SETUP));
                cmax = fmax(cmax, tmp[g]);
                cyc_sum += (double)(TL_SM(g, TL_ARRIVED) - TL_SM(g, TL_START));
                ns_sum += TL_AT(g, TL_ARRIVED) - TL_AT(g, TL_START);
            }
            loop_cycles[i] = bench_median(tmp, groups);
            loop_cycles[runs + i] = cmax;
            ghz[i] = ns_sum > 0 ? cyc_sum / ns_sum : NAN;
#undef TL_AT
#undef TL_DEV
#undef TL_SM
        }
        char *col = cells + fr * TL_ROWS * TL_CELL;
        snprintf(col, TL_CELL, "%.1f", bench_median(dur, runs) * 1e3);
        snprintf(col + TL_CELL, TL_CELL, "%.1f", bench_median(span, runs));
        for (int r = 0; r < TL_POINTS; r++) {
            double *e = stat + ((size_t)tl_order[r] * 3) * runs;
            snprintf(col + (2 + r) * TL_CELL, TL_CELL, "%.1f / %.1f / %.1f", bench_median(e, runs),
                     bench_median(e + runs, runs), bench_median(e + 2 * runs, runs));
        }
        snprintf(col + (TL_ROWS - 2) * TL_CELL, TL_CELL, "%.0f / %.0f", bench_median(loop_cycles, runs),
                 bench_median(loop_cycles + runs, runs));
        snprintf(col + (TL_ROWS - 1) * TL_CELL, TL_CELL, "%.2f", bench_median(ghz, runs));
        if (!ok)
            printf("MISMATCH: %s %s against the CPU reference\n", frames[fr].name,
                   hp_pixel_format_name(frames[fr].format));
    }
    printf("| us |");
    for (size_t fr = 0; fr < frame_count; fr++)
        printf(" %s %s |", frames[fr].name, hp_pixel_format_name(frames[fr].format));
    printf("\n|---|");
    for (size_t fr = 0; fr < frame_count; fr++)
        printf("---|");
    printf("\n");
    for (int r = 0; r < TL_ROWS; r++) {
        const char *name = r == 0 ? "dispatch (timestamp queries)" : r == 1 ? "first start to last end"
                           : r == TL_ROWS - 2 ? "blocks, SM cycles: median / max" : r == TL_ROWS - 1 ? "SM clock GHz"
                           : tl_names[tl_order[r - 2]];
        printf("| %s |", name);
        for (size_t fr = 0; fr < frame_count; fr++)
            printf(" %s |", cells + (fr * TL_ROWS + r) * TL_CELL);
        printf("\n");
    }
    free(cells);
    free(dur);
    free(span);
    free(stat);
    free(loop_cycles);
    free(ghz);
    free(tmp);
    hp_reduce_destroy(&reduce);
    hp_buffer_destroy(bench_gpu, &stats);
    hp_buffer_destroy(bench_gpu, &scratch);
    hp_buffer_destroy(bench_gpu, &readback);
    hp_buffer_destroy(bench_gpu, &stats_back);
    if (shape.diag_skip == 0)
        printf("\ncheck against the CPU reference: %s\n", all_ok ? "ok" : "MISMATCH");
    printf("check of the timeline (every workgroup's phases in order, one combine): %s\n",
           timeline_ok ? "ok" : "INVALID");
    return all_ok && timeline_ok;
}

/* --after-upload: the default single dispatch right after its frame was copied from host memory, as in
 * the daemon (the upload's last part goes in the frame's own command buffer, hp_frame_graph). The upload
 * writes through L2, so part of the frame is still there, dirty, when the reduction starts; which part
 * depends on the order of the upload. Each run uploads the whole frame, front to back in one copy or in
 * 16 parts from the last to the first (barriers between them), then times the reduction alone. No flush:
 * the upload sets the L2's state. Checked against the CPU reference like every other mode. */
static bool run_after_upload(frame *frames, size_t frame_count, uint32_t runs, uint32_t per_round, hp_reduce *reduce,
                             const hp_buffer *stats, const hp_buffer *scratch, const hp_buffer *readback)
{
    enum { PARTS = 16 };
    bool ok = true;
    double *all = calloc(runs, sizeof(double));
    printf("The default right after its frame's upload from host memory (no other flush), median of %u runs:\n\n"
           "| size | format | MB read | upload front to back, ms | upload back to front, ms | check |\n"
           "|---|---|---|---|---|---|\n",
           runs);
    for (size_t fr = 0; fr < frame_count; fr++) {
        uint64_t count = (uint64_t)frames[fr].w * frames[fr].h;
        VkDeviceSize bytes = count * hp_pixel_format_size(frames[fr].format);
        double median[2];
        bool match = true;
        for (int order = 0; order < 2; order++) {
            for (uint32_t done = 0; done < runs; done += per_round) {
                hp_reduce_params params = HP_REDUCE_PARAMS_DEFAULTS;
                hp_reduce_io io = {.pixels = frames[fr].input.address, .pixel_count = count,
                                   .format = frames[fr].format, .stats = stats, .scratch = scratch};
                bench_begin();
                vkCmdResetQueryPool(bench_cmd, bench_queries, 0, 2 * per_round);
                for (uint32_t i = 0; i < per_round; i++) {
                    if (order == 0) {
                        VkBufferCopy all_of_it = {.size = bytes};
                        vkCmdCopyBuffer(bench_cmd, frames[fr].staging.buffer, frames[fr].input.buffer, 1, &all_of_it);
                    } else {
                        VkDeviceSize part = ((bytes + PARTS - 1) / PARTS + 15) & ~(VkDeviceSize)15;
                        for (int k = PARTS - 1; k >= 0; k--) {
                            VkDeviceSize at = (VkDeviceSize)k * part;
                            if (at >= bytes)
                                continue;
                            VkBufferCopy region = {.srcOffset = at, .dstOffset = at,
                                                   .size = at + part > bytes ? bytes - at : part};
                            vkCmdCopyBuffer(bench_cmd, frames[fr].staging.buffer, frames[fr].input.buffer, 1,
                                            &region);
                            bench_barrier_all();
                        }
                    }
                    bench_barrier_all();
                    vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i);
                    hp_reduce_record(reduce, bench_cmd, &io, &params);
                    vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i + 1);
                    bench_barrier_all();
                }
                VkBufferCopy down = {.size = HP_STATS_SIZE};
                vkCmdCopyBuffer(bench_cmd, stats->buffer, readback->buffer, 1, &down);
                bench_barrier_all();
                bench_submit_and_wait();
                bench_read_durations(per_round, all + done);
                hp_buffer_invalidate(bench_gpu, readback);
                hp_lum_stats got;
                hp_reduce_decode_stats(readback->mapped, count, &got);
                match = match && bench_stats_match(&got, &frames[fr].want);
            }
            median[order] = bench_summarize(all, runs).median;
        }
        printf("| %s | %s | %.1f | %.4f | %.4f | %s |\n", frames[fr].name, hp_pixel_format_name(frames[fr].format),
               (double)bytes / 1e6, median[0], median[1], match ? "ok" : "MISMATCH");
        ok = ok && match;
    }
    free(all);
    return ok;
}

int main(int argc, char **argv)
{
    bench_args args = {.runs = 100};
    static const char *const extra[] = {"--sweep", "--timeline", "--smoke", "--after-upload", NULL};
    bool flags[4] = {false, false, false, false};
    static const char usage[] =
        "bench_reduce [--runs N] [--quick] [--smoke] [--sweep] [--timeline] [--after-upload] [--device D]";
    if (!bench_parse_args(argc, argv, usage, 10, &args, extra, flags))
        return 2;
    bool sweep = flags[0], timeline = flags[1], smoke = flags[2], after_upload = flags[3];
    if (after_upload && (sweep || timeline)) {
        fprintf(stderr, "bench_reduce: --after-upload runs the default alone, not with --sweep or --timeline\n"
                        "usage: %s\n", usage);
        return 2;
    }
    bool ok = true; /* every result checked against the CPU reference (and the timeline's own check) */
    uint32_t runs = smoke ? 10 : args.runs;
    bool quick = args.quick || smoke;
    if (smoke)
        bench_ceiling_bytes = 64ull << 20;
    const char *device = args.device;
    uint32_t rounds = quick ? 2 : 5;
    if (runs < 10)
        runs = 10;
    /* Runs are spread over rounds, and the configurations interleaved within a round, so a drift of the
     * clocks during the benchmark spreads over every configuration instead of favouring the later ones. */
    uint32_t per_round = (runs + rounds - 1) / rounds;
    runs = per_round * rounds;
    bench_init_with(device, 2 * (timeline ? runs : per_round), timeline);
    const hp_gpu_info *gi = hp_gpu_get_info(bench_gpu);
    if (timeline)
        printf("# bench_reduce --timeline: %u runs per configuration, one after another\n\n", runs);
    else
        printf("# bench_reduce: %u runs per configuration in %u interleaved rounds (median, p10-p90)\n\n", runs,
               rounds);

    /* Frames first: building an 8K frame on the CPU takes seconds, during which the GPU would idle. */
    static const struct { uint32_t w, h; const char *name; } sizes[] = {
        {1920, 1080, "1080p"}, {3840, 2160, "4K"}, {7680, 4320, "8K"}};
    size_t size_count = quick ? 1 : 3;
    frame frames[6] = {0};
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
            CHECK(hp_buffer_create(bench_gpu, bytes, HP_MEM_UPLOAD, "bench_staging", &staging, &bench_err) == HP_OK);
            CHECK(hp_buffer_create(bench_gpu, (bytes + 15) & ~15ull, HP_MEM_DEVICE, "bench_frame", &fr->input, &bench_err) ==
                  HP_OK);
            bench_fill_frame(staging.mapped, fr->format, count);
            hp_cpu_reduce(staging.mapped, fr->format, count, -16, 16, &fr->want);
            bench_begin();
            VkBufferCopy region = {.size = bytes};
            vkCmdCopyBuffer(bench_cmd, staging.buffer, fr->input.buffer, 1, &region);
            bench_barrier_all();
            bench_submit_and_wait();
            if (after_upload)
                fr->staging = staging;
            else
                hp_buffer_destroy(bench_gpu, &staging);
        }
    }

    hp_buffer flush; /* overwritten between runs: evicts the frame from L2 */
    CHECK(hp_buffer_create(bench_gpu, smoke ? 16ull << 20 : 256ull << 20, HP_MEM_DEVICE, "bench_l2_flush", &flush,
                           &bench_err) == HP_OK);
    hp_buffer stats, scratch, readback;
    CHECK(hp_buffer_create(bench_gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "bench_stats", &stats, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, hp_reduce_scratch_size(0), HP_MEM_DEVICE, "bench_scratch", &scratch, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_STATS_SIZE, HP_MEM_READBACK, "bench_readback", &readback, &bench_err) == HP_OK);

    /* The grid of the bandwidth probes: what full occupancy keeps resident in workgroups of 256. */
    uint32_t resident_256 = gi->sm_count && gi->warps_per_sm ? gi->sm_count * gi->warps_per_sm * 32 / 256 : 1024;
    if (resident_256 > HP_REDUCE_MAX_GROUPS)
        resident_256 = HP_REDUCE_MAX_GROUPS;

    /* Launch shapes: the default first, then (with --sweep) the candidates it was chosen from, then the
     * ablations of the default. groups_per_sm resolves against the SM count (hp_reduce_config). */
    hp_reduce_config def = HP_REDUCE_CONFIG_DEFAULTS;
    config configs[40];
    size_t config_count = 0;
    configs[config_count++] = (config){.shape = def};
    if (sweep) {
        static const hp_reduce_config candidates[] = {
            /* prefetch (software-pipelined loads), grid of groups_per_sm x SMs */
            {.workgroup_size = 512, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 2, .prefetch = true},
            {.workgroup_size = 256, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 4, .prefetch = true},
            {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 1, .prefetch = true},
            /* no prefetch: the old loop shape with the new per-pixel code, fewer registers */
            {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 1},
            {.workgroup_size = 512, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 2},
            {.workgroup_size = 512, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 3},
            /* no prefetch at 32 registers: two 1024-wide workgroups per SM fit, 2048 threads as the read
             * probe has */
            {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 2, .groups_per_sm = 2},
            {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 2},
            {.workgroup_size = 512, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 4},
            /* contiguous ranges; the polynomial bin guess */
            {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 1, .prefetch = true, .split = true},
            {.workgroup_size = 1024, .fetches = 4, .fetches_fp16 = 4, .groups_per_sm = 1, .prefetch = true, .bin_guess = 1},
        };
        for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
            configs[config_count++] = (config){.shape = candidates[i]};
    }
    /* The default again, each run after a flush that leaves no dirty lines in L2 (flush_mode). */
    configs[config_count++] = (config){.shape = def, .clean_flush = true};
    static const uint32_t ablations[] = {1, 2, 4, 8, 11, 16};
    for (size_t i = 0; i < sizeof(ablations) / sizeof(ablations[0]); i++) {
        hp_reduce_config a = def;
        a.diag_skip = ablations[i];
        configs[config_count++] = (config){.shape = a};
    }
    /* The stage without its serial end (the single dispatch's arrival and final combine, the two-pass form's
     * combine), clean flush: what a cheaper end could reach at most. */
    hp_reduce_config bound = def;
    bound.diag_skip = 16;
    configs[config_count++] = (config){.shape = bound, .clean_flush = true};
    if (quick)
        config_count = 2;
    if (timeline) /* it makes its own */
        config_count = 0;
    if (after_upload) /* the default only */
        config_count = 1;
    bench_begin();
    for (size_t c = 0; c < config_count; c++) {
        CHECK(hp_reduce_create(bench_gpu, &configs[c].shape, &configs[c].reduce, &bench_err) == HP_OK);
        configs[c].shape = *hp_reduce_get_config(configs[c].reduce);
        hp_reduce_init_scratch(configs[c].reduce, bench_cmd, &scratch);
    }
    bench_submit_and_wait();

    for (size_t c = 0; c < config_count; c++) {
        for (int f = 0; f < 2; f++) {
            for (int v = 0; v < 2; v++) {
                char stats_text[1024];
                hp_reduce_statistics(configs[c].reduce, (hp_pixel_format)f, (hp_reduce_variant)v, stats_text,
                                     sizeof(stats_text));
                char label[128];
                shape_label(&configs[c].shape, (hp_pixel_format)f, label, sizeof(label));
                if (stats_text[0])
                    printf("pipeline %s %s %s (diag %u): %s\n", label, hp_pixel_format_name((hp_pixel_format)f),
                           hp_reduce_variant_name((hp_reduce_variant)v), configs[c].shape.diag_skip, stats_text);
            }
        }
    }

    bench_ceilings ceil;
    bench_ceilings_begin(&ceil, quick ? 4 : 20, quick ? 0.2 : 2.0, resident_256);
    if (after_upload) {
        ok = run_after_upload(frames, frame_count, runs, per_round, configs[0].reduce, &stats, &scratch, &readback) &&
             ok;
        printf("\ncopy ceiling in this run: %.0f GB/s\n", bench_ceilings_end(&ceil) / 1e9);
    } else if (timeline) {
        hp_reduce_config shape = HP_REDUCE_CONFIG_DEFAULTS;
        ok = run_timeline(frames, frame_count, runs, &flush, &ceil, FLUSH_CLEAN, shape, "default") && ok;
        ok = run_timeline(frames, frame_count, runs, &flush, &ceil, FLUSH_FILL, shape, "default") && ok;
        if (sweep) {
            /* Where the loop's time goes: more bytes per block; no histogram. */
            shape.fetches_fp16 = 4;
            ok = run_timeline(frames, frame_count, runs, &flush, &ceil, FLUSH_CLEAN, shape,
                              "4 loads per block for RGBA16F") && ok;
            shape = (hp_reduce_config)HP_REDUCE_CONFIG_DEFAULTS;
            shape.diag_skip = 1;
            ok = run_timeline(frames, frame_count, runs, &flush, &ceil, FLUSH_CLEAN, shape,
                              "no histogram (wrong results)") && ok;
        }
        printf("\ncopy ceiling in this run: %.0f GB/s\n", bench_ceilings_end(&ceil) / 1e9);
    } else {
        for (size_t fr = 0; fr < frame_count; fr++) {
            frames[fr].read_ms = bench_read_floor_ms(&ceil, &frames[fr].input, resident_256);
            frames[fr].read_fill_ms =
                read_floor_ms(&ceil, &frames[fr].input, &flush, FLUSH_FILL, resident_256, per_round);
            frames[fr].read_clean_ms =
                read_floor_ms(&ceil, &frames[fr].input, &flush, FLUSH_CLEAN, resident_256, per_round);
        }
        /* The read probe again, in the default's launch shape (its workgroup size and grid, its loads per
         * block, and twice that: the bytes the prefetch keeps in flight): how much of the stage's distance
         * from the floor is the shape itself, before any arithmetic, histogram or end. */
        const hp_reduce_config *d = &configs[0].shape;
        for (int f = 0; f < 2; f++) {
            uint32_t fetches = f == HP_PIXEL_RGBA16F && d->fetches_fp16 ? d->fetches_fp16 : d->fetches;
            hp_compute probes[2];
            bench_probe_create(&probes[0], "bench_read_shape", false, d->workgroup_size, fetches);
            bench_probe_create(&probes[1], "bench_read_shape_x2", false, d->workgroup_size, 2 * fetches);
            for (size_t fr = 0; fr < frame_count; fr++) {
                if (frames[fr].format != (hp_pixel_format)f)
                    continue;
                uint32_t groups = hp_reduce_group_count(configs[0].reduce, (uint64_t)frames[fr].w * frames[fr].h,
                                                        frames[fr].format);
                for (int p = 0; p < 2; p++)
                    frames[fr].read_shape_ms[p] = probe_ms(&ceil, &probes[p], groups, &frames[fr].input, &flush,
                                                           FLUSH_CLEAN, per_round);
            }
            hp_compute_destroy(bench_gpu, &probes[0]);
            hp_compute_destroy(bench_gpu, &probes[1]);
        }

        printf("| size | format | variant | wg x fetches, groups, loop | MB read | median ms | p10-p90 ms | GB/s | "
               "of copy bw | of read bw | read floor ms: no flush / fill / clean | check |\n");
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
                    bench_begin();
                    vkCmdResetQueryPool(bench_cmd, bench_queries, 0, 2 * per_round);
                    for (uint32_t i = 0; i < per_round; i++) {
                        record_flush(configs[c].clean_flush ? FLUSH_CLEAN : FLUSH_FILL, &flush, &ceil, i);
                        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i);
                        hp_reduce_record(configs[c].reduce, bench_cmd, &io, &params);
                        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, 2 * i + 1);
                        bench_barrier_all();
                    }
                    VkBufferCopy down = {.size = HP_STATS_SIZE};
                    vkCmdCopyBuffer(bench_cmd, stats.buffer, readback.buffer, 1, &down);
                    /* Without the final combine nothing takes the histogram's accumulators back to zero, and
                     * the next configuration's first run would count them: zero them here, outside the
                     * timestamps (not hp_reduce_init_scratch, which also rewrites the edges). */
                    if (configs[c].shape.diag_skip & 24u)
                        vkCmdFillBuffer(bench_cmd, scratch.buffer, HP_SCRATCH_OFF_HIST, HP_HIST_BINS * 4, 0);
                    bench_barrier_all();
                    bench_submit_and_wait();
                    bench_read_durations(per_round, ms);
                    size_t at = fr * config_count * 2 + cell;
                    memcpy(all + at * runs + round * per_round, ms, per_round * sizeof(double));
                    hp_buffer_invalidate(bench_gpu, &readback);
                    hp_lum_stats got;
                    hp_reduce_decode_stats(readback.mapped, count, &got);
                    checks[at] = (round == 0 || checks[at]) && bench_stats_match(&got, &frames[fr].want);
                }
            }
        }
        double copy_bw = bench_ceilings_end(&ceil);

        for (size_t fr = 0; fr < frame_count; fr++) {
            VkDeviceSize bytes = (VkDeviceSize)frames[fr].w * frames[fr].h * hp_pixel_format_size(frames[fr].format);
            for (size_t cell = 0; cell < config_count * 2; cell++) {
                size_t c = cell / 2, at = fr * config_count * 2 + cell;
                summary sm = bench_summarize(all + at * runs, runs);
                double gbs = (double)bytes / (sm.median * 1e-3) / 1e9;
                static const char *const ablation[32] = {
                    [1] = ", no histogram", [2] = ", no log sum", [3] = ", no histogram or log",
                    [4] = ", no bin settling", [8] = ", no final combine", [11] = ", no histogram, log or combine",
                    [16] = ", no arrival or combine"};
                char label[128];
                shape_label(&configs[c].shape, frames[fr].format, label, sizeof(label));
                printf("| %s | %s | %s | %s%s%s%s | %.1f | %.4f | %.4f-%.4f | %.0f | %.0f%% | %.0f%% | "
                       "%.4f / %.4f / %.4f | %s |\n",
                       frames[fr].name, hp_pixel_format_name(frames[fr].format),
                       hp_reduce_variant_name((hp_reduce_variant)(cell % 2)), label,
                       c == 0 || (configs[c].clean_flush && !configs[c].shape.diag_skip) ? " (default)" : "",
                       configs[c].clean_flush ? ", clean flush" : "",
                       ablation[configs[c].shape.diag_skip & 31] ? ablation[configs[c].shape.diag_skip & 31] : "",
                       (double)bytes / 1e6, sm.median, sm.p10, sm.p90, gbs, 100.0 * gbs * 1e9 / copy_bw,
                       100.0 * gbs * 1e9 / ceil.shader_read, frames[fr].read_ms, frames[fr].read_fill_ms,
                       frames[fr].read_clean_ms, configs[c].shape.diag_skip ? "n/a" : checks[at] ? "ok" : "MISMATCH");
                ok = ok && (configs[c].shape.diag_skip || checks[at]);
            }
        }
        printf("\nThe read probe (no arithmetic) after the clean flush: in its best grid of 256 x 4 loads, and in "
               "the default's workgroup size and grid with its loads per block and twice that (the prefetch's):\n\n"
               "| size | format | best grid, ms | default's shape, ms | of copy bw | twice the loads, ms | "
               "of copy bw |\n"
               "|---|---|---|---|---|---|---|\n");
        for (size_t fr = 0; fr < frame_count; fr++) {
            double bytes = (double)frames[fr].w * frames[fr].h * hp_pixel_format_size(frames[fr].format);
            printf("| %s | %s | %.4f | %.4f | %.0f%% | %.4f | %.0f%% |\n", frames[fr].name,
                   hp_pixel_format_name(frames[fr].format), frames[fr].read_clean_ms, frames[fr].read_shape_ms[0],
                   100.0 * bytes / (frames[fr].read_shape_ms[0] * 1e-3) / copy_bw, frames[fr].read_shape_ms[1],
                   100.0 * bytes / (frames[fr].read_shape_ms[1] * 1e-3) / copy_bw);
        }

        free(ms);
        free(all);
        free(checks);
    }
    for (size_t c = 0; c < config_count; c++)
        hp_reduce_destroy(&configs[c].reduce);
    for (size_t fr = 0; fr < frame_count; fr++) {
        hp_buffer_destroy(bench_gpu, &frames[fr].input);
        hp_buffer_destroy(bench_gpu, &frames[fr].staging);
    }
    hp_buffer_destroy(bench_gpu, &flush);
    hp_buffer_destroy(bench_gpu, &stats);
    hp_buffer_destroy(bench_gpu, &scratch);
    hp_buffer_destroy(bench_gpu, &readback);
    return bench_shutdown() || !ok ? 1 : 0;
}

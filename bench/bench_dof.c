/* Benchmark of the whole GPU chain with depth of field and bokeh, for the GPU host (docs/BENCHMARKS.md):
 * the daemon's own frame graph (pipeline/frame_graph.c) run frame after frame, with the per-stage GPU
 * times it takes from timestamp queries: reduce, dof (setup, tiles, gather or SAT, and the bokeh splat
 * beside them), tonemap (exposure and the tone pass, which composites the depth of field). The chain is
 * everything from the uploaded frame to the quantized image: reduce + dof + tonemap; upload and download
 * are shown apart. Each configuration is also run with every pass timed on its own (serialized: the
 * splat then no longer overlaps the gather), for the per-pass line under its row. Each run uploads its frame again, which also evicts the previous run's data from the L2.
 *
 * The frame: random colours in [0.02, 0.5] with one pixel in 2000 a highlight of 50 (bokeh material),
 * depth a ramp from 0.7 m to 50 m across the width (a 50 mm f/1.4 focused at 3 m: most of the frame at
 * the largest CoC, 32 px, on one side or the other: the gather's worst case).
 *
 * Usage: bench_dof [--runs N] [--quick] [--smoke] [--device D]
 * --smoke: one 320x180 frame per input, 3 runs, small ceiling buffers (tests/bench_smoke.py). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"
#include "pipeline/frame_graph.h"

typedef struct config {
    const char *name;
    bool dof, bokeh;
    hp_dof_method method;
} config;

static const config configs[] = {
    {"tone only", false, false, HP_DOF_GATHER},
    {"gather", true, false, HP_DOF_GATHER},
    {"gather + bokeh", true, true, HP_DOF_GATHER},
    {"sat", true, false, HP_DOF_SAT},
    {"sat + bokeh", true, true, HP_DOF_SAT},
};
#define CONFIGS (sizeof(configs) / sizeof(configs[0]))

static const char *const stages[] = {"upload", "reduce", "dof", "tonemap", "download"};
#define STAGES 5

/* Per-pass times (frame graph detailed_timings), printed under their row. */
static struct {
    const char *name;
    double *ms;
} details[8];

static void detail_add(const char *name, double ms, uint32_t run, uint32_t runs)
{
    for (int i = 0; i < 8; i++) {
        if (!details[i].name) {
            details[i].name = name;
            details[i].ms = calloc(runs, sizeof(double));
        }
        if (details[i].name == name || strcmp(details[i].name, name) == 0) {
            details[i].ms[run] = ms;
            return;
        }
    }
}

static void detail_print(uint32_t runs)
{
    if (!details[0].name)
        return;
    printf("|  |  | passes: ");
    for (int i = 0; i < 8 && details[i].name; i++) {
        printf("%s %.4f%s", details[i].name, bench_median(details[i].ms, runs),
               i < 7 && details[i + 1].name ? ", " : "");
        free(details[i].ms);
        details[i].name = NULL;
    }
    printf(" |  |  |  |  |  |  |  |  |\n");
}

static void fill(void *pixels, hp_pixel_format format, float *depth, uint32_t w, uint32_t h)
{
    uint64_t state = 12345;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        float c[4];
        for (int k = 0; k < 3; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            c[k] = 0.02f + 0.48f * (float)((state >> 40) & 0xffffff) / 16777216.0f;
        }
        c[3] = 1;
        if ((state >> 20) % 2000 == 0)
            c[0] = c[1] = c[2] = 50;
        hp_cpu_store_pixel(pixels, format, i, c);
        depth[i] = 0.7f + 49.3f * (float)(i % w) / (float)w;
    }
}

int main(int argc, char **argv)
{
    bench_args args = {.runs = 50};
    static const char *const extra[] = {"--smoke", NULL};
    bool smoke = false;
    if (!bench_parse_args(argc, argv, "bench_dof [--runs N] [--quick] [--smoke] [--device D]", 3, &args, extra,
                          &smoke))
        return 2;
    uint32_t runs = smoke ? 3 : args.runs;
    bool quick = args.quick || smoke;
    if (smoke)
        bench_ceiling_bytes = 64ull << 20;
    const char *device = args.device;
    if (runs < 3)
        runs = 3;
    bench_init(device, 64);
    printf("# bench_dof: %u runs per configuration, median GPU ms per stage (timestamp queries)\n\n", runs);
    hp_frame_graph *graph;
    CHECK(hp_frame_graph_create(bench_gpu, &graph, &bench_err) == HP_OK);

    typedef struct frame_size { uint32_t w, h; const char *name; } frame_size;
    static const frame_size full_sizes[] = {{1920, 1080, "1080p"}, {3840, 2160, "4K"}, {7680, 4320, "8K"}};
    static const frame_size smoke_sizes[] = {{320, 180, "320x180"}};
    const frame_size *sizes = smoke ? smoke_sizes : full_sizes;
    size_t size_count = quick ? 1 : 3;

    bench_ceilings ceil;
    bench_ceilings_begin(&ceil, quick ? 4 : 20, quick ? 0.2 : 2.0, 1024);
    double copy_bw = bench_ceilings_end(&ceil);

    printf("| size | input | configuration | upload | reduce | dof (with bokeh) | tonemap | download | chain ms | floor ms | "
           "sprites |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t z = 0; z < size_count; z++) {
        uint32_t w = sizes[z].w, h = sizes[z].h;
        for (int f = 0; f < 2; f++) {
            hp_pixel_format format = (hp_pixel_format)f;
            if (z == 2 && format == HP_PIXEL_RGBA16F)
                continue; /* 8K: the common render output only */
            size_t bytes = (size_t)w * h * hp_pixel_format_size(format);
            void *frame = malloc(bytes);
            float *depth = malloc((size_t)w * h * 4);
            CHECK(frame && depth);
            fill(frame, format, depth, w, h);
            hp_frame_desc desc = {.width = w, .height = h, .format = format};
            /* The floor of the chain: the frame read once and the 8-bit image written once at the copy
             * bandwidth (copy_bw counts bytes read plus written). */
            double floor_ms = (double)(bytes + (size_t)w * h * 4) / copy_bw * 1e3;
            for (size_t c = 0; c < CONFIGS; c++) {
                hp_frame_params fp;
                hp_frame_params_defaults(&fp);
                fp.dof = configs[c].dof;
                fp.detailed_timings = true;
                fp.dof_settings = (hp_dof_settings){
                    .method = configs[c].method, .focal_length_mm = 50, .f_stop = 1.4, .focus_distance_m = 3,
                    .sensor_width_mm = 36, .depth_scale = 1, .max_coc_px = 32, .bokeh = configs[c].bokeh,
                    .bokeh_threshold = 4, .bokeh_min_coc_px = 2, .blades = 6, .rotation_deg = 0, .squeeze = 1,
                    .max_sprites = 4096};
                double *ms[STAGES];
                for (int s = 0; s < STAGES; s++)
                    ms[s] = calloc(runs, sizeof(double));
                double *chain = calloc(runs, sizeof(double));
                hp_frame_result res;
                /* Every run twice: as the daemon runs it (the chain, splat beside the gather), then with
                 * each pass timed on its own (the per-pass breakdown, serialized). Two warm-up frames
                 * first: first-use allocations. */
                for (uint32_t r = 0; r < 2 * runs + 2; r++) {
                    void *staging;
                    float *dstage;
                    /* Each begin hands out the next frame in flight's staging, which keeps what was written
                     * into it: the frame goes into each once. (Copying 133 MB before every run would leave
                     * the GPU idle long enough between runs to drop its clocks: every stage then measured
                     * three to four times slower.) */
                    CHECK(hp_frame_graph_begin(graph, &desc, &staging, &bench_err) == HP_OK);
                    CHECK(hp_frame_graph_depth(graph, &dstage, &bench_err) == HP_OK);
                    if (r < HP_FRAMES_IN_FLIGHT) {
                        memcpy(staging, frame, bytes);
                        memcpy(dstage, depth, (size_t)w * h * 4);
                    }
                    fp.detailed_timings = r >= 2 && (r - 2) % 2 == 1;
                    CHECK(hp_frame_graph_run(graph, &fp, &res, &bench_err) == HP_OK);
                    if (r < 2)
                        continue;
                    uint32_t i = (r - 2) / 2;
                    if (fp.detailed_timings) {
                        for (uint32_t t = 0; t < res.timing_count; t++)
                            if (strchr(res.timings[t].name, '.'))
                                detail_add(res.timings[t].name, res.timings[t].ms, i, runs);
                        continue;
                    }
                    double total = 0;
                    for (uint32_t t = 0; t < res.timing_count; t++) {
                        for (int s = 0; s < STAGES; s++) {
                            if (strcmp(res.timings[t].name, stages[s]) == 0) {
                                ms[s][i] = res.timings[t].ms;
                                if (s >= 1 && s <= 3)
                                    total += res.timings[t].ms;
                            }
                        }
                    }
                    chain[i] = total;
                }
                printf("| %s | %s | %s |", sizes[z].name, hp_pixel_format_name(format), configs[c].name);
                for (int s = 0; s < STAGES; s++) {
                    bool shown = s != 2 || configs[c].dof;
                    if (shown)
                        printf(" %.4f |", bench_median(ms[s], runs));
                    else
                        printf(" - |");
                }
                if (configs[c].bokeh)
                    printf(" **%.4f** | %.4f | %u of %u |\n", bench_median(chain, runs), floor_ms, res.bokeh_drawn,
                           res.bokeh_wanted);
                else
                    printf(" **%.4f** | %.4f | - |\n", bench_median(chain, runs), floor_ms);
                detail_print(runs);
                for (int s = 0; s < STAGES; s++)
                    free(ms[s]);
                free(chain);
            }
            free(frame);
            free(depth);
        }
    }
    hp_frame_graph_destroy(&graph);
    return bench_shutdown();
}

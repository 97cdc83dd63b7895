/* Benchmark of the OCIO stage (issue 34; docs/COLOR.md), for the GPU host (docs/BENCHMARKS.md): a studio's
 * display/view in place of the tone pass, side by side in one run with the built-in tone pass on the same frame,
 * beside the copy ceiling measured in the same run.
 *
 * The frame is real texture: a tests/data render tiled to 4K (RGBA16F and RGBA32F). For each transform the
 * exposure stage and the pass are bracketed by timestamp queries, every run reading its frame from device
 * memory (a 256 MiB overwrite between runs evicts the L2). The pass's floor is the frame read once and the
 * image written once at the copy ceiling. Each transform's image is checked against OCIO's CPU processor
 * (pipeline/cpu_ocio.c) on the whole frame: 8-bit within 1 level, 16-bit within 1e-3. Also printed: the time to
 * make each program (OCIO's shader, glslang, the LUTs, the pipeline), the first request's extra latency.
 *
 * The daemon's programs read a nearest 3D LUT from a buffer; the rows "3D LUT as an image" make the same view the
 * way before 2026-11-29 (hp_ocio_program_options.lut3d_images), side by side, each checked the same way.
 *
 * Usage: bench_ocio ACES_CONFIG BLENDER_CONFIG FRAME.exr [--runs N] [--quick] [--device D] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "bench/bench_common.h"
#include "hp_shared.h"
#include "pipeline/ocio_stage.h"
#include "pipeline/tone.h"

enum { TS_START, TS_EXPOSURE, TS_PASS, TS_COUNT };

/* The programs' ways: each its own stage per config, so that a view's programs do not meet in one set. */
static const hp_ocio_program_options variants[] = {
    {0},                      /* the daemon's: nearest 3D LUTs in buffers */
    {.lut3d_images = true},   /* every LUT an image, as before 2026-11-29 */
};
#define VARIANTS (sizeof variants / sizeof variants[0])
enum { V_DAEMON, V_IMAGES };

typedef struct transform {
    const char *label;
    int config;             /* 0 ACES, 1 Blender, -1 the built-in tone pass */
    hp_ocio_view_key key;
    uint32_t bits;
    int variant;            /* into variants[] */
} transform;

#define ACES_SDR {.input = "ACEScg", .display = "sRGB - Display", .view = "ACES 1.0 - SDR Video"}
#define ACES_PQ {.input = "ACEScg", .display = "Rec.2100-PQ - Display", \
                 .view = "ACES 1.1 - HDR Video (1000 nits & Rec.2020 lim)"}
#define FILMIC {.input = "Linear", .display = "sRGB", .view = "Filmic"}

static const transform transforms[] = {
    {"built-in tone pass (default: reinhard_extended, local gamma)", -1, {{0}}, 8, V_DAEMON},
    {"ACES 1.0 SDR, sRGB", 0, ACES_SDR, 8, V_DAEMON},
    {"Blender Filmic, sRGB (3D LUT in a buffer, 1D LUT)", 1, FILMIC, 8, V_DAEMON},
    {"Blender Filmic, sRGB, 3D LUT as an image", 1, FILMIC, 8, V_IMAGES},
    {"ACES 1.1 HDR 1000 nits, Rec.2100 PQ, 16-bit", 0, ACES_PQ, 16, V_DAEMON},
    {"Blender Filmic, 16-bit", 1, FILMIC, 16, V_DAEMON},
    {"Blender Filmic, 16-bit, 3D LUT as an image", 1, FILMIC, 16, V_IMAGES},
    {"built-in tone pass, 16-bit", -1, {{0}}, 16, V_DAEMON},
};
#define TRANSFORMS (sizeof transforms / sizeof transforms[0])

/* The frame tiled to w x h (mirrored at each repeat, so no seam makes an edge the source lacks). */
static float *tiled_frame(const char *path, uint32_t w, uint32_t h)
{
    hp_image_info info;
    float *src = hp_image_decode_file(path, HP_LAYOUT_RGBA32F, NULL, &info, &bench_err);
    float *out = malloc((size_t)w * h * 16);
    CHECK(src && out);
    for (uint32_t y = 0; y < h; y++) {
        uint32_t sy = (y / info.height) % 2 ? info.height - 1 - y % info.height : y % info.height;
        for (uint32_t x = 0; x < w; x++) {
            uint32_t sx = (x / info.width) % 2 ? info.width - 1 - x % info.width : x % info.width;
            memcpy(out + 4 * ((size_t)y * w + x), src + 4 * ((size_t)sy * info.width + sx), 16);
        }
    }
    free(src);
    return out;
}

/* 8-bit within 1 level, 16-bit within 1e-3 relative (2 levels near black): test_ocio's bounds. */
static bool matches(const void *g, const void *c, size_t values, uint32_t bits, double *worst)
{
    *worst = 0;
    bool ok = true;
    for (size_t i = 0; i < values; i++) {
        double a = bits == 16 ? ((const uint16_t *)g)[i] : ((const uint8_t *)g)[i];
        double b = bits == 16 ? ((const uint16_t *)c)[i] : ((const uint8_t *)c)[i];
        double d = fabs(a - b);
        *worst = fmax(*worst, d);
        ok = ok && d <= (bits == 16 ? fmax(1e-3 * b, 2.0) : 1.0);
    }
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_ocio ACES_CONFIG BLENDER_CONFIG FRAME.exr [--runs N] [--quick] [--device D]\n");
        return 2;
    }
    bench_args args = {.runs = 50};
    if (!bench_parse_args(argc - 3, argv + 3, "bench_ocio ACES BLENDER FRAME [--runs N] [--quick] [--device D]", 5,
                          &args, NULL, NULL))
        return 2;
    uint32_t runs = args.runs < 5 ? 5 : args.runs > 256 ? 256 : args.runs;
    bench_init(args.device, TS_COUNT * runs);
    hp_ocio_config *configs[2] = {NULL, NULL};
    for (int c = 0; c < 2; c++)
        CHECK(hp_ocio_config_load(argv[1 + c], &configs[c], &bench_err) == HP_OK);
    hp_ocio_stage *stages[2][VARIANTS];
    for (int c = 0; c < 2; c++)
        for (size_t v = 0; v < VARIANTS; v++)
            CHECK(hp_ocio_stage_create_with(bench_gpu, configs[c], 8, &variants[v], &stages[c][v], &bench_err) ==
                  HP_OK);
    uint32_t w = args.quick ? 640 : 3840, h = args.quick ? 360 : 2160;
    size_t count = (size_t)w * h;
    float *frame = tiled_frame(argv[3], w, h);
    printf("# bench_ocio: %ux%u frame of real texture (%s tiled), %u runs per configuration (median)\n\n", w, h, argv[3],
           runs);

    hp_tone *tone;
    CHECK(hp_tone_create(bench_gpu, &tone, &bench_err) == HP_OK);
    hp_buffer stats, params_buf, state, flush, staging, input, output, host;
    CHECK(hp_buffer_create(bench_gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "stats", &stats, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_TONE_PARAMS_WORDS * 4, HP_MEM_DEVICE, "params", &params_buf, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_TONE_STATE_WORDS * 4, HP_MEM_DEVICE, "state", &state, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, 256ull << 20, HP_MEM_DEVICE, "l2_flush", &flush, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, count * 16, HP_MEM_UPLOAD, "staging", &staging, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, count * 16, HP_MEM_DEVICE, "frame", &input, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, count * 8, HP_MEM_DEVICE, "image", &output, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, count * 8, HP_MEM_READBACK, "image_host", &host, &bench_err) == HP_OK);
    bench_ceilings ceil;
    bench_ceilings_begin(&ceil, args.quick ? 4 : 20, args.quick ? 0.2 : 2.0, 1024);
    /* Statistics a fixed exposure needs none of: the exposure stage reads them, so they are zeroed once. */
    bench_begin();
    vkCmdFillBuffer(bench_cmd, stats.buffer, 0, VK_WHOLE_SIZE, 0);
    bench_barrier_all();
    bench_submit_and_wait();

    uint8_t *cpu = malloc(count * 8);
    double *ms_exp = calloc(runs, sizeof(double)), *ms_pass = calloc(runs, sizeof(double));
    typedef struct out_row {
        const char *format, *label;
        char check[96];
        double made_ms, exposure, pass, in_mb, out_mb;
    } out_row;
    out_row rows[2 * TRANSFORMS];
    size_t nrows = 0;
    for (int f = 0; f < 2; f++) {
        hp_pixel_format format = f ? HP_PIXEL_RGBA32F : HP_PIXEL_RGBA16F;
        for (size_t i = 0; i < count * 4; i++) {
            if (f)
                ((float *)staging.mapped)[i] = frame[i];
            else
                ((uint16_t *)staging.mapped)[i] = hp_float_to_half(frame[i]);
        }
        float *as_read = malloc(count * 16); /* the values the GPU reads, for the CPU's reference */
        for (size_t i = 0; i < count * 4; i++)
            as_read[i] = f ? frame[i] : hp_half_to_float(((uint16_t *)staging.mapped)[i]);
        bench_begin();
        VkBufferCopy up = {.size = count * hp_pixel_format_size(format)};
        vkCmdCopyBuffer(bench_cmd, staging.buffer, input.buffer, 1, &up);
        bench_barrier_all();
        bench_submit_and_wait();
        for (size_t t = 0; t < TRANSFORMS; t++) {
            const transform *tr = &transforms[t];
            hp_params p;
            hp_params_defaults(&p);
            p.exposure.mode = HP_EXPOSURE_FIXED;
            p.exposure.stops = 0;
            p.output.dither = false;
            p.output.format = HP_OUTPUT_PNG;
            p.output.bit_depth = tr->bits;
            uint32_t words[HP_TONE_PARAMS_WORDS];
            hp_tone_pack_params(&p, words);
            hp_tone_output kind = tr->bits == 16 ? HP_TONE_OUT_RGBA16 : HP_TONE_OUT_RGBA8;
            hp_ocio_entry *entry = NULL;
            hp_ocio_stage *stage = tr->config >= 0 ? stages[tr->config][tr->variant] : NULL;
            bool made = false, applied = true;
            double made_ms = 0;
            if (stage) {
                hp_ocio_view_key key = tr->key;
                CHECK(hp_ocio_stage_acquire(stage, &key, format, kind, &entry, &made, &bench_err) == HP_OK);
                hp_ocio_stage_stats st;
                hp_ocio_stage_stats_get(stage, &st);
                made_ms = made ? st.last_made_ms : 0;
                /* A Filmic row of the daemon's way must have its 3D LUT in a buffer, or it measures nothing new. */
                applied = tr->config != 1 || tr->variant != V_DAEMON || hp_ocio_entry_buffer_luts(entry) > 0;
            }
            hp_tone_io tio = {.pixels = input.address, .format = format, .width = w, .height = h,
                              .stats = stats.address, .params = params_buf.address, .state = state.address,
                              .output = output.address, .kind = kind};
            hp_ocio_io oio = {.pixels = input.address, .format = format, .width = w, .height = h,
                              .state = state.address, .output = output.address, .kind = kind};
            bench_warm_up(args.quick ? 0.05 : 0.5, &ceil.a, &ceil.b);
            bench_begin();
            vkCmdUpdateBuffer(bench_cmd, params_buf.buffer, 0, sizeof(words), words);
            vkCmdResetQueryPool(bench_cmd, bench_queries, 0, TS_COUNT * runs);
            for (uint32_t i = 0; i < runs; i++) {
                vkCmdFillBuffer(bench_cmd, flush.buffer, 0, VK_WHOLE_SIZE, i);
                bench_barrier_all();
                vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, TS_COUNT * i);
                hp_tone_record_exposure(tone, bench_cmd, &tio);
                vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, TS_COUNT * i + 1);
                if (entry)
                    hp_ocio_stage_record(entry, bench_cmd, &oio);
                else
                    hp_tone_record_map(tone, bench_cmd, &tio);
                vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, TS_COUNT * i + 2);
                bench_barrier_all();
            }
            VkBufferCopy down = {.size = count * (tr->bits / 2)};
            vkCmdCopyBuffer(bench_cmd, output.buffer, host.buffer, 1, &down);
            bench_barrier_all();
            bench_submit_and_wait();
            static uint64_t ts[TS_COUNT * 256];
            bench_read_timestamps(TS_COUNT * runs, ts);
            double period = hp_gpu_get_info(bench_gpu)->timestamp_period_ns * 1e-6;
            for (uint32_t i = 0; i < runs; i++) {
                ms_exp[i] = (double)(ts[TS_COUNT * i + 1] - ts[TS_COUNT * i]) * period;
                ms_pass[i] = (double)(ts[TS_COUNT * i + 2] - ts[TS_COUNT * i + 1]) * period;
            }
            double exp_med = bench_summarize(ms_exp, runs).median, pass_med = bench_summarize(ms_pass, runs).median;
            char check[96] = "-";
            if (entry) {
                hp_ocio_cpu *proc = NULL;
                double worst = -1;
                hp_buffer_invalidate(bench_gpu, &host);
                bool ok = hp_ocio_cpu_make(configs[tr->config], &tr->key, &proc, &bench_err) == HP_OK &&
                          hp_cpu_ocio(proc, as_read, w, h, 1.0, false, tr->bits, cpu, &bench_err) == HP_OK &&
                          matches(host.mapped, cpu, count * 4, tr->bits, &worst);
                snprintf(check, sizeof check, "%s (worst %.0f levels)%s", ok ? "ok" : "MISMATCH", worst,
                         applied ? "" : ", 3D LUT NOT IN A BUFFER");
                hp_ocio_cpu_free(proc);
                if (f == 0) { /* the driver's statistics: registers, binary size (docs/BENCHMARKS.md, 2026-11-29) */
                    char st[512];
                    hp_ocio_entry_statistics(bench_gpu, entry, format, kind, st, sizeof st);
                    printf("# %s: %s\n", tr->label, st);
                }
                hp_ocio_stage_release(stage, entry);
            }
            out_row *r = &rows[nrows++];
            *r = (out_row){.format = hp_pixel_format_name(format), .label = tr->label, .made_ms = made_ms,
                           .exposure = exp_med, .pass = pass_med,
                           .in_mb = (double)count * hp_pixel_format_size(format) / 1e6,
                           .out_mb = (double)count * (tr->bits / 2) / 1e6};
            snprintf(r->check, sizeof r->check, "%s", check);
        }
        free(as_read);
    }
    double copy_bw = bench_ceilings_end(&ceil);
    printf("\n| input | transform | program made (ms) | exposure ms | pass ms | floor ms | pass / floor | check |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < nrows; i++) {
        const out_row *r = &rows[i];
        double floor_ms = (r->in_mb + r->out_mb) * 1e6 / copy_bw * 1e3;
        printf("| %s | %s | %.1f | %.4f | %.4f | %.4f | %.2f | %s |\n", r->format, r->label, r->made_ms, r->exposure,
               r->pass, floor_ms, r->pass / floor_ms, r->check);
    }
    printf("\nfloor: the frame read once and the image written once at the copy ceiling (%.0f GB/s); program made: "
           "the first use's OCIO shader, glslang, LUT upload and pipeline (0: made for the other input already).\n",
           copy_bw / 1e9);
    free(cpu);
    free(ms_exp);
    free(ms_pass);
    free(frame);
    hp_buffer_destroy(bench_gpu, &stats);
    hp_buffer_destroy(bench_gpu, &params_buf);
    hp_buffer_destroy(bench_gpu, &state);
    hp_buffer_destroy(bench_gpu, &flush);
    hp_buffer_destroy(bench_gpu, &staging);
    hp_buffer_destroy(bench_gpu, &input);
    hp_buffer_destroy(bench_gpu, &output);
    hp_buffer_destroy(bench_gpu, &host);
    hp_tone_destroy(&tone);
    for (int c = 0; c < 2; c++) {
        for (size_t v = 0; v < VARIANTS; v++)
            hp_ocio_stage_destroy(&stages[c][v]);
        hp_ocio_config_free(configs[c]);
    }
    return bench_shutdown();
}

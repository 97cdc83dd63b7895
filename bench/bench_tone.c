/* Benchmark of the tone pipeline, for the GPU host (docs/BENCHMARKS.md): reduction, exposure and the
 * fused tone pass, each bracketed by timestamp queries, at 1080p, 4K and 8K, RGBA16F and RGBA32F input,
 * for the default look and a few heavier ones (AgX, a blurred adaptation luminance, 16-bit output).
 *
 * Bytes moved per stage: the reduction reads the frame; exposure reads 1 KiB of statistics; the tone
 * pass reads the frame and writes the image (plus, with gamma.radius, a float luminance image written
 * once and read three times). The floor of the whole pipeline is the frame read once and the image
 * written once at the copy bandwidth measured in the same run (the "bandwidth floor").
 *
 * The GPU is warmed up first, every run reads its frame from device memory (a 256 MiB overwrite between
 * runs evicts the L2), and each configuration's image is checked against the CPU reference at 1080p
 * (99.9% of 8-bit values identical, none off by more than one).
 *
 * Usage: bench_tone [--runs N] [--quick] [--smoke] [--device D]
 * --smoke: one 320x180 frame per format, 5 runs, the images checked; the exit status says whether every
 * check passed (tests/bench_smoke.py runs it where the tests run). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_common.h"
#include "hp_shared.h"
#include "pipeline/tone.h"

enum { TS_START, TS_REDUCE, TS_EXPOSURE, TS_TONE, TS_COUNT };

typedef struct look {
    const char *name;
    void (*apply)(hp_params *p);
    bool yuv; /* the tone pass writes Y'CbCr 4:2:0 planes, as the daemon does for lossy WebP */
    float alpha; /* every pixel's alpha, 0 for the frame's own (1): below 1, the translucent word's worst case */
} look;

static void look_default(hp_params *p) { (void)p; }
static void look_agx(hp_params *p) { p->tonemap.op = HP_TONE_AGX; }
static void look_radius(hp_params *p) { p->gamma.radius = 8; }
static void look_16bit(hp_params *p)
{
    p->output.format = HP_OUTPUT_PNG;
    p->output.bit_depth = 16;
}

/* Output colour spaces (issue 17): a Rec.709 frame converted into the display's primaries as it is read,
 * the working space's Y row and the operators' matrices read from tone_params (HP_TONE_FLAG_WIDE). */
static void for_output(hp_params *p, hp_output_colorspace out)
{
    hp_err err = {0};
    p->output.colorspace = out;
    hp_input_color_make(hp_colorspace_chromaticities(HP_COLORSPACE_REC709), out, &p->color, &err);
}
static void look_p3(hp_params *p) { for_output(p, HP_OUTPUT_DISPLAY_P3); }
static void look_p3_agx(hp_params *p)
{
    for_output(p, HP_OUTPUT_DISPLAY_P3);
    p->tonemap.op = HP_TONE_AGX;
}
static void look_rec2020(hp_params *p)
{
    look_16bit(p);
    for_output(p, HP_OUTPUT_REC2020);
}

static const look looks[] = {
    {"default (reinhard_extended, local gamma, 8-bit, dither)", look_default},
    {"default, as Y'CbCr 4:2:0 (what the daemon's default WebP reads back)", look_default, true},
    {"agx", look_agx},
    {"gamma.radius 8", look_radius},
    {"16-bit output", look_16bit},
    /* Every workgroup finds translucent pixels and sets tone_state's translucent word: the most atomics. */
    {"default, alpha 0.5 everywhere", look_default, false, 0.5f},
    {"default, as Y'CbCr 4:2:0 with an alpha plane, alpha 0.5 everywhere", look_default, true, 0.5f},
    {"output.colorspace display_p3", look_p3},
    {"output.colorspace display_p3, agx", look_p3_agx},
    {"output.colorspace rec2020, 16-bit output", look_rec2020},
};

int main(int argc, char **argv)
{
    bool all_pass = true; /* every checked image against the CPU reference: the exit status */
    bench_args args = {.runs = 100};
    static const char *const extra[] = {"--smoke", NULL};
    bool smoke = false;
    if (!bench_parse_args(argc, argv, "bench_tone [--runs N] [--quick] [--smoke] [--device D]", 5, &args, extra,
                          &smoke))
        return 2;
    uint32_t runs = smoke ? 5 : args.runs;
    bool quick = args.quick || smoke;
    if (smoke)
        bench_ceiling_bytes = 64ull << 20;
    const char *device = args.device;
    if (runs < 5)
        runs = 5;
    if (runs > 256)
        runs = 256;
    bench_init(device, TS_COUNT * runs);
    printf("# bench_tone: %u runs per configuration (median)\n\n", runs);
    const hp_gpu_info *gi = hp_gpu_get_info(bench_gpu);
    uint32_t resident = gi->sm_count && gi->warps_per_sm ? gi->sm_count * gi->warps_per_sm * 32 / 256 : 1024;

    hp_reduce *reduce;
    hp_tone *tone;
    CHECK(hp_reduce_create(bench_gpu, NULL, &reduce, &bench_err) == HP_OK);
    CHECK(hp_tone_create(bench_gpu, &tone, &bench_err) == HP_OK);
    hp_buffer stats, scratch, params_buf, state, flush;
    CHECK(hp_buffer_create(bench_gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "bench_stats", &stats, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, hp_reduce_scratch_size(0), HP_MEM_DEVICE, "bench_scratch", &scratch,
                           &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_TONE_PARAMS_WORDS * 4, HP_MEM_DEVICE, "bench_tone_params", &params_buf,
                           &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, HP_TONE_STATE_WORDS * 4, HP_MEM_DEVICE, "bench_tone_state", &state,
                           &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, smoke ? 16ull << 20 : 256ull << 20, HP_MEM_DEVICE, "bench_l2_flush", &flush,
                           &bench_err) == HP_OK);
    /* The tone passes' driver statistics (registers, shared memory): a pipeline that keeps shared memory
     * it never uses runs slower (docs/BENCHMARKS.md, the regression of session 7). */
    static const char *const kinds[4] = {"luminance", "rgba8", "rgba16", "yuv420"};
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < 4; k++) {
            char text[1024];
            hp_tone_statistics(tone, (hp_pixel_format)f, (hp_tone_output)k, false, text, sizeof(text));
            if (text[0])
                printf("pipeline tonemap %s -> %s: %s\n", hp_pixel_format_name((hp_pixel_format)f), kinds[k], text);
        }
    }
    bench_begin();
    hp_reduce_init_scratch(reduce, bench_cmd, &scratch);
    bench_submit_and_wait();

    bench_ceilings ceil;
    bench_ceilings_begin(&ceil, quick ? 4 : 20, quick ? 0.2 : 2.0, resident);

    typedef struct frame_size { uint32_t w, h; const char *name; } frame_size;
    static const frame_size full_sizes[] = {{1920, 1080, "1080p"}, {3840, 2160, "4K"}, {7680, 4320, "8K"}};
    static const frame_size smoke_sizes[] = {{320, 180, "320x180"}};
    const frame_size *sizes = smoke ? smoke_sizes : full_sizes;
    size_t size_count = smoke || quick ? 1 : 3;
    size_t look_count = sizeof(looks) / sizeof(looks[0]);
    typedef struct row {
        const char *size, *format, *look;
        double in_mb, out_mb, reduce, exposure, tone, total, floor_ms;
        char check[64];
    } row;
    row *rows = calloc(size_count * 2 * look_count, sizeof(row));
    size_t nrows = 0;
    double *ms = calloc(runs, sizeof(double));

    for (size_t z = 0; z < size_count; z++) {
        for (int f = 0; f < 2; f++) {
            hp_pixel_format format = (hp_pixel_format)f;
            uint32_t w = sizes[z].w, h = sizes[z].h;
            uint64_t count = (uint64_t)w * h;
            VkDeviceSize in_bytes = count * hp_pixel_format_size(format);
            hp_buffer staging, input, output, output_host, lan_a, lan_b;
            CHECK(hp_buffer_create(bench_gpu, in_bytes, HP_MEM_UPLOAD, "bench_staging", &staging, &bench_err) == HP_OK);
            CHECK(hp_buffer_create(bench_gpu, (in_bytes + 15) & ~15ull, HP_MEM_DEVICE, "bench_frame", &input,
                                   &bench_err) == HP_OK);
            CHECK(hp_buffer_create(bench_gpu, count * 8, HP_MEM_DEVICE, "bench_image", &output, &bench_err) == HP_OK);
            CHECK(hp_buffer_create(bench_gpu, count * 8, HP_MEM_READBACK, "bench_image_host", &output_host,
                                   &bench_err) == HP_OK);
            CHECK(hp_buffer_create(bench_gpu, count * 4, HP_MEM_DEVICE, "bench_lan_a", &lan_a, &bench_err) == HP_OK);
            CHECK(hp_buffer_create(bench_gpu, count * 4, HP_MEM_DEVICE, "bench_lan_b", &lan_b, &bench_err) == HP_OK);
            bench_fill_frame(staging.mapped, format, count);
            bench_begin();
            VkBufferCopy up = {.size = in_bytes};
            vkCmdCopyBuffer(bench_cmd, staging.buffer, input.buffer, 1, &up);
            bench_barrier_all();
            bench_submit_and_wait();

            float frame_alpha = 1.0f;
            for (size_t l = 0; l < look_count; l++) {
                float alpha = looks[l].alpha > 0.0f ? looks[l].alpha : 1.0f;
                if (alpha != frame_alpha) {
                    bench_set_alpha(staging.mapped, format, count, alpha);
                    bench_begin();
                    vkCmdCopyBuffer(bench_cmd, staging.buffer, input.buffer, 1, &up);
                    bench_barrier_all();
                    bench_submit_and_wait();
                    frame_alpha = alpha;
                }
                hp_params p;
                hp_params_defaults(&p);
                looks[l].apply(&p);
                uint32_t words[HP_TONE_PARAMS_WORDS];
                hp_tone_pack_params(&p, words);
                hp_reduce_params rp = HP_REDUCE_PARAMS_DEFAULTS;
                hp_reduce_io rio = {.pixels = input.address, .pixel_count = count, .format = format,
                                    .stats = &stats, .scratch = &scratch};
                hp_tone_output kind = p.output.bit_depth == 16 ? HP_TONE_OUT_RGBA16
                                      : looks[l].yuv            ? HP_TONE_OUT_YUV420
                                                                : HP_TONE_OUT_RGBA8;
                bool yuv_alpha = looks[l].yuv && looks[l].alpha > 0.0f;
                size_t out_bytes = hp_tone_output_bytes(kind, w, h, yuv_alpha);
                hp_tone_io tio = {.pixels = input.address, .format = format, .width = w, .height = h,
                                  .yuv_alpha = yuv_alpha,
                                  .stats = stats.address, .params = params_buf.address, .state = state.address,
                                  .output = output.address, .kind = kind, .gamma_radius = p.gamma.radius,
                                  .lan_a = lan_a.address, .lan_b = lan_b.address,
                                  .convert_input = p.color.convert, .colorspace = p.output.colorspace};
                double stage_ms[TS_COUNT][256];
                /* The CPU work between configurations (building 8K frames, the 1080p reference) lets the
                 * GPU drop its clocks: bring them back before timing. */
                bench_warm_up(quick ? 0.05 : 0.5, &ceil.a, &ceil.b);
                uint32_t done = 0, batch = runs;
                {
                    bench_begin();
                    vkCmdUpdateBuffer(bench_cmd, params_buf.buffer, 0, sizeof(words), words);
                    vkCmdResetQueryPool(bench_cmd, bench_queries, 0, TS_COUNT * batch);
                    for (uint32_t i = 0; i < batch; i++) {
                        vkCmdFillBuffer(bench_cmd, flush.buffer, 0, VK_WHOLE_SIZE, i);
                        bench_barrier_all();
                        uint32_t q = TS_COUNT * i;
                        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, q + 0);
                        hp_reduce_record(reduce, bench_cmd, &rio, &rp);
                        bench_barrier_all();
                        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, q + 1);
                        hp_tone_record_exposure(tone, bench_cmd, &tio);
                        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, q + 2);
                        hp_tone_record_map(tone, bench_cmd, &tio);
                        vkCmdWriteTimestamp(bench_cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, bench_queries, q + 3);
                        bench_barrier_all();
                    }
                    VkBufferCopy down = {.size = out_bytes};
                    vkCmdCopyBuffer(bench_cmd, output.buffer, output_host.buffer, 1, &down);
                    bench_barrier_all();
                    bench_submit_and_wait();
                    static uint64_t ts[TS_COUNT * 256];
                    bench_read_timestamps(TS_COUNT * batch, ts);
                    double period = hp_gpu_get_info(bench_gpu)->timestamp_period_ns * 1e-6;
                    for (uint32_t i = 0; i < batch; i++)
                        for (int s = 1; s < TS_COUNT; s++)
                            stage_ms[s][done + i] = (double)(ts[TS_COUNT * i + s] - ts[TS_COUNT * i + s - 1]) * period;
                    for (uint32_t i = 0; i < batch; i++)
                        stage_ms[0][done + i] = (double)(ts[TS_COUNT * i + 3] - ts[TS_COUNT * i]) * period;
                    done += batch;
                }
                row *r = &rows[nrows++];
                r->size = sizes[z].name;
                r->format = hp_pixel_format_name(format);
                r->look = looks[l].name;
                r->in_mb = (double)in_bytes / 1e6;
                r->out_mb = (double)out_bytes / 1e6;
                memcpy(ms, stage_ms[TS_REDUCE], runs * sizeof(double));
                r->reduce = bench_summarize(ms, runs).median;
                memcpy(ms, stage_ms[TS_EXPOSURE], runs * sizeof(double));
                r->exposure = bench_summarize(ms, runs).median;
                memcpy(ms, stage_ms[TS_TONE], runs * sizeof(double));
                r->tone = bench_summarize(ms, runs).median;
                memcpy(ms, stage_ms[0], runs * sizeof(double));
                r->total = bench_summarize(ms, runs).median;
                snprintf(r->check, sizeof(r->check), "-");
                if (z == 0) { /* the CPU reference at 1080p */
                    hp_lum_stats cs;
                    hp_cpu_reduce(staging.mapped, format, count, -16, 16, &cs);
                    hp_tone_state ts_cpu;
                    uint8_t *cpu = malloc(count * 8);
                    if (kind == HP_TONE_OUT_YUV420)
                        hp_cpu_tone_frame_yuv420(staging.mapped, format, w, h, &cs, &p, yuv_alpha, &ts_cpu, cpu);
                    else
                        hp_cpu_tone_frame(staging.mapped, format, w, h, &cs, &p, &ts_cpu, cpu);
                    hp_buffer_invalidate(bench_gpu, &output_host);
                    size_t values = kind == HP_TONE_OUT_YUV420 ? out_bytes : count * 4, same = 0, worse = 0;
                    for (size_t i = 0; i < values; i++) {
                        int a = kind == HP_TONE_OUT_RGBA16 ? ((uint16_t *)output_host.mapped)[i] : ((uint8_t *)output_host.mapped)[i];
                        int b = kind == HP_TONE_OUT_RGBA16 ? ((uint16_t *)cpu)[i] : cpu[i];
                        same += a == b;
                        worse += abs(a - b) > 1;
                    }
                    free(cpu);
                    /* tests/test_tone.c's criteria: 8 bits 99.9% identical and none off by more than one;
                     * 16 bits 99% identical and at most one value in a million off by more than one. */
                    bool sixteen = kind == HP_TONE_OUT_RGBA16;
                    bool pass = (double)same / (double)values >= (sixteen ? 0.99 : 0.999) &&
                                (double)worse <= (sixteen ? (double)values * 1e-6 : 0.0);
                    all_pass = all_pass && pass;
                    snprintf(r->check, sizeof(r->check), "%s (%.3f%% same, %zu off by more than 1)",
                             pass ? "ok" : "MISMATCH",
                             100.0 * (double)same / (double)values, worse);
                }
            }
            hp_buffer_destroy(bench_gpu, &staging);
            hp_buffer_destroy(bench_gpu, &input);
            hp_buffer_destroy(bench_gpu, &output);
            hp_buffer_destroy(bench_gpu, &output_host);
            hp_buffer_destroy(bench_gpu, &lan_a);
            hp_buffer_destroy(bench_gpu, &lan_b);
        }
    }
    double copy_bw = bench_ceilings_end(&ceil);

    printf("\n| size | input | look | MB in | MB out | reduce ms | exposure ms | tone pass ms | total ms | floor ms | "
           "total / floor | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < nrows; i++) {
        row *r = &rows[i];
        r->floor_ms = (r->in_mb + r->out_mb) * 1e6 / copy_bw * 1e3;
        printf("| %s | %s | %s | %.1f | %.1f | %.4f | %.4f | %.4f | %.4f | %.4f | %.1f | %s |\n", r->size, r->format,
               r->look, r->in_mb, r->out_mb, r->reduce, r->exposure, r->tone, r->total, r->floor_ms,
               r->total / r->floor_ms, r->check);
    }
    printf("\nfloor: the frame read once and the image written once at the copy ceiling (%.0f GB/s).\n", copy_bw / 1e9);
    free(rows);
    free(ms);
    hp_buffer_destroy(bench_gpu, &stats);
    hp_buffer_destroy(bench_gpu, &scratch);
    hp_buffer_destroy(bench_gpu, &params_buf);
    hp_buffer_destroy(bench_gpu, &state);
    hp_buffer_destroy(bench_gpu, &flush);
    hp_tone_destroy(&tone);
    hp_reduce_destroy(&reduce);
    return bench_shutdown() || !all_pass ? 1 : 0;
}

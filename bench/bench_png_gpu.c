/* PNG filtering and deflate on the GPU (pipeline/png_gpu.h, issue 20): each pass's GPU time (timestamps
 * around every dispatch, median of the runs) at 1080p, 4K and 8K, beside the CPU on the same host: the
 * daemon's own CPU encoder (api/codecs/encode.h, strips on every core, the default effort), libdeflate level 1 on
 * every core (the filtered bytes cut into one strip a core, as the CPU encoder cuts them), zlib level 1 and
 * deflate_runs (api/codecs/deflate_runs.h) on one core; every compressed size. The images: tests/data's Blender
 * street frame tone-mapped by the CPU reference (default parameters) and tiled 2 x 2, 4 x 4 and 8 x 8 (RGB,
 * 8 bits; 16 bits at 4K), and the frame bench_http.py posts (scaled up 4x bilinearly, through half floats,
 * as tools/make_frame does): smooth, so its sizes differ from the tiled ones'. HP_BENCH_FRAMES=a.exr,b.exr takes
 * those frames instead (bench_http's frames of real texture, tools/make_frame ... --mirror); HP_BENCH_PNG_SHAPE=WGxCHUNK
 * another launch shape; HP_BENCH_GPU_ONLY the first two variants alone, no CPU coders (a study of the shader). Each
 * variant is timed after a second of encodes (the GPU's clock up). Every stream is checked once: zlib inflates it to
 * the CPU reference's filtered bytes. */
#include <libdeflate.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "api/codecs/deflate_runs.h"
#include "api/codecs/encode.h"
#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "bench_common.h"
#include "common/cpus.h"
#include "pipeline/clock_hold.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/frame_graph.h"
#include "pipeline/png_gpu.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* A frame file's pixels as RGBA32F; *w, *h its size. */
static float *frame_file(const char *path, uint32_t *w, uint32_t *h)
{
    hp_image_info info;
    float *frame = hp_image_decode_file(path, HP_LAYOUT_RGBA32F, NULL, &info, &bench_err);
    CHECK(frame);
    *w = info.width, *h = info.height;
    return frame;
}

/* The street frame as RGBA32F; *w, *h its size. */
static float *street_frame(uint32_t *w, uint32_t *h)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/blender_street_960x540_singlelayer.exr", HP_TEST_DATA);
    return frame_file(path, w, h);
}

/* A frame tone-mapped to `depth` bits by the CPU reference (default parameters). */
static uint8_t *tone(const float *frame, uint32_t w, uint32_t h, uint32_t depth)
{
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fp.params.output.bit_depth = depth;
    hp_lum_stats cs;
    hp_tone_state ts;
    uint8_t *toned = malloc((size_t)w * h * (depth == 8 ? 4 : 8));
    CHECK(toned && hp_cpu_render_frame(frame, HP_PIXEL_RGBA32F, w, h, &fp.params, &cs, &ts, toned) == HP_OK);
    return toned;
}

/* The street frame tone-mapped to `depth` bits, tiled tiles x tiles; *w, *h its size. */
static uint8_t *street_tiled(uint32_t depth, uint32_t tiles, uint32_t *w, uint32_t *h)
{
    uint32_t sw, sh;
    float *frame = street_frame(&sw, &sh);
    uint8_t *toned = tone(frame, sw, sh, depth);
    size_t px = depth == 8 ? 4 : 8;
    *w = sw * tiles, *h = sh * tiles;
    uint8_t *img = malloc((size_t)*w * *h * px);
    CHECK(img != NULL);
    for (uint32_t y = 0; y < *h; y++)
        for (uint32_t tx = 0; tx < tiles; tx++)
            memcpy(img + ((size_t)y * *w + (size_t)tx * sw) * px, toned + (size_t)(y % sh) * sw * px, (size_t)sw * px);
    free(frame), free(toned);
    return img;
}

/* The street frame scaled up `factor` times as tools/make_frame makes bench_http's frame (bilinear, pixel
 * centres, clamped at the edges, rounded to half floats), then tone-mapped to `depth` bits. */
static uint8_t *street_scaled(uint32_t depth, uint32_t factor, uint32_t *w, uint32_t *h)
{
    uint32_t sw, sh;
    float *src = street_frame(&sw, &sh);
    *w = sw * factor, *h = sh * factor;
    float *big = malloc((size_t)*w * *h * 16);
    CHECK(big != NULL);
    for (uint32_t y = 0; y < *h; y++) {
        float fy = ((float)y + 0.5f) / (float)factor - 0.5f;
        uint32_t y0 = fy < 0 ? 0 : (uint32_t)fy, y1 = y0 + 1 < sh ? y0 + 1 : y0;
        float ty = fy < 0 ? 0 : fy - (float)y0;
        for (uint32_t x = 0; x < *w; x++) {
            float fx = ((float)x + 0.5f) / (float)factor - 0.5f;
            uint32_t x0 = fx < 0 ? 0 : (uint32_t)fx, x1 = x0 + 1 < sw ? x0 + 1 : x0;
            float tx = fx < 0 ? 0 : fx - (float)x0;
            const float *r0 = src + 4 * (size_t)y0 * sw, *r1 = src + 4 * (size_t)y1 * sw;
            for (int c = 0; c < 4; c++) {
                float a = r0[4 * x0 + c] + (r0[4 * x1 + c] - r0[4 * x0 + c]) * tx;
                float b = r1[4 * x0 + c] + (r1[4 * x1 + c] - r1[4 * x0 + c]) * tx;
                big[((size_t)y * *w + x) * 4 + c] = hp_half_to_float(hp_float_to_half(a + (b - a) * ty));
            }
        }
    }
    uint8_t *img = tone(big, *w, *h, depth);
    free(src), free(big);
    return img;
}

/* libdeflate level 1 on one strip of the filtered bytes (a thread each). */
typedef struct ld_strip {
    const uint8_t *in;
    size_t in_len, out_len;
} ld_strip;

static void *ld_compress(void *arg)
{
    ld_strip *st = arg;
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(1);
    size_t cap = libdeflate_deflate_compress_bound(c, st->in_len);
    uint8_t *out = malloc(cap);
    CHECK(c && out);
    st->out_len = libdeflate_deflate_compress(c, st->in, st->in_len, out, cap);
    CHECK(st->out_len > 0);
    free(out);
    libdeflate_free_compressor(c);
    return NULL;
}

/* libdeflate level 1 over `threads` strips at once: wall ms; *bytes the strips' deflate bytes together. */
static double libdeflate_all_cores(const uint8_t *in, size_t len, unsigned threads, size_t *bytes)
{
    ld_strip st[256];
    pthread_t tid[256];
    threads = threads < 1 ? 1 : threads > 256 ? 256 : threads;
    size_t step = (len + threads - 1) / threads;
    double t0 = now_ms();
    for (unsigned i = 0; i < threads; i++) {
        size_t at = (size_t)i * step < len ? (size_t)i * step : len;
        st[i] = (ld_strip){.in = in + at, .in_len = len - at < step ? len - at : step};
        CHECK(pthread_create(&tid[i], NULL, ld_compress, &st[i]) == 0);
    }
    *bytes = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        *bytes += st[i].out_len;
    }
    return now_ms() - t0;
}

/* The median of `runs` calls' wall ms of the CPU encoder (api/codecs/encode.h, every core, default effort). */
static double cpu_encoder(const uint8_t *img, uint32_t w, uint32_t h, uint32_t depth, uint32_t runs, size_t *bytes,
                          double *cpu_ms)
{
    hp_params p;
    hp_params_defaults(&p);
    p.output.format = HP_OUTPUT_PNG;
    p.output.bit_depth = depth;
    double *ms = calloc(runs, sizeof(double));
    CHECK(ms != NULL);
    for (uint32_t r = 0; r < runs; r++) {
        hp_encoded enc = {0};
        double t0 = now_ms();
        CHECK(hp_encode(img, w, h, depth, false, HP_ENCODING_SRGB_LIKE, &p.output, &enc, &bench_err) == HP_OK);
        ms[r] = now_ms() - t0;
        *bytes = enc.size;
        *cpu_ms = enc.cpu_ms;
        hp_encoded_free(&enc);
    }
    double median = bench_median(ms, runs);
    free(ms);
    return median;
}

static const char *const pass_names[HP_PNG_GPU_PASSES] = {"choose", "apply", "deflate", "offsets", "compact"};

/* The buffers of one image's encode: the image uploaded to the GPU, the passes' own, and read-backs. */
enum { STAGING, IMAGE, FILTERED, TYPES, SLOTS, TABLE, TOKENS, JOINED, RB_FILTERED, RB_JOINED, RB_TABLE, NBUF };

static void png_buffers_create(const hp_png_gpu_layout *l, const uint8_t *img, hp_buffer *b)
{
    const VkDeviceSize sizes[NBUF] = {l->image_size,    l->image_size,  l->filtered_size, l->types_size,
                                      l->slots_size,    l->table_size,  l->tokens_size,   l->joined_size,
                                      l->filtered_size, l->joined_size, l->table_size};
    const hp_mem_kind kinds[NBUF] = {HP_MEM_UPLOAD,   HP_MEM_DEVICE,   HP_MEM_DEVICE, HP_MEM_DEVICE,
                                     HP_MEM_DEVICE,   HP_MEM_DEVICE,   HP_MEM_DEVICE, HP_MEM_DEVICE,
                                     HP_MEM_READBACK, HP_MEM_READBACK, HP_MEM_READBACK};
    for (int i = 0; i < NBUF; i++)
        CHECK(hp_buffer_create(bench_gpu, sizes[i], kinds[i], "bench_png", &b[i], &bench_err) == HP_OK);
    memcpy(b[STAGING].mapped, img, l->image_size);
    hp_buffer_flush(bench_gpu, &b[STAGING]);
    bench_begin();
    VkBufferCopy up = {.size = l->image_size};
    vkCmdCopyBuffer(bench_cmd, b[STAGING].buffer, b[IMAGE].buffer, 1, &up);
    bench_barrier_all();
    bench_submit_and_wait();
}

static hp_png_gpu_io png_io(hp_buffer *b)
{
    return (hp_png_gpu_io){.image = b[IMAGE].address, .filtered = &b[FILTERED], .types = &b[TYPES],
                           .slots = &b[SLOTS], .table = &b[TABLE], .tokens = &b[TOKENS], .joined = &b[JOINED],
                           .timestamps = bench_queries};
}

/* The GPU passes' median times over `runs` submissions into pass_ms (the last entry: all of them). */
static void gpu_times(hp_png_gpu *png, const hp_png_gpu_layout *l, hp_png_gpu_io io, uint32_t runs, double *pass_ms)
{
    double period_ms = hp_gpu_get_info(bench_gpu)->timestamp_period_ns * 1e-6;
    /* The GPU kept busy for a second first: its clocks fall while the CPU works between images (tone-mapping
     * the next one, the CPU's coders), and a variant timed on a cold GPU took 2-6 times its time (H200,
     * docs/bench-raw/2026-11-30-h200-png-deflate-shapes.txt). Then the timed runs, each its own submission (as a
     * frame's would be). */
    for (double t0 = now_ms(); now_ms() - t0 < 1000;) {
        bench_begin();
        io.timestamps = VK_NULL_HANDLE;
        hp_png_gpu_record(png, bench_cmd, l, &io);
        bench_barrier_all();
        bench_submit_and_wait();
    }
    io.timestamps = bench_queries;
    for (uint32_t r = 1; r <= runs; r++) {
        uint32_t q = (r - 1) * HP_PNG_GPU_TIMESTAMPS;
        bench_begin();
        vkCmdResetQueryPool(bench_cmd, bench_queries, q, HP_PNG_GPU_TIMESTAMPS);
        io.first_query = q;
        hp_png_gpu_record(png, bench_cmd, l, &io);
        bench_barrier_all();
        bench_submit_and_wait();
    }
    uint64_t *ts = calloc((size_t)runs * HP_PNG_GPU_TIMESTAMPS, sizeof(uint64_t));
    double *ms = calloc(runs, sizeof(double));
    CHECK(ts && ms);
    bench_read_timestamps(runs * HP_PNG_GPU_TIMESTAMPS, ts);
    for (int k = 0; k <= HP_PNG_GPU_PASSES; k++) {
        for (uint32_t r = 0; r < runs; r++) {
            const uint64_t *t = ts + (size_t)r * HP_PNG_GPU_TIMESTAMPS;
            ms[r] = (double)(k < HP_PNG_GPU_PASSES ? t[k + 1] - t[k] : t[HP_PNG_GPU_PASSES] - t[0]) * period_ms;
        }
        pass_ms[k] = bench_median(ms, runs);
    }
    free(ts), free(ms);
}

/* The deflate pass's variants run side by side (hp_png_gpu_config's switches). */
#define VARIANTS 4
static const char *const variant_names[VARIANTS] = {"GPU, default (hash probe, no reprice)",
                                                    "GPU without the hash probe", "GPU with the reprice",
                                                    "GPU with the reprice, without the hash probe"};

/* One variant on the image: its passes' times into pass_ms, its stream's bytes into *zlen; false when the
 * stream does not inflate to the CPU reference's filtered bytes (want). */
static bool run_variant(hp_png_gpu *png, const hp_png_gpu_layout *l, hp_buffer *b, const uint8_t *want,
                        uint32_t runs, double *pass_ms, size_t *zlen_out)
{
    gpu_times(png, l, png_io(b), runs, pass_ms);
    /* The result, once: read back, joined, inflated against the CPU reference. */
    bench_begin();
    VkBufferCopy f = {.size = l->filtered_size}, s = {.size = l->joined_size}, t = {.size = l->table_size};
    vkCmdCopyBuffer(bench_cmd, b[FILTERED].buffer, b[RB_FILTERED].buffer, 1, &f);
    vkCmdCopyBuffer(bench_cmd, b[JOINED].buffer, b[RB_JOINED].buffer, 1, &s);
    vkCmdCopyBuffer(bench_cmd, b[TABLE].buffer, b[RB_TABLE].buffer, 1, &t);
    bench_barrier_all();
    bench_submit_and_wait();
    for (int i = RB_FILTERED; i <= RB_TABLE; i++)
        hp_buffer_invalidate(bench_gpu, &b[i]);
    size_t zcap = hp_png_gpu_zlib_bound(l), zlen = 0;
    uint8_t *zs = malloc(zcap), *inflated = malloc(l->filtered_bytes);
    CHECK(zs && inflated);
    CHECK(hp_png_gpu_join(l, b[RB_JOINED].mapped, b[RB_TABLE].mapped, zs, zcap, &zlen, &bench_err) == HP_OK);
    uLongf out_len = (uLongf)l->filtered_bytes;
    bool exact = memcmp(b[RB_FILTERED].mapped, want, l->filtered_bytes) == 0 &&
                 uncompress(inflated, &out_len, zs, (uLong)zlen) == Z_OK && out_len == l->filtered_bytes &&
                 memcmp(inflated, want, l->filtered_bytes) == 0;
    free(zs), free(inflated);
    *zlen_out = zlen;
    return exact;
}

/* The GPU's first two variants alone (HP_BENCH_GPU_ONLY: a study of the shader). */
static void report_gpu_only(const hp_png_gpu_layout *l, const char *what, bool exact,
                            double pass_ms[][HP_PNG_GPU_PASSES + 1], const size_t *zlen)
{
    printf("\n%ux%u RGB %u-bit (%s): %u segments; streams %s\n  | variant | deflate ms | total ms | bytes |\n"
           "  |---|---|---|---|\n", l->width, l->height, l->depth, what, l->segments,
           exact ? "inflate exactly" : "WRONG");
    for (int v = 0; v < 2; v++)
        printf("  | %s | %.3f | %.3f | %zu |\n", variant_names[v], pass_ms[v][2], pass_ms[v][HP_PNG_GPU_PASSES],
               zlen[v]);
}

/* Every variant's passes beside the CPU's coders on the same image: the daemon's encoder and libdeflate 1 on
 * every core, zlib 1 and deflate_runs on one. */
static void report_with_cpu(const hp_png_gpu_layout *l, const uint8_t *img, const uint8_t *want, const char *what,
                            bool exact, double pass_ms[][HP_PNG_GPU_PASSES + 1], const size_t *zlen, uint32_t runs)
{
    uint32_t w = l->width, h = l->height, depth = l->depth;
    unsigned cores = hp_usable_cpus();
    size_t enc_bytes = 0, ld_bytes = 0;
    double enc_cpu = 0, enc_ms = cpu_encoder(img, w, h, depth, runs < 5 ? runs : 5, &enc_bytes, &enc_cpu);
    double ld_ms = libdeflate_all_cores(want, l->filtered_bytes, cores, &ld_bytes);
    uLongf z1 = compressBound((uLong)l->filtered_bytes);
    uint8_t *zb = malloc(z1 > hp_deflate_runs_bound(l->filtered_bytes) ? z1 : hp_deflate_runs_bound(l->filtered_bytes));
    double t0 = now_ms();
    CHECK(compress2(zb, &z1, want, (uLong)l->filtered_bytes, 1) == Z_OK);
    double t1 = now_ms();
    size_t runs_len = 0;
    CHECK(hp_deflate_runs(want, l->filtered_bytes, true, zb, &runs_len));
    double t2 = now_ms();

    printf("\n%ux%u RGB %u-bit (%s): %llu filtered bytes, %u segments; streams %s\n", w, h, depth, what,
           (unsigned long long)l->filtered_bytes, l->segments, exact ? "inflate exactly" : "WRONG");
    printf("  | GPU pass (ms) |");
    for (int v = 0; v < VARIANTS; v++)
        printf(" %s |", variant_names[v]);
    printf("\n  |---|---|---|---|---|\n");
    for (int k = 0; k <= HP_PNG_GPU_PASSES; k++) {
        printf("  | %s |", k < HP_PNG_GPU_PASSES ? pass_names[k] : "total");
        for (int v = 0; v < VARIANTS; v++)
            printf(" %.3f |", pass_ms[v][k]);
        printf("\n");
    }
    double fb = (double)l->filtered_bytes;
    printf("\n  | coder | ms | bytes | of the filtered bytes |\n  |---|---|---|---|\n");
    for (int v = 0; v < VARIANTS; v++)
        printf("  | %s (filter and deflate, GPU timestamps) | %.2f | %zu | %.4f |\n", variant_names[v],
               pass_ms[v][HP_PNG_GPU_PASSES], zlen[v], (double)zlen[v] / fb);
    printf("  | CPU encoder, %u cores (the whole PNG; %.0f ms of CPU) | %.2f | %zu | %.4f |\n", cores, enc_cpu,
           enc_ms, enc_bytes, (double)enc_bytes / fb);
    printf("  | libdeflate level 1, %u cores (deflate of the filtered bytes) | %.2f | %zu | %.4f |\n", cores, ld_ms,
           ld_bytes, (double)ld_bytes / fb);
    printf("  | zlib level 1, one core | %.1f | %lu | %.4f |\n", t1 - t0, (unsigned long)z1, (double)z1 / fb);
    printf("  | deflate_runs, one core | %.1f | %zu | %.4f |\n", t2 - t1, runs_len + 6, (double)(runs_len + 6) / fb);
    free(zb);
}

/* One image through the GPU's variants (with HP_BENCH_GPU_ONLY the first two, and no CPU coders) and the CPU's
 * coders; false when a GPU stream is wrong. */
static bool bench_image(hp_png_gpu *const *png, const uint8_t *img, uint32_t w, uint32_t h, uint32_t depth,
                        const char *what, uint32_t runs)
{
    hp_png_gpu_layout l;
    CHECK(hp_png_gpu_layout_for(png[0], w, h, 3, depth, &l, &bench_err) == HP_OK);
    hp_buffer b[NBUF];
    png_buffers_create(&l, img, b);
    uint8_t *want = malloc(l.filtered_size);
    CHECK(want != NULL);
    hp_png_cpu_filter(&l, img, want);

    double pass_ms[VARIANTS][HP_PNG_GPU_PASSES + 1];
    size_t zlen[VARIANTS];
    bool exact = true;
    bool gpu_only = getenv("HP_BENCH_GPU_ONLY") != NULL;
    for (int v = 0; v < (gpu_only ? 2 : VARIANTS); v++)
        exact = run_variant(png[v], &l, b, want, runs, pass_ms[v], &zlen[v]) && exact;
    if (gpu_only)
        report_gpu_only(&l, what, exact, pass_ms, zlen);
    else
        report_with_cpu(&l, img, want, what, exact, pass_ms, zlen, runs);
    free(want);
    for (int i = 0; i < NBUF; i++)
        hp_buffer_destroy(bench_gpu, &b[i]);
    return exact;
}

/* --duty: the encode's GPU time when the GPU works only part of the time, as for one client's frames, each
 * received and decoded on the CPU while the GPU idles: an encode of bench_http's 4K frame every cycle,
 * then a gap, for some seconds (the driver lowers the clocks over seconds when the GPU is mostly idle,
 * where one idle gap alone costs nothing). The gap idle, or its tail filled with holds (clock_hold.h) on
 * one workgroup. Each variant's median over its last half; the wall-clock time each begins, to match
 * nvidia-smi's log of clocks and power. */
static double encode_once(hp_png_gpu *png, const hp_png_gpu_layout *l, hp_buffer *b)
{
    bench_begin();
    vkCmdResetQueryPool(bench_cmd, bench_queries, 0, HP_PNG_GPU_TIMESTAMPS);
    hp_png_gpu_io io = png_io(b);
    io.first_query = 0;
    hp_png_gpu_record(png, bench_cmd, l, &io);
    bench_barrier_all();
    bench_submit_and_wait();
    uint64_t ts[HP_PNG_GPU_TIMESTAMPS];
    bench_read_timestamps(HP_PNG_GPU_TIMESTAMPS, ts);
    return (double)(ts[HP_PNG_GPU_PASSES] - ts[0]) * hp_gpu_get_info(bench_gpu)->timestamp_period_ns * 1e-6;
}

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1e3), .tv_nsec = (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

/* A gap of gap_ms: idle for its first idle_ms, then held as the daemon's GPU thread holds (daemon/worker.c):
 * a hold kept in flight, looked at every HP_CLOCK_HOLD_MS. */
static void gap(hp_clock_hold *h, double gap_ms, double idle_ms)
{
    double end = now_ms() + gap_ms;
    sleep_ms(idle_ms < gap_ms ? idle_ms : gap_ms);
    while (now_ms() < end) {
        CHECK(hp_clock_hold_keep(h, &bench_err) == HP_OK);
        sleep_ms(HP_CLOCK_HOLD_MS);
    }
}

static void duty_study(hp_png_gpu *png, double seconds)
{
    uint32_t w, h;
    uint8_t *img = street_scaled(8, 4, &w, &h);
    hp_png_gpu_layout l;
    CHECK(hp_png_gpu_layout_for(png, w, h, 3, 8, &l, &bench_err) == HP_OK);
    hp_buffer b[NBUF];
    png_buffers_create(&l, img, b);
    hp_clock_hold *hold;
    CHECK(hp_clock_hold_create(bench_gpu, &hold, &bench_err) == HP_OK);
    printf("\n## --duty: bench_http's 4K frame encoded every cycle (ms of GPU time, median of each variant's last "
           "half of %.0f s)\n\n", seconds);
    /* One client's cycle on the slow H200 hosts: 9-10 ms of GPU work in about 28 ms. */
    static const struct { double gap, idle; const char *what; } variants[] = {
        {0, 0, "no gap (the GPU always busy)"},        {20, 20, "gap 20 ms idle"},
        {20, 0, "gap 20 ms held"},                     {20, 5, "gap 20 ms, 5 idle then held"},
        {20, 10, "gap 20 ms, 10 idle then held"},      {20, 20, "gap 20 ms idle (again)"},
        {100, 100, "gap 100 ms idle"},                 {100, 0, "gap 100 ms held"},
    };
    printf("| cycle | begins (UTC) | encodes | encode ms p50 | p10 | p90 | holds | their GPU ms | a hold's rounds |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        struct tm tm;
        gmtime_r(&wall.tv_sec, &tm);
        hp_clock_hold_counts before, after;
        hp_clock_hold_counts_get(hold, &before);
        size_t cap = 4096, n = 0;
        double *ms = malloc(cap * sizeof(double)), start = now_ms();
        CHECK(ms != NULL);
        while (now_ms() - start < seconds * 1e3 && n < cap) {
            ms[n++] = encode_once(png, &l, b);
            gap(hold, variants[v].gap, variants[v].idle);
        }
        hp_clock_hold_counts_get(hold, &after);
        summary sm = bench_summarize(ms + n / 2, (uint32_t)(n - n / 2));
        printf("| %s | %02d:%02d:%02d.%03ld | %zu | %.3f | %.3f | %.3f | %llu | %.1f | %u |\n", variants[v].what,
               tm.tm_hour, tm.tm_min, tm.tm_sec, wall.tv_nsec / 1000000, n, sm.median, sm.p10, sm.p90,
               (unsigned long long)(after.holds - before.holds), (after.gpu_seconds - before.gpu_seconds) * 1e3,
               after.rounds);
        fflush(stdout);
        free(ms);
    }
    free(img);
    hp_clock_hold_destroy(&hold);
    for (int i = 0; i < NBUF; i++)
        hp_buffer_destroy(bench_gpu, &b[i]);
}

/* HP_BENCH_FRAMES=a.exr,b.exr: those frames (e.g. bench_http's, made by tools/make_frame), each tone-mapped by
 * the CPU reference to 8 bits and encoded as RGB, as the daemon encodes an opaque frame; instead of the
 * built-in images. */
static bool bench_files(hp_png_gpu *const *png, const char *files, uint32_t runs)
{
    bool ok = true;
    char *list = strdup(files);
    CHECK(list != NULL);
    for (char *save = NULL, *path = strtok_r(list, ",", &save); path && ok; path = strtok_r(NULL, ",", &save)) {
        uint32_t w, h;
        float *frame = frame_file(path, &w, &h);
        uint8_t *img = tone(frame, w, h, 8);
        ok = bench_image(png, img, w, h, 8, path, runs);
        free(frame), free(img);
    }
    free(list);
    return ok;
}

int main(int argc, char **argv)
{
    bench_args args = {.runs = 20};
    static const char *const extra[] = {"--duty", NULL};
    bool duty = false;
    if (!bench_parse_args(argc, argv, "bench_png_gpu [--runs N] [--quick] [--duty] [--device D]", 3, &args, extra,
                          &duty))
        return 2;
    uint32_t runs = args.runs < 1 ? 1 : args.runs > 100 ? 100 : args.runs;
    bench_init(args.device, HP_PNG_GPU_TIMESTAMPS * runs);
    hp_png_gpu *png[VARIANTS];
    /* HP_BENCH_PNG_SHAPE=WGxCHUNK: another launch shape for every variant (hp_png_gpu_config). */
    const char *shape = getenv("HP_BENCH_PNG_SHAPE");
    for (int v = 0; v < VARIANTS; v++) {
        hp_png_gpu_config c;
        hp_png_gpu_fitted_config(hp_gpu_get_info(bench_gpu), &c); /* the daemon's shape on this device */
        c.no_hash_probe = v == 1 || v == 3, c.reprice = v == 2 || v == 3;
        if (shape)
            CHECK(sscanf(shape, "%ux%u", &c.workgroup_size, &c.chunk_bytes) == 2);
        CHECK(hp_png_gpu_create(bench_gpu, &c, &png[v], &bench_err) == HP_OK);
    }
    const hp_png_gpu_config *cfg = hp_png_gpu_get_config(png[0]);
    printf("# bench_png_gpu: %s, workgroup %u x chunk %u (segments of %u bytes), %u runs (median); %u usable cores\n",
           hp_gpu_get_info(bench_gpu)->device_name, cfg->workgroup_size, cfg->chunk_bytes,
           cfg->workgroup_size * cfg->chunk_bytes, runs, hp_usable_cpus());
    char stats[1024];
    hp_png_gpu_deflate_statistics(png[0], stats, sizeof(stats));
    printf("png_deflate's pipeline (the default variant): %s\n", stats[0] ? stats : "no statistics from the driver");
    /* tiles 0: the frame scaled up 4x as bench_http's. --quick: the street frame itself, 8 bits. */
    static const struct { uint32_t tiles, depth; } images[] = {{2, 8}, {4, 8}, {8, 8}, {4, 16}, {0, 8}};
    bool ok = true;
    const char *files = getenv("HP_BENCH_FRAMES");
    if (duty)
        duty_study(png[0], args.quick ? 0.2 : 6);
    else if (files)
        ok = bench_files(png, files, runs);
    for (size_t i = 0; i < sizeof(images) / sizeof(images[0]) && ok && !duty && !files; i++) {
        uint32_t w, h, depth = images[i].depth;
        char what[96];
        uint8_t *img;
        if (args.quick && i > 0)
            break;
        if (args.quick || images[i].tiles > 0) {
            uint32_t tiles = args.quick ? 1 : images[i].tiles;
            img = street_tiled(depth, tiles, &w, &h);
            snprintf(what, sizeof(what), "the street frame tiled %ux%u", tiles, tiles);
        } else {
            img = street_scaled(depth, 4, &w, &h);
            snprintf(what, sizeof(what), "the street frame scaled up 4x bilinearly: bench_http's frame");
        }
        ok = bench_image(png, img, w, h, depth, what, runs);
        free(img);
    }
    for (int v = 0; v < VARIANTS; v++)
        hp_png_gpu_destroy(&png[v]);
    int rc = bench_shutdown();
    return ok ? rc : 1;
}

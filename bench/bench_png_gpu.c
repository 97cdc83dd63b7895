/* PNG filtering and deflate on the GPU (pipeline/png_gpu.h, issue 20): each pass's GPU time (timestamps
 * around every dispatch, median of the runs), the compressed size against zlib level 1 and deflate_runs
 * (api/deflate_runs.h) on the same filtered bytes, and their CPU time on one core of this host. The image:
 * tests/data's Blender street frame tone-mapped by the CPU reference (default parameters) and tiled 4 x 4 to
 * 3840 x 2160, RGB, 8 and 16 bits. Every run's stream is checked once: zlib inflates it to the CPU
 * reference's filtered bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "api/deflate_runs.h"
#include "api/image.h"
#include "bench_common.h"
#include "common/file.h"
#include "pipeline/frame_graph.h"
#include "pipeline/png_gpu.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The street frame tone-mapped to `depth` bits, tiled tiles x tiles; *w, *h its size. */
static uint8_t *street_image(uint32_t depth, uint32_t tiles, uint32_t *w, uint32_t *h)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/blender_street_960x540_singlelayer.exr", HP_TEST_DATA);
    size_t len = 0;
    uint8_t *bytes = hp_read_file(path, &len);
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    CHECK(bytes && hp_image_probe(bytes, len, &opt, &info, &bench_err) == HP_OK);
    size_t n = (size_t)info.width * info.height, px = depth == 8 ? 4 : 8;
    float *frame = malloc(n * 16);
    uint8_t *toned = malloc(n * px);
    CHECK(frame && toned && hp_image_decode(bytes, len, &opt, &info, frame, HP_LAYOUT_RGBA32F, NULL, &bench_err) == HP_OK);
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fp.params.output.bit_depth = depth;
    hp_lum_stats cs;
    hp_tone_state ts;
    CHECK(hp_cpu_render_frame(frame, HP_PIXEL_RGBA32F, info.width, info.height, &fp.params, &cs, &ts, toned) == HP_OK);
    *w = info.width * tiles, *h = info.height * tiles;
    uint8_t *img = malloc((size_t)*w * *h * px);
    CHECK(img != NULL);
    for (uint32_t y = 0; y < *h; y++)
        for (uint32_t tx = 0; tx < tiles; tx++)
            memcpy(img + ((size_t)y * *w + (size_t)tx * info.width) * px, toned + (size_t)(y % info.height) * info.width * px,
                   (size_t)info.width * px);
    free(bytes), free(frame), free(toned);
    return img;
}

int main(int argc, char **argv)
{
    bench_args args = {.runs = 20};
    if (!bench_parse_args(argc, argv, "bench_png_gpu [--runs N] [--quick] [--device D]", 3, &args, NULL, NULL))
        return 2;
    uint32_t runs = args.runs < 1 ? 1 : args.runs > 100 ? 100 : args.runs;
    bench_init(args.device, HP_PNG_GPU_TIMESTAMPS * runs);
    hp_png_gpu *png;
    CHECK(hp_png_gpu_create(bench_gpu, NULL, &png, &bench_err) == HP_OK);
    const hp_png_gpu_config *cfg = hp_png_gpu_get_config(png);
    printf("# bench_png_gpu: %s, workgroup %u x chunk %u (segments of %u bytes), %u runs (median)\n",
           hp_gpu_get_info(bench_gpu)->device_name, cfg->workgroup_size, cfg->chunk_bytes,
           cfg->workgroup_size * cfg->chunk_bytes, runs);
    static const char *const pass_names[HP_PNG_GPU_PASSES] = {"choose", "apply", "deflate", "offsets", "compact"};
    double period_ms = hp_gpu_get_info(bench_gpu)->timestamp_period_ns * 1e-6;
    uint32_t tiles = args.quick ? 1 : 4;

    for (uint32_t depth = 8; depth <= 16; depth += 8) {
        uint32_t w, h;
        uint8_t *img = street_image(depth, tiles, &w, &h);
        hp_png_gpu_layout l;
        CHECK(hp_png_gpu_layout_for(png, w, h, 3, depth, &l, &bench_err) == HP_OK);
        enum { STAGING, IMAGE, FILTERED, TYPES, SLOTS, TABLE, TOKENS, JOINED, RB_FILTERED, RB_JOINED, RB_TABLE, NBUF };
        hp_buffer b[NBUF];
        const VkDeviceSize sizes[NBUF] = {l.image_size,    l.image_size,  l.filtered_size, l.types_size,
                                          l.slots_size,    l.table_size,  l.tokens_size,   l.joined_size,
                                          l.filtered_size, l.joined_size, l.table_size};
        const hp_mem_kind kinds[NBUF] = {HP_MEM_UPLOAD,   HP_MEM_DEVICE,   HP_MEM_DEVICE, HP_MEM_DEVICE,
                                         HP_MEM_DEVICE,   HP_MEM_DEVICE,   HP_MEM_DEVICE, HP_MEM_DEVICE,
                                         HP_MEM_READBACK, HP_MEM_READBACK, HP_MEM_READBACK};
        for (int i = 0; i < NBUF; i++)
            CHECK(hp_buffer_create(bench_gpu, sizes[i], kinds[i], "bench_png", &b[i], &bench_err) == HP_OK);
        memcpy(b[STAGING].mapped, img, l.image_size);
        hp_buffer_flush(bench_gpu, &b[STAGING]);
        bench_begin();
        VkBufferCopy up = {.size = l.image_size};
        vkCmdCopyBuffer(bench_cmd, b[STAGING].buffer, b[IMAGE].buffer, 1, &up);
        bench_barrier_all();
        bench_submit_and_wait();

        hp_png_gpu_io io = {.image = b[IMAGE].address, .filtered = &b[FILTERED], .types = &b[TYPES],
                            .slots = &b[SLOTS], .table = &b[TABLE], .tokens = &b[TOKENS], .joined = &b[JOINED],
                            .timestamps = bench_queries};
        /* A warm-up run, then the timed ones, each its own submission (as a frame's would be). */
        for (uint32_t r = 0; r <= runs; r++) {
            uint32_t q = r == 0 ? 0 : (r - 1) * HP_PNG_GPU_TIMESTAMPS;
            bench_begin();
            vkCmdResetQueryPool(bench_cmd, bench_queries, q, HP_PNG_GPU_TIMESTAMPS);
            io.first_query = q;
            hp_png_gpu_record(png, bench_cmd, &l, &io);
            bench_barrier_all();
            bench_submit_and_wait();
        }
        uint64_t *ts = calloc((size_t)runs * HP_PNG_GPU_TIMESTAMPS, sizeof(uint64_t));
        bench_read_timestamps(runs * HP_PNG_GPU_TIMESTAMPS, ts);
        double *ms = calloc(runs, sizeof(double));
        double pass_ms[HP_PNG_GPU_PASSES + 1];
        for (int k = 0; k <= HP_PNG_GPU_PASSES; k++) {
            for (uint32_t r = 0; r < runs; r++) {
                const uint64_t *t = ts + (size_t)r * HP_PNG_GPU_TIMESTAMPS;
                ms[r] = (double)(k < HP_PNG_GPU_PASSES ? t[k + 1] - t[k] : t[HP_PNG_GPU_PASSES] - t[0]) * period_ms;
            }
            pass_ms[k] = bench_median(ms, runs);
        }

        /* The result, once: read back, joined, inflated against the CPU reference. */
        bench_begin();
        VkBufferCopy f = {.size = l.filtered_size}, s = {.size = l.joined_size}, t = {.size = l.table_size};
        vkCmdCopyBuffer(bench_cmd, b[FILTERED].buffer, b[RB_FILTERED].buffer, 1, &f);
        vkCmdCopyBuffer(bench_cmd, b[JOINED].buffer, b[RB_JOINED].buffer, 1, &s);
        vkCmdCopyBuffer(bench_cmd, b[TABLE].buffer, b[RB_TABLE].buffer, 1, &t);
        bench_barrier_all();
        bench_submit_and_wait();
        for (int i = RB_FILTERED; i <= RB_TABLE; i++)
            hp_buffer_invalidate(bench_gpu, &b[i]);
        uint8_t *want = malloc(l.filtered_size);
        hp_png_cpu_filter(&l, img, want);
        size_t zcap = hp_png_gpu_zlib_bound(&l), zlen = 0;
        uint8_t *zs = malloc(zcap), *inflated = malloc(l.filtered_bytes);
        CHECK(hp_png_gpu_join(&l, b[RB_JOINED].mapped, b[RB_TABLE].mapped, zs, zcap, &zlen, &bench_err) == HP_OK);
        uLongf out_len = (uLongf)l.filtered_bytes;
        bool exact = memcmp(b[RB_FILTERED].mapped, want, l.filtered_bytes) == 0 &&
                     uncompress(inflated, &out_len, zs, (uLong)zlen) == Z_OK && out_len == l.filtered_bytes &&
                     memcmp(inflated, want, l.filtered_bytes) == 0;
        uint32_t btypes[3] = {0};
        for (uint32_t sg = 0; sg < l.segments; sg++) {
            hp_png_gpu_segment seg;
            memcpy(&seg, (const uint8_t *)b[RB_TABLE].mapped + sg * sizeof(seg), sizeof(seg));
            btypes[seg.btype < 3 ? seg.btype : 0]++;
        }

        /* The CPU coders on the same bytes, one core. */
        uLongf z1 = compressBound((uLong)l.filtered_bytes);
        uint8_t *zb = malloc(z1 > hp_deflate_runs_bound(l.filtered_bytes) ? z1 : hp_deflate_runs_bound(l.filtered_bytes));
        double t0 = now_ms();
        CHECK(compress2(zb, &z1, want, (uLong)l.filtered_bytes, 1) == Z_OK);
        double t1 = now_ms();
        size_t runs_len = 0;
        CHECK(hp_deflate_runs(want, l.filtered_bytes, true, zb, &runs_len));
        double t2 = now_ms();

        printf("\n%ux%u RGB %u-bit (the street frame tiled %ux%u): %llu filtered bytes, %u segments (%u stored, %u "
               "fixed, %u dynamic); stream %s\n", w, h, depth, tiles, tiles, (unsigned long long)l.filtered_bytes,
               l.segments, btypes[0], btypes[1], btypes[2], exact ? "inflates exactly" : "WRONG");
        for (int k = 0; k < HP_PNG_GPU_PASSES; k++)
            printf("  %-8s %8.3f ms\n", pass_names[k], pass_ms[k]);
        printf("  %-8s %8.3f ms\n", "total", pass_ms[HP_PNG_GPU_PASSES]);
        printf("  size: GPU %zu (%.4f), zlib level 1 %lu (%.4f, %.1f ms on one core), deflate_runs %zu (%.4f, %.1f ms "
               "on one core)\n", zlen, (double)zlen / (double)l.filtered_bytes, (unsigned long)z1,
               (double)z1 / (double)l.filtered_bytes, t1 - t0, runs_len + 6,
               (double)(runs_len + 6) / (double)l.filtered_bytes, t2 - t1);
        free(zb), free(want), free(zs), free(inflated), free(ts), free(ms), free(img);
        for (int i = 0; i < NBUF; i++)
            hp_buffer_destroy(bench_gpu, &b[i]);
        if (!exact)
            return 1;
    }
    hp_png_gpu_destroy(&png);
    return bench_shutdown();
}

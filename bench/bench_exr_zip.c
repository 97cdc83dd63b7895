/* EXR ZIP chunks inflated on the GPU (pipeline/exr_zip_gpu.h, issue 20): the inflate and unzip passes'
 * GPU time on a real frame's chunks, against the CPU decoder (libdeflate and the SSE2 transform,
 * api/codecs/image_exr.c) on one thread and on every core, on the same file in the same run. The GPU's image is
 * checked against the CPU's, bit for bit, after the timed runs (the last run's image; every run's is the same).
 *
 * Usage: bench_exr_zip FRAME.exr [--runs N] [--quick] [--device D]   (FRAME: a scanline ZIP or ZIPS EXR of
 * half channels, e.g. tools/make_frame's 4K frame, as bench_http.py makes it) */
#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/codecs/image.h"
#include "bench_common.h"
#include "common/file.h"
#include "pipeline/exr_zip_gpu.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The CPU decoder's wall time for the frame with `threads` threads, the best of `runs`. */
static double cpu_decode_ms(const uint8_t *file, size_t len, uint32_t threads, uint32_t runs, void *dst)
{
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    opt.threads = threads;
    hp_image_info info;
    CHECK(hp_image_probe(file, len, &opt, &info, &bench_err) == HP_OK);
    double best = 1e30;
    for (uint32_t r = 0; r < runs; r++) {
        double t0 = now_ms();
        CHECK(hp_image_decode(file, len, &opt, &info, dst, HP_LAYOUT_RGBA16F, NULL, &bench_err) == HP_OK);
        double t = now_ms() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* --- Frames at once: what the daemon does with several clients ---------------------------------------- */

#define AT_ONCE 16 /* frames at once, at most */

typedef struct run_arg {
    hp_exr_zip_gpu *zip;
    const hp_exr_zip_frame *f;
    hp_buffer in, out;
    double gpu_ms, wall_ms;
} run_arg;

static void *run_thread(void *p)
{
    run_arg *a = p;
    double t0 = now_ms();
    CHECK(hp_exr_zip_gpu_run(a->zip, a->f, &a->in, &a->out, &a->gpu_ms, &bench_err) == HP_OK);
    a->wall_ms = now_ms() - t0;
    return NULL;
}

/* The chunks of `frames` copies of a frame in one table, inflated by the serial loop in one dispatch: how the
 * loop's time grows with the chunks an SM is given at once (HP_BENCH_BATCH=1,2,4,8,16 sweeps it). */
static void one_dispatch(hp_exr_zip_gpu *zip, const hp_exr_zip_frame *f, const hp_buffer *staging, int frames,
                         bool wide_on)
{
    hp_exr_zip_frame big = *f;
    big.chunk_count = f->chunk_count * (uint32_t)frames;
    big.table_bytes = f->table_bytes * (uint32_t)frames;
    big.unpacked_bytes = f->unpacked_bytes * (uint32_t)frames;
    VkDeviceSize big_in = big.table_bytes + big.packed_bytes + HP_EXR_ZIP_PACKED_PAD;
    hp_buffer bin, bout;
    CHECK(hp_buffer_create(bench_gpu, big_in, HP_MEM_READBACK_SHADER, "batch_in", &bin, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, hp_exr_zip_gpu_output_bytes(&big), HP_MEM_DEVICE, "batch_out", &bout,
                           &bench_err) == HP_OK);
    const hp_exr_zip_chunk *t = staging->mapped;
    hp_exr_zip_chunk *bt = bin.mapped;
    for (int k = 0; k < frames; k++)
        for (uint32_t c = 0; c < f->chunk_count; c++) {
            bt[k * f->chunk_count + c] = t[c];
            bt[k * f->chunk_count + c].unpacked_offset += (uint32_t)(k * f->unpacked_bytes);
        }
    memcpy((uint8_t *)bin.mapped + big.table_bytes, (const uint8_t *)staging->mapped + f->table_bytes,
           f->packed_bytes + HP_EXR_ZIP_PACKED_PAD);
    /* The copies share their chunks' rows, where the wide inflate keeps its pointers: the serial loop's */
    hp_exr_zip_gpu_set_wide(zip, false);
    run_arg b = {.zip = zip, .f = &big, .in = bin, .out = bout};
    run_thread(&b);
    printf("the %d frames' chunks in one dispatch (%u chunks), the serial loop: %.1f ms GPU, %.1f ms wall, "
           "%.2f GB/s of output\n", frames, big.chunk_count, b.gpu_ms, b.wall_ms,
           (double)big.unpacked_bytes / (b.gpu_ms * 1e6));
    hp_exr_zip_gpu_set_wide(zip, wide_on);
    hp_buffer_destroy(bench_gpu, &bin);
    hp_buffer_destroy(bench_gpu, &bout);
}

/* k frames as k threads' runs (each as a daemon's decoding thread calls it: the runs that wait while a batch
 * is on the GPU go on together), twice. */
static void threads_at_once(run_arg *args, int k, const hp_buffer *staging, const hp_exr_zip_frame *f, double one_ms)
{
    pthread_t th[AT_ONCE];
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < k; i++)
            memcpy(args[i].in.mapped, staging->mapped, f->table_bytes); /* fresh statuses */
        double t0 = now_ms();
        for (int i = 0; i < k; i++)
            pthread_create(&th[i], NULL, run_thread, &args[i]);
        for (int i = 0; i < k; i++)
            pthread_join(th[i], NULL);
        double wall = now_ms() - t0;
        double gsum = 0;
        for (int i = 0; i < k; i++)
            gsum += args[i].gpu_ms;
        printf("%d frames from %d threads at once: %.1f ms wall for all (one alone: %.1f ms GPU), GPU time %.1f ms "
               "in all, %.2f GB/s of output over the wall time\n", k, k, wall, one_ms, gsum,
               (double)f->unpacked_bytes * k / (wall * 1e6));
    }
}

/* k frames in one batch (hp_exr_zip_gpu_run_together) by the inflate that wide_chunks picks. */
static void together(hp_exr_zip_gpu *zip, run_arg *args, int k, const hp_buffer *staging, const hp_exr_zip_frame *f,
                     uint32_t wide_chunks, const char *name)
{
    hp_exr_zip_frame frames[AT_ONCE];
    hp_buffer in[AT_ONCE], out[AT_ONCE];
    for (int i = 0; i < k; i++) {
        memcpy(args[i].in.mapped, staging->mapped, f->table_bytes); /* fresh statuses */
        frames[i] = *f;
        in[i] = args[i].in;
        out[i] = args[i].out;
    }
    hp_exr_zip_gpu_batch_tune(zip, wide_chunks);
    double ms = 0, t0 = now_ms();
    CHECK(hp_exr_zip_gpu_run_together(zip, (uint32_t)k, frames, in, out, &ms, &bench_err) == HP_OK);
    double wall = now_ms() - t0;
    printf("%d frames in one batch (%u chunks), %s: %.1f ms GPU, %.1f ms wall, %.2f GB/s of output\n", k,
           f->chunk_count * k, name, ms, wall, (double)f->unpacked_bytes * k / (ms * 1e6));
}

/* The next count of a comma-separated list (HP_BENCH_TOGETHER, HP_BENCH_BATCH), *p moved past it and its comma. */
static int next_count(const char **p)
{
    int k = atoi(*p);
    *p += strcspn(*p, ",");
    *p += **p == ',';
    return k;
}

/* Frames at once: AT_ONCE frames' runs from as many threads, k frames in one batch by either inflate
 * (HP_BENCH_TOGETHER=1,2,4,8,16), and the same chunks in one dispatch (HP_BENCH_BATCH). */
static void at_once(hp_exr_zip_gpu *zip, const hp_exr_zip_frame *f, const hp_buffer *staging, double one_ms,
                    bool wide_on, double warm_s)
{
    VkDeviceSize in_bytes = f->table_bytes + f->packed_bytes + HP_EXR_ZIP_PACKED_PAD;
    run_arg args[AT_ONCE];
    for (int i = 0; i < AT_ONCE; i++) {
        args[i] = (run_arg){.zip = zip, .f = f};
        CHECK(hp_buffer_create(bench_gpu, in_bytes, HP_MEM_READBACK_SHADER, "at_once_in", &args[i].in, &bench_err) == HP_OK);
        CHECK(hp_buffer_create(bench_gpu, hp_exr_zip_gpu_output_bytes(f), HP_MEM_DEVICE, "at_once_out", &args[i].out,
                               &bench_err) == HP_OK);
        memcpy(args[i].in.mapped, staging->mapped, in_bytes);
    }
    /* one frame through the run, as the daemon runs it (chunks read from host memory), on a GPU warmed again
     * (the buffers above took a while to make and fill) */
    bench_warm_up(warm_s, &args[0].out, &args[1].out);
    run_thread(&args[0]);
    uint32_t wide_chunks = hp_exr_zip_gpu_wide_batch_chunks(bench_gpu);
    printf("\none frame through hp_exr_zip_gpu_run (chunks read from host memory): %.2f ms GPU, %.2f ms wall; "
           "decode queue %s (%u of them); batches of up to %u chunks by the wide inflate\n", args[0].gpu_ms,
           args[0].wall_ms, hp_gpu_has_decode_queue(bench_gpu) ? "a queue of its own" : "the compute queue",
           hp_gpu_decode_queue_count(bench_gpu), wide_on ? wide_chunks : 0);
    threads_at_once(args, 8, staging, f, one_ms);
    threads_at_once(args, AT_ONCE, staging, f, one_ms);
    const char *p = getenv("HP_BENCH_TOGETHER") ? getenv("HP_BENCH_TOGETHER") : "1,2,4,8,16";
    for (int k; *p;)
        if ((k = next_count(&p)) >= 1 && k <= AT_ONCE) {
            together(zip, args, k, staging, f, 0, "the serial loop");
            if (wide_on)
                together(zip, args, k, staging, f, UINT32_MAX, "the wide inflate");
        }
    hp_exr_zip_gpu_batch_tune(zip, wide_chunks);
    /* the same chunks in one table, frames' worth at a time: one dispatch each */
    p = getenv("HP_BENCH_BATCH") ? getenv("HP_BENCH_BATCH") : "8";
    for (int k; *p;) /* the chunks' offsets are 32-bit: k copies' bytes under 4 GiB */
        if ((k = next_count(&p)) >= 1 && k <= 64 && (uint64_t)k * f->unpacked_bytes < UINT32_MAX)
            one_dispatch(zip, f, staging, k, wide_on);
    for (int i = 0; i < AT_ONCE; i++) {
        hp_buffer_destroy(bench_gpu, &args[i].in);
        hp_buffer_destroy(bench_gpu, &args[i].out);
    }
}

/* The wide inflate's phases (exr_inflate_wide.comp's PH_*, the table's words 8-15): a chunk's mean cycles in
 * each and its share, and the longest chunk's whole. */
static void print_phases(const hp_exr_zip_chunk *ct, uint32_t chunks)
{
    static const char *names[8] = {"header and tables", "maps", "following", "counting", "walking", "jumping",
                                   "copying", "stored and finish"};
    double sum[8] = {0}, all = 0, longest = 0;
    for (uint32_t c = 0; c < chunks; c++) {
        double whole = 0;
        for (int k = 0; k < 8; k++) {
            sum[k] += ct[c].resume[k];
            whole += ct[c].resume[k];
        }
        all += whole;
        longest = whole > longest ? whole : longest;
    }
    if (chunks == 0 || all == 0)
        return;
    printf("wide phases, a chunk's mean (subgroup clock, Mcycles):");
    for (int k = 0; k < 8; k++)
        printf(" %s %.3f (%.1f%%)%s", names[k], sum[k] / chunks / 1e6, 100.0 * sum[k] / all, k < 7 ? "," : "");
    printf("; whole %.3f, the longest chunk %.3f\n", all / chunks / 1e6, longest / 1e6);
}

/* The last timed run's image and statuses (every run's are the same: each starts from the staged chunks):
 * the image against the CPU decoder's, bit for bit, then what the wide inflate's words say of its chunks. After
 * the runs, so that the CPU's decode does not sit between two of them while the GPU's clock falls. */
static void check_run(const hp_exr_zip_frame *f, const void *cpu_image, hp_buffer *readback, hp_buffer *table_rb,
                      bool wide, bool phases, uint32_t lanes)
{
    hp_buffer_invalidate(bench_gpu, readback);
    hp_buffer_invalidate(bench_gpu, table_rb);
    CHECK(hp_exr_zip_gpu_check(f, table_rb->mapped, 0, &bench_err) == HP_OK);
    CHECK(memcmp(cpu_image, readback->mapped, (size_t)f->width * f->height * 8) == 0);
    printf("check: the GPU's RGBA16F equals the CPU decoder's, bit for bit\n");
    const hp_exr_zip_chunk *ct = table_rb->mapped;
    if (wide && phases) {
        print_phases(ct, f->chunk_count);
        return;
    }
    if (!wide)
        return;
    uint32_t most[6] = {0}, sum[6] = {0};
    for (uint32_t c = 0; c < f->chunk_count; c++)
        for (int k = 0; k < 6; k++) {
            most[k] = ct[c].resume[k] > most[k] ? ct[c].resume[k] : most[k];
            sum[k] += ct[c].resume[k];
        }
    printf("wide, a chunk: distinct decodings a lane at most %u (mean %.1f), rounds of pointer jumping %u (%.1f), "
           "windows %u (%.1f), blocks %u (%.1f); the farthest true start into a span %u bits, true starts 16 bits "
           "or more into theirs %u in all, of at most %u lanes' spans\n", most[0], (double)sum[0] / f->chunk_count,
           most[1], (double)sum[1] / f->chunk_count, most[2], (double)sum[2] / f->chunk_count, most[3],
           (double)sum[3] / f->chunk_count, most[4], sum[5], sum[2] * lanes);
}

/* libdeflate alone over every chunk, one thread, the best of `runs`: the part of the CPU decoder's time a
 * frame that inflating is (the rest: EXR's predictor, byte split and the planes to RGBA16F). */
static double inflate_only_ms(const hp_exr_zip_frame *f, const hp_buffer *staging, uint32_t runs)
{
    const hp_exr_zip_chunk *t = staging->mapped;
    const uint8_t *packed = (const uint8_t *)staging->mapped + f->table_bytes;
    uint8_t *out = malloc(f->max_chunk_bytes);
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    CHECK(out && d);
    double best = 1e30;
    for (uint32_t r = 0; r < runs; r++) {
        double t0 = now_ms();
        for (uint32_t c = 0; c < f->chunk_count; c++)
            if (t[c].packed_size != t[c].unpacked_size)
                CHECK(libdeflate_zlib_decompress(d, packed + t[c].packed_offset, t[c].packed_size, out,
                                                 t[c].unpacked_size, NULL) == LIBDEFLATE_SUCCESS);
        double ms = now_ms() - t0;
        best = ms < best ? ms : best;
    }
    libdeflate_free_decompressor(d);
    free(out);
    return best;
}

/* The split (exr_zip_decoder split): the CPU's half (hp_image_zip_inflate, on 1 and on all threads, the best
 * of cpu_runs) and the GPU's (hp_exr_zip_gpu_finish: the inflated chunks copied in from host memory and the
 * finishing pass, the median of `runs`); the image checked against the CPU decoder's. */
static void split(hp_exr_zip_gpu *zip, const uint8_t *file, size_t len, const hp_exr_zip_frame *g, uint32_t runs,
                  uint32_t cpu_runs, double warm_s, const void *cpu_image, const hp_buffer *readback)
{
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_exr_zip_frame f;
    hp_buffer in, out;
    CHECK(hp_image_probe(file, len, &opt, &info, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, g->table_bytes + g->unpacked_bytes, HP_MEM_READBACK_SHADER, "split_in", &in,
                           &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, hp_exr_zip_gpu_output_bytes(g), HP_MEM_DEVICE, "split_out", &out, &bench_err) ==
          HP_OK);
    double cpu_ms[2] = {1e30, 1e30};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int k = 0; k < 2; k++) {
        opt.threads = k == 0 ? 1 : (uint32_t)cores;
        for (uint32_t r = 0; r < cpu_runs; r++) {
            double t0 = now_ms();
            CHECK(hp_image_zip_inflate(file, len, &opt, &info, in.mapped, in.size, &f, &bench_err) == HP_OK);
            double ms = now_ms() - t0;
            cpu_ms[k] = ms < cpu_ms[k] ? ms : cpu_ms[k];
        }
    }
    double *gpu_ms = calloc(runs, sizeof(double)), *wall_ms = calloc(runs, sizeof(double));
    bench_warm_up(warm_s, &out, readback); /* the GPU idled while the CPU inflated */
    for (uint32_t r = 0; r < runs; r++) {
        double t0 = now_ms();
        CHECK(hp_exr_zip_gpu_finish(zip, &f, &in, &out, &gpu_ms[r], &bench_err) == HP_OK);
        wall_ms[r] = now_ms() - t0;
    }
    bench_begin();
    VkBufferCopy back = {.size = (VkDeviceSize)f.width * f.height * 8};
    vkCmdCopyBuffer(bench_cmd, out.buffer, readback->buffer, 1, &back);
    bench_submit_and_wait();
    hp_buffer_invalidate(bench_gpu, readback);
    CHECK(memcmp(cpu_image, readback->mapped, back.size) == 0);
    summary sg = bench_summarize(gpu_ms, runs), sw = bench_summarize(wall_ms, runs);
    printf("\nthe split: the GPU's image equals the CPU decoder's, bit for bit\n"
           "| the split's step | ms |\n|---|---|\n"
           "| CPU: hp_image_zip_inflate, 1 thread (best of %u) | %.1f |\n"
           "| CPU: hp_image_zip_inflate, %ld threads (best of %u) | %.1f |\n"
           "| GPU: hp_exr_zip_gpu_finish, copy and pass (median, p10-p90 of %u) | %.2f (%.2f-%.2f) |\n"
           "| wall: hp_exr_zip_gpu_finish, submitted and waited for | %.2f (%.2f-%.2f) |\n",
           cpu_runs, cpu_ms[0], cores, cpu_runs, cpu_ms[1], runs, sg.median, sg.p10, sg.p90, sw.median, sw.p10,
           sw.p90);
    free(gpu_ms);
    free(wall_ms);
    hp_buffer_destroy(bench_gpu, &in);
    hp_buffer_destroy(bench_gpu, &out);
}

int main(int argc, char **argv)
{
    bench_args args = {0};
    if (argc < 2 || !bench_parse_args(argc - 1, argv + 1, "bench_exr_zip FRAME.exr [--runs N] [--quick] [--device D]",
                                      2, &args, NULL, NULL))
        return 2;
    uint32_t runs = args.runs ? args.runs : 20;
    size_t len;
    uint8_t *file = hp_read_file(argv[1], &len);
    if (!file) {
        fprintf(stderr, "bench_exr_zip: cannot read %s\n", argv[1]);
        return 1;
    }
    /* HP_BENCH_WIDE_PHASES=1: the wide inflate's phases timed by the subgroup clock (its counts then not kept). */
    bool phases = getenv("HP_BENCH_WIDE_PHASES") && strcmp(getenv("HP_BENCH_WIDE_PHASES"), "1") == 0;
    bench_init_with(args.device, HP_EXR_ZIP_GPU_TIMESTAMPS * runs, phases);
    const hp_gpu_info *gi = hp_gpu_get_info(bench_gpu);
    printf("device: %s, driver %s %s\n", gi->device_name, gi->driver_name, gi->driver_info);

    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_exr_zip_frame f;
    CHECK(hp_image_probe(file, len, &opt, &info, &bench_err) == HP_OK);
    CHECK(hp_image_zip_gather(file, len, &opt, &info, NULL, 0, &f, &bench_err) == HP_OK);
    const VkDeviceSize in_bytes = f.table_bytes + f.packed_bytes + HP_EXR_ZIP_PACKED_PAD;
    const VkDeviceSize image_bytes = (VkDeviceSize)f.width * f.height * 8;
    hp_buffer staging, input, unpacked, image, readback, table_rb, tables;
    CHECK(hp_buffer_create(bench_gpu, in_bytes, HP_MEM_UPLOAD, "zip_staging", &staging, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, in_bytes, HP_MEM_DEVICE, "zip_input", &input, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, f.unpacked_bytes + 4, HP_MEM_DEVICE, "zip_unpacked", &unpacked, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, hp_exr_zip_gpu_tables_bytes(&f), HP_MEM_DEVICE, "zip_tables", &tables,
                           &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, image_bytes, HP_MEM_DEVICE, "zip_image", &image, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, image_bytes, HP_MEM_READBACK, "zip_readback", &readback, &bench_err) == HP_OK);
    CHECK(hp_buffer_create(bench_gpu, f.table_bytes, HP_MEM_READBACK, "zip_table", &table_rb, &bench_err) == HP_OK);
    double t0 = now_ms();
    CHECK(hp_image_zip_gather(file, len, &opt, &info, staging.mapped, in_bytes, &f, &bench_err) == HP_OK);
    double gather_ms = now_ms() - t0;
    hp_buffer_flush(bench_gpu, &staging);
    hp_exr_zip_gpu *zip = NULL;
    CHECK(hp_exr_zip_gpu_create(bench_gpu, 0, &zip, &bench_err) == HP_OK);
    bool wide = getenv("HP_BENCH_WIDE") && strcmp(getenv("HP_BENCH_WIDE"), "1") == 0;
    CHECK(hp_exr_zip_gpu_set_wide(zip, wide));
    uint32_t lanes = hp_exr_zip_gpu_wide_lanes();
    if (wide && (getenv("HP_BENCH_WIDE_SPAN") || getenv("HP_BENCH_WIDE_ENTRIES") || getenv("HP_BENCH_WIDE_GROUP"))) {
        /* 0, an unset one: the daemon's own (hp_exr_zip_gpu_wide_tune) */
        uint32_t span = getenv("HP_BENCH_WIDE_SPAN") ? (uint32_t)atoi(getenv("HP_BENCH_WIDE_SPAN")) : 0;
        uint32_t entries = getenv("HP_BENCH_WIDE_ENTRIES") ? (uint32_t)atoi(getenv("HP_BENCH_WIDE_ENTRIES")) : 0;
        uint32_t group = getenv("HP_BENCH_WIDE_GROUP") ? (uint32_t)atoi(getenv("HP_BENCH_WIDE_GROUP")) : 0;
        CHECK(hp_exr_zip_gpu_wide_tune(zip, span, entries, group));
        lanes = group ? group : lanes;
        printf("wide: tuned (span %u bits, %u starts mapped, %u lanes; 0: the daemon's)\n", span, entries, lanes);
    }
    if (wide && phases) {
        if (!hp_exr_zip_gpu_wide_phases(zip, true)) {
            fprintf(stderr, "bench_exr_zip: HP_BENCH_WIDE_PHASES needs VK_KHR_shader_clock, which %s lacks\n",
                    gi->device_name);
            return 1;
        }
        printf("wide: phases timed by the subgroup clock\n");
    }
    if (wide)
        printf("inflate: wide (a workgroup of %u a chunk)\n", lanes);
    else
        printf("inflate: serial (one invocation a chunk)\n");
    char stats[1024];
    hp_exr_zip_gpu_inflate_statistics(zip, stats, sizeof(stats));
    if (stats[0])
        printf("pipeline %s: %s\n", wide ? "exr_inflate_wide" : "exr_inflate", stats);
    printf("frame: %s, %ux%u, %u planes, %u chunks of %u lines, %llu packed bytes, %llu unpacked; %u inflate "
           "dispatch(es); gathering the chunks on the CPU: %.2f ms\n", argv[1], f.width, f.height, f.planes,
           f.chunk_count, f.lines_per_chunk, (unsigned long long)f.packed_bytes, (unsigned long long)f.unpacked_bytes,
           hp_exr_zip_gpu_dispatches(zip, &f), gather_ms);

    /* Each run copies the staged chunks in fresh (the table's resume words start at zero), then the passes
     * between timestamps; the last run's image and statuses are checked. The GPU is warmed first: after the
     * CPU's gathering its clock may have fallen, and a cold GPU's first runs took 2-6x their time
     * (bench_png_gpu, docs/BENCHMARKS.md "The PNG encoder's launch shape"). */
    const double warm_s = args.quick ? 0.05 : 1.0;
    bench_warm_up(warm_s, &unpacked, &image);
    double *inflate_ms = calloc(runs, sizeof(double)), *unzip_ms = calloc(runs, sizeof(double));
    for (uint32_t r = 0; r < runs; r++) {
        bench_begin();
        VkBufferCopy up = {.size = in_bytes};
        vkCmdCopyBuffer(bench_cmd, staging.buffer, input.buffer, 1, &up);
        bench_barrier_all();
        hp_exr_zip_io io = {.chunks = input.address, .packed = input.address + f.table_bytes,
                            .unpacked = unpacked.address, .image = image.address, .tables = tables.address,
                            .timestamps = bench_queries,
                            .first_query = r * HP_EXR_ZIP_GPU_TIMESTAMPS};
        vkCmdResetQueryPool(bench_cmd, bench_queries, io.first_query, HP_EXR_ZIP_GPU_TIMESTAMPS);
        hp_exr_zip_gpu_record(zip, bench_cmd, &f, &io);
        bench_barrier_all();
        VkBufferCopy back = {.size = image_bytes}, tab = {.size = f.table_bytes};
        vkCmdCopyBuffer(bench_cmd, image.buffer, readback.buffer, 1, &back);
        vkCmdCopyBuffer(bench_cmd, input.buffer, table_rb.buffer, 1, &tab);
        bench_submit_and_wait();
        uint64_t ts[HP_EXR_ZIP_GPU_TIMESTAMPS];
        VK_CHECK(vkGetQueryPoolResults(bench_dev, bench_queries, io.first_query, HP_EXR_ZIP_GPU_TIMESTAMPS, sizeof(ts),
                                       ts, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        inflate_ms[r] = (double)(ts[1] - ts[0]) * gi->timestamp_period_ns / 1e6;
        unzip_ms[r] = (double)(ts[2] - ts[1]) * gi->timestamp_period_ns / 1e6;
    }
    /* The CPU decoder's image, once: what the timed runs and the split are checked against. */
    void *cpu = malloc(image_bytes);
    CHECK(cpu);
    cpu_decode_ms(file, len, 1, 1, cpu);
    check_run(&f, cpu, &readback, &table_rb, wide, phases, lanes);
    summary si = bench_summarize(inflate_ms, runs), su = bench_summarize(unzip_ms, runs);
    split(zip, file, len, &f, runs, args.quick ? 1 : 5, warm_s, cpu, &readback);
    free(cpu);
    if (!args.quick)
        at_once(zip, &f, &staging, si.median, wide, warm_s);
    void *dst = malloc(image_bytes);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t cpu_runs = args.quick ? 1 : 5;
    double one = cpu_decode_ms(file, len, 1, cpu_runs, dst);
    double all = cpu_decode_ms(file, len, (uint32_t)cores, cpu_runs, dst);
    double inflate_only = inflate_only_ms(&f, &staging, cpu_runs);
    printf("\n| step | ms (median, p10-p90 over %u runs) |\n|---|---|\n", runs);
    printf("| GPU inflate (every chunk at once) | %.2f (%.2f-%.2f) |\n", si.median, si.p10, si.p90);
    printf("| GPU finish (Adler-32, predictor, byte split, planes to RGBA16F) | %.3f (%.3f-%.3f) |\n", su.median,
           su.p10, su.p90);
    printf("| CPU decoder, 1 thread (best of %u) | %.1f |\n", cpu_runs, one);
    printf("| CPU decoder, %ld threads (best of %u) | %.1f |\n", cores, cpu_runs, all);
    printf("| CPU: libdeflate alone over every chunk, 1 thread (best of %u) | %.1f |\n", cpu_runs, inflate_only);
    printf("| CPU time a frame: decoder on 1 thread / gathering for the GPU | %.1f / %.2f |\n", one, gather_ms);
    free(dst);
    free(inflate_ms);
    free(unzip_ms);
    hp_exr_zip_gpu_destroy(&zip);
    hp_buffer *bufs[] = {&staging, &input, &unpacked, &image, &readback, &table_rb, &tables};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        hp_buffer_destroy(bench_gpu, bufs[i]);
    free(file);
    return bench_shutdown();
}

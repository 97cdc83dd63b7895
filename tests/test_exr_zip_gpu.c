/* EXR's ZIP chunks decoded on the GPU (pipeline/exr_zip_gpu.h, issue 20) against the CPU.
 *
 *   (a) Made chunks: pixel bytes of several kinds (noise, smooth halves, flat) at sizes from 1x1 up, 1 to 5
 *       planes, 16-line and 1-line chunks, put through EXR's forward transform (byte split, predictor) and
 *       deflated by zlib with every strategy that gives another block type or match pattern (stored blocks
 *       at level 0, level 1 and 9, fixed codes, Huffman only, run lengths), and chunks stored as they are.
 *       The GPU's RGBA16F must equal the pixel bytes gathered on the CPU, bit for bit.
 *   (b) Damaged streams: a byte changed or the stream cut short, 1-line chunks of one frame, each another
 *       damage. zlib's uncompress is the oracle: a chunk is good on the GPU exactly when zlib inflates it
 *       whole to the chunk's size, and a good chunk's pixels are zlib's.
 *   (c) Real frames written by OpenEXR's core (ZIP and ZIPS; RGBA, RGB, grey, an extra Z plane, a data
 *       window off the origin): hp_image_zip_gather, the passes, and the image equal to hp_image_decode's
 *       RGBA16F, bit for bit; a damaged chunk named as the CPU's decode names it; frames the GPU does not
 *       take refused with the reason.
 * No tolerance anywhere: every result is exact. The validation layer is on and any message fails. */
#include <math.h>
#include <pthread.h>
#include <openexr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/codecs/image.h"
#include "common/file.h"
#include "exr_zip_run.h"
#include "gpu_test.h"
#include "hp_shared.h"
#include "pipeline/cpu_reference.h"
#include "tap.h"
#include "tools/exr_write.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* EXR's ZIP transform forward (OpenEXR's ImfZip.cpp): the bytes split, even ones first, then each byte
 * replaced by its difference from the one before plus 128. */
static void zip_forward(const uint8_t *in, uint8_t *out, size_t n)
{
    size_t half = (n + 1) / 2;
    for (size_t k = 0; k < n; k++)
        out[k % 2 ? half + k / 2 : k / 2] = in[k];
    for (size_t i = n - 1; i > 0 && n > 1; i--)
        out[i] = (uint8_t)(out[i] - out[i - 1] + 128);
}

/* zlib's stream of in, by level and strategy; level -2: the chunk stored as is (no zlib). */
static uint8_t *deflate_chunk(const uint8_t *in, size_t n, int level, int strategy, size_t *out_len)
{
    if (level == -2) {
        uint8_t *copy = malloc(n);
        memcpy(copy, in, n);
        *out_len = n;
        return copy;
    }
    uint8_t *t = malloc(n);
    zip_forward(in, t, n);
    z_stream zs = {0};
    deflateInit2(&zs, level, Z_DEFLATED, 15, 8, strategy);
    size_t cap = deflateBound(&zs, n);
    uint8_t *out = malloc(cap);
    zs.next_in = t, zs.avail_in = (uInt)n, zs.next_out = out, zs.avail_out = (uInt)cap;
    deflate(&zs, Z_FINISH);
    *out_len = zs.total_out;
    deflateEnd(&zs);
    free(t);
    return out;
}

/* A made frame: the pixel bytes of every chunk (line after line, plane after plane, width halves). */
typedef struct made_frame {
    hp_exr_zip_frame f;
    uint8_t plane_of[4]; /* R, G, B, A's plane; A HP_EXR_ZIP_NO_PLANE: none */
    uint8_t *pixels;     /* height x planes x width halves */
    uint8_t *input;      /* table, packed, padding */
} made_frame;

/* A made frame of halves: w x h, planes of them, R, G, B, A from plane_of. */
static made_frame made_halves(uint32_t w, uint32_t h, uint32_t planes, uint32_t lpc, const uint8_t plane_of[4])
{
    made_frame m = {.f = {.width = w, .height = h, .lines_per_chunk = lpc}};
    memcpy(m.plane_of, plane_of, 4);
    hp_exr_zip_frame_halves(&m.f, planes, plane_of);
    return m;
}

enum { PAT_NOISE, PAT_SMOOTH, PAT_FLAT, PAT_COUNT };
static const char *const pat_names[] = {"noise", "smooth", "flat"};

static void make_pixels(made_frame *m, int pattern)
{
    const hp_exr_zip_frame *f = &m->f;
    for (uint32_t y = 0; y < f->height; y++)
        for (uint32_t p = 0; p < f->planes; p++)
            for (uint32_t x = 0; x < f->width; x++) {
                uint16_t h = 0x3c00;
                if (pattern == PAT_NOISE)
                    h = (uint16_t)rng_next();
                else if (pattern == PAT_SMOOTH)
                    h = hp_float_to_half((float)(0.1 + 2.0 * x / f->width + 0.5 * y / f->height + 0.3 * p));
                size_t at = (((size_t)y * f->planes + p) * f->width + x) * 2;
                memcpy(m->pixels + at, &h, 2);
            }
}

/* Chunks of the made frame's pixels, each deflated by level/strategy[chunk % n]; the table and the bytes. */
static void make_input(made_frame *m, const int *levels, const int *strategies, int n)
{
    hp_exr_zip_frame *f = &m->f;
    f->chunk_count = (f->height + f->lines_per_chunk - 1) / f->lines_per_chunk;
    f->table_bytes = (uint64_t)f->chunk_count * sizeof(hp_exr_zip_chunk);
    uint8_t **streams = calloc(f->chunk_count, sizeof(*streams));
    size_t *lens = calloc(f->chunk_count, sizeof(*lens));
    size_t line = (size_t)f->planes * f->width * 2;
    f->packed_bytes = f->unpacked_bytes = 0;
    for (uint32_t c = 0; c < f->chunk_count; c++) {
        uint32_t y = c * f->lines_per_chunk, lines = f->height - y < f->lines_per_chunk ? f->height - y : f->lines_per_chunk;
        streams[c] = deflate_chunk(m->pixels + y * line, lines * line, levels[c % n], strategies[c % n], &lens[c]);
        f->packed_bytes += lens[c];
        if (lines * line > f->max_chunk_bytes)
            f->max_chunk_bytes = (uint32_t)(lines * line);
    }
    m->input = calloc(1, f->table_bytes + f->packed_bytes + HP_EXR_ZIP_PACKED_PAD);
    hp_exr_zip_chunk *t = (hp_exr_zip_chunk *)m->input;
    uint64_t packed = 0, unpacked = 0;
    for (uint32_t c = 0; c < f->chunk_count; c++) {
        uint32_t y = c * f->lines_per_chunk, lines = f->height - y < f->lines_per_chunk ? f->height - y : f->lines_per_chunk;
        t[c] = (hp_exr_zip_chunk){.packed_offset = (uint32_t)packed, .packed_size = (uint32_t)lens[c],
                                  .unpacked_offset = (uint32_t)unpacked, .unpacked_size = (uint32_t)(lines * line),
                                  .first_line = y, .lines = lines};
        memcpy(m->input + f->table_bytes + packed, streams[c], lens[c]);
        packed += lens[c];
        unpacked += (lines * line + 3) & ~(size_t)3;
        free(streams[c]);
    }
    f->unpacked_bytes = unpacked;
    free(streams);
    free(lens);
}

/* The pixel bytes gathered into RGBA16F on the CPU: what exr_unzip must write. */
static void reference_image(const made_frame *m, const uint8_t *pixels, uint16_t *out)
{
    const hp_exr_zip_frame *f = &m->f;
    for (uint32_t y = 0; y < f->height; y++)
        for (uint32_t x = 0; x < f->width; x++)
            for (int s = 0; s < 4; s++) {
                uint16_t h = 0x3c00;
                if (m->plane_of[s] != HP_EXR_ZIP_NO_PLANE)
                    memcpy(&h, pixels + (((size_t)y * f->planes + m->plane_of[s]) * f->width + x) * 2, 2);
                out[((size_t)y * f->width + x) * 4 + s] = h;
            }
}

static size_t first_difference(const uint16_t *a, const uint16_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return SIZE_MAX;
}

/* The first byte where two images differ, SIZE_MAX where none. */
static size_t first_byte_difference(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return SIZE_MAX;
}

/* The wide inflate on lavapipe (check_wide): chunks past its cap on a lane's loop iterations stop
 * HP_EXR_ZIP_UNFINISHED, which the daemon decodes on the CPU. True when that is so of every chunk that failed
 * and every other chunk's pixels are the reference's; false elsewhere than there. */
static bool g_wide_on_lavapipe;

static bool only_unfinished_wrong(const hp_exr_zip_frame *f, const hp_exr_zip_chunk *table, const void *got,
                                  const void *ref)
{
    if (!g_wide_on_lavapipe)
        return false;
    size_t px = f->float_image ? 16 : 8;
    for (uint32_t c = 0; c < f->chunk_count; c++) {
        size_t from = (size_t)table[c].first_line * f->width * px, n = (size_t)table[c].lines * f->width * px;
        if (table[c].status == HP_EXR_ZIP_OK ? memcmp((const uint8_t *)got + from, (const uint8_t *)ref + from, n) != 0
                                             : table[c].status != HP_EXR_ZIP_UNFINISHED)
            return false;
    }
    /* A frame all of whose chunks are past the cap checks only that they stop (bounded work); a wide inflate
     * that always gave up would still fail the frames lavapipe decodes whole (check_wide's small sizes). */
    return true;
}

/* (a): one made frame, every chunk deflated one way. */
static void check_made(gpu_test_cmd *r, hp_exr_zip_gpu *zip, uint32_t w, uint32_t h, uint32_t planes, uint32_t lpc,
                       int pattern, int level, int strategy, const char *how)
{
    /* RGBA from the first four planes; with fewer, grey and no alpha */
    uint8_t plane_of[4];
    for (int s = 0; s < 4; s++)
        plane_of[s] = planes >= 4 ? (uint8_t)(3 - s) : planes == 3 ? (s < 3 ? (uint8_t)(2 - s) : HP_EXR_ZIP_NO_PLANE)
                      : s < 3 ? 0 : (planes == 2 ? 1 : HP_EXR_ZIP_NO_PLANE);
    made_frame m = made_halves(w, h, planes, lpc, plane_of);
    m.pixels = malloc((size_t)h * planes * w * 2);
    make_pixels(&m, pattern);
    make_input(&m, &level, &strategy, 1);
    size_t values = (size_t)w * h * 4;
    uint16_t *gpu = malloc(values * 2), *ref = malloc(values * 2);
    hp_exr_zip_chunk *table = malloc(m.f.table_bytes);
    reference_image(&m, m.pixels, ref);
    bool ran = zip_run(r, zip, &m.f, m.input, gpu, table);
    uint32_t bad = 0, why = HP_EXR_ZIP_OK;
    for (uint32_t c = 0; ran && c < m.f.chunk_count; c++) {
        if (table[c].status != HP_EXR_ZIP_OK && bad++ == 0)
            why = table[c].status;
    }
    size_t d = ran ? first_difference(gpu, ref, values) : 0;
    bool capped = ran && bad > 0 && only_unfinished_wrong(&m.f, table, gpu, ref); /* lavapipe, wide: the CPU's */
    tap_ok((ran && bad == 0 && d == SIZE_MAX) || capped, "%ux%u, %u planes, %u-line chunks, %s, %s (%llu -> %llu bytes): %u chunks "
           "failed (the first: %s), first difference at value %zd", w, h, planes, lpc, pat_names[pattern], how,
           (unsigned long long)m.f.unpacked_bytes, (unsigned long long)m.f.packed_bytes, bad,
           hp_exr_zip_status_text(why), d == SIZE_MAX ? (ssize_t)-1 : (ssize_t)d);
    free(table);
    free(gpu);
    free(ref);
    free(m.pixels);
    free(m.input);
}

/* A chunk that needs more work than the pipeline allows a run (exr_zip.comp's MAX_WORK: lavapipe's pipeline
 * without slices 10000 iterations; elsewhere four a byte and more, which no deflate encoder's stream reaches)
 * stops HP_EXR_ZIP_UNFINISHED, and the daemon then decodes it on the CPU. On lavapipe a 7,808-byte chunk of
 * Huffman-only literals is past it; on a GPU the same chunk is not, and inflates. */
static void check_cap(gpu_test_cmd *r, hp_exr_zip_gpu *whole)
{
    bool lavapipe = strcmp(hp_gpu_get_info(r->gpu)->driver_name, "llvmpipe") == 0;
    made_frame m = made_halves(61, 16, 4, 16, (const uint8_t[4]){3, 2, 1, 0});
    m.pixels = malloc((size_t)16 * 4 * 61 * 2);
    make_pixels(&m, PAT_SMOOTH); /* literals of Huffman codes: noise would be stored, a copy */
    int level = 6, strategy = Z_HUFFMAN_ONLY;
    make_input(&m, &level, &strategy, 1);
    uint16_t *img = malloc((size_t)61 * 16 * 8);
    hp_exr_zip_chunk t;
    bool ran = zip_run(r, whole, &m.f, m.input, img, &t);
    tap_ok(ran && t.status == (lavapipe ? HP_EXR_ZIP_UNFINISHED : HP_EXR_ZIP_OK),
           "a chunk past the run's most work (%s) stops unfinished there, else inflates: status %u",
           lavapipe ? "lavapipe's 10000" : "four iterations a byte", t.status);
    free(img);
    free(m.pixels);
    free(m.input);
}

/* A large frame, 64 KiB-plus chunks of every kind in turn. */
static void check_large(gpu_test_cmd *r, hp_exr_zip_gpu *zip, const char *how)
{
    made_frame m = made_halves(1031, 67, 4, 16, (const uint8_t[4]){3, 2, 1, 0});
    m.pixels = malloc((size_t)67 * 4 * 1031 * 2);
    make_pixels(&m, PAT_SMOOTH);
    for (size_t i = 0; i < (size_t)67 * 4 * 1031 * 2; i += 3)
        m.pixels[i] ^= (uint8_t)(rng_next() & 7);
    const int levels[] = {1, 9, 6, 0, -2}, strategies[] = {Z_DEFAULT_STRATEGY, Z_DEFAULT_STRATEGY, Z_RLE,
                                                           Z_DEFAULT_STRATEGY, 0};
    make_input(&m, levels, strategies, 5);
    size_t values = (size_t)1031 * 67 * 4;
    uint16_t *g = malloc(values * 2), *ref = malloc(values * 2);
    hp_exr_zip_chunk *table = malloc(m.f.table_bytes);
    reference_image(&m, m.pixels, ref);
    bool ran = zip_run(r, zip, &m.f, m.input, g, table);
    uint32_t bad = 0;
    for (uint32_t c = 0; ran && c < m.f.chunk_count; c++)
        bad += table[c].status != HP_EXR_ZIP_OK;
    bool capped = ran && bad > 0 && only_unfinished_wrong(&m.f, table, g, ref);
    tap_ok((ran && bad == 0 && first_difference(g, ref, values) == SIZE_MAX) || capped,
           "1031x67, 4 planes, chunks of 132 KiB deflated 5 ways in turn%s: exact, %u chunks failed%s", how, bad,
           capped ? " (past lavapipe's cap, unfinished: the CPU's; the others exact)" : "");
    free(g);
    free(ref);
    free(table);
    free(m.pixels);
    free(m.input);
}

/* (b): each 1-line chunk of a frame damaged another way; zlib the oracle. */
static void check_damage(gpu_test_cmd *r, hp_exr_zip_gpu *zip, int level, int strategy, uint32_t lines,
                         const char *memory)
{
    made_frame m = made_halves(97, lines, 2, 1, (const uint8_t[4]){0, 0, 0, 1});
    m.pixels = malloc((size_t)lines * 2 * 97 * 2);
    make_pixels(&m, PAT_SMOOTH);
    for (size_t i = 0; i < (size_t)lines * 2 * 97 * 2; i += 7) /* some noise, so that every block type shows */
        m.pixels[i] ^= (uint8_t)rng_next();
    make_input(&m, &level, &strategy, 1);
    hp_exr_zip_chunk *t = (hp_exr_zip_chunk *)m.input;
    uint8_t *packed = m.input + m.f.table_bytes;
    for (uint32_t c = 1; c < m.f.chunk_count; c++) { /* chunk 0 stays whole */
        uint64_t kind = rng_next() % 3;
        if (kind == 0) /* cut short: the sizes say less than the stream */
            t[c].packed_size -= 1 + (uint32_t)(rng_next() % (t[c].packed_size / 2));
        else /* a byte changed, anywhere in the stream */
            packed[t[c].packed_offset + rng_next() % t[c].packed_size] ^= (uint8_t)(1 + rng_next() % 255);
        if (t[c].packed_size == t[c].unpacked_size) /* would read as stored: not what is tested */
            t[c].packed_size--;
    }
    size_t values = (size_t)97 * lines * 4;
    uint16_t *gpu = malloc(values * 2);
    hp_exr_zip_chunk *table = malloc(m.f.table_bytes);
    bool ran = zip_run(r, zip, &m.f, m.input, gpu, table);
    uint32_t agree = 0, good = 0, pixels_ok = 0, only_zlib = 0, only_gpu = 0, first_only_gpu = 0;
    size_t line = 2 * 97 * 2;
    uint8_t *t_out = malloc(line + 1), *plain = malloc(line);
    for (uint32_t c = 0; ran && c < m.f.chunk_count; c++) {
        uLongf got = line + 1;
        int zr = uncompress(t_out, &got, packed + t[c].packed_offset, t[c].packed_size);
        bool zlib_good = zr == Z_OK && got == line;
        bool gpu_good = table[c].status == HP_EXR_ZIP_OK;
        agree += zlib_good == gpu_good;
        only_zlib += zlib_good && !gpu_good;
        if (!zlib_good && gpu_good && only_gpu++ == 0)
            first_only_gpu = c;
        if (!zlib_good || !gpu_good)
            continue;
        good++;
        /* undo the transform on zlib's bytes: the pixels the GPU must show */
        for (size_t i = 1; i < line; i++)
            t_out[i] = (uint8_t)(t_out[i - 1] + t_out[i] - 128);
        for (size_t k = 0; k < line; k++)
            plain[k] = t_out[k % 2 ? line / 2 + k / 2 : k / 2];
        bool same = true;
        for (uint32_t x = 0; x < 97; x++) {
            uint16_t g, a, *px = gpu + ((size_t)c * 97 + x) * 4;
            memcpy(&g, plain + x * 2, 2);
            memcpy(&a, plain + (97 + x) * 2, 2);
            same = same && px[0] == g && px[1] == g && px[2] == g && px[3] == a;
        }
        pixels_ok += same;
    }
    tap_ok(ran && agree == m.f.chunk_count && pixels_ok == good && good >= 1,
           "damaged streams (%s%s): the GPU's verdict is zlib's for %u of %u chunks (good to zlib only: %u; to the "
           "GPU only: %u, the first chunk %u, status %u); %u good, %u with zlib's pixels",
           level == 0 ? "stored blocks" : strategy == Z_FIXED ? "fixed codes" : "dynamic codes", memory, agree,
           m.f.chunk_count, only_zlib, only_gpu, first_only_gpu, only_gpu ? table[first_only_gpu].status : 0, good,
           pixels_ok);
    free(t_out);
    free(plain);
    free(table);
    free(gpu);
    free(m.pixels);
    free(m.input);
}

/* (c): a real frame written by OpenEXR, through hp_image_zip_gather, against hp_image_decode. */
static void check_file(gpu_test_cmd *r, hp_exr_zip_gpu *zip, const char *what, const uint8_t *file, size_t len,
                       const char *expect_failure)
{
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_exr_zip_frame f;
    hp_err err = {0};
    if (hp_image_probe(file, len, &opt, &info, &err) != HP_OK ||
        hp_image_zip_gather(file, len, &opt, &info, NULL, 0, &f, &err) != HP_OK) {
        tap_ok(false, "%s: gathered: %s", what, err.message);
        return;
    }
    size_t in_bytes = f.table_bytes + f.packed_bytes + HP_EXR_ZIP_PACKED_PAD;
    uint8_t *input = malloc(in_bytes);
    hp_code gathered = hp_image_zip_gather(file, len, &opt, &info, input, in_bytes, &f, &err);
    size_t image_bytes = (size_t)hp_exr_zip_image_bytes(&f);
    uint8_t *gpu = malloc(image_bytes), *cpu = malloc(image_bytes);
    hp_exr_zip_chunk *table = malloc(f.table_bytes);
    bool ran = gathered == HP_OK && zip_run(r, zip, &f, input, gpu, table);
    hp_err gpu_err = {0}, cpu_err = {0};
    hp_code gpu_code = ran ? hp_exr_zip_gpu_check(&f, table, 0, &gpu_err) : HP_ERR_INTERNAL;
    hp_image_info probed;
    hp_code cpu_code = hp_image_probe(file, len, &opt, &probed, &cpu_err);
    /* the CPU's layout is the GPU's: RGBA16F where the colour and alpha are half */
    if (cpu_code == HP_OK && probed.half_exact == f.float_image)
        cpu_code = hp_fail(&cpu_err, HP_ERR_INTERNAL, "the CPU decodes to %s, the GPU to %s",
                           probed.half_exact ? "RGBA16F" : "RGBA32F", f.float_image ? "RGBA32F" : "RGBA16F");
    if (cpu_code == HP_OK)
        cpu_code = hp_image_decode(file, len, &opt, &probed, cpu, f.float_image ? HP_LAYOUT_RGBA32F : HP_LAYOUT_RGBA16F,
                                   NULL, &cpu_err);
    if (!expect_failure && g_wide_on_lavapipe && gpu_code == HP_ERR_INVALID_ARGUMENT) {
        tap_ok(cpu_code == HP_OK && only_unfinished_wrong(&f, table, gpu, cpu),
               "%s: chunks past lavapipe's cap left to the CPU, the others exact: %s", what, gpu_err.message);
    } else if (!expect_failure) {
        size_t d = ran ? first_byte_difference(gpu, cpu, image_bytes) : 0;
        tap_ok(ran && gpu_code == HP_OK && cpu_code == HP_OK && d == SIZE_MAX,
               "%s: %ux%u, %u channels of %u bytes a pixel, %u chunks, %llu packed bytes: the GPU's %s is the CPU "
               "decoder's (first difference at byte %zd) %s%s", what, f.width, f.height, f.planes, f.pixel_bytes,
               f.chunk_count, (unsigned long long)f.packed_bytes, f.float_image ? "RGBA32F" : "RGBA16F",
               d == SIZE_MAX ? (ssize_t)-1 : (ssize_t)d, gpu_err.message, cpu_err.message);
    } else {
        tap_ok(ran && gpu_code == HP_ERR_INVALID_ARGUMENT && cpu_code == HP_ERR_INVALID_ARGUMENT &&
                   strstr(gpu_err.message, expect_failure) && strstr(cpu_err.message, expect_failure),
               "%s: refused on the GPU as on the CPU, both naming \"%s\":\n#   GPU: %s\n#   CPU: %s", what,
               expect_failure, gpu_err.message, cpu_err.message);
    }
    free(input);
    free(gpu);
    free(cpu);
    free(table);
}

/* How check_run decodes: the GPU's inflate (hp_exr_zip_gpu_run over hp_image_zip_gather's chunks), the split
 * (hp_image_zip_inflate, then hp_exr_zip_gpu_finish), or the split with chunk 3's Adler-32 in the table
 * changed after the CPU's inflate (the GPU's check after the copy must refuse it). */
typedef enum { RUN_GPU, RUN_SPLIT, RUN_SPLIT_BAD_ADLER } run_how;

static hp_code run_how_decode(hp_exr_zip_gpu *zip, run_how how, const uint8_t *file, size_t len, hp_image_info *info,
                              hp_exr_zip_frame *f, hp_buffer *in, hp_buffer *out, double *ms, hp_err *err)
{
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    opt.threads = 4; /* the split's chunks taken by several threads, as in the daemon */
    if (how == RUN_GPU)
        return hp_exr_zip_gpu_run(zip, f, in, out, ms, err);
    hp_code code = hp_image_zip_inflate(file, len, &opt, info, in->mapped, in->size, f, err);
    if (code == HP_OK && how == RUN_SPLIT_BAD_ADLER)
        ((hp_exr_zip_chunk *)in->mapped)[3].unused ^= 1;
    return code == HP_OK ? hp_exr_zip_gpu_finish(zip, f, in, out, ms, err) : code;
}

/* bytes of src (device memory) copied into back (host memory) on the compute queue and waited for. */
static bool copy_back(gpu_test_cmd *r, const hp_buffer *src, const hp_buffer *back, size_t bytes)
{
    VkDevice dev = hp_gpu_device(r->gpu);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &r->cmd};
    bool ok = vkResetCommandPool(dev, r->pool, 0) == VK_SUCCESS && vkBeginCommandBuffer(r->cmd, &bi) == VK_SUCCESS;
    if (ok) {
        vkCmdCopyBuffer(r->cmd, src->buffer, back->buffer, 1, &(VkBufferCopy){.size = bytes});
        gpu_test_barrier(r->cmd);
    }
    ok = ok && vkEndCommandBuffer(r->cmd) == VK_SUCCESS && vkResetFences(dev, 1, &r->fence) == VK_SUCCESS &&
         vkQueueSubmit(hp_gpu_compute_queue(r->gpu), 1, &si, r->fence) == VK_SUCCESS &&
         vkWaitForFences(dev, 1, &r->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS;
    if (ok)
        hp_buffer_invalidate(r->gpu, back);
    return ok;
}

/* (e): through hp_exr_zip_gpu_run or the split, against hp_image_decode: the same image, or the same chunk
 * named. */
static void check_run(gpu_test_cmd *r, hp_exr_zip_gpu *zip, const char *what, const uint8_t *file, size_t len,
                      run_how how)
{
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    hp_exr_zip_frame f;
    hp_err err = {0}, cpu_err = {0}, gpu_err = {0};
    hp_buffer in = {0}, out = {0}, back = {0};
    bool ok = file && hp_image_probe(file, len, &opt, &info, &err) == HP_OK &&
              hp_image_zip_gather(file, len, &opt, &info, NULL, 0, &f, &err) == HP_OK;
    size_t in_bytes = !ok ? 0 : how == RUN_GPU ? f.table_bytes + f.packed_bytes + HP_EXR_ZIP_PACKED_PAD
                                               : f.table_bytes + f.unpacked_bytes;
    size_t image_bytes = ok ? (size_t)hp_exr_zip_image_bytes(&f) : 0;
    ok = ok && hp_buffer_create(r->gpu, in_bytes, HP_MEM_READBACK_SHADER, "run_in", &in, &err) == HP_OK &&
         hp_buffer_create(r->gpu, hp_exr_zip_gpu_output_bytes(&f), HP_MEM_DEVICE, "run_out", &out, &err) == HP_OK &&
         hp_buffer_create(r->gpu, image_bytes, HP_MEM_READBACK, "run_back", &back, &err) == HP_OK &&
         (how != RUN_GPU || hp_image_zip_gather(file, len, &opt, &info, in.mapped, in_bytes, &f, &err) == HP_OK);
    double ms = 0;
    hp_code gpu_code = ok ? run_how_decode(zip, how, file, len, &info, &f, &in, &out, &ms, &gpu_err) : HP_ERR_INTERNAL;
    uint8_t *cpu = ok ? malloc(image_bytes) : NULL;
    hp_code cpu_code = ok ? hp_image_decode(file, len, &opt, &info, cpu,
                                            f.float_image ? HP_LAYOUT_RGBA32F : HP_LAYOUT_RGBA16F, NULL, &cpu_err)
                          : HP_ERR_INTERNAL;
    bool same = ok && gpu_code == HP_OK && cpu_code == HP_OK && copy_back(r, &out, &back, image_bytes) &&
                memcmp(back.mapped, cpu, image_bytes) == 0;
    if (how == RUN_SPLIT_BAD_ADLER)
        tap_ok(cpu_code == HP_OK && gpu_code == HP_ERR_INVALID_ARGUMENT && strstr(gpu_err.message, "chunk 3 ") &&
                   strstr(gpu_err.message, "bad checksum"), "%s: the GPU's finish refuses chunk 3: %s", what,
               gpu_err.message);
    else if (cpu_code == HP_OK && g_wide_on_lavapipe && gpu_code == HP_ERR_INVALID_ARGUMENT)
        tap_ok(strstr(gpu_err.message, "needs more work") != NULL, "%s: past lavapipe's cap, left to the CPU: %s", what,
               gpu_err.message);
    else if (cpu_code == HP_OK)
        tap_ok(same, "%s: %ux%u in %.1f ms of GPU time, the image is the CPU decoder's %s", what, ok ? f.width : 0,
               ok ? f.height : 0, ms, gpu_err.message);
    else if (g_wide_on_lavapipe && gpu_code == HP_ERR_INVALID_ARGUMENT && strstr(gpu_err.message, "needs more work"))
        tap_ok(ok && ((const hp_exr_zip_chunk *)in.mapped)[f.chunk_count - 1].status != HP_EXR_ZIP_OK,
               "%s: past lavapipe's cap, left to the CPU, which refuses it; the damaged last chunk not taken: %s",
               what, cpu_err.message);
    else
        tap_ok(gpu_code == HP_ERR_INVALID_ARGUMENT && strstr(gpu_err.message, "chunk ") &&
                   strncmp(strstr(gpu_err.message, "chunk "), strstr(cpu_err.message, "chunk ") ? strstr(cpu_err.message, "chunk ") : "", 30) == 0,
               "%s: refused as the CPU refuses it:\n#   GPU: %s\n#   CPU: %s", what, gpu_err.message, cpu_err.message);
    free(cpu);
    hp_buffer_destroy(r->gpu, &in);
    hp_buffer_destroy(r->gpu, &out);
    hp_buffer_destroy(r->gpu, &back);
}

/* (f): frames decoded together (exr_zip_gpu.c's batches). BATCH_FRAMES made frames, the last with a damaged
 * chunk: in one batch by hp_exr_zip_gpu_run_together, and from as many threads at once through
 * hp_exr_zip_gpu_run (those that arrive while a batch is on the device go on together). Each frame's image is
 * its own reference's and each verdict its own: the damaged frame refused, naming its chunk, the others not. */
#define BATCH_FRAMES 5
typedef struct batch_frame {
    made_frame m;
    hp_buffer in, out;
    uint16_t *ref;
    hp_code code;
    hp_err err;
    hp_exr_zip_gpu *zip;
} batch_frame;

static void *batch_thread(void *p)
{
    batch_frame *b = p;
    b->code = hp_exr_zip_gpu_run(b->zip, &b->m.f, &b->in, &b->out, NULL, &b->err);
    return NULL;
}

/* The frame's image from its output buffer equals its reference (its table's statuses fresh for the next run). */
static bool batch_image_ok(gpu_test_cmd *r, batch_frame *b)
{
    size_t bytes = (size_t)b->m.f.width * b->m.f.height * 8;
    hp_buffer back = {0};
    hp_err err = {0};
    bool ok = hp_buffer_create(r->gpu, bytes, HP_MEM_READBACK, "batch_back", &back, &err) == HP_OK &&
              copy_back(r, &b->out, &back, bytes) && memcmp(back.mapped, b->ref, bytes) == 0;
    hp_buffer_destroy(r->gpu, &back);
    return ok;
}

static void batch_verdicts(gpu_test_cmd *r, batch_frame *b, const char *how)
{
    for (int i = 0; i < BATCH_FRAMES; i++) {
        const hp_exr_zip_frame *f = &b[i].m.f;
        if (i < BATCH_FRAMES - 1)
            tap_ok(b[i].code == HP_OK && batch_image_ok(r, &b[i]), "%s: frame %d (%ux%u, %u planes, %u-line chunks) "
                   "is its reference %s", how, i, f->width, f->height, f->planes, f->lines_per_chunk, b[i].err.message);
        else
            tap_ok(b[i].code == HP_ERR_INVALID_ARGUMENT && strstr(b[i].err.message, "chunk 1 ") != NULL,
                   "%s: the damaged frame is refused, its chunk named: %s", how, b[i].err.message);
        memcpy(b[i].in.mapped, b[i].m.input, f->table_bytes); /* fresh statuses */
        hp_buffer_flush(r->gpu, &b[i].in);
        b[i].err = (hp_err){0};
    }
}

static void check_together(gpu_test_cmd *r, hp_exr_zip_gpu *zip, bool small, const char *what)
{
    typedef struct { uint32_t w, h, planes, lpc; int pattern, level; } made_desc;
    static const made_desc made[2][BATCH_FRAMES] = {
        {{61, 40, 4, 16, PAT_NOISE, 6}, {45, 7, 3, 16, PAT_SMOOTH, 9}, {200, 33, 5, 1, PAT_SMOOTH, 1},
         {517, 35, 4, 16, PAT_SMOOTH, 6}, {61, 40, 4, 16, PAT_SMOOTH, 6}},
        {{61, 40, 4, 1, PAT_NOISE, 6}, {45, 7, 3, 16, PAT_SMOOTH, 9}, {61, 12, 4, 1, PAT_SMOOTH, 1},
         {45, 20, 3, 16, PAT_FLAT, 6}, {61, 40, 4, 1, PAT_SMOOTH, 6}},
    };
    batch_frame b[BATCH_FRAMES] = {0};
    bool ok = true;
    for (int i = 0; i < BATCH_FRAMES && ok; i++) {
        const made_desc *d = &made[small][i];
        uint8_t plane_of[4] = {d->planes >= 4 ? 3 : 2, d->planes >= 4 ? 2 : 1, d->planes >= 4 ? 1 : 0,
                               d->planes >= 4 ? 0 : HP_EXR_ZIP_NO_PLANE};
        b[i].zip = zip;
        b[i].m = made_halves(d->w, d->h, d->planes, d->lpc, plane_of);
        b[i].m.pixels = malloc((size_t)d->h * d->planes * d->w * 2);
        b[i].ref = malloc((size_t)d->w * d->h * 8);
        make_pixels(&b[i].m, d->pattern);
        int strategy = Z_DEFAULT_STRATEGY;
        make_input(&b[i].m, &d->level, &strategy, 1);
        reference_image(&b[i].m, b[i].m.pixels, b[i].ref);
        const hp_exr_zip_frame *f = &b[i].m.f;
        if (i == BATCH_FRAMES - 1) { /* chunk 1's stream: a byte in its middle */
            const hp_exr_zip_chunk *t = (const hp_exr_zip_chunk *)b[i].m.input;
            b[i].m.input[f->table_bytes + t[1].packed_offset + t[1].packed_size / 2] ^= 0x5a;
        }
        size_t in_bytes = f->table_bytes + f->packed_bytes + HP_EXR_ZIP_PACKED_PAD;
        ok = hp_buffer_create(r->gpu, in_bytes, HP_MEM_READBACK_SHADER, "batch_in", &b[i].in, &b[i].err) == HP_OK &&
             hp_buffer_create(r->gpu, hp_exr_zip_gpu_output_bytes(f), HP_MEM_DEVICE, "batch_out", &b[i].out,
                              &b[i].err) == HP_OK;
        if (ok) {
            memcpy(b[i].in.mapped, b[i].m.input, in_bytes);
            hp_buffer_flush(r->gpu, &b[i].in);
        }
    }
    tap_ok(ok, "%s: %d frames made", what, BATCH_FRAMES);
    if (ok) {
        hp_exr_zip_frame frames[BATCH_FRAMES];
        hp_buffer in[BATCH_FRAMES], out[BATCH_FRAMES];
        for (int i = 0; i < BATCH_FRAMES; i++) {
            frames[i] = b[i].m.f;
            in[i] = b[i].in;
            out[i] = b[i].out;
        }
        char how[160];
        snprintf(how, sizeof(how), "%s, in one batch", what);
        hp_err err = {0};
        double ms = 0;
        hp_exr_zip_batch_stats s0, s1;
        hp_exr_zip_gpu_batch_stats(zip, &s0);
        hp_code code = hp_exr_zip_gpu_run_together(zip, BATCH_FRAMES, frames, in, out, &ms, &err);
        hp_exr_zip_gpu_batch_stats(zip, &s1);
        /* BATCH_FRAMES (5) frames: the histogram's bucket of more than 4 and at most 6 */
        tap_ok(s1.sizes[4] - s0.sizes[4] == 1 && s1.batches[0] + s1.batches[1] - s0.batches[0] - s0.batches[1] == 1 &&
                   s1.frames[0] + s1.frames[1] - s0.frames[0] - s0.frames[1] == BATCH_FRAMES &&
                   s1.gpu_seconds[0] + s1.gpu_seconds[1] > s0.gpu_seconds[0] + s0.gpu_seconds[1],
               "%s: the batch counted, its %d frames in the bucket of 5 and 6 (%s, %llu batches of 5-6 before, "
               "%llu after)", how, BATCH_FRAMES, s1.batches[1] > s0.batches[1] ? "wide" : "serial",
               (unsigned long long)s0.sizes[4], (unsigned long long)s1.sizes[4]);
        tap_ok(code == HP_ERR_INVALID_ARGUMENT && strstr(err.message, "chunk 1 ") != NULL,
               "%s: the batch's first failure is the damaged frame's: %s", how, err.message);
        tap_ok(ms > 0, "%s: the batch's time on the GPU read from its timestamps: %.3f ms", how, ms);
        for (int i = 0; i < BATCH_FRAMES; i++) /* each frame's own verdict from its table */
            b[i].code = hp_exr_zip_gpu_check(&b[i].m.f, b[i].in.mapped, 0, &b[i].err);
        batch_verdicts(r, b, how);
        pthread_t th[BATCH_FRAMES];
        for (int i = 0; i < BATCH_FRAMES; i++)
            pthread_create(&th[i], NULL, batch_thread, &b[i]);
        for (int i = 0; i < BATCH_FRAMES; i++)
            pthread_join(th[i], NULL);
        snprintf(how, sizeof(how), "%s, from %d threads at once", what, BATCH_FRAMES);
        batch_verdicts(r, b, how);
    }
    for (int i = 0; i < BATCH_FRAMES; i++) {
        hp_buffer_destroy(r->gpu, &b[i].in);
        hp_buffer_destroy(r->gpu, &b[i].out);
        free(b[i].m.pixels);
        free(b[i].m.input);
        free(b[i].ref);
    }
}

/* check_together with two batches on the GPU at once (hp_exr_zip_gpu_batches_in_flight), each on a decode
 * queue of its own: the threads' frames then go in batches side by side. A device with one decode queue
 * (lavapipe) keeps one batch at a time, which the count returned says. */
static void check_two_at_once(gpu_test_cmd *r, hp_exr_zip_gpu *zip, bool small, const char *what)
{
    uint32_t queues = hp_gpu_decode_queue_count(r->gpu);
    uint32_t lanes = hp_exr_zip_gpu_batches_in_flight(zip, 2);
    tap_ok(lanes == (queues >= 2 ? 2u : 1u), "%s: two batches at once asked, %u in force (%u decode queues)", what,
           lanes, queues);
    char how[160];
    snprintf(how, sizeof(how), "%s, %u batches at once", what, lanes);
    hp_exr_zip_batch_stats s0, s1;
    hp_exr_zip_gpu_batch_stats(zip, &s0);
    check_together(r, zip, small, how);
    hp_exr_zip_gpu_batch_stats(zip, &s1);
    /* The threads start within microseconds, a batch takes longer on the GPU: the second leads beside the
     * first. With one lane none may. */
    tap_ok(lanes == 2 ? s1.beside > s0.beside : s1.beside == s0.beside, "%s: batches begun beside another: %llu",
           how, (unsigned long long)(s1.beside - s0.beside));
    hp_exr_zip_gpu_batches_in_flight(zip, 1);
}

/* A frame's shape as renderers and oiiotool write them: its channels (name and type: NULL types, all half),
 * compression, data window and line order. */
typedef struct file_shape {
    const char *what;
    const char *const *names;
    const int *types; /* exr_pixel_type_t a channel, or NULL: half */
    int count, compression, data_y, decreasing_y;
} file_shape;

/* A channel's value at pixel i: R, G, B, A from the frame (Y its G), Z and the AOVs made up; the first
 * values of R are the edges of half (subnormals, the largest, infinity, NaN), which a float image widens. */
static float shape_value(const char *name, const float *rgba, size_t i)
{
    static const float edges[] = {5.9604645e-8f, -6.1e-5f, 65504.0f, INFINITY, NAN, -0.0f, 1e-7f, 3.0e-5f};
    int from = name[1] ? -1 : name[0] == 'R' ? 0 : name[0] == 'G' || name[0] == 'Y' ? 1 : name[0] == 'B' ? 2
               : name[0] == 'A' ? 3 : -1;
    if (from == 0 && i < sizeof(edges) / sizeof(edges[0]))
        return edges[i];
    if (from >= 0)
        return rgba[i * 4 + from] * (from == 3 ? 1.0f : 1.0f + 1e-4f * (float)(i % 7)); /* below half's step */
    return (float)(i % 977) * 0.25f + (float)(strlen(name) % 5); /* Z, N.x, ID, ... */
}

static uint8_t *write_shape(const float *rgba, int w, int h, const file_shape *shape, size_t *len)
{
    hp_exr_channel ch[16];
    void *planes[16];
    size_t n = (size_t)w * h;
    for (int c = 0; c < shape->count; c++) {
        int type = shape->types ? shape->types[c] : EXR_PIXEL_HALF;
        planes[c] = malloc(n * hp_exr_type_size(type));
        for (size_t i = 0; i < n; i++) {
            float v = shape_value(shape->names[c], rgba, i);
            if (type == EXR_PIXEL_HALF)
                ((uint16_t *)planes[c])[i] = hp_float_to_half(v);
            else if (type == EXR_PIXEL_FLOAT)
                ((float *)planes[c])[i] = v;
            else
                ((uint32_t *)planes[c])[i] = (uint32_t)(i * 2654435761u); /* an ID: every bit in use */
        }
        ch[c] = (hp_exr_channel){.name = shape->names[c], .type = type, .data = planes[c]};
    }
    hp_exr_spec spec = {.width = w, .height = h, .data_y = shape->data_y, .display_w = w,
                        .display_h = h + shape->data_y, .compression = shape->compression,
                        .decreasing_y = shape->decreasing_y, .channels = ch, .channel_count = shape->count};
    uint8_t *out = NULL;
    if (!hp_exr_write_core(&spec, 1, &out, len))
        out = NULL;
    for (int c = 0; c < shape->count; c++)
        free(planes[c]);
    return out;
}

static uint8_t *write_exr(const float *rgba, int w, int h, const char *const *names, int count, int compression,
                          int data_y, size_t *len)
{
    file_shape shape = {.names = names, .count = count, .compression = compression, .data_y = data_y};
    return write_shape(rgba, w, h, &shape, len);
}

/* Every shape of issue 36's list: RGB, RGBA and Y; half, float and the two mixed; channels beside the colour
 * (AOVs of every type, depth), which sort between and around R, G, B and A; both line orders. */
static const char *const s_rgba[] = {"A", "B", "G", "R"}, *const s_rgb[] = {"B", "G", "R"}, *const s_y[] = {"Y"},
                         *const s_aov[] = {"A", "B", "G", "ID", "N.x", "N.y", "N.z", "R", "Z", "diffuse.R"},
                         *const s_aov_rgb[] = {"B", "G", "N.x", "R", "Z"};
static const int t_float4[] = {EXR_PIXEL_FLOAT, EXR_PIXEL_FLOAT, EXR_PIXEL_FLOAT, EXR_PIXEL_FLOAT},
                 t_alpha_float[] = {EXR_PIXEL_FLOAT, EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_HALF},
                 t_red_float[] = {EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_FLOAT},
                 t_aov[] = {EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_HALF, EXR_PIXEL_UINT, EXR_PIXEL_FLOAT,
                            EXR_PIXEL_FLOAT, EXR_PIXEL_FLOAT, EXR_PIXEL_HALF, EXR_PIXEL_FLOAT, EXR_PIXEL_HALF},
                 t_aov_float[] = {EXR_PIXEL_FLOAT, EXR_PIXEL_FLOAT, EXR_PIXEL_HALF, EXR_PIXEL_FLOAT, EXR_PIXEL_UINT};
static const file_shape shapes[] = {
    {"RGBA float ZIP", s_rgba, t_float4, 4, EXR_COMPRESSION_ZIP, 0, 0},
    {"RGB float ZIPS", s_rgb, t_float4, 3, EXR_COMPRESSION_ZIPS, 0, 0},
    {"Y float ZIP", s_y, t_float4, 1, EXR_COMPRESSION_ZIP, 0, 0},
    {"RGB half, A float ZIP", s_rgba, t_alpha_float, 4, EXR_COMPRESSION_ZIP, 0, 0},
    {"RGB, R float, ZIP", s_rgb, t_red_float, 3, EXR_COMPRESSION_ZIP, 0, 0},
    {"RGBA half with AOVs (uint ID, float normals and Z, half diffuse) ZIP", s_aov, t_aov, 10, EXR_COMPRESSION_ZIP,
     0, 0},
    {"RGBA half with AOVs ZIPS, data window from row 5", s_aov, t_aov, 10, EXR_COMPRESSION_ZIPS, 5, 0},
    {"RGB float with half normals and uint Z ZIP", s_aov_rgb, t_aov_float, 5, EXR_COMPRESSION_ZIP, 0, 0},
    {"RGBA half ZIP, decreasing Y", s_rgba, NULL, 4, EXR_COMPRESSION_ZIP, 0, 1},
    {"RGB float ZIPS, decreasing Y", s_rgb, t_float4, 3, EXR_COMPRESSION_ZIPS, 0, 1},
    {"RGBA half with AOVs ZIP, decreasing Y", s_aov, t_aov, 10, EXR_COMPRESSION_ZIP, 0, 1},
};
#define SHAPE_COUNT (sizeof(shapes) / sizeof(shapes[0]))

/* (f) The wide inflate (hp_exr_zip_gpu_set_wide): the streams of (a), (b), (c) and (e) again, each chunk
 * decoded by a workgroup of 256 at once. */
static void check_wide(gpu_test_cmd *r, hp_gpu *gpu, const float *rgba, int w, int h)
{
    hp_err err = {0};
    hp_exr_zip_gpu *wide = NULL;
    if (hp_exr_zip_gpu_create(gpu, 0, &wide, &err) != HP_OK) {
        tap_ok(false, "create the EXR ZIP pipelines: %s", err.message);
        return;
    }
    tap_ok(hp_exr_zip_gpu_set_wide(wide, true), "the wide inflate is on: the device has 8-bit storage");
    g_wide_on_lavapipe = strcmp(hp_gpu_get_info(gpu)->driver_name, "llvmpipe") == 0;
    static const struct { int level, strategy; const char *how; } ways[] = {
        {0, Z_DEFAULT_STRATEGY, "wide, zlib level 0 (stored blocks)"}, {1, Z_DEFAULT_STRATEGY, "wide, zlib level 1"},
        {9, Z_DEFAULT_STRATEGY, "wide, zlib level 9"}, {6, Z_FIXED, "wide, fixed codes"},
        {6, Z_HUFFMAN_ONLY, "wide, Huffman only"}, {6, Z_RLE, "wide, run lengths"}, {-2, 0, "wide, stored as is"}};
    static const struct { uint32_t w, h, planes, lpc; } sizes[] = {
        {1, 1, 1, 16}, {1, 1, 4, 1}, {3, 17, 3, 16}, {61, 40, 4, 16}, {200, 33, 5, 1}, {517, 35, 4, 16}};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (size_t k = 0; k < sizeof(ways) / sizeof(ways[0]); k++)
            for (int p = 0; p < PAT_COUNT; p++)
                check_made(r, wide, sizes[s].w, sizes[s].h, sizes[s].planes, sizes[s].lpc, p, ways[k].level,
                           ways[k].strategy, ways[k].how);
    check_large(r, wide, ", wide");
    check_damage(r, wide, 6, Z_DEFAULT_STRATEGY, 400, "");
    check_damage(r, wide, 6, Z_FIXED, 200, "");
    check_damage(r, wide, 0, Z_DEFAULT_STRATEGY, 200, "");
    /* A walk that fails leaves its batch's pointers as the image's memory held them: here words with bit 31
     * set, which read as pointers marked final and out of range. The verdict must still be the workgroup's
     * (a lane's own would take the workgroup's barriers apart) and zlib's. */
    zip_run_image_fill = 0xfe00fe00u;
    check_damage(r, wide, 6, Z_DEFAULT_STRATEGY, 400, ", the image's memory 0xfe00fe00 before");
    check_damage(r, wide, 6, Z_FIXED, 200, ", the image's memory 0xfe00fe00 before");
    zip_run_image_fill = 0x7e007e00u;
    static const char *const rgba_names[] = {"A", "B", "G", "R"}, *const rgb_names[] = {"B", "G", "R"},
                             *const grey_names[] = {"Y"};
    static const struct { const char *what; const char *const *names; int count, compression; } files[] = {
        {"street RGBA ZIP, wide", rgba_names, 4, EXR_COMPRESSION_ZIP},
        {"street RGBA ZIPS, wide", rgba_names, 4, EXR_COMPRESSION_ZIPS},
        {"street RGB ZIP, wide", rgb_names, 3, EXR_COMPRESSION_ZIP},
        {"street grey ZIP, wide", grey_names, 1, EXR_COMPRESSION_ZIP},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        size_t len;
        uint8_t *file = write_exr(rgba, w, h, files[i].names, files[i].count, files[i].compression, 0, &len);
        if (file)
            check_file(r, wide, files[i].what, file, len, NULL);
        if (file && i == 0) {
            check_run(r, wide, "street RGBA ZIP through hp_exr_zip_gpu_run, wide", file, len, RUN_GPU);
            file[len - 1] ^= 0x5a; /* the last chunk's Adler-32 */
            check_run(r, wide, "the last chunk damaged, through hp_exr_zip_gpu_run, wide", file, len, RUN_GPU);
        }
        tap_ok(file != NULL, "%s: written", files[i].what);
        free(file);
    }
    for (size_t i = 0; i < SHAPE_COUNT; i++) {
        /* On lavapipe a 16-line chunk of these frames is past the wide inflate's cap there (left to the CPU,
         * which the first such shape checks): the 1-line ZIPS chunks decode whole, the shapes' real test */
        if (g_wide_on_lavapipe && i > 0 && shapes[i].compression != EXR_COMPRESSION_ZIPS)
            continue;
        size_t len;
        uint8_t *file = write_shape(rgba, w, h, &shapes[i], &len);
        char what[160];
        snprintf(what, sizeof(what), "%s, wide", shapes[i].what);
        if (file)
            check_file(r, wide, what, file, len, NULL);
        tap_ok(file != NULL, "%s: written", what);
        free(file);
    }
    /* A map of 4 starts: most lanes' true starts lie past it and are decoded on demand, one lane at a time
     * (exr_inflate_wide.comp's wide_starts), which the default map of 16 meets only now and then. */
    tap_ok(hp_exr_zip_gpu_wide_tune(wide, 512, 4, 256), "the wide inflate made again with a map of 4 starts");
    for (size_t k = 1; k < 6; k++)
        for (int p = 0; p < PAT_COUNT; p++) {
            check_made(r, wide, 61, 40, 4, 16, p, ways[k].level, ways[k].strategy, "wide, 4 starts mapped");
            check_made(r, wide, 517, 35, 4, 16, p, ways[k].level, ways[k].strategy, "wide, 4 starts mapped");
        }
    check_damage(r, wide, 6, Z_DEFAULT_STRATEGY, 200, "");
    {
        size_t len;
        uint8_t *file = write_exr(rgba, w, h, grey_names, 1, EXR_COMPRESSION_ZIP, 0, &len);
        if (file)
            check_file(r, wide, "street grey ZIP, wide, 4 starts mapped", file, len, NULL);
        tap_ok(file != NULL, "street grey ZIP, 4 starts mapped: written");
        free(file);
    }
    /* Frames together by the wide inflate (on a GPU: lavapipe's cap leaves these chunks to the CPU) */
    if (!g_wide_on_lavapipe) {
        hp_exr_zip_gpu_batch_tune(wide, UINT32_MAX);
        check_together(r, wide, false, "the wide inflate");
        check_two_at_once(r, wide, false, "the wide inflate");
    }
    g_wide_on_lavapipe = false;
    hp_exr_zip_gpu_destroy(&wide);
}

int main(void)
{
    hp_err err = {0};
    hp_gpu *gpu = NULL;
    int bail = gpu_test_open(&gpu, NULL, &err);
    if (bail)
        return bail;
    tap_diag("device: %s", hp_gpu_get_info(gpu)->device_name);
    hp_exr_zip_gpu *zip = NULL;
    if (hp_exr_zip_gpu_create(gpu, 0, &zip, &err) != HP_OK)
        return tap_bail("create the EXR ZIP pipelines: %s", err.message);
    gpu_test_cmd r;
    if (!gpu_test_cmd_init(&r, gpu))
        return tap_bail("command buffer");

    /* (a) */
    static const struct { int level, strategy; const char *how; } ways[] = {
        {0, Z_DEFAULT_STRATEGY, "zlib level 0 (stored blocks)"}, {1, Z_DEFAULT_STRATEGY, "zlib level 1"},
        {9, Z_DEFAULT_STRATEGY, "zlib level 9"}, {6, Z_FIXED, "fixed codes"}, {6, Z_HUFFMAN_ONLY, "Huffman only"},
        {6, Z_RLE, "run lengths"}, {-2, 0, "stored as is"}};
    static const struct { uint32_t w, h, planes, lpc; } sizes[] = {
        {1, 1, 1, 16}, {1, 1, 4, 1}, {3, 17, 3, 16}, {61, 40, 4, 16}, {200, 33, 5, 1}, {517, 35, 4, 16}};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (size_t k = 0; k < sizeof(ways) / sizeof(ways[0]); k++)
            for (int p = 0; p < PAT_COUNT; p++) {
                if (s < 3 && p != PAT_SMOOTH && k % 2) /* the smallest sizes: fewer combinations */
                    continue;
                check_made(&r, zip, sizes[s].w, sizes[s].h, sizes[s].planes, sizes[s].lpc, p, ways[k].level,
                           ways[k].strategy, ways[k].how);
            }
    check_large(&r, zip, "");

    /* (a) again without slices: one dispatch, then the finish, as on a GPU (lavapipe's loop limit leaves room
     * for chunks this small) */
    hp_exr_zip_gpu *whole = NULL;
    if (hp_exr_zip_gpu_create(gpu, HP_EXR_ZIP_NO_SLICE, &whole, &err) != HP_OK)
        return tap_bail("create the EXR ZIP pipelines without slices: %s", err.message);
    tap_ok(!hp_exr_zip_gpu_sliced(whole) && hp_exr_zip_gpu_sliced(zip) == (strcmp(hp_gpu_get_info(gpu)->driver_name,
                                                                                   "llvmpipe") == 0),
           "slices on lavapipe only, unless asked for");
    for (size_t k = 0; k < sizeof(ways) / sizeof(ways[0]); k++)
        for (int p = 0; p < PAT_COUNT; p++) {
            check_made(&r, whole, 61, 40, 4, 1, p, ways[k].level, ways[k].strategy, ways[k].how);
            check_made(&r, whole, 45, 7, 3, 16, p, ways[k].level, ways[k].strategy, ways[k].how);
        }
    check_cap(&r, whole);
    check_damage(&r, whole, 6, Z_DEFAULT_STRATEGY, 300, "");
    /* and as a GPU runs it, with no bound of lavapipe's (exr_zip.comp's COUNT_LITERALS off): valid streams only,
     * as a damaged one could run into lavapipe's loop limit */
    hp_exr_zip_gpu *as_gpu = NULL;
    if (hp_exr_zip_gpu_create(gpu, HP_EXR_ZIP_AS_A_GPU, &as_gpu, &err) != HP_OK)
        return tap_bail("create the EXR ZIP pipelines as a GPU runs them: %s", err.message);
    for (size_t k = 0; k < sizeof(ways) / sizeof(ways[0]); k++)
        for (int p = 0; p < PAT_COUNT; p++)
            check_made(&r, as_gpu, 45, 7, 3, 16, p, ways[k].level, ways[k].strategy, ways[k].how);
    hp_exr_zip_gpu_destroy(&as_gpu);

    /* (b) */
    check_damage(&r, zip, 6, Z_DEFAULT_STRATEGY, 400, "");
    check_damage(&r, zip, 6, Z_FIXED, 200, "");
    check_damage(&r, zip, 0, Z_DEFAULT_STRATEGY, 200, "");

    /* (c) */
    size_t src_len;
    uint8_t *src = hp_read_file(HP_TEST_DATA "/blender_street_960x540_singlelayer.exr", &src_len);
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    float *rgba = NULL;
    if (!src || hp_image_probe(src, src_len, &opt, &info, &err) != HP_OK ||
        !(rgba = malloc((size_t)info.width * info.height * 16)) ||
        hp_image_decode(src, src_len, &opt, &info, rgba, HP_LAYOUT_RGBA32F, NULL, &err) != HP_OK)
        return tap_bail("read the street frame: %s", err.message);
    int w = (int)info.width, h = (int)info.height;
    static const char *const rgba_names[] = {"A", "B", "G", "R"}, *const rgb_names[] = {"B", "G", "R"},
                             *const grey_names[] = {"Y"}, *const z_names[] = {"A", "B", "G", "R", "Z"};
    static const struct { const char *what; const char *const *names; int count, compression, data_y; } files[] = {
        {"street RGBA ZIP", rgba_names, 4, EXR_COMPRESSION_ZIP, 0},
        {"street RGBA ZIPS", rgba_names, 4, EXR_COMPRESSION_ZIPS, 0},
        {"street RGB ZIP", rgb_names, 3, EXR_COMPRESSION_ZIP, 0},
        {"street grey ZIP", grey_names, 1, EXR_COMPRESSION_ZIP, 0},
        {"street RGBA and Z ZIP, data window from row 37", z_names, 5, EXR_COMPRESSION_ZIP, 37},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        size_t len;
        uint8_t *file = write_exr(rgba, w, h, files[i].names, files[i].count, files[i].compression, files[i].data_y, &len);
        if (!file) {
            tap_ok(false, "%s: written", files[i].what);
            continue;
        }
        check_file(&r, zip, files[i].what, file, len, NULL);
        char split_what[128];
        snprintf(split_what, sizeof(split_what), "%s through the split", files[i].what);
        check_run(&r, zip, split_what, file, len, RUN_SPLIT);
        free(file);
    }
    /* Every shape (issue 36), through the GPU's inflate (its table read back) and the daemon's two calls */
    for (size_t i = 0; i < SHAPE_COUNT; i++) {
        size_t len;
        uint8_t *file = write_shape(rgba, w, h, &shapes[i], &len);
        tap_ok(file != NULL, "%s: written", shapes[i].what);
        if (!file)
            continue;
        char what[160];
        check_file(&r, zip, shapes[i].what, file, len, NULL);
        snprintf(what, sizeof(what), "%s through hp_exr_zip_gpu_run", shapes[i].what);
        check_run(&r, zip, what, file, len, RUN_GPU);
        snprintf(what, sizeof(what), "%s through the split", shapes[i].what);
        check_run(&r, zip, what, file, len, RUN_SPLIT);
        free(file);
    }
    /* A damaged chunk: chunk 5's Adler-32 (its stream's last byte), then chunk 9's zlib header. */
    {
        size_t len;
        uint8_t *file = write_exr(rgba, w, h, rgba_names, 4, EXR_COMPRESSION_ZIP, 0, &len);
        hp_exr_zip_frame f;
        hp_err e = {0};
        uint8_t *input = NULL;
        if (file && hp_image_zip_gather(file, len, &opt, &info, NULL, 0, &f, &e) == HP_OK &&
            (input = malloc(f.table_bytes + f.packed_bytes + HP_EXR_ZIP_PACKED_PAD)) &&
            hp_image_zip_gather(file, len, &opt, &info, input, f.table_bytes + f.packed_bytes + HP_EXR_ZIP_PACKED_PAD,
                                &f, &e) == HP_OK) {
            const hp_exr_zip_chunk *t = (const hp_exr_zip_chunk *)input;
            /* the chunk's bytes in the file: find them by content (the table has offsets into packed) */
            const uint8_t *c5 = input + f.table_bytes + t[5].packed_offset;
            uint8_t *at = memmem(file, len, c5, t[5].packed_size);
            if (at) {
                at[t[5].packed_size - 1] ^= 0x55;
                check_file(&r, zip, "chunk 5's Adler-32 changed", file, len, "chunk 5 (scanlines 80-95)");
                at[t[5].packed_size - 1] ^= 0x55;
            }
            const uint8_t *c9 = input + f.table_bytes + t[9].packed_offset;
            uint8_t *at9 = memmem(file, len, c9, t[9].packed_size);
            if (at9) {
                at9[0] = 0x79; /* CM 9: not deflate */
                check_file(&r, zip, "chunk 9's zlib header changed", file, len, "chunk 9 (scanlines 144-159)");
            }
            tap_ok(at && at9, "the damaged chunks were found in the file");
        } else {
            tap_ok(false, "the ZIP frame for damage: %s", e.message);
        }
        free(input);
        free(file);
    }
    /* Frames the GPU does not take: refused with the reason, nothing written. */
    {
        static const struct { const char *what; int compression, tile, type; const char *why; } refused[] = {
            {"PIZ is", EXR_COMPRESSION_PIZ, 0, EXR_PIXEL_HALF, "piz"},
            {"tiled ZIP is", EXR_COMPRESSION_ZIP, 64, EXR_PIXEL_HALF, "tiled"},
            {"a colour of unsigned integers is", EXR_COMPRESSION_ZIP, 0, EXR_PIXEL_UINT, "unsigned integers"}};
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
            hp_exr_channel ch[1];
            float *plane = calloc((size_t)w * h, sizeof(float)); /* zeros, as halves or as floats */
            ch[0] = (hp_exr_channel){.name = "Y", .type = refused[i].type, .data = plane};
            hp_exr_spec spec = {.width = w, .height = h, .display_w = w, .display_h = h,
                                .compression = refused[i].compression, .tile = refused[i].tile, .channels = ch,
                                .channel_count = 1};
            uint8_t *file = NULL;
            size_t len = 0;
            hp_exr_zip_frame f;
            hp_err e = {0};
            int wrote = hp_exr_write_core(&spec, 1, &file, &len);
            hp_code code = wrote ? hp_image_zip_gather(file, len, &opt, &info, NULL, 0, &f, &e) : HP_ERR_INTERNAL;
            tap_ok(code == HP_ERR_UNUSABLE && strstr(e.message, refused[i].why), "%s left to the CPU: %s",
                   refused[i].what, e.message);
            free(file);
            free(plane);
        }
    }
    /* (e) hp_exr_zip_gpu_run, the daemon's call: the chunks read from host memory where they lie, the image
     * left in device memory; a damaged chunk's verdict. */
    {
        size_t len;
        uint8_t *file = write_exr(rgba, w, h, rgba_names, 4, EXR_COMPRESSION_ZIP, 0, &len);
        check_run(&r, zip, "street RGBA ZIP through hp_exr_zip_gpu_run", file, len, RUN_GPU);
        check_run(&r, zip, "street RGBA ZIP through the split", file, len, RUN_SPLIT);
        check_run(&r, zip, "street RGBA ZIP through the split, chunk 3's Adler-32 changed in the table", file, len,
                  RUN_SPLIT_BAD_ADLER);
        if (file) {
            file[len - 1] ^= 0x5a; /* the last chunk's Adler-32 */
            check_run(&r, zip, "the last chunk damaged, through hp_exr_zip_gpu_run", file, len, RUN_GPU);
            check_run(&r, zip, "the last chunk damaged, through the split", file, len, RUN_SPLIT);
        }
        free(file);
        /* the data window from row 37: the damaged chunk's scanlines are the file's (37 + its rows) */
        file = write_exr(rgba, w, h, rgba_names, 4, EXR_COMPRESSION_ZIP, 37, &len);
        if (file) {
            file[len - 1] ^= 0x5a;
            check_run(&r, zip, "the last chunk damaged, the data window from row 37, through hp_exr_zip_gpu_run", file,
                      len, RUN_GPU);
            check_run(&r, zip, "the last chunk damaged, the data window from row 37, through the split", file, len,
                      RUN_SPLIT);
        }
        free(file);
        hp_exr_channel ch[1];
        uint16_t *plane = malloc(97 * 31 * 2);
        for (int i = 0; i < 97 * 31; i++)
            plane[i] = hp_float_to_half((float)i * 0.01f);
        ch[0] = (hp_exr_channel){.name = "Y", .type = EXR_PIXEL_HALF, .data = plane};
        hp_exr_spec spec = {.width = 97, .height = 31, .display_w = 97, .display_h = 31,
                            .compression = EXR_COMPRESSION_ZIPS, .channels = ch, .channel_count = 1};
        uint8_t *small = NULL;
        if (hp_exr_write_core(&spec, 1, &small, &len))
            check_run(&r, whole, "a small grey ZIPS frame through hp_exr_zip_gpu_run, no slices", small, len, RUN_GPU);
        if (small)
            check_run(&r, zip, "a small grey ZIPS frame through the split", small, len, RUN_SPLIT);
        free(small);
        free(plane);
    }
    /* (f): in slices (each frame several dispatches and barriers in the batch's command buffer) on every
     * device, and without */
    hp_exr_zip_gpu *sliced = NULL;
    if (hp_exr_zip_gpu_create(gpu, 10000, &sliced, &err) != HP_OK)
        return tap_bail("create the sliced EXR ZIP pipelines: %s", err.message);
    check_together(&r, sliced, false, "the serial loop in slices");
    unsigned long batches = 0, batched = 0;
    hp_exr_zip_gpu_batch_counts(sliced, &batches, &batched);
    tap_ok(batched == 2 * BATCH_FRAMES && batches >= 2 && batches <= 1 + BATCH_FRAMES,
           "the batches' counts: %lu frames in %lu batches (the frames of one batch, then those of the threads)",
           batched, batches);
    hp_exr_zip_gpu_destroy(&sliced);
    hp_exr_zip_gpu_batch_tune(whole, 0);
    check_together(&r, whole, true, "the serial loop without slices");
    check_two_at_once(&r, whole, true, "the serial loop without slices");
    check_wide(&r, gpu, rgba, w, h);
    free(rgba);
    free(src);

    hp_exr_zip_gpu_destroy(&whole);
    gpu_test_cmd_destroy(&r);
    hp_exr_zip_gpu_destroy(&zip);
    hp_gpu_destroy(&gpu);
    gpu_test_validation_clean();
    return tap_done();
}

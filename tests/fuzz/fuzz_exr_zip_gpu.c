/* Fuzz target: EXR's ZIP chunks inflated on the GPU (pipeline/exr_zip_gpu.h, issue 20), the daemon's parser
 * of untrusted zlib streams on the GPU, against zlib. One chunk an input:
 *   byte 0  width 1..64
 *   byte 1  planes 1..4 (bits 0-1), one line or up to 16 (bit 2), the stream as given or made (bit 3), the
 *           serial inflate's pipeline: in slices (lavapipe's) or without (bit 4); every input then goes through
 *           the wide inflate too (hp_exr_zip_gpu_set_wide), held to the same rules; the image's memory
 *           before each run holds words with bit 31 set (bit 5), as a frame before with negative halves
 *           leaves it, which the wide inflate's pointers kept there read as marked final; the planes' types
 *           from byte 2's bits, float where set, else half (bit 6: then the image is RGBA32F where one of
 *           its slots is float); a uint channel before them, which no slot reads (bit 7: an ID AOV)
 *   byte 2  lines (up to 16), or with a made stream zlib's level and strategy; with bit 6 the planes' types
 *   as given: the rest of the input is the chunk's packed bytes;
 *   made:     the rest are the pixels (repeated), deflated by zlib, then the stream changed at the place and
 *             by the value its last three bytes say (or not at all, when they are zero).
 * zlib's uncompress is the oracle: the chunk must be good on the GPU exactly when zlib inflates it whole to
 * the chunk's size (or stop unfinished: past the work a run may take, which the daemon leaves to the CPU), and
 * then the GPU's image must be what zlib's bytes give (EXR's predictor and byte split undone, the planes
 * gathered and converted as tests/exr_zip_run.h's zip_reference_pixel says); packed bytes as many as the chunk's are a stored chunk. A difference,
 * a crash, a sanitizer report or a validation-layer message is a finding. The device and the pipelines are
 * made once (HDRPOST_TEST_DEVICE, the validation layer on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/log.h"
#include "pipeline/exr_zip_gpu.h"
#include "tests/exr_zip_run.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_W 64u
#define MAX_LINES 16u
#define MAX_PLANES 4u
#define MAX_CHUNK (MAX_W * MAX_LINES * (MAX_PLANES + 1u) * 4u)

static struct {
    hp_gpu *gpu;
    hp_exr_zip_gpu *sliced, *whole, *wide;
    gpu_test_cmd cmd;
} fz;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_exr_zip_gpu: %s: %s\n", what, detail);
    abort();
}

static void teardown(void)
{
    vkDeviceWaitIdle(hp_gpu_device(fz.gpu));
    gpu_test_cmd_destroy(&fz.cmd);
    hp_exr_zip_gpu_destroy(&fz.sliced);
    hp_exr_zip_gpu_destroy(&fz.whole);
    hp_exr_zip_gpu_destroy(&fz.wide);
    hp_gpu_destroy(&fz.gpu);
}

static void init(void)
{
    if (fz.gpu)
        return;
    hp_err err = {0};
    if (gpu_test_device(&fz.gpu, &err) != HP_OK)
        fail("device", err.message);
    /* slices of the least work allowed, so that even these small chunks are resumed across dispatches */
    if (hp_exr_zip_gpu_create(fz.gpu, 10000, &fz.sliced, &err) != HP_OK ||
        hp_exr_zip_gpu_create(fz.gpu, HP_EXR_ZIP_NO_SLICE, &fz.whole, &err) != HP_OK ||
        hp_exr_zip_gpu_create(fz.gpu, 0, &fz.wide, &err) != HP_OK)
        fail("pipelines", err.message);
    if (!hp_exr_zip_gpu_set_wide(fz.wide, true))
        fail("pipelines", "the wide inflate: storageBuffer8BitAccess and shaderInt8 are missing");
    if (!gpu_test_cmd_init(&fz.cmd, fz.gpu))
        fail("command buffer", "vkCreateCommandPool, vkCreateFence or vkAllocateCommandBuffers");
    atexit(teardown);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    init(); /* before the first input: lavapipe compiles the pipelines, longer than an input's timeout */
    return 0;
}

/* EXR's ZIP transform forward (OpenEXR's ImfZip.cpp): the byte split, then the predictor. */
static void zip_forward(const uint8_t *in, uint8_t *out, size_t n)
{
    size_t half = (n + 1) / 2;
    for (size_t k = 0; k < n; k++)
        out[k % 2 ? half + k / 2 : k / 2] = in[k];
    for (size_t i = n - 1; i > 0; i--)
        out[i] = (uint8_t)(out[i] - out[i - 1] + 128);
}

/* The made stream: pixels from the input, deflated, then one byte changed (or none). */
static size_t made_stream(const uint8_t *data, size_t size, uint8_t level_byte, size_t n, uint8_t *out, size_t cap)
{
    static const int strategies[] = {Z_DEFAULT_STRATEGY, Z_FIXED, Z_HUFFMAN_ONLY, Z_RLE};
    uint8_t px[MAX_CHUNK], t[MAX_CHUNK];
    size_t body = size > 6 ? size - 6 : 0; /* the last three bytes say the change */
    for (size_t i = 0; i < n; i++)
        px[i] = body ? data[3 + i % body] : 0;
    zip_forward(px, t, n);
    z_stream zs = {0};
    if (deflateInit2(&zs, level_byte % 10, Z_DEFLATED, 15, 8, strategies[(level_byte / 10) % 4]) != Z_OK)
        fail("deflateInit2", "zlib");
    zs.next_in = t, zs.avail_in = (uInt)n, zs.next_out = out, zs.avail_out = (uInt)cap;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        fail("deflate", "zlib");
    size_t len = zs.total_out;
    deflateEnd(&zs);
    if (size >= 6) {
        const uint8_t *c = data + size - 3;
        size_t at = ((size_t)c[0] << 8 | c[1]) % len;
        out[at] ^= c[2];
    }
    return len;
}

/* zlib's bytes of a good chunk, the transform undone and gathered: what the GPU's image must be. */
static void expected_image(const hp_exr_zip_frame *f, const uint8_t *raw, size_t n, bool stored, uint8_t *out)
{
    uint8_t t[MAX_CHUNK], plain[MAX_CHUNK];
    if (stored) {
        memcpy(plain, raw, n);
    } else {
        memcpy(t, raw, n);
        for (size_t i = 1; i < n; i++)
            t[i] = (uint8_t)(t[i - 1] + t[i] - 128);
        for (size_t k = 0; k < n; k++)
            plain[k] = t[k % 2 ? (n + 1) / 2 + k / 2 : k / 2];
    }
    size_t px = f->float_image ? 16 : 8;
    for (uint32_t y = 0; y < f->height; y++)
        for (uint32_t x = 0; x < f->width; x++)
            zip_reference_pixel(f, plain, y, x, out + ((size_t)y * f->width + x) * px);
}

/* The chunk's channels: `planes` of half or float (typed: float where types has the plane's bit) and, with an
 * ID, a uint channel before them; R, G and B from the first three planes (grey with fewer), A the fourth. */
static void fuzz_layout(hp_exr_zip_frame *f, uint32_t planes, bool typed, uint8_t types, bool id)
{
    uint32_t offset[MAX_PLANES], at = id ? 4 : 0;
    bool is_float[MAX_PLANES];
    for (uint32_t p = 0; p < planes; p++) {
        is_float[p] = typed && (types >> p) & 1;
        offset[p] = at;
        at += is_float[p] ? 4 : 2;
    }
    f->planes = planes + id;
    f->pixel_bytes = at;
    f->float_image = false;
    for (int s = 0; s < 4; s++) {
        uint32_t p = s < 3 ? (planes >= 3 ? (uint32_t)s : 0) : 3;
        bool absent = s == 3 && planes < 4;
        f->slot_offset[s] = absent ? 0 : (uint16_t)offset[p];
        f->slot_type[s] = absent ? HP_EXR_ZIP_ABSENT : is_float[p] ? HP_EXR_ZIP_FLOAT : HP_EXR_ZIP_HALF;
        f->float_image |= !absent && is_float[p];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    init();
    uint32_t w = 1 + data[0] % MAX_W, planes = 1 + (data[1] & 3);
    bool multi = data[1] & 4, made = data[1] & 8, whole = data[1] & 16;
    uint32_t lines = multi ? 1 + (made ? data[0] / MAX_W : data[2]) % MAX_LINES : 1;
    hp_exr_zip_frame f = {.width = w, .height = lines, .lines_per_chunk = multi ? 16 : 1, .chunk_count = 1,
                          .table_bytes = sizeof(hp_exr_zip_chunk)};
    fuzz_layout(&f, planes, data[1] & 64, data[2], data[1] & 128);
    size_t n = (size_t)lines * f.pixel_bytes * w, image_bytes = (size_t)hp_exr_zip_image_bytes(&f);
    f.max_chunk_bytes = (uint32_t)n;
    f.unpacked_bytes = (n + 3) & ~(size_t)3;

    static uint8_t stream[MAX_CHUNK * 2 + 1024];
    size_t len = made ? made_stream(data, size, data[2], n, stream, sizeof(stream))
                      : (size - 3 < sizeof(stream) ? size - 3 : sizeof(stream));
    if (!made)
        memcpy(stream, data + 3, len);
    if (len == 0)
        return 0;
    uint8_t *input = calloc(1, f.table_bytes + len + HP_EXR_ZIP_PACKED_PAD);
    uint8_t *gpu = malloc(image_bytes), *want = malloc(image_bytes);
    hp_exr_zip_chunk table;
    if (!input || !gpu || !want)
        fail("memory", "malloc");
    f.packed_bytes = len;
    *(hp_exr_zip_chunk *)input = (hp_exr_zip_chunk){.packed_size = (uint32_t)len, .unpacked_size = (uint32_t)n,
                                                    .lines = lines};
    memcpy(input + f.table_bytes, stream, len);
    bool stored = len == n;
    static uint8_t raw[MAX_CHUNK + 1];
    uLongf got = (uLongf)n + 1;
    bool zlib_good = stored || (uncompress(raw, &got, stream, (uLong)len) == Z_OK && got == n);
    if (stored)
        memcpy(raw, stream, n);
    if (zlib_good)
        expected_image(&f, raw, n, stored, want);
    zip_run_image_fill = data[1] & 32 ? 0xfe00fe00u : 0x7e007e00u;
    for (int pass = 0; pass < 2; pass++) { /* the serial inflate, then the wide one */
        hp_exr_zip_gpu *zip = pass == 1 ? fz.wide : whole ? fz.whole : fz.sliced;
        if (!zip_run(&fz.cmd, zip, &f, input, gpu, &table))
            fail("submit", "the command buffer failed");
        char detail[160];
        snprintf(detail, sizeof(detail), "%ux%u, %u planes of %u bytes a pixel, %s image, %zu packed bytes for %zu, "
                 "%s stream, %s, GPU status %u", w, lines, f.planes, f.pixel_bytes, f.float_image ? "RGBA32F" : "RGBA16F",
                 len, n, made ? "made" : "given", pass ? "wide" : whole ? "no slices" : "sliced", table.status);
        /* UNFINISHED: more work than a run may take (the shaders' MAX_WORK, or the slices recorded): the
         * daemon decodes such a frame on the CPU, so it is no verdict; anything else must be zlib's. */
        if (table.status != HP_EXR_ZIP_UNFINISHED && zlib_good != (table.status == HP_EXR_ZIP_OK))
            fail(zlib_good ? "zlib inflates the chunk, the GPU refuses it" : "the GPU takes a chunk zlib refuses",
                 detail);
        if (zlib_good && table.status == HP_EXR_ZIP_OK && memcmp(gpu, want, image_bytes) != 0)
            fail("the GPU's image differs from zlib's bytes", detail);
        if (hp_gpu_validation_messages() != 0)
            fail("the validation layer reported", detail);
    }
    free(input), free(gpu), free(want);
    return 0;
}

/* Fuzz target: PNG's filter and deflate passes on the GPU (pipeline/png_gpu.h, issue 20) as a round trip.
 * The input chooses a size, 8 or 16 bits, RGB or RGBA, output.alpha auto's word (none, opaque,
 * translucent) and the pipeline (the default; without the hash probe; with the reprice; a 64 x 16 launch
 * shape, whose 1 KiB segments make many of them); its bytes, repeated, are the tone pass's pixels. The
 * filtered scanlines must be the CPU reference's (hp_png_cpu_filter) and the joined stream must inflate
 * with zlib to exactly them, with the right Adler-32; a difference, a crash, a sanitizer report or a
 * validation-layer message is a finding. The device is made once (HDRPOST_TEST_DEVICE, the validation
 * layer on), the buffers once for the largest shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/log.h"
#include "pipeline/png_gpu.h"
#include "tests/gpu_test.h"
#include "tests/png_gpu_run.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_W 256u
#define MAX_H 32u
#define PIPELINES 4

static struct {
    hp_gpu *gpu;
    hp_png_gpu *png[PIPELINES];
    hp_buffer b[PNG_RUN_BUFFERS];
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
} fz;

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_png_gpu: %s: %s\n", what, detail);
    abort();
}

/* The largest of every buffer over the pipelines' layouts of the largest shape (RGBA, 16 bits). */
static void make_buffers(void)
{
    VkDeviceSize size[PNG_RUN_BUFFERS] = {0};
    hp_mem_kind kind[PNG_RUN_BUFFERS];
    for (int p = 0; p < PIPELINES; p++) {
        hp_png_gpu_layout l;
        hp_err err = {0};
        if (hp_png_gpu_layout_for(fz.png[p], MAX_W, MAX_H, 4, 16, &l, &err) != HP_OK)
            fail("layout", err.message);
        VkDeviceSize s[PNG_RUN_BUFFERS];
        png_run_sizes(&l, s, kind);
        for (int i = 0; i < PNG_RUN_BUFFERS; i++)
            size[i] = s[i] > size[i] ? s[i] : size[i];
    }
    for (int i = 0; i < PNG_RUN_BUFFERS; i++) {
        hp_err err = {0};
        if (hp_buffer_create(fz.gpu, size[i], kind[i], "fuzz_png_gpu", &fz.b[i], &err) != HP_OK)
            fail("buffer", err.message);
    }
}

/* Everything destroyed at exit, before the leak check (registered earlier, so run later): a device left
 * standing leaves the driver's allocations for LeakSanitizer to report. */
static void teardown(void)
{
    VkDevice dev = hp_gpu_device(fz.gpu);
    vkDeviceWaitIdle(dev);
    vkDestroyFence(dev, fz.fence, NULL);
    vkDestroyCommandPool(dev, fz.pool, NULL);
    for (int i = 0; i < PNG_RUN_BUFFERS; i++)
        hp_buffer_destroy(fz.gpu, &fz.b[i]);
    for (int p = 0; p < PIPELINES; p++)
        hp_png_gpu_destroy(&fz.png[p]);
    hp_gpu_destroy(&fz.gpu);
}

static void init(void)
{
    if (fz.gpu)
        return;
    hp_err err = {0};
    if (gpu_test_device(&fz.gpu, &err) != HP_OK)
        fail("device", err.message);
    hp_png_gpu_config c[PIPELINES] = {{0}, {0}, {0}, {.workgroup_size = 64, .chunk_bytes = 16}};
    for (int p = 0; p < 3; p++) /* the daemon's shape on this device */
        hp_png_gpu_fitted_config(hp_gpu_get_info(fz.gpu), &c[p]);
    c[1].no_hash_probe = true;
    c[2].reprice = true;
    for (int p = 0; p < PIPELINES; p++)
        if (hp_png_gpu_create(fz.gpu, &c[p], &fz.png[p], &err) != HP_OK)
            fail("pipelines", err.message);
    make_buffers();
    VkDevice dev = hp_gpu_device(fz.gpu);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .queueFamilyIndex = hp_gpu_compute_family(fz.gpu)};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    if (vkCreateCommandPool(dev, &pi, NULL, &fz.pool) != VK_SUCCESS || vkCreateFence(dev, &fi, NULL, &fz.fence) != VK_SUCCESS)
        fail("command pool", "vkCreateCommandPool or vkCreateFence");
    ai.commandPool = fz.pool;
    if (vkAllocateCommandBuffers(dev, &ai, &fz.cmd) != VK_SUCCESS)
        fail("command buffer", "vkAllocateCommandBuffers");
    atexit(teardown);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    init(); /* before the first input: lavapipe compiles the pipelines, longer than an input's timeout */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    init();
    /* The shape: width 1..256, height 1..32, 8 or 16 bits, RGB or RGBA, output.alpha auto's word (none, 0, 1:
     * only with RGBA, as the daemon asks), the pipeline. At most 64 KiB of pixels, as fuzz_png. */
    uint32_t w = 1 + data[0], h = 1 + data[1] % MAX_H, depth = data[2] & 1 ? 16 : 8;
    uint32_t channels = data[2] & 2 ? 4 : 3, pipeline = (data[2] >> 2) & 3;
    int translucent = channels == 4 ? (int)((data[2] >> 4) % 3) - 1 : -1;
    hp_png_gpu *png = fz.png[pipeline];
    hp_png_gpu_layout run_l, l;
    hp_err err = {0};
    if (hp_png_gpu_layout_for(png, w, h, channels, depth, &run_l, &err) != HP_OK ||
        hp_png_gpu_layout_for(png, w, h, translucent == 0 ? 3 : channels, depth, &l, &err) != HP_OK)
        fail("layout", err.message);
    /* The pixels: the input's bytes after the shape, repeated (runs and repeats are what the coder meets). */
    uint8_t *px = fz.b[PNG_RUN_STAGING].mapped;
    for (size_t i = 0; i < run_l.image_size; i++)
        px[i] = size > 3 ? data[3 + i % (size - 3)] : 0;
    hp_buffer_flush(fz.gpu, &fz.b[PNG_RUN_STAGING]);
    if (!png_run(fz.gpu, fz.pool, fz.cmd, fz.fence, fz.b, png, &run_l, translucent))
        fail("submit", "the command buffer failed");

    uint8_t *want = malloc(l.filtered_size), *zlib = malloc(hp_png_gpu_zlib_bound(&l)),
            *back = malloc(l.filtered_bytes + 1);
    if (!want || !zlib || !back)
        fail("memory", "malloc");
    hp_png_cpu_filter(&l, px, want);
    char detail[160];
    snprintf(detail, sizeof(detail), "%ux%u, %u channels of %u bits, alpha word %d, pipeline %u", w, h, channels, depth,
             translucent, pipeline);
    if (memcmp(fz.b[PNG_RUN_RB_FILTERED].mapped, want, l.filtered_bytes) != 0)
        fail("the filtered scanlines differ from the CPU reference's", detail);
    size_t zlen = 0;
    if (hp_png_gpu_join(&l, fz.b[PNG_RUN_RB_JOINED].mapped, fz.b[PNG_RUN_RB_TABLE].mapped, zlib,
                        hp_png_gpu_zlib_bound(&l), &zlen,
                        &err) != HP_OK)
        fail(err.message, detail);
    uLongf out_len = (uLongf)l.filtered_bytes + 1;
    if (uncompress(back, &out_len, zlib, (uLong)zlen) != Z_OK || out_len != l.filtered_bytes ||
        memcmp(back, want, l.filtered_bytes) != 0)
        fail("the stream does not inflate to the filtered scanlines", detail);
    if (hp_gpu_validation_messages() != 0)
        fail("the validation layer reported", detail);
    free(want), free(zlib), free(back);
    return 0;
}

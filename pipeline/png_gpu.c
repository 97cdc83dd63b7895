/* PNG filtering and deflate on the GPU (png_gpu.h): pipelines, buffer sizes, recording, the host's join. */
#include "pipeline/png_gpu.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const uint32_t spv_choose[] =
#include "png_filter_choose.spv.inc"
    ;
static const uint32_t spv_apply[] =
#include "png_filter_apply.spv.inc"
    ;
static const uint32_t spv_deflate[] =
#include "png_deflate.spv.inc"
    ;
static const uint32_t spv_offsets[] =
#include "png_offsets.spv.inc"
    ;
static const uint32_t spv_compact[] =
#include "png_compact.spv.inc"
    ;

/* Push constants; layout tables in shaders/png_filter.comp and shaders/png_deflate.comp. */
struct png_filter_push {
    VkDeviceAddress image, filtered, types;
    uint32_t width, height, channels, depth;
    VkDeviceAddress tone_state;
};
_Static_assert(sizeof(struct png_filter_push) == 48 && offsetof(struct png_filter_push, width) == 24 &&
                   offsetof(struct png_filter_push, tone_state) == 40,
               "push constant layout drifted from png_filter.comp");

struct png_deflate_push {
    VkDeviceAddress filtered, slots, table, tokens, joined, tone_state;
    uint32_t width, height, channels, depth, slot_words;
};
_Static_assert(offsetof(struct png_deflate_push, width) == 48 && offsetof(struct png_deflate_push, slot_words) == 64,
               "push constant layout drifted from png_deflate.comp");

/* Shared memory of the deflate pass (png_deflate.comp): the hash table (2^12 words), one scan slot per
 * invocation, two words of totals. */
#define DEFLATE_HASH_WORDS 4096u
#define STORED_MAX 65535u /* one stored block's LEN (RFC 1951 3.2.4) */
#define MAX_DISPATCH 65535u /* maxComputeWorkGroupCount[0] every device gives */

/* Every index the shaders form is 32-bit: filtered bytes of a 16384^2 RGBA16 frame are 2^31 + 2^14, and the
 * token scratch's word index stays below segments x segment_bytes <= that plus one segment. */
_Static_assert(16384ull * (1 + 16384ull * 8) + 65536 < (1ull << 32), "32-bit byte offsets would overflow");

/* png_deflate.comp's shared arrays, word for word: the hash (after the parse, the tree's nodes and parents, its
 * leaves and the code lengths as sent in the same words), one scan slot per invocation, frequencies, lengths and
 * codes of the 335 symbols, and 7 scalars. */
static uint32_t deflate_shared_bytes(uint32_t workgroup_size)
{
    return (DEFLATE_HASH_WORDS + workgroup_size + 3 * 335 + 7) * 4;
}

/* Whether the device runs a workgroup of the passes at this size: the one test both the fitting and the create
 * ask. */
static bool shape_fits(const hp_gpu_info *gi, uint32_t workgroup_size)
{
    return workgroup_size <= gi->max_workgroup_invocations && workgroup_size <= gi->max_workgroup_size_x &&
           deflate_shared_bytes(workgroup_size) <= gi->max_shared_memory;
}

void hp_png_gpu_fitted_config(const hp_gpu_info *gi, hp_png_gpu_config *out)
{
    *out = (hp_png_gpu_config)HP_PNG_GPU_CONFIG_DEFAULTS;
    while (out->workgroup_size > 32 && !shape_fits(gi, out->workgroup_size))
        out->workgroup_size /= 2, out->chunk_bytes *= 2;
}

struct hp_png_gpu {
    hp_gpu *gpu;
    hp_png_gpu_config config;
    hp_compute choose, apply, deflate, offsets, compact;
};

hp_code hp_png_gpu_create(hp_gpu *gpu, const hp_png_gpu_config *config, hp_png_gpu **out, hp_err *err)
{
    *out = NULL;
    hp_png_gpu_config cfg;
    const hp_gpu_info *gi = hp_gpu_get_info(gpu);
    if (config)
        cfg = *config;
    else
        hp_png_gpu_fitted_config(gi, &cfg);
    uint32_t wg = cfg.workgroup_size;
    if (wg < 32 || wg > 1024 || (wg & (wg - 1)))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "png_gpu workgroup_size %u is not a power of two in [32, 1024]", wg);
    /* Chunks past about 2040 bytes (some 4096 barriers an invocation) gave wrong streams on lavapipe; 1024 is
     * far from it, and what a device of 32 invocations at most gets (hp_png_gpu_fitted_config). */
    if (cfg.chunk_bytes < 16 || cfg.chunk_bytes > 1024)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "png_gpu chunk_bytes %u is outside [16, 1024]", cfg.chunk_bytes);
    if ((uint64_t)wg * cfg.chunk_bytes > STORED_MAX)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "png_gpu segment of %u x %u bytes is over one stored block's %u",
                       wg, cfg.chunk_bytes, STORED_MAX);
    if (!shape_fits(gi, wg))
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "png_gpu workgroup of %u invocations and %u bytes of shared "
                       "memory does not fit this device (at most %u invocations, %u in x, %u bytes)", wg,
                       deflate_shared_bytes(wg),
                       gi->max_workgroup_invocations, gi->max_workgroup_size_x, gi->max_shared_memory);
    hp_png_gpu *p = calloc(1, sizeof(*p));
    if (!p)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    p->gpu = gpu;
    p->config = cfg;
    const uint32_t spec[4] = {wg, cfg.chunk_bytes, !cfg.no_hash_probe, cfg.reprice};
    hp_compute_desc choose = {.name = "png_filter_choose", .spirv = spv_choose, .spirv_size = sizeof(spv_choose),
                              .push_constant_size = sizeof(struct png_filter_push), .spec_values = spec, .spec_count = 1};
    hp_compute_desc apply = {.name = "png_filter_apply", .spirv = spv_apply, .spirv_size = sizeof(spv_apply),
                             .push_constant_size = sizeof(struct png_filter_push), .spec_values = spec, .spec_count = 1};
    hp_compute_desc deflate = {.name = "png_deflate", .spirv = spv_deflate, .spirv_size = sizeof(spv_deflate),
                               .push_constant_size = sizeof(struct png_deflate_push), .spec_values = spec,
                               .spec_count = 4};
    hp_compute_desc offsets = deflate, compact = deflate;
    offsets.name = "png_offsets", offsets.spirv = spv_offsets, offsets.spirv_size = sizeof(spv_offsets);
    compact.name = "png_compact", compact.spirv = spv_compact, compact.spirv_size = sizeof(spv_compact);
    hp_code rc = hp_compute_create(gpu, &choose, &p->choose, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &apply, &p->apply, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &deflate, &p->deflate, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &offsets, &p->offsets, err);
    if (rc == HP_OK)
        rc = hp_compute_create(gpu, &compact, &p->compact, err);
    if (rc != HP_OK) {
        hp_png_gpu_destroy(&p);
        return rc;
    }
    *out = p;
    return HP_OK;
}

void hp_png_gpu_destroy(hp_png_gpu **pp)
{
    hp_png_gpu *p = *pp;
    if (!p)
        return;
    hp_compute_destroy(p->gpu, &p->choose);
    hp_compute_destroy(p->gpu, &p->apply);
    hp_compute_destroy(p->gpu, &p->deflate);
    hp_compute_destroy(p->gpu, &p->offsets);
    hp_compute_destroy(p->gpu, &p->compact);
    free(p);
    *pp = NULL;
}

const hp_png_gpu_config *hp_png_gpu_get_config(const hp_png_gpu *png) { return &png->config; }

void hp_png_gpu_deflate_statistics(const hp_png_gpu *png, char *buf, size_t len)
{
    hp_compute_statistics(png->gpu, &png->deflate, buf, len);
}

static VkDeviceSize round4(uint64_t n) { return (n + 3) & ~(uint64_t)3; }

hp_code hp_png_gpu_layout_for(const hp_png_gpu *png, uint32_t width, uint32_t height, uint32_t channels,
                              uint32_t depth, hp_png_gpu_layout *out, hp_err *err)
{
    memset(out, 0, sizeof(*out));
    if (width < 1 || width > 16384 || height < 1 || height > 16384)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "png_gpu: a %ux%u image is outside 1..16384 a side", width, height);
    if ((channels != 3 && channels != 4) || (depth != 8 && depth != 16))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "png_gpu: %u channels of %u bits (3 or 4, 8 or 16)", channels,
                       depth);
    out->width = width, out->height = height, out->channels = channels, out->depth = depth;
    out->bpp = channels * depth / 8;
    out->row_bytes = width * out->bpp;
    out->stride = 1 + out->row_bytes;
    out->filtered_bytes = (uint64_t)height * out->stride;
    out->segment_bytes = png->config.workgroup_size * png->config.chunk_bytes;
    uint64_t segments = (out->filtered_bytes + out->segment_bytes - 1) / out->segment_bytes;
    if (segments > MAX_DISPATCH)
        return hp_fail(err, HP_ERR_TOO_LARGE, "png_gpu: %llu segments of %u bytes are over %u workgroups",
                       (unsigned long long)segments, out->segment_bytes, MAX_DISPATCH);
    out->segments = (uint32_t)segments;
    out->slot_bytes = (uint32_t)round4(out->segment_bytes + 5);
    out->image_size = (VkDeviceSize)width * height * (depth == 8 ? 4 : 8);
    out->filtered_size = round4(out->filtered_bytes) + 4; /* a word of padding: png_deflate.comp's fword */
    out->types_size = (VkDeviceSize)height * 4;
    out->slots_size = (VkDeviceSize)out->segments * out->slot_bytes;
    out->table_size = (VkDeviceSize)out->segments * sizeof(hp_png_gpu_segment);
    out->tokens_size = (VkDeviceSize)out->segments * out->segment_bytes * 4;
    out->joined_size = out->slots_size;
    return HP_OK;
}

static void compute_barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
}

static void stamp(VkCommandBuffer cmd, const hp_png_gpu_io *io, uint32_t i)
{
    if (io->timestamps != VK_NULL_HANDLE)
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, io->timestamps, io->first_query + i);
}

static void dispatch(VkCommandBuffer cmd, const hp_compute *c, const void *push, uint32_t size, uint32_t groups)
{
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
    vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, size, push);
    vkCmdDispatch(cmd, groups, 1, 1);
}

void hp_png_gpu_record(hp_png_gpu *p, VkCommandBuffer cmd, const hp_png_gpu_layout *l, const hp_png_gpu_io *io)
{
    struct png_filter_push fp = {.image = io->image, .filtered = io->filtered->address, .types = io->types->address,
                                 .width = l->width, .height = l->height, .channels = l->channels, .depth = l->depth,
                                 .tone_state = io->alpha_auto};
    struct png_deflate_push dp = {.filtered = io->filtered->address, .slots = io->slots->address,
                                  .table = io->table->address, .tokens = io->tokens->address,
                                  .joined = io->joined->address, .tone_state = io->alpha_auto, .width = l->width,
                                  .height = l->height, .channels = l->channels, .depth = l->depth,
                                  .slot_words = l->slot_bytes / 4};
    stamp(cmd, io, 0);
    dispatch(cmd, &p->choose, &fp, sizeof(fp), l->height);
    stamp(cmd, io, 1);
    compute_barrier(cmd);
    dispatch(cmd, &p->apply, &fp, sizeof(fp), l->height);
    stamp(cmd, io, 2);
    compute_barrier(cmd);
    dispatch(cmd, &p->deflate, &dp, sizeof(dp), l->segments);
    stamp(cmd, io, 3);
    compute_barrier(cmd);
    dispatch(cmd, &p->offsets, &dp, sizeof(dp), 1);
    stamp(cmd, io, 4);
    compute_barrier(cmd);
    dispatch(cmd, &p->compact, &dp, sizeof(dp), l->segments);
    stamp(cmd, io, 5);
}

uint64_t hp_png_gpu_joined_bytes(const hp_png_gpu_layout *l, const void *table)
{
    hp_png_gpu_segment last;
    memcpy(&last, (const uint8_t *)table + (size_t)(l->segments - 1) * sizeof(last), sizeof(last));
    return (uint64_t)last.offset + last.bytes;
}

size_t hp_png_gpu_zlib_bound(const hp_png_gpu_layout *l)
{
    return 2 + (size_t)l->segments * (l->segment_bytes + 5) + 4;
}

hp_png_gpu_host_layout hp_png_gpu_host_layout_for(const hp_png_gpu_layout *l)
{
    VkDeviceSize joined = ((l->table_size + 255) & ~(VkDeviceSize)255) + HP_PNG_GPU_HEAD_ROOM;
    return (hp_png_gpu_host_layout){.joined_offset = joined, .host_bytes = joined + l->joined_size + HP_PNG_GPU_TAIL_ROOM};
}

/* The table checked against the layout (a table the GPU wrote wrong must not send the host past a
 * buffer): the deflate bytes in all, and the Adler-32 of all filtered bytes, combined from the segments'
 * with zlib's adler32_combine (RFC 1950 8.2's sums, taken modulo 65521 over the lengths between). */
static hp_code stream_check(const hp_png_gpu_layout *l, const void *table, uint64_t *body_out, uint32_t *adler_out,
                            hp_err *err)
{
    uint64_t body = 0;
    uLong adler = adler32(0L, Z_NULL, 0);
    for (uint32_t s = 0; s < l->segments; s++) {
        hp_png_gpu_segment seg;
        memcpy(&seg, (const uint8_t *)table + (size_t)s * sizeof(seg), sizeof(seg));
        uint64_t in = s + 1 < l->segments ? l->segment_bytes : l->filtered_bytes - (uint64_t)s * l->segment_bytes;
        if (seg.bytes < 1 || seg.bytes > l->slot_bytes || seg.offset != body || seg.btype > 2)
            return hp_fail(err, HP_ERR_INTERNAL, "png_gpu: segment %u says %u bytes at %u (BTYPE %u); its slot holds "
                           "%u, the segments before end at %llu", s, seg.bytes, seg.offset, seg.btype, l->slot_bytes,
                           (unsigned long long)body);
        body += seg.bytes;
        adler = s == 0 ? seg.adler : adler32_combine(adler, seg.adler, (z_off_t)in);
    }
    *body_out = body;
    *adler_out = (uint32_t)adler;
    return HP_OK;
}

/* RFC 1950: CM 8 (deflate), CINFO 7 (32 KiB window), FLEVEL 0 (fastest), FCHECK making it a multiple of 31. */
static void zlib_header(uint8_t *p) { p[0] = 0x78, p[1] = 0x01; }

static void be32_store(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

hp_code hp_png_gpu_join(const hp_png_gpu_layout *l, const void *joined, const void *table, uint8_t *dst,
                        size_t capacity, size_t *out_len, hp_err *err)
{
    *out_len = 0;
    uint64_t body;
    uint32_t adler;
    hp_code rc = stream_check(l, table, &body, &adler, err);
    if (rc != HP_OK)
        return rc;
    if (capacity < 2 + body + 4)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "png_gpu: %zu bytes of room for a stream of %llu", capacity,
                       (unsigned long long)(2 + body + 4));
    zlib_header(dst);
    memcpy(dst + 2, joined, body);
    be32_store(dst + 2 + body, adler);
    *out_len = (size_t)(2 + body + 4);
    return HP_OK;
}

hp_code hp_png_gpu_seal(const hp_png_gpu_layout *l, const void *table, uint8_t *joined, size_t *zlib_len, hp_err *err)
{
    *zlib_len = 0;
    uint64_t body;
    uint32_t adler;
    hp_code rc = stream_check(l, table, &body, &adler, err);
    if (rc != HP_OK)
        return rc;
    if (body > l->joined_size) /* the room after joined is joined_size + the tail room */
        return hp_fail(err, HP_ERR_INTERNAL, "png_gpu: the table says %llu joined bytes, over the %llu the stream "
                       "has room for", (unsigned long long)body, (unsigned long long)l->joined_size);
    zlib_header(joined - 2);
    be32_store(joined + body, adler);
    *zlib_len = (size_t)(2 + body + 4);
    return HP_OK;
}

/* --- CPU reference of the filter passes ------------------------------------------------------------- */

static uint8_t ref_row_byte(const hp_png_gpu_layout *l, const uint8_t *image, uint32_t y, uint32_t i)
{
    if (l->depth == 8) {
        uint32_t px = i / l->channels, c = i % l->channels;
        return image[((size_t)y * l->width + px) * 4 + c];
    }
    uint32_t s = i / 2, px = s / l->channels, c = s % l->channels;
    uint16_t v;
    memcpy(&v, image + ((size_t)y * l->width + px) * 8 + 2 * c, 2);
    return (uint8_t)(i % 2 == 0 ? v >> 8 : v & 0xff);
}

static uint8_t ref_paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

static uint8_t ref_filter(int type, int x, int a, int b, int c)
{
    int pred = type == 0 ? 0 : type == 1 ? a : type == 2 ? b : type == 3 ? (a + b) >> 1 : ref_paeth(a, b, c);
    return (uint8_t)(x - pred);
}

void hp_png_cpu_filter(const hp_png_gpu_layout *l, const void *image, uint8_t *filtered)
{
    const uint8_t *img = image;
    uint8_t *cur = malloc(l->row_bytes), *prev = calloc(1, l->row_bytes);
    for (uint32_t y = 0; cur && prev && y < l->height; y++) {
        for (uint32_t i = 0; i < l->row_bytes; i++)
            cur[i] = ref_row_byte(l, img, y, i);
        uint32_t sums[5] = {0};
        for (uint32_t i = 0; i < l->row_bytes; i++) {
            int a = i >= l->bpp ? cur[i - l->bpp] : 0, c = i >= l->bpp ? prev[i - l->bpp] : 0;
            for (int t = 0; t < 5; t++)
                sums[t] += (uint32_t)abs((int8_t)ref_filter(t, cur[i], a, prev[i], c));
        }
        int type = 0; /* the smallest sum; the first type of equal sums (api/codecs/encode.c, png_filter_choose) */
        for (int t = 1; t < 5; t++)
            if (sums[t] < sums[type])
                type = t;
        uint8_t *o = filtered + (size_t)y * l->stride;
        o[0] = (uint8_t)type;
        for (uint32_t i = 0; i < l->row_bytes; i++)
            o[1 + i] = ref_filter(type, cur[i], i >= l->bpp ? cur[i - l->bpp] : 0, prev[i],
                                  i >= l->bpp ? prev[i - l->bpp] : 0);
        uint8_t *t = prev;
        prev = cur;
        cur = t;
    }
    free(cur);
    free(prev);
}

/* The frame graph: per-size resources, recording with timestamps, submission, read-back. */
#include "pipeline/frame_graph.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "hp_shared.h"
#include "pipeline/gpu_internal.h"

/* Frame sizes whose buffers are kept. A render farm sends one or two sizes per shot; a few more cover a
 * preview size and a mixed queue without thrashing. */
#define SIZE_CACHE_SLOTS 4

/* Timestamps: one before the first stage and one after each (names: DECISIONS.md 10; "tonemap" covers
 * exposure, the optional adaptation blur and the tone pass; "png_gpu" PNG's filter and deflate passes,
 * written right after the tone pass's when they do not run). */
enum { TS_START, TS_UPLOAD, TS_REDUCE, TS_EXPOSURE, TS_DOF, TS_TONEMAP, TS_PNG, TS_DOWNLOAD, TS_COUNT };

/* The readback buffer: lum_stats, then tone_state, then the bokeh control words. */
#define READBACK_STATE_OFFSET HP_STATS_SIZE
#define READBACK_SPRITES_OFFSET (HP_STATS_SIZE + HP_TONE_STATE_WORDS * 4)
#define READBACK_SIZE (READBACK_SPRITES_OFFSET + HP_BOKEH_CTL_WORDS * 4)

/* The GPU must finish a frame within this; past it the device is treated as hung. */
#define FENCE_TIMEOUT_NS (60ull * 1000 * 1000 * 1000)

/* The host side of a frame size, one per frame in flight: while the GPU runs one frame, the caller fills
 * the other's staging and reads the one before's image. Made on the first frame that uses them: a caller
 * that brings its own host memory (hp_frame_graph_begin_with) never needs them. */
typedef struct host_side {
    hp_buffer staging;       /* host-visible: the caller decodes into it */
    hp_buffer output_host;   /* the image copied back */
    hp_buffer depth_staging; /* host-visible depth, made on the first frame of this size with one */
    hp_buffer dof_host;      /* output_dof's read-back */
    /* PNG on the GPU: the segment table (copied) then the joined deflate stream, written there by the
     * compaction pass itself: its size is known only on the GPU, so it is sized for the worst case and
     * only the bytes written cross the bus (hp_png_gpu_host_layout). Made on the first such frame of this
     * size whose caller's image memory cannot take them, grown as needed. */
    hp_buffer png_host;
} host_side;

/* Device buffers are shared by the frames in flight: each frame's command buffer begins with a barrier
 * on everything submitted before it, so the GPU runs frames one after the other (the overlap is of the
 * host's copies with the GPU's work). */
typedef struct size_slot {
    hp_frame_desc desc;      /* width 0: empty */
    hp_buffer input;         /* device-local copy the stages read */
    hp_buffer output;        /* device-local image, sized for the widest output (RGBA16) */
    hp_buffer lan_a, lan_b;  /* local adaptation luminance, made on the first request with gamma.radius > 0 */
    hp_dof_frame dof;        /* depth of field's buffers, made on the first DOF frame of this size */
    /* PNG on the GPU's device buffers (pipeline/png_gpu.h), made on the first such frame of this size and
     * grown when a later one needs more (RGBA after RGB, 16 bits after 8). */
    hp_buffer png_filtered, png_types, png_slots, png_table, png_tokens;
    host_side host[HP_FRAMES_IN_FLIGHT];
    uint64_t last_used;
} size_slot;

/* One frame in flight: its command buffer, fence, timestamps, statistics read-back, and what was asked. */
typedef struct frame_ctx {
    VkCommandPool pool;
    VkCommandBuffer cmd;
    /* Parts of the upload submitted before the frame (hp_frame_graph_upload_part), from a pool of their
     * own: the frame's pool is reset at submit, while parts may still be running. */
    VkCommandPool part_pool;
    VkCommandBuffer part_cmd[HP_FRAME_UPLOAD_PARTS];
    uint32_t parts;        /* submitted for the frame being prepared */
    VkDeviceSize uploaded; /* bytes of the frame they copy, from its start */
    bool parts_unfenced;   /* parts were submitted and no frame after them: nothing waits for them */
    VkFence fence;
    VkQueryPool queries;
    hp_buffer readback; /* stats, tone state, bokeh control words */
    size_slot *slot;    /* from begin to wait */
    /* Where this frame's upload copies from and its image goes: the slot's host side, or the caller's
     * (hp_frame_graph_begin_with). */
    const hp_buffer *src_pixels, *src_depth, *dst_image;
    const hp_buffer *dst_png; /* PNG on the GPU: the caller's image memory where it has room, else png_host */
    bool depth_staged;  /* the frame has a depth: hp_frame_graph_depth, or the caller's */
    bool in_flight;     /* submitted, not yet waited for */
    /* What the submitted frame does, for reading its results back. */
    bool tone, dof, detail, output_dof, bokeh, png;
    hp_png_gpu_layout png_layout;
    bool png_alpha_auto;          /* png_layout is 4 channels; png_rgb_layout the frame's if its alpha is opaque */
    hp_png_gpu_layout png_rgb_layout;
    hp_dof_method method;
    size_t out_pixel;
    size_t out_bytes;
    hp_tone_output out_kind;
} frame_ctx;

struct hp_frame_graph {
    hp_gpu *gpu;
    hp_reduce *reduce;
    hp_tone *tone;
    hp_dof *dof;
    hp_png_gpu *png;       /* NULL where the device cannot run its passes (output.png_encoder auto: the CPU) */
    hp_buffer tone_params; /* tone_params words, written per frame with vkCmdUpdateBuffer */
    hp_buffer tone_state;  /* written by the exposure stage */

    /* Size-independent device resources (shared by the frames in flight, which the GPU runs in turn). */
    hp_buffer stats;    /* lum_stats, device-local */
    hp_buffer scratch;  /* reduction scratch, device-local */
    bool scratch_ready; /* hp_reduce_init_scratch has run */

    frame_ctx ctx[HP_FRAMES_IN_FLIGHT];
    int preparing;      /* the context begin chose, until submit; -1: none */
    uint32_t next_ctx;  /* round robin */
    size_slot slots[SIZE_CACHE_SLOTS];
    size_slot *last;    /* the slot of the last frame submitted */
    uint64_t clock;
};

hp_code hp_frame_desc_check(const hp_frame_desc *d, hp_err *err)
{
    if (d->width < 1 || d->width > 16384 || d->height < 1 || d->height > 16384)
        return hp_fail(err, HP_ERR_TOO_LARGE, "frame size %ux%u is outside 1x1 to 16384x16384", d->width, d->height);
    if (d->format != HP_PIXEL_RGBA16F && d->format != HP_PIXEL_RGBA32F)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "unknown pixel format %d", (int)d->format);
    return HP_OK;
}

static void free_slot(hp_frame_graph *g, size_slot *s)
{
    hp_buffer_destroy(g->gpu, &s->input);
    hp_buffer_destroy(g->gpu, &s->output);
    hp_buffer_destroy(g->gpu, &s->lan_a);
    hp_buffer_destroy(g->gpu, &s->lan_b);
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++) {
        hp_buffer_destroy(g->gpu, &s->host[i].staging);
        hp_buffer_destroy(g->gpu, &s->host[i].output_host);
        hp_buffer_destroy(g->gpu, &s->host[i].depth_staging);
        hp_buffer_destroy(g->gpu, &s->host[i].dof_host);
    }
    hp_dof_frame_free(g->dof, &s->dof);
    hp_buffer_destroy(g->gpu, &s->png_filtered);
    hp_buffer_destroy(g->gpu, &s->png_types);
    hp_buffer_destroy(g->gpu, &s->png_slots);
    hp_buffer_destroy(g->gpu, &s->png_table);
    hp_buffer_destroy(g->gpu, &s->png_tokens);
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++)
        hp_buffer_destroy(g->gpu, &s->host[i].png_host);
    memset(s, 0, sizeof(*s));
}

void hp_frame_params_defaults(hp_frame_params *fp)
{
    memset(fp, 0, sizeof(*fp));
    hp_params_defaults(&fp->params);
}

static hp_code ctx_create(hp_frame_graph *g, frame_ctx *c, hp_err *err)
{
    VkDevice dev = g->gpu->device;
    hp_code rc = hp_buffer_create(g->gpu, READBACK_SIZE, HP_MEM_READBACK, "stats_readback", &c->readback, err);
    if (rc != HP_OK)
        return rc;
    VkCommandPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
        .queueFamilyIndex = g->gpu->compute_family,
    };
    VkResult res = vkCreateCommandPool(dev, &pi, NULL, &c->pool);
    if (res == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            .commandPool = c->pool,
            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            .commandBufferCount = 1,
        };
        res = vkAllocateCommandBuffers(dev, &ai, &c->cmd);
    }
    if (res == VK_SUCCESS)
        res = vkCreateCommandPool(dev, &pi, NULL, &c->part_pool);
    if (res == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            .commandPool = c->part_pool,
            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            .commandBufferCount = HP_FRAME_UPLOAD_PARTS,
        };
        res = vkAllocateCommandBuffers(dev, &ai, c->part_cmd);
    }
    if (res == VK_SUCCESS) {
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        res = vkCreateFence(dev, &fi, NULL, &c->fence);
    }
    if (res == VK_SUCCESS) {
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = TS_COUNT + HP_DOF_DETAIL_COUNT,
        };
        res = vkCreateQueryPool(dev, &qi, NULL, &c->queries);
    }
    return res == VK_SUCCESS ? HP_OK : hp_vk_fail(err, res, "creating a frame's command buffer, fence and queries");
}

static void ctx_destroy(hp_frame_graph *g, frame_ctx *c)
{
    VkDevice dev = g->gpu->device;
    if (c->queries)
        vkDestroyQueryPool(dev, c->queries, NULL);
    if (c->fence)
        vkDestroyFence(dev, c->fence, NULL);
    if (c->pool)
        vkDestroyCommandPool(dev, c->pool, NULL);
    if (c->part_pool)
        vkDestroyCommandPool(dev, c->part_pool, NULL);
    hp_buffer_destroy(g->gpu, &c->readback);
    memset(c, 0, sizeof(*c));
}

hp_code hp_frame_graph_create(hp_gpu *gpu, hp_frame_graph **out, hp_err *err)
{
    *out = NULL;
    hp_frame_graph *g = calloc(1, sizeof(*g));
    if (!g)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    g->gpu = gpu;

    hp_code rc = hp_reduce_create(gpu, NULL, &g->reduce, err);
    if (rc == HP_OK)
        rc = hp_tone_create(gpu, &g->tone, err);
    if (rc == HP_OK)
        rc = hp_dof_create(gpu, &g->dof, err);
    if (rc == HP_OK) {
        /* A device without the shared memory or workgroup size is no failure: the CPU encodes its PNGs
         * (a fallback is logged, never silent). */
        hp_err png_err = {0};
        hp_code prc = hp_png_gpu_create(gpu, NULL, &g->png, &png_err);
        if (prc == HP_ERR_MISSING_FEATURE)
            hp_warn("frame graph: PNG on the GPU is off on this device (output.png_encoder auto takes the CPU): %s",
                    png_err.message);
        else if (prc != HP_OK)
            rc = hp_fail(err, prc, "%s", png_err.message);
    }
    if (rc == HP_OK)
        rc = hp_buffer_create(gpu, HP_STATS_SIZE, HP_MEM_DEVICE, "lum_stats", &g->stats, err);
    if (rc == HP_OK)
        rc = hp_buffer_create(gpu, hp_reduce_scratch_size(0), HP_MEM_DEVICE, "reduce_scratch", &g->scratch, err);
    if (rc == HP_OK)
        rc = hp_buffer_create(gpu, HP_TONE_PARAMS_WORDS * 4, HP_MEM_DEVICE, "tone_params", &g->tone_params, err);
    if (rc == HP_OK)
        rc = hp_buffer_create(gpu, HP_TONE_STATE_WORDS * 4, HP_MEM_DEVICE, "tone_state", &g->tone_state, err);
    if (rc != HP_OK)
        goto fail;
    g->preparing = -1;
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT && rc == HP_OK; i++)
        rc = ctx_create(g, &g->ctx[i], err);
    if (rc != HP_OK)
        goto fail;

    *out = g;
    return HP_OK;

fail:
    hp_frame_graph_destroy(&g);
    return rc;
}

void hp_frame_graph_destroy(hp_frame_graph **pg)
{
    hp_frame_graph *g = *pg;
    if (!g)
        return;
    VkDevice dev = g->gpu->device;
    vkDeviceWaitIdle(dev);
    for (int i = 0; i < SIZE_CACHE_SLOTS; i++)
        free_slot(g, &g->slots[i]);
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++)
        ctx_destroy(g, &g->ctx[i]);
    hp_buffer_destroy(g->gpu, &g->stats);
    hp_buffer_destroy(g->gpu, &g->scratch);
    hp_buffer_destroy(g->gpu, &g->tone_params);
    hp_buffer_destroy(g->gpu, &g->tone_state);
    hp_reduce_destroy(&g->reduce);
    hp_tone_destroy(&g->tone);
    hp_dof_destroy(&g->dof);
    hp_png_gpu_destroy(&g->png);
    free(g);
    *pg = NULL;
}

static VkDeviceSize frame_bytes(const hp_frame_desc *d)
{
    VkDeviceSize bytes = (VkDeviceSize)d->width * d->height * hp_pixel_format_size(d->format);
    return (bytes + 15) & ~(VkDeviceSize)15; /* shaders load 16 bytes at a time */
}

static bool slot_in_flight(const hp_frame_graph *g, const size_slot *s)
{
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++)
        if (g->ctx[i].in_flight && g->ctx[i].slot == s)
            return true;
    return false;
}

hp_code hp_frame_graph_begin(hp_frame_graph *g, const hp_frame_desc *desc, void **pixels, hp_err *err)
{
    return hp_frame_graph_begin_with(g, desc, &(hp_frame_host){0}, pixels, err);
}

hp_code hp_frame_graph_begin_with(hp_frame_graph *g, const hp_frame_desc *desc, const hp_frame_host *own,
                                  void **pixels, hp_err *err)
{
    hp_code rc = hp_frame_desc_check(desc, err);
    if (rc != HP_OK)
        return rc;
    uint32_t ci = g->next_ctx;
    if (g->ctx[ci].in_flight)
        return hp_fail(err, HP_ERR_INTERNAL, "%d frames are in flight: wait for one before beginning another",
                       HP_FRAMES_IN_FLIGHT);
    g->clock++;
    size_slot *hit = NULL, *victim = NULL;
    for (int i = 0; i < SIZE_CACHE_SLOTS; i++) {
        size_slot *s = &g->slots[i];
        if (s->desc.width == desc->width && s->desc.height == desc->height && s->desc.format == desc->format)
            hit = s;
        /* Empty slots have last_used 0 and go first; a slot a frame in flight still uses cannot go. */
        if (!slot_in_flight(g, s) && (!victim || s->last_used < victim->last_used))
            victim = s;
    }
    if (!hit) {
        if (victim->desc.width)
            hp_debug("frame graph: evicting buffers for %ux%u %s", victim->desc.width, victim->desc.height,
                     hp_pixel_format_name(victim->desc.format));
        if (g->last == victim)
            g->last = NULL;
        free_slot(g, victim);
        VkDeviceSize bytes = frame_bytes(desc);
        VkDeviceSize out_bytes = hp_tone_output_max_bytes(desc->width, desc->height);
        rc = hp_buffer_create(g->gpu, bytes, HP_MEM_DEVICE, "frame_input", &victim->input, err);
        if (rc == HP_OK)
            rc = hp_buffer_create(g->gpu, out_bytes, HP_MEM_DEVICE, "frame_output", &victim->output, err);
        if (rc != HP_OK) {
            free_slot(g, victim);
            return rc;
        }
        victim->desc = *desc;
        hp_debug("frame graph: buffers for %ux%u %s (%llu bytes)", desc->width, desc->height,
                 hp_pixel_format_name(desc->format), (unsigned long long)bytes);
        hit = victim;
    }
    hit->last_used = g->clock;
    /* The host side this frame needs, for every frame in flight at once: a repeated size then never
     * allocates. */
    VkDeviceSize bytes = frame_bytes(desc), out_bytes = hp_tone_output_max_bytes(desc->width, desc->height);
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT && rc == HP_OK; i++) {
        host_side *h = &hit->host[i];
        if (!own->pixels && !h->staging.buffer)
            rc = hp_buffer_create(g->gpu, bytes, HP_MEM_UPLOAD, "frame_staging", &h->staging, err);
        if (rc == HP_OK && !own->image && !h->output_host.buffer)
            rc = hp_buffer_create(g->gpu, out_bytes, HP_MEM_READBACK, "frame_output_host", &h->output_host, err);
    }
    if (rc == HP_OK && ((own->pixels && own->pixels->size < bytes) || (own->image && own->image->size < out_bytes) ||
                        (own->depth && own->depth->size < (VkDeviceSize)desc->width * desc->height * sizeof(float))))
        rc = hp_fail(err, HP_ERR_INVALID_ARGUMENT, "host memory given for a %ux%u frame is too small", desc->width,
                     desc->height);
    if (rc != HP_OK)
        return rc;
    frame_ctx *c = &g->ctx[ci];
    if (c->parts_unfenced) /* a frame that failed after parts of its upload: let them finish (rare) */
        hp_gpu_queue_wait_idle(g->gpu);
    if (c->parts) /* its last frame, and with it these parts, is done: waited for, or idle just now */
        vkResetCommandPool(g->gpu->device, c->part_pool, 0);
    c->parts = 0;
    c->uploaded = 0;
    c->parts_unfenced = false;
    c->slot = hit;
    c->src_pixels = own->pixels ? own->pixels : &hit->host[ci].staging;
    c->src_depth = own->depth;
    c->dst_image = own->image ? own->image : &hit->host[ci].output_host;
    c->depth_staged = own->depth != NULL;
    g->preparing = (int)ci;
    if (pixels)
        *pixels = own->pixels ? NULL : hit->host[ci].staging.mapped;
    return HP_OK;
}

hp_code hp_frame_graph_depth(hp_frame_graph *g, float **depth, hp_err *err)
{
    if (g->preparing < 0)
        return hp_fail(err, HP_ERR_INTERNAL, "hp_frame_graph_depth without hp_frame_graph_begin");
    frame_ctx *c = &g->ctx[g->preparing];
    size_slot *s = c->slot;
    if (!s->host[g->preparing].depth_staging.buffer) {
        VkDeviceSize bytes = (VkDeviceSize)s->desc.width * s->desc.height * sizeof(float);
        hp_code rc = HP_OK;
        for (int i = 0; i < HP_FRAMES_IN_FLIGHT && rc == HP_OK; i++)
            if (!s->host[i].depth_staging.buffer)
                rc = hp_buffer_create(g->gpu, bytes, HP_MEM_UPLOAD, "depth_staging", &s->host[i].depth_staging, err);
        if (rc != HP_OK)
            return rc;
    }
    c->depth_staged = true;
    c->src_depth = &s->host[g->preparing].depth_staging;
    *depth = s->host[g->preparing].depth_staging.mapped;
    return HP_OK;
}

/* A buffer of at least `size` bytes: kept when it is, made again when it is not. */
static hp_code ensure_buffer(hp_frame_graph *g, hp_buffer *b, VkDeviceSize size, hp_mem_kind kind, const char *name,
                             hp_err *err)
{
    if (b->buffer && b->size >= size)
        return HP_OK;
    hp_buffer_destroy(g->gpu, b);
    return hp_buffer_create(g->gpu, size, kind, name, b, err);
}

/* PNG on the GPU's device buffers for this frame, shared by the frames in flight (the host one:
 * png_destination). */
static hp_code png_prepare(hp_frame_graph *g, size_slot *slot, const hp_png_gpu_layout *l, hp_err *err)
{
    /* The device buffers are shared by the frames in flight of this size, and their size follows the channels
     * and the depth: a frame that needs them larger (RGB8 after RGBA16 is fine, RGBA16 after RGB8 is not)
     * must not free them under the other frame's commands. Growth is rare: wait for that frame's fence (not
     * reset here, so hp_frame_graph_wait still finds it signalled and collects the frame). */
    bool grows = slot->png_filtered.size < l->filtered_size || slot->png_types.size < l->types_size ||
                 slot->png_slots.size < l->slots_size || slot->png_table.size < l->table_size ||
                 slot->png_tokens.size < l->tokens_size;
    for (int i = 0; grows && i < HP_FRAMES_IN_FLIGHT; i++) {
        if (!g->ctx[i].in_flight || g->ctx[i].slot != slot)
            continue;
        VkResult res = vkWaitForFences(g->gpu->device, 1, &g->ctx[i].fence, VK_TRUE, FENCE_TIMEOUT_NS);
        if (res == VK_TIMEOUT)
            return hp_fail(err, HP_ERR_DEVICE_LOST, "the GPU did not finish the frame before it within %llu s",
                           (unsigned long long)(FENCE_TIMEOUT_NS / 1000000000ull));
        if (res != VK_SUCCESS)
            return hp_vk_fail(err, res, "vkWaitForFences");
    }
    hp_code rc = ensure_buffer(g, &slot->png_filtered, l->filtered_size, HP_MEM_DEVICE, "png_filtered", err);
    if (rc == HP_OK)
        rc = ensure_buffer(g, &slot->png_types, l->types_size, HP_MEM_DEVICE, "png_types", err);
    if (rc == HP_OK)
        rc = ensure_buffer(g, &slot->png_slots, l->slots_size, HP_MEM_DEVICE, "png_slots", err);
    if (rc == HP_OK)
        rc = ensure_buffer(g, &slot->png_table, l->table_size, HP_MEM_DEVICE, "png_table", err);
    if (rc == HP_OK)
        rc = ensure_buffer(g, &slot->png_tokens, l->tokens_size, HP_MEM_DEVICE, "png_tokens", err);
    return rc;
}

/* Where the table and the stream go: straight into the caller's image memory when it can be written by
 * address and holds them (then nothing is copied on the host before the file is finished in place), else
 * this context's png_host. */
static hp_code png_destination(hp_frame_graph *g, frame_ctx *c, host_side *host, const hp_png_gpu_layout *l,
                               hp_err *err)
{
    VkDeviceSize bytes = hp_png_gpu_host_layout_for(l).host_bytes;
    if (c->dst_image != &host->output_host && c->dst_image->address && c->dst_image->size >= bytes) {
        c->dst_png = c->dst_image;
        return HP_OK;
    }
    c->dst_png = &host->png_host;
    return ensure_buffer(g, &host->png_host, bytes, HP_MEM_READBACK_SHADER, "png_host", err);
}

bool hp_frame_graph_has_png_gpu(const hp_frame_graph *g) { return g->png != NULL; }

size_t hp_frame_graph_image_bytes(const hp_frame_graph *g, uint32_t width, uint32_t height)
{
    size_t bytes = hp_tone_output_max_bytes(width, height);
    hp_png_gpu_layout l;
    hp_err ignored = {0}; /* a size the GPU's PNG cannot take is encoded on the CPU: the image alone then */
    if (g->png && hp_png_gpu_layout_for(g->png, width, height, 4, 16, &l, &ignored) == HP_OK) {
        VkDeviceSize png = hp_png_gpu_host_layout_for(&l).host_bytes; /* the largest: RGBA, 16 bits */
        bytes = png > bytes ? (size_t)png : bytes;
    }
    return bytes;
}

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src, .dstAccessMask = dst};
    vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

hp_code hp_frame_graph_upload_part(hp_frame_graph *g, size_t upto, hp_err *err)
{
    if (g->preparing < 0)
        return hp_fail(err, HP_ERR_INTERNAL, "hp_frame_graph_upload_part without hp_frame_graph_begin");
    frame_ctx *c = &g->ctx[g->preparing];
    VkDeviceSize total = frame_bytes(&c->slot->desc), end = upto < total ? upto : total;
    if (end <= c->uploaded || c->parts == HP_FRAME_UPLOAD_PARTS)
        return HP_OK; /* nothing new, or the rest goes with the frame */
    hp_buffer_flush(g->gpu, c->src_pixels);
    VkCommandBuffer cmd = c->part_cmd[c->parts];
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult res = vkBeginCommandBuffer(cmd, &bi);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkBeginCommandBuffer (upload part)");
    /* The frame before, if of the same size, may still read the device buffer this part writes. */
    barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT);
    VkBufferCopy part = {.srcOffset = c->uploaded, .dstOffset = c->uploaded, .size = end - c->uploaded};
    vkCmdCopyBuffer(cmd, c->src_pixels->buffer, c->slot->input.buffer, 1, &part);
    res = vkEndCommandBuffer(cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    if (res == VK_SUCCESS)
        res = hp_gpu_submit(g->gpu, &si, VK_NULL_HANDLE);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "submitting a part of the upload");
    c->parts++;
    c->uploaded = end;
    c->parts_unfenced = true;
    return HP_OK;
}

void hp_frame_graph_abandon(hp_frame_graph *g)
{
    bool unfenced = false;
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++)
        unfenced = unfenced || g->ctx[i].parts_unfenced;
    if (!unfenced)
        return;
    hp_gpu_queue_wait_idle(g->gpu); /* rare: a frame that failed after parts of its upload */
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++)
        g->ctx[i].parts_unfenced = false;
}

/* PNG on the GPU for this frame: asked for by name (gpu), or auto on a device that runs the passes at an
 * effort whose file sizes the GPU matches. Sets c->png and its layouts and makes their buffers ready.
 * can: the frame has an image a PNG can be made of (not analyze_only, not output_luminance). */
static hp_code png_plan(hp_frame_graph *g, frame_ctx *c, host_side *host, const hp_frame_params *params, bool can,
                        hp_err *err)
{
    const hp_params *p = &params->params;
    const size_slot *slot = c->slot;
    hp_png_encoder enc = p->output.png_encoder;
    c->png = can && p->output.format == HP_OUTPUT_PNG &&
             (enc == HP_PNG_ENCODER_GPU ||
              (enc == HP_PNG_ENCODER_AUTO && g->png && p->output.effort <= HP_PNG_AUTO_GPU_MAX_EFFORT));
    c->png_alpha_auto = c->png && params->png_alpha_auto && params->png_channels == 4;
    c->png_layout = c->png_rgb_layout = (hp_png_gpu_layout){0};
    if (!c->png)
        return HP_OK;
    if (!g->png)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.png_encoder",
                             "output.png_encoder gpu: this device cannot run PNG's deflate pass (see the daemon's log "
                             "at start-up); use auto or cpu");
    hp_code rc = hp_png_gpu_layout_for(g->png, slot->desc.width, slot->desc.height, params->png_channels,
                                       p->output.bit_depth, &c->png_layout, err);
    if (rc == HP_OK && c->png_alpha_auto)
        rc = hp_png_gpu_layout_for(g->png, slot->desc.width, slot->desc.height, 3, p->output.bit_depth,
                                   &c->png_rgb_layout, err);
    if (rc == HP_OK)
        rc = png_prepare(g, c->slot, &c->png_layout, err);
    if (rc == HP_OK)
        rc = png_destination(g, c, host, &c->png_layout, err);
    /* auto is a preference: a frame the GPU path cannot take (over its 65535 segments, its scratch past the
     * device's largest allocation, out of device memory) is read back and encoded on the CPU, as it would
     * have been without the GPU. gpu was asked for by name: the error says so. */
    if (rc != HP_OK && enc == HP_PNG_ENCODER_AUTO && rc != HP_ERR_DEVICE_LOST) {
        hp_warn("png_gpu: %ux%u frame encoded on the CPU instead: %s", slot->desc.width, slot->desc.height,
                err->message);
        *err = (hp_err){0};
        c->png = c->png_alpha_auto = false;
        return HP_OK;
    }
    if (rc != HP_OK && !err->field[0])
        snprintf(err->field, sizeof(err->field), "output.png_encoder");
    return rc;
}

/* What one frame runs, decided once from its parameters. */
typedef struct frame_plan {
    hp_reduce_params reduce;
    bool tone;          /* not analyze_only */
    bool dof, bokeh;    /* depth of field, and its scattered sprites (a budget of 0 is bokeh off) */
    bool fused;         /* DOF composited by the tone pass as it reads the frame (not output_dof, not OCIO) */
    bool detail;        /* the DOF passes' own timestamps */
    uint32_t radius;    /* local gamma's blur radius; 0: none */
    hp_tone_output kind;
} frame_plan;

/* The parameters a frame was queued with, checked where a caller's mistake would otherwise record a wrong
 * pass; the plan made from them. */
static hp_code submit_check(const frame_ctx *c, const hp_frame_params *params, frame_plan *plan, hp_err *err)
{
    const hp_params *p = &params->params;
    const size_slot *slot = c->slot;
    plan->reduce = (hp_reduce_params){
        .variant = (hp_reduce_variant)p->analysis.variant,
        .hist_min_log2 = p->analysis.histogram_min_log2,
        .hist_max_log2 = p->analysis.histogram_max_log2,
    };
    hp_input_color_luma(&p->color, p->output.colorspace, plan->reduce.luma);
    hp_code rc = hp_reduce_params_check(&plan->reduce, err);
    if (rc == HP_OK)
        rc = hp_params_check(p, err);
    if (rc == HP_OK && params->ocio && (params->yuv420 || params->output_luminance))
        rc = hp_fail(err, HP_ERR_INTERNAL, "the OCIO stage writes RGBA: not with yuv420 or output_luminance");
    /* The pass reads the frame, or with depth of field the RGBA32F composite: its pipeline must be the one the
     * caller acquired (a pipeline never made would be bound as VK_NULL_HANDLE). */
    if (rc == HP_OK && params->ocio &&
        !hp_ocio_stage_has(params->ocio, params->dof ? HP_PIXEL_RGBA32F : slot->desc.format,
                           p->output.bit_depth > 8 ? HP_TONE_OUT_RGBA16 : HP_TONE_OUT_RGBA8))
        rc = hp_fail(err, HP_ERR_INTERNAL, "the OCIO program was not acquired for this frame's format and depth");
    if (rc == HP_OK && p->color.output != p->output.colorspace)
        rc = hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.colorspace",
                           "the frame's colour was resolved for output.colorspace %d, not %d: resolve it again "
                           "(hp_input_color_resolve) after changing the output", (int)p->color.output,
                           (int)p->output.colorspace);
    if (rc != HP_OK)
        return rc;
    const hp_dof_settings *ds = &params->dof_settings;
    plan->tone = !params->analyze_only;
    plan->dof = plan->tone && params->dof;
    plan->bokeh = ds->bokeh && ds->max_sprites > 0;
    plan->fused = plan->dof && !params->output_dof && !params->ocio;
    plan->detail = plan->dof && params->detailed_timings;
    bool local = p->gamma.mode == HP_GAMMA_LOCAL || p->gamma.mode == HP_GAMMA_LOCAL_LUMINANCE;
    plan->radius = plan->tone && local && !params->output_luminance && !params->ocio ? p->gamma.radius : 0;
    plan->kind = params->output_luminance ? HP_TONE_OUT_LUMINANCE
                 : p->output.bit_depth > 8 ? HP_TONE_OUT_RGBA16
                 : params->yuv420          ? HP_TONE_OUT_YUV420
                                           : HP_TONE_OUT_RGBA8;
    if (plan->dof && !c->depth_staged)
        return hp_fail_field(err, HP_ERR_UNUSABLE, "depth",
                             "depth of field needs the frame's depth: a depth channel in the EXR or a depth part");
    return HP_OK;
}

/* The size slot's buffers this frame needs and may not have yet: depth of field's, local gamma's, PNG's. */
static hp_code submit_prepare(hp_frame_graph *g, frame_ctx *c, host_side *host, const hp_frame_params *params,
                              const frame_plan *plan, hp_err *err)
{
    size_slot *slot = c->slot;
    hp_code rc = HP_OK;
    if (plan->dof) {
        /* The OCIO stage reads the composite as an image, as output_dof's tone pass does. */
        rc = hp_dof_frame_prepare(g->dof, &slot->dof, slot->desc.width, slot->desc.height,
                                  params->dof_settings.method == HP_DOF_SAT, plan->bokeh,
                                  params->output_dof || params->ocio, err);
        for (int i = 0; i < HP_FRAMES_IN_FLIGHT && rc == HP_OK && params->output_dof; i++)
            if (!slot->host[i].dof_host.buffer)
                rc = hp_buffer_create(g->gpu, (VkDeviceSize)slot->desc.width * slot->desc.height * 16,
                                      HP_MEM_READBACK, "dof_output_host", &slot->host[i].dof_host, err);
        if (rc != HP_OK)
            return rc;
    }
    if (plan->radius > 0 && !slot->lan_a.buffer) {
        VkDeviceSize lan_bytes = (VkDeviceSize)slot->desc.width * slot->desc.height * sizeof(float);
        rc = hp_buffer_create(g->gpu, lan_bytes, HP_MEM_DEVICE, "adaptation_a", &slot->lan_a, err);
        if (rc == HP_OK)
            rc = hp_buffer_create(g->gpu, lan_bytes, HP_MEM_DEVICE, "adaptation_b", &slot->lan_b, err);
        if (rc != HP_OK)
            return rc;
    }
    return png_plan(g, c, host, params, plan->tone && !params->output_luminance, err);
}

/* The command buffer begun after the frames before it, the parameters written and what the parts submitted
 * before did not upload (hp_frame_graph_upload_part), then the luminance reduction. */
static void record_upload_and_reduce(hp_frame_graph *g, frame_ctx *c, const hp_frame_params *params,
                                     const frame_plan *plan)
{
    size_slot *slot = c->slot;
    VkCommandBuffer cmd = c->cmd;
    hp_buffer_flush(g->gpu, c->src_pixels);
    if (plan->dof)
        hp_buffer_flush(g->gpu, c->src_depth);
    vkResetCommandPool(g->gpu->device, c->pool, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkBeginCommandBuffer(cmd, &bi);
    /* After everything submitted before: the frame before this one may still be reading the shared
     * device buffers this one writes (the GPU runs the frames in flight in turn). */
    barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
            VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    vkCmdResetQueryPool(cmd, c->queries, 0, TS_COUNT + HP_DOF_DETAIL_COUNT);
    if (!g->scratch_ready) {
        hp_reduce_init_scratch(g->reduce, cmd, &g->scratch);
        g->scratch_ready = true;
    }
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_START);
    uint32_t words[HP_TONE_PARAMS_WORDS];
    hp_tone_pack_params(&params->params, words);
    vkCmdUpdateBuffer(cmd, g->tone_params.buffer, 0, sizeof(words), words); /* made visible with the upload */
    if (plan->dof)
        hp_dof_record_reset(g->dof, cmd); /* likewise */
    /* The barrier above orders this frame after the parts submitted before. */
    VkDeviceSize total = frame_bytes(&slot->desc);
    if (c->uploaded < total) {
        VkBufferCopy up = {.srcOffset = c->uploaded, .dstOffset = c->uploaded, .size = total - c->uploaded};
        vkCmdCopyBuffer(cmd, c->src_pixels->buffer, slot->input.buffer, 1, &up);
    }
    if (plan->dof) {
        VkBufferCopy dup = {.size = (VkDeviceSize)slot->desc.width * slot->desc.height * sizeof(float)};
        vkCmdCopyBuffer(cmd, c->src_depth->buffer, slot->dof.depth.buffer, 1, &dup);
    }
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_UPLOAD);
    hp_reduce_io io = {.pixels = slot->input.address, .pixel_count = (uint64_t)slot->desc.width * slot->desc.height,
                       .format = slot->desc.format, .stats = &g->stats, .scratch = &g->scratch};
    hp_reduce_record(g->reduce, cmd, &io, &plan->reduce);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_REDUCE);
}

/* Exposure, depth of field and the tone pass, or the OCIO stage in its place; none for analyze_only, whose
 * timestamps are written together so that each stage reads 0. */
static void record_tone(hp_frame_graph *g, frame_ctx *c, const hp_frame_params *params, const frame_plan *plan)
{
    size_slot *slot = c->slot;
    VkCommandBuffer cmd = c->cmd;
    if (!plan->tone) {
        for (uint32_t t = TS_EXPOSURE; t <= TS_TONEMAP; t++)
            vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, t);
        return;
    }
    const hp_params *p = &params->params;
    const hp_dof_settings *ds = &params->dof_settings;
    hp_dof_io dio = {.pixels = slot->input.address, .format = slot->desc.format, .stats = g->stats.address,
                     .state = g->tone_state.address, .frame = &slot->dof,
                     .detail_pool = plan->detail ? c->queries : VK_NULL_HANDLE, .detail_first = TS_COUNT};
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT);
    /* With depth of field the tone pass composites each pixel from the DOF stage's fields as it reads the frame;
     * output_dof (and the OCIO stage) instead write the composite as an image and map that. */
    bool composite = plan->dof && !plan->fused;
    hp_tone_io tio = {
        .pixels = composite ? slot->dof.output.address : slot->input.address,
        .format = composite ? HP_PIXEL_RGBA32F : slot->desc.format,
        .dof = plan->fused ? &slot->dof : NULL,
        .convert_input = p->color.convert && !composite,
        .colorspace = p->output.colorspace,
        .dof_sat = ds->method == HP_DOF_SAT,
        .dof_bokeh = plan->bokeh,
        .width = slot->desc.width,
        .height = slot->desc.height,
        .stats = g->stats.address,
        .params = g->tone_params.address,
        .state = g->tone_state.address,
        .output = slot->output.address,
        .kind = plan->kind,
        .yuv_alpha = params->yuv_alpha,
        .gamma_radius = plan->radius,
        .lan_a = slot->lan_a.address,
        .lan_b = slot->lan_b.address,
    };
    hp_tone_record_exposure(g->tone, cmd, &tio);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_EXPOSURE);
    if (plan->dof)
        hp_dof_record(g->dof, cmd, &dio, ds);
    if (composite)
        hp_dof_record_composite(g->dof, cmd, &dio, ds);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_DOF);
    if (params->ocio) {
        hp_ocio_io oio = {.pixels = tio.pixels, .format = tio.format, .width = tio.width, .height = tio.height,
                          .state = tio.state, .output = tio.output, .kind = plan->kind, .dither = p->output.dither};
        hp_ocio_stage_record(params->ocio, cmd, &oio);
    } else {
        hp_tone_record_map(g->tone, cmd, &tio);
    }
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_TONEMAP);
}

/* PNG on the GPU, on the tone pass's RGBA8 / RGBA16 image where it lies: the compaction pass writes the joined
 * stream straight into the host's memory, after the table. */
static void record_png(hp_frame_graph *g, frame_ctx *c)
{
    size_slot *slot = c->slot;
    if (c->png) {
        barrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        hp_buffer joined = *c->dst_png;
        joined.address += hp_png_gpu_host_layout_for(&c->png_layout).joined_offset;
        hp_png_gpu_io pio = {.image = slot->output.address, .filtered = &slot->png_filtered,
                             .types = &slot->png_types, .slots = &slot->png_slots, .table = &slot->png_table,
                             .tokens = &slot->png_tokens, .joined = &joined,
                             .alpha_auto = c->png_alpha_auto ? g->tone_state.address : 0};
        hp_png_gpu_record(g->png, c->cmd, &c->png_layout, &pio);
    }
    vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_PNG);
}

/* What the host reads: the statistics, the tone state, the image (or PNG's table: its stream is in host memory
 * already), the bokeh's count and output_dof's composite. */
static void record_readback(hp_frame_graph *g, frame_ctx *c, host_side *host, const hp_frame_params *params,
                            const frame_plan *plan, size_t out_bytes)
{
    size_slot *slot = c->slot;
    VkCommandBuffer cmd = c->cmd;
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy down = {.size = HP_STATS_SIZE};
    vkCmdCopyBuffer(cmd, g->stats.buffer, c->readback.buffer, 1, &down);
    if (plan->tone) {
        VkBufferCopy state = {.dstOffset = READBACK_STATE_OFFSET, .size = HP_TONE_STATE_WORDS * 4};
        vkCmdCopyBuffer(cmd, g->tone_state.buffer, c->readback.buffer, 1, &state);
        if (c->png) {
            VkBufferCopy table = {.size = c->png_layout.table_size};
            vkCmdCopyBuffer(cmd, slot->png_table.buffer, c->dst_png->buffer, 1, &table);
        } else {
            VkBufferCopy image = {.size = out_bytes};
            vkCmdCopyBuffer(cmd, slot->output.buffer, c->dst_image->buffer, 1, &image);
        }
    }
    if (plan->dof) {
        VkBufferCopy ctl = {.dstOffset = READBACK_SPRITES_OFFSET, .size = HP_BOKEH_CTL_WORDS * 4};
        vkCmdCopyBuffer(cmd, hp_dof_sprites(g->dof)->buffer, c->readback.buffer, 1, &ctl);
        if (params->output_dof) {
            VkBufferCopy image = {.size = (VkDeviceSize)slot->desc.width * slot->desc.height * 16};
            vkCmdCopyBuffer(cmd, slot->dof.output.buffer, host->dof_host.buffer, 1, &image);
        }
    }
    barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, TS_DOWNLOAD);
}

hp_code hp_frame_graph_submit(hp_frame_graph *g, const hp_frame_params *params, uint32_t *ticket, hp_err *err)
{
    if (g->preparing < 0)
        return hp_fail(err, HP_ERR_INTERNAL, "hp_frame_graph_submit without hp_frame_graph_begin");
    uint32_t ci = (uint32_t)g->preparing;
    frame_ctx *c = &g->ctx[ci];
    host_side *host = &c->slot->host[ci];
    /* Whatever happens below, this context is no longer being prepared: a failed frame is begun again. */
    g->preparing = -1;
    frame_plan plan;
    hp_code rc = submit_check(c, params, &plan, err);
    if (rc == HP_OK)
        rc = submit_prepare(g, c, host, params, &plan, err);
    if (rc != HP_OK)
        return rc;
    g->last = c->slot;
    size_t out_bytes = hp_tone_output_bytes(plan.kind, c->slot->desc.width, c->slot->desc.height, params->yuv_alpha);
    record_upload_and_reduce(g, c, params, &plan);
    record_tone(g, c, params, &plan);
    record_png(g, c);
    record_readback(g, c, host, params, &plan, out_bytes);
    VkResult res = vkEndCommandBuffer(c->cmd);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkEndCommandBuffer");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cmd};
    res = hp_gpu_submit(g->gpu, &si, c->fence);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkQueueSubmit");
    c->parts_unfenced = false; /* this frame's fence now stands for them */
    c->in_flight = true;
    c->tone = plan.tone;
    c->dof = plan.dof;
    c->detail = plan.detail;
    c->output_dof = plan.dof && params->output_dof;
    c->bokeh = plan.dof && plan.bokeh;
    c->method = params->dof_settings.method;
    c->out_pixel = plan.kind == HP_TONE_OUT_YUV420 ? 0 : hp_tone_output_pixel_size(plan.kind);
    c->out_bytes = out_bytes;
    c->out_kind = plan.kind;
    g->next_ctx = (ci + 1) % HP_FRAMES_IN_FLIGHT;
    *ticket = ci;
    return HP_OK;
}

/* What the tone pass left: its state, and the image or, with the GPU's PNG, the stream and its table. */
static hp_code read_tone_output(hp_frame_graph *g, frame_ctx *c, host_side *host, hp_frame_result *out, hp_err *err)
{
    hp_tone_decode_state((const uint8_t *)c->readback.mapped + READBACK_STATE_OFFSET, &out->tone);
    if (!c->png) {
        hp_buffer_invalidate(g->gpu, c->dst_image);
        out->pixels = c->dst_image->mapped;
        out->pixel_size = c->out_pixel;
        out->image_bytes = c->out_bytes;
        out->yuv420 = c->out_kind == HP_TONE_OUT_YUV420;
        return HP_OK;
    }
    const hp_buffer *ph = c->dst_png;
    hp_buffer_invalidate(g->gpu, ph);
    out->png_gpu = true;
    /* The passes kept 3 channels where the tone pass found the alpha opaque (png_alpha_auto); the stream lies
     * where the 4-channel layout put it either way. */
    out->png_layout = c->png_alpha_auto && !out->tone.translucent ? c->png_rgb_layout : c->png_layout;
    out->png_in_caller_memory = ph != &host->png_host;
    out->png_table = ph->mapped;
    out->png_joined = (uint8_t *)ph->mapped + hp_png_gpu_host_layout_for(&c->png_layout).joined_offset;
    uint64_t joined = hp_png_gpu_joined_bytes(&out->png_layout, ph->mapped);
    if (joined > out->png_layout.joined_size)
        return hp_fail(err, HP_ERR_INTERNAL, "png_gpu: the table says %llu joined bytes, over the %llu the stream has "
                       "room for", (unsigned long long)joined, (unsigned long long)out->png_layout.joined_size);
    out->png_joined_bytes = (size_t)joined;
    return HP_OK;
}

/* What depth of field left: the bokeh sprites wanted and drawn, and its image when the request asked for it. */
static void read_dof_output(hp_frame_graph *g, frame_ctx *c, host_side *host, hp_frame_result *out)
{
    uint32_t ctl[HP_BOKEH_CTL_WORDS];
    memcpy(ctl, (const uint8_t *)c->readback.mapped + READBACK_SPRITES_OFFSET, sizeof(ctl));
    out->dof_ran = true;
    out->bokeh_wanted = c->bokeh ? ctl[HP_BOKEH_CTL_WANTED] : 0;
    out->bokeh_drawn = c->bokeh ? ctl[HP_BOKEH_CTL_DISPATCH] : 0;
    if (c->output_dof) {
        hp_buffer_invalidate(g->gpu, &host->dof_host);
        out->dof_pixels = host->dof_host.mapped;
    }
}

/* Stage times (DECISIONS.md 10) from the frame's timestamps. "tonemap" is the exposure stage and the tone pass
 * (which composites depth of field as it reads each pixel); "dof" the depth of field's passes, bokeh included:
 * the splat runs beside the gather, so its time is not apart. With detailed_timings each pass is timed on its
 * own ("dof.gather", "bokeh.splat", ...). */
static void stage_timings(const hp_frame_graph *g, const frame_ctx *c, const uint64_t *ts, uint32_t ts_count,
                          hp_frame_result *out)
{
    double period_ms = g->gpu->info.timestamp_period_ns * 1e-6;
#define SPAN(a, b) ((double)(ts[b] - ts[a]) * period_ms)
    const hp_stage_timing timings[] = {
        {"upload", SPAN(TS_START, TS_UPLOAD)},
        {"reduce", SPAN(TS_UPLOAD, TS_REDUCE)},
        {"dof", SPAN(TS_EXPOSURE, TS_DOF)},
        {"tonemap", SPAN(TS_REDUCE, TS_EXPOSURE) + SPAN(TS_DOF, TS_TONEMAP)},
        {"png_gpu", SPAN(TS_TONEMAP, TS_PNG)},
        {"download", SPAN(TS_PNG, TS_DOWNLOAD)},
    };
#undef SPAN
    for (size_t i = 0; i < sizeof(timings) / sizeof(timings[0]); i++)
        if ((c->dof || strcmp(timings[i].name, "dof") != 0) && (c->png || strcmp(timings[i].name, "png_gpu") != 0))
            out->timings[out->timing_count++] = timings[i];
    if (c->detail) {
        uint64_t prev = ts[TS_EXPOSURE];
        for (uint32_t i = 0; i < ts_count - TS_COUNT && out->timing_count < HP_MAX_STAGE_TIMINGS; i++) {
            uint64_t t = ts[TS_COUNT + i];
            const char *name = hp_dof_detail_name(i, c->method);
            if (name)
                out->timings[out->timing_count++] = (hp_stage_timing){name, (double)(t - prev) * period_ms};
            prev = t;
        }
    }
    out->gpu_total_ms = (double)(ts[TS_COUNT - 1] - ts[TS_START]) * period_ms;
}

hp_code hp_frame_graph_wait(hp_frame_graph *g, uint32_t ticket, hp_frame_result *out, hp_err *err)
{
    if (ticket >= HP_FRAMES_IN_FLIGHT || !g->ctx[ticket].in_flight)
        return hp_fail(err, HP_ERR_INTERNAL, "hp_frame_graph_wait for a frame that is not in flight");
    frame_ctx *c = &g->ctx[ticket];
    size_slot *slot = c->slot;
    host_side *host = &slot->host[ticket];
    VkDevice dev = g->gpu->device;
    VkResult res = vkWaitForFences(dev, 1, &c->fence, VK_TRUE, FENCE_TIMEOUT_NS);
    if (res == VK_TIMEOUT)
        return hp_fail(err, HP_ERR_DEVICE_LOST, "the GPU did not finish the frame within %llu s",
                       (unsigned long long)(FENCE_TIMEOUT_NS / 1000000000ull));
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkWaitForFences");
    vkResetFences(dev, 1, &c->fence);
    c->in_flight = false;

    uint64_t ts[TS_COUNT + HP_DOF_DETAIL_COUNT];
    uint32_t ts_count = TS_COUNT + (c->detail ? (c->bokeh ? HP_DOF_DETAIL_COUNT : HP_DOF_DETAIL_SPLAT) : 0);
    res = vkGetQueryPoolResults(dev, c->queries, 0, ts_count, sizeof(ts), ts, sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkGetQueryPoolResults");

    hp_buffer_invalidate(g->gpu, &c->readback);
    memset(out, 0, sizeof(*out));
    hp_reduce_decode_stats(c->readback.mapped, (uint64_t)slot->desc.width * slot->desc.height, &out->stats);
    out->width = slot->desc.width;
    out->height = slot->desc.height;
    hp_code code;
    if (c->tone && (code = read_tone_output(g, c, host, out, err)) != HP_OK)
        return code;
    if (c->dof)
        read_dof_output(g, c, host, out);
    stage_timings(g, c, ts, ts_count, out);
    return HP_OK;
}

hp_code hp_frame_graph_run(hp_frame_graph *g, const hp_frame_params *params, hp_frame_result *out, hp_err *err)
{
    uint32_t ticket;
    hp_code rc = hp_frame_graph_submit(g, params, &ticket, err);
    return rc == HP_OK ? hp_frame_graph_wait(g, ticket, out, err) : rc;
}

uint32_t hp_frame_graph_cached_sizes(const hp_frame_graph *g)
{
    uint32_t n = 0;
    for (int i = 0; i < SIZE_CACHE_SLOTS; i++)
        n += g->slots[i].desc.width != 0;
    return n;
}

uint64_t hp_frame_graph_device_bytes(const hp_frame_graph *g)
{
    uint64_t bytes = g->stats.size + g->scratch.size + g->tone_params.size + g->tone_state.size;
    for (int i = 0; i < SIZE_CACHE_SLOTS; i++)
        bytes += g->slots[i].input.size + g->slots[i].output.size + g->slots[i].lan_a.size + g->slots[i].lan_b.size +
                 hp_dof_frame_bytes(&g->slots[i].dof) + g->slots[i].png_filtered.size + g->slots[i].png_types.size +
                 g->slots[i].png_slots.size + g->slots[i].png_table.size + g->slots[i].png_tokens.size;
    return bytes;
}

const hp_dof_frame *hp_frame_graph_last_dof(const hp_frame_graph *g)
{
    return g->last && g->last->dof.coc.buffer ? &g->last->dof : NULL;
}

hp_code hp_frame_graph_read_buffer(hp_frame_graph *g, const hp_buffer *src, void *dst, size_t size, hp_err *err)
{
    /* Its own command buffer and fence, after every frame in flight (tests and diagnostics only). */
    frame_ctx tmp = {0};
    hp_buffer host;
    hp_code rc = ctx_create(g, &tmp, err);
    if (rc == HP_OK)
        rc = hp_buffer_create(g->gpu, size, HP_MEM_READBACK, "debug_readback", &host, err);
    if (rc != HP_OK) {
        ctx_destroy(g, &tmp);
        return rc;
    }
    VkDevice dev = g->gpu->device;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkBeginCommandBuffer(tmp.cmd, &bi);
    barrier(tmp.cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy region = {.size = size};
    vkCmdCopyBuffer(tmp.cmd, src->buffer, host.buffer, 1, &region);
    barrier(tmp.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
    VkResult res = vkEndCommandBuffer(tmp.cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &tmp.cmd};
    if (res == VK_SUCCESS)
        res = hp_gpu_submit(g->gpu, &si, tmp.fence);
    if (res == VK_SUCCESS)
        res = vkWaitForFences(dev, 1, &tmp.fence, VK_TRUE, FENCE_TIMEOUT_NS);
    if (res == VK_SUCCESS) {
        hp_buffer_invalidate(g->gpu, &host);
        memcpy(dst, host.mapped, size);
    } else {
        rc = hp_vk_fail(err, res, "reading a buffer back");
    }
    hp_buffer_destroy(g->gpu, &host);
    ctx_destroy(g, &tmp);
    return rc;
}

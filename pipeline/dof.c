/* Depth of field and bokeh: pipelines, per-size buffers and recording (pipeline/dof.h). */
#include "pipeline/dof.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hp_dof_taps.h"
#include "pipeline/gpu_internal.h"

static const uint32_t spv_setup[] =
#include "dof_setup.spv.inc"
    ;
static const uint32_t spv_tiles[] =
#include "dof_tiles.spv.inc"
    ;
static const uint32_t spv_gather[] =
#include "dof_gather.spv.inc"
    ;
static const uint32_t spv_composite[] =
#include "dof_composite.spv.inc"
    ;
static const uint32_t spv_sat_rows[] =
#include "dof_sat_rows.spv.inc"
    ;
static const uint32_t spv_sat_cols[] =
#include "dof_sat_cols.spv.inc"
    ;
static const uint32_t spv_sat_query[] =
#include "dof_sat_query.spv.inc"
    ;
static const uint32_t spv_bokeh_splat[] =
#include "bokeh_splat.spv.inc"
    ;

/* Push constant layouts: the tables in the shaders. */
struct setup_push {
    VkDeviceAddress pixels, depth, coc, half_, mask, tiles, sprites, state;
    uint32_t width, height, half_w, half_h;
    float coc_k, focus_m, depth_scale, max_coc, bokeh_threshold, bokeh_min_coc;
    uint32_t max_sprites, pad;
    VkDeviceAddress accum, quarter;
};
_Static_assert(sizeof(struct setup_push) == 128, "push constant layout drifted from dof_setup.comp");

struct tiles_push {
    VkDeviceAddress tiles, dilated;
    uint32_t tiles_w, tiles_h, radius, max_sprites;
    VkDeviceAddress sprites;
};
_Static_assert(offsetof(struct tiles_push, sprites) == 32, "push constant layout drifted from dof_tiles.comp");

struct gather_push {
    VkDeviceAddress half_, dilated, near, far, quarter;
    uint32_t half_w, half_h;
    VkDeviceAddress state, aperture;
    float coverage;
};
_Static_assert(offsetof(struct gather_push, coverage) == 64, "push constant layout drifted from dof_gather.comp");

struct composite_push {
    VkDeviceAddress pixels, coc, mask, near, far, accum, out;
    uint32_t width, height, half_w, half_h, sat, pad;
    VkDeviceAddress dilated, state;
};
_Static_assert(offsetof(struct composite_push, dilated) == 80, "push constant layout drifted from dof_composite.comp");

struct sat_push {
    VkDeviceAddress half_, table, stats, far;
    uint32_t half_w, half_h;
    float max_coc;
    uint32_t max_sprites;
    VkDeviceAddress sprites, state;
};
_Static_assert(offsetof(struct sat_push, state) == 56, "push constant layout drifted from dof_sat.comp");

struct splat_push {
    VkDeviceAddress sprites, accum, depth, half_;
    uint32_t half_w, half_h, blades;
    float rotation, squeeze, depth_scale;
    uint32_t frame_w;
};
_Static_assert(offsetof(struct splat_push, frame_w) == 56, "push constant layout drifted from bokeh_splat.comp");

struct hp_dof {
    hp_gpu *gpu;
    hp_compute setup[2];          /* [hp_pixel_format] */
    hp_compute composite[2];      /* [format]: output_dof only; the daemon's tone pass composites itself */
    hp_compute tiles, gather, sat_rows, sat_cols, sat_query, bokeh_splat;
    hp_buffer sprites; /* control words, then HP_BOKEH_MAX_SPRITES records */
    hp_buffer aperture; /* HP_DOF_TAPS floats: the gather's aperture, written per frame */
};

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

double hp_dof_auto_focus(const float *depth, uint32_t w, uint32_t h, double depth_scale)
{
    uint32_t x0 = w * 9 / 20, x1 = (w * 11 + 19) / 20, y0 = h * 9 / 20, y1 = (h * 11 + 19) / 20;
    size_t cap = (size_t)(x1 - x0) * (y1 - y0), n = 0;
    float *v = malloc((cap ? cap : 1) * sizeof(float));
    if (!v)
        return 10.0;
    for (uint32_t y = y0; y < y1; y++)
        for (uint32_t x = x0; x < x1; x++) {
            float d = depth[(size_t)y * w + x];
            if (d > 0 && d < (float)HP_DOF_DEPTH_BACKGROUND)
                v[n++] = d;
        }
    double focus = 10.0;
    if (n) {
        qsort(v, n, sizeof(float), cmp_float);
        focus = (double)v[n / 2] * depth_scale;
    }
    free(v);
    return focus;
}

void hp_dof_settings_from_params(const hp_params *p, const float *depth, uint32_t w, uint32_t h, hp_dof_settings *o)
{
    double f, N;
    hp_dof_lens_values(p->dof.lens, &f, &N);
    *o = (hp_dof_settings){
        .method = p->dof.method == HP_DOF_SAT ? HP_DOF_SAT : HP_DOF_GATHER,
        .focal_length_mm = p->dof.focal_length_auto ? f : p->dof.focal_length_mm,
        .f_stop = p->dof.f_stop_auto ? N : p->dof.f_stop,
        .focus_distance_m = p->dof.focus_distance_m,
        .sensor_width_mm = p->dof.sensor_width_mm,
        .depth_scale = p->dof.depth_scale,
        .max_coc_px = p->dof.max_coc_px,
        .bokeh = p->bokeh.enabled && p->bokeh.max_sprites > 0,
        .bokeh_threshold = p->bokeh.threshold,
        .bokeh_min_coc_px = p->bokeh.min_coc_px,
        .blades = p->bokeh.blades,
        .rotation_deg = p->bokeh.rotation_deg,
        .squeeze = p->bokeh.squeeze,
        .max_sprites = p->bokeh.max_sprites,
        .color = p->color,
        .output = p->output.colorspace,
    };
    if (p->dof.focus_auto && depth)
        o->focus_distance_m = hp_dof_auto_focus(depth, w, h, p->dof.depth_scale);
    /* A lens cannot focus inside its focal length; an automatic focus on something that near (a depth
     * channel in the wrong unit, say) focuses as near as it can instead of dividing by zero. */
    double f_m = o->focal_length_mm * 1e-3;
    if (o->focus_distance_m <= f_m * 1.001)
        o->focus_distance_m = f_m * 1.001;
}

double hp_dof_coc_k(const hp_dof_settings *s, uint32_t width)
{
    double f = s->focal_length_mm * 1e-3, N = s->f_stop, S1 = s->focus_distance_m;
    double c_inf = f * f / (N * (S1 - f)); /* diameter on the sensor, metres */
    return 0.5 * c_inf / (s->sensor_width_mm * 1e-3) * (double)width;
}

double hp_dof_coc(const hp_dof_settings *s, uint32_t width, double depth)
{
    double k = hp_dof_coc_k(s, width), c;
    if (!(depth < HP_DOF_DEPTH_BACKGROUND))
        c = k;
    else {
        double z = depth * s->depth_scale;
        c = z > 0.0 ? k * (1.0 - s->focus_distance_m / z) : 0.0;
    }
    return fmin(fmax(c, -s->max_coc_px), s->max_coc_px);
}

double hp_dof_aperture(const hp_dof_settings *s, float out[HP_DOF_TAPS])
{
    float dir[HP_DOF_TAPS][2];
    hp_dof_tap_directions(dir);
    double rot = s->rotation_deg * M_PI / 180.0, n = (double)s->blades;
    for (uint32_t i = 0; i < HP_DOF_TAPS; i++) {
        /* A tap at offset d from the pixel reaches it when -d, the pixel seen from the tap, lies inside the
         * tap's polygon: the direction is d's turned by half a turn (it matters for odd blade counts). The
         * sprites' coverage() measures the angle after rotating by -rotation: the same convention. */
        double theta = atan2(-(double)dir[i][1], -(double)dir[i][0]) - rot;
        out[i] = s->blades >= 3 ? (float)(cos(M_PI / n) / cos(theta - (2.0 * M_PI / n) * floor((n * theta + M_PI) / (2.0 * M_PI))))
                                : 1.0f;
    }
    /* A regular n-gon of circumradius 1 has area (n / 2) sin(2 pi / n). */
    return s->blades >= 3 ? M_PI / (0.5 * n * sin(2.0 * M_PI / n)) : 1.0;
}

void hp_dof_tap_directions(float out[HP_DOF_TAPS][2])
{
#define HP_DOF_TAP(x, y) {(float)(x), (float)(y)}
    static const float table[HP_DOF_TAPS][2] = {HP_DOF_TAP_TABLE};
#undef HP_DOF_TAP
    memcpy(out, table, sizeof(table));
}

static hp_code make(hp_gpu *gpu, const char *name, const uint32_t *spirv, size_t size, uint32_t push,
                    const uint32_t *spec, uint32_t spec_count, hp_compute *out, hp_err *err)
{
    hp_compute_desc d = {.name = name, .spirv = spirv, .spirv_size = size, .push_constant_size = push,
                         .spec_values = spec, .spec_count = spec_count};
    return hp_compute_create(gpu, &d, out, err);
}

hp_code hp_dof_create(hp_gpu *gpu, hp_dof **out, hp_err *err)
{
    *out = NULL;
    hp_dof *d = calloc(1, sizeof(*d));
    if (!d)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    d->gpu = gpu;
    hp_code rc = HP_OK;
    static const char *const setup_names[2] = {"dof_setup_rgba16f", "dof_setup_rgba32f"};
    for (uint32_t f = 0; f < 2 && rc == HP_OK; f++) {
        const uint32_t spec[1] = {f == HP_PIXEL_RGBA16F};
        rc = make(gpu, setup_names[f], spv_setup, sizeof(spv_setup), sizeof(struct setup_push), spec, 1, &d->setup[f],
                  err);
        static const char *const composite_names[2] = {"dof_composite_rgba16f", "dof_composite_rgba32f"};
        if (rc == HP_OK)
            rc = make(gpu, composite_names[f], spv_composite, sizeof(spv_composite), sizeof(struct composite_push),
                      spec, 1, &d->composite[f], err);
    }
    if (rc == HP_OK)
        rc = make(gpu, "dof_tiles", spv_tiles, sizeof(spv_tiles), sizeof(struct tiles_push), NULL, 0, &d->tiles, err);
    if (rc == HP_OK)
        rc = make(gpu, "dof_gather", spv_gather, sizeof(spv_gather), sizeof(struct gather_push), NULL, 0, &d->gather,
                  err);
    if (rc == HP_OK)
        rc = make(gpu, "dof_sat_rows", spv_sat_rows, sizeof(spv_sat_rows), sizeof(struct sat_push), NULL, 0,
                  &d->sat_rows, err);
    if (rc == HP_OK)
        rc = make(gpu, "dof_sat_cols", spv_sat_cols, sizeof(spv_sat_cols), sizeof(struct sat_push), NULL, 0,
                  &d->sat_cols, err);
    if (rc == HP_OK)
        rc = make(gpu, "dof_sat_query", spv_sat_query, sizeof(spv_sat_query), sizeof(struct sat_push), NULL, 0,
                  &d->sat_query, err);
    if (rc == HP_OK)
        rc = make(gpu, "bokeh_splat", spv_bokeh_splat, sizeof(spv_bokeh_splat), sizeof(struct splat_push), NULL, 0,
                  &d->bokeh_splat, err);
    if (rc == HP_OK)
        rc = hp_buffer_create(gpu, HP_DOF_TAPS * sizeof(float), HP_MEM_DEVICE, "dof_aperture", &d->aperture, err);
    if (rc == HP_OK)
        rc = hp_buffer_create(gpu, 4 * (HP_BOKEH_CTL_WORDS + (VkDeviceSize)HP_BOKEH_MAX_SPRITES * HP_BOKEH_SPRITE_WORDS),
                              HP_MEM_DEVICE, "bokeh_sprites", &d->sprites, err);
    if (rc != HP_OK) {
        hp_dof_destroy(&d);
        return rc;
    }
    *out = d;
    return HP_OK;
}

void hp_dof_destroy(hp_dof **pd)
{
    hp_dof *d = *pd;
    if (!d)
        return;
    for (int f = 0; f < 2; f++) {
        hp_compute_destroy(d->gpu, &d->setup[f]);
        hp_compute_destroy(d->gpu, &d->composite[f]);
    }
    hp_compute_destroy(d->gpu, &d->tiles);
    hp_compute_destroy(d->gpu, &d->gather);
    hp_compute_destroy(d->gpu, &d->sat_rows);
    hp_compute_destroy(d->gpu, &d->sat_cols);
    hp_compute_destroy(d->gpu, &d->sat_query);
    hp_compute_destroy(d->gpu, &d->bokeh_splat);
    hp_buffer_destroy(d->gpu, &d->sprites);
    hp_buffer_destroy(d->gpu, &d->aperture);
    free(d);
    *pd = NULL;
}

const hp_buffer *hp_dof_sprites(const hp_dof *d) { return &d->sprites; }

void hp_dof_record_reset(hp_dof *d, VkCommandBuffer cmd)
{
    vkCmdFillBuffer(cmd, d->sprites.buffer, 0, 4 * HP_BOKEH_CTL_WORDS, 0);
}

static uint32_t half_of(uint32_t n) { return (n + 1) / 2; }
static uint32_t tiles_of(uint32_t half) { return (half + HP_DOF_TILE - 1) / HP_DOF_TILE; }

void hp_dof_frame_free(hp_dof *d, hp_dof_frame *f)
{
    hp_buffer *all[] = {&f->depth, &f->coc, &f->half_, &f->mask, &f->quarter, &f->tiles, &f->dilated,
                        &f->near,  &f->far, &f->table, &f->accum, &f->output};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        hp_buffer_destroy(d->gpu, all[i]);
    memset(f, 0, sizeof(*f));
}

uint64_t hp_dof_frame_bytes(const hp_dof_frame *f)
{
    const hp_buffer *all[] = {&f->depth, &f->coc, &f->half_, &f->mask, &f->quarter, &f->tiles, &f->dilated,
                              &f->near,  &f->far, &f->table, &f->accum, &f->output};
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        n += all[i]->buffer ? all[i]->size : 0;
    return n;
}

static hp_code ensure(hp_dof *d, hp_buffer *b, VkDeviceSize size, const char *name, hp_err *err)
{
    if (b->buffer)
        return HP_OK;
    return hp_buffer_create(d->gpu, size, HP_MEM_DEVICE, name, b, err);
}

hp_code hp_dof_frame_prepare(hp_dof *d, hp_dof_frame *f, uint32_t width, uint32_t height, bool sat, bool bokeh,
                             bool output, hp_err *err)
{
    if (f->width != width || f->height != height) {
        hp_dof_frame_free(d, f);
        f->width = width;
        f->height = height;
    }
    VkDeviceSize px = (VkDeviceSize)width * height;
    VkDeviceSize half = (VkDeviceSize)half_of(width) * half_of(height);
    VkDeviceSize tiles = (VkDeviceSize)tiles_of(half_of(width)) * tiles_of(half_of(height));
    hp_code rc = ensure(d, &f->depth, px * 4, "dof_depth", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->coc, px * 4, "dof_coc", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->half_, half * 16, "dof_half", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->mask, half * 4, "dof_mask", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->quarter, (VkDeviceSize)half_of(half_of(width)) * half_of(half_of(height)) * 16,
                    "dof_quarter", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->tiles, tiles * 8, "dof_tiles", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->dilated, tiles * 8, "dof_dilated", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->near, half * 8, "dof_near", err);
    if (rc == HP_OK)
        rc = ensure(d, &f->far, half * 8, "dof_far", err);
    if (rc == HP_OK && sat)
        rc = ensure(d, &f->table, half * 24, "dof_sat_table", err);
    if (rc == HP_OK && bokeh)
        rc = ensure(d, &f->accum, half * 16, "bokeh_accum", err);
    if (rc == HP_OK && output)
        rc = ensure(d, &f->output, px * 16, "dof_output", err);
    return rc;
}

static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = dst};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0, 1,
                         &mb, 0, NULL, 0, NULL);
}

static void compute_barrier(VkCommandBuffer cmd)
{
    barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

const char *hp_dof_detail_name(uint32_t i, hp_dof_method method)
{
    static const char *const gather[] = {"dof.setup", "dof.tiles", "dof.gather", NULL, "bokeh.splat"};
    static const char *const sat[] = {"dof.setup", "dof.sat_rows", "dof.sat_cols", "dof.sat_query", "bokeh.splat"};
    return i < HP_DOF_DETAIL_COUNT ? (method == HP_DOF_SAT ? sat : gather)[i] : NULL;
}

static void detail(VkCommandBuffer cmd, const hp_dof_io *io, uint32_t i)
{
    if (io->detail_pool)
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, io->detail_pool, io->detail_first + i);
}

static void run(VkCommandBuffer cmd, const hp_compute *c, const void *push, uint32_t size, uint32_t gx, uint32_t gy)
{
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipeline);
    vkCmdPushConstants(cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, size, push);
    vkCmdDispatch(cmd, gx, gy, 1);
}

/* The splat, dispatched from the count the setup pass made (the indirect arguments were written by the
 * pass before: shaders/include/bokeh_args.glsl). */
static void record_splat(hp_dof *d, VkCommandBuffer cmd, const hp_dof_io *io, const hp_dof_settings *s)
{
    hp_dof_frame *f = io->frame;
    struct splat_push pp = {.sprites = d->sprites.address, .accum = f->accum.address, .depth = f->depth.address,
                            .half_ = f->half_.address, .half_w = half_of(f->width), .half_h = half_of(f->height),
                            .blades = s->blades, .rotation = (float)(s->rotation_deg * M_PI / 180.0),
                            .squeeze = (float)s->squeeze, .depth_scale = (float)s->depth_scale, .frame_w = f->width};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->bokeh_splat.pipeline);
    vkCmdPushConstants(cmd, d->bokeh_splat.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pp), &pp);
    vkCmdDispatchIndirect(cmd, d->sprites.buffer, 4 * HP_BOKEH_CTL_DISPATCH);
}

static void indirect_barrier(VkCommandBuffer cmd)
{
    barrier(cmd, VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_INDIRECT_COMMAND_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

void hp_dof_record(hp_dof *d, VkCommandBuffer cmd, const hp_dof_io *io, const hp_dof_settings *settings)
{
    hp_dof_frame *f = io->frame;
    /* A budget of 0 is bokeh off: nothing would clear the light or size the splat. */
    hp_dof_settings bs = *settings;
    bs.bokeh = bs.bokeh && bs.max_sprites > 0;
    const hp_dof_settings *s = &bs;
    float aperture[HP_DOF_TAPS];
    double coverage = hp_dof_aperture(s, aperture);
    if (s->method == HP_DOF_GATHER) /* read by the gather, after the setup's barrier */
        vkCmdUpdateBuffer(cmd, d->aperture.buffer, 0, sizeof(aperture), aperture);
    /* The splat needs only the setup's sprites and half resolution, and writes only the bokeh light: it
     * runs beside the gather (or the SAT's columns), with no barrier between them, so its atomics in the
     * L2 overlap the gather's arithmetic. Timed pass by pass (detail_pool), it runs on its own instead. */
    bool overlap = s->bokeh && !io->detail_pool;

    uint32_t hw = half_of(f->width), hh = half_of(f->height);
    uint32_t tw = tiles_of(hw), th = tiles_of(hh);
    struct setup_push sp = {
        .pixels = io->pixels, .depth = f->depth.address, .coc = f->coc.address, .half_ = f->half_.address,
        .mask = f->mask.address, .tiles = f->tiles.address, .sprites = d->sprites.address, .state = io->state,
        .width = f->width, .height = f->height, .half_w = hw, .half_h = hh,
        .coc_k = (float)hp_dof_coc_k(s, f->width), .focus_m = (float)s->focus_distance_m,
        .depth_scale = (float)s->depth_scale, .max_coc = (float)s->max_coc_px,
        .bokeh_threshold = (float)s->bokeh_threshold, .bokeh_min_coc = (float)s->bokeh_min_coc_px,
        .max_sprites = s->bokeh ? s->max_sprites : 0, .accum = s->bokeh ? f->accum.address : 0,
        .quarter = f->quarter.address,
    };
    run(cmd, &d->setup[io->format], &sp, sizeof(sp), tw, th);
    compute_barrier(cmd);
    detail(cmd, io, HP_DOF_DETAIL_SETUP);

    if (s->method == HP_DOF_SAT) {
        struct sat_push q = {.half_ = f->half_.address, .table = f->table.address, .stats = io->stats,
                             .far = f->far.address, .half_w = hw, .half_h = hh, .max_coc = (float)s->max_coc_px,
                             .max_sprites = s->bokeh ? s->max_sprites : 0, .sprites = d->sprites.address,
                             .state = io->state};
        run(cmd, &d->sat_rows, &q, sizeof(q), hh, 1);
        indirect_barrier(cmd);
        detail(cmd, io, HP_DOF_DETAIL_TILES_OR_ROWS);
        if (overlap)
            record_splat(d, cmd, io, s);
        run(cmd, &d->sat_cols, &q, sizeof(q), (hw + HP_SAT_COL_X - 1) / HP_SAT_COL_X, 1);
        compute_barrier(cmd);
        detail(cmd, io, HP_DOF_DETAIL_GATHER_OR_COLS);
        run(cmd, &d->sat_query, &q, sizeof(q), (hw + 7) / 8, (hh + 7) / 8);
        compute_barrier(cmd);
        detail(cmd, io, HP_DOF_DETAIL_SAT_QUERY);
    } else {
        /* Tiles are 2 * HP_DOF_TILE frame pixels wide: enough of them to cover the largest CoC. */
        uint32_t radius = (uint32_t)ceil(s->max_coc_px / (2.0 * HP_DOF_TILE));
        struct tiles_push tp = {.tiles = f->tiles.address, .dilated = f->dilated.address, .tiles_w = tw,
                                .tiles_h = th, .radius = radius, .max_sprites = s->bokeh ? s->max_sprites : 0,
                                .sprites = d->sprites.address};
        run(cmd, &d->tiles, &tp, sizeof(tp), (tw + 7) / 8, (th + 7) / 8);
        indirect_barrier(cmd);
        detail(cmd, io, HP_DOF_DETAIL_TILES_OR_ROWS);
        struct gather_push gp = {.half_ = f->half_.address, .dilated = f->dilated.address, .near = f->near.address,
                                 .far = f->far.address, .quarter = f->quarter.address, .half_w = hw, .half_h = hh,
                                 .state = io->state, .aperture = d->aperture.address, .coverage = (float)coverage};
        run(cmd, &d->gather, &gp, sizeof(gp), (hw + 7) / 8, (hh + 7) / 8);
        if (overlap)
            record_splat(d, cmd, io, s);
        compute_barrier(cmd);
        detail(cmd, io, HP_DOF_DETAIL_GATHER_OR_COLS);
        detail(cmd, io, HP_DOF_DETAIL_SAT_QUERY);
    }
    if (s->bokeh && !overlap) {
        record_splat(d, cmd, io, s);
        compute_barrier(cmd);
        detail(cmd, io, HP_DOF_DETAIL_SPLAT);
    }
}

void hp_dof_record_composite(hp_dof *d, VkCommandBuffer cmd, const hp_dof_io *io, const hp_dof_settings *s)
{
    hp_dof_frame *f = io->frame;
    struct composite_push cp = {
        .pixels = io->pixels, .coc = f->coc.address, .mask = f->mask.address, .near = f->near.address,
        .far = f->far.address, .accum = s->bokeh ? f->accum.address : 0, .out = f->output.address,
        .width = f->width, .height = f->height, .half_w = half_of(f->width), .half_h = half_of(f->height),
        .sat = s->method == HP_DOF_SAT, .dilated = f->dilated.address, .state = io->state};
    run(cmd, &d->composite[io->format], &cp, sizeof(cp), (f->width + 31) / 32, (f->height + 7) / 8);
    compute_barrier(cmd);
}

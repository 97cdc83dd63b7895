/* The tone stages: pipelines, parameter packing and recording. */
#include "pipeline/tone.h"

#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t spv_exposure[] =
#include "exposure.spv.inc"
    ;
static const uint32_t spv_tonemap[] =
#include "tonemap.spv.inc"
    ;
static const uint32_t spv_blur[] =
#include "blur.spv.inc"
    ;

struct exposure_push {
    VkDeviceAddress stats, params, state;
};

struct tonemap_push {
    VkDeviceAddress pixels, output, params, state, lan;
    uint32_t width, height;
    VkDeviceAddress coc, mask, near, far, accum; /* depth of field, fused */
    uint32_t half_w, half_h, sat, flags;
    VkDeviceAddress dilated;
    float luma[3]; /* the working space's Y row (issue 17) */
};
_Static_assert(offsetof(struct tonemap_push, dilated) == 104 && offsetof(struct tonemap_push, luma) == 112 &&
                   sizeof(struct tonemap_push) <= 128, /* Vulkan's guaranteed maxPushConstantsSize */
               "push constant layout drifted from tonemap.comp");

struct blur_push {
    VkDeviceAddress src, dst;
    uint32_t width, height, radius, vertical;
};

struct hp_tone {
    hp_gpu *gpu;
    hp_compute exposure;
    hp_compute tonemap[2][4][2]; /* [hp_pixel_format][hp_tone_output][depth of field fused] */
    hp_compute blur;
};

size_t hp_tone_output_pixel_size(hp_tone_output kind) { return kind == HP_TONE_OUT_RGBA16 ? 8 : 4; }

size_t hp_tone_output_bytes(hp_tone_output kind, uint32_t width, uint32_t height, bool alpha)
{
    if (kind == HP_TONE_OUT_YUV420)
        return (size_t)HP_YUV_BYTES(width, height, alpha);
    return (size_t)width * height * hp_tone_output_pixel_size(kind);
}

size_t hp_tone_output_max_bytes(uint32_t width, uint32_t height)
{
    size_t rgba16 = (size_t)width * height * 8, yuv = hp_tone_output_bytes(HP_TONE_OUT_YUV420, width, height, true);
    return rgba16 > yuv ? rgba16 : yuv;
}

hp_code hp_tone_create(hp_gpu *gpu, hp_tone **out, hp_err *err)
{
    *out = NULL;
    hp_tone *t = calloc(1, sizeof(*t));
    if (!t)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    t->gpu = gpu;
    hp_compute_desc exposure = {.name = "exposure", .spirv = spv_exposure, .spirv_size = sizeof(spv_exposure),
                                .push_constant_size = sizeof(struct exposure_push)};
    hp_code rc = hp_compute_create(gpu, &exposure, &t->exposure, err);
    static const char *const formats[2] = {"rgba16f", "rgba32f"};
    static const char *const kinds[4] = {"luminance", "rgba8", "rgba16", "yuv420"};
    for (uint32_t f = 0; f < 2 && rc == HP_OK; f++) {
        for (uint32_t k = 0; k < 4 && rc == HP_OK; k++) {
            for (uint32_t dof = 0; dof < 2 && rc == HP_OK; dof++) {
                char name[64];
                snprintf(name, sizeof(name), "tonemap_%s_%s%s", formats[f], kinds[k], dof ? "_dof" : "");
                const uint32_t spec[3] = {f == HP_PIXEL_RGBA16F ? 1u : 0u, k, dof};
                hp_compute_desc d = {.name = name, .spirv = spv_tonemap, .spirv_size = sizeof(spv_tonemap),
                                     .push_constant_size = sizeof(struct tonemap_push), .spec_values = spec,
                                     .spec_count = 3};
                rc = hp_compute_create(gpu, &d, &t->tonemap[f][k][dof], err);
            }
        }
    }
    if (rc == HP_OK) {
        hp_compute_desc d = {.name = "blur", .spirv = spv_blur, .spirv_size = sizeof(spv_blur),
                             .push_constant_size = sizeof(struct blur_push)};
        rc = hp_compute_create(gpu, &d, &t->blur, err);
    }
    if (rc != HP_OK) {
        hp_tone_destroy(&t);
        return rc;
    }
    *out = t;
    return HP_OK;
}

void hp_tone_statistics(const hp_tone *tone, hp_pixel_format format, hp_tone_output kind, bool dof, char *buf,
                        size_t len)
{
    hp_compute_statistics(tone->gpu, &tone->tonemap[format][kind][dof], buf, len);
}

void hp_tone_destroy(hp_tone **pt)
{
    hp_tone *t = *pt;
    if (!t)
        return;
    hp_compute_destroy(t->gpu, &t->exposure);
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 4; k++)
            for (int d = 0; d < 2; d++)
                hp_compute_destroy(t->gpu, &t->tonemap[f][k][d]);
    hp_compute_destroy(t->gpu, &t->blur);
    free(t);
    *pt = NULL;
}

/* A 3x3 in double as 9 floats, row-major. */
static void pack_matrix(const double m[3][3], uint32_t *w)
{
    for (int i = 0; i < 9; i++) {
        float v = (float)m[i / 3][i % 3];
        memcpy(&w[i], &v, 4);
    }
}

void hp_tone_pack_params(const hp_params *p, uint32_t w[HP_TONE_PARAMS_WORDS])
{
    memset(w, 0, HP_TONE_PARAMS_WORDS * sizeof(uint32_t));
    const hp_tonemap_params *t = &p->tonemap;
    w[0] = (uint32_t)t->op;
    w[1] = (uint32_t)p->exposure.mode;
    w[2] = p->exposure.key_auto;
    w[3] = (uint32_t)p->gamma.mode;
    w[4] = p->output.dither;
    w[5] = p->output.bit_depth;
    w[6] = p->gamma.radius > 0 && (p->gamma.mode == HP_GAMMA_LOCAL || p->gamma.mode == HP_GAMMA_LOCAL_LUMINANCE);
    double lottes_b, lottes_c;
    hp_lottes_constants(t, &lottes_b, &lottes_c);
    /* Uchimura's derived constants (algorithms.md 3.8). */
    double P = t->uchimura_max_brightness, a = t->uchimura_contrast, m = t->uchimura_linear_start;
    double l = t->uchimura_linear_length;
    double l0 = (P - m) * l / a, S0 = m + l0, S1 = m + a * l0, C2 = a * P / (P - S1), CP = -C2 / P;
    const double f[] = {
        p->exposure.key, p->exposure.low_percent, p->exposure.high_percent, p->exposure.stops,
        p->exposure.adaptation, p->exposure.compensation_ev, t->white_point, t->drago_bias, t->drago_display_max,
        t->aces_input_scale, t->hable_a, t->hable_b, t->hable_c, t->hable_d, t->hable_e, t->hable_f,
        t->hable_white, t->hable_exposure_bias, t->lottes_contrast, t->lottes_shoulder, lottes_b, lottes_c,
        P, a, m, l, t->uchimura_black_tightness, t->uchimura_black_offset, l0, S0, S1, C2, CP,
        t->drago_scene_log_average, t->drago_scene_max};
    _Static_assert(8 + sizeof(f) / sizeof(f[0]) <= HP_TONE_PARAMS_WORDS, "tone_params overflow");
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        float v = (float)f[i];
        memcpy(&w[8 + i], &v, 4);
    }
    _Static_assert(8 + sizeof(f) / sizeof(f[0]) == 43 && 45 + 9 <= HP_TONE_PARAMS_WORDS, "tone_params layout");
    w[43] = p->color.convert;
    pack_matrix(p->color.to_work, &w[45]);
    /* The working space (issue 17): its Y row, Rec.709's HP_LUMA_* for sRGB output as the constants the
     * shaders use, and under HP_TONE_FLAG_WIDE the RGB operators' matrices composed with it. */
    _Static_assert(HP_TONE_PARAMS_WORK_LUMA == 45 + 9 && HP_TONE_PARAMS_WORK_LUMA + 4 + 18 <= HP_TONE_PARAMS_WORDS,
                   "tone_params layout");
    const hp_working_space *ws = hp_working_space_of(p->output.colorspace);
    const double rec709[3] = {HP_LUMA_R, HP_LUMA_G, HP_LUMA_B};
    for (int i = 0; i < 3; i++) {
        float v = (float)(p->output.colorspace == HP_OUTPUT_SRGB ? rec709[i] : ws->luma[i]);
        memcpy(&w[HP_TONE_PARAMS_WORK_LUMA + i], &v, 4);
    }
    const hp_tone_operator op = p->tonemap.op;
    const double(*op_in)[3] = op == HP_TONE_AGX ? ws->agx_in : op == HP_TONE_ACES_HILL ? ws->aces_in : ws->to_rec709;
    const double(*op_out)[3] = op == HP_TONE_AGX ? ws->agx_out : op == HP_TONE_ACES_HILL ? ws->aces_out : ws->from_rec709;
    pack_matrix(op_in, &w[HP_TONE_PARAMS_WORK_LUMA + 4]);
    pack_matrix(op_out, &w[HP_TONE_PARAMS_WORK_LUMA + 13]);
}

void hp_tone_decode_state(const void *buf, hp_tone_state *o)
{
    float f[HP_TONE_STATE_WORDS];
    uint32_t translucent;
    memcpy(f, buf, sizeof(f));
    memcpy(&translucent, (const uint8_t *)buf + HP_TONE_STATE_TRANSLUCENT * sizeof(uint32_t), sizeof(translucent));
    *o = (hp_tone_state){f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12],
                         .translucent = translucent != 0};
}

/* Writes before reads and writes after: the tone pass also writes tone_state's translucent word, which
 * the exposure stage has just zeroed (a write after a write). */
static void barrier(VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                         0, NULL, 0, NULL);
}

static void dispatch_image(VkCommandBuffer cmd, uint32_t width, uint32_t height)
{
    vkCmdDispatch(cmd, (width + 31) / 32, (height + 7) / 8, 1);
}

void hp_tone_record(hp_tone *t, VkCommandBuffer cmd, const hp_tone_io *io)
{
    hp_tone_record_exposure(t, cmd, io);
    hp_tone_record_map(t, cmd, io);
}

void hp_tone_record_exposure(hp_tone *t, VkCommandBuffer cmd, const hp_tone_io *io)
{
    struct exposure_push ep = {.stats = io->stats, .params = io->params, .state = io->state};
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, t->exposure.pipeline);
    vkCmdPushConstants(cmd, t->exposure.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(ep), &ep);
    vkCmdDispatch(cmd, 1, 1, 1);
    barrier(cmd);
}

void hp_tone_record_map(hp_tone *t, VkCommandBuffer cmd, const hp_tone_io *io)
{
    struct tonemap_push tp = {.pixels = io->pixels, .params = io->params, .state = io->state,
                              .lan = io->lan_b, .width = io->width, .height = io->height,
                              .flags = (io->convert_input ? HP_TONE_FLAG_CONVERT : 0) |
                                       (io->colorspace != HP_OUTPUT_SRGB ? HP_TONE_FLAG_WIDE : 0),
                              .luma = {(float)HP_LUMA_R, (float)HP_LUMA_G, (float)HP_LUMA_B}};
    /* The working space's Y row as a push constant: luminance() reads it on every pixel, where a load
     * from tone_params, or a choice between it and the constants, cost sRGB output 4-8% of its 4K tone pass
     * on an H200 (docs/BENCHMARKS.md). */
    if (io->colorspace != HP_OUTPUT_SRGB)
        for (int i = 0; i < 3; i++)
            tp.luma[i] = (float)hp_working_space_of(io->colorspace)->luma[i];
    uint32_t dof = io->dof != NULL;
    if (dof) {
        tp.coc = io->dof->coc.address;
        tp.mask = io->dof->mask.address;
        tp.near = io->dof->near.address;
        tp.far = io->dof->far.address;
        tp.accum = io->dof_bokeh ? io->dof->accum.address : 0;
        tp.half_w = (io->width + 1) / 2;
        tp.half_h = (io->height + 1) / 2;
        tp.sat = io->dof_sat;
        tp.dilated = io->dof->dilated.address;
    }
    if (io->gamma_radius > 0 && io->kind != HP_TONE_OUT_LUMINANCE) {
        /* L first, blurred horizontally into lan_b, vertically back into lan_a... then read from lan_a. */
        const hp_compute *lum = &t->tonemap[io->format][HP_TONE_OUT_LUMINANCE][dof];
        tp.output = io->lan_a;
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, lum->pipeline);
        vkCmdPushConstants(cmd, lum->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(tp), &tp);
        dispatch_image(cmd, io->width, io->height);
        barrier(cmd);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, t->blur.pipeline);
        for (uint32_t vertical = 0; vertical < 2; vertical++) {
            struct blur_push bp = {.src = vertical ? io->lan_b : io->lan_a, .dst = vertical ? io->lan_a : io->lan_b,
                                   .width = io->width, .height = io->height, .radius = io->gamma_radius,
                                   .vertical = vertical};
            vkCmdPushConstants(cmd, t->blur.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(bp), &bp);
            dispatch_image(cmd, io->width, io->height);
            barrier(cmd);
        }
        tp.lan = io->lan_a;
    }
    const hp_compute *map = &t->tonemap[io->format][io->kind][dof];
    tp.output = io->output;
    tp.flags |= io->kind == HP_TONE_OUT_YUV420 && io->yuv_alpha ? HP_TONE_FLAG_ALPHA : 0;
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, map->pipeline);
    vkCmdPushConstants(cmd, map->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(tp), &tp);
    if (io->kind == HP_TONE_OUT_YUV420) /* an invocation per 2 x 2 block, a workgroup per 64 x 16 */
        dispatch_image(cmd, (io->width + 1) / 2, (io->height + 1) / 2);
    else
        dispatch_image(cmd, io->width, io->height);
}

/* Depth of field and bokeh in double precision: the CPU reference for shaders/dof_*.comp and bokeh_*.comp
 * (pipeline/dof.h), pass by pass. Where the GPU's arithmetic chooses a pixel (a tap's position, a
 * kernel's ring count) the same fp32 operations pick it here, since an index is not a value to be more
 * precise about; every value is computed and summed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_shared.h"
#include "pipeline/cpu_reference.h"

/* A field texel as dof_pack_field() stores it: exposed, clamped at 65504, rounded to half. */
static double field_half(double v, double scale)
{
    return (double)hp_half_to_float(hp_float_to_half((float)fmin(v * scale, 65504.0)));
}

static double clamp01(double x) { return x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x; }
static double smoothstep(double e0, double e1, double x)
{
    double t = clamp01((x - e0) / (e1 - e0));
    return t * t * (3.0 - 2.0 * t);
}

double hp_cpu_ngon(double theta, double n)
{
    double sector = 2.0 * M_PI / n;
    return cos(M_PI / n) / cos(theta - sector * floor((n * theta + M_PI) / (2.0 * M_PI)));
}

/* Coverage of half-resolution pixel (px, py) by a sprite: shaders/bokeh_splat.comp coverage(). */
static double sprite_coverage(int px, int py, double cx, double cy, double radius, const hp_dof_settings *s)
{
    double dx = px + 0.5 - cx, dy = (py + 0.5 - cy) / s->squeeze;
    double a = s->rotation_deg * M_PI / 180.0, c = cos(a), sn = sin(a);
    double rx = c * dx + sn * dy, ry = -sn * dx + c * dy;
    double edge = radius;
    if (s->blades >= 3)
        edge *= hp_cpu_ngon(atan2(ry, rx), (double)s->blades);
    return clamp01(edge - sqrt(rx * rx + ry * ry) + 0.5);
}

typedef struct sprite {
    double x, y, coc, z, rgb[3];
} sprite;

/* The passes' buffers and sizes: the full frame (W x H), half resolution (hw x hh), quarter (qw x qh) and tiles
 * (tw x th). The functions below follow the GPU's passes in order, each naming the shader (or the part of one)
 * it mirrors. */
typedef struct dof_work {
    const hp_dof_settings *s;
    const float *depth;
    double exposure_scale;
    uint32_t W, H, hw, hh, tw, th, qw, qh;
    double *sharp, *coc;               /* full: the colour (3), the signed CoC */
    double *half, *tiles, *dil, *qbuf; /* half (4: colour, CoC), tiles (2: near, far), dilated, quarter (4) */
    double *near, *far, *accum;        /* half: the near and far fields (4), the bokeh's light (3) */
    bool *excluded, *is_sprite;        /* full */
    double *alpha;                     /* full */
    sprite *sprites;
    size_t sprite_cap;
    hp_cpu_dof_result *result;
} dof_work;

static void dof_work_free(dof_work *w)
{
    free(w->sharp), free(w->coc), free(w->half), free(w->tiles), free(w->dil), free(w->near), free(w->far);
    free(w->accum), free(w->qbuf), free(w->excluded), free(w->is_sprite), free(w->alpha), free(w->sprites);
}

/* dof_setup.comp, in the same order of pixels (the order only matters past the sprite budget, where
 * the GPU's choice is its atomics' and no test compares images). */
static void dof_setup(dof_work *work, const void *pixels, hp_pixel_format format)
{
    const hp_dof_settings *s = work->s;
    const uint32_t W = work->W, H = work->H, hw = work->hw, hh = work->hh, tw = work->tw;
    double *sharp = work->sharp, *coc = work->coc, *half = work->half, *tiles = work->tiles, *alpha = work->alpha;
    bool *excluded = work->excluded, *is_sprite = work->is_sprite;
    sprite *sprites = work->sprites;
    const float *depth = work->depth;
    const double exposure_scale = work->exposure_scale;
    hp_cpu_dof_result *result = work->result;
    const size_t sprite_cap = work->sprite_cap;
    /* The working space's Y row (hp_dof_settings.output): the shaders read tone_state's, Rec.709's HP_LUMA_*
     * in fp32 for sRGB output, for the exclusion of an overflowing luminance, and weigh the bokeh threshold
     * with it. */
    double luma[3] = {HP_LUMA_R, HP_LUMA_G, HP_LUMA_B};
    if (s->output != HP_OUTPUT_SRGB)
        memcpy(luma, hp_working_space_of(s->output)->luma, sizeof(luma));
    const float luma_f[3] = {(float)luma[0], (float)luma[1], (float)luma[2]};

    for (uint32_t hy = 0; hy < hh; hy++) {
        for (uint32_t hx = 0; hx < hw; hx++) {
            double sum[3] = {0, 0, 0}, nearc = 0.0, farc = 3.0e38;
            uint32_t count = 0;
            for (uint32_t j = 0; j < 2; j++) {
                for (uint32_t i = 0; i < 2; i++) {
                    uint32_t x = 2 * hx + i, y = 2 * hy + j;
                    if (x >= W || y >= H)
                        continue;
                    size_t idx = (size_t)y * W + x;
                    float c[4], yf;
                    hp_cpu_load_pixel(pixels, format, idx, c);
                    hp_cpu_input_color(&s->color, s->output, c);
                    excluded[idx] = !hp_cpu_luminance_row(c, luma_f, &yf);
                    alpha[idx] = excluded[idx] ? 1.0 : c[3];
                    for (int k = 0; k < 3; k++)
                        sharp[3 * idx + k] = excluded[idx] || !(c[k] > 0.0f) ? 0.0 : c[k];
                    double sc = hp_dof_coc(s, W, depth[idx]);
                    coc[idx] = sc;
                    count++;
                    double lum = luma[0] * sharp[3 * idx] + luma[1] * sharp[3 * idx + 1] +
                                 luma[2] * sharp[3 * idx + 2];
                    if (s->bokeh && fabs(sc) >= s->bokeh_min_coc_px && lum * exposure_scale > s->bokeh_threshold) {
                        if (result->sprites_wanted < sprite_cap) {
                            sprite *sp = &sprites[result->sprites_wanted];
                            sp->x = x + 0.5, sp->y = y + 0.5, sp->coc = sc;
                            sp->z = depth[idx] < HP_DOF_DEPTH_BACKGROUND ? (double)depth[idx] * s->depth_scale : 3.0e38;
                            memcpy(sp->rgb, &sharp[3 * idx], sizeof(sp->rgb));
                            is_sprite[idx] = true;
                            result->sprites_drawn++;
                        }
                        result->sprites_wanted++;
                    }
                    if (!is_sprite[idx])
                        for (int k = 0; k < 3; k++)
                            sum[k] += sharp[3 * idx + k];
                    nearc = fmax(nearc, -sc);
                    farc = fmin(farc, fmax(sc, 0.0));
                }
            }
            double *hp = &half[4 * ((size_t)hy * hw + hx)];
            for (int k = 0; k < 3; k++)
                hp[k] = sum[k] / count;
            hp[3] = nearc > 0.0 ? -nearc : farc;
            double *t = &tiles[2 * ((size_t)(hy / HP_DOF_TILE) * tw + hx / HP_DOF_TILE)];
            t[0] = fmax(t[0], nearc);
            t[1] = fmax(t[1], nearc > 0.0 ? 0.0 : farc);
        }
    }
}

/* The quarter resolution of dof_setup.comp: 2 x 2 half pixels by the same rule. */
static void dof_quarter(dof_work *work)
{
    const uint32_t hw = work->hw, hh = work->hh, qw = work->qw, qh = work->qh;
    double *half = work->half, *qbuf = work->qbuf;
    for (uint32_t qy = 0; qy < qh; qy++) {
        for (uint32_t qx = 0; qx < qw; qx++) {
            double sum[3] = {0, 0, 0}, qn = 0.0, qf = 3.0e38, count = 0;
            for (uint32_t j = 0; j < 2; j++) {
                for (uint32_t i = 0; i < 2; i++) {
                    uint32_t x = 2 * qx + i, y = 2 * qy + j;
                    if (x >= hw || y >= hh)
                        continue;
                    const double *v = &half[4 * ((size_t)y * hw + x)];
                    for (int k = 0; k < 3; k++)
                        sum[k] += v[k];
                    count++;
                    qn = fmax(qn, -v[3]);
                    qf = fmin(qf, fmax(v[3], 0.0));
                }
            }
            double *q = &qbuf[4 * ((size_t)qy * qw + qx)];
            for (int k = 0; k < 3; k++)
                q[k] = sum[k] / count;
            q[3] = qn > 0.0 ? -qn : qf;
        }
    }
}

/* dof_sat.comp: the box mean of each half pixel's CoC, exactly (summed directly). */
static void dof_sat(dof_work *work)
{
    const hp_dof_settings *s = work->s;
    const uint32_t hw = work->hw, hh = work->hh;
    double *half = work->half, *far = work->far;
    for (uint32_t hy = 0; hy < hh; hy++) {
        for (uint32_t hx = 0; hx < hw; hx++) {
            double sc = half[4 * ((size_t)hy * hw + hx) + 3];
            float reach = fminf(fabsf((float)sc), (float)s->max_coc_px);
            int rb = (int)floorf(reach * (0.5f * (float)HP_SAT_BOX_SCALE) + 0.5f);
            int x0 = (int)hx - rb < 0 ? 0 : (int)hx - rb, x1 = (int)hx + rb > (int)hw - 1 ? (int)hw - 1 : (int)hx + rb;
            int y0 = (int)hy - rb < 0 ? 0 : (int)hy - rb, y1 = (int)hy + rb > (int)hh - 1 ? (int)hh - 1 : (int)hy + rb;
            double acc[3] = {0, 0, 0};
            for (int y = y0; y <= y1; y++)
                for (int x = x0; x <= x1; x++)
                    for (int k = 0; k < 3; k++)
                        acc[k] += half[4 * ((size_t)y * hw + x) + k];
            double area = (double)(x1 - x0 + 1) * (y1 - y0 + 1);
            double *f = &far[4 * ((size_t)hy * hw + hx)];
            for (int k = 0; k < 3; k++)
                f[k] = acc[k] / area;
            f[3] = 1.0;
        }
    }
}

/* dof_tiles.comp */
static void dof_tiles(dof_work *work)
{
    const hp_dof_settings *s = work->s;
    const uint32_t tw = work->tw, th = work->th;
    double *tiles = work->tiles, *dil = work->dil;
    int r = (int)ceil(s->max_coc_px / (2.0 * HP_DOF_TILE));
    for (int ty = 0; ty < (int)th; ty++) {
        for (int tx = 0; tx < (int)tw; tx++) {
            double m = 0.0;
            for (int dy = -r; dy <= r; dy++)
                for (int dx = -r; dx <= r; dx++)
                    if (ty + dy >= 0 && ty + dy < (int)th && tx + dx >= 0 && tx + dx < (int)tw)
                        m = fmax(m, tiles[2 * ((size_t)(ty + dy) * tw + tx + dx)]);
            dil[(size_t)ty * tw + tx] = m;
        }
    }
}

/* dof_gather.comp */
static void dof_gather(dof_work *work)
{
    const hp_dof_settings *s = work->s;
    const uint32_t hw = work->hw, hh = work->hh, tw = work->tw, qw = work->qw, qh = work->qh;
    double *half = work->half, *dil = work->dil, *qbuf = work->qbuf, *near = work->near, *far = work->far;
    float taps[HP_DOF_TAPS][2], aperture[HP_DOF_TAPS];
    hp_dof_tap_directions(taps);
    double coverage = hp_dof_aperture(s, aperture);
    for (uint32_t hy = 0; hy < hh; hy++) {
        for (uint32_t hx = 0; hx < hw; hx++) {
            size_t idx = (size_t)hy * hw + hx;
            const double *centre = &half[4 * idx];
            double *nf = &near[4 * idx], *ff = &far[4 * idx];
            float tile_near = (float)dil[(hy / HP_DOF_TILE) * tw + hx / HP_DOF_TILE];
            float R = fmaxf(fmaxf((float)centre[3], 0.0f), tile_near) * 0.5f;
            if (R < 0.5f) {
                nf[0] = nf[1] = nf[2] = nf[3] = 0.0;
                for (int m = 0; m < 4; m++)
                    ff[m] = centre[3] > 0.0 ? (m < 3 ? centre[m] : 1.0) : 0.0;
                continue;
            }
            bool quarter = R > (float)HP_DOF_QUARTER_ABOVE;
            const double *src = quarter ? qbuf : half;
            uint32_t sw = quarter ? qw : hw, sh = quarter ? qh : hh, max_rings = quarter ? HP_DOF_QUARTER_RINGS
                                                                                      : HP_DOF_MAX_RINGS;
            float Rs = quarter ? 0.5f * R : R;
            double scale = quarter ? 0.25 : 0.5;
            float px = quarter ? ((float)hx + 0.5f) * 0.5f - 0.5f : (float)hx;
            float py = quarter ? ((float)hy + 0.5f) * 0.5f - 0.5f : (float)hy;
            uint32_t K = (uint32_t)ceilf(Rs / (float)HP_DOF_RING_SPACING);
            K = K < 1 ? 1 : K > max_rings ? max_rings : K;
            float step = Rs / (float)K;
            double tap_share = 0.25 * (double)step * step;
            double fs[3] = {0, 0, 0}, ns[3] = {0, 0, 0}, fw = 0, nw = 0, cover = 0;
            for (uint32_t k = 0; k <= K; k++) {
                uint32_t count = k == 0 ? 1 : 8 * k, base = k == 0 ? 0 : 1 + 4 * k * (k - 1);
                float rf = (float)k * step;
                for (uint32_t j = 0; j < count; j++) {
                    /* The shader's floor(p + r * dir + 0.5) in fp32, in that order. */
                    float ox = px + rf * taps[base + j][0], oy = py + rf * taps[base + j][1];
                    int qx = (int)floorf(ox + 0.5f), qy = (int)floorf(oy + 0.5f);
                    qx = qx < 0 ? 0 : qx > (int)sw - 1 ? (int)sw - 1 : qx;
                    qy = qy < 0 ? 0 : qy > (int)sh - 1 ? (int)sh - 1 : qy;
                    const double *v = &src[4 * ((size_t)qy * sw + qx)];
                    double c = fabs(v[3]) * scale;
                    double reach = clamp01(c * aperture[base + j] - rf + 1.0);
                    double w = reach / fmax(c * c, 0.25);
                    if (v[3] > 0.0) {
                        for (int m = 0; m < 3; m++)
                            fs[m] += w * v[m];
                        fw += w;
                    } else if (v[3] < 0.0) {
                        for (int m = 0; m < 3; m++)
                            ns[m] += w * v[m];
                        nw += w;
                        cover += reach * tap_share * coverage / fmax(c * c, 0.25);
                    }
                }
            }
            double a = fmin(cover, 1.0);
            for (int m = 0; m < 3; m++) {
                nf[m] = nw > 0.0 ? ns[m] / nw * a : 0.0;
                ff[m] = centre[3] > 0.0 ? (fw > 0.0 ? fs[m] / fw : centre[m]) : 0.0;
            }
            nf[3] = nw > 0.0 ? a : 0.0;
            ff[3] = centre[3] > 0.0 ? 1.0 : 0.0;
        }
    }
}

/* bokeh_splat.comp, at half resolution */
static void bokeh_splat(dof_work *work)
{
    const hp_dof_settings *s = work->s;
    const uint32_t W = work->W, hw = work->hw, hh = work->hh;
    double *half = work->half, *accum = work->accum;
    sprite *sprites = work->sprites;
    const float *depth = work->depth;
    hp_cpu_dof_result *result = work->result;
    for (uint32_t i = 0; i < result->sprites_drawn; i++) {
        const sprite *sp = &sprites[i];
        double cx = 0.5 * sp->x, cy = 0.5 * sp->y, radius = 0.5 * fabs(sp->coc), ry = radius * s->squeeze;
        int x0 = (int)floor(cx - radius - 1.0), x1 = (int)floor(cx + radius + 1.0);
        int y0 = (int)floor(cy - ry - 1.0), y1 = (int)floor(cy + ry + 1.0);
        double total = 0.0;
        for (int y = y0; y <= y1; y++)
            for (int x = x0; x <= x1; x++)
                total += sprite_coverage(x, y, cx, cy, radius, s);
        if (!(total > 0.0))
            continue;
        for (int y = y0 < 0 ? 0 : y0; y <= y1 && y < (int)hh; y++) {
            for (int x = x0 < 0 ? 0 : x0; x <= x1 && x < (int)hw; x++) {
                double w = sprite_coverage(x, y, cx, cy, radius, s);
                size_t hidx = (size_t)y * hw + x, didx = (size_t)(2 * y) * W + 2 * x;
                double tz = depth[didx] < HP_DOF_DEPTH_BACKGROUND ? (double)depth[didx] * s->depth_scale : 3.0e38;
                if (tz < 0.95 * sp->z)
                    w *= clamp01(fabs(half[4 * hidx + 3]) - 0.5);
                for (int k = 0; k < 3; k++)
                    accum[3 * hidx + k] += sp->rgb[k] / total * w;
            }
        }
    }
}

/* The fields as the GPU stores them (dof_pack_field): exposed half floats. */
static void dof_pack_fields(dof_work *work)
{
    double *near = work->near, *far = work->far;
    const double exposure_scale = work->exposure_scale;
    const size_t nh = (size_t)work->hw * work->hh;
    for (size_t i = 0; i < nh; i++) {
        for (int k = 0; k < 4; k++) {
            double sc = k < 3 ? exposure_scale : 1.0;
            near[4 * i + k] = field_half(near[4 * i + k], sc);
            far[4 * i + k] = field_half(far[4 * i + k], sc);
        }
    }
}

/* shaders/include/dof_composite.glsl */
static void dof_composite(dof_work *work, double *out)
{
    const hp_dof_settings *s = work->s;
    const uint32_t W = work->W, H = work->H, hw = work->hw, hh = work->hh;
    double *sharp = work->sharp, *coc = work->coc, *near = work->near, *far = work->far;
    double *accum = work->accum, *alpha = work->alpha;
    bool *is_sprite = work->is_sprite;
    const double exposure_scale = work->exposure_scale;
    for (uint32_t y = 0; y < H; y++) {
        for (uint32_t x = 0; x < W; x++) {
            size_t idx = (size_t)y * W + x;
            double sh[3];
            for (int k = 0; k < 3; k++)
                sh[k] = is_sprite[idx] ? 0.0 : sharp[3 * idx + k];
            double ux = (x + 0.5) * 0.5 - 0.5, uy = (y + 0.5) * 0.5 - 0.5;
            double fx0 = floor(ux), fy0 = floor(uy), fx = ux - fx0, fy = uy - fy0;
            int ax = (int)fx0 < 0 ? 0 : (int)fx0 > (int)hw - 1 ? (int)hw - 1 : (int)fx0;
            int cx = (int)fx0 + 1 > (int)hw - 1 ? (int)hw - 1 : (int)fx0 + 1 < 0 ? 0 : (int)fx0 + 1;
            int ay = (int)fy0 < 0 ? 0 : (int)fy0 > (int)hh - 1 ? (int)hh - 1 : (int)fy0;
            int cy = (int)fy0 + 1 > (int)hh - 1 ? (int)hh - 1 : (int)fy0 + 1 < 0 ? 0 : (int)fy0 + 1;
            double fv[4], nv[4], light[3];
            for (int k = 0; k < 3; k++) {
                const double *ab = accum;
                double a00 = ab[3 * ((size_t)ay * hw + ax) + k], a10 = ab[3 * ((size_t)ay * hw + cx) + k];
                double a01 = ab[3 * ((size_t)cy * hw + ax) + k], a11 = ab[3 * ((size_t)cy * hw + cx) + k];
                light[k] = (a00 + (a10 - a00) * fx) + ((a01 + (a11 - a01) * fx) - (a00 + (a10 - a00) * fx)) * fy;
            }
            for (int k = 0; k < 4; k++) {
                const double *fb = far, *nb = near;
                double f00 = fb[4 * ((size_t)ay * hw + ax) + k], f10 = fb[4 * ((size_t)ay * hw + cx) + k];
                double f01 = fb[4 * ((size_t)cy * hw + ax) + k], f11 = fb[4 * ((size_t)cy * hw + cx) + k];
                fv[k] = (f00 + (f10 - f00) * fx) + ((f01 + (f11 - f01) * fx) - (f00 + (f10 - f00) * fx)) * fy;
                double n00 = nb[4 * ((size_t)ay * hw + ax) + k], n10 = nb[4 * ((size_t)ay * hw + cx) + k];
                double n01 = nb[4 * ((size_t)cy * hw + ax) + k], n11 = nb[4 * ((size_t)cy * hw + cx) + k];
                nv[k] = (n00 + (n10 - n00) * fx) + ((n01 + (n11 - n01) * fx) - (n00 + (n10 - n00) * fx)) * fy;
            }
            double sc = coc[idx];
            double blurred = s->method == HP_DOF_SAT ? fabs(sc) : sc;
            double b[3];
            double t = blurred > 0.0 && fv[3] > 0.0 ? smoothstep(0.5, 1.5, blurred) : 0.0;
            double tn = s->method != HP_DOF_SAT && sc < 0.0 && nv[3] > 0.0 ? smoothstep(0.5, 1.5, -sc) : 0.0;
            for (int k = 0; k < 3; k++) {
                double inv = exposure_scale > 0.0 ? 1.0 / exposure_scale : 0.0;
                b[k] = sh[k] + (fv[3] > 0.0 ? fv[k] * inv / fv[3] - sh[k] : 0.0) * t;
                double nk = nv[k] * inv;
                if (tn > 0.0)
                    b[k] = b[k] + (nk / nv[3] - b[k]) * tn;
                double o = s->method == HP_DOF_SAT ? b[k] : b[k] * (1.0 - nv[3]) + nk;
                out[4 * idx + k] = o + 0.25 * light[k];
            }
            out[4 * idx + 3] = alpha[idx];
        }
    }
}

hp_code hp_cpu_dof(const void *pixels, hp_pixel_format format, uint32_t W, uint32_t H, const float *depth,
                   const hp_dof_settings *s, double exposure_scale, double max_y, double *out,
                   hp_cpu_dof_result *result)
{
    (void)max_y; /* the GPU's SAT needs it for its fixed point; the exact box mean here does not */
    memset(result, 0, sizeof(*result));
    dof_work w = {.s = s, .depth = depth, .exposure_scale = exposure_scale, .W = W, .H = H, .result = result};
    w.hw = (W + 1) / 2, w.hh = (H + 1) / 2;
    w.tw = (w.hw + HP_DOF_TILE - 1) / HP_DOF_TILE, w.th = (w.hh + HP_DOF_TILE - 1) / HP_DOF_TILE;
    w.qw = (w.hw + 1) / 2, w.qh = (w.hh + 1) / 2;
    size_t n = (size_t)W * H, nh = (size_t)w.hw * w.hh;
    w.sharp = calloc(n * 3, sizeof(double)), w.coc = calloc(n, sizeof(double));
    w.half = calloc(nh * 4, sizeof(double)), w.tiles = calloc((size_t)w.tw * w.th * 2, sizeof(double));
    w.dil = calloc((size_t)w.tw * w.th, sizeof(double));
    w.near = calloc(nh * 4, sizeof(double)), w.far = calloc(nh * 4, sizeof(double));
    w.qbuf = calloc((size_t)w.qw * w.qh * 4, sizeof(double));
    w.accum = calloc(nh * 3, sizeof(double));
    w.excluded = calloc(n, sizeof(bool)), w.is_sprite = calloc(n, sizeof(bool));
    w.alpha = calloc(n, sizeof(double));
    w.sprite_cap = s->bokeh ? s->max_sprites : 0;
    w.sprites = calloc(w.sprite_cap ? w.sprite_cap : 1, sizeof(sprite));
    if (!w.sharp || !w.coc || !w.half || !w.tiles || !w.dil || !w.near || !w.far || !w.accum || !w.excluded ||
        !w.is_sprite || !w.alpha || !w.sprites || !w.qbuf) {
        dof_work_free(&w);
        return HP_ERR_OUT_OF_MEMORY;
    }
    dof_setup(&w, pixels, format);
    dof_quarter(&w);
    if (s->method == HP_DOF_SAT) {
        dof_sat(&w);
    } else {
        dof_tiles(&w);
        dof_gather(&w);
    }
    bokeh_splat(&w);
    dof_pack_fields(&w);
    dof_composite(&w, out);
    dof_work_free(&w);
    return HP_OK;
}

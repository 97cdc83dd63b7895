/* Depth of field and bokeh (issue 5): the CoC against algorithms.md 9.4, the n-gon against 9.5, a single
 * bright point becoming a sprite of its CoC's radius and shape with its energy kept, a frame in focus
 * coming out identical to the frame without DOF, two-plane scenes without halos, the summed-area table
 * exact against direct sums in double at 4K, the sprite budget, and the whole chain against the CPU
 * reference (pipeline/cpu_dof.c). Validation layer on; any message fails. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image.h"
#include "common/log.h"
#include "hp_dof.h"
#include "hp_shared.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/frame_graph.h"
#include "api/codecs/image_file.h"
#include "gpu_test.h"
#include "tap.h"

static hp_gpu *gpu;
static hp_frame_graph *graph;
static hp_err err;

static hp_dof_settings default_settings(void)
{
    return (hp_dof_settings){.method = HP_DOF_GATHER, .focal_length_mm = 50, .f_stop = 2.8, .focus_distance_m = 3,
                             .sensor_width_mm = 36, .depth_scale = 1, .max_coc_px = 32, .bokeh = false,
                             .bokeh_threshold = 4, .bokeh_min_coc_px = 2, .blades = 6, .rotation_deg = 0,
                             .squeeze = 1, .max_sprites = 4096};
}

/* Exposure fixed at 1 so the bokeh threshold reads the frame's own values. */
static hp_frame_params frame_params(const hp_dof_settings *s, bool dof)
{
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fp.params.exposure.mode = HP_EXPOSURE_FIXED;
    fp.params.exposure.stops = 0;
    fp.dof = dof;
    fp.dof_settings = *s;
    return fp;
}

/* Runs one RGBA32F frame with its depth. */
static bool run(uint32_t w, uint32_t h, const float *rgba, const float *depth, const hp_frame_params *fp,
                hp_frame_result *res)
{
    hp_frame_desc desc = {.width = w, .height = h, .format = HP_PIXEL_RGBA32F};
    void *staging;
    float *dst;
    if (hp_frame_graph_begin(graph, &desc, &staging, &err) != HP_OK)
        return false;
    memcpy(staging, rgba, (size_t)w * h * 16);
    if (depth) {
        if (hp_frame_graph_depth(graph, &dst, &err) != HP_OK)
            return false;
        memcpy(dst, depth, (size_t)w * h * 4);
    }
    return hp_frame_graph_run(graph, fp, res, &err) == HP_OK;
}

static uint64_t rng_state;
static double rng_uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static float *alloc_frame(uint32_t w, uint32_t h, float r, float g, float b)
{
    float *f = malloc((size_t)w * h * 16);
    for (size_t i = 0; i < (size_t)w * h; i++)
        f[4 * i] = r, f[4 * i + 1] = g, f[4 * i + 2] = b, f[4 * i + 3] = 1;
    return f;
}

static float *alloc_depth(uint32_t w, uint32_t h, float z)
{
    float *d = malloc((size_t)w * h * 4);
    for (size_t i = 0; i < (size_t)w * h; i++)
        d[i] = z;
    return d;
}

/* --- 1. CoC and n-gon oracles ------------------------------------------------------------------------ */

static void test_oracles(void)
{
    /* algorithms.md 9.4: f = 50 mm, N = 2.8, S1 = 3 m, 36 mm sensor, 1920 wide; radius in pixels. */
    static const double z[] = {0.5, 1, 2, 2.9, 3, 3.1, 5, 10, 100, INFINITY};
    static const double radius[] = {-40.3551, -16.1421, -4.0355, -0.2783, 0, 0.2604, 3.2284, 5.6497, 7.8289, 8.0710};
    hp_dof_settings s = default_settings();
    s.max_coc_px = 64;
    double worst = 0;
    for (int i = 0; i < 10; i++)
        worst = fmax(worst, fabs(hp_dof_coc(&s, 1920, z[i]) - radius[i]));
    tap_ok(worst < 1e-4, "CoC in double reproduces algorithms.md 9.4 (worst error %.2g px)", worst);
    hp_dof_settings s85 = s;
    s85.focal_length_mm = 85, s85.f_stop = 1.4;
    double d85 = 2 * hp_dof_coc(&s85, 1920, 5.0);
    tap_ok(fabs(d85 - 37.7685) < 1e-3, "85 mm f/1.4 at 5 m: diameter %.4f px (algorithms.md 9.4: 37.7685)", d85);
    tap_ok(hp_dof_coc(&s, 1920, 1e10) == hp_dof_coc(&s, 1920, INFINITY) &&
               hp_dof_coc(&s, 1920, NAN) == hp_dof_coc(&s, 1920, INFINITY) && hp_dof_coc(&s, 1920, 0) == 0 &&
               hp_dof_coc(&s, 1920, -1) == 0 && hp_dof_coc(&s, 1920, 0.01) == -64,
           "CoC: Blender's 1e10 sky and NaN are at infinity, depth <= 0 is in focus, the near limit is max_coc_px");

    /* algorithms.md 9.5 */
    static const double deg[] = {0, 15, 30, 36, 45, 60, 90};
    static const double ngon[3][7] = {{0.809017, 0.837556, 0.934172, 1.000000, 0.907981, 0.827091, 0.850651},
                                      {0.866025, 0.896575, 1.000000, 0.947983, 0.896575, 0.866025, 1.000000},
                                      {0.923880, 0.956470, 0.956470, 0.935396, 0.923880, 0.956470, 0.923880}};
    static const int blades[3] = {5, 6, 8};
    worst = 0;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 7; i++)
            worst = fmax(worst, fabs(hp_cpu_ngon(deg[i] * M_PI / 180, blades[b]) - ngon[b][i]));
    tap_ok(worst < 1e-6, "n-gon radius reproduces algorithms.md 9.5 (worst error %.2g)", worst);

    /* The gather's direction table (shaders/include/hp_dof_taps.h, generated) is cos and sin in double,
     * rounded to float, exactly. */
    float taps[HP_DOF_TAPS][2];
    hp_dof_tap_directions(taps);
    bool exact = taps[0][0] == 0 && taps[0][1] == 0;
    for (uint32_t k = 1; k <= HP_DOF_MAX_RINGS; k++)
        for (uint32_t j = 0; j < 8 * k; j++) {
            double a = (2.0 * M_PI / (8.0 * k)) * ((double)j + (k % 2 ? 0.0 : 0.5));
            uint32_t i = 1 + 4 * k * (k - 1) + j;
            exact = exact && taps[i][0] == (float)cos(a) && taps[i][1] == (float)sin(a);
        }
    tap_ok(exact, "the gather's %d tap directions are cos and sin in double rounded to float", HP_DOF_TAPS);

    /* The gather's aperture: each tap's reach is scaled by the polygon's radius in its direction. */
    hp_dof_settings hex = default_settings();
    hex.blades = 6;
    hex.rotation_deg = 30;
    float ap[HP_DOF_TAPS];
    double cover = hp_dof_aperture(&hex, ap);
    worst = 0;
    for (int i = 1; i < HP_DOF_TAPS; i++)
        worst = fmax(worst, fabs(ap[i] - hp_cpu_ngon(atan2(-taps[i][1], -taps[i][0]) - M_PI / 6, 6)));
    hex.blades = 0;
    float round_ap[HP_DOF_TAPS];
    double round_cover = hp_dof_aperture(&hex, round_ap);
    tap_ok(worst < 1e-6 && fabs(cover - M_PI / (3 * sqrt(3.0) / 2)) < 1e-12 && round_cover == 1 && round_ap[7] == 1,
           "the gather's aperture: a hexagon rotated 30 degrees is NGon(theta + 180 - 30, 6) per tap (the pixel "
           "seen from the tap; worst %.2g) with coverage pi / 2.598 = %.4f; a circle is 1",
           worst, cover);

    /* The GPU's CoC for the same depths: one row of a 1920-wide frame, depth per column. */
    uint32_t w = 1920, h = 2;
    float *rgba = alloc_frame(w, h, 0.1f, 0.1f, 0.1f);
    float *depth = malloc((size_t)w * h * 4);
    for (uint32_t x = 0; x < w; x++)
        depth[x] = depth[w + x] = (float)(z[x % 10] == INFINITY ? 1e10 : z[x % 10]);
    hp_frame_params fp = frame_params(&s, true);
    hp_frame_result res;
    bool ran = run(w, h, rgba, depth, &fp, &res);
    float *coc = malloc((size_t)w * h * 4);
    ran = ran && hp_frame_graph_read_buffer(graph, &hp_frame_graph_last_dof(graph)->coc, coc, (size_t)w * h * 4, &err) ==
                     HP_OK;
    worst = 0;
    for (uint32_t x = 0; ran && x < w; x++)
        worst = fmax(worst, fabs(coc[x] - radius[x % 10]));
    tap_ok(ran && worst < 2e-4, "GPU CoC reproduces algorithms.md 9.4 (worst error %.2g px)%s%s", worst,
           ran ? "" : ": ", ran ? "" : err.message);
    free(rgba), free(depth), free(coc);
}

/* --- 2. A single bright point becomes a sprite ----------------------------------------------------- */

/* The distance from (cx, cy) along (dx, dy) to the last pixel brighter than half the centre's value. */
static double extent(const float *img, uint32_t w, uint32_t h, double cx, double cy, double dx, double dy)
{
    double centre = img[4 * ((size_t)cy * w + (size_t)cx)];
    double last = 0;
    for (double t = 0; t < w; t += 0.25) {
        int x = (int)floor(cx + t * dx), y = (int)floor(cy + t * dy);
        if (x < 0 || y < 0 || x >= (int)w || y >= (int)h)
            break;
        if (img[4 * ((size_t)y * w + x)] > 0.5 * centre)
            last = t;
    }
    return last + 0.5; /* the half-value crossing lies half a pixel past the last bright pixel centre */
}

static void test_point(void)
{
    uint32_t w = 160, h = 160;
    float *rgba = alloc_frame(w, h, 0, 0, 0);
    float *depth = alloc_depth(w, h, 1e10f); /* everything at infinity: the CoC is max_coc_px */
    size_t c = (size_t)80 * w + 80;
    rgba[4 * c] = rgba[4 * c + 1] = rgba[4 * c + 2] = 5000;
    hp_dof_settings s = default_settings();
    s.bokeh = true;
    s.max_coc_px = 20;
    s.focal_length_mm = 200; /* c(inf) = 31.7 px at 160 wide: clamped to exactly 20 */
    s.f_stop = 1.0;
    for (int shape = 0; shape < 2; shape++) {
        s.blades = shape ? 0 : 6;
        hp_frame_params fp = frame_params(&s, true);
        fp.output_dof = true;
        hp_frame_result res;
        bool ran = run(w, h, rgba, depth, &fp, &res);
        if (!tap_ok(ran, "point light (%s) runs%s%s", shape ? "circle" : "6 blades", ran ? "" : ": ",
                    ran ? "" : err.message))
            continue;
        const float *out = res.dof_pixels;
        double energy[3] = {0, 0, 0};
        for (size_t i = 0; i < (size_t)w * h; i++)
            for (int k = 0; k < 3; k++)
                energy[k] += out[4 * i + k];
        double rel = fmax(fabs(energy[0] / 5000 - 1), fmax(fabs(energy[1] / 5000 - 1), fabs(energy[2] / 5000 - 1)));
        tap_ok(res.bokeh_wanted == 1 && res.bokeh_drawn == 1 && rel < 0.01,
               "point light (%s): one sprite (%u), energy kept within 1%% (off by %.3g%%)", shape ? "circle" : "6 blades",
               res.bokeh_drawn, rel * 100);
        /* Image y runs down; the polygon's vertices are at 30 + 60k degrees of atan2(dy, dx), its edges'
         * middles at 60k: along +y a vertex (radius R), along +x an edge (R cos 30). */
        double ex = extent(out, w, h, 80.5, 80.5, 1, 0), ey = extent(out, w, h, 80.5, 80.5, 0, 1);
        double diag_v = extent(out, w, h, 80.5, 80.5, cos(M_PI / 6), sin(M_PI / 6));
        double want_x = shape ? 20 : 20 * cos(M_PI / 6);
        tap_ok(fabs(ey - 20) <= 1 && fabs(ex - want_x) <= 1 && fabs(diag_v - 20) <= 1,
               "point light (%s): radius %.2f px down, %.2f across, %.2f at 30 degrees (CoC 20; %s)",
               shape ? "circle" : "6 blades", ey, ex, diag_v, shape ? "a circle: 20 everywhere" : "a hexagon: 20, 17.32, 20");
    }
    free(rgba), free(depth);
}

/* --- 3. In focus everywhere: identical to no DOF --------------------------------------------------- */

static void test_identity(void)
{
    hp_image_info info;
    float *rgba = hp_image_decode_file(HP_TEST_DATA "/pmndrs_park.hdr", HP_LAYOUT_RGBA32F, NULL, &info, &err);
    if (!rgba) {
        tap_ok(false, "read pmndrs_park.hdr: %s", err.message);
        return;
    }
    float *depth = alloc_depth(info.width, info.height, 3.0f);
    for (int method = 0; method < 2; method++) {
        hp_dof_settings s = default_settings();
        s.method = method ? HP_DOF_SAT : HP_DOF_GATHER;
        s.bokeh = true;
        s.bokeh_threshold = 0.01; /* many bright pixels, but none out of focus */
        hp_frame_params off = frame_params(&s, false), on = frame_params(&s, true);
        off.params.exposure.mode = on.params.exposure.mode = HP_EXPOSURE_AUTO;
        hp_frame_result a, b;
        size_t bytes = (size_t)info.width * info.height * 4;
        uint8_t *first = malloc(bytes);
        bool ran = run(info.width, info.height, rgba, NULL, &off, &a);
        if (ran)
            memcpy(first, a.pixels, bytes);
        ran = ran && run(info.width, info.height, rgba, depth, &on, &b);
        size_t differ = 0;
        for (size_t i = 0; ran && i < bytes; i++)
            differ += first[i] != ((const uint8_t *)b.pixels)[i];
        tap_ok(ran && differ == 0 && b.dof_ran && b.bokeh_wanted == 0,
               "%s: a real frame (%ux%u) with every depth at the focus distance is byte-identical to DOF off "
               "(%zu bytes differ)%s%s",
               method ? "sat" : "gather", info.width, info.height, differ, ran ? "" : ": ", ran ? "" : err.message);
        free(first);
    }
    free(rgba), free(depth);
}

/* --- 4. Two planes ---------------------------------------------------------------------------------- */

static void test_two_planes(uint32_t edge)
{
    /* edge 128 lies on a tile boundary (16 frame pixels); 120 does not, and the sharp side sits at exactly
     * the focus distance (CoC +0), which once let a -0.0 win a tile's largest near CoC. */
    uint32_t w = 256, h = 64;
    hp_dof_settings s = default_settings();
    s.max_coc_px = 32;
    /* (a) a blurred red foreground (1 m: CoC -16.1 px at 1920 wide, here scaled by width: use a wide
     * sensor equivalent by computing the expected radius from the same function) left of a sharp,
     * textured background at the focus distance. */
    float *rgba = alloc_frame(w, h, 0, 0, 0), *depth = alloc_depth(w, h, 3.0f);
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            float *p = &rgba[4 * ((size_t)y * w + x)];
            if (x < edge) {
                p[0] = 1, p[1] = 0, p[2] = 0;
                depth[(size_t)y * w + x] = 0.5f;
            } else {
                p[0] = 0, p[1] = ((x / 4 + y / 4) % 2) ? 0.8f : 0.2f, p[2] = 0.5f;
            }
        }
    }
    s.focal_length_mm = 135; /* a long lens: a strong near blur at 256 px wide */
    double R = -hp_dof_coc(&s, w, 0.5);
    hp_frame_params fp = frame_params(&s, true);
    fp.output_dof = true;
    hp_frame_result res;
    bool ran = run(w, h, rgba, depth, &fp, &res);
    if (tap_ok(ran, "two planes (edge at %u), blurred foreground: runs (near CoC %.1f px)%s%s", edge, R,
               ran ? "" : ": ",
               ran ? "" : err.message)) {
        const float *o = res.dof_pixels;
        uint32_t y = h / 2;
        /* Red reaching into the sharp background: falls monotonically, gone past the CoC. */
        bool monotonic = true;
        double spread = 0;
        for (uint32_t x = edge; x < w; x++) {
            double red = o[4 * ((size_t)y * w + x)];
            if (x > edge && red > o[4 * ((size_t)y * w + x - 1)] + 1e-4)
                monotonic = false;
            if (red > 0.02)
                spread = x - edge + 1;
        }
        double mid = o[4 * ((size_t)y * w + edge + (uint32_t)(R / 2))];
        tap_ok(monotonic && mid > 0.05 && mid < 0.9 && fabs(spread - R) <= 4,
               "blurred foreground spreads over the sharp background without a halo: red falls monotonically, "
               "%.2f at R/2, reaches %.0f px past the edge (CoC %.1f px)",
               mid, spread, R);
        double worst = 0;
        for (uint32_t yy = 0; yy < h; yy++)
            for (uint32_t x = edge + (uint32_t)ceil(R) + 4; x < w; x++)
                for (int k = 0; k < 3; k++)
                    worst = fmax(worst, fabs(o[4 * ((size_t)yy * w + x) + k] - rgba[4 * ((size_t)yy * w + x) + k]));
        tap_ok(worst < 1e-6, "sharp background beyond the foreground's reach is untouched (worst %.2g)", worst);
    }

    /* (b) the reverse: a sharp red subject at the focus distance left of a blurred, textured background. */
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            depth[(size_t)y * w + x] = x < edge ? 3.0f : 100.0f;
    double Rf = hp_dof_coc(&s, w, 100.0);
    ran = run(w, h, rgba, depth, &fp, &res);
    if (tap_ok(ran, "two planes (edge at %u), blurred background: runs (far CoC %.1f px)%s%s", edge, Rf,
               ran ? "" : ": ",
               ran ? "" : err.message)) {
        const float *o = res.dof_pixels;
        double subject = 0, leak = 0, blurred = 0;
        for (uint32_t y = 0; y < h; y++) {
            for (uint32_t x = 0; x < w; x++) {
                const float *p = &o[4 * ((size_t)y * w + x)], *in = &rgba[4 * ((size_t)y * w + x)];
                if (x < edge)
                    for (int k = 0; k < 3; k++)
                        subject = fmax(subject, fabs(p[k] - in[k]));
                else
                    leak = fmax(leak, p[0]);
                if (x >= edge + 8 && x < w - 8)
                    blurred = fmax(blurred, fabs(p[1] - 0.5)); /* the checker averages to 0.5 */
            }
        }
        tap_ok(subject < 1e-6 && leak < 1e-6 && blurred < 0.1,
               "sharp subject over a blurred background: the subject is untouched to its edge (%.2g), no red "
               "halo on the background (%.2g), the checker blurred toward its mean (%.3f off)",
               subject, leak, blurred);
    }
    free(rgba), free(depth);
}

/* --- 5. The summed-area table is exact -------------------------------------------------------------- */

static void test_sat_exact(void)
{
    uint32_t w = 3840, h = 2160;
    float *rgba = malloc((size_t)w * h * 16), *depth = malloc((size_t)w * h * 4);
    rng_state = 77;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        for (int k = 0; k < 3; k++)
            rgba[4 * i + k] = (float)(16.0 * pow(rng_uniform(), 3.0));
        rgba[4 * i + 3] = 1;
        size_t x = i % w;
        depth[i] = (float)(0.6 + 20.0 * (double)x / w); /* CoC from near through focus to far */
    }
    hp_dof_settings s = default_settings();
    s.method = HP_DOF_SAT;
    s.focal_length_mm = 85;
    s.f_stop = 1.4;
    hp_frame_params fp = frame_params(&s, true);
    hp_frame_result res;
    bool ran = run(w, h, rgba, depth, &fp, &res);
    uint32_t hw = w / 2, hh = h / 2;
    float *half = malloc((size_t)hw * hh * 16);
    uint16_t *far = malloc((size_t)hw * hh * 8); /* RGBA16F (dof.glsl dof_pack_field); exposure 1 here */
    const hp_dof_frame *f = ran ? hp_frame_graph_last_dof(graph) : NULL;
    ran = ran && hp_frame_graph_read_buffer(graph, &f->half_, half, (size_t)hw * hh * 16, &err) == HP_OK &&
          hp_frame_graph_read_buffer(graph, &f->far, far, (size_t)hw * hh * 8, &err) == HP_OK;
    if (!tap_ok(ran, "SAT at 4K runs%s%s", ran ? "" : ": ", ran ? "" : err.message)) {
        free(rgba), free(depth), free(half), free(far);
        return;
    }
    /* Box means of the GPU's own half-resolution colour, summed directly in double, at 20000 random
     * pixels; beside them what a float table of the same values would give. The GPU stores the mean as a
     * half float: exact means the nearest half, give or take the one rounding of the fp32 division before
     * it (one half ulp, 2^-11 relative). */
    double worst = 0, worst_float = 0;
    uint32_t checked = 0, boxes_small = 0, same_half = 0;
    double *row_prefix = NULL; /* a float SAT, built lazily for the comparison */
    float *fsat = malloc((size_t)hw * hh * 4);
    for (uint32_t y = 0; y < hh; y++) {
        float acc = 0;
        for (uint32_t x = 0; x < hw; x++) {
            acc += half[4 * ((size_t)y * hw + x)];
            fsat[(size_t)y * hw + x] = acc + (y ? fsat[(size_t)(y - 1) * hw + x] : 0.0f);
        }
    }
    (void)row_prefix;
    rng_state = 5;
    for (int i = 0; i < 20000; i++) {
        uint32_t px = (uint32_t)(rng_uniform() * hw), py = (uint32_t)(rng_uniform() * hh);
        float sc = half[4 * ((size_t)py * hw + px) + 3];
        int rb = (int)floorf(fminf(fabsf(sc), (float)s.max_coc_px) * (0.5f * (float)HP_SAT_BOX_SCALE) + 0.5f);
        int x0 = (int)px - rb < 0 ? 0 : (int)px - rb, x1 = (int)px + rb > (int)hw - 1 ? (int)hw - 1 : (int)px + rb;
        int y0 = (int)py - rb < 0 ? 0 : (int)py - rb, y1 = (int)py + rb > (int)hh - 1 ? (int)hh - 1 : (int)py + rb;
        double sum[3] = {0, 0, 0};
        for (int y = y0; y <= y1; y++)
            for (int x = x0; x <= x1; x++)
                for (int k = 0; k < 3; k++)
                    sum[k] += half[4 * ((size_t)y * hw + x) + k];
        double area = (double)(x1 - x0 + 1) * (y1 - y0 + 1);
        for (int k = 0; k < 3; k++) {
            double want = sum[k] / area, got = hp_half_to_float(far[4 * ((size_t)py * hw + px) + k]);
            worst = fmax(worst, fabs(got - want) / fmax(want, 1e-3));
            same_half += far[4 * ((size_t)py * hw + px) + k] == hp_float_to_half((float)want);
        }
        float S11 = fsat[(size_t)y1 * hw + x1], S01 = x0 ? fsat[(size_t)y1 * hw + x0 - 1] : 0;
        float S10 = y0 ? fsat[(size_t)(y0 - 1) * hw + x1] : 0, S00 = x0 && y0 ? fsat[(size_t)(y0 - 1) * hw + x0 - 1] : 0;
        double fmean = ((S11 - S01) - (S10 - S00)) / area;
        worst_float = fmax(worst_float, fabs(fmean - sum[0] / area) / fmax(sum[0] / area, 1e-3));
        boxes_small += rb <= 2;
        checked++;
    }
    tap_ok(worst <= 0x1p-11 && same_half >= 3 * checked * 99 / 100,
           "SAT at 4K (a %ux%u table): %u box means (%u of half-size <= 2) match direct sums in double: %.1f%% "
           "the same half float, the rest within %.2g relative (one half ulp; a float table of the same values: "
           "off by up to %.2g)",
           hw, hh, checked, boxes_small, 100.0 * same_half / (3.0 * checked), worst, worst_float);
    tap_ok(worst_float > 1e-3, "the test can tell: a float table misses by %.2g, over the 1e-3 it would need",
           worst_float);
    free(fsat);
    free(rgba), free(depth), free(half), free(far);
}

/* --- 5b. The SAT path against the gather on smooth depth ------------------------------------------ */

static void test_sat_vs_gather(void)
{
    /* A real frame behind the focus, its depth a smooth ramp (no occlusion edges, where the two differ
     * by design: the SAT has no near and far layers). A box and a disc of the same radius average
     * differently, so the bound is loose; what it catches is a SAT that blurs by the wrong radius, shifts
     * or loses light. */
    hp_image_info info;
    float *rgba = hp_image_decode_file(HP_TEST_DATA "/pmndrs_park.hdr", HP_LAYOUT_RGBA32F, NULL, &info, &err);
    if (!rgba) {
        tap_ok(false, "read pmndrs_park.hdr: %s", err.message);
        return;
    }
    uint32_t w = info.width, h = info.height;
    float *depth = malloc((size_t)w * h * 4);
    bool ok = true;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            depth[(size_t)y * w + x] = (float)(4.0 + 40.0 * x / w);
    hp_dof_settings s = default_settings();
    s.focal_length_mm = 135;
    s.f_stop = 1.4;
    s.max_coc_px = 16;
    /* Compared as a person sees them: the 8-bit images (the frame's sun, thousands of times brighter
     * than the rest, would otherwise decide a comparison of linear values alone). */
    uint8_t *out[3] = {malloc((size_t)w * h * 4), malloc((size_t)w * h * 4), malloc((size_t)w * h * 4)};
    for (int m = 0; ok && m < 3; m++) {
        s.method = m == 1 ? HP_DOF_SAT : HP_DOF_GATHER;
        hp_frame_params fp = frame_params(&s, m < 2);
        fp.params.exposure.mode = HP_EXPOSURE_AUTO;
        hp_frame_result res;
        ok = run(w, h, rgba, depth, &fp, &res);
        if (ok)
            memcpy(out[m], res.pixels, (size_t)w * h * 4);
    }
    double diff = 0, blur = 0;
    for (size_t i = 0; ok && i < (size_t)w * h; i++) {
        for (int k = 0; k < 3; k++) {
            diff += abs((int)out[0][4 * i + k] - (int)out[1][4 * i + k]);
            blur += abs((int)out[0][4 * i + k] - (int)out[2][4 * i + k]);
        }
    }
    diff /= (double)w * h * 3, blur /= (double)w * h * 3;
    tap_ok(ok && diff < 0.25 * blur && diff < 4,
           "smooth depth (far field, CoC 3-16 px): the SAT's 8-bit image is %.2f levels from the gather's on "
           "average, the gather's %.2f levels from the sharp frame",
           diff, blur);
    free(out[0]), free(out[1]), free(out[2]), free(rgba), free(depth);
}

/* --- 5c. The SAT with a firefly ---------------------------------------------------------------------- */

static void test_sat_firefly(void)
{
    /* One pixel a hundred trillion times brighter than the rest must not take the table's precision: the
     * fixed point follows 2^16 times the 99th percentile, the firefly is clipped to it. */
    uint32_t w = 64, h = 64;
    float *rgba = alloc_frame(w, h, 0.3f, 0.5f, 0.2f), *depth = alloc_depth(w, h, 1e10f);
    size_t c = (size_t)10 * w + 10;
    rgba[4 * c] = rgba[4 * c + 1] = rgba[4 * c + 2] = 1e14f;
    hp_dof_settings s = default_settings();
    s.method = HP_DOF_SAT;
    s.max_coc_px = 4;
    s.focal_length_mm = 200;
    hp_frame_params fp = frame_params(&s, true);
    fp.output_dof = true;
    hp_frame_result res;
    bool ran = run(w, h, rgba, depth, &fp, &res);
    double worst = 0;
    for (uint32_t y = 24; ran && y < h; y++)
        for (uint32_t x = 24; x < w; x++)
            for (int k = 0; k < 3; k++)
                worst = fmax(worst, fabs(res.dof_pixels[4 * ((size_t)y * w + x) + k] / rgba[4 * ((size_t)y * w + x) + k] - 1));
    tap_ok(ran && worst < 1e-3, "SAT with a 1e14 firefly: the flat frame away from it keeps its colour (worst %.2g)%s%s",
           worst, ran ? "" : ": ", ran ? "" : err.message);
    free(rgba), free(depth);
}

/* --- 6. The whole chain against the CPU reference ---------------------------------------------------- */

static void test_against_cpu(void)
{
    /* max_coc 40: kernels past HP_DOF_QUARTER_ABOVE gather from quarter resolution. */
    /* space: a frame in other primaries (issue 17), every DOF stage then working in Rec.709 after reading
     * it; saturated blues (0, 0, 1.2) then test the SAT's channel bound (hp_dof.h), which holds for Rec.709's
     * weights only. -1: Rec.709. out: output.colorspace, whose primaries every DOF stage then works in
     * (BT.2020's blue weighs 0.0593: the SAT's bound becomes 17, hp_dof.h). */
    /* blue_peak: the frame's brightest pixels are BT.2020's pure blue, of luminance 2^4 / 15, so that its blue
     * channel (17.99) passes 2^4 where 14 times the luminance (14.9) does not: with the bound of Rec.709 and
     * P3 (14) the SAT would clip it; BT.2020's (17) keeps it. */
    static const struct { uint32_t w, h; int method; bool bokeh; double max_coc; int space; int out; bool blue_peak; } cases[] = {
        {97, 61, HP_DOF_GATHER, true, 12, -1, 0, false}, {160, 90, HP_DOF_GATHER, false, 12, -1, 0, false},
        {160, 90, HP_DOF_SAT, true, 12, -1, 0, false}, {33, 17, HP_DOF_GATHER, true, 12, -1, 0, false},
        {200, 120, HP_DOF_GATHER, true, 40, -1, 0, false},
        {160, 90, HP_DOF_SAT, true, 12, HP_COLORSPACE_ACESCG, 0, false},
        {97, 61, HP_DOF_GATHER, true, 12, HP_COLORSPACE_ACES2065, 0, false},
        {97, 61, HP_DOF_GATHER, true, 12, -1, HP_OUTPUT_DISPLAY_P3, false},
        {160, 90, HP_DOF_SAT, true, 12, HP_COLORSPACE_ACESCG, HP_OUTPUT_REC2020, false},
        {160, 90, HP_DOF_SAT, false, 12, HP_COLORSPACE_REC2020, HP_OUTPUT_REC2020, true}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint32_t w = cases[c].w, h = cases[c].h;
        float *rgba = malloc((size_t)w * h * 16), *depth = malloc((size_t)w * h * 4);
        rng_state = 1000 + c;
        for (uint32_t y = 0; y < h; y++) {
            for (uint32_t x = 0; x < w; x++) {
                size_t i = (size_t)y * w + x;
                for (int k = 0; k < 3; k++)
                    rgba[4 * i + k] = (float)(0.05 + 0.5 * rng_uniform());
                rgba[4 * i + 3] = 1;
                if (rng_uniform() < 0.01 && !cases[c].blue_peak)
                    rgba[4 * i] = rgba[4 * i + 1] = rgba[4 * i + 2] = 40; /* highlights for bokeh */
                if (cases[c].blue_peak && x >= w - 40 && x < w - 16 && y >= 4 && y < 28)
                    rgba[4 * i] = rgba[4 * i + 1] = 0, rgba[4 * i + 2] = (float)(16.0 / 15.0 / 0.0593017);
                else if (cases[c].space >= 0 && rng_uniform() < 0.2)
                    rgba[4 * i] = rgba[4 * i + 1] = 0, rgba[4 * i + 2] = 1.2f;
                /* A near plane, a sloped middle and a far plane. */
                depth[i] = x < w / 4 ? 0.8f : x < w / 2 ? (float)(1.5 + 3.0 * y / h) : (y < h / 3 ? 1e10f : 30.0f);
                /* Depths of 0 (in focus by definition) and exactly the focus distance (CoC +0). */
                double u = rng_uniform();
                if (u < 0.05)
                    depth[i] = 0.0f;
                else if (u < 0.10)
                    depth[i] = 3.0f;
            }
        }
        rgba[4 * 5] = NAN; /* a hostile pixel: black, like the tone pass draws it */
        hp_dof_settings s = default_settings();
        s.method = cases[c].method;
        s.bokeh = cases[c].bokeh;
        s.focal_length_mm = 85;
        s.f_stop = 2;
        s.max_coc_px = cases[c].max_coc;
        s.blades = 7;
        s.rotation_deg = 10;
        s.squeeze = c == 0 ? 1.5 : 1;
        hp_err ce = {0};
        s.output = (hp_output_colorspace)cases[c].out;
        int in_space = cases[c].space >= 0 ? cases[c].space : HP_COLORSPACE_REC709;
        if (hp_input_color_make(hp_colorspace_chromaticities((hp_colorspace)in_space), s.output, &s.color, &ce) != HP_OK)
            tap_ok(false, "the colour space of case %zu: %s", c, ce.message);
        hp_frame_params fp = frame_params(&s, true);
        fp.params.color = s.color;
        fp.params.output.colorspace = s.output;
        if (s.output == HP_OUTPUT_REC2020) { /* 16-bit PNG only (params.c) */
            fp.params.output.format = HP_OUTPUT_PNG, fp.params.output.bit_depth = 16;
            /* the image itself is compared, not a PNG stream: the GPU's PNG stays out */
            fp.params.output.png_encoder = HP_PNG_ENCODER_CPU;
        }
        fp.output_dof = true;
        hp_frame_result res;
        bool ran = run(w, h, rgba, depth, &fp, &res);
        double *want = malloc((size_t)w * h * 4 * sizeof(double));
        hp_cpu_dof_result cr;
        bool cpu = hp_cpu_dof(rgba, HP_PIXEL_RGBA32F, w, h, depth, &s, 1.0, res.stats.max, want, &cr) == HP_OK;
        double worst = 0, mean = 0;
        size_t off = 0;
        for (size_t i = 0; ran && cpu && i < (size_t)w * h * 4; i++) {
            double got = res.dof_pixels[i];
            double e = fabs(got - want[i]) / fmax(fabs(want[i]), 0.05);
            worst = fmax(worst, e);
            mean += e;
            off += e > 1e-3;
        }
        mean /= (double)w * h * 4;
        /* The daemon's path composites inside the tone pass; output_dof runs the composite as a pass of its
         * own and tone-maps its image: the two must make the same image. With bokeh, each run sums the sprites'
         * light with float atomics (bokeh_splat.comp's atomicAdd), in an order that changes from run to run, so
         * the light of two runs may differ in its last bits and a sample by one code value (seen at 16 bits on
         * lavapipe, 1 sample of 57,600 in some runs): there one code is allowed in at most a thousandth of the
         * samples (an off-by-one over the image is a bug, not an order), elsewhere none. */
        uint32_t sample_bytes = fp.params.output.bit_depth / 8;
        size_t samples = (size_t)w * h * 4, img_bytes = samples * sample_bytes, differ = 0;
        int most = 0, allowed = s.bokeh ? 1 : 0;
        uint8_t *unfused = malloc(img_bytes);
        if (ran)
            memcpy(unfused, res.pixels, img_bytes);
        hp_frame_params fused = fp;
        fused.output_dof = false;
        hp_frame_result fres;
        bool fran = ran && run(w, h, rgba, depth, &fused, &fres);
        for (size_t i = 0; fran && i < samples; i++) {
            int a = sample_bytes == 2 ? ((const uint16_t *)unfused)[i] : unfused[i];
            int b = sample_bytes == 2 ? ((const uint16_t *)fres.pixels)[i] : ((const uint8_t *)fres.pixels)[i];
            differ += a != b;
            most = abs(a - b) > most ? abs(a - b) : most;
        }
        char space[64];
        snprintf(space, sizeof(space), "%s%s%s", hp_colorspace_name((hp_colorspace)in_space),
                 s.output ? " for " : "", s.output ? hp_param_find("output.colorspace")->choices[s.output] : "");
        tap_ok(fran && most <= allowed && differ <= samples / 1000,
               "%ux%u %s%s, %s: the tone pass with the composite fused in makes the same image as the composite "
               "pass then the tone pass (%zu of %zu samples differ, by %d code at most; %d allowed)",
               w, h, s.method == HP_DOF_SAT ? "sat" : "gather", s.bokeh ? " + bokeh" : "", space, differ, samples,
               most, allowed);
        free(unfused);
        /* Values agree to fp32 rounding except where a tap lands one pixel over (a position rounded from a
         * CoC computed in fp32 on one side and double on the other): allow 0.5% of values. */
        tap_ok(ran && cpu && mean < 1e-3 && off <= (size_t)w * h * 4 / 200 && cr.sprites_wanted == res.bokeh_wanted,
               "%ux%u %s%s, %s, max CoC %.0f: GPU against the CPU reference: mean relative error %.2g, %zu of %u "
               "values off by more than 1e-3 (worst %.2g); sprites %u / %u",
               w, h, s.method == HP_DOF_SAT ? "sat" : "gather", s.bokeh ? " + bokeh" : "", space, s.max_coc_px, mean, off,
               w * h * 4, worst,
               res.bokeh_wanted, cr.sprites_wanted);
        free(rgba), free(depth), free(want);
    }
}

/* --- 7. The sprite budget ---------------------------------------------------------------------------- */

static void test_budget(void)
{
    uint32_t w = 128, h = 128;
    float *rgba = alloc_frame(w, h, 0.01f, 0.01f, 0.01f), *depth = alloc_depth(w, h, 1e10f);
    for (int i = 0; i < 50; i++) {
        size_t p = (size_t)(8 + (i / 10) * 24) * w + 8 + (i % 10) * 12;
        rgba[4 * p] = rgba[4 * p + 1] = rgba[4 * p + 2] = 100;
    }
    hp_dof_settings s = default_settings();
    s.bokeh = true;
    s.max_sprites = 5;
    s.max_coc_px = 6;
    s.focal_length_mm = 200;
    hp_frame_params fp = frame_params(&s, true);
    fp.output_dof = true;
    hp_frame_result res;
    bool ran = run(w, h, rgba, depth, &fp, &res);
    double in = 0, out = 0;
    for (size_t i = 0; ran && i < (size_t)w * h; i++)
        in += rgba[4 * i], out += res.dof_pixels[4 * i];
    tap_ok(ran && res.bokeh_wanted == 50 && res.bokeh_drawn == 5 && fabs(out / in - 1) < 0.05,
           "sprite budget 5 with 50 highlights: %u wanted, %u drawn, the rest blurred by the gather (energy %.3f of "
           "the input)",
           res.bokeh_wanted, res.bokeh_drawn, out / in);
    s.max_sprites = 4096;
    fp = frame_params(&s, true);
    ran = ran && run(w, h, rgba, depth, &fp, &res);
    tap_ok(ran && res.bokeh_wanted == 50 && res.bokeh_drawn == 50,
           "the counter resets between frames: the next frame draws all 50 (%u)", res.bokeh_drawn);
    fp.dof = true;
    hp_frame_desc desc = {.width = w, .height = h, .format = HP_PIXEL_RGBA32F};
    void *staging;
    bool refused = hp_frame_graph_begin(graph, &desc, &staging, &err) == HP_OK &&
                   hp_frame_graph_run(graph, &fp, &res, &err) == HP_ERR_UNUSABLE && !strcmp(err.field, "depth");
    tap_ok(refused, "DOF without a depth is refused, naming the depth: %s", err.message);
    free(rgba), free(depth);
}

/* --- 8. Frames in flight ------------------------------------------------------------------------------ */

static void test_in_flight(void)
{
    /* Two frames submitted back to back (one with depth of field, one without, different sizes of
     * content) and waited for in order give the images each gives alone; a third begin while both are in
     * flight is refused. */
    uint32_t w = 96, h = 64;
    float *a = alloc_frame(w, h, 0.2f, 0.3f, 0.4f), *b = alloc_frame(w, h, 2.0f, 0.5f, 0.1f);
    float *depth = malloc((size_t)w * h * 4);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        a[4 * i] = (float)(i % 7) * 0.1f;
        depth[i] = (float)(0.6 + 0.1 * (double)(i % w));
    }
    hp_dof_settings s = default_settings();
    s.bokeh = true;
    hp_frame_params pa = frame_params(&s, true), pb = frame_params(&s, false);
    hp_frame_result ra, rb;
    size_t bytes = (size_t)w * h * 4;
    uint8_t *alone_a = malloc(bytes), *alone_b = malloc(bytes);
    bool ok = run(w, h, a, depth, &pa, &ra);
    if (ok)
        memcpy(alone_a, ra.pixels, bytes);
    ok = ok && run(w, h, b, NULL, &pb, &rb);
    if (ok)
        memcpy(alone_b, rb.pixels, bytes);

    hp_frame_desc desc = {.width = w, .height = h, .format = HP_PIXEL_RGBA32F};
    void *staging;
    float *dst;
    uint32_t ta = 0, tb = 0;
    ok = ok && hp_frame_graph_begin(graph, &desc, &staging, &err) == HP_OK;
    if (ok) {
        memcpy(staging, a, (size_t)w * h * 16);
        ok = hp_frame_graph_depth(graph, &dst, &err) == HP_OK;
    }
    if (ok) {
        memcpy(dst, depth, (size_t)w * h * 4);
        ok = hp_frame_graph_submit(graph, &pa, &ta, &err) == HP_OK;
    }
    ok = ok && hp_frame_graph_begin(graph, &desc, &staging, &err) == HP_OK;
    if (ok) {
        memcpy(staging, b, (size_t)w * h * 16);
        ok = hp_frame_graph_submit(graph, &pb, &tb, &err) == HP_OK;
    }
    hp_err third = {0};
    bool refused = ok && hp_frame_graph_begin(graph, &desc, &staging, &third) != HP_OK;
    ok = ok && hp_frame_graph_wait(graph, ta, &ra, &err) == HP_OK;
    bool same_a = ok && memcmp(ra.pixels, alone_a, bytes) == 0 && ra.dof_ran;
    ok = ok && hp_frame_graph_wait(graph, tb, &rb, &err) == HP_OK;
    bool same_b = ok && memcmp(rb.pixels, alone_b, bytes) == 0 && !rb.dof_ran;
    tap_ok(ok && same_a && same_b && refused && ta != tb,
           "two frames in flight (one with depth of field, one without) give the images each gives alone; a "
           "third begin is refused (%s)%s%s",
           third.message, ok ? "" : ": ", ok ? "" : err.message);
    free(a), free(b), free(depth), free(alone_a), free(alone_b);
}

int main(void)
{
    int bail = gpu_test_open(&gpu, &graph, &err);
    if (bail)
        return bail;
    test_oracles();
    test_point();
    test_identity();
    test_two_planes(128);
    test_two_planes(120);
    test_against_cpu();
    test_budget();
    test_in_flight();
    test_sat_vs_gather();
    test_sat_firefly();
    test_sat_exact();
    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    gpu_test_validation_clean();
    return tap_done();
}

/* CPU reference of the tone stages, in double precision (pipeline/cpu_reference.h). Mirrors
 * shaders/exposure.comp, shaders/tone.glsl, shaders/tonemap.comp and shaders/blur.comp step for step;
 * the constants come from hp_shared.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hp_shared.h"
#include "pipeline/cpu_reference.h"

static void mat_mul(const double m[3][3], const double v[3], double out[3])
{
    double r[3];
    for (int i = 0; i < 3; i++)
        r[i] = m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2];
    memcpy(out, r, sizeof(r));
}

static const double RGB_TO_XYZ[3][3] = {{HP_RGB2XYZ_00, HP_RGB2XYZ_01, HP_RGB2XYZ_02},
                                        {HP_RGB2XYZ_10, HP_RGB2XYZ_11, HP_RGB2XYZ_12},
                                        {HP_RGB2XYZ_20, HP_RGB2XYZ_21, HP_RGB2XYZ_22}};
static const double XYZ_TO_RGB[3][3] = {{HP_XYZ2RGB_00, HP_XYZ2RGB_01, HP_XYZ2RGB_02},
                                        {HP_XYZ2RGB_10, HP_XYZ2RGB_11, HP_XYZ2RGB_12},
                                        {HP_XYZ2RGB_20, HP_XYZ2RGB_21, HP_XYZ2RGB_22}};

/* Rec.709's constant matrices for sRGB output (as before issue 17), else the working space's. */
void hp_cpu_rgb_to_Yxy_in(hp_output_colorspace output, const double rgb[3], double Yxy[3])
{
    double XYZ[3];
    mat_mul(output == HP_OUTPUT_SRGB ? RGB_TO_XYZ : hp_working_space_of(output)->to_xyz, rgb, XYZ);
    double S = XYZ[0] + XYZ[1] + XYZ[2];
    if (S > 0.0) {
        Yxy[0] = XYZ[1], Yxy[1] = XYZ[0] / S, Yxy[2] = XYZ[1] / S;
    } else {
        Yxy[0] = 0.0, Yxy[1] = HP_D65_X, Yxy[2] = HP_D65_Y;
    }
}

void hp_cpu_rgb_to_Yxy(const double rgb[3], double Yxy[3]) { hp_cpu_rgb_to_Yxy_in(HP_OUTPUT_SRGB, rgb, Yxy); }

void hp_cpu_Yxy_to_rgb_in(hp_output_colorspace output, const double Yxy[3], double rgb[3])
{
    if (!(Yxy[0] > 0.0) || !(Yxy[2] > 0.0)) {
        rgb[0] = rgb[1] = rgb[2] = 0.0;
        return;
    }
    double k = Yxy[0] / Yxy[2];
    double XYZ[3] = {Yxy[1] * k, Yxy[0], (1.0 - Yxy[1] - Yxy[2]) * k};
    mat_mul(output == HP_OUTPUT_SRGB ? XYZ_TO_RGB : hp_working_space_of(output)->from_xyz, XYZ, rgb);
}

void hp_cpu_Yxy_to_rgb(const double Yxy[3], double rgb[3]) { hp_cpu_Yxy_to_rgb_in(HP_OUTPUT_SRGB, Yxy, rgb); }

static double luminance_in(const double rgb[3], const double luma[3])
{
    return luma[0] * rgb[0] + luma[1] * rgb[1] + luma[2] * rgb[2];
}

/* A colour with a channel under 0 (outside the gamut of luma's space) pulled toward the grey of its own
 * luminance just enough to bring that channel to 0, luminance and hue kept; no luminance: black. In place
 * (input_color.glsl's fold; tone.glsl's khronos_neutral_in the same into Rec.709). */
static void fold_from_below(double v[3], const double luma[3])
{
    double Y = luminance_in(v, luma), low = fmin(v[0], fmin(v[1], v[2]));
    for (int i = 0; i < 3; i++) {
        if (low < 0.0)
            v[i] = Y > 0.0 ? Y + (v[i] - Y) * (Y / (Y - low)) : 0.0;
        v[i] = fmax(v[i], 0.0);
    }
}

static double luminance(const double rgb[3])
{
    return HP_LUMA_R * rgb[0] + HP_LUMA_G * rgb[1] + HP_LUMA_B * rgb[2];
}

/* --- Exposure (shaders/exposure.comp) ------------------------------------------------------------ */

static double bin_lower_edge(const hp_lum_stats *st, unsigned k)
{
    double range = st->hist_max_log2 - st->hist_min_log2;
    return exp2(st->hist_min_log2 + (double)((k ? k : 1) - 1) * range / 254.0);
}

void hp_cpu_exposure(const hp_lum_stats *st, const hp_params *p, hp_tone_state *ts)
{
    double C[256];
    double acc = 0.0;
    for (int i = 0; i < 256; i++)
        C[i] = acc += st->histogram[i];
    double total = C[255];
    unsigned p01 = 255, p99 = 255;
    for (int i = 255; i >= 0; i--) { /* the first bin whose cumulative count reaches p * total */
        double before = i ? C[i - 1] : 0.0;
        if (C[i] >= 0.01 * total && (i == 0 || before < 0.01 * total))
            p01 = (unsigned)i;
        if (C[i] >= 0.99 * total && (i == 0 || before < 0.99 * total))
            p99 = (unsigned)i;
    }
    double first = floor(total * p->exposure.low_percent / 100.0);
    double last = floor(total * p->exposure.high_percent / 100.0);
    double sum_n = 0.0, sum_ni = 0.0;
    for (int i = 1; i < 256; i++) {
        double n = fmin(fmax(C[i], first), last) - fmin(fmax(C[i - 1], first), last);
        sum_n += n;
        sum_ni += n * i;
    }
    bool any_pixel = st->finite_pixels > 0;
    double range = st->hist_max_log2 - st->hist_min_log2;
    double log_avg = st->log_average;
    double hist_mean = sum_n > 0.0 ? exp2((sum_ni / sum_n - 0.5) / 254.0 * range + st->hist_min_log2) : log_avg;

    memset(ts, 0, sizeof(*ts));
    ts->p01 = bin_lower_edge(st, p01);
    ts->p99 = bin_lower_edge(st, p99);
    double key = p->exposure.key;
    if (p->exposure.key_auto) {
        double l1 = log2(ts->p01), l99 = log2(ts->p99);
        key = any_pixel && l99 > l1 && log_avg > 0.0 ? 0.18 * exp2(2.0 * (2.0 * log2(log_avg) - l1 - l99) / (l99 - l1))
                                                    : 0.18;
        key = fmin(fmax(key, 0.001), 1.0);
    }
    double adaptation = p->exposure.mode == HP_EXPOSURE_HISTOGRAM ? hist_mean : log_avg;
    double scale;
    if (p->exposure.mode == HP_EXPOSURE_FIXED) {
        adaptation = p->exposure.adaptation;
        scale = adaptation > 0.0 ? key / adaptation : exp2(p->exposure.stops);
    } else {
        scale = any_pixel && adaptation > 0.0 ? key / adaptation : 1.0;
    }
    scale *= exp2(p->exposure.compensation_ev);

    ts->scale = scale;
    ts->key = key;
    ts->adaptation = adaptation;
    ts->exposed_max = scale * st->max;
    ts->exposed_log_average = scale * log_avg;
    ts->white = fmax(p->tonemap.white_point > 0.0 ? p->tonemap.white_point : ts->exposed_max, 1e-6);
    ts->hist_mean = hist_mean;
    /* Drago's L_wa and L_wmax: the frame's, or the shot's when the request gives them (exposed alike). */
    double lwa = fmax(p->tonemap.drago_scene_log_average > 0.0 ? scale * p->tonemap.drago_scene_log_average
                                                                : ts->exposed_log_average, 1e-20);
    double lsmax = fmax((p->tonemap.drago_scene_max > 0.0 ? scale * p->tonemap.drago_scene_max : ts->exposed_max) / lwa,
                        1e-6);
    ts->drago_inv_lwa = 1.0 / lwa;
    ts->drago_inv_lsmax = 1.0 / lsmax;
    ts->drago_norm = p->tonemap.drago_display_max * 0.01 / log10(1.0 + lsmax);
    ts->drago_bias_exp = log(p->tonemap.drago_bias) / log(0.5);
}

/* --- Curves (shaders/tone.glsl) --------------------------------------------------------------------- */

static double hable_partial(const hp_tonemap_params *t, double x)
{
    return ((x * (t->hable_a * x + t->hable_c * t->hable_b) + t->hable_d * t->hable_e) /
            (x * (t->hable_a * x + t->hable_b) + t->hable_d * t->hable_f)) -
           t->hable_e / t->hable_f;
}

static double smoothstep(double e0, double e1, double x)
{
    double t = fmin(fmax((x - e0) / (e1 - e0), 0.0), 1.0);
    return t * t * (3.0 - 2.0 * t);
}

double hp_cpu_curve_luminance(const hp_tonemap_params *t, const hp_tone_state *ts, double L)
{
    switch (t->op) {
    case HP_TONE_LINEAR:
        return L;
    case HP_TONE_REINHARD:
        return L / (1.0 + L);
    case HP_TONE_REINHARD_EXTENDED:
        return L * (1.0 + L / (ts->white * ts->white)) / (1.0 + L);
    case HP_TONE_DRAGO: {
        double Ls = L * ts->drago_inv_lwa;
        double ratio = Ls * ts->drago_inv_lsmax;
        return ts->drago_norm * log(1.0 + Ls) / log(2.0 + 8.0 * pow(ratio, ts->drago_bias_exp));
    }
    case HP_TONE_ACES_NARKOWICZ: {
        double x = L * t->aces_input_scale;
        return (x * (HP_NARKOWICZ_A * x + HP_NARKOWICZ_B)) / (x * (HP_NARKOWICZ_C * x + HP_NARKOWICZ_D) + HP_NARKOWICZ_E);
    }
    case HP_TONE_HABLE:
        return hable_partial(t, t->hable_exposure_bias * L) / hable_partial(t, t->hable_white);
    case HP_TONE_LOTTES: {
        double b, c;
        hp_lottes_constants(t, &b, &c);
        double xa = pow(L, t->lottes_contrast);
        return xa / (pow(xa, t->lottes_shoulder) * b + c);
    }
    case HP_TONE_UCHIMURA: {
        double P = t->uchimura_max_brightness, a = t->uchimura_contrast, m = t->uchimura_linear_start;
        double l = t->uchimura_linear_length, c = t->uchimura_black_tightness, b = t->uchimura_black_offset;
        double l0 = (P - m) * l / a, S0 = m + l0, S1 = m + a * l0, C2 = a * P / (P - S1), CP = -C2 / P;
        double x = L;
        double w0 = 1.0 - smoothstep(0.0, m, x);
        double w2 = x >= m + l0 ? 1.0 : 0.0;
        double w1 = 1.0 - w0 - w2;
        double T = m * pow(x / m, c) + b;
        double Lin = m + a * (x - m);
        double S = P - (P - S1) * exp(CP * (x - S0));
        return T * w0 + Lin * w1 + S * w2;
    }
    default:
        return L;
    }
}

static const double ACES_IN[3][3] = {{HP_ACES_IN_00, HP_ACES_IN_01, HP_ACES_IN_02},
                                     {HP_ACES_IN_10, HP_ACES_IN_11, HP_ACES_IN_12},
                                     {HP_ACES_IN_20, HP_ACES_IN_21, HP_ACES_IN_22}};
static const double ACES_OUT[3][3] = {{HP_ACES_OUT_00, HP_ACES_OUT_01, HP_ACES_OUT_02},
                                      {HP_ACES_OUT_10, HP_ACES_OUT_11, HP_ACES_OUT_12},
                                      {HP_ACES_OUT_20, HP_ACES_OUT_21, HP_ACES_OUT_22}};
static const double REC709_TO_2020[3][3] = {{HP_709_TO_2020_00, HP_709_TO_2020_01, HP_709_TO_2020_02},
                                            {HP_709_TO_2020_10, HP_709_TO_2020_11, HP_709_TO_2020_12},
                                            {HP_709_TO_2020_20, HP_709_TO_2020_21, HP_709_TO_2020_22}};
static const double REC2020_TO_709[3][3] = {{HP_2020_TO_709_00, HP_2020_TO_709_01, HP_2020_TO_709_02},
                                            {HP_2020_TO_709_10, HP_2020_TO_709_11, HP_2020_TO_709_12},
                                            {HP_2020_TO_709_20, HP_2020_TO_709_21, HP_2020_TO_709_22}};
static const double AGX_INSET[3][3] = {{HP_AGX_INSET_00, HP_AGX_INSET_01, HP_AGX_INSET_02},
                                       {HP_AGX_INSET_10, HP_AGX_INSET_11, HP_AGX_INSET_12},
                                       {HP_AGX_INSET_20, HP_AGX_INSET_21, HP_AGX_INSET_22}};
static const double AGX_OUTSET[3][3] = {{HP_AGX_OUTSET_00, HP_AGX_OUTSET_01, HP_AGX_OUTSET_02},
                                        {HP_AGX_OUTSET_10, HP_AGX_OUTSET_11, HP_AGX_OUTSET_12},
                                        {HP_AGX_OUTSET_20, HP_AGX_OUTSET_21, HP_AGX_OUTSET_22}};

static double clamp01(double v) { return fmin(fmax(v, 0.0), 1.0); }

double hp_cpu_agx_sigmoid(double t)
{
    double s = t < HP_AGX_PIVOT_X ? HP_AGX_TOE_SCALE : HP_AGX_SHOULDER_SCALE;
    double x = HP_AGX_SLOPE * (t - HP_AGX_PIVOT_X) / s;
    double e = x / pow(1.0 + pow(x, HP_AGX_POWER), 1.0 / HP_AGX_POWER);
    return s * e + HP_AGX_PIVOT_Y;
}

/* The palette's colour (Rec.709 display RGB) for luminance Y: its stop around middle grey, clamped to the
 * palette, blended between whole stops (hp_shared.h). */
static void false_color(double Y, double out[3])
{
    static const double ramp[3 * HP_FALSE_COLOR_STOPS] = {HP_FALSE_COLOR_RAMP};
    double s = log2(fmax(Y, 1e-30) / HP_FALSE_COLOR_GREY) - HP_FALSE_COLOR_MIN_STOPS;
    s = fmin(fmax(s, 0.0), HP_FALSE_COLOR_STOPS - 1);
    int i = (int)fmin(floor(s), HP_FALSE_COLOR_STOPS - 2);
    double t = s - i;
    for (int c = 0; c < 3; c++)
        out[c] = ramp[3 * i + c] + (ramp[3 * i + 3 + c] - ramp[3 * i + c]) * t;
}

void hp_cpu_curve_rgb(hp_tone_operator op, const double in[3], double out[3])
{
    double v[3];
    switch (op) {
    case HP_TONE_ACES_HILL:
        mat_mul(ACES_IN, in, v);
        for (int i = 0; i < 3; i++)
            v[i] = (v[i] * (v[i] + HP_ACES_FIT_A) - HP_ACES_FIT_B) /
                   (v[i] * (HP_ACES_FIT_C * v[i] + HP_ACES_FIT_D) + HP_ACES_FIT_E);
        mat_mul(ACES_OUT, v, out);
        for (int i = 0; i < 3; i++)
            out[i] = clamp01(out[i]);
        return;
    case HP_TONE_AGX:
        mat_mul(REC709_TO_2020, in, v);
        mat_mul(AGX_INSET, v, v);
        for (int i = 0; i < 3; i++) {
            double c = fmax(v[i], HP_AGX_FLOOR);
            double t = clamp01((log2(c) - HP_AGX_MIN_EV) / (HP_AGX_MAX_EV - HP_AGX_MIN_EV));
            v[i] = pow(fmax(hp_cpu_agx_sigmoid(t), 0.0), 2.4); /* the sigmoid's 0 can round below 0 */
        }
        mat_mul(AGX_OUTSET, v, v);
        mat_mul(REC2020_TO_709, v, out);
        for (int i = 0; i < 3; i++)
            out[i] = clamp01(out[i]);
        return;
    case HP_TONE_KHRONOS_NEUTRAL: {
        double c[3] = {in[0], in[1], in[2]};
        double x = fmin(c[0], fmin(c[1], c[2]));
        double offset = x < 2.0 * HP_NEUTRAL_F90 ? x - x * x / (4.0 * HP_NEUTRAL_F90) : HP_NEUTRAL_F90;
        for (int i = 0; i < 3; i++)
            c[i] -= offset;
        double peak = fmax(c[0], fmax(c[1], c[2]));
        if (peak < HP_NEUTRAL_KS) {
            memcpy(out, c, sizeof(c));
            return;
        }
        double d = 1.0 - HP_NEUTRAL_KS;
        double new_peak = 1.0 - d * d / (peak + d - HP_NEUTRAL_KS);
        double g = 1.0 - 1.0 / (HP_NEUTRAL_KD * (peak - new_peak) + 1.0);
        for (int i = 0; i < 3; i++)
            out[i] = c[i] * (new_peak / peak) * (1.0 - g) + new_peak * g;
        return;
    }
    case HP_TONE_FALSE_COLOR:
        false_color(luminance(in), out);
        return;
    default:
        memcpy(out, in, 3 * sizeof(double));
        return;
    }
}

void hp_cpu_curve_rgb_in(hp_tone_operator op, hp_output_colorspace output, const double in[3], double out[3])
{
    if (output == HP_OUTPUT_SRGB) {
        hp_cpu_curve_rgb(op, in, out);
        return;
    }
    /* tone.glsl's aces_hill_in and agx_in: the operator matrices composed with the working space's
     * (hp_working_space), the result clamped in the working space. */
    const hp_working_space *ws = hp_working_space_of(output);
    double v[3];
    switch (op) {
    case HP_TONE_ACES_HILL:
        mat_mul(ws->aces_in, in, v);
        for (int i = 0; i < 3; i++)
            v[i] = (v[i] * (v[i] + HP_ACES_FIT_A) - HP_ACES_FIT_B) /
                   (v[i] * (HP_ACES_FIT_C * v[i] + HP_ACES_FIT_D) + HP_ACES_FIT_E);
        mat_mul(ws->aces_out, v, out);
        break;
    case HP_TONE_AGX:
        mat_mul(ws->agx_in, in, v);
        for (int i = 0; i < 3; i++) {
            double c = fmax(v[i], HP_AGX_FLOOR);
            double t = clamp01((log2(c) - HP_AGX_MIN_EV) / (HP_AGX_MAX_EV - HP_AGX_MIN_EV));
            v[i] = pow(fmax(hp_cpu_agx_sigmoid(t), 0.0), 2.4);
        }
        mat_mul(ws->agx_out, v, out);
        break;
    case HP_TONE_KHRONOS_NEUTRAL: {
        /* tone.glsl's khronos_neutral_in: to Rec.709, into its gamut from below, the operator, back. */
        static const double rec709[3] = {HP_LUMA_R, HP_LUMA_G, HP_LUMA_B};
        double c[3];
        mat_mul(ws->to_rec709, in, v);
        fold_from_below(v, rec709);
        hp_cpu_curve_rgb(HP_TONE_KHRONOS_NEUTRAL, v, c);
        mat_mul(ws->from_rec709, c, out);
        return;
    }
    case HP_TONE_FALSE_COLOR: {
        /* The palette is a set of Rec.709 display colours, shown as the same colours in the wider space; the
         * stop is of the working space's luminance (the same luminance). */
        false_color(luminance_in(in, ws->luma), v);
        mat_mul(ws->from_rec709, v, out);
        return;
    }
    default:
        hp_cpu_curve_rgb(op, in, out);
        return;
    }
    for (int i = 0; i < 3; i++)
        out[i] = clamp01(out[i]);
}

double hp_cpu_kwon_gamma(double lan) { return HP_KWON_A + HP_KWON_B * log(lan + HP_KWON_C); }

static double srgb_encode(double v) { return v <= 0.0031308 ? 12.92 * v : 1.055 * pow(v, 1.0 / 2.4) - 0.055; }

/* Bit-identical to tone.glsl's dither_noise: integer hash, then float arithmetic. */
static uint32_t hash_lowbias32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

float hp_dither_noise(uint32_t x, uint32_t y)
{
    uint32_t h1 = hash_lowbias32((x * 0x9e3779b9u) ^ y);
    uint32_t h2 = hash_lowbias32(h1 ^ 0x68bc21ebu);
    float u1 = (float)(h1 >> 8) * (1.0f / 16777216.0f);
    float u2 = (float)(h2 >> 8) * (1.0f / 16777216.0f);
    return u1 + u2 - 1.0f;
}

/* --- One pixel (shaders/tonemap.comp) -------------------------------------------------------------- */

/* The working space's Y row: Rec.709's HP_LUMA_* for sRGB output (the shaders' constants), else its own. */
static const double *working_luma(hp_output_colorspace output)
{
    static const double rec709[3] = {HP_LUMA_R, HP_LUMA_G, HP_LUMA_B};
    return output == HP_OUTPUT_SRGB ? rec709 : hp_working_space_of(output)->luma;
}

/* To the working space and its gamut from below, luminance and hue kept (shaders/include/input_color.glsl). */
static void input_to_work(const hp_input_color *c, const double luma[3], const double in[3], double out[3])
{
    mat_mul(c->to_work, in, out);
    fold_from_below(out, luma);
}

bool hp_cpu_frame_from_rec709(const float *rgba, size_t n, hp_colorspace space, float *out)
{
    hp_input_color to709;
    hp_err err = {0};
    double m[3][3];
    if (hp_input_color_make(hp_colorspace_chromaticities(space), HP_OUTPUT_SRGB, &to709, &err) != HP_OK ||
        !hp_mat3_invert(to709.to_work, m))
        return false;
    for (size_t i = 0; i < n; i++) {
        const float *p = rgba + 4 * i;
        for (int r = 0; r < 3; r++)
            out[4 * i + r] = (float)(m[r][0] * p[0] + m[r][1] * p[1] + m[r][2] * p[2]);
        out[4 * i + 3] = p[3];
    }
    return true;
}

void hp_cpu_input_color(const hp_input_color *c, hp_output_colorspace output, float rgba[4])
{
    if (!c->convert || !isfinite(rgba[0]) || !isfinite(rgba[1]) || !isfinite(rgba[2]))
        return;
    double v[3];
    for (int i = 0; i < 3; i++)
        v[i] = rgba[i] > 0.0f ? rgba[i] : 0.0;
    input_to_work(c, working_luma(output), v, v);
    for (int i = 0; i < 3; i++)
        rgba[i] = (float)v[i];
}


void hp_cpu_tone_pixel(const float frame_rgba[4], const hp_tone_state *ts, const hp_params *p, double lan, double out[4],
                       double *lum_out)
{
    float rgba[4] = {frame_rgba[0], frame_rgba[1], frame_rgba[2], frame_rgba[3]};
    hp_cpu_input_color(&p->color, p->output.colorspace, rgba); /* as the GPU stages read the frame */
    const hp_output_colorspace output = p->output.colorspace;
    const double *luma = working_luma(output);
    bool excluded = !isfinite(rgba[0]) || !isfinite(rgba[1]) || !isfinite(rgba[2]);
    double rgb[3];
    for (int i = 0; i < 3; i++)
        rgb[i] = (rgba[i] > 0.0f ? (double)rgba[i] : 0.0) * ts->scale;

    double tm[3];
    if (hp_tone_operator_on_rgb(p->tonemap.op)) {
        hp_cpu_curve_rgb_in(p->tonemap.op, output, rgb, tm);
    } else {
        double Yxy[3];
        hp_cpu_rgb_to_Yxy_in(output, rgb, Yxy);
        Yxy[0] = clamp01(hp_cpu_curve_luminance(&p->tonemap, ts, Yxy[0]));
        hp_cpu_Yxy_to_rgb_in(output, Yxy, tm);
    }
    for (int i = 0; i < 3; i++)
        tm[i] = fmax(tm[i], 0.0);
    double lum = fmin(luminance_in(tm, luma), 1.0);
    double peak = fmax(tm[0], fmax(tm[1], tm[2]));
    if (peak > 1.0)
        for (int i = 0; i < 3; i++)
            tm[i] = lum + (tm[i] - lum) * ((1.0 - lum) / (peak - lum));
    if (excluded) {
        tm[0] = tm[1] = tm[2] = 0.0;
        lum = 0.0;
    }
    if (lum_out)
        *lum_out = lum;

    double v[3];
    switch (p->gamma.mode) {
    case HP_GAMMA_LOCAL:
    case HP_GAMMA_LOCAL_LUMINANCE: {
        double g = hp_cpu_kwon_gamma(lan >= 0.0 ? lan : lum);
        for (int i = 0; i < 3; i++) {
            if (p->gamma.mode == HP_GAMMA_LOCAL)
                v[i] = pow(tm[i], g);
            else
                v[i] = lum > 0.0 ? fmin(tm[i] * (pow(lum, g) / lum), 1.0) : 0.0;
        }
        break;
    }
    case HP_GAMMA_SRGB:
        for (int i = 0; i < 3; i++)
            v[i] = srgb_encode(tm[i]);
        break;
    default:
        memcpy(v, tm, sizeof(v));
        break;
    }
    memcpy(out, v, sizeof(v));
    out[3] = excluded || isnan(rgba[3]) ? 1.0 : clamp01(rgba[3]);
}

void hp_cpu_blur(const double *src, double *dst, uint32_t width, uint32_t height, uint32_t radius, bool vertical)
{
    double inv_two_sigma2 = 2.0 / ((double)radius * radius);
    int r = (int)radius;
    for (uint32_t y = 0; y < height; y++) {
        for (uint32_t x = 0; x < width; x++) {
            double sum = 0.0, wsum = 0.0;
            for (int k = -r; k <= r; k++) {
                double w = exp(-(double)(k * k) * inv_two_sigma2);
                int xx = (int)x, yy = (int)y;
                if (vertical)
                    yy = yy + k < 0 ? 0 : yy + k > (int)height - 1 ? (int)height - 1 : yy + k;
                else
                    xx = xx + k < 0 ? 0 : xx + k > (int)width - 1 ? (int)width - 1 : xx + k;
                sum += w * src[(size_t)yy * width + (size_t)xx];
                wsum += w;
            }
            dst[(size_t)y * width + x] = sum / wsum;
        }
    }
}

/* The blurred adaptation luminance of every pixel (gamma.radius > 0 with a local gamma mode), or NULL
 * in *lan when the pixel's own luminance is used. */
static hp_code local_adaptation(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                                const hp_params *p, const hp_tone_state *ts, double **lan_out)
{
    *lan_out = NULL;
    size_t n = (size_t)width * height;
    bool local = p->gamma.mode == HP_GAMMA_LOCAL || p->gamma.mode == HP_GAMMA_LOCAL_LUMINANCE;
    if (!local || p->gamma.radius == 0)
        return HP_OK;
    double *lan = malloc(n * sizeof(double));
    double *tmp = malloc(n * sizeof(double));
    if (!lan || !tmp) {
        free(lan);
        free(tmp);
        return HP_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        float rgba[4];
        double o[4];
        hp_cpu_load_pixel(pixels, format, i, rgba);
        hp_cpu_tone_pixel(rgba, ts, p, -1.0, o, &lan[i]);
    }
    hp_cpu_blur(lan, tmp, width, height, p->gamma.radius, false);
    hp_cpu_blur(tmp, lan, width, height, p->gamma.radius, true);
    free(tmp);
    *lan_out = lan;
    return HP_OK;
}

hp_code hp_cpu_render_frame(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                            const hp_params *p, hp_lum_stats *stats, hp_tone_state *ts, void *out)
{
    float luma[3];
    hp_input_color_luma(&p->color, p->output.colorspace, luma);
    hp_cpu_reduce_row(pixels, format, (uint64_t)width * height, p->analysis.histogram_min_log2,
                      p->analysis.histogram_max_log2, luma, stats);
    return hp_cpu_tone_frame(pixels, format, width, height, stats, p, ts, out);
}

hp_code hp_cpu_tone_frame(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                          const hp_lum_stats *stats, const hp_params *p, hp_tone_state *ts, void *out)
{
    hp_cpu_exposure(stats, p, ts);
    double *lan;
    hp_code rc = local_adaptation(pixels, format, width, height, p, ts, &lan);
    if (rc != HP_OK)
        return rc;
    bool sixteen = p->output.bit_depth > 8; /* 10 and 12 (AVIF) are written as 16 and reduced by the encoder */
    double levels = sixteen ? 65535.0 : 255.0;
    ts->translucent = false;
    for (uint32_t y = 0; y < height; y++) {
        for (uint32_t x = 0; x < width; x++) {
            size_t i = (size_t)y * width + x;
            float rgba[4];
            double o[4];
            hp_cpu_load_pixel(pixels, format, i, rgba);
            hp_cpu_tone_pixel(rgba, ts, p, lan ? lan[i] : -1.0, o, NULL);
            double noise = p->output.dither ? (double)hp_dither_noise(x, y) : 0.0;
            uint32_t q[4];
            for (int c = 0; c < 3; c++)
                q[c] = (uint32_t)fmin(fmax(floor(o[c] * levels + 0.5 + noise), 0.0), levels);
            q[3] = (uint32_t)floor(o[3] * levels + 0.5);
            ts->translucent = ts->translucent || q[3] < (uint32_t)levels;
            if (sixteen) {
                uint16_t *d = (uint16_t *)out + 4 * i;
                for (int c = 0; c < 4; c++)
                    d[c] = (uint16_t)q[c];
            } else {
                uint8_t *d = (uint8_t *)out + 4 * i;
                for (int c = 0; c < 4; c++)
                    d[c] = (uint8_t)q[c];
            }
        }
    }
    free(lan);
    return HP_OK;
}

static uint8_t quantize8(double v) { return (uint8_t)fmin(fmax(floor(v + 0.5), 0.0), 255.0); }

hp_code hp_cpu_tone_frame_yuv420(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                                 const hp_lum_stats *stats, const hp_params *p, bool alpha, hp_tone_state *ts,
                                 uint8_t *out)
{
    hp_cpu_exposure(stats, p, ts);
    double *lan;
    hp_code rc = local_adaptation(pixels, format, width, height, p, ts, &lan);
    if (rc != HP_OK)
        return rc;
    size_t n = (size_t)width * height;
    double *enc = malloc(n * 4 * sizeof(double)); /* display-encoded R'G'B' and alpha of every pixel */
    if (!enc) {
        free(lan);
        return HP_ERR_OUT_OF_MEMORY;
    }
    ts->translucent = false;
    for (size_t i = 0; i < n; i++) {
        float rgba[4];
        hp_cpu_load_pixel(pixels, format, i, rgba);
        hp_cpu_tone_pixel(rgba, ts, p, lan ? lan[i] : -1.0, enc + 4 * i, NULL);
        ts->translucent = ts->translucent || floor(enc[4 * i + 3] * 255.0 + 0.5) < 255.0;
    }
    const uint32_t stride = HP_YUV_Y_STRIDE(width), rows = HP_YUV_Y_ROWS(height);
    /* Every sample of the planes, padding included: past the frame the last column and row repeat. */
    for (uint32_t y = 0; y < rows; y++) {
        for (uint32_t x = 0; x < stride; x++) {
            uint32_t cx = x < width ? x : width - 1, cy = y < height ? y : height - 1;
            const double *o = enc + 4 * ((size_t)cy * width + cx);
            double noise = p->output.dither ? (double)hp_dither_noise(cx, cy) : 0.0;
            out[(size_t)y * stride + x] =
                quantize8(16.0 + HP_BT601_YR * o[0] + HP_BT601_YG * o[1] + HP_BT601_YB * o[2] + noise);
            if (alpha)
                out[HP_YUV_OFF_A(width, height) + (size_t)y * stride + x] = (uint8_t)floor(o[3] * 255.0 + 0.5);
        }
    }
    for (uint32_t y = 0; y < rows / 2; y++) {
        for (uint32_t x = 0; x < stride / 2; x++) {
            double m[3] = {0, 0, 0};
            for (uint32_t k = 0; k < 4; k++) {
                uint32_t px = 2 * x + (k & 1), py = 2 * y + (k >> 1);
                const double *o = enc + 4 * ((size_t)(py < height ? py : height - 1) * width + (px < width ? px : width - 1));
                for (int c = 0; c < 3; c++)
                    m[c] += 0.25 * o[c];
            }
            size_t at = (size_t)y * (stride / 2) + x;
            out[HP_YUV_OFF_U(width, height) + at] =
                quantize8(128.0 + HP_BT601_UR * m[0] + HP_BT601_UG * m[1] + HP_BT601_UB * m[2]);
            out[HP_YUV_OFF_V(width, height) + at] =
                quantize8(128.0 + HP_BT601_VR * m[0] + HP_BT601_VG * m[1] + HP_BT601_VB * m[2]);
        }
    }
    free(enc);
    free(lan);
    return HP_OK;
}

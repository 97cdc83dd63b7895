// The tone stages' shared GLSL: buffer layouts, colour conversions and every operator curve.
// pipeline/cpu_tone.c is the same in double precision; constants come from hp_shared.h for both.
#ifndef HP_TONE_GLSL
#define HP_TONE_GLSL

#include "hp_shared.h"

// Layout: hp_shared.h ("tone_params").
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer ToneParams {
    uint op;
    uint exposure_mode;
    uint key_auto;
    uint gamma_mode;
    uint dither;
    uint output_bits;
    uint lan_from_buffer;
    uint pad0;
    float key, low_percent, high_percent, stops, adaptation, compensation_ev, white_point;
    float drago_bias, drago_display_max, aces_input_scale;
    float hable_a, hable_b, hable_c, hable_d, hable_e, hable_f, hable_white, hable_bias;
    float lottes_a, lottes_d, lottes_b, lottes_c;
    float uch_p, uch_a, uch_m, uch_l, uch_c, uch_b, uch_l0, uch_s0, uch_s1, uch_c2, uch_cp;
    float drago_scene_log_average, drago_scene_max;
    uint convert_input; // 1: in_to_work takes the frame's RGB to the working RGB (issue 17)
    float pad1;
    float in_to_work[9]; // row-major
    float work_luma[3];  // HP_TONE_PARAMS_WORK_LUMA: the working space's Y row
    float pad2;
    float op_in[9], op_out[9]; // row-major, under HP_TONE_FLAG_WIDE (hp_shared.h)
};

// Layout: hp_shared.h ("tone_state").
layout(buffer_reference, std430, buffer_reference_align = 16) buffer ToneState {
    float scale;
    float key;
    float adaptation;
    float white;
    float exposed_max;
    float exposed_log_average;
    float p01;
    float p99;
    float hist_mean;
    float drago_norm;
    float drago_inv_lwa;
    float drago_inv_lsmax;
    float drago_bias_exp;
    uint translucent; // 1 when some output alpha is below its maximum (the tone pass sets it)
    float pad[2];
    uint convert_input;    // HP_TONE_STATE_CONVERT: tone_params' copies (input_color.glsl reads them)
    float in_to_work[9];
    float work_luma[3];    // HP_TONE_STATE_LUMA
    float sat_bound;       // HP_TONE_STATE_SAT_BOUND
    float pad2[2];
};

// Operators, in hp_tone_operator order (pipeline/params.h).
#define OP_LINEAR 0u
#define OP_REINHARD 1u
#define OP_REINHARD_EXTENDED 2u
#define OP_DRAGO 3u
#define OP_ACES_NARKOWICZ 4u
#define OP_HABLE 5u
#define OP_LOTTES 6u
#define OP_UCHIMURA 7u
#define OP_ACES_HILL 8u
#define OP_AGX 9u
#define OP_KHRONOS_NEUTRAL 10u
#define OP_FALSE_COLOR 11u

#define GAMMA_LOCAL 0u
#define GAMMA_LOCAL_LUMINANCE 1u
#define GAMMA_SRGB 2u
#define GAMMA_LINEAR 3u

// GLSL's mat3() takes columns: these are the transposes of the row-major tables, used as M * v.
const mat3 RGB_TO_XYZ = mat3(HP_RGB2XYZ_00, HP_RGB2XYZ_10, HP_RGB2XYZ_20,
                             HP_RGB2XYZ_01, HP_RGB2XYZ_11, HP_RGB2XYZ_21,
                             HP_RGB2XYZ_02, HP_RGB2XYZ_12, HP_RGB2XYZ_22);
const mat3 XYZ_TO_RGB = mat3(HP_XYZ2RGB_00, HP_XYZ2RGB_10, HP_XYZ2RGB_20,
                             HP_XYZ2RGB_01, HP_XYZ2RGB_11, HP_XYZ2RGB_21,
                             HP_XYZ2RGB_02, HP_XYZ2RGB_12, HP_XYZ2RGB_22);

// RGB -> (Y, x, y). Black takes the D65 chromaticity (DECISIONS.md 5).
vec3 rgb_to_Yxy(vec3 rgb)
{
    vec3 XYZ = RGB_TO_XYZ * rgb;
    float S = XYZ.x + XYZ.y + XYZ.z;
    return S > 0.0 ? vec3(XYZ.y, XYZ.x / S, XYZ.y / S) : vec3(0.0, HP_D65_X, HP_D65_Y);
}

// (Y, x, y) -> RGB; Y = 0 (or a degenerate y) gives black (algorithms.md 2.2).
vec3 Yxy_to_rgb(vec3 Yxy)
{
    if (!(Yxy.x > 0.0) || !(Yxy.z > 0.0))
        return vec3(0.0);
    float k = Yxy.x / Yxy.z;
    vec3 XYZ = vec3(Yxy.y * k, Yxy.x, (1.0 - Yxy.y - Yxy.z) * k);
    return XYZ_TO_RGB * XYZ;
}

// Rec.709's: sRGB output. The tone pass passes the working space's row to luminance_in() under
// HP_TONE_FLAG_WIDE.
float luminance(vec3 rgb)
{
    return dot(rgb, vec3(HP_LUMA_R, HP_LUMA_G, HP_LUMA_B));
}

float luminance_in(vec3 rgb, vec3 luma)
{
    return dot(rgb, luma);
}

// A row-major 3x3 of tone_params as GLSL's column-major mat3.
mat3 row_major3(float m0, float m1, float m2, float m3, float m4, float m5, float m6, float m7, float m8)
{
    return mat3(m0, m3, m6, m1, m4, m7, m2, m5, m8);
}

// --- Curves on luminance (algorithms.md 3.1-3.8), L is the exposed luminance -----------------------

float hable_partial(ToneParams tp, float x)
{
    // U(x) = ((x(Ax + CB) + DE) / (x(Ax + B) + DF)) - E/F (Hable, "Filmic Tonemapping Operators")
    return ((x * (tp.hable_a * x + tp.hable_c * tp.hable_b) + tp.hable_d * tp.hable_e) /
            (x * (tp.hable_a * x + tp.hable_b) + tp.hable_d * tp.hable_f)) -
           tp.hable_e / tp.hable_f;
}

float curve_luminance(ToneParams tp, ToneState ts, float L)
{
    switch (tp.op) {
    case OP_LINEAR:
        return L;
    case OP_REINHARD: // Reinhard et al. 2002 eq. 3
        return L / (1.0 + L);
    case OP_REINHARD_EXTENDED: { // eq. 4, L_white in exposed units
        float w = ts.white;
        return L * (1.0 + L / (w * w)) / (1.0 + L);
    }
    case OP_DRAGO: { // Drago et al. 2003, the pfstools form (DECISIONS.md 6)
        float Ls = L * ts.drago_inv_lwa;
        float ratio = Ls * ts.drago_inv_lsmax;
        return ts.drago_norm * log(1.0 + Ls) / log(2.0 + 8.0 * pow(ratio, ts.drago_bias_exp));
    }
    case OP_ACES_NARKOWICZ: { // Narkowicz 2016
        float x = L * tp.aces_input_scale;
        return (x * (HP_NARKOWICZ_A * x + HP_NARKOWICZ_B)) / (x * (HP_NARKOWICZ_C * x + HP_NARKOWICZ_D) + HP_NARKOWICZ_E);
    }
    case OP_HABLE: // U(bias x) / U(W)
        return hable_partial(tp, tp.hable_bias * L) / hable_partial(tp, tp.hable_white);
    case OP_LOTTES: { // Lottes 2016: x^a / (x^(a d) b + c)
        float xa = pow(L, tp.lottes_a);
        return xa / (pow(xa, tp.lottes_d) * tp.lottes_b + tp.lottes_c);
    }
    case OP_UCHIMURA: { // Uchimura 2017, with step() for the shoulder weight (algorithms.md 3.8)
        float x = L;
        float w0 = 1.0 - smoothstep(0.0, tp.uch_m, x);
        float w2 = x >= tp.uch_m + tp.uch_l0 ? 1.0 : 0.0;
        float w1 = 1.0 - w0 - w2;
        float T = tp.uch_m * pow(x / tp.uch_m, tp.uch_c) + tp.uch_b;
        float Lin = tp.uch_m + tp.uch_a * (x - tp.uch_m);
        float S = tp.uch_p - (tp.uch_p - tp.uch_s1) * exp(tp.uch_cp * (x - tp.uch_s0));
        return T * w0 + Lin * w1 + S * w2;
    }
    }
    return L;
}

// --- Curves on RGB (algorithms.md 3.5, 3.9, 3.10) ------------------------------------------------------

const mat3 ACES_IN = mat3(HP_ACES_IN_00, HP_ACES_IN_10, HP_ACES_IN_20,
                          HP_ACES_IN_01, HP_ACES_IN_11, HP_ACES_IN_21,
                          HP_ACES_IN_02, HP_ACES_IN_12, HP_ACES_IN_22);
const mat3 ACES_OUT = mat3(HP_ACES_OUT_00, HP_ACES_OUT_10, HP_ACES_OUT_20,
                           HP_ACES_OUT_01, HP_ACES_OUT_11, HP_ACES_OUT_21,
                           HP_ACES_OUT_02, HP_ACES_OUT_12, HP_ACES_OUT_22);
const mat3 REC709_TO_2020 = mat3(HP_709_TO_2020_00, HP_709_TO_2020_10, HP_709_TO_2020_20,
                                 HP_709_TO_2020_01, HP_709_TO_2020_11, HP_709_TO_2020_21,
                                 HP_709_TO_2020_02, HP_709_TO_2020_12, HP_709_TO_2020_22);
const mat3 REC2020_TO_709 = mat3(HP_2020_TO_709_00, HP_2020_TO_709_10, HP_2020_TO_709_20,
                                 HP_2020_TO_709_01, HP_2020_TO_709_11, HP_2020_TO_709_21,
                                 HP_2020_TO_709_02, HP_2020_TO_709_12, HP_2020_TO_709_22);
const mat3 AGX_INSET = mat3(HP_AGX_INSET_00, HP_AGX_INSET_10, HP_AGX_INSET_20,
                            HP_AGX_INSET_01, HP_AGX_INSET_11, HP_AGX_INSET_21,
                            HP_AGX_INSET_02, HP_AGX_INSET_12, HP_AGX_INSET_22);
const mat3 AGX_OUTSET = mat3(HP_AGX_OUTSET_00, HP_AGX_OUTSET_10, HP_AGX_OUTSET_20,
                             HP_AGX_OUTSET_01, HP_AGX_OUTSET_11, HP_AGX_OUTSET_21,
                             HP_AGX_OUTSET_02, HP_AGX_OUTSET_12, HP_AGX_OUTSET_22);

vec3 aces_hill(vec3 rgb)
{
    vec3 v = ACES_IN * rgb;
    vec3 a = v * (v + HP_ACES_FIT_A) - HP_ACES_FIT_B;
    vec3 b = v * (HP_ACES_FIT_C * v + HP_ACES_FIT_D) + HP_ACES_FIT_E;
    return clamp(ACES_OUT * (a / b), 0.0, 1.0);
}

// In a wide working space (HP_TONE_FLAG_WIDE): m_in is ACES_IN . (working -> Rec.709) and m_out is
// (Rec.709 -> working) . ACES_OUT, composed in double on the host (pipeline/tone.c), so the fit sees the
// Rec.709 it was made for and its result is clamped to the display's own gamut.
vec3 aces_hill_in(vec3 rgb, mat3 m_in, mat3 m_out)
{
    vec3 v = m_in * rgb;
    vec3 a = v * (v + HP_ACES_FIT_A) - HP_ACES_FIT_B;
    vec3 b = v * (HP_ACES_FIT_C * v + HP_ACES_FIT_D) + HP_ACES_FIT_E;
    return clamp(m_out * (a / b), 0.0, 1.0);
}

// False colour (hp_shared.h): the stop of Y around middle grey, clamped to the palette, blended between
// its whole stops.
const float FALSE_COLOR_RAMP[3 * HP_FALSE_COLOR_STOPS] = float[3 * HP_FALSE_COLOR_STOPS](HP_FALSE_COLOR_RAMP);

vec3 false_color(float Y)
{
    float s = log2(max(Y, 1e-30) / HP_FALSE_COLOR_GREY) - HP_FALSE_COLOR_MIN_STOPS;
    s = clamp(s, 0.0, float(HP_FALSE_COLOR_STOPS - 1));
    uint i = min(uint(s), uint(HP_FALSE_COLOR_STOPS - 2));
    float t = s - float(i);
    vec3 a = vec3(FALSE_COLOR_RAMP[3 * i], FALSE_COLOR_RAMP[3 * i + 1], FALSE_COLOR_RAMP[3 * i + 2]);
    vec3 b = vec3(FALSE_COLOR_RAMP[3 * i + 3], FALSE_COLOR_RAMP[3 * i + 4], FALSE_COLOR_RAMP[3 * i + 5]);
    return mix(a, b, t);
}

// Jed Smith's tunable sigmoid as ported by Troy Sobotka (EaryChow/AgX_LUT_Gen sigmoid.py).
float agx_sigmoid(float t)
{
    float s = t < HP_AGX_PIVOT_X ? HP_AGX_TOE_SCALE : HP_AGX_SHOULDER_SCALE;
    float x = HP_AGX_SLOPE * (t - HP_AGX_PIVOT_X) / s; // >= 0 on both sides
    float e = x / pow(1.0 + pow(x, HP_AGX_POWER), 1.0 / HP_AGX_POWER);
    return s * e + HP_AGX_PIVOT_Y;
}

vec3 agx(vec3 rgb)
{
    vec3 c = AGX_INSET * (REC709_TO_2020 * rgb);
    c = max(c, vec3(HP_AGX_FLOOR));
    vec3 t = clamp((log2(c) - HP_AGX_MIN_EV) / (HP_AGX_MAX_EV - HP_AGX_MIN_EV), 0.0, 1.0);
    vec3 s = vec3(agx_sigmoid(t.r), agx_sigmoid(t.g), agx_sigmoid(t.b));
    vec3 lin = pow(max(s, vec3(0.0)), vec3(2.4)); // the sigmoid's 0 can round below 0: pow() of it is undefined
    return clamp(REC2020_TO_709 * (AGX_OUTSET * lin), 0.0, 1.0);
}

// In a wide working space: m_in is AGX_INSET . (working -> BT.2020), m_out is (BT.2020 -> working) .
// AGX_OUTSET (pipeline/tone.c): AgX's own BT.2020 working space, its result clamped in the display's.
vec3 agx_in(vec3 rgb, mat3 m_in, mat3 m_out)
{
    vec3 c = max(m_in * rgb, vec3(HP_AGX_FLOOR));
    vec3 t = clamp((log2(c) - HP_AGX_MIN_EV) / (HP_AGX_MAX_EV - HP_AGX_MIN_EV), 0.0, 1.0);
    vec3 s = vec3(agx_sigmoid(t.r), agx_sigmoid(t.g), agx_sigmoid(t.b));
    vec3 lin = pow(max(s, vec3(0.0)), vec3(2.4));
    return clamp(m_out * lin, 0.0, 1.0);
}

vec3 khronos_neutral(vec3 c)
{
    float x = min(c.r, min(c.g, c.b));
    float offset = x < 2.0 * HP_NEUTRAL_F90 ? x - (x * x) / (4.0 * HP_NEUTRAL_F90) : HP_NEUTRAL_F90;
    c -= offset;
    float peak = max(c.r, max(c.g, c.b));
    if (peak < HP_NEUTRAL_KS)
        return c;
    float d = 1.0 - HP_NEUTRAL_KS;
    float new_peak = 1.0 - d * d / (peak + d - HP_NEUTRAL_KS);
    c *= new_peak / peak;
    float g = 1.0 - 1.0 / (HP_NEUTRAL_KD * (peak - new_peak) + 1.0);
    return mix(c, vec3(new_peak), g);
}

// In a wide working space: Khronos PBR Neutral is defined on non-negative linear Rec.709 (algorithms.md
// 3.10; its toe offset is min(R, G, B), which depends on the primaries), so the colour goes to Rec.709
// (m_in), into its gamut from below as input_color.glsl does (luminance and hue kept), through the
// operator, and back (m_out): the same display colours as for sRGB output.
vec3 khronos_neutral_in(vec3 rgb, mat3 m_in, mat3 m_out)
{
    vec3 v = m_in * rgb;
    float Y = dot(v, vec3(HP_LUMA_R, HP_LUMA_G, HP_LUMA_B));
    float low = min(v.r, min(v.g, v.b));
    if (low < 0.0)
        v = Y > 0.0 ? Y + (v - Y) * (Y / (Y - low)) : vec3(0.0);
    return m_out * khronos_neutral(max(v, vec3(0.0)));
}

// --- Display ---------------------------------------------------------------------------------------

// Kwon et al.'s exponent for an adaptation luminance in [0, 1] (DECISIONS.md 7).
float kwon_gamma(float lan)
{
    return HP_KWON_A + HP_KWON_B * log(lan + HP_KWON_C);
}

// IEC 61966-2-1 sRGB encoding.
vec3 srgb_encode(vec3 v)
{
    vec3 lo = 12.92 * v;
    vec3 hi = 1.055 * pow(v, vec3(1.0 / 2.4)) - 0.055;
    return mix(hi, lo, lessThanEqual(v, vec3(0.0031308)));
}

// Dither noise: triangular on (-1, 1) from an integer hash of the pixel (bit-identical in
// pipeline/cpu_tone.c). Two uniforms from Chris Wellons' lowbias32 hash, 24 bits each.
uint hash_lowbias32(uint x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

float dither_noise(uint x, uint y)
{
    uint h1 = hash_lowbias32(x * 0x9e3779b9u ^ y);
    uint h2 = hash_lowbias32(h1 ^ 0x68bc21ebu);
    float u1 = float(h1 >> 8) * (1.0 / 16777216.0);
    float u2 = float(h2 >> 8) * (1.0 / 16777216.0);
    return u1 + u2 - 1.0;
}

#endif

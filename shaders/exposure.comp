#version 460
// Exposure: one workgroup turns the luminance statistics and the request's exposure parameters into
// the numbers the tone stage needs (tone_state): the exposure scale, the key, the adaptation
// luminance, the white point, Drago's normalisers, and the 1st/99th percentiles.
//   auto       scale = key / log-average                         (Reinhard et al. 2002, eq. 2)
//   histogram  scale = key / percentile-clipped histogram mean    (algorithms.md 1.4, bin-centre inverse)
//   fixed      scale = key / adaptation, or 2^stops when no adaptation luminance is given
//   then       scale *= 2^compensation_ev
// key "auto": 0.18 * 4^((2 log2 Lavg - log2 L1 - log2 L99) / (log2 L99 - log2 L1)), L1 and L99 the 1st
// and 99th percentiles (algorithms.md 1.5, after Reinhard's "Parameter estimation", via banterle).
// pipeline/cpu_tone.c hp_cpu_exposure() is the same in double.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "tone.glsl"

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer LumStats {
    uint finite_count;
    uint nonfinite_count;
    float min_y;
    float max_y;
    float sum_log_hi;
    float sum_log_lo;
    float sum_y_hi;
    float sum_y_lo;
    float log_average;
    float mean_y;
    float hist_min_log2;
    float hist_max_log2;
    uint hist[HP_HIST_BINS];
};

layout(push_constant, std430) uniform Push {
    uvec2 stats;
    uvec2 params;
    uvec2 state;
} pc;

shared uint s_scan[HP_HIST_BINS];
shared float s_sub[HP_HIST_BINS / 8u];
shared float s_sub2[HP_HIST_BINS / 8u];
shared uint s_p01, s_p99;

// Lower edge of bin k in luminance (bin 0 has none: the range's bottom stands in for it).
float bin_lower_edge(LumStats st, uint k)
{
    float range = st.hist_max_log2 - st.hist_min_log2;
    return exp2(st.hist_min_log2 + float(max(k, 1u) - 1u) * range / 254.0);
}

void main()
{
    LumStats st = LumStats(pc.stats);
    ToneParams tp = ToneParams(pc.params);
    ToneState ts = ToneState(pc.state);
    uint i = gl_LocalInvocationIndex;

    // Inclusive prefix sum of the histogram: counts fit 32 bits (at most 2^28 pixels).
    uint count = st.hist[i];
    s_scan[i] = count;
    barrier();
    for (uint off = 1u; off < HP_HIST_BINS; off <<= 1u) {
        uint v = i >= off ? s_scan[i - off] : 0u;
        barrier();
        s_scan[i] += v;
        barrier();
    }
    uint c = s_scan[i];
    uint before = i > 0u ? s_scan[i - 1u] : 0u;
    float total = float(s_scan[HP_HIST_BINS - 1u]);

    // Percentiles: the first bin whose cumulative count reaches p * total.
    if (i == 0u) {
        s_p01 = HP_HIST_BINS - 1u;
        s_p99 = HP_HIST_BINS - 1u;
    }
    barrier();
    if (float(c) >= 0.01 * total && (i == 0u || float(before) < 0.01 * total))
        s_p01 = i;
    if (float(c) >= 0.99 * total && (i == 0u || float(before) < 0.99 * total))
        s_p99 = i;

    // Percentile-clipped mean bin (Bevy's scheme, algorithms.md 1.4 step 4), over bins 1..255.
    float first = floor(total * tp.low_percent / 100.0);
    float last = floor(total * tp.high_percent / 100.0);
    float n = i >= 1u ? clamp(float(c), first, last) - clamp(float(before), first, last) : 0.0;
    float w = subgroupAdd(n);
    float wi = subgroupAdd(n * float(i));
    if (subgroupElect()) {
        s_sub[gl_SubgroupID] = w;
        s_sub2[gl_SubgroupID] = wi;
    }
    barrier();
    if (i != 0u)
        return;

    float sum_n = 0.0, sum_ni = 0.0;
    for (uint k = 0u; k < gl_NumSubgroups; k++) {
        sum_n += s_sub[k];
        sum_ni += s_sub2[k];
    }
    bool any_pixel = st.finite_count > 0u;
    float range = st.hist_max_log2 - st.hist_min_log2;
    float log_avg = st.log_average;
    float hist_mean = sum_n > 0.0 ? exp2((sum_ni / sum_n - 0.5) / 254.0 * range + st.hist_min_log2) : log_avg;
    float p01 = bin_lower_edge(st, s_p01);
    float p99 = bin_lower_edge(st, s_p99);

    float key = tp.key;
    if (tp.key_auto != 0u) {
        float l1 = log2(p01), l99 = log2(p99);
        key = any_pixel && l99 > l1 && log_avg > 0.0
                  ? 0.18 * exp2(2.0 * (2.0 * log2(log_avg) - l1 - l99) / (l99 - l1))
                  : 0.18;
        key = clamp(key, 0.001, 1.0);
    }
    float adaptation = tp.exposure_mode == 1u ? hist_mean : log_avg;
    float scale;
    if (tp.exposure_mode == 2u) {
        adaptation = tp.adaptation;
        scale = tp.adaptation > 0.0 ? key / tp.adaptation : exp2(tp.stops);
    } else {
        scale = any_pixel && adaptation > 0.0 ? key / adaptation : 1.0;
    }
    scale *= exp2(tp.compensation_ev);

    float exposed_max = scale * st.max_y;
    float exposed_log_avg = scale * log_avg;
    ts.scale = scale;
    ts.key = key;
    ts.adaptation = adaptation;
    // Reinhard's L_white: given, or the exposed maximum (pfstools' default); never 0.
    ts.white = max(tp.white_point > 0.0 ? tp.white_point : exposed_max, 1e-6);
    ts.exposed_max = exposed_max;
    ts.exposed_log_average = exposed_log_avg;
    ts.p01 = p01;
    ts.p99 = p99;
    ts.hist_mean = hist_mean;
    // Drago: L_s = L / L_wa, L_smax = L_max / L_wa, norm = (L_dmax / 100) / log10(1 + L_smax); L_wa and L_max
    // the frame's, or the shot's when the request gives them (exposed like the frame).
    float lwa = max(tp.drago_scene_log_average > 0.0 ? scale * tp.drago_scene_log_average : exposed_log_avg, 1e-20);
    float lsmax = max((tp.drago_scene_max > 0.0 ? scale * tp.drago_scene_max : exposed_max) / lwa, 1e-6);
    ts.drago_inv_lwa = 1.0 / lwa;
    ts.drago_inv_lsmax = 1.0 / lsmax;
    ts.drago_norm = tp.drago_display_max * 0.01 / log(1.0 + lsmax) * log(10.0);
    ts.drago_bias_exp = log(tp.drago_bias) / log(0.5);
    ts.translucent = 0u; // the tone pass raises it (tonemap.comp)
    // The input colour for the stages that read the frame (input_color.glsl); invocation 0 is the one left.
    for (int k = 0; k < 9; k++)
        ts.in_to_work[k] = tp.in_to_work[k];
    ts.convert_input = tp.convert_input;
    for (int k = 0; k < 3; k++)
        ts.work_luma[k] = tp.work_luma[k];
    // hp_dof.h: a channel is at most 1 / (the Y row's smallest weight) times the luminance; 14 covers
    // Rec.709 (13.85) and P3 (12.6), BT.2020's blue (0.0593) needs 16.9.
    float smallest = min(tp.work_luma[0], min(tp.work_luma[1], tp.work_luma[2]));
    ts.sat_bound = smallest >= 1.0 / float(HP_SAT_CHANNEL_BOUND) ? float(HP_SAT_CHANNEL_BOUND) : ceil(1.0 / smallest);
}

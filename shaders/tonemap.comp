#version 460
// The tone stage, fused: each pixel is read once and written once (issue 3). In order (DECISIONS.md 1):
// exclude non-finite pixels (written black), clamp negative channels, expose, convert to Yxy, apply the
// curve to Y (or, for aces_hill, agx and khronos_neutral, to the channels), convert back, bring the
// colour into [0, 1] without changing its luminance or hue, apply the display encoding (Kwon's dynamic
// local gamma by default), dither and quantize. pipeline/cpu_tone.c is the same in double precision.
//
// With DOF on (pipeline/dof.h), each pixel is first composited from the depth-of-field stage's blurred
// fields and bokeh (shaders/include/dof_composite.glsl): the composited frame is never written to memory.
//
// OUTPUT_KIND 0 writes the tone-mapped luminance L as a float instead: the input of the blur that makes
// a local adaptation luminance when gamma.radius > 0 (then a second run reads it back as L_an).
// OUTPUT_KIND 3 writes Y'CbCr 4:2:0 planes (hp_shared.h) for libwebp's lossy encoder, which would
// otherwise convert the RGB on one CPU core: each invocation a 2 x 2 block of pixels.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "tone.glsl"
#include "input_color.glsl"
#include "dof.glsl"
#include "dof_composite.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const bool INPUT_FP16 = false;
layout(constant_id = 1) const uint OUTPUT_KIND = 1; // 0 luminance (float), 1 RGBA8, 2 RGBA16, 3 YUV 4:2:0
layout(constant_id = 2) const bool DOF = false;      // composite depth of field first

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF32 { vec4 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer PixelsF16 { uvec2 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer OutU64 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InF32 { float v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 pixels;  //  0
    uvec2 output_; //  8
    uvec2 params;  // 16
    uvec2 state;   // 24
    uvec2 lan;     // 32  blurred adaptation luminance (lan_from_buffer)
    uint width;    // 40
    uint height;   // 44
    // Depth of field (DOF on): pipeline/dof.h hp_dof_frame's buffers.
    uvec2 coc;     // 48
    uvec2 mask;    // 56
    uvec2 near;    // 64
    uvec2 far;     // 72
    uvec2 accum;   // 80  0 without bokeh
    uint half_w;   // 88
    uint half_h;   // 92
    uint sat;      // 96
    uint flags;    // 100 HP_TONE_FLAG_ALPHA: the YUV output has an alpha plane
    uvec2 dilated; // 104
    float luma_r, luma_g, luma_b; // 112 the working space's Y row (issue 17): Rec.709's for sRGB output
} pc;

// One pixel up to the display encoding: its tone-mapped colour in [0, 1], luminance and alpha.
struct Toned {
    vec3 tm;
    float lum;
    float alpha;
};

Toned tone_pixel(uvec2 xy, ToneParams tp, ToneState ts)
{
    uint idx = xy.y * pc.width + xy.x;
    vec4 c;
    if (INPUT_FP16) {
        uvec2 h = PixelsF16(pc.pixels).px[idx];
        c = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
    } else {
        c = PixelsF32(pc.pixels).px[idx];
    }
    if ((pc.flags & HP_TONE_FLAG_CONVERT) != 0u)
        c = input_color(pc.state, c);

    if (DOF) {
        bool dof_excluded;
        vec3 sharp = dof_sanitize(c, working_luma(pc.state), dof_excluded);
        DofInputs d = DofInputs(pc.coc, pc.mask, pc.near, pc.far, pc.accum, pc.dilated, ts.scale > 0.0 ? 1.0 / ts.scale : 0.0, pc.width,
                                pc.half_w, pc.half_h, pc.sat != 0u);
        c = vec4(dof_composite(d, xy, sharp), dof_excluded ? 1.0 : c.a);
    }

    // DECISIONS.md 2: a NaN or infinite colour channel makes the pixel black.
    uvec3 exponent = floatBitsToUint(c.rgb) & 0x7f800000u;
    bool excluded = any(equal(exponent, uvec3(0x7f800000u)));
    vec3 rgb = vec3(c.r > 0.0 ? c.r : 0.0, c.g > 0.0 ? c.g : 0.0, c.b > 0.0 ? c.b : 0.0) * ts.scale;

    // The working space's Y row (issue 17), a push constant: Rec.709's HP_LUMA_* for sRGB output.
    vec3 luma = vec3(pc.luma_r, pc.luma_g, pc.luma_b);
    vec3 tm;
    if (tp.op >= OP_ACES_HILL) {
        if ((pc.flags & HP_TONE_FLAG_WIDE) != 0u) {
            mat3 m_in = row_major3(tp.op_in[0], tp.op_in[1], tp.op_in[2], tp.op_in[3], tp.op_in[4], tp.op_in[5],
                                   tp.op_in[6], tp.op_in[7], tp.op_in[8]);
            mat3 m_out = row_major3(tp.op_out[0], tp.op_out[1], tp.op_out[2], tp.op_out[3], tp.op_out[4],
                                    tp.op_out[5], tp.op_out[6], tp.op_out[7], tp.op_out[8]);
            tm = tp.op == OP_ACES_HILL    ? aces_hill_in(rgb, m_in, m_out)
               : tp.op == OP_AGX          ? agx_in(rgb, m_in, m_out)
               : tp.op == OP_FALSE_COLOR  ? m_out * false_color(luminance_in(rgb, luma))
                                          : khronos_neutral_in(rgb, m_in, m_out);
        } else {
            tm = tp.op == OP_ACES_HILL ? aces_hill(rgb)
               : tp.op == OP_AGX       ? agx(rgb)
               : tp.op == OP_FALSE_COLOR ? false_color(luminance(rgb))
                                         : khronos_neutral(rgb);
        }
    } else {
        // The curve acts on Yxy's Y and leaves x and y alone. Back in RGB that is RGB * Y'/Y exactly
        // (XYZ is linear in Y at fixed chromaticity, algorithms.md 2.2), and that is how it is computed:
        // the XYZ -> RGB matrix subtracts large terms to make a saturated colour's small channel, and in
        // fp32 that cost 16-bit outputs up to 8 steps. pipeline/cpu_tone.c takes the literal Yxy route in
        // double, so the tests hold the two forms to each other.
        float Y = luminance_in(rgb, luma);
        float Yd = clamp(curve_luminance(tp, ts, Y), 0.0, 1.0);
        tm = Y > 0.0 ? rgb * (Yd / Y) : vec3(0.0);
    }
    // Into [0, 1]: a channel over 1 is pulled toward the grey of the same luminance, just enough, so
    // saturated highlights keep their luminance and hue and lose saturation, as film does. In the working
    // space, so this is also the fold into the display's gamut (output.colorspace).
    tm = max(tm, vec3(0.0));
    float lum = min(luminance_in(tm, luma), 1.0);
    float peak = max(tm.r, max(tm.g, tm.b));
    if (peak > 1.0)
        tm = lum + (tm - lum) * ((1.0 - lum) / (peak - lum));
    if (excluded) {
        tm = vec3(0.0);
        lum = 0.0;
    }
    float alpha = excluded || isnan(c.a) ? 1.0 : clamp(c.a, 0.0, 1.0);
    return Toned(tm, lum, alpha);
}

// The display encoding of a toned pixel (before dither and quantization).
vec3 display_encode(Toned t, uint idx, ToneParams tp)
{
    if (tp.gamma_mode == GAMMA_LOCAL || tp.gamma_mode == GAMMA_LOCAL_LUMINANCE) {
        float lan = tp.lan_from_buffer != 0u ? InF32(pc.lan).v[idx] : t.lum;
        float g = kwon_gamma(lan);
        if (tp.gamma_mode == GAMMA_LOCAL)
            return pow(t.tm, vec3(g)); // on each channel (DECISIONS.md 7)
        return t.lum > 0.0 ? min(t.tm * (pow(t.lum, g) / t.lum), vec3(1.0)) : vec3(0.0);
    }
    if (tp.gamma_mode == GAMMA_SRGB)
        return srgb_encode(t.tm);
    return t.tm;
}

// Whether any alpha this pass writes is below the output's maximum (tone_state's translucent word, which
// the exposure stage zeroes): the host then leaves out an alpha that is opaque everywhere, which PNG would
// filter and deflate and libwebp would scan and clean. A translucent invocation reads the word and makes
// its atomic only while it reads 0; an opaque one does nothing more than the comparison. The read is a
// plain load racing with other invocations' atomics, which Vulkan's memory model leaves undefined; the
// word holds only the exposure stage's 0 (made visible by the barrier between the dispatches) and this
// dispatch's 1, so the load returns one of them, and a stale 0 only repeats the OR. An atomic load
// (relaxed) instead goes to L2 every time: 23% on a 4K frame translucent everywhere, against 1.5% for
// this (bench_tone, H200, `docs/bench-raw/2026-11-22-h200-tone-translucent-atomicload.txt`). Measured on the
// H200 (bench_tone, against the pass without the word): this form within 0.5% on opaque frames and 1-4%
// on frames translucent everywhere; a subgroup OR with one atomic per subgroup cost 1-2% on opaque frames,
// and gathering the subgroups' answers through shared memory behind a workgroup barrier 3-8%.
void flag_translucent(ToneState ts, bool translucent)
{
    if (translucent && ts.translucent == 0u)
        atomicOr(ts.translucent, 1u);
}

// OUTPUT_KIND 3: Y'CbCr 4:2:0 planes (hp_shared.h). An invocation tone-maps a 2 x 2 block (its Cb and Cr
// are that block's mean), so a workgroup covers 64 x 16 pixels; the bytes meet in shared memory and
// leave as whole words, a row's worth of a plane per store. Past the frame the last column and row
// repeat (the padding of the planes). Y' is dithered as the RGB output would be; Cb and Cr, means of
// four pixels, are not. (An invocation per 8 x 2 block, whole words without shared memory, took 1.3-1.5
// times as long as the RGBA8 pass: fewer invocations, each reading with a stride.)
// Sized by the specialization: every other output kind gets one-word arrays, because a driver may keep
// what a module declares whether or not the specialised code reads it. With the 10 KiB declared at full
// size for every kind, the RGBA8 pass took 0.087 ms instead of 0.062 on a 4K RGBA16F frame on the H200
// (docs/BENCHMARKS.md, "A regression, found and fixed in session 7").
const uint YUV_PIXELS = OUTPUT_KIND == 3u ? 16u * 64u : 1u;
const uint YUV_CHROMA = OUTPUT_KIND == 3u ? 8u * 32u : 1u;
shared uint s_y[YUV_PIXELS], s_a[YUV_PIXELS]; // a byte per entry
shared uint s_u[YUV_CHROMA], s_v[YUV_CHROMA];

void yuv_block(ToneParams tp, ToneState ts)
{
    uvec2 lid = gl_LocalInvocationID.xy;
    uvec2 wg0 = gl_WorkGroupID.xy * uvec2(64u, 16u);
    uint x0 = wg0.x + 2u * lid.x, y0 = wg0.y + 2u * lid.y;
    const vec3 ky = vec3(HP_BT601_YR, HP_BT601_YG, HP_BT601_YB);
    vec3 sum = vec3(0.0);
    bool translucent = false;
    for (uint j = 0u; j < 2u; j++) {
        for (uint i = 0u; i < 2u; i++) {
            uvec2 xy = uvec2(min(x0 + i, pc.width - 1u), min(y0 + j, pc.height - 1u));
            Toned t = tone_pixel(xy, tp, ts);
            vec3 v = display_encode(t, xy.y * pc.width + xy.x, tp);
            float noise = tp.dither != 0u ? dither_noise(xy.x, xy.y) : 0.0;
            uint at = (2u * lid.y + j) * 64u + 2u * lid.x + i;
            s_y[at] = uint(clamp(floor(16.0 + dot(ky, v) + 0.5 + noise), 0.0, 255.0));
            s_a[at] = uint(floor(t.alpha * 255.0 + 0.5));
            translucent = translucent || s_a[at] < 255u;
            sum += v;
        }
    }
    vec3 m = sum * 0.25;
    uint c = lid.y * 32u + lid.x;
    s_u[c] = uint(clamp(floor(128.0 + dot(vec3(HP_BT601_UR, HP_BT601_UG, HP_BT601_UB), m) + 0.5), 0.0, 255.0));
    s_v[c] = uint(clamp(floor(128.0 + dot(vec3(HP_BT601_VR, HP_BT601_VG, HP_BT601_VB), m) + 0.5), 0.0, 255.0));
    flag_translucent(ts, translucent);
    barrier();

    uint k = gl_LocalInvocationIndex; // 256: a word of each of 16 rows x 16 words of Y (and alpha)
    uint stride = HP_YUV_Y_STRIDE(pc.width), rows = HP_YUV_Y_ROWS(pc.height);
    uint r = k / 16u, wx = 4u * (k % 16u);
    uint gx = wg0.x + wx, gy = wg0.y + r;
    if (gx < stride && gy < rows) {
        uint b = r * 64u + wx;
        OutU32(pc.output_).v[(gy * stride + gx) / 4u] = s_y[b] | (s_y[b + 1u] << 8) | (s_y[b + 2u] << 16) | (s_y[b + 3u] << 24);
        if ((pc.flags & HP_TONE_FLAG_ALPHA) != 0u)
            OutU32(pc.output_).v[(HP_YUV_OFF_A(pc.width, pc.height) + gy * stride + gx) / 4u] =
                s_a[b] | (s_a[b + 1u] << 8) | (s_a[b + 2u] << 16) | (s_a[b + 3u] << 24);
    }
    if (k < 64u) { // 8 rows x 8 words of Cb and of Cr
        uint cr = k / 8u, cx = 4u * (k % 8u);
        uint gcx = wg0.x / 2u + cx, gcy = wg0.y / 2u + cr;
        if (gcx < stride / 2u && gcy < rows / 2u) {
            uint b = cr * 32u + cx, at = gcy * (stride / 2u) + gcx;
            OutU32(pc.output_).v[(HP_YUV_OFF_U(pc.width, pc.height) + at) / 4u] =
                s_u[b] | (s_u[b + 1u] << 8) | (s_u[b + 2u] << 16) | (s_u[b + 3u] << 24);
            OutU32(pc.output_).v[(HP_YUV_OFF_V(pc.width, pc.height) + at) / 4u] =
                s_v[b] | (s_v[b + 1u] << 8) | (s_v[b + 2u] << 16) | (s_v[b + 3u] << 24);
        }
    }
}

void main()
{
    ToneParams tp = ToneParams(pc.params);
    ToneState ts = ToneState(pc.state);
    if (OUTPUT_KIND == 3u) {
        yuv_block(tp, ts);
        return;
    }
    uvec2 xy = gl_GlobalInvocationID.xy;
    if (xy.x >= pc.width || xy.y >= pc.height)
        return;
    uint idx = xy.y * pc.width + xy.x;
    Toned t = tone_pixel(xy, tp, ts);

    if (OUTPUT_KIND == 0u) {
        OutF32(pc.output_).v[idx] = t.lum;
        return;
    }

    vec3 v = display_encode(t, idx, tp);
    float noise = tp.dither != 0u ? dither_noise(xy.x, xy.y) : 0.0;
    if (OUTPUT_KIND == 1u) {
        uvec3 q = uvec3(clamp(floor(v * 255.0 + 0.5 + noise), 0.0, 255.0));
        uint a = uint(floor(t.alpha * 255.0 + 0.5));
        OutU32(pc.output_).v[idx] = q.r | (q.g << 8) | (q.b << 16) | (a << 24);
        flag_translucent(ts, a < 255u);
    } else {
        uvec3 q = uvec3(clamp(floor(v * 65535.0 + 0.5 + noise), 0.0, 65535.0));
        uint a = uint(floor(t.alpha * 65535.0 + 0.5));
        OutU64(pc.output_).v[idx] = uvec2(q.r | (q.g << 16), q.b | (a << 16));
        flag_translucent(ts, a < 65535u);
    }
}

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
// otherwise convert the RGB on one CPU core: each invocation an 8 x 2 block of pixels.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "tone.glsl"
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

    if (DOF) {
        bool dof_excluded;
        vec3 sharp = dof_sanitize(c, dof_excluded);
        DofInputs d = DofInputs(pc.coc, pc.mask, pc.near, pc.far, pc.accum, pc.dilated, ts.scale > 0.0 ? 1.0 / ts.scale : 0.0, pc.width,
                                pc.half_w, pc.half_h, pc.sat != 0u);
        c = vec4(dof_composite(d, xy, sharp), dof_excluded ? 1.0 : c.a);
    }

    // DECISIONS.md 2: a NaN or infinite colour channel makes the pixel black.
    uvec3 exponent = floatBitsToUint(c.rgb) & 0x7f800000u;
    bool excluded = any(equal(exponent, uvec3(0x7f800000u)));
    vec3 rgb = vec3(c.r > 0.0 ? c.r : 0.0, c.g > 0.0 ? c.g : 0.0, c.b > 0.0 ? c.b : 0.0) * ts.scale;

    vec3 tm;
    if (tp.op >= OP_ACES_HILL) {
        tm = tp.op == OP_ACES_HILL ? aces_hill(rgb) : tp.op == OP_AGX ? agx(rgb) : khronos_neutral(rgb);
    } else {
        // The curve acts on Yxy's Y and leaves x and y alone. Back in RGB that is RGB * Y'/Y exactly
        // (XYZ is linear in Y at fixed chromaticity, algorithms.md 2.2), and that is how it is computed:
        // the XYZ -> RGB matrix subtracts large terms to make a saturated colour's small channel, and in
        // fp32 that cost 16-bit outputs up to 8 steps. pipeline/cpu_tone.c takes the literal Yxy route in
        // double, so the tests hold the two forms to each other.
        float Y = luminance(rgb);
        float Yd = clamp(curve_luminance(tp, ts, Y), 0.0, 1.0);
        tm = Y > 0.0 ? rgb * (Yd / Y) : vec3(0.0);
    }
    // Into [0, 1]: a channel over 1 is pulled toward the grey of the same luminance, just enough, so
    // saturated highlights keep their luminance and hue and lose saturation, as film does.
    tm = max(tm, vec3(0.0));
    float lum = min(luminance(tm), 1.0);
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

// OUTPUT_KIND 3: the 8 x 2 block at 8 * gl_GlobalInvocationID.x, 2 * gl_GlobalInvocationID.y into the
// Y'CbCr 4:2:0 planes (hp_shared.h). Y' is dithered as the RGB output would be; Cb and Cr, means of four
// pixels, are not.
void yuv_block(ToneParams tp, ToneState ts)
{
    uint x0 = gl_GlobalInvocationID.x * 8u, y0 = gl_GlobalInvocationID.y * 2u;
    if (x0 >= pc.width || y0 >= pc.height)
        return;
    uint stride = HP_YUV_Y_STRIDE(pc.width);
    uvec2 yw[2] = uvec2[2](uvec2(0u), uvec2(0u));
    uvec2 aw[2] = uvec2[2](uvec2(0u), uvec2(0u));
    vec3 sum[4] = vec3[4](vec3(0.0), vec3(0.0), vec3(0.0), vec3(0.0));
    const vec3 ky = vec3(HP_BT601_YR, HP_BT601_YG, HP_BT601_YB);
    for (uint j = 0u; j < 2u; j++) {
        for (uint i = 0u; i < 8u; i++) {
            uvec2 xy = uvec2(min(x0 + i, pc.width - 1u), min(y0 + j, pc.height - 1u));
            Toned t = tone_pixel(xy, tp, ts);
            vec3 v = display_encode(t, xy.y * pc.width + xy.x, tp);
            float noise = tp.dither != 0u ? dither_noise(xy.x, xy.y) : 0.0;
            uint q = uint(clamp(floor(16.0 + dot(ky, v) + 0.5 + noise), 0.0, 255.0));
            uint a = uint(floor(t.alpha * 255.0 + 0.5));
            uint shift = 8u * (i & 3u);
            if (i < 4u) {
                yw[j].x |= q << shift;
                aw[j].x |= a << shift;
            } else {
                yw[j].y |= q << shift;
                aw[j].y |= a << shift;
            }
            sum[i / 2u] += v;
        }
    }
    uint uw = 0u, vw = 0u;
    for (uint k = 0u; k < 4u; k++) {
        vec3 m = sum[k] * 0.25;
        uint u = uint(clamp(floor(128.0 + dot(vec3(HP_BT601_UR, HP_BT601_UG, HP_BT601_UB), m) + 0.5), 0.0, 255.0));
        uint w = uint(clamp(floor(128.0 + dot(vec3(HP_BT601_VR, HP_BT601_VG, HP_BT601_VB), m) + 0.5), 0.0, 255.0));
        uw |= u << (8u * k);
        vw |= w << (8u * k);
    }
    uint plane = HP_YUV_PLANE_Y(pc.width, pc.height);
    for (uint j = 0u; j < 2u; j++) {
        OutU64(pc.output_).v[((y0 + j) * stride + x0) / 8u] = yw[j];
        if ((pc.flags & HP_TONE_FLAG_ALPHA) != 0u)
            OutU64(pc.output_).v[(HP_YUV_OFF_A(pc.width, pc.height) + (y0 + j) * stride + x0) / 8u] = aw[j];
    }
    uint chroma = (y0 / 2u) * (stride / 2u) + x0 / 2u;
    OutU32(pc.output_).v[(plane + chroma) / 4u] = uw;
    OutU32(pc.output_).v[(HP_YUV_OFF_V(pc.width, pc.height) + chroma) / 4u] = vw;
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
    } else {
        uvec3 q = uvec3(clamp(floor(v * 65535.0 + 0.5 + noise), 0.0, 65535.0));
        uint a = uint(floor(t.alpha * 65535.0 + 0.5));
        OutU64(pc.output_).v[idx] = uvec2(q.r | (q.g << 16), q.b | (a << 16));
    }
}

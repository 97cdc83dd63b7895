#version 460
// Depth of field, pass 3 (pipeline/dof.c): the near and far fields at half resolution, gathered over a
// disc of concentric rings (hp_dof.h) as "scatter as gather": a tap contributes to this pixel when its
// own blur reaches it (Jimenez 2014, algorithms.md 5.3; Unity's gather, 5.5).
// Only far pixels have a far field (alpha 1; 0 elsewhere), so that the composite interpolates it from
// far pixels alone and an in-focus edge does not tint the background blurred beside it.
//   far field   taps of far pixels (CoC > 0) whose radius covers the distance, weighted 1 / c^2 (a tap
//               spreads its light over pi c^2, so a sharper one is denser where it lands), normalised.
//               In-focus and near pixels are not taps of the far field, so a sharp subject never bleeds
//               into the background blurred behind it.
//   near field  taps of near pixels (CoC < 0) whose radius covers the distance, weighted the same way,
//               normalised, with a coverage: the sum over the taps of (tap area) / (pi c^2), the share
//               of this pixel that blurred foreground covers, the alpha Jimenez builds from 1 / (pi c^2).
//               Stored premultiplied so the composite can interpolate it.
// Weights fall off over one half-resolution pixel at the edge of a tap's disc (saturate(c - r + 1)).
// Kernel radius: the pixel's own far CoC or its tile neighbourhood's largest near CoC, whichever is
// larger; below half a pixel the pixel is its own far field and has no near field.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_dof.h"
#define HP_DOF_TAP(x, y) vec2(x, y)
#include "hp_dof_taps.h"

// A constant array: a uniform index reads it from the constant bank, with no load per tap.
const vec2 TAPS[HP_DOF_TAPS] = vec2[](HP_DOF_TAP_TABLE);

layout(local_size_x = 8, local_size_y = 8) in;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer InVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer InVec2 { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer OutVec4 { vec4 v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 half_;   //  0  vec4: colour, signed CoC (frame pixels)
    uvec2 dilated; //  8  vec2 per tile: neighbourhood near max, own far max
    uvec2 near;    // 16  out: premultiplied colour, coverage
    uvec2 far;     // 24  out: colour and 1 for far pixels, 0 for the others
    uint half_w;   // 32
    uint half_h;   // 36
} pc;

// The taps of ring 0 to K, ring k at radius k * step. Inlined twice, with edge clamps and without.
void gather(InVec4 half_, ivec2 p, ivec2 last, uint K, float step_, bool clamped, inout vec3 far_sum,
            inout float far_w, inout vec3 near_sum, inout float near_w)
{
    for (uint k = 0u; k <= K; k++) {
        uint count = k == 0u ? 1u : 8u * k;
        uint base = k == 0u ? 0u : 1u + 4u * k * (k - 1u);
        precise float r = float(k) * step_;
        for (uint j = 0u; j < count; j++) {
            precise vec2 off = r * TAPS[base + j];
            ivec2 q = p + ivec2(floor(off + 0.5));
            if (clamped)
                q = clamp(q, ivec2(0), last);
            vec4 v = half_.v[uint(q.y) * pc.half_w + uint(q.x)];
            float c = abs(v.a) * 0.5;
            float w = clamp(c - r + 1.0, 0.0, 1.0) / max(c * c, 0.25);
            if (v.a > 0.0) {
                far_sum += w * v.rgb;
                far_w += w;
            } else if (v.a < 0.0) {
                near_sum += w * v.rgb;
                near_w += w;
            }
        }
    }
}

void main()
{
    uvec2 p = gl_GlobalInvocationID.xy;
    if (p.x >= pc.half_w || p.y >= pc.half_h)
        return;
    InVec4 half_ = InVec4(pc.half_);
    uint idx = p.y * pc.half_w + p.x;
    vec4 centre = half_.v[idx];
    uint tiles_w = (pc.half_w + HP_DOF_TILE - 1u) / HP_DOF_TILE;
    vec2 tile = InVec2(pc.dilated).v[(p.y / HP_DOF_TILE) * tiles_w + p.x / HP_DOF_TILE];
    // Half-resolution pixels from here on: CoCs are halved.
    float R = max(max(centre.a, 0.0), tile.x) * 0.5;
    if (R < 0.5) {
        OutVec4(pc.near).v[idx] = vec4(0.0);
        OutVec4(pc.far).v[idx] = centre.a > 0.0 ? vec4(centre.rgb, 1.0) : vec4(0.0);
        return;
    }
    uint K = clamp(uint(ceil(R / float(HP_DOF_RING_SPACING))), 1u, uint(HP_DOF_MAX_RINGS));
    float step_ = R / float(K);
    vec3 far_sum = vec3(0.0), near_sum = vec3(0.0);
    float far_w = 0.0, near_w = 0.0;
    // Away from the frame's edges no tap can leave it: the common case skips the clamps.
    int reach = int(ceil(R)) + 1;
    ivec2 ip = ivec2(p), last = ivec2(pc.half_w, pc.half_h) - 1;
    if (all(greaterThanEqual(ip - reach, ivec2(0))) && all(lessThanEqual(ip + reach, last)))
        gather(half_, ip, last, K, step_, false, far_sum, far_w, near_sum, near_w);
    else
        gather(half_, ip, last, K, step_, true, far_sum, far_w, near_sum, near_w);
    // Each tap stands for pi/4 step^2 of area and a near tap spreads over pi c^2: its share of this
    // pixel is reach * step^2 / (4 c^2), which is its weight w times step^2 / 4.
    float alpha = min(near_w * 0.25 * step_ * step_, 1.0);
    OutVec4(pc.near).v[idx] = near_w > 0.0 ? vec4(near_sum / near_w * alpha, alpha) : vec4(0.0);
    OutVec4(pc.far).v[idx] = centre.a > 0.0 ? vec4(far_sum / far_w, 1.0) : vec4(0.0);
}

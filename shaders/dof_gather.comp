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
// Weights fall off over one pixel at the edge of a tap's aperture: saturate(c * NGon(theta) - r + 1), so
// the kernel has the lens's shape (bokeh.blades, bokeh.rotation_deg) like the sprites.
// Kernel radius: the pixel's own far CoC or its tile neighbourhood's largest near CoC, whichever is
// larger; below half a pixel the pixel is its own far field and has no near field.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "dof.glsl"
#define HP_DOF_TAP(x, y) vec2(x, y)
#include "hp_dof_taps.h"

// A constant array: a uniform index reads it from the constant bank, with no load per tap.
const vec2 TAPS[HP_DOF_TAPS] = vec2[](HP_DOF_TAP_TABLE);

layout(local_size_x = 8, local_size_y = 8) in;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer InVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer InVec2 { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer OutField { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ToneScale { float scale; };
// The aperture: per tap, the polygon's radius in the tap's direction (NGon of bokeh.blades, rotated;
// 1 for a circle), written by the host for each frame (pipeline/dof.c).
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Aperture { float a[HP_DOF_TAPS]; };
shared float s_aperture[HP_DOF_TAPS]; // copied once per workgroup: a tap reads it without a memory load

layout(push_constant, std430) uniform Push {
    uvec2 half_;   //  0  vec4: colour, signed CoC (frame pixels)
    uvec2 dilated; //  8  vec2 per tile: neighbourhood near max, own far max
    uvec2 near;    // 16  out: premultiplied colour, coverage (dof_pack_field)
    uvec2 far;     // 24  out: colour and 1 for far pixels, 0 for the others (dof_pack_field)
    uvec2 quarter; // 32  vec4 per quarter pixel (dof_setup.comp)
    uint half_w;   // 40
    uint half_h;   // 44
    uvec2 state;   // 48  tone_state: word 0 is the exposure scale
    uvec2 aperture; // 56  HP_DOF_TAPS floats
    float coverage; // 64  pi over the aperture's area for a circumradius of 1 (1 for a circle)
} pc;

// The taps of ring 0 to K, ring k at radius k * step, around p in the pixels of `src` (width w, last the
// bottom-right pixel); `scale` turns a stored CoC (frame pixels) into those pixels. Inlined for each
// resolution, with edge clamps and without.
void gather(InVec4 src, uint w, vec2 p, ivec2 last, uint K, float step_, float scale, bool clamped,
            inout vec3 far_sum, inout float far_w, inout vec3 near_sum, inout float near_w)
{
    for (uint k = 0u; k <= K; k++) {
        uint count = k == 0u ? 1u : 8u * k;
        uint base = k == 0u ? 0u : 1u + 4u * k * (k - 1u);
        precise float r = float(k) * step_;
        for (uint j = 0u; j < count; j++) {
            precise vec2 off = p + r * TAPS[base + j];
            ivec2 q = ivec2(floor(off + 0.5));
            if (clamped)
                q = clamp(q, ivec2(0), last);
            vec4 v = src.v[uint(q.y) * w + uint(q.x)];
            float c = abs(v.a) * scale;
            // The tap's blur reaches this pixel if the distance lies inside its aperture polygon.
            float wt = clamp(c * s_aperture[base + j] - r + 1.0, 0.0, 1.0) / max(c * c, 0.25);
            if (v.a > 0.0) {
                far_sum += wt * v.rgb;
                far_w += wt;
            } else if (v.a < 0.0) {
                near_sum += wt * v.rgb;
                near_w += wt;
            }
        }
    }
}

void main()
{
    for (uint i = gl_LocalInvocationIndex; i < HP_DOF_TAPS; i += 64u)
        s_aperture[i] = Aperture(pc.aperture).a[i];
    barrier();
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
        float scale = ToneScale(pc.state).scale;
        OutField(pc.near).v[idx] = uvec2(0u);
        OutField(pc.far).v[idx] = dof_pack_field(centre.a > 0.0 ? vec4(centre.rgb, 1.0) : vec4(0.0), scale);
        return;
    }
    vec3 far_sum = vec3(0.0), near_sum = vec3(0.0);
    float far_w = 0.0, near_w = 0.0;
    uint K;
    float step_;
    if (R > float(HP_DOF_QUARTER_ABOVE)) {
        // Quarter resolution (hp_dof.h): this half pixel's centre is at (p + 0.5) / 2 - 0.5 there.
        float Rq = 0.5 * R;
        K = clamp(uint(ceil(Rq / float(HP_DOF_RING_SPACING))), 1u, uint(HP_DOF_QUARTER_RINGS));
        step_ = Rq / float(K);
        uint qw = (pc.half_w + 1u) / 2u, qh = (pc.half_h + 1u) / 2u;
        vec2 pq = (vec2(p) + 0.5) * 0.5 - 0.5;
        ivec2 lastq = ivec2(qw, qh) - 1;
        int reach = int(ceil(Rq)) + 1;
        bool inside = all(greaterThanEqual(ivec2(pq) - reach, ivec2(0))) && all(lessThanEqual(ivec2(pq) + reach, lastq));
        if (inside)
            gather(InVec4(pc.quarter), qw, pq, lastq, K, step_, 0.25, false, far_sum, far_w, near_sum, near_w);
        else
            gather(InVec4(pc.quarter), qw, pq, lastq, K, step_, 0.25, true, far_sum, far_w, near_sum, near_w);
    } else {
        K = clamp(uint(ceil(R / float(HP_DOF_RING_SPACING))), 1u, uint(HP_DOF_MAX_RINGS));
        step_ = R / float(K);
        // Away from the frame's edges no tap can leave it: the common case skips the clamps.
        int reach = int(ceil(R)) + 1;
        ivec2 ip = ivec2(p), last = ivec2(pc.half_w, pc.half_h) - 1;
        if (all(greaterThanEqual(ip - reach, ivec2(0))) && all(lessThanEqual(ip + reach, last)))
            gather(half_, pc.half_w, vec2(p), last, K, step_, 0.5, false, far_sum, far_w, near_sum, near_w);
        else
            gather(half_, pc.half_w, vec2(p), last, K, step_, 0.5, true, far_sum, far_w, near_sum, near_w);
    }
    // Each tap stands for pi/4 step^2 of area and a near tap spreads over its aperture, pi c^2 for a
    // circle: its share of this pixel is reach * step^2 / (4 c^2), its weight w times step^2 / 4, times
    // pi over the polygon's area for a polygonal aperture.
    float alpha = min(near_w * 0.25 * step_ * step_ * pc.coverage, 1.0);
    float scale = ToneScale(pc.state).scale;
    OutField(pc.near).v[idx] = dof_pack_field(near_w > 0.0 ? vec4(near_sum / near_w * alpha, alpha) : vec4(0.0), scale);
    // A far pixel whose quarter-resolution neighbourhood is all eroded away keeps its own colour.
    OutField(pc.far).v[idx] =
        dof_pack_field(centre.a > 0.0 ? vec4(far_w > 0.0 ? far_sum / far_w : centre.rgb, 1.0) : vec4(0.0), scale);
}

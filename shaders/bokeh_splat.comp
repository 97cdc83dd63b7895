#version 460
// Bokeh: one workgroup per sprite (dispatched indirectly: shaders/include/bokeh_args.glsl), drawn at half resolution:
// a sprite is a blurred thing by definition, its edge is ramped over a pixel anyway, and a quarter of the
// pixels is a quarter of the atomics and of the buffer the composite reads. The sprite is the aperture:
// a regular polygon of dof blades (or a circle), rotated, optionally squeezed as an anamorphic lens
// squeezes it (taller than wide), of the pixel's CoC radius (algorithms.md 6 step 4, CRYENGINE's NGon;
// a one-pixel ramp at the edge against aliasing). Its light is divided by its area (step 3: here the
// exact sum of the coverage weights over its footprint, so the energy that lands is the pixel's to the
// rounding) and added into an accumulation buffer with float atomics (step 6), which the setup pass
// cleared. A sprite is hidden where a
// sharp pixel stands in front of it (step 5, Flax's depth test; a blurred foreground is composited over
// it by its own near field instead). Light that falls outside the frame is lost, as it is from a lens.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_shader_atomic_float : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "dof.glsl"

layout(local_size_x = HP_BOKEH_SPLAT_WG) in;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Sprites {
    uint ctl[HP_BOKEH_CTL_WORDS];
    float rec[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer InVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Accum { float v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 sprites;     //  0
    uvec2 accum;       //  8  4 floats (RGB, unused) per half-resolution pixel
    uvec2 depth;       // 16  frame-sized
    uvec2 half_;       // 24  vec4 per half pixel: colour, signed CoC
    uint half_w;       // 32
    uint half_h;       // 36
    uint blades;       // 40  0: a circle
    float rotation;    // 44  radians
    float squeeze;     // 48  vertical stretch, 1: none
    float depth_scale; // 52
    uint frame_w;      // 56
} pc;

shared float s_sum[HP_BOKEH_SPLAT_WG];

// Coverage of the half-resolution pixel (px, py) by the sprite (centre and radius in half pixels).
float coverage(int px, int py, vec2 centre, float radius, vec2 rot)
{
    vec2 d = vec2(float(px) + 0.5, float(py) + 0.5) - centre;
    d.y /= pc.squeeze;
    d = vec2(rot.x * d.x + rot.y * d.y, -rot.y * d.x + rot.x * d.y);
    float edge = radius;
    if (pc.blades >= 3u)
        edge *= dof_ngon(atan(d.y, d.x), float(pc.blades));
    return clamp(edge - length(d) + 0.5, 0.0, 1.0);
}

void main()
{
    Sprites sp = Sprites(pc.sprites);
    uint r0 = gl_WorkGroupID.x * HP_BOKEH_SPRITE_WORDS;
    // Frame pixel coordinate x is half-resolution coordinate x / 2.
    vec2 centre = 0.5 * vec2(sp.rec[r0], sp.rec[r0 + 1u]);
    float radius = 0.5 * abs(sp.rec[r0 + 2u]);
    float z = sp.rec[r0 + 3u];
    vec3 rgb = vec3(sp.rec[r0 + 4u], sp.rec[r0 + 5u], sp.rec[r0 + 6u]);
    vec2 rot = vec2(cos(pc.rotation), sin(pc.rotation));

    // The footprint: the polygon fits in the circle of its radius (the ramp adds half a pixel).
    float ry = radius * pc.squeeze;
    int x0 = int(floor(centre.x - radius - 1.0)), x1 = int(floor(centre.x + radius + 1.0));
    int y0 = int(floor(centre.y - ry - 1.0)), y1 = int(floor(centre.y + ry + 1.0));
    uint bw = uint(x1 - x0 + 1), bh = uint(y1 - y0 + 1);
    uint n = bw * bh;

    float sum = 0.0;
    for (uint i = gl_LocalInvocationIndex; i < n; i += HP_BOKEH_SPLAT_WG)
        sum += coverage(x0 + int(i % bw), y0 + int(i / bw), centre, radius, rot);
    s_sum[gl_LocalInvocationIndex] = sum;
    barrier();
    for (uint s = HP_BOKEH_SPLAT_WG / 2u; s > 0u; s >>= 1u) {
        if (gl_LocalInvocationIndex < s)
            s_sum[gl_LocalInvocationIndex] += s_sum[gl_LocalInvocationIndex + s];
        barrier();
    }
    float total = s_sum[0];
    if (!(total > 0.0))
        return;
    vec3 light = rgb / total;

    Accum acc = Accum(pc.accum);
    for (uint i = gl_LocalInvocationIndex; i < n; i += HP_BOKEH_SPLAT_WG) {
        int px = x0 + int(i % bw), py = y0 + int(i / bw);
        if (px < 0 || py < 0 || px >= int(pc.half_w) || py >= int(pc.half_h))
            continue;
        float w = coverage(px, py, centre, radius, rot);
        if (w <= 0.0)
            continue;
        uint idx = uint(py) * pc.half_w + uint(px);
        // Hidden behind a sharp pixel in front (5% of the sprite's distance: depth buffers are noisy). The
        // half pixel's depth is its top-left frame pixel's.
        float dz = InF32(pc.depth).v[uint(2 * py) * pc.frame_w + uint(2 * px)];
        float tz = dz < float(HP_DOF_DEPTH_BACKGROUND) ? dz * pc.depth_scale : 3.0e38;
        if (tz < 0.95 * z)
            w *= clamp(abs(InVec4(pc.half_).v[idx].a) - 0.5, 0.0, 1.0);
        atomicAdd(acc.v[4u * idx], light.r * w);
        atomicAdd(acc.v[4u * idx + 1u], light.g * w);
        atomicAdd(acc.v[4u * idx + 2u], light.b * w);
    }
}

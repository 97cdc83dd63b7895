#version 460
// Depth of field, pass 1 of 4 (pipeline/dof.c): one invocation per half-resolution pixel, one workgroup
// per tile of 8 x 8 of them. For each of its 2 x 2 frame pixels it
//   - computes the signed CoC from depth (dof.glsl, algorithms.md 5.1) and stores it for the composite;
//   - with bokeh on, appends the pixel as a sprite when its exposed luminance is over the threshold and
//     its CoC is large enough (algorithms.md 6 steps 1-2: an SSBO with an atomic counter); the pixel's
//     colour then leaves the gathered field, so its energy is counted once, in the sprite (DECISIONS.md 9);
//   - sums the rest into the half-resolution colour. The half-resolution CoC keeps the largest near
//     CoC of the four (the near field is dilated) and otherwise the smallest far one (the far field is
//     eroded: a block touching anything in focus is no far sample), as CRYENGINE's downscale does
//     (algorithms.md 5.2 step 1), so sharp edges do not leak into the blurred layers;
//   - and records the tile's largest near and far CoC, which size the gather's kernel.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "dof.glsl"
#include "input_color.glsl"

layout(local_size_x = HP_DOF_TILE, local_size_y = HP_DOF_TILE) in;
layout(constant_id = 0) const bool INPUT_FP16 = false;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF32 { vec4 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer PixelsF16 { uvec2 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer OutVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer OutVec2 { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Sprites {
    uint ctl[HP_BOKEH_CTL_WORDS];
    float rec[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ToneScale { float scale; };

// Layout: pipeline/dof.c struct setup_push.
layout(push_constant, std430) uniform Push {
    uvec2 pixels;          //   0
    uvec2 depth;           //   8  frame-sized floats, in the file's units
    uvec2 coc;             //  16  out: frame-sized signed CoC radii
    uvec2 half_;           //  24  out: vec4 per half pixel: colour, signed CoC
    uvec2 mask;            //  32  out: per half pixel, bit 2j+i: frame pixel (i, j) became a sprite
    uvec2 tiles;           //  40  out: vec2 per tile: largest near and far CoC
    uvec2 sprites;         //  48  control words and records
    uvec2 state;           //  56  tone_state: word 0 is the exposure scale
    uint width;            //  64
    uint height;           //  68
    uint half_w;           //  72
    uint half_h;           //  76
    float coc_k;           //  80  CoC radius at infinity, pixels
    float focus_m;         //  84
    float depth_scale;     //  88  metres per depth unit
    float max_coc;         //  92
    float bokeh_threshold; //  96  exposed luminance
    float bokeh_min_coc;   // 100  pixels
    uint max_sprites;      // 104  0: bokeh off
    uint pad;              // 108
    uvec2 accum;           // 112  bokeh: 4 floats per half pixel, cleared here for the splat
    uvec2 quarter;         // 120  out: vec4 per quarter pixel: colour, signed CoC (hp_dof.h)
} pc;

shared uint s_tile[2];
shared vec4 s_half[HP_DOF_TILE * HP_DOF_TILE]; // for the quarter resolution; alpha 1e30: outside the frame

void main()
{
    uvec2 h = gl_GlobalInvocationID.xy;
    bool live = h.x < pc.half_w && h.y < pc.half_h;
    if (gl_LocalInvocationIndex == 0u) {
        s_tile[0] = 0u;
        s_tile[1] = 0u;
    }
    barrier();

    float near = 0.0, far = 0.0;
    if (live) {
        float scale = pc.max_sprites > 0u ? ToneScale(pc.state).scale : 0.0;
        vec3 sum = vec3(0.0);
        uint n = 0u, mask = 0u;
        far = 3.0e38;
        for (uint j = 0u; j < 2u; j++) {
            for (uint i = 0u; i < 2u; i++) {
                uvec2 xy = 2u * h + uvec2(i, j);
                if (xy.x >= pc.width || xy.y >= pc.height)
                    continue;
                uint idx = xy.y * pc.width + xy.x;
                vec4 c;
                if (INPUT_FP16) {
                    uvec2 v = PixelsF16(pc.pixels).px[idx];
                    c = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
                } else {
                    c = PixelsF32(pc.pixels).px[idx];
                }
                if (input_color_wanted(pc.state))
                    c = input_color(pc.state, c);
                bool excluded;
                vec3 luma = working_luma(pc.state);
                vec3 rgb = dof_sanitize(c, luma, excluded);
                float s = dof_coc(InF32(pc.depth).v[idx], pc.coc_k, pc.focus_m, pc.depth_scale, pc.max_coc);
                OutF32(pc.coc).v[idx] = s;
                n++;
                bool sprite = false;
                if (pc.max_sprites > 0u && abs(s) >= pc.bokeh_min_coc &&
                    dof_luminance(rgb, luma) * scale > pc.bokeh_threshold) {
                    Sprites sp = Sprites(pc.sprites);
                    uint slot = atomicAdd(sp.ctl[HP_BOKEH_CTL_COUNTER], 1u);
                    if (slot < pc.max_sprites) {
                        uint r = slot * HP_BOKEH_SPRITE_WORDS;
                        float z = InF32(pc.depth).v[idx] * pc.depth_scale;
                        sp.rec[r + 0u] = float(xy.x) + 0.5;
                        sp.rec[r + 1u] = float(xy.y) + 0.5;
                        sp.rec[r + 2u] = s;
                        sp.rec[r + 3u] = InF32(pc.depth).v[idx] < float(HP_DOF_DEPTH_BACKGROUND) ? z : 3.0e38;
                        sp.rec[r + 4u] = rgb.r;
                        sp.rec[r + 5u] = rgb.g;
                        sp.rec[r + 6u] = rgb.b;
                        sp.rec[r + 7u] = 0.0;
                        sprite = true;
                    }
                }
                if (sprite)
                    mask |= 1u << (2u * j + i);
                else
                    sum += rgb;
                near = max(near, -s);
                far = min(far, max(s, 0.0));
            }
        }
        // The block's colour is its energy over its pixel count: a sprite's pixel counts as black here.
        float hs = near > 0.0 ? -near : far;
        OutVec4(pc.half_).v[h.y * pc.half_w + h.x] = vec4(sum / float(n), hs);
        s_half[gl_LocalInvocationIndex] = vec4(sum / float(n), hs);
        OutU32(pc.mask).v[h.y * pc.half_w + h.x] = mask;
        if (pc.max_sprites > 0u) {
            OutVec4(pc.accum).v[h.y * pc.half_w + h.x] = vec4(0.0);
        }
        far = near > 0.0 ? 0.0 : far;
        // Non-negative floats order as their bit patterns: the tile maxima are integer atomics. A zero may
        // be -0.0 (max(0.0, -s) for s = +0 may return either zero), whose bits would beat every positive
        // float: zeros count as +0.
        atomicMax(s_tile[0], near > 0.0 ? floatBitsToUint(near) : 0u);
        atomicMax(s_tile[1], far > 0.0 ? floatBitsToUint(far) : 0u);
    }
    if (!live)
        s_half[gl_LocalInvocationIndex] = vec4(0.0, 0.0, 0.0, 1e30);
    barrier();
    // Quarter resolution: one invocation in four combines its 2 x 2 half pixels by the same rule.
    uvec2 l = gl_LocalInvocationID.xy;
    if (live && (l.x & 1u) == 0u && (l.y & 1u) == 0u) {
        vec3 sum = vec3(0.0);
        float qn = 0.0, qfar = 3.0e38, count = 0.0;
        for (uint j = 0u; j < 2u; j++) {
            for (uint i = 0u; i < 2u; i++) {
                vec4 v = s_half[(l.y + j) * HP_DOF_TILE + l.x + i];
                if (v.a > 1e29)
                    continue;
                sum += v.rgb;
                count += 1.0;
                qn = max(qn, -v.a);
                qfar = min(qfar, max(v.a, 0.0));
            }
        }
        uint quarter_w = (pc.half_w + 1u) / 2u;
        OutVec4(pc.quarter).v[(h.y / 2u) * quarter_w + h.x / 2u] = vec4(sum / count, qn > 0.0 ? -qn : qfar);
    }
    if (gl_LocalInvocationIndex == 0u) {
        uint tiles_w = (pc.half_w + HP_DOF_TILE - 1u) / HP_DOF_TILE;
        OutVec2(pc.tiles).v[gl_WorkGroupID.y * tiles_w + gl_WorkGroupID.x] =
            vec2(uintBitsToFloat(s_tile[0]), uintBitsToFloat(s_tile[1]));
    }
}

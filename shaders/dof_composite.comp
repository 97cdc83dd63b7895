#version 460
// Depth of field, pass 4 (pipeline/dof.c): back to full resolution. Far first, then near by its
// coverage (DECISIONS.md 8; CRYENGINE's composite, algorithms.md 5.2 step 5):
//   B   = mix(sharp, far field, smoothstep(0.5, 1.5, CoC))   for far pixels (every pixel with the SAT)
//   out = B * (1 - near coverage) + near field (premultiplied)
//   out += bokeh (the sprites' accumulated light, which this pass also clears for the next frame)
// The half-resolution fields are interpolated bilinearly. A pixel that became a sprite is black in the
// sharp image: its light is in the sprite. A pixel in focus with no blurred foreground in reach comes
// out exactly as it went in, so DOF with everything in focus changes nothing.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "dof.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const bool INPUT_FP16 = false;
layout(constant_id = 1) const bool SAT = false;   // dof.method = "sat": one blurred field, no near layer
layout(constant_id = 2) const bool BOKEH = false;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF32 { vec4 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer PixelsF16 { uvec2 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer InU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer InVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Accum { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer OutVec4 { vec4 v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 pixels;  //  0
    uvec2 coc;     //  8
    uvec2 mask;    // 16
    uvec2 near;    // 24
    uvec2 far;     // 32
    uvec2 accum;   // 40  3 floats per pixel
    uvec2 out_;    // 48  RGBA32F
    uint width;    // 56
    uint height;   // 60
    uint half_w;   // 64
    uint half_h;   // 68
} pc;

vec4 bilinear(uvec2 buffer_address, vec2 u)
{
    InVec4 b = InVec4(buffer_address);
    vec2 i0 = floor(u);
    vec2 f = u - i0;
    ivec2 last = ivec2(pc.half_w, pc.half_h) - 1;
    ivec2 a = clamp(ivec2(i0), ivec2(0), last);
    ivec2 c = clamp(ivec2(i0) + 1, ivec2(0), last);
    vec4 v00 = b.v[uint(a.y) * pc.half_w + uint(a.x)], v10 = b.v[uint(a.y) * pc.half_w + uint(c.x)];
    vec4 v01 = b.v[uint(c.y) * pc.half_w + uint(a.x)], v11 = b.v[uint(c.y) * pc.half_w + uint(c.x)];
    return mix(mix(v00, v10, f.x), mix(v01, v11, f.x), f.y);
}

void main()
{
    uvec2 xy = gl_GlobalInvocationID.xy;
    if (xy.x >= pc.width || xy.y >= pc.height)
        return;
    uint idx = xy.y * pc.width + xy.x;
    vec4 c;
    if (INPUT_FP16) {
        uvec2 v = PixelsF16(pc.pixels).px[idx];
        c = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
    } else {
        c = PixelsF32(pc.pixels).px[idx];
    }
    bool excluded;
    vec3 sharp = dof_sanitize(c, excluded);
    uint mask = InU32(pc.mask).v[(xy.y / 2u) * pc.half_w + xy.x / 2u];
    if ((mask & (1u << (2u * (xy.y & 1u) + (xy.x & 1u)))) != 0u)
        sharp = vec3(0.0);
    float s = InF32(pc.coc).v[idx];

    // Frame pixel centre x + 0.5 is half-resolution coordinate (x + 0.5) / 2; texel centres sit at i + 0.5.
    vec2 u = (vec2(xy) + 0.5) * 0.5 - 0.5;
    vec3 b = sharp;
    float blurred = SAT ? abs(s) : s;
    if (blurred > 0.0) {
        // The far field's alpha marks far pixels: interpolating (rgb * alpha, alpha) and dividing keeps
        // only their colour (an eroded half pixel beside this one is in focus and has none).
        vec4 far = bilinear(pc.far, u);
        if (far.a > 0.0)
            b = mix(sharp, far.rgb / far.a, smoothstep(0.5, 1.5, blurred));
    }
    vec3 o = b;
    if (!SAT) {
        vec4 near = bilinear(pc.near, u);
        o = b * (1.0 - near.a) + near.rgb;
    }
    if (BOKEH) {
        Accum acc = Accum(pc.accum);
        o += vec3(acc.v[3u * idx], acc.v[3u * idx + 1u], acc.v[3u * idx + 2u]);
        acc.v[3u * idx] = 0.0;
        acc.v[3u * idx + 1u] = 0.0;
        acc.v[3u * idx + 2u] = 0.0;
    }
    // An excluded pixel stays black with the alpha the tone pass gives such a pixel.
    OutVec4(pc.out_).v[idx] = vec4(o, excluded ? 1.0 : c.a);
}

#version 460
// The OCIO display stage (issue 34; docs/COLOR.md): a studio's display/view transform from its OpenColorIO
// config, in place of the tone pass's operator, gamut fold and output transfer. Exposure (the exposure stage's
// scale in tone_state) and depth of field (the DOF stage's composite image) come before it, on scene-linear
// data, as they do for the built-in operators.
//
// Unlike every other shader this one is compiled at run time (pipeline/ocio_stage.c, glslang): its middle is
// OCIO's own GLSL 4.0 for the transform, which pipeline/ocio_stage.c puts where the marker line below is, with
// an explicit binding on each of its LUT samplers. The build embeds this file with its includes in place
// (shaders/embed_glsl.py). pipeline/cpu_ocio.c is the same on the CPU: our steps in double, OCIO's CPU
// processor for the transform.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "tone.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const bool INPUT_FP16 = false;
layout(constant_id = 1) const uint OUTPUT_KIND = 1; // 1 RGBA8, 2 RGBA16 (the tone pass's kinds)

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF32 { vec4 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer PixelsF16 { uvec2 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer OutU64 { uvec2 v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 pixels;  //  0 the frame, or the DOF composite (RGBA32F)
    uvec2 output_; //  8 RGBA8 or RGBA16, as the tone pass writes them
    uvec2 state;   // 16 tone_state: the exposure's scale, the translucent word
    uint width;    // 24
    uint height;   // 28
    uint dither;   // 32 1: a step of triangular noise before rounding (output.dither)
    uint pad_;     // 36
    uvec2 luts[4]; // 40 nearest 3D LUTs read from buffers (pipeline/ocio_program.c, buffer_lut): their addresses
} pc;

// @HP_OCIO_TRANSFORM@

void main()
{
    uvec2 xy = gl_GlobalInvocationID.xy;
    if (xy.x >= pc.width || xy.y >= pc.height)
        return;
    uint idx = xy.y * pc.width + xy.x;
    ToneState ts = ToneState(pc.state);
    vec4 c;
    if (INPUT_FP16) {
        uvec2 h = PixelsF16(pc.pixels).px[idx];
        c = vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
    } else {
        c = PixelsF32(pc.pixels).px[idx];
    }
    // DECISIONS.md 2: a NaN or infinite channel makes the pixel black; OCIO would carry it into the output.
    // Negative channels pass: a studio's scene-linear data has them (ACEScg outside its gamut) and OCIO's
    // transform is defined on them, as in the artist's own viewer.
    uvec3 exponent = floatBitsToUint(c.rgb) & 0x7f800000u;
    bool excluded = any(equal(exponent, uvec3(0x7f800000u)));
    vec4 px = vec4(excluded ? vec3(0.0) : c.rgb * ts.scale, 1.0);
    vec3 v = hp_ocio(px).rgb;
    // A NaN out of the transform (a LUT fed a value outside its domain) is written as 0, where the CPU
    // reference writes it too (pipeline/cpu_ocio.c): GLSL leaves the conversion of a NaN undefined.
    v = vec3(isnan(v.r) ? 0.0 : v.r, isnan(v.g) ? 0.0 : v.g, isnan(v.b) ? 0.0 : v.b);
    float alpha = excluded || isnan(c.a) ? 1.0 : clamp(c.a, 0.0, 1.0);

    float noise = pc.dither != 0u ? dither_noise(xy.x, xy.y) : 0.0;
    bool translucent;
    if (OUTPUT_KIND == 1u) {
        uvec3 q = uvec3(clamp(floor(v * 255.0 + 0.5 + noise), 0.0, 255.0));
        uint a = uint(floor(alpha * 255.0 + 0.5));
        OutU32(pc.output_).v[idx] = q.r | (q.g << 8) | (q.b << 16) | (a << 24);
        translucent = a < 255u;
    } else {
        uvec3 q = uvec3(clamp(floor(v * 65535.0 + 0.5 + noise), 0.0, 65535.0));
        uint a = uint(floor(alpha * 65535.0 + 0.5));
        OutU64(pc.output_).v[idx] = uvec2(q.r | (q.g << 16), q.b | (a << 16));
        translucent = a < 65535u;
    }
    // As the tone pass (tonemap.comp, flag_translucent): the host leaves out an alpha that is opaque everywhere.
    if (translucent && ts.translucent == 0u)
        atomicOr(ts.translucent, 1u);
}

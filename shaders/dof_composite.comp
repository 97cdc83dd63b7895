#version 460
// Depth of field's composite as an image of its own: the scene-linear RGBA32F frame the tone pass would
// read. The daemon does not run this pass: its tone pass composites each pixel itself
// (tonemap.comp, DOF on) and never writes this image. Tests and diagnostics use it (output_dof in
// pipeline/frame_graph.h), and the tests hold the two paths to each other. The composite itself is
// shaders/include/dof_composite.glsl.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "dof.glsl"
#include "input_color.glsl"
#include "dof_composite.glsl"

layout(local_size_x = 32, local_size_y = 8) in;
layout(constant_id = 0) const bool INPUT_FP16 = false;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF32 { vec4 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer PixelsF16 { uvec2 px[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer OutVec4 { vec4 v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 pixels;  //  0
    uvec2 coc;     //  8
    uvec2 mask;    // 16
    uvec2 near;    // 24
    uvec2 far;     // 32
    uvec2 accum;   // 40  0 without bokeh
    uvec2 out_;    // 48  RGBA32F
    uint width;    // 56
    uint height;   // 60
    uint half_w;   // 64
    uint half_h;   // 68
    uint sat;      // 72
    uint pad;      // 76
    uvec2 dilated; // 80
    uvec2 state;   // 88  tone_state: word 0 is the exposure scale
} pc;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ToneScale { float scale; };

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
    if (input_color_wanted(pc.state))
        c = input_color(pc.state, c);
    bool excluded;
    vec3 sharp = dof_sanitize(c, working_luma(pc.state), excluded);
    DofInputs d = DofInputs(pc.coc, pc.mask, pc.near, pc.far, pc.accum, pc.dilated,
                            ToneScale(pc.state).scale > 0.0 ? 1.0 / ToneScale(pc.state).scale : 0.0, pc.width,
                            pc.half_w, pc.half_h, pc.sat != 0u);
    // An excluded pixel keeps the alpha the tone pass gives such a pixel.
    OutVec4(pc.out_).v[idx] = vec4(dof_composite(d, xy, sharp), excluded ? 1.0 : c.a);
}

#version 460
// Depth of field, pass 2 (pipeline/dof.c): the near CoC of each tile dilated over its neighbourhood.
// A blurred foreground spreads over whatever lies beside it, in focus or not, so a pixel's gather kernel
// must reach as far as any near pixel within the largest near CoC could throw its light (the "tile max"
// and "neighbourhood max" passes of Jimenez 2014, algorithms.md 5.3). The radius in tiles covers
// dof.max_coc_px. The far CoC is not dilated: the far field gathers with each pixel's own radius
// (algorithms.md 5.2 step 3).
// Two dilations: x over the radius the gather needs, y one tile further, which the composite reads to
// skip the near field where it is certainly empty (a near field one half pixel into the next tile
// comes from near pixels the wider radius sees).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require

#include "hp_dof.h"
#include "bokeh_args.glsl"

layout(local_size_x = 8, local_size_y = 8) in;

layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer InVec2 { vec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer OutVec2 { vec2 v[]; };

layout(push_constant, std430) uniform Push {
    uvec2 tiles;   //  0
    uvec2 dilated; //  8
    uint tiles_w;  // 16
    uint tiles_h;  // 20
    uint radius;   // 24  tiles
    uint max_sprites; // 28  bokeh: the budget; 0 off
    uvec2 sprites; // 32  bokeh: the control words
} pc;

void main()
{
    uvec2 t = gl_GlobalInvocationID.xy;
    if (pc.max_sprites > 0u && t == uvec2(0u))
        bokeh_args(pc.sprites, pc.max_sprites);
    if (t.x >= pc.tiles_w || t.y >= pc.tiles_h)
        return;
    InVec2 tiles = InVec2(pc.tiles);
    int r = int(pc.radius);
    float near = 0.0, wider = 0.0;
    for (int dy = -r - 1; dy <= r + 1; dy++) {
        int y = int(t.y) + dy;
        if (y < 0 || y >= int(pc.tiles_h))
            continue;
        for (int dx = -r - 1; dx <= r + 1; dx++) {
            int x = int(t.x) + dx;
            if (x < 0 || x >= int(pc.tiles_w))
                continue;
            float n = tiles.v[uint(y) * pc.tiles_w + uint(x)].x;
            wider = max(wider, n);
            if (abs(dx) <= r && abs(dy) <= r)
                near = max(near, n);
        }
    }
    OutVec2(pc.dilated).v[t.y * pc.tiles_w + t.x] = vec2(near, wider);
}

#version 460
// Depth of field, fast path (dof.method = "sat"): a summed-area table of the half-resolution colour and
// a box of each pixel's CoC read from it with four lookups, constant time per pixel whatever the blur
// (Crow 1984; Hensley et al. 2005; the seed talk's SAT depth of field; algorithms.md 7). Three modules
// from this source (shaders/meson.build):
//   HP_SAT_ROWS   one workgroup per row, over it in chunks of its width: subgroup inclusive sums
//                 (subgroupInclusiveAdd on 64-bit integers), the subgroups' totals through shared
//                 memory, and the carry of the chunks before: the row's inclusive prefix sums.
//   HP_SAT_COLS   the same down the columns, as segments: a workgroup takes HP_SAT_COL_X columns, each
//                 column cut into HP_SAT_COL_SEGMENTS segments, one invocation each (the seed's "segment
//                 sums, then offsets"), in place.
//   HP_SAT_QUERY  per half-resolution pixel: the mean over the box of the CoC disc's area,
//                 clipped to the frame, from four lookups (algorithms.md 7's box sum).
// Precision (algorithms.md 7 warns that an fp32 table of a 1080p frame loses most of a small box): the
// sums are 64-bit integers in a fixed point chosen per frame from its largest luminance (hp_dof.h), so
// every box sum is exact.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_subgroup_extended_types_int64 : require

#include "hp_shared.h"
#include "hp_dof.h"
#include "bokeh_args.glsl"
#include "dof.glsl"

#if defined(HP_SAT_ROWS)
layout(local_size_x = HP_SAT_ROW_WG) in;
#elif defined(HP_SAT_COLS)
layout(local_size_x = HP_SAT_COL_X, local_size_y = HP_SAT_COL_SEGMENTS) in;
#else
layout(local_size_x = 8, local_size_y = 8) in;
#endif

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer InVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer OutVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) writeonly buffer OutField { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ToneScale { float scale; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Table { uint64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Stats { uint counts[2]; float min_y, max_y; };

layout(push_constant, std430) uniform Push {
    uvec2 half_;  //  0  vec4: colour, signed CoC
    uvec2 table;  //  8  3 x uint64 per half pixel
    uvec2 stats;  // 16  lum_stats (max_y)
    uvec2 far;    // 24  out (query): box mean, 1 (dof_pack_field)
    uint half_w;  // 32
    uint half_h;  // 36
    float max_coc; // 40
    uint max_sprites; // 44  bokeh: the budget; 0 off (rows: sizes the splat, bokeh_args.glsl)
    uvec2 sprites; // 48
    uvec2 state;   // 56  tone_state: word 0 is the exposure scale
} pc;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer TonePercentile { float w[HP_TONE_STATE_WORDS]; };

// The fixed point's fraction bits F (hp_dof.h): from the frame's largest luminance, or from 2^16 times its
// 99th percentile when that is smaller, so that one firefly a billion times brighter than the frame does
// not take the precision of everything else; the few pixels above the bound are clipped to it (they are
// the bokeh's, not the blur's). frexp gives the exponent exactly: bound < 2^e. F may be negative for
// frames in the 1e14s.
int fixed_bits()
{
    float p99 = TonePercentile(pc.state).w[7];
    float peak = Stats(pc.stats).max_y;
    float bound = TonePercentile(pc.state).w[HP_TONE_STATE_SAT_BOUND] * (p99 > 0.0 ? min(peak, 65536.0 * p99) : peak);
    int e;
    frexp(max(bound, 1e-30), e);
    return clamp(HP_SAT_FIXED_BITS - e, -60, 100);
}

u64vec3 quantize(vec3 v, float scale)
{
    // Exact below the bound: scale is a power of two, and the conversion truncates. Above it, clipped to
    // 2^HP_SAT_FIXED_BITS, which no box of the table can then overflow.
    return u64vec3(min(v * scale, vec3(float(1ul << HP_SAT_FIXED_BITS))));
}

#if defined(HP_SAT_ROWS)

// The row in chunks of the workgroup's width, each element loaded by its own invocation (coalesced):
// subgroup inclusive sums, then the subgroups' totals in shared memory, then the running carry of the
// chunks before.
shared u64vec3 s_sub[HP_SAT_ROW_WG]; // one per subgroup (up to one per invocation on any subgroup size)

void main()
{
    uint y = gl_WorkGroupID.x;
    uint t = gl_LocalInvocationIndex;
    if (pc.max_sprites > 0u && y == 0u && t == 0u)
        bokeh_args(pc.sprites, pc.max_sprites);
    float scale = exp2(float(fixed_bits()));
    InVec4 src = InVec4(pc.half_);
    Table table = Table(pc.table);
    uint row = y * pc.half_w;
    u64vec3 carry = u64vec3(0ul);
    for (uint base = 0u; base < pc.half_w; base += HP_SAT_ROW_WG) {
        uint x = base + t;
        u64vec3 v = x < pc.half_w ? quantize(src.v[row + x].rgb, scale) : u64vec3(0ul);
        u64vec3 incl = subgroupInclusiveAdd(v);
        if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u)
            s_sub[gl_SubgroupID] = incl;
        barrier();
        if (t == 0u)
            for (uint i = 1u; i < gl_NumSubgroups; i++)
                s_sub[i] += s_sub[i - 1u];
        barrier();
        u64vec3 sum = incl + carry + (gl_SubgroupID > 0u ? s_sub[gl_SubgroupID - 1u] : u64vec3(0ul));
        if (x < pc.half_w) {
            uint o = 3u * (row + x);
            table.v[o] = sum.x;
            table.v[o + 1u] = sum.y;
            table.v[o + 2u] = sum.z;
        }
        carry += s_sub[gl_NumSubgroups - 1u];
        barrier();
    }
}

#elif defined(HP_SAT_COLS)

shared u64vec3 s_seg[HP_SAT_COL_SEGMENTS][HP_SAT_COL_X];

void main()
{
    uint cx = gl_LocalInvocationID.x, sg = gl_LocalInvocationID.y;
    uint x = gl_WorkGroupID.x * HP_SAT_COL_X + cx;
    uint len = (pc.half_h + HP_SAT_COL_SEGMENTS - 1u) / HP_SAT_COL_SEGMENTS;
    uint y0 = min(sg * len, pc.half_h), y1 = min(y0 + len, pc.half_h);
    bool live = x < pc.half_w;
    Table table = Table(pc.table);
    u64vec3 total = u64vec3(0ul);
    if (live) {
        for (uint y = y0; y < y1; y++) {
            uint o = 3u * (y * pc.half_w + x);
            total += u64vec3(table.v[o], table.v[o + 1u], table.v[o + 2u]);
        }
    }
    s_seg[sg][cx] = total;
    barrier();
    u64vec3 acc = u64vec3(0ul);
    for (uint s = 0u; s < sg; s++)
        acc += s_seg[s][cx];
    if (live) {
        for (uint y = y0; y < y1; y++) {
            uint o = 3u * (y * pc.half_w + x);
            acc += u64vec3(table.v[o], table.v[o + 1u], table.v[o + 2u]);
            table.v[o] = acc.x;
            table.v[o + 1u] = acc.y;
            table.v[o + 2u] = acc.z;
        }
    }
}

#elif defined(HP_SAT_QUERY)

u64vec3 at(Table table, int x, int y)
{
    if (x < 0 || y < 0)
        return u64vec3(0ul);
    uint o = 3u * (uint(y) * pc.half_w + uint(x));
    return u64vec3(table.v[o], table.v[o + 1u], table.v[o + 2u]);
}

void main()
{
    uvec2 p = gl_GlobalInvocationID.xy;
    if (p.x >= pc.half_w || p.y >= pc.half_h)
        return;
    uint idx = p.y * pc.half_w + p.x;
    float s = InVec4(pc.half_).v[idx].a;
    // Half-size in half-resolution pixels: the box of the disc's area (hp_dof.h), to the nearest pixel.
    int rb = int(floor(min(abs(s), pc.max_coc) * (0.5 * float(HP_SAT_BOX_SCALE)) + 0.5));
    int x0 = max(int(p.x) - rb, 0), x1 = min(int(p.x) + rb, int(pc.half_w) - 1);
    int y0 = max(int(p.y) - rb, 0), y1 = min(int(p.y) + rb, int(pc.half_h) - 1);
    Table table = Table(pc.table);
    // Wrap-around arithmetic: the four terms may overflow on the way, the box sum cannot.
    u64vec3 sum = at(table, x1, y1) - at(table, x0 - 1, y1) - at(table, x1, y0 - 1) + at(table, x0 - 1, y0 - 1);
    float area = float((x1 - x0 + 1) * (y1 - y0 + 1));
    float inv_scale = exp2(-float(fixed_bits()));
    // Every pixel is blurred by the SAT: alpha 1.
    OutField(pc.far).v[idx] = dof_pack_field(vec4(vec3(sum) * inv_scale / area, 1.0), ToneScale(pc.state).scale);
}

#else
#error "define HP_SAT_ROWS, HP_SAT_COLS or HP_SAT_QUERY"
#endif

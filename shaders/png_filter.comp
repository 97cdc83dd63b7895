#version 460
// PNG filtering on the GPU (issue 20): the tone pass's RGBA8 or RGBA16 image (host order, tonemap.comp
// OUTPUT_KIND 1 and 2) becomes PNG's filtered scanlines, a filter byte then the row, samples in PNG's
// layout (alpha kept or dropped, 16-bit samples big-endian: PNG 7.1), ready for shaders/png_deflate.comp.
// One source, two modules (shaders/meson.build):
//   HP_PNG_FILTER_CHOOSE  one workgroup per row: every invocation evaluates its columns under the five
//                         filters and the workgroup keeps the type of the smallest sum of magnitudes,
//                         the bytes taken as signed (libpng's heuristic); the first type wins a tie, as
//                         png_filter_choose() in api/codecs/encode.c. Writes one word per row: the type.
//   HP_PNG_FILTER_APPLY   one workgroup per row: writes the 32-bit words whose first byte lies in the row
//                         (a word that runs into the next row takes that row's bytes too: its type is
//                         already known), so no word is written twice and nothing needs atomics.
// The filters (PNG 9.2-9.4) are computed from the packed row bytes; the row above row 0 is zeros.
// Every buffer is reached through a device address (pipeline/gpu.h).
// output.alpha auto (tone_state set): the alpha is kept only where the tone pass found some alpha below its
// maximum (tone_state's translucent word, written earlier in the same command buffer), as the CPU's
// encoder decides from the word read back; the dispatch and the buffers are the 4-channel image's.
#include "hp_shared.h"
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;        // invocations per workgroup (pipeline/png_gpu.c)
#define WG gl_WorkGroupSize.x

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RowTypes { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer OutWords { uint v[]; };

// Push constants; pipeline/png_gpu.c's struct png_filter_push mirrors it.
//   offset  field     meaning
//   0       image     the tone pass's output: RGBA8 (one word a pixel) or RGBA16 (two words), tight rows
//   8       filtered  height * (1 + row_bytes) bytes, padded to a word
//   16      types     one word per row: the chosen filter type
//   24      width     pixels, 1..16384
//   28      height    rows, 1..16384
//   32      channels  samples kept per pixel: 3 (alpha dropped) or 4
//   36      depth     8 or 16 bits per sample
//   40      tone_state  0, or tone_state (hp_shared.h) for output.alpha auto: channels 4 then means 3
//                       unless its translucent word is set
layout(push_constant, std430) uniform Push {
    uvec2 image;
    uvec2 filtered;
    uvec2 types;
    uint width;
    uint height;
    uint channels;
    uint depth;
    uvec2 tone_state;
} pc;

// The samples kept per pixel: pc.channels, or with output.alpha auto what the tone pass found. Read once
// in main (g_channels): every invocation of the dispatch reads the same word.
uint kept_channels()
{
    if (pc.tone_state == uvec2(0u))
        return pc.channels;
    return Words(pc.tone_state).v[HP_TONE_STATE_TRANSLUCENT] != 0u ? 4u : 3u;
}
uint g_channels;

// Byte i of row y in PNG's sample layout.
uint row_byte(uint y, uint i)
{
    Words img = Words(pc.image);
    if (pc.depth == 8u) {
        uint px = i / g_channels, c = i - px * g_channels;
        return (img.v[y * pc.width + px] >> (8u * c)) & 0xffu;
    }
    uint s = i >> 1u, px = s / g_channels, c = s - px * g_channels;
    uint v16 = (img.v[(y * pc.width + px) * 2u + (c >> 1u)] >> (16u * (c & 1u))) & 0xffffu;
    return (i & 1u) == 0u ? v16 >> 8u : v16 & 0xffu; // big-endian samples (PNG 7.1)
}

uint row_bytes() { return pc.width * g_channels * (pc.depth / 8u); }
uint bpp() { return g_channels * (pc.depth / 8u); }

// x the byte, a the byte bpp to its left (0 at the row's start), b the byte above, c above-left.
void neighbours(uint y, uint i, out uint x, out uint a, out uint b, out uint c)
{
    uint n = bpp();
    x = row_byte(y, i);
    a = i >= n ? row_byte(y, i - n) : 0u;
    b = y > 0u ? row_byte(y - 1u, i) : 0u;
    c = i >= n && y > 0u ? row_byte(y - 1u, i - n) : 0u;
}

// PNG 9.4, with api/codecs/encode.c's tie order: a, then b, then c.
uint paeth(uint a, uint b, uint c)
{
    int p = int(a) + int(b) - int(c);
    int pa = abs(p - int(a)), pb = abs(p - int(b)), pc_ = abs(p - int(c));
    return pa <= pb && pa <= pc_ ? a : (pb <= pc_ ? b : c);
}

uint filter_byte(uint type, uint x, uint a, uint b, uint c)
{
    uint pred = type == 0u ? 0u : type == 1u ? a : type == 2u ? b : type == 3u ? (a + b) >> 1u : paeth(a, b, c);
    return (x - pred) & 0xffu;
}

// |byte as a signed 8-bit value|
uint magnitude(uint v) { return v < 128u ? v : 256u - v; }

#if defined(HP_PNG_FILTER_CHOOSE)

// One slot per subgroup: as many as invocations covers every subgroup size.
shared uint s_sums[5][gl_WorkGroupSize.x];

void main()
{
    g_channels = kept_channels();
    uint y = gl_WorkGroupID.x;
    uint n = row_bytes();
    uint s0 = 0u, s1 = 0u, s2 = 0u, s3 = 0u, s4 = 0u;
    for (uint i = gl_LocalInvocationIndex; i < n; i += WG) {
        uint x, a, b, c;
        neighbours(y, i, x, a, b, c);
        s0 += magnitude(filter_byte(0u, x, a, b, c));
        s1 += magnitude(filter_byte(1u, x, a, b, c));
        s2 += magnitude(filter_byte(2u, x, a, b, c));
        s3 += magnitude(filter_byte(3u, x, a, b, c));
        s4 += magnitude(filter_byte(4u, x, a, b, c));
    }
    // A row holds at most 131072 bytes of magnitude at most 128: 2^24, so every sum fits with room.
    s0 = subgroupAdd(s0), s1 = subgroupAdd(s1), s2 = subgroupAdd(s2), s3 = subgroupAdd(s3), s4 = subgroupAdd(s4);
    if (subgroupElect()) {
        s_sums[0][gl_SubgroupID] = s0;
        s_sums[1][gl_SubgroupID] = s1;
        s_sums[2][gl_SubgroupID] = s2;
        s_sums[3][gl_SubgroupID] = s3;
        s_sums[4][gl_SubgroupID] = s4;
    }
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        uint best = 0xffffffffu;
        for (uint t = 0u; t < 5u; t++) {
            uint sum = 0u;
            for (uint g = 0u; g < gl_NumSubgroups; g++)
                sum += s_sums[t][g];
            // (sum, type) ordered as one key: the smallest sum, and of equal sums the first type.
            best = min(best, (sum << 3u) | t);
        }
        RowTypes(pc.types).v[y] = best & 7u;
    }
}

#elif defined(HP_PNG_FILTER_APPLY)

uint filtered_byte(uint o, uint stride)
{
    uint y = o / stride, col = o - y * stride;
    uint type = RowTypes(pc.types).v[y];
    if (col == 0u)
        return type;
    uint x, a, b, c;
    neighbours(y, col - 1u, x, a, b, c);
    return filter_byte(type, x, a, b, c);
}

void main()
{
    g_channels = kept_channels();
    uint y = gl_WorkGroupID.x;
    uint stride = 1u + row_bytes();
    uint total = stride * pc.height;
    uint row_start = y * stride, row_end = row_start + stride;
    // The words whose first byte is in this row.
    uint w0 = (row_start + 3u) / 4u, w1 = (row_end + 3u) / 4u;
    OutWords out_ = OutWords(pc.filtered);
    for (uint w = w0 + gl_LocalInvocationIndex; w < w1; w += WG) {
        uint word = 0u;
        for (uint j = 0u; j < 4u; j++) {
            uint o = 4u * w + j;
            if (o < total)
                word |= filtered_byte(o, stride) << (8u * j);
        }
        out_.v[w] = word;
    }
}

#else
#error "define HP_PNG_FILTER_CHOOSE or HP_PNG_FILTER_APPLY"
#endif

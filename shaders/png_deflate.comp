#version 460
// Deflate (RFC 1951) of PNG's filtered scanlines on the GPU (issue 20): one workgroup per segment of
// SEGMENT = WG x CHUNK bytes of shaders/png_filter.comp's output; every segment becomes a run of deflate
// blocks that ends on a byte boundary, so the segments concatenate, in order, into one deflate stream
// (pipeline/png_gpu.c puts the zlib header and the Adler-32 around them).
//
// 1. Parse (LZ77). Each invocation owns CHUNK consecutive bytes of the segment and parses them greedily;
//    its matches end inside its own chunk, so the chunks parse at once (the sub-block parallelism of
//    Gompresso, Sitaridi et al., ICPP 2016), but they may start anywhere behind, up to deflate's 32 KiB
//    window: the filtered image is in memory whole, and the decoder has every earlier byte of the stream,
//    earlier segments' included. Candidates, the longest wins (the first of equal lengths):
//      distance 1 and bpp     runs of a byte, of a pixel (flat regions filter to runs);
//      distance stride        the row above (filter 0 or 1 rows of repeated content);
//      the hash table         the latest position with the same hash of 3 bytes, in shared memory.
//    The invocations walk their chunks in lockstep, one byte a step: all look up, a barrier, all insert
//    the position they stand on (inside a match too), a barrier. An entry is (step + 1, ~invocation):
//    atomicMax keeps the latest step and, of one step, the lowest invocation, so the table and the output
//    are the same on every device and every run. The table holds this segment's positions only.
// 2. Code. One block per segment, whichever of three is smallest, its size known exactly before a bit
//    is written:
//      dynamic Huffman (3.2.7)  codes from the segment's own histogram (shared atomics during the parse),
//                               with REPRICE (off by default, below) built twice: the matches that the
//                               first code prices above their bytes as literals are sent as literals, and
//                               the second code is built from the counts that follow (see main);
//                               Huffman's construction by two queues over the counts sorted by a rank
//                               sort (every invocation ranks its symbols), then one invocation builds the
//                               tree; deeper than 15 bits (7 for the code-length code), the counts are
//                               halved (at least 1) and it is built again, as deflate_runs.c does, as
//                               libwebp and brotli do: rare, and simpler than package-merge for a single
//                               invocation. The header (code lengths run-length coded, 3.2.7) is written
//                               by one invocation; it is a few hundred bits;
//      fixed Huffman (3.2.6)    no header: wins on tiny segments;
//      stored (3.2.4)           wins on noise.
//    Each invocation counts the bits of its tokens under the chosen code; an exclusive scan of the counts
//    over the workgroup gives each its bit offset, and each writes its bits with atomicOr into words the
//    workgroup zeroed. The block ends with the end-of-block code, then an empty stored block (a sync
//    flush: byte-aligned; zlib's Z_SYNC_FLUSH) unless it is the stream's last segment, whose header says
//    BFINAL (a stored block ends byte-aligned by itself). A segment never takes more than SEGMENT + 5
//    bytes: the stored block's size.
// 3. The segment's Adler-32 (RFC 1950 8.2), of its filtered bytes alone, from every invocation's sums;
//    the host combines the segments' with zlib's adler32_combine.
//
// 4. Two more dispatches put the segments end to end (HP_PNG_OFFSETS: one workgroup scans the byte
//    counts into offsets; HP_PNG_COMPACT: one workgroup per segment moves its bytes, shifted to their
//    offset), so that only the compressed bytes and the table need come back.
//
// Sizes (issue 20), the 4K street frame (make_frame ... 4 zip, 3840x2160), measured through the daemon on
// lavapipe and by a model of this shader in C that gives the same bytes: the GPU's PNG is 11,225,284 bytes
// with the alpha (the GPU path keeps an opaque one, params.c) and 9,870,427 without (output.alpha=drop);
// the CPU's default, always RGB here, 9,880,924. With the same channels the GPU's stream is already the
// smaller; the 14% between the defaults is the opaque alpha's byte a pixel (zero once filtered, about 1.4
// bits a pixel as a literal: deflate has no context to make it cheaper). Tried in that model and left out,
// RGBA / RGB deflate bytes against this shader's 11,224,978 / 9,870,121: lazy matching (zlib's
// deflate_slow) 11,224,923 / 9,870,071; matches across the chunk's end 11,223,589 / 9,867,738 (-0.02%);
// candidates 2 x stride, or stride +- bpp, beside the others 11,225,112 / 9,870,223 and 11,225,169 /
// 9,870,410; no hash probe 11,224,704 / 9,869,881 (on this frame the table finds next to nothing);
// package-merge's optimal lengths instead of halving the counts 6 / 7 bytes less (15 bits is rarely hit);
// minimum runs of 4: 11,233,022 / 9,874,694; others from 12: 11,226,395 / 9,871,659, from 24:
// 11,224,653 / 9,869,761; 16 KiB segments 11,265,006 / 9,890,967; two blocks a segment +0.3% (the
// headers cost more than the closer statistics save).
//
// The launch shape (pipeline/png_gpu.h's HP_PNG_GPU_CONFIG_DEFAULTS): 1024 invocations of 32 bytes. The sizes
// above were measured at 256 of 128; the shorter chunks end matches sooner, 0.01-0.12% more bytes on frames of
// real texture, and the pass is 1.8-2.0 times faster on an H200 (filter and deflate 1.7-1.8): each invocation's
// serial chain of loads is a quarter as long, with four times as many in a workgroup (by its 32 registers and
// 24.5 KB, two workgroups may share an SM, as two of 256 did; not measured: docs/BENCHMARKS.md, "The PNG
// encoder's launch shape"). Four copies of the literal counts by lane, to spread the atomics of equal bytes,
// gained nothing there.
//
// Two switches (specialization constants, pipeline/png_gpu.h's hp_png_gpu_config), measured side by side by
// bench/bench_png_gpu.c (H200, docs/BENCHMARKS.md, issue 20):
//   HASH_PROBE, on: the hash table and its two barriers a byte (off: the fixed candidates alone, each
//     invocation parsing at its own pace). It costs 0.4 to 3.3 ms of a 4K frame's deflate, and finds what
//     the others cannot on repeated content: the street frame tiled 4x4, 0.537 of the filtered bytes
//     against 0.726 without (the CPU encoder's 0.726); on bench_http's frame the same size either way.
//   REPRICE, off: the second Huffman build above. It takes under 0.01% from RGB frames (0.003% on
//     bench_http's frame) and 1.6% from an RGBA one whose alpha is kept and opaque (runs of zero bytes),
//     for 0.4 ms of bench_http's 4K frame and 3 ms of the tiled one.
// Matches are compared a word at a time (fword: the filtered buffer has a word of padding after its last
// byte, pipeline/png_gpu.c).
//
// output.alpha auto (tone_state set): the image's shape (channels, so bpp, stride, total and segments)
// follows the tone pass's translucent word, as png_filter.comp's does; the dispatches are the 4-channel
// image's, and the workgroups past the 3-channel image's segments do nothing.
//
// Not yet (issue 20): the token scratch in shared memory, the offsets and the Adler-32 combine inside the
// deflate dispatch (the last workgroup to arrive, as reduce.comp does).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "hp_shared.h"

layout(local_size_x_id = 0) in;              // invocations per workgroup (pipeline/png_gpu.c)
layout(constant_id = 1) const uint CHUNK = 128u; // bytes each invocation parses
layout(constant_id = 2) const bool HASH_PROBE = true; // the hash table's candidate (see above)
layout(constant_id = 3) const bool REPRICE = false;   // matches priced by the first code, a second build
#define WG gl_WorkGroupSize.x
#define SEGMENT (WG * CHUNK)

#define HASH_BITS 12u
#define HASH_SIZE (1u << HASH_BITS)
#define WINDOW 32768u
#define MAX_MATCH 258u
#define MIN_MATCH 3u
#ifndef MIN_RUN
#define MIN_RUN 5u
#endif
#ifndef MIN_FAR
#define MIN_FAR 16u
#endif
#define TOKEN_MATCH 0x80000000u
// A match the dynamic code prices above its bytes as literals: sent as those literals (dynamic block only).
#define TOKEN_AS_LITERALS 0x40000000u

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Bytes { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };

// Push constants; pipeline/png_gpu.c's struct png_deflate_push mirrors it.
//   offset  field       meaning
//   0       filtered    the filtered scanlines, `total` bytes padded to a word
//   8       slots       the output: segment s at word s * slot_words
//   16      table       per segment 4 words: bytes written, Adler-32, BTYPE (0 stored, 1 fixed, 2 dynamic),
//                       and the byte offset in the joined stream (HP_PNG_OFFSETS writes it)
//   24      tokens      scratch: one word per filtered byte at most (segment s at word s * SEGMENT)
//   32      joined      the segments end to end (HP_PNG_COMPACT writes it)
//   40      tone_state  0, or tone_state (hp_shared.h) for output.alpha auto (see above)
//   48      width       pixels
//   52      height      rows
//   56      channels    samples per pixel, 3 or 4 (4 with tone_state: 3 unless its translucent word is set)
//   60      depth       bits per sample, 8 or 16
//   64      slot_words  words per segment's slot
layout(push_constant, std430) uniform Push {
    uvec2 filtered;
    uvec2 slots;
    uvec2 table;
    uvec2 tokens;
    uvec2 joined;
    uvec2 tone_state;
    uint width;
    uint height;
    uint channels;
    uint depth;
    uint slot_words;
} pc;

// The filtered image's shape: bytes per pixel (PNG 9.2's bpp: 3, 4, 6 or 8), bytes per filtered row (the
// filter byte included), filtered bytes in all, and segments (the last one ends the stream: BFINAL).
struct Shape {
    uint bpp, stride, total, segments;
};

Shape image_shape()
{
    uint channels = pc.channels;
    if (pc.tone_state != uvec2(0u))
        channels = Bytes(pc.tone_state).v[HP_TONE_STATE_TRANSLUCENT] != 0u ? 4u : 3u;
    Shape sh;
    sh.bpp = channels * (pc.depth / 8u);
    sh.stride = 1u + pc.width * sh.bpp;
    sh.total = pc.height * sh.stride;
    sh.segments = (sh.total + SEGMENT - 1u) / SEGMENT;
    return sh;
}

// The three alphabets side by side in the shared arrays: literal/length 0..285, distance 286..315,
// code-length 316..334.
#define LL_CODES 286u
#define D_CODES 30u
#define CL_CODES 19u
#define D_BASE LL_CODES
#define CL_BASE (LL_CODES + D_CODES)
#define ALL_CODES (LL_CODES + D_CODES + CL_CODES)

// The parse's hash table, then the Huffman build's arrays in the same words: with HASH_PROBE the table is
// dead once the parse's last barrier is passed, and the build begins after it; without, nothing but the
// zeroing at the start touches it. What a workgroup holds of shared memory
// bounds the segments an SM runs at once: the H200's driver gave the pass 48 KB an SM, and with the build's
// arrays apart (28.4 KB at 256 invocations) one segment ran on an SM at a time; 21.4 KB let two
// (docs/BENCHMARKS.md, "Frames' chunks together"). At the default 1024 invocations it is 24.5 KB (the scan
// slots grow with the invocations).
shared uint s_hash[HASH_SIZE];
#define NODE_AT 0u                          // Huffman build: weights, then depths (2 x LL_CODES)
#define PARENT_AT (2u * LL_CODES)           // (2 x LL_CODES)
#define LEAF_AT (4u * LL_CODES)             // symbols in ascending (count, symbol) order (LL_CODES)
#define RLE_AT (5u * LL_CODES)              // the code lengths as sent: code-length symbol | extra << 8
                                            // (LL_CODES + D_CODES): 1746 words in all, of HASH_SIZE's 4096
#define s_node(i) s_hash[NODE_AT + (i)]
#define s_parent(i) s_hash[PARENT_AT + (i)]
#define s_leaf(i) s_hash[LEAF_AT + (i)]
#define s_rle(i) s_hash[RLE_AT + (i)]
// A compile error (an array of no words or fewer) if the build's arrays outgrow the hash table.
struct AliasFits { uint room[int(HASH_SIZE) - int(RLE_AT + LL_CODES + D_CODES) + 1]; };
shared uint s_scan[gl_WorkGroupSize.x]; // one slot per subgroup: as many as invocations covers any size
shared uint s_freq[ALL_CODES];
shared uint s_len[ALL_CODES];
shared uint s_code[ALL_CODES];          // canonical codes, bit-reversed for the LSB-first writer
shared uint s_count, s_done, s_hlit, s_hdist, s_hclen, s_nrle, s_header_bits;

uint fbyte(uint i) { return (Bytes(pc.filtered).v[i >> 2u] >> (8u * (i & 3u))) & 0xffu; }

uint hash3(uint p)
{
    uint v = fbyte(p) | (fbyte(p + 1u) << 8u) | (fbyte(p + 2u) << 16u);
    return (v * 2654435761u) >> (32u - HASH_BITS);
}

// The 4 bytes from byte i, little-endian, from the one or two words they lie in (the word after the last
// is padding: pipeline/png_gpu.c).
uint fword(uint i)
{
    Bytes b = Bytes(pc.filtered);
    uint w = i >> 2u, shift = 8u * (i & 3u);
    uint lo = b.v[w];
    return shift == 0u ? lo : (lo >> shift) | (b.v[w + 1u] << (32u - shift));
}

// How many bytes from p repeat those from q, at most max_len: a word at a time, the first differing
// byte found from the lowest set bit of the words' difference.
uint match_length(uint p, uint q, uint max_len)
{
    for (uint n = 0u; n < max_len; n += 4u) {
        uint diff = fword(p + n) ^ fword(q + n);
        if (diff != 0u)
            return min(n + uint(findLSB(diff)) / 8u, max_len);
    }
    return max_len;
}

// --- Fixed Huffman codes and the length and distance codes (RFC 1951 3.2.5, 3.2.6) -------------------

// Code (already bit-reversed: deflate sends Huffman codes from their most significant bit) and length.
uvec2 fixed_litlen(uint sym)
{
    uint code, len;
    if (sym < 144u)
        code = 0x30u + sym, len = 8u;
    else if (sym < 256u)
        code = 0x190u + sym - 144u, len = 9u;
    else if (sym < 280u)
        code = sym - 256u, len = 7u;
    else
        code = 0xc0u + sym - 280u, len = 8u;
    return uvec2(bitfieldReverse(code) >> (32u - len), len);
}

// Length 3..258 -> (symbol 257..285, extra bits, extra value).
uvec3 length_code(uint len)
{
    if (len == 258u)
        return uvec3(285u, 0u, 0u);
    uint l = len - 3u;
    if (l < 8u)
        return uvec3(257u + l, 0u, 0u);
    uint e = uint(findMSB(l)) - 2u;
    return uvec3(257u + 4u * (e + 1u) + ((l >> e) & 3u), e, l & ((1u << e) - 1u));
}

// Distance 1..32768 -> (code 0..29, extra bits, extra value).
uvec3 distance_code(uint dist)
{
    uint d = dist - 1u;
    if (d < 4u)
        return uvec3(d, 0u, 0u);
    uint e = uint(findMSB(d)) - 1u;
    return uvec3(2u * e + 2u + ((d >> e) & 1u), e, d & ((1u << e) - 1u));
}

// The order the code-length code's lengths are sent in (3.2.7).
const uint CLEN_ORDER[19] = uint[19](16u, 17u, 18u, 0u, 8u, 7u, 9u, 6u, 10u, 5u, 11u, 4u, 12u, 3u, 13u, 2u, 14u, 1u, 15u);

uint clen_extra_bits(uint sym) { return sym == 16u ? 2u : sym == 17u ? 3u : sym == 18u ? 7u : 0u; }

// --- Huffman code lengths, built by the whole workgroup -------------------------------------------

// Lengths s_len[base .. base + n) from s_freq[base ..], none over `limit` bits; unused symbols get 0.
// Every invocation calls it (it has barriers).
void build_lengths(uint base, uint n, uint limit)
{
    for (uint shift = 0u;; shift++) {
        if (gl_LocalInvocationIndex == 0u)
            s_count = 0u;
        barrier();
        // Rank sort: the position of each used symbol among the used ones by (count, symbol).
        for (uint s = gl_LocalInvocationIndex; s < n; s += WG) {
            s_len[base + s] = 0u;
            uint f = s_freq[base + s];
            if (f == 0u)
                continue;
            uint key = (max(f >> shift, 1u) << 9u) | s, rank = 0u;
            for (uint o = 0u; o < n; o++) {
                uint g = s_freq[base + o];
                rank += g != 0u && ((max(g >> shift, 1u) << 9u) | o) < key ? 1u : 0u;
            }
            s_leaf(rank) = s;
            s_node(rank) = max(f >> shift, 1u);
            atomicAdd(s_count, 1u);
        }
        barrier();
        if (gl_LocalInvocationIndex == 0u) {
            uint m = s_count;
            s_done = 1u;
            if (m == 1u) { // a second symbol of length 1 makes the code complete, as zlib wants
                s_len[base + s_leaf(0)] = 1u;
                s_len[base + (s_leaf(0) == 0u ? 1u : 0u)] = 1u;
            } else if (m > 1u) {
                // Nodes 0..m-1 are the leaves, m..2m-2 the internal nodes in the order made (weights
                // nondecreasing): two queues, no heap (van Leeuwen 1976).
                uint li = 0u, ii = m;
                for (uint next = m; next < 2u * m - 1u; next++) {
                    uint pick0 = li < m && (ii >= next || s_node(li) <= s_node(ii)) ? li++ : ii++;
                    uint pick1 = li < m && (ii >= next || s_node(li) <= s_node(ii)) ? li++ : ii++;
                    s_node(next) = s_node(pick0) + s_node(pick1);
                    s_parent(pick0) = next;
                    s_parent(pick1) = next;
                }
                // Depths, from the root down (a parent is always made after its children).
                s_node(2u * m - 2u) = 0u;
                uint deepest = 0u;
                for (uint k = 2u * m - 2u; k-- > 0u;) {
                    s_node(k) = s_node(s_parent(k)) + 1u;
                    deepest = max(deepest, s_node(k));
                }
                if (deepest <= limit) {
                    for (uint i = 0u; i < m; i++)
                        s_len[base + s_leaf(i)] = s_node(i);
                } else {
                    s_done = 0u;
                }
            }
        }
        barrier();
        if (s_done != 0u)
            break;
        barrier(); // everyone has read s_done before invocation 0 may write it again
    }
}

// Canonical codes (3.2.2) of s_len[base .. base + n), bit-reversed; one invocation.
void canonical_codes(uint base, uint n)
{
    uint count[16], next[16];
    for (uint b = 0u; b < 16u; b++)
        count[b] = 0u;
    for (uint s = 0u; s < n; s++)
        count[s_len[base + s]]++;
    count[0] = 0u;
    uint c = 0u;
    next[0] = 0u;
    for (uint b = 1u; b < 16u; b++) {
        c = (c + count[b - 1u]) << 1u;
        next[b] = c;
    }
    for (uint s = 0u; s < n; s++) {
        uint l = s_len[base + s];
        s_code[base + s] = l == 0u ? 0u : bitfieldReverse(next[l]++) >> (32u - l);
    }
}

// Runs of the lengths as sent (hlit literal/length lengths, then hdist distance lengths) coded with
// 16/17/18 (3.2.7), into s_rle and the code-length histogram; one invocation.
uint sent_length(uint i) { return i < s_hlit ? s_len[i] : s_len[D_BASE + i - s_hlit]; }

void rle_lengths()
{
    uint n = s_hlit + s_hdist, k = 0u;
    for (uint s = 0u; s < CL_CODES; s++)
        s_freq[CL_BASE + s] = 0u;
    for (uint i = 0u; i < n;) {
        uint v = sent_length(i), run = 1u;
        while (i + run < n && sent_length(i + run) == v)
            run++;
        i += run;
        if (v == 0u) {
            while (run >= 11u) {
                uint r = min(run, 138u);
                s_rle(k++) = 18u | ((r - 11u) << 8u);
                run -= r;
            }
            if (run >= 3u) {
                s_rle(k++) = 17u | ((run - 3u) << 8u);
                run = 0u;
            }
        } else {
            s_rle(k++) = v;
            run--;
            while (run >= 3u) {
                uint r = min(run, 6u);
                s_rle(k++) = 16u | ((r - 3u) << 8u);
                run -= r;
            }
        }
        for (; run > 0u; run--)
            s_rle(k++) = v;
    }
    for (uint j = 0u; j < k; j++)
        s_freq[CL_BASE + (s_rle(j) & 0xffu)]++;
    s_nrle = k;
}

// --- The bit writer: whole words OR-ed into the zeroed slot -----------------------------------------

uint w_acc, w_fill, w_word;

void put_bits(uint v, uint n) // n <= 16, v < 2^n
{
    w_acc |= v << w_fill;
    if (w_fill + n >= 32u) {
        atomicOr(Words(pc.slots).v[w_word], w_acc);
        w_word++;
        w_acc = v >> (32u - w_fill); // w_fill >= 16 here, so the shift is in range
        w_fill = w_fill + n - 32u;
    } else {
        w_fill += n;
    }
}

void put_flush()
{
    if (w_fill > 0u)
        atomicOr(Words(pc.slots).v[w_word], w_acc);
}

void put_start(uint slot_base, uint at)
{
    w_word = slot_base + (at >> 5u);
    w_fill = at & 31u;
    w_acc = 0u;
}

// A token's bits under the fixed code (dynamic false) or the segment's own.
uint token_cost(uint token, bool dynamic)
{
    if ((token & TOKEN_MATCH) == 0u)
        return dynamic ? s_len[token] : fixed_litlen(token).y;
    uvec3 lc = length_code((token >> 16u) & 0x1ffu);
    uvec3 dc = distance_code(token & 0xffffu);
    return (dynamic ? s_len[lc.x] + s_len[D_BASE + dc.x] : fixed_litlen(lc.x).y + 5u) + lc.y + dc.y;
}

// The bits of bytes p .. p + len as literals of the segment's own code; ~0u when one of them has no code
// (its every occurrence was inside a match).
uint literal_cost(uint p, uint len)
{
    uint bits = 0u;
    for (uint q = p; q < p + len; q++) {
        uint l = s_len[fbyte(q)];
        if (l == 0u)
            return ~0u;
        bits += l;
    }
    return bits;
}

// A token of the dynamic block at byte p: a match flagged TOKEN_AS_LITERALS goes out as its bytes.
void put_token(uint token, bool dynamic, uint p)
{
    if (dynamic && (token & TOKEN_AS_LITERALS) != 0u) {
        uint len = (token >> 16u) & 0x1ffu;
        for (uint q = p; q < p + len; q++) {
            uint x = fbyte(q);
            put_bits(s_code[x], s_len[x]);
        }
        return;
    }
    if ((token & TOKEN_MATCH) == 0u) {
        if (dynamic) {
            put_bits(s_code[token], s_len[token]);
        } else {
            uvec2 c = fixed_litlen(token);
            put_bits(c.x, c.y);
        }
        return;
    }
    uvec3 lc = length_code((token >> 16u) & 0x1ffu);
    uvec3 dc = distance_code(token & 0xffffu);
    if (dynamic) {
        put_bits(s_code[lc.x], s_len[lc.x]);
    } else {
        uvec2 c = fixed_litlen(lc.x);
        put_bits(c.x, c.y);
    }
    put_bits(lc.z, lc.y);
    if (dynamic)
        put_bits(s_code[D_BASE + dc.x], s_len[D_BASE + dc.x]);
    else
        put_bits(bitfieldReverse(dc.x) >> 27u, 5u);
    put_bits(dc.z, dc.y);
}

// --- Workgroup sums ---------------------------------------------------------------------------------

// Exclusive prefix sum of v over the workgroup, and the total.
uint exclusive_scan(uint v, out uint total)
{
    uint incl = subgroupInclusiveAdd(v);
    uint sub_total = subgroupAdd(v);
    barrier(); // s_scan may still be read by an earlier sum
    if (subgroupElect())
        s_scan[gl_SubgroupID] = sub_total;
    barrier();
    uint before = 0u;
    total = 0u;
    for (uint g = 0u; g < gl_NumSubgroups; g++) {
        before += g < gl_SubgroupID ? s_scan[g] : 0u;
        total += s_scan[g];
    }
    return before + incl - v;
}

uint workgroup_add(uint v)
{
    uint total;
    exclusive_scan(v, total);
    return total;
}

// The segment's own code from s_freq: lengths (s_len), the lengths as sent (s_rle, s_hlit, s_hdist,
// s_hclen), the header's bits (s_header_bits) and the canonical codes (s_code). Every invocation calls it.
void dynamic_code()
{
    uint t = gl_LocalInvocationIndex;
    barrier(); // the counts are complete, and no one reads the last code's lengths any more
    build_lengths(0u, LL_CODES, 15u);
    build_lengths(D_BASE, D_CODES, 15u);
    if (t == 0u) {
        uint hlit = LL_CODES, hdist = D_CODES;
        while (hlit > 257u && s_len[hlit - 1u] == 0u)
            hlit--;
        while (hdist > 1u && s_len[D_BASE + hdist - 1u] == 0u)
            hdist--;
        s_hlit = hlit;
        s_hdist = hdist;
        rle_lengths();
    }
    barrier();
    build_lengths(CL_BASE, CL_CODES, 7u);
    if (t == 0u) {
        uint hclen = CL_CODES;
        while (hclen > 4u && s_len[CL_BASE + CLEN_ORDER[hclen - 1u]] == 0u)
            hclen--;
        s_hclen = hclen;
        uint bits = 3u + 5u + 5u + 4u + 3u * hclen;
        for (uint j = 0u; j < s_nrle; j++) {
            uint sym = s_rle(j) & 0xffu;
            bits += s_len[CL_BASE + sym] + clen_extra_bits(sym);
        }
        s_header_bits = bits;
        canonical_codes(0u, LL_CODES);
        canonical_codes(D_BASE, D_CODES);
        canonical_codes(CL_BASE, CL_CODES);
    }
    barrier();
}

#if defined(HP_PNG_DEFLATE)

void main()
{
    const uint ADLER_MOD = 65521u;
    Shape sh = image_shape();
    uint seg = gl_WorkGroupID.x;
    if (seg >= sh.segments) // output.alpha auto with an opaque alpha: the 3-channel image has fewer
        return;
    uint t = gl_LocalInvocationIndex;
    uint base = seg * SEGMENT;
    uint seg_end = min(base + SEGMENT, sh.total);
    uint n = seg_end - base;
    bool last = seg + 1u == sh.segments;
    uint c0 = min(base + t * CHUNK, seg_end), c1 = min(c0 + CHUNK, seg_end);

    for (uint i = t; i < HASH_SIZE; i += WG)
        s_hash[i] = 0u;
    for (uint i = t; i < ALL_CODES; i += WG)
        s_freq[i] = 0u;
    barrier();

    // --- 1. Parse --------------------------------------------------------------------------------
    Words tokens = Words(pc.tokens);
    uint tok_at = base + t * CHUNK, ntok = 0u, fixed_bits = 0u;
    uint next = c0;                  // where the next token starts
    uint adler_a = 0u, adler_w = 0u; // sum of bytes; sum of (c1 - p) x byte
    for (uint k = 0u; k < CHUNK; k++) {
        uint p = c0 + k;
        bool live = p < c1;
        bool hashable = HASH_PROBE && live && p + MIN_MATCH <= seg_end;
        uint h = hashable ? hash3(p) : 0u;
        if (live) {
            uint x = fbyte(p);
            adler_a += x;
            adler_w += (c1 - p) * x;
            if (p >= next) {
                uint max_len = min(MAX_MATCH, c1 - p);
                uint best_len = 0u, best_dist = 0u;
                if (max_len >= MIN_MATCH) {
                    uint cand[4];
                    cand[0] = 1u;
                    cand[1] = sh.bpp;
                    cand[2] = sh.stride;
                    uint key = HASH_PROBE ? s_hash[h] : 0u;
                    uint q = key == 0u ? p : base + (0xffffu - (key & 0xffffu)) * CHUNK + (key >> 16u) - 1u;
                    cand[3] = q < p ? p - q : 0u;
                    [[unroll]] for (uint c = 0u; c < 4u; c++) {
                        uint d = cand[c];
                        bool seen = false;
                        [[unroll]] for (uint e = 0u; e < c; e++)
                            seen = seen || cand[e] == d;
                        if (d == 0u || d > p || d > WINDOW || seen)
                            continue;
                        uint len = match_length(p, p - d, max_len);
                        // A short match far away costs more than its literals (zlib's TOO_FAR rule).
                        if (len < (c < 2u ? MIN_RUN : MIN_FAR))
                            len = 0u;
                        if (len > best_len)
                            best_len = len, best_dist = d;
                    }
                }
                uint token;
                if (best_len >= MIN_MATCH) {
                    token = TOKEN_MATCH | (best_len << 16u) | best_dist;
                    next = p + best_len;
                    atomicAdd(s_freq[length_code(best_len).x], 1u);
                    atomicAdd(s_freq[D_BASE + distance_code(best_dist).x], 1u);
                } else {
                    token = x;
                    next = p + 1u;
                    atomicAdd(s_freq[x], 1u);
                }
                tokens.v[tok_at + ntok] = token;
                ntok++;
                fixed_bits += token_cost(token, false);
            }
        }
        if (HASH_PROBE) { // uniform: a specialization constant
            barrier();
            if (hashable)
                atomicMax(s_hash[h], ((k + 1u) << 16u) | (0xffffu - t));
            barrier();
        }
    }

    // --- 3. Adler-32 of the segment: a = 1 + sum of bytes, b = n + sum over bytes of (n - i) x byte ----
    uint after = seg_end - c1;
    // Both factors below 65521 before the product, so it stays in 32 bits whatever the chunk (adler_a is up
    // to chunk_bytes x 255: past 2^32 / 65521 for chunks over 256 bytes).
    uint term = (adler_w % ADLER_MOD + ((after % ADLER_MOD) * (adler_a % ADLER_MOD)) % ADLER_MOD) % ADLER_MOD;
    uint sum_a = workgroup_add(adler_a);  // at most SEGMENT x 255: fits
    uint sum_b = workgroup_add(term);     // at most WG x 65520: fits

    // --- 2. Code -------------------------------------------------------------------------------------
    // The segment's own codes. End of block once; distance codes 0 and 1 at least once each, so the
    // distance code has two symbols whatever the parse found (zlib refuses some incomplete codes).
    if (t == 0u) {
        s_freq[256] = 1u;
        s_freq[D_BASE] += 1u;
        s_freq[D_BASE + 1u] += 1u;
    }
    dynamic_code();

    // Matches that cost more than their bytes as literals under that code (runs of zeros, the commonest
    // byte, on an RGBA frame's flat parts) are sent as the literals, and the code is built again from
    // the counts that follow. Deciding on the first code's lengths is an estimate (the second code is a
    // little different), but a kept match can only be cheaper: on the issue's 4K street frame
    // (3840x2160, RGBA 8-bit) the stream goes from 11,406,025 to 11,224,978 bytes, RGB from 9,870,404
    // to 9,870,121 (a model of this shader in C; the daemon's files agree). Deciding on the first code
    // and coding with it (no second build) gave 11,276,246; a second round of decisions 11,219,075;
    // none of the matches at all (literals alone) 11,248,014: a greedy parse's short matches cost more
    // than they save on these residuals.
    uint p = c0, rejected = 0u;
    for (uint i = 0u; REPRICE && i < ntok; i++) {
        uint token = tokens.v[tok_at + i];
        if ((token & TOKEN_MATCH) == 0u) {
            p++;
            continue;
        }
        uint len = (token >> 16u) & 0x1ffu;
        if (literal_cost(p, len) < token_cost(token, true)) {
            tokens.v[tok_at + i] = token | TOKEN_AS_LITERALS;
            atomicAdd(s_freq[length_code(len).x], ~0u); // minus one
            atomicAdd(s_freq[D_BASE + distance_code(token & 0xffffu).x], ~0u);
            for (uint q = p; q < p + len; q++)
                atomicAdd(s_freq[fbyte(q)], 1u);
            rejected++;
        }
        p += len;
    }
    if (REPRICE && workgroup_add(rejected) > 0u) // uniform: the barriers inside are reached by all or none
        dynamic_code();

    uint dyn_bits = 0u;
    p = c0;
    for (uint i = 0u; i < ntok; i++) {
        uint token = tokens.v[tok_at + i];
        uint len = (token & TOKEN_MATCH) != 0u ? (token >> 16u) & 0x1ffu : 1u;
        dyn_bits += (token & TOKEN_AS_LITERALS) != 0u ? literal_cost(p, len) : token_cost(token, true);
        p += len;
    }
    uint fixed_total, dyn_total;
    uint fixed_offset = exclusive_scan(fixed_bits, fixed_total);
    uint dyn_offset = exclusive_scan(dyn_bits, dyn_total);
    uint header_bits = s_header_bits;
    // Header, symbols, end of block; then the sync flush's 3 bits, padding and LEN/NLEN.
    uint fixed_end = 3u + fixed_total + 7u;
    uint dyn_end = header_bits + dyn_total + s_len[256];
    uint fixed_bytes = last ? (fixed_end + 7u) / 8u : (fixed_end + 3u + 7u) / 8u + 4u;
    uint dyn_bytes = last ? (dyn_end + 7u) / 8u : (dyn_end + 3u + 7u) / 8u + 4u;
    uint mode = dyn_bytes <= fixed_bytes ? 2u : 1u; // BTYPE: 0 stored, 1 fixed, 2 dynamic
    uint coded_bytes = mode == 2u ? dyn_bytes : fixed_bytes;
    if (coded_bytes > n + 5u)
        mode = 0u;
    uint out_bytes = mode == 0u ? n + 5u : coded_bytes;
    uint out_words = (out_bytes + 3u) / 4u;
    Words slot = Words(pc.slots);
    uint slot_base = seg * pc.slot_words;

    if (mode == 0u) {
        // One stored block (3.2.4): BFINAL and BTYPE 00 in a byte, LEN, NLEN, the bytes.
        for (uint w = t; w < out_words; w += WG) {
            uint word = 0u;
            for (uint j = 0u; j < 4u; j++) {
                uint o = 4u * w + j, b;
                if (o >= out_bytes)
                    b = 0u;
                else if (o == 0u)
                    b = last ? 1u : 0u;
                else if (o < 3u)
                    b = (n >> (8u * (o - 1u))) & 0xffu;
                else if (o < 5u)
                    b = (~n >> (8u * (o - 3u))) & 0xffu;
                else
                    b = fbyte(base + o - 5u);
                word |= b << (8u * j);
            }
            slot.v[slot_base + w] = word;
        }
    } else {
        for (uint w = t; w < out_words; w += WG)
            slot.v[slot_base + w] = 0u;
        memoryBarrierBuffer();
        barrier();
        bool dynamic = mode == 2u;
        put_start(slot_base, (dynamic ? header_bits : 3u) + (dynamic ? dyn_offset : fixed_offset));
        p = c0;
        for (uint i = 0u; i < ntok; i++) {
            uint token = tokens.v[tok_at + i];
            put_token(token, dynamic, p);
            p += (token & TOKEN_MATCH) != 0u ? (token >> 16u) & 0x1ffu : 1u;
        }
        put_flush();
        if (t == 0u) {
            // The block header: BFINAL, BTYPE; for a dynamic block the code-length code and the lengths.
            put_start(slot_base, 0u);
            put_bits((last ? 1u : 0u) | (mode << 1u), 3u);
            if (dynamic) {
                put_bits(s_hlit - 257u, 5u);
                put_bits(s_hdist - 1u, 5u);
                put_bits(s_hclen - 4u, 4u);
                for (uint j = 0u; j < s_hclen; j++)
                    put_bits(s_len[CL_BASE + CLEN_ORDER[j]], 3u);
                for (uint j = 0u; j < s_nrle; j++) {
                    uint sym = s_rle(j) & 0xffu;
                    put_bits(s_code[CL_BASE + sym], s_len[CL_BASE + sym]);
                    put_bits(s_rle(j) >> 8u, clen_extra_bits(sym));
                }
            }
            put_flush();
            // End of block (the fixed code's is seven zero bits); the sync flush's block header
            // (BFINAL 0, BTYPE 00) and padding are zero bits, its LEN 0000 and NLEN ffff.
            if (dynamic) {
                put_start(slot_base, header_bits + dyn_total);
                put_bits(s_code[256], s_len[256]);
                put_flush();
            }
            if (!last) {
                uint ff = coded_bytes - 2u;
                atomicOr(slot.v[slot_base + ff / 4u], 0xffu << (8u * (ff & 3u)));
                ff++;
                atomicOr(slot.v[slot_base + ff / 4u], 0xffu << (8u * (ff & 3u)));
            }
        }
    }
    if (t == 0u) {
        uint a = (1u + sum_a) % ADLER_MOD;
        uint b = (n % ADLER_MOD + sum_b) % ADLER_MOD;
        Words table = Words(pc.table);
        table.v[4u * seg + 0u] = out_bytes;
        table.v[4u * seg + 1u] = (b << 16u) | a;
        table.v[4u * seg + 2u] = mode;
    }
}

#elif defined(HP_PNG_OFFSETS)

// One workgroup: each segment's offset in the joined stream, an exclusive scan of the byte counts.
void main()
{
    Words table = Words(pc.table);
    uint segments = image_shape().segments;
    uint t = gl_LocalInvocationIndex, carry = 0u;
    for (uint first = 0u; first < segments; first += WG) {
        uint s = first + t;
        uint len = s < segments ? table.v[4u * s] : 0u;
        uint total;
        uint before = exclusive_scan(len, total);
        if (s < segments)
            table.v[4u * s + 3u] = carry + before;
        carry += total;
    }
}

#elif defined(HP_PNG_COMPACT)

uint slot_byte(uint s, uint i) { return (Words(pc.slots).v[s * pc.slot_words + (i >> 2u)] >> (8u * (i & 3u))) & 0xffu; }

// One workgroup per segment: the words of the joined stream whose first byte is this segment's. A word
// holds bytes of two segments at most, as every segment but the last takes at least 7 bytes (a fixed
// block of one literal, 18 bits, then the sync flush: 3 bits, the padding, 4 bytes).
void main()
{
    Words table = Words(pc.table);
    uint s = gl_WorkGroupID.x, segments = image_shape().segments;
    if (s >= segments) // output.alpha auto with an opaque alpha: fewer segments than workgroups
        return;
    uint off = table.v[4u * s + 3u], len = table.v[4u * s], end = off + len;
    uint next_len = s + 1u < segments ? table.v[4u * (s + 1u)] : 0u;
    Words joined = Words(pc.joined);
    for (uint w = (off + 3u) / 4u + gl_LocalInvocationIndex; w < (end + 3u) / 4u; w += WG) {
        uint word = 0u;
        for (uint j = 0u; j < 4u; j++) {
            uint o = 4u * w + j;
            uint b = o < end ? slot_byte(s, o - off) : o < end + next_len ? slot_byte(s + 1u, o - end) : 0u;
            word |= b << (8u * j);
        }
        joined.v[w] = word;
    }
}

#else
#error "define HP_PNG_DEFLATE, HP_PNG_OFFSETS or HP_PNG_COMPACT"
#endif

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
// 2. Code. Fixed Huffman codes (RFC 1951 3.2.6): every code length is known before the parse, so each
//    invocation counts its bits as it parses; an exclusive scan of those counts over the workgroup gives
//    each its bit offset, and each writes its bits with atomicOr into words the workgroup zeroed. The
//    block ends with the end-of-block code, then an empty stored block (a sync flush: byte-aligned; zlib's
//    Z_SYNC_FLUSH) unless it is the stream's last segment, whose header says BFINAL. Where the fixed code
//    would be longer than the bytes themselves, the segment is written as one stored block instead (its
//    end is byte-aligned by itself): a segment never takes more than SEGMENT + 5 bytes.
// 3. The segment's Adler-32 (RFC 1950 8.2), of its filtered bytes alone, from every invocation's sums;
//    the host combines the segments' with zlib's adler32_combine.
//
// Not yet (issue 20): dynamic Huffman tables from the segment's histogram, lazy matching, the token
// scratch in shared memory, a compaction pass so that only the compressed bytes are read back.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;              // invocations per workgroup (pipeline/png_gpu.c)
layout(constant_id = 1) const uint CHUNK = 128u; // bytes each invocation parses
#define WG gl_WorkGroupSize.x
#define SEGMENT (WG * CHUNK)

#define HASH_BITS 12u
#define HASH_SIZE (1u << HASH_BITS)
#define WINDOW 32768u
#define MAX_MATCH 258u
#define MIN_MATCH 3u
#define TOKEN_MATCH 0x80000000u

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Bytes { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };

// Push constants; pipeline/png_gpu.c's struct png_deflate_push mirrors it.
//   offset  field       meaning
//   0       filtered    the filtered scanlines, `total` bytes padded to a word
//   8       slots       the output: segment s at word s * slot_words
//   16      table       per segment 4 words: bytes written, Adler-32, 1 if stored, tokens
//   24      tokens      scratch: one word per filtered byte at most (segment s at word s * SEGMENT)
//   32      total       filtered bytes, height * stride
//   36      stride      bytes per filtered row (filter byte included)
//   40      bpp         bytes per pixel (PNG 9.2's bpp: 3, 4, 6 or 8)
//   44      slot_words  words per segment's slot
//   48      segments    workgroups dispatched; the last one ends the stream (BFINAL)
layout(push_constant, std430) uniform Push {
    uvec2 filtered;
    uvec2 slots;
    uvec2 table;
    uvec2 tokens;
    uint total;
    uint stride;
    uint bpp;
    uint slot_words;
    uint segments;
} pc;

shared uint s_hash[HASH_SIZE];
shared uint s_scan[gl_WorkGroupSize.x]; // one slot per subgroup: as many as invocations covers any size
shared uint s_sum[2];

uint fbyte(uint i) { return (Bytes(pc.filtered).v[i >> 2u] >> (8u * (i & 3u))) & 0xffu; }

uint hash3(uint p)
{
    uint v = fbyte(p) | (fbyte(p + 1u) << 8u) | (fbyte(p + 2u) << 16u);
    return (v * 2654435761u) >> (32u - HASH_BITS);
}

uint match_length(uint p, uint q, uint max_len)
{
    uint n = 0u;
    while (n < max_len && fbyte(p + n) == fbyte(q + n))
        n++;
    return n;
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

uint token_bits(uint token)
{
    if ((token & TOKEN_MATCH) == 0u)
        return fixed_litlen(token).y;
    uvec3 lc = length_code((token >> 16u) & 0x1ffu);
    uvec3 dc = distance_code(token & 0xffffu);
    return fixed_litlen(lc.x).y + lc.y + 5u + dc.y;
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

void put_token(uint token)
{
    if ((token & TOKEN_MATCH) == 0u) {
        uvec2 c = fixed_litlen(token);
        put_bits(c.x, c.y);
        return;
    }
    uvec3 lc = length_code((token >> 16u) & 0x1ffu);
    uvec2 c = fixed_litlen(lc.x);
    put_bits(c.x, c.y);
    put_bits(lc.z, lc.y);
    uvec3 dc = distance_code(token & 0xffffu);
    put_bits(bitfieldReverse(dc.x) >> 27u, 5u);
    put_bits(dc.z, dc.y);
}

// --- Workgroup sums ---------------------------------------------------------------------------------

// Exclusive prefix sum of v over the workgroup; s_sum[0] receives the total.
uint exclusive_scan(uint v)
{
    uint incl = subgroupInclusiveAdd(v);
    uint sub_total = subgroupAdd(v);
    if (subgroupElect())
        s_scan[gl_SubgroupID] = sub_total;
    barrier();
    uint before = 0u, total = 0u;
    for (uint g = 0u; g < gl_NumSubgroups; g++) {
        before += g < gl_SubgroupID ? s_scan[g] : 0u;
        total += s_scan[g];
    }
    if (gl_LocalInvocationIndex == 0u)
        s_sum[0] = total;
    barrier();
    return before + incl - v;
}

uint workgroup_add(uint v) // every invocation gets the sum; s_scan is free again afterwards
{
    uint sub_total = subgroupAdd(v);
    barrier(); // s_scan may still be read by an earlier scan
    if (subgroupElect())
        s_scan[gl_SubgroupID] = sub_total;
    barrier();
    uint total = 0u;
    for (uint g = 0u; g < gl_NumSubgroups; g++)
        total += s_scan[g];
    barrier();
    return total;
}

void main()
{
    const uint ADLER_MOD = 65521u;
    uint seg = gl_WorkGroupID.x;
    uint t = gl_LocalInvocationIndex;
    uint base = seg * SEGMENT;
    uint seg_end = min(base + SEGMENT, pc.total);
    uint n = seg_end - base;
    bool last = seg + 1u == pc.segments;
    uint c0 = min(base + t * CHUNK, seg_end), c1 = min(c0 + CHUNK, seg_end);

    for (uint i = t; i < HASH_SIZE; i += WG)
        s_hash[i] = 0u;
    barrier();

    // --- 1. Parse --------------------------------------------------------------------------------
    Words tokens = Words(pc.tokens);
    uint tok_at = base + t * CHUNK, ntok = 0u, bits = 0u;
    uint next = c0;            // where the next token starts
    uint adler_a = 0u, adler_w = 0u; // sum of bytes; sum of (c1 - p) x byte
    for (uint k = 0u; k < CHUNK; k++) {
        uint p = c0 + k;
        bool live = p < c1;
        bool hashable = live && p + MIN_MATCH <= seg_end;
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
                    cand[1] = pc.bpp;
                    cand[2] = pc.stride;
                    uint key = s_hash[h];
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
                        if (len > best_len)
                            best_len = len, best_dist = d;
                    }
                }
                uint token = best_len >= MIN_MATCH ? TOKEN_MATCH | (best_len << 16u) | best_dist : x;
                next = p + (best_len >= MIN_MATCH ? best_len : 1u);
                tokens.v[tok_at + ntok] = token;
                ntok++;
                bits += token_bits(token);
            }
        }
        barrier();
        if (hashable)
            atomicMax(s_hash[h], ((k + 1u) << 16u) | (0xffffu - t));
        barrier();
    }

    // --- 3. Adler-32 of the segment: a = 1 + sum of bytes, b = n + sum over bytes of (n - i) x byte ----
    uint after = seg_end - c1;
    uint term = (adler_w % ADLER_MOD + ((after % ADLER_MOD) * adler_a) % ADLER_MOD) % ADLER_MOD;
    uint sum_a = workgroup_add(adler_a);  // at most SEGMENT x 255: fits
    uint sum_b = workgroup_add(term);     // at most WG x 65520: fits
    uint sum_tokens = workgroup_add(ntok);

    // --- 2. Code -------------------------------------------------------------------------------------
    uint offset = exclusive_scan(bits);
    uint body = s_sum[0];
    uint end_bits = 3u + body + 7u; // block header, the symbols, end of block (code 0000000)
    uint fixed_bytes = last ? (end_bits + 7u) / 8u : (end_bits + 3u + 7u) / 8u + 4u;
    bool stored = fixed_bytes > n + 5u;
    uint out_bytes = stored ? n + 5u : fixed_bytes;
    uint out_words = (out_bytes + 3u) / 4u;
    Words slot = Words(pc.slots);
    uint slot_base = seg * pc.slot_words;

    if (stored) {
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
        uint at = 3u + offset;
        w_word = slot_base + (at >> 5u);
        w_fill = at & 31u;
        w_acc = 0u;
        for (uint i = 0u; i < ntok; i++)
            put_token(tokens.v[tok_at + i]);
        if (w_fill > 0u)
            atomicOr(slot.v[w_word], w_acc);
        if (t == 0u) {
            // Header: BFINAL, then BTYPE 01 (fixed). The end-of-block code and the sync flush's block
            // header (BFINAL 0, BTYPE 00) and padding are zero bits; its LEN 0000 and NLEN ffff.
            atomicOr(slot.v[slot_base], (last ? 1u : 0u) | (1u << 1u));
            if (!last) {
                uint ff = fixed_bytes - 2u;
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
        table.v[4u * seg + 2u] = stored ? 1u : 0u;
        table.v[4u * seg + 3u] = sum_tokens;
    }
}

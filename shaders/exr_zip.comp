#version 460
// EXR's ZIP and ZIPS chunks decoded on the GPU (issue 20: the CPU's inflate was what bounded throughput).
// One source, two modules (shaders/meson.build):
//   HP_EXR_INFLATE  one workgroup per chunk, whose first invocation inflates the chunk's zlib stream (RFC 1950,
//                   1951) into the unpacked buffer as it comes, and records the stream's Adler-32 and a status
//                   (whole and valid, or why not). A chunk whose packed size equals its unpacked size was
//                   stored as is (OpenEXR writes it so when deflate did not make it smaller): copied.
//                   Without slices (FUSED) the workgroup then finishes its chunk (finish_chunk, below).
//   HP_EXR_FINISH   with slices, after the last: one workgroup per chunk finishes it: the Adler-32 checked,
//                   EXR's byte predictor undone (OpenEXR's ImfZip.cpp, internal_zip.c: t[i] = t[i-1] + t[i] -
//                   128 modulo 256, from the second byte), then EXR's byte split (the first half of a chunk's
//                   bytes are the even ones) and the line's planes of halves (channels in the file's order, a
//                   plane a channel) gathered into the pipeline's RGBA16F input, alpha 1.0 where the file has
//                   none, one plane read for R, G and B of a grey frame. The file's half bits are kept.
// Deflate is a serial format: a stream's symbols can only be found one after the other. The parallelism is
// the chunks': every 16-line chunk is a stream of its own (135 of them in a 4K frame), and the frames'. The
// decoder is the classic one: a 2^10-entry table of codes read least significant bit first (RFC 1951
// 3.1.1), and codes longer than that decoded bit by bit from the counts per length (Mark Adler's puff.c).
// It accepts what zlib's inflate accepts: over-subscribed code sets are refused, and an incomplete set only
// as zlib allows (a single code of length 1; a block without distance codes). Matches are copied from the
// bytes already written, in global memory. Whatever can be done in parallel (the checksum, the predictor,
// the gathering) is out of the serial loop.
// Every read stays inside the chunk's packed bytes plus the buffer's 16 bytes of padding, every write
// inside the chunk's unpacked bytes, whatever the stream says: a damaged chunk is a status, never a fault.
#include "hp_shared.h"
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer RwWords { uint v[]; };

// Push constants; pipeline/exr_zip_gpu.c's struct exr_zip_push mirrors it.
//   offset  field            meaning
//   0       packed           the chunks' bytes as read from the file, 16 bytes of padding after the last
//   8       chunks           HP_EXR_ZIP_CHUNK_WORDS words per chunk (hp_shared.h)
//   16      unpacked         each chunk's bytes (the inflate pass writes them, finish_chunk undoes the predictor)
//   24      image            RGBA16F, width x height pixels (the unzip pass writes it)
//   32      chunk_count
//   36      width            pixels
//   40      height           rows
//   44      planes           channels in the file: planes of halves per line
//   48      lines_per_chunk  16 (ZIP) or 1 (ZIPS)
//   52      plane_rgba       the plane of R, G, B and A, a byte each; A 0xff: none (1.0)
layout(push_constant, std430) uniform Push {
    uvec2 packed;
    uvec2 chunks;
    uvec2 unpacked;
    uvec2 image;
    uint chunk_count;
    uint width;
    uint height;
    uint planes;
    uint lines_per_chunk;
    uint plane_rgba;
} pc;

// --- The unzip: one pixel of a chunk, from its bytes in unpacked to RGBA16F (both variants use it) -------
layout(buffer_reference, std430, buffer_reference_align = 4) coherent readonly buffer Unpacked { uint v[]; };

// The half of plane `plane` at pixel x of line ly of the chunk whose bytes start at off (n bytes in all;
// stored: as is, else the byte split, the low bytes in the first half).
uint half_at(uint off, uint n, bool stored, uint ly, uint plane, uint x)
{
    Unpacked u = Unpacked(pc.unpacked);
    uint m = (ly * pc.planes + plane) * pc.width + x; // the value's index in the chunk
    if (stored) {
        uint at = off + 2u * m;
        return (u.v[at >> 2] >> (8u * (at & 3u))) & 0xffffu;
    }
    uint lo = off + m, hi = off + (n + 1u) / 2u + m;
    return ((u.v[lo >> 2] >> (8u * (lo & 3u))) & 255u) | (((u.v[hi >> 2] >> (8u * (hi & 3u))) & 255u) << 8);
}

// Pixel (x, y) of the frame, in the chunk whose table entry starts at word e.
void unzip_pixel(uint x, uint y, uint e)
{
    Words table = Words(pc.chunks);
    uint off = table.v[e + 2u], n = table.v[e + 3u];
    bool stored = table.v[e + 1u] == n;
    uint ly = y - table.v[e + 4u];
    uint pr = pc.plane_rgba & 255u, pg = (pc.plane_rgba >> 8) & 255u, pb = (pc.plane_rgba >> 16) & 255u,
         pa = pc.plane_rgba >> 24;
    uint r = half_at(off, n, stored, ly, pr, x), g = half_at(off, n, stored, ly, pg, x),
         b = half_at(off, n, stored, ly, pb, x);
    uint a = pa == 255u ? 0x3c00u : half_at(off, n, stored, ly, pa, x); // 1.0
    RwWords img = RwWords(pc.image);
    uint px = (y * pc.width + x) * 2u;
    img.v[px] = r | g << 16;
    img.v[px + 1u] = b | a << 16;
}

// --- Finishing a chunk: the workgroup checks the Adler-32, undoes the predictor, and unzips its pixels -----
// The inflate loop writes the bytes as they come out of the stream. Both the Adler-32 (RFC 1950 8.2:
// s1 = 1 + sum b_i, s2 = n + sum (n - i) b_i, modulo 65521) and the predictor's running sum (t[i] = the sum of
// raw[0..i] + 128 i, modulo 256: each step adds raw[i] - 128) are sums over the chunk, so each invocation
// takes a run of its words and the runs are joined in shared memory.
#define FINISH_MAX 256u
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer CoherentWords { uint v[]; };
shared uint s_fa[FINISH_MAX], s_fb[FINISH_MAX], s_fc[FINISH_MAX];
shared uint s_fverdict;

// The four bytes' part of the sums, from byte index i of the chunk on (bytes at n and past are not the chunk's).
void sum_word(uint v, uint i, uint n, inout uint sum, inout uint64_t weighted)
{
    for (uint k = 0u; k < 4u && i + k < n; k++) {
        uint b = (v >> (8u * k)) & 255u;
        sum += b;
        weighted += uint64_t(n - i - k) * uint64_t(b);
    }
}

// Called by every invocation of the workgroup (lanes of them, at most FINISH_MAX) with the chunk's entry and
// its inflate status; returns the chunk's final status (the workgroup's first invocation writes it).
uint finish_chunk(uint e, uint lane, uint lanes, uint status)
{
    Words table = Words(pc.chunks);
    uint off = table.v[e + 2u], n = table.v[e + 3u];
    bool stored = table.v[e + 1u] == n;
    if (status == HP_EXR_ZIP_OK && !stored) {
        CoherentWords u = CoherentWords(pc.unpacked);
        uint base = off >> 2, words = (n + 3u) / 4u, per = (words + lanes - 1u) / lanes;
        uint w0 = min(lane * per, words), w1 = min(w0 + per, words);
        uint sum = 0u;
        uint64_t weighted = 0ul;
        for (uint w = w0; w < w1; w++)
            sum_word(u.v[base + w], 4u * w, n, sum, weighted);
        s_fa[lane] = sum % 65521u;
        s_fb[lane] = uint(weighted % 65521ul);
        s_fc[lane] = sum & 255u;
        memoryBarrierShared();
        barrier();
        if (lane == 0u) {
            uint s1 = 1u, s2 = n % 65521u, run = 0u;
            for (uint l = 0u; l < lanes; l++) {
                s1 = (s1 + s_fa[l]) % 65521u;
                s2 = (s2 + s_fb[l]) % 65521u;
                uint c = s_fc[l];
                s_fc[l] = run; // exclusive: the sum of the runs before
                run = (run + c) & 255u;
            }
            s_fverdict = (s2 << 16 | s1) == table.v[e + 7u] ? HP_EXR_ZIP_OK : HP_EXR_ZIP_CHECKSUM;
        }
        memoryBarrierShared();
        barrier();
        status = s_fverdict;
        if (status == HP_EXR_ZIP_OK) {
            uint running = s_fc[lane];
            for (uint w = w0; w < w1; w++) {
                uint v = u.v[base + w], t = 0u;
                for (uint k = 0u; k < 4u; k++) {
                    running += (v >> (8u * k)) & 255u;
                    t |= ((running + (((4u * w + k) & 1u) << 7)) & 255u) << (8u * k);
                }
                u.v[base + w] = t;
            }
        }
        memoryBarrierBuffer();
        barrier();
    }
    if (status == HP_EXR_ZIP_OK) {
        uint first = table.v[e + 4u], pixels = table.v[e + 5u] * pc.width;
        for (uint i = lane; i < pixels; i += lanes)
            unzip_pixel(i % pc.width, first + i / pc.width, e);
    }
    return status;
}

#ifdef HP_EXR_INFLATE
// FUSED (no slices): a workgroup of 32, whose first invocation inflates the chunk while the others wait,
// then all 32 unzip its pixels; one dispatch and no barrier in the command buffer, so that frames decoded
// at once on the decode queue overlap (pipeline/exr_zip_gpu.c). Otherwise one invocation, and the unzip is
// a pass of its own after every slice.
layout(local_size_x_id = 2) in;
layout(constant_id = 1) const bool FUSED = false;

// Work per dispatch, in loop iterations; 0: no limit (pipeline/exr_zip_gpu.c). Lavapipe ends any invocation
// after 65535 loop iterations in all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of a
// shader), and a 4K chunk takes some million: there the host records one dispatch after another, and each
// goes on where the one before stopped (the table's words 8-15). A block's codes are built again from its
// header on the way back in.
layout(constant_id = 0) const uint SLICE = 0u;
// The most work a chunk may take in one run without slices; 0: four iterations a byte and a block's header
// every KiB, far more than any deflate encoder's stream needs, so that a stream made to be slow (empty
// blocks, codes built again and again) stops there: HP_EXR_ZIP_UNFINISHED, and the host decodes the frame on
// the CPU. Lavapipe's fused pipeline (the tests') takes 10000, under its loop limit.
layout(constant_id = 3) const uint MAX_WORK = 0u;
#define HEADER_COST 5000u // loop iterations of reading and building one block's codes, rounded up
// A block whose codes are not built (stored, or fixed after the first): lavapipe's limiter counted some 30
// iterations for each such empty block (2000 of them broke a slice of 10000 off, tests/fuzz/regressions),
// so it is charged that, which no encoder's stream notices.
#define BLOCK_COST 32u
uint g_used;            // loop iterations of this slice so far
uint g_cap;             // its most (MAX_WORK's)
bool sliced_out() { return (SLICE != 0u && g_used >= SLICE) || g_used > g_cap; }

#define LUT_BITS 10u
#define LUT_MASK ((1u << LUT_BITS) - 1u)
#define DIST_LUT_BITS 8u
#define DIST_LUT_MASK ((1u << DIST_LUT_BITS) - 1u)
#define NO_SYMBOL 0xffffu
#define T_LIT 0u
#define T_DIST 1u

// Lookup tables: entry = symbol << 4 | code length; length 0: a longer code, or none (decode_slow).
shared uint s_lit[1u << LUT_BITS];
shared uint s_dist[1u << DIST_LUT_BITS];
// Per code (0 literal/length, 1 distance; the code-length code borrows 1): codes of each length, and the
// symbols in canonical order (RFC 1951 3.2.2).
shared uint s_count[2][16];
shared uint s_sym[2][288];
shared uint s_len[320]; // the code lengths of one block as read: literal/length then distance

// RFC 1951 3.2.5: base and extra bits of the length symbols 257..285 and the distance symbols 0..29.
shared uint s_lbase[29], s_lext[29], s_dbase[30], s_dext[30];

// RFC 1951 3.2.5: the length symbols' bases and extra bits, and the distance symbols', into shared memory
// by the first invocation (read after the workgroup's first barrier, or by that invocation alone).
void init_length_codes()
{
    const uint lbase[29] = uint[](3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83,
                                  99, 115, 131, 163, 195, 227, 258);
    const uint lext[29] = uint[](0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0);
    const uint dbase[30] = uint[](1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769,
                                  1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577);
    const uint dext[30] = uint[](0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12,
                                 12, 13, 13);
    for (uint i = 0u; i < 30u && gl_LocalInvocationIndex == 0u; i++) {
        if (i < 29u) {
            s_lbase[i] = lbase[i];
            s_lext[i] = lext[i];
        }
        s_dbase[i] = dbase[i];
        s_dext[i] = dext[i];
    }
}

// --- Reading bits: a 64-bit buffer filled a word at a time, least significant bit first -------------------
uint64_t g_bits;
uint g_nbits;
uint g_word_at;  // the next word to load from packed
uint g_in_base, g_in_size;

void refill()
{
    if (g_nbits > 32u)
        return;
    // Past the chunk's end (a damaged stream reads on) the next bytes are the next chunk's for 8 bytes, then
    // zeros: nothing is loaded from 8 bytes past the end, and the packed buffer's 16 bytes of padding keep
    // the last loads of the last chunk inside it. Reading past the end is TRUNCATED whatever was read.
    uint w = 0u;
    if (g_word_at * 4u < g_in_base + g_in_size + 8u)
        w = Words(pc.packed).v[g_word_at];
    g_word_at++;
    g_bits |= uint64_t(w) << g_nbits;
    g_nbits += 32u;
}

// Bits taken from the chunk's first byte on.
uint consumed() { return (g_word_at * 4u - g_in_base) * 8u - g_nbits; }

uint bits(uint n) // n <= 16
{
    refill();
    uint v = uint(g_bits) & ((1u << n) - 1u);
    g_bits >>= n;
    g_nbits -= n;
    return v;
}

void drop(uint n)
{
    g_bits >>= n;
    g_nbits -= n;
}

// --- Huffman codes ------------------------------------------------------------------------------------

// Bit by bit from the counts (puff.c's decode): codes past the table, and the code-length code.
uint decode_slow(uint t)
{
    uint code = 0u, first = 0u, index = 0u;
    for (uint len = 1u; len <= 15u; len++) {
        code |= uint(g_bits >> (len - 1u)) & 1u;
        uint count = s_count[t][len];
        if (code < first + count) {
            drop(len);
            g_used += len; // its loop's iterations count toward the slice
            return s_sym[t][index + code - first];
        }
        index += count;
        first = (first + count) << 1u;
        code <<= 1u;
    }
    return NO_SYMBOL;
}

uint decode_lit()
{
    refill();
    uint e = s_lit[uint(g_bits) & LUT_MASK];
    if ((e & 15u) != 0u) {
        drop(e & 15u);
        return e >> 4u;
    }
    return decode_slow(T_LIT);
}

uint decode_dist()
{
    refill();
    uint e = s_dist[uint(g_bits) & DIST_LUT_MASK];
    if ((e & 15u) != 0u) {
        drop(e & 15u);
        return e >> 4u;
    }
    return decode_slow(T_DIST);
}

// Per code, for filling its table: the first code of each length and the canonical index of its first
// symbol (RFC 1951 3.2.2's next_code, and the running count of shorter codes).
shared uint s_first[2][16], s_index[2][16];
// Whether build() fills the lookup table itself: the wide inflate's first invocation builds the codes and
// the whole workgroup then fills the table (fill_lut).
bool g_fill_luts = true;
uint g_fill_work; // the iterations clear_lut and fill_lut took in this invocation (the wide inflate's count)

// Entries of the lookup table of code t, lane's share of them: 0 (no code of at most lut_bits bits here).
void clear_lut(uint t, uint lut_bits, uint lane, uint lanes)
{
    for (uint i = lane; i < (1u << lut_bits); i += lanes) {
        g_fill_work++;
        if (t == T_LIT)
            s_lit[i] = 0u;
        else
            s_dist[i] = 0u;
    }
}

// The table's entries of the codes of at most lut_bits bits, lane's share of those codes: a code read least
// significant bit first fills every entry whose low bits are its bits reversed. After clear_lut.
void fill_lut(uint t, uint lut_bits, uint lane, uint lanes)
{
    uint size = 1u << lut_bits, codes = s_index[t][lut_bits + 1u];
    for (uint index = lane; index < codes; index += lanes) {
        uint len = 1u;
        while (s_index[t][len + 1u] <= index)
            len++;
        uint code = s_first[t][len] + index - s_index[t][len];
        uint e = s_sym[t][index] << 4u | len;
        for (uint r = bitfieldReverse(code) >> (32u - len); r < size; r += 1u << len) {
            g_fill_work++;
            if (t == T_LIT)
                s_lit[r] = e;
            else
                s_dist[r] = e;
        }
    }
}

// The canonical code of the n lengths at s_len[off]: counts, symbols and, with lut_bits, the table.
// False for an over-subscribed set, or an incomplete one that zlib would refuse (inftrees.c); the fixed
// distance code (30 of 32 five-bit codes) is incomplete by the format's own definition.
bool build(uint t, uint off, uint n, uint lut_bits, bool fixed_set)
{
    for (uint len = 0u; len < 16u; len++)
        s_count[t][len] = 0u;
    for (uint s = 0u; s < n; s++)
        s_count[t][s_len[off + s]]++;
    uint codes = n - s_count[t][0];
    s_count[t][0] = 0u;
    int left = 1;
    uint longest = 0u;
    for (uint len = 1u; len < 16u; len++) {
        left = (left << 1) - int(s_count[t][len]);
        if (left < 0)
            return false;
        if (s_count[t][len] != 0u)
            longest = len;
    }
    if (left > 0 && codes != 0u && !fixed_set && !(lut_bits != 0u && longest == 1u))
        return false; // incomplete: only one code of length 1 (or none at all) is allowed
    uint offs[16];
    offs[1] = 0u;
    for (uint len = 1u; len < 15u; len++)
        offs[len + 1u] = offs[len] + s_count[t][len];
    uint code = 0u;
    for (uint len = 1u; len < 16u; len++) {
        s_first[t][len] = code;
        s_index[t][len] = offs[len];
        code = (code + s_count[t][len]) << 1u;
    }
    for (uint s = 0u; s < n; s++) {
        uint len = s_len[off + s];
        if (len != 0u)
            s_sym[t][offs[len]++] = s;
    }
    if (lut_bits == 0u || !g_fill_luts)
        return true;
    clear_lut(t, lut_bits, 0u, 1u);
    fill_lut(t, lut_bits, 0u, 1u);
    return true;
}

bool fixed_codes() // RFC 1951 3.2.6
{
    for (uint s = 0u; s < 288u; s++)
        s_len[s] = s < 144u ? 8u : s < 256u ? 9u : s < 280u ? 7u : 8u;
    for (uint s = 0u; s < 30u; s++)
        s_len[288u + s] = 5u;
    return build(T_LIT, 0u, 288u, LUT_BITS, true) && build(T_DIST, 288u, 30u, DIST_LUT_BITS, true);
}

bool dynamic_codes() // RFC 1951 3.2.7
{
    uint nlen = bits(5) + 257u, ndist = bits(5) + 1u, ncode = bits(4) + 4u;
    if (nlen > 286u || ndist > 30u)
        return false;
    const uint order[19] = uint[](16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15);
    for (uint i = 0u; i < 19u; i++)
        s_len[order[i]] = i < ncode ? bits(3) : 0u;
    if (!build(T_DIST, 0u, 19u, 0u, false)) // the code-length code, complete, borrowing the distance slots
        return false;
    for (uint i = 0u; i < nlen + ndist;) {
        refill();
        uint sym = decode_slow(T_DIST);
        if (sym == NO_SYMBOL)
            return false;
        if (sym < 16u) {
            s_len[i++] = sym;
            continue;
        }
        uint repeat, value = 0u;
        if (sym == 16u) {
            if (i == 0u)
                return false;
            value = s_len[i - 1u];
            repeat = 3u + bits(2);
        } else if (sym == 17u) {
            repeat = 3u + bits(3);
        } else {
            repeat = 11u + bits(7);
        }
        if (i + repeat > nlen + ndist)
            return false;
        for (; repeat > 0u; repeat--)
            s_len[i++] = value;
    }
    if (s_len[256] == 0u) // no end-of-block code
        return false;
    return build(T_LIT, 0u, nlen, LUT_BITS, false) && build(T_DIST, nlen, ndist, DIST_LUT_BITS, false);
}

// --- Writing bytes: the inflated bytes as they are, a word at a time --------------------------------------
// The predictor and the Adler-32 are left to finish_chunk, where the workgroup shares them: in this serial
// loop every operation a byte costs is paid 66 million times a 4K frame. Matches read their source back
// from global memory: a ring of the last words in shared memory measured no faster at 1 and 4 KiB and
// slower at deflate's whole 32 KiB (H200, bench_exr_zip: 40.6, 40.9 and 68.3 ms a 4K frame; the words just
// written are in the cache, and 45 KiB of shared memory a workgroup leaves fewer of them on an SM).
uint g_out_words; // the chunk's first word in unpacked
uint g_n, g_limit;
uint g_word;      // the bytes of word g_n / 4 written so far

// Stored coherent: with FUSED the workgroup's other invocations read them (finish_chunk) after the barrier.
void store_word(uint wi, uint v) { CoherentWords(pc.unpacked).v[g_out_words + wi] = v; }

void put(uint b)
{
    g_word |= b << (8u * (g_n & 3u));
    if ((g_n & 3u) == 3u) {
        store_word(g_n >> 2, g_word);
        g_word = 0u;
    }
    g_n++;
}

// Four bytes at once (v's, lowest first) after the g_n bytes written.
void put4(uint v)
{
    uint shift = 8u * (g_n & 3u);
    if (shift == 0u) {
        store_word(g_n >> 2, v);
    } else {
        store_word(g_n >> 2, g_word | (v << shift));
        g_word = v >> (32u - shift);
    }
    g_n += 4u;
}

// Word wi of the bytes written: the one being written from the register, else memory.
uint word_at(uint wi) { return wi == (g_n >> 2) ? g_word : RwWords(pc.unpacked).v[g_out_words + wi]; }

// The 4 bytes from byte p on (all written: p + 4 <= g_n).
uint bytes4_at(uint p)
{
    uint shift = 8u * (p & 3u), lo = word_at(p >> 2);
    return shift == 0u ? lo : (lo >> shift) | (word_at((p >> 2) + 1u) << (32u - shift));
}

// A match: len bytes from dist back. Four at a time where the source is 4 or more bytes back; a run of one
// or two bytes repeated (distance 1 or 2, common in the high bytes of halves) as a word of its pattern;
// distance 3, and what is left, a byte at a time (they may overlap what they write).
void copy(uint dist, uint len)
{
    uint p = g_n - dist;
    if (dist <= 2u) {
        uint b0 = (word_at(p >> 2) >> (8u * (p & 3u))) & 255u, b1 = b0;
        if (dist == 2u)
            b1 = (word_at((p + 1u) >> 2) >> (8u * ((p + 1u) & 3u))) & 255u;
        uint pattern = (b0 | b1 << 8) * 0x10001u;
        for (; len >= 4u; len -= 4u)
            put4(pattern);
        for (uint i = 0u; i < len; i++)
            put((pattern >> (8u * (i & 1u))) & 255u);
        return;
    }
    if (dist >= 4u) {
        for (; len >= 4u; len -= 4u, p += 4u)
            put4(bytes4_at(p));
    }
    for (; len > 0u; len--, p++)
        put((word_at(p >> 2) >> (8u * (p & 3u))) & 255u);
}

#define SUSPENDED 0xffffffffu

uint inflate_block_symbols()
{
    for (;;) {
        if (sliced_out())
            return SUSPENDED;
        g_used++;
        uint sym = decode_lit();
        if (sym < 256u) {
            if (g_n == g_limit)
                return HP_EXR_ZIP_LONG;
            put(sym);
            continue;
        }
        if (sym == 256u)
            return HP_EXR_ZIP_OK;
        sym -= 257u;
        if (sym >= 29u)
            return HP_EXR_ZIP_BAD_DATA;
        uint len = s_lbase[sym] + bits(s_lext[sym]);
        uint dsym = decode_dist();
        if (dsym >= 30u)
            return HP_EXR_ZIP_BAD_DATA;
        uint dist = s_dbase[dsym] + bits(s_dext[dsym]);
        if (dist > g_n)
            return HP_EXR_ZIP_BAD_DATA;
        if (len > g_limit - g_n)
            return HP_EXR_ZIP_LONG;
        g_used += len;
        copy(dist, len);
    }
}

// A stored block's bytes, as many as the slice allows: g_stored_left are still to come.
uint g_stored_left;
void stored_bytes()
{
    for (; g_stored_left > 0u && !sliced_out(); g_stored_left--, g_used++)
        put(bits(8));
}

uint packed_byte(uint i) { return (Words(pc.packed).v[(g_in_base + i) >> 2] >> (8u * ((g_in_base + i) & 3u))) & 255u; }

// The reader at bit `at` of the chunk (a byte offset first: the chunk may lie anywhere past 512 MiB).
void seek(uint at)
{
    uint byte = g_in_base + (at >> 3);
    g_word_at = byte >> 2;
    g_bits = 0ul;
    g_nbits = 0u;
    refill();
    drop(8u * (byte & 3u) + (at & 7u));
}

#define PHASE_START 0u
#define PHASE_BLOCK 1u   // at a block's header
#define PHASE_CODES 2u   // inside a block of Huffman codes
#define PHASE_STORED 3u  // inside a stored block
#define PHASE_DONE 4u

uint g_phase, g_header_at, g_flags; // g_flags: the last block's bit, and the block's type << 1

// Where this slice stopped, for the next (hp_shared.h, the table's words 8-15); the word being written goes
// to memory as it stands.
uint suspend(RwWords table, uint e)
{
    if ((g_n & 3u) != 0u)
        CoherentWords(pc.unpacked).v[g_out_words + (g_n >> 2)] = g_word;
    table.v[e + 8u] = g_phase;
    table.v[e + 9u] = consumed();
    table.v[e + 10u] = g_header_at;
    table.v[e + 11u] = g_stored_left;
    table.v[e + 12u] = g_flags;
    table.v[e + 13u] = g_n;
    return HP_EXR_ZIP_UNFINISHED;
}

void resume(RwWords table, uint e)
{
    g_header_at = table.v[e + 10u];
    g_stored_left = table.v[e + 11u];
    g_flags = table.v[e + 12u];
    g_n = table.v[e + 13u];
    g_word = (g_n & 3u) == 0u ? 0u
                              : RwWords(pc.unpacked).v[g_out_words + (g_n >> 2)] & ((1u << (8u * (g_n & 3u))) - 1u);
}

// The block at the reader: its header read, its codes built or its stored length read. The fixed codes
// are built once a run: a stream of empty fixed blocks costs ten bits and two iterations a block.
bool g_fixed_ready;

uint begin_block()
{
    g_flags = bits(1);
    uint type = bits(2);
    g_flags |= type << 1;
    g_header_at = consumed();
    g_used += BLOCK_COST;
    if (type == 0u) {
        drop(g_nbits & 7u); // to the byte boundary
        uint len = bits(16), nlen = bits(16);
        if (len != (~nlen & 0xffffu))
            return HP_EXR_ZIP_BAD_DATA;
        if (len > g_limit - g_n)
            return HP_EXR_ZIP_LONG;
        g_stored_left = len;
        g_phase = PHASE_STORED;
        return HP_EXR_ZIP_OK;
    }
    g_phase = PHASE_CODES;
    if (type == 1u) {
        if (!g_fixed_ready) {
            g_used += HEADER_COST;
            g_fixed_ready = fixed_codes();
        }
        return g_fixed_ready ? HP_EXR_ZIP_OK : HP_EXR_ZIP_BAD_DATA;
    }
    if (type == 2u) {
        g_used += HEADER_COST;
        g_fixed_ready = false; // the tables are this block's now
        return dynamic_codes() ? HP_EXR_ZIP_OK : HP_EXR_ZIP_BAD_DATA;
    }
    return HP_EXR_ZIP_BAD_DATA;
}

uint inflate_chunk(RwWords table, uint e)
{
    if (g_phase == PHASE_START) {
        if (g_in_size < 6u) // a zlib header and an Adler-32 at the least
            return HP_EXR_ZIP_TRUNCATED;
        uint cmf = packed_byte(0u), flg = packed_byte(1u);
        if ((cmf & 15u) != 8u || (cmf >> 4) > 7u || ((cmf << 8) | flg) % 31u != 0u || (flg & 0x20u) != 0u)
            return HP_EXR_ZIP_BAD_DATA; // not deflate, a window over 32 KiB, a bad check, or a preset dictionary
        seek(16u);
        g_phase = PHASE_BLOCK;
        g_flags = 0u;
    } else {
        resume(table, e);
        if (g_phase == PHASE_CODES) { // the block's codes again, from its header
            seek(g_header_at);
            g_used += HEADER_COST;
            bool fixed_codes_block = (g_flags >> 1) == 1u;
            if (!(fixed_codes_block ? fixed_codes() : dynamic_codes()))
                return HP_EXR_ZIP_BAD_DATA;
            g_fixed_ready = fixed_codes_block;
        }
        seek(table.v[e + 9u]);
    }
    for (;;) {
        uint status = HP_EXR_ZIP_OK;
        if (g_phase == PHASE_BLOCK)
            status = begin_block();
        if (status == HP_EXR_ZIP_OK && g_phase == PHASE_CODES)
            status = inflate_block_symbols();
        else if (status == HP_EXR_ZIP_OK && g_phase == PHASE_STORED)
            stored_bytes();
        if (consumed() > g_in_size * 8u)
            return HP_EXR_ZIP_TRUNCATED; // whatever went wrong, it read past the stream's end first
        if (status == SUSPENDED || (g_phase == PHASE_STORED && g_stored_left > 0u))
            return suspend(table, e);
        if (status != HP_EXR_ZIP_OK)
            return status;
        g_phase = PHASE_BLOCK; // the block is done
        if ((g_flags & 1u) != 0u)
            break;
        if (sliced_out())
            return suspend(table, e);
    }
    if (g_n < g_limit)
        return HP_EXR_ZIP_SHORT;
    if ((g_n & 3u) != 0u)
        CoherentWords(pc.unpacked).v[g_out_words + (g_n >> 2)] = g_word;
    drop(g_nbits & 7u);
    uint adler = bits(8) << 24;
    adler |= bits(8) << 16;
    adler |= bits(8) << 8;
    adler |= bits(8);
    if (consumed() > g_in_size * 8u)
        return HP_EXR_ZIP_TRUNCATED;
    table.v[e + 7u] = adler; // checked by finish_chunk
    return HP_EXR_ZIP_OK;
}

// A stored chunk: its bytes as they are, a word at a time (unaligned in packed, aligned in unpacked), as
// many as the slice allows; the table's word 13 counts the words done. The last word may carry the next
// chunk's first bytes into this chunk's rounding: nothing reads them.
uint copy_stored(RwWords table, uint e)
{
    Words p = Words(pc.packed);
    uint first = g_in_base >> 2, shift = 8u * (g_in_base & 3u);
    uint w = g_phase == PHASE_START ? 0u : table.v[e + 13u];
    for (; w < (g_limit + 3u) / 4u; w++, g_used++) {
        if (sliced_out()) {
            table.v[e + 8u] = PHASE_STORED;
            table.v[e + 13u] = w;
            return HP_EXR_ZIP_UNFINISHED;
        }
        uint v = p.v[first + w];
        if (shift != 0u)
            v = (v >> shift) | (p.v[first + w + 1u] << (32u - shift)); // within the padding at the end
        CoherentWords(pc.unpacked).v[g_out_words + w] = v;
    }
    return HP_EXR_ZIP_OK;
}

shared uint s_status;

// The chunk's next slice (all of it without slices): its status, HP_EXR_ZIP_UNFINISHED to be gone on with.
uint inflate_slice(RwWords table, uint e)
{
    g_in_base = table.v[e + 0u];
    g_in_size = table.v[e + 1u];
    g_out_words = table.v[e + 2u] >> 2;
    g_limit = table.v[e + 3u];
    g_phase = table.v[e + 8u];
    if (g_phase == PHASE_DONE)
        return table.v[e + 6u]; // finished in an earlier slice
    g_used = 0u;
    uint64_t cap = MAX_WORK != 0u ? uint64_t(MAX_WORK) : 4ul * g_limit + uint64_t(HEADER_COST) * (16u + g_limit / 1024u);
    g_cap = uint(min(cap, uint64_t(0xffffffffu - 4u * HEADER_COST))); // room for one overshoot: never wraps
    g_fixed_ready = false;
    g_n = 0u;
    g_word = 0u;
    g_stored_left = 0u;
    g_header_at = 0u;
    uint status = g_in_size == g_limit ? copy_stored(table, e) : inflate_chunk(table, e);
    if (status != HP_EXR_ZIP_UNFINISHED)
        table.v[e + 8u] = PHASE_DONE;
    table.v[e + 6u] = status;
    return status;
}

#ifndef HP_EXR_WIDE
void main()
{
    init_length_codes();
    uint c = gl_WorkGroupID.x; // the same in the whole workgroup: the barrier below is reached by all or none
    if (c >= pc.chunk_count)
        return;
    RwWords table = RwWords(pc.chunks);
    uint e = c * HP_EXR_ZIP_CHUNK_WORDS;
    if (gl_LocalInvocationIndex == 0u)
        s_status = inflate_slice(table, e);
    if (!FUSED)
        return;
    memoryBarrier(); // the chunk's bytes, written by the first invocation, for the whole workgroup
    barrier();
    uint status = finish_chunk(e, gl_LocalInvocationIndex, gl_WorkGroupSize.x, s_status);
    if (gl_LocalInvocationIndex == 0u && status != s_status)
        table.v[e + 6u] = status;
}
#endif

#ifdef HP_EXR_WIDE
// --- The wide inflate: a chunk's stream decoded by the whole workgroup at once ----------------------------
// The serial loop above holds a warp for some 40 ms a 4K chunk, one symbol after another. Here the
// workgroup's invocations (lanes) each take a span of SPAN bits of a block. A symbol here is a literal, the
// end of the block, or a whole match (its length, distance and their extra bits), so that a bit position
// alone says where a lane is. Where a lane's true start lies (the first symbol boundary of its span) is
// known only once the lanes before it are decoded, so each lane maps the starts its span can have to where
// it leaves the span, and the first lane follows the maps (wide_starts). Each lane then counts its bytes;
// their sum across the workgroup says where each writes. The window's bytes are made a batch at a time:
// literals written, match bytes pointing at their sources, pointer jumping, then the copies (walk_batch,
// jump_batch). The workgroup reads a block's header and builds its codes (the first lane), fills the tables
// (all), then decodes the block in windows of lanes x SPAN bits. The work of every lane is bounded
// (MAX_WORK, g_cap): a stream made to be slow stops as HP_EXR_ZIP_UNFINISHED and the host decodes the frame
// on the CPU. docs/BENCHMARKS.md ("The wide inflate") has what each step measured.
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(buffer_reference, std430, buffer_reference_align = 1) coherent buffer Bytes { uint8_t v[]; };

// Bits a lane decodes in a window (pipeline/exr_zip_gpu.c's WIDE_SPAN; benchmarks try others): 512 is
// some 70 symbols of a 4K chunk's blocks.
layout(constant_id = 4) const uint SPAN = 512u;
#define WIDE_MAX 256u // the most lanes (pipeline/exr_zip_gpu.c's WIDE_GROUP)
// The first lane's loop iterations reading a block's header and building its codes: the code lengths (at most
// 19 + 316), then counting, ordering and the first codes of each length, twice (the tables' fill is shared).
#define WIDE_HEADER_COST 1000u
#define W_RAN 0u      // a lane's symbols ran to its span's end
#define W_EOB 1u      // it met the end of the block
#define W_INVALID 2u  // it met a code that is none, or a length or distance symbol past the table
#define W_DEAD 3u     // past the lane that ended the block or met a bad code: nothing of this block here
#define W_OVER 4u     // it ran past its work

shared uint w_start[WIDE_MAX], w_exit[WIDE_MAX], w_out[WIDE_MAX], w_state[WIDE_MAX], w_sum[WIDE_MAX];
// A round's word for the workgroup: bit 0 set by a lane that changed something (or still waits), bit 1 by
// one that failed. Three, so that the first lane clears one that no lane reads any more.
shared uint w_any[3];
shared uint w_status;
shared uint w_hdr[3]; // the block the first lane read: its data's first bit, final | type << 1, stored length

void wide_fail(uint status) { atomicCompSwap(w_status, HP_EXR_ZIP_OK, status); }

// Before a phase of rounds (every lane, in uniform control flow): the round words cleared once every lane
// has read the last phase's.
void wide_rounds_begin()
{
    barrier();
    if (gl_LocalInvocationIndex == 0u)
        w_any[0] = w_any[1] = w_any[2] = 0u;
    barrier();
}

// A round's end for the whole workgroup: bit 0 if any lane changed something (mine), bit 1 if any failed
// (stop). The first lane clears the word of the round after next, which no lane reads any more. Every lane
// calls it, in uniform control flow; w_status itself is only read where no lane can be writing it.
uint wide_round(uint round, bool mine, bool stop)
{
    if (mine || stop)
        atomicOr(w_any[round % 3u], (mine ? 1u : 0u) | (stop ? 2u : 0u));
    if (gl_LocalInvocationIndex == 0u)
        w_any[(round + 1u) % 3u] = 0u;
    memoryBarrier();
    barrier();
    return w_any[round % 3u];
}

// The symbols from bit `at` whose first bit is before `end`: where the next begins (or where the block ends),
// how many bytes they make, and why the lane stopped.
uint g_exit, g_made;
uint scan(uint at, uint end)
{
    seek(at);
    uint made = 0u, state = W_RAN;
    while (consumed() < end) {
        if (++g_used > g_cap) {
            state = W_OVER;
            break;
        }
        uint sym = decode_lit();
        if (sym < 256u) {
            made++;
            continue;
        }
        if (sym == 256u) {
            state = W_EOB;
            break;
        }
        sym -= 257u;
        if (sym >= 29u) {
            state = W_INVALID;
            break;
        }
        made += s_lbase[sym] + bits(s_lext[sym]);
        uint dsym = decode_dist();
        if (dsym >= 30u) {
            state = W_INVALID;
            break;
        }
        bits(s_dext[dsym]);
    }
    g_exit = consumed();
    g_made = made;
    return state;
}

// Where a lane's true start lies is known only once the lanes before it are decoded, and these streams do
// not resynchronise: half their symbols are literals of nearly uniform bytes, codes of 8 or 9 bits, and a
// decoding started at the wrong bit stays out of step for hundreds of bits (the street frame's chunks: a
// lane's start fixed from the lane before it, round after round, took 209 rounds of 256 lanes, serial).
// So each lane maps every start its span can have to where it leaves the span: a symbol is at most 48
// bits (a 15-bit length code and 5 extra, a 15-bit distance code and 13 extra), so the true start is one of
// the span's first ENTRIES bits. Decodings from different starts that reach a common symbol boundary are one
// from there on (owner[]: the start whose decoding reached each bit first), so a lane decodes some 5 times
// its span's symbols (the street frame's chunks: 318 a lane on average, at most 20 distinct decodings),
// not 48 times. The first lane then follows the maps from lane 0's start: the true start of every lane.
// The starts a lane maps (pipeline/exr_zip_gpu.c's WIDE_ENTRIES; a multiple of 4, at most MAX_START): a
// true start past them is decoded on demand, by its lane alone, while the others wait (wide_starts).
layout(constant_id = 5) const uint ENTRIES = 48u;
#define MAX_START 48u // the longest symbol: every true start lies within a span's first 48 bits
#define EXIT_EOB 0xfeu     // the decoding met the end of the block
#define EXIT_INVALID 0xffu // it met a code that is none, or ran past its work
shared uint w_map[WIDE_MAX * ENTRIES / 4u]; // a byte per start: its exit past the span's end, or EXIT_*
shared uint w_last;   // the lane whose true decoding ends the window or the block
shared uint w_pos, w_off, w_miss; // following the maps: the next lane, its start in its span; a lane unmapped
shared uint w_chains; // the most distinct decodings a lane's map took (the table's word 8, for benchmarks)
// The first lane's, for the table's words 12 and 13 (benchmarks): the farthest true start into a span, and
// how many true starts lay 16 bits or more into theirs.
uint g_stat_far_start, g_stat_starts_past16;

uint map_get(uint lane, uint s) { return (w_map[(lane * ENTRIES + s) >> 2] >> (8u * (s & 3u))) & 255u; }

uint byte_of(uint w, uint i) { return (w >> (8u * (i & 3u))) & 255u; }

// One symbol at the reader: 0, or EXIT_EOB (the end of the block), or EXIT_INVALID (a code that is none).
uint step_symbol()
{
    uint sym = decode_lit();
    if (sym == 256u)
        return EXIT_EOB;
    if (sym > 256u) {
        sym -= 257u;
        if (sym >= 29u)
            return EXIT_INVALID;
        bits(s_lext[sym]);
        uint dsym = decode_dist();
        if (dsym >= 30u)
            return EXIT_INVALID;
        bits(s_dext[dsym]);
    }
    return 0u;
}

// The exit of the decoding from bit s of the span [from, from + SPAN): the first symbol boundary at or past
// its end, less the end; or EXIT_*.
uint chain_exit(uint from, uint s)
{
    seek(from + s);
    for (;;) {
        uint r = consumed() - from;
        if (r >= SPAN)
            return r - SPAN;
        if (++g_used > g_cap)
            return EXIT_INVALID;
        uint why = step_symbol();
        if (why != 0u)
            return why;
    }
}

// Lane's map: for each start s of the first ENTRIES bits of its span [from, from + SPAN), the exit of the
// decoding from there, or EXIT_*.
void map_span(uint lane, uint from)
{
    uint owner[(SPAN + MAX_START) / 4u]; // a byte a bit of the span and past it: the start that reached it
    uint exits[ENTRIES / 4u];
    for (uint i = 0u; i < (SPAN + MAX_START) / 4u; i++)
        owner[i] = 0xffffffffu;
    g_used += (SPAN + MAX_START) / 4u + ENTRIES / 4u; // these two loops
    uint chains = 0u;
    for (uint s = 0u; s < ENTRIES; s++) {
        uint exit = EXIT_INVALID, r = s;
        for (;;) {
            uint o = byte_of(owner[r >> 2], r);
            if (o != 0xffu) { // a boundary an earlier start's decoding reached: the same from here on
                exit = byte_of(exits[o >> 2], o);
                break;
            }
            if (r >= SPAN) {
                exit = r - SPAN;
                break;
            }
            owner[r >> 2] &= ~(0xffu << (8u * (r & 3u)));
            owner[r >> 2] |= s << (8u * (r & 3u));
            if (++g_used > g_cap)
                break;
            if (r == s) { // a decoding of its own
                seek(from + s);
                chains++;
            }
            uint why = step_symbol();
            if (why != 0u) {
                exit = why;
                break;
            }
            r = consumed() - from;
        }
        if ((s & 3u) == 0u)
            exits[s >> 2] = 0u;
        exits[s >> 2] |= exit << (8u * (s & 3u));
    }
    for (uint i = 0u; i < ENTRIES / 4u; i++)
        w_map[lane * (ENTRIES / 4u) + i] = exits[i];
    atomicMax(w_chains, chains);
    if (g_used > g_cap)
        wide_fail(HP_EXR_ZIP_UNFINISHED);
}

// Every lane's true start (w_start) from the maps, and w_last: the lane that ends the window (the last), or
// the block (EXIT_EOB), or meets a bad code (EXIT_INVALID). The first lane follows the maps, a lookup a
// lane; where a true start lies past a lane's map, that lane decodes it (chain_exit) while the others wait
// at the barrier, and the first lane goes on from there.
#define NO_LANE 0xffffffffu
void wide_starts(uint lane, uint lanes, uint win)
{
    map_span(lane, win + lane * SPAN);
    if (lane == 0u) {
        w_pos = 0u;
        w_off = 0u;
    }
    memoryBarrierShared();
    barrier();
    for (;;) {
        if (lane == 0u) {
            uint s = w_off, t = w_pos;
            w_miss = NO_LANE;
            if (s >= EXIT_EOB) { // the unmapped lane before ended the block, or met a bad code
                w_last = t - 1u;
            } else {
                for (; t < lanes; t++) {
                    g_used++;
                    w_start[t] = win + t * SPAN + s;
                    g_stat_far_start = max(g_stat_far_start, s);
                    g_stat_starts_past16 += s >= 16u ? 1u : 0u;
                    if (s >= ENTRIES) {
                        w_miss = t;
                        break;
                    }
                    s = map_get(t, s);
                    if (s >= EXIT_EOB)
                        break;
                }
                w_last = min(t, lanes - 1u);
            }
        }
        memoryBarrierShared();
        barrier();
        uint miss = w_miss;
        if (miss == NO_LANE)
            break;
        if (lane == miss) {
            w_off = chain_exit(win + lane * SPAN, w_start[lane] - (win + lane * SPAN));
            w_pos = lane + 1u; // lanes itself when it is the last: the first lane's loop then ends at once
        }
        memoryBarrierShared();
        barrier();
    }
}

// Inclusive sum of v over lanes 0..lane (Hillis and Steele's scan in shared memory).
uint wide_prefix(uint lane, uint lanes, uint v)
{
    w_sum[lane] = v;
    barrier();
    for (uint d = 1u; d < lanes; d <<= 1u) {
        g_used++;
        uint add = lane >= d ? w_sum[lane - d] : 0u;
        barrier();
        w_sum[lane] += add;
        barrier();
    }
    return w_sum[lane];
}

// --- The window's bytes, a batch at a time: values where known, pointers where not, then pointer jumping ---
// Copying a match needs its source bytes, and a source is often an earlier match's bytes in another
// lane: the high bytes' runs chain from lane to lane, and copying match by match as sources became known
// took 94 rounds of 256 lanes a window on the 4K frame (the previous build, docs/BENCHMARKS.md). Instead,
// every byte of a match points at its source, taken back to before the match's own start (a run of
// distance d repeats its first d bytes: byte x of the match at m reads m - d + (x - m) mod d), so that a
// step spans a whole match. Literals are written at once and point at themselves; a pointer before the
// batch points at a byte already written. Then each pointer is replaced by its target's, over and over
// (pointer jumping: Wyllie 1979), until every byte points at a written one: as many rounds as the log of
// the longest chain; then every lane copies its share of the bytes. The walk only stores pointers: a lane's
// runs can be thousands of bytes, and copying them there (a load that waits on memory for each byte) held
// its warp 6 ms more a 4K frame (docs/BENCHMARKS.md).
// The batch's pointers live in the image's memory of the chunk's own rows (the finish overwrites it), a
// word a byte, so a batch is as many bytes as those rows hold words.
uint g_ptr_base, g_batch; // the pointers' first word in the image's memory; bytes a batch
uint g_chunk_lo;          // the chunk's first byte in unpacked: no pointer leads before it
// For the table's words 9-11 (benchmarks): the most rounds of pointer jumping a batch took; the windows and
// the blocks.
uint g_stat_rounds, g_stat_windows, g_stat_blocks;

// Lane's symbols from its start, its bytes from q on, those in [lo, hi) written: values, or pointers.
// HP_EXR_ZIP_OK, HP_EXR_ZIP_BAD_DATA (a distance before the chunk's first byte) or HP_EXR_ZIP_UNFINISHED
// (past the lane's work). A failed walk leaves the batch's bytes after it as the memory held them: the
// caller fails the chunk (wide_fail), whatever jump_batch then makes of them, and the CPU decodes the frame.
uint walk_batch(uint end, uint q, uint lo, uint hi, uint chunk_lo)
{
    Bytes dst = Bytes(pc.unpacked);
    CoherentWords ptr = CoherentWords(pc.image);
    while (consumed() < end && q < hi) {
        if (++g_used > g_cap)
            return HP_EXR_ZIP_UNFINISHED;
        uint sym = decode_lit();
        if (sym < 256u) {
            if (q >= lo) {
                dst.v[q] = uint8_t(sym);
                ptr.v[g_ptr_base + q - lo] = q;
            }
            q++;
            continue;
        }
        if (sym == 256u)
            break;
        sym -= 257u;
        uint len = s_lbase[sym] + bits(s_lext[sym]);
        uint dsym = decode_dist();
        uint dist = s_dbase[dsym] + bits(s_dext[dsym]);
        if (dist > q - chunk_lo)
            return HP_EXR_ZIP_BAD_DATA;
        uint from = max(q, lo), to = min(q + len, hi);
        g_used += to > from ? to - from : 0u;
        if (g_used > g_cap)
            return HP_EXR_ZIP_UNFINISHED;
        // Pointers only, one store a byte: the copies are jump_batch's, spread over every lane (a lane's
        // run can be thousands of bytes, and a load of the byte it repeats waits on memory each time).
        uint r = from > q && to > from ? (from - q) % dist : 0u; // no division for a match wholly before lo
        for (uint x = from; x < to; x++) {
            ptr.v[g_ptr_base + x - lo] = q - dist + r; // before the batch: written, final
            r = r + 1u == dist ? 0u : r + 1u;
        }
        q += len;
    }
    return HP_EXR_ZIP_OK;
}

// The batch's pointers jumped until each points at a literal of the batch (which points at itself) or at a
// byte before it (written), then those bytes copied. Every lane, in uniform control flow. False if a pointer
// leads past the batch or before the chunk (memory a failed walk left), or past 64 rounds (jumping halves
// a chain each round and a batch's chains are at most its length long, so 32 would do), or past the lane's
// work.
bool jump_batch(uint lane, uint lanes, uint lo, uint hi)
{
    CoherentWords ptr = CoherentWords(pc.image);
    uint n = hi - lo;
    bool bad = false;
    wide_rounds_begin();
    uint round = 0u;
    for (;; round++) {
        bool changed = false;
        for (uint x = lo + lane; x < hi && !bad; x += lanes) {
            g_used++;
            uint p = ptr.v[g_ptr_base + x - lo];
            if (p < lo) { // a byte before the batch: written, the end of the chain
                bad = p < g_chunk_lo;
                continue;
            }
            uint pp = p - lo < n ? ptr.v[g_ptr_base + p - lo] : ~0u;
            bad = pp != ~0u ? (pp >= lo && pp - lo >= n) || pp < g_chunk_lo : true;
            if (!bad && pp != p) {
                ptr.v[g_ptr_base + x - lo] = pp;
                changed = true;
            }
        }
        bad = bad || g_used > g_cap;
        memoryBarrierBuffer();
        g_used++;
        uint word = wide_round(round, changed, bad);
        if (word == 0u || (word & 2u) != 0u || round == 64u) {
            bad = bad || (word & 2u) != 0u || round == 64u;
            break;
        }
    }
    Bytes dst = Bytes(pc.unpacked);
    for (uint x = lo + lane; x < hi && !bad; x += lanes) {
        g_used++;
        uint p = ptr.v[g_ptr_base + x - lo];
        if (p != x)
            dst.v[x] = dst.v[p];
    }
    memoryBarrierBuffer();
    barrier();
    g_stat_rounds = max(g_stat_rounds, round + 1u);
    return !bad;
}

// One window of a block of Huffman codes from bit win, n bytes of the chunk written before it. Returns
// where the next window begins, or the block's end with eob; n advanced. w_status says whether it failed,
// read by the caller after the barrier that follows.
shared uint w_next, w_eob;

uint wide_window(uint lane, uint lanes, uint win, inout uint n, out bool eob, uint chunk_lo)
{
    uint end = win + (lane + 1u) * SPAN;
    wide_starts(lane, lanes, win);
    uint state = W_DEAD;
    if (lane <= w_last)
        state = scan(w_start[lane], end);
    w_state[lane] = state;
    w_exit[lane] = g_exit;
    w_out[lane] = g_made;
    memoryBarrierShared();
    barrier();
    bool live = state == W_RAN || state == W_EOB;
    if (state == W_INVALID)
        wide_fail(HP_EXR_ZIP_BAD_DATA);
    if (state == W_OVER)
        wide_fail(HP_EXR_ZIP_UNFINISHED);
    // Lanes 0..k ran their spans; lane k (the last, or the one that ended the block, or failed) says where
    // the next window or block begins.
    if (state != W_DEAD && (lane + 1u == lanes || w_state[lane + 1u] == W_DEAD)) {
        w_next = w_exit[lane];
        w_eob = state == W_EOB ? 1u : 0u;
    }
    uint made = live ? w_out[lane] : 0u;
    uint upto = wide_prefix(lane, lanes, made); // its barriers publish w_next and w_eob too
    uint total = w_sum[lanes - 1u], next = w_next;
    eob = w_eob != 0u;
    if (lane == 0u && total > g_limit - (n - chunk_lo))
        wide_fail(HP_EXR_ZIP_LONG);
    if (lane == 0u && next > g_in_size * 8u)
        wide_fail(HP_EXR_ZIP_TRUNCATED);
    memoryBarrierShared();
    barrier();
    uint status = w_status;
    barrier(); // read by every lane before a walk below can write it
    if (status != HP_EXR_ZIP_OK)
        return next;
    uint lo = n + upto - made, hi = lo + made;
    for (uint b = n; b < n + total; b += g_batch) {
        uint b_hi = min(b + g_batch, n + total);
        if (live && lo < b_hi && hi > b) {
            seek(w_start[lane]);
            uint walked = walk_batch(end, lo, b, b_hi, chunk_lo);
            if (walked != HP_EXR_ZIP_OK)
                wide_fail(walked);
        }
        memoryBarrierBuffer();
        barrier();
        // A failed walk left pointers that jump_batch refuses, or lets it finish over bytes nobody reads:
        // the chunk has failed either way (w_status, read by the caller after the barrier below).
        if (!jump_batch(lane, lanes, b, b_hi)) {
            if (lane == 0u)
                wide_fail(HP_EXR_ZIP_UNFINISHED);
            break; // uniform: jump_batch's verdict is the workgroup's
        }
    }
    memoryBarrierShared();
    barrier(); // the failures above, before the caller reads w_status
    n += total;
    return next;
}

// The block's header at bit `at`, read by the first lane: w_hdr, and for a block of codes its counts and
// symbols (the whole workgroup fills the tables after). room: the bytes the chunk still takes.
void wide_header(uint at, uint room)
{
    seek(at);
    uint last = bits(1), type = bits(2);
    w_hdr[1] = last | type << 1;
    g_used += BLOCK_COST;
    bool ok = true;
    if (type == 0u) {
        drop(g_nbits & 7u); // to the byte boundary
        uint len = bits(16), nlen = bits(16);
        ok = len == (~nlen & 0xffffu);
        if (ok && len > room)
            wide_fail(HP_EXR_ZIP_LONG);
        w_hdr[2] = len;
    } else if (type == 1u || type == 2u) {
        g_used += WIDE_HEADER_COST;
        ok = type == 1u ? fixed_codes() : dynamic_codes();
    } else {
        ok = false;
    }
    w_hdr[0] = consumed();
    if (consumed() > g_in_size * 8u)
        wide_fail(HP_EXR_ZIP_TRUNCATED);
    if (!ok)
        wide_fail(HP_EXR_ZIP_BAD_DATA);
    if (g_used > g_cap)
        wide_fail(HP_EXR_ZIP_UNFINISHED);
}

// A chunk stored as is (its packed size is its unpacked size), a word at a time across the workgroup.
void wide_copy_stored(uint lane, uint lanes)
{
    Words p = Words(pc.packed);
    uint first = g_in_base >> 2, shift = 8u * (g_in_base & 3u);
    for (uint w = lane; w < (g_limit + 3u) / 4u; w += lanes) {
        uint v = p.v[first + w];
        if (shift != 0u)
            v = (v >> shift) | (p.v[first + w + 1u] << (32u - shift)); // within the padding at the end
        CoherentWords(pc.unpacked).v[g_out_words + w] = v;
    }
}

// The chunk's zlib stream into its unpacked bytes: its status; the Adler-32 into the table's word 7 for
// finish_chunk to check.
uint wide_inflate(uint lane, uint lanes, RwWords table, uint e)
{
    if (g_in_size < 6u) // a zlib header and an Adler-32 at the least
        return HP_EXR_ZIP_TRUNCATED;
    uint cmf = packed_byte(0u), flg = packed_byte(1u);
    if ((cmf & 15u) != 8u || (cmf >> 4) > 7u || ((cmf << 8) | flg) % 31u != 0u || (flg & 0x20u) != 0u)
        return HP_EXR_ZIP_BAD_DATA; // not deflate, a window over 32 KiB, a bad check, or a preset dictionary
    uint chunk_lo = g_out_words * 4u, n = chunk_lo, at = 16u;
    g_chunk_lo = chunk_lo;
    g_fill_luts = false;
    for (bool last = false; !last;) {
        if (lane == 0u)
            wide_header(at, g_limit - (n - chunk_lo));
        memoryBarrierShared();
        barrier();
        uint status = w_status, kind = w_hdr[1], data = w_hdr[0], len = w_hdr[2];
        barrier(); // read by all before the first lane can write them again (the next block's header)
        if (status != HP_EXR_ZIP_OK)
            return status;
        g_stat_blocks++;
        last = (kind & 1u) != 0u;
        if ((kind >> 1) == 0u) {
            if (data + 8u * len > g_in_size * 8u)
                return HP_EXR_ZIP_TRUNCATED;
            Bytes dst = Bytes(pc.unpacked);
            g_used += len / lanes + 1u;
            for (uint i = lane; i < len; i += lanes)
                dst.v[n + i] = uint8_t(packed_byte(data / 8u + i));
            memoryBarrierBuffer(); // for the matches after it, which read it as known, past the next barrier
            n += len;
            at = data + 8u * len;
            continue;
        }
        clear_lut(T_LIT, LUT_BITS, lane, lanes);
        clear_lut(T_DIST, DIST_LUT_BITS, lane, lanes);
        memoryBarrierShared();
        barrier();
        fill_lut(T_LIT, LUT_BITS, lane, lanes);
        fill_lut(T_DIST, DIST_LUT_BITS, lane, lanes);
        g_used += g_fill_work;
        g_fill_work = 0u;
        memoryBarrierShared();
        barrier();
        at = data;
        for (bool eob = false; !eob;) {
            g_stat_windows++;
            at = wide_window(lane, lanes, at, n, eob, chunk_lo);
            status = w_status;
            barrier();
            if (status != HP_EXR_ZIP_OK)
                return status;
        }
    }
    if (n - chunk_lo < g_limit)
        return HP_EXR_ZIP_SHORT;
    uint p = (at + 7u) & ~7u;
    if (p + 32u > g_in_size * 8u)
        return HP_EXR_ZIP_TRUNCATED;
    p >>= 3;
    if (lane == 0u)
        table.v[e + 7u] = packed_byte(p) << 24 | packed_byte(p + 1u) << 16 | packed_byte(p + 2u) << 8 | packed_byte(p + 3u);
    return HP_EXR_ZIP_OK;
}

void main()
{
    init_length_codes();
    uint c = gl_WorkGroupID.x, lane = gl_LocalInvocationIndex, lanes = gl_WorkGroupSize.x;
    if (c >= pc.chunk_count)
        return;
    RwWords table = RwWords(pc.chunks);
    uint e = c * HP_EXR_ZIP_CHUNK_WORDS;
    g_in_base = table.v[e + 0u];
    g_in_size = table.v[e + 1u];
    g_out_words = table.v[e + 2u] >> 2;
    g_limit = table.v[e + 3u];
    g_used = 0u;
    g_stat_rounds = g_stat_windows = g_stat_blocks = g_stat_far_start = g_stat_starts_past16 = 0u;
    uint64_t cap = MAX_WORK != 0u ? uint64_t(MAX_WORK) : 8ul * g_limit + uint64_t(HEADER_COST) * (16u + g_limit / 1024u);
    g_cap = uint(min(cap, uint64_t(0xffffffffu - 4u * HEADER_COST)));
    // The batches' pointers: the image's memory of the chunk's own rows, which only its finish overwrites.
    g_ptr_base = table.v[e + 4u] * pc.width * 2u; // words: 8 bytes a pixel
    g_batch = table.v[e + 5u] * pc.width * 2u;
    g_fill_work = 0u;
    if (lane == 0u) {
        w_status = HP_EXR_ZIP_OK;
        w_chains = 0u;
        // Until the verdict below, unfinished, not as the host wrote it. Lavapipe's loop limit does not end an
        // invocation (it leaves the loop and goes on), so what keeps a cut-short loop's bytes from an OK
        // verdict there is g_cap: MAX_WORK of our count, well under its 65535.
        table.v[e + 6u] = HP_EXR_ZIP_UNFINISHED;
    }
    memoryBarrier();
    barrier();
    uint status = HP_EXR_ZIP_OK;
    if (g_in_size == g_limit) {
        g_used += (g_limit / 4u) / lanes + 1u;
        wide_copy_stored(lane, lanes);
    } else {
        status = wide_inflate(lane, lanes, table, e);
    }
    // The finish's loops too must fit the lane's work: the sums and the predictor over its words (4 bytes
    // each), the first lane's pass over the lanes' sums, the pixels.
    uint words = (g_limit + 3u) / 4u, pixels = table.v[e + 5u] * pc.width;
    if (g_used + 10u * (words / lanes + 1u) + pixels / lanes + 1u + lanes > g_cap)
        wide_fail(HP_EXR_ZIP_UNFINISHED);
    memoryBarrier(); // the chunk's bytes, and w_status, for the whole workgroup
    barrier();
    if (status == HP_EXR_ZIP_OK)
        status = w_status;
    uint verdict = finish_chunk(e, lane, lanes, status);
    if (lane == 0u) {
        table.v[e + 6u] = verdict;
        table.v[e + 8u] = w_chains;
        table.v[e + 9u] = g_stat_rounds;
        table.v[e + 10u] = g_stat_windows;
        table.v[e + 11u] = g_stat_blocks;
        table.v[e + 12u] = g_stat_far_start;
        table.v[e + 13u] = g_stat_starts_past16;
    }
}
#endif
#endif

#ifdef HP_EXR_FINISH
// With slices: after the last, a workgroup of FINISH_MAX per chunk finishes it (the fused inflate does it
// in its own workgroup of 32).
layout(local_size_x = FINISH_MAX) in;

void main()
{
    uint c = gl_WorkGroupID.x;
    if (c >= pc.chunk_count)
        return;
    uint e = c * HP_EXR_ZIP_CHUNK_WORDS;
    uint status = RwWords(pc.chunks).v[e + 6u];
    uint verdict = finish_chunk(e, gl_LocalInvocationIndex, gl_WorkGroupSize.x, status);
    if (gl_LocalInvocationIndex == 0u && verdict != status)
        RwWords(pc.chunks).v[e + 6u] = verdict;
}
#endif

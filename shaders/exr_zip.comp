#version 460
// EXR's ZIP and ZIPS chunks decoded on the GPU (issue 20: the CPU's inflate was what bounded throughput).
// One source, two modules (shaders/meson.build); exr_inflate_wide.comp is the other inflate, a workgroup a
// chunk at once, and they share include/exr_zip_io.glsl, exr_inflate.glsl and exr_finish.glsl:
//   HP_EXR_INFLATE  one invocation per chunk inflates the chunk's zlib stream (RFC 1950, 1951) into the
//                   unpacked buffer as it comes, and records the stream's Adler-32 and a status (whole and
//                   valid, or why not). A chunk whose packed size equals its unpacked size was stored as is
//                   (OpenEXR writes it so when deflate did not make it smaller): copied.
//   HP_EXR_FINISH   after the inflate (its last slice; every frame's in a batch): one workgroup per chunk
//                   finishes it (exr_finish.glsl's finish_chunk, HP_FINISH_BY_SUBGROUPS): the Adler-32 checked,
//                   EXR's byte predictor undone (OpenEXR's ImfZip.cpp, internal_zip.c: t[i] = t[i-1] + t[i] -
//                   128 modulo 256, from the second byte), then EXR's byte split (the first half of a chunk's
//                   bytes are the even ones) and the line's planes (channels in the file's order, a plane a
//                   channel, half, float or uint) gathered into the pipeline's input: RGBA16F with the file's
//                   half bits, or RGBA32F where a colour channel is float; alpha 1.0 where the file has none,
//                   one plane read for R, G and B of a grey frame.
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
// The finish was once the inflate's own: a workgroup of 32 a chunk, whose first invocation inflated while
// the others waited, then all 32 finished it. A pass of its own after every chunk's inflate, its workgroups
// of 256 reading the bytes a subgroup at a time, took 10-15% less time for 16 frames and 0.6-2.7 ms less for
// one (H200, docs/BENCHMARKS.md "The finish a pass of its own (issue 36)").
#include "exr_zip_io.glsl"

#ifdef HP_EXR_INFLATE
layout(local_size_x = 1) in;
#define HP_INFLATE_TABLES_IN_MEMORY

// Work per dispatch, in loop iterations; 0: no limit (pipeline/exr_zip_gpu.c). Lavapipe ends any invocation
// after 65535 loop iterations in all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of a
// shader), and a 4K chunk takes some million: there the host records one dispatch after another, and each
// goes on where the one before stopped (the table's words 8-15). A block's codes are built again from its
// header on the way back in.
layout(constant_id = 0) const uint SLICE = 0u;
#include "exr_inflate.glsl"

bool sliced_out() { return (SLICE != 0u && g_used >= SLICE) || g_used > g_cap; }

// --- Writing bytes: the inflated bytes as they are, a word at a time --------------------------------------
// The predictor and the Adler-32 are left to the finish (HP_EXR_FINISH), where a workgroup shares them: in
// this serial loop every operation a byte costs is paid 66 million times a 4K frame. Matches read their source back
// from global memory: a ring of the last words in shared memory measured no faster at 1 and 4 KiB and
// slower at deflate's whole 32 KiB (H200, bench_exr_zip: 40.6, 40.9 and 68.3 ms a 4K frame; the words just
// written are in the cache, and 45 KiB of shared memory a workgroup leaves fewer of them on an SM).
uint g_n;
uint g_word;      // the bytes of word g_n / 4 written so far

// Read by this invocation's matches, and by the finish after a barrier.
void store_word(uint wi, uint v) { CoherentWords(pc.unpacked).v[g_out_words + wi] = v; }

void put(uint b)
{
    g_word |= b << (8u * (g_n & 3u));
    store_word(g_n >> 2, g_word);
    g_word = (g_n & 3u) == 3u ? 0u : g_word;
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

// Whether a literal counts as an iteration. Where the loop has a limit of its own (lavapipe's, SLICE or
// MAX_WORK set) every iteration must. Without, a literal is a byte written and g_limit bounds them: the count
// and its test leave the loop's most frequent path, and the work bound is checked at every match and block.
// A literal decoded bit by bit past the table is still charged its bits (decode_slow), acted on at the next
// match or block: a stream of literals of long codes takes up to 16 iterations a byte, its bytes bounding it.
const bool COUNT_LITERALS = SLICE != 0u || MAX_WORK != 0u;

uint inflate_block_symbols()
{
    for (;;) {
        if (COUNT_LITERALS) {
            if (sliced_out())
                return SUSPENDED;
            g_used++;
        }
        uint e = decode_lit();
        if (e < E_LENGTH) {
            if (g_n == g_limit)
                return HP_EXR_ZIP_LONG;
            put(e >> 8);
            continue;
        }
        if ((e & E_KIND) != E_LENGTH)
            return (e & E_KIND) == E_END ? HP_EXR_ZIP_OK : HP_EXR_ZIP_BAD_DATA;
        uint len, dist;
        if (!decode_match(e, len, dist) || dist > g_n)
            return HP_EXR_ZIP_BAD_DATA;
        if (len > g_limit - g_n)
            return HP_EXR_ZIP_LONG;
        g_used += len;
        copy(dist, len);
        if (!COUNT_LITERALS && sliced_out())
            return SUSPENDED;
    }
}

// A stored block's bytes, as many as the slice allows: g_stored_left are still to come.
uint g_stored_left;
void stored_bytes()
{
    for (; g_stored_left > 0u && !sliced_out(); g_stored_left--, g_used++)
        put(bits(8));
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

void main()
{
    uint c = gl_WorkGroupID.x;
    if (c >= pc.chunk_count)
        return;
    g_tables = InflateTables(packUint2x32(pc.tables) + uint64_t(c) * uint64_t(HP_EXR_ZIP_TABLE_WORDS * 4u));
    init_length_codes();
    inflate_slice(RwWords(pc.chunks), c * HP_EXR_ZIP_CHUNK_WORDS);
}

#endif

#ifdef HP_EXR_FINISH
// After the inflate: a workgroup of FINISH_MAX a chunk finishes it, its subgroups a run of words each.
#define HP_FINISH_BY_SUBGROUPS
#include "exr_finish.glsl"
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


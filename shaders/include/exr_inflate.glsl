// EXR ZIP decoding on the GPU: inflating, the pieces both inflates share (RFC 1951): the work bound, the
// code tables, the bit reader, the canonical codes and a block's header. After
// exr_zip_io.glsl.
// The most work a chunk may take in one run without slices; 0: four iterations a byte and a block's header
// every KiB, far more than any deflate encoder's stream needs, so that a stream made to be slow (empty
// blocks, codes built again and again) stops there: HP_EXR_ZIP_UNFINISHED, and the host decodes the frame on
// the CPU. Lavapipe's pipeline without slices (the tests') takes 10000, under its loop limit.
layout(constant_id = 3) const uint MAX_WORK = 0u;
#define HEADER_COST 5000u // loop iterations of reading and building one block's codes, rounded up
// A block whose codes are not built (stored, or fixed after the first): lavapipe's limiter counted some 30
// iterations for each such empty block (2000 of them broke a slice of 10000 off, tests/fuzz/regressions),
// so it is charged that, which no encoder's stream notices.
#define BLOCK_COST 32u
uint g_used;            // loop iterations of this slice so far
uint g_cap;             // its most (MAX_WORK's)

#define LUT_BITS 10u
#define LUT_MASK ((1u << LUT_BITS) - 1u)
#define DIST_LUT_BITS 8u
#define DIST_LUT_MASK ((1u << DIST_LUT_BITS) - 1u)
#define NO_SYMBOL 0xffffu
#define T_LIT 0u
#define T_DIST 1u

// --- The code tables --------------------------------------------------------------------------------
//   lut_lit, lut_dist    lookup tables of entries (below: what a code means, and its length; length 0: a
//                        longer code, or none, decode_slow)
//   code_count, code_sym per code (0 literal/length, 1 distance; the code-length code borrows 1): codes of
//                        each length, and the symbols in canonical order (RFC 1951 3.2.2)
//   code_lens            the code lengths of one block as read: literal/length then distance
//   len_base ...         RFC 1951 3.2.5: base and extra bits of the length symbols 257..285 and the distance
//                        symbols 0..29
//   code_first, code_index  per code, for filling its table: the first code of each length and the
//                        canonical index of its first symbol (3.2.2's next_code, and the running count of
//                        shorter codes)
// Where they live is the includer's choice. The wide inflate's workgroup shares one set in shared memory.
// The serial loop (HP_INFLATE_TABLES_IN_MEMORY) decodes a chunk in one invocation, so nothing needs them
// shared: they are the chunk's own words in memory (pc.tables, hp_shared.h's HP_EXR_ZIP_TABLE_WORDS a chunk),
// read through the SM's L1 cache. In shared memory they held 9.6 KB a workgroup, and the H200's driver gave
// the pass 48 KB of shared memory an SM: three chunks an SM at once, however many were waiting (frames'
// chunks in one dispatch: a time that stepped up every 3 chunks an SM, docs/BENCHMARKS.md, "Frames' chunks
// together").
#define LIT_SYMBOLS 288u
#ifdef HP_INFLATE_TABLES_IN_MEMORY
layout(buffer_reference, std430, buffer_reference_align = 16) buffer InflateTables {
    uint lit[1u << LUT_BITS];
    uint dist[1u << DIST_LUT_BITS];
    uint count[2][16];
    uint sym[2][LIT_SYMBOLS];
    uint lens[320];
    uint lbase[29], lext[29], dbase[30], dext[30];
    uint first[2][16], index[2][16];
    // The rest of the chunk's words; an array of no words or fewer (a compile error) if the ones above outgrow
    // HP_EXR_ZIP_TABLE_WORDS.
    uint unused[int(HP_EXR_ZIP_TABLE_WORDS) - int((1u << LUT_BITS) + (1u << DIST_LUT_BITS) + 2u * 16u +
                                                  2u * LIT_SYMBOLS + 320u + 29u + 29u + 30u + 30u + 4u * 16u)];
};
InflateTables g_tables; // the chunk's (main sets it)
#define lut_lit g_tables.lit
#define lut_dist g_tables.dist
#define code_count g_tables.count
#define code_sym g_tables.sym
#define code_lens g_tables.lens
#define len_base g_tables.lbase
#define len_extra g_tables.lext
#define dist_base g_tables.dbase
#define dist_extra g_tables.dext
#define code_first g_tables.first
#define code_index g_tables.index
#else
shared uint lut_lit[1u << LUT_BITS];
shared uint lut_dist[1u << DIST_LUT_BITS];
shared uint code_count[2][16];
shared uint code_sym[2][LIT_SYMBOLS];
shared uint code_lens[320];
shared uint len_base[29], len_extra[29], dist_base[30], dist_extra[30];
shared uint code_first[2][16], code_index[2][16];
#endif

// RFC 1951 3.2.5: the length symbols' bases and extra bits, and the distance symbols', into their tables by
// the first invocation (read after the workgroup's first barrier, or by that invocation alone).
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
            len_base[i] = lbase[i];
            len_extra[i] = lext[i];
        }
        dist_base[i] = dbase[i];
        dist_extra[i] = dext[i];
    }
}

// --- Reading bits: a 64-bit buffer filled a word at a time, least significant bit first -------------------
uint64_t g_bits;
uint g_nbits;
uint g_word_at;  // the next word refill takes (held in g_ahead)
uint g_in_base, g_in_size;
uint g_out_words; // the chunk's first word in unpacked
uint g_limit;     // the chunk's unpacked bytes

// The word at g_word_at, loaded one refill ahead: its load is issued when the word before it is taken, so
// that the next refill, some symbols on, finds it arrived instead of waiting on memory.
uint g_ahead;

// Past the chunk's end (a damaged stream reads on) the next bytes are the next chunk's for 8 bytes, then
// zeros: nothing is loaded from 8 bytes past the end, and the packed buffer's 16 bytes of padding keep the
// last loads of the last chunk inside it. Reading past the end is TRUNCATED whatever was read.
uint load_word(uint at) { return at * 4u < g_in_base + g_in_size + 8u ? Words(pc.packed).v[at] : 0u; }

void refill()
{
    if (g_nbits > 32u)
        return;
    uint w = g_ahead;
    g_word_at++;
    g_ahead = load_word(g_word_at);
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
        uint count = code_count[t][len];
        if (code < first + count) {
            drop(len);
            // its loop's iterations count toward the slice; held at one past the cap, as a run of literals
            // charged here may go unchecked (exr_zip.comp's COUNT_LITERALS) and must not wrap the count
            g_used = min(g_used + len, g_cap + 1u);
            return code_sym[t][index + code - first];
        }
        index += count;
        first = (first + count) << 1u;
        code <<= 1u;
    }
    return NO_SYMBOL;
}

// --- Table entries: what a code means, whole ---------------------------------------------------------
// An entry carries a length's or distance's base and extra bits, not the symbol, so that a match needs no
// second lookup after its code's (libdeflate's decode tables do the same, deflate_decompress.c):
//   bits 0-3    the code's length in bits (0 in a table: a longer code, or none; decode_slow)
//   bits 4-7    the extra bits after the code (RFC 1951 3.2.5: a length's 0-5, a distance's 0-13)
//   bits 8-23   a literal's byte, or the base of a length (3-258) or distance (1-24577)
//   bits 28-29  the kind: a literal or a distance (0, so that a literal is any entry of the literal/length
//               code below E_LENGTH), a length, the end of the block, or a symbol that is none (286, 287,
//               distances 30 and 31, a code not in the set)
#define E_LENGTH (1u << 28)
#define E_END (2u << 28)
#define E_INVALID (3u << 28)
#define E_KIND (3u << 28)

// The entry of symbol sym of code t, its length bits 0.
uint symbol_entry(uint t, uint sym)
{
    if (t == T_DIST)
        return sym < 30u ? dist_base[sym] << 8 | dist_extra[sym] << 4 : E_INVALID;
    if (sym < 256u)
        return sym << 8;
    if (sym == 256u)
        return E_END;
    sym -= 257u;
    return sym < 29u ? E_LENGTH | len_base[sym] << 8 | len_extra[sym] << 4 : E_INVALID;
}

uint entry_base(uint e) { return (e >> 8) & 0xffffu; }
uint entry_extra(uint e) { return (e >> 4) & 15u; }

// The entry of code t for the bits at the reader, from its table's entry e or bit by bit past the table;
// the code's bits taken.
uint decode_entry(uint e, uint t)
{
    if ((e & 15u) != 0u) {
        drop(e & 15u);
        return e;
    }
    return symbol_entry(t, decode_slow(t));
}

uint decode_lit()
{
    refill();
    return decode_entry(lut_lit[uint(g_bits) & LUT_MASK], T_LIT);
}

uint decode_dist()
{
    refill();
    return decode_entry(lut_dist[uint(g_bits) & DIST_LUT_MASK], T_DIST);
}

// A match after its length's entry e: its length and distance, false where the distance's code is none.
bool decode_match(uint e, out uint len, out uint dist)
{
    len = entry_base(e) + bits(entry_extra(e));
    uint d = decode_dist();
    dist = entry_base(d) + bits(entry_extra(d));
    return d < E_LENGTH;
}

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
            lut_lit[i] = 0u;
        else
            lut_dist[i] = 0u;
    }
}

// The table's entries of the codes of at most lut_bits bits, lane's share of those codes: a code read least
// significant bit first fills every entry whose low bits are its bits reversed. After clear_lut.
void fill_lut(uint t, uint lut_bits, uint lane, uint lanes)
{
    uint size = 1u << lut_bits, codes = code_index[t][lut_bits + 1u];
    for (uint index = lane; index < codes; index += lanes) {
        uint len = 1u;
        while (code_index[t][len + 1u] <= index)
            len++;
        uint code = code_first[t][len] + index - code_index[t][len];
        uint e = symbol_entry(t, code_sym[t][index]) | len;
        for (uint r = bitfieldReverse(code) >> (32u - len); r < size; r += 1u << len) {
            g_fill_work++;
            if (t == T_LIT)
                lut_lit[r] = e;
            else
                lut_dist[r] = e;
        }
    }
}

// The canonical code of the n lengths at code_lens[off]: counts, symbols and, with lut_bits, the table.
// False for an over-subscribed set, or an incomplete one that zlib would refuse (inftrees.c); the fixed
// distance code (30 of 32 five-bit codes) is incomplete by the format's own definition.
bool build(uint t, uint off, uint n, uint lut_bits, bool fixed_set)
{
    for (uint len = 0u; len < 16u; len++)
        code_count[t][len] = 0u;
    for (uint s = 0u; s < n; s++)
        code_count[t][code_lens[off + s]]++;
    uint codes = n - code_count[t][0];
    code_count[t][0] = 0u;
    int left = 1;
    uint longest = 0u;
    for (uint len = 1u; len < 16u; len++) {
        left = (left << 1) - int(code_count[t][len]);
        if (left < 0)
            return false;
        if (code_count[t][len] != 0u)
            longest = len;
    }
    if (left > 0 && codes != 0u && !fixed_set && !(lut_bits != 0u && longest == 1u))
        return false; // incomplete: only one code of length 1 (or none at all) is allowed
    uint offs[16];
    offs[1] = 0u;
    for (uint len = 1u; len < 15u; len++)
        offs[len + 1u] = offs[len] + code_count[t][len];
    uint code = 0u;
    for (uint len = 1u; len < 16u; len++) {
        code_first[t][len] = code;
        code_index[t][len] = offs[len];
        code = (code + code_count[t][len]) << 1u;
    }
    for (uint s = 0u; s < n; s++) {
        uint len = code_lens[off + s];
        if (len != 0u)
            code_sym[t][offs[len]++] = s;
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
        code_lens[s] = s < 144u ? 8u : s < 256u ? 9u : s < 280u ? 7u : 8u;
    for (uint s = 0u; s < 30u; s++)
        code_lens[288u + s] = 5u;
    return build(T_LIT, 0u, 288u, LUT_BITS, true) && build(T_DIST, 288u, 30u, DIST_LUT_BITS, true);
}

bool dynamic_codes() // RFC 1951 3.2.7
{
    uint nlen = bits(5) + 257u, ndist = bits(5) + 1u, ncode = bits(4) + 4u;
    if (nlen > 286u || ndist > 30u)
        return false;
    const uint order[19] = uint[](16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15);
    for (uint i = 0u; i < 19u; i++)
        code_lens[order[i]] = i < ncode ? bits(3) : 0u;
    if (!build(T_DIST, 0u, 19u, 0u, false)) // the code-length code, complete, borrowing the distance slots
        return false;
    for (uint i = 0u; i < nlen + ndist;) {
        refill();
        uint sym = decode_slow(T_DIST);
        if (sym == NO_SYMBOL)
            return false;
        if (sym < 16u) {
            code_lens[i++] = sym;
            continue;
        }
        uint repeat, value = 0u;
        if (sym == 16u) {
            if (i == 0u)
                return false;
            value = code_lens[i - 1u];
            repeat = 3u + bits(2);
        } else if (sym == 17u) {
            repeat = 3u + bits(3);
        } else {
            repeat = 11u + bits(7);
        }
        if (i + repeat > nlen + ndist)
            return false;
        for (; repeat > 0u; repeat--)
            code_lens[i++] = value;
    }
    if (code_lens[256] == 0u) // no end-of-block code
        return false;
    return build(T_LIT, 0u, nlen, LUT_BITS, false) && build(T_DIST, nlen, ndist, DIST_LUT_BITS, false);
}

uint packed_byte(uint i) { return (Words(pc.packed).v[(g_in_base + i) >> 2] >> (8u * ((g_in_base + i) & 3u))) & 255u; }

// The reader at bit `at` of the chunk (a byte offset first: the chunk may lie anywhere past 512 MiB).
void seek(uint at)
{
    uint byte = g_in_base + (at >> 3);
    g_word_at = byte >> 2;
    g_ahead = load_word(g_word_at);
    g_bits = 0ul;
    g_nbits = 0u;
    refill();
    drop(8u * (byte & 3u) + (at & 7u));
}


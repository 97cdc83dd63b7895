/* Deflate with literals and runs (deflate_runs.h). Formats from RFC 1951: block header 3.2.3, length
 * codes 3.2.5, canonical Huffman codes 3.2.2, dynamic block header 3.2.7, stored blocks 3.2.4. */
#include "api/codecs/deflate_runs.h"

#include <stdlib.h>
#include <string.h>

/* Input bytes per block: one code per 64 KiB follows a frame's changing statistics (sky, then detail),
 * costs ~0.2% in headers, and a block that does not compress fits one stored block (at most 65535). */
#define BLOCK_BYTES 65535u
/* A run shorter than this is cheaper as literals: on filtered rows the literal 0 is the most frequent
 * symbol (2-4 bits), while a length code with its distance bit is 8-10. Measured on the 4K Blender street
 * frame and a flat synthetic one: 4 is the smallest output of 3..6. */
#define MIN_RUN 4u
#define MAX_RUN 258u
#define LITLEN_CODES 286u /* 0-255 literals, 256 end of block, 257-285 lengths */
#define DIST_CODES 2u     /* only distance 1 (code 0) is used; code 1 is there to make the code complete */
#define CLEN_CODES 19u

static const uint16_t len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
/* The order the code-length code's lengths are sent in (3.2.7). */
static const uint8_t clen_order[CLEN_CODES] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

size_t hp_deflate_runs_bound(size_t len)
{
    /* Each block is written stored when that is smaller: its bytes, 5 of header, 1 of alignment. Then the
     * closing empty stored block (or a final empty one), 6 bytes, and 8 of slack for the bit writer. */
    size_t blocks = len / BLOCK_BYTES + 1;
    return len + blocks * 6 + 6 + 8;
}

/* --- Bits, least significant first (3.1.1) ------------------------------------------------------------ */

/* The writer stores its accumulator and run_length() loads eight bytes as little-endian words. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "deflate_runs.c reads and writes eight bytes at a time as little-endian words"
#endif

typedef struct bits {
    uint8_t *p;
    uint64_t acc;
    unsigned n; /* bits in acc, under 8 between calls */
} bits;

/* Up to 32 bits. The accumulator is stored whole every time and the pointer moves by the whole bytes in
 * it: no branch per symbol (a branch on "32 bits gathered" mispredicted every few symbols). It writes up
 * to 7 bytes past the last whole byte: hp_deflate_runs_bound() leaves 8 bytes of slack. */
static inline void put(bits *w, uint64_t v, unsigned len)
{
    w->acc |= v << w->n;
    w->n += len;
    memcpy(w->p, &w->acc, 8); /* little-endian: see run_length() */
    w->p += w->n >> 3;
    w->acc >>= w->n & ~7u;
    w->n &= 7;
}

static void align(bits *w)
{
    if (w->n > 0)
        *w->p++ = (uint8_t)w->acc;
    w->acc = 0;
    w->n = 0;
}

/* --- Huffman codes ------------------------------------------------------------------------------------ */

/* Code lengths for freq[0..n) (n <= LITLEN_CODES), none over limit; unused symbols get 0. Huffman's
 * construction by two queues over the sorted counts; when the tree is deeper than limit, the counts are
 * flattened (halved, at least 1) and it is built again, as libwebp and brotli do: rare at 15 bits. */
typedef struct leaf {
    uint32_t w;
    uint16_t sym;
} leaf;

static int leaf_cmp(const void *a, const void *b)
{
    const leaf *x = a, *y = b;
    return x->w != y->w ? (x->w < y->w ? -1 : 1) : (x->sym < y->sym ? -1 : x->sym > y->sym);
}

static void huffman_lengths(const uint32_t *freq, unsigned n, unsigned limit, uint8_t *len)
{
    leaf leaves[LITLEN_CODES];
    uint32_t w[2 * LITLEN_CODES];
    uint16_t parent[2 * LITLEN_CODES];
    uint8_t depth[2 * LITLEN_CODES];
    memset(len, 0, n);
    for (unsigned shift = 0;; shift++) {
        unsigned m = 0;
        for (unsigned s = 0; s < n; s++)
            if (freq[s]) {
                uint32_t f = freq[s] >> shift;
                leaves[m++] = (leaf){.w = f ? f : 1, .sym = (uint16_t)s};
            }
        if (m == 0)
            return;
        if (m == 1) { /* a second symbol of length 1 makes the code complete: zlib refuses some incomplete codes */
            len[leaves[0].sym] = 1;
            len[leaves[0].sym == 0 ? 1 : 0] = 1;
            return;
        }
        qsort(leaves, m, sizeof(leaves[0]), leaf_cmp);
        for (unsigned i = 0; i < m; i++)
            w[i] = leaves[i].w;
        /* nodes 0..m-1 are the leaves, m..2m-2 the internal nodes in the order made (weights nondecreasing) */
        unsigned li = 0, ii = m;
        for (unsigned next = m; next < 2 * m - 1; next++) {
            unsigned pick[2];
            for (int k = 0; k < 2; k++)
                pick[k] = li < m && (ii >= next || w[li] <= w[ii]) ? li++ : ii++;
            w[next] = w[pick[0]] + w[pick[1]];
            parent[pick[0]] = parent[pick[1]] = (uint16_t)next;
        }
        depth[2 * m - 2] = 0;
        unsigned deepest = 0;
        for (unsigned k = 2 * m - 2; k-- > 0;) {
            depth[k] = (uint8_t)(depth[parent[k]] + 1);
            deepest = depth[k] > deepest ? depth[k] : deepest;
        }
        if (deepest <= limit) {
            for (unsigned i = 0; i < m; i++)
                len[leaves[i].sym] = depth[i];
            return;
        }
    }
}

/* Canonical codes from lengths (3.2.2), bit-reversed for the LSB-first writer. */
static void canonical_codes(const uint8_t *len, unsigned n, uint16_t *code)
{
    unsigned count[16] = {0}, next[16];
    for (unsigned s = 0; s < n; s++)
        count[len[s]]++;
    count[0] = 0;
    unsigned c = 0;
    for (unsigned b = 1; b < 16; b++) {
        c = (c + count[b - 1]) << 1;
        next[b] = c;
    }
    for (unsigned s = 0; s < n; s++) {
        if (!len[s])
            continue;
        unsigned v = next[len[s]]++, r = 0;
        for (unsigned b = 0; b < len[s]; b++)
            r |= ((v >> b) & 1u) << (len[s] - 1 - b);
        code[s] = (uint16_t)r;
    }
}

/* --- Blocks ------------------------------------------------------------------------------------------- */

/* A symbol of the block: a literal byte (< 256) or RUN_FLAG | run length. */
#define RUN_FLAG 0x8000u

typedef struct coder {
    uint8_t len_code[MAX_RUN + 1]; /* run length -> index of its length code (0..28) */
    uint16_t *sym;                 /* BLOCK_BYTES symbols */
} coder;

/* The code lengths of both alphabets, run-length coded with 16/17/18 (3.2.7): each entry a symbol of the
 * code-length code and its extra bits. Returns the entry count. */
static unsigned rle_lengths(const uint8_t *lens, unsigned n, uint8_t *csym, uint8_t *cextra)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n;) {
        uint8_t v = lens[i];
        unsigned run = 1;
        while (i + run < n && lens[i + run] == v)
            run++;
        i += run;
        if (v == 0) {
            while (run >= 11) {
                unsigned r = run < 138 ? run : 138;
                csym[k] = 18, cextra[k++] = (uint8_t)(r - 11);
                run -= r;
            }
            if (run >= 3) {
                csym[k] = 17, cextra[k++] = (uint8_t)(run - 3);
                run = 0;
            }
        } else {
            csym[k] = v, cextra[k++] = 0;
            run--;
            while (run >= 3) {
                unsigned r = run < 6 ? run : 6;
                csym[k] = 16, cextra[k++] = (uint8_t)(r - 3);
                run -= r;
            }
        }
        while (run-- > 0)
            csym[k] = v, cextra[k++] = 0;
    }
    return k;
}

/* How many of p[0..lim) equal b. Eight bytes at a time, the first difference found by counting trailing
 * zero bits: on filtered rows, where a byte equals the one before about a time in four, a loop comparing
 * byte by byte spent most of the coder's time in mispredicted branches. */
static inline size_t run_length(const uint8_t *p, size_t lim, uint8_t b)
{
    const uint64_t bb = b * 0x0101010101010101ull;
    size_t r = 0;
    while (r + 8 <= lim) {
        uint64_t v;
        memcpy(&v, p + r, 8);
        uint64_t x = v ^ bb;
        if (x)
            return r + (size_t)__builtin_ctzll(x) / 8;
        r += 8;
    }
    while (r < lim && p[r] == b)
        r++;
    return r;
}

static void stored_block(bits *w, const uint8_t *src, size_t n, bool final)
{
    put(w, final ? 1u : 0u, 3); /* BFINAL, BTYPE 00 */
    align(w);
    w->p[0] = (uint8_t)n, w->p[1] = (uint8_t)(n >> 8);
    w->p[2] = (uint8_t)~n, w->p[3] = (uint8_t)(~n >> 8);
    if (n)
        memcpy(w->p + 4, src, n);
    w->p += 4 + n;
}

static const uint8_t extra_of_clen[CLEN_CODES] = {[16] = 2, [17] = 3, [18] = 7};

static void compress_block(const coder *c, bits *out, const uint8_t *src, size_t n, bool final)
{
    /* The writer in a local: through the caller's pointer every byte stored could alias it, and each
     * symbol reloaded and stored it again. */
    bits local = *out, *w = &local;
    /* Pass 1: symbols and their counts. */
    uint32_t freq[LITLEN_CODES] = {0};
    uint16_t *sym = c->sym;
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        uint8_t b = src[i++];
        sym[ns++] = b;
        freq[b]++;
        for (;;) { /* runs of b after it, distance 1 */
            size_t lim = n - i < MAX_RUN ? n - i : MAX_RUN, r = run_length(src + i, lim, b);
            if (r < MIN_RUN) /* shorter runs go on as literals */
                break;
            sym[ns++] = (uint16_t)(RUN_FLAG | r);
            freq[257 + c->len_code[r]]++;
            i += r;
        }
    }
    freq[256] = 1;

    uint8_t lens[LITLEN_CODES];
    huffman_lengths(freq, LITLEN_CODES, 15, lens);
    unsigned hlit = LITLEN_CODES;
    while (hlit > 257 && !lens[hlit - 1])
        hlit--;
    /* The lengths as sent: the literal/length code's hlit, then the distance code's, distances 1 and 2 at
     * one bit each (a complete code). Apart from lens, whose codes must not count them. */
    uint8_t sent[LITLEN_CODES + DIST_CODES];
    memcpy(sent, lens, hlit);
    sent[hlit] = sent[hlit + 1] = 1;
    uint8_t csym[LITLEN_CODES + DIST_CODES], cextra[LITLEN_CODES + DIST_CODES];
    unsigned ncl = rle_lengths(sent, hlit + DIST_CODES, csym, cextra);
    uint32_t cfreq[CLEN_CODES] = {0};
    for (unsigned k = 0; k < ncl; k++)
        cfreq[csym[k]]++;
    uint8_t clens[CLEN_CODES];
    huffman_lengths(cfreq, CLEN_CODES, 7, clens);
    unsigned hclen = CLEN_CODES;
    while (hclen > 4 && !clens[clen_order[hclen - 1]])
        hclen--;

    /* The block's size either way: dynamic, or stored when that is smaller (noise does not compress). */
    uint64_t dyn = 3 + 5 + 5 + 4 + 3ull * hclen;
    for (unsigned k = 0; k < ncl; k++)
        dyn += clens[csym[k]] + extra_of_clen[csym[k]];
    for (unsigned s = 0; s < LITLEN_CODES; s++) {
        unsigned extra = s >= 257 ? len_extra[s - 257] + 1u : 0u; /* + 1: the distance code */
        dyn += (uint64_t)freq[s] * (lens[s] + extra);
    }
    uint64_t stored = 3 + 7 + 32 + 8ull * n;
    if (dyn >= stored) {
        stored_block(w, src, n, final);
        *out = local;
        return;
    }

    uint16_t codes[LITLEN_CODES], ccodes[CLEN_CODES];
    canonical_codes(lens, LITLEN_CODES, codes);
    canonical_codes(clens, CLEN_CODES, ccodes);
    put(w, (final ? 1u : 0u) | 2u << 1, 3); /* BFINAL, BTYPE 10: dynamic Huffman codes */
    put(w, hlit - 257, 5);
    put(w, DIST_CODES - 1, 5);
    put(w, hclen - 4, 4);
    for (unsigned k = 0; k < hclen; k++)
        put(w, clens[clen_order[k]], 3);
    for (unsigned k = 0; k < ncl; k++)
        put(w, ccodes[csym[k]] | (uint64_t)cextra[k] << clens[csym[k]], clens[csym[k]] + extra_of_clen[csym[k]]);

    /* Pass 2: the symbols. A run: its length code, the length's extra bits, distance code 0 (one bit, 0). */
    for (size_t k = 0; k < ns; k++) {
        unsigned s = sym[k];
        if (s < 256) {
            put(w, codes[s], lens[s]);
        } else {
            unsigned r = s & ~RUN_FLAG, lc = c->len_code[r];
            unsigned cl = lens[257 + lc], ex = len_extra[lc];
            put(w, codes[257 + lc] | (uint64_t)(r - len_base[lc]) << cl, cl + ex + 1);
        }
    }
    put(w, codes[256], lens[256]);
    *out = local;
}

bool hp_deflate_runs(const uint8_t *src, size_t len, bool final, uint8_t *dst, size_t *out_len)
{
    coder c;
    c.sym = malloc(BLOCK_BYTES * sizeof(*c.sym));
    if (!c.sym)
        return false;
    for (unsigned lc = 0, r = 3; r <= MAX_RUN; r++) {
        while (lc + 1 < 29 && len_base[lc + 1] <= r)
            lc++;
        c.len_code[r] = (uint8_t)lc;
    }
    bits w = {.p = dst};
    for (size_t at = 0; at < len; at += BLOCK_BYTES) {
        size_t n = len - at < BLOCK_BYTES ? len - at : BLOCK_BYTES;
        compress_block(&c, &w, src + at, n, final && at + n == len);
    }
    if (len == 0 || !final)
        stored_block(&w, NULL, 0, final); /* the final empty block, or the sync point for the next stream */
    align(&w);
    free(c.sym);
    *out_len = (size_t)(w.p - dst);
    return true;
}

// The serial inflate loop of shaders/exr_zip.comp (HP_EXR_INFLATE) written as a CUDA kernel, to be profiled
// by Nsight Compute, which profiles CUDA kernels and not Vulkan pipelines: where its cycles stall with one
// chunk an SM and with 16 (docs/BENCHMARKS.md, "The serial loop's chain"). A probe, not the product: built
// and run on the GPU host by bench/probe/run.sh, outside meson (the CUDA toolkit is the host's, not a
// dependency of hdrpostd). It mirrors the shader's loop as of c417ad6 (the table entries, the bit reader, the
// copies), one thread of a 32-thread block a chunk as the fused pass runs it, and leaves out what the
// profile does not need: slices, the work bound, the Adler-32 and the unzip. Each chunk's bytes are checked
// against zlib's uncompress.
//
//   inflate_probe FRAME.exr COPIES [host]   COPIES copies of the frame's chunks in one launch; `host`: the
//                                           packed bytes read from pinned host memory, as the daemon's are
#include <cuda_runtime.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                           \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

// --- The kernel: shaders/include/exr_inflate.glsl and exr_zip.comp ------------------------------------------
#define LUT_BITS 10u
#define LUT_MASK ((1u << LUT_BITS) - 1u)
#define DIST_LUT_BITS 8u
#define DIST_LUT_MASK ((1u << DIST_LUT_BITS) - 1u)
#define NO_SYMBOL 0xffffu
#define T_LIT 0u
#define T_DIST 1u
#define E_LENGTH (1u << 28)
#define E_END (2u << 28)
#define E_INVALID (3u << 28)
#define E_KIND (3u << 28)
enum { ST_OK, ST_BAD, ST_SHORT, ST_LONG, ST_CHECK, ST_TRUNC };

struct Tables { // a chunk's, in global memory, as the shader's InflateTables
    uint32_t lit[1u << LUT_BITS], dist[1u << DIST_LUT_BITS];
    uint32_t count[2][16], sym[2][288], lens[320];
    uint32_t lbase[29], lext[29], dbase[30], dext[30];
    uint32_t first[2][16], index[2][16];
};

struct ChunkIn {
    uint32_t packed_offset, packed_size, unpacked_offset, unpacked_size, status, pad[3];
};

struct R { // the invocation's state (the shader's g_*)
    const uint32_t *packed;
    uint32_t *out;
    Tables *t;
    uint64_t bits;
    uint32_t nbits, word_at, ahead, in_base, in_size, out_words, limit, n, word;
};

__device__ __forceinline__ uint32_t load_word(const R &r, uint32_t at)
{
    return at * 4u < r.in_base + r.in_size + 8u ? r.packed[at] : 0u;
}
__device__ __forceinline__ void refill(R &r)
{
    if (r.nbits > 32u)
        return;
    uint32_t w = r.ahead;
    r.word_at++;
    r.ahead = load_word(r, r.word_at);
    r.bits |= (uint64_t)w << r.nbits;
    r.nbits += 32u;
}
__device__ __forceinline__ uint32_t consumed(const R &r) { return (r.word_at * 4u - r.in_base) * 8u - r.nbits; }
__device__ __forceinline__ void drop(R &r, uint32_t n)
{
    r.bits >>= n;
    r.nbits -= n;
}
__device__ __forceinline__ uint32_t bits(R &r, uint32_t n)
{
    refill(r);
    uint32_t v = (uint32_t)r.bits & ((1u << n) - 1u);
    drop(r, n);
    return v;
}
__device__ uint32_t decode_slow(R &r, uint32_t t)
{
    uint32_t code = 0, first = 0, index = 0;
    for (uint32_t len = 1; len <= 15; len++) {
        code |= (uint32_t)(r.bits >> (len - 1u)) & 1u;
        uint32_t count = r.t->count[t][len];
        if (code < first + count) {
            drop(r, len);
            return r.t->sym[t][index + code - first];
        }
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return NO_SYMBOL;
}
__device__ __forceinline__ uint32_t symbol_entry(const R &r, uint32_t t, uint32_t sym)
{
    if (t == T_DIST)
        return sym < 30u ? r.t->dbase[sym] << 8 | r.t->dext[sym] << 4 : E_INVALID;
    if (sym < 256u)
        return sym << 8;
    if (sym == 256u)
        return E_END;
    sym -= 257u;
    return sym < 29u ? E_LENGTH | r.t->lbase[sym] << 8 | r.t->lext[sym] << 4 : E_INVALID;
}
__device__ __forceinline__ uint32_t decode_entry(R &r, uint32_t e, uint32_t t)
{
    if ((e & 15u) != 0u) {
        drop(r, e & 15u);
        return e;
    }
    return symbol_entry(r, t, decode_slow(r, t));
}
__device__ __forceinline__ uint32_t decode_lit(R &r)
{
    refill(r);
    return decode_entry(r, r.t->lit[(uint32_t)r.bits & LUT_MASK], T_LIT);
}
__device__ __forceinline__ uint32_t decode_dist(R &r)
{
    refill(r);
    return decode_entry(r, r.t->dist[(uint32_t)r.bits & DIST_LUT_MASK], T_DIST);
}
__device__ __forceinline__ bool decode_match(R &r, uint32_t e, uint32_t &len, uint32_t &dist)
{
    len = ((e >> 8) & 0xffffu) + bits(r, (e >> 4) & 15u);
    uint32_t d = decode_dist(r);
    dist = ((d >> 8) & 0xffffu) + bits(r, (d >> 4) & 15u);
    return d < E_LENGTH;
}

__device__ bool build(R &r, uint32_t t, uint32_t off, uint32_t n, uint32_t lut_bits, bool fixed_set)
{
    Tables *T = r.t;
    for (uint32_t len = 0; len < 16; len++)
        T->count[t][len] = 0;
    for (uint32_t s = 0; s < n; s++)
        T->count[t][T->lens[off + s]]++;
    uint32_t codes = n - T->count[t][0];
    T->count[t][0] = 0;
    int left = 1;
    uint32_t longest = 0;
    for (uint32_t len = 1; len < 16; len++) {
        left = (left << 1) - (int)T->count[t][len];
        if (left < 0)
            return false;
        if (T->count[t][len] != 0)
            longest = len;
    }
    if (left > 0 && codes != 0 && !fixed_set && !(lut_bits != 0 && longest == 1))
        return false;
    uint32_t offs[16];
    offs[1] = 0;
    for (uint32_t len = 1; len < 15; len++)
        offs[len + 1] = offs[len] + T->count[t][len];
    uint32_t code = 0;
    for (uint32_t len = 1; len < 16; len++) {
        T->first[t][len] = code;
        T->index[t][len] = offs[len];
        code = (code + T->count[t][len]) << 1;
    }
    for (uint32_t s = 0; s < n; s++) {
        uint32_t len = T->lens[off + s];
        if (len != 0)
            T->sym[t][offs[len]++] = s;
    }
    if (lut_bits == 0)
        return true;
    uint32_t *lut = t == T_LIT ? T->lit : T->dist, size = 1u << lut_bits;
    for (uint32_t i = 0; i < size; i++)
        lut[i] = 0;
    uint32_t ncodes = T->index[t][lut_bits + 1];
    for (uint32_t index = 0; index < ncodes; index++) {
        uint32_t len = 1;
        while (T->index[t][len + 1] <= index)
            len++;
        uint32_t c = T->first[t][len] + index - T->index[t][len];
        uint32_t e = symbol_entry(r, t, T->sym[t][index]) | len;
        for (uint32_t rv = __brev(c) >> (32u - len); rv < size; rv += 1u << len)
            lut[rv] = e;
    }
    return true;
}
__device__ bool fixed_codes(R &r)
{
    for (uint32_t s = 0; s < 288; s++)
        r.t->lens[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    for (uint32_t s = 0; s < 30; s++)
        r.t->lens[288 + s] = 5;
    return build(r, T_LIT, 0, 288, LUT_BITS, true) && build(r, T_DIST, 288, 30, DIST_LUT_BITS, true);
}
__device__ bool dynamic_codes(R &r)
{
    uint32_t nlen = bits(r, 5) + 257, ndist = bits(r, 5) + 1, ncode = bits(r, 4) + 4;
    if (nlen > 286 || ndist > 30)
        return false;
    const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    for (uint32_t i = 0; i < 19; i++)
        r.t->lens[order[i]] = i < ncode ? bits(r, 3) : 0;
    if (!build(r, T_DIST, 0, 19, 0, false))
        return false;
    for (uint32_t i = 0; i < nlen + ndist;) {
        refill(r);
        uint32_t sym = decode_slow(r, T_DIST);
        if (sym == NO_SYMBOL)
            return false;
        if (sym < 16) {
            r.t->lens[i++] = sym;
            continue;
        }
        uint32_t repeat, value = 0;
        if (sym == 16) {
            if (i == 0)
                return false;
            value = r.t->lens[i - 1];
            repeat = 3 + bits(r, 2);
        } else if (sym == 17) {
            repeat = 3 + bits(r, 3);
        } else {
            repeat = 11 + bits(r, 7);
        }
        if (i + repeat > nlen + ndist)
            return false;
        for (; repeat > 0; repeat--)
            r.t->lens[i++] = value;
    }
    if (r.t->lens[256] == 0)
        return false;
    return build(r, T_LIT, 0, nlen, LUT_BITS, false) && build(r, T_DIST, nlen, ndist, DIST_LUT_BITS, false);
}

__device__ __forceinline__ void store_word(R &r, uint32_t wi, uint32_t v) { r.out[r.out_words + wi] = v; }
__device__ __forceinline__ void put(R &r, uint32_t b)
{
    r.word |= b << (8u * (r.n & 3u));
    store_word(r, r.n >> 2, r.word);
    r.word = (r.n & 3u) == 3u ? 0u : r.word;
    r.n++;
}
__device__ __forceinline__ void put4(R &r, uint32_t v)
{
    uint32_t shift = 8u * (r.n & 3u);
    if (shift == 0) {
        store_word(r, r.n >> 2, v);
    } else {
        store_word(r, r.n >> 2, r.word | (v << shift));
        r.word = v >> (32u - shift);
    }
    r.n += 4;
}
__device__ __forceinline__ uint32_t word_at(const R &r, uint32_t wi)
{
    return wi == (r.n >> 2) ? r.word : r.out[r.out_words + wi];
}
__device__ __forceinline__ uint32_t bytes4_at(const R &r, uint32_t p)
{
    uint32_t shift = 8u * (p & 3u), lo = word_at(r, p >> 2);
    return shift == 0 ? lo : (lo >> shift) | (word_at(r, (p >> 2) + 1) << (32u - shift));
}
__device__ void copy(R &r, uint32_t dist, uint32_t len)
{
    uint32_t p = r.n - dist;
    if (dist <= 2) {
        uint32_t b0 = (word_at(r, p >> 2) >> (8u * (p & 3u))) & 255u, b1 = b0;
        if (dist == 2)
            b1 = (word_at(r, (p + 1) >> 2) >> (8u * ((p + 1) & 3u))) & 255u;
        uint32_t pattern = (b0 | b1 << 8) * 0x10001u;
        for (; len >= 4; len -= 4)
            put4(r, pattern);
        for (uint32_t i = 0; i < len; i++)
            put(r, (pattern >> (8u * (i & 1u))) & 255u);
        return;
    }
    if (dist >= 4) {
        for (; len >= 4; len -= 4, p += 4)
            put4(r, bytes4_at(r, p));
    }
    for (; len > 0; len--, p++)
        put(r, (word_at(r, p >> 2) >> (8u * (p & 3u))) & 255u);
}
__device__ uint32_t block_symbols(R &r)
{
    for (;;) {
        uint32_t e = decode_lit(r);
        if (e < E_LENGTH) {
            if (r.n == r.limit)
                return ST_LONG;
            put(r, e >> 8);
            continue;
        }
        if ((e & E_KIND) != E_LENGTH)
            return (e & E_KIND) == E_END ? ST_OK : ST_BAD;
        uint32_t len, dist;
        if (!decode_match(r, e, len, dist) || dist > r.n)
            return ST_BAD;
        if (len > r.limit - r.n)
            return ST_LONG;
        copy(r, dist, len);
    }
}
__device__ void seek(R &r, uint32_t at)
{
    uint32_t byte = r.in_base + (at >> 3);
    r.word_at = byte >> 2;
    r.ahead = load_word(r, r.word_at);
    r.bits = 0;
    r.nbits = 0;
    refill(r);
    drop(r, 8u * (byte & 3u) + (at & 7u));
}
__device__ uint32_t inflate(R &r)
{
    seek(r, 16); // past the zlib header (the shader checks it; zlib checks it here, on the host)
    bool fixed_ready = false;
    for (;;) {
        uint32_t last = bits(r, 1), type = bits(r, 2), st = ST_OK;
        if (type == 0) {
            drop(r, r.nbits & 7u);
            uint32_t len = bits(r, 16), nlen = bits(r, 16);
            if (len != (~nlen & 0xffffu))
                return ST_BAD;
            if (len > r.limit - r.n)
                return ST_LONG;
            for (; len > 0; len--)
                put(r, bits(r, 8));
        } else if (type == 1) {
            if (!fixed_ready)
                fixed_ready = fixed_codes(r);
            st = fixed_ready ? block_symbols(r) : ST_BAD;
        } else if (type == 2) {
            fixed_ready = false;
            st = dynamic_codes(r) ? block_symbols(r) : ST_BAD;
        } else {
            st = ST_BAD;
        }
        if (consumed(r) > r.in_size * 8u)
            return ST_TRUNC;
        if (st != ST_OK)
            return st;
        if (last)
            break;
    }
    if ((r.n & 3u) != 0)
        store_word(r, r.n >> 2, r.word);
    return r.n < r.limit ? ST_SHORT : ST_OK;
}

__global__ void __launch_bounds__(32) inflate_chunks(const uint32_t *__restrict__ packed, ChunkIn *chunks,
                                                     uint32_t frame_chunks, uint32_t frame_unpacked, uint32_t *out,
                                                     Tables *tables)
{
    if (threadIdx.x != 0) // the fused pass's other 31 invocations wait at its barrier for the unzip
        return;
    uint32_t c = blockIdx.x, k = c / frame_chunks;
    ChunkIn *ch = &chunks[c % frame_chunks];
    const uint32_t lb[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    const uint32_t le[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    const uint32_t db[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    const uint32_t de[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    R r = {};
    r.packed = packed;
    r.t = &tables[c];
    for (int i = 0; i < 30; i++) {
        if (i < 29) {
            r.t->lbase[i] = lb[i];
            r.t->lext[i] = le[i];
        }
        r.t->dbase[i] = db[i];
        r.t->dext[i] = de[i];
    }
    r.in_base = ch->packed_offset;
    r.in_size = ch->packed_size;
    r.out = out;
    r.out_words = (k * frame_unpacked + ch->unpacked_offset) >> 2;
    r.limit = ch->unpacked_size;
    uint32_t st = inflate(r);
    if (k == 0)
        ch->status = st;
}

// --- The host: the EXR's chunks, the launch, the check ----------------------------------------------------
static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: inflate_probe FRAME.exr COPIES [host]\n");
        return 2;
    }
    FILE *fp = fopen(argv[1], "rb");
    if (!fp) {
        perror(argv[1]);
        return 1;
    }
    std::vector<uint8_t> file;
    uint8_t buf[1 << 16];
    for (size_t got; (got = fread(buf, 1, sizeof(buf), fp)) > 0;)
        file.insert(file.end(), buf, buf + got);
    fclose(fp);
    uint32_t copies = (uint32_t)atoi(argv[2]);
    bool host = argc > 3 && strcmp(argv[3], "host") == 0;
    // A single-part scanline EXR: the header's attributes (name, type, size, value) up to an empty name
    size_t at = 8;
    int xmin = 0, ymin = 0, xmax = -1, ymax = -1, compression = -1;
    uint32_t pixel_bytes = 0;
    while (file[at] != 0) {
        const char *name = (const char *)&file[at];
        at += strlen(name) + 1;
        const char *type = (const char *)&file[at];
        at += strlen(type) + 1;
        uint32_t size = rd32(&file[at]);
        at += 4;
        if (!strcmp(name, "dataWindow")) {
            xmin = (int)rd32(&file[at]), ymin = (int)rd32(&file[at + 4]);
            xmax = (int)rd32(&file[at + 8]), ymax = (int)rd32(&file[at + 12]);
        } else if (!strcmp(name, "compression")) {
            compression = file[at];
        } else if (!strcmp(name, "channels")) {
            for (size_t p = at; file[p] != 0;) {
                p += strlen((const char *)&file[p]) + 1;
                pixel_bytes += rd32(&file[p]) == 1 ? 2 : 4;
                p += 16;
            }
        }
        at += size;
    }
    at++;
    if (compression != 3 && compression != 2) {
        fprintf(stderr, "inflate_probe: %s is not ZIP or ZIPS (compression %d)\n", argv[1], compression);
        return 1;
    }
    uint32_t width = (uint32_t)(xmax - xmin + 1), height = (uint32_t)(ymax - ymin + 1);
    uint32_t lines = compression == 3 ? 16 : 1, n = (height + lines - 1) / lines;
    std::vector<ChunkIn> chunks(n);
    std::vector<uint8_t> packed;
    uint32_t unpacked = 0;
    for (uint32_t c = 0; c < n; c++) {
        uint64_t off = 0;
        memcpy(&off, &file[at + 8 * c], 8);
        uint32_t y = rd32(&file[off]) - (uint32_t)ymin, size = rd32(&file[off + 4]);
        uint32_t rows = height - y < lines ? height - y : lines;
        ChunkIn ch = {(uint32_t)packed.size(), size, unpacked, rows * width * pixel_bytes, 99, {0, 0, 0}};
        if (ch.packed_size == ch.unpacked_size) {
            fprintf(stderr, "inflate_probe: chunk %u is stored, not deflated; the probe takes deflated ones\n", c);
            return 1;
        }
        packed.insert(packed.end(), &file[off + 8], &file[off + 8] + size);
        while (packed.size() % 4)
            packed.push_back(0);
        chunks[c] = ch;
        unpacked += (ch.unpacked_size + 3) & ~3u;
    }
    packed.resize(packed.size() + 16, 0);
    uint32_t *d_packed, *d_out;
    ChunkIn *d_chunks;
    Tables *d_tables;
    if (host) {
        CK(cudaHostAlloc((void **)&d_packed, packed.size(), cudaHostAllocMapped));
        memcpy(d_packed, packed.data(), packed.size());
    } else {
        CK(cudaMalloc(&d_packed, packed.size()));
        CK(cudaMemcpy(d_packed, packed.data(), packed.size(), cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc(&d_chunks, n * sizeof(ChunkIn)));
    CK(cudaMemcpy(d_chunks, chunks.data(), n * sizeof(ChunkIn), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&d_out, (size_t)unpacked * copies + 16));
    CK(cudaMalloc(&d_tables, sizeof(Tables) * n * copies));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e9f;
    for (int run = 0; run < 5; run++) {
        CK(cudaEventRecord(e0));
        inflate_chunks<<<n * copies, 32>>>(d_packed, d_chunks, n, unpacked, d_out, d_tables);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        best = ms < best ? ms : best;
    }
    std::vector<uint8_t> out((size_t)unpacked * copies);
    CK(cudaMemcpy(out.data(), d_out, out.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(chunks.data(), d_chunks, n * sizeof(ChunkIn), cudaMemcpyDeviceToHost));
    std::vector<uint8_t> want(1 << 24);
    uint32_t bad = 0;
    for (uint32_t c = 0; c < n; c++) {
        uLongf len = want.size();
        const uint8_t *src = packed.data() + chunks[c].packed_offset;
        if (uncompress(want.data(), &len, src, chunks[c].packed_size) != Z_OK || len != chunks[c].unpacked_size ||
            chunks[c].status != ST_OK)
            bad++;
        for (uint32_t k = 0; k < copies; k++)
            if (memcmp(want.data(), &out[(size_t)k * unpacked + chunks[c].unpacked_offset], len) != 0) {
                bad++;
                break;
            }
    }
    printf("%s: %u chunks x %u copies, %ux%u, %u unpacked bytes a copy, input in %s memory: best of 5 %.2f ms "
           "(%.2f GB/s of output); chunks not equal to zlib's: %u\n", argv[1], n, copies, width, height, unpacked,
           host ? "host" : "device", best, (double)unpacked * copies / (best * 1e6), bad);
    return bad != 0;
}

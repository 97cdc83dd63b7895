// EXR ZIP decoding on the GPU: finishing a chunk the inflate wrote (both inflates, and exr_zip.comp's
// HP_EXR_FINISH pass): the Adler-32, the predictor, the planes to RGBA16F. After exr_zip_io.glsl.
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


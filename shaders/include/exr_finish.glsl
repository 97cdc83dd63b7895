// EXR ZIP decoding on the GPU: finishing a chunk an inflate wrote (exr_zip.comp's HP_EXR_FINISH pass, after
// the serial loop or for the split; the wide inflate in its own workgroup): the Adler-32, the predictor, the
// planes to the image. After exr_zip_io.glsl.
// --- The unzip: one pixel of a chunk, from its bytes in unpacked to the image (both variants use it) --------
layout(buffer_reference, std430, buffer_reference_align = 4) coherent readonly buffer Unpacked { uint v[]; };

// The 16 bits at bytes 2m and 2m + 1 of the chunk as the file's writer laid it out (a line: each channel's
// width values in turn), from the chunk whose bytes start at off (n in all; stored: as is, else EXR's byte
// split, the even bytes in the first half, the odd in the second).
uint u16_at(uint off, uint n, bool stored, uint m)
{
    Unpacked u = Unpacked(pc.unpacked);
    if (stored) {
        uint at = off + 2u * m;
        return (u.v[at >> 2] >> (8u * (at & 3u))) & 0xffffu;
    }
    uint lo = off + m, hi = off + (n + 1u) / 2u + m;
    return ((u.v[lo >> 2] >> (8u * (lo & 3u))) & 255u) | (((u.v[hi >> 2] >> (8u * (hi & 3u))) & 255u) << 8);
}

// A half's bits widened to a float's, exactly and in integers (no float unit, so a device that flushes
// denormals cannot change a subnormal half, and a NaN keeps its payload), as the CPU's hp_half_to_float
// (pipeline/cpu_reduce.c) does it: IEEE 754-2008's binary16 to binary32.
uint half_to_float_bits(uint h)
{
    uint sign = (h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u;
    if (e == 31u)
        return sign | 0x7f800000u | (m << 13); // infinity, NaN
    if (e != 0u)
        return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u)
        return sign;
    uint p = uint(findMSB(m)); // subnormal: m 2^-24 = 1.f 2^(p - 24)
    return sign | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu);
}

// Slot s (R, G, B, A) of pixel x of the chunk's line ly: the bits the image stores (a half's 16 in a
// RGBA16F image, else a float's 32).
uint slot_bits(uint off, uint n, bool stored, uint ly, uint s, uint x)
{
    uint type = pc.slot[s] >> 16;
    if (type == SLOT_ABSENT)
        return pc.float_image != 0u ? 0x3f800000u : 0x3c00u; // 1.0
    uint m = (ly * pc.pixel_bytes + (pc.slot[s] & 0xffffu)) * pc.width / 2u; // the plane's first value, in 16 bits
    if (type == SLOT_HALF) {
        uint h = u16_at(off, n, stored, m + x);
        return pc.float_image != 0u ? half_to_float_bits(h) : h;
    }
    return u16_at(off, n, stored, m + 2u * x) | u16_at(off, n, stored, m + 2u * x + 1u) << 16; // little-endian
}

// Pixel (x, y) of the frame, in the chunk whose table entry starts at word e.
void unzip_pixel(uint x, uint y, uint e)
{
    Words table = Words(pc.chunks);
    uint off = table.v[e + 2u], n = table.v[e + 3u];
    bool stored = table.v[e + 1u] == n;
    uint ly = y - table.v[e + 4u];
    uint r = slot_bits(off, n, stored, ly, 0u, x), g = slot_bits(off, n, stored, ly, 1u, x),
         b = slot_bits(off, n, stored, ly, 2u, x), a = slot_bits(off, n, stored, ly, 3u, x);
    RwWords img = RwWords(pc.image);
    uint px = (y * pc.width + x) * image_words();
    if (pc.float_image != 0u) {
        img.v[px] = r;
        img.v[px + 1u] = g;
        img.v[px + 2u] = b;
        img.v[px + 3u] = a;
    } else {
        img.v[px] = r | g << 16;
        img.v[px + 1u] = b | a << 16;
    }
}

// --- Finishing a chunk: the workgroup checks the Adler-32, undoes the predictor, and unzips its pixels -----
// The inflate loop writes the bytes as they come out of the stream. Both the Adler-32 (RFC 1950 8.2:
// s1 = 1 + sum b_i, s2 = n + sum (n - i) b_i, modulo 65521) and the predictor's running sum (t[i] = the sum of
// raw[0..i] + 128 i, modulo 256: each step adds raw[i] - 128) are sums over the chunk, so the workgroup splits
// the chunk's words into runs and joins the runs' sums in shared memory. Two ways, one for each kind of
// caller:
// - HP_FINISH_BY_SUBGROUPS (exr_zip.comp's HP_EXR_FINISH pass, after every chunk's inflate): a run a subgroup,
//   its invocations reading neighbouring words, so that a subgroup's load is one or two cache lines. The pass
//   runs thousands of chunks' workgroups at once and the memory's bandwidth is its bound: against a run an
//   invocation (each of a subgroup's loads 32 lines) 16 frames' chunks took 9-15% less time (H200,
//   docs/BENCHMARKS.md "The finish a pass of its own (issue 36)").
// - otherwise (the wide inflate, which finishes its own chunks; the serial loop once did too): a run an
//   invocation. There a chunk's workgroup finishes alone while others inflate, waiting on each load either
//   way, and the subgroups' way, whose predictor takes a scan a step, made the wide inflate slower.
#ifndef FINISH_MAX // the includer's workgroup where it sets it (exr_inflate_wide.comp)
#define FINISH_MAX 256u
#endif
const uint ADLER_BASE = 65521u;
shared uint s_fa[FINISH_MAX], s_fb[FINISH_MAX], s_fc[FINISH_MAX];
shared uint s_fverdict;

#ifdef HP_FINISH_BY_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// With S = sum b_i and P = sum i b_i, s2 = n + n S - P: S and P can be summed in any order. Per subgroup (at
// most one an invocation): s_fn its invocations; s_fa and s_fb its run's S and P modulo 65521; s_fc the byte
// sum of its run (modulo 2^32: the predictor needs it modulo 256), then of the runs before it.
shared uint s_fn[FINISH_MAX];

// The sum of a word's four bytes, as two 16-bit lanes (b0 + b2, b1 + b3) added.
uint word_bytes(uint v)
{
    uint pairs = (v & 0x00ff00ffu) + ((v >> 8) & 0x00ff00ffu);
    return (pairs & 0xffffu) + (pairs >> 16);
}

// Word w of the chunk (v, its bytes past the chunk's n cleared) into S and P: its bytes' positions are 4w + k,
// so P gains 4w times their sum plus b1 + 2 b2 + 3 b3 (b1 + 3 b3 the upper lane of (b1 + b3 2^16)(3 + 2^16),
// whose lower lane 3 b1 stays below 2^16).
void sum_word(uint v, uint w, inout uint64_t s, inout uint64_t p)
{
    uint bytes = word_bytes(v);
    uint inner = ((((v >> 8) & 0x00ff00ffu) * 0x00010003u) >> 16) + 2u * ((v >> 16) & 255u);
    s += bytes;
    p += uint64_t(4u * w) * uint64_t(bytes) + uint64_t(inner);
}

// Bytewise addition modulo 256, no carry from one byte into the next (Hacker's Delight 2-18).
uint add_bytes(uint a, uint b) { return ((a & 0x7f7f7f7fu) + (b & 0x7f7f7f7fu)) ^ ((a ^ b) & 0x80808080u); }

// EXR's predictor undone on a word whose bytes follow `before` (the sum of the chunk's bytes ahead of it):
// byte i becomes sum b_0..b_i + 128 i modulo 256 (ImfZip.cpp's t[i] = t[i-1] + t[i] - 128; the word starts at
// an even i, so bytes 1 and 3 gain 128: their top bits flipped).
uint unpredict_word(uint v, uint before)
{
    uint x = add_bytes(v, v << 8);
    x = add_bytes(x, x << 16); // byte k: b_0 + .. + b_k
    return add_bytes(x, (before & 255u) * 0x01010101u) ^ 0x80008000u;
}

// The subgroup's run of the chunk's words, [w0, w1): words in proportion to its invocations (a subgroup may
// be partial), which are numbered among themselves (rank of here: Vulkan does not promise
// gl_SubgroupInvocationID dense). Every invocation of the workgroup calls it (lanes of them).
void subgroup_run(uint words, uint lanes, out uint w0, out uint w1, out uint rank, out uint here)
{
    uint g = gl_SubgroupID;
    rank = subgroupExclusiveAdd(1u);
    here = subgroupAdd(1u);
    if (subgroupElect())
        s_fn[g] = here;
    memoryBarrierShared();
    barrier();
    uint ahead = 0u;
    for (uint h = 0u; h < g; h++)
        ahead += s_fn[h];
    w0 = uint(uint64_t(words) * ahead / lanes);
    w1 = uint(uint64_t(words) * (ahead + here) / lanes);
}

// The chunk's Adler-32 against the stream's (the verdict, also in s_fverdict): each subgroup sums its run
// into s_fa, s_fb and s_fc, and the first invocation joins them, leaving in s_fc each run's exclusive byte
// sum for the predictor.
uint adler_verdict(uint e, uint base, uint n, uint lane, uint w0, uint w1, uint rank, uint here)
{
    CoherentWords u = CoherentWords(pc.unpacked);
    uint64_t s = 0ul, p = 0ul;
    // stepped as the subgroup's loop, not each invocation's own: the sums below need the subgroup whole, and
    // only maximal reconvergence would promise that after a loop its invocations left apart
    for (uint at = w0; at < w1; at += here) {
        uint w = at + rank;
        if (w >= w1)
            continue;
        uint v = u.v[base + w];
        if (4u * w + 4u > n)
            v &= (1u << (8u * (n - 4u * w))) - 1u; // the chunk's last word: bytes past n not summed
        sum_word(v, w, s, p);
    }
    // each invocation's part below 2^16 before they are added: a subgroup's sum stays in 32 bits
    uint sa = subgroupAdd(uint(s % ADLER_BASE)), sb = subgroupAdd(uint(p % ADLER_BASE)),
         sc = subgroupAdd(uint(s));
    if (subgroupElect()) {
        s_fa[gl_SubgroupID] = sa % ADLER_BASE;
        s_fb[gl_SubgroupID] = sb % ADLER_BASE;
        s_fc[gl_SubgroupID] = sc;
    }
    memoryBarrierShared();
    barrier();
    if (lane == 0u) {
        uint sum = 0u, weighted = 0u, run = 0u;
        for (uint h = 0u; h < gl_NumSubgroups; h++) {
            sum = (sum + s_fa[h]) % ADLER_BASE;
            weighted = (weighted + s_fb[h]) % ADLER_BASE;
            uint c = s_fc[h];
            s_fc[h] = run; // exclusive: the sum of the runs before
            run += c;
        }
        uint nm = n % ADLER_BASE;
        uint s1 = (1u + sum) % ADLER_BASE;
        uint s2 = (nm + (nm * sum) % ADLER_BASE + ADLER_BASE - weighted) % ADLER_BASE;
        s_fverdict = (s2 << 16 | s1) == Words(pc.chunks).v[e + 7u] ? HP_EXR_ZIP_OK : HP_EXR_ZIP_CHECKSUM;
    }
    memoryBarrierShared();
    barrier();
    return s_fverdict;
}

// EXR's predictor undone over the subgroup's run, which steps through it together: each step's words in
// order by a scan of their byte sums, after s_fc's sum of the runs before.
void unpredict_run(uint base, uint w0, uint w1, uint rank, uint here)
{
    CoherentWords u = CoherentWords(pc.unpacked);
    uint carry = s_fc[gl_SubgroupID];
    for (uint at = w0; at < w1; at += here) {
        uint w = at + rank;
        uint v = w < w1 ? u.v[base + w] : 0u, bytes = word_bytes(v);
        uint before = carry + subgroupInclusiveAdd(bytes) - bytes;
        if (w < w1)
            u.v[base + w] = unpredict_word(v, before);
        carry += subgroupAdd(bytes);
    }
}

// The chunk's Adler-32 checked (the verdict returned) and, if it holds, its predictor undone; the chunk's n
// bytes start at word base. Every invocation of the workgroup calls it (lane of lanes).
uint check_and_unpredict(uint e, uint base, uint n, uint lane, uint lanes)
{
    uint w0, w1, rank, here;
    subgroup_run((n + 3u) / 4u, lanes, w0, w1, rank, here);
    uint verdict = adler_verdict(e, base, n, lane, w0, w1, rank, here);
    if (verdict == HP_EXR_ZIP_OK)
        unpredict_run(base, w0, w1, rank, here);
    return verdict;
}
#else
// A word of a run's bytes into the run's sums: a, the bytes' sum, and c, the sum of a after each byte (zlib's
// adler32.c: s2 gains s1 a byte), so that the run's weighted sum is c plus a times the bytes after the run.
// The word's part of c is 4a + 4b0 + 3b1 + 2b2 + b3: the bytes in two 16-bit lanes (b0, b2 and b1, b3), each
// pair's weights in one multiply (the upper lane of (b0 + b2 2^16)(2 + 4 2^16) is 4b0 + 2b2, below 2^16),
// in place of four bytes taken one by one with a 64-bit product each. r: the word's bytes in the chunk (4,
// or fewer in its last word, whose other bytes are not counted).
void sum_word(uint v, uint r, inout uint a, inout uint64_t c)
{
    if (r < 4u)
        v &= (1u << (8u * r)) - 1u;
    uint even = v & 0x00ff00ffu, odd = (v >> 8) & 0x00ff00ffu, pairs = even + odd;
    uint bytes = (pairs & 0xffffu) + (pairs >> 16);
    uint weighted = ((even * 0x00040002u) >> 16) + ((odd * 0x00030001u) >> 16); // 4b0 + 2b2 + 3b1 + b3
    // r bytes: r a + the sum of (r - k) b_k, which is the four-byte sum less (4 - r)(a + bytes) when the
    // bytes past r are zero
    c += 4ul * uint64_t(a) + uint64_t(weighted) - uint64_t(4u - r) * uint64_t(a + bytes);
    a += bytes;
}

// As above, a run an invocation.
uint check_and_unpredict(uint e, uint base, uint n, uint lane, uint lanes)
{
    Words table = Words(pc.chunks);
    CoherentWords u = CoherentWords(pc.unpacked);
    uint words = (n + 3u) / 4u, per = (words + lanes - 1u) / lanes;
    uint w0 = min(lane * per, words), w1 = min(w0 + per, words);
    uint sum = 0u;
    uint64_t c = 0ul;
    for (uint w = w0; w < w1; w++)
        sum_word(u.v[base + w], min(n - 4u * w, 4u), sum, c);
    // the run's part of s2: each byte weighted by the bytes from it to the chunk's end, the run's own in c
    uint after = n - min(4u * w1, n);
    s_fa[lane] = sum % ADLER_BASE;
    s_fb[lane] = uint((uint64_t(after) * uint64_t(sum) + c) % uint64_t(ADLER_BASE));
    s_fc[lane] = sum & 255u;
    memoryBarrierShared();
    barrier();
    if (lane == 0u) {
        uint s1 = 1u, s2 = n % ADLER_BASE, run = 0u;
        for (uint l = 0u; l < lanes; l++) {
            s1 = (s1 + s_fa[l]) % ADLER_BASE;
            s2 = (s2 + s_fb[l]) % ADLER_BASE;
            uint c = s_fc[l];
            s_fc[l] = run; // exclusive: the sum of the runs before
            run = (run + c) & 255u;
        }
        s_fverdict = (s2 << 16 | s1) == table.v[e + 7u] ? HP_EXR_ZIP_OK : HP_EXR_ZIP_CHECKSUM;
    }
    memoryBarrierShared();
    barrier();
    if (s_fverdict == HP_EXR_ZIP_OK) {
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
    return s_fverdict;
}
#endif

// Called by every invocation of the workgroup (lanes of them, at most FINISH_MAX) with the chunk's entry and
// its inflate status; returns the chunk's final status (the workgroup's first invocation writes it).
uint finish_chunk(uint e, uint lane, uint lanes, uint status)
{
    Words table = Words(pc.chunks);
    uint off = table.v[e + 2u], n = table.v[e + 3u];
    bool stored = table.v[e + 1u] == n;
    if (status == HP_EXR_ZIP_OK && !stored) {
        status = check_and_unpredict(e, off >> 2, n, lane, lanes);
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


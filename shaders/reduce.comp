#version 460
// Luminance reduction: counts, log-average, mean, min, max and the log2 histogram of an RGBA frame
// (DECISIONS.md 2-4; algorithms.md 1). One source, three modules (shaders/meson.build):
//   HP_REDUCE_SINGLE_PASS        each workgroup reduces its share with subgroup arithmetic and writes a
//                                partial; the last workgroup to arrive combines the partials and resets
//                                the arrival counter (FidelityFX SPD's single-dispatch scheme).
//   HP_REDUCE_TWO_PASS_PARTIAL   the seed's first pass: a shared-memory tree with sequential addressing
//                                (Harris 2007, kernel 3) with several fetches per thread (kernel 4/7).
//   HP_REDUCE_TWO_PASS_FINAL     the seed's second pass: one workgroup over the partials.
// With HP_REDUCE_TIMELINE as well, the single dispatch also writes when each workgroup reached each of
// its phases (benchmark only: bench_reduce --timeline; the daemon's modules have none of it).
//
// Harris's "unrolled last warp" (kernel 5) relies on a warp running in lockstep with volatile shared
// memory; neither Vulkan's memory model nor GPUs with independent thread scheduling (Volta and later)
// promise that. The portable form of the same idea is subgroup arithmetic: the tree stops at subgroup
// width and one subgroup finishes with subgroupAdd/Min/Max, with no barrier.
//
// Every buffer is reached through a device address from the push constants (see pipeline/gpu.h).
//
// Performance notes (docs/BENCHMARKS.md, "Luminance reduction", has the measurements behind each):
// - The per-pixel path is straight-line code: no branch per pixel. The rare pixels whose histogram bin
//   needs the exact settling are only flagged there, and settled after the block (fixup_block).
// - PREFETCH software-pipelines the loads: the next block's loads are in flight while the current block
//   is computed, instead of every warp of a grid that starts together loading, waiting, then computing
//   while the memory system idles. It pays where the arithmetic is heaviest per byte (RGBA16F, 8K: 4-6%).
// - The end is built for latency, measured with bench_reduce --timeline: release and acquire ride on
//   the arrival counter's atomic, and the final combine loads its partials in one round, no barrier.
// - The grid is what the SMs keep resident (one 1024-wide workgroup per SM on an H200 by default), so no
//   workgroup waits for a second wave, and the last one combines few partials.

#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_memory_scope_semantics : require

#include "hp_shared.h"
#include "float_pair.glsl"

#ifdef HP_REDUCE_TIMELINE
#extension GL_EXT_shader_realtime_clock : require
#extension GL_ARB_shader_clock : require
#endif

layout(local_size_x_id = 0) in;             // workgroup size (pipeline/reduce.c)
layout(constant_id = 1) const uint FETCHES = 4;        // 16-byte loads in flight per thread per block
layout(constant_id = 2) const bool INPUT_FP16 = false; // RGBA16F (two pixels per 16-byte load) or RGBA32F
// Benchmark-only ablation (bench/bench_reduce.c shows where the time goes); 0 in the daemon, and the
// specialised code carries no trace of it. 1: no histogram, 2: no log sum, 4: no exact bin settling,
// 8: no final combine of the partials, 16: neither the arrival nor the combine (the single dispatch's
// workgroups end after their partials; the two-pass form's second dispatch does nothing).
layout(constant_id = 3) const uint DIAG_SKIP = 0;
// Software pipelining of the loads (see the notes above).
layout(constant_id = 4) const bool PREFETCH = true;
// How the histogram bin is guessed before the exact settling: 0 log2 (one transcendental), 1 a degree-5
// polynomial of the mantissa bits (no transcendental, more arithmetic). pipeline/reduce.c widens the
// settling band by the polynomial's error.
layout(constant_id = 5) const uint BIN_GUESS = 0;
// Work split: false, grid-stride blocks; true, each workgroup one contiguous, equal range of the frame.
layout(constant_id = 6) const bool SPLIT = false;
// The device's subgroup size (fixed for SPIR-V before 1.6): sizes the per-subgroup arrays in shared
// memory, so a 1024-wide workgroup stays within the 16 KiB of shared memory every device has for the
// single dispatch (pipeline/reduce.c checks the device's limit for each module).
layout(constant_id = 7) const uint SUBGROUP_SIZE = 32;

#define WG gl_WorkGroupSize.x
#define MAX_SUBGROUPS ((WG + SUBGROUP_SIZE - 1u) / SUBGROUP_SIZE)
#define PIXELS_PER_ITEM (INPUT_FP16 ? 2u : 1u)

// One 16-byte item: an RGBA32F pixel, or two RGBA16F pixels. The frame's buffer is padded to 16 bytes
// so the last item is in bounds.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Items { uvec4 v[]; };

layout(buffer_reference, std430, buffer_reference_align = 16) buffer LumStats {
    uint finite_count;
    uint nonfinite_count;
    float min_y;
    float max_y;
    float sum_log_hi;
    float sum_log_lo;
    float sum_y_hi;
    float sum_y_lo;
    float log_average;
    float mean_y;
    float hist_min_log2;
    float hist_max_log2;
    uint hist[HP_HIST_BINS];
};

struct Partial {
    float sum_log2; // sum of log2(delta + Y): the one scaling by ln 2 happens in the final combine
    float sum_y;
    float min_y;
    float max_y;
    uint nonfinite;
    uint pad0, pad1, pad2;
};

// coherent: the last workgroup reads partials that other workgroups wrote in this same dispatch.
layout(buffer_reference, std430, buffer_reference_align = 16) coherent buffer ReduceScratch {
    uint arrival_counter;
    uint pad[3];
    float edges[HP_HIST_BINS];
    uint hist_accum[HP_HIST_BINS];
    Partial partials[];
};

// The partials as two 16-byte words each, for the final combine's loads (the first word as one vector
// load). coherent, as ReduceScratch: the arrival's ordering (main) relies on it; a cached load could
// see a stale line.
layout(buffer_reference, std430, buffer_reference_align = 16) coherent buffer PartialWords {
    vec4 f;  // sum_log2, sum_y, min_y, max_y
    uvec4 n; // nonfinite, pad
};

// The edges only change between frames: read through a plain (cacheable) reference.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer ReduceEdges {
    float edges[HP_HIST_BINS];
};

// Layout table: shaders/include/hp_shared.h and pipeline/reduce.c (struct reduce_push).
layout(push_constant, std430) uniform Push {
    uvec2 pixels;         //  0
    uvec2 stats;          //  8
    uvec2 scratch;        // 16
    uint pixel_count;     // 24
    uint group_count;     // 28  partials to combine (two-pass final)
    float hist_min_log2;  // 32
    float hist_max_log2;  // 36
    float hist_a;         // 40  w = log2(Y) * a + b is the bin position: bin k covers w in [k - 0.5, k + 0.5)
    float hist_b;         // 44
    float hist_near;      // 48  |w - round(w)| above this: within the guess's error of a bin edge, settle
                          //     exactly (pipeline/reduce.c derives it from the spec's log2 precision)
    float luma_r;         // 52  Y = luma . RGB: the Y row of the frame's RGB -> XYZ (D65), fp32 (issue 17)
    float luma_g;         // 56
    float luma_b;         // 60
} pc;

#define FLT_INF uintBitsToFloat(0x7f800000u)
// ln 2: the log sums are kept in log2 units (one multiply per frame instead of one per pixel).
#define LN2 0.6931471805599453

// A 64-bit device address as (low, high) words, plus a byte offset, with the carry.
uvec2 address_add(uvec2 address, uint offset)
{
    uint carry;
    uint low = uaddCarry(address.x, offset, carry);
    return uvec2(low, address.y + carry);
}

#ifdef HP_REDUCE_TIMELINE
// Point k of this workgroup's timeline, taken by its first invocation: the device clock (common to all
// SMs; nanoseconds on NVIDIA, the unit is the driver's) and the SM's own clock (cycles). HP_REDUCE_TIMELINE_POINTS x 16 bytes per workgroup
// after the partials (hp_shared.h).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Timeline { uvec4 t[]; };
void timeline_point(uint k)
{
    if (gl_LocalInvocationIndex == 0u) {
        uvec2 device_clock = clockRealtime2x32EXT();
        uvec2 sm_clock = clock2x32ARB();
        Timeline(address_add(pc.scratch, HP_SCRATCH_OFF_TIMELINE))
            .t[gl_WorkGroupID.x * HP_REDUCE_TIMELINE_POINTS + k] = uvec4(device_clock, sm_clock);
    }
}
#define TIMELINE(k) timeline_point(k)
#else
#define TIMELINE(k)
#endif

#if defined(HP_REDUCE_SINGLE_PASS) || defined(HP_REDUCE_TWO_PASS_PARTIAL)

// Bins 0-255, then two that never reach the output: HIST_NONFINITE counts the excluded pixels (the
// workgroup's non-finite count, without a per-pixel counter), HIST_PENDING takes the pixels left for the
// exact settling, which count them again in their real bin.
#define HIST_NONFINITE 256u
#define HIST_PENDING 257u
shared uint s_hist[HP_HIST_BINS + 2];

// Per-thread accumulators: compensated sums (the rounding error of every addition gathered in .y,
// Knuth's TwoSum; see float_pair.glsl), min and max.
vec2 t_sum_log2 = vec2(0.0);
vec2 t_sum_y = vec2(0.0);
float t_min = FLT_INF;
float t_max = 0.0; // every Y is >= +0 (negative channels count as 0)
// Histogram run: consecutive pixels of a thread often share a bin on real frames (a constant sky gives
// one run), so one shared atomic per run, not per pixel; same-address atomics within a warp serialise.
// The first flush adds 0 to the pending bin.
uint t_run_bin = HIST_PENDING;
uint t_run_len = 0u;

void acc_add(inout vec2 acc, float v)
{
    vec2 s = fp_two_sum(acc.x, v);
    acc = vec2(s.x, acc.y + s.y);
}

// Branch-free: the flush is a predicated atomic.
void hist_add(uint bin)
{
    if (bin != t_run_bin)
        atomicAdd(s_hist[t_run_bin], t_run_len);
    t_run_len = bin == t_run_bin ? t_run_len + 1u : 1u;
    t_run_bin = bin;
}

// Y of a pixel, exactly as the CPU reference (hp_cpu_luminance): negative channels count as 0, and
// precise keeps ((r*R + g*G) + b*B) with no fused multiply-add, so the fp32 bits are the same and min,
// max and the bins compare exactly.
float luminance(vec3 c)
{
    vec3 p = vec3(c.r > 0.0 ? c.r : 0.0, c.g > 0.0 ? c.g : 0.0, c.b > 0.0 ? c.b : 0.0);
    precise float y = pc.luma_r * p.r + pc.luma_g * p.g + pc.luma_b * p.b;
    // A row with a negative weight (AP0's blue primary lies outside the spectral locus, below Y = 0) can
    // make Y negative for colours no light has: they count as black, as the tone stage draws them.
    return max(y, 0.0);
}

// log2(Y), as precise as the bin guess needs (the settling band covers the error, pipeline/reduce.c).
float guess_log2(float y)
{
    if (BIN_GUESS == 0u)
        return log2(y);
    // log2(2^e * m) = e + log2(m), m in [1, 2): e from the exponent bits, log2(m) from a degree-5
    // minimax polynomial in m - 1 (Remez fit, max error 1.26e-5). Exponent as a float without a
    // conversion instruction: (e + 127) + 2^23 has those bits. Y = 0 gives -127: below every range.
    uint b = floatBitsToUint(y);
    precise float e = uintBitsToFloat((b >> 23) | 0x4b000000u) - (8388608.0 + 127.0);
    float x = uintBitsToFloat((b & 0x007fffffu) | 0x3f800000u) - 1.0;
    float p = 0.04487361029772811;
    p = p * x - 0.19219563580645213;
    p = p * x + 0.41363011973547226;
    p = p * x - 0.7079926512683374;
    p = p * x + 1.441684557041589;
    p = p * x + 1.2538744565126084e-05;
    return e + p;
}

// The guessed bin of Y, and whether Y lies within the guess's error of a bin edge. w in [0, 255] is the
// position in bins: bin k holds w in [k - 0.5, k + 0.5) (hp_shared.h: bin = uint(t * 254 + 1), and w =
// t * 254 + 0.5 with t unclamped; the clamp keeps Y below the range in bin 0 and above it in 255). The
// rounding adds 2^23: a float at that magnitude has no fraction bits, so the sum is w rounded to the
// nearest integer, and its low bits are that integer (no float-to-int conversion, which runs at a
// quarter of the arithmetic rate). precise keeps the compiler from folding (w + 2^23) - 2^23 into w.
uint guess_bin(float y, out bool near)
{
    float w = clamp(guess_log2(y) * pc.hist_a + pc.hist_b, 0.0, 255.0);
    precise float r = w + 8388608.0;
    precise float d = w - (r - 8388608.0); // in [-0.5, 0.5]
    near = abs(d) > pc.hist_near;
    return floatBitsToUint(r) - 0x4b000000u;
}

// The exact bin: the highest k with edges[k] <= Y (edges[0] = 0, so bin 0 below edges[1]). From a
// guess that is already right or one off, one step of one loop; the loops make it exact from anywhere.
// The edges are read from the scratch buffer (L1-cached after the first miss), not copied to shared
// memory first: that copy's barrier waited on an HBM round trip behind the first blocks' loads, and
// held every workgroup 1.4 us at its start (bench_reduce --timeline on an H200), for a table that only
// the rare pixels near a bin edge read.
uint settle_bin(float y, uint bin)
{
    ReduceEdges edges = ReduceEdges(address_add(pc.scratch, HP_SCRATCH_OFF_EDGES));
    while (bin > 0u && y < edges.edges[bin])
        bin--;
    while (bin < 255u && y >= edges.edges[bin + 1u])
        bin++;
    return bin;
}

// One pixel into the block sums; returns true when its bin is left for fixup_block. Straight-line code:
// the excluded case is selects, not branches, so the compiler overlaps the pixels of a block.
bool add_pixel(vec3 c, inout float chunk_log2, inout float chunk_y)
{
    // DECISIONS.md 2: a NaN or infinite channel (exponent bits all ones) excludes the pixel. Tested on
    // the bits: a compiler may assume no NaN in float comparisons.
    uvec3 exponent = floatBitsToUint(c) & 0x7f800000u;
    bool excluded = any(equal(exponent, uvec3(0x7f800000u)));
    float y = luminance(c);
    // Finite channels near FLT_MAX can still overflow the sum (fp32 only: half channels are <= 65504).
    if (!INPUT_FP16)
        excluded = excluded || floatBitsToUint(y) >= 0x7f800000u;
    float ys = excluded ? 0.0 : y;
    chunk_y += ys;
    t_min = min(t_min, excluded ? FLT_INF : ys);
    t_max = max(t_max, ys);
    if ((DIAG_SKIP & 2u) == 0u)
        chunk_log2 += log2(excluded ? 1.0 : float(HP_LOG_AVG_DELTA) + ys);
    bool near = false;
    if ((DIAG_SKIP & 1u) == 0u) {
        uint bin = guess_bin(ys, near);
        near = near && !excluded && (DIAG_SKIP & 4u) == 0u;
        hist_add(excluded ? HIST_NONFINITE : near ? HIST_PENDING : bin);
    }
    return near;
}

// Pixel h (0 or 1) of an item.
vec3 item_pixel(uvec4 v, uint h)
{
    if (!INPUT_FP16)
        return uintBitsToFloat(v.xyz);
    return h == 0u ? vec3(unpackHalf2x16(v.x), unpackHalf2x16(v.y).x)
                   : vec3(unpackHalf2x16(v.z), unpackHalf2x16(v.w).x);
}

// The block's items at base + k * WG + tid. One 64-bit address per block, so every load has a constant
// offset from it; a guarded block (the frame's or the range's last) loads only items below `end`.
void load_block(out uvec4 v[FETCHES], uint base, uint end, bool guarded)
{
    uint i0 = base + gl_LocalInvocationIndex;
    Items p = Items(address_add(pc.pixels, i0 * 16u));
    [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
        if (guarded)
            v[k] = i0 + k * WG < end ? p.v[k * WG] : uvec4(0u);
        else
            v[k] = p.v[k * WG];
    }
}

// The exact settling of the block's flagged pixels (about 2 in 10^4 at the default range: a few percent
// of the warps, once per block).
void fixup_block(uvec4 v[FETCHES], uint near)
{
    [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
        [[unroll]] for (uint h = 0u; h < PIXELS_PER_ITEM; h++) {
            if ((near & (1u << (k * PIXELS_PER_ITEM + h))) != 0u) {
                float y = luminance(item_pixel(v[k], h));
                bool unused;
                atomicAdd(s_hist[settle_bin(y, guess_bin(y, unused))], 1u);
            }
        }
    }
}

void process_block(uvec4 v[FETCHES], uint base, uint end, bool guarded, inout float chunk_log2,
                   inout float chunk_y)
{
    uint near = 0u;
    [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
        [[unroll]] for (uint h = 0u; h < PIXELS_PER_ITEM; h++) {
            uint i = base + k * WG + gl_LocalInvocationIndex;
            bool valid = !guarded || (i < end && PIXELS_PER_ITEM * i + h < pc.pixel_count);
            if (valid && add_pixel(item_pixel(v[k], h), chunk_log2, chunk_y))
                near |= 1u << (k * PIXELS_PER_ITEM + h);
        }
    }
    if (near != 0u)
        fixup_block(v, near);
}

void add_chunk(float chunk_log2, float chunk_y)
{
    acc_add(t_sum_log2, chunk_log2);
    acc_add(t_sum_y, chunk_y);
}

// Every thread walks its blocks: base, base + step, ... below end. Whole blocks (every pixel of every
// item valid) run without bounds checks; what is left (at most one block per workgroup) runs guarded.
void accumulate_frame()
{
    uint tid = gl_LocalInvocationIndex;
    uint items = INPUT_FP16 ? (pc.pixel_count + 1u) / 2u : pc.pixel_count;
    uint block = WG * FETCHES;
    uint base, end, step;
    if (SPLIT) {
        // Ranges in units of 32 items (512 bytes of fp32), as equal as that allows.
        uint units = (items + 31u) / 32u;
        uint groups = gl_NumWorkGroups.x, g = gl_WorkGroupID.x;
        uint q = units / groups, r = units % groups;
        base = (g * q + min(g, r)) * 32u;
        end = min(base + (q + (g < r ? 1u : 0u)) * 32u, items);
        step = block;
    } else {
        base = gl_WorkGroupID.x * block;
        end = items;
        step = gl_NumWorkGroups.x * block;
    }
    // Items whose every pixel exists (an odd RGBA16F frame's last item has one).
    uint whole_end = min(end, INPUT_FP16 ? pc.pixel_count / 2u : pc.pixel_count);

    // The first block's loads go out before the shared-memory set-up and its barrier.
    uvec4 va[FETCHES], vb[FETCHES];
    bool whole = base + block <= whole_end;
    if (PREFETCH && whole)
        load_block(va, base, end, false);
    for (uint i = tid; i < HP_HIST_BINS + 2u; i += WG)
        s_hist[i] = 0u;
    barrier();
    TIMELINE(1);

    if (PREFETCH) {
        // Two register sets in turn: the loads of one block are in flight while the other is computed.
        if (whole) {
            for (;;) {
                float chunk_log2 = 0.0, chunk_y = 0.0;
                uint next = base + step;
                bool more = next + block <= whole_end;
                if (more)
                    load_block(vb, next, end, false);
                process_block(va, base, end, false, chunk_log2, chunk_y);
                base = next;
                if (!more) {
                    add_chunk(chunk_log2, chunk_y);
                    break;
                }
                next = base + step;
                more = next + block <= whole_end;
                if (more)
                    load_block(va, next, end, false);
                process_block(vb, base, end, false, chunk_log2, chunk_y);
                add_chunk(chunk_log2, chunk_y);
                base = next;
                if (!more)
                    break;
            }
        }
    } else {
        for (; base + block <= whole_end; base += step) {
            uvec4 v[FETCHES];
            load_block(v, base, end, false);
            float chunk_log2 = 0.0, chunk_y = 0.0;
            process_block(v, base, end, false, chunk_log2, chunk_y);
            add_chunk(chunk_log2, chunk_y);
        }
    }
    for (; base < end; base += step) {
        uvec4 v[FETCHES];
        load_block(v, base, end, true);
        float chunk_log2 = 0.0, chunk_y = 0.0;
        process_block(v, base, end, true, chunk_log2, chunk_y);
        add_chunk(chunk_log2, chunk_y);
    }
    atomicAdd(s_hist[t_run_bin], t_run_len);
    TIMELINE(2);
}

// After a barrier: the workgroup's histogram to the accumulators, one atomic per non-empty bin.
void flush_histogram()
{
    ReduceScratch scratch = ReduceScratch(pc.scratch);
    for (uint i = gl_LocalInvocationIndex; i < HP_HIST_BINS; i += WG) {
        uint n = s_hist[i];
        if (n != 0u)
            atomicAdd(scratch.hist_accum[i], n);
    }
}

#endif // first pass of either form

#if defined(HP_REDUCE_SINGLE_PASS) || defined(HP_REDUCE_TWO_PASS_FINAL)

// Combines `count` partials into the statistics; this runs on one workgroup while the rest of the GPU
// waits, so it is built for latency, with no barrier. Every thread moves a bin of the histogram to the
// stats (the accumulators are left at zero for the next frame); the first subgroup loads the partials,
// PARTIALS_PER_LANE per lane per round, all of a round before any arithmetic (one round for up to 8 x
// the subgroup size: 256 on a 32-wide subgroup, 132 partials by default on an H200), adds each lane's
// into a float pair (TwoSum, float_pair.glsl), then the lanes' hi and lo parts in plain fp32 with
// subgroupAdd, whose order the implementation chooses (DECISIONS.md 3: "combined pairwise").
//
// Error of the log sum. Every term passes through d roundings of at most u = 2^-24 on a device that
// rounds to nearest (those we run on; Vulkan allows a faithful rounding unless a module asks), so
// the mean of ln(delta + Y) is off by at most d * u * mean |ln(delta + Y)|, and the log-average by
// that relatively. At the default shape on a 32-wide subgroup, d is about 30: 7 in the chunk sums of
// two blocks, up to 6 in the log2 instruction (3 ulp), 11 in the workgroup's sums, 5 here, 1 in the
// scaling by ln 2. With d = 30 that is under 1e-4 while mean |ln(delta + Y)| < 55: every RGBA16F frame
// (|ln| <= 11.5), and RGBA32F frames unless their luminances average beyond 10^23. Smaller subgroups
// and more fetches per block add roundings. Measured: 1e-9 to 1e-8 on the tests' frames.
//
// On an H200 (docs/BENCHMARKS.md) a float-pair butterfly through shuffles here took 0.5 us more, and a
// pass of the whole workgroup with a barrier waited on the histogram's exchanges, another 0.6 us.
#define PARTIALS_PER_LANE 8u
void combine_partials(uint count)
{
    if ((DIAG_SKIP & 24u) != 0u)
        return;
    uint tid = gl_LocalInvocationIndex;
    ReduceScratch scratch = ReduceScratch(pc.scratch);
    LumStats stats = LumStats(pc.stats);
    const uint BINS_PER_THREAD = (HP_HIST_BINS + WG - 1u) / WG;
    uint hist[BINS_PER_THREAD];
    [[unroll]] for (uint j = 0u; j < BINS_PER_THREAD; j++) {
        uint i = tid + j * WG;
        hist[j] = i < HP_HIST_BINS ? atomicExchange(scratch.hist_accum[i], 0u) : 0u;
    }
    vec2 sl = vec2(0.0), sy = vec2(0.0);
    float mn = FLT_INF, mx = 0.0;
    uint nonfinite = 0u;
    if (gl_SubgroupID == 0u) {
        for (uint base = gl_SubgroupInvocationID; base < count; base += PARTIALS_PER_LANE * gl_SubgroupSize) {
            vec4 pf[PARTIALS_PER_LANE]; // sum_log2, sum_y, min_y, max_y
            uint pn[PARTIALS_PER_LANE];
            [[unroll]] for (uint k = 0u; k < PARTIALS_PER_LANE; k++) {
                uint i = base + k * gl_SubgroupSize;
                bool live = i < count;
                uint offset = HP_SCRATCH_OFF_PARTIALS + i * HP_SCRATCH_PARTIAL_SIZE;
                PartialWords w = PartialWords(address_add(pc.scratch, offset));
                pf[k] = live ? w.f : vec4(0.0, 0.0, FLT_INF, 0.0);
                pn[k] = live ? w.n.x : 0u;
            }
            [[unroll]] for (uint k = 0u; k < PARTIALS_PER_LANE; k++) {
                sl = fp_add(sl, pf[k].x);
                sy = fp_add(sy, pf[k].y);
                mn = min(mn, pf[k].z);
                mx = max(mx, pf[k].w);
                nonfinite += pn[k];
            }
        }
    }
#ifdef HP_REDUCE_TIMELINE
    if (sl.x != -1.0) // after the partials arrived
        TIMELINE(7);
#endif
    [[unroll]] for (uint j = 0u; j < BINS_PER_THREAD; j++) {
        uint i = tid + j * WG;
        if (i < HP_HIST_BINS)
            stats.hist[i] = hist[j];
    }
#ifdef HP_REDUCE_TIMELINE
    if (hist[0] != 0xffffffffu) // after the histogram's exchanges returned
        TIMELINE(8);
#endif
    if (gl_SubgroupID != 0u)
        return;
    sl = subgroupAdd(sl);
    sy = subgroupAdd(sy);
    mn = subgroupMin(mn);
    mx = subgroupMax(mx);
    nonfinite = subgroupAdd(nonfinite);
    TIMELINE(9);
    if (subgroupElect()) {
        // log2 units to ln: one rounding of 2^-24, far inside the 1e-4 of DECISIONS.md 3.
        vec2 sum_ln = sl * float(LN2);
        uint finite = pc.pixel_count - nonfinite;
        float n = float(max(finite, 1u));
        stats.finite_count = finite;
        stats.nonfinite_count = nonfinite;
        stats.min_y = finite > 0u ? mn : 0.0;
        stats.max_y = finite > 0u ? mx : 0.0;
        stats.sum_log_hi = sum_ln.x;
        stats.sum_log_lo = sum_ln.y;
        stats.sum_y_hi = sy.x;
        stats.sum_y_lo = sy.y;
        stats.log_average = finite > 0u ? exp((sum_ln.x + sum_ln.y) / n) : 0.0;
        stats.mean_y = finite > 0u ? (sy.x + sy.y) / n : 0.0;
        stats.hist_min_log2 = pc.hist_min_log2;
        stats.hist_max_log2 = pc.hist_max_log2;
    }
}

#endif // combine

#if defined(HP_REDUCE_SINGLE_PASS)

// Per-subgroup values of the workgroup's sums.
shared float s_sub_log2[MAX_SUBGROUPS];
shared float s_sub_y[MAX_SUBGROUPS];
shared float s_min[MAX_SUBGROUPS];
shared float s_max[MAX_SUBGROUPS];
shared bool s_is_last;

void main()
{
    TIMELINE(0);
    accumulate_frame();

    // Workgroup reduction: subgroup arithmetic, then one subgroup over the per-subgroup values.
    float sl = subgroupAdd(t_sum_log2.x + t_sum_log2.y);
    float sy = subgroupAdd(t_sum_y.x + t_sum_y.y);
    float mn = subgroupMin(t_min);
    float mx = subgroupMax(t_max);
    if (subgroupElect()) {
        s_sub_log2[gl_SubgroupID] = sl;
        s_sub_y[gl_SubgroupID] = sy;
        s_min[gl_SubgroupID] = mn;
        s_max[gl_SubgroupID] = mx;
    }
    barrier();
    TIMELINE(3);
    ReduceScratch scratch = ReduceScratch(pc.scratch);
    // The histogram's atomics and the partial's store go out together; the arrival below orders both.
    flush_histogram();
    if (gl_SubgroupID == 0u) {
        sl = 0.0, sy = 0.0, mn = FLT_INF, mx = 0.0;
        for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) {
            sl += s_sub_log2[i];
            sy += s_sub_y[i];
            mn = min(mn, s_min[i]);
            mx = max(mx, s_max[i]);
        }
        sl = subgroupAdd(sl);
        sy = subgroupAdd(sy);
        mn = subgroupMin(mn);
        mx = subgroupMax(mx);
        if (subgroupElect())
            scratch.partials[gl_WorkGroupID.x] = Partial(sl, sy, mn, mx, s_hist[HIST_NONFINITE], 0u, 0u, 0u);
    }
    if ((DIAG_SKIP & 16u) != 0u)
        return;
    // Release and acquire ride on the arrival counter's atomic (thread 0), with the workgroup barriers
    // around it ordering the other invocations' writes before it and their reads after it (the Vulkan
    // memory model's happens-before is transitive). The partials' store and loads are coherent
    // (availability and visibility at device scope with each access) and the histogram's updates are
    // atomics (likewise), so the barriers only have to order them, and workgroup scope suffices.
    // With fences in every invocation instead (memoryBarrierBuffer() before and after), the last
    // workgroup started its combine 0.6 us after its arrival on an H200; now 0.2 us, and the stage is
    // 3% faster at 4K RGBA16F (docs/BENCHMARKS.md).
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
    TIMELINE(4);
    if (gl_LocalInvocationIndex == 0u) {
        uint arrived = atomicAdd(scratch.arrival_counter, 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                                 gl_SemanticsAcquireRelease);
        s_is_last = arrived == gl_NumWorkGroups.x - 1u;
    }
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
    TIMELINE(5);
    if (!s_is_last)
        return;

    // The last workgroup: every other partial is written. Reset the counter for the next frame.
    TIMELINE(10);
    combine_partials(gl_NumWorkGroups.x);
    if (gl_LocalInvocationIndex == 0u)
        scratch.arrival_counter = 0u;
    TIMELINE(6);
}

#elif defined(HP_REDUCE_TWO_PASS_PARTIAL)

shared float s_log[gl_WorkGroupSize.x];
shared float s_y[gl_WorkGroupSize.x];
shared float s_mn[gl_WorkGroupSize.x];
shared float s_mx[gl_WorkGroupSize.x];

void main()
{
    accumulate_frame();

    uint tid = gl_LocalInvocationIndex;
    s_log[tid] = t_sum_log2.x + t_sum_log2.y;
    s_y[tid] = t_sum_y.x + t_sum_y.y;
    s_mn[tid] = t_min;
    s_mx[tid] = t_max;
    barrier();
    // The second dispatch reads the accumulators after a pipeline barrier: no memory barrier here.
    flush_histogram();
    // Sequential addressing: active threads are contiguous and read conflict-free (Harris, kernel 3).
    // The tree stops at subgroup width; the loop condition is uniform, so barrier() is legal in it.
    for (uint s = WG / 2u; s >= gl_SubgroupSize; s >>= 1u) {
        if (tid < s) {
            s_log[tid] += s_log[tid + s];
            s_y[tid] += s_y[tid + s];
            s_mn[tid] = min(s_mn[tid], s_mn[tid + s]);
            s_mx[tid] = max(s_mx[tid], s_mx[tid + s]);
        }
        barrier();
    }
    // The last "warp": one subgroup finishes the remaining gl_SubgroupSize values without barriers.
    if (gl_SubgroupID == 0u) {
        uint lane = gl_SubgroupInvocationID;
        bool live = lane < min(gl_SubgroupSize, WG);
        float sl = subgroupAdd(live ? s_log[lane] : 0.0);
        float sy = subgroupAdd(live ? s_y[lane] : 0.0);
        float mn = subgroupMin(live ? s_mn[lane] : FLT_INF);
        float mx = subgroupMax(live ? s_mx[lane] : 0.0);
        if (subgroupElect())
            ReduceScratch(pc.scratch).partials[gl_WorkGroupID.x] =
                Partial(sl, sy, mn, mx, s_hist[HIST_NONFINITE], 0u, 0u, 0u);
    }
}

#elif defined(HP_REDUCE_TWO_PASS_FINAL)

void main()
{
    combine_partials(pc.group_count);
}

#else
#error "define HP_REDUCE_SINGLE_PASS, HP_REDUCE_TWO_PASS_PARTIAL or HP_REDUCE_TWO_PASS_FINAL"
#endif

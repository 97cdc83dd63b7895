#version 460
// Luminance reduction: counts, log-average, mean, min, max and the log2 histogram of an RGBA frame
// (DECISIONS.md 2-4; algorithms.md 1). One source, three modules (shaders/meson.build):
//   HP_REDUCE_SINGLE_PASS        each workgroup reduces its share with subgroup arithmetic and writes a
//                                partial; the last workgroup to arrive combines the partials and resets
//                                the arrival counter (FidelityFX SPD's single-dispatch scheme).
//   HP_REDUCE_TWO_PASS_PARTIAL   the seed's first pass: a shared-memory tree with sequential addressing
//                                (Harris 2007, kernel 3) with several fetches per thread (kernel 4/7).
//   HP_REDUCE_TWO_PASS_FINAL     the seed's second pass: one workgroup over the partials.
//
// Harris's "unrolled last warp" (kernel 5) relies on a warp running in lockstep with volatile shared
// memory; neither Vulkan's memory model nor GPUs with independent thread scheduling (Volta and later)
// promise that. The portable form of the same idea is subgroup arithmetic: the tree stops at subgroup
// width and one subgroup finishes with subgroupAdd/Min/Max, with no barrier.
//
// Every buffer is reached through a device address from the push constants (see pipeline/gpu.h).

#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#include "hp_shared.h"
#include "float_pair.glsl"

layout(local_size_x_id = 0) in;             // workgroup size, 256 by default (pipeline/reduce.c)
layout(constant_id = 1) const uint FETCHES = 4;        // loads in flight per thread per iteration
layout(constant_id = 2) const bool INPUT_FP16 = false; // RGBA16F (two pixels per 16-byte load) or RGBA32F
// Benchmark-only ablation (bench/bench_reduce.c shows where the time goes); 0 in the daemon, and the
// specialised code carries no trace of it. 1: no histogram, 2: no log sum, 4: no exact bin settling,
// 8: no final combine of the partials.
layout(constant_id = 3) const uint DIAG_SKIP = 0;

#define WG gl_WorkGroupSize.x

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF32 { vec4 px[]; };
// Two RGBA16F pixels per element; the frame's buffer is padded to 16 bytes so the last load is in bounds.
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PixelsF16 { uvec4 px2[]; };

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
    float sum_log;
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
    float hist_scale;     // 40  1 / (max - min)
    float hist_settle;    // 44  half-width, in bins, of the band around an edge where the log2 guess
                          //     may be wrong (pipeline/reduce.c derives it from the spec's log2 precision)
} pc;

#define FLT_INF uintBitsToFloat(0x7f800000u)

// A 64-bit device address as (low, high) words, plus a byte offset, with the carry.
uvec2 address_add(uvec2 address, uint offset)
{
    uint carry;
    uint low = uaddCarry(address.x, offset, carry);
    return uvec2(low, address.y + carry);
}

#if defined(HP_REDUCE_SINGLE_PASS) || defined(HP_REDUCE_TWO_PASS_PARTIAL)

shared uint s_hist[HP_HIST_BINS];
shared float s_edges[HP_HIST_BINS];

// Per-thread accumulators.
vec2 t_sum_log = vec2(0.0);  // float pair
vec2 t_sum_y = vec2(0.0);
float t_min = FLT_INF;
float t_max = -FLT_INF;
uint t_nonfinite = 0u;
// Histogram run: neighbouring pixels usually share a bin, so one shared atomic per run, not per pixel.
uint t_run_bin = 0u;
uint t_run_len = 0u;

void hist_add(uint bin)
{
    if (bin == t_run_bin) {
        t_run_len++;
        return;
    }
    if (t_run_len != 0u)
        atomicAdd(s_hist[t_run_bin], t_run_len);
    t_run_bin = bin;
    t_run_len = 1u;
}

// The bin of Y: the highest k with edges[k] <= Y, bin 0 below edges[1] (hp_shared.h). The log2 guess
// u is right unless it lies within pc.hist_settle of a whole number (about 0.1% of pixels at the default
// range, and every pixel clamped to an end of the range); only those are settled against the exact
// edges in shared memory. Y = 0 gives log2 = -inf, t = 0, bin 1, then 0 from the last line.
uint hist_bin(float y, float edge1)
{
    float t = clamp((log2(y) - pc.hist_min_log2) * pc.hist_scale, 0.0, 1.0);
    float u = t * 254.0 + 1.0;
    uint bin = min(uint(u), 255u);
    float f = u - float(bin);
    if ((DIAG_SKIP & 4u) == 0u && (f < pc.hist_settle || f > 1.0 - pc.hist_settle)) {
        while (bin > 1u && y < s_edges[bin])
            bin--;
        while (bin < 255u && y >= s_edges[bin + 1u])
            bin++;
    }
    return y < edge1 ? 0u : bin;
}

// One pixel. Adds its log and Y to the chunk sums (plain fp32 over a few pixels; the float pairs take
// the chunk sums). Written without early returns: an excluded pixel is rare, and straight-line code
// lets the compiler overlap the transcendental latencies of the pixels in flight.
void add_pixel(vec4 c, float edge1, inout float chunk_log, inout float chunk_y)
{
    // DECISIONS.md 2: a NaN or infinite colour channel (exponent bits all ones) excludes the pixel;
    // negative channels count as 0.
    uvec3 exponent = floatBitsToUint(c.rgb) & 0x7f800000u;
    bool excluded = any(equal(exponent, uvec3(0x7f800000u)));
    vec3 p = vec3(c.r > 0.0 ? c.r : 0.0, c.g > 0.0 ? c.g : 0.0, c.b > 0.0 ? c.b : 0.0);
    // precise: evaluated as written, ((r*R + g*G) + b*B) with no fused multiply-add, so the CPU
    // reference (compiled with -ffp-contract=off) gets the same fp32 bits and min/max compare exactly.
    precise float y = float(HP_LUMA_R) * p.r + float(HP_LUMA_G) * p.g + float(HP_LUMA_B) * p.b;
    excluded = excluded || isinf(y); // finite channels near FLT_MAX can still overflow the sum
    y = excluded ? 0.0 : y;
    t_nonfinite += excluded ? 1u : 0u;
    if ((DIAG_SKIP & 2u) == 0u)
        chunk_log += excluded ? 0.0 : log(float(HP_LOG_AVG_DELTA) + y);
    chunk_y += y;
    t_min = excluded ? t_min : min(t_min, y);
    t_max = max(t_max, y); // an excluded pixel adds 0, which only matters when no pixel counts
    if ((DIAG_SKIP & 1u) == 0u) {
        uint bin = hist_bin(y, edge1);
        if (!excluded)
            hist_add(bin);
    }
}

// Every thread walks its share of the frame: FETCHES coalesced loads per iteration, issued before any
// arithmetic so they are all in flight at once, then grid-stride to the next block.
void accumulate_frame()
{
    uint tid = gl_LocalInvocationIndex;
    for (uint i = tid; i < HP_HIST_BINS; i += WG) {
        s_hist[i] = 0u;
        s_edges[i] = ReduceEdges(address_add(pc.scratch, HP_SCRATCH_OFF_EDGES)).edges[i];
    }
    barrier();
    float edge1 = s_edges[1];

    uint items = INPUT_FP16 ? (pc.pixel_count + 1u) / 2u : pc.pixel_count;
    uint block = WG * FETCHES;
    uint stride = gl_NumWorkGroups.x * block;
    for (uint base = gl_WorkGroupID.x * block; base < items; base += stride) {
        float chunk_log = 0.0;
        float chunk_y = 0.0;
        if (INPUT_FP16) {
            uvec4 v[FETCHES];
            [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
                uint i = base + k * WG + tid;
                v[k] = i < items ? PixelsF16(pc.pixels).px2[i] : uvec4(0u);
            }
            [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
                uint i = base + k * WG + tid;
                if (i < items) {
                    add_pixel(vec4(unpackHalf2x16(v[k].x), unpackHalf2x16(v[k].y)), edge1, chunk_log, chunk_y);
                    if (2u * i + 1u < pc.pixel_count)
                        add_pixel(vec4(unpackHalf2x16(v[k].z), unpackHalf2x16(v[k].w)), edge1, chunk_log, chunk_y);
                }
            }
        } else {
            vec4 v[FETCHES];
            [[unroll]] for (uint k = 0u; k < FETCHES; k++) {
                uint i = base + k * WG + tid;
                v[k] = i < items ? PixelsF32(pc.pixels).px[i] : vec4(0.0);
            }
            [[unroll]] for (uint k = 0u; k < FETCHES; k++)
                if (base + k * WG + tid < items)
                    add_pixel(v[k], edge1, chunk_log, chunk_y);
        }
        t_sum_log = fp_add(t_sum_log, chunk_log);
        t_sum_y = fp_add(t_sum_y, chunk_y);
    }
    if (t_run_len != 0u)
        atomicAdd(s_hist[t_run_bin], t_run_len);

    // The workgroup's histogram goes to the accumulators with one atomic per non-empty bin. The
    // memory barrier makes each thread's atomics complete before the workgroup reports its partial.
    barrier();
    ReduceScratch scratch = ReduceScratch(pc.scratch);
    for (uint i = tid; i < HP_HIST_BINS; i += WG) {
        uint n = s_hist[i];
        if (n != 0u)
            atomicAdd(scratch.hist_accum[i], n);
    }
    memoryBarrierBuffer();
}

#endif // first pass of either form

#if defined(HP_REDUCE_SINGLE_PASS) || defined(HP_REDUCE_TWO_PASS_FINAL)

shared vec4 s_pairs[gl_WorkGroupSize.x]; // (sum_log hi, lo, sum_y hi, lo)
shared float s_min[gl_WorkGroupSize.x];
shared float s_max[gl_WorkGroupSize.x];
shared uint s_nonfinite[gl_WorkGroupSize.x];

// Combines `count` partials into the statistics. Sums as float pairs through a shared-memory tree
// (subgroupAdd would round the pairs away); min, max and counts through subgroup operations.
void combine_partials(uint count)
{
    if ((DIAG_SKIP & 8u) != 0u)
        return;
    uint tid = gl_LocalInvocationIndex;
    ReduceScratch scratch = ReduceScratch(pc.scratch);
    LumStats stats = LumStats(pc.stats);
    // The histogram moves to the stats and the accumulators are left at zero for the next frame.
    for (uint i = tid; i < HP_HIST_BINS; i += WG)
        stats.hist[i] = atomicExchange(scratch.hist_accum[i], 0u);
    vec2 sum_log = vec2(0.0), sum_y = vec2(0.0);
    float mn = FLT_INF, mx = -FLT_INF;
    uint nonfinite = 0u;
    // This runs on one workgroup while the rest of the GPU waits: four loads in flight per thread
    // before any arithmetic, so the tail costs a few L2 round trips, not one per partial.
    for (uint base = tid; base < count; base += 4u * WG) {
        vec4 pf[4]; // sum_log, sum_y, min_y, max_y
        uint pn[4];
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            uint i = base + k * WG;
            bool live = i < count;
            pf[k] = live ? vec4(scratch.partials[i].sum_log, scratch.partials[i].sum_y, scratch.partials[i].min_y,
                                scratch.partials[i].max_y)
                         : vec4(0.0, 0.0, FLT_INF, -FLT_INF);
            pn[k] = live ? scratch.partials[i].nonfinite : 0u;
        }
        [[unroll]] for (uint k = 0u; k < 4u; k++) {
            sum_log = fp_add(sum_log, pf[k].x);
            sum_y = fp_add(sum_y, pf[k].y);
            mn = min(mn, pf[k].z);
            mx = max(mx, pf[k].w);
            nonfinite += pn[k];
        }
    }
    s_pairs[tid] = vec4(sum_log, sum_y);
    mn = subgroupMin(mn);
    mx = subgroupMax(mx);
    nonfinite = subgroupAdd(nonfinite);
    if (subgroupElect()) {
        s_min[gl_SubgroupID] = mn;
        s_max[gl_SubgroupID] = mx;
        s_nonfinite[gl_SubgroupID] = nonfinite;
    }
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1u) {
        if (tid < s) {
            vec4 a = s_pairs[tid], b = s_pairs[tid + s];
            s_pairs[tid] = vec4(fp_add(a.xy, b.xy), fp_add(a.zw, b.zw));
        }
        barrier();
    }
    if (tid == 0u) {
        for (uint i = 1u; i < gl_NumSubgroups; i++) {
            mn = min(mn, s_min[i]);
            mx = max(mx, s_max[i]);
            nonfinite += s_nonfinite[i];
        }
        vec4 sums = s_pairs[0];
        uint finite = pc.pixel_count - nonfinite;
        float n = float(max(finite, 1u));
        stats.finite_count = finite;
        stats.nonfinite_count = nonfinite;
        stats.min_y = finite > 0u ? mn : 0.0;
        stats.max_y = finite > 0u ? mx : 0.0;
        stats.sum_log_hi = sums.x;
        stats.sum_log_lo = sums.y;
        stats.sum_y_hi = sums.z;
        stats.sum_y_lo = sums.w;
        stats.log_average = finite > 0u ? exp((sums.x + sums.y) / n) : 0.0;
        stats.mean_y = finite > 0u ? (sums.z + sums.w) / n : 0.0;
        stats.hist_min_log2 = pc.hist_min_log2;
        stats.hist_max_log2 = pc.hist_max_log2;
    }
}

#endif // combine

#if defined(HP_REDUCE_SINGLE_PASS)

shared float s_sub_log[gl_WorkGroupSize.x];
shared float s_sub_y[gl_WorkGroupSize.x];
shared bool s_is_last;

void main()
{
    accumulate_frame();

    // Workgroup reduction: subgroup arithmetic, then one value per subgroup combined by thread 0
    // (at most 32 subgroups even on lavapipe's 8-wide ones).
    float sl = subgroupAdd(t_sum_log.x + t_sum_log.y);
    float sy = subgroupAdd(t_sum_y.x + t_sum_y.y);
    float mn = subgroupMin(t_min);
    float mx = subgroupMax(t_max);
    uint nf = subgroupAdd(t_nonfinite);
    if (subgroupElect()) {
        s_sub_log[gl_SubgroupID] = sl;
        s_sub_y[gl_SubgroupID] = sy;
        s_min[gl_SubgroupID] = mn;
        s_max[gl_SubgroupID] = mx;
        s_nonfinite[gl_SubgroupID] = nf;
    }
    barrier();
    ReduceScratch scratch = ReduceScratch(pc.scratch);
    if (gl_LocalInvocationIndex == 0u) {
        vec2 pl = vec2(sl, 0.0), py = vec2(sy, 0.0);
        for (uint i = 1u; i < gl_NumSubgroups; i++) {
            pl = fp_add(pl, s_sub_log[i]);
            py = fp_add(py, s_sub_y[i]);
            mn = min(mn, s_min[i]);
            mx = max(mx, s_max[i]);
            nf += s_nonfinite[i];
        }
        scratch.partials[gl_WorkGroupID.x] = Partial(pl.x + pl.y, py.x + py.y, mn, mx, nf, 0u, 0u, 0u);
        // Release: the partial is visible device-wide before the counter says it is there.
        memoryBarrierBuffer();
        uint arrived = atomicAdd(scratch.arrival_counter, 1u);
        s_is_last = arrived == gl_NumWorkGroups.x - 1u;
    }
    barrier();
    if (!s_is_last)
        return;

    // The last workgroup: every other partial is written. Reset the counter for the next frame.
    memoryBarrierBuffer();
    combine_partials(gl_NumWorkGroups.x);
    if (gl_LocalInvocationIndex == 0u)
        scratch.arrival_counter = 0u;
}

#elif defined(HP_REDUCE_TWO_PASS_PARTIAL)

shared float s_log[gl_WorkGroupSize.x];
shared float s_y[gl_WorkGroupSize.x];
shared float s_mn[gl_WorkGroupSize.x];
shared float s_mx[gl_WorkGroupSize.x];
shared uint s_nf[gl_WorkGroupSize.x];

void main()
{
    accumulate_frame();

    uint tid = gl_LocalInvocationIndex;
    s_log[tid] = t_sum_log.x + t_sum_log.y;
    s_y[tid] = t_sum_y.x + t_sum_y.y;
    s_mn[tid] = t_min;
    s_mx[tid] = t_max;
    s_nf[tid] = t_nonfinite;
    barrier();
    // Sequential addressing: active threads are contiguous and read conflict-free (Harris, kernel 3).
    // The tree stops at subgroup width; the loop condition is uniform, so barrier() is legal in it.
    for (uint s = WG / 2u; s >= gl_SubgroupSize; s >>= 1u) {
        if (tid < s) {
            s_log[tid] += s_log[tid + s];
            s_y[tid] += s_y[tid + s];
            s_mn[tid] = min(s_mn[tid], s_mn[tid + s]);
            s_mx[tid] = max(s_mx[tid], s_mx[tid + s]);
            s_nf[tid] += s_nf[tid + s];
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
        float mx = subgroupMax(live ? s_mx[lane] : -FLT_INF);
        uint nf = subgroupAdd(live ? s_nf[lane] : 0u);
        if (subgroupElect())
            ReduceScratch(pc.scratch).partials[gl_WorkGroupID.x] = Partial(sl, sy, mn, mx, nf, 0u, 0u, 0u);
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

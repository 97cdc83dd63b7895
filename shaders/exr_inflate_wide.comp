#version 460
// The wide inflate (issue 20): each of a frame's EXR ZIP chunks decoded by a workgroup at once, then finished
// by it (exr_finish.glsl); pipeline/exr_zip_gpu.c's hp_exr_zip_gpu_set_wide, the daemon's whole inflate on a
// GPU. It accepts what exr_zip.comp's serial inflate accepts (exr_inflate.glsl's codes and header).
// exr_zip.comp's serial inflate holds a warp for some 40 ms a 4K chunk, one symbol after another. Here the
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
// One workgroup per chunk (pipeline/exr_zip_gpu.c's WIDE_GROUP lanes; benchmarks try others): the lanes'
// shared arrays, and exr_finish.glsl's, are as long as the workgroup.
layout(local_size_x_id = 2) in;
#define FINISH_MAX gl_WorkGroupSize.x
#include "exr_zip_io.glsl"
#include "exr_finish.glsl"
#include "exr_inflate.glsl"

#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_control_flow_attributes : require
layout(buffer_reference, std430, buffer_reference_align = 1) coherent buffer Bytes { uint8_t v[]; };

// Bits a lane decodes in a window (pipeline/exr_zip_gpu.c's WIDE_SPAN, 456; benchmarks try others): some 60
// symbols of a 4K chunk's blocks.
layout(constant_id = 4) const uint SPAN = 512u;
#define WIDE_MAX gl_WorkGroupSize.x // the lanes
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

// For benchmarks (exr_inflate_wide_phases, hp_exr_zip_gpu_wide_phases): the first lane's subgroup clock at
// each phase's end, the cycles since the last added to that phase's sum. The phases are split by barriers,
// so the first lane's time in one is the workgroup's. They go to the table's words 8-15 in place of the
// counts below: the header and its tables, the maps, following them, counting, walking, jumping, copying,
// and the rest (the setup before the first block, the stored blocks and the finish).
#define PH_HEADER 0
#define PH_MAPS 1
#define PH_FOLLOW 2
#define PH_COUNT 3
#define PH_WALK 4
#define PH_JUMP 5
#define PH_COPY 6
#define PH_REST 7
#ifdef HP_WIDE_PHASES
#extension GL_ARB_shader_clock : require
// The low word of the clock: a phase's cycles are far fewer than 2^32, and a difference of low words wraps right.
uint g_clock_at, g_phase[8];
#define PHASE_END(k) do { uint t_ = clock2x32ARB().x; g_phase[k] += t_ - g_clock_at; g_clock_at = t_; } while (false)
#else
#define PHASE_END(k) do { } while (false)
#endif

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

// One symbol at the reader, the decoding every step of the wide inflate takes: a literal's byte (below
// 256), STEP_EOB, STEP_MATCH with its length and distance, or STEP_INVALID (a code that is none, or a length
// or distance symbol past the table: RFC 1951 3.2.5's 286, 287, 30 and 31).
#define STEP_EOB 256u
#define STEP_MATCH 257u
#define STEP_INVALID 0xffffu
uint step_symbol(out uint len, out uint dist)
{
    len = 1u;
    dist = 0u;
    uint e = decode_lit();
    if (e < E_LENGTH)
        return e >> 8;
    uint kind = e & E_KIND;
    if (kind != E_LENGTH)
        return kind == E_END ? STEP_EOB : STEP_INVALID;
    return decode_match(e, len, dist) ? STEP_MATCH : STEP_INVALID;
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
        uint len, dist, step = step_symbol(len, dist);
        if (step == STEP_EOB || step == STEP_INVALID) {
            state = step == STEP_EOB ? W_EOB : W_INVALID;
            break;
        }
        made += len;
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

// One step of a decoding in a map: 0 (it goes on), or it ends: EXIT_EOB or EXIT_INVALID.
uint map_step()
{
    uint len, dist, step = step_symbol(len, dist);
    return step == STEP_EOB ? EXIT_EOB : step == STEP_INVALID ? EXIT_INVALID : 0u;
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
        uint why = map_step();
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
            uint why = map_step();
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
    PHASE_END(PH_MAPS);
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
// A pointer whose target holds its byte already (a literal of the batch, or a byte before it): jumping
// leaves it be with one load, where following it again would cost a second that waits on memory. Offsets
// are under 2^31 (the split's and the image's bound, exr_zip_gpu.c).
#define PTR_FINAL 0x80000000u
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
        uint len, dist, step = step_symbol(len, dist);
        if (step < STEP_EOB) {
            if (q >= lo) {
                dst.v[q] = uint8_t(step);
                ptr.v[g_ptr_base + q - lo] = q | PTR_FINAL;
            }
            q++;
            continue;
        }
        if (step == STEP_EOB)
            break;
        // STEP_INVALID does not come (scan took these symbols); a distance past the chunk's first byte may
        if (step == STEP_INVALID || dist > q - chunk_lo)
            return HP_EXR_ZIP_BAD_DATA;
        uint from = max(q, lo), to = min(q + len, hi);
        g_used += to > from ? to - from : 0u;
        if (g_used > g_cap)
            return HP_EXR_ZIP_UNFINISHED;
        // Pointers only, one store a byte: the copies are jump_batch's, spread over every lane (a lane's
        // run can be thousands of bytes, and a load of the byte it repeats waits on memory each time).
        uint r = from > q && to > from ? (from - q) % dist : 0u; // no division for a match wholly before lo
        for (uint x = from; x < to; x++) {
            uint src = q - dist + r;
            ptr.v[g_ptr_base + x - lo] = src < lo ? src | PTR_FINAL : src; // before the batch: written
            r = r + 1u == dist ? 0u : r + 1u;
        }
        q += len;
    }
    return HP_EXR_ZIP_OK;
}

// The batch's pointers jumped until each is final (PTR_FINAL: it points at a literal of the batch or at a
// byte before it), then those bytes copied. Every lane, in uniform control flow. A lane takes its bytes
// JUMP_WAYS at a time, their loads issued together: each waits on memory, and one after another they held
// the warp (docs/BENCHMARKS.md). False if a pointer leads past the batch or before the chunk (memory a
// failed walk left), or past 64 rounds (jumping halves a chain each round and a batch's chains are at most
// its length long, so 32 would do), or past the lane's work.
#define JUMP_WAYS 4u
bool jump_batch(uint lane, uint lanes, uint lo, uint hi)
{
    CoherentWords ptr = CoherentWords(pc.image);
    uint n = hi - lo;
    bool bad = false;
    wide_rounds_begin();
    uint round = 0u;
    for (;; round++) {
        bool changed = false;
        for (uint x0 = lo + lane; x0 < hi && !bad; x0 += JUMP_WAYS * lanes) {
            g_used++;
            uint v[JUMP_WAYS], w[JUMP_WAYS];
            [[unroll]] for (uint k = 0u; k < JUMP_WAYS; k++) {
                uint x = x0 + k * lanes;
                v[k] = x < hi ? ptr.v[g_ptr_base + x - lo] : PTR_FINAL;
            }
            [[unroll]] for (uint k = 0u; k < JUMP_WAYS; k++) // the next pointer of each not yet final
                w[k] = (v[k] & PTR_FINAL) == 0u && v[k] - lo < n ? ptr.v[g_ptr_base + v[k] - lo] : v[k];
            [[unroll]] for (uint k = 0u; k < JUMP_WAYS; k++) {
                // Not final and outside the batch, or final and before the chunk or past the batch: only a
                // failed walk leaves it (the image's memory as a frame before left it). Judged here, where
                // wide_round makes it the workgroup's verdict; the last round, which changes nothing, sees
                // every pointer final.
                uint at = v[k] & ~PTR_FINAL;
                bool inside = v[k] - lo < n, source = at >= g_chunk_lo && at < hi;
                bad = bad || ((v[k] & PTR_FINAL) == 0u ? !inside : x0 + k * lanes < hi && !source);
                if ((v[k] & PTR_FINAL) == 0u && inside) {
                    ptr.v[g_ptr_base + x0 + k * lanes - lo] = w[k];
                    changed = true;
                }
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
    PHASE_END(PH_JUMP);
    Bytes dst = Bytes(pc.unpacked);
    for (uint x0 = lo + lane; x0 < hi && !bad; x0 += JUMP_WAYS * lanes) {
        g_used++;
        uint p[JUMP_WAYS];
        uint8_t b[JUMP_WAYS];
        [[unroll]] for (uint k = 0u; k < JUMP_WAYS; k++) {
            uint x = x0 + k * lanes;
            p[k] = x < hi ? ptr.v[g_ptr_base + x - lo] & ~PTR_FINAL : x;
            // The rounds judged every pointer; one out of range here can only be memory a failed walk left
            // after the verdict, and is skipped, not judged: the verdict must stay the workgroup's.
            if (p[k] < g_chunk_lo || p[k] >= hi)
                p[k] = x;
        }
        [[unroll]] for (uint k = 0u; k < JUMP_WAYS; k++)
            b[k] = p[k] != x0 + k * lanes ? dst.v[p[k]] : uint8_t(0);
        [[unroll]] for (uint k = 0u; k < JUMP_WAYS; k++)
            if (p[k] != x0 + k * lanes)
                dst.v[x0 + k * lanes] = b[k];
    }
    memoryBarrierBuffer();
    barrier();
    PHASE_END(PH_COPY);
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
    PHASE_END(PH_FOLLOW);
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
    PHASE_END(PH_COUNT);
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
        PHASE_END(PH_WALK);
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
        PHASE_END(PH_REST);
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
        PHASE_END(PH_HEADER);
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
    g_ptr_base = table.v[e + 4u] * pc.width * image_words();
    g_batch = table.v[e + 5u] * pc.width * image_words();
    g_fill_work = 0u;
#ifdef HP_WIDE_PHASES
    g_clock_at = clock2x32ARB().x;
    for (int k = 0; k < 8; k++)
        g_phase[k] = 0u;
#endif
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
    PHASE_END(PH_REST);
    if (lane == 0u) {
        table.v[e + 6u] = verdict;
#ifdef HP_WIDE_PHASES
        for (uint k = 0u; k < 8u; k++) // cycles
            table.v[e + 8u + k] = g_phase[k];
#else
        table.v[e + 8u] = w_chains;
        table.v[e + 9u] = g_stat_rounds;
        table.v[e + 10u] = g_stat_windows;
        table.v[e + 11u] = g_stat_blocks;
        table.v[e + 12u] = g_stat_far_start;
        table.v[e + 13u] = g_stat_starts_past16;
#endif
    }
}


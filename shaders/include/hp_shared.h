/* Constants and buffer layouts shared by the GLSL shaders and the C code (host set-up and the CPU
 * reference in the tests), so the two paths cannot drift. Only #define lines and comments: this file is
 * included by both languages. In GLSL an unsuffixed literal is a float; in C it is a double, and C code
 * that must match the GPU bit for bit casts it to float (both round to nearest). */
#ifndef HP_SHARED_H
#define HP_SHARED_H

/* Relative luminance Y: the middle row of the full-precision Rec.709/D65 RGB->XYZ matrix
 * (shared/reference/algorithms.md 2.1, DECISIONS.md 2). Negative channels are clamped to 0 first. */
#define HP_LUMA_R 0.2126390059
#define HP_LUMA_G 0.7151686788
#define HP_LUMA_B 0.0721923154

/* Log-average delta: exp(mean(ln(delta + Y))), delta = 1e-5 as in Reinhard's own code
 * (pfstools tmo_reinhard02.cpp log_average(); DECISIONS.md 3). */
#define HP_LOG_AVG_DELTA 1e-5

/* Luminance histogram (DECISIONS.md 4, algorithms.md 1.4): 256 bins of log2 Y over [min, max].
 * Bin 0 holds Y < 2^min; bins 1..255 follow bin = uint(t * 254 + 1), t = clamp01((log2 Y - min) / range).
 * The GPU does not trust its own log2 at the bin edges: edge k (k = 1..255) is the float nearest to
 * 2^(min + (k - 1) * range / 254), computed once on the host in double, and a pixel belongs to the
 * highest bin whose edge is <= its fp32 luminance. That makes counts exact and identical on every device
 * and in the CPU reference. */
#define HP_HIST_BINS 256
#define HP_HIST_DEFAULT_MIN_LOG2 (-16.0)
#define HP_HIST_DEFAULT_MAX_LOG2 16.0

/* Reduction launch shape. HP_REDUCE_MAX_GROUPS bounds the partials that the last workgroup (single
 * dispatch) or the second pass (two-pass) combines: beyond it each thread loops over the frame
 * (grid-stride), which keeps the tail of the reduction short on 8K frames. */
#define HP_REDUCE_MAX_GROUPS 2048

/* Stats buffer (lum_stats), std430, byte offsets. Written by the reduction's last workgroup, read by
 * later stages on the GPU and copied back for the response.
 *   off  type   name
 *     0  uint   finite_count      pixels whose channels are all finite
 *     4  uint   nonfinite_count   pixels with a NaN or infinite channel (excluded, drawn black)
 *     8  float  min_y             over finite pixels; 0 when there are none
 *    12  float  max_y
 *    16  float  sum_log_hi        sum of ln(delta + Y) as an unevaluated float pair (hi + lo):
 *    20  float  sum_log_lo          about 48 bits, enough for 1e-4 on a 16384^2 frame (DECISIONS 3)
 *    24  float  sum_y_hi          sum of Y, likewise
 *    28  float  sum_y_lo
 *    32  float  log_average       exp(sum_log / finite_count), fp32, for later GPU stages
 *    36  float  mean_y
 *    40  float  hist_min_log2     the histogram range these counts were made with
 *    44  float  hist_max_log2
 *    48  uint   hist[256]         bin counts
 *  1072                           size */
#define HP_STATS_OFF_HIST 48
#define HP_STATS_SIZE 1072

/* Reduction scratch buffer (reduce_scratch), std430, byte offsets. The counter and the histogram
 * accumulators reset themselves: whoever combines the partials (the last workgroup, or the two-pass
 * second dispatch) moves the counts to lum_stats and leaves zeros, so a frame needs no clearing commands
 * (and no pipeline bubble for them) before its dispatch. hp_reduce_init_scratch() zeroes them once.
 *     0  uint   arrival_counter   single dispatch: workgroups that finished; the last resets it to 0
 *    16  float  hist_edges[256]   edge[k], k = 1..255 (edge[0] unused); uploaded when the range changes
 *  1040  uint   hist_accum[256]   every workgroup's counts, by global atomics
 *  2064  Partial partials[]       one per workgroup: sum_log, sum_y, min_y, max_y, nonfinite, 3 x pad */
#define HP_SCRATCH_OFF_EDGES 16
#define HP_SCRATCH_OFF_HIST 1040
#define HP_SCRATCH_OFF_PARTIALS 2064
#define HP_SCRATCH_PARTIAL_SIZE 32

#endif

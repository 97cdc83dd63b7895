/* The CPU reference: every GPU stage again as plain C, in double precision wherever the GPU's choice of
 * precision is not itself the definition. The tests compare the GPU against it; the daemon may use it to
 * re-check a suspicious frame. It shares its constants with the shaders (shaders/include/hp_shared.h). */
#ifndef HP_CPU_REFERENCE_H
#define HP_CPU_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "pipeline/reduce.h"

/* IEEE half to float, exact (every half is a float). Imath's half does this too, but it is C++. */
float hp_half_to_float(uint16_t h);
/* Float to IEEE half, round to nearest even, overflow to infinity, NaN kept NaN. */
uint16_t hp_float_to_half(float f);

/* Y of one pixel exactly as the GPU computes it: negative channels clamped to 0, then
 * ((R*r + G*g) + B*b) in fp32 with no fused multiply-add. Returns false when the pixel is excluded
 * (a NaN or infinite colour channel, or Y overflowing to infinity). */
bool hp_cpu_luminance(const float rgba[4], float *y);

/* Reads pixel i of a tightly packed RGBA frame as floats. */
void hp_cpu_load_pixel(const void *pixels, hp_pixel_format format, uint64_t i, float rgba[4]);

/* The whole reduction (DECISIONS.md 2-4): sums in double, min/max over the fp32 Y, and the histogram by
 * binary search over the fp32 edges of hp_reduce_hist_edges(). */
void hp_cpu_reduce(const void *pixels, hp_pixel_format format, uint64_t count, double hist_min_log2,
                   double hist_max_log2, hp_lum_stats *out);

#endif

/* CPU reference of the luminance reduction (pipeline/cpu_reference.h). */
#include <math.h>
#include <string.h>

#include "hp_shared.h"
#include "pipeline/cpu_reference.h"

float hp_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) { /* infinity or NaN */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) { /* normal */
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) { /* zero */
        bits = sign;
    } else { /* subnormal: value = man * 2^-24, exact in float */
        float v = (float)man * 0x1p-24f;
        memcpy(&bits, &v, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t hp_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return sign | 0x7e00;
    if (ax >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return sign | 0x7c00;
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero, rounded to even */
        float a;
        memcpy(&a, &ax, 4);
        float scaled = a * 0x1p24f; /* exact: multiples of 2^-24 become integers */
        return sign | (uint16_t)nearbyintf(scaled);
    }
    uint32_t mant_round = ax + 0xfffu + ((ax >> 13) & 1u); /* round to nearest, ties to even */
    return sign | (uint16_t)((mant_round - 0x38000000u) >> 13);
}

bool hp_cpu_luminance(const float c[4], float *y)
{
    static const float rec709[3] = HP_REDUCE_LUMA_REC709;
    return hp_cpu_luminance_row(c, rec709, y);
}

bool hp_cpu_luminance_row(const float c[4], const float luma[3], float *y)
{
    for (int i = 0; i < 3; i++)
        if (!isfinite(c[i]))
            return false;
    float r = c[0] > 0.0f ? c[0] : 0.0f;
    float g = c[1] > 0.0f ? c[1] : 0.0f;
    float b = c[2] > 0.0f ? c[2] : 0.0f;
    /* Built with -ffp-contract=off: three roundings, in this order, as the shader's `precise`. */
    float v = luma[0] * r + luma[1] * g;
    v = v + luma[2] * b;
    v = v > 0.0f ? v : 0.0f; /* a negative weight (AP0's blue) can make Y negative: black (reduce.comp) */
    if (isinf(v))
        return false;
    *y = v;
    return true;
}

void hp_cpu_load_pixel(const void *pixels, hp_pixel_format format, uint64_t i, float rgba[4])
{
    if (format == HP_PIXEL_RGBA16F) {
        uint16_t h[4];
        memcpy(h, (const uint8_t *)pixels + i * 8, 8);
        for (int c = 0; c < 4; c++)
            rgba[c] = hp_half_to_float(h[c]);
    } else {
        memcpy(rgba, (const uint8_t *)pixels + i * 16, 16);
    }
}

void hp_cpu_store_pixel(void *pixels, hp_pixel_format format, uint64_t i, const float rgba[4])
{
    if (format == HP_PIXEL_RGBA16F) {
        uint16_t h[4];
        for (int c = 0; c < 4; c++)
            h[c] = hp_float_to_half(rgba[c]);
        memcpy((uint8_t *)pixels + i * 8, h, 8);
    } else {
        memcpy((uint8_t *)pixels + i * 16, rgba, 16);
    }
}

/* The highest k in 1..255 with edges[k] <= y, or 0 when y < edges[1]. */
static unsigned hist_bin(const float edges[256], float y)
{
    if (y < edges[1])
        return 0;
    unsigned lo = 1, hi = 255; /* invariant: edges[lo] <= y */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (edges[mid] <= y)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

void hp_cpu_reduce(const void *pixels, hp_pixel_format format, uint64_t count, double hist_min_log2,
                   double hist_max_log2, hp_lum_stats *out)
{
    static const float rec709[3] = HP_REDUCE_LUMA_REC709;
    hp_cpu_reduce_row(pixels, format, count, hist_min_log2, hist_max_log2, rec709, out);
}

void hp_cpu_reduce_row(const void *pixels, hp_pixel_format format, uint64_t count, double hist_min_log2,
                       double hist_max_log2, const float luma[3], hp_lum_stats *out)
{
    float edges[256];
    hp_reduce_hist_edges(hist_min_log2, hist_max_log2, edges);
    memset(out, 0, sizeof(*out));
    out->pixels = count;
    out->hist_min_log2 = hist_min_log2;
    out->hist_max_log2 = hist_max_log2;
    double sum_log = 0.0, sum_y = 0.0;
    float mn = INFINITY, mx = -INFINITY;
    for (uint64_t i = 0; i < count; i++) {
        float rgba[4], y;
        hp_cpu_load_pixel(pixels, format, i, rgba);
        if (!hp_cpu_luminance_row(rgba, luma, &y)) {
            out->nonfinite_pixels++;
            continue;
        }
        out->finite_pixels++;
        sum_log += log(HP_LOG_AVG_DELTA + (double)y);
        sum_y += y;
        mn = y < mn ? y : mn;
        mx = y > mx ? y : mx;
        out->histogram[hist_bin(edges, y)]++;
    }
    if (out->finite_pixels) {
        out->log_average = exp(sum_log / (double)out->finite_pixels);
        out->mean = sum_y / (double)out->finite_pixels;
        out->min = mn;
        out->max = mx;
    }
}

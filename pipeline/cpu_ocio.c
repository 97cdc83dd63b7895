/* The OCIO stage on the CPU: shaders/ocio_display.comp's steps in double around OCIO's own CPU processor, the
 * reference the tests hold the GPU to and tools/cpu_render's path for ocio.* (pipeline/cpu_reference.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/cpu_reference.h"

/* What the shader does before OCIO: a non-finite pixel black (DECISIONS.md 2), the others times the
 * exposure's scale, negative channels kept; alpha 1 into the transform. */
static void expose(const float *in, size_t n, double scale, float *out, bool *excluded)
{
    for (size_t i = 0; i < n; i++) {
        const float *c = in + 4 * i;
        excluded[i] = !isfinite(c[0]) || !isfinite(c[1]) || !isfinite(c[2]);
        for (int k = 0; k < 3; k++)
            out[4 * i + k] = excluded[i] ? 0.0f : (float)((double)c[k] * scale);
        out[4 * i + 3] = 1.0f;
    }
}

/* One channel after OCIO: a NaN is 0 (the shader's rule), then dither and quantization as the tone pass's. */
static double quantize(float v, double steps, double noise)
{
    double x = isnan(v) ? 0.0 : (double)v;
    return fmin(fmax(floor(x * steps + 0.5 + noise), 0.0), steps);
}

hp_code hp_cpu_ocio(const hp_ocio_cpu *cpu, const float *rgba, uint32_t width, uint32_t height, double scale,
                    bool dither, uint32_t bits, void *out, hp_err *err)
{
    size_t n = (size_t)width * height;
    float *px = malloc(n * 4 * sizeof(float));
    bool *excluded = malloc(n);
    if (!px || !excluded) {
        free(px);
        free(excluded);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "cpu ocio: %zu pixels", n);
    }
    expose(rgba, n, (double)(float)scale, px, excluded);
    hp_ocio_cpu_apply(cpu, px, n);
    double steps = bits == 16 ? 65535.0 : 255.0;
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)(i % width), y = (uint32_t)(i / width);
        double noise = dither ? (double)hp_dither_noise(x, y) : 0.0;
        float a = rgba[4 * i + 3];
        double alpha = excluded[i] || isnan(a) ? 1.0 : fmin(fmax((double)a, 0.0), 1.0);
        double q[4] = {quantize(px[4 * i], steps, noise), quantize(px[4 * i + 1], steps, noise),
                       quantize(px[4 * i + 2], steps, noise), floor(alpha * steps + 0.5)};
        for (int k = 0; k < 4; k++) {
            if (bits == 16)
                ((uint16_t *)out)[4 * i + k] = (uint16_t)q[k];
            else
                ((uint8_t *)out)[4 * i + k] = (uint8_t)q[k];
        }
    }
    free(px);
    free(excluded);
    return HP_OK;
}

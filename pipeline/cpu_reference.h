/* The CPU reference: every GPU stage again as plain C, in double precision wherever the GPU's choice of
 * precision is not itself the definition. The tests compare the GPU against it; the daemon may use it to
 * re-check a suspicious frame. It shares its constants with the shaders (shaders/include/hp_shared.h). */
#ifndef HP_CPU_REFERENCE_H
#define HP_CPU_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "pipeline/dof.h"
#include "pipeline/params.h"
#include "pipeline/reduce.h"
#include "pipeline/tone.h"

/* IEEE half to float, exact (every half is a float). Imath's half does this too, but it is C++. */
float hp_half_to_float(uint16_t h);
/* Float to IEEE half, round to nearest even, overflow to infinity, NaN kept NaN. */
uint16_t hp_float_to_half(float f);

/* Y of one pixel exactly as the GPU computes it: negative channels clamped to 0, then
 * ((R*r + G*g) + B*b) in fp32 with no fused multiply-add. Returns false when the pixel is excluded
 * (a NaN or infinite colour channel, or Y overflowing to infinity). */
bool hp_cpu_luminance(const float rgba[4], float *y);
/* The same with the Y row of another RGB space (hp_reduce_params.luma). */
bool hp_cpu_luminance_row(const float rgba[4], const float luma[3], float *y);

/* Reads pixel i of a tightly packed RGBA frame as floats. */
void hp_cpu_load_pixel(const void *pixels, hp_pixel_format format, uint64_t i, float rgba[4]);
/* Writes pixel i of a tightly packed RGBA frame (halves rounded to nearest even). */
void hp_cpu_store_pixel(void *pixels, hp_pixel_format format, uint64_t i, const float rgba[4]);

/* The whole reduction (DECISIONS.md 2-4): sums in double, min/max over the fp32 Y, and the histogram by
 * binary search over the fp32 edges of hp_reduce_hist_edges(). */
void hp_cpu_reduce(const void *pixels, hp_pixel_format format, uint64_t count, double hist_min_log2,
                   double hist_max_log2, hp_lum_stats *out);
/* The same with the Y row of another RGB space (hp_reduce_params.luma). */
void hp_cpu_reduce_row(const void *pixels, hp_pixel_format format, uint64_t count, double hist_min_log2,
                       double hist_max_log2, const float luma[3], hp_lum_stats *out);

/* --- Tone stages (pipeline/cpu_tone.c) ------------------------------------------------------------ */

/* RGB <-> CIE Yxy with the full-precision matrices; black takes D65's chromaticity (DECISIONS.md 5). */
void hp_cpu_rgb_to_Yxy(const double rgb[3], double Yxy[3]);
void hp_cpu_Yxy_to_rgb(const double Yxy[3], double rgb[3]);
/* The same in the working space of `output` (its RGB <-> XYZ, issue 17). */
void hp_cpu_rgb_to_Yxy_in(hp_output_colorspace output, const double rgb[3], double Yxy[3]);
void hp_cpu_Yxy_to_rgb_in(hp_output_colorspace output, const double Yxy[3], double rgb[3]);

/* A Rec.709 RGBA32F frame of n pixels written in another space's primaries (the inverse of that space's
 * hp_input_color matrix, in double): how the tests and the gallery make frames in ACEScg. False when the
 * space's matrix is not invertible. out may not alias rgba. */
bool hp_cpu_frame_from_rec709(const float *rgba, size_t n, hp_colorspace space, float *out);
/* A frame's pixel as the stages that read the frame see it (shaders/include/input_color.glsl): converted in
 * place to the working space of `output` (linear Rec.709 for sRGB) and into its gamut from below, luminance
 * and hue kept, in double and rounded to fp32, when the colour asks for it and the channels are finite. */
void hp_cpu_input_color(const hp_input_color *c, hp_output_colorspace output, float rgba[4]);

/* The exposure stage from the statistics and the request (shaders/exposure.comp). */
void hp_cpu_exposure(const hp_lum_stats *stats, const hp_params *p, hp_tone_state *ts);

/* A luminance curve at exposed luminance L, unclamped (operators linear ... uchimura). */
double hp_cpu_curve_luminance(const hp_tonemap_params *t, const hp_tone_state *ts, double L);
/* An RGB operator (aces_hill, agx, khronos_neutral) on exposed linear Rec.709. */
void hp_cpu_curve_rgb(hp_tone_operator op, const double in[3], double out[3]);
/* The same on the working RGB of `output` (tone.glsl's aces_hill_in, agx_in; pipeline/colorspace.h
 * hp_working_space): hp_cpu_curve_rgb itself for sRGB output. */
void hp_cpu_curve_rgb_in(hp_tone_operator op, hp_output_colorspace output, const double in[3], double out[3]);
double hp_cpu_agx_sigmoid(double t);
double hp_cpu_kwon_gamma(double lan);
/* The dither noise of pixel (x, y), bit-identical to the shader's. */
float hp_dither_noise(uint32_t x, uint32_t y);

/* The OCIO stage (shaders/ocio_display.comp) on the CPU, pipeline/cpu_ocio.c: a frame of RGBA floats (as the
 * GPU reads them: a half frame's values as halves) times the exposure's scale, through OCIO's CPU processor of
 * the same transform, quantized to `bits` (8 or 16) into RGBA8 or RGBA16 (host order) as the GPU writes them. */
hp_code hp_cpu_ocio(const hp_ocio_cpu *cpu, const float *rgba, uint32_t width, uint32_t height, double scale,
                    bool dither, uint32_t bits, void *out, hp_err *err);

/* One pixel through the tone pass: display-encoded RGB in [0, 1] and alpha, before quantization.
 * lan < 0: the pixel's own tone-mapped luminance is the adaptation luminance. *lum gets that luminance. */
void hp_cpu_tone_pixel(const float rgba[4], const hp_tone_state *ts, const hp_params *p, double lan, double out[4],
                       double *lum);
/* The blur of shaders/blur.comp in double. */
void hp_cpu_blur(const double *src, double *dst, uint32_t width, uint32_t height, uint32_t radius, bool vertical);
/* A frame through the whole CPU reference as the daemon runs it: the reduction with the frame's own Y row
 * (hp_input_color_luma of p->color for p->output.colorspace), then hp_cpu_tone_frame. *stats gets the
 * reduction's statistics. */
hp_code hp_cpu_render_frame(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                            const hp_params *p, hp_lum_stats *stats, hp_tone_state *ts, void *out);
/* A whole frame, quantized as the GPU does (RGBA8, or RGBA16 when output.bit_depth is 16). */
hp_code hp_cpu_tone_frame(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                          const hp_lum_stats *stats, const hp_params *p, hp_tone_state *ts, void *out);
/* A whole frame as the tone pass's Y'CbCr 4:2:0 planes (hp_shared.h HP_YUV_*: BT.601 studio range, Y'
 * dithered as the RGB output, Cb and Cr from each 2 x 2 block's mean R'G'B'), padding included; out holds
 * HP_YUV_BYTES(width, height, alpha). */
hp_code hp_cpu_tone_frame_yuv420(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height,
                                 const hp_lum_stats *stats, const hp_params *p, bool alpha, hp_tone_state *ts,
                                 uint8_t *out);

/* --- Depth of field and bokeh (pipeline/cpu_dof.c) ------------------------------------------------ */

typedef struct hp_cpu_dof_result {
    uint32_t sprites_wanted; /* pixels that qualified as bokeh sprites */
    uint32_t sprites_drawn;  /* at most the budget */
} hp_cpu_dof_result;

/* The n-gon radius of shaders/include/dof.glsl in double (algorithms.md 9.5's oracle). */
double hp_cpu_ngon(double theta, double n);

/* The whole DOF stage (pipeline/dof.h) in double: the frame, its depth (width * height floats in the
 * file's units), the settings, the exposure scale (for the bokeh threshold) and the frame's largest
 * luminance. out: width * height RGBA, scene-linear, what the tone pass then reads. Past the sprite
 * budget the GPU keeps whichever pixels its atomics reached first; this keeps the first in raster order
 * of 2 x 2 blocks, so images agree only within the budget. */
hp_code hp_cpu_dof(const void *pixels, hp_pixel_format format, uint32_t width, uint32_t height, const float *depth,
                   const hp_dof_settings *s, double exposure_scale, double max_y, double *out,
                   hp_cpu_dof_result *result);

#endif

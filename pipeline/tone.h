/* The tone stages: exposure (one workgroup, from the luminance statistics), the optional blur of the
 * tone-mapped luminance for a local adaptation (gamma.radius > 0), and the fused tone pass (Yxy, curve,
 * gamut, display encoding, dither, quantize). Shaders: shaders/exposure.comp, tonemap.comp, blur.comp. */
#ifndef HP_TONE_H
#define HP_TONE_H

#include "hp_shared.h"
#include "pipeline/dof.h"
#include "pipeline/gpu.h"
#include "pipeline/params.h"
#include "pipeline/reduce.h"

/* What the exposure stage decided, as the host sees it (tone_state). */
typedef struct hp_tone_state {
    double scale;               /* exposure multiplier applied to the scene-linear frame */
    double key;                 /* the key used (given, or estimated when exposure.key is "auto") */
    double adaptation;          /* the adaptation luminance the scale was derived from (frame units) */
    double white;               /* reinhard_extended's L_white, exposed units */
    double exposed_max;         /* max luminance after exposure */
    double exposed_log_average; /* log-average after exposure */
    double p01, p99;            /* 1st and 99th percentile luminance (lower bin edges), frame units */
    double hist_mean;           /* percentile-clipped histogram mean, frame units */
    double drago_norm, drago_inv_lwa, drago_inv_lsmax, drago_bias_exp; /* Drago's normalisers */
    bool translucent;           /* some alpha the tone pass wrote is below the maximum (255 or 65535) */
} hp_tone_state;

void hp_tone_decode_state(const void *state_buffer, hp_tone_state *out);

/* The request's tone parameters as the tone_params words (hp_shared.h), with the curve constants that
 * depend only on parameters (Lottes' b and c, Uchimura's l0, S0, S1, C2, CP) solved in double. */
void hp_tone_pack_params(const hp_params *p, uint32_t words[HP_TONE_PARAMS_WORDS]);

typedef enum hp_tone_output {
    HP_TONE_OUT_LUMINANCE = 0, /* float per pixel: the tone-mapped luminance (diagnostics, blur input) */
    HP_TONE_OUT_RGBA8 = 1,
    HP_TONE_OUT_RGBA16 = 2,
    HP_TONE_OUT_YUV420 = 3,    /* Y'CbCr 4:2:0 planes for libwebp, 8 bits (hp_shared.h: HP_YUV_*) */
} hp_tone_output;

/* Bytes per pixel of the per-pixel kinds (not YUV420). */
size_t hp_tone_output_pixel_size(hp_tone_output kind);
/* Bytes of a width x height output of this kind (alpha: the YUV420 alpha plane). */
size_t hp_tone_output_bytes(hp_tone_output kind, uint32_t width, uint32_t height, bool alpha);
/* The most any kind takes: what an output buffer for this size is allocated with. */
size_t hp_tone_output_max_bytes(uint32_t width, uint32_t height);

typedef struct hp_tone_io {
    VkDeviceAddress pixels; /* the frame (as for the reduction) */
    hp_pixel_format format;
    uint32_t width, height;
    VkDeviceAddress stats;  /* lum_stats from the reduction */
    VkDeviceAddress params; /* tone_params, HP_TONE_PARAMS_WORDS words, already written */
    VkDeviceAddress state;  /* tone_state, HP_TONE_STATE_WORDS words */
    VkDeviceAddress output; /* hp_tone_output_bytes(kind, width, height, yuv_alpha) bytes */
    hp_tone_output kind;
    bool yuv_alpha;         /* YUV420: write the alpha plane too */
    uint32_t gamma_radius;  /* > 0: lan_a and lan_b (width * height floats each) hold the local adaptation */
    VkDeviceAddress lan_a, lan_b;
    /* Depth of field, fused: when dof is not NULL each pixel is first composited from its fields (the
     * DOF stage's hp_dof_record_fields and _bokeh ran before). */
    const hp_dof_frame *dof;
    bool dof_sat, dof_bokeh;
    bool convert_input; /* convert the pixels to the working space as they are read (tone_state's matrix): the
                         * frame is in other primaries, and not the DOF composite's image, converted already */
    hp_output_colorspace colorspace; /* whose primaries are the working space (output.colorspace; 0: sRGB) */
} hp_tone_io;

typedef struct hp_tone hp_tone;

hp_code hp_tone_create(hp_gpu *gpu, hp_tone **out, hp_err *err);
void hp_tone_destroy(hp_tone **tone);
/* Driver statistics of a tone pass pipeline (see hp_compute_statistics): benchmarks print them. */
void hp_tone_statistics(const hp_tone *tone, hp_pixel_format format, hp_tone_output kind, bool dof, char *buf,
                        size_t len);

/* Records exposure, then (radius > 0) luminance + blur, then the tone pass, with the barriers between
 * them. The caller makes stats and params visible before, and the output visible after. */
void hp_tone_record(hp_tone *tone, VkCommandBuffer cmd, const hp_tone_io *io);
/* The two halves of hp_tone_record, for timing them apart: exposure (ends with a barrier), then the rest. */
void hp_tone_record_exposure(hp_tone *tone, VkCommandBuffer cmd, const hp_tone_io *io);
void hp_tone_record_map(hp_tone *tone, VkCommandBuffer cmd, const hp_tone_io *io);

#endif

/* Depth of field and bokeh (issue 5; DECISIONS.md 1, 8, 9; algorithms.md 5-7). On the scene-linear frame
 * after the luminance reduction and the exposure stage, before the tone pass, which then reads this
 * stage's output instead of the frame. The frame is not multiplied by the exposure here: every blur is
 * linear, so blurring the frame and then exposing it is the same as exposing it first; only the bokeh
 * threshold needs the exposed value, and reads the exposure scale the exposure stage left on the GPU.
 * The tone pass reads the frame, not a composited copy: it composites each pixel itself.
 *
 * Passes (shaders/):
 *   dof_setup      CoC per pixel, bokeh sprites appended, half-resolution colour and CoC, tile maxima
 *   dof_tiles      the near CoC dilated over the tile neighbourhood (gather); one invocation also
 *                  writes the splat's indirect dispatch from the sprite count (bokeh_args.glsl; with
 *                  the SAT, its rows pass does)
 *   dof_gather     near and far fields at half resolution (dof.method = gather, the default)
 *   dof_sat        rows, columns, query: a box blur of each pixel's CoC (dof.method = sat)
 *   bokeh_splat    one workgroup per sprite into an accumulation buffer (bokeh on)
 *   composite      far, then near by its coverage, plus bokeh, at full resolution: inside the tone pass
 *                  (shaders/include/dof_composite.glsl), or dof_composite.comp for an RGBA32F image
 * pipeline/cpu_dof.c is the same in double precision. */
#ifndef HP_DOF_H_PIPELINE
#define HP_DOF_H_PIPELINE

#include "hp_dof.h"
#include "pipeline/gpu.h"
#include "pipeline/params.h"
#include "pipeline/reduce.h"

typedef enum hp_dof_method {
    HP_DOF_GATHER = 0,
    HP_DOF_SAT = 1,
} hp_dof_method;

/* What the passes need, from the request's dof and bokeh parameters. */
typedef struct hp_dof_settings {
    hp_dof_method method;
    double focal_length_mm;
    double f_stop;
    double focus_distance_m;
    double sensor_width_mm;  /* spans the frame's width (DECISIONS.md 8) */
    double depth_scale;      /* metres per depth unit */
    double max_coc_px;       /* radius, frame pixels, <= HP_DOF_MAX_COC_PX */
    bool bokeh;
    double bokeh_threshold;  /* exposed luminance */
    double bokeh_min_coc_px; /* radius */
    uint32_t blades;         /* 0: a circle; else 3..16 */
    double rotation_deg;
    double squeeze;          /* anamorphic: sprites this many times taller than wide */
    uint32_t max_sprites;    /* <= HP_BOKEH_MAX_SPRITES */
    /* The frame's colour (the CPU reference converts as it reads the frame; the GPU stages read it from
     * tone_state): every DOF stage works in the working space of `output` (linear Rec.709 for sRGB), and
     * weighs luminance by its Y row (Rec.709's HP_LUMA_* for sRGB). */
    hp_input_color color;
    hp_output_colorspace output;
} hp_dof_settings;

/* The settings a request's dof and bokeh parameters ask for. The lens gives what is "auto"; an automatic
 * focus distance is read from the depth (hp_dof_auto_focus), so depth may be NULL only when the focus is
 * given. */
void hp_dof_settings_from_params(const hp_params *p, const float *depth, uint32_t width, uint32_t height,
                                 hp_dof_settings *out);
/* The distance an autofocus would pick: the median depth (times depth_scale) of the frame's middle tenth
 * in each direction, the background (HP_DOF_DEPTH_BACKGROUND, NaN) and depths <= 0 left out; 10 m when
 * nothing there has a depth. */
double hp_dof_auto_focus(const float *depth, uint32_t width, uint32_t height, double depth_scale);

/* The CoC radius in pixels of a frame `width` pixels wide at infinity: the k of dof.glsl's
 * k (1 - S1 / z) (algorithms.md 5.1: c(inf) = f^2 / (N (S1 - f)), over the sensor width, halved). */
double hp_dof_coc_k(const hp_dof_settings *s, uint32_t width);
/* The signed CoC radius in pixels of a depth sample, in double: the CPU reference's dof_coc(). */
double hp_dof_coc(const hp_dof_settings *s, uint32_t width, double depth);

/* The gather's aperture: for each tap, the polygon's radius in its direction (bokeh.blades rotated by
 * bokeh.rotation_deg; 1 for a circle), as the floats the GPU reads. Returns pi over the polygon's area
 * at circumradius 1, which scales the near field's coverage (1 for a circle). */
double hp_dof_aperture(const hp_dof_settings *s, float out[HP_DOF_TAPS]);

/* The unit directions of the gather's taps (hp_dof.h), in double and as the floats the GPU reads. */
void hp_dof_tap_directions(float out[HP_DOF_TAPS][2]);

/* Buffers for one frame size; made on the first DOF frame of that size, the SAT table and the bokeh
 * accumulation on the first frame that needs them. */
typedef struct hp_dof_frame {
    uint32_t width, height;
    hp_buffer depth;             /* frame-sized floats, uploaded by the caller */
    hp_buffer coc;               /* frame-sized floats */
    hp_buffer half_;             /* vec4 per half-resolution pixel */
    hp_buffer mask;              /* uint per half-resolution pixel */
    hp_buffer quarter;           /* vec4 per quarter-resolution pixel (large blurs) */
    hp_buffer tiles, dilated;    /* vec2 per tile */
    hp_buffer near, far;         /* RGBA16F per half-resolution pixel, exposed (dof.glsl dof_pack_field) */
    hp_buffer table;             /* 3 x uint64 per half-resolution pixel (sat) */
    hp_buffer accum;             /* RGB + unused per half-resolution pixel (bokeh), cleared by the setup pass */
    hp_buffer output;            /* RGBA32F composite, made only for output_dof (tests, diagnostics) */
} hp_dof_frame;

typedef struct hp_dof hp_dof;

hp_code hp_dof_create(hp_gpu *gpu, hp_dof **out, hp_err *err);
void hp_dof_destroy(hp_dof **dof);

/* Makes `frame` ready for a frame of this size with these needs (allocating only what is missing);
 * output: the composite as an image of its own (hp_dof_record_composite). */
hp_code hp_dof_frame_prepare(hp_dof *dof, hp_dof_frame *frame, uint32_t width, uint32_t height, bool sat, bool bokeh,
                             bool output, hp_err *err);
void hp_dof_frame_free(hp_dof *dof, hp_dof_frame *frame);
uint64_t hp_dof_frame_bytes(const hp_dof_frame *frame);

typedef struct hp_dof_io {
    VkDeviceAddress pixels; /* the frame */
    hp_pixel_format format;
    VkDeviceAddress stats;  /* lum_stats (the SAT's fixed point follows max_y) */
    VkDeviceAddress state;  /* tone_state (the bokeh threshold is on exposed luminance) */
    hp_dof_frame *frame;    /* prepared, depth uploaded */
    /* Benchmarks: when set, a timestamp after each pass (hp_dof_detail_names), from detail_first on. */
    VkQueryPool detail_pool;
    uint32_t detail_first;
} hp_dof_io;

/* The passes timed apart when hp_dof_io.detail_pool is set, in timestamp order: fields, then bokeh. */
enum { HP_DOF_DETAIL_SETUP, HP_DOF_DETAIL_TILES_OR_ROWS, HP_DOF_DETAIL_GATHER_OR_COLS, HP_DOF_DETAIL_SAT_QUERY,
       HP_DOF_DETAIL_SPLAT, HP_DOF_DETAIL_COUNT };
const char *hp_dof_detail_name(uint32_t i, hp_dof_method method);

/* Records the stage: setup, then tiles and the gather (or the SAT's rows, columns and query), and the
 * bokeh splat beside them; ends with a barrier. Then the tone pass composites each pixel as it reads it
 * (hp_tone_io.dof), or, for tests and diagnostics, hp_dof_record_composite writes the composited frame to
 * frame->output as RGBA32F. hp_dof_record_reset must come first in the frame (below). With
 * io->detail_pool every pass is timed, the splat on its own. */
void hp_dof_record(hp_dof *dof, VkCommandBuffer cmd, const hp_dof_io *io, const hp_dof_settings *s);
/* Zeroes the sprite control words (a transfer command): recorded by the caller in every DOF frame before
 * a barrier from transfers to compute that it has anyway (the frame graph's upload), so that the counter
 * starts at 0 whatever became of earlier submissions, at the cost of no barrier of its own. */
void hp_dof_record_reset(hp_dof *dof, VkCommandBuffer cmd);
void hp_dof_record_composite(hp_dof *dof, VkCommandBuffer cmd, const hp_dof_io *io, const hp_dof_settings *s);

/* The sprite control words (hp_dof.h), for copying back: the response says how many sprites were
 * wanted and whether the budget cut them. */
const hp_buffer *hp_dof_sprites(const hp_dof *dof);

#endif

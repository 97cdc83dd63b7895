/* The frame graph: the resources of one frame, the stages recorded in order with a timestamp around
 * each, one submission, and the results read back.
 *
 * Resources are keyed by frame size and format and kept: the first frame of a size allocates its buffers
 * (staging, device input, stats, scratch, read-back) and every later frame of that size reuses them, so a
 * render farm posting frames of one shot makes no Vulkan allocation per request. A small cache of sizes
 * is kept; the least recently used one is freed when it overflows.
 *
 * Frames in flight: each of HP_FRAMES_IN_FLIGHT contexts has its command buffer, fence, timestamps and the
 * host side of every size (staging, read-back); the device buffers are shared, and the GPU runs the
 * frames in turn. What overlaps is the host's copies into one frame's staging and out of another's
 * read-back with the GPU's work.
 *
 * Threading: an hp_frame_graph is driven by one thread at a time (the daemon's GPU worker). */
#ifndef HP_FRAME_GRAPH_H
#define HP_FRAME_GRAPH_H

#include "pipeline/dof.h"
#include "pipeline/gpu.h"
#include "pipeline/ocio_stage.h"
#include "pipeline/params.h"
#include "pipeline/png_gpu.h"
#include "pipeline/reduce.h"
#include "pipeline/tone.h"

#define HP_MAX_STAGE_TIMINGS 16

/* Frames that can be in flight at once: with two, the caller begins and submits the next frame while the
 * GPU still runs the one before, then waits for that one and reads its image while the GPU runs the next. */
#define HP_FRAMES_IN_FLIGHT 2

typedef struct hp_stage_timing {
    const char *name; /* DECISIONS.md 10: upload, reduce, ..., download */
    double ms;        /* from timestamp queries, converted with timestampPeriod */
} hp_stage_timing;

typedef struct hp_frame_desc {
    uint32_t width, height; /* 1..16384 each */
    hp_pixel_format format;
} hp_frame_desc;

hp_code hp_frame_desc_check(const hp_frame_desc *desc, hp_err *err);

typedef struct hp_frame_params {
    hp_params params;      /* the request's parameters (pipeline/params.h) */
    bool analyze_only;     /* statistics only: no exposure, tone mapping or image (POST /v1/analyze) */
    bool output_luminance; /* diagnostics and tests: the image is the tone-mapped luminance as floats */
    bool dof;              /* depth of field (and bokeh when dof_settings.bokeh): needs a staged depth */
    hp_dof_settings dof_settings;
    bool detailed_timings; /* benchmarks: every DOF and bokeh pass timed apart ("dof.gather", ...) */
    bool output_dof;       /* diagnostics and tests: also the composited frame, before tone mapping (the
                            * composite then runs as a pass of its own instead of inside the tone pass) */
    bool yuv420;           /* an 8-bit image as Y'CbCr 4:2:0 planes (hp_shared.h: HP_YUV_*) instead of RGBA8:
                            * what lossy WebP encodes, converted on the GPU and read back at 1.5 bytes a pixel */
    bool yuv_alpha;        /* with yuv420: an alpha plane too */
    /* output.format png with output.png_encoder gpu (or auto on a device that runs pipeline/png_gpu): the
     * samples the PNG keeps, 3 (RGB) or 4 (RGBA), and with png_alpha_auto (output.alpha auto on a frame
     * with alpha, png_channels 4) 3 where the tone pass finds every alpha at its maximum: the passes read
     * its translucent word on the GPU (hp_png_gpu_io.alpha_auto), as the CPU's encoder reads it back. */
    uint32_t png_channels;
    bool png_alpha_auto;
    /* A studio's OCIO display/view (issue 34): the program, held by the caller from hp_ocio_stage_acquire
     * (for this frame's input format and RGBA8 or RGBA16) until the frame is done, takes the tone pass's
     * place after the exposure and the depth of field; NULL: the built-in operators. Not with yuv420 nor
     * output_luminance. */
    const hp_ocio_entry *ocio;
} hp_frame_params;

/* Every parameter at its schema default. */
void hp_frame_params_defaults(hp_frame_params *fp);

typedef struct hp_frame_result {
    hp_lum_stats stats;
    hp_tone_state tone;    /* zero when analyze_only */
    /* The image, tightly packed rows, valid until the next hp_frame_graph_begin: RGBA8, RGBA16 (host
     * byte order), with output_luminance one float per pixel, or with yuv420 the planes. NULL when
     * analyze_only. */
    const void *pixels;
    size_t pixel_size;     /* bytes per pixel: 4, 8 (or 4 for floats); 0 for yuv420 */
    size_t image_bytes;    /* bytes of the image */
    bool yuv420;           /* pixels are the Y'CbCr 4:2:0 planes */
    uint32_t width, height;
    bool dof_ran;
    const float *dof_pixels; /* output_dof: the composited scene-linear frame, RGBA32F; else NULL */
    uint32_t bokeh_wanted; /* pixels that qualified as sprites */
    uint32_t bokeh_drawn;  /* sprites drawn: less than wanted when the budget cut them */
    /* output.png_encoder gpu (or auto, taken): the image was filtered and deflated on the GPU and only the
     * table and the joined deflate stream came back, valid as pixels is (pixels is then NULL), laid out as
     * hp_png_gpu_host_layout says (room before and after the stream: hp_png_gpu_seal). */
    bool png_gpu;
    bool png_in_caller_memory; /* in the caller's image memory (hp_frame_host), which no later frame touches;
                                * else in the graph's, which the frame HP_FRAMES_IN_FLIGHT later reuses */
    hp_png_gpu_layout png_layout;
    const void *png_table;    /* png_layout.table_size bytes: hp_png_gpu_segment per segment */
    uint8_t *png_joined;      /* png_joined_bytes of raw deflate */
    size_t png_joined_bytes;
    hp_stage_timing timings[HP_MAX_STAGE_TIMINGS];
    uint32_t timing_count;
    double gpu_total_ms; /* first timestamp to last */
} hp_frame_result;

typedef struct hp_frame_graph hp_frame_graph;

/* Creates every stage's pipelines (through the gpu's pipeline cache). When this returns, the graph is
 * warm: no pipeline is created afterwards. */
hp_code hp_frame_graph_create(hp_gpu *gpu, hp_frame_graph **out, hp_err *err);
void hp_frame_graph_destroy(hp_frame_graph **graph);

/* Makes the resources for a frame of this size ready (allocating them only the first time) and returns
 * the mapped staging memory, width * height * hp_pixel_format_size() bytes of tightly packed RGBA rows,
 * for the caller to decode the frame straight into. Fails when HP_FRAMES_IN_FLIGHT frames are in flight. */
hp_code hp_frame_graph_begin(hp_frame_graph *graph, const hp_frame_desc *desc, void **pixels, hp_err *err);

/* The caller's own host memory for a frame (pipeline/host_pool.h), each NULL for the graph's: pixels
 * (HP_MEM_UPLOAD, the frame as hp_frame_graph_begin describes it) and depth (width * height floats) to
 * upload from, image (HP_MEM_READBACK, width * height * 8 bytes) to read the image back into. The GPU
 * copies straight from and into them, so no host copy is made; they must stay untouched until the
 * frame's hp_frame_graph_wait has returned. An image of kind HP_MEM_READBACK_SHADER at least
 * hp_frame_graph_image_bytes() also takes the PNG encoded on the GPU (hp_frame_result.png_in_caller_memory). */
typedef struct hp_frame_host {
    const hp_buffer *pixels, *depth, *image;
} hp_frame_host;

/* hp_frame_graph_begin with some or all of the host memory the caller's. *pixels (may be NULL when
 * own->pixels is given) is the graph's staging, or NULL when own->pixels is used. A depth given here
 * stands for hp_frame_graph_depth. */
/* The image memory a frame of this size needs for any output, PNG on the GPU's table and stream included. */
size_t hp_frame_graph_image_bytes(const hp_frame_graph *graph, uint32_t width, uint32_t height);

hp_code hp_frame_graph_begin_with(hp_frame_graph *graph, const hp_frame_desc *desc, const hp_frame_host *own,
                                  void **pixels, hp_err *err);

/* After hp_frame_graph_begin: the mapped staging memory for the frame's depth, width * height floats in
 * the file's units (allocated the first time a frame of this size has one). A frame run with
 * params->dof needs it. */
hp_code hp_frame_graph_depth(hp_frame_graph *graph, float **depth, hp_err *err);

/* The most parts of one frame's upload hp_frame_graph_upload_part submits (later calls leave the rest to
 * hp_frame_graph_submit). */
#define HP_FRAME_UPLOAD_PARTS 8

/* After begin, before submit: uploads the frame's bytes from where the last part ended up to `upto` (of
 * width * height * hp_pixel_format_size() bytes, rows in order) now, while the caller still writes the
 * rest, so that the frame's own upload copies only what is left. The bytes up to `upto` must be final.
 * Returns at once (nothing waits for the copy but the frame after it). */
hp_code hp_frame_graph_upload_part(hp_frame_graph *graph, size_t upto, hp_err *err);

/* A frame begun and given up (its submit failed, or the caller's did not come): waits for parts of its
 * upload still running, so that the caller may let go of the memory they read. Nothing to do, and no
 * wait, when no part is outstanding. */
void hp_frame_graph_abandon(hp_frame_graph *graph);

/* Records and submits the begun frame (upload, every stage, read-back) without waiting; *ticket names it
 * for hp_frame_graph_wait. Up to HP_FRAMES_IN_FLIGHT frames may be in flight: begin the next one while
 * the GPU runs this one, then wait for this one. The GPU runs them in order. */
hp_code hp_frame_graph_submit(hp_frame_graph *graph, const hp_frame_params *params, uint32_t *ticket, hp_err *err);
/* Waits for a submitted frame and reads its results back; out->pixels stays valid until that frame's
 * context is begun again (HP_FRAMES_IN_FLIGHT frames later), or, in the caller's image memory
 * (hp_frame_host), for as long as the caller keeps it. */
hp_code hp_frame_graph_wait(hp_frame_graph *graph, uint32_t ticket, hp_frame_result *out, hp_err *err);
/* Submit, then wait: one frame at a time. */
hp_code hp_frame_graph_run(hp_frame_graph *graph, const hp_frame_params *params, hp_frame_result *out,
                           hp_err *err);

/* Tests and diagnostics: the DOF buffers of the last frame run (NULL before any DOF frame), and a copy
 * of a device buffer's first `size` bytes to host memory (blocks; not for the request path). */
const hp_dof_frame *hp_frame_graph_last_dof(const hp_frame_graph *graph);
hp_code hp_frame_graph_read_buffer(hp_frame_graph *graph, const hp_buffer *src, void *dst, size_t size, hp_err *err);

/* Whether this device runs PNG's filter and deflate passes (pipeline/png_gpu.h): output.png_encoder auto
 * takes the GPU where it does. */
bool hp_frame_graph_has_png_gpu(const hp_frame_graph *graph);

/* Frame sizes whose resources are currently kept, and the bytes of device memory they hold. */
uint32_t hp_frame_graph_cached_sizes(const hp_frame_graph *graph);
uint64_t hp_frame_graph_device_bytes(const hp_frame_graph *graph);

#endif

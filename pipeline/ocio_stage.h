/* The OCIO stage (issue 34; docs/COLOR.md): a studio config's display/view transform on the GPU, in place of
 * the tone pass's operator, gamut fold and output transfer.
 *
 * Each (input colour space, display, view, looks) is one program (pipeline/ocio_program.h): OCIO's shader
 * compiled at run time, its LUTs as sampled images, its pipelines. Programs are made on first use by the
 * thread that asks (a request's, so the GPU thread never waits for a compiler), kept in a least-recently-used
 * set of `capacity`, and their pipelines go through the device's pipeline cache like every other. Those the
 * settings list (ocio_warm) are made before the daemon says ready.
 *
 * A frame holds its program from acquire to release (hp_frame_params.ocio): eviction never takes a program a
 * frame holds. Safe from any thread. */
#ifndef HP_OCIO_STAGE_H
#define HP_OCIO_STAGE_H

#include "ocio/config.h"
#include "pipeline/gpu.h"
#include "pipeline/ocio_program.h"
#include "pipeline/reduce.h"
#include "pipeline/tone.h"

typedef struct hp_ocio_stage hp_ocio_stage;
typedef struct hp_ocio_entry hp_ocio_entry;

/* config stays the caller's and must outlive the stage. capacity: programs kept, at least 1. */
hp_code hp_ocio_stage_create(hp_gpu *gpu, const hp_ocio_config *config, uint32_t capacity, hp_ocio_stage **out,
                             hp_err *err);
/* The same, its programs made with variants (bench/bench_ocio.c weighs them; options NULL: today's). */
hp_code hp_ocio_stage_create_with(hp_gpu *gpu, const hp_ocio_config *config, uint32_t capacity,
                                  const hp_ocio_program_options *options, hp_ocio_stage **out, hp_err *err);
/* After the device is idle and every entry released. */
void hp_ocio_stage_destroy(hp_ocio_stage **stage);
const hp_ocio_config *hp_ocio_stage_config(const hp_ocio_stage *stage);

/* The program of a key (resolved: hp_ocio_resolve) with the pipeline for this input format and output kind,
 * made now when it is not kept: the caller waits (another thread making the same program is waited for, not
 * repeated). *made says whether this call made the program. A failure is not kept: the next request tries
 * again. */
hp_code hp_ocio_stage_acquire(hp_ocio_stage *stage, const hp_ocio_view_key *key, hp_pixel_format format,
                              hp_tone_output kind, hp_ocio_entry **out, bool *made, hp_err *err);
void hp_ocio_stage_release(hp_ocio_stage *stage, hp_ocio_entry *entry);

typedef struct hp_ocio_io {
    VkDeviceAddress pixels; /* the frame, or the DOF composite (RGBA32F) */
    hp_pixel_format format;
    uint32_t width, height;
    VkDeviceAddress state;  /* tone_state: the exposure's scale (the exposure stage ran) */
    VkDeviceAddress output; /* hp_tone_output_bytes(kind, width, height, false) bytes */
    hp_tone_output kind;    /* RGBA8 or RGBA16: the kind the entry was acquired for */
    bool dither;
} hp_ocio_io;

/* Whether the entry has the pipeline for this input format and output kind (it was acquired for them). */
bool hp_ocio_stage_has(const hp_ocio_entry *entry, hp_pixel_format format, hp_tone_output kind);
/* Its LUTs read from buffers rather than images (pipeline/ocio_program.h). */
uint32_t hp_ocio_entry_buffer_luts(const hp_ocio_entry *entry);
/* The driver's statistics of an entry's pipeline for a format and kind (registers, ...; empty without
 * hp_gpu_config.capture_statistics): for bench/bench_ocio.c. */
void hp_ocio_entry_statistics(hp_gpu *gpu, const hp_ocio_entry *e, hp_pixel_format format, hp_tone_output kind,
                              char *buf, size_t len);

/* Records the pass. The caller puts the barriers before (the exposure's state, the frame) and after. */
void hp_ocio_stage_record(const hp_ocio_entry *entry, VkCommandBuffer cmd, const hp_ocio_io *io);

typedef struct hp_ocio_stage_stats {
    uint64_t made;      /* programs made (first uses and uses after eviction) */
    uint64_t hits;      /* acquires that found their program kept */
    uint64_t evicted;
    uint64_t failed;
    uint32_t kept;
    double made_ms;     /* the time spent making programs (OCIO, glslang, the LUTs' upload, the first pipeline) */
    double last_made_ms;
} hp_ocio_stage_stats;
void hp_ocio_stage_stats_get(hp_ocio_stage *stage, hp_ocio_stage_stats *out);

#endif

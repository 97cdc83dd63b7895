/* One OCIO transform made ready for the GPU (pipeline/ocio_stage.h keeps them): OCIO's GLSL put into
 * shaders/ocio_display.comp and compiled to SPIR-V at run time by glslang, its LUTs uploaded as sampled
 * images, and the compute pipelines of the input formats and output kinds asked for. For the files of
 * pipeline/ only. */
#ifndef HP_OCIO_PROGRAM_H
#define HP_OCIO_PROGRAM_H

#include "ocio/config.h"
#include "pipeline/gpu.h"
#include "pipeline/reduce.h"
#include "pipeline/tone.h"

#define HP_OCIO_MAX_LUTS 16u /* OCIO 2.1 gives a 3D LUT per Lut3D op and a texture per Lut1D op: Blender's
                              * Filmic view needs 3, ACES's built-ins 0 */

/* Nearest 3D LUTs read from buffers, their addresses in the push constants (shaders/ocio_display.comp's luts). */
#define HP_OCIO_MAX_BUFFER_LUTS 4u
/* shaders/ocio_display.comp's Push: three addresses, width, height, dither, a pad, HP_OCIO_MAX_BUFFER_LUTS
 * addresses. */
#define HP_OCIO_PUSH_BYTES 72u

/* How a program is made. Zeroed, or NULL where a function takes them, is the daemon's. */
typedef struct hp_ocio_program_options {
    /* Every LUT as an image, as before 2026-11-29: bench/bench_ocio.c weighs the buffers against it. */
    bool lut3d_images;
} hp_ocio_program_options;

typedef struct hp_ocio_image {
    VkImage image;
    VkImageView view;
    VkDeviceMemory memory;
    VkSampler sampler;
    VkFormat format;  /* of its texels, in the image or the buffer */
    hp_buffer buffer; /* a nearest 3D LUT in a buffer instead: no image, no binding; its slot in the push
                       * constants is its rank among the program's buffer LUTs */
} hp_ocio_image;

typedef struct hp_ocio_program {
    uint32_t *spirv;
    size_t spirv_size;
    uint32_t lut_count;
    hp_ocio_image luts[HP_OCIO_MAX_LUTS];
    VkDescriptorSetLayout set_layout;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    /* By [input format][output kind - 1]: made on first use (pipeline.pipeline 0 until then). */
    hp_compute pipelines[2][2];
    double compile_ms; /* OCIO's shader, glslang and the LUTs' upload */
    uint32_t buffer_luts; /* LUTs in buffers, at most HP_OCIO_MAX_BUFFER_LUTS */
} hp_ocio_program;

/* Makes the program of a resolved key: the SPIR-V and the LUTs, no pipeline yet. Uploads through a command
 * buffer of its own on the compute queue and waits for it. options: NULL for the daemon's. */
hp_code hp_ocio_program_make(hp_gpu *gpu, const hp_ocio_config *config, const hp_ocio_view_key *key,
                             const hp_ocio_program_options *options, hp_ocio_program *out, hp_err *err);
/* The pipeline of an input format and output kind (RGBA8 or RGBA16), made now if it is not yet. */
hp_code hp_ocio_program_pipeline(hp_gpu *gpu, hp_ocio_program *p, hp_pixel_format format, hp_tone_output kind,
                                 const hp_compute **out, hp_err *err);
void hp_ocio_program_destroy(hp_gpu *gpu, hp_ocio_program *p);

/* GLSL to SPIR-V (glslang, Vulkan 1.2 rules): words malloc'ed; the compiler's log in err on failure. */
hp_code hp_glsl_compile(const char *source, const char *name, uint32_t **spirv, size_t *bytes, hp_err *err);

#endif

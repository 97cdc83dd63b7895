/* A studio's OpenColorIO config, seen from C (issue 34; docs/COLOR.md).
 *
 * OpenColorIO (Debian 12: 2.1.2) is the field's library for a studio's looks: ACES output transforms,
 * Blender's Filmic, show LUTs. Its API is C++ only, so this room is the one C++ file the rest of the daemon
 * talks to through the plain C below; no OCIO type or exception crosses it. What it does:
 *   - loads a config at start and refuses one that OCIO cannot use, with OCIO's own message;
 *   - names the config's displays, views, looks, colour spaces and roles (GET /v1/ocio, the start-up log);
 *   - checks a request's names against them (a 400 names the field and lists the valid names);
 *   - turns a (input colour space, display, view, looks) into OCIO's GLSL 4.0 shader text and its LUTs for
 *     the GPU stage (pipeline/ocio_stage.h), and into OCIO's CPU processor, the reference the tests hold
 *     the GPU to (tools/cpu_render).
 *
 * A config is read only at start: a request can name a display or a look, never a file. Everything here is
 * safe to call from any thread once hp_ocio_config_load() has returned (OCIO's Config and Processor are
 * immutable and thread-safe for these calls). */
#ifndef HP_OCIO_CONFIG_H
#define HP_OCIO_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/error.h" /* inside: common/ is C, and its declarations need C linkage here */

typedef struct hp_ocio_config hp_ocio_config;

/* Loads and validates the config at path, then builds the processor of every display and view from the
 * scene_linear role (the config's default colour space where it has no such role): OCIO's validate() does
 * not open LUT files, and a missing LUT must stop the start, not the first request. err carries OCIO's own
 * message, prefixed with the path. */
hp_code hp_ocio_config_load(const char *path, hp_ocio_config **out, hp_err *err);
void hp_ocio_config_free(hp_ocio_config *config);

const char *hp_ocio_config_path(const hp_ocio_config *config);
const char *hp_ocio_config_name(const hp_ocio_config *config);        /* "" when the config has none */
const char *hp_ocio_config_description(const hp_ocio_config *config); /* "" when none */

/* The lists GET /v1/ocio gives; each name lives as long as the config. */
typedef enum hp_ocio_list {
    HP_OCIO_DISPLAYS,
    HP_OCIO_LOOKS,
    HP_OCIO_COLORSPACES,
    HP_OCIO_ROLES, /* role names; hp_ocio_role_colorspace() gives each one's colour space */
} hp_ocio_list;
size_t hp_ocio_count(const hp_ocio_config *config, hp_ocio_list list);
const char *hp_ocio_name(const hp_ocio_config *config, hp_ocio_list list, size_t i);
const char *hp_ocio_role_colorspace(const hp_ocio_config *config, size_t i);
size_t hp_ocio_view_count(const hp_ocio_config *config, const char *display);
const char *hp_ocio_view_name(const hp_ocio_config *config, const char *display, size_t i);
const char *hp_ocio_default_display(const hp_ocio_config *config);
const char *hp_ocio_default_view(const hp_ocio_config *config, const char *display);
/* The colour space a request's frame is in when it names none: the scene_linear role's. */
const char *hp_ocio_default_input(const hp_ocio_config *config);
/* The Y row of a colour space of the config (its own name, as hp_ocio_resolve leaves it): the exposure stage's
 * luminance for a frame in it. Measured at load through the config's conversion to ACES2065-1 (its
 * aces_interchange role) and OCIO's AP0 -> XYZ D65 (Bradford), else to its scene_linear with the config's luma; a space that is not linear, or a name
 * the config lacks, gets the config's luma coefficients (ocio/config.cpp, input_luma_of). */
void hp_ocio_input_luma(const hp_ocio_config *config, const char *input, double rgb[3]);

/* One output transform: the request's names, empty ones resolved by hp_ocio_resolve(). */
#define HP_OCIO_NAME_MAX 255
typedef struct hp_ocio_view_key {
    char input[HP_OCIO_NAME_MAX + 1];   /* a colour space or role of the config */
    char display[HP_OCIO_NAME_MAX + 1];
    char view[HP_OCIO_NAME_MAX + 1];
    char looks[HP_OCIO_NAME_MAX + 1];   /* OCIO's look syntax ("+grade, -shot"); "": the view's own looks */
} hp_ocio_view_key;

/* Fills the empty names with the config's defaults (input: hp_ocio_default_input; display: the default
 * display; view: that display's default view) and checks every name: an unknown one is HP_ERR_INVALID_ARGUMENT
 * naming its request field (input.colorspace, ocio.display, ocio.view, ocio.looks) and listing the valid names. */
hp_code hp_ocio_resolve(const hp_ocio_config *config, hp_ocio_view_key *key, hp_err *err);
/* Whether name is a colour space or a role of the config. */
bool hp_ocio_has_colorspace(const hp_ocio_config *config, const char *name);

/* The display colour space a display/view writes ("" when the config cannot say), and whether the config has the
 * cie_xyz_d65_interchange role through which hp_ocio_display_probe measures it. */
const char *hp_ocio_display_colorspace(const hp_ocio_config *config, const char *display, const char *view);
/* Display-referred CIE XYZ (D65; Y 1 = the display's reference white, 100 cd/m2 for OCIO's HDR built-ins) through
 * the config's own conversion to that display colour space: n triplets in place. HP_ERR_UNUSABLE when the config
 * has no cie_xyz_d65_interchange role, or OCIO cannot make the conversion. pipeline/ocio_encoding.c tells the
 * primaries and transfer from what comes out. */
hp_code hp_ocio_display_probe(const hp_ocio_config *config, const char *display, const char *view, float *xyz,
                              size_t n, hp_err *err);

/* --- The GPU's program --------------------------------------------------------------------------------- */

/* A LUT of the shader: OCIO's 1D LUTs come as 1D or 2D textures (long ones folded into rows), 3D LUTs as
 * 3D textures, each sampled by the named sampler of the shader text. values: width * height * depth texels
 * of `channels` floats (1: red only, 3: RGB), x fastest, as OCIO gives them. */
typedef struct hp_ocio_lut {
    char sampler[HP_OCIO_NAME_MAX + 1]; /* the sampler's name in the shader text */
    uint32_t dims;                      /* 1, 2 or 3: sampler1D, sampler2D or sampler3D */
    uint32_t width, height, depth;
    uint32_t channels;                  /* 1 or 3 */
    bool linear;                        /* the filter OCIO asks for: linear, else nearest (the shader
                                         * interpolates tetrahedrally or exactly itself) */
    const float *values;                /* owned by the hp_ocio_shader */
} hp_ocio_lut;

typedef struct hp_ocio_shader {
    char *text;            /* OCIO's GLSL 4.0: declarations and `vec4 hp_ocio(vec4 px)` */
    size_t lut_count;
    hp_ocio_lut *luts;
    char cache_id[128];    /* OCIO's processor cache id: equal ids are the same transform */
    void *owner;           /* the C++ side's objects that hold the values */
} hp_ocio_shader;

/* The shader of a resolved key. A transform with uniforms (dynamic properties) is refused with a message
 * naming it: a config's display views have none, and values that change per request would defeat the one
 * pipeline per transform. */
hp_code hp_ocio_shader_make(const hp_ocio_config *config, const hp_ocio_view_key *key, hp_ocio_shader **out,
                            hp_err *err);
void hp_ocio_shader_free(hp_ocio_shader *shader);

/* --- The CPU's reference ------------------------------------------------------------------------------- */

typedef struct hp_ocio_cpu hp_ocio_cpu;
/* OCIO's CPU processor of a resolved key, at 32-bit float in and out (OCIO's default optimisation, as
 * oiiotool and OCIO's applications use it). */
hp_code hp_ocio_cpu_make(const hp_ocio_config *config, const hp_ocio_view_key *key, hp_ocio_cpu **out,
                         hp_err *err);
/* Applies it in place to n interleaved RGBA pixels (alpha passes through). */
void hp_ocio_cpu_apply(const hp_ocio_cpu *cpu, float *rgba, size_t n);
void hp_ocio_cpu_free(hp_ocio_cpu *cpu);

#ifdef __cplusplus
}
#endif

#endif

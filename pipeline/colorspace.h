/* Colour spaces of scene-linear RGB (issue 17): the named spaces renderers write, the RGB -> CIE XYZ matrix
 * of any set of chromaticities (an OpenEXR `chromaticities` attribute, a Radiance PRIMARIES= line), and
 * chromatic adaptation to D65, the white of the pipeline's working space (DECISIONS.md 5: frames are
 * taken to CIE Yxy through XYZ). Double precision: these matrices are computed once per frame on the CPU
 * and folded into the conversion the pipeline already does, so precision costs nothing per pixel. */
#ifndef HP_COLORSPACE_H
#define HP_COLORSPACE_H

#include <stdbool.h>

#include "common/error.h"

typedef struct hp_xy {
    double x, y;
} hp_xy;

/* CIE 1931 xy of the three primaries and the white: OpenEXR's `chromaticities` attribute, in its order. */
typedef struct hp_chromaticities {
    hp_xy red, green, blue, white;
} hp_chromaticities;

typedef enum hp_colorspace {
    HP_COLORSPACE_REC709,   /* linear sRGB / BT.709 primaries, D65 (ITU-R BT.709-6, IEC 61966-2-1) */
    HP_COLORSPACE_REC2020,  /* BT.2020 primaries, D65 (ITU-R BT.2020-2) */
    HP_COLORSPACE_ACESCG,   /* ACES AP1 primaries, ACES white (Academy S-2014-004) */
    HP_COLORSPACE_ACES2065, /* ACES AP0 primaries, ACES white (SMPTE ST 2065-1) */
    HP_COLORSPACE_P3D65,    /* Display P3 primaries, D65 (SMPTE EG 432-1), linear */
    HP_COLORSPACE_COUNT
} hp_colorspace;

/* The space's chromaticities and its name as parameters spell it ("rec709", "acescg", ...). */
const hp_chromaticities *hp_colorspace_chromaticities(hp_colorspace space);
const char *hp_colorspace_name(hp_colorspace space);
/* The named space whose chromaticities these are, each coordinate within 0.0005 (files round them), or
 * false. */
bool hp_colorspace_find(const hp_chromaticities *c, hp_colorspace *out);

extern const hp_xy HP_WHITE_D65;

/* output.colorspace (issue 17): the display the image is encoded for. Its primaries are the pipeline's
 * working space: the frame is converted into them where it is read, and every stage after the reduction
 * (depth of field, the tone curve, the fold into [0, 1]) works in them, so a colour the display can show
 * is never clipped to a smaller gamut on the way. The transfer is the gamma stage's (gamma.mode); the
 * encoder tags the file with both (api/codecs/encode.h). */
typedef enum hp_output_colorspace {
    HP_OUTPUT_SRGB = 0,       /* Rec.709 primaries, D65: sRGB (IEC 61966-2-1) */
    HP_OUTPUT_DISPLAY_P3 = 1, /* P3 primaries, D65 (SMPTE EG 432-1; Apple's Display P3, sRGB's transfer) */
    HP_OUTPUT_REC2020 = 2,    /* ITU-R BT.2020 primaries, D65 (16-bit PNG only: params.c) */
    HP_OUTPUT_COLORSPACE_COUNT
} hp_output_colorspace;

/* The primaries (and D65 white) of an output colour space; Rec.709 for a value outside the enum. */
hp_colorspace hp_output_colorspace_primaries(hp_output_colorspace out);

/* RGB -> XYZ of these chromaticities, the white mapping to Y = 1 (SMPTE RP 177-1993, "normalized primary
 * matrix"): m[row][col], XYZ = m . RGB. HP_ERR_UNUSABLE with what is wrong for chromaticities that make no
 * RGB space: a coordinate not finite or outside [-1, 2], a white with y <= 0, primaries on one line, or a
 * white that is not a positive mix of the primaries (outside their triangle). */
hp_code hp_rgb_to_xyz(const hp_chromaticities *c, double m[3][3], hp_err *err);

/* The Bradford chromatic adaptation from one white to another (Lam 1985; Lindbloom, "Chromatic Adaptation"):
 * XYZ under `to` = m . XYZ under `from`. The identity when the whites are the same. */
void hp_bradford(hp_xy from, hp_xy to, double m[3][3]);

/* RGB -> XYZ under D65: hp_rgb_to_xyz, then Bradford from the space's white to D65 where it differs. */
hp_code hp_rgb_to_xyz_d65(const hp_chromaticities *c, double m[3][3], hp_err *err);

/* The working space of an output colour space: the RGB every stage after the reduction works in, and the
 * RGB operators' matrices composed with it in double. The operators are defined on one space each: ACES
 * Hill's fit on Rec.709 (algorithms.md 3.5), AgX on BT.2020 (3.9), Khronos PBR Neutral on non-negative
 * Rec.709 (3.10), the false-colour palette in Rec.709 display colours; composed, each still sees the space it was made for, and its result lands in the
 * working space, where the display's own gamut bounds it. */
typedef struct hp_working_space {
    hp_output_colorspace output;
    double to_xyz[3][3], from_xyz[3][3]; /* working RGB <-> XYZ (D65) */
    double luma[3];                      /* to_xyz's Y row: luminance in the working space */
    double to_rec709[3][3], from_rec709[3][3]; /* working <-> Rec.709: khronos_neutral, the false-colour palette */
    double aces_in[3][3], aces_out[3][3]; /* ACES_IN . (working -> Rec.709), (Rec.709 -> working) . ACES_OUT */
    double agx_in[3][3], agx_out[3][3];   /* AGX_INSET . (working -> BT.2020), (BT.2020 -> working) . AGX_OUTSET */
} hp_working_space;

/* The working space of `output` (HP_OUTPUT_SRGB: linear Rec.709, as before issue 17); made once, shared,
 * never freed. A value outside the enum gives Rec.709's. */
const hp_working_space *hp_working_space_of(hp_output_colorspace output);

/* A frame's colour as the stages use it (issue 17). The pipeline works in the output's primaries under
 * D65 (linear Rec.709 for sRGB output): the tone stage converts a frame of other primaries into them where
 * it already takes RGB to CIE Yxy (DECISIONS.md 5), and the reduction weighs the frame's own RGB by its
 * own Y row. */
typedef struct hp_input_color {
    bool convert;         /* false: the frame is in the working space already; to_work is not used */
    double to_work[3][3]; /* the frame's RGB -> the working RGB: the working XYZ -> RGB . the frame's RGB -> XYZ (D65) */
    double luma[3];       /* the Y row of the frame's RGB -> XYZ (D65); used when convert or own_luma */
    /* The frame is in a colour space of the OCIO config, which no stage converts (the config's view does): luma
     * is its Y row all the same (hp_ocio_input_luma), for the exposure's reduction. */
    bool own_luma;
    /* The output whose working space this was made for: a zeroed hp_input_color is "nothing to convert for
     * sRGB", so a frame made for another output without resolving its colour again is refused
     * (hp_frame_graph_run) rather than read as if already in that output's primaries. */
    hp_output_colorspace output;
} hp_input_color;

/* The colour of a frame with these chromaticities for the working space of `output`; HP_ERR_UNUSABLE as
 * hp_rgb_to_xyz. The working space's own (within hp_colorspace_find's tolerance, or under another white that
 * Bradford takes back to within 1e-3 of the identity) gives convert = false, so a Rec.709 frame made for
 * sRGB runs exactly as before issue 17. */
hp_code hp_input_color_make(const hp_chromaticities *c, hp_output_colorspace output, hp_input_color *out,
                            hp_err *err);
/* A frame's colour from the input.colorspace choice (0: auto, else hp_colorspace + 1) and the file's
 * chromaticities (NULL: it has none), for the working space of `output`: the choice when it names a space,
 * else the file's, else Rec.709. *name: a space's name, or "custom"; *source: "parameter", "attribute" or
 * "default". HP_ERR_UNUSABLE for chromaticities that make no RGB space. */
hp_code hp_input_color_resolve(unsigned choice, const hp_chromaticities *file, hp_output_colorspace output,
                               hp_input_color *out, const char **name, const char **source, hp_err *err);
/* The Y row in fp32 for the reduction (hp_reduce_params.luma): the frame's own, which is the working space's
 * of `output` when nothing converts (Rec.709's HP_LUMA_* for sRGB output). */
void hp_input_color_luma(const hp_input_color *c, hp_output_colorspace output, float luma[3]);

/* 3x3 helpers: out = a . b, and the inverse (false when singular). out may not alias the inputs. */
void hp_mat3_mul(const double a[3][3], const double b[3][3], double out[3][3]);
bool hp_mat3_invert(const double a[3][3], double out[3][3]);

#endif

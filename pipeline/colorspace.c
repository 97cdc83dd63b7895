/* Colour spaces of scene-linear RGB (pipeline/colorspace.h). Written here rather than taken from a library:
 * Debian's colour libraries (lcms2, OpenColorIO) carry these matrices inside profiles and configs, not as a
 * function of four chromaticities, and the whole of it is two 3x3 constructions. */
#include "pipeline/colorspace.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "hp_shared.h"

const hp_xy HP_WHITE_D65 = {0.3127, 0.3290};

static const struct {
    const char *name;
    hp_chromaticities c;
} spaces[HP_COLORSPACE_COUNT] = {
    /* ITU-R BT.709-6 table 1; IEC 61966-2-1 (docs/ALGORITHMS.md 2.1) */
    [HP_COLORSPACE_REC709] = {"rec709", {{0.64, 0.33}, {0.30, 0.60}, {0.15, 0.06}, {0.3127, 0.3290}}},
    /* ITU-R BT.2020-2 table 3 */
    [HP_COLORSPACE_REC2020] = {"rec2020", {{0.708, 0.292}, {0.170, 0.797}, {0.131, 0.046}, {0.3127, 0.3290}}},
    /* Academy S-2014-004 (ACEScg), AP1; the ACES white, "approximately D60" (SMPTE ST 2065-1 table 1) */
    [HP_COLORSPACE_ACESCG] = {"acescg", {{0.713, 0.293}, {0.165, 0.830}, {0.128, 0.044}, {0.32168, 0.33767}}},
    /* SMPTE ST 2065-1 table 1, AP0: its blue lies outside the spectral locus (y < 0) */
    [HP_COLORSPACE_ACES2065] = {"aces2065", {{0.7347, 0.2653}, {0.0, 1.0}, {0.0001, -0.0770}, {0.32168, 0.33767}}},
    /* SMPTE EG 432-1 (Display P3: DCI-P3 primaries with D65) */
    [HP_COLORSPACE_P3D65] = {"p3d65", {{0.680, 0.320}, {0.265, 0.690}, {0.150, 0.060}, {0.3127, 0.3290}}},
};

const hp_chromaticities *hp_colorspace_chromaticities(hp_colorspace space)
{
    return space < HP_COLORSPACE_COUNT ? &spaces[space].c : NULL;
}

const char *hp_colorspace_name(hp_colorspace space)
{
    return space < HP_COLORSPACE_COUNT ? spaces[space].name : "unknown";
}

static bool near(hp_xy a, hp_xy b) { return fabs(a.x - b.x) <= 0.0005 && fabs(a.y - b.y) <= 0.0005; }

bool hp_colorspace_find(const hp_chromaticities *c, hp_colorspace *out)
{
    for (int s = 0; s < HP_COLORSPACE_COUNT; s++) {
        const hp_chromaticities *k = &spaces[s].c;
        if (near(c->red, k->red) && near(c->green, k->green) && near(c->blue, k->blue) && near(c->white, k->white)) {
            *out = (hp_colorspace)s;
            return true;
        }
    }
    return false;
}

void hp_mat3_mul(const double a[3][3], const double b[3][3], double out[3][3])
{
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            out[r][c] = a[r][0] * b[0][c] + a[r][1] * b[1][c] + a[r][2] * b[2][c];
}

static double det3(const double a[3][3])
{
    return a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
           a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
}

bool hp_mat3_invert(const double a[3][3], double out[3][3])
{
    double d = det3(a);
    if (!isfinite(d) || fabs(d) < 1e-12)
        return false;
    /* The adjugate over the determinant (Cramer). */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
            out[r][c] = (a[r1][c1] * a[r2][c2] - a[r1][c2] * a[r2][c1]) / d;
        }
    return true;
}

/* XYZ of a chromaticity at Y = 1. */
static void white_xyz(hp_xy w, double xyz[3])
{
    xyz[0] = w.x / w.y;
    xyz[1] = 1.0;
    xyz[2] = (1.0 - w.x - w.y) / w.y;
}

static bool coordinate_ok(double v) { return isfinite(v) && v >= -1.0 && v <= 2.0; }

hp_code hp_rgb_to_xyz(const hp_chromaticities *c, double m[3][3], hp_err *err)
{
    const hp_xy p[4] = {c->red, c->green, c->blue, c->white};
    static const char *const names[4] = {"red", "green", "blue", "white"};
    for (int i = 0; i < 4; i++)
        if (!coordinate_ok(p[i].x) || !coordinate_ok(p[i].y))
            return hp_fail(err, HP_ERR_UNUSABLE, "chromaticities: the %s point (%g, %g) is not a chromaticity",
                           names[i], p[i].x, p[i].y);
    if (c->white.y <= 1e-6)
        return hp_fail(err, HP_ERR_UNUSABLE, "chromaticities: the white point (%g, %g) has no luminance (y <= 0)",
                       c->white.x, c->white.y);
    /* SMPTE RP 177-1993 section 3.3: P holds the primaries' x, y, z = 1 - x - y as columns; the scales S that
     * make P . S the white's XYZ (at Y = 1) weight them: M = P . diag(S). Written with z, not X/Y = x/y, so that
     * a primary with y <= 0 (AP0's blue) is as good as any. */
    double P[3][3], Pi[3][3], W[3];
    for (int i = 0; i < 3; i++) {
        P[0][i] = p[i].x;
        P[1][i] = p[i].y;
        P[2][i] = 1.0 - p[i].x - p[i].y;
    }
    if (!hp_mat3_invert(P, Pi))
        return hp_fail(err, HP_ERR_UNUSABLE, "chromaticities: the primaries (%g, %g), (%g, %g), (%g, %g) lie on one "
                       "line and make no RGB space", c->red.x, c->red.y, c->green.x, c->green.y, c->blue.x, c->blue.y);
    white_xyz(c->white, W);
    double S[3];
    for (int r = 0; r < 3; r++) {
        S[r] = Pi[r][0] * W[0] + Pi[r][1] * W[1] + Pi[r][2] * W[2];
        /* A white outside the primaries' triangle needs a negative amount of one of them. */
        if (!(S[r] > 0.0))
            return hp_fail(err, HP_ERR_UNUSABLE, "chromaticities: the white point (%g, %g) lies outside the "
                           "triangle of the primaries", c->white.x, c->white.y);
    }
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            m[r][k] = P[r][k] * S[k];
    return HP_OK;
}

void hp_bradford(hp_xy from, hp_xy to, double m[3][3])
{
    /* The Bradford cone response matrix (Lam 1985, as given by Lindbloom, "Chromatic Adaptation", and used by
     * the ACES reference CTL for its D60 <-> D65 matrices): m = MA^-1 . diag(cone(to) / cone(from)) . MA. */
    static const double MA[3][3] = {{0.8951, 0.2664, -0.1614}, {-0.7502, 1.7135, 0.0367}, {0.0389, -0.0685, 1.0296}};
    double MAi[3][3], ws[3], wd[3], D[3][3] = {{0}}, t[3][3];
    hp_mat3_invert(MA, MAi);
    white_xyz(from, ws);
    white_xyz(to, wd);
    for (int r = 0; r < 3; r++) {
        double s = MA[r][0] * ws[0] + MA[r][1] * ws[1] + MA[r][2] * ws[2];
        double d = MA[r][0] * wd[0] + MA[r][1] * wd[1] + MA[r][2] * wd[2];
        D[r][r] = d / s;
    }
    hp_mat3_mul(D, MA, t);
    hp_mat3_mul(MAi, t, m);
}

hp_code hp_rgb_to_xyz_d65(const hp_chromaticities *c, double m[3][3], hp_err *err)
{
    double own[3][3];
    hp_code code = hp_rgb_to_xyz(c, own, err);
    if (code != HP_OK)
        return code;
    if (c->white.x == HP_WHITE_D65.x && c->white.y == HP_WHITE_D65.y) {
        memcpy(m, own, sizeof(own));
        return HP_OK;
    }
    double cat[3][3];
    hp_bradford(c->white, HP_WHITE_D65, cat);
    hp_mat3_mul(cat, own, m);
    return HP_OK;
}

hp_colorspace hp_output_colorspace_primaries(hp_output_colorspace out)
{
    switch (out) {
    case HP_OUTPUT_DISPLAY_P3:
        return HP_COLORSPACE_P3D65;
    case HP_OUTPUT_REC2020:
        return HP_COLORSPACE_REC2020;
    default:
        return HP_COLORSPACE_REC709;
    }
}

static void row_major(const double *v, double m[3][3])
{
    for (int i = 0; i < 9; i++)
        m[i / 3][i % 3] = v[i];
}

static void working_space_make(hp_output_colorspace output, hp_working_space *out)
{
    /* hp_shared.h's operator matrices, row-major (the GLSL and the CPU reference read the same constants). */
    static const double ACES_IN[9] = {HP_ACES_IN_00, HP_ACES_IN_01, HP_ACES_IN_02, HP_ACES_IN_10, HP_ACES_IN_11,
                                      HP_ACES_IN_12, HP_ACES_IN_20, HP_ACES_IN_21, HP_ACES_IN_22};
    static const double ACES_OUT[9] = {HP_ACES_OUT_00, HP_ACES_OUT_01, HP_ACES_OUT_02, HP_ACES_OUT_10, HP_ACES_OUT_11,
                                       HP_ACES_OUT_12, HP_ACES_OUT_20, HP_ACES_OUT_21, HP_ACES_OUT_22};
    static const double AGX_INSET[9] = {HP_AGX_INSET_00, HP_AGX_INSET_01, HP_AGX_INSET_02,
                                        HP_AGX_INSET_10, HP_AGX_INSET_11, HP_AGX_INSET_12,
                                        HP_AGX_INSET_20, HP_AGX_INSET_21, HP_AGX_INSET_22};
    static const double AGX_OUTSET[9] = {HP_AGX_OUTSET_00, HP_AGX_OUTSET_01, HP_AGX_OUTSET_02,
                                         HP_AGX_OUTSET_10, HP_AGX_OUTSET_11, HP_AGX_OUTSET_12,
                                         HP_AGX_OUTSET_20, HP_AGX_OUTSET_21, HP_AGX_OUTSET_22};
    memset(out, 0, sizeof(*out));
    out->output = output;
    hp_err err = {0};
    double rec709[3][3], rec2020[3][3], xyz_to_709[3][3], xyz_to_2020[3][3], to_2020[3][3], from_2020[3][3],
        m[3][3];
    /* The named spaces are D65 and well formed: none of these can fail. */
    hp_rgb_to_xyz(hp_colorspace_chromaticities(hp_output_colorspace_primaries(output)), out->to_xyz, &err);
    hp_rgb_to_xyz(hp_colorspace_chromaticities(HP_COLORSPACE_REC709), rec709, &err);
    hp_rgb_to_xyz(hp_colorspace_chromaticities(HP_COLORSPACE_REC2020), rec2020, &err);
    hp_mat3_invert(out->to_xyz, out->from_xyz);
    hp_mat3_invert(rec709, xyz_to_709);
    hp_mat3_invert(rec2020, xyz_to_2020);
    for (int i = 0; i < 3; i++)
        out->luma[i] = out->to_xyz[1][i];
    hp_mat3_mul(xyz_to_709, out->to_xyz, out->to_rec709);
    hp_mat3_mul(out->from_xyz, rec709, out->from_rec709);
    hp_mat3_mul(xyz_to_2020, out->to_xyz, to_2020);
    hp_mat3_mul(out->from_xyz, rec2020, from_2020);
    row_major(ACES_IN, m);
    hp_mat3_mul(m, out->to_rec709, out->aces_in);
    row_major(ACES_OUT, m);
    hp_mat3_mul(out->from_rec709, m, out->aces_out);
    row_major(AGX_INSET, m);
    hp_mat3_mul(m, to_2020, out->agx_in);
    row_major(AGX_OUTSET, m);
    hp_mat3_mul(from_2020, m, out->agx_out);
}

static hp_working_space working_spaces[HP_OUTPUT_COLORSPACE_COUNT];
static pthread_once_t working_spaces_once = PTHREAD_ONCE_INIT;

static void working_spaces_make(void)
{
    for (int i = 0; i < HP_OUTPUT_COLORSPACE_COUNT; i++)
        working_space_make((hp_output_colorspace)i, &working_spaces[i]);
}

const hp_working_space *hp_working_space_of(hp_output_colorspace output)
{
    pthread_once(&working_spaces_once, working_spaces_make);
    return &working_spaces[(unsigned)output < HP_OUTPUT_COLORSPACE_COUNT ? output : HP_OUTPUT_SRGB];
}

hp_code hp_input_color_make(const hp_chromaticities *c, hp_output_colorspace output, hp_input_color *out,
                            hp_err *err)
{
    memset(out, 0, sizeof(*out));
    out->output = output;
    const hp_colorspace work = hp_output_colorspace_primaries(output);
    hp_colorspace named;
    if (hp_colorspace_find(c, &named) && named == work)
        return HP_OK;
    double to_xyz[3][3], work_to_xyz[3][3], from_xyz[3][3];
    hp_code code = hp_rgb_to_xyz_d65(c, to_xyz, err);
    if (code != HP_OK)
        return code;
    code = hp_rgb_to_xyz(hp_colorspace_chromaticities(work), work_to_xyz, err);
    if (code != HP_OK)
        return code;
    if (!hp_mat3_invert(work_to_xyz, from_xyz))
        return hp_fail(err, HP_ERR_INTERNAL, "the working space's RGB -> XYZ matrix is singular");
    hp_mat3_mul(from_xyz, to_xyz, out->to_work);
    /* The working space under another white, as ICC-minded writers record sRGB (its primaries adapted to
     * D50, e.g. tests/data/blender_city.exr), comes back to within 2e-4 of the identity through Bradford:
     * that is the working space, and runs as such. 1e-3 is far below any other space's difference (P3's
     * from Rec.709 is 0.2). */
    double off = 0.0;
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            off = fmax(off, fabs(out->to_work[r][k] - (r == k)));
    if (off < 1e-3) {
        memset(out, 0, sizeof(*out));
        out->output = output;
        return HP_OK;
    }
    for (int i = 0; i < 3; i++)
        out->luma[i] = to_xyz[1][i];
    out->convert = true;
    return HP_OK;
}

void hp_input_color_luma(const hp_input_color *c, hp_output_colorspace output, float luma[3])
{
    const double rec709[3] = {HP_LUMA_R, HP_LUMA_G, HP_LUMA_B};
    /* HP_LUMA_* are hp_rgb_to_xyz's Rec.709 row rounded to 10 digits: sRGB output keeps them exactly. */
    const double *row = c->convert || c->own_luma    ? c->luma
                        : output == HP_OUTPUT_SRGB ? rec709
                                                   : hp_working_space_of(output)->luma;
    for (int i = 0; i < 3; i++)
        luma[i] = (float)row[i];
}

hp_code hp_input_color_resolve(unsigned choice, const hp_chromaticities *file, hp_output_colorspace output,
                               hp_input_color *out, const char **name, const char **source, hp_err *err)
{
    const hp_chromaticities *c = hp_colorspace_chromaticities(HP_COLORSPACE_REC709);
    *source = "default";
    if (choice != 0 && choice <= HP_COLORSPACE_COUNT) {
        c = hp_colorspace_chromaticities((hp_colorspace)(choice - 1));
        *source = "parameter";
    } else if (file) {
        c = file;
        *source = "attribute";
    }
    hp_code code = hp_input_color_make(c, output, out, err);
    /* What a file calls Rec.709 under another white runs as Rec.709 (hp_input_color_make): say so. */
    hp_input_color as709;
    hp_err ignored = {0};
    hp_colorspace named;
    *name = code != HP_OK ? "rec709"
            : hp_colorspace_find(c, &named) ? hp_colorspace_name(named)
            : hp_input_color_make(c, HP_OUTPUT_SRGB, &as709, &ignored) == HP_OK && !as709.convert ? "rec709"
                                                                                                : "custom";
    return code;
}

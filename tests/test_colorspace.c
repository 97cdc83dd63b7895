/* pipeline/colorspace.h against published matrices: BT.709's RGB -> XYZ (docs/ALGORITHMS.md 2.1),
 * the ACES AP0 and AP1 matrices and the ACES D60 -> D65 Bradford matrix (aces-dev, transforms/ctl/
 * README-MATRIX.md and utilities/ACESlib.Utilities_Color.ctl), and the refusals of chromaticities that make
 * no RGB space. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hp_shared.h"
#include "pipeline/colorspace.h"
#include "tap.h"

/* The largest difference between two 3x3 matrices. */
static double max_diff(const double a[3][3], const double b[3][3])
{
    double d = 0;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            d = fmax(d, fabs(a[r][c] - b[r][c]));
    return d;
}

static void matches(hp_colorspace space, const double want[3][3], double tol, const char *source)
{
    double m[3][3];
    hp_err err = {0};
    hp_code code = hp_rgb_to_xyz(hp_colorspace_chromaticities(space), m, &err);
    double d = code == HP_OK ? max_diff(m, want) : INFINITY;
    tap_ok(d <= tol, "%s RGB -> XYZ equals %s within %g (largest difference %.3g)", hp_colorspace_name(space), source,
           tol, d);
}

static void published(void)
{
    static const double rec709[3][3] = {{0.4123907993, 0.3575843394, 0.1804807884},
                                        {0.2126390059, 0.7151686788, 0.0721923154},
                                        {0.0193308187, 0.1191947798, 0.9505321522}};
    static const double ap1[3][3] = {{0.6624541811, 0.1340042065, 0.1561876870},
                                     {0.2722287168, 0.6740817658, 0.0536895174},
                                     {-0.0055746495, 0.0040607335, 1.0103391003}};
    static const double ap0[3][3] = {{0.9525523959, 0.0, 0.0000936786},
                                     {0.3439664498, 0.7281660966, -0.0721325464},
                                     {0.0, 0.0, 1.0088251844}};
    /* Published to 10 decimals: within 1e-9 of the exact construction. */
    matches(HP_COLORSPACE_REC709, rec709, 1e-9, "algorithms.md 2.1");
    matches(HP_COLORSPACE_ACESCG, ap1, 1e-9, "ACES AP1_2_XYZ_MAT");
    matches(HP_COLORSPACE_ACES2065, ap0, 1e-9, "ACES AP0_2_XYZ_MAT");

    /* ACESlib.Utilities_Color.ctl D60_2_D65_CAT, printed to 6 significant digits. */
    static const double d60_d65[3][3] = {{0.987224, -0.00611327, 0.0159533},
                                         {-0.00759836, 1.00186, 0.00533002},
                                         {0.00307257, -0.00509595, 1.08168}};
    double cat[3][3];
    hp_bradford(hp_colorspace_chromaticities(HP_COLORSPACE_ACESCG)->white, HP_WHITE_D65, cat);
    double d = max_diff(cat, d60_d65);
    tap_ok(d <= 5e-6, "Bradford from the ACES white to D65 equals ACES' D60_2_D65_CAT within 5e-6 (%.3g)", d);

    double same[3][3], id[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    hp_bradford(HP_WHITE_D65, HP_WHITE_D65, same);
    tap_ok(max_diff(same, id) <= 1e-12, "Bradford from D65 to D65 is the identity");
}

/* Every space: RGB (1, 1, 1) is its own white at Y = 1, and under D65 after adaptation. */
static void whites(void)
{
    for (int s = 0; s < HP_COLORSPACE_COUNT; s++) {
        const hp_chromaticities *c = hp_colorspace_chromaticities((hp_colorspace)s);
        double m[3][3], d65[3][3];
        hp_err err = {0};
        bool ok = hp_rgb_to_xyz(c, m, &err) == HP_OK && hp_rgb_to_xyz_d65(c, d65, &err) == HP_OK;
        double own[3] = {c->white.x / c->white.y, 1.0, (1 - c->white.x - c->white.y) / c->white.y};
        double d65w[3] = {HP_WHITE_D65.x / HP_WHITE_D65.y, 1.0, (1 - HP_WHITE_D65.x - HP_WHITE_D65.y) / HP_WHITE_D65.y};
        double e1 = 0, e2 = 0;
        for (int r = 0; ok && r < 3; r++) {
            e1 = fmax(e1, fabs(m[r][0] + m[r][1] + m[r][2] - own[r]));
            e2 = fmax(e2, fabs(d65[r][0] + d65[r][1] + d65[r][2] - d65w[r]));
        }
        tap_ok(ok && e1 <= 1e-12 && e2 <= 1e-12, "%s: RGB white is the space's white at Y = 1 (%.2g), and D65 after "
               "adaptation (%.2g)", hp_colorspace_name((hp_colorspace)s), e1, e2);
        hp_colorspace found;
        tap_ok(hp_colorspace_find(c, &found) && found == (hp_colorspace)s, "%s is found by its chromaticities",
               hp_colorspace_name((hp_colorspace)s));
    }
    /* Rounded as a file stores them (OpenEXR writes floats, and tools round to 4 decimals). */
    hp_chromaticities rounded = {{0.7130001f, 0.2930001f}, {0.165f, 0.83f}, {0.128f, 0.044f}, {0.3217f, 0.3377f}};
    hp_colorspace found;
    tap_ok(hp_colorspace_find(&rounded, &found) && found == HP_COLORSPACE_ACESCG,
           "AP1 rounded to 4 decimals and stored as floats is still found as acescg");
    hp_chromaticities custom = {{0.69, 0.31}, {0.20, 0.75}, {0.14, 0.05}, {0.3127, 0.3290}};
    tap_ok(!hp_colorspace_find(&custom, &found), "chromaticities of no named space are not given a name");
}

static void refused(const char *what, hp_chromaticities c, const char *says)
{
    double m[3][3];
    hp_err err = {0};
    hp_code code = hp_rgb_to_xyz(&c, m, &err);
    tap_ok(code == HP_ERR_UNUSABLE && strstr(err.message, says), "%s: refused, saying \"%s\" (%s)", what, says,
           err.message);
}

static void refusals(void)
{
    refused("collinear primaries", (hp_chromaticities){{0.1, 0.1}, {0.3, 0.3}, {0.6, 0.6}, {0.3127, 0.3290}},
            "on one line");
    refused("a white outside the primaries' triangle",
            (hp_chromaticities){{0.64, 0.33}, {0.30, 0.60}, {0.15, 0.06}, {0.05, 0.9}}, "outside the triangle");
    refused("a white with y = 0", (hp_chromaticities){{0.64, 0.33}, {0.30, 0.60}, {0.15, 0.06}, {0.3, 0.0}},
            "no luminance");
    refused("a NaN coordinate", (hp_chromaticities){{NAN, 0.33}, {0.30, 0.60}, {0.15, 0.06}, {0.3127, 0.3290}},
            "red point");
    refused("an infinite coordinate", (hp_chromaticities){{0.64, 0.33}, {0.30, INFINITY}, {0.15, 0.06}, {0.3127, 0.3290}},
            "green point");
    refused("all zeros", (hp_chromaticities){{0, 0}, {0, 0}, {0, 0}, {0, 0}}, "no luminance");
}

/* hp_mat3_invert against a product: M . M^-1 = I for every space's matrix. */
static void inverses(void)
{
    double worst = 0;
    for (int s = 0; s < HP_COLORSPACE_COUNT; s++) {
        double m[3][3], mi[3][3], p[3][3], id[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
        hp_err err = {0};
        if (hp_rgb_to_xyz_d65(hp_colorspace_chromaticities((hp_colorspace)s), m, &err) != HP_OK ||
            !hp_mat3_invert(m, mi)) {
            worst = INFINITY;
            break;
        }
        hp_mat3_mul(m, mi, p);
        worst = fmax(worst, max_diff(p, id));
    }
    tap_ok(worst <= 1e-13, "every space's matrix times its inverse is the identity within 1e-13 (%.2g)", worst);
    double singular[3][3] = {{1, 2, 3}, {2, 4, 6}, {0, 1, 0}}, out[3][3];
    tap_ok(!hp_mat3_invert(singular, out), "a singular matrix is not inverted");
}

/* What a frame runs as (hp_input_color_resolve): the parameter over the file's chromaticities over Rec.709;
 * Rec.709 under D50 (blender_city.exr's attribute) runs unconverted; ACEScg converts with AP1's Y row. */
static void resolution(void)
{
    hp_err err = {0};
    hp_input_color c;
    const char *name, *source;
    const hp_chromaticities srgb_d50 = {{0.6484, 0.3309}, {0.3212, 0.5979}, {0.1559, 0.0661}, {0.3457, 0.3585}};
    hp_code code = hp_input_color_resolve(0, &srgb_d50, HP_OUTPUT_SRGB, &c, &name, &source, &err);
    tap_ok(code == HP_OK && !c.convert && !strcmp(name, "rec709") && !strcmp(source, "attribute"),
           "sRGB primaries under D50 run as Rec.709, unconverted (%s, %s)", name, source);
    code = hp_input_color_resolve(HP_COLORSPACE_ACESCG + 1, &srgb_d50, HP_OUTPUT_SRGB, &c, &name, &source, &err);
    tap_ok(code == HP_OK && c.convert && !strcmp(name, "acescg") && !strcmp(source, "parameter") &&
               fabs(c.luma[0] + c.luma[1] + c.luma[2] - 1.0) < 1e-12,
           "input.colorspace=acescg wins over the attribute; its Y row sums to 1 (white keeps Y = 1)");
    code = hp_input_color_resolve(0, NULL, HP_OUTPUT_SRGB, &c, &name, &source, &err);
    tap_ok(code == HP_OK && !c.convert && !strcmp(name, "rec709") && !strcmp(source, "default"),
           "no attribute, no parameter: Rec.709 by default");
    const hp_chromaticities custom = {{0.70, 0.30}, {0.20, 0.75}, {0.14, 0.05}, {0.3127, 0.3290}};
    code = hp_input_color_resolve(0, &custom, HP_OUTPUT_SRGB, &c, &name, &source, &err);
    tap_ok(code == HP_OK && c.convert && !strcmp(name, "custom"), "primaries of no named space: custom, converted");
}

/* The working spaces of output.colorspace: their Y rows are the published luma coefficients (SMPTE EG 432-1
 * for P3, ITU-R BT.2020 Table 4 / BT.2100), a Rec.709 frame converts into P3 by the published matrix, a frame
 * already in the output's primaries is not converted, and for sRGB output the operators' matrices are
 * hp_shared.h's own. */
static void working_spaces(void)
{
    const hp_working_space *p3 = hp_working_space_of(HP_OUTPUT_DISPLAY_P3);
    const hp_working_space *bt2020 = hp_working_space_of(HP_OUTPUT_REC2020);
    const hp_working_space *srgb = hp_working_space_of(HP_OUTPUT_SRGB);
    tap_ok(fabs(p3->luma[0] - 0.2289746) < 5e-7 && fabs(p3->luma[1] - 0.6917385) < 5e-7 &&
               fabs(p3->luma[2] - 0.0792869) < 5e-7,
           "P3's Y row is 0.2289746, 0.6917385, 0.0792869 (%.7f, %.7f, %.7f)", p3->luma[0], p3->luma[1], p3->luma[2]);
    tap_ok(fabs(bt2020->luma[0] - 0.2627) < 5e-5 && fabs(bt2020->luma[1] - 0.6780) < 5e-5 &&
               fabs(bt2020->luma[2] - 0.0593) < 5e-5,
           "BT.2020's Y row is BT.2020's 0.2627, 0.6780, 0.0593 (%.5f, %.5f, %.5f)", bt2020->luma[0], bt2020->luma[1],
           bt2020->luma[2]);
    tap_ok(fabs(srgb->luma[0] - HP_LUMA_R) < 1e-9 && fabs(srgb->luma[1] - HP_LUMA_G) < 1e-9 &&
               fabs(srgb->luma[2] - HP_LUMA_B) < 1e-9,
           "sRGB's working space is Rec.709, its Y row HP_LUMA_*");

    hp_err err = {0};
    hp_input_color c;
    /* Rec.709 -> Display P3 (both D65): e.g. colour-science's RGB_to_RGB, or Apple's published matrix. */
    static const double want[3][3] = {{0.8224621, 0.1775380, 0.0000000},
                                      {0.0331941, 0.9668058, 0.0000000},
                                      {0.0170827, 0.0723974, 0.9105199}};
    bool made = hp_input_color_make(hp_colorspace_chromaticities(HP_COLORSPACE_REC709), HP_OUTPUT_DISPLAY_P3, &c,
                                    &err) == HP_OK;
    double worst = 0;
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++)
            worst = fmax(worst, fabs(c.to_work[r][k] - want[r][k]));
    tap_ok(made && c.convert && worst < 1e-6, "a Rec.709 frame for display_p3 converts by Rec.709 -> P3 within 1e-6 "
           "(%.2g)", worst);
    made = hp_input_color_make(hp_colorspace_chromaticities(HP_COLORSPACE_P3D65), HP_OUTPUT_DISPLAY_P3, &c, &err) ==
           HP_OK;
    tap_ok(made && !c.convert, "a p3d65 frame for display_p3 runs unconverted");
    made = hp_input_color_make(hp_colorspace_chromaticities(HP_COLORSPACE_REC2020), HP_OUTPUT_REC2020, &c, &err) ==
           HP_OK;
    tap_ok(made && !c.convert, "a rec2020 frame for rec2020 runs unconverted");
    const char *name, *source;
    const hp_chromaticities srgb_d50 = {{0.6484, 0.3309}, {0.3212, 0.5979}, {0.1559, 0.0661}, {0.3457, 0.3585}};
    hp_code code = hp_input_color_resolve(0, &srgb_d50, HP_OUTPUT_DISPLAY_P3, &c, &name, &source, &err);
    tap_ok(code == HP_OK && c.convert && !strcmp(name, "rec709"),
           "sRGB primaries under D50 for display_p3: converted into P3, and still named rec709 (%s)", name);

    static const double aces_in[3][3] = {{HP_ACES_IN_00, HP_ACES_IN_01, HP_ACES_IN_02},
                                         {HP_ACES_IN_10, HP_ACES_IN_11, HP_ACES_IN_12},
                                         {HP_ACES_IN_20, HP_ACES_IN_21, HP_ACES_IN_22}};
    static const double agx_outset[3][3] = {{HP_AGX_OUTSET_00, HP_AGX_OUTSET_01, HP_AGX_OUTSET_02},
                                            {HP_AGX_OUTSET_10, HP_AGX_OUTSET_11, HP_AGX_OUTSET_12},
                                            {HP_AGX_OUTSET_20, HP_AGX_OUTSET_21, HP_AGX_OUTSET_22}};
    static const double from2020[3][3] = {{HP_2020_TO_709_00, HP_2020_TO_709_01, HP_2020_TO_709_02},
                                          {HP_2020_TO_709_10, HP_2020_TO_709_11, HP_2020_TO_709_12},
                                          {HP_2020_TO_709_20, HP_2020_TO_709_21, HP_2020_TO_709_22}};
    double agx_out[3][3];
    hp_mat3_mul(from2020, agx_outset, agx_out);
    double w_aces = 0, w_agx = 0;
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++) {
            w_aces = fmax(w_aces, fabs(srgb->aces_in[r][k] - aces_in[r][k]));
            w_agx = fmax(w_agx, fabs(srgb->agx_out[r][k] - agx_out[r][k]));
        }
    tap_ok(w_aces < 1e-9 && w_agx < 1e-6, "for sRGB the composed operator matrices are hp_shared.h's (ACES_IN %.2g, "
           "BT.2020 -> Rec.709 . AGX_OUTSET %.2g)", w_aces, w_agx);
}

int main(void)
{
    published();
    whites();
    refusals();
    inverses();
    resolution();
    working_spaces();
    return tap_done();
}

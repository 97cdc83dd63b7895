/* A display/view's primaries and transfer, measured through the config's own conversion (pipeline/ocio_encoding.h
 * says why and which). */
#include "pipeline/ocio_encoding.h"

#include <math.h>
#include <stdio.h>

#include "pipeline/colorspace.h"

#define TOLERANCE 2e-3 /* code values in [0, 1]: OCIO's float processor is far closer on every candidate it is */

typedef double (*encode_fn)(double y); /* display-relative luminance (1: reference white) to a code value */

static double srgb(double y) { return y <= 0.0031308 ? 12.92 * y : 1.055 * pow(y, 1 / 2.4) - 0.055; }
static double power24(double y) { return pow(y, 1 / 2.4); }
static double power22(double y) { return pow(y, 1 / 2.2); }

/* SMPTE ST 2084's inverse EOTF, Y 1 = 100 cd/m2 (OCIO's HDR built-ins' scale). */
static double pq(double y)
{
    const double m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32,
                 c3 = 2392.0 / 4096 * 32;
    double l = pow(fmax(y, 0) * 100 / 10000, m1);
    return pow((c1 + c2 * l) / (1 + c3 * l), m2);
}

/* BT.2100 HLG for a 1000 cd/m2 display (system gamma 1.2): a grey's display light back through the OOTF to
 * scene light, then the OETF. */
static double hlg(double y)
{
    const double a = 0.17883277, b = 1 - 4 * a, c = 0.5 - a * log(4 * a);
    double e = pow(fmax(y, 0) * 100 / 1000, 1 / 1.2);
    return e <= 1.0 / 12 ? sqrt(3 * e) : a * log(12 * e - b) + c;
}

static const struct {
    uint8_t code;
    encode_fn encode;
    const char *name;
} transfers[] = {{13, srgb, "sRGB"}, {1, power24, "2.4 power (BT.1886)"}, {4, power22, "2.2 power"},
                 {16, pq, "PQ (ST 2084)"}, {18, hlg, "HLG"}};

static const struct {
    uint8_t code;
    hp_colorspace space;
    const char *name;
} primaries[] = {{1, HP_COLORSPACE_REC709, "BT.709"}, {12, HP_COLORSPACE_P3D65, "Display P3"},
                 {9, HP_COLORSPACE_REC2020, "BT.2020"}};

/* Greys of these luminances, D65 white. */
static const double greys[] = {0.01, 0.05, 0.18, 0.5, 1.0};
#define GREYS (sizeof greys / sizeof greys[0])

static int find_transfer(const float *rgb)
{
    for (size_t t = 0; t < sizeof transfers / sizeof transfers[0]; t++) {
        bool all = true;
        for (size_t i = 0; i < GREYS && all; i++)
            for (int k = 0; k < 3; k++)
                all = all && fabs(rgb[3 * i + k] - transfers[t].encode(greys[i])) < TOLERANCE;
        if (all)
            return (int)t;
    }
    return -1;
}

/* Half of each primary of a candidate: its own channel well above E(0), the other two at E(0). Not E(0.5)
 * itself: HLG's OOTF scales a colour by a power of its luminance, so only greys keep the grey curve. The
 * candidates are tried from the smallest gamut up: a wider primary outside a narrower display's gamut has
 * negative channels there, which a display encoding may clip to E(0) and so look like a match. */
static bool primaries_match(const hp_ocio_config *c, const char *display, const char *view, hp_colorspace space,
                            encode_fn e)
{
    double m[3][3];
    if (hp_rgb_to_xyz_d65(hp_colorspace_chromaticities(space), m, NULL) != HP_OK)
        return false;
    float xyz[9];
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 3; k++)
            xyz[3 * p + k] = (float)(0.5 * m[k][p]);
    if (hp_ocio_display_probe(c, display, view, xyz, 3, NULL) != HP_OK)
        return false;
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 3; k++)
            if (k == p ? xyz[3 * p + k] < e(0.0) + 0.05 : fabs(xyz[3 * p + k] - e(0.0)) >= TOLERANCE)
                return false;
    return true;
}

hp_ocio_encoding hp_ocio_encoding_of(const hp_ocio_config *c, const char *display, const char *view)
{
    hp_ocio_encoding out = {0};
    const double *w = NULL;
    double white[3];
    const hp_xy d65 = HP_WHITE_D65;
    white[0] = d65.x / d65.y, white[1] = 1, white[2] = (1 - d65.x - d65.y) / d65.y;
    w = white;
    float rgb[3 * GREYS];
    for (size_t i = 0; i < GREYS; i++)
        for (int k = 0; k < 3; k++)
            rgb[3 * i + k] = (float)(greys[i] * w[k]);
    if (hp_ocio_display_probe(c, display, view, rgb, GREYS, NULL) != HP_OK)
        return out;
    int t = find_transfer(rgb);
    if (t < 0)
        return out;
    for (size_t p = 0; p < sizeof primaries / sizeof primaries[0]; p++) {
        if (primaries_match(c, display, view, primaries[p].space, transfers[t].encode)) {
            out = (hp_ocio_encoding){.known = true, .primaries = primaries[p].code, .transfer = transfers[t].code};
            break;
        }
    }
    return out;
}

bool hp_ocio_encoding_hdr(const hp_ocio_encoding *e)
{
    return e->known && (e->transfer == 16 || e->transfer == 18);
}

const char *hp_ocio_encoding_describe(const hp_ocio_encoding *e, char *buf, size_t size)
{
    const char *p = NULL, *t = NULL;
    for (size_t i = 0; e->known && i < sizeof primaries / sizeof primaries[0]; i++)
        p = primaries[i].code == e->primaries ? primaries[i].name : p;
    for (size_t i = 0; e->known && i < sizeof transfers / sizeof transfers[0]; i++)
        t = transfers[i].code == e->transfer ? transfers[i].name : t;
    if (p && t)
        snprintf(buf, size, "%s primaries, %s transfer", p, t);
    else
        snprintf(buf, size, "not measured as a known encoding (tagged sRGB, assumed)");
    return buf;
}

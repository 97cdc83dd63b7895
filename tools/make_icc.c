/* make_icc OUTPUT.h: the ICC profiles the encoders tag wide-gamut images with (output.colorspace, issue 17),
 * written as a C header of byte arrays at build time (api/meson.build), so that the daemon needs no lcms2
 * at run time and tagging a file allocates nothing and cannot fail.
 *
 * One profile per output space (Display P3, Rec.2020) and transfer (api/codecs/encode.h's hp_output_encoding):
 *   HP_ENCODING_SRGB       the sRGB curve, IEC 61966-2-1: an ICC parametricCurveType of function type 3
 *                          (ICC.1:2010 table 65; lcms2's type 4) {2.4, 1/1.055, 0.055/1.055, 1/12.92, 0.04045};
 *   HP_ENCODING_SRGB_LIKE  a pure gamma 2.2, the single exponent gAMA also gives Kwon's local gamma;
 *   HP_ENCODING_LINEAR     gamma 1.0.
 * Each is a v4.3 display-class matrix/TRC profile (ICC.1:2010 8.4: rXYZ/gXYZ/bXYZ, the TRCs, wtpt, chad), as
 * Apple's own Display P3 profile is: the colorants are the primaries under D65 adapted to the PCS's D50 with
 * Bradford (lcms2 cmsCreateRGBProfile, which also writes the chad tag that records the adaptation). v4's
 * parametric curves keep a profile near 600 bytes; a v2 profile would sample the sRGB curve into a table.
 *
 * Deterministic: lcms2 stamps the creation time into the header (bytes 24..35, ICC.1:2010 7.2.8). It is
 * overwritten with a fixed date, the profile is read back so that lcms2 carries that date, and the profile
 * ID (bytes 84..99, the MD5 of ICC.1:2010 7.2.18) is computed over the result and saved with it. The same
 * lcms2 and zlib make the same bytes on every build.
 *
 * Beside each profile the data of its PNG iCCP chunk (PNG spec 11.3.3.3: the profile name, a null,
 * compression method 0, the profile as a zlib datastream, here compress2 at level 9), which the encoder
 * writes as it is: no zlib stream per request. */
#include <lcms2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct output_space {
    const char *id;        /* for the arrays' names */
    const char *enum_name; /* hp_output_colorspace */
    const char *title;     /* for the description */
    cmsCIExyYTRIPLE primaries;
} output_space;

/* SMPTE EG 432-1 (P3 primaries, D65 white: Display P3) and ITU-R BT.2020-2 table 3. The encoder's cHRM
 * chunks are written from these same numbers (the generated table's chrm). */
static const output_space spaces[] = {
    {"display_p3", "HP_OUTPUT_DISPLAY_P3", "Display P3",
     {{0.680, 0.320, 1.0}, {0.265, 0.690, 1.0}, {0.150, 0.060, 1.0}}},
    {"rec2020", "HP_OUTPUT_REC2020", "Rec.2020", {{0.708, 0.292, 1.0}, {0.170, 0.797, 1.0}, {0.131, 0.046, 1.0}}},
};

/* D65, CIE 15 (as IEC 61966-2-1 and both spaces above give it, to four places). */
static const cmsCIExyY white_d65 = {0.3127, 0.3290, 1.0};

typedef enum transfer { TRANSFER_GAMMA22, TRANSFER_SRGB, TRANSFER_LINEAR, TRANSFER_COUNT } transfer;

static const struct {
    const char *id, *enum_name, *title;
} transfers[TRANSFER_COUNT] = {
    [TRANSFER_GAMMA22] = {"gamma22", "HP_ENCODING_SRGB_LIKE", "gamma 2.2"},
    [TRANSFER_SRGB] = {"srgb", "HP_ENCODING_SRGB", "sRGB transfer"},
    [TRANSFER_LINEAR] = {"linear", "HP_ENCODING_LINEAR", "linear"},
};

/* The creation date written into every profile: fixed, so the bytes do not depend on when they were built
 * (year, month, day, hour, minute, second, each a big-endian uint16: ICC.1:2010 dateTimeNumber, 4.2). */
static const uint16_t fixed_date[6] = {2025, 1, 1, 0, 0, 0};

static void fail(const char *what)
{
    fprintf(stderr, "make_icc: %s\n", what);
    exit(1);
}

static cmsToneCurve *make_curve(transfer t)
{
    /* IEC 61966-2-1: Y = ((X + 0.055) / 1.055)^2.4 for X >= 0.04045, else X / 12.92. */
    static const cmsFloat64Number srgb[5] = {2.4, 1.0 / 1.055, 0.055 / 1.055, 1.0 / 12.92, 0.04045};
    switch (t) {
    case TRANSFER_SRGB: return cmsBuildParametricToneCurve(NULL, 4, srgb);
    case TRANSFER_GAMMA22: return cmsBuildGamma(NULL, 2.2);
    default: return cmsBuildGamma(NULL, 1.0);
    }
}

static uint8_t *save(cmsHPROFILE h, cmsUInt32Number *size)
{
    if (!cmsSaveProfileToMem(h, NULL, size) || *size == 0)
        fail("lcms2 could not size the profile");
    uint8_t *mem = malloc(*size);
    if (!mem)
        fail("out of memory");
    if (!cmsSaveProfileToMem(h, mem, size))
        fail("lcms2 could not save the profile");
    return mem;
}

static bool set_text(cmsHPROFILE h, cmsTagSignature tag, const char *text)
{
    cmsMLU *mlu = cmsMLUalloc(NULL, 1);
    bool ok = mlu && cmsMLUsetASCII(mlu, "en", "US", text) && cmsWriteTag(h, tag, mlu);
    cmsMLUfree(mlu);
    return ok;
}

/* The profile's bytes, *size of them; malloc'd. */
static uint8_t *make_profile(const output_space *s, transfer t, const char *name, cmsUInt32Number *size)
{
    cmsToneCurve *curve = make_curve(t);
    if (!curve)
        fail("lcms2 could not build a tone curve");
    cmsToneCurve *curves[3] = {curve, curve, curve}; /* one curve: lcms2 links gTRC and bTRC to rTRC */
    cmsHPROFILE h = cmsCreateRGBProfile(&white_d65, &s->primaries, curves);
    cmsFreeToneCurve(curve);
    if (!h)
        fail("lcms2 could not create the profile");
    cmsSetProfileVersion(h, 4.3);
    if (!set_text(h, cmsSigProfileDescriptionTag, name) ||
        !set_text(h, cmsSigCopyrightTag, "No copyright, use freely"))
        fail("lcms2 could not write the text tags");
    cmsUInt32Number first_size;
    uint8_t *first = save(h, &first_size);
    cmsCloseProfile(h);
    for (int i = 0; i < 6; i++) {
        first[24 + 2 * i] = (uint8_t)(fixed_date[i] >> 8);
        first[25 + 2 * i] = (uint8_t)fixed_date[i];
    }

    /* Read back (lcms2 takes the header's date as the profile's), the ID computed, saved again. */
    h = cmsOpenProfileFromMem(first, first_size);
    if (!h || !cmsMD5computeID(h))
        fail("lcms2 could not read back the profile or compute its ID");
    uint8_t *final = save(h, size);
    cmsCloseProfile(h);
    /* Nothing but the ID may differ from the first save. */
    static const uint8_t zero_id[16];
    if (*size != first_size || memcmp(final, first, 84) != 0 || memcmp(final + 100, first + 100, *size - 100) != 0 ||
        memcmp(final + 84, zero_id, 16) == 0)
        fail("the profile changed when read back and saved with its ID");
    free(first);
    return final;
}

static void write_array(FILE *out, const char *name, const uint8_t *bytes, size_t size)
{
    fprintf(out, "static const uint8_t %s[%zu] = {", name, size);
    for (size_t i = 0; i < size; i++)
        fprintf(out, "%s0x%02x,", i % 16 == 0 ? "\n    " : " ", bytes[i]);
    fprintf(out, "\n};\n");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        fail("usage: make_icc OUTPUT.h");
    FILE *out = fopen(argv[1], "w");
    if (!out)
        fail("cannot open the output");
    fprintf(out,
            "/* Generated at build time by tools/make_icc.c (lcms2 %d.%d, zlib %s): the ICC profiles of the output\n"
            " * colour spaces, and each as the data of a PNG iCCP chunk. Not checked in; do not edit. Include after\n"
            " * api/codecs/encode.h (the tables are indexed by its enums). */\n"
            "#ifndef HP_ICC_PROFILES_H\n#define HP_ICC_PROFILES_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n"
            "typedef struct hp_icc_profile {\n"
            "    const char *name;     /* its description tag, also the iCCP chunk's profile name */\n"
            "    const uint8_t *icc;   /* the profile, ICC.1:2010 v4.3 */\n"
            "    size_t icc_size;      /* bytes */\n"
            "    const uint8_t *iccp;  /* a PNG iCCP chunk's data: name, null, method 0, the profile as zlib data */\n"
            "    size_t iccp_size;     /* bytes */\n"
            "} hp_icc_profile;\n\n"
            "typedef struct hp_icc_space {\n"
            "    /* cHRM (PNG 11.3.3.1): white x, y, red x, y, green x, y, blue x, y, each times 100000 */\n"
            "    uint32_t chrm[8];\n"
            "    hp_icc_profile profile[3]; /* by hp_output_encoding */\n"
            "} hp_icc_space;\n\n",
            LCMS_VERSION / 1000, LCMS_VERSION % 1000 / 10, ZLIB_VERSION);

    char names[2][TRANSFER_COUNT][80];
    for (size_t s = 0; s < 2; s++) {
        for (int t = 0; t < TRANSFER_COUNT; t++) {
            snprintf(names[s][t], sizeof(names[s][t]), "hdrpostd %s, %s", spaces[s].title, transfers[t].title);
            cmsUInt32Number size;
            uint8_t *icc = make_profile(&spaces[s], (transfer)t, names[s][t], &size);
            /* iCCP: the name (a PNG keyword: 1-79 printable Latin-1 characters, PNG 11.3.3.3), a null, method 0. */
            const size_t name_len = strlen(names[s][t]);
            uLongf zsize = compressBound(size);
            uint8_t *iccp = malloc(name_len + 2 + zsize);
            if (!iccp)
                fail("out of memory");
            memcpy(iccp, names[s][t], name_len + 1);
            iccp[name_len + 1] = 0; /* compression method 0: zlib's deflate */
            if (compress2(iccp + name_len + 2, &zsize, icc, size, 9) != Z_OK)
                fail("zlib could not compress a profile");
            char id[64];
            fprintf(out, "/* %s: %u bytes, %lu as zlib data */\n", names[s][t], (unsigned)size,
                    (unsigned long)zsize);
            snprintf(id, sizeof(id), "hp_icc_%s_%s", spaces[s].id, transfers[t].id);
            write_array(out, id, icc, size);
            snprintf(id, sizeof(id), "hp_icc_%s_%s_iccp", spaces[s].id, transfers[t].id);
            write_array(out, id, iccp, name_len + 2 + zsize);
            fprintf(out, "\n");
            free(iccp);
            free(icc);
        }
    }

    fprintf(out, "/* By hp_output_colorspace; HP_OUTPUT_SRGB has none (the sRGB chunk says it). */\n"
                 "static const hp_icc_space hp_icc_spaces[HP_OUTPUT_COLORSPACE_COUNT] = {\n");
    for (size_t s = 0; s < 2; s++) {
        const cmsCIExyYTRIPLE *p = &spaces[s].primaries;
        const double xy[8] = {white_d65.x, white_d65.y, p->Red.x, p->Red.y, p->Green.x, p->Green.y, p->Blue.x,
                              p->Blue.y};
        fprintf(out, "    [%s] = {\n        .chrm = {", spaces[s].enum_name);
        for (int i = 0; i < 8; i++)
            fprintf(out, "%s%ld", i ? ", " : "", (long)(xy[i] * 100000.0 + 0.5));
        fprintf(out, "},\n        .profile = {\n");
        for (int t = 0; t < TRANSFER_COUNT; t++)
            fprintf(out,
                    "            [%s] = {\"%s\", hp_icc_%s_%s, sizeof(hp_icc_%s_%s), hp_icc_%s_%s_iccp,\n"
                    "                sizeof(hp_icc_%s_%s_iccp)},\n",
                    transfers[t].enum_name, names[s][t], spaces[s].id, transfers[t].id, spaces[s].id,
                    transfers[t].id, spaces[s].id, transfers[t].id, spaces[s].id, transfers[t].id);
        fprintf(out, "        },\n    },\n");
    }
    fprintf(out, "};\n\n#endif\n");
    if (fclose(out) != 0)
        fail("cannot write the output");
    return 0;
}

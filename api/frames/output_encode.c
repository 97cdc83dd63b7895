/* The answer's encoder and colour tag (api/frames/output_encode.h). */
#include "api/frames/output_encode.h"

#include <stdio.h>

#include "api/codecs/encode_avif.h"
#include "api/codecs/encode_jpeg.h"

static hp_output_colorspace colorspace_of(uint8_t primaries)
{
    return primaries == HP_CICP_PRIMARIES_DISPLAY_P3 ? HP_OUTPUT_DISPLAY_P3
           : primaries == HP_CICP_PRIMARIES_BT2020   ? HP_OUTPUT_REC2020
                                                     : HP_OUTPUT_SRGB;
}

/* Without OCIO: output.colorspace's primaries, the gamma mode's transfer (Kwon's local gamma is read as sRGB's,
 * which it approximates; linear as H.273's linear, 8). */
static void builtin_tag(const hp_params *p, hp_output_tag *tag)
{
    static const uint8_t prim[] = {HP_CICP_PRIMARIES_BT709, HP_CICP_PRIMARIES_DISPLAY_P3, HP_CICP_PRIMARIES_BT2020};
    uint8_t primaries = (size_t)p->output.colorspace < sizeof prim ? prim[p->output.colorspace] : prim[0];
    tag->cicp = (hp_cicp){primaries, p->gamma.mode == HP_GAMMA_LINEAR ? 8 : HP_CICP_TRANSFER_SRGB,
                          primaries == HP_CICP_PRIMARIES_BT2020 ? HP_CICP_MATRIX_BT2020_NCL : HP_CICP_MATRIX_BT601};
}

void hp_output_tag_for(const hp_params *p, const hp_ocio_encoding *ocio, hp_output_tag *tag)
{
    *tag = (hp_output_tag){.out = p->output, .encoding = hp_output_encoding_for_gamma(p->gamma.mode)};
    if (!ocio) {
        builtin_tag(p, tag);
        return;
    }
    tag->encoding = HP_ENCODING_SRGB;
    if (!ocio->known) {
        tag->out.colorspace = HP_OUTPUT_SRGB;
        tag->cicp = HP_CICP_SRGB;
        return;
    }
    tag->out.colorspace = colorspace_of(ocio->primaries);
    tag->cicp = (hp_cicp){ocio->primaries, ocio->transfer,
                          ocio->primaries == HP_CICP_PRIMARIES_BT2020 ? HP_CICP_MATRIX_BT2020_NCL : HP_CICP_MATRIX_BT601};
    tag->use_cicp = ocio->transfer != HP_CICP_TRANSFER_SRGB || tag->out.colorspace == HP_OUTPUT_REC2020;
}

hp_code hp_output_tag_check(const hp_params *p, const hp_ocio_encoding *ocio, const char *display, hp_err *err)
{
    if (!ocio || !ocio->known)
        return HP_OK;
    hp_output_format f = p->output.format;
    uint32_t bits = p->output.bit_depth;
    bool hdr = hp_ocio_encoding_hdr(ocio);
    char what[128];
    if (hdr && !((f == HP_OUTPUT_PNG && bits == 16) || (f == HP_OUTPUT_AVIF && bits > 8)))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.format",
                             "the OCIO display \"%s\" is HDR (%s): it needs output.format png with "
                             "output.bit_depth 16, or avif with 10 or 12 (8 bits band, and WebP and JPEG cannot say "
                             "HDR)", display, hp_ocio_encoding_describe(ocio, what, sizeof what));
    hp_output_tag tag;
    hp_output_tag_for(p, ocio, &tag);
    if (tag.use_cicp && (f == HP_OUTPUT_WEBP || f == HP_OUTPUT_JPEG))
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.format",
                             "the OCIO display \"%s\" encodes with H.273 primaries %u and transfer %u, which %s cannot "
                             "tag (it carries sRGB and Display P3): use png or avif", display, ocio->primaries,
                             ocio->transfer, f == HP_OUTPUT_WEBP ? "WebP" : "JPEG");
    return HP_OK;
}

hp_code hp_output_encode_other(const void *pixels, uint32_t width, uint32_t height, bool alpha,
                               const hp_output_tag *tag, hp_encoded *result, hp_err *err)
{
    const hp_output_params *o = &tag->out;
    if (o->format == HP_OUTPUT_JPEG) {
        hp_jpeg_options j = {.quality = o->quality ? o->quality : 1,
                             .subsampling = o->chroma == HP_CHROMA_444 ? HP_JPEG_SUBSAMPLING_444 : HP_JPEG_SUBSAMPLING_420,
                             .colorspace = o->colorspace};
        return hp_encode_jpeg(pixels, width, height, 8, tag->encoding, &j, result, err);
    }
    hp_avif_options a = HP_AVIF_OPTIONS_DEFAULTS;
    a.depth = o->bit_depth;
    a.quality = o->quality;
    a.subsampling = o->chroma == HP_CHROMA_420 ? HP_AVIF_SUBSAMPLING_420 : HP_AVIF_SUBSAMPLING_444;
    a.cicp = tag->cicp;
    /* Quality 100 is AV1's lossless coding: with 4:4:4 the RGB samples go as they are (matrix 0, identity: G, B,
     * R planes), so the file holds the GPU's code values exactly; a Y'CbCr matrix would round them again. */
    if (o->quality == 100 && a.subsampling == HP_AVIF_SUBSAMPLING_444)
        a.cicp.matrix = 0;
    a.speed = hp_avif_speed_for_effort(o->effort);
    return hp_encode_avif(pixels, width, height, o->bit_depth > 8 ? 16 : 8, alpha, &a, result, err);
}

void hp_output_tag_name(const hp_output_tag *tag, const hp_ocio_encoding *ocio, char *out, size_t size)
{
    static const char *const names[] = {"srgb", "display_p3", "rec2020"};
    const char *name = (size_t)tag->out.colorspace < 3 ? names[tag->out.colorspace] : "?";
    if (ocio && !ocio->known)
        snprintf(out, size, "srgb; assumed (the OCIO display's encoding could not be measured)");
    else if (tag->use_cicp || tag->out.format == HP_OUTPUT_AVIF)
        snprintf(out, size, "%s; cicp=%u/%u/%u/1", name, tag->cicp.primaries, tag->cicp.transfer,
                 tag->out.format != HP_OUTPUT_AVIF                                          ? 0
                 : tag->out.quality == 100 && tag->out.chroma != HP_CHROMA_420 ? 0 /* lossless: RGB as it is */
                                                                                : tag->cicp.matrix);
    else
        snprintf(out, size, "%s", name);
}

/* The answer's image file from the image the GPU read back: which encoder (output.format) and which colour tag
 * (issue 34). Without OCIO the tag is output.colorspace's and the transfer the gamma mode's; through an OCIO view
 * it is what that display measures as (pipeline/ocio_encoding.h): sRGB and Display P3 with sRGB's transfer take
 * the files' usual tags (sRGB chunk, the P3 ICC profile), anything else PNG's cICP or AVIF's CICP, and a display
 * that measures as nothing known is tagged sRGB, as an untagged file would be read. */
#ifndef HP_OUTPUT_ENCODE_H
#define HP_OUTPUT_ENCODE_H

#include <stdbool.h>

#include "api/codecs/encode.h"
#include "api/codecs/encode_png_hdr.h"
#include "pipeline/ocio_encoding.h"
#include "pipeline/params.h"

typedef struct hp_output_tag {
    hp_output_params out;        /* the request's, with the colour space the file is tagged with */
    hp_output_encoding encoding; /* the transfer hint of hp_encode's tags */
    hp_cicp cicp;                /* for AVIF always, for PNG when use_cicp */
    bool use_cicp;               /* PNG: the cICP chunk alone (no sRGB chunk or profile can say it) */
} hp_output_tag;

/* ocio: the view's measured encoding, or NULL without a view. */
void hp_output_tag_for(const hp_params *p, const hp_ocio_encoding *ocio, hp_output_tag *tag);

/* Whether the format can carry the view's encoding at the request's depth; a 400 message in err when not (HDR
 * needs PNG of 16 bits or AVIF of 10 or 12; WebP and JPEG carry sRGB and Display P3 only). */
hp_code hp_output_tag_check(const hp_params *p, const hp_ocio_encoding *ocio, const char *display, hp_err *err);

/* JPEG or AVIF of an RGBA8 or RGBA16 image (16: AVIF of 10 or 12 bits), as the tag says. */
hp_code hp_output_encode_other(const void *pixels, uint32_t width, uint32_t height, bool alpha,
                               const hp_output_tag *tag, hp_encoded *result, hp_err *err);

/* The tag as the X-Output-Colorspace header and the JSON answer name it. */
void hp_output_tag_name(const hp_output_tag *tag, const hp_ocio_encoding *ocio, char *out, size_t size);

#endif

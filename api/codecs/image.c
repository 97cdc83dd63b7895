/* The two public steps over the table of formats: each format is a decoder of its own file (image_exr.c, with its
 * ZIP chunks for the GPU in image_exr_zip.c; image_rgbe.c; image_pfm.c), found by its first bytes. */
#include <stdio.h>
#include <string.h>

#include "api/codecs/image.h"
#include "api/codecs/image_decoder.h"
#include "pipeline/reduce.h"

_Static_assert((int)HP_LAYOUT_RGBA16F == (int)HP_PIXEL_RGBA16F, "layout numbering");
_Static_assert((int)HP_LAYOUT_RGBA32F == (int)HP_PIXEL_RGBA32F, "layout numbering");

size_t hp_pixel_layout_size(hp_pixel_layout layout)
{
    switch (layout) {
    case HP_LAYOUT_RGBA16F: return 8;
    case HP_LAYOUT_RGBA32F: return 16;
    }
    return 0;
}


/* The formats, in the order their magic is tried (no two magics overlap). A format's hp_image_format is its row
 * here plus one: the three named in the enum sit at their values, and a new format is its file's
 * hp_image_decoder and a row at the end (api/codecs/image_decoder.h); code that never names it needs no value. */
static const hp_image_decoder *const decoders[] = {
    [HP_IMAGE_EXR - 1] = &hp_exr_decoder,
    [HP_IMAGE_RGBE - 1] = &hp_rgbe_decoder,
    [HP_IMAGE_PFM - 1] = &hp_pfm_decoder,
};
#define DECODER_COUNT (sizeof decoders / sizeof decoders[0])

static const hp_image_decoder *decoder_of(hp_image_format format)
{
    return format >= 1 && (size_t)format <= DECODER_COUNT ? decoders[format - 1] : NULL;
}

const char *hp_image_format_name(hp_image_format format)
{
    const hp_image_decoder *d = decoder_of(format);
    return d ? d->name : "unknown";
}

hp_image_format hp_image_detect(const uint8_t *bytes, size_t len)
{
    for (size_t i = 0; bytes && i < DECODER_COUNT; i++)
        if (decoders[i]->sniff(bytes, len))
            return (hp_image_format)(i + 1);
    return HP_IMAGE_UNKNOWN;
}

hp_code hp_image_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                       hp_err *err)
{
    if (!info || (!bytes && len > 0))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_image_probe: info and bytes are required");
    memset(info, 0, sizeof(*info));
    info->part_count = 1;
    info->rgbe_exposure = 1.0;
    info->pfm_scale = 1.0;
    hp_decode_options o = hp_image_options_resolve(opt);

    info->format = hp_image_detect(bytes, len);
    const hp_image_decoder *d = decoder_of(info->format);
    if (d)
        return d->probe(bytes, len, &o, info, err);
    if (len == 0)
        return hp_fail(err, HP_ERR_UNSUPPORTED_FORMAT, "the image is empty (0 bytes)");
    char shown[3 * 8 + 1] = "", expected[256] = "";
    size_t n = len < 8 ? len : 8, used = 0;
    for (size_t i = 0; i < n; i++)
        snprintf(shown + 3 * i, sizeof(shown) - 3 * i, "%s%02x", i ? " " : "", bytes[i]);
    for (size_t i = 0; i < DECODER_COUNT && used < sizeof expected; i++) {
        const char *sep = i == 0 ? "" : i + 1 == DECODER_COUNT ? " or " : ", ";
        int w = snprintf(expected + used, sizeof expected - used, "%s%s", sep, decoders[i]->magic);
        used += w > 0 ? (size_t)w : 0;
    }
    return hp_fail(err, HP_ERR_UNSUPPORTED_FORMAT, "unknown image format (first bytes %s): expected %s", shown,
                   expected);
}

/* The fields a decode relies on: the caller sized its buffers from these. */
static bool info_agrees(const hp_image_info *a, const hp_image_info *b)
{
    for (int s = 0; s < 4; s++)
        if (strncmp(a->channel_names[s], b->channel_names[s], HP_IMAGE_NAME_MAX) != 0)
            return false;
    return a->format == b->format && a->width == b->width && a->height == b->height && a->grey == b->grey &&
           a->has_alpha == b->has_alpha && a->has_depth == b->has_depth && a->part == b->part &&
           strncmp(a->depth_channel, b->depth_channel, HP_IMAGE_NAME_MAX) == 0;
}

hp_code hp_image_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                        void *rgba_dst, hp_pixel_layout dst_layout, float *depth_dst, hp_err *err)
{
    if (!info || !rgba_dst)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_image_decode: info and rgba_dst are required");
    if (hp_pixel_layout_size(dst_layout) == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_image_decode: unknown pixel layout %d", (int)dst_layout);

    hp_image_info fresh;
    hp_code code = hp_image_probe(bytes, len, opt, &fresh, err);
    if (code != HP_OK)
        return code;
    if (!info_agrees(info, &fresh))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "hp_image_decode: info does not describe these bytes with these options (%s %ux%u probed, "
                       "%s %ux%u given)",
                       hp_image_format_name(fresh.format), fresh.width, fresh.height,
                       hp_image_format_name(info->format), info->width, info->height);
    *info = fresh;

    hp_decode_options o = hp_image_options_resolve(opt);
    hp_image_dest dest = {
        .rgba = rgba_dst,
        .layout = dst_layout,
        .depth = fresh.has_depth ? depth_dst : NULL,
        .width = fresh.width,
        .height = fresh.height,
    };
    const hp_image_decoder *d = decoder_of(fresh.format);
    if (!d)
        return hp_fail(err, HP_ERR_INTERNAL, "hp_image_decode: probe accepted an unknown format");
    hp_depth_stats stats = {0};
    code = d->decode(bytes, len, &o, &fresh, &dest, &stats, err);
    info->depth_background = stats.background;
    info->depth_nonfinite = stats.nonfinite;
    return code;
}

hp_code hp_image_check_limits_public(uint32_t width, uint32_t height, const hp_decode_options *opt, hp_err *err)
{
    hp_decode_options o = hp_image_options_resolve(opt);
    return hp_image_check_limits("raw frame", width, height, &o, err);
}

/* Format detection, limits and the two public steps; the formats live in image_exr.c (and its ZIP chunks
 * for the GPU in image_exr_zip.c), image_rgbe.c and image_pfm.c. */
#include <stdio.h>
#include <string.h>

#include "api/image_internal.h"
#include "pipeline/cpu_reference.h"

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

const char *hp_image_format_name(hp_image_format format)
{
    switch (format) {
    case HP_IMAGE_EXR: return "exr";
    case HP_IMAGE_RGBE: return "rgbe";
    case HP_IMAGE_PFM: return "pfm";
    case HP_IMAGE_UNKNOWN: break;
    }
    return "unknown";
}

static bool starts_with(const uint8_t *bytes, size_t len, const char *magic)
{
    size_t n = strlen(magic);
    return len >= n && memcmp(bytes, magic, n) == 0;
}

hp_image_format hp_image_detect(const uint8_t *bytes, size_t len)
{
    static const uint8_t exr_magic[4] = {0x76, 0x2f, 0x31, 0x01}; /* 20000630 little-endian */
    if (!bytes)
        return HP_IMAGE_UNKNOWN;
    if (len >= 4 && memcmp(bytes, exr_magic, 4) == 0)
        return HP_IMAGE_EXR;
    if (starts_with(bytes, len, "#?RADIANCE") || starts_with(bytes, len, "#?RGBE"))
        return HP_IMAGE_RGBE;
    /* "PF" or "Pf" then the whitespace that ends the token: "PFx" is not a PFM */
    if (len >= 3 && bytes[0] == 'P' && (bytes[1] == 'F' || bytes[1] == 'f') &&
        (bytes[2] == '\n' || bytes[2] == '\r' || bytes[2] == ' ' || bytes[2] == '\t'))
        return HP_IMAGE_PFM;
    return HP_IMAGE_UNKNOWN;
}

hp_decode_options hp_image_options_resolve(const hp_decode_options *opt)
{
    hp_decode_options defaults = HP_DECODE_OPTIONS_DEFAULTS;
    hp_decode_options o = opt ? *opt : defaults;
    if (o.max_width == 0)
        o.max_width = defaults.max_width;
    if (o.max_height == 0)
        o.max_height = defaults.max_height;
    if (o.max_pixels == 0)
        o.max_pixels = defaults.max_pixels;
    return o;
}

hp_code hp_image_check_limits(const char *what, uint64_t width, uint64_t height, const hp_decode_options *opt,
                              hp_err *err)
{
    if (width > opt->max_width)
        return hp_fail(err, HP_ERR_TOO_LARGE, "%s: width %llu exceeds the limit of %u pixels (max_width)", what,
                       (unsigned long long)width, opt->max_width);
    if (height > opt->max_height)
        return hp_fail(err, HP_ERR_TOO_LARGE, "%s: height %llu exceeds the limit of %u pixels (max_height)",
                       what, (unsigned long long)height, opt->max_height);
    /* both sides are at most 2^32 here, so the product fits */
    if (width * height > opt->max_pixels)
        return hp_fail(err, HP_ERR_TOO_LARGE, "%s: %llu x %llu = %llu pixels exceeds the limit of %llu (max_pixels)",
                       what, (unsigned long long)width, (unsigned long long)height,
                       (unsigned long long)(width * height), (unsigned long long)opt->max_pixels);
    return HP_OK;
}

void hp_image_store_pixel(const hp_image_dest *dest, size_t index, float r, float g, float b, float a)
{
    if (dest->layout == HP_LAYOUT_RGBA32F) {
        float *p = (float *)dest->rgba + index * 4;
        p[0] = r, p[1] = g, p[2] = b, p[3] = a;
    } else {
        uint16_t *p = (uint16_t *)dest->rgba + index * 4;
        p[0] = hp_float_to_half(r), p[1] = hp_float_to_half(g), p[2] = hp_float_to_half(b);
        p[3] = hp_float_to_half(a);
    }
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

    hp_image_format format = hp_image_detect(bytes, len);
    info->format = format;
    switch (format) {
    case HP_IMAGE_EXR: return hp_exr_probe(bytes, len, &o, info, err);
    case HP_IMAGE_RGBE: return hp_rgbe_probe(bytes, len, &o, info, err);
    case HP_IMAGE_PFM: return hp_pfm_probe(bytes, len, &o, info, err);
    case HP_IMAGE_UNKNOWN: break;
    }
    if (len == 0)
        return hp_fail(err, HP_ERR_UNSUPPORTED_FORMAT, "the image is empty (0 bytes)");
    char shown[3 * 8 + 1] = "";
    size_t n = len < 8 ? len : 8;
    for (size_t i = 0; i < n; i++)
        snprintf(shown + 3 * i, sizeof(shown) - 3 * i, "%s%02x", i ? " " : "", bytes[i]);
    return hp_fail(err, HP_ERR_UNSUPPORTED_FORMAT,
                   "unknown image format (first bytes %s): expected OpenEXR (76 2f 31 01), Radiance HDR "
                   "(\"#?RADIANCE\" or \"#?RGBE\") or PFM (\"PF\" or \"Pf\")",
                   shown);
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
    switch (fresh.format) {
    case HP_IMAGE_EXR: {
        hp_depth_stats stats = {0};
        code = hp_exr_decode(bytes, len, &o, &fresh, &dest, &stats, err);
        info->depth_background = stats.background;
        info->depth_nonfinite = stats.nonfinite;
        return code;
    }
    case HP_IMAGE_RGBE: return hp_rgbe_decode(bytes, len, &o, &fresh, &dest, err);
    case HP_IMAGE_PFM: return hp_pfm_decode(bytes, len, &o, &fresh, &dest, err);
    case HP_IMAGE_UNKNOWN: break;
    }
    return hp_fail(err, HP_ERR_INTERNAL, "hp_image_decode: probe accepted an unknown format");
}

hp_code hp_image_check_limits_public(uint32_t width, uint32_t height, const hp_decode_options *opt, hp_err *err)
{
    hp_decode_options o = hp_image_options_resolve(opt);
    return hp_image_check_limits("raw frame", width, height, &o, err);
}

/* What every decoder shares (api/codecs/image_decoder.h): the options' defaults, the limits, storing a pixel. */
#include "api/codecs/image_decoder.h"

#include "pipeline/cpu_reference.h"

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

void hp_image_info_whole(hp_image_info *info, uint32_t width, uint32_t height)
{
    info->width = width, info->height = height;
    info->data_window = info->display_window = (hp_image_window){0, 0, (int32_t)width - 1, (int32_t)height - 1};
}

/* Makes a large benchmark or test frame from a small real one (a real 4K render is too large to keep in the
 * repository; tests/data/README.md lists the real frames): decodes FRAME and makes it FACTOR times larger,
 * then writes an OpenEXR with the given compression, in scanlines or in 64x64 tiles. The HTTP tests also use
 * it (factor 1) for one frame in every compression and shape the decoders must take.
 *
 * Usage: make_frame IN OUT.exr FACTOR [none|rle|zips|zip|piz|pxr24|b44|b44a|dwaa|dwab] [tiled] [OPTION]...
 *   (DWAA and DWAB through OpenEXR's C++ library where the C core cannot write them: increasing Y only)
 *   --mirror        larger by tiling the frame, every other tile mirrored, instead of bilinear interpolation:
 *                   the source's own texture and grain at any size (interpolation smooths them away, which
 *                   makes a frame far easier to compress than the renders and photographs it stands for)
 *   --float         colour and alpha as 32-bit floats (else half)
 *   --channels C    rgb, rgba or y (luminance, Rec. 709 weights); default: the source's, RGBA where it has alpha
 *   --depth         the source's depth beside the colour as Z (float; where it has one): a render's own AOV
 *   --aovs          more render passes, as a renderer writes them: the depth as --depth, an object ID (uint),
 *                   normals N.X, N.Y, N.Z (float; from the picture's slope, so as noisy as it is) and
 *                   diffuse.R, .G, .B (half)
 *   --decreasing    decreasing Y line order (the chunks written bottom first) */
#include <math.h>
#include <openexr.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "pipeline/cpu_reference.h"
#include "tools/exr_write.h"

typedef struct frame_options {
    int compression, factor;
    bool tiled, mirror, is_float, depth, aovs, decreasing;
    const char *channels; /* NULL: the source's */
} frame_options;

static int usage(void)
{
    fprintf(stderr, "usage: make_frame IN OUT.exr FACTOR [none|rle|zips|zip|piz|pxr24|b44|b44a|dwaa|dwab] [tiled] "
                    "[--mirror] [--float] [--channels rgb|rgba|y] [--depth] [--aovs] [--decreasing]\n");
    return 2;
}

static bool parse(int argc, char **argv, frame_options *o)
{
    static const char *const names[] = {"none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa", "dwab"};
    *o = (frame_options){.compression = EXR_COMPRESSION_ZIP, .factor = argc > 3 ? atoi(argv[3]) : 0};
    for (int i = 4; i < argc; i++) {
        int c = -1;
        for (int k = 0; k < (int)(sizeof(names) / sizeof(names[0])); k++)
            if (!strcmp(argv[i], names[k]))
                c = k; /* exr_compression_t's order */
        if (c >= 0)
            o->compression = c;
        else if (!strcmp(argv[i], "tiled"))
            o->tiled = true;
        else if (!strcmp(argv[i], "--mirror"))
            o->mirror = true;
        else if (!strcmp(argv[i], "--float"))
            o->is_float = true;
        else if (!strcmp(argv[i], "--aovs"))
            o->aovs = o->depth = true;
        else if (!strcmp(argv[i], "--depth"))
            o->depth = true;
        else if (!strcmp(argv[i], "--decreasing"))
            o->decreasing = true;
        else if (!strcmp(argv[i], "--channels") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "rgb") || !strcmp(argv[i + 1], "rgba") || !strcmp(argv[i + 1], "y")))
            o->channels = argv[++i];
        else
            return false;
    }
    return argc >= 4 && o->factor >= 1;
}

/* The source's pixel for (x, y) of the larger frame: mirrored tiles, or bilinear. */
static void sample(const float *src, const float *zsrc, int sw, int sh, const frame_options *o, int x, int y,
                   float out[5])
{
    if (o->mirror) {
        int tx = x / sw, ty = y / sh, sx = x % sw, sy = y % sh;
        sx = tx % 2 ? sw - 1 - sx : sx;
        sy = ty % 2 ? sh - 1 - sy : sy;
        memcpy(out, src + 4 * ((size_t)sy * sw + sx), 16);
        out[4] = zsrc ? zsrc[(size_t)sy * sw + sx] : 0;
        return;
    }
    float fy = ((float)y + 0.5f) / (float)o->factor - 0.5f, fx = ((float)x + 0.5f) / (float)o->factor - 0.5f;
    int y0 = fy < 0 ? 0 : (int)fy, x0 = fx < 0 ? 0 : (int)fx;
    int y1 = y0 + 1 < sh ? y0 + 1 : y0, x1 = x0 + 1 < sw ? x0 + 1 : x0;
    float ty = fy < 0 ? 0 : fy - (float)y0, tx = fx < 0 ? 0 : fx - (float)x0;
    for (int c = 0; c < 5; c++) {
        const float *p = c < 4 ? src : zsrc;
        int n = c < 4 ? 4 : 1, k = c < 4 ? c : 0;
        if (!p) {
            out[c] = 0;
            continue;
        }
        float a = p[n * ((size_t)y0 * sw + x0) + k] + (p[n * ((size_t)y0 * sw + x1) + k] - p[n * ((size_t)y0 * sw + x0) + k]) * tx;
        float b = p[n * ((size_t)y1 * sw + x0) + k] + (p[n * ((size_t)y1 * sw + x1) + k] - p[n * ((size_t)y1 * sw + x0) + k]) * tx;
        out[c] = a + (b - a) * ty;
    }
}

enum { CH_R, CH_G, CH_B, CH_A, CH_Y, CH_Z, CH_ID, CH_NX, CH_NY, CH_NZ, CH_DR, CH_DG, CH_DB, CH_COUNT };
static const char *const ch_names[CH_COUNT] = {"R", "G", "B", "A", "Y", "Z", "ID", "N.X", "N.Y", "N.Z",
                                               "diffuse.R", "diffuse.G", "diffuse.B"};

static float luminance(const float *p) { return 0.2126f * p[0] + 0.7152f * p[1] + 0.0722f * p[2]; }

/* Channel k's value at (x, y), from the frame's RGBA and depth (img: w x h x 5). The normals come from the
 * luminance's slope, as a bump map would make them; the ID from its coarse level, regions as objects are. */
static double channel_value(int k, const float *img, int w, int h, int x, int y)
{
    const float *p = img + 5 * ((size_t)y * w + x);
    switch (k) {
    case CH_Y:
        return luminance(p);
    case CH_Z:
        return p[4];
    case CH_ID:
        return (double)(uint32_t)fminf(floorf(log2f(1.0f + fmaxf(luminance(p), 0.0f)) * 8.0f), 4095.0f);
    case CH_NX:
    case CH_NY:
    case CH_NZ: {
        const float *px = img + 5 * ((size_t)y * w + (x + 1 < w ? x + 1 : x));
        const float *py = img + 5 * ((size_t)(y + 1 < h ? y + 1 : y) * w + x);
        double dx = luminance(px) - luminance(p), dy = luminance(py) - luminance(p), n = sqrt(dx * dx + dy * dy + 1);
        return k == CH_NX ? -dx / n : k == CH_NY ? -dy / n : 1 / n;
    }
    case CH_DR:
    case CH_DG:
    case CH_DB:
        return 0.7 * p[k - CH_DR];
    default:
        return p[k];
    }
}

static int ch_type(int k, const frame_options *o)
{
    if (k <= CH_Y)
        return o->is_float ? EXR_PIXEL_FLOAT : EXR_PIXEL_HALF;
    return k == CH_ID ? EXR_PIXEL_UINT : k >= CH_DR ? EXR_PIXEL_HALF : EXR_PIXEL_FLOAT;
}

/* The channels written, in EXR's order (by name, as the file lists them). */
static int pick_channels(const frame_options *o, const hp_image_info *info, int *out)
{
    const char *c = o->channels ? o->channels : info->has_alpha ? "rgba" : "rgb";
    bool want[CH_COUNT] = {0};
    if (!strcmp(c, "y"))
        want[CH_Y] = true;
    else
        want[CH_R] = want[CH_G] = want[CH_B] = true;
    want[CH_A] = !strcmp(c, "rgba");
    want[CH_Z] = o->depth && info->has_depth;
    for (int k = CH_ID; k < CH_COUNT && o->aovs; k++)
        want[k] = true;
    int n = 0;
    for (int k = 0; k < CH_COUNT; k++)
        if (want[k])
            out[n++] = k;
    for (int i = 1; i < n; i++) /* insertion sort by name: the C core writes the list as given */
        for (int j = i; j > 0 && strcmp(ch_names[out[j - 1]], ch_names[out[j]]) > 0; j--) {
            int t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static bool write_frame(const char *path, const float *img, int w, int h, const frame_options *o,
                        const hp_image_info *info, size_t *written)
{
    int ks[CH_COUNT], n = pick_channels(o, info, ks);
    hp_exr_channel channels[CH_COUNT];
    void *planes[CH_COUNT] = {0};
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        int type = ch_type(ks[i], o);
        ok = (planes[i] = malloc((size_t)w * h * hp_exr_type_size(type))) != NULL;
        for (int y = 0; y < h && ok; y++)
            for (int x = 0; x < w; x++) {
                double v = channel_value(ks[i], img, w, h, x, y);
                size_t at = (size_t)y * w + x;
                if (type == EXR_PIXEL_HALF)
                    ((uint16_t *)planes[i])[at] = hp_float_to_half((float)v);
                else if (type == EXR_PIXEL_FLOAT)
                    ((float *)planes[i])[at] = (float)v;
                else
                    ((uint32_t *)planes[i])[at] = (uint32_t)v;
            }
        channels[i] = (hp_exr_channel){ch_names[ks[i]], type, planes[i]};
    }
    hp_exr_spec spec = {.width = w, .height = h, .display_w = w, .display_h = h, .compression = o->compression,
                        .tile = o->tiled ? 64 : 0, .decreasing_y = o->decreasing, .channels = channels,
                        .channel_count = n};
    uint8_t *out = NULL;
    size_t out_len = 0;
#ifdef HP_EXR_WRITE_CXX
    if (o->compression >= EXR_COMPRESSION_DWAA)
        ok = ok && !o->decreasing && hp_exr_write_cxx(&spec, &out, &out_len);
    else
#endif
        ok = ok && hp_exr_write_core(&spec, 1, &out, &out_len);
    FILE *f = ok ? fopen(path, "wb") : NULL;
    ok = f && fwrite(out, 1, out_len, f) == out_len;
    if (f)
        ok = fclose(f) == 0 && ok;
    for (int i = 0; i < n; i++)
        free(planes[i]);
    free(out);
    *written = out_len;
    return ok;
}

int main(int argc, char **argv)
{
    frame_options o;
    if (!parse(argc, argv, &o))
        return usage();
    hp_image_info info;
    hp_err err = {0};
    float *zsrc = NULL, *src = hp_image_decode_file(argv[1], HP_LAYOUT_RGBA32F, &zsrc, &info, &err);
    if (!src) {
        fprintf(stderr, "make_frame: %s\n", err.message);
        return 1;
    }
    int sw = (int)info.width, sh = (int)info.height, w = sw * o.factor, h = sh * o.factor;
    float *img = malloc((size_t)w * h * 5 * sizeof(float));
    if (!img) {
        fprintf(stderr, "make_frame: out of memory\n");
        return 1;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            sample(src, zsrc, sw, sh, &o, x, y, img + 5 * ((size_t)y * w + x));
    size_t written;
    if (!write_frame(argv[2], img, w, h, &o, &info, &written)) {
        fprintf(stderr, "make_frame: %s could not be written\n", argv[2]);
        return 1;
    }
    static const char *const comp[] = {"none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa", "dwab"};
    printf("make_frame: %s, %dx%d, %s %s %s%s%s%s%s, %zu bytes\n", argv[2], w, h, o.is_float ? "float" : "half",
           comp[o.compression], o.channels ? o.channels : info.has_alpha ? "rgba" : "rgb", o.aovs ? " with AOVs" : o.depth && info.has_depth ? " with depth" : "",
           o.mirror ? ", mirrored tiles" : "", o.tiled ? ", 64x64 tiles" : "", o.decreasing ? ", decreasing Y" : "",
           written);
    free(img);
    free(zsrc);
    free(src);
    return 0;
}

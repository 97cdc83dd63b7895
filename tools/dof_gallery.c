/* The depth-of-field pages of docs/gallery/: a real render with its depth channel through the daemon's
 * own frame graph, focused near, in the middle and far (the 10th, 50th and 90th percentile of the
 * frame's depth, the sky left out), beside the same frame with DOF off, plus a close-up of the bokeh of
 * its brightest out-of-focus lights. tools/make_gallery.sh runs it; any Vulkan device will do.
 *
 * Usage: dof_gallery OUT_DIR FRAME.exr [focal_mm f_stop]   (HP_GALLERY_PNG=1: PNG instead of WebP)
 * Writes OUT_DIR/dof_{off,near,middle,far}.webp and OUT_DIR/dof_bokeh_closeup.png, and prints what it
 * chose (focus distances, CoC range, sprites). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/encode.h"
#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "common/log.h"
#include "pipeline/frame_graph.h"

static hp_err err;

static int fail(const char *what)
{
    fprintf(stderr, "dof_gallery: %s: %s\n", what, err.message);
    return 1;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static bool write_image(const char *path, const uint8_t *rgba, uint32_t w, uint32_t h, hp_output_format format)
{
    hp_output_params out = {.format = format, .quality = 90, .effort = 4, .bit_depth = 8};
    hp_encoded enc;
    if (hp_encode(rgba, w, h, 8, false, HP_ENCODING_SRGB_LIKE, &out, &enc, &err) != HP_OK)
        return false;
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(enc.data, 1, enc.size, f) == enc.size;
    if (f)
        fclose(f);
    printf("dof_gallery: %s (%ux%u, %zu bytes)\n", path, w, h, enc.size);
    hp_encoded_free(&enc);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: dof_gallery OUT_DIR FRAME.exr [focal_mm f_stop]\n");
        return 2;
    }
    hp_log_set_level(HP_LOG_WARN);
    hp_image_info info;
    float *depth = NULL;
    float *rgba = hp_image_decode_file(argv[2], HP_LAYOUT_RGBA32F, &depth, &info, &err);
    if (!rgba) {
        fprintf(stderr, "dof_gallery: %s\n", err.message);
        return 1;
    }
    if (!depth) {
        fprintf(stderr, "dof_gallery: %s has no depth channel\n", argv[2]);
        return 1;
    }
    uint32_t w = info.width, h = info.height;
    float *sorted = malloc((size_t)w * h * 4);
    size_t n = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        if (depth[i] > 0 && depth[i] < HP_IMAGE_DEPTH_BACKGROUND)
            sorted[n++] = depth[i];
    if (n == 0) {
        fprintf(stderr, "dof_gallery: no finite depth in %s\n", argv[2]);
        return 1;
    }
    qsort(sorted, n, sizeof(float), cmp_float);

    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.device = getenv("HDRPOST_DEVICE");
    hp_gpu *gpu;
    hp_frame_graph *graph;
    if (hp_gpu_create(&cfg, &gpu, &err) != HP_OK || hp_frame_graph_create(gpu, &graph, &err) != HP_OK)
        return fail("GPU");

    /* Every parameter at its default (docs/PARAMETERS.md), the 85 mm f/1.4 preset unless told otherwise. */
    hp_params params;
    hp_params_defaults(&params);
    params.dof.enabled = true;
    params.dof.lens = HP_LENS_85MM_F1_4;
    if (argc == 5) {
        params.dof.focal_length_auto = params.dof.f_stop_auto = false;
        params.dof.focal_length_mm = atof(argv[3]);
        params.dof.f_stop = atof(argv[4]);
    }
    params.dof.focus_auto = false;
    hp_dof_settings s;
    hp_dof_settings_from_params(&params, depth, w, h, &s);
    static const struct { const char *name; double percentile; } shots[] = {
        {"off", -1}, {"near", 0.10}, {"middle", 0.50}, {"far", 0.90}};
    uint8_t *near_image = NULL;
    for (size_t k = 0; k < sizeof(shots) / sizeof(shots[0]); k++) {
        hp_frame_params fp;
        hp_frame_params_defaults(&fp);
        fp.params = params;
        fp.dof = shots[k].percentile >= 0;
        if (fp.dof)
            s.focus_distance_m = sorted[(size_t)(shots[k].percentile * (double)(n - 1))];
        fp.dof_settings = s;
        hp_frame_desc desc = {.width = w, .height = h, .format = HP_PIXEL_RGBA32F};
        void *staging;
        float *dstage;
        hp_frame_result res;
        if (hp_frame_graph_begin(graph, &desc, &staging, &err) != HP_OK ||
            hp_frame_graph_depth(graph, &dstage, &err) != HP_OK)
            return fail("frame");
        memcpy(staging, rgba, (size_t)w * h * 16);
        memcpy(dstage, depth, (size_t)w * h * 4);
        if (hp_frame_graph_run(graph, &fp, &res, &err) != HP_OK)
            return fail("run");
        if (fp.dof)
            printf("dof_gallery: %s: focus %.2f m, %.0f mm f/%.1f, CoC at infinity %.1f px, sprites %u of %u\n",
                   shots[k].name, s.focus_distance_m, s.focal_length_mm, s.f_stop, hp_dof_coc_k(&s, w),
                   res.bokeh_drawn, res.bokeh_wanted);
        char path[4096];
        bool png = getenv("HP_GALLERY_PNG") != NULL; /* for viewers without WebP */
        snprintf(path, sizeof(path), "%s/dof_%s.%s", argv[1], shots[k].name, png ? "png" : "webp");
        if (!write_image(path, res.pixels, w, h, png ? HP_OUTPUT_PNG : HP_OUTPUT_WEBP))
            return fail(path);
        if (k == 1) {
            near_image = malloc((size_t)w * h * 4);
            memcpy(near_image, res.pixels, (size_t)w * h * 4);
        }
    }

    /* The close-up: a window of a third of the frame around the brightest pixels beyond the near focus
     * (where the sprites are), at full resolution. */
    double best = -1;
    uint32_t bx = w / 2, by = h / 2;
    double focus_near = sorted[(size_t)(0.10 * (double)(n - 1))];
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            double lum = 0.2126 * rgba[4 * i] + 0.7152 * rgba[4 * i + 1] + 0.0722 * rgba[4 * i + 2];
            if (depth[i] > 4 * focus_near && lum > best)
                best = lum, bx = x, by = y;
        }
    }
    uint32_t cw = w / 3, ch = h / 3;
    uint32_t x0 = bx > cw / 2 ? bx - cw / 2 : 0, y0 = by > ch / 2 ? by - ch / 2 : 0;
    x0 = x0 + cw > w ? w - cw : x0;
    y0 = y0 + ch > h ? h - ch : y0;
    uint8_t *crop = malloc((size_t)cw * ch * 4);
    for (uint32_t y = 0; y < ch; y++)
        memcpy(crop + (size_t)y * cw * 4, near_image + ((size_t)(y0 + y) * w + x0) * 4, (size_t)cw * 4);
    char path[4096];
    snprintf(path, sizeof(path), "%s/dof_bokeh_closeup.png", argv[1]);
    if (!write_image(path, crop, cw, ch, HP_OUTPUT_PNG))
        return fail(path);
    printf("dof_gallery: close-up at (%u, %u), %ux%u, around the brightest light behind the near focus\n", x0, y0, cw,
           ch);
    free(crop), free(near_image), free(rgba), free(depth), free(sorted);
    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    return 0;
}

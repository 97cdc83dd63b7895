/* The contact sheets of docs/gallery/: real HDR frames through every tone operator at default parameters,
 * through every named look, or read in the right and the wrong colour space, on whatever GPU the loader
 * offers (lavapipe is fine: the frames are small), so a person can judge them at a glance.
 * tools/make_gallery.sh runs it.
 *
 * Usage: gallery [--looks | --acescg] OUT.png FRAME... (EXR, Radiance HDR or PFM)
 * Rows are frames; columns are operators, looks (--looks), or (--acescg) the Rec.709 frame, the same frame
 * converted to ACEScg by this tool in double precision and read as ACEScg, and read as Rec.709 (what
 * hdrpostd did before issue 17). Each cell is the 8-bit output downscaled by area averaging, with its
 * column's name above the first row and the file name before each row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/encode.h"
#include "api/frames/params_json.h"
#include "api/codecs/image.h"
#include "api/codecs/image_file.h"
#include "common/log.h"
#include "pipeline/cpu_reference.h"
#include "pipeline/frame_graph.h"
#include "pipeline/looks.h"

#define CELL_W 240
#define LABEL_H 14
#define GAP 4

/* A 5x7 bitmap font for the labels: capitals, digits and a few marks, one byte per row (low 5 bits). */
static const struct {
    char c;
    uint8_t rows[7];
} glyphs[] = {
    {'A', {14, 17, 17, 31, 17, 17, 17}}, {'B', {30, 17, 17, 30, 17, 17, 30}}, {'C', {14, 17, 16, 16, 16, 17, 14}},
    {'D', {30, 17, 17, 17, 17, 17, 30}}, {'E', {31, 16, 16, 30, 16, 16, 31}}, {'F', {31, 16, 16, 30, 16, 16, 16}},
    {'G', {14, 17, 16, 23, 17, 17, 15}}, {'H', {17, 17, 17, 31, 17, 17, 17}}, {'I', {14, 4, 4, 4, 4, 4, 14}},
    {'J', {7, 2, 2, 2, 2, 18, 12}},      {'K', {17, 18, 20, 24, 20, 18, 17}}, {'L', {16, 16, 16, 16, 16, 16, 31}},
    {'M', {17, 27, 21, 21, 17, 17, 17}}, {'N', {17, 17, 25, 21, 19, 17, 17}}, {'O', {14, 17, 17, 17, 17, 17, 14}},
    {'P', {30, 17, 17, 30, 16, 16, 16}}, {'Q', {14, 17, 17, 17, 21, 18, 13}}, {'R', {30, 17, 17, 30, 20, 18, 17}},
    {'S', {15, 16, 16, 14, 1, 1, 30}},   {'T', {31, 4, 4, 4, 4, 4, 4}},       {'U', {17, 17, 17, 17, 17, 17, 14}},
    {'V', {17, 17, 17, 17, 17, 10, 4}},  {'W', {17, 17, 17, 21, 21, 21, 10}}, {'X', {17, 17, 10, 4, 10, 17, 17}},
    {'Y', {17, 17, 10, 4, 4, 4, 4}},     {'Z', {31, 1, 2, 4, 8, 16, 31}},     {'0', {14, 17, 19, 21, 25, 17, 14}},
    {'1', {4, 12, 4, 4, 4, 4, 14}},      {'2', {14, 17, 1, 2, 4, 8, 31}},     {'3', {31, 2, 4, 2, 1, 17, 14}},
    {'4', {2, 6, 10, 18, 31, 2, 2}},     {'5', {31, 16, 30, 1, 1, 17, 14}},   {'6', {6, 8, 16, 30, 17, 17, 14}},
    {'7', {31, 1, 2, 4, 8, 8, 8}},       {'8', {14, 17, 17, 14, 17, 17, 14}}, {'9', {14, 17, 17, 15, 1, 2, 12}},
    {'_', {0, 0, 0, 0, 0, 0, 31}},       {'.', {0, 0, 0, 0, 0, 12, 12}},      {'-', {0, 0, 0, 31, 0, 0, 0}},
};

static void draw_text(uint8_t *img, uint32_t stride_px, uint32_t x0, uint32_t y0, const char *text, uint32_t max_x)
{
    for (uint32_t i = 0; text[i]; i++) {
        char c = text[i] >= 'a' && text[i] <= 'z' ? (char)(text[i] - 32) : text[i];
        uint32_t x = x0 + i * 6;
        if (x + 5 > max_x)
            return;
        for (size_t g = 0; g < sizeof(glyphs) / sizeof(glyphs[0]); g++) {
            if (glyphs[g].c != c)
                continue;
            for (uint32_t r = 0; r < 7; r++)
                for (uint32_t b = 0; b < 5; b++)
                    if (glyphs[g].rows[r] & (16 >> b)) {
                        uint8_t *p = img + 4 * ((size_t)(y0 + r) * stride_px + x + b);
                        p[0] = p[1] = p[2] = 230, p[3] = 255;
                    }
        }
    }
}

typedef struct frame {
    const char *name;
    uint32_t w, h, cell_h;
    float *rgba;
    float *acescg; /* --acescg: the frame's colours in AP1 primaries */
} frame;

typedef enum sheet_kind { SHEET_OPERATORS, SHEET_LOOKS, SHEET_ACESCG } sheet_kind;

static uint32_t column_count(sheet_kind kind)
{
    return kind == SHEET_OPERATORS ? HP_TONE_OPERATOR_COUNT : kind == SHEET_LOOKS ? (uint32_t)hp_look_count : 3;
}

static const char *column_name(sheet_kind kind, uint32_t c)
{
    static const char *const acescg[] = {"rec709", "acescg read as acescg", "acescg read as rec709"};
    return kind == SHEET_OPERATORS ? hp_param_find("tonemap.operator")->choices[c]
           : kind == SHEET_LOOKS   ? hp_looks[c].name
                                   : acescg[c];
}

/* Column c's parameters and the pixels it reads. */
static const float *column_setup(sheet_kind kind, uint32_t c, const frame *f, hp_frame_params *fp, hp_err *err)
{
    hp_frame_params_defaults(fp);
    if (kind == SHEET_OPERATORS)
        fp->params.tonemap.op = (hp_tone_operator)c;
    if (kind == SHEET_LOOKS && hp_params_apply_look(&fp->params, c, err) != HP_OK)
        return NULL;
    if (kind != SHEET_ACESCG || c == 0)
        return f->rgba;
    if (c == 1 &&
        hp_input_color_make(hp_colorspace_chromaticities(HP_COLORSPACE_ACESCG), HP_OUTPUT_SRGB, &fp->params.color, err) != HP_OK)
        return NULL;
    return f->acescg;
}

int main(int argc, char **argv)
{
    sheet_kind kind = SHEET_OPERATORS;
    if (argc > 1 && (!strcmp(argv[1], "--looks") || !strcmp(argv[1], "--acescg"))) {
        kind = !strcmp(argv[1], "--looks") ? SHEET_LOOKS : SHEET_ACESCG;
        argv++, argc--;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: gallery [--looks | --acescg] OUT.png FRAME...\n");
        return 2;
    }
    hp_log_set_level(HP_LOG_WARN);
    hp_err err = {0};
    int nframes = argc - 2;
    frame *frames = calloc((size_t)nframes, sizeof(frame));
    uint32_t sheet_h = LABEL_H + GAP;
    for (int i = 0; i < nframes; i++) {
        const char *path = argv[i + 2];
        hp_image_info info;
        if (!(frames[i].rgba = hp_image_decode_file(path, HP_LAYOUT_RGBA32F, NULL, &info, &err))) {
            fprintf(stderr, "gallery: %s\n", err.message);
            return 1;
        }
        size_t n = (size_t)info.width * info.height;
        if (kind == SHEET_ACESCG && (!(frames[i].acescg = malloc(n * 16)) ||
                                     !hp_cpu_frame_from_rec709(frames[i].rgba, n, HP_COLORSPACE_ACESCG, frames[i].acescg))) {
            fprintf(stderr, "gallery: out of memory\n");
            return 1;
        }
        const char *slash = strrchr(path, '/');
        frames[i].name = slash ? slash + 1 : path;
        frames[i].w = info.width;
        frames[i].h = info.height;
        frames[i].cell_h = (uint32_t)((uint64_t)CELL_W * info.height / info.width);
        sheet_h += LABEL_H + frames[i].cell_h + GAP;
    }

    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.device = getenv("HDRPOST_DEVICE");
    hp_gpu *gpu;
    hp_frame_graph *graph;
    if (hp_gpu_create(&cfg, &gpu, &err) != HP_OK || hp_frame_graph_create(gpu, &graph, &err) != HP_OK) {
        fprintf(stderr, "gallery: %s\n", err.message);
        return 1;
    }
    uint32_t cols = column_count(kind);
    uint32_t sheet_w = GAP + cols * (CELL_W + GAP);
    uint8_t *sheet = calloc((size_t)sheet_w * sheet_h, 4);
    for (size_t i = 0; i < (size_t)sheet_w * sheet_h; i++)
        sheet[4 * i + 0] = sheet[4 * i + 1] = sheet[4 * i + 2] = 24, sheet[4 * i + 3] = 255;
    for (uint32_t c = 0; c < cols; c++)
        draw_text(sheet, sheet_w, GAP + c * (CELL_W + GAP), 4, column_name(kind, c), GAP + c * (CELL_W + GAP) + CELL_W);

    uint32_t y = LABEL_H + GAP;
    for (int i = 0; i < nframes; i++) {
        draw_text(sheet, sheet_w, GAP, y + 3, frames[i].name, sheet_w);
        y += LABEL_H;
        for (uint32_t c = 0; c < cols; c++) {
            hp_frame_desc desc = {.width = frames[i].w, .height = frames[i].h, .format = HP_PIXEL_RGBA32F};
            void *staging;
            hp_frame_params fp;
            const float *pixels = column_setup(kind, c, &frames[i], &fp, &err);
            hp_frame_result res;
            if (!pixels || hp_frame_graph_begin(graph, &desc, &staging, &err) != HP_OK) {
                fprintf(stderr, "gallery: %s\n", err.message);
                return 1;
            }
            memcpy(staging, pixels, (size_t)desc.width * desc.height * 16);
            if (hp_frame_graph_run(graph, &fp, &res, &err) != HP_OK) {
                fprintf(stderr, "gallery: %s\n", err.message);
                return 1;
            }
            /* Area average into the cell. */
            const uint8_t *img = res.pixels;
            uint32_t x0 = GAP + c * (CELL_W + GAP);
            for (uint32_t cy = 0; cy < frames[i].cell_h; cy++) {
                uint32_t sy0 = (uint32_t)((uint64_t)cy * frames[i].h / frames[i].cell_h);
                uint32_t sy1 = (uint32_t)((uint64_t)(cy + 1) * frames[i].h / frames[i].cell_h);
                for (uint32_t cx = 0; cx < CELL_W; cx++) {
                    uint32_t sx0 = (uint32_t)((uint64_t)cx * frames[i].w / CELL_W);
                    uint32_t sx1 = (uint32_t)((uint64_t)(cx + 1) * frames[i].w / CELL_W);
                    uint32_t sum[3] = {0, 0, 0}, n = 0;
                    for (uint32_t sy = sy0; sy < (sy1 > sy0 ? sy1 : sy0 + 1); sy++)
                        for (uint32_t sx = sx0; sx < (sx1 > sx0 ? sx1 : sx0 + 1); sx++, n++)
                            for (int k = 0; k < 3; k++)
                                sum[k] += img[4 * ((size_t)sy * frames[i].w + sx) + k];
                    uint8_t *d = sheet + 4 * ((size_t)(y + cy) * sheet_w + x0 + cx);
                    for (int k = 0; k < 3; k++)
                        d[k] = (uint8_t)((sum[k] + n / 2) / n);
                }
            }
        }
        y += frames[i].cell_h + GAP;
    }

    hp_output_params out = {.format = HP_OUTPUT_PNG, .effort = 6, .bit_depth = 8};
    hp_encoded png;
    if (hp_encode(sheet, sheet_w, sheet_h, 8, false, HP_ENCODING_SRGB_LIKE, &out, &png, &err) != HP_OK) {
        fprintf(stderr, "gallery: %s\n", err.message);
        return 1;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(png.data, 1, png.size, f) != png.size) {
        fprintf(stderr, "gallery: cannot write %s\n", argv[1]);
        return 1;
    }
    fclose(f);
    printf("gallery: %s, %ux%u, %zu bytes\n", argv[1], sheet_w, sheet_h, png.size);
    hp_encoded_free(&png);
    for (int i = 0; i < nframes; i++) {
        free(frames[i].rgba);
        free(frames[i].acescg);
    }
    free(frames);
    free(sheet);
    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    return 0;
}

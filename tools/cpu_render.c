/* The CPU reference of the whole pipeline on one image file, for end-to-end tests and for checking a
 * suspicious frame by hand: decodes the file as the daemon does, runs the reduction and the tone stages
 * in double precision (pipeline/cpu_*.c) with the request's parameters, and writes the quantized image
 * as raw RGBA rows (8-bit bytes, or 16-bit little-endian) plus the statistics as JSON on stdout.
 *
 * With ocio.* (or input.colorspace naming a colour space of the config) the frame goes through OCIO's own CPU
 * processor after the exposure, as the daemon's OCIO stage does on the GPU (pipeline/cpu_ocio.c); the config is
 * the OCIO environment variable's, as for every OCIO application.
 *
 * Usage: cpu_render FRAME [PARAMS_JSON [OUT.rgba]] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/codecs/image.h"
#include "api/frames/params_json.h"
#include "common/file.h"
#include "pipeline/cpu_reference.h"

/* The image again through the OCIO view, with the exposure the reference's stages found. */
static bool ocio_render(const hp_params *p, const float *rgba, const hp_image_info *info, const hp_tone_state *ts,
                        void *out)
{
    hp_err err = {0};
    hp_ocio_view_key key;
    hp_ocio_cpu *cpu = NULL;
    bool ok = hp_params_ocio_key(p, &key, &err) == HP_OK &&
              hp_ocio_cpu_make(hp_params_ocio_config(), &key, &cpu, &err) == HP_OK &&
              hp_cpu_ocio(cpu, rgba, info->width, info->height, ts->scale, p->output.dither,
                          p->output.bit_depth > 8 ? 16 : 8, out, &err) == HP_OK; /* 10 and 12 bits are written as 16 */
    if (!ok)
        fprintf(stderr, "cpu_render: ocio: %s\n", err.message);
    hp_ocio_cpu_free(cpu);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cpu_render FRAME [PARAMS_JSON [OUT.rgba]]\n");
        return 2;
    }
    size_t len;
    uint8_t *bytes = hp_read_file(argv[1], &len);
    if (!bytes) {
        fprintf(stderr, "cpu_render: cannot read %s\n", argv[1]);
        return 1;
    }

    hp_err err = {0};
    hp_ocio_config *ocio = NULL;
    const char *ocio_path = getenv("OCIO");
    if (ocio_path && *ocio_path && hp_ocio_config_load(ocio_path, &ocio, &err) != HP_OK) {
        fprintf(stderr, "cpu_render: %s\n", err.message);
        return 1;
    }
    hp_params_use_ocio(ocio);
    hp_params p;
    hp_params_defaults(&p);
    if (argc > 2 && argv[2][0]) {
        json_error_t jerr;
        json_t *obj = json_loads(argv[2], 0, &jerr);
        if (!obj || hp_params_from_json_with_look(obj, &p, &err) != HP_OK) {
            fprintf(stderr, "cpu_render: params: %s\n", obj ? err.message : jerr.text);
            return 2;
        }
        json_decref(obj);
    }
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    hp_image_info info;
    if (hp_image_probe(bytes, len, &opt, &info, &err) != HP_OK) {
        fprintf(stderr, "cpu_render: %s\n", err.message);
        return 1;
    }
    size_t n = (size_t)info.width * info.height;
    float *rgba = malloc(n * 16);
    if (!rgba || hp_image_decode(bytes, len, &opt, &info, rgba, HP_LAYOUT_RGBA32F, NULL, &err) != HP_OK) {
        fprintf(stderr, "cpu_render: %s\n", rgba ? err.message : "out of memory");
        return 1;
    }
    const char *space, *source;
    bool through_ocio = hp_params_ocio_on(&p);
    hp_ocio_view_key key;
    if (through_ocio) {
        /* OCIO converts; the exposure weighs the frame by its space's Y row, as the daemon does (api/frames/render.c). */
        if (hp_params_ocio_key(&p, &key, &err) != HP_OK) {
            fprintf(stderr, "cpu_render: %s\n", err.message);
            return 1;
        }
        p.color = (hp_input_color){.convert = false, .own_luma = true, .output = p.output.colorspace};
        hp_ocio_input_luma(ocio, key.input, p.color.luma);
    } else if (hp_input_color_resolve(p.input.colorspace, info.has_chromaticities ? &info.chromaticities : NULL, p.output.colorspace, &p.color,
                               &space, &source, &err) != HP_OK) {
        fprintf(stderr, "cpu_render: %s\n", err.message);
        return 1;
    }
    hp_lum_stats st;
    hp_tone_state ts;
    uint8_t *out = malloc(n * 8);
    if (!out || hp_cpu_render_frame(rgba, HP_PIXEL_RGBA32F, info.width, info.height, &p, &st, &ts, out) != HP_OK) {
        fprintf(stderr, "cpu_render: out of memory\n");
        return 1;
    }
    if (through_ocio && !ocio_render(&p, rgba, &info, &ts, out))
        return 1;
    if (argc > 3) {
        FILE *o = fopen(argv[3], "wb");
        size_t bytes_out = n * (p.output.bit_depth > 8 ? 8 : 4);
        if (!o || fwrite(out, 1, bytes_out, o) != bytes_out) {
            fprintf(stderr, "cpu_render: cannot write %s\n", argv[3]);
            return 1;
        }
        fclose(o);
    }
    json_t *hist = json_array();
    for (int i = 0; i < 256; i++)
        json_array_append_new(hist, json_integer(st.histogram[i]));
    json_t *j = json_pack("{s:i, s:i, s:I, s:I, s:f, s:f, s:f, s:f, s:o, s:{s:f, s:f, s:f, s:f}}", "width",
                          (int)info.width, "height", (int)info.height, "finite_pixels", (json_int_t)st.finite_pixels,
                          "nonfinite_pixels", (json_int_t)st.nonfinite_pixels, "log_average", st.log_average, "mean",
                          st.mean, "min", st.min, "max", st.max, "histogram", hist, "exposure", "scale", ts.scale,
                          "key", ts.key, "adaptation", ts.adaptation, "white", ts.white);
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    puts(text);
    free(text);
    json_decref(j);
    free(out);
    free(rgba);
    free(bytes);
    hp_params_use_ocio(NULL);
    hp_ocio_config_free(ocio);
    return 0;
}

/* An OpenEXR writer on the library's C core, for the tests (every compression the core writes, tiles,
 * several parts, data windows) and for the benchmark's frames (tools/make_frame.c). The daemon itself
 * never writes EXR. */
#include "tools/exr_write.h"

#include <openexr.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int64_t hp_exr_sink_write(exr_const_context_t ctxt, void *userdata, const void *buffer, uint64_t sz, uint64_t offset,
                          exr_stream_error_func_ptr_t error_cb)
{
    (void)ctxt;
    (void)error_cb;
    hp_exr_sink *s = userdata;
    size_t end = (size_t)(offset + sz);
    if (end > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < end)
            cap *= 2;
        uint8_t *grown = realloc(s->data, cap);
        if (!grown)
            return -1;
        s->data = grown, s->cap = cap;
    }
    memcpy(s->data + offset, buffer, (size_t)sz);
    if (end > s->len)
        s->len = end;
    return (int64_t)sz;
}

size_t hp_exr_type_size(int type) { return type == EXR_PIXEL_HALF ? 2 : 4; }

static bool define_part(exr_context_t ctx, const char *name, const hp_exr_spec *spec, int *part)
{
    exr_storage_t storage = spec->tile > 0 ? EXR_STORAGE_TILED : EXR_STORAGE_SCANLINE;
    if (exr_add_part(ctx, name, storage, part) != EXR_ERR_SUCCESS)
        return false;
    exr_attr_box2i_t display, data;
    display.min.x = 0, display.min.y = 0, display.max.x = spec->display_w - 1, display.max.y = spec->display_h - 1;
    data.min.x = spec->data_x, data.min.y = spec->data_y;
    data.max.x = spec->data_x + spec->width - 1, data.max.y = spec->data_y + spec->height - 1;
    exr_attr_v2f_t center;
    center.x = 0.0f, center.y = 0.0f;
    if (exr_initialize_required_attr(ctx, *part, &display, &data, 1.0f, &center, 1.0f,
                                     spec->decreasing_y ? EXR_LINEORDER_DECREASING_Y : EXR_LINEORDER_INCREASING_Y,
                                     (exr_compression_t)spec->compression) != EXR_ERR_SUCCESS)
        return false;
    if (spec->tile > 0 && exr_set_tile_descriptor(ctx, *part, (uint32_t)spec->tile, (uint32_t)spec->tile,
                                                  EXR_TILE_ONE_LEVEL, EXR_TILE_ROUND_DOWN) != EXR_ERR_SUCCESS)
        return false;
    if (spec->chromaticities) {
        const float *v = spec->chromaticities;
        exr_attr_chromaticities_t chroma = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
        if (exr_attr_set_chromaticities(ctx, *part, "chromaticities", &chroma) != EXR_ERR_SUCCESS)
            return false;
    }
    for (int c = 0; c < spec->channel_count; c++)
        if (exr_add_channel(ctx, *part, spec->channels[c].name, (exr_pixel_type_t)spec->channels[c].type,
                            EXR_PERCEPTUALLY_LOGARITHMIC, 1, 1) != EXR_ERR_SUCCESS)
            return false;
    return true;
}

/* Writes one chunk whose top-left pixel is (x0, y0) of the data window. */
static bool write_chunk(exr_context_t ctx, int part, const hp_exr_spec *spec, exr_encode_pipeline_t *enc,
                        bool *initialized, const exr_chunk_info_t *ci, int x0, int y0)
{
    if ((*initialized ? exr_encoding_update(ctx, part, ci, enc) : exr_encoding_initialize(ctx, part, ci, enc)) !=
        EXR_ERR_SUCCESS)
        return false;
    for (int i = 0; i < enc->channel_count; i++) {
        exr_coding_channel_info_t *ch = &enc->channels[i];
        const hp_exr_channel *src = NULL;
        for (int c = 0; c < spec->channel_count; c++)
            if (strcmp(spec->channels[c].name, ch->channel_name) == 0)
                src = &spec->channels[c];
        if (!src)
            return false;
        size_t elem = hp_exr_type_size(src->type);
        ch->encode_from_ptr = (const uint8_t *)src->data + ((size_t)y0 * spec->width + x0) * elem;
        ch->user_pixel_stride = (int32_t)elem;
        ch->user_line_stride = (int32_t)(elem * spec->width);
        ch->user_data_type = (uint16_t)src->type;
        ch->user_bytes_per_element = (int16_t)elem;
    }
    if (!*initialized && exr_encoding_choose_default_routines(ctx, part, enc) != EXR_ERR_SUCCESS)
        return false;
    *initialized = true;
    return exr_encoding_run(ctx, part, enc) == EXR_ERR_SUCCESS;
}

static bool write_part_pixels(exr_context_t ctx, int part, const hp_exr_spec *spec)
{
    exr_encode_pipeline_t enc = EXR_ENCODE_PIPELINE_INITIALIZER;
    bool initialized = false, ok = true;
    exr_chunk_info_t ci;
    if (spec->tile > 0) {
        int tx_count = (spec->width + spec->tile - 1) / spec->tile, ty_count = (spec->height + spec->tile - 1) / spec->tile;
        for (int ty = 0; ty < ty_count && ok; ty++)
            for (int tx = 0; tx < tx_count && ok; tx++)
                ok = exr_write_tile_chunk_info(ctx, part, tx, ty, 0, 0, &ci) == EXR_ERR_SUCCESS &&
                     write_chunk(ctx, part, spec, &enc, &initialized, &ci, tx * spec->tile, ty * spec->tile);
    } else {
        int32_t lines = 1;
        ok = exr_get_scanlines_per_chunk(ctx, part, &lines) == EXR_ERR_SUCCESS;
        int chunks = (spec->height + lines - 1) / lines;
        for (int i = 0; i < chunks && ok; i++) {
            ok = exr_write_scanline_chunk_info(ctx, part, spec->data_y + i * lines, &ci) == EXR_ERR_SUCCESS &&
                 write_chunk(ctx, part, spec, &enc, &initialized, &ci, 0, i * lines);
        }
    }
    if (initialized)
        exr_encoding_destroy(ctx, &enc);
    return ok;
}

int hp_exr_write_core(const hp_exr_spec *specs, int count, uint8_t **out, size_t *out_len)
{
    hp_exr_sink s = {0};
    exr_context_initializer_t init = EXR_DEFAULT_CONTEXT_INITIALIZER;
    init.user_data = &s;
    init.write_fn = hp_exr_sink_write;
    exr_context_t ctx = NULL;
    bool ok = exr_start_write(&ctx, "test.exr", EXR_WRITE_FILE_DIRECTLY, &init) == EXR_ERR_SUCCESS;
    for (int p = 0; p < count && ok; p++) {
        char name[16];
        int part;
        snprintf(name, sizeof(name), "p%d", p);
        ok = define_part(ctx, name, &specs[p], &part) && part == p;
    }
    ok = ok && exr_write_header(ctx) == EXR_ERR_SUCCESS;
    for (int p = 0; p < count && ok; p++)
        ok = write_part_pixels(ctx, p, &specs[p]);
    if (ctx)
        ok = exr_finish(&ctx) == EXR_ERR_SUCCESS && ok;
    if (!ok) {
        free(s.data);
        return 0;
    }
    *out = s.data;
    *out_len = s.len;
    return 1;
}


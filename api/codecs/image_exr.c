/* OpenEXR through the library's own C core (libOpenEXRCore), reading from memory.
 *
 * The library parses the header, reads each chunk's offset and leader and decompresses it, all through
 * exr_decoding_run(): NONE, RLE, ZIPS, ZIP, PIZ, PXR24, B44 and B44A in OpenEXR 3.1, DWAA and DWAB too
 * from 3.2 (before that they go through the C++ library, image_exr_dwa.h). This file chooses the part and
 * the channels, tells the library where each chunk goes, and converts the types itself.
 *
 * Chunks are independent: hp_exr_decode_chunks() decodes any range of them with its own decode pipeline
 * and scratch, so ranges can be spread over threads that share one reader (the library allows concurrent
 * reads of one context; our read function is a memcpy). Each chunk is converted from its decompressed
 * bytes (a few hundred KiB) into the caller's frame: no full-frame copy is ever made.
 *
 * Multi-part files: part 0 is used unless a named layer or channel is only found in a later part (the
 * simple rule: parts are searched in order, nothing is merged across parts). Depth must come from the
 * part that holds the colour. Tiled parts: level 0 only; deep parts are refused.
 *
 * Two things the library would do are ours instead, for speed (a 4K half RGBA ZIP frame took ~500 ms on
 * one core, half of it in zlib): ZIP and ZIPS chunks are inflated with libdeflate (inflate_zip_chunk), and
 * the library's unpack into a scratch followed by our conversion is one pass from the decompressed chunk
 * to the frame (convert_chunk), for every compression. Parts with subsampled channels, and big-endian
 * hosts, keep the library's unpack into a scratch and finish_chunk(). HP_EXR_GENERIC_DECODE=1 in the
 * environment forces the library's own path for everything (zlib, its unpack, finish_chunk): the tests
 * compare the two, and it is the way back should a file ever decode differently.
 *
 * ZIP chunks prepared for the GPU (gathered as they lie, or inflated for the split) are api/codecs/image_exr_zip.c's,
 * over the reader's insides that api/codecs/image_exr_reader.h shares. */
#include <libdeflate.h>
#include <limits.h>
#include <math.h>
#include <openexr.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "api/codecs/image_exr_reader.h"
#include "api/codecs/image_internal.h"
#include "common/arrival.h"
#include "common/rows_ready.h"
#include "common/log.h"
#include "pipeline/cpu_reference.h"
#ifdef HP_EXR_DWA_CXX
#include "api/codecs/image_exr_dwa.h"
#endif

/* One chunk may not unpack to more than this (every channel of the part, not only those we use). A
 * 16384-wide DWAB chunk of 256 lines with 32 float channels is 512 MiB; a tiny hostile header can claim
 * thousands of channels, and the library allocates the unpacked size before it decompresses. */
#define EXR_MAX_CHUNK_UNPACKED ((uint64_t)1 << 30)
/* And no more pixels than this, for the scratch of 20 bytes a pixel (320 MiB): 16384-wide DWAB chunks of
 * 256 lines are 2^22 pixels; only a file of a few giant tiles comes near. */
#define EXR_MAX_CHUNK_PIXELS ((uint64_t)1 << 24)

/* --- Library plumbing ------------------------------------------------------------------------------ */

/* The library reports a failure's details through a callback; decodes may run on several threads, so
 * each keeps its own last message. */
static _Thread_local char exr_last_message[HP_EXR_MESSAGE_SIZE];

char *hp_exr_last_message(void) { return exr_last_message; }

static void exr_error_handler(exr_const_context_t ctxt, exr_result_t code, const char *msg)
{
    (void)ctxt;
    snprintf(exr_last_message, sizeof(exr_last_message), "%s", msg ? msg : exr_get_error_code_as_string(code));
}

static int64_t exr_stream_read(exr_const_context_t ctxt, void *userdata, void *buffer, uint64_t sz, uint64_t offset,
                               exr_stream_error_func_ptr_t error_cb)
{
    (void)ctxt;
    (void)error_cb;
    const hp_exr_reader *r = userdata;
    if (offset >= r->stream.len)
        return 0; /* end of data, as pread() says it: the library reports the short read */
    uint64_t n = r->stream.len - offset;
    if (n > sz)
        n = sz;
    /* A body still arriving: wait for these bytes; cut off before them, it is a short read. */
    if (r->stream.arrival && !hp_arrival_wait(r->stream.arrival, (size_t)(offset + n)))
        return -1;
    if (n > (uint64_t)INT64_MAX)
        n = (uint64_t)INT64_MAX;
    memcpy(buffer, r->stream.bytes + offset, (size_t)n);
    return (int64_t)n;
}

static int64_t exr_stream_size(exr_const_context_t ctxt, void *userdata)
{
    (void)ctxt;
    const hp_exr_reader *r = userdata;
    return (int64_t)r->stream.len;
}

__attribute__((format(printf, 3, 4))) static hp_code exr_fail(hp_err *err, exr_result_t rv, const char *fmt, ...)
{
    char where[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(where, sizeof(where), fmt, ap);
    va_end(ap);
    const char *detail = exr_last_message[0] ? exr_last_message : exr_get_error_code_as_string(rv);
    hp_code code = rv == EXR_ERR_OUT_OF_MEMORY ? HP_ERR_OUT_OF_MEMORY : HP_ERR_INVALID_ARGUMENT;
    hp_fail(err, code, "EXR %s: %s (%s)", where, detail, exr_get_error_code_as_string(rv));
    exr_last_message[0] = '\0';
    return code;
}

const char *hp_exr_compression_name(exr_compression_t c)
{
    static const char *const names[] = {"none", "rle", "zips", "zip", "piz", "pxr24", "b44", "b44a", "dwaa",
                                        "dwab"};
    return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "unknown";
}

/* convert_chunk() reads values as they lie in the decompressed chunk, in EXR's byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_IS_LITTLE_ENDIAN true
#else
#define HOST_IS_LITTLE_ENDIAN false
#endif

/* --- Channel choice -------------------------------------------------------------------------------- */

static bool name_is(const exr_attr_chlist_entry_t *e, const char *name)
{
    size_t n = strlen(name);
    return e->name.length >= 0 && (size_t)e->name.length == n && memcmp(e->name.str, name, n) == 0;
}

static int find_channel(const exr_attr_chlist_t *cl, const char *name)
{
    for (int i = 0; i < cl->num_channels; i++)
        if (name_is(&cl->entries[i], name))
            return i;
    return -1;
}

/* The channel named prefix + "." + base, or base alone when prefix is empty. */
static int find_in_layer(const exr_attr_chlist_t *cl, const char *prefix, const char *base)
{
    char name[2 * HP_IMAGE_NAME_MAX + 2];
    if (prefix[0])
        snprintf(name, sizeof(name), "%s.%s", prefix, base);
    else
        snprintf(name, sizeof(name), "%s", base);
    return find_channel(cl, name);
}

static bool ends_with(const exr_attr_chlist_entry_t *e, const char *suffix)
{
    size_t n = strlen(suffix);
    return e->name.length >= 0 && (size_t)e->name.length >= n &&
           memcmp(e->name.str + e->name.length - n, suffix, n) == 0;
}

static void list_channels(const exr_attr_chlist_t *cl, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < cl->num_channels; i++) {
        const exr_attr_chlist_entry_t *e = &cl->entries[i];
        int n = snprintf(out + used, size - used, "%s%.*s", i ? "," : "", e->name.length, e->name.str);
        if (n < 0 || (size_t)n >= size - used) {
            /* cut, and say so: the last 4 bytes hold "...\0" */
            if (size >= 4)
                memcpy(out + size - 4, "...", 4);
            return;
        }
        used += (size_t)n;
    }
}

/* The layers of every flat part, for the message that answers a layer the file does not have: the
 * distinct prefixes of the channel names that have one ("ViewLayer.Combined" of "ViewLayer.Combined.R"),
 * in the order they first appear, and whether there are plain channels (no dot) too. */
static void list_layers(exr_context_t ctx, int part_count, char *out, size_t size, bool *plain)
{
    size_t used = 0;
    out[0] = '\0';
    *plain = false;
    for (int p = 0; p < part_count; p++) {
        const exr_attr_chlist_t *cl;
        if (exr_get_channels(ctx, p, &cl) != EXR_ERR_SUCCESS || !cl)
            continue;
        for (int i = 0; i < cl->num_channels; i++) {
            const exr_attr_chlist_entry_t *e = &cl->entries[i];
            int len = e->name.length;
            while (len > 0 && e->name.str[len - 1] != '.')
                len--;
            if (len <= 1) { /* no dot, or only a leading one: a plain channel */
                *plain = true;
                continue;
            }
            len--; /* without the dot */
            bool seen = false;
            for (const char *at = out; *at && !seen;) { /* out is "a, b, c": compare whole items */
                const char *end = strstr(at, ", ");
                size_t item = end ? (size_t)(end - at) : strlen(at);
                seen = item == (size_t)len && memcmp(at, e->name.str, (size_t)len) == 0;
                at += item + (end ? 2 : 0);
            }
            if (seen)
                continue;
            int n = snprintf(out + used, size - used, "%s%.*s", used ? ", " : "", len, e->name.str);
            if (n < 0 || (size_t)n >= size - used) {
                if (size >= 4)
                    memcpy(out + size - 4, "...", 4);
                return;
            }
            used += (size_t)n;
        }
    }
}

typedef struct selection {
    int chan[SLOT_COUNT];
    char layer[HP_IMAGE_NAME_MAX];
    bool grey;
} selection;

/* R, G, B (and A) of one layer ("" is the plain channels), else its Y as grey. */
static bool select_layer(const exr_attr_chlist_t *cl, const char *layer, selection *sel)
{
    int r = find_in_layer(cl, layer, "R"), g = find_in_layer(cl, layer, "G"), b = find_in_layer(cl, layer, "B");
    if (r >= 0 && g >= 0 && b >= 0) {
        sel->chan[SLOT_R] = r, sel->chan[SLOT_G] = g, sel->chan[SLOT_B] = b;
        sel->grey = false;
    } else {
        /* Y alone is grey; Y beside an X is a vector's (Blender's Normal.X/Y/Z, Vector.X/Y/Z/W) */
        int y = find_in_layer(cl, layer, "Y");
        if (y < 0 || find_in_layer(cl, layer, "X") >= 0)
            return false;
        sel->chan[SLOT_R] = sel->chan[SLOT_G] = sel->chan[SLOT_B] = y;
        sel->grey = true;
    }
    sel->chan[SLOT_A] = find_in_layer(cl, layer, "A");
    snprintf(sel->layer, sizeof(sel->layer), "%s", layer);
    return true;
}

/* The layer part of a channel name ("ViewLayer.Combined" of "ViewLayer.Combined.R"), when the rest is base. */
static bool layer_of(const exr_attr_chlist_entry_t *e, const char *base, char *layer, size_t size)
{
    size_t n = strlen(base);
    if (e->name.length < 0 || (size_t)e->name.length < n + 2 || !ends_with(e, base) ||
        e->name.str[e->name.length - n - 1] != '.')
        return false;
    size_t layer_len = (size_t)e->name.length - n - 1;
    if (layer_len >= size)
        return false;
    memcpy(layer, e->name.str, layer_len);
    layer[layer_len] = '\0';
    return true;
}

static bool layer_is_combined(const char *layer)
{
    const char *dot = strrchr(layer, '.');
    return strcmp(dot ? dot + 1 : layer, "Combined") == 0;
}

/* The automatic choice (image.h, hp_decode_options). */
static bool select_automatic(const exr_attr_chlist_t *cl, selection *sel)
{
    if (select_layer(cl, "", sel) && !sel->grey)
        return true;
    char layer[HP_IMAGE_NAME_MAX];
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < cl->num_channels; i++) {
            if (!layer_of(&cl->entries[i], "R", layer, sizeof(layer)))
                continue;
            if (pass == 0 && !layer_is_combined(layer))
                continue;
            if (select_layer(cl, layer, sel) && !sel->grey)
                return true;
        }
    }
    if (select_layer(cl, "", sel))
        return true; /* plain Y */
    for (int i = 0; i < cl->num_channels; i++)
        if (layer_of(&cl->entries[i], "Y", layer, sizeof(layer)) && select_layer(cl, layer, sel))
            return true;
    return false;
}

static bool select_explicit(const exr_attr_chlist_t *cl, const hp_decode_options *opt, selection *sel)
{
    sel->chan[SLOT_R] = find_channel(cl, opt->channel_r);
    sel->chan[SLOT_G] = find_channel(cl, opt->channel_g);
    sel->chan[SLOT_B] = find_channel(cl, opt->channel_b);
    sel->chan[SLOT_A] = -1;
    sel->grey = sel->chan[SLOT_R] == sel->chan[SLOT_G] && sel->chan[SLOT_R] == sel->chan[SLOT_B];
    sel->layer[0] = '\0';
    return sel->chan[SLOT_R] >= 0 && sel->chan[SLOT_G] >= 0 && sel->chan[SLOT_B] >= 0;
}

static bool has_text(const char *s) { return s && s[0]; }

/* True when e is "<layer>.Z" of a layer that is not a vector: Blender's Depth.Z, or the Z beside a layer's
 * R, G, B, but not Normal.X/Y/Z or Vector.X/Y/Z/W. */
static bool is_depth_z(const exr_attr_chlist_t *cl, const exr_attr_chlist_entry_t *e)
{
    char layer[HP_IMAGE_NAME_MAX];
    return layer_of(e, "Z", layer, sizeof(layer)) && find_in_layer(cl, layer, "X") < 0 &&
           find_in_layer(cl, layer, "Y") < 0;
}

static int select_depth(const exr_attr_chlist_t *cl, const hp_decode_options *opt, const char *colour_layer)
{
    if (has_text(opt->depth))
        return find_channel(cl, opt->depth);
    int z = find_channel(cl, "Z");
    if (z >= 0)
        return z;
    if (colour_layer[0] && (z = find_in_layer(cl, colour_layer, "Z")) >= 0 && is_depth_z(cl, &cl->entries[z]))
        return z;
    for (int i = 0; i < cl->num_channels; i++) {
        const exr_attr_chlist_entry_t *e = &cl->entries[i];
        if (name_is(e, "Depth.Z") || ends_with(e, ".Depth.Z"))
            return i;
    }
    for (int i = 0; i < cl->num_channels; i++)
        if (is_depth_z(cl, &cl->entries[i]))
            return i;
    return -1;
}

static void copy_name(char *dst, const exr_attr_chlist_entry_t *e)
{
    snprintf(dst, HP_IMAGE_NAME_MAX, "%.*s", e->name.length, e->name.str);
}

/* --- Reader ---------------------------------------------------------------------------------------- */

void hp_exr_close(hp_exr_reader **reader)
{
    if (!reader || !*reader)
        return;
    if ((*reader)->ctx)
        exr_finish(&(*reader)->ctx);
    free(*reader);
    *reader = NULL;
}

/* The option that chose a slot's channel ("channel_g", "layer", "depth"), or "" when the automatic
 * choice did: a fault of a named channel is the request's, of an automatic one the file's. */
static const char *slot_option(const hp_decode_options *opt, int slot)
{
    static const char *const names[SLOT_COUNT] = {"channel_r", "channel_g", "channel_b", "channel_a", "depth"};
    const char *const values[SLOT_COUNT] = {opt->channel_r, opt->channel_g, opt->channel_b, opt->channel_a,
                                            opt->depth};
    if (has_text(values[slot]))
        return names[slot];
    if (slot != SLOT_Z && has_text(opt->layer))
        return "layer";
    return "";
}

/* Whether a flat part of the file has a channel of that name. */
static bool in_some_part(const hp_exr_reader *r, int part_count, const char *name)
{
    for (int p = 0; p < part_count; p++) {
        const exr_attr_chlist_t *cl;
        if (exr_get_channels(r->ctx, p, &cl) == EXR_ERR_SUCCESS && cl && find_channel(cl, name) >= 0)
            return true;
    }
    return false;
}

/* channel_r, channel_g and channel_b are given together or not at all; *explicit_rgb says which. */
static hp_code check_rgb_options(const hp_decode_options *opt, bool *explicit_rgb, hp_err *err)
{
    bool any_rgb = has_text(opt->channel_r) || has_text(opt->channel_g) || has_text(opt->channel_b);
    *explicit_rgb = has_text(opt->channel_r) && has_text(opt->channel_g) && has_text(opt->channel_b);
    if (!any_rgb || *explicit_rgb)
        return HP_OK;
    const char *missing = !has_text(opt->channel_r)   ? "channel_r"
                          : !has_text(opt->channel_g) ? "channel_g"
                                                      : "channel_b";
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, missing,
                         "EXR channel names: give channel_r, channel_g and channel_b together (or a layer)");
}

/* The first part whose channels the options select (only part 0 when nothing is named: the automatic
 * choice reads the first part, as every reader does); its channel list, or NULL when none does, part 0's
 * channels then listed in info->channel_list for the message. layer is opt->layer without a final dot. A deep
 * part 0 with nothing named is refused (HP_ERR_UNUSABLE); with a name, deep parts are passed over. */
static hp_code find_part(hp_exr_reader *r, const hp_decode_options *opt, bool explicit_rgb, const char *layer,
                         hp_image_info *info, selection *sel, const exr_attr_chlist_t **found_cl, int *found_part,
                         hp_err *err)
{
    bool named = explicit_rgb || has_text(opt->layer);
    *found_cl = NULL;
    for (int p = 0; p < (named ? info->part_count : 1); p++) {
        exr_storage_t storage;
        const exr_attr_chlist_t *cl;
        if (exr_get_storage(r->ctx, p, &storage) != EXR_ERR_SUCCESS ||
            exr_get_channels(r->ctx, p, &cl) != EXR_ERR_SUCCESS || !cl)
            continue;
        if (storage != EXR_STORAGE_SCANLINE && storage != EXR_STORAGE_TILED) {
            if (!named)
                return hp_fail(err, HP_ERR_UNUSABLE, "EXR part 0 holds deep data, which has no single colour per "
                                                     "pixel; only flat scanline and tiled images are supported");
            continue;
        }
        bool found;
        if (explicit_rgb)
            found = select_explicit(cl, opt, sel);
        else if (has_text(opt->layer))
            found = select_layer(cl, layer, sel);
        else
            found = select_automatic(cl, sel);
        if (found) {
            *found_cl = cl, *found_part = p;
            return HP_OK;
        }
        if (p == 0)
            list_channels(cl, info->channel_list, sizeof(info->channel_list));
    }
    return HP_OK;
}

/* No part has the colour asked for: which name the file lacks, or that the names are in different parts,
 * or the layers it has, or that it has no colour at all. */
static hp_code fail_no_colour(const hp_exr_reader *r, const hp_decode_options *opt, bool explicit_rgb,
                              const hp_image_info *info, hp_err *err)
{
    int part_count = info->part_count;
    const char *parts = part_count > 1 ? " of part 0 (no part has the channels asked for)" : "";
    if (explicit_rgb) {
        static const char *const options[3] = {"channel_r", "channel_g", "channel_b"};
        static const char *const colours[3] = {"red", "green", "blue"};
        const char *names[3] = {opt->channel_r, opt->channel_g, opt->channel_b};
        for (int c = 0; c < 3; c++)
            if (!in_some_part(r, part_count, names[c]))
                return hp_fail_field(err, HP_ERR_UNUSABLE, options[c],
                                     "EXR has no channel named '%s' (asked for as %s); channels%s: %s", names[c],
                                     colours[c], parts, info->channel_list);
        return hp_fail_field(err, HP_ERR_UNUSABLE, "channel_r",
                             "EXR has channels named %s, %s and %s, but not in one part: the colour is read "
                             "from one part; channels%s: %s",
                             opt->channel_r, opt->channel_g, opt->channel_b, parts, info->channel_list);
    }
    if (has_text(opt->layer)) {
        /* The layers come first: they are what the caller can put in place of the name. */
        char layers[HP_IMAGE_LIST_MAX];
        bool plain;
        list_layers(r->ctx, part_count, layers, sizeof(layers), &plain);
        if (!layers[0])
            return hp_fail_field(err, HP_ERR_UNUSABLE, "layer",
                                 "EXR has no layer '%s': the file has no layers, only the plain channels %s",
                                 opt->layer, info->channel_list);
        return hp_fail_field(err, HP_ERR_UNUSABLE, "layer",
                             "EXR has no layer '%s' with R, G, B or Y channels; its layers: %s%s; channels%s: %s",
                             opt->layer, layers, plain ? " (and plain channels)" : "", parts, info->channel_list);
    }
    return hp_fail(err, HP_ERR_UNUSABLE, "EXR has no colour channels (R, G, B or Y, plain or in a layer); "
                                         "channels found: %s", info->channel_list[0] ? info->channel_list : "none");
}

/* The chosen slots against what this decoder takes: a named alpha or depth the part has, no luminance-chroma
 * image, full-resolution channels, no channel both colour and depth. A colour channel in two slots (grey) is
 * copied from the first (r->copy_from). */
static hp_code check_slots(hp_exr_reader *r, const exr_attr_chlist_t *cl, const hp_decode_options *opt,
                           const selection *sel, bool explicit_rgb, const hp_image_info *info, hp_err *err)
{
    if (has_text(opt->channel_a) && r->chan[SLOT_A] < 0)
        return hp_fail_field(err, HP_ERR_UNUSABLE, "channel_a",
                             "EXR has no alpha channel '%s' in part %d; channels: %s", opt->channel_a, r->part,
                             info->channel_list);
    if (has_text(opt->depth) && r->chan[SLOT_Z] < 0)
        return hp_fail_field(err, HP_ERR_UNUSABLE, "depth", "EXR has no depth channel '%s' in part %d; channels: %s",
                             opt->depth, r->part, info->channel_list);
    if (sel->grey && !explicit_rgb && find_in_layer(cl, sel->layer, "RY") >= 0 &&
        find_in_layer(cl, sel->layer, "BY") >= 0)
        return hp_fail_field(err, HP_ERR_UNUSABLE, has_text(opt->layer) ? "layer" : "",
                             "EXR luminance-chroma image (Y, RY, BY) is not supported; write RGB; channels: %s",
                             info->channel_list);
    for (int s = 0; s < SLOT_COUNT; s++) {
        r->copy_from[s] = -1;
        if (r->chan[s] < 0)
            continue;
        const exr_attr_chlist_entry_t *e = &cl->entries[r->chan[s]];
        if (e->x_sampling != 1 || e->y_sampling != 1)
            return hp_fail_field(err, HP_ERR_UNUSABLE, slot_option(opt, s),
                                 s == SLOT_Z ? "EXR depth channel '%.*s' is subsampled (%d x %d), so its size differs "
                                               "from the colour's"
                                             : "EXR channel '%.*s' is subsampled (%d x %d); only full-resolution "
                                               "colour is supported",
                                 e->name.length, e->name.str, e->x_sampling, e->y_sampling);
        for (int t = 0; t < s; t++)
            if (r->chan[t] == r->chan[s]) {
                if (s == SLOT_Z)
                    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, slot_option(opt, SLOT_Z),
                                         "EXR channel '%.*s' cannot be both colour and depth", e->name.length,
                                         e->name.str);
                if (r->copy_from[s] < 0)
                    r->copy_from[s] = t;
            }
    }
    return HP_OK;
}

/* The slots' types, and what info says of them: names, layer, grey, alpha, depth, whether half is exact. */
static void describe_slots(hp_exr_reader *r, const exr_attr_chlist_t *cl, const selection *sel, hp_image_info *info)
{
    for (int s = 0; s < SLOT_COUNT; s++)
        if (r->chan[s] >= 0)
            r->type[s] = (uint16_t)cl->entries[r->chan[s]].pixel_type;
    for (int s = 0; s < 4; s++)
        if (r->chan[s] >= 0)
            copy_name(info->channel_names[s], &cl->entries[r->chan[s]]);
    if (r->chan[SLOT_Z] >= 0)
        copy_name(info->depth_channel, &cl->entries[r->chan[SLOT_Z]]);
    snprintf(info->layer, sizeof(info->layer), "%s", sel->layer);
    info->grey = r->copy_from[SLOT_G] >= 0 && r->copy_from[SLOT_B] >= 0;
    info->has_alpha = r->chan[SLOT_A] >= 0;
    info->has_depth = r->chan[SLOT_Z] >= 0;
    info->half_exact = true;
    for (int s = 0; s < 4; s++)
        if (r->chan[s] >= 0 && r->type[s] != EXR_PIXEL_HALF)
            info->half_exact = false;
}

/* A decompressed chunk holds, line after line, each channel of the part in list order (width values of its
 * type, little-endian): what the library's unpack reads. Where a channel is subsampled a line may lack it, so
 * those parts keep the library's unpack, which knows the rule (r->direct false); else each slot's offset in a
 * pixel's bytes. */
static void plan_direct_reads(hp_exr_reader *r, const exr_attr_chlist_t *cl)
{
    uint64_t pixel_bytes = 0;
    bool direct = !r->library_decode && HOST_IS_LITTLE_ENDIAN;
    for (int i = 0; i < cl->num_channels; i++) {
        const exr_attr_chlist_entry_t *e = &cl->entries[i];
        for (int s = 0; s < SLOT_COUNT; s++)
            if (r->chan[s] == i)
                r->slot_offset[s] = (uint32_t)pixel_bytes;
        direct = direct && e->x_sampling == 1 && e->y_sampling == 1;
        pixel_bytes += e->pixel_type == EXR_PIXEL_HALF ? 2 : 4;
        if (pixel_bytes > UINT32_MAX) {
            direct = false;
            break;
        }
    }
    r->direct = direct;
    r->pixel_bytes = direct ? (uint32_t)pixel_bytes : 0;
}

/* Picks the part and its channels; fills the channel fields of info. A failure that comes from a name in
 * opt says which in err->field, as the option is called ("layer", "channel_g", "depth"), so that the API
 * can name the request parameter. */
static hp_code choose_channels(hp_exr_reader *r, const hp_decode_options *opt, hp_image_info *info, hp_err *err)
{
    bool explicit_rgb;
    hp_code code = check_rgb_options(opt, &explicit_rgb, err);
    if (code != HP_OK)
        return code;
    char layer[HP_IMAGE_NAME_MAX] = ""; /* "ViewLayer.Combined." is taken as "ViewLayer.Combined" */
    if (has_text(opt->layer)) {
        snprintf(layer, sizeof(layer), "%s", opt->layer);
        size_t n = strlen(layer);
        if (n > 1 && layer[n - 1] == '.')
            layer[n - 1] = '\0';
    }
    selection sel;
    const exr_attr_chlist_t *cl;
    int part = -1;
    if ((code = find_part(r, opt, explicit_rgb, layer, info, &sel, &cl, &part, err)) != HP_OK)
        return code;
    if (!cl)
        return fail_no_colour(r, opt, explicit_rgb, info, err);

    r->part = part;
    for (int s = 0; s < 4; s++)
        r->chan[s] = sel.chan[s];
    r->chan[SLOT_Z] = select_depth(cl, opt, sel.layer);
    if (has_text(opt->channel_a))
        r->chan[SLOT_A] = find_channel(cl, opt->channel_a);
    list_channels(cl, info->channel_list, sizeof(info->channel_list));
    info->channel_count = (uint32_t)cl->num_channels;
    info->part = part;
    if ((code = check_slots(r, cl, opt, &sel, explicit_rgb, info, err)) != HP_OK)
        return code;
    describe_slots(r, cl, &sel, info);
    plan_direct_reads(r, cl);
    return HP_OK;
}

/* --- Attribute sizes ------------------------------------------------------------------------------- */

/* Every attribute's declared size against the bytes that follow it (issue 21, item 8), before anything
 * reads the header again: OpenEXR 3.1's C++ library, which decodes DWAA/DWAB here (image_exr_dwa.h),
 * trusts the size, and a 2,247-byte file whose `type` string declared 1.9 GB made its
 * TypedAttribute<std::string>::readValueFrom allocate and zero 1.9 GB before the read failed. The C core
 * is safe from it: exr_start_read (3.1.5) finds such a string "Invalid size" and allocates nothing, but
 * unless EXR_CONTEXT_FLAG_STRICT_HEADER is set it only reports that and reads on as though the value were
 * empty, so its success proves nothing about the bytes the C++ library will read. Hence this walk, over
 * the layout of openexr.com's "OpenEXR File Layout": magic and version (8 bytes), then per part a list of
 * attributes (name\0 type\0 int32 size, then size bytes) ended by an empty name; a multi-part file ends its
 * list of headers with one more empty name. Inside a value, two types carry sizes of their own that the
 * C++ library allocates from: a stringvector's strings (int32 length, bytes; 3.1.5 checks these itself)
 * and a preview's width and height (then 4 bytes a pixel). Other types allocate no more than their size. */

#define EXR_VERSION_MULTIPART 0x1000 /* the version field's flag bits (openexr.com, "Version Field") */
#define EXR_NAME_MAX 255             /* an attribute or type name, long-name files included */

typedef struct header_walk {
    const uint8_t *bytes;
    size_t len, ready; /* bytes [0, ready) are known to be there */
    hp_arrival *arrival;
    int part;
} header_walk;

/* Bytes [0, end) are there, waiting for them when the body is still arriving (a block at a time, as the
 * library reads). */
static bool walk_has(header_walk *w, size_t end)
{
    if (end <= w->ready)
        return true;
    if (end > w->len)
        return false;
    size_t ahead = w->len - end < 4096 ? w->len : end + 4096;
    if (!w->arrival || hp_arrival_wait(w->arrival, ahead))
        w->ready = w->arrival ? ahead : w->len;
    else if (hp_arrival_wait(w->arrival, end))
        w->ready = end;
    return end <= w->ready;
}

static hp_code walk_name(header_walk *w, size_t *pos, char *name, const char *what, hp_err *err)
{
    for (size_t n = 0; n <= EXR_NAME_MAX; n++) {
        if (!walk_has(w, *pos + n + 1))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d ends in an attribute's %s at byte %zu",
                           w->part, what, *pos);
        name[n] = (char)w->bytes[*pos + n];
        if (name[n] == '\0') {
            *pos += n + 1;
            return HP_OK;
        }
    }
    return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d: an attribute's %s at byte %zu is longer "
                   "than %d bytes", w->part, what, *pos, EXR_NAME_MAX);
}

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The sizes inside a stringvector or preview value [at, at + size), all of which are there. */
static hp_code walk_value(const header_walk *w, const char *name, const char *type, size_t at, uint32_t size,
                          hp_err *err)
{
    const uint8_t *v = w->bytes + at;
    if (strcmp(type, "stringvector") == 0) {
        for (uint32_t off = 0; off < size;) {
            uint32_t n = size - off >= 4 ? load_le32(v + off) : UINT32_MAX;
            if (n > INT32_MAX || n > size - off - 4)
                return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d: attribute '%s' (stringvector) "
                               "has a string of %d bytes at byte %zu, past the attribute's %u bytes", w->part, name,
                               (int32_t)n, at + off, size);
            off += 4 + n;
        }
    } else if (strcmp(type, "preview") == 0) {
        uint32_t pw = size >= 8 ? load_le32(v) : 0, ph = size >= 8 ? load_le32(v + 4) : 0;
        if (size < 8 || (uint64_t)pw * ph > (size - 8) / 4)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d: attribute '%s' (preview) declares "
                           "%ux%u pixels in %u bytes", w->part, name, pw, ph, size);
    }
    return HP_OK;
}

/* One part's attributes from *pos, through the empty name that ends them. */
static hp_code walk_header(header_walk *w, size_t *pos, hp_err *err)
{
    char name[EXR_NAME_MAX + 1], type[EXR_NAME_MAX + 1];
    for (;;) {
        hp_code code = walk_name(w, pos, name, "name", err);
        if (code != HP_OK || name[0] == '\0')
            return code;
        if ((code = walk_name(w, pos, type, "type", err)) != HP_OK)
            return code;
        if (!walk_has(w, *pos + 4))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d ends in the size of attribute '%s' "
                           "at byte %zu", w->part, name, *pos);
        int32_t size = (int32_t)load_le32(w->bytes + *pos);
        *pos += 4;
        size_t left = w->len - *pos;
        if (size < 0 || (uint64_t)size > left)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d: attribute '%s' (%s) declares %d "
                           "bytes at byte %zu, but only %zu bytes of the file follow", w->part, name, type, size,
                           *pos - 4, left);
        if (!walk_has(w, *pos + (size_t)size))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: the body ended in attribute '%s'", name);
        if ((code = walk_value(w, name, type, *pos, (uint32_t)size, err)) != HP_OK)
            return code;
        *pos += (size_t)size;
    }
}

static hp_code check_attribute_sizes(const hp_exr_reader *r, hp_err *err)
{
    header_walk w = {.bytes = r->stream.bytes, .len = r->stream.len, .arrival = r->stream.arrival};
    if (!walk_has(&w, 8))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: no version field");
    bool multipart = load_le32(w.bytes + 4) & EXR_VERSION_MULTIPART;
    size_t pos = 8;
    for (;; w.part++) {
        hp_code code = walk_header(&w, &pos, err);
        if (code != HP_OK || !multipart)
            return code;
        if (!walk_has(&w, pos + 1))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: the list of headers has no end (byte %zu)", pos);
        if (w.bytes[pos] == '\0')
            return HP_OK;
    }
}

/* --- Decompression bombs --------------------------------------------------------------------------- */

/* Issue 21, item 5: a frame may not decode to more than its body can hold. For each compression, the most
 * bytes of a channel's decompressed samples that one byte of a chunk can hold, from its coding:
 *   NONE   1: every sample is stored.
 *   RLE    64: a run is a count byte and a value for at most 128 equal bytes (OpenEXR's internal_rle.c,
 *          ImfRle.cpp: MAX_RUN_LENGTH 127, the count being run length - 1).
 *   ZIPS, ZIP  1032: zlib's limit ("zlib Technical Details", zlib.net): a match of RFC 1951's longest
 *          length, 258 bytes, costs at least 2 bits (a 1-bit length code and a 1-bit distance code).
 *   PIZ    4080/9 = 453.3: its Huffman stage (internal_huf.c, ImfHuf.cpp) codes 16-bit values, at least
 *          1 bit each, and repeats the previous value at most 255 times for a run code of at least 1 bit
 *          and an 8-bit count: 255 * 16 bits for 9. The wavelet and the value table before it keep the
 *          count of 16-bit values (a float is two).
 *   PXR24  zlib's 1032, on floats cut to 24 bits: 1376 for a float, 1032 for half and uint.
 *   B44    a 4x4 block of halves is 14 bytes (ImfB44Compressor.cpp): 32/14; B44A 3 for a flat block: 32/3.
 *          Float and uint channels are stored as they are: 1.
 *   DWAA, DWAB  64 * 1032 = 66048, its most compressible path: RLE (128 bytes from 2) then zlib, which a
 *          chunk may choose for any channel (ImfDwaCompressor.cpp). Its DCT path is no better: an 8x8 block
 *          of 64 samples (2 or 4 bytes each) is at least a DC value and an AC end-of-block of 2 bytes each,
 *          both through zlib (or the AC through PIZ's Huffman coder). Constant frames written by OpenEXR 3.1
 *          measured 12947:1 (3840x2160 RGBA half, DWAB) and 27474:1 (16384x256 RGB float, DWAB), so
 *          zlib's 1032 alone would refuse real files.
 * Each chunk also costs its 8-byte entry in the offset table and a leader of 8 bytes at least (y and the
 * size; a tile has 20). The file must have as many bytes as all that for the part's chunks of level 0:
 * this counts every byte of the file (header, other parts, other levels) as pixel data, so it only ever
 * errs towards accepting. 0 means no bound is known (a compression of a later OpenEXR). */
static double max_expansion(exr_compression_t compression, exr_pixel_type_t type, const char **rule)
{
    switch (compression) {
    case EXR_COMPRESSION_NONE: *rule = "uncompressed, every sample stored"; return 1;
    case EXR_COMPRESSION_RLE: *rule = "OpenEXR RLE, at most 128 bytes from 2"; return 64;
    case EXR_COMPRESSION_ZIPS:
    case EXR_COMPRESSION_ZIP: *rule = "zlib, at most 1032:1"; return 1032;
    case EXR_COMPRESSION_PIZ: *rule = "PIZ Huffman runs, at most 255 16-bit values in 9 bits"; return 4080.0 / 9;
    case EXR_COMPRESSION_PXR24:
        *rule = "zlib's 1032:1 on 24-bit floats";
        return type == EXR_PIXEL_FLOAT ? 1032.0 * 4 / 3 : 1032;
    case EXR_COMPRESSION_B44:
        *rule = "14 bytes for a 4x4 block of halves";
        return type == EXR_PIXEL_HALF ? 32.0 / 14 : 1;
    case EXR_COMPRESSION_B44A:
        *rule = "3 bytes for a flat 4x4 block of halves";
        return type == EXR_PIXEL_HALF ? 32.0 / 3 : 1;
    case EXR_COMPRESSION_DWAA:
    case EXR_COMPRESSION_DWAB: *rule = "DWA's RLE then zlib, at most 66048:1"; return 64.0 * 1032;
    default: *rule = ""; return 0;
    }
}

#define EXR_CHUNK_OVERHEAD 16 /* bytes of a chunk outside its data: offset table entry, y and size */

static hp_code check_body_justifies(const hp_exr_reader *r, const exr_attr_chlist_t *cl, size_t len, hp_err *err)
{
    const char *rule = "";
    double raw = 0, least = 0; /* bytes a pixel: decompressed, and compressed at the very least */
    for (int i = 0; i < cl->num_channels; i++) {
        const exr_attr_chlist_entry_t *e = &cl->entries[i];
        double ratio = max_expansion(r->compression, e->pixel_type, &rule);
        if (ratio <= 0)
            return HP_OK;
        /* a subsampled channel has a sample every x_sampling pixels of every y_sampling-th line */
        double xs = e->x_sampling > 1 ? e->x_sampling : 1, ys = e->y_sampling > 1 ? e->y_sampling : 1;
        double bytes = (e->pixel_type == EXR_PIXEL_HALF ? 2 : 4) / (xs * ys);
        raw += bytes;
        least += bytes / ratio;
    }
    double pixels = (double)r->width * r->height, overhead = (double)r->chunk_count * EXR_CHUNK_OVERHEAD;
    if (least <= 0 || overhead + pixels * least <= (double)len)
        return HP_OK;
    return hp_fail(err, HP_ERR_TOO_LARGE,
                   "EXR: the %zu-byte file declares %ux%u pixels of %g bytes (part %d, %s); its compression cannot "
                   "justify that many: at its best (%s), with %d bytes for each of its %u chunks, they need at least "
                   "%.0f bytes",
                   len, r->width, r->height, raw, r->part, hp_exr_compression_name(r->compression), rule,
                   EXR_CHUNK_OVERHEAD,
                   r->chunk_count, overhead + pixels * least);
}

/* The part's `chromaticities` attribute (OpenEXR's standard attributes: the CIE xy of the primaries and the
 * white that its RGB stands for), when it has one. An attribute of that name and another type is a damaged
 * header. */
static hp_code read_chromaticities(hp_exr_reader *r, hp_image_info *info, hp_err *err)
{
    exr_attr_chromaticities_t c;
    exr_result_t rv = exr_attr_get_chromaticities(r->ctx, r->part, "chromaticities", &c);
    info->has_chromaticities = rv == EXR_ERR_SUCCESS;
    if (rv == EXR_ERR_NO_ATTR_BY_NAME || rv == EXR_ERR_SUCCESS) {
        if (rv == EXR_ERR_SUCCESS)
            info->chromaticities = (hp_chromaticities){{c.red_x, c.red_y}, {c.green_x, c.green_y},
                                                       {c.blue_x, c.blue_y}, {c.white_x, c.white_y}};
        return HP_OK;
    }
    return exr_fail(err, rv, "the chromaticities attribute of part %d", r->part);
}

/* The data and display windows: part 0's first, checked against the limits before anything else (a frame over
 * them is refused whatever its channels), then the channels chosen; a later part chosen by name is checked
 * again. */
static hp_code read_windows(hp_exr_reader *r, const hp_decode_options *opt, hp_image_info *info, hp_err *err)
{
    for (int pass = 0; pass < 2; pass++) {
        int part = pass == 0 ? 0 : r->part;
        exr_attr_box2i_t dw, disp;
        exr_result_t rv;
        if ((rv = exr_get_data_window(r->ctx, part, &dw)) != EXR_ERR_SUCCESS ||
            (rv = exr_get_display_window(r->ctx, part, &disp)) != EXR_ERR_SUCCESS)
            return exr_fail(err, rv, "header of part %d: no data or display window", part);
        int64_t w = (int64_t)dw.max.x - dw.min.x + 1, h = (int64_t)dw.max.y - dw.min.y + 1;
        if (w < 1 || h < 1)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR header of part %d: empty data window (%d,%d)-(%d,%d)",
                           part, dw.min.x, dw.min.y, dw.max.x, dw.max.y);
        hp_code code = hp_image_check_limits("EXR data window", (uint64_t)w, (uint64_t)h, opt, err);
        if (code != HP_OK)
            return code;
        /* The library's line strides are int32: a scratch row must fit. */
        if (w > INT32_MAX / (SLOT_COUNT * 4))
            return hp_fail(err, HP_ERR_TOO_LARGE, "EXR data window: width %lld is more than one row can address",
                           (long long)w);
        r->data_window = dw;
        r->width = (uint32_t)w, r->height = (uint32_t)h;
        info->width = r->width, info->height = r->height;
        info->data_window = (hp_image_window){dw.min.x, dw.min.y, dw.max.x, dw.max.y};
        info->display_window = (hp_image_window){disp.min.x, disp.min.y, disp.max.x, disp.max.y};
        if (pass == 0 && (code = choose_channels(r, opt, info, err)) != HP_OK)
            return code;
        if (r->part == 0)
            break;
    }
    return HP_OK;
}

/* The chosen part's compression, storage and chromaticities. */
static hp_code read_storage(hp_exr_reader *r, hp_image_info *info, hp_err *err)
{
    exr_compression_t compression;
    exr_storage_t storage;
    exr_result_t rv;
    if ((rv = exr_get_compression(r->ctx, r->part, &compression)) != EXR_ERR_SUCCESS ||
        (rv = exr_get_storage(r->ctx, r->part, &storage)) != EXR_ERR_SUCCESS)
        return exr_fail(err, rv, "header of part %d", r->part);
    snprintf(info->compression, sizeof(info->compression), "%s", hp_exr_compression_name(compression));
    r->compression = compression;
    r->tiled = storage == EXR_STORAGE_TILED;
    hp_code code = read_chromaticities(r, info, err);
    if (code != HP_OK)
        return code;
    info->tiled = r->tiled;
#ifdef HP_EXR_DWA_CXX
    r->dwa_cxx = compression == EXR_COMPRESSION_DWAA || compression == EXR_COMPRESSION_DWAB;
#endif
    return HP_OK;
}

/* The chunks' shape: tiles, or so many scanlines a chunk; and their count. */
static hp_code read_chunk_shape(hp_exr_reader *r, hp_image_info *info, hp_err *err)
{
    exr_result_t rv;
    if (r->tiled) {
        uint32_t tw, th;
        exr_tile_level_mode_t level_mode;
        exr_tile_round_mode_t round_mode;
        if ((rv = exr_get_tile_descriptor(r->ctx, r->part, &tw, &th, &level_mode, &round_mode)) != EXR_ERR_SUCCESS)
            return exr_fail(err, rv, "tile description of part %d", r->part);
        if (tw < 1 || th < 1 || tw > INT32_MAX || th > INT32_MAX)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR tile size %u x %u is invalid", tw, th);
        r->tile_w = tw, r->tile_h = th;
        r->tiles_x = (uint32_t)(((uint64_t)r->width + tw - 1) / tw);
        r->tiles_y = (uint32_t)(((uint64_t)r->height + th - 1) / th);
        r->chunk_count = r->tiles_x * r->tiles_y; /* at most 16384^2 (1 x 1 tiles), fits */
        r->chunk_w = tw < r->width ? tw : r->width;
        r->chunk_h = th < r->height ? th : r->height;
    } else {
        int32_t lines;
        if ((rv = exr_get_scanlines_per_chunk(r->ctx, r->part, &lines)) != EXR_ERR_SUCCESS || lines < 1)
            return exr_fail(err, rv, "scanlines per chunk of part %d", r->part);
        r->lines_per_chunk = lines;
        r->chunk_count = (uint32_t)(((uint64_t)r->height + (uint32_t)lines - 1) / (uint32_t)lines);
        r->chunk_w = r->width;
        r->chunk_h = (uint32_t)lines < r->height ? (uint32_t)lines : r->height;
    }
    info->chunk_count = r->chunk_count;
    return HP_OK;
}

/* A chunk within the decoder's limits (its unpacked bytes, its pixels), and a body long enough for what the
 * header declares. */
static hp_code check_chunks(hp_exr_reader *r, const hp_image_info *info, size_t len, hp_err *err)
{
    uint64_t unpacked = 0;
    exr_result_t rv;
    if ((rv = exr_get_chunk_unpacked_size(r->ctx, r->part, &unpacked)) != EXR_ERR_SUCCESS)
        return exr_fail(err, rv, "chunk size of part %d", r->part);
    if (unpacked > EXR_MAX_CHUNK_UNPACKED)
        return hp_fail(err, HP_ERR_TOO_LARGE, "EXR chunks of part %d unpack to %llu bytes, over the decoder's limit "
                                              "of %llu (%u channels)", r->part, (unsigned long long)unpacked,
                       (unsigned long long)EXR_MAX_CHUNK_UNPACKED, info->channel_count);
    if ((uint64_t)r->chunk_w * r->chunk_h > EXR_MAX_CHUNK_PIXELS)
        return hp_fail(err, HP_ERR_TOO_LARGE, "EXR chunks of part %d are %ux%u pixels, over the decoder's limit of "
                                              "%llu pixels a chunk", r->part, r->chunk_w, r->chunk_h,
                       (unsigned long long)EXR_MAX_CHUNK_PIXELS);
    const exr_attr_chlist_t *cl;
    if ((rv = exr_get_channels(r->ctx, r->part, &cl)) != EXR_ERR_SUCCESS || !cl)
        return exr_fail(err, rv, "channels of part %d", r->part);
    return check_body_justifies(r, cl, len, err);
}

hp_code hp_exr_open(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                    hp_exr_reader **out, hp_err *err)
{
    hp_exr_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR: out of memory for the reader");
    r->stream.bytes = bytes;
    r->stream.len = len;
    r->stream.arrival = opt ? opt->arrival : NULL;
    r->rows = opt ? opt->rows : NULL;
    const char *library_decode = getenv("HP_EXR_GENERIC_DECODE");
    r->library_decode = library_decode && library_decode[0] && strcmp(library_decode, "0") != 0;

    exr_context_initializer_t init = EXR_DEFAULT_CONTEXT_INITIALIZER;
    init.error_handler_fn = exr_error_handler;
    init.user_data = r;
    init.read_fn = exr_stream_read;
    init.size_fn = exr_stream_size;
    /* A damaged offset table is an error, not a reason to scan the body for chunk leaders. */
    init.flags = EXR_CONTEXT_FLAG_DISABLE_CHUNK_RECONSTRUCTION;

    hp_code code = HP_OK;
    exr_last_message[0] = '\0';
    exr_result_t rv = exr_start_read(&r->ctx, "frame", &init);
    if (rv != EXR_ERR_SUCCESS) {
        code = exr_fail(err, rv, "header (%zu bytes)", len);
        goto fail;
    }
    exr_last_message[0] = '\0'; /* what the library reported and read past, as an attribute's bad size */
    if ((code = check_attribute_sizes(r, err)) != HP_OK)
        goto fail;
    info->format = HP_IMAGE_EXR;
    if ((rv = exr_get_count(r->ctx, &info->part_count)) != EXR_ERR_SUCCESS || info->part_count < 1) {
        code = exr_fail(err, rv, "header: no parts");
        goto fail;
    }
    if ((code = read_windows(r, opt, info, err)) != HP_OK || (code = read_storage(r, info, err)) != HP_OK ||
        (code = read_chunk_shape(r, info, err)) != HP_OK || (code = check_chunks(r, info, len, err)) != HP_OK)
        goto fail;
    *out = r;
    return HP_OK;

fail:
    hp_exr_close(&r);
    return code;
}

/* --- Chunks ---------------------------------------------------------------------------------------- */

hp_exr_rect hp_exr_rect_of_chunk(const hp_exr_reader *r, uint32_t index)
{
    hp_exr_rect c;
    if (r->tiled) {
        c.x = (index % r->tiles_x) * r->tile_w;
        c.y = (index / r->tiles_x) * r->tile_h;
        c.w = r->width - c.x < r->tile_w ? r->width - c.x : r->tile_w;
        c.h = r->height - c.y < r->tile_h ? r->height - c.y : r->tile_h;
    } else {
        c.x = 0;
        c.y = index * (uint32_t)r->lines_per_chunk;
        c.w = r->width;
        c.h = r->height - c.y < (uint32_t)r->lines_per_chunk ? r->height - c.y : (uint32_t)r->lines_per_chunk;
    }
    return c;
}

/* Each chunk is decoded into a small scratch, SLOT_COUNT slots of 4 bytes per pixel, every channel in
 * its own file type (half in the first 2 bytes of its slot), and converted to the frame by finish_chunk().
 * The library is never asked to convert types: OpenEXR 3.1.5's fast path for four half channels to
 * interleaved float writes them in reverse order (the psychtoolbox Desk frame decoded as A,B,G,R), so
 * conversions are ours, with the pipeline's exact half routines. */
#define SCRATCH_PIXEL (SLOT_COUNT * 4)

static void aim_channels(const hp_exr_reader *r, exr_decode_pipeline_t *dec, bool want_depth, uint8_t *scratch,
                         hp_exr_rect c)
{
    for (int i = 0; i < dec->channel_count; i++)
        dec->channels[i].decode_to_ptr = NULL;
    for (int s = 0; s < SLOT_COUNT; s++) {
        if (r->chan[s] < 0 || r->copy_from[s] >= 0 || (s == SLOT_Z && !want_depth))
            continue;
        exr_coding_channel_info_t *ch = &dec->channels[r->chan[s]];
        ch->decode_to_ptr = scratch + (size_t)s * 4;
        ch->user_pixel_stride = SCRATCH_PIXEL;
        ch->user_line_stride = (int32_t)(c.w * SCRATCH_PIXEL);
        ch->user_data_type = ch->data_type;
        ch->user_bytes_per_element = ch->bytes_per_element;
    }
}

static float slot_float(const uint8_t *p, uint16_t type)
{
    if (type == EXR_PIXEL_HALF) {
        uint16_t h;
        memcpy(&h, p, 2);
        return hp_half_to_float(h);
    }
    if (type == EXR_PIXEL_UINT) {
        uint32_t u;
        memcpy(&u, p, 4);
        return (float)u;
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}

static uint16_t slot_half(const uint8_t *p, uint16_t type)
{
    if (type == EXR_PIXEL_HALF) { /* the file's bits, NaN payloads included */
        uint16_t h;
        memcpy(&h, p, 2);
        return h;
    }
    return hp_float_to_half(slot_float(p, type));
}

/* Scratch to frame: types converted, repeated channels (grey) copied, alpha 1 where the file has none;
 * depth to its plane with the counts. */
static void finish_chunk(const hp_exr_reader *r, const hp_image_dest *dest, const uint8_t *scratch, hp_exr_rect c,
                         hp_depth_stats *stats)
{
    int src[4];
    for (int s = 0; s < 4; s++)
        src[s] = r->copy_from[s] >= 0 ? r->copy_from[s] : s;
    bool has_alpha = r->chan[SLOT_A] >= 0;
    for (uint32_t y = 0; y < c.h; y++) {
        const uint8_t *in = scratch + (size_t)y * c.w * SCRATCH_PIXEL;
        size_t out = (size_t)(c.y + y) * r->width + c.x;
        if (dest->layout == HP_LAYOUT_RGBA16F) {
            uint16_t *o = (uint16_t *)dest->rgba + out * 4;
            for (uint32_t x = 0; x < c.w; x++, in += SCRATCH_PIXEL, o += 4) {
                for (int s = 0; s < 3; s++)
                    o[s] = slot_half(in + src[s] * 4, r->type[src[s]]);
                o[3] = has_alpha ? slot_half(in + src[3] * 4, r->type[src[3]]) : 0x3c00; /* 1.0 */
            }
        } else {
            float *o = (float *)dest->rgba + out * 4;
            for (uint32_t x = 0; x < c.w; x++, in += SCRATCH_PIXEL, o += 4) {
                for (int s = 0; s < 3; s++)
                    o[s] = slot_float(in + src[s] * 4, r->type[src[s]]);
                o[3] = has_alpha ? slot_float(in + src[3] * 4, r->type[src[3]]) : 1.0f;
            }
        }
        if (dest->depth && r->chan[SLOT_Z] >= 0) {
            const uint8_t *zin = scratch + (size_t)y * c.w * SCRATCH_PIXEL + SLOT_Z * 4;
            float *zo = dest->depth + out;
            for (uint32_t x = 0; x < c.w; x++, zin += SCRATCH_PIXEL) {
                float z = slot_float(zin, r->type[SLOT_Z]);
                zo[x] = z;
                stats->background += z >= HP_IMAGE_DEPTH_BACKGROUND;
                stats->nonfinite += !isfinite(z);
            }
        }
    }
}

hp_code hp_exr_chunk_fail(const hp_exr_reader *r, uint32_t index, hp_exr_rect c, exr_result_t rv, const char *step,
                          hp_err *err)
{
    /* OpenEXR 3.1's decompressors answer some corrupt data with EXR_ERR_OUT_OF_MEMORY (a PIZ chunk with 64 KiB
     * zeroed does). Every buffer of a chunk is sized from the header, within EXR_MAX_CHUNK_UNPACKED, so a
     * failure while decompressing is taken as a bad file (400), not as the server out of memory (503). */
    if (rv == EXR_ERR_OUT_OF_MEMORY && strcmp(step, "decoding") == 0)
        rv = EXR_ERR_CORRUPT_CHUNK;
    if (r->tiled)
        return exr_fail(err, rv, "%s tile %u (%u, %u) at pixel (%d, %d)", step, index, index % r->tiles_x,
                        index / r->tiles_x, r->data_window.min.x + (int32_t)c.x, r->data_window.min.y + (int32_t)c.y);
    return exr_fail(err, rv, "%s chunk %u (scanlines %d-%d)", step, index, r->data_window.min.y + (int32_t)c.y,
                    r->data_window.min.y + (int32_t)(c.y + c.h) - 1);
}

/* --- Straight from the decompressed chunk ------------------------------------------------------------ */

/* One slot's values of one line into every fourth element of the frame's row, converted as slot_half()
 * and slot_float() do. */
static void line_to_half(uint16_t *o, const uint8_t *in, uint16_t type, uint32_t w)
{
    if (type == EXR_PIXEL_HALF) {
        for (uint32_t x = 0; x < w; x++)
            memcpy(o + 4 * (size_t)x, in + 2 * (size_t)x, 2);
    } else {
        for (uint32_t x = 0; x < w; x++)
            o[4 * (size_t)x] = hp_float_to_half(slot_float(in + 4 * (size_t)x, type));
    }
}

static void line_to_float(float *o, const uint8_t *in, uint16_t type, uint32_t w)
{
    if (type == EXR_PIXEL_HALF) {
        for (uint32_t x = 0; x < w; x++) {
            uint16_t h;
            memcpy(&h, in + 2 * (size_t)x, 2);
            o[4 * (size_t)x] = hp_half_to_float(h);
        }
    } else if (type == EXR_PIXEL_FLOAT) {
        for (uint32_t x = 0; x < w; x++)
            memcpy(o + 4 * (size_t)x, in + 4 * (size_t)x, 4);
    } else {
        for (uint32_t x = 0; x < w; x++)
            o[4 * (size_t)x] = slot_float(in + 4 * (size_t)x, type);
    }
}

/* The common frame: four lines of halves to RGBA16F pixels, alpha 1.0 where a is NULL. */
static void interleave_halves(uint16_t *o, const uint8_t *r, const uint8_t *g, const uint8_t *b, const uint8_t *a,
                              uint32_t w)
{
    uint32_t x = 0;
#ifdef __SSE2__
    const __m128i one = _mm_set1_epi16(0x3c00);
    for (; x + 8 <= w; x += 8) {
        __m128i vr = _mm_loadu_si128((const __m128i *)(r + 2 * (size_t)x));
        __m128i vg = _mm_loadu_si128((const __m128i *)(g + 2 * (size_t)x));
        __m128i vb = _mm_loadu_si128((const __m128i *)(b + 2 * (size_t)x));
        __m128i va = a ? _mm_loadu_si128((const __m128i *)(a + 2 * (size_t)x)) : one;
        __m128i rg_lo = _mm_unpacklo_epi16(vr, vg), rg_hi = _mm_unpackhi_epi16(vr, vg);
        __m128i ba_lo = _mm_unpacklo_epi16(vb, va), ba_hi = _mm_unpackhi_epi16(vb, va);
        __m128i *px = (__m128i *)(o + 4 * (size_t)x);
        _mm_storeu_si128(px + 0, _mm_unpacklo_epi32(rg_lo, ba_lo));
        _mm_storeu_si128(px + 1, _mm_unpackhi_epi32(rg_lo, ba_lo));
        _mm_storeu_si128(px + 2, _mm_unpacklo_epi32(rg_hi, ba_hi));
        _mm_storeu_si128(px + 3, _mm_unpackhi_epi32(rg_hi, ba_hi));
    }
#endif
    for (; x < w; x++) {
        uint16_t px[4] = {0, 0, 0, 0x3c00};
        memcpy(&px[0], r + 2 * (size_t)x, 2);
        memcpy(&px[1], g + 2 * (size_t)x, 2);
        memcpy(&px[2], b + 2 * (size_t)x, 2);
        if (a)
            memcpy(&px[3], a + 2 * (size_t)x, 2);
        memcpy(o + 4 * (size_t)x, px, 8);
    }
}

/* The decompressed chunk (its layout in plan_direct_reads) to the frame, with finish_chunk()'s results:
 * the file's half bits kept, grey repeated (the slots of one channel read the same bytes), alpha 1 where
 * the file has none, depth and its counts. */
static void convert_chunk(const hp_exr_reader *r, const hp_image_dest *dest, const uint8_t *chunk, hp_exr_rect c,
                          hp_depth_stats *stats)
{
    bool has_alpha = r->chan[SLOT_A] >= 0;
    bool all_half = r->type[SLOT_R] == EXR_PIXEL_HALF && r->type[SLOT_G] == EXR_PIXEL_HALF &&
                    r->type[SLOT_B] == EXR_PIXEL_HALF && (!has_alpha || r->type[SLOT_A] == EXR_PIXEL_HALF);
    for (uint32_t y = 0; y < c.h; y++) {
        const uint8_t *line = chunk + (size_t)y * c.w * r->pixel_bytes;
        const uint8_t *in[SLOT_COUNT];
        for (int s = 0; s < SLOT_COUNT; s++)
            in[s] = r->chan[s] >= 0 ? line + (size_t)c.w * r->slot_offset[s] : NULL;
        size_t out = (size_t)(c.y + y) * r->width + c.x;
        if (dest->layout == HP_LAYOUT_RGBA16F && all_half) {
            interleave_halves((uint16_t *)dest->rgba + out * 4, in[SLOT_R], in[SLOT_G], in[SLOT_B], in[SLOT_A], c.w);
        } else if (dest->layout == HP_LAYOUT_RGBA16F) {
            uint16_t *o = (uint16_t *)dest->rgba + out * 4;
            for (int s = 0; s < 3 + has_alpha; s++)
                line_to_half(o + s, in[s], r->type[s], c.w);
            for (uint32_t x = 0; x < c.w && !has_alpha; x++)
                o[4 * (size_t)x + 3] = 0x3c00; /* 1.0 */
        } else {
            float *o = (float *)dest->rgba + out * 4;
            for (int s = 0; s < 3 + has_alpha; s++)
                line_to_float(o + s, in[s], r->type[s], c.w);
            for (uint32_t x = 0; x < c.w && !has_alpha; x++)
                o[4 * (size_t)x + 3] = 1.0f;
        }
        if (dest->depth && in[SLOT_Z]) {
            float *zo = dest->depth + out;
            size_t step = r->type[SLOT_Z] == EXR_PIXEL_HALF ? 2 : 4;
            for (uint32_t x = 0; x < c.w; x++) {
                float z = slot_float(in[SLOT_Z] + step * x, r->type[SLOT_Z]);
                zo[x] = z;
                stats->background += z >= HP_IMAGE_DEPTH_BACKGROUND;
                stats->nonfinite += !isfinite(z);
            }
        }
    }
}

/* --- ZIP through libdeflate ------------------------------------------------------------------------ */

/* OpenEXR 3.1 inflates ZIP and ZIPS chunks with zlib's uncompress(), which with its checksum was half
 * the time of a frame; OpenEXR 3.2 moved to libdeflate for this speed (its ImfZip and internal_zip.c),
 * but Debian 12 ships 3.1.5. So the pipeline's decompress_fn is ours: libdeflate inflates into a buffer
 * of the range's, and EXR's ZIP transform is undone from there into dec->unpacked_buffer, where the
 * library's own ZIP path would have put the chunk. One per range (one per thread): a libdeflate
 * decompressor is not to be shared. */
typedef struct zip_inflater {
    struct libdeflate_decompressor *decompressor;
    uint8_t *inflated;
    size_t inflated_size;
    char failure[160]; /* why the last chunk was refused; the library reports only that it failed */
} zip_inflater;

/* EXR's ZIP predictor undone in place: from the second byte on, t[i] = t[i-1] + t[i] - 128 (modulo 256;
 * OpenEXR's ImfZip.cpp, internal_zip.c). A running sum, so each 16 bytes are summed within the vector by
 * four shift-adds (a Hillis-Steele scan) and the previous vector's last byte is added to all. */
static void zip_undo_predictor(uint8_t *t, size_t n)
{
    if (n < 2)
        return;
    size_t i = 1;
    uint8_t prev = t[0];
#ifdef __SSE2__
    const __m128i bias = _mm_set1_epi8((char)-128);
    __m128i carry = _mm_set1_epi8((char)prev);
    for (; i + 16 <= n; i += 16) {
        __m128i d = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(t + i)), bias);
        d = _mm_add_epi8(d, _mm_slli_si128(d, 1));
        d = _mm_add_epi8(d, _mm_slli_si128(d, 2));
        d = _mm_add_epi8(d, _mm_slli_si128(d, 4));
        d = _mm_add_epi8(d, _mm_slli_si128(d, 8));
        d = _mm_add_epi8(d, carry);
        _mm_storeu_si128((__m128i *)(t + i), d);
        __m128i last = _mm_shufflehi_epi16(_mm_unpackhi_epi8(d, d), 0xff); /* byte 15 in words 4-7 */
        carry = _mm_unpackhi_epi64(last, last);
    }
    prev = (uint8_t)_mm_cvtsi128_si32(carry);
#endif
    for (; i < n; i++)
        t[i] = prev = (uint8_t)(prev + t[i] - 128);
}

/* EXR's ZIP byte split undone: the first (n + 1) / 2 bytes are the even ones of the chunk, the rest the
 * odd ones (so the two bytes of each half land in separate runs before deflate). */
static void zip_interleave(uint8_t *out, const uint8_t *t, size_t n)
{
    const uint8_t *even = t, *odd = t + (n + 1) / 2;
    size_t pairs = n / 2, k = 0;
#ifdef __SSE2__
    for (; k + 16 <= pairs; k += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(even + k)), b = _mm_loadu_si128((const __m128i *)(odd + k));
        _mm_storeu_si128((__m128i *)(out + 2 * k), _mm_unpacklo_epi8(a, b));
        _mm_storeu_si128((__m128i *)(out + 2 * k + 16), _mm_unpackhi_epi8(a, b));
    }
#endif
    for (; k < pairs; k++) {
        out[2 * k] = even[k];
        out[2 * k + 1] = odd[k];
    }
    if (n % 2)
        out[n - 1] = even[pairs];
}

const char *hp_exr_libdeflate_text(enum libdeflate_result res)
{
    switch (res) {
    case LIBDEFLATE_BAD_DATA:
        return "it is not a valid zlib stream (bad data or checksum)";
    case LIBDEFLATE_SHORT_OUTPUT:
        return "it inflates to fewer bytes";
    case LIBDEFLATE_INSUFFICIENT_SPACE:
        return "it inflates to more bytes";
    default:
        return "libdeflate failed";
    }
}

/* The pipeline's decompress_fn for ZIP and ZIPS (exr_decode_pipeline_t): dec->packed_buffer (packed_size
 * bytes, as read) to dec->unpacked_buffer (unpacked_size bytes, allocated by the library). A chunk whose
 * packed size equals its unpacked size was stored uncompressed (deflate did not make it smaller), and the
 * library then points unpacked_buffer at packed_buffer. */
static exr_result_t inflate_zip_chunk(exr_decode_pipeline_t *dec)
{
    zip_inflater *z = dec->decoding_user_data;
    uint64_t packed = dec->chunk.packed_size, unpacked = dec->chunk.unpacked_size;
    z->failure[0] = '\0';
    if (!dec->packed_buffer || !dec->unpacked_buffer)
        return EXR_ERR_INVALID_ARGUMENT;
    if (packed == unpacked) {
        if (dec->unpacked_buffer != dec->packed_buffer)
            memcpy(dec->unpacked_buffer, dec->packed_buffer, (size_t)packed);
        return EXR_ERR_SUCCESS;
    }
    /* unpacked is at most EXR_MAX_CHUNK_UNPACKED (hp_exr_open), and the library has allocated as much */
    if (z->inflated_size < unpacked) {
        free(z->inflated);
        z->inflated_size = 0;
        if (!(z->inflated = malloc((size_t)unpacked))) {
            snprintf(z->failure, sizeof(z->failure), "out of memory for %llu inflated bytes",
                     (unsigned long long)unpacked);
            return EXR_ERR_OUT_OF_MEMORY;
        }
        z->inflated_size = (size_t)unpacked;
    }
    /* With no actual size asked for, libdeflate fails unless the stream fills exactly unpacked bytes:
     * any other size is a damaged chunk. */
    enum libdeflate_result res =
        libdeflate_zlib_decompress(z->decompressor, dec->packed_buffer, (size_t)packed, z->inflated, (size_t)unpacked,
                                   NULL);
    if (res != LIBDEFLATE_SUCCESS) {
        snprintf(z->failure, sizeof(z->failure), "ZIP data of %llu bytes does not inflate to %llu: %s",
                 (unsigned long long)packed, (unsigned long long)unpacked, hp_exr_libdeflate_text(res));
        return EXR_ERR_CORRUPT_CHUNK;
    }
    zip_undo_predictor(z->inflated, (size_t)unpacked);
    zip_interleave(dec->unpacked_buffer, z->inflated, (size_t)unpacked);
    return EXR_ERR_SUCCESS;
}

#ifdef HP_EXR_DWA_CXX
/* Chunks [first, end), or with next those a shared counter hands out, through the C++ library: a 4K DWAA frame
 * took 376 ms on one core, and 16 clients kept a third of the H200 host's 16 cores busy. Each chunk gets a
 * reader of its own over the same bytes, opened after the chunk is taken: the library's readers are not shared
 * between threads, and a reader reused keeps the buffers of the chunks it read before, which a damaged chunk
 * can decode "successfully" from (tests/test_image.c's test_dwa_fresh_memory): with one reader a chunk, a
 * frame decodes the same whatever the threads and their order. Opening one reads the header and the offset
 * table, tens of microseconds against a 4K DWAA chunk's milliseconds. */
static hp_code decode_chunks_dwa(hp_exr_reader *r, uint32_t first, uint32_t end, _Atomic uint32_t *next,
                                 const hp_image_dest *dest, uint8_t *scratch, bool want_depth, hp_depth_stats *stats,
                                 uint32_t *failed_at, hp_err *err)
{
    const exr_attr_chlist_t *cl;
    exr_result_t rv = exr_get_channels(r->ctx, r->part, &cl);
    if (rv != EXR_ERR_SUCCESS)
        return exr_fail(err, rv, "channels of part %d", r->part);
    char names[SLOT_COUNT][HP_IMAGE_NAME_MAX];
    hp_exr_dwa_slot slots[SLOT_COUNT];
    int slot_count = 0;
    for (int s = 0; s < SLOT_COUNT; s++) {
        if (r->chan[s] < 0 || r->copy_from[s] >= 0 || (s == SLOT_Z && !want_depth))
            continue;
        copy_name(names[s], &cl->entries[r->chan[s]]);
        slots[slot_count++] = (hp_exr_dwa_slot){.name = names[s], .type = r->type[s], .base = scratch + s * 4};
    }

    hp_exr_dwa_expect expect = {
        .min_x = r->data_window.min.x,
        .min_y = r->data_window.min.y,
        .max_x = r->data_window.max.x,
        .max_y = r->data_window.max.y,
        .tile_w = r->tiled ? r->tile_w : 0,
        .tile_h = r->tiled ? r->tile_h : 0,
        .slots = slots,
        .slot_count = slot_count,
    };
    /* The C++ library reads the memory itself: every byte must be there. */
    if (r->stream.arrival && !hp_arrival_wait(r->stream.arrival, r->stream.len))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: the body ended before its last byte");
    hp_code code = HP_OK;
    for (uint32_t i = next ? atomic_fetch_add(next, 1) : first; i < end && code == HP_OK;
         i = next ? atomic_fetch_add(next, 1) : i + 1) {
        *failed_at = i;
        hp_exr_rect c = hp_exr_rect_of_chunk(r, i);
        hp_exr_dwa *dwa = NULL;
        code = hp_exr_dwa_open(r->stream.bytes, r->stream.len, r->part, &expect, &dwa, err);
        if (code == HP_OK)
            code = hp_exr_dwa_read(dwa, slots, slot_count, SCRATCH_PIXEL, (size_t)c.w * SCRATCH_PIXEL, r->tiled,
                                   r->tiled ? (int)(i % r->tiles_x) : 0, r->tiled ? (int)(i / r->tiles_x) : 0,
                                   r->data_window.min.x + (int32_t)c.x, r->data_window.min.y + (int32_t)c.y,
                                   (int32_t)c.w, (int32_t)c.h, err);
        hp_exr_dwa_close(&dwa);
        if (code == HP_OK)
            finish_chunk(r, dest, scratch, c, stats);
        if (code == HP_OK && r->rows && !r->tiled)
            hp_rows_ready_piece(r->rows, i);
    }
    if (code != HP_OK && next)
        atomic_store(next, end); /* the others take no more: the frame is lost */
    return code;
}
#endif

/* Chunks [first, end) in order; or, with next, the chunks a shared counter hands out until end (several
 * threads on one frame: each takes the lowest chunk nobody has). *failed_at: the chunk that failed. */
static hp_code decode_chunks(hp_exr_reader *r, uint32_t first, uint32_t end, _Atomic uint32_t *next,
                             const hp_image_dest *dest, hp_depth_stats *stats, uint32_t *failed_at, hp_err *err);

hp_code hp_exr_decode_chunks(hp_exr_reader *r, uint32_t first, uint32_t end, const hp_image_dest *dest,
                             hp_depth_stats *stats, hp_err *err)
{
    uint32_t failed_at;
    return decode_chunks(r, first, end, NULL, dest, stats, &failed_at, err);
}

/* A chunk's place and sizes from the offset table and its leader, against what the header says of it. */
static hp_code read_chunk_info(hp_exr_reader *r, uint32_t i, hp_exr_rect c, exr_chunk_info_t *ci, hp_err *err)
{
    exr_result_t rv;
    exr_last_message[0] = '\0';
    if (r->tiled)
        rv = exr_read_tile_chunk_info(r->ctx, r->part, (int)(i % r->tiles_x), (int)(i / r->tiles_x), 0, 0, ci);
    else
        rv = exr_read_scanline_chunk_info(r->ctx, r->part, r->data_window.min.y + (int32_t)c.y, ci);
    if (rv != EXR_ERR_SUCCESS)
        return hp_exr_chunk_fail(r, i, c, rv, "reading", err);
    if (ci->width != (int32_t)c.w || ci->height != (int32_t)c.h)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR chunk %u: the file says %dx%d pixels, the header %ux%u", i,
                       ci->width, ci->height, c.w, c.h);
    /* Uncompressed data of another size than the pixels' would leave the library's unpacked buffer unwritten (it
     * decompresses nothing for NONE). */
    if (r->compression == EXR_COMPRESSION_NONE && ci->packed_size != ci->unpacked_size)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR chunk %u: %llu bytes of uncompressed data for %llu bytes of "
                       "pixels", i, (unsigned long long)ci->packed_size, (unsigned long long)ci->unpacked_size);
    if (r->direct && ci->unpacked_size != (uint64_t)c.w * c.h * r->pixel_bytes)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR chunk %u: %llu bytes unpacked, its %ux%u pixels of %u bytes "
                       "need %llu", i, (unsigned long long)ci->unpacked_size, c.w, c.h, r->pixel_bytes,
                       (unsigned long long)c.w * c.h * r->pixel_bytes);
    return HP_OK;
}

/* One thread's decoding of chunks through the library's pipeline: made on the first chunk and updated for
 * each after; ZIP inflated by libdeflate (inflate_zip_chunk), the rest by the library. */
typedef struct chunk_decoder {
    exr_decode_pipeline_t dec;
    bool initialized;
    bool zip;
    zip_inflater inflater;
    uint8_t *scratch; /* a chunk's pixels, SCRATCH_PIXEL each, where the library unpacks */
    bool want_depth;
} chunk_decoder;

/* Chunk i (at c) decoded into dest: read, decompressed, and unpacked by convert_chunk() (r->direct) or by the
 * library into the scratch, which finish_chunk() takes to dest. */
static hp_code decode_one_chunk(hp_exr_reader *r, chunk_decoder *d, uint32_t i, hp_exr_rect c,
                                const hp_image_dest *dest, hp_depth_stats *stats, hp_err *err)
{
    exr_chunk_info_t ci;
    hp_code code = read_chunk_info(r, i, c, &ci, err);
    if (code != HP_OK)
        return code;
    exr_result_t rv = d->initialized ? exr_decoding_update(r->ctx, r->part, &ci, &d->dec)
                                     : exr_decoding_initialize(r->ctx, r->part, &ci, &d->dec);
    if (rv != EXR_ERR_SUCCESS)
        return hp_exr_chunk_fail(r, i, c, rv, "preparing", err);
    aim_channels(r, &d->dec, d->want_depth, d->scratch, c);
    if (!d->initialized) {
        d->initialized = true;
        /* The library's read (and its decompression for all but ZIP) stay; the scratch it was aimed at only made
         * it choose them, and it is not written when convert_chunk() does the unpacking. */
        if ((rv = exr_decoding_choose_default_routines(r->ctx, r->part, &d->dec)) != EXR_ERR_SUCCESS)
            return hp_exr_chunk_fail(r, i, c, rv, "preparing", err);
        if (d->zip) {
            d->dec.decompress_fn = inflate_zip_chunk;
            d->dec.decoding_user_data = &d->inflater;
        }
        if (r->direct)
            d->dec.unpack_and_convert_fn = NULL;
    }
    if ((rv = exr_decoding_run(r->ctx, r->part, &d->dec)) != EXR_ERR_SUCCESS) {
        if (d->inflater.failure[0]) /* more to the point than the library's "unable to decompress" */
            snprintf(exr_last_message, sizeof(exr_last_message), "%s", d->inflater.failure);
        return hp_exr_chunk_fail(r, i, c, rv, "decoding", err);
    }
    if (r->direct && !d->dec.unpacked_buffer)
        return hp_exr_chunk_fail(r, i, c, EXR_ERR_CORRUPT_CHUNK, "decoding", err);
    if (r->direct)
        convert_chunk(r, dest, d->dec.unpacked_buffer, c, stats);
    else
        finish_chunk(r, dest, d->scratch, c, stats);
    return HP_OK;
}

static hp_code decode_chunks(hp_exr_reader *r, uint32_t first, uint32_t end, _Atomic uint32_t *next,
                             const hp_image_dest *dest, hp_depth_stats *stats, uint32_t *failed_at, hp_err *err)
{
    *failed_at = first; /* a failure before any chunk (memory) counts as the first's */
    if (first > end || end > r->chunk_count || dest->width != r->width || dest->height != r->height)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: chunks %u-%u of %u, or a %ux%u destination for %ux%u",
                       first, end, r->chunk_count, dest->width, dest->height, r->width, r->height);

    /* Zeroed: a slot that a damaged chunk leaves unwritten then reads as zeros, never as earlier memory. */
    uint8_t *scratch = calloc((size_t)r->chunk_w * r->chunk_h, SCRATCH_PIXEL);
    if (!scratch)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR: out of memory for a %ux%u chunk", r->chunk_w, r->chunk_h);
    bool want_depth = dest->depth && r->chan[SLOT_Z] >= 0;
#ifdef HP_EXR_DWA_CXX
    if (r->dwa_cxx) {
        hp_code dwa_code = decode_chunks_dwa(r, first, end, next, dest, scratch, want_depth, stats, failed_at, err);
        free(scratch);
        return dwa_code;
    }
#endif

    chunk_decoder d = {.dec = EXR_DECODE_PIPELINE_INITIALIZER, .scratch = scratch, .want_depth = want_depth};
    d.zip = !r->library_decode && (r->compression == EXR_COMPRESSION_ZIP || r->compression == EXR_COMPRESSION_ZIPS);
    if (d.zip && !(d.inflater.decompressor = libdeflate_alloc_decompressor())) {
        free(scratch);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR: out of memory for a ZIP decompressor");
    }
    hp_code code = HP_OK;
    for (uint32_t i = next ? atomic_fetch_add(next, 1) : first; i < end; i = next ? atomic_fetch_add(next, 1) : i + 1) {
        *failed_at = i;
        if ((code = decode_one_chunk(r, &d, i, hp_exr_rect_of_chunk(r, i), dest, stats, err)) != HP_OK)
            break;
        if (r->rows && !r->tiled)
            hp_rows_ready_piece(r->rows, i);
    }
    if (code != HP_OK && next)
        atomic_store(next, end); /* the others take no more: the frame is lost */
    exr_decoding_destroy(r->ctx, &d.dec);
    if (d.inflater.decompressor)
        libdeflate_free_decompressor(d.inflater.decompressor);
    free(d.inflater.inflated);
    free(scratch);
    return code;
}

/* --- Entry points ---------------------------------------------------------------------------------- */

static hp_code exr_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                        hp_err *err)
{
    hp_exr_reader *r = NULL;
    hp_code code = hp_exr_open(bytes, len, opt, info, &r, err);
    hp_exr_close(&r);
    return code;
}

static hp_code decode_all(hp_exr_chunk_worker *w)
{
    return decode_chunks(w->reader, 0, w->reader->chunk_count, w->next, w->dest, &w->stats, &w->failed_at, &w->err);
}

static void *decode_worker(void *arg)
{
    hp_exr_chunk_worker *w = arg;
    w->code = w->work(w);
    return NULL;
}

/* A worker's own thread, named for top -H, perf and /proc (decode_worker also runs on the caller's). */
static void *decode_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-exr-decode");
    return decode_worker(arg);
}

#define HP_EXR_MAX_THREADS 64

/* Frames in exr_decode (or hp_image_zip_inflate, api/codecs/image_exr_zip.c) at once in this process. Each takes its ask (opt->threads, the daemon's
 * decode_threads: the cores) divided by the frames decoding when it starts: 16 frames arriving together get
 * N, N/2, ... N/16 threads, about 3.4 N in all rather than 16 N. On the H200 host with 16 clients (the PNG
 * deflated on the GPU, so that the CPU is the bound) that served 72-76 frames/s against 64 without it
 * (150 against 140 ms of CPU a frame oversubscribed), and 70-80 against 65 with a strict count of threads
 * at work: there a frame still arriving holds its threads while they wait for bytes, the frames after it
 * get one, and the cores stood 30% idle (docs/BENCHMARKS.md, issue 20). */
static _Atomic uint32_t frames_decoding;

uint32_t hp_image_frames_decoding(void) { return atomic_load(&frames_decoding); }

void hp_exr_frame_done(void) { atomic_fetch_sub(&frames_decoding, 1); }

/* The frame's chunks on `threads` threads (this one among them): each takes the next chunk nobody has
 * taken. Of several failures, the first chunk's in the file: the same error whichever thread met it.
 * proto: the work and its destination, the same for every thread. */
hp_code hp_exr_decode_threaded(hp_exr_reader *r, uint32_t threads, const hp_exr_chunk_worker *proto,
                               hp_depth_stats *stats, hp_err *err)
{
    threads = threads < 2 ? 2 : threads > HP_EXR_MAX_THREADS ? HP_EXR_MAX_THREADS : threads;
    _Atomic uint32_t next = 0;
    hp_exr_chunk_worker workers[HP_EXR_MAX_THREADS];
    pthread_t tids[HP_EXR_MAX_THREADS];
    bool started[HP_EXR_MAX_THREADS] = {false};
    for (uint32_t t = 0; t < threads; t++) {
        workers[t] = (hp_exr_chunk_worker){.reader = r, .next = &next, .work = proto->work, .dest = proto->dest,
                                           .split = proto->split};
        if (t > 0) /* a thread that cannot be had is simply one fewer taking chunks */
            started[t] = pthread_create(&tids[t], NULL, decode_thread, &workers[t]) == 0;
    }
    decode_worker(&workers[0]);
    started[0] = true;
    for (uint32_t t = 1; t < threads; t++)
        if (started[t])
            pthread_join(tids[t], NULL);
    hp_code code = HP_OK;
    uint32_t first_failed = UINT32_MAX;
    for (uint32_t t = 0; t < threads; t++) {
        if (!started[t])
            continue;
        stats->background += workers[t].stats.background;
        stats->nonfinite += workers[t].stats.nonfinite;
        if (workers[t].code != HP_OK && workers[t].failed_at < first_failed) {
            first_failed = workers[t].failed_at;
            code = workers[t].code;
            if (err)
                *err = workers[t].err;
        }
    }
    return code;
}

/* The threads a frame takes, and it counted among frames_decoding until hp_exr_frame_done: its ask divided
 * by the frames decoding, at least 4 chunks a thread. */
uint32_t hp_exr_frame_threads(const hp_exr_reader *r, const hp_decode_options *opt)
{
    uint32_t sharing = atomic_fetch_add(&frames_decoding, 1) + 1;
    uint32_t threads = opt && opt->threads > 1 ? (opt->threads + sharing - 1) / sharing : 1;
    if (threads > HP_EXR_MAX_THREADS)
        threads = HP_EXR_MAX_THREADS;
    if (threads > r->chunk_count / 4)
        threads = r->chunk_count / 4 > 1 ? r->chunk_count / 4 : 1;
    return threads;
}

#ifdef HP_EXR_DWA_CXX
/* The threads a DWA frame's memory allows: each holds a reader whose buffers take a whole chunk of every
 * channel (OpenEXR 3.1's line buffer, and the DWA compressor's), and a scratch of SCRATCH_PIXEL a pixel; a
 * 16384-wide DWAB chunk of 256 lines and 32 float channels is 512 MiB of the first alone. At most
 * DWA_THREADS_BYTES together, so that threads do not multiply what a hostile header may claim. */
#define DWA_THREADS_BYTES ((uint64_t)512 << 20)
static uint32_t dwa_thread_cap(const hp_exr_reader *r)
{
    const exr_attr_chlist_t *cl;
    uint64_t pixel = SCRATCH_PIXEL;
    if (exr_get_channels(r->ctx, r->part, &cl) == EXR_ERR_SUCCESS)
        for (int i = 0; i < cl->num_channels; i++)
            pixel += cl->entries[i].pixel_type == EXR_PIXEL_HALF ? 2 : 4;
    uint64_t each = (uint64_t)r->chunk_w * r->chunk_h * pixel;
    uint64_t cap = each ? DWA_THREADS_BYTES / each : 1;
    return cap < 1 ? 1 : cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}
#endif

static hp_code exr_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                          const hp_image_dest *dest, hp_depth_stats *stats, hp_err *err)
{
    hp_image_info fresh = *info;
    hp_exr_reader *r = NULL;
    hp_code code = hp_exr_open(bytes, len, opt, &fresh, &r, err);
    if (code != HP_OK)
        return code;
    if (!r->direct && !r->dwa_cxx)
        hp_debug("EXR part %d: converted through the library's unpack and a scratch (%s)", r->part,
                 r->library_decode ? "HP_EXR_GENERIC_DECODE is set" : "a subsampled channel, or a big-endian host");
    /* One frame's chunks over threads: each takes the next chunk nobody has taken (a shared counter), and
     * decompresses and converts it into its own rows. In file order, not in fixed ranges: a frame that is
     * still arriving (hp_decode_options.arrival) is then decoded as it comes, every thread on the newest
     * chunks, instead of the last range's thread starting its whole range after the last byte. At least 4
     * chunks a thread, so that a small frame is not split for nothing. */
    if (r->rows && !r->tiled) /* chunk i is rows [i * lines, (i + 1) * lines) of the frame */
        hp_rows_ready_layout(r->rows, r->height, (uint32_t)r->lines_per_chunk);
    uint32_t threads = hp_exr_frame_threads(r, opt);
#ifdef HP_EXR_DWA_CXX
    if (r->dwa_cxx && threads > dwa_thread_cap(r))
        threads = dwa_thread_cap(r);
#endif
    hp_exr_chunk_worker proto = {.reader = r, .work = decode_all, .dest = dest};
    code = threads <= 1 ? hp_exr_decode_chunks(r, 0, r->chunk_count, dest, stats, err)
                        : hp_exr_decode_threaded(r, threads, &proto, stats, err);
    hp_exr_frame_done();
    hp_exr_close(&r);
    return code;
}

static bool exr_sniff(const uint8_t *bytes, size_t len)
{
    static const uint8_t magic[4] = {0x76, 0x2f, 0x31, 0x01}; /* 20000630 little-endian */
    return len >= 4 && memcmp(bytes, magic, 4) == 0;
}

const hp_image_decoder hp_exr_decoder = {
    .name = "exr", .magic = "OpenEXR (76 2f 31 01)",
    .sniff = exr_sniff, .probe = exr_probe, .decode = exr_decode,
};

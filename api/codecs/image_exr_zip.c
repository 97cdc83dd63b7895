/* EXR ZIP chunks prepared for the GPU (api/codecs/image.h's hp_image_zip_*; pipeline/exr_zip_gpu.h runs them):
 * gathered as they lie in the file for the GPU's inflate, or inflated here as they arrive for the split,
 * the predictor, byte split and planes then undone on the GPU. */
#include <libdeflate.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/codecs/image_exr_reader.h"
#include "api/codecs/image_exr_zip.h"
#include "common/arrival.h"
#include "hp_shared.h" /* the chunk table's status words */

/* --- ZIP chunks for the GPU ------------------------------------------------------------------------- */

/* Whether the part's chunks can go to the GPU as they lie (pipeline/exr_zip_gpu.h): scanlines, ZIP or ZIPS,
 * every channel unsampled (a chunk's line is then each channel's width values in turn, whatever their types),
 * and the colour and alpha half or float (a uint colour would need the CPU's (float) rounding on the GPU; no
 * renderer writes one). The image is RGBA32F where the CPU's decoder writes it so (not half_exact). */
static hp_exr_gpu_unfit zip_gpu_fits(const hp_exr_reader *r, hp_exr_zip_frame *f, char *why, size_t why_size)
{
    const exr_attr_chlist_t *cl;
    bool zip = r->compression == EXR_COMPRESSION_ZIP || r->compression == EXR_COMPRESSION_ZIPS;
    if (r->tiled || !zip || !r->direct || r->library_decode) {
        snprintf(why, why_size, "%s %s%s", r->tiled ? "tiled" : "scanline", hp_exr_compression_name(r->compression),
                 zip && !r->tiled ? ", a subsampled channel" : "");
        return r->tiled ? HP_EXR_UNFIT_TILED : !zip ? HP_EXR_UNFIT_COMPRESSION : HP_EXR_UNFIT_SUBSAMPLED;
    }
    if (exr_get_channels(r->ctx, r->part, &cl) != EXR_ERR_SUCCESS || cl->num_channels < 1 || cl->num_channels > 254 ||
        r->pixel_bytes > 4u * 254) {
        snprintf(why, why_size, "its channel list");
        return HP_EXR_UNFIT_CHANNELS;
    }
    if (r->chunk_count > 65535) { /* a dispatch's workgroups */
        snprintf(why, why_size, "%u chunks", r->chunk_count);
        return HP_EXR_UNFIT_CHUNKS;
    }
    *f = (hp_exr_zip_frame){.width = r->width, .height = r->height, .planes = (uint32_t)cl->num_channels,
                            .pixel_bytes = r->pixel_bytes, .lines_per_chunk = (uint32_t)r->lines_per_chunk,
                            .chunk_count = r->chunk_count, .first_row = r->data_window.min.y};
    for (int s = 0; s < 4; s++) {
        int from = r->copy_from[s] >= 0 ? r->copy_from[s] : s;
        if (r->chan[from] < 0) /* alpha alone may be absent */
            continue;
        if (r->type[from] == EXR_PIXEL_UINT) {
            snprintf(why, why_size, "a colour channel of unsigned integers");
            return HP_EXR_UNFIT_UINT;
        }
        f->slot_offset[s] = (uint16_t)r->slot_offset[from];
        f->slot_type[s] = r->type[from] == EXR_PIXEL_HALF ? HP_EXR_ZIP_HALF : HP_EXR_ZIP_FLOAT;
        f->float_image |= r->type[from] != EXR_PIXEL_HALF;
    }
    return HP_EXR_GPU_FITS;
}

/* The reader of a frame whose chunks the GPU can take, *frame filled; HP_ERR_UNUSABLE (why) when it is not
 * such a frame, the reader then closed. */
const char *hp_exr_gpu_unfit_name(hp_exr_gpu_unfit why)
{
    static const char *const names[HP_EXR_GPU_UNFIT_COUNT] = {
        [HP_EXR_GPU_FITS] = "fits", [HP_EXR_UNFIT_TILED] = "tiled", [HP_EXR_UNFIT_COMPRESSION] = "compression",
        [HP_EXR_UNFIT_SUBSAMPLED] = "subsampled", [HP_EXR_UNFIT_UINT] = "uint_colour",
        [HP_EXR_UNFIT_CHUNKS] = "chunks", [HP_EXR_UNFIT_CHANNELS] = "channels",
    };
    return (unsigned)why < HP_EXR_GPU_UNFIT_COUNT ? names[why] : "unknown";
}

static hp_code open_for_gpu(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                            hp_exr_reader **r, hp_exr_zip_frame *frame, hp_exr_gpu_unfit *unfit, hp_err *err)
{
    *frame = (hp_exr_zip_frame){0};
    if (!hp_exr_decoder.sniff(bytes, len))
        return hp_fail(err, HP_ERR_UNUSABLE, "not an EXR frame");
    hp_code code = hp_exr_open(bytes, len, opt, info, r, err);
    if (code != HP_OK)
        return code;
    char why[96];
    hp_exr_gpu_unfit u = zip_gpu_fits(*r, frame, why, sizeof(why));
    if (unfit)
        *unfit = u;
    if (u != HP_EXR_GPU_FITS) {
        code = hp_fail(err, HP_ERR_UNUSABLE, "EXR part %d is not for the GPU's inflate: %s", (*r)->part, why);
        hp_exr_close(r);
    }
    return code;
}

hp_code hp_image_zip_fits(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                          hp_exr_zip_frame *frame, hp_exr_gpu_unfit *unfit, hp_err *err)
{
    hp_exr_reader *r = NULL;
    hp_code code = open_for_gpu(bytes, len, opt, info, &r, frame, unfit, err);
    hp_exr_close(&r);
    return code;
}

/* Chunk i's place and sizes (from its header in the offset table), checked against the file and against
 * what its lines need (line_bytes each), as the CPU's decode checks them. */
static hp_code chunk_for_gpu(const hp_exr_reader *r, uint32_t i, uint64_t line_bytes, exr_chunk_info_t *ci,
                             hp_err *err)
{
    hp_exr_rect c = hp_exr_rect_of_chunk(r, i);
    hp_exr_last_message()[0] = '\0';
    exr_result_t rv = exr_read_scanline_chunk_info(r->ctx, r->part, r->data_window.min.y + (int32_t)c.y, ci);
    if (rv != EXR_ERR_SUCCESS)
        return hp_exr_chunk_fail(r, i, c, rv, "reading", err);
    uint64_t need = line_bytes * c.h;
    size_t len = r->stream.len;
    if (ci->unpacked_size != need || ci->packed_size > need || ci->packed_size == 0 || ci->data_offset > len ||
        ci->packed_size > len - ci->data_offset)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR chunk %u: %llu bytes at %llu of a %zu-byte file, %llu "
                       "unpacked, for %ux%u pixels of %llu bytes", i, (unsigned long long)ci->packed_size,
                       (unsigned long long)ci->data_offset, len, (unsigned long long)ci->unpacked_size, c.w, c.h,
                       (unsigned long long)line_bytes / c.w);
    return HP_OK;
}

/* Whether the file writes its last chunk first (decreasing Y, as its header says): a body still arriving is
 * then taken from its last chunk, in the order its bytes come. A file whose header says otherwise is still
 * decoded right, only without that overlap. */
static bool chunks_last_first(const hp_exr_reader *r)
{
    exr_lineorder_t order = EXR_LINEORDER_INCREASING_Y;
    return exr_get_lineorder(r->ctx, r->part, &order) == EXR_ERR_SUCCESS && order == EXR_LINEORDER_DECREASING_Y;
}

hp_code hp_image_zip_gather(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                            void *dst, size_t dst_size, hp_exr_zip_frame *frame, hp_err *err)
{
    hp_exr_reader *r = NULL;
    hp_code code = open_for_gpu(bytes, len, opt, info, &r, frame, NULL, err);
    if (code != HP_OK)
        return code;
    /* Table first, then the packed bytes: sizes from the chunks' own headers (the offset table), each
     * checked against the file and against what its lines need, as the CPU's decode checks them. */
    const uint64_t table_bytes = (uint64_t)frame->chunk_count * sizeof(hp_exr_zip_chunk);
    const uint64_t line_bytes = (uint64_t)frame->pixel_bytes * frame->width;
    hp_exr_zip_chunk *table = dst;
    uint64_t packed = 0, unpacked = 0;
    hp_arrival *arrival = dst && opt ? opt->arrival : NULL;
    /* chunk i's unpacked bytes at i times a whole chunk's, rounded to a word, whatever order it is met in (every
     * chunk but the last is whole, and chunk_for_gpu holds each to its lines) */
    const uint64_t chunk_stride = (line_bytes * (uint64_t)r->lines_per_chunk + 3) & ~(uint64_t)3;
    bool reverse = chunks_last_first(r);
    for (uint32_t k = 0; k < r->chunk_count && code == HP_OK; k++) {
        uint32_t i = reverse ? r->chunk_count - 1 - k : k;
        hp_exr_rect c = hp_exr_rect_of_chunk(r, i);
        exr_chunk_info_t ci;
        if ((code = chunk_for_gpu(r, i, line_bytes, &ci, err)) != HP_OK)
            break;
        uint64_t need = ci.unpacked_size;
        if (arrival && !hp_arrival_wait(arrival, (size_t)(ci.data_offset + ci.packed_size))) {
            code = hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: the body ended before chunk %u's last byte", i);
            break;
        }
        if (dst && table_bytes + packed + ci.packed_size + HP_EXR_ZIP_PACKED_PAD <= dst_size) {
            table[i] = (hp_exr_zip_chunk){.packed_offset = (uint32_t)packed, .packed_size = (uint32_t)ci.packed_size,
                                          .unpacked_offset = (uint32_t)(i * chunk_stride),
                                          .unpacked_size = (uint32_t)need,
                                          .first_line = c.y, .lines = c.h};
            memcpy((uint8_t *)dst + table_bytes + packed, bytes + ci.data_offset, (size_t)ci.packed_size);
        }
        packed += ci.packed_size;
        unpacked += (need + 3) & ~(uint64_t)3;
        if (need > frame->max_chunk_bytes)
            frame->max_chunk_bytes = (uint32_t)need; /* at most EXR_MAX_CHUNK_UNPACKED (image_exr.c's hp_exr_open) */
    }
    hp_exr_close(&r);
    if (code != HP_OK)
        return code;
    frame->packed_bytes = packed;
    frame->unpacked_bytes = unpacked;
    frame->table_bytes = table_bytes;
    /* 32-bit offsets in the shaders, with room: the reader's bound (word index x 4) must not wrap */
    if (table_bytes + packed + HP_EXR_ZIP_PACKED_PAD > INT32_MAX || unpacked > INT32_MAX)
        return hp_fail(err, HP_ERR_UNUSABLE, "EXR: %llu packed and %llu unpacked bytes are past the GPU's 32-bit "
                       "offsets", (unsigned long long)packed, (unsigned long long)unpacked);
    if (dst && table_bytes + packed + HP_EXR_ZIP_PACKED_PAD > dst_size)
        return hp_fail(err, HP_ERR_UNUSABLE, "EXR: %llu bytes of table and chunks do not fit %zu",
                       (unsigned long long)(table_bytes + packed + HP_EXR_ZIP_PACKED_PAD), dst_size);
    if (dst)
        memset((uint8_t *)dst + table_bytes + packed, 0, HP_EXR_ZIP_PACKED_PAD);
    return HP_OK;
}

/* --- ZIP chunks inflated here, unzipped on the GPU ------------------------------------------------------ */

/* What the threads of hp_image_zip_inflate share: the table and the unpacked bytes they fill. */
struct hp_exr_zip_split {
    const uint8_t *bytes;
    hp_arrival *arrival;
    hp_exr_zip_chunk *table;
    uint8_t *unpacked;
    uint64_t line_bytes;
    uint64_t chunk_stride; /* a whole chunk's bytes rounded to a word: chunk i's are at i times this */
    bool last_first;       /* chunks_last_first */
};

/* Chunk i inflated into its place, its entry written: the stream's Adler-32 (RFC 1950 2.2, its last four
 * bytes, big-endian) goes to the entry's word 7 for exr_finish, which checks it again on the GPU's side
 * of the copy. A stored chunk (packed as large as unpacked) is copied; the GPU's finish then takes it as
 * it is, as the CPU's decoder does. */
static hp_code inflate_one(const hp_exr_reader *r, const struct hp_exr_zip_split *z,
                           struct libdeflate_decompressor *d, uint32_t i, hp_err *err)
{
    exr_chunk_info_t ci;
    hp_code code = chunk_for_gpu(r, i, z->line_bytes, &ci, err);
    if (code != HP_OK)
        return code;
    hp_exr_rect c = hp_exr_rect_of_chunk(r, i);
    if (z->arrival && !hp_arrival_wait(z->arrival, (size_t)(ci.data_offset + ci.packed_size)))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: the body ended before chunk %u's last byte", i);
    const uint8_t *in = z->bytes + ci.data_offset;
    uint8_t *out = z->unpacked + (uint64_t)i * z->chunk_stride;
    uint32_t adler = 0;
    if (ci.packed_size == ci.unpacked_size) {
        memcpy(out, in, (size_t)ci.packed_size);
    } else {
        /* Bytes after the stream's end are ignored, as the CPU's decoder and the GPU's inflate ignore them:
         * the Adler-32 is where the stream ends */
        size_t used = 0;
        enum libdeflate_result res = libdeflate_zlib_decompress_ex(d, in, (size_t)ci.packed_size, out,
                                                                   (size_t)ci.unpacked_size, &used, NULL);
        if (res != LIBDEFLATE_SUCCESS) {
            snprintf(hp_exr_last_message(), HP_EXR_MESSAGE_SIZE, "ZIP data of %llu bytes does not inflate to %llu: %s",
                     (unsigned long long)ci.packed_size, (unsigned long long)ci.unpacked_size,
                     hp_exr_libdeflate_text(res));
            return hp_exr_chunk_fail(r, i, c, EXR_ERR_CORRUPT_CHUNK, "decoding", err);
        }
        /* libdeflate has checked it: a stream that inflates is at least six bytes long */
        const uint8_t *t = in + used - 4;
        adler = (uint32_t)t[0] << 24 | (uint32_t)t[1] << 16 | (uint32_t)t[2] << 8 | t[3];
    }
    z->table[i] = (hp_exr_zip_chunk){.packed_size = (uint32_t)ci.packed_size,
                                     .unpacked_offset = (uint32_t)((uint64_t)i * z->chunk_stride),
                                     .unpacked_size = (uint32_t)ci.unpacked_size, .first_line = c.y, .lines = c.h,
                                     .status = HP_EXR_ZIP_OK, .unused = adler};
    return HP_OK;
}

static hp_code inflate_all(hp_exr_chunk_worker *w)
{
    const hp_exr_reader *r = w->reader;
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
        return hp_fail(&w->err, HP_ERR_OUT_OF_MEMORY, "EXR: out of memory for a ZIP decompressor");
    hp_code code = HP_OK;
    for (uint32_t k = atomic_fetch_add(w->next, 1); k < r->chunk_count; k = atomic_fetch_add(w->next, 1)) {
        uint32_t i = w->split->last_first ? r->chunk_count - 1 - k : k; /* in the order the bytes come */
        w->failed_at = i;
        if ((code = inflate_one(r, w->split, d, i, &w->err)) != HP_OK) {
            atomic_store(w->next, r->chunk_count); /* the others take no more: the frame is lost */
            break;
        }
    }
    libdeflate_free_decompressor(d);
    return code;
}

hp_code hp_image_zip_inflate(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                             void *dst, size_t dst_size, hp_exr_zip_frame *frame, hp_err *err)
{
    hp_exr_reader *r = NULL;
    hp_code code = open_for_gpu(bytes, len, opt, info, &r, frame, NULL, err);
    if (code != HP_OK)
        return code;
    const uint64_t line_bytes = (uint64_t)frame->pixel_bytes * frame->width;
    const uint64_t whole = line_bytes * (uint64_t)r->lines_per_chunk;
    const uint64_t last = line_bytes * hp_exr_rect_of_chunk(r, r->chunk_count - 1).h;
    frame->table_bytes = (uint64_t)frame->chunk_count * sizeof(hp_exr_zip_chunk);
    frame->unpacked_bytes = (uint64_t)(frame->chunk_count - 1) * ((whole + 3) & ~3ull) + ((last + 3) & ~3ull);
    frame->max_chunk_bytes = (uint32_t)whole; /* at most EXR_MAX_CHUNK_UNPACKED (image_exr.c's hp_exr_open) */
    if (frame->unpacked_bytes > INT32_MAX || frame->table_bytes + frame->unpacked_bytes > dst_size) {
        code = hp_fail(err, HP_ERR_UNUSABLE, "EXR: %llu bytes of table and inflated chunks do not fit %zu",
                       (unsigned long long)(frame->table_bytes + frame->unpacked_bytes), dst_size);
        hp_exr_close(&r);
        return code;
    }
    struct hp_exr_zip_split z = {.bytes = bytes, .arrival = opt ? opt->arrival : NULL, .table = dst,
                                 .unpacked = (uint8_t *)dst + frame->table_bytes, .line_bytes = line_bytes,
                                 .chunk_stride = (whole + 3) & ~3ull, .last_first = chunks_last_first(r)};
    hp_exr_chunk_worker proto = {.reader = r, .work = inflate_all, .split = &z};
    uint32_t threads = hp_exr_frame_threads(r, opt);
    hp_depth_stats unused = {0};
    if (threads <= 1) {
        _Atomic uint32_t next = 0;
        proto.next = &next;
        code = inflate_all(&proto);
        if (code != HP_OK && err)
            *err = proto.err;
    } else {
        code = hp_exr_decode_threaded(r, threads, &proto, &unused, err);
    }
    hp_exr_frame_done();
    hp_exr_close(&r);
    return code;
}

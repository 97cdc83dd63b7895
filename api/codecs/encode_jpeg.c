/* JPEG through libjpeg-turbo's libjpeg API (jpeglib.h), not TurboJPEG (turbojpeg.h): TurboJPEG 2.1, Debian 12's,
 * cannot write an ICC profile (tj3SetICCProfile came with 3.0), which display_p3 needs, and the libjpeg API can
 * (jpeg_write_icc_profile, since libjpeg-turbo 2.0). It also needs no second package (libturbojpeg0), reports
 * failures as codes (out of memory told apart) where TurboJPEG 2.1 gives a string, and writes into our own
 * buffer. The caller's RGBA rows are read as they lie (JCS_EXT_RGBX), as TurboJPEG's TJPF_RGBX would.
 * Every choice is documented in encode_jpeg.h. */
#include "api/codecs/encode_jpeg.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h> /* after jpeglib.h: ERREXIT and the JERR_ codes */

/* Generated at build time by tools/make_icc.c (api/meson.build): the Display P3 profiles PNG and WebP carry. */
#include "api/icc_profiles.h"
#include "common/clock.h"
#include "common/log.h"

#if !defined(JCS_EXTENSIONS)
#error "libjpeg-turbo's JCS_EXT_RGBX (jpeglib.h JCS_EXTENSIONS) is needed: RGBA rows are read as they lie"
#endif
_Static_assert(HP_ENCODE_MAX_SIDE <= JPEG_MAX_DIMENSION, "the daemon's frames fit JPEG's 65500 a side");

/* libjpeg reports a fatal error by calling error_exit, which must not return: it jumps back to the call. */
typedef struct jpeg_failure {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
} jpeg_failure;

static void jpeg_fail_jump(j_common_ptr cinfo)
{
    longjmp(((jpeg_failure *)cinfo->err)->jump, 1);
}

/* Warnings (libjpeg's default prints them on stderr): into the daemon's log. */
static void jpeg_log_message(j_common_ptr cinfo)
{
    char text[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, text);
    hp_warn("libjpeg: %s", text);
}

/* The output, one malloc'd buffer that becomes hp_encoded.data as it is (jpeg_mem_dest() would do, but on a
 * failure midway it leaves the caller no pointer to the buffer it grew, so the buffer would leak). */
typedef struct jpeg_sink {
    struct jpeg_destination_mgr mgr;
    uint8_t *data;
    size_t capacity;
} jpeg_sink;

#define JPEG_SINK_FIRST (256u * 1024u) /* bytes; doubled as needed */

static void jpeg_sink_init(j_compress_ptr cinfo)
{
    jpeg_sink *sink = (jpeg_sink *)cinfo->dest;
    sink->data = malloc(JPEG_SINK_FIRST);
    if (!sink->data)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    sink->capacity = JPEG_SINK_FIRST;
    sink->mgr.next_output_byte = sink->data;
    sink->mgr.free_in_buffer = sink->capacity;
}

/* Called when the buffer is full (free_in_buffer 0): double it, keep what was written. */
static boolean jpeg_sink_grow(j_compress_ptr cinfo)
{
    jpeg_sink *sink = (jpeg_sink *)cinfo->dest;
    size_t used = sink->capacity;
    uint8_t *grown = used <= SIZE_MAX / 2 ? realloc(sink->data, used * 2) : NULL;
    if (!grown)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
    sink->data = grown;
    sink->capacity = used * 2;
    sink->mgr.next_output_byte = sink->data + used;
    sink->mgr.free_in_buffer = sink->capacity - used;
    return TRUE;
}

static void jpeg_sink_term(j_compress_ptr cinfo)
{
    (void)cinfo; /* the size is capacity - free_in_buffer, read by the caller */
}

/* Everything one encode owns, in the caller's frame: jpeg_run's setjmp never reads its own locals after a
 * jump (C11 7.13.2.1 makes those indeterminate once changed), only this, through a pointer. */
typedef struct jpeg_job {
    struct jpeg_compress_struct cinfo;
    jpeg_failure failure;
    jpeg_sink sink;
    const uint8_t *pixels;
    uint32_t width, height;
    const hp_jpeg_options *opt;
    const hp_icc_profile *icc; /* NULL: none */
} jpeg_job;

/* Rows handed to libjpeg per call: one 4:2:0 iMCU row (16 lines), what it consumes at once anyway. */
#define JPEG_ROWS_PER_CALL 16u

static void jpeg_compress_rows(jpeg_job *job)
{
    j_compress_ptr cinfo = &job->cinfo;
    const size_t row_bytes = (size_t)job->width * 4;
    JSAMPROW rows[JPEG_ROWS_PER_CALL];
    while (cinfo->next_scanline < cinfo->image_height) {
        JDIMENSION y = cinfo->next_scanline, n = cinfo->image_height - y;
        if (n > JPEG_ROWS_PER_CALL)
            n = JPEG_ROWS_PER_CALL;
        /* libjpeg only reads input rows; its prototype is not const. */
        for (JDIMENSION i = 0; i < n; i++)
            rows[i] = (JSAMPROW)(job->pixels + (size_t)(y + i) * row_bytes);
        jpeg_write_scanlines(cinfo, rows, n);
    }
}

/* The encode, between libjpeg's setjmp and its end; a failure jumps back here and returns false. */
static bool jpeg_run(jpeg_job *job)
{
    j_compress_ptr cinfo = &job->cinfo;
    if (setjmp(job->failure.jump))
        return false;
    jpeg_create_compress(cinfo);
    cinfo->dest = &job->sink.mgr;
    cinfo->image_width = job->width;
    cinfo->image_height = job->height;
    cinfo->input_components = 4;
    cinfo->in_color_space = JCS_EXT_RGBX; /* the A byte skipped */
    jpeg_set_defaults(cinfo);             /* YCbCr, JFIF APP0, 4:2:0, JDCT_ISLOW */
    /* force_baseline: tables clamped to 8-bit entries (only quality < 25 has larger ones), read everywhere. */
    jpeg_set_quality(cinfo, (int)job->opt->quality, TRUE);
    int luma_factor = job->opt->subsampling == HP_JPEG_SUBSAMPLING_444 ? 1 : 2;
    cinfo->comp_info[0].h_samp_factor = cinfo->comp_info[0].v_samp_factor = luma_factor;
    /* T.81 K.3's Huffman tables, not ones fitted to the image (optimize_coding): on the street frame of
     * tests/data tiled to 4K at quality 90 (development machine, 2 cores, busy), fitted tables made files 1.7%
     * (4:2:0) and 3.6% (4:4:4) smaller for 2.5 to 6 times the time (160-480 ms against 65-103 ms at 4:2:0),
     * and they keep every coefficient of the frame in memory for the second pass (about 50 MB at 4K 4:4:4). */
    cinfo->optimize_coding = FALSE;
    jpeg_start_compress(cinfo, TRUE);
    if (job->icc) /* APP2 markers right after the JFIF header, before the frame (ICC.1:2010 B.4) */
        jpeg_write_icc_profile(cinfo, job->icc->icc, (unsigned int)job->icc->icc_size);
    jpeg_compress_rows(job);
    jpeg_finish_compress(cinfo);
    return true;
}

/* What libjpeg said when it gave up, as an hp_code. */
static hp_code jpeg_failure_code(jpeg_job *job, hp_err *err)
{
    char text[JMSG_LENGTH_MAX];
    job->cinfo.err->format_message((j_common_ptr)&job->cinfo, text);
    if (job->failure.mgr.msg_code == JERR_OUT_OF_MEMORY)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory encoding a %ux%u JPEG (libjpeg: %s)", job->width,
                       job->height, text);
    return hp_fail(err, HP_ERR_INTERNAL, "libjpeg failed encoding a %ux%u JPEG: %s (message %d)", job->width,
                   job->height, text, job->failure.mgr.msg_code);
}

/* The arguments, each refused with the field at fault. */
static hp_code jpeg_check(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth,
                          hp_output_encoding encoding, const hp_jpeg_options *opt, hp_err *err)
{
    if (!pixels || !opt)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_jpeg: pixels, opt and result must not be NULL");
    if (bit_depth != 8)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.bit_depth",
                             "output.bit_depth %u: JPEG stores 8 bits per channel (use png or avif for more)",
                             bit_depth);
    if (opt->quality < 1 || opt->quality > 100)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.quality",
                             "output.quality %u is outside JPEG's 1..100", opt->quality);
    if ((unsigned)opt->subsampling >= HP_JPEG_SUBSAMPLING_COUNT)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.jpeg_subsampling",
                             "output.jpeg_subsampling %d is neither 4:2:0 (0) nor 4:4:4 (1)", (int)opt->subsampling);
    if (opt->colorspace == HP_OUTPUT_REC2020)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.colorspace",
                             "output.colorspace rec2020 needs more than JPEG's 8 bits: use png with output.bit_depth "
                             "16, or avif");
    if (opt->colorspace != HP_OUTPUT_SRGB && opt->colorspace != HP_OUTPUT_DISPLAY_P3)
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "output.colorspace",
                             "output.colorspace %d is not srgb (0) or display_p3 (1)", (int)opt->colorspace);
    if (encoding != HP_ENCODING_SRGB_LIKE && encoding != HP_ENCODING_SRGB && encoding != HP_ENCODING_LINEAR)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_jpeg: output encoding %d is not an "
                       "hp_output_encoding", (int)encoding);
    if (width == 0 || height == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "cannot encode an empty %ux%u frame", width, height);
    if (width > HP_ENCODE_MAX_SIDE || height > HP_ENCODE_MAX_SIDE)
        return hp_fail(err, HP_ERR_TOO_LARGE, "a %ux%u frame is over the limit of %u pixels a side", width, height,
                       HP_ENCODE_MAX_SIDE);
    return HP_OK;
}

hp_code hp_encode_jpeg(const void *pixels, uint32_t width, uint32_t height, uint32_t bit_depth,
                       hp_output_encoding encoding, const hp_jpeg_options *opt, hp_encoded *result, hp_err *err)
{
    if (!result)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "hp_encode_jpeg: pixels, opt and result must not be NULL");
    *result = (hp_encoded){0};
    hp_code code = jpeg_check(pixels, width, height, bit_depth, encoding, opt, err);
    if (code != HP_OK)
        return code;

    double c0 = hp_thread_cpu_ms();
    jpeg_job job = {.pixels = pixels, .width = width, .height = height, .opt = opt};
    if (opt->colorspace == HP_OUTPUT_DISPLAY_P3)
        job.icc = &hp_icc_spaces[HP_OUTPUT_DISPLAY_P3].profile[encoding];
    job.cinfo.err = jpeg_std_error(&job.failure.mgr);
    job.failure.mgr.error_exit = jpeg_fail_jump;
    job.failure.mgr.output_message = jpeg_log_message;
    job.sink.mgr = (struct jpeg_destination_mgr){.init_destination = jpeg_sink_init,
                                                  .empty_output_buffer = jpeg_sink_grow,
                                                  .term_destination = jpeg_sink_term};
    if (!jpeg_run(&job)) {
        code = jpeg_failure_code(&job, err);
        jpeg_destroy_compress(&job.cinfo);
        free(job.sink.data);
        return code;
    }
    size_t size = job.sink.capacity - job.sink.mgr.free_in_buffer;
    jpeg_destroy_compress(&job.cinfo);
    /* The doubled buffer back to the file's size (it is held until the reply is sent); kept as it is when the
     * smaller block cannot be had. */
    uint8_t *fitted = realloc(job.sink.data, size);
    *result = (hp_encoded){.data = fitted ? fitted : job.sink.data, .size = size, .mime = "image/jpeg",
                           .cpu_ms = hp_thread_cpu_ms() - c0};
    return HP_OK;
}

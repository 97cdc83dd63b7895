/* POST /v1/render and POST /v1/analyze: the product's front door.
 *
 * Input: multipart/form-data with a `frame` part (required), an optional `depth` part and an optional
 * `params` part (JSON, docs/PARAMETERS.md); or the frame as the raw body with the parameters as query
 * keys. The format is found from the bytes (api/image.h), never from names or content types.
 *
 * On an HTTP thread: parse, probe the header (limits judged before decoding), decode, hand a job to the
 * daemon's queue (429 when full) and suspend the connection. On a finishing thread (daemon/worker.c):
 * encode, build the response, resume. Nothing here knows the GPU. */
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>

#include "api/encode.h"
#include "api/image.h"
#include "api/metrics.h"
#include "api/params_json.h"
#include "pipeline/cpu_reference.h"
#include "api/route.h"
#include "common/bigbuf.h"
#include "common/budget.h"
#include "common/log.h"
#include "common/rows_ready.h"
#include "common/utf8.h"
#include "daemon/worker.h"

/* --- Multipart ------------------------------------------------------------------------------------- */

typedef struct part {
    uint8_t *data;
    size_t len, cap;
    bool present;
} part;

typedef struct form {
    part frame, depth, params;
    size_t body_len; /* the whole form's size: bounds a part's, and sizes a frame part at once */
    char unknown[64]; /* the first part name that is none of those */
    char repeated[16]; /* the first of them sent twice */
    bool unnamed;      /* a part without a name */
    bool oom;
} form;

/* libmicrohttpd calls this once per piece of a part, with off the piece's offset in its part: off 0 starts
 * a part, and a part of 0 bytes is that one call with size 0 (so no buffer is made for it). A name sent
 * twice is refused rather than concatenated: an image split over two parts is not one a client meant. */
static enum MHD_Result on_form_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                    const char *content_type, const char *transfer_encoding, const char *data,
                                    uint64_t off, size_t size)
{
    (void)kind, (void)filename, (void)content_type, (void)transfer_encoding;
    form *f = cls;
    /* A part whose Content-Disposition has no name comes with key NULL (found by tests/fuzz/fuzz_form: it
     * was passed to strcmp). */
    if (!key) {
        f->unnamed = true;
        return MHD_YES;
    }
    part *p = !strcmp(key, "frame") ? &f->frame : !strcmp(key, "depth") ? &f->depth
                                                 : !strcmp(key, "params") ? &f->params : NULL;
    if (!p) {
        if (!f->unknown[0])
            snprintf(f->unknown, sizeof(f->unknown), "%s", key);
        return MHD_YES;
    }
    if (off == 0 && p->present) {
        if (!f->repeated[0])
            snprintf(f->repeated, sizeof(f->repeated), "%s", key);
        return MHD_YES;
    }
    p->present = true;
    if (size == 0)
        return MHD_YES;
    if (p->len + size > p->cap) {
        /* An image part is sized for the whole form at once (no doubling copies of a 28 MB frame), from the
         * pool of warm buffers (common/bigbuf.h); params starts small. */
        size_t cap = p->cap ? p->cap * 2 : p == &f->params ? (size_t)1 << 16 : f->body_len;
        if (cap < ((size_t)1 << 16))
            cap = (size_t)1 << 16;
        while (cap < p->len + size)
            cap *= 2;
        uint8_t *grown = hp_bigbuf_get(cap + 1);
        if (!grown) {
            f->oom = true;
            return MHD_NO;
        }
        if (p->len)
            memcpy(grown, p->data, p->len);
        hp_bigbuf_put(p->data);
        p->data = grown;
        p->cap = cap;
    }
    memcpy(p->data + p->len, data, size);
    p->len += size;
    p->data[p->len] = 0; /* the params part is parsed as text */
    return MHD_YES;
}

static void form_free(form *f)
{
    hp_bigbuf_put(f->frame.data);
    hp_bigbuf_put(f->depth.data);
    hp_bigbuf_put(f->params.data);
}

/* --- Query parameters ---------------------------------------------------------------------------- */

typedef struct query_text {
    char *buf;
    size_t len, cap;
    bool oom;
} query_text;

static bool reserve(query_text *q, size_t more)
{
    if (q->len + more + 1 <= q->cap)
        return true;
    size_t cap = q->cap ? q->cap * 2 : 256;
    while (cap < q->len + more + 1)
        cap *= 2;
    char *grown = realloc(q->buf, cap);
    if (!grown) {
        q->oom = true;
        return false;
    }
    q->buf = grown;
    q->cap = cap;
    return true;
}

static void append_raw(query_text *q, char c)
{
    if (reserve(q, 1)) {
        q->buf[q->len++] = c;
        q->buf[q->len] = 0;
    }
}

static void append_escaped(query_text *q, const char *s)
{
    for (; *s && !q->oom; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                     c == '_' || c == '-';
        if (plain) {
            append_raw(q, (char)c);
        } else if (reserve(q, 3)) {
            snprintf(q->buf + q->len, 4, "%%%02X", c);
            q->len += 3;
        }
    }
}

/* libmicrohttpd hands the query already split and decoded; api/params_json.c wants the text, so it is
 * re-encoded (one place parses query parameters, with its duplicate and escape rules). */
static enum MHD_Result on_query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    query_text *q = cls;
    if (q->len)
        append_raw(q, '&');
    append_escaped(q, key);
    if (value) {
        append_raw(q, '=');
        append_escaped(q, value);
    }
    return MHD_YES;
}

/* --- Responses ----------------------------------------------------------------------------------- */

/* RFC 4648 base64 for the JSON form of the response. jansson has none, and twenty lines do not justify
 * linking GLib or OpenSSL for it. */
static char *base64(const uint8_t *in, size_t len)
{
    static const char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < len ? in[i + 2] : 0);
        out[o++] = table[(v >> 18) & 63];
        out[o++] = table[(v >> 12) & 63];
        out[o++] = i + 1 < len ? table[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? table[v & 63] : '=';
    }
    out[o] = 0;
    return out;
}

typedef struct render_ctx {
    hp_deferred *slot;       /* answers the request (which may be gone by then) */
    hp_budget *budget;       /* the daemon's memory budget (it outlives the server), and what the frame holds */
    uint64_t charged;
    struct timespec started; /* when the request's headers arrived */
    size_t body_len;
    int fd; /* the connection's socket, to see whether the client is still there */
    bool analyze;
    bool want_json;
    bool alpha;
    hp_image_format input_format;
    bool raw; /* raw samples, not a file */
    double recv_ms, decode_ms;
    bool early;              /* decoded while it arrived (decode_ms is then the tail after the last byte) */
    struct early_decode *pending; /* still decoding when the job was submitted: settled by finish_job */
    struct timespec body_done;    /* the last byte */
    /* OpenEXR: what the decoder chose (hp_image_info), for the JSON answer: with several layers in a
     * file, a client must be able to see which one it got. "" where there is none. */
    int exr_part;
    char exr_layer[HP_IMAGE_NAME_MAX];
    char exr_channels[4][HP_IMAGE_NAME_MAX]; /* R, G, B, A */
    char exr_depth[HP_IMAGE_NAME_MAX];
} render_ctx;

static json_t *name_or_null(const char *name) { return name[0] ? json_string(name) : json_null(); }

/* {"part", "layer", "channels": {"r", "g", "b", "a"}, "depth"}: the layer is "" for plain channels or
 * channels named one by one; a channel that is not there (alpha, depth) is null. */
static json_t *exr_json(const render_ctx *ctx)
{
    return json_pack("{s:i, s:s, s:{s:o, s:o, s:o, s:o}, s:o}", "part", ctx->exr_part, "layer", ctx->exr_layer,
                     "channels", "r", name_or_null(ctx->exr_channels[0]), "g", name_or_null(ctx->exr_channels[1]),
                     "b", name_or_null(ctx->exr_channels[2]), "a", name_or_null(ctx->exr_channels[3]), "depth",
                     name_or_null(ctx->exr_depth));
}

/* What depth of field did: the settings it resolved ("auto" focus and lens included) and the bokeh sprites,
 * with whether the budget cut them (DECISIONS.md 9: the response says so). */
static json_t *dof_json(const hp_frame_params *fp, const hp_frame_result *r)
{
    const hp_dof_settings *ds = &fp->dof_settings;
    json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:f}", "method", ds->method == HP_DOF_SAT ? "sat" : "gather",
                          "focus_distance_m", ds->focus_distance_m, "focal_length_mm", ds->focal_length_mm, "f_stop",
                          ds->f_stop, "coc_at_infinity_px", hp_dof_coc_k(ds, r->width));
    if (ds->bokeh)
        json_object_set_new(o, "bokeh", json_pack("{s:i, s:i, s:i, s:b}", "sprites", (int)r->bokeh_drawn, "wanted",
                                                  (int)r->bokeh_wanted, "budget", (int)ds->max_sprites,
                                                  "budget_reached", r->bokeh_wanted > ds->max_sprites));
    return o;
}

static json_t *stats_json(const hp_lum_stats *s, bool histogram)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f}", "pixels", (json_int_t)s->pixels, "finite_pixels",
                          (json_int_t)s->finite_pixels, "nonfinite_pixels", (json_int_t)s->nonfinite_pixels,
                          "log_average", s->log_average, "mean", s->mean, "min", s->min, "max", s->max);
    if (histogram) {
        json_t *h = json_array();
        for (int i = 0; i < 256; i++)
            json_array_append_new(h, json_integer(s->histogram[i]));
        json_object_set_new(o, "histogram", json_pack("{s:f, s:f, s:o}", "min_log2", s->hist_min_log2, "max_log2",
                                                      s->hist_max_log2, "counts", h));
    }
    return o;
}

/* The percentile luminance as the exposure stage defines it: the lower edge of the first bin whose
 * cumulative count reaches p * total (shaders/exposure.comp). */
static double percentile(const hp_lum_stats *s, double p)
{
    double total = 0, c = 0;
    for (int i = 0; i < 256; i++)
        total += s->histogram[i];
    int k = 255;
    for (int i = 0; i < 256; i++) {
        c += s->histogram[i];
        if (c >= p * total) {
            k = i;
            break;
        }
    }
    return exp2(s->hist_min_log2 + (double)((k ? k : 1) - 1) * (s->hist_max_log2 - s->hist_min_log2) / 254.0);
}

static void add_timing(char *buf, size_t size, size_t *n, const char *name, double ms)
{
    int w = snprintf(buf + *n, size - *n, "%s%s;dur=%.3f", *n ? ", " : "", name, ms);
    if (w > 0 && (size_t)w < size - *n)
        *n += (size_t)w;
}

static void job_error_reply(hp_job *job, hp_reply *reply)
{
    if (atomic_load(&job->cancelled)) /* nginx's 499: nobody reads it, but the log and metrics say why */
        hp_reply_error(reply, 499, "client_closed_request", NULL, "%s", job->err.message);
    else if (job->expired)
        hp_reply_error(reply, 504, "deadline_exceeded", NULL, "%s", job->err.message);
    else if (job->code == HP_ERR_DEVICE_LOST)
        hp_reply_error(reply, 503, "device_lost", NULL, "%s", job->err.message);
    else if (job->code == HP_ERR_TOO_LARGE)
        hp_reply_error(reply, 413, "too_large", NULL, "%s", job->err.message);
    else if (job->code == HP_ERR_UNUSABLE)
        hp_reply_error(reply, 422, "unusable_image", job->err.field[0] ? job->err.field : NULL, "%s", job->err.message);
    else if (job->code == HP_ERR_INVALID_ARGUMENT)
        hp_reply_error(reply, 400, "invalid_parameter", job->err.field[0] ? job->err.field : NULL, "%s",
                       job->err.message);
    else
        hp_reply_error(reply, 500, "internal_error", NULL, "%s: %s", hp_code_name(job->code), job->err.message);
}

/* A suspended connection is not watched by libmicrohttpd, so a client that hangs up while its frame waits
 * would be noticed only after the GPU had done the work. A peek at the socket tells: 0 bytes read from a
 * readable socket means the peer closed it. */
static bool client_gone(hp_job *job)
{
    render_ctx *ctx = job->user;
    if (ctx->fd < 0)
        return false;
    char byte;
    ssize_t n = recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void ctx_free(render_ctx *ctx)
{
    if (!ctx)
        return;
    hp_budget_give(ctx->budget, ctx->charged);
    free(ctx);
}

/* On a finishing thread: encode (render) or describe (analyze), answer, free the job. */
static void pending_settle(render_ctx *ctx);
static void reply_decode_error(hp_reply *reply, hp_code code, const hp_err *err);

static void finish_job(hp_job *job)
{
    render_ctx *ctx = job->user;
    hp_reply reply = {0};
    pending_settle(ctx); /* before any of the frame's memory is let go: its decoder may still write */
    if (job->code != HP_OK) {
        if (job->decode_failed) /* answered as the handler answers a decoding failure */
            reply_decode_error(&reply, job->code, &job->err);
        else
            job_error_reply(job, &reply);
        hp_deferred_complete(ctx->slot, &reply);
        hp_job_release(job);
        free(job);
        ctx_free(ctx);
        return;
    }
    const hp_frame_result *r = &job->result;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hp_encoded enc = {0};
    hp_err err = {0};
    hp_code code = HP_OK;
    bool alpha = false; /* the image carries alpha */
    if (!ctx->analyze) {
        const hp_params *p = &job->params.params;
        /* output.alpha: by default an alpha the tone pass found opaque everywhere is left out. */
        alpha = ctx->alpha && (p->output.alpha == HP_ALPHA_KEEP ||
                               (p->output.alpha == HP_ALPHA_AUTO && r->tone.translucent));
        if (r->yuv420) {
            const uint8_t *base = job->image.ptr;
            uint32_t w = r->width, h = r->height;
            hp_yuv420 planes = {.y = base, .u = base + HP_YUV_OFF_U(w, h), .v = base + HP_YUV_OFF_V(w, h),
                                .a = job->params.yuv_alpha && alpha ? base + HP_YUV_OFF_A(w, h) : NULL,
                                .y_stride = HP_YUV_Y_STRIDE(w), .uv_stride = HP_YUV_Y_STRIDE(w) / 2};
            code = hp_encode_webp_yuv420(&planes, w, h, &p->output, &enc, &err);
        } else {
            code = hp_encode(job->image.ptr, r->width, r->height, p->output.bit_depth, alpha,
                             hp_output_encoding_for_gamma(p->gamma.mode), &p->output, &enc, &err);
        }
    }
    hp_job_release(job); /* the image's memory back to the pool for the next frame at once */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double encode_ms = hp_ms_between(&t0, &t1);

    hp_metrics_stage("recv", ctx->recv_ms);
    hp_metrics_stage("decode", ctx->decode_ms);
    hp_metrics_stage("queue", hp_ms_between(&job->queued_at, &job->started_at));
    for (uint32_t i = 0; i < r->timing_count; i++)
        hp_metrics_stage(r->timings[i].name, r->timings[i].ms);
    if (!ctx->analyze)
        hp_metrics_stage("encode", encode_ms);
    hp_metrics_stage("total", hp_ms_between(&ctx->started, &t1));
    hp_metrics_frame(ctx->body_len, (uint64_t)r->width * r->height);

    char timing[512];
    size_t n = 0;
    add_timing(timing, sizeof(timing), &n, "recv", ctx->recv_ms);
    add_timing(timing, sizeof(timing), &n, "decode", ctx->decode_ms);
    add_timing(timing, sizeof(timing), &n, "queue", hp_ms_between(&job->queued_at, &job->started_at));
    for (uint32_t i = 0; i < r->timing_count; i++)
        if (!ctx->analyze || strcmp(r->timings[i].name, "tonemap") != 0)
            add_timing(timing, sizeof(timing), &n, r->timings[i].name, r->timings[i].ms);
    if (!ctx->analyze) {
        add_timing(timing, sizeof(timing), &n, "encode", encode_ms);
        /* CPU time over the encoder's threads: what a frame costs the machine, beside its latency */
        add_timing(timing, sizeof(timing), &n, "encode_cpu", enc.cpu_ms);
    }
    add_timing(timing, sizeof(timing), &n, "total", hp_ms_between(&ctx->started, &t1));

    if (code != HP_OK) {
        hp_reply_error(&reply, code == HP_ERR_TOO_LARGE ? 413 : 500, code == HP_ERR_TOO_LARGE ? "too_large" : "encode_failed",
                       "output.format", "%s", err.message);
    } else if (ctx->analyze || ctx->want_json) {
        json_t *timings = json_object();
        json_object_set_new(timings, "recv", json_real(ctx->recv_ms));
        json_object_set_new(timings, "decode", json_real(ctx->decode_ms));
        json_object_set_new(timings, "queue", json_real(hp_ms_between(&job->queued_at, &job->started_at)));
        for (uint32_t i = 0; i < r->timing_count; i++)
            json_object_set_new(timings, r->timings[i].name, json_real(r->timings[i].ms));
        if (!ctx->analyze) {
            json_object_set_new(timings, "encode", json_real(encode_ms));
            json_object_set_new(timings, "encode_cpu", json_real(enc.cpu_ms));
        }
        json_object_set_new(timings, "total", json_real(hp_ms_between(&ctx->started, &t1)));
        json_t *body = json_pack("{s:s, s:s, s:i, s:i, s:o, s:o}", "input_format",
                                 ctx->raw ? "raw" : hp_image_format_name(ctx->input_format), "gpu_input",
                                 hp_pixel_format_name(job->desc.format), "width", (int)r->width, "height",
                                 (int)r->height, "stats", stats_json(&r->stats, ctx->analyze), "timings_ms", timings);
        if (!ctx->raw && ctx->input_format == HP_IMAGE_EXR)
            json_object_set_new(body, "exr", exr_json(ctx));
        json_object_set_new(body, "decoded_while_receiving", json_boolean(ctx->early));
        if (r->dof_ran)
            json_object_set_new(body, "dof", dof_json(&job->params, r));
        if (ctx->analyze) {
            /* What a client needs to hold one exposure for a whole shot: pass the sequence's log-average
             * as exposure.adaptation with exposure.mode = fixed (docs/API.md). */
            json_object_set_new(body, "percentiles", json_pack("{s:f, s:f, s:f}", "p01", percentile(&r->stats, 0.01),
                                                               "p50", percentile(&r->stats, 0.5), "p99",
                                                               percentile(&r->stats, 0.99)));
        } else {
            char *b64 = base64(enc.data, enc.size);
            /* alpha: whether the encoder was given the alpha (output.alpha); lossy and lossless WebP leave an
             * opaque one out by themselves even when given it. */
            json_object_set_new(body, "image", json_pack("{s:s, s:I, s:b, s:s}", "mime", enc.mime, "bytes",
                                                         (json_int_t)enc.size, "alpha", alpha, "base64",
                                                         b64 ? b64 : ""));
            free(b64);
            json_object_set_new(body, "exposure", json_pack("{s:f, s:f, s:f, s:f}", "scale", r->tone.scale, "key",
                                                            r->tone.key, "adaptation", r->tone.adaptation, "white",
                                                            r->tone.white));
            json_object_set_new(body, "params", hp_params_to_json(&job->params.params));
        }
        hp_reply_json(&reply, 200, body);
        hp_reply_header_add(&reply, "Server-Timing", "%s", timing);
    } else {
        hp_reply_bytes(&reply, 200, enc.mime, enc.data, enc.size);
        enc.data = NULL;
        hp_reply_header_add(&reply, "Server-Timing", "%s", timing);
        hp_reply_header_add(&reply, "X-Luminance-Stats",
                            "finite=%llu; nonfinite=%llu; log_average=%.6g; mean=%.6g; min=%.6g; max=%.6g",
                            (unsigned long long)r->stats.finite_pixels, (unsigned long long)r->stats.nonfinite_pixels,
                            r->stats.log_average, r->stats.mean, r->stats.min, r->stats.max);
        hp_reply_header_add(&reply, "X-Exposure", "scale=%.6g; key=%.4g; adaptation=%.6g", r->tone.scale, r->tone.key,
                            r->tone.adaptation);
        if (r->dof_ran) {
            const hp_dof_settings *ds = &job->params.dof_settings;
            hp_reply_header_add(&reply, "X-Depth-Of-Field", "focus_m=%.4g; focal_mm=%.4g; f_stop=%.3g; coc_infinity_px=%.4g",
                                ds->focus_distance_m, ds->focal_length_mm, ds->f_stop, hp_dof_coc_k(ds, r->width));
            if (ds->bokeh)
                hp_reply_header_add(&reply, "X-Bokeh", "sprites=%u; wanted=%u; budget=%u; budget_reached=%s",
                                    r->bokeh_drawn, r->bokeh_wanted, ds->max_sprites,
                                    r->bokeh_wanted > ds->max_sprites ? "true" : "false");
        }
    }
    hp_encoded_free(&enc);
    hp_deferred_complete(ctx->slot, &reply);
    free(job);
    ctx_free(ctx);
}

/* --- The handler --------------------------------------------------------------------------------- */

/* Raw little-endian samples (input.*) to the RGBA32F frame the pipeline takes: grey to R, G and B,
 * alpha 1 where there is none. hp_half_to_float is the pipeline's exact conversion. */
static void raw_to_rgba(const uint8_t *src, const hp_input_params *raw, float *dst)
{
    size_t n = (size_t)raw->width * raw->height;
    bool half = raw->type == HP_INPUT_FLOAT16;
    for (size_t i = 0; i < n; i++) {
        float v[4] = {0, 0, 0, 1};
        for (uint32_t c = 0; c < raw->channels; c++) {
            size_t at = i * raw->channels + c;
            if (half) {
                uint16_t h;
                memcpy(&h, src + 2 * at, 2);
                v[c] = hp_half_to_float(h);
            } else {
                memcpy(&v[c], src + 4 * at, 4);
            }
        }
        if (raw->channels == 1)
            v[1] = v[2] = v[0];
        memcpy(dst + 4 * i, v, sizeof(v));
    }
}

/* A depth part: a picture of the frame's size whose depth is its own depth channel when it has one (an
 * OpenEXR with Z), else its first channel (a grey PFM, or an EXR whose R or Y holds the depth). */
static hp_code decode_depth_part(const part *dp, const hp_decode_options *opt, hp_image_info *info, float *depth,
                                 hp_err *err)
{
    size_t n = (size_t)info->width * info->height;
    float *rgba = hp_bigbuf_get(n * 16);
    if (!rgba)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for the depth");
    hp_code rc = hp_image_decode(dp->data, dp->len, opt, info, rgba, HP_LAYOUT_RGBA32F,
                                 info->has_depth ? depth : NULL, err);
    if (rc == HP_OK && !info->has_depth)
        for (size_t i = 0; i < n; i++)
            depth[i] = rgba[4 * i];
    hp_bigbuf_put(rgba);
    return rc;
}

static unsigned status_for_decode(hp_code code, const char **word)
{
    switch (code) {
    case HP_ERR_UNSUPPORTED_FORMAT: *word = "unsupported_format"; return 415;
    case HP_ERR_TOO_LARGE: *word = "too_large"; return 413;
    case HP_ERR_UNUSABLE: *word = "unusable_image"; return 422;
    case HP_ERR_OUT_OF_MEMORY: *word = "out_of_memory"; return 503;
    default: *word = "malformed_image"; return 400;
    }
}

/* A decoder's failure. One that a named layer or channel caused names the request parameter: image.h
 * gives the option's name, which is the parameter's without "input.". A name that contradicts the
 * request itself (one channel for colour and depth) is 400 like any bad parameter; a name the file does
 * not have, or whose channel the file stores in a form this daemon cannot use, 422. Any other failure is
 * the frame's. */
static void reply_decode_error(hp_reply *reply, hp_code code, const hp_err *err)
{
    const char *word = NULL;
    unsigned status = status_for_decode(code, &word);
    if (!err->field[0]) {
        hp_reply_error(reply, status, word, "frame", "%s", err->message);
        return;
    }
    char field[sizeof(err->field) + 8];
    snprintf(field, sizeof(field), "input.%s", err->field);
    if (code == HP_ERR_INVALID_ARGUMENT)
        status = 400, word = "invalid_parameter";
    hp_reply_error(reply, status, word, field, "%s", err->message);
}

/* The first OpenEXR name the request sets (its parameter in *param), or NULL. */
static const char *first_exr_name(const hp_input_params *in, const char **param)
{
    static const char *const params[] = {"input.layer",     "input.channel_r", "input.channel_g",
                                         "input.channel_b", "input.channel_a", "input.depth"};
    const char *const values[] = {in->layer, in->channel_r, in->channel_g, in->channel_b, in->channel_a, in->depth};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
        if (values[i][0]) {
            *param = params[i];
            return values[i];
        }
    return NULL;
}

/* --- Early decoding ---------------------------------------------------------------------------------
 *
 * A frame sent as the raw body (parameters in the query) is decoded while it arrives: the route's
 * body_begins starts a thread that parses the query, reads the OpenEXR header and decodes each chunk as
 * soon as its bytes are in (common/arrival.h makes the reader wait), into the mapped memory the GPU
 * uploads from. By the time the last byte is in, all but a chunk or two is decoded. The handler then
 * takes the result instead of decoding; anything the early decoder could not do (another format, a
 * multipart body, bad parameters or a bad file) is left to the ordinary path, which answers with the
 * error, so the rules and messages stay in one place. */

/* Early decodes at once, at most the queue's capacity: each holds a frame's worth of pinned memory from
 * its header on, and more frames than the queue takes would be answered 429 anyway. */
static _Atomic unsigned early_active;

/* Bodies too small to gain from the overlap are decoded after they are in (a thread start is tens of
 * microseconds; a 64 KiB EXR takes longer than that to decode). */
#define EARLY_MIN_BYTES ((size_t)64 << 10)

typedef struct early_decode {
    pthread_t thread;
    bool joined;
    hp_request *req;         /* its body and arrival stay until the request's early_drop has joined */
    const hp_http_backend *be;
    bool analyze;
    char *query;             /* the query text, collected on the request's thread */
    /* The outcome: code HP_OK when the frame is decoded into pixels (and depth) from the probe's info. */
    hp_code code;
    hp_image_info info;
    bool half, want_dof;
    hp_host_mem pixels, depth;
    struct timespec decoded; /* when it finished */
    /* How far it is (common/rows_ready.h): the handler waits only for it to begin decoding, then hands
     * the frame to the GPU thread, which uploads the rows as they become final. */
    hp_rows_ready rows;
    bool pending;            /* taken while still decoding: not joined yet */
    hp_budget *budget;       /* its frame's bytes are taken from it before they are allocated */
    uint64_t charged;
    uint64_t early_share;    /* and from the share of it for bodies still arriving (early_share_take) */
    /* Handed on while decoding, it has two owners: the request, whose body and arrival it reads until it
     * has finished (the request's completion waits for that), and the job, whose frame it writes. Each
     * lets go with early_release; the last frees it. 1 otherwise. */
    _Atomic int refs;
} early_decode;

static bool collect_query(struct MHD_Connection *c, char **text)
{
    query_text q = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, on_query_arg, &q);
    if (q.oom) {
        free(q.buf);
        return false;
    }
    *text = q.buf;
    return true;
}

/* The decoder's options for a request: the server's limits and threads, the parameters' channel names.
 * depth_opt, for a depth part, takes the limits alone. */
static void decode_options(const hp_http_backend *be, const hp_params *p, hp_decode_options *opt,
                           hp_decode_options *depth_opt)
{
    hp_decode_options o = HP_DECODE_OPTIONS_DEFAULTS;
    o.max_width = be->max_width ? be->max_width : o.max_width;
    o.max_height = be->max_height ? be->max_height : o.max_height;
    o.max_pixels = be->max_pixels ? be->max_pixels : o.max_pixels;
    o.threads = be->decode_threads;
    if (depth_opt)
        *depth_opt = o;
    o.layer = p->input.layer;
    o.channel_r = p->input.channel_r;
    o.channel_g = p->input.channel_g;
    o.channel_b = p->input.channel_b;
    o.channel_a = p->input.channel_a;
    o.depth = p->input.depth;
    *opt = o;
}

static bool early_run(early_decode *e);

/* The bytes early decoders hold for bodies still arriving: at most EARLY_SHARE_DIV-th of the budget. */
#define EARLY_SHARE_DIV 4
static _Atomic uint64_t early_share_used;

static bool early_share_take(const hp_budget *budget, uint64_t bytes)
{
    uint64_t limit = budget && budget->limit ? budget->limit / EARLY_SHARE_DIV : UINT64_MAX;
    uint64_t used = atomic_load(&early_share_used);
    do {
        if (bytes > limit || used > limit - bytes)
            return false;
    } while (!atomic_compare_exchange_weak(&early_share_used, &used, used + bytes));
    return true;
}

/* Once the body is in (the handler took the frame) or the decoder is dropped. */
static void early_share_give(early_decode *e)
{
    atomic_fetch_sub(&early_share_used, e->early_share);
    e->early_share = 0;
}

static void *early_main(void *arg)
{
    early_decode *e = arg;
    if (!early_run(e))
        hp_rows_ready_abandon(&e->rows); /* it gave up before decoding: the handler takes the ordinary path */
    return NULL;
}

/* Probes and decodes; false when it gave up before decoding (rows then never started). */
static bool early_run(early_decode *e)
{
    hp_request *req = e->req;
    hp_err err = {0};
    e->code = HP_ERR_INVALID_ARGUMENT; /* not done: the handler takes the ordinary path */
    hp_params params;
    hp_params_defaults(&params);
    if (e->query && e->query[0] && hp_params_from_query(e->query, &params, &err) != HP_OK)
        return false;
    if (params.input.width) /* raw samples: nothing to decode */
        return false;
    if (!hp_arrival_wait(&req->arrival, 4) || hp_image_detect(req->body, 4) != HP_IMAGE_EXR)
        return false;
    hp_decode_options opt;
    decode_options(e->be, &params, &opt, NULL);
    opt.arrival = &req->arrival;
    /* Two threads fewer than the cores while the body arrives: the thread receiving it (and, in the
     * benchmark, the client on the same machine) compete with every decoding thread otherwise. Side by
     * side on the 16-core GPU host (docs/BENCHMARKS.md): 16 threads received a 4K frame in 16.4-17.5 ms
     * p50, 15 in 13.1-13.4, 14 in 8.3-9.8 (the decoding left after the last byte 1.8 -> 3.4 ms), 12 in
     * 9.0-10.1 with 5.4-5.8 left. Two more threads that joined only after the last byte slowed the
     * receive again (8.6 -> 13.6 ms: then every arriving piece woke every waiting thread, which led to
     * common/arrival.c waking each reader only for its own bytes). */
    if (opt.threads > 4)
        opt.threads -= 2;
    if (hp_image_probe(req->body, req->body_cap, &opt, &e->info, &err) != HP_OK)
        return false;
    e->want_dof = !e->analyze && params.dof.enabled;
    if (e->want_dof && !e->info.has_depth)
        return false; /* the handler says depth_missing */
    e->half = e->info.half_exact;
    size_t n = (size_t)e->info.width * e->info.height;
    /* Only what the budget admits (a header alone, 8.5 KB of a 16384x16384 frame, made every connection
     * reserve 2 GiB), and of it only a share for frames whose bodies are still arriving: a client that sends
     * headers and trickles the rest cannot hold the whole budget. The ordinary path, once the body is in,
     * decodes what does not fit here. */
    uint64_t want = (uint64_t)n * (e->half ? 8 : 16) + (e->want_dof ? (uint64_t)n * sizeof(float) : 0);
    if (!early_share_take(e->budget, want))
        return false;
    e->early_share = want;
    if (!hp_budget_take(e->budget, want)) {
        early_share_give(e);
        return false;
    }
    e->charged = want;
    if (!hp_host_mem_get(e->be->host_pool, HP_MEM_UPLOAD, n * (e->half ? 8 : 16), &e->pixels) ||
        (e->want_dof && !hp_host_mem_get(e->be->host_pool, HP_MEM_UPLOAD, n * sizeof(float), &e->depth)))
        return false;
    opt.rows = &e->rows;
    /* From the start on the handler may take e->pixels and e->depth over (while this writes them). */
    void *pixels = e->pixels.ptr;
    float *depth = e->want_dof ? e->depth.ptr : NULL;
    hp_image_info info = e->info;
    hp_rows_ready_start(&e->rows);
    hp_code code = hp_image_decode(req->body, req->body_cap, &opt, &info, pixels,
                                   e->half ? HP_LAYOUT_RGBA16F : HP_LAYOUT_RGBA32F, depth, &err);
    e->code = code;
    clock_gettime(CLOCK_MONOTONIC, &e->decoded);
    hp_rows_ready_finish(&e->rows, code, &err);
    return true;
}

static void early_free(early_decode *e)
{
    if (!e)
        return;
    atomic_fetch_sub(&early_active, 1);
    if (!e->joined)
        pthread_join(e->thread, NULL);
    hp_host_mem_put(&e->pixels);
    hp_host_mem_put(&e->depth);
    hp_budget_give(e->budget, e->charged);
    early_share_give(e);
    hp_rows_ready_destroy(&e->rows);
    free(e->query);
    free(e);
}

/* Joins the early decoder if it still runs: before the memory it writes is let go. */
static void early_settle(early_decode *e)
{
    if (e && !e->joined) {
        pthread_join(e->thread, NULL);
        e->joined = true;
    }
}

static void early_release(early_decode *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1)
        early_free(e);
}

/* Until the decoder has finished: it then no longer reads the body nor writes the frame. */
static void early_wait_finished(early_decode *e)
{
    bool finished;
    hp_rows_ready_wait(&e->rows, UINT32_MAX, &finished);
}

/* The job's share of a decoder handed on while decoding (finish_job, before the frame's memory goes). */
static void pending_settle(render_ctx *ctx)
{
    early_decode *e = ctx->pending;
    if (!e)
        return;
    early_wait_finished(e);
    ctx->decode_ms = fmax(0.0, hp_ms_between(&ctx->body_done, &e->decoded));
    ctx->pending = NULL;
    early_release(e);
}

/* The request's share, at its completion: its body and arrival are freed right after this. */
static void early_drop_shared(hp_request *req)
{
    early_decode *e = req->early;
    req->early = NULL;
    if (e) {
        early_wait_finished(e);
        early_release(e);
    }
}

static void early_drop(hp_request *req)
{
    early_free(req->early);
    req->early = NULL;
}

/* The handler's side: waits for the early decoder (the whole body is in, so it is finishing or done) and
 * takes it over from the request. NULL when there was none. */
static early_decode *early_take(hp_request *req)
{
    early_decode *e = req->early;
    if (!e)
        return NULL;
    /* Still decoding (its last chunks: the whole body is in): taken as it is, its rows uploaded as they
     * become final (daemon/worker.h, job->rows). Given up or done: joined, as before. */
    if (hp_rows_ready_wait_start(&e->rows) == HP_ROWS_DECODING && !hp_rows_ready_result(&e->rows, NULL, NULL)) {
        e->pending = true;
    } else {
        pthread_join(e->thread, NULL);
        e->joined = true;
    }
    req->early = NULL;
    req->early_drop = NULL;
    return e;
}

static void begins(hp_request *req, bool analyze)
{
    const char *ctype = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const hp_http_backend *be = hp_http_get_backend(req->http);
    if (req->body_cap < EARLY_MIN_BYTES || !be || !be->submit ||
        (ctype && strncasecmp(ctype, "multipart/form-data", 19) == 0))
        return;
    unsigned cap = be->queue_capacity ? be->queue_capacity(be->ctx) : 16;
    if (be->queue_depth && be->queue_depth(be->ctx) >= cap)
        return; /* a full queue: the frame will likely be answered 429; no memory for it now */
    if (atomic_fetch_add(&early_active, 1) >= cap) {
        atomic_fetch_sub(&early_active, 1);
        return;
    }
    early_decode *e = calloc(1, sizeof(*e));
    if (!e) {
        atomic_fetch_sub(&early_active, 1);
        return;
    }
    e->req = req;
    e->be = be;
    e->budget = hp_http_budget(req->http);
    e->analyze = analyze;
    atomic_init(&e->refs, 1);
    hp_rows_ready_init(&e->rows);
    if (!collect_query(req->connection, &e->query) || pthread_create(&e->thread, NULL, early_main, e) != 0) {
        hp_rows_ready_destroy(&e->rows);
        free(e->query);
        free(e);
        atomic_fetch_sub(&early_active, 1);
        return; /* the ordinary path will do */
    }
    req->early = e;
    req->early_drop = early_drop;
}

void hp_route_render_begins(hp_request *req) { begins(req, false); }
void hp_route_analyze_begins(hp_request *req) { begins(req, true); }

/* The memory a frame holds from its decoding to its answer: its pixels as the GPU takes them, its depth, a
 * depth part's scratch while it decodes, and the image read back for the encoder. */
static uint64_t frame_bytes(const hp_image_info *info, bool half, bool want_dof, bool depth_part, const hp_params *p)
{
    uint64_t n = (uint64_t)info->width * info->height;
    uint64_t bytes = n * (half ? 8 : 16);
    if (want_dof)
        bytes += n * sizeof(float) + (depth_part ? n * 16 : 0);
    return bytes + n * (p->output.bit_depth == 16 ? 8 : 4);
}

/* Takes the frame's bytes from the budget before they are allocated (docs/SECURITY.md): what an early
 * decoder took for the same frame is the request's now, the rest is taken here. False: the reply says why
 * (503 memory_full, or 413 for a frame larger than the whole budget). */
static bool take_frame_budget(hp_request *req, render_ctx *ctx, early_decode *early, const hp_image_info *info,
                              uint64_t need, hp_reply *reply)
{
    if (!ctx)
        return true; /* out of memory: the caller answers that */
    ctx->budget = hp_http_budget(req->http);
    if (early) {
        ctx->charged = early->charged;
        early->charged = 0;
        early_share_give(early); /* the body is in: no longer a reservation ahead of it */
    }
    if (need <= ctx->charged)
        return true;
    char what[64];
    snprintf(what, sizeof(what), "a %ux%u frame", info->width, info->height);
    if (hp_budget_refused(req->http, need - ctx->charged, req->budget_bytes + ctx->charged, what, reply))
        return false;
    ctx->charged = need;
    return true;
}

/* The form's parts as the form reader left them: false, with the reply saying which part is wrong, for a
 * part unknown, unnamed, repeated or empty, or no frame. */
static bool form_parts_ok(const form *f, hp_reply *reply)
{
    /* An empty params or depth part is a mistake (an empty file attached), not a request for defaults. */
    const char *empty = f->params.present && !f->params.len ? "params" : f->depth.present && !f->depth.len ? "depth"
                                                                                                          : NULL;
    if (f->unknown[0])
        hp_reply_error(reply, 400, "unknown_part", f->unknown,
                       "unknown form part \"%s\"; the parts are frame, depth and params", f->unknown);
    else if (f->unnamed)
        hp_reply_error(reply, 400, "unknown_part", NULL, "a form part has no name; the parts are frame, depth and "
                       "params (Content-Disposition: form-data; name=\"frame\")");
    else if (f->repeated[0])
        hp_reply_error(reply, 400, "duplicate_part", f->repeated,
                       "the form has more than one \"%s\" part; send each of frame, depth and params once",
                       f->repeated);
    else if (!f->frame.present || f->frame.len == 0)
        hp_reply_error(reply, 400, "missing_frame", "frame", f->frame.present ? "the form's \"frame\" part is empty"
                       : "the form has no \"frame\" part with the image");
    else if (empty)
        hp_reply_error(reply, 400, "empty_part", empty, "the form's \"%s\" part is empty; leave it out, or send %s",
                       empty, !strcmp(empty, "params") ? "a JSON object" : "the depth image");
    else
        return true;
    return false;
}

/* The params part, a JSON object, applied on top of *params. */
static bool read_params_part(const part *pp, hp_params *params, hp_reply *reply)
{
    json_error_t jerr;
    json_t *obj = json_loadb((const char *)pp->data, pp->len, 0, &jerr);
    if (!obj || !json_is_object(obj)) {
        hp_reply_error(reply, 400, "malformed_params", "params", "the params part is not a JSON object: %s (line %d, "
                       "column %d)", obj ? "not an object" : jerr.text, jerr.line, jerr.column);
        json_decref(obj);
        return false;
    }
    hp_err err = {0};
    hp_code pc = hp_params_from_json(obj, params, &err);
    json_decref(obj);
    if (pc != HP_OK)
        hp_reply_error(reply, 400, "invalid_parameter", err.field[0] ? err.field : NULL, "%s", err.message);
    return pc == HP_OK;
}

/* A multipart/form-data body read into *f (libmicrohttpd's post processor, on_form_part), its parts
 * checked and its params part applied. False: the reply says why. */
static bool read_form(hp_request *req, form *f, hp_params *params, hp_reply *reply)
{
    struct MHD_PostProcessor *pp = MHD_create_post_processor(req->connection, 65536, on_form_part, f);
    bool parsed = pp && MHD_post_process(pp, (const char *)req->body, req->body_len) == MHD_YES;
    if (pp)
        MHD_destroy_post_processor(pp);
    if (!parsed) {
        hp_reply_error(reply, f->oom ? 503 : 400, f->oom ? "out_of_memory" : "malformed_multipart", NULL,
                       "the multipart/form-data body cannot be parsed");
        return false;
    }
    return form_parts_ok(f, reply) && (!f->params.present || read_params_part(&f->params, params, reply));
}

/* The query's parameters, applied on top of *params (after a params part: the query wins). */
static bool read_query(struct MHD_Connection *c, hp_params *params, hp_reply *reply)
{
    char *query = NULL;
    if (!collect_query(c, &query)) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory reading the query");
        return false;
    }
    hp_err err = {0};
    hp_code pc = query && query[0] ? hp_params_from_query(query, params, &err) : HP_OK;
    free(query);
    if (pc != HP_OK)
        hp_reply_error(reply, 400, "invalid_parameter", err.field[0] ? err.field : NULL, "%s", err.message);
    return pc == HP_OK;
}

static void render_or_analyze(hp_request *req, hp_reply *reply, bool analyze)
{
    const hp_http_backend *be = hp_http_get_backend(req->http);
    hp_service_state state = hp_http_get_state(req->http);
    /* A request whose body arrived before a SIGTERM is in flight: it is rendered, the worker runs until
     * the HTTP drain is over. New connections are not accepted by then. */
    if ((state != HP_SERVICE_READY && state != HP_SERVICE_DRAINING) || !be->submit) {
        hp_reply_error(reply, 503, "not_ready", NULL, "%s: this server takes no frames now",
                       hp_service_state_name(state));
        if (state == HP_SERVICE_STARTING)
            hp_reply_header_add(reply, "Retry-After", "1");
        return;
    }
    struct MHD_Connection *c = req->connection;
    const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);

    form f = {.body_len = req->body_len};
    const uint8_t *frame = req->body;
    size_t frame_len = req->body_len;
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fp.analyze_only = analyze;
    hp_err err = {0};
    render_ctx *ctx = NULL;
    hp_job *job = NULL;
    early_decode *early = early_take(req);

    if (ctype && strncasecmp(ctype, "multipart/form-data", 19) == 0) {
        if (!read_form(req, &f, &fp.params, reply))
            goto done;
        frame = f.frame.data;
        frame_len = f.frame.len;
    } else if (frame_len == 0) {
        hp_reply_error(reply, 400, "missing_frame", "frame", "the body is empty: send the frame as the body, or "
                       "as the \"frame\" part of a multipart/form-data body");
        goto done;
    }
    /* Query parameters apply in both forms, after the params part. */
    if (!read_query(c, &fp.params, reply))
        goto done;

    /* A depth part is a picture of its own, probed with the limits alone: the names choose the frame's
     * channels ("" is automatic, as image.h reads it). */
    hp_decode_options opt, depth_opt;
    decode_options(be, &fp.params, &opt, &depth_opt);
    hp_image_info info;
    const hp_input_params *raw = &fp.params.input;
    hp_code dc;
    /* The early decoder parsed the same query and read the same bytes: its probe is this probe. */
    bool use_early = early && (early->pending || early->code == HP_OK) && frame == req->body && !raw->width;
    if (use_early) {
        info = early->info;
        dc = HP_OK;
    } else if (raw->width) {
        /* Raw samples: the parameters say what the bytes are; they must be exactly that many. */
        memset(&info, 0, sizeof(info));
        info.width = raw->width;
        info.height = raw->height;
        info.has_alpha = raw->channels == 4;
        size_t sample = raw->type == HP_INPUT_FLOAT16 ? 2 : 4;
        uint64_t want = (uint64_t)raw->width * raw->height * raw->channels * sample;
        dc = hp_image_check_limits_public(raw->width, raw->height, &opt, &err);
        if (dc == HP_OK && frame_len != want) {
            hp_reply_error(reply, 400, "malformed_image", "frame",
                           "a raw %ux%u frame of %u %s channels is %llu bytes; the body has %zu", raw->width,
                           raw->height, raw->channels, raw->type == HP_INPUT_FLOAT16 ? "float16" : "float32",
                           (unsigned long long)want, frame_len);
            goto done;
        }
    } else {
        dc = hp_image_probe(frame, frame_len, &opt, &info, &err);
    }
    hp_image_info dinfo = {0};
    if (dc == HP_OK && f.depth.present) {
        /* A depth part is checked before anything is decoded, so that a mismatch says so at once. */
        hp_err derr = {0};
        if (hp_image_probe(f.depth.data, f.depth.len, &depth_opt, &dinfo, &derr) != HP_OK) {
            const char *word = NULL;
            unsigned status = status_for_decode(derr.code, &word);
            hp_reply_error(reply, status, word, "depth", "depth: %s", derr.message);
            goto done;
        }
        if (dinfo.width != info.width || dinfo.height != info.height) {
            hp_reply_error(reply, 422, "depth_size_differs", "depth", "the depth image is %ux%u, the frame %ux%u",
                           dinfo.width, dinfo.height, info.width, info.height);
            goto done;
        }
    }
    if (dc != HP_OK) {
        reply_decode_error(reply, dc, &err);
        goto done;
    }
    /* The decoders of the other formats ignore the names; a request that gives one expects a choice the
     * file cannot offer, so it is told rather than answered with whatever the file holds. (Raw samples
     * with a name are refused earlier, by the parameters' own rules.) */
    const char *param = NULL, *name = first_exr_name(raw, &param);
    if (!raw->width && info.format != HP_IMAGE_EXR && name) {
        hp_reply_error(reply, 422, "unusable_image", param,
                       "%s (\"%.100s\") names %s of an OpenEXR file, but the frame is %s: only OpenEXR files "
                       "have layers and named channels; leave %s out for this frame",
                       param, name, strcmp(param, "input.layer") == 0 ? "a layer" : "a channel",
                       info.format == HP_IMAGE_RGBE ? "Radiance HDR" : "PFM", param);
        goto done;
    }

    /* Depth of field needs a depth: the EXR's own channel, or a depth part (which wins). */
    bool want_dof = !analyze && fp.params.dof.enabled;
    bool depth_in_frame = !raw->width && info.has_depth && !f.depth.present;
    if (want_dof && !f.depth.present && !depth_in_frame) {
        hp_reply_error(reply, 422, "depth_missing", "depth",
                       "dof.enabled needs the frame's depth: a depth channel in an OpenEXR frame (Z, or one named by "
                       "input.depth) or a `depth` part, and this %s frame comes with neither",
                       raw->width ? "raw" : hp_image_format_name(info.format));
        goto done;
    }

    snprintf(req->log_note, sizeof(req->log_note), "%s %ux%u", raw->width ? "raw" : hp_image_format_name(info.format),
             info.width, info.height);
    ctx = calloc(1, sizeof(*ctx));
    job = calloc(1, sizeof(*job));
    /* A half EXR stays half (issue 6: "fp16 stays fp16"): the same values in half the bytes to write, copy
     * into the staging and upload; the stages read RGBA16F as well as RGBA32F. */
    bool half = !raw->width && info.half_exact;
    size_t bytes = (size_t)info.width * info.height * (half ? 8 : 16);
    /* Decoded straight into memory the GPU uploads from (pipeline/host_pool.h): no copy on the host. */
    hp_host_mem pixels_mem = {0}, depth_mem = {0};
    /* The early decoder read the depth exactly when depth of field wants the frame's own (a depth part
     * never comes with a raw body). */
    use_early = use_early && early->half == half && early->want_dof == want_dof && (!want_dof || depth_in_frame);
    /* Handed on while its last rows decode only to an idle GPU thread: with frames waiting, a frame still
     * decoding at the head of the queue would hold back frames behind it that are ready, so under load
     * the handler waits for the decoding as before (16 clients, side by side with the code before the
     * hand-over: within the noise, docs/BENCHMARKS.md). Depth of field reads the depth here (the automatic
     * focus): for it the decoding must be over too. */
    bool queue_busy = be->queue_depth && be->queue_depth(be->ctx) > 0;
    if (use_early && early->pending && (want_dof || queue_busy)) {
        early_settle(early);
        early->pending = false;
        use_early = early->code == HP_OK; /* a failure: the ordinary path decodes again and says why */
    }
    if (use_early) { /* the frame is decoded already: its memory is the job's now */
        pixels_mem = early->pixels;
        depth_mem = early->depth;
        early->pixels = early->depth = (hp_host_mem){0};
    }
    uint64_t need = frame_bytes(&info, half, want_dof, f.depth.present, &fp.params);
    if (!take_frame_budget(req, ctx, use_early ? early : NULL, &info, need, reply)) {
        early_settle(use_early ? early : NULL);
        hp_host_mem_put(&pixels_mem);
        hp_host_mem_put(&depth_mem);
        goto done;
    }
    bool have = ctx && job && (pixels_mem.ptr || hp_host_mem_get(be->host_pool, HP_MEM_UPLOAD, bytes, &pixels_mem));
    if (have && want_dof && !depth_mem.ptr)
        have = hp_host_mem_get(be->host_pool, HP_MEM_UPLOAD, (size_t)info.width * info.height * sizeof(float),
                               &depth_mem);
    if (!have) {
        early_settle(use_early ? early : NULL);
        hp_host_mem_put(&pixels_mem);
        hp_host_mem_put(&depth_mem);
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory for a %ux%u frame", info.width, info.height);
        goto done;
    }
    void *pixels = pixels_mem.ptr;
    float *depth = depth_mem.ptr;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (use_early && early->pending)
        t1 = t0; /* still decoding: the GPU thread waits for it, and finish_job counts the time */
    else if (use_early)
        t0 = t1 = early->decoded; /* below: only what was left after the last byte counts */
    else if (raw->width)
        raw_to_rgba(frame, raw, pixels);
    else
        dc = hp_image_decode(frame, frame_len, &opt, &info, pixels, half ? HP_LAYOUT_RGBA16F : HP_LAYOUT_RGBA32F,
                             depth_in_frame ? depth : NULL, &err);
    if (dc == HP_OK && want_dof && f.depth.present) {
        dc = decode_depth_part(&f.depth, &depth_opt, &dinfo, depth, &err);
        if (dc != HP_OK) {
            const char *word = NULL;
            unsigned status = status_for_decode(dc, &word);
            hp_reply_error(reply, status, word, "depth", "depth: %s", err.message);
            hp_host_mem_put(&pixels_mem);
            hp_host_mem_put(&depth_mem);
            goto done;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (dc != HP_OK) {
        hp_host_mem_put(&pixels_mem);
        hp_host_mem_put(&depth_mem);
        reply_decode_error(reply, dc, &err);
        goto done;
    }
    if (want_dof) {
        fp.dof = true;
        hp_dof_settings_from_params(&fp.params, depth, info.width, info.height, &fp.dof_settings);
    }
    ctx->started = req->started;
    ctx->body_len = req->body_len;
    ctx->analyze = analyze;
    ctx->want_json = accept && strstr(accept, "application/json");
    ctx->alpha = info.has_alpha;
    ctx->input_format = info.format;
    ctx->raw = raw->width != 0;
    if (!ctx->raw && info.format == HP_IMAGE_EXR) {
        /* Names from the file, quoted in the JSON answer: made UTF-8 (jansson refuses anything else). */
        ctx->exr_part = info.part;
        snprintf(ctx->exr_layer, sizeof(ctx->exr_layer), "%s", info.layer);
        hp_utf8_clean(ctx->exr_layer);
        for (int c = 0; c < 4; c++) {
            snprintf(ctx->exr_channels[c], sizeof(ctx->exr_channels[c]), "%s", info.channel_names[c]);
            hp_utf8_clean(ctx->exr_channels[c]);
        }
        snprintf(ctx->exr_depth, sizeof(ctx->exr_depth), "%s", info.has_depth ? info.depth_channel : "");
        hp_utf8_clean(ctx->exr_depth);
    }
    ctx->recv_ms = hp_ms_between(&req->started, &req->body_done);
    /* decode: the time the request waited for its decoding after the body was in. Decoded early, that is
     * only the tail after the last byte, often none. */
    ctx->early = use_early;
    ctx->body_done = req->body_done;
    ctx->decode_ms = !use_early        ? hp_ms_between(&t0, &t1)
                     : early->pending ? 0.0 /* still decoding: pending_settle counts it */
                                      : fmax(0.0, hp_ms_between(&req->body_done, &early->decoded));
    job->desc = (hp_frame_desc){.width = info.width, .height = info.height,
                                .format = half ? HP_PIXEL_RGBA16F : HP_PIXEL_RGBA32F};
    job->pixels = pixels_mem;
    job->depth = depth_mem;
    job->params = fp;
    /* Lossy WebP is coded as Y'CbCr 4:2:0: converted on the GPU in the tone pass and read back at 1.5 bytes
     * a pixel (2.5 with alpha) instead of 4, and libwebp skips its own conversion, one core's work. */
    job->params.yuv420 = !analyze && fp.params.output.format == HP_OUTPUT_WEBP && !fp.params.output.lossless &&
                         fp.params.output.bit_depth == 8;
    job->params.yuv_alpha = job->params.yuv420 && info.has_alpha && fp.params.output.alpha != HP_ALPHA_DROP;
    job->finish = finish_job;
    job->client_gone = client_gone;
    job->rows = use_early && early->pending ? &early->rows : NULL;
    job->user = ctx;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    ctx->fd = ci ? ci->connect_fd : -1;
    clock_gettime(CLOCK_MONOTONIC, &job->deadline);
    double timeout = be->request_timeout_s > 0 ? be->request_timeout_s : 60.0;
    job->deadline.tv_sec += (time_t)timeout;
    job->deadline.tv_nsec += (long)((timeout - floor(timeout)) * 1e9);
    if (job->deadline.tv_nsec >= 1000000000L)
        job->deadline.tv_sec++, job->deadline.tv_nsec -= 1000000000L;
    /* Deferred before the hand-over: the frame may be finished before this handler returns. */
    ctx->slot = hp_request_defer(req);
    if (!ctx->slot) {
        early_settle(early);
        hp_job_release(job);
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory");
        goto done;
    }
    if (job->rows) { /* shared from here on: the request's completion and finish_job each let go of it */
        hp_debug("render: %ux%u handed to the GPU thread while its last rows decode", info.width, info.height);
        atomic_store(&early->refs, 2);
        req->early = early;
        req->early_drop = early_drop_shared;
        ctx->pending = early;
        early = NULL;
    }
    if (!be->submit(be->ctx, job)) {
        hp_request_undefer(req);
        if (ctx->pending) { /* the job's share: it will never run */
            early_wait_finished(ctx->pending);
            early_release(ctx->pending);
            ctx->pending = NULL;
        }
        hp_job_release(job);
        hp_reply_error(reply, 429, "queue_full", NULL, "the queue is full (%u frames waiting); retry shortly",
                       be->queue_depth ? be->queue_depth(be->ctx) : 0);
        hp_reply_header_add(reply, "Retry-After", "1");
        goto done;
    }
    /* The job is the worker's now; the reply comes from finish_job. */
    job = NULL;
    ctx = NULL;
done:
    early_free(early);
    free(job);
    ctx_free(ctx);
    form_free(&f);
}

void hp_route_render(hp_request *request, hp_reply *reply) { render_or_analyze(request, reply, false); }
void hp_route_analyze(hp_request *request, hp_reply *reply) { render_or_analyze(request, reply, true); }

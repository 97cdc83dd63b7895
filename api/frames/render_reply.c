/* The render routes' answer, on a finishing thread (api/frames/render.h): the job back from the GPU is encoded
 * (render) or described (analyze), its timings recorded, and the reply handed to the waiting connection. */
#include "api/frames/render.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/frames/early_decode.h"
#include "api/codecs/encode.h"
#include "api/frames/output_encode.h"
#include "api/http/metrics.h"
#include "api/frames/params_json.h"
#include "common/budget.h"
#include "common/clock.h"
#include "pipeline/cpu_reference.h"

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

static void job_error_reply(const hp_job *job, bool cancelled, hp_reply *reply)
{
    if (cancelled) /* nginx's 499: nobody reads it, but the log and metrics say why */
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
        hp_reply_error(reply, 400, job->err.word ? job->err.word : "invalid_parameter",
                       job->err.field[0] ? job->err.field : NULL, "%s",
                       job->err.message);
    else
        hp_reply_error(reply, 500, "internal_error", NULL, "%s: %s", hp_code_name(job->code), job->err.message);
}

unsigned hp_status_for_decode(hp_code code, const char **word)
{
    switch (code) {
    case HP_ERR_UNSUPPORTED_FORMAT: *word = "unsupported_format"; return 415;
    case HP_ERR_TOO_LARGE: *word = "too_large"; return 413;
    case HP_ERR_UNUSABLE: *word = "unusable_image"; return 422;
    case HP_ERR_OUT_OF_MEMORY: *word = "out_of_memory"; return 503;
    case HP_ERR_DEVICE_LOST: *word = "device_lost"; return 503; /* a frame decoded on the GPU (exr_zip_decoder) */
    default: *word = "malformed_image"; return 400;
    }
}

/* A decoder's failure. One that a named layer or channel caused names the request parameter: image.h
 * gives the option's name, which is the parameter's without "input.". A name that contradicts the
 * request itself (one channel for colour and depth) is 400 like any bad parameter; a name the file does
 * not have, or whose channel the file stores in a form this daemon cannot use, 422. Any other failure is
 * the frame's. */
void hp_reply_decode_error(hp_reply *reply, hp_code code, const hp_err *err)
{
    const char *word = NULL;
    unsigned status = hp_status_for_decode(code, &word);
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

/* How long each phase took, as Server-Timing, the JSON answer and /metrics give them (DECISIONS.md 10). */
typedef struct phase_times {
    double recv, decode, queue, encode, encode_cpu, total;
} phase_times;

static void add_timing(char *buf, size_t size, size_t *n, const char *name, double ms)
{
    int w = snprintf(buf + *n, size - *n, "%s%s;dur=%.3f", *n ? ", " : "", name, ms);
    if (w > 0 && (size_t)w < size - *n)
        *n += (size_t)w;
}

/* Every phase's time to the metrics. */
static void record_times(const render_ctx *ctx, const hp_frame_result *r, const phase_times *t)
{
    hp_metrics_stage("recv", t->recv);
    hp_metrics_stage("decode", t->decode);
    hp_metrics_stage("queue", t->queue);
    for (uint32_t i = 0; i < r->timing_count; i++)
        hp_metrics_stage(r->timings[i].name, r->timings[i].ms);
    if (!ctx->analyze)
        hp_metrics_stage("encode", t->encode);
    hp_metrics_stage("total", t->total);
    hp_metrics_frame(ctx->body_len, (uint64_t)r->width * r->height);
}

/* The Server-Timing header: the GPU stages between the queue and the encoder (analyze's tone map is not
 * one it ran for the client). */
static void server_timing(const render_ctx *ctx, const hp_frame_result *r, const phase_times *t, hp_reply *reply)
{
    char timing[512];
    size_t n = 0;
    add_timing(timing, sizeof(timing), &n, "recv", t->recv);
    add_timing(timing, sizeof(timing), &n, "decode", t->decode);
    add_timing(timing, sizeof(timing), &n, "queue", t->queue);
    for (uint32_t i = 0; i < r->timing_count; i++)
        if (!ctx->analyze || strcmp(r->timings[i].name, "tonemap") != 0)
            add_timing(timing, sizeof(timing), &n, r->timings[i].name, r->timings[i].ms);
    if (!ctx->analyze) {
        add_timing(timing, sizeof(timing), &n, "encode", t->encode);
        /* CPU time over the encoder's threads: what a frame costs the machine, beside its latency */
        add_timing(timing, sizeof(timing), &n, "encode_cpu", t->encode_cpu);
    }
    add_timing(timing, sizeof(timing), &n, "total", t->total);
    hp_reply_header_add(reply, "Server-Timing", "%s", timing);
}

static json_t *times_json(const render_ctx *ctx, const hp_frame_result *r, const phase_times *t)
{
    json_t *o = json_pack("{s:f, s:f, s:f}", "recv", t->recv, "decode", t->decode, "queue", t->queue);
    for (uint32_t i = 0; i < r->timing_count; i++)
        json_object_set_new(o, r->timings[i].name, json_real(r->timings[i].ms));
    if (!ctx->analyze) {
        json_object_set_new(o, "encode", json_real(t->encode));
        json_object_set_new(o, "encode_cpu", json_real(t->encode_cpu));
    }
    json_object_set_new(o, "total", json_real(t->total));
    return o;
}

/* The answer's body where the GPU's PNG was finished: the job's image memory, and the part of the request's
 * budget charge that stands for it, both given back once libmicrohttpd has sent it. A client that
 * reads slowly holds them: new frames meanwhile meet 503 memory_full rather than pinned memory held
 * outside the budget (docs/SECURITY.md). */
typedef struct held_answer {
    hp_host_mem mem;
    hp_budget *budget;
    uint64_t charged;
} held_answer;

static void held_answer_release(void *owner)
{
    held_answer *h = owner;
    hp_host_mem_put(&h->mem);
    hp_budget_give(h->budget, h->charged);
    free(h);
}

/* The GPU's segments sealed into one zlib stream where they lie (its Adler-32 combined from theirs), then
 * the file finished around it in the job's image memory, which the answer then owns: the 11 MB of a 4K
 * frame's stream are not copied on the way out (worker.c put them there, or copied them once from the
 * graph's memory). */
static hp_code encode_png_gpu(render_ctx *ctx, hp_job *job, const hp_output_tag *tag, bool *alpha, hp_encoded *enc,
                              hp_err *err)
{
    const hp_frame_result *r = &job->result;
    const hp_png_gpu_layout *l = &r->png_layout;
    *alpha = l->channels == 4;
    size_t zlib_len;
    hp_code code = hp_png_gpu_seal(l, r->png_table, r->png_joined, &zlib_len, err);
    if (code != HP_OK)
        return code;
    if (tag->use_cicp)
        code = hp_encode_png_cicp_in_place(r->png_joined - 2, zlib_len, HP_PNG_GPU_HEAD_ROOM - 2,
                                           HP_PNG_GPU_TAIL_ROOM - 4, l->width, l->height, l->depth, *alpha,
                                           &tag->cicp, &tag->out, enc, err);
    else
        code = hp_encode_png_in_place(r->png_joined - 2, zlib_len, HP_PNG_GPU_HEAD_ROOM - 2,
                                      HP_PNG_GPU_TAIL_ROOM - 4, l->width, l->height, l->depth, *alpha, tag->encoding,
                                      &tag->out, enc, err);
    if (code == HP_OK)
        hp_metrics_png_gpu_answer(enc->in_place && r->png_in_caller_memory);
    if (code != HP_OK || !enc->in_place)
        return code;
    held_answer *owner = malloc(sizeof(*owner));
    if (!owner) { /* the file cannot outlive the job's memory without its owner: copied out instead */
        uint8_t *copy = malloc(enc->size);
        if (!copy)
            return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for a %zu-byte PNG", enc->size);
        memcpy(copy, enc->data, enc->size);
        *enc = (hp_encoded){.data = copy, .size = enc->size, .mime = enc->mime, .cpu_ms = enc->cpu_ms};
        return HP_OK;
    }
    /* The request's charge goes with the memory, up to the block's size: the block is larger than the image
     * render.c charged for (hp_frame_graph_image_bytes: 8 bytes a pixel and the stream's room), and the
     * frame's own pixels, the rest of the charge, went back to the pool when the GPU was done with them. */
    uint64_t block = job->image.block ? job->image.block->buf.size : job->image_size; /* pinned, or ordinary */
    *owner = (held_answer){.mem = job->image, .budget = ctx->budget,
                           .charged = block < ctx->charged ? block : ctx->charged};
    ctx->charged -= owner->charged;
    job->image = (hp_host_mem){0};
    enc->release = held_answer_release;
    enc->owner = owner;
    return HP_OK;
}

/* Encode: the image the GPU read back, as the output parameters ask. *alpha: whether the image carries
 * alpha (output.alpha: by default an alpha the tone pass found opaque everywhere is left out). */
static hp_code encode_image(render_ctx *ctx, hp_job *job, bool *alpha, hp_encoded *enc, hp_err *err)
{
    const hp_frame_result *r = &job->result;
    const hp_params *p = &job->params.params;
    hp_output_tag tag;
    hp_output_tag_for(p, ctx->ocio ? &ctx->ocio_enc : NULL, &tag);
    if (r->png_gpu) /* filtered and deflated on the GPU: the stream joined, the chunks written here */
        return encode_png_gpu(ctx, job, &tag, alpha, enc, err);
    *alpha = ctx->alpha && (p->output.alpha == HP_ALPHA_KEEP ||
                            (p->output.alpha == HP_ALPHA_AUTO && r->tone.translucent));
    if (p->output.format == HP_OUTPUT_JPEG || p->output.format == HP_OUTPUT_AVIF)
        return hp_output_encode_other(job->image.ptr, r->width, r->height, *alpha, &tag, enc, err);
    if (!r->yuv420 && tag.use_cicp)
        return hp_encode_png_cicp(job->image.ptr, r->width, r->height, p->output.bit_depth, *alpha, &tag.cicp,
                                  &tag.out, enc, err);
    if (!r->yuv420)
        return hp_encode(job->image.ptr, r->width, r->height, p->output.bit_depth, *alpha, tag.encoding, &tag.out,
                         enc, err);
    const uint8_t *base = job->image.ptr;
    uint32_t w = r->width, h = r->height;
    hp_yuv420 planes = {.y = base, .u = base + HP_YUV_OFF_U(w, h), .v = base + HP_YUV_OFF_V(w, h),
                        .a = job->params.yuv_alpha && *alpha ? base + HP_YUV_OFF_A(w, h) : NULL,
                        .y_stride = HP_YUV_Y_STRIDE(w), .uv_stride = HP_YUV_Y_STRIDE(w) / 2};
    return hp_encode_webp_yuv420(&planes, w, h, hp_output_encoding_for_gamma(p->gamma.mode), &p->output, enc, err);
}

/* The file's colour tag as the answer names it: output.colorspace as the parameter spells it, and through an
 * OCIO view what its display measured as (api/frames/output_encode.h). */
static void output_colorspace_name(const render_ctx *ctx, const hp_params *p, char *out, size_t size)
{
    hp_output_tag tag;
    hp_output_tag_for(p, ctx->ocio ? &ctx->ocio_enc : NULL, &tag);
    hp_output_tag_name(&tag, ctx->ocio ? &ctx->ocio_enc : NULL, out, size);
}

/* The JSON answer (analyze, or a render that asked for application/json): the frame, its statistics, the
 * timings, and for a render the image in base64 with the exposure and parameters used. */
static void reply_json(const render_ctx *ctx, const hp_job *job, const hp_encoded *enc, bool alpha,
                       const phase_times *t, hp_reply *reply)
{
    const hp_frame_result *r = &job->result;
    json_t *body = json_pack("{s:s, s:s, s:i, s:i, s:o, s:o}", "input_format",
                             ctx->raw ? "raw" : hp_image_format_name(ctx->input_format), "gpu_input",
                             hp_pixel_format_name(job->desc.format), "width", (int)r->width, "height",
                             (int)r->height, "stats", stats_json(&r->stats, ctx->analyze), "timings_ms",
                             times_json(ctx, r, t));
    if (!ctx->raw && ctx->input_format == HP_IMAGE_EXR)
        json_object_set_new(body, "exr", exr_json(ctx));
    json_object_set_new(body, "decoded_while_receiving", json_boolean(ctx->early));
    char output[128];
    output_colorspace_name(ctx, &job->params.params, output, sizeof output);
    json_object_set_new(body, "colorspace", json_pack("{s:s, s:s, s:s}", "input", ctx->color_space, "source",
                                                      ctx->color_source, "output", output));
    if (ctx->ocio)
        json_object_set_new(body, "ocio", json_pack("{s:s, s:s, s:s, s:s}", "input", ctx->ocio_key.input, "display",
                                                    ctx->ocio_key.display, "view", ctx->ocio_key.view, "looks",
                                                    ctx->ocio_key.looks));
    if (r->dof_ran)
        json_object_set_new(body, "dof", dof_json(&job->params, r));
    if (ctx->analyze) {
        /* What a client needs to hold one exposure for a whole shot: pass the sequence's log-average
         * as exposure.adaptation with exposure.mode = fixed (docs/API.md). */
        json_object_set_new(body, "percentiles", json_pack("{s:f, s:f, s:f}", "p01", percentile(&r->stats, 0.01),
                                                           "p50", percentile(&r->stats, 0.5), "p99",
                                                           percentile(&r->stats, 0.99)));
    } else {
        char *b64 = base64(enc->data, enc->size);
        /* alpha: whether the encoder was given the alpha (output.alpha); lossy and lossless WebP leave an
         * opaque one out by themselves even when given it. */
        json_object_set_new(body, "image", json_pack("{s:s, s:I, s:b, s:s}", "mime", enc->mime, "bytes",
                                                     (json_int_t)enc->size, "alpha", alpha, "base64",
                                                     b64 ? b64 : ""));
        free(b64);
        json_object_set_new(body, "exposure", json_pack("{s:f, s:f, s:f, s:f}", "scale", r->tone.scale, "key",
                                                        r->tone.key, "adaptation", r->tone.adaptation, "white",
                                                        r->tone.white));
        json_object_set_new(body, "params", hp_params_to_json(&job->params.params));
    }
    hp_reply_json(reply, 200, body);
}

/* The image as the body, what the frame did in headers. */
static void reply_image(const render_ctx *ctx, const hp_job *job, hp_encoded *enc, hp_reply *reply)
{
    const hp_frame_result *r = &job->result;
    hp_reply_bytes_owned(reply, 200, enc->mime, enc->data, enc->size, enc->release, enc->owner);
    *enc = (hp_encoded){0};
    hp_reply_header_add(reply, "X-Luminance-Stats",
                        "finite=%llu; nonfinite=%llu; log_average=%.6g; mean=%.6g; min=%.6g; max=%.6g",
                        (unsigned long long)r->stats.finite_pixels, (unsigned long long)r->stats.nonfinite_pixels,
                        r->stats.log_average, r->stats.mean, r->stats.min, r->stats.max);
    hp_reply_header_add(reply, "X-Exposure", "scale=%.6g; key=%.4g; adaptation=%.6g", r->tone.scale, r->tone.key,
                        r->tone.adaptation);
    hp_reply_header_add(reply, "X-Input-Colorspace", "%s; source=%s", ctx->color_space, ctx->color_source);
    char output[128];
    output_colorspace_name(ctx, &job->params.params, output, sizeof output);
    hp_reply_header_add(reply, "X-Output-Colorspace", "%s", output);
    if (ctx->ocio)
        hp_reply_header_add(reply, "X-OCIO", "display=\"%s\"; view=\"%s\"; looks=\"%s\"", ctx->ocio_key.display,
                            ctx->ocio_key.view, ctx->ocio_key.looks);
    if (!r->dof_ran)
        return;
    const hp_dof_settings *ds = &job->params.dof_settings;
    hp_reply_header_add(reply, "X-Depth-Of-Field", "focus_m=%.4g; focal_mm=%.4g; f_stop=%.3g; coc_infinity_px=%.4g",
                        ds->focus_distance_m, ds->focal_length_mm, ds->f_stop, hp_dof_coc_k(ds, r->width));
    if (ds->bokeh)
        hp_reply_header_add(reply, "X-Bokeh", "sprites=%u; wanted=%u; budget=%u; budget_reached=%s", r->bokeh_drawn,
                            r->bokeh_wanted, ds->max_sprites, r->bokeh_wanted > ds->max_sprites ? "true" : "false");
}

void hp_render_ctx_free(render_ctx *ctx)
{
    if (!ctx)
        return;
    hp_budget_give(ctx->budget, ctx->charged);
    if (ctx->ocio_entry)
        hp_ocio_stage_release(ctx->ocio_stage, ctx->ocio_entry);
    free(ctx);
}

/* Answers, and lets go of everything the request held. */
static void answer(hp_job *job, render_ctx *ctx, hp_reply *reply)
{
    hp_deferred_complete(ctx->slot, reply);
    hp_job_release(job);
    free(job);
    hp_render_ctx_free(ctx);
}

void hp_render_finish(hp_job *job)
{
    render_ctx *ctx = job->user;
    hp_reply reply = {0};
    if (ctx->pending) { /* before any of the frame's memory is let go: its decoder may still write */
        ctx->decode_ms = hp_early_job_done(ctx->pending, &ctx->body_done);
        ctx->pending = NULL;
    }
    /* A client gone: the job never ran (taken out of the queue, or dropped as it was about to run), or it
     * did and nobody reads its image, which is then not encoded. */
    /* Read once: the watch may set it at any moment, and the answer, its status and its count must agree. */
    bool cancelled = atomic_load(&job->cancelled);
    /* A device lost may still run the frame's commands (the worker leaves its host memory behind for that
     * reason): its OCIO program is left held, never evicted or destroyed under them. */
    if (job->code == HP_ERR_DEVICE_LOST)
        ctx->ocio_entry = NULL;
    if (cancelled) {
        hp_metrics_cancelled(job->code == HP_OK ? "running" : "queued");
        if (job->code == HP_OK)
            job->code = hp_fail(&job->err, HP_ERR_INVALID_ARGUMENT, "the client went away while the frame ran");
    }
    if (job->code != HP_OK) {
        if (job->decode_failed && !cancelled) /* answered as the handler answers a decoding failure */
            hp_reply_decode_error(&reply, job->code, &job->err);
        else
            job_error_reply(job, cancelled, &reply);
        answer(job, ctx, &reply);
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hp_encoded enc = {0};
    hp_err err = {0};
    bool alpha = false;
    hp_code code = ctx->analyze ? HP_OK : encode_image(ctx, job, &alpha, &enc, &err);
    hp_host_mem_put(&job->image); /* the image's memory back to the pool for the next frame at once */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    phase_times t = {.recv = ctx->recv_ms, .decode = ctx->decode_ms,
                     .queue = hp_ms_between(&job->queued_at, &job->started_at), .encode = hp_ms_between(&t0, &t1),
                     .encode_cpu = enc.cpu_ms, .total = hp_ms_between(&ctx->started, &t1)};
    record_times(ctx, &job->result, &t);
    if (code != HP_OK) {
        hp_reply_error(&reply, code == HP_ERR_TOO_LARGE ? 413 : 500, code == HP_ERR_TOO_LARGE ? "too_large"
                       : "encode_failed", "output.format", "%s", err.message);
    } else {
        if (ctx->analyze || ctx->want_json)
            reply_json(ctx, job, &enc, alpha, &t, &reply);
        else
            reply_image(ctx, job, &enc, &reply);
        server_timing(ctx, &job->result, &t, &reply);
    }
    hp_encoded_free(&enc);
    answer(job, ctx, &reply);
}

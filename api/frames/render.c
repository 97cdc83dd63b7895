/* POST /v1/render and POST /v1/analyze: the product's front door, on an HTTP thread.
 *
 * Input: multipart/form-data with a `frame` part (required), an optional `depth` part and an optional
 * `params` part (JSON, docs/PARAMETERS.md); or the frame as the raw body with the parameters as query
 * keys. The format is found from the bytes (api/codecs/image.h), never from names or content types.
 *
 * A request goes through its phases, each a function below that owns what it allocates:
 *   receive  the form or raw body and the query (api/frames/form.h) -> frame_request
 *   probe    the frame's header (limits judged before decoding), the depth part's, the choices -> frame_plan
 *   decode   the budget's bytes, host memory the GPU uploads from, the decoding -> the job's pixels
 *   queue    the job handed to the daemon's queue (429 when full), the connection suspended
 * then, on a finishing thread, encode and reply (api/frames/render_reply.c). A frame sent as the raw body may have
 * been decoded while it arrived (api/frames/early_decode.h): its decoder is taken over here. Nothing here knows
 * the GPU: the queue is the backend's (api/http/http.h). */
#include "api/frames/render.h"

#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/frames/early_decode.h"
#include "api/frames/form.h"
#include "api/frames/output_encode.h"
#include "api/codecs/image.h"
#include "api/frames/params_json.h"
#include "common/bigbuf.h"
#include "common/budget.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "pipeline/cpu_reference.h"

/* What a request asks, once its body is read (receive). */
typedef struct frame_request {
    bool analyze;
    hp_form form;          /* a multipart body's parts (none for a raw body) */
    const uint8_t *frame;  /* the frame's bytes: the body, or the frame part */
    size_t frame_len;
    hp_frame_params fp;    /* the defaults, the params part over them, the query over that */
    hp_early *early;       /* the request's early decoder, taken over; NULL when none (or handed on) */
} frame_request;

/* What the headers say and what the request chose (probe). */
typedef struct frame_plan {
    hp_decode_options opt, depth_opt; /* the frame's, and the depth part's (the limits alone) */
    hp_image_info info, dinfo;        /* the frame's header, and the depth part's */
    bool raw;                         /* raw samples (input.width), not a file */
    bool half;                        /* decoded as RGBA16F: a half EXR stays half */
    bool want_dof, depth_in_frame;    /* depth of field, from the frame's own depth channel */
    bool use_early;                   /* the early decoder's frame is this frame */
    const char *color_space;          /* the frame's colour space: a name of hp_colorspace, or "custom" */
    const char *color_source;         /* why: "parameter", "attribute" (the file's) or "default" */
    bool ocio_input;                  /* the frame is in a colour space of the OCIO config: ocio_key.input */
    bool ocio;                        /* through a studio's OCIO view (issue 34): ocio_key's */
    hp_ocio_view_key ocio_key;
    hp_ocio_encoding ocio_enc;        /* what its display measures as */
} frame_plan;

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
static hp_code decode_depth_part(const hp_form_part *dp, const hp_decode_options *opt, hp_image_info *info, float *depth,
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

/* The memory a frame holds from its decoding to its answer: its pixels as the GPU takes them, its depth, a
 * depth part's scratch while it decodes, and the image read back for the encoder. */
static uint64_t frame_bytes(const hp_image_info *info, bool half, bool want_dof, bool depth_part, const hp_params *p)
{
    uint64_t n = (uint64_t)info->width * info->height;
    uint64_t bytes = n * (half ? 8 : 16);
    if (want_dof)
        bytes += n * sizeof(float) + (depth_part ? n * 16 : 0);
    return bytes + n * (p->output.bit_depth > 8 ? 8 : 4);
}

/* Takes the frame's bytes from the budget before they are allocated (docs/SECURITY.md): what an early
 * decoder took for the same frame is the request's now, the rest is taken here. False: the reply says why
 * (503 memory_full, or 413 for a frame larger than the whole budget). */
static bool take_frame_budget(hp_request *req, render_ctx *ctx, hp_early *early, const hp_image_info *info,
                              uint64_t need, hp_reply *reply)
{
    ctx->budget = hp_http_budget(req->http);
    if (early) {
        ctx->charged = early->charged;
        early->charged = 0;
        hp_early_share_give(early); /* the body is in: no longer a reservation ahead of it */
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

/* Asked by the worker just before the job runs: a client that hung up since the watch's last look
 * (api/http/deferred.c, every HP_DEFERRED_WATCH_MS) is seen here. */
static bool client_gone(hp_job *job)
{
    const render_ctx *ctx = job->user;
    return hp_deferred_client_gone(ctx->slot);
}


/* --- receive ------------------------------------------------------------------------------------------ */

typedef struct request_params {
    hp_request *req;
    const hp_form *form;
    hp_reply *reply;
} request_params;

/* The request's parameters on top of *p: the params part, then the query (which wins). A failure is
 * answered in the reply (hp_params_reader's err stays empty). */
static hp_code read_request_params(const void *src, hp_params *p, hp_err *err)
{
    const request_params *r = src;
    (void)err;
    return (!r->form->params.present || hp_form_read_params(r->req, &r->form->params, p, r->reply)) &&
                   hp_query_read(r->req->connection, p, r->reply)
               ? HP_OK
               : HP_ERR_INVALID_ARGUMENT;
}

/* A qvalue (RFC 9110 12.4.2): "0" or "1", or either with up to three decimals, 1 at most; -1 for anything else
 * (strtod would take "2", "inf" or hex). */
static double qvalue(const char *v, size_t len)
{
    if (len == 0 || (v[0] != '0' && v[0] != '1') || (len > 1 && (v[1] != '.' || len > 5)))
        return -1;
    double q = v[0] - '0', scale = 0.1;
    for (size_t i = 2; i < len; i++, scale /= 10) {
        if (v[i] < '0' || v[i] > '9' || (v[0] == '1' && v[i] != '0'))
            return -1;
        q += (v[i] - '0') * scale;
    }
    return q;
}

/* The weight an Accept header gives a media type named exactly (RFC 9110 12.5.1): its q, 1 without one, 0 when
 * the header does not name it or its q is malformed. Ranges with wildcards are not looked at: they choose
 * nothing here, where the default stands for them. */
static double accept_weight(const char *accept, const char *type)
{
    double best = 0;
    size_t want = strlen(type);
    for (const char *at = accept; at && *at;) {
        size_t len = strcspn(at, ","), type_len = strcspn(at, ",;");
        const char *t = at;
        while (type_len && (*t == ' ' || *t == '\t'))
            t++, type_len--;
        while (type_len && (t[type_len - 1] == ' ' || t[type_len - 1] == '\t'))
            type_len--;
        double q = 1;
        for (const char *p = memchr(at, ';', len); p; p = memchr(p + 1, ';', (size_t)(at + len - p - 1))) {
            const char *v = p + 1 + strspn(p + 1, " \t");
            if ((v[0] == 'q' || v[0] == 'Q') && v[1] == '=')
                q = qvalue(v + 2, strcspn(v + 2, " \t;,"));
        }
        if (type_len == want && strncasecmp(t, type, want) == 0 && q > best)
            best = q;
        at += len + (at[len] == ',');
    }
    return best;
}

/* The image format an Accept header asks for: of the formats this daemon writes, the one of highest weight; on a
 * tie the first of the server's order, whose first is the default (RFC 9110 leaves ties to the server: a browser
 * that lists image/avif before image/webp at the same weight gets WebP, much the faster to encode); -1 when no
 * format is named with a weight above 0. An unknown or unwritable type is ignored rather than refused with 406,
 * as the RFC allows: the image is still what the client would get without the header. */
static int accepted_format(const char *accept)
{
    static const struct { const char *type; int format; } types[] = {
        {"image/webp", HP_OUTPUT_WEBP}, {"image/png", HP_OUTPUT_PNG},
        {"image/jpeg", HP_OUTPUT_JPEG}, {"image/avif", HP_OUTPUT_AVIF},
    };
    int best = -1;
    double best_q = 0;
    for (size_t i = 0; accept && i < sizeof types / sizeof types[0]; i++) {
        double q = accept_weight(accept, types[i].type);
        if (q > best_q)
            best = types[i].format, best_q = q;
    }
    return best;
}

/* With a named look applied first (pipeline/looks.h, hp_params_read_with_look). An Accept header that names an
 * image format sets output.format under the look and the parameters, which override it. */
static bool read_params_with_look(hp_request *req, frame_request *fr, hp_reply *reply)
{
    const char *accept = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    int format = fr->analyze ? -1 : accepted_format(accept);
    if (format >= 0)
        fr->fp.params.output.format = (hp_output_format)format;
    request_params src = {req, &fr->form, reply};
    hp_err err = {0};
    hp_code code = hp_params_read_with_look(read_request_params, &src, &fr->fp.params, &err);
    if (code != HP_OK && err.message[0]) /* the look's own settings failed: the table's fault */
        hp_reply_error(reply, 500, "internal", "look", "%s", err.message);
    return code == HP_OK;
}

static bool receive(hp_request *req, frame_request *fr, hp_reply *reply)
{
    const char *ctype = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    fr->form.body_len = req->body_len;
    fr->frame = req->body;
    fr->frame_len = req->body_len;
    if (ctype && strncasecmp(ctype, "multipart/form-data", 19) == 0) {
        if (!hp_form_read(req, &fr->form, reply))
            return false;
        fr->frame = fr->form.frame.data;
        fr->frame_len = fr->form.frame.len;
    } else if (fr->frame_len == 0) {
        hp_reply_error(reply, 400, "missing_frame", "frame", "the body is empty: send the frame as the body, or "
                       "as the \"frame\" part of a multipart/form-data body");
        return false;
    }
    return read_params_with_look(req, fr, reply);
}

/* --- probe -------------------------------------------------------------------------------------------- */

/* Raw samples: the parameters say what the bytes are; they must be exactly that many. */
static bool probe_raw(const frame_request *fr, frame_plan *pl, hp_reply *reply)
{
    const hp_input_params *raw = &fr->fp.params.input;
    memset(&pl->info, 0, sizeof(pl->info));
    pl->info.width = raw->width;
    pl->info.height = raw->height;
    pl->info.has_alpha = raw->channels == 4;
    hp_err err = {0};
    hp_code dc = hp_image_check_limits_public(raw->width, raw->height, &pl->opt, &err);
    if (dc != HP_OK) {
        hp_reply_decode_error(reply, dc, &err);
        return false;
    }
    size_t sample = raw->type == HP_INPUT_FLOAT16 ? 2 : 4;
    uint64_t want = (uint64_t)raw->width * raw->height * raw->channels * sample;
    if (fr->frame_len == want)
        return true;
    hp_reply_error(reply, 400, "malformed_image", "frame", "a raw %ux%u frame of %u %s channels is %llu bytes; the "
                   "body has %zu", raw->width, raw->height, raw->channels,
                   raw->type == HP_INPUT_FLOAT16 ? "float16" : "float32", (unsigned long long)want, fr->frame_len);
    return false;
}

/* A depth part is a picture of its own, probed with the limits alone, before anything is decoded, so that
 * a mismatch says so at once. */
static bool probe_depth_part(const frame_request *fr, frame_plan *pl, hp_reply *reply)
{
    hp_err derr = {0};
    if (hp_image_probe(fr->form.depth.data, fr->form.depth.len, &pl->depth_opt, &pl->dinfo, &derr) != HP_OK) {
        const char *word = NULL;
        unsigned status = hp_status_for_decode(derr.code, &word);
        hp_reply_error(reply, status, word, "depth", "depth: %s", derr.message);
        return false;
    }
    if (pl->dinfo.width == pl->info.width && pl->dinfo.height == pl->info.height)
        return true;
    hp_reply_error(reply, 422, "depth_size_differs", "depth", "the depth image is %ux%u, the frame %ux%u",
                   pl->dinfo.width, pl->dinfo.height, pl->info.width, pl->info.height);
    return false;
}

/* What the request chose that the frame must offer: named OpenEXR channels, and a depth for depth of
 * field. */
static bool check_choices(const frame_request *fr, frame_plan *pl, hp_reply *reply)
{
    const hp_input_params *raw = &fr->fp.params.input;
    const hp_image_info *info = &pl->info;
    /* The decoders of the other formats ignore the names; a request that gives one expects a choice the
     * file cannot offer, so it is told rather than answered with whatever the file holds. (Raw samples
     * with a name are refused earlier, by the parameters' own rules.) */
    const char *param = NULL, *name = first_exr_name(raw, &param);
    if (!pl->raw && info->format != HP_IMAGE_EXR && name) {
        hp_reply_error(reply, 422, "unusable_image", param,
                       "%s (\"%.100s\") names %s of an OpenEXR file, but the frame is %s: only OpenEXR files "
                       "have layers and named channels; leave %s out for this frame",
                       param, name, strcmp(param, "input.layer") == 0 ? "a layer" : "a channel",
                       info->format == HP_IMAGE_RGBE ? "Radiance HDR" : "PFM", param);
        return false;
    }
    /* Depth of field needs a depth: the EXR's own channel, or a depth part (which wins). */
    pl->want_dof = !fr->analyze && fr->fp.params.dof.enabled;
    pl->depth_in_frame = !pl->raw && info->has_depth && !fr->form.depth.present;
    if (pl->want_dof && !fr->form.depth.present && !pl->depth_in_frame) {
        hp_reply_error(reply, 422, "depth_missing", "depth",
                       "dof.enabled needs the frame's depth: a depth channel in an OpenEXR frame (Z, or one named by "
                       "input.depth) or a `depth` part, and this %s frame comes with neither",
                       pl->raw ? "raw" : hp_image_format_name(info->format));
        return false;
    }
    /* A half EXR stays half (issue 6: "fp16 stays fp16"): the same values in half the bytes to write, copy
     * into the staging and upload; the stages read RGBA16F as well as RGBA32F. */
    pl->half = !pl->raw && info->half_exact;
    return true;
}

/* The frame's colour space (issue 17): input.colorspace when given, else the file's chromaticities, else
 * Rec.709. Chromaticities that make no RGB space are the file's fault: 422, naming what is wrong. */
static bool resolve_color(frame_request *fr, frame_plan *pl, hp_reply *reply)
{
    hp_err err = {0};
    /* Through an OCIO view the config's processor takes the frame from its colour space (input.colorspace's
     * config name, else the config's scene_linear): nothing is converted before it. */
    if (hp_params_ocio_on(&fr->fp.params)) {
        if (hp_params_ocio_key(&fr->fp.params, &pl->ocio_key, &err) != HP_OK) {
            hp_reply_error(reply, 400, err.word ? err.word : "invalid_parameter", err.field[0] ? err.field : NULL,
                           "%s", err.message);
            return false;
        }
        /* The frame's luminance is the config's space's own, for a render and an analysis alike: a shot's
         * statistics (the exposure lock) must be those its frames are rendered with. */
        hp_input_color *color = &fr->fp.params.color;
        *color = (hp_input_color){.convert = false, .own_luma = true, .output = fr->fp.params.output.colorspace};
        hp_ocio_input_luma(hp_params_ocio_config(), pl->ocio_key.input, color->luma);
        pl->color_source = fr->fp.params.ocio.input[0] ? "parameter" : "ocio_scene_linear";
        pl->ocio_input = true;
        if (fr->analyze)
            return true;
        pl->ocio_enc = hp_ocio_encoding_of(hp_params_ocio_config(), pl->ocio_key.display, pl->ocio_key.view);
        if (hp_output_tag_check(&fr->fp.params, &pl->ocio_enc, pl->ocio_key.display, &err) != HP_OK) {
            hp_reply_error(reply, 400, "invalid_parameter", err.field, "%s", err.message);
            return false;
        }
        pl->ocio = true;
        return true;
    }
    if (hp_input_color_resolve(fr->fp.params.input.colorspace, pl->info.has_chromaticities ? &pl->info.chromaticities
                                                                                          : NULL,
                               fr->fp.params.output.colorspace, &fr->fp.params.color, &pl->color_space, &pl->color_source, &err) != HP_OK) {
        hp_reply_error(reply, 422, "unusable_image", "input.colorspace",
                       "the file's chromaticities make no RGB space: %s; send input.colorspace to say which it is",
                       err.message);
        return false;
    }
    return true;
}

static bool probe(hp_request *req, frame_request *fr, frame_plan *pl, hp_reply *reply)
{
    hp_decode_options_for(hp_http_get_backend(req->http), &fr->fp.params, &pl->opt, &pl->depth_opt);
    pl->raw = fr->fp.params.input.width != 0;
    /* The early decoder parsed the same query and read the same bytes: its probe is this probe. */
    const hp_early *early = fr->early;
    pl->use_early = early && (early->pending || early->code == HP_OK) && fr->frame == req->body && !pl->raw;
    if (pl->use_early) {
        pl->info = early->info;
    } else if (pl->raw) {
        if (!probe_raw(fr, pl, reply))
            return false;
    } else {
        hp_err err = {0};
        hp_code dc = hp_image_probe(fr->frame, fr->frame_len, &pl->opt, &pl->info, &err);
        if (dc != HP_OK) {
            hp_reply_decode_error(reply, dc, &err);
            return false;
        }
    }
    if (fr->form.depth.present && !probe_depth_part(fr, pl, reply))
        return false;
    if (!check_choices(fr, pl, reply) || !resolve_color(fr, pl, reply))
        return false;
    snprintf(req->log_note, sizeof(req->log_note), "%s %ux%u",
             pl->raw ? "raw" : hp_image_format_name(pl->info.format), pl->info.width, pl->info.height);
    return true;
}

/* --- decode ------------------------------------------------------------------------------------------- */

/* The early decoder's frame, when it is this one: taken as it is (its memory the job's now), or, while it
 * still decodes and cannot be handed on, waited for. */
static void adopt_early(const hp_http_backend *be, frame_request *fr, frame_plan *pl, hp_job *job)
{
    hp_early *early = fr->early;
    /* The early decoder read the depth exactly when depth of field wants the frame's own (a depth part
     * never comes with a raw body). */
    pl->use_early = pl->use_early && early->half == pl->half && early->want_dof == pl->want_dof &&
                    (!pl->want_dof || pl->depth_in_frame);
    if (!pl->use_early)
        return;
    /* Handed on while its last rows decode only to an idle GPU thread: with frames waiting, a frame still
     * decoding at the head of the queue would hold back frames behind it that are ready, so under load
     * the handler waits for the decoding as before (16 clients, side by side with the code before the
     * hand-over: within the noise, docs/BENCHMARKS.md). Depth of field reads the depth here (the automatic
     * focus): for it the decoding must be over too. */
    bool queue_busy = be->queue_depth && be->queue_depth(be->ctx) > 0;
    /* A frame inflated on the GPU is handed on even then: its tail is the whole GPU run, tens of
     * milliseconds that would hold this HTTP thread. */
    if (early->pending && (pl->want_dof || (queue_busy && !early->on_gpu))) {
        hp_early_settle(early);
        early->pending = false;
        pl->use_early = early->code == HP_OK; /* a failure: the ordinary path decodes again and says why */
        if (!pl->use_early)
            return;
    }
    job->pixels = early->pixels;
    job->depth = early->depth;
    early->pixels = early->depth = (hp_host_mem){0};
}

/* The frame's bytes from the budget, then the memory it is decoded into: mapped memory the GPU uploads
 * from (pipeline/host_pool.h), so that the host copies nothing. */
static bool take_memory(hp_request *req, frame_request *fr, frame_plan *pl, render_ctx *ctx, hp_job *job,
                        hp_reply *reply)
{
    const hp_http_backend *be = hp_http_get_backend(req->http);
    adopt_early(be, fr, pl, job);
    const hp_image_info *info = &pl->info;
    uint64_t need = frame_bytes(info, pl->half, pl->want_dof, fr->form.depth.present, &fr->fp.params);
    if (!take_frame_budget(req, ctx, pl->use_early ? fr->early : NULL, info, need, reply))
        return false;
    size_t n = (size_t)info->width * info->height;
    bool have = hp_host_mem_held(&job->pixels) ||
                hp_host_mem_get(be->host_pool, HP_MEM_UPLOAD, n * (pl->half ? 8 : 16), &job->pixels);
    if (have && pl->want_dof && !job->depth.ptr)
        have = hp_host_mem_get(be->host_pool, HP_MEM_UPLOAD, n * sizeof(float), &job->depth);
    if (!have)
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory for a %ux%u frame", info->width, info->height);
    return have;
}

/* Decodes into the job's memory (unless the early decoder did or still does), the depth part as well, and
 * resolves depth of field's settings from the depth ("auto" focus). ctx->decode_ms: the time the request
 * waited for its decoding after the body was in; decoded early, only the tail after the last byte. */
static bool decode(const hp_request *req, frame_request *fr, frame_plan *pl, render_ctx *ctx, hp_job *job,
                   hp_reply *reply)
{
    const hp_early *early = fr->early;
    hp_err err = {0};
    hp_code dc = HP_OK;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (pl->use_early)
        ctx->decode_ms = early->pending ? 0.0 /* still decoding: hp_render_finish counts it */
                                        : fmax(0.0, hp_ms_between(&req->body_done, &early->decoded));
    else if (pl->raw)
        raw_to_rgba(fr->frame, &fr->fp.params.input, job->pixels.ptr);
    else
        dc = hp_image_decode(fr->frame, fr->frame_len, &pl->opt, &pl->info, job->pixels.ptr,
                             pl->half ? HP_LAYOUT_RGBA16F : HP_LAYOUT_RGBA32F, pl->depth_in_frame ? job->depth.ptr : NULL,
                             &err);
    if (dc != HP_OK) {
        hp_reply_decode_error(reply, dc, &err);
        return false;
    }
    if (pl->want_dof && fr->form.depth.present) {
        dc = decode_depth_part(&fr->form.depth, &pl->depth_opt, &pl->dinfo, job->depth.ptr, &err);
        if (dc != HP_OK) {
            const char *word = NULL;
            unsigned status = hp_status_for_decode(dc, &word);
            hp_reply_error(reply, status, word, "depth", "depth: %s", err.message);
            return false;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!pl->use_early)
        ctx->decode_ms = hp_ms_between(&t0, &t1);
    if (pl->want_dof) {
        fr->fp.dof = true;
        hp_dof_settings_from_params(&fr->fp.params, job->depth.ptr, pl->info.width, pl->info.height,
                                    &fr->fp.dof_settings);
    }
    return true;
}

/* --- queue -------------------------------------------------------------------------------------------- */

/* What the answer says about the request and its frame, kept for the finishing thread. */
static void describe(const hp_request *req, const frame_request *fr, const frame_plan *pl, render_ctx *ctx)
{
    const hp_image_info *info = &pl->info;
    const char *accept = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    ctx->started = req->started;
    ctx->body_len = req->body_len;
    ctx->body_done = req->body_done;
    ctx->recv_ms = hp_ms_between(&req->started, &req->body_done);
    ctx->analyze = fr->analyze;
    ctx->want_json = accept_weight(accept, "application/json") > 0;
    ctx->alpha = info->has_alpha;
    ctx->input_format = info->format;
    ctx->raw = pl->raw;
    ctx->early = pl->use_early;
    ctx->color_space = pl->color_space;
    ctx->color_source = pl->color_source;
    if (pl->ocio_input) {
        ctx->ocio = pl->ocio;
        ctx->ocio_key = pl->ocio_key;
        ctx->ocio_enc = pl->ocio_enc;
        ctx->color_space = ctx->ocio_key.input; /* the config's name, for the answer */
    }
    if (pl->raw || info->format != HP_IMAGE_EXR)
        return;
    /* Names from the file, quoted in the JSON answer: made UTF-8 (jansson refuses anything else). */
    ctx->exr_part = info->part;
    snprintf(ctx->exr_layer, sizeof(ctx->exr_layer), "%s", info->layer);
    hp_utf8_clean(ctx->exr_layer);
    for (int c = 0; c < 4; c++) {
        snprintf(ctx->exr_channels[c], sizeof(ctx->exr_channels[c]), "%s", info->channel_names[c]);
        hp_utf8_clean(ctx->exr_channels[c]);
    }
    snprintf(ctx->exr_depth, sizeof(ctx->exr_depth), "%s", info->has_depth ? info->depth_channel : "");
    hp_utf8_clean(ctx->exr_depth);
}

/* The deferred reply's watch saw the client leave (api/http/deferred.c): the queue lets go of the job at once. */
static void on_client_gone(void *arg)
{
    hp_job *job = arg;
    render_ctx *ctx = job->user;
    if (ctx->be->cancel)
        ctx->be->cancel(ctx->be->ctx, job);
    else
        atomic_store(&job->cancelled, true);
}

static void set_deadline(hp_job *job, double timeout_s)
{
    clock_gettime(CLOCK_MONOTONIC, &job->deadline);
    double timeout = timeout_s > 0 ? timeout_s : 60.0;
    job->deadline.tv_sec += (time_t)timeout;
    job->deadline.tv_nsec += (long)((timeout - floor(timeout)) * 1e9);
    if (job->deadline.tv_nsec >= 1000000000L)
        job->deadline.tv_sec++, job->deadline.tv_nsec -= 1000000000L;
}

/* Hands the job to the daemon's queue, with the connection's reply deferred to the finishing thread. False
 * (the reply says why): the job is still the caller's. */
/* The OCIO view's program for the frame's format and bit depth, made now on its first use (the request waits:
 * docs/COLOR.md says how long, and ocio_warm makes programs before the daemon is ready). The OCIO stage writes
 * RGBA: lossy WebP's 4:2:0 planes are then made on the CPU. */
static bool ocio_program(hp_request *req, hp_job *job, render_ctx *ctx, hp_reply *reply)
{
    ctx->ocio_stage = hp_http_get_backend(req->http)->ocio;
    hp_err err = {0};
    bool made = false;
    hp_tone_output kind = job->params.params.output.bit_depth > 8 ? HP_TONE_OUT_RGBA16 : HP_TONE_OUT_RGBA8;
    /* With depth of field the pass reads the DOF composite, which is RGBA32F whatever the frame was. */
    hp_pixel_format format = job->params.dof ? HP_PIXEL_RGBA32F : job->desc.format;
    job->params.yuv420 = job->params.yuv_alpha = false;
    if (!ctx->ocio_stage || hp_ocio_stage_acquire(ctx->ocio_stage, &ctx->ocio_key, format, kind,
                                                  &ctx->ocio_entry, &made, &err) != HP_OK) {
        hp_reply_error(reply, 500, "ocio_failed", "ocio.view", "the OCIO view %s / %s from \"%s\" could not be made "
                       "for the GPU: %s", ctx->ocio_key.display, ctx->ocio_key.view, ctx->ocio_key.input,
                       ctx->ocio_stage ? err.message : "the daemon has no OCIO stage");
        return false;
    }
    job->params.ocio = ctx->ocio_entry;
    return true;
}

static bool queue(hp_request *req, frame_request *fr, const frame_plan *pl, render_ctx *ctx, hp_job *job,
                  hp_reply *reply)
{
    const hp_http_backend *be = hp_http_get_backend(req->http);
    const hp_params *p = &fr->fp.params;
    job->desc = (hp_frame_desc){.width = pl->info.width, .height = pl->info.height,
                                .format = pl->half ? HP_PIXEL_RGBA16F : HP_PIXEL_RGBA32F};
    job->params = fr->fp;
    /* Lossy WebP is coded as Y'CbCr 4:2:0: converted on the GPU in the tone pass and read back at 1.5 bytes
     * a pixel (2.5 with alpha) instead of 4, and libwebp skips its own conversion, one core's work. */
    job->params.yuv420 = !fr->analyze && p->output.format == HP_OUTPUT_WEBP && !p->output.lossless &&
                         p->output.bit_depth == 8;
    job->params.yuv_alpha = job->params.yuv420 && pl->info.has_alpha && p->output.alpha != HP_ALPHA_DROP;
    /* PNG on the GPU (output.png_encoder): keep and drop as on the CPU; auto's RGB or RGBA is decided on the
     * GPU from the tone pass's word on whether any alpha is translucent (hp_frame_params.png_alpha_auto). */
    job->params.png_channels = pl->info.has_alpha && p->output.alpha != HP_ALPHA_DROP ? 4 : 3;
    job->params.png_alpha_auto = pl->info.has_alpha && p->output.alpha == HP_ALPHA_AUTO;
    if (ctx->ocio && !ocio_program(req, job, ctx, reply))
        return false;
    job->finish = hp_render_finish;
    job->client_gone = client_gone;
    job->rows = pl->use_early && fr->early->pending ? &fr->early->rows : NULL;
    job->decoding_on_gpu = job->rows && fr->early->on_gpu;
    job->user = ctx;
    ctx->be = be;
    set_deadline(job, be->request_timeout_s);
    /* Deferred before the hand-over: the frame may be finished before this handler returns. */
    if (!(ctx->slot = hp_request_defer(req))) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory");
        return false;
    }
    hp_deferred_watch(ctx->slot, on_client_gone, job);
    if (job->rows) { /* shared from here on: the request's completion and the job's finish each let go of it */
        hp_debug("render: %ux%u handed to the GPU thread while its last rows decode", pl->info.width, pl->info.height);
        hp_early_hand_over(req, fr->early);
        ctx->pending = fr->early;
        fr->early = NULL;
    }
    if (be->submit(be->ctx, job))
        return true; /* the worker's now; the reply comes from hp_render_finish */
    hp_request_undefer(req);
    if (ctx->pending) { /* the job's share: it will never run */
        hp_early_job_done(ctx->pending, &ctx->body_done);
        ctx->pending = NULL;
    }
    hp_reply_error(reply, 429, "queue_full", NULL, "the queue is full (%u frames waiting); retry shortly",
                   be->queue_depth ? be->queue_depth(be->ctx) : 0);
    hp_reply_header_add(reply, "Retry-After", "1");
    return false;
}

/* --- The handler -------------------------------------------------------------------------------------- */

static bool accepting_frames(hp_request *req, hp_reply *reply)
{
    const hp_http_backend *be = hp_http_get_backend(req->http);
    hp_service_state state = hp_http_get_state(req->http);
    /* A request whose body arrived before a SIGTERM is in flight: it is rendered, the worker runs until
     * the HTTP drain is over. New connections are not accepted by then. */
    if ((state == HP_SERVICE_READY || state == HP_SERVICE_DRAINING) && be->submit)
        return true;
    hp_reply_error(reply, 503, "not_ready", NULL, "%s: this server takes no frames now", hp_service_state_name(state));
    if (state == HP_SERVICE_STARTING)
        hp_reply_header_add(reply, "Retry-After", "1");
    return false;
}

static void render_or_analyze(hp_request *req, hp_reply *reply, bool analyze)
{
    if (!accepting_frames(req, reply))
        return;
    frame_request fr = {.analyze = analyze, .early = hp_early_take(req)};
    hp_frame_params_defaults(&fr.fp);
    fr.fp.analyze_only = analyze;
    frame_plan pl = {0};
    render_ctx *ctx = NULL;
    hp_job *job = NULL;
    bool queued = receive(req, &fr, reply) && probe(req, &fr, &pl, reply);
    if (queued && (!(ctx = calloc(1, sizeof(*ctx))) || !(job = calloc(1, sizeof(*job))))) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory for a %ux%u frame", pl.info.width,
                       pl.info.height);
        queued = false;
    }
    queued = queued && take_memory(req, &fr, &pl, ctx, job, reply) && decode(req, &fr, &pl, ctx, job, reply);
    if (queued)
        describe(req, &fr, &pl, ctx);
    queued = queued && queue(req, &fr, &pl, ctx, job, reply);
    if (!queued) {
        hp_early_settle(fr.early); /* it may still write the memory the job holds */
        if (job)
            hp_job_release(job);
        free(job);
        hp_render_ctx_free(ctx);
    }
    hp_early_free(fr.early);
    hp_form_free(&fr.form);
}

void hp_route_render(hp_request *request, hp_reply *reply) { render_or_analyze(request, reply, false); }
void hp_route_analyze(hp_request *request, hp_reply *reply) { render_or_analyze(request, reply, true); }

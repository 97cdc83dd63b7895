/* The render routes' two halves (private to api/): render.c, on an HTTP thread, takes a request through
 * receive -> probe -> decode -> queue; render_reply.c, on a finishing thread, takes the job it queued
 * through encode -> reply. What passes from one to the other: the job (api/frames/job.h) and this. */
#ifndef HP_RENDER_H
#define HP_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "api/codecs/image.h"
#include "api/frames/job.h"
#include "api/http/route.h"
#include "common/budget.h"
#include "pipeline/ocio_encoding.h"

/* render.c: POST /v1/render, POST /v1/analyze. Their body_begins hooks are api/frames/early_decode.h's. */
void hp_route_render(hp_request *request, hp_reply *reply);
void hp_route_analyze(hp_request *request, hp_reply *reply);

/* What a request keeps from its handler to its answer (job->user). */
typedef struct render_ctx {
    hp_deferred *slot;       /* answers the request (which may be gone by then) */
    const struct hp_http_backend *be; /* whose queue has the job (to cancel it) */
    hp_budget *budget;       /* the daemon's memory budget (it outlives the server), and what the frame holds */
    uint64_t charged;
    struct timespec started; /* when the request's headers arrived */
    size_t body_len;
    bool analyze;
    bool want_json;
    bool alpha;
    hp_image_format input_format;
    bool raw; /* raw samples, not a file */
    double recv_ms, decode_ms;
    bool early;              /* decoded while it arrived (decode_ms is then the tail after the last byte) */
    struct hp_early *pending; /* still decoding when the job was submitted: settled by hp_render_finish */
    struct timespec body_done;    /* the last byte */
    const char *color_space;      /* the frame's colour space and why (static strings; api/frames/render.c) */
    const char *color_source;
    /* OpenEXR: what the decoder chose (hp_image_info), for the JSON answer: with several layers in a
     * file, a client must be able to see which one it got. "" where there is none. */
    int exr_part;
    char exr_layer[HP_IMAGE_NAME_MAX];
    char exr_channels[4][HP_IMAGE_NAME_MAX]; /* R, G, B, A */
    char exr_depth[HP_IMAGE_NAME_MAX];
    /* A studio's OCIO view (issue 34): the transform, resolved, and its program, held from before the job is
     * queued until the request lets go (hp_render_ctx_free): the GPU is done with it by then. */
    bool ocio;
    hp_ocio_view_key ocio_key;
    hp_ocio_encoding ocio_enc;    /* what its display measures as: the file's tag (api/frames/output_encode.h) */
    struct hp_ocio_stage *ocio_stage;
    struct hp_ocio_entry *ocio_entry;
} render_ctx;

/* On a finishing thread, the job's finish: encode (render) or describe (analyze), answer, free the job and
 * its render_ctx. */
void hp_render_finish(hp_job *job);
/* Gives the budget back and frees (NULL is nothing). */
void hp_render_ctx_free(render_ctx *ctx);

/* A decoder's failure as the answer says it, naming the frame or the input.* parameter it comes from. */
void hp_reply_decode_error(hp_reply *reply, hp_code code, const hp_err *err);
/* A decoder's code as an HTTP status and error word. */
unsigned hp_status_for_decode(hp_code code, const char **word);

#endif

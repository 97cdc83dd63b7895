/* Early decoding (private to api/). A frame sent as the raw body (parameters in the query) is decoded while it arrives: the route's
 * body_begins starts a thread that parses the query, reads the OpenEXR header and decodes each chunk as
 * soon as its bytes are in (common/arrival.h makes the reader wait), into the mapped memory the GPU
 * uploads from. By the time the last byte is in, all but a chunk or two is decoded. The handler then
 * takes the result instead of decoding; anything the early decoder could not do (another format, a
 * multipart body, bad parameters or a bad file) is left to the ordinary path, which answers with the
 * error, so the rules and messages stay in one place. */
#ifndef HP_EARLY_DECODE_H
#define HP_EARLY_DECODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "api/http/http.h"
#include "api/codecs/image.h"
#include "api/http/route.h"
#include "common/budget.h"
#include "common/rows_ready.h"
#include "pipeline/host_pool.h"
#include "pipeline/params.h"

typedef struct hp_early {
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
    bool on_gpu;             /* its ZIP chunks go to the GPU: pixels is a device block (no ptr) */
    hp_host_mem pixels, depth;
    struct timespec decoded; /* when it finished */
    /* How far it is (common/rows_ready.h): the handler waits only for it to begin decoding, then hands
     * the frame to the GPU thread, which uploads the rows as they become final. */
    hp_rows_ready rows;
    bool pending;            /* taken while still decoding: not joined yet */
    hp_budget *budget;       /* its frame's bytes are taken from it before they are allocated */
    uint64_t charged;
    uint64_t early_share;    /* and from the share of it for bodies still arriving (early_share_take) */
    uint64_t chunks_share;   /* the GPU's path's bytes from that share, given back once its chunks are in */
    /* Handed on while decoding, it has two owners: the request, whose body and arrival it reads until it
     * has finished (the request's completion waits for that), and the job, whose frame it writes. Each
     * lets go with early_release; the last frees it. 1 otherwise. */
    _Atomic int refs;
} hp_early;

/* The decoder's options for a request: the server's limits and threads, the parameters' channel names.
 * depth_opt, for a depth part, takes the limits alone (may be NULL). */
void hp_decode_options_for(const hp_http_backend *be, const hp_params *p, hp_decode_options *opt,
                           hp_decode_options *depth_opt);

/* The handler's side: waits for the request's early decoder to have begun or given up (the whole body is
 * in) and takes it over from the request; still decoding, e->pending is set. NULL when there was none. */
hp_early *hp_early_take(hp_request *req);
/* Joins the decoder if it still runs: before the memory it writes is let go. NULL is nothing. */
void hp_early_settle(hp_early *e);
/* Joins and frees (its memory and budget back). NULL is nothing. */
void hp_early_free(hp_early *e);
/* Its reservation of the share for bodies still arriving, given back once the body is in. */
void hp_early_share_give(hp_early *e);
/* The bytes the early decoders hold now from the share of bodies still arriving (a quarter of the budget), for
 * /metrics: 0 when no body is arriving. */
uint64_t hp_early_share_in_use(void);
/* Hands a decoder still decoding on with the job: the request's completion and the job each hold it. */
void hp_early_hand_over(hp_request *req, hp_early *e);
/* The job's share let go (after waiting for the decoding to end); returns the decoding's tail after the
 * body's last byte, in ms. */
double hp_early_job_done(hp_early *e, const struct timespec *body_done);

/* The render routes' body_begins hooks (api/routes/routes.c): they run on the request's first call, once the
 * body's buffer exists and before any of it has arrived (authorised requests only), and may start decoding it
 * while it arrives. */
void hp_route_render_begins(hp_request *request);
void hp_route_analyze_begins(hp_request *request);

#endif

/* Early decoding: a raw-body OpenEXR decoded while it arrives (api/frames/early_decode.h). */
#include "api/frames/early_decode.h"

#include <math.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/frames/form.h"
#include "api/http/metrics.h"
#include "api/frames/params_json.h"
#include "common/budget.h"
#include "common/clock.h"
#include "common/log.h"
#include "pipeline/params.h"

/* Early decodes at once, at most the queue's capacity: each holds a frame's worth of pinned memory from
 * its header on, and more frames than the queue takes would be answered 429 anyway. */
static _Atomic unsigned early_active;

/* Bodies too small to gain from the overlap are decoded after they are in (a thread start is tens of
 * microseconds; a 64 KiB EXR takes longer than that to decode). */
#define EARLY_MIN_BYTES ((size_t)64 << 10)



/* The decoder's options for a request: the server's limits and threads, the parameters' channel names.
 * depth_opt, for a depth part, takes the limits alone. */
void hp_decode_options_for(const hp_http_backend *be, const hp_params *p, hp_decode_options *opt,
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

static bool early_run(hp_early *e);

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

static void early_share_put(uint64_t bytes) { atomic_fetch_sub(&early_share_used, bytes); }

uint64_t hp_early_share_in_use(void) { return atomic_load(&early_share_used); }

/* Once the body is in (the handler took the frame) or the decoder is dropped. */
void hp_early_share_give(hp_early *e)
{
    atomic_fetch_sub(&early_share_used, e->early_share);
    e->early_share = 0;
}

static void *early_main(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-early-decode"); /* top -H, perf and /proc name it */
    hp_early *e = arg;
    if (!early_run(e))
        hp_rows_ready_abandon(&e->rows); /* it gave up before decoding: the handler takes the ordinary path */
    return NULL;
}

/* What a frame decoded with the GPU holds beyond what its pixels were charged (the chunk table; the channels
 * beside the colour), taken from the share of bodies still arriving and the budget; false when they cannot give
 * it. */
static bool zip_extra_take(hp_early *e, uint64_t extra)
{
    if (!extra)
        return true;
    if (!early_share_take(e->budget, extra))
        return false;
    if (!hp_budget_take(e->budget, extra)) {
        early_share_put(extra);
        return false;
    }
    return true;
}

static void zip_extra_give(hp_early *e, uint64_t extra)
{
    if (extra) {
        hp_budget_give(e->budget, extra);
        early_share_put(extra);
    }
}

/* The GPU's path has its chunks (inflated or gathered; or gave up): what it took from the share of bodies still
 * arriving goes back to it, the budget keeping those bytes until the GPU's run ends (a frame waiting for the GPU
 * is no longer an arriving body, and would keep arriving ones from the share). Once: later calls do nothing. */
static void zip_chunks_in(hp_early *e)
{
    early_share_put(e->chunks_share);
    e->chunks_share = 0;
}

/* The GPU's run over the whole body: its chunks gathered as they lie into pinned host memory the passes
 * read, sized from the header (a table entry a chunk, at most the body's bytes; a file whose chunks claim
 * more is refused by the gathering and left to the CPU), the image left in the device block out. Gathered as
 * the body arrives where the share of bodies still arriving gives that memory (the copy, some 19 MB for a 4K
 * frame, is then done by the time the last byte is in, off the frame's path); else, after the whole body,
 * from the budget. After HP_ERR_DEVICE_LOST the GPU may still write both blocks: the backend has abandoned the
 * pool, which sets them aside when they are given back. */
static hp_code zip_on_gpu(hp_early *e, const hp_decode_options *opt, hp_image_info *info, uint32_t chunks,
                          hp_host_block *out, hp_err *err)
{
    hp_request *req = e->req;
    hp_decode_options gather = *opt;
    gather.rows = NULL; /* the rows are the GPU's to write */
    uint64_t in_bytes = (uint64_t)chunks * sizeof(hp_exr_zip_chunk) + req->body_cap + HP_EXR_ZIP_PACKED_PAD;
    bool as_it_comes = zip_extra_take(e, in_bytes);
    if (as_it_comes)
        e->chunks_share += in_bytes;
    else {
        hp_debug("early decode: the share of bodies still arriving cannot give %llu pinned bytes: the chunks are "
                 "gathered after the whole body", (unsigned long long)in_bytes);
        if (!hp_arrival_wait(&req->arrival, req->body_cap))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "EXR: the body ended before its last byte");
        gather.arrival = NULL; /* every byte is in */
        if (!hp_budget_take(e->budget, in_bytes))
            return hp_fail(err, HP_ERR_UNUSABLE, "EXR ZIP on the GPU: no budget for %llu bytes of chunks",
                           (unsigned long long)in_bytes);
    }
    hp_err ignored = {0};
    hp_host_block *in = hp_host_pool_get(e->be->host_pool, HP_MEM_READBACK_SHADER, (size_t)in_bytes, &ignored);
    hp_exr_zip_frame f;
    hp_code code = in ? hp_image_zip_gather(req->body, req->body_cap, &gather, info, in->buf.mapped, in->buf.size, &f,
                                            err)
                      : hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR ZIP on the GPU: %s", ignored.message);
    zip_chunks_in(e); /* the last chunk's bytes are in (or the body was cut off) */
    if (code == HP_OK)
        code = e->be->zip_gpu_run(e->be->ctx, HP_EXR_ZIP_ON_GPU, &f, &in->buf, &out->buf, err);
    if (in)
        hp_host_pool_put(in);
    hp_budget_give(e->budget, in_bytes);
    return code;
}

/* The split: the chunks inflated here as they arrive (on the decoding threads, as the CPU's decoder would)
 * into pinned host memory sized from the header (a table entry a chunk, then `unpacked` bytes: every chunk's,
 * each rounded up to a word); the rest on the GPU, which leaves the image in the device block out. That memory
 * is held while the body arrives: what the frame's pixels were charged covers it, the pixels being in device
 * memory here, and the caller has taken the rest (zip_extra_take). */
static hp_code zip_split(hp_early *e, const hp_decode_options *opt, hp_image_info *info, uint32_t chunks,
                         uint64_t unpacked, hp_host_block *out, hp_err *err)
{
    hp_request *req = e->req;
    uint64_t in_bytes = (uint64_t)chunks * sizeof(hp_exr_zip_chunk) + unpacked;
    hp_err ignored = {0};
    /* cached host memory: libdeflate reads back what it wrote (its matches), which write-combined memory
     * would make slow */
    hp_host_block *in = hp_host_pool_get(e->be->host_pool, HP_MEM_READBACK_SHADER, (size_t)in_bytes, &ignored);
    hp_exr_zip_frame f;
    hp_code code = in ? hp_image_zip_inflate(req->body, req->body_cap, opt, info, in->buf.mapped, in->buf.size, &f, err)
                      : hp_fail(err, HP_ERR_OUT_OF_MEMORY, "EXR ZIP split: %s", ignored.message);
    zip_chunks_in(e);
    if (code == HP_OK)
        code = e->be->zip_gpu_run(e->be->ctx, HP_EXR_ZIP_SPLIT, &f, &in->buf, &out->buf, err);
    if (in)
        hp_host_pool_put(in);
    return code;
}

/* The CPU's decoding of the same frame, its image uploaded into the device block out: where the GPU's
 * inflate refused a chunk or gave up. The GPU's shader keeps zlib's rules; the CPU's decoder is
 * libdeflate, which takes a few streams zlib refuses (288 literal/length codes, symbols 286 and 287), so its
 * verdict and its message stand, as with exr_zip_decoder cpu. The pixels' bytes are the budget's already
 * (early_run charged them). */
static hp_code zip_on_cpu(hp_early *e, const hp_decode_options *opt, hp_image_info *info, hp_host_block *out,
                          hp_err *err)
{
    hp_request *req = e->req;
    size_t bytes = (size_t)info->width * info->height * (e->half ? 8 : 16);
    hp_err ignored = {0};
    hp_host_block *tmp = hp_host_pool_get(e->be->host_pool, HP_MEM_UPLOAD, bytes, &ignored);
    if (!tmp)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for a %ux%u frame: %s", info->width, info->height,
                       ignored.message);
    hp_decode_options cpu = *opt;
    cpu.rows = NULL; /* told once, by the caller */
    hp_image_info probed = e->info; /* early_run's probe, with these bytes and options */
    hp_code code = hp_image_decode(req->body, req->body_cap, &cpu, &probed, tmp->buf.mapped,
                                   e->half ? HP_LAYOUT_RGBA16F : HP_LAYOUT_RGBA32F, NULL, err);
    if (code == HP_OK)
        code = e->be->zip_gpu_upload(e->be->ctx, &tmp->buf, &out->buf, bytes, err);
    hp_host_pool_put(tmp);
    return code;
}

/* Why the GPU's decoders cannot take this frame (hdrpost_exr_cpu_frames_total's reason), or NULL when they can:
 * *layout (hp_image_zip_fits's: its channels and chunk count) and the info they would decode it with are then in
 * the out parameters. */
static const char *gpu_unfit(const hp_early *e, hp_request *req, const hp_decode_options *opt, hp_image_info *fitted,
                             hp_exr_zip_frame *layout)
{
    if (e->want_dof)
        return "depth_of_field";
    if (strncmp(e->info.compression, "zip", 3) != 0)
        return hp_exr_gpu_unfit_name(HP_EXR_UNFIT_COMPRESSION);
    hp_exr_gpu_unfit why = HP_EXR_GPU_FITS;
    hp_err err = {0};
    if (hp_image_zip_fits(req->body, req->body_cap, opt, fitted, layout, &why, &err) == HP_OK)
        return NULL;
    /* A header the CPU's decoder will refuse too: its error, not a reason of the GPU's. */
    return why != HP_EXR_GPU_FITS ? hp_exr_gpu_unfit_name(why) : "header";
}

/* Counts a frame the GPU's decoders could not take and says so once per reason, at its first count (a farm's
 * frames are alike: a line a frame would fill the log). */
static void note_cpu_frame(const char *reason)
{
    if (hp_metrics_exr_cpu(reason) == 1)
        hp_info("early decode: EXR frames the GPU's decoders cannot take (%s) are decoded on the CPU; "
                "hdrpost_exr_cpu_frames_total{reason=\"%s\"} counts them (said once)", reason, reason);
}

/* The frame's ZIP chunks decoded with the GPU (route HP_EXR_ZIP_ON_GPU: gathered here as they arrive,
 * inflated there once the body is in; HP_EXR_ZIP_SPLIT: inflated here as they arrive, the rest there), the
 * image left in device memory (e->pixels, a device block with no ptr), which the frame graph copies in. Where
 * the GPU's path does not finish it, the CPU decodes it into the same block. False, before anything started,
 * when the memory cannot be had: the caller decodes it on the CPU as it arrives. fitted, layout: gpu_unfit's. */
static bool early_zip_gpu(hp_early *e, const hp_decode_options *opt, hp_exr_zip_decoded route,
                          const hp_image_info *fitted, const hp_exr_zip_frame *layout)
{
    hp_request *req = e->req;
    hp_image_info info = *fitted;
    uint64_t charged = e->charged; /* the handler may take it over once the rows have started */
    hp_err err = {0};
    uint64_t n = (uint64_t)info.width * info.height;
    uint32_t chunks = layout->chunk_count;
    uint64_t unpacked = n * layout->pixel_bytes + 4ull * chunks; /* every chunk's bytes, each rounded up to a word */
    /* Past the GPU's 32-bit offsets (an 8K frame of some 30 AOVs): the CPU decodes it as it arrives. */
    if (unpacked > INT32_MAX) {
        note_cpu_frame("offsets");
        return false;
    }
    /* Either route holds every inflated byte while the frame is decoded: the split in host memory while the
     * body arrives, the GPU in the device block after the image (and the serial inflate's code tables after
     * them, 2% more for ZIP, about a third for ZIPS). The pixels' charge covers an image's worth; the rest (the
     * table, and channels beside the colour: AOVs, depth) comes from the share of bodies still arriving, and
     * where it cannot, the CPU decodes the frame as it arrives (no more memory than its image). */
    bool split = route == HP_EXR_ZIP_SPLIT;
    hp_exr_zip_frame frame = *layout;
    frame.width = info.width;
    frame.height = info.height;
    frame.unpacked_bytes = unpacked;
    uint64_t held = (uint64_t)chunks * sizeof(hp_exr_zip_chunk) + unpacked +
                    (split ? 0 : hp_exr_zip_gpu_tables_bytes(&frame));
    uint64_t extra = held > charged ? held - charged : 0;
    if (!zip_extra_take(e, extra)) {
        note_cpu_frame("memory");
        return false;
    }
    uint64_t out_bytes = split ? hp_exr_zip_gpu_split_output_bytes(&frame) : hp_exr_zip_gpu_output_bytes(&frame);
    hp_err ignored = {0};
    hp_host_block *out = hp_host_pool_get(e->be->host_pool, HP_MEM_DEVICE, (size_t)out_bytes, &ignored);
    if (!out) {
        hp_debug("early decode: no device memory for the GPU's path (%s): the CPU decodes", ignored.message);
        zip_extra_give(e, extra);
        return false;
    }
    e->chunks_share = extra; /* back to the share once the chunks are in, to the budget after the run */
    e->pixels = (hp_host_mem){.block = out}; /* before the start: the handler may take it over from then on */
    e->on_gpu = true;
    hp_rows_ready_start(&e->rows);
    hp_code code;
    hp_exr_zip_decoded where = route;
    /* Both routes take the chunks as they arrive: the split inflates them, the GPU's gathers them. */
    if (split)
        code = zip_split(e, opt, &info, chunks, unpacked, out, &err);
    else
        code = zip_on_gpu(e, opt, &info, chunks, out, &err);
    zip_chunks_in(e); /* where the path returned before it had them */
    if (extra)
        hp_budget_give(e->budget, extra); /* the inflated chunks are on the device now, or given up */
    /* A body cut off is no frame for the CPU either; one still arriving the CPU decodes as it comes. */
    bool arrived = !hp_arrival_cut_short(&req->arrival, req->body_cap);
    if (arrived && code != HP_OK && code != HP_ERR_DEVICE_LOST) {
        hp_debug("early decode: %s; the CPU decodes the frame", err.message);
        err = (hp_err){0};
        where = split ? HP_EXR_ZIP_SPLIT_THEN_CPU : HP_EXR_ZIP_GPU_THEN_CPU;
        code = zip_on_cpu(e, opt, &info, out, &err);
    }
    /* HP_ERR_DEVICE_LOST: the GPU may still write the frame's memory, whoever holds it; the backend has
     * abandoned the pool, which sets every block given back from now on aside, never reused. */
    e->code = code;
    clock_gettime(CLOCK_MONOTONIC, &e->decoded);
    if (code == HP_OK || where != route) /* decoded, or judged by the CPU */
        hp_metrics_exr_zip(where);
    hp_rows_ready_finish(&e->rows, code, &err);
    return true;
}

/* Probes and decodes; false when it gave up before decoding (rows then never started). */
static bool early_run(hp_early *e)
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
    hp_decode_options_for(e->be, &params, &opt, NULL);
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
        hp_early_share_give(e);
        return false;
    }
    e->charged = want;
    /* Where a frame the GPU's path takes is decoded: asked only for those (a share of them may go to the GPU
     * whole, daemon/zip_share.h, and a PIZ frame must not take a ZIP frame's turn). */
    hp_image_info fitted = e->info;
    hp_exr_zip_frame layout = {0};
    const char *unfit = NULL;
    hp_exr_zip_decoded route = HP_EXR_ZIP_ON_CPU;
    if (e->be->zip_route && e->be->host_pool && (unfit = gpu_unfit(e, req, &opt, &fitted, &layout)) == NULL)
        route = e->be->zip_route(e->be->ctx);
    if (unfit)
        note_cpu_frame(unfit);
    if (route != HP_EXR_ZIP_ON_CPU && !unfit && early_zip_gpu(e, &opt, route, &fitted, &layout))
        return true;
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
    if (strncmp(info.compression, "zip", 3) == 0) /* zip and zips: what exr_zip_decoder chooses for */
        hp_metrics_exr_zip(HP_EXR_ZIP_ON_CPU);
    hp_rows_ready_finish(&e->rows, code, &err);
    return true;
}

void hp_early_free(hp_early *e)
{
    if (!e)
        return;
    atomic_fetch_sub(&early_active, 1);
    if (!e->joined)
        pthread_join(e->thread, NULL);
    hp_host_mem_put(&e->pixels);
    hp_host_mem_put(&e->depth);
    hp_budget_give(e->budget, e->charged);
    hp_early_share_give(e);
    hp_rows_ready_destroy(&e->rows);
    free(e->query);
    free(e);
}

/* Joins the early decoder if it still runs: before the memory it writes is let go. */
void hp_early_settle(hp_early *e)
{
    if (e && !e->joined) {
        pthread_join(e->thread, NULL);
        e->joined = true;
    }
}

static void early_release(hp_early *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1)
        hp_early_free(e);
}

/* Until the decoder has finished: it then no longer reads the body nor writes the frame. */
static void early_wait_finished(hp_early *e)
{
    bool finished;
    hp_rows_ready_wait(&e->rows, UINT32_MAX, &finished);
}

/* The request's share, at its completion: its body and arrival are freed right after this. */
static void early_drop_shared(hp_request *req)
{
    hp_early *e = req->early;
    req->early = NULL;
    if (e) {
        early_wait_finished(e);
        early_release(e);
    }
}

/* The request ended before its handler took the decoder: its client went away while the frame arrived, or
 * the server closed it (a guard's timeout, the stop). */
static void early_drop(hp_request *req)
{
    if (req->client_left)
        hp_metrics_cancelled("arriving");
    hp_early_free(req->early);
    req->early = NULL;
}

/* The handler's side: waits for the early decoder (the whole body is in, so it is finishing or done) and
 * takes it over from the request. NULL when there was none. */
hp_early *hp_early_take(hp_request *req)
{
    hp_early *e = req->early;
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
    if (be && be->frame_coming)
        be->frame_coming(be->ctx);
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
    hp_early *e = calloc(1, sizeof(*e));
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
    if (!hp_request_query(req->connection, &e->query) || pthread_create(&e->thread, NULL, early_main, e) != 0) {
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

/* The request's share handed on with the job: from here on the request's completion and the job's
 * finish each let go of it (hp_early_job_done). */
void hp_early_hand_over(hp_request *req, hp_early *e)
{
    atomic_store(&e->refs, 2);
    req->early = e;
    req->early_drop = early_drop_shared;
}

/* The job's share, once its frame is no longer needed (finished, or never submitted): waits for the
 * decoder to finish writing, and returns how long after the body's last byte that was. */
double hp_early_job_done(hp_early *e, const struct timespec *body_done)
{
    early_wait_finished(e);
    double ms = fmax(0.0, hp_ms_between(body_done, &e->decoded));
    early_release(e);
    return ms;
}

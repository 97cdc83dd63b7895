/* hdrpostd: start-up and shutdown.
 *
 * Start-up: configuration, then HTTP (so /livez answers and /readyz says 503 while the GPU warms), then
 * the GPU, then every pipeline; only then /readyz 200 and systemd READY=1 (the redis habit: tell the
 * supervisor the truth). Shutdown on SIGTERM or SIGINT: /readyz 503, STOPPING=1, the HTTP drain, the
 * pipeline cache saved, the GPU freed.
 *
 * Exit codes: 0 clean stop, 1 start-up failed, 2 bad configuration, 3 the validation layer reported
 * messages (tests run with --validation and fail on them). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/codecs/encode.h"
#include "api/http/http.h"
#include "api/routes/routes.h"
#include "api/codecs/image.h"
#include "api/http/metrics.h"
#include "common/bigbuf.h"
#include "common/budget.h"
#include "common/cpus.h"
#include "common/error.h"
#include "common/log.h"
#include "daemon/cache_dir.h"
#include "daemon/config.h"
#include "daemon/looks_setup.h"
#include "daemon/notify.h"
#include "daemon/ocio_setup.h"
#include "daemon/worker.h"
#include "daemon/zip_share.h"
#include "pipeline/clock_hold.h"
#include "pipeline/exr_zip_gpu.h"
#include "pipeline/frame_graph.h"
#include "pipeline/gpu.h"
#include "pipeline/host_pool.h"
#include "pipeline/looks.h"

#ifndef HP_VERSION
#define HP_VERSION "unknown"
#endif

enum {
    EXIT_CLEAN = 0,
    EXIT_STARTUP_FAILED = 1,
    EXIT_BAD_CONFIG = 2,
    EXIT_VALIDATION_MESSAGES = 3,
};

/* The handler only records the signal; main acts on it (async-signal-safety allows nothing more). */
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int signo) { g_stop_signal = signo; }

/* SIGHUP, which a terminal's hang-up or an operator's `kill -HUP` sends and whose default action would end
 * the process: settings are read once, at start, so nothing is reloaded; the daemon logs a line of its
 * state instead (hup_report) and goes on serving. */
static volatile sig_atomic_t g_hup;

static void on_hup(int signo) { (void)signo; g_hup = 1; }

/* SIGTERM and SIGINT stay blocked in every thread but while main sleeps in sigsuspend(): the threads
 * libmicrohttpd and the Vulkan driver start inherit the mask, so the signal always lands in main and
 * cannot slip in between the flag test and the sleep. wait_mask is the mask to sleep with. */
static void install_signal_handlers(sigset_t *wait_mask)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, wait_mask);
    sigdelset(wait_mask, SIGTERM);
    sigdelset(wait_mask, SIGINT);
    sigdelset(wait_mask, SIGHUP);

    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
    /* A client that hangs up mid-response must cost an EPIPE, not the process. */
    signal(SIGPIPE, SIG_IGN);
}

/* A stop asked for during start-up is still blocked, so it shows as pending, not in the flag. */
static bool stop_requested(void)
{
    sigset_t pending;
    sigpending(&pending);
    return g_stop_signal || sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT);
}

/* The HTTP backend: the worker and the device behind function pointers (api/ knows no thread or device). */
typedef struct backend_ctx {
    hp_worker *worker;
    hp_gpu *gpu;
    hp_host_pool *host_pool;
    hp_clock_hold *clock_hold;   /* NULL: gpu_clock_hold off, or a CPU device */
    hp_exr_zip_gpu *zip;         /* NULL: exr_zip_decoder cpu, or auto on a device that needs slices */
    int zip_mode;                /* HP_EXR_ZIP_DECODER_* */
    pthread_mutex_t share_lock;   /* over share: zip_route runs on every early decoding thread */
    hp_zip_share share;           /* exr_zip_gpu_share */
    _Atomic unsigned zip_runs;    /* every run so far, for test_lose_device_in_decode */
    unsigned test_lose_in_decode;
} backend_ctx;

/* The worker's GPU thread found the device lost. Nothing runs on it again and this daemon does not make a
 * new one: out of rotation (/readyz 503) and /livez 503, so that a supervisor restarts the process. */
static void on_device_lost(void *ctx)
{
    /* Not over a drain: it is 503 already, and its replies close their connections. */
    if (!hp_http_advance_state(ctx, HP_SERVICE_READY, HP_SERVICE_DEVICE_LOST))
        hp_http_advance_state(ctx, HP_SERVICE_STARTING, HP_SERVICE_DEVICE_LOST);
}

static bool submit_job(void *ctx, struct hp_job *job) { return hp_worker_submit(((backend_ctx *)ctx)->worker, job); }
static bool cancel_job(void *ctx, struct hp_job *job) { return hp_worker_cancel(((backend_ctx *)ctx)->worker, job); }
static void frame_coming(void *ctx) { hp_worker_frame_coming(((backend_ctx *)ctx)->worker); }
static unsigned queue_depth(void *ctx) { return hp_worker_queue_depth(((backend_ctx *)ctx)->worker); }
static unsigned queue_capacity(void *ctx) { return hp_worker_queue_capacity(((backend_ctx *)ctx)->worker); }

/* Whether a frame auto would split goes whole to the GPU instead (daemon/zip_share.h), from what the GPU
 * thread has waited for so far and the process's CPU time; the times are read under the lock, so that each
 * sample is no older than the one before it. */
static bool share_takes(backend_ctx *b)
{
    if (b->share.cfg.fixed == 0)
        return false;
    pthread_mutex_lock(&b->share_lock);
    hp_gpu_thread_time t = {0};
    struct timespec now = {0}, cpu = {0};
    if (b->share.cfg.fixed < 0) { /* a fixed share reads no times */
        hp_worker_gpu_thread_time(b->worker, &t);
        clock_gettime(CLOCK_MONOTONIC, &now);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    }
    hp_zip_share_sample sample = {.decode_wait = t.decode_wait,
                                  .busy = t.decode_wait + t.gpu_wait + t.encoder_wait + t.work,
                                  .cpu = (double)cpu.tv_sec + (double)cpu.tv_nsec * 1e-9};
    bool gpu = hp_zip_share_take(&b->share, (double)now.tv_sec + (double)now.tv_nsec * 1e-9, sample);
    pthread_mutex_unlock(&b->share_lock);
    return gpu;
}

/* exr_zip_decoder (daemon/config.h). auto: a frame alone is decoded on the CPU as it arrives (the shortest
 * answer: its rows are uploaded as they are decoded); a frame that arrives while others are decoding goes
 * whole to the GPU by default (exr_zip_gpu_share 1, below), else is split: inflated on the CPU as it arrives,
 * and EXR's predictor, byte split and planes undone on the GPU (15% of the decoder's CPU a 4K frame with 16
 * clients; 30% of one thread's at 8K).
 * The whole inflate on the GPU cost a chunk's serial chain per workgroup, tens of milliseconds of SMs a
 * frame, which the frame graph's passes then waited for. Side by side on the H200 with 16 clients
 * (docs/BENCHMARKS.md): the CPU alone 78.5 and 81.7 frames/s; split when busy 108.8 and
 * 100.5; the same with up to one frame's inflate on the GPU 84.6 and 83.5, two 78.1; split for every frame
 * 90.3, but one client then waits 2.3 ms more (19.7 ms p50 against 17.4). Those whole inflates were the
 * serial loop's. With the wide inflate, a share of the frames auto would split goes whole to the GPU
 * instead (exr_zip_gpu_share, daemon/zip_share.h): up to one frame in flight took so many that the GPU
 * thread waited on the GPU (96.9-99.4 frames/s against 105.9 and 108.7), while a share kept where the
 * thread waits for decoding frames 15% of its time served 107-111 against 94-98 for the split alone on a
 * slow host (the pool then keeping up), side by side. Since two batches at once and the PNG encoder's faster
 * deflate, every busy frame on the GPU served the most with the fewest cores (docs/BENCHMARKS.md, "Every busy
 * frame on the GPU"): the share's default is 1. Asked only for frames the GPU's path takes. */
static hp_exr_zip_decoded zip_route(void *ctx)
{
    backend_ctx *b = ctx;
    if (!b->zip)
        return HP_EXR_ZIP_ON_CPU;
    switch (b->zip_mode) {
    case HP_EXR_ZIP_DECODER_GPU:
        return HP_EXR_ZIP_ON_GPU;
    case HP_EXR_ZIP_DECODER_SPLIT:
        return HP_EXR_ZIP_SPLIT;
    default:
        if (hp_image_frames_decoding() == 0)
            return HP_EXR_ZIP_ON_CPU;
        return share_takes(b) ? HP_EXR_ZIP_ON_GPU : HP_EXR_ZIP_SPLIT;
    }
}

/* A decoding run lost the device or timed out: its frame's blocks may still be written by the GPU, whoever
 * holds them now (the early decoder, the handler, a queued job). The pool takes none back from here on, and
 * the daemon leaves the rotation as for a frame graph's loss. */
static void zip_device_lost(backend_ctx *b, const char *why)
{
    hp_host_pool_abandon(b->host_pool);
    hp_worker_device_lost(b->worker, why);
}

/* A frame's decoding run on the GPU: the whole inflate (HP_EXR_ZIP_ON_GPU) or the split's finish, its GPU
 * time counted and a lost device handled; test_lose_device_in_decode reports the Nth run as lost once it has
 * run. */
static hp_code zip_gpu_run(void *ctx, hp_exr_zip_decoded route, const hp_exr_zip_frame *frame,
                           const hp_buffer *input, const hp_buffer *output, hp_err *err)
{
    backend_ctx *b = ctx;
    double ms = 0;
    hp_code code = route == HP_EXR_ZIP_ON_GPU ? hp_exr_zip_gpu_run(b->zip, frame, input, output, &ms, err)
                                              : hp_exr_zip_gpu_finish(b->zip, frame, input, output, &ms, err);
    if (b->test_lose_in_decode && atomic_fetch_add(&b->zip_runs, 1) + 1 == b->test_lose_in_decode)
        code = hp_fail(err, HP_ERR_DEVICE_LOST, "test_lose_device_in_decode = %u: this frame's decoding run is "
                       "reported as a lost device", b->test_lose_in_decode);
    hp_metrics_exr_zip_gpu_time(ms);
    if (code == HP_ERR_DEVICE_LOST)
        zip_device_lost(b, err->message);
    return code;
}

static hp_code zip_gpu_upload(void *ctx, const hp_buffer *host, const hp_buffer *output, size_t bytes, hp_err *err)
{
    backend_ctx *b = ctx;
    hp_code code = hp_exr_zip_gpu_upload(b->zip, host, output, bytes, err);
    if (code == HP_ERR_DEVICE_LOST)
        zip_device_lost(b, err->message);
    return code;
}

static void report(void *ctx, hp_gpu_report *out)
{
    backend_ctx *b = ctx;
    hp_gpu_info_copy(b->gpu, &out->info);
    hp_gpu_memory_report(b->gpu, &out->memory);
    out->queue_depth = hp_worker_queue_depth(b->worker);
    out->queue_capacity = hp_worker_queue_capacity(b->worker);
    out->in_flight = hp_worker_in_flight(b->worker);
    hp_worker_graph_usage(b->worker, &out->frame_sizes_kept, &out->frame_graph_bytes);
    unsigned blocks = 0;
    size_t kept = 0;
    if (b->host_pool)
        hp_host_pool_usage(b->host_pool, &blocks, &kept);
    out->host_blocks_out = blocks;
    out->host_kept_bytes = kept;
    if (b->host_pool) {
        hp_host_pool_counts churn;
        hp_host_pool_counts_get(b->host_pool, &churn);
        out->host_kept_device_bytes = churn.kept_device_bytes;
        out->host_blocks_made = churn.made;
        out->host_blocks_freed = churn.freed;
        out->host_make_seconds = churn.make_seconds;
        out->host_blocks_made_ahead = churn.made_ahead;
        out->host_make_ahead_seconds = churn.make_ahead_seconds;
    }
    hp_gpu_thread_time t;
    hp_worker_gpu_thread_time(b->worker, &t);
    out->gpu_thread_idle_s = t.idle;
    out->gpu_thread_decode_wait_s = t.decode_wait;
    out->gpu_thread_gpu_wait_s = t.gpu_wait;
    out->gpu_thread_encoder_wait_s = t.encoder_wait;
    out->gpu_thread_work_s = t.work;
    if (b->zip) {
        out->has_zip_batches = true;
        hp_exr_zip_gpu_batch_stats(b->zip, &out->zip_batches);
    }
    out->clock_hold = hp_worker_holds_clocks(b->worker);
    if (b->clock_hold) {
        hp_clock_hold_counts c;
        hp_clock_hold_counts_get(b->clock_hold, &c);
        out->clock_holds = c.holds;
        out->clock_hold_seconds = c.gpu_seconds;
    }
}

/* The holds of the GPU's clocks while frames come (gpu_clock_hold, pipeline/clock_hold.h): auto holds them
 * on a discrete GPU, where they were measured; not on a CPU device (lavapipe), where a hold would only take
 * a core, nor on an integrated GPU, whose clocks share the package's power with the cores that decode the
 * frame. NULL: none. */
static hp_clock_hold *clock_hold_for(const hp_config *config, hp_gpu *gpu)
{
    bool discrete = hp_gpu_get_info(gpu)->device_type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    if (config->gpu_clock_hold == HP_OFF || (config->gpu_clock_hold == HP_AUTO && !discrete)) {
        hp_info("gpu_clock_hold: the GPU's clocks are left to the driver between frames%s",
                config->gpu_clock_hold == HP_OFF ? "" : " (not a discrete GPU)");
        return NULL;
    }
    hp_err err = {0};
    hp_clock_hold *hold = NULL;
    if (hp_clock_hold_create(gpu, &hold, &err) != HP_OK) {
        hp_warn("gpu_clock_hold: the GPU's clocks are left to the driver: %s", err.message);
        return NULL;
    }
    hp_info("gpu_clock_hold: the GPU is kept busy while frames are on their way, so that its clocks stay up");
    return hold;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void notify(const char *state)
{
    int r = hp_notify(state);
    if (r < 0)
        hp_warn("systemd: cannot send %s to NOTIFY_SOCKET: %s", state, strerror(-r));
    else if (r > 0)
        hp_debug("systemd: sent %s", state);
}

/* mkdir -p of the cache file's directory: /var/cache/hdrpostd may not exist on a fresh host unless the
 * unit's CacheDirectory= made it, nor ~/.cache for a new user. Mode 0700, as the XDG Base Directory
 * Specification asks of directories a program makes under its base directories: the cache is the daemon's. */
static int make_parent_dirs(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
        return ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return errno;
    return 0;
}

/* --- Warm-up (the warm_frame setting) ----------------------------------------------------------------- *
 * The first request of a frame size took 30-35 ms longer than the rest on the GPU host: its body's pages
 * faulted in as they were written, its decoded frame and image took fresh mapped blocks of the host pool,
 * and the frame graph made the size's device buffers. Two black RGBA16F frames of the size (what a
 * half-float EXR decodes to: render farms' usual; a float32 frame of the size still makes its own
 * buffers) are prepared, then queued together, so the GPU thread holds both at once (one read back as
 * Y'CbCr, the default lossy WebP's, one as RGBA8, PNG's) and the pool keeps two frames' and two images'
 * blocks for the two frames in flight; and two body buffers are written once and kept (common/bigbuf.h
 * hands a kept buffer to a request asking between half its size and all of it): width * height * 4 bytes
 * for compressed half-float EXRs (2 to 4 bytes a pixel: ZIP and PIZ renders are about 3.4), width *
 * height * 8 plus 1 MiB for uncompressed ones. */

typedef struct warm_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned done;
    hp_code code;
    hp_err err;
} warm_wait;

static void warm_failed(warm_wait *w, hp_code code, const hp_err *err)
{
    pthread_mutex_lock(&w->lock);
    if (w->code == HP_OK) {
        w->code = code;
        w->err = *err;
    }
    pthread_mutex_unlock(&w->lock);
}

/* The job's host blocks are released by warm_up once every warm frame has finished: a block released
 * here could be taken again by the next frame's image, and the pool would keep one image block, not the
 * two that two frames in flight need (it did, on a loaded machine). */
static void warm_finish(hp_job *job)
{
    warm_wait *w = job->user;
    if (job->code != HP_OK)
        warm_failed(w, job->code, &job->err);
    pthread_mutex_lock(&w->lock);
    w->done++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static void warm_wait_for(warm_wait *w, unsigned done)
{
    pthread_mutex_lock(&w->lock);
    while (w->done < done)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

static void warm_body_buffer(size_t bytes)
{
    void *p = hp_bigbuf_get(bytes);
    if (p) {
        memset(p, 0, bytes);
        hp_bigbuf_put(p);
    }
}

/* A warm-up that fails is logged and skipped: the daemon serves as it would have without it. */
static void warm_up(hp_worker *worker, hp_host_pool *pool, uint32_t width, uint32_t height)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t bytes = (size_t)width * height * hp_pixel_format_size(HP_PIXEL_RGBA16F);
    enum { FRAMES = 2 };
    hp_job jobs[FRAMES];
    warm_wait w = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    unsigned prepared = 0, submitted = 0;
    for (; prepared < FRAMES; prepared++) {
        hp_job *job = &jobs[prepared];
        *job = (hp_job){.desc = {.width = width, .height = height, .format = HP_PIXEL_RGBA16F},
                        .finish = warm_finish, .user = &w};
        if (!hp_host_mem_get(pool, HP_MEM_UPLOAD, bytes, &job->pixels)) {
            hp_err e = {0};
            snprintf(e.message, sizeof(e.message), "no host memory for a %ux%u frame", width, height);
            warm_failed(&w, HP_ERR_OUT_OF_MEMORY, &e);
            break;
        }
        memset(job->pixels.ptr, 0, bytes);
        hp_frame_params_defaults(&job->params);
        job->params.yuv420 = prepared == 0;
        clock_gettime(CLOCK_MONOTONIC, &job->deadline);
        job->deadline.tv_sec += 3600;
    }
    for (; submitted < prepared; submitted++) {
        if (hp_worker_submit(worker, &jobs[submitted]))
            continue;
        if (submitted == 0)
            break;
        /* A queue of one (queue_depth 1) takes the second frame once the first has left it. */
        warm_wait_for(&w, submitted);
        if (!hp_worker_submit(worker, &jobs[submitted]))
            break;
    }
    warm_wait_for(&w, submitted);
    for (unsigned k = 0; k < prepared; k++)
        hp_job_release(&jobs[k]);
    warm_body_buffer((size_t)width * height * 4);
    warm_body_buffer(bytes + ((size_t)1 << 20));
    if (w.code != HP_OK || submitted < FRAMES)
        hp_warn("warm-up of %ux%u frames incomplete (%s): the first request of that size may be slower", width,
                height, w.code != HP_OK ? w.err.message : "the queue refused a frame");
    else
        hp_info("warm-up: %ux%u frames ready in %.0f ms", width, height, ms_since(&t0));
}

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* The pipeline_cache setting as a path: NULL for none ("", or "auto" where no convention applies). */
static const char *pipeline_cache_path(const char *setting, char *buf, size_t len)
{
    if (strcmp(setting, "auto") != 0)
        return setting[0] ? setting : NULL;
    if (hp_cache_dir_pipeline_path(env_lookup, geteuid() == 0, buf, len))
        return buf;
    hp_warn("pipeline cache: none (pipeline_cache is auto, and neither CACHE_DIRECTORY, XDG_CACHE_HOME nor HOME "
            "is set): every start compiles its pipelines");
    return NULL;
}

/* A cache that cannot be written costs the next start its warm-up time, not this stop its exit code. */
static void save_pipeline_cache(hp_gpu *gpu, const char *path)
{
    int e = make_parent_dirs(path);
    if (e) {
        hp_warn("pipeline cache %s not saved: cannot create its directory: %s", path, strerror(e));
        return;
    }
    hp_err err = {0};
    if (hp_gpu_save_pipeline_cache(gpu, &err) != HP_OK)
        hp_warn("pipeline cache %s not saved: %s: %s", path, hp_code_name(err.code), err.message);
}

/* max_inflight_mb, or half of what the process may use (its cgroup's memory limit, else the machine's):
 * the other half is the driver's, the warm pools' and the encoders'. */
static uint64_t inflight_budget(const hp_config *config)
{
    if (config->max_inflight_mb)
        return (uint64_t)config->max_inflight_mb << 20;
    return hp_memory_limit() / 2;
}

/* The largest device-local heap's size (0: none reported). */
static uint64_t largest_device_heap(hp_gpu *gpu)
{
    hp_gpu_memory m;
    hp_gpu_memory_report(gpu, &m);
    uint64_t heap = 0;
    for (uint32_t i = 0; i < m.heap_count; i++)
        if (m.heaps[i].device_local && m.heaps[i].size > heap)
            heap = m.heaps[i].size;
    return heap;
}

/* Mapped memory the host pool keeps between requests for frames and images (pipeline/host_pool.h): a
 * quarter of what requests in flight may hold, at least 1 GiB (the former fixed limit), and of device blocks
 * (gpu given) no more than an eighth of the largest device-local heap. Kept blocks are outside the budget
 * (beyond these limits the recent peak, within the budget: pool_peak_device_bytes):
 * the half of the memory it leaves is the driver's, the warm pools' (these) and the encoders'. With 16
 * clients of 4K frames a frame holds some 270 MB of blocks (a device block of 133 MB, its chunks', its
 * image's), and 1 GiB of each made 4-13 blocks a second, 2.4 to 5.4 thread-seconds of pinning in 10 s,
 * partly on the GPU thread (docs/BENCHMARKS.md). A block is made only when none kept fits. */
static size_t pool_keep_bytes(uint64_t budget, hp_gpu *gpu)
{
    uint64_t keep = budget / 4 > (1ull << 30) ? budget / 4 : 1ull << 30, heap = gpu ? largest_device_heap(gpu) : 0;
    return (size_t)(heap && heap / 8 < keep ? heap / 8 : keep);
}

/* Beyond the keep limits the pool keeps what the recent peak held (hp_host_pool_keep_recent_peak), up to what
 * requests in flight may hold (the budget) for host blocks, and for device blocks that or a quarter of the
 * largest device-local heap, whichever is less (the frame graph and the encoders need the rest). */
static size_t pool_peak_device_bytes(uint64_t budget, hp_gpu *gpu)
{
    uint64_t heap = largest_device_heap(gpu); /* 0 (none reported, which Vulkan does not allow): no peak kept */
    return (size_t)(heap / 4 < budget ? heap / 4 : budget);
}

/* SIGHUP's line: what an operator asks a daemon that seems stuck. */
static void hup_report(hp_http *http, const hp_budget *budget)
{
    const hp_http_backend *be = hp_http_get_backend(http);
    hp_gpu_report r = {0};
    if (be->report)
        be->report(be->ctx, &r);
    hp_info("received SIGHUP: settings are read at start only, nothing reloaded; %s, %u of %u frame(s) queued, %u "
            "on the GPU, %.1f of %.1f MiB held by requests in flight", hp_service_state_name(hp_http_get_state(http)),
            r.queue_depth, r.queue_capacity, r.in_flight, (double)hp_budget_used(budget) / (1 << 20),
            (double)budget->limit / (1 << 20));
}

/* --- The daemon's life: start in phases, serve until a signal, stop in the reverse order --------------------- */

/* Everything run() makes; a phase that fails leaves what it made here for shut_down. */
typedef struct daemon_parts {
    const hp_config *config;
    struct timespec started;
    const char *cache_path; /* NULL: no pipeline cache */
    hp_budget *budget;      /* static: a frame finishing after the HTTP server's drain gives back to it */
    backend_ctx *bctx;      /* static: the HTTP server holds a pointer to it */
    hp_http *http;
    hp_gpu *gpu;
    hp_frame_graph *graph;
    hp_worker *worker;
    hp_host_pool *host_pool;
    hp_exr_zip_gpu *zip;
    hp_clock_hold *clock_hold;
    hp_ocio_config *ocio_config;
    hp_ocio_stage *ocio_stage;
} daemon_parts;

/* A studio's OCIO config and its looks first: one OCIO cannot use stops the start before anything listens. */
static hp_code start_colour(daemon_parts *d, hp_err *err)
{
    hp_code code = hp_daemon_ocio_load(d->config->ocio_config, &d->ocio_config, err);
    if (code != HP_OK)
        return code;
    if (!d->ocio_config && d->config->ocio_warm[0])
        hp_warn("ocio_warm is set but there is no OCIO config (ocio_config, OCIO): nothing to warm");
    hp_params_use_ocio(d->ocio_config);
    return hp_daemon_studio_looks(d->config->studio_looks, err);
}

/* The port: it accepts from now on, /readyz answering 503 until the pipelines are warm. */
static hp_code start_http(daemon_parts *d, hp_err *err)
{
    const hp_config *config = d->config;
    hp_http_params p = HP_HTTP_PARAMS_DEFAULTS;
    p.listen = config->listen;
    p.threads = (unsigned)config->http_threads;
    p.drain_timeout_s = config->shutdown_timeout_s;
    p.max_body_bytes = (uint64_t)config->max_body_mb << 20;
    p.auth_token = config->auth_token;
    p.metrics_open = config->metrics_open;
    p.console = config->console_enabled;
    p.version = HP_VERSION;
    p.tls_cert = config->tls_cert;
    p.tls_key = config->tls_key;
    p.probe_listen = config->probe_listen;
    p.allowed_origins = config->allowed_origins;
    p.trusted_proxies = config->trusted_proxies;
    p.max_connections = (unsigned)config->max_connections;
    p.max_connections_per_ip = (unsigned)config->max_connections_per_ip;
    p.header_timeout_s = config->header_timeout_s;
    p.min_body_rate = (uint64_t)config->min_body_rate_kbs << 10;
    p.routes = hp_api_routes;
    p.route_count = hp_api_route_count;
    hp_budget_init(d->budget, inflight_budget(config));
    p.budget = d->budget;
    hp_code code = hp_http_create(&p, &d->http, err);
    if (code != HP_OK)
        return code;
    if (hp_http_probe_address(d->http))
        hp_info("http: probes (/livez, /readyz) also on %s", hp_http_probe_address(d->http));
    hp_info("http: requests in flight may hold %.0f MiB (max_inflight_mb%s)", (double)d->budget->limit / (1 << 20),
            config->max_inflight_mb ? "" : ": half the memory limit");
    hp_info("http: listening on %s%s with %d thread(s); /readyz is 503 until the pipelines are warm",
            hp_http_is_tls(d->http) ? "https://" : "", hp_http_address(d->http), config->http_threads);
    return HP_OK;
}

/* The device. It logs the devices it saw, the one it chose and why, and what became of the cache. */
static hp_code start_gpu(daemon_parts *d, hp_err *err)
{
    hp_gpu_config c = HP_GPU_CONFIG_DEFAULTS;
    c.device = d->config->device[0] ? d->config->device : NULL;
    c.pipeline_cache_path = d->cache_path;
    c.validation = d->config->validation;
    return hp_gpu_create(&c, &d->gpu, err);
}

/* The frame graph's pipelines, the host memory frames go through, the clock hold and the worker's threads. */
static hp_code start_worker(daemon_parts *d, hp_err *err)
{
    const hp_config *config = d->config;
    hp_code code = hp_frame_graph_create(d->gpu, &d->graph, err);
    if (code != HP_OK)
        return code;
    hp_encode_set_png_threads((unsigned)config->png_threads);
    if ((code = hp_host_pool_create(d->gpu, pool_keep_bytes(d->budget->limit, NULL), &d->host_pool, err)) != HP_OK)
        return code;
    hp_host_pool_keep_device(d->host_pool, pool_keep_bytes(d->budget->limit, d->gpu));
    hp_host_pool_keep_recent_peak(d->host_pool, (size_t)d->budget->limit, pool_peak_device_bytes(d->budget->limit, d->gpu));
    hp_host_pool_make_ahead(d->host_pool, true);
    d->clock_hold = clock_hold_for(config, d->gpu);
    hp_worker_config wc = {.queue_depth = (unsigned)config->queue_depth,
                           .finish_threads = (unsigned)config->encode_threads,
                           .test_gpu_delay_ms = (unsigned)config->test_gpu_delay_ms,
                           .test_lose_device_after = (unsigned)config->test_lose_device_after,
                           .host_pool = d->host_pool,
                           .clock_hold = d->clock_hold,
                           .budget = d->budget};
    if ((code = hp_worker_create(d->graph, &wc, &d->worker, err)) != HP_OK)
        return code;
    hp_worker_set_on_device_lost(d->worker, on_device_lost, d->http);
    *d->bctx = (backend_ctx){.worker = d->worker, .gpu = d->gpu, .host_pool = d->host_pool,
                             .clock_hold = d->clock_hold, .zip_mode = config->exr_zip_decoder,
                             .test_lose_in_decode = (unsigned)config->test_lose_device_in_decode};
    pthread_mutex_init(&d->bctx->share_lock, NULL);
    return HP_OK;
}

/* EXR ZIP frames on the GPU (exr_zip_decoder): gpu and split on any device, with the inflate in slices where it
 * needs them (lavapipe: slow, for tests); auto only where the decoder's passes run beside the frame graph's on a
 * GPU. */
static hp_code start_exr_zip(daemon_parts *d, hp_err *err)
{
    const hp_config *config = d->config;
    if (config->exr_zip_decoder == HP_EXR_ZIP_DECODER_CPU)
        return HP_OK;
    hp_code code = hp_exr_zip_gpu_create(d->gpu, 0, &d->zip, err);
    if (code != HP_OK)
        return code;
    if (config->exr_zip_decoder == HP_EXR_ZIP_DECODER_AUTO &&
        (hp_exr_zip_gpu_sliced(d->zip) || !hp_gpu_decode_runs_beside(d->gpu))) {
        hp_info("exr_zip_decoder auto: EXR ZIP chunks are inflated on the CPU (%s: %s)",
                hp_gpu_get_info(d->gpu)->device_name, hp_exr_zip_gpu_sliced(d->zip)
                ? "a CPU device, whose passes would run on the same cores"
                : "no compute queue of another family");
        hp_exr_zip_gpu_destroy(&d->zip);
    }
    /* On a GPU the whole inflate is the wide one, 2.6 times faster than the serial loop; lavapipe keeps the
     * serial loop's slices (the wide inflate's work is capped there, for tests). */
    bool sliced = d->zip && hp_exr_zip_gpu_sliced(d->zip);
    bool wide = d->zip && !sliced && hp_exr_zip_gpu_set_wide(d->zip, true);
    if (d->zip && !sliced && !wide)
        hp_info("exr_zip_decoder: the wide inflate needs storageBuffer8BitAccess, shaderInt8, a workgroup of %u and %u "
                "bytes of shared memory, which %s lacks or whose driver refused it; the serial one it is",
                hp_exr_zip_gpu_wide_lanes(), hp_exr_zip_gpu_wide_shared_bytes(), hp_gpu_get_info(d->gpu)->device_name);
    if (wide && config->exr_zip_wide_chunks > 0)
        hp_exr_zip_gpu_batch_tune(d->zip, (uint32_t)config->exr_zip_wide_chunks);
    if (d->zip) {
        uint32_t lanes = hp_exr_zip_gpu_batches_in_flight(d->zip, (uint32_t)config->exr_zip_gpu_batches);
        if (lanes < (uint32_t)config->exr_zip_gpu_batches)
            hp_info("exr_zip_gpu_batches %d: %s has %u decode queue(s), so %u batch(es) at once",
                    config->exr_zip_gpu_batches, hp_gpu_get_info(d->gpu)->device_name, lanes, lanes);
    }
    d->bctx->zip = d->zip;
    /* The share of busy frames inflated whole on the GPU: only with auto and the wide inflate (whole frames by
     * the serial loop alone, a chunk's chain each, slowed the node, docs/BENCHMARKS.md; now the share's frames
     * that arrive together go as one batch, the serial loop's past exr_zip_wide_chunks). */
    hp_zip_share_config share = HP_ZIP_SHARE_DEFAULTS;
    share.fixed = config->exr_zip_gpu_share;
    share.cores = hp_usable_cpus();
    bool shares = d->zip && wide && config->exr_zip_decoder == HP_EXR_ZIP_DECODER_AUTO;
    if (!shares)
        share.fixed = 0;
    hp_zip_share_init(&d->bctx->share, &share);
    if (shares)
        hp_info("exr_zip_decoder auto: frames that arrive while others decode inflated whole on the GPU, %s "
                "(exr_zip_gpu_share), the rest split; a frame alone on the CPU",
                share.fixed < 0 ? "an adaptive share" : share.fixed >= 1 ? "every one" : "a fixed share");
    else if (config->exr_zip_gpu_share != 0 && config->exr_zip_decoder == HP_EXR_ZIP_DECODER_AUTO)
        hp_info("exr_zip_gpu_share: no share on this device (no wide inflate, or auto is the CPU's)");
    return HP_OK;
}

/* The OCIO stage (its warm views made now) and what the HTTP server hands its frames to. */
static hp_code start_backend(daemon_parts *d, hp_err *err)
{
    const hp_config *config = d->config;
    hp_code code;
    if (d->ocio_config &&
        ((code = hp_ocio_stage_create(d->gpu, d->ocio_config, (uint32_t)config->ocio_cache, &d->ocio_stage, err)) !=
             HP_OK ||
         (code = hp_daemon_ocio_warm(d->ocio_stage, config->ocio_warm, err)) != HP_OK))
        return code;
    hp_http_backend backend = {
        .ctx = d->bctx,
        .ocio = d->ocio_stage,
        .submit = submit_job,
        .cancel = cancel_job,
        .frame_coming = frame_coming,
        .queue_depth = queue_depth,
        .queue_capacity = queue_capacity,
        .report = report,
        .host_pool = d->host_pool,
        .request_timeout_s = config->request_timeout_s,
        .decode_threads = config->decode_threads > 0 ? (unsigned)config->decode_threads : hp_usable_cpus(),
        .max_width = (uint32_t)config->max_width,
        .max_height = (uint32_t)config->max_height,
        .max_pixels = (uint64_t)(config->max_megapixels * 1e6),
        .zip_route = zip_route,
        .zip_gpu_run = zip_gpu_run,
        .zip_gpu_upload = zip_gpu_upload,
    };
    hp_http_set_backend(d->http, &backend);
    return HP_OK;
}

/* The usual frame size warmed (warm_frame), then ready: /readyz 200 and systemd's READY=1. */
static void warm_and_ready(daemon_parts *d)
{
    const hp_config *config = d->config;
    const hp_gpu_info *info = hp_gpu_get_info(d->gpu);
    uint32_t w, h;
    if (hp_config_warm_size(config->warm_frame, info->device_type != VK_PHYSICAL_DEVICE_TYPE_CPU, &w, &h) && w > 0 &&
        !stop_requested()) {
        if (w > (uint32_t)config->max_width || h > (uint32_t)config->max_height ||
            (uint64_t)w * h > (uint64_t)(config->max_megapixels * 1e6))
            hp_info("warm-up of %ux%u frames skipped: the size limits (max_width, max_height, max_megapixels) "
                    "refuse frames of that size", w, h);
        else
            warm_up(d->worker, d->host_pool, w, h);
    }
    if (config->test_fail_host_memory && d->host_pool) {
        hp_warn("test_fail_host_memory = %d: host memory for frames fails from now on (%s; a setting for tests "
                "only)", config->test_fail_host_memory, config->test_fail_host_memory == 1 ? "pinned blocks"
                : "pinned blocks and ordinary memory");
        hp_host_pool_test_fail(d->host_pool, config->test_fail_host_memory);
    }
    /* Not over a device lost during the warm-up (on_device_lost): that state stays. */
    if (!hp_http_advance_state(d->http, HP_SERVICE_STARTING, HP_SERVICE_READY)) {
        hp_error("not ready after the warm-up: %s", hp_service_state_name(hp_http_get_state(d->http)));
        return;
    }
    hp_gpu_info now;
    hp_gpu_info_copy(d->gpu, &now);
    hp_info("ready in %.0f ms: device \"%s\", pipeline cache %s, %u pipeline(s), %u from cache",
            ms_since(&d->started), now.device_name, hp_cache_state_name(now.cache_state), now.pipelines_created,
            now.pipelines_from_cache);
    notify("READY=1");
}

/* Every phase in order. A stop signal during start-up skips what is left (the serving loop then returns at
 * once): only a failure is an error. */
static hp_code start(daemon_parts *d, hp_err *err)
{
    hp_code code;
    if ((code = start_colour(d, err)) != HP_OK || (code = start_http(d, err)) != HP_OK)
        return code;
    if (stop_requested() || (code = start_gpu(d, err)) != HP_OK || stop_requested())
        return code;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if ((code = start_worker(d, err)) != HP_OK || (code = start_exr_zip(d, err)) != HP_OK ||
        (code = start_backend(d, err)) != HP_OK)
        return code;
    warm_and_ready(d);
    hp_debug("pipelines warm in %.0f ms", ms_since(&t0));
    return HP_OK;
}

/* Sleeps until a stop signal (one already pending, sent during start-up, returns at once), then drains. */
static void serve(daemon_parts *d, const sigset_t *wait_mask)
{
    while (!g_stop_signal) {
        sigsuspend(wait_mask);
        if (g_hup) {
            g_hup = 0;
            hup_report(d->http, d->budget);
        }
    }
    /* The state before the line that says so: whoever reads the log and then asks /readyz (the drain test does)
     * must find it draining (a CI run once got 200 in between). */
    hp_http_set_state(d->http, HP_SERVICE_DRAINING);
    hp_info("received SIG%s: draining (finishing requests in flight, up to %g s)", sigabbrev_np(g_stop_signal),
            d->config->shutdown_timeout_s);
    notify("STOPPING=1");
}

/* Everything made, in the reverse order; the exit code, which the validation layer's messages can still
 * change. */
static int shut_down(daemon_parts *d, int exit_code)
{
    /* HTTP first: its drain waits for the requests in flight, whose jobs the worker is still running. The worker
     * may still finish frames after it (and find the device lost): it is told of nobody any more. */
    if (d->worker)
        hp_worker_set_on_device_lost(d->worker, NULL, NULL);
    hp_http_destroy(&d->http);
    const hp_zip_share *share = &d->bctx->share;
    if (share->frames)
        hp_info("exr_zip_gpu_share: %lu of the %lu frames that arrived while others decoded went whole to the GPU "
                "(the share at the end %.3f)", share->gpu_frames, share->frames, share->share);
    hp_worker_destroy(&d->worker);
    if (d->clock_hold) {
        hp_clock_hold_counts c;
        hp_clock_hold_counts_get(d->clock_hold, &c);
        hp_info("gpu_clock_hold: %llu holds kept the GPU busy for %.3f s", (unsigned long long)c.holds,
                c.gpu_seconds);
    }
    hp_clock_hold_destroy(&d->clock_hold);
    hp_host_pool_destroy(&d->host_pool); /* every job is done: every block is back */
    hp_exr_zip_gpu_destroy(&d->zip);
    hp_ocio_stage_destroy(&d->ocio_stage); /* every job is done: no frame holds a program */
    /* Only after a warm-up: a cache saved before it holds no pipelines and would replace a good file. */
    if (d->gpu && d->graph && d->cache_path)
        save_pipeline_cache(d->gpu, d->cache_path);
    hp_frame_graph_destroy(&d->graph);
    hp_gpu_destroy(&d->gpu);
    hp_looks_reset();
    hp_params_use_ocio(NULL);
    hp_ocio_config_free(d->ocio_config);
    /* Counted after the destroys: leaked objects are reported by vkDestroyDevice and vkDestroyInstance. */
    if (d->config->validation && hp_gpu_validation_messages() > 0) {
        hp_error("the validation layer reported %u message(s)", hp_gpu_validation_messages());
        if (exit_code == EXIT_CLEAN)
            exit_code = EXIT_VALIDATION_MESSAGES;
    }
    if (exit_code == EXIT_CLEAN)
        hp_info("stopped");
    return exit_code;
}

static int run(const hp_config *config, const sigset_t *wait_mask)
{
    static backend_ctx bctx;
    static hp_budget budget;
    static char auto_cache[4096];
    daemon_parts d = {.config = config, .budget = &budget, .bctx = &bctx,
                      .cache_path = pipeline_cache_path(config->pipeline_cache, auto_cache, sizeof auto_cache)};
    clock_gettime(CLOCK_MONOTONIC, &d.started);
    hp_err err = {0};
    hp_code code = start(&d, &err);
    if (code != HP_OK) {
        hp_error("start-up failed: %s: %s", hp_code_name(code), err.message);
        return shut_down(&d, EXIT_STARTUP_FAILED);
    }
    serve(&d, wait_mask);
    return shut_down(&d, EXIT_CLEAN);
}

int main(int argc, char **argv)
{
    hp_config config;
    hp_err err = {0};
    switch (hp_config_load(&config, argc, argv, &err)) {
    case HP_CONFIG_HELP:
        hp_config_print_help(stdout, "hdrpostd");
        return EXIT_CLEAN;
    case HP_CONFIG_VERSION:
        printf("hdrpostd %s\n", HP_VERSION);
        return EXIT_CLEAN;
    case HP_CONFIG_LIST_DEVICES: /* for deploy/replicas.py and an operator choosing device= */
        if (hp_gpu_list_devices(stdout, &err) != HP_OK) {
            hp_error("listing the Vulkan devices: %s", err.message);
            return EXIT_STARTUP_FAILED;
        }
        return EXIT_CLEAN;
    case HP_CONFIG_INVALID:
        hp_error("configuration: %s", err.message);
        return EXIT_BAD_CONFIG;
    case HP_CONFIG_RUN:
        break;
    }

    sigset_t wait_mask;
    install_signal_handlers(&wait_mask); /* before any thread exists, so every thread inherits the mask */
    hp_log_set_level((hp_log_level)config.log_level);
    hp_info("hdrpostd %s starting, pid %d", HP_VERSION, (int)getpid());
    hp_config_log(&config);

    int exit_code = run(&config, &wait_mask);
    hp_config_free(&config);
    return exit_code;
}

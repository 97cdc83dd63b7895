/* The job queue, the GPU thread and the finishing pool (daemon/worker.h). */
#include "daemon/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/budget.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/log.h"
#include "pipeline/clock_hold.h"

/* The GPU thread's states (hp_gpu_thread_time). */
enum { STATE_WORK, STATE_IDLE, STATE_DECODE_WAIT, STATE_GPU_WAIT, STATE_ENCODER_WAIT, GPU_THREAD_STATES };

/* A FIFO of jobs with a capacity; both queues below are one of these. */
typedef struct job_fifo {
    hp_job **items;
    unsigned capacity, head, count;
} job_fifo;

static bool fifo_push(job_fifo *f, hp_job *job)
{
    if (f->count == f->capacity)
        return false;
    f->items[(f->head + f->count) % f->capacity] = job;
    f->count++;
    return true;
}

/* Takes job out wherever it is in the FIFO, the others keeping their order; false when it is not there. */
static bool fifo_remove(job_fifo *f, hp_job *job)
{
    unsigned at = 0;
    while (at < f->count && f->items[(f->head + at) % f->capacity] != job)
        at++;
    if (at == f->count)
        return false;
    for (; at + 1 < f->count; at++)
        f->items[(f->head + at) % f->capacity] = f->items[(f->head + at + 1) % f->capacity];
    f->count--;
    return true;
}

/* Ahead of every other job (a cancelled one: nothing to encode, memory to give back). */
static bool fifo_push_front(job_fifo *f, hp_job *job)
{
    if (f->count == f->capacity)
        return false;
    f->head = (f->head + f->capacity - 1) % f->capacity;
    f->items[f->head] = job;
    f->count++;
    return true;
}

static hp_job *fifo_pop(job_fifo *f)
{
    if (f->count == 0)
        return NULL;
    hp_job *job = f->items[f->head];
    f->head = (f->head + 1) % f->capacity;
    f->count--;
    return job;
}

/* The next frame for the GPU: the first one queued that is not waiting for its decoding on the GPU, else the
 * head. A frame inflated on the GPU (api/frames/early_decode.c, pipeline/exr_zip_gpu.h) is handed on while its
 * passes run, tens of milliseconds; at the head it would hold back every frame ready behind it. A frame
 * decoding on the CPU keeps its place: its tail after the last byte is a few milliseconds, and taking
 * others first measured no better (docs/BENCHMARKS.md). */
static hp_job *next_job(job_fifo *f)
{
    for (unsigned at = 0; at < f->count; at++) {
        hp_job *job = f->items[(f->head + at) % f->capacity];
        if (!job->decoding_on_gpu || hp_rows_ready_result(job->rows, NULL, NULL)) { /* on the GPU: rows set */
            if (at == 0)
                return fifo_pop(f);
            fifo_remove(f, job);
            return job;
        }
    }
    return fifo_pop(f);
}

struct hp_worker {
    hp_frame_graph *graph;
    pthread_mutex_t lock;
    pthread_cond_t gpu_wake, pool_wake;
    pthread_cond_t pool_space; /* the finished queue has room again */
    job_fifo waiting;  /* for the GPU */
    job_fifo finished; /* for the pool: room for the waiting ones as well, which a cancel moves here */
    unsigned finished_max; /* what the GPU thread may fill it to (its back-pressure) */
    bool stopping;
    unsigned in_flight; /* on the GPU now (0 to HP_FRAMES_IN_FLIGHT) */
    pthread_t gpu_thread;
    bool gpu_started;
    pthread_t *pool;
    unsigned pool_size, pool_started;
    _Atomic uint32_t graph_sizes;
    _Atomic uint64_t graph_bytes;
    unsigned test_gpu_delay_ms; /* hp_worker_config */
    unsigned test_lose_device_after; /* hp_worker_config */
    unsigned frames_finished;   /* GPU thread only: for test_lose_device_after */
    bool device_lost;           /* GPU thread only: a frame reported it; no frame runs after */
    void (*on_device_lost)(void *ctx); /* under lock: hp_worker_set_on_device_lost */
    void *on_device_lost_ctx;
    hp_host_pool *host_pool;    /* hp_worker_config */
    uint64_t next_trim_ns;      /* GPU thread only: the idle trim's next time (idle_wait); 0 not yet set */
    hp_clock_hold *clock_hold;  /* hp_worker_config; the GPU thread's alone */
    const hp_budget *budget;    /* hp_worker_config */
    _Atomic bool holds_clocks;  /* clock_hold given, no hold failed, the device not lost (any thread reads it) */
    _Atomic uint64_t last_activity_ns; /* a frame coming, queued or finished: idle holds end HOLD_IDLE_NS on */
    /* The GPU thread's time by state (hp_gpu_thread_time): the state it is in and since when (its own),
     * the totals in nanoseconds (read by any thread). */
    int state;
    uint64_t state_since_ns;
    _Atomic uint64_t state_ns[GPU_THREAD_STATES];
};

/* The GPU thread enters a state: the time since the last change goes to the state it leaves. */
static void gpu_thread_enters(hp_worker *w, int state)
{
    uint64_t now = hp_now_ns();
    atomic_fetch_add(&w->state_ns[w->state], now - w->state_since_ns);
    w->state = state;
    w->state_since_ns = now;
}

/* The test delay: nanosleep resumed after a signal (SIGTERM during a drain must not cut it short, or the
 * drain test would see fast frames). */
static void test_gpu_delay(unsigned ms)
{
    if (ms == 0)
        return;
    struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

static bool past(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static void hand_to_pool(hp_worker *w, hp_job *job)
{
    clock_gettime(CLOCK_MONOTONIC, &job->gpu_done_at);
    pthread_mutex_lock(&w->lock);
    /* When encoding is slower than the GPU, the GPU thread waits here for room rather than losing a job:
     * the queue in front of it then fills, and new frames are answered 429. */
    if (w->finished.count >= w->finished_max)
        gpu_thread_enters(w, STATE_ENCODER_WAIT);
    while (w->finished.count >= w->finished_max)
        pthread_cond_wait(&w->pool_space, &w->lock);
    if (w->state == STATE_ENCODER_WAIT)
        gpu_thread_enters(w, STATE_WORK);
    fifo_push(&w->finished, job);
    pthread_cond_signal(&w->pool_wake);
    pthread_mutex_unlock(&w->lock);
}

/* Idle holds end this long after the last frame came, was queued or finished: a body arriving for minutes at
 * min_body_rate, or an answer read slowly, does not keep the GPU at full clocks all that while (the clocks
 * fall over seconds, so little is lost), and neither would memory a request failed to give back. */
#define HOLD_IDLE_NS 2000000000ull

static void activity(hp_worker *w) { atomic_store(&w->last_activity_ns, hp_now_ns()); }

/* Keeps a hold of the clocks in flight (pipeline/clock_hold.h) and sets *until to when to look again; false
 * without holds. A hold that cannot be submitted (a lost device) ends the holding for good: the frame's own
 * submission then finds out what is wrong. */
static bool hold_clocks(hp_worker *w, struct timespec *until)
{
    if (!atomic_load(&w->holds_clocks))
        return false;
    hp_err err = {0};
    if (hp_clock_hold_keep(w->clock_hold, &err) != HP_OK) {
        hp_warn("worker: the GPU's clocks are no longer held: %s", err.message);
        atomic_store(&w->holds_clocks, false);
        return false;
    }
    *until = hp_monotonic_after_ns((uint64_t)(HP_CLOCK_HOLD_MS * 1e6));
    return true;
}

/* Rows [0, want) of a frame still decoding, or its end: while they are missing, with the clocks held and a
 * look at the hold every HP_CLOCK_HOLD_MS; not for a frame the GPU itself decodes, which keeps it busy. */
static uint32_t rows_wait(hp_worker *w, hp_job *job, uint32_t want, bool *finished)
{
    struct timespec now = hp_monotonic_after_ns(0), until;
    uint32_t ready = hp_rows_ready_wait_until(job->rows, want, &now, finished); /* a look: no wait */
    if (*finished || ready >= want)
        return ready;
    bool holding = !job->decoding_on_gpu && hold_clocks(w, &until);
    return hp_rows_ready_wait_until(job->rows, want, holding ? &until : NULL, finished);
}

/* A frame still decoding (job->rows): its final rows are uploaded in parts as they come when the GPU
 * reads them from the job's own memory (upload_parts), then this waits for the end. False when the
 * decoding failed: the job then carries the decoder's code and message. */
static bool wait_decoded(hp_worker *w, hp_job *job, bool upload_parts)
{
    const uint32_t height = job->desc.height;
    const size_t row_bytes = (size_t)job->desc.width * hp_pixel_format_size(job->desc.format);
    /* Parts of an eighth of the frame or more: each is a submission, and they are at most
     * HP_FRAME_UPLOAD_PARTS. */
    const uint32_t step = height / HP_FRAME_UPLOAD_PARTS + 1;
    uint32_t uploaded = 0;
    gpu_thread_enters(w, STATE_DECODE_WAIT); /* the parts' submissions are counted in it: they are short */
    for (bool finished = false; !finished;) {
        /* Without parts (not the pool's memory, or a part refused) only the end is waited for. */
        uint32_t ready = rows_wait(w, job, upload_parts ? uploaded + step : UINT32_MAX, &finished);
        ready = ready < height ? ready : height;
        if (upload_parts && !finished && ready >= uploaded + step) { /* not at each look at a hold */
            hp_err ignored = {0}; /* a part that cannot be submitted goes with the frame's own upload */
            upload_parts = hp_frame_graph_upload_part(w->graph, (size_t)ready * row_bytes, &ignored) == HP_OK;
            uploaded = ready;
        }
    }
    gpu_thread_enters(w, STATE_WORK);
    hp_code code = HP_OK;
    if (!hp_rows_ready_result(job->rows, &code, &job->err))
        code = hp_fail(&job->err, HP_ERR_INTERNAL, "the frame's decoder stopped without finishing");
    if (code == HP_OK)
        return true;
    job->code = code;
    job->decode_failed = true;
    return false;
}

/* Checks the job and submits it to the GPU without waiting: true when it is in flight (*ticket), false
 * when it is finished already (dropped, or failed: job->code says why). */
static bool start_job(hp_worker *w, hp_job *job, uint32_t *ticket)
{
    clock_gettime(CLOCK_MONOTONIC, &job->started_at);
    if (job->client_gone && job->client_gone(job))
        atomic_store(&job->cancelled, true);
    if (atomic_load(&job->cancelled)) {
        job->code = hp_fail(&job->err, HP_ERR_INVALID_ARGUMENT, "the client went away before the frame ran");
        hp_info("worker: dropped a queued frame whose client went away");
        return false;
    }
    if (w->device_lost) {
        job->code = hp_fail(&job->err, HP_ERR_DEVICE_LOST, "the GPU was lost before this frame ran");
        return false;
    }
    if (past(&job->deadline)) {
        job->expired = true;
        job->code = hp_fail(&job->err, HP_ERR_INTERNAL, "the request's deadline passed while it waited in the "
                            "queue (%.0f ms)", hp_ms_between(&job->queued_at, &job->started_at));
        return false;
    }
    test_gpu_delay(w->test_gpu_delay_ms);
    /* The image's memory before the frame is begun: the GPU reads it back straight into a block of the
     * pool, which the encoder then reads (no pool, or none to be had: the graph's own, and a copy). */
    size_t pixels = (size_t)job->desc.width * job->desc.height;
    if (!job->params.analyze_only && w->host_pool) {
        /* A pinned block or nothing: without one the graph's own read-back is used, and copied out after
         * the frame (an ordinary buffer here would only be given back unused). */
        hp_err ignored = {0};
        /* Written by address, so that PNG on the GPU puts its stream there too (hp_frame_graph_image_bytes). */
        job->image.block = hp_host_pool_get(w->host_pool, HP_MEM_READBACK_SHADER,
                                            hp_frame_graph_image_bytes(w->graph, job->desc.width, job->desc.height),
                                            &ignored);
        job->image.ptr = job->image.block ? job->image.block->buf.mapped : NULL;
    }
    hp_frame_host own = {
        .pixels = job->pixels.block ? &job->pixels.block->buf : NULL,
        .depth = job->depth.block ? &job->depth.block->buf : NULL,
        .image = job->image.block ? &job->image.block->buf : NULL,
    };
    void *staging;
    job->code = hp_frame_graph_begin_with(w->graph, &job->desc, &own, &staging, &job->err);
    if (job->code != HP_OK)
        return false;
    if (job->rows && !wait_decoded(w, job, own.pixels != NULL)) {
        hp_frame_graph_abandon(w->graph); /* parts of its upload may still read the frame's memory */
        return false;
    }
    if (!own.pixels) {
        memcpy(staging, job->pixels.ptr, pixels * hp_pixel_format_size(job->desc.format));
        hp_host_mem_put(&job->pixels);
    }
    if (job->depth.ptr && !own.depth) {
        float *depth;
        job->code = hp_frame_graph_depth(w->graph, &depth, &job->err);
        if (job->code != HP_OK) {
            hp_frame_graph_abandon(w->graph);
            return false;
        }
        memcpy(depth, job->depth.ptr, pixels * sizeof(float));
        hp_host_mem_put(&job->depth);
    }
    job->code = hp_frame_graph_submit(w->graph, &job->params, ticket, &job->err);
    if (job->code != HP_OK)
        hp_frame_graph_abandon(w->graph);
    return job->code == HP_OK;
}

/* PNG on the GPU: the table and the compressed bytes, in the job's image block already (the encoder then
 * finishes the file around them where they lie), or out of the graph's memory, which a later frame reuses,
 * into memory of the job's laid out the same way (hp_png_gpu_host_layout: room before and after). */
static void take_png_stream(hp_job *job)
{
    hp_frame_result *r = &job->result;
    hp_png_gpu_host_layout hl = hp_png_gpu_host_layout_for(&r->png_layout);
    if (r->png_in_caller_memory) {
        job->image_size = (size_t)hl.host_bytes;
        return;
    }
    size_t bytes = (size_t)hl.joined_offset + r->png_joined_bytes + HP_PNG_GPU_TAIL_ROOM;
    if (!job->image.ptr || !job->image.block || job->image.block->buf.size < bytes) {
        hp_host_mem_put(&job->image);
        if (!hp_host_mem_get(NULL, HP_MEM_READBACK, bytes, &job->image)) {
            job->code = hp_fail(&job->err, HP_ERR_OUT_OF_MEMORY, "out of host memory for the %zu-byte PNG stream",
                                bytes);
            return;
        }
    }
    uint8_t *dst = job->image.ptr;
    memcpy(dst, r->png_table, (size_t)r->png_layout.table_size);
    memcpy(dst + hl.joined_offset, r->png_joined, r->png_joined_bytes);
    r->png_table = dst;
    r->png_joined = dst + hl.joined_offset;
    job->image_size = bytes;
}

/* Waits for a job in flight and takes its image out of the read-back memory, which a later frame reuses. */
static void finish_job(hp_worker *w, hp_job *job, uint32_t ticket)
{
    gpu_thread_enters(w, STATE_GPU_WAIT);
    job->code = hp_frame_graph_wait(w->graph, ticket, &job->result, &job->err);
    gpu_thread_enters(w, STATE_WORK);
    if (job->code == HP_ERR_DEVICE_LOST) {
        /* The GPU may still copy from and into the frame's blocks (a frame past its fence's timeout): they
         * are never given back, so that no later request is handed memory a hung copy can still touch. */
        hp_error("worker: the frame's host memory is abandoned with the device (%s)", job->err.message);
        job->pixels = job->depth = job->image = (hp_host_mem){0};
        return;
    }
    /* The GPU is done with the frame's memory. */
    hp_host_mem_put(&job->pixels);
    hp_host_mem_put(&job->depth);
    if (job->code == HP_OK && w->test_lose_device_after && ++w->frames_finished == w->test_lose_device_after) {
        /* The test's lost device: the frame did finish, so its memory went back above (a real loss keeps
         * it, see above); the rest is what a real loss does. */
        job->code = hp_fail(&job->err, HP_ERR_DEVICE_LOST, "test_lose_device_after = %u: this frame is reported "
                            "as a lost device", w->test_lose_device_after);
        return;
    }
    if (job->code == HP_OK && job->result.png_gpu) {
        take_png_stream(job);
        return;
    }
    if (job->code != HP_OK || !job->result.pixels)
        return;
    job->image_size = job->result.image_bytes;
    if (job->image.block)
        return; /* result.pixels is in it already */
    if (!hp_host_mem_get(NULL, HP_MEM_READBACK, job->image_size, &job->image)) {
        job->code = hp_fail(&job->err, HP_ERR_OUT_OF_MEMORY, "out of host memory for the %zu-byte image",
                            job->image_size);
        return;
    }
    memcpy(job->image.ptr, job->result.pixels, job->image_size);
    job->result.pixels = job->image.ptr;
}

static void done(hp_worker *w, hp_job *job)
{
    activity(w);
    atomic_store(&w->graph_sizes, hp_frame_graph_cached_sizes(w->graph));
    atomic_store(&w->graph_bytes, hp_frame_graph_device_bytes(w->graph));
    if (job->code == HP_ERR_DEVICE_LOST && !w->device_lost) {
        hp_error("gpu: device lost: %s", job->err.message);
        w->device_lost = true;
        atomic_store(&w->holds_clocks, false); /* no hold runs on it again */
        pthread_mutex_lock(&w->lock);
        if (w->on_device_lost)
            w->on_device_lost(w->on_device_lost_ctx);
        pthread_mutex_unlock(&w->lock);
    }
    hand_to_pool(w, job);
}

static void set_in_flight(hp_worker *w, unsigned n)
{
    pthread_mutex_lock(&w->lock);
    w->in_flight = n;
    pthread_mutex_unlock(&w->lock);
}

/* How often an idle GPU thread has the host pool give back what a passed load kept (pipeline/host_pool.h), and
 * how many blocks at a time (then again 100 ms later). */
#define IDLE_TRIM_S 15
#define IDLE_TRIM_BLOCKS 8

/* Nothing queued, under the lock: waits for a job. While requests in flight hold bytes (a frame arriving
 * will soon be queued) the clocks are held, up to HOLD_IDLE_NS after the last frame came, was queued or
 * finished, and the wait ends at the next look at the hold. */
static void idle_wait(hp_worker *w)
{
    struct timespec until;
    uint64_t last = atomic_load(&w->last_activity_ns); /* before now: a newer store cannot make it later */
    if (atomic_load(&w->holds_clocks) && w->budget && hp_budget_used(w->budget) > 0 &&
        hp_now_ns() - last < HOLD_IDLE_NS) {
        pthread_mutex_unlock(&w->lock); /* a submission takes a while: the HTTP threads may queue meanwhile */
        bool holding = hold_clocks(w, &until);
        pthread_mutex_lock(&w->lock);
        if (w->waiting.count > 0 || w->stopping)
            return;
        if (holding) {
            pthread_cond_clockwait(&w->gpu_wake, &w->lock, CLOCK_MONOTONIC, &until);
            return;
        }
    }
    /* Also when a hold could not be kept: never a spin. At next_trim_ns the host pool gives back what a load
     * that has passed kept (hp_host_pool_trim): an idle daemon sees no block given back to do it. A few blocks
     * at a time (freeing pinned memory takes a while), so that a frame coming meanwhile waits for no more. */
    struct timespec trim_at = {.tv_sec = (time_t)(w->next_trim_ns / 1000000000ull),
                               .tv_nsec = (long)(w->next_trim_ns % 1000000000ull)};
    if (!w->host_pool || !w->next_trim_ns) {
        w->next_trim_ns = hp_now_ns() + IDLE_TRIM_S * 1000000000ull;
        pthread_cond_wait(&w->gpu_wake, &w->lock);
    } else if (pthread_cond_clockwait(&w->gpu_wake, &w->lock, CLOCK_MONOTONIC, &trim_at) == ETIMEDOUT) {
        pthread_mutex_unlock(&w->lock);
        bool more = hp_host_pool_trim(w->host_pool, IDLE_TRIM_BLOCKS);
        pthread_mutex_lock(&w->lock);
        w->next_trim_ns = hp_now_ns() + (more ? 100000000ull : IDLE_TRIM_S * 1000000000ull);
    }
}

/* The GPU thread keeps two frames in flight (HP_FRAMES_IN_FLIGHT): it copies the next frame into its
 * staging and submits it while the GPU runs the one before, then waits for that one and copies its image
 * out while the GPU runs the next. With nothing more queued it finishes the frame in flight at once. */
static void *gpu_main(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-gpu"); /* top -H, perf and /proc name it */
    hp_worker *w = arg;
    hp_job *flying = NULL;
    uint32_t flying_ticket = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        hp_job *job = next_job(&w->waiting);
        if (!job) {
            if (flying) {
                pthread_mutex_unlock(&w->lock);
                finish_job(w, flying, flying_ticket);
                set_in_flight(w, 0); /* before its answer can go out: /v1/gpu then reads it settled */
                done(w, flying);
                flying = NULL;
                pthread_mutex_lock(&w->lock);
                continue;
            }
            if (w->stopping)
                break;
            gpu_thread_enters(w, STATE_IDLE);
            idle_wait(w);
            gpu_thread_enters(w, STATE_WORK);
            continue;
        }
        pthread_mutex_unlock(&w->lock);
        if (flying && job->rows && !hp_rows_ready_result(job->rows, NULL, NULL)) {
            /* The next frame is still decoding, and this thread will wait for it: the frame in flight is
             * finished first, so that its image goes to the encoder without that wait. */
            finish_job(w, flying, flying_ticket);
            set_in_flight(w, 0);
            done(w, flying);
            flying = NULL;
        }
        uint32_t ticket;
        bool submitted = start_job(w, job, &ticket);
        set_in_flight(w, (flying ? 1u : 0u) + (submitted ? 1u : 0u));
        if (flying) {
            finish_job(w, flying, flying_ticket);
            set_in_flight(w, submitted ? 1u : 0u);
            done(w, flying);
        }
        if (submitted) {
            flying = job;
            flying_ticket = ticket;
        } else {
            flying = NULL;
            done(w, job);
        }
        pthread_mutex_lock(&w->lock); /* in_flight is set already: before each done() */
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void *pool_main(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-finish"); /* top -H, perf and /proc name it */
    hp_worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        hp_job *job = fifo_pop(&w->finished);
        if (!job) {
            /* Stop only when the GPU thread is gone and nothing is left to finish. */
            if (w->stopping && !w->gpu_started)
                break;
            pthread_cond_wait(&w->pool_wake, &w->lock);
            continue;
        }
        pthread_cond_signal(&w->pool_space);
        pthread_mutex_unlock(&w->lock);
        clock_gettime(CLOCK_MONOTONIC, &job->finish_at);
        job->finish(job);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

hp_code hp_worker_create(hp_frame_graph *graph, const hp_worker_config *config, hp_worker **out, hp_err *err)
{
    *out = NULL;
    hp_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    w->graph = graph;
    w->test_gpu_delay_ms = config ? config->test_gpu_delay_ms : 0;
    w->test_lose_device_after = config ? config->test_lose_device_after : 0;
    w->host_pool = config ? config->host_pool : NULL;
    w->clock_hold = config ? config->clock_hold : NULL;
    atomic_init(&w->holds_clocks, w->clock_hold != NULL);
    atomic_init(&w->last_activity_ns, 0);
    w->budget = config ? config->budget : NULL;
    unsigned depth = config && config->queue_depth ? config->queue_depth : 16;
    w->pool_size = config && config->finish_threads ? config->finish_threads : hp_usable_cpus();
    w->waiting.capacity = depth;
    w->finished_max = depth + 1;
    w->finished.capacity = w->finished_max + depth;
    w->waiting.items = calloc(depth, sizeof(hp_job *));
    w->finished.items = calloc(w->finished.capacity, sizeof(hp_job *));
    w->pool = calloc(w->pool_size, sizeof(pthread_t));
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->gpu_wake, NULL);
    pthread_cond_init(&w->pool_wake, NULL);
    pthread_cond_init(&w->pool_space, NULL);
    if (!w->waiting.items || !w->finished.items || !w->pool) {
        hp_worker_destroy(&w);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    w->state = STATE_WORK;
    w->state_since_ns = hp_now_ns();
    if (pthread_create(&w->gpu_thread, NULL, gpu_main, w) != 0) {
        hp_worker_destroy(&w);
        return hp_fail(err, HP_ERR_INTERNAL, "cannot start the GPU thread");
    }
    w->gpu_started = true;
    for (; w->pool_started < w->pool_size; w->pool_started++) {
        if (pthread_create(&w->pool[w->pool_started], NULL, pool_main, w) != 0) {
            hp_worker_destroy(&w);
            return hp_fail(err, HP_ERR_INTERNAL, "cannot start the finishing threads");
        }
    }
    hp_info("worker: queue of %u, %u finishing thread(s), %d frames in flight", depth, w->pool_size,
            HP_FRAMES_IN_FLIGHT);
    if (w->test_lose_device_after)
        hp_warn("worker: test_lose_device_after = %u: that frame will be reported as a lost device (a setting for "
                "tests only)", w->test_lose_device_after);
    if (w->test_gpu_delay_ms)
        hp_warn("worker: test_gpu_delay_ms = %u: every frame waits that long before the GPU runs it (a setting "
                "for tests only)", w->test_gpu_delay_ms);
    *out = w;
    return HP_OK;
}

void hp_worker_destroy(hp_worker **pw)
{
    hp_worker *w = *pw;
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->gpu_wake);
    pthread_mutex_unlock(&w->lock);
    if (w->gpu_started)
        pthread_join(w->gpu_thread, NULL);
    pthread_mutex_lock(&w->lock);
    w->gpu_started = false;
    pthread_cond_broadcast(&w->pool_wake);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->pool_started; i++)
        pthread_join(w->pool[i], NULL);
    pthread_cond_destroy(&w->gpu_wake);
    pthread_cond_destroy(&w->pool_wake);
    pthread_cond_destroy(&w->pool_space);
    pthread_mutex_destroy(&w->lock);
    free(w->waiting.items);
    free(w->finished.items);
    free(w->pool);
    free(w);
    *pw = NULL;
}

void hp_worker_device_lost(hp_worker *w, const char *why)
{
    hp_error("gpu: device lost outside the frame graph: %s", why);
    pthread_mutex_lock(&w->lock);
    if (w->on_device_lost)
        w->on_device_lost(w->on_device_lost_ctx);
    pthread_mutex_unlock(&w->lock);
}

void hp_worker_set_on_device_lost(hp_worker *w, void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&w->lock);
    w->on_device_lost = fn;
    w->on_device_lost_ctx = ctx;
    pthread_mutex_unlock(&w->lock);
}

void hp_worker_frame_coming(hp_worker *w)
{
    if (!atomic_load(&w->holds_clocks))
        return;
    activity(w);
    pthread_mutex_lock(&w->lock);
    pthread_cond_signal(&w->gpu_wake); /* its only waiter is the GPU thread, idle */
    pthread_mutex_unlock(&w->lock);
}

bool hp_worker_holds_clocks(hp_worker *w) { return atomic_load(&w->holds_clocks); }

bool hp_worker_submit(hp_worker *w, hp_job *job)
{
    clock_gettime(CLOCK_MONOTONIC, &job->queued_at);
    activity(w);
    pthread_mutex_lock(&w->lock);
    bool ok = !w->stopping && fifo_push(&w->waiting, job);
    if (ok)
        pthread_cond_signal(&w->gpu_wake);
    pthread_mutex_unlock(&w->lock);
    return ok;
}

bool hp_worker_cancel(hp_worker *w, hp_job *job)
{
    atomic_store(&job->cancelled, true);
    pthread_mutex_lock(&w->lock);
    /* Straight to the pool, ahead of the frames waiting to be encoded, which answers it and frees its memory.
     * The finished FIFO has room for the waiting jobs on top of what the GPU thread fills it to, but
     * cancelled ones can pile up while the pool is busy and new frames refill the queue: with no room left,
     * the job stays where it is, cancelled, and the GPU thread drops it when it comes to it. */
    bool waiting = w->finished.count < w->finished.capacity && fifo_remove(&w->waiting, job);
    if (waiting) {
        clock_gettime(CLOCK_MONOTONIC, &job->started_at);
        job->code = hp_fail(&job->err, HP_ERR_INVALID_ARGUMENT, "the client went away while the frame waited in "
                            "the queue");
        fifo_push_front(&w->finished, job);
        pthread_cond_signal(&w->pool_wake);
    }
    pthread_mutex_unlock(&w->lock);
    if (waiting)
        hp_info("worker: took a queued frame out of the queue: its client went away");
    return waiting;
}

unsigned hp_worker_queue_depth(hp_worker *w)
{
    pthread_mutex_lock(&w->lock);
    unsigned n = w->waiting.count;
    pthread_mutex_unlock(&w->lock);
    return n;
}

unsigned hp_worker_in_flight(hp_worker *w)
{
    pthread_mutex_lock(&w->lock);
    unsigned n = w->in_flight;
    pthread_mutex_unlock(&w->lock);
    return n;
}

unsigned hp_worker_queue_capacity(hp_worker *w) { return w->waiting.capacity; }

void hp_worker_gpu_thread_time(hp_worker *w, hp_gpu_thread_time *out)
{
    /* The totals as of the thread's last change of state: a state it has been in for long (idle between
     * requests) shows when it leaves it. */
    double s[GPU_THREAD_STATES];
    for (int i = 0; i < GPU_THREAD_STATES; i++)
        s[i] = (double)atomic_load(&w->state_ns[i]) * 1e-9;
    *out = (hp_gpu_thread_time){.idle = s[STATE_IDLE], .decode_wait = s[STATE_DECODE_WAIT], .gpu_wait = s[STATE_GPU_WAIT],
                                .encoder_wait = s[STATE_ENCODER_WAIT], .work = s[STATE_WORK]};
}

void hp_worker_graph_usage(hp_worker *w, uint32_t *sizes, uint64_t *device_bytes)
{
    *sizes = atomic_load(&w->graph_sizes);
    *device_bytes = atomic_load(&w->graph_bytes);
}

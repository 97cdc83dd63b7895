/* The job queue and the threads that drain it: one GPU thread that owns the frame graph (the only
 * thread that records and submits work after start-up; the HTTP threads only take mapped memory from the
 * host pool), and a pool of CPU threads that finish jobs (encoding).
 *
 *   HTTP thread:  decode -> hp_worker_submit()            (refused when the queue is full: 429)
 *   GPU thread:   submit (upload, every stage, read-back) -> wait -> hand to the pool
 *   pool thread:  job->finish(job): encode and answer
 *
 * A job past its deadline, or cancelled by its client going away, is dropped where it is found and
 * finished with the reason, never run. Frames in flight on the GPU: HP_FRAMES_IN_FLIGHT; with a host
 * pool the GPU uploads straight from the memory the frame was decoded into and reads the image back into
 * memory the encoder reads, so the GPU thread copies nothing. */
#ifndef HP_WORKER_H
#define HP_WORKER_H

#include <stdbool.h>

#include "api/frames/job.h"
#include "common/error.h"
#include "pipeline/frame_graph.h"
#include "pipeline/host_pool.h"

typedef struct hp_worker_config {
    unsigned queue_depth;   /* jobs waiting for the GPU at most; beyond it submit refuses, default 16 */
    unsigned finish_threads; /* pool threads for finishing (encoding), default the number of cores */
    /* For tests only (the test_gpu_delay_ms setting): the GPU thread sleeps this long before each frame
     * it runs (after the frame's deadline and client were checked, as if the GPU took that much longer),
     * so end-to-end tests of dropped, expired and drained frames hold on a GPU of any speed. 0: off. */
    unsigned test_gpu_delay_ms;
    /* For tests only (the test_lose_device_after setting): the Nth frame the GPU finishes is reported as a
     * lost device, as a frame past its fence's timeout is. 0: off. */
    unsigned test_lose_device_after;
    /* Where the images are read back into (the same pool the submitters take frames from), or NULL
     * for the frame graph's own read-back memory and a copy. */
    hp_host_pool *host_pool;
    /* Holds of the GPU's clocks (pipeline/clock_hold.h), or NULL for none: the GPU thread keeps one in flight
     * while it waits for a frame's decoding, and while idle as long as requests in flight hold bytes of
     * `budget` (a frame arriving, decoding, queued or being answered). The worker uses both, the caller
     * destroys them after hp_worker_destroy. */
    struct hp_clock_hold *clock_hold;
    const struct hp_budget *budget;
} hp_worker_config;

typedef struct hp_worker hp_worker;

/* Takes over graph (the worker's GPU thread drives it from now on; the caller keeps ownership and
 * destroys it after hp_worker_destroy). */
hp_code hp_worker_create(hp_frame_graph *graph, const hp_worker_config *config, hp_worker **out, hp_err *err);
/* Finishes every queued job (those past their deadline are dropped), stops the threads, frees. */
void hp_worker_destroy(hp_worker **worker);

/* Who is told, once, on the GPU thread, when a frame reports the device lost: no frame runs on it again
 * (queued ones are answered device_lost at once) and the daemon takes itself out of rotation. Set and
 * cleared under the worker's lock, so that the caller can clear it (NULL) before ctx goes away while frames
 * still finish, as they do after the HTTP server is destroyed. */
void hp_worker_set_on_device_lost(hp_worker *worker, void (*fn)(void *ctx), void *ctx);
/* Another thread's submission found the device lost (an EXR frame's inflate, pipeline/exr_zip_gpu.h): the
 * same callback, so that the daemon leaves the rotation; the GPU thread finds out at its next frame. */
void hp_worker_device_lost(hp_worker *worker, const char *why);

/* A frame has begun to arrive (its body's first bytes): an idle GPU thread starts holding the clocks
 * (hp_worker_config.clock_hold) before the frame is queued. Any thread; nothing without holds. */
void hp_worker_frame_coming(hp_worker *worker);

/* Whether the GPU thread holds the clocks while frames come: a hold was given and none has failed. */
bool hp_worker_holds_clocks(hp_worker *worker);

/* Queues a job. Returns false when the queue is full (the caller answers 429) or the worker is
 * stopping; the job is then still the caller's. */
bool hp_worker_submit(hp_worker *worker, hp_job *job);

/* The job's client went away: marks it cancelled and, when it is still waiting, takes it out of the queue
 * and hands it to the finishing pool at once (its finish answers it and frees its memory): true. False when
 * it is not waiting (on the GPU, or finished): it is then finished as it comes, cancelled. */
bool hp_worker_cancel(hp_worker *worker, hp_job *job);

/* Jobs waiting and the GPU's current state, for /v1/gpu and /metrics. */
unsigned hp_worker_queue_depth(hp_worker *worker);
unsigned hp_worker_in_flight(hp_worker *worker);
unsigned hp_worker_queue_capacity(hp_worker *worker);
/* The frame graph's kept sizes and their device memory, as of the last frame (the graph itself is the
 * GPU thread's). */
void hp_worker_graph_usage(hp_worker *worker, uint32_t *sizes, uint64_t *device_bytes);

/* Where the GPU thread's time has gone since start, in seconds: what bounds the frames per second. The
 * thread is the one serial step of a frame's way (api/ decodes and encodes on many threads), so when it
 * is never idle, the time it spends in each state is what to shorten. */
typedef struct hp_gpu_thread_time {
    double idle;         /* no frame queued */
    double decode_wait;  /* the next frame queued but still arriving or decoding (wait_decoded) */
    double gpu_wait;     /* the GPU still running the frame in flight (its fence) */
    double encoder_wait; /* the finishing pool full: the encoders behind (back-pressure) */
    double work;         /* everything else: submitting, copies, bookkeeping */
} hp_gpu_thread_time;
void hp_worker_gpu_thread_time(hp_worker *worker, hp_gpu_thread_time *out);

#endif

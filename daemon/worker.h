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

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/rows_ready.h"
#include "pipeline/frame_graph.h"
#include "pipeline/host_pool.h"

typedef struct hp_job hp_job;

struct hp_job {
    /* Input, set by the submitter. pixels (hp_host_mem_get, HP_MEM_UPLOAD): tightly packed desc.format
     * rows; a block of the worker's host pool is uploaded from directly, anything else copied into the
     * frame graph's staging. The worker gives both back once the GPU has them. */
    hp_frame_desc desc;
    hp_host_mem pixels;
    hp_host_mem depth;           /* width * height floats for depth of field, or empty */
    hp_frame_params params;
    struct timespec deadline;    /* CLOCK_MONOTONIC; a job not started by then is dropped (504) */
    _Atomic bool cancelled;      /* the client went away: drop it */
    /* Asked just before the job runs; true when its client has closed the connection (may be NULL). */
    bool (*client_gone)(hp_job *job);
    /* A frame still being decoded into pixels when the job was submitted, or NULL (common/rows_ready.h):
     * the GPU thread uploads its rows as they become final and runs the frame once decoding has finished.
     * A decoding failure fails the job with decode_failed set and the decoder's code and message. The
     * submitter keeps the decoder alive, and must have it finished before it lets go of pixels. */
    hp_rows_ready *rows;
    /* Called on a pool thread when the job is done (run, failed or dropped); owns the job from then on. */
    void (*finish)(hp_job *job);
    void *user;

    /* Output, set by the worker. */
    hp_code code;                /* HP_OK, or why not: see err */
    hp_err err;
    bool expired;                /* dropped past its deadline */
    bool decode_failed;          /* rows: the decoding failed (code and err are the decoder's) */
    hp_frame_result result;      /* statistics, tone state, GPU timings (result.pixels: see image) */
    hp_host_mem image;           /* the output image (result.pixels points into it): the read-back block
                                  * itself, or a copy; empty when analyze_only or failed. The finisher gives
                                  * it back (hp_job_release) */
    size_t image_size;
    struct timespec queued_at, started_at, gpu_done_at, finish_at;
};

/* Gives back whatever memory the job still holds (frame, depth, image); safe to call more than once. */
void hp_job_release(hp_job *job);

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

/* Queues a job. Returns false when the queue is full (the caller answers 429) or the worker is
 * stopping; the job is then still the caller's. */
bool hp_worker_submit(hp_worker *worker, hp_job *job);

/* Jobs waiting and the GPU's current state, for /v1/gpu and /metrics. */
unsigned hp_worker_queue_depth(hp_worker *worker);
unsigned hp_worker_in_flight(hp_worker *worker);
unsigned hp_worker_queue_capacity(hp_worker *worker);
/* The frame graph's kept sizes and their device memory, as of the last frame (the graph itself is the
 * GPU thread's). */
void hp_worker_graph_usage(hp_worker *worker, uint32_t *sizes, uint64_t *device_bytes);

#endif

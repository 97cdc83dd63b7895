/* The job queue and the threads that drain it: one GPU thread that owns the frame graph (the only
 * thread that touches Vulkan after start-up), and a pool of CPU threads that finish jobs (encoding).
 *
 *   HTTP thread:  decode -> hp_worker_submit()            (refused when the queue is full: 429)
 *   GPU thread:   copy into staging -> run every stage -> copy the image out -> hand to the pool
 *   pool thread:  job->finish(job): encode and answer
 *
 * A job past its deadline, or cancelled by its client going away, is dropped where it is found and
 * finished with the reason, never run. Frames in flight on the GPU: one at a time for now (issue 6
 * overlaps upload, compute and download across frames). */
#ifndef HP_WORKER_H
#define HP_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "common/clock.h"
#include "common/error.h"
#include "pipeline/frame_graph.h"

typedef struct hp_job hp_job;

struct hp_job {
    /* Input, set by the submitter. pixels is from hp_bigbuf_get (common/bigbuf.h), tightly packed
     * desc.format rows; the worker puts it back once copied to the GPU. */
    hp_frame_desc desc;
    void *pixels;
    float *depth;                /* width * height floats for depth of field (hp_bigbuf_get), or NULL; the
                                  * worker puts it back once copied */
    hp_frame_params params;
    struct timespec deadline;    /* CLOCK_MONOTONIC; a job not started by then is dropped (504) */
    _Atomic bool cancelled;      /* the client went away: drop it */
    /* Asked just before the job runs; true when its client has closed the connection (may be NULL). */
    bool (*client_gone)(hp_job *job);
    /* Called on a pool thread when the job is done (run, failed or dropped); owns the job from then on. */
    void (*finish)(hp_job *job);
    void *user;

    /* Output, set by the worker. */
    hp_code code;                /* HP_OK, or why not: see err */
    hp_err err;
    bool expired;                /* dropped past its deadline */
    hp_frame_result result;      /* statistics, tone state, GPU timings (result.pixels: see image) */
    void *image;                 /* copy of the output image (hp_bigbuf_get); NULL when analyze_only or failed */
    size_t image_size;
    struct timespec queued_at, started_at, gpu_done_at, finish_at;
};

typedef struct hp_worker_config {
    unsigned queue_depth;   /* jobs waiting for the GPU at most; beyond it submit refuses, default 16 */
    unsigned finish_threads; /* pool threads for finishing (encoding), default the number of cores */
    /* For tests only (the test_gpu_delay_ms setting): the GPU thread sleeps this long before each frame
     * it runs (after the frame's deadline and client were checked, as if the GPU took that much longer),
     * so end-to-end tests of dropped, expired and drained frames hold on a GPU of any speed. 0: off. */
    unsigned test_gpu_delay_ms;
} hp_worker_config;

typedef struct hp_worker hp_worker;

/* Takes over graph (the worker's GPU thread drives it from now on; the caller keeps ownership and
 * destroys it after hp_worker_destroy). */
hp_code hp_worker_create(hp_frame_graph *graph, const hp_worker_config *config, hp_worker **out, hp_err *err);
/* Finishes every queued job (those past their deadline are dropped), stops the threads, frees. */
void hp_worker_destroy(hp_worker **worker);

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

/* A job: one frame that a request hands to the daemon's queue (api/ builds it, daemon/worker.c runs it, a
 * finishing thread gives it back through its finish function). The contract between the two sides, kept
 * on the side that makes it: api/ hands jobs over through hp_http_backend (api/http/http.h), whose functions
 * daemon/ provides at start-up, and never includes daemon/.
 *
 *   HTTP thread:   decode into pixels -> backend submit (refused when the queue is full: 429)
 *   GPU thread:    upload, every stage, read-back into image
 *   pool thread:   job->finish(job): encode and answer
 *
 * A job whose client has gone is cancelled (backend cancel): taken out of the queue at once, or, on the
 * GPU already, finished as cancelled when it comes back. */
#ifndef HP_JOB_H
#define HP_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

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
    bool decoding_on_gpu;        /* rows is a GPU inflate's (pipeline/exr_zip_gpu.h): frames ready behind it go first */
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
static inline void hp_job_release(hp_job *job)
{
    hp_host_mem_put(&job->pixels);
    hp_host_mem_put(&job->depth);
    hp_host_mem_put(&job->image);
}

#endif

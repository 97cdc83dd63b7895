/* A run over a shot's frames: a pool of threads, each with its own connection, taking the next frame until
 * none is left or the run is stopped (SIGINT), with progress on the terminal (one line redrawn in place) or
 * a line per frame in a log (render/render.c and analyze use it). */
#ifndef HP_CLIENT_RUN_H
#define HP_CLIENT_RUN_H

#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "client/frames.h"
#include "client/transport.h"

typedef struct hp_run hp_run;

/* What became of one frame. */
typedef enum hp_frame_outcome {
    HP_FRAME_DONE,
    HP_FRAME_FAILED,   /* why says why, in the log and the summary */
    HP_FRAME_NOT_DONE, /* the run was stopped while the frame waited (SIGINT): --resume does it */
} hp_frame_outcome;

/* Does one frame on the thread's client. fatal: stop the whole run (a refused token, a daemon that no longer
 * answers: every frame would fail the same way). */
typedef hp_frame_outcome (*hp_frame_work)(hp_run *run, hp_client *client, size_t index, char *why,
                                          size_t why_size, bool *fatal);

struct hp_run {
    const hp_frame_list *frames;
    const char *server, *token;
    unsigned jobs;
    const char *phase;               /* "analysing", "rendering": the progress line's word */
    hp_frame_work work;
    void *user;
    _Atomic int *stop;     /* SIGINT: no new frame is taken */
    /* Results, one per frame (filled by the run). */
    bool *done;
    char **failure;                  /* the reason, or NULL */
    bool fatal;                      /* a frame said stop */
    char fatal_why[512];
    size_t finished, failed, skipped;
    /* Internal. */
    pthread_mutex_t lock;
    size_t next;
    double started;
};

/* Makes the per-frame results; false when out of memory. */
bool hp_run_init(hp_run *run, const hp_frame_list *frames);
/* Runs work on every frame not skipped; false when the run could not start (threads, connections). */
bool hp_run_frames(hp_run *run);
void hp_run_free(hp_run *run);

/* Marks a frame as skipped (its output exists: --resume) before the run. */
void hp_run_skip(hp_run *run, size_t index);

/* Seconds on a monotonic clock. */
double hp_now(void);

#endif

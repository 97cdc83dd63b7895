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
#include "client/servers.h"
#include "client/transport.h"

typedef struct hp_run hp_run;

/* What became of one frame. */
typedef enum hp_frame_outcome {
    HP_FRAME_DONE,
    HP_FRAME_FAILED,   /* why says why, in the log and the summary */
    HP_FRAME_NOT_DONE, /* the run was stopped while the frame waited (SIGINT): --resume does it */
} hp_frame_outcome;

/* Does one frame on the thread's client. fatal: 0, or the exit status that stops the whole run (a refused
 * token, a daemon that no longer answers: every frame would fail the same way; cli.h's HP_EXIT_*). */
typedef hp_frame_outcome (*hp_frame_work)(hp_run *run, hp_client *client, size_t index, char *why,
                                          size_t why_size, int *fatal);

/* The waits of a run, for its summary: retries after no answer or a 5xx, and answers 429 and 503 waited out. */
typedef struct hp_retry_counts {
    size_t failures, busy_429, busy_503;
} hp_retry_counts;

struct hp_run {
    const hp_frame_list *frames;
    hp_servers *servers;             /* where the frames go (client/servers.h) */
    const char *token;
    unsigned jobs;
    const char *phase;               /* "analysing", "rendering": the progress line's word */
    hp_frame_work work;
    void *user;
    _Atomic int *stop;     /* SIGINT: no new frame is taken */
    /* Results, one per frame (filled by the run). */
    bool *done;
    char **failure;                  /* the reason, or NULL */
    size_t *server_of;               /* the server that gave the frame's last answer, SIZE_MAX none */
    int fatal;                       /* a frame said stop: its exit status; 0 none */
    char fatal_why[512];
    size_t finished, failed, skipped;
    hp_retry_counts waits;
    /* Internal. */
    pthread_mutex_t lock;
    size_t next;
    double started;
    bool terminal;                   /* stderr is one: the progress line, else a line per frame and per wait */
    char waiting[1400];              /* the last wait, on the progress line until a frame finishes */
};

/* Makes the per-frame results; false when out of memory. */
bool hp_run_init(hp_run *run, const hp_frame_list *frames);
/* Runs work on every frame not skipped; false when the run could not start (threads, connections). */
bool hp_run_frames(hp_run *run);
void hp_run_free(hp_run *run);

/* Marks a frame as skipped (its output exists: --resume) before the run. */
void hp_run_skip(hp_run *run, size_t index);

/* A retry of frame i's exchange (hp_retry_policy's on_retry): counted, and said on the progress line or in a
 * line of the log, with the servers when the run has several. */
void hp_run_note_retry(hp_run *run, size_t i, const hp_retry_note *note);

/* "; 3 retries: 1 after no answer or a 5xx, 2 answers 429, 0 answers 503" for a summary line; "" if none. */
void hp_retry_counts_text(const hp_retry_counts *c, char *out, size_t size);

#endif

/* A shot through the daemon: the analysis pass (/v1/analyze on every frame, for the exposure lock and for
 * hdrpost analyze) and the render pass (/v1/render on every frame, each output written whole). */
#ifndef HP_CLIENT_RENDER_H
#define HP_CLIENT_RENDER_H

#include <jansson.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stddef.h>

#include "client/frames.h"
#include "client/run.h"
#include "client/shot.h"

typedef struct hp_shot_job {
    const hp_frame_list *frames;
    const char *query;      /* the run's parameters, checked (client/params.h) */
    const char *out_dir;    /* render: where DIR/<name>.<extension> go */
    const char *extension;  /* "webp", "png", "jpg" or "avif": output.format's */
    const char *accept;     /* NULL, or "application/json" for analyze */
    unsigned retries;
    double max_wait_s;
    /* Per frame. */
    hp_frame_stats *stats;  /* from the analysis */
    json_t **analyses;      /* each frame's /v1/analyze answer */
    hp_frame_lock *locks;   /* the exposure lock (NULL: none), set by the caller */
    mode_t file_mode;       /* outputs' permissions: 0666 less the umask */
    char (*timings)[512];   /* Server-Timing of the render */
    long *statuses;         /* the last HTTP status of the render */
} hp_shot_job;

/* Before any thread runs (it reads the umask). */
bool hp_shot_job_init(hp_shot_job *job);

/* Written to a unique temporary name beside path (mkstemp: hosts may share the directory), flushed and
 * renamed: a file that exists is whole. why says what failed. */
bool hp_write_atomically(const char *path, const uint8_t *data, size_t len, mode_t mode, char *why, size_t why_size);
void hp_shot_job_free(hp_shot_job *job);

bool hp_shot_analyze(hp_shot_job *job, hp_run *run);
bool hp_shot_render(hp_shot_job *job, hp_run *run);

/* Whether frame i's output is there (written whole, so complete). */
bool hp_shot_output_exists(const hp_shot_job *job, size_t i);

#endif

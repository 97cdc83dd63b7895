/* Group commit: work that arrives while the batches run waits, and the next batch takes everything waiting by
 * then; at most `lanes` batches at a time (one unless hp_group_commit_lanes says more). The first caller to
 * find a lane free leads: it runs the batch on its own thread and wakes the others, one of which leads the
 * next. A caller alone goes at once; callers under load go together, in batches as large as the load makes
 * them, with no timer.
 *
 * Why: EXR ZIP frames inflated on the GPU from several decoding threads, each its own submission, ran 2.5
 * times slower than the same frames in one (pipeline/exr_zip_gpu.c, docs/BENCHMARKS.md "Frames' chunks
 * together"). The name is the databases' (a log's writers sharing one
 * flush). */
#ifndef HP_GROUP_COMMIT_H
#define HP_GROUP_COMMIT_H

#include <pthread.h>
#include <stdbool.h>

/* A caller's piece of work: the caller's own memory (on its stack, say), embedded in what run reads. */
typedef struct hp_group_item {
    struct hp_group_item *next; /* the batch's next, in arrival order; NULL: the last */
    bool taken;                 /* in a batch, running */
    bool done;
} hp_group_item;

/* Runs a batch: items from `first` along next, at least one. Called with no lock held. */
typedef void (*hp_group_run)(void *ctx, hp_group_item *first);

typedef struct hp_group_commit {
    pthread_mutex_t lock;
    pthread_cond_t batch_done;
    hp_group_item *waiting, **waiting_tail; /* the next batch's items, in arrival order */
    unsigned running;                       /* batches running */
    unsigned lanes;                         /* at most this many at once */
    unsigned alone;                         /* hp_group_commit_alone callers waiting or running */
    unsigned long batches, items;           /* run so far (for logs and tests; read under lock) */
} hp_group_commit;

void hp_group_commit_init(hp_group_commit *g);
void hp_group_commit_destroy(hp_group_commit *g);

/* At most `lanes` batches at once (at least 1). */
void hp_group_commit_lanes(hp_group_commit *g, unsigned lanes);

/* Returns once item has been run, in this caller's batch or another's. */
void hp_group_commit_join(hp_group_commit *g, hp_group_item *item, hp_group_run run, void *ctx);

/* Runs the batch from first (linked by next) on its own, between the others: after the batches running,
 * before the next, none beside it. For benchmarks and tests that want a batch of a given size. */
void hp_group_commit_alone(hp_group_commit *g, hp_group_item *first, hp_group_run run, void *ctx);

/* Batches running now (a batch's run sees itself counted: more than 1, another beside it). */
unsigned hp_group_commit_running(hp_group_commit *g);

/* Batches and items run so far. */
void hp_group_commit_counts(hp_group_commit *g, unsigned long *batches, unsigned long *items);

#endif

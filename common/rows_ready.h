/* Rows of a frame that are final while the rest is still being decoded: the decoder marks pieces (an EXR
 * chunk's rows) done in any order; a reader waits for the rows [0, n) to be done, or for the end.
 *
 * Why: the daemon decodes a raw EXR body while it arrives (api/frames/render.c), and at its last byte a quarter of
 * the frame is typically still being decoded. The GPU thread takes the frame at that moment and uploads
 * the rows that are final (pipeline/frame_graph.h hp_frame_graph_upload_part) while the decoding
 * finishes, so that only the last rows' upload is left when it does. */
#ifndef HP_ROWS_READY_H
#define HP_ROWS_READY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/error.h"

typedef enum hp_rows_state {
    HP_ROWS_PREPARING = 0, /* the decoder has not begun writing (probing, taking memory) */
    HP_ROWS_DECODING,      /* it writes the frame and will call hp_rows_ready_finish */
    HP_ROWS_FINISHED,      /* done: code says how */
    HP_ROWS_ABANDONED,     /* it gave up before writing anything: nothing more will happen */
} hp_rows_state;

typedef struct hp_rows_ready {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    hp_rows_state state;
    uint32_t height, piece_rows; /* from hp_rows_ready_layout; 0: rows are known only at the end */
    uint32_t pieces, frontier;   /* pieces [0, frontier) are done */
    uint8_t *done;               /* per piece */
    hp_code code;                /* once finished */
    hp_err err;
} hp_rows_ready;

void hp_rows_ready_init(hp_rows_ready *t);
void hp_rows_ready_destroy(hp_rows_ready *t);

/* The decoder: it begins writing (HP_ROWS_DECODING), or gives up before it (HP_ROWS_ABANDONED). */
void hp_rows_ready_start(hp_rows_ready *t);
void hp_rows_ready_abandon(hp_rows_ready *t);
/* The decoder, once it knows: height rows in pieces of piece_rows (the last may be shorter). Without it
 * (or when its memory cannot be had) rows become ready only at the end. */
void hp_rows_ready_layout(hp_rows_ready *t, uint32_t height, uint32_t piece_rows);
/* The decoder: piece k's rows are final. Any order, any thread. */
void hp_rows_ready_piece(hp_rows_ready *t, uint32_t k);
/* The decoder: done, with its outcome (err may be NULL when code is HP_OK). Every row is ready when OK. */
void hp_rows_ready_finish(hp_rows_ready *t, hp_code code, const hp_err *err);

/* A reader: waits until the decoder has begun or given up, and says which (never HP_ROWS_PREPARING). */
hp_rows_state hp_rows_ready_wait_start(hp_rows_ready *t);
/* A reader: waits until rows [0, rows) are ready or the decoding has finished; returns the rows ready
 * then (all of them when finished with HP_OK, or whatever was ready when it failed) and *finished. */
uint32_t hp_rows_ready_wait(hp_rows_ready *t, uint32_t rows, bool *finished);
/* The same, giving up at `until` (CLOCK_MONOTONIC; NULL: never), when fewer rows may be ready. */
uint32_t hp_rows_ready_wait_until(hp_rows_ready *t, uint32_t rows, const struct timespec *until, bool *finished);
/* Finished, and how (*code, *err copied when not NULL); false while still decoding. */
bool hp_rows_ready_result(hp_rows_ready *t, hp_code *code, hp_err *err);

#endif

/* Rows ready while a frame decodes (rows_ready.h). */
#include "common/rows_ready.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void hp_rows_ready_init(hp_rows_ready *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
}

void hp_rows_ready_destroy(hp_rows_ready *t)
{
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    free(t->done);
    t->done = NULL;
}

static void set_state(hp_rows_ready *t, hp_rows_state state)
{
    pthread_mutex_lock(&t->lock);
    t->state = state;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

void hp_rows_ready_start(hp_rows_ready *t) { set_state(t, HP_ROWS_DECODING); }
void hp_rows_ready_abandon(hp_rows_ready *t) { set_state(t, HP_ROWS_ABANDONED); }

void hp_rows_ready_layout(hp_rows_ready *t, uint32_t height, uint32_t piece_rows)
{
    if (height == 0 || piece_rows == 0)
        return;
    uint32_t pieces = (height + piece_rows - 1) / piece_rows;
    uint8_t *done = calloc(pieces, 1);
    if (!done)
        return; /* rows are then ready at the end, as without a layout */
    pthread_mutex_lock(&t->lock);
    free(t->done);
    t->done = done;
    t->height = height;
    t->piece_rows = piece_rows;
    t->pieces = pieces;
    t->frontier = 0;
    pthread_mutex_unlock(&t->lock);
}

void hp_rows_ready_piece(hp_rows_ready *t, uint32_t k)
{
    pthread_mutex_lock(&t->lock);
    if (t->done && k < t->pieces) {
        t->done[k] = 1;
        uint32_t before = t->frontier;
        while (t->frontier < t->pieces && t->done[t->frontier])
            t->frontier++;
        if (t->frontier != before)
            pthread_cond_broadcast(&t->changed);
    }
    pthread_mutex_unlock(&t->lock);
}

void hp_rows_ready_finish(hp_rows_ready *t, hp_code code, const hp_err *err)
{
    pthread_mutex_lock(&t->lock);
    t->state = HP_ROWS_FINISHED;
    t->code = code;
    if (err)
        t->err = *err;
    if (code == HP_OK)
        t->frontier = t->pieces;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

hp_rows_state hp_rows_ready_wait_start(hp_rows_ready *t)
{
    pthread_mutex_lock(&t->lock);
    while (t->state == HP_ROWS_PREPARING)
        pthread_cond_wait(&t->changed, &t->lock);
    hp_rows_state s = t->state;
    pthread_mutex_unlock(&t->lock);
    return s;
}

static uint32_t ready_rows(const hp_rows_ready *t)
{
    if (t->state == HP_ROWS_FINISHED && t->code == HP_OK)
        return UINT32_MAX; /* every row, whatever the layout */
    uint64_t rows = (uint64_t)t->frontier * t->piece_rows;
    return rows < t->height ? (uint32_t)rows : t->height;
}

uint32_t hp_rows_ready_wait(hp_rows_ready *t, uint32_t rows, bool *finished)
{
    return hp_rows_ready_wait_until(t, rows, NULL, finished);
}

uint32_t hp_rows_ready_wait_until(hp_rows_ready *t, uint32_t rows, const struct timespec *until, bool *finished)
{
    pthread_mutex_lock(&t->lock);
    while (t->state != HP_ROWS_FINISHED && t->state != HP_ROWS_ABANDONED && ready_rows(t) < rows) {
        if (!until)
            pthread_cond_wait(&t->changed, &t->lock);
        else if (pthread_cond_clockwait(&t->changed, &t->lock, CLOCK_MONOTONIC, until) == ETIMEDOUT)
            break;
    }
    uint32_t ready = ready_rows(t);
    *finished = t->state == HP_ROWS_FINISHED || t->state == HP_ROWS_ABANDONED;
    pthread_mutex_unlock(&t->lock);
    return ready;
}

bool hp_rows_ready_result(hp_rows_ready *t, hp_code *code, hp_err *err)
{
    pthread_mutex_lock(&t->lock);
    bool finished = t->state == HP_ROWS_FINISHED;
    if (finished && code)
        *code = t->code;
    if (finished && err)
        *err = t->err;
    pthread_mutex_unlock(&t->lock);
    return finished;
}
